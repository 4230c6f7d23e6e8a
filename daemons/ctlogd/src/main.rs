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
    // ctlogd allocates and frees tile-sized buffers (up to hundreds of KB: data
    // tiles read, written and decoded) all the time. With transparent huge pages,
    // mimalloc's arena is backed by 2 MiB pages that stay resident, whole, after
    // the allocator gives back their freed parts, and RSS climbed to hundreds of MB
    // while the live heap stayed small (docs/performance.md, "ctlogd's memory").
    // The flag holds for the whole process, and is set before the arena grows.
    let thp = nix::sys::prctl::set_thp_disable(true);
    let args = Args::parse();
    if let Err(e) = thp {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "ctlogd: cannot turn transparent huge pages off: {e}");
    }
    signet_runtime::config::daemon_main("ctlogd", Path::new("/etc/signet/ctlogd.toml"), &args.daemon, ctlogd::run)
}
