//! Certificate Transparency for the `ct-load` generator: what it checks in
//! a log's answers, written here from the specifications rather than taken
//! from signet-ct, so that the generator is a second opinion on ctlogd.
//!
//! - [`Sct`]: an `add-chain` or `add-pre-chain` answer (RFC 6962 §4.1–4.2),
//!   its static-ct-api `leaf_index` extension ([`leaf_index`]) and its
//!   signature ([`LogKey::verify_sct`], [`LogKey::verify_precert_sct`], over
//!   the inputs of RFC 6962 §3.2);
//! - [`checkpoint_size`]: the tree size of a checkpoint (tlog-checkpoint) or
//!   of a `get-sth` answer ([`sth_size`]);
//! - [`hash_tile_path`], [`data_tile_path`]: tlog-tiles paths of full tiles.
//!
//! [`pki`] makes the synthetic chains the generator submits; [`client`] is
//! its HTTP side.

pub mod client;
pub mod pki;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Public};
use openssl::sha::sha256;
use openssl::sign::Verifier;
use serde::Deserialize;

/// Entries in a full tile (tlog-tiles).
pub const TILE_WIDTH: u64 = 256;

/// The size of a full level-0 hash tile: 256 SHA-256 hashes.
pub const HASH_TILE_BYTES: usize = 256 * 32;

/// Why a log's answer was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CtError {
    /// The `add-chain` answer is not the JSON of an SCT.
    #[error("SCT JSON: {0}")]
    Json(String),
    /// A field is not what RFC 6962 allows.
    #[error("SCT: {0}")]
    Malformed(&'static str),
    /// The SCT carries no `leaf_index` extension.
    #[error("SCT has no leaf_index extension")]
    NoLeafIndex,
    /// The SCT names another log.
    #[error("SCT log ID is not the log's")]
    WrongLogId,
    /// The signature does not verify under the log's key.
    #[error("SCT signature does not verify")]
    BadSignature,
    /// A checkpoint or `get-sth` answer that does not parse.
    #[error("tree head: {0}")]
    TreeHead(&'static str),
    /// The log's public key is unusable.
    #[error("log key: {0}")]
    Key(String),
}

/// An SCT as `add-chain` returns it (RFC 6962 §4.1), decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sct {
    /// The log ID: SHA-256 of the log's DER public key.
    pub log_id: [u8; 32],
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// The `CtExtensions` bytes.
    pub extensions: Vec<u8>,
    /// The `DigitallySigned` structure (hash, signature algorithm, signature).
    pub signature: Vec<u8>,
}

#[derive(Deserialize)]
struct SctJson {
    sct_version: u8,
    id: String,
    timestamp: u64,
    extensions: String,
    signature: String,
}

impl Sct {
    /// Decodes an `add-chain` answer body.
    pub fn from_json(body: &[u8]) -> Result<Self, CtError> {
        let j: SctJson = serde_json::from_slice(body).map_err(|e| CtError::Json(e.to_string()))?;
        if j.sct_version != 0 {
            return Err(CtError::Malformed("sct_version is not v1 (0)"));
        }
        let b64 = |s: &str, what| STANDARD.decode(s).map_err(|_| CtError::Malformed(what));
        let log_id =
            b64(&j.id, "id is not base64")?.try_into().map_err(|_| CtError::Malformed("id is not 32 bytes"))?;
        Ok(Self {
            log_id,
            timestamp: j.timestamp,
            extensions: b64(&j.extensions, "extensions are not base64")?,
            signature: b64(&j.signature, "signature is not base64")?,
        })
    }

    /// The entry's index from the static-ct-api `leaf_index` extension.
    pub fn leaf_index(&self) -> Result<u64, CtError> {
        leaf_index(&self.extensions)
    }
}

/// The `leaf_index` of static-ct-api's `CtExtensions`: a list of
/// `Extension { u8 type; opaque data<0..2^16-1> }` in which the one of type
/// 0 holds a 40-bit big-endian index. Other extensions are skipped.
pub fn leaf_index(mut extensions: &[u8]) -> Result<u64, CtError> {
    while !extensions.is_empty() {
        let [kind, hi, lo, rest @ ..] = extensions else {
            return Err(CtError::Malformed("truncated extension header"));
        };
        let len = usize::from(u16::from_be_bytes([*hi, *lo]));
        let data = rest.get(..len).ok_or(CtError::Malformed("truncated extension"))?;
        if *kind == 0 {
            if len != 5 {
                return Err(CtError::Malformed("leaf_index extension is not 5 bytes"));
            }
            return Ok(data.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b)));
        }
        extensions = &rest[len..];
    }
    Err(CtError::NoLeafIndex)
}

/// What an SCT for an `x509_entry` signs (RFC 6962 §3.2): version v1,
/// signature type `certificate_timestamp`, the timestamp, entry type
/// `x509_entry`, the certificate (24-bit length) and the extensions (16-bit
/// length).
pub fn sct_signed_input(cert_der: &[u8], timestamp: u64, extensions: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(cert_der.len() + extensions.len() + 17);
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&timestamp.to_be_bytes());
    v.extend_from_slice(&0u16.to_be_bytes());
    v.extend_from_slice(&(cert_der.len() as u32).to_be_bytes()[1..]);
    v.extend_from_slice(cert_der);
    v.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    v.extend_from_slice(extensions);
    v
}

/// What an SCT for a `precert_entry` signs (RFC 6962 §3.2): as
/// [`sct_signed_input`] but entry type `precert_entry`, then the issuer key
/// hash (32 bytes) and the final certificate's TBS (24-bit length).
pub fn precert_sct_signed_input(
    issuer_key_hash: &[u8; 32],
    tbs_der: &[u8],
    timestamp: u64,
    extensions: &[u8],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(tbs_der.len() + extensions.len() + 49);
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&timestamp.to_be_bytes());
    v.extend_from_slice(&1u16.to_be_bytes());
    v.extend_from_slice(issuer_key_hash);
    v.extend_from_slice(&(tbs_der.len() as u32).to_be_bytes()[1..]);
    v.extend_from_slice(tbs_der);
    v.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    v.extend_from_slice(extensions);
    v
}

/// A log's ECDSA P-256 public key and ID.
#[derive(Clone)]
pub struct LogKey {
    key: PKey<Public>,
    id: [u8; 32],
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey").field("id", &STANDARD.encode(self.id)).finish()
    }
}

impl LogKey {
    /// From the DER `SubjectPublicKeyInfo`.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, CtError> {
        let key = PKey::public_key_from_der(der).map_err(|e| CtError::Key(e.to_string()))?;
        Ok(Self { key, id: sha256(der) })
    }

    /// From the base64 of the DER `SubjectPublicKeyInfo`.
    pub fn from_base64(b64: &str) -> Result<Self, CtError> {
        Self::from_spki_der(&STANDARD.decode(b64.trim()).map_err(|e| CtError::Key(e.to_string()))?)
    }

    /// From a log list entry (`log.v3.json`): its `key` field.
    pub fn from_log_json(body: &[u8]) -> Result<Self, CtError> {
        #[derive(Deserialize)]
        struct Entry {
            key: String,
        }
        let e: Entry = serde_json::from_slice(body).map_err(|e| CtError::Key(e.to_string()))?;
        Self::from_base64(&e.key)
    }

    /// The log ID.
    pub fn id(&self) -> [u8; 32] {
        self.id
    }

    /// Checks that `sct` is this log's and that its signature over the
    /// `x509_entry` of `cert_der` verifies (ECDSA with SHA-256).
    pub fn verify_sct(&self, sct: &Sct, cert_der: &[u8]) -> Result<(), CtError> {
        self.verify_sct_input(sct, &sct_signed_input(cert_der, sct.timestamp, &sct.extensions))
    }

    /// Checks that `sct` is this log's and that its signature over the
    /// `precert_entry` of (`issuer_key_hash`, `tbs_der`) verifies.
    pub fn verify_precert_sct(&self, sct: &Sct, issuer_key_hash: &[u8; 32], tbs_der: &[u8]) -> Result<(), CtError> {
        self.verify_sct_input(sct, &precert_sct_signed_input(issuer_key_hash, tbs_der, sct.timestamp, &sct.extensions))
    }

    fn verify_sct_input(&self, sct: &Sct, input: &[u8]) -> Result<(), CtError> {
        if sct.log_id != self.id {
            return Err(CtError::WrongLogId);
        }
        // DigitallySigned: hash sha256 (4), signature ecdsa (3), signature<0..2^16-1>.
        let [4, 3, hi, lo, sig @ ..] = sct.signature.as_slice() else {
            return Err(CtError::Malformed("signature is not ECDSA with SHA-256"));
        };
        if sig.len() != usize::from(u16::from_be_bytes([*hi, *lo])) {
            return Err(CtError::Malformed("signature length"));
        }
        let ok = Verifier::new(MessageDigest::sha256(), &self.key)
            .and_then(|mut v| v.verify_oneshot(sig, input))
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(CtError::BadSignature)
        }
    }
}

/// The tree size of a checkpoint: its second line (tlog-checkpoint: origin,
/// decimal size, base64 root hash, then the note's signatures).
pub fn checkpoint_size(text: &[u8]) -> Result<u64, CtError> {
    let text = std::str::from_utf8(text).map_err(|_| CtError::TreeHead("checkpoint is not UTF-8"))?;
    let line = text.split('\n').nth(1).ok_or(CtError::TreeHead("checkpoint has no size line"))?;
    if line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) || (line.len() > 1 && line.starts_with('0')) {
        return Err(CtError::TreeHead("checkpoint size is not a decimal number"));
    }
    line.parse().map_err(|_| CtError::TreeHead("checkpoint size out of range"))
}

/// The `tree_size` of a `get-sth` answer (RFC 6962 §4.3).
pub fn sth_size(body: &[u8]) -> Result<u64, CtError> {
    #[derive(Deserialize)]
    struct Sth {
        tree_size: u64,
    }
    serde_json::from_slice::<Sth>(body).map(|s| s.tree_size).map_err(|_| CtError::TreeHead("get-sth is not JSON"))
}

/// tlog-tiles' encoding of a tile index: three-digit groups, all but the
/// last prefixed with `x` (1234067 → `x001/x234/067`).
pub fn index_path(mut n: u64) -> String {
    let mut groups = vec![format!("{:03}", n % 1000)];
    n /= 1000;
    while n > 0 {
        groups.push(format!("x{:03}", n % 1000));
        n /= 1000;
    }
    groups.reverse();
    groups.join("/")
}

/// The path of full hash tile `index` at `level`.
pub fn hash_tile_path(level: u8, index: u64) -> String {
    format!("tile/{level}/{}", index_path(index))
}

/// The path of full data tile `index` (static-ct-api).
pub fn data_tile_path(index: u64) -> String {
    format!("tile/data/{}", index_path(index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::nid::Nid;
    use openssl::pkey::Private;
    use openssl::sign::Signer;

    #[test]
    fn leaf_index_extension() {
        assert_eq!(leaf_index(&[0, 0, 5, 0, 0, 0, 1, 2]), Ok(258));
        assert_eq!(leaf_index(&[0, 0, 5, 0xff, 0, 0, 0, 0]), Ok(0xff_0000_0000));
        // Another extension first is skipped.
        assert_eq!(leaf_index(&[7, 0, 2, 9, 9, 0, 0, 5, 0, 0, 0, 0, 3]), Ok(3));
        assert_eq!(leaf_index(&[]), Err(CtError::NoLeafIndex));
        assert_eq!(leaf_index(&[7, 0, 1, 9]), Err(CtError::NoLeafIndex));
        assert!(matches!(leaf_index(&[0, 0, 4, 0, 0, 0, 1]), Err(CtError::Malformed(_))));
        assert!(matches!(leaf_index(&[0, 0, 5, 0, 0]), Err(CtError::Malformed(_))));
        assert!(matches!(leaf_index(&[0, 0]), Err(CtError::Malformed(_))));
    }

    #[test]
    fn tile_paths() {
        assert_eq!(index_path(0), "000");
        assert_eq!(index_path(999), "999");
        assert_eq!(index_path(1000), "x001/000");
        assert_eq!(index_path(1_234_067), "x001/x234/067");
        assert_eq!(hash_tile_path(0, 5), "tile/0/005");
        assert_eq!(data_tile_path(1234), "tile/data/x001/234");
    }

    #[test]
    fn tree_sizes() {
        assert_eq!(checkpoint_size(b"example.com/log\n1234\nAAAA=\n\n\xe2\x80\x94 sig\n"), Ok(1234));
        assert_eq!(checkpoint_size(b"o\n0\nh\n"), Ok(0));
        assert!(checkpoint_size(b"o\n012\nh\n").is_err());
        assert!(checkpoint_size(b"o\n-1\nh\n").is_err());
        assert!(checkpoint_size(b"o").is_err());
        assert_eq!(sth_size(br#"{"tree_size":42,"timestamp":1}"#), Ok(42));
        assert!(sth_size(b"{}").is_err());
    }

    fn new_key() -> (PKey<Private>, Vec<u8>) {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        let spki = key.public_key_to_der().unwrap();
        (key, spki)
    }

    /// An SCT as a log would answer, signed by `key`.
    fn answer(key: &PKey<Private>, spki: &[u8], cert: &[u8], index: u64) -> Vec<u8> {
        let ext = [&[0u8, 0, 5][..], &index.to_be_bytes()[3..]].concat();
        let input = sct_signed_input(cert, 1_700_000_000_000, &ext);
        let sig = Signer::new(MessageDigest::sha256(), key).unwrap().sign_oneshot_to_vec(&input).unwrap();
        let ds = [&[4u8, 3][..], &(sig.len() as u16).to_be_bytes(), &sig].concat();
        serde_json::json!({
            "sct_version": 0,
            "id": STANDARD.encode(sha256(spki)),
            "timestamp": 1_700_000_000_000u64,
            "extensions": STANDARD.encode(ext),
            "signature": STANDARD.encode(ds),
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn precert_sct_input_layout() {
        let input = precert_sct_signed_input(&[7; 32], &[1, 2, 3], 0x0102, &[9]);
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 1];
        want.extend_from_slice(&[7; 32]);
        want.extend_from_slice(&[0, 0, 3, 1, 2, 3, 0, 1, 9]);
        assert_eq!(input, want);
        let (key, spki) = new_key();
        let log = LogKey::from_spki_der(&spki).unwrap();
        let ext = [0u8, 0, 5, 0, 0, 0, 0, 4];
        let sig = Signer::new(MessageDigest::sha256(), &key)
            .unwrap()
            .sign_oneshot_to_vec(&precert_sct_signed_input(&[7; 32], b"tbs", 5, &ext))
            .unwrap();
        let sct = Sct {
            log_id: sha256(&spki),
            timestamp: 5,
            extensions: ext.to_vec(),
            signature: [&[4u8, 3][..], &(sig.len() as u16).to_be_bytes(), &sig].concat(),
        };
        assert_eq!(log.verify_precert_sct(&sct, &[7; 32], b"tbs"), Ok(()));
        assert_eq!(log.verify_precert_sct(&sct, &[8; 32], b"tbs"), Err(CtError::BadSignature));
        assert_eq!(log.verify_precert_sct(&sct, &[7; 32], b"tbx"), Err(CtError::BadSignature));
        assert_eq!(log.verify_sct(&sct, b"tbs"), Err(CtError::BadSignature));
    }

    #[test]
    fn sct_verifies_only_for_its_certificate_and_log() {
        let (key, spki) = new_key();
        let log = LogKey::from_base64(&STANDARD.encode(&spki)).unwrap();
        let cert = b"not really a certificate, but signed as one".to_vec();
        let sct = Sct::from_json(&answer(&key, &spki, &cert, 77)).unwrap();
        assert_eq!(sct.leaf_index(), Ok(77));
        assert_eq!(log.verify_sct(&sct, &cert), Ok(()));
        assert_eq!(log.verify_sct(&sct, b"another certificate"), Err(CtError::BadSignature));
        let mut moved = sct.clone();
        moved.extensions[7] ^= 1;
        assert_eq!(log.verify_sct(&moved, &cert), Err(CtError::BadSignature));
        let (other, other_spki) = new_key();
        let foreign = Sct::from_json(&answer(&other, &other_spki, &cert, 77)).unwrap();
        assert_eq!(log.verify_sct(&foreign, &cert), Err(CtError::WrongLogId));
        let json = format!(r#"{{"key":"{}","log_id":"x"}}"#, STANDARD.encode(&spki));
        assert_eq!(LogKey::from_log_json(json.as_bytes()).unwrap().id(), log.id());
        assert!(Sct::from_json(b"{}").is_err());
    }
}
