//! signd on a full filesystem (issue 22 item 1), with a real signd whose LMDB lives on a
//! small tmpfs filled during a signing load: no crash, signing refused with a typed error
//! naming the cause while full, health, key listing and public keys still answered, the
//! condition logged once, signing resumed by itself once space is freed, and every
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
fn a_full_filesystem_refuses_signatures_and_signd_resumes() {
    let mut signd = SigndProcess::start("");
    let admin = signd.client();
    block_on(admin.generate_key(signd.spec("k", KeyAlgorithm::EcP256))).unwrap();
    signd.kill9();
    let Some(fs) = SmallFs::over(&signd.dir.path().join("state").join("db"), "32m") else { return };
    signd.restart();

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (client, seen, stop) = (signd.client().per_thread(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for i in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let message = format!("message {i}").into_bytes();
                let answer = block_on(client.sign("", "k", SignatureScheme::Default, message.clone()));
                let mut seen = seen.lock().unwrap();
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
                        assert!(e.detail.contains("no space left"), "{e}");
                        seen.refused_in_a_row += 1;
                        seen.since_refused = 0;
                        seen.any_refused = true;
                    }
                }
            }
        })
    };
    wait_for("signatures before the disk fills", &seen, |s| s.acknowledged.len() >= 100);
    fs.fill();
    wait_for("signatures refused on the full disk", &seen, |s| s.refused_in_a_row >= 50);

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
    let acknowledged: Vec<Vec<u8>> = seen.lock().unwrap().acknowledged.clone();
    assert!(seen.lock().unwrap().any_refused);
    eprintln!("{} signatures acknowledged; refusals: {:?}", acknowledged.len(), seen.lock().unwrap().refusals);
    for pass in ["running", "after kill -9"] {
        let audit = audited(&signd.client());
        let missing = acknowledged.iter().filter(|m| !audit.contains(&openssl::sha::sha256(m)[..])).count();
        assert_eq!(missing, 0, "{missing} acknowledged signatures not audited ({pass})");
        signd.restart();
    }
}
