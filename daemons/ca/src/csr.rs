//! PKCS#10 certificate signing requests: parse, verify the self-signature, extract.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use const_oid::AssociatedOid;
use der::{Decode, Encode};
use signet_types::KeyAlgorithm;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::request::{CertReq, ExtensionReq, Version};

use crate::alg::{self, oid};
use crate::{CaError, SanEntry};

/// What a verified CSR asks for.
#[derive(Clone, Debug)]
pub struct ParsedCsr {
    /// The subject DN (possibly empty).
    pub subject: Name,
    /// The subject's SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// The subject key's algorithm.
    pub key_algorithm: KeyAlgorithm,
    /// SANs from the extensionRequest attribute.
    pub sans: Vec<SanEntry>,
    /// All extensions from the extensionRequest attribute, for callers that want
    /// more than SANs. The CA never copies them into a certificate blindly.
    pub requested_extensions: Vec<Extension>,
}

/// Parses a CSR given as PEM (`CERTIFICATE REQUEST` or `NEW CERTIFICATE REQUEST`)
/// or DER, verifies its self-signature with OpenSSL, and extracts what it asks for.
pub fn parse_csr(input: &[u8]) -> Result<ParsedCsr, CaError> {
    let der = if input.trim_ascii_start().starts_with(b"-----BEGIN") {
        let (label, der) = der::pem::decode_vec(input.trim_ascii()).map_err(|e| CaError::CsrPem(e.to_string()))?;
        if label != "CERTIFICATE REQUEST" && label != "NEW CERTIFICATE REQUEST" {
            return Err(CaError::CsrPem(format!("unexpected PEM label {label:?}")));
        }
        der
    } else {
        input.to_vec()
    };
    let req = CertReq::from_der(&der).map_err(CaError::malformed("CSR"))?;
    if req.info.version != Version::V1 {
        return Err(CaError::CsrVersion);
    }
    let key_algorithm = alg::key_algorithm_of_spki(&req.info.public_key)?;
    match verify_ecdsa(&der, &req, key_algorithm) {
        Some(verified) => verified?,
        None => verify_self_signature(&der)?,
    }

    let mut ext_reqs = req.info.attributes.iter().filter(|a| a.oid == oid::EXTENSION_REQUEST);
    let requested_extensions = match (ext_reqs.next(), ext_reqs.next()) {
        (None, _) => Vec::new(),
        (Some(_), Some(_)) => return Err(CaError::CsrExtensionRequest("attribute appears twice".into())),
        (Some(attr), None) => {
            let mut values = attr.values.iter();
            let (Some(value), None) = (values.next(), values.next()) else {
                return Err(CaError::CsrExtensionRequest("attribute must have exactly one value".into()));
            };
            let value_der = value.to_der().map_err(CaError::Encode)?;
            ExtensionReq::from_der(&value_der).map_err(|e| CaError::CsrExtensionRequest(e.to_string()))?.0
        }
    };

    let mut sans = Vec::new();
    let mut seen_san = false;
    for ext in &requested_extensions {
        if ext.extn_id != SubjectAltName::OID {
            continue;
        }
        if seen_san {
            return Err(CaError::CsrExtensionRequest("subjectAltName appears twice".into()));
        }
        seen_san = true;
        let san = SubjectAltName::from_der(ext.extn_value.as_bytes())
            .map_err(|e| CaError::CsrExtensionRequest(format!("subjectAltName: {e}")))?;
        for name in san.0 {
            sans.push(san_entry(name)?);
        }
    }

    Ok(ParsedCsr {
        subject: req.info.subject,
        spki_der: req.info.public_key.to_der().map_err(CaError::Encode)?,
        key_algorithm,
        sans,
        requested_extensions,
    })
}

pub(crate) fn san_entry(name: GeneralName) -> Result<SanEntry, CaError> {
    match name {
        GeneralName::DnsName(s) => Ok(SanEntry::Dns(s.to_string())),
        GeneralName::Rfc822Name(s) => Ok(SanEntry::Email(s.to_string())),
        GeneralName::IpAddress(octets) => match octets.as_bytes() {
            b if b.len() == 4 => Ok(SanEntry::Ip(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))),
            b if b.len() == 16 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                Ok(SanEntry::Ip(IpAddr::V6(Ipv6Addr::from(a))))
            }
            b => Err(CaError::InvalidSan(format!("iPAddress of {} octets", b.len()))),
        },
        GeneralName::OtherName(_) => Err(CaError::UnsupportedSan("otherName")),
        GeneralName::DirectoryName(_) => Err(CaError::UnsupportedSan("directoryName")),
        GeneralName::EdiPartyName(_) => Err(CaError::UnsupportedSan("ediPartyName")),
        GeneralName::UniformResourceIdentifier(_) => Err(CaError::UnsupportedSan("uniformResourceIdentifier")),
        GeneralName::RegisteredId(_) => Err(CaError::UnsupportedSan("registeredID")),
    }
}

/// Verifies the CSR's signature with its own key. OpenSSL (vendored 3.5) covers
/// every algorithm signd has, ML-DSA included.
/// ECDSA over a named curve with SHA-2, the common case (an ACME finalize
/// carries one): verified on an `EC_KEY` made from the raw point, which skips
/// what OpenSSL 3's generic path pays per call (decoding the SPKI through
/// its decoder framework, fetching the algorithms). `None` for any other
/// key or signature algorithm, which [`verify_self_signature`] handles.
///
/// As strict as the generic path: the signature must be DER (it is
/// re-encoded and compared, as OpenSSL's own ECDSA verification does) and
/// the point on the curve (`EC_POINT_oct2point` checks it).
fn verify_ecdsa(der: &[u8], req: &CertReq, key: KeyAlgorithm) -> Option<Result<(), CaError>> {
    use openssl::bn::BigNumContext;
    use openssl::ec::{EcGroup, EcKey, EcPoint};
    use openssl::ecdsa::EcdsaSig;
    use openssl::hash::{hash, MessageDigest};
    use openssl::nid::Nid;

    let digest = match (&req.algorithm.oid, &req.algorithm.parameters) {
        (&oid::ECDSA_SHA256, None) => MessageDigest::sha256(),
        (&oid::ECDSA_SHA384, None) => MessageDigest::sha384(),
        (&oid::ECDSA_SHA512, None) => MessageDigest::sha512(),
        _ => return None,
    };
    // Each curve's group is made once per process (making one computes its Montgomery constants).
    static GROUPS: [std::sync::OnceLock<Option<EcGroup>>; 3] = [const { std::sync::OnceLock::new() }; 3];
    let (i, curve) = match key {
        KeyAlgorithm::EcP256 => (0, Nid::X9_62_PRIME256V1),
        KeyAlgorithm::EcP384 => (1, Nid::SECP384R1),
        KeyAlgorithm::EcP521 => (2, Nid::SECP521R1),
        _ => return None,
    };
    let mismatch = || CaError::CsrSignature("signature mismatch".into());
    let verify = || -> Result<(), CaError> {
        let fail = |e: openssl::error::ErrorStack| CaError::CsrSignature(e.to_string());
        // The signed bytes are the CertificationRequestInfo exactly as sent.
        let tbs = signed_info(der).map_err(CaError::malformed("CSR"))?;
        let (Some(point), Some(sig_der)) =
            (req.info.public_key.subject_public_key.as_bytes(), req.signature.as_bytes())
        else {
            return Err(mismatch());
        };
        let group = match GROUPS[i].get_or_init(|| EcGroup::from_curve_name(curve).ok()) {
            Some(g) => g,
            None => return Err(fail(openssl::error::ErrorStack::get())),
        };
        let mut ctx = BigNumContext::new().map_err(fail)?;
        let point = EcPoint::from_bytes(group, point, &mut ctx).map_err(fail)?;
        let key = EcKey::from_public_key(group, &point).map_err(fail)?;
        let sig = EcdsaSig::from_der(sig_der).map_err(|_| mismatch())?;
        if sig.to_der().map_err(fail)? != sig_der {
            return Err(mismatch());
        }
        let digest = hash(digest, tbs).map_err(fail)?;
        match sig.verify(&digest, &key) {
            Ok(true) => Ok(()),
            Ok(false) => Err(mismatch()),
            Err(e) => Err(fail(e)),
        }
    };
    Some(verify())
}

/// The DER of the CertificationRequestInfo inside a CertificationRequest.
fn signed_info(der: &[u8]) -> der::Result<&[u8]> {
    use der::{Reader, SliceReader};
    let mut outer = SliceReader::new(der)?;
    let header = outer.peek_header()?;
    header.tag.assert_eq(der::Tag::Sequence)?;
    let _ = der::Header::decode(&mut outer)?;
    outer.tlv_bytes()
}

fn verify_self_signature(der: &[u8]) -> Result<(), CaError> {
    let fail = |e: openssl::error::ErrorStack| CaError::CsrSignature(e.to_string());
    let req = openssl::x509::X509Req::from_der(der).map_err(fail)?;
    let key = req.public_key().map_err(fail)?;
    match req.verify(&key) {
        Ok(true) => Ok(()),
        Ok(false) => Err(CaError::CsrSignature("signature mismatch".into())),
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use openssl::hash::MessageDigest;
    use openssl::stack::Stack;
    use openssl::x509::extension::SubjectAlternativeName;
    use openssl::x509::{X509NameBuilder, X509ReqBuilder};
    use signet_types::SignatureScheme;

    use super::*;
    use crate::testutil::TestKey;

    fn csr(key: &TestKey, digest: MessageDigest) -> Vec<u8> {
        let mut b = X509ReqBuilder::new().unwrap();
        let mut n = X509NameBuilder::new().unwrap();
        n.append_entry_by_text("CN", "csr.example.com").unwrap();
        b.set_subject_name(&n.build()).unwrap();
        b.set_pubkey(&key.pkey).unwrap();
        let mut exts = Stack::new().unwrap();
        let san = SubjectAlternativeName::new()
            .dns("csr.example.com")
            .ip("10.0.0.1")
            .email("ops@example.com")
            .build(&b.x509v3_context(None))
            .unwrap();
        exts.push(san).unwrap();
        b.add_extensions(&exts).unwrap();
        b.sign(&key.pkey, digest).unwrap();
        b.build().to_der().unwrap()
    }

    #[test]
    fn parses_and_verifies_csrs_of_each_algorithm() {
        for (alg, digest) in [
            (KeyAlgorithm::EcP256, MessageDigest::sha256()),
            (KeyAlgorithm::Ed25519, MessageDigest::null()),
            (KeyAlgorithm::Rsa2048, MessageDigest::sha256()),
            (KeyAlgorithm::MlDsa44, MessageDigest::null()),
        ] {
            let key = TestKey::new(alg, SignatureScheme::Default);
            let der = csr(&key, digest);
            let parsed = parse_csr(&der).unwrap();
            assert_eq!(parsed.key_algorithm, alg);
            assert_eq!(parsed.spki_der, key.spki_der());
            assert_eq!(
                parsed.sans,
                vec![
                    SanEntry::Dns("csr.example.com".into()),
                    SanEntry::Ip("10.0.0.1".parse().unwrap()),
                    SanEntry::Email("ops@example.com".into())
                ]
            );
            let pem = der::pem::encode_string("CERTIFICATE REQUEST", der::pem::LineEnding::LF, &der).unwrap();
            assert_eq!(parse_csr(pem.as_bytes()).unwrap().subject, parsed.subject);
        }
    }

    #[test]
    fn typed_errors() {
        let key = TestKey::new(KeyAlgorithm::EcP256, SignatureScheme::Default);
        let mut der = csr(&key, MessageDigest::sha256());
        let last = der.len() - 3;
        der[last] ^= 0x01; // inside the signature
        assert!(matches!(parse_csr(&der), Err(CaError::CsrSignature(_))));
        assert!(matches!(parse_csr(b"\x30\x00"), Err(CaError::Malformed { .. })));
        assert!(matches!(
            parse_csr(b"-----BEGIN CERTIFICATE REQUEST-----\n!!\n-----END CERTIFICATE REQUEST-----\n"),
            Err(CaError::CsrPem(_))
        ));
        let good = csr(&key, MessageDigest::sha256());
        let cert_pem = der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, &good).unwrap();
        assert!(matches!(parse_csr(cert_pem.as_bytes()), Err(CaError::CsrPem(_))));
    }

    /// The ECDSA fast path and OpenSSL's generic X509_REQ_verify agree, on
    /// good CSRs of every curve and digest and on each kind of tampering.
    #[test]
    fn ecdsa_fast_path_agrees_with_openssl() {
        for (alg, digest) in [
            (KeyAlgorithm::EcP256, MessageDigest::sha256()),
            (KeyAlgorithm::EcP256, MessageDigest::sha512()),
            (KeyAlgorithm::EcP384, MessageDigest::sha384()),
            (KeyAlgorithm::EcP521, MessageDigest::sha512()),
        ] {
            // Both paths refuse `der`, the fast one with a signature error.
            let both_refuse = |der: &[u8]| {
                let got = verify_ecdsa(der, &CertReq::from_der(der).unwrap(), alg);
                assert!(matches!(got, Some(Err(CaError::CsrSignature(_)))), "{alg:?} {got:?}");
                assert!(verify_self_signature(der).is_err(), "{alg:?}: OpenSSL refuses it too");
            };
            let key = TestKey::new(alg, SignatureScheme::Default);
            let good = csr(&key, digest);
            let req = CertReq::from_der(&good).unwrap();
            assert!(matches!(verify_ecdsa(&good, &req, alg), Some(Ok(()))), "{alg:?}");
            verify_self_signature(&good).unwrap();

            // A byte of the subject changed: same length, still parses.
            let at = good.windows(15).position(|w| w == b"csr.example.com").unwrap();
            let mut tampered = good.clone();
            tampered[at] ^= 0x01;
            both_refuse(&tampered);

            // The signature's INTEGER r with a redundant leading zero: BER, not DER.
            let sig = req.signature.as_bytes().unwrap().to_vec();
            let sig = openssl::ecdsa::EcdsaSig::from_der(&sig).unwrap();
            let (r, s_) = (sig.r().to_vec(), sig.s().to_vec());
            let int = |v: &[u8], pad: bool| {
                let mut body = Vec::new();
                if pad {
                    body.push(0);
                }
                if v[0] & 0x80 != 0 {
                    body.push(0);
                }
                body.extend_from_slice(v);
                der::asn1::AnyRef::new(der::Tag::Integer, &body).unwrap().to_der().unwrap()
            };
            let mut seq_body = int(&r, true);
            seq_body.extend(int(&s_, false));
            let ber_sig = der::asn1::AnyRef::new(der::Tag::Sequence, &seq_body).unwrap().to_der().unwrap();
            let mut ber = req;
            ber.signature = der::asn1::BitString::from_bytes(&ber_sig).unwrap();
            both_refuse(&ber.to_der().unwrap());
        }
        // Other algorithms take the generic path.
        let key = TestKey::new(KeyAlgorithm::Ed25519, SignatureScheme::Default);
        let der = csr(&key, MessageDigest::null());
        let req = CertReq::from_der(&der).unwrap();
        assert!(verify_ecdsa(&der, &req, KeyAlgorithm::Ed25519).is_none());
    }
}
