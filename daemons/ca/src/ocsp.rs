//! OCSP (RFC 6960): parse requests, build ResponseData, assemble responses.

use std::time::SystemTime;

use const_oid::ObjectIdentifier;
use der::asn1::{AnyRef, BitStringRef, Null, OctetString};
use der::{Any, Decode, Sequence, Tag, Tagged};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use signet_types::SignatureScheme;
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::ext::pkix::CrlReason;
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::Certificate;
use x509_ocsp::{
    CertId, CertStatus, OcspResponse, OcspResponseStatus, ResponderId, ResponseBytes, ResponseData, RevokedInfo,
    SingleResponse, Version,
};

use crate::alg::{self, oid, resolve_scheme, to_der};
use crate::cert::ext_raw;
use crate::time::ocsp_time;
use crate::CaError;

/// The hash of a CertID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OcspHash {
    /// SHA-1 (what most clients send).
    Sha1,
    /// SHA-256.
    Sha256,
}

impl OcspHash {
    /// The hash's OID.
    pub fn oid(self) -> ObjectIdentifier {
        match self {
            Self::Sha1 => oid::SHA1,
            Self::Sha256 => oid::SHA256,
        }
    }

    /// Output length in octets.
    pub fn output_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
        }
    }

    /// The hash a CertID's `hashAlgorithm` names, if supported.
    pub fn from_oid(oid: ObjectIdentifier) -> Option<Self> {
        match oid {
            oid::SHA1 => Some(Self::Sha1),
            oid::SHA256 => Some(Self::Sha256),
            _ => None,
        }
    }

    /// Hashes `data`.
    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha1 => Sha1::digest(data).to_vec(),
            Self::Sha256 => Sha256::digest(data).to_vec(),
        }
    }
}

/// A CertID: which certificate a request asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertIdentity {
    /// The hash used for the issuer name and key hashes.
    pub hash: OcspHash,
    /// Hash of the issuer's DN (DER).
    pub issuer_name_hash: Vec<u8>,
    /// Hash of the issuer's subjectPublicKey bits.
    pub issuer_key_hash: Vec<u8>,
    /// The certificate's serial number (as encoded; not normalised).
    pub serial: Vec<u8>,
    /// The CertID as received, echoed verbatim in the response.
    raw: CertId,
}

impl CertIdentity {
    /// The CertID of `serial` issued by the CA whose certificate is `issuer_cert_der`.
    pub fn new(hash: OcspHash, issuer_cert_der: &[u8], serial: &[u8]) -> Result<Self, CaError> {
        let issuer = OcspIssuer::from_certificate_der(issuer_cert_der)?;
        let (name_hash, key_hash) = issuer.hashes(hash);
        let raw = CertId {
            hash_algorithm: AlgorithmIdentifierOwned { oid: hash.oid(), parameters: Some(Any::from(Null)) },
            issuer_name_hash: OctetString::new(name_hash.clone())?,
            issuer_key_hash: OctetString::new(key_hash.clone())?,
            serial_number: x509_cert::serial_number::SerialNumber::new(serial)
                .map_err(|_| CaError::BadSerial("longer than 20 octets"))?,
        };
        Ok(Self {
            hash,
            issuer_name_hash: name_hash,
            issuer_key_hash: key_hash,
            serial: raw.serial_number.as_bytes().to_vec(),
            raw,
        })
    }
}

/// The most certificates one OCSP request may ask about (RFC 6960 4.1.1
/// allows a list; RFC 5019 clients send one). Beyond it, a request is
/// malformed to this responder, and signd refuses a ResponseData with more
/// SingleResponses.
pub const MAX_OCSP_REQUESTS: usize = 16;

/// A parsed OCSPRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OcspRequest {
    /// The certificates asked about, in request order: 1..=[`MAX_OCSP_REQUESTS`].
    pub cert_ids: Vec<CertIdentity>,
    /// The nonce (RFC 8954: 1..=32 octets), to echo in the response.
    pub nonce: Option<Vec<u8>>,
}

/// Parses a DER OCSPRequest. Never panics, whatever the input (the fuzz entry point);
/// every error maps to `malformedRequest` at the caller.
pub fn parse_ocsp_request(der: &[u8]) -> Result<OcspRequest, CaError> {
    let req = x509_ocsp::OcspRequest::from_der(der).map_err(CaError::malformed("OCSPRequest"))?;
    let tbs = req.tbs_request;
    match tbs.request_list.len() {
        0 => return Err(CaError::OcspNoRequest),
        n if n > MAX_OCSP_REQUESTS => return Err(CaError::OcspTooManyRequests(n)),
        _ => {}
    }
    let cert_ids = tbs.request_list.into_iter().map(|r| cert_identity(r.req_cert)).collect::<Result<Vec<_>, _>>()?;

    let mut nonce = None;
    for ext in tbs.request_extensions.iter().flatten().filter(|e| e.extn_id == oid::OCSP_NONCE) {
        if nonce.is_some() {
            return Err(CaError::OcspBadNonce("nonce extension appears twice"));
        }
        let value = OctetString::from_der(ext.extn_value.as_bytes())
            .map_err(|_| CaError::OcspBadNonce("value is not an OCTET STRING"))?;
        check_nonce(value.as_bytes())?;
        nonce = Some(value.as_bytes().to_vec());
    }

    Ok(OcspRequest { cert_ids, nonce })
}

/// One request's CertID, checked: SHA-1 or SHA-256 (parameters absent or
/// NULL), hashes of that length.
fn cert_identity(raw: CertId) -> Result<CertIdentity, CaError> {
    let hash = cert_id_hash(&raw)?;
    if raw.issuer_name_hash.as_bytes().len() != hash.output_len()
        || raw.issuer_key_hash.as_bytes().len() != hash.output_len()
    {
        return Err(CaError::OcspBadCertIdHash);
    }
    Ok(CertIdentity {
        hash,
        issuer_name_hash: raw.issuer_name_hash.as_bytes().to_vec(),
        issuer_key_hash: raw.issuer_key_hash.as_bytes().to_vec(),
        serial: raw.serial_number.as_bytes().to_vec(),
        raw,
    })
}

/// The hash of a CertID: SHA-1 or SHA-256, its parameters absent or NULL.
pub(crate) fn cert_id_hash(raw: &CertId) -> Result<OcspHash, CaError> {
    let alg = &raw.hash_algorithm;
    let hash = OcspHash::from_oid(alg.oid).ok_or(CaError::OcspUnsupportedHash(alg.oid))?;
    if alg.parameters.as_ref().is_some_and(|p| p.tag() != Tag::Null || !p.value().is_empty()) {
        return Err(CaError::OcspUnsupportedHash(alg.oid));
    }
    Ok(hash)
}

fn check_nonce(nonce: &[u8]) -> Result<(), CaError> {
    if (1..=32).contains(&nonce.len()) {
        Ok(())
    } else {
        Err(CaError::OcspBadNonce("length must be 1..=32 octets"))
    }
}

/// The CA whose certificates a responder answers for: its CertID hashes, precomputed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OcspIssuer {
    sha1: (Vec<u8>, Vec<u8>),
    sha256: (Vec<u8>, Vec<u8>),
}

impl OcspIssuer {
    /// From the issuing CA's name and key.
    pub fn new(name: &Name, spki: &SubjectPublicKeyInfoOwned) -> Result<Self, CaError> {
        let name_der = to_der(name)?;
        let key = spki.subject_public_key.raw_bytes();
        let pair = |h: OcspHash| (h.digest(&name_der), h.digest(key));
        Ok(Self { sha1: pair(OcspHash::Sha1), sha256: pair(OcspHash::Sha256) })
    }

    /// From the issuing CA's certificate (DER).
    pub fn from_certificate_der(der: &[u8]) -> Result<Self, CaError> {
        let cert = Certificate::from_der(der).map_err(CaError::malformed("Certificate"))?;
        Self::new(&cert.tbs_certificate.subject, &cert.tbs_certificate.subject_public_key_info)
    }

    fn hashes(&self, hash: OcspHash) -> (Vec<u8>, Vec<u8>) {
        match hash {
            OcspHash::Sha1 => self.sha1.clone(),
            OcspHash::Sha256 => self.sha256.clone(),
        }
    }

    /// Whether `id` names a certificate of this CA.
    pub fn matches(&self, id: &CertIdentity) -> bool {
        self.matches_hashes(id.hash, &id.issuer_name_hash, &id.issuer_key_hash)
    }

    /// Whether a CertID's issuer name and key hashes, made with `hash`, are this CA's.
    pub fn matches_hashes(&self, hash: OcspHash, name_hash: &[u8], key_hash: &[u8]) -> bool {
        let (name, key) = match hash {
            OcspHash::Sha1 => &self.sha1,
            OcspHash::Sha256 => &self.sha256,
        };
        name == name_hash && key == key_hash
    }
}

/// The OCSP signer: names itself in responses by key hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Responder {
    /// The responder certificate's subject (or the CA's, when the CA signs directly).
    pub name: Name,
    /// SHA-1 of the responder's subjectPublicKey bits (ResponderID byKey).
    pub key_hash: Vec<u8>,
    /// The scheme signd signs responses with (resolved).
    pub scheme: SignatureScheme,
}

impl Responder {
    /// From the responder's certificate (DER); `scheme` may be `Default`.
    pub fn from_certificate_der(der: &[u8], scheme: SignatureScheme) -> Result<Self, CaError> {
        let cert = Certificate::from_der(der).map_err(CaError::malformed("Certificate"))?;
        let spki = &cert.tbs_certificate.subject_public_key_info;
        let key = alg::key_algorithm_of_spki(spki)?;
        Ok(Self {
            name: cert.tbs_certificate.subject.clone(),
            key_hash: alg::subject_key_identifier(spki),
            scheme: resolve_scheme(key, scheme)?,
        })
    }
}

/// A certificate's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertStatusInfo {
    /// Not revoked.
    Good,
    /// Revoked at `time`, for `reason` if known.
    Revoked {
        /// revocationTime.
        time: SystemTime,
        /// revocationReason.
        reason: Option<CrlReason>,
    },
    /// Not known to this responder.
    Unknown,
}

/// What one response says.
#[derive(Clone, Debug)]
pub struct OcspResponseParams<'a> {
    /// The certificate (echoed from the request).
    pub cert_id: &'a CertIdentity,
    /// Its status.
    pub status: CertStatusInfo,
    /// producedAt (normally now).
    pub produced_at: SystemTime,
    /// thisUpdate.
    pub this_update: SystemTime,
    /// nextUpdate.
    pub next_update: Option<SystemTime>,
    /// The request's nonce, echoed.
    pub nonce: Option<&'a [u8]>,
}

/// What one SingleResponse of a response about several certificates says.
#[derive(Clone, Debug)]
pub struct SingleResponseParams<'a> {
    /// The certificate (echoed from the request).
    pub cert_id: &'a CertIdentity,
    /// Its status.
    pub status: CertStatusInfo,
    /// thisUpdate.
    pub this_update: SystemTime,
    /// nextUpdate.
    pub next_update: Option<SystemTime>,
}

/// Builds ResponseData (DER): responderID by key hash, one SingleResponse, optional nonce.
pub fn build_response_data(responder: &Responder, params: &OcspResponseParams<'_>) -> Result<Vec<u8>, CaError> {
    let single = single_response(&SingleResponseParams {
        cert_id: params.cert_id,
        status: params.status,
        this_update: params.this_update,
        next_update: params.next_update,
    })?;
    response_data(responder, params.produced_at, vec![single], params.nonce)
}

/// Builds ResponseData (DER) answering several certificates at once (RFC
/// 6960 4.2.1): one SingleResponse per entry of `singles`, in order
/// (1..=[`MAX_OCSP_REQUESTS`] of them), responderID by key hash, optional nonce.
pub fn build_multi_response_data(
    responder: &Responder,
    produced_at: SystemTime,
    singles: &[SingleResponseParams<'_>],
    nonce: Option<&[u8]>,
) -> Result<Vec<u8>, CaError> {
    if singles.is_empty() || singles.len() > MAX_OCSP_REQUESTS {
        return Err(CaError::OcspResponseCount(singles.len()));
    }
    let responses = singles.iter().map(single_response).collect::<Result<Vec<_>, _>>()?;
    response_data(responder, produced_at, responses, nonce)
}

fn single_response(params: &SingleResponseParams<'_>) -> Result<SingleResponse, CaError> {
    if params.next_update.is_some_and(|n| n <= params.this_update) {
        return Err(CaError::CrlBadNextUpdate);
    }
    let cert_status = match params.status {
        CertStatusInfo::Good => CertStatus::good(),
        CertStatusInfo::Unknown => CertStatus::unknown(),
        CertStatusInfo::Revoked { time, reason } => {
            CertStatus::revoked(RevokedInfo { revocation_time: ocsp_time(time)?, revocation_reason: reason })
        }
    };
    Ok(SingleResponse {
        cert_id: params.cert_id.raw.clone(),
        cert_status,
        this_update: ocsp_time(params.this_update)?,
        next_update: params.next_update.map(ocsp_time).transpose()?,
        single_extensions: None,
    })
}

fn response_data(
    responder: &Responder,
    produced_at: SystemTime,
    responses: Vec<SingleResponse>,
    nonce: Option<&[u8]>,
) -> Result<Vec<u8>, CaError> {
    let response_extensions = match nonce {
        None => None,
        Some(n) => {
            check_nonce(n)?;
            Some(vec![ext_raw(oid::OCSP_NONCE, false, &OctetString::new(n)?)?])
        }
    };
    let data = ResponseData {
        version: Version::V1,
        responder_id: ResponderId::ByKey(OctetString::new(responder.key_hash.clone())?),
        produced_at: ocsp_time(produced_at)?,
        responses,
        response_extensions: response_extensions.map(|v: Vec<Extension>| v),
    };
    to_der(&data)
}

/// BasicOCSPResponse with the ResponseData carried as its exact (signed) bytes and
/// the certificates as their exact DER.
#[derive(Sequence)]
struct BasicResponse<'a> {
    tbs_response_data: AnyRef<'a>,
    signature_algorithm: AlgorithmIdentifierOwned,
    signature: BitStringRef<'a>,
    #[asn1(context_specific = "0", optional = "true", tag_mode = "EXPLICIT")]
    certs: Option<Vec<AnyRef<'a>>>,
}

/// Wraps ResponseData and signd's signature into a successful OCSPResponse (DER)
/// with a BasicOCSPResponse; `certs` (e.g. the delegated responder certificate)
/// go into its `certs` field.
pub fn assemble_ocsp_response(
    response_data_der: &[u8],
    scheme: SignatureScheme,
    signature: &[u8],
    certs: &[&[u8]],
) -> Result<Vec<u8>, CaError> {
    let tbs = AnyRef::from_der(response_data_der).map_err(CaError::malformed("ResponseData"))?;
    let certs = certs
        .iter()
        .map(|c| AnyRef::from_der(c).map_err(CaError::malformed("Certificate")))
        .collect::<Result<Vec<_>, _>>()?;
    let basic = BasicResponse {
        tbs_response_data: tbs,
        signature_algorithm: alg::signature_algorithm(scheme)?,
        signature: BitStringRef::from_bytes(signature)?,
        certs: (!certs.is_empty()).then_some(certs),
    };
    let response = OcspResponse {
        response_status: OcspResponseStatus::Successful,
        response_bytes: Some(ResponseBytes {
            response_type: const_oid::db::rfc6960::ID_PKIX_OCSP_BASIC,
            response: OctetString::new(to_der(&basic)?)?,
        }),
    };
    to_der(&response)
}

/// An unsuccessful OCSPResponse status (sent without a body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OcspErrorStatus {
    /// malformedRequest (1).
    MalformedRequest,
    /// internalError (2).
    InternalError,
    /// tryLater (3).
    TryLater,
    /// unauthorized (6): not a CA this responder serves.
    Unauthorized,
}

/// An OCSPResponse with an error status and no responseBytes (DER).
pub fn ocsp_error_response(status: OcspErrorStatus) -> Result<Vec<u8>, CaError> {
    let response = match status {
        OcspErrorStatus::MalformedRequest => OcspResponse::malformed_request(),
        OcspErrorStatus::InternalError => OcspResponse::internal_error(),
        OcspErrorStatus::TryLater => OcspResponse::try_later(),
        OcspErrorStatus::Unauthorized => OcspResponse::unauthorized(),
    };
    to_der(&response)
}

#[cfg(test)]
mod tests {
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    use super::*;

    #[test]
    fn error_responses_are_tiny() {
        assert_eq!(ocsp_error_response(OcspErrorStatus::MalformedRequest).unwrap(), [0x30, 0x03, 0x0a, 0x01, 0x01]);
        assert_eq!(ocsp_error_response(OcspErrorStatus::Unauthorized).unwrap(), [0x30, 0x03, 0x0a, 0x01, 0x06]);
    }

    /// A sample request with its one CertID repeated `n` times.
    fn request_for(n: usize) -> Vec<u8> {
        let mut req = x509_ocsp::OcspRequest::from_der(&crate::testutil::ocsp_request_samples()[0]).unwrap();
        let one = req.tbs_request.request_list[0].clone();
        req.tbs_request.request_list = vec![one; n];
        to_der(&req).unwrap()
    }

    #[test]
    fn requests_list_one_to_sixteen_certificates() {
        assert!(matches!(parse_ocsp_request(&request_for(0)), Err(CaError::OcspNoRequest)));
        for n in [1, 2, MAX_OCSP_REQUESTS] {
            let req = parse_ocsp_request(&request_for(n)).unwrap();
            assert_eq!(req.cert_ids.len(), n);
        }
        let e = parse_ocsp_request(&request_for(MAX_OCSP_REQUESTS + 1)).unwrap_err();
        assert!(matches!(e, CaError::OcspTooManyRequests(17)), "{e}");
        assert_eq!(e.to_string(), "OCSP request lists 17 certificates; at most 16 are answered in one request");
        // One bad CertID spoils the request.
        let mut req = x509_ocsp::OcspRequest::from_der(&request_for(3)).unwrap();
        req.tbs_request.request_list[2].req_cert.hash_algorithm.oid = oid::SHA256;
        assert!(matches!(parse_ocsp_request(&to_der(&req).unwrap()), Err(CaError::OcspBadCertIdHash)));
    }

    /// Feeds random and mutated inputs to the parser: it must return, never panic.
    #[test]
    fn parse_ocsp_request_never_panics() {
        let seeds = crate::testutil::ocsp_request_samples();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
        let mut ok = 0usize;
        for i in 0..20_000 {
            let input = if i % 4 == 0 {
                let mut buf = vec![0u8; (rng.next_u32() % 300) as usize];
                rng.fill_bytes(&mut buf);
                if i % 8 == 0 && !buf.is_empty() {
                    buf[0] = 0x30; // look like a SEQUENCE
                }
                buf
            } else {
                let mut buf = seeds[(rng.next_u32() as usize) % seeds.len()].clone();
                for _ in 0..=(rng.next_u32() % 4) {
                    match rng.next_u32() % 4 {
                        0 if !buf.is_empty() => {
                            let at = rng.next_u32() as usize % buf.len();
                            buf[at] ^= 1 << (rng.next_u32() % 8);
                        }
                        1 if !buf.is_empty() => {
                            let at = rng.next_u32() as usize % buf.len();
                            buf[at] = rng.next_u32() as u8;
                        }
                        2 => {
                            let at = rng.next_u32() as usize % (buf.len() + 1);
                            buf.truncate(at);
                        }
                        _ => {
                            let at = rng.next_u32() as usize % (buf.len() + 1);
                            buf.insert(at, rng.next_u32() as u8);
                        }
                    }
                }
                buf
            };
            if parse_ocsp_request(&input).is_ok() {
                ok += 1;
            }
        }
        // Some mutations (e.g. in hash bytes) leave a valid request.
        assert!(ok > 0);
        for s in &seeds {
            parse_ocsp_request(s).unwrap();
        }
    }
}
