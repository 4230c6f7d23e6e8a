//! A fixed pool of signing threads, so every core signs. The capnp thread
//! hands work here, except a lone `sign` while the pool is idle (see
//! [`crate::dispatch`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;

type Work = Box<dyn FnOnce() + Send>;

/// The signing threads. Dropping the pool lets the threads finish and exit.
pub struct Pool {
    work: Sender<Work>,
    threads: usize,
    /// Work handed over and not yet finished.
    busy: Arc<AtomicUsize>,
}

impl Pool {
    /// Starts `threads` workers (0: one per CPU).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let threads =
            if threads == 0 { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) } else { threads };
        let (tx, rx) = crossbeam_channel::unbounded::<Work>();
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("signer-{i}")).spawn(move || {
                while let Ok(work) = rx.recv() {
                    work();
                }
            })?;
        }
        Ok(Self { work: tx, threads, busy: Arc::new(AtomicUsize::new(0)) })
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// No work is queued or running.
    pub fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// Runs `f` on a worker. Work is dropped unrun only if every worker has
    /// exited, which happens only after the pool itself is dropped.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        // Counted down when the work is dropped: after it runs, if it panics,
        // or if it is never run.
        let done = Finished(self.busy.clone());
        let _ = self.work.send(Box::new(move || {
            let _done = done;
            f();
        }));
    }

    /// Runs `f` on a worker and waits for its result.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(move || drop(tx.send(f())));
        rx.await.ok()
    }
}

struct Finished(Arc<AtomicUsize>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
