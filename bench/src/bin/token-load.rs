//! token-load: drives an OAuth 2.0 token endpoint (RFC 6749 §4.4
//! client_credentials) or introspection endpoint (RFC 7662) over HTTP/1.1
//! with keep-alive for a bounded time and reports requests/s, latency
//! percentiles and errors by kind.
//!
//! Each of `--concurrency` tasks runs requests back to back over one
//! keep-alive connection, reconnecting when the server closes it. Only what
//! completes in the window after `--warmup` counts. Every response is
//! checked: a token response must be a 200 whose JSON body has a string
//! `access_token`; an introspection response a 200 whose JSON body has
//! `"active": true`. Anything else counts as an error, by status.
//!
//! Client authentication: `client_secret_basic` (`--auth basic`, the
//! default), `client_secret_post` (`--auth post`), `private_key_jwt`
//! (`--assertion-key PEM --kid KID`: an ES256 assertion signed here for every
//! request, with a fresh `jti`, `aud` = `--assertion-aud` or the URL), or
//! none (`--auth none`: Hydra's admin introspection endpoint).
//!
//! `--mode introspect` first fetches one token from `--url`, then POSTs it
//! to `--introspect-url` (default: the URL with its last path segment
//! replaced by `introspect`) over and over.
//!
//! The report is a human line block and one JSON line (`{"token_load": ...}`).
//! Exits non-zero if more than 0.1% of outcomes are errors or none counted.

#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use openssl::pkey::PKey;
use signet_bench::cpu::{cpu_snapshot, parse_servers, round, CpuUse};
use signet_bench::load::{open, Clock, Stats};
use signet_bench::oauth::client_auth::{Assertion, ClientAuth};
use signet_bench::oauth::form_encode;
use signet_bench::percentile;
use signet_jose::{jwk_json, Algorithm};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

/// Load generator for OAuth 2.0 token and introspection endpoints.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The token endpoint (http only), e.g. http://127.0.0.1:8200/token.
    #[arg(long)]
    url: Uri,
    /// Keep-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Seconds run before measuring; nothing in them counts.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    warmup: u64,
    /// The client id.
    #[arg(long)]
    client_id: String,
    /// The client secret (client_secret_basic / client_secret_post).
    #[arg(long, default_value = "")]
    client_secret: String,
    /// How the client authenticates (ignored with --assertion-key).
    #[arg(long, value_enum, default_value_t = Auth::Basic)]
    auth: Auth,
    /// A PEM P-256 private key: authenticate with private_key_jwt, an ES256
    /// assertion signed per request.
    #[arg(long, requires = "kid")]
    assertion_key: Option<PathBuf>,
    /// The assertion's `kid` (the key's id in the client's registered JWKS).
    #[arg(long)]
    kid: Option<String>,
    /// Write the JWKS of --assertion-key (its public key as `--kid`, ES256)
    /// to this file and exit: what the client registers.
    #[arg(long, requires = "assertion_key")]
    jwks_out: Option<PathBuf>,
    /// The assertion's `aud` (default: --url).
    #[arg(long)]
    assertion_aud: Option<String>,
    /// token: POST grant_type=client_credentials; introspect: POST token=... .
    #[arg(long, value_enum, default_value_t = Mode::Token)]
    mode: Mode,
    /// The introspection endpoint (default: --url with `introspect` for its last segment).
    #[arg(long)]
    introspect_url: Option<Uri>,
    /// How the client authenticates to the introspection endpoint (default: as to the token endpoint).
    #[arg(long, value_enum)]
    introspect_auth: Option<Auth>,
    /// The `scope` asked for (none: the server's default).
    #[arg(long)]
    scope: Option<String>,
    /// Servers whose CPU time over the window is reported (`NAME=PID` or `PID`), repeatable.
    #[arg(long = "pid")]
    pids: Vec<String>,
    /// A label for the report (e.g. "tokend-es256-basic").
    #[arg(long, default_value = "")]
    label: String,
    /// Tokio worker threads. 1 (the default) runs everything on this thread,
    /// leaving the other cores to the server.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Seconds a connect or a request may take before it counts as a timeout.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout: u64,
}

/// Client authentication.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Auth {
    /// client_secret_basic: HTTP Basic, id and secret form-encoded.
    Basic,
    /// client_secret_post: id and secret in the body.
    Post,
    /// No client authentication.
    None,
}

/// What is requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// client_credentials token requests.
    Token,
    /// Introspection of one token fetched first.
    Introspect,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Token => "token",
            Self::Introspect => "introspect",
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(out) = &args.jwks_out {
        return match write_jwks(&args, out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("token-load: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let mut report = match run(&args) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("token-load: {e:#}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report.text(&args));
    println!("{}", report.json(&args));
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "token-load: FAILED: {} responses, {} errors (more than 0.1% errors, or no responses)",
            report.stats.responses,
            report.stats.error_count()
        );
        ExitCode::FAILURE
    }
}

/// Writes `{"keys": [JWK of --assertion-key]}` to `out`.
fn write_jwks(args: &Args, out: &std::path::Path) -> anyhow::Result<()> {
    let path = args.assertion_key.as_ref().context("--jwks-out needs --assertion-key")?;
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let key = PKey::private_key_from_pem(&pem).with_context(|| format!("{}: not a PEM key", path.display()))?;
    let jwk = jwk_json(&key.public_key_to_der()?, args.kid.as_deref().unwrap_or(""), Algorithm::Es256)?;
    std::fs::write(out, serde_json::json!({ "keys": [jwk] }).to_string())
        .with_context(|| format!("writing {}", out.display()))
}

fn run(args: &Args) -> anyhow::Result<Report> {
    let servers = parse_servers(&args.pids)?;
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()?
    };
    runtime.block_on(async {
        let token_target = Target::new(args, &args.url, args.auth, Mode::Token, None)?;
        let target = match args.mode {
            Mode::Token => token_target,
            Mode::Introspect => {
                let token = fetch_token(&token_target).await.context("fetching the token to introspect")?;
                let url = match &args.introspect_url {
                    Some(u) => u.clone(),
                    None => sibling(&args.url, "introspect")?,
                };
                Target::new(args, &url, args.introspect_auth.unwrap_or(args.auth), Mode::Introspect, Some(token))?
            }
        };
        let target = Arc::new(target);
        let url = format!("http://{}{}", target.host.to_str().unwrap_or("?"), target.uri);
        let start = Instant::now();
        let window_start = start + Duration::from_secs(args.warmup);
        let clock = Clock { window_start, end: window_start + Duration::from_secs(args.duration) };
        let servers_at_start = servers.clone();
        let cpu_at_window_start = tokio::spawn(async move {
            sleep_until(window_start).await;
            cpu_snapshot(&servers_at_start)
        });
        let tasks: Vec<_> =
            (0..args.concurrency as usize).map(|_| tokio::spawn(connection(Arc::clone(&target), clock))).collect();
        let mut stats = Stats::default();
        for task in tasks {
            stats.merge(task.await.context("a connection task panicked")?);
        }
        // Read as soon as the last task ends: close to the window's end.
        let at_end = cpu_snapshot(&servers);
        let cpu = CpuUse::between(&servers, &cpu_at_window_start.await?, &at_end);
        Ok(Report { stats, window: clock.end - clock.window_start, cpu, url })
    })
}

/// `url` with its last path segment replaced by `segment`.
fn sibling(url: &Uri, segment: &str) -> anyhow::Result<Uri> {
    let path = url.path();
    let base = path.rsplit_once('/').map_or("", |(b, _)| b);
    let authority = url.authority().context("the URL has no host")?;
    Ok(format!("http://{authority}{base}/{segment}").parse()?)
}

/// What every connection task shares: where to connect and what to send.
struct Target {
    addr: SocketAddr,
    host: HeaderValue,
    uri: Uri,
    auth: ClientAuth,
    /// The body without client authentication.
    body: String,
    mode: Mode,
    timeout: Duration,
}

impl Target {
    fn new(args: &Args, url: &Uri, auth: Auth, mode: Mode, token: Option<String>) -> anyhow::Result<Self> {
        if url.scheme_str() != Some("http") {
            bail!("{url}: only http:// URLs are supported");
        }
        let authority = url.authority().with_context(|| format!("{url}: no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = (authority.host(), port)
            .to_socket_addrs()
            .with_context(|| format!("resolving {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        let host = HeaderValue::from_str(authority.as_str())?;
        let auth = match (&args.assertion_key, auth) {
            (_, Auth::None) => ClientAuth::None,
            (Some(path), _) => {
                let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                let key =
                    PKey::private_key_from_pem(&pem).with_context(|| format!("{}: not a PEM key", path.display()))?;
                let aud = args.assertion_aud.clone().unwrap_or_else(|| args.url.to_string());
                ClientAuth::Jwt(Box::new(Assertion::private_key_jwt(key, args.kid.as_deref(), &args.client_id, &aud)?))
            }
            (None, Auth::Basic) => ClientAuth::basic(&args.client_id, &args.client_secret)?,
            (None, Auth::Post) => ClientAuth::post(&args.client_id, &args.client_secret),
        };
        let body = match (mode, token) {
            (Mode::Introspect, Some(token)) => format!("token={}", form_encode(&token)),
            (Mode::Introspect, None) => bail!("introspection needs a token"),
            (Mode::Token, _) => match &args.scope {
                Some(scope) => format!("grant_type=client_credentials&scope={}", form_encode(scope)),
                None => "grant_type=client_credentials".to_owned(),
            },
        };
        let uri: Uri = url.path_and_query().map_or("/", |p| p.as_str()).parse()?;
        Ok(Self { addr, host, uri, auth, body, mode, timeout: Duration::from_secs(args.timeout) })
    }

    fn request(&self) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, self.host.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
        let body = self.auth.apply(&self.body, headers)?;
        *request.body_mut() = Full::new(Bytes::from(body));
        Ok(request)
    }

    /// Checks one response: Ok, or the error's kind.
    fn check(&self, status: u16, body: &[u8]) -> Result<(), String> {
        if status != 200 {
            return Err(format!("status {status}"));
        }
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| "200 not JSON".to_owned())?;
        match self.mode {
            Mode::Token if v["access_token"].is_string() => Ok(()),
            Mode::Token => Err("200 without access_token".into()),
            Mode::Introspect if v["active"] == serde_json::Value::Bool(true) => Ok(()),
            Mode::Introspect => Err("200 not active".into()),
        }
    }
}

/// One token from `target` (a token endpoint), on a connection of its own.
async fn fetch_token(target: &Target) -> anyhow::Result<String> {
    let stream = TcpStream::connect(target.addr).await?;
    let (mut sender, conn) = http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = sender.send_request(target.request()?).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if status != 200 {
        bail!("token endpoint answered {status}: {}", String::from_utf8_lossy(&body));
    }
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    v["access_token"].as_str().map(str::to_owned).context("no access_token in the token response")
}

/// One connection's task: connect, run requests back to back until the
/// server closes or fails, reconnect; until the clock ends.
async fn connection(target: Arc<Target>, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    'connect: while Instant::now() < clock.end {
        let Some(mut sender) = open(target.addr, target.timeout, &mut stats, clock).await else {
            continue;
        };
        loop {
            match timeout_at(clock.end, sender.ready()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => continue 'connect,
                Err(_) => break 'connect,
            }
            // Signing an assertion is part of the request's cost here, as it is a client's.
            let sent = Instant::now();
            if sent >= clock.end {
                break 'connect;
            }
            let request = match target.request() {
                Ok(r) => r,
                Err(e) => {
                    stats.error(format!("request: {e}"));
                    break 'connect;
                }
            };
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
            if clock.counts(done) {
                match target.check(parts.status.as_u16(), &body) {
                    Ok(()) => {
                        stats.responses += 1;
                        stats.latencies.push(done - sent);
                    }
                    Err(kind) => stats.error(kind),
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
    cpu: CpuUse,
    /// The endpoint measured.
    url: String,
}

impl Report {
    /// At least one response, and errors at most 0.1% of all outcomes.
    fn passed(&self) -> bool {
        self.stats.passed()
    }

    fn per_sec(&self) -> f64 {
        self.stats.responses as f64 / self.window.as_secs_f64()
    }

    /// p50, p99 and max latency.
    fn latency(&mut self) -> [Duration; 3] {
        let l = &mut self.stats.latencies;
        [percentile(l, 50.0), percentile(l, 99.0), percentile(l, 100.0)]
    }

    fn auth_name(args: &Args) -> &'static str {
        let auth = match args.mode {
            Mode::Introspect => args.introspect_auth.unwrap_or(args.auth),
            Mode::Token => args.auth,
        };
        match (&args.assertion_key, auth) {
            (_, Auth::None) => "none",
            (Some(_), _) => "private_key_jwt",
            (None, Auth::Basic) => "client_secret_basic",
            (None, Auth::Post) => "client_secret_post",
        }
    }

    fn text(&mut self, args: &Args) -> String {
        let [p50, p99, max] = self.latency();
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        let s = &self.stats;
        let errors: Vec<String> = s.errors.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let mut out = format!(
            "token-load {label}: {mode} {url} ({auth}), c={c}, {secs} s after {warmup} s warmup: \
             {rate:.0}/s ({n} ok), mean {mean}, p50 {p50}, p99 {p99}, max {max}, errors {errs} [{errors}], \
             reconnects {re}\n",
            label = args.label,
            mode = args.mode.as_str(),
            url = self.url,
            auth = Self::auth_name(args),
            c = args.concurrency,
            secs = args.duration,
            warmup = args.warmup,
            rate = self.per_sec(),
            n = s.responses,
            mean = ms(s.mean_latency()),
            p50 = ms(p50),
            p99 = ms(p99),
            max = ms(max),
            errs = s.error_count(),
            errors = errors.join(", "),
            re = s.reconnects,
        );
        out.push_str(
            &self.cpu.text(self.window, s.responses, "request").replace("ct-load itself", "token-load itself"),
        );
        out
    }

    fn json(&mut self, args: &Args) -> String {
        let [p50, p99, max] = self.latency();
        let ms = |d: Duration| round(d.as_secs_f64() * 1e3, 3);
        let s = &self.stats;
        serde_json::json!({ "token_load": {
            "label": args.label,
            "mode": args.mode.as_str(),
            "url": self.url,
            "auth": Self::auth_name(args),
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "requests_per_s": round(self.per_sec(), 1),
            "ok": s.responses,
            "mean_ms": ms(s.mean_latency()),
            "p50_ms": ms(p50),
            "p99_ms": ms(p99),
            "max_ms": ms(max),
            "errors": s.errors,
            "error_count": s.error_count(),
            "reconnects": s.reconnects,
            "cpu": self.cpu.json(self.window, s.responses),
        }})
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn introspection_is_beside_the_token_endpoint() {
        let url: Uri = "http://127.0.0.1:8200/oauth2/token".parse().unwrap();
        assert_eq!(sibling(&url, "introspect").unwrap().to_string(), "http://127.0.0.1:8200/oauth2/introspect");
    }
}
