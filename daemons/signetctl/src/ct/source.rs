//! Where `signetctl ct` reads a log from: the [`LogSource`] trait (a GET
//! under the log's URL prefix), its HTTP implementation over hyper-util's
//! client, and tile fetching with the tlog-tiles fallback from a partial tile
//! to the full one.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::USER_AGENT;
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use signet_ct::merkle::tile::hashes_from_tile_bytes;
use signet_ct::merkle::{Hash, Tile, HASH_SIZE, TILE_WIDTH};
use signet_ct::staticct::{decode_data_tile, TileLeaf};

use super::CtError;

/// Largest response body read: far above any tile (a data tile of 256 large
/// certificates is a few MiB), far below what would hurt.
const MAX_BODY: usize = 64 << 20;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one request may take, from connecting to the last body byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A log's objects, by their path under the log's URL prefix (`checkpoint`,
/// `tile/0/000`, `ct/v1/get-sth-consistency?first=1&second=2`, ...).
pub(crate) trait LogSource {
    /// The URL of `path`, as error messages name it.
    fn url(&self, path: &str) -> String;

    /// The body of a successful GET of `path`.
    fn fetch(&self, path: &str) -> impl Future<Output = Result<Bytes, FetchError>>;
}

/// Why a GET failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FetchError {
    /// The server answered 404.
    NotFound {
        /// The URL asked for.
        url: String,
    },
    /// The server answered with another status than 200.
    Status {
        /// The URL asked for.
        url: String,
        /// The status code.
        status: u16,
    },
    /// No answer: the URL is unusable, the connection failed or timed out,
    /// or the body was cut short or too large.
    Network {
        /// The URL asked for.
        url: String,
        /// What happened.
        detail: String,
    },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound { url } => write!(f, "GET {url}: 404 Not Found"),
            Self::Status { url, status } => {
                let reason = StatusCode::from_u16(*status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
                write!(f, "GET {url}: {status} {reason}")
            }
            Self::Network { url, detail } => write!(f, "GET {url}: {detail}"),
        }
    }
}

impl From<FetchError> for CtError {
    /// A log that is down (no answer, 5xx) is unavailable; one that answers
    /// 404 or another refusal for what it must serve fails the check.
    fn from(e: FetchError) -> Self {
        match e {
            FetchError::Network { .. } => CtError::Unavailable(e.to_string()),
            FetchError::Status { status, .. } if status >= 500 => CtError::Unavailable(e.to_string()),
            _ => CtError::Check(e.to_string()),
        }
    }
}

/// An HTTP client for `http://` URLs (one connection pool, shared by every
/// log a command reads).
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Http {
    /// A client; it must be used inside a tokio runtime.
    pub(crate) fn new() -> Self {
        let mut connector = HttpConnector::new();
        // Small requests, answered at once: Nagle's algorithm only adds delay.
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        Self { client: Client::builder(TokioExecutor::new()).build(connector) }
    }

    /// The body of a successful (200) GET of `url`.
    pub(crate) async fn get(&self, url: &str) -> Result<Bytes, FetchError> {
        let network = |detail: String| FetchError::Network { url: url.to_string(), detail };
        let uri: Uri = url.parse().map_err(|e| network(format!("bad URL: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(network("only http:// URLs are supported".into()));
        }
        let request = Request::get(uri)
            .header(USER_AGENT, concat!("signetctl/", env!("CARGO_PKG_VERSION")))
            .body(Empty::new())
            .map_err(|e| network(e.to_string()))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| network(error_chain(&e)))?;
            match response.status() {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND => return Err(FetchError::NotFound { url: url.to_string() }),
                s => return Err(FetchError::Status { url: url.to_string(), status: s.as_u16() }),
            }
            let body = Limited::new(response.into_body(), MAX_BODY).collect().await;
            body.map(|b| b.to_bytes()).map_err(|e| network(format!("reading the body: {e}")))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| network(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())))?
    }
}

/// An error and its sources, `: `-separated (hyper's own message alone is
/// often just "client error (Connect)").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// One log over HTTP: `prefix` is its URL, ending in `/`.
pub(crate) struct HttpLog {
    http: Http,
    prefix: String,
}

impl std::fmt::Debug for HttpLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpLog").field("prefix", &self.prefix).finish()
    }
}

impl HttpLog {
    /// The log at `prefix` (a URL ending in `/`).
    pub(crate) fn new(http: Http, prefix: String) -> Self {
        Self { http, prefix }
    }
}

impl LogSource for HttpLog {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    async fn fetch(&self, path: &str) -> Result<Bytes, FetchError> {
        self.http.get(&self.url(path)).await
    }
}

/// GETs a tile (`path` gives the hash or the data tile path of a tile); a
/// partial tile that is not found is read from the prefix of the full tile,
/// as tlog-tiles lets logs delete partial tiles once the full one exists.
/// Returns the body and whether it is the full tile standing in.
async fn fetch_tile(src: &impl LogSource, tile: Tile, path: fn(&Tile) -> String) -> Result<(Bytes, bool), CtError> {
    match src.fetch(&path(&tile)).await {
        Ok(b) => Ok((b, false)),
        Err(FetchError::NotFound { url }) if tile.is_partial() => match src.fetch(&path(&tile.full())).await {
            Ok(b) => Ok((b, true)),
            Err(FetchError::NotFound { .. }) => {
                Err(CtError::Check(format!("GET {url}: 404 Not Found, and the full tile is not there either")))
            }
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// The first `tile.width()` hashes of a hash tile. A tile served under its
/// own path must have exactly its width; a full tile standing in for a
/// partial one, 256.
pub(crate) async fn fetch_hash_tile(src: &impl LogSource, tile: Tile) -> Result<Vec<Hash>, CtError> {
    let (bytes, full) = fetch_tile(src, tile, Tile::path).await?;
    let served = if full { tile.full() } else { tile };
    let Some(mut hashes) = hashes_from_tile_bytes(&bytes) else {
        return Err(CtError::Check(format!(
            "{}: {} bytes, not a tile of whole {HASH_SIZE}-byte hashes",
            served.path(),
            bytes.len()
        )));
    };
    if hashes.len() != usize::from(served.width()) {
        return Err(CtError::Check(format!("{}: {} hashes, expected {}", served.path(), hashes.len(), served.width())));
    }
    hashes.truncate(usize::from(tile.width()));
    Ok(hashes)
}

/// The first `tile.width()` entries of the data tile of level-0 tile `tile`,
/// with the same rules as [`fetch_hash_tile`].
pub(crate) async fn fetch_data_tile(src: &impl LogSource, tile: Tile) -> Result<Vec<TileLeaf>, CtError> {
    let (bytes, full) = fetch_tile(src, tile, Tile::data_path).await?;
    let served = if full { tile.full() } else { tile };
    let mut leaves =
        decode_data_tile(&bytes).map_err(|e| CtError::Check(format!("{}: malformed: {e}", served.data_path())))?;
    let want = if full { usize::from(TILE_WIDTH) } else { usize::from(tile.width()) };
    if leaves.len() != want {
        return Err(CtError::Check(format!("{}: {} entries, expected {want}", served.data_path(), leaves.len())));
    }
    leaves.truncate(usize::from(tile.width()));
    Ok(leaves)
}
