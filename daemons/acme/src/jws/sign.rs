//! Making JWS requests, as an ACME client would: for tests, fuzz seeds and
//! tools. The CA itself never signs a request.
//!
//! Every function returns the flattened JWS as a JSON [`Value`], so that a
//! test can tamper with a member before sending `serde_json::to_vec(&jws)`.

use openssl::pkey::{PKey, PKeyRef, Private};
use serde_json::{json, Map, Value};

use super::{b64_encode, Algorithm, Jwk, JwsError, MacAlgorithm};

/// How a signed request names its key.
#[derive(Debug, Clone, Copy)]
pub enum Signer<'a> {
    /// Embed the public key as `jwk`.
    Jwk,
    /// Name the account URL as `kid`.
    Kid(&'a str),
}

/// An ACME request: protected header `{alg, jwk|kid, nonce, url}` signed with `key`.
/// `nonce: None` leaves the nonce out (as a key-change inner JWS must).
pub fn request(
    alg: Algorithm,
    key: &PKeyRef<Private>,
    signer: Signer<'_>,
    nonce: Option<&str>,
    url: &str,
    payload: &[u8],
) -> Result<Value, JwsError> {
    request_with_jwk(alg, key, &public_jwk(key)?, signer, nonce, url, payload)
}

/// [`request`] with `key`'s public JWK already at hand (`jwk` must be
/// `key`'s): a client signing many requests derives it once.
pub fn request_with_jwk(
    alg: Algorithm,
    key: &PKeyRef<Private>,
    jwk: &Jwk,
    signer: Signer<'_>,
    nonce: Option<&str>,
    url: &str,
    payload: &[u8],
) -> Result<Value, JwsError> {
    let mut header = Map::new();
    header.insert("alg".into(), alg.name().into());
    match signer {
        Signer::Jwk => {
            header.insert("jwk".into(), jwk.to_json());
        }
        Signer::Kid(kid) => {
            header.insert("kid".into(), kid.into());
        }
    }
    if let Some(nonce) = nonce {
        header.insert("nonce".into(), nonce.into());
    }
    header.insert("url".into(), url.into());
    assemble(&Value::Object(header).to_string(), payload, |input| Ok(alg.sign_with_jwk(key, jwk, input)?))
}

/// Signs `payload` under an arbitrary protected header (which need not even
/// name `alg` correctly: tests use this to build invalid requests).
pub fn with_header(
    alg: Algorithm,
    key: &PKeyRef<Private>,
    protected: &Value,
    payload: &[u8],
) -> Result<Value, JwsError> {
    assemble(&protected.to_string(), payload, |input| Ok(alg.sign(key, input)?))
}

/// Signs `payload` under a protected header given as JSON text, byte for byte
/// (tests use this for what a [`Value`] cannot hold, such as duplicate members).
pub fn with_raw_header(
    alg: Algorithm,
    key: &PKeyRef<Private>,
    protected: &str,
    payload: &[u8],
) -> Result<Value, JwsError> {
    assemble(protected, payload, |input| Ok(alg.sign(key, input)?))
}

/// MACs `payload` under an arbitrary protected header.
pub fn mac_with_header(
    alg: MacAlgorithm,
    mac_key: &[u8],
    protected: &Value,
    payload: &[u8],
) -> Result<Value, JwsError> {
    assemble(&protected.to_string(), payload, |input| Ok(alg.mac(mac_key, input)?))
}

/// The inner JWS of a keyChange request (RFC 8555 §7.3.5): signed by the new
/// key, `jwk` = new key, `url` = the keyChange URL, no nonce, payload
/// `{"account", "oldKey"}`.
pub fn key_change(
    alg: Algorithm,
    new_key: &PKeyRef<Private>,
    url: &str,
    account_url: &str,
    old_key: &Jwk,
) -> Result<Value, JwsError> {
    let payload = json!({"account": account_url, "oldKey": old_key.to_json()});
    request(alg, new_key, Signer::Jwk, None, url, payload.to_string().as_bytes())
}

/// An `externalAccountBinding` value (RFC 8555 §7.3.4) binding `account_key`.
pub fn external_account_binding(
    alg: MacAlgorithm,
    key_id: &str,
    mac_key: &[u8],
    new_account_url: &str,
    account_key: &Jwk,
) -> Result<Value, JwsError> {
    let protected = json!({"alg": alg.name(), "kid": key_id, "url": new_account_url});
    mac_with_header(alg, mac_key, &protected, account_key.canonical_json().as_bytes())
}

/// The public JWK of a private key.
pub fn public_jwk(key: &PKeyRef<Private>) -> Result<Jwk, JwsError> {
    let der = key.public_key_to_der().map_err(|e| JwsError::Internal(e.to_string()))?;
    let public = PKey::public_key_from_der(&der).map_err(|e| JwsError::Internal(e.to_string()))?;
    Ok(Jwk::from_public_key(&public)?)
}

fn assemble(
    protected: &str,
    payload: &[u8],
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, JwsError>,
) -> Result<Value, JwsError> {
    let protected_b64 = b64_encode(protected.as_bytes());
    let payload_b64 = b64_encode(payload);
    let signature = sign(format!("{protected_b64}.{payload_b64}").as_bytes())?;
    Ok(json!({"protected": protected_b64, "payload": payload_b64, "signature": b64_encode(&signature)}))
}
