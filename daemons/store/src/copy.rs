//! Consistent copies of a live environment, for backups: LMDB's own
//! compacting copy (`mdb_env_copyfd2` with `MDB_CP_COMPACT`), taken in one read
//! transaction while writers go on, in this process ([`Store::copy_to`]) or in
//! another one ([`copy_environment`]: signetctl copying a running daemon's store).
//!
//! The copy walks the B-trees of one snapshot and writes each page it reaches,
//! renumbered, into a fresh file: free pages are left out, and so is the
//! unused tail of an `MDB_WRITEMAP` store's data file (which such a store
//! extends to its whole map size, see [`StoreOptions::write_map`](crate::StoreOptions::write_map)).
//! A writer never changes a page the snapshot can reach, with or without
//! `MDB_WRITEMAP` (LMDB reuses a page only once no reader can see it), so the
//! copy is the database exactly as one committed transaction left it. Copying
//! the files instead would not be: a commit may land half-way through.
//!
//! This is the only module of the crate with `unsafe` code: the one call into
//! LMDB's C API that lmdb-rkv does not wrap.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Seek;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use lmdb::{Environment, EnvironmentFlags, Transaction};

use crate::store::{Registration, META_APPLICATION, META_SCHEMA_VERSION, META_TABLE};
use crate::{Store, StoreError};

/// The name of an environment's data file; its copy has the same name.
pub const DATA_FILE: &str = "data.mdb";

/// A copy written by [`Store::copy_to`] or [`copy_environment`], or a store
/// looked at by [`inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCopy {
    /// The data file (`<dir>/data.mdb`).
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The application recorded in the store ([`StoreOptions::application`](crate::StoreOptions::application)).
    pub application: String,
    /// The schema version recorded in the store.
    pub schema_version: u32,
}

impl Store {
    /// Writes a compacted, consistent copy of this store into `dest/data.mdb`
    /// (`dest` is created, mode 0700, if missing; the file, mode 0600, must not
    /// exist yet). Writers carry on meanwhile; the copy holds what one
    /// committed transaction left. The copy is fsynced before this returns and
    /// opens as a store like any other (it has no lock file yet; LMDB makes one).
    pub fn copy_to(&self, dest: &Path) -> Result<EnvCopy, StoreError> {
        let (application, schema_version) = identity(&self.inner.env)?;
        let (path, bytes) = copy_env(&self.inner.env, dest)?;
        Ok(EnvCopy { path, bytes, application, schema_version })
    }
}

/// [`Store::copy_to`] for the store in `dir`, which another process may have
/// open and be writing (a running daemon): the environment is opened read-only
/// here for the copy and closed again. The caller needs read and write access
/// to `lock.mdb` (LMDB's reader table) and read access to `data.mdb`.
///
/// Fails with [`StoreError::AlreadyOpen`] if this process has `dir` open as a
/// [`Store`] (copy that one with [`Store::copy_to`]), and with
/// [`StoreError::NoEnvironment`] if `dir` holds no `data.mdb`.
pub fn copy_environment(dir: &Path, dest: &Path) -> Result<EnvCopy, StoreError> {
    let (env, _registration) = open_read_only(dir, Lock::Shared)?;
    let (application, schema_version) = identity(&env)?;
    let (path, bytes) = copy_env(&env, dest)?;
    Ok(EnvCopy { path, bytes, application, schema_version })
}

/// Opens a copy (a backup's, which nothing writes) read-only and reads whose
/// store it is: checks that the copy opens before it is put in place. It is
/// opened without LMDB's lock file, so nothing is written beside it; never
/// use this on a store a process may be writing.
/// [`EnvCopy::path`] and [`EnvCopy::bytes`] are its data file's.
pub fn inspect(dir: &Path) -> Result<EnvCopy, StoreError> {
    let (env, registration) = open_read_only(dir, Lock::None)?;
    let (application, schema_version) = identity(&env)?;
    let path = registration.path.join(DATA_FILE);
    let bytes = std::fs::metadata(&path).map_err(|source| StoreError::Directory { path: path.clone(), source })?.len();
    Ok(EnvCopy { path, bytes, application, schema_version })
}

/// How a read-only environment takes part in LMDB's locking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    /// Through the store's `lock.mdb`, as a reader beside its writers.
    Shared,
    /// Not at all (`MDB_NOLOCK`): for copies nothing writes.
    None,
}

/// The environment in `dir`, read-only, and its claim on the directory in this
/// process (LMDB must not open one environment twice in a process).
fn open_read_only(dir: &Path, lock_mode: Lock) -> Result<(Environment, Registration), StoreError> {
    let dir_err = |source| StoreError::Directory { path: dir.to_path_buf(), source };
    let path = dir.canonicalize().map_err(dir_err)?;
    let data = path.join(DATA_FILE);
    if !data.is_file() {
        return Err(StoreError::NoEnvironment { path });
    }
    // Permission problems as plain I/O errors naming the file, before LMDB
    // reports them as a bare errno.
    let lock = path.join("lock.mdb");
    File::open(&data).map_err(|source| StoreError::Directory { path: data.clone(), source })?;
    // A store without a lock file is open nowhere (opening makes one, closing
    // leaves it): read it without one rather than leave a new one behind,
    // owned by whoever runs the copy, that its daemon might not open.
    let lock_mode = if lock.exists() { lock_mode } else { Lock::None };
    if lock_mode == Lock::Shared {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock)
            .map_err(|source| StoreError::Directory { path: lock.clone(), source })?;
    }
    let registration = Registration::claim(path)?;
    // No map size: LMDB maps what the store's meta page records (the size
    // its own process opened it with), and at least what is in use.
    let mut flags = EnvironmentFlags::READ_ONLY | EnvironmentFlags::NO_TLS;
    if lock_mode == Lock::None {
        flags |= EnvironmentFlags::NO_LOCK;
    }
    let env = Environment::new()
        .set_flags(flags)
        .set_max_dbs(1)
        .open(&registration.path)
        .map_err(StoreError::lmdb("open environment"))?;
    Ok((env, registration))
}

/// The application name and schema version in the store's `meta` table.
fn identity(env: &Environment) -> Result<(String, u32), StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt { table: META_TABLE, detail };
    let meta = env.open_db(Some(META_TABLE)).map_err(StoreError::lmdb("open meta table"))?;
    let txn = env.begin_ro_txn().map_err(StoreError::lmdb("begin read"))?;
    let application = txn.get(meta, &META_APPLICATION).map_err(StoreError::lmdb("read meta"))?;
    let application =
        String::from_utf8(application.to_vec()).map_err(|e| corrupt(format!("application is not UTF-8: {e}")))?;
    let version = txn.get(meta, &META_SCHEMA_VERSION).map_err(StoreError::lmdb("read meta"))?;
    let version = <[u8; 4]>::try_from(version)
        .map(u32::from_be_bytes)
        .map_err(|_| corrupt(format!("schema_version is {} bytes, not 4", version.len())))?;
    Ok((application, version))
}

/// Copies `env` into a new `dest/data.mdb`, fsynced; its path and size.
fn copy_env(env: &Environment, dest: &Path) -> Result<(PathBuf, u64), StoreError> {
    let dest_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::CopyDestination { path, source }
    };
    DirBuilder::new().recursive(true).mode(0o700).create(dest).map_err(dest_err(dest))?;
    let path = dest.join(DATA_FILE);
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(dest_err(&path))?;
    let copied = (|| {
        let mut result = compact_copy(env, &file);
        if result == Err(lmdb::Error::MapResized) {
            // Another process grew the store past the map this one opened:
            // adopt its size (no transaction is open here) and start over.
            env.set_map_size(0).map_err(StoreError::lmdb("map resize"))?;
            file.set_len(0).and_then(|()| file.rewind()).map_err(dest_err(&path))?;
            result = compact_copy(env, &file);
        }
        result.map_err(StoreError::lmdb("copy environment"))?;
        file.sync_all().map_err(dest_err(&path))?;
        File::open(dest).and_then(|d| d.sync_all()).map_err(dest_err(dest))?;
        file.metadata().map(|m| m.len()).map_err(dest_err(&path))
    })();
    match copied {
        Ok(bytes) => Ok((path, bytes)),
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// LMDB's compacting copy of `env` into `file`, from the current position.
fn compact_copy(env: &Environment, file: &File) -> Result<(), lmdb::Error> {
    // SAFETY: `env.env()` is the live MDB_env that `env` owns; the shared
    // borrow keeps it open for the whole call. `file` is an open descriptor
    // we own, opened for writing, and stays open for the whole call.
    // mdb_env_copyfd2 begins and ends its own read-only transaction (MDB_NOTLS
    // environments allow it beside any other transaction of this process),
    // writes only to the descriptor, and keeps neither handle after it returns.
    let rc = unsafe { lmdb_sys::mdb_env_copyfd2(env.env(), file.as_raw_fd(), lmdb_sys::MDB_CP_COMPACT) };
    match rc {
        0 => Ok(()),
        rc => Err(lmdb::Error::from_err_code(rc)),
    }
}
