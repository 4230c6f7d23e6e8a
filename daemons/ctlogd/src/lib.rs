//! ctlogd: a Certificate Transparency log serving RFC 6962 and the Static CT
//! API (c2sp.org/static-ct-api) from one tree, its key in signd, its tiles on
//! a local disk or in an S3-compatible object store.
//!
//! The pure CT logic (Merkle math, tiles, proofs, RFC 6962 and static-ct-api
//! structures, verification) is in `signet-ct`; this crate is the I/O around it:
//!
//! - [`storage`]: tiles, data tiles, issuers and the checkpoint behind one
//!   async trait; a local directory (atomic, fsynced writes) or any
//!   S3-compatible store (`object_store`).
//! - [`db`]: the LMDB tables: sequencing state with the latest signed tree
//!   head, dedup records (identity hash → index, timestamp, SCT), leaf hash →
//!   index.
//! - [`signer`]: [`signer::LogSigner`], the log key as the sequencer sees it
//!   (signd implements it; an in-process key for tests).
//! - [`sequencer`]: batches of submissions, sequenced, made durable and
//!   answered with SCTs; bounded backlog with pushback; crash repair at start.
//! - [`chain`]: submission checks: chain verification to reloadable roots,
//!   precertificates, validity and the temporal window.
//! - [`log`]: one log: submissions and every read of both APIs, from the tiles.
//! - [`http`]: the HTTP handler for signet-runtime's scaffold.
//! - [`shards`]: the set of logs served, which grows while ctlogd serves (a
//!   temporal shard added), and the `ct_shards` table that keeps the added ones.
//! - [`admin`]: the admin interface (`ctlogd.capnp`) on its Unix socket.
//! - [`config`], [`daemon`], [`metrics`]: the daemon around them: its TOML,
//!   start-up (keys from signd, storage, crash repair), SIGHUP, stop, `/metrics`.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admin;
pub mod chain;
pub mod config;
pub mod daemon;
pub mod db;
pub mod http;
pub mod log;
pub mod metrics;
pub mod sequencer;
pub mod shards;
pub mod signer;
pub mod storage;

pub use daemon::{run, CtlogdError};
