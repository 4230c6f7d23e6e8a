//! probe-load: runs probed's HTTP check (`probed::checks::Probe::run`, the call its
//! scheduler makes) back to back from `--concurrency` tasks for a bounded time and reports
//! checks/s, latency percentiles, failures, and the CPU time spent per check by this process
//! and by any `--server-pid`.
//!
//! Two uses (bench/scripts/probe-compare.sh runs both, same run, same nginx):
//! - probed itself: `--url http://127.0.0.1:8080/` with `--fresh` (a new connection per
//!   check, as blackbox_exporter does) or not (connections kept and reused);
//! - the baseline: `--url 'http://127.0.0.1:9115/probe?module=http_2xx&target=...'
//!   --expect-body 'probe_success 1' --server-pid blackbox=PID`: the same check asks
//!   blackbox_exporter to probe the target; its CPU per probe is the figure compared.
//!
//! Checks run on one current-thread runtime (one core) unless `--threads` says more.
//! The report is a human line block and one JSON line (`{"probe_load": ...}`). Exits
//! non-zero if more than 0.1% of checks failed or none passed.

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use probed::checks::Probe;
use signet_bench::cpu::{cpu_snapshot, parse_servers, round, CpuUse};
use signet_bench::load::{Clock, Stats};
use signet_bench::percentile;
use tokio::time::Instant;

/// probed's own allocator, so the checks allocate as they do in the daemon.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Load generator running probed's HTTP check.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// What each check GETs (http or https).
    #[arg(long)]
    url: url::Url,
    /// A substring the body must contain for the check to pass.
    #[arg(long)]
    expect_body: Option<String>,
    /// The HTTP version the check speaks.
    #[arg(long, value_enum, default_value_t = Version::Http1)]
    http_version: Version,
    /// A new connection for every check (probed's `reuse_connections = false`).
    #[arg(long)]
    fresh: bool,
    /// Checks in flight at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    concurrency: u32,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Seconds run before measuring; nothing in them counts.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    warmup: u64,
    /// Runtime worker threads; 1 is a current-thread runtime (one core).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    threads: u32,
    /// A process whose CPU time is reported (`NAME=PID` or `PID`), repeatable.
    #[arg(long = "server-pid")]
    server_pids: Vec<String>,
    /// Human text or one JSON line.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Version {
    #[value(name = "1.1")]
    Http1,
    #[value(name = "2")]
    Http2,
    Auto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// The check as a `[checks.load]` table of probed.toml.
fn probe(args: &Args) -> anyhow::Result<Probe> {
    let toml_str = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let version = match args.http_version {
        Version::Http1 => "1.1",
        Version::Http2 => "2",
        Version::Auto => "auto",
    };
    let mut text = format!(
        "state_dir = \"/nonexistent\"\nlisten = \"127.0.0.1:1\"\n[checks.load]\nkind = \"http\"\nurl = {}\n\
         http_version = \"{version}\"\nreuse_connections = {}\n",
        toml_str(args.url.as_str()),
        !args.fresh
    );
    if let Some(body) = &args.expect_body {
        text.push_str(&format!("expect_body = {}\n", toml_str(body)));
    }
    let config: probed::config::Config =
        signet_runtime::config::parse(&text, Path::new("probe-load.toml")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let check = config.checks.get("load").context("the check")?;
    Probe::new(check).map_err(|e| anyhow::anyhow!("the check: {e}"))
}

async fn worker(probe: Arc<Probe>, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    loop {
        let start = Instant::now();
        if start >= clock.end {
            return stats;
        }
        let outcome = probe.run(Duration::from_secs(10), 0).await;
        let done = Instant::now();
        if !clock.counts(done) {
            continue;
        }
        if outcome.ok {
            stats.responses += 1;
            stats.latencies.push(done - start);
        } else {
            // The message names the cause; its first words are enough to group by.
            let kind: String = outcome.message.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
            stats.error(kind);
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("probe-load: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<bool> {
    let args = Args::parse();
    let servers = parse_servers(&args.server_pids)?;
    let rt = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()?
    };
    let probe = Arc::new(rt.block_on(async { probe(&args) })?);
    let (stats, cpu, window) = rt.block_on(async {
        let now = Instant::now();
        let window_start = now + Duration::from_secs(args.warmup);
        let clock = Clock { window_start, end: window_start + Duration::from_secs(args.duration) };
        let tasks: Vec<_> = (0..args.concurrency).map(|_| tokio::spawn(worker(probe.clone(), clock))).collect();
        tokio::time::sleep_until(window_start).await;
        let before = cpu_snapshot(&servers);
        tokio::time::sleep_until(clock.end).await;
        let after = cpu_snapshot(&servers);
        let mut stats = Stats::default();
        for t in tasks {
            if let Ok(s) = t.await {
                stats.merge(s);
            }
        }
        (stats, CpuUse::between(&servers, &before, &after), clock.end - clock.window_start)
    });
    let passed = stats.passed();
    let rate = stats.responses as f64 / window.as_secs_f64();
    let mut lat = stats.latencies.clone();
    let (p50, p99) = (percentile(&mut lat, 50.0), percentile(&mut lat, 99.0));
    let own_us = if stats.responses > 0 { cpu.own.as_secs_f64() * 1e6 / stats.responses as f64 } else { 0.0 };
    match args.output {
        Output::Text => {
            println!(
                "probe-load: {} ({}, {}), {} in flight, {}s: {:.0} checks/s, p50 {:.3} ms, p99 {:.3} ms, {} failed",
                args.url,
                if args.fresh { "fresh connections" } else { "connections reused" },
                match args.http_version {
                    Version::Http1 => "HTTP/1.1",
                    Version::Http2 => "HTTP/2",
                    Version::Auto => "auto",
                },
                args.concurrency,
                window.as_secs(),
                rate,
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3,
                stats.error_count()
            );
            for (kind, n) in &stats.errors {
                println!("  failed {n}: {kind}");
            }
            println!("  probe-load itself: {own_us:.1} µs CPU per check");
            print!("{}", cpu.text(window, stats.responses, "check"));
        }
        Output::Json => {
            let report = serde_json::json!({ "probe_load": {
                "url": args.url.as_str(),
                "fresh": args.fresh,
                "concurrency": args.concurrency,
                "threads": args.threads,
                "seconds": window.as_secs_f64(),
                "checks": stats.responses,
                "failed": stats.error_count(),
                "errors": stats.errors,
                "checks_per_second": round(rate, 1),
                "p50_ms": round(p50.as_secs_f64() * 1e3, 3),
                "p99_ms": round(p99.as_secs_f64() * 1e3, 3),
                "own_cpu_us_per_check": round(own_us, 2),
                "cpu": cpu.json(window, stats.responses),
            }});
            println!("{report}");
        }
    }
    Ok(passed)
}
