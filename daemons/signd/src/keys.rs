//! The key ring: key metadata in LMDB, parsed key handles cached in memory.
//!
//! At open every recorded key is loaded through its backend and its public key
//! is compared with the one recorded when it was created (as Boulder does); a
//! key that fails either check stays listed as unavailable, with the reason,
//! and signd keeps serving the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm, KeyInfo, KeySpec};
use signet_store::{Store, StoreError, Table};
use signet_types::Clock;

use crate::backend::{Backend, SigningKey};
use crate::policy::valid_role_name;

/// What LMDB keeps per key (never private material).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The key's algorithm.
    pub algorithm: KeyAlgorithm,
    /// SubjectPublicKeyInfo, DER, as created.
    pub spki: Vec<u8>,
    /// Creation time.
    pub created_unix_secs: i64,
    /// Roles that may use the key.
    pub roles: Vec<String>,
    /// Backend name.
    pub backend: String,
    /// Backend-specific location.
    pub location: String,
}

/// A key as signd serves it.
pub struct LoadedKey {
    /// Public information (with availability).
    pub info: KeyInfo,
    /// The signing handle, if the key loaded and checked out.
    pub handle: Option<Arc<dyn SigningKey>>,
}

impl LoadedKey {
    /// The handle, or a typed error saying why there is none.
    pub fn signer(&self) -> Result<&Arc<dyn SigningKey>, IpcError> {
        self.handle.as_ref().ok_or_else(|| {
            IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("key `{}` is unavailable: {}", self.info.id, self.info.problem),
            )
        })
    }
}

/// All keys.
pub struct KeyRing {
    store: Store,
    table: Table<String, KeyRecord>,
    backends: Vec<Arc<dyn Backend>>,
    keys: RwLock<HashMap<String, Arc<LoadedKey>>>,
    creating: Mutex<()>,
    /// Stamps new keys' creation time.
    clock: Clock,
}

impl KeyRing {
    /// Opens the `keys` table and loads every key; new keys' creation times come from `clock`.
    pub fn open(store: &Store, backends: Vec<Arc<dyn Backend>>, clock: Clock) -> Result<Self, StoreError> {
        let table = store.table::<String, KeyRecord>("keys")?;
        let records = store.read(|txn| txn.range(&table, None, usize::MAX))?;
        let ring = Self {
            store: store.clone(),
            table,
            backends,
            keys: RwLock::new(HashMap::new()),
            creating: Mutex::new(()),
            clock,
        };
        let mut keys = HashMap::new();
        for (id, record) in records {
            let loaded = ring.load(&id, &record);
            if let Some(problem) = (!loaded.info.available).then_some(&loaded.info.problem) {
                tracing::error!(key = %id, %problem, "key unavailable");
            }
            keys.insert(id, Arc::new(loaded));
        }
        *ring.keys.write().unwrap_or_else(|p| p.into_inner()) = keys;
        Ok(ring)
    }

    fn backend(&self, name: &str) -> Result<&Arc<dyn Backend>, IpcError> {
        if name.is_empty() {
            return self.backends.first().ok_or_else(|| IpcError::internal("no backend configured"));
        }
        self.backends
            .iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| IpcError::new(ErrorKind::Unsupported, format!("no backend named `{name}`")))
    }

    fn load(&self, id: &str, record: &KeyRecord) -> LoadedKey {
        let handle = self.backend(&record.backend).and_then(|b| b.load(&record.location)).and_then(|h| {
            if h.spki() != record.spki.as_slice() {
                Err(IpcError::new(ErrorKind::KeyUnavailable, "private key does not match the recorded public key"))
            } else if h.algorithm() != record.algorithm {
                Err(IpcError::new(
                    ErrorKind::KeyUnavailable,
                    format!("private key is {}, recorded as {}", h.algorithm(), record.algorithm),
                ))
            } else {
                Ok(h)
            }
        });
        let (handle, problem) = match handle {
            Ok(h) => (Some(h), String::new()),
            Err(e) => (None, e.detail),
        };
        LoadedKey { info: info(id, record, handle.is_some(), problem), handle }
    }

    /// A key by id.
    pub fn get(&self, id: &str) -> Option<Arc<LoadedKey>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    /// A key by id, or `UnknownKey`.
    pub fn require(&self, id: &str) -> Result<Arc<LoadedKey>, IpcError> {
        self.get(id).ok_or_else(|| IpcError::new(ErrorKind::UnknownKey, format!("no key `{id}`")))
    }

    /// Every key, sorted by id.
    pub fn list(&self) -> Vec<Arc<LoadedKey>> {
        let mut keys: Vec<_> = self.keys.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        keys.sort_by(|a, b| a.info.id.cmp(&b.info.id));
        keys
    }

    /// (loaded, unavailable) counts.
    pub fn counts(&self) -> (u32, u32) {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        let loaded = keys.values().filter(|k| k.handle.is_some()).count() as u32;
        (loaded, keys.len() as u32 - loaded)
    }

    /// Generates (`pkcs8` is None) or imports a key, records it durably, and
    /// caches its handle. Blocking: run it on a worker thread.
    pub fn create(&self, spec: &KeySpec, pkcs8: Option<&[u8]>) -> Result<KeyInfo, IpcError> {
        validate_key_id(&spec.id)?;
        if let Some(bad) = spec.roles.iter().find(|r| !valid_role_name(r)) {
            return Err(IpcError::invalid(format!("invalid role name `{bad}` (roles are [a-z0-9-]{{1,32}})")));
        }
        let backend = self.backend(&spec.backend)?.clone();
        let _one_at_a_time = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        if self.get(&spec.id).is_some() {
            return Err(IpcError::new(ErrorKind::AlreadyExists, format!("a key `{}` already exists", spec.id)));
        }
        let new = match pkcs8 {
            None => backend.generate(&spec.id, spec.algorithm)?,
            Some(der) => backend.import(&spec.id, spec.algorithm, der)?,
        };
        let record = KeyRecord {
            algorithm: spec.algorithm,
            spki: new.key.spki().to_vec(),
            created_unix_secs: self.clock.unix_seconds(),
            roles: spec.roles.clone(),
            backend: backend.name().to_owned(),
            location: new.location.clone(),
        };
        let committed =
            self.store.write(|txn| txn.insert_new(&self.table, &spec.id, &record)).and_then(|()| self.store.sync());
        if let Err(e) = committed {
            backend.discard(&new.location);
            return Err(match e {
                StoreError::AlreadyExists { .. } => {
                    IpcError::new(ErrorKind::AlreadyExists, format!("a key `{}` already exists", spec.id))
                }
                e => IpcError::internal(format!("recording key `{}`: {e}", spec.id)),
            });
        }
        let loaded = LoadedKey { info: info(&spec.id, &record, true, String::new()), handle: Some(new.key) };
        let out = loaded.info.clone();
        self.keys.write().unwrap_or_else(|p| p.into_inner()).insert(spec.id.clone(), Arc::new(loaded));
        Ok(out)
    }
}

impl KeyRing {
    /// Serves a key that already exists in a backend (named in config rather
    /// than generated through signd): records it on first sight, and keeps its
    /// recorded roles equal to the configured ones. A key recorded under the
    /// same id somewhere else is an error.
    pub fn adopt(&self, id: &str, roles: &[String], backend: &str, location: &str) -> Result<KeyInfo, IpcError> {
        validate_key_id(id)?;
        if let Some(bad) = roles.iter().find(|r| !valid_role_name(r)) {
            return Err(IpcError::invalid(format!("invalid role name `{bad}` (roles are [a-z0-9-]{{1,32}})")));
        }
        let b = self.backend(backend)?.clone();
        let _one_at_a_time = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = self.get(id) {
            if existing.info.backend != backend || existing.info.location != location {
                return Err(IpcError::new(
                    ErrorKind::AlreadyExists,
                    format!("key `{id}` is already recorded as {} {}", existing.info.backend, existing.info.location),
                ));
            }
            if existing.info.roles == roles {
                return Ok(existing.info.clone());
            }
            let record = self
                .store
                .read(|txn| txn.get(&self.table, &id.to_owned()))
                .map_err(|e| IpcError::internal(format!("reading key `{id}`: {e}")))?
                .ok_or_else(|| IpcError::internal(format!("key `{id}` vanished")))?;
            let record = KeyRecord { roles: roles.to_vec(), ..record };
            self.store
                .write(|txn| txn.put(&self.table, &id.to_owned(), &record))
                .and_then(|()| self.store.sync())
                .map_err(|e| IpcError::internal(format!("recording key `{id}`: {e}")))?;
            let loaded = LoadedKey {
                info: KeyInfo { roles: roles.to_vec(), ..existing.info.clone() },
                handle: existing.handle.clone(),
            };
            let out = loaded.info.clone();
            self.keys.write().unwrap_or_else(|p| p.into_inner()).insert(id.to_owned(), Arc::new(loaded));
            return Ok(out);
        }
        let handle = b.load(location)?;
        let record = KeyRecord {
            algorithm: handle.algorithm(),
            spki: handle.spki().to_vec(),
            created_unix_secs: self.clock.unix_seconds(),
            roles: roles.to_vec(),
            backend: backend.to_owned(),
            location: location.to_owned(),
        };
        self.store
            .write(|txn| txn.insert_new(&self.table, &id.to_owned(), &record))
            .and_then(|()| self.store.sync())
            .map_err(|e| IpcError::internal(format!("recording key `{id}`: {e}")))?;
        let loaded = LoadedKey { info: info(id, &record, true, String::new()), handle: Some(handle) };
        let out = loaded.info.clone();
        self.keys.write().unwrap_or_else(|p| p.into_inner()).insert(id.to_owned(), Arc::new(loaded));
        Ok(out)
    }
}

fn info(id: &str, r: &KeyRecord, available: bool, problem: String) -> KeyInfo {
    KeyInfo {
        id: id.to_owned(),
        algorithm: r.algorithm,
        spki: r.spki.clone(),
        created_unix_secs: r.created_unix_secs,
        roles: r.roles.clone(),
        backend: r.backend.clone(),
        location: r.location.clone(),
        available,
        problem,
    }
}

/// Key ids are `[A-Za-z0-9._-]{1,64}`, not starting with a dot (they name files).
pub fn validate_key_id(id: &str) -> Result<(), IpcError> {
    let ok = (1..=64).contains(&id.len())
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(IpcError::invalid(format!("invalid key id {id:?}: use [A-Za-z0-9._-]{{1,64}}, not starting with '.'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::openssl::OpensslBackend;
    use signet_store::StoreOptions;

    fn ring(dir: &std::path::Path) -> KeyRing {
        let store = Store::open(&dir.join("db"), StoreOptions::new("signd-test", 1)).unwrap();
        let backend: Arc<dyn Backend> = Arc::new(OpensslBackend::new(&dir.join("keys")).unwrap());
        KeyRing::open(&store, vec![backend], Clock::system()).unwrap()
    }

    #[test]
    fn keys_survive_reopen_and_a_swapped_file_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        {
            let r = ring(dir.path());
            let spec = |id: &str| KeySpec {
                id: id.into(),
                algorithm: KeyAlgorithm::EcP256,
                roles: vec!["issuer".into()],
                backend: String::new(),
            };
            r.create(&spec("a"), None).unwrap();
            r.create(&spec("b"), None).unwrap();
            assert_eq!(r.create(&spec("a"), None).unwrap_err().kind, ErrorKind::AlreadyExists);
            assert_eq!(r.create(&spec("../x"), None).unwrap_err().kind, ErrorKind::InvalidArgument);
        }
        // Replace b's key file with a.'s: the public-key check must catch it.
        std::fs::copy(dir.path().join("keys/a.pem"), dir.path().join("keys/b.pem")).unwrap();
        let r = ring(dir.path());
        assert!(r.require("a").unwrap().signer().is_ok());
        let b = r.require("b").unwrap();
        assert!(!b.info.available);
        assert_eq!(b.signer().err().unwrap().kind, ErrorKind::KeyUnavailable);
        assert_eq!(r.counts(), (1, 1));
        assert_eq!(r.require("zz").err().unwrap().kind, ErrorKind::UnknownKey);
    }
}
