//! What signd checks before signing for its issuer / CRL / OCSP roles.
//!
//! A caller (acmed, ocspd, crld) sends DER to be signed; signd refuses anything that
//! is not what that role may produce. These checks are the policy line: a bug or a
//! compromise in the caller must not turn into a CA certificate, a certificate
//! from another issuer, or a CRL / OCSP response signed in someone else's name.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use const_oid::db::rfc5280 as ids;
use const_oid::ObjectIdentifier;
use der::Decode;
use signet_types::KeyAlgorithm;
use x509_cert::certificate::{TbsCertificate, Version};
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BaseCrlNumber, BasicConstraints, CrlNumber, ExtendedKeyUsage, KeyUsage, KeyUsages,
    SubjectAltName,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_ocsp::{CertStatus, ResponderId, ResponseData};

use crate::alg::{self, oid, to_der};
use crate::crl::TbsCertListRef;
use crate::ocsp::{cert_id_hash, CertStatusInfo, OcspIssuer, Responder, MAX_OCSP_REQUESTS};
use crate::profile::Profile;
use crate::{CaError, Issuer, SanEntry};

/// What the issuer role may sign for one CA.
#[derive(Clone, Debug)]
pub struct IssuerPolicy {
    /// The CA (its name, key id and signing scheme).
    pub issuer: Issuer,
    /// Longest allowed validity (notAfter - notBefore + 1 s).
    pub max_validity: Duration,
    /// EKUs a certificate may carry (anyExtendedKeyUsage is never allowed).
    pub allowed_ekus: Vec<ObjectIdentifier>,
    /// Subject key algorithms allowed; empty means any of signd's algorithms.
    pub allowed_key_algorithms: Vec<KeyAlgorithm>,
    /// How far notBefore may lie before `now`.
    pub max_backdate: Duration,
    /// How far notBefore may lie after `now`.
    pub max_forward: Duration,
}

impl IssuerPolicy {
    /// The policy for certificates of `profile` from `issuer`: backdating up to the
    /// profile's plus five minutes of clock skew either way.
    pub fn from_profile(profile: &Profile, issuer: Issuer) -> Self {
        const SKEW: Duration = Duration::from_secs(300);
        Self {
            issuer,
            max_validity: profile.max_validity(),
            allowed_ekus: profile.allowed_eku_oids(),
            allowed_key_algorithms: profile.allowed_key_algorithms.clone(),
            max_backdate: Duration::from_secs(profile.backdate_seconds) + SKEW,
            max_forward: SKEW,
        }
    }
}

/// What a validated end-entity TBSCertificate contains (for logs and audit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedTbs {
    /// Serial number octets.
    pub serial: Vec<u8>,
    /// Subject DN.
    pub subject: Name,
    /// notBefore.
    pub not_before: SystemTime,
    /// notAfter.
    pub not_after: SystemTime,
    /// The subject key's algorithm.
    pub subject_key_algorithm: KeyAlgorithm,
    /// subjectAltNames.
    pub sans: Vec<SanEntry>,
    /// EKU OIDs.
    pub ekus: Vec<ObjectIdentifier>,
}

/// Refuses anything that is not a well-formed end-entity TBSCertificate from
/// `policy.issuer` within the policy; `now` is the injected clock.
pub fn validate_end_entity_tbs(tbs_der: &[u8], policy: &IssuerPolicy, now: SystemTime) -> Result<ParsedTbs, CaError> {
    let tbs = TbsCertificate::from_der(tbs_der).map_err(CaError::malformed("TBSCertificate"))?;
    if tbs.version != Version::V3 {
        return Err(CaError::NotV3);
    }
    if tbs.issuer_unique_id.is_some() || tbs.subject_unique_id.is_some() {
        return Err(CaError::UniqueIdPresent);
    }
    let serial = check_serial(tbs.serial_number.as_bytes())?;
    if tbs.signature != policy.issuer.signature_algorithm()? {
        return Err(CaError::SignatureAlgorithmMismatch);
    }
    if to_der(&tbs.issuer)? != to_der(&policy.issuer.name)? {
        return Err(CaError::IssuerNameMismatch);
    }

    let not_before = tbs.validity.not_before.to_system_time();
    let not_after = tbs.validity.not_after.to_system_time();
    let period = not_after.duration_since(not_before).map_err(|_| CaError::ValidityInverted)? + Duration::from_secs(1);
    if period > policy.max_validity {
        return Err(CaError::ValidityTooLong { requested: period, max: policy.max_validity });
    }
    match now.duration_since(not_before) {
        Ok(past) if past > policy.max_backdate => return Err(CaError::NotBeforeTooOld(past)),
        Err(e) if e.duration() > policy.max_forward => return Err(CaError::NotBeforeInFuture(e.duration())),
        _ => {}
    }

    let key_alg = alg::key_algorithm_of_spki(&tbs.subject_public_key_info)?;
    if !policy.allowed_key_algorithms.is_empty() && !policy.allowed_key_algorithms.contains(&key_alg) {
        return Err(CaError::KeyAlgorithmNotAllowed { profile: "issuer policy".into(), algorithm: key_alg });
    }

    let exts = tbs.extensions.as_deref().unwrap_or_default();
    check_unique(exts)?;
    let mut ekus = None;
    let mut aki_seen = false;
    let mut sans = Vec::new();
    let mut san_critical = None;
    for ext in exts {
        let value = ext.extn_value.as_bytes();
        let malformed = |source| CaError::MalformedExtension { oid: ext.extn_id, source };
        match ext.extn_id {
            ids::ID_CE_BASIC_CONSTRAINTS if BasicConstraints::from_der(value).map_err(malformed)?.ca => {
                return Err(CaError::CaCertificateRefused);
            }
            ids::ID_CE_BASIC_CONSTRAINTS => {}
            ids::ID_CE_KEY_USAGE => {
                let ku = KeyUsage::from_der(value).map_err(malformed)?;
                if ku.0.contains(KeyUsages::KeyCertSign) || ku.0.contains(KeyUsages::CRLSign) {
                    return Err(CaError::ForbiddenKeyUsage);
                }
            }
            ids::ID_CE_EXT_KEY_USAGE => {
                let eku = ExtendedKeyUsage::from_der(value).map_err(malformed)?;
                if let Some(bad) = eku.0.iter().find(|o| !policy.allowed_ekus.contains(o)) {
                    return Err(CaError::EkuNotAllowed(*bad));
                }
                ekus = Some(eku.0);
            }
            ids::ID_CE_AUTHORITY_KEY_IDENTIFIER => {
                check_aki(value, &policy.issuer).map_err(|e| match e {
                    Some(source) => malformed(source),
                    None => CaError::AuthorityKeyIdMismatch,
                })?;
                aki_seen = true;
            }
            ids::ID_CE_SUBJECT_ALT_NAME => {
                let san = SubjectAltName::from_der(value).map_err(malformed)?;
                for name in san.0 {
                    sans.push(crate::csr::san_entry(name)?);
                }
                san_critical = Some(ext.critical);
            }
            ids::ID_CE_SUBJECT_KEY_IDENTIFIER
            | ids::ID_PE_AUTHORITY_INFO_ACCESS
            | ids::ID_CE_CRL_DISTRIBUTION_POINTS
            | ids::ID_CE_CERTIFICATE_POLICIES
            | oid::TLS_FEATURE
            | SCT_LIST
            | CT_POISON => {}
            ids::ID_CE_NAME_CONSTRAINTS
            | ids::ID_CE_POLICY_CONSTRAINTS
            | ids::ID_CE_POLICY_MAPPINGS
            | ids::ID_CE_INHIBIT_ANY_POLICY
            | oid::OCSP_NOCHECK => return Err(CaError::ForbiddenExtension(ext.extn_id)),
            other if ext.critical => return Err(CaError::UnknownCriticalExtension(other)),
            _ => {}
        }
    }
    let ekus = ekus.ok_or(CaError::MissingEku)?;
    if !aki_seen {
        return Err(CaError::MissingAuthorityKeyId);
    }
    if tbs.subject.0.is_empty() && san_critical != Some(true) {
        return Err(CaError::EmptySubjectWithoutCriticalSan);
    }

    Ok(ParsedTbs { serial, subject: tbs.subject, not_before, not_after, subject_key_algorithm: key_alg, sans, ekus })
}

/// signedCertificateTimestampList (RFC 6962).
const SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");
/// The precertificate poison (RFC 6962), critical by definition.
const CT_POISON: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.3");

/// What a validated TBSCertList contains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedTbsCrl {
    /// cRLNumber octets.
    pub crl_number: Vec<u8>,
    /// The base CRL number, for a delta CRL.
    pub delta_base: Option<Vec<u8>>,
    /// thisUpdate.
    pub this_update: SystemTime,
    /// nextUpdate.
    pub next_update: SystemTime,
    /// How many certificates are listed.
    pub revoked_count: usize,
}

/// Refuses anything that is not a well-formed v2 TBSCertList of `issuer`.
pub fn validate_tbs_crl(der: &[u8], issuer: &Issuer) -> Result<ParsedTbsCrl, CaError> {
    let tbs = TbsCertListRef::from_der(der).map_err(CaError::malformed("TBSCertList"))?;
    let revoked_count = tbs.count_revoked().map_err(CaError::malformed("revokedCertificates"))?;
    if tbs.version != Version::V2 {
        return Err(CaError::CrlNotV2);
    }
    if tbs.signature != issuer.signature_algorithm()? {
        return Err(CaError::SignatureAlgorithmMismatch);
    }
    if to_der(&tbs.issuer)? != to_der(&issuer.name)? {
        return Err(CaError::IssuerNameMismatch);
    }
    let this_update = tbs.this_update.to_system_time();
    let next_update = match tbs.next_update {
        Some(n) if n.to_system_time() > this_update => n.to_system_time(),
        _ => return Err(CaError::CrlBadNextUpdate),
    };
    let exts = tbs.crl_extensions.as_deref().unwrap_or_default();
    check_unique(exts)?;
    let mut crl_number = None;
    let mut delta_base = None;
    let mut aki_seen = false;
    for ext in exts {
        let value = ext.extn_value.as_bytes();
        let malformed = |source| CaError::MalformedExtension { oid: ext.extn_id, source };
        match ext.extn_id {
            ids::ID_CE_AUTHORITY_KEY_IDENTIFIER => {
                check_aki(value, issuer).map_err(|e| match e {
                    Some(source) => malformed(source),
                    None => CaError::AuthorityKeyIdMismatch,
                })?;
                aki_seen = true;
            }
            ids::ID_CE_CRL_NUMBER => {
                crl_number = Some(CrlNumber::from_der(value).map_err(malformed)?.0.as_bytes().to_vec());
            }
            ids::ID_CE_DELTA_CRL_INDICATOR => {
                delta_base = Some(BaseCrlNumber::from_der(value).map_err(malformed)?.0.as_bytes().to_vec());
            }
            ids::ID_CE_ISSUING_DISTRIBUTION_POINT | ids::ID_CE_FRESHEST_CRL => {}
            other if ext.critical => return Err(CaError::UnknownCriticalExtension(other)),
            _ => {}
        }
    }
    if !aki_seen {
        return Err(CaError::MissingAuthorityKeyId);
    }
    let crl_number = crl_number.ok_or(CaError::CrlMissingNumber)?;
    Ok(ParsedTbsCrl { crl_number, delta_base, this_update, next_update, revoked_count })
}

/// What a validated OCSP ResponseData says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedResponseData {
    /// Its SingleResponses, in order (1..=[`MAX_OCSP_REQUESTS`]).
    pub responses: Vec<ParsedSingleResponse>,
    /// producedAt.
    pub produced_at: SystemTime,
}

/// One SingleResponse of a validated ResponseData.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSingleResponse {
    /// The serial number asked about.
    pub serial: Vec<u8>,
    /// Its status.
    pub status: CertStatusInfo,
}

/// Refuses an OCSP ResponseData that does not name `responder`, holds no
/// SingleResponse or more than [`MAX_OCSP_REQUESTS`], or has a CertID that
/// is not about a certificate of the CA `issuer` (issuer name and key
/// hashes, by SHA-1 or SHA-256).
pub fn validate_ocsp_response_data(
    der: &[u8],
    responder: &Responder,
    issuer: &OcspIssuer,
) -> Result<ParsedResponseData, CaError> {
    let data = ResponseData::from_der(der).map_err(CaError::malformed("ResponseData"))?;
    let ours = match &data.responder_id {
        ResponderId::ByKey(hash) => hash.as_bytes() == responder.key_hash.as_slice(),
        ResponderId::ByName(name) => to_der(name)? == to_der(&responder.name)?,
    };
    if !ours {
        return Err(CaError::ResponderIdMismatch);
    }
    if data.responses.is_empty() || data.responses.len() > MAX_OCSP_REQUESTS {
        return Err(CaError::OcspResponseCount(data.responses.len()));
    }
    let responses = data
        .responses
        .iter()
        .map(|single| {
            let id = &single.cert_id;
            let hash = cert_id_hash(id)?;
            if !issuer.matches_hashes(hash, id.issuer_name_hash.as_bytes(), id.issuer_key_hash.as_bytes()) {
                return Err(CaError::OcspForeignCertId);
            }
            let status = match single.cert_status {
                CertStatus::Good(_) => CertStatusInfo::Good,
                CertStatus::Unknown(_) => CertStatusInfo::Unknown,
                CertStatus::Revoked(info) => CertStatusInfo::Revoked {
                    time: info.revocation_time.0.to_system_time(),
                    reason: info.revocation_reason,
                },
            };
            Ok(ParsedSingleResponse { serial: id.serial_number.as_bytes().to_vec(), status })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ParsedResponseData { responses, produced_at: data.produced_at.0.to_system_time() })
}

fn check_serial(bytes: &[u8]) -> Result<Vec<u8>, CaError> {
    match bytes.first() {
        None => Err(CaError::BadSerial("empty")),
        Some(b) if b & 0x80 != 0 => Err(CaError::BadSerial("negative")),
        _ if bytes.iter().all(|&b| b == 0) => Err(CaError::BadSerial("zero")),
        _ if bytes.len() > 20 => Err(CaError::BadSerial("longer than 20 octets")),
        _ => Ok(bytes.to_vec()),
    }
}

fn check_unique(exts: &[Extension]) -> Result<(), CaError> {
    let mut seen = HashSet::with_capacity(exts.len());
    match exts.iter().find(|e| !seen.insert(e.extn_id)) {
        Some(dup) => Err(CaError::DuplicateExtension(dup.extn_id)),
        None => Ok(()),
    }
}

/// `Err(None)`: decodes but names another key (or none); `Err(Some(e))`: malformed.
fn check_aki(value: &[u8], issuer: &Issuer) -> Result<(), Option<der::Error>> {
    let aki = AuthorityKeyIdentifier::from_der(value).map_err(Some)?;
    match aki.key_identifier {
        Some(id) if id.as_bytes() == issuer.key_id.as_slice() => Ok(()),
        _ => Err(None),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use rand_chacha::rand_core::SeedableRng;
    use signet_types::SignatureScheme;

    use super::*;
    use crate::cert::{build_intermediate_tbs, build_leaf_tbs, CaRequest, LeafRequest};
    use crate::crl::{build_tbs_crl, CrlParams};
    use crate::ocsp::{build_multi_response_data, CertIdentity, OcspHash, SingleResponseParams};
    use crate::testutil::{self, name, TestKey};

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_780_000_000)
    }

    fn setup() -> (Issuer, IssuerPolicy, TestKey) {
        let ca_key = TestKey::new(KeyAlgorithm::EcP256, SignatureScheme::Default);
        let issuer = Issuer::new(name("CN=Issuing CA,O=Signet"), &ca_key.spki_der(), SignatureScheme::Default).unwrap();
        let policy = IssuerPolicy::from_profile(&testutil::profile(), issuer.clone());
        (issuer, policy, TestKey::new(KeyAlgorithm::Ed25519, SignatureScheme::Default))
    }

    fn leaf_tbs(issuer: &Issuer, key: &TestKey, profile: &Profile, at: SystemTime) -> Vec<u8> {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        build_leaf_tbs(profile, issuer, &testutil::leaf_request(key), at, &mut rng).unwrap()
    }

    #[test]
    fn accepts_what_the_builder_produced() {
        let (issuer, policy, key) = setup();
        let tbs = leaf_tbs(&issuer, &key, &testutil::profile(), now());
        let parsed = validate_end_entity_tbs(&tbs, &policy, now()).unwrap();
        assert_eq!(parsed.subject_key_algorithm, KeyAlgorithm::Ed25519);
        assert_eq!(parsed.sans.len(), 4);
        assert_eq!(parsed.serial.len(), 16);
        assert_eq!(
            parsed.not_after.duration_since(parsed.not_before).unwrap() + Duration::from_secs(1),
            policy.max_validity
        );
    }

    #[test]
    fn exact_validity_is_kept_and_bounded_by_the_profile() {
        let (issuer, policy, key) = setup();
        let build = |window: (SystemTime, SystemTime)| {
            let req = LeafRequest { exact_validity: Some(window), ..testutil::leaf_request(&key) };
            build_leaf_tbs(&testutil::profile(), &issuer, &req, now(), &mut testutil::rng())
        };
        // Fractions of a second are dropped; both ends are kept as asked.
        let not_before = now() - Duration::from_millis(60_500);
        let not_after = now() + Duration::from_secs(86_400);
        let parsed = validate_end_entity_tbs(&build((not_before, not_after)).unwrap(), &policy, now()).unwrap();
        assert_eq!(parsed.not_before, now() - Duration::from_secs(61));
        assert_eq!(parsed.not_after, not_after);
        // The whole profile maximum fits; one second more does not.
        let max_after = now() + policy.max_validity - Duration::from_secs(1);
        assert!(build((now(), max_after)).is_ok());
        let too_long = build((now(), max_after + Duration::from_secs(1)));
        assert!(matches!(too_long, Err(CaError::ValidityTooLong { .. })), "{too_long:?}");
        assert!(matches!(build((now(), now() - Duration::from_secs(1))), Err(CaError::ValidityInverted)));
    }

    #[test]
    fn refuses_ca_true() {
        let (issuer, policy, key) = setup();
        let req = CaRequest {
            subject: name("CN=Sneaky Sub CA"),
            spki_der: key.spki_der(),
            validity: Duration::from_secs(86400),
            backdate: Duration::ZERO,
            path_len: None,
            ocsp_urls: vec![],
            ca_issuers_url: None,
            crl_url: None,
        };
        let tbs = build_intermediate_tbs(&req, &issuer, now(), &mut testutil::rng()).unwrap();
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, now()), Err(CaError::CaCertificateRefused)));
    }

    #[test]
    fn refuses_over_long_validity() {
        let (issuer, policy, key) = setup();
        let mut long = testutil::profile();
        long.max_validity_seconds *= 2;
        let tbs = leaf_tbs(&issuer, &key, &long, now());
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, now()), Err(CaError::ValidityTooLong { .. })));
    }

    #[test]
    fn refuses_foreign_issuer_name() {
        let (issuer, policy, key) = setup();
        let foreign = Issuer { name: name("CN=Someone Else"), ..issuer };
        let tbs = leaf_tbs(&foreign, &key, &testutil::profile(), now());
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, now()), Err(CaError::IssuerNameMismatch)));
    }

    #[test]
    fn refuses_wrong_aki() {
        let (issuer, policy, key) = setup();
        let other = Issuer { key_id: vec![0x55; 20], ..issuer };
        let tbs = leaf_tbs(&other, &key, &testutil::profile(), now());
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, now()), Err(CaError::AuthorityKeyIdMismatch)));
    }

    #[test]
    fn refuses_wrong_signature_algorithm_times_and_ekus() {
        let (issuer, policy, key) = setup();
        let sha384 = Issuer { scheme: SignatureScheme::EcdsaSha384, ..issuer.clone() };
        let tbs = leaf_tbs(&sha384, &key, &testutil::profile(), now());
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, now()), Err(CaError::SignatureAlgorithmMismatch)));

        let tbs = leaf_tbs(&issuer, &key, &testutil::profile(), now());
        let later = now() + Duration::from_secs(86400);
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, later), Err(CaError::NotBeforeTooOld(_))));
        let earlier = now() - Duration::from_secs(86400);
        assert!(matches!(validate_end_entity_tbs(&tbs, &policy, earlier), Err(CaError::NotBeforeInFuture(_))));

        let mut narrow = policy.clone();
        narrow.allowed_ekus.retain(|o| *o == crate::Eku::ServerAuth.oid());
        assert!(matches!(validate_end_entity_tbs(&tbs, &narrow, now()), Err(CaError::EkuNotAllowed(_))));

        assert!(matches!(
            validate_end_entity_tbs(b"\x30\x03\x02\x01\x01", &policy, now()),
            Err(CaError::Malformed { .. })
        ));
    }

    #[test]
    fn ocsp_response_data_validation() {
        let ca = testutil::root(KeyAlgorithm::EcP256, SignatureScheme::Default, now());
        let other = testutil::root(KeyAlgorithm::EcP256, SignatureScheme::Default, now());
        let ours = OcspIssuer::from_certificate_der(&ca.cert_der).unwrap();
        let responder = Responder::from_certificate_der(&ca.cert_der, SignatureScheme::Default).unwrap();
        let ids: Vec<_> = (1..=17u8)
            .map(|i| {
                let hash = if i % 2 == 0 { OcspHash::Sha256 } else { OcspHash::Sha1 };
                CertIdentity::new(hash, &ca.cert_der, &[0x40, i]).unwrap()
            })
            .collect();
        let data = |ids: &[CertIdentity]| {
            let singles: Vec<_> = ids
                .iter()
                .map(|cert_id| SingleResponseParams {
                    cert_id,
                    status: CertStatusInfo::Good,
                    this_update: now(),
                    next_update: Some(now() + Duration::from_secs(60)),
                })
                .collect();
            build_multi_response_data(&responder, now(), &singles, None).unwrap()
        };
        for n in [1, 2, MAX_OCSP_REQUESTS] {
            let parsed = validate_ocsp_response_data(&data(&ids[..n]), &responder, &ours).unwrap();
            let serials: Vec<_> = parsed.responses.iter().map(|r| r.serial.clone()).collect();
            assert_eq!(serials, ids[..n].iter().map(|i| i.serial.clone()).collect::<Vec<_>>());
        }
        // 17: the builder refuses, and so does the validator.
        let one = SingleResponseParams {
            cert_id: &ids[0],
            status: CertStatusInfo::Good,
            this_update: now(),
            next_update: None,
        };
        let singles = vec![one; 17];
        assert!(matches!(
            build_multi_response_data(&responder, now(), &singles, None),
            Err(CaError::OcspResponseCount(17))
        ));
        let mut too_many = ResponseData::from_der(&data(&ids[..16])).unwrap();
        too_many.responses.push(too_many.responses[0].clone());
        let e = validate_ocsp_response_data(&to_der(&too_many).unwrap(), &responder, &ours).unwrap_err();
        assert!(matches!(e, CaError::OcspResponseCount(17)), "{e}");
        let mut none = too_many.clone();
        none.responses.clear();
        let e = validate_ocsp_response_data(&to_der(&none).unwrap(), &responder, &ours).unwrap_err();
        assert!(matches!(e, CaError::OcspResponseCount(0)), "{e}");
        // One CertID of another CA among ours: refused, whichever place it has.
        for at in [0, 1, 2] {
            let mut mixed = ids[..3].to_vec();
            mixed[at] = CertIdentity::new(OcspHash::Sha1, &other.cert_der, &[0x40, 9]).unwrap();
            let e = validate_ocsp_response_data(&data(&mixed), &responder, &ours).unwrap_err();
            assert!(matches!(e, CaError::OcspForeignCertId), "{e}");
        }
        // An unsupported CertID hash.
        let mut sha384 = ResponseData::from_der(&data(&ids[..2])).unwrap();
        sha384.responses[1].cert_id.hash_algorithm.oid = const_oid::db::rfc5912::ID_SHA_384;
        let e = validate_ocsp_response_data(&to_der(&sha384).unwrap(), &responder, &ours).unwrap_err();
        assert!(matches!(e, CaError::OcspUnsupportedHash(_)), "{e}");
        // Another responder's name.
        let other_responder = Responder::from_certificate_der(&other.cert_der, SignatureScheme::Default).unwrap();
        let e = validate_ocsp_response_data(&data(&ids[..1]), &other_responder, &ours).unwrap_err();
        assert!(matches!(e, CaError::ResponderIdMismatch), "{e}");
    }

    #[test]
    fn crl_validation() {
        let (issuer, _, _) = setup();
        let params = CrlParams {
            this_update: now(),
            next_update: now() + Duration::from_secs(3600),
            crl_number: 9,
            shard_url: Some("http://crl.example/1.crl"),
            delta_base: None,
            freshest_crl_url: None,
            revoked: &[],
        };
        let tbs = build_tbs_crl(&issuer, &params).unwrap();
        let parsed = validate_tbs_crl(&tbs, &issuer).unwrap();
        assert_eq!(parsed.crl_number, vec![9]);
        let foreign = Issuer { name: name("CN=Someone Else"), ..issuer.clone() };
        assert!(matches!(validate_tbs_crl(&tbs, &foreign), Err(CaError::IssuerNameMismatch)));
        let other_key = Issuer { key_id: vec![1; 20], ..issuer.clone() };
        assert!(matches!(validate_tbs_crl(&tbs, &other_key), Err(CaError::AuthorityKeyIdMismatch)));
        let leaf_like = leaf_tbs(
            &issuer,
            &TestKey::new(KeyAlgorithm::EcP256, SignatureScheme::Default),
            &testutil::profile(),
            now(),
        );
        assert!(matches!(validate_tbs_crl(&leaf_like, &issuer), Err(CaError::Malformed { .. })));
    }
}
