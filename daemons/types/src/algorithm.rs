//! Key algorithms and signature schemes, with the one table of which digest
//! and padding each scheme uses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{SchemeMismatch, UnknownName};

/// The algorithm of a key pair.
// Exhaustive on purpose: adding an algorithm must make every match in signd
// and its backends fail to compile until it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeyAlgorithm {
    /// ECDSA over NIST P-256.
    EcP256,
    /// ECDSA over NIST P-384.
    EcP384,
    /// ECDSA over NIST P-521.
    EcP521,
    /// Ed25519 (RFC 8032).
    Ed25519,
    /// RSA with a 2048-bit modulus.
    Rsa2048,
    /// RSA with a 3072-bit modulus.
    Rsa3072,
    /// RSA with a 4096-bit modulus.
    Rsa4096,
    /// ML-DSA-44 (FIPS 204).
    MlDsa44,
    /// ML-DSA-65 (FIPS 204).
    MlDsa65,
    /// ML-DSA-87 (FIPS 204).
    MlDsa87,
}

impl KeyAlgorithm {
    /// Every algorithm, in a stable order.
    pub const ALL: [KeyAlgorithm; 10] = [
        Self::EcP256,
        Self::EcP384,
        Self::EcP521,
        Self::Ed25519,
        Self::Rsa2048,
        Self::Rsa3072,
        Self::Rsa4096,
        Self::MlDsa44,
        Self::MlDsa65,
        Self::MlDsa87,
    ];

    /// The name used in config files, the CLI and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::EcP256 => "ecdsa-p256",
            Self::EcP384 => "ecdsa-p384",
            Self::EcP521 => "ecdsa-p521",
            Self::Ed25519 => "ed25519",
            Self::Rsa2048 => "rsa-2048",
            Self::Rsa3072 => "rsa-3072",
            Self::Rsa4096 => "rsa-4096",
            Self::MlDsa44 => "ml-dsa-44",
            Self::MlDsa65 => "ml-dsa-65",
            Self::MlDsa87 => "ml-dsa-87",
        }
    }

    /// The scheme used when a caller asks for [`SignatureScheme::Default`].
    pub fn default_scheme(self) -> SignatureScheme {
        match self {
            Self::EcP256 => SignatureScheme::EcdsaSha256,
            Self::EcP384 => SignatureScheme::EcdsaSha384,
            Self::EcP521 => SignatureScheme::EcdsaSha512,
            Self::Ed25519 => SignatureScheme::Ed25519,
            Self::Rsa2048 | Self::Rsa3072 | Self::Rsa4096 => SignatureScheme::RsaPkcs1Sha256,
            Self::MlDsa44 => SignatureScheme::MlDsa44,
            Self::MlDsa65 => SignatureScheme::MlDsa65,
            Self::MlDsa87 => SignatureScheme::MlDsa87,
        }
    }

    /// Whether `scheme` can be used with a key of this algorithm.
    pub fn allows(self, scheme: SignatureScheme) -> bool {
        use SignatureScheme as S;
        match self {
            Self::EcP256 | Self::EcP384 | Self::EcP521 => {
                matches!(scheme, S::EcdsaSha256 | S::EcdsaSha384 | S::EcdsaSha512)
            }
            Self::Ed25519 => scheme == S::Ed25519,
            Self::Rsa2048 | Self::Rsa3072 | Self::Rsa4096 => matches!(
                scheme,
                S::RsaPkcs1Sha256
                    | S::RsaPkcs1Sha384
                    | S::RsaPkcs1Sha512
                    | S::RsaPssSha256
                    | S::RsaPssSha384
                    | S::RsaPssSha512
            ),
            Self::MlDsa44 => scheme == S::MlDsa44,
            Self::MlDsa65 => scheme == S::MlDsa65,
            Self::MlDsa87 => scheme == S::MlDsa87,
        }
    }

    /// Resolves `Default` to the key's default scheme and checks the result
    /// fits. The scheme returned is never `Default`, so its
    /// [`digest`](SignatureScheme::digest) and [`is_pss`](SignatureScheme::is_pss)
    /// say how this key signs.
    pub fn resolve(self, scheme: SignatureScheme) -> Result<SignatureScheme, SchemeMismatch> {
        let scheme = match scheme {
            SignatureScheme::Default => self.default_scheme(),
            s => s,
        };
        if self.allows(scheme) {
            Ok(scheme)
        } else {
            Err(SchemeMismatch { scheme, key: self })
        }
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyAlgorithm {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|a| a.name()).collect();
            UnknownName::new("key algorithm", s, format!("expected one of {}", names.join(", ")))
        })
    }
}

/// How to sign. The caller always sends the whole message; signd hashes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SignatureScheme {
    /// The key's own default scheme ([`KeyAlgorithm::default_scheme`]).
    Default,
    /// ECDSA with SHA-256; signature is DER `Ecdsa-Sig-Value`.
    EcdsaSha256,
    /// ECDSA with SHA-384.
    EcdsaSha384,
    /// ECDSA with SHA-512.
    EcdsaSha512,
    /// Ed25519 (pure).
    Ed25519,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RsaPkcs1Sha256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RsaPkcs1Sha384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RsaPkcs1Sha512,
    /// RSASSA-PSS with SHA-256, MGF1-SHA-256, salt length = hash length.
    RsaPssSha256,
    /// RSASSA-PSS with SHA-384, MGF1-SHA-384, salt length = hash length.
    RsaPssSha384,
    /// RSASSA-PSS with SHA-512, MGF1-SHA-512, salt length = hash length.
    RsaPssSha512,
    /// ML-DSA-44, pure mode, empty context.
    MlDsa44,
    /// ML-DSA-65, pure mode, empty context.
    MlDsa65,
    /// ML-DSA-87, pure mode, empty context.
    MlDsa87,
}

impl SignatureScheme {
    /// Every scheme, in a stable order.
    pub const ALL: [SignatureScheme; 14] = [
        Self::Default,
        Self::EcdsaSha256,
        Self::EcdsaSha384,
        Self::EcdsaSha512,
        Self::Ed25519,
        Self::RsaPkcs1Sha256,
        Self::RsaPkcs1Sha384,
        Self::RsaPkcs1Sha512,
        Self::RsaPssSha256,
        Self::RsaPssSha384,
        Self::RsaPssSha512,
        Self::MlDsa44,
        Self::MlDsa65,
        Self::MlDsa87,
    ];

    /// The name used in the CLI and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::EcdsaSha256 => "ecdsa-sha256",
            Self::EcdsaSha384 => "ecdsa-sha384",
            Self::EcdsaSha512 => "ecdsa-sha512",
            Self::Ed25519 => "ed25519",
            Self::RsaPkcs1Sha256 => "rsa-pkcs1-sha256",
            Self::RsaPkcs1Sha384 => "rsa-pkcs1-sha384",
            Self::RsaPkcs1Sha512 => "rsa-pkcs1-sha512",
            Self::RsaPssSha256 => "rsa-pss-sha256",
            Self::RsaPssSha384 => "rsa-pss-sha384",
            Self::RsaPssSha512 => "rsa-pss-sha512",
            Self::MlDsa44 => "ml-dsa-44",
            Self::MlDsa65 => "ml-dsa-65",
            Self::MlDsa87 => "ml-dsa-87",
        }
    }

    /// The digest the message is hashed with before it is signed (for PSS,
    /// also MGF1's digest). [`DigestAlgorithm::None`] for the pure schemes
    /// (Ed25519, ML-DSA), which sign the message itself, and for `Default`,
    /// which has no digest of its own until
    /// [`KeyAlgorithm::resolve`] turns it into the key's scheme.
    pub fn digest(self) -> DigestAlgorithm {
        match self {
            Self::EcdsaSha256 | Self::RsaPkcs1Sha256 | Self::RsaPssSha256 => DigestAlgorithm::Sha256,
            Self::EcdsaSha384 | Self::RsaPkcs1Sha384 | Self::RsaPssSha384 => DigestAlgorithm::Sha384,
            Self::EcdsaSha512 | Self::RsaPkcs1Sha512 | Self::RsaPssSha512 => DigestAlgorithm::Sha512,
            Self::Ed25519 | Self::MlDsa44 | Self::MlDsa65 | Self::MlDsa87 | Self::Default => DigestAlgorithm::None,
        }
    }

    /// Whether the scheme pads with RSASSA-PSS (MGF1 with [`digest`](Self::digest),
    /// salt as long as the digest).
    pub fn is_pss(self) -> bool {
        matches!(self, Self::RsaPssSha256 | Self::RsaPssSha384 | Self::RsaPssSha512)
    }
}

impl fmt::Display for SignatureScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SignatureScheme {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|a| a.name()).collect();
            UnknownName::new("signature scheme", s, format!("expected one of {}", names.join(", ")))
        })
    }
}

/// The hash a [`SignatureScheme`] signs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DigestAlgorithm {
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
    /// No digest: the scheme signs the message itself (pure mode).
    None,
}

impl DigestAlgorithm {
    /// The digest's length in bytes (0 for [`DigestAlgorithm::None`]); also
    /// the PSS salt length.
    pub fn output_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha384 => 48,
            Self::Sha512 => 64,
            Self::None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn names_round_trip() {
        for a in KeyAlgorithm::ALL {
            assert_eq!(a.name().parse::<KeyAlgorithm>(), Ok(a));
            assert!(a.allows(a.default_scheme()), "{a}");
        }
        for s in SignatureScheme::ALL {
            assert_eq!(s.name().parse::<SignatureScheme>(), Ok(s));
        }
        assert_eq!("nope".parse::<KeyAlgorithm>().map_err(|e| e.kind()), Err(ErrorKind::InvalidArgument));
        let err = "nope".parse::<SignatureScheme>().unwrap_err().to_string();
        assert!(err.starts_with("unknown signature scheme `nope` (expected one of default, "), "{err}");
    }

    #[test]
    fn resolve_checks_the_key() {
        assert_eq!(KeyAlgorithm::EcP384.resolve(SignatureScheme::Default), Ok(SignatureScheme::EcdsaSha384));
        assert_eq!(KeyAlgorithm::Rsa2048.resolve(SignatureScheme::RsaPssSha512), Ok(SignatureScheme::RsaPssSha512));
        let Err(err) = KeyAlgorithm::Ed25519.resolve(SignatureScheme::EcdsaSha256) else { panic!("accepted") };
        assert_eq!(err.kind(), ErrorKind::WrongAlgorithm);
        assert_eq!(err.to_string(), "scheme ecdsa-sha256 cannot be used with a ed25519 key");
        assert!(KeyAlgorithm::MlDsa44.resolve(SignatureScheme::MlDsa65).is_err());
    }

    #[test]
    fn every_scheme_a_key_resolves_to_has_its_digest_and_padding() {
        for a in KeyAlgorithm::ALL {
            for s in SignatureScheme::ALL {
                let Ok(s) = a.resolve(s) else { continue };
                // The names spell out the table: "...-sha384" hashes with SHA-384, "rsa-pss-..." pads with PSS.
                let digest = match s.name().rsplit('-').next() {
                    Some("sha256") => DigestAlgorithm::Sha256,
                    Some("sha384") => DigestAlgorithm::Sha384,
                    Some("sha512") => DigestAlgorithm::Sha512,
                    _ => DigestAlgorithm::None,
                };
                assert_eq!(s.digest(), digest, "{s}");
                assert_eq!(s.is_pss(), s.name().starts_with("rsa-pss-"), "{s}");
                assert_ne!(s, SignatureScheme::Default);
            }
        }
        assert_eq!(DigestAlgorithm::Sha384.output_len(), 48);
    }
}
