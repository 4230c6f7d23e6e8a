//! ocspd's registry interface (`ocspd.capnp`): the traits ocspd implements
//! with plain types, and the capnp servers that answer for them.

use std::rc::Rc;

use capnp::capability::Rc as CapRc;
use futures::FutureExt;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::accept::{handle, serve_bootstrap, InFlight, ServeOptions};
use super::LocalResult;
use crate::convert::ocspd as conv;
use crate::ocspd_capnp as wire;
use crate::types::*;

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
    /// Fetches the CA's OCSP responder certificate from signd again and
    /// signs with it from then on; the CA's certificates and URLs after.
    fn refresh_responder(&self) -> LocalResult<IssuerInfo>;
    /// Serves issuer `name`, this one's successor in signd, from then on
    /// (recorded before it answers); its certificates and URLs.
    fn add_successor(&self, name: String) -> LocalResult<IssuerInfo>;
}

/// Serves ocspd's interface on `listener` until `shutdown` is cancelled; see [`super::serve`].
pub async fn serve_ocspd(
    listener: UnixListener,
    service: Rc<dyn OcspdService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    serve_bootstrap(listener, opts, shutdown, None, move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::ocspd::Client =
            capnp_rpc::new_client(OcspdServer { session, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

struct OcspdServer {
    session: Rc<dyn OcspdSession>,
    in_flight: InFlight,
}

impl wire::ocspd::Server for OcspdServer {
    async fn health(
        self: CapRc<Self>,
        _: wire::ocspd::HealthParams,
        mut results: wire::ocspd::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        conv::write_health_results(results.get(), &self.session.health());
        Ok(())
    }

    async fn registry(
        self: CapRc<Self>,
        params: wire::ocspd::RegistryParams,
        results: wire::ocspd::RegistryResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_registry, |name| {
            self.session.registry(name).map(|r| {
                r.map(|inner| capnp_rpc::new_client(RegistryServer { inner, in_flight: self.in_flight.clone() }))
            })
        })
        .await
    }
}

struct RegistryServer {
    inner: Rc<dyn RegistryService>,
    in_flight: InFlight,
}

impl wire::registry::Server for RegistryServer {
    async fn record_issued(
        self: CapRc<Self>,
        params: wire::registry::RecordIssuedParams,
        results: wire::registry::RecordIssuedResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_record_issued, |c| self.inner.record_issued(c)).await
    }

    async fn revoke(
        self: CapRc<Self>,
        params: wire::registry::RevokeParams,
        results: wire::registry::RevokeResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_revoke, |r| self.inner.revoke(r)).await
    }

    async fn status(
        self: CapRc<Self>,
        params: wire::registry::StatusParams,
        results: wire::registry::StatusResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_status, |s| self.inner.status(s)).await
    }

    async fn release_hold(
        self: CapRc<Self>,
        params: wire::registry::ReleaseHoldParams,
        results: wire::registry::ReleaseHoldResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_release_hold, |s| self.inner.release_hold(s)).await
    }

    async fn crl(
        self: CapRc<Self>,
        params: wire::registry::CrlParams,
        results: wire::registry::CrlResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_crl, |w| self.inner.crl(w)).await
    }

    async fn info(
        self: CapRc<Self>,
        params: wire::registry::InfoParams,
        results: wire::registry::InfoResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.info()).await
    }

    async fn refresh_responder(
        self: CapRc<Self>,
        params: wire::registry::RefreshResponderParams,
        results: wire::registry::RefreshResponderResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.refresh_responder()).await
    }

    async fn add_successor(
        self: CapRc<Self>,
        params: wire::registry::AddSuccessorParams,
        results: wire::registry::AddSuccessorResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_add_successor, |name| self.inner.add_successor(name)).await
    }
}
