//! Token signing keys: every key signd lets tokend's role use, published in
//! the JWKS before it signs and after it stops.
//!
//! The rotation rules (RFC 7517 has none; these are what relying parties that
//! cache a JWKS need):
//! - a key tokend has not listed before is published at once, and signs only
//!   `key_publish_seconds` later, so a relying party that cached the JWKS just
//!   before has time to fetch it again; at the very first start (no key usable
//!   at all) the newest key signs at once;
//! - the newest usable key of the configured `alg` signs; the one it replaced
//!   is marked superseded and stays published until every token it signed has
//!   expired (`access_token_seconds` after), then leaves the JWKS;
//! - a key signd no longer lists (deleted, or its role taken away) leaves at
//!   the next refresh.
//!
//! The key list is read from signd at start, every `key_refresh_seconds`, and
//! on `signetctl oauth key refresh|rotate`.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use signet_ipc::{IpcError, KeyInfo, SigndClient};
use signet_jose::{Algorithm, Jwks};
use signet_store::StoreError;

use crate::db::{Db, KeyRec};

/// A published key, as the admin interface shows it.
#[derive(Clone, Debug)]
pub struct PublishedKey {
    /// signd's key id, the JWS `kid`.
    pub kid: String,
    /// Its JOSE `alg`.
    pub alg: Algorithm,
    /// When tokend first saw it.
    pub first_seen: u64,
    /// When a newer key replaced it.
    pub superseded: Option<u64>,
    /// Whether it signs new tokens.
    pub signing: bool,
}

/// One view of the keys, swapped whole on refresh.
#[derive(Debug)]
pub struct KeyView {
    /// The key new tokens are signed with (kid, alg).
    pub signer: Option<(String, Algorithm)>,
    /// `GET /jwks`'s body.
    pub jwks_json: Bytes,
    /// The same keys, for verifying tokend's own tokens (introspection,
    /// revocation, token exchange).
    pub jwks: Jwks,
    /// Every published key.
    pub published: Vec<PublishedKey>,
}

/// Why the keys could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// signd refused or is unreachable.
    #[error("signd: {0}")]
    Signd(#[from] IpcError),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A key could not be published.
    #[error("key `{kid}`: {detail}")]
    Key {
        /// The key.
        kid: String,
        /// What went wrong.
        detail: String,
    },
}

/// The key set.
pub struct Keys {
    signd: SigndClient,
    role: String,
    db: Db,
    alg: Algorithm,
    publish_seconds: u64,
    token_seconds: u64,
    view: RwLock<Arc<KeyView>>,
}

impl Keys {
    /// A key set with nothing published yet; [`Keys::refresh`] fills it.
    pub fn new(
        signd: SigndClient,
        role: String,
        db: Db,
        alg: Algorithm,
        publish_seconds: u64,
        token_seconds: u64,
    ) -> Self {
        let empty = KeyView {
            signer: None,
            jwks_json: Bytes::from_static(b"{\"keys\":[]}"),
            jwks: Jwks::default(),
            published: Vec::new(),
        };
        Self { signd, role, db, alg, publish_seconds, token_seconds, view: RwLock::new(Arc::new(empty)) }
    }

    /// The current view.
    pub fn view(&self) -> Arc<KeyView> {
        match self.view.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The signd client tokens are signed through.
    pub fn signd(&self) -> &SigndClient {
        &self.signd
    }

    /// The signd role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// Reads signd's key list and applies the rotation rules at `now`.
    pub async fn refresh(&self, now: u64) -> Result<Arc<KeyView>, KeyError> {
        let listed = self.signd.list_keys(&self.role).await?;
        let db = self.db.clone();
        let (alg, publish, token_seconds) = (self.alg, self.publish_seconds, self.token_seconds);
        let view = tokio::task::spawn_blocking(move || plan(&db, listed, alg, publish, token_seconds, now))
            .await
            .map_err(|e| KeyError::Key { kid: String::new(), detail: format!("refresh task: {e}") })??;
        let view = Arc::new(view);
        match self.view.write() {
            Ok(mut v) => *v = view.clone(),
            Err(poisoned) => *poisoned.into_inner() = view.clone(),
        }
        Ok(view)
    }
}

/// When each of `usable` was first seen, recorded on first sight. A store that
/// refuses writes (full, read-only; logged once) records nothing: a key it does not
/// know counts as first seen `now`, so it waits out its publication delay before it
/// signs, and is recorded at a later refresh.
fn first_sight(db: &Db, usable: &[KeyInfo], publish: u64, now: u64) -> Result<Vec<KeyRec>, StoreError> {
    let known: Vec<Option<KeyRec>> = db.store.read(|txn| usable.iter().map(|k| txn.get(&db.keys, &k.id)).collect())?;
    if known.iter().all(Option::is_some) {
        return Ok(known.into_iter().flatten().collect());
    }
    let recorded = db.write(|txn| {
        let any_known = !txn.range(&db.keys, None, 1)?.is_empty();
        let mut recs = Vec::new();
        for k in usable {
            let rec = match txn.get(&db.keys, &k.id)? {
                Some(r) => r,
                None => {
                    // At the first start keys are usable at once (nothing could have cached a JWKS).
                    let first_seen = if any_known { now } else { now.saturating_sub(publish) };
                    let r = KeyRec { first_seen, superseded: None };
                    txn.put(&db.keys, &k.id, &r)?;
                    r
                }
            };
            recs.push(rec);
        }
        Ok(recs)
    });
    match recorded {
        Err(e) if e.refuses_writes().is_some() => {
            Ok(known.into_iter().map(|r| r.unwrap_or(KeyRec { first_seen: now, superseded: None })).collect())
        }
        other => other,
    }
}

/// The rotation rules over signd's list, recorded in LMDB (first sight,
/// supersession), giving the new view.
fn plan(
    db: &Db,
    listed: Vec<KeyInfo>,
    alg: Algorithm,
    publish: u64,
    token_seconds: u64,
    now: u64,
) -> Result<KeyView, KeyError> {
    let usable: Vec<KeyInfo> = listed.into_iter().filter(|k| k.available).collect();
    let recs = first_sight(db, &usable, publish, now)?;
    // The signer: the newest key of `alg` past its publication delay.
    let signer_idx = usable
        .iter()
        .zip(&recs)
        .enumerate()
        .filter(|(_, (k, r))| {
            alg.fits_key(k.algorithm) && Algorithm::default_for(k.algorithm) == alg && r.first_seen + publish <= now
        })
        .max_by(|(_, (ka, ra)), (_, (kb, rb))| (ra.first_seen, &ka.id).cmp(&(rb.first_seen, &kb.id)))
        .map(|(i, _)| i);
    let signer_seen = signer_idx.map(|i| recs[i].first_seen);
    // Older keys of `alg` that signed before are superseded now; record it.
    let mut updates = Vec::new();
    for (i, (k, r)) in usable.iter().zip(&recs).enumerate() {
        let older = signer_seen.is_some_and(|s| r.first_seen <= s) && Some(i) != signer_idx;
        if older && r.superseded.is_none() {
            updates.push((k.id.clone(), KeyRec { first_seen: r.first_seen, superseded: Some(now) }));
        }
    }
    if !updates.is_empty() {
        let recorded = db.write(|txn| {
            for (kid, rec) in &updates {
                txn.put(&db.keys, kid, rec)?;
            }
            Ok(())
        });
        // A store that refuses writes (logged once): the supersession holds in memory,
        // and is recorded at a later refresh.
        match recorded {
            Err(e) if e.refuses_writes().is_some() => {}
            other => other?,
        }
    }
    let mut entries = Vec::new();
    let mut published = Vec::new();
    for (i, (k, r)) in usable.iter().zip(&recs).enumerate() {
        let superseded = updates.iter().find(|(id, _)| *id == k.id).map_or(r.superseded, |(_, u)| u.superseded);
        if superseded.is_some_and(|s| s + token_seconds < now) {
            continue; // every token it signed has expired
        }
        let key_alg = Algorithm::default_for(k.algorithm);
        let entry = signet_jose::jwk_json(&k.spki, &k.id, key_alg)
            .map_err(|e| KeyError::Key { kid: k.id.clone(), detail: e.to_string() })?;
        entries.push(entry);
        published.push(PublishedKey {
            kid: k.id.clone(),
            alg: key_alg,
            first_seen: r.first_seen,
            superseded,
            signing: Some(i) == signer_idx,
        });
    }
    let jwks_json = serde_json::json!({ "keys": entries }).to_string();
    let jwks =
        Jwks::parse(jwks_json.as_bytes()).map_err(|e| KeyError::Key { kid: String::new(), detail: e.to_string() })?;
    let signer = signer_idx.map(|i| (usable[i].id.clone(), Algorithm::default_for(usable[i].algorithm)));
    Ok(KeyView { signer, jwks_json: Bytes::from(jwks_json), jwks, published })
}
