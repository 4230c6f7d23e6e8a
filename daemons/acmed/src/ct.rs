//! Certificate Transparency (RFC 6962 §3): SCTs embedded in the certificates
//! acmed issues.
//!
//! For an order whose profile takes part (`[ct]` set, the profile not opted
//! out), `issue` signs a precertificate (the TBS plus the critical poison
//! extension) through signd's Issuer role, submits `[precertificate, issuing
//! CA .. root]` to the `ct/v1/add-pre-chain` of every configured log that
//! takes it (below), all at once, each bounded by `timeout_ms`, verifies each
//! SCT with the log's key against the entry the final certificate will yield
//! and its timestamp against the clock ([`check_sct_timestamp`]), applies
//! the policy ([`select_scts`]: `min_scts`, or Chrome's count by lifetime and
//! distinct operators), and signs the same TBS (same serial, validity,
//! everything) without the poison and with the SCT list extension.
//!
//! This module holds the pure parts (TBS transformations, the policy) and the
//! log client: hyper-util's pooled client, one per log, over plain TCP or TLS
//! (OpenSSL, verified against the system's roots or the log's `ca_file`).
//!
//! A log configured with a NotAfter window (a temporal shard) is asked only
//! for the certificates whose NotAfter falls in it ([`CtLogs::logs_for`]), so
//! every shard of a log can be configured at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use der::{Decode, Encode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_TYPE, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use openssl::ssl::{SslConnector, SslMethod};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use signet_ct::rfc6962::api::{add_chain_body, AddChainResponse};
use signet_ct::rfc6962::precert::{issuer_key_hash, poison_extension};
use signet_ct::rfc6962::sct_list_extension;
use signet_ct::{LogKey, Sct, SignedEntry};
use signet_runtime::client::TlsConnector;
use signet_runtime::metrics::Metrics;
use signet_types::Clock;
use x509_cert::ext::Extension;
use x509_cert::TbsCertificate;

use crate::config::{CtPolicyName, CtSettings};

/// The largest `add-pre-chain` answer read (an SCT in JSON is a few hundred bytes).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Where system trust stores usually are; the vendored OpenSSL's own default
/// directory is not the system's.
const SYSTEM_ROOTS: [&str; 3] =
    ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

/// The precertificate's TBS: `tbs_der` with the critical poison extension
/// added last (RFC 6962 §3.1).
pub fn precertificate_tbs(tbs_der: &[u8]) -> Result<Vec<u8>, String> {
    let poison = poison_extension().map_err(|e| e.to_string())?;
    with_extension(tbs_der, poison)
}

/// The final certificate's TBS: `tbs_der` (the precertificate's without its
/// poison) with the non-critical SCT list extension added last, or unchanged
/// when there are no SCTs.
pub fn final_tbs(tbs_der: &[u8], scts: &[Sct]) -> Result<Vec<u8>, String> {
    if scts.is_empty() {
        return Ok(tbs_der.to_vec());
    }
    with_extension(tbs_der, sct_list_extension(scts).map_err(|e| e.to_string())?)
}

/// The `precert_entry` the SCTs of a certificate whose TBS (without the SCT
/// list) is `tbs_der` sign, for the issuing CA `issuer_der`.
pub fn entry_for(tbs_der: &[u8], issuer_der: &[u8]) -> Result<SignedEntry, String> {
    Ok(SignedEntry::Precert {
        issuer_key_hash: issuer_key_hash(issuer_der).map_err(|e| e.to_string())?,
        tbs_certificate: tbs_der.to_vec(),
    })
}

/// `tbs_der` with `ext` appended. The TBS must re-encode byte for byte (it is
/// DER, as signet-ca builds it), so that removing `ext` again gives `tbs_der`:
/// that is what logs and TLS clients compute.
fn with_extension(tbs_der: &[u8], ext: Extension) -> Result<Vec<u8>, String> {
    let mut tbs = TbsCertificate::from_der(tbs_der).map_err(|e| format!("TBSCertificate: {e}"))?;
    if tbs.to_der().map_err(|e| e.to_string())? != tbs_der {
        return Err("the TBSCertificate is not DER".into());
    }
    let exts = tbs.extensions.get_or_insert_with(Vec::new);
    if exts.iter().any(|e| e.extn_id == ext.extn_id) {
        return Err(format!("the TBSCertificate already has extension {}", ext.extn_id));
    }
    exts.push(ext);
    tbs.to_der().map_err(|e| format!("TBSCertificate: {e}"))
}

/// Why a log gave no usable SCT.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// No answer within `timeout_ms`.
    Timeout(Duration),
    /// The connection (TCP or TLS) failed.
    Connect(String),
    /// An HTTP status other than 200, with the start of the body.
    Http(u16, String),
    /// A 200 whose body is not an SCT.
    Response(String),
    /// An SCT that does not verify with the log's key for this entry.
    Signature(String),
    /// An SCT whose timestamp is in the future or older than the submission.
    Timestamp(String),
}

impl Failure {
    /// The `reason` label of `acme_ct_failures`.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::Timeout(_) => "timeout",
            Failure::Connect(_) => "connect",
            Failure::Http(..) => "http",
            Failure::Response(_) => "response",
            Failure::Signature(_) => "signature",
            Failure::Timestamp(_) => "timestamp",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(t) => write!(f, "no answer within {} ms", t.as_millis()),
            Failure::Connect(e) => write!(f, "connection failed: {e}"),
            Failure::Http(status, body) => write!(f, "HTTP {status}: {body}"),
            Failure::Response(e) => write!(f, "not an SCT: {e}"),
            Failure::Signature(e) => write!(f, "the SCT does not verify: {e}"),
            Failure::Timestamp(e) => write!(f, "the SCT's timestamp {e}"),
        }
    }
}

/// One log's answer to a submission.
#[derive(Clone, Debug)]
pub struct LogOutcome {
    /// The log (its submission prefix).
    pub log: String,
    /// Who runs it, if the configuration says.
    pub operator: Option<String>,
    /// Whether the policy needs this log's SCT.
    pub required: bool,
    /// The verified SCT, or why there is none.
    pub result: Result<Sct, Failure>,
}

/// Whether an SCT's timestamp (ms since the epoch) fits the submission that
/// got it: not later than `received_ms + skew_ms` (a log does not sign in
/// the future), not earlier than `sent_ms - skew_ms` (the precertificate is
/// new: an older SCT is not for it). `skew_ms` allows for the log's clock
/// and acmed's to differ a little.
pub fn check_sct_timestamp(timestamp: u64, sent_ms: u64, received_ms: u64, skew_ms: u64) -> Result<(), String> {
    if timestamp > received_ms.saturating_add(skew_ms) {
        return Err(format!(
            "{timestamp} is {} ms in the future (more than the {skew_ms} ms allowed)",
            timestamp - received_ms
        ));
    }
    if timestamp < sent_ms.saturating_sub(skew_ms) {
        return Err(format!(
            "{timestamp} is {} ms older than the submission (more than the {skew_ms} ms allowed)",
            sent_ms - timestamp
        ));
    }
    Ok(())
}

/// What makes enough SCTs (`[ct] policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// At least this many valid SCTs.
    MinScts(usize),
    /// Chrome's CT policy for embedded SCTs ([`chrome_scts_needed`]), and,
    /// when the logs name their operators, SCTs from two distinct ones.
    Chrome,
}

/// Chrome's count of embedded SCTs for a certificate valid `lifetime`
/// (NotAfter − NotBefore): 2 up to 180 days, 3 beyond.
pub fn chrome_scts_needed(lifetime: Duration) -> usize {
    if lifetime <= Duration::from_secs(180 * 86_400) {
        2
    } else {
        3
    }
}

/// The distinct operators [`Policy::Chrome`] wants when operators are named.
pub const CHROME_DISTINCT_OPERATORS: usize = 2;

/// The policy: every required log gave a valid SCT, and the SCTs satisfy
/// `policy` for a certificate valid `lifetime`. On success, the SCTs to embed
/// (in the order the logs are configured; none when `MinScts(0)` and every
/// log failed); otherwise why not.
pub fn select_scts(outcomes: &[LogOutcome], policy: Policy, lifetime: Duration) -> Result<Vec<Sct>, String> {
    let valid: Vec<&LogOutcome> = outcomes.iter().filter(|o| o.result.is_ok()).collect();
    let scts: Vec<Sct> = valid.iter().filter_map(|o| o.result.as_ref().ok().cloned()).collect();
    let failures = || {
        let text: Vec<String> =
            outcomes.iter().filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.log))).collect();
        if outcomes.is_empty() {
            " (no configured log's NotAfter window holds the certificate's)".to_owned()
        } else if text.is_empty() {
            String::new()
        } else {
            format!(" ({})", text.join("; "))
        }
    };
    if let Some(o) = outcomes.iter().find(|o| o.required && o.result.is_err()) {
        return Err(format!("the required log {} gave no valid SCT{}", o.log, failures()));
    }
    match policy {
        Policy::MinScts(min) if scts.len() < min => Err(format!(
            "{} valid SCT(s) from {} log(s), the policy needs {min}{}",
            scts.len(),
            outcomes.len(),
            failures()
        )),
        Policy::MinScts(_) => Ok(scts),
        Policy::Chrome => {
            let needed = chrome_scts_needed(lifetime);
            let days = lifetime.as_secs().div_ceil(86_400);
            if scts.len() < needed {
                return Err(format!(
                    "{} valid SCT(s) from {} log(s), the chrome policy needs {needed} for a certificate valid {days} \
                     day(s){}",
                    scts.len(),
                    outcomes.len(),
                    failures()
                ));
            }
            if outcomes.iter().any(|o| o.operator.is_some()) {
                let mut operators: Vec<&str> = valid.iter().filter_map(|o| o.operator.as_deref()).collect();
                operators.sort_unstable();
                operators.dedup();
                if operators.len() < CHROME_DISTINCT_OPERATORS {
                    return Err(format!(
                        "{} valid SCT(s), from {} log operator(s) ({}), the chrome policy needs SCTs from at least \
                         {CHROME_DISTINCT_OPERATORS} distinct operators{}",
                        scts.len(),
                        operators.len(),
                        operators.join(", "),
                        failures()
                    ));
                }
            }
            Ok(scts)
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LogLabels {
    log: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    log: String,
    reason: String,
}

/// The CT metrics, per log.
struct CtMetrics {
    scts: Family<LogLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    latency: Family<LogLabels, Histogram>,
    refusals: Counter,
}

/// One configured log.
struct CtLog {
    prefix: String,
    add_pre_chain: Uri,
    key: LogKey,
    required: bool,
    operator: Option<String>,
    /// A temporal shard's NotAfter window `[start, end)`, Unix seconds.
    window: Option<(i64, i64)>,
    client: Client<TlsConnector, Full<Bytes>>,
}

impl CtLog {
    /// Whether the log takes a certificate expiring at `not_after` (Unix seconds).
    fn takes(&self, not_after: i64) -> bool {
        self.window.is_none_or(|(start, end)| start <= not_after && not_after < end)
    }
}

/// `[[ct.logs]]`'s NotAfter window: both bounds or neither, start before end.
fn window(start: Option<&str>, end: Option<&str>) -> Result<Option<(i64, i64)>, String> {
    let parse = |name: &str, v: &str| {
        time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
            .map(time::OffsetDateTime::unix_timestamp)
            .map_err(|e| format!("{name} {v:?} is not an RFC 3339 time: {e}"))
    };
    match (start, end) {
        (None, None) => Ok(None),
        (Some(s), Some(e)) => {
            let (s, e) = (parse("not_after_start", s)?, parse("not_after_end", e)?);
            if s < e {
                Ok(Some((s, e)))
            } else {
                Err("not_after_start must come before not_after_end".into())
            }
        }
        _ => Err("not_after_start and not_after_end go together".into()),
    }
}

/// The configured logs and policy, with their clients.
pub struct CtLogs {
    logs: Vec<CtLog>,
    timeout: Duration,
    policy: Policy,
    skew_ms: u64,
    metrics: CtMetrics,
}

impl CtLogs {
    /// The logs of `[ct]`: keys parsed, TLS set up (`ca_file` read). Needs no
    /// runtime, so `--check-config` builds it too.
    pub fn new(settings: &CtSettings) -> Result<CtLogs, String> {
        let mut logs = Vec::with_capacity(settings.logs.len());
        for (i, l) in settings.logs.iter().enumerate() {
            let what = |e: &dyn std::fmt::Display| format!("[[ct.logs]] #{} ({}): {e}", i + 1, l.url);
            let spki = base64::engine::general_purpose::STANDARD
                .decode(l.public_key.trim())
                .map_err(|e| what(&format!("public_key is not base64: {e}")))?;
            let key = LogKey::from_spki_der(&spki).map_err(|e| what(&format!("public_key: {e}")))?;
            if logs.iter().any(|o: &CtLog| o.key.log_id() == key.log_id()) {
                return Err(what(&"the same public_key as an earlier log"));
            }
            let window = window(l.not_after_start.as_deref(), l.not_after_end.as_deref()).map_err(|e| what(&e))?;
            let prefix = l.prefix();
            let add_pre_chain: Uri =
                format!("{prefix}ct/v1/add-pre-chain").parse().map_err(|e: hyper::http::uri::InvalidUri| what(&e))?;
            let tls = if add_pre_chain.scheme_str() == Some("https") {
                Some(Arc::new(tls_connector(l.ca_file.as_deref()).map_err(|e| what(&e))?))
            } else {
                None
            };
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            http.set_nodelay(true);
            let client = Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(60))
                .build(TlsConnector::new(http, tls));
            let (required, operator) = (l.required, l.operator.clone());
            logs.push(CtLog { prefix, add_pre_chain, key, required, operator, window, client });
        }
        let metrics = CtMetrics {
            scts: Family::default(),
            failures: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.005, 2.0, 12))),
            refusals: Counter::default(),
        };
        let policy = match settings.policy {
            CtPolicyName::MinScts => Policy::MinScts(settings.min_scts.unwrap_or(1)),
            CtPolicyName::Chrome => Policy::Chrome,
        };
        Ok(CtLogs {
            logs,
            timeout: Duration::from_millis(settings.timeout_ms),
            policy,
            skew_ms: settings.max_skew_ms,
            metrics,
        })
    }

    /// Registers the metrics with acmed's registry.
    pub fn register(&self, m: &Metrics) {
        let me = &self.metrics;
        m.register("acme_ct_scts", "Valid SCTs obtained, per CT log", me.scts.clone());
        m.register(
            "acme_ct_failures",
            "CT log submissions without a valid SCT, per log and reason",
            me.failures.clone(),
        );
        m.register("acme_ct_submission_seconds", "CT log submission time, per log", me.latency.clone());
        m.register(
            "acme_ct_policy_refusals",
            "Finalizations refused by the CT policy (the precertificate was signed)",
            me.refusals.clone(),
        );
    }

    /// The prefixes of the logs that take a certificate expiring at
    /// `not_after` (Unix seconds): those without a window, and the temporal
    /// shards whose window holds it.
    pub fn logs_for(&self, not_after: i64) -> Vec<&str> {
        self.logs.iter().filter(|l| l.takes(not_after)).map(|l| l.prefix.as_str()).collect()
    }

    /// Submits `chain` (`[precertificate, issuing CA, ...]`) for a certificate
    /// expiring at `not_after` (Unix seconds) to every log that takes it
    /// ([`CtLogs::logs_for`]) at once and answers each one's verified SCT for
    /// `entry` or why there is none, within the timeout. An SCT's timestamp is
    /// checked against `clock` ([`check_sct_timestamp`]).
    pub async fn submit(
        &self,
        chain: &[Vec<u8>],
        entry: &SignedEntry,
        not_after: i64,
        clock: &Clock,
    ) -> Vec<LogOutcome> {
        let body = Bytes::from(add_chain_body(chain));
        let millis = || u64::try_from(clock.unix_millis()).unwrap_or(0);
        let each = self.logs.iter().filter(|log| log.takes(not_after)).map(|log| {
            let body = body.clone();
            async move {
                let started = Instant::now();
                let sent = millis();
                let result = match tokio::time::timeout(self.timeout, submit_one(log, body, entry)).await {
                    Ok(Ok(sct)) => check_sct_timestamp(sct.timestamp, sent, millis(), self.skew_ms)
                        .map(|()| sct)
                        .map_err(Failure::Timestamp),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(Failure::Timeout(self.timeout)),
                };
                let labels = LogLabels { log: log.prefix.clone() };
                self.metrics.latency.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
                match &result {
                    Ok(_) => {
                        self.metrics.scts.get_or_create(&labels).inc();
                    }
                    Err(e) => {
                        tracing::warn!(log = %log.prefix, error = %e, "CT log submission failed");
                        let labels = FailureLabels { log: log.prefix.clone(), reason: e.reason().to_owned() };
                        self.metrics.failures.get_or_create(&labels).inc();
                    }
                }
                LogOutcome { log: log.prefix.clone(), operator: log.operator.clone(), required: log.required, result }
            }
        });
        futures::future::join_all(each).await
    }

    /// [`select_scts`] with the configured policy, for a certificate valid
    /// `lifetime`, counting refusals.
    pub fn select(&self, outcomes: &[LogOutcome], lifetime: Duration) -> Result<Vec<Sct>, String> {
        let selected = select_scts(outcomes, self.policy, lifetime);
        if selected.is_err() {
            self.metrics.refusals.inc();
        }
        selected
    }
}

async fn submit_one(log: &CtLog, body: Bytes, entry: &SignedEntry) -> Result<Sct, Failure> {
    let req = Request::post(log.add_pre_chain.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, concat!("signet-acmed/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(body))
        .map_err(|e| Failure::Connect(e.to_string()))?;
    let resp = log.client.request(req).await.map_err(|e| {
        // The source says why (refused, TLS, ...); hyper-util's own text does not.
        let detail = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
        Failure::Connect(detail)
    })?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| Failure::Response(format!("reading the answer: {e}")))?
        .to_bytes();
    if status != StatusCode::OK {
        let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
        return Err(Failure::Http(status.as_u16(), text.trim().to_owned()));
    }
    let answer: AddChainResponse = serde_json::from_slice(&body).map_err(|e| Failure::Response(e.to_string()))?;
    let sct = answer.to_sct().map_err(|e| Failure::Response(e.to_string()))?;
    log.key.verify_sct(&sct, entry).map_err(|e| Failure::Signature(e.to_string()))?;
    Ok(sct)
}

/// TLS to a log: verified against `ca_file`, or else the system's roots.
fn tls_connector(ca_file: Option<&std::path::Path>) -> Result<SslConnector, String> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
    match ca_file {
        Some(path) => b.set_ca_file(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?,
        None => {
            b.set_default_verify_paths().map_err(|e| e.to_string())?;
            if let Some(path) = SYSTEM_ROOTS.iter().find(|p| std::path::Path::new(p).exists()) {
                b.set_ca_file(path).map_err(|e| format!("{path}: {e}"))?;
            }
        }
    }
    b.set_alpn_protos(b"\x08http/1.1").map_err(|e| e.to_string())?;
    Ok(b.build())
}

#[cfg(test)]
#[path = "ct_tests.rs"]
mod tests;
