//! The HTTP/1.1 client side of `ct-load`: one keep-alive connection per
//! task (as `ocsp-load` keeps them), reopened when the server closes it.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout_at, Instant};

/// Where requests go: an address, its Host header and a path prefix ending in `/`.
pub struct Endpoint {
    addr: SocketAddr,
    host: HeaderValue,
    prefix: String,
}

impl Endpoint {
    /// The endpoint of `url` (http only; its path is the prefix).
    pub fn new(url: &Uri) -> anyhow::Result<Self> {
        if url.scheme_str() != Some("http") {
            bail!("{url}: only http:// URLs are supported");
        }
        let authority = url.authority().with_context(|| format!("{url}: no host"))?;
        let addr = (authority.host(), authority.port_u16().unwrap_or(80))
            .to_socket_addrs()
            .with_context(|| format!("resolving {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        let mut prefix = url.path().to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(Self { addr, host: HeaderValue::from_str(authority.as_str())?, prefix })
    }

    /// `rel` under the prefix.
    pub fn path(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }
}

/// One keep-alive connection, reopened when the server closes it or fails.
pub struct Conn {
    ep: Arc<Endpoint>,
    sender: Option<http1::SendRequest<Full<Bytes>>>,
    /// Connections opened so far.
    pub opened: u64,
}

/// A request's answer: status and body.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The whole body.
    pub body: Bytes,
}

impl Conn {
    /// A connection to `ep`, opened at the first request.
    pub fn new(ep: Arc<Endpoint>) -> Self {
        Self { ep, sender: None, opened: 0 }
    }

    /// Sends one request; an `Err` is the error's kind for the report.
    pub async fn send(&mut self, method: Method, path: &str, body: Bytes, deadline: Instant) -> Result<Answer, String> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect(deadline).await?,
        };
        if timeout_at(deadline, sender.ready()).await.map_err(|_| "timeout".to_string())?.is_err() {
            sender = self.connect(deadline).await?;
        }
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method.clone();
        *request.uri_mut() = path.parse().map_err(|e| format!("bad path: {e}"))?;
        request.headers_mut().insert(HOST, self.ep.host.clone());
        if method == Method::POST {
            request.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let outcome = timeout_at(deadline, async {
            let response = sender.send_request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, hyper::Error>((parts, body))
        })
        .await;
        let (parts, body) = match outcome {
            Err(_) => return Err("timeout".into()),
            Ok(Err(e)) => return Err(format!("transport: {e}")),
            Ok(Ok(pair)) => pair,
        };
        let close = parts
            .headers
            .get_all(CONNECTION)
            .iter()
            .any(|v| v.as_bytes().split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")));
        if !close {
            self.sender = Some(sender);
        }
        Ok(Answer { status: parts.status, body })
    }

    async fn connect(&mut self, deadline: Instant) -> Result<http1::SendRequest<Full<Bytes>>, String> {
        let stream = match timeout_at(deadline, TcpStream::connect(self.ep.addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                // Do not spin against a refusing server.
                sleep(Duration::from_millis(10)).await;
                return Err(format!("connect: {}", e.kind()));
            }
            Err(_) => return Err("connect: timeout".into()),
        };
        let _ = stream.set_nodelay(true);
        let (sender, conn) =
            http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await.map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            // Its errors surface through the sender.
            let _ = conn.await;
        });
        self.opened += 1;
        Ok(sender)
    }
}

/// GETs `rel` under `ep` on a connection of its own; anything but 200 is an error.
pub async fn fetch(ep: &Arc<Endpoint>, rel: &str) -> anyhow::Result<Bytes> {
    let mut conn = Conn::new(ep.clone());
    let path = ep.path(rel);
    let a = conn
        .send(Method::GET, &path, Bytes::new(), Instant::now() + Duration::from_secs(10))
        .await
        .map_err(|e| anyhow::anyhow!("GET {path}: {e}"))?;
    if a.status != StatusCode::OK {
        bail!("GET {path}: HTTP {}", a.status);
    }
    Ok(a.body)
}
