//! The scheduler: one tokio task per check on the daemon's runtime (no thread per check), each
//! running its check every `interval` (plus up to `jitter`), with `timeout` and `retries`,
//! then applying flap suppression (`down_after` failures to go down, `up_after` successes to
//! come up), committing the result, updating metrics and sending alerts.
//!
//! A reload ([`Scheduler::apply`]) keeps the state and history of every check whose name
//! survives; a check whose settings changed is restarted with its state.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand_core::{OsRng, RngCore};
use tokio_util::sync::CancellationToken;

use crate::alerts::{Alerts, Event, EventKind};
use crate::checks::{Gauge, Outcome, Probe};
use crate::config::{CheckConfig, Config, Schedule};
use crate::history::{History, RawResult, State, StoredState};
use crate::metrics::ProbeMetrics;

/// Results kept in memory per check for the status page's sparkline.
pub const RECENT: usize = 60;

/// A check as it runs: its config, state and recent results.
#[derive(Debug)]
pub struct Check {
    /// Its name.
    pub name: String,
    /// Its id in the history.
    pub id: u64,
    /// Its settings.
    pub config: CheckConfig,
    /// Its schedule (defaults applied).
    pub schedule: Schedule,
    /// What changes run by run (shared with the check's successor after a reload).
    pub status: Arc<Mutex<Status>>,
    /// Uptime over 24 h, 7 d and 30 d, and when it was computed (unix ms).
    uptime: Mutex<Option<(u64, [Option<f64>; 3])>>,
    cancel: CancellationToken,
    /// Set when a reload removed the check (rather than restarting it with new settings).
    removed: AtomicBool,
}

/// The most a check's first run waits for its phase (see `run_check`).
const FIRST_RUN_SPREAD: Duration = Duration::from_secs(10);

/// Runs are planned on a tick of this length: the checks due within one tick start together,
/// so the runtime wakes once for them, and their answers tend to come back together, instead
/// of once per check (with 10,000 checks that is the difference between about 100 and 1,000
/// wake-ups a second, each dearer than a check's own work). Well within any check's jitter.
const TICK: Duration = Duration::from_millis(10);

/// How long a computed uptime is shown before it is computed again from the aggregates.
const UPTIME_TTL_MS: u64 = 60_000;

/// A check's state between runs.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// What is also stored.
    pub stored: StoredState,
    /// Recent runs: (unix ms, passed, duration µs), oldest first.
    pub recent: VecDeque<(u64, bool, u64)>,
    /// The last run's gauges.
    pub gauges: Vec<(Gauge, f64)>,
}

impl Check {
    /// Uptime in percent over 24 hours, 7 days and 30 days (None: no runs), from `history`'s
    /// aggregates, computed at most once a minute (a page of thousands of checks stays cheap).
    pub fn uptime(&self, history: &History) -> [Option<f64>; 3] {
        let now = unix_ms();
        let mut cached = self.uptime.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, up)) = *cached {
            if now.saturating_sub(at) < UPTIME_TTL_MS {
                return up;
            }
        }
        const DAY_MS: u64 = 86_400_000;
        let up = [DAY_MS, 7 * DAY_MS, 30 * DAY_MS].map(|w| history.uptime(self.id, now, w).ok().flatten());
        *cached = Some((now, up));
        up
    }

    /// The status, locked.
    pub fn status(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every check, and what their runs feed.
#[derive(Debug)]
pub struct Scheduler {
    checks: RwLock<BTreeMap<String, Arc<Check>>>,
    history: Arc<History>,
    metrics: ProbeMetrics,
    alerts: RwLock<Arc<Alerts>>,
    shutdown: CancellationToken,
    /// Where the [`TICK`]s are counted from.
    origin: Instant,
}

impl Scheduler {
    /// A scheduler with no checks yet.
    pub fn new(history: Arc<History>, metrics: ProbeMetrics, shutdown: CancellationToken) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            checks: RwLock::new(BTreeMap::new()),
            history,
            metrics,
            alerts: RwLock::new(Arc::new(Alerts::none())),
            shutdown,
            origin: Instant::now(),
        })
    }

    /// The history store.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The checks, by name.
    pub fn checks(&self) -> Vec<Arc<Check>> {
        self.checks.read().unwrap_or_else(PoisonError::into_inner).values().cloned().collect()
    }

    /// One check.
    pub fn check(&self, name: &str) -> Option<Arc<Check>> {
        self.checks.read().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Applies `config`'s checks and webhooks: all of them, or (on an error) none. Checks
    /// whose name survives keep their state; unchanged ones keep running undisturbed.
    pub fn apply(self: &Arc<Self>, config: &Config) -> Result<(), String> {
        // Everything that can fail first.
        let alerts = Arc::new(Alerts::start(&config.webhooks)?);
        let mut prepared = Vec::new();
        {
            let current = self.checks.read().unwrap_or_else(PoisonError::into_inner);
            for (name, c) in &config.checks {
                let schedule = c.schedule(&config.defaults);
                if let Some(old) = current.get(name) {
                    if format!("{:?}{:?}", old.config, old.schedule) == format!("{c:?}{schedule:?}") {
                        continue;
                    }
                }
                let probe = Probe::new(c).map_err(|e| format!("check `{name}`: {e}"))?;
                let id = self.history.id(name).map_err(|e| format!("check `{name}`: store: {e}"))?;
                prepared.push((name.clone(), c.clone(), schedule, probe, id));
            }
        }
        *self.alerts.write().unwrap_or_else(PoisonError::into_inner) = alerts;
        let mut checks = self.checks.write().unwrap_or_else(PoisonError::into_inner);
        let gone: Vec<String> = checks.keys().filter(|n| !config.checks.contains_key(*n)).cloned().collect();
        for name in gone {
            if let Some(old) = checks.remove(&name) {
                old.removed.store(true, Ordering::Release);
                old.cancel.cancel();
                self.metrics.forget(&name);
                tracing::info!(check = %name, "check removed");
            }
        }
        for (name, config, schedule, probe, id) in prepared {
            let status = match checks.remove(&name) {
                Some(old) => {
                    old.cancel.cancel();
                    tracing::info!(check = %name, "check changed; restarted with its state");
                    old.status.clone()
                }
                None => Arc::new(Mutex::new(self.load_status(&name, id))),
            };
            let check = Arc::new(Check {
                name: name.clone(),
                id,
                config,
                schedule,
                status,
                uptime: Mutex::new(None),
                cancel: self.shutdown.child_token(),
                removed: AtomicBool::new(false),
            });
            self.metrics.set_state(&name, check.status().stored.state);
            tokio::spawn(self.clone().run_check(check.clone(), probe));
            checks.insert(name, check);
        }
        Ok(())
    }

    /// A check's status as the store has it (after a restart).
    fn load_status(&self, name: &str, id: u64) -> Status {
        let stored = self.history.state(name).ok().flatten().unwrap_or_default();
        let recent = self
            .history
            .recent(id, RECENT)
            .unwrap_or_default()
            .into_iter()
            .map(|(at, r)| (at, r.ok, r.duration_us))
            .collect();
        Status { stored, recent, gauges: Vec::new() }
    }

    async fn run_check(self: Arc<Self>, check: Arc<Check>, probe: Probe) {
        self.run_until_cancelled(&check, probe).await;
        // A run that was finishing when a reload removed its check may have put the check's
        // series back after the reload dropped them; once the task has stopped, they go for
        // good (unless a later reload added a check of that name again).
        if check.removed.load(Ordering::Acquire)
            && !self.checks.read().unwrap_or_else(PoisonError::into_inner).contains_key(&check.name)
        {
            self.metrics.forget(&check.name);
        }
    }

    async fn run_until_cancelled(&self, check: &Arc<Check>, probe: Probe) {
        let memo = check.status().stored.memo.clone();
        if let Some(memo) = memo {
            probe.restore(&memo);
        }
        let s = check.schedule.clone();
        // The first run at a random phase within the interval (at most FIRST_RUN_SPREAD
        // away): thousands of checks loaded at once spread over their period instead of
        // all starting together, and keep that spread run after run.
        let mut next =
            on_tick(Instant::now() + jitter(s.interval.min(FIRST_RUN_SPREAD)) + jitter(s.jitter), self.origin);
        loop {
            tokio::select! {
                () = check.cancel.cancelled() => return,
                () = tokio::time::sleep_until(next.into()) => {}
            }
            let started = Instant::now();
            self.metrics.schedule_lag(started.saturating_duration_since(next));
            let outcome = tokio::select! {
                () = check.cancel.cancelled() => return,
                o = probe.run(s.timeout, s.retries) => o,
            };
            self.complete(check, outcome, probe.memo()).await;
            next = on_tick((started + s.interval + jitter(s.jitter)).max(Instant::now()), self.origin);
        }
    }

    /// Applies a run's outcome: flap suppression, the store, metrics, alerts.
    async fn complete(&self, check: &Check, outcome: Outcome, memo: Option<Vec<u8>>) {
        let now_ms = unix_ms();
        let raw = RawResult {
            ok: outcome.ok,
            duration_us: outcome.duration.as_micros() as u64,
            message: outcome.message.clone(),
        };
        // The new status is worked out on a copy and shown (API, page, metrics) only once it is
        // committed: what was shown survives a crash.
        let mut next = check.status().clone();
        let event = transition(&mut next.stored, outcome.ok, now_ms, &check.schedule);
        next.stored.last_run_ms = now_ms;
        next.stored.last = Some(raw.clone());
        next.stored.memo = memo;
        if event.is_some() {
            next.stored.last_alert_ms = now_ms;
        }
        next.recent.push_back((now_ms, raw.ok, raw.duration_us));
        while next.recent.len() > RECENT {
            next.recent.pop_front();
        }
        next.gauges.clone_from(&outcome.gauges);
        match self.history.record(check.id, &check.name, now_ms, raw, next.stored.clone()).await {
            // A full or read-only disk is logged once, by the history.
            Err(e) if e.refuses_writes().is_none() => {
                tracing::error!(check = %check.name, error = %e, "cannot store the result");
            }
            _ => {}
        }
        let (state, since_ms, last_alert_ms) = (next.stored.state, next.stored.since_ms, next.stored.last_alert_ms);
        *check.status() = next;
        self.metrics.observe(&check.name, &outcome, state);

        let alerts = self.alerts.read().unwrap_or_else(PoisonError::into_inner).clone();
        let make = |kind: EventKind| Event {
            check: check.name.clone(),
            kind: check.config.kind.as_str(),
            event: kind,
            state: state.as_str(),
            message: outcome.message.clone(),
            time: now_ms / 1000,
            since: since_ms / 1000,
        };
        match event {
            Some(kind) => {
                tracing::warn!(check = %check.name, event = ?kind, message = %outcome.message, "state changed");
                alerts.send(&make(kind));
            }
            None if state == State::Down && alerts.remind(&make(EventKind::Reminder), now_ms, last_alert_ms) => {
                // Stored with the next result.
                check.status().stored.last_alert_ms = now_ms;
            }
            None => {}
        }
    }
}

/// Flap suppression: updates `s` with a run that passed (`ok`) at `now_ms`; returns the alert
/// the change calls for, if any. A check not known yet goes up on its first success and down
/// after `down_after` failures; a down check needs `up_after` successes in a row.
pub fn transition(s: &mut StoredState, ok: bool, now_ms: u64, schedule: &Schedule) -> Option<EventKind> {
    if ok {
        s.successes = s.successes.saturating_add(1);
        s.failures = 0;
        let up = match s.state {
            State::Up => false,
            State::Unknown => true,
            State::Down => s.successes >= schedule.up_after,
        };
        if up {
            let was = s.state;
            s.state = State::Up;
            s.since_ms = now_ms;
            if was == State::Down {
                return Some(EventKind::Resolved);
            }
        }
    } else {
        s.failures = s.failures.saturating_add(1);
        s.successes = 0;
        if s.state != State::Down && s.failures >= schedule.down_after {
            s.state = State::Down;
            s.since_ms = now_ms;
            return Some(EventKind::Down);
        }
    }
    None
}

/// The first [`TICK`] (counted from `origin`) at or after `t`.
fn on_tick(t: Instant, origin: Instant) -> Instant {
    let tick = TICK.as_nanos();
    let ticks = t.saturating_duration_since(origin).as_nanos().div_ceil(tick);
    origin + Duration::from_nanos(u64::try_from(ticks * tick).unwrap_or(u64::MAX))
}

/// A random delay up to `max`.
fn jitter(max: Duration) -> Duration {
    let ms = max.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(OsRng.next_u64() % (ms + 1))
}

/// The current unix time in ms.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(down_after: u32, up_after: u32) -> Schedule {
        Schedule {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            retries: 0,
            jitter: Duration::ZERO,
            down_after,
            up_after,
        }
    }

    #[test]
    fn flap_suppression() {
        let sch = schedule(3, 2);
        let mut s = StoredState::default();
        // Unknown: up on the first success, no alert.
        assert_eq!(transition(&mut s, true, 1, &sch), None);
        assert_eq!(s.state, State::Up);
        // Two failures do not take it down; a success in between resets the count.
        assert_eq!(transition(&mut s, false, 2, &sch), None);
        assert_eq!(transition(&mut s, false, 3, &sch), None);
        assert_eq!(transition(&mut s, true, 4, &sch), None);
        assert_eq!(transition(&mut s, false, 5, &sch), None);
        assert_eq!(transition(&mut s, false, 6, &sch), None);
        assert_eq!(transition(&mut s, false, 7, &sch), Some(EventKind::Down));
        assert_eq!((s.state, s.since_ms), (State::Down, 7));
        // Still failing: no second alert from the transition.
        assert_eq!(transition(&mut s, false, 8, &sch), None);
        // One success is not enough to come up; two are.
        assert_eq!(transition(&mut s, true, 9, &sch), None);
        assert_eq!(transition(&mut s, false, 10, &sch), None);
        assert_eq!(transition(&mut s, true, 11, &sch), None);
        assert_eq!(transition(&mut s, true, 12, &sch), Some(EventKind::Resolved));
        assert_eq!((s.state, s.since_ms), (State::Up, 12));
    }

    #[test]
    fn unknown_goes_down_after_down_after_failures() {
        let sch = schedule(2, 1);
        let mut s = StoredState::default();
        assert_eq!(transition(&mut s, false, 1, &sch), None);
        assert_eq!(s.state, State::Unknown);
        assert_eq!(transition(&mut s, false, 2, &sch), Some(EventKind::Down));
    }

    #[test]
    fn runs_are_planned_on_the_next_tick() {
        let origin = Instant::now();
        assert_eq!(on_tick(origin, origin), origin);
        assert_eq!(on_tick(origin + Duration::from_millis(1), origin), origin + TICK);
        assert_eq!(on_tick(origin + TICK, origin), origin + TICK);
        assert_eq!(on_tick(origin + TICK * 7 + Duration::from_nanos(1), origin), origin + TICK * 8);
        // Before the origin (not planned by the scheduler): the origin.
        if let Some(before) = origin.checked_sub(Duration::from_millis(5)) {
            assert_eq!(on_tick(before, origin), origin);
        }
    }

    #[test]
    fn jitter_is_bounded() {
        for _ in 0..100 {
            assert!(jitter(Duration::from_millis(10)) <= Duration::from_millis(10));
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
