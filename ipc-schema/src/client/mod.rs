//! The clients: [`SigndClient`], [`OcspdClient`], [`AcmedClient`],
//! [`TokendClient`] and [`CtlogdClient`], each a `Send + Sync` handle usable from any thread or
//! runtime, over one generic transport (`conn::Connection`): one module per
//! service beside it.
//!
//! capnp-rpc is `!Send`, so a connection lives on one thread. Two ways to call:
//! - the default: one background thread (started on first use) owns the
//!   connection on a `LocalSet`; each call crosses to it over a channel and its
//!   answer comes back on a oneshot. Many calls may be in flight at once, from
//!   any thread or async runtime.
//! - [`SigndClient::per_thread`] (and the others' `per_thread`): each calling
//!   thread owns its own connection and runs the call itself, for synchronous
//!   callers (C programs, CLIs). No thread hand-off, so the lowest latency per call.
//!
//! When the connection breaks (signd restarted), the next call reconnects, and
//! a call that failed because the connection broke under it is retried once on
//! the new connection (unless a second try could do it twice: acmed's
//! `eabCreate`, ocspd's `releaseHold`, tokend's `clientCreate` and
//! `clientRotateSecret`).

mod acmed;
mod conn;
mod ctlogd;
mod ocspd;
mod signd;
mod tokend;

pub use acmed::{AcmedClient, DEFAULT_ACMED_SOCKET};
pub use ctlogd::{CtlogdClient, DEFAULT_CTLOGD_SOCKET};
pub use ocspd::{OcspdClient, DEFAULT_OCSPD_SOCKET};
pub use signd::{SigndClient, DEFAULT_SOCKET};
pub use tokend::{TokendClient, DEFAULT_TOKEND_SOCKET};

/// Runs a client future to completion on the calling thread. For C callers and
/// CLIs that have no async runtime; the futures above need none.
///
/// While the future waits, the thread gives up the CPU ([`std::thread::yield_now`])
/// and looks again, for up to [`YIELD_BEFORE_PARK`], before it sleeps. The
/// answers of calls that travelled together (a `signEach`) come back one
/// after another from the connection thread, usually on this thread's CPU:
/// a thread asleep would be woken by the first, take the CPU from the
/// connection thread, handle that one answer and sleep again, once per
/// answer. A thread that yields lets the connection thread hand over every
/// answer first, then handles them all in one turn.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    struct ThreadWaker {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.woken.store(true, Ordering::Release);
            // Cheap unless the thread is parked.
            self.thread.unpark();
        }
    }

    let me = Arc::new(ThreadWaker { thread: std::thread::current(), woken: AtomicBool::new(false) });
    let waker = Waker::from(me.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        let waiting = std::time::Instant::now();
        while !me.woken.swap(false, Ordering::Acquire) {
            if waiting.elapsed() < YIELD_BEFORE_PARK {
                std::thread::yield_now();
            } else {
                // A wake before this returns at once (unpark leaves a token).
                std::thread::park();
            }
        }
    }
}

/// How long [`block_on`] yields and looks again before it parks its thread.
const YIELD_BEFORE_PARK: std::time::Duration = std::time::Duration::from_micros(50);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{block_on, YIELD_BEFORE_PARK};

    #[test]
    fn block_on_returns_a_ready_future_at_once() {
        assert_eq!(block_on(async { 7 }), 7);
    }

    #[test]
    fn block_on_is_woken_from_another_thread_while_yielding_and_while_parked() {
        for delay in [Duration::ZERO, Duration::from_micros(10), 20 * YIELD_BEFORE_PARK] {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let sender = std::thread::spawn(move || {
                std::thread::sleep(delay);
                tx.send(delay).unwrap();
            });
            assert_eq!(block_on(rx).unwrap(), delay);
            sender.join().unwrap();
        }
    }

    #[test]
    fn block_on_polls_again_for_every_wake() {
        // Many answers, each waking the thread: every one is seen, in order.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sender = std::thread::spawn(move || {
            for i in 0..1000u32 {
                tx.send(i).unwrap();
                if i % 100 == 0 {
                    std::thread::sleep(2 * YIELD_BEFORE_PARK);
                }
            }
        });
        let got = block_on(async {
            let mut got = Vec::new();
            while let Some(i) = rx.recv().await {
                got.push(i);
            }
            got
        });
        sender.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }
}
