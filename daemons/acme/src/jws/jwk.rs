//! JSON Web Keys (RFC 7517, RFC 7518 §6, RFC 8037): the public keys ACME
//! accounts are made of.
//!
//! Three key types are accepted: EC on P-256/P-384/P-521, RSA of 2048 to 8192
//! bits and OKP Ed25519. Parsing checks everything a verifier relies on: the
//! EC point lies on the curve and its coordinates have the curve's exact
//! length, RSA integers are in their minimal encoding (so a key has exactly
//! one thumbprint) with a sane exponent, and no private member is present.

use openssl::bn::{BigNum, BigNumContext};
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{HasPublic, Id, PKey, PKeyRef, Public};
use openssl::rsa::Rsa;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{b64_decode, b64_encode, JwsError};

/// The smallest RSA modulus accepted, in bits.
pub const RSA_MIN_BITS: u32 = 2048;
/// The largest RSA modulus accepted, in bits (bounds verification cost).
pub const RSA_MAX_BITS: u32 = 8192;

/// JWK members that only a private key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
const PRIVATE_MEMBERS: &[&str] = &["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// The kind of a [`Jwk`], with what an algorithm check needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyKind {
    /// EC on NIST P-256.
    EcP256,
    /// EC on NIST P-384.
    EcP384,
    /// EC on NIST P-521.
    EcP521,
    /// RSA with a modulus of this many bits.
    Rsa(u32),
    /// OKP Ed25519.
    Ed25519,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyKind::EcP256 => f.write_str("EC P-256"),
            KeyKind::EcP384 => f.write_str("EC P-384"),
            KeyKind::EcP521 => f.write_str("EC P-521"),
            KeyKind::Rsa(bits) => write!(f, "RSA {bits}"),
            KeyKind::Ed25519 => f.write_str("OKP Ed25519"),
        }
    }
}

/// A validated public JWK, with its OpenSSL key.
///
/// Equality compares the key material only (not `alg`/`use`/`kid` members).
/// Serializes to the canonical members only (`kty` and the key parameters).
#[derive(Debug, Clone)]
pub struct Jwk {
    params: Params,
    /// The JWK's own `alg` member, if it had one; a request's `alg` must match it.
    declared_alg: Option<String>,
    key: PKey<Public>,
    /// The EC key again as a legacy `EC_KEY`, made once: ES256/384/512
    /// verification uses it directly, skipping OpenSSL 3's per-call EVP
    /// algorithm fetch, which every signed request would otherwise pay.
    ec: Option<EcKey<Public>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Params {
    Ec { curve: Curve, x: Vec<u8>, y: Vec<u8> },
    Rsa { n: Vec<u8>, e: Vec<u8> },
    Ed25519 { x: Vec<u8> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
    P521,
}

impl Curve {
    fn from_name(name: &str) -> Option<Curve> {
        match name {
            "P-256" => Some(Curve::P256),
            "P-384" => Some(Curve::P384),
            "P-521" => Some(Curve::P521),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
            Curve::P521 => "P-521",
        }
    }
    fn nid(self) -> Nid {
        match self {
            Curve::P256 => Nid::X9_62_PRIME256V1,
            Curve::P384 => Nid::SECP384R1,
            Curve::P521 => Nid::SECP521R1,
        }
    }
    fn from_nid(nid: Nid) -> Option<Curve> {
        [Curve::P256, Curve::P384, Curve::P521].into_iter().find(|c| c.nid() == nid)
    }
    /// The length of one coordinate (and of r or s in a JWS signature), in bytes.
    pub(crate) fn coordinate_len(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
            Curve::P521 => 66,
        }
    }
}

impl PartialEq for Jwk {
    fn eq(&self, other: &Jwk) -> bool {
        self.params == other.params
    }
}
impl Eq for Jwk {}

impl Jwk {
    /// Parses a JWK from its JSON object (as found in a `jwk` header or a key-change payload).
    pub fn from_json(value: &Value) -> Result<Jwk, JwsError> {
        let obj = value.as_object().ok_or_else(|| bad_key("JWK is not a JSON object"))?;
        if let Some(private) = PRIVATE_MEMBERS.iter().find(|m| obj.contains_key(**m)) {
            return Err(bad_key(format!("JWK has the private member {private:?}")));
        }
        if let Some(use_) = obj.get("use") {
            if use_ != "sig" {
                return Err(bad_key("JWK \"use\" is not \"sig\""));
            }
        }
        let declared_alg = match obj.get("alg") {
            None => None,
            Some(Value::String(alg)) => Some(alg.clone()),
            Some(_) => return Err(bad_key("JWK \"alg\" is not a string")),
        };
        let params = match member_str(obj, "kty")? {
            "EC" => {
                let crv = member_str(obj, "crv")?;
                let curve = Curve::from_name(crv).ok_or_else(|| bad_key(format!("unsupported EC curve {crv:?}")))?;
                let x = member_b64(obj, "x")?;
                let y = member_b64(obj, "y")?;
                if x.len() != curve.coordinate_len() || y.len() != curve.coordinate_len() {
                    return Err(bad_key(format!(
                        "{} coordinates must be {} bytes",
                        curve.name(),
                        curve.coordinate_len()
                    )));
                }
                Params::Ec { curve, x, y }
            }
            "RSA" => Params::Rsa { n: member_b64(obj, "n")?, e: member_b64(obj, "e")? },
            "OKP" => match member_str(obj, "crv")? {
                "Ed25519" => Params::Ed25519 { x: member_b64(obj, "x")? },
                crv => return Err(bad_key(format!("unsupported OKP curve {crv:?}"))),
            },
            kty => return Err(bad_key(format!("unsupported key type {kty:?}"))),
        };
        let key = params.public_key()?;
        let ec = key.ec_key().ok();
        Ok(Jwk { params, declared_alg, key, ec })
    }

    /// The JWK of an OpenSSL public (or private) key.
    pub fn from_public_key<T: HasPublic>(key: &PKeyRef<T>) -> Result<Jwk, JwsError> {
        let params = match key.id() {
            Id::EC => {
                let ec = key.ec_key().map_err(|e| bad_key(format!("EC key: {e}")))?;
                let curve =
                    ec.group().curve_name().and_then(Curve::from_nid).ok_or_else(|| bad_key("unsupported EC curve"))?;
                let (x, y) = ec_coordinates(&ec, curve).map_err(|e| bad_key(format!("EC key: {e}")))?;
                Params::Ec { curve, x, y }
            }
            Id::RSA => {
                let rsa = key.rsa().map_err(|e| bad_key(format!("RSA key: {e}")))?;
                Params::Rsa { n: rsa.n().to_vec(), e: rsa.e().to_vec() }
            }
            Id::ED25519 => {
                Params::Ed25519 { x: key.raw_public_key().map_err(|e| bad_key(format!("Ed25519 key: {e}")))? }
            }
            other => return Err(bad_key(format!("unsupported key type {other:?}"))),
        };
        let key = params.public_key()?;
        let ec = key.ec_key().ok();
        Ok(Jwk { params, declared_alg: None, key, ec })
    }

    /// Parses a DER SubjectPublicKeyInfo.
    pub fn from_spki_der(der: &[u8]) -> Result<Jwk, JwsError> {
        let key = PKey::public_key_from_der(der).map_err(|e| bad_key(format!("SubjectPublicKeyInfo: {e}")))?;
        Jwk::from_public_key(&key)
    }

    /// The key as a DER SubjectPublicKeyInfo.
    pub fn to_spki_der(&self) -> Result<Vec<u8>, JwsError> {
        self.key.public_key_to_der().map_err(|e| bad_key(format!("encoding SubjectPublicKeyInfo: {e}")))
    }

    /// The OpenSSL public key.
    pub fn public_key(&self) -> &PKeyRef<Public> {
        &self.key
    }

    /// What kind of key this is.
    pub fn kind(&self) -> KeyKind {
        match &self.params {
            Params::Ec { curve: Curve::P256, .. } => KeyKind::EcP256,
            Params::Ec { curve: Curve::P384, .. } => KeyKind::EcP384,
            Params::Ec { curve: Curve::P521, .. } => KeyKind::EcP521,
            Params::Rsa { .. } => KeyKind::Rsa(self.key.bits()),
            Params::Ed25519 { .. } => KeyKind::Ed25519,
        }
    }

    /// The `alg` member the JWK itself declared, if any.
    pub fn declared_alg(&self) -> Option<&str> {
        self.declared_alg.as_deref()
    }

    /// The JWK as a JSON object with the required members only, in the
    /// lexicographic order RFC 7638 §3.2 prescribes.
    pub fn to_json(&self) -> Value {
        // Serializing a Value from strings cannot fail.
        serde_json::from_str(&self.canonical_json()).unwrap_or(Value::Null)
    }

    /// The RFC 7638 canonical JSON: required members only, sorted, no whitespace.
    pub fn canonical_json(&self) -> String {
        // Every value is either a fixed ASCII name or base64url, so none needs escaping.
        match &self.params {
            Params::Ec { curve, x, y } => {
                format!(r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#, curve.name(), b64_encode(x), b64_encode(y))
            }
            Params::Rsa { n, e } => format!(r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#, b64_encode(e), b64_encode(n)),
            Params::Ed25519 { x } => {
                format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#, b64_encode(x))
            }
        }
    }

    /// The RFC 7638 thumbprint: SHA-256 of [`Jwk::canonical_json`].
    pub fn thumbprint_sha256(&self) -> [u8; 32] {
        Sha256::digest(self.canonical_json().as_bytes()).into()
    }

    /// The RFC 7638 thumbprint, base64url without padding (as in key authorizations).
    pub fn thumbprint(&self) -> String {
        b64_encode(&self.thumbprint_sha256())
    }

    /// The EC key, for EC JWKs.
    pub(crate) fn ec_key(&self) -> Option<&EcKey<Public>> {
        self.ec.as_ref()
    }

    /// The coordinate length, for EC keys.
    pub(crate) fn ec_coordinate_len(&self) -> Option<usize> {
        match &self.params {
            Params::Ec { curve, .. } => Some(curve.coordinate_len()),
            _ => None,
        }
    }
}

impl Params {
    fn public_key(&self) -> Result<PKey<Public>, JwsError> {
        match self {
            Params::Ec { curve, x, y } => {
                let group =
                    EcGroup::from_curve_name(curve.nid()).map_err(|e| bad_key(format!("{}: {e}", curve.name())))?;
                let (bx, by) = (bn(x)?, bn(y)?);
                // Checks that the point lies on the curve (EC_KEY_check_key).
                let ec = EcKey::from_public_key_affine_coordinates(&group, &bx, &by)
                    .map_err(|_| bad_key(format!("the point is not on {}", curve.name())))?;
                ec.check_key().map_err(|_| bad_key(format!("the point is not a valid {} key", curve.name())))?;
                PKey::from_ec_key(ec).map_err(|e| bad_key(e.to_string()))
            }
            Params::Rsa { n, e } => {
                if n.first() == Some(&0) || e.first() == Some(&0) {
                    return Err(bad_key("RSA integers must use their minimal encoding (no leading zero)"));
                }
                let bits = u32::try_from(n.len() * 8).unwrap_or(u32::MAX);
                if n.is_empty() || bits - n[0].leading_zeros() < RSA_MIN_BITS {
                    return Err(bad_key(format!("RSA keys must have at least {RSA_MIN_BITS} bits")));
                }
                if bits - n[0].leading_zeros() > RSA_MAX_BITS {
                    return Err(bad_key(format!("RSA keys must have at most {RSA_MAX_BITS} bits")));
                }
                if n.last().is_some_and(|b| b & 1 == 0) {
                    return Err(bad_key("the RSA modulus is even"));
                }
                // e: odd, at least 3, at most 32 bits (bounds verification cost).
                if e.is_empty() || e.len() > 4 || e.last().is_some_and(|b| b & 1 == 0) || e.as_slice() == [1] {
                    return Err(bad_key("the RSA public exponent must be odd, at least 3 and below 2^32"));
                }
                let rsa = Rsa::from_public_components(bn(n)?, bn(e)?).map_err(|e| bad_key(e.to_string()))?;
                PKey::from_rsa(rsa).map_err(|e| bad_key(e.to_string()))
            }
            Params::Ed25519 { x } => {
                if x.len() != 32 {
                    return Err(bad_key("Ed25519 keys are 32 bytes"));
                }
                PKey::public_key_from_raw_bytes(x, Id::ED25519).map_err(|e| bad_key(format!("Ed25519: {e}")))
            }
        }
    }
}

impl Serialize for Jwk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Jwk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Jwk::from_json(&value).map_err(serde::de::Error::custom)
    }
}

fn ec_coordinates<T: HasPublic>(ec: &EcKey<T>, curve: Curve) -> Result<(Vec<u8>, Vec<u8>), openssl::error::ErrorStack> {
    let mut ctx = BigNumContext::new()?;
    let (mut x, mut y) = (BigNum::new()?, BigNum::new()?);
    ec.public_key().affine_coordinates(ec.group(), &mut x, &mut y, &mut ctx)?;
    let len = i32::try_from(curve.coordinate_len()).unwrap_or(66);
    Ok((x.to_vec_padded(len)?, y.to_vec_padded(len)?))
}

fn bn(bytes: &[u8]) -> Result<BigNum, JwsError> {
    BigNum::from_slice(bytes).map_err(|e| bad_key(e.to_string()))
}

fn member_str<'a>(obj: &'a Map<String, Value>, name: &'static str) -> Result<&'a str, JwsError> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad_key(format!("JWK member {name:?} is not a string"))),
        None => Err(bad_key(format!("JWK member {name:?} is missing"))),
    }
}

fn member_b64(obj: &Map<String, Value>, name: &'static str) -> Result<Vec<u8>, JwsError> {
    b64_decode(member_str(obj, name)?)
        .map_err(|_| bad_key(format!("JWK member {name:?} is not base64url without padding")))
}

fn bad_key(detail: impl Into<String>) -> JwsError {
    JwsError::BadPublicKey(detail.into())
}
