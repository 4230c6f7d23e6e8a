//! What the HTTP/1.1 load generators (ocsp-load, token-load) share: the
//! measured window, the counts a connection keeps, opening a connection, and
//! the back-off after a failed one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

/// The measured window: outcomes count if they complete in `[window_start, end)`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// When the warm-up ends.
    pub window_start: Instant,
    /// When the run ends.
    pub end: Instant,
}

impl Clock {
    /// Whether an outcome at `t` counts.
    pub fn counts(&self, t: Instant) -> bool {
        t >= self.window_start && t < self.end
    }
}

/// Counts from the measured window (`connections` counts from the start).
#[derive(Debug, Default)]
pub struct Stats {
    /// Good responses.
    pub responses: u64,
    /// Their latencies.
    pub latencies: Vec<Duration>,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Connections opened again after the server closed one.
    pub reconnects: u64,
    /// Connections opened.
    pub connections: u64,
    /// Body bytes received (ocsp-load).
    pub bytes: u64,
    /// Responses parsed in full (ocsp-load).
    pub parsed: u64,
}

impl Stats {
    /// Counts one failure of `kind`.
    pub fn error(&mut self, kind: String) {
        *self.errors.entry(kind).or_default() += 1;
    }

    /// The mean of the latencies (zero without any).
    pub fn mean_latency(&self) -> Duration {
        let n = self.latencies.len() as u32;
        if n == 0 {
            return Duration::ZERO;
        }
        self.latencies.iter().sum::<Duration>() / n
    }

    /// Every failure.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds another connection's counts.
    pub fn merge(&mut self, other: Stats) {
        self.responses += other.responses;
        self.latencies.extend(other.latencies);
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        self.reconnects += other.reconnects;
        self.connections += other.connections;
        self.bytes += other.bytes;
        self.parsed += other.parsed;
    }

    /// At least one response, and errors at most 0.1% of all outcomes.
    pub fn passed(&self) -> bool {
        let errors = self.error_count();
        self.responses > 0 && errors * 1000 <= self.responses + errors
    }
}

/// Counts a failed connection attempt and backs off briefly, so that a
/// refusing server is not spun against.
pub async fn connect_failed(stats: &mut Stats, clock: Clock, kind: String) {
    let now = Instant::now();
    if clock.counts(now) {
        stats.error(kind);
    }
    sleep_until((now + Duration::from_millis(10)).min(clock.end)).await;
}

/// Opens one keep-alive HTTP/1.1 connection to `addr` for a connection's
/// task, and counts it in `stats` (a reconnect too, inside the window). A
/// connect or handshake that fails, or takes longer than `timeout`, is
/// counted and backed off by [`connect_failed`]: `None`.
pub async fn open(
    addr: SocketAddr,
    timeout: Duration,
    stats: &mut Stats,
    clock: Clock,
) -> Option<http1::SendRequest<Full<Bytes>>> {
    let deadline = (Instant::now() + timeout).min(clock.end);
    let stream = match timeout_at(deadline, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            connect_failed(stats, clock, format!("connect: {}", e.kind())).await;
            return None;
        }
        Err(_) => {
            connect_failed(stats, clock, "connect: timeout".into()).await;
            return None;
        }
    };
    // Requests are one small write each; do not let Nagle hold them.
    let _ = stream.set_nodelay(true);
    let (sender, conn) = match http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await {
        Ok(pair) => pair,
        Err(e) => {
            connect_failed(stats, clock, format!("handshake: {e}")).await;
            return None;
        }
    };
    tokio::spawn(async move {
        // Its errors surface through the sender.
        let _ = conn.await;
    });
    stats.connections += 1;
    if stats.connections > 1 && clock.counts(Instant::now()) {
        stats.reconnects += 1;
    }
    Some(sender)
}
