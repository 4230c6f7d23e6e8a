//! The Certificate Transparency core of Signet, for `ctlogd`: a CT log serving
//! both the RFC 6962 API and the Static CT API (c2sp.org/static-ct-api) from
//! one tree, whose key lives in signd.
//!
//! - [`merkle`]: RFC 6962/9162 tree hashes, inclusion and consistency proofs,
//!   and the tlog-tiles layout (tile coordinates and paths, proofs read from
//!   tiles, the tiles a batch of new leaves writes).
//! - [`rfc6962`]: log entries, SCTs, tree heads and the exact bytes signd
//!   signs for them; precertificate handling; the JSON API and `add-chain`
//!   parsing.
//! - [`staticct`]: data tiles, the `leaf_index` SCT extension, signed notes
//!   and checkpoints with the RFC 6962 note signature.
//! - [`verify`] (feature `openssl`, on by default): SCT, tree head and
//!   checkpoint verification against a log's public key.
//! - [`tls`]: the TLS presentation-language encoder and decoder RFC 6962
//!   structures are written in.
//! - [`fuzz`]: entry points for fuzzers.
//!
//! Nothing here does I/O, reads the clock or holds a key: timestamps come from
//! the caller, and every signature is over bytes this crate builds and signd
//! signs.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod fuzz;
pub mod merkle;
pub mod rfc6962;
pub mod staticct;
pub mod tls;
#[cfg(feature = "openssl")]
pub mod verify;

pub use merkle::{Hash, MerkleError};
pub use rfc6962::{DigitallySigned, LogId, Sct, SignedEntry, TimestampedEntry, TreeHead};
#[cfg(feature = "openssl")]
pub use verify::{LogKey, VerifyError};
