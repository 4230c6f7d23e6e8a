//! probed: a prober that knows PKI. It checks HTTP(S), TCP, TLS and DNS like blackbox_exporter
//! and Gatus do, and the PKI's own services too: a certificate's OCSP status, a CRL's
//! freshness, a CT log's checkpoint. Results go to LMDB (history, uptime), Prometheus
//! `/metrics`, a status page, a JSON API and webhooks.
//!
//! - [`config`]: the TOML, strict, with `--check-config`.
//! - [`checks`]: the check kinds, each an async run giving an [`checks::Outcome`].
//! - [`scheduler`]: one task per check: interval, jitter, timeout, retries, flap suppression.
//! - [`history`]: LMDB: raw results, per-minute and per-hour aggregates, states, retention.
//! - [`alerts`]: webhooks on state changes, reminders while down.
//! - [`metrics`], [`web`]: `/metrics`, the status page and the JSON API.
//! - [`daemon`]: start, SIGHUP (checks reloaded, history kept), stop.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod alerts;
pub mod checks;
pub mod config;
pub mod daemon;
pub mod history;
pub mod metrics;
pub mod scheduler;
pub mod web;

pub use daemon::{run, ProbedError};
