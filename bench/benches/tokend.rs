//! The in-process pieces of a tokend access token (criterion), per JWS
//! algorithm, with no daemon: what a relying party pays to check one.
//!
//! Group `tokend_jwt`, ids `<step>/<alg>`:
//! - `encode`: the JWS signing input of a token shaped as tokend mints it
//!   (header `alg`/`kid`/`typ: at+jwt`, RFC 9068 claims), from its header
//!   and claims as JSON values (what tokend does before asking signd);
//! - `verify`: parse the compact token and verify its signature with the
//!   key's JWK (`CompactJws::parse` + `verify`);
//! - `verify_jwt`: `signet_jose::jwt::verify_jwt` end to end against a JWKS
//!   of one key: key lookup by `kid`, signature, `typ`, `exp`, `nbf`, `iss`,
//!   `aud` (tokend's introspection runs the same with its own JWKS).
//!
//! Signing itself is signd's (bench/benches/signd.rs measures it). Keys:
//! P-256, P-384, Ed25519, RSA-2048 (RS256 and PS256), ML-DSA-44/65/87.

#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::Criterion;
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{KeyType, PKey, Private};
use openssl::rsa::Rsa;
use serde_json::{json, Value};
use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::{compact, encode_signing_input, jwk_json, Algorithm, CompactJws, Jwk, Jwks};

const ISSUER: &str = "https://auth.example.net";
const KID: &str = "tokend-bench";

fn key_for(alg: Algorithm) -> PKey<Private> {
    let ec = |nid| PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap();
    let ml_dsa = |kind| {
        let mut seed = [0u8; 32];
        openssl::rand::rand_bytes(&mut seed).unwrap();
        PKey::private_key_from_seed(None, kind, None, &seed).unwrap()
    };
    match alg {
        Algorithm::Es256 => ec(Nid::X9_62_PRIME256V1),
        Algorithm::Es384 => ec(Nid::SECP384R1),
        Algorithm::Es512 => ec(Nid::SECP521R1),
        Algorithm::EdDsa => PKey::generate_ed25519().unwrap(),
        Algorithm::Rs256 | Algorithm::Ps256 => PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap(),
        Algorithm::MlDsa44 => ml_dsa(KeyType::ML_DSA_44),
        Algorithm::MlDsa65 => ml_dsa(KeyType::ML_DSA_65),
        Algorithm::MlDsa87 => ml_dsa(KeyType::ML_DSA_87),
        _ => panic!("no key for {alg}"),
    }
}

/// Header and claims as tokend's `mint` builds them (client_credentials, one scope).
fn header_and_claims(alg: Algorithm, now: u64) -> (Value, Value) {
    let header = json!({ "alg": alg.name(), "kid": KID, "typ": "at+jwt" });
    let claims = json!({
        "iss": ISSUER, "sub": "billing", "aud": "https://api.example.net",
        "exp": now + 300, "iat": now, "nbf": now, "jti": "q2xKQ0x3cE5vTm9PcFFyU3", "client_id": "billing",
        "scope": "invoices.read",
    });
    (header, claims)
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let algs = [
        Algorithm::Es256,
        Algorithm::Es384,
        Algorithm::EdDsa,
        Algorithm::Rs256,
        Algorithm::Ps256,
        Algorithm::MlDsa44,
        Algorithm::MlDsa65,
        Algorithm::MlDsa87,
    ];
    let mut group = c.benchmark_group("tokend_jwt");
    for alg in algs {
        let key = key_for(alg);
        let spki = key.public_key_to_der().unwrap();
        let jwk_value = jwk_json(&spki, KID, alg).unwrap();
        let jwk = Jwk::from_json(&jwk_value).unwrap();
        let jwks = Jwks::parse(json!({ "keys": [jwk_value] }).to_string().as_bytes()).unwrap();
        let (header, claims) = header_and_claims(alg, now);
        let input = encode_signing_input(&header, claims.to_string().as_bytes());
        let sig = alg.sign(&key, input.as_bytes()).unwrap();
        let token = compact(&input, &sig);
        let validation = Validation {
            issuer: Some(ISSUER.into()),
            audience: Some("https://api.example.net".into()),
            now,
            leeway: 0,
            typ: Some("at+jwt".into()),
        };
        // The token is good before anything is timed.
        verify_jwt(&token, &jwks, &validation).unwrap();

        group.bench_function(format!("encode/{}", alg.name()), |b| {
            b.iter(|| {
                let payload = black_box(&claims).to_string();
                encode_signing_input(black_box(&header), payload.as_bytes())
            })
        });
        group.bench_function(format!("verify/{}", alg.name()), |b| {
            b.iter(|| {
                let jws = CompactJws::parse(black_box(&token)).unwrap();
                jws.verify(&jwk).unwrap();
            })
        });
        group.bench_function(format!("verify_jwt/{}", alg.name()), |b| {
            b.iter(|| verify_jwt(black_box(&token), &jwks, &validation).unwrap())
        });
    }
    group.finish();
    c.final_summary();
}
