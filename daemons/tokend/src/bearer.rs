//! The JWT bearer grant (RFC 7523 §2.1): a client trades an assertion from
//! a trusted issuer (another identity provider, a workload identity issuer)
//! for a tokend access token whose subject is the assertion's.
//!
//! Trusted issuers are configured with their JWK sets (`[[trusted_issuers]]`).
//! The assertion must be signed by a key of its issuer's set, name tokend
//! (issuer or token endpoint) in `aud`, carry `sub`, `exp` (at most
//! `max_assertion_seconds` ahead) and `jti`; the `jti` is committed to LMDB
//! before the answer, so an assertion is good once.

use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::{CompactJws, Jwks};

use crate::auth::{Client, Form};
use crate::error::OAuthError;
use crate::http::TokenService;
use crate::token::Grant;
use crate::web::unavailable;

/// RFC 7523's grant type.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A trusted assertion issuer.
#[derive(Clone, Debug)]
pub struct TrustedIssuer {
    /// Its `iss`.
    pub issuer: String,
    /// Its keys.
    pub jwks: Jwks,
}

impl TokenService {
    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`.
    pub async fn jwt_bearer(&self, client: &Client, form: &Form, now: u64) -> Result<Grant, OAuthError> {
        let assertion = form.require("assertion")?;
        let bad = |why: &str| OAuthError::invalid_grant(format!("assertion: {why}"));
        let unverified = CompactJws::parse(assertion).map_err(|e| bad(&e.to_string()))?;
        let claims: signet_jose::jwt::Claims =
            serde_json::from_slice(unverified.payload()).map_err(|e| bad(&format!("claims: {e}")))?;
        let iss = claims.iss.clone().ok_or_else(|| bad("iss is missing"))?;
        let trusted = self
            .trusted_issuers
            .iter()
            .find(|t| t.issuer == iss)
            .ok_or_else(|| bad(&format!("issuer `{iss}` is not trusted")))?;
        let v = Validation { issuer: Some(iss.clone()), audience: None, now, leeway: 5, typ: None };
        let claims = verify_jwt(assertion, &trusted.jwks, &v).map_err(|e| bad(&e.to_string()))?;
        let token_url = format!("{}/token", self.issuer);
        if !claims.aud.iter().any(|a| a == &self.issuer || a == &token_url) {
            return Err(bad("aud names neither tokend's issuer nor its token endpoint"));
        }
        let (Some(sub), Some(exp), Some(jti)) = (claims.sub.clone(), claims.exp, claims.jti.clone()) else {
            return Err(bad("sub, exp and jti are required"));
        };
        if exp > now + self.max_assertion_seconds {
            return Err(bad(&format!("exp is more than {} s ahead", self.max_assertion_seconds)));
        }
        if jti.is_empty() || jti.len() > 256 {
            return Err(bad("jti must be 1 to 256 characters"));
        }
        let fresh = self
            .db
            .first_use(self.db.assertions, &["jwt-bearer", &iss, &jti], exp)
            .await
            .map_err(|e| unavailable(&e))?;
        if !fresh {
            return Err(bad("this jti was used before (replay)"));
        }
        Ok(Grant {
            subject: sub,
            client_id: client.id.clone(),
            audience: crate::grants::audience(client, form)?,
            scopes: crate::grants::scopes(client, form, None)?,
            extra: serde_json::Map::new(),
        })
    }
}
