//! The ACME protocol core of Signet (RFC 8555): what acmed, the ACME CA
//! daemon, needs to understand and answer requests, as pure functions.
//!
//! - [`jws`]: request authentication: flattened JWS parsing under RFC 8555 §6.2,
//!   JWK parsing and thumbprints, signature verification with OpenSSL, key
//!   rollover and external account binding.
//! - [`problem`]: problem documents and the ACME error types with their HTTP statuses.
//! - [`types`]: the ACME resources and payloads as serde types.
//! - [`state`]: the status rules of orders and authorizations at a given time,
//!   what a challenge's outcome, a finalization or a deactivation does to
//!   them, and the ARI renewal window.
//! - [`validate`]: identifier, contact and token syntax, key authorizations and
//!   the values the http-01, dns-01 and tls-alpn-01 challenges compare.
//! - [`policy`]: which valid identifiers are refused (bad A-labels, public
//!   suffixes and wildcards directly under them).
//!
//! Nothing here does I/O, reads the clock or draws randomness: nonces, tokens
//! and times come from the caller, so every function can be tested and fuzzed
//! on its own.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod caa;
pub mod fuzz;
mod identifier;
pub mod jws;
pub mod policy;
pub mod problem;
pub mod state;
pub mod types;
pub mod validate;

pub use jws::{Jwk, JwsError, SignedRequest, VerifiedRequest};
pub use problem::{AcmeError, Problem, ProblemType};
