//! The NSS backend's failure modes over signd's real socket: wrong PIN,
//! missing database, missing token, unreadable PIN file, keys that already
//! exist on the token (by nickname and by CKA_ID), import refused, a token
//! removed and put back under a running signd, SoftHSM2's token directory
//! moved away and back.
//!
//! What an operator gets: a configuration signd cannot use at all (no
//! database, unreadable PIN file) stops signd at start with a message naming
//! the path; a token that is absent or refuses the PIN leaves signd serving
//! every other key, with the NSS keys listed as unavailable and the reason.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use signet_ipc::{block_on, AuditQuery, ErrorKind, KeyAlgorithm, KeySpec, SignatureScheme as S};
use signet_tests::{openssl_verify, run, signetctl, Backend, NssToken, RemoteSofthsm, SigndProcess, TEST_PIN};

fn openssl_spec(id: &str, algorithm: KeyAlgorithm) -> KeySpec {
    KeySpec { id: id.into(), algorithm, roles: vec![], backend: "openssl".into() }
}

/// A wrong PIN makes the NSS keys unavailable, with a problem string naming
/// the PIN file; OpenSSL keys keep signing; the PIN is not retried (that could
/// lock a real token). The right PIN and a restart bring the keys back.
fn wrong_pin(make: fn(&std::path::Path) -> NssToken) {
    let mut signd = SigndProcess::start_nss(make, "");
    let client = signd.client();
    let nss = block_on(client.generate_key(signd.spec("on-token", KeyAlgorithm::EcP256))).unwrap();
    block_on(client.generate_key(openssl_spec("on-disk", KeyAlgorithm::EcP256))).unwrap();
    let pin_file = signd.nss.as_ref().unwrap().pin_file.clone().unwrap();
    signd.kill9();
    std::fs::write(&pin_file, "0000\n").unwrap();
    signd.restart();

    let health = block_on(client.health()).unwrap();
    assert_eq!((health.keys_loaded, health.keys_unavailable), (1, 1), "{}", signd.log());
    let e = block_on(client.sign("", "on-token", S::Default, b"m".to_vec())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}");
    assert!(e.detail.contains("wrong PIN") && e.detail.contains(&pin_file.display().to_string()), "{e}");
    let (st, out, _) = run(signetctl(&signd.socket).args(["key", "show", "on-token"]));
    assert!(st.success() && out.contains("available:  NO") && out.contains("wrong PIN"), "{out}");
    let e = block_on(client.generate_key(signd.spec("another", KeyAlgorithm::EcP256))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}");
    assert!(e.detail.contains("wrong PIN"), "{e}");
    assert!(block_on(client.sign("", "on-disk", S::Default, b"m".to_vec())).is_ok());

    std::fs::write(&pin_file, format!("{}\n", pin_of(&signd))).unwrap();
    signd.restart();
    let sig = block_on(client.sign("", "on-token", S::Default, b"m".to_vec())).unwrap();
    assert!(openssl_verify(&nss.spki, S::EcdsaSha256, b"m", &sig));
}

fn pin_of(signd: &SigndProcess) -> &'static str {
    if signd.nss.as_ref().unwrap().softhsm_conf.is_some() {
        TEST_PIN
    } else {
        "softokn-password"
    }
}

#[test]
fn wrong_pin_softokn_password() {
    wrong_pin(|dir| NssToken::softokn(dir, Some("softokn-password")));
}

#[test]
fn wrong_pin_softhsm() {
    wrong_pin(NssToken::softhsm);
}

/// A configuration signd cannot use at all stops it at start, naming the path.
#[test]
fn missing_database_or_pin_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("signd.toml");
    let base = format!(
        "socket = \"{}\"\nstate_dir = \"{}\"\n",
        dir.path().join("s.sock").display(),
        dir.path().join("state").display()
    );
    let missing = dir.path().join("no-such-nssdb");
    std::fs::write(&cfg, format!("{base}[nss]\ndatabase = \"sql:{}\"\n", missing.display())).unwrap();
    let (status, err) = SigndProcess::try_start_raw(&cfg, &[], Duration::from_secs(10))
        .expect("signd started without its NSS database");
    assert!(!status.success());
    assert!(err.contains(&missing.display().to_string()) && err.contains("certutil -N"), "{err}");

    let token = NssToken::softokn(dir.path(), None);
    let pin = dir.path().join("no-such-pin");
    std::fs::write(&cfg, format!("{base}{}pin_file = \"{}\"\n", token.config(), pin.display())).unwrap();
    let (status, err) =
        SigndProcess::try_start_raw(&cfg, &[], Duration::from_secs(10)).expect("signd started without its PIN file");
    assert!(!status.success());
    assert!(err.contains(&pin.display().to_string()), "{err}");
}

/// A token that is not there: signd serves, NSS operations say which token is missing.
#[test]
fn missing_token_leaves_other_keys_serving() {
    let signd = SigndProcess::start_nss(
        |dir| {
            let mut t = NssToken::softhsm(dir);
            t.token = "not-plugged-in".into();
            t
        },
        "",
    );
    let client = signd.client();
    let e = block_on(client.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}");
    assert!(e.detail.contains("token \"not-plugged-in\" not found"), "{e}");
    let info = block_on(client.generate_key(openssl_spec("on-disk", KeyAlgorithm::Ed25519))).unwrap();
    let sig = block_on(client.sign("", "on-disk", S::Default, b"m".to_vec())).unwrap();
    assert!(openssl_verify(&info.spki, S::Ed25519, b"m", &sig));
    assert!(block_on(client.health()).unwrap().ok);
}

/// Algorithms the token cannot do get `Unsupported` ("unsupported by this
/// token") at generation: ML-DSA on both tokens, Ed25519 on softokn (NSS
/// 3.87's softokn has no Edwards mechanisms; SoftHSM2 has them, see
/// tests/signd.rs); importing into NSS is refused.
#[test]
fn unsupported_algorithms_are_typed_errors() {
    for (backend, refused) in [
        (Backend::NssSofthsm, &[KeyAlgorithm::MlDsa44, KeyAlgorithm::MlDsa87][..]),
        (Backend::NssSoftokn, &[KeyAlgorithm::Ed25519, KeyAlgorithm::MlDsa44, KeyAlgorithm::MlDsa65][..]),
    ] {
        let signd = SigndProcess::start_backend(backend, "");
        let client = signd.client();
        for &alg in refused {
            let e = block_on(client.generate_key(signd.spec(&format!("x-{}", alg.name()), alg))).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unsupported, "{backend:?} {alg}: {e}");
            assert!(e.detail.contains("unsupported by this token"), "{e}");
        }
        let pkcs8 = openssl::pkey::PKey::generate_ed25519().unwrap().private_key_to_pkcs8().unwrap();
        let e = block_on(client.import_key(signd.spec("imp", KeyAlgorithm::Ed25519), pkcs8)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
        assert_eq!(block_on(client.health()).unwrap().keys_loaded, 0);
    }
}

/// Keys made on the token with NSS's own tools are served under signd key
/// ids from `[[nss.keys]]`, by nickname or by CKA_ID, with their roles; a
/// name that matches nothing is logged and the rest are served.
#[test]
fn configured_token_keys_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let token = NssToken::softhsm(dir.path());
    let pin = token.pin_file.clone().unwrap();
    let noise = dir.path().join("noise");
    std::fs::write(&noise, [7u8; 64]).unwrap();
    for (nick, args) in
        [("root-ec", &["-k", "ec", "-q", "nistp384"][..]), ("ocsp-rsa", &["-k", "rsa", "-g", "2048"][..])]
    {
        let (st, out, err) = run(token
            .tool("certutil")
            .args([
                "-S",
                "-x",
                "-t",
                "C,,",
                "-d",
                &token.database,
                "-h",
                "signet",
                "-n",
                nick,
                "-s",
                &format!("CN={nick}"),
            ])
            .args(args)
            .arg("-f")
            .arg(&pin)
            .arg("-z")
            .arg(&noise));
        assert!(st.success(), "{out}{err}");
    }
    let (st, listing, err) =
        run(token.tool("certutil").args(["-K", "-d", &token.database, "-h", "signet", "-f"]).arg(&pin));
    assert!(st.success(), "{err}");
    // "< 1> rsa      5ce5...3c   NSS Certificate DB:ocsp-rsa" and the like.
    let cka_id = listing
        .lines()
        .find(|l| l.contains("ocsp-rsa"))
        .and_then(|l| l.split_whitespace().find(|w| w.len() == 40 && w.bytes().all(|b| b.is_ascii_hexdigit())))
        .unwrap_or_else(|| panic!("no CKA_ID in {listing}"))
        .to_owned();
    drop(token);
    let extra = format!(
        "[[nss.keys]]\nid = \"ca-root\"\nnickname = \"root-ec\"\nroles = [\"issuer\"]\n\
         [[nss.keys]]\nid = \"ocsp\"\ncka_id = \"{cka_id}\"\n\
         [[nss.keys]]\nid = \"ghost\"\nnickname = \"no-such-key\"\n"
    );
    let dir_path = dir.path().to_path_buf();
    let mut signd = SigndProcess::start_nss(move |_| reuse(&dir_path), &extra);
    let client = signd.client();
    let check = |client: &signet_ipc::SigndClient| {
        let root = block_on(client.admin_key("ca-root")).unwrap();
        assert_eq!(
            (root.algorithm, root.backend.as_str(), root.roles.clone()),
            (KeyAlgorithm::EcP384, "nss", vec!["issuer".to_owned()])
        );
        let ocsp = block_on(client.admin_key("ocsp")).unwrap();
        assert_eq!(ocsp.algorithm, KeyAlgorithm::Rsa2048);
        assert!(ocsp.location.ends_with(&cka_id), "{}", ocsp.location);
        for (info, scheme) in [(&root, S::EcdsaSha384), (&ocsp, S::RsaPssSha256), (&ocsp, S::RsaPkcs1Sha512)] {
            let sig = block_on(client.sign("", &info.id, scheme, b"configured".to_vec())).unwrap();
            assert!(openssl_verify(&info.spki, scheme, b"configured", &sig), "{} {scheme}", info.id);
        }
        assert_eq!(block_on(client.admin_key("ghost")).unwrap_err().kind, ErrorKind::UnknownKey);
    };
    check(&client);
    assert!(signd.log().contains("ghost"), "{}", signd.log());
    signd.kill9();
    signd.restart();
    check(&client);
}

/// The NssToken for a database already set up in `dir` by `NssToken::softhsm`.
fn reuse(dir: &std::path::Path) -> NssToken {
    NssToken {
        dir: dir.to_path_buf(),
        database: format!("sql:{}", dir.join("nssdb").display()),
        token: "signet".into(),
        pin_file: Some(dir.join("nss-pin")),
        softhsm_conf: Some(dir.join("softhsm2.conf")),
        extra_env: Vec::new(),
    }
}

/// A token removed from under a running signd and put back: SoftHSM2 served
/// by `p11-kit server`, whose process (holding every session, login and
/// session object of the token) is killed and later started again, as a
/// network HSM drops and returns. While it is away, signing with its keys
/// fails fast with `KeyUnavailable` and is audited; health and the OpenSSL
/// key keep working. Once it is back, the same signd signs with the token's
/// keys again (it re-initialises the module, logs in, finds the keys by
/// CKA_ID), and OpenSSL verifies the signatures.
#[test]
fn token_removed_and_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut hsm = RemoteSofthsm::new(dir.path());
    let token = hsm.token.clone();
    let signd = SigndProcess::start_nss(move |_| token, "");
    let client = signd.client();
    let ec = block_on(client.generate_key(signd.spec("hsm-ec", KeyAlgorithm::EcP256))).unwrap();
    let rsa = block_on(client.generate_key(signd.spec("hsm-rsa", KeyAlgorithm::Rsa2048))).unwrap();
    let disk = block_on(client.generate_key(openssl_spec("disk", KeyAlgorithm::EcP256))).unwrap();
    let keys = [(&ec, S::EcdsaSha256), (&rsa, S::RsaPkcs1Sha256), (&disk, S::EcdsaSha256)];
    let signs = |info: &signet_ipc::KeyInfo, scheme: S, msg: &[u8]| {
        let sig = block_on(client.sign("", &info.id, scheme, msg.to_vec()))?;
        assert!(openssl_verify(&info.spki, scheme, msg, &sig), "{} {scheme}", info.id);
        Ok::<_, signet_ipc::IpcError>(())
    };
    for (info, scheme) in keys {
        signs(info, scheme, b"before").unwrap();
    }
    // p11-kit 0.24's RPC does not carry the Edwards mechanisms, so through
    // its client module the token offers no Ed25519.
    let e = block_on(client.generate_key(signd.spec("hsm-ed", KeyAlgorithm::Ed25519))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");

    hsm.remove();
    let mut refused = 0;
    for round in 0..3 {
        for (info, scheme) in &keys[..2] {
            let start = Instant::now();
            let e = signs(info, *scheme, b"while removed").unwrap_err();
            assert!(start.elapsed() < Duration::from_secs(5), "a sign took {:?} with the token away", start.elapsed());
            assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}\n{}", signd.log());
            assert!(e.detail.contains("CKR_DEVICE_ERROR") || e.detail.contains("token \"signet\""), "{e}");
            refused += 1;
        }
        signs(&disk, S::EcdsaSha256, b"while removed").unwrap();
        assert!(block_on(client.health()).unwrap().ok);
        if round == 0 {
            let e = block_on(client.generate_key(signd.spec("while-away", KeyAlgorithm::EcP256))).unwrap_err();
            assert!(matches!(e.kind, ErrorKind::KeyUnavailable | ErrorKind::Backend), "{e}");
        }
        std::thread::sleep(Duration::from_millis(400));
    }

    hsm.insert();
    // signd re-initialises a dead module at most once a second.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match signs(&ec, S::EcdsaSha256, b"after") {
            Ok(()) => break,
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::KeyUnavailable, "{e}");
                refused += 1;
                assert!(
                    Instant::now() < deadline,
                    "the token came back but signd does not sign with it: {e}\n{}",
                    signd.log()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    signs(&rsa, S::RsaPkcs1Sha256, b"after").unwrap();
    signs(&rsa, S::RsaPssSha256, b"after").unwrap();
    signs(&disk, S::EcdsaSha256, b"after").unwrap();
    // And new keys can be made on it again.
    let new = block_on(client.generate_key(signd.spec("after", KeyAlgorithm::EcP384))).unwrap();
    signs(&new, S::EcdsaSha384, b"new").unwrap();

    // Every refusal is in the audit log, with its reason.
    let audit = block_on(client.audit(AuditQuery { after_seq: 0, limit: 10_000, newest_first: false })).unwrap();
    let failed: Vec<_> = audit.iter().filter(|r| r.operation == "sign" && !r.ok).collect();
    assert_eq!(failed.len(), refused, "{failed:#?}");
    assert!(
        failed.iter().all(|r| r.key_id.starts_with("hsm-") && r.outcome.starts_with("key-unavailable")),
        "{failed:#?}"
    );
    assert!(audit.iter().any(|r| r.operation == "generate" && r.key_id == "while-away" && !r.ok));
    assert!(signd.log().contains("re-initialised the token's PKCS #11 module"), "{}", signd.log());
}

/// SoftHSM2 used directly (its module in signd's process) has no removal:
/// its slot always reports the token present, and signd signs with session
/// copies it holds in signd's memory. Moving the token directory away from
/// under a running signd therefore does not stop signing; what does need
/// the token's files fails with a typed error (key generation:
/// CKR_GENERAL_ERROR, `backend`) and works again once the directory is back.
#[test]
fn softhsm_token_directory_moved_away_and_back() {
    let signd = SigndProcess::start_backend(signet_tests::Backend::NssSofthsm, "");
    let client = signd.client();
    let ec = block_on(client.generate_key(signd.spec("ec", KeyAlgorithm::EcP256))).unwrap();
    let ed = block_on(client.generate_key(signd.spec("ed", KeyAlgorithm::Ed25519))).unwrap();
    let tokens = signd.nss.as_ref().unwrap().dir.join("tokens");
    let away = tokens.with_file_name("tokens.away");
    std::fs::rename(&tokens, &away).unwrap();
    std::fs::create_dir(&tokens).unwrap();
    for (info, scheme) in [(&ec, S::EcdsaSha256), (&ed, S::Ed25519)] {
        let sig = block_on(client.sign("", &info.id, scheme, b"away".to_vec())).unwrap();
        assert!(openssl_verify(&info.spki, scheme, b"away", &sig), "{}", info.id);
    }
    let e = block_on(client.generate_key(signd.spec("while-away", KeyAlgorithm::EcP256))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Backend, "{e}");
    assert!(e.detail.contains("CKR_GENERAL_ERROR"), "{e}");
    std::fs::remove_dir(&tokens).unwrap();
    std::fs::rename(&away, &tokens).unwrap();
    let back = block_on(client.generate_key(signd.spec("back", KeyAlgorithm::EcP256))).unwrap();
    for (info, scheme) in [(&ec, S::EcdsaSha256), (&back, S::EcdsaSha256), (&ed, S::Ed25519)] {
        let sig = block_on(client.sign("", &info.id, scheme, b"back".to_vec())).unwrap();
        assert!(openssl_verify(&info.spki, scheme, b"back", &sig), "{}", info.id);
    }
}
