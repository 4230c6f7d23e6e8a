//! The admin interface (Cap'n Proto, `tokend.capnp`) on its own Unix socket:
//! OAuth clients, local users and the published signing keys, for operators
//! (`signetctl oauth ...`).
//!
//! Served on its own thread with a `LocalSet` (capnp-rpc is `!Send`; the
//! thread is `signet_runtime::service_thread`'s). Callers are admitted by
//! their peer credentials (SO_PEERCRED) against `[admin]`, when they ask for
//! the admin capability and again on every call (SIGHUP reloads `[admin]`).
//! Each change is one LMDB write transaction, committed before the answer.
//! A client secret leaves tokend once, in the answer that set it, and is
//! never logged; for client_secret_basic/post only its SHA-256 is kept. A
//! user's password arrives in a request, is hashed (argon2id) and never
//! leaves, nor is it logged.
//!
//! The checks of what an operator asks for are pure functions of plain
//! values ([`check_new_client`], [`check_new_user`] and the `check_*` beside
//! them).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::FutureExt;
use openssl::sha::sha256;
use signet_ipc::server::{serve_tokend, LocalResult, ServeOptions, TokendAdminService, TokendService, TokendSession};
use signet_ipc::{ErrorKind, IpcError, OauthClient, OauthUser, PeerCredentials, TokenKey, TokendHealth};
use signet_runtime::principals::supplementary_groups;
use signet_store::{StoreError, WriteTxn};
use tokio_util::sync::CancellationToken;

use crate::db::{AuthMethod, ClientRec, ClientUris, Db, TlsIdentity, UserRec};
use crate::http::unix_now;
use crate::keys::{KeyError, Keys, PublishedKey};

/// The longest client id tokend creates.
pub const MAX_CLIENT_ID: usize = 64;
/// The longest client name, in characters.
pub const MAX_NAME: usize = 256;
/// The most scopes, audiences or grant types one client may have.
pub const MAX_LIST: usize = 256;
/// The longest scope or audience, in bytes.
pub const MAX_ITEM: usize = 1024;
/// The largest JWKS document, in bytes.
pub const MAX_JWKS: usize = 64 * 1024;
/// Random bytes in a client_secret_basic/post secret: 256 bits.
pub const SECRET_BYTES: usize = 32;
/// Random bytes in a client_secret_jwt secret: 512 bits, so that its UTF-8
/// octets (the MAC key, OIDC Core §10.1) are long enough for HS512 as well
/// (RFC 7518 §3.2: at least the hash's size).
pub const MAC_SECRET_BYTES: usize = 64;
/// The grant types a client may be registered for.
pub const GRANT_TYPES: [&str; 6] = crate::grants::GRANT_TYPES;
/// The grant types of a client registered without any.
pub const DEFAULT_GRANT_TYPE: &str = "client_credentials";
/// The grant type that sends a browser to a redirect URI.
pub const AUTHORIZATION_CODE: &str = "authorization_code";
/// The most redirect URIs (and, separately, post-logout redirect URIs) of one client.
pub const MAX_URIS: usize = 16;
/// The longest redirect URI, in bytes.
pub const MAX_URI: usize = 1024;
/// The longest email address, in bytes (RFC 5321 §4.5.3.1.3's path, less its brackets).
pub const MAX_EMAIL: usize = 254;
/// The longest group name, in bytes.
pub const MAX_GROUP: usize = 64;
/// The shortest password, in bytes.
pub const MIN_PASSWORD: usize = 8;

/// Who may use the admin interface; replaced on SIGHUP.
pub type Admins = signet_runtime::principals::Admins<crate::config::Config>;

/// Serves the admin interface on `listener` until `shutdown`. Runs on a
/// `LocalSet` (see `signet_runtime::service_thread`): capnp-rpc is `!Send`.
pub async fn serve(
    listener: tokio::net::UnixListener,
    db: Db,
    keys: Arc<Keys>,
    admins: Arc<Admins>,
    shutdown: CancellationToken,
) {
    let service = Rc::new(Service { db, keys, admins, started: Instant::now() });
    serve_tokend(listener, service, ServeOptions::default(), shutdown).await;
}

struct Service {
    db: Db,
    keys: Arc<Keys>,
    admins: Arc<Admins>,
    started: Instant,
}

impl TokendService for Service {
    fn session(&self, peer: PeerCredentials) -> Rc<dyn TokendSession> {
        Rc::new(Session {
            db: self.db.clone(),
            keys: self.keys.clone(),
            admins: self.admins.clone(),
            started: self.started,
            groups: supplementary_groups(peer.uid),
            peer,
        })
    }
}

struct Session {
    db: Db,
    keys: Arc<Keys>,
    admins: Arc<Admins>,
    started: Instant,
    peer: PeerCredentials,
    groups: Vec<u32>,
}

impl TokendSession for Session {
    fn health(&self) -> TokendHealth {
        let clients = self.db.store.read(|t| t.len(&self.db.clients));
        TokendHealth {
            ok: clients.is_ok(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_secs: self.started.elapsed().as_secs(),
            clients: clients.unwrap_or(0),
            signing_key: self.keys.view().signer.as_ref().map(|(kid, _)| kid.clone()).unwrap_or_default(),
        }
    }

    fn admin(&self) -> LocalResult<Rc<dyn TokendAdminService>> {
        let admin = Admin {
            db: self.db.clone(),
            keys: self.keys.clone(),
            admins: self.admins.clone(),
            peer: self.peer,
            groups: self.groups.clone(),
        };
        let outcome = admin.check().map(|()| Rc::new(admin) as Rc<dyn TokendAdminService>);
        futures::future::ready(outcome).boxed_local()
    }
}

/// The admin capability of one connection.
struct Admin {
    db: Db,
    keys: Arc<Keys>,
    admins: Arc<Admins>,
    peer: PeerCredentials,
    groups: Vec<u32>,
}

impl Admin {
    /// Whether the caller is (still) an admin.
    fn check(&self) -> Result<(), IpcError> {
        if self.admins.admits(self.peer.uid, self.peer.gid, &self.groups) {
            return Ok(());
        }
        tracing::warn!(uid = self.peer.uid, gid = self.peer.gid, pid = self.peer.pid, "admin refused");
        Err(IpcError::new(
            ErrorKind::PermissionDenied,
            format!("uid {} is not among tokend's [admin] users and groups", self.peer.uid),
        ))
    }

    /// Checks the caller, then runs `f` (an LMDB transaction, quick) here.
    fn run<T: 'static>(&self, f: impl FnOnce(&Self) -> Result<T, IpcError>) -> LocalResult<T> {
        futures::future::ready(self.check().and_then(|()| f(self))).boxed_local()
    }
}

impl TokendAdminService for Admin {
    fn client_create(&self, client: OauthClient) -> LocalResult<OauthClient> {
        self.run(|me| {
            let (id, rec, uris, secret, tls) = create_client(&me.db, &client, unix_now())?;
            tracing::info!(uid = me.peer.uid, client_id = %id, auth_method = rec.auth_method.name(), "client created");
            Ok(OauthClient { secret: secret.unwrap_or_default(), ..shown(id, &rec, &uris, tls.as_ref()) })
        })
    }

    fn client_list(&self) -> LocalResult<Vec<OauthClient>> {
        self.run(|me| {
            Ok(list_clients(&me.db)?
                .into_iter()
                .map(|(id, rec, uris, tls)| shown(id, &rec, &uris, tls.as_ref()))
                .collect())
        })
    }

    fn client_show(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let (rec, uris, tls) = show_client(&me.db, &client_id)?;
            Ok(shown(client_id, &rec, &uris, tls.as_ref()))
        })
    }

    fn client_delete(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let (rec, uris, tls) = delete_client(&me.db, &client_id).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, client_id = %client_id, error = %e, "client not deleted");
            })?;
            tracing::info!(uid = me.peer.uid, client_id = %client_id, "client deleted");
            Ok(shown(client_id, &rec, &uris, tls.as_ref()))
        })
    }

    fn client_rotate_secret(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let (rec, uris, secret) = rotate_secret(&me.db, &client_id, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, client_id = %client_id, error = %e, "client secret not rotated");
            })?;
            tracing::info!(uid = me.peer.uid, client_id = %client_id, "client secret rotated");
            // A client with a secret has no certificate identity.
            Ok(OauthClient { secret, ..shown(client_id, &rec, &uris, None) })
        })
    }

    fn key_list(&self) -> LocalResult<Vec<TokenKey>> {
        self.run(|me| Ok(me.keys.view().published.iter().map(token_key).collect()))
    }

    fn key_refresh(&self) -> LocalResult<Vec<TokenKey>> {
        if let Err(e) = self.check() {
            return futures::future::ready(Err(e)).boxed_local();
        }
        let (keys, uid) = (self.keys.clone(), self.peer.uid);
        async move {
            let view = keys.refresh(unix_now()).await.map_err(|e| {
                tracing::warn!(uid, error = %e, "key refresh failed");
                key_error(e)
            })?;
            tracing::info!(uid, keys = view.published.len(), "keys refreshed");
            Ok(view.published.iter().map(token_key).collect())
        }
        .boxed_local()
    }

    fn user_create(&self, user: OauthUser) -> LocalResult<OauthUser> {
        // argon2id takes tens of milliseconds: on this (admin) thread, which
        // serves nothing else.
        self.run(|me| {
            let rec = create_user(&me.db, &user, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, user = %user.user_name, error = %e, "user not created");
            })?;
            tracing::info!(uid = me.peer.uid, user = %user.user_name, "user created");
            Ok(shown_user(user.user_name.clone(), &rec))
        })
    }

    fn user_list(&self) -> LocalResult<Vec<OauthUser>> {
        self.run(|me| Ok(list_users(&me.db)?.into_iter().map(|(name, rec)| shown_user(name, &rec)).collect()))
    }

    fn user_show(&self, user_name: String) -> LocalResult<OauthUser> {
        self.run(|me| {
            let rec = show_user(&me.db, &user_name)?;
            Ok(shown_user(user_name, &rec))
        })
    }

    fn user_delete(&self, user_name: String) -> LocalResult<OauthUser> {
        self.run(|me| {
            let (rec, ended) = delete_user(&me.db, &user_name, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, user = %user_name, error = %e, "user not deleted");
            })?;
            tracing::info!(uid = me.peer.uid, user = %user_name, sessions = ended.sessions,
                families = ended.families, "user deleted");
            Ok(shown_user(user_name, &rec))
        })
    }

    fn user_set_password(&self, user_name: String, password: String) -> LocalResult<OauthUser> {
        self.run(|me| {
            let (rec, ended) = set_password(&me.db, &user_name, &password, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, user = %user_name, error = %e, "password not set");
            })?;
            tracing::info!(uid = me.peer.uid, user = %user_name, sessions = ended.sessions,
                families = ended.families, "password set");
            Ok(shown_user(user_name, &rec))
        })
    }

    fn user_set_disabled(&self, user_name: String, disabled: bool) -> LocalResult<OauthUser> {
        self.run(|me| {
            let (rec, ended) = set_disabled(&me.db, &user_name, disabled, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, user = %user_name, disabled, error = %e, "user not changed");
            })?;
            tracing::info!(uid = me.peer.uid, user = %user_name, disabled, sessions = ended.sessions,
                families = ended.families, "user {}", if disabled { "disabled" } else { "enabled" });
            Ok(shown_user(user_name, &rec))
        })
    }
}

// --- what the interface shows ----------------------------------------------------

/// A stored client as the interface shows it: never with its secret.
pub fn shown(client_id: String, rec: &ClientRec, uris: &ClientUris, tls: Option<&TlsIdentity>) -> OauthClient {
    let tls_field = |f: fn(&TlsIdentity) -> Option<&String>| tls.and_then(f).cloned().unwrap_or_default();
    OauthClient {
        tls_subject_dn: tls_field(|t| if let TlsIdentity::SubjectDn(v) = t { Some(v) } else { None }),
        tls_san_dns: tls_field(|t| if let TlsIdentity::SanDns(v) = t { Some(v) } else { None }),
        tls_san_uri: tls_field(|t| if let TlsIdentity::SanUri(v) = t { Some(v) } else { None }),
        tls_san_ip: tls_field(|t| if let TlsIdentity::SanIp(v) = t { Some(v) } else { None }),
        tls_san_email: tls_field(|t| if let TlsIdentity::SanEmail(v) = t { Some(v) } else { None }),
        client_id,
        name: rec.name.clone(),
        auth_method: rec.auth_method.name().into(),
        secret: String::new(),
        jwks: rec.jwks.clone().unwrap_or_default(),
        scopes: rec.scopes.clone(),
        audiences: rec.audiences.clone(),
        grant_types: rec.grant_types.clone(),
        created_unix_secs: unix_secs(rec.created),
        secret_set_unix_secs: if rec.auth_method.has_secret() { unix_secs(rec.secret_set) } else { 0 },
        redirect_uris: uris.redirect_uris.clone(),
        post_logout_redirect_uris: uris.post_logout_redirect_uris.clone(),
    }
}

/// A stored user as the interface shows it: never with its password (hash).
pub fn shown_user(user_name: String, rec: &UserRec) -> OauthUser {
    OauthUser {
        user_name,
        name: rec.name.clone().unwrap_or_default(),
        email: rec.email.clone().unwrap_or_default(),
        groups: rec.groups.clone(),
        password: String::new(),
        created_unix_secs: unix_secs(rec.created),
        password_set_unix_secs: unix_secs(rec.password_set),
        disabled: rec.disabled,
    }
}

/// A published key as the interface shows it.
pub fn token_key(k: &PublishedKey) -> TokenKey {
    TokenKey {
        key_id: k.kid.clone(),
        alg: k.alg.name().into(),
        first_seen_unix_secs: unix_secs(k.first_seen),
        superseded_unix_secs: k.superseded.map_or(0, unix_secs),
        signing: k.signing,
    }
}

fn unix_secs(secs: u64) -> i64 {
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// A refresh's failure as the caller sees it: signd out of reach is
/// `unavailable` (try again); anything else signd says is a precondition
/// (tokend's role in signd), the rest internal.
pub fn key_error(e: KeyError) -> IpcError {
    match e {
        KeyError::Signd(e) if e.kind.is_transient() => {
            IpcError::new(ErrorKind::Unavailable, format!("signd is unreachable: {}", e.detail))
        }
        KeyError::Signd(e) => {
            IpcError::new(ErrorKind::FailedPrecondition, format!("signd refused tokend's key list: {e}"))
        }
        KeyError::Store(e) => store_error("recording the keys", e),
        e @ KeyError::Key { .. } => IpcError::internal(e.to_string()),
    }
}

// --- the checks (pure) -------------------------------------------------------------

/// A client to register, checked: everything but its id and secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewClient {
    /// The display name.
    pub name: String,
    /// How it authenticates.
    pub auth_method: AuthMethod,
    /// Its JWKS (private_key_jwt only).
    pub jwks: Option<String>,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// Its audiences (at least one).
    pub audiences: Vec<String>,
    /// Its grant types (at least one).
    pub grant_types: Vec<String>,
    /// Its redirect URIs.
    pub redirect_uris: Vec<String>,
    /// Its post-logout redirect URIs.
    pub post_logout_redirect_uris: Vec<String>,
    /// What its certificate holds (tls_client_auth only).
    pub tls: Option<TlsIdentity>,
}

/// Checks what an operator asked to register (not the id: see
/// [`check_new_client_id`]); empty grant types become [`DEFAULT_GRANT_TYPE`].
/// A secret sent along is refused: tokend makes every secret.
pub fn check_new_client(c: &OauthClient) -> Result<NewClient, IpcError> {
    check_name(&c.name)?;
    let auth_method = check_auth_method(&c.auth_method)?;
    if !c.secret.is_empty() {
        return Err(IpcError::invalid("a client secret is not given but made by tokend (256 random bits)"));
    }
    let jwks = check_jwks(auth_method, &c.jwks)?;
    let tls = check_tls_identity(auth_method, c)?;
    check_scopes(&c.scopes)?;
    check_audiences(&c.audiences)?;
    let grant_types = check_grant_types(auth_method, &c.grant_types)?;
    let ClientUris { redirect_uris, post_logout_redirect_uris } =
        check_client_uris(&grant_types, &c.redirect_uris, &c.post_logout_redirect_uris)?;
    Ok(NewClient {
        name: c.name.clone(),
        auth_method,
        jwks,
        scopes: c.scopes.clone(),
        audiences: c.audiences.clone(),
        grant_types,
        redirect_uris,
        post_logout_redirect_uris,
        tls,
    })
}

/// tls_client_auth's certificate identity (RFC 8705 §2.1.2): exactly one of
/// the five `tls_*` fields, checked by [`crate::mtls::check_identity`]; the
/// other methods take none.
pub fn check_tls_identity(method: AuthMethod, c: &OauthClient) -> Result<Option<TlsIdentity>, IpcError> {
    let given: Vec<TlsIdentity> = [
        (&c.tls_subject_dn, TlsIdentity::SubjectDn as fn(String) -> TlsIdentity),
        (&c.tls_san_dns, TlsIdentity::SanDns),
        (&c.tls_san_uri, TlsIdentity::SanUri),
        (&c.tls_san_ip, TlsIdentity::SanIp),
        (&c.tls_san_email, TlsIdentity::SanEmail),
    ]
    .into_iter()
    .filter(|(v, _)| !v.is_empty())
    .map(|(v, make)| make(v.clone()))
    .collect();
    if method != AuthMethod::TlsClientAuth {
        if !given.is_empty() {
            return Err(IpcError::invalid(format!(
                "a {} client has no certificate subject DN or SAN (tls_client_auth only)",
                method.name()
            )));
        }
        return Ok(None);
    }
    let [one] = <[TlsIdentity; 1]>::try_from(given).map_err(|_| {
        IpcError::invalid(
            "a tls_client_auth client names exactly one of its certificate's subject DN, SAN DNS name, URI, IP \
             address or email (RFC 8705 §2.1.2)",
        )
    })?;
    crate::mtls::check_identity(one).map(Some).map_err(|e| IpcError::invalid(format!("tls_client_auth: {e}")))
}

/// A client id tokend creates: 1 to [`MAX_CLIENT_ID`] of `A-Z a-z 0-9 . _ -`,
/// starting with a letter or digit (an id starting with `-` would read as an
/// option to signetctl and curl).
pub fn check_new_client_id(id: &str) -> Result<(), IpcError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let ok_first = id.starts_with(|c: char| c.is_ascii_alphanumeric());
    if !ok_first || id.len() > MAX_CLIENT_ID || !id.chars().all(ok_char) {
        return Err(IpcError::invalid(format!(
            "client id {id:?}: 1 to {MAX_CLIENT_ID} of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )));
    }
    Ok(())
}

/// A display name: at most [`MAX_NAME`] characters, none of them control characters.
pub fn check_name(name: &str) -> Result<(), IpcError> {
    check_display_name("client", name)
}

fn check_display_name(of: &str, name: &str) -> Result<(), IpcError> {
    if name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(IpcError::invalid(format!(
            "a {of} name has at most {MAX_NAME} characters and no control characters"
        )));
    }
    Ok(())
}

/// One of the registered method names (RFC 8414).
pub fn check_auth_method(name: &str) -> Result<AuthMethod, IpcError> {
    AuthMethod::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = AuthMethod::ALL.iter().map(|m| m.name()).collect();
        IpcError::invalid(format!("auth method {name:?} is not one of {}", names.join(", ")))
    })
}

/// The JWKS a client registers: a JSON object `{"keys": [...]}` with at least
/// one key (an object), or its URL (`jwks_uri`), for private_key_jwt (tokend
/// checks each JWK when it verifies an assertion) and
/// self_signed_tls_client_auth (its certificates' keys); nothing for the other
/// methods.
pub fn check_jwks(method: AuthMethod, jwks: &str) -> Result<Option<String>, IpcError> {
    let self_signed = method == AuthMethod::SelfSignedTlsClientAuth;
    if method != AuthMethod::PrivateKeyJwt && !self_signed {
        if !jwks.is_empty() {
            return Err(IpcError::invalid(format!("a {} client has no JWKS", method.name())));
        }
        return Ok(None);
    }
    if jwks.is_empty() {
        return Err(IpcError::invalid(format!(
            "a {} client needs its JWKS (the public keys it {})",
            method.name(),
            if self_signed { "holds certificates for" } else { "signs with" }
        )));
    }
    if crate::remote::is_uri(jwks) {
        // By URL (jwks_uri): https, or http only on a loopback host; fetched when used.
        let url = url::Url::parse(jwks).map_err(|e| IpcError::invalid(format!("jwks_uri: {e}")))?;
        let loopback = matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"));
        if jwks.len() > MAX_ITEM || url.fragment().is_some() || !(url.scheme() == "https" || loopback) {
            return Err(IpcError::invalid(
                "jwks_uri: an https URL (http only on a loopback host), without fragment, at most 1024 bytes",
            ));
        }
        return Ok(Some(jwks.to_owned()));
    }
    if jwks.len() > MAX_JWKS {
        return Err(IpcError::invalid(format!("the JWKS is over {MAX_JWKS} bytes")));
    }
    let doc: serde_json::Value = serde_json::from_str(jwks).map_err(|e| IpcError::invalid(format!("JWKS: {e}")))?;
    let keys = doc
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| IpcError::invalid("the JWKS is not a JSON object with a \"keys\" array (RFC 7517 §5)"))?;
    if keys.is_empty() {
        return Err(IpcError::invalid("the JWKS has no keys"));
    }
    if !keys.iter().all(serde_json::Value::is_object) {
        return Err(IpcError::invalid("every entry of the JWKS's \"keys\" must be a JSON object (a JWK)"));
    }
    Ok(Some(jwks.to_owned()))
}

/// Scopes: each 1 to [`MAX_ITEM`] characters of RFC 6749 §3.3's
/// `NQCHAR` (printable ASCII but space, `"` and `\`), no repeats.
pub fn check_scopes(scopes: &[String]) -> Result<(), IpcError> {
    check_list("scopes", scopes)?;
    for s in scopes {
        let ok = |b: u8| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b);
        if s.is_empty() || s.len() > MAX_ITEM || !s.bytes().all(ok) {
            return Err(IpcError::invalid(format!(
                "scope {s:?}: 1 to {MAX_ITEM} printable ASCII characters other than space, '\"' and '\\' (RFC 6749 §3.3)"
            )));
        }
    }
    Ok(())
}

/// Audiences: at least one; each an absolute URI without a fragment (RFC
/// 8707 §2), or a plain name of URI-unreserved characters (`A-Z a-z 0-9 . _ ~ -`).
pub fn check_audiences(audiences: &[String]) -> Result<(), IpcError> {
    if audiences.is_empty() {
        return Err(IpcError::invalid(
            "a client needs at least one audience (the resource servers its tokens are for; the first is the default)",
        ));
    }
    check_list("audiences", audiences)?;
    for a in audiences {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-');
        let ok = if a.contains(':') {
            url::Url::parse(a).is_ok_and(|u| u.fragment().is_none()) && !a.chars().any(|c| c.is_whitespace())
        } else {
            !a.is_empty() && a.chars().all(plain)
        };
        if !ok || a.len() > MAX_ITEM {
            return Err(IpcError::invalid(format!(
                "audience {a:?}: an absolute URI without a fragment (RFC 8707 §2), or a name of A-Z a-z 0-9 . _ ~ -, \
                 up to {MAX_ITEM} bytes"
            )));
        }
    }
    Ok(())
}

/// Grant types: each one of [`GRANT_TYPES`], no repeats; none given:
/// [`DEFAULT_GRANT_TYPE`]. A public client (`none`) cannot use
/// client_credentials (RFC 6749 §4.4: confidential clients only); it may use
/// the others (authorization_code with PKCE, refresh_token, device_code).
pub fn check_grant_types(method: AuthMethod, grant_types: &[String]) -> Result<Vec<String>, IpcError> {
    let grant_types = if grant_types.is_empty() { vec![DEFAULT_GRANT_TYPE.to_owned()] } else { grant_types.to_vec() };
    check_list("grant types", &grant_types)?;
    if let Some(g) = grant_types.iter().find(|g| !GRANT_TYPES.contains(&g.as_str())) {
        return Err(IpcError::invalid(format!("grant type {g:?} is not one of {}", GRANT_TYPES.join(", "))));
    }
    if method == AuthMethod::None && grant_types.iter().any(|g| g == "client_credentials") {
        return Err(IpcError::invalid(
            "a public client (auth method none) cannot use client_credentials (RFC 6749 §4.4); name its grant types",
        ));
    }
    Ok(grant_types)
}

/// A client's redirect URIs and post-logout redirect URIs: each list at most
/// [`MAX_URIS`], no repeats, each URI as [`check_redirect_uri`]. A client with
/// the authorization_code grant needs at least one redirect URI; a client
/// without it has neither kind (nothing would send a browser to them).
pub fn check_client_uris(
    grant_types: &[String],
    redirect_uris: &[String],
    post_logout_redirect_uris: &[String],
) -> Result<ClientUris, IpcError> {
    for (what, uris) in [("redirect URIs", redirect_uris), ("post-logout redirect URIs", post_logout_redirect_uris)] {
        if uris.len() > MAX_URIS {
            return Err(IpcError::invalid(format!("at most {MAX_URIS} {what}")));
        }
        check_list(what, uris)?;
        for u in uris {
            check_redirect_uri(u)?;
        }
    }
    let code = grant_types.iter().any(|g| g == AUTHORIZATION_CODE);
    if code && redirect_uris.is_empty() {
        return Err(IpcError::invalid(
            "a client with the authorization_code grant needs at least one redirect URI (RFC 9700 §2.1)",
        ));
    }
    let any_uri = !redirect_uris.is_empty() || !post_logout_redirect_uris.is_empty();
    if !code && any_uri {
        return Err(IpcError::invalid(
            "only a client with the authorization_code grant has redirect or post-logout redirect URIs",
        ));
    }
    Ok(ClientUris {
        redirect_uris: redirect_uris.to_vec(),
        post_logout_redirect_uris: post_logout_redirect_uris.to_vec(),
    })
}

/// A redirect URI (or post-logout redirect URI), up to [`MAX_URI`] bytes: an
/// absolute URI without a fragment (RFC 6749 §3.1.2) and without whitespace,
/// that is `https` with a host; `http` only on a loopback host (`127.0.0.1`,
/// `[::1]`, `localhost`: RFC 8252 §7.3, §8.3); or a private-use scheme, a
/// reverse domain name such as `com.example.app:/cb` (RFC 8252 §7.1), for
/// native apps.
pub fn check_redirect_uri(uri: &str) -> Result<(), IpcError> {
    let bad = |why: &str| {
        IpcError::invalid(format!(
            "redirect URI {uri:?}: {why} (an absolute https URI, http on 127.0.0.1, [::1] or localhost, or a              private-use scheme such as com.example.app:/cb; no fragment; up to {MAX_URI} bytes)"
        ))
    };
    if uri.len() > MAX_URI {
        return Err(bad("too long"));
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("whitespace or a control character"));
    }
    if uri.contains('#') {
        return Err(bad("a fragment"));
    }
    let u = url::Url::parse(uri).map_err(|e| bad(&format!("not an absolute URI ({e})")))?;
    // The parser would read `https:/cb` as `https://cb/`; the URI is compared as written.
    let authority = uri.get(u.scheme().len()..).is_some_and(|rest| rest.starts_with("://"));
    if matches!(u.scheme(), "https" | "http") && !authority {
        return Err(bad("no authority (scheme://host)"));
    }
    match u.scheme() {
        "https" => {
            if u.host().is_none() {
                return Err(bad("no host"));
            }
        }
        "http" => {
            let loopback = match u.host() {
                Some(url::Host::Ipv4(a)) => a == std::net::Ipv4Addr::LOCALHOST,
                Some(url::Host::Ipv6(a)) => a == std::net::Ipv6Addr::LOCALHOST,
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                None => false,
            };
            if !loopback {
                return Err(bad("http only on a loopback host"));
            }
        }
        // RFC 8252 §7.1: a reverse domain name the app controls; with a
        // period, so that no common scheme (javascript:, data:, file:) passes.
        scheme if scheme.contains('.') => {}
        _ => return Err(bad("not https, loopback http or a private-use scheme")),
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad("user information"));
    }
    Ok(())
}

// --- the checks of users (pure) ------------------------------------------------------

/// A user to create, checked: its password already hashed is not here (see
/// [`create_user`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewUser {
    /// The display name, if any.
    pub name: Option<String>,
    /// The email address, if any.
    pub email: Option<String>,
    /// Its groups.
    pub groups: Vec<String>,
}

/// Checks a user an operator asked to create: the name
/// ([`crate::users::valid_name`]), display name, email, groups and password.
pub fn check_new_user(u: &OauthUser) -> Result<NewUser, IpcError> {
    check_user_name(&u.user_name)?;
    check_display_name("user's display", &u.name)?;
    check_email(&u.email)?;
    check_groups(&u.groups)?;
    check_password(&u.password)?;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Ok(NewUser { name: some(&u.name), email: some(&u.email), groups: u.groups.clone() })
}

/// A user name: 1 to 64 of `A-Z a-z 0-9 . _ @ -`, not starting with `-`.
pub fn check_user_name(name: &str) -> Result<(), IpcError> {
    if !crate::users::valid_name(name) {
        return Err(IpcError::invalid(format!(
            "user name {name:?}: 1 to 64 of A-Z a-z 0-9 . _ @ -, not starting with '-'"
        )));
    }
    Ok(())
}

/// An email address, or none (empty): one `@` with something on both sides,
/// no whitespace or control characters, at most [`MAX_EMAIL`] bytes.
pub fn check_email(email: &str) -> Result<(), IpcError> {
    if email.is_empty() {
        return Ok(());
    }
    let parts = email.split_once('@');
    let ok = email.len() <= MAX_EMAIL
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && parts.is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'));
    if !ok {
        return Err(IpcError::invalid(format!(
            "email {email:?}: one '@' between a local part and a domain, no spaces, up to {MAX_EMAIL} bytes"
        )));
    }
    Ok(())
}

/// Groups: each 1 to [`MAX_GROUP`] of `A-Z a-z 0-9 . _ -`, no repeats.
pub fn check_groups(groups: &[String]) -> Result<(), IpcError> {
    check_list("groups", groups)?;
    for g in groups {
        let ok_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        if g.is_empty() || g.len() > MAX_GROUP || !g.bytes().all(ok_char) {
            return Err(IpcError::invalid(format!("group {g:?}: 1 to {MAX_GROUP} of A-Z a-z 0-9 . _ -")));
        }
    }
    Ok(())
}

/// A password: [`MIN_PASSWORD`] to [`crate::users::MAX_PASSWORD`] bytes. The
/// error never repeats it.
pub fn check_password(password: &str) -> Result<(), IpcError> {
    let max = crate::users::MAX_PASSWORD;
    if !(MIN_PASSWORD..=max).contains(&password.len()) {
        return Err(IpcError::invalid(format!("a password has {MIN_PASSWORD} to {max} bytes")));
    }
    Ok(())
}

fn check_list(what: &str, items: &[String]) -> Result<(), IpcError> {
    if items.len() > MAX_LIST {
        return Err(IpcError::invalid(format!("at most {MAX_LIST} {what}")));
    }
    if let Some((_, dup)) = items.iter().enumerate().find(|(i, s)| items[..*i].contains(s)) {
        return Err(IpcError::invalid(format!("{what}: {dup:?} is named twice")));
    }
    Ok(())
}

/// A client id to look up: any client put in the store before this interface
/// existed must stay reachable, so only emptiness and length are checked.
fn check_lookup_client_id(id: &str) -> Result<(), IpcError> {
    if id.is_empty() || id.len() > 4 * MAX_CLIENT_ID {
        return Err(IpcError::invalid(format!("client id {id:?}: 1 to {} bytes", 4 * MAX_CLIENT_ID)));
    }
    Ok(())
}

// --- secrets --------------------------------------------------------------------

/// `n` random bytes (OpenSSL's DRBG) whose base64url form starts with a letter
/// or digit, so that it can follow a command-line flag as a separate
/// argument. Redrawing when the first character would be `-` or `_` costs
/// 0.05 bits of the 8·`n`.
fn random_for_command_lines(n: usize) -> Result<Vec<u8>, IpcError> {
    let mut bytes = vec![0u8; n.max(1)];
    loop {
        openssl::rand::rand_bytes(&mut bytes).map_err(|e| IpcError::internal(format!("random bytes: {e}")))?;
        // The first base64 character is the top six bits of the first byte:
        // 62 is '-', 63 is '_'.
        if bytes[0] >> 2 < 62 {
            return Ok(bytes);
        }
    }
}

/// A new client secret and what the record keeps of it. No `Debug`: it is
/// never logged.
pub struct Secret {
    /// The secret, given to the operator once.
    pub text: String,
    /// Its SHA-256 (client_secret_basic/post).
    pub sha256: Option<[u8; 32]>,
    /// The secret itself, the MAC key of client_secret_jwt assertions.
    pub mac_key: Option<String>,
}

/// A new secret for a client of `method`; `None` for a method without one.
pub fn new_secret(method: AuthMethod) -> Result<Option<Secret>, IpcError> {
    Ok(match method {
        AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost => {
            let text = URL_SAFE_NO_PAD.encode(random_for_command_lines(SECRET_BYTES)?);
            Some(Secret { sha256: Some(sha256(text.as_bytes())), mac_key: None, text })
        }
        AuthMethod::ClientSecretJwt => {
            let text = URL_SAFE_NO_PAD.encode(random_for_command_lines(MAC_SECRET_BYTES)?);
            Some(Secret { sha256: None, mac_key: Some(text.clone()), text })
        }
        AuthMethod::PrivateKeyJwt
        | AuthMethod::TlsClientAuth
        | AuthMethod::SelfSignedTlsClientAuth
        | AuthMethod::None => None,
    })
}

// --- the store operations ----------------------------------------------------------

fn store_error(what: &str, e: StoreError) -> IpcError {
    if let Some(state) = e.refuses_writes() {
        // Logged once, by the store's SpaceWatch.
        return IpcError::new(ErrorKind::Unavailable, format!("{what}: tokend's storage {state}; try again later"));
    }
    tracing::error!(error = %e, "{what}");
    IpcError::internal(format!("{what}: {e}"))
}

fn not_found(client_id: &str) -> IpcError {
    IpcError::new(ErrorKind::NotFound, format!("no client with id {client_id:?}"))
}

fn no_user(user_name: &str) -> IpcError {
    IpcError::new(ErrorKind::NotFound, format!("no user named {user_name:?}"))
}

/// A client created: its id, record, URIs, secret (if its method has one) and
/// certificate identity (tls_client_auth).
pub type Created = (String, ClientRec, ClientUris, Option<String>, Option<TlsIdentity>);

/// Registers `c` (its id empty: a random one of 16 bytes, base64url) at
/// `now`, with its URIs (`client_uris`, in the same transaction); committed
/// when this returns. Answers the id, the record, the URIs and the secret, if
/// the method has one.
pub fn create_client(db: &Db, c: &OauthClient, now: u64) -> Result<Created, IpcError> {
    let id = if c.client_id.is_empty() {
        URL_SAFE_NO_PAD.encode(random_for_command_lines(16)?)
    } else {
        c.client_id.clone()
    };
    check_new_client_id(&id)?;
    let new = check_new_client(c)?;
    let secret = new_secret(new.auth_method)?;
    let uris =
        ClientUris { redirect_uris: new.redirect_uris, post_logout_redirect_uris: new.post_logout_redirect_uris };
    let rec = ClientRec {
        name: new.name,
        auth_method: new.auth_method,
        secret_sha256: secret.as_ref().and_then(|s| s.sha256),
        mac_key: secret.as_ref().and_then(|s| s.mac_key.clone()),
        jwks: new.jwks,
        scopes: new.scopes,
        audiences: new.audiences,
        grant_types: new.grant_types,
        created: now,
        secret_set: if secret.is_some() { now } else { 0 },
    };
    let tls = new.tls;
    let inserted = db
        .write(|t| -> Result<bool, StoreError> {
            if t.get(&db.clients, &id)?.is_some() {
                return Ok(false);
            }
            t.put(&db.clients, &id, &rec)?;
            match &tls {
                Some(identity) => t.put(&db.client_tls, &id, identity)?,
                None => {
                    t.delete(&db.client_tls, &id)?;
                }
            }
            // A stale record of a deleted client's id goes either way.
            if uris.redirect_uris.is_empty() && uris.post_logout_redirect_uris.is_empty() {
                t.delete(&db.client_uris, &id)?;
            } else {
                t.put(&db.client_uris, &id, &uris)?;
            }
            Ok(true)
        })
        .map_err(|e| store_error("storing the client", e))?;
    if !inserted {
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("a client with id {id:?} exists")));
    }
    Ok((id, rec, uris, secret.map(|s| s.text), tls))
}

/// A stored client: its record, URIs and certificate identity.
pub type Stored = (ClientRec, ClientUris, Option<TlsIdentity>);

/// A stored client with its id.
pub type Listed = (String, ClientRec, ClientUris, Option<TlsIdentity>);

/// Every client with its URIs and certificate identity, ordered by id.
pub fn list_clients(db: &Db) -> Result<Vec<Listed>, IpcError> {
    db.store
        .read(|t| {
            let clients = t.range(&db.clients, None, usize::MAX)?;
            let mut uris: std::collections::HashMap<String, ClientUris> =
                t.range(&db.client_uris, None, usize::MAX)?.into_iter().collect();
            let mut tls: std::collections::HashMap<String, TlsIdentity> =
                t.range(&db.client_tls, None, usize::MAX)?.into_iter().collect();
            Ok(clients
                .into_iter()
                .map(|(id, rec)| {
                    let u = uris.remove(&id).unwrap_or_default();
                    let c = tls.remove(&id);
                    (id, rec, u, c)
                })
                .collect())
        })
        .map_err(|e| store_error("reading clients", e))
}

/// One client, its URIs and certificate identity.
pub fn show_client(db: &Db, client_id: &str) -> Result<Stored, IpcError> {
    check_lookup_client_id(client_id)?;
    let id = client_id.to_owned();
    db.store
        .read(|t| {
            let Some(rec) = t.get(&db.clients, &id)? else {
                return Ok(None);
            };
            Ok(Some((rec, t.get(&db.client_uris, &id)?.unwrap_or_default(), t.get(&db.client_tls, &id)?)))
        })
        .map_err(|e| store_error("reading clients", e))?
        .ok_or_else(|| not_found(client_id))
}

/// Deletes a client and its URIs; committed when this returns. Tokens it was
/// issued stay valid until they expire (or are revoked).
pub fn delete_client(db: &Db, client_id: &str) -> Result<Stored, IpcError> {
    check_lookup_client_id(client_id)?;
    let id = client_id.to_owned();
    db.write(|t| -> Result<Result<Stored, IpcError>, StoreError> {
        let Some(rec) = t.get(&db.clients, &id)? else {
            return Ok(Err(not_found(client_id)));
        };
        let uris = t.get(&db.client_uris, &id)?.unwrap_or_default();
        let tls = t.get(&db.client_tls, &id)?;
        t.delete(&db.clients, &id)?;
        t.delete(&db.client_uris, &id)?;
        t.delete(&db.client_tls, &id)?;
        Ok(Ok((rec, uris, tls)))
    })
    .map_err(|e| store_error("deleting the client", e))?
}

/// Gives a client a new secret at `now` (the old one stops working when this
/// commits); answers the new record and the secret. Refused for methods
/// without a secret.
pub fn rotate_secret(db: &Db, client_id: &str, now: u64) -> Result<(ClientRec, ClientUris, String), IpcError> {
    check_lookup_client_id(client_id)?;
    let id = client_id.to_owned();
    db.write(|t| -> Result<Result<(ClientRec, ClientUris, String), IpcError>, StoreError> {
        let Some(mut rec) = t.get(&db.clients, &id)? else {
            return Ok(Err(not_found(client_id)));
        };
        let secret = match new_secret(rec.auth_method) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Ok(Err(IpcError::invalid(format!(
                    "client {client_id:?} authenticates with {}: it has no secret to rotate",
                    rec.auth_method.name()
                ))))
            }
            Err(e) => return Ok(Err(e)),
        };
        rec.secret_sha256 = secret.sha256;
        rec.mac_key = secret.mac_key;
        rec.secret_set = now;
        t.put(&db.clients, &id, &rec)?;
        let uris = t.get(&db.client_uris, &id)?.unwrap_or_default();
        Ok(Ok((rec, uris, secret.text)))
    })
    .map_err(|e| store_error("storing the client's secret", e))?
}

// --- users ---------------------------------------------------------------------------

/// What ending a user's grants ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// Sessions deleted.
    pub sessions: usize,
    /// Refresh-token families revoked.
    pub families: usize,
    /// Unredeemed authorization codes deleted.
    pub codes: usize,
}

/// Ends everything `user` is signed in with, in `t`: deletes its sessions and
/// unredeemed authorization codes, revokes its refresh-token families (as of
/// `now`) and the access tokens issued from them (`revoked`, until their `exp`).
pub fn end_user_grants(t: &mut WriteTxn<'_>, db: &Db, user: &str, now: u64) -> Result<Ended, StoreError> {
    let mut ended = Ended::default();
    let sessions: Vec<[u8; 32]> =
        t.range(&db.sessions, None, usize::MAX)?.into_iter().filter(|(_, s)| s.user == user).map(|(k, _)| k).collect();
    for k in sessions {
        ended.sessions += usize::from(t.delete(&db.sessions, &k)?);
    }
    let codes: Vec<[u8; 32]> = t
        .range(&db.codes, None, usize::MAX)?
        .into_iter()
        .filter(|(_, c)| c.user == user && c.redeemed.is_none())
        .map(|(k, _)| k)
        .collect();
    for k in codes {
        ended.codes += usize::from(t.delete(&db.codes, &k)?);
    }
    let families: Vec<[u8; 16]> = t
        .range(&db.families, None, usize::MAX)?
        .into_iter()
        .filter(|(_, f)| f.user == user && f.revoked.is_none())
        .map(|(k, _)| k)
        .collect();
    for id in families {
        crate::flows::revoke_family(t, &db.families, &db.revoked, &id, now)?;
        ended.families += 1;
    }
    Ok(ended)
}

/// Creates user `u` at `now` with its password hashed (argon2id; tens of
/// milliseconds, on the calling thread); committed when this returns.
pub fn create_user(db: &Db, u: &OauthUser, now: u64) -> Result<UserRec, IpcError> {
    let new = check_new_user(u)?;
    let password = crate::users::hash_password(&u.password).map_err(IpcError::invalid)?;
    let rec = UserRec {
        password,
        name: new.name,
        email: new.email,
        groups: new.groups,
        created: now,
        password_set: now,
        disabled: false,
    };
    let name = u.user_name.clone();
    let inserted = db
        .write(|t| -> Result<bool, StoreError> {
            if t.get(&db.users, &name)?.is_some() {
                return Ok(false);
            }
            t.put(&db.users, &name, &rec)?;
            Ok(true)
        })
        .map_err(|e| store_error("storing the user", e))?;
    if !inserted {
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("a user named {name:?} exists")));
    }
    Ok(rec)
}

/// Every user, ordered by name.
pub fn list_users(db: &Db) -> Result<Vec<(String, UserRec)>, IpcError> {
    db.store.read(|t| t.range(&db.users, None, usize::MAX)).map_err(|e| store_error("reading users", e))
}

/// One user.
pub fn show_user(db: &Db, user_name: &str) -> Result<UserRec, IpcError> {
    check_user_name(user_name)?;
    db.store
        .read(|t| t.get(&db.users, &user_name.to_owned()))
        .map_err(|e| store_error("reading users", e))?
        .ok_or_else(|| no_user(user_name))
}

/// Changes user `user_name` with `change` in one transaction, and ends its
/// grants ([`end_user_grants`]) there too when `change` says so.
fn change_user(
    db: &Db,
    user_name: &str,
    now: u64,
    what: &str,
    change: impl FnOnce(&mut UserRec) -> bool,
) -> Result<(UserRec, Ended), IpcError> {
    check_user_name(user_name)?;
    let name = user_name.to_owned();
    db.write(|t| -> Result<Result<(UserRec, Ended), IpcError>, StoreError> {
        let Some(mut rec) = t.get(&db.users, &name)? else {
            return Ok(Err(no_user(user_name)));
        };
        let end = change(&mut rec);
        t.put(&db.users, &name, &rec)?;
        let ended = if end { end_user_grants(t, db, &name, now)? } else { Ended::default() };
        Ok(Ok((rec, ended)))
    })
    .map_err(|e| store_error(what, e))?
}

/// Deletes a user (and its consents), ending its grants in the same
/// transaction; answers it as it was.
pub fn delete_user(db: &Db, user_name: &str, now: u64) -> Result<(UserRec, Ended), IpcError> {
    check_user_name(user_name)?;
    let name = user_name.to_owned();
    db.write(|t| -> Result<Result<(UserRec, Ended), IpcError>, StoreError> {
        let Some(rec) = t.get(&db.users, &name)? else {
            return Ok(Err(no_user(user_name)));
        };
        t.delete(&db.users, &name)?;
        let ended = end_user_grants(t, db, &name, now)?;
        // Consents are keyed user ‖ 0 ‖ client: a user of the same name
        // created later starts without them.
        let prefix = crate::db::consent_key(&name, "");
        let consents: Vec<String> = t
            .range(&db.consents, Some(&prefix), usize::MAX)?
            .into_iter()
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .collect();
        for k in consents {
            t.delete(&db.consents, &k)?;
        }
        Ok(Ok((rec, ended)))
    })
    .map_err(|e| store_error("deleting the user", e))?
}

/// Replaces a user's password at `now` (hashed before the transaction), ending its grants.
pub fn set_password(db: &Db, user_name: &str, password: &str, now: u64) -> Result<(UserRec, Ended), IpcError> {
    check_user_name(user_name)?;
    check_password(password)?;
    let hash = crate::users::hash_password(password).map_err(IpcError::invalid)?;
    change_user(db, user_name, now, "storing the password", |rec| {
        rec.password = hash;
        rec.password_set = now;
        true
    })
}

/// Disables (ending its grants) or enables a user.
pub fn set_disabled(db: &Db, user_name: &str, disabled: bool, now: u64) -> Result<(UserRec, Ended), IpcError> {
    change_user(db, user_name, now, "storing the user", |rec| {
        rec.disabled = disabled;
        disabled
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn client(method: &str) -> OauthClient {
        OauthClient {
            client_id: "billing".into(),
            name: "Billing".into(),
            auth_method: method.into(),
            audiences: vec!["https://api.example.net".into()],
            scopes: vec!["read".into(), "write:all".into()],
            ..OauthClient::default()
        }
    }

    const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"x","y":"y"}]}"#;

    fn invalid<T: std::fmt::Debug>(r: Result<T, IpcError>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
        e.detail
    }

    #[test]
    fn ids_names_and_methods() {
        for good in ["a", "team-a.1_x", &"x".repeat(64)] {
            check_new_client_id(good).unwrap();
        }
        for bad in ["", "has space", "slash/", &"x".repeat(65), "-leading-dash", "_x", ".x", "é"] {
            invalid(check_new_client_id(bad));
        }
        check_name("").unwrap();
        check_name(&"é".repeat(MAX_NAME)).unwrap();
        invalid(check_name(&"é".repeat(MAX_NAME + 1)));
        invalid(check_name("two\nlines"));
        for m in AuthMethod::ALL {
            assert_eq!(check_auth_method(m.name()).unwrap(), m);
        }
        assert_eq!(check_auth_method("tls_client_auth").unwrap(), AuthMethod::TlsClientAuth);
        assert_eq!(check_auth_method("self_signed_tls_client_auth").unwrap(), AuthMethod::SelfSignedTlsClientAuth);
        assert!(invalid(check_auth_method("tls_client_auth_x")).contains("client_secret_basic"));
    }

    #[test]
    fn a_tls_client_auth_client_names_exactly_one_certificate_identity() {
        let tls = |f: fn(&mut OauthClient)| {
            let mut c = client("tls_client_auth");
            f(&mut c);
            c
        };
        let c = check_new_client(&tls(|c| c.tls_san_dns = "svc.example.net".into())).unwrap();
        assert_eq!(c.tls, Some(TlsIdentity::SanDns("svc.example.net".into())));
        let c = check_new_client(&tls(|c| c.tls_subject_dn = "CN=svc,O=Example".into())).unwrap();
        assert_eq!(c.tls, Some(TlsIdentity::SubjectDn("CN=svc,O=Example".into())));
        let c = check_new_client(&tls(|c| c.tls_san_ip = "2001:db8:0::7".into())).unwrap();
        assert_eq!(c.tls, Some(TlsIdentity::SanIp("2001:db8::7".into())));
        assert!(invalid(check_new_client(&tls(|_| {}))).contains("exactly one"));
        assert!(invalid(check_new_client(&tls(|c| {
            c.tls_san_dns = "a.example".into();
            c.tls_san_email = "a@example.net".into();
        })))
        .contains("exactly one"));
        invalid(check_new_client(&tls(|c| c.tls_subject_dn = "no dn".into())));
        invalid(check_new_client(&tls(|c| c.tls_san_ip = "not-an-ip".into())));
        invalid(check_new_client(&tls(|c| c.jwks = JWKS.into())));
        let basic = OauthClient { tls_san_dns: "svc.example.net".into(), ..client("client_secret_basic") };
        assert!(invalid(check_new_client(&basic)).contains("tls_client_auth only"));
        // self-signed: a JWKS document, no identity.
        let ss = OauthClient { jwks: JWKS.into(), ..client("self_signed_tls_client_auth") };
        assert_eq!(check_new_client(&ss).unwrap().tls, None);
        invalid(check_new_client(&client("self_signed_tls_client_auth")));
        let by_url = check_new_client(&OauthClient { jwks: "https://example.net/jwks".into(), ..ss.clone() });
        assert_eq!(by_url.unwrap().jwks.as_deref(), Some("https://example.net/jwks"), "a jwks_uri");
        invalid(check_new_client(&OauthClient { jwks: "http://example.net/jwks".into(), ..ss.clone() }));
        invalid(check_new_client(&OauthClient { tls_san_uri: "https://x.example".into(), ..ss }));
        // Stored beside the client, shown, deleted with it.
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let (id, rec, uris, secret, identity) =
            create_client(&db, &tls(|c| c.tls_san_uri = "spiffe://example.net/svc".into()), 100).unwrap();
        assert_eq!((secret, rec.secret_sha256), (None, None));
        let shown_c = shown(id.clone(), &rec, &uris, identity.as_ref());
        assert_eq!((shown_c.tls_san_uri.as_str(), shown_c.tls_san_dns.as_str()), ("spiffe://example.net/svc", ""));
        assert_eq!(show_client(&db, &id).unwrap().2, identity);
        assert_eq!(list_clients(&db).unwrap()[0].3, identity);
        assert!(invalid(rotate_secret(&db, &id, 101)).contains("no secret"));
        assert_eq!(delete_client(&db, &id).unwrap().2, identity);
        assert!(db.store.read(|t| t.get(&db.client_tls, &id)).unwrap().is_none());
    }

    #[test]
    fn the_defaults_and_what_each_method_takes() {
        let c = check_new_client(&client("client_secret_basic")).unwrap();
        assert_eq!(c.grant_types, vec![DEFAULT_GRANT_TYPE]);
        assert_eq!(c.jwks, None);
        // A secret is never given.
        invalid(check_new_client(&OauthClient { secret: "mine".into(), ..client("client_secret_post") }));
        // private_key_jwt: a JWKS with a key, and only there.
        invalid(check_new_client(&client("private_key_jwt")));
        let c = check_new_client(&OauthClient { jwks: JWKS.into(), ..client("private_key_jwt") }).unwrap();
        assert_eq!(c.jwks.as_deref(), Some(JWKS));
        invalid(check_new_client(&OauthClient { jwks: JWKS.into(), ..client("client_secret_jwt") }));
        for bad in ["", "[]", "{}", "{\"keys\":[]}", "{\"keys\":[1]}", "{\"keys\":{}}", "not json"] {
            invalid(check_jwks(AuthMethod::PrivateKeyJwt, bad));
        }
        // none: no client_credentials, so no default either.
        assert!(invalid(check_new_client(&client("none"))).contains("client_credentials"));
        // A public client may hold every grant but client_credentials.
        let public = OauthClient {
            grant_types: vec![
                "authorization_code".into(),
                "refresh_token".into(),
                "urn:ietf:params:oauth:grant-type:device_code".into(),
            ],
            redirect_uris: vec!["com.example.app:/cb".into(), "http://127.0.0.1/cb".into()],
            ..client("none")
        };
        let c = check_new_client(&public).unwrap();
        assert_eq!(c.grant_types.len(), 3);
        assert_eq!(c.redirect_uris, public.redirect_uris);
        let mixed =
            OauthClient { grant_types: vec!["authorization_code".into(), "client_credentials".into()], ..public };
        assert!(invalid(check_new_client(&mixed)).contains("client_credentials"));
    }

    #[test]
    fn redirect_uris() {
        for good in [
            "https://app.example.net/cb",
            "https://app.example.net:8443/cb?tenant=a",
            "http://127.0.0.1/cb",
            "http://127.0.0.1:51004/oauth2redirect",
            "http://[::1]:8080/cb",
            "http://localhost:3000/",
            "com.example.app:/oauth2redirect/example-provider",
            "net.example.app:/cb",
        ] {
            check_redirect_uri(good).unwrap();
        }
        for bad in [
            "",
            "/relative/cb",
            "app.example.net/cb",
            "https://app.example.net/cb#frag",
            "https://app.example.net/cb#",
            "http://app.example.net/cb",
            "http://10.0.0.1/cb",
            "http://127.0.0.2/cb",
            "http://localhost.example.net/cb",
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "myapp:/cb",
            "https://app.example.net/a b",
            "https://user:pw@app.example.net/cb",
            "https:/cb",
            "http:127.0.0.1/cb",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad} passed");
            invalid(check_redirect_uri(bad));
        }
        let long = format!("https://app.example.net/{}", "x".repeat(MAX_URI));
        assert!(invalid(check_redirect_uri(&long)).contains("too long"));
        check_redirect_uri(&long[..MAX_URI]).unwrap();

        let code = vec![AUTHORIZATION_CODE.to_owned()];
        let cc = vec![DEFAULT_GRANT_TYPE.to_owned()];
        let one = vec!["https://app.example.net/cb".to_owned()];
        let u = check_client_uris(&code, &one, &one).unwrap();
        assert_eq!((u.redirect_uris, u.post_logout_redirect_uris), (one.clone(), one.clone()));
        assert!(invalid(check_client_uris(&code, &[], &one)).contains("at least one redirect URI"));
        assert!(invalid(check_client_uris(&cc, &one, &[])).contains("only a client with"));
        assert!(invalid(check_client_uris(&cc, &[], &one)).contains("only a client with"));
        check_client_uris(&cc, &[], &[]).unwrap();
        let many: Vec<String> = (0..=MAX_URIS).map(|i| format!("https://app.example.net/{i}")).collect();
        check_client_uris(&code, &many[..MAX_URIS], &many[..MAX_URIS]).unwrap();
        assert!(invalid(check_client_uris(&code, &many, &[])).contains("at most 16"));
        assert!(invalid(check_client_uris(&code, &one, &many)).contains("at most 16"));
        invalid(check_client_uris(&code, &[one[0].clone(), one[0].clone()], &[]));
        invalid(check_client_uris(&code, &one, &["http://example.net/bye".into()]));
        // Through check_new_client: a code client without URIs is refused.
        let c = OauthClient { grant_types: code, ..client("client_secret_basic") };
        invalid(check_new_client(&c));
        check_new_client(&OauthClient { redirect_uris: one, ..c }).unwrap();
    }

    fn user(name: &str) -> OauthUser {
        OauthUser {
            user_name: name.into(),
            name: "Alice Smith".into(),
            email: "alice@example.net".into(),
            groups: vec!["admins".into(), "ops.team_1".into()],
            password: "correct horse".into(),
            ..OauthUser::default()
        }
    }

    #[test]
    fn user_checks() {
        let u = check_new_user(&user("alice")).unwrap();
        assert_eq!(u.name.as_deref(), Some("Alice Smith"));
        assert_eq!(u.email.as_deref(), Some("alice@example.net"));
        let bare = check_new_user(&OauthUser { name: String::new(), email: String::new(), ..user("bob") }).unwrap();
        assert_eq!((bare.name, bare.email), (None, None));
        for bad in ["", "-rf", "a b", "é", &"a".repeat(65)] {
            invalid(check_new_user(&user(bad)));
        }
        invalid(check_new_user(&OauthUser {
            name: "two
lines"
                .into(),
            ..user("alice")
        }));
        invalid(check_new_user(&OauthUser { name: "é".repeat(MAX_NAME + 1), ..user("alice") }));

        check_email("a.b+c@sub.example.net").unwrap();
        check_email(&format!("{}@example.net", "a".repeat(MAX_EMAIL - 12))).unwrap();
        for bad in [
            "alice",
            "@example.net",
            "alice@",
            "a@b@c",
            "alice @example.net",
            "alice@exa	mple.net",
            &format!("{}@example.net", "a".repeat(MAX_EMAIL - 11)),
        ] {
            invalid(check_email(bad));
        }

        check_groups(&[]).unwrap();
        check_groups(&["a".into(), "A-z_0.9".into(), "g".repeat(MAX_GROUP)]).unwrap();
        for bad in ["", "has space", "group:x", "é", &"g".repeat(MAX_GROUP + 1)] {
            invalid(check_groups(&[bad.into()]));
        }
        invalid(check_groups(&["a".into(), "a".into()]));

        check_password("12345678").unwrap();
        check_password(&"p".repeat(crate::users::MAX_PASSWORD)).unwrap();
        for bad in [String::new(), "1234567".into(), "p".repeat(crate::users::MAX_PASSWORD + 1)] {
            let d = invalid(check_password(&bad));
            assert!(bad.is_empty() || !d.contains(&bad), "the error repeats the password: {d}");
        }
        invalid(check_new_user(&OauthUser { password: "short".into(), ..user("alice") }));
    }

    #[test]
    fn scopes_audiences_and_grant_types() {
        check_scopes(&[]).unwrap();
        check_scopes(&["a:b/c!#[]~".into()]).unwrap();
        for bad in ["", "two words", "quote\"", "back\\slash", "é", "tab\t"] {
            invalid(check_scopes(&[bad.into()]));
        }
        invalid(check_scopes(&["a".into(), "a".into()]));

        assert!(invalid(check_audiences(&[])).contains("at least one audience"));
        check_audiences(&["https://api.example.net/v1".into(), "billing-api".into(), "urn:example:res".into()])
            .unwrap();
        for bad in ["", "https://a.example/#frag", "has space", "/relative", "a b:c", "x\u{0}"] {
            invalid(check_audiences(&[bad.into()]));
        }

        for g in GRANT_TYPES {
            check_grant_types(AuthMethod::ClientSecretBasic, &[g.into()]).unwrap();
        }
        invalid(check_grant_types(AuthMethod::ClientSecretBasic, &["password".into()]));
        invalid(check_grant_types(AuthMethod::ClientSecretBasic, &["refresh_token".into(), "refresh_token".into()]));
        invalid(check_grant_types(AuthMethod::None, &["client_credentials".into()]));
    }

    #[test]
    fn secrets_by_method() {
        let s = new_secret(AuthMethod::ClientSecretBasic).unwrap().unwrap();
        assert_eq!((s.text.len(), s.sha256, s.mac_key), (43, Some(sha256(s.text.as_bytes())), None));
        let s = new_secret(AuthMethod::ClientSecretJwt).unwrap().unwrap();
        assert_eq!((s.text.len(), s.sha256, s.mac_key.as_deref()), (86, None, Some(s.text.as_str())));
        assert!(new_secret(AuthMethod::PrivateKeyJwt).unwrap().is_none());
        assert!(new_secret(AuthMethod::None).unwrap().is_none());
        // Without the redraw, 1 in 32 would start with '-' or '_'.
        for _ in 0..2000 {
            let enc = URL_SAFE_NO_PAD.encode(random_for_command_lines(SECRET_BYTES).unwrap());
            assert!(enc.starts_with(|c: char| c.is_ascii_alphanumeric()), "{enc}");
        }
    }

    #[test]
    fn create_list_show_rotate_delete() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let (id, rec, uris, secret, _) = create_client(&db, &client("client_secret_basic"), 100).unwrap();
        assert!(uris.redirect_uris.is_empty());
        let secret = secret.unwrap();
        assert_eq!(
            (id.as_str(), rec.secret_sha256, rec.mac_key.as_ref()),
            ("billing", Some(sha256(secret.as_bytes())), None)
        );
        assert_eq!((rec.created, rec.secret_set), (100, 100));
        let e = create_client(&db, &client("client_secret_basic"), 101).unwrap_err();
        assert_eq!(e.kind, ErrorKind::AlreadyExists);

        let anon = OauthClient { client_id: String::new(), jwks: JWKS.into(), ..client("private_key_jwt") };
        let (anon_id, anon_rec, anon_uris, anon_secret, _) = create_client(&db, &anon, 102).unwrap();
        assert_eq!((anon_id.len(), anon_secret, anon_rec.secret_set), (22, None, 0));
        let shown_anon = shown(anon_id.clone(), &anon_rec, &anon_uris, None);
        assert_eq!((shown_anon.jwks.as_str(), shown_anon.secret.as_str()), (JWKS, ""));

        let jwt = OauthClient { client_id: "mac".into(), ..client("client_secret_jwt") };
        let (_, jwt_rec, _, jwt_secret, _) = create_client(&db, &jwt, 103).unwrap();
        assert_eq!((jwt_rec.mac_key, jwt_rec.secret_sha256), (jwt_secret, None));

        // A browser-facing public client: its URIs in client_uris, written with it.
        let web = OauthClient {
            client_id: "web".into(),
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            redirect_uris: vec!["https://app.example.net/cb".into(), "com.example.app:/cb".into()],
            post_logout_redirect_uris: vec!["https://app.example.net/".into()],
            ..client("none")
        };
        let (_, web_rec, web_uris, web_secret, _) = create_client(&db, &web, 104).unwrap();
        assert_eq!(web_secret, None);
        let shown_web = shown("web".into(), &web_rec, &web_uris, None);
        assert_eq!(
            (&shown_web.redirect_uris, &shown_web.post_logout_redirect_uris),
            (&web.redirect_uris, &web.post_logout_redirect_uris)
        );
        let stored = db.store.read(|t| t.get(&db.client_uris, &"web".to_owned())).unwrap().unwrap();
        assert_eq!(stored.redirect_uris, web.redirect_uris);
        // A refused client leaves nothing behind, URIs included.
        let bad = OauthClient { client_id: "bad".into(), redirect_uris: vec!["http://evil.example/cb".into()], ..web };
        invalid(create_client(&db, &bad, 105));
        assert!(db.store.read(|t| t.get(&db.client_uris, &"bad".to_owned())).unwrap().is_none());

        let listed = list_clients(&db).unwrap();
        assert_eq!(listed.len(), 4);
        let (_, _, listed_web, _) = listed.iter().find(|(id, _, _, _)| id == "web").unwrap();
        assert_eq!(listed_web.post_logout_redirect_uris, vec!["https://app.example.net/"]);
        assert!(listed.iter().filter(|(id, _, _, _)| id != "web").all(|(_, _, u, _)| u.redirect_uris.is_empty()));
        assert_eq!(show_client(&db, "web").unwrap().1.redirect_uris.len(), 2);
        assert_eq!(show_client(&db, "billing").unwrap().0.name, "Billing");
        assert_eq!(show_client(&db, "nope").unwrap_err().kind, ErrorKind::NotFound);
        invalid(show_client(&db, ""));

        let (rotated, _, new) = rotate_secret(&db, "billing", 200).unwrap();
        assert_ne!(new, secret);
        assert_eq!(
            (rotated.secret_sha256, rotated.secret_set, rotated.created),
            (Some(sha256(new.as_bytes())), 200, 100)
        );
        assert_eq!(show_client(&db, "billing").unwrap().0.secret_sha256, Some(sha256(new.as_bytes())));
        assert!(invalid(rotate_secret(&db, &anon_id, 200)).contains("no secret"));
        assert_eq!(rotate_secret(&db, "nope", 200).unwrap_err().kind, ErrorKind::NotFound);

        assert_eq!(delete_client(&db, "billing").unwrap().0.name, "Billing");
        assert_eq!(delete_client(&db, "billing").unwrap_err().kind, ErrorKind::NotFound);
        let (_, gone, _) = delete_client(&db, "web").unwrap();
        assert_eq!(gone.redirect_uris.len(), 2);
        assert!(db.store.read(|t| t.get(&db.client_uris, &"web".to_owned())).unwrap().is_none());
        assert_eq!(list_clients(&db).unwrap().len(), 2);
    }

    /// A session, an unredeemed code and a live family of `user`, with one access token.
    fn signed_in(db: &Db, user: &str, n: u8) {
        use crate::db::{CodeRec, FamilyRec, SessionRec};
        let session = SessionRec { user: user.into(), auth_time: 1, expires: 9999, sid: format!("sid-{n}") };
        let code = CodeRec {
            client_id: "web".into(),
            user: user.into(),
            redirect_uri: "https://app.example.net/cb".into(),
            scopes: vec![],
            audience: "api".into(),
            challenge: None,
            nonce: None,
            auth_time: 1,
            sid: format!("sid-{n}"),
            expires: 9999,
            dpop_jkt: None,
            redeemed: None,
        };
        let family = FamilyRec {
            client_id: "web".into(),
            user: user.into(),
            scopes: vec![],
            audience: "api".into(),
            auth_time: 1,
            sid: format!("sid-{n}"),
            created: 1,
            expires: 9999,
            revoked: None,
            access: vec![(format!("jti-{user}"), 5000)],
            jkt: None,
        };
        db.write(|t| {
            t.put(&db.sessions, &[n; 32], &session)?;
            t.put(&db.codes, &[n; 32], &code)?;
            t.put(&db.families, &[n; 16], &family)?;
            t.put(
                &db.consents,
                &crate::db::consent_key(user, "web"),
                &crate::db::ConsentRec { scopes: vec![], granted: 1 },
            )
        })
        .unwrap();
    }

    /// Whether `user`'s session, code and family (seeded as `n`) are still live.
    fn live(db: &Db, user: &str, n: u8) -> (bool, bool, bool, bool) {
        db.store
            .read(|t| {
                Ok((
                    t.get(&db.sessions, &[n; 32])?.is_some(),
                    t.get(&db.codes, &[n; 32])?.is_some(),
                    t.get(&db.families, &[n; 16])?.is_some_and(|f| f.revoked.is_none()),
                    t.get(&db.revoked, &format!("jti-{user}"))?.is_none(),
                ))
            })
            .unwrap()
    }

    #[test]
    fn users_create_list_show_set_password_disable_delete() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let rec = create_user(&db, &user("alice"), 100).unwrap();
        assert!(rec.password.starts_with("$argon2id$"), "{}", rec.password);
        assert!(crate::users::verify_password(&rec.password, "correct horse"));
        assert_eq!((rec.created, rec.password_set, rec.disabled), (100, 100, false));
        let shown_alice = shown_user("alice".into(), &rec);
        assert_eq!(
            shown_alice,
            OauthUser { password: String::new(), created_unix_secs: 100, password_set_unix_secs: 100, ..user("alice") }
        );
        assert_eq!(create_user(&db, &user("alice"), 101).unwrap_err().kind, ErrorKind::AlreadyExists);
        invalid(create_user(&db, &OauthUser { password: "short".into(), ..user("bob") }, 101));
        create_user(&db, &OauthUser { name: String::new(), email: String::new(), groups: vec![], ..user("bob") }, 102)
            .unwrap();
        let names: Vec<String> = list_users(&db).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["alice", "bob"]);
        assert_eq!(show_user(&db, "bob").unwrap().name, None);
        assert_eq!(show_user(&db, "carol").unwrap_err().kind, ErrorKind::NotFound);
        invalid(show_user(&db, "bad name"));

        // A new password ends alice's sessions, codes and refresh tokens, not bob's.
        signed_in(&db, "alice", 1);
        signed_in(&db, "bob", 2);
        invalid(set_password(&db, "alice", "short", 200));
        assert_eq!(live(&db, "alice", 1), (true, true, true, true));
        let (rec, ended) = set_password(&db, "alice", "battery staple", 200).unwrap();
        assert_eq!(ended, Ended { sessions: 1, families: 1, codes: 1 });
        assert_eq!((rec.password_set, rec.created), (200, 100));
        assert!(crate::users::verify_password(&rec.password, "battery staple"));
        assert!(!crate::users::verify_password(&rec.password, "correct horse"));
        assert_eq!(live(&db, "alice", 1), (false, false, false, false));
        let family = db.store.read(|t| t.get(&db.families, &[1; 16])).unwrap().unwrap();
        assert_eq!(family.revoked, Some(200));
        assert_eq!(db.store.read(|t| t.get(&db.revoked, &"jti-alice".to_owned())).unwrap(), Some(5000));
        assert_eq!(live(&db, "bob", 2), (true, true, true, true));
        assert_eq!(set_password(&db, "carol", "long enough", 200).unwrap_err().kind, ErrorKind::NotFound);

        // Disabling ends them too; enabling ends nothing.
        signed_in(&db, "alice", 3);
        let (rec, ended) = set_disabled(&db, "alice", true, 300).unwrap();
        assert!(rec.disabled);
        assert_eq!(ended, Ended { sessions: 1, families: 1, codes: 1 });
        assert_eq!(live(&db, "alice", 3), (false, false, false, false));
        signed_in(&db, "alice", 4);
        let (rec, ended) = set_disabled(&db, "alice", false, 301).unwrap();
        assert_eq!((rec.disabled, ended), (false, Ended::default()));
        assert!(live(&db, "alice", 4).0);
        assert_eq!(show_user(&db, "alice").unwrap().password, rec.password);
        assert_eq!(set_disabled(&db, "carol", true, 300).unwrap_err().kind, ErrorKind::NotFound);

        // Deleting: the user, its grants and its consents go; bob's stay.
        let (gone, ended) = delete_user(&db, "alice", 400).unwrap();
        assert_eq!(gone.name.as_deref(), Some("Alice Smith"));
        assert_eq!(ended, Ended { sessions: 1, families: 1, codes: 1 });
        assert_eq!(live(&db, "alice", 4), (false, false, false, false));
        let consent = |u: &str| db.store.read(|t| t.get(&db.consents, &crate::db::consent_key(u, "web"))).unwrap();
        assert!(consent("alice").is_none());
        assert!(consent("bob").is_some());
        assert_eq!(live(&db, "bob", 2), (true, true, true, true));
        assert_eq!(delete_user(&db, "alice", 400).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(list_users(&db).unwrap().len(), 1);
    }
}
