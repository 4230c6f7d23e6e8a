//! Building TBSCertificates (end-entity, root, intermediate, OCSP responder) and
//! assembling signed certificates.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use const_oid::{AssociatedOid, ObjectIdentifier};
use der::asn1::{AnyRef, BitStringRef, Ia5String, Null, OctetString};
use der::{Decode, Encode, Sequence, Tag, Tagged};
use rand_core::RngCore;
use signet_types::{KeyAlgorithm, SignatureScheme};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::certificate::{TbsCertificate, Version};
use x509_cert::ext::pkix::crl::dp::DistributionPoint;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::{
    AccessDescription, AuthorityInfoAccessSyntax, AuthorityKeyIdentifier, BasicConstraints, CrlDistributionPoints,
    ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::Validity;
use x509_cert::Certificate;

use crate::alg::{self, oid, parse_spki, resolve_scheme, to_der};
use crate::profile::{Eku, KeyUsageBit, Profile, SHARD_PLACEHOLDER};
use crate::time::{whole_seconds, x509_time};
use crate::CaError;

/// The CA that signs: what a TBS needs to name it, and how it signs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issuer {
    /// The CA certificate's subject (becomes the issuer of what it signs).
    pub name: Name,
    /// The CA certificate's subjectKeyIdentifier (becomes the AKI).
    pub key_id: Vec<u8>,
    /// The CA key's algorithm.
    pub key_algorithm: KeyAlgorithm,
    /// The scheme signd signs with (resolved: never `Default`).
    pub scheme: SignatureScheme,
}

impl Issuer {
    /// An issuer from its name and SubjectPublicKeyInfo DER; the key id is computed
    /// by RFC 5280 method 1. `scheme` may be `Default`.
    pub fn new(name: Name, spki_der: &[u8], scheme: SignatureScheme) -> Result<Self, CaError> {
        let spki = parse_spki(spki_der)?;
        let key_algorithm = alg::key_algorithm_of_spki(&spki)?;
        Ok(Self {
            name,
            key_id: alg::subject_key_identifier(&spki),
            key_algorithm,
            scheme: resolve_scheme(key_algorithm, scheme)?,
        })
    }

    /// An issuer from its certificate (DER); the key id is the certificate's SKI
    /// extension, or computed if it has none.
    pub fn from_certificate_der(cert_der: &[u8], scheme: SignatureScheme) -> Result<Self, CaError> {
        let cert = Certificate::from_der(cert_der).map_err(CaError::malformed("Certificate"))?;
        let tbs = cert.tbs_certificate;
        let spki = &tbs.subject_public_key_info;
        let key_algorithm = alg::key_algorithm_of_spki(spki)?;
        let key_id = match tbs.get::<SubjectKeyIdentifier>() {
            Ok(Some((_, ski))) => ski.0.as_bytes().to_vec(),
            Ok(None) => alg::subject_key_identifier(spki),
            Err(source) => return Err(CaError::MalformedExtension { oid: SubjectKeyIdentifier::OID, source }),
        };
        Ok(Self { name: tbs.subject, key_id, key_algorithm, scheme: resolve_scheme(key_algorithm, scheme)? })
    }

    /// The AlgorithmIdentifier of this issuer's signatures.
    pub fn signature_algorithm(&self) -> Result<AlgorithmIdentifierOwned, CaError> {
        alg::signature_algorithm(self.scheme)
    }
}

/// A subjectAltName entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SanEntry {
    /// dNSName (a leading `*.` wildcard label is allowed).
    Dns(String),
    /// iPAddress (IPv4 or IPv6).
    Ip(IpAddr),
    /// rfc822Name.
    Email(String),
}

/// What a caller asks for in an end-entity certificate (usually from a CSR or ACME order).
#[derive(Clone, Debug)]
pub struct LeafRequest {
    /// The subject DN; may be empty when there are SANs (the SAN is then critical).
    pub subject: Name,
    /// The subject's SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// subjectAltNames.
    pub sans: Vec<SanEntry>,
    /// Requested validity; `None` is the profile default. Clamped to the profile maximum.
    pub validity: Option<Duration>,
    /// Exact notBefore and notAfter (whole seconds; both inclusive, as in RFC 5280), e.g. from an
    /// ACME order's notBefore/notAfter; overrides `validity` and the profile's backdating. Not
    /// clamped: a period longer than the profile maximum, or notAfter before notBefore, is an error.
    pub exact_validity: Option<(SystemTime, SystemTime)>,
    /// Requested EKUs; `None` is the profile default. Each must be allowed by the profile.
    pub ekus: Option<Vec<Eku>>,
    /// The CRL shard the certificate belongs to (fills `{shard}` in the CRL URL).
    pub crl_shard: Option<u32>,
}

/// What a CA certificate (root or intermediate) should contain.
#[derive(Clone, Debug)]
pub struct CaRequest {
    /// The CA's subject DN (must not be empty).
    pub subject: Name,
    /// The CA key's SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// Validity (notAfter = notBefore + validity - 1 s).
    pub validity: Duration,
    /// How far before `now` notBefore is set.
    pub backdate: Duration,
    /// basicConstraints pathLenConstraint (`None`: unlimited).
    pub path_len: Option<u8>,
    /// AIA OCSP URLs (intermediates; usually empty for roots).
    pub ocsp_urls: Vec<String>,
    /// AIA caIssuers URL.
    pub ca_issuers_url: Option<String>,
    /// CRL distribution point URL (no `{shard}` placeholder here).
    pub crl_url: Option<String>,
}

impl CaRequest {
    /// A CA certificate for `spki_der` named `subject`, valid `validity`
    /// from an hour ago (clock skew), without AIA or CRL distribution point:
    /// what the CA ceremony (`signetctl ca init`) and an issuing CA's rotation
    /// (signd's `issueIssuingCa`) both build.
    pub fn new(subject: Name, spki_der: Vec<u8>, validity: Duration, path_len: Option<u8>) -> Self {
        Self {
            subject,
            spki_der,
            validity,
            backdate: Duration::from_secs(3600),
            path_len,
            ocsp_urls: vec![],
            ca_issuers_url: None,
            crl_url: None,
        }
    }
}

/// What a delegated OCSP responder certificate should contain.
#[derive(Clone, Debug)]
pub struct ResponderRequest {
    /// The responder's subject DN.
    pub subject: Name,
    /// The responder key's SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// Validity; keep it short, as the certificate carries id-pkix-ocsp-nocheck.
    pub validity: Duration,
    /// How far before `now` notBefore is set.
    pub backdate: Duration,
}

/// Builds an end-entity TBSCertificate (DER) under `profile`.
pub fn build_leaf_tbs(
    profile: &Profile,
    issuer: &Issuer,
    req: &LeafRequest,
    now: SystemTime,
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CaError> {
    let spki = parse_spki(&req.spki_der)?;
    let key_alg = alg::key_algorithm_of_spki(&spki)?;
    if !profile.allows_key(key_alg) {
        return Err(CaError::KeyAlgorithmNotAllowed { profile: profile.name.clone(), algorithm: key_alg });
    }
    for san in &req.sans {
        let (allowed, kind) = match san {
            SanEntry::Dns(_) => (profile.allow_dns_sans, "DNS"),
            SanEntry::Ip(_) => (profile.allow_ip_sans, "IP"),
            SanEntry::Email(_) => (profile.allow_email_sans, "email"),
        };
        if !allowed {
            return Err(CaError::SanKindNotAllowed { profile: profile.name.clone(), kind });
        }
    }
    let empty_subject = req.subject.0.is_empty();
    if empty_subject && req.sans.is_empty() {
        return Err(CaError::NoSubjectOrSan);
    }
    let ekus = req.ekus.as_ref().unwrap_or(&profile.default_ekus);
    if let Some(bad) = ekus.iter().find(|e| !profile.allowed_ekus.contains(e) || **e == Eku::OcspSigning) {
        return Err(CaError::EkuNotAllowed(bad.oid()));
    }

    let validity = match req.exact_validity {
        Some((not_before, not_after)) => validity_between(not_before, not_after, profile.max_validity())?,
        None => {
            let default_validity =
                Duration::from_secs(profile.default_validity_seconds.unwrap_or(profile.max_validity_seconds));
            let validity = req.validity.unwrap_or(default_validity).min(profile.max_validity());
            validity_from(now, Duration::from_secs(profile.backdate_seconds), validity)?
        }
    };

    let mut exts = vec![
        ext(&BasicConstraints { ca: false, path_len_constraint: None }, true)?,
        ext(&leaf_key_usage(&profile.key_usage, key_alg), true)?,
    ];
    if !ekus.is_empty() {
        exts.push(ext(&ExtendedKeyUsage(ekus.iter().map(|e| e.oid()).collect()), false)?);
    }
    exts.push(ext(&SubjectKeyIdentifier(OctetString::new(alg::subject_key_identifier(&spki))?), false)?);
    exts.push(ext(&aki(issuer)?, false)?);
    if let Some(aia) = aia(&profile.ocsp_urls, profile.ca_issuers_url.as_deref())? {
        exts.push(ext(&aia, false)?);
    }
    if let Some(url) = &profile.crl_url {
        let url = if url.contains(SHARD_PLACEHOLDER) {
            url.replace(SHARD_PLACEHOLDER, &req.crl_shard.ok_or(CaError::CrlShardRequired)?.to_string())
        } else {
            url.clone()
        };
        exts.push(ext(&crl_dp(&url)?, false)?);
    }
    if !req.sans.is_empty() {
        // RFC 5280 4.2.1.6: critical when the subject is empty.
        exts.push(ext(&SubjectAltName(general_names(&req.sans)?), empty_subject)?);
    }
    if profile.must_staple {
        // TLSFeature ::= SEQUENCE OF INTEGER; status_request = 5 (RFC 7633).
        exts.push(ext_raw(oid::TLS_FEATURE, false, &vec![5u32])?);
    }

    encode_tbs(random_serial(rng)?, issuer, validity, req.subject.clone(), spki, exts)
}

/// Builds a self-signed root TBSCertificate (issuer = subject, AKI = SKI). `scheme`
/// is how the root's own key will sign it (may be `Default`).
pub fn build_root_tbs(
    req: &CaRequest,
    scheme: SignatureScheme,
    now: SystemTime,
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CaError> {
    let issuer = Issuer::new(req.subject.clone(), &req.spki_der, scheme)?;
    build_ca_tbs(req, &issuer, now, rng)
}

/// Builds an intermediate (issuing) CA TBSCertificate signed by `issuer`.
pub fn build_intermediate_tbs(
    req: &CaRequest,
    issuer: &Issuer,
    now: SystemTime,
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CaError> {
    build_ca_tbs(req, issuer, now, rng)
}

fn build_ca_tbs(req: &CaRequest, issuer: &Issuer, now: SystemTime, rng: &mut dyn RngCore) -> Result<Vec<u8>, CaError> {
    if req.subject.0.is_empty() {
        return Err(CaError::NoSubjectOrSan);
    }
    let spki = parse_spki(&req.spki_der)?;
    alg::key_algorithm_of_spki(&spki)?;
    let validity = validity_from(now, req.backdate, req.validity)?;
    let mut ku = KeyUsage(KeyUsages::KeyCertSign.into());
    ku.0 |= KeyUsages::CRLSign;
    ku.0 |= KeyUsages::DigitalSignature;
    let mut exts = vec![
        ext(&BasicConstraints { ca: true, path_len_constraint: req.path_len }, true)?,
        ext(&ku, true)?,
        ext(&SubjectKeyIdentifier(OctetString::new(alg::subject_key_identifier(&spki))?), false)?,
        ext(&aki(issuer)?, false)?,
    ];
    if let Some(aia) = aia(&req.ocsp_urls, req.ca_issuers_url.as_deref())? {
        exts.push(ext(&aia, false)?);
    }
    if let Some(url) = &req.crl_url {
        exts.push(ext(&crl_dp(url)?, false)?);
    }
    encode_tbs(random_serial(rng)?, issuer, validity, req.subject.clone(), spki, exts)
}

/// Builds a delegated OCSP responder TBSCertificate: CA:FALSE, digitalSignature,
/// EKU id-kp-OCSPSigning only, id-pkix-ocsp-nocheck.
pub fn build_ocsp_responder_tbs(
    req: &ResponderRequest,
    issuer: &Issuer,
    now: SystemTime,
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CaError> {
    let spki = parse_spki(&req.spki_der)?;
    alg::key_algorithm_of_spki(&spki)?;
    let validity = validity_from(now, req.backdate, req.validity)?;
    let exts = vec![
        ext(&BasicConstraints { ca: false, path_len_constraint: None }, true)?,
        ext(&KeyUsage(KeyUsages::DigitalSignature.into()), true)?,
        ext(&ExtendedKeyUsage(vec![Eku::OcspSigning.oid()]), false)?,
        ext_raw(oid::OCSP_NOCHECK, false, &Null)?,
        ext(&SubjectKeyIdentifier(OctetString::new(alg::subject_key_identifier(&spki))?), false)?,
        ext(&aki(issuer)?, false)?,
    ];
    encode_tbs(random_serial(rng)?, issuer, validity, req.subject.clone(), spki, exts)
}

/// Wraps a TBSCertificate and signd's signature into a Certificate (DER).
///
/// The TBS bytes are copied verbatim (they are what was signed); `scheme` must be
/// the scheme the signature was made with (`Default` is refused: resolve it first).
pub fn assemble_certificate(tbs_der: &[u8], scheme: SignatureScheme, signature: &[u8]) -> Result<Vec<u8>, CaError> {
    assemble_signed(tbs_der, scheme, signature, "TBSCertificate")
}

/// `SEQUENCE { tbs, signatureAlgorithm, signature BIT STRING }`: the shape of
/// Certificate and CertificateList; the TBS is carried as its exact bytes.
#[derive(Sequence)]
struct Signed<'a> {
    tbs: AnyRef<'a>,
    algorithm: AlgorithmIdentifierOwned,
    signature: BitStringRef<'a>,
}

pub(crate) fn assemble_signed(
    tbs_der: &[u8],
    scheme: SignatureScheme,
    signature: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, CaError> {
    let tbs = AnyRef::from_der(tbs_der).map_err(CaError::malformed(what))?;
    if tbs.tag() != Tag::Sequence {
        return Err(CaError::Malformed {
            what,
            source: der::ErrorKind::TagUnexpected { expected: Some(Tag::Sequence), actual: tbs.tag() }.into(),
        });
    }
    let signed =
        Signed { tbs, algorithm: alg::signature_algorithm(scheme)?, signature: BitStringRef::from_bytes(signature)? };
    to_der(&signed)
}

/// A random, positive, 16-octet serial number (126 random bits; CA/B BR want >= 64).
pub fn random_serial(rng: &mut dyn RngCore) -> Result<SerialNumber, CaError> {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    // Top bit clear (positive), second bit set (no leading zero octet: fixed length).
    bytes[0] = (bytes[0] & 0x3f) | 0x40;
    Ok(SerialNumber::new(&bytes)?)
}

fn validity_from(now: SystemTime, backdate: Duration, validity: Duration) -> Result<Validity, CaError> {
    if validity < Duration::from_secs(1) {
        return Err(CaError::ValidityInverted);
    }
    let not_before = whole_seconds(now)?.checked_sub(backdate).ok_or(CaError::TimeOutOfRange)?;
    // RFC 5280's validity period is inclusive of both ends.
    let not_after = not_before + validity - Duration::from_secs(1);
    Ok(Validity { not_before: x509_time(not_before)?, not_after: x509_time(not_after)? })
}

/// An exact validity (whole seconds) whose period, inclusive of both ends, is at most `max`.
fn validity_between(not_before: SystemTime, not_after: SystemTime, max: Duration) -> Result<Validity, CaError> {
    let (not_before, not_after) = (whole_seconds(not_before)?, whole_seconds(not_after)?);
    let period = not_after.duration_since(not_before).map_err(|_| CaError::ValidityInverted)? + Duration::from_secs(1);
    if period > max {
        return Err(CaError::ValidityTooLong { requested: period, max });
    }
    Ok(Validity { not_before: x509_time(not_before)?, not_after: x509_time(not_after)? })
}

fn encode_tbs(
    serial_number: SerialNumber,
    issuer: &Issuer,
    validity: Validity,
    subject: Name,
    subject_public_key_info: SubjectPublicKeyInfoOwned,
    extensions: Vec<Extension>,
) -> Result<Vec<u8>, CaError> {
    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number,
        signature: issuer.signature_algorithm()?,
        issuer: issuer.name.clone(),
        validity,
        subject,
        subject_public_key_info,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(extensions),
    };
    to_der(&tbs)
}

fn leaf_key_usage(bits: &[KeyUsageBit], key: KeyAlgorithm) -> KeyUsage {
    let rsa = matches!(key, KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096);
    let ec = matches!(key, KeyAlgorithm::EcP256 | KeyAlgorithm::EcP384 | KeyAlgorithm::EcP521);
    let mut ku = KeyUsage(KeyUsages::DigitalSignature.into());
    for bit in bits {
        match bit {
            KeyUsageBit::DigitalSignature => {}
            KeyUsageBit::NonRepudiation => ku.0 |= KeyUsages::NonRepudiation,
            KeyUsageBit::KeyEncipherment if rsa => ku.0 |= KeyUsages::KeyEncipherment,
            KeyUsageBit::DataEncipherment if rsa => ku.0 |= KeyUsages::DataEncipherment,
            KeyUsageBit::KeyAgreement if ec => ku.0 |= KeyUsages::KeyAgreement,
            KeyUsageBit::KeyEncipherment | KeyUsageBit::DataEncipherment | KeyUsageBit::KeyAgreement => {}
        }
    }
    ku
}

fn aki(issuer: &Issuer) -> Result<AuthorityKeyIdentifier, CaError> {
    Ok(AuthorityKeyIdentifier {
        key_identifier: Some(OctetString::new(issuer.key_id.clone())?),
        authority_cert_issuer: None,
        authority_cert_serial_number: None,
    })
}

fn uri(url: &str) -> Result<GeneralName, CaError> {
    Ok(GeneralName::UniformResourceIdentifier(Ia5String::new(url).map_err(|_| CaError::InvalidSan(url.into()))?))
}

fn aia(ocsp_urls: &[String], ca_issuers: Option<&str>) -> Result<Option<AuthorityInfoAccessSyntax>, CaError> {
    let mut access = Vec::new();
    for url in ocsp_urls {
        access.push(AccessDescription { access_method: oid::AD_OCSP, access_location: uri(url)? });
    }
    if let Some(url) = ca_issuers {
        access.push(AccessDescription { access_method: oid::AD_CA_ISSUERS, access_location: uri(url)? });
    }
    Ok((!access.is_empty()).then_some(AuthorityInfoAccessSyntax(access)))
}

pub(crate) fn crl_dp(url: &str) -> Result<CrlDistributionPoints, CaError> {
    Ok(CrlDistributionPoints(vec![DistributionPoint {
        distribution_point: Some(DistributionPointName::FullName(vec![uri(url)?])),
        reasons: None,
        crl_issuer: None,
    }]))
}

fn general_names(sans: &[SanEntry]) -> Result<Vec<GeneralName>, CaError> {
    sans.iter()
        .map(|san| match san {
            SanEntry::Dns(name) => {
                if !valid_dns_name(name) {
                    return Err(CaError::InvalidSan(name.clone()));
                }
                Ok(GeneralName::DnsName(Ia5String::new(name).map_err(|_| CaError::InvalidSan(name.clone()))?))
            }
            SanEntry::Ip(IpAddr::V4(ip)) => Ok(GeneralName::IpAddress(OctetString::new(ip.octets().to_vec())?)),
            SanEntry::Ip(IpAddr::V6(ip)) => Ok(GeneralName::IpAddress(OctetString::new(ip.octets().to_vec())?)),
            SanEntry::Email(addr) => {
                let ok = addr.is_ascii()
                    && addr.split_once('@').is_some_and(|(l, d)| !l.is_empty() && valid_dns_name(d))
                    && !addr.contains(char::is_whitespace);
                if !ok {
                    return Err(CaError::InvalidSan(addr.clone()));
                }
                Ok(GeneralName::Rfc822Name(Ia5String::new(addr).map_err(|_| CaError::InvalidSan(addr.clone()))?))
            }
        })
        .collect()
}

/// LDH labels of 1..=63 octets, total <= 253, optional leading `*` label.
pub(crate) fn valid_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

pub(crate) fn ext<T: AssociatedOid + Encode>(value: &T, critical: bool) -> Result<Extension, CaError> {
    ext_raw(T::OID, critical, value)
}

pub(crate) fn ext_raw(oid: ObjectIdentifier, critical: bool, value: &impl Encode) -> Result<Extension, CaError> {
    Ok(Extension { extn_id: oid, critical, extn_value: OctetString::new(to_der(value)?)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn serials_are_positive_16_octets_and_differ() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let a = random_serial(&mut rng).unwrap();
        let b = random_serial(&mut rng).unwrap();
        assert_eq!(a.as_bytes().len(), 16);
        assert!(a.as_bytes()[0] & 0x80 == 0);
        assert_ne!(a, b);
    }

    #[test]
    fn dns_names() {
        assert!(valid_dns_name("example.com"));
        assert!(valid_dns_name("*.example.com"));
        assert!(!valid_dns_name("exa mple.com"));
        assert!(!valid_dns_name("-a.com"));
        assert!(!valid_dns_name("a..com"));
        assert!(!valid_dns_name("*"));
    }
}
