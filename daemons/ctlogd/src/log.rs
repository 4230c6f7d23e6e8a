//! One log as the HTTP layer sees it: submissions (checked, then sequenced)
//! and every read of both APIs, computed from the tiles in [`Storage`] and the
//! published tree head, never from anything beyond it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use signet_ct::merkle::tile::{entries_at_level, hashes_from_tile_bytes};
use signet_ct::merkle::{consistency_proof, inclusion_proof, Tile, TileHashReader, TILE_WIDTH};
use signet_ct::rfc6962::api::{
    base64, parse_add_chain, precert_extra_data, x509_extra_data, AddChainLimits, AddChainResponse, GetRootsResponse,
    GetSthResponse, LeafEntry,
};
use signet_ct::staticct::{decode_data_tile, TileLeaf};
use signet_ct::{Hash, LogId, MerkleError};

use crate::chain::{rfc3339, Roots, Submission, TemporalWindow};
use signet_types::Clock;

use crate::sequencer::{Sequencer, SignedHead, SubmitError};
use crate::storage::{ObjectKey, Storage, StorageError};

/// Most issuers kept in memory for `get-entries`.
const ISSUER_CACHE: usize = 1024;

/// What a log is, beyond its sequencer.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Human-readable description (log list `description`).
    pub description: String,
    /// The RFC 6962 / submission prefix URL, ending in `/` (`https://ct.example.net/2026h1/`).
    pub submission_url: String,
    /// The static-ct-api monitoring prefix URL, ending in `/`.
    pub monitoring_url: String,
    /// The log's public key, DER `SubjectPublicKeyInfo`.
    pub public_key_der: Vec<u8>,
    /// The accepted NotAfter interval, if the log is a temporal shard.
    pub window: Option<TemporalWindow>,
    /// Maximum merge delay, in seconds.
    pub mmd_secs: u64,
    /// Limits on `add-chain` bodies.
    pub limits: AddChainLimits,
    /// Most entries one `get-entries` returns.
    pub max_get_entries: u64,
    /// Where "now" comes from (validity and temporal window checks).
    pub clock: Clock,
}

/// An error of a log operation, with the HTTP status it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The request is invalid (400).
    #[error("{0}")]
    BadRequest(String),
    /// No such object or entry (404).
    #[error("{0}")]
    NotFound(String),
    /// Over the sequencing backlog (429 with `Retry-After`).
    #[error("log is busy, retry later")]
    Busy {
        /// Seconds to wait.
        retry_after_secs: u64,
    },
    /// Storage, signer or sequencer trouble (503).
    #[error("{0}")]
    Unavailable(String),
}

impl From<StorageError> for LogError {
    fn from(e: StorageError) -> Self {
        tracing::warn!(error = %e, "storage read failed");
        LogError::Unavailable("storage unavailable".into())
    }
}

impl From<MerkleError> for LogError {
    fn from(e: MerkleError) -> Self {
        LogError::BadRequest(e.to_string())
    }
}

/// One log.
pub struct Log {
    config: LogConfig,
    log_id: LogId,
    roots: Arc<Roots>,
    sequencer: Sequencer,
    storage: Arc<dyn Storage>,
    issuers: Mutex<HashMap<Hash, Bytes>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("submission_url", &self.config.submission_url).finish()
    }
}

impl Log {
    /// A log over a started sequencer and its storage.
    pub fn new(config: LogConfig, roots: Arc<Roots>, sequencer: Sequencer, storage: Arc<dyn Storage>) -> Self {
        let log_id = sequencer.log_id();
        Self { config, log_id, roots, sequencer, storage, issuers: Mutex::new(HashMap::new()) }
    }

    /// The log ID (SHA-256 of its public key).
    pub fn log_id(&self) -> LogId {
        self.log_id
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The roots (to reload them).
    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// The sequencer.
    pub fn sequencer(&self) -> &Sequencer {
        &self.sequencer
    }

    /// The published signed tree head.
    pub fn head(&self) -> Arc<SignedHead> {
        self.sequencer.head()
    }

    /// `add-chain` / `add-pre-chain`: checks the body and chain, sequences
    /// the entry and returns its SCT once it is durable.
    pub async fn add_chain(&self, body: &[u8], kind: Submission) -> Result<AddChainResponse, LogError> {
        let chain = parse_add_chain(body, &self.config.limits).map_err(|e| LogError::BadRequest(e.to_string()))?;
        let entry = self
            .roots
            .check(&chain, kind, self.config.window, self.config.clock.now())
            .map_err(|e| LogError::BadRequest(e.to_string()))?;
        let sct = self.sequencer.submit(entry).await.map_err(|e| match e {
            SubmitError::Pushback { retry_after } => LogError::Busy { retry_after_secs: retry_after.as_secs().max(1) },
            e => LogError::Unavailable(e.to_string()),
        })?;
        AddChainResponse::from_sct(&sct).map_err(|e| LogError::Unavailable(e.to_string()))
    }

    /// `get-roots`.
    pub fn roots_response(&self) -> GetRootsResponse {
        GetRootsResponse { certificates: self.roots.certificates().iter().map(|c| base64(c)).collect() }
    }

    /// `get-sth`.
    pub fn sth(&self) -> Result<GetSthResponse, LogError> {
        let h = self.head();
        GetSthResponse::new(&h.head, &h.signature).map_err(|e| LogError::Unavailable(e.to_string()))
    }

    /// `get-sth-consistency`: a proof between two sizes of the published tree.
    pub async fn consistency(&self, first: u64, second: u64) -> Result<Vec<Hash>, LogError> {
        let size = self.head().head.tree_size;
        if first > second || second > size {
            return Err(LogError::BadRequest(format!("need first <= second <= {size}")));
        }
        if first == 0 || first == second {
            return Ok(Vec::new());
        }
        self.with_tiles(size, |r| consistency_proof(r, first, second)).await
    }

    /// `get-proof-by-hash`: the index of a leaf hash and its inclusion proof.
    pub async fn proof_by_hash(&self, leaf_hash: &Hash, tree_size: u64) -> Result<(u64, Vec<Hash>), LogError> {
        let size = self.head().head.tree_size;
        if tree_size == 0 || tree_size > size {
            return Err(LogError::BadRequest(format!("tree_size must be in 1..={size}")));
        }
        let index = self
            .sequencer
            .db()
            .leaf_index(leaf_hash)
            .map_err(|e| LogError::Unavailable(e.to_string()))?
            .filter(|i| *i < tree_size)
            .ok_or_else(|| LogError::NotFound("no leaf with this hash in a tree of that size".into()))?;
        let proof = self.with_tiles(size, |r| inclusion_proof(r, index, tree_size)).await?;
        Ok((index, proof))
    }

    /// `get-entry-and-proof`.
    pub async fn entry_and_proof(&self, index: u64, tree_size: u64) -> Result<(LeafEntry, Vec<Hash>), LogError> {
        let size = self.head().head.tree_size;
        if index >= tree_size || tree_size > size {
            return Err(LogError::BadRequest(format!("need leaf_index < tree_size <= {size}")));
        }
        let entry = self.entries(index, index).await?.pop().ok_or_else(|| LogError::NotFound("no entry".into()))?;
        let proof = self.with_tiles(size, |r| inclusion_proof(r, index, tree_size)).await?;
        Ok((entry, proof))
    }

    /// `get-entries`: entries `start..=end`, cut at the tree size and at
    /// [`LogConfig::max_get_entries`].
    pub async fn entries(&self, start: u64, end: u64) -> Result<Vec<LeafEntry>, LogError> {
        let size = self.head().head.tree_size;
        if start > end || start >= size {
            return Err(LogError::BadRequest(format!("need start <= end and start < tree size {size}")));
        }
        let end = end.min(size - 1).min(start + self.config.max_get_entries.max(1) - 1);
        let width = u64::from(TILE_WIDTH);
        let mut out = Vec::with_capacity((end - start + 1) as usize);
        for n in start / width..=end / width {
            let tile =
                Tile::in_tree(0, n, size).ok_or_else(|| LogError::Unavailable("data tile outside tree".into()))?;
            let bytes = self.object(ObjectKey::DataTile(tile)).await?.ok_or_else(|| missing(&tile))?;
            let leaves = decode_data_tile(&bytes).map_err(|_| missing(&tile))?;
            let first = n * width;
            for (i, leaf) in leaves.iter().enumerate() {
                let index = first + i as u64;
                if (start..=end).contains(&index) {
                    out.push(self.leaf_entry(leaf).await?);
                }
            }
        }
        Ok(out)
    }

    async fn leaf_entry(&self, leaf: &TileLeaf) -> Result<LeafEntry, LogError> {
        let mut issuers = Vec::with_capacity(leaf.chain_fingerprints.len());
        for fp in &leaf.chain_fingerprints {
            issuers.push(self.issuer(fp).await?);
        }
        let bad = |e: &dyn std::fmt::Display| LogError::Unavailable(format!("stored entry: {e}"));
        let extra = match &leaf.pre_certificate {
            Some(pre) => precert_extra_data(pre, &issuers),
            None => x509_extra_data(&issuers),
        }
        .map_err(|e| bad(&e))?;
        let input = leaf.entry.merkle_tree_leaf().map_err(|e| bad(&e))?;
        Ok(LeafEntry { leaf_input: base64(&input), extra_data: base64(&extra) })
    }

    async fn issuer(&self, fp: &Hash) -> Result<Bytes, LogError> {
        if let Some(b) = self.issuers.lock().unwrap_or_else(|p| p.into_inner()).get(fp) {
            return Ok(b.clone());
        }
        let b = self
            .storage
            .get(ObjectKey::Issuer(*fp))
            .await?
            .ok_or_else(|| LogError::Unavailable("an issuer of a stored entry is missing".into()))?;
        let mut cache = self.issuers.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= ISSUER_CACHE {
            cache.clear();
        }
        cache.insert(*fp, b.clone());
        Ok(b)
    }

    /// A static-ct-api object, if the published tree covers it: tiles wider
    /// than the tree (left by a batch not yet published, or by a crash) are
    /// not served. The checkpoint is the published one.
    pub async fn object(&self, key: ObjectKey) -> Result<Option<Bytes>, StorageError> {
        let size = self.head().head.tree_size;
        let covered = |t: &Tile| {
            let start = t.index().saturating_mul(u64::from(TILE_WIDTH));
            start.saturating_add(u64::from(t.width())) <= entries_at_level(t.level(), size)
        };
        match key {
            ObjectKey::Checkpoint => Ok(Some(Bytes::from(self.head().checkpoint.clone()))),
            ObjectKey::Tile(t) | ObjectKey::DataTile(t) if !covered(&t) => Ok(None),
            key => self.storage.get(key).await,
        }
    }

    /// Runs `f` (a proof computation) over the tiles of the tree of `size`:
    /// a first run with placeholder hashes finds the tiles it reads, which
    /// are then fetched together, and a second run computes the real result.
    async fn with_tiles<T>(
        &self,
        size: u64,
        f: impl Fn(&mut TileHashReader<&mut dyn FnMut(Tile) -> Result<Vec<Hash>, MerkleError>>) -> Result<T, MerkleError>,
    ) -> Result<T, LogError> {
        let mut wanted = Vec::new();
        {
            let mut record = |t: Tile| {
                wanted.push(t);
                Ok(vec![[0u8; 32]; usize::from(t.width())])
            };
            let mut reader = TileHashReader::new(&mut record as &mut dyn FnMut(Tile) -> _, size);
            f(&mut reader)?;
        }
        let mut tiles = HashMap::new();
        for t in wanted {
            let bytes = self.storage.get(ObjectKey::Tile(t)).await?.ok_or_else(|| missing(&t))?;
            let hashes = hashes_from_tile_bytes(&bytes).ok_or_else(|| missing(&t))?;
            tiles.insert((t.level(), t.index()), hashes);
        }
        let mut read = |t: Tile| {
            tiles
                .get(&(t.level(), t.index()))
                .cloned()
                .ok_or_else(|| MerkleError::Read(format!("tile {} not fetched", t.path()).into()))
        };
        let mut reader = TileHashReader::new(&mut read as &mut dyn FnMut(Tile) -> _, size);
        f(&mut reader).map_err(|e| LogError::Unavailable(e.to_string()))
    }

    /// The log's metadata in the form of a log list v3 entry (as Sunlight's
    /// `log.v3.json`): description, log ID, key, URLs, MMD, temporal interval.
    pub fn metadata(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "description": self.config.description,
            "log_id": base64(&self.log_id),
            "key": base64(&self.config.public_key_der),
            "url": self.config.submission_url,
            "submission_url": self.config.submission_url,
            "monitoring_url": self.config.monitoring_url,
            "mmd": self.config.mmd_secs,
        });
        if let Some(w) = self.config.window {
            v["temporal_interval"] = serde_json::json!({
                "start_inclusive": rfc3339(w.start),
                "end_exclusive": rfc3339(w.end),
            });
        }
        v
    }
}

fn missing(t: &Tile) -> LogError {
    LogError::Unavailable(format!("tile {} is missing or malformed", t.path()))
}
