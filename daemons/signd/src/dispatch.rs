//! Where a single `sign` call is signed.
//!
//! Calls are gathered on the capnp thread until it has handled everything that
//! arrived together (one read of a socket, or several connections ready at
//! once), then:
//! - **alone, with the pool idle**: signed right here on the capnp thread.
//!   Handing one signature to a signing thread and back costs two thread
//!   wake-ups, more than a P-256 signature. While the
//!   thread then waits for the next call, that key prepares its next
//!   signatures (ECDSA nonces, `backend/nonces.rs`);
//! - **otherwise**: split into one share per signing thread (one per core);
//!   for quick algorithms the capnp thread signs the last share itself, and
//!   the pool the others. Each share is signed and its audit records committed in one
//!   transaction, so a burst of calls costs one hand-off and one commit per
//!   share, not per call. Signing a share here rather than sleeping until the
//!   pool answers saves the wake-ups that cost more than the signatures on
//!   this virtual machine; the client sends calls that queue up together in
//!   one `signEach` message, so a burst usually arrives whole.
//!
//! Either way the answer goes out only after its audit record is committed.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use signet_ipc::{IpcError, KeyAlgorithm, SignatureScheme};
use tokio::sync::oneshot;

use crate::audit::{AuditLog, Entry};
use crate::backend::SigningKey;
use crate::pool::Pool;

/// What the dispatcher signs with: the signing threads, and the audit log
/// each share's records are committed to (signd's `service::State`).
pub(crate) trait Workers: Send + Sync + 'static {
    /// The signing threads.
    fn pool(&self) -> &Pool;
    /// The audit log.
    fn audit(&self) -> &AuditLog;
}

/// One `sign` call, checked and ready to sign.
pub(crate) struct SignJob {
    pub(crate) key: Arc<dyn SigningKey>,
    pub(crate) scheme: SignatureScheme,
    pub(crate) message: Vec<u8>,
    pub(crate) entry: Entry,
    pub(crate) reply: oneshot::Sender<Result<Vec<u8>, IpcError>>,
}

/// The calls gathered so far; lives on the capnp thread.
pub(crate) struct Dispatcher<W> {
    state: Arc<W>,
    gathered: RefCell<Vec<SignJob>>,
    /// The key of the last call signed here alone: the one to prepare for
    /// while the thread is otherwise idle.
    lone_key: RefCell<Option<Arc<dyn SigningKey>>>,
}

impl<W: Workers> Dispatcher<W> {
    pub(crate) fn new(state: Arc<W>) -> Rc<Self> {
        Rc::new(Self { state, gathered: RefCell::new(Vec::new()), lone_key: RefCell::new(None) })
    }

    /// Queues `job`; it is signed once the capnp thread has handled what
    /// arrived with it. Must be called inside the `LocalSet`.
    pub(crate) fn submit(self: &Rc<Self>, job: SignJob) {
        let mut gathered = self.gathered.borrow_mut();
        gathered.push(job);
        if gathered.len() == 1 {
            // Runs after the tasks already scheduled, i.e. after every
            // connection that had data has handed over its calls.
            let me = self.clone();
            tokio::task::spawn_local(async move { me.flush() });
        }
    }

    /// One piece of work ahead for the key of the last lone call, if any is
    /// due (see `SigndService::idle_work`); returns whether it did any.
    pub(crate) fn prepare_one(&self) -> bool {
        self.lone_key.borrow().as_ref().is_some_and(|key| key.prepare_one())
    }

    fn flush(&self) {
        let jobs = std::mem::take(&mut *self.gathered.borrow_mut());
        if jobs.is_empty() {
            return;
        }
        if jobs.len() == 1 && self.state.pool().idle() {
            // Lone calls are where work done ahead pays: the caller waits
            // for every microsecond of its signature.
            self.lone_key.replace(Some(jobs[0].key.clone()));
            sign_and_record(jobs, self.state.audit());
            return;
        }
        let sign_here = jobs.iter().all(|job| quick(job.key.algorithm()));
        let shares = self.state.pool().threads().clamp(1, jobs.len());
        let per_share = jobs.len().div_ceil(shares);
        let mut jobs = jobs.into_iter();
        loop {
            let share: Vec<SignJob> = jobs.by_ref().take(per_share).collect();
            if share.is_empty() {
                break;
            }
            if sign_here && jobs.len() == 0 {
                // The last share is signed here: this thread would otherwise
                // go to sleep and be woken for the answers, and waking a
                // thread costs more than a P-256 signature.
                sign_and_record(share, self.state.audit());
                break;
            }
            let audit = self.state.audit().clone();
            self.state.pool().spawn(move || sign_and_record(share, &audit));
        }
    }
}

/// Whether a signature with `algorithm` is cheap enough for the capnp thread
/// to make a share of them (P-256 ECDSA and Ed25519: tens of microseconds).
/// Slower ones all go to the pool, so the capnp thread keeps reading and
/// answering other calls meanwhile.
fn quick(algorithm: KeyAlgorithm) -> bool {
    matches!(algorithm, KeyAlgorithm::EcP256 | KeyAlgorithm::Ed25519)
}

/// Signs each job, commits all their audit records in one append, then answers
/// each call (with the commit's error if it failed).
fn sign_and_record(jobs: Vec<SignJob>, audit: &AuditLog) {
    let mut entries = Vec::with_capacity(jobs.len());
    let mut answers = Vec::with_capacity(jobs.len());
    for job in jobs {
        let signed = job.key.sign(job.scheme, &job.message);
        let mut entry = job.entry;
        entry.message_sha256 = crate::audit::message_sha256(&job.message);
        if let Err(e) = &signed {
            entry = entry.failed(e);
        }
        entries.push(entry);
        answers.push((job.reply, signed));
    }
    audit.append(
        entries,
        Box::new(move |committed| {
            for (reply, signed) in answers {
                let _ = reply.send(committed.clone().and(signed));
            }
        }),
    );
}
