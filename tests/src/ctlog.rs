//! A real CT log for tests: a P-256 log key in signd under `[logs.<name>]`
//! (signd restarted to load it), and `ctlogd` serving that one log on a free
//! loopback port, accepting chains to the given roots.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

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
}

impl Drop for CtLog {
    fn drop(&mut self) {
        self.kill9();
    }
}
