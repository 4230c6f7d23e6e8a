//! The ctlogd client: [`CtlogdClient`], for ctlogd's admin interface
//! (`ctlogd.capnp`), on a [`Connection`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::conn::{unexpected, CachedCap, Conn, Connection, Protocol, ThreadConns};
use crate::convert::ctlogd as conv;
use crate::convert::{CallError, ReadOutcome};
use crate::ctlogd_capnp as wire;
use crate::types::*;

/// The socket ctlogd's admin interface listens on in a system install
/// (`units/ctlogd-admin.socket`).
pub const DEFAULT_CTLOGD_SOCKET: &str = "/run/signet/ctlogd.sock";

/// A handle to ctlogd's admin interface: the same connection handling as
/// [`SigndClient`](crate::SigndClient) (lazy, reconnecting, shared or [`CtlogdClient::per_thread`]).
#[derive(Clone)]
pub struct CtlogdClient(Connection<Ctlogd>);

#[derive(Debug)]
pub(crate) enum Request {
    Health,
    AddShard(CtShardSpec),
    ListShards,
}

#[derive(Debug)]
pub(crate) enum Response {
    Health(CtlogdHealth),
    Shard(CtShard),
    Shards(Vec<CtShard>),
}

impl CtlogdClient {
    /// Creates a client for ctlogd's admin socket at `path`; nothing connects until the first call.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self(Connection::new(path.as_ref()))
    }

    /// A handle whose calls run on the calling thread (see [`SigndClient::per_thread`](crate::SigndClient::per_thread)).
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    /// ctlogd's health; anyone who can connect may ask.
    pub async fn health(&self) -> Result<CtlogdHealth, IpcError> {
        match self.0.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: adds a temporal shard and serves it at once; the shard as
    /// served. Asking again for the same shard returns it.
    pub async fn add_shard(&self, spec: &CtShardSpec) -> Result<CtShard, IpcError> {
        match self.0.call(Request::AddShard(spec.clone())).await? {
            Response::Shard(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: every log served, by name.
    pub async fn list_shards(&self) -> Result<Vec<CtShard>, IpcError> {
        match self.0.call(Request::ListShards).await? {
            Response::Shards(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }
}

/// ctlogd's calls, as the [`Connection`] carries them.
pub(crate) struct Ctlogd;

thread_local! {
    static THREAD_CONNS: ThreadConns<Ctlogd> = RefCell::new(HashMap::new());
}

impl Protocol for Ctlogd {
    const SERVICE: &'static str = "ctlogd";
    type Request = Request;
    type Response = Response;
    type Caps = Caps;

    fn thread_conns() -> &'static std::thread::LocalKey<ThreadConns<Self>> {
        &THREAD_CONNS
    }

    fn retry_safe(_: &Request) -> bool {
        // An addShard sent again returns the shard the first one added.
        true
    }

    async fn attempt(conn: &Conn<Self>, request: &Request) -> Result<Response, CallError> {
        Ok(match request {
            Request::Health => {
                let response = conn.ctlogd().health_request().send().promise.await?;
                Response::Health(conv::read_health_results(response.get()?)?)
            }
            Request::AddShard(spec) => {
                let mut req = conn.ct_admin().await?.add_shard_request();
                conv::write_add_shard(req.get(), spec);
                Response::Shard(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::ListShards => {
                let req = conn.ct_admin().await?.list_shards_request();
                Response::Shards(req.send().promise.await?.get()?.read_outcome()?)
            }
        })
    }
}

/// The admin capability ctlogd handed out on one connection.
#[derive(Default)]
pub(crate) struct Caps {
    ct_admin: CachedCap<wire::ct_admin::Client>,
}

impl Conn<Ctlogd> {
    fn ctlogd(&self) -> wire::ctlogd::Client {
        wire::ctlogd::Client { client: self.bootstrap.clone() }
    }

    async fn ct_admin(&self) -> Result<wire::ct_admin::Client, CallError> {
        self.caps
            .ct_admin
            .get_or_obtain(|| async { self.ctlogd().admin_request().send().promise.await?.get()?.read_outcome() })
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
    use crate::server::{serve_ctlogd, CtAdminService, CtlogdService, CtlogdSession, LocalResult, ServeOptions};

    /// A stand-in ctlogd: admits every caller when `admit` is set.
    struct Stub {
        admit: bool,
    }

    impl CtlogdService for Stub {
        fn session(&self, _peer: PeerCredentials) -> Rc<dyn CtlogdSession> {
            Rc::new(Stub { admit: self.admit })
        }
    }

    impl CtlogdSession for Stub {
        fn health(&self) -> CtlogdHealth {
            CtlogdHealth { ok: true, version: "v".into(), uptime_secs: 1, logs: 2 }
        }

        fn admin(&self) -> LocalResult<Rc<dyn CtAdminService>> {
            let r = if self.admit {
                Ok(Rc::new(Stub { admit: true }) as Rc<dyn CtAdminService>)
            } else {
                Err(IpcError::new(ErrorKind::PermissionDenied, "no"))
            };
            futures::future::ready(r).boxed_local()
        }
    }

    fn shard(name: &str, window: Option<(i64, i64)>) -> CtShard {
        CtShard {
            name: name.into(),
            log_id: vec![7; 32],
            public_key: vec![1, 2],
            window,
            url: format!("http://x/{name}/"),
            tree_size: 3,
            added_at_run_time: window.is_some(),
            log_list_entry: "{}".into(),
        }
    }

    impl CtAdminService for Stub {
        fn add_shard(&self, spec: CtShardSpec) -> LocalResult<CtShard> {
            let r = if spec.name == "taken" {
                Err(IpcError::new(ErrorKind::AlreadyExists, "log `taken` is served already"))
            } else {
                Ok(shard(&spec.name, Some((spec.not_after_start_unix_secs, spec.not_after_end_unix_secs))))
            };
            futures::future::ready(r).boxed_local()
        }
        fn list_shards(&self) -> LocalResult<Vec<CtShard>> {
            futures::future::ready(Ok(vec![shard("a", None), shard("b", Some((5, 9)))])).boxed_local()
        }
    }

    fn serve(admit: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        crate::server::serve_on_thread("ctlogd.sock", move |listener| async move {
            let stub = Rc::new(Stub { admit });
            serve_ctlogd(listener, stub, ServeOptions::default(), tokio_util::sync::CancellationToken::new()).await;
        })
    }

    #[test]
    fn every_call_round_trips_typed() {
        let (_dir, path) = serve(true);
        let c = CtlogdClient::new(&path).per_thread();
        assert_eq!(block_on(c.health()).unwrap().logs, 2);
        let spec = CtShardSpec {
            name: "2027h1".into(),
            not_after_start_unix_secs: 10,
            not_after_end_unix_secs: 20,
            ..CtShardSpec::default()
        };
        assert_eq!(block_on(c.add_shard(&spec)).unwrap(), shard("2027h1", Some((10, 20))));
        let e = block_on(c.add_shard(&CtShardSpec { name: "taken".into(), ..spec })).unwrap_err();
        assert_eq!((e.kind, e.detail.as_str()), (ErrorKind::AlreadyExists, "log `taken` is served already"));
        assert_eq!(block_on(c.list_shards()).unwrap(), vec![shard("a", None), shard("b", Some((5, 9)))]);
    }

    #[test]
    fn refused_admin_is_a_typed_error_and_health_still_answers() {
        let (_dir, path) = serve(false);
        let c = CtlogdClient::new(&path).per_thread();
        assert_eq!(block_on(c.list_shards()).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert!(block_on(c.health()).unwrap().ok);
    }
}
