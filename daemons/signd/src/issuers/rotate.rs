//! A new delegated OCSP responder for an issuer, without a restart
//! (`Admin.issueOcspResponder`, `signetctl ca rotate-responder`).
//!
//! signd builds the responder certificate itself (the current responder's
//! subject, the new key's public key, id-kp-OCSPSigning and
//! id-pkix-ocsp-nocheck through `signet_ca::build_ocsp_responder_tbs`), signs
//! it with the CA key, commits it to the `ocsp_responders` table (fsynced),
//! and only then makes it the issuer's responder. At start the installed
//! responders are put ahead of the configured one, oldest first, so the newest
//! is in use; each is checked again as the configured one is (issued and
//! signed by the CA, its public key that of its signd key).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openssl::x509::{X509VerifyResult, X509};
use serde::{Deserialize, Serialize};
use signet_ca::{assemble_certificate, build_ocsp_responder_tbs, Responder, ResponderRequest};
use signet_ipc::{ErrorKind, IpcError};
use signet_store::{Store, StoreError, Table};

use super::{check_key, CaIssuer, Issuers, ResponderKey};
use crate::keys::KeyRing;

/// The validity of a new responder certificate when none is asked for.
pub const DEFAULT_VALIDITY_DAYS: u32 = 365;
/// The longest validity asked for (the certificate carries id-pkix-ocsp-nocheck).
pub const MAX_VALIDITY_DAYS: u32 = 3650;

/// A responder installed by `issueOcspResponder`, as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InstalledResponder {
    /// The responder key's id.
    pub key_id: String,
    /// Its certificate, DER.
    pub certificate: Vec<u8>,
    /// When it was installed.
    pub installed_unix_secs: i64,
}

/// The `ocsp_responders` table: each issuer's installed responders, oldest first.
#[derive(Clone)]
pub struct ResponderStore {
    store: Store,
    table: Table<String, Vec<InstalledResponder>>,
}

impl ResponderStore {
    /// Opens (creates) the table.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self { store: store.clone(), table: store.table("ocsp_responders")? })
    }

    /// The responders installed for `issuer`, oldest first.
    pub fn installed(&self, issuer: &str) -> Result<Vec<InstalledResponder>, StoreError> {
        Ok(self.store.read(|t| t.get(&self.table, &issuer.to_owned()))?.unwrap_or_default())
    }

    /// Records a new responder of `issuer`, fsynced. Blocking.
    pub fn add(&self, issuer: &str, responder: InstalledResponder) -> Result<(), StoreError> {
        let name = issuer.to_owned();
        self.store.write(|t| {
            let mut all = t.get(&self.table, &name)?.unwrap_or_default();
            all.push(responder);
            t.put(&self.table, &name, &all)
        })?;
        self.store.sync()
    }
}

/// `der` checked as a responder certificate of `ca` for key `key_id`: issued
/// and signed by the CA, its public key that key's.
pub(crate) fn responder_key(ca: &CaIssuer, key_id: &str, der: &[u8], keys: &KeyRing) -> Result<ResponderKey, String> {
    let ca_x509 = X509::from_der(&ca.certificate).map_err(|e| format!("CA certificate: {e}"))?;
    let x509 = X509::from_der(der).map_err(|e| format!("responder certificate: {e}"))?;
    let ca_key = ca_x509.public_key().map_err(|e| format!("CA certificate public key: {e}"))?;
    if ca_x509.issued(&x509) != X509VerifyResult::OK || !x509.verify(&ca_key).unwrap_or(false) {
        return Err("the responder certificate is not issued by the CA".into());
    }
    let scheme = check_key(key_id, None, &x509, keys, "OCSP responder certificate")?;
    let responder = Responder::from_certificate_der(der, scheme).map_err(|e| format!("responder certificate: {e}"))?;
    Ok(ResponderKey { key_id: key_id.to_owned(), certificate: der.to_vec(), responder })
}

impl Issuers {
    /// Puts the responders installed earlier ahead of each issuer's configured
    /// one (the newest in use). One that no longer fits its CA (the issuer's
    /// certificate or key changed in the config) is logged and left out.
    pub fn apply_installed(&self, store: &ResponderStore, keys: &KeyRing) -> Result<(), StoreError> {
        for ca in self.iter() {
            let Some(ocsp) = &ca.ocsp else { continue };
            for r in store.installed(&ca.name)? {
                match responder_key(ca, &r.key_id, &r.certificate, keys) {
                    Ok(k) => {
                        tracing::info!(issuer = %ca.name, key = %r.key_id, "OCSP responder installed by rotation");
                        ocsp.install(k);
                    }
                    Err(e) => tracing::error!(
                        issuer = %ca.name,
                        key = %r.key_id,
                        error = %e,
                        "an OCSP responder installed by rotation does not fit the issuer; not served"
                    ),
                }
            }
        }
        Ok(())
    }
}

/// What a call asks for, checked against the issuers on the capnp thread.
pub(crate) enum Target {
    /// The key is already the issuer's responder: its certificate (a resent call).
    Current(Vec<u8>),
    /// Issue a certificate for the key under this CA.
    Issue(Arc<CaIssuer>),
}

/// Checks a call: the issuer exists and has a responder, the key is no
/// issuer's CA key and not a responder this issuer had before, the validity
/// within bounds.
pub(crate) fn target(issuers: &Issuers, issuer: &str, key_id: &str, validity_days: u32) -> Result<Target, IpcError> {
    let ca = issuers.get(issuer).ok_or_else(|| IpcError::invalid(format!("no issuer `{issuer}` is configured")))?;
    let ocsp = ca.ocsp.as_ref().ok_or_else(|| {
        IpcError::new(ErrorKind::Unsupported, format!("issuer `{issuer}` has no OCSP responder configured"))
    })?;
    if validity_days > MAX_VALIDITY_DAYS {
        return Err(IpcError::invalid(format!("a responder certificate is valid at most {MAX_VALIDITY_DAYS} days")));
    }
    let current = ocsp.current();
    if current.key_id == key_id {
        return Ok(Target::Current(current.certificate.clone()));
    }
    if let Some(other) = issuers.iter().find(|i| i.key_id == key_id) {
        return Err(IpcError::invalid(format!("key `{key_id}` is the CA key of issuer `{}`", other.name)));
    }
    if ocsp.all().iter().any(|k| k.key_id == key_id) {
        return Err(IpcError::new(
            ErrorKind::AlreadyExists,
            format!("key `{key_id}` was an earlier OCSP responder of issuer `{issuer}`; generate a new key"),
        ));
    }
    Ok(Target::Issue(ca.clone()))
}

/// Builds the responder certificate for `key_id` and signs it with the CA key
/// (blocking: a signing thread runs it); the checked responder and its record.
pub(crate) fn issue(
    ca: &CaIssuer,
    key_id: &str,
    validity_days: u32,
    keys: &KeyRing,
    now: SystemTime,
) -> Result<(ResponderKey, InstalledResponder), IpcError> {
    let ocsp = ca.ocsp.as_ref().ok_or_else(|| IpcError::new(ErrorKind::Unsupported, "no OCSP responder"))?;
    let key = keys.require(key_id)?;
    let days = if validity_days == 0 { DEFAULT_VALIDITY_DAYS } else { validity_days };
    let request = ResponderRequest {
        subject: ocsp.current().responder.name.clone(),
        spki_der: key.signer()?.spki().to_vec(),
        validity: Duration::from_secs(u64::from(days) * 86_400),
        backdate: Duration::from_secs(3600),
    };
    let tbs = build_ocsp_responder_tbs(&request, ca.issuer(), now, &mut rand_core::OsRng)
        .map_err(|e| IpcError::invalid(format!("key `{key_id}` cannot be an OCSP responder: {e}")))?;
    let scheme = ca.issuer().scheme;
    let signature = keys.require(&ca.key_id)?.signer()?.sign(scheme, &tbs)?;
    let der = assemble_certificate(&tbs, scheme, &signature)
        .map_err(|e| IpcError::internal(format!("assembling the responder certificate: {e}")))?;
    let checked = responder_key(ca, key_id, &der, keys).map_err(IpcError::internal)?;
    let installed_unix_secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    Ok((checked, InstalledResponder { key_id: key_id.to_owned(), certificate: der, installed_unix_secs }))
}
