//! The shared HTTP scaffold's limits through a real daemon (issue 22 item 11): acmed over
//! TLS with an `[http]` table, flooded with idle connections, still answers a real client
//! within a second; a connection that never completes its TLS handshake, and a TLS
//! connection that never sends a request, are closed on time.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use signet_tests::acme::AcmeStack;

const LIMITS: &str = "[http]\nmax_connections = 300\ntls_handshake_timeout_ms = 1000\nheader_timeout_ms = 1500\n";
/// The flood: only the bound acts (no connection times out during the test, however slowly
/// a loaded machine accepts them).
const FLOOD_LIMITS: &str =
    "[http]\nmax_connections = 300\ntls_handshake_timeout_ms = 60000\nheader_timeout_ms = 60000\n";

/// Waits for the server to close `s` (at most 10 s); when it did.
fn closed_at(s: &mut TcpStream) -> Instant {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Instant::now(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Instant::now(),
            Err(e) => panic!("the server kept the connection open: {e}"),
        }
    }
}

#[test]
fn an_idle_connection_flood_does_not_lock_out_a_client() {
    let stack = AcmeStack::start(FLOOD_LIMITS);
    let addr = format!("127.0.0.1:{}", stack.port);
    // Three thousand connections that never start TLS: ten times the bound.
    let mut idle: Vec<TcpStream> = (0..3000).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let begun = Instant::now();
    let (status, _, body) = stack.get("/directory");
    let took = begun.elapsed();
    assert_eq!(status, 200, "{}\n{}", String::from_utf8_lossy(&body), stack.log());
    assert!(String::from_utf8_lossy(&body).contains("newNonce"));
    assert!(took < Duration::from_secs(1), "a real client waited {took:?} behind idle connections");
    // The oldest idle connection was shed, and acmed holds no more than its bound.
    let shed = closed_at(&mut idle[0]);
    assert!(shed < begun + Duration::from_secs(5), "the oldest idle connection was not shed");
    let (_, _, metrics) = stack.get("/metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    let value = |prefix: &str| -> f64 {
        metrics.lines().find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok()).unwrap_or(-1.0)
    };
    assert!(value("http_connections_open{daemon=\"acmed\"} ") <= 300.0, "{metrics}");
    assert!(value("http_connections_closed_total{daemon=\"acmed\",reason=\"shed\"} ") >= 2000.0, "{metrics}");
    drop(idle);
}

#[test]
fn a_connection_that_never_starts_tls_is_closed_after_the_handshake_timeout() {
    let stack = AcmeStack::start(LIMITS);
    let begun = Instant::now();
    let mut silent = TcpStream::connect(format!("127.0.0.1:{}", stack.port)).unwrap();
    let waited = closed_at(&mut silent) - begun;
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "{waited:?}");
    let (_, _, metrics) = stack.get("/metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(metrics.contains("reason=\"tls_handshake_timeout\"} 1"), "{metrics}");
}

#[test]
fn a_tls_connection_without_a_request_is_closed_after_the_header_timeout() {
    let stack = AcmeStack::start(LIMITS);
    let begun = Instant::now();
    let mut client = std::process::Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{}", stack.port)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // s_client ends when the server closes the connection; its stdin stays open.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if client.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "acmed kept a TLS connection without a request open");
        std::thread::sleep(Duration::from_millis(20));
    }
    let waited = begun.elapsed();
    assert!(waited >= Duration::from_millis(1200), "closed too early: {waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    let (code, _, metrics) = stack.get("/metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    assert_eq!(code, 200);
    assert!(metrics.contains("reason=\"head_timeout\"} 1"), "{metrics}");
}
