//! tokend against a real signd, driven with curl and `signetctl oauth`:
//! signd's `sign-jws` role, client_credentials with each client
//! authentication method, introspection, revocation, token exchange, key
//! rotation, every error in RFC 6749's form, `kill -9`, and local users and
//! redirect URIs managed with `signetctl oauth user ...`/`client create`; mutual
//! TLS (RFC 8705) with a client certificate a real acmed issued, and
//! self-signed certificates whose keys are fetched from the client's jwks_uri.
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
use signet_tests::tokend::{browse, curl, field, signd_role, Tokend};
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

/// signetctl with `input` on its standard input: (status, stdout, stderr).
fn run_with_stdin(cmd: &mut std::process::Command, input: &str) -> (std::process::ExitStatus, String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // signetctl may exit (bad arguments) without reading it: a broken pipe is no failure.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let out = child.wait_with_output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn users_and_redirect_uris_through_signetctl_and_no_password_is_ever_printed() {
    let (_signd, dir, mut t) = stack("");
    let (pw_alice, pw_bob, pw_new) = ("alice-first-pw-1", "bob's second pw 2", "alice-new-pw-3");
    let mut outputs: Vec<String> = Vec::new();
    let mut run = |cmd: &mut std::process::Command, stdin: Option<&str>| {
        let (st, out, err) = match stdin {
            Some(input) => run_with_stdin(cmd, input),
            None => signet_tests::run(cmd),
        };
        outputs.push(format!("{out}{err}"));
        (st.code().unwrap_or(-1), out, err)
    };
    let pw_file = dir.path().join("alice.pw");
    std::fs::write(&pw_file, format!("{pw_alice}\n")).unwrap();

    // Create: from a file (one trailing newline dropped), and from standard input.
    let (code, out, err) = run(
        t.signetctl()
            .args(["oauth", "user", "create", "alice", "--name", "Alice Smith", "--email", "alice@example.net"])
            .args(["--group", "admins", "--group", "ops", "--password-file"])
            .arg(&pw_file),
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    for line in ["user name:    alice", "name:         Alice Smith", "email:        alice@example.net"] {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    assert!(out.contains("groups:       admins ops") && out.contains("disabled:     no"), "{out}");
    let (code, out, err) =
        run(t.signetctl().args(["--json", "oauth", "user", "create", "bob", "--password-stdin"]), Some(pw_bob));
    assert_eq!(code, 0, "{out}{err}");
    let bob = json_of(&out);
    assert_eq!((bob["user_name"].as_str(), bob["disabled"].as_bool()), (Some("bob"), Some(false)));
    assert!(bob.get("password").is_none() && bob["email"].is_null(), "{bob}");
    assert!(bob["created_unix_secs"].as_i64().unwrap() >= now() as i64 - 60);

    // Refusals: no password on the command line (not even as an option), none
    // at all, two sources, a short one, a bad name, a taken name.
    let (code, _, err) = run(t.signetctl().args(["oauth", "user", "create", "carol", "--password", pw_new]), None);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(t.signetctl().args(["oauth", "user", "create", "carol"]), None);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(
        t.signetctl().args(["oauth", "user", "create", "carol", "--password-stdin", "--password-file"]).arg(&pw_file),
        Some(pw_new),
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) =
        run(t.signetctl().args(["oauth", "user", "create", "carol", "--password-stdin"]), Some("short"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("8 to 1024 bytes"), "{err}");
    let (code, _, err) = run(t.signetctl().args(["oauth", "user", "create", "a b", "--password-stdin"]), Some(pw_new));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) =
        run(t.signetctl().args(["oauth", "user", "create", "alice", "--password-stdin"]), Some(pw_new));
    assert_ne!(code, 0);
    assert!(err.contains("exists"), "{err}");

    // List and show, text and JSON.
    let (code, out, _) = run(t.signetctl().args(["oauth", "user", "list"]), None);
    assert_eq!(code, 0);
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[0].starts_with("USER") && rows[1].starts_with("alice") && rows[2].starts_with("bob"), "{out}");
    assert!(rows[1].contains("enabled") && rows[1].ends_with("Alice Smith"), "{out}");
    let (_, out, _) = run(t.signetctl().args(["--json", "oauth", "user", "show", "alice"]), None);
    let alice = json_of(&out);
    assert_eq!(alice["groups"], json!(["admins", "ops"]));
    assert_eq!(alice["email"], "alice@example.net");
    let first_set = alice["password_set_unix_secs"].as_i64().unwrap();
    let (code, _, err) = run(t.signetctl().args(["oauth", "user", "show", "carol"]), None);
    assert_eq!(code, 4, "{err}");

    // A new password, disabling and enabling, each committed.
    std::thread::sleep(Duration::from_millis(1100));
    let (code, out, err) =
        run(t.signetctl().args(["oauth", "user", "set-password", "alice", "--password-stdin"]), Some(pw_new));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("password set for user alice"), "{out}");
    let (code, _, err) =
        run(t.signetctl().args(["oauth", "user", "set-password", "alice", "--password-stdin"]), Some("short"));
    assert_eq!(code, 2, "{err}");
    let (code, _, _) =
        run(t.signetctl().args(["oauth", "user", "set-password", "carol", "--password-stdin"]), Some(pw_new));
    assert_eq!(code, 4);
    let (code, out, _) = run(t.signetctl().args(["oauth", "user", "disable", "alice"]), None);
    assert_eq!(code, 0);
    assert!(out.starts_with("disabled user alice"), "{out}");
    let (_, out, _) = run(t.signetctl().args(["oauth", "user", "list"]), None);
    assert!(out.lines().nth(1).unwrap().contains("disabled"), "{out}");

    // All of it survives kill -9.
    t.kill9();
    t.spawn();
    let (_, out, _) = run(t.signetctl().args(["--json", "oauth", "user", "show", "alice"]), None);
    let alice = json_of(&out);
    assert_eq!(alice["disabled"], true);
    assert!(alice["password_set_unix_secs"].as_i64().unwrap() > first_set, "{alice}");
    let (code, out, _) = run(t.signetctl().args(["oauth", "user", "enable", "alice"]), None);
    assert_eq!((code, out.trim()), (0, "enabled user alice"));
    let (_, out, _) = run(t.signetctl().args(["oauth", "user", "show", "alice"]), None);
    assert!(out.contains("disabled:     no"), "{out}");

    // Delete.
    let (code, out, _) = run(t.signetctl().args(["--json", "oauth", "user", "delete", "bob"]), None);
    assert_eq!(code, 0);
    assert_eq!(json_of(&out)["deleted"]["user_name"], "bob");
    let (code, _, _) = run(t.signetctl().args(["oauth", "user", "delete", "bob"]), None);
    assert_eq!(code, 4);
    let (_, out, _) = run(t.signetctl().args(["--json", "oauth", "user", "list"]), None);
    assert_eq!(json_of(&out).as_array().unwrap().len(), 1);

    // A browser-facing public client with redirect URIs.
    let (code, out, err) = run(
        t.signetctl()
            .args(["oauth", "client", "create", "web", "--auth-method", "none", "--audience", "api"])
            .args(["--grant-type", "authorization_code", "--grant-type", "refresh_token"])
            .args(["--redirect-uri", "https://app.example.net/cb", "--redirect-uri", "com.example.app:/cb"])
            .args(["--post-logout-redirect-uri", "https://app.example.net/"]),
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("redirect:     https://app.example.net/cb com.example.app:/cb"), "{out}");
    assert!(out.contains("after logout: https://app.example.net/"), "{out}");
    let (_, out, _) = run(t.signetctl().args(["--json", "oauth", "client", "show", "web"]), None);
    let web = json_of(&out);
    assert_eq!(web["redirect_uris"], json!(["https://app.example.net/cb", "com.example.app:/cb"]));
    assert_eq!(web["post_logout_redirect_uris"], json!(["https://app.example.net/"]));
    let (_, out, _) = run(t.signetctl().args(["--json", "oauth", "client", "list"]), None);
    assert_eq!(json_of(&out)[0]["redirect_uris"][1], "com.example.app:/cb");
    for (args, why) in [
        (vec!["--redirect-uri", "http://app.example.net/cb"], "http only on a loopback host"),
        (vec!["--redirect-uri", "https://app.example.net/cb#x"], "a fragment"),
        (vec![], "at least one redirect URI"),
    ] {
        let (code, _, err) = run(
            t.signetctl()
                .args(["oauth", "client", "create", "web2", "--auth-method", "none", "--audience", "api"])
                .args(["--grant-type", "authorization_code"])
                .args(args),
            None,
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(why), "{why:?} not in {err}");
    }
    let (code, _, err) = run(
        t.signetctl()
            .args(["oauth", "client", "create", "svc", "--auth-method", "client_secret_basic", "--audience", "api"])
            .args(["--redirect-uri", "https://app.example.net/cb"]),
        None,
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = run(t.signetctl().args(["oauth", "client", "delete", "web"]), None);
    assert_eq!(code, 0);

    let log = t.log();
    for text in outputs.iter().chain([&log]) {
        for pw in [pw_alice, pw_bob, pw_new] {
            assert!(!text.contains(pw), "a password was printed: {text}");
        }
    }
}

fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url).unwrap().query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

#[test]
fn sessions_codes_and_refresh_families_survive_kill_9_and_a_reused_refresh_token_revokes_its_family() {
    let (_signd, dir, mut t) = stack("[tokens]\nrefresh_grace_seconds = 0\n");
    let mut cmd = t.signetctl();
    cmd.args(["oauth", "user", "create", "alice", "--email", "alice@example.net", "--password-stdin"]);
    let (st, out, err) = run_with_stdin(&mut cmd, "alice's long password\n");
    assert!(st.success(), "{out}{err}");
    let redirect = "http://127.0.0.1:9/cb";
    let c = t.create_client(
        "web",
        &[
            "--auth-method",
            "none",
            "--grant-type",
            "authorization_code",
            "--grant-type",
            "refresh_token",
            "--scope",
            "openid",
            "--scope",
            "email",
            "--audience",
            "api",
            "--redirect-uri",
            redirect,
        ],
    );
    let jar = dir.path().join("cookies");
    let verifier = "v".repeat(50);
    let challenge = URL_SAFE_NO_PAD.encode(openssl::sha::sha256(verifier.as_bytes()));
    let authorize = t.url(&format!(
        "/authorize?response_type=code&client_id={}&redirect_uri={}&scope=openid+email&state=s&nonce=n\
         &code_challenge={challenge}&code_challenge_method=S256",
        c.id,
        form_urlencoded::byte_serialize(redirect.as_bytes()).collect::<String>()
    ));
    let (st, login, _) = browse(&jar, &authorize, None);
    assert!(st == 200 && login.contains("Sign in"), "{st} {login}");
    let fields = |html: &str, extra: &[(&'static str, &'static str)]| -> Vec<(String, String)> {
        let mut v = vec![("authz".to_owned(), field(html, "authz")), ("csrf".to_owned(), field(html, "csrf"))];
        v.extend(extra.iter().map(|(k, val)| ((*k).to_owned(), (*val).to_owned())));
        v
    };
    let post = |path: &str, f: Vec<(String, String)>| {
        let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        browse(&jar, &t.url(path), Some(&pairs))
    };
    let (st, consent, _) =
        post("/login", fields(&login, &[("username", "alice"), ("password", "alice's long password")]));
    assert!(st == 200 && consent.contains("Allow access?"), "{st} {consent}");
    let (st, _, location) = post("/consent", fields(&consent, &[("decision", "allow")]));
    assert_eq!(st, 303, "{location}");
    let code = query_param(&location, "code").unwrap();
    assert_eq!(query_param(&location, "iss").as_deref(), Some(t.issuer().as_str()));

    // kill -9 right after the code was given: the code, the session and the consent are there.
    t.kill9();
    t.spawn();
    let redeem = format!(
        "grant_type=authorization_code&code={code}&client_id={}&code_verifier={verifier}&redirect_uri={}",
        c.id,
        form_urlencoded::byte_serialize(redirect.as_bytes()).collect::<String>()
    );
    let (st, body) = t.post("/token", &redeem, &[]);
    assert_eq!(st, 200, "{body}");
    let tok = json_of(&body);
    let r1 = tok["refresh_token"].as_str().unwrap().to_owned();
    let id = verify_jwt(
        tok["id_token"].as_str().unwrap(),
        &jwks(&t),
        &Validation {
            issuer: Some(t.issuer()),
            audience: Some(c.id.clone()),
            now: now(),
            leeway: 0,
            typ: Some("JWT".into()),
        },
    )
    .unwrap();
    assert_eq!(
        (id.sub.as_deref(), id.extra["nonce"].as_str(), id.extra["email"].as_str()),
        (Some("alice"), Some("n"), Some("alice@example.net"))
    );
    let (st, _, location) = browse(&jar, &authorize, None);
    assert_eq!(st, 302, "the session and consent survived kill -9: straight back with a code");
    assert!(query_param(&location, "code").is_some());

    // Rotate, kill -9, the new one works; the old one, reused, revokes the family.
    let refresh = |t: &Tokend, r: &str| {
        t.post("/token", &format!("grant_type=refresh_token&refresh_token={r}&client_id={}", c.id), &[])
    };
    let (st, body) = refresh(&t, &r1);
    assert_eq!(st, 200, "{body}");
    let r2 = json_of(&body)["refresh_token"].as_str().unwrap().to_owned();
    let access2 = json_of(&body)["access_token"].as_str().unwrap().to_owned();
    t.kill9();
    t.spawn();
    std::thread::sleep(Duration::from_millis(1100));
    let (st, body) = refresh(&t, &r1);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("invalid_grant")), "{body}");
    let (st, body) = refresh(&t, &r2);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("invalid_grant")), "the family is revoked: {body}");
    let (_, body) = t.post("/introspect", &format!("token={access2}&client_id={}", c.id), &[]);
    assert_eq!(json_of(&body)["active"], false, "its access tokens too: {body}");
    let (_, body) = t.post("/introspect", &format!("token={code}&client_id={}", c.id), &[]);
    assert_eq!(json_of(&body), json!({"active": false}));
    // The code again: refused.
    let (st, body) = t.post("/token", &redeem, &[]);
    assert_eq!((st, json_of(&body)["error"].as_str()), (400, Some("invalid_grant")), "{body}");
}

/// base64url(SHA-256(DER)) of the first certificate in a PEM file: `x5t#S256`.
fn x5t_of(pem_file: &std::path::Path) -> String {
    let chain = openssl::x509::X509::stack_from_pem(&std::fs::read(pem_file).unwrap()).unwrap();
    URL_SAFE_NO_PAD.encode(openssl::sha::sha256(&chain[0].to_der().unwrap()))
}

/// The claims of a JWT, unverified.
fn claims_of(token: &str) -> Value {
    json_of(&String::from_utf8(URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap())
}

#[test]
fn mtls_client_auth_with_a_certificate_from_acmed_binds_tokens_to_that_certificate() {
    // A client certificate for billing.signet.test, issued by a real acmed (dns-01).
    let acme = signet_tests::acme::AcmeStack::start("");
    let mut ac = signet_tests::acme::Client::new(&acme);
    ac.register();
    let client_key = signet_tests::acme::p256();
    let csr = signet_tests::acme::Client::csr_with(
        &client_key,
        openssl::hash::MessageDigest::sha256(),
        &["billing.signet.test"],
    );
    let chain_pem = ac.issue_csr(&["billing.signet.test"], &csr);

    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("client.pem"), dir.path().join("client.key"));
    std::fs::write(&cert, &chain_pem).unwrap();
    std::fs::write(&key, client_key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    // A self-signed certificate, registered by its key (self_signed_tls_client_auth).
    let (ss_cert, ss_key) = (dir.path().join("self.pem"), dir.path().join("self.key"));
    let (st, _, err) = signet_tests::run(
        std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=self-signed client", "-keyout"])
            .arg(&ss_key)
            .arg("-out")
            .arg(&ss_cert),
    );
    assert!(st.success(), "{err}");
    let ss_pkey = PKey::private_key_from_pem(&std::fs::read(&ss_key).unwrap()).unwrap();
    let jwks_file = dir.path().join("self-jwks.json");
    let jwk = signet_jose::Jwk::from_public_key(&ss_pkey).unwrap().to_json();
    std::fs::write(&jwks_file, json!({ "keys": [jwk] }).to_string()).unwrap();

    let (tls, port, server_cert) = signet_tests::tokend::tls_table(dir.path(), Some(&acme.pki.ca("root.pem")));
    let t = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", &tls);
    let aud = "https://api.example.net";
    let common = ["--audience", aud, "--scope", "read"];
    t.create_client(
        "svc",
        &[&["--auth-method", "tls_client_auth", "--tls-san-dns", "billing.signet.test"][..], &common].concat(),
    );
    t.create_client(
        "elsewhere",
        &[&["--auth-method", "tls_client_auth", "--tls-san-dns", "other.signet.test"][..], &common].concat(),
    );
    let ss_jwks = jwks_file.to_str().unwrap();
    t.create_client(
        "selfie",
        &[&["--auth-method", "self_signed_tls_client_auth", "--jwks", ss_jwks][..], &common].concat(),
    );
    let rs = t.create_client("rs", &[&["--auth-method", "client_secret_basic"][..], &common].concat());
    let shown = t.signetctl().args(["--json", "oauth", "client", "show", "svc"]).output().unwrap();
    let shown = json_of(&String::from_utf8_lossy(&shown.stdout));
    assert_eq!(
        (shown["auth_method"].as_str(), shown["tls_client_auth_san_dns"].as_str()),
        (Some("tls_client_auth"), Some("billing.signet.test"))
    );

    // Discovery names the mTLS aliases on the https origin.
    let (st, body) = t.get("/.well-known/oauth-authorization-server");
    assert_eq!(st, 200, "{body}");
    let meta = json_of(&body);
    let origin = format!("https://127.0.0.1:{port}");
    assert_eq!(meta["tls_client_certificate_bound_access_tokens"], json!(true));
    assert_eq!(meta["mtls_endpoint_aliases"]["token_endpoint"], json!(format!("{origin}/token")));
    assert_eq!(meta["mtls_endpoint_aliases"]["userinfo_endpoint"], json!(format!("{origin}/userinfo")));
    let methods = meta["token_endpoint_auth_methods_supported"].as_array().unwrap();
    assert!(methods.contains(&json!("tls_client_auth")) && methods.contains(&json!("self_signed_tls_client_auth")));

    let cacert = server_cert.to_str().unwrap();
    let over_tls = |path: &str, form: &str, identity: Option<(&std::path::Path, &std::path::Path)>, extra: &[&str]| {
        let url = format!("{origin}{path}");
        let mut args = vec!["--cacert", cacert, "-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded"];
        args.extend(["--data-binary", form]);
        let (c, k);
        if let Some((cert, key)) = identity {
            (c, k) = (cert.to_str().unwrap().to_owned(), key.to_str().unwrap().to_owned());
            args.extend(["--cert", c.as_str(), "--key", k.as_str()]);
        }
        args.extend_from_slice(extra);
        args.push(&url);
        curl(&args)
    };
    let cc = "grant_type=client_credentials&client_id=svc&scope=read";

    // tls_client_auth with acmed's certificate: a token bound to it.
    let (st, body) = over_tls("/token", cc, Some((&cert, &key)), &[]);
    assert_eq!(st, 200, "{body}\n{}", t.log());
    let r = json_of(&body);
    assert_eq!(r["token_type"], "Bearer");
    let token = r["access_token"].as_str().unwrap().to_owned();
    let x5t = x5t_of(&cert);
    let claims = verify(&t, &token, aud);
    assert_eq!(claims.cnf.as_ref().and_then(|c| c.x5t_s256.as_deref()), Some(x5t.as_str()));
    assert_eq!(claims.client_id.as_deref(), Some("svc"));

    // Introspection (by another client, on the plain listener) shows the binding.
    let (st, body) = t.post("/introspect", &format!("token={token}"), &["-H", &basic(&rs.id, &rs.secret)]);
    assert_eq!(st, 200, "{body}");
    let i = json_of(&body);
    assert_eq!((i["active"].clone(), i["cnf"]["x5t#S256"].clone()), (json!(true), json!(x5t)));

    // The resource (userinfo): the same certificate passes the binding (then lacks `openid`);
    // another certificate, or none, is refused as invalid_token.
    let userinfo = |identity: Option<(&std::path::Path, &std::path::Path)>, tls: bool| {
        let auth = format!("Authorization: Bearer {token}");
        if tls {
            let url = format!("{origin}/userinfo");
            let mut args = vec!["--cacert", cacert, "-H", auth.as_str()];
            let (c, k);
            if let Some((cert, key)) = identity {
                (c, k) = (cert.to_str().unwrap().to_owned(), key.to_str().unwrap().to_owned());
                args.extend(["--cert", c.as_str(), "--key", k.as_str()]);
            }
            args.push(&url);
            curl(&args)
        } else {
            curl(&["-H", auth.as_str(), &t.url("/userinfo")])
        }
    };
    let (st, body) = userinfo(Some((&cert, &key)), true);
    assert_eq!((st, json_of(&body)["error"].clone()), (403, json!("insufficient_scope")), "{body}");
    for (who, identity, tls) in
        [("another certificate", Some((&*ss_cert, &*ss_key)), true), ("none", None, true), ("plain HTTP", None, false)]
    {
        let (st, body) = userinfo(identity, tls);
        assert_eq!((st, json_of(&body)["error"].clone()), (401, json!("invalid_token")), "{who}: {body}");
    }

    // Wrong, missing or untrusted certificates: invalid_client, 401.
    let refused = [
        (
            "a certificate without the registered SAN",
            "grant_type=client_credentials&client_id=elsewhere",
            Some((&*cert, &*key)),
        ),
        ("no certificate", cc, None),
        ("a self-signed certificate for a CA-verified client", cc, Some((&*ss_cert, &*ss_key))),
        (
            "acmed's certificate for the self-signed client",
            "grant_type=client_credentials&client_id=selfie",
            Some((&*cert, &*key)),
        ),
    ];
    for (what, form, identity) in refused {
        let (st, body) = over_tls("/token", form, identity, &[]);
        assert_eq!((st, json_of(&body)["error"].clone()), (401, json!("invalid_client")), "{what}: {body}");
    }
    let (st, body) = t.post("/token", cc, &[]);
    assert_eq!((st, json_of(&body)["error"].clone()), (401, json!("invalid_client")), "plain HTTP: {body}");

    // self_signed_tls_client_auth: the registered key's certificate, bound likewise.
    let (st, body) =
        over_tls("/token", "grant_type=client_credentials&client_id=selfie", Some((&ss_cert, &ss_key)), &[]);
    assert_eq!(st, 200, "{body}");
    let claims = claims_of(json_of(&body)["access_token"].as_str().unwrap());
    assert_eq!(claims["cnf"]["x5t#S256"], json!(x5t_of(&ss_cert)));

    // A secret-holding client that presents a certificate gets a bound token too;
    // without one (or on plain HTTP) its tokens are bearer tokens.
    let (st, body) =
        over_tls("/token", "grant_type=client_credentials", Some((&cert, &key)), &["-H", &basic(&rs.id, &rs.secret)]);
    assert_eq!(st, 200, "{body}");
    assert_eq!(claims_of(json_of(&body)["access_token"].as_str().unwrap())["cnf"]["x5t#S256"], json!(x5t));
    let (st, body) = over_tls("/token", "grant_type=client_credentials", None, &["-H", &basic(&rs.id, &rs.secret)]);
    assert_eq!(st, 200, "{body}");
    assert!(claims_of(json_of(&body)["access_token"].as_str().unwrap()).get("cnf").is_none(), "{body}");
}

/// A self-signed P-256 certificate and key made with the openssl tool in `dir`, as `name`.pem/.key.
fn self_signed(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
    let (st, _, err) = signet_tests::run(
        std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
            .args(["-subj", &format!("/CN={name}"), "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert),
    );
    assert!(st.success(), "{err}");
    (cert, key)
}

#[test]
fn a_public_clients_access_and_refresh_tokens_are_bound_to_the_certificate_it_presented() {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let (tls, port, server_cert) = signet_tests::tokend::tls_table(dir.path(), None);
    let t = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", &tls);
    let (mine, other) = (self_signed(dir.path(), "mine"), self_signed(dir.path(), "other"));
    let mut cmd = t.signetctl();
    cmd.args(["oauth", "user", "create", "alice", "--email", "alice@example.net", "--password-stdin"]);
    let (st, out, err) = run_with_stdin(&mut cmd, "alice's long password\n");
    assert!(st.success(), "{out}{err}");
    let redirect = "http://127.0.0.1:9/cb";
    let grants = ["--grant-type", "authorization_code", "--grant-type", "refresh_token"];
    let rest = ["--scope", "openid", "--scope", "email", "--audience", "api", "--redirect-uri", redirect];
    t.create_client("app", &[&["--auth-method", "none"][..], &grants, &rest].concat());

    // The code, through the sign-in and consent pages (plain listener).
    let jar = dir.path().join("cookies");
    let verifier = "w".repeat(50);
    let challenge = URL_SAFE_NO_PAD.encode(openssl::sha::sha256(verifier.as_bytes()));
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let authorize = t.url(&format!(
        "/authorize?response_type=code&client_id=app&redirect_uri={}&scope=openid+email&state=s\
         &code_challenge={challenge}&code_challenge_method=S256",
        enc(redirect)
    ));
    let (_, login, _) = browse(&jar, &authorize, None);
    let form = |html: &str, extra: &[(&str, &str)]| {
        let mut v = vec![("authz".to_owned(), field(html, "authz")), ("csrf".to_owned(), field(html, "csrf"))];
        v.extend(extra.iter().map(|(k, val)| ((*k).to_owned(), (*val).to_owned())));
        v
    };
    let post = |path: &str, f: Vec<(String, String)>| {
        let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        browse(&jar, &t.url(path), Some(&pairs))
    };
    let (_, consent, _) = post("/login", form(&login, &[("username", "alice"), ("password", "alice's long password")]));
    let (st, _, location) = post("/consent", form(&consent, &[("decision", "allow")]));
    assert_eq!(st, 303, "{location}");
    let code = query_param(&location, "code").unwrap();

    // Redeemed on the mTLS listener with a certificate: both tokens bound to it.
    let origin = format!("https://127.0.0.1:{port}");
    let cacert = server_cert.to_str().unwrap().to_owned();
    let tls_curl = |path: &str, identity: Option<&(std::path::PathBuf, std::path::PathBuf)>, extra: &[&str]| {
        let url = format!("{origin}{path}");
        let mut args: Vec<String> = vec!["--cacert".into(), cacert.clone()];
        if let Some((c, k)) = identity {
            args.extend(["--cert".into(), c.to_str().unwrap().into(), "--key".into(), k.to_str().unwrap().into()]);
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push(url);
        curl(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let form_post = ["-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary"];
    let redeem = format!(
        "grant_type=authorization_code&code={code}&client_id=app&code_verifier={verifier}&redirect_uri={}",
        enc(redirect)
    );
    let (st, body) = tls_curl("/token", Some(&mine), &[&form_post[..], &[redeem.as_str()]].concat());
    assert_eq!(st, 200, "{body}\n{}", t.log());
    let tok = json_of(&body);
    let access = tok["access_token"].as_str().unwrap().to_owned();
    let refresh = tok["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(claims_of(&access)["cnf"]["x5t#S256"], json!(x5t_of(&mine.0)));

    // Userinfo: the same certificate on the mTLS listener, and nothing else.
    let bearer = format!("Authorization: Bearer {access}");
    let (st, body) = tls_curl("/userinfo", Some(&mine), &["-H", &bearer]);
    assert_eq!((st, json_of(&body)["email"].clone()), (200, json!("alice@example.net")), "{body}");
    let (st, body) = tls_curl("/userinfo", Some(&other), &["-H", &bearer]);
    assert_eq!((st, json_of(&body)["error"].clone()), (401, json!("invalid_token")), "{body}");
    let (st, body) = curl(&["-H", &bearer, &t.url("/userinfo")]);
    assert_eq!((st, json_of(&body)["error"].clone()), (401, json!("invalid_token")), "{body}");

    // The refresh token wants the same certificate: another one, or none, is invalid_grant.
    let again = format!("grant_type=refresh_token&client_id=app&refresh_token={refresh}");
    let (st, body) = tls_curl("/token", Some(&other), &[&form_post[..], &[again.as_str()]].concat());
    assert_eq!((st, json_of(&body)["error"].clone()), (400, json!("invalid_grant")), "{body}");
    let (st, body) = t.post("/token", &again, &[]);
    assert_eq!((st, json_of(&body)["error"].clone()), (400, json!("invalid_grant")), "{body}");
    let (st, body) = tls_curl("/token", Some(&mine), &[&form_post[..], &[again.as_str()]].concat());
    assert_eq!(st, 200, "{body}");
    assert_eq!(claims_of(json_of(&body)["access_token"].as_str().unwrap())["cnf"]["x5t#S256"], json!(x5t_of(&mine.0)));
}

/// The JWK of the key in a PEM certificate file; with `x5c`, the certificate itself too.
fn cert_jwk(pem_file: &std::path::Path, x5c: bool) -> Value {
    let cert = openssl::x509::X509::from_pem(&std::fs::read(pem_file).unwrap()).unwrap();
    let mut jwk = signet_jose::Jwk::from_public_key(&cert.public_key().unwrap()).unwrap().to_json();
    if x5c {
        jwk["x5c"] = json!([STANDARD.encode(cert.to_der().unwrap())]);
    }
    jwk
}

#[test]
fn self_signed_tls_client_auth_by_jwks_uri_fetches_caches_and_fetches_again_for_a_new_certificate() {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let (tls, port, server_cert) = signet_tests::tokend::tls_table(dir.path(), None);
    let t = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", &tls);
    let (first, second, stranger) =
        (self_signed(dir.path(), "first"), self_signed(dir.path(), "second"), self_signed(dir.path(), "stranger"));
    // The client's JWK set on a real web server: the first certificate's key.
    let mut site = signet_tests::tokend::StaticSite::start(dir.path());
    let publish = |keys: Value| std::fs::write(site.root.join("jwks.json"), json!({ "keys": keys }).to_string());
    publish(json!([cert_jwk(&first.0, false)])).unwrap();
    let jwks_uri = site.url("jwks.json");
    t.create_client(
        "fetched",
        &["--auth-method", "self_signed_tls_client_auth", "--jwks-uri", &jwks_uri, "--audience", "api"],
    );
    let shown = t.signetctl().args(["--json", "oauth", "client", "show", "fetched"]).output().unwrap();
    assert_eq!(json_of(&String::from_utf8_lossy(&shown.stdout))["jwks_uri"], json!(jwks_uri));

    let cacert = server_cert.to_str().unwrap().to_owned();
    let token = |(cert, key): &(std::path::PathBuf, std::path::PathBuf)| {
        curl(&[
            "--cacert",
            &cacert,
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "--data-binary",
            "grant_type=client_credentials&client_id=fetched",
            &format!("https://127.0.0.1:{port}/token"),
        ])
    };
    let refused = |(st, body): (u16, String), why: &str| {
        let v = json_of(&body);
        assert_eq!((st, v["error"].as_str()), (401, Some("invalid_client")), "{body}");
        assert!(v["error_description"].as_str().unwrap().contains(why), "{body}");
    };

    // Fetched once: the registered certificate passes and binds the token; a stranger's does not,
    // and does not cause a second fetch within 10 s of the first.
    let (st, body) = token(&first);
    assert_eq!(st, 200, "{body}\n{}", t.log());
    assert_eq!(claims_of(json_of(&body)["access_token"].as_str().unwrap())["cnf"]["x5t#S256"], json!(x5t_of(&first.0)));
    let fetched_at = std::time::Instant::now();
    refused(token(&stranger), "not in the client's JWKS");
    assert_eq!(site.fetches("jwks.json"), 1, "{}", site.log());

    // The client rotates to a second certificate (now by x5c): within 10 s of the fetch, the cached
    // set still answers (the first passes, the second does not yet).
    publish(json!([cert_jwk(&second.0, true)])).unwrap();
    refused(token(&second), "not in the client's JWKS");
    assert_eq!(token(&first).0, 200, "the cached set");
    assert_eq!(site.fetches("jwks.json"), 1, "{}", site.log());
    // After 10 s, a certificate the cached set lacks fetches the set again: the second passes, the
    // first no longer does.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(fetched_at.elapsed()) + Duration::from_millis(500));
    let (st, body) = token(&second);
    assert_eq!(st, 200, "{body}\n{}", t.log());
    assert_eq!(
        claims_of(json_of(&body)["access_token"].as_str().unwrap())["cnf"]["x5t#S256"],
        json!(x5t_of(&second.0))
    );
    assert_eq!(site.fetches("jwks.json"), 2, "{}", site.log());
    refused(token(&first), "not in the client's JWKS");
    assert_eq!(site.fetches("jwks.json"), 2, "{}", site.log());

    // The web server gone: the cached set still serves the certificate it holds.
    site.stop();
    assert_eq!(token(&second).0, 200, "served from the cache while the jwks_uri is down");

    // A client whose jwks_uri cannot be fetched (none cached) is refused with the reason.
    t.create_client(
        "unreachable",
        &["--auth-method", "self_signed_tls_client_auth", "--jwks-uri", &site.url("other.json"), "--audience", "api"],
    );
    let (st, body) = curl(&[
        "--cacert",
        &cacert,
        "--cert",
        first.0.to_str().unwrap(),
        "--key",
        first.1.to_str().unwrap(),
        "--data-binary",
        "grant_type=client_credentials&client_id=unreachable",
        &format!("https://127.0.0.1:{port}/token"),
    ]);
    refused((st, body), "jwks_uri");
}

#[test]
fn socket_activation_passes_each_listener_by_name_the_mtls_one_as_tokend_https() {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let (tls, port, server_cert) = signet_tests::tokend::tls_table(dir.path(), None);
    let mut t = Tokend::configure(&signd, dir.path(), "tok-es256", "ecdsa-p256", &tls);
    // systemd-socket-activate binds the HTTP port, the admin socket and [tls] listen's port: tokend
    // can bind none of them itself, so it serves the descriptors it is given, each by its name.
    t.spawn_activated(&[("tokend-https", format!("127.0.0.1:{port}"))]);
    let mine = self_signed(dir.path(), "mine");
    let jwks_file = dir.path().join("mine-jwks.json");
    std::fs::write(&jwks_file, json!({ "keys": [cert_jwk(&mine.0, false)] }).to_string()).unwrap();
    // The admin socket (tokend-admin) ...
    t.create_client(
        "selfie",
        &["--auth-method", "self_signed_tls_client_auth", "--jwks", jwks_file.to_str().unwrap(), "--audience", "api"],
    );
    // ... the plain listener (tokend-http) ...
    let (st, body) = t.get("/.well-known/oauth-authorization-server");
    assert_eq!(st, 200, "{body}");
    let origin = format!("https://127.0.0.1:{port}");
    assert_eq!(json_of(&body)["mtls_endpoint_aliases"]["token_endpoint"], json!(format!("{origin}/token")));
    // ... and the mutual-TLS listener (tokend-https).
    let (st, body) = curl(&[
        "--cacert",
        server_cert.to_str().unwrap(),
        "--cert",
        mine.0.to_str().unwrap(),
        "--key",
        mine.1.to_str().unwrap(),
        "--data-binary",
        "grant_type=client_credentials&client_id=selfie",
        &format!("{origin}/token"),
    ]);
    assert_eq!(st, 200, "{body}\n{}", t.log());
    assert_eq!(claims_of(json_of(&body)["access_token"].as_str().unwrap())["cnf"]["x5t#S256"], json!(x5t_of(&mine.0)));
    assert!(!t.log().contains("tokend-https was passed"), "{}", t.log());

    // tokend-https passed to a tokend without [tls]: said in the log, not served.
    let other = tempfile::tempdir().unwrap();
    let mut plain = Tokend::configure(&signd, other.path(), "tok-es256-2", "ecdsa-p256", "");
    plain.spawn_activated(&[("tokend-https", format!("127.0.0.1:{}", signet_tests::pki::free_port()))]);
    assert!(plain.log().contains("socket tokend-https was passed, but tokend.toml has no [tls]"), "{}", plain.log());
}
