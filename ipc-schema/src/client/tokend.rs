//! The tokend client: [`TokendClient`], for tokend's admin interface
//! (`tokend.capnp`), on a [`Connection`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::conn::{unexpected, CachedCap, Conn, Connection, Protocol, ThreadConns};
use crate::convert::tokend as conv;
use crate::convert::{CallError, ReadOutcome};
use crate::tokend_capnp as wire;
use crate::types::*;

/// The socket tokend's admin interface listens on in a system install.
pub const DEFAULT_TOKEND_SOCKET: &str = "/run/signet/tokend.sock";

/// A handle to tokend's admin interface: the same connection handling as
/// [`SigndClient`](crate::SigndClient) (lazy, reconnecting, shared or [`TokendClient::per_thread`]).
#[derive(Clone)]
pub struct TokendClient(Connection<Tokend>);

#[derive(Debug)]
pub(crate) enum Request {
    Health,
    // Boxed: a client record is several times the size of every other request.
    ClientCreate { client: Box<OauthClient> },
    ClientList,
    ClientShow { client_id: String },
    ClientDelete { client_id: String },
    ClientRotateSecret { client_id: String },
    KeyList,
    KeyRefresh,
    UserCreate { user: OauthUser },
    UserList,
    UserShow { user_name: String },
    UserDelete { user_name: String },
    UserSetPassword { user_name: String, password: Password },
    UserSetDisabled { user_name: String, disabled: bool },
}

/// A password on its way to tokend: `Debug` leaves it out.
pub(crate) struct Password(String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

#[derive(Debug)]
pub(crate) enum Response {
    Health(TokendHealth),
    // Boxed: a client record is several times the size of every other answer.
    Client(Box<OauthClient>),
    Clients(Vec<OauthClient>),
    Keys(Vec<TokenKey>),
    User(OauthUser),
    Users(Vec<OauthUser>),
}

impl TokendClient {
    /// Creates a client for tokend's admin socket at `path`; nothing connects until the first call.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self(Connection::new(path.as_ref()))
    }

    /// A handle whose calls run on the calling thread (see [`SigndClient::per_thread`](crate::SigndClient::per_thread)).
    pub fn per_thread(&self) -> Self {
        Self(self.0.per_thread())
    }

    async fn client(&self, request: Request) -> Result<OauthClient, IpcError> {
        match self.0.call(request).await? {
            Response::Client(c) => Ok(*c),
            other => Err(unexpected(&other)),
        }
    }

    async fn keys(&self, request: Request) -> Result<Vec<TokenKey>, IpcError> {
        match self.0.call(request).await? {
            Response::Keys(k) => Ok(k),
            other => Err(unexpected(&other)),
        }
    }

    /// tokend's health; anyone who can connect may ask.
    pub async fn health(&self) -> Result<TokendHealth, IpcError> {
        match self.0.call(Request::Health).await? {
            Response::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: registers a client (`client_id` empty: tokend picks a random
    /// id; `secret` must be empty, tokend makes every secret; the times are
    /// ignored). The answer is the only one that carries a client_secret_*
    /// client's secret. Not retried when the connection breaks during the call.
    pub async fn client_create(&self, client: OauthClient) -> Result<OauthClient, IpcError> {
        self.client(Request::ClientCreate { client: Box::new(client) }).await
    }

    /// Admin: every client, without secrets.
    pub async fn client_list(&self) -> Result<Vec<OauthClient>, IpcError> {
        match self.0.call(Request::ClientList).await? {
            Response::Clients(c) => Ok(c),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: one client, without its secret.
    pub async fn client_show(&self, client_id: &str) -> Result<OauthClient, IpcError> {
        self.client(Request::ClientShow { client_id: client_id.into() }).await
    }

    /// Admin: deletes a client; returns it as it was.
    pub async fn client_delete(&self, client_id: &str) -> Result<OauthClient, IpcError> {
        self.client(Request::ClientDelete { client_id: client_id.into() }).await
    }

    /// Admin: gives a client a new secret; the answer carries it, once. Not
    /// retried when the connection breaks during the call.
    pub async fn client_rotate_secret(&self, client_id: &str) -> Result<OauthClient, IpcError> {
        self.client(Request::ClientRotateSecret { client_id: client_id.into() }).await
    }

    /// Admin: the signing keys tokend publishes, as of its last refresh.
    pub async fn key_list(&self) -> Result<Vec<TokenKey>, IpcError> {
        self.keys(Request::KeyList).await
    }

    /// Admin: tokend reads signd's key list again now; returns the published keys.
    pub async fn key_refresh(&self) -> Result<Vec<TokenKey>, IpcError> {
        self.keys(Request::KeyRefresh).await
    }

    async fn user(&self, request: Request) -> Result<OauthUser, IpcError> {
        match self.0.call(request).await? {
            Response::User(u) => Ok(u),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: creates a local user with `user.password` (the times and
    /// `disabled` are ignored). The answer carries no password. Not retried
    /// when the connection breaks during the call.
    pub async fn user_create(&self, user: OauthUser) -> Result<OauthUser, IpcError> {
        self.user(Request::UserCreate { user }).await
    }

    /// Admin: every local user.
    pub async fn user_list(&self) -> Result<Vec<OauthUser>, IpcError> {
        match self.0.call(Request::UserList).await? {
            Response::Users(u) => Ok(u),
            other => Err(unexpected(&other)),
        }
    }

    /// Admin: one user.
    pub async fn user_show(&self, user_name: &str) -> Result<OauthUser, IpcError> {
        self.user(Request::UserShow { user_name: user_name.into() }).await
    }

    /// Admin: deletes a user, ending its sessions and refresh tokens; returns it as it was.
    pub async fn user_delete(&self, user_name: &str) -> Result<OauthUser, IpcError> {
        self.user(Request::UserDelete { user_name: user_name.into() }).await
    }

    /// Admin: replaces a user's password, ending its sessions and refresh tokens.
    pub async fn user_set_password(&self, user_name: &str, password: &str) -> Result<OauthUser, IpcError> {
        self.user(Request::UserSetPassword { user_name: user_name.into(), password: Password(password.into()) }).await
    }

    /// Admin: disables (ending its sessions and refresh tokens) or enables a user.
    pub async fn user_set_disabled(&self, user_name: &str, disabled: bool) -> Result<OauthUser, IpcError> {
        self.user(Request::UserSetDisabled { user_name: user_name.into(), disabled }).await
    }
}

/// tokend's calls, as the [`Connection`] carries them.
pub(crate) struct Tokend;

thread_local! {
    static THREAD_CONNS: ThreadConns<Tokend> = RefCell::new(HashMap::new());
}

impl Protocol for Tokend {
    const SERVICE: &'static str = "tokend";
    type Request = Request;
    type Response = Response;
    type Caps = Caps;

    fn thread_conns() -> &'static std::thread::LocalKey<ThreadConns<Self>> {
        &THREAD_CONNS
    }

    fn retry_safe(request: &Request) -> bool {
        // A create or a rotation is not: the first may have been committed,
        // and a second would fail with alreadyExists (or replace the secret
        // again) while the caller never saw the first one's secret.
        // A user create likewise (alreadyExists for the caller's own user).
        !matches!(
            request,
            Request::ClientCreate { .. } | Request::ClientRotateSecret { .. } | Request::UserCreate { .. }
        )
    }

    async fn attempt(conn: &Conn<Self>, request: &Request) -> Result<Response, CallError> {
        Ok(match request {
            Request::Health => {
                let response = conn.tokend().health_request().send().promise.await?;
                Response::Health(conv::read_health_results(response.get()?)?)
            }
            Request::ClientCreate { client } => {
                let mut req = conn.tokend_admin().await?.client_create_request();
                conv::write_client_create(req.get(), client);
                Response::Client(Box::new(req.send().promise.await?.get()?.read_outcome()?))
            }
            Request::ClientList => {
                let req = conn.tokend_admin().await?.client_list_request();
                Response::Clients(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::ClientShow { client_id } => {
                let mut req = conn.tokend_admin().await?.client_show_request();
                conv::write_client_show(req.get(), client_id);
                Response::Client(Box::new(req.send().promise.await?.get()?.read_outcome()?))
            }
            Request::ClientDelete { client_id } => {
                let mut req = conn.tokend_admin().await?.client_delete_request();
                conv::write_client_delete(req.get(), client_id);
                Response::Client(Box::new(req.send().promise.await?.get()?.read_outcome()?))
            }
            Request::ClientRotateSecret { client_id } => {
                let mut req = conn.tokend_admin().await?.client_rotate_secret_request();
                conv::write_client_rotate_secret(req.get(), client_id);
                Response::Client(Box::new(req.send().promise.await?.get()?.read_outcome()?))
            }
            Request::KeyList => {
                let req = conn.tokend_admin().await?.key_list_request();
                Response::Keys(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::KeyRefresh => {
                let req = conn.tokend_admin().await?.key_refresh_request();
                Response::Keys(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserCreate { user } => {
                let mut req = conn.tokend_admin().await?.user_create_request();
                conv::write_user_create(req.get(), user);
                Response::User(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserList => {
                let req = conn.tokend_admin().await?.user_list_request();
                Response::Users(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserShow { user_name } => {
                let mut req = conn.tokend_admin().await?.user_show_request();
                conv::write_user_show(req.get(), user_name);
                Response::User(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserDelete { user_name } => {
                let mut req = conn.tokend_admin().await?.user_delete_request();
                conv::write_user_delete(req.get(), user_name);
                Response::User(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserSetPassword { user_name, password } => {
                let mut req = conn.tokend_admin().await?.user_set_password_request();
                conv::write_user_set_password(req.get(), user_name, &password.0);
                Response::User(req.send().promise.await?.get()?.read_outcome()?)
            }
            Request::UserSetDisabled { user_name, disabled } => {
                let mut req = conn.tokend_admin().await?.user_set_disabled_request();
                conv::write_user_set_disabled(req.get(), user_name, *disabled);
                Response::User(req.send().promise.await?.get()?.read_outcome()?)
            }
        })
    }
}

/// The admin capability tokend handed out on one connection.
#[derive(Default)]
pub(crate) struct Caps {
    tokend_admin: CachedCap<wire::tokend_admin::Client>,
}

impl Conn<Tokend> {
    fn tokend(&self) -> wire::tokend::Client {
        wire::tokend::Client { client: self.bootstrap.clone() }
    }

    async fn tokend_admin(&self) -> Result<wire::tokend_admin::Client, CallError> {
        self.caps
            .tokend_admin
            .get_or_obtain(|| async { self.tokend().admin_request().send().promise.await?.get()?.read_outcome() })
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
    use crate::server::{serve_tokend, LocalResult, ServeOptions, TokendAdminService, TokendService, TokendSession};

    /// A stand-in tokend: admits every caller when `admit` is set; knows client "c".
    struct Stub {
        admit: bool,
    }

    impl TokendService for Stub {
        fn session(&self, _peer: PeerCredentials) -> Rc<dyn TokendSession> {
            Rc::new(Stub { admit: self.admit })
        }
    }

    impl TokendSession for Stub {
        fn health(&self) -> TokendHealth {
            TokendHealth { ok: true, version: "v".into(), uptime_secs: 1, clients: 2, signing_key: "k1".into() }
        }

        fn admin(&self) -> LocalResult<Rc<dyn TokendAdminService>> {
            let r = if self.admit {
                Ok(Rc::new(Stub { admit: true }) as Rc<dyn TokendAdminService>)
            } else {
                Err(IpcError::new(ErrorKind::PermissionDenied, "no"))
            };
            futures::future::ready(r).boxed_local()
        }
    }

    fn client(id: &str, secret: &str) -> OauthClient {
        OauthClient {
            client_id: id.into(),
            name: "Billing ✓".into(),
            auth_method: "client_secret_basic".into(),
            secret: secret.into(),
            jwks: String::new(),
            scopes: vec!["read".into(), "write".into()],
            audiences: vec!["https://api.example.net".into()],
            grant_types: vec!["client_credentials".into()],
            created_unix_secs: 5,
            secret_set_unix_secs: 6,
            redirect_uris: vec!["https://app.example.net/cb".into(), "com.example.app:/cb".into()],
            post_logout_redirect_uris: vec!["https://app.example.net/".into()],
            tls_san_dns: "billing.example.net".into(),
            ..OauthClient::default()
        }
    }

    fn user(name: &str) -> OauthUser {
        OauthUser {
            user_name: name.into(),
            name: "Alice ✓".into(),
            email: "alice@example.net".into(),
            groups: vec!["admins".into(), "ops".into()],
            password: String::new(),
            created_unix_secs: 7,
            password_set_unix_secs: 8,
            disabled: false,
        }
    }

    fn known_user(name: String) -> Result<OauthUser, IpcError> {
        if name == "alice" {
            Ok(user("alice"))
        } else {
            Err(IpcError::new(ErrorKind::NotFound, format!("no user {name}")))
        }
    }

    fn keys() -> Vec<TokenKey> {
        vec![
            TokenKey {
                key_id: "old".into(),
                alg: "ES256".into(),
                first_seen_unix_secs: 1,
                superseded_unix_secs: 9,
                signing: false,
            },
            TokenKey {
                key_id: "new".into(),
                alg: "ES256".into(),
                first_seen_unix_secs: 8,
                superseded_unix_secs: 0,
                signing: true,
            },
        ]
    }

    fn ready<T: 'static>(r: Result<T, IpcError>) -> LocalResult<T> {
        futures::future::ready(r).boxed_local()
    }

    fn known(id: String) -> Result<OauthClient, IpcError> {
        if id == "c" {
            Ok(client("c", ""))
        } else {
            Err(IpcError::new(ErrorKind::NotFound, format!("no {id}")))
        }
    }

    impl TokendAdminService for Stub {
        fn client_create(&self, c: OauthClient) -> LocalResult<OauthClient> {
            // Echoes what it was sent, with a secret, so every field is seen crossing both ways.
            ready(Ok(OauthClient { secret: "s3cr3t".into(), ..c }))
        }
        fn client_list(&self) -> LocalResult<Vec<OauthClient>> {
            ready(Ok(vec![client("c", ""), client("d", "")]))
        }
        fn client_show(&self, id: String) -> LocalResult<OauthClient> {
            ready(known(id))
        }
        fn client_delete(&self, id: String) -> LocalResult<OauthClient> {
            ready(known(id))
        }
        fn client_rotate_secret(&self, id: String) -> LocalResult<OauthClient> {
            ready(if id == "c" {
                Ok(client("c", "n3w"))
            } else {
                Err(IpcError::invalid(format!("{id} has no secret")))
            })
        }
        fn key_list(&self) -> LocalResult<Vec<TokenKey>> {
            ready(Ok(keys()))
        }
        fn key_refresh(&self) -> LocalResult<Vec<TokenKey>> {
            ready(Err(IpcError::new(ErrorKind::Unavailable, "signd is down")))
        }
        fn user_create(&self, u: OauthUser) -> LocalResult<OauthUser> {
            // Proves the password arrived, then answers without it, as tokend does.
            assert_eq!(u.password, "pw-12345678");
            ready(Ok(OauthUser { password: String::new(), ..u }))
        }
        fn user_list(&self) -> LocalResult<Vec<OauthUser>> {
            ready(Ok(vec![user("alice"), user("bob")]))
        }
        fn user_show(&self, name: String) -> LocalResult<OauthUser> {
            ready(known_user(name))
        }
        fn user_delete(&self, name: String) -> LocalResult<OauthUser> {
            ready(known_user(name))
        }
        fn user_set_password(&self, name: String, password: String) -> LocalResult<OauthUser> {
            ready(if password == "n3w-password" {
                known_user(name).map(|u| OauthUser { password_set_unix_secs: 9, ..u })
            } else {
                Err(IpcError::invalid("short"))
            })
        }
        fn user_set_disabled(&self, name: String, disabled: bool) -> LocalResult<OauthUser> {
            ready(known_user(name).map(|u| OauthUser { disabled, ..u }))
        }
    }

    fn serve(admit: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        crate::server::serve_on_thread("tokend.sock", move |listener| async move {
            let stub = Rc::new(Stub { admit });
            serve_tokend(listener, stub, ServeOptions::default(), tokio_util::sync::CancellationToken::new()).await;
        })
    }

    #[test]
    fn every_call_round_trips_typed() {
        let (_dir, path) = serve(true);
        let c = TokendClient::new(&path).per_thread();
        let h = block_on(c.health()).unwrap();
        assert_eq!((h.clients, h.signing_key.as_str()), (2, "k1"));
        let sent = OauthClient { jwks: "{\"keys\":[]}".into(), ..client("id-1", "") };
        let created = block_on(c.client_create(sent.clone())).unwrap();
        assert_eq!(created, OauthClient { secret: "s3cr3t".into(), ..sent });
        assert!(!format!("{created:?}").contains("s3cr3t"), "Debug shows the secret: {created:?}");
        assert_eq!(block_on(c.client_list()).unwrap().len(), 2);
        assert_eq!(block_on(c.client_show("c")).unwrap(), client("c", ""));
        let e = block_on(c.client_show("x")).unwrap_err();
        assert_eq!((e.kind, e.detail.as_str()), (ErrorKind::NotFound, "no x"));
        assert_eq!(block_on(c.client_delete("c")).unwrap().client_id, "c");
        assert_eq!(block_on(c.client_delete("x")).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(block_on(c.client_rotate_secret("c")).unwrap().secret, "n3w");
        assert_eq!(block_on(c.client_rotate_secret("p")).unwrap_err().kind, ErrorKind::InvalidArgument);
        assert_eq!(block_on(c.key_list()).unwrap(), keys());
        assert_eq!(block_on(c.key_refresh()).unwrap_err().kind, ErrorKind::Unavailable);

        let sent = OauthUser { password: "pw-12345678".into(), ..user("carol") };
        assert!(!format!("{sent:?}").contains("pw-12345678"), "Debug shows the password: {sent:?}");
        assert_eq!(block_on(c.user_create(sent)).unwrap(), user("carol"));
        assert_eq!(block_on(c.user_list()).unwrap(), vec![user("alice"), user("bob")]);
        assert_eq!(block_on(c.user_show("alice")).unwrap(), user("alice"));
        let e = block_on(c.user_show("x")).unwrap_err();
        assert_eq!((e.kind, e.detail.as_str()), (ErrorKind::NotFound, "no user x"));
        assert_eq!(block_on(c.user_delete("alice")).unwrap().user_name, "alice");
        assert_eq!(block_on(c.user_set_password("alice", "n3w-password")).unwrap().password_set_unix_secs, 9);
        assert_eq!(block_on(c.user_set_password("alice", "x")).unwrap_err().kind, ErrorKind::InvalidArgument);
        assert!(block_on(c.user_set_disabled("alice", true)).unwrap().disabled);
        assert!(!block_on(c.user_set_disabled("alice", false)).unwrap().disabled);
        assert_eq!(block_on(c.user_set_disabled("x", true)).unwrap_err().kind, ErrorKind::NotFound);
    }

    #[test]
    fn refused_admin_is_a_typed_error_and_health_still_answers() {
        let (_dir, path) = serve(false);
        let c = TokendClient::new(&path).per_thread();
        assert_eq!(block_on(c.client_list()).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert_eq!(block_on(c.client_create(OauthClient::default())).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert_eq!(block_on(c.key_refresh()).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert_eq!(block_on(c.user_list()).unwrap_err().kind, ErrorKind::PermissionDenied);
        assert!(block_on(c.health()).unwrap().ok);
    }

    #[test]
    fn nothing_listening_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let c = TokendClient::new(dir.path().join("none.sock")).per_thread();
        assert_eq!(block_on(c.client_list()).unwrap_err().kind, ErrorKind::Unavailable);
    }
}
