//! Fuzzing entry points for the signd wire protocol.
//!
//! [`server_input`] feeds arbitrary bytes to the real capnp-rpc server and the
//! real conversion code over an in-memory pipe, as if a hostile client had sent
//! them. The service behind it is a stand-in that answers every call
//! successfully, so that fuzzed calls get past the capability checks into the
//! decoding of every request type. Used by the libFuzzer target in
//! `tests/fuzz` and by the stable mutation test below.

use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::{
    self, AdminService, CrlSignerService, IssuerService, LocalResult, LogSignerService, OcspSignerService,
    ServeOptions, Session, SigndService, SignerService,
};
use crate::types::*;

/// Serves one connection whose entire input is `data`; returns how many bytes
/// the server wrote back. Never panics unless the server code does.
pub fn server_input(data: &[u8]) -> usize {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return 0;
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let (client, server_end) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_end);
        let opts = ServeOptions {
            max_frame_bytes: 1 << 20,
            max_message_bytes: 1 << 16,
            max_batch: 64,
            ..ServeOptions::default()
        };
        let peer = PeerCredentials { uid: 1, gid: 1, pid: 1 };
        let connection = server::serve_connection(read, write, peer, &StandIn, opts, &server::InFlight::default());
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let feed = async {
            let _ = client_write.write_all(data).await;
            let _ = client_write.shutdown().await;
            let mut answer = Vec::new();
            let _ = client_read.read_to_end(&mut answer).await;
            answer.len()
        };
        let served = async {
            let _ = connection.await;
        };
        let both = async {
            let (n, ()) = futures::join!(feed, served);
            n
        };
        tokio::time::timeout(Duration::from_secs(2), both).await.unwrap_or(0)
    })
}

/// A client session, as bytes on the wire: what a real [`crate::SigndClient`]
/// sends for whoami, health, signer, sign, sign-batch, list, admin, generate,
/// import, audit, the issuer capabilities and the CT log signer. The seed
/// corpus for fuzzing.
pub fn recorded_client_session() -> Vec<u8> {
    let Ok(dir) = tempfile_dir() else { return Vec::new() };
    let server_path = dir.join("server.sock");
    let proxy_path = dir.join("proxy.sock");
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let rec = recorded.clone();
    let (sp, pp) = (server_path.clone(), proxy_path.clone());
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let (Ok(server), Ok(proxy)) = (tokio::net::UnixListener::bind(&sp), tokio::net::UnixListener::bind(&pp))
            else {
                return;
            };
            let token = tokio_util::sync::CancellationToken::new();
            tokio::task::spawn_local(server::serve(server, Rc::new(StandIn), ServeOptions::default(), token));
            let _ = ready_tx.send(());
            let Ok((inbound, _)) = proxy.accept().await else { return };
            let Ok(outbound) = tokio::net::UnixStream::connect(&sp).await else { return };
            let (mut ir, mut iw) = inbound.into_split();
            let (mut or, mut ow) = outbound.into_split();
            let up = async move {
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = ir.read(&mut buf).await {
                    if n == 0 || ow.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    rec.lock().map(|mut r| r.extend_from_slice(&buf[..n])).ok();
                }
            };
            let down = async move {
                let _ = tokio::io::copy(&mut or, &mut iw).await;
            };
            futures::join!(up, down);
        });
    });
    if ready_rx.recv_timeout(Duration::from_secs(5)).is_err() {
        return Vec::new();
    }
    if let Ok(client) = crate::SigndClient::new(&proxy_path) {
        let spec = KeySpec {
            id: "k".into(),
            algorithm: KeyAlgorithm::EcP256,
            roles: vec!["r".into()],
            backend: String::new(),
        };
        let _ = crate::block_on(client.whoami());
        let _ = crate::block_on(client.health());
        let _ = crate::block_on(client.sign("r", "k", SignatureScheme::EcdsaSha256, b"message".to_vec()));
        let _ =
            crate::block_on(client.sign_batch("r", "k", SignatureScheme::Default, vec![b"a".to_vec(), b"b".to_vec()]));
        let each = vec![b"c".to_vec(), b"d".to_vec()];
        let _ = crate::block_on(client.sign_each("r", "k", SignatureScheme::Default, each));
        let _ = crate::block_on(client.list_keys("r"));
        let _ = crate::block_on(client.public_key("r", "k"));
        let _ = crate::block_on(client.generate_key(spec.clone()));
        let _ = crate::block_on(client.import_key(spec, b"-----BEGIN PRIVATE KEY-----".to_vec()));
        let _ = crate::block_on(client.audit(AuditQuery::default()));
        let _ = crate::block_on(client.admin_key("k"));
        let _ = crate::block_on(client.sign_certificate("ca", b"\x30\x03\x02\x01\x01".to_vec()));
        let _ = crate::block_on(client.issuer_certificate("ca"));
        let _ = crate::block_on(client.sign_crl("ca", b"\x30\x00".to_vec()));
        let _ = crate::block_on(client.sign_ocsp_response("ca", b"\x30\x00".to_vec()));
        let _ = crate::block_on(client.sign_ocsp_each("ca", vec![b"\x30\x00".to_vec(), b"\x30\x01".to_vec()]));
        let _ = crate::block_on(client.ocsp_responder_certificate("ca"));
        let tree_head = [&[0u8, 1][..], &[0; 48]].concat();
        let _ = crate::block_on(client.sign_ct("log", vec![tree_head, b"\x00\x00".to_vec()]));
        let _ = crate::block_on(client.ct_log_public_key("log"));
    }
    let out = recorded.lock().map(|r| r.clone()).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("signet-fuzz-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Answers every call with a plausible success.
struct StandIn;

fn key() -> KeyInfo {
    KeyInfo {
        id: "k".into(),
        algorithm: KeyAlgorithm::EcP256,
        spki: vec![0x30, 0x00],
        created_unix_secs: 0,
        roles: vec!["r".into()],
        backend: "stand-in".into(),
        location: String::new(),
        available: true,
        problem: String::new(),
    }
}

fn ready<T: 'static>(v: Result<T, IpcError>) -> LocalResult<T> {
    futures::future::ready(v).boxed_local()
}

impl SigndService for StandIn {
    fn session(&self, _: PeerCredentials) -> Rc<dyn Session> {
        Rc::new(StandIn)
    }
}

impl Session for StandIn {
    fn whoami(&self) -> Result<CallerInfo, IpcError> {
        Ok(CallerInfo { uid: 1, gid: 1, pid: 1, roles: vec!["r".into()], admin: true })
    }
    fn signer(&self, _: String) -> LocalResult<Rc<dyn SignerService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn SignerService>))
    }
    fn admin(&self) -> LocalResult<Rc<dyn AdminService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn AdminService>))
    }
    fn health(&self) -> Health {
        Health { ok: true, version: "0".into(), keys_loaded: 1, keys_unavailable: 0, uptime_secs: 0, audit_records: 0 }
    }
    fn issuer(&self, _: String) -> LocalResult<Rc<dyn IssuerService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn IssuerService>))
    }
    fn crl_signer(&self, _: String) -> LocalResult<Rc<dyn CrlSignerService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn CrlSignerService>))
    }
    fn ocsp_signer(&self, _: String) -> LocalResult<Rc<dyn OcspSignerService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn OcspSignerService>))
    }
    fn log_signer(&self, _: String) -> LocalResult<Rc<dyn LogSignerService>> {
        ready(Ok(Rc::new(StandIn) as Rc<dyn LogSignerService>))
    }
}

impl LogSignerService for StandIn {
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>> {
        ready(Ok(inputs.into_iter().map(|i| i.into_iter().rev().collect()).collect()))
    }
    fn public_key(&self) -> LocalResult<Vec<u8>> {
        ready(Ok(vec![0x30, 0x00]))
    }
}

impl IssuerService for StandIn {
    fn sign_tbs_certificate(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>> {
        ready(Ok(tbs))
    }
    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        ready(Ok(vec![0x30, 0x00]))
    }
    fn profile(&self) -> LocalResult<String> {
        ready(Ok("name = \"stand-in\"".into()))
    }
}

impl CrlSignerService for StandIn {
    fn sign_tbs_cert_list(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>> {
        ready(Ok(tbs))
    }
    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        ready(Err(IpcError::denied("stand-in")))
    }
    fn profile(&self) -> LocalResult<String> {
        ready(Err(IpcError::denied("stand-in")))
    }
}

impl OcspSignerService for StandIn {
    fn sign_response_data(&self, data: Vec<u8>) -> LocalResult<Vec<u8>> {
        ready(Ok(data))
    }
    fn responder_certificate(&self) -> LocalResult<Vec<u8>> {
        ready(Ok(vec![0x30, 0x00]))
    }
    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        ready(Ok(vec![0x30, 0x00]))
    }
}

impl SignerService for StandIn {
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>> {
        ready(Ok(vec![key()]))
    }
    fn public_key(&self, _: String) -> LocalResult<KeyInfo> {
        ready(Ok(key()))
    }
    fn sign(&self, _: String, _: SignatureScheme, message: Vec<u8>) -> LocalResult<Vec<u8>> {
        ready(Ok(message.into_iter().rev().collect()))
    }
    fn sign_batch(&self, _: String, _: SignatureScheme, messages: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>> {
        ready(Ok(messages))
    }
}

impl AdminService for StandIn {
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>> {
        ready(Ok(vec![key()]))
    }
    fn key(&self, _: String) -> LocalResult<KeyInfo> {
        ready(Ok(key()))
    }
    fn generate_key(&self, _: KeySpec) -> LocalResult<KeyInfo> {
        ready(Ok(key()))
    }
    fn import_key(&self, _: KeySpec, _: Vec<u8>) -> LocalResult<KeyInfo> {
        ready(Err(IpcError::invalid("stand-in")))
    }
    fn audit(&self, _: AuditQuery) -> LocalResult<Vec<AuditRecord>> {
        ready(Ok(vec![]))
    }
    fn issue_ocsp_responder(&self, _: String, _: String, _: u32) -> LocalResult<Vec<u8>> {
        ready(Err(IpcError::invalid("stand-in")))
    }
    fn issue_issuing_ca(&self, _: IssuingCaSpec) -> LocalResult<Vec<u8>> {
        ready(Err(IpcError::invalid("stand-in")))
    }
    fn add_ct_log(&self, _: String, _: String, _: Vec<String>) -> LocalResult<Vec<u8>> {
        ready(Err(IpcError::invalid("stand-in")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic PRNG (xorshift64*), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Refreshes the committed fuzz seed after a protocol change:
    /// `SIGNET_FUZZ_SEED_OUT=tests/fuzz/corpus/signd_wire/session cargo test --release -p signet-ipc -- --ignored write_seed`
    #[test]
    #[ignore = "writes the fuzz seed corpus on request"]
    fn write_seed() {
        let out = std::env::var("SIGNET_FUZZ_SEED_OUT").expect("set SIGNET_FUZZ_SEED_OUT");
        std::fs::write(out, recorded_client_session()).unwrap();
    }

    #[test]
    fn sign_each_answers_every_call_on_its_own() {
        let opts = ServeOptions { max_message_bytes: 16, max_batch: 4, ..ServeOptions::default() };
        let (_dir, path) = server::serve_on_thread("standin.sock", move |listener| {
            server::serve(listener, Rc::new(StandIn), opts, tokio_util::sync::CancellationToken::new())
        });
        let client = crate::SigndClient::new(&path).unwrap();
        let messages = vec![b"abc".to_vec(), vec![7; 17], b"xyz".to_vec()];
        let each = crate::block_on(client.sign_each("r", "k", SignatureScheme::Default, messages)).unwrap();
        assert_eq!(each.len(), 3);
        // The stand-in "signs" by reversing; the oversized message fails alone.
        assert_eq!(each[0].as_deref(), Ok(&b"cba"[..]));
        assert_eq!(each[1].as_ref().unwrap_err().kind, ErrorKind::TooLarge);
        assert_eq!(each[2].as_deref(), Ok(&b"zyx"[..]));
        // More calls than the batch limit: the message as a whole is refused.
        let over = crate::block_on(client.sign_each("r", "k", SignatureScheme::Default, vec![b"m".to_vec(); 5]));
        assert_eq!(over.unwrap_err().kind, ErrorKind::TooLarge);
        // Many `sign` calls in flight at once from one client (carried in
        // `signEach` messages of at most the batch limit, or one by one).
        let calls = (0..64u8).map(|i| client.sign("r", "k", SignatureScheme::Default, vec![i, 1, 2]));
        let answers = crate::block_on(futures::future::join_all(calls));
        for (i, answer) in answers.into_iter().enumerate() {
            assert_eq!(answer.unwrap(), vec![2, 1, i as u8]);
        }
    }

    #[test]
    fn ocsp_sign_each_checks_each_size_and_the_batch_limit() {
        let opts = ServeOptions { max_message_bytes: 16, max_batch: 4, ..ServeOptions::default() };
        let (_dir, path) = server::serve_on_thread("standin-ocsp.sock", move |listener| {
            server::serve(listener, Rc::new(StandIn), opts, tokio_util::sync::CancellationToken::new())
        });
        let client = crate::SigndClient::new(&path).unwrap();
        let data = vec![b"abc".to_vec(), vec![7; 17], b"xyz".to_vec()];
        let each = crate::block_on(client.sign_ocsp_each("ca", data)).unwrap();
        // The stand-in answers each ResponseData as it came; the oversized one fails alone.
        assert_eq!(each.len(), 3);
        assert_eq!(each[0].as_deref(), Ok(&b"abc"[..]));
        assert_eq!(each[1].as_ref().unwrap_err().kind, ErrorKind::TooLarge);
        assert_eq!(each[2].as_deref(), Ok(&b"xyz"[..]));
        // More calls than the batch limit: the message as a whole is refused.
        let over = crate::block_on(client.sign_ocsp_each("ca", vec![b"d".to_vec(); 5]));
        assert_eq!(over.unwrap_err().kind, ErrorKind::TooLarge);
        // Many calls in flight at once from one client, each answered as its own.
        let calls = (0..64u8).map(|i| client.sign_ocsp_response("ca", vec![i, 1, 2]));
        for (i, answer) in crate::block_on(futures::future::join_all(calls)).into_iter().enumerate() {
            assert_eq!(answer.unwrap(), vec![i as u8, 1, 2]);
        }
    }

    #[test]
    fn ct_log_signer_round_trips_and_enforces_the_limits() {
        let opts = ServeOptions { max_message_bytes: 64, max_batch: 3, ..ServeOptions::default() };
        let (_dir, path) = server::serve_on_thread("standin-ct.sock", move |listener| {
            server::serve(listener, Rc::new(StandIn), opts, tokio_util::sync::CancellationToken::new())
        });
        let client = crate::SigndClient::new(&path).unwrap();
        // The stand-in "signs" by reversing; signatures come back in order.
        let signed = crate::block_on(client.sign_ct("log", vec![b"ab".to_vec(), b"cd".to_vec()])).unwrap();
        assert_eq!(signed, [b"ba".to_vec(), b"dc".to_vec()]);
        assert_eq!(crate::block_on(client.ct_log_public_key("log")).unwrap(), [0x30, 0x00]);
        // More inputs than the batch limit, or one over the message limit: refused whole.
        let over = crate::block_on(client.sign_ct("log", vec![b"m".to_vec(); 4]));
        assert_eq!(over.unwrap_err().kind, ErrorKind::TooLarge);
        let big = crate::block_on(client.sign_ct("log", vec![b"m".to_vec(), vec![0; 65]]));
        assert_eq!(big.unwrap_err().kind, ErrorKind::TooLarge);
    }

    #[test]
    fn the_recorded_session_is_served() {
        let seed = recorded_client_session();
        assert!(seed.len() > 200, "recorded only {} bytes", seed.len());
        // Replayed verbatim, the server answers it.
        assert!(server_input(&seed) > 100);
    }

    #[test]
    fn mutated_sessions_never_panic_the_server() {
        let seed = recorded_client_session();
        assert!(!seed.is_empty());
        let mut rng = Rng(0x5EED_1234_ABCD_0001);
        let mut answered = 0;
        for round in 0..1500 {
            let mut input = seed.clone();
            for _ in 0..1 + rng.below(8) {
                match rng.below(5) {
                    0 => {
                        let i = rng.below(input.len());
                        input[i] ^= 1 << rng.below(8);
                    }
                    1 => {
                        let i = rng.below(input.len());
                        input[i] = [0x00, 0xff, 0x7f, 0x80, 0x01][rng.below(5)];
                    }
                    2 => input.truncate(rng.below(input.len())),
                    3 => {
                        let i = rng.below(input.len());
                        let bytes: Vec<u8> = (0..rng.below(16)).map(|_| rng.next() as u8).collect();
                        input.splice(i..i, bytes);
                    }
                    _ => {
                        let (a, b) = (rng.below(input.len()), rng.below(input.len()));
                        let chunk = input[a.min(b)..a.max(b)].to_vec();
                        input.extend_from_slice(&chunk);
                    }
                }
                if input.is_empty() {
                    input.push(rng.next() as u8);
                }
            }
            // Any panic in the server fails the test here; the round number
            // and the fixed seed reproduce it.
            let _ = round;
            if server_input(&input) > 0 {
                answered += 1;
            }
        }
        // Most mutations must get past the framing into the RPC layer, or this
        // test would only be exercising the frame reader.
        assert!(answered > 300, "only {answered} of 1500 mutated sessions got an answer");
        for len in [0, 1, 7, 8, 64, 4096] {
            let random: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            server_input(&random);
        }
    }
}
