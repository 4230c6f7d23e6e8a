//! JSON Web Keys (RFC 7517, RFC 7518 §6, RFC 8037, RFC 9964): ACME account
//! keys, the keys of a JWK set.
//!
//! Four key types are accepted: EC on P-256/P-384/P-521, RSA of 2048 to 8192
//! bits, OKP Ed25519 and AKP ML-DSA-44/65/87 (`{"kty":"AKP","alg":"ML-DSA-44",
//! "pub":...}`, the raw FIPS 204 public key). Parsing checks everything a verifier relies on: the
//! EC point lies on the curve and its coordinates have the curve's exact
//! length, RSA integers are in their minimal encoding (so a key has exactly
//! one thumbprint) with a sane exponent, and no private member is present.

use std::sync::OnceLock;

use openssl::bn::{BigNum, BigNumContext};
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{HasPublic, Id, KeyType, PKey, PKeyRef, Public};
use openssl::rsa::Rsa;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::{b64_decode, b64_encode, Algorithm, JoseError};

/// The smallest RSA modulus accepted, in bits.
pub const RSA_MIN_BITS: u32 = 2048;
/// The largest RSA modulus accepted, in bits (bounds verification cost).
pub const RSA_MAX_BITS: u32 = 8192;

/// JWK members that only a private key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
const PRIVATE_MEMBERS: &[&str] = &["d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"];

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
    /// AKP ML-DSA-44.
    MlDsa44,
    /// AKP ML-DSA-65.
    MlDsa65,
    /// AKP ML-DSA-87.
    MlDsa87,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyKind::EcP256 => f.write_str("EC P-256"),
            KeyKind::EcP384 => f.write_str("EC P-384"),
            KeyKind::EcP521 => f.write_str("EC P-521"),
            KeyKind::Rsa(bits) => write!(f, "RSA {bits}"),
            KeyKind::Ed25519 => f.write_str("OKP Ed25519"),
            KeyKind::MlDsa44 => f.write_str("AKP ML-DSA-44"),
            KeyKind::MlDsa65 => f.write_str("AKP ML-DSA-65"),
            KeyKind::MlDsa87 => f.write_str("AKP ML-DSA-87"),
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
    MlDsa { level: MlDsa, public: Vec<u8> },
}

/// An ML-DSA parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MlDsa {
    L44,
    L65,
    L87,
}

impl MlDsa {
    const ALL: [MlDsa; 3] = [MlDsa::L44, MlDsa::L65, MlDsa::L87];

    fn alg(self) -> Algorithm {
        match self {
            MlDsa::L44 => Algorithm::MlDsa44,
            MlDsa::L65 => Algorithm::MlDsa65,
            MlDsa::L87 => Algorithm::MlDsa87,
        }
    }
    fn key_type(self) -> KeyType {
        match self {
            MlDsa::L44 => KeyType::ML_DSA_44,
            MlDsa::L65 => KeyType::ML_DSA_65,
            MlDsa::L87 => KeyType::ML_DSA_87,
        }
    }
    /// The public key's length in bytes (FIPS 204 Table 2).
    fn public_len(self) -> usize {
        match self {
            MlDsa::L44 => 1312,
            MlDsa::L65 => 1952,
            MlDsa::L87 => 2592,
        }
    }
    fn from_name(name: &str) -> Option<MlDsa> {
        MlDsa::ALL.into_iter().find(|l| l.alg().name() == name)
    }
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
    /// The curve's group, made once per process: making one computes its
    /// Montgomery constants, a cost every JWS verification paid before.
    fn group(self) -> Result<&'static EcGroup, JoseError> {
        static GROUPS: [OnceLock<Option<EcGroup>>; 3] = [const { OnceLock::new() }; 3];
        GROUPS[self as usize]
            .get_or_init(|| EcGroup::from_curve_name(self.nid()).ok())
            .as_ref()
            .ok_or_else(|| bad_key(format!("{}: OpenSSL has no such group", self.name())))
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
    pub fn from_json(value: &Value) -> Result<Jwk, JoseError> {
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
            // RFC 9964 §4: the parameter set is the required `alg`.
            "AKP" => {
                let alg = member_str(obj, "alg")?;
                let level =
                    MlDsa::from_name(alg).ok_or_else(|| bad_key(format!("unsupported AKP algorithm {alg:?}")))?;
                Params::MlDsa { level, public: member_b64(obj, "pub")? }
            }
            kty => return Err(bad_key(format!("unsupported key type {kty:?}"))),
        };
        let key = params.public_key()?;
        let ec = key.ec_key().ok();
        Ok(Jwk { params, declared_alg, key, ec })
    }

    /// The JWK of an OpenSSL public (or private) key.
    pub fn from_public_key<T: HasPublic>(key: &PKeyRef<T>) -> Result<Jwk, JoseError> {
        let ml_dsa = MlDsa::ALL.into_iter().find(|l| key.is_a(l.key_type()));
        let params = match (key.id(), ml_dsa) {
            (_, Some(level)) => {
                let public = key.raw_public_key().map_err(|e| bad_key(format!("ML-DSA key: {e}")))?;
                Params::MlDsa { level, public }
            }
            (Id::EC, None) => {
                let ec = key.ec_key().map_err(|e| bad_key(format!("EC key: {e}")))?;
                let curve =
                    ec.group().curve_name().and_then(Curve::from_nid).ok_or_else(|| bad_key("unsupported EC curve"))?;
                let (x, y) = ec_coordinates(&ec, curve).map_err(|e| bad_key(format!("EC key: {e}")))?;
                Params::Ec { curve, x, y }
            }
            (Id::RSA, None) => {
                let rsa = key.rsa().map_err(|e| bad_key(format!("RSA key: {e}")))?;
                Params::Rsa { n: rsa.n().to_vec(), e: rsa.e().to_vec() }
            }
            (Id::ED25519, None) => {
                Params::Ed25519 { x: key.raw_public_key().map_err(|e| bad_key(format!("Ed25519 key: {e}")))? }
            }
            (other, _) => return Err(bad_key(format!("unsupported key type {other:?}"))),
        };
        let key = params.public_key()?;
        let ec = key.ec_key().ok();
        Ok(Jwk { params, declared_alg: None, key, ec })
    }

    /// Parses a DER SubjectPublicKeyInfo.
    pub fn from_spki_der(der: &[u8]) -> Result<Jwk, JoseError> {
        let key = PKey::public_key_from_der(der).map_err(|e| bad_key(format!("SubjectPublicKeyInfo: {e}")))?;
        Jwk::from_public_key(&key)
    }

    /// The key as a DER SubjectPublicKeyInfo.
    pub fn to_spki_der(&self) -> Result<Vec<u8>, JoseError> {
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
            Params::MlDsa { level: MlDsa::L44, .. } => KeyKind::MlDsa44,
            Params::MlDsa { level: MlDsa::L65, .. } => KeyKind::MlDsa65,
            Params::MlDsa { level: MlDsa::L87, .. } => KeyKind::MlDsa87,
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
            // RFC 9964 §4: the thumbprint members of an AKP key are alg, kty and pub.
            Params::MlDsa { level, public } => {
                format!(r#"{{"alg":"{}","kty":"AKP","pub":"{}"}}"#, level.alg().name(), b64_encode(public))
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
}

/// A JWK set entry for a signing key given as a DER SubjectPublicKeyInfo (as
/// signd returns it): the public JWK with `kid`, `alg` and `"use":"sig"`.
/// `alg` must fit the key.
pub fn jwk_json(spki_der: &[u8], kid: &str, alg: Algorithm) -> Result<Value, JoseError> {
    let jwk = Jwk::from_spki_der(spki_der)?;
    if !alg.fits(jwk.kind()) {
        return Err(JoseError::AlgorithmKeyMismatch { alg: alg.name(), key: jwk.kind().to_string() });
    }
    let mut value = jwk.to_json();
    if let Value::Object(obj) = &mut value {
        obj.insert("kid".into(), kid.into());
        obj.insert("alg".into(), alg.name().into());
        obj.insert("use".into(), "sig".into());
    }
    Ok(value)
}

impl Params {
    fn public_key(&self) -> Result<PKey<Public>, JoseError> {
        match self {
            Params::Ec { curve, x, y } => {
                let group = curve.group()?;
                let (bx, by) = (bn(x)?, bn(y)?);
                // EC_KEY_set_public_key_affine_coordinates ends with EC_KEY_check_key: the
                // coordinates are in range, the point is on the curve and of the group's order.
                let ec = EcKey::from_public_key_affine_coordinates(group, &bx, &by)
                    .map_err(|_| bad_key(format!("the point is not a valid {} key", curve.name())))?;
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
            Params::MlDsa { level, public } => {
                let name = level.alg().name();
                if public.len() != level.public_len() {
                    return Err(bad_key(format!("{name} public keys are {} bytes", level.public_len())));
                }
                PKey::public_key_from_raw_bytes_ex(None, level.key_type(), None, public)
                    .map_err(|e| bad_key(format!("{name}: {e}")))
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

fn bn(bytes: &[u8]) -> Result<BigNum, JoseError> {
    BigNum::from_slice(bytes).map_err(|e| bad_key(e.to_string()))
}

fn member_str<'a>(obj: &'a Map<String, Value>, name: &'static str) -> Result<&'a str, JoseError> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad_key(format!("JWK member {name:?} is not a string"))),
        None => Err(bad_key(format!("JWK member {name:?} is missing"))),
    }
}

fn member_b64(obj: &Map<String, Value>, name: &'static str) -> Result<Vec<u8>, JoseError> {
    b64_decode(member_str(obj, name)?)
        .map_err(|_| bad_key(format!("JWK member {name:?} is not base64url without padding")))
}

fn bad_key(detail: impl Into<String>) -> JoseError {
    JoseError::BadPublicKey(detail.into())
}
