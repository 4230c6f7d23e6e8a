//! CT logs added without a restart (`Admin.addCtLog`, `signetctl ct shard
//! add`): a new temporal shard's log key, registered while ctlogd serves.
//!
//! A call is checked against the logs and issuers on the capnp thread
//! ([`target`]), its key loaded and checked as a configured log's is
//! ([`super::load_one`]) on a signing thread, committed to the `ct_logs`
//! table (fsynced), and only then put among the logs. At start the stored
//! logs join the configured ones ([`Logs::with_stored`]); a name the config
//! now gives, or a key that is gone, is logged and left out.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use signet_ipc::{ErrorKind, IpcError};
use signet_store::{Store, StoreError, Table};

use super::{check_one, load_one, CtLog, LogConfig, Logs};
use crate::issuers::Issuers;
use crate::keys::KeyRing;

/// A log added by `addCtLog`, as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredLog {
    /// The log key's id.
    pub key_id: String,
    /// Roles that may obtain its LogSigner.
    pub roles: Vec<String>,
    /// When it was added.
    pub added_unix_secs: i64,
}

impl StoredLog {
    fn config(&self) -> LogConfig {
        LogConfig { key: self.key_id.clone(), roles: self.roles.clone(), raw_signing_roles: Vec::new() }
    }
}

/// The `ct_logs` table: the logs added at run time, by name.
#[derive(Clone)]
pub struct LogStore {
    store: Store,
    table: Table<String, StoredLog>,
}

impl LogStore {
    /// Opens (creates) the table.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self { store: store.clone(), table: store.table("ct_logs")? })
    }

    /// Every added log, by name.
    pub fn all(&self) -> Result<Vec<(String, StoredLog)>, StoreError> {
        self.store.read(|t| t.range(&self.table, None, usize::MAX))
    }

    /// Records a new log, fsynced. Blocking.
    pub fn add(&self, name: &str, log: &StoredLog) -> Result<(), StoreError> {
        self.store.write(|t| t.put(&self.table, &name.to_owned(), log))?;
        self.store.sync()
    }
}

impl Logs {
    /// These logs and `log` (replacing none: the caller checked the name).
    pub fn with(&self, log: CtLog) -> Logs {
        let mut by_name = self.by_name.clone();
        by_name.insert(log.name.clone(), std::sync::Arc::new(log));
        Logs { by_name }
    }

    /// Adds the logs `addCtLog` stored. One whose name the config gives, or
    /// whose key is gone or no longer fits, is logged and left out.
    pub fn with_stored(mut self, store: &LogStore, keys: &KeyRing) -> Result<Logs, StoreError> {
        for (name, stored) in store.all()? {
            if self.by_name.contains_key(&name) {
                tracing::error!(log = %name, "a CT log added by signetctl has the name of a configured log; not served");
                continue;
            }
            match load_one(&name, &stored.config(), keys) {
                Ok(log) => {
                    tracing::info!(log = %name, key = %stored.key_id, "CT log added at run time");
                    self = self.with(log);
                }
                Err(e) => tracing::error!(log = %name, error = %e, "a CT log added at run time cannot be served"),
            }
        }
        Ok(self)
    }
}

/// What a call asks for, checked on the capnp thread.
pub(crate) enum Target {
    /// The log exists with this key already (a resent call): its key.
    Current(Vec<u8>),
    /// Add it, with these roles.
    Add(StoredLog),
}

/// Checks a call: a valid name and key id, the name free (or the same log
/// again), the key no other log's and no issuer's, roles given or taken from
/// the configured logs.
pub(crate) fn target(
    logs: &Logs,
    issuers: &Issuers,
    name: &str,
    key_id: &str,
    roles: Vec<String>,
    now: SystemTime,
) -> Result<Target, IpcError> {
    if let Some(log) = logs.get(name) {
        if log.key_id == key_id {
            return Ok(Target::Current(log.spki.clone()));
        }
        return Err(IpcError::new(
            ErrorKind::AlreadyExists,
            format!("CT log `{name}` exists already, with key `{}`", log.key_id),
        ));
    }
    if let Some(other) = logs.iter().find(|l| l.key_id == key_id) {
        return Err(IpcError::new(
            ErrorKind::AlreadyExists,
            format!("key `{key_id}` is the log key of CT log `{}`; each log needs its own key", other.name),
        ));
    }
    if let Some(ca) = issuers.iter().find(|i| i.key_ids().iter().any(|k| k == key_id)) {
        return Err(IpcError::invalid(format!("key `{key_id}` is a key of issuer `{}`", ca.name)));
    }
    let roles = if roles.is_empty() {
        let mut all: Vec<String> = logs.iter().flat_map(|l| l.roles.iter().cloned()).collect();
        all.sort();
        all.dedup();
        all
    } else {
        roles
    };
    if roles.is_empty() {
        return Err(IpcError::invalid("give the roles that may use the log: no configured log has any"));
    }
    let stored = StoredLog {
        key_id: key_id.to_owned(),
        roles,
        added_unix_secs: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
    };
    check_one(name, &stored.config()).map_err(IpcError::invalid)?;
    Ok(Target::Add(stored))
}

/// Loads the key as a configured log's (it must be ECDSA P-256) and records
/// the log (blocking: a signing thread runs it).
pub(crate) fn add(name: &str, stored: &StoredLog, keys: &KeyRing, store: &LogStore) -> Result<CtLog, IpcError> {
    let log = load_one(name, &stored.config(), keys).map_err(|e| {
        if keys.get(&stored.key_id).is_none() {
            IpcError::new(ErrorKind::UnknownKey, e)
        } else {
            IpcError::new(ErrorKind::WrongAlgorithm, e)
        }
    })?;
    store.add(name, stored).map_err(|e| IpcError::internal(format!("recording the log: {e}")))?;
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs() -> Logs {
        Logs::default().with(CtLog {
            name: "2026h2".into(),
            key_id: "ct-2026h2".into(),
            spki: vec![1, 2, 3],
            roles: vec!["ctlog".into(), "admin".into()],
            raw_signing_roles: vec![],
        })
    }

    fn target_of(logs: &Logs, name: &str, key: &str, roles: &[&str]) -> Result<Target, IpcError> {
        let roles = roles.iter().map(|r| r.to_string()).collect();
        target(logs, &Issuers::default(), name, key, roles, UNIX_EPOCH + std::time::Duration::from_secs(7))
    }

    #[test]
    fn calls_are_checked_against_the_logs() {
        let logs = logs();
        // The roles of the configured logs, by default.
        match target_of(&logs, "2027h1", "ct-2027h1", &[]) {
            Ok(Target::Add(s)) => {
                assert_eq!(s.roles, vec!["admin".to_string(), "ctlog".to_string()]);
                assert_eq!((s.key_id.as_str(), s.added_unix_secs), ("ct-2027h1", 7));
            }
            _ => panic!("not an add"),
        }
        match target_of(&logs, "2027h1", "ct-2027h1", &["other"]) {
            Ok(Target::Add(s)) => assert_eq!(s.roles, vec!["other".to_string()]),
            _ => panic!("not an add"),
        }
        // The same log again: its key, nothing added.
        assert!(matches!(target_of(&logs, "2026h2", "ct-2026h2", &[]), Ok(Target::Current(k)) if k == [1, 2, 3]));
        let e = target_of(&logs, "2026h2", "ct-other", &[]).err().unwrap();
        assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}");
        let e = target_of(&logs, "2027h1", "ct-2026h2", &[]).err().unwrap();
        assert!(e.kind == ErrorKind::AlreadyExists && e.detail.contains("CT log `2026h2`"), "{e}");
        let e = target_of(&logs, "a b", "ct-x", &[]).err().unwrap();
        assert!(e.kind == ErrorKind::InvalidArgument && e.detail.contains("invalid log name"), "{e}");
        let e = target_of(&logs, "ok", "ct-x", &["Bad Role"]).err().unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
        // No configured log to take roles from.
        let e = target_of(&Logs::default(), "ok", "ct-x", &[]).err().unwrap();
        assert!(e.detail.contains("give the roles"), "{e}");
    }
}
