//! signd benchmarks: the in-process OpenSSL baseline against the same
//! signatures made by a real signd over its Unix socket.
//!
//! Groups (criterion):
//! - `direct/<case>`: `OpensslKey::sign_message` (signd's own signing call on
//!   a held key) in-process, one thread.
//! - `signd_roundtrip/<case>`: one `block_on(client.sign(..))` at a time,
//!   through the shared client (`SigndClient`'s background connection);
//!   `signd_roundtrip_per_thread/<case>` the same through `per_thread()`.
//! - `signd_inflight16/p256`, `signd_inflight64/p256`: one client keeping 16
//!   (64) requests outstanding; `signd_inflight16_sync/p256` the same against
//!   a signd with `[audit] durability = "sync"`.
//! - `signd_batch/p256`: `sign_batch` of 256 messages per call.
//!
//! After criterion, a summary pass (lines starting `SUMMARY`) measures with
//! plain timed loops: direct rate, round-trip p50/p99 (up to 5,000 calls)
//! from cold and again warm (after [`WARM_UP`] of the same calls, as
//! criterion warms up), in-flight-16 rate and p50/p99 for every case, and
//! CPU time per signature in signd and in the client. Set
//! `SIGNET_BENCH_SUMMARY=0` to skip it, or to a comma-separated list of case
//! labels (`p256,ed25519`) to limit the per-case loops to those.
//!
//! signd is found through `SIGNET_BIN_DIR` (default: `target/release`).
#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::sign::Signer;
use signd::backend::openssl::{generate, OpensslKey};
use signet_bench::{generate_keys, message, percentile, run_inflight, self_cpu_time, Case, SigndProcess, CASES, P256};
use signet_ipc::{block_on, SignatureScheme, SigndClient};

const BATCH: usize = 256;
/// How long the summary's warm round-trip loops call before they time: the
/// steady state of back-to-back calls, which criterion's warm-up reaches too.
/// The cold loop before them starts right after a second of signing on the
/// bench's thread alone.
const WARM_UP: Duration = Duration::from_secs(1);

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let msg = message();
    let keys: Vec<(Case, PKey<Private>)> =
        CASES.iter().map(|case| (*case, generate(case.algorithm).expect("generate key in-process"))).collect();

    // 1. The in-process baseline.
    {
        let mut g = c.benchmark_group("direct");
        g.throughput(Throughput::Elements(1));
        for (case, pkey) in &keys {
            let key = OpensslKey::new(pkey.clone(), case.algorithm).expect("hold key");
            g.bench_function(case.label, |b| b.iter(|| key.sign_message(case.scheme, black_box(&msg)).unwrap()));
        }
        g.finish();
    }
    // Experiment: the same Signer, but one EVP_DigestSign into a buffer sized
    // up front instead of `sign_oneshot_to_vec` (a size query, then the sign).
    {
        let mut g = c.benchmark_group("direct_prealloc");
        g.throughput(Throughput::Elements(1));
        for (case, pkey) in
            keys.iter().filter(|(c, _)| matches!(c.label, "p256" | "ed25519" | "mldsa44" | "mldsa65" | "mldsa87"))
        {
            let mut buf = vec![0u8; 8192];
            g.bench_function(case.label, |b| {
                b.iter(|| {
                    let mut signer = match case.scheme {
                        SignatureScheme::EcdsaSha256 => Signer::new(MessageDigest::sha256(), pkey).unwrap(),
                        _ => Signer::new_without_digest(pkey).unwrap(),
                    };
                    signer.sign_oneshot(&mut buf, black_box(&msg)).unwrap()
                })
            });
        }
        g.finish();
    }

    let signd = SigndProcess::start("process").expect("start signd");
    let client = signd.client().expect("signd client");
    generate_keys(&client, &CASES).expect("generate keys in signd");
    // Open the connection and the signer capability before timing anything.
    block_on(client.sign("", &P256.key_id(), P256.scheme, msg.clone())).expect("first sign");

    // 2. Latency: one call at a time.
    {
        let mut g = c.benchmark_group("signd_roundtrip");
        g.throughput(Throughput::Elements(1));
        for case in &CASES {
            let key = case.key_id();
            g.bench_function(case.label, |b| {
                b.iter(|| block_on(client.sign("", &key, case.scheme, msg.clone())).unwrap())
            });
        }
        g.finish();
        // The same through a per-thread client (what synchronous callers such
        // as libpki and signetctl use): the call runs on this thread, with no
        // hand-off to the shared connection's thread and back.
        let pt = client.per_thread();
        block_on(pt.sign("", &P256.key_id(), P256.scheme, msg.clone())).expect("first per-thread sign");
        let mut g = c.benchmark_group("signd_roundtrip_per_thread");
        g.throughput(Throughput::Elements(1));
        for case in &CASES {
            let key = case.key_id();
            g.bench_function(case.label, |b| b.iter(|| block_on(pt.sign("", &key, case.scheme, msg.clone())).unwrap()));
        }
        g.finish();
    }

    // 3. Throughput: N outstanding from one client.
    for inflight in [16usize, 64] {
        inflight_group(&mut c, &format!("signd_inflight{inflight}"), &client, inflight, &msg);
    }

    // 4. Batches.
    {
        let key = P256.key_id();
        let msgs: Vec<Vec<u8>> = vec![msg.clone(); BATCH];
        let mut g = c.benchmark_group("signd_batch");
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function(P256.label, |b| {
            b.iter(|| {
                let sigs = block_on(client.sign_batch("", &key, P256.scheme, msgs.clone())).unwrap();
                assert_eq!(sigs.len(), BATCH);
                sigs
            })
        });
        g.finish();
    }

    // 5. The audit log fsynced per group commit.
    let signd_sync = SigndProcess::start("sync").expect("start signd (audit sync)");
    let client_sync = signd_sync.client().expect("signd client");
    generate_keys(&client_sync, &[P256]).expect("generate key in signd (sync)");
    block_on(client_sync.sign("", &P256.key_id(), P256.scheme, msg.clone())).expect("first sign");
    inflight_group(&mut c, "signd_inflight16_sync", &client_sync, 16, &msg);

    c.final_summary();

    let bench_mode = std::env::args().any(|a| a == "--bench");
    if bench_mode && std::env::var("SIGNET_BENCH_SUMMARY").as_deref() != Ok("0") {
        summary(&keys, &signd, &client, &signd_sync, &client_sync, &msg);
    }
}

fn inflight_group(c: &mut Criterion, name: &str, client: &SigndClient, inflight: usize, msg: &[u8]) {
    let key = P256.key_id();
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    g.bench_function(P256.label, |b| {
        b.iter_custom(|iters| {
            let (elapsed, _, errors) =
                run_inflight(iters, inflight, || client.sign("", &key, P256.scheme, msg.to_vec()));
            assert_eq!(errors, 0, "signd returned errors");
            elapsed
        })
    });
    g.finish();
}

/// Makes `n` calls one after another; returns the time they took together
/// and each one's latency.
fn timed_calls(n: u64, mut call: impl FnMut()) -> (Duration, Vec<Duration>) {
    let mut lat = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for _ in 0..n {
        let s = Instant::now();
        call();
        lat.push(s.elapsed());
    }
    (start.elapsed(), lat)
}

/// Makes calls one after another for [`WARM_UP`], untimed.
fn warm_up(mut call: impl FnMut()) {
    let start = Instant::now();
    while start.elapsed() < WARM_UP {
        call();
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Signs in-process for about `secs` seconds; returns signs per second.
fn direct_rate(pkey: &PKey<Private>, case: &Case, msg: &[u8], secs: f64) -> f64 {
    let key = OpensslKey::new(pkey.clone(), case.algorithm).expect("hold key");
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..8 {
            black_box(key.sign_message(case.scheme, black_box(msg)).unwrap());
        }
        n += 8;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Timed loops outside criterion, printed as `SUMMARY key=value` lines.
fn summary(
    keys: &[(Case, PKey<Private>)],
    signd: &SigndProcess,
    client: &SigndClient,
    signd_sync: &SigndProcess,
    client_sync: &SigndClient,
    msg: &[u8],
) {
    println!(
        "SUMMARY begin date_unix={}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    );
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("SUMMARY loadavg {}", l.trim());
    }
    // Transport alone: `health` crosses the client thread, the socket and
    // signd's capnp thread, but not the signing pool or the audit writer.
    let (_, mut lat) = timed_calls(5000, || {
        block_on(client.health()).unwrap();
    });
    println!(
        "SUMMARY health_roundtrip n=5000 p50_us={:.1} p99_us={:.1}",
        us(percentile(&mut lat, 50.0)),
        us(percentile(&mut lat, 99.0))
    );
    // SIGNET_BENCH_SUMMARY=p256,ed25519 limits the per-case loops to those cases.
    let only: Option<Vec<String>> = std::env::var("SIGNET_BENCH_SUMMARY")
        .ok()
        .filter(|v| !matches!(v.as_str(), "" | "1"))
        .map(|v| v.split(',').map(str::to_owned).collect());
    for (case, pkey) in keys {
        if only.as_ref().is_some_and(|o| !o.iter().any(|l| l == case.label)) {
            continue;
        }
        let key = case.key_id();
        let direct = direct_rate(pkey, case, msg, 1.0);
        // Round trip: estimate the call time, then up to 5,000 calls or ~2 s.
        let t = Instant::now();
        for _ in 0..20 {
            block_on(client.sign("", &key, case.scheme, msg.to_vec())).unwrap();
        }
        let est = t.elapsed() / 20;
        let n = ((2.0 / est.as_secs_f64()) as u64).clamp(200, 5000);
        let (elapsed, mut lat) = timed_calls(n, || {
            block_on(client.sign("", &key, case.scheme, msg.to_vec())).unwrap();
        });
        let rt_rate = n as f64 / elapsed.as_secs_f64();
        let (p50, p99) = (percentile(&mut lat, 50.0), percentile(&mut lat, 99.0));
        // The same calls again, warm.
        let shared_call = || {
            block_on(client.sign("", &key, case.scheme, msg.to_vec())).unwrap();
        };
        warm_up(shared_call);
        let (_, mut lat_warm) = timed_calls(n, shared_call);
        let (warm_p50, warm_p99) = (percentile(&mut lat_warm, 50.0), percentile(&mut lat_warm, 99.0));
        // The same number of calls through a per-thread client, warm.
        let pt = client.per_thread();
        let pt_call = || {
            block_on(pt.sign("", &key, case.scheme, msg.to_vec())).unwrap();
        };
        warm_up(pt_call);
        let (_, mut lat_pt) = timed_calls(n, pt_call);
        let (pt_p50, pt_p99) = (percentile(&mut lat_pt, 50.0), percentile(&mut lat_pt, 99.0));
        // 16 in flight for ~1.5 s.
        let n16 = ((1.5 * rt_rate * 2.0) as u64).clamp(400, 200_000);
        let (el, mut lat16, errors) = run_inflight(n16, 16, || client.sign("", &key, case.scheme, msg.to_vec()));
        assert_eq!(errors, 0);
        let if_rate = n16 as f64 / el.as_secs_f64();
        println!(
            "SUMMARY case={} direct_per_s={:.0} roundtrip_n={} roundtrip_per_s={:.0} roundtrip_p50_us={:.1} roundtrip_p99_us={:.1} \
             roundtrip_warm_p50_us={:.1} roundtrip_warm_p99_us={:.1} per_thread_p50_us={:.1} per_thread_p99_us={:.1} inflight16_n={} inflight16_per_s={:.0} inflight16_p50_us={:.1} inflight16_p99_us={:.1} ratio_roundtrip={:.3} ratio_inflight16={:.3}",
            case.label,
            direct,
            n,
            rt_rate,
            us(p50),
            us(p99),
            us(warm_p50),
            us(warm_p99),
            us(pt_p50),
            us(pt_p99),
            n16,
            if_rate,
            us(percentile(&mut lat16, 50.0)),
            us(percentile(&mut lat16, 99.0)),
            rt_rate / direct,
            if_rate / direct,
        );
    }

    // P-256 throughput modes, with CPU time per signature in signd and in this
    // process. The direct rate is re-measured (1 s) right before each mode so
    // the ratio compares like with like when other processes load the machine.
    let key = P256.key_id();
    let cpu0 = self_cpu_time();
    let t0 = Instant::now();
    let direct = direct_rate(&keys[0].1, &P256, msg, 2.0);
    let direct_signs = direct * t0.elapsed().as_secs_f64();
    println!(
        "SUMMARY p256 direct_per_s={direct:.0} direct_cpu_us_per_sign={:.1}",
        us(self_cpu_time().saturating_sub(cpu0)) / direct_signs
    );
    let modes: [(&str, &SigndProcess, &SigndClient, usize, usize); 4] = [
        ("inflight16", signd, client, 16, 1),
        ("inflight64", signd, client, 64, 1),
        ("batch256", signd, client, 1, BATCH),
        ("inflight16_audit_sync", signd_sync, client_sync, 16, 1),
    ];
    for (name, proc_, cl, inflight, batch) in modes {
        let direct = direct_rate(&keys[0].1, &P256, msg, 1.0);
        let calls: u64 = if batch > 1 { 200 } else { 40_000 };
        let server_cpu0 = proc_.cpu_time().unwrap_or_default();
        let client_cpu0 = self_cpu_time();
        let (el, mut lat, errors) = if batch > 1 {
            let msgs = vec![msg.to_vec(); batch];
            run_inflight(calls, inflight, || cl.sign_batch("", &key, P256.scheme, msgs.clone()))
        } else {
            run_inflight(calls, inflight, || cl.sign("", &key, P256.scheme, msg.to_vec()))
        };
        assert_eq!(errors, 0);
        let server_cpu = proc_.cpu_time().unwrap_or_default().saturating_sub(server_cpu0);
        let client_cpu = self_cpu_time().saturating_sub(client_cpu0);
        let signs = calls * batch as u64;
        let rate = signs as f64 / el.as_secs_f64();
        println!(
            "SUMMARY p256 mode={name} signs={signs} secs={:.2} per_s={rate:.0} direct_adjacent_per_s={direct:.0} ratio={:.3} call_p50_us={:.1} call_p99_us={:.1} \
             signd_cpu_us_per_sign={:.1} client_cpu_us_per_sign={:.1} signd_cpu_util={:.2}",
            el.as_secs_f64(),
            rate / direct,
            us(percentile(&mut lat, 50.0)),
            us(percentile(&mut lat, 99.0)),
            us(server_cpu) / signs as f64,
            us(client_cpu) / signs as f64,
            server_cpu.as_secs_f64() / el.as_secs_f64(),
        );
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("SUMMARY loadavg_end {}", l.trim());
    }
}
