//! `--check-config` refuses what start refuses, with the same message: each
//! daemon's real binary is given a config it must not serve, once with
//! `--check-config` and once to start, and both must exit 2 with the same
//! words on stderr. Configs that start would accept pass `--check-config`.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use signet_tests::{bin, run};

/// `daemon --config config`, logging at its default level.
fn daemon(daemon: &str, config: &Path) -> Command {
    let mut cmd = Command::new(bin(daemon));
    cmd.arg("--config").arg(config).env_remove("SIGNET_LOG").env_remove("RUST_LOG").env_remove("NOTIFY_SOCKET");
    cmd
}

/// Starts `daemon` for real and waits for it to give up; it must not start.
fn start(name: &str, config: &Path) -> (ExitStatus, String) {
    let mut child = daemon(name, config).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} started on a config --check-config refuses");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks that `--check-config` and a start both refuse `text`, with the same
/// message, which contains each of `expected`.
fn refused(name: &str, dir: &Path, text: &str, expected: &[&str]) {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, text).unwrap();
    let (st, out, check_err) = run(daemon(name, &config).arg("--check-config"));
    assert_eq!(st.code(), Some(2), "{name} --check-config accepted:\n{text}\n{out}{check_err}");
    assert!(out.is_empty(), "{out}");
    assert!(check_err.starts_with(&format!("{}", config.display())), "{check_err}");
    for e in expected {
        assert!(check_err.contains(e), "expected {e:?} in: {check_err}");
    }
    let (st, start_err) = start(name, &config);
    assert_eq!(st.code(), Some(2), "{name}: {start_err}");
    assert_eq!(start_err, check_err, "{name}: start and --check-config disagree");
}

/// Checks that `--check-config` accepts `text`.
fn accepted(name: &str, dir: &Path, text: &str) {
    let config = dir.join(format!("{name}-ok.toml"));
    std::fs::write(&config, text).unwrap();
    let (st, out, err) = run(daemon(name, &config).arg("--check-config"));
    assert!(st.success(), "{name} --check-config refused:\n{text}\n{out}{err}");
    assert_eq!(out, format!("config OK: {}\n", config.display()));
}

const PROFILE: &str = "profile = { name = \"tls\", max_validity_seconds = 86400, allowed_ekus = [\"server-auth\"], \
                       default_ekus = [\"server-auth\"], allow_dns_sans = true, allowed_key_algorithms = [\"ecdsa-p256\"] }";

#[test]
fn signd_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = format!("socket = {:?}\nstate_dir = {:?}\n", d.join("signd.sock"), d.join("state"));
    accepted("signd", d, &format!("{base}socket_mode = \"0600\"\n[roles.admin]\nusers = [0]\nadmin = true\n"));

    refused("signd", d, &format!("{base}socket_mode = \"0999\"\n"), &["signd.toml:3:", "key `socket_mode`", "0999"]);
    refused("signd", d, &format!("{base}[roles.admin]\nusers = [\"no-such-user-here\"]\n"), &["no-such-user-here"]);
    let missing = d.join("no-such-ca.pem");
    refused(
        "signd",
        d,
        &format!("{base}[issuers.demo]\nkey = \"ca\"\ncertificate = {missing:?}\nroles = [\"issuer\"]\n{PROFILE}\n"),
        &["issuer `demo`", &missing.display().to_string()],
    );
    refused(
        "signd",
        d,
        &format!(
            "{base}[issuers.demo]\nkey = \"ca\"\ncertificate = {missing:?}\nroles = [\"Not A Role\"]\n{PROFILE}\n"
        ),
        &["issuer `demo`", "invalid role name `Not A Role`"],
    );
    accepted("signd", d, &format!("{base}[logs.signet2025]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\n"));
    refused(
        "signd",
        d,
        &format!("{base}[logs.signet2025]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\nscheme = \"ecdsa-sha256\"\n"),
        &["signd.toml:6:", "unknown key `scheme`"],
    );
    refused(
        "signd",
        d,
        &format!("{base}[logs.signet2025]\nkey = \"ct-key\"\nroles = [\"Not A Role\"]\n"),
        &["log `signet2025`", "invalid role name `Not A Role`"],
    );
    refused(
        "signd",
        d,
        &format!("{base}[logs.signet2025]\nkey = \"ct-key\"\nraw_signing_roles = [\"ROOT\"]\n"),
        &["log `signet2025`", "invalid role name `ROOT`"],
    );
    refused(
        "signd",
        d,
        &format!("{base}[logs.\".hidden\"]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\n"),
        &["log `.hidden`", "invalid log name"],
    );
    refused(
        "signd",
        d,
        &format!("{base}[logs.signet2025]\nroles = [\"ctlog\"]\n"),
        &["signd.toml:3:", "missing key `key`"],
    );
    let no_db = d.join("no-such-nssdb");
    refused(
        "signd",
        d,
        &format!("{base}[nss]\ndatabase = \"sql:{}\"\n", no_db.display()),
        &["NSS database", "has no cert9.db/key4.db"],
    );
    // A database directory with its files (never opened: the PIN file fails first).
    let db = d.join("nssdb");
    std::fs::create_dir(&db).unwrap();
    std::fs::write(db.join("cert9.db"), b"").unwrap();
    std::fs::write(db.join("key4.db"), b"").unwrap();
    let no_pin = d.join("no-such-pin");
    refused(
        "signd",
        d,
        &format!("{base}[nss]\ndatabase = \"sql:{}\"\npin_file = {no_pin:?}\n", db.display()),
        &["cannot read NSS PIN file", &no_pin.display().to_string()],
    );
    // Nothing was started: no socket, no state.
    assert!(!d.join("state").exists() && !d.join("signd.sock").exists());
}

#[test]
fn ocspd_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No signd listens there: before its checks moved into --check-config,
    // ocspd started and waited for signd before it looked at its registrars.
    let base = format!(
        "socket = {:?}\nstate_dir = {:?}\nsignd_socket = {:?}\nlisten = \"127.0.0.1:0\"\n",
        d.join("ocspd.sock"),
        d.join("state"),
        d.join("no-signd.sock")
    );
    accepted("ocspd", d, &format!("{base}[issuers.demo]\nregistrars = {{ users = [0] }}\n"));

    refused(
        "ocspd",
        d,
        &format!("{base}socket_mode = \"rw\"\n[issuers.demo]\n"),
        &["ocspd.toml:5:", "key `socket_mode`"],
    );
    refused(
        "ocspd",
        d,
        &format!("{base}[issuers.demo]\nregistrars = {{ users = [\"no-such-user-here\"] }}\n"),
        &["issuer `demo`: registrars", "no-such-user-here"],
    );
    refused("ocspd", d, &format!("{base}issuers = {{}}\n"), &["no [issuers.<name>] configured"]);
    refused(
        "ocspd",
        d,
        &format!("{base}[issuers.demo]\nresponse_validity_seconds = 100\nrefresh_before_seconds = 100\n"),
        &["issuer `demo`", "refresh_before_seconds"],
    );
    // The shared [http] limits: every daemon with a listener has them.
    let issuer = "[issuers.demo]\nregistrars = { users = [0] }\n";
    accepted("ocspd", d, &format!("{base}{issuer}[http]\nidle_timeout_ms = 5000\nmax_connections = 100\n"));
    refused("ocspd", d, &format!("{base}{issuer}[http]\nidle_timeout = 5\n"), &["ocspd.toml:8:", "idle_timeout"]);
    refused("ocspd", d, &format!("{base}{issuer}[http]\nheader_timeout_ms = 0\n"), &["http.header_timeout_ms"]);
    assert!(!d.join("state").exists() && !d.join("ocspd.sock").exists());
}

/// A self-signed TLS certificate and its key, PEM, in `dir`.
fn tls_files(dir: &Path) -> (PathBuf, PathBuf) {
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::PKey;
    use openssl::x509::{X509NameBuilder, X509};
    let key =
        PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "acmed.test").unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    let (cert, key_path) = (dir.join("tls.pem"), dir.join("tls-key.pem"));
    std::fs::write(&cert, b.build().to_pem().unwrap()).unwrap();
    std::fs::write(&key_path, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    (cert, key_path)
}

#[test]
fn acmed_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cert, key) = tls_files(d);
    let head = format!(
        "state_dir = {:?}\nsignd_socket = {:?}\nocspd_socket = {:?}\nissuer = \"demo\"\nlisten = \"127.0.0.1:0\"\n\
         admin_socket = {:?}\n",
        d.join("state"),
        d.join("no-signd.sock"),
        d.join("no-ocspd.sock"),
        d.join("admin.sock"),
    );
    let base = format!("{head}tls_certificate = {cert:?}\ntls_key = {key:?}\n");
    accepted("acmed", d, &base);
    accepted("acmed", d, &format!("{base}dns_resolver = \"127.0.0.1:53\"\nchain = {cert:?}\n"));

    let missing = d.join("no-such-key.pem");
    refused(
        "acmed",
        d,
        &format!("{head}tls_certificate = {cert:?}\ntls_key = {missing:?}\n"),
        &[&missing.display().to_string()],
    );
    refused("acmed", d, &format!("{base}admin_socket_mode = \"0o1777\"\n"), &["key `admin_socket_mode`"]);
    refused("acmed", d, &format!("{base}default_profile = \"nope\"\n"), &["default_profile \"nope\""]);
    refused(
        "acmed",
        d,
        &format!("{base}[admin]\nusers = [\"no-such-user-here\"]\n"),
        &["[admin]", "no-such-user-here"],
    );
    let garbage = d.join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n").unwrap();
    refused("acmed", d, &format!("{base}chain = {garbage:?}\n"), &["chain: "]);
    // [ct]: the log keys are parsed, the policy must be satisfiable, roots for https logs readable.
    let log_key = {
        use base64::Engine;
        let der = openssl::x509::X509::from_pem(&std::fs::read(&cert).unwrap()).unwrap().public_key().unwrap();
        base64::engine::general_purpose::STANDARD.encode(der.public_key_to_der().unwrap())
    };
    let ct = |extra: &str, url: &str, key: &str| {
        format!("{base}[ct]\n{extra}[[ct.logs]]\nurl = \"{url}\"\npublic_key = \"{key}\"\n")
    };
    accepted("acmed", d, &ct("timeout_ms = 500\nmin_scts = 1\n", "http://127.0.0.1:1/log/", &log_key));
    accepted("acmed", d, &format!("{}ca_file = {cert:?}\n", ct("", "https://ct.example/log/", &log_key)));
    refused("acmed", d, &ct("", "http://127.0.0.1:1/log/", "bm90IGEga2V5"), &["[[ct.logs]] #1", "public_key"]);
    refused("acmed", d, &ct("min_scts = 2\n", "http://127.0.0.1:1/log/", &log_key), &["min_scts = 2"]);
    refused(
        "acmed",
        d,
        &ct("policy = \"chrome\"\n", "http://127.0.0.1:1/log/", &log_key),
        &["policy = \"chrome\" needs at least two [[ct.logs]]"],
    );
    refused("acmed", d, &ct("", "ftp://127.0.0.1/log/", &log_key), &["not an http: or https: URL"]);
    refused(
        "acmed",
        d,
        &format!("{}ca_file = {missing:?}\n", ct("", "https://ct.example/log/", &log_key)),
        &["ca_file", &missing.display().to_string()],
    );
    refused(
        "acmed",
        d,
        &format!("{base}[profiles.p]\ndescription = \"p\"\nct = true\n"),
        &["profiles.p.ct = true needs a [ct] section"],
    );
    assert!(!d.join("state").exists() && !d.join("admin.sock").exists());
}

#[test]
fn ctlogd_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A readable root (any self-signed certificate does for the check).
    let (root, _) = tls_files(d);
    // No signd listens there: a config start would accept waits for signd, so
    // only --check-config is run on it.
    let base = format!(
        "state_dir = {:?}\nsignd_socket = {:?}\nlisten = \"127.0.0.1:0\"\nroots = [{:?}]\n",
        d.join("state"),
        d.join("no-signd.sock"),
        root
    );
    let log = format!("[logs.demo]\nstorage = {{ dir = {:?} }}\n", d.join("tiles"));
    accepted("ctlogd", d, &format!("{base}{log}"));

    refused("ctlogd", d, &format!("{base}bogus = 1\n{log}"), &["ctlogd.toml:5:", "bogus"]);
    refused("ctlogd", d, &base, &["missing key `logs`"]);
    refused("ctlogd", d, &format!("{base}logs = {{}}\n"), &["no [logs.<name>] configured"]);
    refused(
        "ctlogd",
        d,
        &format!(
            "state_dir = {:?}\nsignd_socket = \"/x\"\nlisten = \"127.0.0.1:0\"\nroots = [{:?}]\n{log}",
            d.join("state"),
            d.join("no-such-roots.pem")
        ),
        &["roots file", "no-such-roots.pem"],
    );
    refused(
        "ctlogd",
        d,
        &format!("{base}{log}not_after_start = \"2027-01-01T00:00:00Z\"\nnot_after_end = \"2026-01-01T00:00:00Z\"\n"),
        &["log `demo`", "not_after_start must be before not_after_end"],
    );
    refused("ctlogd", d, &format!("{base}[sequencing]\nmax_batch = 0\n{log}"), &["[sequencing] max_batch"]);
    refused(
        "ctlogd",
        d,
        &format!("{base}[logs.\"a/b\"]\nstorage = {{ dir = \"/t\" }}\n"),
        &["log `a/b`", "path segment"],
    );
    assert!(!d.join("state").exists() && !d.join("tiles").exists());
}

#[test]
fn probed_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = format!("state_dir = {:?}\nlisten = \"127.0.0.1:0\"\n", d.join("state"));
    let check = "[checks.web]\nkind = \"http\"\nurl = \"http://127.0.0.1:1/\"\n";
    accepted(
        "probed",
        d,
        &format!("{base}{check}expect_body_regex = \"^ok$\"\n[[webhooks]]\nurl = \"http://127.0.0.1:2/\"\n"),
    );

    // Unknown key, bad regex, bad URL: file, line and key.
    refused(
        "probed",
        d,
        &format!("{base}{check}expect_bdy = \"ok\"\n"),
        &["probed.toml:6:1:", "unknown key `expect_bdy`"],
    );
    refused(
        "probed",
        d,
        &format!("{base}{check}expect_body_regex = \"(unclosed\"\n"),
        &["probed.toml:6:", "key `expect_body_regex`", "bad regular expression"],
    );
    refused(
        "probed",
        d,
        &format!("{base}[checks.web]\nkind = \"http\"\nurl = \"http//no-scheme\"\n"),
        &["probed.toml:5:", "key `url`", "bad URL"],
    );
    refused("probed", d, &format!("{base}[checks.x]\nkind = \"tcp\"\n"), &["check `x`", "needs `address`"]);
    refused("probed", d, &format!("{base}[checks.x]\nkind = \"gopher\"\n"), &["probed.toml:4:", "gopher"]);
    refused(
        "probed",
        d,
        &format!("{base}[checks.o]\nkind = \"ocsp\"\ncertificate = {:?}\nissuer = \"/x\"\n", d.join("no-cert.pem")),
        &["check `o`", "no-cert.pem"],
    );
    refused(
        "probed",
        d,
        &format!("{base}{check}[[webhooks]]\nurl = \"http://127.0.0.1:2/\"\nchecks = [\"nope\"]\n"),
        &["webhooks[0]", "no check named `nope`"],
    );
    assert!(!d.join("state").exists());
}

#[test]
fn tokend_check_config_refuses_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = format!(
        "listen = \"127.0.0.1:0\"\nstate_dir = {:?}\nsignd_socket = {:?}\n",
        d.join("state"),
        d.join("signd.sock")
    );
    accepted("tokend", d, &format!("issuer = \"https://auth.example\"\n{base}[tokens]\nalgorithm = \"ML-DSA-44\"\n"));
    refused(
        "tokend",
        d,
        &format!("issuer = \"http://auth.example\"\n{base}"),
        &["issuer `http://auth.example`", "https"],
    );
    refused("tokend", d, &format!("issuer = \"https://auth.example/?a=b\"\n{base}"), &["no query or fragment"]);
    refused(
        "tokend",
        d,
        &format!("issuer = \"https://auth.example\"\n{base}[tokens]\nalgorithm = \"HS256\"\n"),
        &["tokens.algorithm `HS256`"],
    );
    refused(
        "tokend",
        d,
        &format!("issuer = \"https://auth.example\"\n{base}[tokens]\naccess_token_seconds = 1\n"),
        &["access_token_seconds"],
    );
    refused(
        "tokend",
        d,
        &format!("issuer = \"https://auth.example\"\n{base}[tokens]\nalgoritm = \"ES256\"\n"),
        &["tokend.toml:6:", "unknown key `algoritm`"],
    );
    refused(
        "tokend",
        d,
        &format!("issuer = \"https://auth.example\"\n{base}[admin]\nusers = [\"no-such-user-here\"]\n"),
        &["[admin]", "no-such-user-here"],
    );
    assert!(!d.join("state").exists());
}
