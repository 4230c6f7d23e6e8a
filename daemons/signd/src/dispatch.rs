//! Where a single call is signed: a `Signer.sign`, or an Issuer's, CrlSigner's
//! or OcspSigner's (validated, signed and assembled in one piece of work).
//!
//! Calls are gathered on the capnp thread until it has handled everything that
//! arrived together (one read of a socket, or several connections ready at
//! once), then:
//! - **alone, with the pool idle**: signed right here on the capnp thread
//!   (unless its input is large: a CRL of many serials goes to the pool).
//!   Handing one signature to a signing thread and back costs two thread
//!   wake-ups, more than a P-256 signature. While the thread then waits for
//!   the next call, that key prepares its next signatures (ECDSA nonces,
//!   `backend/nonces.rs`);
//! - **otherwise**, `sign` calls are split into one share per signing thread
//!   (one per core); for quick algorithms and small inputs the capnp thread
//!   signs the last share itself, and the pool the others. Each share is
//!   signed and its audit records committed in one transaction, so a burst of
//!   calls costs one hand-off and one commit per share, not per call. Signing
//!   a share here rather than sleeping until the pool answers saves the
//!   wake-ups that cost more than the signatures on this virtual machine; the
//!   client sends calls that queue up together in one `signEach` message, so
//!   a burst usually arrives whole;
//! - **otherwise**, issuer calls go to the pool one by one, each answered as
//!   soon as it is signed; while the pool is busy they go there as they
//!   arrive, without waiting to be gathered. Validating and assembling OCSP
//!   responses in shares, or on this thread under load, kept it from reading
//!   the next calls and cost ocspd's nonce throughput (docs/performance-log.md,
//!   "signd: issuer calls through the dispatcher"). OCSP responses that
//!   arrive in one message (OcspSigner `signEach`) are shared among the
//!   signing threads, one commit a share ([`Dispatcher::submit_together`]).
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

/// One call, checked and ready to sign.
pub(crate) struct SignJob {
    pub(crate) key: Arc<dyn SigningKey>,
    pub(crate) task: Task,
    pub(crate) entry: Entry,
    pub(crate) reply: Reply,
}

/// Where a call's answer goes.
pub(crate) type Reply = oneshot::Sender<Result<Vec<u8>, IpcError>>;

/// What a [`SignJob`] signs.
pub(crate) enum Task {
    /// A `Signer.sign` call: the message, signed as the scheme says.
    Sign { scheme: SignatureScheme, message: Vec<u8> },
    /// An Issuer, CrlSigner or OcspSigner call: `work` validates the DER,
    /// signs it and assembles the signed object; its note completes the
    /// audit outcome ("ok <note>").
    Assemble { der: Vec<u8>, work: Work },
}

/// What a signing thread does with an issuer capability's DER: validate
/// (refusals are `IpcError`s), then sign with the key; returns the object and
/// an audit note.
pub(crate) type Work = Box<dyn FnOnce(&dyn SigningKey, &[u8]) -> Result<(Vec<u8>, String), IpcError> + Send>;

/// Inputs larger than this (a CRL of many serials) are never signed on the
/// capnp thread: validating and hashing them would hold up every other
/// caller. A certificate or an OCSP ResponseData is a few hundred bytes.
const LARGE_INPUT: usize = 64 * 1024;

impl SignJob {
    fn input(&self) -> &[u8] {
        match &self.task {
            Task::Sign { message, .. } => message,
            Task::Assemble { der, .. } => der,
        }
    }

    /// Whether the capnp thread may sign this one alone: any key, unless the
    /// input is large.
    fn fits_here(&self) -> bool {
        self.input().len() <= LARGE_INPUT
    }

    /// Whether the capnp thread may sign a share of these (see [`quick`]).
    fn quick(&self) -> bool {
        quick(self.key.algorithm()) && self.fits_here()
    }

    /// Signs (or validates, signs and assembles); returns where the answer
    /// goes, the answer, and the audit entry that records it.
    fn sign(self) -> (Reply, Result<Vec<u8>, IpcError>, Entry) {
        let sha256 = crate::audit::message_sha256(self.input());
        let mut entry = self.entry;
        entry.message_sha256 = sha256;
        let signed = match self.task {
            Task::Sign { scheme, message } => self.key.sign(scheme, &message),
            Task::Assemble { der, work } => match work(self.key.as_ref(), &der) {
                Ok((object, note)) => {
                    entry.outcome = format!("ok {note}");
                    Ok(object)
                }
                Err(e) => {
                    // What a CA refuses to sign is worth a line in the log.
                    tracing::info!(uid = entry.uid, pid = entry.pid, role = %entry.role,
                        operation = %entry.operation, key = %entry.key_id, error = %e, "refused");
                    Err(e)
                }
            },
        };
        if let Err(e) = &signed {
            entry = entry.failed(e);
        }
        (self.reply, signed, entry)
    }
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
        if matches!(job.task, Task::Assemble { .. }) && !self.state.pool().idle() {
            // Not a lone call: straight to the pool (see the module's documentation).
            self.to_pool_alone(job);
            return;
        }
        let mut gathered = self.gathered.borrow_mut();
        gathered.push(job);
        if gathered.len() == 1 {
            // Runs after the tasks already scheduled, i.e. after every
            // connection that had data has handed over its calls.
            let me = self.clone();
            tokio::task::spawn_local(async move { me.flush() });
        }
    }

    /// Issuer calls that arrived in one message (an OcspSigner `signEach`):
    /// one share per signing thread, each signed and its audit records
    /// committed together, so the burst costs one hand-off and one commit a
    /// share rather than a call. One alone takes [`Dispatcher::submit`]'s path.
    pub(crate) fn submit_together(self: &Rc<Self>, jobs: Vec<SignJob>) {
        if jobs.len() <= 1 {
            jobs.into_iter().for_each(|job| self.submit(job));
            return;
        }
        self.share_out(jobs, false);
    }

    /// One piece of work ahead for the key of the last lone call, if any is
    /// due (see `SigndService::idle_work`); returns whether it did any.
    pub(crate) fn prepare_one(&self) -> bool {
        self.lone_key.borrow().as_ref().is_some_and(|key| key.prepare_one())
    }

    /// Hands `job` to the pool on its own: signed, committed and answered
    /// without waiting for any other call.
    fn to_pool_alone(&self, job: SignJob) {
        let audit = self.state.audit().clone();
        self.state.pool().spawn(move || sign_and_record(vec![job], &audit));
    }

    fn flush(&self) {
        let jobs = std::mem::take(&mut *self.gathered.borrow_mut());
        if jobs.is_empty() {
            return;
        }
        if jobs.len() == 1 && jobs[0].fits_here() && self.state.pool().idle() {
            // Lone calls are where work done ahead pays: the caller waits
            // for every microsecond of its signature.
            self.lone_key.replace(Some(jobs[0].key.clone()));
            sign_and_record(jobs, self.state.audit());
            return;
        }
        // Issuer calls one by one (see the module's documentation).
        let (jobs, assembled): (Vec<_>, Vec<_>) =
            jobs.into_iter().partition(|job| matches!(job.task, Task::Sign { .. }));
        for job in assembled {
            self.to_pool_alone(job);
        }
        if jobs.is_empty() {
            return;
        }
        let sign_here = jobs.iter().all(SignJob::quick);
        self.share_out(jobs, sign_here);
    }

    /// Splits `jobs` into one share per signing thread; each share is signed
    /// and its audit records committed in one append. With `last_here` the
    /// last share is signed on this thread: it would otherwise go to sleep
    /// and be woken for the answers, and waking a thread costs more than a
    /// P-256 signature.
    fn share_out(&self, jobs: Vec<SignJob>, last_here: bool) {
        if jobs.is_empty() {
            return;
        }
        let shares = self.state.pool().threads().clamp(1, jobs.len());
        let per_share = jobs.len().div_ceil(shares);
        let mut jobs = jobs.into_iter();
        loop {
            let share: Vec<SignJob> = jobs.by_ref().take(per_share).collect();
            if share.is_empty() {
                break;
            }
            if last_here && jobs.len() == 0 {
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
        let (reply, signed, entry) = job.sign();
        entries.push(entry);
        answers.push((reply, signed));
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
