//! The log's LMDB tables: sequencing state, deduplication and the leaf hash
//! index. Several logs share one environment; every key starts with the log ID.
//!
//! | table | key | value |
//! |---|---|---|
//! | `ct_state` | log ID | [`LogState`]: tree size, root, the latest signed tree head |
//! | `ct_dedup` | log ID ‖ identity hash | [`DedupRecord`]: index, timestamp, SCT |
//! | `ct_leaf_index` | log ID ‖ leaf hash | the leaf index (for `get-proof-by-hash`) |

use serde::{Deserialize, Serialize};
use signet_ct::{Hash, LogId};
use signet_store::{Store, StoreError, Table};

/// The application name of ctlogd's store.
pub const STORE_APPLICATION: &str = "ctlogd";
/// The table layout version.
pub const SCHEMA_VERSION: u32 = 1;

/// A log's committed sequencing state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogState {
    /// Number of entries.
    pub size: u64,
    /// Root hash at `size`.
    pub root: Hash,
    /// Timestamp (ms) of the latest signed tree head, at `size`.
    pub head_timestamp: u64,
    /// Its signature: a TLS-encoded `DigitallySigned`.
    #[serde(with = "serde_bytes")]
    pub head_signature: Vec<u8>,
}

/// What an entry got when it was first sequenced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupRecord {
    /// Its leaf index.
    pub index: u64,
    /// Its SCT timestamp (ms).
    pub timestamp: u64,
    /// The TLS-encoded SCT.
    #[serde(with = "serde_bytes")]
    pub sct: Vec<u8>,
}

/// Errors from the log's tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// LMDB failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The committed tree size is not the one the writer started from
    /// (another process is sequencing this log, or the state was restored).
    #[error("log state changed under the sequencer: size {found}, expected {expected}")]
    Conflict {
        /// Size found in the database.
        found: u64,
        /// Size the batch was built on.
        expected: u64,
    },
}

/// One log's view of the store.
#[derive(Debug, Clone)]
pub struct LogDb {
    store: Store,
    log_id: LogId,
    state: Table<LogId, LogState>,
    dedup: Table<[u8; 64], DedupRecord>,
    leaf_index: Table<[u8; 64], u64>,
}

/// A batch's writes, committed together.
#[derive(Debug, Clone, Default)]
pub struct BatchCommit {
    /// The new state.
    pub state: Option<LogState>,
    /// New entries: identity hash and what it got.
    pub dedup: Vec<(Hash, DedupRecord)>,
    /// New entries: leaf hash and index.
    pub leaf_hashes: Vec<(Hash, u64)>,
}

impl LogDb {
    /// The tables of log `log_id` in `store` (created if missing).
    pub fn open(store: &Store, log_id: LogId) -> Result<Self, DbError> {
        Ok(Self {
            store: store.clone(),
            log_id,
            state: store.table("ct_state")?,
            dedup: store.table("ct_dedup")?,
            leaf_index: store.table("ct_leaf_index")?,
        })
    }

    /// The committed state, if the log has one.
    pub fn state(&self) -> Result<Option<LogState>, DbError> {
        Ok(self.store.read(|t| t.get(&self.state, &self.log_id))?)
    }

    /// What an entry with this identity hash got, if it was sequenced.
    pub fn dedup(&self, identity: &Hash) -> Result<Option<DedupRecord>, DbError> {
        let key = self.key(identity);
        Ok(self.store.read(|t| t.get(&self.dedup, &key))?)
    }

    /// The dedup records of several identities, in one read transaction.
    pub fn dedup_many(&self, identities: &[Hash]) -> Result<Vec<Option<DedupRecord>>, DbError> {
        Ok(self.store.read(|t| identities.iter().map(|i| t.get(&self.dedup, &self.key(i))).collect())?)
    }

    /// The index of the first leaf with this leaf hash.
    pub fn leaf_index(&self, leaf_hash: &Hash) -> Result<Option<u64>, DbError> {
        let key = self.key(leaf_hash);
        Ok(self.store.read(|t| t.get(&self.leaf_index, &key))?)
    }

    /// Commits a batch durably (one fsynced transaction, shared with other
    /// logs' batches), if the committed size is still `expected_size`.
    pub async fn commit(&self, expected_size: Option<u64>, batch: BatchCommit) -> Result<(), DbError> {
        let this = self.clone();
        self.store
            .write_grouped(move |t| {
                let found = t.get(&this.state, &this.log_id)?.map(|s| s.size);
                if found != expected_size {
                    return Err(DbError::Conflict { found: found.unwrap_or(0), expected: expected_size.unwrap_or(0) });
                }
                if let Some(state) = &batch.state {
                    t.put(&this.state, &this.log_id, state)?;
                }
                for (identity, record) in &batch.dedup {
                    t.put(&this.dedup, &this.key(identity), record)?;
                }
                for (hash, index) in &batch.leaf_hashes {
                    // The first occurrence wins (a leaf hash repeats only for identical entries).
                    let key = this.key(hash);
                    if t.get(&this.leaf_index, &key)?.is_none() {
                        t.put(&this.leaf_index, &key, index)?;
                    }
                }
                Ok(())
            })
            .await
    }

    fn key(&self, hash: &Hash) -> [u8; 64] {
        let mut k = [0u8; 64];
        k[..32].copy_from_slice(&self.log_id);
        k[32..].copy_from_slice(hash);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_store::StoreOptions;

    #[tokio::test]
    async fn commits_are_checked_and_keyed_by_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::new(STORE_APPLICATION, SCHEMA_VERSION)).unwrap();
        let (a, b) = (LogDb::open(&store, [1; 32]).unwrap(), LogDb::open(&store, [2; 32]).unwrap());
        assert_eq!(a.state().unwrap(), None);
        let state = LogState { size: 1, root: [9; 32], head_timestamp: 5, head_signature: vec![1, 2] };
        let record = DedupRecord { index: 0, timestamp: 5, sct: vec![3] };
        let batch = BatchCommit {
            state: Some(state.clone()),
            dedup: vec![([7; 32], record.clone())],
            leaf_hashes: vec![([8; 32], 0)],
        };
        a.commit(None, batch.clone()).await.unwrap();
        assert_eq!(a.state().unwrap(), Some(state));
        assert_eq!(a.dedup(&[7; 32]).unwrap(), Some(record));
        assert_eq!(a.leaf_index(&[8; 32]).unwrap(), Some(0));
        assert_eq!(b.state().unwrap(), None);
        assert_eq!(b.dedup(&[7; 32]).unwrap(), None);
        // A writer that started from another size is refused.
        assert!(matches!(a.commit(None, batch).await, Err(DbError::Conflict { found: 1, .. })));
    }
}
