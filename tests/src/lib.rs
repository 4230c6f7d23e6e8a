//! Test support: real daemon processes on temporary directories.
//!
//! Nothing here fakes a daemon: [`SigndProcess`] runs the real `signd` binary
//! on its own state directory and socket, and tests talk to it over the socket.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use signet_ipc::SigndClient;

pub mod acme;
pub mod ctlog;
pub mod pki;
pub mod smallfs;
pub mod testdns;
pub mod tokend;

/// Where the workspace's binaries are: `SIGNET_BIN_DIR`, else beside the test
/// executable's `deps/` directory (cargo's layout).
pub fn bin(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("SIGNET_BIN_DIR") {
        return Path::new(&dir).join(name);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    let dir = if dir.ends_with("deps") { dir.parent().unwrap() } else { dir };
    let path = dir.join(name);
    assert!(path.exists(), "{} not built (run cargo build --release --workspace --bins)", path.display());
    path
}

/// Where a test's signd keeps its keys. Tests that need keys run once per
/// backend (as rustls runs its API tests once per crypto provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// PKCS#8 files under the state directory.
    Openssl,
    /// NSS's own softokn (the database's internal key slot).
    NssSoftokn,
    /// SoftHSM2, a PKCS#11 module registered in the NSS database as an HSM.
    NssSofthsm,
}

impl Backend {
    /// All three.
    pub const ALL: [Backend; 3] = [Backend::Openssl, Backend::NssSoftokn, Backend::NssSofthsm];

    /// The backend name signd records ("openssl", "nss").
    pub fn name(self) -> &'static str {
        match self {
            Backend::Openssl => "openssl",
            Backend::NssSoftokn | Backend::NssSofthsm => "nss",
        }
    }

    /// Whether the backend can generate and sign with `alg`; where not, signd
    /// must answer with the typed `Unsupported` error.
    pub fn supports(self, alg: signet_ipc::KeyAlgorithm) -> bool {
        use signet_ipc::KeyAlgorithm as A;
        match self {
            Backend::Openssl => true,
            // NSS 3.87 has no ML-DSA, and no Edwards key type: softokn cannot
            // make Ed25519 keys; SoftHSM2 can, and signd uses its own PKCS #11
            // functions for them.
            Backend::NssSoftokn => !matches!(alg, A::Ed25519 | A::MlDsa44 | A::MlDsa65 | A::MlDsa87),
            Backend::NssSofthsm => !matches!(alg, A::MlDsa44 | A::MlDsa65 | A::MlDsa87),
        }
    }
}

/// An NSS database on a temp dir, with SoftHSM2 registered in it for
/// [`Backend::NssSofthsm`]. Built with the real tools (certutil, modutil,
/// softhsm2-util), as an operator would.
#[derive(Clone, Debug)]
pub struct NssToken {
    /// The directory holding everything.
    pub dir: PathBuf,
    /// `sql:DIR` of the NSS database.
    pub database: String,
    /// The token label signd is configured with ("internal" for softokn).
    pub token: String,
    /// The PIN file, if the token needs a login.
    pub pin_file: Option<PathBuf>,
    /// SOFTHSM2_CONF, for SoftHSM2.
    pub softhsm_conf: Option<PathBuf>,
    /// More environment signd and the NSS tools need (P11_KIT_SERVER_ADDRESS).
    pub extra_env: Vec<(String, String)>,
}

/// The user PIN of test tokens.
pub const TEST_PIN: &str = "1234";

impl NssToken {
    /// An NSS database in `dir`; softokn gets the password `password` (none: empty).
    pub fn softokn(dir: &Path, password: Option<&str>) -> Self {
        let db = dir.join("nssdb");
        std::fs::create_dir_all(&db).unwrap();
        let database = format!("sql:{}", db.display());
        let mut certutil = Command::new("certutil");
        certutil.args(["-N", "-d", &database]);
        let pin_file = password.map(|pw| {
            let f = dir.join("nss-pin");
            std::fs::write(&f, format!("{pw}\n")).unwrap();
            certutil.arg("-f").arg(&f);
            f
        });
        if password.is_none() {
            certutil.arg("--empty-password");
        }
        must(&mut certutil);
        Self {
            dir: dir.to_path_buf(),
            database,
            token: "internal".into(),
            pin_file,
            softhsm_conf: None,
            extra_env: Vec::new(),
        }
    }

    /// A fresh SoftHSM2 token "signet" (PIN 1234) registered in a fresh NSS database in `dir`.
    pub fn softhsm(dir: &Path) -> Self {
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", tokens.display()),
        )
        .unwrap();
        must(Command::new("softhsm2-util").env("SOFTHSM2_CONF", &conf).args([
            "--init-token",
            "--free",
            "--label",
            "signet",
            "--pin",
            TEST_PIN,
            "--so-pin",
            "5678",
        ]));
        let mut t = Self::softokn(dir, None);
        must(Command::new("modutil").env("SOFTHSM2_CONF", &conf).args([
            "-dbdir",
            &t.database,
            "-add",
            "softhsm",
            "-libfile",
            SOFTHSM_MODULE,
            "-force",
        ]));
        let pin = dir.join("nss-pin");
        std::fs::write(&pin, format!("{TEST_PIN}\n")).unwrap();
        t.token = "signet".into();
        t.pin_file = Some(pin);
        t.softhsm_conf = Some(conf);
        t
    }

    /// The environment signd (or any NSS tool) needs for this token.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> =
            self.softhsm_conf.iter().map(|c| ("SOFTHSM2_CONF".to_owned(), c.display().to_string())).collect();
        env.extend(self.extra_env.iter().cloned());
        env
    }

    /// The `[nss]` section of signd.toml for this token.
    pub fn config(&self) -> String {
        let mut c = format!("[nss]\ndatabase = \"{}\"\ntoken = \"{}\"\n", self.database, self.token);
        if let Some(p) = &self.pin_file {
            c.push_str(&format!("pin_file = \"{}\"\n", p.display()));
        }
        c
    }

    /// certutil or another NSS tool, with this token's environment.
    pub fn tool(&self, name: &str) -> Command {
        let mut c = Command::new(name);
        c.envs(self.env());
        c
    }
}

/// SoftHSM2's PKCS#11 module (Debian package softhsm2).
pub const SOFTHSM_MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// p11-kit's client module (Debian package p11-kit-modules): a PKCS#11
/// module whose token lives in a `p11-kit server` process.
pub const P11KIT_CLIENT_MODULE: &str = "/usr/lib/x86_64-linux-gnu/pkcs11/p11-kit-client.so";

/// A SoftHSM2 token served by `p11-kit server` over a Unix socket, as a
/// network HSM is: the token's sessions and session objects live in the
/// server's process. [`remove`](Self::remove) kills that process (every
/// session and login is lost; calls fail with CKR_DEVICE_ERROR);
/// [`insert`](Self::insert) starts a server on the same token again.
pub struct RemoteSofthsm {
    /// The NSS database with p11-kit's client module registered (token "signet").
    pub token: NssToken,
    socket: PathBuf,
    conf: PathBuf,
    server: Option<Child>,
}

impl RemoteSofthsm {
    /// A fresh SoftHSM2 token "signet" (PIN 1234) in `dir`, served by p11-kit,
    /// and an NSS database in `dir` that reaches it through p11-kit's client module.
    pub fn new(dir: &Path) -> Self {
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", tokens.display()),
        )
        .unwrap();
        must(Command::new("softhsm2-util").env("SOFTHSM2_CONF", &conf).args([
            "--init-token",
            "--free",
            "--label",
            "signet",
            "--pin",
            TEST_PIN,
            "--so-pin",
            "5678",
        ]));
        let socket = dir.join("p11-kit.sock");
        let address = ("P11_KIT_SERVER_ADDRESS".to_owned(), format!("unix:path={}", socket.display()));
        let mut me = Self { token: NssToken::softokn(dir, None), socket, conf, server: None };
        me.insert();
        must(Command::new("modutil").env(&address.0, &address.1).args([
            "-dbdir",
            &me.token.database,
            "-add",
            "remote",
            "-libfile",
            P11KIT_CLIENT_MODULE,
            "-force",
        ]));
        let pin = dir.join("nss-pin");
        std::fs::write(&pin, format!("{TEST_PIN}\n")).unwrap();
        me.token.token = "signet".into();
        me.token.pin_file = Some(pin);
        me.token.extra_env.push(address);
        me
    }

    /// Starts the server (the token is back), and waits until it listens.
    pub fn insert(&mut self) {
        assert!(self.server.is_none(), "the token is already in");
        let _ = std::fs::remove_file(&self.socket);
        let server = Command::new("p11-kit")
            .args(["server", "-f", "-n"])
            .arg(&self.socket)
            .args(["--provider", SOFTHSM_MODULE, "pkcs11:token=signet"])
            .env("SOFTHSM2_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("p11-kit: {e} (the token-removal tests need p11-kit and p11-kit-modules; scripts/test installs them)"));
        self.server = Some(server);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            assert!(Instant::now() < deadline, "p11-kit server did not listen on {}", self.socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server and the per-client processes it forked (the token is
    /// gone, with every session on it).
    pub fn remove(&mut self) {
        let Some(mut server) = self.server.take() else { return };
        let pid = server.id();
        // p11-kit server forks one process per client connection (p11-kit-remote).
        for child in children_of(pid) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child as i32), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = server.kill();
        let _ = server.wait();
    }
}

impl Drop for RemoteSofthsm {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may contain spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn must(cmd: &mut Command) {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| {
        panic!("{cmd:?}: {e} (the NSS tests need certutil and modutil (Debian libnss3-tools) and softhsm2-util (softhsm2); scripts/test installs them)")
    });
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running signd on a private directory.
pub struct SigndProcess {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    /// Where generated keys go by default.
    pub backend: Backend,
    /// The NSS database and token, for the NSS backends.
    pub nss: Option<NssToken>,
    child: Option<Child>,
    env: Vec<(String, String)>,
}

impl SigndProcess {
    /// Starts signd with the current user as admin, plus `extra` config text
    /// (more roles, limits). The directory is world-traversable and the socket
    /// world-connectable so that tests can call in as other users.
    pub fn start(extra: &str) -> Self {
        Self::start_with_env(extra, &[])
    }

    pub fn start_with_env(extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_full(Backend::Openssl, extra, env)
    }

    /// Starts signd whose keys go to `backend` by default: for the NSS
    /// backends, a fresh NSS database (and SoftHSM2 token) is set up in the
    /// test's directory and configured under `[nss]`.
    pub fn start_backend(backend: Backend, extra: &str) -> Self {
        Self::start_full(backend, extra, &[])
    }

    pub fn start_full(backend: Backend, extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_inner(
            backend,
            |dir| match backend {
                Backend::Openssl => None,
                Backend::NssSoftokn => Some(NssToken::softokn(dir, None)),
                Backend::NssSofthsm => Some(NssToken::softhsm(dir)),
            },
            extra,
            env,
        )
    }

    /// Starts signd on an NSS token that `make` sets up in the test's
    /// directory (e.g. softokn with a password); keys default to "nss".
    pub fn start_nss(make: impl FnOnce(&Path) -> NssToken, extra: &str) -> Self {
        Self::start_inner(Backend::NssSoftokn, |dir| Some(make(dir)), extra, &[])
    }

    fn start_inner(
        backend: Backend,
        make: impl FnOnce(&Path) -> Option<NssToken>,
        extra: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::Builder::new().prefix("signd-test").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let nss = make(dir.path());
        let mut env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let nss_config = nss.as_ref().map(|t| {
            env.extend(t.env());
            t.config()
        });
        let extra = format!("{}{extra}", nss_config.unwrap_or_default());
        let socket = dir.path().join("signd.sock");
        let config = dir.path().join("signd.toml");
        let uid = nix::unistd::getuid().as_raw();
        std::fs::write(
            &config,
            format!(
                "socket = \"{}\"\nsocket_mode = \"0666\"\nstate_dir = \"{}\"\n{extra}\n[roles.admin]\nusers = [{uid}]\nadmin = true\nkeys = [\"*\"]\n",
                socket.display(),
                dir.path().join("state").display()
            ),
        )
        .unwrap();
        let mut p = Self { dir, socket, config, backend, nss, child: None, env };
        p.spawn();
        p
    }

    /// A key spec for this signd's default backend.
    pub fn spec(&self, id: &str, algorithm: signet_ipc::KeyAlgorithm) -> signet_ipc::KeySpec {
        signet_ipc::KeySpec { id: id.into(), algorithm, roles: vec![], backend: self.backend.name().into() }
    }

    /// Starts signd without waiting for it, returning its exit status and
    /// log if it exits within `wait` (a refused start).
    pub fn try_start_raw(config: &Path, env: &[(String, String)], wait: Duration) -> Option<(ExitStatus, String)> {
        let mut cmd = Command::new(bin("signd"));
        cmd.arg("--config").arg(config).stdout(Stdio::null()).stderr(Stdio::piped()).envs(env.iter().cloned());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                return Some((status, err));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    fn spawn(&mut self) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("signd.log")).unwrap();
        let mut cmd = Command::new(bin("signd"));
        cmd.arg("--config").arg(&self.config).stdout(Stdio::null()).stderr(log);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().unwrap());
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("signd exited early ({status}); log:\n{}", self.log());
            }
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "signd did not start; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// signd's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("signd.log")).unwrap_or_default()
    }

    /// A fresh client for this signd's socket.
    pub fn client(&self) -> SigndClient {
        SigndClient::new(&self.socket).unwrap()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts signd again on the same directory.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// SIGTERM and wait for exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.send_sigterm();
        self.wait_exit().0
    }

    /// SIGTERM, without waiting.
    pub fn send_sigterm(&self) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    }

    /// Waits (at most 10 s) for signd to exit after [`Self::send_sigterm`]; its status and
    /// when the exit was seen (polled every 2 ms).
    pub fn wait_exit(&mut self) -> (ExitStatus, Instant) {
        let mut c = self.child.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return (s, Instant::now());
            }
            assert!(Instant::now() < deadline, "signd ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for SigndProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs a command, returning (status, stdout, stderr).
pub fn run(cmd: &mut Command) -> (ExitStatus, String, String) {
    let out = cmd.output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// signetctl against `socket`.
pub fn signetctl(socket: &Path) -> Command {
    let mut c = Command::new(bin("signetctl"));
    c.env("SIGNET_SIGND_SOCKET", socket);
    c
}

/// Verifies `sig` over `msg` with OpenSSL, independently of signd.
pub fn openssl_verify(spki: &[u8], scheme: signet_ipc::SignatureScheme, msg: &[u8], sig: &[u8]) -> bool {
    use openssl::hash::MessageDigest;
    use openssl::rsa::Padding;
    use openssl::sign::{RsaPssSaltlen, Verifier};
    use signet_ipc::DigestAlgorithm as D;
    let key = openssl::pkey::PKey::public_key_from_der(spki).unwrap();
    let md = match scheme.digest() {
        D::Sha256 => Some(MessageDigest::sha256()),
        D::Sha384 => Some(MessageDigest::sha384()),
        D::Sha512 => Some(MessageDigest::sha512()),
        D::None => None,
    };
    let pss = scheme.is_pss();
    let mut v = match md {
        Some(md) => Verifier::new(md, &key).unwrap(),
        None => Verifier::new_without_digest(&key).unwrap(),
    };
    if pss {
        v.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
        v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).unwrap();
        v.set_rsa_mgf1_md(md.unwrap()).unwrap();
    }
    v.verify_oneshot(sig, msg).unwrap_or(false)
}
