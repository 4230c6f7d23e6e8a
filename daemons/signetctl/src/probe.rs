//! `signetctl probe ...`: probed's checks from its config file: list them, or run one once and
//! print what it found (what an operator does while fixing a failure). The check runs through
//! the same code as in probed, with its timeout and retries.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use probed::checks::Probe;
use probed::config::{CheckConfig, Config, Kind};
use serde_json::json;

use crate::output::Printer;
use crate::{Failure, EXIT_CODES};

/// `signetctl probe ...`
#[derive(Subcommand)]
pub enum ProbeCommand {
    /// List the checks configured in probed's config: name, kind, target, interval.
    #[command(after_help = EXIT_CODES)]
    List {
        /// probed's config file.
        #[arg(long, env = "SIGNET_PROBED_CONFIG", default_value = "/etc/signet/probed.toml")]
        config: PathBuf,
    },
    /// Run one check once, as probed would; exit 0 if it passes, 1 if not.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The check's name (`[checks.<name>]`).
        name: String,
        /// probed's config file.
        #[arg(long, env = "SIGNET_PROBED_CONFIG", default_value = "/etc/signet/probed.toml")]
        config: PathBuf,
    },
}

/// Runs a `probe` subcommand.
pub fn run(cmd: &ProbeCommand, out: &Printer) -> Result<(), Failure> {
    match cmd {
        ProbeCommand::List { config } => {
            let config = load(config)?;
            if out.json {
                let checks: Vec<_> = config
                    .checks
                    .iter()
                    .map(|(name, c)| {
                        json!({
                            "name": name,
                            "kind": c.kind.as_str(),
                            "target": target(c),
                            "interval_seconds": c.schedule(&config.defaults).interval.as_secs_f64(),
                        })
                    })
                    .collect();
                out.json(&json!({ "checks": checks }));
            } else {
                for (name, c) in &config.checks {
                    let interval = c.schedule(&config.defaults).interval;
                    outln!("{name:<24} {:<6} {:>8?}  {}", c.kind.as_str(), interval, target(c));
                }
            }
            Ok(())
        }
        ProbeCommand::Run { name, config } => {
            let config = load(config)?;
            let check = config.checks.get(name).ok_or_else(|| Failure {
                code: 4,
                message: format!("no check named `{name}` (signetctl probe list shows them)"),
            })?;
            let schedule = check.schedule(&config.defaults);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Failure { code: 1, message: format!("tokio runtime: {e}") })?;
            let outcome = rt.block_on(async {
                let probe =
                    Probe::new(check).map_err(|e| Failure { code: 2, message: format!("check `{name}`: {e}") })?;
                Ok::<_, Failure>(probe.run(schedule.timeout, schedule.retries).await)
            })?;
            if out.json {
                let gauges: serde_json::Map<String, serde_json::Value> =
                    outcome.gauges.iter().map(|(g, v)| (g.metric().0.to_owned(), json!(v))).collect();
                out.json(&json!({
                    "name": name,
                    "kind": check.kind.as_str(),
                    "ok": outcome.ok,
                    "duration_seconds": outcome.duration.as_secs_f64(),
                    "attempts": outcome.attempts,
                    "message": outcome.message,
                    "gauges": gauges,
                }));
            } else {
                let verdict = if outcome.ok { "ok" } else { "FAILED" };
                outln!(
                    "{name}: {verdict} in {:?} ({} attempt(s)): {}",
                    outcome.duration,
                    outcome.attempts,
                    outcome.message
                );
                for (g, v) in &outcome.gauges {
                    outln!("  {} {v}", g.metric().0);
                }
            }
            if outcome.ok {
                Ok(())
            } else {
                Err(Failure { code: 1, message: format!("check `{name}` failed: {}", outcome.message) })
            }
        }
    }
}

/// The config, strictly read and checked as probed does.
fn load(path: &Path) -> Result<Config, Failure> {
    signet_runtime::config::load_checked::<Config>(path)
        .map(signet_runtime::config::Checked::into_inner)
        .map_err(|e| Failure { code: 2, message: e.to_string() })
}

/// What a check looks at, in one line.
fn target(c: &CheckConfig) -> String {
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    match c.kind {
        Kind::Http | Kind::Crl | Kind::Ct => c.url.as_ref().map(|u| u.0.to_string()).unwrap_or_default(),
        Kind::Tcp | Kind::Tls => c.address.clone().unwrap_or_default(),
        Kind::Dns => format!("{} {}", c.record_type.as_deref().unwrap_or("A"), c.name.as_deref().unwrap_or_default()),
        Kind::Ocsp => match &c.url {
            Some(u) => format!("{} at {}", path(&c.certificate), u.0),
            None => path(&c.certificate),
        },
        Kind::Signd => format!("{} {}", path(&c.socket), c.key.as_deref().unwrap_or_default()),
    }
}
