//! [`LocalDir`]: a log's objects as files below one directory.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{check_relative_path, ObjectKey, PutMode, Storage, StorageError};

/// Objects as files below a root directory, written atomically and durably:
/// a temporary file in the target directory is written and `fsync`ed, then
/// renamed over the target (or, for [`PutMode::Immutable`], linked to it,
/// which fails if it exists), then the directory is `fsync`ed. Directories
/// created on the way are `fsync`ed into their parents once.
///
/// Blocking file calls run on tokio's blocking pool, with one exception: a
/// read of a file whose bytes are all in the page cache is done in place, as
/// a static file server does it (see [`Inner::read_cached`]); handing it to
/// the pool and back would cost more than the read.
#[derive(Debug, Clone)]
pub struct LocalDir {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    root: PathBuf,
    /// Directories known to exist durably (created and synced, or found).
    known_dirs: Mutex<HashSet<PathBuf>>,
    /// Distinguishes temporary files of concurrent writes.
    counter: AtomicU64,
    /// Set once the filesystem refuses `RWF_NOWAIT` reads: every read then
    /// goes to the blocking pool.
    pub(super) no_nowait: AtomicBool,
}

/// What an in-place read found.
pub(super) enum Cached {
    /// The whole file, from the page cache.
    Read(Bytes),
    /// No such file.
    Missing,
    /// Some of it would have to come from the disk.
    WouldBlock,
}

impl LocalDir {
    /// Storage rooted at `root`, which is created (mode 0755) if missing.
    pub fn open(root: &Path) -> Result<Self, StorageError> {
        fs::create_dir_all(root).map_err(io_err("create directory", root))?;
        let root = root.canonicalize().map_err(io_err("resolve", root))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root: root.clone(),
                known_dirs: Mutex::new(HashSet::from([root])),
                counter: AtomicU64::new(0),
                no_nowait: AtomicBool::new(false),
            }),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }
}

impl Storage for LocalDir {
    fn put(&self, key: ObjectKey, data: Bytes, mode: PutMode) -> BoxFuture<'_, Result<(), StorageError>> {
        let inner = self.inner.clone();
        blocking(move || inner.put(&key.path(), &data, mode)).boxed()
    }

    fn get(&self, key: ObjectKey) -> BoxFuture<'_, Result<Option<Bytes>, StorageError>> {
        let inner = self.inner.clone();
        async move {
            let path = inner.file(&key.path())?;
            match inner.read_cached(&path)? {
                Cached::Read(b) => return Ok(Some(b)),
                Cached::Missing => return Ok(None),
                Cached::WouldBlock => {}
            }
            blocking(move || match fs::read(&path) {
                Ok(b) => Ok(Some(Bytes::from(b))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_err("read", &path)(e)),
            })
            .await
        }
        .boxed()
    }

    fn exists(&self, key: ObjectKey) -> BoxFuture<'_, Result<bool, StorageError>> {
        let inner = self.inner.clone();
        blocking(move || {
            let path = inner.file(&key.path())?;
            match fs::symlink_metadata(&path) {
                Ok(m) => Ok(m.is_file()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(io_err("stat", &path)(e)),
            }
        })
        .boxed()
    }

    fn partials(&self, key: ObjectKey) -> BoxFuture<'_, Result<Vec<ObjectKey>, StorageError>> {
        let inner = self.inner.clone();
        blocking(move || {
            if key.is_immutable() && key.with_width(1).is_some() {
                let dir = inner.file(&format!("{}.p", key.path()))?;
                let entries = match fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(io_err("read directory", &dir)(e)),
                };
                let mut out = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(io_err("read directory", &dir))?;
                    let name = entry.file_name();
                    if let Some(k) = name.to_str().and_then(super::partial_width).and_then(|w| key.with_width(w)) {
                        out.push(k);
                    }
                }
                Ok(out)
            } else {
                Ok(Vec::new())
            }
        })
        .boxed()
    }

    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, Result<(), StorageError>> {
        let inner = self.inner.clone();
        blocking(move || {
            let path = inner.file(&key.path())?;
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", &path)(e)),
            }
            // The last partial tile of a `.p` directory takes the directory
            // with it (a directory still holding others stays).
            if !key.is_immutable() && key.with_width(1).is_some() {
                if let Some(dir) = path.parent() {
                    if fs::remove_dir(dir).is_ok() {
                        inner.known_dirs.lock().unwrap_or_else(|p| p.into_inner()).remove(dir);
                    }
                }
            }
            Ok(())
        })
        .boxed()
    }

    fn describe(&self) -> String {
        format!("dir {}", self.inner.root.display())
    }
}

impl Inner {
    /// The file for a relative object path, after checking the path.
    pub(super) fn file(&self, rel: &str) -> Result<PathBuf, StorageError> {
        check_relative_path(rel)?;
        Ok(self.root.join(rel))
    }

    /// Reads `path` on the calling thread if none of it has to wait for the
    /// disk: `open` and `fstat`, then `preadv2` with `RWF_NOWAIT`, which
    /// answers `EAGAIN` instead of starting disk I/O. Files are replaced by
    /// rename, never rewritten, so an open file keeps the length `fstat`
    /// gave. The `open` may still look a cold directory entry up on disk,
    /// as a static file server's does.
    pub(super) fn read_cached(&self, path: &Path) -> Result<Cached, StorageError> {
        if self.no_nowait.load(Ordering::Relaxed) {
            return Ok(Cached::WouldBlock);
        }
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Cached::Missing),
            Err(e) => return Err(io_err("open", path)(e)),
        };
        let meta = file.metadata().map_err(io_err("stat", path))?;
        if !meta.is_file() {
            return Err(io_err("read", path)(io::Error::other("not a regular file")));
        }
        let Ok(len) = usize::try_from(meta.len()) else { return Ok(Cached::WouldBlock) };
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let mut slices = [io::IoSliceMut::new(&mut buf[done..])];
            match rustix::io::preadv2(&file, &mut slices, done as u64, rustix::io::ReadWriteFlags::NOWAIT) {
                Ok(0) => return Ok(Cached::WouldBlock), // shorter than fstat said: let the pool read it
                Ok(n) => done += n,
                Err(rustix::io::Errno::AGAIN) => return Ok(Cached::WouldBlock),
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                    self.no_nowait.store(true, Ordering::Relaxed);
                    return Ok(Cached::WouldBlock);
                }
                Err(e) => return Err(io_err("read", path)(e.into())),
            }
        }
        Ok(Cached::Read(Bytes::from(buf)))
    }

    fn put(&self, rel: &str, data: &[u8], mode: PutMode) -> Result<(), StorageError> {
        let path = self.file(rel)?;
        let dir = path.parent().ok_or_else(|| StorageError::BadPath(rel.to_string()))?;
        self.ensure_dir(dir)?;
        if mode == PutMode::Immutable && path.exists() {
            return Ok(());
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".tmp-{}-{n}", std::process::id()));
        let result = write_synced(&tmp, data).and_then(|()| match mode {
            PutMode::Overwrite => fs::rename(&tmp, &path).map_err(io_err("rename", &path)),
            PutMode::Immutable => match fs::hard_link(&tmp, &path) {
                Ok(()) => Ok(()),
                // Someone else wrote it meanwhile: theirs stays.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(io_err("link", &path)(e)),
            },
        });
        // After a rename the temporary name is gone; after a link (or an
        // error) it is removed here. Failing to remove it only leaves litter.
        let _ = fs::remove_file(&tmp);
        result?;
        sync_dir(dir)
    }

    /// Creates `dir` and its missing parents, each synced into its parent.
    fn ensure_dir(&self, dir: &Path) -> Result<(), StorageError> {
        if self.known(dir) {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut d = dir;
        while !self.known(d) {
            missing.push(d.to_path_buf());
            d = match d.parent() {
                Some(p) if p.starts_with(&self.root) => p,
                _ => return Err(StorageError::BadPath(dir.display().to_string())),
            };
        }
        for d in missing.iter().rev() {
            match fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(io_err("create directory", d)(e)),
            }
            if let Some(parent) = d.parent() {
                sync_dir(parent)?;
            }
            self.known_dirs.lock().unwrap_or_else(|p| p.into_inner()).insert(d.clone());
        }
        Ok(())
    }

    fn known(&self, dir: &Path) -> bool {
        self.known_dirs.lock().unwrap_or_else(|p| p.into_inner()).contains(dir)
    }
}

fn write_synced(path: &Path, data: &[u8]) -> Result<(), StorageError> {
    let mut f =
        OpenOptions::new().write(true).create_new(true).mode(0o644).open(path).map_err(io_err("create", path))?;
    f.write_all(data).map_err(io_err("write", path))?;
    f.sync_all().map_err(io_err("fsync", path))
}

fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("fsync directory", dir))
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StorageError {
    let path = path.display().to_string();
    move |source| StorageError::Io { op, path, source }
}

/// Runs blocking file work off the async threads.
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, StorageError> + Send + 'static,
) -> Result<R, StorageError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| StorageError::Io {
        op: "file task",
        path: String::new(),
        source: io::Error::other(e.to_string()),
    })?
}
