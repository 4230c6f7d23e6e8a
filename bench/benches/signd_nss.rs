//! The NSS backend against its own raw calls, in one run (issue 4): P-256
//! and RSA-2048 (PKCS#1 v1.5, SHA-256) signatures per second through a real
//! signd, 16 requests in flight, for
//! - (a) `openssl`: keys in PKCS#8 files (OpenSSL backend),
//! - (b) `softokn`: keys on NSS's softokn,
//! - (c) `softhsm`: keys on a SoftHSM2 token through NSS,
//!
//! and (d) `raw_softokn`, `raw_softhsm`: the NSS call
//! (`NssKey::raw_sign_loop`: hash, PK11_SignWithMechanism with the cached
//! session copy, DER), in a loop in this process on one thread, on keys of
//! the same kind. The summary adds (d'): the calls signd itself makes
//! (`NssKey::raw_sign_loop_direct`: the token's C_SignInit and C_Sign in
//! signd's own sessions, which NSS's call replaces with a session opened and
//! closed per signature), and the ratio against it.
//!
//! After criterion, a summary pass (lines starting `SUMMARY`) measures each
//! configuration again with plain timed loops (`SIGNET_BENCH_SECONDS` each,
//! default 3) and prints the ratios (b)/(d) and (c)/(d) as signd rate over
//! raw rate (the target, "within 1.2× of raw", is a ratio of at least 0.83).
//! Set `SIGNET_BENCH_SUMMARY=0` to skip it.
//!
//! Needs certutil, modutil (libnss3-tools) and softhsm2-util (softhsm2);
//! signd is found through `SIGNET_BIN_DIR` (default: `target/release`).
#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use signd::backend::nss::{NssBackend, NssKey, NssSettings, Preference};
use signd::backend::Backend;
use signet_bench::{message, run_inflight, NssSetup, SigndProcess};
use signet_ipc::{block_on, KeyAlgorithm, KeySpec, SignatureScheme, SigndClient};

const INFLIGHT: usize = 16;
const ALGS: [(&str, KeyAlgorithm, SignatureScheme); 2] = [
    ("p256", KeyAlgorithm::EcP256, SignatureScheme::EcdsaSha256),
    ("rsa2048", KeyAlgorithm::Rsa2048, SignatureScheme::RsaPkcs1Sha256),
];

/// One configuration through signd: a label and a client of its signd.
struct Through {
    label: &'static str,
    client: SigndClient,
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let msg = message();
    let dir = tempfile::Builder::new().prefix("signd-nss-bench").tempdir().expect("temp dir");
    let sub = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };

    // (a) and (b) in one signd on a softokn database; (c) in another on SoftHSM2.
    let softokn = NssSetup::create(&sub("softokn"), false).expect("softokn database");
    let softhsm = NssSetup::create(&sub("softhsm"), true).expect("SoftHSM2 token");
    let signd_a = SigndProcess::start_with("process", &softokn).expect("signd (softokn)");
    let signd_c = SigndProcess::start_with("process", &softhsm).expect("signd (SoftHSM2)");
    let (client_a, client_c) = (signd_a.client().unwrap(), signd_c.client().unwrap());
    for (label, alg, _) in ALGS {
        for (client, backend) in [(&client_a, "openssl"), (&client_a, "nss"), (&client_c, "nss")] {
            let id = key_id(backend, label);
            block_on(client.generate_key(KeySpec { id, algorithm: alg, roles: vec![], backend: backend.into() }))
                .expect("generate key in signd");
        }
    }
    let through = [
        Through { label: "openssl", client: client_a.clone() },
        Through { label: "softokn", client: client_a },
        Through { label: "softhsm", client: client_c },
    ];

    // (d) The raw NSS calls in this process (NSS is initialised once per
    // process: one database with softokn and SoftHSM2 registered).
    let raw_db = NssSetup::create(&sub("raw"), true).expect("in-process NSS database");
    std::env::set_var("SOFTHSM2_CONF", &raw_db.env[0].1);
    let open = |token: &str, pin_file| {
        NssBackend::open(&NssSettings { database: raw_db.database.clone(), token: token.into(), pin_file })
            .expect("NSS in-process")
    };
    let raw_backends =
        [("raw_softokn", open("internal", None)), ("raw_softhsm", open("signet", raw_db.pin_file.clone()))];
    let raw: Vec<(&str, &str, SignatureScheme, NssKey)> = raw_backends
        .iter()
        .flat_map(|(name, backend)| {
            ALGS.iter().map(move |(label, alg, scheme)| {
                let new = backend.generate(&format!("{name}-{label}"), *alg).expect("generate in-process");
                (*name, *label, *scheme, backend.load_key(&new.location, Preference::Prehash).expect("load"))
            })
        })
        .collect();

    let mut g = c.benchmark_group("signd_nss_inflight16");
    g.throughput(Throughput::Elements(1));
    for t in &through {
        for (label, _, scheme) in ALGS {
            let backend = if t.label == "openssl" { "openssl" } else { "nss" };
            let id = key_id(backend, label);
            g.bench_function(format!("{}/{label}", t.label), |b| {
                b.iter_custom(|iters| inflight(&t.client, &id, scheme, &msg, iters));
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("nss_raw");
    g.throughput(Throughput::Elements(1));
    for (name, label, scheme, key) in &raw {
        g.bench_function(format!("{name}/{label}"), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                key.raw_sign_loop(*scheme, &msg, iters as usize).expect("raw NSS sign");
                start.elapsed()
            });
        });
    }
    g.finish();

    if std::env::var("SIGNET_BENCH_SUMMARY").is_ok_and(|v| v == "0") {
        return;
    }
    let seconds: f64 = std::env::var("SIGNET_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let budget = Duration::from_secs_f64(seconds);
    for (label, _, scheme) in ALGS {
        let mut rates = Vec::new();
        for t in &through {
            let backend = if t.label == "openssl" { "openssl" } else { "nss" };
            let id = key_id(backend, label);
            let rate = timed(budget, |n| inflight(&t.client, &id, scheme, &msg, n));
            println!("SUMMARY {label} ({}) through signd, {INFLIGHT} in flight: {rate:.0}/s", t.label);
            rates.push((t.label, rate));
        }
        for (name, l, _, key) in raw.iter().filter(|r| r.1 == label) {
            let rate = timed(budget, |n| {
                let start = Instant::now();
                key.raw_sign_loop(scheme, &msg, n as usize).expect("raw NSS sign");
                start.elapsed()
            });
            println!("SUMMARY {l} (d) {name}, raw NSS calls, one thread: {rate:.0}/s");
            let two = timed(budget, |n| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..2 {
                        s.spawn(|| key.raw_sign_loop(scheme, &msg, (n / 2) as usize).expect("raw NSS sign"));
                    }
                });
                start.elapsed()
            });
            println!("SUMMARY {l} {name}, raw NSS calls, two threads: {two:.0}/s (for scale: does the token sign in parallel?)");
            // The calls signd itself makes (C_SignInit + C_Sign in its own
            // sessions, where the module allows it), for a second baseline.
            let mut direct = false;
            let own = timed(budget, |n| {
                let start = Instant::now();
                direct = key.raw_sign_loop_direct(scheme, &msg, n as usize).expect("raw PKCS #11 sign");
                start.elapsed()
            });
            let how = if direct { "C_Sign in signd's own sessions" } else { "through NSS (no own sessions)" };
            println!("SUMMARY {l} (d') {name}, raw signd calls ({how}), one thread: {own:.0}/s");
            let signd_label = name.trim_start_matches("raw_");
            let through_rate = rates.iter().find(|(t, _)| *t == signd_label).map(|(_, r)| *r).unwrap_or(0.0);
            let which = if signd_label == "softokn" { "(b)/(d)" } else { "(c)/(d)" };
            let ratio = through_rate / rate;
            let verdict = if ratio >= 1.0 / 1.2 { "within 1.2x" } else { "NOT within 1.2x" };
            println!("SUMMARY {label} {which} {signd_label}: signd {through_rate:.0}/s / raw {rate:.0}/s = {ratio:.2} ({verdict})");
            let own_ratio = through_rate / own;
            println!("SUMMARY {label} {which}' {signd_label}: signd {through_rate:.0}/s / raw signd calls {own:.0}/s = {own_ratio:.2}");
        }
    }
    drop((signd_a, signd_c));
}

/// The key id used for `backend` and algorithm label.
fn key_id(backend: &str, label: &str) -> String {
    format!("bench-{backend}-{label}")
}

/// `n` signatures with [`INFLIGHT`] outstanding; panics on an error.
fn inflight(client: &SigndClient, id: &str, scheme: SignatureScheme, msg: &[u8], n: u64) -> Duration {
    let (elapsed, _, errors) = run_inflight(n, INFLIGHT, || client.sign("", id, scheme, msg.to_vec()));
    assert_eq!(errors, 0, "signing with {id} failed");
    elapsed
}

/// Signatures per second over about `budget`, calling `f(n)` (which signs
/// `n` times and returns how long that took) with growing `n`.
fn timed(budget: Duration, mut f: impl FnMut(u64) -> Duration) -> f64 {
    f(32); // warm up
    let (mut n, mut total, mut signed) = (64u64, Duration::ZERO, 0u64);
    while total < budget {
        total += f(n);
        signed += n;
        n = (n * 2).min(20_000);
    }
    signed as f64 / total.as_secs_f64()
}
