//! The Static CT API (c2sp.org/static-ct-api v1.1): data tiles, the
//! `leaf_index` SCT extension, issuer paths and the RFC 6962 note signature
//! of checkpoints.
//!
//! - This module: [`TileLeaf`] and data tiles, the `leaf_index` extension,
//!   chain fingerprints, and the `RFC6962NoteSignature` (signature type 0x05).
//! - [`note`]: signed notes (c2sp.org/signed-note) and checkpoints
//!   (c2sp.org/tlog-checkpoint).
//!
//! A checkpoint's RFC 6962 signature is the log's ordinary `TreeHeadSignature`
//! ([`crate::rfc6962::TreeHead::signature_input`]): signd signs those bytes once
//! and the same signature serves `get-sth` and the checkpoint.

pub mod note;

use sha2::{Digest, Sha256};

use crate::merkle::{leaf_hash, Hash, TILE_WIDTH};
use crate::rfc6962::{DigitallySigned, LogId, Rfc6962Error, SignedEntry, TimestampedEntry, TreeHead};
use crate::tls::{LengthPrefix, Reader, TlsError, Writer};

/// `ExtensionType` of the `leaf_index` extension.
pub const LEAF_INDEX_EXTENSION: u8 = 0;

/// The largest leaf index a `uint40` holds.
pub const MAX_LEAF_INDEX: u64 = (1 << 40) - 1;

/// The note signature type of RFC 6962 `TreeHeadSignature`s.
pub const RFC6962_NOTE_SIGNATURE_TYPE: u8 = 0x05;

/// Errors from Static CT structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StaticCtError {
    /// TLS encoding or decoding failed.
    #[error("TLS encoding: {0}")]
    Tls(#[from] TlsError),
    /// An RFC 6962 structure is invalid.
    #[error(transparent)]
    Rfc6962(#[from] Rfc6962Error),
    /// The leaf index does not fit in 40 bits.
    #[error("leaf index {0} exceeds 2^40-1")]
    LeafIndexOutOfRange(u64),
    /// The extensions have no `leaf_index`.
    #[error("missing leaf_index extension")]
    MissingLeafIndex,
    /// An extension type appears twice, or `leaf_index` is not 5 bytes.
    #[error("malformed SCT extensions")]
    BadExtensions,
    /// A precertificate entry without its precertificate, or an X.509 entry with one.
    #[error("pre_certificate does not match the entry type")]
    PrecertificateMismatch,
    /// A data tile holds more than 256 entries.
    #[error("data tile has more than 256 entries")]
    TileTooLong,
}

/// The `CtExtensions` of a Static CT log's SCTs: one `leaf_index` extension
/// (8 bytes: type 0, length 5, the index as a big-endian `uint40`).
pub fn leaf_index_extensions(index: u64) -> Result<Vec<u8>, StaticCtError> {
    if index > MAX_LEAF_INDEX {
        return Err(StaticCtError::LeafIndexOutOfRange(index));
    }
    let mut w = Writer::new();
    w.u8(LEAF_INDEX_EXTENSION);
    w.nested(LengthPrefix::U16, |w| w.u40(index))?;
    Ok(w.into_vec())
}

/// The leaf index in an SCT's `CtExtensions`. Unknown extensions are ignored;
/// duplicates, a malformed `leaf_index` or none at all are errors.
pub fn parse_leaf_index(extensions: &[u8]) -> Result<u64, StaticCtError> {
    let mut r = Reader::new(extensions);
    let mut seen = [false; 256];
    let mut index = None;
    while !r.is_empty() {
        let t = r.u8()?;
        let data = r.vector(LengthPrefix::U16)?;
        if std::mem::replace(&mut seen[usize::from(t)], true) {
            return Err(StaticCtError::BadExtensions);
        }
        if t == LEAF_INDEX_EXTENSION {
            let mut d = Reader::new(data);
            let v = d.u40().map_err(|_| StaticCtError::BadExtensions)?;
            d.finish().map_err(|_| StaticCtError::BadExtensions)?;
            index = Some(v);
        }
    }
    index.ok_or(StaticCtError::MissingLeafIndex)
}

/// SHA-256 fingerprints of the issuers of a submitted chain (everything after
/// the leaf), as a [`TileLeaf`] lists them.
pub fn chain_fingerprints<C: AsRef<[u8]>>(issuers: &[C]) -> Vec<Hash> {
    issuers.iter().map(|c| Sha256::digest(c.as_ref()).into()).collect()
}

/// The path of an issuer certificate: `issuer/<lowercase hex fingerprint>`.
pub fn issuer_path(fingerprint: &Hash) -> String {
    let mut s = String::with_capacity(7 + 64);
    s.push_str("issuer/");
    for b in fingerprint {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// One entry of a data tile (`TileLeaf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileLeaf {
    /// The entry, as in the `MerkleTreeLeaf`; its extensions hold the leaf index.
    pub entry: TimestampedEntry,
    /// The submitted precertificate (for `precert_entry` only).
    pub pre_certificate: Option<Vec<u8>>,
    /// SHA-256 of each issuer in the submitted chain.
    pub chain_fingerprints: Vec<Hash>,
}

impl TileLeaf {
    /// Appends the TLS encoding.
    pub fn encode(&self, w: &mut Writer) -> Result<(), StaticCtError> {
        match (&self.entry.entry, &self.pre_certificate) {
            (SignedEntry::X509(_), None) | (SignedEntry::Precert { .. }, Some(_)) => {}
            _ => return Err(StaticCtError::PrecertificateMismatch),
        }
        self.entry.encode(w)?;
        if let Some(pre) = &self.pre_certificate {
            w.vector(LengthPrefix::U24, pre)?;
        }
        w.nested(LengthPrefix::U16, |w| {
            for f in &self.chain_fingerprints {
                w.bytes(f);
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Reads one entry.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, StaticCtError> {
        let entry = TimestampedEntry::decode(r)?;
        let pre_certificate = match entry.entry {
            SignedEntry::X509(_) => None,
            SignedEntry::Precert { .. } => Some(r.vector_min(LengthPrefix::U24, 1)?.to_vec()),
        };
        let mut f = r.nested(LengthPrefix::U16)?;
        let mut chain_fingerprints = Vec::new();
        while !f.is_empty() {
            chain_fingerprints.push(f.array()?);
        }
        Ok(Self { entry, pre_certificate, chain_fingerprints })
    }

    /// The leaf index in the entry's extensions.
    pub fn leaf_index(&self) -> Result<u64, StaticCtError> {
        parse_leaf_index(&self.entry.extensions)
    }

    /// The Merkle leaf hash: that of the entry's `MerkleTreeLeaf`.
    pub fn leaf_hash(&self) -> Result<Hash, StaticCtError> {
        Ok(leaf_hash(&self.entry.merkle_tree_leaf()?))
    }
}

/// A data tile: the entries concatenated.
pub fn encode_data_tile(leaves: &[TileLeaf]) -> Result<Vec<u8>, StaticCtError> {
    if leaves.len() > usize::from(TILE_WIDTH) {
        return Err(StaticCtError::TileTooLong);
    }
    let mut w = Writer::new();
    for l in leaves {
        l.encode(&mut w)?;
    }
    Ok(w.into_vec())
}

/// The entries of a data tile (at most 256).
pub fn decode_data_tile(tile: &[u8]) -> Result<Vec<TileLeaf>, StaticCtError> {
    let mut r = Reader::new(tile);
    let mut out = Vec::new();
    while !r.is_empty() {
        if out.len() == usize::from(TILE_WIDTH) {
            return Err(StaticCtError::TileTooLong);
        }
        out.push(TileLeaf::decode(&mut r)?);
    }
    Ok(out)
}

/// The key ID of a log's RFC 6962 note signatures:
/// `SHA-256(name || 0x0A || 0x05 || log ID)[:4]`, big-endian.
pub fn rfc6962_note_key_id(name: &str, log_id: &LogId) -> u32 {
    note::key_id(name, RFC6962_NOTE_SIGNATURE_TYPE, log_id)
}

/// The body of an RFC 6962 note signature (`RFC6962NoteSignature`): the tree
/// head's timestamp and its `TreeHeadSignature`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rfc6962NoteSignature {
    /// The `TreeHeadSignature` timestamp (milliseconds).
    pub timestamp: u64,
    /// The signature over [`TreeHead::signature_input`].
    pub signature: DigitallySigned,
}

impl Rfc6962NoteSignature {
    /// `timestamp (8 bytes) || DigitallySigned`.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TlsError> {
        let mut w = Writer::new();
        w.u64(self.timestamp);
        self.signature.encode(&mut w)?;
        Ok(w.into_vec())
    }

    /// Parses the signature body (without the 4-byte key ID).
    pub fn from_bytes(b: &[u8]) -> Result<Self, StaticCtError> {
        let mut r = Reader::new(b);
        let timestamp = r.u64()?;
        let signature = DigitallySigned::decode(&mut r)?;
        r.finish()?;
        Ok(Self { timestamp, signature })
    }
}

/// A signed checkpoint: the note text of `head` under `origin`, and the
/// signature line `— <origin> base64(key ID || timestamp || signature)`.
///
/// `signature` is the log's signature over `head.signature_input()`.
pub fn signed_checkpoint(
    origin: &str,
    log_id: &LogId,
    head: &TreeHead,
    signature: &DigitallySigned,
) -> Result<String, note::NoteError> {
    let checkpoint = note::Checkpoint { origin: origin.to_string(), size: head.tree_size, root_hash: head.root_hash };
    let body = Rfc6962NoteSignature { timestamp: head.timestamp, signature: signature.clone() }
        .to_bytes()
        .map_err(|_| note::NoteError::Malformed("signature too long"))?;
    let sig =
        note::NoteSignature { name: origin.to_string(), key_id: rfc6962_note_key_id(origin, log_id), signature: body };
    let signed = note::SignedNote { text: checkpoint.text()?, signatures: vec![sig] };
    signed.to_text()
}

#[cfg(test)]
mod tests;
