//! Inclusion and consistency proofs (RFC 6962 §2.1.1–2.1.2, RFC 9162 §2.1.3–2.1.4).
//!
//! Generation reads complete-subtree hashes through a [`HashReader`]; the proof
//! lists hashes from the leaf (or the old tree) up towards the root, as RFC 6962
//! `PATH` and `SUBPROOF` produce them. Verification follows the RFC 9162
//! algorithms and needs nothing but the hashes.

use super::{node_hash, range_hash, split_point, Hash, HashReader, MerkleError};

/// Errors from proof verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// The leaf index is not inside the tree.
    #[error("leaf index {index} is outside a tree of size {size}")]
    IndexOutOfRange {
        /// Leaf index.
        index: u64,
        /// Tree size.
        size: u64,
    },
    /// The old tree is larger than the new one.
    #[error("tree size {old} is larger than {new}")]
    SizesReversed {
        /// Old size.
        old: u64,
        /// New size.
        new: u64,
    },
    /// The proof has the wrong number of hashes for the sizes.
    #[error("proof has the wrong length ({len})")]
    WrongLength {
        /// Number of hashes in the proof.
        len: usize,
    },
    /// The proof does not lead to the expected root.
    #[error("proof does not match the root hash")]
    RootMismatch,
}

/// The inclusion proof (audit path) of leaf `index` in the tree of the first
/// `size` leaves.
pub fn inclusion_proof(reader: &mut impl HashReader, index: u64, size: u64) -> Result<Vec<Hash>, MerkleError> {
    if index >= size {
        return Err(MerkleError::IndexOutOfRange { index, size });
    }
    let mut out = Vec::with_capacity(64);
    path(reader, index, 0, size, &mut out)?;
    Ok(out)
}

/// RFC 6962 `PATH(m, D[start:start+n])`, appended to `out` (deepest first).
fn path(reader: &mut impl HashReader, m: u64, start: u64, n: u64, out: &mut Vec<Hash>) -> Result<(), MerkleError> {
    if n <= 1 {
        return Ok(());
    }
    let k = split_point(n);
    if m < k {
        path(reader, m, start, k, out)?;
        out.push(range_hash(reader, start + k, start + n)?);
    } else {
        path(reader, m - k, start + k, n - k, out)?;
        out.push(range_hash(reader, start, start + k)?);
    }
    Ok(())
}

/// The consistency proof between the trees of the first `old` and `new` leaves.
///
/// Empty when `old == new` or `old == 0` (nothing to prove).
pub fn consistency_proof(reader: &mut impl HashReader, old: u64, new: u64) -> Result<Vec<Hash>, MerkleError> {
    if old > new {
        return Err(MerkleError::SizeOutOfRange { requested: old, size: new });
    }
    let mut out = Vec::with_capacity(64);
    if old > 0 && old < new {
        subproof(reader, old, 0, new, true, &mut out)?;
    }
    Ok(out)
}

/// RFC 6962 `SUBPROOF(m, D[start:start+n], b)`, appended to `out`.
fn subproof(
    reader: &mut impl HashReader,
    m: u64,
    start: u64,
    n: u64,
    complete: bool,
    out: &mut Vec<Hash>,
) -> Result<(), MerkleError> {
    if m == n {
        if !complete {
            out.push(range_hash(reader, start, start + n)?);
        }
        return Ok(());
    }
    let k = split_point(n);
    if m <= k {
        subproof(reader, m, start, k, complete, out)?;
        out.push(range_hash(reader, start + k, start + n)?);
    } else {
        subproof(reader, m - k, start + k, n - k, false, out)?;
        out.push(range_hash(reader, start, start + k)?);
    }
    Ok(())
}

/// The root an inclusion proof leads to (RFC 9162 §2.1.3.2), for leaf `index`
/// with hash `leaf` in a tree of `size` leaves.
pub fn root_from_inclusion_proof(index: u64, size: u64, leaf: &Hash, proof: &[Hash]) -> Result<Hash, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return Err(ProofError::WrongLength { len: proof.len() });
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 {
        return Err(ProofError::WrongLength { len: proof.len() });
    }
    Ok(r)
}

/// Verifies that `leaf` is leaf `index` of the tree of `size` leaves with head `root`.
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> Result<(), ProofError> {
    if root_from_inclusion_proof(index, size, leaf, proof)? == *root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch)
    }
}

/// Verifies that the tree of `old` leaves with head `old_root` is a prefix of
/// the tree of `new` leaves with head `new_root` (RFC 9162 §2.1.4.2).
///
/// Equal sizes need equal roots and an empty proof; every tree extends the
/// empty tree (`old == 0`) with an empty proof.
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if old > new {
        return Err(ProofError::SizesReversed { old, new });
    }
    if old == new {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength { len: proof.len() });
        }
        return if old_root == new_root { Ok(()) } else { Err(ProofError::RootMismatch) };
    }
    if old == 0 {
        return if proof.is_empty() { Ok(()) } else { Err(ProofError::WrongLength { len: proof.len() }) };
    }
    if proof.is_empty() {
        return Err(ProofError::WrongLength { len: 0 });
    }
    // Step 2: a power-of-two old tree is itself the first node of the path.
    let mut path: Vec<&Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(old_root);
    }
    path.extend(proof);
    let (mut fn_, mut sn) = (old - 1, new - 1);
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let mut fr = *path[0];
    let mut sr = *path[0];
    for c in &path[1..] {
        if sn == 0 {
            return Err(ProofError::WrongLength { len: proof.len() });
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 {
        return Err(ProofError::WrongLength { len: proof.len() });
    }
    if fr == *old_root && sr == *new_root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testvectors::*;
    use super::super::{root_from_leaf_hashes, MemoryTree};
    use super::*;

    /// transparency-dev/merkle's inclusion vectors: (leaf index, size, proof).
    fn inclusion_vectors() -> Vec<(u64, u64, Vec<Hash>)> {
        vec![
            (
                0,
                8,
                vec![
                    h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
                    h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                    h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
                ],
            ),
            (
                5,
                8,
                vec![
                    h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                    h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
                ],
            ),
            (2, 3, vec![h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
            (
                1,
                5,
                vec![
                    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
                    h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                    h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                ],
            ),
            (0, 1, vec![]),
        ]
    }

    /// transparency-dev/merkle's consistency vectors: (old, new, proof).
    fn consistency_vectors() -> Vec<(u64, u64, Vec<Hash>)> {
        vec![
            (1, 1, vec![]),
            (
                1,
                8,
                vec![
                    h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
                    h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                    h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
                ],
            ),
            (
                6,
                8,
                vec![
                    h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
                    h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
                ],
            ),
            (
                2,
                5,
                vec![
                    h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                    h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                ],
            ),
            (
                6,
                7,
                vec![
                    h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
                    h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
                    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
                ],
            ),
        ]
    }

    fn test_tree() -> MemoryTree {
        MemoryTree::from_leaf_hashes(leaf_hashes())
    }

    #[test]
    fn known_inclusion_proofs_are_generated_and_verify() {
        let mut tree = test_tree();
        let leaves = leaf_hashes();
        for (index, size, want) in inclusion_vectors() {
            let got = inclusion_proof(&mut tree, index, size).unwrap();
            assert_eq!(got, want, "proof for {index} in {size}");
            let root = h(ROOTS[size as usize]);
            verify_inclusion(index, size, &leaves[index as usize], &want, &root).unwrap();
        }
    }

    #[test]
    fn known_consistency_proofs_are_generated_and_verify() {
        let mut tree = test_tree();
        for (old, new, want) in consistency_vectors() {
            let got = consistency_proof(&mut tree, old, new).unwrap();
            assert_eq!(got, want, "proof {old} -> {new}");
            verify_consistency(old, new, &h(ROOTS[old as usize]), &h(ROOTS[new as usize]), &want).unwrap();
        }
    }

    /// The corruptions transparency-dev/merkle probes: none of them may verify.
    #[test]
    fn corrupted_inclusion_proofs_fail() {
        let leaves = leaf_hashes();
        let some = h("abacaba000000000000000000000000000000000000000000060061e00123456");
        for (index, size, proof) in inclusion_vectors() {
            let root = h(ROOTS[size as usize]);
            let leaf = leaves[index as usize];
            let mut probes: Vec<(u64, u64, Hash, Vec<Hash>, Hash)> = vec![
                (index.wrapping_sub(1), size, leaf, proof.clone(), root),
                (index + 1, size, leaf, proof.clone(), root),
                (index ^ 2, size, leaf, proof.clone(), root),
                (index, size * 2, leaf, proof.clone(), root),
                (index, size / 2, leaf, proof.clone(), root),
                (index, size, some, proof.clone(), root),
                (index, size, leaf, proof.clone(), h(ROOTS[0])),
                (index, size, leaf, proof.clone(), some),
                (index, size, leaf, [proof.clone(), vec![root]].concat(), root),
                (index, size, leaf, [vec![root], proof.clone()].concat(), root),
            ];
            for i in 0..proof.len() {
                let mut p = proof.clone();
                p[i][0] ^= 8;
                probes.push((index, size, leaf, p, root));
            }
            if !proof.is_empty() {
                probes.push((index, size, leaf, proof[..proof.len() - 1].to_vec(), root));
            }
            for (i, s, l, p, r) in probes {
                if (i, s, l, &p, r) == (index, size, leaf, &proof, root) {
                    continue;
                }
                assert!(verify_inclusion(i, s, &l, &p, &r).is_err(), "probe {i} {s} verified");
            }
        }
    }

    #[test]
    fn corrupted_consistency_proofs_fail() {
        for (old, new, proof) in consistency_vectors() {
            if proof.is_empty() {
                continue;
            }
            let (r1, r2) = (h(ROOTS[old as usize]), h(ROOTS[new as usize]));
            let mut probes: Vec<(u64, u64, Hash, Hash, Vec<Hash>)> = vec![
                (old - 1, new, r1, r2, proof.clone()),
                (old + 1, new, r1, r2, proof.clone()),
                (old ^ 2, new, r1, r2, proof.clone()),
                (old, new * 2, r1, r2, proof.clone()),
                (old, new / 2, r1, r2, proof.clone()),
                (old, new, r2, r2, proof.clone()),
                (old, new, r1, r1, proof.clone()),
                (old, new, r2, r1, proof.clone()),
                (old, new, r1, r2, vec![]),
                (old, new, r1, r2, [proof.clone(), vec![r1]].concat()),
                (old, new, r1, r2, [proof.clone(), vec![r2]].concat()),
                (old, new, r1, r2, [vec![r1], proof.clone()].concat()),
                (old, new, r1, r2, [vec![r2], proof.clone()].concat()),
                (old, new, r1, r2, [vec![proof[0]], proof.clone()].concat()),
                (old, new, r1, r2, proof[..proof.len() - 1].to_vec()),
            ];
            for i in 0..proof.len() {
                let mut p = proof.clone();
                p[i][0] ^= 16;
                probes.push((old, new, r1, r2, p));
            }
            for (o, n, a, b, p) in probes {
                if (o, n) == (old, new) && a == r1 && b == r2 && p == proof {
                    continue;
                }
                assert!(verify_consistency(o, n, &a, &b, &p).is_err(), "probe {o}->{n} verified");
            }
        }
    }

    #[test]
    fn trivial_consistency_cases() {
        let (a, b) = (h(ROOTS[1]), h(ROOTS[2]));
        assert!(verify_consistency(0, 0, &a, &a, &[]).is_ok());
        assert!(verify_consistency(0, 0, &a, &b, &[]).is_err());
        assert!(verify_consistency(0, 5, &a, &b, &[]).is_ok());
        assert!(verify_consistency(0, 5, &a, &b, &[a]).is_err());
        assert!(verify_consistency(3, 3, &b, &b, &[]).is_ok());
        assert!(verify_consistency(3, 3, &b, &b, &[a]).is_err());
        assert!(verify_consistency(2, 1, &a, &b, &[]).is_err());
        assert!(verify_consistency(1, 2, &a, &b, &[]).is_err());
        assert!(verify_inclusion(0, 0, &a, &[], &a).is_err());
        assert!(verify_inclusion(0, 1, &a, &[], &a).is_ok());
        assert!(verify_inclusion(2, 1, &a, &[], &a).is_err());
    }

    /// Every proof generated for every size up to 300 verifies, and a proof
    /// verified against a neighbouring size fails.
    #[test]
    fn all_proofs_up_to_300_verify() {
        let leaves = many_leaf_hashes(300);
        let mut tree = MemoryTree::from_leaf_hashes(leaves.iter().copied());
        let roots: Vec<Hash> = (0..=300).map(|n| root_from_leaf_hashes(&leaves[..n])).collect();
        for size in 1..=300u64 {
            let root = roots[size as usize];
            for index in 0..size {
                let p = inclusion_proof(&mut tree, index, size).unwrap();
                verify_inclusion(index, size, &leaves[index as usize], &p, &root).unwrap();
                if size > 1 {
                    assert!(verify_inclusion(index, size, &leaves[(index as usize + 1) % 300], &p, &root).is_err());
                }
            }
            for old in 0..=size {
                let p = consistency_proof(&mut tree, old, size).unwrap();
                verify_consistency(old, size, &roots[old as usize], &root, &p).unwrap();
                if old > 0 && old < size {
                    assert!(verify_consistency(old, size, &roots[old as usize - 1], &root, &p).is_err());
                }
            }
        }
    }

    #[test]
    fn random_pairs_in_a_large_tree_verify() {
        let n = 5000u64;
        let leaves = many_leaf_hashes(n);
        let mut tree = MemoryTree::from_leaf_hashes(leaves.iter().copied());
        let mut rng = SplitMix(42);
        for _ in 0..500 {
            let size = 1 + rng.below(n);
            let old = rng.below(size + 1);
            let index = rng.below(size);
            let root = tree.root_at(size).unwrap();
            let old_root = tree.root_at(old).unwrap();
            let p = inclusion_proof(&mut tree, index, size).unwrap();
            verify_inclusion(index, size, &leaves[index as usize], &p, &root).unwrap();
            let c = consistency_proof(&mut tree, old, size).unwrap();
            verify_consistency(old, size, &old_root, &root, &c).unwrap();
        }
    }

    #[test]
    fn generation_rejects_bad_arguments() {
        let mut tree = test_tree();
        assert!(matches!(inclusion_proof(&mut tree, 8, 8), Err(MerkleError::IndexOutOfRange { .. })));
        assert!(matches!(consistency_proof(&mut tree, 5, 4), Err(MerkleError::SizeOutOfRange { .. })));
        // Beyond what the reader stores.
        assert!(matches!(inclusion_proof(&mut tree, 0, 9), Err(MerkleError::NoSuchSubtree { .. })));
    }
}
