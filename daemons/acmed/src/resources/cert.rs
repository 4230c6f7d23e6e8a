//! Certificates (RFC 8555 §7.4.2, §7.6; RFC 9773): download with alternate
//! chains, revocation by the account or by the certificate's key, and ARI
//! renewal information.

use bytes::Bytes;
use der::{Decode, Encode};
use hyper::StatusCode;
use signet_acme::types;
use signet_acme::{state, Jwk, Problem, ProblemType};
use x509_cert::Certificate;

use super::{forbidden, not_found, ts};
use crate::server::{internal, problem_with_status, Answer, Authed, Reply};
use crate::Acme;

impl Acme {
    /// Certificate download (§7.4.2): the PEM chain, with `alternate` links to other chains.
    pub fn certificate(&self, a: Authed, serial: &str, alt: &str) -> Answer {
        let acct = a.account()?;
        a.req.expect_post_as_get()?;
        let serial_bytes = hex::decode(serial).map_err(|_| not_found("certificate"))?;
        let alt: usize = alt.parse().map_err(|_| not_found("certificate chain"))?;
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial_bytes))
            .map_err(|e| internal("reading the certificate", e))?
            .ok_or_else(|| not_found("certificate"))?;
        if rec.account != acct.id {
            return Err(forbidden("certificate"));
        }
        let chain = self.ca.chains.get(alt).ok_or_else(|| not_found("certificate chain"))?;
        let mut pem = crate::issue::pem_cert(&rec.der);
        pem.push_str(chain);
        let mut r = Reply {
            content_type: Some("application/pem-certificate-chain"),
            body: Bytes::from(pem),
            ..Reply::empty(StatusCode::OK)
        };
        let base = format!("{}/acme/cert/{serial}", self.base);
        for i in (0..self.ca.chains.len()).filter(|i| *i != alt) {
            r.links.push(if i == 0 {
                format!("<{base}>;rel=\"alternate\"")
            } else {
                format!("<{base}/{i}>;rel=\"alternate\"")
            });
        }
        r.links.push(format!("<{}>;rel=\"up\"", self.url("/acme/issuer-cert")));
        Ok(r)
    }

    /// revokeCert (§7.6), signed by the account that holds the certificate or by its key.
    pub async fn revoke_cert(&self, a: Authed) -> Answer {
        let p: types::Revocation = a.req.payload_json()?;
        let der = p.certificate_der()?;
        let reason = p.reason_code()?;
        if !matches!(reason, 0 | 1 | 3 | 4 | 5) {
            return Err(Problem::new(
                ProblemType::BadRevocationReason,
                "reasons allowed: 0, 1 (keyCompromise), 3, 4, 5",
            ));
        }
        let cert = Certificate::from_der(&der)
            .map_err(|e| Problem::new(ProblemType::Malformed, format!("certificate: {e}")))?;
        let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial))
            .map_err(|e| internal("reading the certificate", e))?
            .filter(|r| r.der == der)
            .ok_or_else(|| {
                problem_with_status(ProblemType::Malformed, 404, "this CA did not issue that certificate")
            })?;
        match &a.account {
            Some(acct) if acct.id == rec.account => {}
            Some(_) => {
                return Err(Problem::new(ProblemType::Unauthorized, "the certificate was issued to another account"))
            }
            None => {
                let spki = cert
                    .tbs_certificate
                    .subject_public_key_info
                    .to_der()
                    .map_err(|e| internal("certificate key", e))?;
                let cert_key = Jwk::from_spki_der(&spki).ok();
                if a.req.jwk() != cert_key.as_ref() || cert_key.is_none() {
                    return Err(Problem::new(
                        ProblemType::Unauthorized,
                        "the request is not signed by the certificate's key",
                    ));
                }
            }
        }
        if rec.revoked.is_some() {
            return Err(Problem::new(ProblemType::AlreadyRevoked, "the certificate is already revoked"));
        }
        let rev = signet_ipc::Revocation {
            serial: serial.clone(),
            reason: signet_ipc::RevocationReason::from_code(reason)
                .unwrap_or(signet_ipc::RevocationReason::Unspecified),
            revoked_unix_secs: 0,
        };
        let status = self
            .ocspd
            .revoke(&self.cfg.issuer, rev)
            .await
            .map_err(|e| internal("recording the revocation in ocspd", e))?;
        db.store
            .write(|t| {
                if let Some(mut r) = t.get(&db.certs, &serial)? {
                    r.revoked = Some((status.revoked_unix_secs, reason));
                    t.put(&db.certs, &serial, &r)?;
                }
                Ok(())
            })
            .map_err(|e| internal("storing the revocation", e))?;
        self.metrics.revocations.inc();
        Ok(Reply::empty(StatusCode::OK))
    }

    /// renewalInfo (RFC 9773 §4.1).
    pub fn renewal_info(&self, cert_id: &str) -> Answer {
        let (aki, serial) = types::parse_renewal_cert_id(cert_id)?;
        if aki != self.ca.ski {
            return Err(problem_with_status(ProblemType::Malformed, 404, "not a certificate of this CA"));
        }
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial))
            .map_err(|e| internal("reading the certificate", e))?
            .ok_or_else(|| problem_with_status(ProblemType::Malformed, 404, "no such certificate"))?;
        self.metrics.renewal_info.inc();
        let (start, end) =
            state::renewal_window(rec.not_before, rec.not_after, rec.revoked.is_some(), self.clock.unix_seconds());
        let info = types::RenewalInfo {
            suggested_window: types::SuggestedWindow {
                start: ts(start).ok_or_else(|| internal("renewal window", "out of range"))?,
                end: ts(end).ok_or_else(|| internal("renewal window", "out of range"))?,
            },
            explanation_url: None,
        };
        Ok(Reply::json(StatusCode::OK, &info).retry_after(Some(6 * 3600)))
    }
}

/// The identifiers a certificate names (lowercased DNS names and IP text).
pub fn cert_identifiers(cert: &Certificate) -> Vec<String> {
    use x509_cert::ext::pkix::name::GeneralName;
    let mut out = Vec::new();
    for e in cert.tbs_certificate.extensions.iter().flatten() {
        if e.extn_id != const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME {
            continue;
        }
        if let Ok(san) = x509_cert::ext::pkix::SubjectAltName::from_der(e.extn_value.as_bytes()) {
            for n in san.0 {
                match n {
                    GeneralName::DnsName(d) => out.push(d.as_str().to_ascii_lowercase()),
                    GeneralName::IpAddress(o) => match o.as_bytes().len() {
                        4 => out.push(
                            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(o.as_bytes()).unwrap_or_default()).to_string(),
                        ),
                        16 => out.push(
                            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(o.as_bytes()).unwrap_or_default())
                                .to_string(),
                        ),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
    }
    out
}
