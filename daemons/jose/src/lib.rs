//! JOSE as every Signet crate uses it: JWS algorithms (RFC 7518 §3, RFC 8037,
//! RFC 9964 for ML-DSA), JSON Web Keys and key sets (RFC 7517, RFC 7638
//! thumbprints), the compact JWS serialization (RFC 7515 §7.1) and JWT
//! verification (RFC 7519, RFC 9068), over OpenSSL.
//!
//! Pure: no I/O, no clock (a JWT check is given "now"), no randomness except
//! inside OpenSSL's signers. signet-acme builds its flattened JWS requests on
//! this crate; libpki verifies tokend's JWTs with it.

#![forbid(unsafe_code)]

mod alg;
mod compact;
pub mod fuzz;
mod jwk;
mod jwks;
pub mod jwt;

#[cfg(test)]
mod tests;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

pub use alg::{Algorithm, MacAlgorithm};
pub use compact::{CompactJws, Header, MAX_TOKEN_LEN};
pub use jwk::{jwk_json, Jwk, KeyKind, RSA_MAX_BITS, RSA_MIN_BITS};
pub use jwks::{Jwks, MAX_JWKS_KEYS, MAX_JWKS_LEN};

/// Why a JOSE object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoseError {
    /// Not a well-formed JWS, JWK set or claims set (encoding, JSON, shape, size).
    #[error("malformed: {0}")]
    Malformed(String),
    /// `alg` is `none`, unknown, or not allowed where it was used (a MAC
    /// where a signature is required, or the reverse).
    #[error("unsupported algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// `alg` does not fit the key (e.g. ES256 with a P-384 key).
    #[error("algorithm {alg} does not fit a {key} key")]
    AlgorithmKeyMismatch {
        /// The algorithm.
        alg: &'static str,
        /// The key's kind.
        key: String,
    },
    /// The JWK is unacceptable (type, curve, size, point, private members).
    #[error("unacceptable public key: {0}")]
    BadPublicKey(String),
    /// The signature does not verify.
    #[error("the signature does not verify")]
    BadSignature,
    /// The MAC does not verify.
    #[error("the MAC does not verify")]
    BadMac,
    /// A MAC key shorter than the hash output (RFC 7518 §3.2).
    #[error("the MAC key is shorter than the {0} hash output")]
    MacKeyTooShort(&'static str),
    /// No key in the set fits the token's `kid` and `alg`.
    #[error("no key in the JWK set fits the token's kid and alg")]
    UnknownKey,
    /// The JWS header's `typ` is not the one expected.
    #[error("the token type {found:?} is not {expected:?}")]
    WrongType {
        /// The expected `typ`.
        expected: String,
        /// The header's `typ`, if any.
        found: Option<String>,
    },
    /// The token has expired (`exp`, with the leeway).
    #[error("the token has expired")]
    Expired,
    /// The token is not valid yet (`nbf`, with the leeway).
    #[error("the token is not valid yet")]
    NotYetValid,
    /// The `iss` claim is not the expected issuer.
    #[error("the token's issuer is not the expected one")]
    WrongIssuer,
    /// The `aud` claim does not name the expected audience.
    #[error("the token is not meant for this audience")]
    WrongAudience,
    /// A required claim is missing.
    #[error("the token has no {0:?} claim")]
    MissingClaim(&'static str),
    /// OpenSSL failed where it should not (e.g. out of memory).
    #[error("internal error: {0}")]
    Internal(String),
}

/// `ASCII(BASE64URL(UTF8(header)) || '.' || BASE64URL(payload))` (RFC 7515
/// §5.1): what a JWS signature covers. Sign it (e.g. through signd), turn
/// the signature into its JWS form with [`Algorithm::signature_from_der`],
/// then [`compact`].
pub fn encode_signing_input(header: &serde_json::Value, payload: &[u8]) -> String {
    format!("{}.{}", b64_encode(header.to_string().as_bytes()), b64_encode(payload))
}

/// The compact serialization: `signing_input || '.' || BASE64URL(signature)`.
pub fn compact(signing_input: &str, jws_signature: &[u8]) -> String {
    format!("{signing_input}.{}", b64_encode(jws_signature))
}

/// Decodes base64url without padding; padding, other alphabets and
/// non-canonical trailing bits are refused.
pub fn b64_decode(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(s)
}

/// Encodes base64url without padding.
pub fn b64_encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}
