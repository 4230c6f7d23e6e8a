//! Seed 002's benchmark grid (Ahdapa's published tables, one node): the
//! sequential latency of real tokend and signd processes, one request at a
//! time on one keep-alive connection, per token algorithm (ES256, ES384,
//! ES512, EdDSA, ML-DSA-44, ML-DSA-65, ML-DSA-87: a tokend per algorithm, its
//! key in signd under the `tokend` role, signd's audit durability "process"
//! as in scripts/run). Over HTTPS to tokend's `[tls]` listener, as the seed
//! measured loopback HTTPS; the TLS handshake is made before timing.
//!
//! Group `tokend_grid`, ids:
//! - `client_credentials/<method>/<alg>`: `POST /token` with
//!   `grant_type=client_credentials`, the client authenticating with
//!   client_secret_basic, client_secret_post, client_secret_jwt (an HS256
//!   assertion signed per request, as a client does), private_key_jwt (an
//!   ES256 assertion per request; the JWKS registered by value),
//!   tls_client_auth (a certificate from a CA of `client_ca_file`, the client
//!   registered by its SAN dNSName) or self_signed_tls_client_auth (a
//!   self-signed certificate whose key the client registered); the TLS methods
//!   on a connection presenting the certificate, the others on one without.
//! - `client_credentials_http/client_secret_basic/<alg>`: the same over
//!   tokend's plain HTTP listener (what token-load and Hydra are measured on).
//! - `authorization_code/<alg>`: a browser signed in once (before timing)
//!   runs `GET /authorize` (302 with a code) then `POST /token` with the code
//!   and its PKCE verifier (a public client, `openid`: access and ID token);
//!   `signet_bench::oauth::authcode`, as authcode-load.
//! - `authorization_code_sign_in/ES256`: the same after signing in again
//!   through the forms every time (an argon2id verification at tokend).
//! - `introspect/<alg>`: `POST /introspect` of one token minted before
//!   timing, client_secret_basic (after its first check, tokend answers from
//!   its verified-token cache: the revocation lookup, not the signature).
//!
//! Every response is checked (a 200 with `access_token`, or `"active": true`),
//! and before timing each cell's token is checked: the header's `alg`, and for
//! the TLS methods `cnf.x5t#S256` of the presented certificate.
//!
//! Short windows by default (20 samples, 0.3 s warm-up, 1 s measured;
//! criterion's `--sample-size`, `--warm-up-time`, `--measurement-time`
//! override). Criterion's filter selects benchmarks; `TOKEND_GRID_ALGS`
//! (comma-separated JOSE names) which tokends are started. The binaries come
//! from `$SIGNET_BIN_DIR` (signd, tokend, signetctl; `source scripts/lib.sh`).
//! bench/scripts/token-bench.sh --grid runs it with Hydra's same-run baseline.

#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use criterion::{BenchmarkGroup, Criterion};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST};
use hyper::Request;
use openssl::pkey::PKey;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod};
use openssl::x509::X509;
use serde_json::{json, Value};
use signet_bench::oauth::authcode::CodeFlow;
use signet_bench::oauth::client_auth::{Assertion, ClientAuth};
use signet_bench::oauth::process::{tokend_role, TlsFiles, TokendProcess};
use signet_bench::oauth::{connect, Sender};
use signet_bench::SigndProcess;
use signet_jose::{jwk_json, Algorithm, CompactJws};

const ALGS: [&str; 7] = ["ES256", "ES384", "ES512", "EdDSA", "ML-DSA-44", "ML-DSA-65", "ML-DSA-87"];
const AUDIENCE: &str = "https://api.grid.test";
const TLS_CLIENT_DNS: &str = "grid-tls.bench.test";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// The TLS material, made once with the openssl tool: tokend's server
/// certificate, a client CA and a certificate from it, a self-signed client
/// certificate, the private_key_jwt client's P-256 key.
struct Pki {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    fn create() -> Pki {
        let dir = tempfile::Builder::new().prefix("tokend-grid-pki").tempdir().unwrap();
        let d = dir.path();
        const P256: [&str; 5] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        let self_signed = |name: &str, subject: &str, extra: &[&str]| {
            let (key, cert) = (format!("{name}.key"), format!("{name}.pem"));
            let mut args = vec!["req", "-x509"];
            args.extend(P256);
            args.extend(["-days", "2", "-subj", subject, "-keyout", &key, "-out", &cert]);
            args.extend(extra);
            openssl(d, &args);
        };
        self_signed("server", "/CN=localhost", &["-addext", "subjectAltName=IP:127.0.0.1"]);
        self_signed("client-ca", "/CN=tokend grid client CA", &[]);
        self_signed("self-signed", "/CN=tokend grid self-signed client", &[]);
        let san = format!("subjectAltName=DNS:{TLS_CLIENT_DNS}");
        let mut args = vec!["req", "-new"];
        args.extend(P256);
        args.extend(["-subj", "/CN=grid-tls", "-addext", &san, "-keyout", "client.key", "-out", "client.csr"]);
        openssl(d, &args);
        let issue = ["x509", "-req", "-in", "client.csr", "-CA", "client-ca.pem", "-CAkey", "client-ca.key"];
        openssl(d, &[&issue[..], &["-days", "2", "-copy_extensions", "copy", "-out", "client.pem"]].concat());
        openssl(d, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "assertion.key"]);
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn tls(&self) -> TlsFiles {
        TlsFiles {
            certificate: self.path("server.pem"),
            key: self.path("server.key"),
            client_ca: Some(self.path("client-ca.pem")),
        }
    }

    /// A connector trusting tokend's certificate, presenting certificate `name` (`name`.pem/.key), if any.
    fn connector(&self, name: Option<&str>) -> SslConnector {
        let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
        b.set_ca_file(self.path("server.pem")).unwrap();
        if let Some(name) = name {
            b.set_certificate_chain_file(self.path(&format!("{name}.pem"))).unwrap();
            b.set_private_key_file(self.path(&format!("{name}.key")), SslFiletype::PEM).unwrap();
        }
        b.build()
    }

    /// `cnf`'s x5t#S256 of certificate `name`.
    fn x5t(&self, name: &str) -> String {
        let cert = X509::from_pem(&std::fs::read(self.path(&format!("{name}.pem"))).unwrap()).unwrap();
        URL_SAFE_NO_PAD.encode(openssl::sha::sha256(&cert.to_der().unwrap()))
    }

    /// The JWK set of `name`.pem's key (self_signed_tls_client_auth) or of the assertion key.
    fn jwks_file(&self, name: &str) -> PathBuf {
        let jwk = if name == "assertion" {
            let key = PKey::private_key_from_pem(&std::fs::read(self.path("assertion.key")).unwrap()).unwrap();
            jwk_json(&key.public_key_to_der().unwrap(), "grid-1", Algorithm::Es256).unwrap()
        } else {
            let cert = X509::from_pem(&std::fs::read(self.path(&format!("{name}.pem"))).unwrap()).unwrap();
            signet_jose::Jwk::from_public_key(&cert.public_key().unwrap()).unwrap().to_json()
        };
        let path = self.path(&format!("{name}.jwks.json"));
        std::fs::write(&path, json!({ "keys": [jwk] }).to_string()).unwrap();
        path
    }
}

/// One benchmarked endpoint: a request made the same way every time, on one connection.
struct Cell {
    tx: Sender,
    host: HeaderValue,
    path: &'static str,
    body: String,
    auth: ClientAuth,
}

impl Cell {
    /// Sends the request once; the response's JSON, which must be a 200.
    async fn send(&mut self) -> Result<Value, String> {
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = hyper::Uri::from_static(self.path);
        let headers = request.headers_mut();
        headers.insert(HOST, self.host.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
        let body = self.auth.apply(&self.body, headers).map_err(|e| e.to_string())?;
        *request.body_mut() = Full::new(Bytes::from(body));
        let resp = self.tx.send_request(request).await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(|e| format!("transport: {e}"))?.to_bytes();
        if status != 200 {
            return Err(format!("{} answered {status}: {}", self.path, String::from_utf8_lossy(&body)));
        }
        serde_json::from_slice(&body).map_err(|e| format!("{}: not JSON: {e}", self.path))
    }

    /// One request as timed: the answer must be a token, or an active introspection.
    async fn once(&mut self) {
        let v = self.send().await.unwrap();
        assert!(v["access_token"].is_string() || v["active"] == json!(true), "{v}");
    }
}

/// The access token of a token response, its header and claims.
fn token_parts(v: &Value) -> (String, Value) {
    let token = v["access_token"].as_str().unwrap_or_else(|| panic!("no access_token: {v}"));
    let jws = CompactJws::parse(token).unwrap();
    (jws.header().alg_name().to_owned(), serde_json::from_slice(jws.payload()).unwrap())
}

fn bench_cell(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    id: &str,
    cell: &mut Cell,
) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    cell.once().await;
                }
                start.elapsed()
            })
        })
    });
}

/// Every benchmark of one algorithm, against a tokend of its own.
fn grid_for(c: &mut Criterion, rt: &tokio::runtime::Runtime, signd: &SigndProcess, pki: &Pki, alg: &str) {
    let tokend = TokendProcess::start(signd, alg, Some(&pki.tls()), "").unwrap();
    let tls_addr = tokend.tls_addr().unwrap();
    let issuer = tokend.issuer();
    let common = ["--scope", "grid.read", "--audience", AUDIENCE];
    let secret = |id: &str, method: &str| {
        let v = tokend.create_client(id, &[&["--auth-method", method][..], &common].concat()).unwrap();
        v["secret"].as_str().unwrap().to_owned()
    };
    let pkjwt_jwks = pki.jwks_file("assertion");
    let ss_jwks = pki.jwks_file("self-signed");
    let assertion_key = PKey::private_key_from_pem(&std::fs::read(pki.path("assertion.key")).unwrap()).unwrap();
    let mut methods: Vec<(&str, ClientAuth, Option<&str>)> = vec![
        (
            "client_secret_basic",
            ClientAuth::basic("grid-basic", &secret("grid-basic", "client_secret_basic")).unwrap(),
            None,
        ),
        ("client_secret_post", ClientAuth::post("grid-post", &secret("grid-post", "client_secret_post")), None),
        (
            "client_secret_jwt",
            ClientAuth::Jwt(Box::new(
                Assertion::client_secret_jwt(&secret("grid-hs", "client_secret_jwt"), "grid-hs", &issuer).unwrap(),
            )),
            None,
        ),
    ];
    let register = |id: &str, args: &[&str]| tokend.create_client(id, &[args, &common].concat()).unwrap();
    register("grid-pkjwt", &["--auth-method", "private_key_jwt", "--jwks", pkjwt_jwks.to_str().unwrap()]);
    register("grid-tls", &["--auth-method", "tls_client_auth", "--tls-san-dns", TLS_CLIENT_DNS]);
    register("grid-self", &["--auth-method", "self_signed_tls_client_auth", "--jwks", ss_jwks.to_str().unwrap()]);
    let pkjwt = Assertion::private_key_jwt(assertion_key, Some("grid-1"), "grid-pkjwt", &issuer).unwrap();
    methods.push(("private_key_jwt", ClientAuth::Jwt(Box::new(pkjwt)), None));
    methods.push(("tls_client_auth", ClientAuth::client_id("grid-tls"), Some("client")));
    methods.push(("self_signed_tls_client_auth", ClientAuth::client_id("grid-self"), Some("self-signed")));

    let host = HeaderValue::from_str(&tls_addr.to_string()).unwrap();
    let mut group = c.benchmark_group("tokend_grid");
    for (method, auth, cert) in methods {
        let connector = pki.connector(cert);
        let tx = rt.block_on(connect(tls_addr, Some((&connector, "127.0.0.1")))).unwrap();
        let body = "grant_type=client_credentials".to_owned();
        let mut cell = Cell { tx, host: host.clone(), path: "/token", body, auth };
        // The token is the algorithm's, bound to the certificate for the TLS methods.
        let (header_alg, claims) = token_parts(&rt.block_on(cell.send()).unwrap());
        assert_eq!(header_alg, alg, "{method}: {claims}");
        match cert {
            Some(name) => assert_eq!(claims["cnf"]["x5t#S256"], json!(pki.x5t(name)), "{method}: {claims}"),
            None => assert!(claims.get("cnf").is_none(), "{method}: {claims}"),
        }
        bench_cell(&mut group, rt, &format!("client_credentials/{method}/{alg}"), &mut cell);
    }

    // The plain HTTP listener, client_secret_basic.
    let tx = rt.block_on(connect(tokend.addr(), None)).unwrap();
    let auth = ClientAuth::basic("grid-basic-http", &secret("grid-basic-http", "client_secret_basic")).unwrap();
    let plain_host = HeaderValue::from_str(&tokend.addr().to_string()).unwrap();
    let mut cell = Cell { tx, host: plain_host, path: "/token", body: "grant_type=client_credentials".into(), auth };
    assert_eq!(token_parts(&rt.block_on(cell.send()).unwrap()).0, alg);
    bench_cell(&mut group, rt, &format!("client_credentials_http/client_secret_basic/{alg}"), &mut cell);

    // Introspection of one token minted now.
    let connector = pki.connector(None);
    let tx = rt.block_on(connect(tls_addr, Some((&connector, "127.0.0.1")))).unwrap();
    let auth = ClientAuth::basic("grid-intro", &secret("grid-intro", "client_secret_basic")).unwrap();
    let mut mint = Cell { tx, host: host.clone(), path: "/token", body: "grant_type=client_credentials".into(), auth };
    let token = rt.block_on(mint.send()).unwrap()["access_token"].as_str().unwrap().to_owned();
    mint.path = "/introspect";
    mint.body = format!("token={token}");
    assert_eq!(rt.block_on(mint.send()).unwrap()["active"], json!(true));
    bench_cell(&mut group, rt, &format!("introspect/{alg}"), &mut mint);

    // The authorization code flow: a user, a public client, a browser signed in once.
    let password = "grid user's long password";
    tokend.create_user("grid-user", password).unwrap();
    tokend
        .create_client(
            "grid-web",
            &[
                "--auth-method",
                "none",
                "--grant-type",
                "authorization_code",
                "--scope",
                "openid",
                "--audience",
                AUDIENCE,
            ]
            .into_iter()
            .chain(["--redirect-uri", REDIRECT])
            .collect::<Vec<_>>(),
        )
        .unwrap();
    let flow = CodeFlow {
        host: host.clone(),
        base_path: String::new(),
        client_id: "grid-web".into(),
        redirect_uri: REDIRECT.into(),
        user: "grid-user".into(),
        password: password.into(),
        scope: "openid".into(),
    };
    let mut tx = rt.block_on(connect(tls_addr, Some((&connector, "127.0.0.1")))).unwrap();
    let session = rt.block_on(flow.sign_in(&mut tx)).unwrap();
    rt.block_on(flow.flow(&mut tx, &session)).unwrap();
    group.bench_function(format!("authorization_code/{alg}"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    flow.flow(&mut tx, &session).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    if alg == "ES256" {
        group.bench_function(format!("authorization_code_sign_in/{alg}"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let session = flow.sign_in(&mut tx).await.unwrap();
                        flow.flow(&mut tx, &session).await.unwrap();
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
    let log = tokend.log();
    assert!(!log.contains("ERROR"), "tokend logged errors:\n{log}");
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let mut algs: Vec<String> = std::env::var("TOKEND_GRID_ALGS")
        .unwrap_or_default()
        .split(',')
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    if algs.is_empty() {
        algs = ALGS.iter().map(|a| (*a).to_owned()).collect();
    }
    for a in &algs {
        assert!(ALGS.contains(&a.as_str()), "TOKEND_GRID_ALGS: {a} is not one of {ALGS:?}");
    }
    let signd = SigndProcess::start_with_roles("process", &tokend_role()).expect("signd");
    let pki = Pki::create();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for alg in &algs {
        grid_for(&mut c, &rt, &signd, &pki, alg);
    }
    c.final_summary();
}
