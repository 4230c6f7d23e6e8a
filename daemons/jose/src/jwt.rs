//! JSON Web Tokens (RFC 7519) signed with a key from a JWK set: OAuth access
//! tokens (RFC 9068) and the like.
//!
//! [`verify_jwt`] checks the signature first, then the header `typ`, then
//! `exp`, `nbf`, `iss` and `aud`, against a [`Validation`] that carries "now".

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{CompactJws, JoseError, Jwks};

/// A JWT claims set. Registered claims are typed; every other claim is in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// Subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// Audiences (a single string in the token becomes one entry).
    #[serde(default, deserialize_with = "string_or_array", skip_serializing_if = "Vec::is_empty")]
    pub aud: Vec<String>,
    /// Expiry, in seconds since the epoch.
    #[serde(default, deserialize_with = "numeric_date", skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Not before, in seconds since the epoch.
    #[serde(default, deserialize_with = "numeric_date", skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, in seconds since the epoch.
    #[serde(default, deserialize_with = "numeric_date", skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Token id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// The OAuth client the token was issued to (RFC 9068 §2.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Space-separated scopes (RFC 9068 §2.2.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The key the token is bound to (RFC 7800; RFC 8705, RFC 9449).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnf: Option<Confirmation>,
    /// Every other claim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `cnf` claim: what the token's holder must prove possession of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// SHA-256 of the client certificate, base64url (mTLS, RFC 8705 §3.1).
    #[serde(rename = "x5t#S256", default, skip_serializing_if = "Option::is_none")]
    pub x5t_s256: Option<String>,
    /// The JWK thumbprint of the DPoP key (RFC 9449 §6.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jkt: Option<String>,
    /// Every other confirmation method.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a JWT is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// The required `iss`; `None`: not checked.
    pub issuer: Option<String>,
    /// An audience `aud` must name; `None`: not checked.
    pub audience: Option<String>,
    /// Now, in seconds since the epoch.
    pub now: u64,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway: u64,
    /// The required header `typ` (compared case-insensitively, an
    /// `application/` prefix optional, RFC 7515 §4.1.9); `None`: not checked.
    pub typ: Option<String>,
}

/// Verifies `token` with a key from `jwks` and checks its claims.
///
/// The key is the one named by the header's `kid` (and fitting its `alg`);
/// a token without `kid` is tried against every key that fits. Then, in
/// order: `typ`, `exp` (required; expired once `now >= exp + leeway`), `nbf`
/// (not valid while `now + leeway < nbf`), `iss`, `aud`.
pub fn verify_jwt(token: &str, jwks: &Jwks, v: &Validation) -> Result<Claims, JoseError> {
    let jws = CompactJws::parse(token)?;
    let header = jws.header();
    let alg = header.alg.ok_or_else(|| JoseError::UnsupportedAlgorithm(header.alg_name().to_owned()))?;
    let mut verified = Err(JoseError::UnknownKey);
    for key in jwks.candidates(header.kid.as_deref(), alg) {
        verified = jws.verify(key);
        if verified.is_ok() {
            break;
        }
    }
    verified?;
    if let Some(expected) = &v.typ {
        if !header.typ.as_deref().is_some_and(|t| same_media_type(t, expected)) {
            return Err(JoseError::WrongType { expected: expected.clone(), found: header.typ.clone() });
        }
    }
    let claims: Claims =
        serde_json::from_slice(jws.payload()).map_err(|e| JoseError::Malformed(format!("claims: {e}")))?;
    let exp = claims.exp.ok_or(JoseError::MissingClaim("exp"))?;
    if v.now >= exp.saturating_add(v.leeway) {
        return Err(JoseError::Expired);
    }
    if let Some(nbf) = claims.nbf {
        if v.now.saturating_add(v.leeway) < nbf {
            return Err(JoseError::NotYetValid);
        }
    }
    if let Some(issuer) = &v.issuer {
        if claims.iss.as_ref() != Some(issuer) {
            return Err(JoseError::WrongIssuer);
        }
    }
    if let Some(audience) = &v.audience {
        if !claims.aud.contains(audience) {
            return Err(JoseError::WrongAudience);
        }
    }
    Ok(claims)
}

/// `typ` values compare case-insensitively, `application/` optional.
fn same_media_type(a: &str, b: &str) -> bool {
    fn bare(t: &str) -> &str {
        match t.get(..12) {
            Some(prefix) if prefix.eq_ignore_ascii_case("application/") => &t[12..],
            _ => t,
        }
    }
    bare(a).eq_ignore_ascii_case(bare(b))
}

fn string_or_array<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// A NumericDate (RFC 7519 §2): a non-negative number of seconds; a
/// fraction is dropped.
fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    if let Some(secs) = n.as_u64() {
        return Ok(Some(secs));
    }
    match n.as_f64() {
        // Truncation is the point: a fractional date counts from its whole second.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(f) if f.is_finite() && f >= 0.0 && f < u64::MAX as f64 => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom("a NumericDate is a non-negative number of seconds")),
    }
}
