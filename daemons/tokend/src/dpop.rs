//! DPoP (RFC 9449): proofs of possession checked at the token and userinfo
//! endpoints; tokens bound to the proof key's thumbprint (`cnf.jkt`).
//!
//! A proof is a JWS of `typ: dpop+jwt`, signed with an asymmetric `alg` by
//! the public key in its `jwk` header, with `jti`, `htm`, `htu` and `iat`
//! (and `ath`, the access token's hash, at a resource). Its `iat` must be
//! within [`PROOF_WINDOW`] of now; its `jti` is committed to LMDB, so a
//! replay within that window is refused even across a restart.
//!
//! Nonces (§8): when `require_nonce` is on, a proof must carry a nonce
//! tokend gave out: `BASE64URL(t ‖ HMAC-SHA256(key, t)[..16])` for a time
//! `t`, good for [`NONCE_SECONDS`] (no state kept). A missing or stale nonce
//! is answered `use_dpop_nonce` with a fresh one in `DPoP-Nonce`.

use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sha::sha256;
use openssl::sign::Signer;
use serde::Deserialize;
use signet_jose::CompactJws;

use crate::error::OAuthError;
use crate::http::TokenService;
use crate::web::unavailable;

/// How far a proof's `iat` may be from now, seconds.
pub const PROOF_WINDOW: u64 = 60;
/// How long a nonce tokend gave out is good, seconds.
pub const NONCE_SECONDS: u64 = 300;

/// A checked proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    /// The proof key's RFC 7638 thumbprint (SHA-256, base64url).
    pub jkt: String,
}

#[derive(Deserialize)]
struct ProofClaims {
    jti: Option<String>,
    htm: Option<String>,
    htu: Option<String>,
    iat: Option<u64>,
    nonce: Option<String>,
    ath: Option<String>,
}

/// `htu` without query and fragment (RFC 9449 §4.3 step 9), for comparison.
fn bare_uri(u: &str) -> Option<String> {
    let mut url = url::Url::parse(u).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    Some(url.to_string())
}

impl TokenService {
    fn nonce_mac(&self, t: u64) -> Vec<u8> {
        PKey::hmac(&self.flows.dpop_key)
            .and_then(|k| {
                let mut s = Signer::new(MessageDigest::sha256(), &k)?;
                s.update(b"dpop-nonce\0")?;
                s.update(&t.to_be_bytes())?;
                s.sign_to_vec()
            })
            .map(|mut m| {
                m.truncate(16);
                m
            })
            .unwrap_or_default()
    }

    /// A fresh nonce.
    pub fn dpop_nonce(&self, now: u64) -> String {
        let mut b = now.to_be_bytes().to_vec();
        b.extend(self.nonce_mac(now));
        signet_jose::b64_encode(&b)
    }

    fn nonce_ok(&self, nonce: &str, now: u64) -> bool {
        let Ok(b) = signet_jose::b64_decode(nonce) else { return false };
        if b.len() != 24 {
            return false;
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[..8]);
        let t = u64::from_be_bytes(t);
        let mac = self.nonce_mac(t);
        t <= now + 5 && now.saturating_sub(t) <= NONCE_SECONDS && mac.len() == 16 && openssl::memcmp::eq(&mac, &b[8..])
    }

    /// Checks the DPoP proof `proof` of a `htm` request to `htu`, at `now`;
    /// `access_token` is the token it is presented with (at a resource).
    pub async fn check_dpop(
        &self,
        proof: &str,
        htm: &str,
        htu: &str,
        access_token: Option<&str>,
        now: u64,
    ) -> Result<Proof, OAuthError> {
        let bad = |why: &str| OAuthError::invalid_dpop_proof(why.to_owned());
        let jws = CompactJws::parse(proof).map_err(|e| bad(&format!("the proof: {e}")))?;
        let h = jws.header();
        if !h.typ.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("dpop+jwt")) {
            return Err(bad("typ must be dpop+jwt"));
        }
        if h.alg.is_none() {
            return Err(bad("alg must be an asymmetric signature algorithm"));
        }
        let jwk = h.jwk.clone().ok_or_else(|| bad("the header has no jwk"))?;
        jws.verify(&jwk).map_err(|_| bad("the signature does not verify with the header's jwk"))?;
        let c: ProofClaims =
            serde_json::from_slice(jws.payload()).map_err(|e| bad(&format!("claims (iat a whole number): {e}")))?;
        let jti =
            c.jti.filter(|j| !j.is_empty() && j.len() <= 256).ok_or_else(|| bad("jti must be 1 to 256 characters"))?;
        if c.htm.as_deref() != Some(htm) {
            return Err(bad(&format!("htm must be {htm}")));
        }
        match c.htu.as_deref().and_then(bare_uri) {
            Some(u) if Some(&u) == bare_uri(htu).as_ref() => {}
            _ => return Err(bad(&format!("htu must be {htu}"))),
        }
        let iat = c.iat.ok_or_else(|| bad("iat is missing"))?;
        if iat + PROOF_WINDOW < now || iat > now + 5 {
            return Err(bad(&format!("iat must be within {PROOF_WINDOW} s of the server's time")));
        }
        if self.flows.dpop_require_nonce && !c.nonce.as_deref().is_some_and(|n| self.nonce_ok(n, now)) {
            return Err(OAuthError::use_dpop_nonce(self.dpop_nonce(now)));
        }
        if let Some(token) = access_token {
            let want = signet_jose::b64_encode(&sha256(token.as_bytes()));
            if c.ath.as_deref() != Some(want.as_str()) {
                return Err(bad("ath must be the access token's SHA-256"));
            }
        }
        let jkt = jwk.thumbprint();
        let until = now + PROOF_WINDOW + 5;
        let fresh = self.db.first_use(self.db.dpop_proofs, &[&jkt, &jti], until).await.map_err(|e| unavailable(&e))?;
        if !fresh {
            return Err(bad("this proof was used before (replay)"));
        }
        Ok(Proof { jkt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htu_compares_without_query_and_fragment() {
        assert_eq!(bare_uri("https://a.example/token?x=1#f"), bare_uri("https://a.example/token"));
        assert_ne!(bare_uri("https://a.example/token2"), bare_uri("https://a.example/token"));
        assert_eq!(bare_uri("not a url"), None);
    }
}
