//! A whole CA for tests: signd holding a CA made by `signetctl ca init`, and
//! ocspd in front of it, on a free loopback port.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use signet_ipc::OcspdClient;

use crate::{bin, run, signetctl, Backend, SigndProcess};

/// A free loopback port (TCP and UDP) for a server a test starts, never one
/// this process was given before. It comes from below the kernel's ephemeral
/// range, never from it: a port `bind("127.0.0.1:0")` hands out can be taken
/// a moment later as the source port of some outgoing connection (and held in
/// TIME_WAIT for a minute), and the server then fails to bind
/// (`tests/lib/free_port.py` does the same for the shell suites).
pub fn free_port() -> u16 {
    use std::collections::BTreeSet;
    use std::hash::{BuildHasher, RandomState};
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = range.split_whitespace().filter_map(|n| n.parse::<u32>().ok());
    let (lo, hi) = (bounds.next().unwrap_or(32768), bounds.next().unwrap_or(60999));
    let (first, end) = if lo > 11000 { (10000, lo) } else { (hi + 1, 65536) };
    assert!(first < end, "no ports outside the ephemeral range {lo}-{hi}");
    let random = RandomState::new();
    let mut given = GIVEN.lock().unwrap();
    for attempt in 0u32..10_000 {
        let port = (first + (random.hash_one(attempt) % u64::from(end - first)) as u32) as u16;
        let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
            && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok();
        if free && given.insert(port) {
            return port;
        }
    }
    panic!("no free port found in {first}-{end}");
}

/// signd with the demo CA, ocspd in front of it.
pub struct Pki {
    pub signd: SigndProcess,
    pub ocspd: Option<Child>,
    pub dir: PathBuf,
    pub port: u16,
    pub ocspd_socket: PathBuf,
    pub ocspd_config: PathBuf,
}

pub const SHARDS: u32 = 2;

impl Pki {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// `issuer_extra` goes into ocspd's `[issuers.demo]`.
    pub fn start_with(issuer_extra: &str) -> Self {
        Self::start_full(Backend::Openssl, "ecdsa-p256", issuer_extra)
    }

    /// The CA's three keys on `backend`, of `algorithm`.
    pub fn start_full(backend: Backend, algorithm: &str, issuer_extra: &str) -> Self {
        Self::start_with_signd(backend, algorithm, issuer_extra, "")
    }

    /// [`Pki::start_full`] with `signd_extra` in signd's config (more roles:
    /// tokend's, for a tokend beside the CA).
    pub fn start_with_signd(backend: Backend, algorithm: &str, issuer_extra: &str, signd_extra: &str) -> Self {
        let mut signd = SigndProcess::start_backend(backend, signd_extra);
        let dir = signd.dir.path().to_path_buf();
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let (st, out, err) = run(signetctl(&signd.socket).args([
            "ca",
            "init",
            "--name",
            "demo",
            "--dir",
            dir.join("ca").to_str().unwrap(),
            "--ocsp-url",
            &format!("{base}/ocsp"),
            "--crl-url",
            &format!("{base}/crl/demo/{{shard}}.crl"),
            "--crl-shards",
            &SHARDS.to_string(),
            "--issuer-role",
            "admin",
            "--ocsp-role",
            "admin",
            "--algorithm",
            algorithm,
            "--backend",
            backend.name(),
        ]));
        assert!(st.success(), "ca init: {out}{err}");
        let snippet = std::fs::read_to_string(dir.join("ca/signd-issuer.toml")).unwrap();
        let mut config = std::fs::read_to_string(&signd.config).unwrap();
        config.push_str(&snippet);
        std::fs::write(&signd.config, config).unwrap();
        signd.restart();

        let ocspd_socket = dir.join("ocspd.sock");
        let ocspd_config = dir.join("ocspd.toml");
        let uid = nix::unistd::getuid().as_raw();
        std::fs::write(
            &ocspd_config,
            format!(
                "socket = \"{}\"\nsocket_mode = \"0666\"\nstate_dir = \"{}\"\nsignd_socket = \"{}\"\nlisten = \"127.0.0.1:{port}\"\n\
                 [issuers.demo]\nregistrars = {{ users = [{uid}] }}\n{issuer_extra}\n",
                ocspd_socket.display(),
                dir.join("ocspd-state").display(),
                signd.socket.display(),
            ),
        )
        .unwrap();
        let mut pki = Self { signd, ocspd: None, dir, port, ocspd_socket, ocspd_config };
        pki.start_ocspd();
        pki
    }

    pub fn start_ocspd(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("ocspd.log")).unwrap();
        let child = Command::new(bin("ocspd"))
            .arg("--config")
            .arg(&self.ocspd_config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.ocspd = Some(child);
        // Ready when the first CRLs are served.
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.http_get("/crl/demo.crl").0 != 200 {
            if let Some(s) = self.ocspd.as_mut().unwrap().try_wait().unwrap() {
                panic!("ocspd exited ({s}): {}", self.log());
            }
            assert!(Instant::now() < deadline, "ocspd not ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9_ocspd(&mut self) {
        if let Some(mut c) = self.ocspd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ocspd.log")).unwrap_or_default()
    }

    pub fn ca(&self, f: &str) -> PathBuf {
        self.dir.join("ca").join(f)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// (status, headers, body) of a GET, through curl.
    pub fn http_get(&self, path: &str) -> (u16, String, Vec<u8>) {
        self.curl(&[&self.url(path)])
    }

    pub fn curl(&self, args: &[&str]) -> (u16, String, Vec<u8>) {
        let headers = self.dir.join(format!("headers-{}", std::process::id()));
        let out = Command::new("curl").args(["-s", "-D"]).arg(&headers).args(args).output().unwrap();
        let h = std::fs::read_to_string(&headers).unwrap_or_default();
        let status = h.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, h, out.stdout)
    }

    /// The reason the full CRL (`/crl/demo.crl`) lists `serial` (hex) with,
    /// as `openssl crl -text` names it ("Key Compromise", ...); `None` when it
    /// does not list it (or lists it without a reason).
    pub fn full_crl_reason(&self, serial: &str) -> Option<String> {
        let der = self.dir.join(format!("full-{serial}.crl"));
        std::fs::write(&der, self.http_get("/crl/demo.crl").2).unwrap();
        let (_, text, _) =
            run(Command::new("openssl").args(["crl", "-inform", "DER", "-noout", "-text", "-in"]).arg(&der));
        let want = serial.trim_start_matches('0').to_ascii_uppercase();
        let is_entry = |l: &str| {
            l.trim()
                .strip_prefix("Serial Number:")
                .is_some_and(|s| s.trim().trim_start_matches('0').eq_ignore_ascii_case(&want))
        };
        let mut lines = text.lines().skip_while(|l| !is_entry(l)).skip(1);
        let mut entry =
            lines.by_ref().take_while(|l| !l.contains("Serial Number:") && !l.contains("Signature Algorithm"));
        entry.find(|l| l.contains("CRL Reason Code"))?;
        entry.next().map(|l| l.trim().to_owned())
    }

    pub fn registry(&self) -> OcspdClient {
        OcspdClient::new(&self.ocspd_socket).per_thread()
    }

    pub fn signetctl(&self) -> Command {
        let mut c = signetctl(&self.signd.socket);
        c.env("SIGNET_OCSPD_SOCKET", &self.ocspd_socket).env("SIGNET_ISSUER", "demo");
        c
    }

    /// Issues a leaf for `name` through signetctl; returns (cert path, serial hex).
    pub fn issue(&self, name: &str) -> (PathBuf, String) {
        let key = self.dir.join(format!("{name}.key"));
        let csr = self.dir.join(format!("{name}.csr"));
        let cert = self.dir.join(format!("{name}.pem"));
        let (st, _, err) = run(Command::new("openssl")
            .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"])
            .args([
                "-keyout",
                key.to_str().unwrap(),
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                &format!("subjectAltName=DNS:{name}"),
                "-out",
                csr.to_str().unwrap(),
            ]));
        assert!(st.success(), "{err}");
        let (st, out, err) = run(self.signetctl().args([
            "cert",
            "issue",
            "--csr",
            csr.to_str().unwrap(),
            "--out",
            cert.to_str().unwrap(),
        ]));
        assert!(st.success(), "cert issue: {out}{err}");
        let (_, serial, _) =
            run(Command::new("openssl").args(["x509", "-noout", "-serial", "-in", cert.to_str().unwrap()]));
        (cert, serial.trim().trim_start_matches("serial=").to_lowercase())
    }

    /// An OCSP request for `cert` written by `openssl ocsp -reqout` (with
    /// openssl's nonce when `nonce`), under `name` in the test directory.
    pub fn request(&self, cert: &Path, nonce: bool, name: &str) -> PathBuf {
        let req = self.dir.join(name);
        let mut cmd = Command::new("openssl");
        cmd.args(["ocsp", "-issuer"]).arg(self.ca("issuing.pem")).arg("-cert").arg(cert);
        if !nonce {
            cmd.arg("-no_nonce");
        }
        let (st, _, err) = run(cmd.arg("-reqout").arg(&req));
        assert!(st.success(), "{err}");
        req
    }

    /// `openssl ocsp` against ocspd: the text output (verification included).
    pub fn openssl_ocsp(&self, cert: &Path, extra: &[&str]) -> String {
        // Options such as -sha256 must come before -cert.
        let (_, out, err) = run(Command::new("openssl").arg("ocsp").args(extra).args([
            "-issuer",
            self.ca("issuing.pem").to_str().unwrap(),
            "-cert",
            cert.to_str().unwrap(),
            "-url",
            &self.url("/ocsp"),
            "-CAfile",
            self.ca("chain.pem").to_str().unwrap(),
        ]));
        format!("{out}{err}")
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        self.kill9_ocspd();
    }
}
