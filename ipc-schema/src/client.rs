//! The signd client: a `Send + Sync` handle usable from any thread or runtime.
//! [`OcspdClient`] and [`AcmedClient`] reuse its connection handling.
//!
//! capnp-rpc is `!Send`, so a connection lives on one thread. Two ways to call:
//! - the default: one background thread (started on first use) owns the
//!   connection on a `LocalSet`; each call crosses to it over a channel and its
//!   answer comes back on a oneshot. Many calls may be in flight at once, from
//!   any thread or async runtime.
//! - [`SigndClient::per_thread`]: each calling thread owns its own connection
//!   and runs the call itself, for synchronous callers (C programs, CLIs). No
//!   thread hand-off, so the lowest latency per call.
//!
//! When the connection breaks (signd restarted), the next call reconnects, and
//! a call that failed because the connection broke under it is retried once on
//! the new connection (unless a second try could do it twice: acmed's
//! `eabCreate`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use capnp_rpc::{rpc_twoparty_capnp::Side, RpcSystem};
use tokio::sync::{mpsc, oneshot};

use crate::convert;
use crate::convert::ocspd as oconv;
use crate::ocspd_capnp as owire;
use crate::server::vat_network;
use crate::signd_capnp as wire;
use crate::types::*;

mod acmed;
pub use acmed::{AcmedClient, DEFAULT_ACMED_SOCKET};

/// The socket signd listens on in a system install.
pub const DEFAULT_SOCKET: &str = "/run/signet/signd.sock";

/// A handle to signd. Cheap to clone; all clones share one connection (or, for
/// [`SigndClient::per_thread`] handles, one connection per calling thread).
#[derive(Clone)]
pub struct SigndClient {
    inner: Arc<Inner>,
    per_thread: bool,
}

struct Inner {
    path: PathBuf,
    /// The daemon at the other end, for messages ("signd", "ocspd", "acmed").
    service: &'static str,
    /// The background connection thread's queue, started on first use.
    jobs: std::sync::OnceLock<Result<mpsc::UnboundedSender<Job>, IpcError>>,
}

type Job = (Request, oneshot::Sender<Result<Response, IpcError>>);

#[derive(Clone, Debug)]
enum Request {
    Whoami,
    Health,
    ListKeys {
        role: String,
    },
    PublicKey {
        role: String,
        key_id: String,
    },
    Sign {
        role: String,
        key_id: String,
        scheme: SignatureScheme,
        message: Vec<u8>,
    },
    SignBatch {
        role: String,
        key_id: String,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    },
    /// `sign` calls that queued up together (see [`coalesce`]).
    SignEach {
        role: String,
        key_id: String,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    },
    AdminListKeys,
    AdminKey {
        key_id: String,
    },
    GenerateKey(KeySpec),
    ImportKey(KeySpec, Vec<u8>),
    Audit(AuditQuery),
    SignCertificate {
        issuer: String,
        tbs: Vec<u8>,
    },
    IssuerCaCertificate {
        issuer: String,
    },
    SignCrl {
        issuer: String,
        tbs: Vec<u8>,
    },
    SignOcsp {
        issuer: String,
        response_data: Vec<u8>,
    },
    OcspResponderCertificate {
        issuer: String,
    },
    IssuerProfile {
        issuer: String,
    },
    CrlSignerCaCertificate {
        issuer: String,
    },
    CrlSignerProfile {
        issuer: String,
    },
    OcspdHealth,
    RecordIssued {
        issuer: String,
        cert: IssuedCert,
    },
    Revoke {
        issuer: String,
        revocation: Revocation,
    },
    CertStatus {
        issuer: String,
        serial: Vec<u8>,
    },
    ReleaseHold {
        issuer: String,
        serial: Vec<u8>,
    },
    Crl {
        issuer: String,
        which: CrlSelector,
    },
    IssuerInfo {
        issuer: String,
    },
    Acmed(acmed::AcmedRequest),
}

impl Request {
    /// Whether sending it again after the connection broke under it is harmless.
    fn retry_safe(&self) -> bool {
        match self {
            Request::Acmed(r) => r.retry_safe(),
            // The first may have been committed: a second would then be
            // refused (the certificate is no longer on hold) although the
            // release happened. The caller sees `unavailable` and can ask
            // for the status.
            Request::ReleaseHold { .. } => false,
            _ => true,
        }
    }
}

#[derive(Debug)]
enum Response {
    Caller(CallerInfo),
    Health(Health),
    Keys(Vec<KeyInfo>),
    Key(KeyInfo),
    Signature(Vec<u8>),
    Signatures(Vec<Vec<u8>>),
    SignEach(Vec<Result<Vec<u8>, IpcError>>),
    Audit(Vec<AuditRecord>),
    Der(Vec<u8>),
    Text(String),
    OcspdHealth(OcspdHealth),
    CertStatus(CertStatus),
    IssuerInfo(IssuerInfo),
    Acmed(acmed::AcmedResponse),
}

impl SigndClient {
    /// Creates a client for the socket at `path`. Nothing connects until the
    /// first call, so this succeeds even while signd is down.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, IpcError> {
        Ok(Self::for_service(path.as_ref(), "signd"))
    }

    fn for_service(path: &Path, service: &'static str) -> Self {
        let inner = Inner { path: path.to_path_buf(), service, jobs: std::sync::OnceLock::new() };
        Self { inner: Arc::new(inner), per_thread: false }
    }

    /// A handle whose calls run on the calling thread, over a connection that
    /// thread owns (made on its first call, closed when the thread exits).
    ///
    /// For synchronous callers that drive each call with [`block_on`]: a call
    /// blocks its thread until the answer arrives, and needs no other thread.
    /// Called from inside an async runtime, calls fall back to the shared
    /// background connection rather than block the runtime's thread.
    pub fn per_thread(&self) -> Self {
        Self { inner: self.inner.clone(), per_thread: true }
    }

    /// The socket path this client talks to.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn call(&self, request: Request) -> Result<Response, IpcError> {
        if self.per_thread && tokio::runtime::Handle::try_current().is_err() {
            return on_this_thread(&self.inner.path, self.inner.service, request);
        }
        let jobs = self.inner.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let thread_path = self.inner.path.clone();
            let service = self.inner.service;
            std::thread::Builder::new()
                .name(format!("{service}-client"))
                .spawn(move || run(thread_path, service, rx))
                .map(|_| tx)
                .map_err(|e| IpcError::internal(format!("cannot start the {service} client thread: {e}")))
        });
        let jobs = jobs.as_ref().map_err(Clone::clone)?;
        let (tx, rx) = oneshot::channel();
        let stopped =
            || IpcError::new(ErrorKind::Unavailable, format!("the {} client thread has stopped", self.inner.service));
        jobs.send((request, tx)).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Who signd thinks this process is, and what policy grants it.
    pub async fn whoami(&self) -> Result<CallerInfo, IpcError> {
        match self.call(Request::Whoami).await? {
            Response::Caller(c) => Ok(c),
            other => Err(unexpected(&other)),
        }
    }

    /// signd's health.
    pub async fn health(&self) -> Result<Health, IpcError> {
        match self.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Keys `role` may use (empty role: the caller's first role).
    pub async fn list_keys(&self, role: &str) -> Result<Vec<KeyInfo>, IpcError> {
        match self.call(Request::ListKeys { role: role.into() }).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// A key's public information, as `role` sees it.
    pub async fn public_key(&self, role: &str, key_id: &str) -> Result<KeyInfo, IpcError> {
        match self.call(Request::PublicKey { role: role.into(), key_id: key_id.into() }).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Signs `message` with `key_id`, acting in `role`.
    pub async fn sign(
        &self,
        role: &str,
        key_id: &str,
        scheme: SignatureScheme,
        message: Vec<u8>,
    ) -> Result<Vec<u8>, IpcError> {
        let request = Request::Sign { role: role.into(), key_id: key_id.into(), scheme, message };
        match self.call(request).await? {
            Response::Signature(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// Signs every message with `key_id` in one call; signatures in order.
    pub async fn sign_batch(
        &self,
        role: &str,
        key_id: &str,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, IpcError> {
        let request = Request::SignBatch { role: role.into(), key_id: key_id.into(), scheme, messages };
        match self.call(request).await? {
            Response::Signatures(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// Signs each message in a separate `sign` call, all carried in one
    /// message: each is checked and audited as its own call and has its own
    /// outcome, in order. The `Err` is for the message as a whole (signd
    /// unreachable, more calls than its batch limit). [`SigndClient::sign`]
    /// calls that are in flight together travel this way by themselves.
    pub async fn sign_each(
        &self,
        role: &str,
        key_id: &str,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    ) -> Result<Vec<Result<Vec<u8>, IpcError>>, IpcError> {
        let request = Request::SignEach { role: role.into(), key_id: key_id.into(), scheme, messages };
        match self.call(request).await? {
            Response::SignEach(each) => Ok(each),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: every key.
    pub async fn admin_list_keys(&self) -> Result<Vec<KeyInfo>, IpcError> {
        match self.call(Request::AdminListKeys).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: one key.
    pub async fn admin_key(&self, key_id: &str) -> Result<KeyInfo, IpcError> {
        match self.call(Request::AdminKey { key_id: key_id.into() }).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: generates a key.
    pub async fn generate_key(&self, spec: KeySpec) -> Result<KeyInfo, IpcError> {
        match self.call(Request::GenerateKey(spec)).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: imports a PKCS#8 private key (PEM or DER).
    pub async fn import_key(&self, spec: KeySpec, pkcs8: Vec<u8>) -> Result<KeyInfo, IpcError> {
        match self.call(Request::ImportKey(spec, pkcs8)).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: reads the audit log.
    pub async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, IpcError> {
        match self.call(Request::Audit(query)).await? {
            Response::Audit(a) => Ok(a),
            other => Err(unexpected(&other)),
        }
    }

    async fn der(&self, request: Request) -> Result<Vec<u8>, IpcError> {
        match self.call(request).await? {
            Response::Der(d) => Ok(d),
            other => Err(unexpected(&other)),
        }
    }

    /// Has CA `issuer` (empty: the caller's first) sign `tbs`, a DER
    /// TBSCertificate of an end-entity certificate; returns the Certificate (DER).
    /// signd refuses anything outside the issuer's profile.
    pub async fn sign_certificate(&self, issuer: &str, tbs: Vec<u8>) -> Result<Vec<u8>, IpcError> {
        self.der(Request::SignCertificate { issuer: issuer.into(), tbs }).await
    }

    /// The certificate (DER) of CA `issuer`, through its Issuer capability.
    pub async fn issuer_certificate(&self, issuer: &str) -> Result<Vec<u8>, IpcError> {
        self.der(Request::IssuerCaCertificate { issuer: issuer.into() }).await
    }

    /// Has CA `issuer` sign `tbs`, a DER TBSCertList; returns the CRL (DER).
    pub async fn sign_crl(&self, issuer: &str, tbs: Vec<u8>) -> Result<Vec<u8>, IpcError> {
        self.der(Request::SignCrl { issuer: issuer.into(), tbs }).await
    }

    /// Has the OCSP responder of CA `issuer` sign `response_data` (DER
    /// ResponseData); returns the OCSPResponse (DER) with the responder certificate.
    pub async fn sign_ocsp_response(&self, issuer: &str, response_data: Vec<u8>) -> Result<Vec<u8>, IpcError> {
        self.der(Request::SignOcsp { issuer: issuer.into(), response_data }).await
    }

    /// The OCSP responder certificate (DER) of CA `issuer`.
    pub async fn ocsp_responder_certificate(&self, issuer: &str) -> Result<Vec<u8>, IpcError> {
        self.der(Request::OcspResponderCertificate { issuer: issuer.into() }).await
    }

    async fn text(&self, request: Request) -> Result<String, IpcError> {
        match self.call(request).await? {
            Response::Text(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    /// The end-entity profile (TOML) of CA `issuer`, through its Issuer capability.
    pub async fn issuer_profile(&self, issuer: &str) -> Result<String, IpcError> {
        self.text(Request::IssuerProfile { issuer: issuer.into() }).await
    }

    /// The certificate (DER) of CA `issuer`, through its CrlSigner capability.
    pub async fn crl_signer_ca_certificate(&self, issuer: &str) -> Result<Vec<u8>, IpcError> {
        self.der(Request::CrlSignerCaCertificate { issuer: issuer.into() }).await
    }

    /// The end-entity profile (TOML) of CA `issuer`, through its CrlSigner capability.
    pub async fn crl_signer_profile(&self, issuer: &str) -> Result<String, IpcError> {
        self.text(Request::CrlSignerProfile { issuer: issuer.into() }).await
    }
}

/// The socket ocspd listens on in a system install.
pub const DEFAULT_OCSPD_SOCKET: &str = "/run/signet/ocspd.sock";

/// A handle to ocspd's registry interface: the same connection handling as
/// [`SigndClient`] (lazy, reconnecting, shared or [`OcspdClient::per_thread`]).
#[derive(Clone)]
pub struct OcspdClient(SigndClient);

impl OcspdClient {
    /// Creates a client for ocspd's socket at `path`; nothing connects until the first call.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self(SigndClient::for_service(path.as_ref(), "ocspd"))
    }

    /// A handle whose calls run on the calling thread (see [`SigndClient::per_thread`]).
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    /// ocspd's health; anyone who can connect may ask.
    pub async fn health(&self) -> Result<OcspdHealth, IpcError> {
        match self.0.call(Request::OcspdHealth).await? {
            Response::OcspdHealth(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    async fn status_call(&self, request: Request) -> Result<CertStatus, IpcError> {
        match self.0.call(request).await? {
            Response::CertStatus(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// Records a certificate CA `issuer` (empty: the caller's first) has
    /// issued; returns once ocspd has committed it.
    pub async fn record_issued(&self, issuer: &str, cert: IssuedCert) -> Result<CertStatus, IpcError> {
        self.status_call(Request::RecordIssued { issuer: issuer.into(), cert }).await
    }

    /// Revokes a recorded certificate; returns once ocspd has committed it.
    pub async fn revoke(&self, issuer: &str, revocation: Revocation) -> Result<CertStatus, IpcError> {
        self.status_call(Request::Revoke { issuer: issuer.into(), revocation }).await
    }

    /// The recorded status of `serial`.
    pub async fn status(&self, issuer: &str, serial: Vec<u8>) -> Result<CertStatus, IpcError> {
        self.status_call(Request::CertStatus { issuer: issuer.into(), serial }).await
    }

    /// Releases a certificate from hold (revoked with reason certificateHold);
    /// returns once ocspd has committed it. `NotFound` for a serial never
    /// recorded, `InvalidArgument` for one that is not on hold. Not retried
    /// after a broken connection (see `Request::retry_safe`).
    pub async fn release_hold(&self, issuer: &str, serial: Vec<u8>) -> Result<CertStatus, IpcError> {
        self.status_call(Request::ReleaseHold { issuer: issuer.into(), serial }).await
    }

    /// The newest CRL of a kind, DER.
    pub async fn crl(&self, issuer: &str, which: CrlSelector) -> Result<Vec<u8>, IpcError> {
        self.0.der(Request::Crl { issuer: issuer.into(), which }).await
    }

    /// The CA's certificates and URLs as ocspd serves them.
    pub async fn issuer_info(&self, issuer: &str) -> Result<IssuerInfo, IpcError> {
        match self.0.call(Request::IssuerInfo { issuer: issuer.into() }).await? {
            Response::IssuerInfo(i) => Ok(i),
            other => Err(unexpected(&other)),
        }
    }
}

/// Runs a client future to completion on the calling thread. For C callers and
/// CLIs that have no async runtime; the futures above need none.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

fn unexpected(r: &Response) -> IpcError {
    IpcError::internal(format!("IPC client: unexpected response {r:?}"))
}

// --- connections owned by the calling thread ----------------------------------

/// A calling thread's own connection(s), one per socket path.
///
/// No `LocalSet` and no spawned tasks: the call and the connection's
/// `RpcSystem` are polled together inside `block_on`, so nothing depends on
/// tokio's thread-locals when the thread exits and this is dropped. Field
/// order is drop order: the connection goes while the runtime still lives.
struct ThreadConn {
    state: Rc<ConnState>,
    rt: tokio::runtime::Runtime,
}

thread_local! {
    static THREAD_CONNS: RefCell<HashMap<PathBuf, Rc<ThreadConn>>> = RefCell::new(HashMap::new());
}

fn on_this_thread(path: &Path, service: &'static str, request: Request) -> Result<Response, IpcError> {
    let conn = THREAD_CONNS.with(|conns| -> Result<Rc<ThreadConn>, IpcError> {
        if let Some(c) = conns.borrow().get(path) {
            return Ok(c.clone());
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| IpcError::internal(format!("cannot start a {service} client runtime: {e}")))?;
        let c = Rc::new(ThreadConn { state: Rc::new(ConnState::new(path, service, true)), rt });
        conns.borrow_mut().insert(path.to_path_buf(), c.clone());
        Ok(c)
    })?;
    let state = conn.state.clone();
    let mut call = std::pin::pin!(conn.state.execute(request));
    let poll_until = std::time::Instant::now() + CALLER_BUSY_POLL;
    conn.rt.block_on(std::future::poll_fn(move |cx| {
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
    }))
}

/// How long a per-thread call polls for its answer before it sleeps. Most
/// answers (a P-256 or Ed25519 signature, a status lookup) arrive within it,
/// and an answer found by polling skips the wake-up of a sleeping thread,
/// which costs tens of microseconds on a virtual machine; the calling thread
/// would be blocked either way.
const CALLER_BUSY_POLL: std::time::Duration = std::time::Duration::from_micros(200);

// --- the connection thread --------------------------------------------------

fn run(path: PathBuf, service: &'static str, mut jobs: mpsc::UnboundedReceiver<Job>) {
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
        let state = Rc::new(ConnState::new(&path, service, false));
        let mut queued = Vec::new();
        while let Some(job) = jobs.recv().await {
            // Everything that queued up while this thread was busy goes out now.
            queued.push(job);
            while let Ok(job) = jobs.try_recv() {
                queued.push(job);
            }
            for work in coalesce(queued.drain(..)) {
                let state = state.clone();
                tokio::task::spawn_local(async move { work.run(&state).await });
            }
        }
    });
}

/// The most `sign` calls carried in one `signEach`.
const MAX_SIGN_EACH: usize = 256;
/// A `sign` call with a larger message travels on its own.
const MAX_SIGN_EACH_MESSAGE: usize = 64 << 10;

type Reply = oneshot::Sender<Result<Response, IpcError>>;

/// What the connection thread sends for the calls that queued up together.
enum Work {
    One(Request, Reply),
    /// `sign` calls with the same role, key and scheme.
    Signs {
        role: String,
        key_id: String,
        scheme: SignatureScheme,
        calls: Vec<(Vec<u8>, Reply)>,
    },
}

/// Gathers the `sign` calls among `jobs` that share a role, key and scheme,
/// so they travel as one `signEach` message: one write and one read on each
/// side, and signd gets them all at once to share among its signing threads
/// (each still signed and audited as its own call). Under load the answers
/// of one message come back together, so their callers' next calls queue up
/// together too. Nothing waits to be gathered: a lone call goes out at once.
fn coalesce(jobs: impl Iterator<Item = Job>) -> Vec<Work> {
    let mut out: Vec<Work> = Vec::new();
    for (request, reply) in jobs {
        match request {
            Request::Sign { role, key_id, scheme, message } if message.len() <= MAX_SIGN_EACH_MESSAGE => {
                let open = out.iter_mut().rev().find_map(|w| match w {
                    Work::Signs { role: r, key_id: k, scheme: s, calls }
                        if *r == role && *k == key_id && *s == scheme && calls.len() < MAX_SIGN_EACH =>
                    {
                        Some(calls)
                    }
                    _ => None,
                });
                match open {
                    Some(calls) => calls.push((message, reply)),
                    None => out.push(Work::Signs { role, key_id, scheme, calls: vec![(message, reply)] }),
                }
            }
            request => out.push(Work::One(request, reply)),
        }
    }
    out
}

impl Work {
    async fn run(self, state: &ConnState) {
        let (role, key_id, scheme, mut calls) = match self {
            Work::One(request, reply) => {
                let _ = reply.send(state.execute(request).await);
                return;
            }
            Work::Signs { role, key_id, scheme, calls } => (role, key_id, scheme, calls),
        };
        if calls.len() == 1 {
            let (message, reply) = calls.remove(0);
            let _ = reply.send(state.execute(Request::Sign { role, key_id, scheme, message }).await);
            return;
        }
        let (messages, replies): (Vec<Vec<u8>>, Vec<Reply>) = calls.into_iter().unzip();
        let request = Request::SignEach { role: role.clone(), key_id: key_id.clone(), scheme, messages };
        let outcome = state.execute_ref(&request).await;
        let messages = match request {
            Request::SignEach { messages, .. } => messages,
            _ => Vec::new(),
        };
        match outcome {
            Ok(Response::SignEach(each)) => {
                for (reply, signed) in replies.into_iter().zip(each) {
                    let _ = reply.send(signed.map(Response::Signature));
                }
            }
            // An older signd without `signEach`, or a batch limit set below
            // this many: the calls go one by one, as they were made.
            Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::TooLarge) => {
                let calls = messages.into_iter().zip(replies).map(|(message, reply)| {
                    let request = Request::Sign { role: role.clone(), key_id: key_id.clone(), scheme, message };
                    async move { drop(reply.send(state.execute(request).await)) }
                });
                futures::future::join_all(calls).await;
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
            Ok(other) => {
                let e = unexpected(&other);
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

struct ConnState {
    path: PathBuf,
    service: &'static str,
    conn: RefCell<Option<Rc<Conn>>>,
    connecting: tokio::sync::Mutex<()>,
    /// Per-thread mode: the connection's RpcSystem, polled by [`ConnState::drive`]
    /// instead of running as a spawned task.
    held: Option<RefCell<Option<HeldRpc>>>,
}

/// A connection's RpcSystem, polled by its owning thread.
type HeldRpc = std::pin::Pin<Box<RpcSystem<Side>>>;

struct Conn {
    /// The daemon's bootstrap capability, untyped: [`Conn::signd`],
    /// [`Conn::ocspd`] and `Conn::acmed` give it its type.
    bootstrap: capnp::capability::Client,
    signers: RefCell<HashMap<String, wire::signer::Client>>,
    admin: RefCell<Option<wire::admin::Client>>,
    issuers: RefCell<HashMap<String, wire::issuer::Client>>,
    crl_signers: RefCell<HashMap<String, wire::crl_signer::Client>>,
    ocsp_signers: RefCell<HashMap<String, wire::ocsp_signer::Client>>,
    registries: RefCell<HashMap<String, owire::registry::Client>>,
    acme_admin: RefCell<Option<crate::acmed_capnp::acme_admin::Client>>,
    broken: Rc<std::cell::Cell<bool>>,
}

/// An error from one attempt: whether the connection broke under it.
struct Attempt {
    error: IpcError,
    disconnected: bool,
}

impl From<IpcError> for Attempt {
    fn from(error: IpcError) -> Self {
        Self { error, disconnected: false }
    }
}

impl From<capnp::Error> for Attempt {
    fn from(e: capnp::Error) -> Self {
        // A peer killed mid-message surfaces as a failed read ("Premature end
        // of file") rather than as Disconnected; either way the connection is gone.
        let disconnected = matches!(e.kind, capnp::ErrorKind::Disconnected | capnp::ErrorKind::PrematureEndOfFile);
        let kind = if disconnected {
            ErrorKind::Unavailable
        } else if e.kind == capnp::ErrorKind::Unimplemented {
            // A method this signd does not have (an older one).
            ErrorKind::Unsupported
        } else if e.extra.contains("which is too large") {
            // signd refused the frame (ServeOptions::max_frame_bytes) and closed
            // the connection; the next call reconnects.
            ErrorKind::TooLarge
        } else {
            ErrorKind::Internal
        };
        Self { error: IpcError::new(kind, format!("IPC connection: {e}")), disconnected }
    }
}

impl ConnState {
    fn new(path: &Path, service: &'static str, hold_driver: bool) -> Self {
        Self {
            path: path.to_path_buf(),
            service,
            conn: RefCell::new(None),
            connecting: tokio::sync::Mutex::new(()),
            held: hold_driver.then(|| RefCell::new(None)),
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

    async fn execute(&self, request: Request) -> Result<Response, IpcError> {
        self.execute_ref(&request).await
    }

    async fn execute_ref(&self, request: &Request) -> Result<Response, IpcError> {
        let conn = self.connection().await?;
        match attempt(&conn, request).await {
            Ok(r) => Ok(r),
            Err(a) if a.disconnected && request.retry_safe() => {
                conn.broken.set(true);
                let conn = self.connection().await?;
                attempt(&conn, request).await.map_err(|a| a.error)
            }
            Err(a) => Err(a.error),
        }
    }

    async fn connection(&self) -> Result<Rc<Conn>, IpcError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let _guard = self.connecting.lock().await;
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let stream = tokio::net::UnixStream::connect(&self.path).await.map_err(|e| {
            IpcError::new(
                ErrorKind::Unavailable,
                format!("cannot connect to {} at {}: {e}", self.service, self.path.display()),
            )
        })?;
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
        let conn = Rc::new(Conn {
            bootstrap,
            signers: RefCell::new(HashMap::new()),
            admin: RefCell::new(None),
            issuers: RefCell::new(HashMap::new()),
            crl_signers: RefCell::new(HashMap::new()),
            ocsp_signers: RefCell::new(HashMap::new()),
            registries: RefCell::new(HashMap::new()),
            acme_admin: RefCell::new(None),
            broken,
        });
        *self.conn.borrow_mut() = Some(conn.clone());
        Ok(conn)
    }

    fn live(&self) -> Option<Rc<Conn>> {
        self.conn.borrow().as_ref().filter(|c| !c.broken.get()).cloned()
    }
}

impl Conn {
    fn signd(&self) -> wire::signd::Client {
        wire::signd::Client { client: self.bootstrap.clone() }
    }

    fn ocspd(&self) -> owire::ocspd::Client {
        owire::ocspd::Client { client: self.bootstrap.clone() }
    }

    async fn registry(&self, name: &str) -> Result<owire::registry::Client, Attempt> {
        if let Some(c) = self.registries.borrow().get(name) {
            return Ok(c.clone());
        }
        let mut req = self.ocspd().registry_request();
        req.get().set_issuer(name);
        let response = req.send().promise.await?;
        let result = response.get()?.get_result()?;
        let cap = match result.which().map_err(|e| convert::malformed("registry result", e))? {
            owire::registry_result::Ok(c) => c?,
            owire::registry_result::Err(e) => return Err(convert::read_error(e).into()),
        };
        self.registries.borrow_mut().insert(name.to_owned(), cap.clone());
        Ok(cap)
    }

    async fn signer(&self, role: &str) -> Result<wire::signer::Client, Attempt> {
        if let Some(s) = self.signers.borrow().get(role) {
            return Ok(s.clone());
        }
        let mut req = self.signd().signer_request();
        req.get().set_role(role);
        let response = req.send().promise.await?;
        let result = response.get()?.get_result()?;
        let signer = match result.which().map_err(|e| convert::malformed("signer result", e))? {
            wire::signer_result::Ok(s) => s?,
            wire::signer_result::Err(e) => return Err(convert::read_error(e).into()),
        };
        self.signers.borrow_mut().insert(role.to_owned(), signer.clone());
        Ok(signer)
    }

    async fn admin(&self) -> Result<wire::admin::Client, Attempt> {
        if let Some(a) = self.admin.borrow().as_ref() {
            return Ok(a.clone());
        }
        let response = self.signd().admin_request().send().promise.await?;
        let result = response.get()?.get_result()?;
        let admin = match result.which().map_err(|e| convert::malformed("admin result", e))? {
            wire::admin_result::Ok(a) => a?,
            wire::admin_result::Err(e) => return Err(convert::read_error(e).into()),
        };
        *self.admin.borrow_mut() = Some(admin.clone());
        Ok(admin)
    }
}

/// Obtains (or reuses) a capability from a bootstrap method taking a name.
macro_rules! named_capability {
    ($conn:expr, $cache:ident, $request:ident, $result:ident, $name:expr, $what:literal) => {{
        let conn = $conn;
        let name: &str = $name;
        if let Some(c) = conn.$cache.borrow().get(name) {
            return Ok(c.clone());
        }
        let mut req = conn.signd().$request();
        req.get().set_name(name);
        let response = req.send().promise.await?;
        let result = response.get()?.get_result()?;
        let cap = match result.which().map_err(|e| convert::malformed($what, e))? {
            wire::$result::Ok(c) => c?,
            wire::$result::Err(e) => return Err(convert::read_error(e).into()),
        };
        conn.$cache.borrow_mut().insert(name.to_owned(), cap.clone());
        Ok(cap)
    }};
}

impl Conn {
    async fn issuer(&self, name: &str) -> Result<wire::issuer::Client, Attempt> {
        named_capability!(self, issuers, issuer_request, issuer_result, name, "issuer result")
    }

    async fn crl_signer(&self, name: &str) -> Result<wire::crl_signer::Client, Attempt> {
        named_capability!(self, crl_signers, crl_signer_request, crl_signer_result, name, "CRL signer result")
    }

    async fn ocsp_signer(&self, name: &str) -> Result<wire::ocsp_signer::Client, Attempt> {
        named_capability!(self, ocsp_signers, ocsp_signer_request, ocsp_signer_result, name, "OCSP signer result")
    }
}

/// Reads a `union { ok; err }` result struct into `Result`.
macro_rules! unpack {
    ($result:expr, $module:ident, |$v:ident| $ok:expr) => {{
        let result = $result;
        match result.which().map_err(|e| convert::malformed("result", e))? {
            wire::$module::Ok($v) => Ok($ok),
            wire::$module::Err(e) => Err(Attempt::from(convert::read_error(e))),
        }
    }};
}

async fn attempt(conn: &Conn, request: &Request) -> Result<Response, Attempt> {
    match request {
        Request::Whoami => {
            let response = conn.signd().whoami_request().send().promise.await?;
            unpack!(response.get()?.get_result()?, caller_result, |c| Response::Caller(convert::read_caller(c?)?))
        }
        Request::Health => {
            let response = conn.signd().health_request().send().promise.await?;
            Ok(Response::Health(convert::read_health(response.get()?.get_health()?)?))
        }
        Request::ListKeys { role } => {
            let response = conn.signer(role).await?.list_keys_request().send().promise.await?;
            unpack!(response.get()?.get_result()?, key_list_result, |k| Response::Keys(convert::read_key_list(k)?))
        }
        Request::PublicKey { role, key_id } => {
            let mut req = conn.signer(role).await?.public_key_request();
            req.get().set_key_id(key_id.as_str());
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, key_result, |k| Response::Key(convert::read_key_info(k?)?))
        }
        Request::Sign { role, key_id, scheme, message } => {
            let mut req = conn.signer(role).await?.sign_request();
            {
                let mut p = req.get();
                p.set_key_id(key_id.as_str());
                p.set_scheme(convert::scheme_to_wire(*scheme));
                p.set_message(&message[..]);
            }
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, sign_result, |s| Response::Signature(convert::data(s, "signature")?))
        }
        Request::SignBatch { role, key_id, scheme, messages } => {
            let mut req = conn.signer(role).await?.sign_batch_request();
            {
                let mut p = req.get();
                p.set_key_id(key_id.as_str());
                p.set_scheme(convert::scheme_to_wire(*scheme));
                convert::write_data_list(p.init_messages(messages.len() as u32), messages);
            }
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, sign_batch_result, |s| {
                Response::Signatures(convert::read_data_list(s, usize::MAX)?)
            })
        }
        Request::SignEach { role, key_id, scheme, messages } => {
            let mut req = conn.signer(role).await?.sign_each_request();
            {
                let mut p = req.get();
                p.set_key_id(key_id.as_str());
                p.set_scheme(convert::scheme_to_wire(*scheme));
                convert::write_data_list(p.init_messages(messages.len() as u32), messages);
            }
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, sign_each_result, |list| {
                let list = list?;
                if list.len() as usize != messages.len() {
                    return Err(IpcError::internal(format!(
                        "signd answered {} of {} calls sent together",
                        list.len(),
                        messages.len()
                    ))
                    .into());
                }
                let mut each = Vec::with_capacity(list.len() as usize);
                for r in list.iter() {
                    each.push(match r.which().map_err(|e| convert::malformed("sign result", e))? {
                        wire::sign_result::Ok(s) => convert::data(s, "signature"),
                        wire::sign_result::Err(e) => Err(convert::read_error(e)),
                    });
                }
                Response::SignEach(each)
            })
        }
        Request::AdminListKeys => {
            let response = conn.admin().await?.list_keys_request().send().promise.await?;
            unpack!(response.get()?.get_result()?, key_list_result, |k| Response::Keys(convert::read_key_list(k)?))
        }
        Request::AdminKey { key_id } => {
            let mut req = conn.admin().await?.key_request();
            req.get().set_key_id(key_id.as_str());
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, key_result, |k| Response::Key(convert::read_key_info(k?)?))
        }
        Request::GenerateKey(spec) => {
            let mut req = conn.admin().await?.generate_key_request();
            convert::write_key_spec(req.get().init_spec(), spec);
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, key_result, |k| Response::Key(convert::read_key_info(k?)?))
        }
        Request::ImportKey(spec, pkcs8) => {
            let mut req = conn.admin().await?.import_key_request();
            convert::write_key_spec(req.get().init_spec(), spec);
            req.get().set_pkcs8(&pkcs8[..]);
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, key_result, |k| Response::Key(convert::read_key_info(k?)?))
        }
        Request::Audit(query) => {
            let mut req = conn.admin().await?.audit_request();
            convert::write_audit_query(req.get().init_query(), query);
            let response = req.send().promise.await?;
            unpack!(response.get()?.get_result()?, audit_result, |a| Response::Audit(convert::read_audit_list(a)?))
        }
        Request::SignCertificate { issuer, tbs } => {
            let mut req = conn.issuer(issuer).await?.sign_tbs_certificate_request();
            req.get().set_tbs(&tbs[..]);
            let response = req.send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "certificate")?))
        }
        Request::IssuerCaCertificate { issuer } => {
            let response = conn.issuer(issuer).await?.ca_certificate_request().send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "CA certificate")?))
        }
        Request::SignCrl { issuer, tbs } => {
            let mut req = conn.crl_signer(issuer).await?.sign_tbs_cert_list_request();
            req.get().set_tbs(&tbs[..]);
            let response = req.send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "CRL")?))
        }
        Request::SignOcsp { issuer, response_data } => {
            let mut req = conn.ocsp_signer(issuer).await?.sign_response_data_request();
            req.get().set_response_data(&response_data[..]);
            let response = req.send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "OCSP response")?))
        }
        Request::OcspResponderCertificate { issuer } => {
            let response = conn.ocsp_signer(issuer).await?.responder_certificate_request().send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "responder certificate")?))
        }
        Request::IssuerProfile { issuer } => {
            let response = conn.issuer(issuer).await?.profile_request().send().promise.await?;
            Ok(Response::Text(convert::read_text_result(response.get()?.get_result()?, "profile")?))
        }
        Request::CrlSignerCaCertificate { issuer } => {
            let response = conn.crl_signer(issuer).await?.ca_certificate_request().send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "CA certificate")?))
        }
        Request::CrlSignerProfile { issuer } => {
            let response = conn.crl_signer(issuer).await?.profile_request().send().promise.await?;
            Ok(Response::Text(convert::read_text_result(response.get()?.get_result()?, "profile")?))
        }
        Request::OcspdHealth => {
            let response = conn.ocspd().health_request().send().promise.await?;
            Ok(Response::OcspdHealth(oconv::read_health(response.get()?.get_health()?)?))
        }
        Request::RecordIssued { issuer, cert } => {
            let mut req = conn.registry(issuer).await?.record_issued_request();
            oconv::write_issued(req.get().init_cert(), cert);
            let response = req.send().promise.await?;
            Ok(Response::CertStatus(oconv::read_status_result(response.get()?.get_result()?)?))
        }
        Request::Revoke { issuer, revocation } => {
            let mut req = conn.registry(issuer).await?.revoke_request();
            oconv::write_revocation(req.get().init_revocation(), revocation);
            let response = req.send().promise.await?;
            Ok(Response::CertStatus(oconv::read_status_result(response.get()?.get_result()?)?))
        }
        Request::CertStatus { issuer, serial } => {
            let mut req = conn.registry(issuer).await?.status_request();
            req.get().set_serial(&serial[..]);
            let response = req.send().promise.await?;
            Ok(Response::CertStatus(oconv::read_status_result(response.get()?.get_result()?)?))
        }
        Request::ReleaseHold { issuer, serial } => {
            let mut req = conn.registry(issuer).await?.release_hold_request();
            req.get().set_serial(&serial[..]);
            let response = req.send().promise.await?;
            Ok(Response::CertStatus(oconv::read_status_result(response.get()?.get_result()?)?))
        }
        Request::Crl { issuer, which } => {
            let mut req = conn.registry(issuer).await?.crl_request();
            oconv::write_selector(req.get().init_which(), *which);
            let response = req.send().promise.await?;
            Ok(Response::Der(convert::read_der_result(response.get()?.get_result()?, "CRL")?))
        }
        Request::IssuerInfo { issuer } => {
            let response = conn.registry(issuer).await?.info_request().send().promise.await?;
            Ok(Response::IssuerInfo(oconv::read_info_result(response.get()?.get_result()?)?))
        }
        Request::Acmed(r) => acmed::attempt(conn, r).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Answer = oneshot::Receiver<Result<Response, IpcError>>;

    fn sign(role: &str, key: &str, scheme: SignatureScheme, len: usize) -> (Job, Answer) {
        let (tx, rx) = oneshot::channel();
        let request = Request::Sign { role: role.into(), key_id: key.into(), scheme, message: vec![1; len] };
        ((request, tx), rx)
    }

    /// Describes each piece of work: "sign r/k xN" or the request's name.
    fn shapes(work: &[Work]) -> Vec<String> {
        work.iter()
            .map(|w| match w {
                Work::One(request, _) => format!("{request:?}").split([' ', '{']).next().unwrap_or("").to_owned(),
                Work::Signs { role, key_id, calls, .. } => format!("sign {role}/{key_id} x{}", calls.len()),
            })
            .collect()
    }

    #[test]
    fn sign_calls_for_one_key_travel_together_and_nothing_else_does() {
        let p = SignatureScheme::EcdsaSha256;
        let mut jobs = Vec::new();
        let mut keep = Vec::new();
        for (role, key, scheme, len) in [
            ("r", "a", p, 10),
            ("r", "b", p, 10),
            ("r", "a", p, 10),
            ("s", "a", p, 10),
            ("r", "a", SignatureScheme::Default, 10),
            ("r", "a", p, MAX_SIGN_EACH_MESSAGE + 1),
            ("r", "a", p, MAX_SIGN_EACH_MESSAGE),
        ] {
            let (job, rx) = sign(role, key, scheme, len);
            jobs.push(job);
            keep.push(rx);
        }
        let (tx, _rx) = oneshot::channel();
        jobs.push((Request::Health, tx));
        let work = coalesce(jobs.into_iter());
        assert_eq!(
            shapes(&work),
            ["sign r/a x3", "sign r/b x1", "sign s/a x1", "sign r/a x1", "Sign", "Health"],
            "same role, key and scheme together; a large message and other requests alone"
        );
    }

    /// A signd from before `signEach`: its Signer has only `sign`, which
    /// "signs" by reversing the message.
    struct OldSignd;
    struct OldSigner;

    impl wire::signd::Server for OldSignd {
        async fn signer(
            self: capnp::capability::Rc<Self>,
            _: wire::signd::SignerParams,
            mut results: wire::signd::SignerResults,
        ) -> capnp::Result<()> {
            results.get().init_result().set_ok(capnp_rpc::new_client(OldSigner));
            Ok(())
        }
    }

    impl wire::signer::Server for OldSigner {
        async fn sign(
            self: capnp::capability::Rc<Self>,
            params: wire::signer::SignParams,
            mut results: wire::signer::SignResults,
        ) -> capnp::Result<()> {
            let signature: Vec<u8> = params.get()?.get_message()?.iter().rev().copied().collect();
            results.get().init_result().set_ok(&signature[..]);
            Ok(())
        }
    }

    #[test]
    fn calls_in_flight_together_still_work_against_a_signd_without_signeach() {
        let (_dir, path) = crate::server::serve_on_thread("old.sock", |listener| async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (read, write) = stream.into_split();
                let bootstrap: wire::signd::Client = capnp_rpc::new_client(OldSignd);
                let network = vat_network(read, write, Side::Server, 1 << 20);
                tokio::task::spawn_local(RpcSystem::new(network, Some(bootstrap.client)));
            }
        });
        let client = SigndClient::new(&path).unwrap();
        // The method itself: refused as unsupported, a typed error.
        let each = block_on(client.sign_each("r", "k", SignatureScheme::Default, vec![vec![1], vec![2]]));
        assert_eq!(each.unwrap_err().kind, ErrorKind::Unsupported);
        // Calls in flight together: sent as `signEach`, refused, then sent one by one.
        let calls = (0..64u8).map(|i| client.sign("r", "k", SignatureScheme::Default, vec![i, 1, 2]));
        for (i, answer) in block_on(futures::future::join_all(calls)).into_iter().enumerate() {
            assert_eq!(answer.unwrap(), vec![2, 1, i as u8]);
        }
    }

    #[test]
    fn a_signeach_message_carries_at_most_its_limit() {
        let jobs: Vec<Job> =
            (0..MAX_SIGN_EACH * 2 + 1).map(|_| sign("r", "k", SignatureScheme::Default, 1).0).collect();
        let work = coalesce(jobs.into_iter());
        let full = format!("sign r/k x{MAX_SIGN_EACH}");
        assert_eq!(shapes(&work), [full.clone(), full, "sign r/k x1".into()]);
    }
}
