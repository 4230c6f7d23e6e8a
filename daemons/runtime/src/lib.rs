//! Shared daemon plumbing for every Signet daemon: strict config loading and checking, logging,
//! sd_notify and watchdog, health with named causes, named socket activation, signal handling, one start / reload / stop
//! lifecycle, services on their own `LocalSet` thread, the metrics registry and the HTTP scaffold
//! with `/healthz` and `/metrics`.
//!
//! A daemon's `main.rs` wires these together; it never carries its own copy of any of them.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod activation;
pub mod client;
pub mod config;
pub mod error;
pub mod health;
pub mod http;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod principals;
pub mod service_thread;
pub mod shutdown;
pub mod tls;

pub use error::DaemonError;

/// Serialises tests that read or write process environment variables.
#[cfg(test)]
pub(crate) fn env_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
