//! Builds a CRL of N revoked serials (default 1,000,000) with signet-ca and has
//! a real signd sign it through its CrlSigner, timing each step and reporting
//! peak memory of this process and of signd. The result is verified with
//! OpenSSL and its entries counted.
//!
//! ```sh
//! cargo build --release -p signet-bench --bin crl-million -p signd -p signetctl
//! $CARGO_TARGET_DIR/release/crl-million [--entries N] [--algorithm ecdsa-p256]
//! ```
//!
//! signd runs on a temporary directory with a CA made by `signetctl ca init`;
//! its `[limits]` are raised to fit the TBSCertList (a 1M-entry one is ~40 MB,
//! over the 16 MiB default).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Parser;
use signet_ca::{build_tbs_crl, CrlParams, CrlReason, Issuer, RevokedEntry, SignatureScheme};
use signet_ipc::{block_on, SigndClient};

#[derive(Parser)]
struct Args {
    /// Revoked serials in the CRL.
    #[arg(long, default_value_t = 1_000_000)]
    entries: usize,
    /// The CA key algorithm.
    #[arg(long, default_value = "ecdsa-p256")]
    algorithm: String,
}

fn bin(name: &str) -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().join(name)
}

fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn start_signd(config: &Path, socket: &Path) -> anyhow::Result<Child> {
    let _ = std::fs::remove_file(socket);
    let child = Command::new(bin("signd")).arg("--config").arg(config).stderr(Stdio::null()).spawn()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if Instant::now() > deadline {
            bail!("signd did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("signd.sock");
    let config = dir.path().join("signd.toml");
    let uid = nix::unistd::getuid().as_raw();
    std::fs::write(
        &config,
        format!(
            "socket = \"{}\"\nstate_dir = \"{}\"\n[limits]\nmax_message_bytes = {}\nmax_frame_bytes = {}\n\
             [roles.admin]\nusers = [{uid}]\nadmin = true\nkeys = [\"*\"]\n",
            socket.display(),
            dir.path().join("state").display(),
            256 << 20,
            512 << 20,
        ),
    )?;
    let mut signd = start_signd(&config, &socket)?;
    let ca_dir = dir.path().join("ca");
    let status = Command::new(bin("signetctl"))
        .env("SIGNET_SIGND_SOCKET", &socket)
        .args(["ca", "init", "--dir"])
        .arg(&ca_dir)
        .args(["--algorithm", &args.algorithm, "--issuer-role", "admin", "--ocsp-role", "admin"])
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("signetctl ca init failed");
    }
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(&std::fs::read_to_string(ca_dir.join("signd-issuer.toml"))?);
    std::fs::write(&config, text)?;
    signd.kill()?;
    signd.wait()?;
    let mut signd = start_signd(&config, &socket)?;

    let pem = std::fs::read(ca_dir.join("issuing.pem"))?;
    let (_, der) = der::pem::decode_vec(&pem).map_err(|e| anyhow::anyhow!("issuing.pem: {e}"))?;
    let issuer = Issuer::from_certificate_der(&der, SignatureScheme::Default)?;
    let base = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    let revoked: Vec<RevokedEntry> = (0..args.entries)
        .map(|i| {
            let mut serial = [0u8; 16];
            serial[0] = 0x40;
            serial[8..].copy_from_slice(&(i as u64).to_be_bytes());
            RevokedEntry {
                serial: serial.to_vec(),
                revocation_time: base + Duration::from_secs(i as u64),
                reason: [None, Some(CrlReason::KeyCompromise), Some(CrlReason::Superseded)][i % 3],
            }
        })
        .collect();
    let now = SystemTime::now();
    let params = CrlParams {
        this_update: now,
        next_update: now + Duration::from_secs(86_400),
        crl_number: 1,
        shard_url: None,
        delta_base: None,
        freshest_crl_url: None,
        revoked: &revoked,
    };
    let client = SigndClient::new(&socket)?.per_thread();
    // A first, small CRL: connects and warms the CrlSigner.
    let small = CrlParams { revoked: &revoked[..1], ..params.clone() };
    block_on(client.sign_crl("demo", build_tbs_crl(&issuer, &small)?)).context("warm-up CRL")?;

    let t0 = Instant::now();
    let tbs = build_tbs_crl(&issuer, &params)?;
    let build = t0.elapsed();
    let tbs_len = tbs.len();
    let t1 = Instant::now();
    let crl = block_on(client.sign_crl("demo", tbs)).context("signing the CRL")?;
    let sign = t1.elapsed();
    let total = t0.elapsed();
    // An independent check that what came back is a valid CRL: OpenSSL 3.5
    // (the vendored one, so ML-DSA verifies too), against the CA certificate.
    let ca_cert = openssl::x509::X509::from_der(&der)?;
    let parsed = openssl::x509::X509Crl::from_der(&crl)?;
    let ca_key = ca_cert.public_key()?;
    let verified = parsed.verify(&ca_key)? && parsed.get_revoked().map_or(0, |r| r.len()) == args.entries;
    println!(
        "{}",
        serde_json::json!({
            "entries": args.entries,
            "algorithm": args.algorithm,
            "tbs_bytes": tbs_len,
            "crl_bytes": crl.len(),
            "build_ms": build.as_secs_f64() * 1e3,
            "sign_through_signd_ms": sign.as_secs_f64() * 1e3,
            "total_ms": total.as_secs_f64() * 1e3,
            "openssl_verify_ok": verified,
            "peak_rss_mib_bench": peak_rss_mib(std::process::id()),
            "peak_rss_mib_signd": peak_rss_mib(signd.id()),
        })
    );
    signd.kill()?;
    signd.wait()?;
    if !verified {
        bail!("openssl did not verify the CRL");
    }
    Ok(())
}
