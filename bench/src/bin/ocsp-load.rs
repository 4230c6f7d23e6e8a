//! ocsp-load: drives an OCSP responder over HTTP/1.1 with keep-alive for a
//! bounded time and reports responses/s, latency percentiles and errors.
//!
//! Each of `--connections` tasks runs requests back to back over one
//! keep-alive connection, cycling through the DER requests in
//! `--requests-dir`; when the server closes the connection (`Connection:
//! close`, or it just goes away) the task reconnects and counts it. Only what
//! completes in the window after `--warmup` counts. Every response is checked
//! (HTTP 200, the OCSP Content-Type, a successful OCSPResponseStatus read from
//! the first bytes); every `--parse-every`th one is also parsed in full with
//! x509-ocsp. Exits non-zero if more than 0.1% of outcomes are errors or no
//! response counted.
//!
//! A latency runs from sending the request to the end of the response body;
//! it leaves out connecting, which a server that closes every connection
//! (`openssl ocsp`) makes part of each request's cost: responses/s has it.
//!
//! Against `openssl ocsp`, restart the responder between runs: the end of a
//! run can close a connection before its request was sent, and openssl 3.0's
//! responder spins on such a connection and answers no more
//! (openssl/openssl#31129).

#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Request, Uri};
use signet_bench::load::{open, Clock, Stats};
use signet_bench::ocsp;
use signet_bench::{percentile, self_cpu_time};
use tokio::time::{sleep_until, timeout_at, Instant};

/// Load generator for OCSP responders over HTTP/1.1.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The responder's base URL (http only), e.g. http://127.0.0.1:8080/ or
    /// http://127.0.0.1:8080/ocsp. GET requests go to this path + "/" + the
    /// URL-encoded base64 request; POST requests go to the path itself.
    #[arg(long)]
    url: Uri,
    /// A directory of DER OCSP requests (`*.der`), sent in turn.
    #[arg(long)]
    requests_dir: PathBuf,
    /// Keep-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    connections: u32,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Seconds run before measuring; nothing in them counts.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    warmup: u64,
    /// GET (RFC 5019's form, cacheable) or POST (body = DER request).
    #[arg(long, value_enum, default_value_t = Method::Get)]
    method: Method,
    /// Tokio worker threads. 1 (the default) runs everything on this thread,
    /// leaving the other cores to the server.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Report as text or as one JSON object.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Seconds a connect or a request may take before it counts as a timeout.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout: u64,
    /// Parse every Nth response in full with x509-ocsp (the others get the
    /// cheap status check only).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    parse_every: u64,
}

/// How requests are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Method {
    /// GET {url}/{url-encoded base64 of the DER}.
    Get,
    /// POST {url} with the DER as an `application/ocsp-request` body.
    Post,
}

impl Method {
    /// The option's value: "get" or "post".
    fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
        }
    }
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// Lines for people.
    Text,
    /// One JSON object.
    Json,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut report = match run(&args) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ocsp-load: {e:#}");
            return ExitCode::from(2);
        }
    };
    match args.output {
        Output::Text => print!("{}", report.text(&args)),
        Output::Json => println!("{}", report.json(&args)),
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "ocsp-load: FAILED: {} responses, {} errors (more than 0.1% errors, or no responses)",
            report.stats.responses,
            report.stats.error_count()
        );
        ExitCode::FAILURE
    }
}

/// Reads the requests, runs the load and returns the merged counts.
fn run(args: &Args) -> anyhow::Result<Report> {
    let target = Arc::new(Target::new(args)?);
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()?
    };
    runtime.block_on(async {
        let start = Instant::now();
        let window_start = start + Duration::from_secs(args.warmup);
        let clock = Clock { window_start, end: window_start + Duration::from_secs(args.duration) };
        // This process's CPU time over the window: is the generator itself the limit?
        let cpu_at_window_start = tokio::spawn(async move {
            sleep_until(window_start).await;
            self_cpu_time()
        });
        let tasks: Vec<_> =
            (0..args.connections as usize).map(|id| tokio::spawn(connection(id, Arc::clone(&target), clock))).collect();
        let mut stats = Stats::default();
        for task in tasks {
            stats.merge(task.await.context("a connection task panicked")?);
        }
        let cpu = self_cpu_time().saturating_sub(cpu_at_window_start.await?);
        Ok(Report { stats, window: clock.end - clock.window_start, cpu, request_files: target.requests.len() })
    })
}

/// What every connection task shares: where to connect and what to send.
struct Target {
    addr: SocketAddr,
    host: HeaderValue,
    method: hyper::Method,
    requests: Vec<Prepared>,
    timeout: Duration,
    parse_every: u64,
}

/// One request, ready to send: its URI (origin form) and body.
struct Prepared {
    uri: Uri,
    body: Bytes,
}

impl Target {
    fn new(args: &Args) -> anyhow::Result<Self> {
        let url = &args.url;
        if url.scheme_str() != Some("http") {
            bail!("--url {url}: only http:// URLs are supported");
        }
        let authority = url.authority().with_context(|| format!("--url {url}: no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = (authority.host(), port)
            .to_socket_addrs()
            .with_context(|| format!("resolving {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        let host = HeaderValue::from_str(authority.as_str())?;
        let ders = read_requests(&args.requests_dir)?;
        let requests = ders
            .into_iter()
            .map(|der| {
                let (uri, body) = match args.method {
                    Method::Get => (ocsp::get_path(url.path(), &der).parse()?, Bytes::new()),
                    Method::Post => (url.path().parse()?, Bytes::from(der)),
                };
                Ok(Prepared { uri, body })
            })
            .collect::<anyhow::Result<_>>()?;
        let method = match args.method {
            Method::Get => hyper::Method::GET,
            Method::Post => hyper::Method::POST,
        };
        Ok(Self {
            addr,
            host,
            method,
            requests,
            timeout: Duration::from_secs(args.timeout),
            parse_every: args.parse_every,
        })
    }

    fn request(&self, prepared: &Prepared) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(prepared.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = prepared.uri.clone();
        request.headers_mut().insert(HOST, self.host.clone());
        if self.method == hyper::Method::POST {
            request.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(ocsp::REQUEST_CONTENT_TYPE));
        }
        request
    }
}

/// The `*.der` files in `dir`, in name order; at least one, none empty.
fn read_requests(dir: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "der") && p.is_file())
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("no *.der requests in {}", dir.display());
    }
    paths
        .iter()
        .map(|p| {
            let der = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            if der.is_empty() {
                bail!("{} is empty", p.display());
            }
            Ok(der)
        })
        .collect()
}

/// One connection's task: connect, run requests back to back until the
/// server closes or fails, reconnect; until the clock ends.
async fn connection(id: usize, target: Arc<Target>, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    let mut next = id % target.requests.len();
    // Staggered so that the sampled responses spread over the connections.
    let mut seen = id as u64;
    'connect: while Instant::now() < clock.end {
        let Some(mut sender) = open(target.addr, target.timeout, &mut stats, clock).await else {
            continue;
        };
        loop {
            match timeout_at(clock.end, sender.ready()).await {
                Ok(Ok(())) => {}
                // Closed while idle between requests: a new connection.
                Ok(Err(_)) => continue 'connect,
                Err(_) => break 'connect,
            }
            let request = target.request(&target.requests[next]);
            next = (next + 1) % target.requests.len();
            let sent = Instant::now();
            if sent >= clock.end {
                break 'connect;
            }
            let deadline = (sent + target.timeout).min(clock.end);
            let outcome = timeout_at(deadline, async {
                let response = sender.send_request(request).await?;
                let (parts, body) = response.into_parts();
                let body = body.collect().await?.to_bytes();
                Ok::<_, hyper::Error>((parts, body))
            })
            .await;
            let done = Instant::now();
            let (parts, body) = match outcome {
                Err(_) if done >= clock.end => break 'connect,
                Err(_) => {
                    if clock.counts(done) {
                        stats.error("timeout".into());
                    }
                    continue 'connect;
                }
                Ok(Err(e)) => {
                    if clock.counts(done) {
                        stats.error(format!("transport: {e}"));
                    }
                    continue 'connect;
                }
                Ok(Ok(pair)) => pair,
            };
            seen += 1;
            let content_type = parts.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes);
            let mut checked = ocsp::check_response(parts.status.as_u16(), content_type, &body);
            let sample = seen % target.parse_every == 0;
            if checked.is_ok() && sample {
                checked = ocsp::parse_response(&body);
            }
            if clock.counts(done) {
                stats.bytes += body.len() as u64;
                match checked {
                    Ok(()) => {
                        stats.responses += 1;
                        stats.latencies.push(done - sent);
                        stats.parsed += u64::from(sample);
                    }
                    Err(bad) => stats.error(bad.to_string()),
                }
            }
            let close = parts.headers.get_all(CONNECTION).iter().any(|v| {
                v.as_bytes().split(|&b| b == b',').any(|token| token.trim_ascii().eq_ignore_ascii_case(b"close"))
            });
            if close {
                continue 'connect;
            }
        }
    }
    stats
}

/// The merged counts and what they were measured over.
struct Report {
    stats: Stats,
    window: Duration,
    /// The generator's own CPU time (user + system) over the window.
    cpu: Duration,
    request_files: usize,
}

impl Report {
    /// At least one response, and errors at most 0.1% of all outcomes.
    fn passed(&self) -> bool {
        self.stats.passed()
    }

    fn per_sec(&self) -> f64 {
        self.stats.responses as f64 / self.window.as_secs_f64()
    }

    /// The generator's CPU use over the window, in percent of one core.
    fn cpu_percent(&self) -> f64 {
        (self.cpu.as_secs_f64() / self.window.as_secs_f64() * 1000.0).round() / 10.0
    }

    /// p50, p90, p99 and max latency.
    fn latency(&mut self) -> [Duration; 4] {
        let l = &mut self.stats.latencies;
        [percentile(l, 50.0), percentile(l, 90.0), percentile(l, 99.0), percentile(l, 100.0)]
    }

    fn text(&mut self, args: &Args) -> String {
        let [p50, p90, p99, max] = self.latency();
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        let s = &self.stats;
        let mut out = format!(
            "ocsp-load: {method} {url}, {files} request files, {conns} connections, {threads} thread(s), \
             {secs} s after {warmup} s warmup\n\
             responses   {responses} ({rate:.1}/s)\n\
             latency     p50 {p50}, p90 {p90}, p99 {p99}, max {max}\n\
             errors      {errors}\n",
            method = args.method.as_str().to_uppercase(),
            url = args.url,
            files = self.request_files,
            conns = args.connections,
            threads = args.threads,
            secs = args.duration,
            warmup = args.warmup,
            responses = s.responses,
            rate = self.per_sec(),
            p50 = ms(p50),
            p90 = ms(p90),
            p99 = ms(p99),
            max = ms(max),
            errors = s.error_count(),
        );
        for (kind, n) in &s.errors {
            out.push_str(&format!("  {n:>9}  {kind}\n"));
        }
        out.push_str(&format!(
            "reconnects  {} ({} connections opened in all)\nreceived    {} body bytes; {} responses parsed in full\n\
             cpu         {}% of a core used by ocsp-load\n",
            s.reconnects,
            s.connections,
            s.bytes,
            s.parsed,
            self.cpu_percent()
        ));
        out
    }

    fn json(&mut self, args: &Args) -> serde_json::Value {
        let [p50, p90, p99, max] = self.latency();
        let us = |d: Duration| (d.as_secs_f64() * 1e7).round() / 10.0;
        let s = &self.stats;
        serde_json::json!({
            "responses": s.responses,
            "responses_per_sec": (self.per_sec() * 10.0).round() / 10.0,
            "p50_us": us(p50),
            "p90_us": us(p90),
            "p99_us": us(p99),
            "max_us": us(max),
            "errors": s.error_count(),
            "errors_by_kind": s.errors,
            "reconnects": s.reconnects,
            "connections_opened": s.connections,
            "bytes_received": s.bytes,
            "parsed_in_full": s.parsed,
            "generator_cpu_percent": self.cpu_percent(),
            "seconds": self.window.as_secs_f64(),
            "passed": self.passed(),
            "options": {
                "url": args.url.to_string(),
                "requests_dir": args.requests_dir,
                "request_files": self.request_files,
                "connections": args.connections,
                "duration": args.duration,
                "warmup": args.warmup,
                "method": args.method.as_str(),
                "threads": args.threads,
                "timeout": args.timeout,
                "parse_every": args.parse_every,
            },
        })
    }
}
