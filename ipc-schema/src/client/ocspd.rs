//! The ocspd client: [`OcspdClient`], for ocspd's registry interface
//! (`ocspd.capnp`), on a [`Connection`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::conn::{unexpected, Conn, Connection, Protocol, ThreadConns};
use crate::convert::ocspd as conv;
use crate::convert::{CallError, ReadOutcome};
use crate::ocspd_capnp as wire;
use crate::types::*;

/// The socket ocspd listens on in a system install.
pub const DEFAULT_OCSPD_SOCKET: &str = "/run/signet/ocspd.sock";

/// A handle to ocspd's registry interface: the same connection handling as
/// [`SigndClient`](crate::SigndClient) (lazy, reconnecting, shared or [`OcspdClient::per_thread`]).
#[derive(Clone)]
pub struct OcspdClient(Connection<Ocspd>);

impl OcspdClient {
    /// Creates a client for ocspd's socket at `path`; nothing connects until the first call.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self(Connection::new(path.as_ref()))
    }

    /// A handle whose calls run on the calling thread (see [`SigndClient::per_thread`](crate::SigndClient::per_thread)).
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    /// Whether ocspd answers: its health call, as a `'static` future for a background watch
    /// (`signet_runtime::health::watch`); `Err` carries why not, for `/healthz` and the log.
    pub fn reachable(&self) -> impl std::future::Future<Output = Result<(), String>> + Send + 'static {
        let me = self.clone();
        async move { me.health().await.map(|_| ()).map_err(|e| e.to_string()) }
    }

    /// ocspd's health; anyone who can connect may ask.
    pub async fn health(&self) -> Result<OcspdHealth, IpcError> {
        match self.0.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
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
        self.status_call(Request::Status { issuer: issuer.into(), serial }).await
    }

    /// Releases a certificate from hold (revoked with reason certificateHold);
    /// returns once ocspd has committed it. `NotFound` for a serial never
    /// recorded, `InvalidArgument` for one that is not on hold. Not retried
    /// after a broken connection (see `Ocspd::retry_safe`).
    pub async fn release_hold(&self, issuer: &str, serial: Vec<u8>) -> Result<CertStatus, IpcError> {
        self.status_call(Request::ReleaseHold { issuer: issuer.into(), serial }).await
    }

    /// The newest CRL of a kind, DER.
    pub async fn crl(&self, issuer: &str, which: CrlSelector) -> Result<Vec<u8>, IpcError> {
        match self.0.call(Request::Crl { issuer: issuer.into(), which }).await? {
            Response::Der(d) => Ok(d),
            other => Err(unexpected(&other)),
        }
    }

    /// The CA's certificates and URLs as ocspd serves them.
    pub async fn issuer_info(&self, issuer: &str) -> Result<IssuerInfo, IpcError> {
        match self.0.call(Request::IssuerInfo { issuer: issuer.into() }).await? {
            Response::IssuerInfo(i) => Ok(i),
            other => Err(unexpected(&other)),
        }
    }

    /// Has ocspd fetch the CA's OCSP responder certificate from signd again
    /// and sign with it (after signd's `issue_ocsp_responder`); the CA's
    /// certificates and URLs as ocspd serves them from then on.
    pub async fn refresh_responder(&self, issuer: &str) -> Result<IssuerInfo, IpcError> {
        match self.0.call(Request::RefreshResponder { issuer: issuer.into() }).await? {
            Response::IssuerInfo(i) => Ok(i),
            other => Err(unexpected(&other)),
        }
    }

    /// Has ocspd serve issuer `name`, the successor signd made of `issuer`
    /// (after signd's `issue_issuing_ca`), with `issuer`'s settings and
    /// registrars; the new issuer's certificates and URLs.
    pub async fn add_successor(&self, issuer: &str, name: &str) -> Result<IssuerInfo, IpcError> {
        match self.0.call(Request::AddSuccessor { issuer: issuer.into(), name: name.into() }).await? {
            Response::IssuerInfo(i) => Ok(i),
            other => Err(unexpected(&other)),
        }
    }
}

/// ocspd's calls, as the [`Connection`] carries them.
pub(crate) struct Ocspd;

thread_local! {
    static THREAD_CONNS: ThreadConns<Ocspd> = RefCell::new(HashMap::new());
}

#[derive(Debug)]
pub(crate) enum Request {
    Health,
    RecordIssued { issuer: String, cert: IssuedCert },
    Revoke { issuer: String, revocation: Revocation },
    Status { issuer: String, serial: Vec<u8> },
    ReleaseHold { issuer: String, serial: Vec<u8> },
    Crl { issuer: String, which: CrlSelector },
    IssuerInfo { issuer: String },
    RefreshResponder { issuer: String },
    AddSuccessor { issuer: String, name: String },
}

#[derive(Debug)]
pub(crate) enum Response {
    Health(OcspdHealth),
    CertStatus(CertStatus),
    Der(Vec<u8>),
    IssuerInfo(IssuerInfo),
}

impl Protocol for Ocspd {
    const SERVICE: &'static str = "ocspd";
    type Request = Request;
    type Response = Response;
    type Caps = Caps;

    fn thread_conns() -> &'static std::thread::LocalKey<ThreadConns<Self>> {
        &THREAD_CONNS
    }

    fn retry_safe(request: &Request) -> bool {
        // The first may have been committed: a second would then be refused
        // (the certificate is no longer on hold) although the release
        // happened. The caller sees `unavailable` and can ask for the status.
        !matches!(request, Request::ReleaseHold { .. })
    }

    async fn attempt(conn: &Conn<Self>, request: &Request) -> Result<Response, CallError> {
        Ok(match request {
            Request::Health => {
                let response = conn.ocspd().health_request().send().promise.await?;
                Response::Health(conv::read_health_results(response.get()?)?)
            }
            Request::RecordIssued { issuer, cert } => {
                let mut req = conn.registry(issuer).await?.record_issued_request();
                conv::write_record_issued(req.get(), cert);
                Response::CertStatus(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::Revoke { issuer, revocation } => {
                let mut req = conn.registry(issuer).await?.revoke_request();
                conv::write_revoke(req.get(), revocation);
                Response::CertStatus(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::Status { issuer, serial } => {
                let mut req = conn.registry(issuer).await?.status_request();
                conv::write_status(req.get(), serial);
                Response::CertStatus(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::ReleaseHold { issuer, serial } => {
                let mut req = conn.registry(issuer).await?.release_hold_request();
                conv::write_release_hold(req.get(), serial);
                Response::CertStatus(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::Crl { issuer, which } => {
                let mut req = conn.registry(issuer).await?.crl_request();
                conv::write_crl(req.get(), *which);
                Response::Der(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::IssuerInfo { issuer } => {
                let req = conn.registry(issuer).await?.info_request();
                Response::IssuerInfo(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::RefreshResponder { issuer } => {
                let req = conn.registry(issuer).await?.refresh_responder_request();
                Response::IssuerInfo(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::AddSuccessor { issuer, name } => {
                let mut req = conn.registry(issuer).await?.add_successor_request();
                conv::write_add_successor(req.get(), name);
                Response::IssuerInfo(req.send().promise.await?.get()?.read_outcome()?)
            }
        })
    }
}

/// The registries ocspd handed out on one connection, by issuer.
#[derive(Default)]
pub(crate) struct Caps {
    registries: RefCell<HashMap<String, wire::registry::Client>>,
}

impl Conn<Ocspd> {
    fn ocspd(&self) -> wire::ocspd::Client {
        wire::ocspd::Client { client: self.bootstrap.clone() }
    }

    async fn registry(&self, name: &str) -> Result<wire::registry::Client, CallError> {
        if let Some(c) = self.caps.registries.borrow().get(name) {
            return Ok(c.clone());
        }
        let mut req = self.ocspd().registry_request();
        conv::write_registry(req.get(), name);
        let cap = req.send().promise.await?.get()?.read_outcome()?;
        self.caps.registries.borrow_mut().insert(name.to_owned(), cap.clone());
        Ok(cap)
    }
}
