//! The JWS algorithms Signet knows (RFC 7518 §3, RFC 8037 §3.1, RFC 9964) and
//! their signing and verification with OpenSSL.

use openssl::bn::BigNum;
use openssl::ecdsa::EcdsaSig;
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, PKeyRef, Private, Public};
use openssl::rsa::Padding;
use openssl::sign::{RsaPssSaltlen, Signer, Verifier};
use sha2::{Digest, Sha256, Sha384, Sha512};

use signet_types::{KeyAlgorithm, SignatureScheme};

use crate::jwk::{Jwk, KeyKind};
use crate::JoseError;

/// A JWS signature algorithm (asymmetric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// ECDSA P-384 with SHA-384.
    Es384,
    /// ECDSA P-521 with SHA-512.
    Es512,
    /// EdDSA with Ed25519 (RFC 8037).
    EdDsa,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PSS with SHA-256, MGF1-SHA-256 and a 32-byte salt.
    Ps256,
    /// ML-DSA-44 (FIPS 204, pure, empty context; RFC 9964).
    MlDsa44,
    /// ML-DSA-65.
    MlDsa65,
    /// ML-DSA-87.
    MlDsa87,
}

impl Algorithm {
    /// Every algorithm.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::Es256,
        Algorithm::Es384,
        Algorithm::Es512,
        Algorithm::EdDsa,
        Algorithm::Rs256,
        Algorithm::Ps256,
        Algorithm::MlDsa44,
        Algorithm::MlDsa65,
        Algorithm::MlDsa87,
    ];

    /// The `alg` name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Es256 => "ES256",
            Algorithm::Es384 => "ES384",
            Algorithm::Es512 => "ES512",
            Algorithm::EdDsa => "EdDSA",
            Algorithm::Rs256 => "RS256",
            Algorithm::Ps256 => "PS256",
            Algorithm::MlDsa44 => "ML-DSA-44",
            Algorithm::MlDsa65 => "ML-DSA-65",
            Algorithm::MlDsa87 => "ML-DSA-87",
        }
    }

    /// Parses an `alg` value. `none`, MAC algorithms and anything unknown are
    /// refused.
    pub fn from_name(name: &str) -> Result<Algorithm, JoseError> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| JoseError::UnsupportedAlgorithm(name.to_owned()))
    }

    /// The signd scheme that makes this algorithm's signatures.
    pub fn scheme(self) -> SignatureScheme {
        match self {
            Algorithm::Es256 => SignatureScheme::EcdsaSha256,
            Algorithm::Es384 => SignatureScheme::EcdsaSha384,
            Algorithm::Es512 => SignatureScheme::EcdsaSha512,
            Algorithm::EdDsa => SignatureScheme::Ed25519,
            Algorithm::Rs256 => SignatureScheme::RsaPkcs1Sha256,
            Algorithm::Ps256 => SignatureScheme::RsaPssSha256,
            Algorithm::MlDsa44 => SignatureScheme::MlDsa44,
            Algorithm::MlDsa65 => SignatureScheme::MlDsa65,
            Algorithm::MlDsa87 => SignatureScheme::MlDsa87,
        }
    }

    /// Does a signd key of this algorithm go with this JWS algorithm?
    pub fn fits_key(self, key: KeyAlgorithm) -> bool {
        matches!(
            (self, key),
            (Algorithm::Es256, KeyAlgorithm::EcP256)
                | (Algorithm::Es384, KeyAlgorithm::EcP384)
                | (Algorithm::Es512, KeyAlgorithm::EcP521)
                | (Algorithm::EdDsa, KeyAlgorithm::Ed25519)
                | (
                    Algorithm::Rs256 | Algorithm::Ps256,
                    KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096
                )
                | (Algorithm::MlDsa44, KeyAlgorithm::MlDsa44)
                | (Algorithm::MlDsa65, KeyAlgorithm::MlDsa65)
                | (Algorithm::MlDsa87, KeyAlgorithm::MlDsa87)
        )
    }

    /// The JWS algorithm for a signd key (RSA keys: RS256).
    pub fn default_for(key: KeyAlgorithm) -> Algorithm {
        match key {
            KeyAlgorithm::EcP256 => Algorithm::Es256,
            KeyAlgorithm::EcP384 => Algorithm::Es384,
            KeyAlgorithm::EcP521 => Algorithm::Es512,
            KeyAlgorithm::Ed25519 => Algorithm::EdDsa,
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => Algorithm::Rs256,
            KeyAlgorithm::MlDsa44 => Algorithm::MlDsa44,
            KeyAlgorithm::MlDsa65 => Algorithm::MlDsa65,
            KeyAlgorithm::MlDsa87 => Algorithm::MlDsa87,
        }
    }

    /// Does a key of this kind go with this algorithm?
    pub fn fits(self, kind: KeyKind) -> bool {
        matches!(
            (self, kind),
            (Algorithm::Es256, KeyKind::EcP256)
                | (Algorithm::Es384, KeyKind::EcP384)
                | (Algorithm::Es512, KeyKind::EcP521)
                | (Algorithm::EdDsa, KeyKind::Ed25519)
                | (Algorithm::Rs256 | Algorithm::Ps256, KeyKind::Rsa(_))
                | (Algorithm::MlDsa44, KeyKind::MlDsa44)
                | (Algorithm::MlDsa65, KeyKind::MlDsa65)
                | (Algorithm::MlDsa87, KeyKind::MlDsa87)
        )
    }

    /// For ECDSA, the length of r and of s in a JWS signature (RFC 7518 §3.4).
    fn ecdsa_width(self) -> Option<usize> {
        match self {
            Algorithm::Es256 => Some(32),
            Algorithm::Es384 => Some(48),
            Algorithm::Es512 => Some(66),
            _ => None,
        }
    }

    fn digest(self) -> Option<MessageDigest> {
        match self {
            Algorithm::Es256 | Algorithm::Rs256 | Algorithm::Ps256 => Some(MessageDigest::sha256()),
            Algorithm::Es384 => Some(MessageDigest::sha384()),
            Algorithm::Es512 => Some(MessageDigest::sha512()),
            Algorithm::EdDsa | Algorithm::MlDsa44 | Algorithm::MlDsa65 | Algorithm::MlDsa87 => None,
        }
    }

    /// Turns a signature as signd returns it (for ECDSA a DER `Ecdsa-Sig-Value`)
    /// into its JWS form (for ECDSA r||s, each of the curve's fixed width);
    /// other algorithms' signatures are the same in both.
    pub fn signature_from_der(self, sig: &[u8]) -> Result<Vec<u8>, JoseError> {
        match self.ecdsa_width() {
            Some(width) => ecdsa_der_to_raw(sig, width)
                .map_err(|_| JoseError::Malformed("not a DER ECDSA signature of this curve".into())),
            None => Ok(sig.to_vec()),
        }
    }

    /// Checks `signature` over `signing_input` with `key`: the key must fit the
    /// algorithm (and the JWK's own `alg`, if it declared one).
    pub fn verify(self, key: &Jwk, signing_input: &[u8], signature: &[u8]) -> Result<(), JoseError> {
        if !self.fits(key.kind()) {
            return Err(JoseError::AlgorithmKeyMismatch { alg: self.name(), key: key.kind().to_string() });
        }
        if let Some(declared) = key.declared_alg() {
            if declared != self.name() {
                return Err(JoseError::BadPublicKey(format!(
                    "the JWK declares alg {declared:?} but the JWS uses {}",
                    self.name()
                )));
            }
        }
        let ok = match self {
            Algorithm::Es256 | Algorithm::Es384 | Algorithm::Es512 => {
                let len = self.ecdsa_width().ok_or(JoseError::BadSignature)?;
                let ec = key.ec_key().ok_or(JoseError::BadSignature)?;
                let sig = ecdsa_raw_to_sig(signature, len)?;
                let digest: Vec<u8> = match self {
                    Algorithm::Es256 => Sha256::digest(signing_input).to_vec(),
                    Algorithm::Es384 => Sha384::digest(signing_input).to_vec(),
                    _ => Sha512::digest(signing_input).to_vec(),
                };
                sig.verify(&digest, ec).unwrap_or(false)
            }
            Algorithm::EdDsa | Algorithm::MlDsa44 | Algorithm::MlDsa65 | Algorithm::MlDsa87 => {
                Verifier::new_without_digest(key.public_key())
                    .and_then(|mut v| v.verify_oneshot(signature, signing_input))
                    .unwrap_or(false)
            }
            Algorithm::Rs256 | Algorithm::Ps256 => {
                if signature.len() != key.public_key().size() {
                    return Err(JoseError::BadSignature);
                }
                verify_digest(self, key.public_key(), signing_input, signature, |v| {
                    if self == Algorithm::Ps256 {
                        v.set_rsa_padding(Padding::PKCS1_PSS)?;
                        v.set_rsa_mgf1_md(MessageDigest::sha256())?;
                        v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)?;
                    }
                    Ok(())
                })
            }
        };
        if ok {
            Ok(())
        } else {
            Err(JoseError::BadSignature)
        }
    }

    /// Signs `signing_input` with `key`, producing the JWS signature bytes
    /// (raw r||s for ECDSA). For tests and tools: Signet's own keys sign in signd.
    pub fn sign(self, key: &PKeyRef<Private>, signing_input: &[u8]) -> Result<Vec<u8>, JoseError> {
        let internal = |e: openssl::error::ErrorStack| JoseError::Internal(e.to_string());
        let public = PKey::public_key_from_der(&key.public_key_to_der().map_err(internal)?).map_err(internal)?;
        self.sign_with_jwk(key, &Jwk::from_public_key(&public)?, signing_input)
    }

    /// [`Algorithm::sign`] with the key's public JWK already at hand (it must
    /// be `key`'s): deriving it costs more than an ECDSA signature.
    pub fn sign_with_jwk(self, key: &PKeyRef<Private>, jwk: &Jwk, signing_input: &[u8]) -> Result<Vec<u8>, JoseError> {
        let internal = |e: openssl::error::ErrorStack| JoseError::Internal(e.to_string());
        if !self.fits(jwk.kind()) {
            return Err(JoseError::AlgorithmKeyMismatch { alg: self.name(), key: jwk.kind().to_string() });
        }
        match self.digest() {
            None => {
                Signer::new_without_digest(key).and_then(|mut s| s.sign_oneshot_to_vec(signing_input)).map_err(internal)
            }
            Some(md) => {
                let mut signer = Signer::new(md, key).map_err(internal)?;
                if self == Algorithm::Ps256 {
                    signer.set_rsa_padding(Padding::PKCS1_PSS).map_err(internal)?;
                    signer.set_rsa_mgf1_md(MessageDigest::sha256()).map_err(internal)?;
                    signer.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).map_err(internal)?;
                }
                let sig = signer.sign_oneshot_to_vec(signing_input).map_err(internal)?;
                self.signature_from_der(&sig)
            }
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A MAC algorithm (RFC 7518 §3.2): ACME external account binding, `client_secret_jwt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MacAlgorithm {
    /// HMAC with SHA-256.
    Hs256,
    /// HMAC with SHA-384.
    Hs384,
    /// HMAC with SHA-512.
    Hs512,
}

impl MacAlgorithm {
    /// Every accepted MAC algorithm.
    pub const ALL: [MacAlgorithm; 3] = [MacAlgorithm::Hs256, MacAlgorithm::Hs384, MacAlgorithm::Hs512];

    /// The `alg` name.
    pub fn name(self) -> &'static str {
        match self {
            MacAlgorithm::Hs256 => "HS256",
            MacAlgorithm::Hs384 => "HS384",
            MacAlgorithm::Hs512 => "HS512",
        }
    }

    /// Parses an `alg` value naming a MAC algorithm.
    pub fn from_name(name: &str) -> Option<MacAlgorithm> {
        MacAlgorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The MAC of `signing_input` under `key`.
    pub fn mac(self, key: &[u8], signing_input: &[u8]) -> Result<Vec<u8>, JoseError> {
        let internal = |e: openssl::error::ErrorStack| JoseError::Internal(e.to_string());
        let md = match self {
            MacAlgorithm::Hs256 => MessageDigest::sha256(),
            MacAlgorithm::Hs384 => MessageDigest::sha384(),
            MacAlgorithm::Hs512 => MessageDigest::sha512(),
        };
        let pkey = PKey::hmac(key).map_err(internal)?;
        Signer::new(md, &pkey).and_then(|mut s| s.sign_oneshot_to_vec(signing_input)).map_err(internal)
    }

    /// The hash output length in bytes: the shortest key RFC 7518 §3.2 allows.
    pub fn min_key_len(self) -> usize {
        match self {
            MacAlgorithm::Hs256 => 32,
            MacAlgorithm::Hs384 => 48,
            MacAlgorithm::Hs512 => 64,
        }
    }

    /// Checks a MAC in constant time.
    pub fn verify(self, key: &[u8], signing_input: &[u8], mac: &[u8]) -> Result<(), JoseError> {
        let expected = self.mac(key, signing_input)?;
        if expected.len() == mac.len() && openssl::memcmp::eq(&expected, mac) {
            Ok(())
        } else {
            Err(JoseError::BadMac)
        }
    }
}

fn verify_digest(
    alg: Algorithm,
    key: &PKeyRef<Public>,
    signing_input: &[u8],
    signature: &[u8],
    configure: impl FnOnce(&mut Verifier<'_>) -> Result<(), openssl::error::ErrorStack>,
) -> bool {
    let Some(md) = alg.digest() else { return false };
    let run = || -> Result<bool, openssl::error::ErrorStack> {
        let mut verifier = Verifier::new(md, key)?;
        configure(&mut verifier)?;
        verifier.verify_oneshot(signature, signing_input)
    };
    run().unwrap_or(false)
}

/// A JWS ECDSA signature (r||s, each `len` bytes, RFC 7518 §3.4) as DER ECDSA-Sig-Value.
fn ecdsa_raw_to_sig(signature: &[u8], len: usize) -> Result<EcdsaSig, JoseError> {
    if signature.len() != 2 * len {
        return Err(JoseError::BadSignature);
    }
    let (r, s) = signature.split_at(len);
    BigNum::from_slice(r)
        .and_then(|r| BigNum::from_slice(s).and_then(|s| EcdsaSig::from_private_components(r, s)))
        .map_err(|_| JoseError::BadSignature)
}

/// A DER ECDSA-Sig-Value as JWS r||s.
fn ecdsa_der_to_raw(der: &[u8], len: usize) -> Result<Vec<u8>, openssl::error::ErrorStack> {
    let sig = EcdsaSig::from_der(der)?;
    let width = i32::try_from(len).unwrap_or(66);
    let mut raw = sig.r().to_vec_padded(width)?;
    raw.extend(sig.s().to_vec_padded(width)?);
    Ok(raw)
}
