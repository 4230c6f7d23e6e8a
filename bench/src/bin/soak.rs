//! soak: the whole appliance under a mixed load for `--duration` seconds,
//! with one daemon at a time killed with SIGKILL and restarted every
//! `--kill-every` seconds, and afterwards a check that nothing acknowledged
//! was lost.
//!
//! The stack is the one `scripts/run` sets up in `--state-dir` (its configs,
//! demo CA, CT log, token keys, OAuth clients, probes and `endpoints.json`),
//! stopped: soak starts signd, ocspd, ctlogd, the demo DNS server, acmed,
//! probed and tokend itself from those configs, so that it can kill and
//! restart them (`bench/scripts/soak.sh` does both steps).
//!
//! The load, one task each, paced by `--pause-ms` between requests:
//! - issuance through acmed (ACME, http-01 answered here, `signet_bench::acme_bench`'s
//!   client), and every third certificate revoked again (revokeCert);
//! - OCSP requests to ocspd for the certificates issued (signet-ca's `ocsp_check`);
//! - CT: each certificate issued sent to ctlogd's `add-chain`; `get-sth` and `get-entries` reads;
//! - tokens from tokend: `client_credentials` for the demo client, and refresh
//!   token families of the demo user (authorization code flow with PKCE through
//!   the sign-in form, then one rotation after another; a new family every tenth);
//! - reads of probed's status API and metrics (probed runs its own checks of every daemon).
//!
//! Acknowledged means answered with success: an issued certificate (its
//! serial, DER and URL), a revocation, an SCT (with its `leaf_index`), a
//! refresh token (the newest of its family). A failed request is counted in
//! the kill window (from the SIGKILL until 3 s after the daemon is back) or
//! outside it. A refresh that failed is retried within tokend's
//! `refresh_grace_seconds` (10 s): its answer may have been lost after tokend
//! committed the rotation; a family whose retries run past 8 s is set aside
//! (its outcome is unknown, not lost) and counted.
//!
//! After each restart (and once more at the end, the load stopped) every item
//! acknowledged before the kill is verified: each certificate known to ocspd
//! (good, or revoked if a revocation of it was sent), each acknowledged
//! revocation answered revoked, each SCT'd entry at its `leaf_index` in the
//! log with an inclusion proof to a signed tree head, each refresh family's
//! newest token refreshing; at the end also each certificate downloaded again
//! from acmed, and no serial issued twice. After signd's restart, the daemons
//! that use it must be healthy again by themselves within 20 s; one that is
//! not is a finding, reported and restarted. The RSS of each daemon
//! (`/proc/PID/status` VmRSS) is sampled every second: its first and last
//! value per process life are reported.
//!
//! Exits 1 if anything acknowledged is missing, a serial is duplicated, or a
//! daemon did not come back; 2 if the run could not start.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use clap::Parser;
use futures::stream::{self, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use openssl::ssl::SslConnector;
use openssl::x509::X509;
use signet_acme::types::Identifier;
use signet_bench::acme_bench::client::{Client, Polling};
use signet_bench::acme_bench::http::{tls_connector, Connection, Origin};
use signet_bench::acme_bench::issue::{issue, Plan};
use signet_bench::acme_bench::{ChallengeKind, KeyType, ResponderConfig};
use signet_bench::oauth::authcode::CodeFlow;
use signet_bench::oauth::client_auth::ClientAuth;
use signet_bench::oauth::{connect, form_encode};
use signet_ca::ocsp_check::{check_response, request, Status};
use signet_ct::rfc6962::api::{AddChainResponse, GetEntriesResponse, GetProofByHashResponse, GetSthResponse};
use signet_ct::{LogKey, SignedEntry, TimestampedEntry, TreeHead};
use tokio::time::Instant;

/// Soak test of the whole appliance: mixed load, SIGKILLs, nothing acknowledged lost.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// A state directory `scripts/run` initialised (its daemons stopped).
    #[arg(long)]
    state_dir: PathBuf,
    /// Seconds of load.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(5..=86_400))]
    duration: u64,
    /// Seconds between two kills (one daemon each, in turn).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=86_400))]
    kill_every: u64,
    /// Milliseconds each load task waits between two requests.
    #[arg(long, default_value_t = 100)]
    pause_ms: u64,
    /// The daemons killed, in turn.
    #[arg(long, value_delimiter = ',', default_value = "acmed,signd,ocspd,ctlogd,tokend,probed")]
    kill: Vec<String>,
}

/// The most one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a daemon may take to be healthy after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long after a daemon is back failures still count as the kill's.
const WINDOW_TAIL: Duration = Duration::from_secs(3);
/// How long a failed refresh is retried (tokend's refresh_grace_seconds is 10).
const REFRESH_RETRY: Duration = Duration::from_secs(8);

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------
// Endpoints and HTTP

/// An HTTP(S) URL taken apart for a request.
#[derive(Clone, Debug)]
struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    https: bool,
}

impl Target {
    fn parse(url: &str) -> anyhow::Result<Target> {
        let u = url::Url::parse(url).with_context(|| format!("URL {url}"))?;
        let host = u.host_str().context("URL without a host")?.to_owned();
        let port = u.port_or_known_default().context("URL without a port")?;
        let addr = (host.as_str(), port).to_socket_addrs()?.next().context("host without an address")?;
        let authority = format!("{host}:{port}");
        let mut path = u.path().to_owned();
        if let Some(q) = u.query() {
            path = format!("{path}?{q}");
        }
        Ok(Target { addr, host: authority, path, https: u.scheme() == "https" })
    }

    /// The same origin, another path.
    fn at(&self, path: &str) -> Target {
        Target { path: path.to_owned(), ..self.clone() }
    }

    /// The path relative to this target's (which ends in `/`).
    fn rel(&self, rel: &str) -> Target {
        self.at(&format!("{}{rel}", self.path))
    }
}

/// One request on a connection of its own (a daemon may have been restarted
/// since the last one): the status and body.
async fn call(
    t: &Target,
    tls: Option<&SslConnector>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(u16, Bytes), String> {
    let exchange = async {
        let tls = if t.https { tls.map(|c| (c, "localhost")) } else { None };
        let mut tx = connect(t.addr, tls).await.map_err(|e| format!("connect: {e:#}"))?;
        let mut req = Request::builder()
            .method(method)
            .uri(t.path.as_str())
            .header(HOST, t.host.as_str())
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        req.headers_mut().extend(headers);
        let resp = tx.send_request(req).await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| format!("transport: {e}"))?.to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange).await.map_err(|_| "timeout".to_owned())?
}

async fn get(t: &Target) -> Result<(u16, Bytes), String> {
    call(t, None, Method::GET, HeaderMap::new(), Bytes::new()).await
}

async fn get_ok(t: &Target) -> Result<Bytes, String> {
    match get(t).await? {
        (200, body) => Ok(body),
        (status, body) => Err(format!("GET {}: HTTP {status}: {}", t.path, snippet(&body))),
    }
}

async fn post_form(t: &Target, headers: HeaderMap, form: String) -> Result<(u16, Bytes), String> {
    let mut headers = headers;
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
    call(t, None, Method::POST, headers, Bytes::from(form)).await
}

fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(160)]).replace('\n', " ")
}

/// What the run talks to, from `endpoints.json` and the files it names.
struct Endpoints {
    state: PathBuf,
    signd_socket: PathBuf,
    ocsp: Target,
    ocspd_health: Target,
    directory: String,
    acme_health: Target,
    acme_ca_bundle: PathBuf,
    http01_port: u16,
    dns_listen: String,
    dns_zone: PathBuf,
    ct: Target,
    ct_health: Target,
    ct_key: LogKey,
    probed: Target,
    token: Target,
    tokend_health: Target,
    demo_secret: String,
    demo_password: String,
    issuing: X509,
    issuing_der: Vec<u8>,
}

fn json_file(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn text<'a>(v: &'a serde_json::Value, a: &str, b: &str) -> anyhow::Result<&'a str> {
    v[a][b].as_str().with_context(|| format!("endpoints.json has no {a}.{b}"))
}

impl Endpoints {
    fn read(state: &Path) -> anyhow::Result<Endpoints> {
        let e = json_file(&state.join("endpoints.json"))?;
        let ocsp = Target::parse(text(&e, "ocspd", "url")?)?;
        let ct = Target::parse(text(&e, "ctlogd", "url")?)?;
        let directory = text(&e, "acmed", "directory")?.to_owned();
        let acme = Target::parse(&directory)?;
        let probed = Target::parse(text(&e, "probed", "url")?)?;
        let token = Target::parse(text(&e, "tokend", "issuer")?)?;
        let key_b64 = text(&e, "ctlogd", "public_key")?;
        let key_der = STANDARD.decode(key_b64).context("ctlogd.public_key is not base64")?;
        let ct_key = LogKey::from_spki_der(&key_der).map_err(|e| anyhow::anyhow!("the CT log's key: {e}"))?;
        let issuing_pem = std::fs::read(text(&e, "ca", "issuing")?).context("reading the issuing CA")?;
        let issuing = X509::from_pem(&issuing_pem).context("the issuing CA certificate")?;
        let issuing_der = issuing.to_der()?;
        let client = json_file(Path::new(text(&e, "tokend", "demo_client")?))?;
        let user = json_file(Path::new(text(&e, "tokend", "demo_user")?))?;
        Ok(Endpoints {
            state: state.to_path_buf(),
            signd_socket: PathBuf::from(text(&e, "signd", "socket")?),
            ocspd_health: ocsp.at("/healthz"),
            ocsp,
            directory,
            acme_health: acme.at("/healthz"),
            acme_ca_bundle: PathBuf::from(text(&e, "acmed", "ca_bundle")?),
            http01_port: e["acmed"]["http01_port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .context("endpoints.json has no acmed.http01_port")?,
            dns_listen: text(&e, "acmed", "dns_resolver")?.to_owned(),
            dns_zone: PathBuf::from(text(&e, "acmed", "dns_zone")?),
            ct_health: ct.at("/healthz"),
            ct,
            ct_key,
            probed,
            tokend_health: token.at("/healthz"),
            token,
            demo_secret: client["secret"].as_str().context("no secret in the demo client's file")?.to_owned(),
            demo_password: user["password"].as_str().context("no password in the demo user's file")?.to_owned(),
            issuing,
            issuing_der,
        })
    }
}

// ---------------------------------------------------------------------------
// The daemons

enum Health {
    Socket(PathBuf),
    Http(Target),
}

struct Life {
    pid: u32,
    /// (seconds into the run, VmRSS kB): the first and the latest sample.
    first: Option<(f64, u64)>,
    last: Option<(f64, u64)>,
}

struct Daemon {
    name: &'static str,
    config: PathBuf,
    health: Health,
    /// Whether it calls signd (and must reconnect after signd's restart).
    uses_signd: bool,
    child: Option<Child>,
    lives: Vec<Life>,
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

impl Daemon {
    fn log_path(&self, state: &Path) -> PathBuf {
        state.join("logs").join(format!("{}.log", self.name))
    }

    fn spawn(&mut self, state: &Path) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(state))?;
        let child = Command::new(signet_bench::bin_dir().join(self.name))
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        self.lives.push(Life { pid: child.id(), first: None, last: None });
        self.child = Some(child);
        Ok(())
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(c.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    async fn healthy(&self, tls: &SslConnector) -> Result<(), String> {
        match &self.health {
            Health::Socket(path) => {
                tokio::net::UnixStream::connect(path).await.map(drop).map_err(|e| format!("{}: {e}", path.display()))
            }
            Health::Http(t) => match call(t, Some(tls), Method::GET, HeaderMap::new(), Bytes::new()).await? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("HTTP {status}: {}", snippet(&body))),
            },
        }
    }

    /// Waits until healthy; an error if the process exits or the time runs out.
    async fn wait_healthy(&mut self, tls: &SslConnector, state: &Path, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.healthy(tls).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if let Some(c) = self.child.as_mut() {
                if let Some(status) = c.try_wait()? {
                    bail!("{} exited ({status}); see {}", self.name, self.log_path(state).display());
                }
            }
            if Instant::now() >= deadline {
                bail!("{} not healthy after {timeout:?}: {last}; see {}", self.name, self.log_path(state).display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn sample(&mut self, at: f64) {
        let Some(life) = self.lives.last_mut() else { return };
        if self.child.is_none() {
            return;
        }
        if let Some(kb) = rss_kb(life.pid) {
            if life.first.is_none() {
                life.first = Some((at, kb));
            }
            life.last = Some((at, kb));
        }
    }
}

struct Stack {
    daemons: Vec<Daemon>,
    dns: Option<Child>,
    tls: Arc<SslConnector>,
    state: PathBuf,
}

impl Stack {
    fn new(eps: &Endpoints) -> anyhow::Result<Stack> {
        let s = &eps.state;
        let d = |name: &'static str, health: Health, uses_signd: bool| Daemon {
            name,
            config: s.join(format!("{name}.toml")),
            health,
            uses_signd,
            child: None,
            lives: Vec::new(),
        };
        let tls = tls_connector(Some(&eps.acme_ca_bundle)).context("TLS trust for acmed")?;
        Ok(Stack {
            daemons: vec![
                d("signd", Health::Socket(eps.signd_socket.clone()), false),
                d("ocspd", Health::Http(eps.ocspd_health.clone()), true),
                d("ctlogd", Health::Http(eps.ct_health.clone()), true),
                d("acmed", Health::Http(eps.acme_health.clone()), true),
                d("probed", Health::Http(eps.probed.at("/healthz")), false),
                d("tokend", Health::Http(eps.tokend_health.clone()), true),
            ],
            dns: None,
            tls,
            state: s.clone(),
        })
    }

    fn get(&mut self, name: &str) -> anyhow::Result<&mut Daemon> {
        self.daemons.iter_mut().find(|d| d.name == name).with_context(|| format!("no daemon {name}"))
    }

    async fn start_all(&mut self, eps: &Endpoints) -> anyhow::Result<()> {
        for i in 0..self.daemons.len() {
            if self.daemons[i].name == "acmed" {
                let log =
                    std::fs::OpenOptions::new().create(true).append(true).open(self.state.join("logs/dns.log"))?;
                self.dns = Some(
                    Command::new(signet_bench::bin_dir().join("signet-testdns"))
                        .args(["--listen", &eps.dns_listen, "--zone"])
                        .arg(&eps.dns_zone)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(log)
                        .spawn()
                        .context("starting signet-testdns")?,
                );
            }
            let (tls, state) = (Arc::clone(&self.tls), self.state.clone());
            let d = &mut self.daemons[i];
            d.spawn(&state)?;
            d.wait_healthy(&tls, &state, START_TIMEOUT).await?;
        }
        Ok(())
    }

    fn sample(&mut self, at: f64) {
        for d in &mut self.daemons {
            d.sample(at);
        }
    }

    fn stop_all(&mut self) {
        for d in self.daemons.iter_mut().rev() {
            d.terminate();
        }
        if let Some(mut dns) = self.dns.take() {
            let _ = dns.kill();
            let _ = dns.wait();
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            d.kill9();
        }
        if let Some(mut dns) = self.dns.take() {
            let _ = dns.kill();
            let _ = dns.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// Counting

const KINDS: [&str; 8] =
    ["issue", "revoke", "ocsp", "ct add-chain", "ct reads", "token cc", "token refresh", "probed reads"];
const ISSUE: usize = 0;
const REVOKE: usize = 1;
const OCSP: usize = 2;
const CT_ADD: usize = 3;
const CT_READ: usize = 4;
const TOKEN_CC: usize = 5;
const REFRESH: usize = 6;
const PROBE: usize = 7;

#[derive(Default)]
struct Counter {
    requests: AtomicU64,
    ok: AtomicU64,
    failed_in_window: AtomicU64,
    failed_outside: AtomicU64,
    /// Failures outside a kill window, by message.
    outside: Mutex<BTreeMap<String, u64>>,
}

/// The kill windows: from each SIGKILL until [`WINDOW_TAIL`] after the daemon is back.
#[derive(Default)]
struct Windows(Mutex<Vec<(Instant, Option<Instant>)>>);

impl Windows {
    fn overlaps(&self, start: Instant, end: Instant) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(s, e)| *s <= end && e.is_none_or(|e| e >= start))
    }
}

struct Ledger {
    certs: Mutex<Vec<Arc<CertItem>>>,
    /// Serials whose revocation was acknowledged.
    revoked: Mutex<HashSet<String>>,
    /// Serials whose revocation was sent (acknowledged or not).
    revoke_sent: Mutex<HashSet<String>>,
    scts: Mutex<Vec<Arc<SctItem>>>,
    families: Mutex<Vec<Arc<tokio::sync::Mutex<Family>>>>,
    /// OCSP answers "good" for a certificate whose revocation had been acknowledged before the request.
    stale_good: AtomicU64,
}

struct CertItem {
    serial: String,
    leaf: X509,
    der: Vec<u8>,
    worker: usize,
    url: String,
}

struct SctItem {
    leaf: Vec<u8>,
    sct: signet_ct::Sct,
    index: u64,
}

struct Family {
    refresh: String,
    /// Why it was set aside (a refresh whose outcome stayed unknown past the grace period).
    set_aside: Option<String>,
    rotations: u64,
}

struct Ctx {
    eps: Endpoints,
    counters: [Counter; 8],
    windows: Windows,
    ledger: Ledger,
    stop: AtomicBool,
    pause: Duration,
    started: Instant,
}

impl Ctx {
    fn record<T>(&self, kind: usize, start: Instant, result: &Result<T, String>) {
        let c = &self.counters[kind];
        c.requests.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(_) => {
                c.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) if self.windows.overlaps(start, Instant::now()) => {
                c.failed_in_window.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                c.failed_outside.fetch_add(1, Ordering::Relaxed);
                let mut m = c.outside.lock().unwrap_or_else(PoisonError::into_inner);
                let key: String = e.chars().take(200).collect();
                if m.len() < 40 || m.contains_key(&key) {
                    *m.entry(key).or_default() += 1;
                }
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    async fn pause(&self) {
        tokio::time::sleep(self.pause).await;
    }
}

fn secs(ctx: &Ctx) -> f64 {
    ctx.started.elapsed().as_secs_f64()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn serial_hex(cert: &X509) -> String {
    cert.serial_number().to_bn().and_then(|bn| bn.to_hex_str()).map(|s| s.to_string()).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// The load

async fn acme_client(ctx: &Ctx, tls: &Arc<SslConnector>) -> Client {
    loop {
        let made = async {
            let origin = Origin::of(&ctx.eps.directory).map_err(|e| e.to_string())?;
            let conn = Connection::new(origin, Some(Arc::clone(tls)), REQUEST_TIMEOUT);
            let polling = Polling { interval: Duration::from_millis(200), timeout: Duration::from_secs(30) };
            let mut client = Client::new(conn, &ctx.eps.directory, polling).await.map_err(|e| e.to_string())?;
            client.create_account().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(client)
        }
        .await;
        match made {
            Ok(c) => return c,
            Err(e) => {
                eprintln!("soak: making an ACME account: {e} (retrying)");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Issues certificates back to back, revoking every third; each one issued
/// goes to the CT task. Gives its client back (the final check downloads
/// its certificates again).
async fn issuer(
    ctx: Arc<Ctx>,
    worker: usize,
    tls: Arc<SslConnector>,
    to_ct: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
) -> Client {
    let responder_config = ResponderConfig {
        http01_listen: SocketAddr::from(([127, 0, 0, 1], ctx.eps.http01_port)),
        tlsalpn01_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        dns_zone: None,
    };
    let mut client = acme_client(&ctx, &tls).await;
    let responder =
        match signet_bench::acme_bench::challenge::Responder::start(ChallengeKind::Http01, &responder_config).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("soak: the http-01 responder: {e}");
                ctx.stop.store(true, Ordering::Relaxed);
                return client;
            }
        };
    let plan = Plan { challenge: ChallengeKind::Http01, responder: &responder, key_type: KeyType::EcP256 };
    let mut n = 0u64;
    while !ctx.stopped() {
        n += 1;
        let name = format!("soak{worker}-{n}.signet.test");
        let t0 = Instant::now();
        let issued = issue(&mut client, &plan, Identifier::dns(name)).await.map_err(|e| e.to_string());
        let issued = issued.and_then(|i| {
            let leaf = X509::stack_from_pem(&i.chain_pem)
                .map_err(|e| format!("the chain: {e}"))?
                .into_iter()
                .next()
                .ok_or("an empty chain")?;
            let der = leaf.to_der().map_err(|e| e.to_string())?;
            Ok((leaf, der, i.certificate_url))
        });
        ctx.record(ISSUE, t0, &issued);
        if let Ok((leaf, der, url)) = issued {
            let serial = serial_hex(&leaf);
            let _ = to_ct.send(der.clone());
            let item = Arc::new(CertItem { serial: serial.clone(), leaf, der, worker, url });
            lock(&ctx.ledger.certs).push(Arc::clone(&item));
            if n % 3 == 0 {
                ctx.pause().await;
                lock(&ctx.ledger.revoke_sent).insert(serial.clone());
                let t0 = Instant::now();
                // Reason 4: superseded.
                let revoked = client.revoke(&item.der, 4).await.map_err(|e| e.to_string());
                ctx.record(REVOKE, t0, &revoked);
                if revoked.is_ok() {
                    lock(&ctx.ledger.revoked).insert(serial);
                }
            }
        }
        ctx.pause().await;
    }
    let _ = responder.stop();
    client
}

async fn ocsp_status(ctx: &Ctx, leaf: &X509) -> Result<Status, String> {
    let der = request(leaf, &ctx.eps.issuing).map_err(|e| e.to_string())?;
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/ocsp-request"));
    let (status, body) = call(&ctx.eps.ocsp, None, Method::POST, headers, Bytes::from(der)).await?;
    if status != 200 {
        return Err(format!("OCSP: HTTP {status}"));
    }
    let answer = check_response(&body, leaf, &ctx.eps.issuing).map_err(|e| format!("OCSP: {e}"))?;
    Ok(answer.status)
}

/// OCSP requests for the certificates issued, in turn.
async fn ocsp_load(ctx: Arc<Ctx>) {
    let mut i = 0usize;
    while !ctx.stopped() {
        let cert = {
            let certs = lock(&ctx.ledger.certs);
            (!certs.is_empty()).then(|| Arc::clone(&certs[i % certs.len()]))
        };
        i = i.wrapping_add(7);
        let Some(cert) = cert else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let was_revoked = lock(&ctx.ledger.revoked).contains(&cert.serial);
        let t0 = Instant::now();
        let status = ocsp_status(&ctx, &cert.leaf).await;
        if was_revoked && matches!(status, Ok(Status::Good)) {
            ctx.ledger.stale_good.fetch_add(1, Ordering::Relaxed);
        }
        ctx.record(
            OCSP,
            t0,
            &status.and_then(|s| if matches!(s, Status::Unknown) { Err("OCSP: unknown".into()) } else { Ok(()) }),
        );
        ctx.pause().await;
    }
}

/// Sends each certificate issued to ctlogd's add-chain (with the issuing CA).
async fn ct_writer(ctx: Arc<Ctx>, mut from_issuer: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let target = ctx.eps.ct.rel("ct/v1/add-chain");
    while !ctx.stopped() {
        let leaf = match tokio::time::timeout(Duration::from_millis(500), from_issuer.recv()).await {
            Ok(Some(leaf)) => leaf,
            Ok(None) => return,
            Err(_) => continue,
        };
        let body =
            serde_json::json!({"chain": [STANDARD.encode(&leaf), STANDARD.encode(&ctx.eps.issuing_der)]}).to_string();
        let t0 = Instant::now();
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let answer = call(&target, None, Method::POST, headers, Bytes::from(body)).await.and_then(|(status, body)| {
            if status != 200 {
                return Err(format!("add-chain: HTTP {status}: {}", snippet(&body)));
            }
            let sct = serde_json::from_slice::<AddChainResponse>(&body)
                .map_err(|e| format!("add-chain: {e}"))?
                .to_sct()
                .map_err(|e| format!("add-chain: {e}"))?;
            ctx.eps.ct_key.verify_sct(&sct, &SignedEntry::X509(leaf.clone())).map_err(|e| format!("the SCT: {e}"))?;
            let index = signet_bench::ct::leaf_index(&sct.extensions).map_err(|e| format!("the SCT: {e}"))?;
            Ok((sct, index))
        });
        ctx.record(CT_ADD, t0, &answer);
        if let Ok((sct, index)) = answer {
            lock(&ctx.ledger.scts).push(Arc::new(SctItem { leaf, sct, index }));
        }
        ctx.pause().await;
    }
}

/// The log's tree head, its signature verified.
async fn sth(ctx: &Ctx) -> Result<TreeHead, String> {
    let body = get_ok(&ctx.eps.ct.rel("ct/v1/get-sth")).await?;
    let sth: GetSthResponse = serde_json::from_slice(&body).map_err(|e| format!("get-sth: {e}"))?;
    let (head, sig) = sth.tree_head().map_err(|e| format!("get-sth: {e}"))?;
    ctx.eps.ct_key.verify_tree_head(&head, &sig).map_err(|e| format!("get-sth: {e}"))?;
    Ok(head)
}

/// get-sth, and get-entries of the newest few entries.
async fn ct_reader(ctx: Arc<Ctx>) {
    while !ctx.stopped() {
        let t0 = Instant::now();
        let head = sth(&ctx).await;
        ctx.record(CT_READ, t0, &head);
        if let Ok(head) = head {
            if head.tree_size > 0 {
                let start = head.tree_size.saturating_sub(8);
                let t0 = Instant::now();
                let path = format!("ct/v1/get-entries?start={start}&end={}", head.tree_size - 1);
                let entries = get_ok(&ctx.eps.ct.rel(&path)).await.and_then(|b| {
                    serde_json::from_slice::<GetEntriesResponse>(&b).map_err(|e| format!("get-entries: {e}"))
                });
                ctx.record(CT_READ, t0, &entries);
            }
        }
        ctx.pause().await;
    }
}

/// client_credentials tokens for the demo client.
async fn token_cc(ctx: Arc<Ctx>) {
    let auth = match ClientAuth::basic("demo", &ctx.eps.demo_secret) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: the demo client's credentials: {e}");
            return;
        }
    };
    let target = ctx.eps.token.rel("token");
    while !ctx.stopped() {
        let t0 = Instant::now();
        let mut headers = HeaderMap::new();
        let result = match auth.apply("grant_type=client_credentials&scope=demo.read", &mut headers) {
            Ok(form) => post_form(&target, headers, form).await.and_then(|(status, body)| match status {
                200 => Ok(()),
                s => Err(format!("token: HTTP {s}: {}", snippet(&body))),
            }),
            Err(e) => Err(e.to_string()),
        };
        ctx.record(TOKEN_CC, t0, &result);
        ctx.pause().await;
    }
}

/// One refresh: the new refresh token.
async fn refresh_once(ctx: &Ctx, refresh: &str) -> Result<String, String> {
    let form = format!("grant_type=refresh_token&refresh_token={}&client_id=demo-web", form_encode(refresh));
    let (status, body) = post_form(&ctx.eps.token.rel("token"), HeaderMap::new(), form).await?;
    if status != 200 {
        return Err(format!("refresh: HTTP {status}: {}", snippet(&body)));
    }
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("refresh: {e}"))?;
    v["refresh_token"].as_str().map(str::to_owned).ok_or_else(|| "refresh: no refresh_token".to_owned())
}

/// Refreshes `family` (locked), retrying a failure within the grace period;
/// sets it aside if that runs out. Each attempt is counted.
async fn refresh_family(ctx: &Ctx, family: &mut Family) -> Result<(), String> {
    let first = Instant::now();
    loop {
        let t0 = Instant::now();
        let result = refresh_once(ctx, &family.refresh).await;
        ctx.record(REFRESH, t0, &result);
        match result {
            Ok(new) => {
                family.refresh = new;
                family.rotations += 1;
                return Ok(());
            }
            Err(e) if first.elapsed() >= REFRESH_RETRY => {
                family.set_aside = Some(e.clone());
                return Err(e);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Refresh token families of the demo user: a code flow starts one, then it is rotated.
async fn refresher(ctx: Arc<Ctx>) {
    let flow = CodeFlow {
        host: match HeaderValue::from_str(&ctx.eps.token.host) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("soak: tokend's host: {e}");
                return;
            }
        },
        base_path: ctx.eps.token.path.trim_end_matches('/').to_owned(),
        client_id: "demo-web".into(),
        redirect_uri: "http://127.0.0.1/callback".into(),
        user: "demo".into(),
        password: ctx.eps.demo_password.clone(),
        scope: "openid demo.read".into(),
    };
    let mut session: Option<String> = None;
    let mut current: Option<Arc<tokio::sync::Mutex<Family>>> = None;
    let mut uses = 0u64;
    while !ctx.stopped() {
        if current.is_none() || uses % 10 == 0 {
            // A new family: sign in (once, or again if the flow failed), then the code flow.
            let t0 = Instant::now();
            let started = async {
                let mut tx = connect(ctx.eps.token.addr, None).await.map_err(|e| format!("connect: {e:#}"))?;
                if session.is_none() {
                    session = Some(flow.sign_in(&mut tx).await.map_err(|e| format!("sign-in: {e:#}"))?);
                    tx = connect(ctx.eps.token.addr, None).await.map_err(|e| format!("connect: {e:#}"))?;
                }
                let s = session.as_deref().unwrap_or_default();
                let v = tokio::time::timeout(REQUEST_TIMEOUT, flow.flow_tokens(&mut tx, s))
                    .await
                    .map_err(|_| "timeout".to_owned())??;
                v["refresh_token"].as_str().map(str::to_owned).ok_or_else(|| "code flow: no refresh_token".to_owned())
            }
            .await;
            ctx.record(REFRESH, t0, &started);
            match started {
                Ok(refresh) => {
                    let f = Arc::new(tokio::sync::Mutex::new(Family { refresh, set_aside: None, rotations: 0 }));
                    lock(&ctx.ledger.families).push(Arc::clone(&f));
                    current = Some(f);
                    uses = 1;
                }
                Err(_) => {
                    session = None;
                    ctx.pause().await;
                    continue;
                }
            }
        }
        let mut lost_track = false;
        if let Some(f) = &current {
            let mut family = f.lock().await;
            lost_track = family.set_aside.is_some() || refresh_family(&ctx, &mut family).await.is_err();
        }
        if lost_track {
            current = None;
        }
        uses += 1;
        ctx.pause().await;
    }
}

/// probed's status API and metrics.
async fn probe_reader(ctx: Arc<Ctx>) {
    let api = ctx.eps.probed.rel("api/checks");
    let metrics = ctx.eps.probed.rel("metrics");
    while !ctx.stopped() {
        for t in [&api, &metrics] {
            let t0 = Instant::now();
            let r = get_ok(t).await;
            ctx.record(PROBE, t0, &r);
        }
        ctx.pause().await;
    }
}

// ---------------------------------------------------------------------------
// Verification

#[derive(Default)]
struct Verified {
    certs: u64,
    revocations: u64,
    scts: u64,
    families: u64,
    families_set_aside: u64,
    downloads: u64,
    missing: Vec<String>,
}

impl Verified {
    fn total(&self) -> u64 {
        self.certs + self.revocations + self.scts + self.families + self.downloads
    }
}

/// A check, tried three times a second apart (a verification must not fail
/// on one slow answer).
async fn retried<T, F, Fut>(mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut last = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What was acknowledged up to now.
struct Snapshot {
    certs: Vec<Arc<CertItem>>,
    revoked: HashSet<String>,
    scts: Vec<Arc<SctItem>>,
    families: Vec<Arc<tokio::sync::Mutex<Family>>>,
}

fn snapshot(ctx: &Ctx) -> Snapshot {
    Snapshot {
        certs: lock(&ctx.ledger.certs).clone(),
        revoked: lock(&ctx.ledger.revoked).clone(),
        scts: lock(&ctx.ledger.scts).clone(),
        families: lock(&ctx.ledger.families).clone(),
    }
}

async fn verify(ctx: &Ctx, snap: &Snapshot) -> Verified {
    let mut v = Verified::default();
    // Certificates and revocations: ocspd knows each one.
    let results: Vec<(bool, Result<(), String>)> = stream::iter(snap.certs.iter().cloned())
        .map(|cert| async move {
            let acked_revoked = snap.revoked.contains(&cert.serial);
            let result = retried(|| ocsp_status(ctx, &cert.leaf)).await.and_then(|status| match status {
                Status::Good if !acked_revoked => Ok(()),
                Status::Revoked { .. } if acked_revoked => Ok(()),
                // A revocation sent later (or whose answer was lost) may have taken effect.
                Status::Revoked { .. } if lock(&ctx.ledger.revoke_sent).contains(&cert.serial) => Ok(()),
                other => Err(format!("certificate {}: OCSP says {}", cert.serial, other.name())),
            });
            (acked_revoked, result)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for (revoked, r) in results {
        match r {
            Ok(()) if revoked => v.revocations += 1,
            Ok(()) => v.certs += 1,
            Err(e) => v.missing.push(e),
        }
    }
    // SCTs: each entry at its leaf_index, with an inclusion proof to a signed tree head.
    if !snap.scts.is_empty() {
        let need = snap.scts.iter().map(|s| s.index).max().unwrap_or(0) + 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        let head = loop {
            match sth(ctx).await {
                Ok(h) if h.tree_size >= need => break Ok(h),
                Ok(h) if Instant::now() >= deadline => {
                    break Err(format!("the log's tree has {} entries, SCTs name index {}", h.tree_size, need - 1))
                }
                Err(e) if Instant::now() >= deadline => break Err(e),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        match head {
            Err(e) => v.missing.push(format!("CT: {e}")),
            Ok(head) => {
                let results: Vec<Result<(), String>> = stream::iter(snap.scts.iter().cloned())
                    .map(|item| async move { retried(|| check_sct(ctx, &item, &head)).await })
                    .buffer_unordered(8)
                    .collect()
                    .await;
                for r in results {
                    match r {
                        Ok(()) => v.scts += 1,
                        Err(e) => v.missing.push(e),
                    }
                }
            }
        }
    }
    // Refresh families: the newest token of each still refreshes.
    for f in &snap.families {
        let mut family = f.lock().await;
        if family.set_aside.is_some() {
            v.families_set_aside += 1;
            continue;
        }
        match refresh_family(ctx, &mut family).await {
            Ok(()) => v.families += 1,
            Err(e) => v.missing.push(format!("refresh family after {} rotations: {e}", family.rotations)),
        }
    }
    v
}

async fn check_sct(ctx: &Ctx, item: &SctItem, head: &TreeHead) -> Result<(), String> {
    let i = item.index;
    let body = get_ok(&ctx.eps.ct.rel(&format!("ct/v1/get-entries?start={i}&end={i}"))).await?;
    let entries: GetEntriesResponse = serde_json::from_slice(&body).map_err(|e| format!("get-entries: {e}"))?;
    let entry = entries.entries.first().ok_or_else(|| format!("CT entry {i}: get-entries gave nothing"))?;
    let leaf_input = STANDARD.decode(&entry.leaf_input).map_err(|_| format!("CT entry {i}: leaf_input"))?;
    let logged = TimestampedEntry::from_merkle_tree_leaf(&leaf_input).map_err(|e| format!("CT entry {i}: {e}"))?;
    if logged.entry != SignedEntry::X509(item.leaf.clone()) || logged.timestamp != item.sct.timestamp {
        return Err(format!("CT entry {i}: not the certificate (or timestamp) its SCT was for"));
    }
    let hash = signet_ct::merkle::leaf_hash(&leaf_input);
    let path =
        format!("ct/v1/get-proof-by-hash?hash={}&tree_size={}", form_encode(&STANDARD.encode(hash)), head.tree_size);
    let body = get_ok(&ctx.eps.ct.rel(&path)).await?;
    let proof: GetProofByHashResponse = serde_json::from_slice(&body).map_err(|e| format!("get-proof-by-hash: {e}"))?;
    if proof.leaf_index != i {
        return Err(format!("CT entry {i}: get-proof-by-hash says index {}", proof.leaf_index));
    }
    let path: Vec<signet_ct::Hash> = proof
        .audit_path
        .iter()
        .map(|h| STANDARD.decode(h).ok().and_then(|b| b.try_into().ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("CT entry {i}: a malformed audit path"))?;
    signet_ct::merkle::proof::verify_inclusion(i, head.tree_size, &hash, &path, &head.root_hash)
        .map_err(|e| format!("CT entry {i}: inclusion proof: {e}"))
}

/// Each certificate downloaded again from acmed by the account that ordered it.
async fn verify_downloads(certs: &[Arc<CertItem>], clients: &mut HashMap<usize, Client>, v: &mut Verified) {
    for cert in certs {
        let Some(client) = clients.get_mut(&cert.worker) else { continue };
        let mut got = Err(String::new());
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            got = client.download(&cert.url).await.map(|b| b.to_vec()).map_err(|e| e.to_string());
            if got.is_ok() {
                break;
            }
        }
        match got.and_then(|pem| {
            let leaf = X509::stack_from_pem(&pem).ok().and_then(|c| c.into_iter().next()).ok_or("not a chain")?;
            leaf.to_der().map_err(|e| e.to_string())
        }) {
            Ok(der) if der == cert.der => v.downloads += 1,
            Ok(_) => v.missing.push(format!("certificate {}: acmed serves another certificate", cert.serial)),
            Err(e) => v.missing.push(format!("certificate {}: acmed: {e}", cert.serial)),
        }
    }
}

// ---------------------------------------------------------------------------
// The run

struct Kill {
    at: f64,
    daemon: String,
    back_after: f64,
    /// Daemons that did not recover by themselves after signd's restart (restarted by the harness).
    not_reconnected: Vec<String>,
    verified: Verified,
    verify_seconds: f64,
}

async fn run(args: Args) -> anyhow::Result<bool> {
    let state = std::fs::canonicalize(&args.state_dir)
        .with_context(|| format!("the state directory {}", args.state_dir.display()))?;
    let eps = Endpoints::read(&state)?;
    let mut stack = Stack::new(&eps)?;
    for name in &args.kill {
        stack.get(name)?;
    }
    println!("soak: starting the stack from {}", state.display());
    stack.start_all(&eps).await?;
    let acme_tls = Arc::clone(&stack.tls);
    let ctx = Arc::new(Ctx {
        eps,
        counters: Default::default(),
        windows: Windows::default(),
        ledger: Ledger {
            certs: Mutex::default(),
            revoked: Mutex::default(),
            revoke_sent: Mutex::default(),
            scts: Mutex::default(),
            families: Mutex::default(),
            stale_good: AtomicU64::new(0),
        },
        stop: AtomicBool::new(false),
        pause: Duration::from_millis(args.pause_ms),
        started: Instant::now(),
    });
    stack.sample(0.0);
    println!(
        "soak: load for {} s, a SIGKILL every {} s (in turn: {})",
        args.duration,
        args.kill_every,
        args.kill.join(", ")
    );

    let (to_ct, from_issuer) = tokio::sync::mpsc::unbounded_channel();
    let issuer_task = tokio::spawn(issuer(Arc::clone(&ctx), 0, Arc::clone(&acme_tls), to_ct));
    let others = vec![
        tokio::spawn(ocsp_load(Arc::clone(&ctx))),
        tokio::spawn(ct_writer(Arc::clone(&ctx), from_issuer)),
        tokio::spawn(ct_reader(Arc::clone(&ctx))),
        tokio::spawn(token_cc(Arc::clone(&ctx))),
        tokio::spawn(refresher(Arc::clone(&ctx))),
        tokio::spawn(probe_reader(Arc::clone(&ctx))),
    ];

    let mut kills: Vec<Kill> = Vec::new();
    let mut failed_restarts: Vec<String> = Vec::new();
    let end = ctx.started + Duration::from_secs(args.duration);
    let mut next_kill = ctx.started + Duration::from_secs(args.kill_every);
    let mut turn = 0usize;
    loop {
        let now = Instant::now();
        if now >= end || ctx.stopped() {
            break;
        }
        if now < next_kill {
            tokio::time::sleep(Duration::from_secs(1).min(next_kill - now).min(end - now)).await;
            stack.sample(secs(&ctx));
            continue;
        }
        // The kill.
        let name = args.kill[turn % args.kill.len()].clone();
        turn += 1;
        stack.sample(secs(&ctx));
        let snap = snapshot(&ctx);
        let killed_at = Instant::now();
        let at = secs(&ctx);
        let window = {
            let mut w = lock(&ctx.windows.0);
            w.push((killed_at, None));
            w.len() - 1
        };
        let tls = Arc::clone(&stack.tls);
        let daemon = stack.get(&name)?;
        daemon.kill9();
        println!("soak: {at:7.1} s  SIGKILL {name}");
        let restarted = match daemon.spawn(&state) {
            Ok(()) => daemon.wait_healthy(&tls, &state, START_TIMEOUT).await,
            Err(e) => Err(e),
        };
        let back_after = killed_at.elapsed().as_secs_f64();
        if let Err(e) = restarted {
            eprintln!("soak: {name} did not come back: {e:#}");
            failed_restarts.push(format!("{name}: {e:#}"));
            break;
        }
        // After signd: the daemons using it must recover by themselves.
        let mut not_reconnected = Vec::new();
        if name == "signd" {
            for i in 0..stack.daemons.len() {
                if !stack.daemons[i].uses_signd {
                    continue;
                }
                let d = &mut stack.daemons[i];
                if d.wait_healthy(&tls, &state, Duration::from_secs(20)).await.is_err() {
                    eprintln!("soak: finding: {} did not recover after signd's restart; restarting it", d.name);
                    not_reconnected.push(d.name.to_owned());
                    d.kill9();
                    let back = match d.spawn(&state) {
                        Ok(()) => d.wait_healthy(&tls, &state, START_TIMEOUT).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = back {
                        failed_restarts.push(format!("{} (after signd): {e:#}", d.name));
                    }
                }
            }
        }
        println!("soak: {:7.1} s  {name} back after {back_after:.2} s", secs(&ctx));
        lock(&ctx.windows.0)[window].1 = Some(Instant::now() + WINDOW_TAIL);
        // Everything acknowledged before the kill is still there.
        let t0 = Instant::now();
        let verified = verify(&ctx, &snap).await;
        let verify_seconds = t0.elapsed().as_secs_f64();
        println!(
            "soak: {:7.1} s  verified {} items acknowledged before the kill ({} missing) in {verify_seconds:.1} s",
            secs(&ctx),
            verified.total(),
            verified.missing.len()
        );
        for m in verified.missing.iter().take(10) {
            println!("soak:   MISSING {m}");
        }
        kills.push(Kill { at, daemon: name, back_after, not_reconnected, verified, verify_seconds });
        next_kill = (killed_at + Duration::from_secs(args.kill_every)).max(Instant::now() + Duration::from_secs(1));
        if !failed_restarts.is_empty() {
            break;
        }
    }

    // The end: stop the load, then verify everything.
    ctx.stop.store(true, Ordering::Relaxed);
    let load_seconds = secs(&ctx);
    let client = issuer_task.await.ok();
    for t in others {
        let _ = t.await;
    }
    stack.sample(secs(&ctx));
    let mut final_check = Verified::default();
    let mut dup_serials = Vec::new();
    let snap = snapshot(&ctx);
    if failed_restarts.is_empty() {
        let tls = Arc::clone(&stack.tls);
        for d in &mut stack.daemons {
            if let Err(e) = d.wait_healthy(&tls, &state, START_TIMEOUT).await {
                failed_restarts.push(format!("{} at the end: {e:#}", d.name));
            }
        }
        final_check = verify(&ctx, &snap).await;
        let mut clients: HashMap<usize, Client> = client.into_iter().map(|c| (0, c)).collect();
        verify_downloads(&snap.certs, &mut clients, &mut final_check).await;
        let mut seen = HashSet::new();
        for c in &snap.certs {
            if !seen.insert(c.serial.clone()) {
                dup_serials.push(c.serial.clone());
            }
        }
    }
    stack.sample(secs(&ctx));
    stack.stop_all();

    let report = report(&ctx, &stack, &kills, &final_check, &dup_serials, &failed_restarts, load_seconds, &args);
    print!("{report}");
    let lost = kills.iter().map(|k| k.verified.missing.len()).sum::<usize>() + final_check.missing.len();
    Ok(lost == 0 && dup_serials.is_empty() && failed_restarts.is_empty())
}

#[allow(clippy::too_many_arguments)]
fn report(
    ctx: &Ctx,
    stack: &Stack,
    kills: &[Kill],
    fin: &Verified,
    dups: &[String],
    failed_restarts: &[String],
    load_seconds: f64,
    args: &Args,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n== soak: {load_seconds:.0} s of load, {} kills (every {} s), pause {} ms",
        kills.len(),
        args.kill_every,
        args.pause_ms
    );
    let _ = writeln!(s, "\nrequests            total       ok  failed in kill window  failed outside");
    let mut outside_total = 0;
    for (i, name) in KINDS.iter().enumerate() {
        let c = &ctx.counters[i];
        let outside = c.failed_outside.load(Ordering::Relaxed);
        outside_total += outside;
        let _ = writeln!(
            s,
            "{name:<15} {:>9} {:>8} {:>22} {:>15}",
            c.requests.load(Ordering::Relaxed),
            c.ok.load(Ordering::Relaxed),
            c.failed_in_window.load(Ordering::Relaxed),
            outside
        );
    }
    if outside_total > 0 {
        let _ = writeln!(s, "\nfailures outside the kill windows:");
        for (i, name) in KINDS.iter().enumerate() {
            for (e, n) in lock(&ctx.counters[i].outside).iter() {
                let _ = writeln!(s, "  {name}: {n} x {e}");
            }
        }
    }
    let _ = writeln!(
        s,
        "\nOCSP answers 'good' for a certificate whose revocation was already acknowledged: {}",
        ctx.ledger.stale_good.load(Ordering::Relaxed)
    );
    let _ =
        writeln!(s, "\nkill  at (s)  daemon   back (s)  verified: certs revoked  SCTs families  missing  verify (s)");
    for (n, k) in kills.iter().enumerate() {
        let v = &k.verified;
        let _ = writeln!(
            s,
            "{:>4} {:>7.1}  {:<8} {:>8.2}  {:>15} {:>7} {:>5} {:>8} {:>8} {:>11.1}{}",
            n + 1,
            k.at,
            k.daemon,
            k.back_after,
            v.certs,
            v.revocations,
            v.scts,
            v.families,
            v.missing.len(),
            k.verify_seconds,
            if k.not_reconnected.is_empty() {
                String::new()
            } else {
                format!("  (did not recover after signd, restarted: {})", k.not_reconnected.join(", "))
            }
        );
    }
    let _ = writeln!(
        s,
        "\nat the end: {} certificates good and {} revoked in OCSP, {} downloaded again from acmed, {} SCT'd entries \
         with inclusion proofs, {} refresh families refreshing ({} set aside: outcome unknown past the grace period); \
         missing: {}; duplicate serials: {}",
        fin.certs,
        fin.revocations,
        fin.downloads,
        fin.scts,
        fin.families,
        fin.families_set_aside,
        fin.missing.len(),
        dups.len()
    );
    for m in fin.missing.iter().take(20) {
        let _ = writeln!(s, "  MISSING {m}");
    }
    for d in dups.iter().take(20) {
        let _ = writeln!(s, "  DUPLICATE serial {d}");
    }
    for f in failed_restarts {
        let _ = writeln!(s, "  NOT BACK {f}");
    }
    let _ = writeln!(s, "\nRSS (VmRSS, MB)  start   end   per process life (first -> last sample)");
    for d in &stack.daemons {
        let mb = |kb: u64| kb as f64 / 1024.0;
        let start = d.lives.first().and_then(|l| l.first).map_or(0.0, |(_, kb)| mb(kb));
        let end = d.lives.last().and_then(|l| l.last).map_or(0.0, |(_, kb)| mb(kb));
        let lives: Vec<String> = d
            .lives
            .iter()
            .filter_map(|l| Some((l.first?, l.last?)))
            .map(|((t0, a), (t1, b))| format!("{:.1}->{:.1} ({t0:.0}-{t1:.0} s)", mb(a), mb(b)))
            .collect();
        let _ = writeln!(s, "{:<15} {start:>6.1} {end:>5.1}   {}", d.name, lives.join(", "));
    }
    let lost = kills.iter().map(|k| k.verified.missing.len()).sum::<usize>() + fin.missing.len();
    let verdict = if lost == 0 && dups.is_empty() && failed_restarts.is_empty() { "PASS" } else { "FAIL" };
    let _ = writeln!(
        s,
        "\nsoak: {verdict}: {lost} acknowledged items missing, {} duplicate serials, {} daemons not back",
        dups.len(),
        failed_restarts.len()
    );
    s
}
