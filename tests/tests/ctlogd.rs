//! ctlogd as a process, over a real signd (each log key under signd's CT log
//! role), real LMDB, and tiles on disk or in a real S3-compatible server
//! (versitygw):
//!
//! - `kill -9` under a write load that mixes `add-chain` and `add-pre-chain`
//!   (precertificates signed by the root and through a Precertificate Signing
//!   Certificate) loses nothing acknowledged: after a restart every entry
//!   whose SCT was returned is in the tree at the index its SCT's
//!   `leaf_index` names, with the same timestamp, and its SCT verifies over
//!   the (pre)certificate's entry, built independently; the same chain
//!   submitted again gets the same SCT; the tree head, the checkpoint, a
//!   consistency proof from the last tree head seen before the crash and
//!   `signetctl ct verify` all pass.
//! - SIGTERM under load: ctlogd stops, and what it acknowledged is kept.
//! - Two temporal shards in one process: each log takes the certificates
//!   whose NotAfter is in its interval and refuses the others (400, saying
//!   why), signs with its own key, keeps its own tree; `/logs.json` and each
//!   `log.v3.json` give each interval.
//! - A log in an S3 bucket, driven through the binary: entries acknowledged,
//!   the tree verified over HTTP, a restart, and a `kill -9` under load.
//! - Partial tiles: while entries are sequenced, a reader fetching each
//!   checkpoint's right-edge tiles and entries never gets a 404; once the
//!   grace has passed after a checkpoint covered a full tile, that tile's
//!   partial versions (and the right edge's narrower ones) are gone from the
//!   disk (404 over HTTP), the full tiles
//!   serve, `get-entries` and `signetctl ct verify` pass, also after a restart;
//!   ctlogd runs with transparent huge pages off.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ctlogd::storage::versitygw::Versitygw;
use signet_ct::merkle::{verify_consistency, Tile};
use signet_ct::rfc6962::api::{hashes_from_base64, AddChainResponse, GetSthConsistencyResponse};
use signet_ct::Sct;
use signet_tests::ctlog::{
    rfc3339, submit_until, unix_now, CtPki, Ctlogd, Kind, LogSpec, S3Target, TestEntry, TEST_SEQUENCING,
};
use signet_tests::SigndProcess;

const DAY: i64 = 86_400;

/// Batches of at most 64, closed after 50 ms: many batches under load.
const SMALL_BATCHES: &str = "[sequencing]\nmax_age_ms = 50\nmax_batch = 64\n";

/// `n` entries from `first` on, valid for ten days: certificates,
/// precertificates signed by the root, and precertificates signed through
/// the Precertificate Signing Certificate, in turn.
fn mixed(pki: &CtPki, first: u32, n: u32) -> Vec<TestEntry> {
    let not_after = unix_now() + 10 * DAY;
    (first..first + n)
        .map(|i| match i % 3 {
            0 => pki.cert(i, not_after),
            1 => pki.precert(i, not_after, false),
            _ => pki.precert(i, not_after, true),
        })
        .collect()
}

/// How many of `acked` are certificates, precertificates, and precertificates through the PSC.
fn kinds(entries: &[TestEntry], acked: &[(usize, Sct)]) -> (usize, usize, usize) {
    let of = |k: Kind, len: usize| {
        acked.iter().filter(|(i, _)| entries[*i].kind == k && entries[*i].chain.len() == len).count()
    };
    (of(Kind::Chain, 2), of(Kind::PreChain, 2), of(Kind::PreChain, 3))
}

/// Waits until log `name` has grown past `size`, failing after 30 s.
fn wait_growth(ctlogd: &Ctlogd, name: &str, size: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while ctlogd.sth(name).0.tree_size < size {
        assert!(Instant::now() < deadline, "no progress:\n{}", ctlogd.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The consistency proof between two tree heads of log `name` verifies.
fn check_consistency(ctlogd: &Ctlogd, name: &str, before: &signet_ct::TreeHead, after: &signet_ct::TreeHead) {
    let (status, body) = ctlogd
        .log_get(name, &format!("ct/v1/get-sth-consistency?first={}&second={}", before.tree_size, after.tree_size));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let proof: GetSthConsistencyResponse = serde_json::from_slice(&body).unwrap();
    let proof = hashes_from_base64(&proof.consistency).unwrap();
    verify_consistency(before.tree_size, after.tree_size, &before.root_hash, &after.root_hash, &proof)
        .unwrap_or_else(|e| panic!("consistency {} -> {}: {e}", before.tree_size, after.tree_size));
}

/// A metric's value in ctlogd's /metrics, once it is there (they are updated every second).
fn metric(ctlogd: &Ctlogd, line_start: &str, wanted: impl Fn(f64) -> bool) -> f64 {
    let mut last = None;
    for _ in 0..50 {
        let (status, body) = ctlogd.http_get("/metrics");
        assert_eq!(status, 200);
        let text = String::from_utf8_lossy(&body).into_owned();
        last = text
            .lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        if last.is_some_and(&wanted) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last.unwrap_or_else(|| panic!("no {line_start} in /metrics"))
}

#[test]
fn kill9_under_mixed_write_load_loses_no_acknowledged_entry() {
    let pki = CtPki::new("ctlogd test root");
    let entries = Arc::new(mixed(&pki, 0, 6000));
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let mut ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &[LogSpec::new("test")], SMALL_BATCHES);
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(ctlogd.addr, "test", entries.clone(), 32, stop.clone());
    // Let batches flow, note a tree head, then kill in the middle of the load.
    wait_growth(&ctlogd, "test", 300);
    let (before, _) = ctlogd.sth("test");
    std::thread::sleep(Duration::from_millis(300));
    ctlogd.kill9();
    stop.store(true, Ordering::Relaxed);
    let acked = load.join().unwrap();
    assert!(acked.len() >= 300, "only {} acknowledged before the kill", acked.len());
    let (certs, precerts, via_psc) = kinds(&entries, &acked);
    assert!(certs > 50 && precerts > 50 && via_psc > 50, "acknowledged: {certs}, {precerts}, {via_psc}");

    ctlogd.spawn();
    let after = ctlogd.check_acknowledged("test", &entries, &acked);
    eprintln!(
        "killed at tree size >= {}: {} SCTs acknowledged ({certs} certificates, {precerts} precertificates, \
         {via_psc} through the PSC), tree {} after the restart",
        before.tree_size,
        acked.len(),
        after.tree_size
    );
    assert!(after.tree_size >= before.tree_size);
    // Dedup survived: resubmitting acknowledged chains of each kind gives their first SCTs.
    for (i, sct) in acked.iter().step_by(acked.len() / 30 + 1) {
        let (status, body) = ctlogd.submit("test", &entries[*i]);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let again = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
        assert_eq!(&again, sct, "entry {i} got another SCT after the restart");
    }
    // The tree before the crash is a prefix of the tree after it.
    check_consistency(&ctlogd, "test", &before, &after);
    // The static-ct-api view: the checkpoint verifies and is at least that tree.
    let (status, note) = ctlogd.log_get("test", "checkpoint");
    assert_eq!(status, 200);
    let (_, head) =
        ctlogd.key("test").verify_checkpoint(std::str::from_utf8(&note).unwrap(), &ctlogd.origin("test")).unwrap();
    assert!(head.tree_size >= after.tree_size);
    // Every tile, entry, leaf index and issuer, over HTTP.
    assert!(ctlogd.verify_tree("test") >= after.tree_size);

    // And it goes on: new entries of each kind are accepted after the restart.
    for e in mixed(&pki, 50_000, 3) {
        ctlogd.submit_ok("test", &e);
    }

    // The verified-chain cache is in /metrics. Chains straight from the root
    // are a shape it never remembers; [precert, PSC, root] is one it does:
    // the PSC chains resubmitted above filled it and hit it.
    let hits = metric(&ctlogd, "ct_verified_chain_hits_total{daemon=\"ctlogd\",log=\"test\"}", |v| v >= 1.0);
    assert!(hits >= 1.0, "no hit of the verified-chain cache");
    assert_eq!(metric(&ctlogd, "ct_verified_chains{daemon=\"ctlogd\",log=\"test\"}", |v| v == 1.0), 1.0);
}

#[test]
fn sigterm_under_load_stops_and_keeps_what_it_acknowledged() {
    let pki = CtPki::new("ctlogd sigterm root");
    let entries = Arc::new(mixed(&pki, 10_000, 3000));
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let mut ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &[LogSpec::new("test")], SMALL_BATCHES);
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(ctlogd.addr, "test", entries.clone(), 16, stop.clone());
    wait_growth(&ctlogd, "test", 100);
    let status = ctlogd.terminate();
    assert!(status.success(), "ctlogd exited with {status} on SIGTERM:\n{}", ctlogd.log());
    stop.store(true, Ordering::Relaxed);
    let acked = load.join().unwrap();
    ctlogd.spawn();
    ctlogd.check_acknowledged("test", &entries, &acked);
}

#[test]
fn two_temporal_shards_in_one_process() {
    let pki = CtPki::new("ctlogd shard root");
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    // Adjacent intervals: h1 = [d, d + 30 days), h2 = [d + 30 days, d + 60 days).
    let now = unix_now();
    let d = now - now % DAY;
    let (h1, h2) = ((d, d + 30 * DAY), (d + 30 * DAY, d + 60 * DAY));
    let logs = [LogSpec::new("h1").window(h1.0, h1.1), LogSpec::new("h2").window(h2.0, h2.1)];
    let ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &logs, TEST_SEQUENCING);
    assert_ne!(ctlogd.logs[0].public_key, ctlogd.logs[1].public_key, "each log has its own key");

    // Certificates and precertificates for each interval, the edges included
    // (start inclusive, end exclusive), and some for neither.
    let for_h1 = vec![
        pki.cert(1, now + 10 * DAY),
        pki.precert(2, now + 10 * DAY, false),
        pki.precert(3, now + 20 * DAY, true),
        pki.cert(4, h1.1 - 1),
    ];
    let for_h2 = vec![
        pki.cert(11, h2.0),
        pki.precert(12, now + 45 * DAY, false),
        pki.precert(13, now + 50 * DAY, true),
        pki.cert(14, h2.1 - 1),
        pki.cert(15, now + 40 * DAY),
    ];
    let for_none = vec![pki.cert(21, h2.1), pki.precert(22, now + 90 * DAY, true), pki.cert(23, now + 365 * DAY)];

    let mut acked: Vec<Vec<(usize, Sct)>> = vec![Vec::new(), Vec::new()];
    for (log, mine, theirs) in [("h1", &for_h1, &for_h2), ("h2", &for_h2, &for_h1)] {
        let slot = usize::from(log == "h2");
        for (i, e) in mine.iter().enumerate() {
            // The SCT is this log's (verified with its key) and no other's.
            let sct = ctlogd.submit_ok(log, e);
            let other = if log == "h1" { "h2" } else { "h1" };
            assert!(ctlogd.key(other).verify_sct(&sct, &e.entry).is_err());
            acked[slot].push((i, sct));
        }
        let (start, end) = if log == "h1" { h1 } else { h2 };
        for e in theirs.iter().chain(&for_none) {
            let (status, body) = ctlogd.submit(log, e);
            let text = String::from_utf8_lossy(&body);
            assert_eq!(status, 400, "{log}: {text}");
            // Why: the certificate's NotAfter and this log's interval.
            let leaf = openssl::x509::X509::from_der(&e.chain[0]).unwrap();
            let epoch = openssl::asn1::Asn1Time::from_unix(0).unwrap();
            let diff = epoch.diff(leaf.not_after()).unwrap();
            let not_after = i64::from(diff.days) * DAY + i64::from(diff.secs);
            assert!(text.contains("outside this log's temporal interval"), "{log}: {text}");
            assert!(text.contains(&rfc3339(not_after)), "{log}: {text}");
            assert!(text.contains(&format!("[{}, {})", rfc3339(start), rfc3339(end))), "{log}: {text}");
        }
    }

    // Each tree holds its own entries, at their SCTs' indexes, and verifies.
    for (log, mine, acked) in [("h1", &for_h1, &acked[0]), ("h2", &for_h2, &acked[1])] {
        ctlogd.wait_for_size(log, mine.len() as u64);
        let head = ctlogd.check_acknowledged(log, mine, acked);
        assert_eq!(head.tree_size, mine.len() as u64, "{log} holds exactly its own entries");
        assert_eq!(ctlogd.verify_tree(log), mine.len() as u64);
    }

    // The metadata: each log's interval, in logs.json and in its log.v3.json.
    let (status, body) = ctlogd.http_get("/logs.json");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let list = list["logs"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    for (info, (start, end)) in ctlogd.logs.iter().zip([h1, h2]) {
        let (status, body) = ctlogd.log_get(&info.name, "log.v3.json");
        assert_eq!(status, 200);
        let meta: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(meta["temporal_interval"]["start_inclusive"], rfc3339(start), "{meta}");
        assert_eq!(meta["temporal_interval"]["end_exclusive"], rfc3339(end), "{meta}");
        assert_eq!(meta["url"], ctlogd.log_url(&info.name));
        assert_eq!(meta["key"], STANDARD.encode(&info.public_key));
        assert_eq!(meta["log_id"], STANDARD.encode(ctlogd.key(&info.name).log_id()));
        assert!(list.contains(&meta), "logs.json lacks {meta}");
    }
}

/// Entries of a log in an S3 bucket: ctlogd's own config, its checkpoint and
/// tiles in the bucket (nothing on local disk but LMDB), verified over
/// HTTP; then a restart (SIGTERM), and a `kill -9` under write load: every
/// acknowledged entry is still at its SCT's index, the tree still verifies.
#[test]
fn s3_log_through_the_binary_survives_a_restart_and_kill9() {
    let Some(gw) = Versitygw::start() else { return };
    let pki = CtPki::new("ctlogd s3 root");
    let entries = Arc::new(mixed(&pki, 20_000, 4000));
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let s3 = S3Target {
        endpoint: gw.endpoint.clone(),
        bucket: Versitygw::BUCKET.into(),
        access_key_id: Versitygw::ACCESS.into(),
        secret_access_key: Versitygw::SECRET.into(),
        prefix: "logs/s3test".into(),
    };
    let mut ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &[LogSpec::new("s3log").s3(s3)], SMALL_BATCHES);

    // A first load, every entry acknowledged.
    let first = Arc::new(entries[..600].to_vec());
    let mut acked =
        submit_until(ctlogd.addr, "s3log", first.clone(), 16, Arc::new(AtomicBool::new(false))).join().unwrap();
    assert_eq!(acked.len(), 600, "{}", ctlogd.log());
    ctlogd.wait_for_size("s3log", 600);
    let head = ctlogd.check_acknowledged("s3log", &entries, &acked);
    assert_eq!(ctlogd.verify_tree("s3log"), head.tree_size);
    // The objects are in the bucket (versitygw's POSIX backend shows them as files).
    let objects = gw.bucket_dir().join("logs/s3test");
    assert!(objects.join("checkpoint").is_file(), "no checkpoint in the bucket");
    assert!(objects.join("tile/0/000").is_file() && objects.join("tile/data/000").is_file(), "no full tiles");
    assert!(!dir.join("ctlogd-s3log").join("tiles-s3log").exists());

    // A clean restart: the same tree, from the bucket.
    let status = ctlogd.terminate();
    assert!(status.success(), "{}", ctlogd.log());
    ctlogd.spawn();
    let again = ctlogd.check_acknowledged("s3log", &entries, &acked);
    assert_eq!((again.tree_size, again.root_hash), (head.tree_size, head.root_hash));
    assert_eq!(ctlogd.verify_tree("s3log"), head.tree_size);

    // kill -9 under write load, then a restart.
    let rest = Arc::new(entries[600..].to_vec());
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(ctlogd.addr, "s3log", rest.clone(), 32, stop.clone());
    wait_growth(&ctlogd, "s3log", head.tree_size + 300);
    let (before, _) = ctlogd.sth("s3log");
    std::thread::sleep(Duration::from_millis(200));
    ctlogd.kill9();
    stop.store(true, Ordering::Relaxed);
    let more = load.join().unwrap();
    assert!(more.len() >= 300, "only {} acknowledged before the kill", more.len());
    acked.extend(more.into_iter().map(|(i, sct)| (i + 600, sct)));
    ctlogd.spawn();
    let after = ctlogd.check_acknowledged("s3log", &entries, &acked);
    assert!(after.tree_size >= before.tree_size);
    check_consistency(&ctlogd, "s3log", &before, &after);
    assert_eq!(ctlogd.verify_tree("s3log"), after.tree_size);
    // It goes on writing to the bucket.
    for e in mixed(&pki, 90_000, 3) {
        ctlogd.submit_ok("s3log", &e);
    }
    let grown = ctlogd.wait_for_size("s3log", after.tree_size + 3);
    assert_eq!(ctlogd.verify_tree("s3log"), grown.tree_size);
}

#[test]
fn partial_tiles_go_after_their_full_tile_while_readers_keep_reading() {
    let pki = CtPki::new("ctlogd partial tiles root");
    let entries = Arc::new(mixed(&pki, 0, 900));
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let grace = Duration::from_secs(2);
    let sequencing = "[sequencing]\nmax_age_ms = 30\nmax_batch = 16\npartial_tile_grace_seconds = 2\n";
    let mut ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &[LogSpec::new("test")], sequencing);
    let tiles = ctlogd.home().join("tiles-test").join("tile");
    // ctlogd runs without transparent huge pages (its memory stays near its live heap).
    let pid = ctlogd.child.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("THP_enabled:\t0"), "{status}");

    // Writers and a reader that follows each checkpoint to its right edge.
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(ctlogd.addr, "test", entries.clone(), 8, stop.clone());
    let (reads, failures) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut reads, mut failures) = (0u64, Vec::new());
            let key = ctlogd.key("test");
            while !stop.load(Ordering::Relaxed) {
                let (status, note) = ctlogd.log_get("test", "checkpoint");
                assert_eq!(status, 200);
                let (checkpoint, _) =
                    key.verify_checkpoint(std::str::from_utf8(&note).unwrap(), &ctlogd.origin("test")).unwrap();
                let size = checkpoint.size;
                if size == 0 {
                    continue;
                }
                let edge = Tile::in_tree(0, (size - 1) / 256, size).unwrap();
                let first = size.saturating_sub(20);
                for path in [edge.path(), edge.data_path(), format!("ct/v1/get-entries?start={first}&end={}", size - 1)]
                {
                    let (status, body) = ctlogd.log_get("test", &path);
                    reads += 1;
                    if status != 200 {
                        failures.push(format!("{path} at size {size}: {status} {}", String::from_utf8_lossy(&body)));
                    }
                }
            }
            (reads, failures)
        });
        wait_growth(&ctlogd, "test", 800);
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });
    let acked = load.join().unwrap();
    assert!(failures.is_empty(), "{} of {reads} reads failed: {failures:#?}", failures.len());
    assert!(reads > 100, "only {reads} reads");
    // Each entry was submitted once and acknowledged: the tree holds them all once published.
    ctlogd.wait_for_size("test", acked.len() as u64);
    let head = ctlogd.check_acknowledged("test", &entries, &acked);
    assert!(head.tree_size >= 800);

    // Tiles 0 to 2 are full and covered by the published checkpoint: after
    // the grace their partial versions are gone, hash and data.
    let partial_dirs = |index: u64| {
        let full = Tile::new(0, index, 256).unwrap();
        [tiles.join(format!("0/{:03}.p", full.index())), tiles.join(format!("data/{:03}.p", full.index()))]
    };
    let deadline = Instant::now() + grace + Duration::from_secs(15);
    while (0..3).flat_map(partial_dirs).any(|d| d.exists()) {
        assert!(Instant::now() < deadline, "partial tiles of full tiles still on disk:\n{}", ctlogd.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    for index in 0..3 {
        let full = Tile::new(0, index, 256).unwrap();
        for path in [full.path(), full.data_path()] {
            assert_eq!(ctlogd.log_get("test", &path).0, 200, "{path}");
        }
        // An old partial version is now a 404, as the static-ct-api allows.
        let old = Tile::new(0, index, 100).unwrap();
        assert_eq!(ctlogd.log_get("test", &old.data_path()).0, 404);
    }
    let deleted = metric(&ctlogd, "ct_partial_tiles_deleted_total{daemon=\"ctlogd\",log=\"test\"}", |v| v >= 6.0);
    assert!(deleted >= 6.0, "{deleted} partial tiles counted as deleted");
    // The right edge keeps its partial tile, and every read still works.
    let size = ctlogd.sth("test").0.tree_size;
    if size % 256 != 0 {
        let edge = Tile::in_tree(0, size / 256, size).unwrap();
        assert_eq!(ctlogd.log_get("test", &edge.data_path()).0, 200);
        // Its narrower versions go as well, once a wider one has been published for the grace.
        let dir = tiles.join(format!("data/{:03}.p", edge.index()));
        let deadline = Instant::now() + grace + Duration::from_secs(15);
        while std::fs::read_dir(&dir).unwrap().count() > 1 {
            assert!(Instant::now() < deadline, "superseded partial tiles still in {}", dir.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(ctlogd.entries("test", size).len() as u64, size);
    assert!(ctlogd.verify_tree("test") >= size);

    // A restart: the log starts over tiles without partial versions, and goes on.
    assert!(ctlogd.terminate().success());
    ctlogd.spawn();
    ctlogd.check_acknowledged("test", &entries, &acked);
    for e in mixed(&pki, 50_000, 3) {
        ctlogd.submit_ok("test", &e);
    }
    ctlogd.wait_for_size("test", size + 3);
    assert!(ctlogd.verify_tree("test") >= size + 3);
}
