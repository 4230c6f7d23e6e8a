//! The server half: traits the daemons implement with plain types, one
//! module per service (signd, ocspd, acmed, tokend, ctlogd), and the capnp adapters that
//! serve them over a Unix socket through one accept loop (`accept`).
//!
//! capnp-rpc is `!Send`, so everything here runs on a tokio `LocalSet`; the
//! implementation is expected to push CPU work (signing) to worker threads and
//! return futures that wait for it (signd keeps a lone short call, see its
//! `dispatch` module).

use futures::future::LocalBoxFuture;

use crate::types::IpcError;

mod accept;
mod acmed;
mod ctlogd;
mod ocspd;
mod signd;
mod tokend;

#[cfg(test)]
pub(crate) use accept::serve_on_thread;
pub(crate) use accept::vat_network;
pub use accept::{InFlight, ServeOptions, DEFAULT_BUSY_POLL, DRAIN_TIMEOUT};
pub use acmed::{serve_acmed, AcmeAdminService, AcmedService, AcmedSession};
pub use ctlogd::{serve_ctlogd, CtAdminService, CtlogdService, CtlogdSession};
pub use ocspd::{serve_ocspd, OcspdService, OcspdSession, RegistryService};
pub use signd::{
    serve, serve_connection, AdminService, CrlSignerService, IssuerService, LogSignerService, OcspSignerService,
    Session, SigndService, SignerService,
};
pub use tokend::{serve_tokend, TokendAdminService, TokendService, TokendSession};

/// The result of a server operation: a `!Send` future on the serving thread.
pub type LocalResult<T> = LocalBoxFuture<'static, Result<T, IpcError>>;
