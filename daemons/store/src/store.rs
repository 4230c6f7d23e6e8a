//! The environment handle: opening, the schema check, durability, transactions.

use std::collections::HashSet;
use std::fs::DirBuilder;
use std::marker::PhantomData;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use lmdb::{Database, DatabaseFlags, Environment, EnvironmentFlags, RoTransaction, Transaction, WriteFlags};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::group::GroupWriter;
use crate::reserve::Reserve;
use crate::txn::{optional, ReadTxn, WriteTxn};
use crate::{Key, StoreError, Table, DATA_FILE};

/// Name of the table holding the store's identity; not available to callers.
pub(crate) const META_TABLE: &str = "meta";
pub(crate) const META_APPLICATION: &[u8] = b"application";
pub(crate) const META_SCHEMA_VERSION: &[u8] = b"schema_version";

/// How to open a [`Store`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Name of the daemon owning the store (e.g. `"acmed"`). Recorded on
    /// creation; opening the store under another name fails with
    /// [`StoreError::WrongApplication`].
    pub application: &'static str,
    /// Version of the table layout the code understands. Recorded on
    /// creation; opening with another version fails with
    /// [`StoreError::SchemaVersion`]. Migrations are the caller's business.
    pub schema_version: u32,
    /// Maximum size of the database in bytes (LMDB's map size). It is address
    /// space, not disk: the file grows as data is written. Writes beyond it
    /// fail with [`StoreError::MapFull`].
    pub map_size: usize,
    /// Maximum number of named tables, not counting the internal `meta` table.
    pub max_tables: u32,
    /// When a commit reaches the disk; see [`Durability`].
    pub durability: Durability,
    /// Opens the environment with LMDB's `MDB_WRITEMAP`: a write
    /// transaction changes the pages in a writable shared mapping instead
    /// of copying them out with `write(2)` at commit. A commit is then
    /// cheaper: no `pwrite` of the dirty pages. The costs: the data file
    /// is extended to `map_size` at once (sparse, so the disk use does not
    /// change, but `ls` shows the full size), and a wild pointer write in
    /// the process could reach the database pages, which the read-only
    /// mapping otherwise forbids. Durability is unchanged: a commit is in
    /// the shared page cache when [`Store::write`] returns, and synced as
    /// [`Durability`] says. Off by default.
    pub write_map: bool,
    /// How long [`Store::write_grouped`]'s writer waits, after a write
    /// arrives, for more to commit with it. Zero (the default): a lone write
    /// is committed at once. A store taking a steady trickle of small writes
    /// whose callers can wait a little (probed's results) trades that wait
    /// for one commit per linger instead of one per write.
    pub group_linger: std::time::Duration,
}

impl StoreOptions {
    /// Options with a 1 GiB map, 32 tables and [`Durability::Sync`].
    pub fn new(application: &'static str, schema_version: u32) -> Self {
        Self {
            application,
            schema_version,
            map_size: 1 << 30,
            max_tables: 32,
            durability: Durability::Sync,
            write_map: false,
            group_linger: std::time::Duration::ZERO,
        }
    }
}

/// When a committed write transaction is safe from which failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every commit is written and `fsync`ed (`fdatasync`) before
    /// [`Store::write`] returns: a returned commit survives a process crash,
    /// a kernel crash and power loss. Costs one or two disk flushes per
    /// commit. Use it for anything that must never be lost, such as issuance
    /// records and audit logs.
    Sync,
    /// The environment is opened with LMDB's `MDB_NOSYNC`: a commit is written
    /// into the OS page cache before
    /// [`Store::write`] returns, but not flushed to disk.
    ///
    /// - **Process crash** (panic, `kill -9`, OOM kill): every returned commit
    ///   survives, since the kernel still holds the pages and writes them out.
    /// - **Kernel crash, power loss or a failed disk** between two flushes:
    ///   the commits returned since the last flush may be lost; the database
    ///   is as the last flush left it.
    /// - **The same during a flush**: the database can be left corrupted
    ///   (`MDB_CORRUPTED` on the next read or write of the pages hit). A
    ///   flush writes the dirty pages in no order LMDB controls: a meta page
    ///   can reach the disk before the pages it points to, and pages of the
    ///   tree already on the disk, reused in memory since the previous flush,
    ///   can be overwritten before the new meta page lands. LMDB documents
    ///   `MDB_NOSYNC` as keeping no integrity across a system crash; only
    ///   [`Durability::Sync`] does (a flush per commit). A flush takes
    ///   milliseconds of every `flush_interval`.
    ///
    /// A background thread calls `mdb_env_sync` every `flush_interval`, and
    /// once more when the last [`Store`] clone is dropped; [`Store::sync`]
    /// flushes on demand. Use it for state that can be rebuilt or re-requested
    /// (caches, OCSP responses, rate-limit counters), or where throughput
    /// matters more than surviving a system crash and backups are kept (signd's
    /// audit log by default; docs/operations.md).
    Process {
        /// Time between background flushes. Each flush is an `fsync`, so
        /// keep it at a second or more; zero flushes back to back.
        flush_interval: Duration,
    },
}

/// One daemon's LMDB environment.
///
/// Cheap to clone (an `Arc`); `Send + Sync`. Read transactions run
/// concurrently on any thread; write transactions are serialised by LMDB, so
/// a writer waits for the current one to finish. The environment closes when
/// the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl Store {
    /// Opens the environment in `dir`, creating the directory (mode 0700) and
    /// the database files (mode 0600) if needed. The environment uses
    /// `MDB_NOTLS`, so read transactions are not tied to a thread.
    ///
    /// On a new environment the `meta` table records `opts.application` and
    /// `opts.schema_version`; on an existing one they must match, or this
    /// fails with [`StoreError::WrongApplication`] or
    /// [`StoreError::SchemaVersion`]. A directory may be open only once per
    /// process ([`StoreError::AlreadyOpen`]).
    ///
    /// A store that exists but cannot be written, its filesystem read-only or its
    /// files not writable by this process, is opened read-only: reads are served
    /// from what is committed, every write is refused with
    /// [`StoreError::ReadOnly`] (as a daemon restarted on a filesystem turned
    /// read-only after an error needs, to go on answering what it can).
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        Self::open_with(dir, opts, false)
    }

    fn open_with(dir: &Path, opts: StoreOptions, force_read_only: bool) -> Result<Store, StoreError> {
        let dir_err = |source| StoreError::Directory { path: dir.to_path_buf(), source };
        DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(dir_err)?;
        let path = dir.canonicalize().map_err(dir_err)?;
        let registration = Registration::claim(path)?;
        if force_read_only {
            return Self::open_read_only(registration, opts);
        }

        let mut flags = EnvironmentFlags::NO_TLS;
        if let Durability::Process { .. } = opts.durability {
            flags |= EnvironmentFlags::NO_SYNC;
        }
        if opts.write_map {
            flags |= EnvironmentFlags::WRITE_MAP;
        }
        let env = Environment::new()
            .set_max_dbs(opts.max_tables.saturating_add(1))
            .set_map_size(opts.map_size)
            .set_flags(flags)
            .open_with_permissions(&registration.path, 0o600);
        let env = match env {
            Err(lmdb::Error::Other(code)) if cannot_write(code) && registration.path.join(DATA_FILE).exists() => {
                return Self::open_read_only(registration, opts);
            }
            other => Arc::new(other.map_err(StoreError::lmdb("open environment"))?),
        };
        check_meta(&env, &opts)?;
        let reserve = if opts.write_map { Some(Arc::new(Reserve::open(&registration.path, &env)?)) } else { None };

        let failure = Arc::new(OnceLock::new());
        let flusher = match opts.durability {
            Durability::Sync => None,
            Durability::Process { flush_interval } => {
                Some(Flusher::start(Arc::clone(&env), flush_interval, Arc::clone(&failure))?)
            }
        };
        let meta = env.open_db(Some(META_TABLE)).map_err(StoreError::lmdb("open meta table"))?;
        Ok(Store {
            inner: Arc::new(Inner {
                id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
                commits: Arc::new(AtomicU64::new(0)),
                application: opts.application,
                group_linger: opts.group_linger,
                reserve,
                env,
                writer: OnceLock::new(),
                flusher,
                failure,
                fallback: OnceLock::new(),
                read_only: false,
                tables: Mutex::new(vec![(META_TABLE, meta)]),
                map_size: opts.map_size,
                max_dbs: opts.max_tables.saturating_add(1),
                _registration: registration,
            }),
        })
    }

    /// Opens an existing store read-only: no lock file, no writer, no flusher, no
    /// reserve; [`Inner::check_failed`] refuses every write.
    fn open_read_only(registration: Registration, opts: StoreOptions) -> Result<Store, StoreError> {
        let env = read_only_environment(&registration.path, opts.max_tables.saturating_add(1), opts.map_size)
            .map_err(StoreError::lmdb("open environment read-only"))?;
        verify_meta(&env, &opts)?;
        let meta = env.open_db(Some(META_TABLE)).map_err(StoreError::lmdb("open meta table"))?;
        tracing::error!(dir = %registration.path.display(), "the store cannot be written (its filesystem is read-only, or its files are not writable): reads are served from what is committed, writes are refused until the daemon restarts on a writable store");
        Ok(Store {
            inner: Arc::new(Inner {
                id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
                commits: Arc::new(AtomicU64::new(0)),
                application: opts.application,
                group_linger: opts.group_linger,
                reserve: None,
                env: Arc::new(env),
                writer: OnceLock::new(),
                flusher: None,
                failure: Arc::new(OnceLock::new()),
                fallback: OnceLock::new(),
                read_only: true,
                tables: Mutex::new(vec![(META_TABLE, meta)]),
                map_size: opts.map_size,
                max_dbs: opts.max_tables.saturating_add(1),
                _registration: registration,
            }),
        })
    }

    /// Whether the store was opened read-only ([`Store::open`]): every write is refused.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The store's directory (canonical).
    pub fn path(&self) -> &Path {
        &self.inner._registration.path
    }

    /// Returns the handle for table `name`, creating it if missing.
    ///
    /// Call this at startup and keep the [`Table`]: it is `Copy` and valid for
    /// the life of the store. Do not call it inside a [`Store::write`]
    /// closure: it needs the write lock itself and would wait forever. Types
    /// are not recorded; opening one table with two value types is allowed
    /// and decoding then fails with [`StoreError::Corrupt`].
    pub fn table<K, V>(&self, name: &'static str) -> Result<Table<K, V>, StoreError>
    where
        K: Key,
        V: Serialize + DeserializeOwned,
    {
        if name == META_TABLE {
            return Err(StoreError::ReservedTableName { name });
        }
        let db = if self.inner.read_only {
            match self.inner.env.open_db(Some(name)) {
                Err(lmdb::Error::NotFound) => return Err(StoreError::ReadOnly { operation: "create table" }),
                other => other.map_err(StoreError::lmdb("open table"))?,
            }
        } else {
            self.inner.env.create_db(Some(name), DatabaseFlags::empty()).map_err(StoreError::lmdb("create table"))?
        };
        let mut tables = self.inner.tables.lock().unwrap_or_else(|p| p.into_inner());
        if !tables.iter().any(|(n, _)| *n == name) {
            tables.push((name, db));
        }
        Ok(Table { db, name, store_id: self.inner.id, _types: PhantomData })
    }

    /// Runs `f` in a read transaction: a consistent snapshot, unaffected by
    /// concurrent writers. Keep it short; a long reader stops LMDB reusing
    /// pages freed since it began.
    ///
    /// After the environment failed ([`StoreError::Failed`]), reads go to a
    /// read-only environment opened on the same file, with what was committed.
    pub fn read<R>(&self, f: impl FnOnce(&ReadTxn<'_>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let txn = ReadTxn::new(self.inner.begin_read()?, self.inner.id);
        f(&txn)
        // The transaction is aborted (released) on drop.
    }

    /// Runs `f` in the write transaction: commits if it returns `Ok`, aborts
    /// (leaving nothing behind) if it returns `Err` or panics. Waits while
    /// another writer runs. When this returns `Ok` the commit is as durable
    /// as [`StoreOptions::durability`] promises.
    pub fn write<R>(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        self.try_write(f)
    }

    /// [`Store::write`] with the caller's error type, for closures that abort
    /// on a domain error (e.g. an order in the wrong state) as well as on
    /// store errors.
    pub fn try_write<R, E>(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, E>) -> Result<R, E>
    where
        E: From<StoreError>,
    {
        self.inner.check_failed()?;
        let lmdb = |operation| {
            let inner = &self.inner;
            move |e| inner.noted(StoreError::lmdb(operation)(e))
        };
        if let Some(reserve) = &self.inner.reserve {
            reserve.ensure(&self.inner.env).map_err(lmdb("reserve space"))?;
        }
        let txn = self.inner.env.begin_rw_txn().map_err(lmdb("begin write"))?;
        let mut txn = WriteTxn::new(txn, self.inner.id);
        let out = f(&mut txn)?;
        txn.into_inner().commit().map_err(lmdb("commit"))?;
        self.inner.commits.fetch_add(1, Ordering::Release);
        Ok(out)
    }

    /// [`Store::try_write`] for many concurrent writers: the closure runs on
    /// the store's writer thread, in one transaction with the other writes
    /// queued meanwhile (each in its own nested transaction), and the
    /// returned future resolves once that transaction is committed, as
    /// durable as [`StoreOptions::durability`] promises. With
    /// [`Durability::Sync`] a group shares one disk flush instead of paying
    /// one each, and the caller's thread never blocks: call it from async
    /// code.
    ///
    /// The closure's `Err` (or panic, reported as
    /// [`StoreError::WriterGone`]) takes back its own writes only; if the
    /// group's commit fails, every closure in it gets the error and nothing
    /// of it is stored. With [`StoreOptions::write_map`] (no nested
    /// transactions in LMDB) each write is committed on its own.
    pub fn write_grouped<R, E, F>(&self, f: F) -> impl std::future::Future<Output = Result<R, E>> + Send + 'static
    where
        F: for<'t> FnOnce(&mut WriteTxn<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let submitted = match self.inner.check_failed().map(|()| self.inner.writer()) {
            Err(refused) => Err(refused),
            Ok(Ok(writer)) => Ok(writer.submit(f)),
            Ok(Err(e)) => Err(StoreError::WriterThread(std::io::Error::other(e.to_owned()))),
        };
        async move {
            match submitted {
                Ok(done) => done.await,
                Err(e) => Err(E::from(e)),
            }
        }
    }

    /// How many write transactions have been committed through this handle
    /// (from any thread, grouped or not) since it was opened. It grows before
    /// any writer learns that its commit succeeded, so a cache of what the
    /// store holds, filled after reading this number, is current for as long
    /// as the number has not changed: read it *before* the read transaction
    /// the cached value comes from.
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::Acquire)
    }

    /// Flushes all committed transactions to disk (`fsync`). Needed only with
    /// [`Durability::Process`], e.g. before reporting a batch as safe.
    ///
    /// Also fails if a background flush failed since the previous call, since
    /// commits made before it may not be on disk.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.inner.check_failed()?;
        self.inner.env.sync(true).map_err(|e| self.inner.noted(StoreError::lmdb("sync")(e)))?;
        match self.inner.flusher.as_ref().and_then(Flusher::take_failure) {
            Some(detail) => Err(StoreError::Lmdb { operation: "background sync", detail }),
            None => Ok(()),
        }
    }

    /// The application name recorded in the store.
    pub fn application(&self) -> &'static str {
        self.inner.application
    }
}

/// Identifies stores so a [`Table`] cannot be used with the wrong one.
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// Canonical paths of the environments open in this process.
static OPEN_PATHS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

#[derive(Debug)]
pub(crate) struct Inner {
    id: u64,
    /// Write transactions committed through this handle ([`Store::commits`]).
    commits: Arc<AtomicU64>,
    application: &'static str,
    /// [`StoreOptions::group_linger`].
    group_linger: std::time::Duration,
    /// Disk space reserved ahead of writes through the map (with `write_map`).
    reserve: Option<Arc<Reserve>>,
    // Field order is drop order: stop the writer thread (it commits what is
    // queued), then the flusher (it syncs one last time), close the
    // environment once its Arc count reaches zero, then release the path so
    // the directory may be opened again.
    writer: OnceLock<Result<GroupWriter, String>>,
    flusher: Option<Flusher>,
    /// Set once, when the store stops taking writes for good ([`StoreError::Failed`]).
    failure: Arc<OnceLock<String>>,
    /// After `MDB_PANIC`: the same file opened read-only, for reads (or why it could not be).
    fallback: OnceLock<Result<Environment, String>>,
    /// Opened read-only ([`Store::open`] on a store it cannot write): `env` is read-only.
    read_only: bool,
    /// Every table's handle, in the order LMDB assigned them, the meta table first:
    /// the read-only environment must give each table the same handle.
    tables: Mutex<Vec<(&'static str, Database)>>,
    map_size: usize,
    max_dbs: u32,
    pub(crate) env: Arc<Environment>,
    _registration: Registration,
}

impl Inner {
    /// `Err(StoreError::Failed)` once the store has stopped taking writes.
    fn check_failed(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly { operation: "write" });
        }
        match self.failure.get() {
            Some(detail) => Err(StoreError::Failed { detail: detail.clone() }),
            None => Ok(()),
        }
    }

    /// Passes `e` through, remembering a [`StoreError::Failed`] for every later write.
    fn noted(&self, e: StoreError) -> StoreError {
        note_failure(&self.failure, &e);
        e
    }

    /// A read transaction: on the environment, or on the read-only one once the
    /// environment has failed.
    fn begin_read(&self) -> Result<RoTransaction<'_>, StoreError> {
        if self.fallback.get().is_none() {
            match self.env.begin_ro_txn() {
                Err(lmdb::Error::Panic) => {
                    note_failure(&self.failure, &StoreError::lmdb("begin read")(lmdb::Error::Panic));
                }
                other => return other.map_err(StoreError::lmdb("begin read")),
            }
        }
        let fallback = self.fallback.get_or_init(|| self.open_read_only());
        match fallback {
            Ok(env) => env.begin_ro_txn().map_err(StoreError::lmdb("begin read (read-only)")),
            Err(detail) => Err(StoreError::Failed { detail: detail.clone() }),
        }
    }

    /// The group writer, started on first use.
    fn writer(&self) -> Result<&GroupWriter, &str> {
        let writer = self.writer.get_or_init(|| {
            GroupWriter::start(
                Arc::clone(&self.env),
                self.id,
                self.reserve.clone(),
                self.group_linger,
                Arc::clone(&self.failure),
                Arc::clone(&self.commits),
            )
            .map_err(|e| e.to_string())
        });
        writer.as_ref().map_err(String::as_str)
    }

    /// Opens the store's file again, read-only and without LMDB's lock file (nothing
    /// writes to it any more), giving every table the handle it has.
    fn open_read_only(&self) -> Result<Environment, String> {
        let env = read_only_environment(&self._registration.path, self.max_dbs, self.map_size)
            .map_err(|e| format!("the environment failed, and opening it read-only failed too: {e}"))?;
        let tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        for (name, db) in tables.iter() {
            match env.open_db(Some(name)) {
                Ok(again) if again == *db => {}
                Ok(_) => {
                    return Err(format!("the environment failed, and read-only it numbers table {name} otherwise"))
                }
                Err(e) => {
                    return Err(format!("the environment failed, and read-only table {name} cannot be opened: {e}"))
                }
            }
        }
        tracing::error!(dir = %self._registration.path.display(), "the store's environment failed (a write could not be completed); reads go on from what was committed, writes are refused until the daemon restarts");
        Ok(env)
    }
}

#[cfg(test)]
impl Store {
    /// [`Store::open`] as on a store it cannot write: opened read-only.
    pub(crate) fn open_read_only_for_test(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        Self::open_with(dir, opts, true)
    }

    /// What `MDB_PANIC` leads to, for tests: the store fails and reads move to the
    /// read-only environment.
    pub(crate) fn fail_for_test(&self, detail: &str) {
        let _ = self.inner.failure.set(detail.into());
        let _ = self.inner.fallback.get_or_init(|| self.inner.open_read_only());
    }
}

/// Remembers `e`'s detail in `failure` if it is [`StoreError::Failed`].
pub(crate) fn note_failure(failure: &OnceLock<String>, e: &StoreError) {
    if let StoreError::Failed { detail } = e {
        let _ = failure.set(detail.clone());
    }
}

/// Holds a directory's place in [`OPEN_PATHS`] until dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    pub(crate) path: PathBuf,
}

impl Registration {
    pub(crate) fn claim(path: PathBuf) -> Result<Self, StoreError> {
        // A poisoned lock only means another thread panicked while holding
        // it; the set itself is always left consistent.
        let mut guard = OPEN_PATHS.lock().unwrap_or_else(|p| p.into_inner());
        if !guard.get_or_insert_with(HashSet::new).insert(path.clone()) {
            return Err(StoreError::AlreadyOpen { path });
        }
        Ok(Self { path })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut guard = OPEN_PATHS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = guard.as_mut() {
            set.remove(&self.path);
        }
    }
}

/// The background flush thread of [`Durability::Process`].
#[derive(Debug)]
struct Flusher {
    /// Dropping the sender wakes the thread and makes it exit.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The latest failed background flush, reported by [`Store::sync`]: after
    /// a failed `fsync` the kernel may have dropped the dirty pages, so a
    /// later successful flush does not prove the data reached the disk.
    failure: Arc<Mutex<Option<String>>>,
}

impl Flusher {
    /// Flushes every `interval`; a failed flush also sets `sticky`, so the store
    /// refuses every later write ([`StoreError::Failed`]).
    fn start(env: Arc<Environment>, interval: Duration, sticky: Arc<OnceLock<String>>) -> Result<Self, StoreError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let failure = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&failure);
        let thread = std::thread::Builder::new()
            .name("store-flush".into())
            .spawn(move || loop {
                let last = match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => false,
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                };
                if let Err(err) = env.sync(true) {
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
                    if sticky.set(format!("background flush: {err}")).is_ok() {
                        tracing::error!(error = %err, "the store's background flush failed: what it was writing may be lost; writes are refused until the daemon restarts");
                    }
                }
                if last {
                    break;
                }
            })
            .map_err(StoreError::FlushThread)?;
        Ok(Self { stop: Some(stop), thread: Some(thread), failure })
    }

    /// Takes the message of a background flush failure since the last call.
    fn take_failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread only syncs; if it panicked there is nothing to recover.
            let _ = thread.join();
        }
    }
}

/// Whether an `open(2)` error code says this process may not write the store.
fn cannot_write(code: i32) -> bool {
    matches!(
        std::io::Error::from_raw_os_error(code).kind(),
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
    )
}

/// The environment in `path` opened read-only, without LMDB's lock file: nothing writes
/// to it (the filesystem is read-only, or this process is the only user of the file).
fn read_only_environment(path: &Path, max_dbs: u32, map_size: usize) -> Result<Environment, lmdb::Error> {
    Environment::new()
        .set_max_dbs(max_dbs)
        .set_map_size(map_size)
        .set_flags(EnvironmentFlags::NO_TLS | EnvironmentFlags::READ_ONLY | EnvironmentFlags::NO_LOCK)
        .open(path)
}

/// Records or verifies the application name and schema version.
fn check_meta(env: &Environment, opts: &StoreOptions) -> Result<(), StoreError> {
    let meta =
        env.create_db(Some(META_TABLE), DatabaseFlags::empty()).map_err(StoreError::lmdb("create meta table"))?;
    let mut txn = env.begin_rw_txn().map_err(StoreError::lmdb("begin write"))?;
    let recorded = meta_record(&txn, meta)?;
    if recorded.is_some() {
        return check_recorded(recorded, opts);
    }
    txn.put(meta, &META_APPLICATION, &opts.application, WriteFlags::empty()).map_err(StoreError::lmdb("write meta"))?;
    txn.put(meta, &META_SCHEMA_VERSION, &opts.schema_version.to_be_bytes(), WriteFlags::empty())
        .map_err(StoreError::lmdb("write meta"))?;
    txn.commit().map_err(StoreError::lmdb("commit meta"))
}

/// Verifies the application name and schema version of a store opened read-only.
fn verify_meta(env: &Environment, opts: &StoreOptions) -> Result<(), StoreError> {
    let meta = match env.open_db(Some(META_TABLE)) {
        // Never written: a store cannot be created read-only.
        Err(lmdb::Error::NotFound) => return Err(StoreError::ReadOnly { operation: "create the store" }),
        other => other.map_err(StoreError::lmdb("open meta table"))?,
    };
    let txn = env.begin_ro_txn().map_err(StoreError::lmdb("begin read"))?;
    match meta_record(&txn, meta)? {
        None => Err(StoreError::ReadOnly { operation: "create the store" }),
        recorded => check_recorded(recorded, opts),
    }
}

/// A store's identity as recorded in its `meta` table: the application name and the
/// schema version, as stored.
type MetaRecord = (Vec<u8>, Vec<u8>);

/// The application name and schema version recorded, `None` if neither is.
fn meta_record(txn: &impl Transaction, meta: Database) -> Result<Option<MetaRecord>, StoreError> {
    let application = optional(txn.get(meta, &META_APPLICATION), "read meta")?.map(<[u8]>::to_vec);
    let version = optional(txn.get(meta, &META_SCHEMA_VERSION), "read meta")?.map(<[u8]>::to_vec);
    match (application, version) {
        (None, None) => Ok(None),
        (Some(app), Some(version)) => Ok(Some((app, version))),
        _ => Err(StoreError::Corrupt {
            table: META_TABLE,
            detail: "only one of application and schema_version is recorded".into(),
        }),
    }
}

/// Checks a recorded application name and schema version against `opts`.
fn check_recorded(recorded: Option<MetaRecord>, opts: &StoreOptions) -> Result<(), StoreError> {
    let Some((app, version)) = recorded else { return Ok(()) };
    let corrupt = |detail: String| StoreError::Corrupt { table: META_TABLE, detail };
    let found = String::from_utf8(app).map_err(|e| corrupt(format!("application is not UTF-8: {e}")))?;
    if found != opts.application {
        return Err(StoreError::WrongApplication { found, expected: opts.application.to_owned() });
    }
    let found = <[u8; 4]>::try_from(version.as_slice())
        .map(u32::from_be_bytes)
        .map_err(|_| corrupt(format!("schema_version is {} bytes, not 4", version.len())))?;
    if found != opts.schema_version {
        return Err(StoreError::SchemaVersion { found, expected: opts.schema_version });
    }
    Ok(())
}
