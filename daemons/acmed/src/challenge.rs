//! Challenge validation: http-01 (RFC 8555 §8.3), dns-01 (§8.4), tls-alpn-01
//! (RFC 8737), dns-persist-01 (draft-ietf-acme-dns-persist), IP identifiers
//! (RFC 8738), and CAA (RFC 8659/8657), against the real network through a
//! configurable DNS resolver. Every attempt is bounded by one timeout.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use der::Decode;
use hickory_resolver::config::{NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::{ResolveError, TokioResolver};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use signet_acme::caa::{self, CaaRecord};
use signet_acme::types::{ChallengeType, Identifier, IdentifierType};
use signet_acme::{validate, AcmeError, ProblemType};
use tokio::net::TcpStream;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::Certificate;

/// The largest http-01 response body read.
const HTTP01_MAX_BODY: usize = 8 * 1024;

/// What a validation needs to know about the network.
pub struct Validator {
    resolver: TokioResolver,
    http01_port: u16,
    tlsalpn01_port: u16,
    timeout: Duration,
    caa_identities: Vec<String>,
    tls: SslConnector,
}

/// One validation to perform.
pub struct Attempt<'a> {
    /// The identifier (without `*.`).
    pub identifier: &'a Identifier,
    /// Whether the order asked for a wildcard.
    pub wildcard: bool,
    /// The challenge type.
    pub kind: &'a ChallengeType,
    /// The key authorization (token.thumbprint).
    pub key_authorization: &'a str,
    /// The account URL (RFC 8657 accounturi, dns-persist-01).
    pub account_url: &'a str,
}

impl Validator {
    /// A validator asking `resolver` (or the system's resolvers).
    pub fn new(
        resolver: Option<SocketAddr>,
        http01_port: u16,
        tlsalpn01_port: u16,
        timeout: Duration,
        caa_identities: Vec<String>,
    ) -> Result<Validator, String> {
        let mut builder = match resolver {
            Some(addr) => {
                let group = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
                TokioResolver::builder_with_config(ResolverConfig::from_parts(None, vec![], group), TokioConnectionProvider::default())
            }
            None => TokioResolver::builder_tokio().map_err(|e| format!("system DNS configuration: {e}"))?,
        };
        let opts: &mut ResolverOpts = builder.options_mut();
        // Validation must see the zone as it is now: nothing cached.
        opts.positive_max_ttl = Some(Duration::ZERO);
        opts.negative_max_ttl = Some(Duration::ZERO);
        opts.timeout = timeout.min(Duration::from_secs(5));
        opts.attempts = 2;
        if resolver.is_some() {
            opts.use_hosts_file = ResolveHosts::Never;
        }
        let mut tls = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        // tls-alpn-01 certificates are self-signed by design: the check is the extension.
        tls.set_verify(SslVerifyMode::NONE);
        tls.set_alpn_protos(b"\x0aacme-tls/1").map_err(|e| e.to_string())?;
        Ok(Validator { resolver: builder.build(), http01_port, tlsalpn01_port, timeout, caa_identities, tls: tls.build() })
    }

    /// The CAA identities (for the directory meta and dns-persist-01).
    pub fn caa_identities(&self) -> &[String] {
        &self.caa_identities
    }

    /// Validates one challenge, CAA included; the error is the problem for the challenge.
    pub async fn validate(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        match tokio::time::timeout(self.timeout, self.validate_inner(a)).await {
            Ok(r) => r.map_err(|e| AcmeError { identifier: Some(Box::new(a.identifier.clone())), ..e }),
            Err(_) => Err(AcmeError {
                identifier: Some(Box::new(a.identifier.clone())),
                ..AcmeError::new(ProblemType::Connection, format!("validation did not finish within {:?}", self.timeout))
            }),
        }
    }

    async fn validate_inner(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        match a.kind {
            ChallengeType::Http01 => self.http01(a).await?,
            ChallengeType::Dns01 => self.dns01(a).await?,
            ChallengeType::TlsAlpn01 => self.tls_alpn01(a).await?,
            ChallengeType::DnsPersist01 => self.dns_persist01(a).await?,
            other => return Err(AcmeError::new(ProblemType::Malformed, format!("challenge type {other} is not offered"))),
        }
        if a.identifier.kind == IdentifierType::Dns {
            self.check_caa(&a.identifier.value, a.wildcard, a.account_url, a.kind.as_str()).await?;
        }
        Ok(())
    }

    /// RFC 8659 §3: the first non-empty CAA RRset climbing from the name to the root.
    pub async fn check_caa(&self, name: &str, wildcard: bool, account_url: &str, method: &str) -> Result<(), AcmeError> {
        if self.caa_identities.is_empty() {
            return Ok(());
        }
        let mut labels: &str = name;
        loop {
            let records = self.caa_rrset(labels).await?;
            if !records.is_empty() {
                return caa::check(&records, &self.caa_identities, wildcard, account_url, method);
            }
            match labels.split_once('.') {
                Some((_, parent)) if !parent.is_empty() => labels = parent,
                _ => return Ok(()),
            }
        }
    }

    async fn caa_rrset(&self, name: &str) -> Result<Vec<CaaRecord>, AcmeError> {
        match self.resolver.lookup(fqdn(name), RecordType::CAA).await {
            Ok(lookup) => Ok(lookup
                .iter()
                .filter_map(|r| match r {
                    RData::CAA(c) => Some(CaaRecord {
                        critical: c.issuer_critical(),
                        tag: c.tag().as_str().to_owned(),
                        value: String::from_utf8_lossy(c.raw_value()).into_owned(),
                    }),
                    _ => None,
                })
                .collect()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(dns_error(&format!("CAA lookup for {name}"), &e)),
        }
    }

    async fn addresses(&self, id: &Identifier) -> Result<Vec<IpAddr>, AcmeError> {
        if id.kind == IdentifierType::Ip {
            let ip = id.value.parse().map_err(|_| AcmeError::new(ProblemType::Malformed, "bad IP identifier"))?;
            return Ok(vec![ip]);
        }
        match self.resolver.lookup_ip(fqdn(&id.value)).await {
            Ok(ips) => {
                let v: Vec<IpAddr> = ips.iter().collect();
                if v.is_empty() {
                    Err(AcmeError::new(ProblemType::Dns, format!("no A or AAAA records for {}", id.value)))
                } else {
                    Ok(v)
                }
            }
            Err(e) => Err(dns_error(&format!("A/AAAA lookup for {}", id.value), &e)),
        }
    }

    async fn connect(&self, id: &Identifier, port: u16) -> Result<TcpStream, AcmeError> {
        let mut last = None;
        for ip in self.addresses(id).await? {
            match TcpStream::connect((ip, port)).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = Some(format!("{}: {e}", SocketAddr::new(ip, port))),
            }
        }
        Err(AcmeError::new(ProblemType::Connection, format!("cannot connect to {}: {}", id.value, last.unwrap_or_default())))
    }

    async fn http01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let token = a.key_authorization.split('.').next().unwrap_or_default();
        let stream = self.connect(a.identifier, self.http01_port).await?;
        let conn_err = |e: hyper::Error| AcmeError::new(ProblemType::Connection, format!("http-01 to {}: {e}", a.identifier.value));
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(conn_err)?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let host = match a.identifier.kind {
            IdentifierType::Ip if a.identifier.value.contains(':') => format!("[{}]", a.identifier.value),
            _ => a.identifier.value.clone(),
        };
        let host = if self.http01_port == 80 { host } else { format!("{host}:{}", self.http01_port) };
        let req = hyper::Request::get(format!("/.well-known/acme-challenge/{token}"))
            .header(hyper::header::HOST, host)
            .header(hyper::header::USER_AGENT, "signet-acmed")
            .header(hyper::header::ACCEPT, "*/*")
            .body(Empty::<Bytes>::new())
            .map_err(|e| AcmeError::new(ProblemType::ServerInternal, e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(conn_err)?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), HTTP01_MAX_BODY).collect().await;
        driver.abort();
        if !status.is_success() {
            return Err(AcmeError::new(
                ProblemType::IncorrectResponse,
                format!("http-01: {} answered HTTP {status} for the challenge URL", a.identifier.value),
            ));
        }
        let body = body.map_err(|e| AcmeError::new(ProblemType::IncorrectResponse, format!("http-01 body: {e}")))?.to_bytes();
        if validate::http01_body_matches(&body, a.key_authorization) {
            Ok(())
        } else {
            Err(AcmeError::new(
                ProblemType::IncorrectResponse,
                format!("http-01: the response from {} is not the key authorization", a.identifier.value),
            ))
        }
    }

    async fn txt(&self, name: &str) -> Result<Vec<String>, AcmeError> {
        match self.resolver.txt_lookup(fqdn(name)).await {
            Ok(l) => Ok(l
                .iter()
                .map(|t| t.txt_data().iter().map(|d| String::from_utf8_lossy(d).into_owned()).collect::<String>())
                .collect()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(dns_error(&format!("TXT lookup for {name}"), &e)),
        }
    }

    async fn dns01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let name = format!("_acme-challenge.{}", a.identifier.value);
        let want = validate::dns01_txt_value(a.key_authorization);
        let found = self.txt(&name).await?;
        if found.iter().any(|t| t.trim() == want) {
            Ok(())
        } else if found.is_empty() {
            Err(AcmeError::new(ProblemType::Dns, format!("dns-01: no TXT record at {name}")))
        } else {
            Err(AcmeError::new(ProblemType::IncorrectResponse, format!("dns-01: none of the {} TXT records at {name} is the expected value", found.len())))
        }
    }

    async fn dns_persist01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let name = format!("_validation-persist.{}", a.identifier.value);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let found = self.txt(&name).await?;
        if found.iter().any(|t| caa::persist_record_admits(t, &self.caa_identities, a.account_url, a.wildcard, now)) {
            Ok(())
        } else {
            Err(AcmeError::new(
                ProblemType::IncorrectResponse,
                format!("dns-persist-01: no TXT record at {name} names this CA and account{}", if a.wildcard { " with policy=wildcard" } else { "" }),
            ))
        }
    }

    async fn tls_alpn01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let tls_err = |why: String| AcmeError::new(ProblemType::Tls, format!("tls-alpn-01 to {}: {why}", a.identifier.value));
        let stream = self.connect(a.identifier, self.tlsalpn01_port).await?;
        let sni = match a.identifier.kind {
            IdentifierType::Ip => reverse_name(&a.identifier.value).ok_or_else(|| tls_err("bad IP".into()))?,
            _ => a.identifier.value.clone(),
        };
        let mut cfg = self.tls.configure().map_err(|e| tls_err(e.to_string()))?;
        cfg.set_verify_hostname(false);
        cfg.set_use_server_name_indication(true);
        let ssl = cfg.into_ssl(&sni).map_err(|e| tls_err(e.to_string()))?;
        let mut tls = tokio_openssl::SslStream::new(ssl, stream).map_err(|e| tls_err(e.to_string()))?;
        Pin::new(&mut tls).connect().await.map_err(|e| tls_err(format!("handshake: {e}")))?;
        if tls.ssl().selected_alpn_protocol() != Some(validate::ACME_TLS_ALPN_PROTOCOL) {
            return Err(tls_err("the server did not negotiate the acme-tls/1 protocol".into()));
        }
        let cert = tls.ssl().peer_certificate().ok_or_else(|| tls_err("no certificate".into()))?;
        let der = cert.to_der().map_err(|e| tls_err(e.to_string()))?;
        check_alpn_certificate(&der, a.identifier, a.key_authorization).map_err(tls_err_unauthorized(a))
    }
}

fn tls_err_unauthorized<'a>(a: &'a Attempt<'_>) -> impl Fn(String) -> AcmeError + 'a {
    move |why| AcmeError::new(ProblemType::IncorrectResponse, format!("tls-alpn-01 to {}: {why}", a.identifier.value))
}

/// RFC 8737 §3: exactly one SAN, the identifier; a critical acmeIdentifier
/// extension holding SHA-256 of the key authorization.
pub fn check_alpn_certificate(der: &[u8], id: &Identifier, key_authorization: &str) -> Result<(), String> {
    let cert = Certificate::from_der(der).map_err(|e| format!("unparsable certificate: {e}"))?;
    let exts = cert.tbs_certificate.extensions.unwrap_or_default();
    let san = exts.iter().find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME).ok_or("no subjectAltName")?;
    let san = SubjectAltName::from_der(san.extn_value.as_bytes()).map_err(|e| format!("bad subjectAltName: {e}"))?;
    let matches = match (&san.0[..], &id.kind) {
        ([GeneralName::DnsName(n)], IdentifierType::Dns) => n.as_str().eq_ignore_ascii_case(&id.value),
        ([GeneralName::IpAddress(o)], IdentifierType::Ip) => {
            let want: IpAddr = id.value.parse().map_err(|_| "bad IP identifier")?;
            match (o.as_bytes().len(), want) {
                (4, IpAddr::V4(v4)) => o.as_bytes() == v4.octets(),
                (16, IpAddr::V6(v6)) => o.as_bytes() == v6.octets(),
                _ => false,
            }
        }
        _ => false,
    };
    if !matches {
        return Err("the certificate's subjectAltName is not exactly the identifier".into());
    }
    let ext = exts.iter().find(|e| e.extn_id == validate::ID_PE_ACME_IDENTIFIER).ok_or("no acmeIdentifier extension")?;
    if !ext.critical {
        return Err("the acmeIdentifier extension is not critical".into());
    }
    if ext.extn_value.as_bytes() != validate::tls_alpn01_extension_value(key_authorization) {
        return Err("the acmeIdentifier extension does not match the key authorization".into());
    }
    Ok(())
}

/// The reverse-DNS name RFC 8738 §6 uses as SNI for an IP address.
fn reverse_name(ip: &str) -> Option<String> {
    match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            Some(format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0]))
        }
        IpAddr::V6(v6) => {
            let mut s = String::new();
            for b in v6.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s.push_str("ip6.arpa");
            Some(s)
        }
    }
}

fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_owned()
    } else {
        format!("{name}.")
    }
}

fn dns_error(what: &str, e: &ResolveError) -> AcmeError {
    AcmeError::new(ProblemType::Dns, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_names() {
        assert_eq!(reverse_name("127.0.0.1").unwrap(), "1.0.0.127.in-addr.arpa");
        assert!(reverse_name("::1").unwrap().starts_with("1.0.0.0."));
        assert!(reverse_name("::1").unwrap().ends_with(".ip6.arpa"));
        assert_eq!(reverse_name("nope"), None);
    }
}
