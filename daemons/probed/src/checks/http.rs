//! HTTP(S) checks on hyper-util's pooled client: HTTP/1.1, HTTP/2 by TLS ALPN or prior
//! knowledge (h2c), connections reused between runs or one per run, TLS by OpenSSL verified
//! against a CA bundle. The same client carries webhooks and the PKI checks' fetches.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use openssl::ssl::{SslConnector, SslMethod};

use signet_runtime::client::{PeerCertExpiry, TlsConnector};

use super::{Gauge, Probed, Report};
use crate::config::{CheckConfig, HttpVersion};

/// The most of a body a check reads.
const MAX_BODY: usize = 4 << 20;

/// The system CA bundles tried when no `ca_file` is given.
const SYSTEM_ROOTS: &[&str] = &["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"];

/// An HTTP client as a check or a webhook uses it.
pub type HttpClient = Client<TlsConnector, Full<Bytes>>;

/// A client speaking `version`, verifying TLS to `ca_file` (or the system's roots), keeping
/// idle connections for reuse when `reuse`.
///
/// Checks with the same settings share one client (its TLS context and its pool), so ten
/// thousand checks of one server hold a few connections and one CA bundle, not ten thousand.
/// A CA file that changed on disk (seen by a reload) gets a new client.
pub fn client(ca_file: Option<&Path>, version: HttpVersion, reuse: bool) -> Result<HttpClient, String> {
    Ok(shared(ca_file, version, reuse)?.1)
}

/// What tells two clients apart: the CA file (and its identity on disk), version, reuse.
type ClientKey = (Option<PathBuf>, Option<(u64, u64, i64, i64)>, HttpVersion, bool);

static CLIENTS: LazyLock<Mutex<HashMap<ClientKey, (TlsConnector, HttpClient)>>> = LazyLock::new(Default::default);

/// The shared connector and client of these settings, made on first use.
fn shared(ca_file: Option<&Path>, version: HttpVersion, reuse: bool) -> Result<(TlsConnector, HttpClient), String> {
    let file = ca_file.or_else(|| SYSTEM_ROOTS.iter().map(Path::new).find(|p| p.exists()));
    let identity = file.and_then(|f| std::fs::metadata(f).ok()).map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino(), m.size() as i64, m.mtime_nsec() + m.mtime() * 1_000_000_000)
    });
    let key = (ca_file.map(Path::to_path_buf), identity, version, reuse);
    let mut clients = CLIENTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = clients.get(&key) {
        return Ok(found.clone());
    }
    let connector = connector(ca_file, version)?;
    let made = (connector.clone(), client_on(connector, version, reuse));
    // The same settings with an older CA file are not used by new checks again.
    clients.retain(|k, _| !(k.0 == key.0 && k.2 == key.2 && k.3 == key.3));
    clients.insert(key, made.clone());
    Ok(made)
}

/// The connector of [`client`]: TCP, and TLS verified to `ca_file` (or the system's roots)
/// offering the ALPN of `version`. Building it reads the CA bundle, so a check builds it once.
fn connector(ca_file: Option<&Path>, version: HttpVersion) -> Result<TlsConnector, String> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
    match ca_file {
        Some(path) => b.set_ca_file(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?,
        None => {
            b.set_default_verify_paths().map_err(|e| e.to_string())?;
            if let Some(path) = SYSTEM_ROOTS.iter().find(|p| Path::new(p).exists()) {
                b.set_ca_file(path).map_err(|e| format!("{path}: {e}"))?;
            }
        }
    }
    let alpn: &[u8] = match version {
        HttpVersion::Auto => b"\x02h2\x08http/1.1",
        HttpVersion::Http1 => b"\x08http/1.1",
        HttpVersion::Http2 => b"\x02h2",
    };
    b.set_alpn_protos(alpn).map_err(|e| e.to_string())?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    Ok(TlsConnector::new(http, Some(Arc::new(b.build()))))
}

/// A client on `connector`: its own connection pool, kept for reuse when `reuse`.
fn client_on(connector: TlsConnector, version: HttpVersion, reuse: bool) -> HttpClient {
    let mut builder = Client::builder(TokioExecutor::new());
    builder.pool_max_idle_per_host(if reuse { usize::MAX } else { 0 });
    builder.pool_idle_timeout(Duration::from_secs(90));
    if version == HttpVersion::Http2 {
        builder.http2_only(true);
    }
    builder.build(connector)
}

/// A prepared HTTP check.
pub struct HttpProbe {
    client: HttpClient,
    connector: TlsConnector,
    reuse: bool,
    version: HttpVersion,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    expect_status: Vec<u16>,
    expect_body: Option<String>,
    expect_body_regex: Option<regex::Regex>,
    expect_headers: Vec<(HeaderName, String)>,
    expect_json: Vec<(String, serde_json::Value)>,
    max_latency: Option<Duration>,
}

impl HttpProbe {
    /// Prepares the check: its client, request and expectations.
    pub fn new(c: &CheckConfig) -> Result<HttpProbe, String> {
        let url = c.url.as_ref().ok_or("no url")?;
        let uri: Uri = url.0.as_str().parse().map_err(|e| format!("url: {e}"))?;
        let method = Method::from_bytes(c.method.as_deref().unwrap_or("GET").as_bytes()).map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        for (k, v) in &c.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            headers.append(name, HeaderValue::from_str(v).map_err(|e| format!("header {k}: {e}"))?);
        }
        let mut expect_headers = Vec::new();
        for (k, v) in &c.expect_headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            expect_headers.push((name, v.clone()));
        }
        let (connector, client) = shared(c.ca_file.as_deref(), c.http_version, c.reuse_connections)?;
        Ok(HttpProbe {
            client,
            connector,
            reuse: c.reuse_connections,
            version: c.http_version,
            method,
            uri,
            headers,
            body: Bytes::from(c.body.clone().unwrap_or_default()),
            expect_status: c.expect_status.clone(),
            expect_body: c.expect_body.clone(),
            expect_body_regex: c.expect_body_regex.as_ref().map(|p| p.0.clone()),
            expect_headers,
            expect_json: c.expect_json.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            max_latency: c.max_latency,
        })
    }

    /// One request and its checks.
    pub async fn run(&self) -> Probed {
        let start = Instant::now();
        // Built in place from parts checked when the check was prepared (a `Request::builder`
        // chain moves its few hundred bytes of parts at every step).
        let request = || {
            let mut req = Request::new(Full::new(self.body.clone()));
            *req.method_mut() = self.method.clone();
            *req.uri_mut() = self.uri.clone();
            *req.headers_mut() = self.headers.clone();
            req
        };
        // A fresh client (pool) per run: no connection, not even an HTTP/2 one, is reused. The
        // connector, with its CA bundle already read, is shared. Clients made for one run are
        // boxed: a run's future is what each of thousands of checks in flight holds, and two
        // clients inline (this one and the retry's) were most of its size.
        let fresh;
        let client = if self.reuse {
            &self.client
        } else {
            fresh = Box::new(client_on(self.connector.clone(), self.version, false));
            &*fresh
        };
        let resp = match client.request(request()).await {
            Ok(resp) => resp,
            // A server ends a kept connection after so many requests (nginx's
            // `keepalive_requests`, an HTTP/2 GOAWAY): a request caught in that is not the
            // server's failure. An idempotent one is sent once more, on a new connection (the
            // pool may still hold others the server is ending); what fails twice, or fails to
            // connect, is reported.
            Err(e) if self.reuse && !e.is_connect() && self.method.is_idempotent() => {
                let once = Box::new(client_on(self.connector.clone(), self.version, false));
                once.request(request()).await.map_err(|e| Report::msg(error_chain(&e)))?
            }
            Err(e) => return Err(Report::msg(error_chain(&e))),
        };
        let status = resp.status().as_u16();
        // The gauge's value, and the same as text for the message (a float's `Display` costs
        // more than the rest of a passing check's message).
        let (version, version_text) = if resp.version() == hyper::Version::HTTP_2 { (2.0, "2") } else { (1.1, "1.1") };
        let expiry = resp.extensions().get::<PeerCertExpiry>().copied();
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|e| Report::msg(format!("reading the body: {e}")))?
            .to_bytes();
        let elapsed = start.elapsed();
        let report = |m: String| {
            let r = Report::msg(m).gauge(Gauge::HttpStatusCode, status.into()).gauge(Gauge::HttpVersion, version);
            match expiry {
                Some(PeerCertExpiry(t)) => r.gauge(Gauge::SslEarliestCertExpiry, t as f64),
                None => r,
            }
        };
        let status_ok = if self.expect_status.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expect_status.contains(&status)
        };
        if !status_ok {
            return Err(report(format!("status {status}")));
        }
        let text = String::from_utf8_lossy(&body);
        if let Some(want) = &self.expect_body {
            if !text.contains(want.as_str()) {
                return Err(report(format!("status {status}, body does not contain {want:?}")));
            }
        }
        if let Some(re) = &self.expect_body_regex {
            if !re.is_match(&text) {
                return Err(report(format!("status {status}, body does not match /{}/", re.as_str())));
            }
        }
        for (name, want) in &self.expect_headers {
            match parts.headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()) {
                Some(v) if v.contains(want.as_str()) => {}
                Some(v) => return Err(report(format!("header {name}: {v:?} does not contain {want:?}"))),
                None => return Err(report(format!("no header {name}"))),
            }
        }
        if !self.expect_json.is_empty() {
            let json: serde_json::Value =
                serde_json::from_slice(&body).map_err(|e| report(format!("status {status}, body is not JSON: {e}")))?;
            for (pointer, want) in &self.expect_json {
                match json.pointer(pointer) {
                    Some(v) if v == want => {}
                    Some(v) => return Err(report(format!("JSON {pointer} is {v}, expected {want}"))),
                    None => return Err(report(format!("JSON {pointer} is missing"))),
                }
            }
        }
        if let Some(max) = self.max_latency {
            if elapsed > max {
                return Err(report(format!("status {status} in {elapsed:?}, slower than {max:?}")));
            }
        }
        Ok(report(format!("status {status}, {} bytes, HTTP/{version_text}", body.len())))
    }
}

/// An error with its sources, on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        source = inner.source();
    }
    s
}

/// GETs (or POSTs `body` with `content_type`) `uri` on `client`: the status and body.
pub async fn fetch(
    client: &HttpClient,
    uri: &str,
    post: Option<(&'static str, Vec<u8>)>,
) -> Result<(u16, Bytes), String> {
    let (method, ct, body) = match post {
        Some((ct, body)) => (Method::POST, Some(ct), body),
        None => (Method::GET, None, Vec::new()),
    };
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(ct) = ct {
        req = req.header(hyper::header::CONTENT_TYPE, ct);
    }
    let req = req.body(Full::new(Bytes::from(body))).map_err(|e| format!("{uri}: {e}"))?;
    let resp = client.request(req).await.map_err(|e| format!("{uri}: {}", error_chain(&e)))?;
    let status = resp.status().as_u16();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("{uri}: reading the body: {e}"))?
        .to_bytes();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries_for(path: &Path) -> usize {
        CLIENTS.lock().unwrap().keys().filter(|k| k.0.as_deref() == Some(path)).count()
    }

    #[test]
    fn checks_with_the_same_settings_share_a_client_until_the_ca_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let key = openssl::pkey::PKey::generate_ed25519().unwrap();
        let mut x = openssl::x509::X509::builder().unwrap();
        x.set_pubkey(&key).unwrap();
        x.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        x.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
        x.sign(&key, openssl::hash::MessageDigest::null()).unwrap();
        let pem = x.build().to_pem().unwrap();
        std::fs::write(&ca, &pem).unwrap();
        client(Some(&ca), HttpVersion::Http1, true).unwrap();
        client(Some(&ca), HttpVersion::Http1, true).unwrap();
        assert_eq!(entries_for(&ca), 1, "the same settings share one client");
        client(Some(&ca), HttpVersion::Http2, true).unwrap();
        assert_eq!(entries_for(&ca), 2, "another version is another client");

        // The file is replaced (a reload after a CA rotation): new checks get a new client,
        // and the old one is no longer handed out.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.path().join("new.pem"), &pem).unwrap();
        std::fs::rename(dir.path().join("new.pem"), &ca).unwrap();
        let before: Vec<ClientKey> = CLIENTS.lock().unwrap().keys().cloned().collect();
        client(Some(&ca), HttpVersion::Http1, true).unwrap();
        let after: Vec<ClientKey> = CLIENTS.lock().unwrap().keys().cloned().collect();
        assert_eq!(entries_for(&ca), 2);
        let new: Vec<_> = after.iter().filter(|k| !before.contains(k)).collect();
        assert_eq!(new.len(), 1, "one new client for the changed file");
        assert_eq!(new[0].2, HttpVersion::Http1);
    }
}

#[cfg(test)]
mod goaway_tests {
    use futures::StreamExt;

    use crate::checks::Probe;

    /// An h2c server that ends every connection after `per_conn` requests with a GOAWAY naming
    /// the last stream it processed, as nginx does at `keepalive_requests`: streams the client
    /// opened meanwhile are refused unprocessed.
    async fn serve(listener: tokio::net::TcpListener, per_conn: usize) {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(stream).await else { return };
                let mut served = 0;
                while let Some(Ok((_req, mut respond))) = conn.accept().await {
                    served += 1;
                    if let Ok(mut body) = respond.send_response(hyper::Response::new(()), false) {
                        let _ = body.send_data(Bytes::from_static(b"ok"), true);
                    }
                    if served == per_conn {
                        conn.abrupt_shutdown(h2::Reason::NO_ERROR);
                    }
                }
            });
        }
    }

    use super::Bytes;

    #[tokio::test(flavor = "current_thread")]
    async fn requests_refused_by_a_goaway_are_sent_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, 20));
        let text = format!(
            "state_dir = \"/nonexistent\"\nlisten = \"127.0.0.1:1\"\n[checks.g]\nkind = \"http\"\n\
             url = \"http://{addr}/\"\nhttp_version = \"2\"\nexpect_body = \"ok\"\n"
        );
        let config: crate::config::Config =
            signet_runtime::config::parse(&text, std::path::Path::new("t.toml")).unwrap();
        let probe = Probe::new(&config.checks["g"]).unwrap();
        let outcomes: Vec<_> = futures::stream::iter(0..2000)
            .map(|_| probe.run(std::time::Duration::from_secs(10), 0))
            .buffer_unordered(32)
            .collect()
            .await;
        let failed: Vec<_> = outcomes.iter().filter(|o| !o.ok).map(|o| o.message.clone()).collect();
        assert!(failed.is_empty(), "{} of 2000 failed, e.g. {:?}", failed.len(), failed.first());
    }
}
