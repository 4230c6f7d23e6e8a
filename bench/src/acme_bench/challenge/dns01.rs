//! The dns-01 responder (RFC 8555 §8.4): TXT records appended to a zone file
//! that the test DNS server re-reads when it changes.
//!
//! The file holds one record a line, `NAME TYPE VALUE`. The lines it had when
//! the benchmark started are kept as they were; the benchmark's own records
//! follow them, and the file is restored when it ends. Every change rewrites
//! the whole file to a temporary name beside it and renames it over, so the
//! DNS server never reads half a file; one mutex keeps writers in order.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// A zone file the benchmark adds TXT records to.
pub struct Zone {
    path: PathBuf,
    base: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    records: BTreeMap<u64, String>,
}

/// A record added by [`Zone::add_txt`], to remove again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordId(u64);

impl Zone {
    /// Opens the zone at `path`, keeping what it holds (a missing file is an
    /// empty zone, created on the first change).
    pub fn open(path: &Path) -> io::Result<Zone> {
        let base = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        Ok(Zone { path: path.to_owned(), base, state: Mutex::new(State::default()) })
    }

    /// Adds `NAME TXT "value"` and rewrites the file.
    pub fn add_txt(&self, name: &str, value: &str) -> io::Result<RecordId> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let id = state.next_id;
        state.next_id += 1;
        state.records.insert(id, txt_line(name, value));
        match self.write(&state) {
            Ok(()) => Ok(RecordId(id)),
            Err(e) => {
                state.records.remove(&id);
                Err(e)
            }
        }
    }

    /// Removes a record added before and rewrites the file.
    pub fn remove(&self, id: RecordId) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.records.remove(&id.0).is_some() {
            self.write(&state)?;
        }
        Ok(())
    }

    /// Puts the file back as it was when opened (if anything was added).
    pub fn restore(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.next_id == 0 {
            return Ok(());
        }
        state.records.clear();
        self.write(&state)
    }

    fn write(&self, state: &State) -> io::Result<()> {
        write_atomically(&self.path, render(&self.base, state.records.values()).as_bytes())
    }
}

/// One TXT record line. The value of a dns-01 record is base64url, so it
/// needs no escaping inside the quotes.
fn txt_line(name: &str, value: &str) -> String {
    format!("{name} TXT \"{value}\"")
}

/// The base text (ending in a newline if it has any text) and then one line a record.
fn render<'a>(base: &str, records: impl Iterator<Item = &'a String>) -> String {
    let mut text = base.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for line in records {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Writes `contents` to a temporary file beside `path` and renames it over
/// `path`. Not fsynced: the zone is test data, and the rename alone is what
/// keeps a reader from seeing a partial file.
fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".acme-bench.tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = fs::File::create(&tmp)?;
    file.write_all(contents)?;
    drop(file);
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn records_are_added_after_the_base_and_removed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zone");
        let base = "*.bench.test A 127.0.0.1\nbench.test CAA \"0 issue \\\"signet\\\"\"";
        fs::write(&path, base).unwrap();
        let zone = Zone::open(&path).unwrap();
        let a = zone.add_txt("_acme-challenge.c0-1.bench.test", "abc_-1").unwrap();
        let b = zone.add_txt("_acme-challenge.c1-1.bench.test", "def").unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!(
                "{base}\n_acme-challenge.c0-1.bench.test TXT \"abc_-1\"\n_acme-challenge.c1-1.bench.test TXT \"def\"\n"
            )
        );
        zone.remove(a).unwrap();
        zone.remove(a).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!("{base}\n_acme-challenge.c1-1.bench.test TXT \"def\"\n")
        );
        zone.remove(b).unwrap();
        zone.restore().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{base}\n"));
        // Only the zone is left in the directory: no temporary files.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_zone_starts_empty_and_restore_without_changes_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zone");
        let zone = Zone::open(&path).unwrap();
        zone.restore().unwrap();
        assert!(!path.exists());
        zone.add_txt("_acme-challenge.x.bench.test", "v").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "_acme-challenge.x.bench.test TXT \"v\"\n");
        zone.restore().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zone");
        let zone = std::sync::Arc::new(Zone::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let zone = std::sync::Arc::clone(&zone);
                std::thread::spawn(move || {
                    for i in 0..25 {
                        zone.add_txt(&format!("_acme-challenge.c{t}-{i}.bench.test"), "v").unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 100);
    }
}
