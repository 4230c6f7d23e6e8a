//! The signd client: [`SigndClient`], a `Send + Sync` handle usable from any
//! thread or runtime, on a [`Connection`] (lazy, reconnecting, shared or
//! per-thread). On the shared connection, `sign` calls for one key that
//! queue up together go out as one `signEach`, and so do OCSP responses for
//! one CA ([`coalesce`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use super::conn::{self, unexpected, CachedCap, Conn, ConnState, Connection, Job, Protocol, ThreadConns};
use crate::convert::signd as conv;
use crate::convert::{CallError, ReadOutcome};
use crate::signd_capnp as wire;
use crate::types::*;

/// The socket signd listens on in a system install.
pub const DEFAULT_SOCKET: &str = "/run/signet/signd.sock";

/// A handle to signd. Cheap to clone; all clones share one connection (or, for
/// [`SigndClient::per_thread`] handles, one connection per calling thread).
#[derive(Clone)]
pub struct SigndClient(Connection<Signd>);

impl SigndClient {
    /// Creates a client for the socket at `path`. Nothing connects until the
    /// first call, so this succeeds even while signd is down.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, IpcError> {
        Ok(Self(Connection::new(path.as_ref())))
    }

    /// A handle whose calls run on the calling thread, over a connection that
    /// thread owns (made on its first call, closed when the thread exits).
    ///
    /// For synchronous callers that drive each call with [`block_on`](crate::block_on):
    /// a call blocks its thread until the answer arrives, and needs no other thread.
    /// Called from inside an async runtime, calls fall back to the shared
    /// background connection rather than block the runtime's thread.
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    /// The same client, its per-thread calls waiting at most `limit` for an
    /// answer before they fail as `Unavailable` (default: 60 s).
    pub fn with_call_limit(&self, limit: std::time::Duration) -> Self {
        Self(self.0.with_call_limit(limit))
    }

    /// The socket path this client talks to.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Who signd thinks this process is, and what policy grants it.
    pub async fn whoami(&self) -> Result<CallerInfo, IpcError> {
        match self.0.call(Request::Whoami).await? {
            Response::Caller(c) => Ok(c),
            other => Err(unexpected(&other)),
        }
    }

    /// Whether signd answers: its health call, as a `'static` future for a background watch
    /// (`signet_runtime::health::watch`); `Err` carries why not, for `/healthz` and the log.
    pub fn reachable(&self) -> impl std::future::Future<Output = Result<(), String>> + Send + 'static {
        let me = self.clone();
        async move { me.health().await.map(|_| ()).map_err(|e| e.to_string()) }
    }

    /// signd's health.
    pub async fn health(&self) -> Result<Health, IpcError> {
        match self.0.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Keys `role` may use (empty role: the caller's first role).
    pub async fn list_keys(&self, role: &str) -> Result<Vec<KeyInfo>, IpcError> {
        match self.0.call(Request::ListKeys { role: role.into() }).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// A key's public information, as `role` sees it.
    pub async fn public_key(&self, role: &str, key_id: &str) -> Result<KeyInfo, IpcError> {
        match self.0.call(Request::PublicKey { role: role.into(), key_id: key_id.into() }).await? {
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
        match self.0.call(request).await? {
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
        match self.0.call(request).await? {
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
        match self.0.call(request).await? {
            Response::SignEach(each) => Ok(each),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: every key.
    pub async fn admin_list_keys(&self) -> Result<Vec<KeyInfo>, IpcError> {
        match self.0.call(Request::AdminListKeys).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: one key.
    pub async fn admin_key(&self, key_id: &str) -> Result<KeyInfo, IpcError> {
        match self.0.call(Request::AdminKey { key_id: key_id.into() }).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: generates a key.
    pub async fn generate_key(&self, spec: KeySpec) -> Result<KeyInfo, IpcError> {
        match self.0.call(Request::GenerateKey(spec)).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: imports a PKCS#8 private key (PEM or DER).
    pub async fn import_key(&self, spec: KeySpec, pkcs8: Vec<u8>) -> Result<KeyInfo, IpcError> {
        match self.0.call(Request::ImportKey(spec, pkcs8)).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: reads the audit log.
    pub async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, IpcError> {
        match self.0.call(Request::Audit(query)).await? {
            Response::Audit(a) => Ok(a),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: a new delegated OCSP responder for CA `issuer` with key
    /// `key_id`, valid `validity_days` (0: signd's default), made the
    /// issuer's responder at once; its certificate, DER.
    pub async fn issue_ocsp_responder(
        &self,
        issuer: &str,
        key_id: &str,
        validity_days: u32,
    ) -> Result<Vec<u8>, IpcError> {
        let request = Request::IssueOcspResponder { issuer: issuer.into(), key_id: key_id.into(), validity_days };
        self.der(request).await
    }

    /// Admin: a new issuing CA beside `spec.issuer`, signed by the root key,
    /// served by signd as issuer `spec.new_name` at once; its certificate, DER.
    pub async fn issue_issuing_ca(&self, spec: IssuingCaSpec) -> Result<Vec<u8>, IpcError> {
        self.der(Request::IssueIssuingCa(spec)).await
    }

    /// Admin: adds CT log `name` with log key `key_id` (ECDSA P-256), its
    /// LogSigner for holders of `roles` (empty: the configured logs' roles),
    /// kept in signd's store; the log key's SubjectPublicKeyInfo, DER.
    pub async fn add_ct_log(&self, name: &str, key_id: &str, roles: &[String]) -> Result<Vec<u8>, IpcError> {
        self.der(Request::AddCtLog { name: name.into(), key_id: key_id.into(), roles: roles.to_vec() }).await
    }

    async fn der(&self, request: Request) -> Result<Vec<u8>, IpcError> {
        match self.0.call(request).await? {
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

    /// Has the OCSP responder of CA `issuer` sign each ResponseData in a
    /// separate call, all carried in one message: each is checked and audited
    /// as its own call and has its own outcome (an OCSPResponse), in order.
    /// The `Err` is for the message as a whole. [`SigndClient::sign_ocsp_response`]
    /// calls in flight together travel this way by themselves.
    pub async fn sign_ocsp_each(
        &self,
        issuer: &str,
        response_data: Vec<Vec<u8>>,
    ) -> Result<Vec<Result<Vec<u8>, IpcError>>, IpcError> {
        match self.0.call(Request::SignOcspEach { issuer: issuer.into(), response_data }).await? {
            Response::SignEach(each) => Ok(each),
            other => Err(unexpected(&other)),
        }
    }

    /// The OCSP responder certificate (DER) of CA `issuer`.
    pub async fn ocsp_responder_certificate(&self, issuer: &str) -> Result<Vec<u8>, IpcError> {
        self.der(Request::OcspResponderCertificate { issuer: issuer.into() }).await
    }

    async fn text(&self, request: Request) -> Result<String, IpcError> {
        match self.0.call(request).await? {
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

    /// Has CT log `log` (empty: the caller's first) sign `inputs`, each an
    /// RFC 6962 SCT signature input (§3.2) or tree head signature input
    /// (§3.5), in one call; returns one DER ECDSA signature (SHA-256, P-256)
    /// per input, in order. signd refuses the whole call if any input is not
    /// one of those (`InvalidArgument`, naming its index), or if there are
    /// more than its batch limit (`TooLarge`).
    pub async fn sign_ct(&self, log: &str, inputs: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, IpcError> {
        match self.0.call(Request::SignCt { log: log.into(), inputs }).await? {
            Response::Signatures(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// The public key (DER SubjectPublicKeyInfo) of CT log `log`, through its
    /// LogSigner capability; its SHA-256 is the log ID.
    pub async fn ct_log_public_key(&self, log: &str) -> Result<Vec<u8>, IpcError> {
        self.der(Request::CtLogPublicKey { log: log.into() }).await
    }
}

/// signd's calls, as the [`Connection`] carries them.
pub(crate) struct Signd;

thread_local! {
    static THREAD_CONNS: ThreadConns<Signd> = RefCell::new(HashMap::new());
}

impl Protocol for Signd {
    const SERVICE: &'static str = "signd";
    type Request = Request;
    type Response = Response;
    type Caps = Caps;

    fn thread_conns() -> &'static std::thread::LocalKey<ThreadConns<Self>> {
        &THREAD_CONNS
    }

    fn retry_safe(_: &Request) -> bool {
        // Every signd call may be sent again.
        true
    }

    async fn attempt(conn: &Conn<Self>, request: &Request) -> Result<Response, CallError> {
        attempt(conn, request).await
    }

    fn dispatch(state: &Rc<ConnState<Self>>, jobs: std::vec::Drain<'_, Job<Self>>) {
        for work in coalesce(jobs) {
            let state = state.clone();
            tokio::task::spawn_local(async move { work.run(&state).await });
        }
    }
}

#[derive(Debug)]
pub(crate) enum Request {
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
    IssueOcspResponder {
        issuer: String,
        key_id: String,
        validity_days: u32,
    },
    IssueIssuingCa(IssuingCaSpec),
    AddCtLog {
        name: String,
        key_id: String,
        roles: Vec<String>,
    },
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
    /// `SignOcsp` calls that queued up together (see [`coalesce`]).
    SignOcspEach {
        issuer: String,
        response_data: Vec<Vec<u8>>,
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
    SignCt {
        log: String,
        inputs: Vec<Vec<u8>>,
    },
    CtLogPublicKey {
        log: String,
    },
}

#[derive(Debug)]
pub(crate) enum Response {
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
}

// --- sign calls that travel together -------------------------------------------

/// The most calls carried in one `signEach`.
const MAX_SIGN_EACH: usize = 256;
/// A call with a larger message (or ResponseData) travels on its own.
const MAX_SIGN_EACH_MESSAGE: usize = 64 << 10;

type Reply = conn::Reply<Signd>;

/// What the connection thread sends for the calls that queued up together.
enum Work {
    One(Request, Reply),
    /// Calls that travel as one `signEach`, each input with its caller's reply.
    Together(Batch, Vec<(Vec<u8>, Reply)>),
}

/// What the calls travelling together share.
#[derive(PartialEq)]
enum Batch {
    /// `sign` calls with the same role, key and scheme.
    Sign { role: String, key_id: String, scheme: SignatureScheme },
    /// `signResponseData` calls for the same CA's OCSP responder.
    Ocsp { issuer: String },
}

impl Batch {
    /// One call on its own.
    fn one(&self, input: Vec<u8>) -> Request {
        match self {
            Batch::Sign { role, key_id, scheme } => {
                Request::Sign { role: role.clone(), key_id: key_id.clone(), scheme: *scheme, message: input }
            }
            Batch::Ocsp { issuer } => Request::SignOcsp { issuer: issuer.clone(), response_data: input },
        }
    }

    /// The calls together, as one `signEach`.
    fn each(&self, inputs: Vec<Vec<u8>>) -> Request {
        match self {
            Batch::Sign { role, key_id, scheme } => {
                Request::SignEach { role: role.clone(), key_id: key_id.clone(), scheme: *scheme, messages: inputs }
            }
            Batch::Ocsp { issuer } => Request::SignOcspEach { issuer: issuer.clone(), response_data: inputs },
        }
    }

    /// One call's answer, as its own call would have had it.
    fn answer(&self, signed: Vec<u8>) -> Response {
        match self {
            Batch::Sign { .. } => Response::Signature(signed),
            Batch::Ocsp { .. } => Response::Der(signed),
        }
    }
}

/// Gathers the calls among `jobs` that may travel together (`sign` calls
/// sharing a role, key and scheme; OCSP responses of one CA), so they go as
/// one `signEach` message: one write and one read on each side, and signd
/// gets them all at once to share among its signing threads (each still
/// checked, signed and audited as its own call). Under load the answers of
/// one message come back together, so their callers' next calls queue up
/// together too. Nothing waits to be gathered: a lone call goes out at once.
fn coalesce(jobs: impl Iterator<Item = Job<Signd>>) -> Vec<Work> {
    let mut out: Vec<Work> = Vec::new();
    for (request, reply) in jobs {
        let (batch, input) = match request {
            Request::Sign { role, key_id, scheme, message } if message.len() <= MAX_SIGN_EACH_MESSAGE => {
                (Batch::Sign { role, key_id, scheme }, message)
            }
            Request::SignOcsp { issuer, response_data } if response_data.len() <= MAX_SIGN_EACH_MESSAGE => {
                (Batch::Ocsp { issuer }, response_data)
            }
            request => {
                out.push(Work::One(request, reply));
                continue;
            }
        };
        let open = out.iter_mut().rev().find_map(|w| match w {
            Work::Together(b, calls) if *b == batch && calls.len() < MAX_SIGN_EACH => Some(calls),
            _ => None,
        });
        match open {
            Some(calls) => calls.push((input, reply)),
            None => out.push(Work::Together(batch, vec![(input, reply)])),
        }
    }
    out
}

impl Work {
    async fn run(self, state: &ConnState<Signd>) {
        let (batch, mut calls) = match self {
            Work::One(request, reply) => {
                let _ = reply.send(state.execute(request).await);
                return;
            }
            Work::Together(batch, calls) => (batch, calls),
        };
        if calls.len() == 1 {
            let (input, reply) = calls.remove(0);
            let _ = reply.send(state.execute(batch.one(input)).await);
            return;
        }
        let (inputs, replies): (Vec<Vec<u8>>, Vec<Reply>) = calls.into_iter().unzip();
        let request = batch.each(inputs);
        let outcome = state.execute_ref(&request).await;
        match outcome {
            Ok(Response::SignEach(each)) => {
                if matches!(batch, Batch::Sign { .. }) {
                    // Their callers' next calls are worth gathering (measured
                    // for `sign` calls in flight; OCSP responses go out as
                    // they come).
                    state.answered_together(replies.len());
                }
                for (reply, signed) in replies.into_iter().zip(each) {
                    let _ = reply.send(signed.map(|s| batch.answer(s)));
                }
            }
            // An older signd without this `signEach`, or a batch limit set
            // below this many: the calls go one by one, as they were made.
            Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::TooLarge) => {
                let inputs = match request {
                    Request::SignEach { messages, .. } => messages,
                    Request::SignOcspEach { response_data, .. } => response_data,
                    _ => Vec::new(),
                };
                let calls = inputs.into_iter().zip(replies).map(|(input, reply)| {
                    let request = batch.one(input);
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

// --- capabilities -------------------------------------------------------------

/// The capabilities signd handed out on one connection, by role or CA name.
#[derive(Default)]
pub(crate) struct Caps {
    signers: RefCell<HashMap<String, wire::signer::Client>>,
    admin: CachedCap<wire::admin::Client>,
    issuers: RefCell<HashMap<String, wire::issuer::Client>>,
    crl_signers: RefCell<HashMap<String, wire::crl_signer::Client>>,
    ocsp_signers: RefCell<HashMap<String, wire::ocsp_signer::Client>>,
    log_signers: RefCell<HashMap<String, wire::log_signer::Client>>,
}

/// Obtains (or reuses) a capability from a bootstrap method taking a name.
macro_rules! named_capability {
    ($conn:expr, $cache:ident, $request:ident, $write:path, $name:expr) => {{
        let conn = $conn;
        let name: &str = $name;
        if let Some(c) = conn.caps.$cache.borrow().get(name) {
            return Ok(c.clone());
        }
        let mut req = conn.signd().$request();
        $write(req.get(), name);
        let cap = req.send().promise.await?.get()?.read_outcome()?;
        conn.caps.$cache.borrow_mut().insert(name.to_owned(), cap.clone());
        Ok(cap)
    }};
}

impl Conn<Signd> {
    fn signd(&self) -> wire::signd::Client {
        wire::signd::Client { client: self.bootstrap.clone() }
    }

    async fn signer(&self, role: &str) -> Result<wire::signer::Client, CallError> {
        named_capability!(self, signers, signer_request, conv::write_signer, role)
    }

    async fn admin(&self) -> Result<wire::admin::Client, CallError> {
        self.caps
            .admin
            .get_or_obtain(|| async { self.signd().admin_request().send().promise.await?.get()?.read_outcome() })
            .await
    }

    async fn issuer(&self, name: &str) -> Result<wire::issuer::Client, CallError> {
        named_capability!(self, issuers, issuer_request, conv::write_issuer, name)
    }

    async fn crl_signer(&self, name: &str) -> Result<wire::crl_signer::Client, CallError> {
        named_capability!(self, crl_signers, crl_signer_request, conv::write_crl_signer, name)
    }

    async fn ocsp_signer(&self, name: &str) -> Result<wire::ocsp_signer::Client, CallError> {
        named_capability!(self, ocsp_signers, ocsp_signer_request, conv::write_ocsp_signer, name)
    }

    async fn log_signer(&self, name: &str) -> Result<wire::log_signer::Client, CallError> {
        named_capability!(self, log_signers, log_signer_request, conv::write_log_signer, name)
    }
}

// --- one attempt at a call ----------------------------------------------------

async fn attempt(conn: &Conn<Signd>, request: &Request) -> Result<Response, CallError> {
    Ok(match request {
        Request::Whoami => Response::Caller(conn.signd().whoami_request().send().promise.await?.get()?.read_outcome()?),
        Request::Health => {
            let response = conn.signd().health_request().send().promise.await?;
            Response::Health(conv::read_health_results(response.get()?)?)
        }
        Request::ListKeys { role } => {
            let req = conn.signer(role).await?.list_keys_request();
            Response::Keys(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::PublicKey { role, key_id } => {
            let mut req = conn.signer(role).await?.public_key_request();
            conv::write_public_key(req.get(), key_id);
            Response::Key(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::Sign { role, key_id, scheme, message } => {
            let mut req = conn.signer(role).await?.sign_request();
            conv::write_sign(req.get(), key_id, *scheme, message);
            Response::Signature(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignBatch { role, key_id, scheme, messages } => {
            let mut req = conn.signer(role).await?.sign_batch_request();
            conv::write_sign_batch(req.get(), key_id, *scheme, messages);
            Response::Signatures(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignEach { role, key_id, scheme, messages } => {
            let mut req = conn.signer(role).await?.sign_each_request();
            conv::write_sign_each(req.get(), key_id, *scheme, messages);
            let each = req.send().promise.await?.get()?.read_outcome()?;
            if each.len() != messages.len() {
                let answered = format!("signd answered {} of {} calls sent together", each.len(), messages.len());
                return Err(IpcError::internal(answered).into());
            }
            Response::SignEach(each)
        }
        Request::SignOcspEach { issuer, response_data } => {
            let mut req = conn.ocsp_signer(issuer).await?.sign_each_request();
            conv::write_sign_response_data_each(req.get(), response_data);
            let each = req.send().promise.await?.get()?.read_outcome()?;
            if each.len() != response_data.len() {
                let answered =
                    format!("signd answered {} of {} OCSP responses sent together", each.len(), response_data.len());
                return Err(IpcError::internal(answered).into());
            }
            Response::SignEach(each)
        }
        Request::AdminListKeys => {
            let req = conn.admin().await?.list_keys_request();
            Response::Keys(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::AdminKey { key_id } => {
            let mut req = conn.admin().await?.key_request();
            conv::write_admin_key(req.get(), key_id);
            Response::Key(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::GenerateKey(spec) => {
            let mut req = conn.admin().await?.generate_key_request();
            conv::write_generate_key(req.get(), spec);
            Response::Key(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::ImportKey(spec, pkcs8) => {
            let mut req = conn.admin().await?.import_key_request();
            conv::write_import_key(req.get(), spec, pkcs8);
            Response::Key(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::Audit(query) => {
            let mut req = conn.admin().await?.audit_request();
            conv::write_audit(req.get(), query);
            Response::Audit(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::IssueOcspResponder { issuer, key_id, validity_days } => {
            let mut req = conn.admin().await?.issue_ocsp_responder_request();
            conv::write_issue_ocsp_responder(req.get(), issuer, key_id, *validity_days);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::IssueIssuingCa(spec) => {
            let mut req = conn.admin().await?.issue_issuing_ca_request();
            conv::write_issue_issuing_ca(req.get(), spec);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::AddCtLog { name, key_id, roles } => {
            let mut req = conn.admin().await?.add_ct_log_request();
            conv::write_add_ct_log(req.get(), name, key_id, roles);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignCertificate { issuer, tbs } => {
            let mut req = conn.issuer(issuer).await?.sign_tbs_certificate_request();
            conv::write_sign_tbs_certificate(req.get(), tbs);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::IssuerCaCertificate { issuer } => {
            let req = conn.issuer(issuer).await?.ca_certificate_request();
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignCrl { issuer, tbs } => {
            let mut req = conn.crl_signer(issuer).await?.sign_tbs_cert_list_request();
            conv::write_sign_tbs_cert_list(req.get(), tbs);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignOcsp { issuer, response_data } => {
            let mut req = conn.ocsp_signer(issuer).await?.sign_response_data_request();
            conv::write_sign_response_data(req.get(), response_data);
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::OcspResponderCertificate { issuer } => {
            let req = conn.ocsp_signer(issuer).await?.responder_certificate_request();
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::IssuerProfile { issuer } => {
            let req = conn.issuer(issuer).await?.profile_request();
            Response::Text(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::CrlSignerCaCertificate { issuer } => {
            let req = conn.crl_signer(issuer).await?.ca_certificate_request();
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::CrlSignerProfile { issuer } => {
            let req = conn.crl_signer(issuer).await?.profile_request();
            Response::Text(req.send().promise.await?.get()?.read_outcome()?)
        }
        Request::SignCt { log, inputs } => {
            let mut req = conn.log_signer(log).await?.sign_many_request();
            conv::write_sign_many(req.get(), inputs);
            let signatures = req.send().promise.await?.get()?.read_outcome()?;
            if signatures.len() != inputs.len() {
                let answered = format!("signd returned {} signatures for {} inputs", signatures.len(), inputs.len());
                return Err(IpcError::internal(answered).into());
            }
            Response::Signatures(signatures)
        }
        Request::CtLogPublicKey { log } => {
            let req = conn.log_signer(log).await?.public_key_request();
            Response::Der(req.send().promise.await?.get()?.read_outcome()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use capnp_rpc::{rpc_twoparty_capnp::Side, RpcSystem};
    use tokio::sync::oneshot;

    use crate::block_on;
    use crate::server::vat_network;

    type Answer = oneshot::Receiver<Result<Response, IpcError>>;

    fn sign(role: &str, key: &str, scheme: SignatureScheme, len: usize) -> (Job<Signd>, Answer) {
        let (tx, rx) = oneshot::channel();
        let request = Request::Sign { role: role.into(), key_id: key.into(), scheme, message: vec![1; len] };
        ((request, tx), rx)
    }

    fn ocsp(issuer: &str, len: usize) -> (Job<Signd>, Answer) {
        let (tx, rx) = oneshot::channel();
        ((Request::SignOcsp { issuer: issuer.into(), response_data: vec![2; len] }, tx), rx)
    }

    /// Describes each piece of work: "sign r/k xN", "ocsp ca xN" or the request's name.
    fn shapes(work: &[Work]) -> Vec<String> {
        work.iter()
            .map(|w| match w {
                Work::One(request, _) => format!("{request:?}").split([' ', '{']).next().unwrap_or("").to_owned(),
                Work::Together(Batch::Sign { role, key_id, .. }, calls) => {
                    format!("sign {role}/{key_id} x{}", calls.len())
                }
                Work::Together(Batch::Ocsp { issuer }, calls) => format!("ocsp {issuer} x{}", calls.len()),
            })
            .collect()
    }

    /// A socket that accepts but never answers (systemd holding a daemon's
    /// socket while its service fails): a synchronous caller gets
    /// `Unavailable` once its limit passes instead of waiting forever.
    #[test]
    fn a_per_thread_call_no_one_answers_ends_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let client =
            SigndClient::new(&path).unwrap().per_thread().with_call_limit(std::time::Duration::from_millis(300));
        let start = std::time::Instant::now();
        let err = block_on(client.health()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
        assert!(err.detail.contains("did not answer within 300ms"), "{err}");
        let took = start.elapsed();
        assert!(took >= std::time::Duration::from_millis(300) && took < std::time::Duration::from_secs(10), "{took:?}");
        drop(listener);
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

    #[test]
    fn ocsp_responses_for_one_ca_travel_together_apart_from_sign_calls() {
        let mut jobs = Vec::new();
        let mut keep = Vec::new();
        for (job, rx) in [
            ocsp("ca", 100),
            sign("r", "ca", SignatureScheme::Default, 10),
            ocsp("other", 100),
            ocsp("ca", 100),
            ocsp("ca", MAX_SIGN_EACH_MESSAGE + 1),
            ocsp("ca", 100),
        ] {
            jobs.push(job);
            keep.push(rx);
        }
        let work = coalesce(jobs.into_iter());
        assert_eq!(
            shapes(&work),
            ["ocsp ca x3", "sign r/ca x1", "ocsp other x1", "SignOcsp"],
            "one CA's responses together; another CA's, a sign call and a large ResponseData apart"
        );
    }

    /// A signd from before `signEach`: its Signer has only `sign`, which
    /// "signs" by reversing the message, and its OcspSigner only
    /// `signResponseData`, which answers the ResponseData reversed.
    struct OldSignd;
    struct OldSigner;
    struct OldOcspSigner;

    impl wire::signd::Server for OldSignd {
        async fn signer(
            self: capnp::capability::Rc<Self>,
            _: wire::signd::SignerParams,
            mut results: wire::signd::SignerResults,
        ) -> capnp::Result<()> {
            results.get().init_result().set_ok(capnp_rpc::new_client(OldSigner));
            Ok(())
        }

        async fn ocsp_signer(
            self: capnp::capability::Rc<Self>,
            _: wire::signd::OcspSignerParams,
            mut results: wire::signd::OcspSignerResults,
        ) -> capnp::Result<()> {
            results.get().init_result().set_ok(capnp_rpc::new_client(OldOcspSigner));
            Ok(())
        }
    }

    impl wire::ocsp_signer::Server for OldOcspSigner {
        async fn sign_response_data(
            self: capnp::capability::Rc<Self>,
            params: wire::ocsp_signer::SignResponseDataParams,
            mut results: wire::ocsp_signer::SignResponseDataResults,
        ) -> capnp::Result<()> {
            let response: Vec<u8> = params.get()?.get_response_data()?.iter().rev().copied().collect();
            results.get().init_result().set_ok(&response[..]);
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
        let each = block_on(client.sign_ocsp_each("ca", vec![vec![1], vec![2]]));
        assert_eq!(each.unwrap_err().kind, ErrorKind::Unsupported);
        // OCSP responses in flight together: sent as OcspSigner's `signEach`,
        // refused, then sent one by one.
        let calls = (0..64u8).map(|i| client.sign_ocsp_response("ca", vec![i, 3, 4]));
        for (i, answer) in block_on(futures::future::join_all(calls)).into_iter().enumerate() {
            assert_eq!(answer.unwrap(), vec![4, 3, i as u8]);
        }
    }

    #[test]
    fn a_signeach_message_carries_at_most_its_limit() {
        let jobs: Vec<Job<Signd>> =
            (0..MAX_SIGN_EACH * 2 + 1).map(|_| sign("r", "k", SignatureScheme::Default, 1).0).collect();
        let work = coalesce(jobs.into_iter());
        let full = format!("sign r/k x{MAX_SIGN_EACH}");
        assert_eq!(shapes(&work), [full.clone(), full, "sign r/k x1".into()]);
    }
}
