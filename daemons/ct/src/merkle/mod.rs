//! RFC 6962 / RFC 9162 Merkle tree hashing, proofs and the tlog-tiles layout.
//!
//! - This module: leaf and node hashes, the tree head (MTH) of a list of leaf
//!   hashes, the [`HashReader`] trait through which proofs read stored hashes,
//!   and [`MemoryTree`], a tree kept in memory.
//! - [`proof`]: inclusion and consistency proofs, generated from a
//!   [`HashReader`] and verified as RFC 9162 §2.1.3.2 and §2.1.4.2 say.
//! - [`tile`]: tile coordinates and their `tile/<L>/<N>[.p/<W>]` paths.
//! - [`tiles`]: hashes read from tiles ([`TileReader`]) and the tiles a batch of
//!   new leaves writes.
//!
//! A *subtree* `(level, index)` is the complete subtree of `2^level` leaves
//! starting at leaf `index << level`; its hash is the MTH of those leaves.

pub mod proof;
pub mod tile;
pub mod tiles;

use sha2::{Digest, Sha256};

pub use proof::{consistency_proof, inclusion_proof, root_from_inclusion_proof, verify_consistency, verify_inclusion};
pub use tile::{parse_tile_path, Tile, TilePath, TilePathError, TILE_HEIGHT, TILE_WIDTH};
pub use tiles::{append_leaves, TileHashReader, TileReader, TreeUpdate};

/// Size of a SHA-256 hash in bytes.
pub const HASH_SIZE: usize = 32;

/// A SHA-256 Merkle tree hash.
pub type Hash = [u8; HASH_SIZE];

/// Errors from tree computations and from the storage they read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MerkleError {
    /// A leaf index is not inside the tree.
    #[error("leaf index {index} is outside a tree of size {size}")]
    IndexOutOfRange {
        /// The leaf index asked for.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// Two tree sizes are in the wrong order (e.g. a consistency proof from a
    /// larger tree to a smaller one), or a size is beyond what is stored.
    #[error("tree size {requested} is invalid here (tree size {size})")]
    SizeOutOfRange {
        /// The size asked for.
        requested: u64,
        /// The size available or the upper bound.
        size: u64,
    },
    /// A subtree is not complete in the tree (or its coordinates overflow).
    #[error("subtree at level {level}, index {index} is not in the tree")]
    NoSuchSubtree {
        /// Subtree level.
        level: u8,
        /// Subtree index.
        index: u64,
    },
    /// A tile read from storage has fewer hashes than its width, or its bytes
    /// are not a whole number of hashes.
    #[error("tile {tile} is malformed: {detail}")]
    BadTile {
        /// The tile's path.
        tile: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// The storage behind a [`HashReader`] or [`TileReader`] failed.
    #[error("reading hashes failed: {0}")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The hash of the empty tree: SHA-256 of the empty string.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The leaf hash of an entry: `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(data);
    h.finalize().into()
}

/// The hash of an interior node: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The Merkle Tree Hash (RFC 6962 §2.1) of a list of leaf hashes.
///
/// The same function gives the hash of a tile one level up from the tile's
/// hashes (tlog-tiles: a tile is a subtree of height 8 with its hashes as leaves).
pub fn root_from_leaf_hashes(hashes: &[Hash]) -> Hash {
    match hashes.len() {
        0 => empty_root(),
        1 => hashes[0],
        n => {
            let k = split_point(n as u64) as usize;
            node_hash(&root_from_leaf_hashes(&hashes[..k]), &root_from_leaf_hashes(&hashes[k..]))
        }
    }
}

/// The largest power of two smaller than `n` (`n >= 2`): where RFC 6962 splits
/// a tree of `n` leaves.
pub(crate) fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}

/// Read access to the hashes of complete subtrees of a log.
///
/// Implementations answer for subtrees that are complete in the tree they hold
/// (for tiles: in the tree size the reader was made for). `&mut self` lets an
/// implementation cache what it reads.
pub trait HashReader {
    /// The hash of the complete subtree of `2^level` leaves starting at leaf
    /// `index << level`.
    fn subtree_hash(&mut self, level: u8, index: u64) -> Result<Hash, MerkleError>;
}

impl<F> HashReader for F
where
    F: FnMut(u8, u64) -> Result<Hash, MerkleError>,
{
    fn subtree_hash(&mut self, level: u8, index: u64) -> Result<Hash, MerkleError> {
        self(level, index)
    }
}

/// The MTH of the leaves `[start, end)`, where `start` is a multiple of the
/// smallest power of two at least `end - start` (the only ranges RFC 6962
/// proofs and tree heads use; `start == 0` always qualifies).
///
/// The range splits into complete subtrees from the largest to the smallest,
/// and their hashes fold from the right.
pub(crate) fn range_hash(reader: &mut impl HashReader, start: u64, end: u64) -> Result<Hash, MerkleError> {
    if start >= end {
        return Ok(empty_root());
    }
    let mut parts = Vec::with_capacity(64);
    let mut pos = start;
    while pos < end {
        let remaining = end - pos;
        // The largest aligned complete subtree that starts at `pos` and fits.
        let mut level = 63 - remaining.leading_zeros();
        if pos != 0 {
            level = level.min(pos.trailing_zeros());
        }
        parts.push(reader.subtree_hash(level as u8, pos >> level)?);
        pos += 1u64 << level;
    }
    let mut acc = parts.pop().unwrap_or_else(empty_root);
    while let Some(left) = parts.pop() {
        acc = node_hash(&left, &acc);
    }
    Ok(acc)
}

/// The tree head of the first `size` leaves, read through `reader`.
pub fn tree_hash(reader: &mut impl HashReader, size: u64) -> Result<Hash, MerkleError> {
    range_hash(reader, 0, size)
}

/// A Merkle tree held in memory: every complete subtree's hash, level by level.
///
/// Useful for tests, tools and small logs; a large log keeps its hashes in
/// tiles instead (see [`tiles`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryTree {
    /// `levels[l][i]` is the hash of subtree `(l, i)`.
    levels: Vec<Vec<Hash>>,
}

impl MemoryTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tree of the given leaf hashes.
    pub fn from_leaf_hashes(hashes: impl IntoIterator<Item = Hash>) -> Self {
        let mut t = Self::new();
        for h in hashes {
            t.push(h);
        }
        t
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    /// Appends a leaf hash and returns its index.
    pub fn push(&mut self, leaf_hash: Hash) -> u64 {
        let mut level = 0;
        let mut hash = leaf_hash;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            self.levels[level].push(hash);
            let n = self.levels[level].len();
            if n % 2 == 1 {
                break;
            }
            hash = node_hash(&self.levels[level][n - 2], &self.levels[level][n - 1]);
            level += 1;
        }
        self.size() - 1
    }

    /// The tree head of the whole tree.
    pub fn root(&self) -> Hash {
        let mut r = self;
        // Cannot fail: every complete subtree of the current size is stored.
        tree_hash(&mut r, self.size()).unwrap_or_else(|_| empty_root())
    }

    /// The tree head at an earlier size.
    pub fn root_at(&self, size: u64) -> Result<Hash, MerkleError> {
        if size > self.size() {
            return Err(MerkleError::SizeOutOfRange { requested: size, size: self.size() });
        }
        let mut r = self;
        tree_hash(&mut r, size)
    }

    /// The leaf hash at `index`.
    pub fn leaf(&self, index: u64) -> Option<Hash> {
        self.levels.first()?.get(usize::try_from(index).ok()?).copied()
    }
}

impl HashReader for MemoryTree {
    fn subtree_hash(&mut self, level: u8, index: u64) -> Result<Hash, MerkleError> {
        (&*self).subtree_hash(level, index)
    }
}

impl HashReader for &MemoryTree {
    fn subtree_hash(&mut self, level: u8, index: u64) -> Result<Hash, MerkleError> {
        self.levels
            .get(usize::from(level))
            .and_then(|l| l.get(usize::try_from(index).ok()?))
            .copied()
            .ok_or(MerkleError::NoSuchSubtree { level, index })
    }
}

#[cfg(test)]
pub(crate) mod testvectors {
    //! The RFC 6962 test tree of certificate-transparency-go and
    //! transparency-dev/merkle: eight leaves and the published tree heads.

    use super::Hash;

    /// The leaf data.
    pub const LEAVES: [&str; 8] =
        ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"];

    /// Tree heads for sizes 0 to 8.
    pub const ROOTS: [&str; 9] = [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    /// Decodes a hex hash.
    pub fn h(s: &str) -> Hash {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    /// The leaf hashes of the test tree.
    pub fn leaf_hashes() -> Vec<Hash> {
        LEAVES.iter().map(|l| super::leaf_hash(&hex::decode(l).unwrap())).collect()
    }

    /// A small deterministic PRNG (SplitMix64) for randomised tests.
    pub struct SplitMix(pub u64);

    impl SplitMix {
        /// The next value.
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// A value in `0..n` (`n > 0`).
        pub fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Leaf hashes of `n` distinct entries.
    pub fn many_leaf_hashes(n: u64) -> Vec<Hash> {
        (0..n).map(|i| super::leaf_hash(&i.to_be_bytes())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testvectors::*;
    use super::*;

    #[test]
    fn empty_root_is_sha256_of_nothing() {
        assert_eq!(empty_root(), h(ROOTS[0]));
        assert_eq!(root_from_leaf_hashes(&[]), h(ROOTS[0]));
        assert_eq!(MemoryTree::new().root(), h(ROOTS[0]));
    }

    #[test]
    fn published_roots_for_sizes_0_to_8() {
        let leaves = leaf_hashes();
        let tree = MemoryTree::from_leaf_hashes(leaves.iter().copied());
        for size in 0..=8 {
            assert_eq!(root_from_leaf_hashes(&leaves[..size]), h(ROOTS[size]), "size {size}");
            assert_eq!(tree.root_at(size as u64).unwrap(), h(ROOTS[size]), "size {size}");
            let t = MemoryTree::from_leaf_hashes(leaves[..size].iter().copied());
            assert_eq!(t.root(), h(ROOTS[size]), "size {size}");
        }
        assert!(tree.root_at(9).is_err());
    }

    #[test]
    fn reader_root_matches_recursive_definition() {
        let leaves = many_leaf_hashes(300);
        let tree = MemoryTree::from_leaf_hashes(leaves.iter().copied());
        for size in 0..=300usize {
            assert_eq!(tree.root_at(size as u64).unwrap(), root_from_leaf_hashes(&leaves[..size]), "size {size}");
        }
    }

    #[test]
    fn split_points() {
        assert_eq!(split_point(2), 1);
        assert_eq!(split_point(3), 2);
        assert_eq!(split_point(4), 2);
        assert_eq!(split_point(5), 4);
        assert_eq!(split_point(1 << 40), 1 << 39);
        assert_eq!(split_point((1 << 40) + 1), 1 << 40);
    }

    #[test]
    fn push_returns_indices_and_leaves_are_kept() {
        let mut t = MemoryTree::new();
        for (i, l) in leaf_hashes().into_iter().enumerate() {
            assert_eq!(t.push(l), i as u64);
            assert_eq!(t.leaf(i as u64), Some(l));
        }
        assert_eq!(t.leaf(8), None);
    }
}
