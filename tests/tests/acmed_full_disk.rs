//! acmed on a full filesystem (issue 22), with its LMDB on a small tmpfs: writes are refused
//! with ACME `serverInternal` naming the cause and a `Retry-After`, logged once; reads are
//! served; writes succeed again once space is freed.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::smallfs::SmallFs;

const FULL_LINE: &str = "the store refuses writes for lack of space";

#[test]
fn a_full_disk_refuses_writes_with_server_internal_and_serves_reads() {
    let mut stack = AcmeStack::start("");
    assert_eq!(Client::new(&stack).register().status, 201);
    stack.kill9_acmed();
    let Some(fs) = SmallFs::over(&stack.pki.dir.join("acmed-state"), "16m") else { return };
    stack.start_acmed();
    fs.fill();

    // New accounts are writes: refused, named, with a Retry-After, several times over.
    let url = stack.url("/acme/new-account");
    for _ in 0..3 {
        let mut fresh = Client::new(&stack);
        let jws = fresh.jws(&url, Some(&json!({"termsOfServiceAgreed": true})));
        let r = stack.post_raw(&url, "application/jose+json", jws.to_string().as_bytes());
        assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.problem(), "serverInternal");
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_owned();
        assert!(detail.contains("storage is full"), "{detail}");
        assert!(r.header("retry-after").is_some(), "{}", r.headers);
    }
    // Reads are served.
    assert_eq!(stack.get("/directory").0, 200);
    assert_eq!(stack.log().matches(FULL_LINE).count(), 1, "logged once:\n{}", stack.log());

    fs.free();
    let mut fresh = Client::new(&stack);
    assert_eq!(fresh.register().status, 201);
}
