//! What a CT log key may sign: RFC 6962 `digitally-signed` inputs, and
//! nothing else.
//!
//! - An SCT's (§3.2): `Version` v1 (0), `SignatureType`
//!   `certificate_timestamp` (0), then a `TimestampedEntry` (uint64
//!   timestamp, `LogEntryType`, the entry, `CtExtensions<0..2^16-1>`) with
//!   nothing after it. An `x509_entry` (0) must hold a DER X.509 Certificate,
//!   a `precert_entry` (1) a 32-byte issuer key hash and a DER
//!   TBSCertificate.
//! - A tree head's (§3.5): `Version` v1 (0), `SignatureType` `tree_hash` (1),
//!   uint64 timestamp, uint64 tree size, 32-byte root hash: exactly 50 bytes.
//!
//! The two header bytes are read here; everything after them with
//! `signet-ct`'s TLS reader and `TimestampedEntry` decoder, the same code
//! ctlogd builds the inputs with, and the DER with `x509-cert`.

use signet_ct::rfc6962::TimestampedEntry;
use signet_ct::tls::Reader;

/// `Version` v1.
const V1: u8 = 0;
/// `SignatureType` certificate_timestamp.
const CERTIFICATE_TIMESTAMP: u8 = 0;
/// `SignatureType` tree_hash.
const TREE_HASH: u8 = 1;
/// The length of a tree head's signature input.
pub const TREE_HEAD_LEN: usize = 2 + 8 + 8 + 32;

/// What one input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An SCT's signature input.
    Sct,
    /// A tree head's signature input, for a tree of `tree_size` leaves.
    TreeHead {
        /// The tree size it signs.
        tree_size: u64,
    },
}

/// What a whole call signs, for its audit record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// SCT inputs.
    pub scts: usize,
    /// Tree head inputs.
    pub tree_heads: usize,
    /// The largest tree size among the tree heads.
    pub largest_tree_size: Option<u64>,
}

impl Summary {
    /// The audit outcome of a success: `ok scts=<n> tree-heads=<m>`, plus
    /// ` tree-size=<largest>` when there is a tree head.
    pub fn outcome(&self) -> String {
        let mut s = format!("ok scts={} tree-heads={}", self.scts, self.tree_heads);
        if let Some(size) = self.largest_tree_size {
            s.push_str(&format!(" tree-size={size}"));
        }
        s
    }
}

/// Checks every input; the first that is not an RFC 6962 signature input is
/// an error naming its index and why.
pub fn check_all<I: AsRef<[u8]>>(inputs: &[I]) -> Result<Summary, String> {
    let mut summary = Summary::default();
    for (i, input) in inputs.iter().enumerate() {
        match classify(input.as_ref()).map_err(|why| format!("input {i} of {}: {why}", inputs.len()))? {
            Kind::Sct => summary.scts += 1,
            Kind::TreeHead { tree_size } => {
                summary.tree_heads += 1;
                summary.largest_tree_size = Some(summary.largest_tree_size.map_or(tree_size, |s| s.max(tree_size)));
            }
        }
    }
    Ok(summary)
}

/// What `input` is, or why it is neither an SCT's nor a tree head's
/// signature input.
pub fn classify(input: &[u8]) -> Result<Kind, String> {
    let mut r = Reader::new(input);
    let (Ok(version), Ok(signature_type)) = (r.u8(), r.u8()) else {
        return Err(format!("{} bytes: too short for version and signature_type", input.len()));
    };
    if version != V1 {
        return Err(format!("version {version} is not v1 (0)"));
    }
    match signature_type {
        CERTIFICATE_TIMESTAMP => sct(r).map_err(|why| format!("SCT input: {why}")),
        TREE_HASH => tree_head(input.len(), r).map_err(|why| format!("tree head input: {why}")),
        t => Err(format!("signature_type {t} is neither certificate_timestamp (0) nor tree_hash (1)")),
    }
}

fn sct(mut r: Reader<'_>) -> Result<Kind, String> {
    let entry = TimestampedEntry::decode(&mut r).map_err(|e| e.to_string())?;
    r.finish().map_err(|e| e.to_string())?;
    entry.entry.check_der()?;
    Ok(Kind::Sct)
}

fn tree_head(len: usize, mut r: Reader<'_>) -> Result<Kind, String> {
    if len != TREE_HEAD_LEN {
        return Err(format!("{len} bytes, not {TREE_HEAD_LEN}"));
    }
    let read = |r: &mut Reader<'_>| -> Result<u64, signet_ct::tls::TlsError> {
        let _timestamp = r.u64()?;
        let tree_size = r.u64()?;
        let _root_hash: [u8; 32] = r.array()?;
        Ok(tree_size)
    };
    let tree_size = read(&mut r).map_err(|e| e.to_string())?;
    r.finish().map_err(|e| e.to_string())?;
    Ok(Kind::TreeHead { tree_size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_ct::rfc6962::SignedEntry;
    use signet_ct::TreeHead;

    /// A self-signed P-256 certificate, DER.
    fn certificate() -> Vec<u8> {
        use openssl::ec::{EcGroup, EcKey};
        use openssl::hash::MessageDigest;
        use openssl::nid::Nid;
        use openssl::pkey::PKey;
        use openssl::x509::{X509NameBuilder, X509};
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "ct.test").unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        b.build().to_der().unwrap()
    }

    fn sct_input(entry: SignedEntry, extensions: Vec<u8>) -> Vec<u8> {
        TimestampedEntry { timestamp: 1_700_000_000_000, entry, extensions }.sct_signature_input().unwrap()
    }

    fn tree_head_input(tree_size: u64) -> Vec<u8> {
        TreeHead { timestamp: 1_700_000_000_000, tree_size, root_hash: [7; 32] }.signature_input()
    }

    #[test]
    fn sct_and_tree_head_inputs_are_accepted() {
        let cert = certificate();
        let tbs = signet_ct::rfc6962::precert::tbs_certificate(&cert).unwrap();
        let inputs = [
            sct_input(SignedEntry::X509(cert.clone()), vec![]),
            sct_input(
                SignedEntry::Precert { issuer_key_hash: [1; 32], tbs_certificate: tbs },
                vec![0, 0, 5, 0, 0, 0, 0, 9],
            ),
            tree_head_input(9),
            tree_head_input(3),
        ];
        let summary = check_all(&inputs).unwrap();
        assert_eq!(summary, Summary { scts: 2, tree_heads: 2, largest_tree_size: Some(9) });
        assert_eq!(summary.outcome(), "ok scts=2 tree-heads=2 tree-size=9");
        assert_eq!(Summary { scts: 3, ..Summary::default() }.outcome(), "ok scts=3 tree-heads=0");
        assert_eq!(classify(&tree_head_input(u64::MAX)), Ok(Kind::TreeHead { tree_size: u64::MAX }));
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let cert = certificate();
        let x509 = sct_input(SignedEntry::X509(cert.clone()), vec![]);
        let th = tree_head_input(1);
        let with = |mut v: Vec<u8>, i: usize, b: u8| {
            v[i] = b;
            v
        };
        let refused = |input: &[u8], why: &str| {
            let e = classify(input).expect_err(why);
            assert!(e.contains(why), "expected `{why}` in: {e}");
        };
        refused(&[], "0 bytes: too short");
        refused(&[0], "1 bytes: too short");
        refused(&with(x509.clone(), 0, 1), "version 1 is not v1");
        refused(&with(th.clone(), 0, 1), "version 1 is not v1");
        refused(&with(x509.clone(), 1, 2), "signature_type 2 is neither");
        refused(&x509[..x509.len() - 1], "SCT input: TLS encoding: truncated");
        refused(&[x509.clone(), vec![0]].concat(), "SCT input: 1 trailing bytes");
        refused(&with(x509.clone(), 11, 2), "unsupported LogEntryType 2");
        refused(&th[..49], "tree head input: 49 bytes, not 50");
        refused(&[th.clone(), vec![0]].concat(), "tree head input: 51 bytes, not 50");
        refused(&[0, 1], "tree head input: 2 bytes, not 50");
        // A certificate that is not DER: garbage, a TBS, a BER long-form length.
        refused(&sct_input(SignedEntry::X509(b"not a certificate".to_vec()), vec![]), "not a DER X.509 Certificate");
        let tbs = signet_ct::rfc6962::precert::tbs_certificate(&cert).unwrap();
        refused(&sct_input(SignedEntry::X509(tbs.clone()), vec![]), "not a DER X.509 Certificate");
        let mut ber = vec![0x30, 0x82];
        ber.extend_from_slice(&((cert.len() - 4) as u16).to_be_bytes());
        ber.extend_from_slice(&cert[4..]);
        ber[1] = 0x83;
        ber.insert(2, 0);
        refused(&sct_input(SignedEntry::X509(ber), vec![]), "not a DER X.509 Certificate");
        // A whole certificate where a TBSCertificate belongs.
        let precert = SignedEntry::Precert { issuer_key_hash: [1; 32], tbs_certificate: cert.clone() };
        refused(&sct_input(precert, vec![]), "not a DER TBSCertificate");
        // The batch is refused at the first bad input, named by index.
        let e = check_all(&[x509.clone(), th.clone(), th[..49].to_vec()]).unwrap_err();
        assert!(e.starts_with("input 2 of 3: tree head input"), "{e}");
    }
}
