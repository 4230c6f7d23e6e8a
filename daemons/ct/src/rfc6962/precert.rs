//! What a log computes from submitted certificates (RFC 6962 §3.1–3.2).
//!
//! A precertificate carries the critical poison extension. Its log entry is a
//! `precert_entry`: the SHA-256 of the final issuer's public key and the
//! precertificate's `TBSCertificate` with the poison removed. When a
//! Precertificate Signing Certificate (EKU 1.3.6.1.4.1.11129.2.4.4) signed the
//! precertificate, the TBS also takes the issuer name and Authority Key
//! Identifier of that certificate's issuer, the CA that signs the final
//! certificate, and the key hash is that CA's.
//!
//! Certificates are read with `der` as a sequence of raw elements: only the
//! extension list (and, for a Precertificate Signing Certificate, the issuer)
//! is rebuilt, every other byte of the TBS is kept as submitted, so the result
//! matches what TLS clients compute from the final certificate.

use const_oid::ObjectIdentifier;
use der::asn1::{Any, AnyRef, OctetString};
use der::{Decode, Encode, Reader, Tag, TagNumber, Tagged};
use sha2::{Digest, Sha256};
use x509_cert::ext::pkix::ExtendedKeyUsage;
use x509_cert::ext::Extension;

use super::{SignedEntry, SCT_LIST_OID};
use crate::merkle::Hash;

/// OID of the precertificate poison extension: 1.3.6.1.4.1.11129.2.4.3.
pub const POISON_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.3");

/// OID of the Precertificate Signing Certificate EKU: 1.3.6.1.4.1.11129.2.4.4.
pub const PRECERT_SIGNING_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.4");

/// OID of the Authority Key Identifier extension.
pub const AKI_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");

/// OID of the Extended Key Usage extension.
pub const EKU_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");

/// Errors from reading submitted certificates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// The DER does not decode.
    #[error("certificate does not decode: {0}")]
    Der(String),
    /// The certificate decodes but is not shaped like an X.509 certificate.
    #[error("malformed certificate: {0}")]
    Malformed(&'static str),
    /// The certificate has no poison extension.
    #[error("not a precertificate: no poison extension")]
    NotPrecertificate,
    /// The poison extension is not critical, or appears twice.
    #[error("invalid poison extension: {0}")]
    BadPoison(&'static str),
    /// An extension appears twice.
    #[error("duplicate extension {0}")]
    DuplicateExtension(ObjectIdentifier),
    /// The chain is too short: no issuer, or a Precertificate Signing
    /// Certificate without its own issuer after it.
    #[error("chain is missing an issuer")]
    MissingIssuer,
}

impl From<der::Error> for CertError {
    fn from(e: der::Error) -> Self {
        CertError::Der(e.to_string())
    }
}

/// The raw TBS of a certificate: its elements, in order.
struct RawTbs<'a> {
    elements: Vec<AnyRef<'a>>,
    /// Index of `serialNumber` (1 when an explicit version is present).
    base: usize,
}

const EXTENSIONS_TAG: Tag = Tag::ContextSpecific { constructed: true, number: TagNumber::N3 };
const VERSION_TAG: Tag = Tag::ContextSpecific { constructed: true, number: TagNumber::N0 };

impl<'a> RawTbs<'a> {
    fn parse(cert_der: &'a [u8]) -> Result<Self, CertError> {
        let cert = AnyRef::from_der(cert_der)?;
        let tbs = cert.sequence(|r| {
            let tbs = r.decode::<AnyRef<'a>>()?;
            r.decode::<AnyRef<'a>>()?; // signatureAlgorithm
            r.decode::<AnyRef<'a>>()?; // signatureValue
            Ok(tbs)
        })?;
        let elements = tbs.sequence(|r| {
            let mut v = Vec::new();
            while !r.is_finished() {
                v.push(r.decode::<AnyRef<'a>>()?);
            }
            Ok(v)
        })?;
        let base = usize::from(elements.first().map(|e| e.tag()) == Some(VERSION_TAG));
        if elements.len() < base + 6 {
            return Err(CertError::Malformed("TBSCertificate has too few fields"));
        }
        for (i, e) in elements.iter().enumerate().skip(base + 6) {
            let Tag::ContextSpecific { number, .. } = e.tag() else {
                return Err(CertError::Malformed("unexpected field after subjectPublicKeyInfo"));
            };
            if number == TagNumber::N3 && i + 1 != elements.len() {
                return Err(CertError::Malformed("fields after extensions"));
            }
        }
        Ok(Self { elements, base })
    }

    fn issuer(&self) -> AnyRef<'a> {
        self.elements[self.base + 2]
    }

    fn spki(&self) -> AnyRef<'a> {
        self.elements[self.base + 5]
    }

    fn extensions_index(&self) -> Option<usize> {
        self.elements.iter().position(|e| e.tag() == EXTENSIONS_TAG)
    }

    /// The extensions, each with its raw DER.
    fn extensions(&self) -> Result<Vec<(Extension, Vec<u8>)>, CertError> {
        let Some(i) = self.extensions_index() else { return Ok(Vec::new()) };
        let list = AnyRef::from_der(self.elements[i].value())?;
        let raw = list.sequence(|r| {
            let mut v = Vec::new();
            while !r.is_finished() {
                v.push(r.decode::<AnyRef<'a>>()?);
            }
            Ok(v)
        })?;
        let mut out: Vec<(Extension, Vec<u8>)> = Vec::with_capacity(raw.len());
        for r in raw {
            let ext = r.decode_as::<Extension>()?;
            if out.iter().any(|(e, _)| e.extn_id == ext.extn_id) {
                return Err(CertError::DuplicateExtension(ext.extn_id));
            }
            out.push((ext, r.to_der()?));
        }
        Ok(out)
    }

    /// The DER TBS with `issuer` and the extension list replaced.
    fn rebuild(&self, issuer: Option<AnyRef<'_>>, extensions: &[Vec<u8>]) -> Result<Vec<u8>, CertError> {
        let mut content = Vec::new();
        for (i, e) in self.elements.iter().enumerate() {
            if e.tag() == EXTENSIONS_TAG {
                continue;
            }
            match issuer {
                Some(iss) if i == self.base + 2 => iss.encode_to_vec(&mut content)?,
                _ => e.encode_to_vec(&mut content)?,
            };
        }
        // An empty extension list is left out, as encoders of `[3] EXPLICIT
        // Extensions OPTIONAL` do (the list may not be empty).
        if !extensions.is_empty() {
            let list = Any::new(Tag::Sequence, extensions.concat())?.to_der()?;
            Any::new(EXTENSIONS_TAG, list)?.encode_to_vec(&mut content)?;
        }
        Ok(Any::new(Tag::Sequence, content)?.to_der()?)
    }
}

/// The DER `TBSCertificate` of a certificate, byte for byte.
pub fn tbs_certificate(cert_der: &[u8]) -> Result<Vec<u8>, CertError> {
    let cert = AnyRef::from_der(cert_der)?;
    Ok(cert.sequence(|r| {
        let tbs = r.decode::<AnyRef<'_>>()?;
        r.decode::<AnyRef<'_>>()?;
        r.decode::<AnyRef<'_>>()?;
        tbs.to_der()
    })?)
}

/// The DER `SubjectPublicKeyInfo` of a certificate.
pub fn subject_public_key_info(cert_der: &[u8]) -> Result<Vec<u8>, CertError> {
    Ok(RawTbs::parse(cert_der)?.spki().to_der()?)
}

/// The issuer key hash RFC 6962 puts in `precert_entry`: SHA-256 of the
/// certificate's `SubjectPublicKeyInfo`.
pub fn issuer_key_hash(issuer_cert_der: &[u8]) -> Result<Hash, CertError> {
    Ok(Sha256::digest(subject_public_key_info(issuer_cert_der)?).into())
}

/// The `extnValue` content of the extension `oid`, if the certificate has it.
pub fn extension_value(cert_der: &[u8], oid: &ObjectIdentifier) -> Result<Option<Vec<u8>>, CertError> {
    let exts = RawTbs::parse(cert_der)?.extensions()?;
    Ok(exts.into_iter().find(|(e, _)| e.extn_id == *oid).map(|(e, _)| e.extn_value.into_bytes()))
}

/// Whether the certificate is a precertificate: it has the poison extension,
/// which must then be critical.
pub fn is_precertificate(cert_der: &[u8]) -> Result<bool, CertError> {
    let exts = RawTbs::parse(cert_der)?.extensions()?;
    match exts.iter().find(|(e, _)| e.extn_id == POISON_OID) {
        None => Ok(false),
        Some((e, _)) if !e.critical => Err(CertError::BadPoison("not critical")),
        Some(_) => Ok(true),
    }
}

/// Whether the certificate is a Precertificate Signing Certificate (its EKU
/// lists 1.3.6.1.4.1.11129.2.4.4).
pub fn is_precert_signing_certificate(cert_der: &[u8]) -> Result<bool, CertError> {
    let exts = RawTbs::parse(cert_der)?.extensions()?;
    let Some((eku, _)) = exts.iter().find(|(e, _)| e.extn_id == EKU_OID) else { return Ok(false) };
    let eku = ExtendedKeyUsage::from_der(eku.extn_value.as_bytes())?;
    Ok(eku.0.contains(&PRECERT_SIGNING_OID))
}

/// The `precert_entry` of an `add-pre-chain` submission: `chain[0]` is the
/// precertificate, `chain[1]` its issuer (the CA, or a Precertificate Signing
/// Certificate followed by the CA in `chain[2]`).
///
/// This checks the structure only; the caller verifies the chain's signatures
/// and that it ends at an accepted root.
pub fn precert_entry<C: AsRef<[u8]>>(chain: &[C]) -> Result<SignedEntry, CertError> {
    let precert = chain.first().ok_or(CertError::MissingIssuer)?.as_ref();
    let issuer = chain.get(1).ok_or(CertError::MissingIssuer)?.as_ref();
    let tbs = RawTbs::parse(precert)?;
    let mut exts = tbs.extensions()?;
    let poison = exts.iter().position(|(e, _)| e.extn_id == POISON_OID).ok_or(CertError::NotPrecertificate)?;
    if !exts[poison].0.critical {
        return Err(CertError::BadPoison("not critical"));
    }
    exts.remove(poison);
    if !is_precert_signing_certificate(issuer)? {
        let raw: Vec<Vec<u8>> = exts.into_iter().map(|(_, raw)| raw).collect();
        return Ok(SignedEntry::Precert {
            issuer_key_hash: issuer_key_hash(issuer)?,
            tbs_certificate: tbs.rebuild(None, &raw)?,
        });
    }
    // Signed by a Precertificate Signing Certificate: the final certificate
    // names the CA after it, with that CA's key identifier.
    let ca = chain.get(2).ok_or(CertError::MissingIssuer)?.as_ref();
    let psc = RawTbs::parse(issuer)?;
    let psc_aki = psc.extensions()?.into_iter().find(|(e, _)| e.extn_id == AKI_OID).map(|(e, _)| e.extn_value);
    let mut raw = Vec::with_capacity(exts.len() + 1);
    let mut had_aki = false;
    for (ext, der) in exts {
        if ext.extn_id != AKI_OID {
            raw.push(der);
            continue;
        }
        had_aki = true;
        if let Some(value) = &psc_aki {
            raw.push(Extension { extn_id: AKI_OID, critical: ext.critical, extn_value: value.clone() }.to_der()?);
        }
    }
    if let (false, Some(value)) = (had_aki, psc_aki) {
        raw.push(Extension { extn_id: AKI_OID, critical: false, extn_value: value }.to_der()?);
    }
    Ok(SignedEntry::Precert {
        issuer_key_hash: issuer_key_hash(ca)?,
        tbs_certificate: tbs.rebuild(Some(psc.issuer()), &raw)?,
    })
}

/// The TBS of a certificate without the extension `oid` (and unchanged if it
/// has none).
pub fn tbs_without_extension(cert_der: &[u8], oid: &ObjectIdentifier) -> Result<Vec<u8>, CertError> {
    let tbs = RawTbs::parse(cert_der)?;
    let raw: Vec<Vec<u8>> = tbs.extensions()?.into_iter().filter(|(e, _)| e.extn_id != *oid).map(|(_, r)| r).collect();
    tbs.rebuild(None, &raw)
}

/// The `precert_entry` an SCT embedded in a final certificate signed: the TBS
/// without the SCT list extension, and the key hash of `issuer_cert_der`.
pub fn embedded_sct_entry(cert_der: &[u8], issuer_cert_der: &[u8]) -> Result<SignedEntry, CertError> {
    Ok(SignedEntry::Precert {
        issuer_key_hash: issuer_key_hash(issuer_cert_der)?,
        tbs_certificate: tbs_without_extension(cert_der, &SCT_LIST_OID)?,
    })
}

/// The poison extension for a precertificate: critical, value ASN.1 NULL.
pub fn poison_extension() -> Result<Extension, CertError> {
    Ok(Extension { extn_id: POISON_OID, critical: true, extn_value: OctetString::new(vec![0x05, 0x00])? })
}

#[cfg(test)]
mod tests {
    use super::super::testdata::*;
    use super::*;

    #[test]
    fn issuer_key_hash_of_the_test_ca() {
        assert_eq!(hex::encode(issuer_key_hash(&unhex(CA_CERT)).unwrap()), ISSUER_KEY_HASH);
    }

    #[test]
    fn tbs_is_extracted_byte_for_byte() {
        let cert = unhex(TEST_CERT);
        let tbs = tbs_certificate(&cert).unwrap();
        assert_eq!(&cert[4..4 + tbs.len()], &tbs[..]);
        // Removing an extension the certificate does not have changes nothing.
        assert_eq!(tbs_without_extension(&cert, &POISON_OID).unwrap(), tbs);
    }

    #[test]
    fn removing_the_sct_list_gives_the_signed_tbs() {
        let tbs = tbs_without_extension(&unhex(EMBEDDED_CERT), &SCT_LIST_OID).unwrap();
        assert_eq!(hex::encode(tbs), TBS_CERT);
        let entry = embedded_sct_entry(&unhex(EMBEDDED_CERT), &unhex(CA_CERT)).unwrap();
        let SignedEntry::Precert { issuer_key_hash, .. } = entry else { panic!() };
        assert_eq!(hex::encode(issuer_key_hash), ISSUER_KEY_HASH);
    }

    #[test]
    fn ordinary_certificates_are_not_precertificates() {
        assert!(!is_precertificate(&unhex(TEST_CERT)).unwrap());
        assert!(!is_precert_signing_certificate(&unhex(CA_CERT)).unwrap());
        assert_eq!(precert_entry(&[unhex(TEST_CERT), unhex(CA_CERT)]), Err(CertError::NotPrecertificate));
        assert_eq!(precert_entry(&[unhex(TEST_CERT)]), Err(CertError::MissingIssuer));
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [&b""[..], b"\x30\x00", b"\x30\x03\x02\x01\x01", &unhex(TEST_CERT)[..100]] {
            assert!(tbs_certificate(bad).is_err());
            assert!(issuer_key_hash(bad).is_err());
            assert!(is_precertificate(bad).is_err());
            assert!(precert_entry(&[bad, bad]).is_err());
        }
    }

    #[test]
    fn poison_extension_encoding() {
        assert_eq!(
            hex::encode(poison_extension().unwrap().to_der().unwrap()),
            "3013060a2b06010401d6790204030101ff04020500"
        );
    }
}
