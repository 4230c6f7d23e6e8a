//! ACME handlers one by one (criterion): each RFC 8555 resource timed as one
//! request over a keep-alive HTTPS connection, against acmed and, in the same
//! run, against any other ACME server named (Pebble, from
//! `bench/scripts/acme-bench.sh --handlers`).
//!
//! Group `acme_handler`, ids `<handler>/<server>`:
//! - `new_nonce`: HEAD newNonce, the HTTP floor every other handler stands on;
//! - `directory`: GET of the directory;
//! - `new_account`: newAccount with a key never seen (key generation untimed);
//! - `new_order`: newOrder for a fresh DNS name;
//! - `authz`: POST-as-GET of a pending authorization;
//! - `challenge`: the POST that starts an http-01 validation (the order made,
//!   the answer published and the validation awaited outside the timing);
//! - `finalize`: finalize of a ready order with a P-256 CSR (the CSR made,
//!   and the order polled to `valid` where the server answers `processing`,
//!   outside the timing); for acmed this is building the certificate,
//!   signd's signature and the record in ocspd, all before the answer;
//! - `order`: POST-as-GET of a valid order;
//! - `certificate`: POST-as-GET of the PEM chain;
//! - `renewal_info`: GET renewalInfo (RFC 9773) of that certificate.
//!
//! Configuration (environment; without it the bench says so and does nothing):
//! - `SIGNET_ACME_BENCH_SERVERS`: `name=directory-url|ca-bundle` pairs joined
//!   by `;`, e.g. `acmed=https://127.0.0.1:14000/directory|/state/acmed/tls-ca.pem`;
//! - `SIGNET_ACME_BENCH_HTTP01`: where the http-01 responder listens (the
//!   servers' http-01 port), e.g. `127.0.0.1:5002`;
//! - `SIGNET_ACME_BENCH_DOMAIN`: the zone the names are made in (the
//!   servers' resolver answers `*.<zone> A 127.0.0.1`).
#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use signet_acme::types::{ChallengeType, Identifier, IdentifierType, Order, OrderStatus};
use signet_bench::acme_bench::challenge::{ChallengeKind, Responder, ResponderConfig};
use signet_bench::acme_bench::client::{Client, Polling};
use signet_bench::acme_bench::http::{tls_connector, Connection, Origin};
use signet_bench::acme_bench::keys::{self, KeyType};
use signet_bench::acme_bench::IdentifierKind;

const PEM_CHAIN: &str = "application/pem-certificate-chain";

struct Server {
    name: String,
    directory: String,
    ca_bundle: String,
}

/// One server's client, its responder's shared state and the names it has used.
struct Target<'a> {
    server: &'a Server,
    client: Client,
    responder: &'a Responder,
    domain: &'a str,
    next: u64,
}

impl Target<'_> {
    fn fresh_name(&mut self) -> Identifier {
        self.next += 1;
        Identifier {
            kind: IdentifierType::Dns,
            value: format!("h{}-{}.{}", std::process::id(), self.next, self.domain),
        }
    }

    /// A new order for a fresh name: (order URL, order).
    async fn pending_order(&mut self) -> (String, Order) {
        let name = self.fresh_name();
        self.client.new_order(name).await.expect("newOrder")
    }

    /// A new order, validated: (order URL, order in state `ready`).
    async fn ready_order(&mut self) -> (String, Order) {
        let (order_url, order) = self.pending_order().await;
        let authz_url = order.authorizations[0].clone();
        let (challenge_url, published) = self.publish(&authz_url).await;
        let (_, retry) = self.client.respond(&challenge_url).await.expect("challenge");
        self.client.poll_authorization(&authz_url, retry).await.expect("authorization valid");
        self.responder.retract(published).await.expect("retract");
        let order = self.order(&order_url).await;
        assert_eq!(order.status, OrderStatus::Ready, "{}: order not ready after validation", self.server.name);
        (order_url, order)
    }

    /// Publishes the http-01 answer of the authorization at `authz_url`: the
    /// challenge's URL and what to retract.
    async fn publish(&mut self, authz_url: &str) -> (String, signet_bench::acme_bench::challenge::Published) {
        let (authz, _) = self.client.authorization(authz_url).await.expect("authorization");
        let challenge =
            authz.challenges.iter().find(|c| c.kind == ChallengeType::Http01).expect("an http-01 challenge").clone();
        let token = challenge.token.expect("token");
        let key_authorization = signet_acme::validate::key_authorization(&token, self.client.jwk());
        let published = self.responder.publish(&authz.identifier, &token, &key_authorization).await.expect("publish");
        (challenge.url, published)
    }

    async fn order(&mut self, url: &str) -> Order {
        let r = self.client.post_as_get(url, None).await.expect("order");
        serde_json::from_slice(&r.body).expect("order JSON")
    }

    fn csr(&self, identifier: &str) -> Vec<u8> {
        let key = KeyType::EcP256.generate().unwrap();
        keys::csr(&key, KeyType::EcP256, IdentifierKind::Dns, identifier).unwrap()
    }

    /// An order taken to `valid`: (order URL, certificate URL).
    async fn issued(&mut self) -> (String, String) {
        let (order_url, order) = self.ready_order().await;
        let csr = self.csr(&order.identifiers[0].value);
        let (order, retry) = self.client.finalize(&order.finalize, &csr).await.expect("finalize");
        let order = self.client.poll_order(&order_url, order, retry).await.expect("order valid");
        (order_url, order.certificate.expect("certificate URL"))
    }
}

/// A client of `server` with a fresh account key (no account yet).
fn connect(rt: &tokio::runtime::Runtime, server: &Server, polling: Polling) -> Client {
    let tls = tls_connector(Some(std::path::Path::new(&server.ca_bundle))).expect("CA bundle");
    let origin = Origin::of(&server.directory).expect("directory URL");
    let conn = Connection::new(origin, Some(tls), Duration::from_secs(30));
    rt.block_on(Client::new(conn, &server.directory, polling)).expect("directory")
}

/// The sum over `iters` iterations of what `one` timed (each iteration does
/// its own untimed setup and cleanup around the request it times).
fn sum_over(iters: u64, mut one: impl FnMut() -> Duration) -> Duration {
    (0..iters).map(|_| one()).sum()
}

fn servers() -> Option<(Vec<Server>, String, String)> {
    let spec = std::env::var("SIGNET_ACME_BENCH_SERVERS").ok()?;
    let http01 = std::env::var("SIGNET_ACME_BENCH_HTTP01").ok()?;
    let domain = std::env::var("SIGNET_ACME_BENCH_DOMAIN").unwrap_or_else(|_| "signet.test".into());
    let servers = spec
        .split(';')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (name, rest) = s.split_once('=').expect("name=directory|ca-bundle");
            let (directory, ca_bundle) = rest.split_once('|').expect("name=directory|ca-bundle");
            Server { name: name.into(), directory: directory.into(), ca_bundle: ca_bundle.into() }
        })
        .collect();
    Some((servers, http01, domain))
}

fn main() {
    let Some((servers, http01, domain)) = servers() else {
        eprintln!(
            "acme_handlers: SIGNET_ACME_BENCH_SERVERS and SIGNET_ACME_BENCH_HTTP01 are not set; \
             run it through bench/scripts/acme-bench.sh --handlers"
        );
        return;
    };
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let responder = rt
        .block_on(Responder::start(
            ChallengeKind::Http01,
            &ResponderConfig {
                http01_listen: http01.parse().expect("SIGNET_ACME_BENCH_HTTP01: an address"),
                tlsalpn01_listen: "127.0.0.1:0".parse().unwrap(),
                dns_zone: None,
            },
        ))
        .expect("http-01 responder");
    let polling = Polling { interval: Duration::from_millis(2), timeout: Duration::from_secs(30) };

    let mut targets: Vec<Target> = servers
        .iter()
        .map(|server| {
            let mut client = connect(&rt, server, polling);
            rt.block_on(client.create_account()).expect("account");
            Target { server, client, responder: &responder, domain: &domain, next: 0 }
        })
        .collect();

    let mut g = c.benchmark_group("acme_handler");
    for t in &mut targets {
        let name = t.server.name.clone();
        g.bench_function(BenchmarkId::new("new_nonce", &name), |b| {
            b.iter(|| rt.block_on(t.client.new_nonce()).unwrap())
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        let directory = t.server.directory.clone();
        g.bench_function(BenchmarkId::new("directory", &name), |b| {
            b.iter(|| rt.block_on(t.client.get(&directory)).unwrap())
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        // Its own client, so the targets' accounts stay as they are.
        let mut fresh = connect(&rt, t.server, polling);
        g.bench_function(BenchmarkId::new("new_account", &name), |b| {
            b.iter_custom(|iters| {
                sum_over(iters, || {
                    fresh.forget_account().unwrap();
                    let start = Instant::now();
                    rt.block_on(fresh.create_account()).unwrap();
                    start.elapsed()
                })
            })
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        g.bench_function(BenchmarkId::new("new_order", &name), |b| {
            b.iter(|| {
                let id = t.fresh_name();
                rt.block_on(t.client.new_order(id)).unwrap()
            })
        });
        let (_, order) = rt.block_on(t.pending_order());
        let authz = order.authorizations[0].clone();
        g.bench_function(BenchmarkId::new("authz", &name), |b| {
            b.iter(|| rt.block_on(t.client.authorization(&authz)).unwrap())
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        g.bench_function(BenchmarkId::new("challenge", &name), |b| {
            b.iter_custom(|iters| {
                sum_over(iters, || {
                    let (_, order) = rt.block_on(t.pending_order());
                    let authz_url = order.authorizations[0].clone();
                    let (challenge_url, published) = rt.block_on(t.publish(&authz_url));
                    let start = Instant::now();
                    let (_, retry) = rt.block_on(t.client.respond(&challenge_url)).unwrap();
                    let took = start.elapsed();
                    rt.block_on(t.client.poll_authorization(&authz_url, retry)).expect("authorization valid");
                    rt.block_on(t.responder.retract(published)).unwrap();
                    took
                })
            })
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        g.bench_function(BenchmarkId::new("finalize", &name), |b| {
            b.iter_custom(|iters| {
                sum_over(iters, || {
                    let (order_url, order) = rt.block_on(t.ready_order());
                    let csr = t.csr(&order.identifiers[0].value);
                    let start = Instant::now();
                    let (order, retry) = rt.block_on(t.client.finalize(&order.finalize, &csr)).unwrap();
                    let took = start.elapsed();
                    rt.block_on(t.client.poll_order(&order_url, order, retry)).expect("order valid");
                    took
                })
            })
        });
    }
    for t in &mut targets {
        let name = t.server.name.clone();
        let (order_url, cert_url) = rt.block_on(t.issued());
        g.bench_function(BenchmarkId::new("order", &name), |b| {
            b.iter(|| rt.block_on(t.client.post_as_get(&order_url, None)).unwrap())
        });
        g.bench_function(BenchmarkId::new("certificate", &name), |b| {
            b.iter(|| rt.block_on(t.client.post_as_get(&cert_url, Some(PEM_CHAIN))).unwrap())
        });
        let chain = rt.block_on(t.client.post_as_get(&cert_url, Some(PEM_CHAIN))).unwrap().body;
        let leaf = openssl::x509::X509::stack_from_pem(&chain).unwrap().remove(0);
        let aki = leaf.authority_key_id().expect("an AKI").as_slice().to_vec();
        let serial = serial_content_octets(&leaf);
        match t.client.directory().renewal_info.clone() {
            Some(base) => {
                let url =
                    format!("{}/{}", base.trim_end_matches('/'), signet_acme::types::renewal_cert_id(&aki, &serial));
                g.bench_function(BenchmarkId::new("renewal_info", &name), |b| {
                    b.iter(|| rt.block_on(t.client.get(&url)).unwrap())
                });
            }
            None => eprintln!("{name}: no renewalInfo in the directory"),
        }
    }
    g.finish();
    c.final_summary();
}

/// The serial number as the content octets of its DER INTEGER (a leading
/// zero when the high bit is set).
fn serial_content_octets(cert: &openssl::x509::X509) -> Vec<u8> {
    let bytes = cert.serial_number().to_bn().unwrap().to_vec();
    if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        [&[0u8][..], &bytes].concat()
    } else {
        bytes
    }
}
