//! The issuance pipeline: order + CSR → TBSCertificate → signature (signd's
//! Issuer role) → recorded in ocspd → handed to the caller, who stores it.
//!
//! Each step is a function of the previous one's output, so a Certificate
//! Transparency step fits between building and signing without reshaping the
//! rest: sign a precertificate (poison extension) through the same Issuer
//! role, submit it to the logs, and embed the SCTs in the final TBS.

use std::time::{Duration, UNIX_EPOCH};

use der::Decode;
use rand_core::{OsRng, RngCore};
use signet_acme::types::IdentifierType;
use signet_acme::{Problem, ProblemType};
use signet_ca::cert::{build_leaf_tbs, LeafRequest};
use signet_ca::{Name, ParsedCsr, SanEntry};
use signet_ipc::{ErrorKind, IssuedCert};
use x509_cert::Certificate;

use crate::db::{CertRec, Id, OrderRec};
use crate::server::internal;
use crate::Acme;

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
    /// Builds, signs and records the certificate for a ready order.
    pub async fn issue(&self, order_id: &Id, order: &OrderRec, csr: &ParsedCsr) -> Result<Issued, Problem> {
        let tbs = self.build_tbs(order, csr)?;
        let der = self.signd.sign_certificate(&self.cfg.issuer, tbs.der).await.map_err(|e| match e.kind {
            ErrorKind::InvalidArgument | ErrorKind::PermissionDenied => {
                Problem::new(ProblemType::BadCsr, format!("the CA refused to sign: {}", e.detail))
            }
            _ => internal("signing the certificate", e),
        })?;
        let cert = Certificate::from_der(&der).map_err(|e| internal("signd returned a bad certificate", e))?;
        let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
        let validity = &cert.tbs_certificate.validity;
        let not_before = validity.not_before.to_unix_duration().as_secs() as i64;
        let not_after = validity.not_after.to_unix_duration().as_secs() as i64;
        // Only a certificate ocspd knows is ever handed out.
        let record = IssuedCert { serial: serial.clone(), not_after_unix_secs: not_after, crl_shard: tbs.shard };
        self.ocspd
            .record_issued(&self.cfg.issuer, record)
            .await
            .map_err(|e| internal("recording the certificate in ocspd", e))?;
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

    fn build_tbs(&self, order: &OrderRec, csr: &ParsedCsr) -> Result<Tbs, Problem> {
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
        let profile = &self.ca.profile;
        let shard = (profile.crl_shards > 0).then(|| OsRng.next_u32() % profile.crl_shards);
        let validity = self.cfg.profiles.get(&order.profile).and_then(|p| p.validity_seconds).map(Duration::from_secs);
        // The order's notBefore/notAfter, checked again now: refused (and the order
        // invalid) when the clock has moved past what the Issuer role signs.
        let now = self.clock.now();
        let now_secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let exact_validity =
            crate::window::resolve(order.not_before, order.not_after, &self.validity_bounds(&order.profile), now_secs)?
                .map(|(nb, na)| {
                    (
                        UNIX_EPOCH + Duration::from_secs(nb.max(0) as u64),
                        UNIX_EPOCH + Duration::from_secs(na.max(0) as u64),
                    )
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
        let der = build_leaf_tbs(profile, &self.ca.issuer, &req, now, &mut OsRng)
            .map_err(|e| Problem::new(ProblemType::BadCsr, e.to_string()))?;
        Ok(Tbs { der, shard: shard.unwrap_or(0) })
    }
}

impl Acme {
    /// What notBefore/notAfter orders of acmed profile `name` may request.
    pub fn validity_bounds(&self, name: &str) -> crate::window::Bounds {
        let validity = self.cfg.profiles.get(name).and_then(|p| p.validity_seconds);
        crate::window::Bounds::new(name, validity, &self.ca.profile, &self.ca.issuer)
    }
}

struct Tbs {
    der: Vec<u8>,
    shard: u32,
}
