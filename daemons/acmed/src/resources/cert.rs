//! Certificates (RFC 8555 §7.4.2, §7.6; RFC 9773): download with alternate
//! chains, revocation by the account or by the certificate's key, and ARI
//! renewal information.

use bytes::Bytes;
use der::{Decode, Encode};
use hyper::StatusCode;
use signet_acme::types;
use signet_acme::{state, Jwk, Problem, ProblemType};
use signet_ipc::ErrorKind;
use x509_cert::Certificate;

use super::{forbidden, not_found, ts};
use crate::db::{authz_reuse_key, Id};
use crate::server::{internal, ipc_failure, problem_with_status, store_failure, Answer, Authed, Reply};
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
        // The chain of the CA that signed it (an earlier one's, after `useIssuer`).
        let ca = self.cas.of_certificate(&rec.der);
        let chain = ca.chains.get(alt).ok_or_else(|| not_found("certificate chain"))?;
        let mut pem = crate::issue::pem_cert(&rec.der);
        pem.push_str(chain);
        let mut r = Reply {
            content_type: Some("application/pem-certificate-chain"),
            body: Bytes::from(pem),
            ..Reply::empty(StatusCode::OK)
        };
        let base = format!("{}/acme/cert/{serial}", self.base);
        for i in (0..ca.chains.len()).filter(|i| *i != alt) {
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
            // §7.6: an account that holds valid authorizations for every
            // identifier in the certificate may revoke it too (Boulder does).
            Some(acct) if self.authorized_for_all(&acct.id, &cert_identifiers(&cert))? => {}
            Some(_) => {
                return Err(Problem::new(
                    ProblemType::Unauthorized,
                    "the certificate was issued to another account, and this account does not hold valid \
                     authorizations for all of its identifiers",
                ))
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
        // The first revocation wins; keyCompromise may still raise the reason
        // of an earlier one (ocspd decides, atomically, for every registrar).
        if let Some((_, recorded)) = rec.revoked {
            if !may_raise(recorded, reason) {
                return Err(already_revoked());
            }
        }
        let rev = signet_ipc::Revocation {
            serial: serial.clone(),
            reason: signet_ipc::RevocationReason::from_code(reason)
                .unwrap_or(signet_ipc::RevocationReason::Unspecified),
            revoked_unix_secs: 0,
        };
        // To the issuer that signed it (an earlier one's, after `useIssuer`).
        let issuer = self.cas.of_certificate(&der).name.clone();
        let status = self.ocspd.revoke(&issuer, rev).await.map_err(|e| match e.kind {
            ErrorKind::AlreadyRevoked => already_revoked(),
            _ => ipc_failure("recording the revocation in ocspd", e),
        })?;
        // What ocspd stored (a concurrent revocation may have raised it further).
        let stored = (status.revoked_unix_secs, status.reason.map_or(reason, |r| r.code()));
        db.write(|t| {
            if let Some(mut r) = t.get(&db.certs, &serial)? {
                // Never lowered: writes of racing revocations may land in any order.
                if r.revoked.is_none_or(|(_, old)| may_raise(old, stored.1)) {
                    r.revoked = Some(stored);
                    t.put(&db.certs, &serial, &r)?;
                }
            }
            Ok(())
        })
        .map_err(|e| store_failure("storing the revocation", e))?;
        self.metrics.revocations.inc();
        Ok(Reply::empty(StatusCode::OK))
    }

    /// Whether `account` holds an authorization valid now for each of
    /// `names` (a certificate's identifiers; a wildcard's by a wildcard or a
    /// plain authorization of its base name).
    fn authorized_for_all(&self, account: &Id, names: &[String]) -> Result<bool, Problem> {
        if names.is_empty() {
            return Ok(false);
        }
        let now = self.clock.unix_seconds();
        let db = &self.db;
        db.store
            .read(|t| {
                for name in names {
                    let ident = if name.parse::<std::net::IpAddr>().is_ok() {
                        types::Identifier::ip(name.clone())
                    } else {
                        types::Identifier::dns(name.clone())
                    };
                    let (base, wildcard) = state::authz_identifier(&ident);
                    let keys = [
                        Some(authz_reuse_key(account, &base, wildcard)),
                        wildcard.then(|| authz_reuse_key(account, &base, false)),
                    ];
                    let mut held = false;
                    for key in keys.iter().flatten() {
                        if let Some(id) = t.get(&db.valid_authzs, key)? {
                            held |= t.get(&db.authzs, &id)?.is_some_and(|a| {
                                a.account == *account && a.state().status_at(now) == types::AuthorizationStatus::Valid
                            });
                        }
                    }
                    if !held {
                        return Ok(false);
                    }
                }
                Ok(true)
            })
            .map_err(|e| internal("reading authorizations", e))
    }

    /// renewalInfo (RFC 9773 §4.1).
    pub fn renewal_info(&self, cert_id: &str) -> Answer {
        let (aki, serial) = types::parse_renewal_cert_id(cert_id)?;
        if self.cas.by_ski(&aki).is_none() {
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

/// Whether a revocation for `asked` may follow one recorded for `recorded`:
/// only to raise the reason to keyCompromise (1).
fn may_raise(recorded: u8, asked: u8) -> bool {
    asked == 1 && recorded != 1
}

fn already_revoked() -> Problem {
    Problem::new(ProblemType::AlreadyRevoked, "the certificate is already revoked")
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
