//! ocspd's entry point: parse arguments, load config, run.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::{startup, DaemonArgs, Startup};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ocspd: the Signet OCSP responder and CRL publisher.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::logging::init("ocspd", "info");
    let default = Path::new("/etc/signet/ocspd.toml");
    let config = match startup::<ocspd::config::Config>(&args.daemon, default) {
        Startup::Run(c) => c,
        Startup::Exit(code) => return ExitCode::from(code),
    };
    match ocspd::run(args.daemon.config_path(default), config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("ocspd: {e}");
            ExitCode::FAILURE
        }
    }
}
