//! probed's metrics, in blackbox_exporter's names with a `check` label: `probe_success`,
//! `probe_duration_seconds`, the kinds' own gauges ([`Gauge`]), and `probe_state` (1 up,
//! 0 down, -1 not known yet after flap suppression); and the scheduler's own
//! `probed_schedule_lag_seconds`, how late runs start.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge as PGauge;
use prometheus_client::metrics::histogram::Histogram;
use signet_runtime::metrics::Metrics;

use crate::checks::{Gauge, Outcome};
use crate::history::State;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabel {
    check: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabel {
    check: String,
    result: &'static str,
}

type FloatGauges = Family<CheckLabel, PGauge<f64, AtomicU64>>;

/// The probe metrics, registered once.
#[derive(Clone, Debug)]
pub struct ProbeMetrics {
    success: Family<CheckLabel, PGauge>,
    state: Family<CheckLabel, PGauge>,
    duration: FloatGauges,
    runs: Family<RunLabel, Counter>,
    gauges: HashMap<Gauge, FloatGauges>,
    lag: Histogram,
}

/// The lag histogram's buckets, in seconds: fine below the 100 ms a schedule may slip.
const LAG_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0];

impl ProbeMetrics {
    /// Registers the metrics in `metrics`.
    pub fn register(metrics: &Metrics) -> ProbeMetrics {
        let m = ProbeMetrics {
            success: Family::default(),
            state: Family::default(),
            duration: FloatGauges::default(),
            runs: Family::default(),
            gauges: Gauge::ALL.iter().map(|g| (*g, FloatGauges::default())).collect(),
            lag: Histogram::new(LAG_BUCKETS),
        };
        metrics.register(
            "probed_schedule_lag_seconds",
            "How much later than planned (interval plus jitter) a check's run started",
            m.lag.clone(),
        );
        metrics.register("probe_success", "Whether the check's last run passed", m.success.clone());
        metrics.register("probe_duration_seconds", "How long the check's last run took", m.duration.clone());
        metrics.register("probe_state", "The check's state: 1 up, 0 down, -1 unknown", m.state.clone());
        metrics.register("probe_runs", "Runs of the check, by result", m.runs.clone());
        for g in Gauge::ALL {
            let (name, help) = g.metric();
            if let Some(family) = m.gauges.get(&g) {
                metrics.register(name, help, family.clone());
            }
        }
        m
    }

    /// Records a run of `check` and the state it left the check in.
    pub fn observe(&self, check: &str, outcome: &Outcome, state: State) {
        let label = CheckLabel { check: check.to_owned() };
        self.success.get_or_create(&label).set(i64::from(outcome.ok));
        self.duration.get_or_create(&label).set(outcome.duration.as_secs_f64());
        self.set_state(check, state);
        let result = if outcome.ok { "success" } else { "failure" };
        self.runs.get_or_create(&RunLabel { check: check.to_owned(), result }).inc();
        for (g, v) in &outcome.gauges {
            if let Some(family) = self.gauges.get(g) {
                family.get_or_create(&label).set(*v);
            }
        }
    }

    /// Records that a run started `lag` after its planned time.
    pub fn schedule_lag(&self, lag: std::time::Duration) {
        self.lag.observe(lag.as_secs_f64());
    }

    /// Sets `probe_state` of `check`.
    pub fn set_state(&self, check: &str, state: State) {
        let v = match state {
            State::Up => 1,
            State::Down => 0,
            State::Unknown => -1,
        };
        self.state.get_or_create(&CheckLabel { check: check.to_owned() }).set(v);
    }

    /// Drops every series of `check` (removed from the config).
    pub fn forget(&self, check: &str) {
        let label = CheckLabel { check: check.to_owned() };
        self.success.remove(&label);
        self.state.remove(&label);
        self.duration.remove(&label);
        for result in ["success", "failure"] {
            self.runs.remove(&RunLabel { check: check.to_owned(), result });
        }
        for family in self.gauges.values() {
            family.remove(&label);
        }
    }
}
