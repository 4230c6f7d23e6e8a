//! acmed's entry point: parse arguments, load config, run.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::DaemonArgs;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// acmed: the Signet ACME CA (RFC 8555).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::config::daemon_main("acmed", Path::new("/etc/signet/acmed.toml"), &args.daemon, acmed::run)
}
