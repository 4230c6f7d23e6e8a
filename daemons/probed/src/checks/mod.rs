//! The check kinds. Each is prepared once from its config ([`Probe::new`]: clients, parsed
//! certificates, resolvers) and then run as often as the scheduler asks ([`Probe::run`]), each
//! run giving an [`Outcome`]: success, duration, a message and the kind's own gauges.

use std::time::{Duration, Instant};

use crate::config::{CheckConfig, Kind};

pub mod ct;
pub mod http;
pub mod net;
pub mod pki;
pub mod signd;

/// A gauge a check sets beside `probe_success` and `probe_duration_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Gauge {
    /// Unix time of the earliest `notAfter` in the server's chain (tls).
    SslEarliestCertExpiry,
    /// The HTTP status code (http).
    HttpStatusCode,
    /// 1.1 or 2 (http).
    HttpVersion,
    /// Records in the answer (dns).
    DnsAnswers,
    /// 0 good, 1 revoked, 2 unknown (ocsp).
    OcspStatus,
    /// Seconds until the response's nextUpdate (ocsp).
    OcspNextUpdate,
    /// Seconds since the response's thisUpdate (ocsp).
    OcspAge,
    /// Seconds until the CRL's nextUpdate (crl).
    CrlNextUpdate,
    /// The CRL number (crl).
    CrlNumber,
    /// Entries in the CRL (crl).
    CrlEntries,
    /// The checkpoint's tree size (ct).
    CtTreeSize,
    /// Seconds since the checkpoint's timestamp (ct).
    CtCheckpointAge,
    /// Seconds a test signature took (signd).
    SigndSignLatency,
    /// Keys signd could not load or check (signd).
    SigndKeysUnavailable,
}

impl Gauge {
    /// Every gauge, for registration.
    pub const ALL: [Gauge; 14] = [
        Gauge::SslEarliestCertExpiry,
        Gauge::HttpStatusCode,
        Gauge::HttpVersion,
        Gauge::DnsAnswers,
        Gauge::OcspStatus,
        Gauge::OcspNextUpdate,
        Gauge::OcspAge,
        Gauge::CrlNextUpdate,
        Gauge::CrlNumber,
        Gauge::CrlEntries,
        Gauge::CtTreeSize,
        Gauge::CtCheckpointAge,
        Gauge::SigndSignLatency,
        Gauge::SigndKeysUnavailable,
    ];

    /// The metric name and its help text.
    pub fn metric(self) -> (&'static str, &'static str) {
        match self {
            Gauge::SslEarliestCertExpiry => {
                ("probe_ssl_earliest_cert_expiry", "Unix time of the earliest certificate expiry in the chain")
            }
            Gauge::HttpStatusCode => ("probe_http_status_code", "HTTP status code of the answer"),
            Gauge::HttpVersion => ("probe_http_version", "HTTP version of the answer"),
            Gauge::DnsAnswers => ("probe_dns_answer_rrs", "Records in the DNS answer"),
            Gauge::OcspStatus => ("probe_ocsp_status", "OCSP certificate status: 0 good, 1 revoked, 2 unknown"),
            Gauge::OcspNextUpdate => ("probe_ocsp_next_update_seconds", "Seconds until the OCSP response's nextUpdate"),
            Gauge::OcspAge => ("probe_ocsp_this_update_age_seconds", "Seconds since the OCSP response's thisUpdate"),
            Gauge::CrlNextUpdate => ("probe_crl_next_update_seconds", "Seconds until the CRL's nextUpdate"),
            Gauge::CrlNumber => ("probe_crl_number", "The CRL's cRLNumber"),
            Gauge::CrlEntries => ("probe_crl_revoked_entries", "Revoked certificates listed in the CRL"),
            Gauge::CtTreeSize => ("probe_ct_tree_size", "Tree size of the CT log's checkpoint"),
            Gauge::CtCheckpointAge => {
                ("probe_ct_checkpoint_age_seconds", "Seconds since the CT checkpoint's timestamp")
            }
            Gauge::SigndSignLatency => ("probe_signd_sign_seconds", "Seconds a test signature through signd took"),
            Gauge::SigndKeysUnavailable => ("probe_signd_keys_unavailable", "Keys signd could not load or check"),
        }
    }
}

/// What one attempt found, success or failure.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One line for people: what was seen or what was wrong.
    pub message: String,
    /// The kind's gauges.
    pub gauges: Vec<(Gauge, f64)>,
}

impl Report {
    /// A report with `message` and no gauges.
    pub fn msg(message: impl Into<String>) -> Report {
        Report { message: message.into(), gauges: Vec::new() }
    }

    /// Adds a gauge.
    pub fn gauge(mut self, g: Gauge, v: f64) -> Report {
        self.gauges.push((g, v));
        self
    }
}

/// An attempt's result: `Ok` passed, `Err` failed.
pub type Probed = Result<Report, Report>;

/// One run of a check (after retries).
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Whether the check passed.
    pub ok: bool,
    /// Time the last attempt took.
    pub duration: Duration,
    /// What was seen or what was wrong.
    pub message: String,
    /// The kind's gauges.
    pub gauges: Vec<(Gauge, f64)>,
    /// Attempts made (1 + retries used).
    pub attempts: u32,
}

/// A prepared check.
pub enum Probe {
    /// kind = "http".
    Http(http::HttpProbe),
    /// kind = "tcp".
    Tcp(net::TcpProbe),
    /// kind = "tls".
    Tls(net::TlsProbe),
    /// kind = "dns".
    Dns(net::DnsProbe),
    /// kind = "ocsp".
    Ocsp(pki::OcspProbe),
    /// kind = "crl".
    Crl(pki::CrlProbe),
    /// kind = "ct".
    Ct(ct::CtProbe),
    /// kind = "signd".
    Signd(signd::SigndProbe),
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Probe::Http(_) => "Probe::Http",
            Probe::Tcp(_) => "Probe::Tcp",
            Probe::Tls(_) => "Probe::Tls",
            Probe::Dns(_) => "Probe::Dns",
            Probe::Ocsp(_) => "Probe::Ocsp",
            Probe::Crl(_) => "Probe::Crl",
            Probe::Ct(_) => "Probe::Ct",
            Probe::Signd(_) => "Probe::Signd",
        })
    }
}

impl Probe {
    /// Prepares the check `c` (checked by [`crate::config`] already).
    pub fn new(c: &CheckConfig) -> Result<Probe, String> {
        Ok(match c.kind {
            Kind::Http => Probe::Http(http::HttpProbe::new(c)?),
            Kind::Tcp => Probe::Tcp(net::TcpProbe::new(c)?),
            Kind::Tls => Probe::Tls(net::TlsProbe::new(c)?),
            Kind::Dns => Probe::Dns(net::DnsProbe::new(c)?),
            Kind::Ocsp => Probe::Ocsp(pki::OcspProbe::new(c)?),
            Kind::Crl => Probe::Crl(pki::CrlProbe::new(c)?),
            Kind::Ct => Probe::Ct(ct::CtProbe::new(c)?),
            Kind::Signd => Probe::Signd(signd::SigndProbe::new(c)?),
        })
    }

    /// What the check remembers between runs, to be kept across restarts (see [`Probe::restore`]).
    pub fn memo(&self) -> Option<Vec<u8>> {
        match self {
            Probe::Crl(p) => p.memo(),
            Probe::Ct(p) => p.memo(),
            _ => None,
        }
    }

    /// Gives the check back what [`Probe::memo`] returned before a restart or reload.
    pub fn restore(&self, memo: &[u8]) {
        match self {
            Probe::Crl(p) => p.restore(memo),
            Probe::Ct(p) => p.restore(memo),
            _ => {}
        }
    }

    /// One attempt, without a time limit.
    ///
    /// The other kinds' attempts are boxed: this future is as large as the largest it may
    /// hold, and it is the HTTP check that runs by the thousand at once (an OCSP, CRL or CT
    /// check makes a few requests and parses what they return, once a minute or so).
    pub async fn attempt(&self) -> Probed {
        match self {
            Probe::Http(p) => p.run().await,
            Probe::Tcp(p) => Box::pin(p.run()).await,
            Probe::Tls(p) => Box::pin(p.run()).await,
            Probe::Dns(p) => Box::pin(p.run()).await,
            Probe::Ocsp(p) => Box::pin(p.run()).await,
            Probe::Crl(p) => Box::pin(p.run()).await,
            Probe::Ct(p) => Box::pin(p.run()).await,
            Probe::Signd(p) => Box::pin(p.run()).await,
        }
    }

    /// A run: up to `1 + retries` attempts, each within `timeout`, until one passes.
    pub async fn run(&self, timeout: Duration, retries: u32) -> Outcome {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let start = Instant::now();
            let result = match tokio::time::timeout(timeout, self.attempt()).await {
                Ok(r) => r,
                Err(_) => Err(Report::msg(format!("timed out after {timeout:?}"))),
            };
            let duration = start.elapsed();
            let (ok, report) = match result {
                Ok(r) => (true, r),
                Err(r) => (false, r),
            };
            if ok || attempts > retries {
                return Outcome { ok, duration, message: report.message, gauges: report.gauges, attempts };
            }
        }
    }
}

/// Seconds from now until unix time `t` (negative when past).
pub(crate) fn seconds_until(t: i64) -> f64 {
    (t - now_unix()) as f64
}

/// The current unix time in seconds.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Probe;

    /// What every check in flight holds: an HTTP check's run stays small (888 bytes, against
    /// 1,496 with the per-run clients inline and every kind's attempt in
    /// one enum).
    #[test]
    fn an_http_run_is_a_small_future() {
        let text = "state_dir = \"/nonexistent\"\nlisten = \"127.0.0.1:1\"\n[checks.h]\nkind = \"http\"\n\
                    url = \"http://127.0.0.1:1/\"\n";
        let config: crate::config::Config =
            signet_runtime::config::parse(text, std::path::Path::new("t.toml")).expect("the check parses");
        let probe = Probe::new(&config.checks["h"]).expect("the check is prepared");
        let run = probe.run(Duration::from_secs(1), 0);
        let size = std::mem::size_of_val(&run);
        assert!(size <= 1_024, "Probe::run's future is {size} bytes");
    }
}
