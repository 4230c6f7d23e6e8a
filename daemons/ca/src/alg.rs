//! AlgorithmIdentifiers for signd's schemes, and what a subject public key is.

use const_oid::ObjectIdentifier;
use der::asn1::{Null, UintRef};
use der::{Any, Decode, Encode, Sequence};
use sha1::{Digest, Sha1};
use signet_types::{KeyAlgorithm, SignatureScheme};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

use crate::CaError;

/// OIDs used by this crate (spelled out so each one can be checked against its RFC).
pub mod oid {
    use const_oid::ObjectIdentifier as Oid;

    /// id-ecPublicKey (RFC 5480).
    pub const EC_PUBLIC_KEY: Oid = Oid::new_unwrap("1.2.840.10045.2.1");
    /// secp256r1.
    pub const SECP256R1: Oid = Oid::new_unwrap("1.2.840.10045.3.1.7");
    /// secp384r1.
    pub const SECP384R1: Oid = Oid::new_unwrap("1.3.132.0.34");
    /// secp521r1.
    pub const SECP521R1: Oid = Oid::new_unwrap("1.3.132.0.35");
    /// ecdsa-with-SHA256 (RFC 5758).
    pub const ECDSA_SHA256: Oid = Oid::new_unwrap("1.2.840.10045.4.3.2");
    /// ecdsa-with-SHA384.
    pub const ECDSA_SHA384: Oid = Oid::new_unwrap("1.2.840.10045.4.3.3");
    /// ecdsa-with-SHA512.
    pub const ECDSA_SHA512: Oid = Oid::new_unwrap("1.2.840.10045.4.3.4");
    /// id-Ed25519 (RFC 8410); both the key and the signature algorithm.
    pub const ED25519: Oid = Oid::new_unwrap("1.3.101.112");
    /// rsaEncryption.
    pub const RSA_ENCRYPTION: Oid = Oid::new_unwrap("1.2.840.113549.1.1.1");
    /// id-RSASSA-PSS (RFC 4055).
    pub const RSASSA_PSS: Oid = Oid::new_unwrap("1.2.840.113549.1.1.10");
    /// id-mgf1.
    pub const MGF1: Oid = Oid::new_unwrap("1.2.840.113549.1.1.8");
    /// sha256WithRSAEncryption.
    pub const RSA_SHA256: Oid = Oid::new_unwrap("1.2.840.113549.1.1.11");
    /// sha384WithRSAEncryption.
    pub const RSA_SHA384: Oid = Oid::new_unwrap("1.2.840.113549.1.1.12");
    /// sha512WithRSAEncryption.
    pub const RSA_SHA512: Oid = Oid::new_unwrap("1.2.840.113549.1.1.13");
    /// id-sha1.
    pub const SHA1: Oid = Oid::new_unwrap("1.3.14.3.2.26");
    /// id-sha256.
    pub const SHA256: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.1");
    /// id-sha384.
    pub const SHA384: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.2");
    /// id-sha512.
    pub const SHA512: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.3");
    /// id-ml-dsa-44 (FIPS 204, RFC 9881).
    pub const ML_DSA_44: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.3.17");
    /// id-ml-dsa-65.
    pub const ML_DSA_65: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.3.18");
    /// id-ml-dsa-87.
    pub const ML_DSA_87: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.3.19");
    /// id-pe-tlsfeature (RFC 7633), used for OCSP must-staple.
    pub const TLS_FEATURE: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.1.24");
    /// id-pkix-ocsp-nocheck (RFC 6960 4.2.2.2.1).
    pub const OCSP_NOCHECK: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.48.1.5");
    /// id-pkix-ocsp-nonce.
    pub const OCSP_NONCE: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.48.1.2");
    /// id-ad-ocsp.
    pub const AD_OCSP: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.48.1");
    /// id-ad-caIssuers.
    pub const AD_CA_ISSUERS: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.48.2");
    /// pkcs-9 extensionRequest.
    pub const EXTENSION_REQUEST: Oid = Oid::new_unwrap("1.2.840.113549.1.9.14");
}

/// RSASSA-PSS-params (RFC 4055). All three fields are written out: none is the
/// SHA-1 default, and the trailer field's default (1) is omitted.
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct PssParams {
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT")]
    hash: AlgorithmIdentifierOwned,
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT")]
    mask_gen: AlgorithmIdentifierOwned,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT")]
    salt_len: u32,
}

/// RSAPublicKey (RFC 8017); only the modulus length is used.
#[derive(Sequence)]
struct RsaPublicKey<'a> {
    modulus: UintRef<'a>,
    #[allow(dead_code)]
    public_exponent: UintRef<'a>,
}

/// The signature AlgorithmIdentifier for `scheme`, as it appears in certificates,
/// CRLs and OCSP responses.
///
/// ECDSA, Ed25519 and ML-DSA have absent parameters; PKCS#1 v1.5 has NULL; PSS has
/// explicit parameters (hash, MGF1 with the same hash, salt = hash length) encoded
/// byte-for-byte as the CA/Browser Forum Baseline Requirements (7.1.3.2) list them.
pub fn signature_algorithm(scheme: SignatureScheme) -> Result<AlgorithmIdentifierOwned, CaError> {
    use SignatureScheme as S;
    let absent = |oid| Ok(AlgorithmIdentifierOwned { oid, parameters: None });
    let null = |oid| Ok(AlgorithmIdentifierOwned { oid, parameters: Some(Any::from(Null)) });
    match scheme {
        S::Default => Err(CaError::UnresolvedScheme),
        S::EcdsaSha256 => absent(oid::ECDSA_SHA256),
        S::EcdsaSha384 => absent(oid::ECDSA_SHA384),
        S::EcdsaSha512 => absent(oid::ECDSA_SHA512),
        S::Ed25519 => absent(oid::ED25519),
        S::RsaPkcs1Sha256 => null(oid::RSA_SHA256),
        S::RsaPkcs1Sha384 => null(oid::RSA_SHA384),
        S::RsaPkcs1Sha512 => null(oid::RSA_SHA512),
        S::RsaPssSha256 => pss(oid::SHA256, 32),
        S::RsaPssSha384 => pss(oid::SHA384, 48),
        S::RsaPssSha512 => pss(oid::SHA512, 64),
        S::MlDsa44 => absent(oid::ML_DSA_44),
        S::MlDsa65 => absent(oid::ML_DSA_65),
        S::MlDsa87 => absent(oid::ML_DSA_87),
    }
}

fn pss(hash: ObjectIdentifier, salt_len: u32) -> Result<AlgorithmIdentifierOwned, CaError> {
    let hash = AlgorithmIdentifierOwned { oid: hash, parameters: Some(Any::from(Null)) };
    let mask_gen = AlgorithmIdentifierOwned { oid: oid::MGF1, parameters: Some(Any::encode_from(&hash)?) };
    let params = PssParams { hash, mask_gen, salt_len };
    Ok(AlgorithmIdentifierOwned { oid: oid::RSASSA_PSS, parameters: Some(Any::encode_from(&params)?) })
}

/// Which of signd's algorithms the key in a SubjectPublicKeyInfo is.
pub fn key_algorithm_of_spki(spki: &SubjectPublicKeyInfoOwned) -> Result<KeyAlgorithm, CaError> {
    let alg = &spki.algorithm;
    let key_bytes = spki.subject_public_key.as_bytes().ok_or_else(|| unsupported("public key is not whole octets"))?;
    let no_params = || match &alg.parameters {
        None => Ok(()),
        Some(_) => Err(unsupported(format!("{} key with parameters", alg.oid))),
    };
    match alg.oid {
        oid::EC_PUBLIC_KEY => {
            let curve = alg
                .parameters
                .as_ref()
                .and_then(|p| p.decode_as::<ObjectIdentifier>().ok())
                .ok_or_else(|| unsupported("EC key without a named curve"))?;
            match curve {
                oid::SECP256R1 => Ok(KeyAlgorithm::EcP256),
                oid::SECP384R1 => Ok(KeyAlgorithm::EcP384),
                oid::SECP521R1 => Ok(KeyAlgorithm::EcP521),
                other => Err(unsupported(format!("EC curve {other}"))),
            }
        }
        oid::ED25519 => no_params().map(|()| KeyAlgorithm::Ed25519),
        oid::RSA_ENCRYPTION => {
            let key = RsaPublicKey::from_der(key_bytes).map_err(CaError::malformed("RSAPublicKey"))?;
            let m = key.modulus.as_bytes();
            let bits = match m.first() {
                Some(&b) => (m.len() - 1) * 8 + (8 - b.leading_zeros() as usize),
                None => 0,
            };
            match bits {
                2048 => Ok(KeyAlgorithm::Rsa2048),
                3072 => Ok(KeyAlgorithm::Rsa3072),
                4096 => Ok(KeyAlgorithm::Rsa4096),
                b => Err(unsupported(format!("RSA with a {b}-bit modulus"))),
            }
        }
        oid::ML_DSA_44 => no_params().map(|()| KeyAlgorithm::MlDsa44),
        oid::ML_DSA_65 => no_params().map(|()| KeyAlgorithm::MlDsa65),
        oid::ML_DSA_87 => no_params().map(|()| KeyAlgorithm::MlDsa87),
        other => Err(unsupported(format!("key algorithm {other}"))),
    }
}

fn unsupported(what: impl Into<String>) -> CaError {
    CaError::UnsupportedKey(what.into())
}

/// Parses SubjectPublicKeyInfo DER.
pub fn parse_spki(spki_der: &[u8]) -> Result<SubjectPublicKeyInfoOwned, CaError> {
    SubjectPublicKeyInfoOwned::from_der(spki_der).map_err(CaError::malformed("SubjectPublicKeyInfo"))
}

/// The subjectKeyIdentifier of a key: SHA-1 of the subjectPublicKey BIT STRING's
/// bits (RFC 5280 4.2.1.2, method 1). Also the OCSP responder's `byKey` hash.
pub fn subject_key_identifier(spki: &SubjectPublicKeyInfoOwned) -> Vec<u8> {
    Sha1::digest(spki.subject_public_key.raw_bytes()).to_vec()
}

/// Resolves `scheme` for a CA key and checks that the two fit.
pub(crate) fn resolve_scheme(key: KeyAlgorithm, scheme: SignatureScheme) -> Result<SignatureScheme, CaError> {
    key.resolve(scheme).map_err(|e| CaError::SchemeKeyMismatch { scheme: e.scheme, key: e.key })
}

/// DER of anything encodable (a tiny helper so call sites read well).
pub(crate) fn to_der(v: &impl Encode) -> Result<Vec<u8>, CaError> {
    v.to_der().map_err(CaError::Encode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pss_sha256_matches_baseline_requirements_bytes() {
        // CA/B Forum BR 7.1.3.2.1, RSASSA-PSS with SHA-256, MGF-1 with SHA-256, salt 32.
        let want = "304106092a864886f70d01010a3034a00f300d06096086480165030402010500a11c301a06092a864886f70d010108300d06096086480165030402010500a203020120";
        let got = signature_algorithm(SignatureScheme::RsaPssSha256).unwrap().to_der().unwrap();
        assert_eq!(hex::encode(got), want);
        let want384 = "304106092a864886f70d01010a3034a00f300d06096086480165030402020500a11c301a06092a864886f70d010108300d06096086480165030402020500a203020130";
        let got = signature_algorithm(SignatureScheme::RsaPssSha384).unwrap().to_der().unwrap();
        assert_eq!(hex::encode(got), want384);
    }

    #[test]
    fn simple_algorithm_identifiers() {
        let hex_of = |s| hex::encode(signature_algorithm(s).unwrap().to_der().unwrap());
        assert_eq!(hex_of(SignatureScheme::EcdsaSha256), "300a06082a8648ce3d040302");
        assert_eq!(hex_of(SignatureScheme::Ed25519), "300506032b6570");
        assert_eq!(hex_of(SignatureScheme::RsaPkcs1Sha256), "300d06092a864886f70d01010b0500");
        assert_eq!(hex_of(SignatureScheme::MlDsa44), "300b0609608648016503040311");
        assert_eq!(hex_of(SignatureScheme::MlDsa87), "300b0609608648016503040313");
        assert!(matches!(signature_algorithm(SignatureScheme::Default), Err(CaError::UnresolvedScheme)));
    }

    #[test]
    fn key_algorithms_from_real_keys() {
        for alg in KeyAlgorithm::ALL {
            if matches!(alg, KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096) {
                continue; // slow to generate; RSA size detection is covered by 2048
            }
            let key = crate::testutil::generate(alg);
            let spki = parse_spki(&key.public_key_to_der().unwrap()).unwrap();
            assert_eq!(key_algorithm_of_spki(&spki).unwrap(), alg);
        }
    }
}
