//! A service on its own thread: a current-thread tokio runtime and a `LocalSet`, for servers
//! whose futures are `!Send` (capnp-rpc's) beside a daemon's multi-threaded runtime.
//!
//! ```no_run
//! # fn f(listener: std::os::unix::net::UnixListener) -> Result<(), signet_runtime::DaemonError> {
//! use signet_runtime::service_thread::ServiceThread;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let stop = shutdown.clone();
//! let thread = ServiceThread::spawn("exampled-admin", "admin", listener, shutdown.clone(), move |listener| async move {
//!     // accept on `listener` (tokio::task::spawn_local is fine here) until `stop` is cancelled
//!     stop.cancelled().await;
//!     drop(listener);
//! })?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::thread::JoinHandle;

use tokio_util::sync::CancellationToken;

use crate::DaemonError;

/// A thread serving one listener on its own runtime and `LocalSet`.
#[derive(Debug)]
pub struct ServiceThread {
    what: &'static str,
    handle: JoinHandle<()>,
}

impl ServiceThread {
    /// Starts the thread `thread_name` running `serve` on `listener` until the future `serve`
    /// returns ends. `what` names the service in messages ("registry", "admin").
    ///
    /// `serve` gets the listener registered with the thread's own runtime and runs on its
    /// `LocalSet`, so it may `spawn_local`. If that runtime cannot be built or the listener
    /// cannot be registered, the problem is logged and `shutdown` is cancelled: the daemon
    /// stops rather than run without the service.
    pub fn spawn<F, Fut>(
        thread_name: &str,
        what: &'static str,
        listener: std::os::unix::net::UnixListener,
        shutdown: CancellationToken,
        serve: F,
    ) -> Result<ServiceThread, DaemonError>
    where
        F: FnOnce(tokio::net::UnixListener) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let handle = std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || run(what, listener, shutdown, serve))
            .map_err(|e| DaemonError::Startup(format!("{what} thread: {e}")))?;
        Ok(ServiceThread { what, handle })
    }

    /// Waits for the thread to end, on tokio's blocking pool (so it must be called inside a
    /// runtime that has one); a panic there is logged.
    pub async fn join(self) {
        let what = self.what;
        match tokio::task::spawn_blocking(move || self.handle.join()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => tracing::error!("the {what} thread panicked"),
            Err(e) => tracing::error!(error = %e, "cannot wait for the {what} thread"),
        }
    }
}

fn run<F, Fut>(what: &str, listener: std::os::unix::net::UnixListener, shutdown: CancellationToken, serve: F)
where
    F: FnOnce(tokio::net::UnixListener) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the {what} runtime");
            shutdown.cancel();
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let registered = listener.set_nonblocking(true).and_then(|()| tokio::net::UnixListener::from_std(listener));
        match registered {
            Ok(listener) => serve(listener).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot serve the {what} socket");
                shutdown.cancel();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::{Read, Write};
    use std::rc::Rc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn serves_on_its_own_local_set_until_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let thread = ServiceThread::spawn("test-service", "test", listener, shutdown.clone(), move |listener| {
            async move {
                // !Send state, as capnp-rpc's.
                let greeting = Rc::new(String::from("hello"));
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        accepted = listener.accept() => {
                            let (stream, _) = accepted.unwrap();
                            let greeting = greeting.clone();
                            tokio::task::spawn_local(async move {
                                let std = stream.into_std().unwrap();
                                std.set_nonblocking(false).unwrap();
                                (&std).write_all(greeting.as_bytes()).unwrap();
                                assert_eq!(std::thread::current().name(), Some("test-service"));
                            });
                        }
                    }
                }
            }
        })
        .unwrap();
        let answer = tokio::task::spawn_blocking(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text
        })
        .await
        .unwrap();
        assert_eq!(answer, "hello");
        shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), thread.join()).await.expect("thread ends");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_panic_is_reported_by_join() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("p.sock")).unwrap();
        let thread = ServiceThread::spawn("test-panic", "test", listener, CancellationToken::new(), |_| async {
            panic!("boom")
        })
        .unwrap();
        thread.join().await;
    }
}
