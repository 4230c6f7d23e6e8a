//! Sequencer tests: thousands of concurrent submissions verified end to end
//! (SCTs, inclusion proofs from the tiles, data tiles, the checkpoint), crash
//! repair, pushback, and a signer with the wrong key.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use sha2::{Digest, Sha256};
use signet_ct::merkle::tile::{hashes_from_tile_bytes, tiles_for_size};
use signet_ct::merkle::{inclusion_proof, verify_inclusion, Tile, TileHashReader};
use signet_ct::rfc6962::SignedEntry;
use signet_ct::staticct::{decode_data_tile, parse_leaf_index};
use signet_ct::{Hash, LogKey, MerkleError, Sct, TimestampedEntry};
use signet_store::{Store, StoreOptions};

use super::*;
use crate::db::{LogDb, SCHEMA_VERSION, STORE_APPLICATION};
use crate::signer::{LocalSigner, SignError};
use crate::storage::{LocalDir, ObjectKey, PutMode, Storage};

const ORIGIN: &str = "ct.example.net/test";

/// A log on a temporary directory: storage, LMDB and key.
pub(crate) struct TestLog {
    pub dir: tempfile::TempDir,
    pub signer: Arc<LocalSigner>,
    pub storage: Arc<dyn Storage>,
    pub store: Store,
}

impl TestLog {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalDir::open(&dir.path().join("tiles")).unwrap());
        Self::with_storage(dir, storage)
    }

    pub fn with_storage(dir: tempfile::TempDir, storage: Arc<dyn Storage>) -> Self {
        let store = open_store(dir.path());
        Self { dir, signer: Arc::new(LocalSigner::generate().unwrap()), storage, store }
    }

    pub fn params(&self) -> LogParams {
        LogParams { origin: ORIGIN.into(), public_key_der: self.signer.public_key_der().unwrap() }
    }

    pub fn key(&self) -> LogKey {
        LogKey::from_spki_der(&self.signer.public_key_der().unwrap()).unwrap()
    }

    pub async fn start(&self, config: SequencerConfig) -> (Sequencer, JoinHandle<()>) {
        let db = LogDb::open(&self.store, self.key().log_id()).unwrap();
        Sequencer::start(self.params(), self.storage.clone(), db, self.signer.clone(), config).await.unwrap()
    }
}

fn open_store(dir: &Path) -> Store {
    Store::open(&dir.join("db"), StoreOptions::new(STORE_APPLICATION, SCHEMA_VERSION)).unwrap()
}

pub(crate) fn fast_config() -> SequencerConfig {
    SequencerConfig { max_age: Duration::from_millis(20), ..SequencerConfig::default() }
}

/// A synthetic entry: a "certificate" of distinct bytes and two issuers.
pub(crate) fn entry(i: u64) -> NewEntry {
    let cert = format!("certificate {i}").into_bytes();
    let precert = i % 5 == 0;
    NewEntry {
        identity: Sha256::digest(&cert).into(),
        entry: if precert {
            SignedEntry::Precert { issuer_key_hash: [7; 32], tbs_certificate: cert.clone() }
        } else {
            SignedEntry::X509(cert.clone())
        },
        pre_certificate: precert.then(|| [b"pre ".as_slice(), &cert].concat()),
        issuers: Arc::new(IssuerChain::new(vec![b"intermediate".to_vec(), format!("root {}", i % 3).into_bytes()])),
    }
}

/// Every tile of the log at `size`, read from storage.
async fn all_tiles(storage: &dyn Storage, size: u64) -> HashMap<(u8, u64), Vec<Hash>> {
    let mut out = HashMap::new();
    for tile in tiles_for_size(size) {
        let bytes = storage.get(ObjectKey::Tile(tile)).await.unwrap().unwrap_or_else(|| panic!("{}", tile.path()));
        let hashes = hashes_from_tile_bytes(&bytes).unwrap();
        assert_eq!(hashes.len(), usize::from(tile.width()), "{}", tile.path());
        out.insert((tile.level(), tile.index()), hashes);
    }
    out
}

/// Verifies the whole log: the checkpoint's signature and root, every
/// entry's SCT, data tile entry and inclusion proof.
pub(crate) async fn verify_log(log: &TestLog, entries: &[(NewEntry, Sct)]) -> u64 {
    let key = log.key();
    let note = log.storage.get(ObjectKey::Checkpoint).await.unwrap().unwrap();
    let (checkpoint, _head) = key.verify_checkpoint(std::str::from_utf8(&note).unwrap(), ORIGIN).unwrap();
    let size = checkpoint.size;
    let tiles = all_tiles(&*log.storage, size).await;
    let mut reader = TileHashReader::new(
        |t: Tile| tiles.get(&(t.level(), t.index())).cloned().ok_or(MerkleError::NoSuchSubtree { level: 0, index: 0 }),
        size,
    );
    // Data tiles, in order: every index once.
    let mut data = Vec::new();
    for tile in tiles_for_size(size).filter(|t| t.level() == 0) {
        let bytes = log.storage.get(ObjectKey::DataTile(tile)).await.unwrap().unwrap();
        let leaves = decode_data_tile(&bytes).unwrap();
        assert_eq!(leaves.len(), usize::from(tile.width()));
        data.extend(leaves);
    }
    assert_eq!(data.len() as u64, size);
    for (i, leaf) in data.iter().enumerate() {
        assert_eq!(leaf.leaf_index().unwrap(), i as u64);
        let hash = leaf.leaf_hash().unwrap();
        assert_eq!(tiles[&(0, i as u64 / 256)][i % 256], hash, "leaf {i}");
        for fp in &leaf.chain_fingerprints {
            assert!(log.storage.exists(ObjectKey::Issuer(*fp)).await.unwrap());
        }
    }
    for (e, sct) in entries {
        key.verify_sct(sct, &e.entry).unwrap();
        let index = parse_leaf_index(&sct.extensions).unwrap();
        assert!(index < size);
        let te =
            TimestampedEntry { timestamp: sct.timestamp, entry: e.entry.clone(), extensions: sct.extensions.clone() };
        assert_eq!(data[index as usize].entry, te);
        assert_eq!(data[index as usize].pre_certificate, e.pre_certificate);
        let leaf = te.leaf_hash().unwrap();
        let proof = inclusion_proof(&mut reader, index, size).unwrap();
        verify_inclusion(index, size, &leaf, &proof, &checkpoint.root_hash).unwrap();
    }
    size
}

async fn submit_all(seq: &Sequencer, range: std::ops::Range<u64>) -> Vec<(NewEntry, Sct)> {
    let tasks: Vec<_> = range
        .map(|i| {
            let seq = seq.clone();
            tokio::spawn(async move {
                let e = entry(i);
                let sct = seq.submit(e.clone()).await.unwrap();
                (e, sct)
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

async fn stop(seq: Sequencer, task: JoinHandle<()>) {
    drop(seq);
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_concurrent_submissions_verify() {
    let log = TestLog::new();
    let (seq, task) = log.start(fast_config()).await;
    assert_eq!(seq.head().head.tree_size, 0);
    let n = 3000;
    let entries = submit_all(&seq, 0..n).await;
    let mut indexes: Vec<u64> = entries.iter().map(|(_, s)| parse_leaf_index(&s.extensions).unwrap()).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..n).collect::<Vec<_>>());
    // The checkpoint follows the last batch.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seq.head().head.tree_size < n {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(verify_log(&log, &entries).await, n);
    // Resubmissions get the first SCT, and add nothing.
    for (e, sct) in entries.iter().step_by(97) {
        assert_eq!(&seq.submit(e.clone()).await.unwrap(), sct);
        let index = parse_leaf_index(&sct.extensions).unwrap();
        let leaf = sct.timestamped_entry(e.entry.clone()).leaf_hash().unwrap();
        assert_eq!(seq.db().leaf_index(&leaf).unwrap(), Some(index));
    }
    assert_eq!(seq.stats().sequenced.load(Ordering::Relaxed), n);
    assert!(seq.stats().batches.load(Ordering::Relaxed) >= n / 256);
    assert_eq!(seq.head().head.tree_size, n);
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_in_one_batch_share_an_sct() {
    let log = TestLog::new();
    let (seq, task) = log.start(SequencerConfig { max_age: Duration::from_millis(200), ..fast_config() }).await;
    let subs: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn({
                let seq = seq.clone();
                async move { seq.submit(entry(i % 2)).await.unwrap() }
            })
        })
        .collect();
    let mut scts = Vec::new();
    for s in subs {
        scts.push(s.await.unwrap());
    }
    for (i, s) in scts.iter().enumerate() {
        assert_eq!(s, &scts[i % 2]);
    }
    assert_eq!(seq.stats().sequenced.load(Ordering::Relaxed), 2);
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_repairs_the_checkpoint_and_rewrites_uncommitted_tiles() {
    let log = TestLog::new();
    let (seq, task) = log.start(fast_config()).await;
    let mut entries = submit_all(&seq, 0..300).await;
    let old_checkpoint = log.storage.get(ObjectKey::Checkpoint).await.unwrap().unwrap();
    entries.extend(submit_all(&seq, 300..700).await);
    stop(seq, task).await;
    let committed = log.storage.get(ObjectKey::Checkpoint).await.unwrap().unwrap();
    assert_ne!(old_checkpoint, committed);

    // A crash after the commit, before the checkpoint write: the stored
    // checkpoint is the older one. And a crash after a batch's tiles were
    // written but before its commit: garbage tiles beyond the tree.
    log.storage.put(ObjectKey::Checkpoint, old_checkpoint, PutMode::Overwrite).await.unwrap();
    let beyond = Tile::new(0, 2, 256).unwrap();
    log.storage.put(ObjectKey::Tile(beyond), vec![0xee; 256 * 32].into(), PutMode::Overwrite).await.unwrap();
    log.storage.put(ObjectKey::DataTile(beyond), vec![0xee; 100].into(), PutMode::Overwrite).await.unwrap();
    log.storage
        .put(ObjectKey::Tile(Tile::new(1, 0, 3).unwrap()), vec![0xee; 96].into(), PutMode::Overwrite)
        .await
        .unwrap();

    let (seq, task) = log.start(fast_config()).await;
    assert_eq!(log.storage.get(ObjectKey::Checkpoint).await.unwrap().unwrap(), committed);
    assert_eq!(seq.head().head.tree_size, 700);
    assert_eq!(verify_log(&log, &entries).await, 700);
    // Growing past the garbage rewrites it.
    entries.extend(submit_all(&seq, 700..1100).await);
    stop(seq, task).await;
    assert_eq!(verify_log(&log, &entries).await, 1100);
    // Entries of before the restart are still deduplicated.
    let (seq, task) = log.start(fast_config()).await;
    assert_eq!(seq.submit(entries[5].0.clone()).await.unwrap(), entries[5].1);
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_edge_tile_stops_the_start() {
    let log = TestLog::new();
    let (seq, task) = log.start(fast_config()).await;
    submit_all(&seq, 0..10).await;
    stop(seq, task).await;
    std::fs::remove_file(log.dir.path().join("tiles/tile/0/000.p/10")).unwrap();
    let db = LogDb::open(&log.store, log.key().log_id()).unwrap();
    let r = Sequencer::start(log.params(), log.storage.clone(), db, log.signer.clone(), fast_config()).await;
    assert!(matches!(r, Err(StartError::Inconsistent(_))), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signer_with_another_key_is_refused() {
    let log = TestLog::new();
    let other = Arc::new(LocalSigner::generate().unwrap());
    let db = LogDb::open(&log.store, log.key().log_id()).unwrap();
    let r = Sequencer::start(log.params(), log.storage.clone(), db, other, fast_config()).await;
    assert!(matches!(r, Err(StartError::Sign(_))), "{r:?}");
}

/// A signer that waits until released, to fill the backlog.
struct Gate {
    inner: LocalSigner,
    open: tokio::sync::Semaphore,
}

impl LogSigner for Gate {
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Vec<Vec<u8>>, SignError>> {
        async move {
            let _permit = self.open.acquire().await.map_err(|e| SignError::Unavailable(e.to_string()))?;
            self.inner.sign_many(inputs).await
        }
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_backlog_pushes_back() {
    let log = TestLog::new();
    let gate = Arc::new(Gate { inner: LocalSigner::generate().unwrap(), open: tokio::sync::Semaphore::new(1) });
    let params = LogParams { origin: ORIGIN.into(), public_key_der: gate.inner.public_key_der().unwrap() };
    let log_id = LogKey::from_spki_der(&params.public_key_der).unwrap().log_id();
    let db = LogDb::open(&log.store, log_id).unwrap();
    let config = SequencerConfig { backlog: 8, max_batch: 4, ..fast_config() };
    let (seq, task) = Sequencer::start(params, log.storage.clone(), db, gate.clone(), config).await.unwrap();
    // The first tree head is signed; close the gate.
    let permit = gate.open.acquire().await.unwrap();
    let subs: Vec<_> = (0..40)
        .map(|i| {
            let seq = seq.clone();
            tokio::spawn(async move { seq.submit(entry(i)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(permit);
    let mut ok = 0;
    let mut pushed = 0;
    for s in subs {
        match s.await.unwrap() {
            Ok(_) => ok += 1,
            Err(SubmitError::Pushback { retry_after }) => {
                assert_eq!(retry_after, Duration::from_secs(1));
                pushed += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(pushed > 0 && ok > 0, "ok {ok}, pushed back {pushed}");
    assert_eq!(seq.stats().pushbacks.load(Ordering::Relaxed), pushed);
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_log_refreshes_its_tree_head() {
    let log = TestLog::new();
    let config = SequencerConfig { refresh: Duration::from_millis(50), ..fast_config() };
    let (seq, task) = log.start(config).await;
    let first = seq.head();
    let mut rx = seq.subscribe();
    tokio::time::timeout(Duration::from_secs(5), rx.changed()).await.unwrap().unwrap();
    let second = seq.head();
    assert!(second.head.timestamp >= first.head.timestamp);
    assert_ne!(first.checkpoint, second.checkpoint);
    log.key().verify_checkpoint(&second.checkpoint, ORIGIN).unwrap();
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_on_s3_survives_a_restart() {
    let Some(gw) = crate::storage::versitygw::Versitygw::start() else { return };
    let log = TestLog::with_storage(tempfile::tempdir().unwrap(), Arc::new(gw.storage("seq")));
    let (seq, task) = log.start(fast_config()).await;
    let mut entries = submit_all(&seq, 0..600).await;
    stop(seq, task).await;
    let (seq, task) = log.start(fast_config()).await;
    entries.extend(submit_all(&seq, 600..900).await);
    stop(seq, task).await;
    assert_eq!(verify_log(&log, &entries).await, 900);
}

/// How many partial versions of hash tile `(level, index)` (and, at level 0,
/// of its data tile) are in storage.
async fn partials_of(log: &TestLog, level: u8, index: u64) -> usize {
    let full = Tile::new(level, index, 256).unwrap();
    let mut n = log.storage.partials(ObjectKey::Tile(full)).await.unwrap().len();
    if level == 0 {
        n += log.storage.partials(ObjectKey::DataTile(full)).await.unwrap().len();
    }
    n
}

/// Submits `range` ten at a time, each ten a batch of its own (so each
/// leaves a partial tile of its width behind).
async fn submit_by_tens(seq: &Sequencer, range: std::ops::Range<u64>) -> Vec<(NewEntry, Sct)> {
    let mut out = Vec::new();
    for start in range.clone().step_by(10) {
        out.extend(submit_all(seq, start..(start + 10).min(range.end)).await);
    }
    out
}

async fn wait_for_head(seq: &Sequencer, size: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seq.head().head.tree_size < size {
        assert!(tokio::time::Instant::now() < deadline, "no checkpoint of size {size}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_tiles_go_only_after_a_checkpoint_covering_the_full_tile_and_the_grace() {
    let log = TestLog::new();
    let grace = Duration::from_secs(2);
    let (seq, task) = log.start(SequencerConfig { partial_tile_grace: grace, ..fast_config() }).await;
    let mut entries = submit_by_tens(&seq, 0..250).await;
    // Batches of ten left data and hash tiles 0.p/10, 0.p/20, ... 0.p/250.
    assert!(partials_of(&log, 0, 0).await >= 2 * 20);
    // The batch of 250..260 makes tile 0 full: no checkpoint covered it before.
    let full_at = std::time::Instant::now();
    entries.extend(submit_by_tens(&seq, 250..300).await);
    wait_for_head(&seq, 300).await;
    assert!(full_at.elapsed() < grace, "the machine is too slow for this test's timing");
    // The checkpoints before still refer to the partial tiles: they stay...
    let partials = partials_of(&log, 0, 0).await;
    assert!(partials >= 2 * 20, "partial tiles deleted within the grace");
    // ... until the grace has passed since a checkpoint covered the full tile.
    let deadline = full_at + grace + Duration::from_secs(10);
    while partials_of(&log, 0, 0).await > 0 {
        assert!(std::time::Instant::now() < deadline, "partial tiles of a full tile still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(full_at.elapsed() >= grace, "partial tiles deleted {:?} after the full tile", full_at.elapsed());
    // Each of them counted (batches that met in the sequencer left fewer than
    // 2 x 25). The writer counts a tile's partials once all their deletes are
    // done, so the count may trail the files' going by a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let deleted = seq.stats().partial_tiles_deleted.load(Ordering::Relaxed);
        if deleted >= partials as u64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{deleted} counted, {partials} partial tiles of tile 0 were there"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The full tiles and the right edge's partial tiles stay; the tree verifies.
    let full = Tile::new(0, 0, 256).unwrap();
    assert!(log.storage.exists(ObjectKey::Tile(full)).await.unwrap());
    assert!(log.storage.exists(ObjectKey::DataTile(full)).await.unwrap());
    let edge = Tile::new(0, 1, 44).unwrap();
    assert!(log.storage.exists(ObjectKey::Tile(edge)).await.unwrap());
    assert!(log.storage.exists(ObjectKey::DataTile(edge)).await.unwrap());
    // The right edge's narrower versions went too (each replaced by a wider
    // one at least the grace before): only the newest stays, hash and data.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while partials_of(&log, 0, 1).await > 2 {
        assert!(std::time::Instant::now() < deadline, "the edge tile's superseded versions are still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(verify_log(&log, &entries).await, 300);
    stop(seq, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_tiles_pending_at_a_stop_go_after_the_restart() {
    let log = TestLog::new();
    let long = SequencerConfig { partial_tile_grace: Duration::from_secs(3600), ..fast_config() };
    let (seq, task) = log.start(long.clone()).await;
    let mut entries = submit_by_tens(&seq, 0..530).await;
    wait_for_head(&seq, 530).await;
    stop(seq, task).await;
    // Tiles 0 and 1 are full; their partial tiles were still within the grace.
    assert!(partials_of(&log, 0, 0).await > 0 && partials_of(&log, 0, 1).await > 0);
    let grace = Duration::from_millis(500);
    let started = std::time::Instant::now();
    let (seq, task) = log.start(SequencerConfig { partial_tile_grace: grace, ..fast_config() }).await;
    let deadline = started + Duration::from_secs(10);
    while partials_of(&log, 0, 0).await + partials_of(&log, 0, 1).await > 0 {
        assert!(std::time::Instant::now() < deadline, "partial tiles left by the stop still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Not at once: the previous process may have served a checkpoint that refers to them.
    assert!(started.elapsed() >= grace);
    assert_eq!(partials_of(&log, 0, 2).await, 2 * 2, "the edge tile's partial versions stay");
    entries.extend(submit_by_tens(&seq, 530..560).await);
    stop(seq, task).await;
    assert_eq!(verify_log(&log, &entries).await, 560);
}

#[test]
fn the_edge_tiles_a_larger_tree_replaces() {
    use crate::sequencer::writer::superseded_partials;
    let t = |level, index, width| Tile::new(level, index, width).unwrap();
    let both = |tile| vec![ObjectKey::Tile(tile), ObjectKey::DataTile(tile)];
    assert_eq!(superseded_partials(0, 5), vec![]);
    assert_eq!(superseded_partials(5, 5), vec![], "a refreshed head replaces nothing");
    assert_eq!(superseded_partials(300, 310), both(t(0, 1, 44)), "level 1 keeps its width 1");
    assert_eq!(superseded_partials(250, 260), both(t(0, 0, 250)), "replaced by the full tile");
    assert_eq!(superseded_partials(256, 300), vec![], "a full edge is never deleted");
    let mut deep = both(t(0, 300, 7));
    deep.push(ObjectKey::Tile(t(1, 1, 44)));
    assert_eq!(superseded_partials(300 * 256 + 7, 301 * 256), deep);
    // Level 2 (one hash, 65,536 entries in) is the same in both trees.
    assert_eq!(superseded_partials(65_536 + 5, 65_536 + 300), both(t(0, 256, 5)));
}
