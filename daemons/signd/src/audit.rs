//! The audit log: every signature and every refusal, appended to LMDB.
//!
//! A caller's answer is sent only after the record describing it is committed,
//! so an acknowledged signature always has its audit record (kill -9 included).
//!
//! Two ways to commit, chosen by the store's durability:
//! - **inline** (no fsync per commit): the thread that produced the records
//!   commits them itself. A commit is a few page writes, cheaper than handing
//!   the records to another thread and waking it.
//! - **group** (fsync per commit): one writer thread commits whatever has
//!   queued up while the previous fsync ran, so many signatures share one fsync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize};
use signet_ipc::{AuditQuery, AuditRecord, ErrorKind, IpcError, PeerCredentials};
use signet_store::{SpaceWatch, Store, StoreError, Table};
use signet_types::Clock;

/// The most records committed in one transaction.
const MAX_GROUP: usize = 4096;

/// The SHA-256 recorded for a message. The low-level hasher, not the
/// one-shot `openssl::sha::sha256`, which fetches the algorithm through
/// `EVP_Q_digest` on every call (a few microseconds each).
pub fn message_sha256(message: &[u8]) -> Vec<u8> {
    let mut h = openssl::sha::Sha256::new();
    h.update(message);
    h.finish().to_vec()
}

/// One stored entry; the sequence number is the table key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Nanoseconds since the Unix epoch.
    pub time_unix_nanos: i64,
    /// sign, sign-batch, generate, import, signer, admin ...
    pub operation: String,
    /// The key involved, if any.
    pub key_id: String,
    /// The caller's uid.
    pub uid: u32,
    /// The caller's pid.
    pub pid: i32,
    /// The role acted in, if any.
    pub role: String,
    /// SHA-256 of the message, if any.
    pub message_sha256: Vec<u8>,
    /// Success.
    pub ok: bool,
    /// "ok" or the error.
    pub outcome: String,
}

impl Entry {
    /// An entry stamped `time_unix_nanos`, for `peer` acting in `role` (see
    /// [`AuditLog::entry`] for one stamped now).
    pub fn at(time_unix_nanos: i64, peer: &PeerCredentials, role: &str, operation: &str, key_id: &str) -> Self {
        Self {
            time_unix_nanos,
            operation: operation.into(),
            key_id: key_id.into(),
            uid: peer.uid,
            pid: peer.pid,
            role: role.into(),
            message_sha256: Vec::new(),
            ok: true,
            outcome: "ok".into(),
        }
    }

    /// Marks the entry as the record of a failure.
    pub fn failed(mut self, e: &IpcError) -> Self {
        self.ok = false;
        self.outcome = e.to_string();
        self
    }

    fn to_record(&self, seq: u64) -> AuditRecord {
        AuditRecord {
            seq,
            time_unix_nanos: self.time_unix_nanos,
            operation: self.operation.clone(),
            key_id: self.key_id.clone(),
            uid: self.uid,
            pid: self.pid,
            role: self.role.clone(),
            message_sha256: self.message_sha256.clone(),
            ok: self.ok,
            outcome: self.outcome.clone(),
        }
    }
}

/// Called once the entries are committed (or the commit failed).
pub type Done = Box<dyn FnOnce(Result<(), IpcError>) + Send>;

struct Job {
    entries: Vec<Entry>,
    done: Done,
}

/// The audit log's handle: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct AuditLog {
    store: Store,
    table: Table<u64, Entry>,
    /// The group-commit writer; `None` commits inline.
    jobs: Option<Sender<Job>>,
    count: Arc<AtomicU64>,
    /// A full filesystem, logged once.
    space: Arc<SpaceWatch>,
    /// Stamps new entries.
    clock: Clock,
}

/// What a full store stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "signatures cannot be audited, so every signing call is refused (no-space) until \
     space is freed; health, key listing and public keys are still answered";

/// How [`AuditLog::append`] commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// On the calling thread, one transaction per append.
    Inline,
    /// On a writer thread that batches appends into one (fsynced) transaction.
    Group,
}

impl AuditLog {
    /// Opens the `audit` table of `store`; with [`CommitMode::Group`] starts the writer thread.
    /// New entries are stamped by `clock`.
    pub fn open(store: &Store, mode: CommitMode, clock: Clock) -> Result<Self, StoreError> {
        let table = store.table::<u64, Entry>("audit")?;
        let count = Arc::new(AtomicU64::new(store.read(|txn| txn.len(&table))?));
        let space = Arc::new(SpaceWatch::new(store.path(), FULL_CONSEQUENCE));
        let jobs = match mode {
            CommitMode::Inline => None,
            CommitMode::Group => {
                let (tx, rx) = crossbeam_channel::unbounded();
                let (writer_store, writer_count, writer_space) = (store.clone(), count.clone(), space.clone());
                std::thread::Builder::new()
                    .name("audit-writer".into())
                    .spawn(move || writer(writer_store, table, rx, writer_count, &writer_space))
                    .map_err(StoreError::FlushThread)?;
                Some(tx)
            }
        };
        Ok(Self { store: store.clone(), table, jobs, count, space, clock })
    }

    /// An entry stamped now, for `peer` acting in `role`.
    pub fn entry(&self, peer: &PeerCredentials, role: &str, operation: &str, key_id: &str) -> Entry {
        Entry::at(self.clock.unix_nanos(), peer, role, operation, key_id)
    }

    /// Appends `entries` and calls `done` once they are committed (inline
    /// mode: before returning).
    pub fn append(&self, entries: Vec<Entry>, done: Done) {
        match &self.jobs {
            None => done(commit(&self.store, self.table, &[&entries], &self.count, &self.space)),
            Some(jobs) => {
                if let Err(crossbeam_channel::SendError(job)) = jobs.send(Job { entries, done }) {
                    (job.done)(Err(IpcError::internal("the audit writer has stopped")));
                }
            }
        }
    }

    /// Appends `entries` and waits (asynchronously) for the commit.
    pub async fn append_wait(&self, entries: Vec<Entry>) -> Result<(), IpcError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.append(entries, Box::new(move |r| drop(tx.send(r))));
        rx.await.map_err(|_| IpcError::internal("the audit writer has stopped"))?
    }

    /// Records committed so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Reads records per `query`.
    pub fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, IpcError> {
        let limit = query.limit.clamp(1, 10_000) as usize;
        let rows = self
            .store
            .read(|txn| {
                if query.newest_first {
                    let end = (query.after_seq > 0).then(|| query.after_seq - 1);
                    if end == Some(0) {
                        return Ok(Vec::new());
                    }
                    txn.range_rev_from(&self.table, end.as_ref(), limit)
                } else {
                    txn.range(&self.table, Some(&(query.after_seq + 1)), limit)
                }
            })
            .map_err(|e| IpcError::internal(format!("reading the audit log: {e}")))?;
        Ok(rows.into_iter().map(|(seq, e)| e.to_record(seq)).collect())
    }
}

fn writer(store: Store, table: Table<u64, Entry>, jobs: Receiver<Job>, count: Arc<AtomicU64>, space: &SpaceWatch) {
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        let mut records = group[0].entries.len();
        while records < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => {
                    records += job.entries.len();
                    group.push(job);
                }
                Err(_) => break,
            }
        }
        let batches: Vec<&[Entry]> = group.iter().map(|j| j.entries.as_slice()).collect();
        let result = commit(&store, table, &batches, &count, space);
        for job in group {
            (job.done)(result.clone());
        }
    }
}

/// Commits `batches` in one transaction, numbering the entries in order.
fn commit(
    store: &Store,
    table: Table<u64, Entry>,
    batches: &[&[Entry]],
    count: &AtomicU64,
    space: &SpaceWatch,
) -> Result<(), IpcError> {
    let records: usize = batches.iter().map(|b| b.len()).sum();
    let result = store.write(|txn| {
        let first = txn.next_u64_key(&table)?;
        for (seq, entry) in (first..).zip(batches.iter().flat_map(|b| b.iter())) {
            txn.insert_new(&table, &seq, entry)?;
        }
        Ok(())
    });
    space.note(&result);
    match result {
        Ok(()) => {
            count.fetch_add(records as u64, Ordering::Relaxed);
            Ok(())
        }
        // Logged once by the SpaceWatch, not per call.
        Err(e) if e.refuses_writes().is_some() => {
            Err(IpcError::new(ErrorKind::Unavailable, format!("audit log: {e}: the signature is refused")))
        }
        Err(e) => {
            tracing::error!(error = %e, records, "audit commit failed; refusing the operations it recorded");
            Err(IpcError::internal(format!("audit log commit failed: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_store::StoreOptions;

    #[tokio::test]
    async fn appends_in_order_and_queries_both_ways() {
        for mode in [CommitMode::Inline, CommitMode::Group] {
            appends_in_order(mode).await;
        }
    }

    async fn appends_in_order(mode: CommitMode) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::new("signd-test", 1)).unwrap();
        let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let (clock, hand) = Clock::manual(start);
        let log = AuditLog::open(&store, mode, clock).unwrap();
        let peer = PeerCredentials { uid: 7, gid: 7, pid: 9 };
        for i in 0..10 {
            log.append_wait(vec![log.entry(&peer, "r", "sign", &format!("k{i}"))]).await.unwrap();
            hand.advance(std::time::Duration::from_secs(1));
        }
        assert_eq!(log.count(), 10);
        let all = log.query(&AuditQuery { after_seq: 0, limit: 100, newest_first: false }).unwrap();
        assert_eq!(all.iter().map(|r| r.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
        let page = log.query(&AuditQuery { after_seq: 4, limit: 3, newest_first: false }).unwrap();
        assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [5, 6, 7]);
        let newest = log.query(&AuditQuery { after_seq: 0, limit: 2, newest_first: true }).unwrap();
        assert_eq!(newest.iter().map(|r| r.seq).collect::<Vec<_>>(), [10, 9]);
        let older = log.query(&AuditQuery { after_seq: 9, limit: 2, newest_first: true }).unwrap();
        assert_eq!(older.iter().map(|r| r.seq).collect::<Vec<_>>(), [8, 7]);
        assert_eq!(all[3].key_id, "k3");
        assert_eq!(all[3].uid, 7);
        assert_eq!(all[3].time_unix_nanos, 1_800_000_003_000_000_000);
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use signet_store::{Durability, StoreOptions};

    /// `cargo test --release -p signd -- --ignored --nocapture append_cost`
    #[test]
    #[ignore = "prints a timing"]
    fn append_cost() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions::new("signd-test", 1);
        opts.durability = Durability::Process { flush_interval: std::time::Duration::from_millis(200) };
        let store = Store::open(dir.path(), opts).unwrap();
        let log = AuditLog::open(&store, CommitMode::Inline, Clock::system()).unwrap();
        let peer = PeerCredentials { uid: 7, gid: 7, pid: 9 };
        let mut e = log.entry(&peer, "role", "sign", "key");
        e.message_sha256 = vec![7; 32];
        let n = 20_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            log.append(vec![e.clone()], Box::new(|r| assert!(r.is_ok())));
        }
        eprintln!("inline append: {:.1} µs each", t.elapsed().as_secs_f64() * 1e6 / n as f64);
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(message_sha256(&[0u8; 256]));
        }
        eprintln!("sha256(256 B): {:.2} µs each", t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
}
