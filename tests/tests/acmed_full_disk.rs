//! acmed on a full filesystem (issue 22), then on one that turns read-only as on a disk
//! error (issue 23 item 6), with its LMDB on a small ext4 filesystem: writes are refused
//! with ACME `serverInternal` naming the cause and a `Retry-After`, logged once; reads are
//! served; writes succeed again once space is freed, or once the filesystem is repaired and
//! acmed restarted, with every account acknowledged before still there.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::smallfs::SmallFs;

const FULL_LINE: &str = "the store refuses writes for lack of space";
const READ_ONLY_LINE: &str = "the store refuses writes because its filesystem is read-only";

/// A new account, three times over: each refused with `serverInternal`, a detail
/// containing `cause` and a `Retry-After`.
fn new_accounts_refused(stack: &AcmeStack, cause: &str) {
    let url = stack.url("/acme/new-account");
    for _ in 0..3 {
        let mut fresh = Client::new(stack);
        let jws = fresh.jws(&url, Some(&json!({"termsOfServiceAgreed": true})));
        let r = stack.post_raw(&url, "application/jose+json", jws.to_string().as_bytes());
        assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.problem(), "serverInternal");
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_owned();
        assert!(detail.contains(cause), "{detail}");
        assert!(r.header("retry-after").is_some(), "{}", r.headers);
    }
}

#[test]
fn a_full_or_failed_disk_refuses_writes_with_server_internal_and_serves_reads() {
    let mut stack = AcmeStack::start("");
    assert_eq!(Client::new(&stack).register().status, 201);
    stack.kill9_acmed();
    let Some(fs) = SmallFs::ext4_over(&stack.pki.dir.join("acmed-state"), "16M") else { return };
    stack.start_acmed();

    // Full: new accounts are writes, refused and named; reads are served.
    fs.fill();
    new_accounts_refused(&stack, "storage is full");
    assert_eq!(stack.get("/directory").0, 200);
    assert_eq!(stack.log().matches(FULL_LINE).count(), 1, "logged once:\n{}", stack.log());

    fs.free();
    let mut fresh = Client::new(&stack);
    assert_eq!(fresh.register().status, 201);
    let pem = fresh.issue(&["ro.signet.test"]);
    assert!(pem.contains("BEGIN CERTIFICATE"));

    // The filesystem fails and turns read-only under acmed: the same, named as such.
    fs.fail();
    new_accounts_refused(&stack, "storage is read-only");
    assert_eq!(stack.get("/directory").0, 200);
    assert_eq!(stack.log().matches(READ_ONLY_LINE).count(), 1, "logged once:\n{}", stack.log());
    assert!(!stack.log().contains("panicked"), "{}", stack.log());

    // Checked, mounted again and acmed restarted: the account acknowledged before the
    // failure is there (it orders again), and writes succeed.
    stack.kill9_acmed();
    fs.repair();
    stack.start_acmed();
    let pem = fresh.issue(&["ro2.signet.test"]);
    assert!(pem.contains("BEGIN CERTIFICATE"));
    assert_eq!(Client::new(&stack).register().status, 201);
}
