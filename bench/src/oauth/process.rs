//! A real tokend for a bench, beside a [`SigndProcess`] started with
//! [`tokend_role`]: its token key generated in signd under the `tokend` role,
//! tokend on free loopback ports (and its `[tls]` listener when asked) in a
//! temporary directory, clients and users made with `signetctl oauth`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use signet_ipc::{block_on, KeyAlgorithm, KeySpec};

use crate::{bin_dir, SigndProcess};

/// signd's `[roles.tokend]` for the current user (`sign-jws`, `list`,
/// `public-key`), for [`SigndProcess::start_with_roles`].
pub fn tokend_role() -> String {
    let uid = nix::unistd::Uid::current().as_raw();
    format!("[roles.tokend]\nusers = [{uid}]\noperations = [\"sign-jws\", \"list\", \"public-key\"]\n")
}

/// The signd key algorithm that signs JOSE algorithm `alg` (`ES256`, ..., `ML-DSA-87`).
pub fn key_algorithm(alg: &str) -> Option<KeyAlgorithm> {
    Some(match alg {
        "ES256" => KeyAlgorithm::EcP256,
        "ES384" => KeyAlgorithm::EcP384,
        "ES512" => KeyAlgorithm::EcP521,
        "EdDSA" => KeyAlgorithm::Ed25519,
        "ML-DSA-44" => KeyAlgorithm::MlDsa44,
        "ML-DSA-65" => KeyAlgorithm::MlDsa65,
        "ML-DSA-87" => KeyAlgorithm::MlDsa87,
        _ => return None,
    })
}

/// tokend's `[tls]` listener: its certificate chain and key (PEM files), and
/// the CAs of tls_client_auth.
pub struct TlsFiles {
    /// The server certificate chain, leaf first.
    pub certificate: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// `client_ca_file`.
    pub client_ca: Option<PathBuf>,
}

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// A tokend started for a benchmark; stopped (SIGTERM, then SIGKILL) on drop.
pub struct TokendProcess {
    child: Child,
    /// The plain HTTP listener's port (the issuer is `http://127.0.0.1:PORT`).
    pub port: u16,
    /// The `[tls]` listener's port.
    pub tls_port: Option<u16>,
    admin_socket: PathBuf,
    signd_socket: PathBuf,
    dir: tempfile::TempDir,
}

impl TokendProcess {
    /// Generates a key for `alg` (a JOSE name) under signd's `tokend` role,
    /// then starts tokend signing with it (`[tokens] algorithm`), with the
    /// `[tls]` listener of `tls`, and `extra` appended to its config. Waits
    /// until `/healthz` answers 200 (a key can sign).
    pub fn start(signd: &SigndProcess, alg: &str, tls: Option<&TlsFiles>, extra: &str) -> anyhow::Result<Self> {
        let algorithm = key_algorithm(alg).with_context(|| format!("no signd key algorithm for {alg}"))?;
        let client = signd.client()?;
        let mut suffix = [0u8; 4];
        openssl::rand::rand_bytes(&mut suffix)?;
        let key_id =
            format!("tokend-{}-{}", alg.to_lowercase(), suffix.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let spec = KeySpec { id: key_id, algorithm, roles: vec!["tokend".into()], backend: String::new() };
        block_on(client.generate_key(spec)).context("generating the token key in signd")?;

        let dir = match std::env::var_os("SIGNET_BENCH_DIR") {
            Some(base) => tempfile::Builder::new().prefix("tokend-bench").tempdir_in(base)?,
            None => tempfile::Builder::new().prefix("tokend-bench").tempdir()?,
        };
        let port = free_port()?;
        let admin_socket = dir.path().join("admin.sock");
        let mut config = format!(
            "issuer = \"http://127.0.0.1:{port}\"\nlisten = \"127.0.0.1:{port}\"\nstate_dir = {state:?}\n\
             signd_socket = {signd:?}\nsignd_role = \"tokend\"\nadmin_socket = {admin_socket:?}\n{extra}\n\
             [tokens]\nalgorithm = \"{alg}\"\n",
            state = dir.path().join("db"),
            signd = signd.socket(),
        );
        let tls_port = match tls {
            None => None,
            Some(t) => {
                let p = free_port()?;
                config.push_str(&format!(
                    "[tls]\nlisten = \"127.0.0.1:{p}\"\ncertificate = {:?}\nkey = {:?}\n",
                    t.certificate, t.key
                ));
                if let Some(ca) = &t.client_ca {
                    config.push_str(&format!("client_ca_file = {ca:?}\n"));
                }
                Some(p)
            }
        };
        let config_path = dir.path().join("tokend.toml");
        std::fs::write(&config_path, config)?;
        let bin = bin_dir().join("tokend");
        if !bin.is_file() {
            bail!("{} not found: build it (cargo build --release -p tokend) or set SIGNET_BIN_DIR", bin.display());
        }
        let log = std::fs::File::create(dir.path().join("tokend.log"))?;
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut me =
            TokendProcess { child, port, tls_port, admin_socket, signd_socket: signd.socket().to_owned(), dir };
        me.wait_healthy()?;
        Ok(me)
    }

    fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let addr = self.addr();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let healthy = rt.block_on(async {
                let mut tx = super::connect(addr, None).await?;
                let req = Request::get("/healthz").header("host", addr.to_string()).body(Full::new(Bytes::new()))?;
                let resp = tx.send_request(req).await?;
                let ok = resp.status() == 200;
                resp.into_body().collect().await?;
                anyhow::Ok(ok)
            });
            if matches!(healthy, Ok(true)) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("tokend exited with {status} during start-up:\n{}", self.log());
            }
            if Instant::now() > deadline {
                bail!("tokend did not become healthy within 20 s:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tokend.log")).unwrap_or_default()
    }

    /// Its temporary directory (config, LMDB, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The issuer identifier.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The plain HTTP listener.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The `[tls]` listener.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_port.map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
    }

    /// tokend's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `signetctl` aimed at this tokend and its signd.
    pub fn signetctl(&self) -> Command {
        let mut c = Command::new(bin_dir().join("signetctl"));
        c.env("SIGNET_SIGND_SOCKET", &self.signd_socket).env("SIGNET_TOKEND_SOCKET", &self.admin_socket);
        c
    }

    /// `signetctl --json oauth client create ID ARGS...`: what it printed
    /// (`client_id`, and `secret` for secret-holding clients).
    pub fn create_client(&self, id: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let out = self.signetctl().args(["--json", "oauth", "client", "create", id]).args(args).output()?;
        if !out.status.success() {
            bail!(
                "oauth client create {id}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// `signetctl oauth user create NAME` with `password` (from a file).
    pub fn create_user(&self, name: &str, password: &str) -> anyhow::Result<()> {
        let file = self.dir.path().join(format!("{name}.password"));
        std::fs::write(&file, password)?;
        let out = self.signetctl().args(["oauth", "user", "create", name, "--password-file"]).arg(&file).output()?;
        if !out.status.success() {
            bail!(
                "oauth user create {name}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for TokendProcess {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
