//! The HTTP handlers over a real log (local storage, LMDB, test PKI and key):
//! both APIs, verified as a client would, and every kind of bad input.

use std::time::Duration;

use signet_ct::merkle::{verify_consistency, verify_inclusion};
use signet_ct::rfc6962::api::{
    add_chain_body, hashes_from_base64, AddChainResponse, GetEntriesResponse, GetEntryAndProofResponse,
    GetProofByHashResponse, GetRootsResponse, GetSthConsistencyResponse, GetSthResponse,
};
use signet_ct::rfc6962::{precert, SignedEntry};
use signet_ct::staticct::{decode_data_tile, issuer_path};
use signet_ct::{LogKey, TimestampedEntry};

use super::*;
use crate::chain::tests::{Pki, Spec};
use crate::log::LogConfig;
use crate::sequencer::tests::{fast_config, TestLog};
use crate::storage::CACHE_IMMUTABLE;

struct Fixture {
    http: CtHttp,
    key: LogKey,
    pki: Pki,
    _log: TestLog,
    _task: tokio::task::JoinHandle<()>,
}

async fn fixture() -> Fixture {
    let test_log = TestLog::new();
    let (seq, task) = test_log.start(fast_config()).await;
    let pki = Pki::new();
    let config = LogConfig {
        description: "test log".into(),
        submission_url: "https://ct.example.net/test/".into(),
        monitoring_url: "https://ct.example.net/test/".into(),
        public_key_der: test_log.params().public_key_der,
        window: None,
        mmd_secs: 60,
        limits: Default::default(),
        max_get_entries: 100,
        clock: signet_types::Clock::system(),
    };
    let log = Arc::new(Log::new(config, Arc::new(pki.roots()), seq, test_log.storage.clone()));
    Fixture { http: CtHttp::new(vec![("/test/".into(), log)]), key: test_log.key(), pki, _log: test_log, _task: task }
}

impl Fixture {
    async fn get(&self, path: &str) -> (StatusCode, Response<Full<Bytes>>, Bytes) {
        let (p, q) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
        let r = self.http.answer(&Method::GET, &format!("/test/{p}"), q, Bytes::new()).await;
        let status = r.status();
        let body = r.clone().into_body().collect().await.unwrap().to_bytes();
        (status, r, body)
    }

    async fn post(&self, path: &str, body: impl Into<Bytes>) -> (StatusCode, Bytes) {
        let r = self.http.answer(&Method::POST, &format!("/test/{path}"), None, body.into()).await;
        let status = r.status();
        (status, r.into_body().collect().await.unwrap().to_bytes())
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let (status, _, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// Waits until the published tree has `size` entries.
    async fn wait_for(&self, size: u64) -> GetSthResponse {
        for _ in 0..500 {
            let sth: GetSthResponse = self.json("ct/v1/get-sth").await;
            if sth.tree_size >= size {
                return sth;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("tree never reached {size}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_apis_serve_one_verifiable_tree() {
    let f = fixture().await;
    // 300 certificates and a precertificate, some submitted twice.
    let mut submitted = Vec::new();
    let mut old = None;
    for i in 0..300 {
        if i == 100 {
            old = Some(f.wait_for(100).await);
        }
        let chain = f.pki.chain(&Spec::leaf(&format!("{i}.example")));
        let (status, body) = f.post("ct/v1/add-chain", add_chain_body(&chain)).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
        f.key.verify_sct(&sct, &SignedEntry::X509(chain[0].clone())).unwrap();
        if i % 100 == 0 {
            let (_, again) = f.post("ct/v1/add-chain", add_chain_body(&chain)).await;
            assert_eq!(again, body, "a resubmission gets the first SCT");
        }
        submitted.push((SignedEntry::X509(chain[0].clone()), sct));
    }
    let pre = f.pki.psc_chain("pre.example");
    let (status, body) = f.post("ct/v1/add-pre-chain", add_chain_body(&pre)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
    let pre_entry = precert::precert_entry(&[&pre[0], &pre[1], &pre[2]]).unwrap();
    f.key.verify_sct(&sct, &pre_entry).unwrap();
    submitted.push((pre_entry, sct));

    let sth = f.wait_for(301).await;
    let (head, sig) = sth.tree_head().unwrap();
    f.key.verify_tree_head(&head, &sig).unwrap();
    assert_eq!(head.tree_size, 301);

    // Every entry: by hash, with its proof; and get-entry-and-proof.
    for (i, (entry, sct)) in submitted.iter().enumerate().step_by(37).chain([(300, &submitted[300])]) {
        let te =
            TimestampedEntry { timestamp: sct.timestamp, entry: entry.clone(), extensions: sct.extensions.clone() };
        let leaf = te.leaf_hash().unwrap();
        let hash = signet_ct::rfc6962::api::base64(&leaf).replace('+', "%2B").replace('/', "%2F").replace('=', "%3D");
        let p: GetProofByHashResponse = f.json(&format!("ct/v1/get-proof-by-hash?hash={hash}&tree_size=301")).await;
        assert_eq!(p.leaf_index, i as u64);
        verify_inclusion(i as u64, 301, &leaf, &hashes_from_base64(&p.audit_path).unwrap(), &head.root_hash).unwrap();
        let e: GetEntryAndProofResponse =
            f.json(&format!("ct/v1/get-entry-and-proof?leaf_index={i}&tree_size=301")).await;
        assert_eq!(e.leaf_input, signet_ct::rfc6962::api::base64(&te.merkle_tree_leaf().unwrap()));
        assert_eq!(e.audit_path, p.audit_path);
    }
    // get-entries, capped at max_get_entries.
    let entries: GetEntriesResponse = f.json("ct/v1/get-entries?start=250&end=400").await;
    assert_eq!(entries.entries.len(), 51);
    let entries: GetEntriesResponse = f.json("ct/v1/get-entries?start=0&end=1000").await;
    assert_eq!(entries.entries.len(), 100);
    // Consistency between two published sizes.
    let c: GetSthConsistencyResponse = f.json("ct/v1/get-sth-consistency?first=0&second=301").await;
    assert!(c.consistency.is_empty());
    let (old_head, _) = old.unwrap().tree_head().unwrap();
    let c: GetSthConsistencyResponse =
        f.json(&format!("ct/v1/get-sth-consistency?first={}&second=301", old_head.tree_size)).await;
    let proof = hashes_from_base64(&c.consistency).unwrap();
    verify_consistency(old_head.tree_size, 301, &old_head.root_hash, &head.root_hash, &proof).unwrap();
    let c: GetSthConsistencyResponse = f.json("ct/v1/get-sth-consistency?first=301&second=301").await;
    assert!(c.consistency.is_empty());
    let roots: GetRootsResponse = f.json("ct/v1/get-roots").await;
    assert_eq!(roots.certificates.len(), 1);

    // Static CT API: checkpoint, full and partial tiles, data tiles, issuers.
    let (status, r, cp) = f.get("checkpoint").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r.headers()[CACHE_CONTROL], CACHE_SHORT);
    let (checkpoint, _) = f.key.verify_checkpoint(std::str::from_utf8(&cp).unwrap(), "ct.example.net/test").unwrap();
    assert_eq!((checkpoint.size, checkpoint.root_hash), (301, head.root_hash));
    let (status, r, full) = f.get("tile/0/000").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r.headers()[CACHE_CONTROL], CACHE_IMMUTABLE);
    assert_eq!(full.len(), 256 * 32);
    let (status, r, _) = f.get("tile/0/001.p/45").await;
    assert_eq!((status, &r.headers()[CACHE_CONTROL]), (StatusCode::OK, &HeaderValue::from_static(CACHE_SHORT)));
    let (status, _, data) = f.get("tile/data/001.p/45").await;
    assert_eq!(status, StatusCode::OK);
    let leaves = decode_data_tile(&data).unwrap();
    assert_eq!(leaves.len(), 45);
    let issuer = &leaves[44].chain_fingerprints[0];
    let (status, r, der) = f.get(&issuer_path(issuer)).await;
    assert_eq!((status, &r.headers()[CACHE_CONTROL]), (StatusCode::OK, &HeaderValue::from_static(CACHE_IMMUTABLE)));
    assert_eq!(der, pre[1]);
    // Tiles beyond the published tree are not served.
    assert_eq!(f.get("tile/0/001.p/46").await.0, StatusCode::NOT_FOUND);
    assert_eq!(f.get("tile/0/001").await.0, StatusCode::NOT_FOUND);
    assert_eq!(f.get("tile/data/002").await.0, StatusCode::NOT_FOUND);
    // Metadata.
    let meta: serde_json::Value = f.json("log.v3.json").await;
    assert_eq!(meta["log_id"], signet_ct::rfc6962::api::base64(&f.key.log_id()));
    assert_eq!(meta["mmd"], 60);
    // The list at the root holds the same metadata; anything else at the root is no log.
    let r = f.http.answer(&Method::GET, "/logs.json", None, Bytes::new()).await;
    assert_eq!(r.status(), StatusCode::OK);
    let list: serde_json::Value = serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(list["logs"], serde_json::json!([meta]));
    let r = f.http.answer(&Method::POST, "/logs.json", None, Bytes::new()).await;
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let r = f.http.answer(&Method::GET, "/other/checkpoint", None, Bytes::new()).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_client_error() {
    let f = fixture().await;
    let good = f.pki.chain(&Spec::leaf("good.example"));
    assert_eq!(f.post("ct/v1/add-chain", add_chain_body(&good)).await.0, StatusCode::OK);
    f.wait_for(1).await;
    let other = Pki::new();
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let cases: Vec<(&str, Bytes, StatusCode)> = vec![
        ("ct/v1/add-chain", Bytes::from_static(b"{not json"), StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", Bytes::from_static(b"{\"chain\": []}"), StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", Bytes::from_static(b"{\"chain\": [\"!!\"]}"), StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", Bytes::from(vec![b' '; 10 << 20]), StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", add_chain_body(&good[..1]).into(), StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", add_chain_body(&other.chain(&Spec::leaf("x.example"))).into(), StatusCode::BAD_REQUEST),
        ("ct/v1/add-pre-chain", add_chain_body(&good).into(), StatusCode::BAD_REQUEST),
        (
            "ct/v1/add-chain",
            add_chain_body(&f.pki.chain(&Spec { not_before: t - 900, not_after: t - 1, ..Spec::leaf("old.example") }))
                .into(),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (path, body, want) in cases {
        let (status, msg) = f.post(path, body).await;
        assert_eq!(status, want, "{path}: {}", String::from_utf8_lossy(&msg));
        assert!(!msg.is_empty());
    }
    for (path, want) in [
        ("ct/v1/get-entries?start=1&end=5", StatusCode::BAD_REQUEST),
        ("ct/v1/get-entries?start=5&end=1", StatusCode::BAD_REQUEST),
        ("ct/v1/get-entries?start=-1&end=1", StatusCode::BAD_REQUEST),
        ("ct/v1/get-entries", StatusCode::BAD_REQUEST),
        ("ct/v1/get-sth-consistency?first=1&second=9", StatusCode::BAD_REQUEST),
        ("ct/v1/get-proof-by-hash?hash=AAAA&tree_size=1", StatusCode::BAD_REQUEST),
        (
            "ct/v1/get-proof-by-hash?hash=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%3D&tree_size=1",
            StatusCode::NOT_FOUND,
        ),
        ("ct/v1/get-entry-and-proof?leaf_index=1&tree_size=1", StatusCode::BAD_REQUEST),
        ("ct/v1/add-chain", StatusCode::METHOD_NOT_ALLOWED),
        ("tile/0/../001", StatusCode::BAD_REQUEST),
        ("tile/../../etc/passwd", StatusCode::BAD_REQUEST),
        ("tile/0/x000/001", StatusCode::BAD_REQUEST),
        ("issuer/../../checkpoint", StatusCode::BAD_REQUEST),
        ("issuer/ABCDEF", StatusCode::BAD_REQUEST),
        (&*format!("issuer/{}", "0".repeat(64)), StatusCode::NOT_FOUND),
        ("nothing-here", StatusCode::NOT_FOUND),
    ] {
        let (status, _, body) = f.get(path).await;
        assert_eq!(status, want, "{path}: {}", String::from_utf8_lossy(&body));
    }
    assert_eq!(
        f.http.answer(&Method::GET, "/elsewhere/checkpoint", None, Bytes::new()).await.status(),
        StatusCode::NOT_FOUND
    );
    // The log still serves.
    let sth: GetSthResponse = f.json("ct/v1/get-sth").await;
    assert_eq!(sth.tree_size, 1);
}

#[test]
fn queries_decode() {
    let q = Query::parse("hash=a%2Bb%2F%3D+c&n=5&empty=&bad");
    assert_eq!(q.get("hash").unwrap(), "a+b/=+c");
    assert_eq!(q.u64("n").unwrap(), 5);
    assert!(q.u64("empty").is_err());
    assert!(q.get("bad").is_err());
    assert_eq!(percent_decode("%zz%4"), "%zz%4");
}
