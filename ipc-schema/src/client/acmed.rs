//! The acmed client: [`AcmedClient`], for acmed's admin interface
//! (`acmed.capnp`), on a [`Connection`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::conn::{unexpected, CachedCap, Conn, Connection, Protocol, ThreadConns};
use crate::acmed_capnp as wire;
use crate::convert::acmed as conv;
use crate::convert::{CallError, ReadOutcome};
use crate::types::*;

/// The socket acmed's admin interface listens on in a system install
/// (`units/acmed-admin.socket`).
pub const DEFAULT_ACMED_SOCKET: &str = "/run/signet/acmed.sock";

/// A handle to acmed's admin interface: the same connection handling as
/// [`SigndClient`](crate::SigndClient) (lazy, reconnecting, shared or [`AcmedClient::per_thread`]).
#[derive(Clone)]
pub struct AcmedClient(Connection<Acmed>);

#[derive(Debug)]
pub(crate) enum Request {
    Health,
    EabCreate { key_id: String, note: String },
    EabList,
    EabShow { key_id: String },
    EabDelete { key_id: String },
    UseIssuer { name: String },
}

#[derive(Debug)]
pub(crate) enum Response {
    Health(AcmedHealth),
    Key(EabKey),
    Keys(Vec<EabKey>),
    Issuer(String),
}

impl AcmedClient {
    /// Creates a client for acmed's admin socket at `path`; nothing connects until the first call.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self(Connection::new(path.as_ref()))
    }

    /// A handle whose calls run on the calling thread (see [`SigndClient::per_thread`](crate::SigndClient::per_thread)).
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    async fn key(&self, request: Request) -> Result<EabKey, IpcError> {
        match self.0.call(request).await? {
            Response::Key(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// acmed's health; anyone who can connect may ask.
    pub async fn health(&self) -> Result<AcmedHealth, IpcError> {
        match self.0.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: creates an external account binding key (`key_id` empty: acmed
    /// picks a random id). The answer is the only one that carries the MAC key.
    /// Not retried when the connection breaks during the call.
    pub async fn eab_create(&self, key_id: &str, note: &str) -> Result<EabKey, IpcError> {
        self.key(Request::EabCreate { key_id: key_id.into(), note: note.into() }).await
    }

    /// Admin: every external account binding key, without MAC keys.
    pub async fn eab_list(&self) -> Result<Vec<EabKey>, IpcError> {
        match self.0.call(Request::EabList).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: one external account binding key, without its MAC key.
    pub async fn eab_show(&self, key_id: &str) -> Result<EabKey, IpcError> {
        self.key(Request::EabShow { key_id: key_id.into() }).await
    }

    /// Admin: deletes a key that has not bound an account; returns it as it was.
    pub async fn eab_delete(&self, key_id: &str) -> Result<EabKey, IpcError> {
        self.key(Request::EabDelete { key_id: key_id.into() }).await
    }

    /// Admin: acmed issues from CA `name` (the successor signd made of the
    /// issuer in use) from now on; the name of the issuer in use.
    pub async fn use_issuer(&self, name: &str) -> Result<String, IpcError> {
        match self.0.call(Request::UseIssuer { name: name.into() }).await? {
            Response::Issuer(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }
}

/// acmed's calls, as the [`Connection`] carries them.
pub(crate) struct Acmed;

thread_local! {
    static THREAD_CONNS: ThreadConns<Acmed> = RefCell::new(HashMap::new());
}

impl Protocol for Acmed {
    const SERVICE: &'static str = "acmed";
    type Request = Request;
    type Response = Response;
    type Caps = Caps;

    fn thread_conns() -> &'static std::thread::LocalKey<ThreadConns<Self>> {
        &THREAD_CONNS
    }

    fn retry_safe(request: &Request) -> bool {
        // A create is not: the first may have been committed, and a second
        // would make another key (or fail with alreadyExists) while the
        // caller never saw the first one's MAC key.
        !matches!(request, Request::EabCreate { .. })
    }

    async fn attempt(conn: &Conn<Self>, request: &Request) -> Result<Response, CallError> {
        Ok(match request {
            Request::Health => {
                let response = conn.acmed().health_request().send().promise.await?;
                Response::Health(conv::read_health_results(response.get()?)?)
            }
            Request::EabCreate { key_id, note } => {
                let mut req = conn.acme_admin().await?.eab_create_request();
                conv::write_eab_create(req.get(), key_id, note);
                Response::Key(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::EabList => {
                let req = conn.acme_admin().await?.eab_list_request();
                Response::Keys(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::EabShow { key_id } => {
                let mut req = conn.acme_admin().await?.eab_show_request();
                conv::write_eab_show(req.get(), key_id);
                Response::Key(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::EabDelete { key_id } => {
                let mut req = conn.acme_admin().await?.eab_delete_request();
                conv::write_eab_delete(req.get(), key_id);
                Response::Key(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UseIssuer { name } => {
                let mut req = conn.acme_admin().await?.use_issuer_request();
                conv::write_use_issuer(req.get(), name);
                Response::Issuer(req.send().promise.await?.get()?.read_outcome()?)
            }
        })
    }
}

/// The admin capability acmed handed out on one connection.
#[derive(Default)]
pub(crate) struct Caps {
    acme_admin: CachedCap<wire::acme_admin::Client>,
}

impl Conn<Acmed> {
    fn acmed(&self) -> wire::acmed::Client {
        wire::acmed::Client { client: self.bootstrap.clone() }
    }

    async fn acme_admin(&self) -> Result<wire::acme_admin::Client, CallError> {
        self.caps
            .acme_admin
            .get_or_obtain(|| async { self.acmed().admin_request().send().promise.await?.get()?.read_outcome() })
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::rc::Rc;

    use futures::FutureExt;

    use super::*;
    use crate::block_on;
    use crate::server::{serve_acmed, AcmeAdminService, AcmedService, AcmedSession, LocalResult, ServeOptions};

    /// A stand-in acmed: admits every caller when `admit` is set; knows key "k".
    struct Stub {
        admit: bool,
    }

    impl AcmedService for Stub {
        fn session(&self, _peer: PeerCredentials) -> Rc<dyn AcmedSession> {
            Rc::new(Stub { admit: self.admit })
        }
    }

    impl AcmedSession for Stub {
        fn health(&self) -> AcmedHealth {
            AcmedHealth {
                ok: true,
                version: "v".into(),
                uptime_secs: 1,
                accounts: 2,
                eab_keys: 3,
                external_account_required: true,
            }
        }

        fn admin(&self) -> LocalResult<Rc<dyn AcmeAdminService>> {
            let r = if self.admit {
                Ok(Rc::new(Stub { admit: true }) as Rc<dyn AcmeAdminService>)
            } else {
                Err(IpcError::new(ErrorKind::PermissionDenied, "no"))
            };
            futures::future::ready(r).boxed_local()
        }
    }

    fn key(id: &str, mac: &[u8]) -> EabKey {
        EabKey {
            key_id: id.into(),
            hmac_key: mac.to_vec(),
            created_unix_secs: 5,
            bound_account: "https://a/acct/1".into(),
            note: "n".into(),
        }
    }

    impl AcmeAdminService for Stub {
        fn eab_create(&self, key_id: String, note: String) -> LocalResult<EabKey> {
            futures::future::ready(Ok(EabKey { note, ..key(&key_id, &[1, 2, 3]) })).boxed_local()
        }
        fn eab_list(&self) -> LocalResult<Vec<EabKey>> {
            futures::future::ready(Ok(vec![key("k", b""), key("l", b"")])).boxed_local()
        }
        fn eab_show(&self, key_id: String) -> LocalResult<EabKey> {
            let r = if key_id == "k" {
                Ok(key("k", b""))
            } else {
                Err(IpcError::new(ErrorKind::NotFound, format!("no {key_id}")))
            };
            futures::future::ready(r).boxed_local()
        }
        fn eab_delete(&self, key_id: String) -> LocalResult<EabKey> {
            futures::future::ready(Err(IpcError::new(ErrorKind::AlreadyExists, format!("{key_id} is bound"))))
                .boxed_local()
        }
        fn use_issuer(&self, name: String) -> LocalResult<String> {
            futures::future::ready(Ok(name)).boxed_local()
        }
    }

    fn serve(admit: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        crate::server::serve_on_thread("acmed.sock", move |listener| async move {
            let stub = Rc::new(Stub { admit });
            serve_acmed(listener, stub, ServeOptions::default(), tokio_util::sync::CancellationToken::new()).await;
        })
    }

    #[test]
    fn every_call_round_trips_typed() {
        let (_dir, path) = serve(true);
        let c = AcmedClient::new(&path).per_thread();
        let h = block_on(c.health()).unwrap();
        assert_eq!((h.accounts, h.eab_keys, h.external_account_required), (2, 3, true));
        let k = block_on(c.eab_create("id-1", "a note")).unwrap();
        assert_eq!(k, EabKey { note: "a note".into(), ..key("id-1", &[1, 2, 3]) });
        assert!(!format!("{k:?}").contains("[1, 2, 3]"), "Debug shows the MAC key: {k:?}");
        assert_eq!(block_on(c.eab_list()).unwrap().len(), 2);
        assert_eq!(block_on(c.eab_show("k")).unwrap().bound_account, "https://a/acct/1");
        let e = block_on(c.eab_show("x")).unwrap_err();
        assert_eq!((e.kind, e.detail.as_str()), (ErrorKind::NotFound, "no x"));
        assert_eq!(block_on(c.eab_delete("k")).unwrap_err().kind, ErrorKind::AlreadyExists);
    }

    #[test]
    fn refused_admin_is_a_typed_error_and_health_still_answers() {
        let (_dir, path) = serve(false);
        let c = AcmedClient::new(&path).per_thread();
        assert_eq!(block_on(c.eab_list()).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert_eq!(block_on(c.eab_create("", "")).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert!(block_on(c.health()).unwrap().ok);
    }

    #[test]
    fn nothing_listening_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let c = AcmedClient::new(dir.path().join("none.sock")).per_thread();
        assert_eq!(block_on(c.eab_list()).unwrap_err().kind, ErrorKind::Unavailable);
    }
}
