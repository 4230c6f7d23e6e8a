//! ct-load: a Certificate Transparency load generator in the manner of CT's
//! hammer. It submits distinct synthetic chains to a log's RFC 6962
//! `add-chain` (or, with `--entries precert|mixed`, precertificates with the
//! poison extension to `add-pre-chain`; `--via-psc` has a Precertificate
//! Signing Certificate sign them, RFC 6962 §3.1) for a bounded time and
//! reports SCTs/s, time-to-SCT,
//! time-to-integrate, errors (429 pushbacks apart) and, given the server's
//! pids, the server's CPU time per entry. With `--read-tiles` it reads full
//! tiles at random instead and reports reads/s.
//!
//! Chains: a test root and intermediate (ECDSA P-256) are loaded from
//! `--pki-dir` or created there (`root.pem` is what the log must accept;
//! `--init-pki` only does that). Leaves are made ahead of use on
//! `--gen-threads` background threads (see `signet_bench::ct::pki`): before
//! the clock starts, the pool fills with `--prefill` leaves (by default
//! enough for the whole run at 12,000/s, or at `--rate`), and rests until it
//! falls below a quarter of that; the report says how many leaves were made
//! during the measured window and how often a writer found none ready.
//!
//! Writers: `--writers` tasks, each with one keep-alive HTTP/1.1 connection
//! and one submission in flight (closed loop), or, with `--rate`, taking
//! submission slots of an open-loop schedule (time-to-SCT is then measured
//! from the slot, so a server that falls behind shows it). A 429 is counted
//! as a pushback and the same chain is sent again after
//! `--pushback-wait-ms` (closed loop) or at the writer's next slot.
//!
//! An entry is integrated when a tree head (the checkpoint at
//! `--monitoring-url`, or `get-sth` with `--poll sth`, polled every
//! `--poll-ms`) has a tree size greater than the `leaf_index` of its SCT's
//! static-ct-api extension; time-to-integrate runs from sending the chain to
//! the poll that saw it, so it includes up to one poll interval.
//!
//! Every `--verify-every`th SCT's signature is verified against the log's
//! key (`--log-key`, or the `key` of `<monitoring-url>log.v3.json`): for a
//! precertificate, over the entry of its final certificate (the intermediate's
//! key hash and the TBS without the poison, made from the certificate
//! template, not from the precertificate).
//!
//! Only what completes after `--warmup` and before its end counts. Exits
//! non-zero if more than 0.1% of outcomes (pushbacks aside) are errors, an
//! SCT fails verification, or nothing counted.

#![forbid(unsafe_code)]

#[path = "ct-load/read.rs"]
mod read;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use hyper::{Method, StatusCode, Uri};
use signet_bench::cpu::{cpu_snapshot, parse_servers, round, CpuUse};
use signet_bench::ct::client::{fetch, Conn, Endpoint};
use signet_bench::ct::pki::{Entries, Leaf, LeafFactory, LeafKind, LeafPool, PoolStats, TestPki};
use signet_bench::ct::{self, LogKey, Sct};
use signet_bench::percentile;
use tokio::time::{sleep, sleep_until, Instant};

/// Load generator for Certificate Transparency logs (RFC 6962 add-chain, static-ct-api reads).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The log's submission prefix (http only), e.g. http://127.0.0.1:8190/demo/;
    /// chains go to <url>ct/v1/add-chain.
    #[arg(long, required_unless_present = "init_pki")]
    url: Option<Uri>,
    /// The log's monitoring prefix: checkpoint, tiles and log.v3.json (default: --url).
    #[arg(long)]
    monitoring_url: Option<Uri>,
    /// Where the test root and intermediate are kept (created if empty).
    #[arg(long, default_value = "ct-load-pki")]
    pki_dir: PathBuf,
    /// Only create (or load) the test CA in --pki-dir, print root.pem's path, and exit.
    #[arg(long)]
    init_pki: bool,
    /// Writers (or, with --read-tiles, readers), each on one keep-alive connection.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    writers: u32,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// Seconds run before measuring; nothing in them counts.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=3600))]
    warmup: u64,
    /// Open loop: submissions started per second in all (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Tokio worker threads for the HTTP clients (1 leaves the other cores to the server).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Threads making leaf certificates in the background.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    gen_threads: u32,
    /// Leaves made before the clock starts (default: enough for the run at 12,000/s, or at --rate).
    #[arg(long)]
    prefill: Option<usize>,
    /// Verify every Nth SCT's signature (0: none).
    #[arg(long, default_value_t = 100)]
    verify_every: u64,
    /// The log's public key, base64 DER SubjectPublicKeyInfo (default: from <monitoring-url>log.v3.json).
    #[arg(long)]
    log_key: Option<String>,
    /// A server process to account CPU to: NAME=PID or PID (repeatable, or comma-separated).
    #[arg(long = "server-pid", value_delimiter = ',')]
    server_pids: Vec<String>,
    /// The tree head polled for integration.
    #[arg(long, value_enum, default_value_t = Poll::Checkpoint)]
    poll: Poll,
    /// Milliseconds between polls of the tree head.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    poll_ms: u64,
    /// Seconds after the run to wait for the window's entries to be integrated.
    #[arg(long, default_value_t = 30)]
    integrate_timeout: u64,
    /// Seconds a connect or a request may take before it counts as a timeout.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout: u64,
    /// Milliseconds a writer waits after a 429 before sending the chain again (closed loop).
    #[arg(long, default_value_t = 100)]
    pushback_wait_ms: u64,
    /// Read mode: fetch full tiles at random instead of submitting.
    #[arg(long)]
    read_tiles: bool,
    /// What to submit: certificates (add-chain), precertificates
    /// (add-pre-chain), or both in turn.
    #[arg(long, value_enum, default_value_t = EntryMode::Cert)]
    entries: EntryMode,
    /// Precertificates are signed by the test CA's Precertificate Signing
    /// Certificate (sent between the precertificate and the intermediate).
    #[arg(long)]
    via_psc: bool,
    /// Which full tiles --read-tiles fetches.
    #[arg(long, value_enum, default_value_t = TileKind::Both)]
    tiles: TileKind,
    /// Report as text or as one JSON object.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Poll {
    /// <monitoring-url>checkpoint (static-ct-api).
    Checkpoint,
    /// <url>ct/v1/get-sth (RFC 6962).
    Sth,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EntryMode {
    /// Certificates, to add-chain.
    Cert,
    /// Precertificates, to add-pre-chain.
    Precert,
    /// Both, in turn.
    Mixed,
}

impl EntryMode {
    fn entries(self) -> Entries {
        match self {
            EntryMode::Cert => Entries::Certificates,
            EntryMode::Precert => Entries::Precertificates,
            EntryMode::Mixed => Entries::Mixed,
        }
    }

    fn endpoints(self) -> &'static str {
        match self {
            EntryMode::Cert => "ct/v1/add-chain",
            EntryMode::Precert => "ct/v1/add-pre-chain",
            EntryMode::Mixed => "ct/v1/add-chain and add-pre-chain",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TileKind {
    /// Level-0 hash tiles (8,192 bytes each).
    Hash,
    /// Data tiles (the entries).
    Data,
    /// Either, at random.
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// Lines for people.
    Text,
    /// One JSON object.
    Json,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.init_pki {
        return match TestPki::load_or_create(&args.pki_dir) {
            Ok(_) => {
                println!("{}", args.pki_dir.join("root.pem").display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ct-load: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let outcome =
        if args.read_tiles { read::run_read(&args).map(Report::Read) } else { run_write(&args).map(Report::Write) };
    let report = match outcome {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ct-load: {e:#}");
            return ExitCode::from(2);
        }
    };
    let (text, json, passed) = match &report {
        Report::Write(w) => (w.text(&args), w.json(&args), w.passed()),
        Report::Read(r) => (r.text(&args), r.json(&args), r.passed()),
    };
    match args.output {
        Output::Text => print!("{text}"),
        Output::Json => println!("{json}"),
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        eprintln!("ct-load: FAILED (nothing counted, more than 0.1% errors, or an SCT that does not verify)");
        ExitCode::FAILURE
    }
}

enum Report {
    Write(WriteReport),
    Read(read::ReadReport),
}

fn runtime(threads: u32) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads as usize).enable_all().build()?
    })
}

/// The measured window: outcomes count if they complete in `[window_start, end)`.
#[derive(Clone, Copy)]
struct Clock {
    start: Instant,
    window_start: Instant,
    end: Instant,
}

impl Clock {
    fn new(args: &Args) -> Self {
        let start = Instant::now();
        let window_start = start + Duration::from_secs(args.warmup);
        Self { start, window_start, end: window_start + Duration::from_secs(args.duration) }
    }

    fn counts(&self, t: Instant) -> bool {
        t >= self.window_start && t < self.end
    }

    fn window(&self) -> Duration {
        self.end - self.window_start
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> f64 {
    round(d.as_secs_f64() * 1e6, 1)
}

/// p50, p90, p99 and max.
fn quantiles(samples: &mut [Duration]) -> [Duration; 4] {
    [percentile(samples, 50.0), percentile(samples, 90.0), percentile(samples, 99.0), percentile(samples, 100.0)]
}

// ---------------------------------------------------------------------------
// Write mode

/// What every writer shares.
struct Writing {
    ep: Arc<Endpoint>,
    /// `<url>ct/v1/add-chain`.
    submit_path: String,
    /// `<url>ct/v1/add-pre-chain`.
    submit_pre_path: String,
    factory: Arc<LeafFactory>,
    pool: LeafPool,
    clock: Clock,
    key: Option<LogKey>,
    verify_every: u64,
    answered: AtomicU64,
    schedule: Option<Schedule>,
    timeout: Duration,
    pushback_wait: Duration,
}

/// The open-loop schedule: slot `k` starts at `start + k / rate`.
struct Schedule {
    rate: f64,
    next: AtomicU64,
    /// Slots started more than 10 ms late.
    late: AtomicU64,
}

/// One writer's counts from the window.
#[derive(Default)]
struct WriteStats {
    scts: u64,
    sct_latencies: Vec<Duration>,
    /// (when the submission started, its leaf_index), for time-to-integrate.
    entries: Vec<(Instant, u64)>,
    pushbacks: u64,
    errors: BTreeMap<String, u64>,
    verified: u64,
    verify_failed: u64,
    /// Times a writer found no leaf ready.
    waited_for_leaf: u64,
    connections: u64,
}

impl WriteStats {
    fn error(&mut self, kind: String) {
        *self.errors.entry(kind).or_default() += 1;
    }

    fn merge(&mut self, o: WriteStats) {
        self.scts += o.scts;
        self.sct_latencies.extend(o.sct_latencies);
        self.entries.extend(o.entries);
        self.pushbacks += o.pushbacks;
        for (k, n) in o.errors {
            *self.errors.entry(k).or_default() += n;
        }
        self.verified += o.verified;
        self.verify_failed += o.verify_failed;
        self.waited_for_leaf += o.waited_for_leaf;
        self.connections += o.connections;
    }
}

async fn writer(w: Arc<Writing>) -> WriteStats {
    let mut stats = WriteStats::default();
    let mut conn = Conn::new(w.ep.clone());
    let mut retry: Option<Leaf> = None;
    let clock = w.clock;
    'run: loop {
        // The open loop's slot, or now.
        let began = match &w.schedule {
            Some(s) => {
                let k = s.next.fetch_add(1, Ordering::Relaxed);
                let at = clock.start + Duration::from_secs_f64(k as f64 / s.rate);
                if at >= clock.end {
                    break;
                }
                sleep_until(at).await;
                if Instant::now() > at + Duration::from_millis(10) && clock.counts(at) {
                    s.late.fetch_add(1, Ordering::Relaxed);
                }
                at
            }
            None => Instant::now(),
        };
        if Instant::now() >= clock.end {
            break;
        }
        let leaf = match retry.take() {
            Some(l) => l,
            None => loop {
                if let Some(l) = w.pool.try_next() {
                    break l;
                }
                if clock.counts(Instant::now()) {
                    stats.waited_for_leaf += 1;
                }
                sleep(Duration::from_millis(1)).await;
                if Instant::now() >= clock.end {
                    break 'run;
                }
            },
        };
        let body = Bytes::from(w.factory.body(&leaf));
        let deadline = (Instant::now() + w.timeout).min(clock.end);
        let path = match leaf.kind {
            LeafKind::Certificate => &w.submit_path,
            LeafKind::Precertificate => &w.submit_pre_path,
        };
        let outcome = conn.send(Method::POST, path, body, deadline).await;
        let done = Instant::now();
        let counts = clock.counts(done);
        let answer = match outcome {
            Ok(a) => a,
            Err(kind) => {
                if done >= clock.end {
                    break;
                }
                if counts {
                    stats.error(kind);
                }
                continue;
            }
        };
        match answer.status {
            StatusCode::OK => {
                let parsed = Sct::from_json(&answer.body).and_then(|sct| sct.leaf_index().map(|i| (sct, i)));
                let (sct, index) = match parsed {
                    Ok(p) => p,
                    Err(e) => {
                        if counts {
                            stats.error(e.to_string());
                        }
                        continue;
                    }
                };
                let nth = w.answered.fetch_add(1, Ordering::Relaxed);
                let verdict = match &w.key {
                    Some(key) if w.verify_every > 0 && nth % w.verify_every == 0 => Some(match leaf.kind {
                        LeafKind::Certificate => key.verify_sct(&sct, &leaf.der),
                        LeafKind::Precertificate => key.verify_precert_sct(
                            &sct,
                            &w.factory.issuer_key_hash(),
                            &w.factory.precert_entry_tbs(leaf.n),
                        ),
                    }),
                    _ => None,
                };
                if counts {
                    stats.scts += 1;
                    stats.sct_latencies.push(done - began);
                    stats.entries.push((began, index));
                    match verdict {
                        Some(Ok(())) => stats.verified += 1,
                        Some(Err(e)) => {
                            stats.verify_failed += 1;
                            stats.error(e.to_string());
                        }
                        None => {}
                    }
                }
            }
            StatusCode::TOO_MANY_REQUESTS => {
                if counts {
                    stats.pushbacks += 1;
                }
                retry = Some(leaf);
                if w.schedule.is_none() {
                    sleep(w.pushback_wait).await;
                }
            }
            status => {
                if counts {
                    let text = String::from_utf8_lossy(&answer.body);
                    let first: String = text.lines().next().unwrap_or("").chars().take(100).collect();
                    stats.error(format!("http {}: {first}", status.as_u16()));
                }
            }
        }
    }
    stats.connections = conn.opened;
    stats
}

/// Tree sizes seen by the poller: (when first seen, size), sizes increasing.
type Observations = Vec<(Instant, u64)>;

/// When the poller may stop: once the tree has this many entries, or at this instant.
type StopAt = Arc<Mutex<Option<(u64, Instant)>>>;

async fn poll_tree(ep: Arc<Endpoint>, path: String, poll: Poll, every: Duration, stop: StopAt) -> (Observations, u64) {
    let mut conn = Conn::new(ep);
    let mut seen: Observations = Vec::new();
    let mut errors = 0u64;
    loop {
        let deadline = Instant::now() + Duration::from_secs(5);
        let size = match conn.send(Method::GET, &path, Bytes::new(), deadline).await {
            Ok(a) if a.status == StatusCode::OK => match poll {
                Poll::Checkpoint => ct::checkpoint_size(&a.body).ok(),
                Poll::Sth => ct::sth_size(&a.body).ok(),
            },
            _ => None,
        };
        let now = Instant::now();
        match size {
            Some(s) if seen.last().is_none_or(|&(_, last)| s > last) => seen.push((now, s)),
            Some(_) => {}
            None => errors += 1,
        }
        let target = *stop.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((size, at)) = target {
            if now >= at || seen.last().is_some_and(|&(_, s)| s >= size) {
                break;
            }
        }
        sleep(every).await;
    }
    (seen, errors)
}

/// The size the tree had at `t` as far as the poller saw.
fn size_at(seen: &Observations, t: Instant) -> Option<u64> {
    seen.iter().take_while(|(at, _)| *at <= t).last().map(|&(_, s)| s)
}

struct WriteReport {
    stats: WriteStats,
    window: Duration,
    cpu: CpuUse,
    /// Time-to-integrate of each window entry the poller saw integrated.
    integrate: Vec<Duration>,
    not_integrated: u64,
    tree_growth: Option<u64>,
    poll_errors: u64,
    generated_before: PoolStats,
    generated_after: PoolStats,
    prefill: usize,
    late_slots: u64,
}

fn run_write(args: &Args) -> anyhow::Result<WriteReport> {
    let servers = parse_servers(&args.server_pids)?;
    let pki = TestPki::load_or_create(&args.pki_dir)?;
    let factory = Arc::new(LeafFactory::with_entries(&pki, args.entries.entries(), args.via_psc)?);
    let ep = Arc::new(Endpoint::new(args.url.as_ref().context("--url")?)?);
    let mon = Arc::new(Endpoint::new(args.monitoring_url.as_ref().or(args.url.as_ref()).context("--url")?)?);
    let rt = runtime(args.threads)?;
    let key = match (&args.log_key, args.verify_every) {
        (_, 0) => None,
        (Some(k), _) => Some(LogKey::from_base64(k)?),
        (None, _) => {
            let body = rt.block_on(fetch(&mon, "log.v3.json"))?;
            Some(LogKey::from_log_json(&body).context("log.v3.json (or give --log-key)")?)
        }
    };
    let prefill = args.prefill.unwrap_or_else(|| {
        let rate = args.rate.unwrap_or(12_000.0);
        ((args.warmup + args.duration) as f64 * rate * 1.05) as usize
    });
    let pool = LeafPool::start(factory.clone(), args.gen_threads as usize, prefill);
    let t = std::time::Instant::now();
    if !pool.wait_full(Duration::from_secs(600)) {
        bail!("the leaf pool did not reach {prefill} leaves in 600 s");
    }
    let generated_before = pool.stats();
    eprintln!(
        "ct-load: {} leaves made in {:.1} s on {} thread(s) ({:.0}/s per thread)",
        pool.ready(),
        t.elapsed().as_secs_f64(),
        args.gen_threads,
        generated_before.per_thread_rate()
    );
    rt.block_on(async {
        let clock = Clock::new(args);
        let writing = Arc::new(Writing {
            ep: ep.clone(),
            submit_path: ep.path("ct/v1/add-chain"),
            submit_pre_path: ep.path("ct/v1/add-pre-chain"),
            factory,
            pool,
            clock,
            key,
            verify_every: args.verify_every,
            answered: AtomicU64::new(0),
            schedule: args.rate.map(|rate| Schedule { rate, next: AtomicU64::new(0), late: AtomicU64::new(0) }),
            timeout: Duration::from_secs(args.timeout),
            pushback_wait: Duration::from_millis(args.pushback_wait_ms),
        });
        let stop: StopAt = Arc::new(Mutex::new(None));
        let (poll_ep, poll_path) = match args.poll {
            Poll::Checkpoint => (mon.clone(), mon.path("checkpoint")),
            Poll::Sth => (ep.clone(), ep.path("ct/v1/get-sth")),
        };
        let poller =
            tokio::spawn(poll_tree(poll_ep, poll_path, args.poll, Duration::from_millis(args.poll_ms), stop.clone()));
        let cpu = {
            let servers = servers.clone();
            let w = writing.clone();
            tokio::spawn(async move {
                sleep_until(clock.window_start).await;
                let a = (cpu_snapshot(&servers), w.pool.stats());
                sleep_until(clock.end).await;
                let b = (cpu_snapshot(&servers), w.pool.stats());
                (a, b)
            })
        };
        let tasks: Vec<_> = (0..args.writers).map(|_| tokio::spawn(writer(writing.clone()))).collect();
        let mut stats = WriteStats::default();
        for t in tasks {
            stats.merge(t.await.context("a writer panicked")?);
        }
        let ((cpu_a, gen_a), (cpu_b, gen_b)) = cpu.await?;
        let want = stats.entries.iter().map(|&(_, i)| i + 1).max().unwrap_or(0);
        *stop.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((want, Instant::now() + Duration::from_secs(args.integrate_timeout)));
        let (seen, poll_errors) = poller.await?;
        let mut integrate = Vec::with_capacity(stats.entries.len());
        let mut not_integrated = 0;
        for &(began, index) in &stats.entries {
            let at = seen.partition_point(|&(_, size)| size <= index);
            match seen.get(at) {
                Some(&(t, _)) => integrate.push(t.saturating_duration_since(began)),
                None => not_integrated += 1,
            }
        }
        let tree_growth = match (size_at(&seen, clock.window_start), size_at(&seen, clock.end)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let late_slots = writing.schedule.as_ref().map_or(0, |s| s.late.load(Ordering::Relaxed));
        Ok(WriteReport {
            stats,
            window: clock.window(),
            cpu: CpuUse::between(&servers, &cpu_a, &cpu_b),
            integrate,
            not_integrated,
            tree_growth,
            poll_errors,
            generated_before: gen_a,
            generated_after: gen_b,
            prefill,
            late_slots,
        })
    })
}

impl WriteReport {
    fn rate(&self) -> f64 {
        self.stats.scts as f64 / self.window.as_secs_f64()
    }

    fn error_count(&self) -> u64 {
        self.stats.errors.values().sum()
    }

    fn passed(&self) -> bool {
        let e = self.error_count();
        self.stats.scts > 0 && e * 1000 <= self.stats.scts + e && self.stats.verify_failed == 0
    }

    fn generated_in_window(&self) -> u64 {
        self.generated_after.made.saturating_sub(self.generated_before.made)
    }

    fn text(&self, args: &Args) -> String {
        let s = &self.stats;
        let mut sct = s.sct_latencies.clone();
        let [p50, p90, p99, max] = quantiles(&mut sct);
        let mut integ = self.integrate.clone();
        let [i50, i90, i99, imax] = quantiles(&mut integ);
        let mode = match args.rate {
            Some(r) => format!("open loop at {r}/s"),
            None => "closed loop".into(),
        };
        let secs = self.window.as_secs_f64();
        let mut out = format!(
            "ct-load: POST {url}{endpoints}{psc}, {w} writers, {mode}, {t} thread(s), {d} s after {wu} s warmup\n\
             SCTs          {n} ({rate:.1}/s)\n",
            url = args.url.as_ref().map(ToString::to_string).unwrap_or_default(),
            endpoints = args.entries.endpoints(),
            psc = if args.via_psc && args.entries != EntryMode::Cert { " (precertificates via a PSC)" } else { "" },
            w = args.writers,
            t = args.threads,
            d = args.duration,
            wu = args.warmup,
            n = s.scts,
            rate = self.rate(),
        );
        if let Some(g) = self.tree_growth {
            out.push_str(&format!("tree growth   {g} entries in the window ({:.1}/s)\n", g as f64 / secs));
        }
        out.push_str(&format!("time-to-SCT   p50 {}, p90 {}, p99 {}, max {}\n", ms(p50), ms(p90), ms(p99), ms(max)));
        out.push_str(&format!(
            "integrated    {} of {} (polling {:?} every {} ms); time-to-integrate p50 {}, p90 {}, p99 {}, max {}\n",
            self.integrate.len(),
            s.entries.len(),
            args.poll,
            args.poll_ms,
            ms(i50),
            ms(i90),
            ms(i99),
            ms(imax)
        ));
        out.push_str(&format!("pushbacks     {} (HTTP 429)\n", s.pushbacks));
        out.push_str(&format!("errors        {}\n", self.error_count()));
        for (kind, n) in &s.errors {
            out.push_str(&format!("  {n:>9}  {kind}\n"));
        }
        out.push_str(&format!(
            "verified      {} SCT signatures (every {}th), {} failed\n",
            s.verified, args.verify_every, s.verify_failed
        ));
        if self.late_slots > 0 {
            out.push_str(&format!("late          {} open-loop slots started over 10 ms late\n", self.late_slots));
        }
        out.push_str("cpu over the window:\n");
        out.push_str(&self.cpu.text(self.window, s.scts, "entry"));
        out.push_str(&format!(
            "generator     {} leaves made before the clock started ({:.0}/s per thread, {} threads); {} made in the \
             window; writers found no leaf ready {} times\n",
            self.prefill,
            self.generated_before.per_thread_rate(),
            args.gen_threads,
            self.generated_in_window(),
            s.waited_for_leaf
        ));
        out.push_str(&format!("connections   {} opened; tree head polls failed {}\n", s.connections, self.poll_errors));
        out
    }

    fn json(&self, args: &Args) -> serde_json::Value {
        let s = &self.stats;
        let mut sct = s.sct_latencies.clone();
        let [p50, p90, p99, max] = quantiles(&mut sct);
        let mut integ = self.integrate.clone();
        let [i50, i90, i99, imax] = quantiles(&mut integ);
        serde_json::json!({
            "mode": "write",
            "scts": s.scts,
            "scts_per_sec": round(self.rate(), 1),
            "tree_growth": self.tree_growth,
            "tree_growth_per_sec": self.tree_growth.map(|g| round(g as f64 / self.window.as_secs_f64(), 1)),
            "sct_p50_us": us(p50), "sct_p90_us": us(p90), "sct_p99_us": us(p99), "sct_max_us": us(max),
            "integrated": self.integrate.len(),
            "not_integrated": self.not_integrated,
            "integrate_p50_us": us(i50), "integrate_p90_us": us(i90), "integrate_p99_us": us(i99),
            "integrate_max_us": us(imax),
            "pushbacks": s.pushbacks,
            "errors": self.error_count(),
            "errors_by_kind": s.errors,
            "verified": s.verified,
            "verify_failed": s.verify_failed,
            "late_slots": self.late_slots,
            "cpu": self.cpu.json(self.window, s.scts),
            "generator": {
                "prefill": self.prefill,
                "per_thread_per_sec": round(self.generated_before.per_thread_rate(), 0),
                "made_in_window": self.generated_in_window(),
                "waited_for_leaf": s.waited_for_leaf,
                "errors": self.generated_after.errors,
            },
            "connections_opened": s.connections,
            "poll_errors": self.poll_errors,
            "seconds": self.window.as_secs_f64(),
            "passed": self.passed(),
            "options": options_json(args),
        })
    }
}

fn options_json(args: &Args) -> serde_json::Value {
    serde_json::json!({
        "url": args.url.as_ref().map(ToString::to_string),
        "monitoring_url": args.monitoring_url.as_ref().map(ToString::to_string),
        "writers": args.writers,
        "duration": args.duration,
        "warmup": args.warmup,
        "rate": args.rate,
        "threads": args.threads,
        "gen_threads": args.gen_threads,
        "verify_every": args.verify_every,
        "poll": format!("{:?}", args.poll),
        "poll_ms": args.poll_ms,
        "entries": format!("{:?}", args.entries),
        "via_psc": args.via_psc,
        "read_tiles": args.read_tiles,
        "tiles": format!("{:?}", args.tiles),
    })
}
