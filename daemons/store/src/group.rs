//! Group commit: several callers' writes share one LMDB transaction, and so
//! one disk flush, without weakening what a returned write promises.
//!
//! With [`Durability::Sync`](crate::Durability::Sync) every commit costs two
//! disk flushes (the data pages, then the meta page). Writers that arrive
//! while a commit is flushing queue up; the writer thread then runs all of
//! them in one transaction, each closure in its own nested transaction (so a
//! closure that fails or panics takes back only its own writes), and commits
//! once. Each caller learns its result only after that commit returned, so
//! "returned `Ok`" means exactly what it means for [`Store::write`](crate::Store::write).
//!
//! Unless the store has a [`group_linger`](crate::StoreOptions::group_linger),
//! nothing waits on purpose to gather a group: a lone writer is committed at
//! once, and the group is whatever queued meanwhile. With one, the writer
//! gathers what arrives within the linger after the first write.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, ThreadId};

use futures_channel::oneshot;
use lmdb::{Environment, Transaction};

use crate::reserve::Reserve;
use crate::store::note_failure;
use crate::txn::WriteTxn;
use crate::StoreError;

/// Most writes in one group: bounds the time the write lock is held and the
/// size of one commit.
const MAX_GROUP: usize = 256;

/// Called with the group's commit outcome, once.
type Finish = Box<dyn FnOnce(Result<(), lmdb::Error>) + Send>;

/// One caller's queued write.
type Job = Box<dyn Queued>;

trait Queued: Send {
    /// Runs the closure in a (nested) transaction: `Some` means "commit my
    /// writes and tell me the outcome", `None` means the closure failed (its
    /// error is already delivered) and its writes are to be dropped.
    fn run(self: Box<Self>, txn: &mut WriteTxn<'_>) -> Option<Finish>;
    /// Reports that no transaction could be begun for it.
    fn fail(self: Box<Self>, e: StoreError);
}

struct Pending<F, R, E> {
    f: F,
    tx: oneshot::Sender<Result<R, E>>,
}

impl<F, R, E> Queued for Pending<F, R, E>
where
    F: for<'t> FnOnce(&mut WriteTxn<'t>) -> Result<R, E> + Send + 'static,
    R: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    fn run(self: Box<Self>, txn: &mut WriteTxn<'_>) -> Option<Finish> {
        let Pending { f, tx } = *self;
        match f(txn) {
            Ok(value) => Some(Box::new(move |committed: Result<(), lmdb::Error>| {
                let out = committed.map(|()| value).map_err(|e| E::from(StoreError::lmdb("commit")(e)));
                // The caller may have stopped waiting; the commit stands.
                let _ = tx.send(out);
            })),
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
        }
    }

    fn fail(self: Box<Self>, e: StoreError) {
        let _ = self.tx.send(Err(E::from(e)));
    }
}

/// Adds to `group` what is queued, and what arrives within `linger`, up to
/// [`MAX_GROUP`] writes.
///
/// The thread sleeps through the linger and then takes what queued, rather
/// than waiting on the queue: a wait on the queue wakes this thread for every
/// write that arrives, and with a steady trickle of writes (probed's results)
/// those wake-ups cost more than the commits. A queue that already holds a
/// full group is committed without lingering.
fn gather(queue: &mpsc::Receiver<Job>, group: &mut Vec<Job>, linger: std::time::Duration) {
    group.extend(queue.try_iter().take(MAX_GROUP - group.len()));
    if linger.is_zero() || group.len() >= MAX_GROUP {
        return;
    }
    std::thread::sleep(linger);
    group.extend(queue.try_iter().take(MAX_GROUP - group.len()));
}

/// The writer thread of one store, started on the first grouped write.
#[derive(Debug)]
pub(crate) struct GroupWriter {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl GroupWriter {
    /// Starts the thread. Nested transactions are not available with
    /// `MDB_WRITEMAP` (a store with a `reserve`); then each write gets its own
    /// transaction, still off the caller's thread, after the reserve is checked.
    pub(crate) fn start(
        env: Arc<Environment>,
        store_id: u64,
        reserve: Option<Arc<Reserve>>,
        linger: std::time::Duration,
        failure: Arc<OnceLock<String>>,
        commits: Arc<AtomicU64>,
    ) -> Result<Self, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                while let Ok(first) = queue.recv() {
                    let mut group = vec![first];
                    if let Some(detail) = failure.get() {
                        gather(&queue, &mut group, std::time::Duration::ZERO);
                        fail_all(group, || StoreError::Failed { detail: detail.clone() });
                        continue;
                    }
                    let outcome = match &reserve {
                        None => {
                            gather(&queue, &mut group, linger);
                            commit_group(&env, store_id, &commits, group)
                        }
                        Some(reserve) => commit_each(&env, store_id, &commits, reserve, group),
                    };
                    if let Err(lmdb::Error::Panic) = outcome {
                        note_failure(&failure, &StoreError::lmdb("commit")(lmdb::Error::Panic));
                    }
                }
            })
            .map_err(StoreError::WriterThread)?;
        Ok(Self { jobs: Some(jobs), thread_id: thread.thread().id(), thread: Some(thread) })
    }

    /// Queues `f`; the future resolves once its writes are committed (or
    /// dropped, with the error).
    pub(crate) fn submit<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        F: for<'t> FnOnce(&mut WriteTxn<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, E>>();
        let job: Job = Box::new(Pending { f, tx });
        let queued = self.jobs.as_ref().map(|jobs| jobs.send(job).is_ok());
        async move {
            if queued != Some(true) {
                return Err(E::from(StoreError::WriterGone));
            }
            // Dropped unanswered: the closure panicked (its writes were
            // taken back) or the thread is gone.
            rx.await.unwrap_or_else(|_| Err(E::from(StoreError::WriterGone)))
        }
    }
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            // The last handle can be dropped by a closure's captures on the
            // writer thread itself: it exits on its own once the queue is
            // empty, so there is nothing to wait for.
            if std::thread::current().id() != self.thread_id {
                let _ = thread.join();
            }
        }
    }
}

/// Runs `job` in `txn`; a panic counts as a failure (its sender is dropped,
/// so the caller sees [`StoreError::WriterGone`]).
fn run(job: Job, txn: &mut WriteTxn<'_>) -> Option<Finish> {
    catch_unwind(AssertUnwindSafe(|| job.run(txn))).unwrap_or(None)
}

/// Commits `group` in one transaction; returns the LMDB error that failed it, if any.
fn commit_group(env: &Environment, store_id: u64, commits: &AtomicU64, group: Vec<Job>) -> Result<(), lmdb::Error> {
    let mut parent = match env.begin_rw_txn() {
        Ok(txn) => txn,
        Err(e) => {
            fail_all(group, || StoreError::lmdb("begin write")(e));
            return Err(e);
        }
    };
    let mut finishers: Vec<Finish> = Vec::with_capacity(group.len());
    let mut jobs = group.into_iter();
    while let Some(job) = jobs.next() {
        let child = match parent.begin_nested_txn() {
            Ok(child) => child,
            Err(e) => {
                // The parent is unusable: nothing in it is committed.
                finishers.into_iter().for_each(|f| f(Err(e)));
                fail_all(std::iter::once(job).chain(jobs).collect(), || StoreError::lmdb("begin write")(e));
                return Err(e);
            }
        };
        let mut txn = WriteTxn::new(child, store_id);
        match run(job, &mut txn) {
            Some(finish) => match txn.into_inner().commit() {
                Ok(()) => finishers.push(finish),
                Err(e) => finish(Err(e)),
            },
            // Dropping the child aborts it.
            None => drop(txn),
        }
    }
    if finishers.is_empty() {
        return Ok(());
    }
    let committed = parent.commit();
    if committed.is_ok() {
        // Before anyone learns of it (see `Store::commits`).
        commits.fetch_add(1, Ordering::Release);
    }
    finishers.into_iter().for_each(|f| f(committed));
    committed
}

/// Commits each of `group` in its own transaction; returns the last LMDB error, if any.
fn commit_each(
    env: &Environment,
    store_id: u64,
    commits: &AtomicU64,
    reserve: &Reserve,
    group: Vec<Job>,
) -> Result<(), lmdb::Error> {
    let mut outcome = Ok(());
    for job in group {
        if let Err(e) = reserve.ensure(env) {
            job.fail(StoreError::lmdb("reserve space")(e));
            outcome = Err(e);
            continue;
        }
        let txn = match env.begin_rw_txn() {
            Ok(txn) => txn,
            Err(e) => {
                job.fail(StoreError::lmdb("begin write")(e));
                outcome = Err(e);
                continue;
            }
        };
        let mut txn = WriteTxn::new(txn, store_id);
        if let Some(finish) = run(job, &mut txn) {
            let committed = txn.into_inner().commit();
            if committed.is_ok() {
                commits.fetch_add(1, Ordering::Release);
            }
            finish(committed);
            if let Err(e) = committed {
                outcome = Err(e);
            }
        }
    }
    outcome
}

/// Reports the error `e()` makes to every job without running it.
fn fail_all(group: Vec<Job>, e: impl Fn() -> StoreError) {
    group.into_iter().for_each(|job| job.fail(e()));
}
