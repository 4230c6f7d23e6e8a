//! Check history in LMDB: every result (raw, kept a day), per-minute and per-hour aggregates
//! (kept 8 and 400 days) updated in the same transaction, and each check's current state.
//!
//! | table | key | value |
//! |---|---|---|
//! | `check_ids` | check name | its id (keys of the other tables) |
//! | `raw` | (id, unix ms) | [`RawResult`] |
//! | `minutes` | (id, minute start ms) | [`Aggregate`] |
//! | `hours` | (id, hour start ms) | [`Aggregate`] |
//! | `states` | check name | [`StoredState`] |
//!
//! A result is committed with [`Durability::Process`]: it survives `kill -9` of probed as
//! soon as [`History::record`] returns (a power cut may take the last second).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use signet_store::{Durability, SpaceWatch, Store, StoreError, StoreOptions, Table};

/// The application name of probed's store.
pub const STORE_APPLICATION: &str = "probed";
/// The table layout version.
pub const SCHEMA_VERSION: u32 = 1;

/// How long raw results are kept.
pub const RAW_RETENTION_MS: u64 = 86_400_000;
/// How long per-minute aggregates are kept.
pub const MINUTE_RETENTION_MS: u64 = 8 * 86_400_000;
/// How long per-hour aggregates are kept.
pub const HOUR_RETENTION_MS: u64 = 400 * 86_400_000;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

/// One run's result as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawResult {
    /// Whether the check passed.
    pub ok: bool,
    /// How long it took (µs).
    pub duration_us: u64,
    /// What was seen or wrong.
    pub message: String,
}

/// Runs in a minute or an hour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Runs.
    pub runs: u32,
    /// Runs that passed.
    pub ok: u32,
    /// Sum of durations (µs).
    pub duration_sum_us: u64,
    /// Longest duration (µs).
    pub duration_max_us: u64,
}

impl Aggregate {
    fn add(&mut self, r: &RawResult) {
        self.runs += 1;
        self.ok += u32::from(r.ok);
        self.duration_sum_us += r.duration_us;
        self.duration_max_us = self.duration_max_us.max(r.duration_us);
    }
}

/// A check's state: up, down or not known yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// No run has decided yet.
    #[default]
    Unknown,
    /// Passing.
    Up,
    /// Failing (after `down_after` failed runs in a row).
    Down,
}

impl State {
    /// `"unknown"`, `"up"` or `"down"`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Up => "up",
            State::Down => "down",
        }
    }
}

/// What is kept of a check between runs (and restarts).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredState {
    /// Up, down or unknown.
    pub state: State,
    /// Unix ms since the state holds.
    pub since_ms: u64,
    /// Failed runs in a row.
    pub failures: u32,
    /// Passed runs in a row.
    pub successes: u32,
    /// Unix ms of the last alert (down or reminder) sent for the current down state.
    pub last_alert_ms: u64,
    /// Unix ms of the last run.
    pub last_run_ms: u64,
    /// The last run's result.
    pub last: Option<RawResult>,
    /// What the check remembers between runs (a CRL's number, a CT log's last tree), as the
    /// check encodes it.
    pub memo: Option<Vec<u8>>,
}

/// What a store that refuses writes stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "check results are not stored until it takes writes again; checks, states, alerts and \
     the status page go on from memory, with the history stored before";

/// probed's store.
#[derive(Debug)]
pub struct History {
    store: Store,
    /// Logs once when results cannot be stored (a full or read-only disk), and when they can again.
    space: Arc<SpaceWatch>,
    ids: Mutex<HashMap<String, u64>>,
    check_ids: Table<String, u64>,
    raw: Table<(u64, u64), RawResult>,
    minutes: Table<(u64, u64), Aggregate>,
    hours: Table<(u64, u64), Aggregate>,
    states: Table<String, StoredState>,
}

impl History {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<History, StoreError> {
        let mut opts = StoreOptions::new(STORE_APPLICATION, SCHEMA_VERSION);
        opts.map_size = 8 << 30;
        opts.durability = Durability::Process { flush_interval: Duration::from_secs(1) };
        // Thousands of checks give a steady trickle of results: one commit per 50 ms holds them
        // all (a result is shown once committed, so at most 50 ms later).
        opts.group_linger = Duration::from_millis(50);
        let store = Store::open(dir, opts)?;
        Ok(History {
            check_ids: store.table("check_ids")?,
            raw: store.table("raw")?,
            minutes: store.table("minutes")?,
            hours: store.table("hours")?,
            states: store.table("states")?,
            ids: Mutex::new(HashMap::new()),
            space: Arc::new(SpaceWatch::new(store.path(), FULL_CONSEQUENCE)),
            store,
        })
    }

    /// The id of check `name`, given one if it has none.
    pub fn id(&self, name: &str) -> Result<u64, StoreError> {
        let mut ids = self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(id) = ids.get(name) {
            return Ok(*id);
        }
        let key = name.to_owned();
        let id = match self.store.read(|t| t.get(&self.check_ids, &key))? {
            Some(id) => id,
            None => self.store.write(|t| {
                if let Some(id) = t.get(&self.check_ids, &key)? {
                    return Ok(id);
                }
                let id = t.len(&self.check_ids)? + 1;
                t.put(&self.check_ids, &key, &id)?;
                Ok(id)
            })?,
        };
        ids.insert(key, id);
        Ok(id)
    }

    /// The stored state of check `name`.
    pub fn state(&self, name: &str) -> Result<Option<StoredState>, StoreError> {
        self.store.read(|t| t.get(&self.states, &name.to_owned()))
    }

    /// Commits one result of check `id` (`name`) at `at_ms` with the state it led to.
    pub async fn record(
        &self,
        id: u64,
        name: &str,
        at_ms: u64,
        result: RawResult,
        state: StoredState,
    ) -> Result<(), StoreError> {
        let (raw, minutes, hours, states) = (self.raw, self.minutes, self.hours, self.states);
        let name = name.to_owned();
        let out = self
            .store
            .write_grouped(move |t| {
                // Two results in one millisecond: the later one moves up a millisecond.
                let mut at = at_ms;
                while t.get(&raw, &(id, at))?.is_some() {
                    at += 1;
                }
                t.put(&raw, &(id, at), &result)?;
                for (table, size) in [(minutes, MINUTE_MS), (hours, HOUR_MS)] {
                    let key = (id, at - at % size);
                    let mut agg = t.get(&table, &key)?.unwrap_or_default();
                    agg.add(&result);
                    t.put(&table, &key, &agg)?;
                }
                t.put(&states, &name, &state)?;
                Ok::<_, StoreError>(())
            })
            .await;
        self.space.note(&out);
        out
    }

    /// The latest `n` results of check `id`, oldest first.
    pub fn recent(&self, id: u64, n: usize) -> Result<Vec<(u64, RawResult)>, StoreError> {
        let mut out: Vec<(u64, RawResult)> = self
            .store
            .read(|t| t.range_rev_from(&self.raw, Some(&(id, u64::MAX)), n))?
            .into_iter()
            .take_while(|((i, _), _)| *i == id)
            .map(|((_, at), r)| (at, r))
            .collect();
        out.reverse();
        Ok(out)
    }

    /// Runs and passed runs of check `id` from `since_ms` on: per-minute aggregates for a window
    /// of up to a day, per-hour ones beyond.
    pub fn totals(&self, id: u64, since_ms: u64, window_ms: u64) -> Result<Aggregate, StoreError> {
        let (table, size) = if window_ms <= 86_400_000 { (self.minutes, MINUTE_MS) } else { (self.hours, HOUR_MS) };
        let start = (id, since_ms - since_ms % size);
        let mut total = Aggregate::default();
        let mut from = start;
        loop {
            let page = self.store.read(|t| t.range(&table, Some(&from), 1024))?;
            let n = page.len();
            for ((i, at), agg) in &page {
                if *i != id {
                    return Ok(total);
                }
                total.runs += agg.runs;
                total.ok += agg.ok;
                total.duration_sum_us += agg.duration_sum_us;
                total.duration_max_us = total.duration_max_us.max(agg.duration_max_us);
                from = (id, at + 1);
            }
            if n < 1024 {
                return Ok(total);
            }
        }
    }

    /// Uptime of check `id` over the `window_ms` before `now_ms`, in percent (None: no runs).
    pub fn uptime(&self, id: u64, now_ms: u64, window_ms: u64) -> Result<Option<f64>, StoreError> {
        let t = self.totals(id, now_ms.saturating_sub(window_ms), window_ms)?;
        Ok((t.runs > 0).then(|| 100.0 * f64::from(t.ok) / f64::from(t.runs)))
    }

    /// Deletes what is past retention: raw results older than a day, minutes older than
    /// [`MINUTE_RETENTION_MS`], hours older than [`HOUR_RETENTION_MS`]. Returns how many rows
    /// went.
    pub fn prune(&self, now_ms: u64) -> Result<u64, StoreError> {
        let ids: Vec<u64> =
            self.store.read(|t| t.range(&self.check_ids, None, usize::MAX))?.into_iter().map(|(_, id)| id).collect();
        let mut deleted = 0;
        for id in ids {
            deleted += prune_table(&self.store, self.raw, id, now_ms.saturating_sub(RAW_RETENTION_MS))?;
            deleted += prune_table(&self.store, self.minutes, id, now_ms.saturating_sub(MINUTE_RETENTION_MS))?;
            deleted += prune_table(&self.store, self.hours, id, now_ms.saturating_sub(HOUR_RETENTION_MS))?;
        }
        Ok(deleted)
    }

    /// Whether the store refuses writes for now (a full or read-only disk, already logged).
    pub fn refusing_writes(&self) -> bool {
        self.space.is_full() || self.store.is_read_only()
    }

    /// Forgets check `name`'s state (its history stays until retention removes it).
    pub fn forget_state(&self, name: &str) -> Result<(), StoreError> {
        self.store.write(|t| t.delete(&self.states, &name.to_owned()).map(drop))
    }
}

/// Deletes `id`'s rows of `table` older than `cutoff`, 1,000 per transaction.
fn prune_table<V: Serialize + serde::de::DeserializeOwned>(
    store: &Store,
    table: Table<(u64, u64), V>,
    id: u64,
    cutoff: u64,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    loop {
        let n = store.write(|t| {
            let old: Vec<(u64, u64)> = t
                .range(&table, Some(&(id, 0)), 1000)?
                .into_iter()
                .map(|(k, _)| k)
                .take_while(|(i, at)| *i == id && *at < cutoff)
                .collect();
            for k in &old {
                t.delete(&table, k)?;
            }
            Ok(old.len() as u64)
        })?;
        deleted += n;
        if n < 1000 {
            return Ok(deleted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(ok: bool, us: u64) -> RawResult {
        RawResult { ok, duration_us: us, message: String::new() }
    }

    #[tokio::test]
    async fn results_aggregates_uptime_and_retention() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::open(dir.path()).unwrap();
        let a = h.id("a").unwrap();
        let b = h.id("b").unwrap();
        assert_ne!(a, b);
        assert_eq!(h.id("a").unwrap(), a);
        let now = 1_000 * HOUR_MS;
        // Two days of results for `a`, one per 10 minutes, every fourth failing.
        for i in 0..288u64 {
            let at = now - 2 * 86_400_000 + i * 600_000;
            h.record(a, "a", at, result(i % 4 != 0, 1000), StoredState::default()).await.unwrap();
        }
        h.record(b, "b", now - 1, result(true, 5), StoredState { state: State::Up, ..Default::default() })
            .await
            .unwrap();
        assert_eq!(h.state("b").unwrap().unwrap().state, State::Up);
        assert_eq!(h.recent(a, 3).unwrap().len(), 3);
        assert_eq!(h.recent(b, 10).unwrap().len(), 1);
        let up = h.uptime(a, now, 86_400_000).unwrap().unwrap();
        assert!((up - 75.0).abs() < 0.1, "{up}");
        assert_eq!(h.uptime(b, now, 86_400_000).unwrap(), Some(100.0));
        let week = h.totals(a, now - 7 * 86_400_000, 7 * 86_400_000).unwrap();
        assert_eq!(week.runs, 288);
        // Raw results older than a day go; aggregates stay.
        let gone = h.prune(now).unwrap();
        assert_eq!(gone, 144);
        assert_eq!(h.totals(a, now - 7 * 86_400_000, 7 * 86_400_000).unwrap().runs, 288);
        assert_eq!(h.recent(a, 1000).unwrap().len(), 144);
    }
}
