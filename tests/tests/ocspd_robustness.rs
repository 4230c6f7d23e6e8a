//! ocspd at its edges (issue 22), end to end with a real signd and ocspd as in
//! `ocspd.rs`: media types in any case, weak `If-None-Match`, doubled leading
//! slashes, `unknown` kept out of HTTP caches, several certificates in one
//! request (`openssl ocsp -cert a -cert b`), a registry write on a full
//! filesystem, and on one that fails (issue 23 item 6).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use signet_ipc::{block_on, ErrorKind, IssuedCert};
use signet_tests::pki::Pki;
use signet_tests::run;
use signet_tests::smallfs::SmallFs;

/// The request file as a URL-encoded base64 GET path segment.
fn get_segment(req: &Path) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(std::fs::read(req).unwrap());
    b64.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D")
}

/// POSTs `req` with `content_type`; (status, headers, body).
fn post(pki: &Pki, req: &Path, content_type: &str) -> (u16, String, Vec<u8>) {
    pki.curl(&[
        "-H",
        &format!("Content-Type: {content_type}"),
        "--data-binary",
        &format!("@{}", req.display()),
        &pki.url("/ocsp"),
    ])
}

/// Checks a DER OCSPResponse with `openssl ocsp -respin`: signed by the
/// responder, and `cert` has `status`.
fn assert_response(pki: &Pki, der: &[u8], cert: &Path, status: &str) {
    let resp = pki.dir.join("checked-resp.der");
    std::fs::write(&resp, der).unwrap();
    let (_, out, err) = run(Command::new("openssl").arg("ocsp").args([
        "-respin",
        resp.to_str().unwrap(),
        "-issuer",
        pki.ca("issuing.pem").to_str().unwrap(),
        "-cert",
        cert.to_str().unwrap(),
        "-CAfile",
        pki.ca("chain.pem").to_str().unwrap(),
        "-no_nonce",
    ]));
    let text = format!("{out}{err}");
    assert!(text.contains("Response verify OK"), "not verified: {text}");
    assert!(text.contains(&format!("{}: {status}", cert.display())), "expected {status}: {text}");
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Issue 22 item 5: `Application/OCSP-Request` and parameters are the same media type.
#[test]
fn post_content_type_is_case_insensitive_and_parameters_are_ignored() {
    let pki = Pki::start();
    let (leaf, _) = pki.issue("ctype.test");
    let req = pki.request(&leaf, false, "ctype-req.der");
    for ct in [
        "Application/OCSP-Request",
        "APPLICATION/OCSP-REQUEST",
        "application/ocsp-request; charset=binary",
        "Application/Ocsp-Request ; foo=\"bar\"",
    ] {
        let (code, headers, body) = post(&pki, &req, ct);
        assert_eq!(code, 200, "{ct}: {headers}");
        assert_response(&pki, &body, &leaf, "good");
    }
    for ct in ["application/ocsp-requestx", "application/ocsp-response", "text/plain; x=application/ocsp-request"] {
        assert_eq!(post(&pki, &req, ct).0, 415, "{ct}");
    }
}

/// Issue 22 item 6: If-None-Match compares weakly, and takes lists and `*`.
#[test]
fn if_none_match_is_weak_and_takes_lists() {
    let pki = Pki::start();
    let (leaf, _) = pki.issue("etag.test");
    let path = format!("/ocsp/{}", get_segment(&pki.request(&leaf, false, "etag-req.der")));
    let (code, headers, _) = pki.http_get(&path);
    assert_eq!(code, 200);
    let etag = header(&headers, "etag").expect("an ETag").to_owned();
    let conditional = |value: &str| pki.curl(&["-H", &format!("If-None-Match: {value}"), &pki.url(&path)]);
    for value in [etag.clone(), format!("W/{etag}"), format!("\"nope\", W/{etag}"), "*".to_owned()] {
        let (code, headers, body) = conditional(&value);
        assert_eq!(code, 304, "{value}: {headers}");
        assert!(body.is_empty());
        assert_eq!(header(&headers, "etag"), Some(etag.as_str()), "{headers}");
    }
    // Two field lines, the second naming it.
    let (code, _, _) =
        pki.curl(&["-H", "If-None-Match: \"nope\"", "-H", &format!("If-None-Match: W/{etag}"), &pki.url(&path)]);
    assert_eq!(code, 304);
    for value in ["\"nope\"", "W/\"nope\""] {
        let (code, _, body) = conditional(value);
        assert_eq!(code, 200, "{value}");
        assert_response(&pki, &body, &leaf, "good");
    }
    // CRLs: the same rules.
    let (_, headers, _) = pki.http_get("/crl/demo.crl");
    let crl_etag = header(&headers, "etag").unwrap().to_owned();
    let (code, _, _) = pki.curl(&["-H", &format!("If-None-Match: W/{crl_etag}"), &pki.url("/crl/demo.crl")]);
    assert_eq!(code, 304);
}

/// Issue 22 item 7: `//ocsp/<b64>` (a proxy's doubled slash) is `/ocsp/<b64>`.
#[test]
fn doubled_leading_slashes_are_one() {
    let pki = Pki::start();
    let (leaf, _) = pki.issue("slash.test");
    let segment = get_segment(&pki.request(&leaf, false, "slash-req.der"));
    for path in [
        format!("//ocsp/{segment}"),
        format!("///ocsp/{segment}"),
        format!("/ocsp//{segment}"),
        format!("//ocsp//{segment}"),
        format!("//{segment}"),
    ] {
        let (code, headers, body) = pki.http_get(&path);
        assert_eq!(code, 200, "{path}: {headers}");
        assert_response(&pki, &body, &leaf, "good");
    }
    assert_eq!(pki.http_get("//crl/demo.crl").0, 200);
    assert_eq!(pki.http_get("//crl/demo/delta.crl").0, 200);
}

/// An OCSP request (no nonce) for a serial the CA never issued.
fn unknown_request(pki: &Pki) -> PathBuf {
    let req = pki.dir.join("unknown-req.der");
    let (st, _, err) = run(Command::new("openssl")
        .args(["ocsp", "-no_nonce", "-issuer"])
        .arg(pki.ca("issuing.pem"))
        .args(["-serial", "0x0123456789abcdef", "-reqout"])
        .arg(&req));
    assert!(st.success(), "{err}");
    req
}

/// Issue 22 item 8: `unknown` is signed afresh each time, so it is sent
/// uncacheable: `no-store` and no validators; a known certificate's answer
/// keeps the RFC 5019 headers.
#[test]
fn unknown_is_not_offered_to_http_caches() {
    let pki = Pki::start();
    let req = unknown_request(&pki);
    let path = format!("/ocsp/{}", get_segment(&req));
    for (code, headers, body) in [pki.http_get(&path), post(&pki, &req, "application/ocsp-request")] {
        assert_eq!(code, 200, "{headers}");
        assert!(!body.is_empty());
        assert_eq!(header(&headers, "cache-control"), Some("no-store"), "{headers}");
        for absent in ["etag", "last-modified", "expires"] {
            assert_eq!(header(&headers, absent), None, "{absent} in {headers}");
        }
    }
    // Nothing to revalidate against: `*` gets the full answer.
    let (code, _, body) = pki.curl(&["-H", "If-None-Match: *", &pki.url(&path)]);
    assert_eq!(code, 200);
    let text = {
        let f = pki.dir.join("unknown-resp.der");
        std::fs::write(&f, &body).unwrap();
        let (_, out, err) = run(Command::new("openssl")
            .args(["ocsp", "-no_nonce", "-respin"])
            .arg(&f)
            .arg("-issuer")
            .arg(pki.ca("issuing.pem"))
            .args(["-serial", "0x0123456789abcdef", "-CAfile"])
            .arg(pki.ca("chain.pem")));
        format!("{out}{err}")
    };
    assert!(text.contains("Response verify OK") && text.contains(": unknown"), "{text}");

    let (leaf, _) = pki.issue("known.test");
    let (_, headers, _) = pki.http_get(&format!("/ocsp/{}", get_segment(&pki.request(&leaf, false, "known.der"))));
    assert_eq!(header(&headers, "cache-control"), Some("max-age=3600, public, no-transform, must-revalidate"));
    assert!(header(&headers, "etag").is_some());
}

/// `openssl ocsp` with `args` (certificates, options) against ocspd, verifying
/// with the CA chain; the text output.
fn openssl_ocsp_several(pki: &Pki, args: &[&str]) -> String {
    let (_, out, err) = run(Command::new("openssl")
        .arg("ocsp")
        .arg("-issuer")
        .arg(pki.ca("issuing.pem"))
        .args(args)
        .args(["-url", &pki.url("/ocsp"), "-CAfile", pki.ca("chain.pem").to_str().unwrap()]));
    format!("{out}{err}")
}

/// Issue 22 item 9: `openssl ocsp -cert a -cert b ...` gets one response with
/// a SingleResponse for each (over POST with and without a nonce, and GET);
/// more than 16 is malformedRequest; certificates of two CAs, unauthorized.
#[test]
fn several_certificates_in_one_request_are_each_answered() {
    let pki = Pki::start();
    let (a, _) = pki.issue("a.test");
    let (b, b_serial) = pki.issue("b.test");
    let (c, _) = pki.issue("c.test");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &b_serial, "--reason", "key-compromise"]));
    assert!(st.success(), "{out}{err}");
    let (a_s, b_s, c_s) = (a.to_str().unwrap(), b.to_str().unwrap(), c.to_str().unwrap());
    for extra in [&[][..], &["-no_nonce"][..]] {
        let mut args = extra.to_vec();
        args.extend(["-cert", a_s, "-cert", b_s, "-sha256", "-cert", c_s, "-sha1", "-serial", "0x0123456789abcdef"]);
        let text = openssl_ocsp_several(&pki, &args);
        assert!(text.contains("Response verify OK") && !text.contains("WARNING"), "{text}");
        for want in [
            format!("{a_s}: good"),
            format!("{b_s}: revoked"),
            format!("{c_s}: good"),
            "0x0123456789abcdef: unknown".into(),
        ] {
            assert!(text.contains(&want), "{want}: {text}");
        }
        assert!(text.contains("Reason: keyCompromise"), "{text}");
    }

    // GET: signed afresh for each request, so not offered to HTTP caches
    // (an ETag that changes every time could never match).
    let both = pki.dir.join("both.der");
    let (st, _, err) = run(Command::new("openssl")
        .args(["ocsp", "-no_nonce", "-issuer"])
        .arg(pki.ca("issuing.pem"))
        .args(["-cert", a_s, "-cert", b_s, "-reqout"])
        .arg(&both));
    assert!(st.success(), "{err}");
    let (code, headers, body) = pki.http_get(&format!("//ocsp/{}", get_segment(&both)));
    assert_eq!(code, 200, "{headers}");
    assert_response(&pki, &body, &a, "good");
    assert_response(&pki, &body, &b, "revoked");
    assert_eq!(header(&headers, "cache-control"), Some("no-store"), "{headers}");
    assert_eq!(header(&headers, "etag"), None, "{headers}");

    // 16 are answered, 17 are malformedRequest.
    let serials: Vec<String> = (1..=17).map(|i| format!("0x40{i:02x}")).collect();
    let many = |n: usize| {
        let mut args = vec!["-no_nonce"];
        for s in &serials[..n] {
            args.extend(["-serial", s.as_str()]);
        }
        openssl_ocsp_several(&pki, &args)
    };
    let text = many(16);
    assert!(text.contains("Response verify OK") && text.matches(": unknown").count() == 16, "{text}");
    let text = many(17);
    assert!(text.contains("Responder Error: malformedrequest (1)"), "{text}");

    // One response has one signer: certificates of two CAs are unauthorized.
    let other = pki.dir.join("other-ca.pem");
    let (st, _, err) = run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=Other"])
        .arg("-keyout")
        .arg(pki.dir.join("other-ca.key"))
        .arg("-out")
        .arg(&other));
    assert!(st.success(), "{err}");
    let text =
        openssl_ocsp_several(&pki, &["-no_nonce", "-cert", a_s, "-issuer", other.to_str().unwrap(), "-serial", "7"]);
    assert!(text.contains("Responder Error: unauthorized (6)"), "{text}");

    // ocspd counted them.
    let (_, _, metrics) = pki.http_get("/metrics");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("ocsp_responses_total{daemon=\"ocspd\",outcome=\"several\"}"), "{metrics}");
}

/// Records new certificates until ocspd refuses one; returns the refusal.
fn record_until_refused(pki: &Pki, next: &mut u32) -> signet_ipc::IpcError {
    let registry = pki.registry();
    for _ in 0..5000 {
        *next += 1;
        let mut serial = vec![0x5a];
        serial.extend_from_slice(&next.to_be_bytes());
        let cert = IssuedCert { serial, not_after_unix_secs: 4_000_000_000, crl_shard: 0 };
        if let Err(e) = block_on(registry.record_issued("demo", cert)) {
            return e;
        }
    }
    panic!("5000 certificates recorded on a full filesystem");
}

const FULL_LINE: &str = "the store refuses writes for lack of space";
const WRITABLE_LINE: &str = "the store accepts writes again";

/// Issue 22 item 10: on a full filesystem registry writes are refused with
/// `unavailable` naming the cause, ocspd logs it once (not per call), keeps
/// serving what is signed, logs when writes succeed again, and logs anew when
/// the filesystem fills up again.
#[test]
fn a_full_filesystem_is_logged_once_and_writes_resume() {
    let mut pki = Pki::start();
    let (known, known_serial) = pki.issue("full.test");
    let known_path = format!("/ocsp/{}", get_segment(&pki.request(&known, false, "full-req.der")));
    pki.kill9_ocspd();
    let Some(fs) = SmallFs::over(&pki.dir.join("ocspd-state"), "8m") else { return };
    pki.start_ocspd();

    fs.fill();
    let mut next = 0;
    let e = record_until_refused(&pki, &mut next);
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert!(e.detail.contains("no space left"), "{e}");
    // More refusals, through the registry and signetctl: still one log line.
    let registry = pki.registry();
    for i in 0..20u8 {
        let cert =
            IssuedCert { serial: vec![0x6b, i, 1, 2, 3, 4, 5, 6], not_after_unix_secs: 4_000_000_000, crl_shard: 0 };
        let e = block_on(registry.record_issued("demo", cert)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    }
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &known_serial, "--reason", "superseded"]));
    assert!(!st.success() && format!("{out}{err}").contains("no space left"), "{out}{err}");
    // What is signed is still served.
    let (code, _, body) = pki.http_get(&known_path);
    assert_eq!(code, 200);
    assert_response(&pki, &body, &known, "good");
    assert_eq!(pki.http_get("/crl/demo.crl").0, 200);
    assert_eq!(pki.log().matches(FULL_LINE).count(), 1, "{}", pki.log());
    assert_eq!(pki.log().matches(WRITABLE_LINE).count(), 0, "{}", pki.log());

    // Space returns: writes succeed, which is logged once.
    fs.free();
    for i in 0..3u8 {
        let cert = IssuedCert { serial: vec![0x7c, i, 9], not_after_unix_secs: 4_000_000_000, crl_shard: 0 };
        block_on(registry.record_issued("demo", cert)).unwrap();
    }
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &known_serial, "--reason", "superseded"]));
    assert!(st.success(), "{out}{err}");
    assert_response(&pki, &pki.http_get(&known_path).2, &known, "revoked");
    assert_eq!(pki.log().matches(WRITABLE_LINE).count(), 1, "{}", pki.log());
    assert_eq!(pki.log().matches(FULL_LINE).count(), 1, "{}", pki.log());

    // Full again: logged again, once.
    fs.fill();
    let e = record_until_refused(&pki, &mut next);
    assert!(e.detail.contains("no space left"), "{e}");
    for _ in 0..5 {
        record_until_refused(&pki, &mut next);
    }
    assert_eq!(pki.log().matches(FULL_LINE).count(), 2, "{}", pki.log());
    pki.kill9_ocspd();
}

/// `openssl ocsp` verifies ocspd's answer for `cert` and finds `status`.
fn ocsp_says(pki: &Pki, cert: &Path, status: &str) {
    let text = pki.openssl_ocsp(cert, &[]);
    assert!(text.contains("Response verify OK"), "{text}");
    assert!(text.contains(&format!("{}: {status}", cert.display())), "expected {status}: {text}");
}

/// Issue 23 item 6: the filesystem under ocspd's store fails and turns read-only (a
/// loop-mounted ext4, as on a disk error): registry writes and revocations refused with
/// `unavailable` naming the cause, logged once; OCSP answers and the last CRL still
/// served (a new one cannot be stored, and its number must never repeat).
/// Restarted on it before the repair, ocspd starts on its store opened read-only and
/// answers as before. Checked, mounted again and ocspd restarted, every acknowledged
/// record and revocation is there.
#[test]
fn a_failed_filesystem_refuses_writes_serves_answers_and_keeps_what_was_acknowledged() {
    let mut pki = Pki::start();
    let (good, _) = pki.issue("good.failed.test");
    let (revoked, revoked_serial) = pki.issue("revoked.failed.test");
    pki.kill9_ocspd();
    let Some(fs) = SmallFs::ext4_over(&pki.dir.join("ocspd-state"), "32M") else { return };
    pki.start_ocspd();
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &revoked_serial, "--reason", "keyCompromise"]));
    assert!(st.success(), "{out}{err}");
    let (later, later_serial) = pki.issue("later.failed.test");
    ocsp_says(&pki, &later, "good");
    // The CRLs are rebuilt (and stored: their numbers must never repeat) moments after.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pki.full_crl_reason(&revoked_serial).is_none() {
        assert!(std::time::Instant::now() < deadline, "the CRL does not list the revocation");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    fs.fail();
    let causes = ["read-only", "has failed"];
    let registry = pki.registry();
    for i in 0..5u8 {
        let cert =
            IssuedCert { serial: vec![0x6b, i, 1, 2, 3, 4, 5, 6], not_after_unix_secs: 4_000_000_000, crl_shard: 0 };
        let e = block_on(registry.record_issued("demo", cert)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        assert!(causes.iter().any(|c| e.detail.contains(c)), "{e}");
    }
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &later_serial, "--reason", "superseded"]));
    assert!(!st.success() && causes.iter().any(|c| format!("{out}{err}").contains(c)), "{out}{err}");
    // What was acknowledged is served.
    ocsp_says(&pki, &good, "good");
    ocsp_says(&pki, &revoked, "revoked");
    ocsp_says(&pki, &later, "good");
    assert_eq!(pki.full_crl_reason(&revoked_serial).as_deref(), Some("Key Compromise"));
    assert_eq!(pki.log().matches("the store refuses writes").count(), 1, "logged once:\n{}", pki.log());
    assert!(!pki.log().contains("panicked"), "{}", pki.log());

    // Restarted on the failed filesystem, still read-only: ocspd starts on its store
    // opened read-only, answers and serves the CRL as before, and refuses writes.
    pki.kill9_ocspd();
    pki.start_ocspd();
    ocsp_says(&pki, &good, "good");
    ocsp_says(&pki, &revoked, "revoked");
    ocsp_says(&pki, &later, "good");
    assert_eq!(pki.full_crl_reason(&revoked_serial).as_deref(), Some("Key Compromise"));
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &later_serial, "--reason", "superseded"]));
    assert!(!st.success() && format!("{out}{err}").contains("read-only"), "{out}{err}");
    assert!(pki.log().contains("the store cannot be written"), "{}", pki.log());
    assert!(!pki.log().contains("panicked"), "{}", pki.log());

    // Checked, mounted again, ocspd restarted: all of it is there, and it takes writes.
    pki.kill9_ocspd();
    fs.repair();
    pki.start_ocspd();
    ocsp_says(&pki, &good, "good");
    ocsp_says(&pki, &revoked, "revoked");
    ocsp_says(&pki, &later, "good");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &later_serial, "--reason", "superseded"]));
    assert!(st.success(), "{out}{err}");
    ocsp_says(&pki, &later, "revoked");
}
