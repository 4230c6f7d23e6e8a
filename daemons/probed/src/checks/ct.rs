//! CT log health over the static-ct-api: the checkpoint's signature by the log's key, its age,
//! the tree never shrinking or forking, and consistency between the last checkpoint seen and
//! the new one, verified from the log's tiles (the old root recomputed from the new tree's
//! tiles, and the new root too). All Merkle and signature work is signet-ct's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use signet_ct::merkle::tile::hashes_from_tile_bytes;
use signet_ct::merkle::tiles::TileHashReader;
use signet_ct::merkle::{tree_hash, Hash, MerkleError, Tile};
use signet_ct::LogKey;

use super::http::{client, fetch, HttpClient};
use super::{Gauge, Probed, Report};
use crate::config::{CheckConfig, HttpVersion};

/// Most rounds of tile fetching one consistency check makes (each round fetches every tile
/// the computation found missing).
const MAX_ROUNDS: usize = 16;

/// A prepared CT check.
pub struct CtProbe {
    client: HttpClient,
    prefix: String,
    origin: String,
    key: LogKey,
    max_age: Option<Duration>,
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
        Ok(CtProbe {
            client: client(c.ca_file.as_deref(), HttpVersion::Auto, c.reuse_connections)?,
            prefix,
            origin,
            key,
            max_age: c.max_age,
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
        Ok(report)
    }

    /// Checks from the tiles of the tree of `new_size` that its first `old_size` leaves hash
    /// to `old_root` and all of them to `new_root`.
    async fn consistent(&self, old_size: u64, old_root: &Hash, new_size: u64, new_root: &Hash) -> Result<(), String> {
        let mut tiles: HashMap<String, Vec<Hash>> = HashMap::new();
        for _ in 0..MAX_ROUNDS {
            let mut missing: Vec<Tile> = Vec::new();
            let result = {
                let reader = |tile: Tile| -> Result<Vec<Hash>, MerkleError> {
                    match tiles.get(&tile.path()) {
                        Some(h) => Ok(h.clone()),
                        None => {
                            missing.push(tile);
                            Err(MerkleError::BadTile { tile: tile.path(), detail: "not fetched yet" })
                        }
                    }
                };
                let mut r = TileHashReader::new(reader, new_size);
                tree_hash(&mut r, old_size).and_then(|old| tree_hash(&mut r, new_size).map(|new| (old, new)))
            };
            match result {
                Ok((old, new)) => {
                    if old != *old_root {
                        return Err(format!(
                            "the tiles of size {new_size} do not contain the tree of size {old_size}: not consistent"
                        ));
                    }
                    if new != *new_root {
                        return Err(format!("the tiles give a root of size {new_size} other than the checkpoint's"));
                    }
                    return Ok(());
                }
                Err(_) if !missing.is_empty() => {
                    for tile in missing {
                        let hashes = self.tile(tile).await?;
                        tiles.insert(tile.path(), hashes);
                    }
                }
                Err(e) => return Err(format!("tiles: {e}")),
            }
        }
        Err("tiles: too many rounds".into())
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
