//! RFC 6962 structures: log entries, SCTs, tree heads and the exact bytes a
//! log signs for them.
//!
//! - This module: [`TimestampedEntry`] and the `MerkleTreeLeaf`, [`Sct`] and
//!   its `digitally-signed` input, [`TreeHead`] and its signature input,
//!   [`DigitallySigned`], log IDs, and the SCT list of the X.509 extension.
//! - [`precert`]: what a log computes from submitted certificates: the TBS of a
//!   precertificate without its poison (and with the real issuer when a
//!   Precertificate Signing Certificate signed it), issuer key hashes.
//! - [`api`]: the JSON of the RFC 6962 HTTP API (`add-chain` bodies with a size
//!   bound, responses) and the `extra_data` of `get-entries`.

pub mod api;
pub mod precert;

use der::asn1::OctetString;
use der::{Decode, Encode};
use sha2::{Digest, Sha256};
use x509_cert::ext::Extension;

use crate::merkle::{leaf_hash, Hash};
use crate::tls::{LengthPrefix, Reader, TlsError, Writer};

/// A log ID: SHA-256 of the log's public key (DER `SubjectPublicKeyInfo`).
pub type LogId = [u8; 32];

/// OID of the SCT list extension (RFC 6962 §3.3): 1.3.6.1.4.1.11129.2.4.2.
pub const SCT_LIST_OID: const_oid::ObjectIdentifier =
    const_oid::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");

/// Largest certificate or TBS a log entry can carry (a `<1..2^24-1>` vector).
pub const MAX_CERT_LEN: usize = 0xff_ffff;

/// Errors from RFC 6962 structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rfc6962Error {
    /// TLS encoding or decoding failed.
    #[error("TLS encoding: {0}")]
    Tls(#[from] TlsError),
    /// DER encoding or decoding failed.
    #[error("DER: {0}")]
    Der(String),
    /// An enumerated field has a value RFC 6962 does not define.
    #[error("unsupported {field} {value}")]
    Unsupported {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

impl From<der::Error> for Rfc6962Error {
    fn from(e: der::Error) -> Self {
        Rfc6962Error::Der(e.to_string())
    }
}

/// The log ID of a public key given as DER `SubjectPublicKeyInfo` (RFC 6962 §3.2).
pub fn log_id(spki_der: &[u8]) -> Result<LogId, Rfc6962Error> {
    spki::SubjectPublicKeyInfoRef::from_der(spki_der)?;
    Ok(Sha256::digest(spki_der).into())
}

/// The `signed_entry` of a [`TimestampedEntry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedEntry {
    /// `x509_entry`: the DER certificate.
    X509(Vec<u8>),
    /// `precert_entry`: the issuer's key hash and the precertificate's TBS
    /// (poison removed, see [`precert`]).
    Precert {
        /// SHA-256 of the final issuer's `SubjectPublicKeyInfo`.
        issuer_key_hash: Hash,
        /// The DER `TBSCertificate`.
        tbs_certificate: Vec<u8>,
    },
}

impl SignedEntry {
    /// The `LogEntryType`: 0 for `x509_entry`, 1 for `precert_entry`.
    pub fn entry_type(&self) -> u16 {
        match self {
            SignedEntry::X509(_) => 0,
            SignedEntry::Precert { .. } => 1,
        }
    }

    /// Checks that the entry's certificate (`x509_entry`) or TBS
    /// (`precert_entry`) is strict DER that decodes as such (x509-cert). The
    /// log checks this when it accepts a submission, and signd again before it
    /// signs an SCT over the entry, so both hold the same bar.
    pub fn check_der(&self) -> Result<(), String> {
        match self {
            SignedEntry::X509(cert) => x509_cert::Certificate::from_der(cert)
                .map(drop)
                .map_err(|e| format!("x509_entry is not a DER X.509 Certificate: {e}")),
            SignedEntry::Precert { tbs_certificate, .. } => x509_cert::TbsCertificate::from_der(tbs_certificate)
                .map(drop)
                .map_err(|e| format!("precert_entry is not a DER TBSCertificate: {e}")),
        }
    }

    fn encode(&self, w: &mut Writer) -> Result<(), TlsError> {
        w.u16(self.entry_type());
        match self {
            SignedEntry::X509(cert) => w.vector(LengthPrefix::U24, cert),
            SignedEntry::Precert { issuer_key_hash, tbs_certificate } => {
                w.bytes(issuer_key_hash);
                w.vector(LengthPrefix::U24, tbs_certificate)
            }
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, Rfc6962Error> {
        match r.u16()? {
            0 => Ok(SignedEntry::X509(r.vector_min(LengthPrefix::U24, 1)?.to_vec())),
            1 => {
                let issuer_key_hash = r.array()?;
                let tbs_certificate = r.vector_min(LengthPrefix::U24, 1)?.to_vec();
                Ok(SignedEntry::Precert { issuer_key_hash, tbs_certificate })
            }
            t => Err(Rfc6962Error::Unsupported { field: "LogEntryType", value: u64::from(t) }),
        }
    }
}

/// `TimestampedEntry` (RFC 6962 §3.4): what a log entry and its SCT commit to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampedEntry {
    /// Milliseconds since the Unix epoch (the SCT's timestamp).
    pub timestamp: u64,
    /// The certificate or precertificate.
    pub entry: SignedEntry,
    /// The SCT's `CtExtensions` (static-ct-api: the `leaf_index` extension).
    pub extensions: Vec<u8>,
}

impl TimestampedEntry {
    /// Appends the TLS encoding.
    pub fn encode(&self, w: &mut Writer) -> Result<(), TlsError> {
        w.u64(self.timestamp);
        self.entry.encode(w)?;
        w.vector(LengthPrefix::U16, &self.extensions)
    }

    /// Reads one entry.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, Rfc6962Error> {
        let timestamp = r.u64()?;
        let entry = SignedEntry::decode(r)?;
        let extensions = r.vector(LengthPrefix::U16)?.to_vec();
        Ok(Self { timestamp, entry, extensions })
    }

    /// The `MerkleTreeLeaf` (version v1, `timestamped_entry`): the `leaf_input`
    /// of `get-entries`, whose [`leaf_hash`] is the tree's leaf.
    pub fn merkle_tree_leaf(&self) -> Result<Vec<u8>, TlsError> {
        let mut w = Writer::new();
        w.u8(0); // version v1
        w.u8(0); // leaf_type timestamped_entry
        self.encode(&mut w)?;
        Ok(w.into_vec())
    }

    /// The Merkle leaf hash of this entry.
    pub fn leaf_hash(&self) -> Result<Hash, TlsError> {
        Ok(leaf_hash(&self.merkle_tree_leaf()?))
    }

    /// Parses a `MerkleTreeLeaf` (e.g. a `get-entries` `leaf_input`).
    pub fn from_merkle_tree_leaf(leaf: &[u8]) -> Result<Self, Rfc6962Error> {
        let mut r = Reader::new(leaf);
        let (version, leaf_type) = (r.u8()?, r.u8()?);
        if version != 0 {
            return Err(Rfc6962Error::Unsupported { field: "Version", value: u64::from(version) });
        }
        if leaf_type != 0 {
            return Err(Rfc6962Error::Unsupported { field: "MerkleLeafType", value: u64::from(leaf_type) });
        }
        let e = Self::decode(&mut r)?;
        r.finish()?;
        Ok(e)
    }

    /// The bytes an SCT for this entry signs (RFC 6962 §3.2: version v1,
    /// `signature_type` `certificate_timestamp`, then the entry). They equal the
    /// `MerkleTreeLeaf` byte for byte, as both start with two zero bytes.
    pub fn sct_signature_input(&self) -> Result<Vec<u8>, TlsError> {
        let mut w = Writer::new();
        w.u8(0); // sct_version v1
        w.u8(0); // signature_type certificate_timestamp
        self.encode(&mut w)?;
        Ok(w.into_vec())
    }
}

/// The signature algorithm of a [`DigitallySigned`] (always with SHA-256 in CT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureAlgorithm {
    /// RSASSA-PKCS1-v1_5 (`rsa`, 1).
    Rsa,
    /// ECDSA, DER-encoded `Ecdsa-Sig-Value` (`ecdsa`, 3).
    Ecdsa,
}

impl SignatureAlgorithm {
    /// The TLS `SignatureAlgorithm` code.
    pub fn code(self) -> u8 {
        match self {
            SignatureAlgorithm::Rsa => 1,
            SignatureAlgorithm::Ecdsa => 3,
        }
    }
}

/// `HashAlgorithm` sha256: the only hash CT uses.
pub const HASH_SHA256: u8 = 4;

/// A TLS `digitally-signed` value: SHA-256 with RSA or ECDSA, and the signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigitallySigned {
    /// The signature algorithm.
    pub algorithm: SignatureAlgorithm,
    /// The signature (DER `Ecdsa-Sig-Value` for ECDSA).
    pub signature: Vec<u8>,
}

impl DigitallySigned {
    /// An ECDSA (SHA-256) signature.
    pub fn ecdsa(signature: Vec<u8>) -> Self {
        Self { algorithm: SignatureAlgorithm::Ecdsa, signature }
    }

    /// Appends the TLS encoding: hash (4), signature algorithm, `signature<0..2^16-1>`.
    pub fn encode(&self, w: &mut Writer) -> Result<(), TlsError> {
        w.u8(HASH_SHA256);
        w.u8(self.algorithm.code());
        w.vector(LengthPrefix::U16, &self.signature)
    }

    /// The TLS encoding alone (e.g. `tree_head_signature` of `get-sth`).
    pub fn to_bytes(&self) -> Result<Vec<u8>, TlsError> {
        let mut w = Writer::new();
        self.encode(&mut w)?;
        Ok(w.into_vec())
    }

    /// Reads one value.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, Rfc6962Error> {
        let hash = r.u8()?;
        if hash != HASH_SHA256 {
            return Err(Rfc6962Error::Unsupported { field: "HashAlgorithm", value: u64::from(hash) });
        }
        let algorithm = match r.u8()? {
            1 => SignatureAlgorithm::Rsa,
            3 => SignatureAlgorithm::Ecdsa,
            a => return Err(Rfc6962Error::Unsupported { field: "SignatureAlgorithm", value: u64::from(a) }),
        };
        let signature = r.vector(LengthPrefix::U16)?.to_vec();
        Ok(Self { algorithm, signature })
    }

    /// Parses the TLS encoding, with nothing after it.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Rfc6962Error> {
        let mut r = Reader::new(b);
        let ds = Self::decode(&mut r)?;
        r.finish()?;
        Ok(ds)
    }
}

/// A `SignedCertificateTimestamp` v1 (RFC 6962 §3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sct {
    /// The log's ID.
    pub log_id: LogId,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// `CtExtensions` (static-ct-api: the `leaf_index` extension).
    pub extensions: Vec<u8>,
    /// The log's signature over [`Sct::signature_input`].
    pub signature: DigitallySigned,
}

impl Sct {
    /// The bytes the SCT's signature covers, for the given entry.
    pub fn signature_input(&self, entry: &SignedEntry) -> Result<Vec<u8>, TlsError> {
        self.timestamped_entry(entry.clone()).sct_signature_input()
    }

    /// The `TimestampedEntry` this SCT stands for.
    pub fn timestamped_entry(&self, entry: SignedEntry) -> TimestampedEntry {
        TimestampedEntry { timestamp: self.timestamp, entry, extensions: self.extensions.clone() }
    }

    /// Appends the TLS encoding.
    pub fn encode(&self, w: &mut Writer) -> Result<(), TlsError> {
        w.u8(0); // v1
        w.bytes(&self.log_id);
        w.u64(self.timestamp);
        w.vector(LengthPrefix::U16, &self.extensions)?;
        self.signature.encode(w)
    }

    /// The TLS encoding alone.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TlsError> {
        let mut w = Writer::new();
        self.encode(&mut w)?;
        Ok(w.into_vec())
    }

    /// Parses the TLS encoding, with nothing after it.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Rfc6962Error> {
        let mut r = Reader::new(b);
        let version = r.u8()?;
        if version != 0 {
            return Err(Rfc6962Error::Unsupported { field: "sct_version", value: u64::from(version) });
        }
        let log_id = r.array()?;
        let timestamp = r.u64()?;
        let extensions = r.vector(LengthPrefix::U16)?.to_vec();
        let signature = DigitallySigned::decode(&mut r)?;
        r.finish()?;
        Ok(Self { log_id, timestamp, extensions, signature })
    }
}

/// A tree head: what an STH (and a static-ct-api checkpoint) signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeHead {
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Number of leaves.
    pub tree_size: u64,
    /// The tree head hash.
    pub root_hash: Hash,
}

impl TreeHead {
    /// The bytes of the `TreeHeadSignature` (RFC 6962 §3.5): version v1,
    /// `signature_type` `tree_hash`, timestamp, tree size, root hash.
    pub fn signature_input(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(0); // v1
        w.u8(1); // tree_hash
        w.u64(self.timestamp);
        w.u64(self.tree_size);
        w.bytes(&self.root_hash);
        w.into_vec()
    }
}

/// The TLS `SignedCertificateTimestampList` (RFC 6962 §3.3): each SCT as a
/// `SerializedSCT<1..2^16-1>`, in a list `<1..2^16-1>`.
pub fn encode_sct_list(scts: &[Sct]) -> Result<Vec<u8>, TlsError> {
    if scts.is_empty() {
        return Err(TlsError::TooShort { len: 0, min: 1 });
    }
    let mut w = Writer::new();
    w.nested(LengthPrefix::U16, |w| {
        for sct in scts {
            w.vector(LengthPrefix::U16, &sct.to_bytes()?)?;
        }
        Ok(())
    })?;
    Ok(w.into_vec())
}

/// Parses a `SignedCertificateTimestampList`.
pub fn decode_sct_list(list: &[u8]) -> Result<Vec<Sct>, Rfc6962Error> {
    let mut r = Reader::new(list);
    let mut items = Reader::new(r.vector_min(LengthPrefix::U16, 1)?);
    r.finish()?;
    let mut out = Vec::new();
    while !items.is_empty() {
        out.push(Sct::from_bytes(items.vector_min(LengthPrefix::U16, 1)?)?);
    }
    Ok(out)
}

/// The `extnValue` content of the SCT list extension: a DER OCTET STRING
/// holding the TLS-encoded list.
pub fn sct_list_extension_value(scts: &[Sct]) -> Result<Vec<u8>, Rfc6962Error> {
    Ok(OctetString::new(encode_sct_list(scts)?)?.to_der()?)
}

/// The non-critical SCT list extension, ready for a certificate.
pub fn sct_list_extension(scts: &[Sct]) -> Result<Extension, Rfc6962Error> {
    Ok(Extension {
        extn_id: SCT_LIST_OID,
        critical: false,
        extn_value: OctetString::new(sct_list_extension_value(scts)?)?,
    })
}

/// The SCTs in a SCT list extension's `extnValue` content.
pub fn scts_from_extension_value(value: &[u8]) -> Result<Vec<Sct>, Rfc6962Error> {
    decode_sct_list(OctetString::from_der(value)?.as_bytes())
}

#[cfg(test)]
pub(crate) mod testdata;

#[cfg(all(test, feature = "openssl"))]
mod chain_tests;

#[cfg(test)]
mod tests {
    use super::testdata::*;
    use super::*;

    #[test]
    fn log_id_of_the_test_log_key() {
        assert_eq!(hex::encode(log_id(&unhex(LOG_KEY_SPKI)).unwrap()), LOG_ID);
        assert!(log_id(b"not a key").is_err());
    }

    #[test]
    fn sct_of_test_cert_parses_and_round_trips() {
        let raw = unhex(TEST_CERT_SCT);
        let sct = Sct::from_bytes(&raw).unwrap();
        assert_eq!(hex::encode(sct.log_id), LOG_ID);
        assert_eq!(sct.timestamp, 1365181456089);
        assert!(sct.extensions.is_empty());
        assert_eq!(sct.signature.algorithm, SignatureAlgorithm::Ecdsa);
        assert_eq!(sct.signature.to_bytes().unwrap(), unhex(TEST_CERT_SCT_DIGITALLY_SIGNED));
        assert_eq!(sct.to_bytes().unwrap(), raw);
        // Trailing data, truncation and unknown versions are refused.
        assert!(Sct::from_bytes(&[raw.clone(), vec![0]].concat()).is_err());
        assert!(Sct::from_bytes(&raw[..raw.len() - 1]).is_err());
        let mut v2 = raw.clone();
        v2[0] = 1;
        assert!(Sct::from_bytes(&v2).is_err());
    }

    #[test]
    fn sct_signature_input_layout() {
        let e = TimestampedEntry {
            timestamp: 0x0102030405060708,
            entry: SignedEntry::X509(vec![0xaa, 0xbb]),
            extensions: vec![],
        };
        assert_eq!(hex::encode(e.sct_signature_input().unwrap()), "000001020304050607080000000002aabb0000");
    }

    #[test]
    fn merkle_tree_leaf_round_trips() {
        for entry in [
            SignedEntry::X509(vec![1, 2, 3]),
            SignedEntry::Precert { issuer_key_hash: [9; 32], tbs_certificate: vec![4, 5] },
        ] {
            let e = TimestampedEntry { timestamp: 77, entry, extensions: vec![0, 0, 5, 0, 0, 0, 0, 1] };
            let leaf = e.merkle_tree_leaf().unwrap();
            assert_eq!(leaf, e.sct_signature_input().unwrap());
            assert_eq!(TimestampedEntry::from_merkle_tree_leaf(&leaf).unwrap(), e);
            assert!(TimestampedEntry::from_merkle_tree_leaf(&leaf[..leaf.len() - 1]).is_err());
        }
        assert!(TimestampedEntry::from_merkle_tree_leaf(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]).is_err());
    }

    #[test]
    fn tree_head_signature_input_layout() {
        let th = TreeHead { timestamp: 1396877277237, tree_size: 21, root_hash: [0x72; 32] };
        let b = th.signature_input();
        assert_eq!(b.len(), 2 + 8 + 8 + 32);
        assert_eq!(hex::encode(&b[..18]), "0001000001453c5fb8350000000000000015");
    }

    #[test]
    fn digitally_signed_rejects_other_hashes() {
        assert!(DigitallySigned::from_bytes(&[4, 3, 0, 1, 0xaa]).is_ok());
        assert!(DigitallySigned::from_bytes(&[2, 3, 0, 1, 0xaa]).is_err());
        assert!(DigitallySigned::from_bytes(&[4, 2, 0, 1, 0xaa]).is_err());
        assert!(DigitallySigned::from_bytes(&[4, 3, 0, 2, 0xaa]).is_err());
    }

    #[test]
    fn embedded_sct_list_parses_and_round_trips() {
        let cert = unhex(EMBEDDED_CERT);
        let value = precert::extension_value(&cert, &SCT_LIST_OID).unwrap().unwrap();
        let scts = scts_from_extension_value(&value).unwrap();
        assert_eq!(scts.len(), 1);
        assert_eq!(scts[0].timestamp, 1365181456275);
        assert_eq!(scts[0].signature.signature, unhex(PRECERT_SCT_SIGNATURE));
        assert_eq!(sct_list_extension_value(&scts).unwrap(), value);
        assert!(encode_sct_list(&[]).is_err());
        assert!(decode_sct_list(&[0, 0]).is_err());
    }
}
