//! The admin interface (Cap'n Proto, `tokend.capnp`) on its own Unix socket:
//! OAuth clients and the published signing keys, for operators
//! (`signetctl oauth ...`).
//!
//! Served on its own thread with a `LocalSet` (capnp-rpc is `!Send`; the
//! thread is `signet_runtime::service_thread`'s). Callers are admitted by
//! their peer credentials (SO_PEERCRED) against `[admin]`, when they ask for
//! the admin capability and again on every call (SIGHUP reloads `[admin]`).
//! Each change is one LMDB write transaction, committed before the answer.
//! A client secret leaves tokend once, in the answer that set it, and is
//! never logged; for client_secret_basic/post only its SHA-256 is kept.
//!
//! The checks of what an operator asks for are pure functions of plain
//! values ([`check_new_client`] and the `check_*` beside it).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::FutureExt;
use openssl::sha::sha256;
use signet_ipc::server::{serve_tokend, LocalResult, ServeOptions, TokendAdminService, TokendService, TokendSession};
use signet_ipc::{ErrorKind, IpcError, OauthClient, PeerCredentials, TokenKey, TokendHealth};
use signet_runtime::principals::supplementary_groups;
use signet_store::StoreError;
use tokio_util::sync::CancellationToken;

use crate::db::{AuthMethod, ClientRec, Db};
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
pub const GRANT_TYPES: [&str; 5] = [
    "client_credentials",
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "authorization_code",
    "refresh_token",
    "urn:ietf:params:oauth:grant-type:device_code",
];
/// The grant types of a client registered without any.
pub const DEFAULT_GRANT_TYPE: &str = "client_credentials";

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
            let (id, rec, secret) = create_client(&me.db, &client, unix_now())?;
            tracing::info!(uid = me.peer.uid, client_id = %id, auth_method = rec.auth_method.name(), "client created");
            Ok(OauthClient { secret: secret.unwrap_or_default(), ..shown(id, &rec) })
        })
    }

    fn client_list(&self) -> LocalResult<Vec<OauthClient>> {
        self.run(|me| Ok(list_clients(&me.db)?.into_iter().map(|(id, rec)| shown(id, &rec)).collect()))
    }

    fn client_show(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let rec = show_client(&me.db, &client_id)?;
            Ok(shown(client_id, &rec))
        })
    }

    fn client_delete(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let rec = delete_client(&me.db, &client_id).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, client_id = %client_id, error = %e, "client not deleted");
            })?;
            tracing::info!(uid = me.peer.uid, client_id = %client_id, "client deleted");
            Ok(shown(client_id, &rec))
        })
    }

    fn client_rotate_secret(&self, client_id: String) -> LocalResult<OauthClient> {
        self.run(|me| {
            let (rec, secret) = rotate_secret(&me.db, &client_id, unix_now()).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, client_id = %client_id, error = %e, "client secret not rotated");
            })?;
            tracing::info!(uid = me.peer.uid, client_id = %client_id, "client secret rotated");
            Ok(OauthClient { secret, ..shown(client_id, &rec) })
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
}

// --- what the interface shows ----------------------------------------------------

/// A stored client as the interface shows it: never with its secret.
pub fn shown(client_id: String, rec: &ClientRec) -> OauthClient {
    OauthClient {
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
    check_scopes(&c.scopes)?;
    check_audiences(&c.audiences)?;
    let grant_types = check_grant_types(auth_method, &c.grant_types)?;
    Ok(NewClient {
        name: c.name.clone(),
        auth_method,
        jwks,
        scopes: c.scopes.clone(),
        audiences: c.audiences.clone(),
        grant_types,
    })
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
    if name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(IpcError::invalid(format!(
            "a client name has at most {MAX_NAME} characters and no control characters"
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
/// one key (an object) for private_key_jwt (tokend checks each JWK when it
/// verifies an assertion), nothing for the other methods.
pub fn check_jwks(method: AuthMethod, jwks: &str) -> Result<Option<String>, IpcError> {
    if method != AuthMethod::PrivateKeyJwt {
        if !jwks.is_empty() {
            return Err(IpcError::invalid(format!("a {} client has no JWKS", method.name())));
        }
        return Ok(None);
    }
    if jwks.is_empty() {
        return Err(IpcError::invalid("a private_key_jwt client needs its JWKS (the public keys it signs with)"));
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
/// client_credentials (RFC 6749 §4.4: confidential clients only).
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
        AuthMethod::PrivateKeyJwt | AuthMethod::None => None,
    })
}

// --- the store operations ----------------------------------------------------------

fn store_error(what: &str, e: StoreError) -> IpcError {
    tracing::error!(error = %e, "{what}");
    IpcError::internal(format!("{what}: {e}"))
}

fn not_found(client_id: &str) -> IpcError {
    IpcError::new(ErrorKind::NotFound, format!("no client with id {client_id:?}"))
}

/// Registers `c` (its id empty: a random one of 16 bytes, base64url) at
/// `now`; committed when this returns. Answers the id, the record and the
/// secret, if the method has one.
pub fn create_client(db: &Db, c: &OauthClient, now: u64) -> Result<(String, ClientRec, Option<String>), IpcError> {
    let id = if c.client_id.is_empty() {
        URL_SAFE_NO_PAD.encode(random_for_command_lines(16)?)
    } else {
        c.client_id.clone()
    };
    check_new_client_id(&id)?;
    let new = check_new_client(c)?;
    let secret = new_secret(new.auth_method)?;
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
    let inserted = db
        .write(|t| -> Result<bool, StoreError> {
            if t.get(&db.clients, &id)?.is_some() {
                return Ok(false);
            }
            t.put(&db.clients, &id, &rec)?;
            Ok(true)
        })
        .map_err(|e| store_error("storing the client", e))?;
    if !inserted {
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("a client with id {id:?} exists")));
    }
    Ok((id, rec, secret.map(|s| s.text)))
}

/// Every client, ordered by id.
pub fn list_clients(db: &Db) -> Result<Vec<(String, ClientRec)>, IpcError> {
    db.store.read(|t| t.range(&db.clients, None, usize::MAX)).map_err(|e| store_error("reading clients", e))
}

/// One client.
pub fn show_client(db: &Db, client_id: &str) -> Result<ClientRec, IpcError> {
    check_lookup_client_id(client_id)?;
    db.store
        .read(|t| t.get(&db.clients, &client_id.to_owned()))
        .map_err(|e| store_error("reading clients", e))?
        .ok_or_else(|| not_found(client_id))
}

/// Deletes a client; committed when this returns. Tokens it was issued stay
/// valid until they expire (or are revoked).
pub fn delete_client(db: &Db, client_id: &str) -> Result<ClientRec, IpcError> {
    check_lookup_client_id(client_id)?;
    let id = client_id.to_owned();
    db.write(|t| -> Result<Result<ClientRec, IpcError>, StoreError> {
        let Some(rec) = t.get(&db.clients, &id)? else {
            return Ok(Err(not_found(client_id)));
        };
        t.delete(&db.clients, &id)?;
        Ok(Ok(rec))
    })
    .map_err(|e| store_error("deleting the client", e))?
}

/// Gives a client a new secret at `now` (the old one stops working when this
/// commits); answers the new record and the secret. Refused for methods
/// without a secret.
pub fn rotate_secret(db: &Db, client_id: &str, now: u64) -> Result<(ClientRec, String), IpcError> {
    check_lookup_client_id(client_id)?;
    let id = client_id.to_owned();
    db.write(|t| -> Result<Result<(ClientRec, String), IpcError>, StoreError> {
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
        Ok(Ok((rec, secret.text)))
    })
    .map_err(|e| store_error("storing the client's secret", e))?
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
        assert!(invalid(check_auth_method("tls_client_auth")).contains("client_secret_basic"));
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
        let public =
            OauthClient { grant_types: vec!["authorization_code".into(), "refresh_token".into()], ..client("none") };
        assert_eq!(check_new_client(&public).unwrap().grant_types.len(), 2);
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
        let (id, rec, secret) = create_client(&db, &client("client_secret_basic"), 100).unwrap();
        let secret = secret.unwrap();
        assert_eq!(
            (id.as_str(), rec.secret_sha256, rec.mac_key.as_ref()),
            ("billing", Some(sha256(secret.as_bytes())), None)
        );
        assert_eq!((rec.created, rec.secret_set), (100, 100));
        let e = create_client(&db, &client("client_secret_basic"), 101).unwrap_err();
        assert_eq!(e.kind, ErrorKind::AlreadyExists);

        let anon = OauthClient { client_id: String::new(), jwks: JWKS.into(), ..client("private_key_jwt") };
        let (anon_id, anon_rec, anon_secret) = create_client(&db, &anon, 102).unwrap();
        assert_eq!((anon_id.len(), anon_secret, anon_rec.secret_set), (22, None, 0));
        let shown_anon = shown(anon_id.clone(), &anon_rec);
        assert_eq!((shown_anon.jwks.as_str(), shown_anon.secret.as_str()), (JWKS, ""));

        let jwt = OauthClient { client_id: "mac".into(), ..client("client_secret_jwt") };
        let (_, jwt_rec, jwt_secret) = create_client(&db, &jwt, 103).unwrap();
        assert_eq!((jwt_rec.mac_key, jwt_rec.secret_sha256), (jwt_secret, None));

        assert_eq!(list_clients(&db).unwrap().len(), 3);
        assert_eq!(show_client(&db, "billing").unwrap().name, "Billing");
        assert_eq!(show_client(&db, "nope").unwrap_err().kind, ErrorKind::NotFound);
        invalid(show_client(&db, ""));

        let (rotated, new) = rotate_secret(&db, "billing", 200).unwrap();
        assert_ne!(new, secret);
        assert_eq!(
            (rotated.secret_sha256, rotated.secret_set, rotated.created),
            (Some(sha256(new.as_bytes())), 200, 100)
        );
        assert_eq!(show_client(&db, "billing").unwrap().secret_sha256, Some(sha256(new.as_bytes())));
        assert!(invalid(rotate_secret(&db, &anon_id, 200)).contains("no secret"));
        assert_eq!(rotate_secret(&db, "nope", 200).unwrap_err().kind, ErrorKind::NotFound);

        assert_eq!(delete_client(&db, "billing").unwrap().name, "Billing");
        assert_eq!(delete_client(&db, "billing").unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(list_clients(&db).unwrap().len(), 2);
    }
}
