//! The daemon: the store opened, the checks scheduled, the HTTP side served until stopped;
//! SIGHUP re-reads the checks and webhooks, keeping the state and history of every check whose
//! name survives.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use signet_runtime::activation;
use signet_runtime::config::Checked;
use signet_runtime::lifecycle::{Lifecycle, Reload};
use signet_runtime::metrics::Metrics;

use crate::config::Config;
use crate::history::History;
use crate::metrics::ProbeMetrics;
use crate::scheduler::{unix_ms, Scheduler};
use crate::web::Web;

pub use signet_runtime::DaemonError as ProbedError;

/// How often results past retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Runs probed with a checked configuration until SIGTERM/SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), ProbedError> {
    let config = config.into_inner();
    let history = History::open(&config.state_dir)
        .map_err(|source| ProbedError::Store { path: config.state_dir.clone(), source })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ProbedError::Startup(format!("tokio runtime: {e}")))?;
    rt.block_on(serve(config_path, config, Arc::new(history)))
}

struct Running {
    scheduler: Arc<Scheduler>,
}

impl Reload for Running {
    type Config = Config;
    const WHAT: &'static str = "checks";

    fn reload(&self, config: Config) -> Result<(), String> {
        self.scheduler.apply(&config)?;
        tracing::info!(checks = config.checks.len(), webhooks = config.webhooks.len(), "checks reloaded");
        Ok(())
    }
}

async fn serve(config_path: &Path, config: Config, history: Arc<History>) -> Result<(), ProbedError> {
    let mut life = Lifecycle::install("probed", config_path)?;
    let shutdown = life.shutdown_token();
    let mut act = activation::Activation::from_env();
    let listener = activation::tcp_listener(&mut act, "probed-http", config.listen)?;

    let metrics = Metrics::new("probed");
    let probe_metrics = ProbeMetrics::register(&metrics);
    let scheduler = Scheduler::new(history.clone(), probe_metrics, shutdown.clone());
    scheduler.apply(&config).map_err(|e| ProbedError::Config(format!("{}: {e}", config_path.display())))?;

    let pruner = tokio::spawn(prune(history, shutdown.clone()));
    let web = Arc::new(Web::new(scheduler.clone(), config.refresh_seconds));
    let http = tokio::spawn(signet_runtime::http::serve(
        listener,
        config.http,
        web,
        metrics,
        signet_runtime::health::Health::new(),
        shutdown.clone(),
    ));
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
        let _ = pruner.await;
    });
    tracing::info!(listen = %config.listen, checks = config.checks.len(), "probed ready");
    let running = Running { scheduler };
    life.serve(&format!("probing {} checks", config.checks.len()), &running).await;
    Ok(())
}

/// Deletes what is past retention, now and every [`PRUNE_EVERY`].
async fn prune(history: Arc<History>, stop: tokio_util::sync::CancellationToken) {
    loop {
        let h = history.clone();
        match tokio::task::spawn_blocking(move || h.prune(unix_ms())).await {
            Ok(Ok(n)) if n > 0 => tracing::info!(rows = n, "history pruned"),
            // A full or read-only disk is logged by the history, once.
            Ok(Err(e)) if e.refuses_writes().is_none() || !history.refusing_writes() => {
                tracing::warn!(error = %e, "history pruning failed")
            }
            _ => {}
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PRUNE_EVERY) => {}
        }
    }
}
