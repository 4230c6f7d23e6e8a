//! sd_notify messages to systemd and the watchdog task.
//!
//! Every function is a no-op returning `Ok(())` (or `None`) when `NOTIFY_SOCKET` is not set, so
//! daemons call them unconditionally. A unit using these has `Type=notify` (or `notify-reload`)
//! and `WatchdogSec=`.

use std::io;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio::task::JoinHandle;

/// Tells systemd start-up (or a reload) is complete: `READY=1`.
pub fn ready() -> io::Result<()> {
    send(&[NotifyState::Ready])
}

/// Sets the one-line status shown by `systemctl status`: `STATUS=...`.
///
/// Newlines are replaced by spaces so the text cannot smuggle in other assignments.
pub fn status(text: &str) -> io::Result<()> {
    let line = text.replace(['\n', '\r'], " ");
    send(&[NotifyState::Status(&line)])
}

/// Tells systemd the daemon is shutting down: `STOPPING=1`.
pub fn stopping() -> io::Result<()> {
    send(&[NotifyState::Stopping])
}

/// Tells systemd a reload started: `RELOADING=1` plus `MONOTONIC_USEC=`, as
/// `Type=notify-reload` (systemd 253+) requires. Send [`ready`] when the reload is done.
pub fn reloading() -> io::Result<()> {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return Ok(());
    }
    let now = NotifyState::monotonic_usec_now()?;
    send(&[NotifyState::Reloading, now])
}

/// Starts the watchdog: a tokio task sending `WATCHDOG=1` every half `WATCHDOG_USEC` while
/// `health()` returns true.
///
/// Returns `None` (and starts nothing) when `NOTIFY_SOCKET` or `WATCHDOG_USEC` is not set, when
/// `WATCHDOG_PID` names another process, or when called outside a tokio runtime. `health` runs
/// on the runtime at every tick, so it must be cheap and must not block.
pub fn spawn_watchdog<F>(health: F) -> Option<JoinHandle<()>>
where
    F: Fn() -> bool + Send + 'static,
{
    std::env::var_os("NOTIFY_SOCKET")?;
    let period = watchdog_period(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )?;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::error!("spawn_watchdog called outside a tokio runtime; watchdog not started");
        return None;
    };
    Some(runtime.spawn(watchdog_loop(period, health)))
}

async fn watchdog_loop<F: Fn() -> bool>(period: Duration, health: F) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_healthy = true;
    loop {
        ticks.tick().await;
        let healthy = health();
        if healthy {
            if let Err(e) = send(&[NotifyState::Watchdog]) {
                tracing::warn!(error = %e, "cannot send watchdog ping");
            }
        } else if was_healthy {
            tracing::error!("health check failed; withholding watchdog pings");
        }
        if healthy && !was_healthy {
            tracing::info!("health check passes again; resuming watchdog pings");
        }
        was_healthy = healthy;
    }
}

/// The ping period (half the watchdog timeout) if the watchdog is meant for `own_pid`.
fn watchdog_period(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    match pid.map(str::trim) {
        None | Some("") => {}
        Some(p) => {
            if p.parse::<u32>().ok()? != own_pid {
                return None;
            }
        }
    }
    Some(Duration::from_micros(usec / 2))
}

fn send(states: &[NotifyState]) -> io::Result<()> {
    // Keep NOTIFY_SOCKET set: the watchdog and later messages need it.
    sd_notify::notify(false, states)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::await_holding_lock)]
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("datagram");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    fn bind(dir: &tempfile::TempDir) -> UnixDatagram {
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &path);
        sock
    }

    #[test]
    fn messages_reach_the_socket() {
        let _env = crate::env_lock();
        let dir = tempfile::tempdir().unwrap();
        let sock = bind(&dir);

        ready().unwrap();
        assert_eq!(recv(&sock), "READY=1\n");
        status("serving\nREADY=1").unwrap();
        assert_eq!(recv(&sock), "STATUS=serving READY=1\n");
        stopping().unwrap();
        assert_eq!(recv(&sock), "STOPPING=1\n");
        reloading().unwrap();
        let msg = recv(&sock);
        let mut lines = msg.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec = lines.next().unwrap().strip_prefix("MONOTONIC_USEC=").unwrap();
        assert!(usec.parse::<u64>().unwrap() > 0);

        std::env::remove_var("NOTIFY_SOCKET");
    }

    #[test]
    fn no_op_without_notify_socket() {
        let _env = crate::env_lock();
        std::env::remove_var("NOTIFY_SOCKET");
        ready().unwrap();
        status("x").unwrap();
        stopping().unwrap();
        reloading().unwrap();
        std::env::set_var("WATCHDOG_USEC", "1000000");
        assert!(spawn_watchdog(|| true).is_none());
        std::env::remove_var("WATCHDOG_USEC");
    }

    #[test]
    fn watchdog_period_rules() {
        assert_eq!(watchdog_period(Some("2000000"), None, 42), Some(Duration::from_secs(1)));
        assert_eq!(watchdog_period(Some("2000000"), Some("42"), 42), Some(Duration::from_secs(1)));
        assert_eq!(watchdog_period(Some("2000000"), Some("43"), 42), None);
        assert_eq!(watchdog_period(Some("2000000"), Some("x"), 42), None);
        assert_eq!(watchdog_period(Some("0"), None, 42), None);
        assert_eq!(watchdog_period(Some("soon"), None, 42), None);
        assert_eq!(watchdog_period(None, Some("42"), 42), None);
    }

    #[tokio::test]
    async fn watchdog_pings_only_while_healthy() {
        let _env = crate::env_lock();
        let dir = tempfile::tempdir().unwrap();
        let std_sock = bind(&dir);
        std_sock.set_nonblocking(true).unwrap();
        let sock = tokio::net::UnixDatagram::from_std(std_sock).unwrap();
        std::env::set_var("WATCHDOG_USEC", "100000");
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());

        let healthy = Arc::new(AtomicBool::new(true));
        let h = healthy.clone();
        let task = spawn_watchdog(move || h.load(Ordering::SeqCst)).expect("watchdog started");
        // The next watchdog ping within `within`, if any. Other tests of this process may
        // notify the same socket meanwhile (a lifecycle's READY=1): those are skipped.
        let next_ping = |within: Duration| {
            let sock = &sock;
            async move {
                let mut buf = [0u8; 256];
                tokio::time::timeout(within, async {
                    loop {
                        let n = sock.recv(&mut buf).await.unwrap();
                        if &buf[..n] == b"WATCHDOG=1\n" {
                            return;
                        }
                    }
                })
                .await
                .is_ok()
            }
        };
        for _ in 0..3 {
            assert!(next_ping(Duration::from_secs(2)).await, "ping within 2 s");
        }

        healthy.store(false, Ordering::SeqCst);
        // Let any ping already in flight arrive (a loaded machine may hold one back for a
        // while), then drain.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut buf = [0u8; 256];
        while sock.try_recv(&mut buf).is_ok() {}
        assert!(!next_ping(Duration::from_millis(300)).await, "no ping while unhealthy");

        healthy.store(true, Ordering::SeqCst);
        assert!(next_ping(Duration::from_secs(2)).await, "pings resume");

        task.abort();
        for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            std::env::remove_var(var);
        }
    }

    #[test]
    fn watchdog_not_for_other_pid() {
        let _env = crate::env_lock();
        let dir = tempfile::tempdir().unwrap();
        let _sock = bind(&dir);
        std::env::set_var("WATCHDOG_USEC", "100000");
        std::env::set_var("WATCHDOG_PID", "1");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { assert!(spawn_watchdog(|| true).is_none()) });
        for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            std::env::remove_var(var);
        }
    }
}
