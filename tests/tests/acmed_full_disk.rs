//! acmed on a full filesystem (issue 22), with its LMDB on a small tmpfs: writes are refused
//! with ACME `serverInternal` naming the cause and a `Retry-After`, logged once; reads are
//! served; writes succeed again once space is freed.
//!
//! And on a filesystem that fails (issue 23 item 6: a loop-mounted ext4 turned read-only as
//! on a disk error): the same refusals, an issued certificate still served; checked,
//! mounted again and acmed restarted, the account and the certificate are there. Restarted
//! on the failed filesystem before that, acmed starts on its store opened read-only,
//! serves the certificate and refuses writes.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use serde_json::json;
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::smallfs::SmallFs;

const FULL_LINE: &str = "the store refuses writes for lack of space";
const REFUSED_LINE: &str = "the store refuses writes";

/// A new account, refused three times over with `serverInternal`, a `Retry-After` and a
/// detail naming one of `causes`.
fn new_accounts_refused(stack: &AcmeStack, causes: &[&str]) {
    let url = stack.url("/acme/new-account");
    for _ in 0..3 {
        let mut fresh = Client::new(stack);
        let jws = fresh.jws(&url, Some(&json!({"termsOfServiceAgreed": true})));
        let r = stack.post_raw(&url, "application/jose+json", jws.to_string().as_bytes());
        assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.problem(), "serverInternal");
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_owned();
        assert!(causes.iter().any(|c| detail.contains(c)), "{detail}");
        assert!(r.header("retry-after").is_some(), "{}", r.headers);
    }
}

#[test]
fn a_full_disk_refuses_writes_with_server_internal_and_serves_reads() {
    let mut stack = AcmeStack::start("");
    assert_eq!(Client::new(&stack).register().status, 201);
    stack.kill9_acmed();
    let Some(fs) = SmallFs::over(&stack.pki.dir.join("acmed-state"), "16m") else { return };
    stack.start_acmed();
    fs.fill();

    // New accounts are writes: refused, named, with a Retry-After, several times over.
    new_accounts_refused(&stack, &["storage is full"]);
    // Reads are served.
    assert_eq!(stack.get("/directory").0, 200);
    assert_eq!(stack.log().matches(FULL_LINE).count(), 1, "logged once:\n{}", stack.log());

    fs.free();
    let mut fresh = Client::new(&stack);
    assert_eq!(fresh.register().status, 201);
}

#[test]
fn a_failed_disk_refuses_writes_serves_what_was_issued_and_keeps_it() {
    let mut stack = AcmeStack::start("");
    stack.kill9_acmed();
    let Some(fs) = SmallFs::ext4_over(&stack.pki.dir.join("acmed-state"), "32M") else { return };
    stack.start_acmed();
    let mut client = Client::new(&stack);
    client.register();
    let names = ["failed-disk.signet.test"];
    let (_, order) = client.new_order(&names);
    client.authorize_dns01(&order);
    let r = client.finalize(&order, &Client::csr(&names));
    assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
    let cert_url = r.json()["certificate"].as_str().unwrap().to_owned();
    let chain = client.post(&cert_url, None).body;
    // acmed's store is flushed every 200 ms (Durability::Process): what was acknowledged
    // more than a flush ago is on the disk.
    std::thread::sleep(Duration::from_millis(600));

    fs.fail();
    // Writes refused, named, with a Retry-After: a new account, a new order.
    new_accounts_refused(&stack, &["storage is read-only", "storage has failed"]);
    let url = stack.url("/acme/new-order");
    let jws = client.jws(&url, Some(&json!({"identifiers": [{"type": "dns", "value": "later.signet.test"}]})));
    let r = stack.post_raw(&url, "application/jose+json", jws.to_string().as_bytes());
    assert_eq!((r.status, r.problem()), (500, "serverInternal".to_owned()), "{}", String::from_utf8_lossy(&r.body));
    assert!(r.header("retry-after").is_some(), "{}", r.headers);
    // Reads served: the directory, the account's certificate.
    assert_eq!(stack.get("/directory").0, 200);
    let r = client.post(&cert_url, None);
    assert_eq!((r.status, &r.body), (200, &chain));
    assert_eq!(stack.log().matches(REFUSED_LINE).count(), 1, "logged once:\n{}", stack.log());
    assert!(!stack.log().contains("panicked"), "{}", stack.log());

    // Restarted on the failed filesystem, still read-only: acmed starts on its store
    // opened read-only, serves the certificate and refuses writes the same way.
    let (key, kid) = (client.key, client.kid);
    stack.kill9_acmed();
    stack.start_acmed();
    let mut client = Client::new(&stack);
    (client.key, client.kid) = (key, kid);
    let r = client.post(&cert_url, None);
    assert_eq!((r.status, &r.body), (200, &chain));
    new_accounts_refused(&stack, &["storage is read-only"]);
    assert!(stack.log().contains("the store cannot be written"), "{}", stack.log());

    // Checked, mounted again, acmed restarted: the account and its certificate are
    // there, and it orders again.
    let (key, kid) = (client.key, client.kid);
    stack.kill9_acmed();
    fs.repair();
    stack.start_acmed();
    let mut client = Client::new(&stack);
    (client.key, client.kid) = (key, kid);
    let r = client.post(&cert_url, None);
    assert_eq!((r.status, &r.body), (200, &chain));
    assert_eq!(client.new_order(&["later.signet.test"]).1["status"], "pending");
}
