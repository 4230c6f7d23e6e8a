//! The check of a leaf against a remembered issuer without OpenSSL's
//! certificate parser, for the leaves where it gives OpenSSL's answer.
//!
//! A hit of the verified-chain cache (`verified.rs`) has OpenSSL verify the
//! leaf against the cached issuer: `d2i_X509` of the leaf (whose eager
//! decoding of the leaf's public key through `OSSL_DECODER` costs about as
//! much as the rest of the parse), then `X509_verify_cert` with the chain
//! check's flags (unhandled critical extensions ignored, no time check, the
//! issuer a partial-chain trust anchor). The submission's leaf has just been
//! parsed as strict DER with x509-cert anyway (the bar entries are held to),
//! so [`leaf_verifies`] runs on that parse what `X509_verify_cert` checks of
//! a leaf in that setting, as OpenSSL 3.5 does it (`x509_vfy.c`,
//! `v3_purp.c`, `x_pubkey.c`):
//!
//! - the leaf's issuer name is the issuer's subject (here: the same bytes,
//!   which OpenSSL's canonical comparison then also finds equal), and the
//!   leaf is not self-issued (its subject differs from that name under
//!   OpenSSL's canonical comparison: case and spacing folded);
//! - its Authority Key Identifier, if it has one, holds only a key
//!   identifier, equal to the issuer's Subject Key Identifier if that exists;
//! - the extensions OpenSSL decodes while caching them (`ossl_x509v3_cache_
//!   extensions`) decode, and none marks the certificate invalid (an empty
//!   key usage); none of them repeats; no proxy certificate information,
//!   name constraints, RFC 3779 blocks or Netscape certificate type (handled
//!   by OpenSSL alone);
//! - its public key decodes as OpenSSL decodes it: an EC point on a named
//!   P-256, P-384 or P-521 curve (no explicit parameters), or an RSA key;
//! - the outer signature algorithm is the TBS's, an ECDSA or RSA PKCS #1
//!   v1.5 one with SHA-256/384/512 that fits the issuer's key, and the
//!   signature over the TBS bytes verifies with the issuer's key (OpenSSL's
//!   `EVP_DigestVerify`, as `X509_verify` does).
//!
//! The issuer's own side (it may sign certificates per its key usage; a CA
//! as OpenSSL requires) was settled when the chain was verified in full;
//! [`Issuer::new`] keeps only issuers whose names use the string types this
//! module compares. Anything else (another name string type, a multi-valued
//! name component, another key or signature algorithm, an extension OpenSSL
//! would have to judge) answers `false`, and the leaf is checked by OpenSSL
//! as before: this module may only skip OpenSSL where the outcome is the
//! same, never accept what OpenSSL would refuse.

use std::sync::OnceLock;

use const_oid::ObjectIdentifier as Oid;
use der::asn1::{BitString, Ia5StringRef, PrintableStringRef, Utf8StringRef};
use der::{Decode, Encode, Header, Reader, SliceReader, Tag, Tagged};
use openssl::bn::BigNumContext;
use openssl::ec::{EcGroup, EcPoint};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Public};
use openssl::rsa::Rsa;
use openssl::sign::Verifier;
use openssl::x509::X509Ref;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, CrlDistributionPoints, ExtendedKeyUsage, SubjectAltName,
    SubjectKeyIdentifier,
};
use x509_cert::name::Name;
use x509_cert::Certificate;

const BASIC_CONSTRAINTS: Oid = Oid::new_unwrap("2.5.29.19");
const KEY_USAGE: Oid = Oid::new_unwrap("2.5.29.15");
const EXT_KEY_USAGE: Oid = Oid::new_unwrap("2.5.29.37");
const SUBJECT_KEY_ID: Oid = Oid::new_unwrap("2.5.29.14");
const AUTHORITY_KEY_ID: Oid = Oid::new_unwrap("2.5.29.35");
const SUBJECT_ALT_NAME: Oid = Oid::new_unwrap("2.5.29.17");
const CRL_DISTRIBUTION_POINTS: Oid = Oid::new_unwrap("2.5.29.31");
/// Extensions OpenSSL decodes and judges itself: such a leaf goes its way.
const OPENSSL_ONLY: [Oid; 5] = [
    Oid::new_unwrap("1.3.6.1.5.5.7.1.14"),    // proxyCertInfo
    Oid::new_unwrap("2.5.29.30"),             // nameConstraints
    Oid::new_unwrap("1.3.6.1.5.5.7.1.7"),     // sbgp-ipAddrBlock
    Oid::new_unwrap("1.3.6.1.5.5.7.1.8"),     // sbgp-autonomousSysNum
    Oid::new_unwrap("2.16.840.1.113730.1.1"), // netscape-cert-type
];

const EC_PUBLIC_KEY: Oid = Oid::new_unwrap("1.2.840.10045.2.1");
const RSA_ENCRYPTION: Oid = Oid::new_unwrap("1.2.840.113549.1.1.1");
const CURVES: [(Oid, Nid); 3] = [
    (Oid::new_unwrap("1.2.840.10045.3.1.7"), Nid::X9_62_PRIME256V1),
    (Oid::new_unwrap("1.3.132.0.34"), Nid::SECP384R1),
    (Oid::new_unwrap("1.3.132.0.35"), Nid::SECP521R1),
];

const ECDSA_SHA256: Oid = Oid::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: Oid = Oid::new_unwrap("1.2.840.10045.4.3.3");
const ECDSA_SHA512: Oid = Oid::new_unwrap("1.2.840.10045.4.3.4");
const RSA_SHA256: Oid = Oid::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: Oid = Oid::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: Oid = Oid::new_unwrap("1.2.840.113549.1.1.13");

/// The signature algorithms checked here: their digest, and whether RSA
/// (PKCS #1 v1.5) or ECDSA.
fn signature_algorithm(oid: &Oid) -> Option<(MessageDigest, bool)> {
    Some(match *oid {
        ECDSA_SHA256 => (MessageDigest::sha256(), false),
        ECDSA_SHA384 => (MessageDigest::sha384(), false),
        ECDSA_SHA512 => (MessageDigest::sha512(), false),
        RSA_SHA256 => (MessageDigest::sha256(), true),
        RSA_SHA384 => (MessageDigest::sha384(), true),
        RSA_SHA512 => (MessageDigest::sha512(), true),
        _ => return None,
    })
}

/// What [`leaf_verifies`] needs of a remembered issuer.
pub struct Issuer {
    /// Its subject, DER.
    subject: Vec<u8>,
    /// Its subject as OpenSSL compares names.
    canonical_subject: Vec<(Oid, Vec<u8>)>,
    /// Its Subject Key Identifier.
    key_id: Option<Vec<u8>>,
    /// Its public key, and whether it is RSA (else EC).
    key: PKey<Public>,
    rsa: bool,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").field("rsa", &self.rsa).finish()
    }
}

impl Issuer {
    /// The issuer `issuer` (`der` its DER), if leaves it issued can be checked
    /// here: its name uses only the string types compared here, in
    /// single-valued components, its Subject Key Identifier decodes, its key
    /// is EC or RSA. `None` leaves every leaf to OpenSSL.
    pub fn new(issuer: &X509Ref, der: &[u8]) -> Option<Self> {
        let cert = Certificate::from_der(der).ok()?;
        let tbs = &cert.tbs_certificate;
        let subject = tbs.subject.to_der().ok()?;
        let canonical_subject = canonical_name(&tbs.subject)?;
        let mut key_id = None;
        for ext in tbs.extensions.iter().flatten() {
            if ext.extn_id == SUBJECT_KEY_ID {
                key_id = Some(SubjectKeyIdentifier::from_der(ext.extn_value.as_bytes()).ok()?.0.into_bytes());
            }
        }
        let key = issuer.public_key().ok()?;
        let rsa = match key.id() {
            Id::RSA => true,
            Id::EC => false,
            _ => return None,
        };
        Some(Self { subject, canonical_subject, key_id, key, rsa })
    }
}

/// Whether OpenSSL's chain check would accept `leaf` (parsed from
/// `leaf_der`) as issued by `issuer`, under the chain check's flags; see the
/// module's documentation. `false` means "ask OpenSSL", not "refused".
pub fn leaf_verifies(issuer: &Issuer, leaf: &Certificate, leaf_der: &[u8]) -> bool {
    verifies(issuer, leaf, leaf_der).is_some()
}

fn verifies(issuer: &Issuer, leaf: &Certificate, leaf_der: &[u8]) -> Option<()> {
    let tbs = &leaf.tbs_certificate;
    // The signature algorithm: the TBS's, one of ours, for the issuer's key.
    if leaf.signature_algorithm.to_der().ok()? != tbs.signature.to_der().ok()? {
        return None;
    }
    let (digest, rsa) = signature_algorithm(&tbs.signature.oid)?;
    let params_ok = match &tbs.signature.parameters {
        None => true,
        Some(p) => rsa && p.tag() == Tag::Null && p.value().is_empty(),
    };
    if !params_ok || rsa != issuer.rsa {
        return None;
    }
    // Names: issued by this issuer, not self-issued.
    if tbs.issuer.to_der().ok()? != issuer.subject {
        return None;
    }
    if canonical_name(&tbs.subject)? == issuer.canonical_subject {
        return None;
    }
    extensions_pass(issuer, leaf)?;
    public_key_decodes(&tbs.subject_public_key_info)?;
    // The signature over the TBS as submitted.
    if leaf.signature.unused_bits() != 0 {
        return None;
    }
    let mut verifier = Verifier::new(digest, &issuer.key).ok()?;
    verifier.verify_oneshot(leaf.signature.raw_bytes(), tbs_bytes(leaf_der)?).ok()?.then_some(())
}

/// The extensions OpenSSL decodes, as it judges them; see the module docs.
fn extensions_pass(issuer: &Issuer, leaf: &Certificate) -> Option<()> {
    let exts = leaf.tbs_certificate.extensions.as_deref().unwrap_or_default();
    for (i, ext) in exts.iter().enumerate() {
        if exts[..i].iter().any(|e| e.extn_id == ext.extn_id) || OPENSSL_ONLY.contains(&ext.extn_id) {
            return None;
        }
        let value = ext.extn_value.as_bytes();
        match ext.extn_id {
            BASIC_CONSTRAINTS => {
                BasicConstraints::from_der(value).ok()?;
            }
            // OpenSSL refuses a key usage whose first 16 bits are all clear.
            KEY_USAGE => {
                let bits = BitString::from_der(value).ok()?;
                let bytes = bits.raw_bytes();
                if bytes.first().copied().unwrap_or(0) | bytes.get(1).copied().unwrap_or(0) == 0 {
                    return None;
                }
            }
            EXT_KEY_USAGE => {
                ExtendedKeyUsage::from_der(value).ok()?;
            }
            SUBJECT_KEY_ID => {
                SubjectKeyIdentifier::from_der(value).ok()?;
            }
            AUTHORITY_KEY_ID => {
                let aki = AuthorityKeyIdentifier::from_der(value).ok()?;
                if aki.authority_cert_issuer.is_some() || aki.authority_cert_serial_number.is_some() {
                    return None;
                }
                if let (Some(kid), Some(ski)) = (&aki.key_identifier, &issuer.key_id) {
                    if kid.as_bytes() != ski.as_slice() {
                        return None;
                    }
                }
            }
            SUBJECT_ALT_NAME => {
                for name in SubjectAltName::from_der(value).ok()?.0 {
                    if !simple_general_name(&name) {
                        return None;
                    }
                }
            }
            CRL_DISTRIBUTION_POINTS => {
                for dp in CrlDistributionPoints::from_der(value).ok()?.0 {
                    if dp.reasons.is_some() || dp.crl_issuer.is_some() {
                        return None;
                    }
                    match dp.distribution_point {
                        None => {}
                        Some(DistributionPointName::FullName(names)) if names.iter().all(simple_general_name) => {}
                        Some(_) => return None,
                    }
                }
            }
            // Not decoded by OpenSSL's chain check (authority information
            // access, policies without a policy check, SCTs, the poison, ...).
            _ => {}
        }
    }
    Some(())
}

/// A general name OpenSSL decodes without further judgement.
fn simple_general_name(name: &GeneralName) -> bool {
    matches!(
        name,
        GeneralName::DnsName(_)
            | GeneralName::Rfc822Name(_)
            | GeneralName::UniformResourceIdentifier(_)
            | GeneralName::IpAddress(_)
    )
}

/// The leaf's key decodes as OpenSSL decodes it when the chain check asks
/// for it: an EC point on a named curve, or an RSA public key.
fn public_key_decodes(spki: &x509_cert::spki::SubjectPublicKeyInfoOwned) -> Option<()> {
    if spki.subject_public_key.unused_bits() != 0 {
        return None;
    }
    let key = spki.subject_public_key.raw_bytes();
    match spki.algorithm.oid {
        EC_PUBLIC_KEY => {
            let curve: Oid = spki.algorithm.parameters.as_ref()?.decode_as().ok()?;
            let group = group(CURVES.iter().position(|(oid, _)| *oid == curve)?)?;
            let mut ctx = BigNumContext::new().ok()?;
            EcPoint::from_bytes(group, key, &mut ctx).ok().map(drop)
        }
        RSA_ENCRYPTION => {
            match &spki.algorithm.parameters {
                None => {}
                Some(p) if p.tag() == Tag::Null && p.value().is_empty() => {}
                Some(_) => return None,
            }
            Rsa::public_key_from_der_pkcs1(key).ok().map(drop)
        }
        _ => None,
    }
}

/// The named curve `CURVES[i]`, made once.
fn group(i: usize) -> Option<&'static EcGroup> {
    static GROUPS: [OnceLock<Option<EcGroup>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    GROUPS.get(i)?.get_or_init(|| EcGroup::from_curve_name(CURVES[i].1).ok()).as_ref()
}

/// The TBSCertificate of `cert` exactly as submitted (its DER).
fn tbs_bytes(cert: &[u8]) -> Option<&[u8]> {
    let mut r = SliceReader::new(cert).ok()?;
    let outer = Header::decode(&mut r).ok()?;
    if outer.tag != Tag::Sequence {
        return None;
    }
    let start = usize::try_from(r.position()).ok()?;
    let tbs = Header::decode(&mut r).ok()?;
    let len = usize::try_from((tbs.encoded_len().ok()? + tbs.length).ok()?).ok()?;
    cert.get(start..start.checked_add(len)?)
}

/// A name as OpenSSL's `X509_NAME_cmp` compares names (`x509_name_canon`):
/// each component's type and its text with leading and trailing white
/// space dropped, inner runs of white space made one space, ASCII letters
/// lowercased. Only single-valued components whose value is a UTF8String,
/// PrintableString or IA5String (text OpenSSL converts to UTF-8 unchanged)
/// are handled; `None` otherwise.
pub fn canonical_name(name: &Name) -> Option<Vec<(Oid, Vec<u8>)>> {
    let mut out = Vec::with_capacity(name.0.len());
    for rdn in &name.0 {
        let [atv] = rdn.0.as_slice() else { return None };
        let text = match atv.value.tag() {
            Tag::Utf8String => atv.value.decode_as::<Utf8StringRef<'_>>().ok()?.as_str().as_bytes(),
            Tag::PrintableString => atv.value.decode_as::<PrintableStringRef<'_>>().ok()?.as_str().as_bytes(),
            Tag::Ia5String => atv.value.decode_as::<Ia5StringRef<'_>>().ok()?.as_str().as_bytes(),
            _ => return None,
        };
        out.push((atv.oid, canonical_text(text)));
    }
    Some(out)
}

/// OpenSSL's `asn1_string_canon` on UTF-8 text.
fn canonical_text(text: &[u8]) -> Vec<u8> {
    // OpenSSL's ossl_isspace: space, \t, \n, \v, \f, \r.
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = text.iter().position(|b| !space(*b)).unwrap_or(text.len());
    let end = text.iter().rposition(|b| !space(*b)).map_or(start, |i| i + 1);
    let mut out = Vec::with_capacity(end - start);
    let mut in_space = false;
    for &b in &text[start..end] {
        if space(b) {
            if !in_space {
                out.push(b' ');
            }
            in_space = true;
        } else {
            out.push(b.to_ascii_lowercase());
            in_space = false;
        }
    }
    out
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod fast_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_folds_case_and_space_as_openssl_does() {
        assert_eq!(canonical_text(b"  Foo \t\n Bar  "), b"foo bar");
        assert_eq!(canonical_text(b"\x0bA\x0cB\r"), b"a b");
        assert_eq!(canonical_text(b""), b"");
        assert_eq!(canonical_text(b"   "), b"");
        assert_eq!(canonical_text("Ünï Cöde".as_bytes()), "Ünï cöde".as_bytes());
    }

    #[test]
    fn tbs_bytes_are_the_submitted_ones() {
        let pki = crate::chain::tests::Pki::new();
        let leaf = pki.chain(&crate::chain::tests::Spec::leaf("t.example")).swap_remove(0);
        let parsed = Certificate::from_der(&leaf).unwrap();
        assert_eq!(tbs_bytes(&leaf).unwrap(), parsed.tbs_certificate.to_der().unwrap().as_slice());
        assert!(tbs_bytes(b"\x30\x00").is_none());
        assert!(tbs_bytes(b"\x04\x02\x30\x00").is_none());
    }
}
