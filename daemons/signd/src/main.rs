//! signd's entry point: parse arguments, load config, run.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use signet_runtime::config::{startup, DaemonArgs, Startup};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// signd: the Signet key daemon.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    signet_runtime::logging::init("signd", "info");
    let default = Path::new("/etc/signet/signd.toml");
    let config = match startup::<signd::config::Config>(&args.daemon, default) {
        Startup::Run(c) => c,
        Startup::Exit(code) => return ExitCode::from(code),
    };
    match signd::run(args.daemon.config_path(default), config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("signd: {e}");
            ExitCode::FAILURE
        }
    }
}
