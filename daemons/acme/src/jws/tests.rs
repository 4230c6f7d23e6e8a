//! Tests of JWS parsing and verification on real signed requests.

use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use serde_json::{json, Value};

use super::sign::{self, Signer};
use super::*;

const URL: &str = "https://acme.example/acme/new-order";
const NONCE: &str = "6S8IqOGY7eL2lsGoTZYifg";
const KID: &str = "https://acme.example/acme/acct/evOfKhNU60wg";

fn ec(nid: Nid) -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap()
}

fn rsa(bits: u32) -> PKey<Private> {
    PKey::from_rsa(Rsa::generate(bits).unwrap()).unwrap()
}

fn ed25519() -> PKey<Private> {
    PKey::generate_ed25519().unwrap()
}

fn key_for(alg: Algorithm) -> PKey<Private> {
    match alg {
        Algorithm::Es256 => ec(Nid::X9_62_PRIME256V1),
        Algorithm::Es384 => ec(Nid::SECP384R1),
        Algorithm::Es512 => ec(Nid::SECP521R1),
        Algorithm::EdDsa => ed25519(),
        Algorithm::Rs256 | Algorithm::Ps256 => rsa(2048),
        other => panic!("not an ACME algorithm: {other}"),
    }
}

fn body(jws: &Value) -> Vec<u8> {
    serde_json::to_vec(jws).unwrap()
}

fn header_of(jws: &Value) -> Value {
    serde_json::from_slice(&b64_decode(jws["protected"].as_str().unwrap()).unwrap()).unwrap()
}

fn err(body: &[u8]) -> JwsError {
    SignedRequest::parse(body).unwrap_err()
}

/// Signs `payload` with `key` under `header` (with the signing algorithm `alg`).
fn signed(alg: Algorithm, key: &PKey<Private>, header: Value, payload: &[u8]) -> Vec<u8> {
    body(&sign::with_header(alg, key, &header, payload).unwrap())
}

#[test]
fn every_algorithm_verifies_with_jwk_and_kid() {
    for alg in ACME_ALGORITHMS {
        let key = key_for(alg);
        let payload = br#"{"identifiers":[{"type":"dns","value":"example.org"}]}"#;
        let jws = sign::request(alg, &key, Signer::Jwk, Some(NONCE), URL, payload).unwrap();
        let request = SignedRequest::parse(&body(&jws)).unwrap();
        assert_eq!(request.header().alg, alg);
        assert_eq!(request.header().nonce, NONCE);
        request.check_url(URL).unwrap();
        let verified = request.verify_embedded().unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert_eq!(verified.payload(), payload);
        assert!(!verified.is_post_as_get());
        assert!(verified.jwk().is_some());

        let jwk = sign::public_jwk(&key).unwrap();
        let jws = sign::request(alg, &key, Signer::Kid(KID), Some(NONCE), URL, b"").unwrap();
        let request = SignedRequest::parse(&body(&jws)).unwrap();
        assert_eq!(request.header().key, KeyRef::Kid(KID.into()));
        let verified = request.verify(&jwk).unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert!(verified.is_post_as_get());
        verified.expect_post_as_get().unwrap();
        assert_eq!(verified.kid(), Some(KID));
    }
}

#[test]
fn wrong_key_is_a_bad_signature() {
    for alg in ACME_ALGORITHMS {
        let jws = sign::request(alg, &key_for(alg), Signer::Kid(KID), Some(NONCE), URL, b"{}").unwrap();
        let other = sign::public_jwk(&key_for(alg)).unwrap();
        let e = SignedRequest::parse(&body(&jws)).unwrap().verify(&other).unwrap_err();
        assert_eq!(e, JwsError::BadSignature, "{alg}");
        assert_eq!(e.problem_type(), ProblemType::Malformed);
    }
}

#[test]
fn algorithm_must_fit_the_key() {
    let p256 = ec(Nid::X9_62_PRIME256V1);
    let p384 = sign::public_jwk(&ec(Nid::SECP384R1)).unwrap();
    let rsa_key = sign::public_jwk(&rsa(2048)).unwrap();
    let jws = sign::request(Algorithm::Es256, &p256, Signer::Kid(KID), Some(NONCE), URL, b"").unwrap();
    for key in [&p384, &rsa_key] {
        let e = SignedRequest::parse(&body(&jws)).unwrap().verify(key).unwrap_err();
        assert!(matches!(e, JwsError::AlgorithmKeyMismatch { alg: "ES256", .. }), "{e}");
        let problem = e.problem();
        assert_eq!(problem.kind, ProblemType::BadSignatureAlgorithm);
        assert_eq!(problem.algorithms.as_deref().map(<[String]>::len), Some(SUPPORTED_ALGORITHMS.len()));
    }
    // The header claims RS256 but carries (and is signed by) an EC key.
    let jwk = sign::public_jwk(&p256).unwrap().to_json();
    let forged = signed(Algorithm::Es256, &p256, json!({"alg": "RS256", "jwk": jwk, "nonce": NONCE, "url": URL}), b"");
    let e = SignedRequest::parse(&forged).unwrap().verify_embedded().unwrap_err();
    assert!(matches!(e, JwsError::AlgorithmKeyMismatch { alg: "RS256", .. }), "{e}");
    // The signer refuses too.
    assert!(matches!(Algorithm::Es384.sign(&p256, b"x"), Err(JoseError::AlgorithmKeyMismatch { .. })));
}

#[test]
fn jwk_alg_member_must_match() {
    let key = ec(Nid::X9_62_PRIME256V1);
    let mut jwk = sign::public_jwk(&key).unwrap().to_json();
    jwk["alg"] = json!("ES384");
    let req = signed(Algorithm::Es256, &key, json!({"alg": "ES256", "jwk": jwk, "nonce": NONCE, "url": URL}), b"");
    let e = SignedRequest::parse(&req).unwrap().verify_embedded().unwrap_err();
    assert_eq!(e.problem_type(), ProblemType::BadPublicKey);
}

#[test]
fn tampering_breaks_the_signature() {
    for alg in ACME_ALGORITHMS {
        let key = key_for(alg);
        let mut jws = sign::request(alg, &key, Signer::Jwk, Some(NONCE), URL, b"{\"a\":1}").unwrap();
        jws["payload"] = json!(b64_encode(b"{\"a\":2}"));
        let e = SignedRequest::parse(&body(&jws)).unwrap().verify_embedded().unwrap_err();
        assert_eq!(e, JwsError::BadSignature, "{alg}");

        // A different protected header (another nonce) under the old signature.
        let mut jws = sign::request(alg, &key, Signer::Jwk, Some(NONCE), URL, b"").unwrap();
        let mut header = header_of(&jws);
        header["nonce"] = json!("AAAAAAAAAAAAAAAAAAAAAA");
        jws["protected"] = json!(b64_encode(header.to_string().as_bytes()));
        let e = SignedRequest::parse(&body(&jws)).unwrap().verify_embedded().unwrap_err();
        assert_eq!(e, JwsError::BadSignature, "{alg}");

        // A truncated signature.
        let mut jws = sign::request(alg, &key, Signer::Jwk, Some(NONCE), URL, b"").unwrap();
        let sig = b64_decode(jws["signature"].as_str().unwrap()).unwrap();
        jws["signature"] = json!(b64_encode(&sig[..sig.len() - 1]));
        let e = SignedRequest::parse(&body(&jws)).unwrap().verify_embedded().unwrap_err();
        assert_eq!(e, JwsError::BadSignature, "{alg}");
    }
}

#[test]
fn base64url_padding_and_alphabet_are_refused() {
    let key = ed25519();
    // "{}" encodes to "e30", which standard base64 pads to "e30=".
    let jws = sign::request(Algorithm::EdDsa, &key, Signer::Jwk, Some(NONCE), URL, b"{}").unwrap();
    assert_eq!(jws["payload"], json!("e30"));
    for (member, field) in [("payload", "payload"), ("protected", "protected"), ("signature", "signature")] {
        let mut padded = jws.clone();
        let value = padded[member].as_str().unwrap().to_owned();
        padded[member] = json!(format!("{value}="));
        assert_eq!(err(&body(&padded)), JwsError::Base64(field), "{member}");
    }
    let mut standard = jws.clone();
    standard["signature"] = json!(jws["signature"].as_str().unwrap().replace(['-', '_'], "+"));
    if standard != jws {
        assert_eq!(err(&body(&standard)), JwsError::Base64("signature"));
    }
    // A nonce that is not base64url.
    let jwk = sign::public_jwk(&key).unwrap().to_json();
    let req = signed(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "jwk": jwk, "nonce": "abc=", "url": URL}), b"");
    assert_eq!(err(&req), JwsError::NonceEncoding);
    assert_eq!(JwsError::NonceEncoding.problem_type(), ProblemType::Malformed);
}

#[test]
fn exactly_one_of_jwk_and_kid() {
    let key = ed25519();
    let jwk = sign::public_jwk(&key).unwrap().to_json();
    let both = signed(
        Algorithm::EdDsa,
        &key,
        json!({"alg": "EdDSA", "jwk": jwk, "kid": KID, "nonce": NONCE, "url": URL}),
        b"",
    );
    assert_eq!(err(&both), JwsError::BothJwkAndKid);
    let neither = signed(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "nonce": NONCE, "url": URL}), b"");
    assert_eq!(err(&neither), JwsError::NeitherJwkNorKid);
    assert_eq!(JwsError::NeitherJwkNorKid.problem_type(), ProblemType::Malformed);
    // A kid request cannot be verified with "its own" key.
    let kid = body(&sign::request(Algorithm::EdDsa, &key, Signer::Kid(KID), Some(NONCE), URL, b"").unwrap());
    assert_eq!(SignedRequest::parse(&kid).unwrap().verify_embedded().unwrap_err(), JwsError::WrongKeyReference("jwk"));
}

#[test]
fn nonce_url_and_alg_are_required() {
    let key = ed25519();
    let no_nonce = body(&sign::request(Algorithm::EdDsa, &key, Signer::Kid(KID), None, URL, b"").unwrap());
    let e = err(&no_nonce);
    assert_eq!(e, JwsError::MissingNonce);
    assert_eq!(e.problem().kind, ProblemType::BadNonce);
    assert_eq!(e.problem().http_status(), 400);

    let no_url = signed(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "kid": KID, "nonce": NONCE}), b"");
    assert_eq!(err(&no_url), JwsError::MissingHeader("url"));
    let no_alg = signed(Algorithm::EdDsa, &key, json!({"kid": KID, "nonce": NONCE, "url": URL}), b"");
    assert_eq!(err(&no_alg), JwsError::MissingHeader("alg"));
    let empty_kid = signed(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "kid": "", "nonce": NONCE, "url": URL}), b"");
    assert!(matches!(err(&empty_kid), JwsError::Header(_)));
    let typed = signed(Algorithm::EdDsa, &key, json!({"alg": "EdDSA", "kid": KID, "nonce": NONCE, "url": 7}), b"");
    assert!(matches!(err(&typed), JwsError::Header(_)));
}

#[test]
fn url_must_be_the_request_url() {
    let jws = sign::request(Algorithm::EdDsa, &ed25519(), Signer::Kid(KID), Some(NONCE), URL, b"").unwrap();
    let e = SignedRequest::parse(&body(&jws)).unwrap().check_url("https://acme.example/acme/revoke-cert").unwrap_err();
    assert!(matches!(e, JwsError::UrlMismatch { .. }));
    assert_eq!(e.problem().kind, ProblemType::Unauthorized);
    assert_eq!(e.problem().http_status(), 403);
}

#[test]
fn none_and_mac_algorithms_are_refused() {
    let key = ed25519();
    let jwk = sign::public_jwk(&key).unwrap().to_json();
    let header = |alg: &str| json!({"alg": alg, "jwk": jwk, "nonce": NONCE, "url": URL});
    // alg "none" with an empty signature.
    let unsigned =
        json!({"protected": b64_encode(header("none").to_string().as_bytes()), "payload": "", "signature": ""});
    let e = err(&body(&unsigned));
    assert_eq!(e, JwsError::UnsupportedAlgorithm("none".into()));
    let problem = e.problem();
    assert_eq!(problem.kind, ProblemType::BadSignatureAlgorithm);
    assert_eq!(problem.algorithms.unwrap(), SUPPORTED_ALGORITHMS);

    for mac in MacAlgorithm::ALL {
        let req = body(&sign::mac_with_header(mac, b"secret", &header(mac.name()), b"{}").unwrap());
        assert_eq!(err(&req), JwsError::UnsupportedAlgorithm(mac.name().into()));
    }
    for other in ["ES256K", "RS512", "es256", "Ed25519", ""] {
        let req = signed(Algorithm::EdDsa, &key, header(other), b"");
        assert_eq!(err(&req), JwsError::UnsupportedAlgorithm(other.into()));
    }
}

#[test]
fn ml_dsa_is_not_for_acme() {
    let mut seed = [0u8; 32];
    openssl::rand::rand_bytes(&mut seed).unwrap();
    let key = PKey::private_key_from_seed(None, openssl::pkey::KeyType::ML_DSA_44, None, &seed).unwrap();
    let jwk = sign::public_jwk(&key).unwrap();
    assert_eq!(jwk.kind(), KeyKind::MlDsa44);
    let header = json!({"alg": "ML-DSA-44", "jwk": jwk.to_json(), "nonce": NONCE, "url": URL});
    let req = signed(Algorithm::MlDsa44, &key, header, b"");
    let e = SignedRequest::parse(&req).unwrap_err();
    assert_eq!(e, JwsError::UnsupportedAlgorithm("ML-DSA-44".into()));
    assert_eq!(e.problem().algorithms.unwrap(), SUPPORTED_ALGORITHMS);
    // An AKP key under a classical alg: badPublicKey.
    let header = json!({"alg": "EdDSA", "jwk": jwk.to_json(), "nonce": NONCE, "url": URL});
    let req = signed(Algorithm::EdDsa, &ed25519(), header, b"");
    assert_eq!(SignedRequest::parse(&req).unwrap_err().problem_type(), ProblemType::BadPublicKey);
}

#[test]
fn general_serialization_and_unprotected_headers_are_refused() {
    let jws = sign::request(Algorithm::EdDsa, &ed25519(), Signer::Kid(KID), Some(NONCE), URL, b"").unwrap();
    let mut multi = jws.clone();
    multi["signatures"] = json!([{"protected": jws["protected"], "signature": jws["signature"]}]);
    assert_eq!(err(&body(&multi)), JwsError::MultipleSignatures);
    let general = json!({"payload": jws["payload"], "signatures": [{"protected": jws["protected"], "signature": jws["signature"]}]});
    assert_eq!(err(&body(&general)), JwsError::MultipleSignatures);

    let mut unprotected = jws.clone();
    unprotected["header"] = json!({"kid": KID});
    assert_eq!(err(&body(&unprotected)), JwsError::UnprotectedHeader);
    assert_eq!(JwsError::UnprotectedHeader.problem_type(), ProblemType::Malformed);

    let mut unknown = jws.clone();
    unknown["extra"] = json!(1);
    assert!(matches!(err(&body(&unknown)), JwsError::Structure(_)));
    let mut detached = jws.clone();
    detached.as_object_mut().unwrap().remove("payload");
    assert!(matches!(err(&body(&detached)), JwsError::Structure(_)));
    let text = String::from_utf8(body(&jws)).unwrap();
    let duplicate = text.replacen("{", "{\"payload\":\"e30\",", 1);
    assert!(matches!(err(duplicate.as_bytes()), JwsError::Structure(_)));
    for junk in [&b""[..], b"[]", b"null", b"{", b"\"x\""] {
        assert!(matches!(err(junk), JwsError::Structure(_)));
    }
}

#[test]
fn crit_and_duplicate_header_parameters_are_refused() {
    let key = ed25519();
    let crit = signed(
        Algorithm::EdDsa,
        &key,
        json!({"alg": "EdDSA", "kid": KID, "nonce": NONCE, "url": URL, "crit": ["b64"], "b64": false}),
        b"",
    );
    assert!(matches!(err(&crit), JwsError::Header(_)));
    let dup = r#"{"alg":"EdDSA","kid":"a","kid":"b","nonce":"AAAA","url":"u"}"#;
    let jws = sign::with_raw_header(Algorithm::EdDsa, &key, dup, b"").unwrap();
    assert!(matches!(err(&body(&jws)), JwsError::Header(_)));
    // Unknown header parameters are ignored (RFC 7515 §4).
    let extra = signed(
        Algorithm::EdDsa,
        &key,
        json!({"alg": "EdDSA", "kid": KID, "nonce": NONCE, "url": URL, "x-signet": 1}),
        b"",
    );
    SignedRequest::parse(&extra).unwrap();
}

#[test]
fn payload_json_and_post_as_get() {
    let key = ed25519();
    let jwk = sign::public_jwk(&key).unwrap();
    let req = body(
        &sign::request(Algorithm::EdDsa, &key, Signer::Kid(KID), Some(NONCE), URL, b"{\"csr\":\"AAAA\"}").unwrap(),
    );
    let verified = SignedRequest::parse(&req).unwrap().verify(&jwk).unwrap();
    assert!(verified.expect_post_as_get().is_err());
    let finalize: crate::types::Finalize = verified.payload_json().unwrap();
    assert_eq!(finalize.csr, "AAAA");
    assert!(matches!(verified.payload_json::<crate::types::NewOrder>(), Err(JwsError::Payload(_))));
}

// --- JWK --------------------------------------------------------------------

#[test]
fn rfc7638_thumbprint_example() {
    let jwk = Jwk::from_json(&json!({
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29"
    }))
    .unwrap();
    assert_eq!(jwk.thumbprint(), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    assert_eq!(jwk.kind(), KeyKind::Rsa(2048));
    assert!(jwk.canonical_json().starts_with(r#"{"e":"AQAB","kty":"RSA","n":"0vx7"#));
}

#[test]
fn rfc8037_ed25519_thumbprint_example() {
    let jwk =
        Jwk::from_json(&json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}))
            .unwrap();
    assert_eq!(jwk.thumbprint(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    assert_eq!(
        jwk.canonical_json(),
        r#"{"crv":"Ed25519","kty":"OKP","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#
    );
}

#[test]
fn jwk_round_trips_through_json_and_spki() {
    for alg in ACME_ALGORITHMS {
        let jwk = sign::public_jwk(&key_for(alg)).unwrap();
        let json = serde_json::to_value(&jwk).unwrap();
        let back: Jwk = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, jwk);
        assert_eq!(back.thumbprint(), jwk.thumbprint());
        let der = jwk.to_spki_der().unwrap();
        let from_der = Jwk::from_spki_der(&der).unwrap();
        assert_eq!(from_der, jwk);
        assert_eq!(from_der.to_spki_der().unwrap(), der);
        assert!(alg.fits(jwk.kind()), "{alg} vs {}", jwk.kind());
        // Member order in the input does not change the thumbprint.
        let mut reordered = serde_json::Map::new();
        for (k, v) in json.as_object().unwrap().iter().rev() {
            reordered.insert(k.clone(), v.clone());
        }
        assert_eq!(Jwk::from_json(&Value::Object(reordered)).unwrap().thumbprint(), jwk.thumbprint());
    }
    assert!(Jwk::from_spki_der(b"\x30\x03\x02\x01\x00").is_err());
}

#[test]
fn ec_points_are_checked() {
    let jwk = sign::public_jwk(&ec(Nid::X9_62_PRIME256V1)).unwrap().to_json();
    let bad = |v: Value| match Jwk::from_json(&v) {
        Err(JoseError::BadPublicKey(_)) => {}
        other => panic!("{v}: {other:?}"),
    };
    // Off the curve: change y.
    let mut off = jwk.clone();
    let mut y = b64_decode(jwk["y"].as_str().unwrap()).unwrap();
    y[31] ^= 1;
    off["y"] = json!(b64_encode(&y));
    bad(off);
    // Wrong lengths: a short x, a P-256 point labelled P-384.
    let mut short = jwk.clone();
    short["x"] = json!(b64_encode(&b64_decode(jwk["x"].as_str().unwrap()).unwrap()[1..]));
    bad(short);
    let mut relabelled = jwk.clone();
    relabelled["crv"] = json!("P-384");
    bad(relabelled);
    let mut secp256k1 = jwk.clone();
    secp256k1["crv"] = json!("secp256k1");
    bad(secp256k1);
    // Private members, other uses, missing and mistyped members, unknown types.
    let mut private = jwk.clone();
    private["d"] = json!("AAAA");
    bad(private);
    let mut enc = jwk.clone();
    enc["use"] = json!("enc");
    bad(enc);
    let mut missing = jwk.clone();
    missing.as_object_mut().unwrap().remove("y");
    bad(missing);
    let mut typed = jwk.clone();
    typed["x"] = json!(5);
    bad(typed);
    bad(json!({"kty": "oct", "k": "AAAA"}));
    bad(json!({"kty": "OKP", "crv": "Ed448", "x": b64_encode(&[9; 57])}));
    bad(json!({"kty": "OKP", "crv": "Ed25519", "x": b64_encode(&[9; 31])}));
    bad(json!("not an object"));
}

#[test]
fn rsa_keys_are_checked() {
    let jwk = sign::public_jwk(&rsa(2048)).unwrap().to_json();
    let n = b64_decode(jwk["n"].as_str().unwrap()).unwrap();
    let bad = |n: &[u8], e: &[u8]| {
        let v = json!({"kty": "RSA", "n": b64_encode(n), "e": b64_encode(e)});
        assert!(matches!(Jwk::from_json(&v), Err(JoseError::BadPublicKey(_))), "n {} bytes, e {e:?}", n.len());
    };
    let small = sign::public_jwk(&rsa(1024)).unwrap_err();
    assert!(matches!(small, JwsError::BadPublicKey(_)));
    let mut padded = vec![0];
    padded.extend_from_slice(&n);
    bad(&padded, &[1, 0, 1]);
    bad(&n, &[0, 1, 0, 1]);
    bad(&n, &[1]);
    bad(&n, &[1, 0, 0]);
    bad(&n, &[1, 0, 0, 0, 1]);
    let mut even = n.clone();
    *even.last_mut().unwrap() &= 0xfe;
    bad(&even, &[1, 0, 1]);
    bad(&[0xff; 1025], &[1, 0, 1]);
    Jwk::from_json(&json!({"kty": "RSA", "n": b64_encode(&n), "e": "AQAB"})).unwrap();
}

// --- Key rollover -------------------------------------------------------------

const KEY_CHANGE_URL: &str = "https://acme.example/acme/key-change";

fn outer(old: &PKey<Private>, inner: &Value) -> VerifiedRequest {
    let jws = sign::request(
        Algorithm::EdDsa,
        old,
        Signer::Kid(KID),
        Some(NONCE),
        KEY_CHANGE_URL,
        inner.to_string().as_bytes(),
    )
    .unwrap();
    SignedRequest::parse(&body(&jws)).unwrap().verify(&sign::public_jwk(old).unwrap()).unwrap()
}

#[test]
fn key_change_verifies() {
    let old = ed25519();
    let old_jwk = sign::public_jwk(&old).unwrap();
    for alg in ACME_ALGORITHMS {
        let new = key_for(alg);
        let inner = sign::key_change(alg, &new, KEY_CHANGE_URL, KID, &old_jwk).unwrap();
        let new_jwk = verify_key_change(&outer(&old, &inner), KID, &old_jwk).unwrap();
        assert_eq!(new_jwk, sign::public_jwk(&new).unwrap());
    }
}

#[test]
fn key_change_refusals() {
    let old = ed25519();
    let old_jwk = sign::public_jwk(&old).unwrap();
    let new = ec(Nid::X9_62_PRIME256V1);
    let new_jwk = sign::public_jwk(&new).unwrap().to_json();
    let payload = json!({"account": KID, "oldKey": old_jwk.to_json()}).to_string();
    let inner_with =
        |header: Value, payload: &str| sign::with_header(Algorithm::Es256, &new, &header, payload.as_bytes()).unwrap();
    let check = |inner: Value, want: JwsError| {
        assert_eq!(verify_key_change(&outer(&old, &inner), KID, &old_jwk).unwrap_err(), want);
    };

    check(
        inner_with(json!({"alg": "ES256", "jwk": new_jwk, "nonce": NONCE, "url": KEY_CHANGE_URL}), &payload),
        JwsError::ForbiddenHeader("nonce"),
    );
    check(
        inner_with(json!({"alg": "ES256", "jwk": new_jwk, "url": "https://acme.example/acme/other"}), &payload),
        JwsError::InnerUrlMismatch,
    );
    check(
        inner_with(json!({"alg": "ES256", "kid": KID, "url": KEY_CHANGE_URL}), &payload),
        JwsError::WrongKeyReference("jwk"),
    );
    let other_account =
        json!({"account": "https://acme.example/acme/acct/other", "oldKey": old_jwk.to_json()}).to_string();
    let e = verify_key_change(
        &outer(&old, &inner_with(json!({"alg": "ES256", "jwk": new_jwk, "url": KEY_CHANGE_URL}), &other_account)),
        KID,
        &old_jwk,
    )
    .unwrap_err();
    assert_eq!(e, JwsError::KeyChangeAccount);
    assert_eq!(e.problem_type(), ProblemType::Unauthorized);
    let wrong_old = json!({"account": KID, "oldKey": sign::public_jwk(&ed25519()).unwrap().to_json()}).to_string();
    check(
        inner_with(json!({"alg": "ES256", "jwk": new_jwk, "url": KEY_CHANGE_URL}), &wrong_old),
        JwsError::KeyChangeOldKey,
    );
    // The inner JWS signed by a key other than its jwk.
    let stranger = ec(Nid::X9_62_PRIME256V1);
    let forged = sign::with_header(
        Algorithm::Es256,
        &stranger,
        &json!({"alg": "ES256", "jwk": new_jwk, "url": KEY_CHANGE_URL}),
        payload.as_bytes(),
    )
    .unwrap();
    check(forged, JwsError::BadSignature);
    // The inner JWS must itself be a valid flattened JWS.
    let mut multi = inner_with(json!({"alg": "ES256", "jwk": new_jwk, "url": KEY_CHANGE_URL}), &payload);
    multi["header"] = json!({});
    assert!(matches!(verify_key_change(&outer(&old, &multi), KID, &old_jwk), Err(JwsError::Payload(_))));
    // The outer request must be by this account.
    let inner = sign::key_change(Algorithm::Es256, &new, KEY_CHANGE_URL, KID, &old_jwk).unwrap();
    assert_eq!(
        verify_key_change(&outer(&old, &inner), "https://acme.example/acme/acct/2", &old_jwk).unwrap_err(),
        JwsError::WrongKeyReference("kid")
    );
}

// --- External account binding ---------------------------------------------------

const NEW_ACCOUNT_URL: &str = "https://acme.example/acme/new-account";
const MAC_KEY: &[u8] = b"a 256-bit secret handed out by the CA";

#[test]
fn external_account_binding_verifies() {
    let account = sign::public_jwk(&ec(Nid::X9_62_PRIME256V1)).unwrap();
    for mac in MacAlgorithm::ALL {
        let eab = sign::external_account_binding(mac, "eab-kid-1", MAC_KEY, NEW_ACCOUNT_URL, &account).unwrap();
        let binding = ExternalAccountBinding::parse(&eab).unwrap();
        assert_eq!(binding.key_id(), "eab-kid-1");
        assert_eq!(binding.algorithm(), mac);
        binding.verify(MAC_KEY, NEW_ACCOUNT_URL, &account).unwrap();
    }
}

#[test]
fn external_account_binding_refusals() {
    let account = sign::public_jwk(&ec(Nid::X9_62_PRIME256V1)).unwrap();
    let eab =
        sign::external_account_binding(MacAlgorithm::Hs256, "eab-kid-1", MAC_KEY, NEW_ACCOUNT_URL, &account).unwrap();
    let binding = ExternalAccountBinding::parse(&eab).unwrap();
    let e = binding.verify(b"another key", NEW_ACCOUNT_URL, &account).unwrap_err();
    assert_eq!(e, JwsError::BadMac);
    assert_eq!(e.problem_type(), ProblemType::Unauthorized);
    assert_eq!(
        binding.verify(MAC_KEY, "https://acme.example/acme/other", &account).unwrap_err(),
        JwsError::InnerUrlMismatch
    );
    let other = sign::public_jwk(&ed25519()).unwrap();
    assert_eq!(binding.verify(MAC_KEY, NEW_ACCOUNT_URL, &other).unwrap_err(), JwsError::BindingKey);

    let parse = |header: Value| {
        let v =
            sign::mac_with_header(MacAlgorithm::Hs256, MAC_KEY, &header, account.canonical_json().as_bytes()).unwrap();
        ExternalAccountBinding::parse(&v).unwrap_err()
    };
    assert_eq!(
        parse(json!({"alg": "HS256", "kid": "k", "url": NEW_ACCOUNT_URL, "nonce": NONCE})),
        JwsError::ForbiddenHeader("nonce")
    );
    assert_eq!(
        parse(json!({"alg": "HS256", "kid": "k", "url": NEW_ACCOUNT_URL, "jwk": account.to_json()})),
        JwsError::ForbiddenHeader("jwk")
    );
    assert_eq!(parse(json!({"alg": "HS256", "url": NEW_ACCOUNT_URL})), JwsError::MissingHeader("kid"));
    assert_eq!(parse(json!({"alg": "HS256", "kid": "k"})), JwsError::MissingHeader("url"));
    assert!(matches!(parse(json!({"alg": "RS256", "kid": "k", "url": NEW_ACCOUNT_URL})), JwsError::Header(_)));
    assert!(matches!(parse(json!({"alg": "none", "kid": "k", "url": NEW_ACCOUNT_URL})), JwsError::Header(_)));
    let mut unprotected = eab.clone();
    unprotected["header"] = json!({});
    assert_eq!(ExternalAccountBinding::parse(&unprotected).unwrap_err(), JwsError::UnprotectedHeader);
    assert!(matches!(ExternalAccountBinding::parse(&json!("x")), Err(JwsError::Structure(_))));
}

#[test]
fn request_with_a_derived_jwk_equals_request() {
    for alg in ACME_ALGORITHMS {
        let key = key_for(alg);
        let jwk = sign::public_jwk(&key).unwrap();
        for signer in [Signer::Jwk, Signer::Kid(KID)] {
            let jws = sign::request_with_jwk(alg, &key, &jwk, signer, Some(NONCE), URL, b"{}").unwrap();
            let plain = sign::request(alg, &key, signer, Some(NONCE), URL, b"{}").unwrap();
            // The same protected header and payload (signatures differ: ECDSA is randomised).
            assert_eq!(jws["protected"], plain["protected"], "{alg}");
            assert_eq!(jws["payload"], plain["payload"], "{alg}");
            let request = SignedRequest::parse(&body(&jws)).unwrap();
            request.verify(&jwk).unwrap_or_else(|e| panic!("{alg}: {e}"));
        }
    }
    // A JWK of another kind than the algorithm's is refused before signing.
    let p256 = ec(Nid::X9_62_PRIME256V1);
    let jwk = sign::public_jwk(&p256).unwrap();
    assert!(matches!(
        sign::request_with_jwk(Algorithm::Es384, &p256, &jwk, Signer::Jwk, None, URL, b""),
        Err(JwsError::AlgorithmKeyMismatch { .. })
    ));
}
