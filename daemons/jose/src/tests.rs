//! Tests with real OpenSSL keys of every kind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{KeyType, PKey, Private};
use openssl::rsa::Rsa;
use openssl::sign::Signer;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use signet_types::{KeyAlgorithm, SignatureScheme};

use crate::jwt::{verify_jwt, Claims, Validation};
use crate::*;

fn generate(alg: KeyAlgorithm) -> PKey<Private> {
    let ec = |nid| PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap();
    let ml_dsa = |kind| {
        let mut seed = [0u8; 32];
        openssl::rand::rand_bytes(&mut seed).unwrap();
        PKey::private_key_from_seed(None, kind, None, &seed).unwrap()
    };
    match alg {
        KeyAlgorithm::EcP256 => ec(Nid::X9_62_PRIME256V1),
        KeyAlgorithm::EcP384 => ec(Nid::SECP384R1),
        KeyAlgorithm::EcP521 => ec(Nid::SECP521R1),
        KeyAlgorithm::Ed25519 => PKey::generate_ed25519().unwrap(),
        KeyAlgorithm::Rsa2048 => PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap(),
        KeyAlgorithm::Rsa3072 => PKey::from_rsa(Rsa::generate(3072).unwrap()).unwrap(),
        KeyAlgorithm::Rsa4096 => PKey::from_rsa(Rsa::generate(4096).unwrap()).unwrap(),
        KeyAlgorithm::MlDsa44 => ml_dsa(KeyType::ML_DSA_44),
        KeyAlgorithm::MlDsa65 => ml_dsa(KeyType::ML_DSA_65),
        KeyAlgorithm::MlDsa87 => ml_dsa(KeyType::ML_DSA_87),
    }
}

/// A key for `alg` (RSA: 2048 bits).
fn key_for(alg: Algorithm) -> PKey<Private> {
    let key_alg = KeyAlgorithm::ALL.into_iter().find(|k| alg.fits_key(*k)).unwrap();
    generate(key_alg)
}

fn spki(key: &PKey<Private>) -> Vec<u8> {
    key.public_key_to_der().unwrap()
}

fn jwk_of(key: &PKey<Private>) -> Jwk {
    Jwk::from_spki_der(&spki(key)).unwrap()
}

/// A compact JWS signed the way tokend will: OpenSSL's DER output turned
/// into the JWS form with `signature_from_der`.
fn token(alg: Algorithm, key: &PKey<Private>, header: Value, claims: &Value) -> String {
    let input = encode_signing_input(&header, claims.to_string().as_bytes());
    let der = alg.scheme();
    let sig = match alg {
        Algorithm::Es256 | Algorithm::Es384 | Algorithm::Es512 => {
            let md = match der {
                SignatureScheme::EcdsaSha256 => MessageDigest::sha256(),
                SignatureScheme::EcdsaSha384 => MessageDigest::sha384(),
                _ => MessageDigest::sha512(),
            };
            let der_sig = Signer::new(md, key).unwrap().sign_oneshot_to_vec(input.as_bytes()).unwrap();
            alg.signature_from_der(&der_sig).unwrap()
        }
        _ => alg.sign(key, input.as_bytes()).unwrap(),
    };
    compact(&input, &sig)
}

fn flip_last_char(s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    let last = chars.len() - 1;
    chars[last] = if chars[last] == 'A' { 'Q' } else { 'A' };
    chars.into_iter().collect()
}

#[test]
fn names_schemes_and_keys() {
    for alg in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(alg.name()).unwrap(), alg);
        assert_eq!(alg.to_string(), alg.name());
    }
    assert_eq!(Algorithm::MlDsa44.name(), "ML-DSA-44");
    assert_eq!(Algorithm::Ps256.scheme(), SignatureScheme::RsaPssSha256);
    assert_eq!(Algorithm::MlDsa87.scheme(), SignatureScheme::MlDsa87);
    for bad in ["none", "HS256", "es256", "ML-DSA-44 ", ""] {
        assert!(matches!(Algorithm::from_name(bad), Err(JoseError::UnsupportedAlgorithm(_))), "{bad}");
    }
    for key in KeyAlgorithm::ALL {
        let alg = Algorithm::default_for(key);
        assert!(alg.fits_key(key), "{key:?}");
        assert_eq!(
            Algorithm::ALL.iter().filter(|a| a.fits_key(key)).count(),
            if alg == Algorithm::Rs256 { 2 } else { 1 }
        );
    }
    assert_eq!(Algorithm::default_for(KeyAlgorithm::Rsa4096), Algorithm::Rs256);
    assert!(Algorithm::Ps256.fits_key(KeyAlgorithm::Rsa3072));
    assert!(!Algorithm::Es256.fits_key(KeyAlgorithm::EcP384));
}

#[test]
fn sign_verify_round_trip_every_algorithm() {
    for alg in Algorithm::ALL {
        let key = key_for(alg);
        let jwk = jwk_of(&key);
        assert!(alg.fits(jwk.kind()), "{alg}");
        let sig = alg.sign(&key, b"header.payload").unwrap();
        alg.verify(&jwk, b"header.payload", &sig).unwrap();
        assert_eq!(alg.verify(&jwk, b"header.payloaD", &sig), Err(JoseError::BadSignature), "{alg}");
        let mut bad = sig.clone();
        bad[sig.len() / 2] ^= 1;
        assert_eq!(alg.verify(&jwk, b"header.payload", &bad), Err(JoseError::BadSignature), "{alg}");
        assert_eq!(alg.verify(&jwk, b"header.payload", &sig[1..]), Err(JoseError::BadSignature), "{alg}");
        // Another algorithm with this key is refused before any crypto.
        let other = Algorithm::ALL.into_iter().find(|a| !a.fits(jwk.kind())).unwrap();
        assert!(matches!(other.verify(&jwk, b"x", &sig), Err(JoseError::AlgorithmKeyMismatch { .. })));
    }
}

#[test]
fn every_signet_key_algorithm_as_jwk() {
    for key_alg in KeyAlgorithm::ALL {
        let key = generate(key_alg);
        let der = spki(&key);
        let jwk = Jwk::from_spki_der(&der).unwrap();
        assert!(Algorithm::default_for(key_alg).fits(jwk.kind()), "{key_alg:?}: {}", jwk.kind());
        assert_eq!(jwk.to_spki_der().unwrap(), der, "{key_alg:?}");
        let back = Jwk::from_json(&jwk.to_json()).unwrap();
        assert_eq!(back, jwk);
        assert_eq!(back.thumbprint(), jwk.thumbprint());
        let digest: [u8; 32] = Sha256::digest(jwk.canonical_json().as_bytes()).into();
        assert_eq!(jwk.thumbprint_sha256(), digest);
    }
}

#[test]
fn ec_points_off_the_curve_are_refused() {
    for key_alg in [KeyAlgorithm::EcP256, KeyAlgorithm::EcP384, KeyAlgorithm::EcP521] {
        let good = Jwk::from_spki_der(&spki(&generate(key_alg))).unwrap().to_json();
        assert!(Jwk::from_json(&good).is_ok());
        // y + 1 (the last byte flipped): in range, the right length, not on the curve.
        let mut bad = good.clone();
        let mut y = crate::b64_decode(bad["y"].as_str().unwrap()).unwrap();
        *y.last_mut().unwrap() ^= 1;
        bad["y"] = crate::b64_encode(&y).into();
        let err = Jwk::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("not a valid"), "{key_alg:?}: {err}");
        // (0, 0) is on none of these curves.
        let mut zero = good.clone();
        zero["x"] = crate::b64_encode(&vec![0u8; y.len()]).into();
        zero["y"] = crate::b64_encode(&vec![0u8; y.len()]).into();
        assert!(Jwk::from_json(&zero).is_err(), "{key_alg:?}: the point (0, 0)");
    }
}

#[test]
fn ml_dsa_jwk_is_akp() {
    for (key_alg, name, len) in [
        (KeyAlgorithm::MlDsa44, "ML-DSA-44", 1312),
        (KeyAlgorithm::MlDsa65, "ML-DSA-65", 1952),
        (KeyAlgorithm::MlDsa87, "ML-DSA-87", 2592),
    ] {
        let key = generate(key_alg);
        let jwk = jwk_of(&key);
        let json = jwk.to_json();
        assert_eq!(json["kty"], "AKP");
        assert_eq!(json["alg"], name);
        let public = b64_decode(json["pub"].as_str().unwrap()).unwrap();
        assert_eq!(public.len(), len);
        assert_eq!(public, key.raw_public_key().unwrap());
        // RFC 9964: the thumbprint covers alg, kty and pub, in that order.
        assert_eq!(jwk.canonical_json(), format!(r#"{{"alg":"{name}","kty":"AKP","pub":"{}"}}"#, b64_encode(&public)));

        let with = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
            let mut v = json.clone();
            f(v.as_object_mut().unwrap());
            Jwk::from_json(&v)
        };
        assert!(with(&|o| {
            o.insert("kid".into(), "k1".into());
            o.insert("use".into(), "sig".into());
        })
        .is_ok());
        assert!(matches!(
            with(&|o| {
                o.remove("alg");
            }),
            Err(JoseError::BadPublicKey(_))
        ));
        assert!(matches!(
            with(&|o| {
                o.insert("alg".into(), "ML-DSA-128".into());
            }),
            Err(JoseError::BadPublicKey(_))
        ));
        assert!(matches!(
            with(&|o| {
                o.insert("priv".into(), "AAAA".into());
            }),
            Err(JoseError::BadPublicKey(_))
        ));
        assert!(matches!(
            with(&|o| {
                o.insert("pub".into(), b64_encode(&public[1..]).into());
            }),
            Err(JoseError::BadPublicKey(_))
        ));
        // A JWK of another parameter set's alg is refused (wrong length).
        let other = if name == "ML-DSA-44" { "ML-DSA-65" } else { "ML-DSA-44" };
        assert!(with(&|o| {
            o.insert("alg".into(), other.into());
        })
        .is_err());
    }
}

#[test]
fn ecdsa_signature_from_der() {
    for alg in [Algorithm::Es256, Algorithm::Es384, Algorithm::Es512] {
        let key = key_for(alg);
        let jwk = jwk_of(&key);
        let claims = json!({"exp": 1});
        let t = token(alg, &key, json!({"alg": alg.name()}), &claims);
        let jws = CompactJws::parse(&t).unwrap();
        let width = match alg {
            Algorithm::Es256 => 32,
            Algorithm::Es384 => 48,
            _ => 66,
        };
        assert_eq!(jws.signature().len(), 2 * width);
        jws.verify(&jwk).unwrap();
        assert!(matches!(alg.signature_from_der(b"\x30\x00"), Err(JoseError::Malformed(_))));
        assert!(matches!(alg.signature_from_der(b"garbage"), Err(JoseError::Malformed(_))));
    }
    // Too wide for P-256: a P-521 signature.
    let p521 = key_for(Algorithm::Es512);
    let der = Signer::new(MessageDigest::sha512(), &p521).unwrap().sign_oneshot_to_vec(b"x").unwrap();
    let raw = Algorithm::Es512.signature_from_der(&der).unwrap();
    if raw[..66 - 32].iter().any(|b| *b != 0) {
        assert!(Algorithm::Es256.signature_from_der(&der).is_err());
    }
    for alg in [Algorithm::EdDsa, Algorithm::Rs256, Algorithm::Ps256, Algorithm::MlDsa44] {
        assert_eq!(alg.signature_from_der(b"\x01\x02").unwrap(), b"\x01\x02");
    }
}

#[test]
fn jwk_json_entries() {
    let key = key_for(Algorithm::Es256);
    let entry = jwk_json(&spki(&key), "k1", Algorithm::Es256).unwrap();
    assert_eq!(entry["kid"], "k1");
    assert_eq!(entry["alg"], "ES256");
    assert_eq!(entry["use"], "sig");
    assert_eq!(entry["kty"], "EC");
    assert_eq!(Jwk::from_json(&entry).unwrap(), jwk_of(&key));
    assert!(matches!(jwk_json(&spki(&key), "k1", Algorithm::Es384), Err(JoseError::AlgorithmKeyMismatch { .. })));
    assert!(matches!(jwk_json(b"\x30\x00", "k1", Algorithm::Es256), Err(JoseError::BadPublicKey(_))));
    let ml = key_for(Algorithm::MlDsa65);
    let entry = jwk_json(&spki(&ml), "pq", Algorithm::MlDsa65).unwrap();
    assert_eq!(entry["kty"], "AKP");
    assert_eq!(entry["alg"], "ML-DSA-65");
}

#[test]
fn jwks_skips_what_it_cannot_use() {
    let es = key_for(Algorithm::Es256);
    let ed = key_for(Algorithm::EdDsa);
    let ml = key_for(Algorithm::MlDsa44);
    let set = json!({"keys": [
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        {"kty": "EC", "crv": "secp256k1", "x": "AA", "y": "AA", "kid": "k256"},
        {"kty": "XYZ", "kid": "future"},
        7,
        "text",
        {"kty": "RSA", "alg": "RSA-OAEP", "use": "enc", "n": "AQAB", "e": "AQAB"},
        jwk_json(&spki(&es), "es", Algorithm::Es256).unwrap(),
        {"kid": 5, "kty": "OKP"},
        jwk_json(&spki(&ed), "ed", Algorithm::EdDsa).unwrap(),
        jwk_json(&spki(&ml), "ml", Algorithm::MlDsa44).unwrap(),
        // Fits the curve but declares another alg: unusable.
        {"kty": "EC", "crv": "P-256", "alg": "ES384", "kid": "liar",
         "x": jwk_of(&es).to_json()["x"], "y": jwk_of(&es).to_json()["y"]},
        // A declared alg Signet does not know.
        {"kty": "OKP", "crv": "Ed25519", "alg": "Ed448", "kid": "ed448", "x": jwk_of(&ed).to_json()["x"]},
    ]});
    let jwks = Jwks::parse(set.to_string().as_bytes()).unwrap();
    assert_eq!(jwks.len(), 3);
    assert_eq!(jwks.find(Some("es"), Algorithm::Es256), Some(&jwk_of(&es)));
    assert_eq!(jwks.find(Some("es"), Algorithm::Es384), None);
    assert_eq!(jwks.find(Some("ed"), Algorithm::EdDsa), Some(&jwk_of(&ed)));
    assert_eq!(jwks.find(None, Algorithm::MlDsa44), Some(&jwk_of(&ml)));
    assert_eq!(jwks.find(Some("liar"), Algorithm::Es384), None);
    assert_eq!(jwks.find(Some("nope"), Algorithm::Es256), None);

    for bad in [&b"not json"[..], b"[]", b"{}", b"{\"keys\": {}}", b"{\"keys\": 1}"] {
        assert!(matches!(Jwks::parse(bad), Err(JoseError::Malformed(_))), "{}", String::from_utf8_lossy(bad));
    }
    assert!(Jwks::parse(b"{\"keys\": []}").unwrap().is_empty());
    let huge = format!("{{\"keys\": [], \"pad\": \"{}\"}}", "x".repeat(MAX_JWKS_LEN));
    assert!(matches!(Jwks::parse(huge.as_bytes()), Err(JoseError::Malformed(_))));
    let many = json!({"keys": vec![json!({"kty": "oct"}); MAX_JWKS_KEYS + 1]});
    assert!(matches!(Jwks::parse(many.to_string().as_bytes()), Err(JoseError::Malformed(_))));
}

#[test]
fn compact_parse_is_strict() {
    let key = key_for(Algorithm::EdDsa);
    let good = token(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "kid": "ed", "typ": "at+jwt"}), &json!({"exp": 1}));
    let jws = CompactJws::parse(&good).unwrap();
    assert_eq!(jws.header().alg, Some(Algorithm::EdDsa));
    assert_eq!(jws.header().kid.as_deref(), Some("ed"));
    assert_eq!(jws.header().typ.as_deref(), Some("at+jwt"));
    assert_eq!(jws.header().raw["kid"], "ed");
    assert_eq!(jws.payload(), br#"{"exp":1}"#);
    assert_eq!(format!("{}.{}", jws.signing_input(), b64_encode(jws.signature())), good);
    jws.verify(&jwk_of(&key)).unwrap();

    let parts: Vec<&str> = good.split('.').collect();
    let h = |v: Value| b64_encode(v.to_string().as_bytes());
    let malformed = |t: &str| matches!(CompactJws::parse(t), Err(JoseError::Malformed(_)));
    assert!(malformed(""));
    assert!(malformed("a.b"));
    assert!(malformed(&format!("{good}.x")));
    assert!(malformed(&format!("{}=.{}.{}", parts[0], parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}+", parts[0], parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", b64_encode(b"[1]"), parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", b64_encode(b"{"), parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", h(json!({"kid": "x"})), parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", h(json!({"alg": 1})), parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", h(json!({"alg": "EdDSA", "kid": 1})), parts[1], parts[2])));
    assert!(malformed(&format!("{}.{}.{}", h(json!({"alg": "EdDSA", "crit": ["exp"]})), parts[1], parts[2])));
    assert!(malformed(&"a".repeat(MAX_TOKEN_LEN + 1)));
    assert!(matches!(
        CompactJws::parse(&format!("{}.{}.", h(json!({"alg": "none"})), parts[1])),
        Err(JoseError::UnsupportedAlgorithm(_))
    ));
    assert!(matches!(
        CompactJws::parse(&format!("{}.{}.{}", h(json!({"alg": "EdDSA", "jwk": {"kty": "oct"}})), parts[1], parts[2])),
        Err(JoseError::BadPublicKey(_))
    ));
}

#[test]
fn mac_tokens() {
    let secret = [7u8; 32];
    let input = encode_signing_input(&json!({"alg": "HS256"}), b"{}");
    let mac = MacAlgorithm::Hs256.mac(&secret, input.as_bytes()).unwrap();
    let jws = CompactJws::parse(&compact(&input, &mac)).unwrap();
    assert_eq!(jws.header().alg, None);
    assert_eq!(jws.header().mac_alg, Some(MacAlgorithm::Hs256));
    assert_eq!(jws.header().alg_name(), "HS256");
    jws.verify_mac(&secret).unwrap();
    assert_eq!(jws.verify_mac(&[8u8; 32]), Err(JoseError::BadMac));
    assert_eq!(jws.verify_mac(&[7u8; 31]), Err(JoseError::MacKeyTooShort("HS256")));
    // A MAC token is never accepted as a signature.
    let key = key_for(Algorithm::Es256);
    assert!(matches!(jws.verify(&jwk_of(&key)), Err(JoseError::UnsupportedAlgorithm(_))));
    let jwks =
        Jwks::parse(json!({"keys": [jwk_json(&spki(&key), "k", Algorithm::Es256).unwrap()]}).to_string().as_bytes())
            .unwrap();
    let v = Validation { now: 0, ..Validation::default() };
    assert!(matches!(verify_jwt(&compact(&input, &mac), &jwks, &v), Err(JoseError::UnsupportedAlgorithm(_))));
    // And a signed token is not a MAC token.
    let signed = token(Algorithm::Es256, &key, json!({"alg": "ES256"}), &json!({}));
    assert!(matches!(CompactJws::parse(&signed).unwrap().verify_mac(&secret), Err(JoseError::UnsupportedAlgorithm(_))));
}

struct Issuer {
    keys: Vec<(Algorithm, String, PKey<Private>)>,
    jwks: Jwks,
}

fn issuer(algs: &[Algorithm]) -> Issuer {
    let keys: Vec<_> = algs.iter().enumerate().map(|(i, a)| (*a, format!("k{i}"), key_for(*a))).collect();
    let entries: Vec<Value> = keys.iter().map(|(a, kid, k)| jwk_json(&spki(k), kid, *a).unwrap()).collect();
    let jwks = Jwks::parse(json!({ "keys": entries }).to_string().as_bytes()).unwrap();
    Issuer { keys, jwks }
}

const NOW: u64 = 1_800_000_000;

fn validation() -> Validation {
    Validation {
        issuer: Some("https://tokend.example".into()),
        audience: Some("https://api.example".into()),
        now: NOW,
        leeway: 30,
        typ: Some("at+jwt".into()),
    }
}

fn claims() -> Value {
    json!({
        "iss": "https://tokend.example", "sub": "alice", "aud": "https://api.example",
        "exp": NOW + 300, "nbf": NOW - 10, "iat": NOW - 10, "jti": "j1",
        "client_id": "c1", "scope": "read write", "cnf": {"x5t#S256": "abc", "jkt": "def"}, "tenant": "t9",
    })
}

#[test]
fn jwt_round_trip_every_algorithm() {
    let iss = issuer(&Algorithm::ALL);
    for (alg, kid, key) in &iss.keys {
        let t = token(*alg, key, json!({"alg": alg.name(), "kid": kid, "typ": "at+jwt"}), &claims());
        let c = verify_jwt(&t, &iss.jwks, &validation()).unwrap();
        assert_eq!(c.sub.as_deref(), Some("alice"), "{alg}");
        assert_eq!(c.aud, vec!["https://api.example".to_owned()]);
        assert_eq!(c.client_id.as_deref(), Some("c1"));
        assert_eq!(c.scope.as_deref(), Some("read write"));
        assert_eq!(c.exp, Some(NOW + 300));
        let cnf = c.cnf.as_ref().unwrap();
        assert_eq!((cnf.x5t_s256.as_deref(), cnf.jkt.as_deref()), (Some("abc"), Some("def")));
        assert_eq!(c.extra["tenant"], "t9");
        assert_eq!(c.extra.len(), 1);
        // One flipped signature byte, or one changed payload byte.
        assert_eq!(verify_jwt(&flip_last_char(&t), &iss.jwks, &validation()), Err(JoseError::BadSignature), "{alg}");
        let parts: Vec<&str> = t.split('.').collect();
        let mut payload = b64_decode(parts[1]).unwrap();
        let at = payload.iter().position(|b| *b == b'a').unwrap();
        payload[at] = b'b';
        let forged = format!("{}.{}.{}", parts[0], b64_encode(&payload), parts[2]);
        assert_eq!(verify_jwt(&forged, &iss.jwks, &validation()), Err(JoseError::BadSignature), "{alg}");
    }
}

#[test]
fn jwt_key_selection() {
    let iss = issuer(&[Algorithm::Es256, Algorithm::Es256, Algorithm::EdDsa]);
    let (_, _, second) = &iss.keys[1];
    let v = validation();
    let sign = |header: Value| token(Algorithm::Es256, second, header, &claims());
    // By kid.
    verify_jwt(&sign(json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"})), &iss.jwks, &v).unwrap();
    // The kid of another key of the same kind: that key is used, and fails.
    assert_eq!(
        verify_jwt(&sign(json!({"alg": "ES256", "kid": "k0", "typ": "at+jwt"})), &iss.jwks, &v),
        Err(JoseError::BadSignature)
    );
    // The kid of a key of another kind, or an unknown kid.
    assert_eq!(
        verify_jwt(&sign(json!({"alg": "ES256", "kid": "k2", "typ": "at+jwt"})), &iss.jwks, &v),
        Err(JoseError::UnknownKey)
    );
    assert_eq!(
        verify_jwt(&sign(json!({"alg": "ES256", "kid": "k9", "typ": "at+jwt"})), &iss.jwks, &v),
        Err(JoseError::UnknownKey)
    );
    // No kid: every ES256 key is tried.
    verify_jwt(&sign(json!({"alg": "ES256", "typ": "at+jwt"})), &iss.jwks, &v).unwrap();
    // No key for the alg at all.
    let rsa = key_for(Algorithm::Rs256);
    let t = token(Algorithm::Rs256, &rsa, json!({"alg": "RS256", "typ": "at+jwt"}), &claims());
    assert_eq!(verify_jwt(&t, &iss.jwks, &v), Err(JoseError::UnknownKey));
}

#[test]
fn jwt_claim_checks_at_the_boundaries() {
    let iss = issuer(&[Algorithm::EdDsa]);
    let (_, _, key) = &iss.keys[0];
    let check = |header: Value, claims: Value, v: &Validation| {
        verify_jwt(&token(Algorithm::EdDsa, key, header, &claims), &iss.jwks, v)
    };
    let header = json!({"alg": "EdDSA", "kid": "k0", "typ": "at+jwt"});
    let with = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut c = claims();
        f(c.as_object_mut().unwrap());
        c
    };
    let v = validation();
    // exp: valid while now < exp + leeway.
    assert!(check(
        header.clone(),
        with(&|c| {
            c.insert("exp".into(), (NOW - 29).into());
        }),
        &v
    )
    .is_ok());
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("exp".into(), (NOW - 30).into());
            }),
            &v
        ),
        Err(JoseError::Expired)
    );
    let strict = Validation { leeway: 0, ..validation() };
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("exp".into(), NOW.into());
            }),
            &strict
        ),
        Err(JoseError::Expired)
    );
    assert!(check(
        header.clone(),
        with(&|c| {
            c.insert("exp".into(), (NOW + 1).into());
        }),
        &strict
    )
    .is_ok());
    assert!(check(
        header.clone(),
        with(&|c| {
            c.insert("exp".into(), json!(NOW as f64 + 1.5));
        }),
        &strict
    )
    .is_ok());
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.remove("exp");
            }),
            &v
        ),
        Err(JoseError::MissingClaim("exp"))
    );
    assert!(matches!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("exp".into(), "soon".into());
            }),
            &v
        ),
        Err(JoseError::Malformed(_))
    ));
    assert!(matches!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("exp".into(), (-1).into());
            }),
            &v
        ),
        Err(JoseError::Malformed(_))
    ));
    // nbf: valid once now + leeway >= nbf.
    assert!(check(
        header.clone(),
        with(&|c| {
            c.insert("nbf".into(), (NOW + 30).into());
        }),
        &v
    )
    .is_ok());
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("nbf".into(), (NOW + 31).into());
            }),
            &v
        ),
        Err(JoseError::NotYetValid)
    );
    assert!(check(
        header.clone(),
        with(&|c| {
            c.remove("nbf");
        }),
        &v
    )
    .is_ok());
    // iss, aud.
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("iss".into(), "https://evil.example".into());
            }),
            &v
        ),
        Err(JoseError::WrongIssuer)
    );
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.remove("iss");
            }),
            &v
        ),
        Err(JoseError::WrongIssuer)
    );
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("aud".into(), "https://other.example".into());
            }),
            &v
        ),
        Err(JoseError::WrongAudience)
    );
    assert_eq!(
        check(
            header.clone(),
            with(&|c| {
                c.remove("aud");
            }),
            &v
        ),
        Err(JoseError::WrongAudience)
    );
    let many = with(&|c| {
        c.insert("aud".into(), json!(["https://other.example", "https://api.example"]));
    });
    assert_eq!(check(header.clone(), many.clone(), &v).unwrap().aud.len(), 2);
    let open = Validation { issuer: None, audience: None, ..validation() };
    assert!(check(
        header.clone(),
        with(&|c| {
            c.remove("iss");
            c.remove("aud");
        }),
        &open
    )
    .is_ok());
    // typ: case-insensitive, application/ optional.
    for typ in ["at+jwt", "AT+JWT", "application/at+jwt", "Application/At+Jwt"] {
        assert!(check(json!({"alg": "EdDSA", "typ": typ}), claims(), &v).is_ok(), "{typ}");
    }
    for typ in [json!("JWT"), json!("application/jwt")] {
        assert!(matches!(check(json!({"alg": "EdDSA", "typ": typ}), claims(), &v), Err(JoseError::WrongType { .. })));
    }
    assert!(matches!(check(json!({"alg": "EdDSA"}), claims(), &v), Err(JoseError::WrongType { found: None, .. })));
    assert!(check(json!({"alg": "EdDSA"}), claims(), &Validation { typ: None, ..validation() }).is_ok());
    // The signature is checked before the claims: a forged expired token is BadSignature.
    let expired = token(
        Algorithm::EdDsa,
        key,
        header.clone(),
        &with(&|c| {
            c.insert("exp".into(), 1.into());
        }),
    );
    assert_eq!(verify_jwt(&flip_last_char(&expired), &iss.jwks, &v), Err(JoseError::BadSignature));
    // Claims must be a JSON object with typed registered claims.
    assert!(matches!(check(header.clone(), json!([1]), &v), Err(JoseError::Malformed(_))));
    assert!(matches!(
        check(
            header.clone(),
            with(&|c| {
                c.insert("sub".into(), 5.into());
            }),
            &v
        ),
        Err(JoseError::Malformed(_))
    ));
    assert!(matches!(
        check(
            header,
            with(&|c| {
                c.insert("aud".into(), json!([1]));
            }),
            &v
        ),
        Err(JoseError::Malformed(_))
    ));
}

#[test]
fn claims_serialize_back() {
    let c: Claims = serde_json::from_value(claims()).unwrap();
    let back: Claims = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
    assert_eq!(back, c);
}
