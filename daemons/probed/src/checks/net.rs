//! TCP, TLS and DNS checks.

use std::time::Duration;

use hickory_resolver::config::{NameServerConfigGroup, ResolveHosts, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::TokioResolver;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use super::{seconds_until, Gauge, Probed, Report};
use crate::config::{split_host_port, CheckConfig};

/// A prepared TCP check: connect, then close.
#[derive(Debug)]
pub struct TcpProbe {
    address: String,
}

impl TcpProbe {
    /// Prepares the check.
    pub fn new(c: &CheckConfig) -> Result<TcpProbe, String> {
        Ok(TcpProbe { address: c.address.clone().ok_or("no address")? })
    }

    /// One connection.
    pub async fn run(&self) -> Probed {
        let s = TcpStream::connect(&self.address).await.map_err(|e| Report::msg(format!("connect: {e}")))?;
        let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        Ok(Report::msg(format!("connected to {peer}")))
    }
}

/// A prepared TLS check: handshake, chain verified to the bundle, hostname, expiry, stapling.
pub struct TlsProbe {
    address: String,
    server_name: String,
    connector: SslConnector,
    min_days: Option<u32>,
    require_stapling: bool,
}

impl TlsProbe {
    /// Prepares the check.
    pub fn new(c: &CheckConfig) -> Result<TlsProbe, String> {
        let address = c.address.clone().ok_or("no address")?;
        let (host, _) = split_host_port(&address).ok_or("address is not host:port")?;
        let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        match &c.ca_file {
            Some(p) => b.set_ca_file(p).map_err(|e| format!("ca_file {}: {e}", p.display()))?,
            None => b.set_default_verify_paths().map_err(|e| e.to_string())?,
        }
        b.set_verify(SslVerifyMode::PEER);
        Ok(TlsProbe {
            address,
            server_name: c.server_name.clone().unwrap_or(host),
            connector: b.build(),
            min_days: c.min_days,
            require_stapling: c.require_stapling,
        })
    }

    /// One handshake.
    pub async fn run(&self) -> Probed {
        let tcp = TcpStream::connect(&self.address).await.map_err(|e| Report::msg(format!("connect: {e}")))?;
        let mut config = self.connector.configure().map_err(|e| Report::msg(e.to_string()))?;
        if self.require_stapling {
            config.set_status_type(openssl::ssl::StatusType::OCSP).map_err(|e| Report::msg(e.to_string()))?;
        }
        let ssl = config.into_ssl(&self.server_name).map_err(|e| Report::msg(e.to_string()))?;
        let mut stream = Box::pin(SslStream::new(ssl, tcp).map_err(|e| Report::msg(e.to_string()))?);
        if let Err(e) = stream.as_mut().connect().await {
            let verify = stream.ssl().verify_result();
            return Err(Report::msg(if verify == openssl::x509::X509VerifyResult::OK {
                format!("handshake: {e}")
            } else {
                format!("certificate verify failed: {verify}")
            }));
        }
        let ssl = stream.ssl();
        let chain = ssl.peer_cert_chain().ok_or_else(|| Report::msg("no certificate chain"))?;
        let earliest = chain
            .iter()
            .filter_map(|c| unix_time(c.not_after()))
            .min()
            .ok_or_else(|| Report::msg("no certificate in the chain"))?;
        let days = seconds_until(earliest) / 86_400.0;
        let report = |m: String| Report::msg(m).gauge(Gauge::SslEarliestCertExpiry, earliest as f64);
        if let Some(min) = self.min_days {
            if days < f64::from(min) {
                return Err(report(format!("a certificate expires in {days:.1} days (minimum {min})")));
            }
        }
        if self.require_stapling && ssl.ocsp_status().is_none() {
            return Err(report("no stapled OCSP response".into()));
        }
        let version = ssl.version_str();
        Ok(report(format!("{version}, chain valid for {}, earliest expiry in {days:.1} days", self.server_name)))
    }
}

pub(crate) use signet_runtime::client::unix_time;

/// A prepared DNS check.
pub struct DnsProbe {
    resolver: TokioResolver,
    name: String,
    record_type: RecordType,
    expect: Vec<String>,
}

impl DnsProbe {
    /// Prepares the check and its resolver (nothing cached: each run asks).
    pub fn new(c: &CheckConfig) -> Result<DnsProbe, String> {
        let mut builder = match c.resolver {
            Some(addr) => {
                let group = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
                TokioResolver::builder_with_config(
                    ResolverConfig::from_parts(None, vec![], group),
                    TokioConnectionProvider::default(),
                )
            }
            None => TokioResolver::builder_tokio().map_err(|e| format!("system DNS configuration: {e}"))?,
        };
        let opts = builder.options_mut();
        opts.positive_max_ttl = Some(Duration::ZERO);
        opts.negative_max_ttl = Some(Duration::ZERO);
        opts.attempts = 1;
        if c.resolver.is_some() {
            opts.use_hosts_file = ResolveHosts::Never;
        }
        let record_type = c.record_type.as_deref().unwrap_or("A").parse().map_err(|e| format!("record_type: {e}"))?;
        let mut name = c.name.clone().ok_or("no name")?;
        if !name.ends_with('.') {
            name.push('.');
        }
        let mut expect = c.expect.clone();
        expect.sort();
        Ok(DnsProbe { resolver: builder.build(), name, record_type, expect })
    }

    /// One lookup.
    pub async fn run(&self) -> Probed {
        let lookup = self
            .resolver
            .lookup(self.name.as_str(), self.record_type)
            .await
            .map_err(|e| Report::msg(format!("{} {}: {e}", self.record_type, self.name)))?;
        let mut got: Vec<String> = lookup.iter().map(|r| r.to_string()).collect();
        got.sort();
        let report = |m: String| Report::msg(m).gauge(Gauge::DnsAnswers, got.len() as f64);
        if got.is_empty() {
            return Err(report(format!("no {} record for {}", self.record_type, self.name)));
        }
        if !self.expect.is_empty() && got != self.expect {
            return Err(report(format!("{} {}: {:?}, expected {:?}", self.record_type, self.name, got, self.expect)));
        }
        Ok(report(format!("{} {}: {}", self.record_type, self.name, got.join(", "))))
    }
}
