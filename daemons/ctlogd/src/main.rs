//! ctlogd's entry point: parse arguments, load config, run.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::DaemonArgs;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ctlogd: the Signet Certificate Transparency log (RFC 6962 and the Static CT API).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::config::daemon_main("ctlogd", Path::new("/etc/signet/ctlogd.toml"), &args.daemon, ctlogd::run)
}
