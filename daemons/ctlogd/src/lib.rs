//! ctlogd
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod chain;
pub mod db;
pub mod sequencer;
pub mod signer;
pub mod storage;
