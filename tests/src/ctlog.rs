//! A real CT log for tests: a P-256 log key in signd under `[logs.<name>]`
//! (signd restarted to load it), and `ctlogd` serving that one log on a free
//! loopback port, accepting chains to the given roots; and [`TestRoot`], a
//! root issuing as many distinct leaves as a test submits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use openssl::asn1::Asn1Time;
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{BasicConstraints, KeyUsage, SubjectAlternativeName};
use openssl::x509::{X509NameBuilder, X509};

use crate::pki::free_port;
use crate::{bin, SigndProcess};

/// ctlogd with one log.
pub struct CtLog {
    /// ctlogd, while running.
    pub child: Option<Child>,
    /// The log's name (its URL path segment and its `[logs.<name>]` in signd).
    pub name: String,
    /// ctlogd's HTTP port.
    pub port: u16,
    /// ctlogd's config file.
    pub config: PathBuf,
    /// The log's public key, DER SubjectPublicKeyInfo.
    pub public_key: Vec<u8>,
    log_file: PathBuf,
}

impl CtLog {
    /// Adds log key `ct-<name>` to `signd` (the test user, signd's `admin`, holds
    /// the log's role) and restarts it, then starts ctlogd in `dir` for log
    /// `name`, accepting chains to the PEM roots in `roots`.
    pub fn start(signd: &mut SigndProcess, dir: &Path, name: &str, roots: &Path) -> CtLog {
        let key = format!("ct-{name}");
        signet_ipc::block_on(signd.client().generate_key(signd.spec(&key, signet_ipc::KeyAlgorithm::EcP256))).unwrap();
        let mut config = std::fs::read_to_string(&signd.config).unwrap();
        config.push_str(&format!("\n[logs.{name}]\nkey = \"{key}\"\nroles = [\"admin\"]\n"));
        std::fs::write(&signd.config, config).unwrap();
        signd.restart();

        let port = free_port();
        let config = dir.join(format!("ctlogd-{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "state_dir = {:?}\nsignd_socket = {:?}\nlisten = \"127.0.0.1:{port}\"\nroots = [{roots:?}]\n\
                 [sequencing]\nmax_age_ms = 50\n[logs.{name}]\ndescription = \"test log\"\nstorage = {{ dir = {:?} }}\n",
                dir.join(format!("ctlogd-{name}-db")),
                signd.socket,
                dir.join(format!("ctlogd-{name}-tiles")),
            ),
        )
        .unwrap();
        let mut log = CtLog {
            child: None,
            name: name.to_owned(),
            port,
            config,
            public_key: Vec::new(),
            log_file: dir.join(format!("ctlogd-{name}.log")),
        };
        log.start_ctlogd();
        let meta: serde_json::Value = serde_json::from_slice(&log.get("log.v3.json").1).unwrap();
        log.public_key = STANDARD.decode(meta["key"].as_str().unwrap()).unwrap();
        log
    }

    /// Starts (or restarts) ctlogd and waits for its tree head.
    pub fn start_ctlogd(&mut self) {
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_file).unwrap();
        let child =
            Command::new(bin("ctlogd")).arg("--config").arg(&self.config).stdout(Stdio::null()).stderr(stderr).spawn();
        self.child = Some(child.unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.get("ct/v1/get-sth").0 != 200 {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("ctlogd exited ({s}): {}", self.log());
            }
            assert!(Instant::now() < deadline, "ctlogd not ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The log's RFC 6962 prefix, `http://127.0.0.1:PORT/<name>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/", self.port, self.name)
    }

    /// The public key in base64, as log lists (and acmed's `[[ct.logs]]`) carry it.
    pub fn public_key_b64(&self) -> String {
        STANDARD.encode(&self.public_key)
    }

    /// A GET of `path` under the log's prefix: (status, body).
    pub fn get(&self, path: &str) -> (u16, Vec<u8>) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", &format!("{}{path}", self.url())])
            .output()
            .unwrap();
        let mut body = out.stdout;
        let cut = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let status = String::from_utf8_lossy(&body[cut..]).trim().parse().unwrap_or(0);
        body.truncate(cut);
        (status, body)
    }

    /// ctlogd's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// Submits a DER chain (leaf first) to the log's `add-chain`: (status, body).
    pub fn add_chain(&self, chain: &[Vec<u8>]) -> (u16, Vec<u8>) {
        add_chain(&self.url(), chain)
    }
}

/// Submits a DER chain (leaf first) to `add-chain` under the log prefix `url`
/// (for threads that hold the URL, not the [`CtLog`]): (status, body).
pub fn add_chain(url: &str, chain: &[Vec<u8>]) -> (u16, Vec<u8>) {
    let body = serde_json::json!({ "chain": chain.iter().map(|c| STANDARD.encode(c)).collect::<Vec<_>>() }).to_string();
    let mut child = Command::new("curl")
        .args(["-s", "--max-time", "20", "-w", "\n%{http_code}", "-H", "Content-Type: application/json"])
        .args(["--data-binary", "@-", &format!("{url}ct/v1/add-chain")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let mut body = child.wait_with_output().unwrap().stdout;
    let cut = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let status = String::from_utf8_lossy(&body[cut..]).trim().parse().unwrap_or(0);
    body.truncate(cut);
    (status, body)
}

/// A fresh P-256 key.
fn p256() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// A test root and the leaves it issues directly, each distinct (DER chains
/// leaf, root): as many different log entries as a test needs.
pub struct TestRoot {
    /// The root certificate.
    pub root: X509,
    root_key: PKey<Private>,
    leaf_key: PKey<Private>,
}

impl TestRoot {
    /// A new root, "CN=ctlogd test root", valid 30 days.
    pub fn new() -> Self {
        let root_key = p256();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "ctlogd test root").unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&root_key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(30).unwrap()).unwrap();
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
        b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build().unwrap()).unwrap();
        b.sign(&root_key, MessageDigest::sha256()).unwrap();
        Self { root: b.build(), root_key, leaf_key: p256() }
    }

    /// Leaf `i` (`leaf<i>.ct.test`, serial 1000 + i) and the root, DER.
    pub fn chain(&self, i: u32) -> Vec<Vec<u8>> {
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", &format!("leaf{i}.ct.test")).unwrap();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1000 + i).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name.build()).unwrap();
        b.set_issuer_name(self.root.subject_name()).unwrap();
        b.set_pubkey(&self.leaf_key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(10).unwrap()).unwrap();
        let san = SubjectAlternativeName::new()
            .dns(&format!("leaf{i}.ct.test"))
            .build(&b.x509v3_context(Some(&self.root), None))
            .unwrap();
        b.append_extension(san).unwrap();
        b.sign(&self.root_key, MessageDigest::sha256()).unwrap();
        vec![b.build().to_der().unwrap(), self.root.to_der().unwrap()]
    }
}

impl Default for TestRoot {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for CtLog {
    fn drop(&mut self) {
        self.kill9();
    }
}
