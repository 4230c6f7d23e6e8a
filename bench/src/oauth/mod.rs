//! OAuth 2.0 clients of tokend for the load generators and benches: client
//! authentication ([`client_auth`]: token-load, the `tokend_grid` bench), the
//! authorization code flow with PKCE as a browser does it ([`authcode`]:
//! authcode-load, `tokend_grid`), HTTP/1.1 connections over TCP or TLS with a
//! client certificate ([`connect`]), and real tokend processes beside a
//! signd ([`process`]).

pub mod authcode;
pub mod client_auth;
pub mod process;

use std::net::SocketAddr;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use openssl::ssl::SslConnector;
use tokio::net::TcpStream;

/// A request sender on one HTTP/1.1 connection.
pub type Sender = http1::SendRequest<Full<Bytes>>;

/// application/x-www-form-urlencoded encoding of one value.
pub fn form_encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// One HTTP/1.1 connection to `addr` (no Nagle delay): in the clear, or with
/// `tls` over TLS, checking the server's certificate for `server_name` and
/// presenting the connector's client certificate, if it has one. The
/// connection is driven by a task of its own.
pub async fn connect(addr: SocketAddr, tls: Option<(&SslConnector, &str)>) -> anyhow::Result<Sender> {
    let tcp = TcpStream::connect(addr).await.with_context(|| format!("connect {addr}"))?;
    tcp.set_nodelay(true)?;
    match tls {
        None => {
            let (tx, conn) = http1::handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(conn);
            Ok(tx)
        }
        Some((connector, server_name)) => {
            let ssl = connector.configure()?.into_ssl(server_name)?;
            let mut stream = tokio_openssl::SslStream::new(ssl, tcp)?;
            std::pin::Pin::new(&mut stream).connect().await.with_context(|| format!("TLS handshake with {addr}"))?;
            let (tx, conn) = http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            Ok(tx)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(form_encode("a-b.c_d*9"), "a-b.c_d*9");
        assert_eq!(form_encode("x y+z:/%"), "x+y%2Bz%3A%2F%25");
    }
}
