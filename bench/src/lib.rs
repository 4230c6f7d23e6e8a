//! Benchmarks and load generators.
//!
//! This library holds what the criterion benches (`benches/signd.rs`) and the
//! `signd-load` binary share: starting a real signd on a temporary directory
//! ([`SigndProcess`]), the algorithm cases ([`CASES`]), in-flight drivers and
//! latency percentiles; [`cpu`] the CPU accounting of processes under test.
//! [`ct`] holds the CT checks and synthetic chains of
//! the `ct-load` generator; [`ocsp`] holds the I/O-free part of the `ocsp-load`
//! generator; [`acme_bench`] the ACME client, challenge responders and
//! reports of the `acme-bench` load generator; [`oauth`] the OAuth 2.0
//! clients of token-load, authcode-load and the `tokend_grid` bench, and
//! tokend processes for them.

#![forbid(unsafe_code)]

pub mod acme_bench;
pub mod cpu;
pub mod ct;
pub mod load;
pub mod oauth;
pub mod ocsp;

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use signet_ipc::{block_on, IpcError, KeyAlgorithm, KeySpec, SignatureScheme, SigndClient};

/// One benchmarked signing case: a key algorithm and the scheme used with it.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Benchmark id (`direct/<label>`, `signd_roundtrip/<label>`).
    pub label: &'static str,
    /// Key algorithm.
    pub algorithm: KeyAlgorithm,
    /// Signature scheme.
    pub scheme: SignatureScheme,
}

impl Case {
    /// The id of the key signd holds for this case (cases sharing an
    /// algorithm share the key).
    pub fn key_id(&self) -> String {
        format!("bench-{}", self.algorithm.name())
    }
}

/// Every case benchmarked: each algorithm with its default scheme, plus RSA-2048 PSS.
pub const CASES: [Case; 11] = [
    Case { label: "p256", algorithm: KeyAlgorithm::EcP256, scheme: SignatureScheme::EcdsaSha256 },
    Case { label: "p384", algorithm: KeyAlgorithm::EcP384, scheme: SignatureScheme::EcdsaSha384 },
    Case { label: "p521", algorithm: KeyAlgorithm::EcP521, scheme: SignatureScheme::EcdsaSha512 },
    Case { label: "ed25519", algorithm: KeyAlgorithm::Ed25519, scheme: SignatureScheme::Ed25519 },
    Case { label: "rsa2048", algorithm: KeyAlgorithm::Rsa2048, scheme: SignatureScheme::RsaPkcs1Sha256 },
    Case { label: "rsa3072", algorithm: KeyAlgorithm::Rsa3072, scheme: SignatureScheme::RsaPkcs1Sha256 },
    Case { label: "rsa4096", algorithm: KeyAlgorithm::Rsa4096, scheme: SignatureScheme::RsaPkcs1Sha256 },
    Case { label: "rsa2048_pss", algorithm: KeyAlgorithm::Rsa2048, scheme: SignatureScheme::RsaPssSha256 },
    Case { label: "mldsa44", algorithm: KeyAlgorithm::MlDsa44, scheme: SignatureScheme::MlDsa44 },
    Case { label: "mldsa65", algorithm: KeyAlgorithm::MlDsa65, scheme: SignatureScheme::MlDsa65 },
    Case { label: "mldsa87", algorithm: KeyAlgorithm::MlDsa87, scheme: SignatureScheme::MlDsa87 },
];

/// The P-256 case, used by the throughput benches.
pub const P256: Case = CASES[0];

/// The message signed everywhere: 256 bytes, about the size of an OCSP
/// response's TBS or a small certificate's.
pub fn message() -> Vec<u8> {
    (0..256u32).map(|i| (i * 7 + 3) as u8).collect()
}

/// Where the signd binary lives: `$SIGNET_BIN_DIR`, else `../` relative to
/// the running executable's directory (`target/release/deps/x` →
/// `target/release`).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SIGNET_BIN_DIR") {
        return PathBuf::from(d);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

/// A signd started for a benchmark; killed (SIGTERM, then SIGKILL) on drop,
/// including on panic.
pub struct SigndProcess {
    child: Child,
    socket: PathBuf,
    // Held for its Drop: removes the state directory.
    _dir: tempfile::TempDir,
}

impl SigndProcess {
    /// Starts signd with audit `durability` ("process" or "sync") on a fresh
    /// state directory under `$SIGNET_BENCH_DIR` (default: the system temp
    /// dir; it must be a real disk for "sync" to mean anything). Waits until
    /// the socket answers.
    pub fn start(durability: &str) -> io::Result<Self> {
        Self::start_with(durability, &NssSetup::none())
    }

    /// As [`start`](Self::start), with `nss`'s `[nss]` section in the
    /// configuration and its environment (SOFTHSM2_CONF) in signd's.
    pub fn start_with(durability: &str, nss: &NssSetup) -> io::Result<Self> {
        Self::start_configured(durability, nss, "")
    }

    /// As [`start`](Self::start), with `roles` (TOML: `[roles.NAME]` tables,
    /// e.g. [`oauth::process::tokend_role`]'s) added to the configuration.
    pub fn start_with_roles(durability: &str, roles: &str) -> io::Result<Self> {
        Self::start_configured(durability, &NssSetup::none(), roles)
    }

    fn start_configured(durability: &str, nss: &NssSetup, roles: &str) -> io::Result<Self> {
        let bin = bin_dir().join("signd");
        if !bin.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} not found: build it (cargo build --release -p signd) or set SIGNET_BIN_DIR", bin.display()),
            ));
        }
        let dir = match std::env::var_os("SIGNET_BENCH_DIR") {
            Some(base) => tempfile::Builder::new().prefix("signd-bench").tempdir_in(base)?,
            None => tempfile::Builder::new().prefix("signd-bench").tempdir()?,
        };
        let socket = dir.path().join("signd.sock");
        let uid = nix::unistd::Uid::current().as_raw();
        // SIGNET_BENCH_SIGND_WORKERS: signd's signing threads (default 0, one per CPU).
        let workers: usize = std::env::var("SIGNET_BENCH_SIGND_WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(0);
        let config = format!(
            "socket = \"{d}/signd.sock\"\nsocket_mode = \"0600\"\nstate_dir = \"{d}/state\"\nworkers = {workers}\n\
             [audit]\ndurability = \"{durability}\"\n\
             {nss}\
             [roles.admin]\nusers = [{uid}]\nadmin = true\nkeys = [\"*\"]\n{roles}",
            d = dir.path().display(),
            nss = nss.config,
        );
        let config_path = dir.path().join("signd.toml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.path().join("signd.log"))?;
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .envs(nss.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut me = Self { child, socket, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::os::unix::net::UnixStream::connect(&me.socket).is_ok() {
                return Ok(me);
            }
            if let Some(status) = me.child.try_wait()? {
                let log = std::fs::read_to_string(me._dir.path().join("signd.log")).unwrap_or_default();
                return Err(io::Error::other(format!("signd exited with {status} before listening:\n{log}")));
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "signd did not listen within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// signd's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new client (own connection) for this signd.
    pub fn client(&self) -> Result<SigndClient, IpcError> {
        SigndClient::new(&self.socket)
    }

    /// signd's CPU time so far (user + system), from /proc/<pid>/stat.
    pub fn cpu_time(&self) -> Option<Duration> {
        proc_cpu_time(self.pid())
    }
}

impl Drop for SigndProcess {
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

/// An NSS database for signd's `[nss]` section, made with the real tools
/// the same way the integration tests make theirs (tests/src/lib.rs,
/// `NssToken`): `certutil -N`, and for SoftHSM2 `softhsm2-util
/// --init-token` and `modutil -add`.
#[derive(Clone, Debug, Default)]
pub struct NssSetup {
    /// The `[nss]` section (empty: no NSS).
    pub config: String,
    /// `sql:DIR` of the database.
    pub database: String,
    /// The token label ("internal" for softokn).
    pub token: String,
    /// The PIN file, for SoftHSM2.
    pub pin_file: Option<PathBuf>,
    /// Environment signd needs (SOFTHSM2_CONF).
    pub env: Vec<(String, String)>,
}

/// SoftHSM2's PKCS#11 module (Debian package softhsm2).
pub const SOFTHSM_MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";

impl NssSetup {
    /// No NSS.
    pub fn none() -> Self {
        Self::default()
    }

    /// An NSS database in `dir/nssdb` with an empty softokn password; with
    /// `softhsm`, also a SoftHSM2 token "signet" (PIN 1234) in `dir/tokens`
    /// registered in it, and `token = "signet"`; else `token = "internal"`.
    pub fn create(dir: &Path, softhsm: bool) -> io::Result<Self> {
        let db = dir.join("nssdb");
        std::fs::create_dir_all(&db)?;
        let database = format!("sql:{}", db.display());
        tool(Command::new("certutil").args(["-N", "-d", &database, "--empty-password"]))?;
        let mut me = Self { database, token: "internal".into(), ..Self::default() };
        if softhsm {
            let tokens = dir.join("tokens");
            std::fs::create_dir_all(&tokens)?;
            let conf = dir.join("softhsm2.conf");
            std::fs::write(
                &conf,
                format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", tokens.display()),
            )?;
            tool(Command::new("softhsm2-util").env("SOFTHSM2_CONF", &conf).args([
                "--init-token",
                "--free",
                "--label",
                "signet",
                "--pin",
                "1234",
                "--so-pin",
                "5678",
            ]))?;
            tool(Command::new("modutil").env("SOFTHSM2_CONF", &conf).args([
                "-dbdir",
                &me.database,
                "-add",
                "softhsm",
                "-libfile",
                SOFTHSM_MODULE,
                "-force",
            ]))?;
            let pin = dir.join("nss-pin");
            std::fs::write(&pin, "1234\n")?;
            me.token = "signet".into();
            me.pin_file = Some(pin);
            me.env.push(("SOFTHSM2_CONF".into(), conf.display().to_string()));
        }
        me.config = format!("[nss]\ndatabase = \"{}\"\ntoken = \"{}\"\n", me.database, me.token);
        if let Some(pin) = &me.pin_file {
            me.config.push_str(&format!("pin_file = \"{}\"\n", pin.display()));
        }
        Ok(me)
    }
}

fn tool(cmd: &mut Command) -> io::Result<()> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        io::Error::new(e.kind(), format!("{cmd:?}: {e} (needs libnss3-tools and softhsm2; scripts/test installs them)"))
    })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// CPU time (user + system) of process `pid`, from /proc.
pub fn proc_cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&format!("/proc/{pid}/stat"))
}

/// CPU time (user + system) from a /proc/<pid>/stat file.
fn stat_cpu_time(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name; utime and stime are 14 and 15 (1-based).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ: /proc reports clock ticks of 1/100 s on every Linux architecture we run on.
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Generates one key per algorithm used in `cases` (ids from [`Case::key_id`]).
pub fn generate_keys(client: &SigndClient, cases: &[Case]) -> Result<(), IpcError> {
    let mut done: Vec<KeyAlgorithm> = Vec::new();
    for case in cases {
        if done.contains(&case.algorithm) {
            continue;
        }
        let spec = KeySpec { id: case.key_id(), algorithm: case.algorithm, roles: vec![], backend: String::new() };
        block_on(client.generate_key(spec))?;
        done.push(case.algorithm);
    }
    Ok(())
}

/// Runs `total` calls made by `make`, keeping `inflight` outstanding, and
/// returns the elapsed time and the latency of every call. Call errors are
/// counted in the returned error count.
pub fn run_inflight<F, Fut, T>(total: u64, inflight: usize, mut make: F) -> (Duration, Vec<Duration>, u64)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, IpcError>>,
{
    let mut latencies = Vec::with_capacity(total as usize);
    let mut errors = 0u64;
    let start = Instant::now();
    block_on(async {
        let mut pending = FuturesUnordered::new();
        let mut issued = 0u64;
        let timed = |fut: Fut| async move {
            let t = Instant::now();
            let r = fut.await;
            (t.elapsed(), r.is_ok())
        };
        while issued < total && pending.len() < inflight {
            pending.push(timed(make()));
            issued += 1;
        }
        while let Some((lat, ok)) = pending.next().await {
            latencies.push(lat);
            if !ok {
                errors += 1;
            }
            if issued < total {
                pending.push(timed(make()));
                issued += 1;
            }
        }
    });
    (start.elapsed(), latencies, errors)
}

/// The `p`-th percentile (0..=100) of `samples`, by nearest rank. Sorts in place.
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// CPU time (user + system) of this process so far (10 ms resolution).
/// Read through /proc/self: in a PID namespace whose /proc is the host's,
/// our own pid names another process there.
pub fn self_cpu_time() -> Duration {
    stat_cpu_time("/proc/self/stat").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_by_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&mut v, 50.0), Duration::from_micros(50));
        assert_eq!(percentile(&mut v, 99.0), Duration::from_micros(99));
        assert_eq!(percentile(&mut v, 100.0), Duration::from_micros(100));
        assert_eq!(percentile(&mut [], 50.0), Duration::ZERO);
    }
}
