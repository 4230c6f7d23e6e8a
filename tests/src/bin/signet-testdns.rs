//! signet-testdns: a small authoritative DNS server for tests.
//!
//! It answers A, AAAA, TXT, CAA and CNAME queries over UDP and TCP on one
//! address, from a zone file that tests and challenge hooks edit while it runs
//! (re-read whenever it changes). The wire format is hickory-proto's; nothing
//! here parses DNS packets by hand.
//!
//! ```text
//! signet-testdns --listen 127.0.0.1:0 --zone zone.txt [--ttl SECONDS]
//! ```
//!
//! The first line on stdout is `listening ADDR` (the bound address, useful with
//! port 0); logs go to stderr (`RUST_LOG` filters them, default `info`; each
//! query is logged at `debug`).
//!
//! Zone file: one record per line, `NAME TYPE VALUE`, TYPE one of A, AAAA,
//! TXT, CAA, CNAME; `#` starts a comment (outside quotes, at the start of a
//! line or after a space). Names are case-insensitive, the trailing dot
//! optional; `*.example.test` matches any deeper name that has no records of
//! its own (the closest wildcard wins). See tests/acme/README.md.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Parser;
use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SOA, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable as _, BinDecoder, Restrict};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Command line.
#[derive(Parser, Debug)]
#[command(name = "signet-testdns", about = "A small authoritative DNS server answering from a zone file (for tests)")]
struct Args {
    /// Address for both UDP and TCP, e.g. 127.0.0.1:5353; port 0 picks a free
    /// port (printed as the first line on stdout: `listening ADDR`).
    #[arg(long)]
    listen: SocketAddr,
    /// Zone file, `NAME TYPE VALUE` per line; re-read whenever it changes.
    #[arg(long)]
    zone: PathBuf,
    /// TTL of every record answered, and the SOA minimum of negative answers
    /// (0: resolvers cache nothing, so a test's edits show at once).
    #[arg(long, default_value_t = 0)]
    ttl: u32,
}

/// EDNS payload size this server offers (the DNS flag day 2020 value).
const EDNS_PAYLOAD: u16 = 1232;
/// How many CNAMEs one answer follows before giving up (SERVFAIL).
const MAX_CNAME_CHAIN: usize = 16;
/// A TCP connection idle this long is closed.
const TCP_IDLE: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let zone = ZoneFile::open(&args.zone)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(args, zone))
}

/// Binds UDP and TCP on one address, announces it on stdout, and answers until killed.
async fn serve(args: Args, zone: ZoneFile) -> anyhow::Result<()> {
    let (udp, tcp) = bind(args.listen).await?;
    let addr = udp.local_addr()?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening {addr}")?;
    stdout.flush()?;
    tracing::info!(%addr, zone = %args.zone.display(), records = zone.zone.len(), "serving");

    let server = Arc::new(Server { zone: Mutex::new(zone), ttl: args.ttl });
    let udp_task = tokio::spawn(serve_udp(udp, Arc::clone(&server)));
    let tcp_task = tokio::spawn(serve_tcp(tcp, server));
    tokio::select! {
        r = udp_task => r?,
        r = tcp_task => r?,
        r = tokio::signal::ctrl_c() => { r?; Ok(()) }
    }
}

/// UDP and TCP on the same address; with port 0, a port free for both.
async fn bind(listen: SocketAddr) -> anyhow::Result<(UdpSocket, TcpListener)> {
    let tries = if listen.port() == 0 { 20 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let udp = UdpSocket::bind(listen).await.with_context(|| format!("binding UDP {listen}"))?;
        let addr = udp.local_addr()?;
        match TcpListener::bind(addr).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e).with_context(|| format!("binding TCP {listen}")),
        None => bail!("binding {listen}: no attempt made"),
    }
}

/// What every connection shares: the zone file (reloaded on change) and the TTL.
struct Server {
    zone: Mutex<ZoneFile>,
    ttl: u32,
}

impl Server {
    /// The answer to one packet, or `None` to drop it.
    fn handle(&self, packet: &[u8], peer: SocketAddr, transport: Transport) -> Option<Vec<u8>> {
        let zone = match self.zone.lock() {
            Ok(mut file) => file.current(),
            // A panic while holding the lock cannot leave the zone half-updated
            // (it is replaced whole), so the poisoned value is still good.
            Err(poisoned) => poisoned.into_inner().current(),
        };
        respond(&zone, self.ttl, packet, transport, peer)
    }
}

async fn serve_udp(socket: UdpSocket, server: Arc<Server>) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 65535];
    loop {
        let (len, peer) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "UDP receive");
                continue;
            }
        };
        let Some(reply) = buf.get(..len).and_then(|p| server.handle(p, peer, Transport::Udp)) else {
            continue;
        };
        if let Err(e) = socket.send_to(&reply, peer).await {
            tracing::warn!(%peer, error = %e, "UDP send");
        }
    }
}

async fn serve_tcp(listener: TcpListener, server: Arc<Server>) -> anyhow::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "TCP accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            if let Err(e) = serve_tcp_connection(stream, peer, &server).await {
                tracing::debug!(%peer, error = %e, "TCP connection ended");
            }
        });
    }
}

/// Length-prefixed messages (RFC 1035 §4.2.2), any number per connection.
async fn serve_tcp_connection(mut stream: TcpStream, peer: SocketAddr, server: &Server) -> std::io::Result<()> {
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Ok(Ok(len)) => usize::from(len),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        let mut packet = vec![0u8; len];
        tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut packet)).await??;
        let Some(reply) = server.handle(&packet, peer, Transport::Tcp) else {
            return Ok(());
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            tracing::warn!(%peer, len = reply.len(), "answer longer than a TCP message can be; closing");
            return Ok(());
        };
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&reply_len.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

// ---------------------------------------------------------------------------
// Answering: pure functions of the zone and the packet.
// ---------------------------------------------------------------------------

/// How a packet arrived: UDP answers are truncated to the client's payload size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Udp,
    Tcp,
}

/// The encoded answer to `packet`, or `None` when it is to be dropped (a
/// response, or too short to carry a message ID). Never panics on garbage: a
/// packet that does not decode gets FORMERR.
fn respond(zone: &Zone, ttl: u32, packet: &[u8], transport: Transport, peer: SocketAddr) -> Option<Vec<u8>> {
    let request = match Message::from_vec(packet) {
        Ok(request) => request,
        Err(e) => {
            let header = packet.get(..12).and_then(|h| Header::read(&mut BinDecoder::new(h)).ok());
            let Some(header) = header.filter(|h| h.message_type() == MessageType::Query) else {
                tracing::warn!(%peer, len = packet.len(), error = %e, "dropped a packet that is no DNS query");
                return None;
            };
            tracing::warn!(%peer, len = packet.len(), error = %e, "FORMERR for a query that does not decode");
            let reply = Message::error_msg(header.id(), header.op_code(), ResponseCode::FormErr);
            return reply.to_vec().ok();
        }
    };
    if request.message_type() != MessageType::Query {
        tracing::warn!(%peer, "dropped a DNS response sent to the server");
        return None;
    }
    let reply = answer(zone, ttl, &request);
    // Per query: debug (RUST_LOG=debug), or the log costs more than the answer.
    if let Some(q) = request.queries().first() {
        tracing::debug!(
            %peer, name = %q.name(), qtype = %q.query_type(), rcode = ?reply.response_code(),
            answers = reply.answers().len(), ?transport, "query"
        );
    }
    let limit = match transport {
        Transport::Udp => usize::from(request.max_payload().clamp(512, EDNS_PAYLOAD)),
        Transport::Tcp => usize::from(u16::MAX),
    };
    encode(&reply, limit)
}

/// Encodes `reply`; one longer than `limit` goes out truncated (TC set, question only).
fn encode(reply: &Message, limit: usize) -> Option<Vec<u8>> {
    let bytes = match reply.to_vec() {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(error = %e, "answer does not encode; SERVFAIL");
            let mut fail = reply.truncate();
            fail.set_truncated(false).set_response_code(ResponseCode::ServFail);
            return fail.to_vec().ok();
        }
    };
    if bytes.len() <= limit {
        return Some(bytes);
    }
    reply.truncate().to_vec().ok()
}

/// The answer to a decoded query. Authoritative for every name: a name the
/// zone does not have is NXDOMAIN, a type it does not have is NODATA; both
/// carry a SOA (minimum `ttl`) so resolvers cache them no longer than that.
fn answer(zone: &Zone, ttl: u32, request: &Message) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(request.id())
        .set_message_type(MessageType::Response)
        .set_op_code(request.op_code())
        .set_recursion_desired(request.recursion_desired())
        .set_checking_disabled(request.checking_disabled())
        .add_queries(request.queries().iter().cloned());
    if request.extensions().is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        reply.set_edns(edns);
    }
    if request.op_code() != OpCode::Query {
        reply.set_response_code(ResponseCode::NotImp);
        return reply;
    }
    let [query] = request.queries() else {
        reply.set_response_code(ResponseCode::FormErr);
        return reply;
    };
    if !matches!(query.query_class(), DNSClass::IN | DNSClass::ANY) {
        reply.set_response_code(ResponseCode::Refused);
        return reply;
    }
    if matches!(query.query_type(), RecordType::AXFR | RecordType::IXFR) {
        reply.set_response_code(ResponseCode::Refused);
        return reply;
    }
    reply.set_authoritative(true);
    let resolution = resolve(zone, ttl, query);
    reply.set_response_code(resolution.code);
    reply.add_answers(resolution.answers);
    if let Some(name) = resolution.negative {
        reply.add_name_server(negative_soa(&name, ttl, zone.serial));
    }
    reply
}

/// What a query resolves to.
struct Resolution {
    /// The answer section: the records, after any CNAMEs that led to them.
    answers: Vec<Record>,
    code: ResponseCode,
    /// For NXDOMAIN and NODATA (RFC 2308), the name found wanting.
    negative: Option<Name>,
}

/// Looks `query` up, following CNAMEs within the zone (RFC 1034 §4.3.2).
fn resolve(zone: &Zone, ttl: u32, query: &Query) -> Resolution {
    let qtype = query.query_type();
    let mut name = query.name().clone();
    let mut answers = Vec::new();
    for _ in 0..=MAX_CNAME_CHAIN {
        let rdatas = match zone.lookup(&name_key(&name)) {
            Lookup::NxDomain => return Resolution { answers, code: ResponseCode::NXDomain, negative: Some(name) },
            Lookup::Empty => return Resolution { answers, code: ResponseCode::NoError, negative: Some(name) },
            Lookup::Records(rdatas) => rdatas,
        };
        let matching: Vec<&RData> =
            rdatas.iter().filter(|r| qtype == RecordType::ANY || r.record_type() == qtype).collect();
        if !matching.is_empty() {
            answers.extend(matching.into_iter().map(|r| Record::from_rdata(name.clone(), ttl, r.clone())));
            return Resolution { answers, code: ResponseCode::NoError, negative: None };
        }
        let Some(RData::CNAME(target)) = rdatas.iter().find(|r| r.record_type() == RecordType::CNAME) else {
            return Resolution { answers, code: ResponseCode::NoError, negative: Some(name) };
        };
        answers.push(Record::from_rdata(name.clone(), ttl, RData::CNAME(target.clone())));
        name = target.0.clone();
    }
    tracing::warn!(name = %query.name(), "CNAME chain longer than {MAX_CNAME_CHAIN}; SERVFAIL");
    Resolution { answers: Vec::new(), code: ResponseCode::ServFail, negative: None }
}

/// The SOA of a negative answer for `name`: owned by its top-level label (this
/// server plays every zone), minimum and TTL `ttl`.
fn negative_soa(name: &Name, ttl: u32, serial: u32) -> Record {
    let apex = if name.num_labels() == 0 { Name::root() } else { name.trim_to(1) };
    // Both names are fixed literals that parse; root is a safe fallback.
    let mname = Name::from_ascii("ns.signet-testdns.").unwrap_or_else(|_| Name::root());
    let rname = Name::from_ascii("hostmaster.signet-testdns.").unwrap_or_else(|_| Name::root());
    let soa = SOA::new(mname, rname, serial, 3600, 600, 86400, ttl);
    Record::from_rdata(apex, ttl, RData::SOA(soa))
}

/// The zone's key for a name: lowercase ASCII without the trailing dot (root: "").
fn name_key(name: &Name) -> String {
    let ascii = name.to_lowercase().to_ascii();
    ascii.strip_suffix('.').unwrap_or(&ascii).to_owned()
}

// ---------------------------------------------------------------------------
// The zone and its file.
// ---------------------------------------------------------------------------

/// Parsed records, by owner name key.
#[derive(Debug, Default)]
struct Zone {
    records: BTreeMap<String, Vec<RData>>,
    /// Names that exist only as ancestors of owners (empty non-terminals).
    ancestors: BTreeSet<String>,
    /// SOA serial of negative answers: counts reloads.
    serial: u32,
}

/// What the zone has at a name.
#[derive(Debug, PartialEq)]
enum Lookup<'z> {
    /// The name's own records, or its closest wildcard's.
    Records(&'z [RData]),
    /// The name exists (it has descendants) but owns no records.
    Empty,
    /// No such name.
    NxDomain,
}

impl Zone {
    /// Parses a zone file's text.
    fn parse(text: &str) -> Result<Zone, ZoneError> {
        let mut zone = Zone::default();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let err = |message: String| ZoneError { line, message };
            let content = strip_comment(raw).trim();
            if content.is_empty() {
                continue;
            }
            let (owner, rest) = split_token(content);
            let (rtype, value) = split_token(rest);
            if rtype.is_empty() || value.is_empty() {
                return Err(err(format!("expected `NAME TYPE VALUE`, got `{content}`")));
            }
            let key = owner_key(owner).map_err(err)?;
            let rdata = parse_rdata(rtype, value).map_err(err)?;
            let existing = zone.records.entry(key.clone()).or_default();
            let is_cname = rdata.record_type() == RecordType::CNAME;
            if existing.iter().any(|r| is_cname || r.record_type() == RecordType::CNAME) {
                return Err(err(format!("{key} has a CNAME and other records (RFC 1034 §3.6.2 allows only one)")));
            }
            if !existing.contains(&rdata) {
                existing.push(rdata);
            }
        }
        for key in zone.records.keys() {
            let mut rest = key.as_str();
            while !rest.is_empty() {
                rest = rest.split_once('.').map_or("", |(_, parent)| parent);
                zone.ancestors.insert(rest.to_owned());
            }
        }
        Ok(zone)
    }

    /// Number of records.
    fn len(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }

    /// The records at `key`: its own; else the closest wildcard's
    /// (`*.b.c` for `a.b.c`, then `*.c`, then `*`); else whether it exists.
    fn lookup(&self, key: &str) -> Lookup<'_> {
        if let Some(records) = self.records.get(key) {
            return Lookup::Records(records);
        }
        let mut rest = key;
        while !rest.is_empty() {
            rest = rest.split_once('.').map_or("", |(_, parent)| parent);
            let wildcard = if rest.is_empty() { "*".to_owned() } else { format!("*.{rest}") };
            if let Some(records) = self.records.get(&wildcard) {
                return Lookup::Records(records);
            }
        }
        if self.ancestors.contains(key) {
            Lookup::Empty
        } else {
            Lookup::NxDomain
        }
    }
}

/// A zone file line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ZoneError {
    line: usize,
    message: String,
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ZoneError {}

/// The line without its comment: `#` outside quotes, at the start or after whitespace.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    let mut previous_space = true;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == '#' && !quoted && previous_space {
            return &line[..i];
        }
        previous_space = c.is_whitespace();
    }
    line
}

/// The first whitespace-separated token and the trimmed rest.
fn split_token(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, ""),
    }
}

/// The key of an owner name as written in the zone file.
fn owner_key(owner: &str) -> Result<String, String> {
    let name = Name::from_ascii(owner).map_err(|e| format!("bad name `{owner}`: {e}"))?;
    Ok(name_key(&name))
}

/// A fully-qualified name from the zone file (a CNAME target).
fn target_name(s: &str) -> Result<Name, String> {
    let mut name = Name::from_ascii(s).map_err(|e| format!("bad name `{s}`: {e}"))?;
    name.set_fqdn(true);
    Ok(name)
}

/// One record's data from its TYPE and VALUE columns.
fn parse_rdata(rtype: &str, value: &str) -> Result<RData, String> {
    match rtype.to_ascii_uppercase().as_str() {
        "A" => value.parse::<Ipv4Addr>().map(|ip| RData::A(A(ip))).map_err(|_| format!("bad IPv4 address `{value}`")),
        "AAAA" => {
            value.parse::<Ipv6Addr>().map(|ip| RData::AAAA(AAAA(ip))).map_err(|_| format!("bad IPv6 address `{value}`"))
        }
        "CNAME" => Ok(RData::CNAME(CNAME(target_name(value)?))),
        "TXT" => {
            let strings = character_strings(value)?;
            Ok(RData::TXT(TXT::from_bytes(strings.iter().map(Vec::as_slice).collect())))
        }
        "CAA" => parse_caa(value),
        other => Err(format!("unsupported type `{other}` (A, AAAA, TXT, CAA, CNAME)")),
    }
}

/// A TXT value: one or more quoted strings (`"a" "b"`, with `\"` and `\\`), or
/// unquoted text taken whole. Strings over 255 bytes are split, as the wire needs.
fn character_strings(value: &str) -> Result<Vec<Vec<u8>>, String> {
    let strings = if value.starts_with('"') {
        let mut strings = Vec::new();
        let mut rest = value;
        while !rest.is_empty() {
            let (string, after) = quoted(rest)?;
            strings.push(string);
            rest = after.trim_start();
        }
        strings
    } else {
        vec![value.as_bytes().to_vec()]
    };
    Ok(strings
        .into_iter()
        .flat_map(|s| if s.is_empty() { vec![Vec::new()] } else { s.chunks(255).map(<[u8]>::to_vec).collect() })
        .collect())
}

/// A quoted string at the start of `s`: its unescaped bytes and what follows.
fn quoted(s: &str) -> Result<(Vec<u8>, &str), String> {
    let Some(body) = s.strip_prefix('"') else {
        return Err(format!("expected a quoted string at `{s}`"));
    };
    let mut out = Vec::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &body[i + 1..])),
            '\\' => match chars.next() {
                Some((_, escaped)) => out.extend_from_slice(escaped.encode_utf8(&mut [0; 4]).as_bytes()),
                None => break,
            },
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    Err(format!("unterminated quoted string `{s}`"))
}

/// A CAA value, `FLAGS TAG VALUE` (`0 issue "signet.test; accounturi=..."`).
/// The value's bytes go on the wire exactly as written, however malformed:
/// tests of a CA's CAA checks need records a parser would refuse.
fn parse_caa(value: &str) -> Result<RData, String> {
    let (flags, rest) = split_token(value);
    let (tag, rest) = split_token(rest);
    let flags: u8 = flags.parse().map_err(|_| format!("bad CAA flags `{flags}` (0-255)"))?;
    if tag.is_empty() {
        return Err("CAA needs `FLAGS TAG VALUE`".to_owned());
    }
    let value = if rest.starts_with('"') {
        let (bytes, after) = quoted(rest)?;
        if !after.trim().is_empty() {
            return Err(format!("text after the CAA value: `{after}`"));
        }
        bytes
    } else {
        rest.as_bytes().to_vec()
    };
    let tag_len = u8::try_from(tag.len()).map_err(|_| format!("CAA tag too long: `{tag}`"))?;
    let mut wire = vec![flags, tag_len];
    wire.extend_from_slice(tag.as_bytes());
    wire.extend_from_slice(&value);
    let len = u16::try_from(wire.len()).map_err(|_| "CAA value too long".to_owned())?;
    // Decoded as hickory decodes a CAA off the wire, which keeps the raw value.
    match RData::read(&mut BinDecoder::new(&wire), RecordType::CAA, Restrict::new(len)) {
        Ok(rdata @ RData::CAA(_)) => Ok(rdata),
        Ok(other) => Err(format!("CAA decoded as {}", other.record_type())),
        Err(e) => Err(format!("bad CAA `{flags} {tag} ...`: {e}")),
    }
}

/// The zone file and the zone parsed from it, re-read when the file changes.
struct ZoneFile {
    path: PathBuf,
    /// The file's stamp when `text` was read.
    stamp: Option<Stamp>,
    /// The text last read (good or bad), to tell a real change from a touch.
    text: String,
    zone: Arc<Zone>,
}

/// What tells a changed file: size, mtime, ctime and inode (a rename replaces it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    inode: (u64, u64),
}

/// How old a file's last change must be before an unchanged stamp is trusted
/// alone. Kernels before 6.13 stamp times from a coarse clock (a few ms), inodes
/// are reused, so two quick same-size edits (a hook's cleanup of one
/// token and present of another) can leave identical stamps: until the file
/// has been quiet this long, its content is compared too.
const SETTLED: Duration = Duration::from_secs(2);

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp {
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            inode: (m.dev(), m.ino()),
        })
    }

    /// Whether the file has not changed for [`SETTLED`].
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let changed = self.mtime.0.max(self.ctime.0).saturating_add(1); // rounded up
        now.saturating_sub(changed) >= i64::try_from(SETTLED.as_secs()).unwrap_or(i64::MAX)
    }
}

impl ZoneFile {
    /// Reads and parses the file; at startup, a missing or bad file is an error.
    fn open(path: &Path) -> anyhow::Result<ZoneFile> {
        let stamp = Stamp::of(path).with_context(|| format!("zone file {}", path.display()))?;
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let zone = Zone::parse(&text).with_context(|| format!("zone file {}", path.display()))?;
        Ok(ZoneFile { path: path.to_owned(), stamp: Some(stamp), text, zone: Arc::new(zone) })
    }

    /// The zone as the file now says. A file that is missing or does not parse
    /// (an edit half-written) leaves the last good zone in place, logged.
    fn current(&mut self) -> Arc<Zone> {
        // Stamp before reading: a write after the stamp shows in the next one.
        let stamp = match Stamp::of(&self.path) {
            Ok(stamp) => stamp,
            Err(e) => {
                if self.stamp.take().is_some() {
                    tracing::warn!(path = %self.path.display(), error = %e, "zone file unreadable; keeping the last zone");
                }
                return Arc::clone(&self.zone);
            }
        };
        if self.stamp == Some(stamp) && stamp.settled() {
            return Arc::clone(&self.zone);
        }
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "zone file unreadable; keeping the last zone");
                self.stamp = None;
                return Arc::clone(&self.zone);
            }
        };
        let unchanged = self.stamp.is_some() && text == self.text;
        self.stamp = Some(stamp);
        if unchanged {
            return Arc::clone(&self.zone);
        }
        match Zone::parse(&text) {
            Ok(mut zone) => {
                zone.serial = self.zone.serial.wrapping_add(1);
                tracing::info!(path = %self.path.display(), records = zone.len(), serial = zone.serial, "zone reloaded");
                self.zone = Arc::new(zone);
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "zone file does not parse; keeping the last zone");
            }
        }
        self.text = text;
        Arc::clone(&self.zone)
    }
}

// ---------------------------------------------------------------------------

// Beside this file in a directory, not in src/bin/, where cargo would take it for a binary.
#[cfg(test)]
#[path = "signet-testdns/tests.rs"]
mod tests;
