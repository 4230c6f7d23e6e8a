//! ocspd: Signet's OCSP responder (RFC 6960, RFC 5019 profile) and CRL publisher.
//!
//! ocspd owns the status of every certificate its issuers issue. Issuers
//! (acmed, signetctl) record issuance and revocation over the registry
//! interface (`ipc-schema/schema/ocspd.capnp`), authorised by peer
//! credentials; each change is committed to LMDB before it is acknowledged.
//! Responses are signed ahead of time through signd's `OcspSigner` and
//! served from LMDB; CRLs (full, sharded, delta) through its `CrlSigner`.
//!
//! Threads: `http_threads` HTTP threads (default: one per CPU), each a
//! current-thread runtime serving the connections it accepted
//! (`signet_runtime::http::serve_on_threads`); a multi-threaded tokio runtime
//! runs the background work (CRL publishing, re-signing responses); one thread
//! serves the registry on a `LocalSet` (capnp-rpc is `!Send`).
#![forbid(unsafe_code)]

pub mod config;
pub mod core;
pub mod crl;
pub mod db;
pub mod hot;
pub mod http;
pub mod issuers;
pub mod limit;
pub mod registry;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use signet_ipc::server::{serve_ocspd, ServeOptions};
use signet_ipc::SigndClient;
use signet_runtime::activation;
use signet_runtime::config::Checked;
use signet_runtime::health::{self, Health};
use signet_runtime::lifecycle::{Lifecycle, Reload};
use signet_runtime::metrics::Metrics;
use signet_runtime::notify;
use signet_runtime::service_thread::ServiceThread;
use signet_types::Clock;

use crate::config::Config;
use crate::core::Core;
use crate::db::Db;

/// Why ocspd could not start or stopped abnormally (the shared daemon error).
pub use signet_runtime::DaemonError as OcspdError;

/// Runs ocspd until SIGTERM or SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), OcspdError> {
    let config = config.into_inner();
    let db =
        Db::open(&config.state_dir).map_err(|source| OcspdError::Store { path: config.state_dir.clone(), source })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| OcspdError::Startup(format!("tokio runtime: {e}")))?;
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
        loaded = issuers::load(&config, &db, &signd) => loaded.map_err(|e| OcspdError::Config(format!("{}: {e}", config_path.display())))?,
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
            .with_client_limit(config.fresh_per_client)
            .with_public_url(config.public_url()),
    );
    tokio::spawn(forget_idle_clients(core.clone()));

    for iss in core.issuers().iter() {
        issuers::start_tasks(&core, iss);
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
    let routes = signet_runtime::http::Routes { handler, metrics, health };
    let threads = config.http_threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let http = tokio::spawn(signet_runtime::http::serve_on_threads(
        http_listener,
        threads,
        None,
        config.http,
        routes,
        shutdown.clone(),
    ));
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
    });
    life.on_stop(registry.join());

    let names: Vec<String> = core.issuers().iter().map(|i| i.name.clone()).collect();
    tracing::info!(socket = %config.socket.display(), listen = %config.listen, issuers = ?names, "ocspd ready");
    life.serve(&format!("serving {} issuers", names.len()), core.as_ref()).await;
    Ok(())
}

/// SIGHUP re-reads who may record and revoke (a successor's are those of the
/// issuer it follows). Everything else in the config takes a restart (issuers
/// are loaded from signd at start).
impl Reload for Core {
    type Config = Config;
    const WHAT: &'static str = "registrars";

    fn reload(&self, config: Config) -> Result<(), String> {
        let mut resolved = Vec::new();
        let issuers = self.issuers();
        for iss in issuers.iter() {
            let settings = config
                .issuers
                .get(&iss.settings_from)
                .ok_or_else(|| format!("issuer `{}` is no longer configured; restart to drop it", iss.settings_from))?;
            resolved
                .push(settings.registrars.resolve().map_err(|e| format!("issuer `{}`: registrars: {e}", iss.name))?);
        }
        // All or nothing: only a config that resolved completely is applied.
        for (iss, r) in issuers.iter().zip(resolved) {
            *iss.registrars.write().unwrap_or_else(std::sync::PoisonError::into_inner) = r;
        }
        Ok(())
    }
}

/// Drops per-client rate state of quiet clients once a minute.
async fn forget_idle_clients(core: Arc<Core>) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        core.forget_idle_clients();
    }
}
