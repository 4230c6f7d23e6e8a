//! tokend's LMDB tables and records.
//!
//! | table | key | value |
//! |---|---|---|
//! | `clients` | client id | [`ClientRec`] |
//! | `assertions` | SHA-256(client id ‖ 0 ‖ `jti`) | the assertion's `exp`: a client assertion's `jti` seen |
//! | `revoked` | access token `jti` | its `exp`: revoked until then (RFC 7009) |
//! | `keys` | signd key id | [`KeyRec`]: when tokend first saw the key, and when a newer one replaced it |
//! | `client_uris` | client id | [`ClientUris`]: where a browser-facing client's users are sent back |
//! | `client_tls` | client id | [`TlsIdentity`]: what a tls_client_auth client's certificate holds (RFC 8705 §2.1.2) |
//! | `users` | user name | [`UserRec`]: a local user, its password as an argon2id PHC string |
//! | `sessions` | SHA-256 of the session cookie | [`SessionRec`]: a signed-in browser |
//! | `consents` | user ‖ 0 ‖ client id | [`ConsentRec`]: the scopes a user granted a client |
//! | `codes` | SHA-256 of the authorization code | [`CodeRec`]: the authorization it stands for (RFC 6749 §4.1) |
//! | `refresh` | SHA-256 of the refresh token | [`RefreshRec`]: its family, and when it was rotated |
//! | `families` | family id | [`FamilyRec`]: the grant behind a chain of rotated refresh tokens |
//! | `secrets` | name | tokend's own random keys (`csrf`: the forms' CSRF MAC key; `dpop-nonce`) |
//! | `par` | SHA-256 of the request URI | [`ParRec`]: a pushed authorization request (RFC 9126) |
//! | `devices` | SHA-256 of the device code | [`DeviceRec`]: a device authorization (RFC 8628) and how it stands |
//! | `user_codes` | the user code, normalised | SHA-256 of its device code |
//! | `dpop_proofs` | SHA-256(`jkt` ‖ 0 ‖ `jti`) | until when the DPoP proof's `jti` is remembered (RFC 9449 §11.1) |
//!
//! Codes, sessions and refresh tokens are kept only as hashes: a copy of the
//! store lets nobody act as a user or a client.
//!
//! Everything a client is told about is committed before the answer leaves
//! (durability `sync` for the tables a client's security depends on: a
//! revocation or a client's secret must survive a power cut as well as
//! `kill -9`).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use signet_store::{Durability, SpaceWatch, Store, StoreError, StoreOptions, Table, WriteTxn};

/// The LMDB application name and schema version.
pub const STORE_APPLICATION: &str = "tokend";
/// Bumped when a record changes shape.
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// How a client authenticates at the token endpoint (RFC 8414 / OIDC names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMethod {
    /// HTTP Basic with the client id and secret (RFC 6749 §2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
    /// A JWT MACed with the client secret (RFC 7523, OIDC Core §9).
    ClientSecretJwt,
    /// A JWT signed with a key of the client's JWKS (RFC 7523, OIDC Core §9).
    PrivateKeyJwt,
    /// A public client: no authentication.
    None,
    /// A certificate chaining to `[tls] client_ca_file` with the registered
    /// subject DN or SAN, on the mTLS listener (RFC 8705 §2.1).
    TlsClientAuth,
    /// A certificate whose key is in the client's registered JWKS, on the
    /// mTLS listener (RFC 8705 §2.2).
    SelfSignedTlsClientAuth,
}

impl AuthMethod {
    /// Every method, in the order metadata lists them.
    pub const ALL: [AuthMethod; 7] = [
        AuthMethod::ClientSecretBasic,
        AuthMethod::ClientSecretPost,
        AuthMethod::ClientSecretJwt,
        AuthMethod::PrivateKeyJwt,
        AuthMethod::TlsClientAuth,
        AuthMethod::SelfSignedTlsClientAuth,
        AuthMethod::None,
    ];

    /// The registered name.
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::ClientSecretJwt => "client_secret_jwt",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
            AuthMethod::None => "none",
            AuthMethod::TlsClientAuth => "tls_client_auth",
            AuthMethod::SelfSignedTlsClientAuth => "self_signed_tls_client_auth",
        }
    }

    /// The method of a registered name.
    pub fn from_name(name: &str) -> Option<AuthMethod> {
        AuthMethod::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the client authenticates with a certificate (RFC 8705 §2).
    pub fn is_mtls(self) -> bool {
        matches!(self, AuthMethod::TlsClientAuth | AuthMethod::SelfSignedTlsClientAuth)
    }

    /// Whether the client holds a secret.
    pub fn has_secret(self) -> bool {
        matches!(self, AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost | AuthMethod::ClientSecretJwt)
    }
}

/// A registered client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientRec {
    /// A display name.
    pub name: String,
    /// How it authenticates.
    pub auth_method: AuthMethod,
    /// The secret's SHA-256 (client_secret_basic/post). tokend generates every
    /// secret (256 random bits), so a fast hash is safe: no dictionary helps.
    pub secret_sha256: Option<[u8; 32]>,
    /// The secret itself, for client_secret_jwt only: the MAC key must be
    /// known to verify the assertion (RFC 7518 §3.2).
    pub mac_key: Option<String>,
    /// The client's public keys (private_key_jwt): a JWKS document, or the
    /// URL of one (`jwks_uri`, fetched and cached by [`crate::remote`]).
    pub jwks: Option<String>,
    /// Scopes the client may ask for.
    pub scopes: Vec<String>,
    /// Audiences (`aud`, RFC 8707 resources) its tokens may name; the first is the default.
    pub audiences: Vec<String>,
    /// Grant types it may use.
    pub grant_types: Vec<String>,
    /// Unix seconds.
    pub created: u64,
    /// When the secret was last set, Unix seconds.
    pub secret_set: u64,
}

/// A signing key as tokend has seen it in signd.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyRec {
    /// When tokend first listed it, Unix seconds: it is published from then on
    /// and signs from `first_seen + key_publish_seconds`.
    pub first_seen: u64,
    /// When a newer key took over signing, Unix seconds; it stays published
    /// until every token it signed has expired.
    pub superseded: Option<u64>,
}

/// The prefix of [`FamilyRec::jkt`] when a family is bound to a certificate.
pub const CERT_BOUND: &str = "x5t#S256:";

/// A browser-facing client's registered URIs (OIDC Core §3.1.2.1, RP-initiated logout §3).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientUris {
    /// Redirect URIs, compared exactly.
    pub redirect_uris: Vec<String>,
    /// Where RP-initiated logout may send the browser afterwards.
    pub post_logout_redirect_uris: Vec<String>,
}

/// What a tls_client_auth client's certificate must hold: one of RFC 8705
/// §2.1.2's metadata values. Its own table (`client_tls`), so that client
/// records written before it are read as they were.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsIdentity {
    /// `tls_client_auth_subject_dn`: the subject, an RFC 4514 string.
    SubjectDn(String),
    /// `tls_client_auth_san_dns`: a dNSName SAN entry.
    SanDns(String),
    /// `tls_client_auth_san_uri`: a uniformResourceIdentifier SAN entry.
    SanUri(String),
    /// `tls_client_auth_san_ip`: an iPAddress SAN entry (canonical text).
    SanIp(String),
    /// `tls_client_auth_san_email`: an rfc822Name SAN entry.
    SanEmail(String),
}

/// A local user.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UserRec {
    /// The password as an argon2id PHC string (RFC 9106 parameters in it).
    pub password: String,
    /// A display name (OIDC `name`).
    pub name: Option<String>,
    /// An email address (OIDC `email`).
    pub email: Option<String>,
    /// Groups (OIDC `groups`); a scope named `group:<g>` needs membership of `g`.
    pub groups: Vec<String>,
    /// Unix seconds.
    pub created: u64,
    /// When the password was last set, Unix seconds.
    pub password_set: u64,
    /// A disabled user cannot sign in; its sessions and refresh tokens stop working.
    pub disabled: bool,
}

/// A signed-in browser.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionRec {
    /// The user.
    pub user: String,
    /// When the user authenticated (OIDC `auth_time`), Unix seconds.
    pub auth_time: u64,
    /// When the session ends, Unix seconds.
    pub expires: u64,
    /// The session id carried in ID tokens (`sid`, OIDC front-channel logout §2).
    pub sid: String,
}

/// What a user granted a client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConsentRec {
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// Unix seconds.
    pub granted: u64,
}

/// An authorization code's authorization, until it is redeemed (RFC 6749 §4.1.2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CodeRec {
    /// The client it was issued to.
    pub client_id: String,
    /// The user who authorized it.
    pub user: String,
    /// The redirect URI of the authorization request, compared at the token endpoint.
    pub redirect_uri: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The access token's audience.
    pub audience: String,
    /// The PKCE S256 challenge (RFC 7636), if one was sent.
    pub challenge: Option<String>,
    /// The OIDC nonce, repeated in the ID token.
    pub nonce: Option<String>,
    /// When the user authenticated.
    pub auth_time: u64,
    /// The session's `sid`.
    pub sid: String,
    /// Unix seconds.
    pub expires: u64,
    /// The DPoP key thumbprint the authorization request bound the code to (RFC 9449 §10).
    pub dpop_jkt: Option<String>,
    /// The refresh-token family the redemption started: a second redemption
    /// revokes it (RFC 6749 §4.1.2, RFC 9700 §4.14).
    pub redeemed: Option<[u8; 16]>,
}

/// One refresh token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RefreshRec {
    /// Its family.
    pub family: [u8; 16],
    /// Unix seconds.
    pub issued: u64,
    /// When it expires (idle lifetime), Unix seconds.
    pub expires: u64,
    /// When it was exchanged for its successor; a later use past the grace
    /// window is a reuse and revokes the family.
    pub rotated: Option<u64>,
}

/// The grant behind a chain of rotated refresh tokens (RFC 9700 §4.14.2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FamilyRec {
    /// The client.
    pub client_id: String,
    /// The user.
    pub user: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The access tokens' audience.
    pub audience: String,
    /// When the user authenticated.
    pub auth_time: u64,
    /// The session's `sid`.
    pub sid: String,
    /// Unix seconds.
    pub created: u64,
    /// The family's absolute end, Unix seconds.
    pub expires: u64,
    /// When it was revoked (a reuse, a revocation request, logout), Unix seconds.
    pub revoked: Option<u64>,
    /// The newest access tokens issued from the family (`jti`, `exp`), revoked with it.
    pub access: Vec<(String, u64)>,
    /// The key a public client's refresh tokens are bound to: a DPoP JWK
    /// thumbprint (RFC 9449 §5), or [`CERT_BOUND`] and the SHA-256 thumbprint
    /// of its TLS certificate (RFC 8705 §4; kept in this field so that older
    /// records read as they were).
    pub jkt: Option<String>,
}

impl FamilyRec {
    /// A new family of `client_id` for `user`, created `now` (its end, tokens and key binding
    /// are set by whoever starts it).
    pub fn new(
        client_id: &str,
        user: String,
        scopes: Vec<String>,
        audience: String,
        auth_time: u64,
        sid: String,
        now: u64,
    ) -> Self {
        FamilyRec {
            client_id: client_id.to_owned(),
            user,
            scopes,
            audience,
            auth_time,
            sid,
            created: now,
            expires: now,
            revoked: None,
            access: Vec::new(),
            jkt: None,
        }
    }
}

/// How a device authorization stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceState {
    /// Waiting for the user.
    Pending,
    /// The user approved it.
    Approved {
        /// The user.
        user: String,
        /// When the user authenticated.
        auth_time: u64,
        /// The session's `sid`.
        sid: String,
    },
    /// The user refused.
    Denied,
    /// Tokens were issued for it (the refresh-token family).
    Redeemed([u8; 16]),
}

/// A device authorization (RFC 8628 §3.2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceRec {
    /// The client.
    pub client_id: String,
    /// Scopes asked for.
    pub scopes: Vec<String>,
    /// The access tokens' audience.
    pub audience: String,
    /// The user code (normalised: 8 letters, no dash).
    pub user_code: String,
    /// Unix seconds.
    pub expires: u64,
    /// The polling interval, seconds (raised by 5 on each `slow_down`).
    pub interval: u64,
    /// The last poll, Unix seconds.
    pub last_poll: u64,
    /// How it stands.
    pub state: DeviceState,
}

/// A pushed authorization request (RFC 9126).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParRec {
    /// The client that pushed it.
    pub client_id: String,
    /// Its parameters, `application/x-www-form-urlencoded`.
    pub params: String,
    /// Unix seconds.
    pub expires: u64,
}

/// The store and its tables.
#[derive(Clone)]
pub struct Db {
    /// The environment.
    pub store: Store,
    /// A full filesystem, logged once.
    pub space: Arc<SpaceWatch>,
    /// See the module table.
    pub clients: Table<String, ClientRec>,
    /// See the module table.
    pub assertions: Table<[u8; 32], u64>,
    /// See the module table.
    pub revoked: Table<String, u64>,
    /// See the module table.
    pub keys: Table<String, KeyRec>,
    /// See the module table.
    pub client_uris: Table<String, ClientUris>,
    /// See the module table.
    pub client_tls: Table<String, TlsIdentity>,
    /// See the module table.
    pub users: Table<String, UserRec>,
    /// See the module table.
    pub sessions: Table<[u8; 32], SessionRec>,
    /// See the module table.
    pub consents: Table<String, ConsentRec>,
    /// See the module table.
    pub codes: Table<[u8; 32], CodeRec>,
    /// See the module table.
    pub refresh: Table<[u8; 32], RefreshRec>,
    /// See the module table.
    pub families: Table<[u8; 16], FamilyRec>,
    /// See the module table.
    pub secrets: Table<String, Vec<u8>>,
    /// See the module table.
    pub par: Table<[u8; 32], ParRec>,
    /// See the module table.
    pub dpop_proofs: Table<[u8; 32], u64>,
    /// See the module table.
    pub devices: Table<[u8; 32], DeviceRec>,
    /// See the module table.
    pub user_codes: Table<String, [u8; 32]>,
}

/// The `consents` key of `user` and `client`.
pub fn consent_key(user: &str, client: &str) -> String {
    format!("{user}\u{0}{client}")
}

impl Db {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Db, StoreError> {
        let mut opts = StoreOptions::new(STORE_APPLICATION, STORE_SCHEMA_VERSION);
        opts.durability = Durability::Sync;
        opts.max_tables = 24;
        let store = Store::open(dir, opts)?;
        Ok(Db {
            clients: store.table("clients")?,
            assertions: store.table("assertions")?,
            revoked: store.table("revoked")?,
            keys: store.table("keys")?,
            client_uris: store.table("client_uris")?,
            client_tls: store.table("client_tls")?,
            users: store.table("users")?,
            sessions: store.table("sessions")?,
            consents: store.table("consents")?,
            codes: store.table("codes")?,
            refresh: store.table("refresh")?,
            families: store.table("families")?,
            secrets: store.table("secrets")?,
            par: store.table("par")?,
            dpop_proofs: store.table("dpop_proofs")?,
            devices: store.table("devices")?,
            user_codes: store.table("user_codes")?,
            space: Arc::new(SpaceWatch::new(store.path(), FULL_CONSEQUENCE)),
            store,
        })
    }

    /// A write transaction, its outcome noted by [`Db::space`].
    pub fn write<R>(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let out = self.store.try_write(f);
        self.space.note(&out);
        out
    }

    /// A write transaction sharing its commit with concurrent ones (group
    /// commit), on a blocking thread; noted by [`Db::space`].
    pub async fn write_grouped<R, E, F>(&self, f: F) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + AsRef<StoreError> + Send + 'static,
        F: FnOnce(&mut WriteTxn<'_>) -> Result<R, E> + Send + 'static,
    {
        let out = self.store.write_grouped(f).await;
        self.space.note(&out);
        out
    }

    /// Deletes records that ended before `now`: replay and revocation
    /// records of expired tokens, codes, sessions, refresh tokens and families.
    pub fn prune(&self, now: u64) -> Result<u64, StoreError> {
        self.write(|txn| {
            let mut gone = prune_table(txn, &self.assertions, |exp| *exp < now)?;
            gone += prune_table(txn, &self.revoked, |exp| *exp < now)?;
            gone += prune_table(txn, &self.codes, |c| c.expires < now)?;
            gone += prune_table(txn, &self.sessions, |s| s.expires < now)?;
            gone += prune_table(txn, &self.refresh, |r| r.expires < now)?;
            gone += prune_table(txn, &self.families, |f| f.expires < now)?;
            gone += prune_table(txn, &self.par, |p| p.expires < now)?;
            gone += prune_table(txn, &self.dpop_proofs, |exp| *exp < now)?;
            let ended: Vec<([u8; 32], DeviceRec)> =
                txn.range(&self.devices, None, usize::MAX)?.into_iter().filter(|(_, d)| d.expires < now).collect();
            for (k, d) in ended {
                txn.delete(&self.user_codes, &d.user_code)?;
                gone += u64::from(txn.delete(&self.devices, &k)?);
            }
            Ok(gone)
        })
    }

    /// Records the first use of a one-time identifier (an assertion's or a
    /// DPoP proof's `jti`, under its issuer's `scope`) in `table` until
    /// `until`; committed before it answers. Whether this was the first use.
    pub async fn first_use(&self, table: Table<[u8; 32], u64>, scope: &[&str], until: u64) -> Result<bool, StoreError> {
        // SHA-256 of the parts joined by a 0 byte (the key the tables document).
        let key = openssl::sha::sha256(scope.join("\0").as_bytes());
        self.write_grouped(move |txn| -> Result<bool, StoreError> {
            if txn.get(&table, &key)?.is_some() {
                return Ok(false);
            }
            txn.put(&table, &key, &until)?;
            Ok(true)
        })
        .await
    }

    /// tokend's own random key called `name` (32 bytes), made on first use.
    pub fn secret(&self, name: &str) -> Result<[u8; 32], StoreError> {
        let name = name.to_owned();
        // Read first: a store opened read-only still has its secrets.
        if let Some(k) = self.store.read(|txn| txn.get(&self.secrets, &name))? {
            if let Ok(k) = <[u8; 32]>::try_from(k.as_slice()) {
                return Ok(k);
            }
        }
        self.write(|txn| {
            if let Some(k) = txn.get(&self.secrets, &name)? {
                if let Ok(k) = <[u8; 32]>::try_from(k.as_slice()) {
                    return Ok(k);
                }
            }
            let mut k = [0u8; 32];
            openssl::rand::rand_bytes(&mut k)
                .map_err(|e| StoreError::Encode { table: "secrets", detail: format!("random: {e}") })?;
            txn.put(&self.secrets, &name, &k.to_vec())?;
            Ok(k)
        })
    }
}

/// Deletes the records of `table` for which `ended` holds; how many.
fn prune_table<K, V>(txn: &mut WriteTxn<'_>, table: &Table<K, V>, ended: impl Fn(&V) -> bool) -> Result<u64, StoreError>
where
    K: signet_store::Key + Clone,
    V: Serialize + serde::de::DeserializeOwned,
{
    let old: Vec<K> =
        txn.range(table, None, usize::MAX)?.into_iter().filter(|(_, v)| ended(v)).map(|(k, _)| k).collect();
    let mut gone = 0;
    for k in old {
        gone += u64::from(txn.delete(table, &k)?);
    }
    Ok(gone)
}

/// What a full store stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "client assertions, revocations, codes, refresh tokens and client changes are \
     refused (temporarily_unavailable, with Retry-After) until space is freed; client_credentials tokens are still \
     issued, JWKS, discovery and introspection still served";
