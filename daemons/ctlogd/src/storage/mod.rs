//! Where a log's public objects live: hash tiles, data tiles, issuer
//! certificates and the checkpoint, behind one async interface ([`Storage`])
//! with two implementations:
//!
//! - [`LocalDir`]: a directory on the local disk (the embedded default);
//!   every write is atomic and durable (temporary file, `fsync`, `rename`,
//!   `fsync` of the directory) before it returns.
//! - [`ObjectStorage`]: any S3-compatible object store through the
//!   `object_store` crate; a write has returned when the store acknowledged it.
//!
//! Objects are named by [`ObjectKey`], so a caller cannot form a path of its
//! own; the implementations check the relative path again anyway (no `..`, no
//! absolute path, no empty component).

mod local;
mod object;
// Test support, compiled in every build rather than behind a feature: a
// feature the tests turn on would give the test build and the daemon build
// two feature sets, and scripts/test two compilations of the workspace.
#[doc(hidden)]
pub mod versitygw;

use bytes::Bytes;
use futures::future::BoxFuture;
use signet_ct::merkle::Tile;
use signet_ct::Hash;

pub use local::LocalDir;
pub use object::{ObjectStorage, S3Config};

/// The object a [`Storage`] call is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKey {
    /// `tile/<L>/<N>[.p/<W>]`: Merkle tree hashes.
    Tile(Tile),
    /// `tile/data/<N>[.p/<W>]`: the entries of level-0 tile `<N>`.
    DataTile(Tile),
    /// `issuer/<hex SHA-256>`: an issuer certificate, by fingerprint.
    Issuer(Hash),
    /// `checkpoint`: the signed checkpoint.
    Checkpoint,
}

impl ObjectKey {
    /// The object's path relative to the log's root (as served over HTTP).
    pub fn path(&self) -> String {
        match self {
            ObjectKey::Tile(t) => t.path(),
            ObjectKey::DataTile(t) => t.data_path(),
            ObjectKey::Issuer(h) => signet_ct::staticct::issuer_path(h),
            ObjectKey::Checkpoint => "checkpoint".to_string(),
        }
    }

    /// Whether the object never changes once the log has published it: full
    /// tiles and issuers. Partial tiles are superseded by wider ones, and the
    /// checkpoint is replaced on every batch.
    pub fn is_immutable(&self) -> bool {
        match self {
            ObjectKey::Tile(t) | ObjectKey::DataTile(t) => !t.is_partial(),
            ObjectKey::Issuer(_) => true,
            ObjectKey::Checkpoint => false,
        }
    }

    /// The `Cache-Control` value for the object when served (over HTTP, or
    /// straight from a bucket): a year and `immutable` for full tiles and
    /// issuers, a few seconds for partial tiles and the checkpoint.
    pub fn cache_control(&self) -> &'static str {
        if self.is_immutable() {
            CACHE_IMMUTABLE
        } else {
            CACHE_SHORT
        }
    }

    /// The same tile `width` entries wide (tiles only).
    pub fn with_width(&self, width: u16) -> Option<ObjectKey> {
        match self {
            ObjectKey::Tile(t) => Tile::new(t.level(), t.index(), width).ok().map(ObjectKey::Tile),
            ObjectKey::DataTile(t) => Tile::new(t.level(), t.index(), width).ok().map(ObjectKey::DataTile),
            ObjectKey::Issuer(_) | ObjectKey::Checkpoint => None,
        }
    }

    /// The `Content-Type` of the object.
    pub fn content_type(&self) -> &'static str {
        match self {
            ObjectKey::Tile(_) | ObjectKey::DataTile(_) => "application/octet-stream",
            ObjectKey::Issuer(_) => "application/pkix-cert",
            ObjectKey::Checkpoint => "text/plain; charset=utf-8",
        }
    }
}

/// `Cache-Control` of objects that never change.
pub const CACHE_IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// `Cache-Control` of objects that are replaced as the log grows.
pub const CACHE_SHORT: &str = "public, max-age=5";

/// How [`Storage::put`] treats an object that already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// The object is content-addressed or otherwise never changes (issuers):
    /// if it already exists, it is left as it is and the put succeeds.
    Immutable,
    /// Replace the object atomically (readers see the old or the new bytes,
    /// never a mix). The sequencer writes tiles this way: a crash after a
    /// batch's tiles were written but before it was committed leaves tiles
    /// beyond the committed tree, which the next batch rewrites.
    Overwrite,
}

/// Errors from a [`Storage`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A relative path that is not a plain path below the root.
    #[error("invalid object path {0:?}")]
    BadPath(String),
    /// The local filesystem failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The object store failed (after its own retries).
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// The storage configuration is not usable.
    #[error("storage configuration: {0}")]
    Config(String),
}

/// A log's object storage. Every method is safe to call concurrently; a
/// `put` that returned `Ok` is durable (fsynced, or acknowledged by the store).
pub trait Storage: Send + Sync + 'static {
    /// Stores `data` under `key` as `mode` says.
    fn put(&self, key: ObjectKey, data: Bytes, mode: PutMode) -> BoxFuture<'_, Result<(), StorageError>>;

    /// The object's bytes, or `None` if there is no such object.
    fn get(&self, key: ObjectKey) -> BoxFuture<'_, Result<Option<Bytes>, StorageError>>;

    /// Whether the object exists.
    fn exists(&self, key: ObjectKey) -> BoxFuture<'_, Result<bool, StorageError>>;

    /// The partial versions of the full tile (or data tile) `key` that exist
    /// (`<path>.p/<W>`), in no particular order; empty for other objects.
    fn partials(&self, key: ObjectKey) -> BoxFuture<'_, Result<Vec<ObjectKey>, StorageError>>;

    /// Removes the object; one that does not exist is not an error. A
    /// removal need not be durable: an object that comes back after a crash
    /// is one the log no longer refers to.
    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, Result<(), StorageError>>;

    /// A short description for logs (`dir /var/lib/...`, `s3 bucket/prefix`).
    fn describe(&self) -> String;
}

/// The width of a partial tile named `name` (the last component of
/// `<path>.p/<W>`): a canonical decimal in `1..=255`.
fn partial_width(name: &str) -> Option<u16> {
    let w: u16 = name.parse().ok()?;
    (w.to_string() == name && (1..signet_ct::merkle::TILE_WIDTH).contains(&w)).then_some(w)
}

/// Checks that `path` is a plain relative path: non-empty `/`-separated
/// components, none of them empty, `.` or `..`, only printable ASCII without
/// `\`.
pub fn check_relative_path(path: &str) -> Result<(), StorageError> {
    let bad = || StorageError::BadPath(path.to_string());
    if path.is_empty() || path.len() > 512 || path.starts_with('/') {
        return Err(bad());
    }
    if !path.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') {
        return Err(bad());
    }
    if path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(bad());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
