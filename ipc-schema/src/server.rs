//! The server half: traits the daemons implement with plain types (signd
//! here, ocspd below, acmed in `server/acmed.rs`), and the capnp adapters that serve
//! them over a Unix socket.
//!
//! capnp-rpc is `!Send`, so everything here runs on a tokio `LocalSet`; the
//! implementation is expected to push CPU work (signing) to worker threads and
//! return futures that wait for it (signd keeps a lone short call, see its
//! `dispatch` module).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use capnp::capability::Rc as CapRc;
use capnp_rpc::{rpc_twoparty_capnp::Side, twoparty::VatNetwork, RpcSystem};
use futures::future::LocalBoxFuture;
use tokio::net::UnixListener;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

use crate::convert::{self, malformed};
use crate::signd_capnp as wire;
use crate::types::*;

mod acmed;
pub use acmed::{serve_acmed, AcmeAdminService, AcmedService, AcmedSession};

/// The result of a server operation: a `!Send` future on the serving thread.
pub type LocalResult<T> = LocalBoxFuture<'static, Result<T, IpcError>>;

/// signd's entry point: called once per accepted connection.
pub trait SigndService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn Session>;
    /// Called on the serving thread while it polls for the next call (see
    /// [`ServeOptions::busy_poll`]): does one short piece of work ahead
    /// (tens of microseconds at most), if any is due, and returns whether it
    /// did. A call arriving meanwhile waits for it to finish.
    fn idle_work(&self) -> bool {
        false
    }
}

/// One connection's view of signd, bound to the caller's peer credentials.
pub trait Session: 'static {
    /// Who the caller is and what policy grants it.
    fn whoami(&self) -> Result<CallerInfo, IpcError>;
    /// A signer limited to `role` (empty: the caller's first role), or a refusal.
    /// Refusals are recorded before the future resolves.
    fn signer(&self, role: String) -> LocalResult<Rc<dyn SignerService>>;
    /// The admin capability, or a refusal (recorded before the future resolves).
    fn admin(&self) -> LocalResult<Rc<dyn AdminService>>;
    /// signd's health (anyone may ask).
    fn health(&self) -> Health;
    /// The certificate issuer of CA `name` (empty: the first the caller may
    /// use), or a refusal (recorded before the future resolves).
    fn issuer(&self, name: String) -> LocalResult<Rc<dyn IssuerService>>;
    /// The CRL signer of CA `name`, or a refusal.
    fn crl_signer(&self, name: String) -> LocalResult<Rc<dyn CrlSignerService>>;
    /// The OCSP signer of CA `name`, or a refusal.
    fn ocsp_signer(&self, name: String) -> LocalResult<Rc<dyn OcspSignerService>>;
}

/// Certificate issuance for one CA.
pub trait IssuerService: 'static {
    /// Validates `tbs` (DER TBSCertificate) against the CA's profile, signs it
    /// and returns the Certificate (DER).
    fn sign_tbs_certificate(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The end-entity profile, TOML.
    fn profile(&self) -> LocalResult<String>;
}

/// CRL signing for one CA.
pub trait CrlSignerService: 'static {
    /// Validates `tbs` (DER TBSCertList), signs it and returns the CRL (DER).
    fn sign_tbs_cert_list(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The end-entity profile, TOML.
    fn profile(&self) -> LocalResult<String>;
}

/// OCSP response signing for one CA's responder.
pub trait OcspSignerService: 'static {
    /// Validates `response_data` (DER ResponseData), signs it and returns the
    /// OCSPResponse (DER) carrying the responder certificate.
    fn sign_response_data(&self, response_data: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The responder's certificate (DER).
    fn responder_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
}

/// Signing within one role.
pub trait SignerService: 'static {
    /// Keys this role may use.
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>>;
    /// One key's public information.
    fn public_key(&self, key_id: String) -> LocalResult<KeyInfo>;
    /// Signs `message` (signd hashes it as `scheme` requires).
    fn sign(&self, key_id: String, scheme: SignatureScheme, message: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// Signs every message with one key; signatures in order.
    fn sign_batch(&self, key_id: String, scheme: SignatureScheme, messages: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>>;
    /// Several separate `sign` calls with one key and scheme, arrived
    /// together; an outcome for each, in order. Each must be treated exactly
    /// as its own [`SignerService::sign`] (checks, audit). The default makes
    /// those calls, all started before any is awaited.
    fn sign_each(
        &self,
        key_id: String,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    ) -> LocalBoxFuture<'static, Vec<Result<Vec<u8>, IpcError>>> {
        let calls: Vec<_> = messages.into_iter().map(|m| self.sign(key_id.clone(), scheme, m)).collect();
        Box::pin(futures::future::join_all(calls))
    }
}

/// Key management and audit for admin roles.
pub trait AdminService: 'static {
    /// Every key.
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>>;
    /// One key.
    fn key(&self, key_id: String) -> LocalResult<KeyInfo>;
    /// Generates a key.
    fn generate_key(&self, spec: KeySpec) -> LocalResult<KeyInfo>;
    /// Imports a PKCS#8 private key (PEM or DER).
    fn import_key(&self, spec: KeySpec, pkcs8: Vec<u8>) -> LocalResult<KeyInfo>;
    /// Reads the audit log.
    fn audit(&self, query: AuditQuery) -> LocalResult<Vec<AuditRecord>>;
}

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
    /// When a call last started or ended.
    last_activity: Cell<Option<Instant>>,
    activity: tokio::sync::Notify,
}

impl InFlight {
    fn enter(&self) -> InFlightGuard {
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

struct InFlightGuard(InFlight);

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

/// Serves `service` on `listener` until `shutdown` is cancelled, then stops
/// accepting and waits (up to [`DRAIN_TIMEOUT`]) for calls in progress to be
/// answered. Must be called inside a `LocalSet`. A broken or hostile
/// connection only ever ends itself.
pub async fn serve(
    listener: UnixListener,
    service: Rc<dyn SigndService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    let idle = service.clone();
    let idle_work: IdleWork = Rc::new(move || idle.idle_work());
    serve_bootstrap(listener, opts, shutdown, Some(idle_work), move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::signd::Client =
            capnp_rpc::new_client(SigndServer { session, opts, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
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

fn rpc_system<R, W>(read: R, write: W, opts: ServeOptions, bootstrap: capnp::capability::Client) -> RpcSystem<Side>
where
    R: tokio::io::AsyncRead + Unpin + 'static,
    W: tokio::io::AsyncWrite + Unpin + 'static,
{
    RpcSystem::new(vat_network(read, write, Side::Server, opts.max_frame_bytes), Some(bootstrap))
}

/// Serves one connection from `peer` over the two halves of any byte stream;
/// resolves when the connection ends. Must run inside a `LocalSet`.
pub fn serve_connection<R, W>(
    read: R,
    write: W,
    peer: PeerCredentials,
    service: &dyn SigndService,
    opts: ServeOptions,
    in_flight: &InFlight,
) -> RpcSystem<Side>
where
    R: tokio::io::AsyncRead + Unpin + 'static,
    W: tokio::io::AsyncWrite + Unpin + 'static,
{
    let session = service.session(peer);
    let bootstrap: wire::signd::Client =
        capnp_rpc::new_client(SigndServer { session, opts, in_flight: in_flight.clone() });
    rpc_system(read, write, opts, bootstrap.client)
}

struct SigndServer {
    session: Rc<dyn Session>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl wire::signd::Server for SigndServer {
    async fn whoami(
        self: CapRc<Self>,
        _: wire::signd::WhoamiParams,
        mut results: wire::signd::WhoamiResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let r = results.get().init_result();
        match self.session.whoami() {
            Ok(c) => convert::write_caller(r.init_ok(), &c),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }

    async fn signer(
        self: CapRc<Self>,
        params: wire::signd::SignerParams,
        mut results: wire::signd::SignerResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let role =
            params.get().map_err(|e| malformed("signer request", e)).and_then(|p| convert::text(p.get_role(), "role"));
        let outcome = match role {
            Ok(role) => self.session.signer(role).await,
            Err(e) => Err(e),
        };
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(SignerServer {
                inner,
                opts: self.opts,
                in_flight: self.in_flight.clone(),
            })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }

    async fn admin(
        self: CapRc<Self>,
        _: wire::signd::AdminParams,
        mut results: wire::signd::AdminResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.session.admin().await;
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(AdminServer { inner, in_flight: self.in_flight.clone() })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }

    async fn health(
        self: CapRc<Self>,
        _: wire::signd::HealthParams,
        mut results: wire::signd::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        convert::write_health(results.get().init_health(), &self.session.health());
        Ok(())
    }

    async fn issuer(
        self: CapRc<Self>,
        params: wire::signd::IssuerParams,
        mut results: wire::signd::IssuerResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let name = params
            .get()
            .map_err(|e| malformed("issuer request", e))
            .and_then(|p| convert::text(p.get_name(), "issuer name"));
        let outcome = match name {
            Ok(name) => self.session.issuer(name).await,
            Err(e) => Err(e),
        };
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(IssuerServer {
                inner,
                opts: self.opts,
                in_flight: self.in_flight.clone(),
            })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }

    async fn crl_signer(
        self: CapRc<Self>,
        params: wire::signd::CrlSignerParams,
        mut results: wire::signd::CrlSignerResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let name = params
            .get()
            .map_err(|e| malformed("CRL signer request", e))
            .and_then(|p| convert::text(p.get_name(), "issuer name"));
        let outcome = match name {
            Ok(name) => self.session.crl_signer(name).await,
            Err(e) => Err(e),
        };
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(CrlSignerServer {
                inner,
                opts: self.opts,
                in_flight: self.in_flight.clone(),
            })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }

    async fn ocsp_signer(
        self: CapRc<Self>,
        params: wire::signd::OcspSignerParams,
        mut results: wire::signd::OcspSignerResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let name = params
            .get()
            .map_err(|e| malformed("OCSP signer request", e))
            .and_then(|p| convert::text(p.get_name(), "issuer name"));
        let outcome = match name {
            Ok(name) => self.session.ocsp_signer(name).await,
            Err(e) => Err(e),
        };
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(OcspSignerServer {
                inner,
                opts: self.opts,
                in_flight: self.in_flight.clone(),
            })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }
}

struct SignerServer {
    inner: Rc<dyn SignerService>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl SignerServer {
    fn check_size(&self, len: usize) -> Result<(), IpcError> {
        check_size(&self.opts, len)
    }
}

fn check_size(opts: &ServeOptions, len: usize) -> Result<(), IpcError> {
    if len > opts.max_message_bytes {
        return Err(IpcError::new(
            ErrorKind::TooLarge,
            format!("message of {len} bytes is over the limit of {}", opts.max_message_bytes),
        ));
    }
    Ok(())
}

/// Reads one `Data` parameter and checks its size against the message limit.
fn read_der(r: capnp::Result<capnp::data::Reader<'_>>, opts: &ServeOptions, what: &str) -> Result<Vec<u8>, IpcError> {
    let der = convert::data(r, what)?;
    check_size(opts, der.len())?;
    Ok(der)
}

/// Writes a key result union.
macro_rules! write_result {
    ($r:expr, $outcome:expr, $ok:expr) => {{
        let mut r = $r;
        match $outcome {
            Ok(v) => $ok(&mut r, v),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
    }};
}

impl wire::signer::Server for SignerServer {
    async fn list_keys(
        self: CapRc<Self>,
        _: wire::signer::ListKeysParams,
        mut results: wire::signer::ListKeysResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.list_keys().await;
        write_result!(
            results.get().init_result(),
            outcome,
            |r: &mut wire::key_list_result::Builder<'_>, keys: Vec<KeyInfo>| {
                convert::write_key_list(r.reborrow().init_ok(keys.len() as u32), &keys)
            }
        );
        Ok(())
    }

    async fn public_key(
        self: CapRc<Self>,
        params: wire::signer::PublicKeyParams,
        mut results: wire::signer::PublicKeyResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let id =
            params.get().map_err(|e| malformed("request", e)).and_then(|p| convert::text(p.get_key_id(), "key id"));
        let outcome = match id {
            Ok(id) => self.inner.public_key(id).await,
            Err(e) => Err(e),
        };
        write_result!(results.get().init_result(), outcome, |r: &mut wire::key_result::Builder<'_>, k: KeyInfo| {
            convert::write_key_info(r.reborrow().init_ok(), &k)
        });
        Ok(())
    }

    async fn sign(
        self: CapRc<Self>,
        params: wire::signer::SignParams,
        mut results: wire::signer::SignResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let request = (|| {
            let p = params.get().map_err(|e| malformed("sign request", e))?;
            let message = convert::data(p.get_message(), "message")?;
            self.check_size(message.len())?;
            Ok((convert::text(p.get_key_id(), "key id")?, convert::scheme_from_wire(p.get_scheme())?, message))
        })();
        drop(params);
        let outcome = match request {
            Ok((id, scheme, message)) => self.inner.sign(id, scheme, message).await,
            Err(e) => Err(e),
        };
        write_result!(results.get().init_result(), outcome, |r: &mut wire::sign_result::Builder<'_>, sig: Vec<u8>| {
            r.set_ok(&sig[..])
        });
        Ok(())
    }

    async fn sign_batch(
        self: CapRc<Self>,
        params: wire::signer::SignBatchParams,
        mut results: wire::signer::SignBatchResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let request = (|| {
            let p = params.get().map_err(|e| malformed("sign batch request", e))?;
            let messages = convert::read_data_list(p.get_messages(), self.opts.max_batch)?;
            for m in &messages {
                self.check_size(m.len())?;
            }
            Ok((convert::text(p.get_key_id(), "key id")?, convert::scheme_from_wire(p.get_scheme())?, messages))
        })();
        drop(params);
        let outcome = match request {
            Ok((id, scheme, messages)) => self.inner.sign_batch(id, scheme, messages).await,
            Err(e) => Err(e),
        };
        write_result!(
            results.get().init_result(),
            outcome,
            |r: &mut wire::sign_batch_result::Builder<'_>, sigs: Vec<Vec<u8>>| {
                convert::write_data_list(r.reborrow().init_ok(sigs.len() as u32), &sigs)
            }
        );
        Ok(())
    }

    async fn sign_each(
        self: CapRc<Self>,
        params: wire::signer::SignEachParams,
        mut results: wire::signer::SignEachResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let request = (|| {
            let p = params.get().map_err(|e| malformed("sign each request", e))?;
            let messages = convert::read_data_list(p.get_messages(), self.opts.max_batch)?;
            Ok((convert::text(p.get_key_id(), "key id")?, convert::scheme_from_wire(p.get_scheme())?, messages))
        })();
        drop(params);
        let outcome = match request {
            Ok((id, scheme, messages)) => {
                // An oversized message fails alone, as its own `sign` would.
                let sizes: Vec<Result<(), IpcError>> = messages.iter().map(|m| self.check_size(m.len())).collect();
                let fit: Vec<Vec<u8>> =
                    messages.into_iter().zip(&sizes).filter(|(_, size)| size.is_ok()).map(|(m, _)| m).collect();
                let signed = if fit.is_empty() { Vec::new() } else { self.inner.sign_each(id, scheme, fit).await };
                let mut signed = signed.into_iter();
                Ok(sizes
                    .into_iter()
                    .map(|size| match size {
                        Ok(()) => signed.next().unwrap_or_else(|| Err(IpcError::internal("no outcome for this call"))),
                        Err(e) => Err(e),
                    })
                    .collect::<Vec<_>>())
            }
            Err(e) => Err(e),
        };
        write_result!(
            results.get().init_result(),
            outcome,
            |r: &mut wire::sign_each_result::Builder<'_>, each: Vec<Result<Vec<u8>, IpcError>>| {
                let mut list = r.reborrow().init_ok(each.len() as u32);
                for (i, outcome) in each.into_iter().enumerate() {
                    let r = list.reborrow().get(i as u32);
                    write_result!(r, outcome, |r: &mut wire::sign_result::Builder<'_>, sig: Vec<u8>| {
                        r.set_ok(&sig[..])
                    });
                }
            }
        );
        Ok(())
    }
}

struct AdminServer {
    inner: Rc<dyn AdminService>,
    in_flight: InFlight,
}

impl wire::admin::Server for AdminServer {
    async fn list_keys(
        self: CapRc<Self>,
        _: wire::admin::ListKeysParams,
        mut results: wire::admin::ListKeysResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.list_keys().await;
        write_result!(
            results.get().init_result(),
            outcome,
            |r: &mut wire::key_list_result::Builder<'_>, keys: Vec<KeyInfo>| {
                convert::write_key_list(r.reborrow().init_ok(keys.len() as u32), &keys)
            }
        );
        Ok(())
    }

    async fn key(
        self: CapRc<Self>,
        params: wire::admin::KeyParams,
        mut results: wire::admin::KeyResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let id =
            params.get().map_err(|e| malformed("request", e)).and_then(|p| convert::text(p.get_key_id(), "key id"));
        let outcome = match id {
            Ok(id) => self.inner.key(id).await,
            Err(e) => Err(e),
        };
        write_result!(results.get().init_result(), outcome, |r: &mut wire::key_result::Builder<'_>, k: KeyInfo| {
            convert::write_key_info(r.reborrow().init_ok(), &k)
        });
        Ok(())
    }

    async fn generate_key(
        self: CapRc<Self>,
        params: wire::admin::GenerateKeyParams,
        mut results: wire::admin::GenerateKeyResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let spec = params.get().map_err(|e| malformed("request", e)).and_then(|p| convert::read_key_spec(p.get_spec()));
        let outcome = match spec {
            Ok(spec) => self.inner.generate_key(spec).await,
            Err(e) => Err(e),
        };
        write_result!(results.get().init_result(), outcome, |r: &mut wire::key_result::Builder<'_>, k: KeyInfo| {
            convert::write_key_info(r.reborrow().init_ok(), &k)
        });
        Ok(())
    }

    async fn import_key(
        self: CapRc<Self>,
        params: wire::admin::ImportKeyParams,
        mut results: wire::admin::ImportKeyResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let request = params
            .get()
            .map_err(|e| malformed("request", e))
            .and_then(|p| Ok((convert::read_key_spec(p.get_spec())?, convert::data(p.get_pkcs8(), "pkcs8")?)));
        drop(params);
        let outcome = match request {
            Ok((spec, pkcs8)) => self.inner.import_key(spec, pkcs8).await,
            Err(e) => Err(e),
        };
        write_result!(results.get().init_result(), outcome, |r: &mut wire::key_result::Builder<'_>, k: KeyInfo| {
            convert::write_key_info(r.reborrow().init_ok(), &k)
        });
        Ok(())
    }

    async fn audit(
        self: CapRc<Self>,
        params: wire::admin::AuditParams,
        mut results: wire::admin::AuditResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let query =
            params.get().map_err(|e| malformed("request", e)).and_then(|p| convert::read_audit_query(p.get_query()));
        let outcome = match query {
            Ok(q) => self.inner.audit(q).await,
            Err(e) => Err(e),
        };
        write_result!(
            results.get().init_result(),
            outcome,
            |r: &mut wire::audit_result::Builder<'_>, recs: Vec<AuditRecord>| {
                convert::write_audit_list(r.reborrow().init_ok(recs.len() as u32), &recs)
            }
        );
        Ok(())
    }
}

struct IssuerServer {
    inner: Rc<dyn IssuerService>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl wire::issuer::Server for IssuerServer {
    async fn sign_tbs_certificate(
        self: CapRc<Self>,
        params: wire::issuer::SignTbsCertificateParams,
        mut results: wire::issuer::SignTbsCertificateResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let tbs = params
            .get()
            .map_err(|e| malformed("sign certificate request", e))
            .and_then(|p| read_der(p.get_tbs(), &self.opts, "TBSCertificate"));
        drop(params);
        let outcome = match tbs {
            Ok(tbs) => self.inner.sign_tbs_certificate(tbs).await,
            Err(e) => Err(e),
        };
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        _: wire::issuer::CaCertificateParams,
        mut results: wire::issuer::CaCertificateResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.ca_certificate().await;
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn profile(
        self: CapRc<Self>,
        _: wire::issuer::ProfileParams,
        mut results: wire::issuer::ProfileResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.profile().await;
        convert::write_text_result(results.get().init_result(), outcome);
        Ok(())
    }
}

struct CrlSignerServer {
    inner: Rc<dyn CrlSignerService>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl wire::crl_signer::Server for CrlSignerServer {
    async fn sign_tbs_cert_list(
        self: CapRc<Self>,
        params: wire::crl_signer::SignTbsCertListParams,
        mut results: wire::crl_signer::SignTbsCertListResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let tbs = params
            .get()
            .map_err(|e| malformed("sign CRL request", e))
            .and_then(|p| read_der(p.get_tbs(), &self.opts, "TBSCertList"));
        drop(params);
        let outcome = match tbs {
            Ok(tbs) => self.inner.sign_tbs_cert_list(tbs).await,
            Err(e) => Err(e),
        };
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        _: wire::crl_signer::CaCertificateParams,
        mut results: wire::crl_signer::CaCertificateResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.ca_certificate().await;
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn profile(
        self: CapRc<Self>,
        _: wire::crl_signer::ProfileParams,
        mut results: wire::crl_signer::ProfileResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.profile().await;
        convert::write_text_result(results.get().init_result(), outcome);
        Ok(())
    }
}

struct OcspSignerServer {
    inner: Rc<dyn OcspSignerService>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl wire::ocsp_signer::Server for OcspSignerServer {
    async fn sign_response_data(
        self: CapRc<Self>,
        params: wire::ocsp_signer::SignResponseDataParams,
        mut results: wire::ocsp_signer::SignResponseDataResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let data = params
            .get()
            .map_err(|e| malformed("sign OCSP request", e))
            .and_then(|p| read_der(p.get_response_data(), &self.opts, "ResponseData"));
        drop(params);
        let outcome = match data {
            Ok(data) => self.inner.sign_response_data(data).await,
            Err(e) => Err(e),
        };
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn responder_certificate(
        self: CapRc<Self>,
        _: wire::ocsp_signer::ResponderCertificateParams,
        mut results: wire::ocsp_signer::ResponderCertificateResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.responder_certificate().await;
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        _: wire::ocsp_signer::CaCertificateParams,
        mut results: wire::ocsp_signer::CaCertificateResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.ca_certificate().await;
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }
}

// --- ocspd --------------------------------------------------------------------

use crate::convert::ocspd as oconv;
use crate::ocspd_capnp as owire;

/// ocspd's entry point: called once per accepted connection.
pub trait OcspdService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn OcspdSession>;
}

/// One connection's view of ocspd, bound to the caller's peer credentials.
pub trait OcspdSession: 'static {
    /// ocspd's health.
    fn health(&self) -> OcspdHealth;
    /// The Registry of issuer `name` (empty: the first the caller may use), if
    /// the caller is one of its registrars.
    fn registry(&self, name: String) -> LocalResult<Rc<dyn RegistryService>>;
}

/// The certificates of one CA, as ocspd keeps them.
pub trait RegistryService: 'static {
    /// Records an issued certificate; resolves once it is durable.
    fn record_issued(&self, cert: IssuedCert) -> LocalResult<CertStatus>;
    /// Revokes a recorded certificate; resolves once it is durable.
    fn revoke(&self, revocation: Revocation) -> LocalResult<CertStatus>;
    /// The recorded status of `serial`.
    fn status(&self, serial: Vec<u8>) -> LocalResult<CertStatus>;
    /// The newest CRL of a kind, DER.
    fn crl(&self, which: CrlSelector) -> LocalResult<Vec<u8>>;
    /// The CA's certificates and URLs.
    fn info(&self) -> LocalResult<IssuerInfo>;
    /// Releases a certificate from hold; resolves once it is durable.
    fn release_hold(&self, serial: Vec<u8>) -> LocalResult<CertStatus>;
}

/// Serves ocspd's interface on `listener` until `shutdown` is cancelled; see [`serve`].
pub async fn serve_ocspd(
    listener: UnixListener,
    service: Rc<dyn OcspdService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    serve_bootstrap(listener, opts, shutdown, None, move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: owire::ocspd::Client =
            capnp_rpc::new_client(OcspdServer { session, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

struct OcspdServer {
    session: Rc<dyn OcspdSession>,
    in_flight: InFlight,
}

impl owire::ocspd::Server for OcspdServer {
    async fn health(
        self: CapRc<Self>,
        _: owire::ocspd::HealthParams,
        mut results: owire::ocspd::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        oconv::write_health(results.get().init_health(), &self.session.health());
        Ok(())
    }

    async fn registry(
        self: CapRc<Self>,
        params: owire::ocspd::RegistryParams,
        mut results: owire::ocspd::RegistryResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let name = params
            .get()
            .map_err(|e| malformed("registry request", e))
            .and_then(|p| convert::text(p.get_issuer(), "issuer"));
        drop(params);
        let outcome = match name {
            Ok(name) => self.session.registry(name).await,
            Err(e) => Err(e),
        };
        let mut r = results.get().init_result();
        match outcome {
            Ok(inner) => r.set_ok(capnp_rpc::new_client(RegistryServer { inner, in_flight: self.in_flight.clone() })),
            Err(e) => convert::write_error(r.init_err(), &e),
        }
        Ok(())
    }
}

struct RegistryServer {
    inner: Rc<dyn RegistryService>,
    in_flight: InFlight,
}

/// A serial number is an INTEGER's content octets: at most 20 (RFC 5280 4.1.2.2),
/// a little slack for CAs that get it wrong.
const MAX_SERIAL_BYTES: usize = 32;

fn check_serial(serial: &[u8]) -> Result<(), IpcError> {
    if serial.is_empty() || serial.len() > MAX_SERIAL_BYTES {
        return Err(IpcError::invalid(format!(
            "a serial number has 1 to {MAX_SERIAL_BYTES} bytes, not {}",
            serial.len()
        )));
    }
    Ok(())
}

impl owire::registry::Server for RegistryServer {
    async fn record_issued(
        self: CapRc<Self>,
        params: owire::registry::RecordIssuedParams,
        mut results: owire::registry::RecordIssuedResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let cert = params
            .get()
            .map_err(|e| malformed("record request", e))
            .and_then(|p| oconv::read_issued(p.get_cert()))
            .and_then(|c| check_serial(&c.serial).map(|()| c));
        drop(params);
        let outcome = match cert {
            Ok(c) => self.inner.record_issued(c).await,
            Err(e) => Err(e),
        };
        oconv::write_status_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn revoke(
        self: CapRc<Self>,
        params: owire::registry::RevokeParams,
        mut results: owire::registry::RevokeResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let rev = params
            .get()
            .map_err(|e| malformed("revoke request", e))
            .and_then(|p| oconv::read_revocation(p.get_revocation()))
            .and_then(|r| check_serial(&r.serial).map(|()| r));
        drop(params);
        let outcome = match rev {
            Ok(r) => self.inner.revoke(r).await,
            Err(e) => Err(e),
        };
        oconv::write_status_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn status(
        self: CapRc<Self>,
        params: owire::registry::StatusParams,
        mut results: owire::registry::StatusResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let serial = params
            .get()
            .map_err(|e| malformed("status request", e))
            .and_then(|p| convert::data(p.get_serial(), "serial"))
            .and_then(|s| check_serial(&s).map(|()| s));
        drop(params);
        let outcome = match serial {
            Ok(s) => self.inner.status(s).await,
            Err(e) => Err(e),
        };
        oconv::write_status_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn release_hold(
        self: CapRc<Self>,
        params: owire::registry::ReleaseHoldParams,
        mut results: owire::registry::ReleaseHoldResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let serial = params
            .get()
            .map_err(|e| malformed("release request", e))
            .and_then(|p| convert::data(p.get_serial(), "serial"))
            .and_then(|s| check_serial(&s).map(|()| s));
        drop(params);
        let outcome = match serial {
            Ok(s) => self.inner.release_hold(s).await,
            Err(e) => Err(e),
        };
        oconv::write_status_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn crl(
        self: CapRc<Self>,
        params: owire::registry::CrlParams,
        mut results: owire::registry::CrlResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let which =
            params.get().map_err(|e| malformed("CRL request", e)).and_then(|p| oconv::read_selector(p.get_which()));
        drop(params);
        let outcome = match which {
            Ok(w) => self.inner.crl(w).await,
            Err(e) => Err(e),
        };
        convert::write_der_result(results.get().init_result(), outcome);
        Ok(())
    }

    async fn info(
        self: CapRc<Self>,
        _: owire::registry::InfoParams,
        mut results: owire::registry::InfoResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        let outcome = self.inner.info().await;
        oconv::write_info_result(results.get().init_result(), outcome);
        Ok(())
    }
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
