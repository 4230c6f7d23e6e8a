//! tlog-tiles coordinates (c2sp.org/tlog-tiles, c2sp.org/static-ct-api).
//!
//! A tile at level `L` and index `N` holds up to 256 consecutive hashes of
//! subtrees of height `8·L`: entry `i` is the hash of subtree
//! `(8·L, N·256 + i)`. A full tile has 256 hashes; the rightmost tile of each
//! level may be partial (1 to 255 hashes). Paths:
//!
//! ```text
//! tile/<L>/<N>[.p/<W>]      Merkle tree hashes
//! tile/data/<N>[.p/<W>]     static-ct-api data tiles (the entries of tile/0/<N>)
//! ```
//!
//! `<N>` is written in groups of three digits, all but the last prefixed with
//! `x`: 1234067 is `x001/x234/067`. Parsing is strict: a path parses only if
//! formatting the result gives the same path back (no extra zero groups, no
//! `.p/256`, no leading zeros in `<L>` or `<W>`).

use std::fmt;

use super::{Hash, HASH_SIZE};

/// Height of a tile: each tile spans 8 levels of the tree.
pub const TILE_HEIGHT: u8 = 8;

/// Number of hashes in a full tile.
pub const TILE_WIDTH: u16 = 1 << TILE_HEIGHT;

/// The highest tile level tlog-tiles allows.
pub const MAX_TILE_LEVEL: u8 = 63;

/// Longest tile path accepted by [`parse_tile_path`] (far more than any valid path).
pub const MAX_TILE_PATH_LEN: usize = 128;

/// Errors from tile coordinates and paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TilePathError {
    /// The path is not a tile path in canonical form.
    #[error("malformed tile path")]
    Malformed,
    /// Level above [`MAX_TILE_LEVEL`] or width outside `1..=256`.
    #[error("tile coordinates out of range")]
    OutOfRange,
}

/// A tile of Merkle tree hashes: level, index and width (number of hashes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tile {
    level: u8,
    index: u64,
    width: u16,
}

impl Tile {
    /// A tile; `level <= 63` and `1 <= width <= 256`.
    pub fn new(level: u8, index: u64, width: u16) -> Result<Self, TilePathError> {
        if level > MAX_TILE_LEVEL || width == 0 || width > TILE_WIDTH {
            return Err(TilePathError::OutOfRange);
        }
        Ok(Self { level, index, width })
    }

    /// The tile `(level, index)` as it is in a tree of `size` leaves: full, or
    /// partial with the width the tree gives it; `None` if the tree has no hash
    /// in it yet.
    pub fn in_tree(level: u8, index: u64, size: u64) -> Option<Self> {
        let entries = entries_at_level(level, size);
        let start = index.checked_mul(u64::from(TILE_WIDTH))?;
        if start >= entries || level > MAX_TILE_LEVEL {
            return None;
        }
        let width = (entries - start).min(u64::from(TILE_WIDTH)) as u16;
        Some(Self { level, index, width })
    }

    /// The tile's level.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The tile's index within its level.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The number of hashes in the tile.
    pub fn width(&self) -> u16 {
        self.width
    }

    /// Whether the tile has fewer than 256 hashes.
    pub fn is_partial(&self) -> bool {
        self.width < TILE_WIDTH
    }

    /// The full tile at the same coordinates.
    pub fn full(&self) -> Self {
        Self { width: TILE_WIDTH, ..*self }
    }

    /// The hash tile path: `tile/<L>/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        TilePath::Hashes(*self).to_string()
    }

    /// The static-ct-api data tile path of the same index and width:
    /// `tile/data/<N>[.p/<W>]` (meaningful for level 0 tiles).
    pub fn data_path(&self) -> String {
        TilePath::Data(*self).to_string()
    }

    /// The first leaf index the tile covers.
    pub fn start_leaf(&self) -> Option<u64> {
        self.index.checked_mul(u64::from(TILE_WIDTH))?.checked_mul(leaves_per_entry(self.level)?)
    }
}

/// What a tile path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TilePath {
    /// `tile/<L>/<N>[.p/<W>]`: Merkle tree hashes.
    Hashes(Tile),
    /// `tile/data/<N>[.p/<W>]`: the log entries of level-0 tile `<N>` (level is 0).
    Data(Tile),
}

impl TilePath {
    /// The tile coordinates (for data tiles, those of the matching level-0 tile).
    pub fn tile(&self) -> Tile {
        match self {
            TilePath::Hashes(t) | TilePath::Data(t) => *t,
        }
    }
}

impl fmt::Display for TilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.tile();
        match self {
            TilePath::Hashes(_) => write!(f, "tile/{}/", t.level)?,
            TilePath::Data(_) => f.write_str("tile/data/")?,
        }
        write_index(f, t.index)?;
        if t.is_partial() {
            write!(f, ".p/{}", t.width)?;
        }
        Ok(())
    }
}

/// Writes `n` as `x001/x234/067`.
fn write_index(f: &mut fmt::Formatter<'_>, n: u64) -> fmt::Result {
    let mut groups = [0u16; 7];
    let mut count = 0;
    let mut rest = n;
    loop {
        groups[count] = (rest % 1000) as u16;
        count += 1;
        rest /= 1000;
        if rest == 0 {
            break;
        }
    }
    for (i, g) in groups[..count].iter().rev().enumerate() {
        if i + 1 < count {
            write!(f, "x{g:03}/")?;
        } else {
            write!(f, "{g:03}")?;
        }
    }
    Ok(())
}

/// Parses a tile path (without a leading `/`), strictly.
pub fn parse_tile_path(path: &str) -> Result<TilePath, TilePathError> {
    if path.len() > MAX_TILE_PATH_LEN || !path.is_ascii() {
        return Err(TilePathError::Malformed);
    }
    let rest = path.strip_prefix("tile/").ok_or(TilePathError::Malformed)?;
    let (kind, rest) = rest.split_once('/').ok_or(TilePathError::Malformed)?;
    let data = kind == "data";
    let level = if data { 0 } else { parse_decimal(kind, u64::from(MAX_TILE_LEVEL))? as u8 };
    // Split off the partial suffix: `<groups>.p/<W>`.
    let (index_part, width) = match rest.split_once(".p/") {
        Some((idx, w)) => {
            let w = parse_decimal(w, u64::from(TILE_WIDTH) - 1)?;
            if w == 0 {
                return Err(TilePathError::Malformed);
            }
            (idx, w as u16)
        }
        None => (rest, TILE_WIDTH),
    };
    let groups: Vec<&str> = index_part.split('/').collect();
    let mut index: u64 = 0;
    for (i, g) in groups.iter().enumerate() {
        let last = i + 1 == groups.len();
        let digits = if last { *g } else { g.strip_prefix('x').ok_or(TilePathError::Malformed)? };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TilePathError::Malformed);
        }
        let v = u64::from(digits.parse::<u16>().map_err(|_| TilePathError::Malformed)?);
        index = index.checked_mul(1000).and_then(|n| n.checked_add(v)).ok_or(TilePathError::Malformed)?;
    }
    let tile = Tile::new(level, index, width)?;
    let parsed = if data { TilePath::Data(tile) } else { TilePath::Hashes(tile) };
    // Canonical form only: rejects `x000/` prefixes and every other variant.
    if parsed.to_string() != path {
        return Err(TilePathError::Malformed);
    }
    Ok(parsed)
}

/// A decimal ASCII integer with no sign and no leading zeros, at most `max`.
fn parse_decimal(s: &str, max: u64) -> Result<u64, TilePathError> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0')) {
        return Err(TilePathError::Malformed);
    }
    let v: u64 = s.parse().map_err(|_| TilePathError::Malformed)?;
    if v > max {
        return Err(TilePathError::Malformed);
    }
    Ok(v)
}

/// Number of leaves under one hash of a level-`level` tile (`256^level`), if it fits in a u64.
fn leaves_per_entry(level: u8) -> Option<u64> {
    1u64.checked_shl(u32::from(level) * u32::from(TILE_HEIGHT)).filter(|_| u32::from(level) * 8 < 64)
}

/// Number of hashes at tile level `level` in a tree of `size` leaves:
/// `floor(size / 256^level)`.
pub fn entries_at_level(level: u8, size: u64) -> u64 {
    match leaves_per_entry(level) {
        Some(d) => size / d,
        None => 0,
    }
}

/// Every tile of a tree of `size` leaves, level by level from level 0: the full
/// tiles, then the partial one if the level has one.
pub fn tiles_for_size(size: u64) -> impl Iterator<Item = Tile> {
    (0..=MAX_TILE_LEVEL).take_while(move |&l| entries_at_level(l, size) > 0).flat_map(move |level| {
        let entries = entries_at_level(level, size);
        let count = entries.div_ceil(u64::from(TILE_WIDTH));
        (0..count).filter_map(move |index| Tile::in_tree(level, index, size))
    })
}

/// The tiles a log writes when it grows from `old` to `new` leaves: every tile
/// whose content at `new` differs from (or did not exist at) `old`, each with
/// its width at `new`. Data tiles follow the level-0 tiles listed here.
pub fn new_tiles(old: u64, new: u64) -> Vec<Tile> {
    let mut out = Vec::new();
    if new <= old {
        return out;
    }
    for level in 0..=MAX_TILE_LEVEL {
        let (old_n, new_n) = (entries_at_level(level, old), entries_at_level(level, new));
        if new_n == 0 || new_n == old_n {
            if new_n == 0 {
                break;
            }
            continue;
        }
        let first = old_n / u64::from(TILE_WIDTH);
        let last = (new_n - 1) / u64::from(TILE_WIDTH);
        out.extend((first..=last).filter_map(|index| Tile::in_tree(level, index, new)));
    }
    out
}

/// The hashes in a tile's bytes (concatenated 32-byte hashes).
pub fn hashes_from_tile_bytes(bytes: &[u8]) -> Option<Vec<Hash>> {
    if bytes.len() % HASH_SIZE != 0 || bytes.len() > usize::from(TILE_WIDTH) * HASH_SIZE {
        return None;
    }
    Some(bytes.chunks_exact(HASH_SIZE).map(|c| c.try_into().unwrap_or([0; HASH_SIZE])).collect())
}

/// A tile's bytes: its hashes concatenated.
pub fn tile_bytes(hashes: &[Hash]) -> Vec<u8> {
    hashes.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(level: u8, index: u64, width: u16) -> Tile {
        Tile::new(level, index, width).unwrap()
    }

    #[test]
    fn paths_format_as_tlog_tiles_says() {
        assert_eq!(t(0, 0, 256).path(), "tile/0/000");
        assert_eq!(t(0, 0, 255).path(), "tile/0/000.p/255");
        assert_eq!(t(1, 0, 1).path(), "tile/1/000.p/1");
        assert_eq!(t(0, 1234067, 256).path(), "tile/0/x001/x234/067");
        assert_eq!(t(3, 1234567, 256).path(), "tile/3/x001/x234/567");
        assert_eq!(t(15, 455667, 256).path(), "tile/15/x455/667");
        assert_eq!(t(15, 123456789, 256).path(), "tile/15/x123/x456/789");
        assert_eq!(t(0, 1000, 256).path(), "tile/0/x001/000");
        assert_eq!(t(0, 5, 17).data_path(), "tile/data/005.p/17");
        assert_eq!(t(0, 123456789000, 256).data_path(), "tile/data/x123/x456/x789/000");
        assert_eq!(t(0, u64::MAX, 256).path(), "tile/0/x018/x446/x744/x073/x709/x551/615");
    }

    #[test]
    fn paths_parse_back() {
        for (path, want) in [
            ("tile/0/x001/x234/067", TilePath::Hashes(t(0, 1234067, 256))),
            ("tile/0/x001/x234/067.p/89", TilePath::Hashes(t(0, 1234067, 89))),
            ("tile/63/x999/x999/x999/x999/x999/999.p/255", TilePath::Hashes(t(63, 999_999_999_999_999_999, 255))),
            ("tile/0/001", TilePath::Hashes(t(0, 1, 256))),
            ("tile/data/000.p/1", TilePath::Data(t(0, 0, 1))),
            ("tile/data/x001/000", TilePath::Data(t(0, 1000, 256))),
            ("tile/0/x018/x446/x744/x073/x709/x551/615", TilePath::Hashes(t(0, u64::MAX, 256))),
        ] {
            assert_eq!(parse_tile_path(path), Ok(want), "{path}");
            assert_eq!(want.to_string(), path);
        }
    }

    #[test]
    fn bad_paths_are_rejected() {
        for path in [
            "",
            "tile",
            "tile/",
            "tile/0",
            "tile/0/",
            "tile/0/x001/x234/067.p/",
            "tile/0/x001/x234/067.p",
            "tile/0/x001/x234/",
            "tile/0/x001/x234",
            "tile/0/x001/",
            "tile/0/x001",
            "tile/1/x001/.p/abc",
            "tile/64/x001/002",
            "tile/-1/x001/002",
            "tile/abc/x001/002",
            "tile/00/001",
            "tile/01/001",
            "tile/8/001/002",
            "tile/8/x001/0002",
            "tile/8/x001/-002",
            "tile/8/x001/002.p/256",
            "tile/0/001.p/0",
            "tile/0/001.p/01",
            "tile/0/x000/001",
            "tile/0/x000/000",
            "tile/0/../001",
            "tile/0/x001/../001",
            "tile/data/../0/001",
            "tile/0/001/",
            "/tile/0/001",
            "tile//001",
            "tile/0//001",
            "tile/0/+01",
            "tile/0/ 01",
            "tile/0/x1/001",
            "tile/0/X001/001",
            "tile/0/x018/x446/x744/x073/x709/x551/616",
            "tile/0/x999/x999/x999/x999/x999/x999/x999/999",
            "tile/data/001.p/1/",
            "tile/entries/001",
            "tile/0/001.p/5.p/4",
            "tile/0/٠٠١",
        ] {
            assert!(parse_tile_path(path).is_err(), "{path:?} parsed");
        }
    }

    #[test]
    fn tiles_of_a_tree_of_70000() {
        // The example of the spec: 273 full level-0 tiles, a partial one of
        // width 112, one full level-1 tile, a partial one of width 17 and a
        // partial level-2 tile of width 1.
        let tiles: Vec<Tile> = tiles_for_size(70_000).collect();
        assert_eq!(tiles.iter().filter(|t| t.level() == 0 && !t.is_partial()).count(), 273);
        assert!(tiles.contains(&t(0, 273, 112)));
        assert!(tiles.contains(&t(1, 0, 256)));
        assert!(tiles.contains(&t(1, 1, 17)));
        assert!(tiles.contains(&t(2, 0, 1)));
        assert_eq!(tiles.len(), 273 + 1 + 1 + 1 + 1);
        // A tree of 256: one full level-0 tile and a level-1 tile of width 1.
        assert_eq!(tiles_for_size(256).collect::<Vec<_>>(), vec![t(0, 0, 256), t(1, 0, 1)]);
        assert_eq!(tiles_for_size(0).count(), 0);
    }

    #[test]
    fn tile_in_tree_widths() {
        assert_eq!(Tile::in_tree(0, 0, 255), Some(t(0, 0, 255)));
        assert_eq!(Tile::in_tree(0, 0, 256), Some(t(0, 0, 256)));
        assert_eq!(Tile::in_tree(1, 0, 256), Some(t(1, 0, 1)));
        assert_eq!(Tile::in_tree(1, 0, 1024), Some(t(1, 0, 4)));
        assert_eq!(Tile::in_tree(1, 0, 255), None);
        assert_eq!(Tile::in_tree(0, 1, 256), None);
        assert_eq!(Tile::in_tree(0, 1, 257), Some(t(0, 1, 1)));
        assert_eq!(Tile::in_tree(7, 0, u64::MAX), Some(t(7, 0, 255)));
        assert_eq!(Tile::in_tree(8, 0, u64::MAX), None);
        assert_eq!(Tile::in_tree(0, u64::MAX, u64::MAX), None);
    }

    #[test]
    fn new_tiles_on_growth() {
        assert_eq!(new_tiles(0, 1), vec![t(0, 0, 1)]);
        assert_eq!(new_tiles(1, 2), vec![t(0, 0, 2)]);
        assert_eq!(new_tiles(255, 256), vec![t(0, 0, 256), t(1, 0, 1)]);
        assert_eq!(new_tiles(256, 257), vec![t(0, 1, 1)]);
        assert_eq!(new_tiles(200, 600), vec![t(0, 0, 256), t(0, 1, 256), t(0, 2, 88), t(1, 0, 2)]);
        assert_eq!(new_tiles(5, 5), vec![]);
        // Every tile of the new tree that is not the same in the old one.
        let mut rng = crate::merkle::testvectors::SplitMix(7);
        for _ in 0..200 {
            let old = rng.below(200_000);
            let new = old + rng.below(3000);
            let want: Vec<Tile> = tiles_for_size(new)
                .filter(|tile| Tile::in_tree(tile.level(), tile.index(), old) != Some(*tile))
                .collect();
            let mut got = new_tiles(old, new);
            got.sort();
            let mut want = want;
            want.sort();
            assert_eq!(got, want, "{old} -> {new}");
        }
    }

    #[test]
    fn tile_bytes_round_trip() {
        let hashes = vec![[1u8; 32], [2u8; 32]];
        assert_eq!(hashes_from_tile_bytes(&tile_bytes(&hashes)), Some(hashes));
        assert_eq!(hashes_from_tile_bytes(&[0; 33]), None);
        assert_eq!(hashes_from_tile_bytes(&vec![0; 257 * 32]), None);
        assert_eq!(t(2, 3, 256).start_leaf(), Some(3 * 256 * 65536));
    }
}
