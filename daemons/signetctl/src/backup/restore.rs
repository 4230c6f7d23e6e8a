//! `signetctl restore`: the backup checked against its manifest, the targets
//! checked to be fresh, and only then every file put in place: at its original
//! path, or under `--map OLD=NEW` at NEW, with OLD rewritten to NEW in every
//! path of the configs.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::manifest::{self, FileEntry, Kind, Manifest};
use super::BackupError;
use crate::output::Printer;

/// `signetctl restore`.
#[derive(Args)]
pub struct RestoreArgs {
    /// The backup directory (the one holding manifest.json).
    pub(super) dir: PathBuf,
    /// Restore what was under the absolute path OLD under NEW instead, and
    /// rewrite OLD to NEW in every path of the restored configs (repeatable;
    /// the longest OLD that fits wins). NEW must be empty or not exist yet.
    /// Without it, everything goes back to its original path.
    #[arg(long = "map", value_name = "OLD=NEW", value_parser = parse_map)]
    pub(super) maps: Vec<PathMap>,
    /// Check the backup and the targets, print what would be restored, write nothing.
    #[arg(long)]
    pub(super) verify_only: bool,
}

/// One `--map OLD=NEW`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMap {
    /// The path prefix in the backup (and in its configs).
    pub old: PathBuf,
    /// Where it goes now.
    pub new: PathBuf,
}

fn parse_map(s: &str) -> Result<PathMap, String> {
    let (old, new) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected OLD=NEW"))?;
    let (old, new) = (PathBuf::from(old), PathBuf::from(new));
    if !old.is_absolute() || !new.is_absolute() {
        return Err(format!("{s:?}: OLD and NEW must be absolute paths"));
    }
    Ok(PathMap { old, new })
}

/// Where `path` goes: under the NEW of the longest OLD it lies under, else where it was.
pub fn map_path(path: &Path, maps: &[PathMap]) -> PathBuf {
    maps.iter()
        .filter(|m| path.starts_with(&m.old))
        .max_by_key(|m| m.old.components().count())
        .and_then(|m| path.strip_prefix(&m.old).ok().map(|rest| m.new.join(rest)))
        .unwrap_or_else(|| path.to_path_buf())
}

/// A config string mapped: an absolute path, or NSS's `sql:` and a path; `None` if unchanged.
fn map_str(s: &str, maps: &[PathMap]) -> Option<String> {
    let (prefix, rest) = s.strip_prefix("sql:").map_or(("", s), |r| ("sql:", r));
    let path = Path::new(rest);
    if !path.is_absolute() {
        return None;
    }
    let mapped = map_path(path, maps);
    (mapped != path).then(|| format!("{prefix}{}", mapped.display()))
}

/// Rewrites the paths of a config's text through `maps`. The text is kept
/// (comments and all) with each changed string replaced where it is written;
/// if that does not give exactly the mapped config (a string written with
/// escapes), the mapped config is written out afresh instead.
pub fn rewrite_config(name: &Path, text: &str, maps: &[PathMap]) -> Result<String, BackupError> {
    let bad = |e: toml::de::Error| BackupError::Check(format!("{}: not a valid config: {e}", name.display()));
    let table: toml::Table = toml::from_str(text).map_err(bad)?;
    let mut mapped = toml::Value::Table(table);
    let mut pairs = BTreeSet::new();
    map_value(&mut mapped, maps, &mut pairs);
    if pairs.is_empty() {
        return Ok(text.to_owned());
    }
    let mut out = text.to_owned();
    for (old, new) in &pairs {
        out = out.replace(&basic_string(old), &basic_string(new));
        if literal_ok(old) && literal_ok(new) {
            out = out.replace(&format!("'{old}'"), &format!("'{new}'"));
        }
    }
    let toml::Value::Table(expected) = mapped else { return Ok(out) };
    if toml::from_str::<toml::Table>(&out).ok().as_ref() == Some(&expected) {
        return Ok(out);
    }
    let fresh = toml::to_string(&expected)
        .map_err(|e| BackupError::Failed(format!("{}: cannot write the mapped config: {e}", name.display())))?;
    Ok(format!(
        "# Paths mapped by signetctl restore; the original config, with its comments, is in the backup.\n{fresh}"
    ))
}

fn map_value(v: &mut toml::Value, maps: &[PathMap], pairs: &mut BTreeSet<(String, String)>) {
    match v {
        toml::Value::String(s) => {
            if let Some(new) = map_str(s, maps) {
                pairs.insert((s.clone(), new.clone()));
                *s = new;
            }
        }
        toml::Value::Array(items) => items.iter_mut().for_each(|i| map_value(i, maps, pairs)),
        toml::Value::Table(t) => t.iter_mut().for_each(|(_, i)| map_value(i, maps, pairs)),
        _ => {}
    }
}

/// `s` as a TOML basic string.
fn basic_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` can be a TOML literal string (`'...'`).
fn literal_ok(s: &str) -> bool {
    !s.contains('\'') && !s.chars().any(char::is_control)
}

/// Runs `signetctl restore`.
pub fn run(args: &RestoreArgs, out: &Printer) -> Result<(), BackupError> {
    // 1. The backup, every file checked against the manifest, and each store copy opened.
    let m = manifest::read_and_verify(&args.dir)?;
    for f in m.files.iter().filter(|f| f.kind == Kind::Lmdb) {
        let Some(dir) = args.dir.join(&f.path).parent().map(Path::to_path_buf) else { continue };
        let seen = signet_store::inspect(&dir)
            .map_err(|e| BackupError::Check(format!("{}: not an LMDB store that opens: {e}", dir.display())))?;
        let claimed = f.store.as_ref().map(|s| (s.application.as_str(), s.schema_version));
        if claimed.is_some_and(|c| c != (seen.application.as_str(), seen.schema_version)) {
            return Err(BackupError::Check(format!(
                "{}: the store of {} (schema {}), the manifest says {claimed:?}",
                dir.display(),
                seen.application,
                seen.schema_version
            )));
        }
    }
    // 2. The targets: nothing there yet.
    check_targets(&m, &args.maps)?;
    if !args.verify_only {
        // 3. Only now: directories (parents first), then files.
        let root = is_root();
        let mut dirs = m.dirs.clone();
        dirs.sort_by_key(|d| d.original.components().count());
        for d in &dirs {
            let dest = map_path(&d.original, &args.maps);
            std::fs::create_dir_all(&dest).map_err(|e| partial(&dest, e))?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(d.mode)).map_err(|e| partial(&dest, e))?;
            if root {
                std::os::unix::fs::chown(&dest, Some(d.uid), Some(d.gid)).map_err(|e| partial(&dest, e))?;
            }
        }
        for f in &m.files {
            restore_file(&args.dir, f, &args.maps, root)?;
        }
    }
    print(args, &m, out);
    Ok(())
}

/// Refuses any target that holds something: a NEW of `--map`, a state
/// directory, a file's destination.
fn check_targets(m: &Manifest, maps: &[PathMap]) -> Result<(), BackupError> {
    let not_empty = |dir: &Path| match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(_) => dir.exists(),
    };
    let refuse = |what: &str, p: &Path| {
        Err(BackupError::Usage(format!(
            "{} {what}: restore writes into a fresh state directory only, and changes nothing that exists",
            p.display()
        )))
    };
    for map in maps {
        if not_empty(&map.new) {
            return refuse("is not empty", &map.new);
        }
    }
    for d in &m.dirs {
        let dest = map_path(&d.original, maps);
        if not_empty(&dest) {
            return refuse("is not empty", &dest);
        }
    }
    for f in &m.files {
        let dest = map_path(&f.original, maps);
        if dest.symlink_metadata().is_ok() {
            return refuse("exists", &dest);
        }
    }
    Ok(())
}

/// One file to its destination, a config with its paths mapped.
fn restore_file(dir: &Path, f: &FileEntry, maps: &[PathMap], root: bool) -> Result<(), BackupError> {
    let src = dir.join(&f.path);
    let dest = map_path(&f.original, maps);
    let written = if f.kind == Kind::Config && !maps.is_empty() {
        let text = std::fs::read_to_string(&src).map_err(|e| BackupError::io(&src, e))?;
        let text = rewrite_config(&f.original, &text, maps)?;
        manifest::write_file(text.as_bytes(), &dest, f.mode)
    } else {
        manifest::copy_file(&src, &dest, f.mode)
    };
    written.map_err(|e| partial_msg(&e))?;
    // The mode again: the file was created under the umask.
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(f.mode)).map_err(|e| partial(&dest, e))?;
    if root {
        std::os::unix::fs::chown(&dest, Some(f.uid), Some(f.gid)).map_err(|e| partial(&dest, e))?;
    }
    Ok(())
}

/// A failure after restore began writing: says so.
fn partial(path: &Path, e: std::io::Error) -> BackupError {
    partial_msg(&BackupError::io(path, e))
}

fn partial_msg(e: &BackupError) -> BackupError {
    let m = format!("{e}; restore stopped half-way: remove what it wrote before restoring again");
    match e {
        BackupError::Permission(_) => BackupError::Permission(m),
        _ => BackupError::Failed(m),
    }
}

/// Whether this process runs as root (and so gives files their recorded owners).
fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn print(args: &RestoreArgs, m: &Manifest, out: &Printer) {
    let bytes: u64 = m.files.iter().map(|f| f.size).sum();
    let stores: Vec<_> = m
        .files
        .iter()
        .filter(|f| f.kind == Kind::Lmdb)
        .map(|f| (f.daemons.join(","), map_path(&f.original, &args.maps)))
        .collect();
    let configs: Vec<_> =
        m.files.iter().filter(|f| f.kind == Kind::Config).map(|f| map_path(&f.original, &args.maps)).collect();
    let provide: Vec<_> = m
        .daemons
        .iter()
        .flat_map(|d| d.left_out.iter().map(move |l| (d.name.clone(), map_path(&l.path, &args.maps), &l.reason)))
        .collect();
    // The daemons in the backup (not those it skipped as not configured).
    let notes: Vec<_> = m
        .daemons
        .iter()
        .filter(|d| d.config.is_some())
        .flat_map(|d| d.notes.iter().map(move |n| (d.name.clone(), n)))
        .collect();
    let owners = if is_root() { "recorded" } else { "yours" };
    if out.json {
        return out.json(&json!({
            "backup": args.dir,
            "verified": true,
            "restored": !args.verify_only,
            "signet_version": m.signet_version,
            "taken": m.started,
            "private_keys": m.private_keys,
            "files": m.files.len(),
            "bytes": bytes,
            "owners": owners,
            "configs": configs,
            "stores": stores.iter().map(|(d, p)| json!({"daemon": d, "path": p})).collect::<Vec<_>>(),
            "to_provide": provide.iter().map(|(d, p, r)| json!({"daemon": d, "path": p, "reason": r})).collect::<Vec<_>>(),
            "notes": notes.iter().map(|(d, n)| json!({"daemon": d, "note": n})).collect::<Vec<_>>(),
        }));
    }
    let verb = if args.verify_only { "verified; would restore" } else { "restored" };
    outln!("backup {} of {} ({} files, {bytes} bytes) {verb}:", args.dir.display(), m.started, m.files.len());
    for c in &configs {
        outln!("  config {}", c.display());
    }
    for (d, p) in &stores {
        outln!("  store  {} ({d})", p.display());
    }
    for (d, p, r) in &provide {
        outln!("  to provide before starting {d}: {} ({r})", p.display());
    }
    for (d, n) in &notes {
        outln!("  note ({d}): {n}");
    }
    if !args.verify_only && owners == "yours" {
        outln!("  files are owned by you, not their recorded owners: restore as root to keep them");
    }
}
