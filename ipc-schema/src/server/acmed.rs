//! acmed's admin interface (`acmed.capnp`): the traits acmed implements and
//! their capnp adapters.

use std::rc::Rc;

use capnp::capability::Rc as CapRc;
use futures::FutureExt;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::accept::{handle, serve_bootstrap, InFlight, ServeOptions};
use super::LocalResult;
use crate::acmed_capnp as wire;
use crate::convert::acmed as conv;
use crate::types::*;

/// acmed's entry point: called once per accepted connection.
pub trait AcmedService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn AcmedSession>;
}

/// One connection's view of acmed, bound to the caller's peer credentials.
pub trait AcmedSession: 'static {
    /// acmed's health (anyone may ask).
    fn health(&self) -> AcmedHealth;
    /// The admin capability, if the caller is an admin; a refusal otherwise.
    fn admin(&self) -> LocalResult<Rc<dyn AcmeAdminService>>;
}

/// acmed administration. Each call re-checks the caller; changes are
/// committed before the future resolves.
pub trait AcmeAdminService: 'static {
    /// Creates an external account binding key (`key_id` empty: a random id);
    /// the answer carries the MAC key.
    fn eab_create(&self, key_id: String, note: String) -> LocalResult<EabKey>;
    /// Every key, without MAC keys.
    fn eab_list(&self) -> LocalResult<Vec<EabKey>>;
    /// One key, without its MAC key.
    fn eab_show(&self, key_id: String) -> LocalResult<EabKey>;
    /// Deletes a key that has not bound an account; answers with the key as it was.
    fn eab_delete(&self, key_id: String) -> LocalResult<EabKey>;
    /// Issues from CA `name` (a successor of the one in use) from now on;
    /// the name of the issuer in use.
    fn use_issuer(&self, name: String) -> LocalResult<String>;
}

/// Serves acmed's admin interface on `listener` until `shutdown` is cancelled;
/// see [`super::serve`].
pub async fn serve_acmed(
    listener: UnixListener,
    service: Rc<dyn AcmedService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    serve_bootstrap(listener, opts, shutdown, None, move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::acmed::Client =
            capnp_rpc::new_client(AcmedServer { session, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

struct AcmedServer {
    session: Rc<dyn AcmedSession>,
    in_flight: InFlight,
}

impl wire::acmed::Server for AcmedServer {
    async fn health(
        self: CapRc<Self>,
        _: wire::acmed::HealthParams,
        mut results: wire::acmed::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        conv::write_health_results(results.get(), &self.session.health());
        Ok(())
    }

    async fn admin(
        self: CapRc<Self>,
        params: wire::acmed::AdminParams,
        results: wire::acmed::AdminResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |_| Ok(()),
            |()| {
                self.session.admin().map(|r| {
                    r.map(|inner| capnp_rpc::new_client(AcmeAdminServer { inner, in_flight: self.in_flight.clone() }))
                })
            },
        )
        .await
    }
}

struct AcmeAdminServer {
    inner: Rc<dyn AcmeAdminService>,
    in_flight: InFlight,
}

impl wire::acme_admin::Server for AcmeAdminServer {
    async fn eab_create(
        self: CapRc<Self>,
        params: wire::acme_admin::EabCreateParams,
        results: wire::acme_admin::EabCreateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_eab_create, |(key_id, note)| {
            self.inner.eab_create(key_id, note)
        })
        .await
    }

    async fn eab_list(
        self: CapRc<Self>,
        params: wire::acme_admin::EabListParams,
        results: wire::acme_admin::EabListResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.eab_list()).await
    }

    async fn eab_show(
        self: CapRc<Self>,
        params: wire::acme_admin::EabShowParams,
        results: wire::acme_admin::EabShowResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_eab_show, |k| self.inner.eab_show(k)).await
    }

    async fn eab_delete(
        self: CapRc<Self>,
        params: wire::acme_admin::EabDeleteParams,
        results: wire::acme_admin::EabDeleteResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_eab_delete, |k| self.inner.eab_delete(k)).await
    }

    async fn use_issuer(
        self: CapRc<Self>,
        params: wire::acme_admin::UseIssuerParams,
        results: wire::acme_admin::UseIssuerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_use_issuer, |n| self.inner.use_issuer(n)).await
    }
}
