//! signetctl against a real signd: import, JSON output a script can rely on,
//! exit codes, and SIGHUP policy reload.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use signet_ipc::{block_on, ErrorKind, SignatureScheme};
use signet_tests::{bin, openssl_verify, run, signetctl, SigndProcess};

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn import_pkcs8_from_the_openssl_cli_then_sign_and_verify() {
    let signd = SigndProcess::start("");
    let dir = signd.dir.path();
    for (name, genpkey_args, alg) in [
        ("p384", vec!["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"], "ecdsa-p384"),
        ("ed", vec!["-algorithm", "ED25519"], "ed25519"),
        ("rsa", vec!["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], "rsa-2048"),
    ] {
        let pem = dir.join(format!("{name}.pem"));
        let (st, _, err) = run(Command::new("openssl").arg("genpkey").args(&genpkey_args).arg("-out").arg(&pem));
        assert!(st.success(), "{err}");
        // The DER form must import too.
        let der = dir.join(format!("{name}.der"));
        let (st, _, err) =
            run(Command::new("openssl").args(["pkey", "-in"]).arg(&pem).args(["-outform", "DER", "-out"]).arg(&der));
        assert!(st.success(), "{err}");
        let file = if name == "ed" { &der } else { &pem };
        let (st, out, err) =
            run(signetctl(&signd.socket).args(["--json", "key", "import", name, "-a", alg, "--file"]).arg(file));
        assert!(st.success(), "{err}");
        let info = json(&out);
        assert_eq!(info["algorithm"], alg);
        assert_eq!(info["available"], true);

        // signd's public key is the file's public key.
        let (_, ours, _) = run(signetctl(&signd.socket).args(["key", "export-public", name]));
        let (_, theirs, _) = run(Command::new("openssl").args(["pkey", "-pubout", "-in"]).arg(&pem));
        assert_eq!(ours, theirs, "{name}");

        let (st, out, err) = run(signetctl(&signd.socket).args(["--json", "sign", "--key", name, "--in"]).arg(&pem));
        assert!(st.success(), "{err}");
        let sig = base64_decode(json(&out)["signature"].as_str().unwrap());
        let spki = block_on(signd.client().admin_key(name)).unwrap().spki;
        let scheme = alg.parse::<signet_ipc::KeyAlgorithm>().unwrap().default_scheme();
        assert!(openssl_verify(&spki, scheme, &std::fs::read(&pem).unwrap(), &sig), "{name}");
    }
    // Wrong algorithm claimed, and garbage: typed errors, exit code 2.
    let (st, _, err) = run(signetctl(&signd.socket)
        .args(["key", "import", "x", "-a", "ecdsa-p256", "--file"])
        .arg(dir.join("rsa.pem")));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("wrong-algorithm"), "{err}");
    let (st, _, err) =
        run(signetctl(&signd.socket).args(["key", "import", "y", "-a", "ed25519", "--file", "/etc/hostname"]));
    assert_eq!(st.code(), Some(2), "{err}");
    // Missing file: exit 2 naming the file.
    let (st, _, err) =
        run(signetctl(&signd.socket).args(["key", "import", "z", "-a", "ed25519", "--file", "/nonexistent"]));
    assert_eq!(st.code(), Some(2));
    assert!(err.contains("/nonexistent"), "{err}");
}

#[test]
fn json_output_and_exit_codes() {
    let signd = SigndProcess::start("");
    let ctl = || signetctl(&signd.socket);
    let (st, out, _) = run(ctl().args(["--json", "key", "generate", "j", "-a", "ml-dsa-44", "--role", "issuer"]));
    assert!(st.success());
    assert_eq!(json(&out)["roles"][0], "issuer");
    let (_, out, _) = run(ctl().args(["--json", "key", "list"]));
    assert_eq!(json(&out).as_array().unwrap().len(), 1);
    let (_, out, _) = run(ctl().args(["--json", "health"]));
    let h = json(&out);
    assert_eq!((h["ok"].as_bool(), h["keys_loaded"].as_u64()), (Some(true), Some(1)));
    let (_, out, _) = run(ctl().args(["--json", "whoami"]));
    assert_eq!(json(&out)["admin"], true);
    let (st, _, _) = run(ctl().args(["--json", "sign", "--key", "j", "--in", "/dev/null"]));
    assert!(st.success());
    let (_, out, _) = run(ctl().args(["--json", "audit", "--newest", "--limit", "1"]));
    let a = json(&out);
    assert_eq!(a[0]["operation"], "sign");
    assert_eq!(a[0]["message_sha256"], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

    // Exit codes: 2 bad arguments (clap) and bad requests, 4 unknown key, 5 no signd.
    let (st, _, _) = run(ctl().args(["key", "generate", "q", "-a", "rsa-1024"]));
    assert_eq!(st.code(), Some(2));
    let (st, _, _) = run(ctl().args(["sign", "--key", "nope", "--in", "/dev/null"]));
    assert_eq!(st.code(), Some(4));
    let (st, _, err) = run(Command::new(bin("signetctl")).args(["--socket", "/nonexistent/signd.sock", "health"]));
    assert_eq!(st.code(), Some(5), "{err}");
    assert!(err.contains("/nonexistent/signd.sock"), "{err}");
    // --help works everywhere.
    for args in
        [&["--help"][..], &["key", "--help"], &["key", "generate", "--help"], &["sign", "--help"], &["audit", "--help"]]
    {
        let (st, out, _) = run(ctl().args(args));
        assert!(st.success() && out.contains("Usage"), "{args:?}");
    }
}

/// For people, `key show` and `audit` print times in RFC 3339, UTC (the audit
/// log's with nanoseconds); `--json` keeps the raw numbers.
#[test]
fn human_output_shows_rfc3339_times() {
    use time::format_description::well_known::Rfc3339;
    use time::OffsetDateTime;
    let signd = SigndProcess::start("");
    let ctl = || signetctl(&signd.socket);
    let (st, out, err) = run(ctl().args(["--json", "key", "generate", "t", "-a", "ed25519"]));
    assert!(st.success(), "{err}");
    let created = json(&out)["created_unix_secs"].as_i64().expect("created_unix_secs is a number");
    let (st, out, err) = run(ctl().args(["key", "show", "t"]));
    assert!(st.success(), "{err}");
    let shown = out.lines().find_map(|l| l.strip_prefix("created:")).expect("a created line").trim();
    assert_eq!(shown, OffsetDateTime::from_unix_timestamp(created).unwrap().format(&Rfc3339).unwrap());
    assert!(shown.len() == 20 && shown.ends_with('Z'), "{shown}");

    let (st, _, err) = run(ctl().args(["sign", "--key", "t", "--in", "/dev/null"]));
    assert!(st.success(), "{err}");
    let (_, out, _) = run(ctl().args(["--json", "audit", "--newest", "--limit", "1"]));
    let record = &json(&out)[0];
    let nanos = record["time_unix_nanos"].as_i64().expect("time_unix_nanos is a number");
    let (st, out, err) = run(ctl().args(["audit", "--newest", "--limit", "1"]));
    assert!(st.success(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(fields[0], record["seq"].to_string(), "{out}");
    let time = fields[1];
    assert!(time.len() == 30 && time.ends_with('Z'), "{time}");
    assert_eq!(OffsetDateTime::parse(time, &Rfc3339).unwrap().unix_timestamp_nanos(), i128::from(nanos), "{out}");
    assert_eq!(fields[2], "sign", "{out}");
}

/// `ca init --reuse-keys` finishes a ceremony that stopped after making some of
/// its keys (scripts/run reruns it so); without the flag an existing key is
/// refused, and with it a key of another algorithm than the one asked for.
#[test]
fn ca_init_reuse_keys_finishes_an_interrupted_ceremony() {
    let signd = SigndProcess::start("");
    let ctl = || signetctl(&signd.socket);
    let ca = signd.dir.path().join("ca");
    // The ceremony's first key, as if it had been interrupted just after.
    let (st, _, err) = run(ctl().args(["key", "generate", "x-root", "-a", "ecdsa-p256"]));
    assert!(st.success(), "{err}");
    let init = |extra: &[&str]| {
        run(ctl()
            .args(["ca", "init", "--name", "x", "--issuer-role", "admin", "--ocsp-role", "admin", "--dir"])
            .arg(&ca)
            .args(extra))
    };
    let (st, _, err) = init(&[]);
    assert!(!st.success(), "{err}");
    let (st, _, err) = init(&["--reuse-keys", "--algorithm", "ecdsa-p384"]);
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("x-root") && err.contains("ecdsa-p256"), "{err}");
    assert!(!ca.join("signd-issuer.toml").exists());

    let (st, out, err) = init(&["--reuse-keys"]);
    assert!(st.success(), "{out}{err}");
    // The root certificate is for the key made before.
    let (_, root_key, _) =
        run(Command::new("openssl").args(["x509", "-noout", "-pubkey", "-in"]).arg(ca.join("root.pem")));
    let (_, kept, _) = run(ctl().args(["key", "export-public", "x-root"]));
    assert_eq!(root_key, kept);
    let mut files: Vec<String> =
        std::fs::read_dir(&ca).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["chain.pem", "issuing.pem", "profile.toml", "responder.pem", "root.pem", "signd-issuer.toml"]);
    let (_, out, _) = run(ctl().args(["--json", "key", "list"]));
    assert_eq!(json(&out).as_array().unwrap().len(), 3, "{out}");
}

#[test]
fn sighup_reloads_policy() {
    let signd = SigndProcess::start("");
    block_on(signd.client().generate_key(signet_ipc::KeySpec {
        id: "k".into(),
        algorithm: signet_ipc::KeyAlgorithm::EcP256,
        roles: vec![],
        backend: String::new(),
    }))
    .unwrap();
    let as_nobody = || {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin("signetctl"))
            .env("SIGNET_SIGND_SOCKET", &signd.socket)
            .args(["sign", "--key", "k", "--in", "/dev/null"]);
        run(&mut c).0.code()
    };
    assert_eq!(as_nobody(), Some(3));
    let mut config = std::fs::read_to_string(&signd.config).unwrap();
    config.push_str("\n[roles.late]\nusers = [65534]\nkeys = [\"k\"]\n");
    std::fs::write(&signd.config, config).unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(signd.pid() as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while as_nobody() != Some(0) {
        assert!(std::time::Instant::now() < deadline, "policy not reloaded; log:\n{}", signd.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A broken config on reload keeps the old policy and signd serving.
    std::fs::write(&signd.config, "this is not toml [").unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(signd.pid() as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(as_nobody(), Some(0));
    assert!(signd.log().contains("reload failed"), "{}", signd.log());
    let sig = block_on(signd.client().sign("", "k", SignatureScheme::Default, b"m".to_vec()));
    assert!(sig.is_ok());
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// SIGTERM while a slow call is in progress: signd stops accepting, answers the
/// call, refuses at once the calls that arrive on connections already open
/// (`shutting-down`), and exits as soon as the slow call is answered.
#[test]
fn sigterm_drains_calls_in_progress() {
    let mut signd = SigndProcess::start("");
    let client = signd.client();
    let spec =
        |id: &str, algorithm| signet_ipc::KeySpec { id: id.into(), algorithm, roles: vec![], backend: String::new() };
    block_on(client.generate_key(spec("slow", signet_ipc::KeyAlgorithm::Rsa4096))).unwrap();
    block_on(client.generate_key(spec("fast", signet_ipc::KeyAlgorithm::EcP256))).unwrap();
    // A second caller whose connection is open before the stop begins.
    let late = signd.client();
    block_on(late.sign("", "fast", SignatureScheme::Default, b"before".to_vec())).unwrap();
    // About a second of signing on this machine: 400 RSA-4096 signatures.
    let batch = vec![b"m".to_vec(); 400];
    let cpu_before = cpu_ticks(signd.pid());
    let pending = std::thread::spawn(move || {
        let answer = block_on(client.sign_batch("", "slow", SignatureScheme::Default, batch));
        (answer, std::time::Instant::now())
    });
    // Wait until signd is visibly signing (its CPU time grows by 0.1 s), so the
    // call is inside signd when SIGTERM arrives, however loaded the machine is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while cpu_ticks(signd.pid()) < cpu_before + 10 {
        assert!(std::time::Instant::now() < deadline, "signd never started signing");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let started = std::time::Instant::now();
    signd.send_sigterm();
    // Calls on the open connection are served until signd has seen the
    // signal, then refused, each at once.
    let refused = loop {
        let asked = std::time::Instant::now();
        match block_on(late.sign("", "fast", SignatureScheme::Default, b"after".to_vec())) {
            Ok(_) => {}
            Err(e) => break (e, asked.elapsed(), std::time::Instant::now()),
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "signd kept serving new calls after SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let (status, exited) = signd.wait_exit();
    assert!(status.success(), "{status}");
    let (answer, answered) = pending.join().unwrap();
    let waited = exited - started;
    assert_eq!(
        answer
            .unwrap_or_else(|e| panic!("in-progress call was dropped: {e}; waited {waited:?}; log:\n{}", signd.log()))
            .len(),
        400
    );
    let (error, took, at) = refused;
    assert_eq!(error.kind, ErrorKind::ShuttingDown, "{error}");
    assert!(took < std::time::Duration::from_millis(500), "the refusal took {took:?}");
    assert!(at < answered, "the new call was refused only after the call in progress ended");
    assert!(
        waited > std::time::Duration::from_millis(100),
        "signd exited in {waited:?}: the call had already finished, nothing was drained"
    );
    let linger = exited.saturating_duration_since(answered);
    assert!(linger < std::time::Duration::from_secs(1), "signd exited {linger:?} after the last call was answered");
}

/// utime + stime of a process, in clock ticks (normally 1/100 s), from /proc.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// `signetctl ... | head`: when the reader goes away, signetctl stops quietly
/// (status 0, nothing on stderr) rather than panicking on the broken pipe.
#[test]
fn a_closed_stdout_ends_signetctl_quietly() {
    let signd = SigndProcess::start("");
    for i in 0..20 {
        let (st, _, err) = run(signetctl(&signd.socket).args(["key", "generate", &format!("k{i}"), "-a", "ed25519"]));
        assert!(st.success(), "{err}");
    }
    let mut child = signetctl(&signd.socket)
        .args(["audit", "--limit", "1000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before signetctl writes anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// signetctl as another uid (needs root, as the whole suite does).
fn as_user(socket: &std::path::Path, uid: &str, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let mut c = Command::new("setpriv");
    c.args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups"])
        .arg(bin("signetctl"))
        .env("SIGNET_SIGND_SOCKET", socket)
        .args(args)
        .stdin(std::process::Stdio::null());
    run(&mut c)
}

#[test]
fn key_list_and_public_keys_follow_the_roles_permissions_as_libpki_does() {
    let signd = SigndProcess::start(
        "[roles.reader]\nusers = [65534]\nkeys = [\"pub-*\"]\noperations = [\"list\", \"public-key\"]\n\
         [roles.signer]\nusers = [65533]\nkeys = [\"pub-*\"]\noperations = [\"sign\"]\n",
    );
    let client = signd.client();
    for id in ["pub-a", "pub-b", "secret"] {
        block_on(client.generate_key(signd.spec(id, signet_ipc::KeyAlgorithm::EcP256))).unwrap();
    }
    // The reader lists what its role may list (as pki_list_keys does), not every key.
    let (st, out, err) = as_user(&signd.socket, "65534", &["--json", "key", "list"]);
    assert!(st.success(), "{err}");
    let ids: Vec<String> =
        json(&out).as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, ["pub-a", "pub-b"]);
    // Its public keys, identical to what the admin exports.
    let (st, theirs, err) = as_user(&signd.socket, "65534", &["key", "export-public", "pub-a"]);
    assert!(st.success(), "{err}");
    let (_, ours, _) = run(signetctl(&signd.socket).args(["key", "export-public", "pub-a"]));
    assert_eq!(theirs, ours);
    let (st, out, err) = as_user(&signd.socket, "65534", &["--json", "key", "show", "pub-b"]);
    assert!(st.success(), "{err}");
    assert_eq!(json(&out)["id"], "pub-b");
    // Outside the role's keys, and for a role without the permissions: refused, exit 3.
    let (st, _, err) = as_user(&signd.socket, "65534", &["key", "export-public", "secret"]);
    assert_eq!(st.code(), Some(3), "{err}");
    let (st, _, err) = as_user(&signd.socket, "65533", &["key", "list"]);
    assert_eq!(st.code(), Some(3), "{err}");
    // The admin still sees every key.
    let (_, out, _) = run(signetctl(&signd.socket).args(["--json", "key", "list"]));
    assert_eq!(json(&out).as_array().unwrap().len(), 3);
}

#[test]
fn a_socket_the_caller_may_not_open_is_a_permission_problem_with_a_hint() {
    let signd = SigndProcess::start("");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&signd.socket, std::fs::Permissions::from_mode(0o660)).unwrap();
    let (st, _, err) = as_user(&signd.socket, "65534", &["health"]);
    assert_eq!(st.code(), Some(3), "{err}");
    assert!(err.contains("Permission denied") && err.contains("mode 0660") && err.contains("ask to be added"), "{err}");
    // A socket that is not there is an outage, not a permission problem.
    let (st, _, err) = as_user(&signd.dir.path().join("nope.sock"), "65534", &["health"]);
    assert_eq!(st.code(), Some(5), "{err}");
}

/// `signetctl oauth` without a tokend (tokend's own tests drive it against
/// one): unavailable is exit 5 naming the socket, bad arguments exit 2, and
/// `oauth key rotate` makes the key in signd first, so a tokend that was down
/// finds it at its next refresh; the failure says so.
#[test]
fn oauth_without_tokend() {
    let signd = SigndProcess::start("");
    let none = signd.dir.path().join("tokend.sock");
    let ctl = || {
        let mut c = signetctl(&signd.socket);
        c.env("SIGNET_TOKEND_SOCKET", &none);
        c
    };
    for args in [&["oauth", "client", "list"][..], &["oauth", "key", "list"], &["oauth", "health"]] {
        let (st, _, err) = run(ctl().args(args));
        assert_eq!(st.code(), Some(5), "{args:?}: {err}");
        assert!(err.contains(none.to_str().unwrap()), "{err}");
    }
    let (st, _, err) = run(ctl().args(["oauth", "client", "create", "c"]));
    assert_eq!(st.code(), Some(2), "no --auth-method: {err}");
    let (st, _, err) = run(ctl().args(["oauth", "key", "rotate", "-a", "rsa-1024"]));
    assert_eq!(st.code(), Some(2), "{err}");

    let (st, _, err) = run(ctl().args(["oauth", "key", "rotate", "-a", "ecdsa-p256"]));
    assert_eq!(st.code(), Some(5), "{err}");
    assert!(err.contains("was generated in signd"), "{err}");
    let (_, out, _) = run(ctl().args(["--json", "key", "list"]));
    let keys = json(&out);
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 1, "{out}");
    assert!(keys[0]["id"].as_str().unwrap().starts_with("tokend-ecdsa-p256-"), "{out}");
    assert_eq!((&keys[0]["algorithm"], &keys[0]["roles"][0]), (&"ecdsa-p256".into(), &"tokend".into()), "{out}");
    for args in
        [&["oauth", "--help"][..], &["oauth", "client", "create", "--help"], &["oauth", "key", "rotate", "--help"]]
    {
        let (st, out, _) = run(ctl().args(args));
        assert!(st.success() && out.contains("Usage"), "{args:?}");
    }
}
