//! OAuth error responses (RFC 6749 §5.2, RFC 7009 §2.2.1, RFC 7662 §2.3).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, PRAGMA, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

/// An error a client is told about, in RFC 6749's JSON form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `error` code.
    pub code: &'static str,
    /// `error_description`: one line for the developer.
    pub description: String,
    /// A fresh DPoP nonce for the client (`DPoP-Nonce`, RFC 9449 §8).
    pub dpop_nonce: Option<String>,
}

impl OAuthError {
    /// An error of any status and code.
    pub fn new(status: StatusCode, code: &'static str, description: impl Into<String>) -> Self {
        Self { status, code, description: description.into(), dpop_nonce: None }
    }

    /// `invalid_dpop_proof` (400, RFC 9449 §5.8).
    pub fn invalid_dpop_proof(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_dpop_proof", d)
    }

    /// `use_dpop_nonce` (400, RFC 9449 §8) with the nonce to use.
    pub fn use_dpop_nonce(nonce: String) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "use_dpop_nonce", "a DPoP proof must carry the server's nonce");
        e.dpop_nonce = Some(nonce);
        e
    }

    /// `invalid_request` (400).
    pub fn invalid_request(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", d)
    }

    /// `invalid_client` (401, with `WWW-Authenticate`).
    pub fn invalid_client(d: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "invalid_client", d)
    }

    /// `invalid_grant` (400).
    pub fn invalid_grant(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_grant", d)
    }

    /// `unauthorized_client` (400).
    pub fn unauthorized_client(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "unauthorized_client", d)
    }

    /// `unsupported_grant_type` (400).
    pub fn unsupported_grant_type(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "unsupported_grant_type", d)
    }

    /// `invalid_scope` (400).
    pub fn invalid_scope(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_scope", d)
    }

    /// `invalid_target` (400, RFC 8707): an audience the client may not name.
    pub fn invalid_target(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_target", d)
    }

    /// `unsupported_token_type` (400, RFC 7009 §2.2.1).
    pub fn unsupported_token_type(d: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "unsupported_token_type", d)
    }

    /// `server_error` (500); `temporarily_unavailable` is sent as 503 with Retry-After.
    pub fn server_error(d: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", d)
    }

    /// `temporarily_unavailable` (503, Retry-After): signd or the store cannot serve now.
    pub fn unavailable(d: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable", d)
    }

    /// The response.
    pub fn response(&self) -> Response<Full<Bytes>> {
        let body = serde_json::json!({ "error": self.code, "error_description": self.description });
        let mut r = json_response(self.status, &body);
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"tokend\""));
        }
        if let Some(n) = self.dpop_nonce.as_deref().and_then(|n| HeaderValue::from_str(n).ok()) {
            r.headers_mut().insert("dpop-nonce", n);
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// A JSON response that caches must not keep (RFC 6749 §5.1).
pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut().insert(PRAGMA, HeaderValue::from_static("no-cache"));
    r
}
