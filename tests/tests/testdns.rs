//! signet-testdns as a process: real UDP and TCP queries, zone file edits while
//! it runs, the ACME clients' challenge hooks, garbage, and dig when installed.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use signet_tests::testdns::TestDns;

const ZONE: &str = r#"# the test's names
host.example.test   A     127.0.0.1
example.test        CAA   0 issue "signet.test; accounturi=https://127.0.0.1/acme/acct/1; validationmethods=dns-01"
*.wild.example.test A     127.0.0.2
"#;

fn a(m: &Message) -> Vec<String> {
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

fn txt(m: &Message) -> Vec<String> {
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::TXT(t) => Some(t.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()),
            _ => None,
        })
        .collect()
}

fn hook(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("acme").join(name)
}

#[test]
fn answers_a_aaaa_caa_and_nxdomain_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let dns = TestDns::start(&dir.path().join("zone"), ZONE);
    assert!(dns.addr().ip().is_loopback());

    for m in [dns.query("host.example.test", RecordType::A), dns.query_tcp("HOST.example.test.", RecordType::A)] {
        assert_eq!(m.response_code(), ResponseCode::NoError);
        assert!(m.authoritative());
        assert_eq!(a(&m), ["127.0.0.1"]);
    }

    // A name with an A record and no AAAA: NOERROR with no answer (NODATA), not an error.
    let m = dns.query("host.example.test", RecordType::AAAA);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);

    let m = dns.query("example.test", RecordType::CAA);
    let [caa] = m.answers() else { panic!("one CAA: {m:?}") };
    let RData::CAA(caa) = caa.data() else { panic!() };
    assert_eq!(caa.tag().as_str(), "issue");
    assert_eq!(caa.raw_value(), b"signet.test; accounturi=https://127.0.0.1/acme/acct/1; validationmethods=dns-01");

    assert_eq!(a(&dns.query("any.wild.example.test", RecordType::A)), ["127.0.0.2"]);

    let m = dns.query("nowhere.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert!(m.answers().is_empty());
}

#[test]
fn txt_records_follow_the_zone_file() {
    let dir = tempfile::tempdir().unwrap();
    let dns = TestDns::start(&dir.path().join("zone"), ZONE);
    let name = "_acme-challenge.host.example.test";
    assert_eq!(dns.query(name, RecordType::TXT).response_code(), ResponseCode::NXDomain);

    // Appended in place, as `echo >> zone` does.
    let mut text = std::fs::read_to_string(dns.zone()).unwrap();
    text.push_str(&format!("{name} TXT \"first\"\n{name} TXT \"second\" \"part\"\n"));
    std::fs::write(dns.zone(), &text).unwrap();
    let m = dns.query(name, RecordType::TXT);
    assert_eq!(txt(&m), ["first", "secondpart"]);

    // Replaced by a rename.
    dns.set(&format!("{ZONE}{name} TXT \"third\"\n"));
    assert_eq!(txt(&dns.query_tcp(name, RecordType::TXT)), ["third"]);

    // A half-written edit that does not parse keeps the last zone.
    std::fs::write(dns.zone(), format!("{ZONE}{name} TXT \"unterminated\n")).unwrap();
    assert_eq!(txt(&dns.query(name, RecordType::TXT)), ["third"]);
    assert!(dns.log().contains("does not parse"), "{}", dns.log());
    dns.set(ZONE);
    dns.add(&format!("{name} TXT \"fourth\""));
    assert_eq!(txt(&dns.query(name, RecordType::TXT)), ["fourth"]);
}

#[test]
fn certbot_and_lego_hooks_publish_and_withdraw_challenges() {
    let dir = tempfile::tempdir().unwrap();
    let dns = TestDns::start(&dir.path().join("zone"), ZONE);
    let name = "_acme-challenge.host.example.test";
    let certbot = |action: Option<&str>, validation: &str, auth_output: bool| {
        let mut cmd = Command::new(hook("certbot-dns-hook.sh"));
        cmd.args(action)
            .env("SIGNET_TESTDNS_ZONE", dns.zone())
            .env("CERTBOT_DOMAIN", "host.example.test")
            .env("CERTBOT_VALIDATION", validation)
            .env_remove("CERTBOT_AUTH_OUTPUT");
        if auth_output {
            cmd.env("CERTBOT_AUTH_OUTPUT", "");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let lego = |action: &str, fqdn: &str, value: &str| {
        let out = Command::new(hook("lego-dns-exec.sh"))
            .args([action, fqdn, value])
            .env("SIGNET_TESTDNS_ZONE", dns.zone())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };

    certbot(Some("auth"), "certbot-value_1", false);
    assert_eq!(txt(&dns.query(name, RecordType::TXT)), ["certbot-value_1"]);
    lego("present", &format!("{name}."), "lego-value-2");
    assert_eq!(txt(&dns.query(name, RecordType::TXT)), ["certbot-value_1", "lego-value-2"]);
    // The rest of the zone is untouched.
    assert_eq!(a(&dns.query("host.example.test", RecordType::A)), ["127.0.0.1"]);

    // certbot's cleanup, told apart from its auth by CERTBOT_AUTH_OUTPUT.
    certbot(None, "certbot-value_1", true);
    assert_eq!(txt(&dns.query(name, RecordType::TXT)), ["lego-value-2"]);
    lego("cleanup", &format!("{name}."), "lego-value-2");
    assert_eq!(dns.query(name, RecordType::TXT).response_code(), ResponseCode::NXDomain);
    assert_eq!(std::fs::read_to_string(dns.zone()).unwrap(), ZONE);

    // A bad call changes nothing and says why.
    let out = Command::new(hook("lego-dns-exec.sh"))
        .args(["present", "--", "host.example.test", "token", "keyauth"])
        .env("SIGNET_TESTDNS_ZONE", dns.zone())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("RAW"));
    assert_eq!(std::fs::read_to_string(dns.zone()).unwrap(), ZONE);
}

#[test]
fn garbage_gets_formerr_or_nothing_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let dns = TestDns::start(&dir.path().join("zone"), ZONE);

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    // A header claiming a question it does not carry: FORMERR, same ID.
    socket.send_to(&[0xbe, 0xef, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7], dns.addr()).unwrap();
    let mut buf = [0u8; 512];
    let len = socket.recv(&mut buf).unwrap();
    let m = Message::from_vec(&buf[..len]).unwrap();
    assert_eq!((m.id(), m.response_code()), (0xbeef, ResponseCode::FormErr));
    for packet in [&b""[..], b"x", &[0xff; 300]] {
        socket.send_to(packet, dns.addr()).unwrap();
    }

    // TCP: a length prefix promising more than arrives, then a hang-up.
    {
        use std::io::Write;
        let mut stream = TcpStream::connect(dns.addr()).unwrap();
        stream.write_all(&[0x01, 0x00, 1, 2, 3]).unwrap();
    }

    assert_eq!(a(&dns.query("host.example.test", RecordType::A)), ["127.0.0.1"]);
    assert_eq!(a(&dns.query_tcp("host.example.test", RecordType::A)), ["127.0.0.1"]);
    assert!(dns.log().contains("FORMERR"), "{}", dns.log());
}

#[test]
fn a_bad_zone_file_at_startup_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone");
    std::fs::write(&zone, "ok.test A 127.0.0.1\nbad.test A 999.0.0.1\n").unwrap();
    let out = Command::new(signet_tests::bin("signet-testdns"))
        .args(["--listen", "127.0.0.1:0", "--zone"])
        .arg(&zone)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 2") && stderr.contains("999.0.0.1"), "{stderr}");
}

/// dig, where installed, as a second opinion on the wire format.
#[test]
fn dig_agrees() {
    if Command::new("dig").arg("-v").output().is_err() {
        eprintln!("dig not installed: skipped (apt-get install bind9-dnsutils)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dns = TestDns::start(&dir.path().join("zone"), ZONE);
    dns.add("_acme-challenge.host.example.test TXT \"dig-value\"");
    let dig = |args: &[&str]| {
        let out = Command::new("dig")
            .args(["+norec", "+time=2", "+tries=1", "-p", &dns.addr().port().to_string(), "@127.0.0.1"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(dig(&["+short", "host.example.test", "A"]).trim(), "127.0.0.1");
    assert_eq!(dig(&["+short", "+tcp", "_acme-challenge.host.example.test", "TXT"]).trim(), "\"dig-value\"");
    assert_eq!(
        dig(&["+short", "example.test", "CAA"]).trim(),
        "0 issue \"signet.test; accounturi=https://127.0.0.1/acme/acct/1; validationmethods=dns-01\""
    );
    let nodata = dig(&["host.example.test", "AAAA"]);
    assert!(nodata.contains("status: NOERROR") && nodata.contains("ANSWER: 0") && nodata.contains(" aa"), "{nodata}");
    assert!(dig(&["nowhere.example.test", "A"]).contains("status: NXDOMAIN"));
}
