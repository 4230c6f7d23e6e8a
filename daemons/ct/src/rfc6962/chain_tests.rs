//! Precertificate handling against certificates OpenSSL builds: the TBS a log
//! derives from a precertificate must equal the TBS of the final certificate
//! the CA issues, with and without a Precertificate Signing Certificate; and a
//! log's whole signing flow (SCT, tree head, checkpoint) verifies.

use openssl::asn1::{Asn1Integer, Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::sign::Signer;
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, SubjectAlternativeName, SubjectKeyIdentifier,
};
use openssl::x509::{X509Builder, X509Extension, X509Name, X509NameRef, X509};

use super::precert::{is_precert_signing_certificate, is_precertificate, precert_entry, tbs_certificate, CertError};
use super::*;
use crate::merkle::MemoryTree;
use crate::staticct::{leaf_index_extensions, parse_leaf_index, signed_checkpoint};
use crate::verify::LogKey;

fn key() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
}

fn name(cn: &str) -> X509Name {
    let mut n = X509Name::builder().unwrap();
    n.append_entry_by_text("O", "Signet Test").unwrap();
    n.append_entry_by_text("CN", cn).unwrap();
    n.build()
}

fn builder(subject: &str, issuer: &X509NameRef, serial: u32, public: &PKey<Private>) -> X509Builder {
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&Asn1Integer::from_bn(&BigNum::from_u32(serial).unwrap()).unwrap()).unwrap();
    b.set_subject_name(&name(subject)).unwrap();
    b.set_issuer_name(issuer).unwrap();
    b.set_not_before(&Asn1Time::from_unix(1_700_000_000).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::from_unix(1_800_000_000).unwrap()).unwrap();
    b.set_pubkey(public).unwrap();
    b
}

struct Ca {
    cert: X509,
    key: PKey<Private>,
}

fn root() -> Ca {
    let key = key();
    let mut b = builder("Root", &name("Root"), 1, &key);
    b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
    let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None)).unwrap();
    b.append_extension(ski).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    Ca { cert: b.build(), key }
}

fn precert_signer(root: &Ca) -> Ca {
    let key = key();
    let mut b = builder("Root Precertificate Signing", root.cert.subject_name(), 2, &key);
    b.append_extension(BasicConstraints::new().critical().ca().pathlen(0).build().unwrap()).unwrap();
    b.append_extension(ExtendedKeyUsage::new().other("1.3.6.1.4.1.11129.2.4.4").build().unwrap()).unwrap();
    let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(Some(&root.cert), None)).unwrap();
    b.append_extension(ski).unwrap();
    let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&root.cert), None)).unwrap();
    b.append_extension(aki).unwrap();
    b.sign(&root.key, MessageDigest::sha256()).unwrap();
    Ca { cert: b.build(), key }
}

/// The end-entity certificate, or its precertificate (poison in the middle of
/// the extensions, to check the order of the others is kept).
fn leaf(issuer: &Ca, issuer_name: &X509NameRef, poison: Option<bool>, with_aki: bool) -> Vec<u8> {
    let public = key();
    let mut b = builder("leaf.example", issuer_name, 0x1234, &public);
    b.append_extension(BasicConstraints::new().build().unwrap()).unwrap();
    if let Some(critical) = poison {
        let oid = Asn1Object::from_str("1.3.6.1.4.1.11129.2.4.3").unwrap();
        let null = Asn1OctetString::new_from_bytes(&[0x05, 0x00]).unwrap();
        b.append_extension(X509Extension::new_from_der(&oid, critical, &null).unwrap()).unwrap();
    }
    let san = SubjectAlternativeName::new().dns("leaf.example").build(&b.x509v3_context(None, None)).unwrap();
    b.append_extension(san).unwrap();
    if with_aki {
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&issuer.cert), None)).unwrap();
        b.append_extension(aki).unwrap();
    }
    b.append_extension(ExtendedKeyUsage::new().server_auth().build().unwrap()).unwrap();
    b.sign(&issuer.key, MessageDigest::sha256()).unwrap();
    b.build().to_der().unwrap()
}

fn der(c: &Ca) -> Vec<u8> {
    c.cert.to_der().unwrap()
}

fn spki_hash(c: &Ca) -> Hash {
    Sha256::digest(c.cert.public_key().unwrap().public_key_to_der().unwrap()).into()
}

#[test]
fn precertificate_issued_by_the_ca() {
    let root = root();
    let root_name = root.cert.subject_name().to_owned().unwrap();
    let pre = leaf(&root, &root_name, Some(true), true);
    assert!(is_precertificate(&pre).unwrap());
    let SignedEntry::Precert { issuer_key_hash, tbs_certificate: tbs } =
        precert_entry(&[pre.clone(), der(&root)]).unwrap()
    else {
        panic!("not a precert entry")
    };
    assert_eq!(issuer_key_hash, spki_hash(&root));
    // The TBS is the precertificate's without the poison extension.
    assert_eq!(tbs, super::precert::tbs_without_extension(&pre, &super::precert::POISON_OID).unwrap());
    let poison = hex::decode("3013060a2b06010401d6790204030101ff04020500").unwrap();
    assert!(tbs_certificate(&pre).unwrap().windows(poison.len()).any(|w| w == poison));
    assert!(!tbs.windows(poison.len()).any(|w| w == poison));
}

/// Final and precertificate of one key: the log's TBS equals the final TBS.
fn final_and_precert(signer: &Ca, root: &Ca, with_aki: bool) -> (Vec<u8>, Vec<u8>) {
    // Build both with the same subject key so the TBSs can match.
    let public = key();
    let build = |issuer: &Ca, poison: bool| {
        let mut b = builder("leaf.example", root.cert.subject_name(), 0x1234, &public);
        if !std::ptr::eq(issuer, root) {
            b.set_issuer_name(issuer.cert.subject_name()).unwrap();
        }
        b.append_extension(BasicConstraints::new().build().unwrap()).unwrap();
        if poison {
            let oid = Asn1Object::from_str("1.3.6.1.4.1.11129.2.4.3").unwrap();
            let null = Asn1OctetString::new_from_bytes(&[0x05, 0x00]).unwrap();
            b.append_extension(X509Extension::new_from_der(&oid, true, &null).unwrap()).unwrap();
        }
        let san = SubjectAlternativeName::new().dns("leaf.example").build(&b.x509v3_context(None, None)).unwrap();
        b.append_extension(san).unwrap();
        if with_aki {
            let ctx = b.x509v3_context(Some(&issuer.cert), None);
            let aki = AuthorityKeyIdentifier::new().keyid(true).build(&ctx).unwrap();
            b.append_extension(aki).unwrap();
        }
        b.append_extension(ExtendedKeyUsage::new().server_auth().build().unwrap()).unwrap();
        b.sign(&issuer.key, MessageDigest::sha256()).unwrap();
        b.build().to_der().unwrap()
    };
    (build(root, false), build(signer, true))
}

#[test]
fn precertificate_tbs_equals_the_final_certificate_tbs() {
    let root = root();
    let (final_cert, pre) = final_and_precert(&root, &root, true);
    let entry = precert_entry(&[pre, der(&root)]).unwrap();
    let SignedEntry::Precert { tbs_certificate: tbs, issuer_key_hash } = entry else { panic!() };
    assert_eq!(tbs, tbs_certificate(&final_cert).unwrap());
    assert_eq!(issuer_key_hash, spki_hash(&root));
}

#[test]
fn precert_signing_certificate_takes_issuer_and_aki_of_the_ca() {
    let root = root();
    let psc = precert_signer(&root);
    assert!(is_precert_signing_certificate(&der(&psc)).unwrap());
    assert!(!is_precert_signing_certificate(&der(&root)).unwrap());
    let (final_cert, pre) = final_and_precert(&psc, &root, true);
    // The precertificate names the PSC and carries the PSC's key identifier...
    assert_ne!(tbs_certificate(&pre).unwrap().len(), 0);
    // ...but the log's TBS is the final certificate's.
    let entry = precert_entry(&[pre.clone(), der(&psc), der(&root)]).unwrap();
    let SignedEntry::Precert { tbs_certificate: tbs, issuer_key_hash } = entry else { panic!() };
    assert_eq!(tbs, tbs_certificate(&final_cert).unwrap());
    assert_eq!(issuer_key_hash, spki_hash(&root));
    // The PSC without the CA after it is not enough.
    assert_eq!(precert_entry(&[pre, der(&psc)]), Err(CertError::MissingIssuer));
}

#[test]
fn precert_signing_certificate_without_aki_in_the_precertificate() {
    let root = root();
    let psc = precert_signer(&root);
    let (_, pre) = final_and_precert(&psc, &root, false);
    let entry = precert_entry(&[pre, der(&psc), der(&root)]).unwrap();
    let SignedEntry::Precert { tbs_certificate: tbs, .. } = entry else { panic!() };
    // The CA's key identifier is appended as the last extension.
    let ski = root.cert.subject_key_id().unwrap().as_slice().to_vec();
    let tail = [hex::decode("301f0603551d23041830168014").unwrap(), ski].concat();
    assert!(tbs.ends_with(&tail));
}

#[test]
fn non_critical_poison_is_refused() {
    let root = root();
    let root_name = root.cert.subject_name().to_owned().unwrap();
    let pre = leaf(&root, &root_name, Some(false), true);
    assert!(matches!(is_precertificate(&pre), Err(CertError::BadPoison(_))));
    assert!(matches!(precert_entry(&[pre, der(&root)]), Err(CertError::BadPoison(_))));
    let plain = leaf(&root, &root_name, None, false);
    assert_eq!(precert_entry(&[plain, der(&root)]), Err(CertError::NotPrecertificate));
}

fn sign(key: &PKey<Private>, data: &[u8]) -> DigitallySigned {
    let mut s = Signer::new(MessageDigest::sha256(), key).unwrap();
    DigitallySigned::ecdsa(s.sign_oneshot_to_vec(data).unwrap())
}

/// What ctlogd does for a submission and a checkpoint, with the signatures an
/// external signer makes over the bytes this crate builds.
#[test]
fn log_signing_flow_verifies() {
    let log_key = key();
    let log = LogKey::from_spki_der(&log_key.public_key_to_der().unwrap()).unwrap();
    let root = root();
    let (_, pre) = final_and_precert(&root, &root, true);
    let mut tree = MemoryTree::new();
    let mut leaf_hashes = Vec::new();
    for index in 0..5u64 {
        let entry = precert_entry(&[pre.clone(), der(&root)]).unwrap();
        let ts = TimestampedEntry {
            timestamp: 1_700_000_000_000 + index,
            entry,
            extensions: leaf_index_extensions(index).unwrap(),
        };
        let sct = Sct {
            log_id: log.log_id(),
            timestamp: ts.timestamp,
            extensions: ts.extensions.clone(),
            signature: sign(&log_key, &ts.sct_signature_input().unwrap()),
        };
        log.verify_sct(&sct, &ts.entry).unwrap();
        assert_eq!(parse_leaf_index(&sct.extensions).unwrap(), index);
        let h = ts.leaf_hash().unwrap();
        assert_eq!(tree.push(h), index);
        leaf_hashes.push(h);
    }
    let head = TreeHead { timestamp: 1_700_000_001_000, tree_size: tree.size(), root_hash: tree.root() };
    let sig = sign(&log_key, &head.signature_input());
    log.verify_tree_head(&head, &sig).unwrap();
    let checkpoint = signed_checkpoint("ct.example/2025", &log.log_id(), &head, &sig).unwrap();
    let (_, verified) = log.verify_checkpoint(&checkpoint, "ct.example/2025").unwrap();
    assert_eq!(verified, head);
}
