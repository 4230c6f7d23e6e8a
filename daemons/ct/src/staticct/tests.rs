use super::*;
use crate::rfc6962::testdata::*;

#[test]
fn leaf_index_extension_is_eight_bytes() {
    assert_eq!(hex::encode(leaf_index_extensions(0).unwrap()), "0000050000000000");
    assert_eq!(hex::encode(leaf_index_extensions(0x01_0203_0405).unwrap()), "0000050102030405");
    assert_eq!(hex::encode(leaf_index_extensions(MAX_LEAF_INDEX).unwrap()), "000005ffffffffff");
    assert_eq!(leaf_index_extensions(1 << 40), Err(StaticCtError::LeafIndexOutOfRange(1 << 40)));
    for i in [0u64, 1, 255, 256, 1 << 32, MAX_LEAF_INDEX] {
        assert_eq!(parse_leaf_index(&leaf_index_extensions(i).unwrap()), Ok(i));
    }
}

#[test]
fn leaf_index_parsing_is_strict() {
    // Unknown extensions around it are ignored.
    assert_eq!(parse_leaf_index(&unhex("0700020102000005000000002a")), Ok(42));
    assert_eq!(parse_leaf_index(&[]), Err(StaticCtError::MissingLeafIndex));
    assert_eq!(parse_leaf_index(&unhex("07000100")), Err(StaticCtError::MissingLeafIndex));
    assert_eq!(parse_leaf_index(&unhex("000004000000002a")), Err(StaticCtError::BadExtensions));
    assert_eq!(parse_leaf_index(&unhex("00000600000000002a")), Err(StaticCtError::BadExtensions));
    assert_eq!(parse_leaf_index(&unhex("0000050000000001000005000000000a")), Err(StaticCtError::BadExtensions));
    assert!(parse_leaf_index(&unhex("00000500")).is_err());
}

fn x509_leaf(index: u64) -> TileLeaf {
    TileLeaf {
        entry: TimestampedEntry {
            timestamp: 1_700_000_000_000 + index,
            entry: SignedEntry::X509(unhex(TEST_CERT)),
            extensions: leaf_index_extensions(index).unwrap(),
        },
        pre_certificate: None,
        chain_fingerprints: chain_fingerprints(&[unhex(CA_CERT)]),
    }
}

fn precert_leaf(index: u64) -> TileLeaf {
    TileLeaf {
        entry: TimestampedEntry {
            timestamp: 1_700_000_000_000 + index,
            entry: SignedEntry::Precert {
                issuer_key_hash: unhex(ISSUER_KEY_HASH).try_into().unwrap(),
                tbs_certificate: unhex(TBS_CERT),
            },
            extensions: leaf_index_extensions(index).unwrap(),
        },
        pre_certificate: Some(unhex(EMBEDDED_CERT)),
        chain_fingerprints: chain_fingerprints(&[unhex(INTERMEDIATE_CERT), unhex(CA_CERT)]),
    }
}

#[test]
fn tile_leaf_layout() {
    let leaf = x509_leaf(3);
    let mut w = Writer::new();
    leaf.encode(&mut w).unwrap();
    let b = w.into_vec();
    let cert = unhex(TEST_CERT);
    // timestamp, entry type 0, certificate<u24>, extensions<u16>, fingerprints<u16>.
    let mut want = (1_700_000_000_003u64).to_be_bytes().to_vec();
    want.extend([0, 0]);
    want.extend(&(cert.len() as u32).to_be_bytes()[1..]);
    want.extend(&cert);
    want.extend(unhex("00080000050000000003"));
    want.extend([0, 32]);
    want.extend(leaf.chain_fingerprints[0]);
    assert_eq!(b, want);
    // The MerkleTreeLeaf is 0x00 0x00 then the TimestampedEntry part of it.
    let mtl = leaf.entry.merkle_tree_leaf().unwrap();
    assert_eq!(&mtl[2..], &b[..b.len() - 34]);
}

#[test]
fn data_tiles_round_trip() {
    let leaves: Vec<TileLeaf> = (0..256).map(|i| if i % 3 == 0 { precert_leaf(i) } else { x509_leaf(i) }).collect();
    let tile = encode_data_tile(&leaves).unwrap();
    let back = decode_data_tile(&tile).unwrap();
    assert_eq!(back, leaves);
    for (i, l) in back.iter().enumerate() {
        assert_eq!(l.leaf_index(), Ok(i as u64));
        assert_eq!(l.leaf_hash().unwrap(), l.entry.leaf_hash().unwrap());
    }
    // Too many entries, truncation and mismatched pre_certificate are errors.
    assert_eq!(encode_data_tile(&[leaves.clone(), vec![x509_leaf(256)]].concat()), Err(StaticCtError::TileTooLong));
    let more = [tile.clone(), encode_data_tile(&[x509_leaf(256)]).unwrap()].concat();
    assert_eq!(decode_data_tile(&more), Err(StaticCtError::TileTooLong));
    assert!(decode_data_tile(&tile[..tile.len() - 1]).is_err());
    let bad = TileLeaf { pre_certificate: None, ..precert_leaf(0) };
    assert_eq!(encode_data_tile(&[bad]), Err(StaticCtError::PrecertificateMismatch));
    let bad = TileLeaf { pre_certificate: Some(vec![1]), ..x509_leaf(0) };
    assert_eq!(encode_data_tile(&[bad]), Err(StaticCtError::PrecertificateMismatch));
    assert_eq!(decode_data_tile(&[]), Ok(vec![]));
}

#[test]
fn issuer_paths() {
    let f = chain_fingerprints(&[unhex(CA_CERT)])[0];
    let p = issuer_path(&f);
    assert_eq!(p.len(), 7 + 64);
    assert!(p.starts_with("issuer/"));
    assert_eq!(p[7..], hex::encode(f));
}

#[test]
fn rfc6962_note_signature_body() {
    let ds = DigitallySigned::from_bytes(&unhex(STH_SIGNATURE)).unwrap();
    let body = Rfc6962NoteSignature { timestamp: STH_TIMESTAMP, signature: ds.clone() };
    let b = body.to_bytes().unwrap();
    assert_eq!(&b[..8], &STH_TIMESTAMP.to_be_bytes());
    assert_eq!(b[8..], unhex(STH_SIGNATURE));
    assert_eq!(Rfc6962NoteSignature::from_bytes(&b), Ok(body));
    assert!(Rfc6962NoteSignature::from_bytes(&b[..b.len() - 1]).is_err());
    assert!(Rfc6962NoteSignature::from_bytes(&[b.clone(), vec![0]].concat()).is_err());
}

#[test]
fn signed_checkpoint_layout() {
    let log_id: LogId = unhex(LOG_ID).try_into().unwrap();
    let head =
        TreeHead { timestamp: STH_TIMESTAMP, tree_size: STH_TREE_SIZE, root_hash: unhex(STH_ROOT).try_into().unwrap() };
    let ds = DigitallySigned::from_bytes(&unhex(STH_SIGNATURE)).unwrap();
    let text = signed_checkpoint("log.example/2025", &log_id, &head, &ds).unwrap();
    let (body, sig) = text.split_once("\n\n").unwrap();
    assert_eq!(body, "log.example/2025\n21\ncmRnIWFnOXuryik9yjmOTOa2IbGLm8QvMMkA0fkqweQ=");
    let line = sig.strip_prefix("\u{2014} log.example/2025 ").unwrap().strip_suffix('\n').unwrap();
    use base64::Engine as _;
    let blob = base64::engine::general_purpose::STANDARD.decode(line).unwrap();
    let mut h = Sha256::new();
    h.update(b"log.example/2025\n\x05");
    h.update(log_id);
    assert_eq!(blob[..4], h.finalize()[..4]);
    assert_eq!(&blob[4..12], &STH_TIMESTAMP.to_be_bytes());
    assert_eq!(blob[12..], unhex(STH_SIGNATURE));
    assert!(signed_checkpoint("bad name", &log_id, &head, &ds).is_err());
}

#[cfg(feature = "openssl")]
mod verify {
    use super::*;
    use crate::rfc6962::api::GetSthResponse;
    use crate::verify::{LogKey, VerifyError};

    /// A real log's STH (from Sunlight's tests) re-encoded as a checkpoint
    /// verifies: the checkpoint signature is the STH signature.
    #[test]
    fn sth_of_a_real_log_becomes_a_checkpoint() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let key = b64
            .decode("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESYlKFDLLFmA9JScaiaNnqlU8oWDytxIYMfswHy9Esg0aiX+WnP/yj4O0ViEHtLwbmOQeSWBGkIu9YK9CLeer+g==")
            .unwrap();
        let sth: GetSthResponse = serde_json::from_str(
            r#"{"sha256_root_hash": "l+XrWXWRyp4SmATORgTfz4CcYS/VlE7CeTuWI0FAk3o=", "timestamp": 1588741228371,
                "tree_head_signature": "BAMASDBGAiEAnaHGuwnyyHWvrfgEn3qtl1j2heMzocku6ZAItYD75m8CIQCpotlpH5GEPEfMMzky72BCuIl14FB65t5SWZ91vgTQOg==",
                "tree_size": 90785920}"#,
        )
        .unwrap();
        let log = LogKey::from_spki_der(&key).unwrap();
        let (head, sig) = sth.tree_head().unwrap();
        log.verify_tree_head(&head, &sig).unwrap();
        let note = signed_checkpoint("example.com", &log.log_id(), &head, &sig).unwrap();
        let (checkpoint, got) = log.verify_checkpoint(&note, "example.com").unwrap();
        assert_eq!(got, head);
        assert_eq!(checkpoint.size, 90785920);
        // Another origin, a tampered size or a foreign key fail.
        assert!(log.verify_checkpoint(&note, "example.org").is_err());
        let tampered = note.replacen("90785920", "90785921", 1);
        assert_eq!(log.verify_checkpoint(&tampered, "example.com"), Err(VerifyError::BadSignature));
        let other = LogKey::from_spki_der(&unhex(LOG_KEY_SPKI)).unwrap();
        assert!(matches!(other.verify_checkpoint(&note, "example.com"), Err(VerifyError::Checkpoint(_))));
    }

    /// Extra signatures by unknown keys are ignored.
    #[test]
    fn unknown_signatures_are_ignored() {
        let log = LogKey::from_spki_der(&unhex(LOG_KEY_SPKI)).unwrap();
        let head = TreeHead {
            timestamp: STH_TIMESTAMP,
            tree_size: STH_TREE_SIZE,
            root_hash: unhex(STH_ROOT).try_into().unwrap(),
        };
        let ds = DigitallySigned::from_bytes(&unhex(STH_SIGNATURE)).unwrap();
        let note = signed_checkpoint("origin.example", &log.log_id(), &head, &ds).unwrap();
        let witness = note::NoteSignature { name: "witness.example".into(), key_id: 7, signature: vec![1; 64] };
        let with_witness = format!("{note}{}", witness.line().unwrap());
        assert_eq!(log.verify_checkpoint(&with_witness, "origin.example").unwrap().1, head);
    }
}
