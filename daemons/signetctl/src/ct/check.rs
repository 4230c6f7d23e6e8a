//! The checks of `signetctl ct`, over any [`LogSource`]: the checkpoint and
//! its signature, the whole tree from its tiles (`verify`), consistency and
//! inclusion proofs. All the CT math is signet-ct's.

use std::collections::{BTreeMap, HashMap};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use signet_ct::merkle::tile::{entries_at_level, MAX_TILE_LEVEL};
use signet_ct::merkle::{
    empty_root, root_from_leaf_hashes, tree_hash, verify_consistency, verify_inclusion, Hash, MerkleError, Tile,
    TileHashReader, TileReader, TILE_WIDTH,
};
use signet_ct::rfc6962::api::{hashes_from_base64, GetProofByHashResponse, GetSthConsistencyResponse};
use signet_ct::staticct::issuer_path;
use signet_ct::staticct::note::Checkpoint;
use signet_ct::{LogKey, TreeHead};

use super::source::{fetch_data_tile, fetch_hash_tile, LogSource};
use super::CtError;

/// A checkpoint whose signature verified.
#[derive(Debug, Clone)]
pub(crate) struct VerifiedCheckpoint {
    /// The checkpoint as served.
    pub note: String,
    /// Origin, size and root.
    pub checkpoint: Checkpoint,
    /// The tree head it signs (with the signature's timestamp).
    pub head: TreeHead,
}

/// Fetches `checkpoint` and verifies it is signed by `key` under `origin`.
pub(crate) async fn checkpoint(
    src: &impl LogSource,
    key: &LogKey,
    origin: &str,
) -> Result<VerifiedCheckpoint, CtError> {
    let body = src.fetch("checkpoint").await?;
    let note = String::from_utf8(body.to_vec())
        .map_err(|_| CtError::Check(format!("{}: not UTF-8", src.url("checkpoint"))))?;
    let (checkpoint, head) =
        key.verify_checkpoint(&note, origin).map_err(|e| CtError::Check(format!("{}: {e}", src.url("checkpoint"))))?;
    Ok(VerifiedCheckpoint { note, checkpoint, head })
}

/// What [`verify_tree`] checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeReport {
    /// Entries checked (the tree size).
    pub entries: u64,
    /// The root the tiles give (equal to the checkpoint's).
    pub root: Hash,
    /// Data tiles read.
    pub data_tiles: u64,
    /// Hash tiles read, every level.
    pub hash_tiles: u64,
    /// Distinct issuers the entries reference, each fetched and hashed.
    pub issuers: u64,
}

/// Checks the whole tree of `size` leaves with root `root`, as TesseraCT's
/// fsck does: every hash tile and data tile the tree has (full tiles, and the
/// partial ones at the right edge of each level), with
///
/// - each data tile entry's `leaf_index` equal to its position, and its leaf
///   hash the level-0 tile's hash at that position;
/// - each full tile's hash (the MTH of its 256 hashes) the next level's hash
///   at its index;
/// - the root of the tree from the tiles the checkpoint's;
/// - each issuer fingerprint the entries reference served at `issuer/<hex>`
///   with that SHA-256.
///
/// Up to `concurrency` requests are in flight at once (a level-0 tile and
/// then its data tile, or a higher tile, each). `progress(done, size)` is
/// called as entries are checked.
pub(crate) async fn verify_tree(
    src: &impl LogSource,
    size: u64,
    root: &Hash,
    concurrency: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<TreeReport, CtError> {
    let mut walk = Walk::new(size);
    let mut tiles = futures::stream::iter(tiles_in_order(size))
        .map(|tile| async move {
            // One request at a time per tile: `concurrency` is the number of
            // requests in flight.
            let hashes = fetch_hash_tile(src, tile).await?;
            let leaves = if tile.level() == 0 { fetch_data_tile(src, tile).await? } else { Vec::new() };
            Ok::<_, CtError>(Fetched { tile, hashes, leaves })
        })
        .buffered(concurrency.max(1));
    while let Some(fetched) = tiles.try_next().await? {
        walk.take(fetched)?;
        progress(walk.report.entries, size);
    }
    let got = walk.root()?;
    if got != *root {
        return Err(CtError::Check(format!(
            "root: the tiles give {}, the checkpoint says {}",
            hex::encode(got),
            hex::encode(root)
        )));
    }
    walk.report.root = got;
    check_issuers(src, &walk.issuers, concurrency).await?;
    walk.report.issuers = walk.issuers.len() as u64;
    Ok(walk.report)
}

/// Every tile of a tree of `size` leaves, in the order [`Walk::take`] checks
/// them: level-0 tiles left to right, each full tile of a higher level right
/// after the last of its 256 children, then the partial tiles of the higher
/// levels (the partial level-0 tile is the last level-0 tile).
pub(crate) fn tiles_in_order(size: u64) -> impl Iterator<Item = Tile> {
    let width = u64::from(TILE_WIDTH);
    let full0 = size / width;
    let count0 = size.div_ceil(width);
    let upper_partials = (1..=MAX_TILE_LEVEL).filter_map(move |level| {
        let entries = entries_at_level(level, size);
        (entries % width != 0).then(|| Tile::in_tree(level, entries / width, size)).flatten()
    });
    (0..count0)
        .flat_map(move |i| {
            let mut out = vec![Tile::in_tree(0, i, size)];
            if i < full0 {
                // `done` full tiles at `level - 1`: when that completes a tile
                // at `level`, it comes next (and may complete one above).
                let (mut done, mut level) = (i + 1, 1u8);
                while done % width == 0 {
                    out.push(Tile::in_tree(level, done / width - 1, size));
                    done /= width;
                    level += 1;
                }
            }
            out.into_iter().flatten()
        })
        .chain(upper_partials)
}

/// A tile as fetched: its hashes and, at level 0, its data tile's entries.
struct Fetched {
    tile: Tile,
    hashes: Vec<Hash>,
    leaves: Vec<signet_ct::staticct::TileLeaf>,
}

/// The state of a [`verify_tree`] walk.
struct Walk {
    size: u64,
    /// `pending[l]`: the hashes of full tiles at level `l - 1` not yet checked
    /// against the level-`l` tile that holds them.
    pending: Vec<Vec<Hash>>,
    /// The rightmost tile of each level: all the root needs.
    edge: HashMap<(u8, u64), Vec<Hash>>,
    /// Each issuer fingerprint referenced, and the first leaf referencing it.
    issuers: BTreeMap<Hash, u64>,
    report: TreeReport,
}

impl Walk {
    fn new(size: u64) -> Self {
        Self {
            size,
            pending: vec![Vec::new(); usize::from(MAX_TILE_LEVEL) + 2],
            edge: HashMap::new(),
            issuers: BTreeMap::new(),
            report: TreeReport { entries: 0, root: empty_root(), data_tiles: 0, hash_tiles: 0, issuers: 0 },
        }
    }

    /// Checks one tile, in [`tiles_in_order`] order.
    fn take(&mut self, f: Fetched) -> Result<(), CtError> {
        let (tile, level) = (f.tile, usize::from(f.tile.level()));
        self.report.hash_tiles += 1;
        if level == 0 {
            self.take_leaves(&f)?;
        } else {
            let want = std::mem::take(&mut self.pending[level]);
            if want.len() != f.hashes.len() {
                return Err(CtError::Check(format!(
                    "internal: {} checked with {} child tiles, expected {}",
                    tile.path(),
                    want.len(),
                    f.hashes.len()
                )));
            }
            for (j, (got, want)) in f.hashes.iter().zip(&want).enumerate() {
                if got != want {
                    let child =
                        Tile::in_tree(tile.level() - 1, tile.index() * u64::from(TILE_WIDTH) + j as u64, self.size);
                    return Err(CtError::Check(format!(
                        "{}: hash {j} is {}, but {} hashes to {}",
                        tile.path(),
                        hex::encode(got),
                        child.map(|c| c.path()).unwrap_or_default(),
                        hex::encode(want)
                    )));
                }
            }
        }
        if !tile.is_partial() {
            self.pending[level + 1].push(root_from_leaf_hashes(&f.hashes));
        }
        let last = entries_at_level(tile.level(), self.size).saturating_sub(1) / u64::from(TILE_WIDTH);
        if tile.index() == last {
            self.edge.insert((tile.level(), tile.index()), f.hashes);
        }
        Ok(())
    }

    /// Checks a level-0 tile against its data tile.
    fn take_leaves(&mut self, f: &Fetched) -> Result<(), CtError> {
        let tile = f.tile;
        let start = tile.index() * u64::from(TILE_WIDTH);
        self.report.data_tiles += 1;
        for (j, (leaf, hash)) in f.leaves.iter().zip(&f.hashes).enumerate() {
            let index = start + j as u64;
            let data = tile.data_path();
            match leaf.leaf_index() {
                Ok(i) if i == index => {}
                Ok(i) => return Err(CtError::Check(format!("{data}: entry {j} has leaf_index {i}, expected {index}"))),
                Err(e) => return Err(CtError::Check(format!("{data}: entry {j} (leaf {index}): {e}"))),
            }
            let got = leaf.leaf_hash().map_err(|e| CtError::Check(format!("{data}: entry {j} (leaf {index}): {e}")))?;
            if got != *hash {
                return Err(CtError::Check(format!(
                    "{}: hash {j} is {}, but leaf {index} in {data} hashes to {}",
                    tile.path(),
                    hex::encode(hash),
                    hex::encode(got)
                )));
            }
            for fp in &leaf.chain_fingerprints {
                self.issuers.entry(*fp).or_insert(index);
            }
        }
        self.report.entries += u64::from(tile.width());
        Ok(())
    }

    /// The root from the rightmost tiles, once every tile has been taken.
    fn root(&self) -> Result<Hash, CtError> {
        if let Some(level) = self.pending.iter().position(|p| !p.is_empty()) {
            return Err(CtError::Check(format!(
                "internal: {} tile hashes at level {level} unchecked",
                self.pending[level].len()
            )));
        }
        let mut read = |t: Tile| {
            self.edge
                .get(&(t.level(), t.index()))
                .cloned()
                .ok_or_else(|| MerkleError::Read(format!("{} was not read", t.path()).into()))
        };
        let mut reader = TileHashReader::new(&mut read as &mut dyn FnMut(Tile) -> _, self.size);
        tree_hash(&mut reader, self.size).map_err(|e| CtError::Check(format!("internal: {e}")))
    }
}

/// Fetches each issuer and checks its SHA-256 is its fingerprint.
async fn check_issuers(src: &impl LogSource, issuers: &BTreeMap<Hash, u64>, concurrency: usize) -> Result<(), CtError> {
    futures::stream::iter(issuers)
        .map(|(fp, leaf)| async move {
            let path = issuer_path(fp);
            let body = src
                .fetch(&path)
                .await
                .map_err(|e| CtError::from(e).context(|m| format!("{path} (an issuer of leaf {leaf}): {m}")))?;
            let got: Hash = Sha256::digest(&body).into();
            if got != *fp {
                return Err(CtError::Check(format!(
                    "{path} (an issuer of leaf {leaf}): the certificate served has SHA-256 {}",
                    hex::encode(got)
                )));
            }
            Ok(())
        })
        .buffered(concurrency.max(1))
        .try_collect()
        .await
}

/// Hash reads of a tree whose tiles are fetched at `current` (the
/// checkpoint's size): every tile a smaller tree needs exists there, at its
/// width at `current` or wider.
///
/// `f` runs twice: first over placeholder hashes, to learn which tiles it
/// reads (the tiles a tree head or proof reads depend on sizes and indices
/// only), then, with those tiles fetched, over the real ones.
pub(crate) async fn with_tiles<T>(
    src: &impl LogSource,
    current: u64,
    concurrency: usize,
    mut f: impl FnMut(&mut TileHashReader<MapTiles<'_>>) -> Result<T, MerkleError>,
) -> Result<T, CtError> {
    let internal = |e: MerkleError| CtError::Check(format!("reading the tree from its tiles: {e}"));
    let (none, mut wanted) = (HashMap::new(), Vec::new());
    {
        let mut reader = TileHashReader::new(MapTiles { tiles: &none, wanted: Some(&mut wanted) }, current);
        f(&mut reader).map_err(internal)?;
    }
    wanted.sort_by_key(|t: &Tile| (t.level(), t.index()));
    wanted.dedup();
    let fetched: Vec<Vec<Hash>> = futures::stream::iter(&wanted)
        .map(|t| fetch_hash_tile(src, *t))
        .buffered(concurrency.max(1))
        .try_collect()
        .await?;
    let tiles: HashMap<(u8, u64), Vec<Hash>> = wanted.iter().map(|t| (t.level(), t.index())).zip(fetched).collect();
    let mut reader = TileHashReader::new(MapTiles { tiles: &tiles, wanted: None }, current);
    f(&mut reader).map_err(internal)
}

/// Tiles from a map; with `wanted`, a tile not there is recorded and read as
/// a full tile of placeholder hashes.
pub(crate) struct MapTiles<'a> {
    tiles: &'a HashMap<(u8, u64), Vec<Hash>>,
    wanted: Option<&'a mut Vec<Tile>>,
}

impl TileReader for MapTiles<'_> {
    fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError> {
        if let Some(h) = self.tiles.get(&(tile.level(), tile.index())) {
            return Ok(h.clone());
        }
        match &mut self.wanted {
            Some(w) => {
                w.push(tile);
                Ok(vec![[0; 32]; usize::from(TILE_WIDTH)])
            }
            None => Err(MerkleError::Read(format!("{} was not fetched", tile.path()).into())),
        }
    }
}

/// What [`consistency`] verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsistencyReport {
    /// The old size and its root (from the tiles).
    pub from: (u64, Hash),
    /// The new size and its root (from the tiles; the checkpoint's at its size).
    pub to: (u64, Hash),
    /// The proof the log gave.
    pub proof: Vec<Hash>,
}

/// Computes the roots of sizes `from` and `to` from the tiles of the tree of
/// the checkpoint `cp` and verifies the log's `get-sth-consistency` proof
/// between them (not asked for when `from` is 0: the proof is empty).
pub(crate) async fn consistency(
    src: &impl LogSource,
    cp: &Checkpoint,
    from: u64,
    to: u64,
    concurrency: usize,
) -> Result<ConsistencyReport, CtError> {
    if from > to || to > cp.size {
        return Err(CtError::Usage(format!("need --from <= --to <= the tree size {}", cp.size)));
    }
    let (old_root, new_root) =
        with_tiles(src, cp.size, concurrency, |r| Ok((tree_hash(r, from)?, tree_hash(r, to)?))).await?;
    check_root_against_checkpoint(cp, to, &new_root)?;
    let proof = if from == 0 {
        Vec::new()
    } else {
        let path = format!("ct/v1/get-sth-consistency?first={from}&second={to}");
        let body = src.fetch(&path).await?;
        let bad = |detail: String| CtError::Check(format!("{}: {detail}", src.url(&path)));
        let r: GetSthConsistencyResponse = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
        hashes_from_base64(&r.consistency).map_err(|e| bad(e.to_string()))?
    };
    verify_consistency(from, to, &old_root, &new_root, &proof).map_err(|e| {
        CtError::Check(format!(
            "the consistency proof from {from} (root {}) to {to} (root {}) does not verify: {e}",
            hex::encode(old_root),
            hex::encode(new_root)
        ))
    })?;
    Ok(ConsistencyReport { from: (from, old_root), to: (to, new_root), proof })
}

/// What [`inclusion`] verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InclusionReport {
    /// The leaf index.
    pub index: u64,
    /// Its leaf hash (from the data tile).
    pub leaf_hash: Hash,
    /// The tree size and root it was proven in.
    pub tree: (u64, Hash),
    /// The proof the log gave.
    pub proof: Vec<Hash>,
}

/// Reads entry `index` from its data tile (checking its `leaf_index`), asks
/// the log for its inclusion proof in the tree of `size` leaves
/// (`get-proof-by-hash`) and verifies it against that tree's root (the
/// checkpoint's at its size, otherwise computed from the tiles).
pub(crate) async fn inclusion(
    src: &impl LogSource,
    cp: &Checkpoint,
    index: u64,
    size: u64,
    concurrency: usize,
) -> Result<InclusionReport, CtError> {
    if index >= size || size > cp.size {
        return Err(CtError::Usage(format!("need --index < --size <= the tree size {}", cp.size)));
    }
    let width = u64::from(TILE_WIDTH);
    let tile = Tile::in_tree(0, index / width, cp.size)
        .ok_or_else(|| CtError::Check(format!("internal: no level-0 tile for leaf {index}")))?;
    let leaves = fetch_data_tile(src, tile).await?;
    let j = (index % width) as usize;
    let leaf = leaves.get(j).ok_or_else(|| CtError::Check(format!("{}: no entry {j}", tile.data_path())))?;
    match leaf.leaf_index() {
        Ok(i) if i == index => {}
        Ok(i) => {
            return Err(CtError::Check(format!("{}: entry {j} has leaf_index {i}, expected {index}", tile.data_path())))
        }
        Err(e) => return Err(CtError::Check(format!("{}: entry {j}: {e}", tile.data_path()))),
    }
    let leaf_hash = leaf.leaf_hash().map_err(|e| CtError::Check(format!("{}: entry {j}: {e}", tile.data_path())))?;
    let root = if size == cp.size {
        cp.root_hash
    } else {
        with_tiles(src, cp.size, concurrency, |r| tree_hash(r, size)).await?
    };
    let path = format!("ct/v1/get-proof-by-hash?hash={}&tree_size={size}", query_escape(&B64.encode(leaf_hash)));
    let body = src.fetch(&path).await?;
    let bad = |detail: String| CtError::Check(format!("{}: {detail}", src.url(&path)));
    let r: GetProofByHashResponse = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
    if r.leaf_index != index {
        return Err(bad(format!("leaf_index {}, but the entry is at {index}", r.leaf_index)));
    }
    let proof = hashes_from_base64(&r.audit_path).map_err(|e| bad(e.to_string()))?;
    verify_inclusion(index, size, &leaf_hash, &proof, &root).map_err(|e| {
        CtError::Check(format!(
            "the inclusion proof of leaf {index} in the tree of size {size} (root {}) does not verify: {e}",
            hex::encode(root)
        ))
    })?;
    Ok(InclusionReport { index, leaf_hash, tree: (size, root), proof })
}

/// At the checkpoint's size, the root from the tiles must be the checkpoint's.
fn check_root_against_checkpoint(cp: &Checkpoint, size: u64, root: &Hash) -> Result<(), CtError> {
    if size == cp.size && *root != cp.root_hash {
        return Err(CtError::Check(format!(
            "root of size {size}: the tiles give {}, the checkpoint says {}",
            hex::encode(root),
            hex::encode(cp.root_hash)
        )));
    }
    Ok(())
}

/// Base64 in a query string: `+`, `/` and `=` percent-encoded.
fn query_escape(s: &str) -> String {
    s.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D")
}
