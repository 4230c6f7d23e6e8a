//! ct-load's read mode: full tiles fetched at random.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use signet_bench::cpu::{cpu_snapshot, parse_servers, round, CpuUse};
use signet_bench::ct;
use signet_bench::ct::client::{fetch, Conn, Endpoint};
use tokio::time::{sleep_until, Instant};

use crate::{ms, options_json, quantiles, runtime, us, Args, Clock, TileKind};

#[derive(Default)]
struct ReadStats {
    reads: u64,
    latencies: Vec<Duration>,
    bytes: u64,
    errors: BTreeMap<String, u64>,
    connections: u64,
}

impl ReadStats {
    fn merge(&mut self, o: ReadStats) {
        self.reads += o.reads;
        self.latencies.extend(o.latencies);
        self.bytes += o.bytes;
        for (k, n) in o.errors {
            *self.errors.entry(k).or_default() += n;
        }
        self.connections += o.connections;
    }
}

/// What the readers counted.
pub(crate) struct ReadReport {
    stats: ReadStats,
    window: Duration,
    cpu: CpuUse,
    tree_size: u64,
}

/// xorshift64*: cheap per-task randomness for picking tiles.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

async fn reader(
    id: u32,
    ep: Arc<Endpoint>,
    full_tiles: u64,
    kind: TileKind,
    clock: Clock,
    timeout: Duration,
) -> ReadStats {
    let mut stats = ReadStats::default();
    let mut conn = Conn::new(ep.clone());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (u64::from(id) + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    while Instant::now() < clock.end {
        let r = rng.next();
        let index = r % full_tiles;
        let hash = match kind {
            TileKind::Hash => true,
            TileKind::Data => false,
            TileKind::Both => r >> 63 == 1,
        };
        let path = ep.path(&if hash { ct::hash_tile_path(0, index) } else { ct::data_tile_path(index) });
        let sent = Instant::now();
        let outcome = conn.send(Method::GET, &path, Bytes::new(), (sent + timeout).min(clock.end)).await;
        let done = Instant::now();
        if !clock.counts(done) {
            continue;
        }
        let error = match outcome {
            Err(kind) => Some(kind),
            Ok(a) if a.status != StatusCode::OK => Some(format!("http {}", a.status.as_u16())),
            Ok(a) if hash && a.body.len() != ct::HASH_TILE_BYTES => Some("hash tile is not 8192 bytes".into()),
            Ok(a) if a.body.is_empty() => Some("empty data tile".into()),
            Ok(a) => {
                stats.reads += 1;
                stats.bytes += a.body.len() as u64;
                stats.latencies.push(done - sent);
                None
            }
        };
        if let Some(e) = error {
            *stats.errors.entry(e).or_default() += 1;
        }
    }
    stats.connections = conn.opened;
    stats
}

/// Reads full tiles at random for the run's duration.
pub(crate) fn run_read(args: &Args) -> anyhow::Result<ReadReport> {
    let servers = parse_servers(&args.server_pids)?;
    let mon = Arc::new(Endpoint::new(args.monitoring_url.as_ref().or(args.url.as_ref()).context("--url")?)?);
    let rt = runtime(args.threads)?;
    rt.block_on(async {
        let checkpoint = fetch(&mon, "checkpoint").await?;
        let tree_size = ct::checkpoint_size(&checkpoint)?;
        let full_tiles = tree_size / ct::TILE_WIDTH;
        if full_tiles == 0 {
            bail!("the tree has {tree_size} entries: no full tile to read");
        }
        let clock = Clock::new(args);
        let timeout = Duration::from_secs(args.timeout);
        let cpu = {
            let servers = servers.clone();
            tokio::spawn(async move {
                sleep_until(clock.window_start).await;
                let a = cpu_snapshot(&servers);
                sleep_until(clock.end).await;
                (a, cpu_snapshot(&servers))
            })
        };
        let tasks: Vec<_> = (0..args.writers)
            .map(|id| tokio::spawn(reader(id, mon.clone(), full_tiles, args.tiles, clock, timeout)))
            .collect();
        let mut stats = ReadStats::default();
        for t in tasks {
            stats.merge(t.await.context("a reader panicked")?);
        }
        let (a, b) = cpu.await?;
        Ok(ReadReport { stats, window: clock.window(), cpu: CpuUse::between(&servers, &a, &b), tree_size })
    })
}

impl ReadReport {
    fn rate(&self) -> f64 {
        self.stats.reads as f64 / self.window.as_secs_f64()
    }

    fn error_count(&self) -> u64 {
        self.stats.errors.values().sum()
    }

    pub(crate) fn passed(&self) -> bool {
        let e = self.error_count();
        self.stats.reads > 0 && e * 1000 <= self.stats.reads + e
    }

    pub(crate) fn text(&self, args: &Args) -> String {
        let s = &self.stats;
        let mut l = s.latencies.clone();
        let [p50, p90, p99, max] = quantiles(&mut l);
        let url = args.monitoring_url.as_ref().or(args.url.as_ref()).map(ToString::to_string).unwrap_or_default();
        let mut out = format!(
            "ct-load: GET full {:?} tiles at random under {url} (tree size {}), {} readers, {} thread(s), {} s after \
             {} s warmup\n\
             reads         {} ({:.1}/s, {:.1} MB/s)\n\
             latency       p50 {}, p90 {}, p99 {}, max {}\n\
             errors        {}\n",
            args.tiles,
            self.tree_size,
            args.writers,
            args.threads,
            args.duration,
            args.warmup,
            s.reads,
            self.rate(),
            s.bytes as f64 / self.window.as_secs_f64() / 1e6,
            ms(p50),
            ms(p90),
            ms(p99),
            ms(max),
            self.error_count()
        );
        for (kind, n) in &s.errors {
            out.push_str(&format!("  {n:>9}  {kind}\n"));
        }
        out.push_str("cpu over the window:\n");
        out.push_str(&self.cpu.text(self.window, s.reads, "read"));
        out.push_str(&format!("connections   {} opened\n", s.connections));
        out
    }

    pub(crate) fn json(&self, args: &Args) -> serde_json::Value {
        let s = &self.stats;
        let mut l = s.latencies.clone();
        let [p50, p90, p99, max] = quantiles(&mut l);
        serde_json::json!({
            "mode": "read",
            "reads": s.reads,
            "reads_per_sec": round(self.rate(), 1),
            "bytes": s.bytes,
            "p50_us": us(p50), "p90_us": us(p90), "p99_us": us(p99), "max_us": us(max),
            "errors": self.error_count(),
            "errors_by_kind": s.errors,
            "tree_size": self.tree_size,
            "cpu": self.cpu.json(self.window, s.reads),
            "connections_opened": s.connections,
            "seconds": self.window.as_secs_f64(),
            "passed": self.passed(),
            "options": options_json(args),
        })
    }
}
