//! `signetctl backup` and `signetctl restore` on the whole appliance, real
//! processes: signd (the demo CA, a CT log key, a token key), ocspd, acmed
//! (SCTs from the log), ctlogd (tiles in a local directory) and tokend.
//!
//! A backup taken while CT submissions, token requests and revocations run is
//! restored, after every daemon was killed, into a fresh directory; the
//! daemons started on the restored state answer as before: OCSP statuses
//! (every revocation acknowledged before the backup began among them), the
//! CT log (checkpoint and tiles verify with `signetctl ct verify`, every
//! entry acknowledged before the backup began is at its SCT's index, and new
//! entries are accepted), the temporal shard added while it ran (`signetctl
//! ct shard add`: served again with its key, entries and tree), tokens (one minted before still introspects active
//! and verifies against the restored JWKS; those revoked stay revoked), the
//! ACME account and certificate, and the issuing CA rotated before the backup (the new
//! CA's certificate answered by OCSP, new certificates issued by it). A backup without `--include-private-keys`
//! holds no private key; restore refuses a target that is not empty and a
//! backup with a flipped byte; private keys on an NSS token are refused.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use signet_ct::rfc6962::api::{AddChainResponse, GetEntriesResponse, GetSthResponse};
use signet_ct::staticct::parse_leaf_index;
use signet_ct::{Sct, SignedEntry, TimestampedEntry};
use signet_ipc::{block_on, KeyAlgorithm};
use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::Jwks;
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::ctlog::{rfc3339, unix_now, CtPki, Ctlogd, LogInfo, LogSpec, TEST_SEQUENCING};
use signet_tests::pki::Pki;
use signet_tests::tokend::{signd_role, OauthClient, Tokend};
use signet_tests::{bin, run, Backend, SigndProcess};

const API: &str = "https://api.signet.test";
const DAY: i64 = 86_400;

/// The appliance: every daemon's config is `<dir>/<daemon>.toml`.
struct Appliance {
    stack: AcmeStack,
    ct: Ctlogd,
    tokend: Tokend,
    dir: PathBuf,
    /// The NotAfter window of the next CT shard, after the configured log's.
    next_window: (i64, i64),
}

/// The CT log `demo` takes certificates expiring within a year (acmed's among
/// them); a shard `next` is added for the year after.
fn start_appliance(root: &CtPki) -> Appliance {
    let mut stack = AcmeStack::start("");
    let dir = stack.pki.dir.clone();
    // tokend's role: loaded when Ctlogd restarts signd with the log's key.
    let config = std::fs::read_to_string(&stack.pki.signd.config).unwrap();
    std::fs::write(&stack.pki.signd.config, format!("{config}\n{}", signd_role())).unwrap();
    // The log takes acmed's precertificates (the demo CA) and the test root's leaves.
    let roots = dir.join("ct-roots.pem");
    let ca_root = std::fs::read_to_string(stack.pki.ca("root.pem")).unwrap();
    std::fs::write(&roots, format!("{ca_root}{}", String::from_utf8(root.root.to_pem().unwrap()).unwrap())).unwrap();
    let today = unix_now() - unix_now() % DAY;
    let (demo_window, next_window) = ((today - DAY, today + 365 * DAY), (today + 365 * DAY, today + 730 * DAY));
    let demo = LogSpec::new("demo").window(demo_window.0, demo_window.1);
    let mut ct = Ctlogd::start_logs(&mut stack.pki.signd, &dir, &roots, &[demo], TEST_SEQUENCING);
    std::fs::rename(&ct.config, dir.join("ctlogd.toml")).unwrap();
    ct.config = dir.join("ctlogd.toml");
    let tokend = Tokend::start(&stack.pki.signd, &dir, "tok-es256", "ecdsa-p256", "");
    stack.reconfigure_acmed(&format!(
        "[ct]\ntimeout_ms = 5000\nmin_scts = 1\n[[ct.logs]]\nurl = \"{}\"\npublic_key = \"{}\"\n",
        ct.url(),
        ct.public_key_b64()
    ));
    Appliance { stack, ct, tokend, dir, next_window }
}

/// `signetctl` against the appliance in `dir` for ctlogd's admin interface.
fn ct_admin(signd_socket: &Path, dir: &Path) -> Command {
    let mut c = signet_tests::signetctl(signd_socket);
    c.env("SIGNET_CTLOGD_SOCKET", dir.join("ctlogd-demo").join("db").join("admin.sock"));
    c
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn basic(c: &OauthClient) -> String {
    format!("Authorization: Basic {}", STANDARD.encode(format!("{}:{}", c.id, c.secret)))
}

/// A client_credentials access token.
fn mint(t: &Tokend, c: &OauthClient) -> String {
    let (st, body) = t.post("/token", "grant_type=client_credentials&scope=read", &["-H", &basic(c)]);
    assert_eq!(st, 200, "token: {body}");
    json_of(&body)["access_token"].as_str().unwrap().to_owned()
}

fn introspect_active(t: &Tokend, c: &OauthClient, token: &str) -> bool {
    let (st, body) = t.post("/introspect", &format!("token={token}"), &["-H", &basic(c)]);
    assert_eq!(st, 200, "introspect: {body}");
    json_of(&body)["active"].as_bool().unwrap()
}

/// `openssl ocsp` against ocspd: "good" or "revoked", the response verified.
fn ocsp_status(pki: &Pki, cert: &Path, extra: &[&str]) -> &'static str {
    let text = pki.openssl_ocsp(cert, extra);
    assert!(text.contains("Response verify OK"), "not verified: {text}");
    let line = format!("{}: ", cert.display());
    match text.lines().find_map(|l| l.strip_prefix(&line)) {
        Some("good") => "good",
        Some("revoked") => "revoked",
        other => panic!("{}: status {other:?}: {text}", cert.display()),
    }
}

fn signetctl(args: &[&str]) -> (std::process::ExitStatus, String, String) {
    run(Command::new(bin("signetctl")).args(args))
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file below `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn holds_private_key(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    bytes.windows(16).any(|w| w == b"PRIVATE KEY-----")
}

fn manifest(backup: &Path) -> Value {
    json_of(&std::fs::read_to_string(backup.join("manifest.json")).unwrap())
}

/// What the write load saw acknowledged, each with when.
#[derive(Default)]
struct Acked {
    /// CT: the entry submitted and its SCT.
    entries: Mutex<Vec<(SignedEntry, Sct, Instant)>>,
    /// Tokens, and whether the load revoked it (acknowledged at the instant).
    tokens: Mutex<Vec<(String, bool, Instant)>>,
    /// Certificates revoked: (file, serial).
    revoked: Mutex<Vec<(PathBuf, String, Instant)>>,
}

#[test]
fn a_backup_taken_under_load_restores_an_appliance_that_answers_as_before() {
    let root = CtPki::new("backup test root");
    let not_after = unix_now() + 10 * 86_400;
    let mut a = start_appliance(&root);
    let dir = a.dir.clone();
    let work = tempfile::tempdir().unwrap();
    let backup = work.path().join("backup");

    // Before the load: an ACME certificate with its SCT, certificates issued
    // through signetctl (one revoked), a token.
    let (acme_key, acme_kid, acme_cert_url, acme_pem) = {
        let mut c = Client::new(&a.stack);
        c.register();
        let names = ["backup.signet.test"];
        let (_, order) = c.new_order(&names);
        c.authorize_dns01(&order);
        let r = c.finalize(&order, &Client::csr(&names));
        assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
        let url = r.json()["certificate"].as_str().unwrap().to_owned();
        let pem = String::from_utf8(c.post(&url, None).body).unwrap();
        (c.key.clone(), c.kid.clone().unwrap(), url, pem)
    };
    let acme_cert = dir.join("acme-issued.pem");
    std::fs::write(&acme_cert, &acme_pem).unwrap();
    // The issuing CA rotated: acmed issues from the new one (demo-2), the old one
    // keeps answering for what it issued.
    let new_ca = work.path().join("demo-2.pem");
    let (st, out, err) =
        run(a.stack.signetctl().args(["ca", "rotate-issuer", "--new-name", "demo-2", "--out", path_str(&new_ca)]));
    assert!(st.success(), "rotate-issuer: {out}{err}");
    let new_ca_subject = subject_of(&std::fs::read_to_string(&new_ca).unwrap());
    // The root, public: kept aside to verify OCSP answers with after the restore.
    let root_pem = work.path().join("root.pem");
    std::fs::copy(a.stack.pki.ca("root.pem"), &root_pem).unwrap();
    let rotated_cert = work.path().join("rotated-issued.pem");
    {
        let mut c = Client::new(&a.stack);
        c.register();
        let chain = c.issue(&["rotated.backup.test"]);
        assert_eq!(issuer_of(&chain), new_ca_subject, "issued after the rotation");
        std::fs::write(&rotated_cert, chain).unwrap();
    }
    let (good, _) = a.stack.pki.issue("good.backup.test");
    let (revoked, revoked_serial) = a.stack.pki.issue("revoked.backup.test");
    let (st, out, err) = run(a.stack.pki.signetctl().args(["cert", "revoke", &revoked_serial]));
    assert!(st.success(), "{out}{err}");
    let client =
        a.tokend.create_client("svc", &["--auth-method", "client_secret_basic", "--audience", API, "--scope", "read"]);
    let token0 = mint(&a.tokend, &client);
    // A temporal CT shard added while the appliance runs, with entries of its own.
    let next = a.next_window;
    let (st, out, err) = run(ct_admin(&a.stack.pki.signd.socket, &dir).args([
        "ct",
        "shard",
        "add",
        "--name",
        "next",
        "--not-after-start",
        &rfc3339(next.0),
        "--not-after-end",
        &rfc3339(next.1),
    ]));
    assert!(st.success(), "ct shard add: {out}{err}\n{}", a.ct.log());
    let next_key = block_on(a.stack.pki.signd.client().ct_log_public_key("next")).unwrap();
    a.ct.logs.push(LogInfo { name: "next".into(), public_key: next_key.clone() });
    let next_entries: Vec<_> = (0..8).map(|i| root.cert(2_000_000 + i, next.0 + 10 * DAY)).collect();
    let next_acked: Vec<_> = next_entries.iter().enumerate().map(|(i, e)| (i, a.ct.submit_ok("next", e))).collect();
    a.ct.wait_for_size("next", next_entries.len() as u64);

    // The write load, and the backup in the middle of it.
    let stop = AtomicBool::new(false);
    let acked = Acked::default();
    let (t_backup, t_backup_end, report) = std::thread::scope(|s| {
        let (stop, acked, ct, root, tokend, client, pki) =
            (&stop, &acked, &a.ct, &root, &a.tokend, &client, &a.stack.pki);
        for w in 0..2u32 {
            s.spawn(move || {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let entry = root.cert(i, not_after);
                    let (status, body) = ct.submit(ct.name(), &entry);
                    if status == 200 {
                        let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
                        acked.entries.lock().unwrap().push((entry.entry, sct, Instant::now()));
                    }
                    i += 2;
                }
            });
        }
        s.spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let token = mint(tokend, client);
                let revoke = n % 2 == 1;
                if revoke {
                    let (st, body) = tokend.post("/revoke", &format!("token={token}"), &["-H", &basic(client)]);
                    assert_eq!(st, 200, "revoke: {body}");
                }
                acked.tokens.lock().unwrap().push((token, revoke, Instant::now()));
                n += 1;
            }
        });
        s.spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let (cert, serial) = pki.issue(&format!("load{n}.backup.test"));
                let (st, out, err) = run(pki.signetctl().args(["cert", "revoke", &serial]));
                assert!(st.success(), "{out}{err}");
                acked.revoked.lock().unwrap().push((cert, serial, Instant::now()));
                n += 1;
            }
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        while acked.entries.lock().unwrap().len() < 60
            || acked.tokens.lock().unwrap().len() < 6
            || acked.revoked.lock().unwrap().len() < 2
        {
            assert!(Instant::now() < deadline, "the load does not get going");
            std::thread::sleep(Duration::from_millis(20));
        }
        let t_backup = Instant::now();
        let (st, out, err) = run(Command::new(bin("signetctl"))
            .args(["--json", "backup", path_str(&backup), "--config-dir", path_str(&dir)])
            .arg("--include-private-keys"));
        let t_end = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        assert!(st.success(), "backup: {out}{err}");
        (t_backup, t_end, json_of(&out))
    });
    let during = |t: &Instant| *t > t_backup && *t < t_backup_end;
    let entries = acked.entries.into_inner().unwrap();
    let tokens = acked.tokens.into_inner().unwrap();
    let revocations = acked.revoked.into_inner().unwrap();
    let writes_during = entries.iter().filter(|e| during(&e.2)).count()
        + tokens.iter().filter(|t| during(&t.2)).count()
        + revocations.iter().filter(|r| during(&r.2)).count();
    eprintln!(
        "backup took {:?}; acknowledged meanwhile: {} CT entries, {} tokens, {} revocations ({writes_during} during the backup)",
        t_backup_end - t_backup,
        entries.len(),
        tokens.len(),
        revocations.len()
    );
    assert!(writes_during > 0, "no write was acknowledged while the backup ran");

    // What the backup says it took: every configured daemon's store, private keys.
    assert_eq!(report["private_keys"], true, "{report}");
    for d in report["daemons"].as_array().unwrap() {
        let name = d["name"].as_str().unwrap();
        if name == "probed" {
            assert_eq!(d["configured"], false, "{d}");
            assert!(d["notes"][0].as_str().unwrap().contains("not configured"), "{d}");
        } else {
            assert_eq!(d["configured"], true, "{d}");
            assert_eq!(d["stores"].as_array().unwrap().len(), 1, "{name}: one store copied: {d}");
        }
    }
    let m = manifest(&backup);
    assert_eq!(m["private_keys"], true);
    let files = m["files"].as_array().unwrap();
    let of_kind = |k: &str| files.iter().filter(|f| f["kind"] == k).collect::<Vec<_>>();
    assert!(of_kind("ct-tile").len() >= 3, "tiles of the local log");
    assert!(
        of_kind("ct-tile").iter().any(|f| f["original"].as_str().unwrap().contains("/db/shards/next/")),
        "tiles of the added shard"
    );
    assert!(!files.iter().any(|f| f["original"].as_str().unwrap().ends_with("/checkpoint")));
    let keys = of_kind("private-key");
    assert!(keys.iter().any(|f| f["original"].as_str().unwrap().ends_with("/state/keys/demo-issuing.pem")), "{keys:?}");
    for k in keys.iter().filter(|f| f["original"].as_str().unwrap().contains("/state/keys/")) {
        assert_eq!(k["mode"], 0o600, "{k}");
        let copy = backup.join(k["path"].as_str().unwrap());
        assert_eq!(std::fs::metadata(copy).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // A backup without the flag (the appliance still running): no private key at all.
    let plain = work.path().join("plain");
    let (st, out, err) = signetctl(&["--json", "backup", path_str(&plain), "--config-dir", path_str(&dir)]);
    assert!(st.success(), "{out}{err}");
    let report_plain = json_of(&out);
    let mp = manifest(&plain);
    assert_eq!(mp["private_keys"], false);
    assert!(!mp["files"].as_array().unwrap().iter().any(|f| f["kind"] == "private-key"), "{mp}");
    for f in files_under(&plain) {
        assert!(!holds_private_key(&f), "{} holds a private key", f.display());
        assert!(!f.to_string_lossy().contains("/state/keys/"), "{}", f.display());
    }
    let left_out: Vec<String> = report_plain["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["left_out"].as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap().to_owned()))
        .collect();
    for want in [dir.join("state/keys"), dir.join("acmed-tls.key")] {
        assert!(left_out.contains(&want.display().to_string()), "{want:?} not among {left_out:?}");
    }

    // Disaster: every daemon gone.
    a.stack.kill9_acmed();
    a.tokend.kill9();
    a.ct.kill9();
    a.stack.pki.kill9_ocspd();
    a.stack.pki.signd.kill9();

    // Restore refuses a target that is not empty, and writes nothing there.
    let busy = work.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep"), "mine").unwrap();
    let map_busy = format!("{}={}", dir.display(), busy.display());
    let (st, out, err) = signetctl(&["restore", path_str(&backup), "--map", &map_busy]);
    assert_eq!(st.code(), Some(2), "{out}{err}");
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    // ... and a backup with one flipped byte in a store copy, naming the file.
    let damaged = work.path().join("damaged");
    assert!(Command::new("cp").arg("-a").arg(&plain).arg(&damaged).status().unwrap().success());
    let signd_store =
        mp["files"].as_array().unwrap().iter().find(|f| f["kind"] == "lmdb" && f["daemons"][0] == "signd").unwrap()
            ["path"]
            .as_str()
            .unwrap()
            .to_owned();
    let copy = damaged.join(&signd_store);
    let mut bytes = std::fs::read(&copy).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&copy, &bytes).unwrap();
    let fresh = work.path().join("fresh");
    let map_fresh = format!("{}={}", dir.display(), fresh.display());
    let (st, out, err) = signetctl(&["restore", path_str(&damaged), "--map", &map_fresh]);
    assert_eq!(st.code(), Some(1), "{out}{err}");
    assert!(err.contains(path_str(&copy)) && err.contains("damaged"), "{err}");
    assert!(!fresh.exists(), "restore wrote before the backup was checked");

    // The restore, into a fresh directory: configs rewritten to it.
    let restored = work.path().join("restored");
    let map = format!("{}={}", dir.display(), restored.display());
    let (st, out, err) = signetctl(&["--json", "restore", path_str(&backup), "--map", &map]);
    assert!(st.success(), "restore: {out}{err}");
    let r = json_of(&out);
    assert_eq!((r["restored"].as_bool(), r["private_keys"].as_bool()), (Some(true), Some(true)), "{r}");
    for name in ["signd", "ocspd", "acmed", "ctlogd", "tokend"] {
        let text = std::fs::read_to_string(restored.join(format!("{name}.toml"))).unwrap();
        assert!(!text.contains(path_str(&dir)), "{name}.toml still names {}:\n{text}", dir.display());
        assert!(text.contains(path_str(&restored)), "{name}.toml:\n{text}");
    }

    // The appliance, started from the restored state only.
    let signd = &mut a.stack.pki.signd;
    signd.config = restored.join("signd.toml");
    signd.socket = restored.join("signd.sock");
    signd.restart();
    a.stack.pki.dir = restored.clone();
    a.stack.pki.ocspd_config = restored.join("ocspd.toml");
    a.stack.pki.ocspd_socket = restored.join("ocspd.sock");
    a.stack.pki.start_ocspd();
    a.ct.config = restored.join("ctlogd.toml");
    a.ct.spawn();
    a.tokend.config = restored.join("tokend.toml");
    a.tokend.admin_socket = restored.join("tokend-admin.sock");
    a.tokend.signd_socket = restored.join("signd.sock");
    a.tokend.spawn();
    a.stack.config = restored.join("acmed.toml");
    a.stack.admin_socket = restored.join("acmed-admin.sock");
    a.stack.start_acmed();

    // signd: every key, available (the key files came back).
    let (st, out, err) = run(signet_tests::signetctl(&a.stack.pki.signd.socket).args(["--json", "key", "list"]));
    assert!(st.success(), "{out}{err}");
    let keys = json_of(&out);
    assert!(keys.as_array().unwrap().len() >= 5, "{keys}");
    assert!(keys.as_array().unwrap().iter().all(|k| k["available"] == true), "{keys}");

    // OCSP: the same statuses, the revocations acknowledged before the backup among them.
    let pki = &a.stack.pki;
    assert_eq!(ocsp_status(pki, &good, &[]), "good");
    assert_eq!(ocsp_status(pki, &good, &["-no_nonce"]), "good");
    assert_eq!(ocsp_status(pki, &revoked, &["-no_nonce"]), "revoked");
    assert_eq!(ocsp_status(pki, &acme_cert, &["-no_nonce"]), "good");
    // The rotated issuing CA's certificate too, answered by its own responder.
    let (_, out, err) = run(Command::new("openssl")
        .args(["ocsp", "-no_nonce", "-issuer", path_str(&new_ca), "-cert", path_str(&rotated_cert)])
        .args(["-url", &pki.url("/ocsp"), "-CAfile", path_str(&root_pem)]));
    assert!(out.contains("Response verify OK") || err.contains("Response verify OK"), "{out}{err}");
    assert!(out.contains(&format!("{}: good", rotated_cert.display())), "{out}{err}");
    let before: Vec<_> = revocations.iter().filter(|r| r.2 < t_backup).collect();
    assert!(!before.is_empty());
    for (cert, serial, _) in &before {
        assert_eq!(ocsp_status(pki, cert, &["-no_nonce"]), "revoked", "serial {serial}");
    }

    // The CT log: checkpoint and tiles verify; every entry acknowledged before
    // the backup began is where its SCT says; new entries are taken.
    let ct_url = a.ct.url();
    let (st, out, err) = signetctl(&["ct", "verify", "--log", &ct_url]);
    assert!(st.success() && out.contains("verified"), "ct verify: {out}{err}");
    let key = a.ct.key(a.ct.name());
    let sth: GetSthResponse = serde_json::from_slice(&a.ct.get("ct/v1/get-sth").1).unwrap();
    let (head, sig) = sth.tree_head().unwrap();
    key.verify_tree_head(&head, &sig).unwrap();
    let before: Vec<_> = entries.iter().filter(|e| e.2 < t_backup).collect();
    assert!(before.len() >= 60);
    for (i, (entry, sct, _)) in before.iter().enumerate() {
        key.verify_sct(sct, entry).unwrap();
        let index = parse_leaf_index(&sct.extensions).unwrap();
        assert!(index < head.tree_size, "entry {i}: index {index} beyond the restored tree ({})", head.tree_size);
        let (status, body) = a.ct.get(&format!("ct/v1/get-entries?start={index}&end={index}"));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let leaf = serde_json::from_slice::<GetEntriesResponse>(&body).unwrap().entries.remove(0);
        let logged = TimestampedEntry::from_merkle_tree_leaf(&STANDARD.decode(&leaf.leaf_input).unwrap()).unwrap();
        assert_eq!((&logged.entry, logged.timestamp), (entry, sct.timestamp), "entry {i} at index {index}");
    }
    let (status, body) = a.ct.submit(a.ct.name(), &root.cert(1_000_000, not_after));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
    let index = parse_leaf_index(&sct.extensions).unwrap();
    assert!(index >= head.tree_size, "a new entry goes after the restored tree");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sth: GetSthResponse = serde_json::from_slice(&a.ct.get("ct/v1/get-sth").1).unwrap();
        if sth.tree_size > index {
            break;
        }
        assert!(Instant::now() < deadline, "the new entry is not integrated");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (st, out, err) = signetctl(&["ct", "verify", "--log", &ct_url]);
    assert!(st.success(), "ct verify after a new entry: {out}{err}");
    // The shard added at run time: served again (ctlogd's store defines it, signd's
    // restored key signs for it), every entry where its SCT says, its tree verified,
    // new entries taken.
    assert_eq!(block_on(a.stack.pki.signd.client().ct_log_public_key("next")).unwrap(), next_key);
    let (st, out, err) = run(ct_admin(&a.stack.pki.signd.socket, &restored).args(["--json", "ct", "shard", "list"]));
    assert!(st.success(), "ct shard list: {out}{err}");
    let listed = json_of(&out);
    let shard = listed["logs"].as_array().unwrap().iter().find(|l| l["name"] == "next").expect("shard listed");
    assert_eq!((shard["added"].as_bool(), shard["not_after_start"].as_str()), (Some(true), Some(&*rfc3339(next.0))));
    a.ct.check_acknowledged("next", &next_entries, &next_acked);
    assert_eq!(a.ct.verify_tree("next"), next_entries.len() as u64);
    a.ct.submit_ok("next", &root.cert(2_000_100, next.0 + 20 * DAY));
    a.ct.wait_for_size("next", next_entries.len() as u64 + 1);

    // Tokens: the one minted before still introspects active and verifies
    // against the restored JWKS; those revoked before the backup stay revoked.
    let t = &a.tokend;
    assert!(introspect_active(t, &client, &token0));
    let (st, body) = t.get("/jwks");
    assert_eq!(st, 200, "{body}");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let v =
        Validation { issuer: Some(t.issuer()), audience: Some(API.into()), now, leeway: 0, typ: Some("at+jwt".into()) };
    let claims = verify_jwt(&token0, &Jwks::parse(body.as_bytes()).unwrap(), &v).unwrap();
    assert_eq!(claims.client_id.as_deref(), Some("svc"));
    let before: Vec<_> = tokens.iter().filter(|x| x.2 < t_backup).collect();
    assert!(before.iter().any(|x| x.1) && before.iter().any(|x| !x.1));
    for (token, revoked, _) in before {
        assert_eq!(introspect_active(t, &client, token), !revoked, "revoked: {revoked}");
    }
    assert!(introspect_active(t, &client, &mint(t, &client)), "a new token");

    // acmed: the account and its certificate.
    let mut c = Client::new(&a.stack);
    c.key = acme_key;
    c.kid = Some(acme_kid.clone());
    let r = c.post(&acme_kid, Some(&json!({})));
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("valid")), "{}", String::from_utf8_lossy(&r.body));
    let r = c.post(&acme_cert_url, None);
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8(r.body).unwrap(), acme_pem);
    // ... and the rotation: a new certificate is the new issuing CA's.
    assert_eq!(issuer_of(&c.issue(&["after-restore.backup.test"])), new_ca_subject);
}

/// The subject of the first certificate in `pem`, one line.
fn subject_of(pem: &str) -> String {
    one_line(openssl::x509::X509::from_pem(pem.as_bytes()).unwrap().subject_name())
}

/// The issuer of the first certificate in `pem`, one line.
fn issuer_of(pem: &str) -> String {
    one_line(openssl::x509::X509::from_pem(pem.as_bytes()).unwrap().issuer_name())
}

fn one_line(name: &openssl::x509::X509NameRef) -> String {
    name.entries().fold(String::new(), |acc, e| format!("{acc}/{}", String::from_utf8_lossy(e.data().as_slice())))
}

#[test]
fn private_keys_on_an_nss_token_are_refused_and_left_to_the_tokens_tools() {
    let signd = SigndProcess::start_backend(Backend::NssSoftokn, "");
    block_on(signd.client().generate_key(signd.spec("nss-key", KeyAlgorithm::EcP256))).unwrap();
    let config_dir = signd.dir.path();
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("backup");
    let (st, out, err) =
        signetctl(&["backup", path_str(&target), "--config-dir", path_str(config_dir), "--include-private-keys"]);
    assert_eq!(st.code(), Some(2), "{out}{err}");
    assert!(err.contains("NSS") && err.contains("token's own tools"), "{err}");
    assert!(!target.exists(), "a refused backup leaves nothing");

    // Without the flag: the store and the config; the NSS database is named as left out.
    let (st, out, err) = signetctl(&["--json", "backup", path_str(&target), "--config-dir", path_str(config_dir)]);
    assert!(st.success(), "{out}{err}");
    let report = json_of(&out);
    let signd_entry = report["daemons"].as_array().unwrap().iter().find(|d| d["name"] == "signd").unwrap().clone();
    assert!(signd_entry["notes"].to_string().contains("NSS database"), "{signd_entry}");
    assert_eq!(signd_entry["stores"].as_array().unwrap().len(), 1);
    for f in files_under(&target) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!["key4.db", "cert9.db", "pkcs11.txt"].contains(&name.as_str()), "{}", f.display());
        assert!(!holds_private_key(&f), "{}", f.display());
    }
}
