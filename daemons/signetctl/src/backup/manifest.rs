//! The backup's `manifest.json`, written last: what was copied, from where,
//! each file's size and SHA-256, and whether private keys are in it. Restore
//! reads it first and checks every file against it before it writes anything.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::plan::LeftOut;
use super::BackupError;

/// The manifest's file name in a backup directory.
pub const MANIFEST: &str = "manifest.json";
/// The `format` this signetctl writes and reads.
pub const FORMAT: &str = "signet-backup/1";

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// The signetctl version that wrote the backup.
    pub signet_version: String,
    /// When the backup began and ended (RFC 3339, UTC).
    pub started: String,
    /// See `started`.
    pub finished: String,
    /// Where the daemons' configs were read from.
    pub config_dir: PathBuf,
    /// Whether private keys and secrets are in the backup (`--include-private-keys`).
    pub private_keys: bool,
    /// Every daemon, configured or not, in the order their stores were copied.
    pub daemons: Vec<DaemonEntry>,
    /// Every file in the backup.
    pub files: Vec<FileEntry>,
    /// Directories restore recreates with their mode and owner (state directories).
    pub dirs: Vec<DirEntry>,
}

/// One daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonEntry {
    /// The daemon.
    pub name: String,
    /// Its config file (`None`: not configured, skipped).
    pub config: Option<PathBuf>,
    /// Left out of the backup, and why.
    pub left_out: Vec<LeftOut>,
    /// Anything else to know (state kept elsewhere, missing files).
    pub notes: Vec<String>,
}

/// What a file in the backup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A daemon's config file (paths in it are rewritten by `restore --map`).
    Config,
    /// A daemon's LMDB store: LMDB's compacted copy, taken while it ran.
    Lmdb,
    /// A public file a config names: certificates, CT roots, JWK sets.
    Public,
    /// A CT log's tile, data tile or issuer, from its local directory.
    CtTile,
    /// A private key or secret (only with `--include-private-keys`).
    PrivateKey,
}

/// One file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    /// Where it is in the backup, relative to the backup directory.
    pub path: PathBuf,
    /// Where it came from (and where restore puts it, unless mapped).
    pub original: PathBuf,
    /// What it is.
    pub kind: Kind,
    /// The daemons whose config led to it.
    pub daemons: Vec<String>,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Its permission bits (restored as they were).
    pub mode: u32,
    /// Its owner, restored when restore runs as root.
    pub uid: u32,
    /// Its group, likewise.
    pub gid: u32,
    /// For an LMDB copy: whose store it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreIdentity>,
}

/// The identity a store records (signet-store's `meta` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreIdentity {
    /// The daemon that created it.
    pub application: String,
    /// Its table layout version.
    pub schema_version: u32,
}

/// A directory restore makes with its mode and owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirEntry {
    /// Its original path.
    pub original: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
}

impl DirEntry {
    /// The entry of an existing directory.
    pub fn of(path: &Path) -> Result<DirEntry, BackupError> {
        let m = std::fs::metadata(path).map_err(|e| BackupError::io(path, e))?;
        Ok(DirEntry { original: path.to_path_buf(), mode: m.mode() & 0o7777, uid: m.uid(), gid: m.gid() })
    }
}

/// Copies `src` to the new file `dst` (mode `mode`), fsynced: its size and SHA-256.
pub fn copy_file(src: &Path, dst: &Path, mode: u32) -> Result<(u64, String), BackupError> {
    let mut from = File::open(src).map_err(|e| BackupError::io(src, e))?;
    copy_from(&mut from, src, dst, mode)
}

/// Writes `bytes` to the new file `dst` (mode `mode`), fsynced: its size and SHA-256.
pub fn write_file(bytes: &[u8], dst: &Path, mode: u32) -> Result<(u64, String), BackupError> {
    copy_from(&mut &bytes[..], dst, dst, mode)
}

fn copy_from(from: &mut impl Read, src: &Path, dst: &Path, mode: u32) -> Result<(u64, String), BackupError> {
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent).map_err(|e| BackupError::io(parent, e))?;
    }
    let mut to =
        OpenOptions::new().write(true).create_new(true).mode(mode).open(dst).map_err(|e| BackupError::io(dst, e))?;
    let mut hash = Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = from.read(&mut buf).map_err(|e| BackupError::io(src, e))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        to.write_all(&buf[..n]).map_err(|e| BackupError::io(dst, e))?;
        size += n as u64;
    }
    to.sync_all().map_err(|e| BackupError::io(dst, e))?;
    Ok((size, hex::encode(hash.finalize())))
}

/// A file's size and SHA-256.
pub fn digest(path: &Path) -> Result<(u64, String), BackupError> {
    let mut f = File::open(path).map_err(|e| BackupError::io(path, e))?;
    let mut hash = Sha256::new();
    let size = std::io::copy(&mut f, &mut hash).map_err(|e| BackupError::io(path, e))?;
    Ok((size, hex::encode(hash.finalize())))
}

/// Writes the manifest last: to a temporary name, fsynced, then renamed into
/// place and the directory fsynced. A backup without `manifest.json` did not finish.
pub fn write(dir: &Path, manifest: &Manifest) -> Result<(), BackupError> {
    let text = serde_json::to_vec_pretty(manifest)
        .map_err(|e| BackupError::Failed(format!("cannot encode the manifest: {e}")))?;
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    write_file(&text, &tmp, 0o600)?;
    let path = dir.join(MANIFEST);
    std::fs::rename(&tmp, &path).map_err(|e| BackupError::io(&path, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| BackupError::io(dir, e))
}

/// Reads the manifest of the backup in `dir` and checks every file it lists
/// against its size and SHA-256. The first mismatch is the error, naming the file.
pub fn read_and_verify(dir: &Path) -> Result<Manifest, BackupError> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BackupError::Check(format!(
                "{}: no such file: {} is no backup, or one that did not finish",
                path.display(),
                dir.display()
            )))
        }
        Err(e) => return Err(BackupError::io(&path, e)),
    };
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| BackupError::Check(format!("{}: not a backup manifest: {e}", path.display())))?;
    if manifest.format != FORMAT {
        return Err(BackupError::Check(format!(
            "{}: format {:?}; this signetctl reads {FORMAT:?}",
            path.display(),
            manifest.format
        )));
    }
    for f in &manifest.files {
        let plain = f.path.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain || !f.original.is_absolute() {
            return Err(BackupError::Check(format!(
                "{}: entry {} ({}) is not a plain path",
                path.display(),
                f.path.display(),
                f.original.display()
            )));
        }
        let file = dir.join(&f.path);
        let (size, sha256) = match digest(&file) {
            Ok(d) => d,
            Err(e) => return Err(BackupError::Check(format!("{e}: the backup is incomplete"))),
        };
        if size != f.size || sha256 != f.sha256 {
            return Err(BackupError::Check(format!(
                "{}: {size} bytes with SHA-256 {sha256}, the manifest says {} bytes with SHA-256 {}: \
                 the backup is damaged",
                file.display(),
                f.size,
                f.sha256
            )));
        }
    }
    Ok(manifest)
}
