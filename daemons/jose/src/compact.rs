//! The JWS compact serialization (RFC 7515 §7.1): `header.payload.signature`,
//! each base64url without padding. JWTs are carried this way.

use serde_json::{Map, Value};

use crate::{b64_decode, Algorithm, JoseError, Jwk, MacAlgorithm};

/// The longest compact JWS accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 64 * 1024;

/// A compact JWS, decoded but not verified.
#[derive(Debug, Clone)]
pub struct CompactJws {
    header: Header,
    signing_input: String,
    payload: Vec<u8>,
    signature: Vec<u8>,
}

/// The protected header of a [`CompactJws`] (not authenticated until verified).
#[derive(Debug, Clone)]
pub struct Header {
    /// The signature algorithm; `None` for a MAC (then [`Header::mac_alg`] is set).
    pub alg: Option<Algorithm>,
    /// The MAC algorithm (HS256/384/512), for [`CompactJws::verify_mac`]; `None`
    /// for a signature.
    pub mac_alg: Option<MacAlgorithm>,
    /// The key id.
    pub kid: Option<String>,
    /// The media type of the whole JWS (e.g. `at+jwt`).
    pub typ: Option<String>,
    /// The embedded public key, if any (never trusted by itself).
    pub jwk: Option<Jwk>,
    /// Every header parameter, as sent.
    pub raw: Map<String, Value>,
}

impl Header {
    /// The `alg` name, as sent.
    pub fn alg_name(&self) -> &str {
        match (self.alg, self.mac_alg) {
            (Some(alg), _) => alg.name(),
            (None, Some(mac)) => mac.name(),
            (None, None) => "",
        }
    }
}

impl CompactJws {
    /// Parses `token`: at most [`MAX_TOKEN_LEN`] bytes, exactly three parts,
    /// each strict base64url without padding; the header a JSON object with a
    /// known `alg` (`none` is refused), string `kid` and `typ`, a valid `jwk`
    /// if any, and no `crit` (Signet understands no extension).
    pub fn parse(token: &str) -> Result<CompactJws, JoseError> {
        let malformed = |what: &str| JoseError::Malformed(what.to_owned());
        if token.len() > MAX_TOKEN_LEN {
            return Err(JoseError::Malformed(format!("the JWS is longer than {MAX_TOKEN_LEN} bytes")));
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("a compact JWS has exactly three parts"));
        };
        let header_json = b64_decode(header_b64).map_err(|_| malformed("the header is not base64url"))?;
        let payload = b64_decode(payload_b64).map_err(|_| malformed("the payload is not base64url"))?;
        let signature = b64_decode(signature_b64).map_err(|_| malformed("the signature is not base64url"))?;
        let Ok(Value::Object(raw)) = serde_json::from_slice::<Value>(&header_json) else {
            return Err(malformed("the header is not a JSON object"));
        };
        let header = Header::from_map(raw)?;
        let signing_input = token[..header_b64.len() + 1 + payload_b64.len()].to_owned();
        Ok(CompactJws { header, signing_input, payload, signature })
    }

    /// The protected header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload (unauthenticated until a verify call succeeds).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// `header.payload` as sent: what the signature covers.
    pub fn signing_input(&self) -> &str {
        &self.signing_input
    }

    /// The signature bytes (JWS form: r||s for ECDSA).
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// Verifies the signature with the public key `key`. A MAC `alg` is refused.
    pub fn verify(&self, key: &Jwk) -> Result<(), JoseError> {
        let alg = self.header.alg.ok_or_else(|| JoseError::UnsupportedAlgorithm(self.header.alg_name().to_owned()))?;
        alg.verify(key, self.signing_input.as_bytes(), &self.signature)
    }

    /// Verifies an HS256/384/512 MAC with `key` (e.g. `client_secret_jwt`),
    /// which must be at least as long as the hash output. A signature `alg` is
    /// refused.
    pub fn verify_mac(&self, key: &[u8]) -> Result<(), JoseError> {
        let mac =
            self.header.mac_alg.ok_or_else(|| JoseError::UnsupportedAlgorithm(self.header.alg_name().to_owned()))?;
        if key.len() < mac.min_key_len() {
            return Err(JoseError::MacKeyTooShort(mac.name()));
        }
        mac.verify(key, self.signing_input.as_bytes(), &self.signature)
    }
}

impl Header {
    fn from_map(raw: Map<String, Value>) -> Result<Header, JoseError> {
        let malformed = |what: &str| JoseError::Malformed(what.to_owned());
        if raw.contains_key("crit") {
            return Err(malformed("no \"crit\" extension is supported"));
        }
        let Some(Value::String(alg_name)) = raw.get("alg") else {
            return Err(malformed("the header has no string \"alg\""));
        };
        let (alg, mac_alg) = match MacAlgorithm::from_name(alg_name) {
            Some(mac) => (None, Some(mac)),
            None => (Some(Algorithm::from_name(alg_name)?), None),
        };
        let string = |name: &str| match raw.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(JoseError::Malformed(format!("the header's {name:?} is not a string"))),
        };
        let kid = string("kid")?;
        let typ = string("typ")?;
        let jwk = raw.get("jwk").map(Jwk::from_json).transpose()?;
        Ok(Header { alg, mac_alg, kid, typ, jwk, raw })
    }
}
