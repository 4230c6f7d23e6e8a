//! Client authentication at a token endpoint (RFC 6749 §2.3, RFC 7523 §2.2,
//! RFC 8705 §2), as a client sends it: what goes in the request's body and
//! headers. Assertions are signed per request, each with a fresh `jti`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use openssl::pkey::{PKey, Private};
use signet_jose::{compact, encode_signing_input, Algorithm, Jwk, MacAlgorithm};

use super::form_encode;

/// The client assertion type of RFC 7523 §2.2, form-encoded.
const JWT_BEARER: &str = "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer";

/// How each request authenticates its client.
pub enum ClientAuth {
    /// client_secret_basic: a ready `Authorization: Basic` value.
    Basic(HeaderValue),
    /// client_secret_post: `client_id=..&client_secret=..` for the body.
    Post(String),
    /// client_secret_jwt or private_key_jwt: an assertion signed per request.
    Jwt(Box<Assertion>),
    /// `client_id=..` in the body alone: tls_client_auth and
    /// self_signed_tls_client_auth (the TLS connection's certificate
    /// authenticates), or a public client.
    ClientId(String),
    /// Nothing (an endpoint that takes no client authentication).
    None,
}

impl ClientAuth {
    /// client_secret_basic: id and secret form-encoded (RFC 6749 §2.3.1).
    pub fn basic(client_id: &str, secret: &str) -> anyhow::Result<ClientAuth> {
        let raw = format!("{}:{}", form_encode(client_id), form_encode(secret));
        let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw));
        Ok(ClientAuth::Basic(HeaderValue::from_str(&value)?))
    }

    /// client_secret_post.
    pub fn post(client_id: &str, secret: &str) -> ClientAuth {
        ClientAuth::Post(format!("client_id={}&client_secret={}", form_encode(client_id), form_encode(secret)))
    }

    /// `client_id` in the body (the TLS methods, public clients).
    pub fn client_id(client_id: &str) -> ClientAuth {
        ClientAuth::ClientId(format!("client_id={}", form_encode(client_id)))
    }

    /// `body` (form-encoded, without client authentication) with the
    /// credentials that travel in it; those that travel in a header set in `headers`.
    pub fn apply(&self, body: &str, headers: &mut HeaderMap) -> anyhow::Result<String> {
        Ok(match self {
            ClientAuth::Basic(value) => {
                headers.insert(AUTHORIZATION, value.clone());
                body.to_owned()
            }
            ClientAuth::None => body.to_owned(),
            ClientAuth::Post(creds) | ClientAuth::ClientId(creds) => format!("{body}&{creds}"),
            ClientAuth::Jwt(a) => {
                format!("{body}&client_assertion_type={JWT_BEARER}&client_assertion={}", a.sign()?)
            }
        })
    }
}

/// What signs an assertion.
enum AssertionKey {
    /// private_key_jwt: an ES256 key, and its JWK (made once).
    Es256 { key: PKey<Private>, jwk: Jwk },
    /// client_secret_jwt: HS256 under the client secret.
    Hs256(Vec<u8>),
}

/// A client assertion (RFC 7523 §3): `iss` = `sub` = the client, `aud`, a
/// fresh `jti`, five minutes' `exp`.
pub struct Assertion {
    key: AssertionKey,
    header: serde_json::Value,
    client_id: String,
    aud: String,
    /// Random per run, so that reruns against one server never repeat a jti.
    jti_prefix: String,
    counter: AtomicU64,
}

impl Assertion {
    /// private_key_jwt: ES256 assertions signed with `key` (P-256), naming `kid`.
    pub fn private_key_jwt(key: PKey<Private>, kid: Option<&str>, client_id: &str, aud: &str) -> anyhow::Result<Self> {
        let public = PKey::public_key_from_der(&key.public_key_to_der()?)?;
        let jwk = Jwk::from_public_key(&public)?;
        let header = serde_json::json!({"alg": "ES256", "kid": kid, "typ": "JWT"});
        Self::new(AssertionKey::Es256 { key, jwk }, header, client_id, aud)
    }

    /// client_secret_jwt: HS256 assertions MACed with the client secret.
    pub fn client_secret_jwt(secret: &str, client_id: &str, aud: &str) -> anyhow::Result<Self> {
        let header = serde_json::json!({"alg": "HS256", "typ": "JWT"});
        Self::new(AssertionKey::Hs256(secret.as_bytes().to_vec()), header, client_id, aud)
    }

    fn new(key: AssertionKey, header: serde_json::Value, client_id: &str, aud: &str) -> anyhow::Result<Self> {
        let mut prefix = [0u8; 8];
        openssl::rand::rand_bytes(&mut prefix)?;
        Ok(Self {
            key,
            header,
            client_id: client_id.to_owned(),
            aud: aud.to_owned(),
            jti_prefix: prefix.iter().map(|b| format!("{b:02x}")).collect(),
            counter: AtomicU64::new(0),
        })
    }

    /// A new assertion, compact.
    pub fn sign(&self) -> anyhow::Result<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let claims = serde_json::json!({
            "iss": self.client_id, "sub": self.client_id, "aud": self.aud,
            "jti": format!("{}-{n}", self.jti_prefix), "iat": now, "exp": now + 300,
        });
        let input = encode_signing_input(&self.header, claims.to_string().as_bytes());
        let sig = match &self.key {
            AssertionKey::Es256 { key, jwk } => Algorithm::Es256.sign_with_jwk(key, jwk, input.as_bytes())?,
            AssertionKey::Hs256(secret) => MacAlgorithm::Hs256.mac(secret, input.as_bytes())?,
        };
        Ok(compact(&input, &sig))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn jti(t: &str, check: impl Fn(&signet_jose::CompactJws)) -> serde_json::Value {
        let jws = signet_jose::CompactJws::parse(t).unwrap();
        check(&jws);
        serde_json::from_slice::<serde_json::Value>(jws.payload()).unwrap()["jti"].clone()
    }

    #[test]
    fn assertions_verify_and_never_repeat_a_jti() {
        let key = PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let jwk = Jwk::from_public_key(&PKey::public_key_from_der(&key.public_key_to_der().unwrap()).unwrap()).unwrap();
        let a = Assertion::private_key_jwt(key, Some("k"), "c", "http://127.0.0.1/token").unwrap();
        let verify = |jws: &signet_jose::CompactJws| jws.verify(&jwk).unwrap();
        let (one, two) = (a.sign().unwrap(), a.sign().unwrap());
        assert_ne!(jti(&one, verify), jti(&two, verify));

        let secret = "s".repeat(43);
        let m = Assertion::client_secret_jwt(&secret, "c", "http://127.0.0.1/token").unwrap();
        let verify = |jws: &signet_jose::CompactJws| jws.verify_mac(secret.as_bytes()).unwrap();
        assert_ne!(jti(&m.sign().unwrap(), verify), jti(&m.sign().unwrap(), verify));
    }

    #[test]
    fn credentials_go_where_each_method_puts_them() {
        let mut h = HeaderMap::new();
        let body = ClientAuth::basic("my client", "s:cret").unwrap().apply("grant_type=x", &mut h).unwrap();
        assert_eq!(body, "grant_type=x");
        assert_eq!(h[AUTHORIZATION], "Basic bXkrY2xpZW50OnMlM0FjcmV0");
        let mut h = HeaderMap::new();
        assert_eq!(ClientAuth::post("c", "s").apply("g=1", &mut h).unwrap(), "g=1&client_id=c&client_secret=s");
        assert_eq!(ClientAuth::client_id("c d").apply("g=1", &mut h).unwrap(), "g=1&client_id=c+d");
        assert!(h.is_empty());
    }
}
