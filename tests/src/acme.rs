//! ACME for tests: a whole stack (signd + CA + ocspd from [`Pki`], the
//! `signet-testdns` DNS server, acmed over HTTPS) and a small raw ACME client
//! that signs requests with `signet-acme` and sends them with curl, so a test
//! can tamper with any part of a request.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslAcceptor, SslMethod};
use serde_json::{json, Value};
use signet_acme::jws::sign::{self, Signer};
use signet_acme::jws::{Algorithm, MacAlgorithm};
use signet_acme::validate;
use signet_acme::Jwk;

use crate::pki::{free_port, Pki};
use crate::testdns::TestDns;
use crate::{bin, run};

/// The stack.
pub struct AcmeStack {
    /// signd, the CA and ocspd.
    pub pki: Pki,
    /// acmed, while running.
    pub acmed: Option<Child>,
    /// The DNS server acmed resolves names with.
    pub dns: TestDns,
    /// acmed's HTTPS port.
    pub port: u16,
    /// acmed's config file.
    pub config: PathBuf,
    /// What verifies acmed's TLS certificate.
    pub tls_ca: PathBuf,
    /// acmed's admin socket (mode 0666 here, so other users reach acmed's own check).
    pub admin_socket: PathBuf,
    /// Where http-01 validation fetches (`http01_port`; nothing listens unless a test does).
    pub http01_port: u16,
    /// The only port http-01 follows `https:` redirects to (`http01_https_port`).
    pub http01_https_port: u16,
    /// acmed's config as the stack wrote it (`extra` included).
    base_config: String,
    zone_lock: Mutex<()>,
}

impl AcmeStack {
    /// Starts everything; `extra` is appended to acmed's config (top-level
    /// keys such as `external_account_required = true`, then tables).
    pub fn start(extra: &str) -> AcmeStack {
        Self::start_with_ca("ecdsa-p256", extra)
    }

    /// Starts everything with a CA whose keys are `algorithm` (signd's names).
    pub fn start_with_ca(algorithm: &str, extra: &str) -> AcmeStack {
        Self::start_with_dns_ttl(algorithm, extra, 0)
    }

    /// Starts everything with a CA whose keys are `algorithm`, and a DNS
    /// server whose answers have a TTL of `dns_ttl` seconds (0 elsewhere:
    /// nothing may be cached, so a test's zone edits show at once).
    pub fn start_with_dns_ttl(algorithm: &str, extra: &str, dns_ttl: u32) -> AcmeStack {
        let pki = Pki::start_full(crate::Backend::Openssl, algorithm, "");
        let dir = pki.dir.clone();
        let dns =
            TestDns::start_with_ttl(&dir.join("zone"), "signet.test A 127.0.0.1\n*.signet.test A 127.0.0.1\n", dns_ttl);
        let dns_addr = dns.addr().to_string();

        // acmed's TLS certificate, from the CA itself.
        let key = dir.join("acmed-tls.key");
        let csr = dir.join("acmed-tls.csr");
        let cert = dir.join("acmed-tls.pem");
        let (st, _, err) = run(Command::new("openssl")
            .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"])
            .args([
                "-keyout",
                key.to_str().unwrap(),
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-out",
                csr.to_str().unwrap(),
            ]));
        assert!(st.success(), "{err}");
        // Issued by the CA itself, unless its signatures are beyond the system
        // OpenSSL (ML-DSA) that curl uses: then a self-signed P-256 certificate.
        let chain = dir.join("acmed-tls-chain.pem");
        let tls_ca = if algorithm.starts_with("ml-dsa") {
            let (st, _, err) = run(Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-copy_extensions", "copy", "-in"])
                .args([csr.to_str().unwrap(), "-signkey", key.to_str().unwrap(), "-out", chain.to_str().unwrap()]));
            assert!(st.success(), "{err}");
            chain.clone()
        } else {
            let (st, out, err) = run(pki.signetctl().args([
                "cert",
                "issue",
                "--csr",
                csr.to_str().unwrap(),
                "--out",
                cert.to_str().unwrap(),
            ]));
            assert!(st.success(), "{out}{err}");
            let pem = format!(
                "{}{}",
                std::fs::read_to_string(&cert).unwrap(),
                std::fs::read_to_string(pki.ca("issuing.pem")).unwrap()
            );
            std::fs::write(&chain, pem).unwrap();
            pki.ca("root.pem")
        };

        let port = free_port();
        let (http01_port, http01_https_port) = (free_port(), free_port());
        let config = dir.join("acmed.toml");
        let admin_socket = dir.join("acmed-admin.sock");
        let base_config = format!(
                "state_dir = {:?}\nsignd_socket = {:?}\nocspd_socket = {:?}\nissuer = \"demo\"\nlisten = \"127.0.0.1:{port}\"\n\
                 tls_certificate = {:?}\ntls_key = {:?}\nchain = {:?}\nhttp01_port = {http01_port}\n\
                 http01_https_port = {http01_https_port}\ntlsalpn01_port = {}\n\
                 dns_resolver = {dns_addr:?}\ncaa_identities = [\"signet.test\"]\nvalidation_timeout_seconds = 5\n\
                 admin_socket = {admin_socket:?}\nadmin_socket_mode = \"0666\"\n{extra}\n",
                dir.join("acmed-state"),
                pki.signd.socket,
                pki.ocspd_socket,
                chain,
                key,
                pki.ca("chain.pem"),
                free_port(),
        );
        std::fs::write(&config, &base_config).unwrap();
        let mut stack = AcmeStack {
            pki,
            acmed: None,
            dns,
            port,
            config,
            tls_ca,
            admin_socket,
            http01_port,
            http01_https_port,
            base_config,
            zone_lock: Mutex::new(()),
        };
        stack.start_acmed();
        stack
    }

    /// Starts (or restarts) acmed and waits for its directory.
    pub fn start_acmed(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.pki.dir.join("acmed.log")).unwrap();
        let child = Command::new(bin("acmed"))
            .arg("--config")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.acmed = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, _, _) = self.get("/directory");
            if status == 200 {
                break;
            }
            if let Some(s) = self.acmed.as_mut().unwrap().try_wait().unwrap() {
                panic!("acmed exited ({s}): {}", self.log());
            }
            assert!(Instant::now() < deadline, "acmed not ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Restarts acmed with its first config plus `extra` (tables, such as a `[ct]` section).
    pub fn reconfigure_acmed(&mut self, extra: &str) {
        self.kill9_acmed();
        std::fs::write(&self.config, format!("{}\n{extra}\n", self.base_config)).unwrap();
        self.start_acmed();
    }

    /// SIGKILL.
    pub fn kill9_acmed(&mut self) {
        if let Some(mut c) = self.acmed.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// acmed's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.pki.dir.join("acmed.log")).unwrap_or_default()
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The root that verifies acmed's TLS.
    pub fn ca_bundle(&self) -> PathBuf {
        self.tls_ca.clone()
    }

    /// The real signetctl, pointed at this stack's daemons and acmed's admin socket.
    pub fn signetctl(&self) -> Command {
        let mut c = self.pki.signetctl();
        c.env("SIGNET_ACMED_SOCKET", &self.admin_socket);
        c
    }

    fn curl(&self, args: &[&str]) -> Response {
        let headers = tempfile::NamedTempFile::new_in(&self.pki.dir).unwrap();
        let out = Command::new("curl")
            .args(["-s", "--cacert"])
            .arg(self.ca_bundle())
            .arg("-D")
            .arg(headers.path())
            .args(args)
            .output()
            .unwrap();
        let h = std::fs::read_to_string(headers.path()).unwrap_or_default();
        let status = h.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        Response { status, headers: h, body: out.stdout }
    }

    /// A GET: (status, headers, body).
    pub fn get(&self, path: &str) -> (u16, String, Vec<u8>) {
        let r = self.curl(&[&self.url(path)]);
        (r.status, r.headers, r.body)
    }

    /// POSTs `body` to `url` with `content_type`.
    pub fn post_raw(&self, url: &str, content_type: &str, body: &[u8]) -> Response {
        let file = tempfile::NamedTempFile::new_in(&self.pki.dir).unwrap();
        std::fs::write(file.path(), body).unwrap();
        let data = format!("@{}", file.path().display());
        self.curl(&["-X", "POST", "-H", &format!("Content-Type: {content_type}"), "--data-binary", &data, url])
    }

    /// Adds a TXT record to the zone (serialised: clients add concurrently).
    pub fn add_txt(&self, name: &str, value: &str) {
        let _g = self.zone_lock.lock().unwrap();
        self.dns.add(&format!("{name} TXT \"{value}\""));
    }
}

impl Drop for AcmeStack {
    fn drop(&mut self) {
        self.kill9_acmed();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code (0 when curl failed).
    pub status: u16,
    /// The raw header block.
    pub headers: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value (case-insensitive name; the first).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    /// The body as JSON (Null when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The problem type's short name, for a problem document.
    pub fn problem(&self) -> String {
        self.json()["type"].as_str().unwrap_or("").trim_start_matches("urn:ietf:params:acme:error:").to_owned()
    }
}

/// A new P-256 key.
pub fn p256() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// A raw ACME client with one account key.
pub struct Client<'a> {
    /// The stack it talks to.
    pub stack: &'a AcmeStack,
    /// The account key.
    pub key: PKey<Private>,
    /// The account URL once registered.
    pub kid: Option<String>,
    nonce: Option<String>,
}

impl<'a> Client<'a> {
    /// A client with a fresh P-256 key.
    pub fn new(stack: &'a AcmeStack) -> Client<'a> {
        Client { stack, key: p256(), kid: None, nonce: None }
    }

    /// A fresh nonce (from the last response, else newNonce).
    pub fn nonce(&mut self) -> String {
        if let Some(n) = self.nonce.take() {
            return n;
        }
        let r = self.stack.curl(&["-I", &self.stack.url("/acme/new-nonce")]);
        r.header("replay-nonce").expect("newNonce gives a Replay-Nonce")
    }

    /// Sends a prepared JWS; keeps the response's nonce.
    pub fn send(&mut self, url: &str, jws: &Value) -> Response {
        let r = self.stack.post_raw(url, "application/jose+json", jws.to_string().as_bytes());
        self.nonce = r.header("replay-nonce");
        assert!(r.status < 500, "a server error for {url}: {} {}", r.status, String::from_utf8_lossy(&r.body));
        r
    }

    /// Signs `payload` (None: POST-as-GET) for `url` with the account key and `kid` (or `jwk` before registration).
    pub fn jws(&mut self, url: &str, payload: Option<&Value>) -> Value {
        let nonce = self.nonce();
        let body = payload.map(|p| p.to_string().into_bytes()).unwrap_or_default();
        let signer = match &self.kid {
            Some(k) => Signer::Kid(k),
            None => Signer::Jwk,
        };
        sign::request(Algorithm::Es256, &self.key, signer, Some(&nonce), url, &body).unwrap()
    }

    /// POSTs a signed request.
    pub fn post(&mut self, url: &str, payload: Option<&Value>) -> Response {
        let jws = self.jws(url, payload);
        self.send(url, &jws)
    }

    /// newAccount with `payload`, whatever the answer; keeps the account URL on success.
    pub fn new_account(&mut self, payload: &Value) -> Response {
        let url = self.stack.url("/acme/new-account");
        let r = self.post(&url, Some(payload));
        if r.status == 201 || r.status == 200 {
            self.kid = r.header("location");
        }
        r
    }

    /// An `externalAccountBinding` (RFC 8555 §7.3.4) of this client's key, MACed
    /// (HS256) with `mac_key` under `key_id`.
    pub fn eab(&self, key_id: &str, mac_key: &[u8]) -> Value {
        sign::external_account_binding(
            MacAlgorithm::Hs256,
            key_id,
            mac_key,
            &self.stack.url("/acme/new-account"),
            &self.jwk(),
        )
        .unwrap()
    }

    /// Registers the account.
    pub fn register(&mut self) -> Response {
        let url = self.stack.url("/acme/new-account");
        let r = self.post(&url, Some(&json!({"termsOfServiceAgreed": true, "contact": ["mailto:test@signet.test"]})));
        assert_eq!(r.status, 201, "newAccount: {}", String::from_utf8_lossy(&r.body));
        self.kid = r.header("location");
        r
    }

    /// The account key as a JWK.
    pub fn jwk(&self) -> Jwk {
        Jwk::from_public_key(&self.key).unwrap()
    }

    /// Creates an order for `names`; returns (order URL, order JSON).
    pub fn new_order(&mut self, names: &[&str]) -> (String, Value) {
        let ids: Vec<Value> = names.iter().map(|n| json!({"type": "dns", "value": n})).collect();
        let url = self.stack.url("/acme/new-order");
        let r = self.post(&url, Some(&json!({ "identifiers": ids })));
        assert_eq!(r.status, 201, "newOrder: {}", String::from_utf8_lossy(&r.body));
        (r.header("location").unwrap(), r.json())
    }

    /// Completes every authorization of `order` with dns-01 through the zone.
    pub fn authorize_dns01(&mut self, order: &Value) {
        for authz_url in order["authorizations"].as_array().unwrap() {
            let authz_url = authz_url.as_str().unwrap();
            let authz = self.post(authz_url, None).json();
            let name = authz["identifier"]["value"].as_str().unwrap().to_owned();
            let ch = authz["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "dns-01").unwrap().clone();
            let ka = validate::key_authorization(ch["token"].as_str().unwrap(), &self.jwk());
            self.stack.add_txt(&format!("_acme-challenge.{name}"), &validate::dns01_txt_value(&ka));
            let r = self.post(ch["url"].as_str().unwrap(), Some(&json!({})));
            assert_eq!(r.status, 200, "challenge: {}", String::from_utf8_lossy(&r.body));
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let a = self.post(authz_url, None).json();
                match a["status"].as_str() {
                    Some("valid") => break,
                    Some("pending") => {}
                    other => panic!("authorization {other:?}: {a}"),
                }
                assert!(Instant::now() < deadline, "authorization stuck: {a}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The http-01 challenge of the authorization at `authz_url`: (challenge URL,
    /// token, key authorization).
    pub fn http01_challenge(&mut self, authz_url: &str) -> (String, String, String) {
        let authz = self.post(authz_url, None).json();
        let challenges = authz["challenges"].as_array().unwrap();
        let ch =
            challenges.iter().find(|c| c["type"] == "http-01").unwrap_or_else(|| panic!("no http-01: {authz}")).clone();
        let token = ch["token"].as_str().unwrap().to_owned();
        let ka = validate::key_authorization(&token, &self.jwk());
        (ch["url"].as_str().unwrap().to_owned(), token, ka)
    }

    /// A new order for `name` alone, its dns-01 challenge answered (the TXT
    /// record under the name, without `*.`) and polled until decided; returns
    /// the authorization (valid or invalid).
    pub fn dns01_outcome(&mut self, name: &str) -> Value {
        let (_, order) = self.new_order(&[name]);
        let authz_url = order["authorizations"][0].as_str().unwrap().to_owned();
        let authz = self.post(&authz_url, None).json();
        let ch = authz["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "dns-01").unwrap().clone();
        let ka = validate::key_authorization(ch["token"].as_str().unwrap(), &self.jwk());
        let owner = name.trim_start_matches("*.");
        self.stack.add_txt(&format!("_acme-challenge.{owner}"), &validate::dns01_txt_value(&ka));
        self.respond_and_wait(ch["url"].as_str().unwrap(), &authz_url)
    }

    /// POSTs the challenge at `challenge_url`, then polls `authz_url` until it is
    /// no longer pending; returns the authorization (valid or invalid).
    pub fn respond_and_wait(&mut self, challenge_url: &str, authz_url: &str) -> Value {
        let r = self.post(challenge_url, Some(&json!({})));
        assert_eq!(r.status, 200, "challenge: {}", String::from_utf8_lossy(&r.body));
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let a = self.post(authz_url, None).json();
            if a["status"] != "pending" {
                return a;
            }
            assert!(Instant::now() < deadline, "authorization stuck: {a}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A CSR (DER) for `names` with a new P-256 key.
    pub fn csr(names: &[&str]) -> Vec<u8> {
        Self::csr_with(&p256(), openssl::hash::MessageDigest::sha256(), names)
    }

    /// A CSR (DER) for `names` signed by `key` (`MessageDigest::null()` for Ed25519 and ML-DSA).
    pub fn csr_with(key: &PKey<Private>, digest: openssl::hash::MessageDigest, names: &[&str]) -> Vec<u8> {
        let mut b = openssl::x509::X509ReqBuilder::new().unwrap();
        b.set_pubkey(key).unwrap();
        let mut exts = openssl::stack::Stack::new().unwrap();
        let mut san = openssl::x509::extension::SubjectAlternativeName::new();
        for n in names {
            san.dns(n);
        }
        exts.push(san.build(&b.x509v3_context(None)).unwrap()).unwrap();
        b.add_extensions(&exts).unwrap();
        b.sign(key, digest).unwrap();
        b.build().to_der().unwrap()
    }

    /// Finalizes with a CSR; returns the response.
    pub fn finalize(&mut self, order: &Value, csr_der: &[u8]) -> Response {
        let csr = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, csr_der);
        let url = order["finalize"].as_str().unwrap().to_owned();
        self.post(&url, Some(&json!({ "csr": csr })))
    }

    /// A whole issuance for `names` with dns-01; returns the PEM chain.
    pub fn issue(&mut self, names: &[&str]) -> String {
        self.issue_csr(names, &Self::csr(names))
    }

    /// A whole issuance for `names` with dns-01 and the given CSR; returns the PEM chain.
    pub fn issue_csr(&mut self, names: &[&str], csr: &[u8]) -> String {
        let (_, order) = self.new_order(names);
        self.authorize_dns01(&order);
        let r = self.finalize(&order, csr);
        assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
        let cert_url = r.json()["certificate"].as_str().unwrap().to_owned();
        let r = self.post(&cert_url, None);
        assert_eq!(r.status, 200, "download: {}", String::from_utf8_lossy(&r.body));
        String::from_utf8(r.body).unwrap()
    }
}

/// What [`HttpResponder`] answers for one path.
#[derive(Clone, Debug)]
pub enum Route {
    /// 200 with this body.
    Body(String),
    /// This status (301, 302, ...) with this `Location`.
    Redirect(u16, String),
}

/// An HTTP/1.1 server on 127.0.0.1 for http-01 tests: answers each request
/// path from a table (404 otherwise), one request per connection, plain or
/// over TLS with a self-signed certificate (http-01 accepts any). It records
/// every request as (path, Host header).
pub struct HttpResponder {
    routes: Arc<Mutex<HashMap<String, Route>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl HttpResponder {
    /// Serves plain HTTP on `port` (e.g. the stack's `http01_port`).
    pub fn http(port: u16) -> HttpResponder {
        Self::start(port, None)
    }

    /// Serves HTTPS on `port` (e.g. the stack's `http01_https_port`).
    pub fn https(port: u16) -> HttpResponder {
        let key = p256();
        let mut name = openssl::x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "http01.test").unwrap();
        let name = name.build();
        let mut b = openssl::x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
        b.sign(&key, openssl::hash::MessageDigest::sha256()).unwrap();
        let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        acceptor.set_private_key(&key).unwrap();
        acceptor.set_certificate(&b.build()).unwrap();
        Self::start(port, Some(acceptor.build()))
    }

    fn start(port: u16, tls: Option<SslAcceptor>) -> HttpResponder {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| panic!("bind 127.0.0.1:{port}: {e}"));
        let r = HttpResponder { routes: Arc::default(), seen: Arc::default() };
        let (routes, seen) = (r.routes.clone(), r.seen.clone());
        // Detached: it lives as long as the test process.
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (routes, seen, tls) = (routes.clone(), seen.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                    match tls {
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(conn) {
                                serve_one(s, &routes, &seen);
                            }
                        }
                        None => serve_one(conn, &routes, &seen),
                    }
                });
            }
        });
        r
    }

    /// Answers `path` with `route` from now on.
    pub fn route(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.to_owned(), route);
    }

    /// Every request so far: (path, Host header).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one<S: Read + Write>(mut s: S, routes: &Mutex<HashMap<String, Route>>, seen: &Mutex<Vec<(String, String)>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let host = head
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("host")).map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    seen.lock().unwrap().push((path.clone(), host));
    let route = routes.lock().unwrap().get(&path).cloned();
    let answer = match route {
        Some(Route::Body(body)) => {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        Some(Route::Redirect(status, to)) => {
            format!("HTTP/1.1 {status} Moved\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
    };
    let _ = s.write_all(answer.as_bytes());
    let _ = s.flush();
}
