//! ocspd end to end: a real signd holding a CA made by `signetctl ca init`, a
//! real ocspd, certificates issued with `signetctl cert issue`, and every
//! answer checked by the system `openssl` (ocsp, crl, verify) and by Python
//! `cryptography`.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use signet_ipc::{block_on, CertState, ErrorKind, IssuedCert, Revocation, RevocationReason};
use signet_tests::pki::{Pki, SHARDS};
use signet_tests::{bin, run, Backend};

/// (standard base64 of the request file, the same URL-encoded for a GET path).
fn get_encodings(req: &Path) -> (String, String) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(std::fs::read(req).unwrap());
    let encoded = b64.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D");
    (b64, encoded)
}

fn assert_status(text: &str, cert: &Path, status: &str) {
    assert!(text.contains("Response verify OK"), "not verified: {text}");
    assert!(text.contains(&format!("{}: {status}", cert.display())), "expected {status}: {text}");
}

#[test]
fn openssl_ocsp_good_revoked_unknown_over_post_and_get() {
    let pki = Pki::start();
    let (good, _) = pki.issue("good.test");
    let (bad, bad_serial) = pki.issue("bad.test");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &bad_serial, "--reason", "key-compromise"]));
    assert!(st.success(), "{out}{err}");

    // POST, with the nonce openssl sends by default, and without.
    for extra in [&[][..], &["-no_nonce"][..], &["-sha256"][..]] {
        assert_status(&pki.openssl_ocsp(&good, extra), &good, "good");
        let text = pki.openssl_ocsp(&bad, extra);
        assert_status(&text, &bad, "revoked");
        assert!(text.contains("Reason: keyCompromise"), "{text}");
    }
    // A nonce is echoed (openssl checks it and would say "WARNING: no nonce").
    let text = pki.openssl_ocsp(&good, &["-resp_text"]);
    assert!(text.contains("OCSP Nonce") && !text.contains("WARNING"), "{text}");

    // Unknown: a serial this CA never issued.
    let (_, out, err) = run(Command::new("openssl").arg("ocsp").args([
        "-issuer",
        pki.ca("issuing.pem").to_str().unwrap(),
        "-serial",
        "0x0123456789abcdef",
        "-url",
        &pki.url("/ocsp"),
        "-CAfile",
        pki.ca("chain.pem").to_str().unwrap(),
    ]));
    let text = format!("{out}{err}");
    assert!(text.contains("Response verify OK") && text.contains(": unknown"), "{text}");

    // GET: base64 of the DER request, URL-encoded, on the path.
    for (cert, status) in [(&good, "good"), (&bad, "revoked")] {
        let (b64, encoded) = get_encodings(&pki.request(cert, false, "req.der"));
        for path in [format!("/ocsp/{encoded}"), format!("/{encoded}"), format!("/ocsp/{b64}")] {
            let (code, headers, body) = pki.http_get(&path);
            assert_eq!(code, 200, "{path}: {headers}");
            assert!(headers.to_lowercase().contains("content-type: application/ocsp-response"), "{headers}");
            let resp = pki.dir.join("resp.der");
            std::fs::write(&resp, &body).unwrap();
            let (_, out, err) = run(Command::new("openssl").arg("ocsp").args([
                "-respin",
                resp.to_str().unwrap(),
                "-issuer",
                pki.ca("issuing.pem").to_str().unwrap(),
                "-cert",
                cert.to_str().unwrap(),
                "-CAfile",
                pki.ca("chain.pem").to_str().unwrap(),
            ]));
            assert_status(&format!("{out}{err}"), cert, status);
        }
    }
}

#[test]
fn caching_headers_follow_rfc5019() {
    let pki = Pki::start();
    let (good, _) = pki.issue("cache.test");
    let path = format!("/ocsp/{}", get_encodings(&pki.request(&good, false, "req.der")).1);
    let (code, headers, _) = pki.http_get(&path);
    assert_eq!(code, 200);
    let h = headers.to_lowercase();
    for want in [
        "cache-control: max-age=3600, public, no-transform, must-revalidate",
        "etag: \"",
        "last-modified: ",
        "expires: ",
    ] {
        assert!(h.contains(want), "missing {want:?} in {headers}");
    }
    let etag = headers
        .lines()
        .find(|l| l.to_lowercase().starts_with("etag:"))
        .unwrap()
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .to_owned();
    let (code, _, body) = pki.curl(&["-H", &format!("If-None-Match: {etag}"), &pki.url(&path)]);
    assert_eq!(code, 304);
    assert!(body.is_empty());

    // A nonce makes a single-use answer.
    let (_, headers, _) = pki.curl(&[
        "-H",
        "Content-Type: application/ocsp-request",
        "--data-binary",
        &format!("@{}", nonce_request(&pki, &good).display()),
        &pki.url("/ocsp"),
    ]);
    assert!(headers.to_lowercase().contains("cache-control: no-store"), "{headers}");

    // CRLs carry the same headers.
    let (code, headers, _) = pki.http_get("/crl/demo.crl");
    assert_eq!(code, 200);
    let h = headers.to_lowercase();
    assert!(
        h.contains("content-type: application/pkix-crl") && h.contains("etag: ") && h.contains("expires: "),
        "{headers}"
    );
}

fn nonce_request(pki: &Pki, cert: &Path) -> PathBuf {
    pki.request(cert, true, "nonce-req.der")
}

/// Reads every CRL over HTTP and checks it with openssl and Python.
fn crl_files(pki: &Pki) -> Vec<(String, PathBuf)> {
    let mut paths = vec!["/crl/demo.crl".to_owned(), "/crl/demo/delta.crl".to_owned()];
    paths.extend((0..SHARDS).map(|n| format!("/crl/demo/{n}.crl")));
    paths
        .into_iter()
        .map(|p| {
            let (code, headers, body) = pki.http_get(&p);
            assert_eq!(code, 200, "{p}: {headers}");
            let der = pki.dir.join(p.trim_start_matches('/').replace('/', "_"));
            std::fs::write(&der, body).unwrap();
            (p, der)
        })
        .collect()
}

fn to_pem(der: &Path) -> PathBuf {
    let pem = der.with_extension("pem");
    let (st, _, err) =
        run(Command::new("openssl").args(["crl", "-inform", "DER", "-in"]).arg(der).arg("-out").arg(&pem));
    assert!(st.success(), "{err}");
    pem
}

#[test]
fn revocation_reaches_every_crl_within_a_second() {
    let pki = Pki::start();
    let (leaf, serial) = pki.issue("crl.test");
    let (other, _) = pki.issue("other.test");
    let status: serde_json::Value =
        serde_json::from_str(&run(pki.signetctl().args(["--json", "cert", "status", &serial])).1).unwrap();
    let shard = status["crl_shard"].as_u64().unwrap();
    let started = Instant::now();
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &serial, "--reason", "superseded"]));
    assert!(st.success(), "{out}{err}");
    // Visible in the full CRL, the certificate's shard and the delta within a second.
    let wanted = [format!("/crl/demo/{shard}.crl"), "/crl/demo.crl".into(), "/crl/demo/delta.crl".into()];
    loop {
        let listed = wanted.iter().all(|p| {
            let der = pki.dir.join("probe.crl");
            std::fs::write(&der, pki.http_get(p).2).unwrap();
            let (_, text, _) =
                run(Command::new("openssl").args(["crl", "-inform", "DER", "-noout", "-text", "-in"]).arg(&der));
            text.to_lowercase().contains(&serial)
        });
        if listed {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(1), "revocation not in every CRL after 1 s");
        std::thread::sleep(Duration::from_millis(25));
    }

    let chain = pki.ca("chain.pem");
    let root = pki.ca("root.pem");
    let issuing = pki.ca("issuing.pem");
    for (path, der) in crl_files(&pki) {
        // Signature by the issuing CA.
        let (_, out, err) = run(Command::new("openssl")
            .args(["crl", "-inform", "DER", "-noout", "-CAfile"])
            .arg(&chain)
            .arg("-in")
            .arg(&der));
        assert!(format!("{out}{err}").contains("verify OK"), "{path}: {out}{err}");
        let (_, text, _) =
            run(Command::new("openssl").args(["crl", "-inform", "DER", "-noout", "-text", "-in"]).arg(&der));
        match path.as_str() {
            "/crl/demo/delta.crl" => assert!(text.contains("Delta CRL Indicator: critical"), "{text}"),
            "/crl/demo.crl" => assert!(!text.contains("Issuing Distribution Point"), "{text}"),
            p => {
                assert!(text.contains("Issuing Distribution Point: critical"), "{p}: {text}");
                assert!(text.contains(&pki.url(p)), "{p}: {text}");
            }
        }
        // The full CRL, the delta and the certificate's own shard list it, with
        // its reason; the other shards do not.
        let covers =
            path == "/crl/demo.crl" || path == "/crl/demo/delta.crl" || path == format!("/crl/demo/{shard}.crl");
        assert_eq!(text.to_lowercase().contains(&serial), covers, "{path}: {text}");
        if covers {
            assert!(text.contains("Superseded"), "{path}: {text}");
        }
    }
    let files: std::collections::HashMap<String, PathBuf> = crl_files(&pki).into_iter().collect();
    // openssl verify -crl_check: revoked with the full CRL, with its shard, and with base + delta.
    let full = to_pem(&files["/crl/demo.crl"]);
    let shard_crl = to_pem(&files[&format!("/crl/demo/{shard}.crl")]);
    let delta = to_pem(&files["/crl/demo/delta.crl"]);
    for crls in [vec![&full], vec![&shard_crl], vec![&full, &delta]] {
        let mut cmd = Command::new("openssl");
        cmd.args(["verify", "-crl_check", "-use_deltas", "-CAfile"]).arg(&root).arg("-untrusted").arg(&issuing);
        for c in &crls {
            cmd.arg("-CRLfile").arg(c);
        }
        let (_, out, err) = run(cmd.arg(&leaf));
        assert!(format!("{out}{err}").contains("certificate revoked"), "{crls:?}: {out}{err}");
        let mut cmd = Command::new("openssl");
        cmd.args(["verify", "-crl_check", "-CAfile"])
            .arg(&root)
            .arg("-untrusted")
            .arg(&issuing)
            .arg("-CRLfile")
            .arg(&full);
        let (st, out, err) = run(cmd.arg(&other));
        assert!(st.success(), "the other certificate must verify: {out}{err}");
    }

    // Python cryptography, strictly: signatures, numbers, the entry and its reason.
    let script = r#"
import sys
from cryptography import x509
issuing = x509.load_pem_x509_certificate(open(sys.argv[1], 'rb').read())
serial = int(sys.argv[2], 16)
for path in sys.argv[3:]:
    crl = x509.load_der_x509_crl(open(path, 'rb').read())
    assert crl.is_signature_valid(issuing.public_key()), path
    crl.extensions.get_extension_for_class(x509.CRLNumber)
    entry = crl.get_revoked_certificate_by_serial_number(serial)
    if entry is not None:
        reason = entry.extensions.get_extension_for_class(x509.CRLReason).value.reason
        assert reason == x509.ReasonFlags.superseded, reason
    print(path, len(list(crl)))
"#;
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]).arg(&issuing).arg(&serial);
    for p in files.values() {
        cmd.arg(p);
    }
    let (st, out, err) = run(&mut cmd);
    assert!(st.success(), "cryptography: {out}{err}");
}

#[test]
fn python_cryptography_parses_responses() {
    let pki = Pki::start();
    let (leaf, serial) = pki.issue("py.test");
    run(pki.signetctl().args(["cert", "revoke", &serial, "--reason", "cessation-of-operation"]));
    let req = nonce_request(&pki, &leaf);
    let (_, _, body) = pki.curl(&[
        "-H",
        "Content-Type: application/ocsp-request",
        "--data-binary",
        &format!("@{}", req.display()),
        &pki.url("/ocsp"),
    ]);
    let resp = pki.dir.join("py-resp.der");
    std::fs::write(&resp, body).unwrap();
    let script = r#"
import sys
from cryptography import x509
from cryptography.x509 import ocsp
r = ocsp.load_der_ocsp_response(open(sys.argv[1], 'rb').read())
assert r.response_status == ocsp.OCSPResponseStatus.SUCCESSFUL
assert r.certificate_status == ocsp.OCSPCertStatus.REVOKED, r.certificate_status
assert r.revocation_reason == x509.ReasonFlags.cessation_of_operation
assert r.serial_number == int(sys.argv[2], 16)
responder = r.certificates[0]
responder.public_key().verify(r.signature, r.tbs_response_bytes, __import__('cryptography.hazmat.primitives.asymmetric.ec', fromlist=['ECDSA']).ECDSA(r.signature_hash_algorithm))
r.extensions.get_extension_for_class(x509.OCSPNonce)
print("ok")
"#;
    let (st, out, err) = run(Command::new("python3").args(["-c", script]).arg(&resp).arg(&serial));
    assert!(st.success() && out.contains("ok"), "{out}{err}");
}

#[test]
fn bad_requests_get_malformed_request_or_http_errors() {
    let pki = Pki::start();
    const MALFORMED: &[u8] = &[0x30, 0x03, 0x0a, 0x01, 0x01];
    const UNAUTHORIZED: &[u8] = &[0x30, 0x03, 0x0a, 0x01, 0x06];
    let post = |body: &[u8]| {
        let f = pki.dir.join("bad.der");
        std::fs::write(&f, body).unwrap();
        pki.curl(&[
            "-H",
            "Content-Type: application/ocsp-request",
            "--data-binary",
            &format!("@{}", f.display()),
            &pki.url("/ocsp"),
        ])
    };
    for body in [&b""[..], b"garbage", &[0x30, 0x80], &[0x30, 0x03, 0x02, 0x01], &[0x30; 300]] {
        let (code, _, resp) = post(body);
        assert_eq!((code, resp.as_slice()), (200, MALFORMED), "{body:?}");
    }
    for path in ["/ocsp/!!!", "/ocsp/", "/MEow%ZZ", "/ocsp/AAAA"] {
        let (code, _, resp) = pki.http_get(path);
        assert_eq!((code, resp.as_slice()), (200, MALFORMED), "{path}");
    }
    // A CA ocspd does not serve: unauthorized.
    let other = pki.dir.join("other-ca.pem");
    let key = pki.dir.join("other-ca.key");
    run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=Other"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&other));
    let req = pki.dir.join("foreign.der");
    let (st, _, err) = run(Command::new("openssl")
        .args(["ocsp", "-no_nonce", "-issuer"])
        .arg(&other)
        .args(["-serial", "7", "-reqout"])
        .arg(&req));
    assert!(st.success(), "{err}");
    let (code, _, resp) = post(&std::fs::read(&req).unwrap());
    assert_eq!((code, resp.as_slice()), (200, UNAUTHORIZED));
    // Plain HTTP errors where OCSP does not apply.
    let (code, _, _) = pki.curl(&["-X", "PUT", &pki.url("/ocsp")]);
    assert_eq!(code, 405);
    let (code, _, _) = pki.curl(&["-H", "Content-Type: text/plain", "--data-binary", "x", &pki.url("/ocsp")]);
    assert_eq!(code, 415);
    let big = pki.dir.join("big.der");
    std::fs::write(&big, vec![0x30; 100_000]).unwrap();
    let (code, _, _) = pki.curl(&[
        "-H",
        "Content-Type: application/ocsp-request",
        "--data-binary",
        &format!("@{}", big.display()),
        &pki.url("/ocsp"),
    ]);
    assert_eq!(code, 413);
    for path in ["/crl/nope.crl", "/crl/demo/9.crl", "/crl/demo/01.crl", "/crl/demo/x.crl", "/crl/demo"] {
        assert_eq!(pki.http_get(path).0, 404, "{path}");
    }
    // Still serving.
    let (leaf, _) = pki.issue("after.test");
    assert_status(&pki.openssl_ocsp(&leaf, &[]), &leaf, "good");
}

#[test]
fn registry_checks_callers_and_arguments() {
    let pki = Pki::start();
    let registry = pki.registry();
    // Unknown serials, a shard out of range, a bad reason.
    let e = block_on(registry.revoke(
        "demo",
        Revocation { serial: vec![1, 2, 3], reason: RevocationReason::Superseded, revoked_unix_secs: 0 },
    ))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = block_on(registry.record_issued(
        "demo",
        IssuedCert { serial: vec![9; 8], not_after_unix_secs: 2_000_000_000, crl_shard: SHARDS },
    ))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    let e =
        block_on(registry.record_issued("demo", IssuedCert { serial: vec![], not_after_unix_secs: 1, crl_shard: 0 }))
            .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    let e = block_on(registry.status("nope", vec![1])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // Recording is idempotent; different data for the same serial is refused.
    let cert = IssuedCert { serial: vec![0x11; 8], not_after_unix_secs: 2_000_000_000, crl_shard: 1 };
    assert_eq!(block_on(registry.record_issued("demo", cert.clone())).unwrap().state, CertState::Good);
    assert_eq!(block_on(registry.record_issued("demo", cert.clone())).unwrap().state, CertState::Good);
    let e = block_on(registry.record_issued("demo", IssuedCert { crl_shard: 0, ..cert.clone() })).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}");
    // Revoking twice keeps the first time; the reason may become keyCompromise.
    let first = block_on(registry.revoke(
        "demo",
        Revocation { serial: cert.serial.clone(), reason: RevocationReason::Superseded, revoked_unix_secs: 0 },
    ))
    .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let second = block_on(registry.revoke(
        "demo",
        Revocation { serial: cert.serial.clone(), reason: RevocationReason::KeyCompromise, revoked_unix_secs: 0 },
    ))
    .unwrap();
    assert_eq!(first.revoked_unix_secs, second.revoked_unix_secs);
    assert_eq!(second.reason, Some(RevocationReason::KeyCompromise));

    // Another user may connect (the socket is 0666 here) but is no registrar.
    let (st, out, err) = run(Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin("signetctl"))
        .env("SIGNET_SIGND_SOCKET", &pki.signd.socket)
        .env("SIGNET_OCSPD_SOCKET", &pki.ocspd_socket)
        .args(["cert", "status", "11111111"]));
    assert_eq!(st.code(), Some(3), "{out}{err}");
    assert!(err.contains("not a registrar"), "{err}");
}

#[test]
fn acknowledged_revocation_survives_sigkill() {
    let mut pki = Pki::start();
    let (leaf, serial) = pki.issue("kill.test");
    let registry = pki.registry();
    let serial_bytes = hex::decode(&serial).unwrap();
    let st = block_on(registry.revoke(
        "demo",
        Revocation { serial: serial_bytes.clone(), reason: RevocationReason::KeyCompromise, revoked_unix_secs: 0 },
    ))
    .unwrap();
    assert_eq!(st.state, CertState::Revoked);
    // Killed the moment the revocation is acknowledged.
    pki.kill9_ocspd();
    pki.start_ocspd();
    let again = block_on(pki.registry().status("demo", serial_bytes)).unwrap();
    assert_eq!(again.state, CertState::Revoked);
    assert_eq!(again.reason, Some(RevocationReason::KeyCompromise));
    let text = pki.openssl_ocsp(&leaf, &["-no_nonce"]);
    assert_status(&text, &leaf, "revoked");
}

#[test]
fn nonce_can_be_ignored_by_config() {
    let pki = Pki::start_with("nonce = \"ignore\"");
    let (leaf, _) = pki.issue("nonce.test");
    // openssl sends a nonce; ocspd answers from its cache without one.
    let text = pki.openssl_ocsp(&leaf, &[]);
    assert!(text.contains("WARNING: no nonce in response"), "{text}");
    assert_status(&text, &leaf, "good");
}

#[test]
fn with_signd_down_cached_answers_continue_and_fresh_ones_say_try_later() {
    let mut pki = Pki::start();
    let (leaf, _) = pki.issue("down.test");
    pki.signd.kill9();
    // Pre-signed: still served, and still verifies.
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
    // A nonce needs a fresh signature: tryLater (3), at once, and ocspd lives on.
    const TRY_LATER: &[u8] = &[0x30, 0x03, 0x0a, 0x01, 0x03];
    let req = nonce_request(&pki, &leaf);
    let (code, _, body) = pki.curl(&[
        "-H",
        "Content-Type: application/ocsp-request",
        "--data-binary",
        &format!("@{}", req.display()),
        &pki.url("/ocsp"),
    ]);
    assert_eq!((code, body.as_slice()), (200, TRY_LATER));
    // signd back: fresh signatures work again without restarting ocspd.
    pki.signd.restart();
    let text = pki.openssl_ocsp(&leaf, &[]);
    // openssl sends a nonce and warns when it does not come back.
    assert!(!text.contains("WARNING"), "{text}");
    assert_status(&text, &leaf, "good");
}

#[test]
fn a_client_over_its_fresh_signature_rate_hears_try_later() {
    let mut pki = Pki::start();
    // One fresh signature a second per client, two at once.
    pki.kill9_ocspd();
    let config = std::fs::read_to_string(&pki.ocspd_config).unwrap();
    let limited =
        config.replacen("[issuers.demo]", "fresh_per_client = { per_second = 1, burst = 2 }\n[issuers.demo]", 1);
    std::fs::write(&pki.ocspd_config, limited).unwrap();
    pki.start_ocspd();
    let (leaf, _) = pki.issue("limited.test");
    const TRY_LATER: &[u8] = &[0x30, 0x03, 0x0a, 0x01, 0x03];
    let req = nonce_request(&pki, &leaf);
    let post = || {
        let (code, _, body) = pki.curl(&[
            "-H",
            "Content-Type: application/ocsp-request",
            "--data-binary",
            &format!("@{}", req.display()),
            &pki.url("/ocsp"),
        ]);
        assert_eq!(code, 200);
        body
    };
    // The burst is signed (a successful OCSPResponse is longer than an error
    // status); then tryLater, since these requests come far faster than the
    // one token a second that refills the bucket.
    for i in 0..2 {
        let body = post();
        assert!(body.len() > TRY_LATER.len(), "request {i} of the burst: {body:?}");
    }
    let limited = (0..20).map(|_| post()).any(|b| b == TRY_LATER);
    assert!(limited, "no tryLater after the burst: {}", pki.log());
    // Pre-signed answers are not limited, and say good.
    for _ in 0..5 {
        assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
    }
    // The bucket refills: after a second, a fresh signature again.
    std::thread::sleep(Duration::from_millis(1100));
    let text = pki.openssl_ocsp(&leaf, &[]);
    assert!(!text.contains("WARNING") && !text.contains("tryLater"), "{text}");
    assert_status(&text, &leaf, "good");
}

#[test]
fn sighup_reloads_the_registrars() {
    let pki = Pki::start();
    let as_nobody = || {
        run(Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin("signetctl"))
            .env("SIGNET_SIGND_SOCKET", &pki.signd.socket)
            .env("SIGNET_OCSPD_SOCKET", &pki.ocspd_socket)
            .args(["cert", "status", "0a0b0c"]))
    };
    let (st, _, err) = as_nobody();
    assert_eq!(st.code(), Some(3), "{err}");
    // Add nobody to the registrars and send SIGHUP.
    let config = std::fs::read_to_string(&pki.ocspd_config).unwrap();
    let uid = nix::unistd::getuid().as_raw();
    let widened = config.replace(&format!("users = [{uid}]"), &format!("users = [{uid}, 65534]"));
    assert_ne!(config, widened);
    std::fs::write(&pki.ocspd_config, widened).unwrap();
    let pid = nix::unistd::Pid::from_raw(pki.ocspd.as_ref().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    // Admitted now: the serial is simply unknown (exit code 4).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (st, out, err) = as_nobody();
        if st.code() == Some(4) {
            assert!(out.contains("unknown"), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "not admitted after SIGHUP: {out}{err}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A broken config on the next SIGHUP keeps the current registrars.
    std::fs::write(&pki.ocspd_config, "this is = not [toml").unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(as_nobody().0.code(), Some(4));
}

/// `ca init` with CA keys on every backend, including ML-DSA and an HSM
/// (SoftHSM2 through NSS): certificates issue, and ocspd's responses and CRLs
/// verify with OpenSSL 3.5 (the vendored one, which knows ML-DSA).
#[test]
fn ca_keys_on_every_backend_and_ml_dsa() {
    use openssl::ocsp::{OcspCertId, OcspFlag, OcspRequest, OcspResponse};
    use openssl::stack::Stack;
    use openssl::x509::store::X509StoreBuilder;
    use openssl::x509::{X509Crl, X509};
    let pem = |p: &Path| X509::from_pem(&std::fs::read(p).unwrap()).unwrap();
    for (backend, algorithm) in
        [(Backend::Openssl, "ml-dsa-65"), (Backend::NssSoftokn, "ecdsa-p384"), (Backend::NssSofthsm, "ecdsa-p256")]
    {
        let what = format!("{algorithm} on {backend:?}");
        let pki = Pki::start_full(backend, algorithm, "");
        let (leaf_path, _) = pki.issue("backend.test");
        let (root, issuing, leaf) = (pem(&pki.ca("root.pem")), pem(&pki.ca("issuing.pem")), pem(&leaf_path));
        assert!(issuing.verify(&root.public_key().unwrap()).unwrap(), "{what}");
        assert!(leaf.verify(&issuing.public_key().unwrap()).unwrap(), "{what}");

        // OCSP over POST, verified against the root with OpenSSL's own OCSP code.
        let id = OcspCertId::from_cert(openssl::hash::MessageDigest::sha1(), &leaf, &issuing).unwrap();
        let mut req = OcspRequest::new().unwrap();
        req.add_id(id).unwrap();
        let req_path = pki.dir.join("backend-req.der");
        std::fs::write(&req_path, req.to_der().unwrap()).unwrap();
        let (code, _, body) = pki.curl(&[
            "-H",
            "Content-Type: application/ocsp-request",
            "--data-binary",
            &format!("@{}", req_path.display()),
            &pki.url("/ocsp"),
        ]);
        assert_eq!(code, 200, "{what}");
        let basic = OcspResponse::from_der(&body).unwrap().basic().unwrap();
        let mut store = X509StoreBuilder::new().unwrap();
        store.add_cert(root.clone()).unwrap();
        let store = store.build();
        let mut chain = Stack::new().unwrap();
        chain.push(issuing.clone()).unwrap();
        basic.verify(&chain, &store, OcspFlag::empty()).unwrap_or_else(|e| panic!("{what}: OCSP verify: {e}"));
        let id = OcspCertId::from_cert(openssl::hash::MessageDigest::sha1(), &leaf, &issuing).unwrap();
        let status = basic.find_status(&id).unwrap_or_else(|| panic!("{what}: no status"));
        assert_eq!(status.status, openssl::ocsp::OcspCertStatus::GOOD, "{what}");

        // The full CRL, signed by the same key.
        let crl = X509Crl::from_der(&pki.http_get("/crl/demo.crl").2).unwrap();
        assert!(crl.verify(&issuing.public_key().unwrap()).unwrap(), "{what}");
    }
}

/// RFC 5019: responses are re-signed in the background before nextUpdate,
/// without any request asking.
#[test]
fn responses_are_re_signed_before_next_update() {
    let pki = Pki::start_with("response_validity_seconds = 60\nrefresh_before_seconds = 58");
    let (leaf, _) = pki.issue("refresh.test");
    let path = format!("/ocsp/{}", get_encodings(&pki.request(&leaf, false, "refresh-req.der")).1);
    let last_modified = |headers: &str| {
        headers.lines().find(|l| l.to_lowercase().starts_with("last-modified:")).map(str::to_owned).unwrap()
    };
    let (_, headers, first) = pki.http_get(&path);
    let before = last_modified(&headers);
    // The refresher runs every 58/8 = 7 s and re-signs what expires within 58 s.
    let deadline = Instant::now() + Duration::from_secs(25);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let (_, headers, body) = pki.http_get(&path);
        if last_modified(&headers) != before {
            assert_ne!(body, first);
            let resp = pki.dir.join("refreshed.der");
            std::fs::write(&resp, &body).unwrap();
            let (_, out, err) = run(Command::new("openssl").arg("ocsp").args([
                "-respin",
                resp.to_str().unwrap(),
                "-issuer",
                pki.ca("issuing.pem").to_str().unwrap(),
                "-cert",
                leaf.to_str().unwrap(),
                "-CAfile",
                pki.ca("chain.pem").to_str().unwrap(),
            ]));
            assert_status(&format!("{out}{err}"), &leaf, "good");
            break;
        }
        assert!(Instant::now() < deadline, "no re-signed response after 25 s");
    }
}

/// A response served (and so kept in memory) before a revocation is never
/// served after the revocation is acknowledged.
/// The status in a GET answer for `path`, as `openssl ocsp -respin` reads it
/// (verified), and the answer's ETag.
fn get_status(pki: &Pki, path: &str, cert: &Path) -> (String, String) {
    let (code, headers, body) = pki.http_get(path);
    assert_eq!(code, 200, "{path}: {headers}");
    let etag = headers
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("etag:").then(|| l[5..].trim().to_owned()))
        .unwrap_or_else(|| panic!("no ETag: {headers}"));
    let resp = pki.dir.join("get-resp.der");
    std::fs::write(&resp, &body).unwrap();
    let (_, out, err) = run(Command::new("openssl").arg("ocsp").args([
        "-respin",
        resp.to_str().unwrap(),
        "-issuer",
        pki.ca("issuing.pem").to_str().unwrap(),
        "-cert",
        cert.to_str().unwrap(),
        "-CAfile",
        pki.ca("chain.pem").to_str().unwrap(),
    ]));
    (format!("{out}{err}"), etag)
}

#[test]
fn a_revocation_replaces_a_response_already_served() {
    let pki = Pki::start();
    let (leaf, serial) = pki.issue("hot.test");
    let (_, encoded) = get_encodings(&pki.request(&leaf, false, "hot-req.der"));
    let get = format!("/ocsp/{encoded}");
    // Asked again and again: answered from the store, then from the answers
    // ocspd keeps ready (POST bodies and GET paths alike).
    let mut etag = String::new();
    for _ in 0..3 {
        assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
        assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce", "-sha256"]), &leaf, "good");
        let (text, tag) = get_status(&pki, &get, &leaf);
        assert_status(&text, &leaf, "good");
        etag = tag;
    }
    // A kept answer still honours If-None-Match.
    let (code, headers, body) = pki.curl(&["-H", &format!("If-None-Match: {etag}"), &pki.url(&get)]);
    assert_eq!(code, 304, "{headers}");
    assert!(body.is_empty() && headers.to_ascii_lowercase().contains("cache-control: max-age="), "{headers}");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &serial, "--reason", "key-compromise"]));
    assert!(st.success(), "{out}{err}");
    // Right after the acknowledgement, over both CertID hashes and over GET.
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "revoked");
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce", "-sha256"]), &leaf, "revoked");
    let (text, revoked_tag) = get_status(&pki, &get, &leaf);
    assert_status(&text, &leaf, "revoked");
    assert_ne!(revoked_tag, etag, "a new response, a new entity tag");
    // The old tag no longer matches: the revoked response is sent in full.
    let (code, headers, _) = pki.curl(&["-H", &format!("If-None-Match: {etag}"), &pki.url(&get)]);
    assert_eq!(code, 200, "{headers}");
}

// --- certificateHold and its release ------------------------------------------

/// A CRL as relying parties see it: its numbers and entries (serial hex, reason name).
struct ParsedCrl {
    number: u128,
    delta_base: Option<u128>,
    entries: Vec<(String, Option<RevocationReason>)>,
}

impl ParsedCrl {
    fn reason_of(&self, serial: &str) -> Option<Option<RevocationReason>> {
        self.entries.iter().find(|(s, _)| s == serial).map(|(_, r)| *r)
    }
}

fn parse_crl(der: &[u8]) -> ParsedCrl {
    use signet_ca::der::Decode;
    use signet_ca::x509_cert::crl::CertificateList;
    let crl = CertificateList::from_der(der).unwrap();
    let tbs = &crl.tbs_cert_list;
    let uint = |v: &[u8]| {
        let u = signet_ca::der::asn1::Uint::from_der(v).unwrap();
        u.as_bytes().iter().fold(0u128, |n, b| n << 8 | u128::from(*b))
    };
    let mut number = 0;
    let mut delta_base = None;
    for e in tbs.crl_extensions.iter().flatten() {
        match e.extn_id.to_string().as_str() {
            "2.5.29.20" => number = uint(e.extn_value.as_bytes()),
            "2.5.29.27" => delta_base = Some(uint(e.extn_value.as_bytes())),
            _ => {}
        }
    }
    let entries = tbs
        .revoked_certificates
        .iter()
        .flatten()
        .map(|r| {
            let reason =
                r.crl_entry_extensions.iter().flatten().find(|e| e.extn_id.to_string() == "2.5.29.21").map(|e| {
                    let code = signet_ca::CrlReason::from_der(e.extn_value.as_bytes()).unwrap() as u8;
                    RevocationReason::from_code(code).unwrap()
                });
            (hex::encode(r.serial_number.as_bytes()), reason)
        })
        .collect();
    ParsedCrl { number, delta_base, entries }
}

/// A CRL over HTTP, saved under `name` in the test directory.
fn fetch_crl(pki: &Pki, path: &str, name: &str) -> (PathBuf, ParsedCrl) {
    let (code, headers, body) = pki.http_get(path);
    assert_eq!(code, 200, "{path}: {headers}");
    let file = pki.dir.join(name);
    std::fs::write(&file, &body).unwrap();
    (file, parse_crl(&body))
}

fn crl_text(der: &Path) -> String {
    let (st, text, err) =
        run(Command::new("openssl").args(["crl", "-inform", "DER", "-noout", "-text", "-in"]).arg(der));
    assert!(st.success(), "{err}");
    text
}

/// Makes ocspd publish new CRLs (by revoking a throwaway serial) and waits for them.
fn publish_now(pki: &Pki, n: u8) {
    let registry = pki.registry();
    let before = fetch_crl(pki, "/crl/demo.crl", "before.crl").1.number;
    let serial = vec![0x7e, 0x57, n];
    let cert = IssuedCert { serial: serial.clone(), not_after_unix_secs: 4_000_000_000, crl_shard: 0 };
    block_on(registry.record_issued("demo", cert)).unwrap();
    block_on(
        registry.revoke("demo", Revocation { serial, reason: RevocationReason::Superseded, revoked_unix_secs: 0 }),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while fetch_crl(pki, "/crl/demo.crl", "before.crl").1.number == before {
        assert!(Instant::now() < deadline, "no new CRLs 5 s after a revocation");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `openssl verify -crl_check -extended_crl` of `leaf` with these CRLs (PEM),
/// and `-use_deltas` if asked; (ok, output). With `-extended_crl`, OpenSSL
/// never takes a delta CRL for a complete one (without it, a delta newer than
/// the base may be picked as the CRL itself), so a delta counts only when it
/// is applied to its base.
fn verify_with_crls(pki: &Pki, leaf: &Path, crls: &[&Path], use_deltas: bool) -> (bool, String) {
    let mut cmd = Command::new("openssl");
    cmd.args(["verify", "-crl_check", "-extended_crl"]);
    if use_deltas {
        cmd.arg("-use_deltas");
    }
    cmd.arg("-CAfile").arg(pki.ca("root.pem")).arg("-untrusted").arg(pki.ca("issuing.pem"));
    for c in crls {
        cmd.arg("-CRLfile").arg(c);
    }
    let (st, out, err) = run(cmd.arg(leaf));
    (st.success(), format!("{out}{err}"))
}

/// Waits (up to 2 s) until the full CRL, the certificate's shard and the
/// delta CRL say what `wanted` expects of `serial`; returns them.
fn wait_for_crls(
    pki: &Pki,
    shard: u64,
    serial: &str,
    wanted: impl Fn(&ParsedCrl, &ParsedCrl, &ParsedCrl) -> bool,
    what: &str,
) -> [(PathBuf, ParsedCrl); 3] {
    let started = Instant::now();
    loop {
        let full = fetch_crl(pki, "/crl/demo.crl", "full.crl");
        let shard_crl = fetch_crl(pki, &format!("/crl/demo/{shard}.crl"), "shard.crl");
        let delta = fetch_crl(pki, "/crl/demo/delta.crl", "delta.crl");
        if wanted(&full.1, &shard_crl.1, &delta.1) {
            return [full, shard_crl, delta];
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{what} ({serial}) not in the CRLs after 2 s: full {:?}, shard {:?}, delta {:?} (base {:?})",
            full.1.entries,
            shard_crl.1.entries,
            delta.1.entries,
            delta.1.delta_base
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// RFC 5280 certificateHold end to end: on hold, `openssl ocsp` says revoked
/// (certificateHold); released, it says good at once; the next full CRL and
/// the shard drop it; the delta CRL whose base listed the hold says
/// removeFromCRL, and OpenSSL (with -use_deltas) and Python cryptography
/// accept that; a new base ends it. A second hold, a release that the base
/// never saw, and a revocation for keyCompromise after a release follow.
#[test]
fn hold_and_release_through_ocsp_and_crls() {
    const BASE_INTERVAL: u64 = 5;
    let pki = Pki::start_with(&format!("crl_base_interval_seconds = {BASE_INTERVAL}"));
    let (leaf, serial) = pki.issue("hold.test");
    let (other, _) = pki.issue("bystander.test");
    let status: serde_json::Value =
        serde_json::from_str(&run(pki.signetctl().args(["--json", "cert", "status", &serial])).1).unwrap();
    let shard = status["crl_shard"].as_u64().unwrap();
    // Both CertID hashes cached as good, to be replaced on hold and on release.
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce", "-sha256"]), &leaf, "good");

    // On hold.
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &serial, "--reason", "certificate-hold"]));
    assert!(st.success(), "{out}{err}");
    for extra in [&["-no_nonce"][..], &["-no_nonce", "-sha256"][..], &[][..]] {
        let text = pki.openssl_ocsp(&leaf, extra);
        assert_status(&text, &leaf, "revoked");
        assert!(text.contains("Reason: certificateHold"), "{text}");
    }
    let (_, out, _) = run(pki.signetctl().args(["cert", "status", &serial]));
    assert!(out.contains("on hold") && out.contains("certificate-hold"), "{out}");
    let status: serde_json::Value =
        serde_json::from_str(&run(pki.signetctl().args(["--json", "cert", "status", &serial])).1).unwrap();
    assert_eq!((status["state"].as_str(), status["on_hold"].as_bool()), (Some("revoked"), Some(true)), "{status}");

    // A delta base that lists the hold: the first publication BASE_INTERVAL
    // seconds after the last base chooses a new one.
    std::thread::sleep(Duration::from_secs(BASE_INTERVAL) + Duration::from_millis(200));
    publish_now(&pki, 1);
    let (base_der, base) = fetch_crl(&pki, "/crl/demo.crl", "base.crl");
    let (delta_before_der, delta) = fetch_crl(&pki, "/crl/demo/delta.crl", "delta-before.crl");
    assert_eq!(delta.delta_base, Some(base.number), "the new base is the newest full CRL");
    assert_eq!(base.reason_of(&serial), Some(Some(RevocationReason::CertificateHold)));
    let base_pem = to_pem(&base_der);
    assert!(verify_with_crls(&pki, &leaf, &[&base_pem], false).1.contains("certificate revoked"));
    let (ok, text) = verify_with_crls(&pki, &leaf, &[&base_pem, &to_pem(&delta_before_der)], true);
    assert!(!ok && text.contains("certificate revoked"), "base + delta before the release: {text}");

    // Released: good in OCSP as soon as the call returns, over both hashes.
    let (st, out, err) = run(pki.signetctl().args(["cert", "release-hold", &serial]));
    assert!(st.success(), "{out}{err}");
    assert!(out.contains("state:     good") && out.contains("released:"), "{out}");
    for extra in [&["-no_nonce"][..], &["-no_nonce", "-sha256"][..], &[][..]] {
        assert_status(&pki.openssl_ocsp(&leaf, extra), &leaf, "good");
    }
    let status: serde_json::Value =
        serde_json::from_str(&run(pki.signetctl().args(["--json", "cert", "status", &serial])).1).unwrap();
    assert_eq!(status["state"].as_str(), Some("good"), "{status}");
    assert_eq!(status["on_hold"].as_bool(), Some(false), "{status}");
    assert!(status["released"].as_i64().unwrap() > 0, "{status}");

    // The CRLs: gone from the full CRL and the shard, removeFromCRL in the delta.
    let [(full_der, full), (shard_der, _), (delta_der, delta)] = wait_for_crls(
        &pki,
        shard,
        &serial,
        |full, shard, delta| {
            full.reason_of(&serial).is_none()
                && shard.reason_of(&serial).is_none()
                && delta.reason_of(&serial) == Some(Some(RevocationReason::RemoveFromCrl))
        },
        "the release",
    );
    assert_eq!(delta.delta_base, Some(base.number), "still the base that listed the hold");
    assert!(full.number > base.number && delta.number > full.number);
    let delta_text = crl_text(&delta_der);
    assert!(
        delta_text.contains("Remove From CRL") && delta_text.contains("Delta CRL Indicator: critical"),
        "{delta_text}"
    );
    assert!(delta_text.to_lowercase().contains(&serial), "{delta_text}");
    let full_text = crl_text(&full_der);
    assert!(!full_text.to_lowercase().contains(&serial), "{full_text}");
    assert!(full_text.contains("Freshest CRL") && full_text.contains(&pki.url("/crl/demo/delta.crl")), "{full_text}");
    assert!(!crl_text(&shard_der).to_lowercase().contains(&serial));
    let (st, out, err) = run(pki.signetctl().args(["crl", "show", "--delta"]));
    assert!(st.success() && out.contains(&format!("{serial}  ")) && out.contains("remove-from-crl"), "{out}{err}");
    for der in [&full_der, &shard_der, &delta_der] {
        let (_, out, err) = run(Command::new("openssl")
            .args(["crl", "-inform", "DER", "-noout", "-CAfile"])
            .arg(pki.ca("chain.pem"))
            .arg("-in")
            .arg(der));
        assert!(format!("{out}{err}").contains("verify OK"), "{}: {out}{err}", der.display());
    }
    // OpenSSL applies the delta to the base that still lists the hold: the
    // removeFromCRL entry makes the certificate valid again; without
    // -use_deltas, the base's hold stands.
    let delta_pem = to_pem(&delta_der);
    let (ok, text) = verify_with_crls(&pki, &leaf, &[&base_pem, &delta_pem], true);
    assert!(ok, "base + delta: {text}");
    let (ok, text) = verify_with_crls(&pki, &leaf, &[&base_pem, &delta_pem], false);
    assert!(!ok && text.contains("certificate revoked"), "base, delta unused: {text}");
    let (ok, text) = verify_with_crls(&pki, &leaf, &[&to_pem(&full_der), &delta_pem], true);
    assert!(ok, "new full + delta: {text}");
    assert!(verify_with_crls(&pki, &other, &[&base_pem, &delta_pem], true).0);

    // Python cryptography: signatures, the delta indicator, the reason.
    let script = r#"
import sys
from cryptography import x509
issuing = x509.load_pem_x509_certificate(open(sys.argv[1], 'rb').read())
serial = int(sys.argv[2], 16)
base, full, delta = (x509.load_der_x509_crl(open(p, 'rb').read()) for p in sys.argv[3:6])
for crl in (base, full, delta):
    assert crl.is_signature_valid(issuing.public_key())
base_number = base.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number
assert delta.extensions.get_extension_for_class(x509.DeltaCRLIndicator).value.crl_number == base_number
held = base.get_revoked_certificate_by_serial_number(serial)
assert held.extensions.get_extension_for_class(x509.CRLReason).value.reason == x509.ReasonFlags.certificate_hold
assert full.get_revoked_certificate_by_serial_number(serial) is None
entry = delta.get_revoked_certificate_by_serial_number(serial)
assert entry.extensions.get_extension_for_class(x509.CRLReason).value.reason == x509.ReasonFlags.remove_from_crl
fresh = full.extensions.get_extension_for_class(x509.FreshestCRL).value
assert fresh[0].full_name[0].value.endswith('/crl/demo/delta.crl'), fresh
print("ok")
"#;
    let (st, out, err) = run(Command::new("python3")
        .args(["-c", script])
        .arg(pki.ca("issuing.pem"))
        .arg(&serial)
        .arg(&base_der)
        .arg(&full_der)
        .arg(&delta_der));
    assert!(st.success() && out.contains("ok"), "cryptography: {out}{err}");

    // A new base, which does not list it, ends the removeFromCRL entries.
    std::thread::sleep(Duration::from_secs(BASE_INTERVAL) + Duration::from_millis(200));
    publish_now(&pki, 2);
    let (_, new_base) = fetch_crl(&pki, "/crl/demo.crl", "new-base.crl");
    let (_, delta) = fetch_crl(&pki, "/crl/demo/delta.crl", "delta-after.crl");
    assert_eq!(delta.delta_base, Some(new_base.number));
    assert_eq!(new_base.reason_of(&serial), None);
    assert_eq!(delta.reason_of(&serial), None, "{:?}", delta.entries);

    // On hold again, and released again: the delta lists the new hold; the
    // release of a hold its base never listed leaves no entry at all.
    let registry = pki.registry();
    let serial_bytes = hex::decode(&serial).unwrap();
    let hold =
        Revocation { serial: serial_bytes.clone(), reason: RevocationReason::CertificateHold, revoked_unix_secs: 0 };
    assert!(block_on(registry.revoke("demo", hold)).unwrap().on_hold());
    let text = pki.openssl_ocsp(&leaf, &["-no_nonce"]);
    assert_status(&text, &leaf, "revoked");
    assert!(text.contains("Reason: certificateHold"), "{text}");
    wait_for_crls(
        &pki,
        shard,
        &serial,
        |full, _, delta| {
            let held = Some(Some(RevocationReason::CertificateHold));
            full.reason_of(&serial) == held && delta.reason_of(&serial) == held
        },
        "the second hold",
    );
    let released = block_on(registry.release_hold("demo", serial_bytes.clone())).unwrap();
    assert_eq!(released.state, CertState::Good);
    assert!(released.released_unix_secs > 0);
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
    wait_for_crls(
        &pki,
        shard,
        &serial,
        |full, shard, delta| {
            full.reason_of(&serial).is_none()
                && shard.reason_of(&serial).is_none()
                && delta.reason_of(&serial).is_none()
        },
        "the second release",
    );

    // Revoked for keyCompromise after the release: for good, everywhere.
    let kc = Revocation { serial: serial_bytes.clone(), reason: RevocationReason::KeyCompromise, revoked_unix_secs: 0 };
    let revoked = block_on(registry.revoke("demo", kc)).unwrap();
    assert_eq!(
        (revoked.state, revoked.reason, revoked.released_unix_secs),
        (CertState::Revoked, Some(RevocationReason::KeyCompromise), 0)
    );
    let text = pki.openssl_ocsp(&leaf, &["-no_nonce", "-sha256"]);
    assert_status(&text, &leaf, "revoked");
    assert!(text.contains("Reason: keyCompromise"), "{text}");
    wait_for_crls(
        &pki,
        shard,
        &serial,
        |full, shard, delta| {
            let kc = Some(Some(RevocationReason::KeyCompromise));
            full.reason_of(&serial) == kc && shard.reason_of(&serial) == kc && delta.reason_of(&serial) == kc
        },
        "the keyCompromise revocation",
    );
    let e = block_on(registry.release_hold("demo", serial_bytes)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::FailedPrecondition, "{e}");
}

/// Releasing what is not on hold is refused with a typed error, through the
/// client and through signetctl's exit code; removeFromCRL is not a reason
/// `revoke` takes, and a hold turned into a revocation for good stays.
#[test]
fn release_refusals_are_typed() {
    let pki = Pki::start();
    let registry = pki.registry();
    let release = |serial: &str| run(pki.signetctl().args(["cert", "release-hold", serial]));

    // Good: not on hold.
    let (good, good_serial) = pki.issue("good-release.test");
    let e = block_on(registry.release_hold("demo", hex::decode(&good_serial).unwrap())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::FailedPrecondition, "{e}");
    assert!(e.detail.contains("not on hold") && e.detail.contains("good"), "{e}");
    let (st, out, err) = release(&good_serial);
    assert_eq!(st.code(), Some(1), "{out}{err}");
    assert!(err.contains("not on hold"), "{err}");
    assert_status(&pki.openssl_ocsp(&good, &["-no_nonce"]), &good, "good");

    // Revoked for keyCompromise: permanent.
    let (kc, kc_serial) = pki.issue("kc-release.test");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &kc_serial, "--reason", "key-compromise"]));
    assert!(st.success(), "{out}{err}");
    let e = block_on(registry.release_hold("demo", hex::decode(&kc_serial).unwrap())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::FailedPrecondition, "{e}");
    assert!(e.detail.contains("key-compromise") && e.detail.contains("permanent"), "{e}");
    let (st, out, err) = release(&kc_serial);
    assert_eq!(st.code(), Some(1), "{out}{err}");
    assert!(err.contains("permanent"), "{err}");
    let text = pki.openssl_ocsp(&kc, &["-no_nonce"]);
    assert_status(&text, &kc, "revoked");
    assert!(text.contains("Reason: keyCompromise"), "{text}");

    // Unknown serial: notFound, exit code 4.
    let e = block_on(registry.release_hold("demo", vec![0x01, 0x23, 0x45])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let (st, out, err) = release("012345");
    assert_eq!(st.code(), Some(4), "{out}{err}");

    // removeFromCRL through revoke: refused, pointing at the release call.
    let (held, held_serial) = pki.issue("held.test");
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &held_serial, "--reason", "remove-from-crl"]));
    assert_eq!(st.code(), Some(2), "{out}{err}");
    assert!(err.contains("release-hold") && err.contains("releaseHold"), "{err}");
    let e = block_on(registry.revoke(
        "demo",
        Revocation {
            serial: hex::decode(&held_serial).unwrap(),
            reason: RevocationReason::RemoveFromCrl,
            revoked_unix_secs: 0,
        },
    ))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");

    // A hold revoked again with another reason is revoked for good (the hold's time stays).
    let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &held_serial, "--reason", "certificate-hold"]));
    assert!(st.success(), "{out}{err}");
    let on_hold = block_on(registry.status("demo", hex::decode(&held_serial).unwrap())).unwrap();
    assert!(on_hold.on_hold());
    std::thread::sleep(Duration::from_millis(1100));
    let (st, out, err) =
        run(pki.signetctl().args(["--json", "cert", "revoke", &held_serial, "--reason", "superseded"]));
    assert!(st.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["reason"].as_str(), v["on_hold"].as_bool()), (Some("superseded"), Some(false)), "{v}");
    assert_eq!(v["revoked"].as_i64(), Some(on_hold.revoked_unix_secs));
    let (st, _, err) = release(&held_serial);
    assert_eq!(st.code(), Some(1), "{err}");
    let text = pki.openssl_ocsp(&held, &["-no_nonce"]);
    assert_status(&text, &held, "revoked");
    assert!(text.contains("Reason: superseded"), "{text}");
}

#[test]
fn acknowledged_release_survives_sigkill() {
    let mut pki = Pki::start();
    let (leaf, serial) = pki.issue("kill-release.test");
    let serial_bytes = hex::decode(&serial).unwrap();
    let registry = pki.registry();
    let hold =
        Revocation { serial: serial_bytes.clone(), reason: RevocationReason::CertificateHold, revoked_unix_secs: 0 };
    assert!(block_on(registry.revoke("demo", hold)).unwrap().on_hold());
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "revoked");
    let released = block_on(registry.release_hold("demo", serial_bytes.clone())).unwrap();
    assert_eq!(released.state, CertState::Good);
    // Killed the moment the release is acknowledged.
    pki.kill9_ocspd();
    pki.start_ocspd();
    let again = block_on(pki.registry().status("demo", serial_bytes)).unwrap();
    assert_eq!(again.state, CertState::Good);
    assert_eq!(again.released_unix_secs, released.released_unix_secs);
    // The pre-signed response (no nonce) and a fresh one (nonce) both say good.
    assert_status(&pki.openssl_ocsp(&leaf, &["-no_nonce"]), &leaf, "good");
    assert_status(&pki.openssl_ocsp(&leaf, &[]), &leaf, "good");
    // The CRLs published at start do not list it.
    let (full_der, full) = fetch_crl(&pki, "/crl/demo.crl", "after-restart.crl");
    assert_eq!(full.reason_of(&serial), None, "{:?}", full.entries);
    assert!(!crl_text(&full_der).to_lowercase().contains(&serial));
    let (_, out, _) = run(pki.signetctl().args(["cert", "status", &serial]));
    assert!(out.contains("state:     good") && out.contains("released:"), "{out}");
}

/// Twenty revocations of one serial at once (issue 22), through signetctl,
/// with mixed reasons: the first wins and the others are refused with
/// `alreadyRevoked` (exit code 6), except that keyCompromise may raise an
/// earlier reason (reported as a success too: at most one such raise). The
/// recorded reason ends keyCompromise, and OCSP and the full CRL say so.
/// Then the same through the registry client (OcspdClient), directly.
#[test]
fn concurrent_revocations_first_wins_and_key_compromise_is_never_lowered() {
    let pki = Pki::start();
    let reasons = ["superseded", "key-compromise", "cessation-of-operation", "affiliation-changed", "unspecified"];
    for round in 0..2 {
        let (leaf, serial) = pki.issue(&format!("race{round}.test"));
        let outcomes: Vec<(usize, Option<i32>, String, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    let (pki, serial) = (&pki, &serial);
                    s.spawn(move || {
                        let reason = reasons[i % reasons.len()];
                        let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", serial, "--reason", reason]));
                        (i, st.code(), out, err)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = outcomes.iter().filter(|o| o.1 == Some(0)).collect();
        let refused = outcomes.iter().filter(|o| o.1 == Some(6)).count();
        assert_eq!(won.len() + refused, 20, "{outcomes:#?}");
        for (_, _, out, err) in outcomes.iter().filter(|o| o.1 == Some(6)) {
            assert!(err.contains("already-revoked") && err.contains("already revoked"), "{out}{err}");
        }
        // One winner, plus at most one keyCompromise raising a lesser reason.
        let raised = won.iter().filter(|o| reasons[o.0 % reasons.len()] == "key-compromise").count();
        assert!(won.len() == 1 || (won.len() == 2 && raised == 1), "{won:#?}");
        let status = block_on(pki.registry().status("demo", hex::decode(&serial).unwrap())).unwrap();
        assert_eq!(status.reason, Some(RevocationReason::KeyCompromise), "{outcomes:#?}");
        // OCSP and the CRL agree.
        let text = pki.openssl_ocsp(&leaf, &["-no_nonce"]);
        assert_status(&text, &leaf, "revoked");
        assert!(text.contains("Reason: keyCompromise"), "{text}");
        let started = Instant::now();
        while pki.full_crl_reason(&serial).as_deref() != Some("Key Compromise") {
            assert!(started.elapsed() < Duration::from_secs(3), "CRL: {:?}", pki.full_crl_reason(&serial));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // Through the registry client: superseded first, then everything else at once.
    let (leaf, serial) = pki.issue("race-registry.test");
    let serial = hex::decode(serial).unwrap();
    let rev = |reason| Revocation { serial: serial.clone(), reason, revoked_unix_secs: 0 };
    let first = block_on(pki.registry().revoke("demo", rev(RevocationReason::Superseded))).unwrap();
    let all = [
        RevocationReason::Superseded,
        RevocationReason::Unspecified,
        RevocationReason::CertificateHold,
        RevocationReason::KeyCompromise,
        RevocationReason::CessationOfOperation,
    ];
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let (pki, rev) = (&pki, &rev);
                s.spawn(move || (all[i % all.len()], block_on(pki.registry().revoke("demo", rev(all[i % all.len()])))))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok: Vec<_> = results.iter().filter(|r| r.1.is_ok()).collect();
    assert_eq!(ok.len(), 1, "exactly one keyCompromise raises superseded: {results:#?}");
    assert_eq!(ok[0].0, RevocationReason::KeyCompromise);
    for (_, r) in results.iter().filter(|r| r.1.is_err()) {
        assert_eq!(r.as_ref().unwrap_err().kind, ErrorKind::AlreadyRevoked, "{r:?}");
    }
    let status = block_on(pki.registry().status("demo", serial.clone())).unwrap();
    assert_eq!(status.reason, Some(RevocationReason::KeyCompromise));
    assert_eq!(status.revoked_unix_secs, first.revoked_unix_secs, "the first revocation's time stays");
    let text = pki.openssl_ocsp(&leaf, &["-no_nonce"]);
    assert!(text.contains("Reason: keyCompromise"), "{text}");
}
