//! A fixed pool of signing threads. The capnp server thread never signs; it
//! hands work here so every core signs.

use crossbeam_channel::Sender;

type Work = Box<dyn FnOnce() + Send>;

/// The signing threads. Dropping the pool lets the threads finish and exit.
pub struct Pool {
    work: Sender<Work>,
    threads: usize,
}

impl Pool {
    /// Starts `threads` workers (0: one per CPU).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
        } else {
            threads
        };
        let (tx, rx) = crossbeam_channel::unbounded::<Work>();
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("signer-{i}")).spawn(move || {
                while let Ok(work) = rx.recv() {
                    work();
                }
            })?;
        }
        Ok(Self { work: tx, threads })
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` on a worker. Work is dropped unrun only if every worker has
    /// exited, which happens only after the pool itself is dropped.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        let _ = self.work.send(Box::new(f));
    }

    /// Runs `f` on a worker and waits for its result.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(move || drop(tx.send(f())));
        rx.await.ok()
    }
}
