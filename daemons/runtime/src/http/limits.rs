//! What a client may hold: the timeouts and the connection bound of every HTTP listener
//! (a daemon's `[http]` table), and [`Body`], the request body that enforces the body's
//! minimum rate.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::conn::Conn;

/// Timeouts and bounds for an HTTP listener, from a daemon's `[http]` table. Every field has a
/// default; `0` in `max_connections` means "from the open-file limit".
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpLimits {
    /// A TLS client must complete its handshake within this many milliseconds.
    pub tls_handshake_timeout_ms: u64,
    /// A request's headers must arrive within this many milliseconds of its first byte; a new
    /// connection must send its first request's headers within this long of being accepted.
    pub header_timeout_ms: u64,
    /// A request body may take this many milliseconds before it must flow at
    /// `body_min_bytes_per_second` on average (so a body of N bytes has
    /// `body_timeout_ms + N / rate` in all). A body that falls behind ends the request.
    pub body_timeout_ms: u64,
    /// The slowest average rate a request body may arrive at, after `body_timeout_ms`.
    pub body_min_bytes_per_second: u64,
    /// A connection with no request in progress is closed after this many milliseconds.
    pub idle_timeout_ms: u64,
    /// The most connections open at once, TLS handshakes included. At the bound a new
    /// connection closes the one idle the longest; when none is idle, the new one is closed.
    /// 0: three quarters of the process's open-file limit.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            tls_handshake_timeout_ms: 10_000,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            body_min_bytes_per_second: 1_024,
            idle_timeout_ms: 60_000,
            max_connections: 0,
        }
    }
}

impl HttpLimits {
    /// Refuses zero timeouts and rates, which would close every connection at once.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("tls_handshake_timeout_ms", self.tls_handshake_timeout_ms),
            ("header_timeout_ms", self.header_timeout_ms),
            ("body_timeout_ms", self.body_timeout_ms),
            ("body_min_bytes_per_second", self.body_min_bytes_per_second),
            ("idle_timeout_ms", self.idle_timeout_ms),
        ] {
            if value == 0 {
                return Err(format!("http.{name} must be more than 0"));
            }
        }
        Ok(())
    }

    pub(crate) fn tls_handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.tls_handshake_timeout_ms)
    }

    pub(crate) fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub(crate) fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// `max_connections`, or three quarters of the soft open-file limit.
    pub(crate) fn connection_bound(&self) -> usize {
        if self.max_connections > 0 {
            return self.max_connections;
        }
        let files = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map(|(soft, _)| soft)
            .unwrap_or(1024);
        usize::try_from(files / 4 * 3).unwrap_or(usize::MAX).max(16)
    }
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does): a daemon's
/// connections are bounded by [`HttpLimits::max_connections`], not by the default soft
/// limit of 1,024. Returns the limit now in force.
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard.max(soft))
}

/// A request body, as handlers receive it: hyper's, with the minimum rate of
/// [`HttpLimits`] enforced. A body that falls behind yields [`BodyError::TooSlow`] (and
/// the connection is closed after the answer); read it with `http_body_util` as any body.
#[derive(Debug)]
pub struct Body {
    inner: Incoming,
    /// The connection it arrives on, closed after the answer when the body falls behind.
    conn: Arc<Conn>,
    /// When the body started to be awaited; `None` until the first poll.
    started: Option<Instant>,
    received: u64,
    grace: Duration,
    min_rate: u64,
    deadline: Pin<Box<Sleep>>,
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The client sent it more slowly than the configured minimum rate.
    #[error("the request body arrived too slowly ({received} bytes in {elapsed:?})")]
    TooSlow {
        /// Bytes received before it was cut.
        received: u64,
        /// How long it had.
        elapsed: Duration,
    },
    /// The connection failed or the body was malformed.
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
}

impl BodyError {
    /// Whether the body fell behind the minimum rate (an answer of 408 Request Timeout fits).
    pub fn is_too_slow(&self) -> bool {
        matches!(self, BodyError::TooSlow { .. })
    }
}

impl Body {
    pub(crate) fn new(inner: Incoming, limits: &HttpLimits, conn: Arc<Conn>) -> Body {
        Body {
            inner,
            conn,
            started: None,
            received: 0,
            grace: Duration::from_millis(limits.body_timeout_ms),
            min_rate: limits.body_min_bytes_per_second.max(1),
            deadline: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    /// When the body must have delivered more than it has.
    fn due(&self, started: Instant) -> Instant {
        let earned = Duration::from_secs_f64(self.received as f64 / self.min_rate as f64);
        started + self.grace + earned
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        let started = *this.started.get_or_insert_with(|| {
            let now = Instant::now();
            this.deadline.as_mut().reset(now + this.grace);
            now
        });
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    let due = this.due(started);
                    this.deadline.as_mut().reset(due);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.conn.mark_too_slow();
                    Poll::Ready(Some(Err(BodyError::TooSlow { received: this.received, elapsed: started.elapsed() })))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
