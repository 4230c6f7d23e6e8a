//! signd over its real socket: every algorithm, batches, policy, audit,
//! crash durability, bad input, sd_notify and socket activation.
//!
//! Tests that use keys run once per backend (OpenSSL, NSS softokn, NSS with
//! SoftHSM2 as an HSM), as rustls runs its API tests once per crypto
//! provider: each body takes a [`Backend`] and `per_backend!` makes the three
//! #[test]s. Where a backend cannot do an algorithm the body asserts the typed
//! `Unsupported` error instead of skipping it.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signet_ipc::{block_on, AuditQuery, ErrorKind, KeyAlgorithm, KeySpec, SignatureScheme as S};
use signet_tests::{bin, openssl_verify, run, signetctl, Backend, SigndProcess};

fn spec(id: &str, algorithm: KeyAlgorithm) -> KeySpec {
    KeySpec { id: id.into(), algorithm, roles: vec![], backend: String::new() }
}

/// Three #[test]s per body: `NAME::openssl`, `NAME::nss_softokn`, `NAME::nss_softhsm`.
macro_rules! per_backend {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn openssl() {
                super::$name(signet_tests::Backend::Openssl)
            }
            #[test]
            fn nss_softokn() {
                super::$name(signet_tests::Backend::NssSoftokn)
            }
            #[test]
            fn nss_softhsm() {
                super::$name(signet_tests::Backend::NssSofthsm)
            }
        }
    )*};
}

per_backend!(
    every_algorithm_and_scheme_verifies_independently,
    openssl_cli_verifies_signatures,
    batch_signatures_verify_and_match_single_ones,
    calls_in_flight_together_are_each_their_own_call,
    policy_refuses_and_audits,
    kill9_during_signing_loses_nothing_acknowledged,
    bad_input_gets_typed_errors_and_signd_keeps_serving,
    keys_survive_restart,
);

/// Generates `alg` on signd's backend: the key's info, or (for an algorithm
/// the backend cannot do) None after checking the error is `Unsupported`.
fn generate(signd: &SigndProcess, id: &str, alg: KeyAlgorithm) -> Option<signet_ipc::KeyInfo> {
    let result = block_on(signd.client().generate_key(signd.spec(id, alg)));
    if signd.backend.supports(alg) {
        let info = result.unwrap_or_else(|e| panic!("{:?} {alg}: {e}\n{}", signd.backend, signd.log()));
        assert_eq!(info.backend, signd.backend.name());
        Some(info)
    } else {
        let e = result.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported, "{:?} {alg}: {e}", signd.backend);
        assert!(e.detail.contains("unsupported"), "{e}");
        None
    }
}

/// Every algorithm and every scheme it allows: generated in signd, signed
/// through the socket, verified by OpenSSL outside signd.
fn every_algorithm_and_scheme_verifies_independently(backend: Backend) {
    let signd = SigndProcess::start_backend(backend, "");
    let client = signd.client();
    let msg = b"the quick brown fox".to_vec();
    for alg in KeyAlgorithm::ALL {
        let id = format!("k-{}", alg.name());
        let Some(info) = generate(&signd, &id, alg) else { continue };
        assert_eq!(info.algorithm, alg);
        assert!(info.available);
        for scheme in S::ALL.into_iter().filter(|s| *s != S::Default && alg.allows(*s)) {
            let sig = block_on(client.sign("", &id, scheme, msg.clone())).unwrap();
            assert!(openssl_verify(&info.spki, scheme, &msg, &sig), "{alg} {scheme}");
            assert!(
                !openssl_verify(&info.spki, scheme, b"another message", &sig),
                "{alg} {scheme} verified a wrong message"
            );
        }
        // Default resolves to the key's own scheme.
        let sig = block_on(client.sign("", &id, S::Default, msg.clone())).unwrap();
        assert!(openssl_verify(&info.spki, alg.default_scheme(), &msg, &sig), "{alg} default");
    }
    let health = block_on(client.health()).unwrap();
    let supported = KeyAlgorithm::ALL.into_iter().filter(|a| backend.supports(*a)).count();
    assert_eq!(health.keys_loaded, supported as u32);
    assert_eq!(health.keys_unavailable, 0);
}

/// The system openssl CLI (a different OpenSSL build) accepts signd's
/// signatures for the algorithms it knows (it has no ML-DSA).
fn openssl_cli_verifies_signatures(backend: Backend) {
    let signd = SigndProcess::start_backend(backend, "");
    let dir = signd.dir.path();
    std::fs::write(dir.join("msg"), b"signed by signd\n").unwrap();
    for (alg, digest) in [
        (KeyAlgorithm::EcP256, Some("-sha256")),
        (KeyAlgorithm::EcP384, Some("-sha384")),
        (KeyAlgorithm::Rsa2048, Some("-sha256")),
        (KeyAlgorithm::Ed25519, None),
    ] {
        let id = format!("cli-{}", alg.name());
        let (st, _, err) =
            run(signetctl(&signd.socket).args(["key", "generate", &id, "-a", alg.name(), "--backend", backend.name()]));
        if !backend.supports(alg) {
            assert!(!st.success() && err.contains("unsupported"), "{alg}: {err}");
            continue;
        }
        assert!(st.success(), "{err}");
        let pem = dir.join(format!("{id}.pem"));
        let sig = dir.join(format!("{id}.sig"));
        let (st, _, err) = run(signetctl(&signd.socket).args(["key", "export-public", &id, "--out"]).arg(&pem));
        assert!(st.success(), "{err}");
        let (st, _, err) = run(signetctl(&signd.socket)
            .args(["sign", "--key", &id, "--in"])
            .arg(dir.join("msg"))
            .arg("--out")
            .arg(&sig));
        assert!(st.success(), "{err}");
        let mut verify = Command::new("openssl");
        match digest {
            Some(d) => verify.args(["dgst", d, "-verify"]).arg(&pem).arg("-signature").arg(&sig).arg(dir.join("msg")),
            None => verify
                .args(["pkeyutl", "-verify", "-pubin", "-rawin", "-inkey"])
                .arg(&pem)
                .arg("-sigfile")
                .arg(&sig)
                .arg("-in")
                .arg(dir.join("msg")),
        };
        let (st, out, err) = run(&mut verify);
        assert!(
            st.success() && (out.contains("Verified OK") || out.contains("Signature Verified Successfully")),
            "{alg}: {out} {err}"
        );
    }
}

fn batch_signatures_verify_and_match_single_ones(backend: Backend) {
    let signd = SigndProcess::start_backend(backend, "");
    let client = signd.client();
    let algs = [KeyAlgorithm::EcP256, KeyAlgorithm::Ed25519, KeyAlgorithm::MlDsa44, KeyAlgorithm::Rsa2048];
    for alg in algs {
        let id = format!("b-{}", alg.name());
        let Some(info) = generate(&signd, &id, alg) else { continue };
        let messages: Vec<Vec<u8>> = (0..100).map(|i| format!("message {i}").into_bytes()).collect();
        let sigs = block_on(client.sign_batch("", &id, S::Default, messages.clone())).unwrap();
        assert_eq!(sigs.len(), messages.len());
        for (m, s) in messages.iter().zip(&sigs) {
            assert!(openssl_verify(&info.spki, alg.default_scheme(), m, s), "{alg}");
        }
        if matches!(alg, KeyAlgorithm::Ed25519 | KeyAlgorithm::Rsa2048) {
            // Deterministic schemes: the batch returns exactly what single calls return.
            let single = block_on(client.sign("", &id, S::Default, messages[7].clone())).unwrap();
            assert_eq!(single, sigs[7], "{alg}");
        }
    }
    let id = "b-ecdsa-p256";
    let empty = block_on(client.sign_batch("", id, S::Default, vec![])).unwrap_err();
    assert_eq!(empty.kind, ErrorKind::InvalidArgument);
    // One audit record per signature in the batch.
    let audit = block_on(client.audit(AuditQuery { after_seq: 0, limit: 10_000, newest_first: false })).unwrap();
    let supported = algs.into_iter().filter(|a| backend.supports(*a)).count();
    assert_eq!(audit.iter().filter(|r| r.operation == "sign-batch" && r.ok).count(), 100 * supported);
}

/// `sign` calls in flight together from one client travel together
/// (`signEach`), yet each is signed, audited and answered as its own call:
/// one that fails fails alone.
fn calls_in_flight_together_are_each_their_own_call(backend: Backend) {
    let signd = SigndProcess::start_backend(backend, "[limits]\nmax_message_bytes = 1024\n");
    let client = signd.client();
    let info = generate(&signd, "k", KeyAlgorithm::EcP256).unwrap();
    let scheme = KeyAlgorithm::EcP256.default_scheme();

    let messages = vec![b"first".to_vec(), vec![0; 1025], b"third".to_vec()];
    let each = block_on(client.sign_each("", "k", S::Default, messages.clone())).unwrap();
    assert_eq!(each.len(), 3);
    assert!(openssl_verify(&info.spki, scheme, &messages[0], each[0].as_ref().unwrap()));
    assert_eq!(each[1].as_ref().unwrap_err().kind, ErrorKind::TooLarge);
    assert!(openssl_verify(&info.spki, scheme, &messages[2], each[2].as_ref().unwrap()));
    let unknown = block_on(client.sign_each("", "nope", S::Default, vec![b"x".to_vec(); 2])).unwrap();
    assert!(unknown.iter().all(|r| r.as_ref().unwrap_err().kind == ErrorKind::UnknownKey), "{unknown:?}");

    // 300 calls at once from one client, one of them too large.
    let mut messages: Vec<Vec<u8>> = (0..300).map(|i| format!("in flight {i}").into_bytes()).collect();
    messages[150] = vec![1; 1025];
    let calls = messages.iter().map(|m| client.sign("", "k", S::Default, m.clone()));
    let answers = block_on(futures::future::join_all(calls));
    for (i, (m, answer)) in messages.iter().zip(&answers).enumerate() {
        match answer {
            Err(e) if i == 150 => assert_eq!(e.kind, ErrorKind::TooLarge),
            Ok(sig) if i != 150 => assert!(openssl_verify(&info.spki, scheme, m, sig), "call {i}"),
            other => panic!("call {i}: {other:?}"),
        }
    }

    // One "sign" record per signature, with its message's hash, and the
    // unknown key's refusals.
    let audit = block_on(client.audit(AuditQuery { after_seq: 0, limit: 10_000, newest_first: false })).unwrap();
    let signed: Vec<Vec<u8>> = audit
        .iter()
        .filter(|r| r.operation == "sign" && r.ok && r.key_id == "k")
        .map(|r| r.message_sha256.clone())
        .collect();
    assert_eq!(signed.len(), 2 + 299, "{:?}", audit.iter().map(|r| &r.operation).collect::<Vec<_>>());
    for (i, m) in messages.iter().enumerate().filter(|(i, _)| *i != 150) {
        assert!(signed.contains(&openssl::sha::sha256(m).to_vec()), "no audit record for call {i}");
    }
    assert_eq!(audit.iter().filter(|r| r.operation == "sign" && !r.ok && r.key_id == "nope").count(), 2);
}

/// A caller whose uid is not in policy is refused, with a typed error and an
/// audit record; roles limit keys and operations.
fn policy_refuses_and_audits(backend: Backend) {
    let signd = SigndProcess::start_backend(
        backend,
        "[roles.issuer]\nusers = [65534]\nkeys = [\"ca-*\"]\noperations = [\"sign\"]\n",
    );
    let client = signd.client();
    block_on(client.generate_key(signd.spec("ca-1", KeyAlgorithm::EcP256))).unwrap();
    block_on(client.generate_key(signd.spec("other", KeyAlgorithm::EcP256))).unwrap();
    let tagged_alg = if backend.supports(KeyAlgorithm::Ed25519) { KeyAlgorithm::Ed25519 } else { KeyAlgorithm::EcP384 };
    let mut issuer = KeySpec { roles: vec!["issuer".into()], ..signd.spec("tagged", tagged_alg) };
    block_on(client.generate_key(issuer.clone())).unwrap();
    issuer.id = "bad role".into();
    assert_eq!(block_on(client.generate_key(issuer)).unwrap_err().kind, ErrorKind::InvalidArgument);

    let as_user = |uid: &str, args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups"])
            .arg(bin("signetctl"))
            .env("SIGNET_SIGND_SOCKET", &signd.socket)
            .args(args);
        c.stdin(std::process::Stdio::null());
        run(&mut c)
    };
    // 65534 holds `issuer`: it may sign with ca-* and with keys tagged for its role...
    for key in ["ca-1", "tagged"] {
        let (st, out, err) = as_user("65534", &["sign", "--key", key, "--in", "/dev/null"]);
        assert!(st.success(), "{key}: {err}");
        assert!(!out.trim().is_empty());
    }
    // ...but not with other keys, not list, and not admin.
    let (st, _, err) = as_user("65534", &["sign", "--key", "other", "--in", "/dev/null"]);
    assert_eq!(st.code(), Some(3), "{err}");
    assert!(err.contains("permission-denied"), "{err}");
    let (st, _, _) = as_user("65534", &["key", "list"]);
    assert_eq!(st.code(), Some(3));
    // A uid with no role at all.
    let (st, _, err) = as_user("12345", &["sign", "--key", "ca-1", "--in", "/dev/null"]);
    assert_eq!(st.code(), Some(3), "{err}");

    let audit = block_on(client.audit(AuditQuery { after_seq: 0, limit: 1000, newest_first: false })).unwrap();
    let refused = |uid: u32, op: &str| {
        audit.iter().any(|r| r.uid == uid && r.operation == op && !r.ok && r.outcome.starts_with("permission-denied"))
    };
    assert!(refused(65534, "sign"), "{audit:#?}");
    assert!(refused(65534, "admin"), "{audit:#?}");
    assert!(refused(12345, "signer"), "{audit:#?}");
    let signed = audit.iter().filter(|r| r.uid == 65534 && r.operation == "sign" && r.ok).count();
    assert_eq!(signed, 2);
    // The message hash recorded is SHA-256 of what was signed (empty input here).
    let empty_sha = openssl::sha::sha256(b"");
    assert!(audit.iter().filter(|r| r.uid == 65534 && r.ok).all(|r| r.message_sha256 == empty_sha));
}

/// SIGKILL during a stream of signatures: every key and every audit record of
/// an acknowledged signature survives, and the client reconnects by itself.
fn kill9_during_signing_loses_nothing_acknowledged(backend: Backend) {
    let mut signd = SigndProcess::start_backend(backend, "");
    let client = signd.client();
    block_on(client.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap();
    let second = if backend.supports(KeyAlgorithm::MlDsa65) { KeyAlgorithm::MlDsa65 } else { KeyAlgorithm::Rsa2048 };
    block_on(client.generate_key(signd.spec("m", second))).unwrap();

    let acked: Arc<Mutex<Vec<[u8; 32]>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut streams = Vec::new();
    for t in 0..4 {
        let (client, acked, stop) = (client.clone(), acked.clone(), stop.clone());
        streams.push(std::thread::spawn(move || {
            let mut errors = 0u64;
            for i in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let msg = format!("stream {t} message {i}").into_bytes();
                match block_on(client.sign("", "k", S::Default, msg.clone())) {
                    Ok(_) => acked.lock().unwrap().push(openssl::sha::sha256(&msg)),
                    Err(e) => {
                        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
                        errors += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
            errors
        }));
    }
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "signatures stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait_for(2000);
    signd.kill9();
    let at_kill = acked.lock().unwrap().len();
    std::thread::sleep(Duration::from_millis(200));
    signd.restart();
    // The same client, untouched, carries on once signd is back.
    wait_for(at_kill + 2000);
    stop.store(true, Ordering::Relaxed);
    let errors: u64 = streams.into_iter().map(|t| t.join().unwrap()).sum();

    let health = block_on(client.health()).unwrap();
    assert_eq!(health.keys_loaded, 2, "keys lost");
    let acked = acked.lock().unwrap();
    let mut audited = std::collections::HashSet::new();
    let mut after = 0;
    loop {
        let page = block_on(client.audit(AuditQuery { after_seq: after, limit: 10_000, newest_first: false })).unwrap();
        let Some(last) = page.last() else { break };
        after = last.seq;
        audited.extend(page.into_iter().filter(|r| r.ok && r.operation == "sign").map(|r| r.message_sha256));
    }
    let missing = acked.iter().filter(|h| !audited.contains(h.as_slice())).count();
    assert_eq!(missing, 0, "{missing} of {} acknowledged signatures have no audit record", acked.len());
    // The kill landed mid-stream: callers saw signd go away and come back.
    assert!(errors > 0, "no call failed: signd was not killed mid-stream");
    eprintln!("acknowledged {} signatures, {errors} refused while signd was down", acked.len());
}

fn bad_input_gets_typed_errors_and_signd_keeps_serving(backend: Backend) {
    let signd = SigndProcess::start_backend(
        backend,
        "[limits]\nmax_message_bytes = 1024\nmax_batch = 8\nmax_frame_bytes = 65536\n",
    );
    let client = signd.client();
    block_on(client.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap();

    let kind = |r: Result<Vec<u8>, signet_ipc::IpcError>| r.unwrap_err().kind;
    assert_eq!(kind(block_on(client.sign("", "nope", S::Default, b"x".to_vec()))), ErrorKind::UnknownKey);
    assert_eq!(kind(block_on(client.sign("", "k", S::Ed25519, b"x".to_vec()))), ErrorKind::WrongAlgorithm);
    assert_eq!(kind(block_on(client.sign("", "k", S::RsaPssSha256, b"x".to_vec()))), ErrorKind::WrongAlgorithm);
    assert_eq!(kind(block_on(client.sign("", "k", S::Default, vec![0; 1025]))), ErrorKind::TooLarge);
    assert!(block_on(client.sign("", "k", S::Default, vec![0; 1024])).is_ok());
    let batch = block_on(client.sign_batch("", "k", S::Default, vec![b"m".to_vec(); 9])).unwrap_err();
    assert_eq!(batch.kind, ErrorKind::TooLarge);
    assert_eq!(kind(block_on(client.sign("nosuchrole", "k", S::Default, b"x".to_vec()))), ErrorKind::PermissionDenied);
    let bad_id = block_on(client.generate_key(spec("../../etc/passwd", KeyAlgorithm::EcP256))).unwrap_err();
    assert_eq!(bad_id.kind, ErrorKind::InvalidArgument);
    let dup = block_on(client.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap_err();
    assert_eq!(dup.kind, ErrorKind::AlreadyExists);
    let garbage =
        block_on(client.import_key(signd.spec("g", KeyAlgorithm::EcP256), b"not a key".to_vec())).unwrap_err();
    // NSS keys are generated on the token, never imported.
    let expected = if backend == Backend::Openssl { ErrorKind::InvalidArgument } else { ErrorKind::Unsupported };
    assert_eq!(garbage.kind, expected, "{garbage}");
    let nope = block_on(client.generate_key(KeySpec { backend: "nope".into(), ..spec("n", KeyAlgorithm::EcP256) }))
        .unwrap_err();
    assert_eq!(nope.kind, ErrorKind::Unsupported);

    // Malformed frames: garbage, a truncated frame, and a frame announcing a
    // segment far over the limit. Each only ends its own connection.
    let frames: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f],
        &[0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0],
        &[0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0],
    ];
    for frame in frames {
        let mut s = UnixStream::connect(&signd.socket).unwrap();
        let _ = s.write_all(frame);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        drop(s);
    }
    // A big frame over max_frame_bytes from a well-formed client.
    let big = block_on(client.sign_batch("", "k", S::Default, vec![vec![1u8; 1000]; 8]));
    assert!(big.is_ok(), "{big:?}");
    let over = block_on(client.sign("", "k", S::Default, vec![0u8; 200_000])).unwrap_err();
    assert_eq!(over.kind, ErrorKind::TooLarge, "{over}");
    // Still serving, on the same client (it reconnects) and on new ones.
    assert!(block_on(client.sign("", "k", S::Default, b"after".to_vec())).is_ok());
    assert!(block_on(signd.client().health()).unwrap().ok);
}

/// kill -9, restart: every key generated on the backend (for NSS: permanent
/// token objects) is found again, passes the recorded-public-key check, and
/// signs; the location says where the key lives.
fn keys_survive_restart(backend: Backend) {
    let mut signd = SigndProcess::start_backend(backend, "");
    let client = signd.client();
    let mut infos = Vec::new();
    for alg in [KeyAlgorithm::EcP256, KeyAlgorithm::EcP521, KeyAlgorithm::Rsa3072, KeyAlgorithm::Ed25519] {
        if let Some(info) = generate(&signd, &format!("r-{}", alg.name()), alg) {
            infos.push(info);
        }
    }
    signd.kill9();
    signd.restart();
    let health = block_on(client.health()).unwrap();
    assert_eq!((health.keys_loaded, health.keys_unavailable), (infos.len() as u32, 0), "{}", signd.log());
    for info in &infos {
        let after = block_on(client.admin_key(&info.id)).unwrap();
        assert_eq!(after.spki, info.spki);
        assert_eq!(after.location, info.location);
        if backend != Backend::Openssl {
            let token = if backend == Backend::NssSofthsm { "signet" } else { "internal" };
            assert!(info.location.starts_with(&format!("token \"{token}\", CKA_ID ")), "{}", info.location);
        }
        let sig = block_on(client.sign("", &info.id, S::Default, b"after restart".to_vec())).unwrap();
        assert!(openssl_verify(&info.spki, info.algorithm.default_scheme(), b"after restart", &sig), "{}", info.id);
    }
    // `key show` says where each key lives (Ed25519 on SoftHSM2 too).
    for info in &infos {
        let (st, out, _) = run(signetctl(&signd.socket).args(["key", "show", &info.id]));
        assert!(st.success() && out.contains(&info.location), "{out}");
    }
}

#[test]
fn damaged_key_file_is_unavailable_and_others_keep_working() {
    let mut signd = SigndProcess::start("");
    let client = signd.client();
    block_on(client.generate_key(spec("good", KeyAlgorithm::EcP256))).unwrap();
    let bad = block_on(client.generate_key(spec("bad", KeyAlgorithm::Ed25519))).unwrap();
    signd.kill9();
    let path = signd.dir.path().join("state/keys").join(&bad.location);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    signd.restart();
    let health = block_on(client.health()).unwrap();
    assert_eq!((health.keys_loaded, health.keys_unavailable), (1, 1));
    let e = block_on(client.sign("", "bad", S::Default, b"x".to_vec())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}");
    assert!(block_on(client.sign("", "good", S::Default, b"x".to_vec())).is_ok());
    let (st, out, _) = run(signetctl(&signd.socket).args(["key", "show", "bad"]));
    assert!(st.success());
    assert!(out.contains("available:  NO"), "{out}");
}

#[test]
fn config_typo_is_reported_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("signd.toml");
    std::fs::write(&cfg, "socket = \"/tmp/x.sock\"\nstate_dir = \"/tmp/x\"\n\n[roles.admin]\nuserz = [0]\n").unwrap();
    let (st, _, err) = run(Command::new(bin("signd")).arg("--config").arg(&cfg).arg("--check-config"));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:5", cfg.display())) && err.contains("userz"), "{err}");
    // The daemon itself refuses to start on it, with the same message.
    let (st, _, err) = run(Command::new(bin("signd")).arg("--config").arg(&cfg));
    assert_eq!(st.code(), Some(2));
    assert!(err.contains("userz"), "{err}");
    // An unknown user in policy is a config error too.
    std::fs::write(
        &cfg,
        "socket = \"/tmp/x.sock\"\nstate_dir = \"/tmp/x\"\n[roles.admin]\nusers = [\"no-such-user-here\"]\n",
    )
    .unwrap();
    let (st, _, err) = run(Command::new(bin("signd")).arg("--config").arg(&cfg));
    assert!(!st.success() && err.contains("no-such-user-here"), "{err}");
    // A good one passes.
    std::fs::write(&cfg, "socket = \"/tmp/x.sock\"\nstate_dir = \"/tmp/x\"\n").unwrap();
    let (st, out, err) = run(Command::new(bin("signd")).arg("--config").arg(&cfg).arg("--check-config"));
    assert!(st.success() && out.contains("config OK"), "{out}{err}");
}

#[test]
fn sd_notify_ready_and_sigterm_exit_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let notify = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut signd = SigndProcess::start_with_env("", &[("NOTIFY_SOCKET", notify.to_str().unwrap())]);
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("READY=1") {
        let n = sock.recv(&mut buf).expect("no READY=1 from signd");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        seen.push('\n');
    }
    let status = signd.terminate();
    assert!(status.success(), "{status}");
    let mut tail = String::new();
    while let Ok(n) = sock.recv(&mut buf) {
        tail.push_str(&String::from_utf8_lossy(&buf[..n]));
        if tail.contains("STOPPING=1") {
            break;
        }
    }
    assert!(tail.contains("STOPPING=1"), "{tail}");
}

#[test]
fn socket_activation_under_systemd_socket_activate() {
    let activate = std::path::Path::new("/usr/bin/systemd-socket-activate");
    assert!(activate.exists(), "systemd-socket-activate is required (Debian package systemd)");
    let dir = tempfile::tempdir().unwrap();
    let activated = dir.path().join("activated.sock");
    let cfg = dir.path().join("signd.toml");
    let uid = nix::unistd::getuid().as_raw();
    // The configured path is never bound: the activated socket must be used.
    std::fs::write(
        &cfg,
        format!(
            "socket = \"{}\"\nstate_dir = \"{}\"\n[roles.admin]\nusers = [{uid}]\nadmin = true\n",
            dir.path().join("unused.sock").display(),
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(activate)
        .arg("-l")
        .arg(&activated)
        .arg("--fdname=signd")
        .arg(bin("signd"))
        .arg("--config")
        .arg(&cfg)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !activated.exists() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = signet_ipc::SigndClient::new(&activated).unwrap();
    let health = block_on(client.health()).unwrap();
    assert!(health.ok);
    assert!(block_on(client.generate_key(spec("a", KeyAlgorithm::Ed25519))).is_ok());
    assert!(!dir.path().join("unused.sock").exists(), "signd bound its own socket despite activation");
    let _ = child.kill();
    let _ = child.wait();
}
