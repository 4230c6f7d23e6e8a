//! `ct`'s checks against logs built in memory with signet-ct, as a log would
//! store them: tiles written batch by batch (so earlier partial tiles stay),
//! data tiles, issuers and a signed checkpoint. The same checks then run over
//! real HTTP against a hyper server serving that log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use clap::Parser;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use signet_ct::merkle::tile::{hashes_from_tile_bytes, tile_bytes, tiles_for_size};
use signet_ct::merkle::{append_leaves, consistency_proof, inclusion_proof, Hash, MemoryTree, MerkleError, Tile};
use signet_ct::rfc6962::{log_id, DigitallySigned, SignedEntry, TimestampedEntry, TreeHead};
use signet_ct::staticct::note::SignedNote;
use signet_ct::staticct::{
    chain_fingerprints, encode_data_tile, issuer_path, leaf_index_extensions, signed_checkpoint, TileLeaf,
};
use signet_ct::LogKey;

use super::check::{self, tiles_in_order, TreeReport};
use super::source::{FetchError, Http, HttpLog, LogSource};
use super::*;

const PREFIX: &str = "http://log.test/demo/";
const ORIGIN: &str = "log.test/demo";
const ISSUERS: [&[u8]; 2] = [b"issuer certificate A", b"issuer certificate B"];

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

fn new_key() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// A log in memory.
struct MemLog {
    key: PKey<Private>,
    spki: Vec<u8>,
    leaves: Vec<TileLeaf>,
    tree: MemoryTree,
    index_of: HashMap<Hash, u64>,
    objects: HashMap<String, Bytes>,
    /// Proofs served with their first hash flipped.
    corrupt_proofs: bool,
    /// `get-proof-by-hash` answers this leaf index.
    proof_index_offset: u64,
}

impl MemLog {
    fn new() -> Self {
        let key = new_key();
        let spki = key.public_key_to_der().unwrap();
        let mut objects = HashMap::new();
        for issuer in ISSUERS {
            objects.insert(issuer_path(&chain_fingerprints(&[issuer])[0]), Bytes::from_static(issuer));
        }
        let log_v3 = json!({
            "description": "test log", "log_id": B64.encode(log_id(&spki).unwrap()), "key": B64.encode(&spki),
            "url": PREFIX, "submission_url": PREFIX, "monitoring_url": PREFIX, "mmd": 60,
        });
        objects.insert("log.v3.json".into(), Bytes::from(log_v3.to_string()));
        Self {
            key,
            spki,
            leaves: Vec::new(),
            tree: MemoryTree::new(),
            index_of: HashMap::new(),
            objects,
            corrupt_proofs: false,
            proof_index_offset: 0,
        }
    }

    /// A log of `size` entries, grown in batches of `batch`, with a checkpoint.
    fn with_size(size: u64, batch: u64) -> Self {
        let mut log = Self::new();
        while log.size() < size {
            log.grow(batch.min(size - log.size()));
        }
        log.sign_checkpoint(size, log.tree.root_at(size).unwrap());
        log
    }

    fn size(&self) -> u64 {
        self.leaves.len() as u64
    }

    fn leaf(i: u64) -> TileLeaf {
        let extensions = leaf_index_extensions(i).unwrap();
        let timestamp = 1_700_000_000_000 + i;
        let (entry, pre_certificate) = if i % 5 == 4 {
            let tbs_certificate = format!("tbs {i}").into_bytes();
            (SignedEntry::Precert { issuer_key_hash: [7; 32], tbs_certificate }, Some(format!("pre {i}").into_bytes()))
        } else {
            (SignedEntry::X509(format!("certificate {i}").into_bytes()), None)
        };
        let issuers: &[&[u8]] = if i % 3 == 0 { &ISSUERS } else { &ISSUERS[..1] };
        TileLeaf {
            entry: TimestampedEntry { timestamp, entry, extensions },
            pre_certificate,
            chain_fingerprints: chain_fingerprints(issuers),
        }
    }

    /// Appends `n` entries and writes the tiles they change.
    fn grow(&mut self, n: u64) {
        let old = self.size();
        let new: Vec<TileLeaf> = (old..old + n).map(Self::leaf).collect();
        let hashes: Vec<Hash> = new.iter().map(|l| l.leaf_hash().unwrap()).collect();
        let objects = &self.objects;
        let mut read =
            |t: Tile| -> Result<Vec<Hash>, MerkleError> { Ok(hashes_from_tile_bytes(&objects[&t.path()]).unwrap()) };
        let update = append_leaves(&mut read, old, &hashes).unwrap();
        for (h, l) in hashes.iter().zip(new) {
            self.index_of.insert(*h, self.tree.push(*h));
            self.leaves.push(l);
        }
        for (tile, hashes) in update.tiles {
            self.objects.insert(tile.path(), Bytes::from(tile_bytes(&hashes)));
            if tile.level() == 0 {
                let start = (tile.index() * 256) as usize;
                let data = encode_data_tile(&self.leaves[start..start + usize::from(tile.width())]).unwrap();
                self.objects.insert(tile.data_path(), Bytes::from(data));
            }
        }
    }

    fn sign_checkpoint(&mut self, size: u64, root: Hash) {
        let note = checkpoint_note(&self.key, &self.spki, size, root);
        self.objects.insert("checkpoint".into(), Bytes::from(note));
    }

    fn log_key(&self) -> LogKey {
        LogKey::from_spki_der(&self.spki).unwrap()
    }

    /// Applies `f` to the bytes of object `path`.
    fn edit(&mut self, path: &str, f: impl FnOnce(&mut Vec<u8>)) {
        let mut b = self.objects[path].to_vec();
        f(&mut b);
        self.objects.insert(path.into(), Bytes::from(b));
    }

    /// Replaces data tile `path`'s entries.
    fn edit_data_tile(&mut self, path: &str, f: impl FnOnce(&mut Vec<TileLeaf>)) {
        let mut leaves = signet_ct::staticct::decode_data_tile(&self.objects[path]).unwrap();
        f(&mut leaves);
        self.objects.insert(path.into(), Bytes::from(encode_data_tile(&leaves).unwrap()));
    }

    fn proof_json(&self, proof: Vec<Hash>, field: &str) -> Bytes {
        let mut proof = proof;
        if self.corrupt_proofs {
            if let Some(h) = proof.first_mut() {
                h[0] ^= 1;
            }
        }
        let hashes: Vec<String> = proof.iter().map(|h| B64.encode(h)).collect();
        Bytes::from(json!({ field: hashes }).to_string())
    }

    fn answer(&self, path: &str) -> Option<Bytes> {
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let q = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .map(|v| v.replace("%2B", "+").replace("%2F", "/").replace("%3D", "="))
        };
        let n = |name: &str| q(name)?.parse::<u64>().ok();
        match route {
            "ct/v1/get-sth-consistency" => {
                let proof = consistency_proof(&mut &self.tree, n("first")?, n("second")?).ok()?;
                Some(self.proof_json(proof, "consistency"))
            }
            "ct/v1/get-proof-by-hash" => {
                let hash: Hash = B64.decode(q("hash")?).ok()?.try_into().ok()?;
                let index = *self.index_of.get(&hash)?;
                let mut body: serde_json::Value = serde_json::from_slice(
                    &self.proof_json(inclusion_proof(&mut &self.tree, index, n("tree_size")?).ok()?, "audit_path"),
                )
                .ok()?;
                body["leaf_index"] = json!(index + self.proof_index_offset);
                Some(Bytes::from(body.to_string()))
            }
            _ => self.objects.get(path).cloned(),
        }
    }
}

impl LogSource for MemLog {
    fn url(&self, path: &str) -> String {
        format!("{PREFIX}{path}")
    }

    async fn fetch(&self, path: &str) -> Result<Bytes, FetchError> {
        self.answer(path).ok_or_else(|| FetchError::NotFound { url: self.url(path) })
    }
}

/// A checkpoint of `size` and `root` signed by `key`.
fn checkpoint_note(key: &PKey<Private>, spki: &[u8], size: u64, root: Hash) -> String {
    let head = TreeHead { timestamp: 1_750_000_000_123, tree_size: size, root_hash: root };
    let mut signer = openssl::sign::Signer::new(MessageDigest::sha256(), key).unwrap();
    let sig = DigitallySigned::ecdsa(signer.sign_oneshot_to_vec(&head.signature_input()).unwrap());
    signed_checkpoint(ORIGIN, &log_id(spki).unwrap(), &head, &sig).unwrap()
}

/// `ct verify` on `log`: checkpoint, then the tree.
async fn verify(log: &impl LogSource, key: &LogKey) -> Result<TreeReport, CtError> {
    let cp = check::checkpoint(log, key, ORIGIN).await?;
    check::verify_tree(log, cp.checkpoint.size, &cp.checkpoint.root_hash, 8, &mut |_, _| {}).await
}

fn verify_mem(log: &MemLog) -> Result<TreeReport, CtError> {
    block_on(verify(log, &log.log_key()))
}

fn hex_of(h: &Hash) -> String {
    hex::encode(h)
}

fn leaf_hash(i: u64) -> Hash {
    MemLog::leaf(i).leaf_hash().unwrap()
}

#[test]
fn good_trees_verify() {
    let sizes = [0u64, 1, 2, 255, 256, 257, 511, 512, 513, 1000, 65_536, 65_536 + 256 * 3 + 7];
    for (i, &size) in sizes.iter().enumerate() {
        let log = MemLog::with_size(size, [1000, 77, 256, 3000][i % 4]);
        let r = verify_mem(&log).unwrap_or_else(|e| panic!("size {size}: {e}"));
        assert_eq!(r.entries, size);
        assert_eq!(r.root, log.tree.root());
        assert_eq!(r.data_tiles, size.div_ceil(256));
        assert_eq!(r.hash_tiles, tiles_for_size(size).count() as u64);
        assert_eq!(r.issuers, if size == 0 { 0 } else { 2 });
    }
}

#[test]
fn tiles_come_children_first() {
    let mut sizes = vec![0u64, 1, 255, 256, 257, 65_535, 65_536, 65_537, 256 * 256 * 256, 256 * 256 * 256 + 256 * 3];
    let mut x = 12_345u64;
    for _ in 0..20 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        sizes.push(x >> 44);
    }
    for size in sizes {
        let order: Vec<Tile> = tiles_in_order(size).collect();
        let mut sorted = order.clone();
        sorted.sort();
        let mut want: Vec<Tile> = tiles_for_size(size).collect();
        want.sort();
        assert_eq!(sorted, want, "size {size}");
        let pos: HashMap<(u8, u64), usize> =
            order.iter().enumerate().map(|(i, t)| ((t.level(), t.index()), i)).collect();
        for (i, t) in order.iter().enumerate().filter(|(_, t)| t.level() > 0) {
            // After every child tile whose hash it holds (the full ones).
            let first = t.index() * 256;
            for child in first..first + u64::from(t.width()) {
                assert!(pos[&(t.level() - 1, child)] < i, "size {size}: {} before its child {child}", t.path());
            }
        }
    }
}

#[test]
fn a_changed_hash_tile_names_the_leaf() {
    let mut log = MemLog::with_size(1000, 300);
    log.edit("tile/0/001", |b| b[5 * 32] ^= 0x80);
    let bad = hashes_from_tile_bytes(&log.objects["tile/0/001"]).unwrap()[5];
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "tile/0/001: hash 5 is {}, but leaf 261 in tile/data/001 hashes to {}",
            hex_of(&bad),
            hex_of(&leaf_hash(261))
        )))
    );
}

#[test]
fn a_changed_entry_is_found() {
    let mut log = MemLog::with_size(1000, 300);
    log.edit_data_tile("tile/data/001", |l| l[2].entry.entry = SignedEntry::X509(b"another".to_vec()));
    let changed = signet_ct::staticct::decode_data_tile(&log.objects["tile/data/001"]).unwrap()[2].leaf_hash().unwrap();
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "tile/0/001: hash 2 is {}, but leaf 258 in tile/data/001 hashes to {}",
            hex_of(&leaf_hash(258)),
            hex_of(&changed)
        )))
    );
}

#[test]
fn a_wrong_leaf_index_is_found() {
    let mut log = MemLog::with_size(1000, 300);
    log.edit_data_tile("tile/data/003.p/232", |l| l[7].entry.extensions = leaf_index_extensions(999).unwrap());
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check("tile/data/003.p/232: entry 7 has leaf_index 999, expected 775".into()))
    );
    let mut log = MemLog::with_size(300, 300);
    log.edit_data_tile("tile/data/000", |l| l[0].entry.extensions = Vec::new());
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check("tile/data/000: entry 0 (leaf 0): missing leaf_index extension".into()))
    );
}

#[test]
fn a_changed_upper_tile_is_found() {
    let mut log = MemLog::with_size(1000, 1000);
    let good = hashes_from_tile_bytes(&log.objects["tile/1/000.p/3"]).unwrap()[1];
    log.edit("tile/1/000.p/3", |b| b[32 + 31] ^= 1);
    let bad = hashes_from_tile_bytes(&log.objects["tile/1/000.p/3"]).unwrap()[1];
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "tile/1/000.p/3: hash 1 is {}, but tile/0/001 hashes to {}",
            hex_of(&bad),
            hex_of(&good)
        )))
    );
    // A full level-1 tile, checked right after its 256 children.
    let mut log = MemLog::with_size(65_536 + 300, 5000);
    log.edit("tile/1/000", |b| b[255 * 32] ^= 1);
    let err = verify_mem(&log).unwrap_err().to_string();
    assert!(err.starts_with("tile/1/000: hash 255 is "), "{err}");
    assert!(err.contains(", but tile/0/255 hashes to "), "{err}");
}

#[test]
fn short_and_malformed_tiles_are_refused() {
    let mut log = MemLog::with_size(1000, 1000);
    log.edit("tile/0/003.p/232", |b| b.truncate(231 * 32));
    assert_eq!(verify_mem(&log), Err(CtError::Check("tile/0/003.p/232: 231 hashes, expected 232".into())));
    log.edit("tile/0/003.p/232", |b| b.push(0));
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check("tile/0/003.p/232: 7393 bytes, not a tile of whole 32-byte hashes".into()))
    );
    let mut log = MemLog::with_size(1000, 1000);
    log.edit_data_tile("tile/data/002", |l| {
        l.pop();
    });
    assert_eq!(verify_mem(&log), Err(CtError::Check("tile/data/002: 255 entries, expected 256".into())));
    log.edit("tile/data/002", |b| b.truncate(100));
    let err = verify_mem(&log).unwrap_err().to_string();
    assert!(err.starts_with("tile/data/002: malformed: "), "{err}");
    let mut log = MemLog::with_size(1000, 1000);
    log.objects.remove("tile/data/001");
    assert_eq!(verify_mem(&log), Err(CtError::Check(format!("GET {PREFIX}tile/data/001: 404 Not Found"))));
}

#[test]
fn checkpoint_signatures_are_checked() {
    // A signature byte changed.
    let mut log = MemLog::with_size(300, 300);
    let note = String::from_utf8(log.objects["checkpoint"].to_vec()).unwrap();
    let mut signed = SignedNote::parse(&note).unwrap();
    let sig = signed.signatures[0].signature.last_mut().unwrap();
    *sig ^= 1;
    log.objects.insert("checkpoint".into(), Bytes::from(signed.to_text().unwrap()));
    assert_eq!(verify_mem(&log), Err(CtError::Check(format!("{PREFIX}checkpoint: signature does not verify"))));
    // Another log's key.
    let log = MemLog::with_size(300, 300);
    let other = MemLog::new().log_key();
    assert_eq!(
        block_on(verify(&log, &other)),
        Err(CtError::Check(format!("{PREFIX}checkpoint: checkpoint: no signature by this log")))
    );
    // Another origin.
    let key = log.log_key();
    let err = block_on(check::checkpoint(&log, &key, "log.test/other")).unwrap_err();
    assert_eq!(err, CtError::Check(format!("{PREFIX}checkpoint: checkpoint: origin does not match")));
    // The log signed a root its tiles do not give.
    let mut log = MemLog::with_size(300, 300);
    log.sign_checkpoint(300, [9; 32]);
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "root: the tiles give {}, the checkpoint says {}",
            hex_of(&log.tree.root()),
            hex_of(&[9; 32])
        )))
    );
    // A size beyond its tiles.
    let mut log = MemLog::with_size(300, 300);
    log.sign_checkpoint(301, log.tree.root());
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "GET {PREFIX}tile/0/001.p/45: 404 Not Found, and the full tile is not there either"
        )))
    );
}

#[test]
fn issuers_are_fetched_and_hashed() {
    let fp = chain_fingerprints(&[ISSUERS[1]])[0];
    let path = issuer_path(&fp);
    let mut log = MemLog::with_size(300, 300);
    log.objects.remove(&path);
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!("{path} (an issuer of leaf 0): GET {PREFIX}{path}: 404 Not Found")))
    );
    log.objects.insert(path.clone(), Bytes::from_static(b"something else"));
    assert_eq!(
        verify_mem(&log),
        Err(CtError::Check(format!(
            "{path} (an issuer of leaf 0): the certificate served has SHA-256 {}",
            hex_of(&chain_fingerprints(&[b"something else"])[0])
        )))
    );
}

/// A checkpoint behind the tiles: a partial tile the log has since replaced
/// by the full one is read from the full tile's prefix.
#[test]
fn partial_tiles_fall_back_to_full_ones() {
    let mut log = MemLog::with_size(300, 300);
    let old_checkpoint = log.objects["checkpoint"].clone();
    log.grow(300);
    log.objects.insert("checkpoint".into(), old_checkpoint);
    log.objects.remove("tile/0/001.p/44");
    log.objects.remove("tile/data/001.p/44");
    let r = verify_mem(&log).unwrap();
    assert_eq!((r.entries, r.root), (300, log.tree.root_at(300).unwrap()));
    // A full tile standing in must be full.
    log.edit("tile/0/001", |b| b.truncate(100 * 32));
    assert_eq!(verify_mem(&log), Err(CtError::Check("tile/0/001: 100 hashes, expected 256".into())));
}

fn checkpoint_of(log: &MemLog) -> signet_ct::staticct::note::Checkpoint {
    block_on(check::checkpoint(log, &log.log_key(), ORIGIN)).unwrap().checkpoint
}

#[test]
fn consistency_proofs_verify_between_tile_roots() {
    let log = MemLog::with_size(70_000, 9000);
    let cp = checkpoint_of(&log);
    for (from, to) in [
        (0, 70_000),
        (1, 70_000),
        (256, 70_000),
        (65_536, 70_000),
        (1000, 1001),
        (300, 65_536),
        (70_000, 70_000),
        (5, 5),
        (69_999, 70_000),
    ] {
        let r = block_on(check::consistency(&log, &cp, from, to, 8)).unwrap_or_else(|e| panic!("{from}->{to}: {e}"));
        assert_eq!(r.from, (from, log.tree.root_at(from).unwrap()));
        assert_eq!(r.to, (to, log.tree.root_at(to).unwrap()));
        assert_eq!(r.proof, consistency_proof(&mut &log.tree, from, to).unwrap());
    }
    assert_eq!(
        block_on(check::consistency(&log, &cp, 10, 70_001, 8)),
        Err(CtError::Usage("need --from <= --to <= the tree size 70000".into()))
    );
    assert!(matches!(block_on(check::consistency(&log, &cp, 11, 10, 8)), Err(CtError::Usage(_))));
}

#[test]
fn bad_consistency_proofs_and_tiles_fail() {
    let mut log = MemLog::with_size(1000, 300);
    log.corrupt_proofs = true;
    let cp = checkpoint_of(&log);
    assert_eq!(
        block_on(check::consistency(&log, &cp, 10, 1000, 8)),
        Err(CtError::Check(format!(
            "the consistency proof from 10 (root {}) to 1000 (root {}) does not verify: proof does not match the root hash",
            hex_of(&log.tree.root_at(10).unwrap()),
            hex_of(&log.tree.root())
        )))
    );
    // A tile at the right edge that does not give the checkpoint's root.
    let mut log = MemLog::with_size(1000, 300);
    log.edit("tile/0/003.p/232", |b| b[0] ^= 1);
    let cp = checkpoint_of(&log);
    let err = block_on(check::consistency(&log, &cp, 10, 1000, 8)).unwrap_err().to_string();
    assert!(err.starts_with("root of size 1000: the tiles give "), "{err}");
    assert!(err.ends_with(&format!(", the checkpoint says {}", hex_of(&log.tree.root()))), "{err}");
}

#[test]
fn inclusion_proofs_verify() {
    let log = MemLog::with_size(1000, 300);
    let cp = checkpoint_of(&log);
    for (index, size) in [(0, 1000), (999, 1000), (500, 1000), (0, 1), (255, 256), (256, 700)] {
        let r = block_on(check::inclusion(&log, &cp, index, size, 8)).unwrap_or_else(|e| panic!("{index}@{size}: {e}"));
        assert_eq!(r.leaf_hash, leaf_hash(index));
        assert_eq!(r.tree, (size, log.tree.root_at(size).unwrap()));
    }
    assert!(matches!(block_on(check::inclusion(&log, &cp, 1000, 1000, 8)), Err(CtError::Usage(_))));
    let mut bad = MemLog::with_size(1000, 300);
    bad.corrupt_proofs = true;
    let cp = checkpoint_of(&bad);
    let err = block_on(check::inclusion(&bad, &cp, 7, 1000, 8)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "the inclusion proof of leaf 7 in the tree of size 1000 (root {}) does not verify: proof does not match the root hash",
            hex_of(&bad.tree.root())
        )
    );
    bad.corrupt_proofs = false;
    bad.proof_index_offset = 1;
    let err = block_on(check::inclusion(&bad, &cp, 7, 1000, 8)).unwrap_err().to_string();
    assert!(err.ends_with(": leaf_index 8, but the entry is at 7"), "{err}");
}

#[test]
fn urls_and_origins() {
    assert_eq!(log_prefix("http://127.0.0.1:8190/demo").unwrap(), "http://127.0.0.1:8190/demo/");
    assert_eq!(log_prefix(" http://127.0.0.1:8190/demo/ ").unwrap(), "http://127.0.0.1:8190/demo/");
    for bad in ["127.0.0.1:8190/demo/", "http://", "http:///x", "http://h/x?y=1", "ftp://h/"] {
        assert!(matches!(log_prefix(bad), Err(CtError::Usage(_))), "{bad}");
    }
    assert!(log_prefix("https://h/").unwrap_err().to_string().contains("https is not supported"));
    assert_eq!(origin_of("http://127.0.0.1:8190/demo/"), "127.0.0.1:8190/demo");
    assert_eq!(origin_of("https://ct.example.net/2026h1/"), "ct.example.net/2026h1");
    assert_eq!(parent_url("http://127.0.0.1:8190/demo/"), "http://127.0.0.1:8190/");
    assert_eq!(parent_url("http://h/a/b/"), "http://h/a/");
    assert_eq!(parent_url("http://h/"), "http://h/");
    assert_eq!(log_name("http://127.0.0.1:8190/demo/"), "demo");
    assert_eq!(log_name("http://h/"), "h");
}

#[test]
fn log_info_key_must_match_its_log_id() {
    let log = MemLog::new();
    let mut info: LogInfo = serde_json::from_slice(&log.objects["log.v3.json"]).unwrap();
    assert_eq!(info.key().unwrap().log_id(), log.log_key().log_id());
    info.log_id = B64.encode([0u8; 32]);
    assert!(info.key().unwrap_err().to_string().starts_with("log_id AAAA"));
}

#[test]
fn the_cli_parses() {
    let cli = crate::Cli::try_parse_from([
        "signetctl",
        "--json",
        "ct",
        "consistency",
        "--log",
        "http://127.0.0.1:8190/demo/",
        "--from",
        "5",
    ])
    .unwrap();
    assert!(cli.json);
    let crate::Command::Ct(CtCommand::Consistency { log, from, to, concurrency }) = cli.command else {
        panic!("not ct consistency")
    };
    assert_eq!((log.log.as_str(), from, to, concurrency), ("http://127.0.0.1:8190/demo/", 5, None, 8));
    assert!(
        crate::Cli::try_parse_from(["signetctl", "ct", "verify", "--log", "http://h/", "--concurrency", "0"]).is_err()
    );
}

/// Exit codes of the three kinds of failure.
#[test]
fn failures_map_to_exit_codes() {
    let code = |e: CtError| crate::Failure::from(e).code;
    assert_eq!(code(CtError::Check(String::new())), 1);
    assert_eq!(code(CtError::Usage(String::new())), 2);
    assert_eq!(code(CtError::Unavailable(String::new())), 5);
    let url = String::from("u");
    assert!(matches!(CtError::from(FetchError::NotFound { url: url.clone() }), CtError::Check(_)));
    assert!(matches!(CtError::from(FetchError::Status { url: url.clone(), status: 403 }), CtError::Check(_)));
    assert!(matches!(CtError::from(FetchError::Status { url: url.clone(), status: 503 }), CtError::Unavailable(_)));
    assert!(matches!(CtError::from(FetchError::Network { url, detail: String::new() }), CtError::Unavailable(_)));
}

/// Serves `log` under `/demo/` on a loopback port; returns the log's URL.
async fn serve(log: Arc<Mutex<MemLog>>) -> String {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let log = log.clone();
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let log = log.clone();
                async move {
                    let path = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("");
                    let found = path.strip_prefix("/demo/").and_then(|p| log.lock().unwrap().answer(p));
                    let (status, body) = match found {
                        Some(b) => (200, b),
                        None => (404, Bytes::from_static(b"not found\n")),
                    };
                    let response =
                        hyper::Response::builder().status(status).body(http_body_util::Full::new(body)).unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), service));
        }
    });
    format!("http://{addr}/demo/")
}

/// The whole of `ct verify`, `ct consistency` and `ct inclusion` over HTTP:
/// the key and origin from log.v3.json (the origin names log.test, not the
/// loopback address the log is read from).
#[test]
fn over_http() {
    block_on(async {
        let log = Arc::new(Mutex::new(MemLog::with_size(1000, 300)));
        let root = log.lock().unwrap().tree.root();
        let url = serve(log.clone()).await;
        let args = LogArgs { log: url.clone(), public_key: None, origin: None };
        let http = Http::new();
        let (src, cp) = open(&http, &args).await.unwrap();
        assert_eq!((cp.checkpoint.origin.as_str(), cp.checkpoint.size), (ORIGIN, 1000));
        let r = check::verify_tree(&src, 1000, &cp.checkpoint.root_hash, 8, &mut |_, _| {}).await.unwrap();
        assert_eq!((r.entries, r.root, r.issuers), (1000, root, 2));
        let c = check::consistency(&src, &cp.checkpoint, 17, 1000, 8).await.unwrap();
        assert_eq!(c.to.1, root);
        let i = check::inclusion(&src, &cp.checkpoint, 17, 900, 8).await.unwrap();
        assert_eq!(i.leaf_hash, leaf_hash(17));

        // The key given: the origin is the URL's, which is not the log's.
        let spki = B64.encode(&log.lock().unwrap().spki);
        let args = LogArgs { log: url.clone(), public_key: Some(spki.clone()), origin: None };
        let err = open(&http, &args).await.unwrap_err();
        assert_eq!(err, CtError::Check(format!("{url}checkpoint: checkpoint: origin does not match")));
        let args = LogArgs { log: url.clone(), public_key: Some(spki), origin: Some(ORIGIN.into()) };
        assert!(open(&http, &args).await.is_ok());

        // A tile the log no longer serves, then one it corrupted.
        log.lock().unwrap().objects.remove("tile/0/002");
        let err = check::verify_tree(&src, 1000, &cp.checkpoint.root_hash, 8, &mut |_, _| {}).await.unwrap_err();
        assert_eq!(err, CtError::Check(format!("GET {url}tile/0/002: 404 Not Found")));
        let data = log.lock().unwrap().objects["tile/data/002"].clone();
        log.lock().unwrap().objects.insert("tile/0/002".into(), data);
        let err = check::verify_tree(&src, 1000, &cp.checkpoint.root_hash, 8, &mut |_, _| {}).await.unwrap_err();
        assert!(matches!(&err, CtError::Check(m) if m.contains("tile/0/002: ")), "{err}");

        // Nobody listening: unavailable.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let dead = HttpLog::new(http.clone(), format!("http://{addr}/demo/"));
        let key = log.lock().unwrap().log_key();
        let err = check::checkpoint(&dead, &key, ORIGIN).await.unwrap_err();
        assert!(
            matches!(&err, CtError::Unavailable(m) if m.starts_with(&format!("GET http://{addr}/demo/checkpoint: "))),
            "{err}"
        );
    });
}

/// `ct list` reads logs.json and each log's checkpoint.
#[test]
fn list_reads_logs_json() {
    block_on(async {
        let log = Arc::new(Mutex::new(MemLog::with_size(10, 10)));
        let url = serve(log.clone()).await;
        let mut entry: serde_json::Value = serde_json::from_slice(&log.lock().unwrap().objects["log.v3.json"]).unwrap();
        // The checkpoint is read from the monitoring URL; its origin is the URL's.
        entry["monitoring_url"] = json!(url);
        let mut broken = entry.clone();
        broken["key"] = json!(B64.encode(new_key().public_key_to_der().unwrap()));
        broken["log_id"] = json!("");
        let list = json!({ "logs": [entry] }).to_string();
        log.lock().unwrap().objects.insert("logs.json".into(), Bytes::from(list));
        let out = Printer { json: true };
        list_logs(&Http::new(), Some(&url), &out).await.unwrap();
        let list = json!({ "logs": [entry, broken] }).to_string();
        log.lock().unwrap().objects.insert("logs.json".into(), Bytes::from(list));
        let err = list_logs(&Http::new(), Some(&url), &out).await.unwrap_err();
        assert_eq!(err, CtError::Check(format!("log demo: {url}checkpoint: checkpoint: no signature by this log")));
    });
}
