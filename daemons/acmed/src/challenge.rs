//! Challenge validation: http-01 (RFC 8555 §8.3), dns-01 (§8.4), tls-alpn-01
//! (RFC 8737), dns-persist-01 (draft-ietf-acme-dns-persist), IP identifiers
//! (RFC 8738), and CAA (RFC 8659/8657), against the real network through a
//! configurable DNS resolver. Every attempt is bounded by one timeout.
//!
//! http-01 follows redirects as Let's Encrypt does: up to
//! [`HTTP01_MAX_REDIRECTS`] (301, 302, 303, 307, 308), each to an `http:` URL
//! on `http01_port` or an `https:` URL on `http01_https_port`, never to a URL
//! fetched before (a loop). Targets are host names, resolved like the
//! identifier; an IP address literal is followed only when it is the IP
//! identifier being validated. `https:` targets are fetched over TLS with
//! any certificate (the key authorization proves control, not the
//! certificate), with SNI for host names. Each hop is a new connection.

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
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use signet_acme::caa::{self, CaaRecord};
use signet_acme::types::{ChallengeType, Identifier, IdentifierType};
use signet_acme::{validate, AcmeError, ProblemType};
use signet_types::Clock;
use tokio::net::TcpStream;
use url::{Host, Url};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::Certificate;

/// The largest http-01 response body read.
const HTTP01_MAX_BODY: usize = 8 * 1024;
/// How many redirects http-01 follows (as Let's Encrypt).
pub const HTTP01_MAX_REDIRECTS: usize = 10;
/// How many CAA answers (one per name) are kept, least recently used first
/// out: the parents every issuance shares (`com`, `example.com`) stay.
const CAA_CACHE_ENTRIES: usize = 8192;

/// What a validation needs to know about the network.
pub struct Validator {
    /// Challenge lookups (A, AAAA, TXT): never cached.
    resolver: TokioResolver,
    /// CAA lookups: cached within their TTL, up to the configured maximum.
    caa_resolver: TokioResolver,
    http01_port: u16,
    http01_https_port: u16,
    tlsalpn01_port: u16,
    timeout: Duration,
    caa_identities: Vec<String>,
    tls: SslConnector,
    /// For `https:` redirect targets of http-01: any certificate, HTTP/1.1.
    http01_tls: SslConnector,
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
    /// Where "now" comes from (a dns-persist-01 record may have expired).
    pub clock: &'a Clock,
}

impl Validator {
    /// A validator asking `resolver` (or the system's resolvers).
    pub fn new(
        resolver: Option<SocketAddr>,
        http01_port: u16,
        http01_https_port: u16,
        tlsalpn01_port: u16,
        timeout: Duration,
        caa_identities: Vec<String>,
        caa_cache_max: Duration,
    ) -> Result<Validator, String> {
        let build = |max_ttl: Duration, cache_size: Option<usize>| -> Result<TokioResolver, String> {
            let mut builder = match resolver {
                Some(addr) => {
                    let group = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
                    TokioResolver::builder_with_config(
                        ResolverConfig::from_parts(None, vec![], group),
                        TokioConnectionProvider::default(),
                    )
                }
                None => TokioResolver::builder_tokio().map_err(|e| format!("system DNS configuration: {e}"))?,
            };
            let opts: &mut ResolverOpts = builder.options_mut();
            opts.positive_max_ttl = Some(max_ttl);
            opts.negative_max_ttl = Some(max_ttl);
            if let Some(entries) = cache_size {
                opts.cache_size = entries;
            }
            opts.timeout = timeout.min(Duration::from_secs(5));
            opts.attempts = 2;
            if resolver.is_some() {
                opts.use_hosts_file = ResolveHosts::Never;
            }
            Ok(builder.build())
        };
        // Validation must see the zone as it is now: nothing cached.
        let resolver_now = build(Duration::ZERO, None)?;
        // A CAA check may be relied on for the answer's TTL or 8 hours,
        // whichever is greater (Baseline Requirements §3.2.2.8): answers are
        // cached for their TTL, at most `caa_cache_max`. A TTL of 0 is not
        // cached.
        let caa_resolver = build(caa_cache_max, Some(CAA_CACHE_ENTRIES))?;
        let mut tls = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        // tls-alpn-01 certificates are self-signed by design: the check is the extension.
        tls.set_verify(SslVerifyMode::NONE);
        tls.set_alpn_protos(b"\x0aacme-tls/1").map_err(|e| e.to_string())?;
        let mut http01_tls = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        // The key authorization proves control; the certificate proves nothing here.
        http01_tls.set_verify(SslVerifyMode::NONE);
        http01_tls.set_alpn_protos(b"\x08http/1.1").map_err(|e| e.to_string())?;
        Ok(Validator {
            resolver: resolver_now,
            caa_resolver,
            http01_port,
            http01_https_port,
            tlsalpn01_port,
            timeout,
            caa_identities,
            tls: tls.build(),
            http01_tls: http01_tls.build(),
        })
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
                ..AcmeError::new(
                    ProblemType::Connection,
                    format!("validation did not finish within {:?}", self.timeout),
                )
            }),
        }
    }

    /// The challenge and the CAA check run at once (as Boulder's VA does):
    /// neither depends on the other, and both must pass. When both fail, the
    /// challenge's error is the one reported.
    async fn validate_inner(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let challenge = async {
            match a.kind {
                ChallengeType::Http01 => self.http01(a).await,
                ChallengeType::Dns01 => self.dns01(a).await,
                ChallengeType::TlsAlpn01 => self.tls_alpn01(a).await,
                ChallengeType::DnsPersist01 => self.dns_persist01(a).await,
                other => Err(AcmeError::new(ProblemType::Malformed, format!("challenge type {other} is not offered"))),
            }
        };
        if a.identifier.kind != IdentifierType::Dns {
            return challenge.await;
        }
        let caa = self.check_caa(&a.identifier.value, a.wildcard, a.account_url, a.kind.as_str());
        let (challenge, caa) = tokio::join!(challenge, caa);
        challenge?;
        caa
    }

    /// RFC 8659 §3: the first non-empty CAA RRset climbing from the name to
    /// the root. Every level is asked at once (as Boulder does) and the
    /// answers taken in order, so the result is the climb's: a DNS failure
    /// above the first non-empty RRset does not matter, one below it does.
    pub async fn check_caa(
        &self,
        name: &str,
        wildcard: bool,
        account_url: &str,
        method: &str,
    ) -> Result<(), AcmeError> {
        if self.caa_identities.is_empty() {
            return Ok(());
        }
        let levels = std::iter::successors(Some(name), |n| n.split_once('.').map(|(_, parent)| parent))
            .filter(|n| !n.is_empty());
        let answers = futures::future::join_all(levels.map(|n| self.caa_rrset(n))).await;
        for records in answers {
            let records = records?;
            if !records.is_empty() {
                return caa::check(&records, &self.caa_identities, wildcard, account_url, method);
            }
        }
        Ok(())
    }

    async fn caa_rrset(&self, name: &str) -> Result<Vec<CaaRecord>, AcmeError> {
        match self.caa_resolver.lookup(fqdn(name), RecordType::CAA).await {
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
        Err(AcmeError::new(
            ProblemType::Connection,
            format!("cannot connect to {}: {}", id.value, last.unwrap_or_default()),
        ))
    }

    async fn http01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let token = a.key_authorization.split('.').next().unwrap_or_default();
        let host = match a.identifier.kind {
            IdentifierType::Ip if a.identifier.value.contains(':') => format!("[{}]", a.identifier.value),
            _ => a.identifier.value.clone(),
        };
        let start = format!("http://{host}:{}/.well-known/acme-challenge/{token}", self.http01_port);
        let mut url = Url::parse(&start)
            .map_err(|e| AcmeError::new(ProblemType::Malformed, format!("http-01 URL {start}: {e}")))?;
        let mut fetched: Vec<Url> = Vec::new();
        loop {
            let (status, location, body) = self.http01_get(&url).await?;
            fetched.push(url.clone());
            if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                let next =
                    redirect_target(&url, location.as_deref(), a.identifier, self.http01_port, self.http01_https_port)
                        .map_err(|why| {
                            AcmeError::new(
                                ProblemType::Connection,
                                format!("http-01: {url} answered HTTP {status}: {why}"),
                            )
                        })?;
                if fetched.contains(&next) {
                    return Err(AcmeError::new(
                        ProblemType::Connection,
                        format!("http-01: redirect loop: {url} redirected to {next}, which was fetched before"),
                    ));
                }
                if fetched.len() > HTTP01_MAX_REDIRECTS {
                    return Err(AcmeError::new(
                        ProblemType::Connection,
                        format!("http-01: too many redirects: more than {HTTP01_MAX_REDIRECTS}, starting at {start}; the last to {next}"),
                    ));
                }
                url = next;
                continue;
            }
            let after = match fetched.len() - 1 {
                0 => String::new(),
                n => format!(" (after {n} redirect{})", if n == 1 { "" } else { "s" }),
            };
            if !status.is_success() {
                return Err(AcmeError::new(
                    ProblemType::IncorrectResponse,
                    format!("http-01: {url} answered HTTP {status}{after}"),
                ));
            }
            let body = body.ok_or_else(|| {
                AcmeError::new(
                    ProblemType::IncorrectResponse,
                    format!("http-01: {url}: the body exceeds {HTTP01_MAX_BODY} bytes or broke off{after}"),
                )
            })?;
            return if validate::http01_body_matches(&body, a.key_authorization) {
                Ok(())
            } else {
                Err(AcmeError::new(
                    ProblemType::IncorrectResponse,
                    format!("http-01: the response from {url} is not the key authorization{after}"),
                ))
            };
        }
    }

    /// One GET of `url` on a new connection: the status, the Location header, and
    /// for a 2xx answer the body (`None` when it is too large or broke off).
    async fn http01_get(&self, url: &Url) -> Result<(StatusCode, Option<String>, Option<Bytes>), AcmeError> {
        let conn_err =
            |e: &dyn std::fmt::Display| AcmeError::new(ProblemType::Connection, format!("http-01 to {url}: {e}"));
        let target = match url.host() {
            Some(Host::Domain(d)) => Identifier::dns(d),
            Some(Host::Ipv4(ip)) => Identifier::ip(ip.to_string()),
            Some(Host::Ipv6(ip)) => Identifier::ip(ip.to_string()),
            None => return Err(conn_err(&"no host")),
        };
        let port = url.port_or_known_default().ok_or_else(|| conn_err(&"no port"))?;
        let host_header = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            (None, _) => return Err(conn_err(&"no host")),
        };
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let req = hyper::Request::get(path)
            .header(hyper::header::HOST, host_header)
            .header(hyper::header::USER_AGENT, "signet-acmed")
            .header(hyper::header::ACCEPT, "*/*")
            .body(Empty::<Bytes>::new())
            .map_err(|e| AcmeError::new(ProblemType::ServerInternal, e.to_string()))?;
        let stream = self.connect(&target, port).await?;
        let resp = if url.scheme() == "https" {
            let mut cfg = self.http01_tls.configure().map_err(|e| conn_err(&e))?;
            cfg.set_verify_hostname(false);
            cfg.set_use_server_name_indication(target.kind == IdentifierType::Dns);
            let ssl = cfg.into_ssl(&target.value).map_err(|e| conn_err(&e))?;
            let mut tls = tokio_openssl::SslStream::new(ssl, stream).map_err(|e| conn_err(&e))?;
            Pin::new(&mut tls).connect().await.map_err(|e| conn_err(&format!("TLS handshake: {e}")))?;
            send_http1(TokioIo::new(tls), req).await.map_err(|e| conn_err(&e))?
        } else {
            send_http1(TokioIo::new(stream), req).await.map_err(|e| conn_err(&e))?
        };
        let (resp, driver) = resp;
        let status = resp.status();
        let location = resp.headers().get(hyper::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = if status.is_success() {
            Limited::new(resp.into_body(), HTTP01_MAX_BODY).collect().await.ok().map(|b| b.to_bytes())
        } else {
            None
        };
        driver.abort();
        Ok((status, location, body))
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
            Err(AcmeError::new(
                ProblemType::IncorrectResponse,
                format!("dns-01: none of the {} TXT records at {name} is the expected value", found.len()),
            ))
        }
    }

    async fn dns_persist01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let name = format!("_validation-persist.{}", a.identifier.value);
        let now = a.clock.unix_seconds();
        let found = self.txt(&name).await?;
        if found.iter().any(|t| caa::persist_record_admits(t, &self.caa_identities, a.account_url, a.wildcard, now)) {
            Ok(())
        } else {
            Err(AcmeError::new(
                ProblemType::IncorrectResponse,
                format!(
                    "dns-persist-01: no TXT record at {name} names this CA and account{}",
                    if a.wildcard { " with policy=wildcard" } else { "" }
                ),
            ))
        }
    }

    async fn tls_alpn01(&self, a: &Attempt<'_>) -> Result<(), AcmeError> {
        let tls_err =
            |why: String| AcmeError::new(ProblemType::Tls, format!("tls-alpn-01 to {}: {why}", a.identifier.value));
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

type Http1Response = (hyper::Response<hyper::body::Incoming>, tokio::task::JoinHandle<()>);

/// Sends `req` over `io` (HTTP/1.1); the connection's driver task comes back
/// with the response, to be aborted once the body is read.
async fn send_http1<T>(io: T, req: hyper::Request<Empty<Bytes>>) -> Result<Http1Response, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    match sender.send_request(req).await {
        Ok(resp) => Ok((resp, driver)),
        Err(e) => {
            driver.abort();
            Err(e)
        }
    }
}

/// Where an http-01 redirect from `from` leads, when acmed may follow it (see the
/// module doc): `location` resolved against `from`, without its fragment.
pub fn redirect_target(
    from: &Url,
    location: Option<&str>,
    id: &Identifier,
    http_port: u16,
    https_port: u16,
) -> Result<Url, String> {
    let location = location.ok_or("a redirect without a Location header")?;
    let mut next = from.join(location).map_err(|e| format!("the redirect target {location:?} is not a URL: {e}"))?;
    next.set_fragment(None);
    let port = match next.scheme() {
        "http" => http_port,
        "https" => https_port,
        other => return Err(format!("redirects are followed to http: and https: URLs only, not to {next} ({other}:)")),
    };
    if next.port_or_known_default() != Some(port) {
        return Err(format!("{} redirects are followed to port {port} only, not to {next}", next.scheme()));
    }
    if !next.username().is_empty() || next.password().is_some() {
        return Err(format!(
            "redirects are not followed to URLs with credentials ({})",
            next.host_str().unwrap_or_default()
        ));
    }
    let literal = match next.host() {
        Some(Host::Domain(_)) => return Ok(next),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        None => return Err(format!("the redirect target {next} has no host")),
    };
    if id.kind == IdentifierType::Ip && id.value.parse::<IpAddr>().ok() == Some(literal) {
        Ok(next)
    } else {
        Err(format!("redirects to an IP address are followed only to the IP identifier being validated, not to {next}"))
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
    let san =
        exts.iter().find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME).ok_or("no subjectAltName")?;
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
    let ext =
        exts.iter().find(|e| e.extn_id == validate::ID_PE_ACME_IDENTIFIER).ok_or("no acmeIdentifier extension")?;
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
    fn redirect_targets() {
        let from = Url::parse("http://a.example:5002/.well-known/acme-challenge/tok").unwrap();
        let dns = Identifier::dns("a.example");
        let go = |loc: &str| redirect_target(&from, Some(loc), &dns, 5002, 5001).map(|u| u.to_string());
        assert_eq!(go("/moved/tok").unwrap(), "http://a.example:5002/moved/tok");
        assert_eq!(go("other?x=1#frag").unwrap(), "http://a.example:5002/.well-known/acme-challenge/other?x=1");
        assert_eq!(go("https://b.example:5001/t").unwrap(), "https://b.example:5001/t");
        assert_eq!(go("//c.example:5002/t").unwrap(), "http://c.example:5002/t");
        // Ports: http01_port for http:, the https port for https: (443 unless configured).
        assert!(go("http://a.example/t").unwrap_err().contains("port 5002 only"));
        assert!(go("https://a.example:5002/t").unwrap_err().contains("port 5001 only"));
        assert!(go("http://a.example:22/t").is_err());
        let https_default = redirect_target(&from, Some("https://a.example/t"), &dns, 5002, 443);
        assert_eq!(https_default.unwrap().to_string(), "https://a.example/t");
        // Schemes, IP literals, credentials, nonsense.
        assert!(go("ftp://a.example:5002/t").unwrap_err().contains("http: and https:"));
        assert!(go("file:///etc/passwd").is_err());
        assert!(go("http://127.0.0.1:5002/t").unwrap_err().contains("IP address"));
        assert!(go("http://[::1]:5002/t").unwrap_err().contains("IP address"));
        assert!(go("http://user:pw@a.example:5002/t").unwrap_err().contains("credentials"));
        assert!(go("http://[nope/").is_err());
        assert!(redirect_target(&from, None, &dns, 5002, 5001).unwrap_err().contains("Location"));
        // An IP identifier may be redirected to itself, and only to itself.
        let from_ip = Url::parse("http://192.0.2.7:5002/.well-known/acme-challenge/tok").unwrap();
        let ip = Identifier::ip("192.0.2.7");
        assert!(redirect_target(&from_ip, Some("http://192.0.2.7:5002/x"), &ip, 5002, 5001).is_ok());
        assert!(redirect_target(&from_ip, Some("/x"), &ip, 5002, 5001).is_ok());
        assert!(redirect_target(&from_ip, Some("http://192.0.2.8:5002/x"), &ip, 5002, 5001).is_err());
        let v6 = Identifier::ip("2001:db8::1");
        let from_v6 = Url::parse("http://[2001:db8::1]:5002/t").unwrap();
        assert!(redirect_target(&from_v6, Some("http://[2001:DB8:0::1]:5002/x"), &v6, 5002, 5001).is_ok());
    }

    #[test]
    fn reverse_names() {
        assert_eq!(reverse_name("127.0.0.1").unwrap(), "1.0.0.127.in-addr.arpa");
        assert!(reverse_name("::1").unwrap().starts_with("1.0.0.0."));
        assert!(reverse_name("::1").unwrap().ends_with(".ip6.arpa"));
        assert_eq!(reverse_name("nope"), None);
    }
}
