//! `fast.rs` against OpenSSL itself: for leaves of every shape the module
//! handles or must hand over, its answer is never "verifies" where
//! OpenSSL's chain check, run as a verified-chain hit runs it, refuses; and
//! for ordinary leaves it does answer (so the fast way is taken).

use openssl::asn1::{Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::stack::Stack;
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName, SubjectKeyIdentifier,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509Builder, X509Extension, X509Name, X509NameBuilder, X509StoreContext, X509};

use super::*;

fn ec(nid: Nid) -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap()
}

fn name(parts: &[(&str, &str)]) -> X509Name {
    let mut n = X509NameBuilder::new().unwrap();
    for (k, v) in parts {
        n.append_entry_by_text(k, v).unwrap();
    }
    n.build()
}

fn ext(oid: &str, critical: bool, value: &[u8]) -> X509Extension {
    let oid = Asn1Object::from_str(oid).unwrap();
    X509Extension::new_from_der(&oid, critical, &Asn1OctetString::new_from_bytes(value).unwrap()).unwrap()
}

/// A CA (root-signed intermediate with SKI and AKI) and its key.
struct Ca {
    cert: X509,
    key: PKey<Private>,
}

fn ca(key: PKey<Private>) -> Ca {
    let n = name(&[("O", "Fast Test"), ("CN", "Fast  Test CA")]);
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(7).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&n).unwrap();
    b.set_issuer_name(&n).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::days_from_now(3650).unwrap()).unwrap();
    b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
    b.append_extension(KeyUsage::new().critical().key_cert_sign().build().unwrap()).unwrap();
    let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None)).unwrap();
    b.append_extension(ski).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    Ca { cert: b.build(), key }
}

/// How to make one test leaf.
struct Leaf<'a> {
    subject: X509Name,
    issuer_name: Option<X509Name>,
    key: PKey<Private>,
    signer: Option<&'a PKey<Private>>,
    digest: MessageDigest,
    aki: bool,
    extensions: Vec<X509Extension>,
}

impl Leaf<'_> {
    fn new() -> Self {
        Leaf {
            subject: name(&[("CN", "leaf.fast.test")]),
            issuer_name: None,
            key: ec(Nid::X9_62_PRIME256V1),
            signer: None,
            digest: MessageDigest::sha256(),
            aki: true,
            extensions: Vec::new(),
        }
    }

    fn build(self, ca: &Ca) -> Vec<u8> {
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(99).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&self.subject).unwrap();
        b.set_issuer_name(self.issuer_name.as_deref().unwrap_or(ca.cert.subject_name())).unwrap();
        b.set_pubkey(&self.key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(30).unwrap()).unwrap();
        let san = SubjectAlternativeName::new().dns("leaf.fast.test").build(&b.x509v3_context(Some(&ca.cert), None));
        b.append_extension(san.unwrap()).unwrap();
        b.append_extension(ExtendedKeyUsage::new().server_auth().build().unwrap()).unwrap();
        if self.aki {
            let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&ca.cert), None));
            b.append_extension(aki.unwrap()).unwrap();
        }
        for e in self.extensions {
            b.append_extension(e).unwrap();
        }
        b.sign(self.signer.unwrap_or(&ca.key), self.digest).unwrap();
        b.build().to_der().unwrap()
    }
}

/// OpenSSL's answer, as a verified-chain hit asks it: the CA the only
/// (partial-chain) trust anchor, the chain check's flags.
fn openssl_verifies(ca: &Ca, leaf_der: &[u8]) -> bool {
    let Ok(leaf) = X509::from_der(leaf_der) else { return false };
    let mut b = X509StoreBuilder::new().unwrap();
    b.set_flags(crate::chain::VERIFY_FLAGS | X509VerifyFlags::PARTIAL_CHAIN).unwrap();
    b.add_cert(ca.cert.clone()).unwrap();
    let store = b.build();
    let mut ctx = X509StoreContext::new().unwrap();
    ctx.init(&store, &leaf, &Stack::new().unwrap(), |c| Ok(c.verify_cert()? && c.chain().is_some_and(|c| c.len() == 2)))
        .unwrap()
}

/// fast.rs's answer.
fn fast_verifies(ca: &Ca, leaf_der: &[u8]) -> bool {
    let issuer = Issuer::new(&ca.cert, &ca.cert.to_der().unwrap()).expect("a fast issuer");
    let Ok(leaf) = Certificate::from_der(leaf_der) else { return false };
    leaf_verifies(&issuer, &leaf, leaf_der)
}

/// Both answers for one leaf: fast.rs never says yes where OpenSSL says no;
/// returns (fast, openssl).
fn both(ca: &Ca, leaf: Leaf<'_>) -> (bool, bool) {
    let der = leaf.build(ca);
    let (fast, full) = (fast_verifies(ca, &der), openssl_verifies(ca, &der));
    assert!(!fast || full, "fast.rs accepted a leaf OpenSSL refuses");
    (fast, full)
}

#[test]
fn ordinary_leaves_are_judged_here_as_openssl_judges_them() {
    for ca in [
        ca(ec(Nid::X9_62_PRIME256V1)),
        ca(ec(Nid::SECP384R1)),
        ca(PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap()),
    ] {
        // Plain, other leaf key types and digests, poison and SCT lists, no AKI.
        assert_eq!(both(&ca, Leaf::new()), (true, true));
        assert_eq!(both(&ca, Leaf { key: ec(Nid::SECP384R1), ..Leaf::new() }), (true, true));
        assert_eq!(both(&ca, Leaf { key: ec(Nid::SECP521R1), ..Leaf::new() }), (true, true));
        let rsa_key = PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        assert_eq!(both(&ca, Leaf { key: rsa_key, ..Leaf::new() }), (true, true));
        assert_eq!(both(&ca, Leaf { digest: MessageDigest::sha384(), ..Leaf::new() }), (true, true));
        assert_eq!(both(&ca, Leaf { aki: false, ..Leaf::new() }), (true, true));
        let poison = ext("1.3.6.1.4.1.11129.2.4.3", true, &[5, 0]);
        assert_eq!(both(&ca, Leaf { extensions: vec![poison], ..Leaf::new() }), (true, true));
        // Unknown extensions, critical or not, are OpenSSL's concern only when it decodes them.
        let unknown = ext("1.2.3.4.5", true, b"\x04\x00");
        assert_eq!(both(&ca, Leaf { extensions: vec![unknown], ..Leaf::new() }), (true, true));
        // A name that differs from the issuer's.
        let subject = name(&[("O", "Fast Test"), ("CN", "Fast Test Leaf")]);
        assert_eq!(both(&ca, Leaf { subject, ..Leaf::new() }), (true, true));
    }
}

#[test]
fn what_openssl_refuses_is_never_accepted_here() {
    let ca = ca(ec(Nid::X9_62_PRIME256V1));
    let other = ec(Nid::X9_62_PRIME256V1);
    // Signed by another key; issued under another name.
    assert_eq!(both(&ca, Leaf { signer: Some(&other), ..Leaf::new() }), (false, false));
    let elsewhere = name(&[("CN", "Someone Else")]);
    assert_eq!(both(&ca, Leaf { issuer_name: Some(elsewhere), aki: false, ..Leaf::new() }), (false, false));
    // An empty key usage, a key identifier of another key, an undecodable
    // basic constraints: OpenSSL marks the certificate invalid.
    let empty_ku = ext("2.5.29.15", true, b"\x03\x01\x00");
    assert_eq!(both(&ca, Leaf { extensions: vec![empty_ku], ..Leaf::new() }), (false, false));
    let wrong_aki = ext("2.5.29.35", false, b"\x30\x06\x80\x04\x01\x02\x03\x04");
    assert_eq!(both(&ca, Leaf { aki: false, extensions: vec![wrong_aki], ..Leaf::new() }), (false, false));
    let bad_bc = ext("2.5.29.19", true, b"\x30\x03\x02\x01\xff");
    assert_eq!(both(&ca, Leaf { extensions: vec![bad_bc], ..Leaf::new() }), (false, false));
    // A repeated subject alternative name.
    let san = ext("2.5.29.17", false, b"\x30\x06\x82\x04a.bc");
    assert_eq!(both(&ca, Leaf { extensions: vec![san], ..Leaf::new() }), (false, false));
}

#[test]
fn what_only_openssl_can_judge_is_left_to_it() {
    let ca = ca(ec(Nid::X9_62_PRIME256V1));
    // Self-issued under OpenSSL's name comparison (case and spacing folded).
    let same = name(&[("O", "FAST TEST"), ("CN", " fast test ca ")]);
    let (fast, _) = both(&ca, Leaf { subject: same, ..Leaf::new() });
    assert!(!fast);
    // Name constraints, an AKI naming the issuer by name and serial, a key
    // OpenSSL decodes its own way (Ed25519), a directory name in the SAN.
    let nc = ext("2.5.29.30", true, b"\x30\x00");
    assert!(!both(&ca, Leaf { extensions: vec![nc], ..Leaf::new() }).0);
    let aki_serial = ext("2.5.29.35", false, b"\x30\x03\x82\x01\x07");
    assert!(!both(&ca, Leaf { aki: false, extensions: vec![aki_serial], ..Leaf::new() }).0);
    let ed = PKey::generate_ed25519().unwrap();
    let (fast, full) = both(&ca, Leaf { key: ed, ..Leaf::new() });
    assert!(!fast && full, "an Ed25519 leaf key: OpenSSL's to judge, and it accepts");
    let dirname = ext("2.5.29.17", false, b"\x30\x0c\xa4\x0a\x30\x08\x31\x06\x30\x04\x06\x00\x0c\x00");
    assert!(!both(&ca, Leaf { extensions: vec![dirname], ..Leaf::new() }).0);
    // A leaf with a T61String in its name (a string type compared elsewhere).
    let mut n = X509NameBuilder::new().unwrap();
    n.append_entry_by_nid_with_type(Nid::COMMONNAME, "t61", openssl::asn1::Asn1Type::T61STRING).unwrap();
    let (fast, full) = both(&ca, Leaf { subject: n.build(), ..Leaf::new() });
    assert!(!fast && full);
}
