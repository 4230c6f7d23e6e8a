//! Key rotation without downtime, under load (issue 23, item 5).
//!
//! tokend's signing key rotated with `signetctl oauth key rotate` twice while
//! clients keep asking for tokens and a relying party keeps verifying them the
//! way relying parties do (its cached JWKS, refetched when a `kid` is
//! unknown). No request fails, no token fails to verify, the new keys sign
//! only after they were published, and the keys that signed live tokens stay
//! published.
//!
//! The OCSP responder certificate rotated with `signetctl ca rotate-responder`
//! twice while `openssl ocsp` keeps asking ocspd about a good and a revoked
//! certificate, with nonces (signed afresh) and without (pre-signed): every
//! answer verifies, the new responder signs from the moment the command
//! returns, the stored answers move to it, and a restart of signd and ocspd
//! keeps it.
//!
//! The issuing CA rotated with `signetctl ca rotate-issuer` while ACME clients
//! keep ordering certificates from acmed and `openssl ocsp` keeps asking about
//! certificates of the old CA: no request fails, what is issued after the
//! rotation chains to the new intermediate (which the root signed), OCSP and
//! the CRLs of each CA answer for what it issued, an old certificate revoked
//! through ACME shows in the old CA's OCSP and CRL, and a restart of signd,
//! ocspd and acmed keeps it all.
//! A new temporal shard of the CT log added with `signetctl ct shard add`
//! while writers submit to the existing shard and readers ask for its tree
//! head: no request fails, the new shard serves at once under its own key
//! (its SCTs verify with it, its tree grows), overlapping windows and taken
//! names are refused with exit code 7, both trees verify, and after signd and
//! ctlogd restart the shard is still served with the same log ID and entries. With
//! `--backend nss` the shard's key is made on an NSS token (SoftHSM2) and signs there.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::Value;
use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::Jwks;
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::pki::Pki;
use signet_tests::tokend::{signd_role, Tokend};
use signet_tests::SigndProcess;

/// What one load thread saw: each token with the instant it was issued, and every failure.
#[derive(Default)]
struct Seen {
    tokens: Vec<(String, String, Instant)>,
    failures: Vec<String>,
    jwks_fetches: usize,
}

fn kid_of(token: &str) -> String {
    let header = token.split('.').next().unwrap_or_default();
    let h: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap_or_default()).unwrap_or_default();
    h["kid"].as_str().unwrap_or_default().to_owned()
}

fn validation(t: &Tokend) -> Validation {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    Validation { issuer: Some(t.issuer()), audience: Some("api".into()), now, leeway: 0, typ: Some("at+jwt".into()) }
}

fn fetch_jwks(t: &Tokend) -> Result<Jwks, String> {
    let (status, body) = t.get("/jwks");
    if status != 200 {
        return Err(format!("GET /jwks: {status} {body}"));
    }
    Jwks::parse(body.as_bytes()).map_err(|e| format!("JWKS: {e}: {body}"))
}

/// Mints tokens until `stop`, verifying each as a relying party with a cached key set would.
fn load(t: &Tokend, auth: &str, stop: &AtomicBool) -> Seen {
    let mut seen = Seen::default();
    let mut jwks = fetch_jwks(t).unwrap();
    seen.jwks_fetches += 1;
    while !stop.load(Ordering::Relaxed) {
        let (status, body) = t.post("/token", "grant_type=client_credentials", &["-H", auth]);
        let issued = Instant::now();
        if status != 200 {
            seen.failures.push(format!("token request: {status} {body}"));
            continue;
        }
        let token = serde_json::from_str::<Value>(&body).unwrap_or_default()["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let kid = kid_of(&token);
        if verify_jwt(&token, &jwks, &validation(t)).is_err() {
            // An unknown key: refetch once, as relying parties do.
            match fetch_jwks(t) {
                Ok(fresh) => jwks = fresh,
                Err(e) => seen.failures.push(e),
            }
            seen.jwks_fetches += 1;
            if let Err(e) = verify_jwt(&token, &jwks, &validation(t)) {
                seen.failures.push(format!("token signed by {kid} does not verify after a JWKS refetch: {e}"));
            }
        }
        seen.tokens.push((token, kid, issued));
    }
    seen
}

#[test]
fn token_keys_rotate_twice_under_load_without_a_failed_request() {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let t = Tokend::start(
        &signd,
        dir.path(),
        "tok-es256",
        "ecdsa-p256",
        "[tokens]\nkey_publish_seconds = 2\nkey_refresh_seconds = 1\naccess_token_seconds = 60\n",
    );
    let client = t.create_client("svc", &["--auth-method", "client_secret_basic", "--audience", "api"]);
    let auth = format!("Authorization: Basic {}", STANDARD.encode(format!("{}:{}", client.id, client.secret)));

    let stop = AtomicBool::new(false);
    let rotations: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());
    let seen: Vec<Seen> = std::thread::scope(|s| {
        let (t, auth, stop) = (&t, &auth, &stop);
        let workers: Vec<_> = (0..3).map(|_| s.spawn(move || load(t, auth, stop))).collect();
        std::thread::sleep(Duration::from_secs(1));
        for _ in 0..2 {
            let (st, out, err) = signet_tests::run(t.signetctl().args([
                "--json",
                "oauth",
                "key",
                "rotate",
                "--algorithm",
                "ecdsa-p256",
            ]));
            assert!(st.success(), "{out}{err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["published"], true, "{v}");
            let kid = v["generated"]["key_id"].as_str().unwrap().to_owned();
            rotations.lock().unwrap().push((kid, Instant::now()));
            // Past the publication delay and a refresh: the new key signs.
            std::thread::sleep(Duration::from_secs(4));
        }
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let rotations = rotations.into_inner().unwrap();
    assert_eq!(rotations.len(), 2);
    // Key ids carry the Unix second: the second rotation must not reuse the first's name.
    assert_ne!(rotations[0].0, rotations[1].0, "{rotations:?}");

    let failures: Vec<_> = seen.iter().flat_map(|s| s.failures.iter()).collect();
    assert!(failures.is_empty(), "{} failures under rotation: {failures:#?}", failures.len());
    let tokens: Vec<_> = seen.iter().flat_map(|s| s.tokens.iter()).collect();
    assert!(tokens.len() >= 100, "only {} tokens under load", tokens.len());
    // Every key signed in turn: the first, then each rotated one.
    let kids: BTreeSet<_> = tokens.iter().map(|(_, kid, _)| kid.clone()).collect();
    let expected: BTreeSet<_> =
        ["tok-es256".to_owned(), rotations[0].0.clone(), rotations[1].0.clone()].into_iter().collect();
    assert_eq!(kids, expected, "keys that signed under load");
    // A new key signs only after its publication delay.
    for (kid, rotated) in &rotations {
        let first = tokens.iter().filter(|(_, k, _)| k == kid).map(|(_, _, at)| *at).min().unwrap();
        assert!(
            first.duration_since(*rotated) >= Duration::from_millis(1500),
            "{kid} signed {:?} after it was generated, before its 2 s publication delay",
            first.duration_since(*rotated)
        );
    }
    // Relying parties refetched the key set only for the new keys (a few times each), not per token.
    let fetches: usize = seen.iter().map(|s| s.jwks_fetches).sum();
    eprintln!("{} tokens under two rotations, {fetches} JWKS fetches, no failure", tokens.len());
    assert!(fetches <= 3 * 3, "{fetches} JWKS fetches for {} tokens", tokens.len());

    // Afterwards every token issued under load still verifies with the published set (the
    // replaced keys stay until their tokens expire) and introspects active.
    let jwks = fetch_jwks(&t).unwrap();
    for (token, kid, _) in &tokens {
        verify_jwt(token, &jwks, &validation(&t)).unwrap_or_else(|e| panic!("a token of {kid}: {e}"));
    }
    for kid in &expected {
        let (token, _, _) = tokens.iter().find(|(_, k, _)| k == kid).unwrap();
        let (status, body) = t.post("/introspect", &format!("token={token}"), &["-H", &auth]);
        assert_eq!(status, 200, "{body}");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["active"], true, "{kid}: {body}");
    }
}

/// One `openssl ocsp` answer under load: when it was asked and answered,
/// whether with a nonce, and the responder certificate (PEM) it carried.
struct OcspSeen {
    asked: Instant,
    answered: Instant,
    nonce: bool,
    responder: String,
}

/// The certificate (PEM) `openssl ocsp -resp_text` printed from the response.
fn responder_pem(text: &str) -> String {
    let start = text.find("-----BEGIN CERTIFICATE-----").unwrap_or(text.len());
    let end = text[start..].find("-----END CERTIFICATE-----").map_or(text.len(), |e| start + e + 25);
    text[start..end].split_whitespace().collect()
}

fn pem_of(path: &std::path::Path) -> String {
    responder_pem(&std::fs::read_to_string(path).unwrap())
}

/// Asks about `certs` (path, expected status) in turn until `stop`, with and
/// without a nonce, checking each answer as `openssl ocsp` verifies it.
fn ocsp_load(pki: &Pki, certs: &[(&std::path::Path, &str)], stop: &AtomicBool) -> (Vec<OcspSeen>, Vec<String>) {
    let (mut seen, mut failures) = (Vec::new(), Vec::new());
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let (cert, status) = certs[n % certs.len()];
        let nonce = (n / certs.len()) % 2 == 0;
        n += 1;
        let asked = Instant::now();
        let extra: &[&str] = if nonce { &["-resp_text"] } else { &["-resp_text", "-no_nonce"] };
        let text = pki.openssl_ocsp(cert, extra);
        let answered = Instant::now();
        let verified = text.contains("Response verify OK") && text.contains(&format!("{}: {status}", cert.display()));
        if !verified || (nonce && text.contains("WARNING")) {
            failures.push(format!("{} (nonce {nonce}): {text}", cert.display()));
            continue;
        }
        seen.push(OcspSeen { asked, answered, nonce, responder: responder_pem(&text) });
    }
    (seen, failures)
}

#[test]
fn ocsp_responder_rotates_twice_under_load_without_a_failed_request() {
    let mut pki = Pki::start();
    let (good, _) = pki.issue("good.test");
    let (bad, bad_serial) = pki.issue("bad.test");
    let (st, out, err) =
        signet_tests::run(pki.signetctl().args(["cert", "revoke", &bad_serial, "--reason", "key-compromise"]));
    assert!(st.success(), "{out}{err}");
    let first = pem_of(&pki.ca("responder.pem"));

    // An issuer ocspd does not serve: refused before any key is made.
    let keys_before = signet_tests::run(pki.signetctl().args(["--json", "key", "list"])).1;
    let (st, out, err) = signet_tests::run(pki.signetctl().args(["--issuer", "nope", "ca", "rotate-responder"]));
    assert_eq!(st.code(), Some(4), "{out}{err}");
    assert_eq!(signet_tests::run(pki.signetctl().args(["--json", "key", "list"])).1, keys_before);

    let stop = AtomicBool::new(false);
    // (key id, certificate PEM, when the command began, when it returned)
    let rotations: Mutex<Vec<(String, String, Instant, Instant)>> = Mutex::new(Vec::new());
    let certs = [(good.as_path(), "good"), (bad.as_path(), "revoked")];
    let results: Vec<(Vec<OcspSeen>, Vec<String>)> = std::thread::scope(|s| {
        let (pki, stop, certs) = (&pki, &stop, &certs);
        let workers: Vec<_> = (0..3).map(|_| s.spawn(move || ocsp_load(pki, certs, stop))).collect();
        std::thread::sleep(Duration::from_secs(1));
        for i in 0..2 {
            let out_file = pki.dir.join(format!("responder-{i}.pem"));
            let began = Instant::now();
            let (st, out, err) = signet_tests::run(pki.signetctl().args([
                "--json",
                "ca",
                "rotate-responder",
                "--days",
                "30",
                "--out",
                out_file.to_str().unwrap(),
            ]));
            let done = Instant::now();
            assert!(st.success(), "{out}{err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["ocspd_switched"], true, "{v}");
            assert_eq!(pem_of(&out_file), responder_pem(v["certificate"].as_str().unwrap()));
            rotations.lock().unwrap().push((v["key_id"].as_str().unwrap().to_owned(), pem_of(&out_file), began, done));
            std::thread::sleep(Duration::from_secs(2));
        }
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let rotations = rotations.into_inner().unwrap();
    assert_ne!(rotations[0].0, rotations[1].0);
    let failures: Vec<_> = results.iter().flat_map(|(_, f)| f).collect();
    assert!(failures.is_empty(), "{} failed OCSP requests under rotation: {failures:#?}", failures.len());
    let seen: Vec<_> = results.iter().flat_map(|(s, _)| s).collect();
    assert!(seen.len() >= 60, "only {} OCSP answers under load", seen.len());
    // Every answer carried one of the three responders, each of which answered.
    let responders = [first.clone(), rotations[0].1.clone(), rotations[1].1.clone()];
    for s in &seen {
        assert!(responders.contains(&s.responder), "an answer by an unknown responder: {}", s.responder);
    }
    for (i, r) in responders.iter().enumerate() {
        assert!(seen.iter().any(|s| &s.responder == r), "responder {i} never answered");
    }
    // A fresh answer (nonce) asked after a rotation returned, and answered
    // before the next began, is the new responder's.
    for (i, (_, pem, _, done)) in rotations.iter().enumerate() {
        let next = rotations.get(i + 1).map(|r| r.2);
        for s in seen.iter().filter(|s| s.nonce && s.asked > *done && next.is_none_or(|n| s.answered < n)) {
            let by = responders.iter().position(|r| r == &s.responder);
            assert_eq!(
                &s.responder,
                pem,
                "a nonce answer asked {:?} after rotation {i} returned was signed by responder {by:?}",
                s.asked.duration_since(*done)
            );
        }
    }
    eprintln!("{} OCSP answers under two responder rotations, no failure", seen.len());

    // The stored answers move to the newest responder (re-signed in the background).
    let newest = rotations[1].1.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    for (cert, status) in certs {
        loop {
            let text = pki.openssl_ocsp(cert, &["-resp_text", "-no_nonce"]);
            assert!(text.contains("Response verify OK") && text.contains(&format!(": {status}")), "{text}");
            if responder_pem(&text) == newest {
                break;
            }
            assert!(Instant::now() < deadline, "the stored answer for {} is still by an old responder", cert.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // signd and ocspd restarted: the newest responder is still the one in use.
    pki.kill9_ocspd();
    pki.signd.restart();
    pki.start_ocspd();
    for (cert, status) in certs {
        let text = pki.openssl_ocsp(cert, &["-resp_text"]);
        assert!(text.contains("Response verify OK") && text.contains(&format!(": {status}")), "{text}");
        assert_eq!(responder_pem(&text), newest, "after a restart");
    }
    // The issuer's responder keys, like its CA key, are refused to raw signing.
    let msg = pki.dir.join("msg");
    std::fs::write(&msg, b"x").unwrap();
    let (st, out, err) = signet_tests::run(pki.signetctl().args([
        "sign",
        "--role",
        "admin",
        "--key",
        &rotations[1].0,
        "--in",
        msg.to_str().unwrap(),
    ]));
    assert_eq!(st.code(), Some(3), "raw signing with a responder key: {out}{err}");
}

/// What one ACME load thread saw: each PEM chain acmed served with when its
/// issuance began, and every failure.
#[derive(Default)]
struct AcmeSeen {
    issued: Vec<(String, Instant)>,
    failures: Vec<String>,
}

/// Issues certificates through acmed (dns-01) until `stop`, one account per thread.
fn acme_load(stack: &AcmeStack, thread: usize, stop: &AtomicBool) -> AcmeSeen {
    let mut seen = AcmeSeen::default();
    let mut client = Client::new(stack);
    client.register();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("load-{thread}-{n}.signet.test");
        let began = Instant::now();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| client.issue(&[&name]))) {
            Ok(pem) => seen.issued.push((pem, began)),
            Err(e) => seen.failures.push(format!(
                "{name}: {}",
                e.downcast_ref::<String>().cloned().unwrap_or_else(|| "issuance panicked".into())
            )),
        }
    }
    seen
}

/// The PEM certificates of a chain, in order.
fn pems(chain: &str) -> Vec<String> {
    chain
        .split_inclusive("-----END CERTIFICATE-----\n")
        .filter(|p| p.contains("BEGIN CERTIFICATE"))
        .map(str::to_owned)
        .collect()
}

fn subject_of(pem: &str) -> String {
    openssl::x509::X509::from_pem(pem.as_bytes())
        .unwrap()
        .subject_name()
        .entries()
        .fold(String::new(), |acc, e| format!("{acc}/{}", String::from_utf8_lossy(e.data().as_slice())))
}

fn issuer_of(pem: &str) -> String {
    openssl::x509::X509::from_pem(pem.as_bytes())
        .unwrap()
        .issuer_name()
        .entries()
        .fold(String::new(), |acc, e| format!("{acc}/{}", String::from_utf8_lossy(e.data().as_slice())))
}

/// `openssl verify` of a served chain's leaf against the root alone, the rest untrusted.
fn verify_chain(dir: &std::path::Path, chain: &str, root: &std::path::Path) -> String {
    let certs = pems(chain);
    let leaf = dir.join("verify-leaf.pem");
    let rest = dir.join("verify-rest.pem");
    std::fs::write(&leaf, &certs[0]).unwrap();
    std::fs::write(&rest, certs[1..].concat()).unwrap();
    let (_, out, err) = signet_tests::run(
        std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(root)
            .arg("-untrusted")
            .arg(&rest)
            .arg(&leaf),
    );
    format!("{out}{err}")
}

/// `openssl ocsp` about `cert` issued by `issuer` (PEM file), verified against `cafile`.
fn ocsp_of(pki: &Pki, issuer: &std::path::Path, cafile: &std::path::Path, cert: &std::path::Path) -> String {
    let (_, out, err) = signet_tests::run(std::process::Command::new("openssl").arg("ocsp").args([
        "-issuer",
        issuer.to_str().unwrap(),
        "-cert",
        cert.to_str().unwrap(),
        "-url",
        &pki.url("/ocsp"),
        "-CAfile",
        cafile.to_str().unwrap(),
    ]));
    format!("{out}{err}")
}

fn serial_hex(pem: &str) -> String {
    let x = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap();
    x.serial_number().to_bn().unwrap().to_hex_str().unwrap().to_string().to_lowercase()
}

#[test]
fn issuing_ca_rotates_under_acme_and_ocsp_load_without_a_failed_request() {
    let mut stack = AcmeStack::start("");
    let dir = stack.pki.dir.clone();
    let root = stack.pki.ca("root.pem");
    let old_ca = std::fs::read_to_string(stack.pki.ca("issuing.pem")).unwrap();
    // Two certificates of the old issuing CA, through ACME.
    let mut owner = Client::new(&stack);
    owner.register();
    let old_good_chain = owner.issue(&["old-good.signet.test"]);
    let old_bad_chain = owner.issue(&["old-bad.signet.test"]);
    let (old_good, old_bad) = (dir.join("old-good.pem"), dir.join("old-bad.pem"));
    std::fs::write(&old_good, &pems(&old_good_chain)[0]).unwrap();
    std::fs::write(&old_bad, &pems(&old_bad_chain)[0]).unwrap();

    // An issuer signd does not have: refused before any key is made.
    let keys_before = signet_tests::run(stack.signetctl().args(["--json", "key", "list"])).1;
    let (st, out, err) = signet_tests::run(stack.signetctl().args(["--issuer", "nope", "ca", "rotate-issuer"]));
    assert_eq!(st.code(), Some(4), "{out}{err}");
    assert_eq!(signet_tests::run(stack.signetctl().args(["--json", "key", "list"])).1, keys_before);

    let new_ca_file = dir.join("demo-2.pem");
    let stop = AtomicBool::new(false);
    let mut rotated: Option<(Value, Instant)> = None;
    let (acme_seen, ocsp_seen): (Vec<AcmeSeen>, (Vec<OcspSeen>, Vec<String>)) = std::thread::scope(|s| {
        let (st_ref, stop) = (&stack, &stop);
        let acme: Vec<_> = (0..2).map(|t| s.spawn(move || acme_load(st_ref, t, stop))).collect();
        let certs = [(old_good.as_path(), "good"), (old_bad.as_path(), "good")];
        let ocsp = s.spawn(move || ocsp_load(&st_ref.pki, &certs, stop));
        std::thread::sleep(Duration::from_secs(2));
        let (st, out, err) = signet_tests::run(st_ref.signetctl().args([
            "--json",
            "ca",
            "rotate-issuer",
            "--new-name",
            "demo-2",
            "--out",
            new_ca_file.to_str().unwrap(),
        ]));
        assert!(st.success(), "{out}{err}");
        rotated = Some((serde_json::from_str(&out).unwrap(), Instant::now()));
        std::thread::sleep(Duration::from_secs(4));
        stop.store(true, Ordering::Relaxed);
        (acme.into_iter().map(|w| w.join().unwrap()).collect(), ocsp.join().unwrap())
    });
    let (v, done) = rotated.unwrap();
    assert_eq!(v["new_issuer"], "demo-2", "{v}");
    assert_eq!(v["acmed_issuer"], "demo-2", "{v}");
    assert_eq!(v["root_key_id"], "demo-root", "{v}");
    let new_ca = std::fs::read_to_string(&new_ca_file).unwrap();
    assert_eq!(responder_pem(&new_ca), responder_pem(v["certificate"].as_str().unwrap()));
    assert_ne!(subject_of(&new_ca), subject_of(&old_ca));
    assert_eq!(issuer_of(&new_ca), issuer_of(&old_ca), "the new CA is the old one's sibling");
    // The new CA certificate verifies against the root.
    let (_, out, err) = signet_tests::run(
        std::process::Command::new("openssl").args(["verify", "-CAfile"]).arg(&root).arg(&new_ca_file),
    );
    assert!(out.contains(": OK"), "{out}{err}");

    let failures: Vec<_> = acme_seen.iter().flat_map(|s| s.failures.iter()).chain(ocsp_seen.1.iter()).collect();
    assert!(failures.is_empty(), "{} failed requests under the rotation: {failures:#?}", failures.len());
    let issued: Vec<_> = acme_seen.iter().flat_map(|s| s.issued.iter()).collect();
    let after: Vec<_> = issued.iter().filter(|(_, began)| *began > done).collect();
    assert!(!after.is_empty(), "no issuance began after the rotation ({} in all)", issued.len());
    assert!(ocsp_seen.0.len() >= 10, "only {} OCSP answers under load", ocsp_seen.0.len());
    // Every certificate verifies against the root with the chain acmed served;
    // those begun after the rotation are the new CA's, with its chain.
    for (chain, began) in &issued {
        let out = verify_chain(&dir, chain, &root);
        assert!(out.contains(": OK"), "{out}");
        let certs = pems(chain);
        assert_eq!(issuer_of(&certs[0]), subject_of(&certs[1]), "the chain's CA signed the leaf");
        if *began > done {
            assert_eq!(responder_pem(&certs[1]), responder_pem(&new_ca), "issued after the rotation");
        }
    }
    eprintln!(
        "{} ACME issuances and {} OCSP answers under the issuing CA's rotation, no failure",
        issued.len(),
        ocsp_seen.0.len()
    );

    // OCSP: the new CA's certificates are good, through its own responder.
    let new_chain_file = dir.join("demo-2-chain.pem");
    std::fs::write(&new_chain_file, format!("{new_ca}{}", std::fs::read_to_string(&root).unwrap())).unwrap();
    let new_leaf = dir.join("new-leaf.pem");
    std::fs::write(&new_leaf, &pems(&after[0].0)[0]).unwrap();
    let text = ocsp_of(&stack.pki, &new_ca_file, &new_chain_file, &new_leaf);
    assert!(text.contains("Response verify OK") && text.contains(": good"), "{text}");
    // Its certificates name the new issuer's CRL, which ocspd publishes, signed by the new CA.
    let leaf_text = signet_tests::run(
        std::process::Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(&new_leaf),
    )
    .1;
    assert!(leaf_text.contains("/crl/demo-2/"), "{leaf_text}");
    let crl = dir.join("demo-2.crl");
    std::fs::write(&crl, stack.pki.http_get("/crl/demo-2.crl").2).unwrap();
    let (_, out, err) = signet_tests::run(
        std::process::Command::new("openssl")
            .args(["crl", "-inform", "DER", "-noout", "-CAfile"])
            .arg(&new_chain_file)
            .arg("-in")
            .arg(&crl),
    );
    assert!(format!("{out}{err}").contains("verify OK"), "{out}{err}");

    // Revoking an old certificate through ACME reaches the old issuer: its
    // OCSP and its CRL show it.
    let der = openssl::x509::X509::from_pem(pems(&old_bad_chain)[0].as_bytes()).unwrap().to_der().unwrap();
    let cert_b64 = URL_SAFE_NO_PAD.encode(&der);
    let r =
        owner.post(&stack.url("/acme/revoke-cert"), Some(&serde_json::json!({"certificate": cert_b64, "reason": 1})));
    assert_eq!(r.status, 200, "{r:?}");
    let text = stack.pki.openssl_ocsp(&old_bad, &[]);
    assert!(text.contains("Response verify OK") && text.contains(": revoked"), "{text}");
    let bad_serial = serial_hex(&pems(&old_bad_chain)[0]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stack.pki.full_crl_reason(&bad_serial).is_none() {
        assert!(Instant::now() < deadline, "the old issuer's CRL does not list the revoked certificate");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The old certificates' chain is still the old CA's.
    let r = owner.post(&owner_cert_url(&stack, &old_good_chain), None);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(responder_pem(&pems(&String::from_utf8(r.body).unwrap())[1]), responder_pem(&old_ca));

    // Everything restarted, nothing in any config changed: the state holds.
    stack.kill9_acmed();
    stack.pki.kill9_ocspd();
    stack.pki.signd.restart();
    stack.pki.start_ocspd();
    stack.start_acmed();
    let mut later = Client::new(&stack);
    later.register();
    let chain = later.issue(&["after-restart.signet.test"]);
    assert_eq!(responder_pem(&pems(&chain)[1]), responder_pem(&new_ca), "acmed issues from the new CA");
    let out = verify_chain(&dir, &chain, &root);
    assert!(out.contains(": OK"), "{out}");
    let text = ocsp_of(&stack.pki, &new_ca_file, &new_chain_file, &new_leaf);
    assert!(text.contains("Response verify OK") && text.contains(": good"), "{text}");
    let text = stack.pki.openssl_ocsp(&old_good, &[]);
    assert!(text.contains("Response verify OK") && text.contains(": good"), "{text}");
    let text = stack.pki.openssl_ocsp(&old_bad, &[]);
    assert!(text.contains("Response verify OK") && text.contains(": revoked"), "{text}");
    assert_eq!(stack.pki.http_get("/crl/demo-2.crl").0, 200);
    assert!(stack.pki.full_crl_reason(&bad_serial).is_some());
}

/// The URL acmed serves `chain`'s certificate at (by its serial).
fn owner_cert_url(stack: &AcmeStack, chain: &str) -> String {
    let serial = openssl::x509::X509::from_pem(pems(chain)[0].as_bytes()).unwrap().serial_number().to_bn().unwrap();
    stack.url(&format!("/acme/cert/{}", serial.to_hex_str().unwrap().to_lowercase()))
}

/// A CT log `old` over signd, its NotAfter window the 30 days from today; `new` is the 30
/// days after, for a shard the test adds.
struct ShardLog {
    pki: signet_tests::ctlog::CtPki,
    ctlogd: signet_tests::ctlog::Ctlogd,
    now: i64,
    old: (i64, i64),
    new: (i64, i64),
}

fn shard_log(signd: &mut SigndProcess, root_name: &str) -> ShardLog {
    use signet_tests::ctlog::{unix_now, CtPki, Ctlogd, LogSpec, TEST_SEQUENCING};
    const DAY: i64 = 86_400;
    let pki = CtPki::new(root_name);
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let now = unix_now();
    let d = now - now % DAY;
    let (old, new) = ((d, d + 30 * DAY), (d + 30 * DAY, d + 60 * DAY));
    let ctlogd = Ctlogd::start_logs(signd, &dir, &roots, &[LogSpec::new("old").window(old.0, old.1)], TEST_SEQUENCING);
    ShardLog { pki, ctlogd, now, old, new }
}

/// `signetctl [--json] ct shard add --name NAME` for the NotAfter window `[start, end)`,
/// with `extra` arguments: (status, stdout, stderr).
fn shard_add(
    signd: &SigndProcess,
    ctlogd: &signet_tests::ctlog::Ctlogd,
    json: bool,
    name: &str,
    (start, end): (i64, i64),
    extra: &[&str],
) -> (std::process::ExitStatus, String, String) {
    use signet_tests::ctlog::rfc3339;
    let mut c = ct_signetctl(signd, ctlogd);
    if json {
        c.arg("--json");
    }
    c.args(["ct", "shard", "add", "--name", name, "--not-after-start", &rfc3339(start), "--not-after-end"]);
    signet_tests::run(c.arg(rfc3339(end)).args(extra))
}

/// `signetctl` against the CT test's signd and ctlogd.
fn ct_signetctl(signd: &SigndProcess, ctlogd: &signet_tests::ctlog::Ctlogd) -> std::process::Command {
    let mut c = signet_tests::signetctl(&signd.socket);
    c.env("SIGNET_CTLOGD_SOCKET", ctlogd.home().join("db").join("admin.sock"));
    c
}

#[test]
fn ct_shard_added_under_load_without_a_failed_request() {
    use signet_tests::ctlog::{rfc3339, LogInfo};
    const DAY: i64 = 86_400;
    let mut signd = SigndProcess::start("");
    let ShardLog { pki, mut ctlogd, now, old, new } = shard_log(&mut signd, "ct shard rotation root");

    // Load on the existing shard: writers submitting, readers asking for its tree head.
    let stop = AtomicBool::new(false);
    let serial = std::sync::atomic::AtomicU32::new(1000);
    let (failures, acked_old, added): (Vec<String>, Vec<(signet_tests::ctlog::TestEntry, signet_ct::Sct)>, Value) =
        std::thread::scope(|s| {
            let (ctlogd_ref, pki, stop, serial) = (&ctlogd, &pki, &stop, &serial);
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        let (mut failures, mut acked) = (Vec::new(), Vec::new());
                        while !stop.load(Ordering::Relaxed) {
                            let n = serial.fetch_add(1, Ordering::Relaxed);
                            let e = pki.cert(n, now + 10 * DAY);
                            let (status, body) = ctlogd_ref.submit("old", &e);
                            if status != 200 {
                                failures.push(format!("add-chain: {status} {}", String::from_utf8_lossy(&body)));
                                continue;
                            }
                            let sct = serde_json::from_slice::<signet_ct::rfc6962::api::AddChainResponse>(&body)
                                .unwrap()
                                .to_sct()
                                .unwrap();
                            acked.push((e, sct));
                        }
                        (failures, acked)
                    })
                })
                .collect();
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        let mut failures = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            for path in ["/old/ct/v1/get-sth", "/logs.json"] {
                                let (status, body) = ctlogd_ref.http_get(path);
                                if status != 200 {
                                    failures.push(format!("{path}: {status} {}", String::from_utf8_lossy(&body)));
                                }
                            }
                        }
                        failures
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs(1));

            // Refused before anything is made: a window overlapping the old shard's.
            let keys_before = signet_tests::run(ct_signetctl(&signd, ctlogd_ref).args(["--json", "key", "list"])).1;
            let (st, out, err) = shard_add(&signd, ctlogd_ref, false, "overlap", (old.1 - DAY, new.1), &[]);
            assert_eq!(st.code(), Some(7), "{out}{err}");
            assert!(err.contains("overlaps log `old`"), "{err}");
            assert_eq!(
                signet_tests::run(ct_signetctl(&signd, ctlogd_ref).args(["--json", "key", "list"])).1,
                keys_before
            );

            let (st, out, err) = shard_add(&signd, ctlogd_ref, true, "new", (new.0, new.1), &[]);
            assert!(st.success(), "{out}{err}\n{}", ctlogd_ref.log());
            let added: Value = serde_json::from_str(&out).unwrap();
            // Submissions to the new shard while the load goes on.
            std::thread::sleep(Duration::from_secs(1));
            stop.store(true, Ordering::Relaxed);
            let mut failures = Vec::new();
            let mut acked = Vec::new();
            for w in writers {
                let (f, a) = w.join().unwrap();
                failures.extend(f);
                acked.extend(a);
            }
            for r in readers {
                failures.extend(r.join().unwrap());
            }
            (failures, acked, added)
        });
    assert!(failures.is_empty(), "{} failed requests while the shard was added: {failures:#?}", failures.len());
    assert!(acked_old.len() >= 20, "only {} submissions under load", acked_old.len());

    // The new shard's key is the one signd holds for its log; its log ID is that key's hash.
    let key = signet_ipc::block_on(signd.client().ct_log_public_key("new")).unwrap();
    let log_id = STANDARD.decode(added["log_id"].as_str().unwrap()).unwrap();
    assert_eq!(log_id, signet_ct::LogKey::from_spki_der(&key).unwrap().log_id().to_vec(), "{added}");
    assert_eq!(added["log_list_entry"]["key"].as_str().unwrap(), STANDARD.encode(&key), "{added}");
    assert_eq!(added["not_after_start"].as_str().unwrap(), rfc3339(new.0));
    ctlogd.logs.push(LogInfo { name: "new".into(), public_key: key.clone() });

    // It takes certificates of its window, with SCTs under its key; the old shard refuses them.
    let mine: Vec<_> = (0..12).map(|i| pki.cert(5000 + i, now + 45 * DAY)).collect();
    let mut acked_new = Vec::new();
    for (i, e) in mine.iter().enumerate() {
        let sct = ctlogd.submit_ok("new", e);
        assert!(ctlogd.key("old").verify_sct(&sct, &e.entry).is_err());
        acked_new.push((i, sct));
        if i == 5 {
            ctlogd.wait_for_size("new", 6);
        }
    }
    assert_eq!(ctlogd.submit("old", &mine[0]).0, 400);
    assert_eq!(ctlogd.submit("new", &pki.cert(6000, now + 10 * DAY)).0, 400);
    // Its tree head grows.
    let grown = ctlogd.wait_for_size("new", mine.len() as u64);
    assert_eq!(grown.tree_size, mine.len() as u64);

    // Sent again: the same shard back; a taken name with another window: refused.
    let (st, out, err) = shard_add(&signd, &ctlogd, true, "new", (new.0, new.1), &[]);
    assert!(st.success(), "{out}{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["log_id"], added["log_id"]);
    let (st, out, err) = shard_add(&signd, &ctlogd, false, "new", (new.1, new.1 + 30 * DAY), &[]);
    assert_eq!(st.code(), Some(7), "{out}{err}");
    assert!(err.contains("served already"), "{err}");

    // logs.json and the metrics name it.
    let (_, body) = ctlogd.http_get("/logs.json");
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["logs"].as_array().unwrap().len(), 2, "{list}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, body) = ctlogd.http_get("/metrics");
        let text = String::from_utf8_lossy(&body).into_owned();
        if text.contains(&format!("ct_tree_size{{daemon=\"ctlogd\",log=\"new\"}} {}", mine.len())) {
            break;
        }
        assert!(Instant::now() < deadline, "no ct_tree_size for the new shard:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Both shards: every acknowledged entry at its SCT's index, every tree verified.
    let old_entries: Vec<_> = acked_old.iter().map(|(e, _)| e.clone()).collect();
    let old_acked: Vec<_> = acked_old.iter().enumerate().map(|(i, (_, sct))| (i, sct.clone())).collect();
    let old_head = ctlogd.check_acknowledged("old", &old_entries, &old_acked);
    ctlogd.check_acknowledged("new", &mine, &acked_new);
    assert!(ctlogd.verify_tree("old") >= old_acked.len() as u64);
    assert_eq!(ctlogd.verify_tree("new"), mine.len() as u64);

    // signd and ctlogd restarted, with no config edited: the shard is served
    // with the same log ID and entries, and takes more.
    assert!(ctlogd.terminate().success(), "{}", ctlogd.log());
    signd.restart();
    ctlogd.spawn();
    let (status, body) = ctlogd.log_get("new", "log.v3.json");
    assert_eq!(status, 200);
    let meta: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(meta["log_id"], added["log_id"], "{meta}");
    ctlogd.check_acknowledged("new", &mine, &acked_new);
    ctlogd.check_acknowledged("old", &old_entries, &old_acked);
    let more = pki.cert(7000, now + 50 * DAY);
    ctlogd.submit_ok("new", &more);
    ctlogd.wait_for_size("new", mine.len() as u64 + 1);
    assert_eq!(ctlogd.verify_tree("new"), mine.len() as u64 + 1);
    assert!(ctlogd.sth("old").0.tree_size >= old_head.tree_size);
    let (st, out, err) = signet_tests::run(ct_signetctl(&signd, &ctlogd).args(["--json", "ct", "shard", "list"]));
    assert!(st.success(), "{out}{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let new_listed = listed["logs"].as_array().unwrap().iter().find(|l| l["name"] == "new").unwrap().clone();
    assert_eq!(new_listed["added"], true, "{listed}");
    assert_eq!(new_listed["log_id"], added["log_id"], "{listed}");
}

/// The new shard's key on an NSS token (SoftHSM2 through NSS): `ct shard add --backend
/// nss` makes it there, the shard signs with it at once, and after signd and ctlogd
/// restart it still does.
#[test]
fn ct_shard_added_with_its_key_on_an_nss_token() {
    use signet_tests::ctlog::LogInfo;
    const DAY: i64 = 86_400;
    let mut signd = SigndProcess::start_backend(signet_tests::Backend::NssSofthsm, "");
    let ShardLog { pki, mut ctlogd, now, new, .. } = shard_log(&mut signd, "ct shard on a token root");

    let (st, out, err) = shard_add(&signd, &ctlogd, true, "new", (new.0, new.1), &["--backend", "nss"]);
    assert!(st.success(), "{out}{err}\n{}", ctlogd.log());
    let added: Value = serde_json::from_str(&out).unwrap();
    let keys = signet_ipc::block_on(signd.client().admin_list_keys()).unwrap();
    let key = keys.iter().find(|k| k.id == added["key"]).unwrap_or_else(|| panic!("{added}: {keys:?}"));
    assert_eq!((key.backend.as_str(), key.available), ("nss", true), "{key:?}");
    let public = signet_ipc::block_on(signd.client().ct_log_public_key("new")).unwrap();
    assert_eq!(public, key.spki);
    ctlogd.logs.push(LogInfo { name: "new".into(), public_key: public });

    // SCTs under the token's key, a tree that grows and verifies; the same after a restart.
    let mine: Vec<_> = (0..6).map(|i| pki.cert(100 + i, now + 45 * DAY)).collect();
    let acked: Vec<_> = mine.iter().enumerate().map(|(i, e)| (i, ctlogd.submit_ok("new", e))).collect();
    ctlogd.wait_for_size("new", mine.len() as u64);
    ctlogd.check_acknowledged("new", &mine, &acked);
    assert_eq!(ctlogd.verify_tree("new"), mine.len() as u64);
    assert!(ctlogd.terminate().success(), "{}", ctlogd.log());
    signd.restart();
    ctlogd.spawn();
    let more = pki.cert(200, now + 50 * DAY);
    let sct = ctlogd.submit_ok("new", &more);
    ctlogd.key("new").verify_sct(&sct, &more.entry).unwrap();
    ctlogd.wait_for_size("new", mine.len() as u64 + 1);
    assert_eq!(ctlogd.verify_tree("new"), mine.len() as u64 + 1);
}
