//! JWS as ACME uses it (RFC 8555 §6.2, RFC 7515): flattened JSON serialization,
//! one signature, everything in the protected header.
//!
//! An ACME request body is parsed with [`SignedRequest::parse`], which enforces
//! §6.2 (no `signatures`, no unprotected `header`, no detached payload, no
//! `none` or MAC `alg`, a protected header with `alg`, `nonce`, `url` and
//! exactly one of `jwk`/`kid`). The caller then checks the nonce and the URL
//! ([`SignedRequest::check_url`]), finds the key (the embedded `jwk` for
//! newAccount and certificate-key revocation, else the account named by
//! `kid`), and calls [`SignedRequest::verify`], which alone gives access to the
//! payload. Key rollover ([`verify_key_change`]) and external account binding
//! ([`ExternalAccountBinding`]) verify the inner JWS those requests carry.
//!
//! Every error is a [`JwsError`], which maps to the ACME problem the server
//! must answer with ([`JwsError::problem`]).

mod binding;
pub mod sign;
#[cfg(test)]
mod tests;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;

use crate::problem::{Problem, ProblemType};

pub use binding::{verify_key_change, ExternalAccountBinding};
pub(crate) use signet_jose::{b64_decode, b64_encode};
pub use signet_jose::{Algorithm, JoseError, Jwk, KeyKind, MacAlgorithm, RSA_MAX_BITS, RSA_MIN_BITS};

/// The `alg` values ACME accepts, as listed in a `badSignatureAlgorithm` problem.
/// (signet-jose knows ML-DSA too; ACME clients do not use it yet.)
pub const SUPPORTED_ALGORITHMS: &[&str] = &["ES256", "ES384", "ES512", "EdDSA", "RS256", "PS256"];

/// The algorithms of [`SUPPORTED_ALGORITHMS`].
pub const ACME_ALGORITHMS: [Algorithm; 6] =
    [Algorithm::Es256, Algorithm::Es384, Algorithm::Es512, Algorithm::EdDsa, Algorithm::Rs256, Algorithm::Ps256];

/// Parses a request's `alg`: one of [`SUPPORTED_ALGORITHMS`]; `none`, MACs,
/// ML-DSA and anything unknown are refused as `badSignatureAlgorithm` (RFC 8555 §6.2).
pub fn acme_algorithm(name: &str) -> Result<Algorithm, JwsError> {
    ACME_ALGORITHMS
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| JwsError::UnsupportedAlgorithm(name.to_owned()))
}

/// An ACME account key: a [`Jwk`] of a kind an [`ACME_ALGORITHMS`] algorithm fits.
fn acme_jwk(value: &Value) -> Result<Jwk, JwsError> {
    let jwk = Jwk::from_json(value)?;
    if ACME_ALGORITHMS.iter().any(|a| a.fits(jwk.kind())) {
        Ok(jwk)
    } else {
        Err(JwsError::BadPublicKey(format!("{} keys are not accepted for ACME", jwk.kind())))
    }
}

/// Why a JWS was refused. Each maps to one ACME problem type ([`JwsError::problem`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwsError {
    /// The body is not a flattened JWS JSON object (bad JSON, a missing, duplicated,
    /// mistyped or unknown member). → `malformed`
    #[error("not a flattened JWS: {0}")]
    Structure(String),
    /// The JWS has a `signatures` member (general serialization). → `malformed`
    #[error("the JWS must have exactly one signature (no \"signatures\" member)")]
    MultipleSignatures,
    /// The JWS has an unprotected `header` member. → `malformed`
    #[error("the JWS must not have an unprotected header")]
    UnprotectedHeader,
    /// A member is not base64url without padding. → `malformed`
    #[error("{0} is not base64url without padding")]
    Base64(&'static str),
    /// The protected header is not a JSON object of the expected shape. → `malformed`
    #[error("bad protected header: {0}")]
    Header(String),
    /// A required header parameter is missing. → `malformed`
    #[error("the protected header has no {0:?}")]
    MissingHeader(&'static str),
    /// A header parameter that must be absent here is present. → `malformed`
    #[error("the protected header must not have {0:?} here")]
    ForbiddenHeader(&'static str),
    /// The protected header has no `nonce`. → `badNonce`
    #[error("the protected header has no nonce")]
    MissingNonce,
    /// The `nonce` is not base64url. → `malformed` (RFC 8555 §6.5.2)
    #[error("the nonce is not base64url")]
    NonceEncoding,
    /// Both `jwk` and `kid` are present. → `malformed`
    #[error("the protected header must have one of \"jwk\" and \"kid\", not both")]
    BothJwkAndKid,
    /// Neither `jwk` nor `kid` is present. → `malformed`
    #[error("the protected header must have \"jwk\" or \"kid\"")]
    NeitherJwkNorKid,
    /// The request used `kid` where `jwk` is required, or the reverse. → `malformed`
    #[error("this request must be signed with a {0:?} header")]
    WrongKeyReference(&'static str),
    /// `alg` is `none`, a MAC or unknown. → `badSignatureAlgorithm` with `algorithms`
    #[error("unsupported signature algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// `alg` does not fit the key (e.g. ES256 with a P-384 key). → `badSignatureAlgorithm`
    #[error("algorithm {alg} does not fit a {key} key")]
    AlgorithmKeyMismatch {
        /// The request's algorithm.
        alg: &'static str,
        /// The key's kind.
        key: String,
    },
    /// The JWK is unacceptable (type, curve, size, point, private members). → `badPublicKey`
    #[error("unacceptable public key: {0}")]
    BadPublicKey(String),
    /// The signature does not verify. → `malformed`
    #[error("the JWS signature does not verify")]
    BadSignature,
    /// The header `url` is not the URL the request was sent to. → `unauthorized` (§6.4)
    #[error("the JWS url {found:?} is not the request URL {expected:?}")]
    UrlMismatch {
        /// The URL the request arrived at.
        expected: String,
        /// The header's `url`.
        found: String,
    },
    /// The payload is not what the resource expects. → `malformed`
    #[error("bad payload: {0}")]
    Payload(String),
    /// An inner JWS's `url` differs from the outer one. → `malformed`
    #[error("the inner JWS url differs from the outer JWS url")]
    InnerUrlMismatch,
    /// A key change's `account` is not the account of the outer JWS. → `unauthorized`
    #[error("the key change names another account")]
    KeyChangeAccount,
    /// A key change's `oldKey` is not the account's current key. → `unauthorized`
    #[error("the key change's oldKey is not the account key")]
    KeyChangeOldKey,
    /// The external account binding's MAC does not verify. → `unauthorized`
    #[error("the external account binding MAC does not verify")]
    BadMac,
    /// The external account binding's payload is not the account key. → `malformed`
    #[error("the external account binding does not bind the account key")]
    BindingKey,
    /// OpenSSL failed where it should not (e.g. out of memory). → `serverInternal`
    #[error("internal error: {0}")]
    Internal(String),
}

impl JwsError {
    /// The ACME problem type this error is answered with.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            JwsError::MissingNonce => ProblemType::BadNonce,
            JwsError::UnsupportedAlgorithm(_) | JwsError::AlgorithmKeyMismatch { .. } => {
                ProblemType::BadSignatureAlgorithm
            }
            JwsError::BadPublicKey(_) => ProblemType::BadPublicKey,
            JwsError::UrlMismatch { .. }
            | JwsError::KeyChangeAccount
            | JwsError::KeyChangeOldKey
            | JwsError::BadMac => ProblemType::Unauthorized,
            JwsError::Internal(_) => ProblemType::ServerInternal,
            _ => ProblemType::Malformed,
        }
    }

    /// The problem document to answer with (with `algorithms` for `badSignatureAlgorithm`).
    pub fn problem(&self) -> Problem {
        match self.problem_type() {
            ProblemType::BadSignatureAlgorithm => {
                Problem::bad_signature_algorithm(self.to_string(), SUPPORTED_ALGORITHMS)
            }
            kind => Problem::new(kind, self.to_string()),
        }
    }
}

impl From<JoseError> for JwsError {
    fn from(e: JoseError) -> JwsError {
        match e {
            JoseError::UnsupportedAlgorithm(alg) => JwsError::UnsupportedAlgorithm(alg),
            JoseError::AlgorithmKeyMismatch { alg, key } => JwsError::AlgorithmKeyMismatch { alg, key },
            JoseError::BadPublicKey(detail) => JwsError::BadPublicKey(detail),
            JoseError::BadSignature => JwsError::BadSignature,
            JoseError::BadMac | JoseError::MacKeyTooShort(_) => JwsError::BadMac,
            JoseError::Internal(detail) => JwsError::Internal(detail),
            other => JwsError::Structure(other.to_string()),
        }
    }
}

impl From<JwsError> for Problem {
    fn from(e: JwsError) -> Problem {
        e.problem()
    }
}

/// How a request names its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRef {
    /// The key itself (`jwk`): newAccount, and revokeCert signed by the certificate key.
    Jwk(Jwk),
    /// The account URL (`kid`): every other request.
    Kid(String),
}

/// The protected header of an ACME request, checked against RFC 8555 §6.2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedHeader {
    /// The signature algorithm.
    pub alg: Algorithm,
    /// The anti-replay nonce (base64url; the caller checks and consumes it).
    pub nonce: String,
    /// The URL the client meant to send the request to.
    pub url: String,
    /// The signing key or the account that holds it.
    pub key: KeyRef,
}

/// A parsed ACME request whose signature has not been checked yet.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    header: ProtectedHeader,
    raw: RawJws,
}

/// A request whose signature verified: the payload can be read.
#[derive(Debug, Clone)]
pub struct VerifiedRequest {
    header: ProtectedHeader,
    payload: Vec<u8>,
}

impl SignedRequest {
    /// Parses a request body and checks the rules of RFC 8555 §6.2.
    ///
    /// Does not check the nonce's freshness, the URL or the signature.
    pub fn parse(body: &[u8]) -> Result<SignedRequest, JwsError> {
        let raw = RawJws::parse(body)?;
        let h = &raw.header;
        let alg = acme_algorithm(h.alg.as_deref().ok_or(JwsError::MissingHeader("alg"))?)?;
        let nonce = h.nonce.clone().ok_or(JwsError::MissingNonce)?;
        if nonce.is_empty() || b64_decode(&nonce).is_err() {
            return Err(JwsError::NonceEncoding);
        }
        let url = h.url.clone().ok_or(JwsError::MissingHeader("url"))?;
        let key = raw.key_ref()?;
        Ok(SignedRequest { header: ProtectedHeader { alg, nonce, url, key }, raw })
    }

    /// The protected header (not yet authenticated).
    pub fn header(&self) -> &ProtectedHeader {
        &self.header
    }

    /// Refuses the request unless its `url` is `expected`, the URL it arrived at (§6.4).
    pub fn check_url(&self, expected: &str) -> Result<(), JwsError> {
        if self.header.url == expected {
            Ok(())
        } else {
            Err(JwsError::UrlMismatch { expected: expected.to_owned(), found: self.header.url.clone() })
        }
    }

    /// Verifies the signature with `key` (the account's key, for a `kid` request).
    pub fn verify(self, key: &Jwk) -> Result<VerifiedRequest, JwsError> {
        self.header.alg.verify(key, &self.raw.signing_input(), &self.raw.signature)?;
        Ok(VerifiedRequest { header: self.header, payload: self.raw.payload })
    }

    /// Verifies the signature with the embedded `jwk`; refuses a `kid` request.
    pub fn verify_embedded(self) -> Result<VerifiedRequest, JwsError> {
        let KeyRef::Jwk(jwk) = &self.header.key else {
            return Err(JwsError::WrongKeyReference("jwk"));
        };
        let jwk = jwk.clone();
        self.verify(&jwk)
    }
}

impl VerifiedRequest {
    /// The authenticated protected header.
    pub fn header(&self) -> &ProtectedHeader {
        &self.header
    }

    /// The payload bytes (empty for POST-as-GET).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Is this a POST-as-GET (empty payload, RFC 8555 §6.3)?
    pub fn is_post_as_get(&self) -> bool {
        self.payload.is_empty()
    }

    /// Refuses anything but a POST-as-GET.
    pub fn expect_post_as_get(&self) -> Result<(), JwsError> {
        if self.is_post_as_get() {
            Ok(())
        } else {
            Err(JwsError::Payload("a POST-as-GET request must have an empty payload".into()))
        }
    }

    /// The payload decoded as the JSON of `T`.
    pub fn payload_json<T: DeserializeOwned>(&self) -> Result<T, JwsError> {
        serde_json::from_slice(&self.payload).map_err(|e| JwsError::Payload(e.to_string()))
    }

    /// The account URL (`kid`), if the request was signed that way.
    pub fn kid(&self) -> Option<&str> {
        match &self.header.key {
            KeyRef::Kid(kid) => Some(kid),
            KeyRef::Jwk(_) => None,
        }
    }

    /// The embedded key (`jwk`), if the request was signed that way.
    pub fn jwk(&self) -> Option<&Jwk> {
        match &self.header.key {
            KeyRef::Jwk(jwk) => Some(jwk),
            KeyRef::Kid(_) => None,
        }
    }
}

/// A flattened JWS, decoded but not interpreted: the common ground of the
/// outer request, the key-change inner JWS and the external account binding.
#[derive(Debug, Clone)]
struct RawJws {
    protected_b64: String,
    payload_b64: String,
    header: RawHeader,
    payload: Vec<u8>,
    signature: Vec<u8>,
}

/// The members of a flattened JWS. Unknown members are refused; `header` and
/// `signatures` are named so that their presence gets its own error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JwsMembers {
    protected: Option<String>,
    payload: Option<String>,
    signature: Option<String>,
    header: Option<IgnoredAny>,
    signatures: Option<IgnoredAny>,
}

/// The protected header parameters ACME uses. Others are ignored (RFC 7515
/// §4), except `crit`: Signet understands no extension, so any is refused.
#[derive(Debug, Clone, Deserialize)]
struct RawHeader {
    alg: Option<String>,
    nonce: Option<String>,
    url: Option<String>,
    jwk: Option<Value>,
    kid: Option<String>,
    crit: Option<IgnoredAny>,
}

impl RawJws {
    fn parse(body: &[u8]) -> Result<RawJws, JwsError> {
        let members: JwsMembers = serde_json::from_slice(body).map_err(|e| JwsError::Structure(e.to_string()))?;
        RawJws::from_members(members)
    }

    fn from_value(value: &Value) -> Result<RawJws, JwsError> {
        let members = JwsMembers::deserialize(value).map_err(|e| JwsError::Structure(e.to_string()))?;
        RawJws::from_members(members)
    }

    fn from_members(m: JwsMembers) -> Result<RawJws, JwsError> {
        if m.signatures.is_some() {
            return Err(JwsError::MultipleSignatures);
        }
        if m.header.is_some() {
            return Err(JwsError::UnprotectedHeader);
        }
        let protected_b64 = m.protected.ok_or_else(|| JwsError::Structure("missing \"protected\"".into()))?;
        let payload_b64 = m
            .payload
            .ok_or_else(|| JwsError::Structure("missing \"payload\" (detached payloads are not allowed)".into()))?;
        let signature_b64 = m.signature.ok_or_else(|| JwsError::Structure("missing \"signature\"".into()))?;
        let protected = b64_decode(&protected_b64).map_err(|_| JwsError::Base64("protected"))?;
        let payload = b64_decode(&payload_b64).map_err(|_| JwsError::Base64("payload"))?;
        let signature = b64_decode(&signature_b64).map_err(|_| JwsError::Base64("signature"))?;
        let header: RawHeader = serde_json::from_slice(&protected).map_err(|e| JwsError::Header(e.to_string()))?;
        if header.crit.is_some() {
            return Err(JwsError::Header("no \"crit\" extension is supported".into()));
        }
        Ok(RawJws { protected_b64, payload_b64, header, payload, signature })
    }

    /// `ASCII(BASE64URL(protected) || '.' || BASE64URL(payload))`, as sent.
    fn signing_input(&self) -> Vec<u8> {
        let mut input = Vec::with_capacity(self.protected_b64.len() + 1 + self.payload_b64.len());
        input.extend_from_slice(self.protected_b64.as_bytes());
        input.push(b'.');
        input.extend_from_slice(self.payload_b64.as_bytes());
        input
    }

    /// Exactly one of `jwk` and `kid`.
    fn key_ref(&self) -> Result<KeyRef, JwsError> {
        match (&self.header.jwk, &self.header.kid) {
            (Some(_), Some(_)) => Err(JwsError::BothJwkAndKid),
            (None, None) => Err(JwsError::NeitherJwkNorKid),
            (Some(jwk), None) => Ok(KeyRef::Jwk(acme_jwk(jwk)?)),
            (None, Some(kid)) if kid.is_empty() => Err(JwsError::Header("\"kid\" is empty".into())),
            (None, Some(kid)) => Ok(KeyRef::Kid(kid.clone())),
        }
    }
}
