//! Clients' JWK sets by URL (a `jwks_uri`, OIDC Dynamic Client Registration
//! §2; private_key_jwt and self_signed_tls_client_auth): fetched over
//! HTTP(S), cached, and fetched again when an assertion names a key, or a TLS
//! client presents a certificate, the cached set lacks (the client rotated
//! its keys), at most once per [`REFETCH_SECONDS`] per URL.
//!
//! A fetch has [`FETCH_TIMEOUT`] and takes at most [`MAX_JWKS`] bytes; https
//! is verified against the system's trust store. A failed fetch leaves the
//! cached set in place (a client is not locked out by its web server's
//! hiccup) and is an `invalid_client` only when no cached key fits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use signet_jose::{Algorithm, Jwks};

/// How long a fetched set is used before it is fetched again.
pub const CACHE_SECONDS: u64 = 300;
/// How often an unknown `kid` may cause a fetch of the same URL.
pub const REFETCH_SECONDS: u64 = 10;
/// How long a fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWK set fetched, in bytes.
pub const MAX_JWKS: usize = 64 * 1024;

/// Whether a client's registered `jwks` text is a URL (else a JWKS document).
pub fn is_uri(jwks: &str) -> bool {
    jwks.starts_with("https://") || jwks.starts_with("http://")
}

/// tokend's outbound HTTP(S) client (clients' JWK sets, OCSP responders):
/// hyper-util over signet-runtime's connector, OpenSSL TLS verified against
/// the system's trust store, connections given up after `connect_timeout`.
pub fn http_client(connect_timeout: Duration) -> Result<HttpClient, String> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    let tls = openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls_client())
        .map_err(|e| format!("TLS client: {e}"))?
        .build();
    let connector = signet_runtime::client::TlsConnector::new(http, Some(Arc::new(tls)));
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// The client [`http_client`] makes.
pub type HttpClient = Client<signet_runtime::client::TlsConnector, Full<Bytes>>;

/// A fetched JWK set: parsed for signatures, and as the document it was
/// (self_signed_tls_client_auth compares certificates with its `x5c` members).
pub struct Fetched {
    /// The keys Signet can verify with.
    pub jwks: Jwks,
    /// The whole document.
    pub doc: serde_json::Value,
}

struct Entry {
    set: Arc<Fetched>,
    fetched: Instant,
}

/// The cache, shared by every request.
pub struct RemoteJwks {
    client: HttpClient,
    cache: Mutex<HashMap<String, Entry>>,
}

impl RemoteJwks {
    /// A cache with its HTTP(S) client ([`http_client`]).
    pub fn new() -> Result<RemoteJwks, String> {
        Ok(RemoteJwks { client: http_client(FETCH_TIMEOUT)?, cache: Mutex::new(HashMap::new()) })
    }

    fn cached(&self, uri: &str) -> Option<(Arc<Fetched>, Instant)> {
        let cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.get(uri).map(|e| (e.set.clone(), e.fetched))
    }

    async fn fetch(&self, uri: &str) -> Result<Arc<Fetched>, String> {
        let target: hyper::Uri = uri.parse().map_err(|e| format!("{uri}: {e}"))?;
        let req = hyper::Request::get(target)
            .header(hyper::header::ACCEPT, "application/jwk-set+json, application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let resp = tokio::time::timeout(FETCH_TIMEOUT, self.client.request(req))
            .await
            .map_err(|_| format!("{uri}: no answer in {} s", FETCH_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{uri}: {e}"))?;
        if resp.status() != hyper::StatusCode::OK {
            return Err(format!("{uri}: HTTP {}", resp.status()));
        }
        let body = tokio::time::timeout(FETCH_TIMEOUT, Limited::new(resp.into_body(), MAX_JWKS).collect())
            .await
            .map_err(|_| format!("{uri}: the body took over {} s", FETCH_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{uri}: {e}"))?
            .to_bytes();
        let jwks = Jwks::parse(&body).map_err(|e| format!("{uri}: {e}"))?;
        let doc = serde_json::from_slice(&body).map_err(|e| format!("{uri}: {e}"))?;
        let set = Arc::new(Fetched { jwks, doc });
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= 10_000 {
            cache.retain(|_, e| e.fetched.elapsed() < Duration::from_secs(CACHE_SECONDS));
        }
        cache.insert(uri.to_owned(), Entry { set: set.clone(), fetched: Instant::now() });
        Ok(set)
    }

    /// The set at `uri` holding a key for (`kid`, `alg`), fetching it (again)
    /// as the rules above allow.
    pub async fn find(&self, uri: &str, kid: Option<&str>, alg: Algorithm) -> Result<Arc<Fetched>, String> {
        self.lookup(uri, |set| set.jwks.find(kid, alg).is_some()).await
    }

    /// The set at `uri`, fetched (again) as the rules above allow, `fits`
    /// saying whether a set holds what the request needs (a key, a
    /// certificate). A set that does not fit may be the answer: the cached
    /// one, within [`REFETCH_SECONDS`] of its fetch, or a fresh one.
    pub async fn lookup(&self, uri: &str, fits: impl Fn(&Fetched) -> bool) -> Result<Arc<Fetched>, String> {
        let cached = self.cached(uri);
        if let Some((set, fetched)) = &cached {
            let age = fetched.elapsed();
            let fresh = age < Duration::from_secs(CACHE_SECONDS);
            if fresh && (fits(set) || age < Duration::from_secs(REFETCH_SECONDS)) {
                return Ok(set.clone());
            }
        }
        match self.fetch(uri).await {
            Ok(set) => Ok(set),
            Err(e) => match cached {
                Some((set, _)) if fits(&set) => {
                    tracing::warn!(error = %e, "a client's JWKS could not be fetched again; the cached one is used");
                    Ok(set)
                }
                _ => Err(e),
            },
        }
    }
}
