//! One HTTP/1.1 keep-alive connection to the ACME server, over TLS (OpenSSL)
//! or plain TCP, reopened when the server closes it.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{HeaderMap, Method, Request, Uri};
use hyper_util::rt::TokioIo;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use super::error::Error;

/// The largest response body read (a certificate chain of ML-DSA-87
/// certificates is about 20 KiB; anything near this is a broken server).
const MAX_BODY: usize = 1 << 20;

/// The `User-Agent` sent (RFC 8555 §6.1 asks clients to send one).
const AGENT: &str = concat!("signet-acme-bench/", env!("CARGO_PKG_VERSION"));

/// Where the server is: scheme, host and port of the directory URL. Every
/// URL the server hands out must be on this origin (one connection per
/// client task).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    tls: bool,
    host: String,
    port: u16,
    authority: HeaderValue,
}

impl Origin {
    /// The origin of an `https://` (or, for tests, `http://`) URL.
    pub fn of(url: &str) -> Result<Origin, Error> {
        let uri: Uri = url.parse().map_err(|e| Error::Protocol(format!("{url}: not a URL: {e}")))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(Error::Protocol(format!("{url}: not an http(s) URL"))),
        };
        let authority = uri.authority().ok_or_else(|| Error::Protocol(format!("{url}: no host")))?;
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let authority =
            HeaderValue::from_str(authority.as_str()).map_err(|e| Error::Protocol(format!("{url}: {e}")))?;
        Ok(Origin { tls, host, port, authority })
    }

    /// The path and query of `url`, if `url` is on this origin.
    fn path_of(&self, url: &str) -> Result<String, Error> {
        let other = Origin::of(url)?;
        if other.tls != self.tls || other.host != self.host || other.port != self.port {
            return Err(Error::Protocol(format!("{url} is not on the directory's origin {}", self.authority_str())));
        }
        let uri: Uri = url.parse().map_err(|e| Error::Protocol(format!("{url}: {e}")))?;
        Ok(uri.path_and_query().map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()))
    }

    fn authority_str(&self) -> &str {
        self.authority.to_str().unwrap_or("?")
    }
}

/// The TLS client configuration every connection shares: trust `ca_bundle`
/// (a PEM file) if given, else the system's roots; offer ALPN http/1.1.
pub fn tls_connector(ca_bundle: Option<&Path>) -> Result<Arc<SslConnector>, openssl::error::ErrorStack> {
    let mut builder = SslConnector::builder(SslMethod::tls_client())?;
    match ca_bundle {
        Some(path) => builder.set_ca_file(path)?,
        None => builder.set_default_verify_paths()?,
    }
    builder.set_verify(SslVerifyMode::PEER);
    builder.set_alpn_protos(b"\x08http/1.1")?;
    Ok(Arc::new(builder.build()))
}

/// A response: status, headers and the whole body.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Response {
    /// A header's value as text, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// An HTTP/1.1 connection to one origin; reconnects when the server closed it.
pub struct Connection {
    origin: Origin,
    tls: Option<Arc<SslConnector>>,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Connections opened so far (the first one included).
    pub opened: u64,
}

/// What a connection runs over: TLS or plain TCP.
trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

impl Connection {
    /// A connection to `origin`, opened on first use; `tls` is required for an
    /// https origin. Each request (connecting included) may take `timeout`.
    pub fn new(origin: Origin, tls: Option<Arc<SslConnector>>, timeout: Duration) -> Connection {
        Connection { origin, tls, timeout, sender: None, opened: 0 }
    }

    /// Sends a request for `url` (which must be on this origin) and reads the
    /// whole response. A request on a reused connection that fails before
    /// any response is retried once on a new connection: the server may have
    /// closed an idle connection just as it was used.
    pub async fn send(
        &mut self,
        method: Method,
        url: &str,
        content_type: Option<&'static str>,
        accept: Option<&'static str>,
        body: Bytes,
    ) -> Result<Response, Error> {
        let path = self.origin.path_of(url)?;
        let mut retried = false;
        loop {
            let reused = self.sender.as_ref().is_some_and(|s| !s.is_closed());
            let request = self.request(&method, &path, content_type, accept, body.clone())?;
            let outcome = tokio::time::timeout(self.timeout, self.exchange(request)).await;
            match outcome {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(e)) => {
                    self.sender = None;
                    if reused && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(Error::Transport(format!("{url}: {e}")));
                }
                Err(_) => {
                    self.sender = None;
                    return Err(Error::Timeout(format!("{method} {url} took more than {:?}", self.timeout)));
                }
            }
        }
    }

    fn request(
        &self,
        method: &Method,
        path: &str,
        content_type: Option<&'static str>,
        accept: Option<&'static str>,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, Error> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method.clone();
        *request.uri_mut() = path.parse().map_err(|e| Error::Protocol(format!("{path}: {e}")))?;
        let headers = request.headers_mut();
        headers.insert(HOST, self.origin.authority.clone());
        headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        if let Some(content_type) = content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        if let Some(accept) = accept {
            headers.insert(ACCEPT, HeaderValue::from_static(accept));
        }
        Ok(request)
    }

    /// One request on the open connection (opening one first if needed).
    async fn exchange(&mut self, request: Request<Full<Bytes>>) -> Result<Response, String> {
        let sender = self.ready().await?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body =
            Limited::new(body, MAX_BODY).collect().await.map_err(|e| format!("reading the body: {e}"))?.to_bytes();
        Ok(Response { status: parts.status.as_u16(), headers: parts.headers, body })
    }

    /// The open connection's sender, ready for a request; a new connection
    /// if there is none or the server closed it.
    async fn ready(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        if let Some(sender) = self.sender.as_mut() {
            if sender.ready().await.is_err() {
                self.sender = None;
            }
        }
        let sender = match self.sender.take() {
            Some(sender) => sender,
            None => self.open().await?,
        };
        Ok(self.sender.insert(sender))
    }

    async fn open(&mut self) -> Result<SendRequest<Full<Bytes>>, String> {
        let origin = &self.origin;
        let tcp = TcpStream::connect((origin.host.as_str(), origin.port))
            .await
            .map_err(|e| format!("connecting to {}: {e}", origin.authority_str()))?;
        // Requests are one small write each; do not let Nagle hold them.
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = if origin.tls {
            let connector = self.tls.as_ref().ok_or("an https URL but no TLS configuration")?;
            // Verifies the certificate against the host name (or IP address).
            let ssl =
                connector.configure().and_then(|c| c.into_ssl(&origin.host)).map_err(|e| format!("TLS setup: {e}"))?;
            let mut stream = SslStream::new(ssl, tcp).map_err(|e| format!("TLS setup: {e}"))?;
            Pin::new(&mut stream)
                .connect()
                .await
                .map_err(|e| format!("TLS handshake with {}: {e}", origin.authority_str()))?;
            Box::new(stream)
        } else {
            Box::new(tcp)
        };
        let (sender, conn) =
            http1::handshake::<_, Full<Bytes>>(TokioIo::new(io)).await.map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            // Its errors surface through the sender.
            let _ = conn.await;
        });
        self.opened += 1;
        Ok(sender)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn origins_and_paths() {
        let o = Origin::of("https://127.0.0.1:14000/dir").unwrap();
        assert_eq!((o.tls, o.host.as_str(), o.port), (true, "127.0.0.1", 14000));
        assert_eq!(o.path_of("https://127.0.0.1:14000/acme/order/1?x=2").unwrap(), "/acme/order/1?x=2");
        assert_eq!(o.path_of("https://127.0.0.1:14000").unwrap(), "/");
        assert!(o.path_of("https://127.0.0.1:14001/acme").is_err());
        assert!(o.path_of("http://127.0.0.1:14000/acme").is_err());
        let o = Origin::of("https://[::1]/dir").unwrap();
        assert_eq!((o.host.as_str(), o.port), ("::1", 443));
        assert_eq!(Origin::of("http://acme.test/").unwrap().port, 80);
        assert!(Origin::of("ftp://acme.test/").is_err());
        assert!(Origin::of("/relative").is_err());
    }
}
