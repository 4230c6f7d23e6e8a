//! ctlogd's own metrics, per log (label `log`): tree size, backlog, the age
//! of the published tree head, and the sequencer's counters. Read from each
//! sequencer once a second; a log added while ctlogd
//! serves is in them from the next second.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use signet_runtime::metrics::Metrics;
use tokio_util::sync::CancellationToken;

use crate::log::Log;
use crate::shards::LogSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LogLabel {
    log: String,
}

type Gauges = Family<LogLabel, Gauge>;
type Counters = Family<LogLabel, Counter>;

/// The per-log metrics, registered once.
#[derive(Clone, Debug)]
pub struct LogMetrics {
    tree_size: Gauges,
    backlog: Gauges,
    head_age_ms: Gauges,
    sequenced: Counters,
    duplicates: Counters,
    pushbacks: Counters,
    batches: Counters,
    failed_batches: Counters,
    integrate_micros: Counters,
    partial_tiles_deleted: Counters,
    verified_chains: Gauges,
    verified_chain_hits: Counters,
}

impl LogMetrics {
    /// Registers the metrics in `metrics`.
    pub fn register(metrics: &Metrics) -> Self {
        let m = Self {
            tree_size: Gauges::default(),
            backlog: Gauges::default(),
            head_age_ms: Gauges::default(),
            sequenced: Counters::default(),
            duplicates: Counters::default(),
            pushbacks: Counters::default(),
            batches: Counters::default(),
            failed_batches: Counters::default(),
            integrate_micros: Counters::default(),
            partial_tiles_deleted: Counters::default(),
            verified_chains: Gauges::default(),
            verified_chain_hits: Counters::default(),
        };
        metrics.register("ct_tree_size", "Entries in the published tree", m.tree_size.clone());
        metrics.register("ct_backlog", "Submissions waiting for a batch", m.backlog.clone());
        metrics.register("ct_tree_head_age_milliseconds", "Age of the published tree head", m.head_age_ms.clone());
        metrics.register("ct_sequenced", "Entries sequenced (new, not duplicates)", m.sequenced.clone());
        metrics.register("ct_duplicates", "Submissions answered with an earlier SCT", m.duplicates.clone());
        metrics.register("ct_pushbacks", "Submissions refused because the backlog was full", m.pushbacks.clone());
        metrics.register("ct_batches", "Batches committed", m.batches.clone());
        metrics.register(
            "ct_failed_batches",
            "Batches that failed (nothing of them committed)",
            m.failed_batches.clone(),
        );
        metrics.register(
            "ct_integrate_microseconds",
            "Time from a batch closing to its SCTs being returned, summed over batches",
            m.integrate_micros.clone(),
        );
        metrics.register(
            "ct_partial_tiles_deleted",
            "Partial tiles and data tiles deleted once a published checkpoint covered their full tile",
            m.partial_tiles_deleted.clone(),
        );
        metrics.register(
            "ct_verified_chains",
            "Chains above a leaf verified once and remembered (per root set)",
            m.verified_chains.clone(),
        );
        metrics.register(
            "ct_verified_chain_hits",
            "Submissions whose chain above the leaf was verified before: only the leaf was checked",
            m.verified_chain_hits.clone(),
        );
        m
    }

    /// Copies each log's state into the metrics every `period` until `stop`.
    pub async fn update_every(self, logs: LogSet, period: Duration, stop: CancellationToken) {
        let mut seen: HashMap<String, [u64; 8]> = HashMap::new();
        let mut tick = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            // Logs added while ctlogd serves join at the next tick.
            for s in logs.snapshot().iter() {
                self.update(&s.name, &s.log, seen.entry(s.name.clone()).or_default());
            }
        }
    }

    fn update(&self, name: &str, log: &Log, seen: &mut [u64; 8]) {
        let label = LogLabel { log: name.to_owned() };
        let head = log.head();
        self.tree_size.get_or_create(&label).set(i64::try_from(head.head.tree_size).unwrap_or(i64::MAX));
        let seq = log.sequencer();
        self.backlog.get_or_create(&label).set(i64::try_from(seq.backlog()).unwrap_or(i64::MAX));
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let age = now_ms.saturating_sub(u128::from(head.head.timestamp));
        self.head_age_ms.get_or_create(&label).set(i64::try_from(age).unwrap_or(i64::MAX));
        let stats = seq.stats();
        let now: [&AtomicU64; 7] = [
            &stats.sequenced,
            &stats.duplicates,
            &stats.pushbacks,
            &stats.batches,
            &stats.failed_batches,
            &stats.integrate_micros,
            &stats.partial_tiles_deleted,
        ];
        let counters = [
            &self.sequenced,
            &self.duplicates,
            &self.pushbacks,
            &self.batches,
            &self.failed_batches,
            &self.integrate_micros,
            &self.partial_tiles_deleted,
        ];
        for ((value, last), counter) in now.iter().zip(seen.iter_mut()).zip(counters) {
            let v = value.load(Ordering::Relaxed);
            counter.get_or_create(&label).inc_by(v.saturating_sub(*last));
            *last = v;
        }
        let roots = log.roots();
        self.verified_chains.get_or_create(&label).set(i64::try_from(roots.verified_chains()).unwrap_or(i64::MAX));
        // A reload starts a new root set whose count starts at 0 again.
        let hits = roots.verified_chain_hits();
        let last = &mut seen[7];
        self.verified_chain_hits.get_or_create(&label).inc_by(if hits >= *last { hits - *last } else { hits });
        *last = hits;
    }
}
