//! Open connections: each one's phase (idle, reading a request's head, answering), the
//! watchdog that closes it when a phase lasts too long, and the bound on how many are open
//! (the one idle the longest is shed first).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::limits::HttpLimits;
use crate::metrics::HttpMetrics;

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No request in progress and no byte of the next one read, since then.
    Idle(Instant),
    /// The first bytes of a request have arrived, since then; its head is not complete.
    Head(Instant),
    /// This many requests are being answered.
    Busy(u32),
}

/// One connection's shared state: its phase, and the token that closes it.
#[derive(Debug)]
pub(crate) struct Conn {
    id: u64,
    phase: Mutex<Phase>,
    /// A request has been answered on it (the first request's head has a deadline from
    /// the accept; later ones from their first byte).
    served: AtomicBool,
    /// A request body fell behind its minimum rate: the connection closes after the answer.
    too_slow: AtomicBool,
    close: CancellationToken,
}

impl Conn {
    fn phase(&self) -> MutexGuard<'_, Phase> {
        // A poisoned lock only means a panic elsewhere mid-update of a Copy value.
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection starts over as new (after its TLS handshake): its first request's head
    /// is due a header timeout from now.
    pub(crate) fn restart(&self) {
        *self.phase() = Phase::Idle(Instant::now());
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn bytes_read(&self) {
        let mut phase = self.phase();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Head(Instant::now());
        }
    }

    /// A request's head is complete and its answer begins, until the guard is dropped.
    pub(crate) fn begin_request(self: &Arc<Self>) -> RequestGuard {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        RequestGuard(self.clone())
    }

    /// The body of a request on this connection fell behind.
    pub(crate) fn mark_too_slow(&self) {
        self.too_slow.store(true, Ordering::Relaxed);
    }

    /// Whether the connection must close after the answer in progress.
    pub(crate) fn is_too_slow(&self) -> bool {
        self.too_slow.load(Ordering::Relaxed)
    }

    /// The token cancelled when the connection is to close.
    pub(crate) fn closed(&self) -> &CancellationToken {
        &self.close
    }

    /// When this connection's current phase runs out, or `None` while requests are answered.
    fn deadline(&self, limits: &HttpLimits) -> Option<Instant> {
        match *self.phase() {
            Phase::Idle(since) if self.served.load(Ordering::Relaxed) => Some(since + limits.idle_timeout()),
            Phase::Idle(since) | Phase::Head(since) => Some(since + limits.header_timeout()),
            Phase::Busy(_) => None,
        }
    }

    /// Since when the connection has been idle (a connection reading a head is not).
    fn idle_since(&self) -> Option<Instant> {
        match *self.phase() {
            Phase::Idle(since) => Some(since),
            _ => None,
        }
    }

    /// Returns when a phase outlasts its limit (with the limit's name, `head_timeout` or
    /// `idle_timeout`, counted in `connections`' metrics) or when `close` is cancelled by
    /// someone else (`None`): the connection is then to close.
    pub(crate) async fn watchdog(&self, connections: &Connections) -> Option<&'static str> {
        let limits = *connections.limits();
        loop {
            let wake = match self.deadline(&limits) {
                Some(deadline) if deadline <= Instant::now() => {
                    // A connection that never sent a whole head timed out waiting for one.
                    let why = match *self.phase() {
                        Phase::Idle(_) if self.served.load(Ordering::Relaxed) => "idle_timeout",
                        _ => "head_timeout",
                    };
                    connections.closed_for(why);
                    self.close.cancel();
                    return Some(why);
                }
                Some(deadline) => deadline,
                // Answering: look again later (a request's own time is the handler's).
                None => Instant::now() + limits.header_timeout(),
            };
            tokio::select! {
                () = self.close.cancelled() => return None,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

/// A request being answered; dropping it ends the request.
pub(crate) struct RequestGuard(Arc<Conn>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let conn = &self.0;
        let mut phase = conn.phase();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => {
                conn.served.store(true, Ordering::Relaxed);
                Phase::Idle(Instant::now())
            }
        };
    }
}

/// The connections open on one listener.
#[derive(Debug)]
pub(crate) struct Connections {
    limits: HttpLimits,
    bound: usize,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Connections closed for the bound, counted for the log (warned once per 1,024).
    shed: AtomicU64,
    metrics: HttpMetrics,
}

impl Connections {
    pub(crate) fn new(limits: HttpLimits, metrics: HttpMetrics) -> Connections {
        Connections {
            metrics,
            bound: limits.connection_bound(),
            limits,
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            shed: AtomicU64::new(0),
        }
    }

    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many may be open at once.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// The limits the connections are held to.
    pub(crate) fn limits(&self) -> &HttpLimits {
        &self.limits
    }

    /// Counts a connection the server closed for `reason` (see [`HttpMetrics`]).
    pub(crate) fn closed_for(&self, reason: &'static str) {
        self.metrics.connection_closed(reason);
    }

    /// Registers a new connection. At the bound, the connection idle the longest is
    /// closed to make room; when none is idle, `None`: the new connection is to be closed.
    pub(crate) fn admit(&self) -> Option<Arc<Conn>> {
        let mut open = self.open();
        if open.len() >= self.bound {
            let oldest = open.values().filter_map(|c| c.idle_since().map(|t| (t, c.id))).min();
            let shed = self.shed.fetch_add(1, Ordering::Relaxed);
            if shed % 1024 == 0 {
                tracing::warn!(
                    open = open.len(),
                    bound = self.bound,
                    shed = shed + 1,
                    "HTTP connections at their bound: closing the longest idle (or the new one)"
                );
            }
            let Some((_, id)) = oldest else {
                self.metrics.connection_closed("refused");
                return None;
            };
            if let Some(c) = open.remove(&id) {
                c.close.cancel();
                self.metrics.connection_closed("shed");
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            phase: Mutex::new(Phase::Idle(Instant::now())),
            served: AtomicBool::new(false),
            too_slow: AtomicBool::new(false),
            close: CancellationToken::new(),
        });
        open.insert(id, conn.clone());
        self.metrics.connections_open(open.len());
        Some(conn)
    }

    /// Forgets a connection that has closed.
    pub(crate) fn remove(&self, conn: &Conn) {
        let mut open = self.open();
        open.remove(&conn.id);
        self.metrics.connections_open(open.len());
    }

    /// The TLS handshake bound.
    pub(crate) fn tls_handshake_timeout(&self) -> Duration {
        self.limits.tls_handshake_timeout()
    }
}

/// A connection's byte stream, telling its [`Conn`] when bytes arrive.
pub(crate) struct Watched<I> {
    inner: I,
    conn: Arc<Conn>,
}

impl<I> Watched<I> {
    pub(crate) fn new(inner: I, conn: Arc<Conn>) -> Self {
        Watched { inner, conn }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.bytes_read();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
