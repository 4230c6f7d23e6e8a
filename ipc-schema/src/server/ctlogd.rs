//! ctlogd's admin interface (`ctlogd.capnp`): the traits ctlogd implements and
//! their capnp adapters.

use std::rc::Rc;

use capnp::capability::Rc as CapRc;
use futures::FutureExt;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::accept::{handle, serve_bootstrap, InFlight, ServeOptions};
use super::LocalResult;
use crate::convert::ctlogd as conv;
use crate::ctlogd_capnp as wire;
use crate::types::*;

/// ctlogd's entry point: called once per accepted connection.
pub trait CtlogdService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn CtlogdSession>;
}

/// One connection's view of ctlogd, bound to the caller's peer credentials.
pub trait CtlogdSession: 'static {
    /// ctlogd's health (anyone may ask).
    fn health(&self) -> CtlogdHealth;
    /// The admin capability, if the caller is an admin; a refusal otherwise.
    fn admin(&self) -> LocalResult<Rc<dyn CtAdminService>>;
}

/// ctlogd administration. Each call re-checks the caller; changes are
/// committed before the future resolves.
pub trait CtAdminService: 'static {
    /// Adds a temporal shard and serves it; the shard as served.
    fn add_shard(&self, spec: CtShardSpec) -> LocalResult<CtShard>;
    /// Every log served, by name.
    fn list_shards(&self) -> LocalResult<Vec<CtShard>>;
}

/// Serves ctlogd's admin interface on `listener` until `shutdown` is cancelled;
/// see [`super::serve`].
pub async fn serve_ctlogd(
    listener: UnixListener,
    service: Rc<dyn CtlogdService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    serve_bootstrap(listener, opts, shutdown, None, move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::ctlogd::Client =
            capnp_rpc::new_client(CtlogdServer { session, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

struct CtlogdServer {
    session: Rc<dyn CtlogdSession>,
    in_flight: InFlight,
}

impl wire::ctlogd::Server for CtlogdServer {
    async fn health(
        self: CapRc<Self>,
        _: wire::ctlogd::HealthParams,
        mut results: wire::ctlogd::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        conv::write_health_results(results.get(), &self.session.health());
        Ok(())
    }

    async fn admin(
        self: CapRc<Self>,
        params: wire::ctlogd::AdminParams,
        results: wire::ctlogd::AdminResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |_| Ok(()),
            |()| {
                self.session.admin().map(|r| {
                    r.map(|inner| capnp_rpc::new_client(CtAdminServer { inner, in_flight: self.in_flight.clone() }))
                })
            },
        )
        .await
    }
}

struct CtAdminServer {
    inner: Rc<dyn CtAdminService>,
    in_flight: InFlight,
}

impl wire::ct_admin::Server for CtAdminServer {
    async fn add_shard(
        self: CapRc<Self>,
        params: wire::ct_admin::AddShardParams,
        results: wire::ct_admin::AddShardResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_add_shard, |spec| self.inner.add_shard(spec)).await
    }

    async fn list_shards(
        self: CapRc<Self>,
        params: wire::ct_admin::ListShardsParams,
        results: wire::ct_admin::ListShardsResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.list_shards()).await
    }
}
