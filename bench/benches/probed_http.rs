//! probed's HTTP check against an in-process HTTP/2 server (h2c, prior knowledge), the method
//! of `../shared/seeds/001` (hyper-util HTTP checks): every check goes through
//! `probed::checks::Probe::run`, the call the scheduler makes (timeout, retries, request,
//! status and body expectations, the report), on a check prepared from TOML as the daemon
//! prepares it.
//!
//! Group `http_check_single`, ids `1c` and `2c`: one check at a time.
//! Group `http_check_throughput`, ids `1c/c_<n>` and `2c/c_<n>`, n ∈ {100, 1000, 10000,
//! 50000}: n checks at once (`join_all`), throughput in checks.
//!
//! Topologies: `1c` runs server and checks on one current-thread runtime (one core's
//! ceiling); `2c` runs the server on its own thread and the checks on the bench thread.
//! The server answers `200 ok` from a static string. Run it with
//! `cargo bench -p signet-bench --bench probed_http` (add `-- 1c` for one topology).
//!
//! The same-run baseline is the seed's check as its notes describe it, on the same server,
//! runtime and topology: a bare `hyper_util` client (h2c prior knowledge, plain HTTP
//! connector, pooled) sending a GET under a timeout, then the status checked and the body
//! read and searched. Its ids add `_seed_method` to the topology's name:
//! `http_check_single/1c_seed_method` and `http_check_throughput/1c_seed_method/c_<n>`,
//! each measured right after probed's own at the same `n`. It tells what this host's
//! core does with the seed's stack, so probed's figure can be set against the seed's
//! published one (measured on an Apple M1 Pro) as a ratio from one run.
//!
//! For instruction counts, which a noisy host does not move: with
//! `SIGNET_PROBED_BENCH_ROUNDS=<r>` and `SIGNET_PROBED_BENCH_WHICH=probed|seed_method` the
//! binary skips criterion and runs `r` rounds of 1,000 checks at once on `1c` (after one
//! check that opens the connection), for `valgrind --tool=callgrind`; the difference
//! between two round counts, divided by the checks, is a check's instructions.
#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use probed::checks::Probe;
use tokio::net::TcpListener;
use tokio::runtime::{Builder, Runtime};

/// probed's own allocator, so the checks allocate as they do in the daemon.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONCURRENCY: [usize; 4] = [100, 1_000, 10_000, 50_000];
const TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts on `listener` forever, serving each connection as HTTP/2 with a static `ok`.
async fn serve(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_req: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            // hyper's defaults (200 streams at once), as the seed's axum server had: the
            // client queues the rest of a batch.
            let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// A check as `probed.toml` would declare it: h2c prior knowledge, reused connection,
/// status 200 and body `ok` expected.
fn probe(addr: SocketAddr) -> Probe {
    let text = format!(
        "state_dir = \"/nonexistent\"\nlisten = \"127.0.0.1:1\"\n\
         [checks.bench]\nkind = \"http\"\nurl = \"http://{addr}/\"\nhttp_version = \"2\"\n\
         expect_status = [200]\nexpect_body = \"ok\"\n"
    );
    let config: probed::config::Config =
        signet_runtime::config::parse(&text, Path::new("bench-probed.toml")).expect("the bench's check parses");
    Probe::new(&config.checks["bench"]).expect("the bench's check is prepared")
}

/// The seed's check, as its notes describe it: one request through a shared `hyper_util`
/// client (h2c prior knowledge, no TLS) under a timeout; passes on status 200 and a body
/// containing `ok`.
struct SeedMethod {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
}

impl SeedMethod {
    fn new(addr: SocketAddr) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).http2_only(true).build(http);
        Self { client, uri: format!("http://{addr}/").parse().unwrap() }
    }

    async fn run(&self) -> bool {
        let req = Request::get(self.uri.clone()).body(Full::new(Bytes::new())).unwrap();
        let Ok(Ok(resp)) = tokio::time::timeout(TIMEOUT, self.client.request(req)).await else { return false };
        if resp.status() != 200 {
            return false;
        }
        let Ok(body) = resp.into_body().collect().await else { return false };
        body.to_bytes().windows(2).any(|w| w == b"ok")
    }
}

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

/// The runtime the checks run on, the check, the baseline's check of the same server, and
/// (for `2c`) the server's runtime kept alive.
fn topology(name: &str) -> (Runtime, Probe, SeedMethod, Option<std::thread::JoinHandle<()>>) {
    let rt = current_thread();
    match name {
        "1c" => {
            let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
            let addr = listener.local_addr().unwrap();
            rt.spawn(serve(listener));
            (rt, probe(addr), SeedMethod::new(addr), None)
        }
        _ => {
            let (tx, rx) = std::sync::mpsc::channel();
            let server = std::thread::spawn(move || {
                let srt = current_thread();
                srt.block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                    tx.send(listener.local_addr().unwrap()).unwrap();
                    serve(listener).await;
                });
            });
            let addr = rx.recv().unwrap();
            (rt, probe(addr), SeedMethod::new(addr), Some(server))
        }
    }
}

/// `SIGNET_PROBED_BENCH_ROUNDS` rounds of 1,000 checks of one kind on `1c`, without
/// criterion (for an instruction count).
fn rounds_only(rounds: usize, which: &str) {
    let (rt, probe, seed, _server) = topology("1c");
    assert!(rt.block_on(probe.run(TIMEOUT, 0)).ok && rt.block_on(seed.run()), "the checks fail");
    for _ in 0..rounds {
        let failed = match which {
            "probed" => rt
                .block_on(futures::future::join_all((0..1_000).map(|_| probe.run(TIMEOUT, 0))))
                .iter()
                .filter(|o| !o.ok)
                .count(),
            "seed_method" => {
                rt.block_on(futures::future::join_all((0..1_000).map(|_| seed.run()))).iter().filter(|ok| !**ok).count()
            }
            other => panic!("SIGNET_PROBED_BENCH_WHICH: {other:?} is neither probed nor seed_method"),
        };
        assert_eq!(failed, 0, "{failed} of 1,000 checks failed");
    }
}

fn main() {
    if let Ok(rounds) = std::env::var("SIGNET_PROBED_BENCH_ROUNDS") {
        let which = std::env::var("SIGNET_PROBED_BENCH_WHICH").unwrap_or_else(|_| "probed".into());
        rounds_only(rounds.parse().expect("SIGNET_PROBED_BENCH_ROUNDS: a number of rounds"), &which);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    for name in ["1c", "2c"] {
        let (rt, probe, seed, _server) = topology(name);
        let seed_name = format!("{name}_seed_method");
        // The first check opens the connection; every later one reuses it.
        let first = rt.block_on(probe.run(TIMEOUT, 0));
        assert!(first.ok, "the bench's check fails: {}", first.message);
        assert!(rt.block_on(seed.run()), "the baseline's check fails");

        let mut single = c.benchmark_group("http_check_single");
        single.throughput(Throughput::Elements(1));
        single.measurement_time(Duration::from_secs(5));
        single.bench_function(name, |b| {
            b.iter(|| {
                let o = rt.block_on(probe.run(TIMEOUT, 0));
                assert!(o.ok, "{}", o.message);
            })
        });
        single.bench_function(&seed_name, |b| b.iter(|| assert!(rt.block_on(seed.run()))));
        single.finish();

        let mut many = c.benchmark_group("http_check_throughput");
        many.sampling_mode(SamplingMode::Flat);
        many.sample_size(10);
        many.measurement_time(Duration::from_secs(8));
        for n in CONCURRENCY {
            many.throughput(Throughput::Elements(n as u64));
            many.bench_with_input(BenchmarkId::new(name, format!("c_{n}")), &n, |b, &n| {
                b.iter(|| {
                    let outcomes = rt.block_on(futures::future::join_all((0..n).map(|_| probe.run(TIMEOUT, 0))));
                    let failed = outcomes.iter().filter(|o| !o.ok).count();
                    assert_eq!(failed, 0, "{failed} of {n} checks failed: {}", outcomes[0].message);
                })
            });
            many.bench_with_input(BenchmarkId::new(&seed_name, format!("c_{n}")), &n, |b, &n| {
                b.iter(|| {
                    let passed = rt.block_on(futures::future::join_all((0..n).map(|_| seed.run())));
                    let failed = passed.iter().filter(|ok| !**ok).count();
                    assert_eq!(failed, 0, "{failed} of {n} baseline checks failed");
                })
            });
        }
        many.finish();
    }
    c.final_summary();
}
