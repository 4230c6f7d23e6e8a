//! Cap'n Proto schemas, typed conversions and the Unix-socket transport.
//!
//! This is the only crate that knows capnp types. Daemons see [`types`] (plain
//! Rust values and the typed [`IpcError`]), implement the [`server`] traits, and
//! call signd, ocspd, acmed, tokend and ctlogd through the [`client`]. The schemas are in
//! `schema/`; their evolution rules are in `schema/signd.capnp`.
#![forbid(unsafe_code)]

#[allow(dead_code, missing_docs, unused_qualifications, clippy::all, clippy::unwrap_used, clippy::expect_used)]
mod signd_capnp {
    capnp::generated_code!(pub mod signd_capnp);
    pub use signd_capnp::*;
}

#[allow(dead_code, missing_docs, unused_qualifications, clippy::all, clippy::unwrap_used, clippy::expect_used)]
mod ocspd_capnp {
    capnp::generated_code!(pub mod ocspd_capnp);
    pub use ocspd_capnp::*;
}

#[allow(dead_code, missing_docs, unused_qualifications, clippy::all, clippy::unwrap_used, clippy::expect_used)]
mod acmed_capnp {
    capnp::generated_code!(pub mod acmed_capnp);
    pub use acmed_capnp::*;
}

#[allow(dead_code, missing_docs, unused_qualifications, clippy::all, clippy::unwrap_used, clippy::expect_used)]
mod tokend_capnp {
    capnp::generated_code!(pub mod tokend_capnp);
    pub use tokend_capnp::*;
}

#[allow(dead_code, missing_docs, unused_qualifications, clippy::all, clippy::unwrap_used, clippy::expect_used)]
mod ctlogd_capnp {
    capnp::generated_code!(pub mod ctlogd_capnp);
    pub use ctlogd_capnp::*;
}

pub mod client;
mod convert;
#[doc(hidden)]
pub mod fuzz;
pub mod server;
pub mod types;

pub use client::{
    block_on, AcmedClient, CtlogdClient, OcspdClient, SigndClient, TokendClient, DEFAULT_ACMED_SOCKET,
    DEFAULT_CTLOGD_SOCKET, DEFAULT_OCSPD_SOCKET, DEFAULT_SOCKET, DEFAULT_TOKEND_SOCKET,
};
pub use types::*;
