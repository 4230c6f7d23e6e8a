//! The HTTP side: the signed-request pipeline (RFC 8555 §6.2–6.5), the
//! answers handlers give and the responses made of them. The routes and the
//! resources' handlers, above this, are in `resources`.
//!
//! Every POST goes through one pipeline: `application/jose+json`, a body
//! within `max_body_bytes`, a well-formed JWS ([`SignedRequest::parse`]), the
//! `url` header equal to the URL requested, the key (`jwk` where the endpoint
//! takes one, else `kid` naming a valid account), the signature, and last the
//! nonce, redeemed once. Every answer carries a fresh `Replay-Nonce`, a
//! `Link: <directory>;rel="index"` and `Cache-Control: no-store`; every
//! refusal is a problem document.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, LINK, LOCATION, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use signet_acme::jws::KeyRef;
use signet_acme::problem::PROBLEM_CONTENT_TYPE;
use signet_acme::{Jwk, Problem, ProblemType, SignedRequest, VerifiedRequest};
use signet_runtime::http::Body;

use crate::db::{AccountRec, Id};
use crate::nonce::NonceError;
use crate::Acme;

/// A handler's result: the answer, or the problem to send.
pub type Answer = Result<Reply, Problem>;

/// A successful answer before the common headers are added.
pub struct Reply {
    /// HTTP status.
    pub status: StatusCode,
    /// Content-Type (none for an empty body).
    pub content_type: Option<&'static str>,
    /// The body.
    pub body: Bytes,
    /// `Location`.
    pub location: Option<String>,
    /// Extra `Link` values (besides the directory index).
    pub links: Vec<String>,
    /// `Retry-After`, seconds.
    pub retry_after: Option<u64>,
}

impl Reply {
    /// A JSON body with `status`.
    pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Reply {
        Reply {
            status,
            content_type: Some("application/json"),
            body: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
            location: None,
            links: Vec::new(),
            retry_after: None,
        }
    }

    /// An empty body with `status`.
    pub fn empty(status: StatusCode) -> Reply {
        Reply { status, content_type: None, body: Bytes::new(), location: None, links: Vec::new(), retry_after: None }
    }

    /// Adds `Location`.
    pub fn at(mut self, url: String) -> Reply {
        self.location = Some(url);
        self
    }

    /// Adds `Retry-After`.
    pub fn retry_after(mut self, secs: Option<u64>) -> Reply {
        self.retry_after = secs;
        self
    }
}

/// A problem with an explicit status (for 404, 405, 409, 413, 415).
pub fn problem_with_status(kind: ProblemType, status: u16, detail: impl Into<String>) -> Problem {
    Problem { status: Some(status), ..Problem::new(kind, detail) }
}

/// Logs an internal failure and hides its detail from the client.
pub fn internal(what: &str, e: impl std::fmt::Display) -> Problem {
    tracing::error!(error = %e, "{what}");
    Problem::new(ProblemType::ServerInternal, format!("{what}; try again later"))
}

/// A failed store write: a full or read-only disk (logged once by the store's
/// `SpaceWatch`) is named and worth retrying (`Retry-After`); anything else is
/// [`internal`].
pub fn store_failure(what: &str, e: signet_store::StoreError) -> Problem {
    match e.refuses_writes() {
        Some(state) => {
            Problem::new(ProblemType::ServerInternal, format!("{what}: the CA's storage {state}; try again later"))
                .retry_after(UNAVAILABLE_RETRY_SECS)
        }
        None => internal(what, e),
    }
}

/// How long a client is told to wait (`Retry-After`) when signd or ocspd
/// cannot be reached: about what a restart of either takes.
pub const UNAVAILABLE_RETRY_SECS: u64 = 10;

/// A failed call to signd or ocspd: `serverInternal`, with a `Retry-After`
/// when the daemon could not be reached (or is shutting down, or out of
/// space): the request may well pass once it is back.
pub fn ipc_failure(what: &str, e: signet_ipc::IpcError) -> Problem {
    let unavailable = e.kind.is_transient();
    let p = internal(what, e);
    if unavailable {
        p.retry_after(UNAVAILABLE_RETRY_SECS)
    } else {
        p
    }
}

/// A request after the pipeline: verified, nonce redeemed.
pub struct Authed {
    /// The verified request.
    pub req: VerifiedRequest,
    /// The account named by `kid` (absent when signed with `jwk`).
    pub account: Option<AuthedAccount>,
    /// The full URL requested.
    pub url: String,
}

/// The account that signed a request.
pub struct AuthedAccount {
    /// Its id.
    pub id: Id,
    /// Its record.
    pub rec: AccountRec,
    /// Its key.
    pub jwk: Jwk,
    /// Its URL (the `kid`).
    pub url: String,
}

impl Authed {
    /// The signing account, for endpoints that require `kid`.
    pub fn account(&self) -> Result<&AuthedAccount, Problem> {
        self.account.as_ref().ok_or_else(|| {
            Problem::new(ProblemType::Malformed, "this request must be signed with kid (the account URL)")
        })
    }
}

/// Which key reference an endpoint takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyRule {
    /// `jwk` only (newAccount).
    Jwk,
    /// `kid` only (everything else).
    Kid,
    /// Either (revokeCert).
    Either,
}

/// The HTTP handler: routes requests to [`Acme`] (its routes are with the
/// resources they lead to).
pub struct AcmeHttp(pub Arc<Acme>);

impl Acme {
    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `{base}/acme/{kind}/{b64 id}`.
    pub fn resource_url(&self, kind: &str, id: &[u8]) -> String {
        format!("{}/acme/{kind}/{}", self.base, URL_SAFE_NO_PAD.encode(id))
    }

    /// The HTTP response for `answer`, with the headers every answer carries.
    pub(crate) fn respond(&self, answer: Answer, method: &Method) -> Response<Full<Bytes>> {
        let (status, content_type, body, location, links, retry_after) = match answer {
            Ok(r) => (r.status, r.content_type, r.body, r.location, r.links, r.retry_after),
            Err(p) => {
                let status = StatusCode::from_u16(p.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
                if status.is_server_error() {
                    self.metrics.server_errors.inc();
                }
                // A rate limit says how long it lasts (`limits`), an unreachable
                // signd or ocspd how long to wait ([`ipc_failure`]).
                let retry = p.retry_after.or((p.kind == ProblemType::BadNonce).then_some(1));
                (status, Some(PROBLEM_CONTENT_TYPE), Bytes::from(p.to_json()), p.location.clone(), Vec::new(), retry)
            }
        };
        let body = if *method == Method::HEAD { Bytes::new() } else { body };
        let mut resp = Response::new(Full::new(body));
        *resp.status_mut() = status;
        let h = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&self.nonces.issue()) {
            h.insert("replay-nonce", v);
        }
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(ct) = content_type {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        if let Ok(v) = HeaderValue::from_str(&format!("<{}>;rel=\"index\"", self.url("/directory"))) {
            h.append(LINK, v);
        }
        for l in links {
            if let Ok(v) = HeaderValue::from_str(&l) {
                h.append(LINK, v);
            }
        }
        if let Some(loc) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            h.insert(LOCATION, loc);
        }
        if let Some(secs) = retry_after {
            h.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }

    /// The signed-request pipeline; see the module comment.
    pub(crate) async fn authenticate(&self, path: &str, rule: KeyRule, req: Request<Body>) -> Result<Authed, Problem> {
        // The body is read (or drained) before any refusal: answering while the
        // client still sends makes HTTP/2 reset the stream and hides the answer.
        let (parts, body) = req.into_parts();
        let body = read_body(body, self.cfg.max_body_bytes).await?;
        let content_type = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/jose+json") {
            return Err(problem_with_status(
                ProblemType::Malformed,
                415,
                format!("Content-Type must be application/jose+json, not {content_type:?}"),
            ));
        }
        let signed = SignedRequest::parse(&body)?;
        let url = self.url(path);
        signed.check_url(&url)?;
        let (verified, account) = match (&signed.header().key, rule) {
            (KeyRef::Jwk(_), KeyRule::Kid) => {
                return Err(Problem::new(
                    ProblemType::Malformed,
                    "this request must be signed with kid (the account URL), not jwk",
                ))
            }
            (KeyRef::Kid(_), KeyRule::Jwk) => {
                return Err(Problem::new(ProblemType::Malformed, "newAccount must be signed with jwk, not kid"))
            }
            (KeyRef::Jwk(_), _) => (signed.verify_embedded()?, None),
            (KeyRef::Kid(kid), _) => {
                let kid = kid.clone();
                let account = self.account_by_url(&kid)?;
                (signed.verify(&account.jwk)?, Some(account))
            }
        };
        match self.nonces.redeem(&verified.header().nonce) {
            Ok(()) => {}
            Err(NonceError::Unknown) => {
                return Err(Problem::new(
                    ProblemType::BadNonce,
                    "the nonce was not issued by this server (or before a restart)",
                ))
            }
            Err(NonceError::Used) => {
                return Err(Problem::new(ProblemType::BadNonce, "the nonce has already been used"))
            }
        }
        Ok(Authed { req: verified, account, url })
    }

    fn account_by_url(&self, kid: &str) -> Result<AuthedAccount, Problem> {
        let prefix = self.url("/acme/acct/");
        let id = kid.strip_prefix(&prefix).and_then(parse_id).ok_or_else(|| {
            Problem::new(ProblemType::AccountDoesNotExist, format!("{kid:?} is not an account URL of this server"))
        })?;
        let rec = self
            .db
            .store
            .read(|t| t.get(&self.db.accounts, &id))
            .map_err(|e| internal("reading an account", e))?
            .ok_or_else(|| Problem::new(ProblemType::AccountDoesNotExist, "no such account"))?;
        if rec.status != signet_acme::types::AccountStatus::Valid {
            return Err(Problem::new(
                ProblemType::Unauthorized,
                format!("the account is {}", status_name(&rec.status)),
            ));
        }
        let jwk = self.jwk_of(&rec)?;
        Ok(AuthedAccount { id, rec, jwk, url: kid.to_owned() })
    }

    /// The account's key, parsed (cached by canonical JSON).
    pub fn jwk_of(&self, rec: &AccountRec) -> Result<Jwk, Problem> {
        if let Some(j) = self.jwk_cache.get(&rec.jwk) {
            return Ok(j);
        }
        let value: serde_json::Value = serde_json::from_str(&rec.jwk).map_err(|e| internal("stored account key", e))?;
        let jwk = Jwk::from_json(&value).map_err(|e| internal("stored account key", e))?;
        self.jwk_cache.put(rec.jwk.clone(), jwk.clone());
        Ok(jwk)
    }
}

/// Parses a base64url resource id.
pub fn parse_id(s: &str) -> Option<Id> {
    URL_SAFE_NO_PAD.decode(s).ok()?.try_into().ok()
}

/// The JSON name of a status.
pub fn status_name<T: serde::Serialize>(s: &T) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// A small bounded map from canonical JWK JSON to the parsed key (parsing
/// costs an OpenSSL key import per request otherwise).
pub struct JwkCache {
    map: std::sync::Mutex<std::collections::HashMap<String, Jwk>>,
    capacity: usize,
}

impl JwkCache {
    /// A cache of up to `capacity` keys (cleared when full).
    pub fn new(capacity: usize) -> JwkCache {
        JwkCache { map: std::sync::Mutex::new(std::collections::HashMap::new()), capacity }
    }

    fn get(&self, k: &str) -> Option<Jwk> {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).get(k).cloned()
    }

    fn put(&self, k: String, v: Jwk) {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= self.capacity {
            m.clear();
        }
        m.insert(k, v);
    }
}

/// Reads a request body of at most `limit` bytes. A longer one is read on (up
/// to 16 times the limit) and dropped before the 413 answer, so the client
/// sees the answer instead of a reset connection.
pub(crate) async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, Problem> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| Problem::new(ProblemType::Malformed, format!("reading the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len();
        if seen <= limit {
            buf.extend_from_slice(&data);
        } else if seen > limit.saturating_mul(16) {
            break;
        }
    }
    if seen > limit {
        return Err(problem_with_status(
            ProblemType::Malformed,
            413,
            format!("request body larger than {limit} bytes"),
        ));
    }
    Ok(Bytes::from(buf))
}
