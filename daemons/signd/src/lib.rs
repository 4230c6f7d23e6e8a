//! signd: the only Signet process that touches private keys.
//!
//! It serves the Cap'n Proto interface of `signet_ipc` on a Unix socket. On
//! connect each caller gets a session bound to its peer credentials; policy
//! turns those into roles, and each role into a capability (a `Signer` limited
//! to the role's keys and operations, or `Admin`). Every signature and every
//! refusal is committed to the audit log before the caller hears the answer.
//!
//! Threads: the main thread runs the capnp server on a tokio `LocalSet`
//! (capnp-rpc is `!Send`), beside the daemon's lifecycle, and signs a lone call
//! itself; a pool of signing threads does the
//! rest of the crypto ([`dispatch`] decides which); with `sync` audit
//! durability one writer thread group-commits audit records to LMDB.
#![deny(unsafe_code)]

pub mod audit;
pub mod backend;
pub mod config;
mod dispatch;
pub mod issuers;
pub mod jws;
pub mod keys;
pub mod logs;
pub mod policy;
pub mod pool;
pub mod service;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use signet_ipc::server::{serve, ServeOptions};
use signet_runtime::activation;
use signet_runtime::config::{Checked, DaemonConfig};
use signet_runtime::lifecycle::{Lifecycle, Reload};
use signet_store::{Store, StoreOptions};
use signet_types::Clock;

use crate::backend::nss::{NssBackend, NssSettings};
use crate::backend::{openssl::OpensslBackend, Backend};
use crate::config::{Config, Durability};
use crate::issuers::Issuers;
use crate::logs::Logs;
use crate::policy::Policy;
use crate::service::{Signd, State};

/// The LMDB application name and schema version of signd's store.
pub const STORE_APPLICATION: &str = "signd";
/// Bumped when the stored records change shape.
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// Why signd could not start or stopped abnormally (the shared daemon error).
pub use signet_runtime::DaemonError as SigndError;

/// What `--check-config` and start check beyond the file's syntax: every role's users and
/// groups exist, every issuer's role names, profile and certificates are sound, and every CT
/// log's name, key id and role names are. The keys the issuers and logs name are checked at
/// start, against the key ring; the NSS database and PIN file when the NSS backend opens.
impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        Policy::resolve(&self.roles).map_err(|e| e.to_string())?;
        if let Some(nss) = &self.nss {
            nss_settings(nss).check().map_err(|e| e.detail)?;
        }
        issuers::check(&self.issuers)?;
        logs::check(&self.logs)
    }
}

/// SIGHUP re-reads the roles; issuers, CT logs and everything else take a restart.
impl Reload for Signd {
    type Config = Config;
    const WHAT: &'static str = "policy";

    fn reload(&self, config: Config) -> Result<(), String> {
        self.set_policy(Policy::resolve(&config.roles).map_err(|e| e.to_string())?);
        Ok(())
    }
}

/// The NSS backend's settings from `[nss]`.
fn nss_settings(c: &config::NssConfig) -> NssSettings {
    NssSettings { database: c.database.clone(), token: c.token.clone(), pin_file: c.pin_file.clone() }
}

/// Opens the state under `config.state_dir`: keys, audit log, signing pool;
/// times come from `clock`.
pub fn open_state(config: &Config, clock: Clock) -> Result<State, SigndError> {
    let db = config.state_dir.join("db");
    let mut opts = StoreOptions::new(STORE_APPLICATION, STORE_SCHEMA_VERSION);
    opts.durability = match config.audit.durability {
        Durability::Sync => signet_store::Durability::Sync,
        Durability::Process => signet_store::Durability::Process {
            flush_interval: Duration::from_millis(config.audit.flush_interval_ms.max(1)),
        },
    };
    // Every signature commits an audit record: commit through the mapping
    // (see StoreOptions::write_map for what that trades).
    opts.write_map = true;
    let store_err = |source| SigndError::Store { path: db.clone(), source };
    let store = Store::open(&db, opts).map_err(store_err)?;
    let openssl: Arc<dyn Backend> =
        Arc::new(OpensslBackend::new(&config.state_dir.join("keys")).map_err(|e| SigndError::Startup(e.to_string()))?);
    let mut backends = vec![openssl];
    let nss = match &config.nss {
        None => None,
        Some(c) => {
            let nss = Arc::new(NssBackend::open(&nss_settings(c)).map_err(|e| SigndError::Startup(e.detail))?);
            backends.push(nss.clone() as Arc<dyn Backend>);
            Some(nss)
        }
    };
    let keys = keys::KeyRing::open(&store, backends, clock.clone()).map_err(store_err)?;
    if let (Some(nss), Some(c)) = (&nss, &config.nss) {
        adopt_nss_keys(&keys, nss, &c.keys);
    }
    // fsync per commit is worth batching on one thread; without it, the
    // signing thread commits its own record (see audit.rs).
    let mode = match config.audit.durability {
        Durability::Sync => audit::CommitMode::Group,
        Durability::Process => audit::CommitMode::Inline,
    };
    let audit = audit::AuditLog::open(&store, mode, clock).map_err(store_err)?;
    let pool = pool::Pool::new(config.workers).map_err(|e| SigndError::Startup(format!("signing threads: {e}")))?;
    let responders = issuers::rotate::ResponderStore::open(&store).map_err(store_err)?;
    let issuing_cas = issuers::rollover::IssuingCaStore::open(&store).map_err(store_err)?;
    let added_logs = logs::added::LogStore::open(&store).map_err(store_err)?;
    Ok(State { keys, audit, pool, responders, issuing_cas, added_logs })
}

/// Serves the keys named in `[[nss.keys]]`. A key that cannot be found or
/// checked is logged and left out; signd serves the rest.
fn adopt_nss_keys(keys: &keys::KeyRing, nss: &NssBackend, configured: &[config::NssKeyConfig]) {
    for k in configured {
        let adopted = nss
            .locate(k.nickname.as_deref(), k.cka_id.as_deref())
            .and_then(|location| keys.adopt(&k.id, &k.roles, backend::nss::NAME, &location));
        match adopted {
            Ok(info) => {
                tracing::info!(key = %k.id, location = %info.location, available = info.available, "NSS key configured")
            }
            Err(e) => tracing::error!(key = %k.id, error = %e, "configured NSS key not served"),
        }
    }
}

/// Runs signd until SIGTERM or SIGINT. `config_path` is re-read on SIGHUP.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), SigndError> {
    let config = config.into_inner();
    let cfg_err = |e: String| SigndError::Config(format!("{}: {e}", config_path.display()));
    let policy = Policy::resolve(&config.roles).map_err(|e| cfg_err(e.to_string()))?;
    let state = Arc::new(open_state(&config, Clock::system())?);
    let mut issuers = Issuers::load(&config.issuers, &state.keys).map_err(cfg_err)?;
    let store_err = |source| SigndError::Store { path: config.state_dir.join("db"), source };
    issuers.apply_installed_cas(&state.issuing_cas, &state.keys).map_err(store_err)?;
    issuers.apply_installed(&state.responders, &state.keys).map_err(store_err)?;
    let logs = Logs::load(&config.logs, &state.keys)
        .map_err(cfg_err)?
        .with_stored(&state.added_logs, &state.keys)
        .map_err(store_err)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SigndError::Startup(format!("tokio runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, serve_until_stopped(config_path, &config, state, policy, issuers, logs))?;
    // Audit records are already committed; flush them to disk before exiting.
    drop(local);
    drop(rt);
    Ok(())
}

/// Binds the socket and serves it on this thread's `LocalSet` until SIGTERM or SIGINT.
async fn serve_until_stopped(
    config_path: &Path,
    config: &Config,
    state: Arc<State>,
    policy: Policy,
    issuers: Issuers,
    logs: Logs,
) -> Result<(), SigndError> {
    let mut life = Lifecycle::install("signd", config_path)?;
    let mut act = activation::Activation::from_env();
    let listener = activation::unix_listener(&mut act, "signd", &config.socket, config.socket_mode.bits())?;
    let service = Signd::new(state.clone(), policy);
    service.set_issuers(issuers);
    service.set_logs(logs);
    let opts = ServeOptions {
        max_frame_bytes: config.limits.max_frame_bytes,
        max_message_bytes: config.limits.max_message_bytes,
        max_batch: config.limits.max_batch,
        busy_poll: Duration::from_micros(config.busy_poll_us),
    };
    let server = tokio::task::spawn_local(serve(listener, Rc::new(service.clone()), opts, life.shutdown_token()));
    life.on_stop(async move {
        let _ = server.await;
    });
    let health = service.health();
    tracing::info!(
        socket = %config.socket.display(),
        keys = health.keys_loaded,
        unavailable = health.keys_unavailable,
        workers = state.pool.threads(),
        "signd ready"
    );
    let status = format!("serving {} keys ({} unavailable)", health.keys_loaded, health.keys_unavailable);
    life.serve(&status, &service).await;
    Ok(())
}
