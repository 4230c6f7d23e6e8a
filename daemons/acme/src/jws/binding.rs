//! The two JWS-inside-a-JWS constructions of RFC 8555: key rollover (§7.3.5)
//! and external account binding (§7.3.4).

use serde::Deserialize;
use serde_json::Value;

use super::{acme_algorithm, Jwk, JwsError, KeyRef, MacAlgorithm, RawJws, VerifiedRequest};

/// Verifies a keyChange request (RFC 8555 §7.3.5) and returns the new key.
///
/// `outer` is the verified outer request, signed by the account's current key
/// `old_key`, whose `kid` is `account_url`. Its payload must be a JWS that:
/// is signed by the new key carried in its `jwk` header, has the outer `url`,
/// has no `nonce`, and whose payload `{"account", "oldKey"}` names this account
/// and its current key. Checking that no other account already uses the new
/// key is the caller's job.
pub fn verify_key_change(outer: &VerifiedRequest, account_url: &str, old_key: &Jwk) -> Result<Jwk, JwsError> {
    if outer.kid() != Some(account_url) {
        return Err(JwsError::WrongKeyReference("kid"));
    }
    let inner = RawJws::parse(outer.payload()).map_err(|e| JwsError::Payload(format!("inner JWS: {e}")))?;
    let alg = acme_algorithm(inner.header.alg.as_deref().ok_or(JwsError::MissingHeader("alg"))?)?;
    if inner.header.nonce.is_some() {
        return Err(JwsError::ForbiddenHeader("nonce"));
    }
    let new_key = match inner.key_ref()? {
        KeyRef::Jwk(jwk) => jwk,
        KeyRef::Kid(_) => return Err(JwsError::WrongKeyReference("jwk")),
    };
    match inner.header.url.as_deref() {
        None => return Err(JwsError::MissingHeader("url")),
        Some(url) if url != outer.header().url => return Err(JwsError::InnerUrlMismatch),
        Some(_) => {}
    }
    alg.verify(&new_key, &inner.signing_input(), &inner.signature)?;

    let change: KeyChangePayload =
        serde_json::from_slice(&inner.payload).map_err(|e| JwsError::Payload(format!("key change: {e}")))?;
    if change.account != account_url {
        return Err(JwsError::KeyChangeAccount);
    }
    if Jwk::from_json(&change.old_key)? != *old_key {
        return Err(JwsError::KeyChangeOldKey);
    }
    Ok(new_key)
}

#[derive(Deserialize)]
struct KeyChangePayload {
    account: String,
    #[serde(rename = "oldKey")]
    old_key: Value,
}

/// An `externalAccountBinding` from a newAccount payload (RFC 8555 §7.3.4):
/// a JWS MACed with a key the CA handed out, binding the new account key.
///
/// Parse it, look up the MAC key by [`ExternalAccountBinding::key_id`], then
/// [`ExternalAccountBinding::verify`].
#[derive(Debug, Clone)]
pub struct ExternalAccountBinding {
    alg: MacAlgorithm,
    kid: String,
    url: String,
    raw: RawJws,
}

impl ExternalAccountBinding {
    /// Parses the binding: a flattened JWS whose protected header has a MAC
    /// `alg` (HS256, HS384 or HS512), the EAB key id as `kid`, a `url`, and
    /// neither `nonce` nor `jwk`.
    pub fn parse(value: &Value) -> Result<ExternalAccountBinding, JwsError> {
        let raw = RawJws::from_value(value)?;
        let alg_name = raw.header.alg.as_deref().ok_or(JwsError::MissingHeader("alg"))?;
        let alg = MacAlgorithm::from_name(alg_name).ok_or_else(|| {
            JwsError::Header(format!("external account binding alg {alg_name:?} is not HS256, HS384 or HS512"))
        })?;
        if raw.header.nonce.is_some() {
            return Err(JwsError::ForbiddenHeader("nonce"));
        }
        if raw.header.jwk.is_some() {
            return Err(JwsError::ForbiddenHeader("jwk"));
        }
        let kid = match raw.header.kid.as_deref() {
            None | Some("") => return Err(JwsError::MissingHeader("kid")),
            Some(kid) => kid.to_owned(),
        };
        let url = raw.header.url.clone().ok_or(JwsError::MissingHeader("url"))?;
        Ok(ExternalAccountBinding { alg, kid, url, raw })
    }

    /// The EAB key identifier the CA issued (the header's `kid`).
    pub fn key_id(&self) -> &str {
        &self.kid
    }

    /// The MAC algorithm.
    pub fn algorithm(&self) -> MacAlgorithm {
        self.alg
    }

    /// Verifies the binding with `mac_key` (the key behind [`Self::key_id`]):
    /// the `url` must be the newAccount URL `outer_url`, the MAC must verify
    /// and the payload must be `account_key`, the outer request's `jwk`.
    pub fn verify(&self, mac_key: &[u8], outer_url: &str, account_key: &Jwk) -> Result<(), JwsError> {
        if self.url != outer_url {
            return Err(JwsError::InnerUrlMismatch);
        }
        self.alg.verify(mac_key, &self.raw.signing_input(), &self.raw.signature)?;
        let bound: Value = serde_json::from_slice(&self.raw.payload)
            .map_err(|e| JwsError::Payload(format!("external account binding: {e}")))?;
        match Jwk::from_json(&bound) {
            Ok(key) if key == *account_key => Ok(()),
            _ => Err(JwsError::BindingKey),
        }
    }
}
