//! The HTTP server scaffold: HTTP/1.1 and h2c (prior knowledge) with keep-alive on hyper,
//! `/healthz` and `/metrics` built in, every other path handed to the daemon's [`Handler`],
//! request metrics, and graceful drain on shutdown.
//!
//! Connection handling (`Server::spawn_connection` below) takes any `AsyncRead + AsyncWrite`
//! stream, so a TLS layer only has to wrap the accepted `TcpStream` before handing it on.
//!
//! What a client may hold is bounded by [`HttpLimits`] (a daemon's `[http]` table): the TLS
//! handshake, a request's head, its body's minimum rate ([`Body`]), the idle time between
//! requests, and the number of connections open (the longest idle is shed first).

mod conn;
mod limits;

pub use limits::{raise_open_file_limit, Body, BodyError, HttpLimits};

use std::convert::Infallible;
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use openssl::ssl::{Ssl, SslAcceptor};
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_openssl::SslStream;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::metrics::Metrics;
use conn::{Conn, Connections, Watched};

/// How long [`serve`] waits for in-flight connections after shutdown before closing them.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after an accept error such as EMFILE, so a full fd table does not spin the loop.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// The address of the client a request came from, in the request's extensions
/// (`req.extensions().get::<PeerAddr>()`), for per-client limits and logs.
/// Absent only when the kernel could not name the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The certificate chain a TLS client presented, DER, leaf first, in the
/// request's extensions (`req.extensions().get::<PeerCertificates>()`). Present
/// on every request that came over TLS ([`serve_tls`]); empty when the client
/// sent no certificate (or the acceptor did not ask for one:
/// [`crate::tls::acceptor_requesting_client_certs`] does). Nothing about the
/// chain is verified but that the client holds the leaf's private key: the
/// handler decides what it is worth. Absent on plain HTTP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCertificates(pub Arc<Vec<Vec<u8>>>);

impl PeerCertificates {
    /// The client's own certificate (DER), if it sent one.
    pub fn leaf(&self) -> Option<&[u8]> {
        self.0.first().map(Vec::as_slice)
    }
}

/// The daemon's request handler for every path except `/healthz` and `/metrics`.
///
/// A panic in the handler is caught and answered with 500. Closures of the right shape
/// implement this trait too.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>>;
}

impl<F> Handler for F
where
    F: Fn(Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> + Send + Sync + 'static,
{
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        self(req)
    }
}

/// HTML-escapes `s` for element text and double-quoted attribute values (the
/// server-rendered pages of tokend and probed).
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A plain-text response with the given status; a convenience for handlers.
pub fn text_response(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// Serves HTTP on `listener` until `shutdown` is cancelled.
///
/// `GET /healthz` answers 200 `ok` while `health` has no cause, and 503 `unhealthy` with a
/// `name: cause` line for each otherwise (see [`crate::health`]); `GET /metrics`
/// answers `metrics` in the OpenMetrics text format; everything else goes to `handler`. Each
/// answer is counted in `http_requests_total{code}` and timed in
/// `http_request_duration_seconds`. Accept errors are logged and retried. Connections are
/// held to `limits`. On shutdown the listener is closed, idle connections are closed, and
/// in-flight requests get up to [`DRAIN_TIMEOUT`] to finish before their connections are
/// dropped.
pub async fn serve(
    listener: TcpListener,
    limits: HttpLimits,
    handler: Arc<dyn Handler>,
    metrics: Metrics,
    health: Health,
    shutdown: CancellationToken,
) -> io::Result<()> {
    serve_with_drain(listener, None, limits, Routes { handler, metrics, health }, shutdown, DRAIN_TIMEOUT).await
}

/// Like [`serve`], over TLS: each accepted connection completes its handshake
/// (within [`HttpLimits::tls_handshake_timeout_ms`], off the accept loop) before HTTP
/// starts. ALPN picks HTTP/2 or HTTP/1.1 when the acceptor offers them (see
/// [`crate::tls::acceptor_from_files`]).
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<SslAcceptor>,
    limits: HttpLimits,
    handler: Arc<dyn Handler>,
    metrics: Metrics,
    health: Health,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let routes = Routes { handler, metrics, health };
    serve_with_drain(listener, Some(tls), limits, routes, shutdown, DRAIN_TIMEOUT).await
}

/// A connection whose TLS handshake is done, back to the accept loop.
type Handshaken = (SslStream<TcpStream>, Option<std::net::SocketAddr>, Arc<Conn>, Option<Held>);

/// The certificate chain the client of `ssl` presented, DER, leaf first.
fn peer_chain(ssl: &openssl::ssl::SslRef) -> PeerCertificates {
    let mut out = Vec::new();
    if let Some(leaf) = ssl.peer_certificate().and_then(|c| c.to_der().ok()) {
        // A server's view of the chain leaves the leaf out (OpenSSL), but a resumed one may not.
        let rest = ssl.peer_cert_chain().into_iter().flatten().filter_map(|c| c.to_der().ok());
        let rest: Vec<Vec<u8>> = rest.filter(|c| *c != leaf).collect();
        out.push(leaf);
        out.extend(rest);
    }
    PeerCertificates(Arc::new(out))
}

/// Runs one server-side TLS handshake and hands the stream to the accept loop.
async fn tls_handshake(
    acceptor: Arc<SslAcceptor>,
    stream: TcpStream,
    (conn, held): (Arc<Conn>, Option<Held>),
    connections: Arc<Connections>,
    ready: mpsc::Sender<Handshaken>,
    shutdown: CancellationToken,
) {
    let peer = stream.peer_addr().ok();
    let mut tls = match Ssl::new(acceptor.context()).and_then(|ssl| SslStream::new(ssl, stream)) {
        Ok(tls) => tls,
        Err(e) => {
            tracing::warn!(error = %e, "cannot set up a TLS session");
            connections.remove(&conn);
            return;
        }
    };
    let handshake = tokio::time::timeout(connections.tls_handshake_timeout(), Pin::new(&mut tls).accept());
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = conn.closed().cancelled() => tracing::debug!(?peer, "TLS handshake shed"),
        done = handshake => match done {
            Ok(Ok(())) => {
                let _ = ready.send((tls, peer, conn, held)).await;
                return;
            }
            Ok(Err(e)) => tracing::debug!(?peer, error = %e, "TLS handshake failed"),
            Err(_) => {
                tracing::debug!(?peer, "TLS handshake timed out");
                connections.closed_for("tls_handshake_timeout");
            }
        },
    }
    connections.remove(&conn);
}

/// Like [`serve`] (`tls` `None`) or [`serve_tls`], on `threads` threads of its own (at
/// least one), the way nginx runs one worker per core: each thread runs a current-thread
/// runtime that accepts from `listener` and serves the connections it accepted to their end,
/// so a request never moves between threads and no thread wakes another to answer it (a
/// multi-thread runtime's work stealing does both). The threads keep their connection
/// counts within two of each other ([`Balance`]), and `limits` bounds them all together.
///
/// The handler's futures run on those runtimes: `tokio::spawn` and `spawn_blocking` work
/// there, `block_in_place` does not. A thread that cannot start stops the others; the
/// first error is returned once all have stopped.
pub async fn serve_on_threads(
    listener: TcpListener,
    threads: usize,
    tls: Option<Arc<SslAcceptor>>,
    limits: HttpLimits,
    routes: Routes,
    shutdown: CancellationToken,
) -> io::Result<()> {
    use futures::stream::{FuturesUnordered, StreamExt};
    let threads = threads.max(1);
    let connections = Arc::new(Connections::new(limits, routes.metrics.http().clone()));
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, threads, max_connections = connections.bound(), "HTTP server listening");
    }
    let listener = listener.into_std()?;
    let routes = Arc::new(routes);
    let counts: Arc<[AtomicUsize]> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
    let stop = shutdown.child_token();
    let mut running = FuturesUnordered::new();
    let mut first_error = None;
    for me in 0..threads {
        let (done, finished) = tokio::sync::oneshot::channel();
        let started = listener.try_clone().and_then(|listener| {
            let (routes, connections, tls, stop) = (routes.clone(), connections.clone(), tls.clone(), stop.clone());
            let balance = Balance { counts: counts.clone(), me };
            std::thread::Builder::new().name(format!("http-{me}")).spawn(move || {
                let served = tokio::runtime::Builder::new_current_thread().enable_all().build().and_then(|rt| {
                    rt.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        let server = Server::new(routes, connections);
                        accept_and_drain(listener, tls, server, Some(balance), stop, DRAIN_TIMEOUT).await
                    })
                });
                let _ = done.send(served);
            })
        });
        match started {
            Ok(_) => running.push(finished),
            Err(e) => {
                first_error = Some(e);
                stop.cancel();
                break;
            }
        }
    }
    drop(listener);
    while let Some(ended) = running.next().await {
        let ended = ended.unwrap_or_else(|_| Err(io::Error::other("an HTTP thread panicked")));
        if let Err(e) = ended {
            stop.cancel();
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Keeps the connections of the threads serving one listener even: a thread holding more
/// than one connection above the least loaded one stops accepting (the others take the
/// new connections) until that is no longer so.
struct Balance {
    counts: Arc<[AtomicUsize]>,
    me: usize,
}

/// How often a thread that [`Balance`] holds back looks again.
const BALANCE_RECHECK: Duration = Duration::from_millis(2);

impl Balance {
    fn may_accept(&self) -> bool {
        let least = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).min().unwrap_or(0);
        self.counts[self.me].load(Ordering::Relaxed) <= least + 1
    }

    /// Counts one more connection on this thread until the [`Held`] is dropped.
    fn hold(&self) -> Held {
        self.counts[self.me].fetch_add(1, Ordering::Relaxed);
        Held { counts: self.counts.clone(), me: self.me }
    }
}

/// One connection counted by [`Balance`], for as long as it lives.
struct Held {
    counts: Arc<[AtomicUsize]>,
    me: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.counts[self.me].fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve_with_drain(
    listener: TcpListener,
    tls: Option<Arc<SslAcceptor>>,
    limits: HttpLimits,
    routes: Routes,
    shutdown: CancellationToken,
    drain: Duration,
) -> io::Result<()> {
    let connections = Arc::new(Connections::new(limits, routes.metrics.http().clone()));
    let server = Server::new(Arc::new(routes), connections);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, max_connections = server.connections.bound(), "HTTP server listening");
    }
    accept_and_drain(listener, tls, server, None, shutdown, drain).await
}

/// The accept loop: serves what `listener` accepts (held back by `balance`, when it shares
/// the listener with other threads) until `shutdown`, then drains.
async fn accept_and_drain(
    listener: TcpListener,
    tls: Option<Arc<SslAcceptor>>,
    server: Server,
    balance: Option<Balance>,
    shutdown: CancellationToken,
    drain: Duration,
) -> io::Result<()> {
    // Handshakes run in their own tasks; finished ones come back here.
    let (handshaken, mut established) = mpsc::channel::<Handshaken>(64);
    loop {
        let may_accept = balance.as_ref().is_none_or(Balance::may_accept);
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some((tls_stream, peer, conn, held)) = established.recv() => {
                let certs = peer_chain(tls_stream.ssl());
                server.spawn_connection(tls_stream, peer, Some(certs), conn, held);
                continue;
            }
            accepted = listener.accept(), if may_accept => accepted,
            () = tokio::time::sleep(BALANCE_RECHECK), if !may_accept => continue,
        };
        match accepted {
            Ok((stream, peer)) => {
                let Some(conn) = server.connections.admit() else {
                    // At the bound with nothing idle to shed: this one goes.
                    drop(stream);
                    continue;
                };
                let held = balance.as_ref().map(Balance::hold);
                // Only a latency tweak; the connection works without it.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
                }
                match &tls {
                    None => server.spawn_connection(stream, Some(peer), None, conn, held),
                    Some(acceptor) => {
                        let connections = server.connections.clone();
                        let (acceptor, ready, stop) = (acceptor.clone(), handshaken.clone(), shutdown.clone());
                        tokio::spawn(tls_handshake(acceptor, stream, (conn, held), connections, ready, stop));
                    }
                }
            }
            Err(e) if is_connection_error(&e) => {
                tracing::debug!(error = %e, "accepted connection failed early");
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_ERROR_BACKOFF) => {}
                }
            }
        }
    }
    drop(listener);
    server.drain(drain).await;
    Ok(())
}

/// Errors that concern one connection, not the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Connection handling, independent of where the byte stream comes from.
struct Server {
    builder: auto::Builder<TokioExecutor>,
    routes: Arc<Routes>,
    connections: Arc<Connections>,
    graceful: GracefulShutdown,
    /// Cancelled when the drain time is up: drops the connections still open.
    force_close: CancellationToken,
}

impl Server {
    fn new(routes: Arc<Routes>, connections: Arc<Connections>) -> Server {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // Head and idle timeouts are the connection watchdog's, for HTTP/1.1 and HTTP/2
        // alike (hyper's own header timeout would also cut idle keep-alive connections).
        builder.http1().timer(TokioTimer::new()).header_read_timeout(None).keep_alive(true);
        builder.http2().timer(TokioTimer::new());
        Server {
            builder,
            routes,
            connections,
            graceful: GracefulShutdown::new(),
            force_close: CancellationToken::new(),
        }
    }

    /// Serves HTTP/1.1 or h2c on `io` in a new task, held to the listener's limits by
    /// `conn`'s watchdog; every request carries `peer` as a [`PeerAddr`] extension, and
    /// `certs` (a TLS connection's) as [`PeerCertificates`]. A TLS layer wraps `io` before this.
    /// `held` counts the connection on its thread ([`Balance`]) until it ends.
    fn spawn_connection<I>(
        &self,
        io: I,
        peer: Option<std::net::SocketAddr>,
        certs: Option<PeerCertificates>,
        conn: Arc<Conn>,
        held: Option<Held>,
    ) where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        conn.restart();
        let routes = self.routes.clone();
        let limits = *self.connections.limits();
        let on_request = conn.clone();
        let connections = self.connections.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let request = on_request.begin_request();
            let version = req.version();
            let mut req = req.map(|body| Body::new(body, &limits, on_request.clone()));
            if let Some(peer) = peer {
                req.extensions_mut().insert(PeerAddr(peer));
            }
            if let Some(certs) = &certs {
                req.extensions_mut().insert(certs.clone());
            }
            let routes = routes.clone();
            let conn = on_request.clone();
            let connections = connections.clone();
            async move {
                let mut resp = routes.answer(req).await;
                if conn.is_too_slow() {
                    connections.closed_for("body_too_slow");
                    if version < Version::HTTP_2 {
                        resp.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                    }
                }
                drop(request);
                Ok::<_, Infallible>(resp)
            }
        });
        let http = self.builder.serve_connection(TokioIo::new(Watched::new(io, conn.clone())), service).into_owned();
        let http = self.graceful.watch(http);
        let force_close = self.force_close.clone();
        let connections = self.connections.clone();
        tokio::spawn(async move {
            tokio::select! {
                result = http => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "HTTP connection ended with an error");
                    }
                }
                () = force_close.cancelled() => {
                    tracing::debug!("closing HTTP connection after drain timeout");
                }
                why = conn.watchdog(&connections) => {
                    if let Some(why) = why {
                        tracing::debug!(?peer, why, "closing HTTP connection");
                    }
                }
            }
            connections.remove(&conn);
            drop(held);
        });
    }

    /// Asks every connection to finish, waiting up to `limit`, then drops the rest.
    async fn drain(self, limit: Duration) {
        let open = self.graceful.count();
        if tokio::time::timeout(limit, self.graceful.shutdown()).await.is_err() {
            tracing::warn!(?limit, "HTTP connections still busy after drain timeout; closing");
            self.force_close.cancel();
        } else {
            tracing::debug!(open, "HTTP connections drained");
        }
    }
}

/// What the server answers: `/healthz` from `health`, `/metrics` from `metrics`, every
/// other path from the daemon's `handler` (see [`serve`]).
pub struct Routes {
    /// The daemon's handler.
    pub handler: Arc<dyn Handler>,
    /// The registry `/metrics` shows, and where the request metrics are counted.
    pub metrics: Metrics,
    /// What `/healthz` reports.
    pub health: Health,
}

impl Routes {
    async fn answer(&self, req: Request<Body>) -> Response<Full<Bytes>> {
        let start = Instant::now();
        let resp = match req.uri().path() {
            "/healthz" => self.healthz(req.method()),
            "/metrics" => self.metrics_page(req.method()),
            _ => {
                let fut = self.handler.handle(req);
                match AssertUnwindSafe(fut).catch_unwind().await {
                    Ok(resp) => resp,
                    Err(_) => {
                        tracing::error!("HTTP handler panicked");
                        text_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
                    }
                }
            }
        };
        self.metrics.http().observe(resp.status().as_u16(), start.elapsed());
        resp
    }

    fn healthz(&self, method: &Method) -> Response<Full<Bytes>> {
        if !is_get(method) {
            return method_not_allowed();
        }
        let causes = self.health.causes();
        if causes.is_empty() {
            return text_response(StatusCode::OK, "ok\n");
        }
        let mut body = String::from("unhealthy\n");
        for (name, cause) in causes {
            body.push_str(&format!("{name}: {cause}\n"));
        }
        text_response(StatusCode::SERVICE_UNAVAILABLE, body)
    }

    fn metrics_page(&self, method: &Method) -> Response<Full<Bytes>> {
        if !is_get(method) {
            return method_not_allowed();
        }
        let mut resp = Response::new(Full::new(Bytes::from(self.metrics.encode())));
        resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
        resp
    }
}

fn is_get(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

fn method_not_allowed() -> Response<Full<Bytes>> {
    let mut resp = text_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    resp.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    resp
}

#[cfg(test)]
mod tests;
