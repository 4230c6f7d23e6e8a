//! Why a daemon could not start, or stopped abnormally: one type for every
//! daemon (each re-exports it under its own name, e.g. `signd::SigndError`),
//! printed by [`crate::config::daemon_main`] before it exits non-zero.

use std::path::PathBuf;

use crate::activation::ActivationError;

/// Why a daemon could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The store could not be opened.
    #[error("store {path}: {source}")]
    Store {
        /// The store directory.
        path: PathBuf,
        /// The cause.
        source: signet_store::StoreError,
    },
    /// A socket could not be set up.
    #[error(transparent)]
    Socket(#[from] ActivationError),
    /// Anything else at startup.
    #[error("{0}")]
    Startup(String),
}
