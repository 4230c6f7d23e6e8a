//! The revocation check of tls_client_auth certificates (`[tls] ocsp_url`,
//! `ocsp_aia`): before a client authenticates with a CA-issued certificate,
//! tokend asks an OCSP responder about it, as a relying party does (RFC 6960).
//!
//! The request and the check of the answer are signet-ca's
//! ([`signet_ca::ocsp_check`]): a SHA-1 CertID and no nonce, POSTed to the
//! responder; the answer must be signed by the certificate's issuer (the CA
//! its verified chain went through), or by a responder certificate the issuer
//! signed for OCSP, must answer for the certificate, and must be current
//! (thisUpdate not ahead, nextUpdate not passed, [`CLOCK_SKEW`] allowed).
//!
//! Nothing is cached: every token request asks again, so a revocation is seen
//! by the next request the responder answers after it (ocspd signs the revoked
//! response before it acknowledges the revocation).
//!
//! - `good`: the client authenticates.
//! - `revoked`, `unknown`, or an answer that does not verify, is not for the
//!   certificate or is stale: `invalid_client` (RFC 8705 §2: the certificate
//!   does not authenticate the client), never a token.
//! - No status learnt (responder unreachable, slower than `ocsp_timeout_ms`,
//!   an HTTP error, an OCSP error status such as tryLater, no responder named
//!   for the certificate): refused with `temporarily_unavailable` (HTTP 503),
//!   unless `ocsp_soft_fail = true`, which authenticates the client and logs
//!   a warning.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use openssl::x509::X509Ref;
use signet_ca::ocsp_check::{check_response, request, CheckError, Status};

use crate::config::TlsConfig;
use crate::remote::{http_client, HttpClient};

/// Leeway for clocks when judging an answer's thisUpdate and nextUpdate (s).
pub const CLOCK_SKEW: i64 = 300;
/// The largest OCSP response read, in bytes.
pub const MAX_RESPONSE: usize = 64 * 1024;

/// Why a certificate does not authenticate its client.
#[derive(Debug)]
pub enum Refusal {
    /// The responder says it is revoked or unknown, or its answer is not valid.
    Refused(String),
    /// No status was learnt, and soft fail is off.
    Unchecked(String),
}

/// The configured revocation check.
pub struct Revocation {
    client: HttpClient,
    url: Option<String>,
    aia: bool,
    timeout: Duration,
    soft_fail: bool,
}

impl Revocation {
    /// The check `[tls]` configures, if it configures one.
    pub fn new(tls: &TlsConfig) -> Result<Option<Revocation>, String> {
        if tls.ocsp_url.is_none() && !tls.ocsp_aia {
            return Ok(None);
        }
        let timeout = Duration::from_millis(tls.ocsp_timeout_ms);
        Ok(Some(Revocation {
            client: http_client(timeout)?,
            url: tls.ocsp_url.clone(),
            aia: tls.ocsp_aia,
            timeout,
            soft_fail: tls.ocsp_soft_fail,
        }))
    }

    /// The checks of `[tls]`'s OCSP settings (for `--check-config` and start).
    pub fn check_config(tls: &TlsConfig) -> Result<(), String> {
        if let Some(u) = &tls.ocsp_url {
            let parsed = url::Url::parse(u).map_err(|e| format!("tls.ocsp_url `{u}`: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(format!("tls.ocsp_url `{u}` must be an http:// or https:// URL"));
            }
        }
        if (tls.ocsp_url.is_some() || tls.ocsp_aia) && tls.client_ca_file.is_none() {
            return Err("tls.ocsp_url and tls.ocsp_aia check tls_client_auth certificates: set client_ca_file".into());
        }
        if !(100..=30_000).contains(&tls.ocsp_timeout_ms) {
            return Err("tls.ocsp_timeout_ms must be 100 to 30000".into());
        }
        Ok(())
    }

    /// Whether `cert`, issued by `issuer` (its verified chain's next
    /// certificate), may authenticate its client at `now` (Unix seconds).
    pub async fn check(&self, cert: &X509Ref, issuer: &X509Ref, now: i64) -> Result<(), Refusal> {
        match self.ask(cert, issuer, now).await {
            Ok(()) => Ok(()),
            Err(Refusal::Unchecked(why)) if self.soft_fail => {
                tracing::warn!(why = %why, "a client certificate's revocation status is unknown; soft fail lets it through");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn ask(&self, cert: &X509Ref, issuer: &X509Ref, now: i64) -> Result<(), Refusal> {
        let aia = if self.aia {
            cert.ocsp_responders().ok().and_then(|s| s.iter().next().map(|u| u.to_string()))
        } else {
            None
        };
        let url = aia
            .or_else(|| self.url.clone())
            .ok_or_else(|| Refusal::Unchecked("the certificate names no OCSP responder (AIA)".into()))?;
        let body = request(cert, issuer).map_err(|e| Refusal::Unchecked(e.to_string()))?;
        let answer = tokio::time::timeout(self.timeout, self.post(&url, body))
            .await
            .map_err(|_| Refusal::Unchecked(format!("{url}: no answer in {} ms", self.timeout.as_millis())))?
            .map_err(Refusal::Unchecked)?;
        let answer = match check_response(&answer, cert, issuer) {
            Ok(a) => a,
            Err(e @ CheckError::Responder(_)) => return Err(Refusal::Unchecked(format!("{url}: {e}"))),
            Err(e) => return Err(Refusal::Refused(format!("the OCSP answer: {e}"))),
        };
        answer.current(now, CLOCK_SKEW).map_err(Refusal::Refused)?;
        match answer.status {
            Status::Good => Ok(()),
            Status::Revoked { reason, .. } => Err(Refusal::Refused(match reason {
                Some(r) => format!("revoked ({r:?}), says the OCSP responder"),
                None => "revoked, says the OCSP responder".into(),
            })),
            other => Err(Refusal::Refused(format!("its status is {}, says the OCSP responder", other.name()))),
        }
    }

    /// POSTs an OCSP request: the response body of a 200.
    async fn post(&self, url: &str, der: Vec<u8>) -> Result<Vec<u8>, String> {
        let target: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let req = hyper::Request::post(target)
            .header(hyper::header::CONTENT_TYPE, "application/ocsp-request")
            .header(hyper::header::ACCEPT, "application/ocsp-response")
            .body(Full::new(Bytes::from(der)))
            .map_err(|e| e.to_string())?;
        let resp = self.client.request(req).await.map_err(|e| format!("{url}: {e}"))?;
        if resp.status() != hyper::StatusCode::OK {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_RESPONSE).collect().await.map_err(|e| format!("{url}: {e}"))?;
        Ok(body.to_bytes().to_vec())
    }
}
