//! The CAs acmed issues from: the configured `issuer`, then each successor
//! an operator switched to (`AcmeAdmin.useIssuer`, after signd's
//! `issueIssuingCa` and ocspd's `addSuccessor`), recorded in the store
//! (table `issuer_switches`) so that the switch holds after a restart.
//!
//! The newest is the one acmed issues from; an issuance takes it once, at
//! its start, and finishes with it. The earlier ones stay known: a
//! certificate's chain, its revocation and its renewal information follow the
//! CA that signed it (its authority key identifier).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use der::{Decode, Encode};
use signet_ca::{Issuer, Profile};
use signet_ipc::{ErrorKind, IpcError, SignatureScheme, SigndClient};
use x509_cert::Certificate;

use crate::config::Config;
use crate::db::Db;
use crate::{Acme, CaContext};

/// Every CA acmed has issued from; the newest is in use.
pub struct Cas {
    list: RwLock<Arc<CaList>>,
    /// One switch at a time: the store's order is the list's.
    switching: tokio::sync::Mutex<()>,
}

/// The CAs at one moment.
struct CaList {
    /// The one in use.
    current: Arc<CaContext>,
    /// Every one, oldest first (`current` last).
    all: Vec<Arc<CaContext>>,
}

impl Cas {
    /// `first`, then the CAs switched to, oldest first; the last is in use.
    pub fn new(first: CaContext, later: Vec<CaContext>) -> Self {
        let all: Vec<Arc<CaContext>> = std::iter::once(first).chain(later).map(Arc::new).collect();
        let current = all[all.len() - 1].clone();
        Self { list: RwLock::new(Arc::new(CaList { current, all })), switching: tokio::sync::Mutex::new(()) }
    }

    fn list(&self) -> Arc<CaList> {
        self.list.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Every CA, oldest first.
    pub fn all(&self) -> Vec<Arc<CaContext>> {
        self.list().all.clone()
    }

    /// The CA acmed issues from.
    pub fn current(&self) -> Arc<CaContext> {
        self.list().current.clone()
    }

    /// The CA whose subject key identifier is `ski` (a certificate's AKI).
    pub fn by_ski(&self, ski: &[u8]) -> Option<Arc<CaContext>> {
        self.list().all.iter().rev().find(|c| c.ski == ski).cloned()
    }

    /// The CA that signed certificate `der` (by its AKI); the one in use when
    /// it names none acmed knows.
    pub fn of_certificate(&self, der: &[u8]) -> Arc<CaContext> {
        authority_key_id(der).and_then(|aki| self.by_ski(&aki)).unwrap_or_else(|| self.current())
    }

    fn push(&self, ca: CaContext) {
        let mut list = self.list.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = Arc::new(ca);
        let mut all = list.all.clone();
        all.push(current.clone());
        *list = Arc::new(CaList { current, all });
    }
}

/// A certificate's authority key identifier.
fn authority_key_id(der: &[u8]) -> Option<Vec<u8>> {
    let cert = Certificate::from_der(der).ok()?;
    let ext = cert
        .tbs_certificate
        .extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_AUTHORITY_KEY_IDENTIFIER)?;
    let aki = x509_cert::ext::pkix::AuthorityKeyIdentifier::from_der(ext.extn_value.as_bytes()).ok()?;
    aki.key_identifier.map(|k| k.as_bytes().to_vec())
}

/// The issuing CA's certificate and profile, from signd's Issuer role.
async fn fetch(signd: &SigndClient, name: &str) -> Result<(Vec<u8>, String), IpcError> {
    Ok((signd.issuer_certificate(name).await?, signd.issuer_profile(name).await?))
}

/// [`fetch`], waiting while signd is unreachable.
async fn fetch_waiting(signd: &SigndClient, name: &str) -> Result<(Vec<u8>, String), String> {
    loop {
        match fetch(signd, name).await {
            Err(e) if e.kind.is_transient() => {
                tracing::warn!(issuer = %name, error = %e, "waiting for signd");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            other => return other.map_err(|e| format!("issuer `{name}`: signd: {e}")),
        }
    }
}

/// Loads the configured issuer (its chain from `chain_pem`, the chain file,
/// when given), then each one recorded by `useIssuer`, whose chain is its
/// certificate and what follows the configured one's.
pub async fn load(cfg: &Config, db: &Db, signd: &SigndClient, chain_pem: Option<&[u8]>) -> Result<Cas, String> {
    let name = &cfg.issuer;
    let (ca_der, profile_toml) = fetch_waiting(signd, name).await?;
    let mut certs: Vec<Vec<u8>> = vec![ca_der.clone()];
    if let Some(pem) = chain_pem {
        let parsed = Certificate::load_pem_chain(pem).map_err(|e| format!("chain: {e}"))?;
        let ders: Vec<Vec<u8>> =
            parsed.iter().map(|c| c.to_der()).collect::<Result<_, _>>().map_err(|e| format!("chain: {e}"))?;
        match ders.iter().position(|d| *d == ca_der) {
            Some(i) => certs = ders[i..].to_vec(),
            None => return Err("chain: the file does not contain the issuing CA certificate signd reports".into()),
        }
    }
    let configured = context(name, certs, &profile_toml)?;
    let switches = db
        .store
        .read(|t| t.range(&db.issuer_switches, None, usize::MAX))
        .map_err(|e| format!("store: issuer switches: {e}"))?;
    let mut later: Vec<CaContext> = Vec::new();
    for (_, next) in switches {
        if next == configured.name || later.iter().any(|c| c.name == next) {
            continue;
        }
        let (der, profile_toml) = fetch_waiting(signd, &next).await?;
        let certs = std::iter::once(der).chain(configured.issuers.iter().skip(1).cloned()).collect();
        later.push(context(&next, certs, &profile_toml)?);
    }
    if let Some(ca) = later.last() {
        tracing::info!(issuer = %ca.name, configured = %configured.name, "issuing from the issuer useIssuer switched to");
    }
    Ok(Cas::new(configured, later))
}

/// What acmed knows of issuer `name`: `certs` is its certificate, then the
/// chain above it (DER), `profile_toml` its profile from signd.
fn context(name: &str, certs: Vec<Vec<u8>>, profile_toml: &str) -> Result<CaContext, String> {
    let ca_der = certs.first().cloned().ok_or_else(|| format!("issuer `{name}`: no certificate"))?;
    let profile: Profile =
        toml::from_str(profile_toml).map_err(|e| format!("issuer `{name}`: profile from signd: {e}"))?;
    let issuer =
        Issuer::from_certificate_der(&ca_der, SignatureScheme::Default).map_err(|e| format!("issuer `{name}`: {e}"))?;
    let ca = Certificate::from_der(&ca_der).map_err(|e| format!("issuer `{name}`: {e}"))?;
    let ski = ca
        .tbs_certificate
        .extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_KEY_IDENTIFIER)
        .and_then(|e| der::asn1::OctetString::from_der(e.extn_value.as_bytes()).ok())
        .map(|o| o.as_bytes().to_vec())
        .ok_or_else(|| format!("issuer `{name}`: the CA certificate has no subject key identifier"))?;
    let is_root =
        |d: &Vec<u8>| Certificate::from_der(d).is_ok_and(|c| c.tbs_certificate.issuer == c.tbs_certificate.subject);
    let pem = |ds: &[Vec<u8>]| ds.iter().map(|d| crate::issue::pem_cert(d)).collect::<String>();
    let mut chains = Vec::new();
    let without_root: Vec<Vec<u8>> = certs.iter().filter(|d| !is_root(d) || certs.len() == 1).cloned().collect();
    chains.push(pem(&without_root));
    if without_root.len() != certs.len() {
        chains.push(pem(&certs));
    }
    Ok(CaContext { name: name.to_owned(), issuer, profile, ca_der, ski, chains, issuers: certs })
}

/// The issuer name of certificate `der`.
fn issuer_name(der: &[u8]) -> Option<x509_cert::name::Name> {
    Certificate::from_der(der).ok().map(|c| c.tbs_certificate.issuer)
}

impl Acme {
    /// The CA acmed issues from now.
    pub fn ca(&self) -> Arc<CaContext> {
        self.cas.current()
    }

    /// `AcmeAdmin.useIssuer`: issues from `name` from now on (see the
    /// module doc); the name of the issuer in use.
    pub async fn use_issuer(&self, name: &str) -> Result<String, IpcError> {
        let _one = self.cas.switching.lock().await;
        let current = self.ca();
        if current.name == name {
            return Ok(name.to_owned());
        }
        if self.cas.all().iter().any(|c| c.name == name) {
            return Err(IpcError::new(
                ErrorKind::FailedPrecondition,
                format!("acmed issued from `{name}` before; it only moves on to a new issuer"),
            ));
        }
        let (der, profile_toml) = fetch(&self.signd, name).await?;
        if issuer_name(&der).is_none() || issuer_name(&der) != issuer_name(&current.ca_der) {
            return Err(IpcError::new(
                ErrorKind::FailedPrecondition,
                format!("signd's issuer `{name}` is not signed by the CA that signed `{}`", current.name),
            ));
        }
        // Every certificate is recorded in ocspd before it is handed out: ocspd must serve it.
        self.ocspd.issuer_info(name).await.map_err(|e| {
            IpcError::new(
                ErrorKind::FailedPrecondition,
                format!("ocspd does not serve issuer `{name}` for acmed ({e}); add it there first"),
            )
        })?;
        let certs = std::iter::once(der).chain(current.issuers.iter().skip(1).cloned()).collect();
        let ca = context(name, certs, &profile_toml).map_err(IpcError::internal)?;
        let db = self.db.clone();
        let n = name.to_owned();
        tokio::task::spawn_blocking(move || {
            db.write(|t| {
                let next = t.last(&db.issuer_switches)?.map_or(1, |(k, _)| k + 1);
                t.put(&db.issuer_switches, &next, &n)
            })?;
            db.store.sync()
        })
        .await
        .map_err(|e| IpcError::internal(format!("store task failed: {e}")))?
        .map_err(|e| IpcError::internal(format!("recording the switch: {e}")))?;
        self.cas.push(ca);
        tracing::info!(issuer = %name, previous = %current.name, "issuing from a new issuer");
        Ok(name.to_owned())
    }
}
