//! acme-bench: an RFC 8555 load generator for ACME servers (the I/O and
//! reporting behind `src/bin/acme-bench.rs`).
//!
//! Each of `clients` tasks makes one account (untimed) and then issues
//! certificates back to back over one keep-alive HTTPS connection: newOrder
//! for a fresh name, the authorization, the challenge (answered by a
//! responder in this process: [`challenge`]), finalize with a new key's CSR,
//! and the download. `warmup` issuances run first and are not measured; then
//! `requests` issuances are, phase by phase ([`stats::Phase`]).
//!
//! - [`http`]: the connection (hyper over tokio-openssl).
//! - [`client`]: nonces, JWS (signet-acme), the ACME resources.
//! - [`issue`]: one issuance and the checks of its certificate.
//! - [`challenge`]: the http-01, tls-alpn-01, dns-01 and dns-persist-01 responders.
//! - [`keys`]: key types, CSRs.
//! - [`stats`]: summaries, text and JSON.
//! - [`runner`]: the tasks and the stages of a run.

pub mod challenge;
pub mod client;
pub mod error;
pub mod http;
pub mod issue;
pub mod keys;
pub mod runner;
pub mod stats;

#[cfg(test)]
mod end_to_end_tests;
#[cfg(test)]
mod mock;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use challenge::{ChallengeKind, ResponderConfig};
pub use error::Error;
pub use keys::KeyType;
pub use runner::run;
pub use stats::{AllocProbe, AllocSnapshot, NoProbe};

use stats::{ErrorCount, Memory, Summary};

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

/// Everything a run needs to know.
#[derive(Clone, Debug)]
pub struct Config {
    /// The directory URL (https; http for tests).
    pub directory: String,
    /// A PEM file of CA certificates to trust for the server's TLS
    /// certificate (and as roots for `verify_cert`); else the system's.
    pub ca_bundle: Option<PathBuf>,
    /// Concurrent client tasks, each with its own account and connection.
    pub clients: usize,
    /// Issuances measured.
    pub requests: u64,
    /// Issuances run before measuring.
    pub warmup: u64,
    /// The certificate (CSR) key type.
    pub key_type: KeyType,
    /// The CA's key type, as the caller says it set the CA up: recorded and
    /// checked against the issued certificates' issuer.
    pub ca_key_type: KeyType,
    /// The challenge answered.
    pub challenge: ChallengeKind,
    /// DNS names or an IP address.
    pub identifier: IdentifierKind,
    /// The zone the DNS names are made in.
    pub domain_suffix: String,
    /// The IP address ordered with [`IdentifierKind::Ip`].
    pub ip_address: IpAddr,
    /// Where the challenge responders listen or write.
    pub responders: ResponderConfig,
    /// Polling of authorizations and orders.
    pub polling: client::Polling,
    /// The longest one HTTP request may take.
    pub timeout: Duration,
    /// Verify every certificate chain with OpenSSL.
    pub verify_cert: bool,
    /// A label for the report (scripts tell runs apart by it).
    pub label: Option<String>,
    /// Worker threads of the runtime (for the report only).
    pub threads: usize,
}

/// What a run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The run's label.
    pub label: Option<String>,
    /// The options of the run.
    pub config: ConfigEcho,
    /// The measured window.
    pub summary: Summary,
    /// Failed measured issuances, by category.
    pub errors: BTreeMap<String, ErrorCount>,
    /// The warmup's issuances.
    pub warmup: Stage,
    /// Clients that could not fetch the directory or make their account.
    pub setup_errors: BTreeMap<String, ErrorCount>,
    /// Heap allocation in this process over the measured window.
    pub memory: Memory,
    /// The client side: connections, retries, CPU.
    pub client: ClientStats,
    /// The CA key type given and the one the certificates show.
    pub ca: CaCheck,
    /// No error anywhere, every measured issuance done, and the CA key type as given.
    pub passed: bool,
}

/// The options of a run, as reported.
#[derive(Debug, Serialize)]
pub struct ConfigEcho {
    /// The directory URL.
    pub directory: String,
    /// Client tasks.
    pub clients: usize,
    /// Measured issuances asked for.
    pub requests: u64,
    /// Warmup issuances.
    pub warmup: u64,
    /// Certificate key type.
    pub key_type: String,
    /// CA key type as given.
    pub ca_key_type: String,
    /// Challenge type.
    pub challenge: &'static str,
    /// Identifier type.
    pub identifier: &'static str,
    /// Poll interval (ms).
    pub poll_ms: u64,
    /// Whether chains were verified.
    pub verify_cert: bool,
    /// Runtime worker threads.
    pub threads: usize,
}

/// The issuances of the warmup.
#[derive(Debug, Default, Serialize)]
pub struct Stage {
    /// Successful.
    pub issuances: u64,
    /// Failed.
    pub failed: u64,
    /// Failures by category.
    pub errors: BTreeMap<String, ErrorCount>,
}

/// Client-side counters.
#[derive(Debug, Default, Serialize)]
pub struct ClientStats {
    /// Connections opened to the server, over the whole run.
    pub connections_opened: u64,
    /// Requests retried after a badNonce refusal, over the whole run.
    pub bad_nonce_retries: u64,
    /// This process's CPU time over the window, in percent of one core
    /// (none for a window under 200 ms: /proc counts in 10 ms ticks).
    pub cpu_percent: Option<f64>,
}

/// The CA key type given with `--ca-key-type` against the issuer of the
/// first certificate issued.
#[derive(Debug, Serialize)]
pub struct CaCheck {
    /// As given.
    pub expected: String,
    /// As seen in the issued certificate (none if nothing was issued or the
    /// algorithm is not one of ours).
    pub observed: Option<String>,
    /// Whether they agree (none if nothing was observed).
    pub matches: Option<bool>,
}

impl Report {
    /// The report as lines for people.
    pub fn text(&self) -> String {
        let c = &self.config;
        let mut out = String::new();
        let observed = match &self.ca.observed {
            Some(o) => format!(" (certificates show {o})"),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "acme-bench{}: {}\n            {} clients, {} issuances after {} warmup; {} keys, CA {}{}; {}, {} identifiers; {} thread(s)",
            self.label.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default(),
            c.directory,
            c.clients,
            c.requests,
            c.warmup,
            c.key_type,
            c.ca_key_type,
            observed,
            c.challenge,
            c.identifier,
            c.threads,
        );
        out.push_str(&stats::summary_text(&self.summary, Some(&self.memory)));
        out.push_str(&stats::errors_text("errors", &self.errors));
        if self.warmup.failed > 0 {
            out.push_str(&stats::errors_text("warmup", &self.warmup.errors));
        }
        if !self.setup_errors.is_empty() {
            out.push_str(&stats::errors_text("setup", &self.setup_errors));
        }
        let _ = writeln!(
            out,
            "client      {} connections opened, {} badNonce retries, {} of a core over the window",
            self.client.connections_opened,
            self.client.bad_nonce_retries,
            self.client.cpu_percent.map_or_else(|| "n/a".to_owned(), |p| format!("{p:.1}%"))
        );
        if self.ca.matches == Some(false) {
            let _ = writeln!(
                out,
                "WARNING     --ca-key-type {} but the CA signs with {}",
                self.ca.expected,
                self.ca.observed.as_deref().unwrap_or("?")
            );
        }
        out
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        // Every field is a plain number, string, bool or map with string keys.
        serde_json::to_value(self).unwrap_or_default()
    }
}
