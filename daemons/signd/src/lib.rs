//! signd: the only Signet process that touches private keys.
//!
//! It serves the Cap'n Proto interface of `signet_ipc` on a Unix socket. On
//! connect each caller gets a session bound to its peer credentials; policy
//! turns those into roles, and each role into a capability (a `Signer` limited
//! to the role's keys and operations, or `Admin`). Every signature and every
//! refusal is committed to the audit log before the caller hears the answer.
//!
//! Threads: one runs the capnp server on a tokio `LocalSet` (capnp-rpc is
//! `!Send`) and signs a lone call itself; a pool of signing threads does the
//! rest of the crypto ([`dispatch`] decides which); with `sync` audit
//! durability one writer thread group-commits audit records to LMDB.
#![deny(unsafe_code)]

pub mod audit;
pub mod backend;
pub mod config;
mod dispatch;
pub mod issuers;
pub mod keys;
pub mod policy;
pub mod pool;
pub mod service;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use signet_ipc::server::{serve, ServeOptions};
use signet_runtime::{activation, notify, shutdown::Signals};
use signet_store::{Store, StoreOptions};

use crate::backend::nss::{NssBackend, NssSettings};
use crate::backend::{openssl::OpensslBackend, Backend};
use crate::config::{Config, Durability};
use crate::policy::Policy;
use crate::service::{Signd, State};

/// The LMDB application name and schema version of signd's store.
pub const STORE_APPLICATION: &str = "signd";
/// Bumped when the stored records change shape.
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// Why signd could not start or stopped abnormally (the shared daemon error).
pub use signet_runtime::DaemonError as SigndError;

/// Opens the state under `config.state_dir`: keys, audit log, signing pool.
pub fn open_state(config: &Config) -> Result<State, SigndError> {
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
            let settings =
                NssSettings { database: c.database.clone(), token: c.token.clone(), pin_file: c.pin_file.clone() };
            let nss = Arc::new(NssBackend::open(&settings).map_err(|e| SigndError::Startup(e.detail))?);
            backends.push(nss.clone() as Arc<dyn Backend>);
            Some(nss)
        }
    };
    let keys = keys::KeyRing::open(&store, backends).map_err(store_err)?;
    if let (Some(nss), Some(c)) = (&nss, &config.nss) {
        adopt_nss_keys(&keys, nss, &c.keys);
    }
    // fsync per commit is worth batching on one thread; without it, the
    // signing thread commits its own record (see audit.rs).
    let mode = match config.audit.durability {
        Durability::Sync => audit::CommitMode::Group,
        Durability::Process => audit::CommitMode::Inline,
    };
    let audit = audit::AuditLog::open(&store, mode).map_err(store_err)?;
    let pool = pool::Pool::new(config.workers).map_err(|e| SigndError::Startup(format!("signing threads: {e}")))?;
    Ok(State { keys, audit, pool })
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
pub fn run(config_path: &Path, config: Config) -> Result<(), SigndError> {
    let policy =
        Policy::resolve(&config.roles).map_err(|e| SigndError::Config(format!("{}: {e}", config_path.display())))?;
    let mode = signet_runtime::config::parse_mode(&config.socket_mode).ok_or_else(|| {
        SigndError::Config(format!("{}: socket_mode {:?} is not octal", config_path.display(), config.socket_mode))
    })?;
    let state = Arc::new(open_state(&config)?);
    let issuers = issuers::Issuers::load(&config.issuers, &state.keys)
        .map_err(|e| SigndError::Config(format!("{}: {e}", config_path.display())))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SigndError::Startup(format!("tokio runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let signals = Signals::install().map_err(|e| SigndError::Startup(format!("signal handlers: {e}")))?;
        let mut act = activation::Activation::from_env();
        let listener = activation::unix_listener(&mut act, "signd", &config.socket, mode)?;
        let service = Signd::new(state.clone(), policy);
        service.set_issuers(issuers);
        let opts = ServeOptions {
            max_frame_bytes: config.limits.max_frame_bytes,
            max_message_bytes: config.limits.max_message_bytes,
            max_batch: config.limits.max_batch,
            busy_poll: std::time::Duration::from_micros(config.busy_poll_us),
        };
        let shutdown = signals.shutdown_token();
        let server = tokio::task::spawn_local(serve(listener, Rc::new(service.clone()), opts, shutdown.clone()));
        let health = service.health();
        tracing::info!(
            socket = %config.socket.display(),
            keys = health.keys_loaded,
            unavailable = health.keys_unavailable,
            workers = state.pool.threads(),
            "signd ready"
        );
        let _ = notify::ready();
        let _ =
            notify::status(&format!("serving {} keys ({} unavailable)", health.keys_loaded, health.keys_unavailable));
        let _watchdog = notify::spawn_watchdog(|| true);
        let mut reload = signals.reload();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                changed = reload.changed() => {
                    if changed.is_err() { break; }
                    let _ = notify::reloading();
                    match reload_policy(config_path) {
                        Ok(p) => { service.set_policy(p); tracing::info!("policy reloaded"); }
                        Err(e) => tracing::error!(error = %e, "reload failed; keeping the old policy"),
                    }
                    let _ = notify::ready();
                }
            }
        }
        let _ = notify::stopping();
        tracing::info!("signd stopping");
        let _ = server.await;
        Ok::<(), SigndError>(())
    })?;
    // Audit records are already committed; flush them to disk before exiting.
    drop(local);
    drop(rt);
    Ok(())
}

fn reload_policy(path: &Path) -> Result<Policy, String> {
    let config: Config = signet_runtime::config::load(path).map_err(|e| e.to_string())?;
    Policy::resolve(&config.roles).map_err(|e| e.to_string())
}
