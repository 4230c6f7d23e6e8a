//! Plain types every Signet crate shares, with no I/O, no async runtime and no
//! wire format: the leaf of the dependency graph. The CA core (signet-ca), the
//! ACME core (signet-acme), the daemons, ipc-schema and libpki all use these,
//! so the pure cores need not depend on Cap'n Proto or tokio.
#![forbid(unsafe_code)]

pub mod algorithm;
pub mod clock;
pub mod error;

pub use algorithm::{DigestAlgorithm, KeyAlgorithm, SignatureScheme};
pub use clock::{Clock, ManualClock};
pub use error::{ErrorKind, SchemeMismatch, UnknownName};
