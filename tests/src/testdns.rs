//! A real DNS server for tests: [`TestDns`] runs `signet-testdns` on a free
//! loopback port, answering from a zone file the test (or an ACME client's
//! challenge hook) edits while it runs. See tests/acme/README.md.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};

/// A running signet-testdns, killed on drop.
pub struct TestDns {
    child: Child,
    // Held so the server's stdout stays open for as long as it runs.
    _stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
    zone: PathBuf,
    log: PathBuf,
}

impl TestDns {
    /// Writes `records` to the zone file `zone` and starts signet-testdns on
    /// 127.0.0.1 (a free port, UDP and TCP) with it; its log, each query
    /// included, goes to `zone`.log.
    pub fn start(zone: &Path, records: &str) -> TestDns {
        Self::start_with_ttl(zone, records, 0)
    }

    /// As [`TestDns::start`], with every answer's TTL (and the SOA minimum
    /// of negative answers) `ttl` seconds instead of 0, so resolvers may
    /// cache them.
    pub fn start_with_ttl(zone: &Path, records: &str, ttl: u32) -> TestDns {
        std::fs::write(zone, records).unwrap();
        let log = zone.with_extension("log");
        let mut child = Command::new(crate::bin("signet-testdns"))
            .args(["--listen", "127.0.0.1:0", "--ttl", &ttl.to_string(), "--zone"])
            .arg(zone)
            .env("RUST_LOG", "info,signet_testdns=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let Some(addr) = line.trim().strip_prefix("listening ").and_then(|a| a.parse().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "signet-testdns did not start (first line {line:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        TestDns { child, _stdout: stdout, addr, zone: zone.to_owned(), log }
    }

    /// The address it answers on, UDP and TCP.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The zone file (for `SIGNET_TESTDNS_ZONE`).
    pub fn zone(&self) -> &Path {
        &self.zone
    }

    /// Its log so far (every query it answered, every reload).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Replaces the zone file's content, atomically (a rename); the next query sees it.
    pub fn set(&self, records: &str) {
        let tmp = self.zone.with_extension("tmp");
        std::fs::write(&tmp, records).unwrap();
        std::fs::rename(&tmp, &self.zone).unwrap();
    }

    /// Adds lines to the zone file; the next query sees them.
    pub fn add(&self, records: &str) {
        let mut text = std::fs::read_to_string(&self.zone).unwrap();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(records);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        self.set(&text);
    }

    /// Asks it one question over UDP.
    pub fn query(&self, name: &str, rtype: RecordType) -> Message {
        query_udp(self.addr, name, rtype)
    }

    /// Asks it one question over TCP.
    pub fn query_tcp(&self, name: &str, rtype: RecordType) -> Message {
        query_tcp(self.addr, name, rtype)
    }
}

impl Drop for TestDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A recursion-desired query for `name`/`rtype`, as a stub resolver sends it.
pub fn question(name: &str, rtype: RecordType) -> Message {
    let mut qname = Name::from_ascii(name).unwrap();
    qname.set_fqdn(true);
    let mut m = Message::new();
    m.set_id(rand_id())
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(qname, rtype));
    m
}

/// One question over UDP to `server`; the answer, checked to match the question.
pub fn query_udp(server: SocketAddr, name: &str, rtype: RecordType) -> Message {
    let q = question(name, rtype);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send_to(&q.to_vec().unwrap(), server).unwrap();
    let mut buf = [0u8; 65535];
    let (len, from) = socket.recv_from(&mut buf).unwrap();
    assert_eq!(from, server);
    checked(&q, Message::from_vec(&buf[..len]).unwrap())
}

/// One question over TCP to `server` (RFC 1035 §4.2.2 framing).
pub fn query_tcp(server: SocketAddr, name: &str, rtype: RecordType) -> Message {
    use std::io::{Read, Write};
    let q = question(name, rtype);
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let bytes = q.to_vec().unwrap();
    let mut framed = u16::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    stream.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer).unwrap();
    checked(&q, Message::from_vec(&answer).unwrap())
}

fn checked(q: &Message, answer: Message) -> Message {
    assert_eq!(answer.id(), q.id());
    assert_eq!(answer.message_type(), MessageType::Response);
    assert_eq!(answer.queries(), q.queries());
    answer
}

/// A query ID: a test needs only that consecutive ones differ, not secrecy.
fn rand_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0x5100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
