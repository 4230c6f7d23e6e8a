//! A real S3-compatible server for tests: versitygw (POSIX backend) on a free
//! loopback port, over a temporary directory, with one bucket
//! ([`Versitygw::BUCKET`]). ctlogd's own storage and sequencer tests use it,
//! and so do the integration tests that run the ctlogd binary with
//! `storage = { s3 = ... }`. The daemon never calls it.
//!
//! The binary is `$SIGNET_VERSITYGW`, else `~/.cache/signet/bin/versitygw`
//! (`ensure_versitygw` in scripts/lib.sh builds it and sets the variable).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ObjectStorage, S3Config};

/// A versitygw S3 gateway, stopped (killed) on drop.
pub struct Versitygw {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Versitygw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versitygw").field("endpoint", &self.endpoint).finish()
    }
}

impl Versitygw {
    /// The bucket the tests use.
    pub const BUCKET: &'static str = "ctlog";
    /// Its access key ID.
    pub const ACCESS: &'static str = "ctlogtestaccess";
    /// Its secret access key.
    pub const SECRET: &'static str = "ctlogtestsecretkey";

    /// The binary: `$SIGNET_VERSITYGW`, else `~/.cache/signet/bin/versitygw`.
    pub fn binary() -> Option<PathBuf> {
        let path = match std::env::var_os("SIGNET_VERSITYGW") {
            Some(p) => PathBuf::from(p),
            None => Path::new(&std::env::var_os("HOME")?).join(".cache/signet/bin/versitygw"),
        };
        path.is_file().then_some(path)
    }

    /// Starts the gateway, or prints why the S3 tests are skipped and returns
    /// `None`. With `SIGNET_VERSITYGW` set (scripts/test sets it) a missing
    /// binary is a failure, not a skip.
    ///
    /// # Panics
    ///
    /// When `SIGNET_VERSITYGW` names no file, or the gateway does not start.
    #[allow(clippy::unwrap_used, clippy::expect_used)] // test support: failing loudly is the point
    pub fn start() -> Option<Self> {
        let Some(bin) = Self::binary() else {
            assert!(
                std::env::var_os("SIGNET_VERSITYGW").is_none(),
                "SIGNET_VERSITYGW is set but is not a file: the S3 storage tests cannot run"
            );
            eprintln!(
                "SKIPPED: no versitygw binary (set SIGNET_VERSITYGW or build it into ~/.cache/signet/bin/versitygw); \
                 the S3 storage tests did not run"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join(Self::BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.path().join("gw.log")).unwrap();
        let child = Command::new(bin)
            .args(["--access", Self::ACCESS, "--secret", Self::SECRET, "--port", &format!("127.0.0.1:{port}")])
            .arg("posix")
            .arg(&root)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let gw = Self { child, endpoint: format!("http://127.0.0.1:{port}"), dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "versitygw did not start: {}", gw.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(gw)
    }

    /// The settings of the test bucket under `prefix`.
    pub fn config(&self, prefix: &str) -> S3Config {
        S3Config {
            endpoint: self.endpoint.clone(),
            bucket: Self::BUCKET.into(),
            region: "us-east-1".into(),
            access_key_id: Self::ACCESS.into(),
            secret_access_key: Self::SECRET.into(),
            prefix: prefix.into(),
            allow_http: true,
        }
    }

    /// Storage in the test bucket under `prefix`.
    ///
    /// # Panics
    ///
    /// If the object store client cannot be built.
    #[allow(clippy::expect_used)] // test support
    pub fn storage(&self, prefix: &str) -> ObjectStorage {
        ObjectStorage::s3(&self.config(prefix)).expect("an S3 client for versitygw")
    }

    /// Where the bucket's objects are on disk (the POSIX backend's directory).
    pub fn bucket_dir(&self) -> PathBuf {
        self.dir.path().join("root").join(Self::BUCKET)
    }

    /// The gateway's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gw.log")).unwrap_or_default()
    }
}

impl Drop for Versitygw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
