//! The write path of one log: submissions gathered into batches, each batch
//! sequenced, made durable, and answered with SCTs.
//!
//! A batch closes at [`SequencerConfig::max_batch`] entries or
//! [`SequencerConfig::max_age`] after its first entry arrived. Then, in order:
//!
//! 1. entries already in the log (same identity hash, in LMDB or earlier in
//!    the batch) get the SCT they got the first time;
//! 2. the new ones get consecutive indexes and one timestamp; the new tiles
//!    and tree head are computed;
//! 3. their SCTs (with the static-ct-api `leaf_index` extension) and the new
//!    tree head are signed in **one** [`LogSigner::sign_many`] call;
//! 4. issuers, data tiles and hash tiles are written (durably);
//! 5. one LMDB transaction commits the new size, root and signed tree head,
//!    the dedup records and the leaf hash index, fsynced;
//! 6. only now are the SCTs returned;
//! 7. the checkpoint of the new tree head is written, then published to readers.
//!
//! So an SCT returned means its entry is in LMDB and in durable tiles, and a
//! checkpoint never covers tiles that are not written. A crash anywhere loses
//! nothing acknowledged: tiles written for a batch that was not committed lie
//! beyond the committed tree and are rewritten by the next batch, and a
//! checkpoint older than the committed tree head is rewritten at start
//! ([`Sequencer::start`]).
//!
//! The backlog of submissions waiting for a batch is bounded
//! ([`SequencerConfig::backlog`]); past it, [`Sequencer::submit`] answers
//! [`SubmitError::Pushback`] at once (HTTP 429 with `Retry-After`).

mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signet_ct::rfc6962::SignedEntry;
use signet_ct::{DigitallySigned, Hash, LogId, Sct, TreeHead};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use signet_types::Clock;

use crate::db::{DbError, LogDb};
use crate::signer::LogSigner;
use crate::storage::{Storage, StorageError};

pub use writer::StartError;

/// How batches are formed and how much may wait.
#[derive(Debug, Clone)]
pub struct SequencerConfig {
    /// Most entries in one batch (and one signing call).
    pub max_batch: usize,
    /// Longest a submission waits for its batch to close.
    pub max_age: Duration,
    /// Most submissions waiting for a batch; more are pushed back.
    pub backlog: usize,
    /// The `Retry-After` suggested to pushed-back submitters.
    pub retry_after: Duration,
    /// A new tree head is signed at least this often, even with no new entries,
    /// so that the checkpoint and `get-sth` stay fresh.
    pub refresh: Duration,
    /// How long a partial tile stays once the first checkpoint with a wider
    /// or full version of it is published (readers of the checkpoints before
    /// it may still fetch it); then it is deleted.
    pub partial_tile_grace: Duration,
    /// Where SCT and tree head timestamps come from.
    pub clock: Clock,
}

impl Default for SequencerConfig {
    fn default() -> Self {
        Self {
            max_batch: 256,
            max_age: Duration::from_millis(500),
            backlog: 8192,
            retry_after: Duration::from_secs(1),
            refresh: Duration::from_secs(10),
            partial_tile_grace: Duration::from_secs(60),
            clock: Clock::system(),
        }
    }
}

/// The log a sequencer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogParams {
    /// The checkpoint origin and note key name (the submission prefix
    /// without scheme, e.g. `ct.example.net/2026h1`).
    pub origin: String,
    /// The log's public key, DER `SubjectPublicKeyInfo`; every tree head the
    /// signer returns is verified against it.
    pub public_key_der: Vec<u8>,
}

/// A validated submission, ready to be sequenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// What makes two submissions "the same" for deduplication (see
    /// [`crate::chain::identity_hash`]).
    pub identity: Hash,
    /// The entry the SCT and the Merkle leaf commit to.
    pub entry: SignedEntry,
    /// The submitted precertificate (for precertificate entries).
    pub pre_certificate: Option<Vec<u8>>,
    /// The chain after the leaf, up to and including the root, shared by
    /// the entries that have it.
    pub issuers: Arc<IssuerChain>,
}

/// The certificates above a leaf, up to and including the root (DER, the
/// leaf's issuer first), with their SHA-256 fingerprints (the data tile's
/// `chain_fingerprints`, the `issuer/` names), computed once per chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerChain {
    certificates: Vec<Vec<u8>>,
    fingerprints: Vec<Hash>,
}

impl IssuerChain {
    /// The chain of `certificates` (DER, issuer first).
    pub fn new(certificates: Vec<Vec<u8>>) -> Self {
        let fingerprints = signet_ct::staticct::chain_fingerprints(&certificates);
        Self { certificates, fingerprints }
    }

    /// The SHA-256 fingerprint of each certificate, in order.
    pub fn fingerprints(&self) -> &[Hash] {
        &self.fingerprints
    }
}

impl std::ops::Deref for IssuerChain {
    type Target = [Vec<u8>];

    fn deref(&self) -> &[Vec<u8>] {
        &self.certificates
    }
}

impl PartialEq<Vec<Vec<u8>>> for IssuerChain {
    fn eq(&self, other: &Vec<Vec<u8>>) -> bool {
        &self.certificates == other
    }
}

/// Why a submission got no SCT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The backlog is full: retry later (HTTP 429).
    #[error("log is busy; retry after {} s", retry_after.as_secs())]
    Pushback {
        /// When to retry.
        retry_after: Duration,
    },
    /// The batch failed (storage, signer or database): nothing of it was
    /// committed; the submission may be retried (HTTP 503).
    #[error("sequencing failed: {0}")]
    Failed(String),
    /// The sequencer has stopped.
    #[error("log is shutting down")]
    Stopped,
}

/// A signed tree head as published: what `get-sth` and `checkpoint` serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHead {
    /// The tree head.
    pub head: TreeHead,
    /// Its signature.
    pub signature: DigitallySigned,
    /// The static-ct-api checkpoint (signed note) of the same tree head.
    pub checkpoint: String,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct SequencerStats {
    /// Entries sequenced (new entries, not duplicates).
    pub sequenced: AtomicU64,
    /// Submissions answered from the dedup table.
    pub duplicates: AtomicU64,
    /// Submissions pushed back.
    pub pushbacks: AtomicU64,
    /// Batches committed.
    pub batches: AtomicU64,
    /// Batches that failed.
    pub failed_batches: AtomicU64,
    /// Time from a batch closing to its SCTs being returned, summed (µs).
    pub integrate_micros: AtomicU64,
    /// Partial tiles and data tiles deleted once their full tile was published.
    pub partial_tiles_deleted: AtomicU64,
}

/// A submission waiting for its batch.
struct Pending {
    entry: NewEntry,
    received: Instant,
    reply: oneshot::Sender<Result<Sct, SubmitError>>,
}

/// The handle to one log's sequencer task. Cheap to clone; the task ends
/// (after its current batch) when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Sequencer {
    tx: mpsc::Sender<Pending>,
    head: watch::Receiver<Arc<SignedHead>>,
    db: LogDb,
    log_id: LogId,
    config: SequencerConfig,
    stats: Arc<SequencerStats>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("identity", &self.entry.identity).finish()
    }
}

impl Sequencer {
    /// Recovers the log's state and starts its sequencer task.
    ///
    /// On a new log, signs and commits the tree head of the empty tree. On an
    /// existing one, reads the right edge of the tree from storage, checks
    /// that it gives the committed root, and rewrites the checkpoint if it is
    /// older than the committed tree head (a crash between the commit and the
    /// checkpoint write).
    pub async fn start(
        params: LogParams,
        storage: Arc<dyn Storage>,
        db: LogDb,
        signer: Arc<dyn LogSigner>,
        config: SequencerConfig,
    ) -> Result<(Sequencer, JoinHandle<()>), StartError> {
        let stats = Arc::new(SequencerStats::default());
        let (writer, head) = writer::Writer::recover(
            &params,
            storage,
            db.clone(),
            signer,
            stats.clone(),
            config.clock.clone(),
            config.partial_tile_grace,
        )
        .await?;
        let log_id = writer.log_id();
        let (head_tx, head_rx) = watch::channel(Arc::new(head));
        let (tx, rx) = mpsc::channel(config.backlog.max(1));
        let task = tokio::spawn(run(writer, rx, head_tx, config.clone()));
        Ok((Sequencer { tx, head: head_rx, db, log_id, config, stats }, task))
    }

    /// Sequences an entry and returns its SCT once the entry is durable; an
    /// entry already in the log gets its first SCT back at once.
    pub async fn submit(&self, entry: NewEntry) -> Result<Sct, SubmitError> {
        match self.db.dedup(&entry.identity) {
            Ok(Some(record)) => {
                if let Ok(sct) = Sct::from_bytes(&record.sct) {
                    self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    return Ok(sct);
                }
            }
            Ok(None) => {}
            Err(e) => return Err(SubmitError::Failed(e.to_string())),
        }
        let (reply, answer) = oneshot::channel();
        let pending = Pending { entry, received: Instant::now(), reply };
        match self.tx.try_send(pending) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.pushbacks.fetch_add(1, Ordering::Relaxed);
                return Err(SubmitError::Pushback { retry_after: self.config.retry_after });
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(SubmitError::Stopped),
        }
        answer.await.unwrap_or(Err(SubmitError::Stopped))
    }

    /// The latest published signed tree head.
    pub fn head(&self) -> Arc<SignedHead> {
        self.head.borrow().clone()
    }

    /// A receiver that sees every newly published tree head.
    pub fn subscribe(&self) -> watch::Receiver<Arc<SignedHead>> {
        self.head.clone()
    }

    /// The log ID.
    pub fn log_id(&self) -> LogId {
        self.log_id
    }

    /// Submissions waiting for a batch.
    pub fn backlog(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// The sequencer's counters.
    pub fn stats(&self) -> &SequencerStats {
        &self.stats
    }

    /// The log's database view (dedup and leaf index lookups).
    pub fn db(&self) -> &LogDb {
        &self.db
    }
}

/// The sequencer task: gathers batches and integrates them one at a time.
async fn run(
    mut writer: writer::Writer,
    mut rx: mpsc::Receiver<Pending>,
    head: watch::Sender<Arc<SignedHead>>,
    config: SequencerConfig,
) {
    let max_batch = config.max_batch.max(1);
    let mut last_head = Instant::now();
    loop {
        let refresh_at = last_head + config.refresh;
        let prune_at = writer.next_prune().unwrap_or(refresh_at);
        let first = tokio::select! {
            p = rx.recv() => match p {
                Some(p) => p,
                None => break,
            },
            () = tokio::time::sleep_until(prune_at.into()), if prune_at < refresh_at => {
                writer.prune_partials().await;
                continue;
            }
            () = tokio::time::sleep_until(refresh_at.into()) => {
                if let Some(h) = writer.refresh().await {
                    head.send_replace(Arc::new(h));
                }
                last_head = Instant::now();
                continue;
            }
        };
        let deadline = first.received + config.max_age;
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(p) => {
                    batch.push(p);
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            tokio::select! {
                p = rx.recv() => match p {
                    Some(p) => batch.push(p),
                    None => break,
                },
                () = tokio::time::sleep_until(deadline.into()) => break,
            }
        }
        if let Some(h) = writer.integrate(batch).await {
            head.send_replace(Arc::new(h));
            last_head = Instant::now();
        }
        if writer.next_prune().is_some_and(|t| t <= Instant::now()) {
            writer.prune_partials().await;
        }
    }
    tracing::debug!("sequencer stopped");
}

/// Errors inside a batch, reported to its submitters as [`SubmitError::Failed`].
#[derive(Debug, thiserror::Error)]
enum BatchError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Sign(#[from] crate::signer::SignError),
    #[error("{0}")]
    Other(String),
}

impl BatchError {
    /// Whether the batch failed because the log's storage (tiles or LMDB) has no space
    /// left or is read-only: "is full" or "is read-only".
    fn storage_refuses_writes(&self) -> Option<&'static str> {
        match self {
            BatchError::Storage(StorageError::Io { source, .. }) => match source.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => Some("is full"),
                std::io::ErrorKind::ReadOnlyFilesystem => Some("is read-only"),
                _ => None,
            },
            BatchError::Db(DbError::Store(e)) => e.refuses_writes(),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
