//! Fuzz entry points: arbitrary bytes through every parser ctlogd exposes to
//! the network. Each function must return for any input; where a parse
//! succeeds it checks that encoding the result gives the input back (so a
//! panic here is a bug the fuzzer found, not an input error).

use crate::merkle::parse_tile_path;
use crate::rfc6962::api::{parse_add_chain, AddChainLimits};
use crate::rfc6962::{decode_sct_list, encode_sct_list, precert, Sct, TimestampedEntry};
use crate::staticct::note::{Checkpoint, SignedNote};
use crate::staticct::{decode_data_tile, encode_data_tile};

/// A tile path from a request URL: parses strictly and formats back identically.
pub fn fuzz_tile_path(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else { return };
    if let Ok(parsed) = parse_tile_path(path) {
        assert_eq!(parsed.to_string(), path, "tile path does not round-trip");
    }
}

/// An `add-chain` / `add-pre-chain` body, then the log entry of its chain.
pub fn fuzz_add_chain_body(data: &[u8]) {
    let Ok(chain) = parse_add_chain(data, &AddChainLimits::default()) else { return };
    assert!(!chain.is_empty());
    let _ = precert::precert_entry(&chain);
    let _ = precert::issuer_key_hash(&chain[0]);
    let _ = precert::is_precertificate(&chain[0]);
}

/// DER certificates: everything the log derives from a submitted certificate.
pub fn fuzz_certificate(data: &[u8]) {
    let _ = precert::tbs_certificate(data);
    let _ = precert::is_precert_signing_certificate(data);
    let _ = precert::embedded_sct_entry(data, data);
    let _ = precert::precert_entry(&[data, data, data]);
}

/// TLS structures: an SCT, an SCT list, a `MerkleTreeLeaf`; each round-trips.
pub fn fuzz_tls(data: &[u8]) {
    if let Ok(sct) = Sct::from_bytes(data) {
        assert_eq!(sct.to_bytes().ok().as_deref(), Some(data), "SCT does not round-trip");
    }
    if let Ok(list) = decode_sct_list(data) {
        assert_eq!(encode_sct_list(&list).ok().as_deref(), Some(data), "SCT list does not round-trip");
    }
    if let Ok(entry) = TimestampedEntry::from_merkle_tree_leaf(data) {
        assert_eq!(entry.merkle_tree_leaf().ok().as_deref(), Some(data), "leaf does not round-trip");
    }
}

/// A data tile: parses and re-encodes identically.
pub fn fuzz_data_tile(data: &[u8]) {
    if let Ok(leaves) = decode_data_tile(data) {
        assert_eq!(encode_data_tile(&leaves).ok().as_deref(), Some(data), "data tile does not round-trip");
    }
}

/// A signed note and its checkpoint body.
pub fn fuzz_note(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(note) = SignedNote::parse(text) {
        assert_eq!(note.to_text().ok().as_deref(), Some(text), "note does not round-trip");
        if let Ok(c) = Checkpoint::parse(&note.text) {
            assert_eq!(c.text().ok().as_deref(), Some(note.text.as_str()), "checkpoint does not round-trip");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::testvectors::SplitMix;
    use crate::rfc6962::testdata::*;

    /// Seeds and random mutations of them through every entry point.
    #[test]
    fn entry_points_survive_mutated_inputs() {
        let seeds: Vec<Vec<u8>> = vec![
            b"tile/0/x001/x234/067.p/89".to_vec(),
            b"tile/data/000".to_vec(),
            crate::rfc6962::api::add_chain_body(&[unhex(EMBEDDED_CERT), unhex(CA_CERT)]).into_bytes(),
            unhex(EMBEDDED_CERT),
            unhex(TEST_CERT_SCT),
            "o\n1\ncmRnIWFnOXuryik9yjmOTOa2IbGLm8QvMMkA0fkqweQ=\n\n\u{2014} o AAAAAAA=\n".as_bytes().to_vec(),
        ];
        let mut rng = SplitMix(99);
        for seed in &seeds {
            for round in 0..400 {
                let mut d = seed.clone();
                for _ in 0..=(round % 4) {
                    if d.is_empty() {
                        break;
                    }
                    let i = rng.below(d.len() as u64) as usize;
                    match rng.below(3) {
                        0 => d[i] = rng.next() as u8,
                        1 => d.truncate(i),
                        _ => d.insert(i, rng.next() as u8),
                    }
                }
                fuzz_tile_path(&d);
                fuzz_add_chain_body(&d);
                fuzz_certificate(&d);
                fuzz_tls(&d);
                fuzz_data_tile(&d);
                fuzz_note(&d);
            }
        }
    }
}
