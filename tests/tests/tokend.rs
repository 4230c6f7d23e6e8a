//! tokend against a real signd, driven with curl and `signetctl oauth`:
//! signd's `sign-jws` role, client_credentials with each client
//! authentication method, introspection, revocation, token exchange, key
//! rotation, every error in RFC 6749's form, and `kill -9`.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use serde_json::{json, Value};
use signet_ipc::{block_on, ErrorKind, KeyAlgorithm, SignatureScheme};
use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::{compact, encode_signing_input, Algorithm, Jwks};
use signet_tests::tokend::{curl, signd_role, Tokend};
use signet_tests::SigndProcess;

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn stack(extra: &str) -> (SigndProcess, tempfile::TempDir, Tokend) {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let tokend = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", extra);
    (signd, dir, tokend)
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn basic(id: &str, secret: &str) -> String {
    format!("Authorization: Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

fn jwks(t: &Tokend) -> Jwks {
    let (st, body) = t.get("/jwks");
    assert_eq!(st, 200, "{body}");
    Jwks::parse(body.as_bytes()).unwrap()
}

fn verify(t: &Tokend, token: &str, aud: &str) -> signet_jose::jwt::Claims {
    let v = Validation {
        issuer: Some(t.issuer()),
        audience: Some(aud.into()),
        now: now(),
        leeway: 0,
        typ: Some("at+jwt".into()),
    };
    verify_jwt(token, &jwks(t), &v).unwrap()
}

#[test]
fn a_sign_jws_role_signs_jws_signing_inputs_for_its_keys_only() {
    let signd = SigndProcess::start(&signd_role());
    let c = signd.client();
    let mut spec = signd.spec("tok-1", KeyAlgorithm::EcP256);
    spec.roles = vec!["tokend".into()];
    let key = block_on(c.generate_key(spec)).unwrap();
    block_on(c.generate_key(signd.spec("other", KeyAlgorithm::EcP256))).unwrap();
    let input = |h: &Value, p: &Value| encode_signing_input(h, p.to_string().as_bytes()).into_bytes();
    let good = input(&json!({"alg": "ES256", "kid": "tok-1", "typ": "at+jwt"}), &json!({"sub": "x"}));
    let sig = block_on(c.sign("tokend", "tok-1", SignatureScheme::EcdsaSha256, good.clone())).unwrap();
    assert!(signet_tests::openssl_verify(&key.spki, SignatureScheme::EcdsaSha256, &good, &sig));
    let refused = [
        input(&json!({"alg": "ES256", "kid": "tok-2"}), &json!({})),
        input(&json!({"alg": "RS256", "kid": "tok-1"}), &json!({})),
        input(&json!({"alg": "ES256", "kid": "tok-1", "crit": ["b64"]}), &json!({})),
        b"\x30\x82\x01\x0a a TBSCertificate".to_vec(),
        b"plain text".to_vec(),
    ];
    for m in refused {
        let e = block_on(c.sign("tokend", "tok-1", SignatureScheme::EcdsaSha256, m.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}: {e}", String::from_utf8_lossy(&m));
    }
    // A key the role does not hold, and a batch with one bad input.
    let other = input(&json!({"alg": "ES256", "kid": "other"}), &json!({}));
    let e = block_on(c.sign("tokend", "other", SignatureScheme::EcdsaSha256, other)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    let e =
        block_on(c.sign_batch("tokend", "tok-1", SignatureScheme::EcdsaSha256, vec![good, b"x".to_vec()])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn client_credentials_with_secrets_introspection_and_revocation() {
    let (_signd, _dir, t) = stack("");
    let api = "https://api.signet.test";
    let a = t.create_client(
        "svc-basic",
        &["--auth-method", "client_secret_basic", "--scope", "read", "--scope", "write", "--audience", api],
    );
    let b = t.create_client("svc-post", &["--auth-method", "client_secret_post", "--audience", api, "--scope", "read"]);
    assert!(a.secret.len() >= 40, "a generated secret: {}", a.secret);

    // Metadata.
    let (st, meta) = t.get("/.well-known/oauth-authorization-server");
    assert_eq!(st, 200);
    let meta = json_of(&meta);
    assert_eq!(meta["issuer"], t.issuer());
    assert_eq!(meta["token_endpoint"], t.url("/token"));

    // Basic, with a narrower scope.
    let (st, body) = t.post("/token", "grant_type=client_credentials&scope=read", &["-H", &basic(&a.id, &a.secret)]);
    assert_eq!(st, 200, "{body}");
    let r = json_of(&body);
    assert_eq!((r["token_type"].as_str(), r["scope"].as_str()), (Some("Bearer"), Some("read")));
    let token = r["access_token"].as_str().unwrap().to_owned();
    let claims = verify(&t, &token, api);
    assert_eq!(claims.sub.as_deref(), Some("svc-basic"));
    assert_eq!(claims.client_id.as_deref(), Some("svc-basic"));
    assert_eq!(claims.scope.as_deref(), Some("read"));
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!((header["typ"].as_str(), header["kid"].as_str()), (Some("at+jwt"), Some("tok-es256")));

    // Post.
    let form = format!("grant_type=client_credentials&client_id={}&client_secret={}", b.id, b.secret);
    let (st, body) = t.post("/token", &form, &[]);
    assert_eq!(st, 200, "{body}");

    // Introspection (by another client), revocation (by its own), introspection again.
    let intro = format!("token={token}&client_id={}&client_secret={}", b.id, b.secret);
    let (st, body) = t.post("/introspect", &intro, &[]);
    assert_eq!(st, 200, "{body}");
    let i = json_of(&body);
    assert_eq!((i["active"].as_bool(), i["client_id"].as_str()), (Some(true), Some("svc-basic")));
    let (st, body) = t.post("/revoke", &format!("token={token}&client_id={}&client_secret={}", b.id, b.secret), &[]);
    assert_eq!(st, 400, "only the client it was issued to may revoke it: {body}");
    let (st, _) = t.post("/revoke", &format!("token={token}"), &["-H", &basic(&a.id, &a.secret)]);
    assert_eq!(st, 200);
    let (_, body) = t.post("/introspect", &intro, &[]);
    assert_eq!(json_of(&body)["active"], false);
    // Garbage is inactive; revoking garbage is a 200 (RFC 7009 §2.2).
    let (_, body) = t.post("/introspect", &format!("token=abc&client_id={}&client_secret={}", b.id, b.secret), &[]);
    assert_eq!(json_of(&body)["active"], false);
    let (st, _) = t.post("/revoke", "token=abc", &["-H", &basic(&a.id, &a.secret)]);
    assert_eq!(st, 200);

    // Metrics count what happened.
    let (_, m) = t.get("/metrics");
    let issued =
        m.lines().find(|l| l.starts_with("tokend_tokens_issued_total{") && l.contains("grant=\"client_credentials\""));
    assert_eq!(issued.and_then(|l| l.rsplit(' ').next()), Some("2"), "{m}");
}

#[test]
fn every_error_is_oauth_json_with_its_status() {
    let (_signd, _dir, t) = stack("");
    let a = t.create_client("svc", &["--auth-method", "client_secret_basic", "--scope", "read", "--audience", "api"]);
    let auth = basic(&a.id, &a.secret);
    let cases: Vec<(String, Vec<String>, u16, &str)> = vec![
        ("grant_type=client_credentials".into(), vec!["-H".into(), basic("svc", "wrong")], 401, "invalid_client"),
        ("grant_type=client_credentials".into(), vec!["-H".into(), basic("nobody", "x")], 401, "invalid_client"),
        ("grant_type=client_credentials".into(), vec![], 401, "invalid_client"),
        (
            "grant_type=password&username=a&password=b".into(),
            vec!["-H".into(), auth.clone()],
            400,
            "unsupported_grant_type",
        ),
        ("grant_type=nonsense".into(), vec!["-H".into(), auth.clone()], 400, "unsupported_grant_type"),
        ("scope=read".into(), vec!["-H".into(), auth.clone()], 400, "invalid_request"),
        ("grant_type=client_credentials&scope=admin".into(), vec!["-H".into(), auth.clone()], 400, "invalid_scope"),
        (
            "grant_type=client_credentials&resource=https://evil".into(),
            vec!["-H".into(), auth.clone()],
            400,
            "invalid_target",
        ),
        ("grant_type=a&grant_type=b".into(), vec!["-H".into(), auth.clone()], 400, "invalid_request"),
        ("%%%\u{1}garbage=&&==".into(), vec!["-H".into(), auth.clone()], 400, "invalid_request"),
        (
            format!("grant_type=client_credentials&client_id=svc&client_secret={}", a.secret),
            vec!["-H".into(), auth.clone()],
            400,
            "invalid_request",
        ),
        (
            format!("grant_type=client_credentials&client_id=svc&client_secret={}", a.secret),
            vec![],
            401,
            "invalid_client",
        ),
    ];
    for (form, extra, status, code) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (st, body) = t.post("/token", &form, &extra);
        assert_eq!(st, status, "{form}: {body}");
        assert_eq!(json_of(&body)["error"], code, "{form}: {body}");
    }
    // 401 carries WWW-Authenticate.
    let (_, head) = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-X",
        "POST",
        "-H",
        &basic("svc", "wrong"),
        "--data",
        "grant_type=client_credentials",
        &t.url("/token"),
    ]);
    assert!(head.to_ascii_lowercase().contains("www-authenticate: basic"), "{head}");
    // Not a form; a GET; a 10 MB body.
    let (st, body) = curl(&["-X", "POST", "-H", "Content-Type: application/json", "--data", "{}", &t.url("/token")]);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("invalid_request")));
    let (st, body) = t.get("/token");
    assert_eq!((st, json_of(&body)["error"].as_str()), (405, Some("invalid_request")));
    let big = std::env::temp_dir().join(format!("tokend-big-{}", std::process::id()));
    std::fs::write(&big, vec![b'a'; 10 << 20]).unwrap();
    let (st, body) = t.post("/token", &format!("@{}", big.display()), &[]);
    std::fs::remove_file(&big).unwrap();
    assert_eq!((st, json_of(&body)["error"].as_str()), (413, Some("invalid_request")), "{body}");
    // Still serving.
    let (st, _) = t.post("/token", "grant_type=client_credentials", &["-H", &auth]);
    assert_eq!(st, 200);
}

fn es256_key() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

fn assertion(key: &PKey<Private>, kid: &str, client: &str, aud: &str, jti: &str, exp: u64) -> String {
    let header = json!({"alg": "ES256", "kid": kid, "typ": "JWT"});
    let claims = json!({"iss": client, "sub": client, "aud": aud, "jti": jti, "exp": exp, "iat": now()});
    let input = encode_signing_input(&header, claims.to_string().as_bytes());
    let sig = Algorithm::Es256.sign(key, input.as_bytes()).unwrap();
    compact(&input, &sig)
}

#[test]
fn private_key_jwt_assertions_are_checked_and_never_replayed_even_after_kill_9() {
    let (_signd, dir, mut t) = stack("");
    let key = es256_key();
    let spki = key.public_key_to_der().unwrap();
    let jwk = signet_jose::jwk_json(&spki, "c1", Algorithm::Es256).unwrap();
    let jwks_file = dir.path().join("client-jwks.json");
    std::fs::write(&jwks_file, json!({"keys": [jwk]}).to_string()).unwrap();
    let c = t.create_client(
        "svc-jwt",
        &["--auth-method", "private_key_jwt", "--jwks", jwks_file.to_str().unwrap(), "--audience", "api"],
    );
    assert!(c.secret.is_empty(), "a private_key_jwt client has no secret");
    let form = |a: &str| {
        format!(
            "grant_type=client_credentials&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion={a}"
        )
    };
    let token_url = t.url("/token");
    let good = assertion(&key, "c1", "svc-jwt", &token_url, "jti-1", now() + 60);
    let (st, body) = t.post("/token", &form(&good), &[]);
    assert_eq!(st, 200, "{body}");
    let (st, body) = t.post("/token", &form(&good), &[]);
    assert_eq!((st, json_of(&body)["error"].as_str()), (401, Some("invalid_client")), "replay: {body}");
    // The replay record survives kill -9.
    t.kill9();
    t.spawn();
    let (st, _) = t.post("/token", &form(&good), &[]);
    assert_eq!(st, 401, "replayed after a restart");
    // The issuer as audience works; a wrong audience, an expired or far-future
    // assertion, another key and a flipped byte do not.
    let ok = assertion(&key, "c1", "svc-jwt", &t.issuer(), "jti-2", now() + 60);
    assert_eq!(t.post("/token", &form(&ok), &[]).0, 200);
    let other = es256_key();
    let mut flipped = assertion(&key, "c1", "svc-jwt", &token_url, "jti-7", now() + 60).into_bytes();
    let n = flipped.len() - 5;
    flipped[n] = if flipped[n] == b'A' { b'B' } else { b'A' };
    let bad = [
        assertion(&key, "c1", "svc-jwt", "https://elsewhere", "jti-3", now() + 60),
        assertion(&key, "c1", "svc-jwt", &token_url, "jti-4", now() - 10),
        assertion(&key, "c1", "svc-jwt", &token_url, "jti-5", now() + 3600 * 24),
        assertion(&other, "c1", "svc-jwt", &token_url, "jti-6", now() + 60),
        String::from_utf8(flipped).unwrap(),
        "not.a.jwt".into(),
    ];
    for a in bad {
        let (st, body) = t.post("/token", &form(&a), &[]);
        assert_eq!((st, json_of(&body)["error"].as_str()), (401, Some("invalid_client")), "{a}: {body}");
    }
}

#[test]
fn revocations_survive_kill_9_and_token_exchange_delegates() {
    let (_signd, _dir, mut t) = stack("");
    let a = t.create_client(
        "front",
        &["--auth-method", "client_secret_basic", "--scope", "read", "--scope", "write", "--audience", "front-api"],
    );
    let x = t.create_client(
        "exchanger",
        &[
            "--auth-method",
            "client_secret_basic",
            "--scope",
            "read",
            "--audience",
            "back-api",
            "--grant-type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ],
    );
    let (_, body) = t.post("/token", "grant_type=client_credentials", &["-H", &basic(&a.id, &a.secret)]);
    let subject = json_of(&body)["access_token"].as_str().unwrap().to_owned();
    let exchange = format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token={subject}\
         &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"
    );
    let (st, body) = t.post("/token", &exchange, &["-H", &basic(&x.id, &x.secret)]);
    assert_eq!(st, 200, "{body}");
    let r = json_of(&body);
    assert_eq!(r["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token");
    let claims = verify(&t, r["access_token"].as_str().unwrap(), "back-api");
    assert_eq!(claims.sub.as_deref(), Some("front"));
    assert_eq!(claims.scope.as_deref(), Some("read"), "the scopes both hold");
    assert_eq!(claims.extra["act"]["sub"], "exchanger");
    // Without the grant type registered: unauthorized_client.
    let (st, body) = t.post("/token", &exchange, &["-H", &basic(&a.id, &a.secret)]);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("unauthorized_client")));

    // Revoke, kill -9 at once, restart: still revoked; exchange refused.
    let (st, _) = t.post("/revoke", &format!("token={subject}"), &["-H", &basic(&a.id, &a.secret)]);
    assert_eq!(st, 200);
    t.kill9();
    t.spawn();
    let intro = format!("token={subject}");
    let (_, body) = t.post("/introspect", &intro, &["-H", &basic(&x.id, &x.secret)]);
    assert_eq!(json_of(&body)["active"], false, "revocation lost: {body}");
    let (st, body) = t.post("/token", &exchange, &["-H", &basic(&x.id, &x.secret)]);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("invalid_grant")), "{body}");
}

#[test]
fn a_rotated_key_is_published_before_it_signs_and_the_old_one_stays() {
    let (_signd, _dir, t) =
        stack("[tokens]\nkey_publish_seconds = 3\nkey_refresh_seconds = 1\naccess_token_seconds = 20\n");
    let a = t.create_client("svc", &["--auth-method", "client_secret_basic", "--audience", "api"]);
    let kid_of = |token: &str| -> String {
        let h: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
        h["kid"].as_str().unwrap().to_owned()
    };
    let token = || {
        let (st, body) = t.post("/token", "grant_type=client_credentials", &["-H", &basic(&a.id, &a.secret)]);
        assert_eq!(st, 200, "{body}");
        json_of(&body)["access_token"].as_str().unwrap().to_owned()
    };
    let old = token();
    assert_eq!(kid_of(&old), "tok-es256");
    let (st, out, err) =
        signet_tests::run(t.signetctl().args(["--json", "oauth", "key", "rotate", "--algorithm", "ecdsa-p256"]));
    assert!(st.success(), "{out}{err}");
    // Published at once, not signing yet.
    let published: Vec<String> = {
        let (_, body) = t.get("/jwks");
        json_of(&body)["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(published.len(), 2, "{published:?}");
    let new_kid = published.iter().find(|k| *k != "tok-es256").unwrap().clone();
    assert_eq!(kid_of(&token()), "tok-es256", "a new key signed before it was published long enough");
    // After the publication delay the new key signs; the old one stays for its tokens.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(kid_of(&token()), new_kid);
    assert!(jwks(&t).find(Some("tok-es256"), Algorithm::Es256).is_some(), "the old key left too early");
    verify(&t, &old, "api");
    // After its last token expired (20 s) and a refresh, it leaves.
    std::thread::sleep(Duration::from_secs(21));
    assert!(jwks(&t).find(Some("tok-es256"), Algorithm::Es256).is_none(), "the old key never left");
}
