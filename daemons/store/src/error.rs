//! The store's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the store layer.
///
/// Variants that concern one table name it, so a log line says where to look.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store directory could not be created or resolved.
    #[error("store directory {path}: {source}")]
    Directory {
        /// The directory given to [`Store::open`](crate::Store::open).
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// The background flush thread of
    /// [`Durability::Process`](crate::Durability::Process) could not be started.
    #[error("cannot start the store flush thread: {0}")]
    FlushThread(#[source] io::Error),

    /// The writer thread of [`Store::write_grouped`](crate::Store::write_grouped)
    /// could not be started.
    #[error("cannot start the store writer thread: {0}")]
    WriterThread(#[source] io::Error),

    /// A grouped write got no answer: its closure panicked (its writes were
    /// taken back) or the store's writer thread has stopped.
    #[error("the grouped write was not committed: its closure panicked or the store is closing")]
    WriterGone,

    /// This process already has the environment in this directory open.
    ///
    /// LMDB must not be opened twice by one process: closing either handle
    /// would release the other's file locks. Clone the existing [`Store`](crate::Store)
    /// instead.
    #[error("store {path} is already open in this process; clone the existing Store")]
    AlreadyOpen {
        /// The canonical path of the store directory.
        path: PathBuf,
    },

    /// [`copy_environment`](crate::copy_environment) or [`inspect`](crate::inspect)
    /// found no LMDB environment (no `data.mdb`) in the directory.
    #[error("no LMDB environment in {path} (no data.mdb)")]
    NoEnvironment {
        /// The directory looked in.
        path: PathBuf,
    },

    /// A copy's destination directory or file could not be created or written.
    #[error("copy destination {path}: {source}")]
    CopyDestination {
        /// The directory or file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// The environment was created by a different application.
    #[error("store belongs to application {found:?}, expected {expected:?}")]
    WrongApplication {
        /// The application recorded in the store.
        found: String,
        /// The application that tried to open it.
        expected: String,
    },

    /// The environment has a different schema version than the code expects.
    #[error("store schema version is {found}, expected {expected}")]
    SchemaVersion {
        /// The schema version recorded in the store.
        found: u32,
        /// The schema version the opening code understands.
        expected: u32,
    },

    /// Stored bytes could not be decoded: a key or value of the wrong type or
    /// length, or the `meta` table is incomplete.
    #[error("table {table}: corrupt data: {detail}")]
    Corrupt {
        /// The table holding the bad entry.
        table: &'static str,
        /// What failed to decode.
        detail: String,
    },

    /// A value could not be serialised.
    #[error("table {table}: cannot encode value: {detail}")]
    Encode {
        /// The table being written.
        table: &'static str,
        /// The serialiser's message.
        detail: String,
    },

    /// [`WriteTxn::insert_new`](crate::WriteTxn::insert_new) found the key already present.
    #[error("table {table}: key already exists")]
    AlreadyExists {
        /// The table being written.
        table: &'static str,
    },

    /// An encoded key is empty or longer than LMDB's limit of
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes.
    #[error("table {table}: encoded key is {len} bytes, must be 1..={max}", max = crate::MAX_KEY_LEN)]
    KeySize {
        /// The table being accessed.
        table: &'static str,
        /// The length of the encoded key.
        len: usize,
    },

    /// [`WriteTxn::next_u64_key`](crate::WriteTxn::next_u64_key) found `u64::MAX` as the last key.
    #[error("table {table}: u64 key space exhausted")]
    KeySpaceExhausted {
        /// The table being appended to.
        table: &'static str,
    },

    /// The table name is reserved for the store's own use.
    #[error("table name {name:?} is reserved")]
    ReservedTableName {
        /// The rejected name.
        name: &'static str,
    },

    /// A [`Table`](crate::Table) handle from one store was used with another.
    #[error("table {table} belongs to a different store")]
    ForeignTable {
        /// The table's name.
        table: &'static str,
    },

    /// The LMDB map is full (`MDB_MAP_FULL`): raise
    /// [`StoreOptions::map_size`](crate::StoreOptions::map_size). The
    /// transaction was aborted.
    #[error("LMDB map is full; raise map_size")]
    MapFull,

    /// The filesystem holding the store has no space left (`ENOSPC`): the
    /// transaction was aborted and nothing of it is stored. Writes succeed
    /// again once space is freed; reads are not affected.
    #[error("LMDB {operation}: no space left on the store's filesystem")]
    NoSpace {
        /// What the store was doing.
        operation: &'static str,
    },

    /// The filesystem holding the store has become read-only (`EROFS`), as
    /// ext4 makes itself after an I/O error (`errors=remount-ro`): the
    /// transaction was aborted and nothing of it is stored. Reads are not
    /// affected; writes succeed again once the filesystem is checked and
    /// mounted read-write, and the daemon restarted. Also every write to a
    /// store [`Store::open`](crate::Store::open) could only open read-only.
    #[error("LMDB {operation}: the store's filesystem is read-only")]
    ReadOnly {
        /// What the store was doing.
        operation: &'static str,
    },

    /// The store stopped taking writes for good, until it is opened again: a write failed
    /// half-way and LMDB declared the environment unusable (`MDB_PANIC`, as when the meta
    /// page cannot be written because the filesystem failed), or a background flush of a
    /// [`Durability::Process`](crate::Durability::Process) store failed (what it was
    /// flushing may never reach the disk). Reads go on from what is committed, through
    /// a read-only environment; writes succeed again once the filesystem is repaired and
    /// the daemon restarted.
    #[error("the store's filesystem failed ({detail}); writes are refused until the daemon restarts on a repaired filesystem")]
    Failed {
        /// What failed.
        detail: String,
    },

    /// More named tables than [`StoreOptions::max_tables`](crate::StoreOptions::max_tables)
    /// (`MDB_DBS_FULL`).
    #[error("too many tables; raise max_tables")]
    TooManyTables,

    /// Any other LMDB failure.
    #[error("LMDB {operation}: {detail}")]
    Lmdb {
        /// What the store was doing.
        operation: &'static str,
        /// LMDB's message.
        detail: String,
    },
}

impl StoreError {
    /// The kind of the underlying I/O error, for the errors that have one
    /// ([`StoreError::Directory`], [`StoreError::CopyDestination`]): lets a
    /// caller tell, say, permission denied from the rest.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Self::Directory { source, .. } | Self::CopyDestination { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    /// Why the store refuses writes for a while, if that is this error: `"is full"` (no
    /// space left, or the LMDB map full), `"is read-only"` (the filesystem) or `"has
    /// failed"` ([`StoreError::Failed`], until a restart). Daemons
    /// answer these with "try again later" in their protocol's form and log them once
    /// ([`SpaceWatch`](crate::SpaceWatch)); anything else is an internal error.
    pub fn refuses_writes(&self) -> Option<&'static str> {
        match self {
            Self::NoSpace { .. } | Self::MapFull => Some("is full"),
            Self::ReadOnly { .. } => Some("is read-only"),
            Self::Failed { .. } => Some("has failed"),
            _ => None,
        }
    }

    /// A key that failed to decode; the table is filled in by the caller.
    pub(crate) fn bad_key(detail: impl Into<String>) -> Self {
        Self::Corrupt { table: "", detail: format!("key: {}", detail.into()) }
    }

    /// Names the table in a [`StoreError::Corrupt`] raised by [`Key::decode`](crate::Key::decode),
    /// which does not know it.
    pub(crate) fn in_table(self, name: &'static str) -> Self {
        match self {
            Self::Corrupt { table: "", detail } => Self::Corrupt { table: name, detail },
            other => other,
        }
    }

    /// Maps an LMDB error, keeping the kinds callers act on distinct.
    pub(crate) fn lmdb(operation: &'static str) -> impl Fn(lmdb::Error) -> Self {
        move |err| match err {
            lmdb::Error::MapFull => Self::MapFull,
            lmdb::Error::DbsFull => Self::TooManyTables,
            lmdb::Error::Panic => Self::Failed { detail: format!("LMDB {operation}: {}", lmdb::Error::Panic) },
            // A write the disk could not take (ext4 answers EIO before it remounts itself
            // read-only): what is on disk is the last commit, and nothing says the next write
            // would fare better.
            lmdb::Error::Other(code) if code == nix::errno::Errno::EIO as i32 => {
                Self::Failed { detail: format!("LMDB {operation}: {}", io::Error::from_raw_os_error(code)) }
            }
            lmdb::Error::Other(code) if io::Error::from_raw_os_error(code).kind() == io::ErrorKind::StorageFull => {
                Self::NoSpace { operation }
            }
            lmdb::Error::Other(code)
                if io::Error::from_raw_os_error(code).kind() == io::ErrorKind::ReadOnlyFilesystem =>
            {
                Self::ReadOnly { operation }
            }
            other => Self::Lmdb { operation, detail: other.to_string() },
        }
    }
}
