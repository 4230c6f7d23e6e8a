//! The outbound HTTP(S) connection every daemon's hyper-util client uses: TCP from
//! hyper-util's `HttpConnector`, then TLS (OpenSSL) for `https:` URIs, with what the TLS
//! session learned handed to the pool (HTTP/2 when ALPN chose it) and to each response
//! (the server chain's earliest `notAfter`, as [`PeerCertExpiry`]).
//!
//! ```no_run
//! # fn f(tls: openssl::ssl::SslConnector) {
//! use hyper_util::client::legacy::{connect::HttpConnector, Client};
//! let mut http = HttpConnector::new();
//! http.enforce_http(false);
//! let connector = signet_runtime::client::TlsConnector::new(http, Some(std::sync::Arc::new(tls)));
//! let client: Client<_, http_body_util::Full<bytes::Bytes>> =
//!     Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
//! # }
//! ```

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use openssl::asn1::{Asn1Time, Asn1TimeRef};
use openssl::ssl::SslConnector;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// hyper-util's connector: TCP, then TLS for `https:` URIs when it has a TLS configuration
/// (an `https:` URI without one is an error). The `HttpConnector` must allow non-`http:`
/// schemes (`enforce_http(false)`).
#[derive(Clone)]
pub struct TlsConnector {
    http: HttpConnector,
    tls: Option<Arc<SslConnector>>,
}

impl TlsConnector {
    /// Connects over `http`, with `tls` for `https:` URIs.
    pub fn new(http: HttpConnector, tls: Option<Arc<SslConnector>>) -> Self {
        Self { http, tls }
    }
}

impl tower_service::Service<Uri> for TlsConnector {
    type Response = TokioIo<ClientStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let mut http = self.http.clone();
        let tls = self.tls.clone();
        Box::pin(async move {
            let https = uri.scheme_str() == Some("https");
            let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
            let tcp = http.call(uri).await?.into_inner();
            if !https {
                return Ok(TokioIo::new(ClientStream::Plain(tcp)));
            }
            let tls = tls.ok_or("an https: URI on a connector without TLS")?;
            let ssl = tls.configure()?.into_ssl(&host)?;
            let mut stream = Box::pin(SslStream::new(ssl, tcp)?);
            stream.as_mut().connect().await.map_err(|e| {
                let verify = stream.ssl().verify_result();
                if verify == openssl::x509::X509VerifyResult::OK {
                    BoxError::from(format!("TLS handshake: {e}"))
                } else {
                    BoxError::from(format!("TLS: certificate verify failed: {verify}"))
                }
            })?;
            Ok(TokioIo::new(ClientStream::Tls(stream)))
        })
    }
}

/// A connection to a server, plain or TLS.
pub enum ClientStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Pin<Box<SslStream<TcpStream>>>),
}

/// The earliest `notAfter` (Unix seconds) of the chain a TLS server sent, in each
/// response's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCertExpiry(pub i64);

/// An ASN.1 time as Unix seconds.
pub fn unix_time(t: &Asn1TimeRef) -> Option<i64> {
    let epoch = Asn1Time::from_unix(0).ok()?;
    let d = epoch.diff(t).ok()?;
    Some(i64::from(d.days) * 86_400 + i64::from(d.secs))
}

impl Connection for ClientStream {
    fn connected(&self) -> Connected {
        match self {
            ClientStream::Plain(_) => Connected::new(),
            ClientStream::Tls(s) => {
                let ssl = s.ssl();
                let mut c = Connected::new();
                let earliest =
                    ssl.peer_cert_chain().and_then(|chain| chain.iter().filter_map(|c| unix_time(c.not_after())).min());
                if let Some(t) = earliest {
                    c = c.extra(PeerCertExpiry(t));
                }
                if ssl.selected_alpn_protocol() == Some(b"h2") {
                    c = c.negotiated_h2();
                }
                c
            }
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => s.as_mut().poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => s.as_mut().poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => s.as_mut().poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => s.as_mut().poll_shutdown(cx),
        }
    }
}
