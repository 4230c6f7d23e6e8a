//! acme-bench: an RFC 8555 load generator for ACME servers (the I/O and
//! reporting behind `src/bin/acme-bench.rs`).
//!
//! - [`http`]: the connection (hyper over tokio-openssl).
//! - [`client`]: nonces, JWS (signet-acme), the ACME resources.
//! - [`challenge`]: the http-01, tls-alpn-01 and dns-01 responders.
//! - [`keys`]: key types, CSRs.
//! - [`stats`]: summaries, text and JSON.
//! - [`error`]: why an issuance failed.

pub mod challenge;
pub mod client;
pub mod error;
pub mod http;
pub mod keys;
pub mod stats;

pub use challenge::{ChallengeKind, ResponderConfig};
pub use error::Error;
pub use keys::KeyType;
pub use stats::{AllocProbe, AllocSnapshot, NoProbe};

/// Which kind of identifier the orders name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentifierKind {
    /// A fresh DNS name per issuance, `c{client}-{n}.{domain_suffix}`.
    Dns,
    /// An IP address (RFC 8738), the same for every issuance.
    Ip,
}

impl IdentifierKind {
    /// The ACME identifier type's name.
    pub fn name(self) -> &'static str {
        match self {
            IdentifierKind::Dns => "dns",
            IdentifierKind::Ip => "ip",
        }
    }
}
