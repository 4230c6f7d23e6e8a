//! One daemon lifecycle, written once: signal handlers, sd_notify (`READY`, `RELOADING`,
//! `STOPPING`, `STATUS`), the watchdog, SIGHUP reloads and a graceful stop that waits for the
//! daemon's tasks.
//!
//! A daemon's `run` installs the [`Lifecycle`] first (inside its tokio runtime), binds its
//! sockets, starts its tasks with [`Lifecycle::shutdown_token`], registers what to wait for
//! with [`Lifecycle::on_stop`], logs that it is ready and hands the rest to
//! [`Lifecycle::serve`]. What differs between daemons is what a reload applies: the [`Reload`]
//! trait.
//!
//! ```no_run
//! # use std::path::Path;
//! # use signet_runtime::config::DaemonConfig;
//! # use signet_runtime::lifecycle::{Lifecycle, Reload};
//! # #[derive(serde::Deserialize)] struct Config {}
//! # impl DaemonConfig for Config { fn check_config(&self) -> Result<(), String> { Ok(()) } }
//! struct Policy;
//! impl Reload for Policy {
//!     type Config = Config;
//!     const WHAT: &'static str = "policy";
//!     fn reload(&self, config: Config) -> Result<(), String> {
//!         Ok(()) // resolve everything first, then swap it in
//!     }
//! }
//! # async fn run(path: &Path) -> Result<(), signet_runtime::DaemonError> {
//! let mut life = Lifecycle::install("exampled", path)?;
//! let server = tokio::spawn(serve_forever(life.shutdown_token()));
//! life.on_stop(async move {
//!     let _ = server.await;
//! });
//! tracing::info!("exampled ready");
//! life.serve("serving", &Policy).await;
//! # Ok(()) }
//! # async fn serve_forever(_: tokio_util::sync::CancellationToken) {}
//! ```

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{load_checked, DaemonConfig};
use crate::shutdown::Signals;
use crate::{notify, DaemonError};

/// What a daemon applies on SIGHUP. The rest of its configuration takes a restart.
pub trait Reload {
    /// The daemon's configuration file.
    type Config: DaemonConfig;
    /// What a reload applies, as the log names it ("policy", "registrars", "[admin]").
    const WHAT: &'static str;

    /// Applies `config`, freshly read and checked ([`DaemonConfig::check_config`]): all of
    /// what it changes or, when it returns an error, nothing.
    fn reload(&self, config: Self::Config) -> Result<(), String>;
}

/// A task the stop waits for.
type StopTask = Pin<Box<dyn Future<Output = ()>>>;

/// A daemon between start and stop: its signal handlers, its config file, and what the stop
/// waits for.
pub struct Lifecycle {
    daemon: String,
    config_path: PathBuf,
    shutdown: CancellationToken,
    reload: watch::Receiver<u64>,
    on_stop: Vec<StopTask>,
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("daemon", &self.daemon)
            .field("config_path", &self.config_path)
            .field("on_stop", &self.on_stop.len())
            .finish_non_exhaustive()
    }
}

impl Lifecycle {
    /// Installs the signal handlers (SIGTERM and SIGINT stop, SIGHUP reloads `config_path`)
    /// for `daemon`. Must be called inside a tokio runtime, before anything that may take a
    /// while: from then on these signals no longer kill the process.
    pub fn install(daemon: &str, config_path: &Path) -> Result<Lifecycle, DaemonError> {
        let signals = Signals::install().map_err(|e| DaemonError::Startup(format!("signal handlers: {e}")))?;
        Ok(Lifecycle::with_triggers(daemon, config_path, signals.shutdown_token(), signals.reload()))
    }

    /// A lifecycle driven by `shutdown` and `reload` instead of signals.
    fn with_triggers(
        daemon: &str,
        config_path: &Path,
        shutdown: CancellationToken,
        reload: watch::Receiver<u64>,
    ) -> Lifecycle {
        Lifecycle {
            daemon: daemon.to_owned(),
            config_path: config_path.to_owned(),
            shutdown,
            reload,
            on_stop: Vec::new(),
        }
    }

    /// A token cancelled when the daemon is to stop (SIGTERM or SIGINT); the daemon's tasks
    /// watch it, and may cancel it themselves to stop the daemon.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Has the stop wait for `task` (a server draining its connections, a thread joining),
    /// after the tasks registered before it.
    pub fn on_stop(&mut self, task: impl Future<Output = ()> + 'static) {
        self.on_stop.push(Box::pin(task));
    }

    /// Serves until the shutdown token is cancelled: tells systemd the daemon is ready, with
    /// `status`, starts the watchdog, and applies each SIGHUP's reload (the config file read
    /// and checked again, then [`Reload::reload`]; logged either way). Then tells systemd the
    /// daemon is stopping and waits for the [`on_stop`](Self::on_stop) tasks in turn.
    pub async fn serve<R: Reload>(self, status: &str, reloader: &R) {
        let Lifecycle { daemon, config_path, shutdown, mut reload, on_stop } = self;
        let _ = notify::ready();
        let _ = notify::status(status);
        // Never aborted: it keeps pinging while the tasks drain.
        let _watchdog = notify::spawn_watchdog(|| true);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                changed = reload.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let _ = notify::reloading();
                    match apply_reload(&config_path, reloader) {
                        Ok(()) => tracing::info!("{} reloaded", R::WHAT),
                        Err(e) => tracing::error!(error = %e, "reload failed; keeping the old {}", R::WHAT),
                    }
                    let _ = notify::ready();
                }
            }
        }
        let _ = notify::stopping();
        tracing::info!("{daemon} stopping");
        for task in on_stop {
            task.await;
        }
    }
}

/// One reload: the whole config read and checked, then applied.
fn apply_reload<R: Reload>(config_path: &Path, reloader: &R) -> Result<(), String> {
    let config = load_checked::<R::Config>(config_path).map_err(|e| e.to_string())?;
    reloader.reload(config.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Conf {
        users: Vec<String>,
    }

    impl DaemonConfig for Conf {
        fn check_config(&self) -> Result<(), String> {
            match self.users.iter().find(|u| u.is_empty()) {
                Some(_) => Err("users: an empty name".into()),
                None => Ok(()),
            }
        }
    }

    /// Records what each reload applied.
    #[derive(Default)]
    struct Users(RefCell<Vec<String>>);

    impl Reload for Users {
        type Config = Conf;
        const WHAT: &'static str = "users";

        fn reload(&self, config: Conf) -> Result<(), String> {
            if config.users.iter().any(|u| u == "refused") {
                return Err("refused".into());
            }
            *self.0.borrow_mut() = config.users;
            Ok(())
        }
    }

    #[tokio::test]
    async fn reloads_apply_checked_configs_and_stop_waits_for_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.toml");
        std::fs::write(&path, "users = [\"a\"]\n").unwrap();
        let shutdown = CancellationToken::new();
        let (hup, reload) = watch::channel(0u64);
        let mut life = Lifecycle::with_triggers("testd", &path, shutdown.clone(), reload);
        assert!(!life.shutdown_token().is_cancelled());
        let stopped = Rc::new(RefCell::new(Vec::new()));
        for n in [1, 2] {
            let stopped = stopped.clone();
            life.on_stop(async move {
                tokio::time::sleep(Duration::from_millis(10 / n)).await;
                stopped.borrow_mut().push(n);
            });
        }
        let users = Users::default();
        let driver = async {
            let settle = || tokio::time::sleep(Duration::from_millis(20));
            let step = |text: &str| {
                std::fs::write(&path, text).unwrap();
                hup.send_modify(|n| *n += 1);
            };
            step("users = [\"b\", \"c\"]\n");
            settle().await;
            assert_eq!(*users.0.borrow(), ["b", "c"]);
            // Refused by the check, by the reload itself, or unreadable: the old users stay.
            step("users = [\"\"]\n");
            settle().await;
            step("users = [\"refused\"]\n");
            settle().await;
            step("userz = []\n");
            settle().await;
            assert_eq!(*users.0.borrow(), ["b", "c"]);
            shutdown.cancel();
        };
        tokio::join!(life.serve("testing", &users), driver);
        assert_eq!(*stopped.borrow(), [1, 2]);
    }

    #[tokio::test]
    async fn install_inside_a_runtime() {
        // Another test may send this process SIGTERM at any time: look only at the shape.
        let life = Lifecycle::install("testd", Path::new("/nonexistent")).unwrap();
        assert!(format!("{life:?}").contains("testd"));
    }
}
