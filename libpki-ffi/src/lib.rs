//! libpki: the C ABI of Signet.
//!
//! Signing goes to signd over its Unix socket (through [`signet_ipc::SigndClient`]);
//! signature, certificate and JWT verification (signet-jose) run locally with
//! the statically linked OpenSSL 3.5. The header `include/libpki.h` is
//! generated from this crate by cbindgen; `docs/libpki.md` is the guide.
//!
//! Conventions (those of rustls-ffi): opaque handles are created and freed only
//! by the library; outputs come last and are written only on success; every
//! pointer is NULL-checked; every fallible function returns a [`pki_result`];
//! no panic crosses the boundary.
// This crate is the FFI boundary: unsafe is allowed here, and every unsafe
// block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]
// C names (`pki_client`, `pki_result`) are the API; Rust naming rules do not apply.
#![allow(non_camel_case_types)]
// Exports are safe `extern "C" fn`s that take raw pointers from C, as in
// rustls-ffi: C has no `unsafe`, and each export checks its pointers and
// documents what it requires of them.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod boundary;
mod buffer;
mod client;
mod jwt;
mod result;
mod scheme;
mod verify;

pub use buffer::*;
pub use client::*;
pub use jwt::*;
pub use result::*;
pub use scheme::*;
pub use verify::*;

use std::ffi::c_char;

/// The library's version, e.g. `"0.1.0"`, as a static NUL-terminated string.
///
/// Never NULL; the string must not be freed.
#[no_mangle]
pub extern "C" fn pki_version() -> *const c_char {
    static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}
