//! The set of logs ctlogd serves, which grows while it serves: temporal
//! shards added through the admin interface (`CtAdmin.addShard`, `signetctl
//! ct shard add`).
//!
//! [`LogSet`] is what the HTTP router, the metrics and the admin interface
//! share: a list swapped whole when a shard is added, so a request sees
//! either the old list or the new one. [`Shards::add`] checks a shard (a
//! valid name not served yet, a window overlapping no served log's), gets
//! its key from signd, starts it over its own directory `shards/<name>` in
//! `state_dir`, commits its definition to the `ct_shards` table, and only
//! then serves it. At start the stored shards are started after the
//! configured logs ([`ShardStore::all`]).

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use signet_ipc::{CtShard, CtShardSpec, ErrorKind, IpcError};
use signet_store::{Store, StoreError, Table};
use tokio::task::JoinHandle;

use crate::chain::rfc3339;
use crate::config::{Config, LogSettings, StorageSettings};
use crate::log::Log;

/// One log served.
#[derive(Clone, Debug)]
pub struct Served {
    /// Its name.
    pub name: String,
    /// Its path prefix: `/<name>/` (or `/` for a lone log in tests).
    pub prefix: String,
    /// The log.
    pub log: Arc<Log>,
    /// Added through the admin interface rather than configured.
    pub added: bool,
}

/// The logs served, shared by the HTTP router, the metrics and the admin
/// interface.
#[derive(Clone, Debug, Default)]
pub struct LogSet {
    logs: Arc<RwLock<Arc<Vec<Served>>>>,
}

impl LogSet {
    /// The logs served now, longest prefix first.
    pub fn snapshot(&self) -> Arc<Vec<Served>> {
        self.logs.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Serves one more log.
    pub fn add(&self, served: Served) {
        let mut guard = self.logs.write().unwrap_or_else(PoisonError::into_inner);
        let mut next: Vec<Served> = guard.iter().cloned().collect();
        next.push(served);
        next.sort_by_key(|s| std::cmp::Reverse(s.prefix.len()));
        *guard = Arc::new(next);
    }

    /// Serves no log any more (at stop: the sequencers end once their last
    /// handles go).
    pub fn clear(&self) {
        *self.logs.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(Vec::new());
    }

    /// The log named `name`, if served.
    pub fn get(&self, name: &str) -> Option<Served> {
        self.snapshot().iter().find(|s| s.name == name).cloned()
    }
}

/// A shard added through the admin interface, as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// Its log in signd.
    pub signd_log: String,
    /// Its description (empty: the default).
    pub description: String,
    /// Its NotAfter window, Unix seconds, start inclusive.
    pub not_after_start: i64,
    /// End, exclusive.
    pub not_after_end: i64,
    /// When it was added, Unix seconds.
    pub added_unix_secs: i64,
}

impl ShardRecord {
    /// The settings it is started with: a configured log's, over the
    /// directory `shards/<name>` in `state_dir`.
    pub fn settings(&self, config: &Config, name: &str) -> Result<LogSettings, String> {
        let time =
            |t: i64| time::OffsetDateTime::from_unix_timestamp(t).map_err(|e| format!("a window bound of {t} s: {e}"));
        Ok(LogSettings {
            signd_log: Some(self.signd_log.clone()),
            description: (!self.description.is_empty()).then(|| self.description.clone()),
            not_after_start: Some(time(self.not_after_start)?),
            not_after_end: Some(time(self.not_after_end)?),
            mmd_seconds: 60,
            max_get_entries: 256,
            storage: StorageSettings::Dir(config.shard_dir(name)),
        })
    }
}

/// The `ct_shards` table: the shards added through the admin interface, by name.
#[derive(Clone)]
pub struct ShardStore {
    store: Store,
    table: Table<String, ShardRecord>,
}

impl std::fmt::Debug for ShardStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShardStore")
    }
}

impl ShardStore {
    /// Opens (creates) the table.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self { store: store.clone(), table: store.table("ct_shards")? })
    }

    /// Every stored shard, by name.
    pub fn all(&self) -> Result<Vec<(String, ShardRecord)>, StoreError> {
        self.store.read(|t| t.range(&self.table, None, usize::MAX))
    }

    /// Commits a shard (the store is fsynced on commit). Blocking.
    pub fn add(&self, name: &str, record: &ShardRecord) -> Result<(), StoreError> {
        self.store.write(|t| t.put(&self.table, &name.to_owned(), record))
    }
}

/// Starts a log: used for the configured ones, the stored shards and new ones.
pub type StartLog = Arc<
    dyn Fn(String, LogSettings) -> futures::future::BoxFuture<'static, Result<(Arc<Log>, JoinHandle<()>), String>>
        + Send
        + Sync,
>;

/// Everything adding a shard takes; lives on the daemon's runtime.
#[derive(Clone)]
pub struct Shards {
    /// The configuration (public URL, state_dir).
    pub config: Arc<Config>,
    /// The logs served.
    pub set: LogSet,
    /// The shards' table.
    pub store: ShardStore,
    /// Starts a log.
    pub start: StartLog,
    /// The sequencer tasks, awaited at stop.
    pub tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// One add at a time.
    pub adding: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards").field("set", &self.set).finish()
    }
}

/// A log as the admin interface shows it.
pub fn shown(s: &Served) -> CtShard {
    let c = s.log.config();
    CtShard {
        name: s.name.clone(),
        log_id: s.log.log_id().to_vec(),
        public_key: c.public_key_der.clone(),
        window: c.window.map(|w| (w.start, w.end)),
        url: c.submission_url.clone(),
        tree_size: s.log.head().head.tree_size,
        added_at_run_time: s.added,
        log_list_entry: s.log.metadata().to_string(),
    }
}

/// Checks a shard against the logs served: the name free, the window
/// overlapping none. `Ok(Some)`: the same shard is served already.
pub fn check(spec: &CtShardSpec, served: &[Served]) -> Result<Option<CtShard>, IpcError> {
    let (start, end) = (spec.not_after_start_unix_secs, spec.not_after_end_unix_secs);
    if start >= end {
        return Err(IpcError::invalid(format!(
            "the window's start {} must be before its end {}",
            rfc3339(start),
            rfc3339(end)
        )));
    }
    if let Some(s) = served.iter().find(|s| s.name == spec.name) {
        let same = s.added && s.log.config().window.map(|w| (w.start, w.end)) == Some((start, end));
        if same {
            return Ok(Some(shown(s)));
        }
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("log `{}` is served already", spec.name)));
    }
    for s in served {
        match s.log.config().window {
            None => {
                return Err(IpcError::new(
                    ErrorKind::FailedPrecondition,
                    format!(
                        "log `{}` has no temporal window: it takes every NotAfter, so no shard can be added beside it",
                        s.name
                    ),
                ))
            }
            Some(w) if start < w.end && w.start < end => {
                return Err(IpcError::new(
                    ErrorKind::FailedPrecondition,
                    format!(
                        "the window [{}, {}) overlaps log `{}`'s [{}, {})",
                        rfc3339(start),
                        rfc3339(end),
                        s.name,
                        rfc3339(w.start),
                        rfc3339(w.end)
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(None)
}

impl Shards {
    /// Adds a shard (see the module's documentation); the shard as served.
    pub async fn add(&self, spec: CtShardSpec) -> Result<CtShard, IpcError> {
        let _one = self.adding.lock().await;
        if let Some(same) = check(&spec, &self.set.snapshot())? {
            return Ok(same);
        }
        let record = ShardRecord {
            signd_log: if spec.signd_log.is_empty() { spec.name.clone() } else { spec.signd_log.clone() },
            description: spec.description.clone(),
            not_after_start: spec.not_after_start_unix_secs,
            not_after_end: spec.not_after_end_unix_secs,
            added_unix_secs: time::OffsetDateTime::now_utc().unix_timestamp(),
        };
        let settings = record.settings(&self.config, &spec.name).map_err(IpcError::invalid)?;
        settings.check(&spec.name).map_err(IpcError::invalid)?;
        if let Some(d) = spec.description.chars().find(|c| c.is_control()) {
            return Err(IpcError::invalid(format!("the description holds a control character {d:?}")));
        }
        // Started (its key from signd, its storage, its tables) before it is
        // recorded: a shard that cannot start is not kept. Nothing reaches it
        // before it is served.
        let (log, task) = (self.start)(spec.name.clone(), settings).await.map_err(|e| {
            let kind = if e.contains("signd") { ErrorKind::FailedPrecondition } else { ErrorKind::Internal };
            IpcError::new(kind, e)
        })?;
        let (store, name, rec) = (self.store.clone(), spec.name.clone(), record.clone());
        let committed = tokio::task::spawn_blocking(move || store.add(&name, &rec))
            .await
            .map_err(|e| IpcError::internal(format!("recording the shard: {e}")))
            .and_then(|r| r.map_err(|e| IpcError::internal(format!("recording the shard: {e}"))));
        if let Err(e) = committed {
            // Its last handle gone, the sequencer ends by itself.
            drop((log, task));
            return Err(e);
        }
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner).push(task);
        let served = Served { name: spec.name.clone(), prefix: format!("/{}/", spec.name), log, added: true };
        let shown = shown(&served);
        self.set.add(served);
        tracing::info!(
            log = %spec.name,
            log_id = %hex::encode(&shown.log_id),
            not_after_start = %rfc3339(record.not_after_start),
            not_after_end = %rfc3339(record.not_after_end),
            "shard added"
        );
        Ok(shown)
    }
}
