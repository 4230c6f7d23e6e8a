//! acmed with Certificate Transparency, end to end: a real signd (the demo CA
//! and a CT log key), ocspd, ctlogd serving that log, and acmed with `[ct]`.
//! The certificates acmed issues carry an SCT list whose SCTs verify with
//! signet-ct against the log's key for the entry the certificate yields; the
//! precertificate is in the log at each SCT's `leaf_index`, signed by the CA
//! with the certificate's serial; a log that is down costs at most the
//! timeout, and then the policy decides: `min_scts = 1` refuses the
//! finalization (serverInternal, the order stays ready), `min_scts = 0`
//! issues without SCTs. A profile with `ct = false` gets none. With
//! `policy = "chrome"`, three logs of one ctlogd and a fourth that is down:
//! two SCTs from one operator are refused (serverInternal, the order stays
//! ready), two from distinct operators are embedded.
//! Temporal shards (`not_after_start`/`not_after_end`): only the shard whose
//! window holds the certificate's NotAfter is asked, a `required` shard only
//! for its window; when none holds it the finalization says so.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use der::{Decode, Encode};
use serde_json::{json, Value};
use signet_ct::rfc6962::api::GetEntriesResponse;
use signet_ct::rfc6962::precert::{
    embedded_sct_entry, extension_value, is_precertificate, precert_entry, tbs_without_extension, POISON_OID,
};
use signet_ct::rfc6962::{scts_from_extension_value, SCT_LIST_OID};
use signet_ct::staticct::parse_leaf_index;
use signet_ct::{Sct, TimestampedEntry};
use signet_tests::acme::{AcmeStack, Client};
use signet_tests::ctlog::{Ctlogd, LogSpec, TEST_SEQUENCING};
use signet_tests::run;
use x509_cert::Certificate;

/// A CT log that accepts connections and never answers (a hung log).
fn hung_log() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/hung/", l.local_addr().unwrap().port());
    (l, url)
}

/// A CT log nothing listens on (a log that is down).
fn down_log() -> String {
    let port = signet_tests::pki::free_port();
    format!("http://127.0.0.1:{port}/down/")
}

/// `[[ct.logs]]` for `url` with the base64 key `key`.
fn log_entry(url: &str, key: &str, required: bool) -> String {
    format!("[[ct.logs]]\nurl = \"{url}\"\npublic_key = \"{key}\"\nrequired = {required}\n")
}

/// `[[ct.logs]]` for `url` with the base64 key `key`, run by `operator`.
fn operated_log(url: &str, key: &str, operator: &str) -> String {
    format!("[[ct.logs]]\nurl = \"{url}\"\npublic_key = \"{key}\"\noperator = \"{operator}\"\n")
}

/// A P-256 SubjectPublicKeyInfo nobody signs with (for logs that never answer).
fn unused_key() -> String {
    STANDARD.encode(signet_tests::acme::p256().public_key_to_der().unwrap())
}

fn der_of_pem(pem: &str) -> Vec<u8> {
    Certificate::load_pem_chain(pem.as_bytes()).unwrap()[0].to_der().unwrap()
}

fn scts_of(cert: &[u8]) -> Option<Vec<Sct>> {
    extension_value(cert, &SCT_LIST_OID).unwrap().map(|v| scts_from_extension_value(&v).unwrap())
}

/// newOrder for `names` under `profile`; the order JSON.
fn order_with_profile(c: &mut Client, names: &[&str], profile: &str) -> Value {
    let ids: Vec<Value> = names.iter().map(|n| json!({"type": "dns", "value": n})).collect();
    let url = c.stack.url("/acme/new-order");
    let r = c.post(&url, Some(&json!({ "identifiers": ids, "profile": profile })));
    assert_eq!(r.status, 201, "newOrder: {}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// Authorizes, finalizes and downloads `order`: the leaf, DER.
fn finish(c: &mut Client, order: &Value, names: &[&str]) -> Vec<u8> {
    c.authorize_dns01(order);
    let r = c.finalize(order, &Client::csr(names));
    assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
    let r = c.post(r.json()["certificate"].as_str().unwrap(), None);
    assert_eq!(r.status, 200);
    der_of_pem(&String::from_utf8(r.body).unwrap())
}

/// A finalize whose answer may be a 5xx (the client's `post` refuses those).
fn finalize_raw(c: &mut Client, order: &Value, names: &[&str]) -> signet_tests::acme::Response {
    let url = order["finalize"].as_str().unwrap().to_owned();
    let jws = c.jws(&url, Some(&json!({ "csr": URL_SAFE_NO_PAD.encode(Client::csr(names)) })));
    c.stack.post_raw(&url, "application/jose+json", jws.to_string().as_bytes())
}

/// The value of metric `name` with labels containing `labels` in acmed's /metrics.
fn metric(stack: &AcmeStack, name: &str, labels: &str) -> f64 {
    let (_, _, body) = stack.get("/metrics");
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn issued_certificates_carry_scts_that_verify_and_the_precertificate_is_logged() {
    let mut stack = AcmeStack::start("");
    let dir = stack.pki.dir.clone();
    let root = stack.pki.ca("root.pem");
    let log = Ctlogd::start(&mut stack.pki.signd, &dir, "test", &root);
    // The real log, and one that hangs (not required): issuance waits for it at
    // most timeout_ms and goes ahead with the one SCT min_scts asks for.
    let (_hung, hung_url) = hung_log();
    let ct = format!(
        "[profiles.classic]\ndescription = \"with SCTs\"\n[profiles.internal]\ndescription = \"no CT\"\nct = false\n\
         [ct]\ntimeout_ms = 1500\nmin_scts = 1\n{}{}",
        log_entry(&log.url(), &log.public_key_b64(), true),
        log_entry(&hung_url, &unused_key(), false),
    );
    stack.reconfigure_acmed(&ct);
    let issuing = der_of_pem(&std::fs::read_to_string(stack.pki.ca("issuing.pem")).unwrap());
    let log_key = log.key(log.name());

    let mut c = Client::new(&stack);
    c.register();
    let names = ["ct.signet.test", "www.ct.signet.test"];
    let started = Instant::now();
    let pem = c.issue(&names);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(12), "issuance took {took:?}");
    let cert = der_of_pem(&pem);

    // The certificate: no poison, an SCT list, not critical; the chain verifies.
    assert!(!is_precertificate(&cert).unwrap());
    let parsed = Certificate::from_der(&cert).unwrap();
    let sct_ext = parsed.tbs_certificate.extensions.as_ref().unwrap().iter().find(|e| e.extn_id == SCT_LIST_OID);
    assert!(!sct_ext.unwrap().critical);
    let scts = scts_of(&cert).expect("an SCT list");
    assert_eq!(scts.len(), 1, "one SCT: the hung log gave none");
    let pem_file = dir.join("ct-issued.pem");
    std::fs::write(&pem_file, &pem).unwrap();
    let (st, out, err) = run(Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(stack.pki.ca("root.pem"))
        .arg("-untrusted")
        .arg(&pem_file)
        .arg(&pem_file));
    assert!(st.success(), "{out}{err}");

    // Each SCT verifies with the log's key for the entry a TLS client rebuilds.
    let entry = embedded_sct_entry(&cert, &issuing).unwrap();
    let sct = &scts[0];
    assert_eq!(sct.log_id, log_key.log_id());
    log_key.verify_sct(sct, &entry).unwrap();

    // The precertificate is in the log at the SCT's leaf_index.
    let index = parse_leaf_index(&sct.extensions).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let (status, body) = log.get(&format!("ct/v1/get-entries?start={index}&end={index}"));
        if status == 200 {
            break serde_json::from_slice::<GetEntriesResponse>(&body).unwrap().entries.remove(0);
        }
        assert!(Instant::now() < deadline, "entry {index} not in the log: {status} {}", log.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    let leaf = TimestampedEntry::from_merkle_tree_leaf(&STANDARD.decode(&logged.leaf_input).unwrap()).unwrap();
    assert_eq!(leaf.timestamp, sct.timestamp);
    assert_eq!(leaf.extensions, sct.extensions);
    assert_eq!(leaf.entry, entry, "the logged entry is the certificate's");
    // extra_data: the precertificate itself (u24 length, DER), then its chain.
    let extra = STANDARD.decode(&logged.extra_data).unwrap();
    let len = usize::from(extra[0]) << 16 | usize::from(extra[1]) << 8 | usize::from(extra[2]);
    let precert = extra[3..3 + len].to_vec();
    assert!(is_precertificate(&precert).unwrap());
    let pre = Certificate::from_der(&precert).unwrap();
    assert_eq!(pre.tbs_certificate.serial_number, parsed.tbs_certificate.serial_number);
    assert_eq!(pre.tbs_certificate.validity, parsed.tbs_certificate.validity);
    assert_eq!(
        tbs_without_extension(&precert, &POISON_OID).unwrap(),
        tbs_without_extension(&cert, &SCT_LIST_OID).unwrap()
    );
    assert_eq!(precert_entry(&[precert.clone(), issuing.clone()]).unwrap(), entry);
    let ca = openssl::x509::X509::from_der(&issuing).unwrap();
    assert!(openssl::x509::X509::from_der(&precert).unwrap().verify(&ca.public_key().unwrap()).unwrap());
    // The precertificate was never handed out: the download is the certificate.
    assert_ne!(precert, cert);
    // ocspd knows the serial (recorded before the log saw the precertificate).
    let ocsp = stack.pki.openssl_ocsp(&pem_file, &[]);
    assert!(ocsp.contains(": good"), "{ocsp}");

    // Metrics: one SCT from the log, one timeout from the hung one.
    assert_eq!(metric(&stack, "acme_ct_scts_total", &format!("log=\"{}\"", log.url())), 1.0);
    assert_eq!(metric(&stack, "acme_ct_failures_total", &format!("log=\"{hung_url}\",reason=\"timeout\"")), 1.0);
    assert!(metric(&stack, "acme_ct_submission_seconds_count", &format!("log=\"{}\"", log.url())) >= 1.0);

    // A profile that opts out: no precertificate, no SCTs.
    let before = metric(&stack, "acme_ct_scts_total", "");
    let order = order_with_profile(&mut c, &["internal.signet.test"], "internal");
    let cert = finish(&mut c, &order, &["internal.signet.test"]);
    assert!(scts_of(&cert).is_none());
    assert_eq!(metric(&stack, "acme_ct_scts_total", ""), before);

    // The required log down: nothing is issued, whatever min_scts says.
    let mut log = log;
    log.kill9();
    let order = c.new_order(&["req.signet.test"]).1;
    c.authorize_dns01(&order);
    let r = finalize_raw(&mut c, &order, &["req.signet.test"]);
    assert_eq!((r.status, r.problem().as_str()), (500, "serverInternal"), "{:?}", r.json());
    assert!(r.json()["detail"].as_str().unwrap().contains("the required log"), "{}", r.json());
}

#[test]
fn a_log_that_is_down_costs_at_most_the_timeout_and_the_policy_decides() {
    let mut stack = AcmeStack::start("");
    let (_hung, hung_url) = hung_log();
    let logs =
        format!("{}{}", log_entry(&hung_url, &unused_key(), false), log_entry(&down_log(), &unused_key(), false));
    stack.reconfigure_acmed(&format!("[ct]\ntimeout_ms = 1000\nmin_scts = 1\n{logs}"));

    let mut c = Client::new(&stack);
    c.register();
    let names = ["down.signet.test"];
    let (order_url, order) = c.new_order(&names);
    c.authorize_dns01(&order);
    let started = Instant::now();
    let r = finalize_raw(&mut c, &order, &names);
    let took = started.elapsed();
    // min_scts = 1 and no log answered: serverInternal, with the reasons.
    assert_eq!((r.status, r.problem().as_str()), (500, "serverInternal"), "{:?}", r.json());
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("Certificate Transparency") && detail.contains("0 valid SCT(s)"), "{detail}");
    assert!(detail.contains("no answer within 1000 ms") && detail.contains("connection failed"), "{detail}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(4), "finalize took {took:?}");
    // The order is still ready: the client may finalize it again.
    let o = c.post(&order_url, None).json();
    assert_eq!(o["status"], "ready", "{o}");
    assert_eq!(metric(&stack, "acme_ct_policy_refusals_total", ""), 1.0);

    // min_scts = 0: the same order is issued, without SCTs.
    let (key, kid) = (c.key.clone(), c.kid.clone());
    drop(c);
    stack.reconfigure_acmed(&format!("[ct]\ntimeout_ms = 1000\nmin_scts = 0\n{logs}"));
    let mut c = Client::new(&stack);
    (c.key, c.kid) = (key, kid);
    let started = Instant::now();
    let r = c.finalize(&order, &Client::csr(&names));
    assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
    assert!(started.elapsed() < Duration::from_secs(4));
    let r = c.post(r.json()["certificate"].as_str().unwrap(), None);
    let cert = der_of_pem(&String::from_utf8(r.body).unwrap());
    assert!(scts_of(&cert).is_none(), "no SCT list when no log gave one");
    assert!(!is_precertificate(&cert).unwrap());
}

#[test]
fn the_chrome_policy_wants_two_scts_from_distinct_operators() {
    let mut stack = AcmeStack::start("");
    let dir = stack.pki.dir.clone();
    let root = stack.pki.ca("root.pem");
    let logs = [LogSpec::new("a1"), LogSpec::new("a2"), LogSpec::new("b1")];
    let ct = Ctlogd::start_logs(&mut stack.pki.signd, &dir, &root, &logs, TEST_SEQUENCING);
    let key = |name: &str| STANDARD.encode(&ct.logs.iter().find(|l| l.name == name).unwrap().public_key);
    let down = down_log();
    // Operator A's two logs answer; operator B's only log is down: two valid
    // SCTs, enough for a 90-day certificate by count, from one operator.
    let one_operator = format!(
        "[ct]\npolicy = \"chrome\"\ntimeout_ms = 1500\n{}{}{}",
        operated_log(&ct.log_url("a1"), &key("a1"), "Operator A"),
        operated_log(&ct.log_url("a2"), &key("a2"), "Operator A"),
        operated_log(&down, &unused_key(), "Operator B"),
    );
    stack.reconfigure_acmed(&one_operator);
    let mut c = Client::new(&stack);
    c.register();
    let names = ["chrome.signet.test"];
    let (order_url, order) = c.new_order(&names);
    c.authorize_dns01(&order);
    let r = finalize_raw(&mut c, &order, &names);
    assert_eq!((r.status, r.problem().as_str()), (500, "serverInternal"), "{:?}", r.json());
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("Certificate Transparency"), "{detail}");
    assert!(detail.contains("2 valid SCT(s), from 1 log operator(s) (Operator A)"), "{detail}");
    assert!(detail.contains("at least 2 distinct operators") && detail.contains("connection failed"), "{detail}");
    assert_eq!(c.post(&order_url, None).json()["status"], "ready");
    assert_eq!(metric(&stack, "acme_ct_policy_refusals_total", ""), 1.0);

    // Operator B's log answers instead of the second of A's: the same order is
    // issued, with the two SCTs (C's log is down), each verifying with its log's key.
    let (account_key, kid) = (c.key.clone(), c.kid.clone());
    drop(c);
    let two_operators = format!(
        "[ct]\npolicy = \"chrome\"\ntimeout_ms = 1500\n{}{}{}",
        operated_log(&ct.log_url("a1"), &key("a1"), "Operator A"),
        operated_log(&ct.log_url("b1"), &key("b1"), "Operator B"),
        operated_log(&down, &unused_key(), "Operator C"),
    );
    stack.reconfigure_acmed(&two_operators);
    let mut c = Client::new(&stack);
    (c.key, c.kid) = (account_key, kid);
    let started = std::time::SystemTime::now();
    let r = c.finalize(&order, &Client::csr(&names));
    assert_eq!(r.status, 200, "finalize: {}", String::from_utf8_lossy(&r.body));
    let finished = std::time::SystemTime::now();
    let r = c.post(r.json()["certificate"].as_str().unwrap(), None);
    let cert = der_of_pem(&String::from_utf8(r.body).unwrap());
    let scts = scts_of(&cert).expect("an SCT list");
    assert_eq!(scts.len(), 2);
    let issuing = der_of_pem(&std::fs::read_to_string(stack.pki.ca("issuing.pem")).unwrap());
    let entry = embedded_sct_entry(&cert, &issuing).unwrap();
    let millis = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for (sct, log) in scts.iter().zip(["a1", "b1"]) {
        let log_key = ct.key(log);
        assert_eq!(sct.log_id, log_key.log_id(), "the SCTs in the logs' order");
        log_key.verify_sct(sct, &entry).unwrap();
        // Signed during this finalization, by the logs' clocks (the same host's).
        assert!((millis(started)..=millis(finished)).contains(&sct.timestamp), "{}", sct.timestamp);
    }
    assert_eq!(metric(&stack, "acme_ct_policy_refusals_total", ""), 0.0, "a fresh acmed");
}

/// `[[ct.logs]]` for a temporal shard: `url`, base64 key `key`, NotAfter window `[start, end)`.
fn shard_entry(url: &str, key: &str, required: bool, (start, end): (i64, i64)) -> String {
    use signet_tests::ctlog::rfc3339;
    format!(
        "{}not_after_start = \"{}\"\nnot_after_end = \"{}\"\n",
        log_entry(url, key, required),
        rfc3339(start),
        rfc3339(end)
    )
}

#[test]
fn each_temporal_shard_is_asked_only_for_the_certificates_of_its_window() {
    use signet_tests::ctlog::unix_now;
    const DAY: i64 = 86_400;
    let mut stack = AcmeStack::start("");
    let dir = stack.pki.dir.clone();
    let root = stack.pki.ca("root.pem");
    let today = unix_now() - unix_now() % DAY;
    // A shard whose window has passed (no certificate issued today expires in
    // it), and the shard of today's certificates.
    let (past, current) = ((today - 10 * DAY, today - DAY), (today - DAY, today + 3650 * DAY));
    let logs = [LogSpec::new("past").window(past.0, past.1), LogSpec::new("current").window(current.0, current.1)];
    let ct = Ctlogd::start_logs(&mut stack.pki.signd, &dir, &root, &logs, TEST_SEQUENCING);
    let key = |name: &str| STANDARD.encode(&ct.logs.iter().find(|l| l.name == name).unwrap().public_key);
    // Both shards configured, the past one required: required only for its window.
    stack.reconfigure_acmed(&format!(
        "[ct]\ntimeout_ms = 5000\nmin_scts = 1\n{}{}",
        shard_entry(&ct.log_url("past"), &key("past"), true, past),
        shard_entry(&ct.log_url("current"), &key("current"), false, current),
    ));
    let mut c = Client::new(&stack);
    c.register();
    let names = ["shards.signet.test"];
    let (_, order) = c.new_order(&names);
    let cert = finish(&mut c, &order, &names);
    let scts = scts_of(&cert).expect("an SCT list");
    assert_eq!(scts.len(), 1, "one SCT, from the shard of the certificate's NotAfter");
    let issuing = der_of_pem(&std::fs::read_to_string(stack.pki.ca("issuing.pem")).unwrap());
    let entry = embedded_sct_entry(&cert, &issuing).unwrap();
    assert_eq!(scts[0].log_id, ct.key("current").log_id());
    ct.key("current").verify_sct(&scts[0], &entry).unwrap();
    ct.wait_for_size("current", 1);
    // The past shard was never asked: nothing reached its tree, acmed counts no submission.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ct.sth("past").0.tree_size, 0);
    let past_prefix = ct.log_url("past");
    assert_eq!(metric(&stack, "acme_ct_submission_seconds_count", &past_prefix), 0.0);
    assert_eq!(metric(&stack, "acme_ct_submission_seconds_count", &ct.log_url("current")), 1.0);

    // Only the past shard: no log takes the certificate, and the finalization says so.
    stack.reconfigure_acmed(&format!(
        "[ct]\ntimeout_ms = 5000\nmin_scts = 1\n{}",
        shard_entry(&past_prefix, &key("past"), true, past)
    ));
    let mut c = Client::new(&stack);
    c.register();
    let (order_url, order) = c.new_order(&names);
    c.authorize_dns01(&order);
    let r = finalize_raw(&mut c, &order, &names);
    assert_eq!((r.status, r.problem().as_str()), (500, "serverInternal"), "{:?}", r.json());
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("no configured log's NotAfter window holds the certificate's"), "{detail}");
    assert_eq!(c.post(&order_url, None).json()["status"], "ready");
    assert_eq!(ct.sth("past").0.tree_size, 0);
}
