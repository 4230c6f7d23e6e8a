//! The sequencer's state and its two operations: recovery at start, and the
//! integration of one batch (see the module docs of [`super`] for the order).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use signet_types::Clock;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use signet_ct::merkle::tile::{entries_at_level, hashes_from_tile_bytes, tile_bytes, MAX_TILE_LEVEL};
use signet_ct::merkle::{append_leaves, empty_root, leaf_hash, Tile, TileReader, TILE_WIDTH};
use signet_ct::staticct::note::{Checkpoint, SignedNote};
use signet_ct::staticct::{decode_data_tile, leaf_index_extensions, signed_checkpoint, TileLeaf};
use signet_ct::tls::Writer as TlsWriter;
use signet_ct::{DigitallySigned, Hash, LogId, LogKey, MerkleError, Sct, TimestampedEntry, TreeHead};

use super::{BatchError, LogParams, Pending, SequencerStats, SignedHead, SubmitError};
use crate::db::{BatchCommit, DbError, DedupRecord, LogDb, LogState};
use crate::signer::LogSigner;
use crate::storage::{ObjectKey, PutMode, Storage, StorageError};

/// How many object writes of one batch run at once.
const WRITE_CONCURRENCY: usize = 16;
/// Issuer fingerprints remembered as written; beyond this the set is cleared
/// (a log sees few distinct issuers, so this is a bound, not a working size).
const MAX_KNOWN_ISSUERS: usize = 100_000;
/// At start, how many full tiles per level (counting back from the last) are
/// looked at for partial versions a crash left behind: back to the first that
/// has none, at most this many.
const RECOVERY_PRUNE_SCAN: u64 = 4096;
/// How long a failed deletion of partial tiles waits before it is tried again.
const PRUNE_RETRY: Duration = Duration::from_secs(10);

/// Why a log could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configured public key is unusable.
    #[error("log key: {0}")]
    Key(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Signing the first tree head failed, or the signature does not verify
    /// under the configured public key.
    #[error("signing the tree head: {0}")]
    Sign(String),
    /// Storage and database disagree in a way recovery must not paper over
    /// (a tile missing or corrupt, a checkpoint ahead of the database).
    #[error("log state is inconsistent: {0}")]
    Inconsistent(String),
}

/// The sequencer's state: the committed tree and its right edge.
pub(super) struct Writer {
    origin: String,
    key: LogKey,
    storage: Arc<dyn Storage>,
    db: LogDb,
    signer: Arc<dyn LogSigner>,
    stats: Arc<SequencerStats>,
    /// Where SCT and tree head timestamps come from.
    clock: Clock,
    /// Committed tree size and root, and the latest committed signed head.
    state: LogState,
    /// The partial hash tile of each level at the right edge, by (level, index).
    edge: HashMap<(u8, u64), Vec<Hash>>,
    /// The encoded entries of the partial data tile at the right edge.
    data_edge: Vec<Vec<u8>>,
    /// Issuers known to be stored.
    known_issuers: HashSet<Hash>,
    /// Batches are failing because the storage is full or read-only (logged once per
    /// episode, as the end of the episode is).
    refused_writes: bool,
    /// Full tiles (and data tiles) of committed batches whose checkpoint is not
    /// published yet: the published checkpoint still needs their partial versions.
    unpublished_full: Vec<ObjectKey>,
    /// What goes at the instant given (see [`prune_at`]), in that order.
    prune: VecDeque<(Instant, Prune)>,
    /// The tree size of the last checkpoint published.
    published_size: u64,
    /// After a failed deletion, no other is tried before this.
    prune_retry: Option<Instant>,
    /// How long partial tiles stay once a checkpoint covering their full tile is published.
    partial_tile_grace: Duration,
}

/// When the partial versions of a full tile may go: `grace` after `published`,
/// the instant the first checkpoint covering the full tile was published.
/// Until then the checkpoints published before it (which readers and caches
/// may still hold: a checkpoint is served with `max-age=5`) refer to them.
pub(super) fn prune_at(published: Instant, grace: Duration) -> Instant {
    published + grace
}

/// Partial tiles to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prune {
    /// Every partial version of this full tile or data tile (also those an
    /// earlier process, or a batch that failed, left behind).
    PartialsOf(ObjectKey),
    /// This partial tile: a wider version of it replaced it at the right edge.
    Superseded(ObjectKey),
}

/// The partial tiles and data tiles at the right edge of a tree of `size`
/// that a tree of `new_size` (larger) no longer has: a wider or full version
/// replaced each. Only readers of a checkpoint of `size` or less refer to them.
pub(super) fn superseded_partials(size: u64, new_size: u64) -> Vec<ObjectKey> {
    let mut out = Vec::new();
    for level in 0..=MAX_TILE_LEVEL {
        let entries = entries_at_level(level, size);
        if entries == 0 {
            break;
        }
        if entries % u64::from(TILE_WIDTH) == 0 || entries == entries_at_level(level, new_size) {
            continue;
        }
        let Some(tile) = Tile::in_tree(level, entries / u64::from(TILE_WIDTH), size) else { continue };
        out.push(ObjectKey::Tile(tile));
        if level == 0 {
            out.push(ObjectKey::DataTile(tile));
        }
    }
    out
}

/// Whether `key` is a full tile or data tile: one whose partial versions a
/// checkpoint covering it no longer refers to.
fn is_full_tile(key: &ObjectKey) -> bool {
    matches!(key, ObjectKey::Tile(t) | ObjectKey::DataTile(t) if !t.is_partial())
}

impl Writer {
    /// Now, in milliseconds since the Unix epoch (RFC 6962 timestamps).
    fn now_millis(&self) -> u64 {
        u64::try_from(self.clock.unix_millis()).unwrap_or(0)
    }

    /// Loads (or creates) the log's state; see [`super::Sequencer::start`].
    pub(super) async fn recover(
        params: &LogParams,
        storage: Arc<dyn Storage>,
        db: LogDb,
        signer: Arc<dyn LogSigner>,
        stats: Arc<SequencerStats>,
        clock: Clock,
        partial_tile_grace: Duration,
    ) -> Result<(Self, SignedHead), StartError> {
        let key = LogKey::from_spki_der(&params.public_key_der).map_err(|e| StartError::Key(e.to_string()))?;
        let state = db.state()?;
        let fresh = state.is_none();
        let empty = LogState { size: 0, root: empty_root(), head_timestamp: 0, head_signature: Vec::new() };
        let mut w = Writer {
            origin: params.origin.clone(),
            key,
            storage,
            db,
            signer,
            stats,
            clock,
            state: state.unwrap_or(empty),
            edge: HashMap::new(),
            data_edge: Vec::new(),
            known_issuers: HashSet::new(),
            refused_writes: false,
            unpublished_full: Vec::new(),
            prune: VecDeque::new(),
            published_size: 0,
            prune_retry: None,
            partial_tile_grace,
        };
        if fresh {
            let head = w.sign_head(w.state.size, w.state.root).await.map_err(|e| StartError::Sign(e.to_string()))?;
            w.commit_head(None, &head).await.map_err(|e| match e {
                BatchError::Db(e) => StartError::Db(e),
                e => StartError::Sign(e.to_string()),
            })?;
        }
        w.load_edge().await?;
        let head = w.committed_head().map_err(|e| StartError::Inconsistent(e.to_string()))?;
        w.repair_checkpoint(&head).await?;
        w.published_size = w.state.size;
        w.schedule_leftover_partials().await;
        Ok((w, head))
    }

    /// Schedules the deletion of partial tiles that a stop or crash left
    /// beside full tiles of the committed tree (their deletion was pending):
    /// for each level, the full tiles from the last one back to the first
    /// without partial versions. They go after the grace period, as the
    /// previous process may have served a checkpoint that refers to them.
    async fn schedule_leftover_partials(&mut self) {
        let due = prune_at(Instant::now(), self.partial_tile_grace);
        for level in 0..=MAX_TILE_LEVEL {
            let entries = entries_at_level(level, self.state.size);
            if entries == 0 {
                break;
            }
            let full = entries / u64::from(TILE_WIDTH);
            let kinds: &[fn(Tile) -> ObjectKey] =
                if level == 0 { &[ObjectKey::Tile, ObjectKey::DataTile] } else { &[ObjectKey::Tile] };
            for kind in kinds {
                for index in (full.saturating_sub(RECOVERY_PRUNE_SCAN)..full).rev() {
                    let Ok(tile) = Tile::new(level, index, TILE_WIDTH) else { break };
                    let key = kind(tile);
                    match self.storage.partials(key).await {
                        Ok(p) if p.is_empty() => break,
                        Ok(_) => self.prune.push_back((due, Prune::PartialsOf(key))),
                        Err(e) => {
                            tracing::warn!(error = %e, tile = %key.path(), "cannot list partial tiles");
                            break;
                        }
                    }
                }
            }
        }
        if !self.prune.is_empty() {
            tracing::info!(tiles = self.prune.len(), "partial tiles left beside full ones will be deleted");
        }
    }

    /// When [`Writer::prune_partials`] has something to do, if ever.
    pub(super) fn next_prune(&self) -> Option<Instant> {
        let (due, _) = self.prune.front()?;
        Some(self.prune_retry.map_or(*due, |r| r.max(*due)))
    }

    /// Deletes the partial versions of every full tile whose time has come
    /// (see [`prune_at`]). A failure is logged and tried again later.
    pub(super) async fn prune_partials(&mut self) {
        let now = Instant::now();
        if self.prune_retry.is_some_and(|r| r > now) {
            return;
        }
        self.prune_retry = None;
        while let Some(&(due, item)) = self.prune.front() {
            if due > now {
                break;
            }
            let (result, key) = match item {
                Prune::PartialsOf(key) => (self.delete_partials(key).await, key),
                Prune::Superseded(key) => (self.storage.delete(key).await.map(|()| 1), key),
            };
            match result {
                Ok(n) => {
                    self.stats.partial_tiles_deleted.fetch_add(n, Ordering::Relaxed);
                    self.prune.pop_front();
                }
                Err(e) => {
                    tracing::warn!(error = %e, tile = %key.path(), "cannot delete partial tiles; will retry");
                    self.prune_retry = Some(now + PRUNE_RETRY);
                    break;
                }
            }
        }
    }

    /// Deletes every partial version of the full tile `full`; returns how many.
    async fn delete_partials(&self, full: ObjectKey) -> Result<u64, StorageError> {
        let partials = self.storage.partials(full).await?;
        let storage = &self.storage;
        futures::stream::iter(partials.iter().copied())
            .map(|key| storage.delete(key))
            .buffer_unordered(WRITE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(partials.len() as u64)
    }

    /// The log ID.
    pub(super) fn log_id(&self) -> LogId {
        self.key.log_id()
    }

    /// Reads the right-edge tiles of the committed tree and checks its root.
    async fn load_edge(&mut self) -> Result<(), StartError> {
        let size = self.state.size;
        for level in 0..=MAX_TILE_LEVEL {
            let entries = entries_at_level(level, size);
            if entries == 0 {
                break;
            }
            let index = entries / u64::from(TILE_WIDTH);
            let Some(tile) = Tile::in_tree(level, index, size).filter(|t| t.is_partial()) else { continue };
            let bytes = self.storage.get(ObjectKey::Tile(tile)).await?;
            let hashes = bytes
                .as_deref()
                .and_then(hashes_from_tile_bytes)
                .filter(|h| h.len() == usize::from(tile.width()))
                .ok_or_else(|| StartError::Inconsistent(format!("tile {} is missing or malformed", tile.path())))?;
            self.edge.insert((level, index), hashes);
        }
        if let Some(tile) = Tile::in_tree(0, size / u64::from(TILE_WIDTH), size).filter(|t| t.is_partial()) {
            let bad = || StartError::Inconsistent(format!("data tile {} is missing or malformed", tile.data_path()));
            let bytes = self.storage.get(ObjectKey::DataTile(tile)).await?.ok_or_else(bad)?;
            let leaves = decode_data_tile(&bytes).map_err(|_| bad())?;
            if leaves.len() != usize::from(tile.width()) {
                return Err(bad());
            }
            self.data_edge = leaves.iter().map(encode_leaf).collect::<Result<_, _>>().map_err(|_| bad())?;
        }
        let root = append_leaves(&mut EdgeReader(&self.edge), size, &[])
            .map_err(|e| StartError::Inconsistent(e.to_string()))?
            .root;
        if root != self.state.root {
            return Err(StartError::Inconsistent(format!("tiles give another root than the database at size {size}")));
        }
        Ok(())
    }

    /// Writes the committed head's checkpoint unless storage already has it.
    async fn repair_checkpoint(&mut self, head: &SignedHead) -> Result<(), StartError> {
        let stored = self.storage.get(ObjectKey::Checkpoint).await?;
        if stored.as_deref() == Some(head.checkpoint.as_bytes()) {
            return Ok(());
        }
        if let Some(size) = stored.as_deref().and_then(checkpoint_size) {
            if size > self.state.size {
                return Err(StartError::Inconsistent(format!(
                    "stored checkpoint has size {size}, the database {}",
                    self.state.size
                )));
            }
        }
        tracing::info!(size = self.state.size, "writing the checkpoint of the committed tree head");
        self.write_checkpoint(head).await?;
        Ok(())
    }

    /// Sequences one batch; returns the new published head, if any.
    pub(super) async fn integrate(&mut self, batch: Vec<Pending>) -> Option<SignedHead> {
        let start = Instant::now();
        // Entries already in the log, and repeats within the batch.
        let identities: Vec<Hash> = batch.iter().map(|p| p.entry.identity).collect();
        let known = match self.db.dedup_many(&identities) {
            Ok(k) => k,
            Err(e) => {
                fail_all(batch, &e.to_string());
                return None;
            }
        };
        let mut fresh: Vec<Pending> = Vec::new();
        let mut repeats: Vec<(usize, Pending)> = Vec::new();
        let mut first_seen: HashMap<Hash, usize> = HashMap::new();
        for (p, known) in batch.into_iter().zip(known) {
            if let Some(sct) = known.and_then(|r| Sct::from_bytes(&r.sct).ok()) {
                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                let _ = p.reply.send(Ok(sct));
            } else if let Some(&i) = first_seen.get(&p.entry.identity) {
                repeats.push((i, p));
            } else {
                first_seen.insert(p.entry.identity, fresh.len());
                fresh.push(p);
            }
        }
        if fresh.is_empty() {
            return None;
        }
        match self.sequence(&fresh).await {
            Ok((scts, head)) => {
                if std::mem::take(&mut self.refused_writes) {
                    tracing::info!("the log's storage accepts writes again");
                }
                let micros = start.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
                self.stats.integrate_micros.fetch_add(micros, Ordering::Relaxed);
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                self.stats.sequenced.fetch_add(fresh.len() as u64, Ordering::Relaxed);
                for (i, p) in repeats {
                    let _ = p.reply.send(Ok(scts[i].clone()));
                }
                for (p, sct) in fresh.into_iter().zip(scts) {
                    let _ = p.reply.send(Ok(sct));
                }
                self.publish(head).await
            }
            Err(e) => {
                self.stats.failed_batches.fetch_add(1, Ordering::Relaxed);
                let msg = match e.storage_refuses_writes() {
                    Some(cause) => {
                        if !std::mem::replace(&mut self.refused_writes, true) {
                            tracing::error!(
                                error = %e,
                                "the log's storage refuses writes: submissions are refused with 503 until it \
                                 accepts them again, reads are served (logged once until a batch succeeds)"
                            );
                        }
                        format!("the log's storage {cause}; try again later")
                    }
                    None => {
                        tracing::error!(error = %e, entries = fresh.len(), "batch failed; nothing of it was committed");
                        e.to_string()
                    }
                };
                fail_all(fresh, &msg);
                fail_all(repeats.into_iter().map(|(_, p)| p).collect(), &msg);
                None
            }
        }
    }

    /// Signs a fresh tree head at the current size (no new entries) and
    /// publishes it; also retries a checkpoint write that failed.
    pub(super) async fn refresh(&mut self) -> Option<SignedHead> {
        let result = async {
            let head = self.sign_head(self.state.size, self.state.root).await?;
            self.commit_head(Some(self.state.size), &head).await?;
            Ok::<_, BatchError>(head)
        }
        .await;
        match result {
            Ok(head) => self.publish(head).await,
            Err(e) => {
                tracing::warn!(error = %e, "cannot refresh the tree head");
                None
            }
        }
    }

    /// Steps 2 to 5 of a batch: assign, sign, write, commit. On error the
    /// in-memory state is unchanged.
    async fn sequence(&mut self, fresh: &[Pending]) -> Result<(Vec<Sct>, SignedHead), BatchError> {
        let old_size = self.state.size;
        let timestamp = self.now_millis().max(self.state.head_timestamp);
        let log_id = self.log_id();
        let mut leaves = Vec::with_capacity(fresh.len());
        let mut leaf_hashes = Vec::with_capacity(fresh.len());
        let mut inputs = Vec::with_capacity(fresh.len() + 1);
        for (i, p) in fresh.iter().enumerate() {
            let index = old_size + i as u64;
            let extensions = leaf_index_extensions(index).map_err(|e| BatchError::Other(e.to_string()))?;
            let entry = TimestampedEntry { timestamp, entry: p.entry.entry.clone(), extensions };
            let input = entry.sct_signature_input().map_err(|e| BatchError::Other(e.to_string()))?;
            // The SCT's input is the MerkleTreeLeaf byte for byte (both start
            // with two zero bytes): the leaf hash is of the same bytes.
            leaf_hashes.push(leaf_hash(&input));
            inputs.push(input);
            let leaf = TileLeaf {
                entry,
                pre_certificate: p.entry.pre_certificate.clone(),
                chain_fingerprints: p.entry.issuers.fingerprints().to_vec(),
            };
            leaves.push(encode_leaf(&leaf).map_err(|e| BatchError::Other(e.to_string()))?);
        }
        let update = append_leaves(&mut EdgeReader(&self.edge), old_size, &leaf_hashes)
            .map_err(|e| BatchError::Other(e.to_string()))?;
        let tree_head = TreeHead { timestamp, tree_size: update.size, root_hash: update.root };
        inputs.push(tree_head.signature_input());

        // One signing call for the SCTs and the tree head.
        let mut sigs = self.signer.sign_many(inputs).await?;
        if sigs.len() != fresh.len() + 1 {
            return Err(crate::signer::SignError::Count { expected: fresh.len() + 1, got: sigs.len() }.into());
        }
        let head_sig = DigitallySigned::ecdsa(sigs.pop().unwrap_or_default());
        let head = self.signed_head(tree_head, head_sig)?;
        let scts: Vec<Sct> = sigs
            .into_iter()
            .enumerate()
            .map(|(i, sig)| Sct {
                log_id,
                timestamp,
                extensions: leaf_index_ext(old_size + i as u64),
                signature: DigitallySigned::ecdsa(sig),
            })
            .collect();

        // Tiles, data tiles and new issuers, all durable before the commit.
        let mut writes: Vec<(ObjectKey, Bytes, PutMode)> = Vec::new();
        for p in fresh {
            for (der, &fp) in p.entry.issuers.iter().zip(p.entry.issuers.fingerprints()) {
                if !self.known_issuers.contains(&fp) && !writes.iter().any(|(k, _, _)| *k == ObjectKey::Issuer(fp)) {
                    writes.push((ObjectKey::Issuer(fp), Bytes::from(der.clone()), PutMode::Immutable));
                }
            }
        }
        let mut all_leaves: Vec<Vec<u8>> = self.data_edge.clone();
        all_leaves.extend(leaves);
        let first_tile = old_size / u64::from(TILE_WIDTH);
        for (i, chunk) in all_leaves.chunks(usize::from(TILE_WIDTH)).enumerate() {
            let tile = Tile::in_tree(0, first_tile + i as u64, update.size)
                .ok_or_else(|| BatchError::Other("data tile outside the tree".into()))?;
            writes.push((ObjectKey::DataTile(tile), Bytes::from(chunk.concat()), PutMode::Overwrite));
        }
        for (tile, hashes) in &update.tiles {
            writes.push((ObjectKey::Tile(*tile), Bytes::from(tile_bytes(hashes)), PutMode::Overwrite));
        }
        let storage = &self.storage;
        futures::stream::iter(writes.iter().cloned())
            .map(|(key, data, mode)| storage.put(key, data, mode))
            .buffer_unordered(WRITE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;

        // The commit: after it, the SCTs may be returned.
        let commit = BatchCommit {
            state: Some(self.head_state(&head, update.root)?),
            dedup: fresh
                .iter()
                .zip(&scts)
                .enumerate()
                .map(|(i, (p, sct))| {
                    let sct = sct.to_bytes().map_err(|e| BatchError::Other(e.to_string()))?;
                    Ok((p.entry.identity, DedupRecord { index: old_size + i as u64, timestamp, sct }))
                })
                .collect::<Result<_, BatchError>>()?,
            leaf_hashes: leaf_hashes.iter().enumerate().map(|(i, h)| (*h, old_size + i as u64)).collect(),
        };
        self.db.commit(Some(old_size), commit).await?;

        // Committed: advance the in-memory state.
        self.unpublished_full.extend(writes.iter().map(|(k, _, _)| *k).filter(is_full_tile));
        for (key, _, _) in &writes {
            if let ObjectKey::Issuer(fp) = key {
                if self.known_issuers.len() >= MAX_KNOWN_ISSUERS {
                    self.known_issuers.clear();
                }
                self.known_issuers.insert(*fp);
            }
        }
        self.advance_edge(&update.tiles, update.size);
        let tail = all_leaves.len() % usize::from(TILE_WIDTH);
        self.data_edge = all_leaves.split_off(all_leaves.len() - tail);
        self.state = self.head_state(&head, update.root)?;
        Ok((scts, head))
    }

    /// Keeps, for each level, the partial tile at the right edge of `size`.
    fn advance_edge(&mut self, new_tiles: &[(Tile, Vec<Hash>)], size: u64) {
        let mut edge = HashMap::new();
        for level in 0..=MAX_TILE_LEVEL {
            let entries = entries_at_level(level, size);
            if entries == 0 {
                break;
            }
            let index = entries / u64::from(TILE_WIDTH);
            if entries % u64::from(TILE_WIDTH) == 0 {
                continue;
            }
            let hashes = new_tiles
                .iter()
                .find(|(t, _)| t.level() == level && t.index() == index)
                .map(|(_, h)| h.clone())
                .or_else(|| self.edge.remove(&(level, index)));
            if let Some(h) = hashes {
                edge.insert((level, index), h);
            }
        }
        self.edge = edge;
    }

    /// Writes the checkpoint of `head` and returns it for publication. On
    /// failure the head stays committed but unpublished; the next batch or
    /// refresh writes a newer one (and a restart repairs it).
    async fn publish(&mut self, head: SignedHead) -> Option<SignedHead> {
        match self.write_checkpoint(&head).await {
            Ok(()) => {
                // The tiles this checkpoint covers in full: their partial
                // versions go once the checkpoints before it are no longer held.
                let due = prune_at(Instant::now(), self.partial_tile_grace);
                self.prune.extend(self.unpublished_full.drain(..).map(|k| (due, Prune::PartialsOf(k))));
                // So do the right edge's tiles of the previous checkpoint that
                // this one has wider.
                let superseded = superseded_partials(self.published_size, head.head.tree_size);
                self.prune.extend(superseded.into_iter().map(|k| (due, Prune::Superseded(k))));
                self.published_size = self.published_size.max(head.head.tree_size);
                Some(head)
            }
            Err(e) => {
                tracing::warn!(error = %e, size = head.head.tree_size, "cannot write the checkpoint; will retry");
                None
            }
        }
    }

    async fn write_checkpoint(&self, head: &SignedHead) -> Result<(), StorageError> {
        let bytes = Bytes::from(head.checkpoint.clone().into_bytes());
        self.storage.put(ObjectKey::Checkpoint, bytes, PutMode::Overwrite).await
    }

    /// Signs the tree head of `(size, root)` now, and checks the signature.
    async fn sign_head(&self, size: u64, root: Hash) -> Result<SignedHead, BatchError> {
        let timestamp = self.now_millis().max(self.state.head_timestamp);
        let head = TreeHead { timestamp, tree_size: size, root_hash: root };
        let mut sigs = self.signer.sign_many(vec![head.signature_input()]).await?;
        let sig = match (sigs.pop(), sigs.is_empty()) {
            (Some(sig), true) => sig,
            _ => return Err(crate::signer::SignError::Count { expected: 1, got: sigs.len() + 1 }.into()),
        };
        self.signed_head(head, DigitallySigned::ecdsa(sig))
    }

    /// The published form of a signed tree head, after checking the signature
    /// against the log's public key (a signer with the wrong key is caught here).
    fn signed_head(&self, head: TreeHead, signature: DigitallySigned) -> Result<SignedHead, BatchError> {
        self.key
            .verify_tree_head(&head, &signature)
            .map_err(|e| BatchError::Other(format!("tree head signature does not verify: {e}")))?;
        let checkpoint = signed_checkpoint(&self.origin, &self.log_id(), &head, &signature)
            .map_err(|e| BatchError::Other(e.to_string()))?;
        Ok(SignedHead { head, signature, checkpoint })
    }

    fn head_state(&self, head: &SignedHead, root: Hash) -> Result<LogState, BatchError> {
        Ok(LogState {
            size: head.head.tree_size,
            root,
            head_timestamp: head.head.timestamp,
            head_signature: head.signature.to_bytes().map_err(|e| BatchError::Other(e.to_string()))?,
        })
    }

    /// Commits a new signed head for an unchanged tree.
    async fn commit_head(&mut self, expected: Option<u64>, head: &SignedHead) -> Result<(), BatchError> {
        let state = self.head_state(head, head.head.root_hash)?;
        self.db.commit(expected, BatchCommit { state: Some(state.clone()), ..BatchCommit::default() }).await?;
        self.state = state;
        Ok(())
    }

    /// The committed signed head, rebuilt from the database.
    fn committed_head(&self) -> Result<SignedHead, BatchError> {
        let head =
            TreeHead { timestamp: self.state.head_timestamp, tree_size: self.state.size, root_hash: self.state.root };
        let sig = DigitallySigned::from_bytes(&self.state.head_signature)
            .map_err(|e| BatchError::Other(format!("stored tree head signature: {e}")))?;
        self.signed_head(head, sig)
    }
}

/// The `leaf_index` extension of an index that was already checked.
fn leaf_index_ext(index: u64) -> Vec<u8> {
    leaf_index_extensions(index).unwrap_or_default()
}

/// One data tile entry, encoded.
fn encode_leaf(leaf: &TileLeaf) -> Result<Vec<u8>, signet_ct::staticct::StaticCtError> {
    let mut w = TlsWriter::new();
    leaf.encode(&mut w)?;
    Ok(w.into_vec())
}

fn fail_all(batch: Vec<Pending>, msg: &str) {
    for p in batch {
        let _ = p.reply.send(Err(SubmitError::Failed(msg.to_string())));
    }
}

/// The tree size of a stored checkpoint (unverified: only for ordering).
fn checkpoint_size(bytes: &[u8]) -> Option<u64> {
    let note = SignedNote::parse(std::str::from_utf8(bytes).ok()?).ok()?;
    Some(Checkpoint::parse(&note.text).ok()?.size)
}

/// The right-edge tiles as a [`TileReader`]: all a batch needs to grow the tree.
struct EdgeReader<'a>(&'a HashMap<(u8, u64), Vec<Hash>>);

impl TileReader for EdgeReader<'_> {
    fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError> {
        self.0
            .get(&(tile.level(), tile.index()))
            .cloned()
            .ok_or_else(|| MerkleError::Read(format!("tile {} is not at the right edge", tile.path()).into()))
    }
}
