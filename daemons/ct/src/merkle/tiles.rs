//! Merkle tree hashes read from, and written to, tlog-tiles.
//!
//! [`TileHashReader`] turns a [`TileReader`] (whatever fetches a tile's hashes:
//! a file, a cache, an HTTP client in a test) into a [`HashReader`] for a given
//! tree size, so tree heads and proofs come from tiles with the functions of
//! [`super::proof`]. [`append_leaves`] computes every tile a batch of new leaves
//! changes and the new tree head.

use std::collections::HashMap;

use super::tile::{entries_at_level, Tile, TILE_HEIGHT, TILE_WIDTH};
use super::{root_from_leaf_hashes, tree_hash, Hash, HashReader, MerkleError};

/// Reads the hashes of a tile.
pub trait TileReader {
    /// The hashes of `tile`: at least `tile.width()` of them. A reader may
    /// return more (the full tile when a partial one was asked for, as
    /// tlog-tiles allows); the extra hashes are ignored.
    fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError>;
}

impl<F> TileReader for F
where
    F: FnMut(Tile) -> Result<Vec<Hash>, MerkleError>,
{
    fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError> {
        self(tile)
    }
}

/// A [`HashReader`] over the tiles of a tree of a given size.
///
/// It asks its [`TileReader`] for each tile once, with the width the tile has
/// at that size, and keeps what it read.
#[derive(Debug)]
pub struct TileHashReader<R> {
    tiles: R,
    size: u64,
    cache: HashMap<(u8, u64), Vec<Hash>>,
}

impl<R: TileReader> TileHashReader<R> {
    /// A reader of the tree of `size` leaves stored in `tiles`.
    pub fn new(tiles: R, size: u64) -> Self {
        Self { tiles, size, cache: HashMap::new() }
    }

    /// The tree size this reader serves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Gives the tile reader back.
    pub fn into_inner(self) -> R {
        self.tiles
    }

    fn tile_hashes(&mut self, tile: Tile) -> Result<&[Hash], MerkleError> {
        let key = (tile.level(), tile.index());
        if !self.cache.contains_key(&key) {
            let mut hashes = self.tiles.read_tile(tile)?;
            if hashes.len() < usize::from(tile.width()) {
                return Err(MerkleError::BadTile { tile: tile.path(), detail: "fewer hashes than its width" });
            }
            hashes.truncate(usize::from(tile.width()));
            self.cache.insert(key, hashes);
        }
        Ok(self.cache.get(&key).map(Vec::as_slice).unwrap_or(&[]))
    }
}

impl<R: TileReader> HashReader for TileHashReader<R> {
    fn subtree_hash(&mut self, level: u8, index: u64) -> Result<Hash, MerkleError> {
        let missing = || MerkleError::NoSuchSubtree { level, index };
        // Subtree (level, index) is 2^r consecutive hashes of tile level L.
        let tile_level = level / TILE_HEIGHT;
        let r = u32::from(level % TILE_HEIGHT);
        let first = index.checked_shl(r).filter(|f| f >> r == index).ok_or_else(missing)?;
        let count = 1u64 << r;
        let end = first.checked_add(count).ok_or_else(missing)?;
        if end > entries_at_level(tile_level, self.size) {
            return Err(missing());
        }
        let tile_index = first / u64::from(TILE_WIDTH);
        let offset = (first % u64::from(TILE_WIDTH)) as usize;
        let tile = Tile::in_tree(tile_level, tile_index, self.size).ok_or_else(missing)?;
        let hashes = self.tile_hashes(tile)?;
        Ok(root_from_leaf_hashes(&hashes[offset..offset + count as usize]))
    }
}

/// What appending leaves to a tiled tree produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeUpdate {
    /// The new tree size.
    pub size: u64,
    /// The new tree head.
    pub root: Hash,
    /// Every tile that is new or grew, with its hashes, level by level (level 0
    /// first). The data tiles to write are those of the level-0 tiles here.
    pub tiles: Vec<(Tile, Vec<Hash>)>,
}

/// Appends `leaf_hashes` to the tree of `old_size` leaves stored in `tiles`.
///
/// Reads only the partial tiles at the right edge of the old tree (one per
/// level at most) plus what the new tree head needs, and returns every tile to
/// write. Tiles must be written before a checkpoint of the new size is published.
pub fn append_leaves(
    tiles: &mut impl TileReader,
    old_size: u64,
    leaf_hashes: &[Hash],
) -> Result<TreeUpdate, MerkleError> {
    let new_size = old_size
        .checked_add(leaf_hashes.len() as u64)
        .filter(|s| *s < 1 << 56)
        .ok_or(MerkleError::SizeOutOfRange { requested: u64::MAX, size: 1 << 56 })?;
    let mut out: Vec<(Tile, Vec<Hash>)> = Vec::new();
    let mut level: u8 = 0;
    let mut added: Vec<Hash> = leaf_hashes.to_vec();
    while !added.is_empty() {
        let old_entries = entries_at_level(level, old_size);
        let first_tile = old_entries / u64::from(TILE_WIDTH);
        let kept = (old_entries % u64::from(TILE_WIDTH)) as usize;
        let mut hashes = Vec::with_capacity(kept + added.len());
        if kept > 0 {
            let partial = Tile::in_tree(level, first_tile, old_size)
                .ok_or(MerkleError::SizeOutOfRange { requested: old_size, size: old_size })?;
            let mut old = tiles.read_tile(partial)?;
            if old.len() < kept {
                return Err(MerkleError::BadTile { tile: partial.path(), detail: "fewer hashes than its width" });
            }
            old.truncate(kept);
            hashes.extend(old);
        }
        hashes.append(&mut added);
        for (i, chunk) in hashes.chunks(usize::from(TILE_WIDTH)).enumerate() {
            let tile = Tile::in_tree(level, first_tile + i as u64, new_size)
                .ok_or(MerkleError::SizeOutOfRange { requested: new_size, size: new_size })?;
            if chunk.len() == usize::from(TILE_WIDTH) {
                added.push(root_from_leaf_hashes(chunk));
            }
            out.push((tile, chunk.to_vec()));
        }
        level += 1;
    }
    let root = {
        let mut overlay = Overlay { new: &out, old: tiles };
        let mut reader = TileHashReader::new(&mut overlay, new_size);
        tree_hash(&mut reader, new_size)?
    };
    Ok(TreeUpdate { size: new_size, root, tiles: out })
}

/// New tiles first, then the stored ones.
struct Overlay<'a, R> {
    new: &'a [(Tile, Vec<Hash>)],
    old: &'a mut R,
}

impl<R: TileReader> TileReader for &mut Overlay<'_, R> {
    fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError> {
        match self.new.iter().find(|(t, _)| t.level() == tile.level() && t.index() == tile.index()) {
            Some((_, hashes)) => Ok(hashes.clone()),
            None => self.old.read_tile(tile),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::proof::{consistency_proof, inclusion_proof, verify_consistency, verify_inclusion};
    use super::super::testvectors::{many_leaf_hashes, SplitMix};
    use super::super::MemoryTree;
    use super::*;

    /// Tiles stored in memory, as a log's storage would hold them.
    #[derive(Default)]
    struct Store {
        tiles: HashMap<(u8, u64), Vec<Hash>>,
        reads: usize,
    }

    impl TileReader for &mut Store {
        fn read_tile(&mut self, tile: Tile) -> Result<Vec<Hash>, MerkleError> {
            self.reads += 1;
            let hashes = self
                .tiles
                .get(&(tile.level(), tile.index()))
                .ok_or_else(|| MerkleError::Read(format!("no tile {}", tile.path()).into()))?;
            Ok(hashes.clone())
        }
    }

    fn grow(store: &mut Store, old: u64, leaves: &[Hash]) -> TreeUpdate {
        let update = append_leaves(&mut &mut *store, old, leaves).unwrap();
        for (tile, hashes) in &update.tiles {
            assert_eq!(hashes.len(), usize::from(tile.width()));
            store.tiles.insert((tile.level(), tile.index()), hashes.clone());
        }
        update
    }

    #[test]
    fn appended_tiles_give_the_same_tree_as_memory() {
        let leaves = many_leaf_hashes(70_000);
        let mut store = Store::default();
        let mut size = 0u64;
        let mut rng = SplitMix(1);
        let mut memory = MemoryTree::new();
        while size < 70_000 {
            let n = (1 + rng.below(3000)).min(70_000 - size);
            let batch = &leaves[size as usize..(size + n) as usize];
            let update = grow(&mut store, size, batch);
            for l in batch {
                memory.push(*l);
            }
            assert_eq!(update.size, size + n);
            assert_eq!(update.root, memory.root(), "size {}", update.size);
            let mut changed: Vec<Tile> = update.tiles.iter().map(|(t, _)| *t).collect();
            changed.sort();
            let mut want = super::super::tile::new_tiles(size, size + n);
            want.sort();
            assert_eq!(changed, want);
            size += n;
        }
        // Proofs from tiles equal proofs from memory.
        let mut reader = TileHashReader::new(&mut store, size);
        for _ in 0..200 {
            let index = rng.below(size);
            let old = rng.below(size + 1);
            let p = inclusion_proof(&mut reader, index, size).unwrap();
            assert_eq!(p, inclusion_proof(&mut memory, index, size).unwrap());
            verify_inclusion(index, size, &leaves[index as usize], &p, &memory.root()).unwrap();
            let c = consistency_proof(&mut reader, old, size).unwrap();
            assert_eq!(c, consistency_proof(&mut memory, old, size).unwrap());
            verify_consistency(old, size, &memory.root_at(old).unwrap(), &memory.root(), &c).unwrap();
        }
    }

    #[test]
    fn tree_heads_of_earlier_sizes_come_from_their_partial_tiles() {
        // Partial tiles of an earlier size stay readable; full tiles stand in
        // for them (a reader may return more hashes than asked for).
        let leaves = many_leaf_hashes(1000);
        let memory = MemoryTree::from_leaf_hashes(leaves.iter().copied());
        let mut store = Store::default();
        grow(&mut store, 0, &leaves);
        for size in [1u64, 2, 255, 256, 257, 511, 512, 513, 999, 1000] {
            let mut reader = TileHashReader::new(&mut store, size);
            assert_eq!(tree_hash(&mut reader, size).unwrap(), memory.root_at(size).unwrap(), "size {size}");
        }
    }

    #[test]
    fn each_tile_is_read_once_per_reader() {
        let leaves = many_leaf_hashes(600);
        let mut store = Store::default();
        grow(&mut store, 0, &leaves);
        store.reads = 0;
        let mut reader = TileHashReader::new(&mut store, 600);
        for i in 0..600 {
            inclusion_proof(&mut reader, i, 600).unwrap();
        }
        drop(reader);
        // Level 0: tiles 0, 1, 2 (partial); level 1: one partial tile.
        assert_eq!(store.reads, 4);
    }

    #[test]
    fn short_tiles_and_missing_subtrees_are_errors() {
        let mut short = |_t: Tile| -> Result<Vec<Hash>, MerkleError> { Ok(vec![[0; 32]]) };
        let mut reader = TileHashReader::new(&mut short, 10);
        assert!(matches!(reader.subtree_hash(0, 5), Err(MerkleError::BadTile { .. })));
        assert!(matches!(reader.subtree_hash(0, 10), Err(MerkleError::NoSuchSubtree { .. })));
        assert!(matches!(reader.subtree_hash(63, u64::MAX), Err(MerkleError::NoSuchSubtree { .. })));
        assert!(append_leaves(&mut short, 10, &[[1; 32]]).is_err());
    }

    #[test]
    fn empty_append_keeps_the_tree() {
        let leaves = many_leaf_hashes(300);
        let mut store = Store::default();
        let first = grow(&mut store, 0, &leaves);
        let again = append_leaves(&mut &mut store, 300, &[]).unwrap();
        assert_eq!(again.root, first.root);
        assert!(again.tiles.is_empty());
    }
}
