//! CT log health over the static-ct-api: the checkpoint's signature by the log's key, its age,
//! the tree never shrinking or forking, and consistency between the last checkpoint seen and
//! the new one, verified from the log's tiles (the old root recomputed from the new tree's
//! tiles, and the new root too). Given a `certificate` with an SCT from the log embedded (and
//! its `issuer`), the SCT's signature is verified and its entry's inclusion in the checkpoint's
//! tree proven from the tiles (the leaf at the SCT's `leaf_index` hashes up to the root). All
//! Merkle and signature work is signet-ct's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use signet_ct::merkle::proof::{inclusion_proof, verify_inclusion};
use signet_ct::merkle::tile::hashes_from_tile_bytes;
use signet_ct::merkle::tiles::TileHashReader;
use signet_ct::merkle::{tree_hash, Hash, MerkleError, Tile};
use signet_ct::rfc6962::precert::{embedded_sct_entry, extension_value};
use signet_ct::rfc6962::{scts_from_extension_value, SCT_LIST_OID};
use signet_ct::staticct::parse_leaf_index;
use signet_ct::LogKey;

use super::http::{client, fetch, HttpClient};
use super::{Gauge, Probed, Report};
use crate::config::{CheckConfig, HttpVersion};

/// Most rounds of tile fetching one consistency check makes (each round fetches every tile
/// the computation found missing).
const MAX_ROUNDS: usize = 16;

/// How long an SCT may wait to be in the tree: RFC 6962's usual maximum merge delay.
const MAX_MERGE_DELAY_MS: u64 = 24 * 3_600_000;

/// The tiles fetched so far, as [`with_tiles`](CtProbe::with_tiles) reads them.
type FetchedTiles<'a> = Box<dyn FnMut(Tile) -> Result<Vec<Hash>, MerkleError> + 'a>;

/// The entry an embedded SCT promises: its leaf index, leaf hash and timestamp (ms).
#[derive(Clone, Copy, Debug)]
struct SctLeaf {
    index: u64,
    hash: Hash,
    timestamp: u64,
}

/// A prepared CT check.
pub struct CtProbe {
    client: HttpClient,
    prefix: String,
    origin: String,
    key: LogKey,
    max_age: Option<Duration>,
    /// The SCT whose inclusion is checked (`certificate`): its leaf, or why it is no good.
    sct: Option<Result<SctLeaf, String>>,
    /// The last verified (size, root).
    last: Mutex<Option<(u64, Hash)>>,
}

impl CtProbe {
    /// Prepares the check: the log's key and origin.
    pub fn new(c: &CheckConfig) -> Result<CtProbe, String> {
        let url = c.url.as_ref().ok_or("no url")?.0.to_string();
        let prefix = if url.ends_with('/') { url } else { format!("{url}/") };
        let origin = match &c.origin {
            Some(o) => o.clone(),
            None => prefix.split_once("://").map_or(prefix.as_str(), |(_, r)| r).trim_end_matches('/').to_owned(),
        };
        let der = STANDARD
            .decode(c.public_key.as_deref().ok_or("no public_key")?.trim())
            .map_err(|e| format!("public_key: {e}"))?;
        let key = LogKey::from_spki_der(&der).map_err(|e| format!("public_key: {e}"))?;
        let sct = match (&c.certificate, &c.issuer) {
            (Some(cert), Some(issuer)) => Some(sct_leaf(&key, &read_der(cert)?, &read_der(issuer)?)),
            (Some(_), None) => return Err("certificate needs issuer".into()),
            _ => None,
        };
        Ok(CtProbe {
            client: client(c.ca_file.as_deref(), HttpVersion::Auto, c.reuse_connections)?,
            prefix,
            origin,
            key,
            max_age: c.max_age,
            sct,
            last: Mutex::new(None),
        })
    }

    /// The last verified tree: size (8 bytes, big-endian) and root.
    pub fn memo(&self) -> Option<Vec<u8>> {
        let last = *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        last.map(|(size, root)| [size.to_be_bytes().as_slice(), root.as_slice()].concat())
    }

    /// Restores the last verified tree.
    pub fn restore(&self, memo: &[u8]) {
        if memo.len() != 40 {
            return;
        }
        let (size, root) = memo.split_at(8);
        if let (Ok(size), Ok(root)) = (<[u8; 8]>::try_from(size), Hash::try_from(root)) {
            *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((u64::from_be_bytes(size), root));
        }
    }

    /// One look at the log.
    pub async fn run(&self) -> Probed {
        let url = format!("{}checkpoint", self.prefix);
        let (status, body) = fetch(&self.client, &url, None).await.map_err(Report::msg)?;
        if status != 200 {
            return Err(Report::msg(format!("{url}: HTTP status {status}")));
        }
        let note = String::from_utf8(body.to_vec()).map_err(|_| Report::msg("checkpoint: not UTF-8"))?;
        let (cp, head) =
            self.key.verify_checkpoint(&note, &self.origin).map_err(|e| Report::msg(format!("checkpoint: {e}")))?;
        let now_ms = super::now_unix().max(0) as u64 * 1000;
        let age = now_ms.saturating_sub(head.timestamp) / 1000;
        let mut report =
            Report::msg("").gauge(Gauge::CtTreeSize, cp.size as f64).gauge(Gauge::CtCheckpointAge, age as f64);
        if let Some(max) = self.max_age {
            if age > max.as_secs() {
                report.message = format!("checkpoint is {age}s old (at most {}s)", max.as_secs());
                return Err(report);
            }
        }
        let last = *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let grew = match last {
            Some((size, _)) if cp.size < size => {
                report.message = format!("tree shrank from {size} to {}", cp.size);
                return Err(report);
            }
            Some((size, root)) if cp.size == size && root != cp.root_hash => {
                report.message = format!("two roots for tree size {size}: the log forked");
                return Err(report);
            }
            Some((size, root)) if cp.size > size => {
                if let Err(e) = self.consistent(size, &root, cp.size, &cp.root_hash).await {
                    report.message = e;
                    return Err(report);
                }
                cp.size - size
            }
            _ => 0,
        };
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((cp.size, cp.root_hash));
        report.message = match last {
            Some((size, _)) if grew > 0 => format!(
                "checkpoint verified, size {} (+{grew}, consistent with {size} from the tiles), {age}s old",
                cp.size
            ),
            _ => format!("checkpoint verified, size {}, {age}s old", cp.size),
        };
        match &self.sct {
            None => {}
            Some(Err(e)) => {
                report.message = format!("{}; SCT: {e}", report.message);
                return Err(report);
            }
            Some(Ok(leaf)) if leaf.index >= cp.size => {
                let waited = now_ms.saturating_sub(leaf.timestamp);
                if waited > MAX_MERGE_DELAY_MS {
                    report.message = format!(
                        "{}; the SCT's entry (leaf {}) is not in the tree {}s after its timestamp",
                        report.message,
                        leaf.index,
                        waited / 1000
                    );
                    return Err(report);
                }
                report.message = format!("{}; the SCT's entry (leaf {}) is not merged yet", report.message, leaf.index);
            }
            Some(Ok(leaf)) => {
                if let Err(e) = self.included(leaf, cp.size, &cp.root_hash).await {
                    report.message = format!("{}; SCT: {e}", report.message);
                    return Err(report);
                }
                report.message = format!("{}; the SCT's entry is included (leaf {})", report.message, leaf.index);
            }
        }
        Ok(report)
    }

    /// Proves from the tiles of the tree of `size` that `leaf` is its leaf at `leaf.index`
    /// under `root`.
    async fn included(&self, leaf: &SctLeaf, size: u64, root: &Hash) -> Result<(), String> {
        let proof = self
            .with_tiles(size, |r| inclusion_proof(r, leaf.index, size))
            .await
            .map_err(|e| format!("inclusion proof of leaf {}: {e}", leaf.index))?;
        verify_inclusion(leaf.index, size, &leaf.hash, &proof, root)
            .map_err(|e| format!("leaf {} is not the SCT's entry under the checkpoint's root: {e}", leaf.index))
    }

    /// Checks from the tiles of the tree of `new_size` that its first `old_size` leaves hash
    /// to `old_root` and all of them to `new_root`.
    async fn consistent(&self, old_size: u64, old_root: &Hash, new_size: u64, new_root: &Hash) -> Result<(), String> {
        let (old, new) = self
            .with_tiles(new_size, |r| {
                tree_hash(r, old_size).and_then(|old| tree_hash(r, new_size).map(|new| (old, new)))
            })
            .await
            .map_err(|e| format!("tiles: {e}"))?;
        if old != *old_root {
            return Err(format!(
                "the tiles of size {new_size} do not contain the tree of size {old_size}: not consistent"
            ));
        }
        if new != *new_root {
            return Err(format!("the tiles give a root of size {new_size} other than the checkpoint's"));
        }
        Ok(())
    }

    /// Runs `f` on the hashes of the tree of `size`, fetching the tiles it asks for: each
    /// round fetches every tile the last one found missing, at most [`MAX_ROUNDS`] rounds.
    async fn with_tiles<T>(
        &self,
        size: u64,
        mut f: impl FnMut(&mut TileHashReader<FetchedTiles<'_>>) -> Result<T, MerkleError>,
    ) -> Result<T, String> {
        let mut tiles: HashMap<String, Vec<Hash>> = HashMap::new();
        for _ in 0..MAX_ROUNDS {
            let mut missing: Vec<Tile> = Vec::new();
            let result = {
                let reader: FetchedTiles<'_> = Box::new(|tile: Tile| match tiles.get(&tile.path()) {
                    Some(h) => Ok(h.clone()),
                    None => {
                        missing.push(tile);
                        Err(MerkleError::BadTile { tile: tile.path(), detail: "not fetched yet" })
                    }
                });
                let mut r = TileHashReader::new(reader, size);
                f(&mut r)
            };
            match result {
                Ok(v) => return Ok(v),
                Err(_) if !missing.is_empty() => {
                    for tile in missing {
                        let hashes = self.tile(tile).await?;
                        tiles.insert(tile.path(), hashes);
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("too many rounds of tiles".into())
    }

    /// A hash tile; a partial tile the log no longer serves is read from its full tile.
    async fn tile(&self, tile: Tile) -> Result<Vec<Hash>, String> {
        let url = format!("{}{}", self.prefix, tile.path());
        let (status, body) = fetch(&self.client, &url, None).await?;
        let (status, body, url) = if status == 404 && tile.is_partial() {
            let url = format!("{}{}", self.prefix, tile.full().path());
            let (s, b) = fetch(&self.client, &url, None).await?;
            (s, b, url)
        } else {
            (status, body, url)
        };
        if status != 200 {
            return Err(format!("{url}: HTTP status {status}"));
        }
        hashes_from_tile_bytes(&body).ok_or_else(|| format!("{url}: not a hash tile"))
    }
}

/// The DER of the first certificate in the PEM file at `path`.
fn read_der(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    openssl::x509::X509::from_pem(&pem).and_then(|c| c.to_der()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The leaf that the SCT from the log of `key` embedded in `cert` (issued by `issuer`) stands
/// for, its signature verified; or what is wrong with it.
fn sct_leaf(key: &LogKey, cert: &[u8], issuer: &[u8]) -> Result<SctLeaf, String> {
    let list = extension_value(cert, &SCT_LIST_OID)
        .map_err(|e| format!("the certificate: {e}"))?
        .ok_or("the certificate has no embedded SCTs")?;
    let scts = scts_from_extension_value(&list).map_err(|e| format!("the SCT list: {e}"))?;
    let sct = scts.into_iter().find(|s| s.log_id == key.log_id()).ok_or("the certificate has no SCT from this log")?;
    let entry = embedded_sct_entry(cert, issuer).map_err(|e| format!("the precertificate entry: {e}"))?;
    key.verify_sct(&sct, &entry).map_err(|e| format!("the SCT's signature: {e}"))?;
    let index = parse_leaf_index(&sct.extensions).map_err(|e| format!("the SCT's leaf_index: {e}"))?;
    let hash = sct.timestamped_entry(entry).leaf_hash().map_err(|e| format!("the SCT's entry: {e}"))?;
    Ok(SctLeaf { index, hash, timestamp: sct.timestamp })
}
