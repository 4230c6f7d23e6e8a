//! A small in-process ACME server for the end-to-end tests: enough of RFC
//! 8555 to drive acme-bench through every phase, checking what acme-bench
//! sends the way a CA must (signet-acme's JWS verification, nonces, URLs,
//! signet-ca's CSR parser) and validating challenges for real against
//! acme-bench's responders. Not a CA: no policy, no persistence.

// Test code: a problem is returned by value as the server would send it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use openssl::asn1::{Asn1Integer, Asn1Time};
use openssl::bn::BigNum;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{Ssl, SslAcceptor, SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
use openssl::x509::{X509Builder, X509NameBuilder, X509Req, X509};
use serde_json::{json, Value};
use signet_acme::jws::SignedRequest;
use signet_acme::types::{Identifier, IdentifierType, NewOrder};
use signet_acme::{Jwk, Problem, ProblemType};
use tokio::net::TcpListener;
use tokio_openssl::SslStream;

use super::keys::KeyType;

/// How the mock misbehaves, to test the client's handling.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quirks {
    /// Refuse every Nth signed request's nonce with badNonce (0: never).
    pub bad_nonce_every: u64,
}

/// Where the mock validates challenges.
#[derive(Clone, Debug)]
pub struct Targets {
    /// The http-01 port on 127.0.0.1.
    pub http01: SocketAddr,
    /// The tls-alpn-01 port on 127.0.0.1.
    pub tlsalpn01: SocketAddr,
    /// The zone file dns-01 records are looked up in.
    pub zone: PathBuf,
}

/// A running mock ACME server.
pub struct MockAcme {
    /// The directory URL.
    pub directory: String,
    /// A PEM file with the certificate of the server's TLS (for `--ca-bundle`).
    pub tls_ca: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for MockAcme {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Pending,
    Processing,
    Ready,
    Valid,
    Invalid,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Ready => "ready",
            Status::Valid => "valid",
            Status::Invalid => "invalid",
        }
    }
}

struct Authz {
    account: String,
    identifier: Identifier,
    token: String,
    status: Status,
    error: Option<Problem>,
}

struct Order {
    account: String,
    identifier: Identifier,
    authz: u64,
    status: Status,
    cert: Option<u64>,
}

struct State {
    base: String,
    targets: Targets,
    quirks: Quirks,
    ca_key: PKey<Private>,
    ca_key_type: KeyType,
    ca_cert: X509,
    next: AtomicU64,
    signed_requests: AtomicU64,
    nonces: Mutex<HashSet<String>>,
    accounts: Mutex<HashMap<String, Jwk>>,
    authzs: Mutex<HashMap<u64, Authz>>,
    orders: Mutex<HashMap<u64, Order>>,
    certs: Mutex<HashMap<u64, String>>,
}

/// Starts a mock on 127.0.0.1 whose CA has a key of `ca_key_type`; writes
/// its TLS trust anchor into `dir`.
pub async fn start(dir: &Path, ca_key_type: KeyType, targets: Targets, quirks: Quirks) -> MockAcme {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let base = format!("https://{addr}");
    let tls_key = KeyType::EcP256.generate().unwrap();
    let tls_cert = self_signed("mock acme", &tls_key, KeyType::EcP256, Some("127.0.0.1"));
    let tls_ca = dir.join("mock-tls.pem");
    std::fs::write(&tls_ca, tls_cert.to_pem().unwrap()).unwrap();
    let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
    acceptor.set_certificate(&tls_cert).unwrap();
    acceptor.set_private_key(&tls_key).unwrap();
    let acceptor = Arc::new(acceptor.build());
    let ca_key = ca_key_type.generate().unwrap();
    let ca_cert = self_signed("mock issuing CA", &ca_key, ca_key_type, None);
    let state = Arc::new(State {
        base: base.clone(),
        targets,
        quirks,
        ca_key,
        ca_key_type,
        ca_cert,
        next: AtomicU64::new(1),
        signed_requests: AtomicU64::new(0),
        nonces: Mutex::default(),
        accounts: Mutex::default(),
        authzs: Mutex::default(),
        orders: Mutex::default(),
        certs: Mutex::default(),
    });
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let acceptor = Arc::clone(&acceptor);
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let mut tls = SslStream::new(Ssl::new(acceptor.context()).unwrap(), tcp).unwrap();
                if Pin::new(&mut tls).accept().await.is_err() {
                    return;
                }
                let service = service_fn(move |req| {
                    let state = Arc::clone(&state);
                    async move { Ok::<_, Infallible>(handle(state, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    MockAcme { directory: format!("{base}/directory"), tls_ca, server }
}

fn self_signed(cn: &str, key: &PKey<Private>, kt: KeyType, ip: Option<&str>) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(Asn1Integer::from_bn(&BigNum::from_u32(1).unwrap()).unwrap().as_ref()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(Asn1Time::days_from_now(0).unwrap().as_ref()).unwrap();
    b.set_not_after(Asn1Time::days_from_now(2).unwrap().as_ref()).unwrap();
    match ip {
        Some(ip) => {
            let san = SubjectAlternativeName::new().ip(ip).build(&b.x509v3_context(None, None)).unwrap();
            b.append_extension(san).unwrap();
        }
        None => b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap(),
    }
    b.sign(key, kt.csr_digest()).unwrap();
    b.build()
}

type Reply = Response<Full<Bytes>>;

async fn handle(state: Arc<State>, req: Request<hyper::body::Incoming>) -> Reply {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let mut reply = match (method, path.as_str()) {
        (Method::GET, "/directory") => json_reply(
            StatusCode::OK,
            &json!({
                "newNonce": format!("{}/new-nonce", state.base),
                "newAccount": format!("{}/new-account", state.base),
                "newOrder": format!("{}/new-order", state.base),
                "revokeCert": format!("{}/revoke", state.base),
                "keyChange": format!("{}/key-change", state.base),
            }),
        ),
        (Method::HEAD, "/new-nonce") => Response::new(Full::new(Bytes::new())),
        (Method::POST, _) => match signed(&state, &path, &body).await {
            Ok(reply) => reply,
            Err(problem) => problem_reply(&problem),
        },
        _ => {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    };
    // 16 base64url characters: a valid nonce encoding.
    let nonce = format!("nonce{:011}", state.next.fetch_add(1, Ordering::Relaxed));
    state.nonces.lock().unwrap().insert(nonce.clone());
    reply.headers_mut().insert("replay-nonce", HeaderValue::from_str(&nonce).unwrap());
    reply
}

/// A signed request: nonce, URL and signature checked as a CA must.
async fn signed(state: &Arc<State>, path: &str, body: &[u8]) -> Result<Reply, Problem> {
    let request = SignedRequest::parse(body).map_err(|e| e.problem())?;
    let n = state.signed_requests.fetch_add(1, Ordering::Relaxed) + 1;
    let known = state.nonces.lock().unwrap().remove(&request.header().nonce);
    if !known || (state.quirks.bad_nonce_every > 0 && n % state.quirks.bad_nonce_every == 0) {
        return Err(Problem::new(ProblemType::BadNonce, "unknown or used nonce"));
    }
    let url = format!("{}{path}", state.base);
    request.check_url(&url).map_err(|e| e.problem())?;
    if path == "/new-account" {
        let verified = request.verify_embedded().map_err(|e| e.problem())?;
        let jwk = verified.jwk().cloned().ok_or_else(|| Problem::new(ProblemType::Malformed, "no jwk"))?;
        let terms: Value = verified.payload_json().map_err(|e| e.problem())?;
        if terms["termsOfServiceAgreed"] != json!(true) {
            return Err(Problem::new(ProblemType::Malformed, "agree to the terms"));
        }
        let kid = format!("{}/acct/{}", state.base, state.next.fetch_add(1, Ordering::Relaxed));
        state.accounts.lock().unwrap().insert(kid.clone(), jwk);
        return Ok(created(&kid, &json!({"status": "valid"})));
    }
    let kid = match &request.header().key {
        signet_acme::jws::KeyRef::Kid(kid) => kid.clone(),
        signet_acme::jws::KeyRef::Jwk(_) => return Err(Problem::new(ProblemType::Malformed, "use kid")),
    };
    let jwk = state.accounts.lock().unwrap().get(&kid).cloned();
    let jwk = jwk.ok_or_else(|| Problem::new(ProblemType::AccountDoesNotExist, "no such account"))?;
    let verified = request.verify(&jwk).map_err(|e| e.problem())?;
    let id = |prefix: &str| path.strip_prefix(prefix).and_then(|rest| rest.split('/').next()?.parse::<u64>().ok());
    let malformed = |d: &str| Problem::new(ProblemType::Malformed, d);

    if path == "/new-order" {
        let new_order: NewOrder = verified.payload_json().map_err(|e| e.problem())?;
        let [identifier] =
            <[Identifier; 1]>::try_from(new_order.identifiers).map_err(|_| malformed("one identifier"))?;
        let authz = state.next.fetch_add(1, Ordering::Relaxed);
        let order = state.next.fetch_add(1, Ordering::Relaxed);
        // 32 base64url characters: 192 bits, a valid token whatever the number.
        let token = format!("tok{authz:029}");
        state.authzs.lock().unwrap().insert(
            authz,
            Authz { account: kid.clone(), identifier: identifier.clone(), token, status: Status::Pending, error: None },
        );
        state
            .orders
            .lock()
            .unwrap()
            .insert(order, Order { account: kid, identifier, authz, status: Status::Pending, cert: None });
        let body = order_json(state, order);
        return Ok(created(&format!("{}/order/{order}", state.base), &body));
    }
    if let Some(n) = id("/authz/") {
        verified.expect_post_as_get().map_err(|e| e.problem())?;
        owned(state.authzs.lock().unwrap().get(&n).map(|a| a.account == kid))?;
        return Ok(json_reply(StatusCode::OK, &authz_json(state, n)));
    }
    if let Some(n) = id("/chall/") {
        let kind = path.rsplit('/').next().unwrap_or_default().to_owned();
        let (identifier, token) = {
            let mut authzs = state.authzs.lock().unwrap();
            let a =
                authzs.get_mut(&n).filter(|a| a.account == kid).ok_or_else(|| malformed("no such authorization"))?;
            if a.status == Status::Pending {
                a.status = Status::Processing;
            }
            (a.identifier.clone(), a.token.clone())
        };
        let key_authorization = signet_acme::validate::key_authorization(&token, &jwk);
        let state2 = Arc::clone(state);
        let account = kid.clone();
        tokio::spawn(async move {
            let proof = Proof { token: &token, key_authorization: &key_authorization, account: &account };
            let outcome = validate(&state2.targets, &kind, &identifier, proof).await;
            let mut authzs = state2.authzs.lock().unwrap();
            if let Some(a) = authzs.get_mut(&n) {
                match outcome {
                    Ok(()) => a.status = Status::Valid,
                    Err(problem) => {
                        a.status = Status::Invalid;
                        a.error = Some(problem);
                    }
                }
            }
        });
        let mut reply = json_reply(
            StatusCode::OK,
            &json!({"type": path.rsplit('/').next(), "url": url, "status": "processing", "token": "x"}),
        );
        // Whole seconds, as a real server sends: acme-bench caps it.
        reply.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
        return Ok(reply);
    }
    if let Some(n) = id("/finalize/") {
        #[derive(serde::Deserialize)]
        struct Finalize {
            csr: String,
        }
        let f: Finalize = verified.payload_json().map_err(|e| e.problem())?;
        let csr = signet_acme::types::Finalize { csr: f.csr }.csr_der().map_err(|e| e.problem())?;
        let parsed = signet_ca::parse_csr(&csr).map_err(|e| Problem::new(ProblemType::BadCsr, e.to_string()))?;
        let (identifier, authz) = {
            let orders = state.orders.lock().unwrap();
            let o = orders.get(&n).filter(|o| o.account == kid).ok_or_else(|| malformed("no such order"))?;
            (o.identifier.clone(), o.authz)
        };
        if state.authzs.lock().unwrap().get(&authz).map(|a| a.status) != Some(Status::Valid) {
            return Err(Problem::new(ProblemType::OrderNotReady, "authorization not valid"));
        }
        let want = match identifier.kind {
            IdentifierType::Ip => signet_ca::SanEntry::Ip(identifier.value.parse().unwrap()),
            _ => signet_ca::SanEntry::Dns(identifier.value.clone()),
        };
        if parsed.sans != vec![want] {
            return Err(Problem::new(ProblemType::BadCsr, "the CSR must name the order's identifier"));
        }
        let pem = issue(state, &csr, &identifier);
        let cert = state.next.fetch_add(1, Ordering::Relaxed);
        state.certs.lock().unwrap().insert(cert, pem);
        if let Some(o) = state.orders.lock().unwrap().get_mut(&n) {
            // Valid on the next poll: the client must poll a processing order.
            o.status = Status::Processing;
            o.cert = Some(cert);
        }
        let mut reply = json_reply(StatusCode::OK, &order_json(state, n));
        reply.headers_mut().insert("retry-after", HeaderValue::from_static("0"));
        return Ok(reply);
    }
    if let Some(n) = id("/order/") {
        verified.expect_post_as_get().map_err(|e| e.problem())?;
        owned(state.orders.lock().unwrap().get(&n).map(|o| o.account == kid))?;
        let body = order_json(state, n);
        if let Some(o) = state.orders.lock().unwrap().get_mut(&n) {
            if o.status == Status::Processing {
                o.status = Status::Valid;
            }
        }
        return Ok(json_reply(StatusCode::OK, &body));
    }
    if let Some(n) = id("/cert/") {
        verified.expect_post_as_get().map_err(|e| e.problem())?;
        let pem = state.certs.lock().unwrap().get(&n).cloned().ok_or_else(|| malformed("no such certificate"))?;
        let mut r = Response::new(Full::new(Bytes::from(pem)));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/pem-certificate-chain"));
        return Ok(r);
    }
    Err(malformed("no such resource"))
}

fn owned(found: Option<bool>) -> Result<(), Problem> {
    match found {
        Some(true) => Ok(()),
        Some(false) => Err(Problem::new(ProblemType::Unauthorized, "not yours")),
        None => Err(Problem::new(ProblemType::Malformed, "no such resource")),
    }
}

/// The order as JSON, its status derived from its authorization.
fn order_json(state: &State, n: u64) -> Value {
    let mut orders = state.orders.lock().unwrap();
    let Some(o) = orders.get_mut(&n) else { return json!({}) };
    let authz = state.authzs.lock().unwrap().get(&o.authz).map(|a| a.status);
    if o.status == Status::Pending && authz == Some(Status::Valid) {
        o.status = Status::Ready;
    }
    if authz == Some(Status::Invalid) {
        o.status = Status::Invalid;
    }
    let mut body = json!({
        "status": o.status.name(),
        "identifiers": [o.identifier],
        "authorizations": [format!("{}/authz/{}", state.base, o.authz)],
        "finalize": format!("{}/finalize/{n}", state.base),
    });
    if let (Status::Valid, Some(cert)) = (o.status, o.cert) {
        body["certificate"] = json!(format!("{}/cert/{cert}", state.base));
    }
    body
}

fn authz_json(state: &State, n: u64) -> Value {
    let authzs = state.authzs.lock().unwrap();
    let Some(a) = authzs.get(&n) else { return json!({}) };
    let status = match a.status {
        Status::Processing => Status::Pending,
        s => s,
    };
    let challenges: Vec<Value> = ["http-01", "tls-alpn-01", "dns-01", "dns-persist-01"]
        .iter()
        .map(|kind| {
            let mut c = json!({
                "type": kind,
                "url": format!("{}/chall/{n}/{kind}", state.base),
                "status": if status == Status::Pending { "pending" } else { status.name() },
                "token": a.token,
            });
            if *kind == "dns-persist-01" {
                c["issuer-domain-names"] = json!([MOCK_ISSUER_DOMAIN]);
            }
            if let Some(error) = &a.error {
                c["error"] = serde_json::to_value(error).unwrap();
            }
            c
        })
        .collect();
    json!({"identifier": a.identifier, "status": status.name(), "challenges": challenges})
}

/// The issuer domain name the mock's dns-persist-01 challenges name.
const MOCK_ISSUER_DOMAIN: &str = "mock-ca.test";

/// What a challenge response proves: the token, the key authorization and
/// the account (dns-persist-01 names the account, not a token).
struct Proof<'a> {
    token: &'a str,
    key_authorization: &'a str,
    account: &'a str,
}

/// Checks the challenge response the way a validator does.
async fn validate(targets: &Targets, kind: &str, identifier: &Identifier, proof: Proof<'_>) -> Result<(), Problem> {
    let Proof { token, key_authorization, account } = proof;
    let incorrect = |d: String| Problem::new(ProblemType::IncorrectResponse, d);
    let connection = |d: String| Problem::new(ProblemType::Connection, d);
    match kind {
        "http-01" => {
            let tcp = tokio::net::TcpStream::connect(targets.http01).await.map_err(|e| connection(e.to_string()))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
                .await
                .map_err(|e| connection(e.to_string()))?;
            tokio::spawn(conn);
            let req = Request::get(format!("/.well-known/acme-challenge/{token}"))
                .header("host", identifier.value.as_str())
                .body(Full::new(Bytes::new()))
                .unwrap();
            let resp = sender.send_request(req).await.map_err(|e| connection(e.to_string()))?;
            let status = resp.status();
            let body = resp.into_body().collect().await.map_err(|e| connection(e.to_string()))?.to_bytes();
            if status != StatusCode::OK || !signet_acme::validate::http01_body_matches(&body, key_authorization) {
                return Err(incorrect(format!("http-01: {status}")));
            }
            Ok(())
        }
        "tls-alpn-01" => {
            let sni = super::challenge::tls_alpn01::sni_name(identifier).map_err(incorrect)?;
            let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
            b.set_verify(SslVerifyMode::NONE);
            b.set_alpn_protos(b"\x0aacme-tls/1").unwrap();
            let ssl = b.build().configure().unwrap().verify_hostname(false).into_ssl(&sni).unwrap();
            let tcp = tokio::net::TcpStream::connect(targets.tlsalpn01).await.map_err(|e| connection(e.to_string()))?;
            let mut s = SslStream::new(ssl, tcp).unwrap();
            Pin::new(&mut s).connect().await.map_err(|e| Problem::new(ProblemType::Tls, e.to_string()))?;
            let cert = s.ssl().peer_certificate().ok_or_else(|| incorrect("no certificate".into()))?;
            let der = cert.to_der().unwrap();
            let parsed =
                <x509_cert::Certificate as der::Decode>::from_der(&der).map_err(|e| incorrect(e.to_string()))?;
            let expected = signet_acme::validate::tls_alpn01_extension_value(key_authorization);
            let ok = parsed.tbs_certificate.extensions.unwrap_or_default().iter().any(|e| {
                e.extn_id.to_string() == "1.3.6.1.5.5.7.1.31" && e.critical && e.extn_value.as_bytes() == expected
            });
            if !ok {
                return Err(incorrect("tls-alpn-01: no matching acmeIdentifier".into()));
            }
            Ok(())
        }
        "dns-01" => {
            let zone = std::fs::read_to_string(&targets.zone).unwrap_or_default();
            let line = format!(
                "_acme-challenge.{} TXT \"{}\"",
                identifier.value,
                signet_acme::validate::dns01_txt_value(key_authorization)
            );
            if !zone.lines().any(|l| l == line) {
                return Err(incorrect("dns-01: no such TXT record".into()));
            }
            Ok(())
        }
        "dns-persist-01" => {
            let zone = std::fs::read_to_string(&targets.zone).unwrap_or_default();
            let line =
                format!("_validation-persist.{} TXT \"{MOCK_ISSUER_DOMAIN}; accounturi={account}\"", identifier.value);
            if !zone.lines().any(|l| l == line) {
                return Err(incorrect("dns-persist-01: no such TXT record".into()));
            }
            Ok(())
        }
        other => Err(Problem::new(ProblemType::Malformed, format!("unknown challenge {other}"))),
    }
}

/// The certificate for a verified CSR, with the CA certificate after it.
fn issue(state: &State, csr: &[u8], identifier: &Identifier) -> String {
    let req = X509Req::from_der(csr).unwrap();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    let serial = state.next.fetch_add(1, Ordering::Relaxed) as u32;
    b.set_serial_number(Asn1Integer::from_bn(&BigNum::from_u32(serial).unwrap()).unwrap().as_ref()).unwrap();
    b.set_subject_name(X509NameBuilder::new().unwrap().build().as_ref()).unwrap();
    b.set_issuer_name(state.ca_cert.subject_name()).unwrap();
    b.set_pubkey(req.public_key().unwrap().as_ref()).unwrap();
    b.set_not_before(Asn1Time::days_from_now(0).unwrap().as_ref()).unwrap();
    b.set_not_after(Asn1Time::days_from_now(1).unwrap().as_ref()).unwrap();
    let mut san = SubjectAlternativeName::new();
    match identifier.kind {
        IdentifierType::Ip => san.ip(&identifier.value),
        _ => san.dns(&identifier.value),
    };
    let san = san.critical().build(&b.x509v3_context(Some(&state.ca_cert), None)).unwrap();
    b.append_extension(san).unwrap();
    b.sign(&state.ca_key, state.ca_key_type.csr_digest()).unwrap();
    let mut pem = String::from_utf8(b.build().to_pem().unwrap()).unwrap();
    pem.push_str(&String::from_utf8(state.ca_cert.to_pem().unwrap()).unwrap());
    pem
}

fn json_reply(status: StatusCode, body: &Value) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn created(location: &str, body: &Value) -> Reply {
    let mut r = json_reply(StatusCode::CREATED, body);
    r.headers_mut().insert(LOCATION, HeaderValue::from_str(location).unwrap());
    r
}

fn problem_reply(problem: &Problem) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(problem.to_json())));
    *r.status_mut() = StatusCode::from_u16(problem.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(signet_acme::problem::PROBLEM_CONTENT_TYPE));
    r
}

/// A free port on 127.0.0.1 (bound and released: the tests' responders
/// bind it again at once).
pub fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}
