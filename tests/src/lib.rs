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

/// A running signd on a private directory.
pub struct SigndProcess {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
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
        let dir = tempfile::Builder::new().prefix("signd-test").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
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
        let mut p = Self {
            dir,
            socket,
            config,
            child: None,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        p.spawn();
        p
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("signd.log")).unwrap();
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
        let mut c = self.child.take().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "signd ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
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
    use signet_ipc::SignatureScheme as S;
    let key = openssl::pkey::PKey::public_key_from_der(spki).unwrap();
    let (md, pss) = match scheme {
        S::EcdsaSha256 | S::RsaPkcs1Sha256 => (Some(MessageDigest::sha256()), false),
        S::EcdsaSha384 | S::RsaPkcs1Sha384 => (Some(MessageDigest::sha384()), false),
        S::EcdsaSha512 | S::RsaPkcs1Sha512 => (Some(MessageDigest::sha512()), false),
        S::RsaPssSha256 => (Some(MessageDigest::sha256()), true),
        S::RsaPssSha384 => (Some(MessageDigest::sha384()), true),
        S::RsaPssSha512 => (Some(MessageDigest::sha512()), true),
        S::Ed25519 | S::MlDsa44 | S::MlDsa65 | S::MlDsa87 | S::Default => (None, false),
    };
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
