//! acmed end to end: a real signd + CA + ocspd, the real DNS server, and acmed
//! over HTTPS, driven by a raw ACME client (signet-acme's JWS signing, curl for
//! HTTP) so each request can be bent out of shape. Every refusal must be the
//! RFC 8555 problem type, never a 5xx (the client asserts that on every call).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use signet_acme::jws::sign::{self, Signer};
use signet_acme::jws::Algorithm;
use signet_ipc::{block_on, CertState};
use signet_tests::acme::{p256, AcmeStack, Client, HttpResponder, Route};
use signet_tests::{bin, run};

#[test]
fn issuance_and_the_chain_verifies_with_openssl() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let pem = c.issue(&["a.signet.test", "b.signet.test"]);
    let dir = &stack.pki.dir;
    let leaf_and_chain = dir.join("issued.pem");
    std::fs::write(&leaf_and_chain, &pem).unwrap();
    let (st, out, err) = run(Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(stack.pki.ca("root.pem"))
        .arg("-untrusted")
        .arg(&leaf_and_chain)
        .args(["-verify_hostname", "b.signet.test"])
        .arg(&leaf_and_chain));
    assert!(st.success(), "{out}{err}");
    // The directory advertises what the RFCs and drafts say it should.
    let (status, headers, body) = stack.get("/directory");
    assert_eq!(status, 200);
    assert!(headers.to_ascii_lowercase().contains("replay-nonce:"));
    let d: serde_json::Value = serde_json::from_slice(&body).unwrap();
    for k in ["newNonce", "newAccount", "newOrder", "revokeCert", "keyChange", "renewalInfo"] {
        assert!(d[k].as_str().unwrap().starts_with("https://127.0.0.1"), "{k}: {d}");
    }
    assert_eq!(d["meta"]["caaIdentities"], json!(["signet.test"]));
    assert!(d["meta"]["profiles"]["shortlived"].is_string(), "{d}");
}

#[test]
fn ml_dsa_ca_issues_for_ml_dsa_keys() {
    let stack = AcmeStack::start_with_ca("ml-dsa-65", "");
    let mut c = Client::new(&stack);
    c.register();
    let mut seed = [0u8; 32];
    openssl::rand::rand_bytes(&mut seed).unwrap();
    let key = openssl::pkey::PKey::private_key_from_seed(None, openssl::pkey::KeyType::ML_DSA_44, None, &seed).unwrap();
    let csr = Client::csr_with(&key, openssl::hash::MessageDigest::null(), &["pq.signet.test"]);
    let pem = c.issue_csr(&["pq.signet.test"], &csr);
    // The vendored OpenSSL 3.5 verifies the whole ML-DSA chain (the system one cannot).
    let certs = openssl::x509::X509::stack_from_pem(pem.as_bytes()).unwrap();
    let root = openssl::x509::X509::from_pem(&std::fs::read(stack.pki.ca("root.pem")).unwrap()).unwrap();
    let mut store = openssl::x509::store::X509StoreBuilder::new().unwrap();
    store.add_cert(root).unwrap();
    let store = store.build();
    let mut chain = openssl::stack::Stack::new().unwrap();
    for c in &certs[1..] {
        chain.push(c.clone()).unwrap();
    }
    let mut ctx = openssl::x509::X509StoreContext::new().unwrap();
    let ok = ctx.init(&store, &certs[0], &chain, |c| c.verify_cert()).unwrap();
    assert!(ok, "chain does not verify: {}", ctx.error());
    assert!(certs[0].public_key().unwrap().public_eq(&key), "the leaf carries the CSR's ML-DSA-44 key");
    assert_eq!(
        certs[0].signature_algorithm().object().nid().long_name().unwrap_or(""),
        certs[1].signature_algorithm().object().nid().long_name().unwrap_or("")
    );
}

/// notBefore/notAfter in newOrder (RFC 8555 §7.4): echoed in the order and
/// exactly the certificate's validity; anything the profile does not allow,
/// or that is not an RFC 3339 time, is `malformed` with the limits in the detail.
#[test]
fn not_before_and_not_after_are_the_certificates_validity() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let at = |secs: i64| {
        time::OffsetDateTime::from_unix_timestamp(secs)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let new_order = stack.url("/acme/new-order");
    let order_for = |name: &str, window: &[(&str, String)]| {
        let mut p = json!({"identifiers": [{"type": "dns", "value": name}]});
        for (k, v) in window {
            p[*k] = json!(v);
        }
        p
    };

    let (not_before, not_after) = (now - 120, now + 3 * 86_400 + 17);
    let r = c.post(
        &new_order,
        Some(&order_for("window.signet.test", &[("notBefore", at(not_before)), ("notAfter", at(not_after))])),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let order = r.json();
    assert_eq!(
        (order["notBefore"].as_str(), order["notAfter"].as_str()),
        (Some(at(not_before).as_str()), Some(at(not_after).as_str())),
        "{order}"
    );
    c.authorize_dns01(&order);
    let r = c.finalize(&order, &Client::csr(&["window.signet.test"]));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["notAfter"].as_str(),
        Some(at(not_after).as_str()),
        "the valid order still says what was asked"
    );
    let cert_url = r.json()["certificate"].as_str().unwrap().to_owned();
    let pem = c.post(&cert_url, None).body;
    let leaf = openssl::x509::X509::from_pem(&pem).unwrap();
    let same = |t: &openssl::asn1::Asn1TimeRef, secs: i64| {
        let d = t.diff(&openssl::asn1::Asn1Time::from_unix(secs).unwrap()).unwrap();
        (d.days, d.secs) == (0, 0)
    };
    assert!(same(leaf.not_before(), not_before), "notBefore {} is not {}", leaf.not_before(), at(not_before));
    assert!(same(leaf.not_after(), not_after), "notAfter {} is not {}", leaf.not_after(), at(not_after));

    // notAfter alone: notBefore is the issuance time, backdated as usual.
    let r = c.post(&new_order, Some(&order_for("after.signet.test", &[("notAfter", at(now + 86_400))])));
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.json().get("notBefore").is_none(), "{}", r.json());

    let refused = |c: &mut Client, window: &[(&str, String)], profile: Option<&str>, says: &str| {
        let mut p = order_for("refused.signet.test", window);
        if let Some(profile) = profile {
            p["profile"] = json!(profile);
        }
        let r = c.post(&new_order, Some(&p));
        assert_eq!((r.status, r.problem().as_str()), (400, "malformed"), "{window:?}: {r:?}");
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_owned();
        assert!(detail.contains(says), "{window:?}: {detail:?} does not say {says:?}");
    };
    // Longer than the CA profile's 90 days, and than shortlived's 6 days.
    refused(&mut c, &[("notBefore", at(now)), ("notAfter", at(now + 91 * 86_400))], None, "allows at most 7776000 s");
    refused(
        &mut c,
        &[("notAfter", at(now + 7 * 86_400))],
        Some("shortlived"),
        "profile shortlived allows at most 518400 s",
    );
    // Inverted, already over, too old, too far ahead.
    refused(&mut c, &[("notBefore", at(now + 60)), ("notAfter", at(now + 30))], None, "before notBefore");
    refused(&mut c, &[("notBefore", at(now - 600)), ("notAfter", at(now - 300))], None, "already passed");
    refused(&mut c, &[("notBefore", at(now - 2 * 86_400)), ("notAfter", at(now + 86_400))], None, "in the past to");
    refused(&mut c, &[("notBefore", at(now + 30 * 86_400))], None, "outside what this CA issues now");
    // Not RFC 3339, or a fraction of a second.
    for garbage in ["tomorrow", "2030-01-01", "2030-01-01 00:00:00Z", "2030-01-01T00:00:00", "2030-02-30T00:00:00Z"] {
        refused(&mut c, &[("notAfter", garbage.to_owned())], None, "");
    }
    refused(&mut c, &[("notAfter", at(now + 86_400).replace('Z', ".5Z"))], None, "whole second");
    let r = c.post(
        &new_order,
        Some(&json!({"identifiers": [{"type": "dns", "value": "x.signet.test"}], "notBefore": 1700000000})),
    );
    assert_eq!(r.problem(), "malformed", "{r:?}");
}

/// An order for `name`: (order, authorization URL, http-01 challenge URL, token, key authorization).
fn http01_order(c: &mut Client, name: &str) -> (serde_json::Value, String, String, String, String) {
    let (_, order) = c.new_order(&[name]);
    let authz = order["authorizations"][0].as_str().unwrap().to_owned();
    let (challenge, token, ka) = c.http01_challenge(&authz);
    (order, authz, challenge, token, ka)
}

fn well_known(token: &str) -> String {
    format!("/.well-known/acme-challenge/{token}")
}

/// The authorization failed on its http-01 challenge with `type` and a detail saying `says`.
fn http01_failed(a: &serde_json::Value, kind: &str, says: &str) {
    assert_eq!(a["status"], "invalid", "{a}");
    let ch = a["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "http-01").unwrap();
    assert_eq!(ch["error"]["type"], format!("urn:ietf:params:acme:error:{kind}"), "{a}");
    let detail = ch["error"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(says), "{detail:?} does not say {says:?}");
}

/// http-01 follows redirects as Let's Encrypt does: relative and absolute, on
/// to https: with a self-signed certificate, up to 10 of them.
#[test]
fn http01_follows_redirects() {
    let stack = AcmeStack::start("");
    let http = HttpResponder::http(stack.http01_port);
    let https = HttpResponder::https(stack.http01_https_port);
    let mut c = Client::new(&stack);
    c.register();

    // No redirect: the request names the host and port.
    let (_, authz, ch, token, ka) = http01_order(&mut c, "plain.signet.test");
    http.route(&well_known(&token), Route::Body(ka));
    assert_eq!(c.respond_and_wait(&ch, &authz)["status"], "valid");
    assert!(
        http.requests().contains(&(well_known(&token), format!("plain.signet.test:{}", stack.http01_port))),
        "{:?}",
        http.requests()
    );

    // A relative 302, then a 301 to https: on another name; then the order issues.
    let (order, authz, ch, token, ka) = http01_order(&mut c, "moved.signet.test");
    http.route(&well_known(&token), Route::Redirect(302, format!("/moved/{token}")));
    let tls_url = format!("https://tls.signet.test:{}/tls/{token}?q=1#frag", stack.http01_https_port);
    http.route(&format!("/moved/{token}"), Route::Redirect(301, tls_url));
    https.route(&format!("/tls/{token}?q=1"), Route::Body(ka));
    let a = c.respond_and_wait(&ch, &authz);
    assert_eq!(a["status"], "valid", "{a}");
    let seen = https.requests();
    assert!(
        seen.contains(&(format!("/tls/{token}?q=1"), format!("tls.signet.test:{}", stack.http01_https_port))),
        "{seen:?}"
    );
    let r = c.finalize(&order, &Client::csr(&["moved.signet.test"]));
    assert_eq!(r.status, 200, "{r:?}");

    // Exactly 10 redirects (307 and 308) are followed; an 11th is not.
    let chain = |c: &mut Client, name: &str, hops: usize| {
        let (_, authz, ch, token, ka) = http01_order(c, name);
        http.route(&well_known(&token), Route::Redirect(307, format!("/hop/{token}/1")));
        for i in 1..hops {
            http.route(&format!("/hop/{token}/{i}"), Route::Redirect(308, format!("/hop/{token}/{}", i + 1)));
        }
        http.route(&format!("/hop/{token}/{hops}"), Route::Body(ka));
        c.respond_and_wait(&ch, &authz)
    };
    let a = chain(&mut c, "ten.signet.test", 10);
    assert_eq!(a["status"], "valid", "{a}");
    let a = chain(&mut c, "eleven.signet.test", 11);
    http01_failed(&a, "connection", "too many redirects: more than 10");
}

/// A redirect loop, and redirects to another port, scheme or an IP address,
/// fail with `connection` and a detail that says why.
#[test]
fn http01_refuses_redirect_loops_and_forbidden_targets() {
    let stack = AcmeStack::start("");
    let http = HttpResponder::http(stack.http01_port);
    let mut c = Client::new(&stack);
    c.register();

    let (_, authz, ch, token, ka) = http01_order(&mut c, "loop.signet.test");
    http.route(&well_known(&token), Route::Redirect(302, format!("/a/{token}")));
    http.route(
        &format!("/a/{token}"),
        Route::Redirect(302, format!("http://loop.signet.test:{}/b/{token}", stack.http01_port)),
    );
    http.route(&format!("/b/{token}"), Route::Redirect(302, well_known(&token)));
    http.route(&format!("/unused/{token}"), Route::Body(ka));
    let a = c.respond_and_wait(&ch, &authz);
    http01_failed(&a, "connection", "redirect loop");
    assert_eq!(
        http.requests().iter().filter(|(p, _)| p.contains(&token)).count(),
        3,
        "each URL once: {:?}",
        http.requests()
    );

    let elsewhere = signet_tests::pki::free_port();
    let targets = [
        (
            format!("http://port.signet.test:{elsewhere}/x"),
            format!("http redirects are followed to port {} only", stack.http01_port),
        ),
        (
            format!("https://port.signet.test:{}/x", stack.http01_port),
            format!("https redirects are followed to port {} only", stack.http01_https_port),
        ),
        (format!("ftp://port.signet.test:{}/x", stack.http01_port), "http: and https: URLs only".to_owned()),
        (
            format!("http://127.0.0.1:{}/x", stack.http01_port),
            "redirects to an IP address are followed only to the IP identifier".to_owned(),
        ),
        (format!("http://[::1]:{}/x", stack.http01_port), "IP address".to_owned()),
    ];
    for (i, (target, says)) in targets.iter().enumerate() {
        let (_, authz, ch, token, ka) = http01_order(&mut c, &format!("forbidden{i}.signet.test"));
        http.route(&well_known(&token), Route::Redirect(302, target.clone()));
        http.route("/x", Route::Body(ka));
        let a = c.respond_and_wait(&ch, &authz);
        http01_failed(&a, "connection", says);
        let detail = a["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "http-01").unwrap()["error"]
            ["detail"]
            .to_string();
        assert!(detail.contains("302"), "the detail names the answer: {detail}");
    }
    // A redirect without a Location is no redirect to follow either.
    let (_, authz, ch, token, _) = http01_order(&mut c, "nowhere.signet.test");
    http.route(&well_known(&token), Route::Redirect(301, String::new()));
    let a = c.respond_and_wait(&ch, &authz);
    assert_eq!(a["status"], "invalid", "{a}");
}

#[test]
fn valid_authorizations_are_reused_by_their_account_only() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let (_, first) = c.new_order(&["reuse.signet.test"]);
    c.authorize_dns01(&first);
    // The same account orders the name again: ready at once, same authorization.
    let (_, again) = c.new_order(&["reuse.signet.test"]);
    assert_eq!(again["status"], "ready", "{again}");
    assert_eq!(again["authorizations"], first["authorizations"]);
    let r = c.finalize(&again, &Client::csr(&["reuse.signet.test"]));
    assert_eq!(r.status, 200, "{r:?}");
    // Another account gets its own pending authorization.
    let mut other = Client::new(&stack);
    other.register();
    let (_, theirs) = other.new_order(&["reuse.signet.test"]);
    assert_eq!(theirs["status"], "pending", "{theirs}");
    assert_ne!(theirs["authorizations"], first["authorizations"]);
    // With reuse off, a new order starts over.
    drop(other);
    let stack2 = AcmeStack::start("authorization_lifetime_seconds = 0");
    let mut c2 = Client::new(&stack2);
    c2.register();
    let (_, o) = c2.new_order(&["x.signet.test"]);
    c2.authorize_dns01(&o);
    let (_, o2) = c2.new_order(&["x.signet.test"]);
    assert_eq!(o2["status"], "pending", "{o2}");
}

#[test]
fn replayed_nonce_wrong_url_wrong_alg_and_missing_nonce() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let kid = c.kid.clone().unwrap();
    let new_order = stack.url("/acme/new-order");
    let payload = json!({"identifiers": [{"type": "dns", "value": "x.signet.test"}]}).to_string();

    // Replayed: the same JWS twice.
    let jws = c.jws(&new_order, Some(&serde_json::from_str(&payload).unwrap()));
    assert_eq!(c.send(&new_order, &jws).status, 201);
    let r = c.send(&new_order, &jws);
    assert_eq!((r.status, r.problem().as_str()), (400, "badNonce"), "{r:?}");
    assert!(r.header("replay-nonce").is_some(), "a badNonce answer carries a fresh nonce");

    // A nonce this server never issued.
    let jws = sign::request(
        Algorithm::Es256,
        &c.key,
        Signer::Kid(&kid),
        Some("AAAAAAAAAAAAAAAAAAAAAA"),
        &new_order,
        payload.as_bytes(),
    )
    .unwrap();
    assert_eq!(c.send(&new_order, &jws).problem(), "badNonce");

    // No nonce at all.
    let jws = sign::request(Algorithm::Es256, &c.key, Signer::Kid(&kid), None, &new_order, payload.as_bytes()).unwrap();
    assert_eq!(c.send(&new_order, &jws).problem(), "badNonce");

    // The url header names another resource.
    let nonce = c.nonce();
    let jws = sign::request(
        Algorithm::Es256,
        &c.key,
        Signer::Kid(&kid),
        Some(&nonce),
        &stack.url("/acme/revoke-cert"),
        payload.as_bytes(),
    )
    .unwrap();
    let r = c.send(&new_order, &jws);
    assert_eq!((r.status, r.problem().as_str()), (403, "unauthorized"), "{r:?}");

    // alg ES384 over a P-256 key, and an alg nobody supports.
    let nonce = c.nonce();
    let header = json!({"alg": "ES384", "kid": kid, "nonce": nonce, "url": new_order});
    let jws = sign::with_header(Algorithm::Es256, &c.key, &header, payload.as_bytes()).unwrap();
    let r = c.send(&new_order, &jws);
    assert_eq!(r.problem(), "badSignatureAlgorithm", "{r:?}");
    assert!(r.json()["algorithms"].as_array().is_some_and(|a| a.contains(&json!("ES256"))), "{r:?}");
    let nonce = c.nonce();
    let header = json!({"alg": "HS256", "kid": kid, "nonce": nonce, "url": new_order});
    let jws = sign::with_header(Algorithm::Es256, &c.key, &header, payload.as_bytes()).unwrap();
    assert_eq!(c.send(&new_order, &jws).problem(), "badSignatureAlgorithm");

    // A kid no account has.
    let nonce = c.nonce();
    let ghost = stack.url("/acme/acct/AAAAAAAAAAAAAAAAAAAAAA");
    let jws =
        sign::request(Algorithm::Es256, &c.key, Signer::Kid(&ghost), Some(&nonce), &new_order, payload.as_bytes())
            .unwrap();
    assert_eq!(c.send(&new_order, &jws).problem(), "accountDoesNotExist");
}

#[test]
fn deactivated_accounts_and_rolled_over_keys_are_refused() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let kid = c.kid.clone().unwrap();

    // Key rollover (RFC 8555 §7.3.5), then the old key no longer signs for the account.
    let old_key = c.key.clone();
    let new_key = p256();
    let key_change = stack.url("/acme/key-change");
    let inner_payload = json!({"account": kid, "oldKey": c.jwk().to_json()}).to_string();
    let inner =
        sign::request(Algorithm::Es256, &new_key, Signer::Jwk, None, &key_change, inner_payload.as_bytes()).unwrap();
    let r = c.post(&key_change, Some(&inner));
    assert_eq!(r.status, 200, "{r:?}");
    let r = c.post(&kid, None);
    assert!(r.status >= 400, "the old key still works: {r:?}");
    assert_eq!(r.problem(), "malformed", "{r:?}");
    c.key = new_key;
    assert_eq!(c.post(&kid, None).status, 200, "the new key works");
    // The old key cannot register anew as the same account: it is free, so it makes a new one.
    let mut old = Client::new(&stack);
    old.key = old_key;
    assert_eq!(old.register().status, 201);

    // A key already in use cannot be rolled onto.
    let inner_payload = json!({"account": kid, "oldKey": c.jwk().to_json()}).to_string();
    let inner =
        sign::request(Algorithm::Es256, &old.key, Signer::Jwk, None, &key_change, inner_payload.as_bytes()).unwrap();
    let r = c.post(&key_change, Some(&inner));
    assert_eq!(r.status, 409, "{r:?}");
    // RFC 8555 §7.3.5: Location names the account that holds the key.
    assert_eq!(r.header("location").as_deref(), old.kid.as_deref(), "{r:?}");

    // onlyReturnExisting with an unknown key.
    let mut stranger = Client::new(&stack);
    let r = stranger.post(&stack.url("/acme/new-account"), Some(&json!({"onlyReturnExisting": true})));
    assert_eq!(r.problem(), "accountDoesNotExist", "{r:?}");
    // A bad contact.
    let r = stranger
        .post(&stack.url("/acme/new-account"), Some(&json!({"termsOfServiceAgreed": true, "contact": ["tel:+1555"]})));
    assert!(matches!(r.problem().as_str(), "unsupportedContact" | "invalidContact"), "{r:?}");

    // Deactivation (§7.3.6), then every request by the account is unauthorized.
    let r = c.post(&kid, Some(&json!({"status": "deactivated"})));
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("deactivated")), "{r:?}");
    let r = c.post(
        &stack.url("/acme/new-order"),
        Some(&json!({"identifiers": [{"type": "dns", "value": "x.signet.test"}]})),
    );
    assert_eq!((r.status, r.problem().as_str()), (403, "unauthorized"), "{r:?}");
    // newAccount signed by the deactivated account's key (jwk): refused too, not the account.
    c.kid = None;
    let r = c.new_account(&json!({"termsOfServiceAgreed": true}));
    assert_eq!((r.status, r.problem().as_str()), (403, "unauthorized"), "{r:?}");
    assert!(r.header("location").is_none(), "{r:?}");
    let r = c.new_account(&json!({"onlyReturnExisting": true}));
    assert_eq!((r.status, r.problem().as_str()), (403, "unauthorized"), "{r:?}");
}

#[test]
fn finalize_before_ready_foreign_names_and_revocation() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let (_, order) = c.new_order(&["f.signet.test"]);
    let r = c.finalize(&order, &Client::csr(&["f.signet.test"]));
    assert_eq!((r.status, r.problem().as_str()), (403, "orderNotReady"), "{r:?}");
    c.authorize_dns01(&order);
    let r = c.finalize(&order, &Client::csr(&["f.signet.test", "evil.example"]));
    assert_eq!(r.problem(), "badCSR", "{r:?}");
    assert!(r.json()["detail"].as_str().unwrap().contains("evil.example"), "{r:?}");
    // The order failed; a new one issues.
    let pem = c.issue(&["f.signet.test"]);
    let leaf = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap();
    let serial = serial_content(&leaf);
    let status = block_on(stack.pki.registry().status("demo", serial.clone())).unwrap();
    assert_eq!(status.state, CertState::Good, "ocspd knows the certificate");

    // Another account may not revoke it.
    let mut other = Client::new(&stack);
    other.register();
    let der = leaf.to_der().unwrap();
    let cert_b64 = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &der);
    let revoke = stack.url("/acme/revoke-cert");
    let r = other.post(&revoke, Some(&json!({"certificate": cert_b64})));
    assert_eq!(r.problem(), "unauthorized", "{r:?}");
    let r = c.post(&revoke, Some(&json!({"certificate": cert_b64, "reason": 7})));
    assert_eq!(r.problem(), "badRevocationReason", "{r:?}");
    let r = c.post(&revoke, Some(&json!({"certificate": cert_b64, "reason": 4})));
    assert_eq!(r.status, 200, "{r:?}");
    let status = block_on(stack.pki.registry().status("demo", serial)).unwrap();
    assert_eq!(status.state, CertState::Revoked, "revocation reached ocspd");
    let r = c.post(&revoke, Some(&json!({"certificate": cert_b64})));
    assert_eq!(r.problem(), "alreadyRevoked", "{r:?}");
}

#[test]
fn garbage_oversized_and_mistyped_bodies() {
    let stack = AcmeStack::start("max_body_bytes = 4096");
    let url = stack.url("/acme/new-order");
    let r = stack.post_raw(&url, "application/jose+json", b"{not json");
    assert_eq!((r.status, r.problem().as_str()), (400, "malformed"), "{r:?}");
    let r = stack.post_raw(&url, "application/jose+json", &[0xff, 0x00, 0x13]);
    assert_eq!((r.status, r.problem().as_str()), (400, "malformed"), "{r:?}");
    let r = stack.post_raw(&url, "application/jose+json", &vec![b'a'; 100_000]);
    assert_eq!((r.status, r.problem().as_str()), (413, "malformed"), "{r:?}");
    let r = stack.post_raw(&url, "application/json", b"{}");
    assert_eq!((r.status, r.problem().as_str()), (415, "malformed"), "{r:?}");
    let r = stack.post_raw(&url, "application/jose+json", br#"{"protected":"e30","payload":"","signature":""}"#);
    assert_eq!((r.status, r.problem().as_str()), (400, "malformed"), "{r:?}");
    let r = stack.post_raw(&stack.url("/acme/nowhere"), "application/jose+json", b"{}");
    assert_eq!(r.status, 404, "{r:?}");
    let (status, _, body) = stack.get("/acme/new-order");
    assert_eq!(status, 405, "{}", String::from_utf8_lossy(&body));
    // No resource at all: 404, whatever the method.
    for path in ["/acme/nowhere", "/acme/acct", "/nowhere", "/acme/order/x/y/z"] {
        let (status, _, body) = stack.get(path);
        assert_eq!(status, 404, "GET {path}: {}", String::from_utf8_lossy(&body));
    }
    let r = stack.post_raw(&stack.url("/nowhere"), "application/jose+json", b"{}");
    assert_eq!(r.status, 404, "{r:?}");
    let r = stack.post_raw(&stack.url("/directory"), "application/jose+json", b"{}");
    assert_eq!(r.status, 405, "{r:?}");
    for bad in ["!!!", "AAAA.BBBB", ".", "a.b.c"] {
        let (status, _, _) = stack.get(&format!("/acme/renewal-info/{bad}"));
        assert!(status == 400 || status == 404, "renewal-info/{bad}: {status}");
    }
    // Identifier problems come back as subproblems per identifier.
    let mut c = Client::new(&stack);
    c.register();
    let r = c.post(
        &url,
        Some(&json!({"identifiers": [{"type": "dns", "value": "bad name!"}, {"type": "email", "value": "a@b"}]})),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.json()["subproblems"].as_array().map(Vec::len), Some(2), "{r:?}");
    let r = c.post(&url, Some(&json!({"identifiers": [{"type": "dns", "value": "x.signet.test"}], "profile": "nope"})));
    assert_eq!(r.problem(), "invalidProfile", "{r:?}");
    // Invalid A-labels, public suffixes and wildcards directly under one: rejectedIdentifier.
    for name in ["xn--zz.signet.test", "xn--99999999.signet.test", "*.com", "*.co.uk", "*.github.io", "com", "co.uk"] {
        let r = c.post(&url, Some(&json!({"identifiers": [{"type": "dns", "value": name}]})));
        assert_eq!((r.status, r.problem().as_str()), (400, "rejectedIdentifier"), "{name}: {r:?}");
        assert_eq!(r.json()["subproblems"][0]["identifier"]["value"], name, "{r:?}");
    }
    // A valid A-label and a wildcard under a registrable domain are fine.
    for name in ["xn--bcher-kva.signet.test", "*.signet.test"] {
        let r = c.post(&url, Some(&json!({"identifiers": [{"type": "dns", "value": name}]})));
        assert_eq!(r.status, 201, "{name}: {r:?}");
    }
    assert!(stack.log().lines().all(|l| !l.contains("panicked")), "{}", stack.log());
}

#[test]
fn sigkill_mid_load_loses_no_certificate_a_client_received() {
    let mut stack = AcmeStack::start("");
    // (account URL, serial) of every certificate a client received.
    type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let received: Received = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let pid = nix::unistd::Pid::from_raw(stack.acmed.as_ref().unwrap().id() as i32);
    // Three clients issue in a loop until acmed dies under them.
    std::thread::scope(|s| {
        for i in 0..3 {
            let (stack, received, stop) = (&stack, received.clone(), stop.clone());
            s.spawn(move || {
                let mut c = Client::new(stack);
                c.register();
                let kid = c.kid.clone().unwrap();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let name = format!("k{i}-{n}.signet.test");
                    // Any step may fail once acmed is gone; only what came back counts.
                    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.issue(&[&name])));
                    match got {
                        Ok(pem) => {
                            let x = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap();
                            received.lock().unwrap().push((kid.clone(), serial_content(&x)));
                        }
                        Err(_) => break,
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs(3));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        stop.store(true, Ordering::SeqCst);
    });
    stack.kill9_acmed(); // reaps it
    let received = received.lock().unwrap().clone();
    assert!(received.len() >= 3, "too few issuances before the kill to mean anything: {}", received.len());
    stack.start_acmed();
    let serials: HashSet<&Vec<u8>> = received.iter().map(|(_, s)| s).collect();
    assert_eq!(serials.len(), received.len(), "a serial was reused");
    let registry = stack.pki.registry();
    for (_, serial) in &received {
        let st = block_on(registry.status("demo", serial.clone())).unwrap();
        assert_eq!(st.state, CertState::Good, "ocspd does not know {}", hex::encode(serial));
        // And acmed still has it: ARI answers for it.
        let ski = issuing_ski(&stack);
        let id = signet_acme::types::renewal_cert_id(&ski, serial);
        let (status, _, body) = stack.get(&format!("/acme/renewal-info/{id}"));
        assert_eq!(status, 200, "acmed lost {}: {}", hex::encode(serial), String::from_utf8_lossy(&body));
    }
    // And acmed still issues after the restart.
    let mut c = Client::new(&stack);
    c.register();
    c.issue(&["after.signet.test"]);
}

/// EAB keys made by the real `signetctl acme eab` over acmed's real admin
/// socket, then used (and misused) by newAccount.
#[test]
fn external_account_binding_with_keys_from_signetctl() {
    let mut stack = AcmeStack::start("external_account_required = true");
    let signetctl = |stack: &AcmeStack, args: &[&str]| run(stack.signetctl().args(args));
    let (_, _, body) = stack.get("/directory");
    let directory: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(directory["meta"]["externalAccountRequired"], true, "{directory}");

    // A key with a random id (JSON), and one with a chosen id (text, as an operator reads it).
    let (st, out, err) = signetctl(&stack, &["--json", "acme", "eab", "create", "--note", "customer 42"]);
    assert!(st.success(), "{out}{err}");
    let created: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kid = created["key_id"].as_str().unwrap().to_owned();
    let mac = URL_SAFE_NO_PAD.decode(created["hmac_key"].as_str().unwrap()).unwrap();
    assert_eq!((kid.len(), mac.len()), (22, 32), "{created}");
    let (st, out, err) = signetctl(&stack, &["acme", "eab", "create", "--key-id", "team-b"]);
    assert!(st.success(), "{out}{err}");
    let line =
        |prefix: &str| out.lines().find_map(|l| l.strip_prefix(prefix)).map(str::trim).unwrap_or_default().to_owned();
    assert_eq!(line("key id:"), "team-b", "{out}");
    let mac_b = URL_SAFE_NO_PAD.decode(line("hmac key:")).unwrap();
    assert!(out.contains(&format!("--eab-kid team-b --eab-hmac-key {}", line("hmac key:"))), "certbot's flags: {out}");
    assert!(out.contains(&format!("--eab --kid team-b --hmac {}", line("hmac key:"))), "lego's flags: {out}");
    // The MAC key is never shown again.
    let (st, out, _) = signetctl(&stack, &["--json", "acme", "eab", "show", "team-b"]);
    assert!(st.success() && !out.contains("hmac_key") && out.contains("\"bound_account\": null"), "{out}");

    // No binding, a wrong MAC key, an unknown key id: all refused.
    let mut c = Client::new(&stack);
    let r = c.new_account(&json!({"termsOfServiceAgreed": true}));
    assert_eq!((r.status, r.problem().as_str()), (403, "externalAccountRequired"), "{r:?}");
    let r = c.new_account(&json!({"externalAccountBinding": c.eab(&kid, &[7u8; 32])}));
    assert_eq!(r.problem(), "unauthorized", "{r:?}");
    let r = c.new_account(&json!({"externalAccountBinding": c.eab("no-such-kid", &mac)}));
    assert_eq!(r.problem(), "unauthorized", "{r:?}");
    assert!(r.json()["detail"].as_str().unwrap().contains("no-such-kid"), "{r:?}");

    // Bound: created, the account works, and the key names it.
    let r = c.new_account(&json!({"termsOfServiceAgreed": true, "externalAccountBinding": c.eab(&kid, &mac)}));
    assert_eq!(r.status, 201, "{r:?}");
    let account = c.kid.clone().unwrap();
    c.new_order(&["eab.signet.test"]);
    let (st, out, err) = signetctl(&stack, &["acme", "eab", "list"]);
    assert!(st.success(), "{err}");
    let row = out.lines().find(|l| l.starts_with(&kid)).unwrap_or_else(|| panic!("{kid} not listed: {out}"));
    assert!(row.contains(&account) && row.ends_with("customer 42"), "{out}");
    let unbound =
        |l: &str| l.split_whitespace().collect::<Vec<_>>().get(..3).is_some_and(|f| f[0] == "team-b" && f[2] == "-");
    assert!(out.lines().any(unbound), "team-b is unbound: {out}");

    // The same key for another account key: refused (a key binds one account).
    let mut d = Client::new(&stack);
    let r = d.new_account(&json!({"externalAccountBinding": d.eab(&kid, &mac)}));
    assert_eq!(r.problem(), "unauthorized", "{r:?}");
    assert!(r.json()["detail"].as_str().unwrap().contains("already bound"), "{r:?}");

    // A bound key is not deleted (exit 1); an unbound one is, and can no longer bind.
    let (st, _, err) = signetctl(&stack, &["acme", "eab", "delete", &kid]);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("already-exists") && err.contains("bound"), "{err}");
    let (st, out, err) = signetctl(&stack, &["acme", "eab", "delete", "team-b"]);
    assert!(st.success() && out.contains("deleted EAB key team-b"), "{out}{err}");
    let r = d.new_account(&json!({"externalAccountBinding": d.eab("team-b", &mac_b)}));
    assert_eq!(r.problem(), "unauthorized", "{r:?}");

    // Bad requests on the socket: typed errors, exit codes for scripts.
    let (st, _, err) = signetctl(&stack, &["acme", "eab", "show", "team-b"]);
    assert_eq!(st.code(), Some(4), "{err}");
    assert!(err.contains("not-found") && err.contains("team-b"), "{err}");
    assert_eq!(signetctl(&stack, &["acme", "eab", "delete", "never-was"]).0.code(), Some(4));
    let (st, _, err) = signetctl(&stack, &["acme", "eab", "create", "--key-id", "bad id!"]);
    assert_eq!(st.code(), Some(2), "{err}");
    let (st, _, err) = signetctl(&stack, &["acme", "eab", "create", "--key-id", &kid]);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("already-exists"), "{err}");

    // Another user reaches the socket (0666 here) but is not an admin; health is for anyone.
    let as_nobody = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin("signetctl"))
            .env("SIGNET_ACMED_SOCKET", &stack.admin_socket)
            .args(args);
        run(&mut c)
    };
    let (st, _, err) = as_nobody(&["acme", "eab", "list"]);
    assert_eq!(st.code(), Some(3), "{err}");
    assert!(err.contains("permission-denied"), "{err}");
    assert_eq!(as_nobody(&["acme", "eab", "create"]).0.code(), Some(3));
    let (st, out, err) = as_nobody(&["--json", "acme", "health"]);
    assert!(st.success(), "{err}");
    let h: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (h["accounts"].as_u64(), h["eab_keys"].as_u64(), h["external_account_required"].as_bool()),
        (Some(1), Some(1), Some(true)),
        "{h}"
    );

    // Acknowledged means committed: a key created just before a SIGKILL is there after it.
    let (st, _, err) = signetctl(&stack, &["acme", "eab", "create", "--key-id", "late"]);
    assert!(st.success(), "{err}");
    stack.kill9_acmed();
    stack.start_acmed();
    let (st, out, err) = signetctl(&stack, &["--json", "acme", "eab", "list"]);
    assert!(st.success(), "{err}");
    let keys: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = keys.iter().map(|k| k["key_id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"late") && ids.contains(&kid.as_str()) && !ids.contains(&"team-b"), "{out}");
    assert!(keys.iter().any(|k| k["bound_account"] == account.as_str()), "{out}");
}

/// `[admin]` is re-read on SIGHUP; a broken config keeps the old one.
#[test]
fn sighup_reloads_who_may_administer_acmed() {
    let stack = AcmeStack::start("");
    let as_nobody = || {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin("signetctl"))
            .env("SIGNET_ACMED_SOCKET", &stack.admin_socket)
            .args(["acme", "eab", "list"]);
        run(&mut c).0.code()
    };
    assert_eq!(as_nobody(), Some(3));
    let mut config = std::fs::read_to_string(&stack.config).unwrap();
    config.push_str("\n[admin]\nusers = [0, 65534]\n");
    std::fs::write(&stack.config, &config).unwrap();
    let pid = nix::unistd::Pid::from_raw(stack.acmed.as_ref().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while as_nobody() != Some(0) {
        assert!(std::time::Instant::now() < deadline, "not admitted after SIGHUP: {}", stack.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&stack.config, "this is = not [toml").unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(as_nobody(), Some(0));
    assert!(stack.log().contains("reload failed"), "{}", stack.log());
}

fn issuing_ski(stack: &AcmeStack) -> Vec<u8> {
    let pem = std::fs::read(stack.pki.ca("issuing.pem")).unwrap();
    let x = openssl::x509::X509::from_pem(&pem).unwrap();
    x.subject_key_id().unwrap().as_slice().to_vec()
}

/// The serial's DER INTEGER content octets (a leading zero when the top bit is set).
fn serial_content(x: &openssl::x509::X509) -> Vec<u8> {
    let mut v = x.serial_number().to_bn().unwrap().to_vec();
    if v.first().is_some_and(|b| *b >= 0x80) {
        v.insert(0, 0);
    }
    v
}

/// RFC 8659's climb, end to end: the first non-empty CAA RRset from the name
/// up decides (asked at every level at once, beside the challenge), a record
/// at the name itself overrides its parent's, and a refusal is a `caa`
/// problem on the authorization.
#[test]
fn caa_is_checked_up_the_tree_and_the_closest_rrset_decides() {
    let stack = AcmeStack::start("");
    stack.dns.add(
        "forbidden.signet.test CAA 0 issue \"other.example\"\n\
         parent-ok.signet.test CAA 0 issue \"signet.test\"\n\
         parent-no.signet.test CAA 0 issue \"other.example\"\n\
         allow.parent-no.signet.test CAA 0 issue \"signet.test\"\n\
         wild.signet.test CAA 0 issuewild \"other.example\"",
    );
    let mut c = Client::new(&stack);
    c.register();
    let refused = |a: &Value| {
        assert_eq!(a["status"], "invalid", "{a}");
        let ch = a["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "dns-01").unwrap();
        assert_eq!(ch["error"]["type"], "urn:ietf:params:acme:error:caa", "{a}");
    };
    refused(&c.dns01_outcome("forbidden.signet.test"));
    refused(&c.dns01_outcome("deep.leaf.parent-no.signet.test"));
    assert_eq!(c.dns01_outcome("leaf.parent-ok.signet.test")["status"], "valid");
    assert_eq!(c.dns01_outcome("allow.parent-no.signet.test")["status"], "valid");
    // issuewild binds wildcards only; no record anywhere: no restriction.
    assert_eq!(c.dns01_outcome("wild.signet.test")["status"], "valid");
    refused(&c.dns01_outcome("*.wild.signet.test"));
    assert_eq!(c.dns01_outcome("free.signet.test")["status"], "valid");
}

/// CAA answers are reused for their TTL (the Baseline Requirements let a CA
/// rely on them that long), empty ones for their SOA minimum: a record added above a
/// checked name is not seen until the parent's empty answer expires, and is
/// after. The DNS server's log shows the parent asked once within the TTL.
#[test]
fn caa_answers_are_reused_for_their_ttl() {
    const TTL: u64 = 6;
    let stack = AcmeStack::start_with_dns_ttl("ecdsa-p256", "", TTL as u32);
    let mut c = Client::new(&stack);
    c.register();
    let parent_asked = || {
        stack
            .dns
            .log()
            .lines()
            .filter(|l| l.contains("cached.signet.test.") && l.contains("CAA") && !l.contains(".cached.signet.test."))
            .count()
    };

    let first = Instant::now();
    assert_eq!(c.dns01_outcome("one.cached.signet.test")["status"], "valid");
    assert_eq!(parent_asked(), 1, "{}", stack.dns.log());
    stack.dns.add("cached.signet.test CAA 0 issue \"other.example\"");
    let second = c.dns01_outcome("two.cached.signet.test");
    if first.elapsed() < Duration::from_secs(TTL - 1) {
        // Within the TTL: the parent's empty answer still holds.
        assert_eq!(second["status"], "valid", "{second}");
        assert_eq!(parent_asked(), 1, "{}", stack.dns.log());
    }
    std::thread::sleep(Duration::from_secs(TTL + 1).saturating_sub(first.elapsed()));
    let third = c.dns01_outcome("three.cached.signet.test");
    assert_eq!(third["status"], "invalid", "{third}");
    let ch = third["challenges"].as_array().unwrap().iter().find(|c| c["type"] == "dns-01").unwrap();
    assert_eq!(ch["error"]["type"], "urn:ietf:params:acme:error:caa", "{third}");
}

/// An authorization reused past `caa_recheck_after_seconds` has its CAA
/// checked again at finalize (the Baseline Requirements want a check within
/// 8 hours of issuance): a record forbidding this CA, added after the
/// validation, fails the finalization with a `caa` problem naming the
/// identifier, and the order becomes invalid.
#[test]
fn finalize_checks_caa_again_for_an_old_authorization() {
    let stack = AcmeStack::start("caa_recheck_after_seconds = 1");
    let mut c = Client::new(&stack);
    c.register();
    c.issue(&["again.signet.test"]);
    stack.dns.add("again.signet.test CAA 0 issue \"other.example\"");
    std::thread::sleep(Duration::from_millis(1100));
    let (order_url, order) = c.new_order(&["again.signet.test"]);
    assert_eq!(order["status"], "ready", "the valid authorization is reused: {order}");
    let r = c.finalize(&order, &Client::csr(&["again.signet.test"]));
    assert_eq!((r.status, r.problem().as_str()), (403, "caa"), "{r:?}");
    let p = r.json();
    assert_eq!(p["subproblems"][0]["identifier"]["value"], "again.signet.test", "{p}");
    assert_eq!(c.post(&order_url, None).json()["status"], "invalid");
}

/// A rateLimited answer's Retry-After is the real wait (as its detail says),
/// and a serverInternal while ocspd is down carries one too (issue 22).
#[test]
fn retry_after_is_the_real_wait() {
    let mut stack = AcmeStack::start("[rate_limits]\norders_per_account_per_hour = 1");
    let mut c = Client::new(&stack);
    c.register();
    let pem = c.issue(&["wait.signet.test"]);
    let r = c.post(
        &stack.url("/acme/new-order"),
        Some(&json!({"identifiers": [{"type": "dns", "value": "again.signet.test"}]})),
    );
    assert_eq!((r.status, r.problem().as_str()), (429, "rateLimited"), "{r:?}");
    let secs: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&secs), "Retry-After: {secs}");
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.ends_with(&format!("retry after {secs} s")), "{detail} vs {secs}");

    // ocspd down: revocation cannot be recorded; try again later.
    let (key, kid) = (c.key.clone(), c.kid.clone());
    drop(c);
    stack.pki.kill9_ocspd();
    let mut c = Client::new(&stack);
    (c.key, c.kid) = (key.clone(), kid.clone());
    let der = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap().to_der().unwrap();
    let revoke = stack.url("/acme/revoke-cert");
    let jws = c.jws(&revoke, Some(&json!({"certificate": URL_SAFE_NO_PAD.encode(&der)})));
    let r = stack.post_raw(&revoke, "application/jose+json", jws.to_string().as_bytes());
    assert_eq!((r.status, r.problem().as_str()), (500, "serverInternal"), "{r:?}");
    let secs: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "Retry-After: {secs}");
    drop(c);
    stack.pki.start_ocspd();
    let mut c = Client::new(&stack);
    (c.key, c.kid) = (key, kid);
    let r = c.post(&revoke, Some(&json!({"certificate": URL_SAFE_NO_PAD.encode(&der)})));
    assert_eq!(r.status, 200, "revoked once ocspd is back: {r:?}");
}

/// RFC 8555 §7.6: an account holding valid authorizations for every
/// identifier of a certificate may revoke it, though another account ordered it.
#[test]
fn an_account_authorized_for_every_name_may_revoke() {
    let stack = AcmeStack::start("");
    let mut owner = Client::new(&stack);
    owner.register();
    let pem = owner.issue(&["one.signet.test", "two.signet.test"]);
    let leaf = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap();
    let cert = URL_SAFE_NO_PAD.encode(leaf.to_der().unwrap());
    let revoke = stack.url("/acme/revoke-cert");
    let mut other = Client::new(&stack);
    other.register();
    // Authorized for one name only: refused.
    let (_, order) = other.new_order(&["one.signet.test"]);
    other.authorize_dns01(&order);
    let r = other.post(&revoke, Some(&json!({"certificate": cert, "reason": 1})));
    assert_eq!((r.status, r.problem().as_str()), (403, "unauthorized"), "{r:?}");
    // For both: accepted.
    let (_, order) = other.new_order(&["two.signet.test"]);
    other.authorize_dns01(&order);
    let r = other.post(&revoke, Some(&json!({"certificate": cert, "reason": 1})));
    assert_eq!(r.status, 200, "{r:?}");
    let status = block_on(stack.pki.registry().status("demo", serial_content(&leaf))).unwrap();
    assert_eq!((status.state, status.reason), (CertState::Revoked, Some(signet_ipc::RevocationReason::KeyCompromise)));
    let r = owner.post(&revoke, Some(&json!({"certificate": cert})));
    assert_eq!(r.problem(), "alreadyRevoked", "{r:?}");
}

/// A challenge answers `processing` to its POST and reads `processing` until
/// its validation ends (here an http-01 fetch from a server that never
/// answers, until the 5 s validation timeout): never `pending` meanwhile.
#[test]
fn a_challenge_stays_processing_until_its_validation_ends() {
    let stack = AcmeStack::start("");
    // Accepts and holds every connection.
    let listener = std::net::TcpListener::bind(("127.0.0.1", stack.http01_port)).unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                held.lock().unwrap().push(conn);
            }
        });
    }
    let mut c = Client::new(&stack);
    c.register();
    let (_, authz, ch, _, _) = http01_order(&mut c, "slow.signet.test");
    let r = c.post(&ch, Some(&json!({})));
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("processing")), "{r:?}");
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    let last = loop {
        let r = c.post(&ch, None);
        let status = r.json()["status"].as_str().unwrap().to_owned();
        let a = c.post(&authz, None).json();
        let in_authz = a["challenges"].as_array().unwrap().iter().find(|x| x["url"] == ch.as_str()).cloned();
        seen.push((status.clone(), in_authz.map(|x| x["status"].clone())));
        if status != "processing" {
            break status;
        }
        assert!(r.header("retry-after").is_some(), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(last, "invalid", "{seen:?}");
    assert!(seen.len() > 3, "the validation ran for a while: {seen:?}");
    for (i, (status, in_authz)) in seen.iter().enumerate().take(seen.len() - 1) {
        assert_eq!(status, "processing", "{i}: {seen:?}");
        // The authorization, read after the challenge, shows it processing or already done.
        assert_ne!(in_authz.as_ref().and_then(|v| v.as_str()), Some("pending"), "{i}: {seen:?}");
    }
}

/// Twenty revokeCert requests for one certificate at once, with mixed
/// reasons (issue 22): exactly one 200 (plus at most one keyCompromise
/// raising a lesser reason, also 200), the rest `alreadyRevoked`; the reason
/// recorded is keyCompromise, and OCSP and the CRL agree.
#[test]
fn concurrent_revocations_through_acme_first_wins() {
    let stack = AcmeStack::start("");
    let mut c = Client::new(&stack);
    c.register();
    let pem = c.issue(&["race.signet.test"]);
    let leaf = openssl::x509::X509::from_pem(pem.as_bytes()).unwrap();
    let cert = URL_SAFE_NO_PAD.encode(leaf.to_der().unwrap());
    let revoke = stack.url("/acme/revoke-cert");
    let reasons = [4, 1, 0, 3, 5];
    let (key, kid) = (c.key.clone(), c.kid.clone());
    let outcomes: Vec<(u8, u16, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let (stack, key, kid, cert, revoke) = (&stack, key.clone(), kid.clone(), &cert, &revoke);
                s.spawn(move || {
                    let mut c = Client::new(stack);
                    (c.key, c.kid) = (key, kid);
                    let reason = reasons[i % reasons.len()];
                    let r = c.post(revoke, Some(&json!({"certificate": cert, "reason": reason})));
                    (reason, r.status, r.problem())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<_> = outcomes.iter().filter(|o| o.1 == 200).collect();
    let refused = outcomes.iter().filter(|o| o.2 == "alreadyRevoked").count();
    assert_eq!(won.len() + refused, 20, "{outcomes:?}");
    let raised = won.iter().filter(|o| o.0 == 1).count();
    assert!(won.len() == 1 || (won.len() == 2 && raised == 1), "{outcomes:?}");
    let serial = serial_content(&leaf);
    let status = block_on(stack.pki.registry().status("demo", serial.clone())).unwrap();
    assert_eq!(status.reason, Some(signet_ipc::RevocationReason::KeyCompromise), "{outcomes:?}");
    let leaf_path = stack.pki.dir.join("race.pem");
    std::fs::write(&leaf_path, leaf.to_pem().unwrap()).unwrap();
    let text = stack.pki.openssl_ocsp(&leaf_path, &["-no_nonce"]);
    assert!(text.contains("Reason: keyCompromise"), "{text}");
    let started = std::time::Instant::now();
    let serial_hex = hex::encode(&serial);
    while stack.pki.full_crl_reason(&serial_hex).as_deref() != Some("Key Compromise") {
        assert!(started.elapsed() < Duration::from_secs(3), "CRL: {:?}", stack.pki.full_crl_reason(&serial_hex));
        std::thread::sleep(Duration::from_millis(50));
    }
}
