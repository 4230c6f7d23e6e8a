//! signd on a full filesystem (issue 22 item 1), then on one that fails and turns
//! read-only as on a disk error (issue 23 item 6), with a real signd whose LMDB lives on a
//! small ext4 filesystem filled (then failed) during a signing load: no crash, signing
//! refused with a typed error naming the cause, health, key listing and public keys still
//! answered, the condition logged once, signing resumed by itself once space is freed (or
//! once the failed filesystem is checked and mounted again, and signd restarted), and every
//! acknowledged signature in the audit log (also after `kill -9`).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signet_ipc::{block_on, AuditQuery, ErrorKind, KeyAlgorithm, SignatureScheme, SigndClient};
use signet_tests::smallfs::SmallFs;
use signet_tests::SigndProcess;

const FULL_LINE: &str = "the store refuses writes for lack of space";
const WRITABLE_LINE: &str = "the store accepts writes again";
const READ_ONLY_LINE: &str = "the store refuses writes because its filesystem is read-only";

/// What the signing load has seen so far.
#[derive(Default)]
struct Seen {
    /// Messages whose signature was returned.
    acknowledged: Vec<Vec<u8>>,
    /// Refusals in a row since the last success.
    refused_in_a_row: usize,
    /// Every refusal, as "kind: detail" (the first few).
    refusals: Vec<String>,
    /// Successes after the last refusal.
    since_refused: usize,
    /// Any refusal at all.
    any_refused: bool,
    /// The last refusal, as "kind: detail".
    last_refusal: String,
}

/// A signing load on one thread with key "k": what it has seen, and the flag that stops it.
/// Every refusal must be `Unavailable`, for lack of space or a read-only filesystem.
fn start_load(signd: &SigndProcess) -> (Arc<Mutex<Seen>>, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let (client, seen2, stop2) = (signd.client().per_thread(), seen.clone(), stop.clone());
    let load = std::thread::spawn(move || {
        for i in 0u64.. {
            if stop2.load(Ordering::Relaxed) {
                return;
            }
            let message = format!("message {i} {:?}", Instant::now()).into_bytes();
            let answer = block_on(client.sign("", "k", SignatureScheme::Default, message.clone()));
            let mut seen = seen2.lock().unwrap();
            match answer {
                Ok(_) => {
                    seen.acknowledged.push(message);
                    seen.refused_in_a_row = 0;
                    seen.since_refused += 1;
                }
                Err(e) => {
                    if seen.refusals.len() < 5 {
                        seen.refusals.push(format!("{}: {}", e.kind, e.detail));
                    }
                    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
                    assert!(e.detail.contains("no space left") || e.detail.contains("read-only"), "{e}");
                    seen.last_refusal = format!("{}: {}", e.kind, e.detail);
                    seen.refused_in_a_row += 1;
                    seen.since_refused = 0;
                    seen.any_refused = true;
                }
            }
        }
    });
    (seen, stop, load)
}

/// Every message in `acknowledged` has its `ok` sign record in the audit log.
fn all_audited(signd: &SigndProcess, acknowledged: &[Vec<u8>], pass: &str) {
    let audit = audited(&signd.client());
    let missing = acknowledged.iter().filter(|m| !audit.contains(&openssl::sha::sha256(m)[..])).count();
    assert_eq!(missing, 0, "{missing} acknowledged signatures not audited ({pass})");
}

fn wait_for(what: &str, seen: &Mutex<Seen>, done: impl Fn(&Seen) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&seen.lock().unwrap()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every `ok` sign record's message hash in the audit log.
fn audited(client: &SigndClient) -> HashSet<Vec<u8>> {
    let mut out = HashSet::new();
    let mut after = 0;
    loop {
        let page = block_on(client.audit(AuditQuery { after_seq: after, limit: 10_000, newest_first: false })).unwrap();
        let Some(last) = page.last() else { return out };
        after = last.seq;
        out.extend(page.into_iter().filter(|r| r.ok && r.operation == "sign").map(|r| r.message_sha256));
    }
}

#[test]
fn a_full_or_failed_filesystem_refuses_signatures_and_signd_resumes() {
    let mut signd = SigndProcess::start("");
    let admin = signd.client();
    block_on(admin.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap();
    signd.kill9();
    let Some(fs) = SmallFs::ext4_over(&signd.dir.path().join("state").join("db"), "32M") else { return };
    signd.restart();

    let (seen, stop, load) = start_load(&signd);
    wait_for("signatures before the disk fills", &seen, |s| s.acknowledged.len() >= 100);
    fs.fill();
    wait_for("signatures refused on the full disk", &seen, |s| s.refused_in_a_row >= 50);
    assert!(seen.lock().unwrap().last_refusal.contains("no space left"), "{}", seen.lock().unwrap().last_refusal);

    // Full: signd is up, answers health, lists keys and gives public keys.
    assert!(signd.alive(), "signd died on a full disk:\n{}", signd.log());
    let other = signd.client();
    assert!(block_on(other.health()).unwrap().keys_loaded >= 1);
    assert!(block_on(other.admin_list_keys()).unwrap().iter().any(|k| k.id == "k"));
    assert!(!block_on(other.public_key("", "k")).unwrap().spki.is_empty());
    assert_eq!(signd.log().matches(FULL_LINE).count(), 1, "logged once:\n{}", signd.log());

    // Space returns: signing resumes by itself.
    fs.free();
    wait_for("signing to resume", &seen, |s| s.since_refused >= 100);
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    assert!(signd.alive());
    assert_eq!(signd.log().matches(FULL_LINE).count(), 1, "{}", signd.log());
    assert_eq!(signd.log().matches(WRITABLE_LINE).count(), 1, "{}", signd.log());

    // Every signature acknowledged is audited, also after kill -9.
    let mut acknowledged: Vec<Vec<u8>> = seen.lock().unwrap().acknowledged.clone();
    assert!(seen.lock().unwrap().any_refused);
    eprintln!("{} signatures acknowledged; refusals: {:?}", acknowledged.len(), seen.lock().unwrap().refusals);
    for pass in ["running", "after kill -9"] {
        all_audited(&signd, &acknowledged, pass);
        signd.restart();
    }

    // The filesystem fails and turns read-only under a signing load: signatures refused,
    // named as such, logged once; signd up and answering.
    let (seen, stop, load) = start_load(&signd);
    wait_for("signatures before the disk fails", &seen, |s| s.acknowledged.len() >= 100);
    fs.fail();
    wait_for("signatures refused on the failed disk", &seen, |s| s.refused_in_a_row >= 50);
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    assert!(seen.lock().unwrap().last_refusal.contains("read-only"), "{}", seen.lock().unwrap().last_refusal);
    assert!(signd.alive(), "signd died on a failed disk:\n{}", signd.log());
    let other = signd.client();
    assert!(block_on(other.health()).unwrap().keys_loaded >= 1);
    assert!(!block_on(other.public_key("", "k")).unwrap().spki.is_empty());
    assert_eq!(signd.log().matches(READ_ONLY_LINE).count(), 1, "logged once:\n{}", signd.log());

    // Checked, mounted again and signd restarted: every signature acknowledged, before and
    // during the failure, is audited, and signing works.
    acknowledged.extend(seen.lock().unwrap().acknowledged.iter().cloned());
    signd.kill9();
    fs.repair();
    signd.restart();
    all_audited(&signd, &acknowledged, "after the repair");
    block_on(signd.client().sign("", "k", SignatureScheme::Default, b"after the repair".to_vec())).unwrap();
}
