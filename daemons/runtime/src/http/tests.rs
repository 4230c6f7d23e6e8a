//! Tests for the HTTP scaffold: real requests over TCP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

struct TestHandler;

impl Handler for TestHandler {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let path = req.uri().path().to_owned();
        let peer = req.extensions().get::<PeerAddr>().copied();
        Box::pin(async move {
            match path.as_str() {
                "/echo" => {
                    use http_body_util::BodyExt;
                    return match req.into_body().collect().await {
                        Ok(body) => text_response(StatusCode::OK, body.to_bytes()),
                        Err(e) => text_response(StatusCode::REQUEST_TIMEOUT, format!("{e}\n")),
                    };
                }
                "/slow" => tokio::time::sleep(Duration::from_millis(400)).await,
                "/stuck" => futures::future::pending::<()>().await,
                "/panic" => panic!("handler bug"),
                "/missing" => return text_response(StatusCode::NOT_FOUND, "no\n"),
                "/peer" => return text_response(StatusCode::OK, format!("{:?}", peer.map(|p| p.0))),
                "/certs" => {
                    let certs = req.extensions().get::<PeerCertificates>().cloned();
                    let shown = certs.map(|c| c.0.iter().map(|d| hex(&openssl::sha::sha256(d))).collect::<Vec<_>>());
                    return text_response(StatusCode::OK, format!("{shown:?}"));
                }
                _ => {}
            }
            text_response(StatusCode::OK, format!("handled {path}\n"))
        })
    }
}

struct Running {
    addr: SocketAddr,
    health: Health,
    metrics: Metrics,
    token: CancellationToken,
    task: JoinHandle<io::Result<()>>,
}

async fn start(drain: Duration) -> Running {
    start_limited(drain, HttpLimits::default()).await
}

async fn start_limited(drain: Duration, limits: HttpLimits) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let health = Health::new();
    let metrics = Metrics::new("test");
    let token = CancellationToken::new();
    let routes = Routes { handler: Arc::new(TestHandler), metrics: metrics.clone(), health: health.clone() };
    let task = tokio::spawn(serve_with_drain(listener, None, limits, routes, token.clone(), drain));
    Running { addr, health, metrics, token, task }
}

/// One HTTP/1.1 request with `Connection: close`; returns (status, head, body).
async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("full response");
    let status = head[9..12].parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test]
async fn handlers_see_the_client_address() {
    let srv = start(DRAIN_TIMEOUT).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let me = s.local_addr().unwrap();
    s.write_all(b"GET /peer HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    assert!(text.ends_with(&format!("\r\n\r\nSome({me})")), "{text}");
    srv.token.cancel();
}

#[tokio::test]
async fn healthz_metrics_and_handler() {
    let srv = start(DRAIN_TIMEOUT).await;

    let (status, _, body) = request(srv.addr, "GET", "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    srv.health.set("signd", Err("cannot connect to signd".into()));
    let (status, _, body) = request(srv.addr, "GET", "/healthz").await;
    assert_eq!((status, body.as_str()), (503, "unhealthy\nsignd: cannot connect to signd\n"));
    srv.health.set("signd", Ok(()));
    assert_eq!(request(srv.addr, "GET", "/healthz").await.0, 200);
    let (status, head, _) = request(srv.addr, "POST", "/healthz").await;
    assert_eq!(status, 405);
    assert!(head.contains("allow: get, head"), "{head}");

    let (status, _, body) = request(srv.addr, "GET", "/issue/42").await;
    assert_eq!((status, body.as_str()), (200, "handled /issue/42\n"));
    let (status, _, _) = request(srv.addr, "GET", "/missing").await;
    assert_eq!(status, 404);
    let (status, _, body) = request(srv.addr, "GET", "/panic").await;
    assert_eq!((status, body.as_str()), (500, "internal error\n"));

    let (status, head, body) = request(srv.addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/openmetrics-text; version=1.0.0"), "{head}");
    for line in [
        "http_requests_total{daemon=\"test\",code=\"200\"} 3",
        "http_requests_total{daemon=\"test\",code=\"503\"} 1",
        "http_requests_total{daemon=\"test\",code=\"405\"} 1",
        "http_requests_total{daemon=\"test\",code=\"404\"} 1",
        "http_requests_total{daemon=\"test\",code=\"500\"} 1",
        "http_request_duration_seconds_count{daemon=\"test\"} 7",
    ] {
        assert!(body.contains(line), "missing {line:?} in\n{body}");
    }
    assert!(body.ends_with("# EOF\n"));
    // The metrics request itself is counted after it answered.
    assert!(srv.metrics.encode().contains("code=\"200\"} 4"));

    srv.token.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), srv.task).await.expect("serve returns after cancel");
    result.unwrap().unwrap();
    assert!(TcpStream::connect(srv.addr).await.is_err(), "listener closed");
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let srv = start(DRAIN_TIMEOUT).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let two = "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    s.write_all(two.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    assert_eq!(raw.matches("HTTP/1.1 200 OK").count(), 2, "{raw}");
    assert!(raw.contains("handled /a") && raw.contains("handled /b"));
    srv.token.cancel();
    srv.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn h2c_prior_knowledge() {
    let srv = start(DRAIN_TIMEOUT).await;
    let stream = TcpStream::connect(srv.addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = Request::get(format!("http://{}/healthz", srv.addr)).body(http_body_util::Empty::<Bytes>::new()).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    assert_eq!(resp.status(), StatusCode::OK);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"ok\n");
    drop(sender);
    srv.token.cancel();
    srv.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_lets_in_flight_request_finish_and_closes_idle() {
    let srv = start(DRAIN_TIMEOUT).await;
    // An idle keep-alive connection must not hold up shutdown.
    let mut idle = TcpStream::connect(srv.addr).await.unwrap();
    idle.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1024];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("handled /x"));

    let slow = tokio::spawn(request(srv.addr, "GET", "/slow"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let begun = Instant::now();
    srv.token.cancel();
    let (status, _, body) = slow.await.unwrap();
    assert_eq!((status, body.as_str()), (200, "handled /slow\n"));
    tokio::time::timeout(Duration::from_secs(5), srv.task).await.expect("serve returns").unwrap().unwrap();
    assert!(begun.elapsed() < Duration::from_secs(3));
    // The idle connection was closed by the server.
    let n = tokio::time::timeout(Duration::from_secs(2), idle.read(&mut buf))
        .await
        .expect("idle connection closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn drain_is_capped() {
    let srv = start(Duration::from_millis(300)).await;
    let stuck = tokio::spawn(async move {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        s.write_all(b"GET /stuck HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
        let mut raw = Vec::new();
        // The server drops the connection without an answer.
        let _ = s.read_to_end(&mut raw).await;
        raw
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let begun = Instant::now();
    srv.token.cancel();
    tokio::time::timeout(Duration::from_secs(5), srv.task)
        .await
        .expect("serve returns despite stuck request")
        .unwrap()
        .unwrap();
    let waited = begun.elapsed();
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    let raw = tokio::time::timeout(Duration::from_secs(2), stuck).await.expect("stuck connection closed").unwrap();
    assert!(raw.is_empty());
}

#[tokio::test]
async fn closure_handler_via_public_serve() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = |_req: Request<Body>| -> BoxFuture<'static, Response<Full<Bytes>>> {
        Box::pin(async { text_response(StatusCode::IM_A_TEAPOT, "tea\n") })
    };
    let token = CancellationToken::new();
    let limits = HttpLimits::default();
    let task = tokio::spawn(serve(
        listener,
        limits,
        Arc::new(handler),
        Metrics::new("t"),
        crate::health::Health::new(),
        token.clone(),
    ));
    let (status, _, body) = request(addr, "GET", "/").await;
    assert_eq!((status, body.as_str()), (418, "tea\n"));
    token.cancel();
    task.await.unwrap().unwrap();
}

#[test]
fn connection_errors_are_not_listener_errors() {
    assert!(is_connection_error(&io::Error::from(io::ErrorKind::ConnectionAborted)));
    assert!(!is_connection_error(&io::Error::from_raw_os_error(24))); // EMFILE
}

/// Limits short enough for a test: 300 ms for a head, 600 ms idle, a body 300 ms
/// plus 1 KiB/s.
fn short_limits(max_connections: usize) -> HttpLimits {
    HttpLimits {
        tls_handshake_timeout_ms: 300,
        header_timeout_ms: 300,
        body_timeout_ms: 300,
        body_min_bytes_per_second: 1024,
        idle_timeout_ms: 600,
        max_connections,
    }
}

/// Reads until the server closes the connection (or 5 s pass): what it sent, and when.
async fn until_closed(s: &mut TcpStream) -> (String, Instant) {
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "the server kept the connection open: {}", String::from_utf8_lossy(&raw));
    (String::from_utf8_lossy(&raw).into_owned(), Instant::now())
}

#[tokio::test]
async fn a_connection_that_sends_nothing_or_half_a_head_is_closed() {
    let srv = start_limited(DRAIN_TIMEOUT, short_limits(0)).await;
    let begun = Instant::now();
    let mut silent = TcpStream::connect(srv.addr).await.unwrap();
    let mut half = TcpStream::connect(srv.addr).await.unwrap();
    half.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n").await.unwrap();
    let (sent, at) = until_closed(&mut silent).await;
    assert_eq!(sent, "");
    let waited = at - begun;
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(2), "{waited:?}");
    let (_, at) = until_closed(&mut half).await;
    assert!(at - begun < Duration::from_secs(2), "{:?}", at - begun);
    let metrics = srv.metrics.encode();
    assert!(metrics.contains("http_connections_closed_total{daemon=\"test\",reason=\"head_timeout\"} 2"), "{metrics}");
    srv.token.cancel();
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let srv = start_limited(DRAIN_TIMEOUT, short_limits(0)).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    let answered = Instant::now();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("handled /x"));
    // Idle for longer than a head may take, but less than the idle timeout: still open.
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.write_all(b"GET /y HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("handled /y"), "kept alive past the head timeout");
    let answered_again = Instant::now();
    let (_, at) = until_closed(&mut s).await;
    let idle = at - answered_again;
    assert!(idle >= Duration::from_millis(500) && idle < Duration::from_secs(2), "{idle:?}");
    assert!(answered_again - answered >= Duration::from_millis(400));
    assert!(srv.metrics.encode().contains("reason=\"idle_timeout\"} 1"));
    srv.token.cancel();
}

#[tokio::test]
async fn a_stalled_body_ends_the_request_and_the_connection() {
    let srv = start_limited(DRAIN_TIMEOUT, short_limits(0)).await;
    // A whole body is read.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        .await
        .unwrap();
    let (sent, _) = until_closed(&mut s).await;
    assert!(sent.starts_with("HTTP/1.1 200") && sent.ends_with("hello"), "{sent}");
    // Ten bytes of a hundred, then nothing.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let begun = Instant::now();
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789").await.unwrap();
    let (sent, at) = until_closed(&mut s).await;
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains("too slowly"), "{sent}");
    assert!(sent.to_ascii_lowercase().contains("connection: close"), "{sent}");
    let waited = at - begun;
    // 300 ms of grace, plus 10 bytes' worth at 1 KiB/s.
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(2), "{waited:?}");
    assert!(srv.metrics.encode().contains("reason=\"body_too_slow\"} 1"));
    srv.token.cancel();
}

#[tokio::test]
async fn an_idle_h2_connection_is_closed_too() {
    let srv = start_limited(DRAIN_TIMEOUT, short_limits(0)).await;
    let stream = TcpStream::connect(srv.addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    let driver = tokio::spawn(conn);
    let req = Request::get(format!("http://{}/a", srv.addr)).body(http_body_util::Empty::<Bytes>::new()).unwrap();
    assert_eq!(sender.send_request(req).await.unwrap().status(), StatusCode::OK);
    let answered = Instant::now();
    // The connection task ends when the server closes the connection.
    tokio::time::timeout(Duration::from_secs(5), driver).await.expect("h2 connection closed").unwrap().ok();
    assert!(answered.elapsed() >= Duration::from_millis(250), "{:?}", answered.elapsed());
    srv.token.cancel();
}

/// Thousands of idle connections against a bound of 500: the longest idle are shed, a
/// client that asks something is still answered at once, and the server stays at its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_flood_does_not_lock_out_a_client() {
    let mut limits = short_limits(500);
    // Long enough that no idle connection times out during the test: only the bound acts.
    limits.header_timeout_ms = 60_000;
    limits.idle_timeout_ms = 60_000;
    let srv = start_limited(DRAIN_TIMEOUT, limits).await;
    let mut idle = Vec::new();
    for _ in 0..3000 {
        idle.push(TcpStream::connect(srv.addr).await.unwrap());
    }
    let begun = Instant::now();
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(1), request(srv.addr, "GET", "/real"))
        .await
        .expect("a real client is answered within a second");
    assert_eq!((status, body.as_str()), (200, "handled /real\n"));
    assert!(begun.elapsed() < Duration::from_secs(1));
    let metrics = srv.metrics.encode();
    let open: i64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("http_connections_open{daemon=\"test\"} "))
        .and_then(|v| v.parse().ok())
        .expect("http_connections_open");
    assert!(open <= 500, "{open} open\n{metrics}");
    let shed: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("http_connections_closed_total{daemon=\"test\",reason=\"shed\"} "))
        .and_then(|v| v.parse().ok())
        .expect("shed count");
    assert!(shed >= 2500, "{shed} shed");
    drop(idle);
    srv.token.cancel();
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A self-signed P-256 certificate for `cn` and its key.
fn self_signed(cn: &str) -> (openssl::x509::X509, openssl::pkey::PKey<openssl::pkey::Private>) {
    use openssl::{asn1::Asn1Time, bn::BigNum, ec, hash::MessageDigest, nid::Nid, pkey::PKey, x509};
    let key =
        PKey::from_ec_key(ec::EcKey::generate(&ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap())
            .unwrap();
    let mut name = x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = x509::X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(7).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::days_from_now(1).unwrap()).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    (b.build(), key)
}

/// GET /certs over TLS, with `identity` as the client certificate if given.
async fn certs_over_tls(
    addr: SocketAddr,
    identity: Option<&(openssl::x509::X509, openssl::pkey::PKey<openssl::pkey::Private>)>,
) -> String {
    use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
    let mut c = SslConnector::builder(SslMethod::tls_client()).unwrap();
    c.set_verify(SslVerifyMode::NONE);
    if let Some((cert, key)) = identity {
        c.set_certificate(cert).unwrap();
        c.set_private_key(key).unwrap();
    }
    let ssl = c.build().configure().unwrap().into_ssl("localhost").unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = SslStream::new(ssl, tcp).unwrap();
    Pin::new(&mut tls).connect().await.unwrap();
    tls.write_all(b"GET /certs HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8(raw).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_owned()
}

#[tokio::test]
async fn a_tls_client_certificate_reaches_the_handler_unverified_and_none_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let (server_cert, server_key) = self_signed("localhost");
    let (chain, key) = (dir.path().join("chain.pem"), dir.path().join("key.pem"));
    std::fs::write(&chain, server_cert.to_pem().unwrap()).unwrap();
    std::fs::write(&key, server_key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    let acceptor = Arc::new(crate::tls::acceptor_requesting_client_certs(&chain, &key).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let token = CancellationToken::new();
    let routes = Routes { handler: Arc::new(TestHandler), metrics: Metrics::new("test"), health: Health::new() };
    let task = tokio::spawn(serve_with_drain(
        listener,
        Some(acceptor),
        HttpLimits::default(),
        routes,
        token.clone(),
        DRAIN_TIMEOUT,
    ));
    // A self-signed client certificate from nobody the server knows: passed on as it is.
    let client = self_signed("a client");
    let leaf = hex(&openssl::sha::sha256(&client.0.to_der().unwrap()));
    assert_eq!(certs_over_tls(addr, Some(&client)).await, format!("Some([{leaf:?}])"));
    // No certificate: the request is served, with an empty chain.
    assert_eq!(certs_over_tls(addr, None).await, "Some([])");
    // An acceptor that does not ask: an empty chain too (and plain HTTP: none at all).
    let plain = crate::tls::acceptor_from_files(&chain, &key).unwrap();
    assert!(plain.context().verify_mode().is_empty());
    let srv = start(DRAIN_TIMEOUT).await;
    let (_, _, body) = request(srv.addr, "GET", "/certs").await;
    assert_eq!(body, "None");
    srv.token.cancel();
    token.cancel();
    task.await.unwrap().unwrap();
}

/// Answers with the name of the thread the request runs on.
struct ThreadName;

impl Handler for ThreadName {
    fn handle(&self, _req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let name = std::thread::current().name().unwrap_or("unnamed").to_owned();
        Box::pin(async move { text_response(StatusCode::OK, name) })
    }
}

/// One keep-alive HTTP/1.1 request on `s`; returns the body (the handler's short answer).
async fn keep_alive_request(s: &mut TcpStream) -> String {
    s.write_all(b"GET /which HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed before the answer");
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.parse().unwrap()))
                .expect("content-length");
            if body.len() >= len {
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                return body[..len].to_owned();
            }
        }
    }
}

#[tokio::test]
async fn threads_share_the_connections_and_answer_on_the_thread_that_accepted() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Metrics::new("test");
    let routes = Routes { handler: Arc::new(ThreadName), metrics: metrics.clone(), health: Health::new() };
    let token = CancellationToken::new();
    let task = tokio::spawn(serve_on_threads(listener, 2, None, HttpLimits::default(), routes, token.clone()));

    // Eight connections held open, one after another: the balance keeps the
    // threads within two connections of each other, so each holds at least three.
    let mut conns = Vec::new();
    let mut served_by = Vec::new();
    for _ in 0..8 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        served_by.push(keep_alive_request(&mut s).await);
        conns.push(s);
    }
    for name in ["http-0", "http-1"] {
        let n = served_by.iter().filter(|t| *t == name).count();
        assert!(n >= 3, "{name} holds {n} of the connections: {served_by:?}");
    }
    // A connection's later requests stay on the thread that accepted it.
    for (s, first) in conns.iter_mut().zip(&served_by) {
        assert_eq!(&keep_alive_request(s).await, first);
    }
    // /healthz and the request metrics work as on one runtime.
    let (status, _, body) = request(addr, "GET", "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert!(metrics.encode().contains("http_requests_total{daemon=\"test\",code=\"200\"} 17"), "{}", metrics.encode());

    drop(conns);
    token.cancel();
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("threads stop").unwrap().unwrap();
    assert!(TcpStream::connect(addr).await.is_err(), "the listener is closed after shutdown");
}
