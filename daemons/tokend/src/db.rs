//! tokend's LMDB tables and records.
//!
//! | table | key | value |
//! |---|---|---|
//! | `clients` | client id | [`ClientRec`] |
//! | `assertions` | SHA-256(client id ‖ 0 ‖ `jti`) | the assertion's `exp`: a client assertion's `jti` seen |
//! | `revoked` | access token `jti` | its `exp`: revoked until then (RFC 7009) |
//! | `keys` | signd key id | [`KeyRec`]: when tokend first saw the key, and when a newer one replaced it |
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
}

impl AuthMethod {
    /// Every method, in the order metadata lists them.
    pub const ALL: [AuthMethod; 5] = [
        AuthMethod::ClientSecretBasic,
        AuthMethod::ClientSecretPost,
        AuthMethod::ClientSecretJwt,
        AuthMethod::PrivateKeyJwt,
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
        }
    }

    /// The method of a registered name.
    pub fn from_name(name: &str) -> Option<AuthMethod> {
        AuthMethod::ALL.into_iter().find(|m| m.name() == name)
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
    /// The client's public keys (private_key_jwt), a JWKS document.
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
}

impl Db {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Db, StoreError> {
        let mut opts = StoreOptions::new(STORE_APPLICATION, STORE_SCHEMA_VERSION);
        opts.durability = Durability::Sync;
        opts.max_tables = 8;
        let store = Store::open(dir, opts)?;
        Ok(Db {
            clients: store.table("clients")?,
            assertions: store.table("assertions")?,
            revoked: store.table("revoked")?,
            keys: store.table("keys")?,
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

    /// Deletes replay and revocation records whose token expired before `now`.
    pub fn prune(&self, now: u64) -> Result<u64, StoreError> {
        self.write(|txn| {
            let mut gone = 0;
            let old_assertions: Vec<[u8; 32]> = txn
                .range(&self.assertions, None, usize::MAX)?
                .into_iter()
                .filter(|(_, exp)| *exp < now)
                .map(|(k, _)| k)
                .collect();
            for k in old_assertions {
                gone += u64::from(txn.delete(&self.assertions, &k)?);
            }
            let old_revoked: Vec<String> = txn
                .range(&self.revoked, None, usize::MAX)?
                .into_iter()
                .filter(|(_, exp)| *exp < now)
                .map(|(k, _)| k)
                .collect();
            for k in old_revoked {
                gone += u64::from(txn.delete(&self.revoked, &k)?);
            }
            Ok(gone)
        })
    }
}

/// What a full store stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "client assertions, revocations and client changes are refused (server_error, \
     with Retry-After) until space is freed; client_credentials tokens are still issued";
