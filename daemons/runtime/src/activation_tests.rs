//! Tests for socket activation: pure parsing, fallbacks, and a real activated child process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const CHILD_ENV: &str = "SIGNET_RUNTIME_ACTIVATION_CHILD";
const SOCKET_ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

/// Held while this test process starts a child, and by a test that needs a listener it
/// dropped to be gone: between its fork and its exec, a child holds a copy of every
/// descriptor the tests have open, so a dropped listener would still accept a connection
/// (and a stale socket would look in use).
static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn parse_named_fds() {
    let names = parse_env(Some("42"), Some("3"), Some("http:control:http"), 42).unwrap();
    assert_eq!(names, ["http", "control", "http"]);
}

#[test]
fn parse_default_names() {
    let names = parse_env(Some("42"), Some("2"), None, 42).unwrap();
    assert_eq!(names, [DEFAULT_NAME, DEFAULT_NAME]);
}

#[test]
fn parse_not_for_us() {
    assert!(parse_env(Some("41"), Some("2"), None, 42).unwrap().is_empty());
    // systemd always sets LISTEN_PID; without it the fds are not ours.
    assert!(parse_env(None, Some("2"), None, 42).unwrap().is_empty());
    assert!(parse_env(Some("42"), None, None, 42).unwrap().is_empty());
    assert!(parse_env(Some("42"), Some("0"), Some(""), 42).unwrap().is_empty());
}

#[test]
fn parse_malformed() {
    assert!(matches!(parse_env(Some("x"), Some("1"), None, 42), Err(ActivationError::Environment(_))));
    assert!(matches!(parse_env(Some("42"), Some("-1"), None, 42), Err(ActivationError::Environment(_))));
    let err = parse_env(Some("42"), Some("2"), Some("a:b:c"), 42).unwrap_err();
    assert!(err.to_string().contains("LISTEN_FDS=2 but LISTEN_FDNAMES has 3"), "{err}");
}

#[test]
fn from_env_ignores_foreign_fds_and_unsets_vars() {
    let _env = crate::env_lock();
    // LISTEN_PID names another process, so fd 3 (whatever it is here) must not be touched.
    std::env::set_var("LISTEN_PID", "1");
    std::env::set_var("LISTEN_FDS", "1");
    std::env::set_var("LISTEN_FDNAMES", "control");
    let mut act = Activation::from_env();
    assert!(act.names().is_empty());
    assert!(act.take_unix("control").unwrap().is_none());
    for var in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        assert!(std::env::var_os(var).is_none(), "{var} still set");
    }
}

#[tokio::test]
async fn unix_fallback_binds_with_mode_and_replaces_stale_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/signet/ctl.sock");
    let mut act = Activation::none();

    let listener = unix_listener(&mut act, "control", &path, 0o660).unwrap();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let client = tokio::net::UnixStream::connect(&path);
    let (accepted, _) = tokio::join!(listener.accept(), client);
    accepted.unwrap();

    // While it listens, a second daemon must not steal the socket.
    let err = unix_listener(&mut act, "control", &path, 0o660).unwrap_err();
    assert!(matches!(err, ActivationError::InUse { .. }), "{err}");

    // After the first daemon is gone, its socket file is stale and gets replaced.
    let _no_child_starting = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
    drop(listener);
    assert!(path.exists());
    let again = unix_listener(&mut act, "control", &path, 0o600).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(again);
}

#[tokio::test]
async fn unix_fallback_refuses_to_remove_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    std::fs::write(&path, "precious").unwrap();
    let err = unix_listener(&mut Activation::none(), "control", &path, 0o660).unwrap_err();
    assert!(matches!(err, ActivationError::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}

#[tokio::test]
async fn tcp_fallback_binds() {
    let mut act = Activation::none();
    let listener = tcp_listener(&mut act, "http", "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted, connected) = tokio::join!(listener.accept(), tokio::net::TcpStream::connect(addr));
    accepted.unwrap();
    connected.unwrap();
}

#[test]
fn helpers_outside_runtime_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let err = unix_listener(&mut Activation::none(), "c", &dir.path().join("s"), 0o600).unwrap_err();
    assert!(matches!(err, ActivationError::NoRuntime(_)));
    assert!(!dir.path().join("s").exists());
}

/// Runs this test binary under `systemd-socket-activate` with a named TCP and a named Unix
/// socket; the child half is [`activated_child`].
#[test]
fn real_socket_activation() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // we are the child running the whole suite by accident; nothing to do
    }
    if !Path::new(SOCKET_ACTIVATE).exists() {
        println!("skipping real_socket_activation: {SOCKET_ACTIVATE} not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("ctl.sock");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let spawning = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = Command::new(SOCKET_ACTIVATE)
        .arg("-l")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-l")
        .arg(&sock)
        .arg("--fdname=web:ctl")
        .arg("-E")
        .arg(format!("{CHILD_ENV}=1"))
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "activation::tests::activated_child", "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    drop(spawning);

    // systemd-socket-activate starts the child on the first connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        match UnixStream::connect(&sock) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = child.kill();
                panic!("activation socket never appeared: {e}");
            }
        }
    };
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reply = String::new();
    let read = conn.read_to_string(&mut reply);
    let status = wait_with_timeout(&mut child, Duration::from_secs(30));
    read.unwrap();
    assert_eq!(reply, format!("web=127.0.0.1:{port} ctl=ok"));
    assert!(status.success(), "child failed: {status}");
}

fn wait_with_timeout(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("activated child did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The activated half of [`real_socket_activation`]; does nothing in a normal test run.
#[test]
fn activated_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let mut act = Activation::from_env();
    assert_eq!(act.names(), ["web", "ctl"]);
    for var in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        assert!(std::env::var_os(var).is_none(), "{var} still set");
    }
    // Asking for the wrong kind is an error, and leaves the fd in place.
    let err = act.take_unix("web").unwrap_err();
    assert!(matches!(err, ActivationError::WrongType { .. }), "{err}");
    assert!(act.take_tcp("nope").unwrap().is_none());

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let unused = Path::new("/nonexistent/fallback.sock");
        let ctl = unix_listener(&mut act, "ctl", unused, 0o600).unwrap();
        let web = tcp_listener(&mut act, "web", "127.0.0.1:1".parse().unwrap()).unwrap();
        // Each name is handed out once.
        assert!(act.take_tcp("web").unwrap().is_none());
        let (mut conn, _) = ctl.accept().await.unwrap();
        let reply = format!("web={} ctl=ok", web.local_addr().unwrap());
        conn.write_all(reply.as_bytes()).await.unwrap();
    });
}
