//! PKI checks: a certificate's OCSP status from its responder, a CRL's freshness, signature and
//! number. Requests and signatures go through OpenSSL's OCSP and CRL code; the fields are read
//! with the RustCrypto `x509-ocsp` and `x509-cert` types (no ASN.1 by hand).

use std::sync::Mutex;
use std::time::Duration;

use der::Decode;
use openssl::hash::MessageDigest;
use openssl::ocsp::{OcspCertId, OcspCertStatus, OcspFlag, OcspRequest, OcspResponse, OcspResponseStatus};
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509Crl, X509};

use super::http::{client, fetch, HttpClient};
use super::{now_unix, Gauge, Probed, Report};
use crate::config::{CheckConfig, HttpVersion};

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

    fn cert_id(&self) -> Result<OcspCertId, Report> {
        OcspCertId::from_cert(MessageDigest::sha1(), &self.cert, &self.issuer)
            .map_err(|e| Report::msg(format!("certificate ID: {e}")))
    }

    /// One request (POST), the response verified.
    pub async fn run(&self) -> Probed {
        let mut req = OcspRequest::new().map_err(|e| Report::msg(e.to_string()))?;
        req.add_id(self.cert_id()?).map_err(|e| Report::msg(e.to_string()))?;
        let der = req.to_der().map_err(|e| Report::msg(e.to_string()))?;
        let (status, body) =
            fetch(&self.client, &self.url, Some(("application/ocsp-request", der))).await.map_err(Report::msg)?;
        if status != 200 {
            return Err(Report::msg(format!("{}: HTTP status {status}", self.url)));
        }
        let resp = OcspResponse::from_der(&body).map_err(|e| Report::msg(format!("not an OCSP response: {e}")))?;
        if resp.status() != OcspResponseStatus::SUCCESSFUL {
            return Err(Report::msg(format!("responder status {:?}", resp.status())));
        }
        let basic = resp.basic().map_err(|e| Report::msg(format!("basic response: {e}")))?;
        // The issuer signs, or a responder it certified (PARTIAL_CHAIN: the issuer need not be a root).
        let mut store = X509StoreBuilder::new().map_err(|e| Report::msg(e.to_string()))?;
        store.add_cert(self.issuer.clone()).map_err(|e| Report::msg(e.to_string()))?;
        store.set_flags(X509VerifyFlags::PARTIAL_CHAIN).map_err(|e| Report::msg(e.to_string()))?;
        let store = store.build();
        let mut certs = Stack::new().map_err(|e| Report::msg(e.to_string()))?;
        certs.push(self.issuer.clone()).map_err(|e| Report::msg(e.to_string()))?;
        basic
            .verify(&certs, &store, OcspFlag::empty())
            .map_err(|e| Report::msg(format!("response signature does not verify: {e}")))?;
        let id = self.cert_id()?;
        let single =
            basic.find_status(&id).ok_or_else(|| Report::msg("the response does not answer for the certificate"))?;
        let code = match single.status {
            OcspCertStatus::GOOD => 0.0,
            OcspCertStatus::REVOKED => 1.0,
            _ => 2.0,
        };
        // The times, read with x509-ocsp from the same bytes.
        let (this_update, next_update) = response_times(&body).map_err(Report::msg)?;
        let mut report =
            Report::msg("").gauge(Gauge::OcspStatus, code).gauge(Gauge::OcspAge, (now_unix() - this_update) as f64);
        if let Some(next) = next_update {
            report = report.gauge(Gauge::OcspNextUpdate, (next - now_unix()) as f64);
        }
        let status_text = match code as u8 {
            0 => "good",
            1 => "revoked",
            _ => "unknown",
        };
        if code != 0.0 {
            report.message = format!("certificate status {status_text}");
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

/// thisUpdate and nextUpdate of the first single response in an OCSP response.
fn response_times(der_bytes: &[u8]) -> Result<(i64, Option<i64>), String> {
    let resp = x509_ocsp::OcspResponse::from_der(der_bytes).map_err(|e| format!("OCSP response: {e}"))?;
    let bytes = resp.response_bytes.ok_or("no response bytes")?;
    let basic = x509_ocsp::BasicOcspResponse::from_der(bytes.response.as_bytes())
        .map_err(|e| format!("basic OCSP response: {e}"))?;
    let single = basic.tbs_response_data.responses.first().ok_or("no single response")?;
    Ok((
        unix(single.this_update.0.to_unix_duration()),
        single.next_update.as_ref().map(|t| unix(t.0.to_unix_duration())),
    ))
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
