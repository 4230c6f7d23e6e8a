//! OCSP as a relying party uses it (RFC 6960): the request for one
//! certificate, and the check of the responder's answer. probed's OCSP check
//! and tokend's revocation check of tls_client_auth certificates share it.
//!
//! OpenSSL's OCSP code builds the request (a SHA-1 CertID, as RFC 5019 clients
//! send, and no nonce: the responder may answer from its signed responses) and
//! verifies the answer: signed by the issuer, or by a responder certificate
//! the issuer signed for OCSP signing (`id-kp-OCSPSigning`), and answering for
//! the certificate. thisUpdate, nextUpdate and the revocation details are read
//! with RustCrypto's `x509-ocsp` from the same bytes. Whether the times are
//! acceptable now is the caller's question ([`Answer::current`]): no clock here.

use der::Decode;
use openssl::hash::MessageDigest;
use openssl::ocsp::{OcspCertId, OcspCertStatus, OcspFlag, OcspRequest, OcspResponse, OcspResponseStatus};
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509Ref, X509};
use x509_cert::ext::pkix::CrlReason;
use x509_ocsp::CertStatus;

/// A certificate's status, as a verified response gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Not revoked.
    Good,
    /// Revoked at `at` (Unix seconds), with the reason, if the responder gave one.
    Revoked {
        /// revocationTime, Unix seconds.
        at: i64,
        /// revocationReason.
        reason: Option<CrlReason>,
    },
    /// The responder does not know the certificate.
    Unknown,
}

impl Status {
    /// `good`, `revoked` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Good => "good",
            Status::Revoked { .. } => "revoked",
            Status::Unknown => "unknown",
        }
    }
}

/// A verified answer for one certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The certificate's status.
    pub status: Status,
    /// thisUpdate, Unix seconds.
    pub this_update: i64,
    /// nextUpdate, Unix seconds, if the response has one.
    pub next_update: Option<i64>,
}

impl Answer {
    /// Whether the answer is current at `now` (Unix seconds), allowing `skew`
    /// seconds of clock difference: thisUpdate not ahead of now, nextUpdate not
    /// passed (RFC 6960 §3.2 items 4 and 5).
    pub fn current(&self, now: i64, skew: i64) -> Result<(), String> {
        if self.this_update > now + skew {
            return Err("the response's thisUpdate is in the future".into());
        }
        match self.next_update {
            Some(next) if next + skew <= now => Err(format!("the response's nextUpdate passed {}s ago", now - next)),
            _ => Ok(()),
        }
    }
}

/// Why an answer gives no status for the certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The responder answered with an error status (RFC 6960 §2.3: malformedRequest,
    /// internalError, tryLater, sigRequired or unauthorized).
    #[error("the responder answered {0}")]
    Responder(&'static str),
    /// The bytes are not a valid, verified response for the certificate.
    #[error("{0}")]
    Invalid(String),
}

fn invalid(what: &str) -> impl FnOnce(openssl::error::ErrorStack) -> CheckError + '_ {
    move |e| CheckError::Invalid(format!("{what}: {e}"))
}

fn cert_id(cert: &X509Ref, issuer: &X509Ref) -> Result<OcspCertId, CheckError> {
    OcspCertId::from_cert(MessageDigest::sha1(), cert, issuer).map_err(invalid("the certificate ID"))
}

/// The DER of an OCSP request for `cert`, issued by `issuer`.
pub fn request(cert: &X509Ref, issuer: &X509Ref) -> Result<Vec<u8>, CheckError> {
    let mut req = OcspRequest::new().map_err(invalid("an OCSP request"))?;
    req.add_id(cert_id(cert, issuer)?).map_err(invalid("an OCSP request"))?;
    req.to_der().map_err(invalid("an OCSP request"))
}

/// Checks `der`, a responder's answer to [`request`] for `cert`: a successful
/// response, its signature verified against `issuer` (directly, or through a
/// responder certificate `issuer` signed), with a status for `cert`.
/// OpenSSL judges the responder certificate's validity at the current time.
pub fn check_response(der: &[u8], cert: &X509Ref, issuer: &X509Ref) -> Result<Answer, CheckError> {
    let resp = OcspResponse::from_der(der).map_err(invalid("not an OCSP response"))?;
    let status = resp.status();
    if status != OcspResponseStatus::SUCCESSFUL {
        let name = match status {
            OcspResponseStatus::MALFORMED_REQUEST => "malformedRequest",
            OcspResponseStatus::INTERNAL_ERROR => "internalError",
            OcspResponseStatus::TRY_LATER => "tryLater",
            OcspResponseStatus::SIG_REQUIRED => "sigRequired",
            OcspResponseStatus::UNAUTHORIZED => "unauthorized",
            _ => "an unknown status",
        };
        return Err(CheckError::Responder(name));
    }
    let basic = resp.basic().map_err(invalid("the basic response"))?;
    // The issuer signs, or a responder it certified (PARTIAL_CHAIN: the issuer need not be a root).
    let mut store = X509StoreBuilder::new().map_err(invalid("a certificate store"))?;
    store.add_cert(issuer.to_owned()).map_err(invalid("a certificate store"))?;
    store.set_flags(X509VerifyFlags::PARTIAL_CHAIN).map_err(invalid("a certificate store"))?;
    let store = store.build();
    let mut certs: Stack<X509> = Stack::new().map_err(invalid("a certificate stack"))?;
    certs.push(issuer.to_owned()).map_err(invalid("a certificate stack"))?;
    basic.verify(&certs, &store, OcspFlag::empty()).map_err(invalid("the response signature does not verify"))?;
    let id = cert_id(cert, issuer)?;
    let single = basic
        .find_status(&id)
        .ok_or_else(|| CheckError::Invalid("the response does not answer for the certificate".into()))?;
    let openssl_status = single.status;
    // The same single response, read with x509-ocsp: its times and revocation details.
    let serial = x509_cert::Certificate::from_der(&cert.to_der().map_err(invalid("the certificate"))?)
        .map_err(|e| CheckError::Invalid(format!("the certificate: {e}")))?
        .tbs_certificate
        .serial_number;
    let parsed =
        x509_ocsp::OcspResponse::from_der(der).map_err(|e| CheckError::Invalid(format!("OCSP response: {e}")))?;
    let bytes = parsed.response_bytes.ok_or_else(|| CheckError::Invalid("no response bytes".into()))?;
    let basic = x509_ocsp::BasicOcspResponse::from_der(bytes.response.as_bytes())
        .map_err(|e| CheckError::Invalid(format!("basic OCSP response: {e}")))?;
    let single = basic
        .tbs_response_data
        .responses
        .iter()
        .find(|s| s.cert_id.serial_number == serial)
        .ok_or_else(|| CheckError::Invalid("no single response for the certificate's serial".into()))?;
    let unix = |t: &x509_ocsp::OcspGeneralizedTime| t.0.to_unix_duration().as_secs() as i64;
    let status = match (&single.cert_status, openssl_status) {
        (CertStatus::Good(_), OcspCertStatus::GOOD) => Status::Good,
        (CertStatus::Revoked(info), OcspCertStatus::REVOKED) => {
            Status::Revoked { at: unix(&info.revocation_time), reason: info.revocation_reason }
        }
        (CertStatus::Unknown(_), OcspCertStatus::UNKNOWN) => Status::Unknown,
        _ => return Err(CheckError::Invalid("the response answers twice for the certificate, differently".into())),
    };
    Ok(Answer { status, this_update: unix(&single.this_update), next_update: single.next_update.as_ref().map(unix) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_current_between_this_and_next_update() {
        let a = Answer { status: Status::Good, this_update: 1000, next_update: Some(2000) };
        assert!(a.current(1500, 0).is_ok());
        assert!(a.current(900, 0).unwrap_err().contains("future"));
        assert!(a.current(900, 300).is_ok(), "within the skew");
        assert!(a.current(2000, 0).unwrap_err().contains("passed"));
        assert!(Answer { next_update: None, ..a }.current(1_000_000, 0).is_ok());
    }

    #[test]
    fn garbage_and_error_statuses_are_no_answer() {
        let now = std::time::SystemTime::now();
        let root = crate::testutil::root(crate::KeyAlgorithm::EcP256, crate::SignatureScheme::Default, now);
        let cert = X509::from_der(&root.cert_der).unwrap();
        assert!(matches!(check_response(b"garbage", &cert, &cert), Err(CheckError::Invalid(_))));
        let try_later = crate::ocsp_error_response(crate::OcspErrorStatus::TryLater).unwrap();
        assert!(matches!(check_response(&try_later, &cert, &cert), Err(CheckError::Responder("tryLater"))));
        assert!(!request(&cert, &cert).unwrap().is_empty());
    }
}
