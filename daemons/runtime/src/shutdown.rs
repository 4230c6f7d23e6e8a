//! Unix signals: SIGTERM/SIGINT start a graceful shutdown, SIGHUP asks for a reload.

use std::io;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The daemon's signal handlers, installed once at start-up.
///
/// Dropping it leaves the handlers task running; the token and reload receiver stay valid.
#[derive(Debug)]
pub struct Signals {
    shutdown: CancellationToken,
    reload: watch::Receiver<u64>,
}

impl Signals {
    /// Installs handlers for SIGTERM, SIGINT and SIGHUP. Must be called inside a tokio runtime
    /// (an error is returned otherwise).
    ///
    /// From then on these signals no longer kill the process: SIGTERM or SIGINT cancels
    /// [`Signals::shutdown_token`], each SIGHUP bumps the [`Signals::reload`] counter.
    pub fn install() -> io::Result<Signals> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| io::Error::other(format!("Signals::install needs a tokio runtime: {e}")))?;
        // Register all three before spawning, so a failure is reported here.
        let term = signal(SignalKind::terminate())?;
        let int = signal(SignalKind::interrupt())?;
        let hup = signal(SignalKind::hangup())?;
        let shutdown = CancellationToken::new();
        let (reload_tx, reload) = watch::channel(0u64);
        runtime.spawn(dispatch(term, int, hup, shutdown.clone(), reload_tx));
        Ok(Signals { shutdown, reload })
    }

    /// A token cancelled on the first SIGTERM or SIGINT; clone it freely.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// A receiver whose value counts the SIGHUPs seen; `changed().await` waits for the next one.
    pub fn reload(&self) -> watch::Receiver<u64> {
        self.reload.clone()
    }
}

async fn dispatch(
    mut term: Signal,
    mut int: Signal,
    mut hup: Signal,
    shutdown: CancellationToken,
    reload: watch::Sender<u64>,
) {
    loop {
        tokio::select! {
            // Cancel first: nothing that happens while logging may stop the shutdown.
            Some(()) = term.recv() => {
                shutdown.cancel();
                tracing::info!("SIGTERM received; shutting down");
            }
            Some(()) = int.recv() => {
                shutdown.cancel();
                tracing::info!("SIGINT received; shutting down");
            }
            Some(()) = hup.recv() => {
                tracing::info!("SIGHUP received; reloading");
                reload.send_modify(|n| *n += 1);
            }
            else => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use nix::sys::signal::{kill, Signal as NixSignal};
    use nix::unistd::Pid;
    use std::time::Duration;

    #[test]
    fn install_outside_runtime_is_an_error() {
        assert!(Signals::install().is_err());
    }

    #[tokio::test]
    async fn hup_bumps_reload_and_term_cancels() {
        let signals = Signals::install().unwrap();
        let token = signals.shutdown_token();
        let mut reload = signals.reload();
        assert_eq!(*reload.borrow(), 0);

        kill(Pid::this(), NixSignal::SIGHUP).unwrap();
        tokio::time::timeout(Duration::from_secs(5), reload.changed()).await.expect("reload within 5 s").unwrap();
        assert_eq!(*reload.borrow_and_update(), 1);
        assert!(!token.is_cancelled());

        kill(Pid::this(), NixSignal::SIGHUP).unwrap();
        tokio::time::timeout(Duration::from_secs(5), reload.changed()).await.expect("second reload").unwrap();
        assert_eq!(*reload.borrow_and_update(), 2);

        kill(Pid::this(), NixSignal::SIGTERM).unwrap();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled()).await.expect("shutdown within 5 s");
        assert!(signals.shutdown_token().is_cancelled());

        let again = Signals::install().unwrap();
        kill(Pid::this(), NixSignal::SIGINT).unwrap();
        tokio::time::timeout(Duration::from_secs(5), again.shutdown_token().cancelled())
            .await
            .expect("SIGINT also shuts down");
    }
}
