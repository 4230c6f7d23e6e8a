//! Signed notes (c2sp.org/signed-note) and checkpoints (c2sp.org/tlog-checkpoint).
//!
//! A signed note is a UTF-8 text ending in a newline, a blank line, then one or
//! more lines `— <key name> <base64(key ID || signature)>`. A checkpoint is a
//! note whose text is the origin, the tree size and the base64 root hash, one
//! per line.

use std::fmt::Write as _;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::merkle::Hash;
use crate::rfc6962::TreeHead;

/// Largest note [`SignedNote::parse`] accepts, in bytes.
pub const MAX_NOTE_LEN: usize = 64 * 1024;

/// Most signature lines [`SignedNote::parse`] accepts (signed-note asks for at least 16).
pub const MAX_SIGNATURES: usize = 100;

const SIG_PREFIX: &str = "\u{2014} ";

/// Errors from notes and checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoteError {
    /// The note or checkpoint is not in the specified format.
    #[error("malformed note: {0}")]
    Malformed(&'static str),
    /// The note is larger than [`MAX_NOTE_LEN`] or has more than [`MAX_SIGNATURES`] signatures.
    #[error("note too large")]
    TooLarge,
    /// A key name is empty or contains spaces or `+`.
    #[error("invalid key name")]
    BadKeyName,
}

/// Whether a key name is valid: non-empty, no Unicode spaces, no `+`.
pub fn is_valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

/// The recommended key ID: `SHA-256(name || 0x0A || signature type || public key)[:4]`, big-endian.
pub fn key_id(name: &str, signature_type: u8, public_key: &[u8]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', signature_type]);
    h.update(public_key);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// One signature line of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    /// The key name.
    pub name: String,
    /// The key ID (first four bytes of the decoded signature).
    pub key_id: u32,
    /// The signature proper (after the key ID).
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The signature line, with its final newline.
    pub fn line(&self) -> Result<String, NoteError> {
        if !is_valid_key_name(&self.name) {
            return Err(NoteError::BadKeyName);
        }
        let mut blob = self.key_id.to_be_bytes().to_vec();
        blob.extend_from_slice(&self.signature);
        Ok(format!("{SIG_PREFIX}{} {}\n", self.name, B64.encode(blob)))
    }
}

/// A note and its signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedNote {
    /// The text, ending in a newline.
    pub text: String,
    /// The signatures, in order.
    pub signatures: Vec<NoteSignature>,
}

impl SignedNote {
    /// Parses a signed note. Signatures are not verified here.
    pub fn parse(note: &str) -> Result<Self, NoteError> {
        if note.len() > MAX_NOTE_LEN {
            return Err(NoteError::TooLarge);
        }
        if note.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("control character"));
        }
        let split = note.rfind("\n\n").ok_or(NoteError::Malformed("no signature block"))?;
        let (text, sigs) = (&note[..split + 1], &note[split + 2..]);
        if sigs.is_empty() || !sigs.ends_with('\n') {
            return Err(NoteError::Malformed("signature block does not end in a newline"));
        }
        let mut signatures = Vec::new();
        for line in sigs[..sigs.len() - 1].split('\n') {
            if signatures.len() == MAX_SIGNATURES {
                return Err(NoteError::TooLarge);
            }
            let rest = line.strip_prefix(SIG_PREFIX).ok_or(NoteError::Malformed("signature line prefix"))?;
            let (name, b64) = rest.split_once(' ').ok_or(NoteError::Malformed("signature line"))?;
            if !is_valid_key_name(name) {
                return Err(NoteError::BadKeyName);
            }
            let blob = B64.decode(b64).map_err(|_| NoteError::Malformed("signature base64"))?;
            if blob.len() < 5 {
                return Err(NoteError::Malformed("signature too short"));
            }
            signatures.push(NoteSignature {
                name: name.to_string(),
                key_id: u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]),
                signature: blob[4..].to_vec(),
            });
        }
        Ok(Self { text: text.to_string(), signatures })
    }

    /// The note: text, blank line, signature lines.
    pub fn to_text(&self) -> Result<String, NoteError> {
        if !self.text.ends_with('\n') || self.text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("text must end in a newline and have no control characters"));
        }
        if self.signatures.is_empty() {
            return Err(NoteError::Malformed("no signature"));
        }
        let mut s = self.text.clone();
        s.push('\n');
        for sig in &self.signatures {
            s.push_str(&sig.line()?);
        }
        Ok(s)
    }
}

/// A checkpoint body without extension lines (static-ct-api forbids them
/// under RFC 6962 signatures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The origin: the log's submission prefix without scheme or trailing slash.
    pub origin: String,
    /// The tree size.
    pub size: u64,
    /// The tree head.
    pub root_hash: Hash,
}

impl Checkpoint {
    /// The note text: `<origin>\n<size>\n<base64 root>\n`.
    pub fn text(&self) -> Result<String, NoteError> {
        if self.origin.is_empty() || self.origin.contains('\n') || self.origin.chars().any(|c| c < ' ') {
            return Err(NoteError::Malformed("origin"));
        }
        let mut s = String::with_capacity(self.origin.len() + 70);
        // Writing to a String cannot fail.
        let _ = write!(s, "{}\n{}\n{}\n", self.origin, self.size, B64.encode(self.root_hash));
        Ok(s)
    }

    /// Parses a checkpoint's note text; extension lines are refused.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let body = text.strip_suffix('\n').ok_or(NoteError::Malformed("checkpoint must end in a newline"))?;
        let lines: Vec<&str> = body.split('\n').collect();
        let [origin, size, root] = lines[..] else {
            return Err(NoteError::Malformed("checkpoint must have exactly three lines"));
        };
        if origin.is_empty() {
            return Err(NoteError::Malformed("empty origin"));
        }
        let canonical = size == "0" || (!size.starts_with('0') && !size.is_empty());
        if !canonical || !size.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NoteError::Malformed("tree size"));
        }
        let size = size.parse().map_err(|_| NoteError::Malformed("tree size"))?;
        let root_hash =
            B64.decode(root).ok().and_then(|v| Hash::try_from(v).ok()).ok_or(NoteError::Malformed("root hash"))?;
        Ok(Self { origin: origin.to_string(), size, root_hash })
    }

    /// The RFC 6962 tree head of this checkpoint at `timestamp`.
    pub fn tree_head(&self, timestamp: u64) -> TreeHead {
        TreeHead { timestamp, tree_size: self.size, root_hash: self.root_hash }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of c2sp.org/signed-note.
    const SPEC_NOTE: &str = "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n\n\u{2014} quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n";

    /// The example of c2sp.org/tlog-checkpoint.
    const SPEC_CHECKPOINT: &str = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n\u{2014} example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n";

    #[test]
    fn spec_note_parses_and_round_trips() {
        let n = SignedNote::parse(SPEC_NOTE).unwrap();
        // The last blank line separates the signatures; earlier ones are text.
        assert_eq!(
            n.text,
            "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n"
        );
        assert_eq!(n.signatures.len(), 1);
        assert_eq!(n.signatures[0].name, "quasimodo.example/salvatore");
        assert_eq!(n.signatures[0].key_id, 0x367ba04b);
        assert_eq!(n.signatures[0].signature.len(), 64);
        assert_eq!(n.to_text().unwrap(), SPEC_NOTE);
    }

    #[test]
    fn spec_checkpoint_parses_and_round_trips() {
        let n = SignedNote::parse(SPEC_CHECKPOINT).unwrap();
        let c = Checkpoint::parse(&n.text).unwrap();
        assert_eq!(c.origin, "example.com/behind-the-sofa");
        assert_eq!(c.size, 20852163);
        assert_eq!(c.text().unwrap(), n.text);
        assert_eq!(n.to_text().unwrap(), SPEC_CHECKPOINT);
    }

    #[test]
    fn malformed_notes_are_refused() {
        let sig = "\u{2014} a.example/k AAAAAAA=\n";
        for bad in [
            String::new(),
            "text\n".to_string(),
            "text\n\n".to_string(),
            format!("text\n\n{}", sig.trim_end()),
            "text\n\n- a.example/k AAAAAAA=\n".to_string(),
            "text\n\n\u{2014} a.example/k\n".to_string(),
            "text\n\n\u{2014} a+b AAAAAAA=\n".to_string(),
            "text\n\n\u{2014}  AAAAAAA=\n".to_string(),
            "text\n\n\u{2014} a.example/k AAAA\n".to_string(),
            "text\n\n\u{2014} a.example/k !!!!\n".to_string(),
            format!("te\rxt\n\n{sig}"),
            format!("text\n\n{sig}\n"),
            format!("text\n\n{}", sig.repeat(MAX_SIGNATURES + 1)),
            format!("{}\n\n{sig}", "x".repeat(MAX_NOTE_LEN)),
        ] {
            assert!(SignedNote::parse(&bad).is_err(), "{bad:?} parsed");
        }
        assert!(SignedNote::parse(&format!("text\n\n{}", sig.repeat(MAX_SIGNATURES))).is_ok());
    }

    #[test]
    fn malformed_checkpoints_are_refused() {
        let root = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=";
        assert!(Checkpoint::parse(&format!("o\n0\n{root}\n")).is_ok());
        for bad in [
            format!("o\n1\n{root}"),
            format!("\n1\n{root}\n"),
            format!("o\n01\n{root}\n"),
            format!("o\n-1\n{root}\n"),
            format!("o\n\n{root}\n"),
            format!("o\n1 \n{root}\n"),
            format!("o\n18446744073709551616\n{root}\n"),
            "o\n1\nAAAA\n".to_string(),
            format!("o\n1\n{root}\next\n"),
            format!("o\n1\n{root}\n\n"),
        ] {
            assert!(Checkpoint::parse(&bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn key_ids() {
        // Ed25519 (type 0x01) key ID of the signed-note example key is in its
        // signature line; here only the construction is checked.
        let a = key_id("a.example/k", 0x05, &[1; 32]);
        assert_ne!(a, key_id("a.example/k", 0x01, &[1; 32]));
        assert_ne!(a, key_id("b.example/k", 0x05, &[1; 32]));
        let mut h = Sha256::new();
        h.update(b"a.example/k\n\x05");
        h.update([1u8; 32]);
        assert_eq!(a.to_be_bytes(), h.finalize()[..4]);
        assert!(is_valid_key_name("example.com/log"));
        for bad in ["", "a b", "a+b", "a\u{a0}b", "a\tb"] {
            assert!(!is_valid_key_name(bad));
        }
    }
}
