//! authcode-load: drives tokend's authorization code flow with PKCE
//! (RFC 6749 §4.1, RFC 7636) for a bounded time and reports flows/s,
//! latency percentiles and errors by kind. The flow itself is
//! `signet_bench::oauth::authcode`.
//!
//! Each of `--concurrency` tasks is one browser on one HTTP/1.1 keep-alive
//! connection. Before the window it signs in through the real sign-in form
//! (`GET /authorize` → the page's hidden `authz` and `csrf` → `POST /login`
//! with the CSRF cookie → `POST /consent` the first time), which costs one
//! argon2id verification. Then, back to back, a flow is:
//!
//! 1. `GET /authorize` with the session cookie and a fresh PKCE S256
//!    challenge and `state`: must be a 302 whose `Location` is the redirect
//!    URI with that `state`, `iss` and a `code`;
//! 2. `POST /token` redeeming the code with its verifier (a public client):
//!    must be a 200 whose JSON has `access_token` and, for `openid`,
//!    `id_token`.
//!
//! The flow's latency is the two requests together. `--login-every N` signs
//! in again (a new session, another argon2id) every N flows, to price the
//! sign-in into the rate. The report is a human block and one JSON line
//! (`{"authcode_load": ...}`); exits non-zero past 0.1% errors.

#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use hyper::header::HeaderValue;
use hyper::Uri;
use signet_bench::cpu::{cpu_snapshot, parse_servers, round, CpuUse};
use signet_bench::load::{connect_failed, Clock, Stats};
use signet_bench::oauth::authcode::CodeFlow;
use signet_bench::oauth::connect;
use signet_bench::percentile;
use tokio::time::{timeout_at, Instant};

/// Load generator for tokend's authorization code flow.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The issuer (http only), e.g. http://127.0.0.1:8200.
    #[arg(long)]
    issuer: String,
    /// A public client holding authorization_code, with --redirect-uri registered.
    #[arg(long)]
    client_id: String,
    /// The redirect URI.
    #[arg(long)]
    redirect_uri: String,
    /// The user name.
    #[arg(long)]
    user: String,
    /// A file holding the user's password (first line).
    #[arg(long)]
    password_file: PathBuf,
    /// The scopes asked for.
    #[arg(long, default_value = "openid")]
    scope: String,
    /// Browsers, each on its own keep-alive connection.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Seconds run before measuring.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    warmup: u64,
    /// Sign in again every N flows (0: once per browser, before the window).
    #[arg(long, default_value_t = 0)]
    login_every: u64,
    /// Servers whose CPU time over the window is reported (`NAME=PID`), repeatable.
    #[arg(long = "pid")]
    pids: Vec<String>,
    /// A label for the report.
    #[arg(long, default_value = "")]
    label: String,
    /// Tokio worker threads (1: everything on this thread).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
}

/// What every browser shares: where to connect, the flow, how often to sign in again.
struct Target {
    addr: SocketAddr,
    flow: CodeFlow,
    login_every: u64,
}

async fn browser(target: Arc<Target>, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    let mut session: Option<String> = None;
    let mut flows_since_login = 0u64;
    'connections: while Instant::now() < clock.end {
        let mut tx = match timeout_at(clock.end, connect(target.addr, None)).await {
            Ok(Ok(tx)) => tx,
            Ok(Err(e)) => {
                connect_failed(&mut stats, clock, format!("connect: {e}")).await;
                continue;
            }
            Err(_) => break,
        };
        stats.connections += 1;
        loop {
            let now = Instant::now();
            if now >= clock.end {
                break 'connections;
            }
            let relogin = target.login_every > 0 && flows_since_login >= target.login_every;
            let started = Instant::now();
            if session.is_none() || relogin {
                match timeout_at(clock.end, target.flow.sign_in(&mut tx)).await {
                    Ok(Ok(s)) => {
                        session = Some(s);
                        flows_since_login = 0;
                    }
                    Ok(Err(e)) => {
                        if clock.counts(Instant::now()) {
                            stats.error(format!("sign-in: {e}"));
                        }
                        continue 'connections;
                    }
                    Err(_) => break 'connections,
                }
            }
            let Some(s) = session.as_deref() else { continue };
            match timeout_at(clock.end, target.flow.flow(&mut tx, s)).await {
                Ok(Ok(())) => {
                    flows_since_login += 1;
                    let done = Instant::now();
                    if clock.counts(done) {
                        stats.responses += 1;
                        stats.latencies.push(done - started);
                    }
                }
                Ok(Err(kind)) => {
                    if clock.counts(Instant::now()) {
                        stats.error(kind.clone());
                    }
                    if kind.starts_with("transport") {
                        continue 'connections;
                    }
                }
                Err(_) => break 'connections,
            }
        }
    }
    stats
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(passed) if passed => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("authcode-load: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> anyhow::Result<bool> {
    let uri: Uri = args.issuer.parse()?;
    if uri.scheme_str() != Some("http") {
        bail!("{}: only http:// issuers are supported", args.issuer);
    }
    let authority = uri.authority().context("the issuer has no host")?;
    let addr = (authority.host(), authority.port_u16().unwrap_or(80))
        .to_socket_addrs()?
        .next()
        .context("the issuer's host resolves to no address")?;
    let password = std::fs::read_to_string(&args.password_file)
        .with_context(|| format!("reading {}", args.password_file.display()))?
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let target = Arc::new(Target {
        addr,
        flow: CodeFlow {
            host: HeaderValue::from_str(authority.as_str())?,
            base_path: uri.path().trim_end_matches('/').to_owned(),
            client_id: args.client_id.clone(),
            redirect_uri: args.redirect_uri.clone(),
            user: args.user.clone(),
            password,
            scope: args.scope.clone(),
        },
        login_every: args.login_every,
    });
    let servers = parse_servers(&args.pids)?;
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()?
    };
    let (mut stats, window, cpu) = runtime.block_on(async {
        let start = Instant::now();
        let window_start = start + Duration::from_secs(args.warmup);
        let clock = Clock { window_start, end: window_start + Duration::from_secs(args.duration) };
        let at_start = servers.clone();
        let cpu_start = tokio::spawn(async move {
            tokio::time::sleep_until(window_start).await;
            cpu_snapshot(&at_start)
        });
        let tasks: Vec<_> = (0..args.concurrency).map(|_| tokio::spawn(browser(Arc::clone(&target), clock))).collect();
        let mut stats = Stats::default();
        for t in tasks {
            stats.merge(t.await.context("a browser task panicked")?);
        }
        let at_end = cpu_snapshot(&servers);
        let cpu = CpuUse::between(&servers, &cpu_start.await?, &at_end);
        anyhow::Ok((stats, clock.end - clock.window_start, cpu))
    })?;
    let per_sec = stats.responses as f64 / window.as_secs_f64();
    let p50 = percentile(&mut stats.latencies, 50.0);
    let p99 = percentile(&mut stats.latencies, 99.0);
    let max = stats.latencies.last().copied().unwrap_or_default();
    let ms = |d: Duration| round(d.as_secs_f64() * 1000.0, 3);
    println!(
        "authcode-load {}: {} flows in {:.1} s = {:.0} flows/s (c={}, login every {}), p50 {} ms, p99 {} ms, max {} ms, errors {:?}",
        args.label,
        stats.responses,
        window.as_secs_f64(),
        per_sec,
        args.concurrency,
        args.login_every,
        ms(p50),
        ms(p99),
        ms(max),
        stats.errors
    );
    print!("{}", cpu.text(window, stats.responses, "flow"));
    println!(
        "{}",
        serde_json::json!({ "authcode_load": {
            "label": args.label, "flows": stats.responses, "per_sec": round(per_sec, 1),
            "concurrency": args.concurrency, "login_every": args.login_every,
            "p50_ms": ms(p50), "p99_ms": ms(p99), "max_ms": ms(max),
            "errors": stats.errors, "connections": stats.connections,
            "cpu": cpu.json(window, stats.responses),
        }})
    );
    Ok(stats.passed())
}
