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
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}
