//! Faults (issue 23 item 6), each daemon over a real signd, with its state on a small
//! tmpfs the test fills or makes read-only (`signet_tests::smallfs`):
//!
//! - ctlogd on a full disk (its LMDB and its tiles both full), on a read-only tiles
//!   directory, and with its LMDB's filesystem failed and turned read-only: `add-chain` and `add-pre-chain` refused with 503, `Retry-After` and a
//!   message naming the cause, logged once; `get-sth`, `get-entries`, the checkpoint and
//!   tiles still served, and an acknowledged chain submitted again gets its SCT; every
//!   entry acknowledged before stays at its SCT's index; submissions succeed again once
//!   space returns or the directory is writable again, with no restart, and what was
//!   acknowledged survives a `kill -9`.
//! - tokend on a full disk, then on one that fails and turns read-only: revocations and client changes refused (OAuth
//!   `temporarily_unavailable`, 503 with `Retry-After`, naming the cause; `signetctl`
//!   told the same), logged once; client_credentials tokens still issued, JWKS,
//!   discovery and introspection served, an earlier revocation kept; once space returns
//!   the refused revocation succeeds, and survives a `kill -9`; once the failed
//!   filesystem is checked and mounted again, tokend restarted has everything acknowledged.
//! - Each of them, and acmed, ocspd and signd (in their own suites), restarted on the
//!   failed filesystem before it is repaired: the store is opened read-only, and the
//!   daemon serves reads and refuses writes as above.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use signet_ct::rfc6962::api::AddChainResponse;
use signet_ct::Sct;
use signet_tests::ctlog::{unix_now, CtPki, Ctlogd, LogSpec, TestEntry, TEST_SEQUENCING};
use signet_tests::smallfs::SmallFs;
use signet_tests::tokend::{signd_role, Tokend};
use signet_tests::{run, SigndProcess};

const DAY: i64 = 86_400;
const CT_REFUSED_LINE: &str = "the log's storage refuses writes";
const CT_WRITABLE_LINE: &str = "the log's storage accepts writes again";

/// Entries `first..first + n`: certificates and precertificates in turn.
fn ct_entries(pki: &CtPki, first: u32, n: u32) -> Vec<TestEntry> {
    let not_after = unix_now() + 10 * DAY;
    (first..first + n)
        .map(|i| if i % 2 == 0 { pki.cert(i, not_after) } else { pki.precert(i, not_after, false) })
        .collect()
}

/// Submits each of `entries` (indexes `range` of it): each must be refused with 503, a
/// `Retry-After` and a message containing `cause`.
fn ct_refused(ctlogd: &Ctlogd, entries: &[TestEntry], range: std::ops::Range<usize>, cause: &str) {
    for e in &entries[range] {
        let (status, headers, body) = ctlogd.submit_full("test", e);
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 503, "{body}");
        assert!(headers.get("retry-after").is_some(), "no Retry-After: {headers:?}");
        assert!(body.contains(cause), "{body}");
    }
}

/// The log's reads while writes are refused: tree head, entries, checkpoint and tiles,
/// every acknowledged entry at its SCT's index, and an acknowledged chain sent again
/// answered with its SCT.
fn ct_reads_served(ctlogd: &Ctlogd, entries: &[TestEntry], acked: &[(usize, Sct)]) {
    let head = ctlogd.check_acknowledged("test", entries, acked);
    assert_eq!(head.tree_size, acked.len() as u64);
    assert_eq!(ctlogd.get("checkpoint").0, 200);
    assert_eq!(ctlogd.get(&format!("tile/data/000.p/{}", head.tree_size)).0, 200);
    let (i, sct) = &acked[acked.len() / 2];
    let (status, body) = ctlogd.submit("test", &entries[*i]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(&serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap(), sct);
}

/// Submits `range` of `entries`, each acknowledged; appends them to `acked`.
fn ct_accept(ctlogd: &Ctlogd, entries: &[TestEntry], range: std::ops::Range<usize>, acked: &mut Vec<(usize, Sct)>) {
    for i in range {
        acked.push((i, ctlogd.submit_ok("test", &entries[i])));
    }
}

#[test]
fn ctlogd_on_a_full_read_only_or_failed_disk_refuses_submissions_serves_reads_and_recovers() {
    let pki = CtPki::new("ctlogd faults root");
    let entries = ct_entries(&pki, 0, 60);
    let mut signd = SigndProcess::start("");
    let dir = signd.dir.path().to_path_buf();
    let roots = pki.write_root(&dir.join("root.pem"));
    let mut ctlogd = Ctlogd::start_logs(&mut signd, &dir, &roots, &[LogSpec::new("test")], TEST_SEQUENCING);
    let mut acked = Vec::new();
    ct_accept(&ctlogd, &entries, 0..10, &mut acked);

    // The LMDB and the tiles each on a small filesystem of their own.
    ctlogd.kill9();
    let home = ctlogd.home();
    let Some(db_fs) = SmallFs::ext4_over(&home.join("db"), "16M") else { return };
    let tiles_fs = SmallFs::over(&home.join("tiles-test"), "4m").unwrap();
    ctlogd.spawn();
    ct_accept(&ctlogd, &entries, 10..20, &mut acked);

    // Full: submissions refused, reads served, the condition logged once.
    db_fs.fill();
    tiles_fs.fill();
    ct_refused(&ctlogd, &entries, 20..25, "the log's storage is full; try again later");
    ct_reads_served(&ctlogd, &entries, &acked);
    assert_eq!(ctlogd.log().matches(CT_REFUSED_LINE).count(), 1, "logged once:\n{}", ctlogd.log());

    // Space returns: the refused entries and new ones are accepted, by the same process.
    db_fs.free();
    tiles_fs.free();
    ct_accept(&ctlogd, &entries, 20..35, &mut acked);
    assert_eq!(ctlogd.log().matches(CT_WRITABLE_LINE).count(), 1, "{}", ctlogd.log());

    // Read-only tiles: the same.
    tiles_fs.read_only();
    ct_refused(&ctlogd, &entries, 35..40, "the log's storage is read-only; try again later");
    ct_reads_served(&ctlogd, &entries, &acked);
    tiles_fs.writable();
    ct_accept(&ctlogd, &entries, 35..45, &mut acked);
    assert_eq!(ctlogd.log().matches(CT_REFUSED_LINE).count(), 2, "{}", ctlogd.log());
    assert_eq!(ctlogd.log().matches(CT_WRITABLE_LINE).count(), 2, "{}", ctlogd.log());

    // Nothing acknowledged was lost, also across a kill -9; the whole tree verifies.
    ctlogd.kill9();
    ctlogd.spawn();
    ctlogd.wait_for_size("test", acked.len() as u64);
    let head = ctlogd.check_acknowledged("test", &entries, &acked);
    assert_eq!(head.tree_size, acked.len() as u64);
    assert_eq!(ctlogd.verify_tree("test"), head.tree_size);
    assert!(!ctlogd.log().contains("panicked"), "{}", ctlogd.log());

    // The LMDB's filesystem fails and turns read-only, as on a disk error: the same
    // refusals, reads served; checked, mounted again and ctlogd restarted, nothing
    // acknowledged is lost and submissions are accepted again.
    db_fs.fail();
    ct_refused(&ctlogd, &entries, 45..50, "the log's storage is read-only; try again later");
    ct_reads_served(&ctlogd, &entries, &acked);
    assert!(!ctlogd.log().contains("panicked"), "{}", ctlogd.log());
    // Restarted on it, the tiles read-only too: ctlogd starts on its store opened
    // read-only, serves reads and refuses submissions the same way.
    ctlogd.kill9();
    tiles_fs.read_only();
    ctlogd.spawn();
    ct_refused(&ctlogd, &entries, 45..50, "the log's storage is read-only; try again later");
    ct_reads_served(&ctlogd, &entries, &acked);
    assert!(ctlogd.log().contains(STORE_READ_ONLY_START_LINE), "{}", ctlogd.log());
    assert!(!ctlogd.log().contains("panicked"), "{}", ctlogd.log());
    ctlogd.kill9();
    tiles_fs.writable();
    db_fs.repair();
    ctlogd.spawn();
    ct_accept(&ctlogd, &entries, 45..55, &mut acked);
    // An SCT promises the entry within the merge delay: the last one may be acknowledged
    // before the checkpoint that holds it is published.
    ctlogd.wait_for_size("test", acked.len() as u64);
    let head = ctlogd.check_acknowledged("test", &entries, &acked);
    assert_eq!(head.tree_size, acked.len() as u64);
    assert_eq!(ctlogd.verify_tree("test"), head.tree_size);
}

const STORE_FULL_LINE: &str = "the store refuses writes for lack of space";
const STORE_WRITABLE_LINE: &str = "the store accepts writes again";
const STORE_READ_ONLY_LINE: &str = "the store refuses writes because its filesystem is read-only";
const STORE_READ_ONLY_START_LINE: &str = "the store cannot be written";

fn json_of(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// A client_credentials access token for `client`.
fn access_token(t: &Tokend, client: &signet_tests::tokend::OauthClient) -> String {
    let form = format!("grant_type=client_credentials&client_id={}&client_secret={}", client.id, client.secret);
    let (st, body) = t.post("/token", &form, &[]);
    assert_eq!(st, 200, "{body}");
    json_of(&body)["access_token"].as_str().unwrap().to_owned()
}

/// Whether introspection (by `by`) finds `token` active.
fn active(t: &Tokend, by: &signet_tests::tokend::OauthClient, token: &str) -> bool {
    let (st, body) =
        t.post("/introspect", &format!("token={token}&client_id={}&client_secret={}", by.id, by.secret), &[]);
    assert_eq!(st, 200, "{body}");
    json_of(&body)["active"].as_bool().unwrap()
}

/// Revokes `token` as `client`: (status, body).
fn revoke(t: &Tokend, client: &signet_tests::tokend::OauthClient, token: &str) -> (u16, String) {
    t.post("/revoke", &format!("token={token}&client_id={}&client_secret={}", client.id, client.secret), &[])
}

/// Writes refused in OAuth's form (503 `temporarily_unavailable` with `Retry-After`), and
/// by the admin socket, each naming `cause`: revoking `token`, creating client `new`.
fn tokend_writes_refused(t: &Tokend, svc: &signet_tests::tokend::OauthClient, token: &str, new: &str, cause: &str) {
    for _ in 0..3 {
        let (st, body) = revoke(t, svc, token);
        assert_eq!(st, 503, "{body}");
        let e = json_of(&body);
        assert_eq!(e["error"], "temporarily_unavailable", "{body}");
        let why = e["error_description"].as_str().unwrap();
        assert!(why.contains(cause), "{body}");
    }
    let (st, headers) = signet_tests::tokend::curl(&[
        "-s",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-X",
        "POST",
        "--data-binary",
        &format!("token={token}&client_id={}&client_secret={}", svc.id, svc.secret),
        &t.url("/revoke"),
    ]);
    assert_eq!(st, 503);
    assert!(headers.to_ascii_lowercase().contains("retry-after:"), "{headers}");
    let (st, out, err) = run(t.signetctl().args([
        "oauth",
        "client",
        "create",
        new,
        "--auth-method",
        "client_secret_post",
        "--audience",
        "https://api.signet.test",
    ]));
    assert!(!st.success(), "{out}");
    assert!(err.contains(cause), "{err}");
}

#[test]
fn tokend_on_a_full_or_failed_disk_refuses_writes_with_temporarily_unavailable_and_recovers() {
    let signd = SigndProcess::start(&signd_role());
    let dir = tempfile::tempdir().unwrap();
    let mut t = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", "");
    let api = "https://api.signet.test";
    let svc = t.create_client("svc", &["--auth-method", "client_secret_post", "--audience", api]);
    let (kept, refused) = (access_token(&t, &svc), access_token(&t, &svc));
    assert_eq!(revoke(&t, &svc, &kept).0, 200);

    t.kill9();
    let Some(fs) = SmallFs::ext4_over(&dir.path().join("tokend-db"), "16M") else { return };
    t.spawn();
    fs.fill();

    // Writes refused, in OAuth's form, several times over.
    tokend_writes_refused(&t, &svc, &refused, "late", "storage is full");

    // Reads, and what writes nothing, still served.
    assert!(!active(&t, &svc, &kept), "the revocation made before is kept");
    assert!(active(&t, &svc, &refused), "a refused revocation changed nothing");
    let fresh = access_token(&t, &svc);
    assert!(active(&t, &svc, &fresh));
    assert_eq!(t.get("/jwks").0, 200);
    assert_eq!(t.get("/.well-known/openid-configuration").0, 200);
    assert_eq!(t.log().matches(STORE_FULL_LINE).count(), 1, "logged once:\n{}", t.log());

    // Space returns: the same process takes the revocation, kept across kill -9.
    fs.free();
    assert_eq!(revoke(&t, &svc, &refused).0, 200);
    t.create_client("late", &["--auth-method", "client_secret_post", "--audience", api]);
    assert_eq!(t.log().matches(STORE_WRITABLE_LINE).count(), 1, "{}", t.log());
    t.kill9();
    t.spawn();
    assert!(!active(&t, &svc, &kept) && !active(&t, &svc, &refused));
    assert!(active(&t, &svc, &fresh));

    // The filesystem fails and turns read-only under tokend: writes refused, named as
    // such, logged once; reads and tokens still served.
    let later = access_token(&t, &svc);
    fs.fail();
    tokend_writes_refused(&t, &svc, &later, "later", "storage is read-only");
    assert!(!active(&t, &svc, &kept) && !active(&t, &svc, &refused));
    assert!(active(&t, &svc, &later), "a refused revocation changed nothing");
    assert!(active(&t, &svc, &access_token(&t, &svc)));
    assert_eq!(t.get("/jwks").0, 200);
    assert_eq!(t.log().matches(STORE_READ_ONLY_LINE).count(), 1, "logged once:\n{}", t.log());
    assert!(!t.log().contains("panicked"), "{}", t.log());

    // Restarted on the failed filesystem, still read-only: tokend starts on its store
    // opened read-only; the same refusals, the same answers.
    t.kill9();
    t.spawn();
    tokend_writes_refused(&t, &svc, &later, "later", "storage is read-only");
    assert!(!active(&t, &svc, &kept) && !active(&t, &svc, &refused));
    assert!(active(&t, &svc, &later) && active(&t, &svc, &fresh));
    assert!(active(&t, &svc, &access_token(&t, &svc)));
    assert_eq!(t.get("/jwks").0, 200);
    assert!(t.log().contains(STORE_READ_ONLY_START_LINE), "{}", t.log());
    assert!(!t.log().contains("panicked"), "{}", t.log());

    // Checked, mounted again and tokend restarted: everything acknowledged is there, and
    // the revocation refused meanwhile goes through.
    t.kill9();
    fs.repair();
    t.spawn();
    assert!(!active(&t, &svc, &kept) && !active(&t, &svc, &refused));
    assert!(active(&t, &svc, &fresh));
    assert_eq!(revoke(&t, &svc, &later).0, 200);
    assert!(!active(&t, &svc, &later));
}
