//! tokend's entry point: parse arguments, load config, run.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::DaemonArgs;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// tokend: the Signet OAuth 2.0 authorization server.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::config::daemon_main("tokend", Path::new("/etc/signet/tokend.toml"), &args.daemon, tokend::run)
}
