//! tokend's admin interface (`tokend.capnp`): the traits tokend implements and
//! their capnp adapters.

use std::rc::Rc;

use capnp::capability::Rc as CapRc;
use futures::FutureExt;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::accept::{handle, serve_bootstrap, InFlight, ServeOptions};
use super::LocalResult;
use crate::convert::tokend as conv;
use crate::tokend_capnp as wire;
use crate::types::*;

/// tokend's entry point: called once per accepted connection.
pub trait TokendService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn TokendSession>;
}

/// One connection's view of tokend, bound to the caller's peer credentials.
pub trait TokendSession: 'static {
    /// tokend's health (anyone may ask).
    fn health(&self) -> TokendHealth;
    /// The admin capability, if the caller is an admin; a refusal otherwise.
    fn admin(&self) -> LocalResult<Rc<dyn TokendAdminService>>;
}

/// tokend administration. Each call re-checks the caller; changes are
/// committed before the future resolves.
pub trait TokendAdminService: 'static {
    /// Registers a client (`client_id` empty: a random id); the answer
    /// carries the secret of a client_secret_* client.
    fn client_create(&self, client: OauthClient) -> LocalResult<OauthClient>;
    /// Every client, without secrets.
    fn client_list(&self) -> LocalResult<Vec<OauthClient>>;
    /// One client, without its secret.
    fn client_show(&self, client_id: String) -> LocalResult<OauthClient>;
    /// Deletes a client; answers with it as it was.
    fn client_delete(&self, client_id: String) -> LocalResult<OauthClient>;
    /// Gives a client a new secret; the answer carries it.
    fn client_rotate_secret(&self, client_id: String) -> LocalResult<OauthClient>;
    /// The published signing keys.
    fn key_list(&self) -> LocalResult<Vec<TokenKey>>;
    /// Reads signd's key list again, then answers as [`key_list`](Self::key_list).
    fn key_refresh(&self) -> LocalResult<Vec<TokenKey>>;
    /// Creates a local user with the password it carries; the answer has none.
    fn user_create(&self, user: OauthUser) -> LocalResult<OauthUser>;
    /// Every user.
    fn user_list(&self) -> LocalResult<Vec<OauthUser>>;
    /// One user.
    fn user_show(&self, user_name: String) -> LocalResult<OauthUser>;
    /// Deletes a user (its sessions and refresh tokens end); answers with it as it was.
    fn user_delete(&self, user_name: String) -> LocalResult<OauthUser>;
    /// Replaces a user's password (its sessions and refresh tokens end).
    fn user_set_password(&self, user_name: String, password: String) -> LocalResult<OauthUser>;
    /// Disables (its sessions and refresh tokens end) or enables a user.
    fn user_set_disabled(&self, user_name: String, disabled: bool) -> LocalResult<OauthUser>;
}

/// Serves tokend's admin interface on `listener` until `shutdown` is
/// cancelled; see [`super::serve`].
pub async fn serve_tokend(
    listener: UnixListener,
    service: Rc<dyn TokendService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    serve_bootstrap(listener, opts, shutdown, None, move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::tokend::Client =
            capnp_rpc::new_client(TokendServer { session, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

struct TokendServer {
    session: Rc<dyn TokendSession>,
    in_flight: InFlight,
}

impl wire::tokend::Server for TokendServer {
    async fn health(
        self: CapRc<Self>,
        _: wire::tokend::HealthParams,
        mut results: wire::tokend::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        conv::write_health_results(results.get(), &self.session.health());
        Ok(())
    }

    async fn admin(
        self: CapRc<Self>,
        params: wire::tokend::AdminParams,
        results: wire::tokend::AdminResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |_| Ok(()),
            |()| {
                self.session.admin().map(|r| {
                    r.map(|inner| capnp_rpc::new_client(TokendAdminServer { inner, in_flight: self.in_flight.clone() }))
                })
            },
        )
        .await
    }
}

struct TokendAdminServer {
    inner: Rc<dyn TokendAdminService>,
    in_flight: InFlight,
}

impl wire::tokend_admin::Server for TokendAdminServer {
    async fn client_create(
        self: CapRc<Self>,
        params: wire::tokend_admin::ClientCreateParams,
        results: wire::tokend_admin::ClientCreateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_client_create, |c| self.inner.client_create(c)).await
    }

    async fn client_list(
        self: CapRc<Self>,
        params: wire::tokend_admin::ClientListParams,
        results: wire::tokend_admin::ClientListResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.client_list()).await
    }

    async fn client_show(
        self: CapRc<Self>,
        params: wire::tokend_admin::ClientShowParams,
        results: wire::tokend_admin::ClientShowResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_client_show, |id| self.inner.client_show(id)).await
    }

    async fn client_delete(
        self: CapRc<Self>,
        params: wire::tokend_admin::ClientDeleteParams,
        results: wire::tokend_admin::ClientDeleteResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_client_delete, |id| self.inner.client_delete(id)).await
    }

    async fn client_rotate_secret(
        self: CapRc<Self>,
        params: wire::tokend_admin::ClientRotateSecretParams,
        results: wire::tokend_admin::ClientRotateSecretResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_client_rotate_secret, |id| {
            self.inner.client_rotate_secret(id)
        })
        .await
    }

    async fn key_list(
        self: CapRc<Self>,
        params: wire::tokend_admin::KeyListParams,
        results: wire::tokend_admin::KeyListResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.key_list()).await
    }

    async fn key_refresh(
        self: CapRc<Self>,
        params: wire::tokend_admin::KeyRefreshParams,
        results: wire::tokend_admin::KeyRefreshResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.key_refresh()).await
    }

    async fn user_create(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserCreateParams,
        results: wire::tokend_admin::UserCreateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_user_create, |u| self.inner.user_create(u)).await
    }

    async fn user_list(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserListParams,
        results: wire::tokend_admin::UserListResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.user_list()).await
    }

    async fn user_show(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserShowParams,
        results: wire::tokend_admin::UserShowResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_user_show, |n| self.inner.user_show(n)).await
    }

    async fn user_delete(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserDeleteParams,
        results: wire::tokend_admin::UserDeleteResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_user_delete, |n| self.inner.user_delete(n)).await
    }

    async fn user_set_password(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserSetPasswordParams,
        results: wire::tokend_admin::UserSetPasswordResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_user_set_password, |(n, p)| {
            self.inner.user_set_password(n, p)
        })
        .await
    }

    async fn user_set_disabled(
        self: CapRc<Self>,
        params: wire::tokend_admin::UserSetDisabledParams,
        results: wire::tokend_admin::UserSetDisabledResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_user_set_disabled, |(n, d)| {
            self.inner.user_set_disabled(n, d)
        })
        .await
    }
}
