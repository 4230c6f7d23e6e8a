//! Unit tests: the zone parser, the answers (through the wire encoding), reloads.

use super::*;

use hickory_proto::rr::rdata::CAA;

const ZONE: &str = r#"
# a comment line
host.example.test        A     192.0.2.1
host.example.test        A     192.0.2.2   # trailing comment
v6.example.test.         AAAA  2001:db8::1
HOST.example.test        TXT   "Hello # not a comment" "second \"string\""
txt.example.test         TXT   unquoted text with spaces
txt.example.test         TXT   "another"
example.test             CAA   0 issue "signet.test; accounturi=https://acme.test/acct/1; validationmethods=http-01"
example.test             CAA   128 issuewild ";"
example.test             CAA   0 iodef "mailto:ca@example.test"
*.wild.example.test      A     192.0.2.9
exact.wild.example.test  TXT   "exact"
alias.example.test       CNAME host.example.test
alias2.example.test      CNAME alias.example.test.
dangling.example.test    CNAME missing.example.test
loop1.example.test       CNAME loop2.example.test
loop2.example.test       CNAME loop1.example.test
_acme-challenge.deep.example.test TXT "token"
"#;

fn zone() -> Zone {
    Zone::parse(ZONE).expect("test zone parses")
}

/// A name as it comes off the wire: fully qualified.
fn name(s: &str) -> Name {
    let mut name = Name::from_ascii(s).unwrap();
    name.set_fqdn(true);
    name
}

fn request(qname: &str, qtype: RecordType) -> Message {
    let mut m = Message::new();
    m.set_id(0x1234)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name(qname), qtype));
    m
}

fn peer() -> SocketAddr {
    "127.0.0.1:5353".parse().unwrap()
}

/// Asks `zone` over the wire encoding (UDP) and decodes the answer.
fn ask_msg(zone: &Zone, request: &Message, transport: Transport) -> Message {
    let bytes = respond(zone, 0, &request.to_vec().unwrap(), transport, peer()).expect("an answer");
    Message::from_vec(&bytes).expect("the answer decodes")
}

fn ask(zone: &Zone, qname: &str, qtype: RecordType) -> Message {
    ask_msg(zone, &request(qname, qtype), Transport::Udp)
}

fn a_records(m: &Message) -> Vec<Ipv4Addr> {
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(a.0),
            _ => None,
        })
        .collect()
}

fn txt_strings(m: &Message) -> Vec<Vec<String>> {
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::TXT(t) => Some(t.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()),
            _ => None,
        })
        .collect()
}

// --- the parser ---

#[test]
fn parses_every_type() {
    let z = zone();
    assert_eq!(z.records["host.example.test"].len(), 3, "two A, one TXT (case-folded owner)");
    assert_eq!(z.records["v6.example.test"], vec![RData::AAAA(AAAA("2001:db8::1".parse().unwrap()))]);
    assert_eq!(z.records["example.test"].len(), 3);
    assert_eq!(
        z.records["alias2.example.test"],
        vec![RData::CNAME(CNAME(Name::from_ascii("alias.example.test.").unwrap()))]
    );
    assert!(z.records.contains_key("*.wild.example.test"));
    assert!(z.ancestors.contains("deep.example.test"));
    assert!(z.ancestors.contains("wild.example.test"));
    assert!(z.ancestors.contains("test"));
    assert!(!z.ancestors.contains("host.example.test"));
}

#[test]
fn txt_values_quoted_unquoted_and_long() {
    let z = zone();
    let txt = |key: &str| -> Vec<Vec<Vec<u8>>> {
        z.records[key]
            .iter()
            .filter_map(|r| match r {
                RData::TXT(t) => Some(t.iter().map(|s| s.to_vec()).collect()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(txt("host.example.test"), vec![vec![b"Hello # not a comment".to_vec(), b"second \"string\"".to_vec()]]);
    assert_eq!(txt("txt.example.test"), vec![vec![b"unquoted text with spaces".to_vec()], vec![b"another".to_vec()]]);

    let long = "x".repeat(600);
    let z = Zone::parse(&format!("a.test TXT \"{long}\"\nb.test TXT \"\"")).unwrap();
    let RData::TXT(t) = &z.records["a.test"][0] else { panic!() };
    assert_eq!(t.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![255, 255, 90]);
    let RData::TXT(t) = &z.records["b.test"][0] else { panic!() };
    assert_eq!(t.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn caa_values_keep_their_bytes() {
    let z = zone();
    let caas: Vec<&CAA> = z.records["example.test"]
        .iter()
        .filter_map(|r| match r {
            RData::CAA(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(caas[0].flags(), 0);
    assert_eq!(caas[0].tag().as_str(), "issue");
    assert_eq!(caas[0].raw_value(), b"signet.test; accounturi=https://acme.test/acct/1; validationmethods=http-01");
    let (issuer, params) = caas[0].value_as_issue().unwrap();
    assert_eq!(issuer.unwrap().to_ascii(), "signet.test");
    assert_eq!(params.len(), 2);
    assert_eq!(caas[1].flags(), 128);
    assert!(caas[1].issuer_critical());
    assert_eq!(caas[1].tag().as_str(), "issuewild");
    assert_eq!(caas[1].raw_value(), b";");
    assert_eq!(caas[2].tag().as_str(), "iodef");

    // Malformed issuer values and unknown tags are served as written.
    let z = Zone::parse("a.test CAA 0 issue \"bad..name;; =\"\na.test CAA 0 tbs unquoted value").unwrap();
    let RData::CAA(bad) = &z.records["a.test"][0] else { panic!() };
    assert_eq!(bad.raw_value(), b"bad..name;; =");
    let RData::CAA(unknown) = &z.records["a.test"][1] else { panic!() };
    assert_eq!(unknown.tag().as_str(), "tbs");
    assert_eq!(unknown.raw_value(), b"unquoted value");
}

#[test]
fn parse_errors_name_the_line() {
    let cases = [
        ("a.test A 192.0.2.1\nb.test A nope", 2, "IPv4"),
        ("a.test AAAA 192.0.2.1", 1, "IPv6"),
        ("a.test MX 10 mail.test", 1, "unsupported type"),
        ("a.test A", 1, "NAME TYPE VALUE"),
        ("a.test", 1, "NAME TYPE VALUE"),
        ("a.test TXT \"unterminated", 1, "unterminated"),
        ("a.test TXT \"a\" b", 1, "quoted string"),
        ("a.test CAA 300 issue \"x\"", 1, "flags"),
        ("a.test CAA 0", 1, "FLAGS TAG VALUE"),
        ("a.test CAA 0 is-sue \"x\"", 1, "CAA"),
        ("a.test CAA 0 issue \"x\" trailing", 1, "after the CAA value"),
        ("a..test A 192.0.2.1", 1, "bad name"),
        ("# c\n\na.test A 192.0.2.1\na.test CNAME b.test", 4, "CNAME"),
        ("a.test CNAME b.test\na.test TXT \"x\"", 2, "CNAME"),
        ("a.test CNAME b.test\na.test CNAME c.test", 2, "CNAME"),
    ];
    for (text, line, needle) in cases {
        let e = Zone::parse(text).expect_err(text);
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
}

#[test]
fn comments_blank_lines_and_duplicates() {
    let z = Zone::parse(
        "\n   \n# only a comment\n\ta.test\tA\t192.0.2.1\t# tab separated\na.test A 192.0.2.1\nb.test TXT x#y\n",
    )
    .unwrap();
    assert_eq!(z.records["a.test"].len(), 1, "duplicate lines are one record");
    let RData::TXT(t) = &z.records["b.test"][0] else { panic!() };
    assert_eq!(&*t.txt_data()[0], b"x#y", "# inside a word is no comment");
    assert_eq!(Zone::parse("").unwrap().len(), 0);
}

// --- the answers ---

#[test]
fn a_records_are_authoritative_answers() {
    let m = ask(&zone(), "HOST.Example.Test.", RecordType::A);
    assert_eq!(m.id(), 0x1234);
    assert_eq!(m.message_type(), MessageType::Response);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative());
    assert!(m.recursion_desired());
    assert!(!m.recursion_available());
    assert_eq!(m.queries(), request("HOST.Example.Test.", RecordType::A).queries());
    assert_eq!(a_records(&m), vec![Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)]);
    assert!(m.name_servers().is_empty());
    assert_eq!(m.answers()[0].name(), &name("HOST.Example.Test."), "owner is the name asked");
    assert_eq!(m.answers()[0].ttl(), 0);
}

#[test]
fn missing_type_is_nodata_not_an_error() {
    let m = ask(&zone(), "host.example.test", RecordType::AAAA);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative());
    assert!(m.answers().is_empty());
    let [soa] = m.name_servers() else { panic!("one SOA in authority: {m:?}") };
    let RData::SOA(soa) = soa.data() else { panic!() };
    assert_eq!(soa.minimum(), 0);
}

#[test]
fn unknown_name_is_nxdomain() {
    let m = ask(&zone(), "nothing.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert!(m.authoritative());
    assert!(m.answers().is_empty());
    assert_eq!(m.name_servers().len(), 1);
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    assert_eq!(m.name_servers()[0].name(), &name("test"));
    let m = ask(&zone(), "elsewhere.invalid", RecordType::TXT);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
}

#[test]
fn empty_non_terminal_is_nodata() {
    let m = ask(&zone(), "deep.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
    let m = ask(&zone(), "_acme-challenge.deep.example.test", RecordType::TXT);
    assert_eq!(txt_strings(&m), vec![vec!["token".to_owned()]]);
}

#[test]
fn txt_and_caa_answers() {
    let z = zone();
    let m = ask(&z, "txt.example.test", RecordType::TXT);
    assert_eq!(txt_strings(&m), vec![vec!["unquoted text with spaces".to_owned()], vec!["another".to_owned()]]);
    let m = ask(&z, "example.test", RecordType::CAA);
    assert_eq!(m.answers().len(), 3);
    let RData::CAA(caa) = m.answers()[0].data() else { panic!() };
    assert_eq!(caa.raw_value(), b"signet.test; accounturi=https://acme.test/acct/1; validationmethods=http-01");
    let m = ask(&z, "host.example.test", RecordType::CAA);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
}

#[test]
fn wildcards_match_deeper_names_without_records() {
    let z = zone();
    for qname in ["a.wild.example.test", "b.c.wild.example.test", "A.WILD.EXAMPLE.TEST."] {
        let m = ask(&z, qname, RecordType::A);
        assert_eq!(a_records(&m), vec![Ipv4Addr::new(192, 0, 2, 9)], "{qname}");
        assert_eq!(m.answers()[0].name(), &name(qname), "owner is the name asked");
    }
    // A wildcard name without the type: NODATA, not NXDOMAIN.
    let m = ask(&z, "a.wild.example.test", RecordType::AAAA);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
    // A name with its own records is not covered by the wildcard.
    let m = ask(&z, "exact.wild.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
    // The wildcard's parent is not matched by it.
    let m = ask(&z, "wild.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.answers().is_empty());
}

#[test]
fn the_closest_wildcard_wins() {
    let z = Zone::parse("*.test A 192.0.2.1\n*.b.test A 192.0.2.2\nx.b.test TXT \"x\"").unwrap();
    assert_eq!(a_records(&ask(&z, "a.test", RecordType::A)), vec![Ipv4Addr::new(192, 0, 2, 1)]);
    assert_eq!(a_records(&ask(&z, "a.b.test", RecordType::A)), vec![Ipv4Addr::new(192, 0, 2, 2)]);
    assert_eq!(a_records(&ask(&z, "a.x.b.test", RecordType::A)), vec![Ipv4Addr::new(192, 0, 2, 2)]);
    assert_eq!(a_records(&ask(&z, "b.test", RecordType::A)), vec![Ipv4Addr::new(192, 0, 2, 1)]);
}

#[test]
fn cnames_are_followed_within_the_zone() {
    let z = zone();
    let m = ask(&z, "alias2.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    let types: Vec<_> = m.answers().iter().map(Record::record_type).collect();
    assert_eq!(types, [RecordType::CNAME, RecordType::CNAME, RecordType::A, RecordType::A]);
    assert_eq!(m.answers()[0].name(), &name("alias2.example.test"));
    assert_eq!(m.answers()[1].name(), &name("alias.example.test."));
    assert_eq!(a_records(&m), vec![Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)]);

    // Asking for the CNAME itself gives just it.
    let m = ask(&z, "alias.example.test", RecordType::CNAME);
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.answers()[0].record_type(), RecordType::CNAME);

    // A chain ending in a type the target lacks: the CNAMEs, NODATA.
    let m = ask(&z, "alias.example.test", RecordType::AAAA);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.name_servers().len(), 1);

    // A dangling CNAME: the CNAME, NXDOMAIN (RFC 6604).
    let m = ask(&z, "dangling.example.test", RecordType::TXT);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(m.answers().len(), 1);

    // A loop: SERVFAIL, not a hang.
    let m = ask(&z, "loop1.example.test", RecordType::A);
    assert_eq!(m.response_code(), ResponseCode::ServFail);
}

#[test]
fn any_returns_every_record_of_the_name() {
    let m = ask(&zone(), "host.example.test", RecordType::ANY);
    assert_eq!(m.answers().len(), 3);
}

#[test]
fn tcp_answers_equal_udp_answers() {
    let z = zone();
    let q = request("txt.example.test", RecordType::TXT);
    assert_eq!(ask_msg(&z, &q, Transport::Tcp), ask_msg(&z, &q, Transport::Udp));
}

#[test]
fn large_udp_answers_are_truncated() {
    let text: String = (0..40).map(|i| format!("big.test TXT \"{i:02}{}\"\n", "x".repeat(60))).collect();
    let z = Zone::parse(&text).unwrap();
    let q = request("big.test", RecordType::TXT);
    let m = ask_msg(&z, &q, Transport::Udp);
    assert!(m.truncated());
    assert!(m.answers().is_empty());
    let m = ask_msg(&z, &q, Transport::Tcp);
    assert!(!m.truncated());
    assert_eq!(m.answers().len(), 40);

    // With EDNS, UDP fits up to 1232 bytes: the client's size is capped at that.
    let mut q = request("big.test", RecordType::TXT);
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    q.set_edns(edns);
    let bytes = respond(&z, 0, &q.to_vec().unwrap(), Transport::Udp, peer()).unwrap();
    assert!(bytes.len() <= 1232);
    let m = Message::from_vec(&bytes).unwrap();
    assert!(m.truncated());
    assert_eq!(m.extensions().as_ref().map(Edns::max_payload), Some(1232));

    let text: String = (0..10).map(|i| format!("mid.test TXT \"{i:02}{}\"\n", "x".repeat(60))).collect();
    let z = Zone::parse(&text).unwrap();
    let mut q = request("mid.test", RecordType::TXT);
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    q.set_edns(edns);
    let m = ask_msg(&z, &q, Transport::Udp);
    assert!(m.extensions().is_some());
    let without_edns = ask_msg(&z, &request("mid.test", RecordType::TXT), Transport::Udp);
    assert!(without_edns.truncated(), "over 512 bytes without EDNS");
    assert!(!m.truncated(), "under the EDNS size");
    assert_eq!(m.answers().len(), 10);
}

#[test]
fn odd_queries_get_error_codes() {
    let z = zone();
    let mut q = request("host.example.test", RecordType::A);
    q.set_op_code(OpCode::Update);
    assert_eq!(ask_msg(&z, &q, Transport::Udp).response_code(), ResponseCode::NotImp);

    let mut q = Message::new();
    q.set_id(7).set_message_type(MessageType::Query);
    let m = ask_msg(&z, &q, Transport::Udp);
    assert_eq!((m.id(), m.response_code()), (7, ResponseCode::FormErr));

    let mut q = request("host.example.test", RecordType::A);
    q.add_query(Query::query(name("v6.example.test"), RecordType::AAAA));
    assert_eq!(ask_msg(&z, &q, Transport::Udp).response_code(), ResponseCode::FormErr);

    let mut q = Message::new();
    let mut query = Query::query(name("host.example.test"), RecordType::A);
    query.set_query_class(DNSClass::CH);
    q.set_message_type(MessageType::Query).add_query(query);
    assert_eq!(ask_msg(&z, &q, Transport::Udp).response_code(), ResponseCode::Refused);

    let m = ask(&z, "example.test", RecordType::AXFR);
    assert_eq!(m.response_code(), ResponseCode::Refused);
}

#[test]
fn garbage_never_panics() {
    let z = zone();
    // Too short for a header, or a response: dropped.
    assert_eq!(respond(&z, 0, b"", Transport::Udp, peer()), None);
    assert_eq!(respond(&z, 0, b"\x12\x34\x01", Transport::Udp, peer()), None);
    let mut response = request("host.example.test", RecordType::A);
    response.set_message_type(MessageType::Response);
    assert_eq!(respond(&z, 0, &response.to_vec().unwrap(), Transport::Udp, peer()), None);

    // A header that claims a question it does not carry: FORMERR with its ID.
    let bad = [0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, b'f'];
    let reply = respond(&z, 0, &bad, Transport::Udp, peer()).expect("FORMERR");
    let m = Message::from_vec(&reply).unwrap();
    assert_eq!((m.id(), m.response_code()), (0xabcd, ResponseCode::FormErr));

    // Every truncation and single-byte corruption of a real query, and
    // pseudo-random packets: an answer or nothing, never a panic.
    let good = request("_acme-challenge.deep.example.test", RecordType::TXT).to_vec().unwrap();
    for len in 0..good.len() {
        let _ = respond(&z, 0, &good[..len], Transport::Udp, peer());
    }
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut p = good.clone();
            p[i] ^= flip;
            let _ = respond(&z, 0, &p, Transport::Tcp, peer());
        }
    }
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for round in 0..2000 {
        let len = round % 300;
        let packet: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        let _ = respond(&z, 0, &packet, Transport::Udp, peer());
    }
}

// --- the file ---

#[test]
fn the_zone_file_is_reread_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zone");
    std::fs::write(&path, "a.test A 192.0.2.1\n").unwrap();
    let mut file = ZoneFile::open(&path).unwrap();
    let first = file.current();
    assert_eq!(first.len(), 1);
    assert!(Arc::ptr_eq(&first, &file.current()), "unchanged file, same zone");

    // Appended in place.
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(f, "_acme-challenge.a.test TXT \"v1\"").unwrap();
    drop(f);
    let z = file.current();
    assert_eq!(z.len(), 2);
    assert_eq!(txt_strings(&ask(&z, "_acme-challenge.a.test", RecordType::TXT)), vec![vec!["v1".to_owned()]]);
    assert_eq!(z.serial, first.serial + 1);

    // Replaced by a rename, same size.
    let tmp = dir.path().join("zone.tmp");
    std::fs::write(&tmp, "a.test A 192.0.2.1\n_acme-challenge.a.test TXT \"v2\"\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let z = file.current();
    assert_eq!(txt_strings(&ask(&z, "_acme-challenge.a.test", RecordType::TXT)), vec![vec!["v2".to_owned()]]);

    // Same size, same inode, within one tick of the kernel's coarse clock: the
    // stamps may be equal, the content tells.
    for value in ["v3", "v4", "v5", "v6"] {
        std::fs::write(&path, format!("a.test A 192.0.2.1\n_acme-challenge.a.test TXT \"{value}\"\n")).unwrap();
        let z = file.current();
        assert_eq!(txt_strings(&ask(&z, "_acme-challenge.a.test", RecordType::TXT)), vec![vec![value.to_owned()]]);
    }
    let serial = file.current().serial;
    std::fs::write(&path, "a.test A 192.0.2.1\n_acme-challenge.a.test TXT \"v6\"\n").unwrap();
    assert_eq!(file.current().serial, serial, "rewritten unchanged: not reloaded");

    // A bad edit keeps the last good zone; fixing it takes effect.
    std::fs::write(&path, "a.test A 192.0.2.1\nb.test A not-an-address\n").unwrap();
    assert_eq!(file.current().len(), 2);
    assert_eq!(txt_strings(&ask(&file.current(), "_acme-challenge.a.test", RecordType::TXT)).len(), 1);
    std::fs::write(&path, "b.test A 192.0.2.3\n").unwrap();
    let z = file.current();
    assert_eq!(ask(&z, "a.test", RecordType::A).response_code(), ResponseCode::NXDomain);
    assert_eq!(a_records(&ask(&z, "b.test", RecordType::A)), vec![Ipv4Addr::new(192, 0, 2, 3)]);

    // A removed file keeps the last zone too.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(file.current().len(), 1);

    // At startup, a missing or bad file is an error.
    assert!(ZoneFile::open(&path).is_err());
    std::fs::write(&path, "x.test BOGUS 1\n").unwrap();
    let e = ZoneFile::open(&path).err().unwrap();
    assert!(format!("{e:#}").contains("line 1"), "{e:#}");
}
