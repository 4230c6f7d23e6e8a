//! The issuance pipeline: order + CSR → TBSCertificate → signature (signd's
//! Issuer role) → recorded in ocspd → handed to the caller, who stores it.
//!
//! Each step is a function of the previous one's output. With Certificate
//! Transparency (`ct`), a step sits between building and signing: a
//! precertificate (poison extension) signed through the same Issuer role and
//! recorded in ocspd, submitted to the logs, and the SCTs embedded in the
//! final TBS. The precertificate is never stored or handed out.

use std::time::{Duration, UNIX_EPOCH};

use der::Decode;
use rand_core::{OsRng, RngCore};
use signet_acme::types::IdentifierType;
use signet_acme::{Problem, ProblemType};
use signet_ca::cert::{build_leaf_tbs, LeafRequest};
use signet_ca::{Name, ParsedCsr, SanEntry};
use signet_ct::rfc6962::precert::precert_entry;
use signet_ipc::{ErrorKind, IssuedCert};
use x509_cert::Certificate;

use crate::ct::{self, CtLogs};
use crate::db::{CertRec, Id, OrderRec};
use crate::server::{internal, ipc_failure};
use crate::{Acme, CaContext};

/// A certificate signed and recorded in ocspd.
pub struct Issued {
    /// Its serial (DER INTEGER content).
    pub serial: Vec<u8>,
    /// What acmed stores.
    pub rec: CertRec,
}

/// One certificate in PEM.
pub fn pem_cert(der: &[u8]) -> String {
    der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der).unwrap_or_default()
}

impl Acme {
    /// Builds, signs and records the certificate for a ready order; with SCTs
    /// embedded when its profile takes part in Certificate Transparency.
    pub async fn issue(&self, order_id: &Id, order: &OrderRec, csr: &ParsedCsr) -> Result<Issued, Problem> {
        // The CA in use now: the issuance finishes with it, whatever `useIssuer` does meanwhile.
        let ca = self.ca();
        let tbs = self.build_tbs(&ca, order, csr)?;
        let der = match self.ct.as_ref().filter(|_| self.cfg.ct_for(&order.profile).is_some()) {
            Some(ct) => self.sign_with_scts(&ca, ct, &tbs).await?,
            None => self.sign(&ca, tbs.der).await?,
        };
        // Only a certificate ocspd knows is ever handed out.
        let (serial, not_before, not_after) = self.record(&ca, &der, tbs.shard).await?;
        Ok(Issued {
            serial,
            rec: CertRec {
                der,
                account: order.account,
                order: *order_id,
                not_before,
                not_after,
                revoked: None,
                replaced_by: None,
            },
        })
    }

    /// The precertificate, its SCTs, then the certificate (RFC 6962 §3): the
    /// final TBS is `tbs` itself plus the SCT list, so the serial, validity and
    /// every other field are the precertificate's.
    async fn sign_with_scts(&self, ca: &CaContext, ct: &CtLogs, tbs: &Tbs) -> Result<Vec<u8>, Problem> {
        let precert_tbs = ct::precertificate_tbs(&tbs.der).map_err(|e| internal("building the precertificate", e))?;
        let precert = self.sign(ca, precert_tbs).await?;
        // A precertificate binds the CA to issue (RFC 6962 §3.1): its serial is
        // in ocspd before any log publishes it. The certificate's record below
        // is the same (serial, notAfter, shard), so ocspd keeps it as it is.
        self.record(ca, &precert, tbs.shard).await?;
        let entry = ct::entry_for(&tbs.der, &ca.ca_der).map_err(|e| internal("the CT log entry", e))?;
        // What a log computes from the precertificate is what the certificate will yield.
        match precert_entry(&[&precert[..], &ca.ca_der[..]]) {
            Ok(logged) if logged == entry => {}
            Ok(_) => return Err(internal("the CT log entry", "the precertificate does not yield the certificate's")),
            Err(e) => return Err(internal("the CT log entry", e)),
        }
        let mut chain = Vec::with_capacity(1 + ca.issuers.len());
        chain.push(precert);
        chain.extend(ca.issuers.iter().cloned());
        let (lifetime, not_after) = validity(&tbs.der)?;
        let outcomes = ct.submit(&chain, &entry, not_after, &self.clock).await;
        let scts = ct.select(&outcomes, lifetime).map_err(|why| {
            tracing::error!(reason = %why, "Certificate Transparency policy not met; nothing issued");
            Problem::new(
                ProblemType::ServerInternal,
                format!("Certificate Transparency: {why}; the certificate was not issued, try again later"),
            )
        })?;
        let final_tbs = ct::final_tbs(&tbs.der, &scts).map_err(|e| internal("embedding the SCTs", e))?;
        self.sign(ca, final_tbs).await
    }

    /// One signature by signd's Issuer role of `ca` over `tbs`.
    async fn sign(&self, ca: &CaContext, tbs: Vec<u8>) -> Result<Vec<u8>, Problem> {
        self.signd.sign_certificate(&ca.name, tbs).await.map_err(|e| match e.kind {
            ErrorKind::InvalidArgument | ErrorKind::PermissionDenied => {
                Problem::new(ProblemType::BadCsr, format!("the CA refused to sign: {}", e.detail))
            }
            _ => ipc_failure("signing the certificate", e),
        })
    }

    /// Records a certificate signd signed (or a precertificate) in ocspd:
    /// (serial, notBefore, notAfter).
    async fn record(&self, ca: &CaContext, der: &[u8], shard: u32) -> Result<(Vec<u8>, i64, i64), Problem> {
        let cert = Certificate::from_der(der).map_err(|e| internal("signd returned a bad certificate", e))?;
        let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
        let validity = &cert.tbs_certificate.validity;
        let not_before = validity.not_before.to_unix_duration().as_secs() as i64;
        let not_after = validity.not_after.to_unix_duration().as_secs() as i64;
        let record = IssuedCert { serial: serial.clone(), not_after_unix_secs: not_after, crl_shard: shard };
        self.ocspd
            .record_issued(&ca.name, record)
            .await
            .map_err(|e| ipc_failure("recording the certificate in ocspd", e))?;
        Ok((serial, not_before, not_after))
    }

    fn build_tbs(&self, ca: &CaContext, order: &OrderRec, csr: &ParsedCsr) -> Result<Tbs, Problem> {
        let sans = order
            .identifiers
            .iter()
            .map(|i| match i.kind {
                IdentifierType::Ip => {
                    i.value.parse().map(SanEntry::Ip).map_err(|_| internal("stored identifier", &i.value))
                }
                _ => Ok(SanEntry::Dns(i.value.clone())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // CN: the first DNS name that fits (64 characters), as browsers still show it.
        let subject = order
            .identifiers
            .iter()
            .find(|i| i.kind == IdentifierType::Dns && i.value.len() <= 64)
            .and_then(|i| format!("CN={}", i.value).parse::<Name>().ok())
            .unwrap_or_default();
        let profile = &ca.profile;
        let shard = (profile.crl_shards > 0).then(|| OsRng.next_u32() % profile.crl_shards);
        let validity = self.cfg.profiles.get(&order.profile).and_then(|p| p.validity_seconds).map(Duration::from_secs);
        // The order's notBefore/notAfter, checked again now: refused (and the order
        // invalid) when the clock has moved past what the Issuer role signs.
        let now = self.clock.now();
        let now_secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let exact_validity = crate::window::resolve(
            order.not_before,
            order.not_after,
            &bounds(ca, &self.cfg, &order.profile),
            now_secs,
        )?
        .map(|(nb, na)| {
            (UNIX_EPOCH + Duration::from_secs(nb.max(0) as u64), UNIX_EPOCH + Duration::from_secs(na.max(0) as u64))
        });
        let req = LeafRequest {
            subject,
            spki_der: csr.spki_der.clone(),
            sans,
            validity,
            exact_validity,
            ekus: None,
            crl_shard: shard,
        };
        let der = build_leaf_tbs(profile, &ca.issuer, &req, now, &mut OsRng)
            .map_err(|e| Problem::new(ProblemType::BadCsr, e.to_string()))?;
        Ok(Tbs { der, shard: shard.unwrap_or(0) })
    }
}

impl Acme {
    /// What notBefore/notAfter orders of acmed profile `name` may request.
    pub fn validity_bounds(&self, name: &str) -> crate::window::Bounds {
        bounds(&self.ca(), &self.cfg, name)
    }
}

/// What notBefore/notAfter orders of acmed profile `name` may request of `ca`.
fn bounds(ca: &CaContext, cfg: &crate::config::Config, name: &str) -> crate::window::Bounds {
    let validity = cfg.profiles.get(name).and_then(|p| p.validity_seconds);
    crate::window::Bounds::new(name, validity, &ca.profile, &ca.issuer)
}

struct Tbs {
    der: Vec<u8>,
    shard: u32,
}

/// A TBSCertificate's validity period, NotAfter − NotBefore (what Chrome's
/// CT policy calls the certificate's lifetime), and its NotAfter (Unix
/// seconds: which temporal CT shards take it).
fn validity(tbs_der: &[u8]) -> Result<(Duration, i64), Problem> {
    let tbs = x509_cert::TbsCertificate::from_der(tbs_der).map_err(|e| internal("the TBSCertificate", e))?;
    let (nb, na) = (tbs.validity.not_before.to_unix_duration(), tbs.validity.not_after.to_unix_duration());
    Ok((na.saturating_sub(nb), i64::try_from(na.as_secs()).unwrap_or(i64::MAX)))
}
