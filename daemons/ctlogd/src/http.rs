//! ctlogd's HTTP face, for signet-runtime's scaffold: both APIs of each log
//! under the log's path prefix.
//!
//! | path (under the prefix) | answers |
//! |---|---|
//! | `POST ct/v1/add-chain`, `ct/v1/add-pre-chain` | an SCT (RFC 6962 §4.1–4.2) |
//! | `GET ct/v1/get-roots`, `get-sth`, `get-sth-consistency`, `get-proof-by-hash`, `get-entries`, `get-entry-and-proof` | RFC 6962 §4.3–4.8 |
//! | `GET checkpoint`, `tile/<L>/<N>[.p/<W>]`, `tile/data/<N>[.p/<W>]`, `issuer/<hex>` | static-ct-api |
//! | `GET log.v3.json` | the log's metadata |
//!
//! and, at the root, `GET /logs.json`: `{"logs": [...]}`, every log's metadata.
//!
//! Bad input gets 400 (404 for what does not exist) with a one-line reason;
//! a full backlog 429 with `Retry-After`; storage or signer trouble 503.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use signet_ct::merkle::{parse_tile_path, TilePath};
use signet_ct::rfc6962::api::{
    hashes_to_base64, GetEntriesResponse, GetEntryAndProofResponse, GetProofByHashResponse, GetSthConsistencyResponse,
};
use signet_runtime::http::Body;
use signet_runtime::http::{text_response, Handler};

use crate::chain::Submission;
use crate::log::{Log, LogError};
use crate::shards::{LogSet, Served};
use crate::storage::{ObjectKey, CACHE_SHORT};

/// The HTTP handler of one or more logs, each under its own path prefix.
/// The set of logs may grow while it serves (a shard added).
#[derive(Clone, Debug)]
pub struct CtHttp {
    logs: LogSet,
}

impl CtHttp {
    /// Serves each log under its prefix (`/` or `/2026h1/`: starting and
    /// ending with `/`). Longer prefixes are matched first.
    pub fn new(logs: Vec<(String, Arc<Log>)>) -> Self {
        let set = LogSet::default();
        for (prefix, log) in logs {
            set.add(Served { name: prefix.trim_matches('/').to_owned(), prefix, log, added: false });
        }
        Self { logs: set }
    }

    /// Serves the logs of `set`, as it is at each request.
    pub fn over(set: LogSet) -> Self {
        Self { logs: set }
    }

    /// Answers one request, given its method, path, query and body.
    pub async fn answer(&self, method: &Method, path: &str, query: Option<&str>, body: Bytes) -> Response<Full<Bytes>> {
        if path == "/logs.json" {
            if method != Method::GET && method != Method::HEAD {
                return method_not_allowed("GET, HEAD");
            }
            return self.log_list();
        }
        let logs = self.logs.snapshot();
        let Some((log, rest)) = logs.iter().find_map(|s| path.strip_prefix(s.prefix.as_str()).map(|r| (&s.log, r)))
        else {
            return text_response(StatusCode::NOT_FOUND, "no such log\n");
        };
        let post = |kind| async move {
            if method != Method::POST {
                return method_not_allowed("POST");
            }
            json_or_error(log.add_chain(&body, kind).await)
        };
        match rest {
            "ct/v1/add-chain" => return post(Submission::Chain).await,
            "ct/v1/add-pre-chain" => return post(Submission::PreChain).await,
            _ => {}
        }
        if method != Method::GET && method != Method::HEAD {
            return method_not_allowed("GET, HEAD");
        }
        let q = Query::parse(query.unwrap_or(""));
        match rest {
            "ct/v1/get-roots" => json_or_error(Ok(log.roots_response())),
            "ct/v1/get-sth" => json_or_error(log.sth()),
            "ct/v1/get-sth-consistency" => json_or_error(
                async {
                    let proof = log.consistency(q.u64("first")?, q.u64("second")?).await?;
                    Ok(GetSthConsistencyResponse { consistency: hashes_to_base64(&proof) })
                }
                .await,
            ),
            "ct/v1/get-proof-by-hash" => json_or_error(
                async {
                    let (leaf_index, proof) = log.proof_by_hash(&q.hash("hash")?, q.u64("tree_size")?).await?;
                    Ok(GetProofByHashResponse { leaf_index, audit_path: hashes_to_base64(&proof) })
                }
                .await,
            ),
            "ct/v1/get-entries" => json_or_error(
                async { Ok(GetEntriesResponse { entries: log.entries(q.u64("start")?, q.u64("end")?).await? }) }.await,
            ),
            "ct/v1/get-entry-and-proof" => json_or_error(
                async {
                    let (e, proof) = log.entry_and_proof(q.u64("leaf_index")?, q.u64("tree_size")?).await?;
                    Ok(GetEntryAndProofResponse {
                        leaf_input: e.leaf_input,
                        extra_data: e.extra_data,
                        audit_path: hashes_to_base64(&proof),
                    })
                }
                .await,
            ),
            "log.v3.json" => {
                let mut r = bytes_response(Bytes::from(log.metadata().to_string()), "application/json");
                r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static(CACHE_SHORT));
                r
            }
            _ => match static_key(rest) {
                Ok(key) => self::object(log, key).await,
                Err(e) => error_response(&e),
            },
        }
    }
}

impl CtHttp {
    /// `GET /logs.json`: every log's metadata (as in its `log.v3.json`), in
    /// the order of their prefixes.
    fn log_list(&self) -> Response<Full<Bytes>> {
        let all = self.logs.snapshot();
        let mut logs: Vec<&Served> = all.iter().collect();
        logs.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        let list = serde_json::json!({ "logs": logs.iter().map(|s| s.log.metadata()).collect::<Vec<_>>() });
        let mut r = bytes_response(Bytes::from(list.to_string()), "application/json");
        r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static(CACHE_SHORT));
        r
    }
}

impl Handler for CtHttp {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let this = self.clone();
        async move {
            let (parts, body) = req.into_parts();
            let limit = this.logs.snapshot().iter().map(|s| s.log.config().limits.max_body).max().unwrap_or(0);
            let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
            if declared.is_some_and(|n| n > limit) {
                return text_response(StatusCode::BAD_REQUEST, format!("body larger than {limit} bytes\n"));
            }
            let body = match Limited::new(body, limit).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                    return text_response(StatusCode::BAD_REQUEST, format!("body larger than {limit} bytes\n"))
                }
                Err(e) if e.downcast_ref::<signet_runtime::http::BodyError>().is_some_and(|e| e.is_too_slow()) => {
                    return text_response(StatusCode::REQUEST_TIMEOUT, format!("{e}\n"))
                }
                Err(e) => return text_response(StatusCode::BAD_REQUEST, format!("cannot read the body: {e}\n")),
            };
            this.answer(&parts.method, parts.uri.path(), parts.uri.query(), body).await
        }
        .boxed()
    }
}

/// The object a static-ct-api path names.
fn static_key(path: &str) -> Result<ObjectKey, LogError> {
    if path == "checkpoint" {
        return Ok(ObjectKey::Checkpoint);
    }
    if path.starts_with("tile/") {
        return match parse_tile_path(path) {
            Ok(TilePath::Hashes(t)) => Ok(ObjectKey::Tile(t)),
            Ok(TilePath::Data(t)) => Ok(ObjectKey::DataTile(t)),
            Err(_) => Err(LogError::BadRequest("malformed tile path".into())),
        };
    }
    if let Some(hex) = path.strip_prefix("issuer/") {
        let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        return match hex::decode(hex).ok().and_then(|v| <[u8; 32]>::try_from(v).ok()) {
            Some(fp) if ok => Ok(ObjectKey::Issuer(fp)),
            _ => Err(LogError::BadRequest("issuer path must be a lowercase hex SHA-256".into())),
        };
    }
    Err(LogError::NotFound("not found".into()))
}

async fn object(log: &Log, key: ObjectKey) -> Response<Full<Bytes>> {
    match log.object(key).await {
        Ok(Some(bytes)) => {
            let mut r = bytes_response(bytes, key.content_type());
            r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static(key.cache_control()));
            r
        }
        Ok(None) => text_response(StatusCode::NOT_FOUND, "not found\n"),
        Err(e) => error_response(&LogError::from(e)),
    }
}

/// The query parameters of a GET.
struct Query<'a>(Vec<(&'a str, String)>);

impl<'a> Query<'a> {
    fn parse(q: &'a str) -> Self {
        Self(q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k, percent_decode(v))).collect())
    }

    fn get(&self, name: &str) -> Result<&str, LogError> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| LogError::BadRequest(format!("missing parameter {name}")))
    }

    fn u64(&self, name: &str) -> Result<u64, LogError> {
        let v = self.get(name)?;
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(LogError::BadRequest(format!("parameter {name} is not a non-negative integer")));
        }
        v.parse().map_err(|_| LogError::BadRequest(format!("parameter {name} is out of range")))
    }

    fn hash(&self, name: &str) -> Result<[u8; 32], LogError> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(self.get(name)?)
            .ok()
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| LogError::BadRequest(format!("parameter {name} is not a base64 SHA-256 hash")))
    }
}

/// `%XX` decoding (a `+` stays a `+`: base64 hashes contain it).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_or_error<T: serde::Serialize>(r: Result<T, LogError>) -> Response<Full<Bytes>> {
    match r.and_then(|v| serde_json::to_vec(&v).map_err(|e| LogError::Unavailable(e.to_string()))) {
        Ok(body) => bytes_response(Bytes::from(body), "application/json"),
        Err(e) => error_response(&e),
    }
}

fn error_response(e: &LogError) -> Response<Full<Bytes>> {
    let status = match e {
        LogError::BadRequest(_) => StatusCode::BAD_REQUEST,
        LogError::NotFound(_) => StatusCode::NOT_FOUND,
        LogError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut r = text_response(status, format!("{e}\n"));
    let retry = match e {
        LogError::Busy { retry_after_secs } => Some(*retry_after_secs),
        LogError::Unavailable(_) => Some(1),
        _ => None,
    };
    if let Some(secs) = retry {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

fn bytes_response(body: Bytes, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut r = text_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    r
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
