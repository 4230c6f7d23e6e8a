//! ocspd: Signet's OCSP responder (RFC 6960, RFC 5019 profile) and CRL publisher.
//!
//! ocspd owns the status of every certificate its issuers issue. Issuers
//! (acmed, signetctl) record issuance and revocation over the registry
//! interface (`ipc-schema/schema/ocspd.capnp`), authorised by peer
//! credentials; each change is committed to LMDB before it is acknowledged.
//! Responses are signed ahead of time through signd's `OcspSigner` and
//! served from LMDB; CRLs (full, sharded, delta) through its `CrlSigner`.
//!
//! Threads: a multi-threaded tokio runtime serves HTTP and runs the
//! background work (CRL publishing, re-signing responses); one thread serves
//! the registry on a `LocalSet` (capnp-rpc is `!Send`).
#![forbid(unsafe_code)]

pub mod config;
pub mod core;
pub mod crl;
pub mod db;
pub mod http;
pub mod limit;
pub mod registry;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use signet_ca::{Issuer, OcspIssuer, Profile};
use signet_ipc::server::{serve_ocspd, ServeOptions};
use signet_ipc::{IpcError, SignatureScheme, SigndClient};
use signet_runtime::activation;
use signet_runtime::config::Checked;
use signet_runtime::health::{self, Health};
use signet_runtime::lifecycle::{Lifecycle, Reload};
use signet_runtime::metrics::Metrics;
use signet_runtime::notify;
use signet_runtime::service_thread::ServiceThread;
use signet_types::Clock;

use crate::config::Config;
use crate::core::{Core, LoadedIssuer, ResponderCert};
use crate::db::Db;

/// Why ocspd could not start or stopped abnormally (the shared daemon error).
pub use signet_runtime::DaemonError as OcspdError;

/// Runs ocspd until SIGTERM or SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), OcspdError> {
    let config = config.into_inner();
    let db =
        Db::open(&config.state_dir).map_err(|source| OcspdError::Store { path: config.state_dir.clone(), source })?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.http_threads {
        builder.worker_threads(n.max(1));
    }
    let rt = builder.enable_all().build().map_err(|e| OcspdError::Startup(format!("tokio runtime: {e}")))?;
    rt.block_on(serve(config_path, config, db))
}

async fn serve(config_path: &Path, config: Config, db: Db) -> Result<(), OcspdError> {
    let mut life = Lifecycle::install("ocspd", config_path)?;
    let shutdown = life.shutdown_token();
    let mut act = activation::Activation::from_env();
    // Bind first, so clients queue on the sockets while ocspd loads its issuers.
    let ipc_listener = activation::unix_listener_std(&mut act, "ocspd", &config.socket, config.socket_mode.bits())?;
    let http_listener = activation::tcp_listener(&mut act, "ocspd-http", config.listen)?;

    let signd = SigndClient::new(&config.signd_socket).map_err(|e| OcspdError::Startup(e.to_string()))?;
    let _ = notify::status("loading issuers from signd");
    let issuers = tokio::select! {
        loaded = load_issuers(&config, &db, &signd) => loaded.map_err(|e| OcspdError::Config(format!("{}: {e}", config_path.display())))?,
        () = shutdown.cancelled() => return Ok(()),
    };
    let metrics = Metrics::new("ocspd");
    let health = Health::new();
    health::watch(&health, &metrics, "signd", health::WATCH_EVERY, shutdown.clone(), {
        let signd = signd.clone();
        move || signd.reachable()
    });
    let core = Arc::new(
        Core::new(db, signd, issuers, config.max_fresh_signatures, Clock::system())
            .with_client_limit(config.fresh_per_client),
    );
    tokio::spawn(forget_idle_clients(core.clone()));

    for iss in &core.issuers {
        tokio::spawn(crl::publisher(core.clone(), iss.clone()));
        tokio::spawn(refresher(core.clone(), iss.clone()));
    }

    // The registry: its own thread and LocalSet; each call runs on this runtime.
    let registry = {
        let (core, handle, stop) = (core.clone(), tokio::runtime::Handle::current(), shutdown.clone());
        ServiceThread::spawn("ocspd-registry", "registry", ipc_listener, shutdown.clone(), move |listener| {
            let service = Rc::new(registry::Registry::new(core, handle));
            serve_ocspd(listener, service, ServeOptions::default(), stop)
        })?
    };

    let handler = Arc::new(http::OcspHttp::new(core.clone(), &metrics));
    let http = tokio::spawn(signet_runtime::http::serve(
        http_listener,
        config.http,
        handler,
        metrics,
        health,
        shutdown.clone(),
    ));
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
    });
    life.on_stop(registry.join());

    let names: Vec<&str> = core.issuers.iter().map(|i| i.name.as_str()).collect();
    tracing::info!(socket = %config.socket.display(), listen = %config.listen, issuers = ?names, "ocspd ready");
    life.serve(&format!("serving {} issuers", names.len()), core.as_ref()).await;
    Ok(())
}

/// SIGHUP re-reads who may record and revoke. Everything else in the config
/// takes a restart (issuers are loaded from signd at start).
impl Reload for Core {
    type Config = Config;
    const WHAT: &'static str = "registrars";

    fn reload(&self, config: Config) -> Result<(), String> {
        let mut resolved = Vec::new();
        for iss in &self.issuers {
            let settings = config
                .issuers
                .get(&iss.name)
                .ok_or_else(|| format!("issuer `{}` is no longer configured; restart to drop it", iss.name))?;
            resolved
                .push(settings.registrars.resolve().map_err(|e| format!("issuer `{}`: registrars: {e}", iss.name))?);
        }
        // All or nothing: only a config that resolved completely is applied.
        for (iss, r) in self.issuers.iter().zip(resolved) {
            *iss.registrars.write().unwrap_or_else(std::sync::PoisonError::into_inner) = r;
        }
        Ok(())
    }
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

/// Drops per-client rate state of quiet clients once a minute.
async fn forget_idle_clients(core: Arc<Core>) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        core.forget_idle_clients();
    }
}

/// Asks signd for each issuer's certificates and profile; waits while signd is unreachable.
async fn load_issuers(config: &Config, db: &Db, signd: &SigndClient) -> Result<Vec<Arc<LoadedIssuer>>, String> {
    let mut out = Vec::new();
    for (name, settings) in &config.issuers {
        let fetched = loop {
            match fetch(signd, name).await {
                Err(e) if e.kind.is_transient() => {
                    tracing::warn!(issuer = %name, error = %e, "waiting for signd");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                other => break other,
            }
        };
        let (ca_der, responder_der, profile_toml) = fetched.map_err(|e| format!("issuer `{name}`: signd: {e}"))?;
        let bad = |what: &str, e: &dyn std::fmt::Display| format!("issuer `{name}`: {what}: {e}");
        let profile: Profile = toml::from_str(&profile_toml).map_err(|e| bad("profile from signd", &e))?;
        let ca =
            Issuer::from_certificate_der(&ca_der, SignatureScheme::Default).map_err(|e| bad("CA certificate", &e))?;
        let ocsp_issuer = OcspIssuer::from_certificate_der(&ca_der).map_err(|e| bad("CA certificate", &e))?;
        let responder = ResponderCert::from_der(responder_der).map_err(|e| bad("responder certificate", &e))?;
        let registrars = settings.registrars.resolve().map_err(|e| bad("registrars", &e))?;
        let id = db.issuer_id(name).map_err(|e| bad("store", &e))?;
        let public = config.public_url();
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
        out.push(Arc::new(LoadedIssuer {
            name: name.clone(),
            id,
            settings: settings.clone(),
            ca_der,
            ocsp_issuer,
            responder: std::sync::RwLock::new(Arc::new(responder)),
            ca,
            profile,
            registrars: std::sync::RwLock::new(registrars),
            ocsp_url,
            crl_url,
            delta_crl_url,
            crl_dirty: tokio::sync::Notify::new(),
        }));
    }
    Ok(out)
}

async fn fetch(signd: &SigndClient, name: &str) -> Result<(Vec<u8>, Vec<u8>, String), IpcError> {
    let ca = signd.crl_signer_ca_certificate(name).await?;
    let responder = signd.ocsp_responder_certificate(name).await?;
    let profile = signd.crl_signer_profile(name).await?;
    Ok((ca, responder, profile))
}
