//! The Certificate Transparency core of Signet, for `ctlogd`: a CT log serving
//! both the RFC 6962 API and the Static CT API (c2sp.org/static-ct-api) from
//! one tree, whose key lives in signd.
//!
//! - [`merkle`]: RFC 6962/9162 tree hashes, inclusion and consistency proofs,
//!   and the tlog-tiles layout (tile coordinates and paths, proofs read from
//!   tiles, the tiles a batch of new leaves writes).
//! - [`tls`]: the TLS presentation-language encoder and decoder RFC 6962
//!   structures are written in.
//!
//! Nothing here does I/O, reads the clock or holds a key: timestamps come from
//! the caller, and every signature is over bytes this crate builds and signd
//! signs.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod merkle;
pub mod tls;
