//! Access tokens: RFC 9068 JWTs signed through signd, and the checks tokend
//! makes of its own tokens when they come back (introspection, revocation,
//! token exchange).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use signet_ipc::IpcError;
use signet_jose::jwt::{self, Claims, Validation};
use signet_jose::JoseError;
use signet_jose::{compact, encode_signing_input};

use crate::keys::Keys;

/// What goes into an access token besides the standard claims.
#[derive(Clone, Debug, Default)]
pub struct Grant {
    /// `sub`: the client itself for client_credentials, the user otherwise.
    pub subject: String,
    /// `client_id`.
    pub client_id: String,
    /// `aud`.
    pub audience: String,
    /// Granted scopes (space-joined into `scope`; omitted when empty).
    pub scopes: Vec<String>,
    /// Further claims (`act` for token exchange, `cnf` for bound tokens).
    pub extra: Map<String, Value>,
}

/// A minted token.
#[derive(Clone, Debug)]
pub struct Minted {
    /// The compact JWS.
    pub token: String,
    /// Its `jti`.
    pub jti: String,
    /// Its lifetime, seconds.
    pub expires_in: u64,
}

/// Why no token could be signed.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// No key may sign yet.
    #[error("no signing key is available")]
    NoKey,
    /// signd refused or is unreachable.
    #[error("signd: {0}")]
    Signd(#[from] IpcError),
    /// OpenSSL's random generator failed.
    #[error("random: {0}")]
    Random(String),
    /// signd's signature could not be turned into a JWS signature.
    #[error("signature: {0}")]
    Signature(String),
}

/// A random identifier: 128 bits, base64url.
pub fn random_id() -> String {
    let mut b = [0u8; 16];
    // OpenSSL's DRBG; it fails only if the process cannot be seeded at all.
    if openssl::rand::rand_bytes(&mut b).is_err() {
        tracing::error!("OpenSSL's random generator failed");
    }
    URL_SAFE_NO_PAD.encode(b)
}

/// Signs an access token for `grant`, valid `ttl` seconds from `now`.
pub async fn mint(keys: &Keys, issuer: &str, grant: &Grant, now: u64, ttl: u64) -> Result<Minted, MintError> {
    let jti = random_id();
    let mut claims = Map::new();
    claims.insert("iss".into(), json!(issuer));
    claims.insert("sub".into(), json!(grant.subject));
    claims.insert("aud".into(), json!(grant.audience));
    claims.insert("exp".into(), json!(now + ttl));
    claims.insert("iat".into(), json!(now));
    claims.insert("nbf".into(), json!(now));
    claims.insert("jti".into(), json!(jti));
    claims.insert("client_id".into(), json!(grant.client_id));
    if !grant.scopes.is_empty() {
        claims.insert("scope".into(), json!(grant.scopes.join(" ")));
    }
    for (k, v) in &grant.extra {
        claims.insert(k.clone(), v.clone());
    }
    let token = sign_jwt(keys, "at+jwt", claims).await?;
    Ok(Minted { token, jti, expires_in: ttl })
}

/// Signs `claims` as a JWT of header `typ` with the current signing key.
pub async fn sign_jwt(keys: &Keys, typ: &str, claims: Map<String, Value>) -> Result<String, MintError> {
    let view = keys.view();
    let (kid, alg) = view.signer.clone().ok_or(MintError::NoKey)?;
    let header = json!({ "alg": alg.name(), "kid": kid, "typ": typ });
    let payload = Value::Object(claims).to_string();
    let input = encode_signing_input(&header, payload.as_bytes());
    let sig = keys.signd().sign(keys.role(), &kid, alg.scheme(), input.clone().into_bytes()).await?;
    let sig = alg.signature_from_der(&sig).map_err(|e| MintError::Signature(e.to_string()))?;
    Ok(compact(&input, &sig))
}

/// A random secret: 256 bits, base64url (authorization codes, refresh
/// tokens, session cookies; kept only as their SHA-256).
pub fn random_secret() -> Result<String, MintError> {
    let mut b = [0u8; 32];
    openssl::rand::rand_bytes(&mut b).map_err(|e| MintError::Random(e.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(b))
}

/// Checks that `token` is one of tokend's own unexpired access tokens:
/// signature by a published key, `typ` at+jwt, `iss`, `exp`.
pub fn verify_own(keys: &Keys, issuer: &str, token: &str, now: u64) -> Result<Claims, JoseError> {
    let view = keys.view();
    let v = Validation { issuer: Some(issuer.to_owned()), audience: None, now, leeway: 0, typ: Some("at+jwt".into()) };
    jwt::verify_jwt(token, &view.jwks, &v)
}

/// tokend's own tokens already verified, by the SHA-256 of the token, until
/// they expire: a resource server introspects the same token on every call
/// it serves, and the signature check is most of an introspection's cost.
/// Revocation is still read from LMDB on every call; only the signature and
/// the claims' checks are remembered (a token's bytes fix both).
pub struct Verified {
    map: std::sync::Mutex<std::collections::HashMap<[u8; 32], Claims>>,
    capacity: usize,
}

impl Verified {
    /// A cache of at most `capacity` tokens.
    pub fn new(capacity: usize) -> Self {
        Self { map: std::sync::Mutex::new(std::collections::HashMap::new()), capacity }
    }

    /// [`verify_own`], answered from the cache for a token verified before and not expired at `now`.
    pub fn verify_own(&self, keys: &Keys, issuer: &str, token: &str, now: u64) -> Result<Claims, JoseError> {
        let key = openssl::sha::sha256(token.as_bytes());
        let lock = || self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = lock().get(&key) {
            if c.exp.is_some_and(|exp| now < exp) {
                return Ok(c.clone());
            }
        }
        let claims = verify_own(keys, issuer, token, now)?;
        let mut map = lock();
        if map.len() >= self.capacity {
            map.retain(|_, c| c.exp.is_some_and(|exp| now < exp));
            if map.len() >= self.capacity {
                map.clear();
            }
        }
        map.insert(key, claims.clone());
        Ok(claims)
    }
}
