//! HTTP(S) checks on hyper-util's pooled client: HTTP/1.1, HTTP/2 by TLS ALPN or prior
//! knowledge (h2c), connections reused between runs or one per run, TLS by OpenSSL verified
//! against a CA bundle. The same client carries webhooks and the PKI checks' fetches.

use std::path::Path;
use std::sync::Arc;
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
pub fn client(ca_file: Option<&Path>, version: HttpVersion, reuse: bool) -> Result<HttpClient, String> {
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
    let connector = TlsConnector::new(http, Some(Arc::new(b.build())));
    let mut builder = Client::builder(TokioExecutor::new());
    builder.pool_max_idle_per_host(if reuse { usize::MAX } else { 0 });
    builder.pool_idle_timeout(Duration::from_secs(90));
    if version == HttpVersion::Http2 {
        builder.http2_only(true);
    }
    Ok(builder.build(connector))
}

/// A prepared HTTP check.
pub struct HttpProbe {
    client: HttpClient,
    reuse: bool,
    version: HttpVersion,
    ca_file: Option<std::path::PathBuf>,
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
        Ok(HttpProbe {
            client: client(c.ca_file.as_deref(), c.http_version, c.reuse_connections)?,
            reuse: c.reuse_connections,
            version: c.http_version,
            ca_file: c.ca_file.clone(),
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
        let mut req = Request::builder().method(self.method.clone()).uri(self.uri.clone());
        if let Some(h) = req.headers_mut() {
            h.extend(self.headers.clone());
        }
        let req = req.body(Full::new(self.body.clone())).map_err(|e| Report::msg(format!("request: {e}")))?;
        // A fresh client per run: no pooled connection, not even an HTTP/2 one, is reused.
        let fresh;
        let client = if self.reuse {
            &self.client
        } else {
            fresh = client(self.ca_file.as_deref(), self.version, false).map_err(Report::msg)?;
            &fresh
        };
        let resp = client.request(req).await.map_err(|e| Report::msg(error_chain(&e)))?;
        let status = resp.status().as_u16();
        let version = if resp.version() == hyper::Version::HTTP_2 { 2.0 } else { 1.1 };
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
        Ok(report(format!("status {status}, {} bytes, HTTP/{version}", body.len())))
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
