//! acme-bench against the mock ACME server ([`super::mock`]): every phase,
//! every challenge type, both identifier types, badNonce retries, failed
//! validations and the CA key type check, over real sockets and TLS.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::time::Duration;

use super::client::Polling;
use super::mock::{self, Quirks, Targets};
use super::{ChallengeKind, Config, IdentifierKind, KeyType, NoProbe, Report, ResponderConfig};

struct Run {
    challenge: ChallengeKind,
    identifier: IdentifierKind,
    key_type: KeyType,
    ca_key_type: KeyType,
    /// The CA key type the mock really has.
    mock_ca: KeyType,
    quirks: Quirks,
    clients: usize,
    requests: u64,
    warmup: u64,
    /// Validate http-01 on another port than acme-bench serves.
    wrong_http01_port: bool,
}

impl Default for Run {
    fn default() -> Run {
        Run {
            challenge: ChallengeKind::Http01,
            identifier: IdentifierKind::Dns,
            key_type: KeyType::EcP256,
            ca_key_type: KeyType::EcP256,
            mock_ca: KeyType::EcP256,
            quirks: Quirks::default(),
            clients: 3,
            requests: 6,
            warmup: 2,
            wrong_http01_port: false,
        }
    }
}

async fn run(r: Run) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone");
    std::fs::write(&zone, "*.bench.test A 127.0.0.1\n").unwrap();
    let responders = ResponderConfig {
        http01_listen: mock::free_port(),
        tlsalpn01_listen: mock::free_port(),
        dns_zone: Some(zone.clone()),
    };
    let targets = Targets {
        http01: if r.wrong_http01_port { mock::free_port() } else { responders.http01_listen },
        tlsalpn01: responders.tlsalpn01_listen,
        zone: zone.clone(),
    };
    let server = mock::start(dir.path(), r.mock_ca, targets, r.quirks).await;
    let config = Config {
        directory: server.directory.clone(),
        ca_bundle: Some(server.tls_ca.clone()),
        clients: r.clients,
        requests: r.requests,
        warmup: r.warmup,
        key_type: r.key_type,
        ca_key_type: r.ca_key_type,
        challenge: r.challenge,
        identifier: r.identifier,
        domain_suffix: "bench.test".into(),
        ip_address: IpAddr::from([127, 0, 0, 1]),
        responders,
        polling: Polling { interval: Duration::from_millis(5), timeout: Duration::from_secs(10) },
        timeout: Duration::from_secs(10),
        verify_cert: true,
        label: Some("e2e".into()),
        threads: 1,
    };
    let report = super::run(&config, &NoProbe).await.unwrap();
    // The zone is as it was.
    assert_eq!(std::fs::read_to_string(&zone).unwrap(), "*.bench.test A 127.0.0.1\n");
    report
}

fn assert_passed(report: &Report, requests: u64) {
    assert!(report.passed, "{}", report.text());
    assert_eq!(report.summary.issuances, requests);
    assert_eq!(report.summary.failed, 0);
    assert!(report.errors.is_empty());
    for (phase, ms) in &report.summary.phase_mean_ms {
        assert!(*ms > 0.0, "{phase} took no time: {}", report.text());
    }
}

#[tokio::test]
async fn http01_dns_names() {
    let report = run(Run::default()).await;
    assert_passed(&report, 6);
    assert_eq!(report.warmup.issuances, 2);
    assert_eq!(report.ca.observed.as_deref(), Some("ec:P-256"));
    assert_eq!(report.ca.matches, Some(true));
    // One connection per client: keep-alive held.
    assert_eq!(report.client.connections_opened, 3);
    let json = report.json();
    assert_eq!(json["summary"]["issuances"], 6);
    assert_eq!(json["config"]["challenge"], "http-01");
    assert_eq!(json["label"], "e2e");
    assert!(json["summary"]["phase_mean_ms"]["finalize"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn tls_alpn01_ip_address_from_several_clients() {
    let report =
        run(Run { challenge: ChallengeKind::TlsAlpn01, identifier: IdentifierKind::Ip, ..Run::default() }).await;
    assert_passed(&report, 6);
}

#[tokio::test]
async fn tls_alpn01_dns_names() {
    let report = run(Run { challenge: ChallengeKind::TlsAlpn01, ..Run::default() }).await;
    assert_passed(&report, 6);
}

#[tokio::test]
async fn dns01_zone_file() {
    let report = run(Run { challenge: ChallengeKind::Dns01, ..Run::default() }).await;
    assert_passed(&report, 6);
}

#[tokio::test]
async fn dns_persist01_zone_file() {
    let report = run(Run { challenge: ChallengeKind::DnsPersist01, ..Run::default() }).await;
    assert_passed(&report, 6);
}

#[tokio::test]
async fn http01_ip_address() {
    let report =
        run(Run { identifier: IdentifierKind::Ip, clients: 2, requests: 3, warmup: 0, ..Run::default() }).await;
    assert_passed(&report, 3);
}

#[tokio::test]
async fn bad_nonces_are_retried() {
    let report = run(Run { quirks: Quirks { bad_nonce_every: 4 }, ..Run::default() }).await;
    assert_passed(&report, 6);
    assert!(report.client.bad_nonce_retries > 0);
}

#[tokio::test]
async fn post_quantum_chain() {
    let report = run(Run {
        key_type: KeyType::MlDsa44,
        ca_key_type: KeyType::MlDsa65,
        mock_ca: KeyType::MlDsa65,
        clients: 1,
        requests: 2,
        warmup: 0,
        ..Run::default()
    })
    .await;
    assert_passed(&report, 2);
    assert_eq!(report.ca.observed.as_deref(), Some("ml-dsa-65"));
}

#[tokio::test]
async fn failed_validations_are_counted_by_problem_type() {
    let report = run(Run { wrong_http01_port: true, clients: 2, requests: 4, warmup: 1, ..Run::default() }).await;
    assert!(!report.passed);
    assert_eq!(report.summary.issuances, 0);
    assert_eq!(report.summary.failed, 4);
    assert_eq!(report.errors["connection"].count, 4, "{}", report.text());
    assert_eq!(report.warmup.failed, 1);
    assert!(report.text().contains("connection         e.g. authorization became invalid"), "{}", report.text());
}

#[tokio::test]
async fn a_ca_key_type_other_than_given_fails_the_run() {
    let report = run(Run { ca_key_type: KeyType::EcP384, clients: 1, requests: 1, warmup: 0, ..Run::default() }).await;
    assert!(!report.passed);
    assert_eq!(report.ca.matches, Some(false));
    assert!(report.text().contains("--ca-key-type ec:P-384 but the CA signs with ec:P-256"), "{}", report.text());
}

#[tokio::test]
async fn an_unreachable_server_fails_setup() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        directory: format!("https://{}/directory", mock::free_port()),
        ca_bundle: None,
        clients: 2,
        requests: 1,
        warmup: 0,
        key_type: KeyType::EcP256,
        ca_key_type: KeyType::EcP256,
        challenge: ChallengeKind::Http01,
        identifier: IdentifierKind::Dns,
        domain_suffix: "bench.test".into(),
        ip_address: IpAddr::from([127, 0, 0, 1]),
        responders: ResponderConfig {
            http01_listen: mock::free_port(),
            tlsalpn01_listen: mock::free_port(),
            dns_zone: Some(dir.path().join("z")),
        },
        polling: Polling { interval: Duration::from_millis(5), timeout: Duration::from_secs(1) },
        timeout: Duration::from_secs(5),
        verify_cert: false,
        label: None,
        threads: 1,
    };
    let report = super::run(&config, &NoProbe).await.unwrap();
    assert!(!report.passed);
    assert_eq!(report.setup_errors["transport"].count, 2);
    assert_eq!(report.summary.issuances, 0);
}

/// Many clients and issuances against the mock, for a look at the client's
/// own ceiling and at behaviour under concurrency (run by hand:
/// `cargo test --release -p signet-bench --lib mock_load -- --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a load run, by hand"]
async fn mock_load() {
    for challenge in [ChallengeKind::Http01, ChallengeKind::TlsAlpn01, ChallengeKind::Dns01] {
        let report = run(Run { challenge, clients: 25, requests: 500, warmup: 25, ..Run::default() }).await;
        print!("{}", report.text());
        assert_passed(&report, 500);
    }
}
