//! What a run measured, summarized: throughput, latency percentiles, phase
//! means, errors by category and heap allocation; as text or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::error::Error;
use crate::percentile;

/// The timed steps of one issuance, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The newOrder request.
    NewOrder,
    /// Fetching the order's authorizations.
    Authz,
    /// Publishing the response, POSTing the challenge and polling the
    /// authorization until it is valid.
    Challenge,
    /// Generating the certificate key and CSR, the finalize request, and
    /// polling the order until it is valid.
    Finalize,
    /// Downloading the certificate chain.
    Download,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 5] = [Phase::NewOrder, Phase::Authz, Phase::Challenge, Phase::Finalize, Phase::Download];

    /// The phase's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::NewOrder => "new_order",
            Phase::Authz => "authz",
            Phase::Challenge => "challenge",
            Phase::Finalize => "finalize",
            Phase::Download => "download",
        }
    }
}

/// The timing of one successful issuance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// From sending newOrder to the end of the certificate download.
    pub total: Duration,
    /// Each phase's time, indexed like [`Phase::ALL`].
    pub phases: [Duration; 5],
}

/// Issuances of one stage (warmup or measured): samples and errors.
#[derive(Debug, Default)]
pub struct Tally {
    /// One sample a successful issuance.
    pub samples: Vec<Sample>,
    /// Failed issuances by [`Error::category`].
    pub errors: BTreeMap<String, ErrorCount>,
}

/// How often one kind of error happened, and the first one's text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCount {
    /// How many.
    pub count: u64,
    /// The first one's message.
    pub example: String,
}

impl Tally {
    /// Counts a failed issuance.
    pub fn error(&mut self, error: &Error) {
        let entry = self.errors.entry(error.category()).or_default();
        if entry.count == 0 {
            entry.example = error.to_string();
        }
        entry.count += 1;
    }

    /// Failed issuances.
    pub fn error_count(&self) -> u64 {
        self.errors.values().map(|e| e.count).sum()
    }

    /// Adds another task's tally.
    pub fn merge(&mut self, other: Tally) {
        self.samples.extend(other.samples);
        for (category, e) in other.errors {
            let entry = self.errors.entry(category).or_default();
            if entry.count == 0 {
                entry.example = e.example;
            }
            entry.count += e.count;
        }
    }
}

/// The heap allocator's counters at one moment (see the binary's counting allocator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AllocSnapshot {
    /// Bytes requested from the allocator so far (freed ones included).
    pub allocated_bytes: u64,
    /// Allocation calls so far (reallocations count as one).
    pub allocations: u64,
    /// Bytes allocated and not yet freed.
    pub live_bytes: u64,
    /// The most live bytes since the last [`AllocProbe::reset_peak`].
    pub peak_live_bytes: u64,
}

/// Reads the process's allocation counters.
pub trait AllocProbe: Sync {
    /// The counters now.
    fn snapshot(&self) -> AllocSnapshot;
    /// Starts a new peak from the current live bytes.
    fn reset_peak(&self);
}

/// A probe for builds without a counting allocator: all zeros.
pub struct NoProbe;

impl AllocProbe for NoProbe {
    fn snapshot(&self) -> AllocSnapshot {
        AllocSnapshot::default()
    }
    fn reset_peak(&self) {}
}

/// Latency figures in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyMs {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// The measured window, summarized.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Successful issuances in the window.
    pub issuances: u64,
    /// Failed issuances in the window.
    pub failed: u64,
    /// The window's length: from the first measured newOrder to the end of the last issuance.
    pub window_secs: f64,
    /// Successful issuances per second of the window.
    pub throughput_per_sec: f64,
    /// Per-issuance latency (newOrder through download).
    pub latency_ms: LatencyMs,
    /// Mean time of each phase, by [`Phase::name`].
    pub phase_mean_ms: BTreeMap<&'static str, f64>,
}

impl Summary {
    /// Summarizes the measured tally over a window of `window`.
    pub fn of(tally: &Tally, window: Duration) -> Summary {
        let n = tally.samples.len();
        let mut totals: Vec<Duration> = tally.samples.iter().map(|s| s.total).collect();
        let ms = |d: Duration| round3(d.as_secs_f64() * 1e3);
        let mean = |sum: Duration| if n == 0 { 0.0 } else { round3(sum.as_secs_f64() * 1e3 / n as f64) };
        let latency_ms = LatencyMs {
            mean: mean(totals.iter().sum()),
            p50: ms(percentile(&mut totals, 50.0)),
            p95: ms(percentile(&mut totals, 95.0)),
            p99: ms(percentile(&mut totals, 99.0)),
            max: ms(percentile(&mut totals, 100.0)),
        };
        let phase_mean_ms = Phase::ALL
            .iter()
            .enumerate()
            .map(|(i, phase)| (phase.name(), mean(tally.samples.iter().map(|s| s.phases[i]).sum())))
            .collect();
        let secs = window.as_secs_f64();
        Summary {
            issuances: n as u64,
            failed: tally.error_count(),
            window_secs: round3(secs),
            throughput_per_sec: if secs > 0.0 { round3(n as f64 / secs) } else { 0.0 },
            latency_ms,
            phase_mean_ms,
        }
    }
}

/// Heap allocation over the measured window (this process: the clients and
/// the challenge responders; the ACME server runs elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Memory {
    /// Live bytes when the window opened (accounts made, warmup done).
    pub start_live_bytes: u64,
    /// Live bytes when the window closed.
    pub end_live_bytes: u64,
    /// The most live bytes during the window.
    pub peak_live_bytes: u64,
    /// Bytes requested from the allocator during the window (freed ones included).
    pub issuance_alloc_bytes: u64,
    /// Allocation calls during the window.
    pub issuance_alloc_count: u64,
    /// `issuance_alloc_bytes` per successful issuance.
    pub per_issuance_alloc_bytes: u64,
    /// `issuance_alloc_count` per successful issuance.
    pub per_issuance_alloc_count: u64,
}

impl Memory {
    /// The allocation between two snapshots, spread over `issuances`.
    pub fn between(start: AllocSnapshot, end: AllocSnapshot, issuances: u64) -> Memory {
        let bytes = end.allocated_bytes.saturating_sub(start.allocated_bytes);
        let count = end.allocations.saturating_sub(start.allocations);
        let per = |x: u64| x.checked_div(issuances).unwrap_or(0);
        Memory {
            start_live_bytes: start.live_bytes,
            end_live_bytes: end.live_bytes,
            peak_live_bytes: end.peak_live_bytes,
            issuance_alloc_bytes: bytes,
            issuance_alloc_count: count,
            per_issuance_alloc_bytes: per(bytes),
            per_issuance_alloc_count: per(count),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `bytes` in KiB (one decimal) or MiB, for text.
pub fn human_bytes(bytes: u64) -> String {
    if bytes >= 10 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

/// The summary's lines of the text report.
pub fn summary_text(summary: &Summary, memory: Option<&Memory>) -> String {
    let mut out = String::new();
    let l = &summary.latency_ms;
    let _ = writeln!(
        out,
        "issuances   {} in {:.3} s: {:.1} issuances/s ({} failed)",
        summary.issuances, summary.window_secs, summary.throughput_per_sec, summary.failed
    );
    let _ = writeln!(
        out,
        "latency     mean {:.1} ms, p50 {:.1}, p95 {:.1}, p99 {:.1}, max {:.1}",
        l.mean, l.p50, l.p95, l.p99, l.max
    );
    let phases: Vec<String> = Phase::ALL
        .iter()
        .map(|p| format!("{} {:.1}", p.name(), summary.phase_mean_ms.get(p.name()).copied().unwrap_or(0.0)))
        .collect();
    let _ = writeln!(out, "phases      mean ms: {}", phases.join(", "));
    if let Some(m) = memory {
        let _ = writeln!(
            out,
            "heap        {} and {} allocations per issuance; live {} -> {}, peak {}",
            human_bytes(m.per_issuance_alloc_bytes),
            m.per_issuance_alloc_count,
            human_bytes(m.start_live_bytes),
            human_bytes(m.end_live_bytes),
            human_bytes(m.peak_live_bytes)
        );
    }
    out
}

/// The error lines of the text report: one a category, with an example.
pub fn errors_text(title: &str, errors: &BTreeMap<String, ErrorCount>) -> String {
    let mut out = String::new();
    let total: u64 = errors.values().map(|e| e.count).sum();
    let _ = writeln!(out, "{title:<11} {total}");
    for (category, e) in errors {
        let _ = writeln!(out, "  {:>7}  {category:<17}  e.g. {}", e.count, e.example);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use signet_acme::{Problem, ProblemType};

    use super::*;

    fn sample(ms: u64) -> Sample {
        let phase = Duration::from_millis(ms) / 5;
        Sample { total: Duration::from_millis(ms), phases: [phase; 5] }
    }

    #[test]
    fn summary_of_samples() {
        let mut tally = Tally::default();
        tally.samples.extend((1..=100).map(sample));
        let s = Summary::of(&tally, Duration::from_secs(2));
        assert_eq!(s.issuances, 100);
        assert_eq!(s.failed, 0);
        assert_eq!(s.throughput_per_sec, 50.0);
        assert_eq!(s.latency_ms, LatencyMs { mean: 50.5, p50: 50.0, p95: 95.0, p99: 99.0, max: 100.0 });
        assert_eq!(s.phase_mean_ms["finalize"], 10.1);
        assert_eq!(s.phase_mean_ms.len(), 5);
    }

    #[test]
    fn empty_summary_is_zero_not_nan() {
        let s = Summary::of(&Tally::default(), Duration::ZERO);
        assert_eq!(s.throughput_per_sec, 0.0);
        assert_eq!(s.latency_ms, LatencyMs::default());
        assert!(serde_json::to_string(&s).unwrap().contains("\"issuances\":0"));
    }

    #[test]
    fn errors_counted_by_category_with_the_first_example() {
        let mut a = Tally::default();
        let nonce = |d: &str| Error::Problem {
            url: "u".into(),
            status: 400,
            problem: Box::new(Problem::new(ProblemType::BadNonce, d)),
        };
        a.error(&nonce("first"));
        a.error(&nonce("second"));
        let mut b = Tally::default();
        b.error(&Error::Timeout("t".into()));
        b.error(&nonce("third"));
        b.samples.push(sample(5));
        a.merge(b);
        assert_eq!(a.error_count(), 4);
        assert_eq!(a.errors["badNonce"].count, 3);
        assert!(a.errors["badNonce"].example.contains("first"));
        assert_eq!(a.errors["timeout"].count, 1);
        assert_eq!(a.samples.len(), 1);
        let text = errors_text("errors", &a.errors);
        assert!(text.starts_with("errors      4\n"), "{text}");
        assert!(text.contains("      3  badNonce           e.g. u: HTTP 400"), "{text}");
    }

    #[test]
    fn memory_per_issuance() {
        let start = AllocSnapshot { allocated_bytes: 1000, allocations: 10, live_bytes: 500, peak_live_bytes: 0 };
        let end = AllocSnapshot { allocated_bytes: 201_000, allocations: 2010, live_bytes: 700, peak_live_bytes: 9000 };
        let m = Memory::between(start, end, 100);
        assert_eq!((m.issuance_alloc_bytes, m.per_issuance_alloc_bytes), (200_000, 2000));
        assert_eq!((m.issuance_alloc_count, m.per_issuance_alloc_count), (2000, 20));
        assert_eq!((m.start_live_bytes, m.end_live_bytes, m.peak_live_bytes), (500, 700, 9000));
        assert_eq!(Memory::between(start, end, 0).per_issuance_alloc_bytes, 0);
        assert_eq!(human_bytes(150 * 1024), "150.0 KiB");
        assert_eq!(human_bytes(20 << 20), "20.0 MiB");
    }

    #[test]
    fn text_summary_lines() {
        let mut tally = Tally::default();
        tally.samples.extend((1..=10).map(sample));
        let s = Summary::of(&tally, Duration::from_secs(1));
        let text = summary_text(&s, Some(&Memory::default()));
        assert!(text.contains("issuances   10 in 1.000 s: 10.0 issuances/s (0 failed)"), "{text}");
        assert!(
            text.contains("phases      mean ms: new_order 1.1, authz 1.1, challenge 1.1, finalize 1.1, download 1.1"),
            "{text}"
        );
        assert!(text.contains("heap        0.0 KiB"), "{text}");
    }
}
