//! The JSON of the RFC 6962 HTTP API (§4) and the `extra_data` of `get-entries`.
//!
//! [`parse_add_chain`] reads an `add-chain` / `add-pre-chain` body
//! (`{"chain": [base64 DER, ...]}`) under size limits and returns typed errors;
//! the response types serialise with serde as the RFC spells them.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{DigitallySigned, Rfc6962Error, Sct, TreeHead, MAX_CERT_LEN};
use crate::merkle::Hash;
use crate::tls::{LengthPrefix, TlsError, Writer};

/// Default bound on an `add-chain` body: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// Default bound on the number of certificates in a submitted chain.
pub const DEFAULT_MAX_CHAIN: usize = 10;

/// Limits on `add-chain` / `add-pre-chain` bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddChainLimits {
    /// Largest body accepted, in bytes.
    pub max_body: usize,
    /// Most certificates accepted in one chain.
    pub max_certificates: usize,
}

impl Default for AddChainLimits {
    fn default() -> Self {
        Self { max_body: DEFAULT_MAX_BODY, max_certificates: DEFAULT_MAX_CHAIN }
    }
}

/// Errors from API bodies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The body is larger than the limit.
    #[error("body of {len} bytes exceeds {max}")]
    BodyTooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body is not the expected JSON.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// The chain is empty.
    #[error("empty chain")]
    EmptyChain,
    /// The chain has more certificates than the limit.
    #[error("chain of {len} certificates exceeds {max}")]
    ChainTooLong {
        /// Number of certificates.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A chain element is not standard base64, or is empty or too long.
    #[error("chain element {0} is not a base64 certificate")]
    BadCertificate(usize),
    /// A base64 field of a response does not decode.
    #[error("field {0} is not valid base64 of the right length")]
    BadField(&'static str),
    /// A decoded structure is invalid.
    #[error(transparent)]
    Structure(#[from] Rfc6962Error),
}

#[derive(Deserialize)]
struct AddChainBody {
    chain: Vec<String>,
}

/// The DER certificates of an `add-chain` or `add-pre-chain` body, leaf first.
///
/// Unknown JSON fields are ignored (RFC 6962 defines only `chain`).
pub fn parse_add_chain(body: &[u8], limits: &AddChainLimits) -> Result<Vec<Vec<u8>>, ApiError> {
    if body.len() > limits.max_body {
        return Err(ApiError::BodyTooLarge { len: body.len(), max: limits.max_body });
    }
    let parsed: AddChainBody = serde_json::from_slice(body).map_err(|e| ApiError::Json(e.to_string()))?;
    if parsed.chain.is_empty() {
        return Err(ApiError::EmptyChain);
    }
    if parsed.chain.len() > limits.max_certificates {
        return Err(ApiError::ChainTooLong { len: parsed.chain.len(), max: limits.max_certificates });
    }
    parsed
        .chain
        .iter()
        .enumerate()
        .map(|(i, c)| match B64.decode(c) {
            Ok(der) if !der.is_empty() && der.len() <= MAX_CERT_LEN => Ok(der),
            _ => Err(ApiError::BadCertificate(i)),
        })
        .collect()
}

/// The body of an `add-chain` request (for clients and tests).
pub fn add_chain_body<C: AsRef<[u8]>>(chain: &[C]) -> String {
    let chain: Vec<String> = chain.iter().map(|c| B64.encode(c.as_ref())).collect();
    serde_json::json!({ "chain": chain }).to_string()
}

/// The response to `add-chain` / `add-pre-chain`: an SCT in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddChainResponse {
    /// SCT version (0 for v1).
    pub sct_version: u8,
    /// Base64 log ID.
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Base64 `CtExtensions`.
    pub extensions: String,
    /// Base64 TLS-encoded `DigitallySigned`.
    pub signature: String,
}

impl AddChainResponse {
    /// The JSON form of an SCT.
    pub fn from_sct(sct: &Sct) -> Result<Self, TlsError> {
        Ok(Self {
            sct_version: 0,
            id: B64.encode(sct.log_id),
            timestamp: sct.timestamp,
            extensions: B64.encode(&sct.extensions),
            signature: B64.encode(sct.signature.to_bytes()?),
        })
    }

    /// The SCT of a JSON response.
    pub fn to_sct(&self) -> Result<Sct, ApiError> {
        if self.sct_version != 0 {
            return Err(Rfc6962Error::Unsupported { field: "sct_version", value: u64::from(self.sct_version) }.into());
        }
        let log_id = B64.decode(&self.id).ok().and_then(|v| v.try_into().ok()).ok_or(ApiError::BadField("id"))?;
        let extensions = B64.decode(&self.extensions).map_err(|_| ApiError::BadField("extensions"))?;
        let sig = B64.decode(&self.signature).map_err(|_| ApiError::BadField("signature"))?;
        Ok(Sct { log_id, timestamp: self.timestamp, extensions, signature: DigitallySigned::from_bytes(&sig)? })
    }
}

/// The response to `get-sth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetSthResponse {
    /// Number of leaves.
    pub tree_size: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Base64 root hash.
    pub sha256_root_hash: String,
    /// Base64 TLS-encoded `DigitallySigned` over the tree head.
    pub tree_head_signature: String,
}

impl GetSthResponse {
    /// The JSON of a signed tree head.
    pub fn new(head: &TreeHead, signature: &DigitallySigned) -> Result<Self, TlsError> {
        Ok(Self {
            tree_size: head.tree_size,
            timestamp: head.timestamp,
            sha256_root_hash: B64.encode(head.root_hash),
            tree_head_signature: B64.encode(signature.to_bytes()?),
        })
    }

    /// The tree head and signature of a response.
    pub fn tree_head(&self) -> Result<(TreeHead, DigitallySigned), ApiError> {
        let root_hash = decode_hash(&self.sha256_root_hash).ok_or(ApiError::BadField("sha256_root_hash"))?;
        let sig = B64.decode(&self.tree_head_signature).map_err(|_| ApiError::BadField("tree_head_signature"))?;
        Ok((
            TreeHead { timestamp: self.timestamp, tree_size: self.tree_size, root_hash },
            DigitallySigned::from_bytes(&sig)?,
        ))
    }
}

/// The response to `get-sth-consistency`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetSthConsistencyResponse {
    /// Base64 proof hashes.
    pub consistency: Vec<String>,
}

/// The response to `get-proof-by-hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetProofByHashResponse {
    /// Index of the leaf.
    pub leaf_index: u64,
    /// Base64 proof hashes.
    pub audit_path: Vec<String>,
}

/// One entry of `get-entries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafEntry {
    /// Base64 `MerkleTreeLeaf`.
    pub leaf_input: String,
    /// Base64 chain data ([`x509_extra_data`] or [`precert_extra_data`]).
    pub extra_data: String,
}

/// The response to `get-entries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetEntriesResponse {
    /// The entries, in order.
    pub entries: Vec<LeafEntry>,
}

/// The response to `get-entry-and-proof`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetEntryAndProofResponse {
    /// Base64 `MerkleTreeLeaf`.
    pub leaf_input: String,
    /// Base64 chain data.
    pub extra_data: String,
    /// Base64 proof hashes.
    pub audit_path: Vec<String>,
}

/// The response to `get-roots`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetRootsResponse {
    /// Base64 DER root certificates.
    pub certificates: Vec<String>,
}

/// Base64 of each hash, as proofs appear in JSON.
pub fn hashes_to_base64(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(|h| B64.encode(h)).collect()
}

/// The hashes of a JSON proof.
pub fn hashes_from_base64(hashes: &[String]) -> Result<Vec<Hash>, ApiError> {
    hashes.iter().map(|h| decode_hash(h).ok_or(ApiError::BadField("hash"))).collect()
}

/// Base64 (standard, padded) as the API uses it.
pub fn base64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

fn decode_hash(s: &str) -> Option<Hash> {
    B64.decode(s).ok()?.try_into().ok()
}

/// `extra_data` of an `x509_entry`: the issuers, `ASN.1Cert certificate_chain<0..2^24-1>`.
pub fn x509_extra_data<C: AsRef<[u8]>>(issuers: &[C]) -> Result<Vec<u8>, TlsError> {
    let mut w = Writer::new();
    cert_list(&mut w, issuers)?;
    Ok(w.into_vec())
}

/// `extra_data` of a `precert_entry`: `PrecertChainEntry`, the precertificate
/// then its issuers.
pub fn precert_extra_data<C: AsRef<[u8]>>(pre_certificate: &[u8], issuers: &[C]) -> Result<Vec<u8>, TlsError> {
    let mut w = Writer::new();
    w.vector(LengthPrefix::U24, pre_certificate)?;
    cert_list(&mut w, issuers)?;
    Ok(w.into_vec())
}

fn cert_list<C: AsRef<[u8]>>(w: &mut Writer, certs: &[C]) -> Result<(), TlsError> {
    w.nested(LengthPrefix::U24, |w| {
        for c in certs {
            w.vector(LengthPrefix::U24, c.as_ref())?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdata::*;
    use super::*;

    #[test]
    fn add_chain_bodies() {
        let limits = AddChainLimits::default();
        let body = add_chain_body(&[vec![1u8, 2, 3], vec![4]]);
        assert_eq!(body, r#"{"chain":["AQID","BA=="]}"#);
        assert_eq!(parse_add_chain(body.as_bytes(), &limits).unwrap(), vec![vec![1, 2, 3], vec![4]]);
        let extra = br#"{"chain":["AQID"],"other":1}"#;
        assert_eq!(parse_add_chain(extra, &limits).unwrap(), vec![vec![1, 2, 3]]);
    }

    #[test]
    fn bad_add_chain_bodies() {
        let limits = AddChainLimits { max_body: 200, max_certificates: 2 };
        let cases: Vec<(&[u8], ApiError)> = vec![
            (br#"{"chain":[]}"#, ApiError::EmptyChain),
            (br#"{"chain":["AQID","AQID","AQID"]}"#, ApiError::ChainTooLong { len: 3, max: 2 }),
            (br#"{"chain":["AQID","not base64!"]}"#, ApiError::BadCertificate(1)),
            (br#"{"chain":[""]}"#, ApiError::BadCertificate(0)),
            (br#"{"chain":["AQI"]}"#, ApiError::BadCertificate(0)),
        ];
        for (body, want) in cases {
            assert_eq!(parse_add_chain(body, &limits), Err(want));
        }
        for body in [&b""[..], b"{}", b"[]", b"{\"chain\":\"AQID\"}", b"{\"chain\":[1]}", b"\xff"] {
            assert!(matches!(parse_add_chain(body, &limits), Err(ApiError::Json(_))));
        }
        let big = vec![b' '; 201];
        assert_eq!(parse_add_chain(&big, &limits), Err(ApiError::BodyTooLarge { len: 201, max: 200 }));
    }

    #[test]
    fn sct_json_round_trips() {
        let sct = Sct::from_bytes(&unhex(TEST_CERT_SCT)).unwrap();
        let json = AddChainResponse::from_sct(&sct).unwrap();
        assert_eq!(json.id, "3xwuwRUAlFJHqWFoMl3cXHlZ6PfG04j8AC4LvT9012Q=");
        assert_eq!(json.extensions, "");
        let text = serde_json::to_string(&json).unwrap();
        let back: AddChainResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_sct().unwrap(), sct);
        let bad = AddChainResponse { id: "AAAA".into(), ..json };
        assert_eq!(bad.to_sct(), Err(ApiError::BadField("id")));
    }

    #[test]
    fn sth_json_round_trips() {
        let head = TreeHead {
            timestamp: STH_TIMESTAMP,
            tree_size: STH_TREE_SIZE,
            root_hash: unhex(STH_ROOT).try_into().unwrap(),
        };
        let sig = DigitallySigned::from_bytes(&unhex(STH_SIGNATURE)).unwrap();
        let json = GetSthResponse::new(&head, &sig).unwrap();
        assert_eq!(json.tree_head().unwrap(), (head, sig));
    }

    #[test]
    fn extra_data_layout() {
        assert_eq!(hex::encode(x509_extra_data(&[vec![0xaa], vec![0xbb, 0xcc]]).unwrap()), "000009000001aa000002bbcc");
        assert_eq!(hex::encode(x509_extra_data::<Vec<u8>>(&[]).unwrap()), "000000");
        assert_eq!(hex::encode(precert_extra_data(&[0x11], &[vec![0xaa]]).unwrap()), "00000111000004000001aa");
    }

    #[test]
    fn proof_hashes_round_trip() {
        let hashes = vec![[1u8; 32], [2u8; 32]];
        assert_eq!(hashes_from_base64(&hashes_to_base64(&hashes)).unwrap(), hashes);
        assert!(hashes_from_base64(&["AAAA".to_string()]).is_err());
    }
}
