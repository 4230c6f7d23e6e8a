//! Certificate keys: the `--key-type` values, key generation, CSRs, and
//! telling which key type a certificate's issuer has (to check
//! `--ca-key-type` against what the CA really signs with).

use std::fmt;
use std::str::FromStr;

use openssl::ec::{EcGroup, EcKey};
use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{HasPublic, Id, KeyType as EvpKeyType, PKey, PKeyRef, Private};
use openssl::rsa::Rsa;
use openssl::stack::Stack;
use openssl::x509::extension::SubjectAlternativeName;
use openssl::x509::{X509Ref, X509ReqBuilder};

use super::IdentifierKind;

/// A key type, as `--key-type` and `--ca-key-type` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// ECDSA on P-256 (`ec:P-256`).
    EcP256,
    /// ECDSA on P-384 (`ec:P-384`).
    EcP384,
    /// Ed25519 (`ed25519`).
    Ed25519,
    /// RSA with a 2048-bit modulus (`rsa:2048`).
    Rsa2048,
    /// RSA with a 3072-bit modulus (`rsa:3072`).
    Rsa3072,
    /// RSA with a 4096-bit modulus (`rsa:4096`).
    Rsa4096,
    /// ML-DSA-44, FIPS 204 category 2 (`ml-dsa-44`).
    MlDsa44,
    /// ML-DSA-65, FIPS 204 category 3 (`ml-dsa-65`).
    MlDsa65,
    /// ML-DSA-87, FIPS 204 category 5 (`ml-dsa-87`).
    MlDsa87,
}

impl KeyType {
    /// Every key type, in the order `--help` lists them.
    pub const ALL: [KeyType; 9] = [
        KeyType::EcP256,
        KeyType::EcP384,
        KeyType::Ed25519,
        KeyType::Rsa2048,
        KeyType::Rsa3072,
        KeyType::Rsa4096,
        KeyType::MlDsa44,
        KeyType::MlDsa65,
        KeyType::MlDsa87,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::EcP256 => "ec:P-256",
            KeyType::EcP384 => "ec:P-384",
            KeyType::Ed25519 => "ed25519",
            KeyType::Rsa2048 => "rsa:2048",
            KeyType::Rsa3072 => "rsa:3072",
            KeyType::Rsa4096 => "rsa:4096",
            KeyType::MlDsa44 => "ml-dsa-44",
            KeyType::MlDsa65 => "ml-dsa-65",
            KeyType::MlDsa87 => "ml-dsa-87",
        }
    }

    /// Generates a fresh private key of this type.
    pub fn generate(self) -> Result<PKey<Private>, ErrorStack> {
        let ec = |nid| EcGroup::from_curve_name(nid).and_then(|g| EcKey::generate(&g)).and_then(PKey::from_ec_key);
        let rsa = |bits| Rsa::generate(bits).and_then(PKey::from_rsa);
        // ML-DSA through OpenSSL 3.5's provider API: a key from a random
        // 32-byte seed (FIPS 204 key generation), as signd makes them.
        let ml_dsa = |kind| {
            let mut seed = [0u8; 32];
            openssl::rand::rand_bytes(&mut seed)?;
            PKey::private_key_from_seed(None, kind, None, &seed)
        };
        match self {
            KeyType::EcP256 => ec(Nid::X9_62_PRIME256V1),
            KeyType::EcP384 => ec(Nid::SECP384R1),
            KeyType::Ed25519 => PKey::generate_ed25519(),
            KeyType::Rsa2048 => rsa(2048),
            KeyType::Rsa3072 => rsa(3072),
            KeyType::Rsa4096 => rsa(4096),
            KeyType::MlDsa44 => ml_dsa(EvpKeyType::ML_DSA_44),
            KeyType::MlDsa65 => ml_dsa(EvpKeyType::ML_DSA_65),
            KeyType::MlDsa87 => ml_dsa(EvpKeyType::ML_DSA_87),
        }
    }

    /// Whether making a key and its CSR is cheap enough (tens of
    /// microseconds) to do on the client's own thread rather than hand to a
    /// blocking thread and back, which costs more than the work.
    pub fn is_quick(self) -> bool {
        matches!(self, KeyType::EcP256 | KeyType::EcP384 | KeyType::Ed25519)
    }

    /// The digest a CSR self-signature uses with this key: none for the
    /// algorithms that sign the message itself (Ed25519, ML-DSA).
    pub fn csr_digest(self) -> MessageDigest {
        match self {
            KeyType::EcP384 => MessageDigest::sha384(),
            KeyType::EcP256 | KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => MessageDigest::sha256(),
            KeyType::Ed25519 | KeyType::MlDsa44 | KeyType::MlDsa65 | KeyType::MlDsa87 => MessageDigest::null(),
        }
    }

    /// The key type of a public key, if it is one of ours.
    pub fn of<T: HasPublic>(key: &PKeyRef<T>) -> Option<KeyType> {
        match key.id() {
            Id::EC => match key.ec_key().ok()?.group().curve_name()? {
                Nid::X9_62_PRIME256V1 => Some(KeyType::EcP256),
                Nid::SECP384R1 => Some(KeyType::EcP384),
                _ => None,
            },
            Id::ED25519 => Some(KeyType::Ed25519),
            Id::RSA => match key.bits() {
                2048 => Some(KeyType::Rsa2048),
                3072 => Some(KeyType::Rsa3072),
                4096 => Some(KeyType::Rsa4096),
                _ => None,
            },
            _ if key.is_a(EvpKeyType::ML_DSA_44) => Some(KeyType::MlDsa44),
            _ if key.is_a(EvpKeyType::ML_DSA_65) => Some(KeyType::MlDsa65),
            _ if key.is_a(EvpKeyType::ML_DSA_87) => Some(KeyType::MlDsa87),
            _ => None,
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyType {
    type Err = String;

    /// Parses a name as [`KeyType::name`] gives it (case-insensitive).
    fn from_str(s: &str) -> Result<KeyType, String> {
        KeyType::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(s)).ok_or_else(|| {
            let names: Vec<&str> = KeyType::ALL.iter().map(|k| k.name()).collect();
            format!("unknown key type {s:?} (one of {})", names.join(", "))
        })
    }
}

/// A DER PKCS#10 request for `identifier` (a DNS name or an IP address,
/// after `kind`) signed by `key`: an empty subject and the identifier as the
/// only subjectAltName, as RFC 8555 §7.4 lets a client send.
pub fn csr(
    key: &PKeyRef<Private>,
    key_type: KeyType,
    kind: IdentifierKind,
    identifier: &str,
) -> Result<Vec<u8>, ErrorStack> {
    let mut builder = X509ReqBuilder::new()?;
    builder.set_pubkey(key)?;
    let mut san = SubjectAlternativeName::new();
    match kind {
        IdentifierKind::Dns => san.dns(identifier),
        IdentifierKind::Ip => san.ip(identifier),
    };
    let mut extensions = Stack::new()?;
    extensions.push(san.build(&builder.x509v3_context(None))?)?;
    builder.add_extensions(&extensions)?;
    builder.sign(key, key_type.csr_digest())?;
    builder.build().to_der()
}

/// The key type of the CA that issued `leaf`: from `issuer`'s public key when
/// the chain carries the issuer, else guessed from the leaf's signature
/// algorithm and size (which cannot tell RSA sizes from the OID alone; the
/// signature length gives the modulus size).
pub fn issuer_key_type(leaf: &X509Ref, issuer: Option<&X509Ref>) -> Option<KeyType> {
    if let Some(issuer) = issuer {
        if let Ok(key) = issuer.public_key() {
            return KeyType::of(&key);
        }
    }
    let nid = leaf.signature_algorithm().object().nid();
    let sig_len = leaf.signature().len();
    match nid {
        Nid::ECDSA_WITH_SHA256 => Some(KeyType::EcP256),
        Nid::ECDSA_WITH_SHA384 => Some(KeyType::EcP384),
        // The crate names no NID for Ed25519; the EVP key id is the NID.
        n if n == Nid::from_raw(Id::ED25519.as_raw()) => Some(KeyType::Ed25519),
        Nid::SHA256WITHRSAENCRYPTION | Nid::SHA384WITHRSAENCRYPTION | Nid::SHA512WITHRSAENCRYPTION => {
            match sig_len * 8 {
                2048 => Some(KeyType::Rsa2048),
                3072 => Some(KeyType::Rsa3072),
                4096 => Some(KeyType::Rsa4096),
                _ => None,
            }
        }
        _ => match leaf.signature_algorithm().object().to_string().as_str() {
            // id-ml-dsa-44/65/87 (2.16.840.1.101.3.4.3.17/18/19); OpenSSL names them.
            "ML-DSA-44" | "2.16.840.1.101.3.4.3.17" => Some(KeyType::MlDsa44),
            "ML-DSA-65" | "2.16.840.1.101.3.4.3.18" => Some(KeyType::MlDsa65),
            "ML-DSA-87" | "2.16.840.1.101.3.4.3.19" => Some(KeyType::MlDsa87),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use openssl::asn1::Asn1Time;
    use openssl::x509::{X509Builder, X509NameBuilder, X509Req};

    use super::*;

    #[test]
    fn names_round_trip() {
        for k in KeyType::ALL {
            assert_eq!(k.name().parse::<KeyType>().unwrap(), k);
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!("EC:p-256".parse::<KeyType>().unwrap(), KeyType::EcP256);
        assert!("rsa:1024".parse::<KeyType>().unwrap_err().contains("ml-dsa-87"));
    }

    /// Every key type makes a CSR that OpenSSL verifies and that signet-ca,
    /// the CA's own CSR parser, accepts with the right key and SAN.
    #[test]
    fn csr_of_every_key_type_verifies() {
        for k in KeyType::ALL {
            let key = k.generate().unwrap();
            assert_eq!(KeyType::of(&key), Some(k), "{k}");
            let der = csr(&key, k, IdentifierKind::Dns, "c0-1.bench.test").unwrap();
            let req = X509Req::from_der(&der).unwrap();
            assert!(req.verify(&req.public_key().unwrap()).unwrap(), "{k}");
            let parsed = signet_ca::parse_csr(&der).unwrap_or_else(|e| panic!("{k}: {e}"));
            assert_eq!(parsed.sans, vec![signet_ca::SanEntry::Dns("c0-1.bench.test".into())], "{k}");
            assert_eq!(parsed.spki_der, key.public_key_to_der().unwrap(), "{k}");
        }
    }

    #[test]
    fn ip_csr_carries_an_ip_san() {
        let key = KeyType::EcP256.generate().unwrap();
        let der = csr(&key, KeyType::EcP256, IdentifierKind::Ip, "127.0.0.1").unwrap();
        let parsed = signet_ca::parse_csr(&der).unwrap();
        assert_eq!(parsed.sans, vec![signet_ca::SanEntry::Ip("127.0.0.1".parse().unwrap())]);
    }

    fn self_signed(key: &PKeyRef<Private>, digest: MessageDigest) -> openssl::x509::X509 {
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "bench CA").unwrap();
        let name = name.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap()).unwrap();
        b.sign(key, digest).unwrap();
        b.build()
    }

    /// The issuer's key type, from the issuer certificate and from the
    /// leaf's signature alone.
    #[test]
    fn issuer_key_type_from_key_or_signature() {
        for k in KeyType::ALL {
            let key = k.generate().unwrap();
            let cert = self_signed(&key, k.csr_digest());
            assert_eq!(issuer_key_type(&cert, Some(&cert)), Some(k), "{k} from the issuer's key");
            assert_eq!(issuer_key_type(&cert, None), Some(k), "{k} from the signature");
        }
    }
}
