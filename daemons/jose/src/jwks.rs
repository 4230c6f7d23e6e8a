//! JWK sets (RFC 7517 §5): the keys a token issuer publishes.

use serde_json::Value;

use crate::{Algorithm, JoseError, Jwk};

/// The largest JWK set accepted, in bytes.
pub const MAX_JWKS_LEN: usize = 1024 * 1024;
/// The most keys a JWK set may hold.
pub const MAX_JWKS_KEYS: usize = 256;

/// A parsed JWK set: the signature keys Signet can use, each with its `kid`.
#[derive(Debug, Clone, Default)]
pub struct Jwks {
    keys: Vec<(Option<String>, Jwk)>,
}

impl Jwks {
    /// Parses `{"keys":[...]}`. A key Signet cannot use (an unknown `kty` or
    /// `alg`, an encryption key, a malformed or private key) is skipped: a set
    /// may hold keys for other parties. The set itself must be well formed,
    /// at most [`MAX_JWKS_LEN`] bytes and [`MAX_JWKS_KEYS`] entries.
    pub fn parse(json: &[u8]) -> Result<Jwks, JoseError> {
        if json.len() > MAX_JWKS_LEN {
            return Err(JoseError::Malformed(format!("the JWK set is larger than {MAX_JWKS_LEN} bytes")));
        }
        let value: Value = serde_json::from_slice(json).map_err(|e| JoseError::Malformed(format!("JWK set: {e}")))?;
        let Some(Value::Array(entries)) = value.get("keys") else {
            return Err(JoseError::Malformed("a JWK set is an object with a \"keys\" array".into()));
        };
        if entries.len() > MAX_JWKS_KEYS {
            return Err(JoseError::Malformed(format!("the JWK set has more than {MAX_JWKS_KEYS} keys")));
        }
        let keys = entries
            .iter()
            .filter_map(|entry| {
                let kid = match entry.get("kid") {
                    None => None,
                    Some(Value::String(kid)) => Some(kid.clone()),
                    Some(_) => return None,
                };
                let jwk = Jwk::from_json(entry).ok()?;
                // A declared alg must be one Signet knows (and fit the key).
                match jwk.declared_alg().map(Algorithm::from_name) {
                    Some(Ok(alg)) if !alg.fits(jwk.kind()) => None,
                    Some(Err(_)) => None,
                    _ => Some((kid, jwk)),
                }
            })
            .collect();
        Ok(Jwks { keys })
    }

    /// The key for a JWS with this `kid` (if it has one) and `alg`: the first
    /// usable key whose `kid` matches and which fits `alg`.
    pub fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&Jwk> {
        self.keys.iter().find(|(k, jwk)| usable(k.as_deref(), jwk, kid, alg)).map(|(_, jwk)| jwk)
    }

    /// Every key that [`Jwks::find`] could answer, in order: a JWS without
    /// `kid` is checked against each.
    pub fn candidates<'a>(&'a self, kid: Option<&'a str>, alg: Algorithm) -> impl Iterator<Item = &'a Jwk> + 'a {
        self.keys.iter().filter(move |(k, jwk)| usable(k.as_deref(), jwk, kid, alg)).map(|(_, jwk)| jwk)
    }

    /// How many usable keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Does the set hold no usable key?
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Is the key `jwk` (with `key_id`) one for a JWS with `kid` and `alg`?
fn usable(key_id: Option<&str>, jwk: &Jwk, kid: Option<&str>, alg: Algorithm) -> bool {
    (kid.is_none() || key_id == kid) && alg.fits(jwk.kind()) && jwk.declared_alg().is_none_or(|d| d == alg.name())
}
