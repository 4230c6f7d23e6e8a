//! Tests of the store against real LMDB environments in temporary directories.

#![allow(clippy::expect_used, reason = "a failed expectation is a failed test")]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tempfile::TempDir;

use crate::{Durability, Key, Store, StoreError, StoreOptions, Table};

fn open(dir: &Path) -> Store {
    Store::open(dir, StoreOptions::new("testd", 3)).expect("open store")
}

fn fresh() -> (TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir.path().join("state"));
    (dir, store)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    subject: String,
    serial: Vec<u8>,
}

impl Record {
    fn new(id: u64) -> Self {
        Self { id, subject: format!("CN=host{id}.example"), serial: id.to_be_bytes().repeat(8) }
    }
}

#[test]
fn store_is_send_sync_and_table_is_copy() {
    fn send_sync<T: Send + Sync>() {}
    fn copy<T: Copy + Send + Sync>() {}
    send_sync::<Store>();
    copy::<Table<String, std::rc::Rc<u8>>>();
}

#[test]
fn open_creates_private_directory_and_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("a/b/state");
    let _store = open(&state);
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("data.mdb")), 0o600);
    assert_eq!(mode(&state.join("lock.mdb")), 0o600);
}

#[test]
fn reopen_keeps_data_and_meta() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(dir.path());
        let t = store.table::<String, u32>("names").expect("table");
        store.write(|txn| txn.put(&t, &"alice".to_string(), &7)).expect("write");
    }
    let store = open(dir.path());
    assert_eq!(store.application(), "testd");
    let t = store.table::<String, u32>("names").expect("table");
    assert_eq!(store.read(|txn| txn.get(&t, &"alice".to_string())).expect("read"), Some(7));
}

#[test]
fn wrong_application_names_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    let err = Store::open(dir.path(), StoreOptions::new("ocspd", 3)).expect_err("must fail");
    match &err {
        StoreError::WrongApplication { found, expected } => {
            assert_eq!(found, "testd");
            assert_eq!(expected, "ocspd");
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("testd") && msg.contains("ocspd"), "{msg}");
}

#[test]
fn schema_version_mismatch_names_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    let err = Store::open(dir.path(), StoreOptions::new("testd", 4)).expect_err("must fail");
    assert!(matches!(err, StoreError::SchemaVersion { found: 3, expected: 4 }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains('3') && msg.contains('4'), "{msg}");
    // The failed open released the directory: the right version still opens.
    drop(open(dir.path()));
}

#[test]
fn second_open_in_process_is_refused_until_drop() {
    let (dir, store) = fresh();
    let path = dir.path().join("state");
    let err = Store::open(&path, StoreOptions::new("testd", 3)).expect_err("must fail");
    assert!(matches!(err, StoreError::AlreadyOpen { .. }), "{err:?}");
    let clone = store.clone();
    drop(store);
    assert!(Store::open(&path, StoreOptions::new("testd", 3)).is_err());
    drop(clone);
    drop(open(&path));
}

#[test]
fn meta_table_name_is_reserved() {
    let (_dir, store) = fresh();
    let err = store.table::<String, String>("meta").expect_err("reserved");
    assert!(matches!(err, StoreError::ReservedTableName { name: "meta" }));
}

/// Writes `keys` in the given (unsorted) order and checks a full range comes
/// back sorted by the keys' own order, with values intact.
fn check_table_order<K>(store: &Store, name: &'static str, keys: Vec<K>)
where
    K: Key + Ord + Clone + std::fmt::Debug,
{
    let t = store.table::<K, u64>(name).expect("table");
    store
        .write(|txn| {
            for (i, k) in keys.iter().enumerate() {
                txn.insert_new(&t, k, &(i as u64))?;
            }
            Ok(())
        })
        .expect("write");
    let got = store.read(|txn| txn.range(&t, None, usize::MAX)).expect("range");
    let mut want: Vec<(K, u64)> = keys.iter().cloned().zip(0..).collect();
    want.sort();
    assert_eq!(got, want, "table {name}");
    for (k, v) in &want {
        assert_eq!(store.read(|txn| txn.get(&t, k)).expect("get"), Some(*v));
    }
}

#[test]
fn every_key_type_round_trips_in_order() {
    let (_dir, store) = fresh();
    check_table_order(&store, "u64", vec![300u64, 1, u64::MAX, 256, 0, 255, 1 << 40]);
    check_table_order(&store, "u32", vec![70_000u32, 2, u32::MAX, 256, 0]);
    check_table_order(&store, "string", ["b", "ab", "a", "é", "Z", "aa", "\u{1F600}"].map(String::from).to_vec());
    check_table_order(&store, "bytes", vec![vec![1u8], vec![0, 255], vec![0], vec![255, 0, 0], vec![0, 0]]);
    check_table_order(&store, "array", vec![[9u8, 0, 0], [0, 0, 1], [0, 1, 0], [255, 255, 255]]);
    check_table_order(&store, "pair", vec![(2u64, 0u64), (1, u64::MAX), (1, 0), (0, 7), (u64::MAX, 1)]);
}

#[test]
fn empty_and_oversized_keys_are_rejected() {
    let (_dir, store) = fresh();
    let t = store.table::<Vec<u8>, u8>("t").expect("table");
    let err = store.write(|txn| txn.put(&t, &Vec::new(), &1)).expect_err("empty");
    assert!(matches!(err, StoreError::KeySize { table: "t", len: 0 }), "{err:?}");
    let err = store.write(|txn| txn.put(&t, &vec![0; crate::MAX_KEY_LEN + 1], &1)).expect_err("long");
    assert!(matches!(err, StoreError::KeySize { len: 512, .. }), "{err:?}");
    store.write(|txn| txn.put(&t, &vec![7; crate::MAX_KEY_LEN], &1)).expect("max length key");
}

#[test]
fn insert_new_conflicts_and_put_overwrites() {
    let (_dir, store) = fresh();
    let t = store.table::<u64, Record>("certs").expect("table");
    store.write(|txn| txn.insert_new(&t, &1, &Record::new(1))).expect("first");
    let err = store.write(|txn| txn.insert_new(&t, &1, &Record::new(99))).expect_err("conflict");
    assert!(matches!(err, StoreError::AlreadyExists { table: "certs" }), "{err:?}");
    assert_eq!(store.read(|txn| txn.get(&t, &1)).expect("get"), Some(Record::new(1)));
    store.write(|txn| txn.put(&t, &1, &Record::new(99))).expect("put");
    assert_eq!(store.read(|txn| txn.get(&t, &1)).expect("get"), Some(Record::new(99)));
}

#[test]
fn range_queries_last_len_delete_and_next_key() {
    let (_dir, store) = fresh();
    let log = store.table::<u64, String>("audit").expect("table");
    store
        .read(|txn| {
            assert_eq!(txn.last(&log)?, None);
            assert_eq!(txn.len(&log)?, 0);
            assert!(txn.range(&log, None, 10)?.is_empty());
            assert!(txn.range_rev(&log, 10)?.is_empty());
            Ok(())
        })
        .expect("empty reads");
    for want in 1..=10u64 {
        let id = store
            .write(|txn| {
                let id = txn.next_u64_key(&log)?;
                txn.insert_new(&log, &id, &format!("event {id}"))?;
                Ok(id)
            })
            .expect("append");
        assert_eq!(id, want);
    }
    let keys = |v: Vec<(u64, String)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    store
        .read(|txn| {
            assert_eq!(txn.len(&log)?, 10);
            assert_eq!(txn.last(&log)?, Some((10, "event 10".to_string())));
            assert_eq!(keys(txn.range(&log, None, 3)?), [1, 2, 3]);
            assert_eq!(keys(txn.range(&log, Some(&4), 3)?), [4, 5, 6]);
            assert_eq!(keys(txn.range(&log, Some(&9), 100)?), [9, 10]);
            assert!(txn.range(&log, Some(&11), 100)?.is_empty());
            assert!(txn.range(&log, None, 0)?.is_empty());
            assert_eq!(keys(txn.range_rev(&log, 3)?), [10, 9, 8]);
            assert_eq!(keys(txn.range_rev(&log, 100)?), (1..=10).rev().collect::<Vec<_>>());
            assert_eq!(keys(txn.range_rev_from(&log, Some(&5), 2)?), [5, 4]);
            assert_eq!(keys(txn.range_rev_from(&log, Some(&50), 2)?), [10, 9]);
            Ok(())
        })
        .expect("reads");
    // Gaps: range_rev_from steps back from the next key when `end` is absent.
    store
        .write(|txn| {
            assert!(txn.delete(&log, &5)?);
            assert!(!txn.delete(&log, &5)?);
            assert!(txn.delete(&log, &10)?);
            // Reads inside the write see its own changes.
            assert_eq!(txn.len(&log)?, 8);
            assert_eq!(txn.next_u64_key(&log)?, 10);
            Ok(())
        })
        .expect("delete");
    store
        .read(|txn| {
            assert_eq!(txn.get(&log, &5)?, None);
            assert_eq!(keys(txn.range_rev_from(&log, Some(&5), 2)?), [4, 3]);
            assert_eq!(keys(txn.range(&log, Some(&5), 2)?), [6, 7]);
            assert_eq!(txn.last(&log)?.map(|(k, _)| k), Some(9));
            Ok(())
        })
        .expect("reads after delete");
}

#[test]
fn next_u64_key_reports_exhaustion() {
    let (_dir, store) = fresh();
    let t = store.table::<u64, ()>("t").expect("table");
    let err = store
        .write(|txn| {
            txn.put(&t, &u64::MAX, &())?;
            txn.next_u64_key(&t)
        })
        .expect_err("exhausted");
    assert!(matches!(err, StoreError::KeySpaceExhausted { table: "t" }), "{err:?}");
}

#[test]
fn error_in_closure_aborts_everything() {
    let (_dir, store) = fresh();
    let a = store.table::<u64, String>("a").expect("table");
    let b = store.table::<String, u64>("b").expect("table");
    store.write(|txn| txn.put(&a, &1, &"kept".to_string())).expect("seed");
    let err = store
        .write(|txn| {
            txn.put(&a, &1, &"overwritten".to_string())?;
            txn.put(&a, &2, &"new".to_string())?;
            txn.put(&b, &"x".to_string(), &9)?;
            txn.insert_new(&a, &1, &"conflict".to_string())
        })
        .expect_err("aborts");
    assert!(matches!(err, StoreError::AlreadyExists { .. }));

    #[derive(Debug)]
    enum Domain {
        WrongState,
        Store(#[expect(dead_code, reason = "only constructed by `?`")] StoreError),
    }
    impl From<StoreError> for Domain {
        fn from(e: StoreError) -> Self {
            Self::Store(e)
        }
    }
    let err = store
        .try_write(|txn| -> Result<(), Domain> {
            txn.put(&a, &3, &"domain".to_string())?;
            Err(Domain::WrongState)
        })
        .expect_err("aborts");
    assert!(matches!(err, Domain::WrongState));

    let store2 = store.clone();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _ = store2.write(|txn| {
            txn.put(&a, &4, &"panic".to_string())?;
            panic!("closure panics mid-write");
            #[allow(unreachable_code)]
            Ok(())
        });
    }));
    assert!(panicked.is_err());

    store
        .read(|txn| {
            assert_eq!(txn.range(&a, None, 10)?, [(1, "kept".to_string())]);
            assert_eq!(txn.len(&b)?, 0);
            Ok(())
        })
        .expect("read");
    // The write lock was released each time.
    store.write(|txn| txn.put(&a, &5, &"after".to_string())).expect("write after aborts");
}

#[derive(Debug, Serialize, Deserialize)]
struct Strict {
    id: u64,
    name: String,
}

#[test]
fn undecodable_values_and_keys_are_corrupt_not_panics() {
    let (_dir, store) = fresh();
    let raw = store.table::<u64, Vec<u8>>("certs").expect("table");
    let typed = store.table::<u64, Strict>("certs").expect("table");
    store
        .write(|txn| {
            // Length prefix 2, then invalid UTF-8 where `name` should be.
            txn.put(&raw, &1, &vec![1, 2, 0xff, 0xfe])?;
            // Far too short for a Strict.
            txn.put(&raw, &2, &vec![])?;
            Ok(())
        })
        .expect("write raw");
    let is_corrupt = |r: Result<_, StoreError>| match r {
        Err(StoreError::Corrupt { table: "certs", detail }) => assert!(!detail.is_empty()),
        Err(other) => panic!("expected Corrupt, got {other:?}"),
        Ok(_) => panic!("expected Corrupt, got a value"),
    };
    is_corrupt(store.read(|txn| txn.get(&typed, &1).map(drop)));
    is_corrupt(store.read(|txn| txn.get(&typed, &2).map(drop)));
    is_corrupt(store.read(|txn| txn.range(&typed, None, 10).map(drop)));
    is_corrupt(store.read(|txn| txn.range_rev(&typed, 10).map(drop)));
    is_corrupt(store.read(|txn| txn.last(&typed).map(drop)));

    // A valid value with trailing bytes is corrupt too.
    let ok = store.table::<u64, u64>("numbers").expect("table");
    let wide = store.table::<u64, (u64, u64)>("numbers").expect("table");
    store.write(|txn| txn.put(&wide, &1, &(5, 6))).expect("write");
    let err = store.read(|txn| txn.get(&ok, &1)).expect_err("trailing");
    assert!(matches!(err, StoreError::Corrupt { table: "numbers", .. }), "{err:?}");

    // A key of the wrong width names the table.
    let by_name = store.table::<String, u64>("index").expect("table");
    let by_id = store.table::<u64, u64>("index").expect("table");
    store.write(|txn| txn.put(&by_name, &"abc".to_string(), &1)).expect("write");
    let err = store.read(|txn| txn.range(&by_id, None, 10)).expect_err("bad key");
    match err {
        StoreError::Corrupt { table, detail } => {
            assert_eq!(table, "index");
            assert!(detail.contains("key"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    let err = store.write(|txn| txn.next_u64_key(&by_id)).expect_err("bad key");
    assert!(matches!(err, StoreError::Corrupt { table: "index", .. }), "{err:?}");
}

#[test]
fn map_full_is_its_own_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = StoreOptions { map_size: 1 << 20, ..StoreOptions::new("testd", 1) };
    let store = Store::open(dir.path(), opts).expect("open");
    let t = store.table::<u64, Vec<u8>>("blobs").expect("table");
    let err = store.write(|txn| txn.put(&t, &1, &vec![0u8; 2 << 20])).expect_err("too big");
    assert!(matches!(err, StoreError::MapFull), "{err:?}");
    // Smaller writes still work after the aborted one.
    store.write(|txn| txn.put(&t, &1, &vec![0u8; 1000])).expect("small write");
}

#[test]
fn too_many_tables_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = StoreOptions { max_tables: 2, ..StoreOptions::new("testd", 1) };
    let store = Store::open(dir.path(), opts).expect("open");
    store.table::<u64, u64>("one").expect("first");
    store.table::<u64, u64>("two").expect("second");
    let err = store.table::<u64, u64>("three").expect_err("third");
    assert!(matches!(err, StoreError::TooManyTables), "{err:?}");
}

#[test]
fn table_from_another_store_is_refused() {
    let (_d1, one) = fresh();
    let (_d2, two) = fresh();
    let t = one.table::<u64, u64>("t").expect("table");
    two.table::<u64, u64>("t").expect("table");
    let err = two.write(|txn| txn.put(&t, &1, &1)).expect_err("foreign");
    assert!(matches!(err, StoreError::ForeignTable { table: "t" }), "{err:?}");
    assert!(two.read(|txn| txn.get(&t, &1)).is_err());
}

#[test]
fn readers_see_a_snapshot_and_may_cross_threads() {
    let (_dir, store) = fresh();
    let t = store.table::<u64, u64>("t").expect("table");
    store.write(|txn| txn.put(&t, &1, &1)).expect("seed");
    store
        .read(|txn| {
            // A writer on another thread commits while this reader is open.
            let writer = store.clone();
            std::thread::spawn(move || writer.write(|w| w.put(&t, &2, &2))).join().expect("writer thread")?;
            assert_eq!(txn.get(&t, &2)?, None);
            assert_eq!(txn.len(&t)?, 1);
            Ok(())
        })
        .expect("read");
    assert_eq!(store.read(|txn| txn.get(&t, &2)).expect("read"), Some(2));
}

#[test]
fn concurrent_writers_are_serialised() {
    let (_dir, store) = fresh();
    let log = store.table::<u64, u64>("log").expect("table");
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let store = store.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    store
                        .write(|txn| {
                            let id = txn.next_u64_key(&log)?;
                            txn.insert_new(&log, &id, &thread)
                        })
                        .expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let all = store.read(|txn| txn.range(&log, None, usize::MAX)).expect("read");
    assert_eq!(all.iter().map(|(k, _)| *k).collect::<Vec<_>>(), (1..=200).collect::<Vec<_>>());
    for thread in 0..4 {
        assert_eq!(all.iter().filter(|(_, v)| *v == thread).count(), 50);
    }
}

#[test]
fn process_durability_syncs_and_stops_flusher_on_last_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = StoreOptions {
        durability: Durability::Process { flush_interval: Duration::from_secs(3600) },
        ..StoreOptions::new("testd", 1)
    };
    let store = Store::open(dir.path(), opts.clone()).expect("open");
    let t = store.table::<u64, u64>("t").expect("table");
    store.write(|txn| txn.put(&t, &1, &1)).expect("write");
    store.sync().expect("sync");
    let clone = store.clone();
    drop(store);
    clone.write(|txn| txn.put(&t, &2, &2)).expect("clone still works");
    // Dropping the last clone wakes the flusher at once rather than after the
    // hour-long interval, and joins it.
    let started = Instant::now();
    drop(clone);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let store = Store::open(dir.path(), opts).expect("reopen");
    let t = store.table::<u64, u64>("t").expect("table");
    assert_eq!(store.read(|txn| txn.len(&t)).expect("len"), 2);
}

/// Set in the re-executed test binary to make [`crash_child`] run.
const CRASH_CHILD_DIR: &str = "SIGNET_STORE_CRASH_CHILD_DIR";
/// Set (to anything) to make [`crash_child`] open its store with `write_map`.
const CRASH_CHILD_WRITE_MAP: &str = "SIGNET_STORE_CRASH_CHILD_WRITE_MAP";
/// The parent kills the child once it has reported this many commits.
const CRASH_AFTER: u64 = 300;

/// The child half of [`commits_survive_sigkill_with_process_durability`]:
/// appends records forever, printing `committed K` after each commit returns.
#[test]
#[ignore = "run as a child process by commits_survive_sigkill_with_process_durability"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_DIR) else {
        return;
    };
    let opts = StoreOptions {
        // Never flushed in the background: commits live only in the page cache.
        durability: Durability::Process { flush_interval: Duration::from_secs(3600) },
        write_map: std::env::var_os(CRASH_CHILD_WRITE_MAP).is_some(),
        ..StoreOptions::new("crashd", 1)
    };
    let store = Store::open(Path::new(&dir), opts).expect("child open");
    let t = store.table::<u64, Record>("records").expect("table");
    let mut out = std::io::stdout().lock();
    loop {
        let id = store
            .write(|txn| {
                let id = txn.next_u64_key(&t)?;
                txn.insert_new(&t, &id, &Record::new(id))?;
                Ok(id)
            })
            .expect("child write");
        writeln!(out, "committed {id}").expect("stdout");
        out.flush().expect("stdout");
    }
}

#[test]
fn commits_survive_sigkill_with_process_durability() {
    commits_survive_sigkill(false);
}

#[test]
fn commits_survive_sigkill_with_process_durability_and_write_map() {
    commits_survive_sigkill(true);
}

fn commits_survive_sigkill(write_map: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let exe = std::env::current_exe().expect("test binary");
    let mut command = Command::new(exe);
    if write_map {
        command.env(CRASH_CHILD_WRITE_MAP, "1");
    }
    let mut child = command
        .args(["--exact", "tests::crash_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CRASH_CHILD_DIR, &state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut reported = 0u64;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read child stdout");
        // libtest may print its own text before the first line of output.
        let Some(pos) = line.find("committed ") else {
            continue;
        };
        let id: u64 = line[pos + "committed ".len()..].trim().parse().expect("committed id");
        assert_eq!(id, reported + 1, "child reports ids in order");
        reported = id;
        if reported >= CRASH_AFTER {
            // SIGKILL, most likely in the middle of the next write transaction.
            child.kill().expect("kill child");
            break;
        }
    }
    let status = child.wait().expect("wait child");
    assert_eq!(status.signal(), Some(9), "child must die by SIGKILL, got {status:?}");
    assert_eq!(reported, CRASH_AFTER, "child stopped early");

    let store = Store::open(&state, StoreOptions::new("crashd", 1)).expect("reopen");
    let t = store.table::<u64, Record>("records").expect("table");
    let all = store.read(|txn| txn.range(&t, None, usize::MAX)).expect("read back");
    assert!(all.len() as u64 >= reported, "only {} of {reported} commits survived", all.len());
    for (i, (id, record)) in all.iter().enumerate() {
        assert_eq!(*id, i as u64 + 1, "records are contiguous");
        assert_eq!(record, &Record::new(*id));
    }
}

/// Opens a store whose writer thread is held inside a first grouped write
/// until the returned sender is used, so that the writes queued meanwhile
/// are committed as one group.
fn held_writer(
    store: &Store,
) -> (std::sync::mpsc::Sender<()>, impl std::future::Future<Output = Result<(), StoreError>>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let first = store.write_grouped(move |_txn| {
        entered_tx.send(()).expect("test waits");
        held.recv().expect("test releases");
        Ok::<(), StoreError>(())
    });
    entered.recv().expect("the writer runs the first write");
    (release, first)
}

#[test]
fn a_grouped_write_that_fails_or_panics_takes_back_only_its_own_writes() {
    let (_dir, store) = fresh();
    let t = store.table::<u64, String>("t").expect("table");
    let (release, first) = held_writer(&store);
    // Queued while the writer is busy: one group, one commit.
    let ok1 = store.write_grouped(move |txn| txn.put(&t, &1, &"one".to_string()).map(|()| 1));
    let failed = store.write_grouped(move |txn| {
        txn.put(&t, &2, &"two".to_string())?;
        Err::<u64, StoreError>(StoreError::MapFull)
    });
    let panicked = store.write_grouped(move |txn| -> Result<u64, StoreError> {
        txn.put(&t, &3, &"three".to_string())?;
        panic!("a closure that panics mid-write");
    });
    let ok2 = store.write_grouped(move |txn| {
        // Sees the earlier write of its group, not the taken-back ones.
        assert_eq!(txn.get(&t, &1)?.as_deref(), Some("one"));
        assert_eq!(txn.get(&t, &2)?, None);
        txn.put(&t, &4, &"four".to_string()).map(|()| 4)
    });
    release.send(()).expect("writer waits");
    futures::executor::block_on(first).expect("first");
    assert_eq!(futures::executor::block_on(ok1).expect("ok1"), 1);
    assert!(matches!(futures::executor::block_on(failed), Err(StoreError::MapFull)));
    assert!(matches!(futures::executor::block_on(panicked), Err(StoreError::WriterGone)));
    assert_eq!(futures::executor::block_on(ok2).expect("ok2"), 4);
    let stored = store.read(|txn| txn.range(&t, None, usize::MAX)).expect("read");
    assert_eq!(stored, vec![(1, "one".to_string()), (4, "four".to_string())]);
    // The writer thread survived the panic.
    futures::executor::block_on(store.write_grouped(move |txn| txn.put(&t, &5, &"five".to_string())))
        .expect("later write");
}

#[test]
fn grouped_writes_from_many_threads_all_commit_in_order_of_their_keys() {
    for write_map in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = StoreOptions { write_map, ..StoreOptions::new("testd", 1) };
        let store = Store::open(dir.path(), opts).expect("open");
        let t = store.table::<u64, u64>("t").expect("table");
        std::thread::scope(|s| {
            for thread in 0..4u64 {
                let store = store.clone();
                s.spawn(move || {
                    let pending: Vec<_> = (0..50)
                        .map(|_| {
                            store.write_grouped(move |txn| {
                                let id = txn.next_u64_key(&t)?;
                                txn.insert_new(&t, &id, &thread)?;
                                Ok::<u64, StoreError>(id)
                            })
                        })
                        .collect();
                    for p in pending {
                        let id = futures::executor::block_on(p).expect("grouped write");
                        // Committed before the future resolved: visible to a new reader.
                        assert_eq!(store.read(|txn| txn.get(&t, &id)).expect("read"), Some(thread));
                    }
                });
            }
        });
        let all = store.read(|txn| txn.range(&t, None, usize::MAX)).expect("read");
        assert_eq!(
            all.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            (1..=200).collect::<Vec<_>>(),
            "write_map {write_map}"
        );
        for thread in 0..4 {
            assert_eq!(all.iter().filter(|(_, v)| *v == thread).count(), 50);
        }
    }
}

#[test]
fn grouped_writes_queued_when_the_last_handle_drops_are_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let t = store.table::<u64, u64>("t").expect("table");
    let (release, first) = held_writer(&store);
    let queued: Vec<_> = (0..10u64).map(|i| store.write_grouped(move |txn| txn.put(&t, &i, &i))).collect();
    // Dropping joins the writer, which must first be let go.
    let dropper = std::thread::spawn(move || drop(store));
    release.send(()).expect("writer waits");
    dropper.join().expect("drop");
    futures::executor::block_on(first).expect("first");
    for q in queued {
        futures::executor::block_on(q).expect("queued write");
    }
    let store = open(dir.path());
    let t = store.table::<u64, u64>("t").expect("table");
    assert_eq!(store.read(|txn| txn.len(&t)).expect("len"), 10);
}

#[test]
fn a_full_filesystem_is_its_own_error() {
    // LMDB passes ENOSPC from write(2) through as MDB's "other" error.
    let enospc = lmdb::Error::from_err_code(28);
    assert!(matches!(StoreError::lmdb("commit")(enospc), StoreError::NoSpace { operation: "commit" }));
    let e = StoreError::lmdb("commit")(enospc);
    assert_eq!(e.to_string(), "LMDB commit: no space left on the store's filesystem");
    assert!(matches!(StoreError::lmdb("commit")(lmdb::Error::from_err_code(22)), StoreError::Lmdb { .. }));
    assert_eq!(e.refuses_writes(), Some("is full"));
    assert_eq!(StoreError::MapFull.refuses_writes(), Some("is full"));
    assert_eq!(StoreError::lmdb("commit")(lmdb::Error::from_err_code(22)).refuses_writes(), None);
}

#[test]
fn an_io_error_on_a_write_is_a_failed_store() {
    // EIO, as ext4 answers a write before it remounts itself read-only: the store has failed.
    let eio = StoreError::lmdb("commit")(lmdb::Error::from_err_code(5));
    assert!(matches!(eio, StoreError::Failed { .. }), "{eio}");
    assert_eq!(eio.refuses_writes(), Some("has failed"));
    assert!(eio.to_string().contains("LMDB commit: Input/output error"), "{eio}");
}

#[test]
fn a_read_only_filesystem_is_its_own_error() {
    // EROFS, as a write(2) or msync(2) on a filesystem remounted read-only after an error.
    let erofs = StoreError::lmdb("commit")(lmdb::Error::from_err_code(30));
    assert!(matches!(erofs, StoreError::ReadOnly { operation: "commit" }));
    assert_eq!(erofs.to_string(), "LMDB commit: the store's filesystem is read-only");
    assert_eq!(erofs.refuses_writes(), Some("is read-only"));
}

#[test]
fn a_failed_environment_refuses_writes_and_reads_from_a_read_only_one() {
    for write_map in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = StoreOptions { write_map, ..StoreOptions::new("testd", 3) };
        let store = Store::open(dir.path(), opts.clone()).expect("open");
        let records = store.table::<u64, Record>("records").expect("table");
        let names = store.table::<String, u64>("names").expect("table");
        for id in 0..10 {
            store.write(|txn| txn.insert_new(&records, &id, &Record::new(id))).expect("write");
        }
        futures::executor::block_on(store.write_grouped(move |txn| txn.put(&names, &"ten".to_string(), &10)))
            .expect("grouped write");

        store.fail_for_test("a test's failure");
        // Reads: everything committed, through both tables' handles.
        assert_eq!(store.read(|txn| txn.len(&records)).expect("read"), 10);
        assert_eq!(store.read(|txn| txn.get(&records, &3)).expect("read"), Some(Record::new(3)));
        assert_eq!(store.read(|txn| txn.get(&names, &"ten".to_string())).expect("read"), Some(10));
        // Every kind of write refused, named.
        let e = store.write(|txn| txn.put(&names, &"x".to_string(), &1)).expect_err("refused");
        assert!(matches!(e, StoreError::Failed { .. }), "{e}");
        assert_eq!(e.refuses_writes(), Some("has failed"));
        assert!(e.to_string().contains("a test's failure"), "{e}");
        let e = futures::executor::block_on(store.write_grouped(move |txn| txn.put(&names, &"y".to_string(), &2)))
            .expect_err("refused");
        assert!(matches!(e, StoreError::Failed { .. }), "{e}");
        assert!(matches!(store.sync(), Err(StoreError::Failed { .. })));
        assert_eq!(store.read(|txn| txn.len(&names)).expect("read"), 1, "nothing refused was written");

        // Opened again, it takes writes.
        drop(store);
        let store = Store::open(dir.path(), opts).expect("open again");
        let names = store.table::<String, u64>("names").expect("table");
        store.write(|txn| txn.put(&names, &"z".to_string(), &3)).expect("write");
        assert_eq!(store.read(|txn| txn.len(&names)).expect("read"), 2);
    }
}

#[test]
fn a_store_it_cannot_write_is_opened_read_only_serves_reads_and_refuses_writes() {
    for write_map in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = StoreOptions { write_map, ..StoreOptions::new("testd", 3) };
        let store = Store::open(dir.path(), opts.clone()).expect("open");
        assert!(!store.is_read_only());
        let records = store.table::<u64, Record>("records").expect("table");
        for id in 0..5 {
            store.write(|txn| txn.insert_new(&records, &id, &Record::new(id))).expect("write");
        }
        drop(store);

        let store = Store::open_read_only_for_test(dir.path(), opts.clone()).expect("open read-only");
        assert!(store.is_read_only());
        let records = store.table::<u64, Record>("records").expect("an existing table");
        assert_eq!(store.read(|txn| txn.len(&records)).expect("read"), 5);
        assert_eq!(store.read(|txn| txn.get(&records, &4)).expect("read"), Some(Record::new(4)));
        // Every kind of write refused as read-only, a new table too.
        let e = store.write(|txn| txn.insert_new(&records, &9, &Record::new(9))).expect_err("refused");
        assert!(matches!(e, StoreError::ReadOnly { operation: "write" }), "{e}");
        assert_eq!(e.refuses_writes(), Some("is read-only"));
        let e = futures::executor::block_on(store.write_grouped(move |txn| txn.put(&records, &9, &Record::new(9))))
            .expect_err("refused");
        assert_eq!(e.refuses_writes(), Some("is read-only"), "{e}");
        assert!(matches!(store.sync(), Err(StoreError::ReadOnly { .. })));
        let e = store.table::<u64, u64>("new").expect_err("no new table");
        assert_eq!(e.refuses_writes(), Some("is read-only"), "{e}");
        assert_eq!(store.read(|txn| txn.len(&records)).expect("read"), 5, "nothing refused was written");
        // Its identity is checked as on a writable open.
        drop(store);
        let e = Store::open_read_only_for_test(dir.path(), StoreOptions::new("otherd", 3)).expect_err("not ours");
        assert!(matches!(e, StoreError::WrongApplication { .. }), "{e}");

        // Opened writable again, it takes writes.
        let store = Store::open(dir.path(), opts).expect("open again");
        let records = store.table::<u64, Record>("records").expect("table");
        store.write(|txn| txn.insert_new(&records, &9, &Record::new(9))).expect("write");
        assert_eq!(store.read(|txn| txn.len(&records)).expect("read"), 6);
    }
    // A store that was never created cannot be opened read-only.
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(Store::open_read_only_for_test(dir.path(), StoreOptions::new("testd", 1)).is_err());
}

#[test]
fn a_group_linger_gathers_writes_that_arrive_within_it_into_one_commit() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let linger = Duration::from_millis(400);
    let opts = StoreOptions { group_linger: linger, ..StoreOptions::new("testd", 1) };
    let store = Store::open(dir.path(), opts).expect("open");
    let t = store.table::<u64, u64>("t").expect("table");
    let started = std::time::Instant::now();
    let mut first = Box::pin(store.write_grouped(move |txn| txn.put(&t, &1, &1)));
    std::thread::sleep(Duration::from_millis(50));
    // Still gathering: the first write is not committed yet, and not visible.
    assert!((&mut first).now_or_never().is_none(), "committed before the linger ended");
    assert_eq!(store.read(|txn| txn.get(&t, &1)).expect("read"), None);
    let second = store.write_grouped(move |txn| txn.put(&t, &2, &2));
    futures::executor::block_on(first).expect("first");
    futures::executor::block_on(second).expect("second");
    assert!(started.elapsed() >= linger, "the group waited out its linger");
    assert_eq!(store.read(|txn| txn.len(&t)).expect("len"), 2);
}

/// Appends records until `stop`, each transaction one record in `records`
/// and the new number of records in `count`: a copy that mixed two
/// transactions would show a count that is not its number of records.
fn write_until_stopped(
    store: Store,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let records = store.table::<u64, Record>("records").expect("table");
    let count = store.table::<String, u64>("count").expect("table");
    std::thread::spawn(move || {
        let mut last = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            last = store
                .write(|txn| {
                    let id = txn.next_u64_key(&records)?;
                    txn.insert_new(&records, &id, &Record::new(id))?;
                    txn.put(&count, &"records".to_string(), &id)?;
                    Ok(id)
                })
                .expect("write");
        }
        last
    })
}

/// Opens a copy made of [`write_until_stopped`]'s store: one committed
/// transaction's state, at least `at_least` records. The number of records.
fn check_copy(dir: &Path, at_least: u64) -> u64 {
    let copy = open(dir);
    let records = copy.table::<u64, Record>("records").expect("table");
    let count = copy.table::<String, u64>("count").expect("table");
    let (n, all) = copy
        .read(|txn| Ok((txn.get(&count, &"records".to_string())?.unwrap_or(0), txn.range(&records, None, usize::MAX)?)))
        .expect("read copy");
    assert_eq!(n, all.len() as u64, "the count and the records come from one transaction");
    for (i, (id, r)) in all.iter().enumerate() {
        assert_eq!(*id, i as u64 + 1, "records are contiguous");
        assert_eq!(r, &Record::new(*id));
    }
    assert!(n >= at_least, "the copy has {n} records, {at_least} were committed before it began");
    n
}

#[test]
fn a_copy_taken_while_a_writer_commits_is_one_transactions_state() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for write_map in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let store = Store::open(&state, StoreOptions { write_map, ..StoreOptions::new("testd", 3) }).expect("open");
        let count = store.table::<String, u64>("count").expect("table");
        let stop = Arc::new(AtomicBool::new(false));
        let writer = write_until_stopped(store.clone(), stop.clone());
        let mut copies = Vec::new();
        let mut before = 0;
        while copies.len() < 5 {
            let committed = store.read(|txn| txn.get(&count, &"records".to_string())).expect("read").unwrap_or(0);
            if committed < 200 * (copies.len() as u64 + 1) {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let dest = dir.path().join(format!("copy{}", copies.len()));
            let copy = store.copy_to(&dest).expect("copy");
            assert_eq!((copy.application.as_str(), copy.schema_version), ("testd", 3));
            assert_eq!(copy.bytes, std::fs::metadata(dest.join("data.mdb")).expect("stat").len());
            copies.push((dest, committed));
            before = committed;
        }
        stop.store(true, Ordering::Relaxed);
        let last = writer.join().expect("writer");
        assert!(last > before, "the writer went on while the copies were taken");
        let mut previous = 0;
        for (dest, committed) in &copies {
            let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
            assert_eq!((mode(dest), mode(&dest.join("data.mdb"))), (0o700, 0o600));
            let n = check_copy(dest, *committed);
            assert!(n >= previous, "later copies hold more");
            previous = n;
        }
        // Compacted: the copy holds the pages in use, not the data file. An
        // MDB_WRITEMAP store's file is its whole map (1 GiB, sparse).
        let source = std::fs::metadata(state.join("data.mdb")).expect("stat").len();
        let copied = std::fs::metadata(copies[0].0.join("data.mdb")).expect("stat").len();
        if write_map {
            assert_eq!(source, 1 << 30);
        }
        assert!(copied < 16 << 20 && copied <= source, "copy {copied} bytes of a {source}-byte file");
    }
}

#[test]
fn copies_refuse_an_existing_file_a_store_open_here_and_a_directory_without_one() {
    let (dir, store) = fresh();
    let t = store.table::<u64, u64>("t").expect("table");
    store.write(|txn| txn.put(&t, &1, &1)).expect("write");
    let dest = dir.path().join("copy");
    store.copy_to(&dest).expect("copy");
    match store.copy_to(&dest) {
        Err(e @ StoreError::CopyDestination { .. }) => {
            assert_eq!(e.io_kind(), Some(std::io::ErrorKind::AlreadyExists), "{e}");
        }
        other => panic!("a second copy over the first: {other:?}"),
    }
    // This process has the store open: copy it through the Store instead.
    assert!(matches!(
        crate::copy_environment(&dir.path().join("state"), &dir.path().join("copy2")),
        Err(StoreError::AlreadyOpen { .. })
    ));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    assert!(matches!(
        crate::copy_environment(&empty, &dir.path().join("copy3")),
        Err(StoreError::NoEnvironment { .. })
    ));
    assert!(matches!(crate::inspect(&empty), Err(StoreError::NoEnvironment { .. })));
    // Closed: copied (and inspected) from outside, as signetctl does.
    drop(store);
    let again = crate::copy_environment(&dir.path().join("state"), &dir.path().join("copy4")).expect("copy closed");
    let seen = crate::inspect(&dir.path().join("copy4")).expect("inspect");
    assert_eq!(
        (seen.bytes, &seen.application, seen.schema_version),
        (again.bytes, &again.application, again.schema_version)
    );
    assert_eq!((seen.application.as_str(), seen.schema_version), ("testd", 3));
    let copy = open(&dir.path().join("copy4"));
    let t = copy.table::<u64, u64>("t").expect("table");
    assert_eq!(copy.read(|txn| txn.get(&t, &1)).expect("read"), Some(1));
}

#[test]
fn a_copy_of_another_processs_write_map_store_while_it_commits() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let exe = std::env::current_exe().expect("test binary");
    // crash_child: a store opened with MDB_WRITEMAP, one record per commit.
    let mut child = Command::new(exe)
        .args(["--exact", "tests::crash_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CRASH_CHILD_DIR, &state)
        .env(CRASH_CHILD_WRITE_MAP, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let reported = Arc::new(AtomicU64::new(0));
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = {
        let reported = reported.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(pos) = line.find("committed ") {
                    let id = line[pos + "committed ".len()..].trim().parse().expect("committed id");
                    reported.store(id, Ordering::Relaxed);
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut previous = 0;
    for i in 0..4 {
        while reported.load(Ordering::Relaxed) < 300 * (i + 1) {
            assert!(Instant::now() < deadline, "the child stopped committing");
            std::thread::sleep(Duration::from_millis(5));
        }
        let before = reported.load(Ordering::Relaxed);
        let dest = dir.path().join(format!("copy{i}"));
        let copy = crate::copy_environment(&state, &dest).expect("copy the child's store");
        assert_eq!((copy.application.as_str(), copy.schema_version), ("crashd", 1));
        let store = Store::open(&dest, StoreOptions::new("crashd", 1)).expect("open copy");
        let t = store.table::<u64, Record>("records").expect("table");
        let all = store.read(|txn| txn.range(&t, None, usize::MAX)).expect("read copy");
        assert!(all.len() as u64 >= before, "copy {i}: {} records, {before} committed before it", all.len());
        assert!(all.len() as u64 >= previous);
        for (n, (id, r)) in all.iter().enumerate() {
            assert_eq!(*id, n as u64 + 1, "copy {i}: records are contiguous");
            assert_eq!(r, &Record::new(*id));
        }
        previous = all.len() as u64;
    }
    // The last copy may hold records whose "committed" lines the reader has not seen yet:
    // the child goes on committing if a later one is reported before the deadline.
    while reported.load(Ordering::Relaxed) <= previous {
        assert!(Instant::now() < deadline, "the child stopped committing after the copies");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("kill child");
    child.wait().expect("wait child");
    reader.join().expect("reader");
}

#[test]
fn commits_count_every_committed_write_and_nothing_else() {
    for write_map in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = StoreOptions::new("testd", 3);
        opts.write_map = write_map;
        let store = Store::open(&dir.path().join("state"), opts).expect("open store");
        let t = store.table::<u64, String>("t").expect("table");
        let before = store.commits();
        store.write(|txn| txn.put(&t, &1, &"one".to_string())).expect("write");
        assert_eq!(store.commits(), before + 1, "write_map {write_map}: a write");
        let refused = store.write(|txn| {
            txn.put(&t, &2, &"two".to_string())?;
            Err::<(), StoreError>(StoreError::MapFull)
        });
        assert!(refused.is_err());
        assert_eq!(store.commits(), before + 1, "write_map {write_map}: an aborted write is not a commit");
        futures::executor::block_on(store.write_grouped(move |txn| txn.put(&t, &3, &"three".to_string())))
            .expect("grouped write");
        // Counted before the writer was told: no race with the assertion.
        assert_eq!(store.commits(), before + 2, "write_map {write_map}: a grouped write");
        store.read(|txn| txn.get(&t, &1)).expect("read");
        assert_eq!(store.commits(), before + 2, "write_map {write_map}: a read");
    }
}
