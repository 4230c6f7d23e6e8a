//! PKI checks: a certificate's OCSP status from its responder, a CRL's freshness, signature and
//! number. The OCSP request and the check of its answer are signet-ca's `ocsp_check` (shared
//! with tokend's revocation check); CRL signatures go through OpenSSL, and the CRL's fields are
//! read with the RustCrypto `x509-cert` types (no ASN.1 by hand).

use std::sync::Mutex;
use std::time::Duration;

use der::Decode;
use openssl::x509::{X509Crl, X509};

use super::http::{client, fetch, HttpClient};
use super::{now_unix, Gauge, Probed, Report};
use crate::config::{CheckConfig, HttpVersion};
use signet_ca::ocsp_check::{check_response, request, Status};

/// Leeway for clocks when judging thisUpdate (s).
const CLOCK_SKEW: i64 = 300;

fn read_cert(path: &std::path::Path) -> Result<X509, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    X509::from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))
}

/// Unix seconds of a `der` time.
fn unix(d: Duration) -> i64 {
    d.as_secs() as i64
}

/// Freshness of a (thisUpdate, nextUpdate) pair: the failure, if any.
fn freshness(
    what: &str,
    this_update: i64,
    next_update: Option<i64>,
    max_age: Option<Duration>,
    min_margin: Option<Duration>,
) -> Result<(), String> {
    let now = now_unix();
    if this_update > now + CLOCK_SKEW {
        return Err(format!("{what} thisUpdate is in the future"));
    }
    if let Some(max) = max_age {
        if now - this_update > max.as_secs() as i64 {
            return Err(format!("{what} thisUpdate is {}s old (at most {}s)", now - this_update, max.as_secs()));
        }
    }
    if let Some(next) = next_update {
        if next <= now {
            return Err(format!("{what} nextUpdate passed {}s ago", now - next));
        }
        if let Some(margin) = min_margin {
            if next - now < margin.as_secs() as i64 {
                return Err(format!("{what} nextUpdate in {}s (margin {}s)", next - now, margin.as_secs()));
            }
        }
    }
    Ok(())
}

/// A prepared OCSP check.
pub struct OcspProbe {
    client: HttpClient,
    url: String,
    cert: X509,
    issuer: X509,
    max_age: Option<Duration>,
    min_margin: Option<Duration>,
}

impl OcspProbe {
    /// Prepares the check: the certificate, its issuer and the responder URL (from the config,
    /// else the certificate's AIA).
    pub fn new(c: &CheckConfig) -> Result<OcspProbe, String> {
        let cert = read_cert(c.certificate.as_deref().ok_or("no certificate")?)?;
        let issuer = read_cert(c.issuer.as_deref().ok_or("no issuer")?)?;
        let url = match &c.url {
            Some(u) => u.0.to_string(),
            None => cert
                .ocsp_responders()
                .ok()
                .and_then(|s| s.iter().next().map(|u| u.to_string()))
                .ok_or("the certificate names no OCSP responder (AIA); give `url`")?,
        };
        Ok(OcspProbe {
            client: client(c.ca_file.as_deref(), HttpVersion::Auto, c.reuse_connections)?,
            url,
            cert,
            issuer,
            max_age: c.max_age,
            min_margin: c.min_margin,
        })
    }

    /// One request (POST), the response verified (signet-ca's relying-party check, which
    /// tokend's revocation check shares).
    pub async fn run(&self) -> Probed {
        let der = request(&self.cert, &self.issuer).map_err(|e| Report::msg(e.to_string()))?;
        let (status, body) =
            fetch(&self.client, &self.url, Some(("application/ocsp-request", der))).await.map_err(Report::msg)?;
        if status != 200 {
            return Err(Report::msg(format!("{}: HTTP status {status}", self.url)));
        }
        let answer = check_response(&body, &self.cert, &self.issuer).map_err(|e| Report::msg(e.to_string()))?;
        let code = match answer.status {
            Status::Good => 0.0,
            Status::Revoked { .. } => 1.0,
            _ => 2.0,
        };
        let (this_update, next_update) = (answer.this_update, answer.next_update);
        let mut report =
            Report::msg("").gauge(Gauge::OcspStatus, code).gauge(Gauge::OcspAge, (now_unix() - this_update) as f64);
        if let Some(next) = next_update {
            report = report.gauge(Gauge::OcspNextUpdate, (next - now_unix()) as f64);
        }
        if answer.status != Status::Good {
            report.message = format!("certificate status {}", answer.status.name());
            return Err(report);
        }
        if let Err(e) = freshness("response", this_update, next_update, self.max_age, self.min_margin) {
            report.message = e;
            return Err(report);
        }
        report.message = format!(
            "good, signature verified, next update in {}",
            next_update.map_or_else(|| "(none)".to_owned(), |n| format!("{}s", n - now_unix()))
        );
        Ok(report)
    }
}

/// A prepared CRL check.
pub struct CrlProbe {
    client: HttpClient,
    url: String,
    issuer: X509,
    max_age: Option<Duration>,
    min_margin: Option<Duration>,
    /// The highest CRL number seen (big-endian, no leading zeros).
    last_number: Mutex<Option<Vec<u8>>>,
}

impl CrlProbe {
    /// Prepares the check.
    pub fn new(c: &CheckConfig) -> Result<CrlProbe, String> {
        Ok(CrlProbe {
            client: client(c.ca_file.as_deref(), HttpVersion::Auto, c.reuse_connections)?,
            url: c.url.as_ref().ok_or("no url")?.0.to_string(),
            issuer: read_cert(c.issuer.as_deref().ok_or("no issuer")?)?,
            max_age: c.max_age,
            min_margin: c.min_margin,
            last_number: Mutex::new(None),
        })
    }

    /// The highest CRL number seen, big-endian.
    pub fn memo(&self) -> Option<Vec<u8>> {
        self.last_number.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Restores the highest CRL number seen.
    pub fn restore(&self, memo: &[u8]) {
        *self.last_number.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(memo.to_vec());
    }

    /// One fetch: signature, freshness, number.
    pub async fn run(&self) -> Probed {
        let (status, body) = fetch(&self.client, &self.url, None).await.map_err(Report::msg)?;
        if status != 200 {
            return Err(Report::msg(format!("{}: HTTP status {status}", self.url)));
        }
        let crl = if body.starts_with(b"-----BEGIN") { X509Crl::from_pem(&body) } else { X509Crl::from_der(&body) }
            .map_err(|e| Report::msg(format!("not a CRL: {e}")))?;
        let key = self.issuer.public_key().map_err(|e| Report::msg(e.to_string()))?;
        if !crl.verify(&key).unwrap_or(false) {
            return Err(Report::msg("CRL signature does not verify with the issuer's key"));
        }
        let der = crl.to_der().map_err(|e| Report::msg(e.to_string()))?;
        let list = x509_cert::crl::CertificateList::from_der(&der).map_err(|e| Report::msg(format!("CRL: {e}")))?;
        let tbs = &list.tbs_cert_list;
        let this_update = unix(tbs.this_update.to_unix_duration());
        let next_update = tbs.next_update.as_ref().map(|t| unix(t.to_unix_duration()));
        let entries = tbs.revoked_certificates.as_ref().map_or(0, Vec::len);
        let number = tbs
            .crl_extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_CRL_NUMBER)
            .and_then(|e| der::asn1::Uint::from_der(e.extn_value.as_bytes()).ok())
            .map(|n| n.as_bytes().iter().copied().skip_while(|b| *b == 0).collect::<Vec<u8>>());
        // A delta CRL names the number of its base CRL.
        let delta_base = tbs
            .crl_extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_DELTA_CRL_INDICATOR)
            .and_then(|e| der::asn1::Uint::from_der(e.extn_value.as_bytes()).ok())
            .map(|n| n.as_bytes().iter().fold(0u128, |acc, b| acc.wrapping_shl(8) | u128::from(*b)));
        let mut report = Report::msg("").gauge(Gauge::CrlEntries, entries as f64);
        if let Some(next) = next_update {
            report = report.gauge(Gauge::CrlNextUpdate, (next - now_unix()) as f64);
        }
        let Some(number) = number else {
            report.message = "the CRL has no CRL number".into();
            return Err(report);
        };
        let shown = number.iter().fold(0u128, |acc, b| acc.wrapping_shl(8) | u128::from(*b));
        report = report.gauge(Gauge::CrlNumber, shown as f64);
        {
            let mut last = self.last_number.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(prev) = last.as_ref() {
                if (number.len(), &number) < (prev.len(), prev) {
                    report.message = format!("CRL number went back from {} to {shown}", hex::encode(prev));
                    return Err(report);
                }
            }
            *last = Some(number.clone());
        }
        if let Err(e) = freshness("CRL", this_update, next_update, self.max_age, self.min_margin) {
            report.message = e;
            return Err(report);
        }
        let what = delta_base.map_or_else(|| "CRL".to_owned(), |b| format!("delta CRL (base {b})"));
        report.message = format!(
            "{what} number {shown}, {entries} entries, signature verified, next update in {}",
            next_update.map_or_else(|| "(none)".to_owned(), |n| format!("{}s", n - now_unix()))
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_rules() {
        let now = now_unix();
        assert!(freshness("x", now - 10, Some(now + 3600), None, None).is_ok());
        assert!(freshness("x", now - 10, Some(now - 1), None, None).unwrap_err().contains("passed"));
        assert!(freshness("x", now - 10, Some(now + 60), None, Some(Duration::from_secs(120)))
            .unwrap_err()
            .contains("margin"));
        assert!(freshness("x", now - 7200, None, Some(Duration::from_secs(3600)), None).unwrap_err().contains("old"));
        assert!(freshness("x", now + 3600, None, None, None).unwrap_err().contains("future"));
    }
}
