//! One suite of storage tests, run against [`LocalDir`] and against a real
//! S3-compatible server ([`Versitygw`], when its binary is installed).

use bytes::Bytes;
use signet_ct::merkle::Tile;

use super::versitygw::Versitygw;
use super::*;

fn tile(level: u8, index: u64, width: u16) -> Tile {
    Tile::new(level, index, width).unwrap()
}

/// The behaviour every [`Storage`] must have.
pub(crate) async fn suite(s: &dyn Storage) {
    let full = ObjectKey::Tile(tile(0, 1234067, 256));
    let partial = ObjectKey::Tile(tile(0, 7, 3));
    let data = ObjectKey::DataTile(tile(0, 7, 3));
    let issuer = ObjectKey::Issuer([0xab; 32]);

    // Missing objects.
    for key in [full, partial, data, issuer, ObjectKey::Checkpoint] {
        assert_eq!(s.get(key).await.unwrap(), None, "{key:?}");
        assert!(!s.exists(key).await.unwrap(), "{key:?}");
    }

    // Put, get, exists; a tile and its data tile are distinct objects.
    s.put(partial, Bytes::from_static(b"hashes"), PutMode::Overwrite).await.unwrap();
    s.put(data, Bytes::from_static(b"entries"), PutMode::Overwrite).await.unwrap();
    assert_eq!(s.get(partial).await.unwrap().as_deref(), Some(&b"hashes"[..]));
    assert_eq!(s.get(data).await.unwrap().as_deref(), Some(&b"entries"[..]));
    assert!(s.exists(partial).await.unwrap());
    assert!(!s.exists(ObjectKey::Tile(tile(0, 7, 4))).await.unwrap());

    // Overwrite replaces; immutable keeps the first bytes.
    s.put(ObjectKey::Checkpoint, Bytes::from_static(b"one\n"), PutMode::Overwrite).await.unwrap();
    s.put(ObjectKey::Checkpoint, Bytes::from_static(b"two\n"), PutMode::Overwrite).await.unwrap();
    assert_eq!(s.get(ObjectKey::Checkpoint).await.unwrap().as_deref(), Some(&b"two\n"[..]));
    s.put(issuer, Bytes::from_static(b"first"), PutMode::Immutable).await.unwrap();
    s.put(issuer, Bytes::from_static(b"second"), PutMode::Immutable).await.unwrap();
    assert_eq!(s.get(issuer).await.unwrap().as_deref(), Some(&b"first"[..]));

    // Deep paths, empty and large objects.
    let big: Bytes = (0..256 * 32).map(|i| i as u8).collect::<Vec<u8>>().into();
    s.put(full, big.clone(), PutMode::Overwrite).await.unwrap();
    assert_eq!(s.get(full).await.unwrap(), Some(big));
    let empty = ObjectKey::Tile(tile(2, 0, 1));
    s.put(empty, Bytes::new(), PutMode::Overwrite).await.unwrap();
    assert_eq!(s.get(empty).await.unwrap().as_deref(), Some(&b""[..]));

    // Concurrent writers of distinct and of the same objects.
    let writes = (0..32u64).map(|i| {
        let key = ObjectKey::Tile(tile(1, i % 8, 256));
        s.put(key, Bytes::from(vec![i as u8; 64]), PutMode::Overwrite)
    });
    for r in futures::future::join_all(writes).await {
        r.unwrap();
    }
    for i in 0..8u64 {
        let got = s.get(ObjectKey::Tile(tile(1, i, 256))).await.unwrap().unwrap();
        assert_eq!(got.len(), 64);
        assert!(got.iter().all(|b| *b == got[0] && u64::from(*b) % 8 == i), "torn object");
    }

    // The partial versions of a full tile are listed and deleted; its full
    // version, its neighbours and the other kind of tile are left alone.
    let full7 = ObjectKey::DataTile(tile(0, 7, 256));
    assert_eq!(s.partials(full7).await.unwrap(), vec![data]);
    s.put(ObjectKey::DataTile(tile(0, 7, 200)), Bytes::from_static(b"wider"), PutMode::Overwrite).await.unwrap();
    s.put(full7, Bytes::from_static(b"all"), PutMode::Overwrite).await.unwrap();
    s.put(ObjectKey::DataTile(tile(0, 8, 3)), Bytes::from_static(b"next"), PutMode::Overwrite).await.unwrap();
    let mut found = s.partials(full7).await.unwrap();
    found.sort_by_key(|k| k.path());
    assert_eq!(found, vec![ObjectKey::DataTile(tile(0, 7, 200)), data]);
    assert_eq!(s.partials(ObjectKey::DataTile(tile(0, 9, 256))).await.unwrap(), vec![]);
    assert_eq!(s.partials(partial).await.unwrap(), vec![], "a partial tile has no partial versions");
    for k in found {
        s.delete(k).await.unwrap();
        assert!(!s.exists(k).await.unwrap());
    }
    s.delete(data).await.unwrap();
    assert_eq!(s.partials(full7).await.unwrap(), vec![]);
    assert!(s.exists(full7).await.unwrap());
    assert!(s.exists(partial).await.unwrap(), "the hash tile of the same coordinates stays");
    assert!(s.exists(ObjectKey::DataTile(tile(0, 8, 3))).await.unwrap());
    // Written again after a delete (the directory is made again).
    s.put(data, Bytes::from_static(b"again"), PutMode::Overwrite).await.unwrap();
    assert_eq!(s.get(data).await.unwrap().as_deref(), Some(&b"again"[..]));
    assert!(!s.describe().is_empty());
}

#[test]
fn relative_paths_are_checked() {
    for good in ["checkpoint", "tile/0/x001/002.p/3", "issuer/ab"] {
        check_relative_path(good).unwrap();
    }
    for bad in ["", "/etc/passwd", "tile/../x", "..", "a//b", "a/./b", "a/", "a\\b", "a b", "tile/\u{e9}"] {
        assert!(check_relative_path(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn keys_name_their_objects() {
    assert_eq!(ObjectKey::Tile(tile(0, 1000, 256)).path(), "tile/0/x001/000");
    assert_eq!(ObjectKey::DataTile(tile(0, 5, 17)).path(), "tile/data/005.p/17");
    assert_eq!(ObjectKey::Issuer([0; 32]).path(), format!("issuer/{}", "0".repeat(64)));
    assert_eq!(ObjectKey::Checkpoint.path(), "checkpoint");
    assert_eq!(ObjectKey::Tile(tile(0, 0, 256)).cache_control(), CACHE_IMMUTABLE);
    assert_eq!(ObjectKey::DataTile(tile(0, 0, 255)).cache_control(), CACHE_SHORT);
    assert_eq!(ObjectKey::Checkpoint.cache_control(), CACHE_SHORT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_dir_suite() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalDir::open(&dir.path().join("log")).unwrap();
    suite(&s).await;
    // No temporary files are left behind.
    let mut stack = vec![s.root().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            assert!(!e.file_name().to_string_lossy().starts_with(".tmp"), "{:?}", e.path());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_suite_on_versitygw() {
    let Some(gw) = Versitygw::start() else { return };
    let s = gw.storage("logs/one");
    suite(&s).await;
    // A second log in the same bucket under another prefix sees nothing of the first.
    let other = gw.storage("logs/two");
    assert!(!other.exists(ObjectKey::Checkpoint).await.unwrap());
}

/// A file just written is in the page cache: read in place, whole, with no
/// trip through the blocking pool; a missing file is found missing there too,
/// and a directory is an error rather than an object.
#[test]
fn local_reads_of_cached_files_are_done_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalDir::open(dir.path()).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::create_dir_all(dir.path().join("tile/data")).unwrap();
    std::fs::write(dir.path().join("tile/data/000"), &big).unwrap();
    let path = s.inner.file("tile/data/000").unwrap();
    match s.inner.read_cached(&path).unwrap() {
        local::Cached::Read(b) => assert_eq!(b, big),
        local::Cached::Missing => panic!("found missing"),
        // tmpfs and ext4 both take RWF_NOWAIT; only a filesystem without it ends here.
        local::Cached::WouldBlock => assert!(s.inner.no_nowait.load(std::sync::atomic::Ordering::Relaxed)),
    }
    assert!(matches!(s.inner.read_cached(&dir.path().join("tile/data/001")).unwrap(), local::Cached::Missing));
    assert!(s.inner.read_cached(&dir.path().join("tile/data")).is_err());
}
