//! Disk space reserved ahead of a `MDB_WRITEMAP` store's writes, and [`SpaceWatch`]: a
//! full filesystem logged once.
//!
//! With `MDB_WRITEMAP` a transaction writes its pages through a shared mapping of a sparse
//! file. When a new page falls in a hole and the filesystem is full, the kernel cannot back
//! it and the process takes `SIGBUS`: no error, no log, and the next start dies the same
//! way. So before each write transaction the store makes sure the file's blocks are
//! allocated (`posix_fallocate`) some way past the last page in use; when that allocation
//! fails for lack of space the write is refused with [`StoreError::NoSpace`] before any
//! page is touched. Pages reused from LMDB's free list were written before and are
//! allocated already.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use lmdb::Environment;

use crate::StoreError;

/// Allocated ahead of the last page in use, when a write finds less than [`LOW`] ahead.
const AHEAD: u64 = 4 << 20;
/// A write transaction may add this much before the reserve is topped up again; no store
/// writes more in one transaction.
const LOW: u64 = 2 << 20;

/// The allocated extent of a `MDB_WRITEMAP` store's data file.
#[derive(Debug)]
pub(crate) struct Reserve {
    file: File,
    page_size: u64,
    map_size: u64,
    /// Bytes from the start of the file known to be allocated.
    allocated: Mutex<u64>,
    /// The filesystem cannot `fallocate` (reported once; writes go on unprotected).
    unsupported: AtomicBool,
}

impl Reserve {
    /// The reserve of the store whose environment `env` is open in `dir`.
    pub(crate) fn open(dir: &Path, env: &Environment) -> Result<Reserve, StoreError> {
        let path = dir.join("data.mdb");
        let file = File::options()
            .write(true)
            .open(&path)
            .map_err(|source| StoreError::Directory { path: path.clone(), source })?;
        let stat = env.stat().map_err(StoreError::lmdb("stat"))?;
        let info = env.info().map_err(StoreError::lmdb("info"))?;
        Ok(Reserve {
            file,
            page_size: u64::from(stat.page_size()),
            map_size: info.map_size() as u64,
            allocated: Mutex::new(0),
            unsupported: AtomicBool::new(false),
        })
    }

    /// Makes sure at least [`LOW`] bytes past the last page in use are allocated, topping
    /// the reserve up to [`AHEAD`]; `Err(lmdb::Error)` with `ENOSPC` when the filesystem is
    /// full (the caller refuses the write).
    pub(crate) fn ensure(&self, env: &Environment) -> Result<(), lmdb::Error> {
        if self.unsupported.load(Ordering::Relaxed) {
            return Ok(());
        }
        let info = env.info()?;
        let used = (info.last_pgno() as u64 + 1) * self.page_size;
        let mut allocated = self.allocated.lock().unwrap_or_else(|p| p.into_inner());
        if *allocated >= (used + LOW).min(self.map_size) {
            return Ok(());
        }
        let target = (used + AHEAD).min(self.map_size);
        let start = (*allocated).min(target);
        let (offset, len) = (to_off(start), to_off(target - start));
        match nix::fcntl::posix_fallocate(self.file.as_fd(), offset, len) {
            Ok(()) => {
                *allocated = target;
                Ok(())
            }
            Err(nix::errno::Errno::ENOSPC) => Err(lmdb::Error::Other(nix::libc::ENOSPC)),
            Err(e @ (nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EINVAL)) => {
                tracing::warn!(error = %e, "the store's filesystem cannot reserve space ahead; a full disk may crash the process");
                self.unsupported.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(lmdb::Error::Other(e as i32)),
        }
    }
}

fn to_off(n: u64) -> nix::libc::off_t {
    nix::libc::off_t::try_from(n).unwrap_or(nix::libc::off_t::MAX)
}

/// A store's writes refused for lack of space (or because its filesystem went read-only),
/// logged once per episode: the first refusal
/// is logged as an error saying what `consequence` is, and the first successful write after
/// the filesystem has room again (at least [`ROOM_AGAIN_BYTES`] free) is logged too; a new
/// refusal then logs anew. (On a nearly full disk some writes still succeed in pages LMDB
/// frees and reuses, so a success alone does not end the episode.)
#[derive(Debug)]
pub struct SpaceWatch {
    dir: PathBuf,
    consequence: &'static str,
    full: AtomicBool,
}

/// Free space on the store's filesystem that ends an episode of [`SpaceWatch`].
pub const ROOM_AGAIN_BYTES: u64 = 1 << 20;

/// What a write's outcome changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceEvent {
    /// The first write refused for lack of space or on a read-only filesystem (logged).
    Full,
    /// The first successful write after that, with room again (logged).
    Writable,
}

impl SpaceWatch {
    /// Watches the store in `dir`; `consequence` tells the operator what fails meanwhile
    /// and what still works.
    pub fn new(dir: &Path, consequence: &'static str) -> Self {
        Self { dir: dir.to_owned(), consequence, full: AtomicBool::new(false) }
    }

    /// Notes a write's outcome; logs and returns what changed.
    pub fn note<R, E: AsRef<StoreError>>(&self, outcome: &Result<R, E>) -> Option<SpaceEvent> {
        match outcome {
            Err(e) if e.as_ref().refuses_writes().is_some() => {
                if self.full.swap(true, Ordering::AcqRel) {
                    return None;
                }
                let why = match e.as_ref() {
                    StoreError::ReadOnly { .. } => "because its filesystem is read-only",
                    StoreError::Failed { .. } => "because its filesystem failed",
                    _ => "for lack of space",
                };
                tracing::error!(
                    dir = %self.dir.display(),
                    error = %e.as_ref(),
                    "the store refuses writes {why}: {} (logged once until writes succeed again)",
                    self.consequence
                );
                Some(SpaceEvent::Full)
            }
            Ok(_) if self.full.load(Ordering::Acquire) && self.has_room() => {
                if !self.full.swap(false, Ordering::AcqRel) {
                    return None;
                }
                tracing::info!(dir = %self.dir.display(), "the store accepts writes again");
                Some(SpaceEvent::Writable)
            }
            _ => None,
        }
    }

    /// Whether the store refuses writes for lack of space, as far as known.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Whether the filesystem has room (unknown counts as room).
    #[allow(clippy::useless_conversion, reason = "fsblkcnt_t and c_ulong are 32 bits on some targets")]
    fn has_room(&self) -> bool {
        nix::sys::statvfs::statvfs(&self.dir)
            .map(|s| u64::from(s.blocks_available()).saturating_mul(u64::from(s.fragment_size())) >= ROOM_AGAIN_BYTES)
            .unwrap_or(true)
    }
}

impl AsRef<StoreError> for StoreError {
    fn as_ref(&self) -> &StoreError {
        self
    }
}
