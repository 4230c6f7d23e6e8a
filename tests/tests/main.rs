//! The integration tests: real daemon processes on temporary directories, over their real
//! sockets. Each file beside this one is a module of this one test binary rather than a
//! binary of its own: every binary links the whole appliance, and one link instead of one
//! per file is minutes less of a clean build. `cargo test --release -p signet-tests --test
//! integration probed::` runs one file's tests.
#![forbid(unsafe_code)]

mod acmed;
mod acmed_ct;
mod acmed_full_disk;
mod backup;
mod check_config;
mod ctlogd;
mod faults;
mod http_limits;
mod issuer;
mod log_signer;
mod ocspd;
mod ocspd_robustness;
mod probed;
mod rotation;
mod signd;
mod signd_full_disk;
mod signd_nss;
mod signetctl;
mod testdns;
mod tokend;
mod tokend_ldap;
mod tokend_ocsp;
