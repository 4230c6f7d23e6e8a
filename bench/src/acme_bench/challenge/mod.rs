//! The challenge responders: what the ACME server's validator reaches to
//! see that this client controls an identifier. One responder serves every
//! client task.

pub mod dns01;
pub mod http01;
pub mod tls_alpn01;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use signet_acme::types::{ChallengeType, Identifier};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::error::Error;

/// Which challenge the clients answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChallengeKind {
    /// http-01 (RFC 8555 §8.3).
    Http01,
    /// tls-alpn-01 (RFC 8737).
    TlsAlpn01,
    /// dns-01 (RFC 8555 §8.4).
    Dns01,
    /// dns-persist-01 (draft-ietf-acme-dns-persist): a TXT record at
    /// `_validation-persist.<name>` naming the CA and the account.
    DnsPersist01,
}

impl ChallengeKind {
    /// The challenge type's name, as on the command line and in an authorization.
    pub fn name(self) -> &'static str {
        match self {
            ChallengeKind::Http01 => "http-01",
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
            ChallengeKind::Dns01 => "dns-01",
            ChallengeKind::DnsPersist01 => "dns-persist-01",
        }
    }

    /// The challenge type in an authorization.
    pub fn challenge_type(self) -> ChallengeType {
        ChallengeType::from(self.name())
    }
}

/// Where the responders listen or write.
#[derive(Clone, Debug)]
pub struct ResponderConfig {
    /// The http-01 server's address.
    pub http01_listen: SocketAddr,
    /// The tls-alpn-01 server's address.
    pub tlsalpn01_listen: SocketAddr,
    /// The zone file dns-01 records go to.
    pub dns_zone: Option<PathBuf>,
}

/// The running responder for one challenge kind.
pub struct Responder {
    inner: Inner,
    server: Option<JoinHandle<()>>,
}

enum Inner {
    Http01(Arc<http01::Tokens>),
    TlsAlpn01(Arc<tls_alpn01::Certs>),
    Dns01(Arc<dns01::Zone>),
}

/// A published challenge response; [`Responder::retract`] takes it down.
pub struct Published(PublishedInner);

enum PublishedInner {
    Http01(String),
    TlsAlpn01(tls_alpn01::Turn),
    Dns01(dns01::RecordId),
}

impl Responder {
    /// Starts the responder for `kind`: binds its server (http-01,
    /// tls-alpn-01) or opens its zone file (dns-01). Must run inside a
    /// tokio runtime.
    pub async fn start(kind: ChallengeKind, config: &ResponderConfig) -> Result<Responder, Error> {
        let setup = |what: &str, e: &dyn std::fmt::Display| Error::ChallengeSetup(format!("{what}: {e}"));
        match kind {
            ChallengeKind::Http01 => {
                let addr = config.http01_listen;
                let listener = TcpListener::bind(addr).await.map_err(|e| setup(&format!("binding {addr}"), &e))?;
                let tokens = Arc::new(http01::Tokens::default());
                let server = tokio::spawn(http01::serve(listener, Arc::clone(&tokens)));
                Ok(Responder { inner: Inner::Http01(tokens), server: Some(server) })
            }
            ChallengeKind::TlsAlpn01 => {
                let addr = config.tlsalpn01_listen;
                let listener = TcpListener::bind(addr).await.map_err(|e| setup(&format!("binding {addr}"), &e))?;
                let certs = Arc::new(tls_alpn01::Certs::new().map_err(|e| setup("key", &e))?);
                let acceptor = Arc::new(tls_alpn01::acceptor(&certs).map_err(|e| setup("TLS", &e))?);
                let server = tokio::spawn(tls_alpn01::serve(listener, acceptor));
                Ok(Responder { inner: Inner::TlsAlpn01(certs), server: Some(server) })
            }
            ChallengeKind::Dns01 | ChallengeKind::DnsPersist01 => {
                let path = config
                    .dns_zone
                    .as_ref()
                    .ok_or_else(|| Error::ChallengeSetup(format!("{} needs --dns-zone", kind.name())))?;
                let zone = dns01::Zone::open(path).map_err(|e| setup(&path.display().to_string(), &e))?;
                Ok(Responder { inner: Inner::Dns01(Arc::new(zone)), server: None })
            }
        }
    }

    /// Publishes the response to a challenge for `identifier` with `token`.
    pub async fn publish(
        &self,
        identifier: &Identifier,
        token: &str,
        key_authorization: &str,
    ) -> Result<Published, Error> {
        match &self.inner {
            Inner::Http01(tokens) => {
                tokens.insert(token, key_authorization);
                Ok(Published(PublishedInner::Http01(token.to_owned())))
            }
            Inner::TlsAlpn01(certs) => {
                let turn = certs.publish(identifier, key_authorization).await.map_err(Error::ChallengeSetup)?;
                Ok(Published(PublishedInner::TlsAlpn01(turn)))
            }
            Inner::Dns01(zone) => {
                let name = format!("_acme-challenge.{}", identifier.value);
                add_txt(zone, name, signet_acme::validate::dns01_txt_value(key_authorization)).await
            }
        }
    }

    /// Publishes a dns-persist-01 record for `identifier`: the CA's
    /// `issuer_domain` and this client's `account_url`.
    pub async fn publish_persist(
        &self,
        identifier: &Identifier,
        issuer_domain: &str,
        account_url: &str,
    ) -> Result<Published, Error> {
        let Inner::Dns01(zone) = &self.inner else {
            return Err(Error::ChallengeSetup("dns-persist-01 records go to the DNS zone (--dns-zone)".into()));
        };
        let name = format!("_validation-persist.{}", identifier.value);
        add_txt(zone, name, format!("{issuer_domain}; accounturi={account_url}")).await
    }

    /// Takes a published response down.
    pub async fn retract(&self, published: Published) -> Result<(), Error> {
        match (&self.inner, published.0) {
            (Inner::Http01(tokens), PublishedInner::Http01(token)) => tokens.remove(&token),
            (Inner::TlsAlpn01(certs), PublishedInner::TlsAlpn01(turn)) => certs.retract(turn),
            (Inner::Dns01(zone), PublishedInner::Dns01(id)) => {
                let zone = Arc::clone(zone);
                tokio::task::spawn_blocking(move || zone.remove(id))
                    .await
                    .map_err(|e| Error::ChallengeSetup(e.to_string()))?
                    .map_err(|e| Error::ChallengeSetup(format!("writing the zone: {e}")))?;
            }
            // A Published comes only from this responder's publish.
            _ => {}
        }
        Ok(())
    }

    /// Stops the server and puts the zone file back as it was.
    pub fn stop(&self) -> Result<(), Error> {
        if let Some(server) = &self.server {
            server.abort();
        }
        if let Inner::Dns01(zone) = &self.inner {
            zone.restore().map_err(|e| Error::ChallengeSetup(format!("restoring the zone: {e}")))?;
        }
        Ok(())
    }
}

/// Adds a TXT record to the zone file (a blocking write, off the runtime).
async fn add_txt(zone: &Arc<dns01::Zone>, name: String, value: String) -> Result<Published, Error> {
    let zone = Arc::clone(zone);
    let id = tokio::task::spawn_blocking(move || zone.add_txt(&name, &value))
        .await
        .map_err(|e| Error::ChallengeSetup(e.to_string()))?
        .map_err(|e| Error::ChallengeSetup(format!("writing the zone: {e}")))?;
    Ok(Published(PublishedInner::Dns01(id)))
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}
