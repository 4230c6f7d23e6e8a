//! ctlogd as a process, over a real signd (the log key under signd's CT log
//! role), real LMDB and tiles on disk:
//!
//! - `kill -9` under write load loses nothing acknowledged: every entry whose
//!   SCT was returned is, after a restart, in the tree at the index its SCT's
//!   `leaf_index` names, with the same timestamp; its SCT verifies; the same
//!   chain submitted again gets the same SCT; the tree head, the checkpoint
//!   and a consistency proof from the last tree head seen before the crash
//!   all verify.
//! - SIGTERM under load: ctlogd stops, and what it acknowledged is kept.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use signet_ct::merkle::verify_consistency;
use signet_ct::rfc6962::api::{
    add_chain_body, hashes_from_base64, AddChainResponse, GetEntriesResponse, GetSthConsistencyResponse, GetSthResponse,
};
use signet_ct::staticct::parse_leaf_index;
use signet_ct::{LogKey, Sct, SignedEntry, TimestampedEntry, TreeHead};
use signet_ipc::{block_on, KeyAlgorithm};
use signet_tests::ctlog::TestRoot as Pki;
use signet_tests::{bin, SigndProcess};

/// signd holding the log key, and a ctlogd over it.
struct Stack {
    signd: SigndProcess,
    dir: PathBuf,
    config: PathBuf,
    addr: SocketAddr,
    child: Option<Child>,
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

impl Stack {
    fn start(pki: &Pki) -> Self {
        let uid = nix::unistd::getuid().as_raw();
        let mut signd = SigndProcess::start(&format!("[roles.ctlog]\nusers = [{uid}]\nkeys = [\"ct-*\"]\n"));
        block_on(signd.client().generate_key(signd.spec("ct-key", KeyAlgorithm::EcP256))).unwrap();
        let base = std::fs::read_to_string(&signd.config).unwrap();
        std::fs::write(&signd.config, format!("{base}\n[logs.test]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\n")).unwrap();
        signd.restart();
        let dir = signd.dir.path().join("ctlogd");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("root.pem"), pki.root.to_pem().unwrap()).unwrap();
        let addr = free_addr();
        let config = dir.join("ctlogd.toml");
        std::fs::write(
            &config,
            format!(
                "state_dir = {:?}\nsignd_socket = {:?}\nlisten = \"{addr}\"\nroots = [{:?}]\n\
                 [sequencing]\nmax_age_ms = 50\nmax_batch = 64\n\
                 [logs.test]\nstorage = {{ dir = {:?} }}\n",
                dir.join("db"),
                signd.socket,
                dir.join("root.pem"),
                dir.join("tiles"),
            ),
        )
        .unwrap();
        let mut s = Self { signd, dir, config, addr, child: None };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("ctlogd.log")).unwrap();
        let child = Command::new(bin("ctlogd"))
            .arg("--config")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("ctlogd exited ({status}):\n{}", self.log());
            }
            if http(get(self.addr, "/test/ct/v1/get-sth")).is_ok_and(|(s, _)| s == StatusCode::OK) {
                return;
            }
            assert!(Instant::now() < deadline, "ctlogd did not come up:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ctlogd.log")).unwrap_or_default()
    }

    fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "ctlogd ignored SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn key(&self) -> LogKey {
        LogKey::from_spki_der(&block_on(self.signd.client().ct_log_public_key("test")).unwrap()).unwrap()
    }

    fn sth(&self) -> (TreeHead, GetSthResponse) {
        let (status, body) = http(get(self.addr, "/test/ct/v1/get-sth")).unwrap();
        assert_eq!(status, StatusCode::OK);
        let sth: GetSthResponse = serde_json::from_slice(&body).unwrap();
        let (head, sig) = sth.tree_head().unwrap();
        self.key().verify_tree_head(&head, &sig).unwrap();
        (head, sth)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs an HTTP exchange on a runtime of its own (the harness is synchronous).
fn http<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

async fn request(addr: SocketAddr, method: Method, path: &str, body: Bytes) -> std::io::Result<(StatusCode, Bytes)> {
    let io = |e: hyper::Error| std::io::Error::other(e);
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(io)?;
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let resp = sender.send_request(req).await.map_err(io)?;
    let status = resp.status();
    let body = resp.into_body().collect().await.map_err(io)?.to_bytes();
    Ok((status, body))
}

async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(StatusCode, Bytes)> {
    request(addr, Method::GET, path, Bytes::new()).await
}

async fn add_chain(addr: SocketAddr, chain: &[Vec<u8>]) -> std::io::Result<(StatusCode, Bytes)> {
    request(addr, Method::POST, "/test/ct/v1/add-chain", Bytes::from(add_chain_body(chain))).await
}

/// Submits `chains` from `writers` concurrent tasks until `stop`, returning
/// each acknowledged chain's index and SCT.
fn submit_until(
    addr: SocketAddr,
    chains: Arc<Vec<Vec<Vec<u8>>>>,
    writers: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(usize, Sct)>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let next = Arc::new(AtomicUsize::new(0));
            let acked = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for _ in 0..writers {
                let (chains, next, acked, stop) = (chains.clone(), next.clone(), acked.clone(), stop.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= chains.len() {
                            return;
                        }
                        match add_chain(addr, &chains[i]).await {
                            Ok((StatusCode::OK, body)) => {
                                let sct = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
                                acked.lock().unwrap().push((i, sct));
                            }
                            // Refused or cut off by the kill: not acknowledged, nothing promised.
                            Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let acked = std::mem::take(&mut *acked.lock().unwrap());
            acked
        })
    })
}

/// Every acknowledged SCT verifies and names the index where its chain is.
fn check_acknowledged(stack: &Stack, chains: &[Vec<Vec<u8>>], acked: &[(usize, Sct)]) {
    let key = stack.key();
    let (head, _) = stack.sth();
    for (i, sct) in acked {
        let entry = SignedEntry::X509(chains[*i][0].clone());
        key.verify_sct(sct, &entry).unwrap_or_else(|e| panic!("SCT of chain {i}: {e}"));
        let index = parse_leaf_index(&sct.extensions).unwrap();
        assert!(index < head.tree_size, "chain {i}: leaf_index {index} beyond the tree ({})", head.tree_size);
        let (status, body) =
            http(get(stack.addr, &format!("/test/ct/v1/get-entries?start={index}&end={index}"))).unwrap();
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let entries: GetEntriesResponse = serde_json::from_slice(&body).unwrap();
        let leaf = base64::engine::general_purpose::STANDARD.decode(&entries.entries[0].leaf_input).unwrap();
        let logged = TimestampedEntry::from_merkle_tree_leaf(&leaf).unwrap();
        assert_eq!(logged.entry, entry, "chain {i}: another entry at index {index}");
        assert_eq!(logged.timestamp, sct.timestamp, "chain {i}: another timestamp at index {index}");
    }
}

#[test]
fn kill9_under_write_load_loses_no_acknowledged_entry() {
    let pki = Pki::new();
    let chains: Arc<Vec<Vec<Vec<u8>>>> = Arc::new((0..6000).map(|i| pki.chain(i)).collect());
    let mut stack = Stack::start(&pki);
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(stack.addr, chains.clone(), 32, stop.clone());
    // Let batches flow, note a tree head, then kill in the middle of the load.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stack.sth().0.tree_size < 200 {
        assert!(Instant::now() < deadline, "no progress:\n{}", stack.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let (before, before_sth) = stack.sth();
    std::thread::sleep(Duration::from_millis(300));
    stack.kill9();
    stop.store(true, Ordering::Relaxed);
    let acked = load.join().unwrap();
    assert!(acked.len() >= 200, "only {} acknowledged before the kill", acked.len());

    stack.spawn();
    let (after, _) = stack.sth();
    eprintln!(
        "killed at tree size >= {}: {} SCTs acknowledged, tree {} after the restart",
        before.tree_size,
        acked.len(),
        after.tree_size
    );
    assert!(after.tree_size >= before.tree_size);
    check_acknowledged(&stack, &chains, &acked);
    // Dedup survived: resubmitting acknowledged chains gives their first SCTs.
    for (i, sct) in acked.iter().step_by(acked.len() / 20 + 1) {
        let (status, body) = http(add_chain(stack.addr, &chains[*i])).unwrap();
        assert_eq!(status, StatusCode::OK);
        let again = serde_json::from_slice::<AddChainResponse>(&body).unwrap().to_sct().unwrap();
        assert_eq!(&again, sct, "chain {i} got another SCT after the restart");
    }
    // The tree before the crash is a prefix of the tree after it.
    let (status, body) = http(get(
        stack.addr,
        &format!("/test/ct/v1/get-sth-consistency?first={}&second={}", before.tree_size, after.tree_size),
    ))
    .unwrap();
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let proof: GetSthConsistencyResponse = serde_json::from_slice(&body).unwrap();
    let proof = hashes_from_base64(&proof.consistency).unwrap();
    verify_consistency(before.tree_size, after.tree_size, &before.root_hash, &after.root_hash, &proof)
        .unwrap_or_else(|e| panic!("consistency {} -> {}: {e} ({before_sth:?})", before.tree_size, after.tree_size));
    // The static-ct-api view: the checkpoint verifies and is at least that tree.
    let (status, note) = http(get(stack.addr, "/test/checkpoint")).unwrap();
    assert_eq!(status, StatusCode::OK);
    let origin = format!("{}/test", stack.addr);
    let (_, head) = stack.key().verify_checkpoint(std::str::from_utf8(&note).unwrap(), &origin).unwrap();
    assert!(head.tree_size >= after.tree_size);

    // And it goes on: new chains are accepted after the restart.
    let (status, _) = http(add_chain(stack.addr, &chains[chains.len() - 1])).unwrap();
    assert_eq!(status, StatusCode::OK);

    // The verified-chain cache is in /metrics; these leaves come straight from
    // the root, a chain shape it never remembers, so it has no entry and no hit.
    let mut text = String::new();
    for _ in 0..30 {
        let (status, body) = http(get(stack.addr, "/metrics")).unwrap();
        assert_eq!(status, StatusCode::OK);
        text = String::from_utf8_lossy(&body).into_owned();
        if text.contains("ct_verified_chain_hits_total{") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(text.contains("ct_verified_chains{daemon=\"ctlogd\",log=\"test\"} 0"), "{text}");
    assert!(text.contains("ct_verified_chain_hits_total{daemon=\"ctlogd\",log=\"test\"} 0"), "{text}");
}

#[test]
fn sigterm_under_load_stops_and_keeps_what_it_acknowledged() {
    let pki = Pki::new();
    let chains: Arc<Vec<Vec<Vec<u8>>>> = Arc::new((0..3000).map(|i| pki.chain(10_000 + i)).collect());
    let mut stack = Stack::start(&pki);
    let stop = Arc::new(AtomicBool::new(false));
    let load = submit_until(stack.addr, chains.clone(), 16, stop.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while stack.sth().0.tree_size < 100 {
        assert!(Instant::now() < deadline, "no progress:\n{}", stack.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = stack.terminate();
    assert!(status.success(), "ctlogd exited with {status} on SIGTERM:\n{}", stack.log());
    stop.store(true, Ordering::Relaxed);
    let acked = load.join().unwrap();
    stack.spawn();
    check_acknowledged(&stack, &chains, &acked);
}
