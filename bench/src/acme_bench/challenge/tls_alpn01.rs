//! The tls-alpn-01 responder (RFC 8737, RFC 8738 §6 for IP addresses): a
//! TLS server that negotiates only `acme-tls/1` and, for the SNI name the
//! validator sends, presents a self-signed certificate carrying the
//! identifier and the critical acmeIdentifier extension.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use openssl::asn1::{Asn1Integer, Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{select_next_proto, AlpnError, NameType, SniError, Ssl, SslAcceptor, SslAlert, SslMethod};
use openssl::x509::extension::SubjectAlternativeName;
use openssl::x509::{X509Builder, X509Extension, X509NameBuilder, X509};
use signet_acme::types::{Identifier, IdentifierType};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::OwnedMutexGuard;
use tokio_openssl::SslStream;

use crate::acme_bench::keys::KeyType;

/// The acmeIdentifier extension (RFC 8737 §6.1): id-pe-acmeIdentifier.
const ACME_IDENTIFIER_OID: &str = "1.3.6.1.5.5.7.1.31";

/// The ALPN protocol list the server accepts: `acme-tls/1` alone.
const ACME_TLS_1: &[u8] = b"\x0aacme-tls/1";

/// The certificates published for validation, by SNI name, and the key
/// every one of them is made for.
pub struct Certs {
    key: PKey<Private>,
    by_name: RwLock<HashMap<String, Arc<X509>>>,
    /// One lock a name: two challenges for one name (IP identifiers from
    /// several tasks) cannot both be presented, so they take turns.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A published certificate's hold on its name; [`Certs::retract`] ends it.
pub struct Turn {
    name: String,
    _guard: OwnedMutexGuard<()>,
}

impl Certs {
    /// A responder with a new P-256 key for its certificates.
    pub fn new() -> Result<Certs, ErrorStack> {
        Ok(Certs { key: KeyType::EcP256.generate()?, by_name: RwLock::default(), turns: Mutex::default() })
    }

    /// Presents a challenge certificate for `identifier` with
    /// `key_authorization` until [`Certs::retract`]; waits while another task
    /// holds the same name.
    pub async fn publish(&self, identifier: &Identifier, key_authorization: &str) -> Result<Turn, String> {
        let name = sni_name(identifier)?;
        let turn = {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(turns.entry(name.clone()).or_default())
        };
        let guard = turn.lock_owned().await;
        let cert = challenge_cert(&self.key, identifier, key_authorization).map_err(|e| e.to_string())?;
        self.by_name.write().unwrap_or_else(PoisonError::into_inner).insert(name.clone(), Arc::new(cert));
        Ok(Turn { name, _guard: guard })
    }

    /// Stops presenting the certificate and lets the next task for the name go.
    pub fn retract(&self, turn: Turn) {
        self.by_name.write().unwrap_or_else(PoisonError::into_inner).remove(&turn.name);
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the name's lock when nobody else waits on it (ours is the
        // map's reference plus the guard's).
        if turns.get(&turn.name).is_some_and(|t| Arc::strong_count(t) <= 2) {
            turns.remove(&turn.name);
        }
    }

    fn lookup(&self, name: &str) -> Option<Arc<X509>> {
        self.by_name.read().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }
}

/// The TLS server configuration: ALPN `acme-tls/1` only, and the
/// certificate chosen by SNI from `certs` (no SNI, or an unknown name, ends
/// the handshake with `unrecognized_name`).
pub fn acceptor(certs: &Arc<Certs>) -> Result<SslAcceptor, ErrorStack> {
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
    builder.set_alpn_select_callback(|_, client| select_next_proto(ACME_TLS_1, client).ok_or(AlpnError::ALERT_FATAL));
    let certs_for_sni = Arc::clone(certs);
    builder.set_servername_callback(move |ssl, alert| {
        let cert =
            ssl.servername(NameType::HOST_NAME).map(str::to_ascii_lowercase).and_then(|n| certs_for_sni.lookup(&n));
        let Some(cert) = cert else {
            *alert = SslAlert::UNRECOGNIZED_NAME;
            return Err(SniError::ALERT_FATAL);
        };
        ssl.set_certificate(&cert)
            .and_then(|()| ssl.set_private_key(&certs_for_sni.key))
            .map_err(|_| SniError::ALERT_FATAL)
    });
    Ok(builder.build())
}

/// Accepts validators' connections on `listener` until the task is dropped:
/// each gets a handshake and is closed.
pub async fn serve(listener: TcpListener, acceptor: Arc<SslAcceptor>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let acceptor = Arc::clone(&acceptor);
        tokio::spawn(async move {
            let Ok(mut stream) = Ssl::new(acceptor.context()).and_then(|ssl| SslStream::new(ssl, tcp)) else {
                return;
            };
            // A failed handshake is the validator's finding, not ours.
            if Pin::new(&mut stream).accept().await.is_ok() {
                let _ = stream.shutdown().await;
            }
        });
    }
}

/// The SNI name a validator sends for `identifier`: the DNS name, or for an
/// IP address its reverse-mapping name (RFC 8738 §6).
pub fn sni_name(identifier: &Identifier) -> Result<String, String> {
    match identifier.kind {
        IdentifierType::Dns => Ok(identifier.value.to_ascii_lowercase()),
        IdentifierType::Ip => match identifier.value.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => {
                let [a, b, c, d] = ip.octets();
                Ok(format!("{d}.{c}.{b}.{a}.in-addr.arpa"))
            }
            Ok(IpAddr::V6(ip)) => {
                let mut name = String::with_capacity(73);
                for byte in ip.octets().iter().rev() {
                    name.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
                }
                name.push_str("ip6.arpa");
                Ok(name)
            }
            Err(_) => Err(format!("{:?} is not an IP address", identifier.value)),
        },
        _ => Err(format!("tls-alpn-01 cannot validate a {} identifier", identifier.kind)),
    }
}

/// The self-signed challenge certificate (RFC 8737 §3): the identifier as
/// its only subjectAltName, and the critical acmeIdentifier extension whose
/// value is the OCTET STRING of SHA-256(key authorization).
pub fn challenge_cert(
    key: &PKey<Private>,
    identifier: &Identifier,
    key_authorization: &str,
) -> Result<X509, ErrorStack> {
    let mut builder = X509Builder::new()?;
    builder.set_version(2)?;
    let mut serial = BigNum::new()?;
    serial.rand(64, openssl::bn::MsbOption::MAYBE_ZERO, false)?;
    builder.set_serial_number(Asn1Integer::from_bn(&serial)?.as_ref())?;
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_text("CN", "acme-bench tls-alpn-01")?;
    let name = name.build();
    builder.set_subject_name(&name)?;
    builder.set_issuer_name(&name)?;
    builder.set_pubkey(key)?;
    builder.set_not_before(Asn1Time::days_from_now(0)?.as_ref())?;
    builder.set_not_after(Asn1Time::days_from_now(7)?.as_ref())?;
    let mut san = SubjectAlternativeName::new();
    match identifier.kind {
        IdentifierType::Ip => san.ip(&identifier.value),
        _ => san.dns(&identifier.value),
    };
    let san = san.build(&builder.x509v3_context(None, None))?;
    builder.append_extension(san)?;
    let value = signet_acme::validate::tls_alpn01_extension_value(key_authorization);
    let oid = Asn1Object::from_str(ACME_IDENTIFIER_OID)?;
    let value = Asn1OctetString::new_from_bytes(&value)?;
    builder.append_extension(X509Extension::new_from_der(&oid, true, &value)?)?;
    builder.sign(key, MessageDigest::sha256())?;
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use der::Decode;
    use openssl::ssl::{SslConnector, SslVerifyMode};

    use super::*;

    /// The certificate as a validator reads it: x509-cert finds the SAN and
    /// a critical acmeIdentifier whose extnValue is exactly what signet-acme
    /// (the server's side) compares.
    #[test]
    fn challenge_cert_carries_the_identifier_and_the_digest() {
        let certs = Certs::new().unwrap();
        for identifier in [Identifier::dns("c0-1.bench.test"), Identifier::ip("127.0.0.1")] {
            let cert = challenge_cert(&certs.key, &identifier, "tok.thumb").unwrap();
            let parsed = x509_cert::Certificate::from_der(&cert.to_der().unwrap()).unwrap();
            let extensions = parsed.tbs_certificate.extensions.unwrap();
            let acme =
                extensions.iter().find(|e| e.extn_id.to_string() == ACME_IDENTIFIER_OID).expect("acmeIdentifier");
            assert!(acme.critical);
            assert_eq!(acme.extn_value.as_bytes(), signet_acme::validate::tls_alpn01_extension_value("tok.thumb"));
            let sans = cert.subject_alt_names().unwrap();
            assert_eq!(sans.len(), 1);
            match identifier.kind {
                IdentifierType::Ip => assert_eq!(sans.get(0).unwrap().ipaddress(), Some(&[127, 0, 0, 1][..])),
                _ => assert_eq!(sans.get(0).unwrap().dnsname(), Some("c0-1.bench.test")),
            }
        }
    }

    #[test]
    fn sni_names() {
        assert_eq!(sni_name(&Identifier::dns("C0-1.Bench.Test")).unwrap(), "c0-1.bench.test");
        assert_eq!(sni_name(&Identifier::ip("127.0.0.1")).unwrap(), "1.0.0.127.in-addr.arpa");
        assert_eq!(
            sni_name(&Identifier::ip("2001:db8::567:89ab")).unwrap(),
            "b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa"
        );
        assert!(sni_name(&Identifier::ip("nope")).is_err());
    }

    /// A real handshake: the server presents the published certificate for
    /// its SNI name with ALPN acme-tls/1, and refuses unknown names and
    /// clients that do not offer acme-tls/1.
    #[tokio::test]
    async fn handshake_presents_the_published_certificate() {
        let certs = Arc::new(Certs::new().unwrap());
        let acceptor = Arc::new(acceptor(&certs).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, acceptor));
        let turn = certs.publish(&Identifier::dns("c0-1.bench.test"), "tok.thumb").await.unwrap();

        let handshake = |sni: &'static str, alpn: &'static [u8]| async move {
            let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
            b.set_verify(SslVerifyMode::NONE);
            b.set_alpn_protos(alpn).unwrap();
            let ssl = b.build().configure().unwrap().verify_hostname(false).into_ssl(sni).unwrap();
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut s = SslStream::new(ssl, tcp).unwrap();
            Pin::new(&mut s).connect().await.map(|()| {
                let cert = s.ssl().peer_certificate().unwrap();
                (cert.to_der().unwrap(), s.ssl().selected_alpn_protocol().map(<[u8]>::to_vec))
            })
        };
        let (der, alpn) = handshake("c0-1.bench.test", ACME_TLS_1).await.unwrap();
        assert_eq!(alpn.as_deref(), Some(&b"acme-tls/1"[..]));
        let cert = X509::from_der(&der).unwrap();
        assert_eq!(cert.subject_alt_names().unwrap().get(0).unwrap().dnsname(), Some("c0-1.bench.test"));
        assert!(handshake("c9-9.bench.test", ACME_TLS_1).await.is_err(), "unknown SNI name");
        assert!(handshake("c0-1.bench.test", b"\x08http/1.1").await.is_err(), "no acme-tls/1");

        certs.retract(turn);
        assert!(handshake("c0-1.bench.test", ACME_TLS_1).await.is_err(), "retracted");
        assert!(certs.turns.lock().unwrap().is_empty());
        server.abort();
    }

    /// Two publications for one name take turns.
    #[tokio::test]
    async fn one_name_one_certificate_at_a_time() {
        let certs = Arc::new(Certs::new().unwrap());
        let ip = Identifier::ip("127.0.0.1");
        let first = certs.publish(&ip, "a.x").await.unwrap();
        let waiting = {
            let certs = Arc::clone(&certs);
            let ip = ip.clone();
            tokio::spawn(async move { certs.publish(&ip, "b.x").await.unwrap() })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        certs.retract(first);
        let second = waiting.await.unwrap();
        certs.retract(second);
        assert!(certs.lookup("1.0.0.127.in-addr.arpa").is_none());
    }
}
