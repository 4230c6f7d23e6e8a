//! probed's entry point: parse arguments, load config, run.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::DaemonArgs;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// probed: the Signet prober (HTTP, TCP, TLS, DNS, OCSP, CRL and CT checks).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::config::daemon_main("probed", Path::new("/etc/signet/probed.toml"), &args.daemon, probed::run)
}
