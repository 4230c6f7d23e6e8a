//! The daemon's Prometheus metrics registry, served as OpenMetrics text on `/metrics`.
//!
//! Every metric carries the constant label `daemon="<name>"`. Register metrics from
//! [`prometheus_client`] (re-exported here so every daemon uses the same version):
//!
//! ```
//! use signet_runtime::metrics::{prometheus_client::metrics::counter::Counter, Metrics};
//! let metrics = Metrics::new("signd");
//! let signed: Counter = Counter::default();
//! metrics.register("signatures", "Signatures made", signed.clone());
//! signed.inc();
//! assert!(metrics.encode().contains("signatures_total{daemon=\"signd\"} 1"));
//! ```

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

pub use prometheus_client;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry, Unit};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A shared, cloneable handle to the daemon's metrics registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Mutex<Registry>,
    /// The HTTP scaffold's own metrics, registered on first use so serving twice
    /// does not register them twice.
    http: OnceLock<HttpMetrics>,
}

impl Metrics {
    /// An empty registry whose metrics all carry the label `daemon="<daemon>"`.
    pub fn new(daemon: &str) -> Metrics {
        let label = (Cow::Borrowed("daemon"), Cow::Owned(daemon.to_owned()));
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(Registry::with_labels(std::iter::once(label))),
                http: OnceLock::new(),
            }),
        }
    }

    /// Registers `metric` under `name` (counters get the `_total` suffix automatically).
    pub fn register(&self, name: impl Into<String>, help: impl Into<String>, metric: impl Metric) {
        self.registry().register(name, help, metric);
    }

    /// Registers `metric` with a unit, which is appended to its name (e.g. `_seconds`).
    pub fn register_with_unit(
        &self,
        name: impl Into<String>,
        help: impl Into<String>,
        unit: Unit,
        metric: impl Metric,
    ) {
        self.registry().register_with_unit(name, help, unit, metric);
    }

    /// Runs `f` with the registry locked, for anything the passthroughs do not cover
    /// (sub-registries, collectors).
    pub fn with_registry<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        f(&mut self.registry())
    }

    /// The registry in the OpenMetrics text format (see [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error could only come from a metric's own
        // encoder, and then the partial text is still the best answer we have.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry()) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        out
    }

    /// The HTTP scaffold's own metrics, registered on first use.
    pub(crate) fn http(&self) -> &HttpMetrics {
        self.inner.http.get_or_init(|| HttpMetrics::register(self))
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock cannot leave the registry half-updated in a way that
        // matters for encoding, so keep serving metrics.
        self.inner.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The HTTP scaffold's metrics (`http_requests`, `http_request_duration`,
/// `http_connections_open`, `http_connections_closed{reason}`), registered once per
/// [`Metrics`]; `crate::http` observes every answer and every connection.
#[derive(Clone, Debug)]
pub(crate) struct HttpMetrics {
    requests: Family<CodeLabel, Counter>,
    latency: Histogram,
    open: Gauge,
    closed: Family<ReasonLabel, Counter>,
}

impl HttpMetrics {
    fn register(metrics: &Metrics) -> HttpMetrics {
        let requests = Family::<CodeLabel, Counter>::default();
        // 0.5 ms to ~16 s.
        let latency = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        metrics.register("http_requests", "HTTP requests answered, by status code", requests.clone());
        metrics.register_with_unit(
            "http_request_duration",
            "Time to produce an HTTP response",
            Unit::Seconds,
            latency.clone(),
        );
        let open = Gauge::default();
        metrics.register("http_connections_open", "HTTP connections open, TLS handshakes included", open.clone());
        let closed = Family::<ReasonLabel, Counter>::default();
        metrics.register(
            "http_connections_closed",
            "HTTP connections the server closed for a limit (head_timeout, idle_timeout, body_too_slow, \
             tls_handshake_timeout, shed: the longest idle closed at the bound, refused: a new one closed there)",
            closed.clone(),
        );
        HttpMetrics { requests, latency, open, closed }
    }

    /// The number of connections open is now `n`.
    pub(crate) fn connections_open(&self, n: usize) {
        self.open.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The server closed a connection for `reason` (a limit of `crate::http::HttpLimits`).
    pub(crate) fn connection_closed(&self, reason: &'static str) {
        self.closed.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts one answer with HTTP status `code`, produced in `elapsed`.
    pub(crate) fn observe(&self, code: u16, elapsed: Duration) {
        self.requests.get_or_create(&CodeLabel { code }).inc();
        self.latency.observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;

    #[test]
    fn encodes_registered_metrics_with_daemon_label() {
        let m = Metrics::new("ocspd");
        let c: Counter = Counter::default();
        let g: Gauge = Gauge::default();
        m.register("responses", "OCSP responses", c.clone());
        m.register_with_unit("age", "Age", Unit::Seconds, g.clone());
        c.inc_by(3);
        g.set(42);
        let clone = m.clone();
        let text = clone.encode();
        assert!(text.contains("# HELP responses OCSP responses."), "{text}");
        assert!(text.contains("# TYPE responses counter"), "{text}");
        assert!(text.contains("responses_total{daemon=\"ocspd\"} 3"), "{text}");
        assert!(text.contains("age_seconds{daemon=\"ocspd\"} 42"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn with_registry_gives_access() {
        let m = Metrics::new("x");
        m.with_registry(|r| r.sub_registry_with_prefix("sub").register("n", "N", Counter::<u64>::default()));
        assert!(m.encode().contains("sub_n_total{daemon=\"x\"} 0"));
    }
}
