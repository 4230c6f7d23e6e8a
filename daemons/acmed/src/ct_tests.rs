#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;

use der::asn1::BitString;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::SubjectAlternativeName;
use openssl::x509::{X509NameBuilder, X509};
use signet_ct::rfc6962::precert::{embedded_sct_entry, extension_value, is_precertificate, precert_entry, POISON_OID};
use signet_ct::rfc6962::{scts_from_extension_value, SCT_LIST_OID};
use signet_ct::DigitallySigned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_openssl::SslStream;
use x509_cert::Certificate;

use super::*;
use crate::config::{CtLogSettings, CtPolicyName};

fn p256() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// A CA certificate and a leaf it issued (openssl), DER.
fn ca_and_leaf() -> (Vec<u8>, Vec<u8>) {
    let name = |cn: &str| {
        let mut n = X509NameBuilder::new().unwrap();
        n.append_entry_by_text("CN", cn).unwrap();
        n.build()
    };
    let (ca_key, leaf_key) = (p256(), p256());
    let cert = |cn: &str, key: &PKey<Private>, leaf: bool| {
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&openssl::bn::BigNum::from_u32(0x1234_5678).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name(cn)).unwrap();
        b.set_issuer_name(&name("CA")).unwrap();
        b.set_pubkey(key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(30).unwrap()).unwrap();
        if leaf {
            let san =
                SubjectAlternativeName::new().dns("www.signet.test").build(&b.x509v3_context(None, None)).unwrap();
            b.append_extension(san).unwrap();
        }
        b.sign(&ca_key, MessageDigest::sha256()).unwrap();
        b.build().to_der().unwrap()
    };
    (cert("CA", &ca_key, false), cert("www.signet.test", &leaf_key, true))
}

fn tbs_of(cert_der: &[u8]) -> Vec<u8> {
    signet_ct::rfc6962::precert::tbs_certificate(cert_der).unwrap()
}

/// A certificate around `tbs` (the signature is not checked by anything here).
fn wrap(tbs: &[u8]) -> Vec<u8> {
    let tbs = TbsCertificate::from_der(tbs).unwrap();
    Certificate {
        signature_algorithm: tbs.signature.clone(),
        tbs_certificate: tbs,
        signature: BitString::from_bytes(&[1, 2, 3]).unwrap(),
    }
    .to_der()
    .unwrap()
}

/// An SCT by `log` over `entry`, as a log would sign it.
fn sct_by(log: &PKey<Private>, entry: &SignedEntry, timestamp: u64) -> Sct {
    let spki = log.public_key_to_der().unwrap();
    let mut sct = Sct {
        log_id: signet_ct::rfc6962::log_id(&spki).unwrap(),
        timestamp,
        extensions: signet_ct::staticct::leaf_index_extensions(7).unwrap(),
        signature: DigitallySigned::ecdsa(Vec::new()),
    };
    let mut signer = openssl::sign::Signer::new(MessageDigest::sha256(), log).unwrap();
    sct.signature = DigitallySigned::ecdsa(signer.sign_oneshot_to_vec(&sct.signature_input(entry).unwrap()).unwrap());
    sct
}

#[test]
fn precertificate_tbs_adds_only_a_critical_poison() {
    let (ca, leaf) = ca_and_leaf();
    let tbs = tbs_of(&leaf);
    let pre = precertificate_tbs(&tbs).unwrap();
    let pre_cert = wrap(&pre);
    assert!(is_precertificate(&pre_cert).unwrap());
    let parsed = TbsCertificate::from_der(&pre).unwrap();
    let original = TbsCertificate::from_der(&tbs).unwrap();
    let poison = parsed.extensions.as_ref().unwrap().last().unwrap();
    assert_eq!((poison.extn_id, poison.critical, poison.extn_value.as_bytes()), (POISON_OID, true, &[5u8, 0][..]));
    // Everything else is the TBS's own: serial, validity, names, key, extensions.
    assert_eq!(parsed.serial_number, original.serial_number);
    assert_eq!(parsed.validity, original.validity);
    assert_eq!(parsed.subject, original.subject);
    assert_eq!(&parsed.extensions.as_ref().unwrap()[..1], &original.extensions.as_ref().unwrap()[..]);
    // What a log computes from the precertificate is the TBS we started from.
    let SignedEntry::Precert { tbs_certificate, .. } = precert_entry(&[pre_cert, ca.clone()]).unwrap() else {
        panic!("not a precert entry")
    };
    assert_eq!(tbs_certificate, tbs);
    assert_eq!(precert_entry(&[wrap(&pre), ca.clone()]).unwrap(), entry_for(&tbs, &ca).unwrap());
    // A TBS that has the poison already is refused.
    assert!(precertificate_tbs(&pre).unwrap_err().contains("already has"));
}

#[test]
fn final_tbs_embeds_scts_that_verify_for_the_certificate() {
    let (ca, leaf) = ca_and_leaf();
    let tbs = tbs_of(&leaf);
    let entry = entry_for(&tbs, &ca).unwrap();
    let (log_a, log_b) = (p256(), p256());
    let scts = vec![sct_by(&log_a, &entry, 1_750_000_000_000), sct_by(&log_b, &entry, 1_750_000_000_001)];
    let final_der = final_tbs(&tbs, &scts).unwrap();
    let cert = wrap(&final_der);
    let parsed = TbsCertificate::from_der(&final_der).unwrap();
    let original = TbsCertificate::from_der(&tbs).unwrap();
    assert_eq!(parsed.serial_number, original.serial_number);
    assert_eq!(parsed.validity, original.validity);
    let ext = parsed.extensions.as_ref().unwrap().last().unwrap();
    assert_eq!((ext.extn_id, ext.critical), (SCT_LIST_OID, false));
    assert!(!is_precertificate(&cert).unwrap());
    // The list holds both SCTs, in order; each verifies, as a TLS client checks
    // it, against the entry rebuilt from the final certificate and its issuer.
    let embedded = scts_from_extension_value(&extension_value(&cert, &SCT_LIST_OID).unwrap().unwrap()).unwrap();
    assert_eq!(embedded, scts);
    let client_entry = embedded_sct_entry(&cert, &ca).unwrap();
    assert_eq!(client_entry, entry);
    for (sct, key) in embedded.iter().zip([&log_a, &log_b]) {
        let key = LogKey::from_spki_der(&key.public_key_to_der().unwrap()).unwrap();
        key.verify_sct(sct, &client_entry).unwrap();
    }
    // The exact extension value: OCTET STRING { u16 list length, (u16 SCT length, SCT)* }.
    let value = extension_value(&cert, &SCT_LIST_OID).unwrap().unwrap();
    let list = signet_ct::rfc6962::encode_sct_list(&scts).unwrap();
    assert_eq!(der::asn1::OctetString::from_der(&value).unwrap().as_bytes(), &list[..]);
    let first = scts[0].to_bytes().unwrap();
    assert_eq!(usize::from(u16::from_be_bytes([list[0], list[1]])), list.len() - 2);
    assert_eq!(usize::from(u16::from_be_bytes([list[2], list[3]])), first.len());
    assert_eq!(&list[4..4 + first.len()], &first[..]);
    // Without SCTs (min_scts = 0 and every log failed) the TBS is unchanged.
    assert_eq!(final_tbs(&tbs, &[]).unwrap(), tbs);
}

#[test]
fn non_der_tbs_is_refused() {
    let (_, leaf) = ca_and_leaf();
    let tbs = tbs_of(&leaf);
    // The outer length in long form where short or shorter form fits: BER, not DER.
    let mut ber = vec![0x30, 0x83, 0];
    ber.extend_from_slice(&u16::try_from(tbs.len() - 4).unwrap().to_be_bytes());
    ber.extend_from_slice(&tbs[4..]);
    assert!(precertificate_tbs(&ber).is_err());
    assert!(precertificate_tbs(b"\x30\x00").is_err());
}

fn outcome(log: &str, required: bool, ok: bool) -> LogOutcome {
    let sct = Sct { log_id: [1; 32], timestamp: 1, extensions: vec![], signature: DigitallySigned::ecdsa(vec![1]) };
    LogOutcome {
        log: log.into(),
        operator: None,
        required,
        result: if ok { Ok(sct) } else { Err(Failure::Timeout(Duration::from_millis(2000))) },
    }
}

/// `outcome` of a log run by `operator`.
fn by(operator: &str, log: &str, ok: bool) -> LogOutcome {
    LogOutcome { operator: Some(operator.into()), ..outcome(log, false, ok) }
}

const DAYS_90: Duration = Duration::from_secs(90 * 86_400);

#[test]
fn policy() {
    let min = Policy::MinScts;
    // Enough valid SCTs: all of them, in the logs' order.
    let all = [outcome("a", false, true), outcome("b", false, true)];
    assert_eq!(select_scts(&all, min(1), DAYS_90).unwrap().len(), 2);
    assert_eq!(select_scts(&all, min(2), DAYS_90).unwrap().len(), 2);
    // One of two logs down: enough for min_scts = 1, not 2.
    let one_down = [outcome("a", false, true), outcome("b", false, false)];
    assert_eq!(select_scts(&one_down, min(1), DAYS_90).unwrap().len(), 1);
    let e = select_scts(&one_down, min(2), DAYS_90).unwrap_err();
    assert!(e.contains("1 valid SCT(s) from 2 log(s), the policy needs 2"), "{e}");
    assert!(e.contains("b: no answer within 2000 ms"), "{e}");
    // A required log down fails whatever the count.
    let required_down = [outcome("a", false, true), outcome("b", true, false)];
    let e = select_scts(&required_down, min(1), DAYS_90).unwrap_err();
    assert!(e.contains("the required log b"), "{e}");
    assert!(select_scts(&required_down, min(0), DAYS_90).is_err());
    assert!(select_scts(&required_down, Policy::Chrome, DAYS_90).unwrap_err().contains("the required log b"));
    let required_up = [outcome("a", false, false), outcome("b", true, true)];
    assert_eq!(select_scts(&required_up, min(1), DAYS_90).unwrap().len(), 1);
    // Every log down: min_scts = 0 issues without SCTs, 1 refuses.
    let down = [outcome("a", false, false)];
    assert_eq!(select_scts(&down, min(0), DAYS_90).unwrap(), vec![]);
    assert!(select_scts(&down, min(1), DAYS_90).is_err());
}

#[test]
fn chrome_policy_counts_by_lifetime_and_operators() {
    let day = |n: u64| Duration::from_secs(n * 86_400);
    // The count: 2 up to 180 days (inclusive), 3 beyond.
    assert_eq!(chrome_scts_needed(day(6)), 2);
    assert_eq!(chrome_scts_needed(day(90)), 2);
    assert_eq!(chrome_scts_needed(day(180)), 2);
    assert_eq!(chrome_scts_needed(day(180) + Duration::from_secs(1)), 3);
    assert_eq!(chrome_scts_needed(day(398)), 3);

    let chrome = Policy::Chrome;
    let two = [outcome("a", false, true), outcome("b", false, true)];
    assert_eq!(select_scts(&two, chrome, DAYS_90).unwrap().len(), 2);
    let e = select_scts(&two, chrome, day(200)).unwrap_err();
    assert!(
        e.contains("2 valid SCT(s) from 2 log(s), the chrome policy needs 3 for a certificate valid 200 day(s)"),
        "{e}"
    );
    let three =
        [outcome("a", false, true), outcome("b", false, false), outcome("c", false, true), outcome("d", false, true)];
    assert_eq!(select_scts(&three, chrome, day(200)).unwrap().len(), 3);
    let e = select_scts(&[outcome("a", false, true), outcome("b", false, false)], chrome, DAYS_90).unwrap_err();
    assert!(e.contains("1 valid SCT(s) from 2 log(s), the chrome policy needs 2") && e.contains("b: no answer"), "{e}");

    // Operators named: two distinct ones among the logs that gave SCTs.
    assert_eq!(select_scts(&[by("A", "a", true), by("B", "b", true)], chrome, DAYS_90).unwrap().len(), 2);
    let e = select_scts(&[by("A", "a", true), by("A", "b", true)], chrome, DAYS_90).unwrap_err();
    assert!(e.contains("from 1 log operator(s) (A), the chrome policy needs SCTs from at least 2 distinct"), "{e}");
    // The other operator's log failed: its SCT does not count.
    let e = select_scts(&[by("A", "a", true), by("A", "b", true), by("B", "c", false)], chrome, DAYS_90).unwrap_err();
    assert!(e.contains("distinct operators") && e.contains("c: no answer"), "{e}");
    let ok = [by("A", "a", true), by("A", "b", false), by("B", "c", true)];
    assert_eq!(select_scts(&ok, chrome, DAYS_90).unwrap().len(), 2);
    // The min_scts policy does not look at operators.
    assert_eq!(select_scts(&[by("A", "a", true), by("A", "b", true)], Policy::MinScts(2), DAYS_90).unwrap().len(), 2);
}

#[test]
fn sct_timestamps_must_fit_the_submission() {
    let (sent, received, skew) = (1_750_000_000_000, 1_750_000_000_300, 1000);
    for ok in [sent, received, sent - skew, received + skew, sent + 150] {
        assert_eq!(check_sct_timestamp(ok, sent, received, skew), Ok(()), "{ok}");
    }
    let e = check_sct_timestamp(received + skew + 1, sent, received, skew).unwrap_err();
    assert!(e.contains("1001 ms in the future"), "{e}");
    let e = check_sct_timestamp(sent - skew - 1, sent, received, skew).unwrap_err();
    assert!(e.contains("1001 ms older than the submission"), "{e}");
    assert!(check_sct_timestamp(0, sent, received, skew).is_err());
    assert!(check_sct_timestamp(u64::MAX, sent, received, skew).is_err());
    // No underflow near the epoch, no overflow near the end of time.
    assert_eq!(check_sct_timestamp(0, 10, 20, 100), Ok(()));
    assert_eq!(check_sct_timestamp(u64::MAX, u64::MAX, u64::MAX, 100), Ok(()));
}

fn settings(logs: Vec<CtLogSettings>) -> CtSettings {
    CtSettings { timeout_ms: 1000, policy: CtPolicyName::MinScts, min_scts: Some(1), max_skew_ms: 5000, logs }
}

fn one_log(timeout_ms: u64, log: CtLogSettings) -> CtSettings {
    CtSettings { timeout_ms, ..settings(vec![log]) }
}

fn now_ms() -> u64 {
    Clock::system().unix_millis() as u64
}

fn log_settings(url: &str, key: &PKey<Private>) -> CtLogSettings {
    CtLogSettings {
        url: url.into(),
        public_key: base64::engine::general_purpose::STANDARD.encode(key.public_key_to_der().unwrap()),
        required: false,
        operator: None,
        ca_file: None,
        not_after_start: None,
        not_after_end: None,
    }
}

#[test]
fn log_settings_are_checked() {
    let key = p256();
    assert!(CtLogs::new(&settings(vec![log_settings("http://127.0.0.1:1/a/", &key)])).is_ok());
    let mut bad = log_settings("http://127.0.0.1:1/a/", &key);
    bad.public_key = "not base64!".into();
    assert!(CtLogs::new(&settings(vec![bad.clone()])).err().unwrap().contains("not base64"));
    bad.public_key = "AAAA".into();
    assert!(CtLogs::new(&settings(vec![bad])).err().unwrap().contains("public_key"));
    let ed = PKey::generate_ed25519().unwrap();
    assert!(CtLogs::new(&settings(vec![log_settings("http://x/", &ed)])).is_err());
    let twice = vec![log_settings("http://a/", &key), log_settings("http://b/", &key)];
    assert!(CtLogs::new(&settings(twice)).err().unwrap().contains("same public_key"));
    let mut https = log_settings("https://ct.example/", &key);
    https.ca_file = Some("/nonexistent/roots.pem".into());
    assert!(CtLogs::new(&settings(vec![https])).err().unwrap().contains("ca_file"));
}

/// A log with the NotAfter window `[start, end)` (RFC 3339).
fn shard(url: &str, start: &str, end: &str) -> CtLogSettings {
    CtLogSettings { not_after_start: Some(start.into()), not_after_end: Some(end.into()), ..log_settings(url, &p256()) }
}

#[test]
fn temporal_shards_take_the_certificates_of_their_window() {
    const Y2027: i64 = 1_798_761_600; // 2027-01-01T00:00:00Z
    const Y2028: i64 = 1_830_297_600;
    let logs = vec![
        shard("http://ct/2027/", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"),
        shard("http://ct/2028/", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z"),
        log_settings("http://other/", &p256()),
    ];
    let ct = CtLogs::new(&settings(logs)).unwrap();
    assert_eq!(ct.logs_for(Y2027 - 1), ["http://other/"]);
    assert_eq!(ct.logs_for(Y2027), ["http://ct/2027/", "http://other/"]);
    assert_eq!(ct.logs_for(Y2028 - 1), ["http://ct/2027/", "http://other/"]);
    assert_eq!(ct.logs_for(Y2028), ["http://ct/2028/", "http://other/"]);

    // No log takes it: nothing is sent, and the policy says why.
    let ct =
        CtLogs::new(&settings(vec![shard("http://127.0.0.1:1/x/", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z")]))
            .unwrap();
    let (ca, leaf) = ca_and_leaf();
    let entry = entry_for(&tbs_of(&leaf), &ca).unwrap();
    let out = runtime().block_on(ct.submit(&[leaf, ca], &entry, Y2028, &Clock::system()));
    assert!(out.is_empty(), "{out:?}");
    let why = select_scts(&out, Policy::MinScts(1), Duration::from_secs(86_400)).unwrap_err();
    assert!(why.contains("no configured log's NotAfter window"), "{why}");
    assert_eq!(select_scts(&out, Policy::MinScts(0), Duration::from_secs(86_400)), Ok(vec![]));

    // Both bounds, in order, RFC 3339.
    for (start, end, want) in [
        (Some("2027-01-01T00:00:00Z"), None, "go together"),
        (None, Some("2027-01-01T00:00:00Z"), "go together"),
        (Some("2028-01-01T00:00:00Z"), Some("2027-01-01T00:00:00Z"), "must come before"),
        (Some("2027-01-01T00:00:00Z"), Some("2027-01-01T00:00:00Z"), "must come before"),
        (Some("2027-01-01"), Some("2028-01-01T00:00:00Z"), "not an RFC 3339 time"),
    ] {
        let log = CtLogSettings {
            not_after_start: start.map(Into::into),
            not_after_end: end.map(Into::into),
            ..log_settings("http://ct/", &p256())
        };
        let e = CtLogs::new(&settings(vec![log])).err().unwrap();
        assert!(e.contains(want) && e.contains("[[ct.logs]] #1"), "{e}");
    }
}

/// A one-shot HTTP server: answers every connection with `answer` (None: reads
/// and never answers). Returns its port.
async fn canned(answer: Option<String>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                match answer {
                    Some(a) => {
                        let _ = s.write_all(a.as_bytes()).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    port
}

fn http_200(body: &str) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn submissions_are_verified_and_bounded() {
    runtime().block_on(async {
        let (ca, leaf) = ca_and_leaf();
        let tbs = tbs_of(&leaf);
        let entry = entry_for(&tbs, &ca).unwrap();
        let key = p256();
        let now = now_ms();
        let answer = |entry: &SignedEntry, ts: u64| {
            serde_json::to_string(&AddChainResponse::from_sct(&sct_by(&key, entry, ts)).unwrap()).unwrap()
        };
        let good = answer(&entry, now);
        let other_entry = entry_for(&tbs_of(&ca), &ca).unwrap();
        let wrong = answer(&other_entry, now);
        // Right signature, wrong time: an hour ago, or a minute ahead.
        let (old, ahead) = (answer(&entry, now - 3_600_000), answer(&entry, now + 60_000));
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cases = [
            (canned(Some(http_200(&good))).await, None),
            (canned(Some(http_200(&wrong))).await, Some("signature")),
            (canned(Some(http_200(&old))).await, Some("timestamp")),
            (canned(Some(http_200(&ahead))).await, Some("timestamp")),
            (canned(Some(http_200("{\"nope\": 1}"))).await, Some("response")),
            (canned(Some("HTTP/1.1 400 Bad Request\r\nContent-Length: 9\r\n\r\nbad chain".into())).await, Some("http")),
            (canned(None).await, Some("timeout")),
            (refused, Some("connect")),
        ];
        // Each case its own log key, as logs are told apart by key.
        let mut logs = Vec::new();
        for (i, (port, _)) in cases.iter().enumerate() {
            let k = if i <= 3 { key.clone() } else { p256() };
            logs.push(log_settings(&format!("http://127.0.0.1:{port}/log{i}"), &k));
        }
        // One CtLogs per case: two logs may not share a key.
        for ((_, want), log) in cases.iter().zip(logs) {
            let ct = CtLogs::new(&one_log(300, log)).unwrap();
            let started = Instant::now();
            let out = ct.submit(&[leaf.clone(), ca.clone()], &entry, 0, &Clock::system()).await;
            assert!(started.elapsed() < Duration::from_millis(1500), "bounded by the timeout");
            match (want, &out[0].result) {
                (None, Ok(sct)) => assert_eq!(sct.timestamp, now),
                (Some(reason), Err(e)) => assert_eq!(e.reason(), *reason, "{e}"),
                (want, got) => panic!("{want:?}: {got:?}"),
            }
        }
    });
}

#[test]
fn https_logs_are_verified_with_ca_file() {
    runtime().block_on(async {
        let (ca, leaf) = ca_and_leaf();
        let entry = entry_for(&tbs_of(&leaf), &ca).unwrap();
        let key = p256();
        let now = now_ms();
        let body = serde_json::to_string(&AddChainResponse::from_sct(&sct_by(&key, &entry, now)).unwrap()).unwrap();
        // A TLS server for 127.0.0.1 with a self-signed certificate.
        let tls_key = p256();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "ct.test").unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&tls_key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
        let san = SubjectAlternativeName::new().ip("127.0.0.1").build(&b.x509v3_context(None, None)).unwrap();
        b.append_extension(san).unwrap();
        b.sign(&tls_key, MessageDigest::sha256()).unwrap();
        let tls_cert = b.build();
        let mut acceptor = openssl::ssl::SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        acceptor.set_private_key(&tls_key).unwrap();
        acceptor.set_certificate(&tls_cert).unwrap();
        let acceptor = acceptor.build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = http_200(&body);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let ssl = openssl::ssl::Ssl::new(acceptor.context()).unwrap();
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut s = Box::pin(SslStream::new(ssl, tcp).unwrap());
                    if s.as_mut().accept().await.is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; 65536];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(answer.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        let mut roots = tempfile::NamedTempFile::new().unwrap();
        roots.write_all(&tls_cert.to_pem().unwrap()).unwrap();
        let mut log = log_settings(&format!("https://127.0.0.1:{port}/ct"), &key);
        log.ca_file = Some(roots.path().to_path_buf());
        let ct = CtLogs::new(&one_log(2000, log.clone())).unwrap();
        let out = ct.submit(&[leaf.clone(), ca.clone()], &entry, 0, &Clock::system()).await;
        assert_eq!(out[0].result.as_ref().unwrap().timestamp, now);
        // Without those roots the log's certificate is not trusted.
        log.ca_file = None;
        let ct = CtLogs::new(&one_log(2000, log)).unwrap();
        let out = ct.submit(&[leaf, ca], &entry, 0, &Clock::system()).await;
        assert_eq!(out[0].result.as_ref().unwrap_err().reason(), "connect", "{:?}", out[0].result);
    });
}
