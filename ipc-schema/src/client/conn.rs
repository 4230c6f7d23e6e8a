//! [`Connection`]: the transport every client shares, whatever the service
//! at the other end. A service module describes its calls with a
//! [`Protocol`]; the connection carries them, reconnects when the daemon
//! restarts, and retries a call the broken connection lost (when a second
//! try cannot do it twice).
//!
//! capnp-rpc is `!Send`, so a connection lives on one thread. Two ways to call:
//! - the default: one background thread (started on first use) owns the
//!   connection on a `LocalSet`; each call crosses to it over a channel and its
//!   answer comes back on a oneshot. Many calls may be in flight at once, from
//!   any thread or async runtime.
//! - [`Connection::per_thread`]: each calling thread owns its own connection
//!   and runs the call itself, for synchronous callers (C programs, CLIs). No
//!   thread hand-off, so the lowest latency per call.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::LocalKey;

use capnp_rpc::{rpc_twoparty_capnp::Side, RpcSystem};
use tokio::sync::{mpsc, oneshot};

use crate::convert::CallError;
use crate::server::vat_network;
use crate::types::*;

/// One service's calls, as a [`Connection`] carries them.
pub(crate) trait Protocol: Sized + 'static {
    /// The daemon at the other end, for messages and thread names ("signd", ...).
    const SERVICE: &'static str;
    /// A call, with its arguments; crosses to the connection thread.
    type Request: Send + fmt::Debug + 'static;
    /// A call's answer.
    type Response: Send + fmt::Debug + 'static;
    /// The capabilities obtained on one connection, kept until it breaks.
    type Caps: Default;

    /// The calling thread's own connections to this service (see
    /// [`Connection::per_thread`]), one per socket path: a `thread_local!`
    /// of the service module.
    fn thread_conns() -> &'static LocalKey<ThreadConns<Self>>;

    /// Whether sending `request` again after the connection broke under it is harmless.
    fn retry_safe(request: &Self::Request) -> bool;

    /// Makes the call once on `conn`.
    fn attempt(conn: &Conn<Self>, request: &Self::Request) -> impl Future<Output = Result<Self::Response, CallError>>;

    /// Sends the calls that queued up together on the background connection
    /// while its thread was busy. By default each goes out on its own, at once.
    fn dispatch(state: &Rc<ConnState<Self>>, jobs: std::vec::Drain<'_, Job<Self>>) {
        for (request, reply) in jobs {
            let state = state.clone();
            tokio::task::spawn_local(async move {
                let _ = reply.send(state.execute(request).await);
            });
        }
    }
}

/// A call for the background connection thread, and where its answer goes.
pub(crate) type Job<P> = (<P as Protocol>::Request, Reply<P>);

/// Where a call's answer goes.
pub(crate) type Reply<P> = oneshot::Sender<Result<<P as Protocol>::Response, IpcError>>;

/// A handle to one daemon's socket. Cheap to clone; all clones share one
/// connection (or, for [`Connection::per_thread`] handles, one connection per
/// calling thread). Nothing connects until the first call.
pub(crate) struct Connection<P: Protocol> {
    inner: Arc<Inner<P>>,
    per_thread: bool,
    /// How long a per-thread call waits for its answer.
    call_limit: std::time::Duration,
}

impl<P: Protocol> Clone for Connection<P> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), per_thread: self.per_thread, call_limit: self.call_limit }
    }
}

struct Inner<P: Protocol> {
    path: PathBuf,
    /// The background connection thread's queue, started on first use.
    jobs: std::sync::OnceLock<Result<mpsc::UnboundedSender<Job<P>>, IpcError>>,
}

impl<P: Protocol> Connection<P> {
    /// A connection to the socket at `path`; nothing connects until the first call.
    pub(crate) fn new(path: &Path) -> Self {
        let inner = Inner { path: path.to_path_buf(), jobs: std::sync::OnceLock::new() };
        Self { inner: Arc::new(inner), per_thread: false, call_limit: PER_THREAD_CALL_LIMIT }
    }

    /// The same connection, its per-thread calls waiting at most `limit` for
    /// an answer (default [`PER_THREAD_CALL_LIMIT`]).
    pub(crate) fn with_call_limit(&self, limit: std::time::Duration) -> Self {
        Self { call_limit: limit, ..self.clone() }
    }

    /// A handle whose calls run on the calling thread, over a connection that
    /// thread owns (made on its first call, closed when the thread exits).
    /// Called from inside an async runtime, calls fall back to the shared
    /// background connection rather than block the runtime's thread.
    pub(crate) fn per_thread(&self) -> Self {
        Self { per_thread: true, ..self.clone() }
    }

    /// The socket path this connection talks to.
    pub(crate) fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Makes a call: on this thread's own connection, or through the
    /// background connection thread.
    pub(crate) async fn call(&self, request: P::Request) -> Result<P::Response, IpcError> {
        if self.per_thread && tokio::runtime::Handle::try_current().is_err() {
            return on_this_thread::<P>(&self.inner.path, request, self.call_limit);
        }
        let jobs = self.inner.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let thread_path = self.inner.path.clone();
            let service = P::SERVICE;
            std::thread::Builder::new()
                .name(format!("{service}-client"))
                .spawn(move || run::<P>(thread_path, rx))
                .map(|_| tx)
                .map_err(|e| IpcError::internal(format!("cannot start the {service} client thread: {e}")))
        });
        let jobs = jobs.as_ref().map_err(Clone::clone)?;
        let (tx, rx) = oneshot::channel();
        let stopped = || IpcError::new(ErrorKind::Unavailable, format!("the {} client thread has stopped", P::SERVICE));
        jobs.send((request, tx)).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

/// The error for an answer that is not the one the call expects.
pub(crate) fn unexpected(r: &impl fmt::Debug) -> IpcError {
    IpcError::internal(format!("IPC client: unexpected response {r:?}"))
}

// --- connections owned by the calling thread ----------------------------------

/// A calling thread's own connection(s), one per socket path.
///
/// No `LocalSet` and no spawned tasks: the call and the connection's
/// `RpcSystem` are polled together inside `block_on`, so nothing depends on
/// tokio's thread-locals when the thread exits and this is dropped. Field
/// order is drop order: the connection goes while the runtime still lives.
pub(crate) struct ThreadConn<P: Protocol> {
    state: Rc<ConnState<P>>,
    rt: tokio::runtime::Runtime,
}

/// A thread's own connections to one service, by socket path.
pub(crate) type ThreadConns<P> = RefCell<HashMap<PathBuf, Rc<ThreadConn<P>>>>;

fn on_this_thread<P: Protocol>(
    path: &Path,
    request: P::Request,
    limit: std::time::Duration,
) -> Result<P::Response, IpcError> {
    let service = P::SERVICE;
    let conn = P::thread_conns().with(|conns| -> Result<Rc<ThreadConn<P>>, IpcError> {
        if let Some(c) = conns.borrow().get(path) {
            return Ok(c.clone());
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| IpcError::internal(format!("cannot start a {service} client runtime: {e}")))?;
        let c = Rc::new(ThreadConn { state: Rc::new(ConnState::new(path, true)), rt });
        conns.borrow_mut().insert(path.to_path_buf(), c.clone());
        Ok(c)
    })?;
    let state = conn.state.clone();
    let mut call = std::pin::pin!(conn.state.execute(request));
    let poll_until = std::time::Instant::now() + CALLER_BUSY_POLL;
    let answer = std::future::poll_fn(move |cx| {
        if let std::task::Poll::Ready(r) = call.as_mut().poll(cx) {
            return std::task::Poll::Ready(r);
        }
        // Move the connection's I/O along, then give the call another look at
        // whatever that delivered; anything further wakes `cx`.
        state.drive(cx);
        let polled = call.as_mut().poll(cx);
        if polled.is_pending() && std::time::Instant::now() < poll_until {
            // Come straight back after the runtime has polled the socket with
            // a zero timeout, instead of sleeping until the answer wakes us.
            let _ = std::pin::pin!(tokio::task::yield_now()).poll(cx);
            // Give the CPU to any thread waiting for it on this CPU: often the
            // very server this call waits for.
            std::thread::yield_now();
        }
        polled
    });
    conn.rt.block_on(async { tokio::time::timeout(limit, answer).await }).unwrap_or_else(|_| {
        Err(IpcError::new(
            ErrorKind::Unavailable,
            format!(
                "{service} at {} did not answer within {limit:?} (is {service} starting or stuck?)",
                path.display()
            ),
        ))
    })
}

/// How long a call on the calling thread's own connection waits for its
/// answer. A synchronous caller (signetctl, a C program on libpki) has no
/// other way out: a socket that accepts but never answers (systemd holding a
/// daemon's socket while its service fails to start) would block it forever.
/// The slowest calls (an HSM generating a key, a CRL of a million serials)
/// take seconds.
pub(crate) const PER_THREAD_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a per-thread call polls for its answer before it sleeps. Most
/// answers (a P-256 or Ed25519 signature, a status lookup) arrive within it,
/// and an answer found by polling skips the wake-up of a sleeping thread,
/// which costs tens of microseconds on a virtual machine; the calling thread
/// would be blocked either way.
const CALLER_BUSY_POLL: std::time::Duration = std::time::Duration::from_micros(200);

// --- the connection thread --------------------------------------------------

fn run<P: Protocol>(path: PathBuf, mut jobs: mpsc::UnboundedReceiver<Job<P>>) {
    let service = P::SERVICE;
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            // Without a runtime no call can be served: answer each with the reason.
            let err = IpcError::internal(format!("cannot start the {service} client runtime: {e}"));
            while let Some((_, reply)) = jobs.blocking_recv() {
                let _ = reply.send(Err(err.clone()));
            }
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let state = Rc::new(ConnState::<P>::new(&path, false));
        let mut queued = Vec::new();
        let mut spin = Spin::new(std::time::Instant::now());
        loop {
            let job = match jobs.try_recv() {
                Ok(job) => job,
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    if spin.keep_polling(state.in_flight(), std::time::Instant::now()) {
                        // The socket is polled with a zero timeout, answers
                        // that arrived are delivered, and the CPU goes to
                        // whoever waits for it (the caller, often).
                        tokio::task::yield_now().await;
                        std::thread::yield_now();
                        continue;
                    }
                    match jobs.recv().await {
                        Some(job) => job,
                        None => break,
                    }
                }
            };
            // Everything that queued up while this thread was busy goes out now.
            queued.push(job);
            while let Ok(job) = jobs.try_recv() {
                queued.push(job);
            }
            let expected = state.answered.take(std::time::Instant::now());
            if queued.len() < expected {
                gather(&mut jobs, &mut queued, expected, GATHER_GAP, GATHER_MAX).await;
            }
            P::dispatch(&state, queued.drain(..));
            spin.activity(std::time::Instant::now());
        }
    });
}

/// Callers whose answers came back together in one message (a `signEach`)
/// usually call again together, one after another: gathers their calls
/// until `expected` have queued, or none came for `gap` ([`GATHER_GAP`]), or
/// `max` ([`GATHER_MAX`]) passed, so they go out as one message again rather
/// than as the first call alone and the rest after it.
async fn gather<T>(
    jobs: &mut mpsc::UnboundedReceiver<T>,
    queued: &mut Vec<T>,
    expected: usize,
    gap: std::time::Duration,
    max: std::time::Duration,
) {
    let start = std::time::Instant::now();
    let mut last = start;
    loop {
        tokio::task::yield_now().await;
        std::thread::yield_now();
        let now = std::time::Instant::now();
        loop {
            match jobs.try_recv() {
                Ok(job) => {
                    queued.push(job);
                    last = now;
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                // No caller is left to make a call.
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        if queued.len() >= expected || now - last >= gap || now - start >= max {
            return;
        }
    }
}

/// How long [`gather`] waits for a caller's next call after the last one came.
const GATHER_GAP: std::time::Duration = std::time::Duration::from_micros(15);
/// How long [`gather`] waits at most.
const GATHER_MAX: std::time::Duration = std::time::Duration::from_micros(100);
/// Answers delivered longer ago than this tell nothing of the calls to come.
const ANSWERED_FRESH: std::time::Duration = std::time::Duration::from_micros(500);

/// When the connection thread polls instead of sleeping: while one call (or
/// one message of calls) is in flight, for up to [`CALLER_BUSY_POLL`] since
/// the last thing happened (a call went out, an answer came in), and for
/// [`NEXT_CALL_POLL`] after its answer, when a caller that just got its
/// answer often makes its next call. Each answer found by polling, and each
/// call picked up so, saves waking this thread from `epoll_wait`, which costs
/// microseconds on a virtual machine, against a lone round trip to signd of
/// 25-30. With more than one in flight, or nothing happening for that long,
/// the thread sleeps.
struct Spin {
    /// When a call went out or an answer came in.
    last: std::time::Instant,
    /// Calls in flight when last looked.
    in_flight: usize,
}

/// How long the connection thread polls for a next call after the last answer.
const NEXT_CALL_POLL: std::time::Duration = std::time::Duration::from_micros(50);

impl Spin {
    fn new(now: std::time::Instant) -> Self {
        Self { last: now, in_flight: 0 }
    }

    /// Calls went out at `now`.
    fn activity(&mut self, now: std::time::Instant) {
        self.last = now;
    }

    /// Whether to poll once more at `now`, given how many calls are in flight.
    fn keep_polling(&mut self, in_flight: usize, now: std::time::Instant) -> bool {
        if in_flight != self.in_flight {
            self.in_flight = in_flight;
            self.last = now;
        }
        let window = match in_flight {
            0 => NEXT_CALL_POLL,
            1 => CALLER_BUSY_POLL,
            // Under load: answers and calls come in bunches, and polling
            // would take a core from the threads doing the work.
            _ => return false,
        };
        now.duration_since(self.last) < window
    }
}

// --- one connection -----------------------------------------------------------

/// A thread's connection to one socket: the live [`Conn`], made on the first
/// call and made again after it breaks.
pub(crate) struct ConnState<P: Protocol> {
    path: PathBuf,
    conn: RefCell<Option<Rc<Conn<P>>>>,
    connecting: tokio::sync::Mutex<()>,
    /// Per-thread mode: the connection's RpcSystem, polled by [`ConnState::drive`]
    /// instead of running as a spawned task.
    held: Option<RefCell<Option<HeldRpc>>>,
    /// Calls made on this connection whose answers have not come back.
    in_flight: std::cell::Cell<usize>,
    /// Calls answered together since the connection thread last sent calls.
    answered: Answered,
}

/// Calls answered together (in one message) since the connection thread last
/// sent calls, and when the last of them was: how many calls to [`gather`].
#[derive(Default)]
struct Answered(std::cell::Cell<(usize, Option<std::time::Instant>)>);

impl Answered {
    /// `calls` calls were answered together at `now`.
    fn add(&self, calls: usize, now: std::time::Instant) {
        let (n, _) = self.0.get();
        self.0.set((n + calls, Some(now)));
    }

    /// How many calls were answered together since this was last asked, if
    /// the last of them was answered less than [`ANSWERED_FRESH`] before
    /// `now` (else 0).
    fn take(&self, now: std::time::Instant) -> usize {
        match self.0.replace((0, None)) {
            (n, Some(at)) if now.saturating_duration_since(at) < ANSWERED_FRESH => n,
            _ => 0,
        }
    }
}

/// A connection's RpcSystem, polled by its owning thread.
type HeldRpc = std::pin::Pin<Box<RpcSystem<Side>>>;

/// A live connection: the daemon's bootstrap capability and the capabilities
/// obtained through it.
pub(crate) struct Conn<P: Protocol> {
    /// The daemon's bootstrap capability, untyped: each service module gives
    /// it its type.
    pub(crate) bootstrap: capnp::capability::Client,
    /// Capabilities obtained on this connection.
    pub(crate) caps: P::Caps,
    broken: Rc<std::cell::Cell<bool>>,
}

/// One capability a connection obtains on first use and reuses after (an
/// admin interface, say); it goes with the connection when that breaks.
pub(crate) struct CachedCap<C>(RefCell<Option<C>>);

impl<C> Default for CachedCap<C> {
    fn default() -> Self {
        Self(RefCell::new(None))
    }
}

impl<C: Clone> CachedCap<C> {
    /// The capability, obtained by `obtain` the first time.
    pub(crate) async fn get_or_obtain<F>(&self, obtain: impl FnOnce() -> F) -> Result<C, CallError>
    where
        F: Future<Output = Result<C, CallError>>,
    {
        if let Some(c) = self.0.borrow().as_ref() {
            return Ok(c.clone());
        }
        let c = obtain().await?;
        *self.0.borrow_mut() = Some(c.clone());
        Ok(c)
    }
}

impl<P: Protocol> ConnState<P> {
    fn new(path: &Path, hold_driver: bool) -> Self {
        Self {
            path: path.to_path_buf(),
            conn: RefCell::new(None),
            connecting: tokio::sync::Mutex::new(()),
            held: hold_driver.then(|| RefCell::new(None)),
            in_flight: std::cell::Cell::new(0),
            answered: Answered::default(),
        }
    }

    /// Per-thread mode: polls the held RpcSystem; marks the connection broken
    /// when it ends.
    fn drive(&self, cx: &mut std::task::Context<'_>) {
        let Some(held) = &self.held else { return };
        let mut slot = held.borrow_mut();
        if let Some(rpc) = slot.as_mut() {
            if rpc.as_mut().poll(cx).is_ready() {
                *slot = None;
                if let Some(c) = self.conn.borrow().as_ref() {
                    c.broken.set(true);
                }
            }
        }
    }

    /// Makes a call: connects first if need be, and retries once on a new
    /// connection when the old one broke under a call that is safe to repeat.
    pub(crate) async fn execute(&self, request: P::Request) -> Result<P::Response, IpcError> {
        self.execute_ref(&request).await
    }

    /// [`ConnState::execute`], for a caller that keeps the request.
    pub(crate) async fn execute_ref(&self, request: &P::Request) -> Result<P::Response, IpcError> {
        let _in_flight = InFlight::new(&self.in_flight);
        let conn = self.connection().await?;
        match P::attempt(&conn, request).await {
            Ok(r) => Ok(r),
            Err(a) if a.disconnected && P::retry_safe(request) => {
                conn.broken.set(true);
                let conn = self.connection().await?;
                P::attempt(&conn, request).await.map_err(|a| a.error)
            }
            Err(a) => Err(a.error),
        }
    }

    async fn connection(&self) -> Result<Rc<Conn<P>>, IpcError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let _guard = self.connecting.lock().await;
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let stream =
            tokio::net::UnixStream::connect(&self.path).await.map_err(|e| connect_error(P::SERVICE, &self.path, &e))?;
        let (read, write) = stream.into_split();
        let mut rpc = RpcSystem::new(vat_network(read, write, Side::Client, 256 << 20), None);
        let bootstrap: capnp::capability::Client = rpc.bootstrap(Side::Server);
        let broken = Rc::new(std::cell::Cell::new(false));
        match &self.held {
            Some(held) => *held.borrow_mut() = Some(Box::pin(rpc)),
            None => {
                let flag = broken.clone();
                tokio::task::spawn_local(async move {
                    let _ = rpc.await;
                    flag.set(true);
                });
            }
        }
        let conn = Rc::new(Conn { bootstrap, caps: P::Caps::default(), broken });
        *self.conn.borrow_mut() = Some(conn.clone());
        Ok(conn)
    }

    /// `calls` calls that travelled in one message were answered just now:
    /// their callers' next calls are worth gathering (see [`gather`]).
    pub(crate) fn answered_together(&self, calls: usize) {
        self.answered.add(calls, std::time::Instant::now());
    }

    /// Calls made on this connection whose answers have not come back.
    fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    fn live(&self) -> Option<Rc<Conn<P>>> {
        self.conn.borrow().as_ref().filter(|c| !c.broken.get()).cloned()
    }
}

/// Counts a call in flight for as long as it lives.
struct InFlight<'a>(&'a std::cell::Cell<usize>);

impl<'a> InFlight<'a> {
    fn new(count: &'a std::cell::Cell<usize>) -> Self {
        count.set(count.get() + 1);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Why a connect failed, for people and programs: a socket the caller may not
/// open is a permission problem (with the group to join), not an outage.
fn connect_error(service: &str, path: &Path, e: &std::io::Error) -> IpcError {
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return IpcError::new(
            ErrorKind::Unavailable,
            format!("cannot connect to {service} at {}: {e}", path.display()),
        );
    }
    use std::os::unix::fs::MetadataExt;
    let hint = match std::fs::metadata(path) {
        Ok(m) => {
            let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(m.gid()))
                .ok()
                .flatten()
                .map_or_else(|| format!("gid {}", m.gid()), |g| g.name);
            format!(
                "the socket is mode {:04o}, group `{group}`: ask to be added to `{group}` (then log in again)",
                m.mode() & 0o7777
            )
        }
        // The socket itself cannot be looked at: a directory on the way is closed to the caller.
        Err(_) => "a directory on the way to the socket is not open to you".into(),
    };
    IpcError::new(
        ErrorKind::PermissionDenied,
        format!("cannot connect to {service} at {}: {e}; {hint}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{gather, Answered, Spin, ANSWERED_FRESH, CALLER_BUSY_POLL, GATHER_GAP, GATHER_MAX, NEXT_CALL_POLL};

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn the_connection_thread_polls_while_one_call_is_in_flight_and_briefly_after() {
        let t0 = Instant::now();
        let mut spin = Spin::new(t0);
        // A call goes out; its task has not started yet.
        spin.activity(t0);
        assert!(spin.keep_polling(0, t0 + US));
        // In flight: polled for up to CALLER_BUSY_POLL since it was seen.
        assert!(spin.keep_polling(1, t0 + 2 * US));
        assert!(spin.keep_polling(1, t0 + CALLER_BUSY_POLL));
        assert!(!spin.keep_polling(1, t0 + 2 * US + CALLER_BUSY_POLL), "a slow call: the thread sleeps");
        // Its answer comes in: polled for NEXT_CALL_POLL more, then asleep.
        let answered = t0 + 2 * CALLER_BUSY_POLL;
        assert!(spin.keep_polling(0, answered));
        assert!(spin.keep_polling(0, answered + NEXT_CALL_POLL - US));
        assert!(!spin.keep_polling(0, answered + NEXT_CALL_POLL));
        // With more than one in flight it sleeps, and polls again once one is left.
        let t1 = answered + Duration::from_secs(1);
        spin.activity(t1);
        assert!(!spin.keep_polling(2, t1 + US));
        assert!(!spin.keep_polling(16, t1 + 2 * US));
        assert!(spin.keep_polling(1, t1 + CALLER_BUSY_POLL));
        assert!(spin.keep_polling(1, t1 + 2 * CALLER_BUSY_POLL - US));
        assert!(!spin.keep_polling(1, t1 + 2 * CALLER_BUSY_POLL + US));
    }

    #[test]
    fn calls_answered_together_are_counted_until_taken_while_fresh() {
        let answered = Answered::default();
        let t0 = Instant::now();
        assert_eq!(answered.take(t0), 0, "nothing answered");
        answered.add(16, t0);
        answered.add(8, t0 + US);
        assert_eq!(answered.take(t0 + 2 * US), 24);
        assert_eq!(answered.take(t0 + 3 * US), 0, "taken once");
        answered.add(16, t0);
        assert_eq!(answered.take(t0 + ANSWERED_FRESH), 0, "answers that old tell nothing of the next calls");
    }

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn gather_takes_every_queued_call_and_stops_once_the_expected_came() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 1..20 {
            tx.send(i).unwrap();
        }
        let mut queued = vec![0];
        // The sender is still there and the gap is long: only the count can
        // end the wait before it.
        let long = Duration::from_secs(30);
        let start = Instant::now();
        current_thread().block_on(gather(&mut rx, &mut queued, 16, long, long));
        assert!(start.elapsed() < Duration::from_secs(10), "waited {:?}", start.elapsed());
        assert_eq!(queued, (0..20).collect::<Vec<_>>());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn gather_gives_up_when_no_call_comes() {
        let (_tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let mut queued = vec![7];
        let start = Instant::now();
        current_thread().block_on(gather(&mut rx, &mut queued, 16, GATHER_GAP, GATHER_MAX));
        let waited = start.elapsed();
        assert_eq!(queued, vec![7]);
        assert!(waited >= GATHER_GAP, "waited {waited:?}");
        // Bounded by GATHER_GAP (no call came); generous for a loaded machine.
        assert!(waited < GATHER_MAX + Duration::from_millis(50), "waited {waited:?}");
    }

    #[test]
    fn gather_stops_at_a_disconnected_queue() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        tx.send(1).unwrap();
        drop(tx);
        let mut queued = vec![0];
        let long = Duration::from_secs(30);
        let start = Instant::now();
        current_thread().block_on(gather(&mut rx, &mut queued, 16, long, long));
        assert_eq!(queued, vec![0, 1]);
        assert!(start.elapsed() < Duration::from_secs(10), "waited {:?}", start.elapsed());
    }
}
