//! The CAs ocspd serves, loaded from signd: the configured ones at start,
//! and successors, issuing CAs signd made beside one of them by rotation
//! (`Registry.addSuccessor`, after signd's `Admin.issueIssuingCa`).
//!
//! A successor takes the settings and registrars of the issuer it follows
//! and is recorded in the store (table `successors`) before it is served, so
//! it is loaded again at every start without a config edit. The issuer it
//! follows stays served: OCSP and CRLs for what that CA issued go on.

use std::sync::Arc;
use std::time::Duration;

use signet_ca::der::Decode;
use signet_ca::x509_cert::Certificate;
use signet_ca::{Issuer, OcspIssuer, Profile};
use signet_ipc::{ErrorKind, IpcError, IssuerInfo, SignatureScheme, SigndClient};
use signet_runtime::principals::ResolvedPrincipals;

use crate::config::{Config, IssuerSettings};
use crate::core::{Core, LoadedIssuer, ResponderCert};
use crate::db::{Db, Successor};

/// What signd says about an issuer: its CA and responder certificates (DER)
/// and its profile (TOML).
struct Fetched {
    ca_der: Vec<u8>,
    responder_der: Vec<u8>,
    profile_toml: String,
}

async fn fetch(signd: &SigndClient, name: &str) -> Result<Fetched, IpcError> {
    let ca_der = signd.crl_signer_ca_certificate(name).await?;
    let responder_der = signd.ocsp_responder_certificate(name).await?;
    let profile_toml = signd.crl_signer_profile(name).await?;
    Ok(Fetched { ca_der, responder_der, profile_toml })
}

/// [`fetch`], waiting while signd is unreachable.
async fn fetch_waiting(signd: &SigndClient, name: &str) -> Result<Fetched, IpcError> {
    loop {
        match fetch(signd, name).await {
            Err(e) if e.kind.is_transient() => {
                tracing::warn!(issuer = %name, error = %e, "waiting for signd");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            other => return other,
        }
    }
}

/// Everything but the signd answers that makes a [`LoadedIssuer`].
struct Setup<'a> {
    name: &'a str,
    settings_from: &'a str,
    settings: &'a IssuerSettings,
    registrars: ResolvedPrincipals,
    id: u32,
    public_url: &'a str,
}

fn build(s: Setup<'_>, f: Fetched) -> Result<LoadedIssuer, String> {
    let name = s.name;
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("issuer `{name}`: {what}: {e}");
    let profile: Profile = toml::from_str(&f.profile_toml).map_err(|e| bad("profile from signd", &e))?;
    let ca =
        Issuer::from_certificate_der(&f.ca_der, SignatureScheme::Default).map_err(|e| bad("CA certificate", &e))?;
    let ocsp_issuer = OcspIssuer::from_certificate_der(&f.ca_der).map_err(|e| bad("CA certificate", &e))?;
    let responder = ResponderCert::from_der(f.responder_der).map_err(|e| bad("responder certificate", &e))?;
    let public = s.public_url;
    let ocsp_url = profile.ocsp_urls.first().cloned().unwrap_or_else(|| format!("{public}/ocsp"));
    let crl_url = format!("{public}/crl/{name}.crl");
    let delta_crl_url = format!("{public}/crl/{name}/delta.crl");
    if let Some(u) = &profile.crl_url {
        let expected =
            if profile.crl_shards > 0 { format!("/crl/{name}/{{shard}}.crl") } else { format!("/crl/{name}.crl") };
        if !u.ends_with(&expected) {
            tracing::warn!(issuer = %name, crl_url = %u, expected = %expected, "the profile's crl_url does not point at ocspd's CRL path");
        }
    }
    Ok(LoadedIssuer {
        name: name.to_owned(),
        settings_from: s.settings_from.to_owned(),
        id: s.id,
        settings: s.settings.clone(),
        ca_der: f.ca_der,
        ocsp_issuer,
        responder: std::sync::RwLock::new(Arc::new(responder)),
        ca,
        profile,
        registrars: std::sync::RwLock::new(s.registrars),
        ocsp_url,
        crl_url,
        delta_crl_url,
        crl_dirty: tokio::sync::Notify::new(),
    })
}

/// Loads the configured issuers from signd (waiting while it is
/// unreachable), then the successors recorded in the store, each after the
/// issuer it follows. A successor signd no longer knows, or whose issuer is
/// no longer configured, is logged and left out.
pub async fn load(config: &Config, db: &Db, signd: &SigndClient) -> Result<Vec<Arc<LoadedIssuer>>, String> {
    let public_url = config.public_url();
    let mut out: Vec<Arc<LoadedIssuer>> = Vec::new();
    for (name, settings) in &config.issuers {
        let fetched = fetch_waiting(signd, name).await.map_err(|e| format!("issuer `{name}`: signd: {e}"))?;
        let registrars = settings.registrars.resolve().map_err(|e| format!("issuer `{name}`: registrars: {e}"))?;
        let id = db.issuer_id(name).map_err(|e| format!("issuer `{name}`: store: {e}"))?;
        let setup = Setup { name, settings_from: name, settings, registrars, id, public_url: &public_url };
        out.push(Arc::new(build(setup, fetched)?));
    }
    let mut pending = db.successors().map_err(|e| format!("store: {e}"))?;
    loop {
        let before = pending.len();
        let mut rest = Vec::new();
        for (name, successor) in pending {
            let Some(base) = out.iter().find(|i| i.name == successor.based_on).cloned() else {
                rest.push((name, successor));
                continue;
            };
            if out.iter().any(|i| i.name == name) {
                tracing::error!(issuer = %name, "a successor has the name of a configured issuer; it is served as configured");
                continue;
            }
            match load_successor(&base, &name, db, signd, &public_url).await {
                Ok(iss) => {
                    tracing::info!(issuer = %name, based_on = %base.name, "successor issuer");
                    out.push(Arc::new(iss));
                }
                Err(e) => tracing::error!(issuer = %name, error = %e, "a recorded successor issuer is not served"),
            }
        }
        pending = rest;
        if pending.len() == before {
            break;
        }
    }
    for (name, s) in pending {
        tracing::error!(issuer = %name, based_on = %s.based_on, "a recorded successor follows an issuer that is not served; not served");
    }
    Ok(out)
}

async fn load_successor(
    base: &LoadedIssuer,
    name: &str,
    db: &Db,
    signd: &SigndClient,
    public_url: &str,
) -> Result<LoadedIssuer, String> {
    let fetched = fetch_waiting(signd, name).await.map_err(|e| format!("signd: {e}"))?;
    let id = db.issuer_id(name).map_err(|e| format!("store: {e}"))?;
    let registrars = base.registrars.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let setup =
        Setup { name, settings_from: &base.settings_from, settings: &base.settings, registrars, id, public_url };
    build(setup, fetched)
}

/// Starts an issuer's background work: CRL publishing, and re-signing
/// responses before they expire.
pub fn start_tasks(core: &Arc<Core>, iss: &Arc<LoadedIssuer>) {
    tokio::spawn(crate::crl::publisher(core.clone(), iss.clone()));
    tokio::spawn(refresher(core.clone(), iss.clone()));
}

/// Re-signs cached responses before they expire.
async fn refresher(core: Arc<Core>, iss: Arc<LoadedIssuer>) {
    let period = Duration::from_secs((iss.settings.refresh_before() / 8).clamp(1, 300));
    loop {
        tokio::time::sleep(period).await;
        match core.refresh(&iss).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(issuer = %iss.name, responses = n, "re-signed OCSP responses"),
            // A full store is logged once (SpaceWatch), not every period.
            Err(e) if core.db.space.is_full() => {
                tracing::debug!(issuer = %iss.name, error = %e, "cannot re-sign OCSP responses; retrying")
            }
            Err(e) => tracing::warn!(issuer = %iss.name, error = %e, "cannot re-sign OCSP responses; retrying"),
        }
    }
}

/// The issuer name of a certificate (DER), for comparing CAs' parents.
fn issuer_name(der: &[u8]) -> Result<signet_ca::Name, String> {
    Certificate::from_der(der).map(|c| c.tbs_certificate.issuer).map_err(|e| e.to_string())
}

impl Core {
    /// `Registry.addSuccessor`: serves issuer `name`, which signd made beside
    /// `base`, with `base`'s settings and registrars; recorded before it
    /// answers. Serving it already: its info.
    pub async fn add_successor(self: Arc<Self>, base: Arc<LoadedIssuer>, name: String) -> Result<IssuerInfo, IpcError> {
        if let Some(existing) = self.issuers().iter().find(|i| i.name == name) {
            return Ok(existing.info());
        }
        let fetched = fetch(&self.signd, &name).await?;
        // A successor is a sibling: signed by the CA that signed `base`.
        let parent =
            issuer_name(&base.ca_der).map_err(|e| IpcError::internal(format!("issuer `{}`: {e}", base.name)))?;
        let theirs =
            issuer_name(&fetched.ca_der).map_err(|e| IpcError::internal(format!("signd's issuer `{name}`: {e}")))?;
        if parent != theirs {
            return Err(IpcError::new(
                ErrorKind::FailedPrecondition,
                format!("signd's issuer `{name}` is not signed by the CA that signed `{}` ({theirs})", base.name),
            ));
        }
        let (db, n) = (self.db.clone(), name.clone());
        let id = tokio::task::spawn_blocking(move || db.issuer_id(&n))
            .await
            .map_err(|e| IpcError::internal(format!("store task failed: {e}")))?
            .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;
        let registrars = base.registrars.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let setup = Setup {
            name: &name,
            settings_from: &base.settings_from,
            settings: &base.settings,
            registrars,
            id,
            public_url: &self.public_url,
        };
        let iss = Arc::new(build(setup, fetched).map_err(IpcError::internal)?);
        let record = Successor { based_on: base.name.clone(), added_unix_secs: self.now_secs() };
        let (db, n) = (self.db.clone(), name.clone());
        tokio::task::spawn_blocking(move || db.add_successor(&n, &record))
            .await
            .map_err(|e| IpcError::internal(format!("store task failed: {e}")))?
            .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;
        match self.add_issuer(iss) {
            Ok(iss) => {
                start_tasks(&self, &iss);
                tracing::info!(issuer = %name, based_on = %base.name, "successor issuer served");
                Ok(iss.info())
            }
            // Added by a concurrent call meanwhile.
            Err(existing) => Ok(existing.info()),
        }
    }
}
