//! Link arguments for libpki.so: a soname carrying the ABI major version, and a
//! version script so that the shared library exports only `pki_*` symbols (the
//! statically linked OpenSSL stays private, so a program may also link the
//! system's libssl/libcrypto). tests/c/run.sh checks the exports with `nm -D`.
//!
//! rustc already passes the linker a version script listing the crate's
//! exports; ours is merged with it. rust-lld (rustc's default linker on
//! x86_64 Linux since 1.90) accepts two version scripts; GNU ld refuses a
//! second one, so set `LIBPKI_NO_VERSION_SCRIPT=1` when linking with it.

use std::path::PathBuf;

/// The ABI major version: bump it on any incompatible change to include/libpki.h.
const ABI_MAJOR: u32 = 0;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let script = dir.join("libpki.map");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBPKI_NO_VERSION_SCRIPT");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpki.so.{ABI_MAJOR}");
    if std::env::var_os("LIBPKI_NO_VERSION_SCRIPT").is_none_or(|v| v.is_empty() || v == "0") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", script.display());
    }
}
