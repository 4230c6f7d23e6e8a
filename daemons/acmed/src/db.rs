//! acmed's LMDB tables and records.
//!
//! Resource ids are 16 random bytes (base64url in URLs): unguessable, so a URL
//! leaks nothing about other clients' resources.
//!
//! | table | key | value |
//! |---|---|---|
//! | `accounts` | account id | [`AccountRec`] |
//! | `account_keys` | SHA-256 JWK thumbprint | account id |
//! | `account_orders` | account id ‖ order id | `()`: the account's orders list |
//! | `orders` | order id | [`OrderRec`] |
//! | `authzs` | authorization id | [`AuthzRec`] |
//! | `certs` | serial (DER INTEGER content) | [`CertRec`] |
//! | `eab_keys` | key id | [`EabRec`] |
//! | `valid_authzs` | [`authz_reuse_key`] (account, identifier, wildcard) | the newest valid authorization |
//! | `issuer_switches` | sequence number, from 1 | the name of an issuer `useIssuer` switched to (the last is in use) |
//!
//! Every change a client is told about is committed before the answer leaves
//! (durability `process`: survives `kill -9`; an fsync follows within the
//! flush interval).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use signet_acme::state::{AuthzState, OrderState};
use signet_acme::types::{AccountStatus, AuthorizationStatus, ChallengeStatus, ChallengeType, Identifier, OrderStatus};
use signet_store::{Durability, SpaceWatch, Store, StoreError, StoreOptions, Table, WriteTxn};

/// The LMDB application name and schema version.
pub const STORE_APPLICATION: &str = "acmed";
/// Bumped when a record changes shape.
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// A resource id.
pub type Id = [u8; 16];

/// An account.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AccountRec {
    /// The account key, as its canonical JWK JSON (RFC 7638 members).
    pub jwk: String,
    /// valid, deactivated or revoked.
    #[serde(with = "account_status")]
    pub status: AccountStatus,
    /// mailto: URLs.
    pub contact: Vec<String>,
    /// Unix seconds.
    pub created: i64,
    /// The external account binding key id, when bound.
    pub eab_kid: Option<String>,
}

/// An order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrderRec {
    /// The owner.
    pub account: Id,
    /// Its state.
    #[serde(with = "order_status")]
    pub status: OrderStatus,
    /// Unix seconds.
    pub expires: i64,
    /// The identifiers, normalised.
    pub identifiers: Vec<Identifier>,
    /// One authorization per identifier, same order.
    pub authzs: Vec<Id>,
    /// The profile name.
    pub profile: String,
    /// The ARI certificate id this order replaces.
    pub replaces: Option<String>,
    /// Requested notBefore/notAfter, Unix seconds.
    pub not_before: Option<i64>,
    /// Requested notAfter, Unix seconds.
    pub not_after: Option<i64>,
    /// Why the order is invalid (problem document JSON).
    pub error: Option<String>,
    /// The certificate's serial once valid.
    pub cert_serial: Option<Vec<u8>>,
}

/// An authorization with its challenges.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuthzRec {
    /// The owner.
    pub account: Id,
    /// The identifier (without `*.` for a wildcard).
    pub identifier: Identifier,
    /// Whether the order asked for `*.identifier`.
    pub wildcard: bool,
    /// Its state.
    #[serde(with = "authz_status")]
    pub status: AuthorizationStatus,
    /// Unix seconds.
    pub expires: i64,
    /// The challenges offered.
    pub challenges: Vec<ChallengeRec>,
}

/// One challenge of an authorization.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChallengeRec {
    /// http-01, dns-01, tls-alpn-01, dns-persist-01.
    pub kind: String,
    /// The token (none for dns-persist-01).
    pub token: String,
    /// Its state.
    #[serde(with = "challenge_status")]
    pub status: ChallengeStatus,
    /// When it was validated, Unix seconds.
    pub validated: Option<i64>,
    /// Why validation failed (problem document JSON).
    pub error: Option<String>,
}

impl OrderRec {
    /// What the state rules read of this order.
    pub fn state(&self) -> OrderState {
        OrderState { status: self.status, expires: self.expires }
    }

    /// The order's status at `now`, given its authorizations (see
    /// [`OrderState::status_at`]).
    pub fn status_at(&self, authzs: &[AuthzRec], now: i64) -> OrderStatus {
        self.state().status_at(authzs.iter().map(AuthzRec::state), now)
    }
}

impl AuthzRec {
    /// What the state rules read of this authorization.
    pub fn state(&self) -> AuthzState {
        AuthzState { status: self.status, expires: self.expires }
    }
}

impl ChallengeRec {
    /// The challenge type.
    pub fn challenge_type(&self) -> ChallengeType {
        ChallengeType::from(self.kind.as_str())
    }
}

/// An issued certificate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CertRec {
    /// The certificate, DER.
    #[serde(with = "serde_bytes")]
    pub der: Vec<u8>,
    /// The account it was issued to.
    pub account: Id,
    /// The order it completed.
    pub order: Id,
    /// notBefore and notAfter, Unix seconds.
    pub not_before: i64,
    /// notAfter, Unix seconds.
    pub not_after: i64,
    /// Revocation time and reason, once revoked.
    pub revoked: Option<(i64, u8)>,
    /// The order that replaced it (RFC 9773 `replaces`).
    pub replaced_by: Option<Id>,
}

/// An external account binding key (RFC 8555 §7.3.4).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EabRec {
    /// The MAC key.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Unix seconds.
    pub created: i64,
    /// The account it was used for (a key binds one account).
    pub account: Option<Id>,
    /// An operator's note.
    pub note: String,
}

/// The store and its tables.
#[derive(Clone)]
pub struct Db {
    /// The environment.
    pub store: Store,
    /// A full filesystem, logged once ([`Db::write`]).
    pub space: Arc<SpaceWatch>,
    /// See the module table.
    pub accounts: Table<Id, AccountRec>,
    /// See the module table.
    pub account_keys: Table<[u8; 32], Id>,
    /// See the module table.
    pub account_orders: Table<[u8; 32], ()>,
    /// See the module table.
    pub orders: Table<Id, OrderRec>,
    /// See the module table.
    pub authzs: Table<Id, AuthzRec>,
    /// See the module table.
    pub certs: Table<Vec<u8>, CertRec>,
    /// See the module table.
    pub eab_keys: Table<String, EabRec>,
    /// See the module table.
    pub valid_authzs: Table<[u8; 32], Id>,
    /// See the module table.
    pub issuer_switches: Table<u32, String>,
}

impl Db {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Db, StoreError> {
        let mut opts = StoreOptions::new(STORE_APPLICATION, STORE_SCHEMA_VERSION);
        opts.durability = Durability::Process { flush_interval: Duration::from_millis(200) };
        opts.max_tables = 16;
        let store = Store::open(dir, opts)?;
        Ok(Db {
            accounts: store.table("accounts")?,
            account_keys: store.table("account_keys")?,
            account_orders: store.table("account_orders")?,
            orders: store.table("orders")?,
            authzs: store.table("authzs")?,
            certs: store.table("certs")?,
            eab_keys: store.table("eab_keys")?,
            valid_authzs: store.table("valid_authzs")?,
            issuer_switches: store.table("issuer_switches")?,
            space: Arc::new(SpaceWatch::new(store.path(), FULL_CONSEQUENCE)),
            store,
        })
    }

    /// [`Store::try_write`], its outcome noted by [`Db::space`] (a full disk is logged once).
    pub fn write<R>(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let out = self.store.try_write(f);
        self.space.note(&out);
        out
    }
}

/// What a full store stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "new accounts, orders, authorizations, validations, certificates and revocations \
     are refused (serverInternal, with Retry-After) until space is freed; what is stored is still served";

/// The key of `account_orders`.
pub fn account_order_key(account: &Id, order: &Id) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..16].copy_from_slice(account);
    k[16..].copy_from_slice(order);
    k
}

/// The key of `valid_authzs`: SHA-256 over the account, the identifier and the wildcard flag.
pub fn authz_reuse_key(account: &Id, identifier: &Identifier, wildcard: bool) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(account);
    h.update(identifier.kind.as_str().as_bytes());
    h.update([0]);
    h.update(identifier.value.as_bytes());
    h.update([u8::from(wildcard)]);
    h.finalize().into()
}

macro_rules! status_serde {
    ($module:ident, $ty:ty, [$($variant:ident = $code:literal),*]) => {
        mod $module {
            use serde::{Deserialize, Deserializer, Serializer};
            use signet_acme::types::*;
            #[allow(clippy::trivially_copy_pass_by_ref)]
            pub fn serialize<S: Serializer>(v: &$ty, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u8(match v { $(<$ty>::$variant => $code,)* })
            }
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                match u8::deserialize(d)? {
                    $($code => Ok(<$ty>::$variant),)*
                    other => Err(serde::de::Error::custom(format!("unknown status {other}"))),
                }
            }
        }
    };
}

status_serde!(account_status, AccountStatus, [Valid = 0, Deactivated = 1, Revoked = 2]);
status_serde!(order_status, OrderStatus, [Pending = 0, Ready = 1, Processing = 2, Valid = 3, Invalid = 4]);
status_serde!(
    authz_status,
    AuthorizationStatus,
    [Pending = 0, Valid = 1, Invalid = 2, Deactivated = 3, Expired = 4, Revoked = 5]
);
status_serde!(challenge_status, ChallengeStatus, [Pending = 0, Processing = 1, Valid = 2, Invalid = 3]);
