//! `signetctl backup DIR` and `signetctl restore DIR`: the appliance's state
//! copied while the daemons run, and put back into a fresh state directory.
//!
//! - [`plan`]: what a backup takes, read from each daemon's config file.
//! - [`manifest`]: `manifest.json` (written last; checked first by restore),
//!   and the file copies with their SHA-256.
//! - [`restore`]: the checks before anything is written, the path mapping
//!   (`--map OLD=NEW`, configs rewritten), the files put in place.
//!
//! Each LMDB store is LMDB's own compacted copy of one committed transaction
//! (signet-store's `copy_environment`), taken while its daemon runs and
//! writes. docs/operations.md is the operator's guide.
//!
//! Exit codes: 1 when a backup does not verify or a copy fails, 2 for bad
//! arguments (a target that is not empty, private keys asked of an NSS
//! token), 3 when a store or file may not be read or written.

mod manifest;
mod plan;
mod restore;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use self::manifest::{DaemonEntry, DirEntry, FileEntry, Kind, Manifest, StoreIdentity};
use self::plan::{tree_path, DaemonPlan, DAEMONS};
use crate::output::Printer;
use crate::Failure;

pub use self::restore::RestoreArgs;

/// `signetctl backup`.
#[derive(Args)]
pub struct BackupArgs {
    /// The backup directory: created, or an empty one.
    dir: PathBuf,
    /// Where the daemons' configs are (`<daemon>.toml`; a daemon without one is skipped).
    #[arg(long, env = "SIGNET_CONFIG_DIR", default_value = "/etc/signet")]
    config_dir: PathBuf,
    /// Also take private keys and secrets: signd's OpenSSL key files (mode 0600
    /// kept), and the TLS keys and secret files the configs name. Refused when
    /// signd keeps keys on an NSS token or HSM: back those up with the token's tools.
    #[arg(long)]
    include_private_keys: bool,
}

/// Why a backup or restore failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BackupError {
    /// Bad arguments or a refused request (exit code 2).
    Usage(String),
    /// Not allowed to read or write a file or store (exit code 3).
    Permission(String),
    /// The backup does not verify (exit code 1).
    Check(String),
    /// Anything else (exit code 1).
    Failed(String),
}

impl BackupError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: &Path, e: std::io::Error) -> Self {
        let message = format!("{}: {e}", path.display());
        match e.kind() {
            std::io::ErrorKind::PermissionDenied => Self::Permission(message),
            _ => Self::Failed(message),
        }
    }

    fn store(dir: &Path, e: &signet_store::StoreError) -> Self {
        let message = format!("copying the LMDB store in {}: {e}", dir.display());
        match e.io_kind() {
            Some(std::io::ErrorKind::PermissionDenied) => Self::Permission(message),
            _ => Self::Failed(message),
        }
    }
}

impl std::fmt::Display for BackupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(m) | Self::Permission(m) | Self::Check(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

impl From<BackupError> for Failure {
    fn from(e: BackupError) -> Self {
        match e {
            BackupError::Usage(message) => Failure { code: 2, message },
            BackupError::Permission(message) => Failure { code: 3, message },
            BackupError::Check(message) | BackupError::Failed(message) => Failure { code: 1, message },
        }
    }
}

/// Runs `signetctl backup`.
pub fn backup(args: &BackupArgs, out: &Printer) -> Result<(), Failure> {
    let started = now();
    // Absolute: the config files are recorded by their paths.
    let config_dir = std::path::absolute(&args.config_dir).map_err(|e| BackupError::io(&args.config_dir, e))?;
    let mut plans = Vec::new();
    let mut daemons = Vec::new();
    for name in DAEMONS {
        match plan::plan(name, &config_dir, args.include_private_keys)? {
            Some(p) => plans.push(p),
            None => daemons.push(DaemonEntry {
                name: name.to_owned(),
                config: None,
                left_out: Vec::new(),
                notes: vec![format!(
                    "not configured (no {}): skipped",
                    config_dir.join(format!("{name}.toml")).display()
                )],
            }),
        }
    }
    if plans.is_empty() {
        return Err(BackupError::Usage(format!(
            "no daemon is configured in {} (no signd.toml, ocspd.toml, ...): nothing to back up",
            config_dir.display()
        ))
        .into());
    }
    create_target(&args.dir)?;
    let mut backup = Backup { dir: args.dir.clone(), files: Vec::new(), index: HashMap::new(), dirs: Vec::new() };
    for p in &plans {
        backup.daemon(p)?;
        daemons.push(DaemonEntry {
            name: p.name.to_owned(),
            config: Some(p.config.clone()),
            left_out: p.left_out.clone(),
            notes: p.notes.clone(),
        });
    }
    daemons.sort_by_key(|d| DAEMONS.iter().position(|n| *n == d.name));
    let manifest = Manifest {
        format: manifest::FORMAT.to_owned(),
        signet_version: env!("CARGO_PKG_VERSION").to_owned(),
        started,
        finished: now(),
        config_dir,
        private_keys: args.include_private_keys,
        daemons,
        files: backup.files,
        dirs: backup.dirs,
    };
    manifest::write(&args.dir, &manifest)?;
    print_backup(&args.dir, &manifest, out);
    Ok(())
}

/// Runs `signetctl restore`.
pub fn restore(args: &RestoreArgs, out: &Printer) -> Result<(), Failure> {
    restore::run(args, out).map_err(Failure::from)
}

/// The backup being written.
struct Backup {
    dir: PathBuf,
    files: Vec<FileEntry>,
    /// Each file's place in `files`, by original path.
    index: HashMap<PathBuf, usize>,
    dirs: Vec<DirEntry>,
}

impl Backup {
    /// One daemon: its config, its store, then what its store refers to that
    /// lives in files (tiles, key files), then the files its config names.
    fn daemon(&mut self, p: &DaemonPlan) -> Result<(), BackupError> {
        self.file(p.name, &p.config, Kind::Config)?;
        self.dir_entry(&p.state_dir)?;
        self.store(p)?;
        // Tiles and key files after the store: the store's copy refers only to
        // tiles and keys written before it began, and none is ever removed.
        for (_, dir) in &p.tile_dirs {
            self.tiles(p.name, dir)?;
        }
        if let Some(keys) = &p.key_dir {
            self.key_files(keys)?;
        }
        for f in &p.files {
            self.file(p.name, &f.path, if f.private { Kind::PrivateKey } else { Kind::Public })?;
        }
        Ok(())
    }

    /// The daemon's LMDB store, copied by LMDB while the daemon runs.
    fn store(&mut self, p: &DaemonPlan) -> Result<(), BackupError> {
        let dest = self.dir.join(tree_path(&p.store)?);
        let copy = match signet_store::copy_environment(&p.store, &dest) {
            Ok(c) => c,
            Err(signet_store::StoreError::NoEnvironment { .. }) => return Ok(()),
            Err(e) => return Err(BackupError::store(&p.store, &e)),
        };
        // The copy opens, as the store it was copied from.
        let seen = signet_store::inspect(&dest).map_err(|e| BackupError::store(&dest, &e))?;
        if (&seen.application, seen.schema_version) != (&copy.application, copy.schema_version) {
            return Err(BackupError::Failed(format!("{}: the copy does not open as its store", dest.display())));
        }
        self.dir_entry(&p.store)?;
        let original = p.store.join(signet_store::DATA_FILE);
        let (size, sha256) = manifest::digest(&copy.path)?;
        let meta = std::fs::metadata(&original).map_err(|e| BackupError::io(&original, e))?;
        self.files.push(FileEntry {
            path: tree_path(&original)?,
            original,
            kind: Kind::Lmdb,
            daemons: vec![p.name.to_owned()],
            size,
            sha256,
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
            store: Some(StoreIdentity { application: copy.application, schema_version: copy.schema_version }),
        });
        Ok(())
    }

    /// One file, once: a second daemon naming it is added to its entry.
    fn file(&mut self, daemon: &str, original: &Path, kind: Kind) -> Result<(), BackupError> {
        if let Some(f) = self.index.get(original).and_then(|&i| self.files.get_mut(i)) {
            if !f.daemons.iter().any(|d| d == daemon) {
                f.daemons.push(daemon.to_owned());
            }
            return Ok(());
        }
        let meta = std::fs::metadata(original).map_err(|e| BackupError::io(original, e))?;
        let mode = meta.mode() & 0o7777;
        let path = tree_path(original)?;
        let (size, sha256) = manifest::copy_file(original, &self.dir.join(&path), mode)?;
        self.index.insert(original.to_path_buf(), self.files.len());
        self.files.push(FileEntry {
            path,
            original: original.to_path_buf(),
            kind,
            daemons: vec![daemon.to_owned()],
            size,
            sha256,
            mode,
            uid: meta.uid(),
            gid: meta.gid(),
            store: None,
        });
        Ok(())
    }

    /// A CT log's local directory: every tile, data tile and issuer. The
    /// checkpoint is left out: ctlogd writes the one of its committed tree
    /// head at start, and a checkpoint newer than the store's copy would stop
    /// it. Tiles written after the store's copy lie beyond its tree, as after
    /// a crash, and are rewritten as the log grows again.
    fn tiles(&mut self, daemon: &str, root: &Path) -> Result<(), BackupError> {
        if !root.is_dir() {
            return Ok(());
        }
        self.dir_entry(root)?;
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(BackupError::io(&dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| BackupError::io(&dir, e))?;
                let path = entry.path();
                let name = entry.file_name();
                let name = name.to_string_lossy();
                // ctlogd's temporary files, renamed into place or removed meanwhile.
                if name.starts_with(".tmp-") || (dir == root && name == "checkpoint") {
                    continue;
                }
                let kind = entry.file_type().map_err(|e| BackupError::io(&path, e))?;
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() {
                    self.file(daemon, &path, Kind::CtTile)?;
                }
            }
        }
        Ok(())
    }

    /// signd's OpenSSL key files (`<id>.pem`), mode kept (0600).
    fn key_files(&mut self, dir: &Path) -> Result<(), BackupError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(BackupError::io(dir, e)),
        };
        self.dir_entry(dir)?;
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| BackupError::io(dir, e))?;
            let is_file = entry.file_type().map_err(|e| BackupError::io(&entry.path(), e))?.is_file();
            // Not `<id>.pem.tmp`: a key being written, not yet recorded.
            if is_file && entry.path().extension().is_some_and(|x| x == "pem") {
                paths.push(entry.path());
            }
        }
        paths.sort();
        for p in paths {
            self.file("signd", &p, Kind::PrivateKey)?;
        }
        Ok(())
    }

    fn dir_entry(&mut self, dir: &Path) -> Result<(), BackupError> {
        if dir.is_dir() && !self.dirs.iter().any(|d| d.original == dir) {
            self.dirs.push(DirEntry::of(dir)?);
        }
        Ok(())
    }
}

/// Makes the backup directory (0700: stores hold secrets, such as acmed's EAB
/// keys), or checks that an existing one is empty.
fn create_target(dir: &Path) -> Result<(), BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(BackupError::Usage(format!(
                    "{} is not empty: a backup goes into a new or empty directory",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| BackupError::io(dir, e))
        }
        Err(e) => Err(BackupError::io(dir, e)),
    }
}

/// Now, RFC 3339 in UTC.
pub(crate) fn now() -> String {
    OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default()
}

/// Per daemon: (files, bytes) in the backup.
fn totals(files: &[FileEntry], daemon: &str) -> (usize, u64) {
    let mine = files.iter().filter(|f| f.daemons.first().is_some_and(|d| d == daemon));
    mine.fold((0, 0), |(n, b), f| (n + 1, b + f.size))
}

fn print_backup(dir: &Path, m: &Manifest, out: &Printer) {
    let bytes: u64 = m.files.iter().map(|f| f.size).sum();
    if out.json {
        let daemons: Vec<_> = m
            .daemons
            .iter()
            .map(|d| {
                let (files, bytes) = totals(&m.files, &d.name);
                json!({
                    "name": d.name,
                    "configured": d.config.is_some(),
                    "config": d.config,
                    "files": files,
                    "bytes": bytes,
                    "stores": m.files.iter().filter(|f| f.kind == Kind::Lmdb && f.daemons[0] == d.name)
                        .map(|f| json!({"original": f.original, "size": f.size, "store": f.store})).collect::<Vec<_>>(),
                    "left_out": d.left_out,
                    "notes": d.notes,
                })
            })
            .collect();
        return out.json(&json!({
            "backup": dir,
            "manifest": dir.join(manifest::MANIFEST),
            "signet_version": m.signet_version,
            "started": m.started,
            "finished": m.finished,
            "private_keys": m.private_keys,
            "files": m.files.len(),
            "bytes": bytes,
            "daemons": daemons,
        }));
    }
    for d in &m.daemons {
        match &d.config {
            None => outln!("{:<7} {}", d.name, d.notes.join("; ")),
            Some(config) => {
                let (files, bytes) = totals(&m.files, &d.name);
                outln!("{:<7} {files} files, {bytes} bytes (config {})", d.name, config.display());
                for l in &d.left_out {
                    outln!("        left out: {} ({})", l.path.display(), l.reason);
                }
                for n in &d.notes {
                    outln!("        note: {n}");
                }
            }
        }
    }
    let keys = if m.private_keys { "with private keys" } else { "no private keys" };
    outln!("backup {}: {} files, {bytes} bytes, {keys}", dir.display(), m.files.len());
}
