//! Links the system NSS and NSPR (Debian: libnss3-dev) for the NSS backend.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // nss.pc names libnss3, libnssutil3, libsmime3, libssl3 and NSPR; the
    // backend needs libnss3, libnssutil3 and libnspr4 (pulled in by `nss`).
    if let Err(e) = pkg_config::Config::new().atleast_version("3.52").probe("nss") {
        panic!("signd needs NSS >= 3.52 through pkg-config (Debian: apt-get install libnss3-dev): {e}");
    }
}
