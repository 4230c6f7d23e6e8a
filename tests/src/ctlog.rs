//! A real CT log for tests: `ctlogd` serving one or more logs on a free
//! loopback port, each log's P-256 key in signd under `[logs.<name>]`, its
//! tiles in a directory or in an S3-compatible bucket, accepting chains to the
//! given roots; and what tests do with it:
//!
//! - [`CtPki`]: a test root that issues certificates and precertificates
//!   (directly, or through a Precertificate Signing Certificate), each with
//!   the entry its SCT must sign, built independently of the log's code;
//! - [`Ctlogd::submit`], [`submit_until`] (concurrent writers under load),
//!   [`Ctlogd::check_acknowledged`] (every acknowledged entry at its SCT's
//!   `leaf_index`, the SCT verifying over it) and [`Ctlogd::verify_tree`]
//!   (`signetctl ct verify` over HTTP).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use der::{Decode, Encode};
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use openssl::asn1::{Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName, SubjectKeyIdentifier,
};
use openssl::x509::{X509Extension, X509NameBuilder, X509};
use signet_ct::rfc6962::api::{add_chain_body, AddChainResponse, GetEntriesResponse, GetSthResponse, LeafEntry};
use signet_ct::staticct::parse_leaf_index;
use signet_ct::{LogKey, Sct, SignedEntry, TimestampedEntry, TreeHead};

use crate::pki::free_port;
use crate::{bin, SigndProcess};

/// One log of a [`Ctlogd`].
#[derive(Clone, Debug)]
pub struct LogSpec {
    /// Its name: the URL path segment, `[logs.<name>]` in both configs, key `ct-<name>` in signd.
    pub name: String,
    /// The NotAfter interval it accepts, `[start, end)` in Unix seconds.
    pub window: Option<(i64, i64)>,
    /// Where its tiles go.
    pub storage: LogStorage,
}

impl LogSpec {
    /// A log with tiles in a directory and no temporal interval.
    pub fn new(name: &str) -> Self {
        Self { name: name.into(), window: None, storage: LogStorage::Dir }
    }

    /// This log as a temporal shard: it accepts NotAfter in `[start, end)` (Unix seconds).
    pub fn window(mut self, start: i64, end: i64) -> Self {
        self.window = Some((start, end));
        self
    }

    /// This log with its tiles in an S3-compatible bucket.
    pub fn s3(mut self, s3: S3Target) -> Self {
        self.storage = LogStorage::S3(s3);
        self
    }
}

/// Where a log's tiles go.
#[derive(Clone, Debug)]
pub enum LogStorage {
    /// A directory beside ctlogd's config.
    Dir,
    /// An S3-compatible bucket.
    S3(S3Target),
}

/// An S3-compatible bucket (a versitygw the test started).
#[derive(Clone, Debug)]
pub struct S3Target {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The access key ID.
    pub access_key_id: String,
    /// The secret (written to a file for ctlogd's `secret_access_key_file`).
    pub secret_access_key: String,
    /// The log's key prefix.
    pub prefix: String,
}

/// One running log: its name and its key (from signd).
#[derive(Clone, Debug)]
pub struct LogInfo {
    /// The log's name.
    pub name: String,
    /// Its public key, DER SubjectPublicKeyInfo, as signd gives it.
    pub public_key: Vec<u8>,
}

/// ctlogd serving one or more logs.
pub struct Ctlogd {
    /// ctlogd, while running.
    pub child: Option<Child>,
    /// ctlogd's HTTP address.
    pub addr: SocketAddr,
    /// ctlogd's config file.
    pub config: PathBuf,
    /// The logs, in the order given.
    pub logs: Vec<LogInfo>,
    log_file: PathBuf,
}

/// ctlogd's `[sequencing]` in tests: batches close after 50 ms.
pub const TEST_SEQUENCING: &str = "[sequencing]\nmax_age_ms = 50\n";

impl Ctlogd {
    /// One log `name` (tiles in a directory), accepting chains to the PEM
    /// roots in `roots`; see [`Ctlogd::start_logs`].
    pub fn start(signd: &mut SigndProcess, dir: &Path, name: &str, roots: &Path) -> Ctlogd {
        Self::start_logs(signd, dir, roots, &[LogSpec::new(name)], TEST_SEQUENCING)
    }

    /// Adds a P-256 key `ct-<name>` and a `[logs.<name>]` for each log to
    /// `signd` (the test user, signd's `admin`, holds the logs' role) and
    /// restarts it; then starts ctlogd in a directory of its own under `dir`
    /// with these logs, `sequencing` (a `[sequencing]` table, or empty) and
    /// `roots`, and waits until every log serves its tree head.
    pub fn start_logs(
        signd: &mut SigndProcess,
        dir: &Path,
        roots: &Path,
        logs: &[LogSpec],
        sequencing: &str,
    ) -> Ctlogd {
        assert!(!logs.is_empty());
        let mut signd_config = std::fs::read_to_string(&signd.config).unwrap();
        for log in logs {
            let key = format!("ct-{}", log.name);
            signet_ipc::block_on(signd.client().generate_key(signd.spec(&key, signet_ipc::KeyAlgorithm::EcP256)))
                .unwrap();
            signd_config.push_str(&format!("\n[logs.{}]\nkey = \"{key}\"\nroles = [\"admin\"]\n", log.name));
        }
        std::fs::write(&signd.config, signd_config).unwrap();
        signd.restart();

        let home = dir.join(format!("ctlogd-{}", logs[0].name));
        std::fs::create_dir_all(&home).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut text = format!(
            "state_dir = {:?}\nsignd_socket = {:?}\nlisten = \"{addr}\"\nroots = [{roots:?}]\n{sequencing}\n",
            home.join("db"),
            signd.socket,
        );
        for log in logs {
            text.push_str(&format!("[logs.{}]\ndescription = \"test log {}\"\n", log.name, log.name));
            if let Some((start, end)) = log.window {
                text.push_str(&format!(
                    "not_after_start = \"{}\"\nnot_after_end = \"{}\"\n",
                    rfc3339(start),
                    rfc3339(end)
                ));
            }
            match &log.storage {
                LogStorage::Dir => {
                    text.push_str(&format!("storage = {{ dir = {:?} }}\n", home.join(format!("tiles-{}", log.name))))
                }
                LogStorage::S3(s3) => {
                    let secret = home.join(format!("s3-secret-{}", log.name));
                    std::fs::write(&secret, format!("{}\n", s3.secret_access_key)).unwrap();
                    text.push_str(&format!(
                        "storage = {{ s3 = {{ endpoint = {:?}, bucket = {:?}, access_key_id = {:?}, \
                         secret_access_key_file = {secret:?}, prefix = {:?}, allow_http = true }} }}\n",
                        s3.endpoint, s3.bucket, s3.access_key_id, s3.prefix
                    ));
                }
            }
        }
        let config = home.join("ctlogd.toml");
        std::fs::write(&config, text).unwrap();
        let infos = logs
            .iter()
            .map(|l| LogInfo {
                name: l.name.clone(),
                public_key: signet_ipc::block_on(signd.client().ct_log_public_key(&l.name)).unwrap(),
            })
            .collect();
        let mut ctlogd = Ctlogd { child: None, addr, config, logs: infos, log_file: home.join("ctlogd.log") };
        ctlogd.spawn();
        // Each log publishes the key signd holds for it.
        for log in &ctlogd.logs {
            let (status, body) = ctlogd.log_get(&log.name, "log.v3.json");
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            let meta: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(STANDARD.decode(meta["key"].as_str().unwrap()).unwrap(), log.public_key);
        }
        ctlogd
    }

    /// Starts (or restarts) ctlogd and waits until every log answers `get-sth`.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "ctlogd is running");
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_file).unwrap();
        let child =
            Command::new(bin("ctlogd")).arg("--config").arg(&self.config).stdout(Stdio::null()).stderr(stderr).spawn();
        self.child = Some(child.unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        for name in self.logs.iter().map(|l| l.name.clone()).collect::<Vec<_>>() {
            while self.try_get(&format!("/{name}/ct/v1/get-sth")).map(|(s, _)| s) != Some(200) {
                if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                    panic!("ctlogd exited ({s}): {}", self.log());
                }
                assert!(Instant::now() < deadline, "ctlogd not ready: {}", self.log());
                std::thread::sleep(Duration::from_millis(30));
            }
        }
    }

    /// SIGKILL (and reap).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, and waits (at most 30 s) for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "ctlogd ignored SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first (or only) log's name.
    pub fn name(&self) -> &str {
        &self.logs[0].name
    }

    /// The first (or only) log's RFC 6962 prefix, `http://127.0.0.1:PORT/<name>/`.
    pub fn url(&self) -> String {
        self.log_url(self.name())
    }

    /// Log `name`'s prefix, `http://127.0.0.1:PORT/<name>/`.
    pub fn log_url(&self, name: &str) -> String {
        format!("http://{}/{name}/", self.addr)
    }

    /// Log `name`'s checkpoint origin.
    pub fn origin(&self, name: &str) -> String {
        format!("{}/{name}", self.addr)
    }

    /// Log `name`'s key, as signd holds it.
    pub fn key(&self, name: &str) -> LogKey {
        let info = self.logs.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no log {name}"));
        LogKey::from_spki_der(&info.public_key).unwrap()
    }

    /// The first log's public key in base64, as log lists (and acmed's `[[ct.logs]]`) carry it.
    pub fn public_key_b64(&self) -> String {
        STANDARD.encode(&self.logs[0].public_key)
    }

    /// A GET of `path` under the first log's prefix: (status, body).
    pub fn get(&self, path: &str) -> (u16, Vec<u8>) {
        self.log_get(&self.logs[0].name.clone(), path)
    }

    /// A GET of `path` under log `name`'s prefix: (status, body).
    pub fn log_get(&self, name: &str, path: &str) -> (u16, Vec<u8>) {
        self.http_get(&format!("/{name}/{path}"))
    }

    /// A GET of the absolute `path` (`/logs.json`, `/metrics`): (status, body).
    pub fn http_get(&self, path: &str) -> (u16, Vec<u8>) {
        self.try_get(path).unwrap_or_else(|| panic!("GET {path}: no answer\n{}", self.log()))
    }

    fn try_get(&self, path: &str) -> Option<(u16, Vec<u8>)> {
        block_on_http(request(self.addr, Method::GET, path, Bytes::new())).ok().map(|(s, b)| (s, b.to_vec()))
    }

    /// Submits `entry` to log `name` (add-chain or add-pre-chain, as its kind): (status, body).
    pub fn submit(&self, name: &str, entry: &TestEntry) -> (u16, Vec<u8>) {
        let path = format!("/{name}/ct/v1/{}", entry.kind.endpoint());
        let body = Bytes::from(add_chain_body(&entry.chain));
        let (s, b) = block_on_http(request(self.addr, Method::POST, &path, body)).unwrap();
        (s, b.to_vec())
    }

    /// [`Ctlogd::submit`], with the answer's headers: (status, headers, body).
    pub fn submit_full(&self, name: &str, entry: &TestEntry) -> (u16, hyper::HeaderMap, Vec<u8>) {
        let path = format!("/{name}/ct/v1/{}", entry.kind.endpoint());
        let body = Bytes::from(add_chain_body(&entry.chain));
        let (s, h, b) = block_on_http(request_full(self.addr, Method::POST, &path, body)).unwrap();
        (s, h, b.to_vec())
    }

    /// ctlogd's own directory: its config, log, `db/` (LMDB) and `tiles-<log>/`.
    pub fn home(&self) -> PathBuf {
        self.config.parent().unwrap().to_owned()
    }

    /// [`Ctlogd::submit`], which must succeed: the SCT, checked to be log
    /// `name`'s over `entry`'s entry.
    pub fn submit_ok(&self, name: &str, entry: &TestEntry) -> Sct {
        let (status, body) = self.submit(name, entry);
        assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&body));
        let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
        self.key(name).verify_sct(&sct, &entry.entry).unwrap_or_else(|e| panic!("SCT from {name}: {e}"));
        sct
    }

    /// Log `name`'s tree head from `get-sth`, its signature verified.
    pub fn sth(&self, name: &str) -> (TreeHead, GetSthResponse) {
        let (status, body) = self.log_get(name, "ct/v1/get-sth");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let sth: GetSthResponse = serde_json::from_slice(&body).unwrap();
        let (head, sig) = sth.tree_head().unwrap();
        self.key(name).verify_tree_head(&head, &sig).unwrap();
        (head, sth)
    }

    /// Waits (at most 10 s) until log `name`'s tree head has at least `size` entries.
    pub fn wait_for_size(&self, name: &str, size: u64) -> TreeHead {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (head, _) = self.sth(name);
            if head.tree_size >= size {
                return head;
            }
            assert!(Instant::now() < deadline, "{name}: tree size {} < {size}:\n{}", head.tree_size, self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every entry of log `name`'s published tree, through `get-entries`.
    pub fn entries(&self, name: &str, size: u64) -> Vec<LeafEntry> {
        let mut out: Vec<LeafEntry> = Vec::with_capacity(size as usize);
        while (out.len() as u64) < size {
            let start = out.len() as u64;
            let (status, body) = self.log_get(name, &format!("ct/v1/get-entries?start={start}&end={}", size - 1));
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            let page: GetEntriesResponse = serde_json::from_slice(&body).unwrap();
            assert!(!page.entries.is_empty(), "get-entries from {start} returned nothing");
            out.extend(page.entries);
        }
        out
    }

    /// Every acknowledged submission (`acked`: an index into `entries` and
    /// the SCT it got) is in log `name`'s published tree at the index its
    /// SCT's `leaf_index` names: the entry there is the one the SCT was for
    /// (for a precertificate, the submitted precertificate is its extra data),
    /// with the SCT's timestamp and extensions, and the SCT verifies with the
    /// log's key over it. Returns the tree head the check used.
    pub fn check_acknowledged(&self, name: &str, entries: &[TestEntry], acked: &[(usize, Sct)]) -> TreeHead {
        let key = self.key(name);
        let (head, _) = self.sth(name);
        let logged = self.entries(name, head.tree_size);
        for (i, sct) in acked {
            let want = &entries[*i];
            key.verify_sct(sct, &want.entry).unwrap_or_else(|e| panic!("SCT of entry {i}: {e}"));
            let index = parse_leaf_index(&sct.extensions).unwrap();
            assert!(index < head.tree_size, "entry {i}: leaf_index {index} beyond the tree ({})", head.tree_size);
            let at = &logged[index as usize];
            let leaf = TimestampedEntry::from_merkle_tree_leaf(&STANDARD.decode(&at.leaf_input).unwrap()).unwrap();
            assert_eq!(leaf.entry, want.entry, "entry {i}: another entry at index {index}");
            assert_eq!(leaf.timestamp, sct.timestamp, "entry {i}: another timestamp at index {index}");
            assert_eq!(leaf.extensions, sct.extensions, "entry {i}: other extensions at index {index}");
            if want.kind == Kind::PreChain {
                // extra_data: the precertificate (u24 length, DER), then its chain.
                let extra = STANDARD.decode(&at.extra_data).unwrap();
                let len = usize::from(extra[0]) << 16 | usize::from(extra[1]) << 8 | usize::from(extra[2]);
                assert_eq!(&extra[3..3 + len], &want.chain[0][..], "entry {i}: another precertificate logged");
            }
        }
        head
    }

    /// `signetctl ct verify` of log `name` over HTTP (every tile re-hashed,
    /// every entry, leaf index and issuer checked up to the checkpoint, whose
    /// signature it verifies): must pass; the number of entries it verified.
    pub fn verify_tree(&self, name: &str) -> u64 {
        let out = Command::new(bin("signetctl"))
            .args(["ct", "verify", "--log", &self.log_url(name)])
            .env_remove("SIGNET_CT_URL")
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "signetctl ct verify {name}: {stdout}{stderr}");
        let line = stdout.lines().find(|l| l.starts_with("verified ")).unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// ctlogd's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }
}

impl Drop for Ctlogd {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Unix seconds as RFC 3339, as ctlogd's config takes them.
pub fn rfc3339(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

// --- HTTP ------------------------------------------------------------------

/// Runs an HTTP exchange on a runtime of its own (the harness is synchronous).
pub fn block_on_http<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// One HTTP/1.1 request on a new connection: (status, body).
pub async fn request(addr: SocketAddr, method: Method, path: &str, body: Bytes) -> std::io::Result<(u16, Bytes)> {
    request_full(addr, method, path, body).await.map(|(s, _, b)| (s, b))
}

/// [`request`], with the answer's headers: (status, headers, body).
pub async fn request_full(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Bytes,
) -> std::io::Result<(u16, hyper::HeaderMap, Bytes)> {
    let io = |e: hyper::Error| std::io::Error::other(e);
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(io)?;
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let resp = sender.send_request(req).await.map_err(io)?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.map_err(io)?.to_bytes();
    Ok((status, headers, body))
}

/// Submits `entries` to log `log` from `writers` concurrent tasks (each
/// entry once, in order) until `stop` or the end of the list, returning each
/// acknowledged entry's index and SCT. Answers other than 200 and broken
/// connections (a kill) are not acknowledgements: nothing was promised.
pub fn submit_until(
    addr: SocketAddr,
    log: &str,
    entries: Arc<Vec<TestEntry>>,
    writers: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(usize, Sct)>> {
    let log = log.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let next = Arc::new(AtomicUsize::new(0));
            let acked = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for _ in 0..writers {
                let (entries, next, acked, stop, log) =
                    (entries.clone(), next.clone(), acked.clone(), stop.clone(), log.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(e) = entries.get(i) else { return };
                        let path = format!("/{log}/ct/v1/{}", e.kind.endpoint());
                        let body = Bytes::from(add_chain_body(&e.chain));
                        match request(addr, Method::POST, &path, body).await {
                            Ok((200, body)) => {
                                let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
                                acked.lock().unwrap().push((i, sct));
                            }
                            Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let acked = std::mem::take(&mut *acked.lock().unwrap());
            acked
        })
    })
}

// --- Test chains -----------------------------------------------------------

/// How an entry is submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `add-chain`: a certificate.
    Chain,
    /// `add-pre-chain`: a precertificate.
    PreChain,
}

impl Kind {
    /// The endpoint under `ct/v1/`.
    pub fn endpoint(self) -> &'static str {
        match self {
            Kind::Chain => "add-chain",
            Kind::PreChain => "add-pre-chain",
        }
    }
}

/// A chain to submit and the entry its SCT must sign.
#[derive(Clone, Debug)]
pub struct TestEntry {
    /// add-chain or add-pre-chain.
    pub kind: Kind,
    /// The submitted chain, leaf first (DER).
    pub chain: Vec<Vec<u8>>,
    /// The entry: the certificate, or, for a precertificate, the key hash of
    /// the CA that signs the final certificate and the TBS of that final
    /// certificate (made here with the same fields, not derived from the
    /// precertificate).
    pub entry: SignedEntry,
}

/// A test root (P-256) that issues certificates and precertificates directly,
/// and a Precertificate Signing Certificate (RFC 6962 §3.1) it certified.
pub struct CtPki {
    /// The root.
    pub root: X509,
    root_key: PKey<Private>,
    psc: X509,
    psc_key: PKey<Private>,
    leaf_key: PKey<Private>,
    not_before: i64,
}

fn p256() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// Who signs a certificate [`CtPki`] makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Signer {
    Root,
    Psc,
}

impl CtPki {
    /// A root named `CN=<name>`, ten years, with a subject key identifier.
    pub fn new(name: &str) -> Self {
        let root_key = p256();
        let mut n = X509NameBuilder::new().unwrap();
        n.append_entry_by_text("CN", name).unwrap();
        let n = n.build();
        let now = unix_now();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&n).unwrap();
        b.set_issuer_name(&n).unwrap();
        b.set_pubkey(&root_key).unwrap();
        b.set_not_before(&Asn1Time::from_unix(now - 86_400).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::from_unix(now + 3650 * 86_400).unwrap()).unwrap();
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
        b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build().unwrap()).unwrap();
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None)).unwrap();
        b.append_extension(ski).unwrap();
        b.sign(&root_key, MessageDigest::sha256()).unwrap();
        let root = b.build();

        let psc_key = p256();
        let mut pn = X509NameBuilder::new().unwrap();
        pn.append_entry_by_text("CN", &format!("{name} Precertificate Signing")).unwrap();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(2).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&pn.build()).unwrap();
        b.set_issuer_name(root.subject_name()).unwrap();
        b.set_pubkey(&psc_key).unwrap();
        b.set_not_before(&Asn1Time::from_unix(now - 86_400).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::from_unix(now + 3650 * 86_400).unwrap()).unwrap();
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
        let mut eku = ExtendedKeyUsage::new();
        eku.other("1.3.6.1.4.1.11129.2.4.4");
        b.append_extension(eku.build().unwrap()).unwrap();
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(Some(&root), None)).unwrap();
        b.append_extension(ski).unwrap();
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&root), None)).unwrap();
        b.append_extension(aki).unwrap();
        b.sign(&root_key, MessageDigest::sha256()).unwrap();
        let psc = b.build();
        Self { root, root_key, psc, psc_key, leaf_key: p256(), not_before: now - 3600 }
    }

    /// The root in PEM, for ctlogd's `roots`.
    pub fn root_pem(&self) -> Vec<u8> {
        self.root.to_pem().unwrap()
    }

    /// Writes the root's PEM to `path`; returns `path`.
    pub fn write_root(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.root_pem()).unwrap();
        path.to_path_buf()
    }

    /// Certificate number `n` (serial and name), valid from an hour ago to
    /// `not_after` (Unix seconds), for `add-chain`: `[leaf, root]`.
    pub fn cert(&self, n: u32, not_after: i64) -> TestEntry {
        let leaf = self.build(n, not_after, Signer::Root, false).to_der().unwrap();
        TestEntry {
            kind: Kind::Chain,
            chain: vec![leaf.clone(), self.root.to_der().unwrap()],
            entry: SignedEntry::X509(leaf),
        }
    }

    /// Precertificate number `n`, for `add-pre-chain`: signed by the root
    /// (`[precert, root]`), or with `via_psc` by the Precertificate Signing
    /// Certificate (`[precert, PSC, root]`). The entry is the final
    /// certificate's: the same TBS without the poison, issued by the root.
    pub fn precert(&self, n: u32, not_after: i64, via_psc: bool) -> TestEntry {
        let signer = if via_psc { Signer::Psc } else { Signer::Root };
        let pre = self.build(n, not_after, signer, true).to_der().unwrap();
        let fin = self.build(n, not_after, Signer::Root, false).to_der().unwrap();
        let tbs = x509_cert::Certificate::from_der(&fin).unwrap().tbs_certificate.to_der().unwrap();
        let root = x509_cert::Certificate::from_der(&self.root.to_der().unwrap()).unwrap();
        let spki = root.tbs_certificate.subject_public_key_info.to_der().unwrap();
        let issuer_key_hash = openssl::sha::sha256(&spki);
        let mut chain = vec![pre];
        if via_psc {
            chain.push(self.psc.to_der().unwrap());
        }
        chain.push(self.root.to_der().unwrap());
        TestEntry { kind: Kind::PreChain, chain, entry: SignedEntry::Precert { issuer_key_hash, tbs_certificate: tbs } }
    }

    /// A certificate (or with `poison` a precertificate) `n`: subject and
    /// SAN `leaf<n>.ct.test`, serial `1000 + n`, the shared leaf key,
    /// NotBefore an hour before the PKI was made; the same fields whoever
    /// signs it, so that a precertificate and its final certificate differ
    /// only in the poison, the issuer name and the key identifier.
    fn build(&self, n: u32, not_after: i64, signer: Signer, poison: bool) -> X509 {
        let (issuer, key) = match signer {
            Signer::Root => (&self.root, &self.root_key),
            Signer::Psc => (&self.psc, &self.psc_key),
        };
        let cn = format!("leaf{n}.ct.test");
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", &cn).unwrap();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1000 + n).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name.build()).unwrap();
        b.set_issuer_name(issuer.subject_name()).unwrap();
        b.set_pubkey(&self.leaf_key).unwrap();
        b.set_not_before(&Asn1Time::from_unix(self.not_before).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::from_unix(not_after).unwrap()).unwrap();
        let san = SubjectAlternativeName::new().dns(&cn).build(&b.x509v3_context(Some(issuer), None)).unwrap();
        b.append_extension(san).unwrap();
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(issuer), None)).unwrap();
        b.append_extension(aki).unwrap();
        if poison {
            let oid = Asn1Object::from_str("1.3.6.1.4.1.11129.2.4.3").unwrap();
            let null = Asn1OctetString::new_from_bytes(&[0x05, 0x00]).unwrap();
            b.append_extension(X509Extension::new_from_der(&oid, true, &null).unwrap()).unwrap();
        }
        b.sign(key, MessageDigest::sha256()).unwrap();
        b.build()
    }
}
