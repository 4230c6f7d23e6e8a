//! The accept loop every daemon's interface shares, the calls in flight on
//! its thread, the transport both ends use, and [`handle`]: the one skeleton
//! of every method a server answers.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use capnp::capability::{Params, Results};
use capnp::traits::Owned;
use capnp_rpc::{rpc_twoparty_capnp::Side, twoparty::VatNetwork, RpcSystem};
use tokio::net::UnixListener;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

use crate::convert::WriteOutcome;
use crate::types::*;

/// Limits applied to every incoming message, and how the serving thread waits.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// The largest Cap'n Proto frame accepted; a larger one closes the connection.
    pub max_frame_bytes: usize,
    /// The largest single message to sign.
    pub max_message_bytes: usize,
    /// The most messages in one batch.
    pub max_batch: usize,
    /// When the last call in progress ends, the serving thread polls its
    /// sockets without sleeping for this long before it blocks again. A
    /// caller that sends its next request within the window is served without
    /// waking a sleeping thread, which costs tens of microseconds on a
    /// virtual machine. Zero: never poll.
    pub busy_poll: std::time::Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self { max_frame_bytes: 64 << 20, max_message_bytes: 16 << 20, max_batch: 10_000, busy_poll: DEFAULT_BUSY_POLL }
    }
}

/// [`ServeOptions::busy_poll`] unless configured.
pub const DEFAULT_BUSY_POLL: std::time::Duration = std::time::Duration::from_micros(50);

/// Calls being served; `serve` waits for them to finish on shutdown.
#[derive(Clone, Default)]
pub struct InFlight(Rc<InFlightState>);

#[derive(Default)]
struct InFlightState {
    calls: Cell<usize>,
    /// Shutdown has begun: calls already in progress finish, new ones are refused.
    draining: Cell<bool>,
    /// When a call last started or ended.
    last_activity: Cell<Option<Instant>>,
    activity: tokio::sync::Notify,
}

impl InFlight {
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.calls.set(self.0.calls.get() + 1);
        self.touch();
        InFlightGuard(self.clone())
    }

    fn touch(&self) {
        self.0.last_activity.set(Some(Instant::now()));
        self.0.activity.notify_one();
    }

    /// Calls in progress.
    pub fn count(&self) -> usize {
        self.0.calls.get()
    }

    /// From now on, calls that arrive are answered [`ErrorKind::ShuttingDown`] at once.
    fn drain(&self) {
        self.0.draining.set(true);
    }

    /// The answer to a call that arrives while draining; `None` before.
    fn refusal(&self) -> Option<IpcError> {
        self.0.draining.get().then(|| {
            IpcError::new(ErrorKind::ShuttingDown, "shutting down: calls in progress finish, new calls are refused")
        })
    }

    /// Keeps the thread polling (see [`ServeOptions::busy_poll`]) for `window`
    /// after the last call in progress ends, waiting for the next, and does
    /// `idle_work` between polls while it has any. Not while calls are in
    /// progress: under load the thread always has work, and polling would
    /// take a core from the threads doing it. Runs until dropped.
    async fn busy_poll(self, window: std::time::Duration, idle_work: Option<IdleWork>) {
        if window.is_zero() {
            return;
        }
        loop {
            self.0.activity.notified().await;
            // `yield_now` lets the runtime poll its sockets with a zero
            // timeout and come straight back here.
            while self.0.calls.get() == 0 && self.0.last_activity.get().is_some_and(|t| t.elapsed() < window) {
                // Work ahead if there is any; otherwise let a thread waiting
                // for this CPU run first: often the very caller whose request
                // we are polling for. Before the runtime polls, not after: once
                // a call has arrived the loop must end without delay. (Work
                // ahead started later collides with the next request; on
                // another thread it takes the CPU from calls, or starves.)
                if !idle_work.as_ref().is_some_and(|work| work()) {
                    std::thread::yield_now();
                }
                tokio::task::yield_now().await;
            }
        }
    }
}

/// One call in progress, from [`InFlight::enter`] until dropped.
pub(crate) struct InFlightGuard(InFlight);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let calls = &self.0 .0.calls;
        calls.set(calls.get().saturating_sub(1));
        self.0.touch();
    }
}

/// Work a serving thread may do while it polls for the next call.
pub(crate) type IdleWork = Rc<dyn Fn() -> bool>;

/// How long `serve` waits for calls in progress after shutdown.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The write side of every connection is buffered, and capnp-futures
/// flushes after each message: a message then leaves in one `sendto`
/// rather than one for its segment table and one per segment (which also
/// woke the peer twice). Larger messages bypass the buffer.
pub(crate) const WRITE_BUFFER: usize = 16 << 10;

/// The capnp-rpc network over the two halves of a byte stream, as both ends
/// use it: reads buffered, writes through [`WRITE_BUFFER`], frames over
/// `max_frame_bytes` refused.
pub(crate) fn vat_network<R, W>(
    read: R,
    write: W,
    side: Side,
    max_frame_bytes: usize,
) -> Box<dyn capnp_rpc::VatNetwork<Side>>
where
    R: tokio::io::AsyncRead + Unpin + 'static,
    W: tokio::io::AsyncWrite + Unpin + 'static,
{
    Box::new(VatNetwork::new(
        futures::io::BufReader::new(read.compat()),
        futures::io::BufWriter::with_capacity(WRITE_BUFFER, write.compat_write()),
        side,
        reader_options(max_frame_bytes),
    ))
}

fn reader_options(max_frame_bytes: usize) -> capnp::message::ReaderOptions {
    let mut o = capnp::message::ReaderOptions::new();
    o.traversal_limit_in_words(Some(max_frame_bytes / 8)).nesting_limit(64);
    o
}

/// The accept loop shared by every daemon's interface: `bootstrap` makes the
/// capability a new connection from `peer` starts with.
pub(crate) async fn serve_bootstrap(
    listener: UnixListener,
    opts: ServeOptions,
    shutdown: CancellationToken,
    idle_work: Option<IdleWork>,
    bootstrap: impl Fn(PeerCredentials, &InFlight) -> capnp::capability::Client,
) {
    let in_flight = InFlight::default();
    let poller = tokio::task::spawn_local(in_flight.clone().busy_poll(opts.busy_poll, idle_work));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let peer = match stream.peer_cred() {
            Ok(c) => PeerCredentials { uid: c.uid(), gid: c.gid(), pid: c.pid().unwrap_or(0) },
            Err(e) => {
                tracing::warn!(error = %e, "cannot read peer credentials; closing connection");
                continue;
            }
        };
        let (read, write) = stream.into_split();
        let connection = rpc_system(read, write, opts, bootstrap(peer, &in_flight));
        tokio::task::spawn_local(async move {
            if let Err(e) = connection.await {
                tracing::debug!(uid = peer.uid, pid = peer.pid, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    poller.abort();
    // Connections already open stay open until the calls on them are
    // answered; whatever else they send from now on is refused.
    in_flight.drain();
    if in_flight.count() > 0 {
        tracing::info!(calls = in_flight.count(), "draining calls in progress");
    }
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while in_flight.count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    if in_flight.count() > 0 {
        tracing::warn!(calls = in_flight.count(), "shutting down with calls still in progress");
    }
}

pub(crate) fn rpc_system<R, W>(
    read: R,
    write: W,
    opts: ServeOptions,
    bootstrap: capnp::capability::Client,
) -> RpcSystem<Side>
where
    R: tokio::io::AsyncRead + Unpin + 'static,
    W: tokio::io::AsyncWrite + Unpin + 'static,
{
    RpcSystem::new(vat_network(read, write, Side::Server, opts.max_frame_bytes), Some(bootstrap))
}

/// Answers one call, the skeleton of every method a server has: counts it in
/// flight (or, once shutdown has begun, refuses it with
/// [`ErrorKind::ShuttingDown`] without reading it), reads its Params with `read` (a malformed one becomes the
/// answer's typed error; `|_| Ok(())` for a method without any), lets go of the request, awaits `call` and writes
/// its outcome into the Results.
pub(crate) async fn handle<P, R, A, T, F>(
    in_flight: &InFlight,
    params: Params<P>,
    mut results: Results<R>,
    read: impl FnOnce(capnp::Result<P::Reader<'_>>) -> Result<A, IpcError>,
    call: impl FnOnce(A) -> F,
) -> capnp::Result<()>
where
    P: Owned,
    R: Owned,
    for<'a> R::Builder<'a>: WriteOutcome<Value = T>,
    F: Future<Output = Result<T, IpcError>>,
{
    let _call = in_flight.enter();
    if let Some(refused) = in_flight.refusal() {
        results.get().write_outcome(Err(refused));
        return Ok(());
    }
    let args = read(params.get());
    drop(params);
    let outcome = match args {
        Ok(args) => call(args).await,
        Err(e) => Err(e),
    };
    results.get().write_outcome(outcome);
    Ok(())
}

/// Tests: a Unix socket in a fresh directory, served by `serve` on a thread
/// of its own (a current-thread runtime and a `LocalSet`, as the daemons do).
#[cfg(test)]
pub(crate) fn serve_on_thread<F, Fut>(name: &str, serve: F) -> (tempfile::TempDir, std::path::PathBuf)
where
    F: FnOnce(UnixListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move { serve(UnixListener::from_std(listener).unwrap()).await });
    });
    (dir, path)
}
