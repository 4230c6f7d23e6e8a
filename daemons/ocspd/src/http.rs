//! The HTTP face of ocspd: OCSP over GET and POST (RFC 6960 appendix A,
//! RFC 5019) and CRLs, with the caching headers relying parties and CDNs use.
//!
//! | path | answers |
//! |---|---|
//! | `POST /` or `POST /ocsp` | OCSP, body `application/ocsp-request` |
//! | `GET /{base64}` or `GET /ocsp/{base64}` | OCSP, the URL-encoded base64 DER request |
//! | `GET /crl/{issuer}.crl` | the full CRL |
//! | `GET /crl/{issuer}/{n}.crl` | shard `n` |
//! | `GET /crl/{issuer}/delta.crl` | the delta CRL |
//!
//! Anything that is not an OCSP request gets an OCSPResponse with status
//! `malformedRequest` (HTTP 200, as RFC 6960 wants); a CRL path that does not
//! exist gets 404.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{
    HeaderMap, HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, IF_NONE_MATCH, LAST_MODIFIED,
};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use signet_ca::OcspErrorStatus;
use signet_runtime::http::Body;
use signet_runtime::http::{text_response, Handler, PeerAddr};
use signet_runtime::metrics::Metrics;

use crate::core::{Core, Freshness, OcspAnswer};
use crate::db::CrlKind;
use crate::hot::{cache_control, CacheHeaders, Hot, HotAnswers, Via};

/// The largest OCSP request accepted (one CertID plus a nonce is ~100 bytes;
/// signed requests with certificates are bigger).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

const OCSP_REQUEST: &str = "application/ocsp-request";
const OCSP_RESPONSE: &str = "application/ocsp-response";
const PKIX_CRL: &str = "application/pkix-crl";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OcspLabels {
    /// good, revoked, unknown, cached, or the error status.
    outcome: &'static str,
}

/// ocspd's HTTP handler.
#[derive(Clone)]
pub struct OcspHttp(Arc<Inner>);

struct Inner {
    core: Arc<Core>,
    answers: Family<OcspLabels, Counter>,
    /// `answers` for outcome "cached", looked up once.
    cached: Counter,
    hot: HotAnswers,
}

impl OcspHttp {
    /// A handler over `core`, registering its metrics in `metrics`.
    pub fn new(core: Arc<Core>, metrics: &Metrics) -> Self {
        let answers = Family::<OcspLabels, Counter>::default();
        metrics.register("ocsp_responses", "OCSP responses sent, by outcome", answers.clone());
        let cached = answers.get_or_create(&OcspLabels { outcome: "cached" }).clone();
        Self(Arc::new(Inner { core, answers, cached, hot: HotAnswers::default() }))
    }
}

impl Handler for OcspHttp {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let inner = self.0.clone();
        async move { inner.route(req).await }.boxed()
    }
}

impl Inner {
    async fn route(&self, req: Request<Body>) -> Response<Full<Bytes>> {
        // Proxies often double the leading slash: any number of them means one.
        let path = req.uri().path().trim_start_matches('/');
        if let Some(rest) = path.strip_prefix("crl/") {
            return match *req.method() {
                Method::GET | Method::HEAD => self.crl(rest, req.headers()),
                _ => method_not_allowed("GET, HEAD"),
            };
        }
        // Every If-None-Match field line (usually none: no allocation).
        let if_none_match: Vec<HeaderValue> = req.headers().get_all(IF_NONE_MATCH).iter().cloned().collect();
        let client = req.extensions().get::<PeerAddr>().map(|p| p.0.ip());
        match *req.method() {
            Method::POST => match read_body(req).await {
                Ok(der) => self.ocsp(Via::Post, &der, || Some(Cow::Borrowed(&der)), &if_none_match, client).await,
                Err(resp) => resp,
            },
            Method::GET | Method::HEAD => {
                let encoded = get_payload(path);
                let der = || decode_get(encoded).map(Cow::Owned);
                self.ocsp(Via::Get, encoded.as_bytes(), der, &if_none_match, client).await
            }
            _ => method_not_allowed("GET, HEAD, POST"),
        }
    }

    /// Answers the OCSP request that arrived as `request` (a GET's base64 or
    /// a POST's body); `der` gives its DER, needed unless a kept answer
    /// ([`HotAnswers`]) serves it.
    async fn ocsp<'r>(
        &self,
        via: Via,
        request: &[u8],
        der: impl FnOnce() -> Option<Cow<'r, [u8]>>,
        if_none_match: &[HeaderValue],
        client: Option<IpAddr>,
    ) -> Response<Full<Bytes>> {
        // Read before the store is (see `hot`).
        let commits = self.core.db.store.commits();
        let now = self.core.now_secs();
        if let Some(hot) = self.hot.get(via, request, commits, now) {
            self.cached.inc();
            return hot_response(&hot, now, if_none_match);
        }
        let Some(der) = der() else { return self.ocsp_error(OcspErrorStatus::MalformedRequest) };
        match self.core.answer(&der, client).await {
            OcspAnswer::Error(status) => self.ocsp_error(status),
            OcspAnswer::Signed { der, etag, cache: Some(freshness), status, presigned } => {
                self.answers.get_or_create(&OcspLabels { outcome: status }).inc();
                let der = Bytes::from(der);
                if presigned {
                    let hot = self.hot.keep(via, request, commits, der, etag, freshness);
                    return hot_response(&hot, now, if_none_match);
                }
                let headers = CacheHeaders::new(&etag, &freshness);
                if matches_etag(if_none_match, &etag) {
                    return not_modified(&headers, &freshness, now);
                }
                let mut resp = der_response(der, OCSP_RESPONSE);
                caching_headers(resp.headers_mut(), &headers, &freshness, now);
                resp
            }
            OcspAnswer::Signed { der, status, cache: None, .. } => {
                self.answers.get_or_create(&OcspLabels { outcome: status }).inc();
                // Single-use (a nonce) or not to be kept (an unknown serial
                // may be recorded any moment): no validators.
                let mut resp = der_response(Bytes::from(der), OCSP_RESPONSE);
                resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                resp
            }
        }
    }

    fn ocsp_error(&self, status: OcspErrorStatus) -> Response<Full<Bytes>> {
        let outcome = match status {
            OcspErrorStatus::MalformedRequest => "malformedRequest",
            OcspErrorStatus::InternalError => "internalError",
            OcspErrorStatus::TryLater => "tryLater",
            OcspErrorStatus::Unauthorized => "unauthorized",
        };
        self.answers.get_or_create(&OcspLabels { outcome }).inc();
        match signet_ca::ocsp_error_response(status) {
            Ok(der) => {
                let mut resp = der_response(Bytes::from(der), OCSP_RESPONSE);
                resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                resp
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot encode an OCSP error response");
                text_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    fn crl(&self, rest: &str, headers_in: &HeaderMap) -> Response<Full<Bytes>> {
        let not_found = || text_response(StatusCode::NOT_FOUND, "no such CRL\n");
        let (name, kind) = match rest.split_once('/') {
            None => match rest.strip_suffix(".crl") {
                Some(name) => (name, CrlKind::Full),
                None => return not_found(),
            },
            Some((name, file)) => match file.strip_suffix(".crl") {
                Some("delta") => (name, CrlKind::Delta),
                Some(n) => match shard_number(n) {
                    Some(n) => (name, CrlKind::Shard(n)),
                    None => return not_found(),
                },
                None => return not_found(),
            },
        };
        let issuers = self.core.issuers();
        let Some(iss) = issuers.iter().find(|i| i.name == name) else { return not_found() };
        if let CrlKind::Shard(n) = kind {
            if n >= iss.profile.crl_shards {
                return not_found();
            }
        }
        let crl = match self.core.stored_crl(iss, kind) {
            Ok(Some(c)) => c,
            Ok(None) => return text_response(StatusCode::SERVICE_UNAVAILABLE, "no CRL signed yet\n"),
            Err(e) => {
                tracing::error!(error = %e, "CRL lookup failed");
                return text_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n");
            }
        };
        let tag = crl.etag;
        // A CRL may be kept until its nextUpdate.
        let freshness = Freshness { this_update: crl.this_update, next_update: crl.next_update, max_age_cap: u64::MAX };
        let (headers, now) = (CacheHeaders::new(&tag, &freshness), self.core.now_secs());
        let if_none_match: Vec<HeaderValue> = headers_in.get_all(IF_NONE_MATCH).iter().cloned().collect();
        if matches_etag(&if_none_match, &tag) {
            return not_modified(&headers, &freshness, now);
        }
        let mut resp = der_response(Bytes::from(crl.der), PKIX_CRL);
        caching_headers(resp.headers_mut(), &headers, &freshness, now);
        resp
    }
}

/// A shard number as written in a path: digits only, no leading zero.
fn shard_number(s: &str) -> Option<u32> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// The base64 part of a GET path (leading slashes already removed): after
/// `ocsp/` if it starts so, with any further leading slashes dropped. (The
/// base64 of a DER SEQUENCE starts with `M`, never with `o`.)
fn get_payload(path: &str) -> &str {
    let encoded = match path.strip_prefix("ocsp") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    };
    encoded.trim_start_matches('/')
}

/// Whether If-None-Match (all its field lines) matches the entity tag `tag`
/// (with its quotes): `*`, or a list naming it, `W/` or not. RFC 9110
/// 13.1.2 compares If-None-Match weakly (8.8.3.2: the opaque tags alone).
/// A list that does not parse matches nothing: the full answer is sent.
fn matches_etag(if_none_match: &[HeaderValue], tag: &str) -> bool {
    let ours = tag.strip_prefix("W/").unwrap_or(tag);
    if_none_match.iter().filter_map(|v| v.to_str().ok()).any(|list| etag_list_contains(list, ours))
}

/// `#( "*" / [ "W/" ] DQUOTE etagc* DQUOTE )`, searched for `ours`.
fn etag_list_contains(list: &str, ours: &str) -> bool {
    let mut rest = list;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return false;
        }
        if let Some(after) = rest.strip_prefix('*') {
            let after = after.trim_start_matches([' ', '\t']);
            return after.is_empty() || after.starts_with(',');
        }
        let unweak = rest.strip_prefix("W/").unwrap_or(rest);
        let Some(opened) = unweak.strip_prefix('"') else { return false };
        let Some(end) = opened.find('"') else { return false };
        // The tag with its quotes.
        if &unweak[..end + 2] == ours {
            return true;
        }
        rest = &opened[end + 1..];
    }
}

fn not_modified(headers: &CacheHeaders, freshness: &Freshness, now: i64) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::NOT_MODIFIED;
    caching_headers(resp.headers_mut(), headers, freshness, now);
    resp
}

/// A kept answer ([`HotAnswers`]): the response, or 304 if the client has it.
fn hot_response(hot: &Hot, now: i64, if_none_match: &[HeaderValue]) -> Response<Full<Bytes>> {
    if matches_etag(if_none_match, &hot.etag) {
        return not_modified(&hot.headers, &hot.freshness, now);
    }
    let mut resp = der_response(hot.der.clone(), OCSP_RESPONSE);
    caching_headers(resp.headers_mut(), &hot.headers, &hot.freshness, now);
    resp
}

/// Decodes the GET form: URL-decoded, then standard base64 (padding optional).
/// `+` stays `+` (this is a path, not a form) and `/` may arrive unescaped.
pub fn decode_get(encoded: &str) -> Option<Vec<u8>> {
    if encoded.is_empty() || encoded.len() > MAX_REQUEST_BYTES * 2 {
        return None;
    }
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(encoded).collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(decoded).ok()
}

async fn read_body(req: Request<Body>) -> Result<Vec<u8>, Response<Full<Bytes>>> {
    // RFC 6960 A.1 names the type; be lenient about a missing header.
    if req.headers().get(CONTENT_TYPE).is_some_and(|v| !is_ocsp_request_type(v)) {
        return Err(text_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, "expected application/ocsp-request\n"));
    }
    match Limited::new(req.into_body(), MAX_REQUEST_BYTES).collect().await {
        Ok(b) => Ok(b.to_bytes().to_vec()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(text_response(StatusCode::PAYLOAD_TOO_LARGE, "OCSP request too large\n"))
        }
        Err(e) if e.downcast_ref::<signet_runtime::http::BodyError>().is_some_and(|e| e.is_too_slow()) => {
            Err(text_response(StatusCode::REQUEST_TIMEOUT, format!("{e}\n")))
        }
        Err(e) => Err(text_response(StatusCode::BAD_REQUEST, format!("cannot read the request body: {e}\n"))),
    }
}

/// Whether a Content-Type is `application/ocsp-request`: type and subtype
/// are case-insensitive and parameters (`; charset=...`) do not change the
/// media type (RFC 9110 8.3.1).
fn is_ocsp_request_type(value: &HeaderValue) -> bool {
    let Ok(value) = value.to_str() else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim_matches([' ', '\t']);
    essence.eq_ignore_ascii_case(OCSP_REQUEST)
}

fn der_response(der: Bytes, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(der));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// RFC 5019 6.2: Last-Modified = thisUpdate, Expires = nextUpdate, max-age
/// no later than nextUpdate, and an ETag.
fn caching_headers(h: &mut HeaderMap, headers: &CacheHeaders, freshness: &Freshness, now: i64) {
    let max_age = freshness.max_age(now);
    let cc = match &headers.capped {
        Some(capped) if max_age == freshness.max_age_cap => Some(capped.clone()),
        _ => cache_control(max_age),
    };
    if let Some(v) = cc {
        h.insert(CACHE_CONTROL, v);
    }
    if let Some(v) = &headers.etag {
        h.insert(ETAG, v.clone());
    }
    h.insert(LAST_MODIFIED, headers.last_modified.clone());
    h.insert(EXPIRES, headers.expires.clone());
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut resp = text_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    resp.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn get_decoding_keeps_plus_and_slash() {
        // 0xfb 0xff 0xbf encodes as "+/+/": both survive, escaped or not.
        assert_eq!(decode_get("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        assert_eq!(decode_get("%2B%2F%2B%2F").unwrap(), [0xfb, 0xff, 0xbf]);
        assert_eq!(decode_get("%2b%2f%2b%2f").unwrap(), [0xfb, 0xff, 0xbf]);
        // Padding escaped, present or absent.
        assert_eq!(decode_get("AA%3D%3D").unwrap(), [0]);
        assert_eq!(decode_get("AA==").unwrap(), [0]);
        assert_eq!(decode_get("AA").unwrap(), [0]);
        assert!(decode_get("").is_none());
        assert!(decode_get("not base64!").is_none());
    }

    #[test]
    fn media_types_are_case_insensitive_and_parameters_ignored() {
        for ok in [
            "application/ocsp-request",
            "Application/OCSP-Request",
            "APPLICATION/OCSP-REQUEST",
            "application/ocsp-request; charset=utf-8",
            "Application/Ocsp-Request ;foo=bar",
        ] {
            assert!(is_ocsp_request_type(&HeaderValue::from_static(ok)), "{ok}");
        }
        for bad in ["", "text/plain", "application/ocsp-requestx", "application/ocsp-response", "application/ocsp"] {
            assert!(!is_ocsp_request_type(&HeaderValue::from_static(bad)), "{bad}");
        }
        assert!(!is_ocsp_request_type(&HeaderValue::from_bytes(b"application/ocsp-request\xff").unwrap()));
    }

    #[test]
    fn if_none_match_compares_weakly_and_reads_lists() {
        let tag = "\"0123abcd\"";
        let matches = |values: &[&'static str]| {
            let v: Vec<HeaderValue> = values.iter().map(|v| HeaderValue::from_static(v)).collect();
            matches_etag(&v, tag)
        };
        for yes in [
            &["\"0123abcd\""][..],
            &["W/\"0123abcd\""],
            &["*"],
            &[" * "],
            &["\"other\", W/\"0123abcd\""],
            &["\"a\",\"b\",\"0123abcd\""],
            &["\"x,y\", \"0123abcd\""],
            &["\"other\"", "W/\"0123abcd\""],
        ] {
            assert!(matches(yes), "{yes:?}");
        }
        for no in [
            &[][..],
            &["\"other\""],
            &["0123abcd"],
            &["w/\"0123abcd\""],
            &["\"0123abcd"],
            &["\"0123abc\""],
            &["garbage, \"0123abcd\""],
            &["*x"],
        ] {
            assert!(!matches(no), "{no:?}");
        }
        // Our own tag weak: compared weakly all the same.
        assert!(matches_etag(&[HeaderValue::from_static("\"0123abcd\"")], "W/\"0123abcd\""));
    }

    #[test]
    fn get_paths_lose_their_leading_slashes_and_ocsp_prefix() {
        for (path, want) in [
            ("MEow", "MEow"),
            ("ocsp/MEow", "MEow"),
            ("ocsp//MEow", "MEow"),
            ("ocsp", ""),
            ("ocsp/", ""),
            ("/MEow", "MEow"),
            ("MEow/+/=", "MEow/+/="),
            ("ocspMEow", "ocspMEow"),
        ] {
            assert_eq!(get_payload(path), want, "{path}");
        }
    }

    #[test]
    fn shard_numbers_are_canonical() {
        assert_eq!(shard_number("0"), Some(0));
        assert_eq!(shard_number("17"), Some(17));
        for bad in ["", "007", "+7", "-1", "1x", "99999999999"] {
            assert_eq!(shard_number(bad), None, "{bad}");
        }
    }
}
