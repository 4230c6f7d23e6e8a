//! What a backup takes, read from the daemons' config files: each daemon's
//! LMDB store, the files its config names (certificates, CT roots, JWK sets,
//! and, only when asked, private keys and secrets), the tiles of CT logs kept
//! in a local directory, and signd's OpenSSL key files (only when asked).

use std::path::{Component, Path, PathBuf};

use super::BackupError;

/// The daemons, in the order their stores are copied. A daemon's store is
/// copied before the stores of the daemons it refers to, so that what a copy
/// refers to was committed before that copy began, and is in the later ones:
/// acmed hands out only certificates ocspd recorded and SCTs ctlogd gave;
/// tokend's key history, ctlogd's tree heads and ocspd's responses name or
/// were signed by keys signd holds.
pub const DAEMONS: [&str; 6] = ["probed", "acmed", "tokend", "ctlogd", "ocspd", "signd"];

/// What one daemon's backup takes.
#[derive(Debug, Default)]
pub struct DaemonPlan {
    /// The daemon's name.
    pub name: &'static str,
    /// Its config file.
    pub config: PathBuf,
    /// Its `state_dir`.
    pub state_dir: PathBuf,
    /// Its LMDB environment's directory.
    pub store: PathBuf,
    /// Files its config names, each once.
    pub files: Vec<NamedFile>,
    /// CT logs in a local directory: (log name, directory), tiles copied after the store.
    pub tile_dirs: Vec<(String, PathBuf)>,
    /// signd's OpenSSL key files' directory, when the backup takes private keys.
    pub key_dir: Option<PathBuf>,
    /// What the backup leaves out, and why (private material without the flag).
    pub left_out: Vec<LeftOut>,
    /// What else an operator should know (state kept elsewhere, files missing).
    pub notes: Vec<String>,
}

/// A file a config names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    /// Its path, as the config writes it.
    pub path: PathBuf,
    /// The config key that names it, dotted (`issuers.demo.certificate`).
    pub key: String,
    /// A private key or a secret (taken only with `--include-private-keys`).
    pub private: bool,
}

/// Something the backup does not hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeftOut {
    /// Its path, as the config writes it (restore maps it like the others).
    pub path: PathBuf,
    /// Why, and what to do instead.
    pub reason: String,
}

/// Config keys whose files hold private keys or secrets, whatever they contain.
fn private_key_name(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    last == "key"
        || last.ends_with("_key")
        || ["secret", "password", "pin"].iter().any(|w| last.split('_').any(|part| part == *w))
}

/// Whether bytes hold a PEM private key (`-----BEGIN ... PRIVATE KEY-----`).
pub fn holds_private_key(bytes: &[u8]) -> bool {
    bytes.windows(b"PRIVATE KEY-----".len()).any(|w| w == b"PRIVATE KEY-----")
}

/// Reads `<config_dir>/<name>.toml` and plans its backup; `None` when the
/// daemon is not configured here (no such file).
pub fn plan(name: &'static str, config_dir: &Path, private_keys: bool) -> Result<Option<DaemonPlan>, BackupError> {
    let config = config_dir.join(format!("{name}.toml"));
    let text = match std::fs::read_to_string(&config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(BackupError::io(&config, e)),
    };
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| BackupError::Usage(format!("{}: not a valid config: {e}", config.display())))?;
    let state_dir = match table.get("state_dir").and_then(toml::Value::as_str) {
        Some(s) if Path::new(s).is_absolute() => PathBuf::from(s),
        Some(s) => {
            return Err(BackupError::Usage(format!(
                "{}: state_dir {s:?} is not an absolute path; backup follows absolute paths only",
                config.display()
            )))
        }
        None => return Err(BackupError::Usage(format!("{}: no state_dir", config.display()))),
    };
    let store = if name == "signd" { state_dir.join("db") } else { state_dir.clone() };
    let mut p = DaemonPlan { name, config: config.clone(), store, ..DaemonPlan::default() };

    if name == "signd" {
        if let Some(nss) = table.get("nss").and_then(toml::Value::as_table) {
            let db = nss.get("database").and_then(toml::Value::as_str).unwrap_or("?");
            if private_keys {
                return Err(BackupError::Usage(format!(
                    "{}: signd keeps keys on an NSS token ([nss] database {db}); --include-private-keys backs up \
                     OpenSSL key files only. Keys on an NSS or PKCS #11 token (an HSM) are backed up with the \
                     token's own tools (pk12util for NSS softokn, the HSM vendor's backup); run the backup \
                     without --include-private-keys",
                    config.display()
                )));
            }
            p.notes.push(format!(
                "the NSS database {db} (keys on the token) is not in the backup: back it up with the token's own tools"
            ));
        }
        let keys = state_dir.join("keys");
        if private_keys {
            p.key_dir = Some(keys);
        } else {
            p.left_out.push(LeftOut {
                path: keys,
                reason: "signd's OpenSSL key files: private keys, taken only with --include-private-keys".into(),
            });
        }
    }
    if name == "ctlogd" {
        ctlogd_storage(&table, &mut p);
        ctlogd_shards(&state_dir, &mut p)?;
    }

    let mut strings = Vec::new();
    walk("", &toml::Value::Table(table), &mut strings);
    for (key, value) in strings {
        let path = PathBuf::from(&value);
        if !path.is_absolute() || path.starts_with(&state_dir) || path.starts_with(&p.store) {
            continue;
        }
        if p.files.iter().any(|f| f.path == path) || p.tile_dirs.iter().any(|(_, d)| path.starts_with(d)) {
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {
                let private = private_key_name(&key)
                    || std::fs::read(&path).map(|b| holds_private_key(&b)).map_err(|e| BackupError::io(&path, e))?;
                if private && !private_keys {
                    p.left_out.push(LeftOut {
                        path,
                        reason: format!("{key}: a private key or secret, taken only with --include-private-keys"),
                    });
                } else {
                    p.files.push(NamedFile { path, key, private });
                }
            }
            // Sockets, directories: not files to copy.
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !key.contains("socket") {
                    p.notes.push(format!("{key} = {}: no such file, not in the backup", path.display()));
                }
            }
            Err(e) => return Err(BackupError::io(&path, e)),
        }
    }
    p.state_dir = state_dir;
    Ok(Some(p))
}

/// ctlogd's logs: tiles of a local directory are copied; an S3 log's stay in its bucket.
fn ctlogd_storage(table: &toml::Table, p: &mut DaemonPlan) {
    let Some(logs) = table.get("logs").and_then(toml::Value::as_table) else { return };
    for (log, settings) in logs {
        let storage = settings.get("storage").and_then(toml::Value::as_table);
        if let Some(dir) = storage.and_then(|s| s.get("dir")).and_then(toml::Value::as_str) {
            p.tile_dirs.push((log.clone(), PathBuf::from(dir)));
        } else if let Some(s3) = storage.and_then(|s| s.get("s3")).and_then(toml::Value::as_table) {
            let field = |k: &str| s3.get(k).and_then(toml::Value::as_str).unwrap_or("").to_owned();
            p.notes.push(format!(
                "log {log}: its tiles, issuers and checkpoint stay in the object store (bucket {} at {}, prefix {:?}); \
                 the backup holds its LMDB state only",
                field("bucket"),
                field("endpoint"),
                field("prefix"),
            ));
        }
    }
}

/// The shards added through ctlogd's admin interface (`signetctl ct shard
/// add`): each in `shards/<name>` under its state_dir, defined in its store.
fn ctlogd_shards(state_dir: &Path, p: &mut DaemonPlan) -> Result<(), BackupError> {
    let dir = state_dir.join("shards");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(BackupError::io(&dir, e)),
    };
    let mut shards = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| BackupError::io(&dir, e))?;
        if entry.file_type().map_err(|e| BackupError::io(&entry.path(), e))?.is_dir() {
            shards.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
        }
    }
    shards.sort();
    p.tile_dirs.extend(shards);
    Ok(())
}

/// Every string in a TOML value, with its dotted key (array items by index).
fn walk(key: &str, value: &toml::Value, out: &mut Vec<(String, String)>) {
    let join = |k: &str| if key.is_empty() { k.to_owned() } else { format!("{key}.{k}") };
    match value {
        toml::Value::String(s) => out.push((key.to_owned(), s.clone())),
        toml::Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| walk(&join(&i.to_string()), v, out)),
        toml::Value::Table(t) => t.iter().for_each(|(k, v)| walk(&join(k), v, out)),
        _ => {}
    }
}

/// Where an absolute path goes inside the backup: `tree/` and the path
/// without its leading `/` (a plain relative path: `..` and `.` refused).
pub fn tree_path(original: &Path) -> Result<PathBuf, BackupError> {
    let mut rel = PathBuf::from("tree");
    for c in original.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(part) => rel.push(part),
            _ => {
                return Err(BackupError::Usage(format!(
                    "{}: not a plain absolute path (no `.`, `..`)",
                    original.display()
                )))
            }
        }
    }
    Ok(rel)
}
