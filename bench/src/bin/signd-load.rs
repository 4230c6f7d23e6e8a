//! signd-load: drives a running signd with one client and N calls in flight
//! for a bounded time, then prints one JSON object:
//! `{"signs_per_sec", "p50_us", "p99_us", "errors", ...}`.
//!
//! Latencies are per call (a batch call counts once; `signs_per_sec` counts
//! every message signed).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::stream::{FuturesUnordered, StreamExt};
use signet_bench::percentile;
use signet_ipc::{block_on, SignatureScheme, SigndClient, DEFAULT_SOCKET};

/// Load generator for signd.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// signd's socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The key to sign with.
    #[arg(long)]
    key: String,
    /// The role to act in (empty: the caller's first role).
    #[arg(long, default_value = "")]
    role: String,
    /// Signature scheme ("default": the key's own).
    #[arg(long, default_value = "default")]
    scheme: SignatureScheme,
    /// Calls kept in flight.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// How long to run, in seconds (1..=60).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    seconds: u64,
    /// Messages per call: 1 uses `sign`, more uses `sign_batch`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch: u32,
    /// Size of each message in bytes.
    #[arg(long, default_value_t = 256)]
    message_bytes: usize,
    /// Call `health` instead of signing: the transport's own round trip.
    #[arg(long)]
    health: bool,
    /// Run each call on this thread over its own connection
    /// (`SigndClient::per_thread`, as C callers do); needs --concurrency 1.
    #[arg(long)]
    per_thread: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.per_thread && args.concurrency != 1 {
        eprintln!("signd-load: --per-thread runs one call at a time: use --concurrency 1");
        return ExitCode::from(2);
    }
    let client = match SigndClient::new(&args.socket) {
        Ok(c) if args.per_thread => c.per_thread(),
        Ok(c) => c,
        Err(e) => {
            eprintln!("signd-load: {e}");
            return ExitCode::FAILURE;
        }
    };
    let msg: Vec<u8> = (0..args.message_bytes).map(|i| (i * 7 + 3) as u8).collect();
    let batch = args.batch as usize;
    let health = args.health;
    let call = || {
        let client = client.clone();
        let (role, key, scheme) = (args.role.clone(), args.key.clone(), args.scheme);
        let msg = msg.clone();
        async move {
            let t = Instant::now();
            let ok = if health {
                client.health().await.map(|h| h.ok)
            } else if batch > 1 {
                client.sign_batch(&role, &key, scheme, vec![msg; batch]).await.map(|s| s.len() == batch)
            } else {
                client.sign(&role, &key, scheme, msg).await.map(|_| true)
            };
            (t.elapsed(), ok)
        }
    };

    let mut latencies: Vec<Duration> = Vec::new();
    let mut errors = 0u64;
    let mut first_error: Option<String> = None;
    let mut ok_calls = 0u64;
    let duration = Duration::from_secs(args.seconds);
    let start = Instant::now();
    block_on(async {
        let mut pending = FuturesUnordered::new();
        for _ in 0..args.concurrency {
            pending.push(call());
        }
        while let Some((lat, result)) = pending.next().await {
            match result {
                Ok(true) => {
                    ok_calls += 1;
                    latencies.push(lat);
                }
                Ok(false) => errors += 1,
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            if start.elapsed() < duration {
                pending.push(call());
            }
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let signs = ok_calls * batch as u64;
    let out = serde_json::json!({
        "signs_per_sec": (signs as f64 / elapsed).round(),
        "p50_us": (percentile(&mut latencies, 50.0).as_secs_f64() * 1e7).round() / 10.0,
        "p99_us": (percentile(&mut latencies, 99.0).as_secs_f64() * 1e7).round() / 10.0,
        "errors": errors,
        "signs": signs,
        "calls": ok_calls,
        "seconds": (elapsed * 1000.0).round() / 1000.0,
        "concurrency": args.concurrency,
        "batch": batch,
        "key": args.key,
        "first_error": first_error,
    });
    println!("{out}");
    if errors > 0 && ok_calls == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
