//! The daemon: every configured log, and every shard added through the admin
//! interface, started over signd, LMDB and its storage, served over HTTP
//! until stopped; the admin interface on its own thread.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use signet_ct::rfc6962::api::AddChainLimits;
use signet_ct::verify::LogKey;
use signet_ipc::SigndClient;
use signet_runtime::activation;
use signet_runtime::config::Checked;
use signet_runtime::health::{self, Health};
use signet_runtime::lifecycle::{Lifecycle, Reload};
use signet_runtime::metrics::Metrics;
use signet_runtime::notify;
use signet_runtime::service_thread::ServiceThread;
use signet_store::{Durability, Store, StoreOptions};
use signet_types::Clock;
use tokio::task::JoinHandle;

use crate::admin::Admins;
use crate::chain::Roots;
use crate::config::{Config, LogSettings, StorageSettings};
use crate::db::{LogDb, SCHEMA_VERSION, STORE_APPLICATION};
use crate::http::CtHttp;
use crate::log::{Log, LogConfig};
use crate::metrics::LogMetrics;
use crate::sequencer::{LogParams, Sequencer};
use crate::shards::{LogSet, Served, ShardStore, Shards, StartLog};
use crate::signer::{SignError, SigndSigner};
use crate::storage::{LocalDir, ObjectStorage, Storage};

pub use signet_runtime::DaemonError as CtlogdError;

/// Runs ctlogd with a checked configuration until SIGTERM/SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), CtlogdError> {
    let config = config.into_inner();
    let mut opts = StoreOptions::new(STORE_APPLICATION, SCHEMA_VERSION);
    opts.map_size = 64 << 30;
    // An SCT is returned only after its batch is committed: every commit is fsynced.
    opts.durability = Durability::Sync;
    let store = Store::open(&config.state_dir, opts)
        .map_err(|source| CtlogdError::Store { path: config.state_dir.clone(), source })?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.http_threads {
        builder.worker_threads(n.max(1));
    }
    let rt = builder.enable_all().build().map_err(|e| CtlogdError::Startup(format!("tokio runtime: {e}")))?;
    rt.block_on(serve(config_path, config, store))
}

/// The logs as started: what SIGHUP reloads (the roots, `[admin]`).
struct Running {
    roots: Arc<Roots>,
    names: Vec<String>,
    admins: Arc<Admins>,
}

impl Reload for Running {
    type Config = Config;
    const WHAT: &'static str = "roots and [admin]";

    fn reload(&self, config: Config) -> Result<(), String> {
        let configured: Vec<&String> = config.logs.keys().collect();
        if configured.iter().ne(self.names.iter().collect::<Vec<_>>().iter()) {
            return Err("the set of configured logs changed; restart ctlogd to apply it".into());
        }
        let pem = config.read_roots()?;
        let n = self.roots.reload_pem(&pem).map_err(|e| e.to_string())?;
        Reload::reload(self.admins.as_ref(), config)?;
        tracing::info!(roots = n, "roots reloaded");
        Ok(())
    }
}

async fn serve(config_path: &Path, config: Config, store: Store) -> Result<(), CtlogdError> {
    let mut life = Lifecycle::install("ctlogd", config_path)?;
    let shutdown = life.shutdown_token();
    let mut act = activation::Activation::from_env();
    let http_listener = activation::tcp_listener(&mut act, "ctlogd-http", config.listen)?;
    // Bound now, so admin clients queue while ctlogd starts its logs.
    let admin_listener = match activation::unix_listener_std(
        &mut act,
        "ctlogd-admin",
        &config.admin_socket_path(),
        config.admin_socket_mode.bits(),
    ) {
        Ok(listener) => Some(listener),
        // The default socket is in the state directory: read-only, the logs are still
        // served, and the admin interface would only be refused its writes.
        Err(e) if store.is_read_only() && e.io_kind() == Some(std::io::ErrorKind::ReadOnlyFilesystem) => {
            tracing::error!(error = %e, "no admin socket on the read-only state directory: shards cannot be added until ctlogd restarts on a writable one");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let admins = Arc::new(Admins::new(&config, Config::admins).map_err(CtlogdError::Config)?);

    let pem = config.read_roots().map_err(CtlogdError::Config)?;
    let roots = Arc::new(Roots::from_pem(&pem).map_err(|e| CtlogdError::Config(e.to_string()))?);
    let signd = SigndClient::new(&config.signd_socket).map_err(|e| CtlogdError::Startup(e.to_string()))?;
    let config = Arc::new(config);
    let shard_store =
        ShardStore::open(&store).map_err(|source| CtlogdError::Store { path: config.state_dir.clone(), source })?;
    let start: StartLog = {
        let (config, store, signd, roots) = (config.clone(), store.clone(), signd.clone(), roots.clone());
        Arc::new(move |name, settings| {
            let (config, store, signd, roots) = (config.clone(), store.clone(), signd.clone(), roots.clone());
            async move { start_log(&config, &store, &signd, &roots, &name, &settings, false).await }.boxed()
        })
    };
    let _ = notify::status("starting logs");
    let set = LogSet::default();
    let tasks = Arc::new(Mutex::new(Vec::new()));
    tokio::select! {
        s = start_logs(&config, &store, &signd, &roots, &shard_store, &set, &tasks) => s.map_err(|e| CtlogdError::Config(format!("{}: {e}", config_path.display())))?,
        () = shutdown.cancelled() => return Ok(()),
    };

    let metrics = Metrics::new("ctlogd");
    let log_metrics = LogMetrics::register(&metrics);
    let health = Health::new();
    health::watch(&health, &metrics, "signd", health::WATCH_EVERY, shutdown.clone(), {
        let signd = signd.clone();
        move || signd.reachable()
    });
    tokio::spawn(log_metrics.clone().update_every(set.clone(), Duration::from_secs(1), shutdown.clone()));
    let handler = Arc::new(CtHttp::over(set.clone()));
    let http = tokio::spawn(signet_runtime::http::serve(
        http_listener,
        config.http,
        handler,
        metrics,
        health,
        shutdown.clone(),
    ));
    // The admin interface: its own thread and LocalSet; adds run here.
    let shards = Shards {
        config: config.clone(),
        set: set.clone(),
        store: shard_store,
        start,
        tasks: tasks.clone(),
        adding: Arc::new(tokio::sync::Mutex::new(())),
    };
    if let Some(admin_listener) = admin_listener {
        let (admins, stop, runtime) = (admins.clone(), shutdown.clone(), tokio::runtime::Handle::current());
        let admin_thread =
            ServiceThread::spawn("ctlogd-admin", "admin", admin_listener, shutdown.clone(), move |listener| {
                crate::admin::serve(listener, shards, admins, runtime, stop)
            })?;
        life.on_stop(admin_thread.join());
    }
    let names: Vec<String> = config.logs.keys().cloned().collect();
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
        // The set held the last handles of the sequencers (with the HTTP side
        // and the admin thread gone): with it emptied, each sequencer finishes
        // the batch it has and ends.
        set.clear();
        let tasks = std::mem::take(&mut *tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
    });
    tracing::info!(
        listen = %config.listen,
        admin_socket = %config.admin_socket_path().display(),
        logs = ?names,
        "ctlogd ready"
    );
    let running = Running { roots, names, admins };
    life.serve(&format!("serving {} configured logs", running.names.len()), &running).await;
    Ok(())
}

/// Starts every configured log, then every shard added earlier through the
/// admin interface (one whose name is now configured is left out, logged).
async fn start_logs(
    config: &Config,
    store: &Store,
    signd: &SigndClient,
    roots: &Arc<Roots>,
    shards: &ShardStore,
    set: &LogSet,
    tasks: &Mutex<Vec<JoinHandle<()>>>,
) -> Result<(), String> {
    let mut started = Vec::new();
    for (name, settings) in &config.logs {
        started.push((name.clone(), start_log(config, store, signd, roots, name, settings, true).await?, false));
    }
    for (name, record) in shards.all().map_err(|e| format!("the shards' table: {e}"))? {
        if config.logs.contains_key(&name) {
            tracing::error!(log = %name, "a shard added through the admin interface has the name of a configured log; not served");
            continue;
        }
        let settings = record.settings(config, &name).map_err(|e| format!("shard `{name}`: {e}"))?;
        started.push((name.clone(), start_log(config, store, signd, roots, &name, &settings, true).await?, true));
    }
    for (name, (log, task), added) in started {
        set.add(Served { prefix: format!("/{name}/"), name, log, added });
        tasks.lock().unwrap_or_else(PoisonError::into_inner).push(task);
    }
    Ok(())
}

/// Starts one log: its key from signd (at start, waiting for signd to come
/// up), its storage, its tables, its sequencer (with crash repair).
async fn start_log(
    config: &Config,
    store: &Store,
    signd: &SigndClient,
    roots: &Arc<Roots>,
    name: &str,
    settings: &LogSettings,
    wait_for_signd: bool,
) -> Result<(Arc<Log>, JoinHandle<()>), String> {
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("log `{name}`: {what}: {e}");
    let signer = SigndSigner::new(signd.clone(), settings.signd_log(name));
    let public_key_der = loop {
        match signer.public_key().await {
            Err(SignError::Unavailable(e)) if wait_for_signd => {
                tracing::warn!(log = %name, error = %e, "waiting for signd");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            other => break other.map_err(|e| bad("signd", &e))?,
        }
    };
    let key = LogKey::from_spki_der(&public_key_der).map_err(|e| bad("log key from signd", &e))?;
    let storage: Arc<dyn Storage> = match &settings.storage {
        StorageSettings::Dir(dir) => Arc::new(LocalDir::open(dir).map_err(|e| bad("storage", &e))?),
        StorageSettings::S3(s3) => {
            let c = s3.s3_config().map_err(|e| bad("storage", &e))?;
            Arc::new(ObjectStorage::s3(&c).map_err(|e| bad("storage", &e))?)
        }
    };
    let db = LogDb::open(store, key.log_id()).map_err(|e| bad("store", &e))?;
    let params = LogParams { origin: config.origin(name), public_key_der: public_key_der.clone() };
    let (sequencer, task) =
        Sequencer::start(params, storage.clone(), db, Arc::new(signer), config.sequencing.sequencer_config())
            .await
            .map_err(|e| bad("start", &e))?;
    let url = config.log_url(name);
    let log_config = LogConfig {
        description: settings.description.clone().unwrap_or_else(|| format!("Signet CT log {name}")),
        submission_url: url.clone(),
        monitoring_url: url,
        public_key_der,
        window: settings.window(),
        mmd_secs: settings.mmd_seconds,
        limits: AddChainLimits::default(),
        max_get_entries: settings.max_get_entries,
        clock: Clock::system(),
    };
    let head = sequencer.head();
    tracing::info!(log = %name, origin = %config.origin(name), tree_size = head.head.tree_size, storage = %storage.describe(), "log started");
    Ok((Arc::new(Log::new(log_config, roots.clone(), sequencer, storage)), task))
}
