//! Signature verification with OpenSSL (feature `openssl`): SCTs, tree heads
//! and static-ct-api checkpoints against a log's public key.
//!
//! The signed bytes themselves come from [`crate::rfc6962`] and
//! [`crate::staticct`]; without this feature a caller can verify them with any
//! other ECDSA or RSA implementation.

use openssl::hash::MessageDigest;
use openssl::pkey::{Id, PKey, Public};
use openssl::sign::Verifier;

use crate::rfc6962::{log_id, DigitallySigned, LogId, Sct, SignatureAlgorithm, SignedEntry, TreeHead};
use crate::staticct::note::{Checkpoint, SignedNote};
use crate::staticct::{rfc6962_note_key_id, Rfc6962NoteSignature};
use crate::tls::TlsError;

/// Errors from signature verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The public key does not decode, or is neither EC nor RSA.
    #[error("unusable log key: {0}")]
    Key(String),
    /// The signature's algorithm is not the key's.
    #[error("signature algorithm does not match the key")]
    AlgorithmMismatch,
    /// The SCT names another log.
    #[error("SCT is from another log")]
    WrongLog,
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The signed structure could not be encoded.
    #[error("encoding: {0}")]
    Encoding(#[from] TlsError),
    /// The checkpoint is malformed or carries no signature by this key.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}

/// A CT log's public key.
pub struct LogKey {
    pkey: PKey<Public>,
    log_id: LogId,
    algorithm: SignatureAlgorithm,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey").field("log_id", &self.log_id).field("algorithm", &self.algorithm).finish()
    }
}

impl LogKey {
    /// The key of a DER `SubjectPublicKeyInfo` (EC or RSA).
    pub fn from_spki_der(spki_der: &[u8]) -> Result<Self, VerifyError> {
        let log_id = log_id(spki_der).map_err(|e| VerifyError::Key(e.to_string()))?;
        let pkey = PKey::public_key_from_der(spki_der).map_err(|e| VerifyError::Key(e.to_string()))?;
        let algorithm = match pkey.id() {
            Id::EC => SignatureAlgorithm::Ecdsa,
            Id::RSA => SignatureAlgorithm::Rsa,
            other => return Err(VerifyError::Key(format!("unsupported key type {other:?}"))),
        };
        Ok(Self { pkey, log_id, algorithm })
    }

    /// The log ID: SHA-256 of the key.
    pub fn log_id(&self) -> LogId {
        self.log_id
    }

    /// Verifies a `digitally-signed` SHA-256 signature over `message`.
    pub fn verify(&self, message: &[u8], signature: &DigitallySigned) -> Result<(), VerifyError> {
        if signature.algorithm != self.algorithm {
            return Err(VerifyError::AlgorithmMismatch);
        }
        let mut v = Verifier::new(MessageDigest::sha256(), &self.pkey).map_err(|e| VerifyError::Key(e.to_string()))?;
        match v.verify_oneshot(&signature.signature, message) {
            Ok(true) => Ok(()),
            _ => Err(VerifyError::BadSignature),
        }
    }

    /// Verifies an SCT for an entry (for an SCT embedded in a final certificate,
    /// the entry is [`crate::rfc6962::precert::embedded_sct_entry`]).
    pub fn verify_sct(&self, sct: &Sct, entry: &SignedEntry) -> Result<(), VerifyError> {
        if sct.log_id != self.log_id {
            return Err(VerifyError::WrongLog);
        }
        self.verify(&sct.signature_input(entry)?, &sct.signature)
    }

    /// Verifies the signature of a tree head (`get-sth`).
    pub fn verify_tree_head(&self, head: &TreeHead, signature: &DigitallySigned) -> Result<(), VerifyError> {
        self.verify(&head.signature_input(), signature)
    }

    /// Verifies a static-ct-api checkpoint signed by this log under the key
    /// name `origin` (which must also be the checkpoint's origin line) and
    /// returns the checkpoint and the tree head it signs. Signatures by other
    /// keys are ignored, as signed-note requires.
    pub fn verify_checkpoint(&self, note: &str, origin: &str) -> Result<(Checkpoint, TreeHead), VerifyError> {
        let bad = |e: &dyn std::fmt::Display| VerifyError::Checkpoint(e.to_string());
        let note = SignedNote::parse(note).map_err(|e| bad(&e))?;
        let checkpoint = Checkpoint::parse(&note.text).map_err(|e| bad(&e))?;
        if checkpoint.origin != origin {
            return Err(VerifyError::Checkpoint("origin does not match".into()));
        }
        let key_id = rfc6962_note_key_id(origin, &self.log_id);
        let mut found = None;
        for sig in note.signatures.iter().filter(|s| s.name == origin && s.key_id == key_id) {
            let parsed = Rfc6962NoteSignature::from_bytes(&sig.signature).map_err(|e| bad(&e))?;
            let head = checkpoint.tree_head(parsed.timestamp);
            self.verify_tree_head(&head, &parsed.signature)?;
            found = Some(head);
        }
        let head = found.ok_or_else(|| VerifyError::Checkpoint("no signature by this log".into()))?;
        Ok((checkpoint, head))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc6962::precert::{embedded_sct_entry, extension_value};
    use crate::rfc6962::testdata::*;
    use crate::rfc6962::{scts_from_extension_value, SCT_LIST_OID};

    fn test_log() -> LogKey {
        LogKey::from_spki_der(&unhex(LOG_KEY_SPKI)).unwrap()
    }

    #[test]
    fn x509_sct_of_the_test_data_verifies() {
        let log = test_log();
        assert_eq!(hex::encode(log.log_id()), LOG_ID);
        let sct = Sct::from_bytes(&unhex(TEST_CERT_SCT)).unwrap();
        let entry = SignedEntry::X509(unhex(TEST_CERT));
        log.verify_sct(&sct, &entry).unwrap();
        // Another certificate, timestamp or extension breaks it.
        assert_eq!(log.verify_sct(&sct, &SignedEntry::X509(unhex(CA_CERT))), Err(VerifyError::BadSignature));
        let later = Sct { timestamp: sct.timestamp + 1, ..sct.clone() };
        assert_eq!(log.verify_sct(&later, &entry), Err(VerifyError::BadSignature));
        let ext = Sct { extensions: vec![0], ..sct.clone() };
        assert_eq!(log.verify_sct(&ext, &entry), Err(VerifyError::BadSignature));
        let other = Sct { log_id: [0; 32], ..sct };
        assert_eq!(log.verify_sct(&other, &entry), Err(VerifyError::WrongLog));
    }

    #[test]
    fn precert_sct_of_the_test_data_verifies() {
        let log = test_log();
        let entry = SignedEntry::Precert {
            issuer_key_hash: unhex(ISSUER_KEY_HASH).try_into().unwrap(),
            tbs_certificate: unhex(TBS_CERT),
        };
        let sct = Sct {
            log_id: log.log_id(),
            timestamp: 1365181456275,
            extensions: vec![],
            signature: DigitallySigned::ecdsa(unhex(PRECERT_SCT_SIGNATURE)),
        };
        log.verify_sct(&sct, &entry).unwrap();
    }

    /// Every embedded SCT of the test data verifies against the entry rebuilt
    /// from the final certificate and its issuer.
    #[test]
    fn embedded_scts_verify() {
        let log = test_log();
        for (cert, issuer) in [
            (EMBEDDED_CERT, CA_CERT),
            (EMBEDDED_WITH_PRECA_CERT, CA_CERT),
            (EMBEDDED_WITH_INTERMEDIATE_PRECA_CERT, INTERMEDIATE_CERT),
        ] {
            let cert = unhex(cert);
            let value = extension_value(&cert, &SCT_LIST_OID).unwrap().unwrap();
            let scts = scts_from_extension_value(&value).unwrap();
            let entry = embedded_sct_entry(&cert, &unhex(issuer)).unwrap();
            for sct in &scts {
                log.verify_sct(sct, &entry).unwrap();
            }
            // With the wrong issuer the key hash differs.
            let wrong = embedded_sct_entry(&cert, &unhex(TEST_CERT)).unwrap();
            assert_eq!(log.verify_sct(&scts[0], &wrong), Err(VerifyError::BadSignature));
        }
    }

    #[test]
    fn sample_sth_verifies() {
        let log = test_log();
        let head = TreeHead {
            timestamp: STH_TIMESTAMP,
            tree_size: STH_TREE_SIZE,
            root_hash: unhex(STH_ROOT).try_into().unwrap(),
        };
        let sig = DigitallySigned::from_bytes(&unhex(STH_SIGNATURE)).unwrap();
        log.verify_tree_head(&head, &sig).unwrap();
        let bigger = TreeHead { tree_size: 22, ..head };
        assert_eq!(log.verify_tree_head(&bigger, &sig), Err(VerifyError::BadSignature));
        let rsa = DigitallySigned { algorithm: SignatureAlgorithm::Rsa, ..sig };
        assert_eq!(log.verify_tree_head(&head, &rsa), Err(VerifyError::AlgorithmMismatch));
    }

    #[test]
    fn bad_keys_are_refused() {
        assert!(LogKey::from_spki_der(b"junk").is_err());
        let ed = openssl::pkey::PKey::generate_ed25519().unwrap().public_key_to_der().unwrap();
        assert!(matches!(LogKey::from_spki_der(&ed), Err(VerifyError::Key(_))));
    }
}
