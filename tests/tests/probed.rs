//! probed against real servers the test starts: Debian's nginx over HTTP and HTTPS (HTTP/2 by
//! ALPN; a certificate made with the openssl CLI), signet-testdns, a closed port, a slow endpoint, a wrong body
//! and an endpoint the test turns off and on, with a webhook receiver that must get exactly one
//! alert per state change and one resolved message. States are read through `/api/checks`,
//! `/metrics` and the status page; then probed is killed with SIGKILL and restarted: the history
//! is there, no alert is repeated, the checks resume. A SIGHUP reload keeps the history of the
//! checks that survive it. The PKI checks run against the appliance's own ocspd, ctlogd and signd.
//! The status page is also opened in headless Chromium (Playwright), and a screenshot kept.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use signet_tests::bin;
use signet_tests::pki::free_port;
use signet_tests::smallfs::SmallFs;

/// nginx on a temp prefix: `http_port` plain, `https_port` TLS with HTTP/2.
struct Nginx {
    child: Child,
    http_port: u16,
    https_port: u16,
}

impl Nginx {
    fn start(dir: &Path, cert: &Path, key: &Path) -> Nginx {
        let prefix = dir.join("nginx");
        std::fs::create_dir_all(prefix.join("logs")).unwrap();
        let (http_port, https_port) = (free_port(), free_port());
        let conf = prefix.join("nginx.conf");
        let temp = |n: &str| prefix.join(n).display().to_string();
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nworker_processes 1;\npid {pid};\nerror_log {log} warn;\n\
                 events {{ worker_connections 256; }}\n\
                 http {{\n access_log off;\n client_body_temp_path {cb};\n proxy_temp_path {px};\n\
                 fastcgi_temp_path {fc};\n uwsgi_temp_path {uw};\n scgi_temp_path {sc};\n\
                 server {{ listen 127.0.0.1:{http_port}; location / {{ return 200 \"hello probed\\n\"; }} }}\n\
                 server {{ listen 127.0.0.1:{https_port} ssl http2; ssl_certificate {cert}; ssl_certificate_key {key};\n\
                   location / {{ return 200 \"hello over tls\\n\"; }} }}\n}}\n",
                pid = temp("nginx.pid"),
                log = temp("logs/error.log"),
                cb = temp("client_body"),
                px = temp("proxy"),
                fc = temp("fastcgi"),
                uw = temp("uwsgi"),
                sc = temp("scgi"),
                cert = cert.display(),
                key = key.display(),
            ),
        )
        .unwrap();
        let child = Command::new("/usr/sbin/nginx")
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(prefix.join("logs/error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Nginx { child, http_port, https_port };
        wait_for(Duration::from_secs(10), "nginx listening", || TcpStream::connect(("127.0.0.1", http_port)).is_ok());
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA and a certificate for `localhost` / 127.0.0.1 signed by it, with the openssl CLI.
fn make_certs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = |n: &str| dir.join(n);
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "30",
        "-subj",
        "/CN=probed test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(p("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "20",
        "-extfile",
        "ext.cnf",
    ]);
    (p("ca.pem"), p("server.pem"), p("server.key"))
}

/// A small HTTP/1.1 server: `/slow` answers after 3 s, `/wrong` with the wrong body, `/switch`
/// with 200 or 503 as the test says; POSTs to `/hook` are kept (the webhook receiver).
struct TestServer {
    port: u16,
    switch_on: Arc<AtomicBool>,
    hooks: Arc<Mutex<Vec<(String, Value)>>>,
}

impl TestServer {
    fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let switch_on = Arc::new(AtomicBool::new(true));
        let hooks = Arc::new(Mutex::new(Vec::new()));
        let (s, h) = (switch_on.clone(), hooks.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, h) = (s.clone(), h.clone());
                std::thread::spawn(move || serve_one(conn, &s, &h));
            }
        });
        TestServer { port, switch_on, hooks }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The alerts received so far: (path, body).
    fn alerts(&self) -> Vec<(String, Value)> {
        self.hooks.lock().unwrap().clone()
    }

    /// The JSON alerts (path `/hook`) about `check`, as event names.
    fn events(&self, check: &str) -> Vec<String> {
        self.alerts()
            .into_iter()
            .filter(|(p, v)| p == "/hook" && v["check"] == check)
            .map(|(_, v)| v["event"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// One connection, one request (Connection: close).
fn serve_one(mut conn: TcpStream, switch_on: &AtomicBool, hooks: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut length = 0;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let (status, text) = match path.as_str() {
        "/slow" => {
            std::thread::sleep(Duration::from_secs(3));
            ("200 OK", "slow but fine\n")
        }
        "/wrong" => ("200 OK", "goodbye\n"),
        "/json" => ("200 OK", "{\"status\": \"ok\", \"queue\": {\"depth\": 3}}"),
        "/switch" if switch_on.load(Ordering::SeqCst) => ("200 OK", "switch on\n"),
        "/switch" => ("503 Service Unavailable", "switch off\n"),
        "/hook" | "/slack" => {
            hooks.lock().unwrap().push((path.clone(), serde_json::from_slice(&body).unwrap_or(Value::Null)));
            ("200 OK", "thanks\n")
        }
        _ => ("404 Not Found", "no\n"),
    };
    let _ = write!(conn, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}", text.len());
}

/// probed as a child process.
struct Probed {
    child: Option<Child>,
    port: u16,
    config: PathBuf,
    log: PathBuf,
}

impl Probed {
    fn start(dir: &Path, config_text: &str, port: u16) -> Probed {
        let config = dir.join("probed.toml");
        std::fs::write(&config, config_text).unwrap();
        let mut p = Probed { child: None, port, config, log: dir.join("probed.log") };
        p.spawn();
        p
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(bin("probed"))
            .arg("--config")
            .arg(&self.config)
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_for(Duration::from_secs(20), "probed /healthz", || self.get("/healthz").0 == 200);
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    fn hup(&self) {
        let pid = self.child.as_ref().unwrap().id();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
    }

    fn get(&self, path: &str) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "-m", "5", "-w", "\n%{http_code}", &format!("http://127.0.0.1:{}{path}", self.port)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    fn check(&self, name: &str) -> Value {
        let (status, body) = self.get(&format!("/api/checks/{name}"));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn state(&self, name: &str) -> String {
        self.check(name)["state"].as_str().unwrap().to_owned()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Probed {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn probed_checks_real_servers_alerts_and_survives_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, cert, key) = make_certs(d);
    let nginx = Nginx::start(d, &cert, &key);
    let server = TestServer::start();
    let dns = signet_tests::testdns::TestDns::start(&d.join("zone"), "www.probe.test A 127.0.0.1\n");
    let closed = free_port();
    let port = free_port();
    let checks = format!(
        r#"
[checks.nginx_http]
kind = "http"
url = "http://127.0.0.1:{http}/"
expect_body = "hello probed"
expect_headers = {{ server = "nginx" }}

[checks.nginx_https]
kind = "http"
url = "https://localhost:{https}/"
ca_file = {ca:?}
http_version = "2"
expect_body_regex = "(?m)^hello over tls$"
reuse_connections = false

[checks.nginx_tls]
kind = "tls"
address = "127.0.0.1:{https}"
server_name = "localhost"
ca_file = {ca:?}
min_days = 5

[checks.closed_port]
kind = "tcp"
address = "127.0.0.1:{closed}"

[checks.slow]
kind = "http"
url = "{slow}"
timeout = "1s"

[checks.wrong_body]
kind = "http"
url = "{wrong}"
expect_body = "hello"

[checks.json]
kind = "http"
url = "{json}"
expect_json = {{ "/status" = "ok", "/queue/depth" = 3 }}

[checks.json_wrong]
kind = "http"
url = "{json}"
expect_json = {{ "/queue/depth" = 4 }}

[checks.self_h2c]
kind = "http"
url = "http://127.0.0.1:{port}/healthz"
http_version = "2"

[checks.dns_a]
kind = "dns"
name = "www.probe.test"
resolver = "{dns}"
expect = ["127.0.0.1"]

[checks.dns_wrong]
kind = "dns"
name = "www.probe.test"
resolver = "{dns}"
expect = ["10.0.0.1"]

[checks.dns_missing]
kind = "dns"
name = "nothing.probe.test"
resolver = "{dns}"

[checks.switch]
kind = "http"
url = "{switch}"
down_after = 2
up_after = 2
"#,
        http = nginx.http_port,
        https = nginx.https_port,
        slow = server.url("/slow"),
        wrong = server.url("/wrong"),
        switch = server.url("/switch"),
        json = server.url("/json"),
        dns = dns.addr(),
    );
    let config = format!(
        "state_dir = {:?}\nlisten = \"127.0.0.1:{port}\"\nrefresh_seconds = 5\n\
         [defaults]\ninterval = \"300ms\"\ntimeout = \"2s\"\njitter = \"50ms\"\n{checks}\n\
         [[webhooks]]\nurl = \"{hook}\"\n\
         [[webhooks]]\nurl = \"{slack}\"\nformat = \"slack\"\nrepeat = \"700ms\"\nchecks = [\"closed_port\"]\n",
        d.join("state"),
        hook = server.url("/hook"),
        slack = server.url("/slack"),
    );
    let mut probed = Probed::start(d, &config, port);

    // Each check settles in its state.
    let expected = [
        ("nginx_http", "up"),
        ("nginx_https", "up"),
        ("nginx_tls", "up"),
        ("closed_port", "down"),
        ("slow", "down"),
        ("wrong_body", "down"),
        ("switch", "up"),
        ("json", "up"),
        ("json_wrong", "down"),
        ("self_h2c", "up"),
        ("dns_a", "up"),
        ("dns_wrong", "down"),
        ("dns_missing", "down"),
    ];
    for (name, state) in expected {
        let deadline = Instant::now() + Duration::from_secs(20);
        while probed.state(name) != state {
            assert!(Instant::now() < deadline, "{name} not {state}: {}", probed.check(name));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let https = probed.check("nginx_https");
    assert!(https["last"]["message"].as_str().unwrap().contains("HTTP/2"), "{https}");
    assert!(probed.check("slow")["last"]["message"].as_str().unwrap().contains("timed out"));
    assert!(probed.check("wrong_body")["last"]["message"].as_str().unwrap().contains("does not contain"));
    assert!(probed.check("closed_port")["last"]["message"].as_str().unwrap().contains("connect"));
    let list: Value = serde_json::from_str(&probed.get("/api/checks").1).unwrap();
    assert_eq!(list["checks"].as_array().unwrap().len(), 13);
    // h2c by prior knowledge, against probed's own scaffold.
    assert!(probed.check("self_h2c")["last"]["message"].as_str().unwrap().contains("HTTP/2"));
    assert!(probed.check("json_wrong")["last"]["message"].as_str().unwrap().contains("/queue/depth is 3"));
    assert_eq!(probed.get("/api/checks/nope").0, 404);

    // signetctl probe: the same checks, run once from the same config.
    let ctl = |args: &[&str]| {
        signet_tests::run(Command::new(bin("signetctl")).arg("probe").args(args).arg("--config").arg(&probed.config))
    };
    let (st, out, err) = ctl(&["run", "nginx_https"]);
    assert!(st.success() && out.contains("nginx_https: ok") && out.contains("HTTP/2"), "{out}{err}");
    let (st, out, err) = ctl(&["run", "closed_port"]);
    assert_eq!(st.code(), Some(1), "{out}{err}");
    assert!(out.contains("closed_port: FAILED") && err.contains("failed"), "{out}{err}");
    let (st, out, _) = ctl(&["run", "nginx_tls", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(st.success() && v["ok"] == true && v["gauges"]["probe_ssl_earliest_cert_expiry"].is_number(), "{v}");
    assert_eq!(ctl(&["run", "nope"]).0.code(), Some(4));
    let (st, out, _) = ctl(&["list", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(st.success());
    assert_eq!(v["checks"].as_array().unwrap().len(), 13, "{v}");

    // Metrics in blackbox_exporter's names.
    let (_, metrics) = probed.get("/metrics");
    assert!(metrics.contains("probe_success{daemon=\"probed\",check=\"nginx_http\"} 1"), "{metrics}");
    assert!(metrics.contains("probe_success{daemon=\"probed\",check=\"closed_port\"} 0"), "{metrics}");
    assert!(metrics.contains("probe_http_version{daemon=\"probed\",check=\"nginx_https\"} 2"), "{metrics}");
    let expiry = metrics
        .lines()
        .find(|l| l.starts_with("probe_ssl_earliest_cert_expiry{daemon=\"probed\",check=\"nginx_tls\"}"))
        .unwrap_or_else(|| panic!("{metrics}"));
    let expiry: f64 = expiry.rsplit(' ').next().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((expiry - now - 20.0 * 86_400.0).abs() < 3_600.0, "{expiry} vs {now}");
    assert!(metrics.contains("probe_duration_seconds{daemon=\"probed\",check=\"slow\"}"), "{metrics}");
    // HTTPS checks report the chain's expiry too, as blackbox_exporter does.
    assert!(
        metrics
            .contains(&format!("probe_ssl_earliest_cert_expiry{{daemon=\"probed\",check=\"nginx_https\"}} {expiry}")),
        "{metrics}"
    );

    // The status page: every check with its state, nothing fetched from elsewhere.
    let (status, page) = probed.get("/");
    assert_eq!(status, 200);
    for (name, state) in expected {
        assert!(page.contains(&format!("id=\"check-{name}\" data-state=\"{state}\"")), "{name}: {page}");
    }
    assert!(page.contains("<svg") && page.contains("http-equiv=\"refresh\""));
    assert!(!page.contains("<script") && !page.contains("src=\"http") && !page.contains("href=\"http"));
    // The same page in headless Chromium: every check shown in its state, no request leaves
    // probed, a screenshot kept (tests/probed/status_page.py).
    status_page_in_chromium(&format!("http://127.0.0.1:{port}/"), &expected);

    // The switch goes off: down after two failures, one alert; on again: one resolved.
    server.switch_on.store(false, Ordering::SeqCst);
    wait_for(Duration::from_secs(20), "switch down", || probed.state("switch") == "down");
    std::thread::sleep(Duration::from_secs(1));
    server.switch_on.store(true, Ordering::SeqCst);
    wait_for(Duration::from_secs(20), "switch up", || probed.state("switch") == "up");
    wait_for(Duration::from_secs(10), "resolved alert", || server.events("switch").len() == 2);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(server.events("switch"), ["down", "resolved"]);
    for name in ["closed_port", "slow", "wrong_body", "json_wrong", "dns_wrong", "dns_missing"] {
        assert_eq!(server.events(name), ["down"], "{name}");
    }
    for name in ["nginx_http", "nginx_https", "nginx_tls", "json", "self_h2c", "dns_a"] {
        assert!(server.events(name).is_empty(), "{name}");
    }
    let down = server.alerts().into_iter().find(|(p, v)| p == "/hook" && v["check"] == "closed_port").unwrap().1;
    assert_eq!(down["state"], "down");
    assert_eq!(down["kind"], "tcp");
    // The Slack-format hook: only closed_port, its down alert and then reminders.
    let slack: Vec<Value> = server.alerts().into_iter().filter(|(p, _)| p == "/slack").map(|(_, v)| v).collect();
    assert!(slack.len() >= 2, "{slack:?}");
    assert!(slack[0]["text"].as_str().unwrap().contains("closed_port* is DOWN"), "{slack:?}");
    assert!(slack[1]["text"].as_str().unwrap().contains("still DOWN"), "{slack:?}");

    // kill -9: what the API showed was committed; states are kept, no alert is repeated.
    let before = probed.check("nginx_http");
    let last_before = before["last"]["time_ms"].as_u64().unwrap();
    let alerts_before = server.alerts().into_iter().filter(|(p, _)| p == "/hook").count();
    probed.kill9();
    let killed_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    probed.spawn();
    let after = probed.check("nginx_http");
    let times: Vec<u64> = after["recent"].as_array().unwrap().iter().map(|r| r["time_ms"].as_u64().unwrap()).collect();
    assert!(times.contains(&last_before), "{last_before} not in {times:?}");
    assert_eq!(probed.state("closed_port"), "down");
    assert!(after["uptime"]["24h"].as_f64().unwrap() > 99.0, "{after}");
    wait_for(Duration::from_secs(10), "checks resume", || {
        probed.check("nginx_http")["last"]["time_ms"].as_u64().unwrap() > killed_at
            && probed.check("closed_port")["last"]["time_ms"].as_u64().unwrap() > killed_at
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(server.alerts().into_iter().filter(|(p, _)| p == "/hook").count(), alerts_before, "{}", probed.log());

    // SIGHUP: a check removed, one added, one changed; the survivors keep their history.
    let runs_before = probed.check("nginx_http")["recent"].as_array().unwrap().len();
    let reloaded = config
        .replace("[checks.slow]", "[checks.slow_gone]")
        .replace("expect_body = \"hello probed\"", "expect_body = \"hello\"")
        + &format!("\n[checks.nginx_tcp]\nkind = \"tcp\"\naddress = \"127.0.0.1:{}\"\n", nginx.http_port);
    // The removed check's webhook filter still names a check that exists.
    std::fs::write(&probed.config, reloaded.replace("[checks.slow_gone]", "[checks.slow_renamed]")).unwrap();
    probed.hup();
    wait_for(Duration::from_secs(10), "nginx_tcp up", || {
        let (s, b) = probed.get("/api/checks/nginx_tcp");
        s == 200 && serde_json::from_str::<Value>(&b).unwrap()["state"] == "up"
    });
    assert_eq!(probed.get("/api/checks/slow").0, 404);
    let http = probed.check("nginx_http");
    assert_eq!(http["state"], "up");
    assert!(http["recent"].as_array().unwrap().len() >= runs_before, "{http}");
    assert_eq!(probed.state("closed_port"), "down");
    // The removed check's series go with it (once its task has stopped: a run finishing
    // during the reload may have put them back for a moment).
    wait_for(Duration::from_secs(5), "the removed check's series gone", || {
        !probed.get("/metrics").1.contains("check=\"slow\"")
    });
    // A config the checks refuse leaves the running ones alone.
    std::fs::write(&probed.config, config.replace("expect_body = \"hello\"\n", "expect_body_regex = \"(\"\n")).unwrap();
    probed.hup();
    std::thread::sleep(Duration::from_millis(500));
    assert!(probed.log().contains("reload failed"), "{}", probed.log());
    assert_eq!(probed.get("/api/checks/nginx_tcp").0, 200);
}

/// PEM → base64 DER of the first certificate.
/// Runs tests/probed/status_page.py (Playwright for Python with Debian's Chromium) on the
/// status page at `url`, expecting each check of `expected` in its state. The interpreter is
/// `$SIGNET_OAUTH_PYTHON` (scripts/lib.sh's venv with Playwright) or `python3`; the
/// screenshot goes to `$SIGNET_ARTIFACT_DIR/probed/` (default ~/.cache/signet/artifacts).
fn status_page_in_chromium(url: &str, expected: &[(&str, &str)]) {
    let python = std::env::var("SIGNET_OAUTH_PYTHON").unwrap_or_else(|_| "python3".into());
    let artifacts = std::env::var_os("SIGNET_ARTIFACT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/signet/artifacts"))
        .join("probed");
    let states: serde_json::Map<String, Value> =
        expected.iter().map(|(n, s)| ((*n).to_owned(), Value::from(*s))).collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("probed/status_page.py");
    let (st, out, err) = signet_tests::run(
        Command::new(&python).arg(&script).arg(url).arg(Value::Object(states).to_string()).arg(&artifacts),
    );
    assert!(st.success(), "the status page in Chromium ({python}):\n{out}{err}");
    assert!(out.contains("PASS  status page: 0 failed"), "{out}{err}");
    assert!(artifacts.join("status-page.png").is_file());
}

/// A self-signed P-256 CA whose key is in memory.
fn file_ca() -> (openssl::x509::X509, openssl::pkey::PKey<openssl::pkey::Private>) {
    use openssl::{asn1, bn, ec, hash, nid, pkey, x509};
    let key = pkey::PKey::from_ec_key(
        ec::EcKey::generate(&ec::EcGroup::from_curve_name(nid::Nid::X9_62_PRIME256V1).unwrap()).unwrap(),
    )
    .unwrap();
    let mut name = x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "probed SCT test CA").unwrap();
    let name = name.build();
    let mut b = x509::X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&bn::BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&asn1::Asn1Time::days_from_now(30).unwrap()).unwrap();
    b.append_extension(x509::extension::BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
    b.append_extension(x509::extension::KeyUsage::new().critical().key_cert_sign().crl_sign().build().unwrap())
        .unwrap();
    b.sign(&key, hash::MessageDigest::sha256()).unwrap();
    (b.build(), key)
}

/// A certificate from `ca` with an SCT from `ct` embedded, made the way a CA makes one: a
/// precertificate (the poison extension) sent to `add-pre-chain`, then the same TBS with the
/// SCT list in the poison's place. Returns the certificate's and the CA's PEM paths.
fn cert_with_embedded_sct(
    d: &Path,
    ct: &signet_tests::ctlog::Ctlogd,
    ca: &openssl::x509::X509,
    ca_key: &openssl::pkey::PKey<openssl::pkey::Private>,
) -> (PathBuf, PathBuf) {
    use base64::Engine;
    use openssl::{asn1, bn, ec, hash, nid, pkey, x509};
    let key = pkey::PKey::from_ec_key(
        ec::EcKey::generate(&ec::EcGroup::from_curve_name(nid::Nid::X9_62_PRIME256V1).unwrap()).unwrap(),
    )
    .unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let make = |last: x509::X509Extension| {
        let mut name = x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "sct.probe.test").unwrap();
        let mut b = x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&bn::BigNum::from_u32(0x5c7).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name.build()).unwrap();
        b.set_issuer_name(ca.subject_name()).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&asn1::Asn1Time::from_unix(now - 60).unwrap()).unwrap();
        b.set_not_after(&asn1::Asn1Time::from_unix(now + 7 * 86_400).unwrap()).unwrap();
        let san = x509::extension::SubjectAlternativeName::new()
            .dns("sct.probe.test")
            .build(&b.x509v3_context(Some(ca), None));
        b.append_extension(san.unwrap()).unwrap();
        b.append_extension(last).unwrap();
        b.sign(ca_key, hash::MessageDigest::sha256()).unwrap();
        b.build()
    };
    let ext = |oid: &str, critical: bool, value: &[u8]| {
        x509::X509Extension::new_from_der(
            &asn1::Asn1Object::from_str(oid).unwrap(),
            critical,
            &asn1::Asn1OctetString::new_from_bytes(value).unwrap(),
        )
        .unwrap()
    };
    let pre = make(ext("1.3.6.1.4.1.11129.2.4.3", true, &[0x05, 0x00]));
    let b64 = |c: &openssl::x509::X509| base64::engine::general_purpose::STANDARD.encode(c.to_der().unwrap());
    let chain = serde_json::json!({ "chain": [b64(&pre), b64(ca)] }).to_string();
    let out = Command::new("curl")
        .args(["-s", "-f", "-X", "POST", "-H", "content-type: application/json", "--data", &chain])
        .arg(format!("{}ct/v1/add-pre-chain", ct.url()))
        .output()
        .unwrap();
    assert!(out.status.success(), "add-pre-chain: {}", String::from_utf8_lossy(&out.stdout));
    let sct: signet_ct::rfc6962::api::AddChainResponse = serde_json::from_slice(&out.stdout).unwrap();
    let list = signet_ct::rfc6962::sct_list_extension_value(&[sct.to_sct().unwrap()]).unwrap();
    let cert = make(ext("1.3.6.1.4.1.11129.2.4.2", false, &list));
    let (cert_path, ca_path) = (d.join("sct-cert.pem"), d.join("sct-ca.pem"));
    std::fs::write(&cert_path, cert.to_pem().unwrap()).unwrap();
    std::fs::write(&ca_path, ca.to_pem().unwrap()).unwrap();
    (cert_path, ca_path)
}

fn pem_b64(path: &Path) -> String {
    let pem = std::fs::read_to_string(path).unwrap();
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    body
}

/// The time of each of `check`'s recent runs.
fn recent_times(check: &Value) -> Vec<u64> {
    check["recent"].as_array().unwrap().iter().map(|r| r["time_ms"].as_u64().unwrap()).collect()
}

/// Issue 23 item 6: probed's state on a full disk, then restarted on a read-only one. The
/// check goes on running, changing state and alerting from memory; the refusal is logged
/// once, not per result; results are stored again once space returns; restarted on the
/// read-only directory, probed shows the state and history stored before.
#[test]
fn probed_on_a_full_or_read_only_disk_keeps_checking_and_alerting() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = TestServer::start();
    let port = free_port();
    let state = d.join("state");
    let config = format!(
        "state_dir = {state:?}\nlisten = \"127.0.0.1:{port}\"\n\
         [defaults]\ninterval = \"200ms\"\ntimeout = \"2s\"\n\
         [checks.switch]\nkind = \"http\"\nurl = \"{switch}\"\ndown_after = 2\nup_after = 2\n\
         [[webhooks]]\nurl = \"{hook}\"\n",
        switch = server.url("/switch"),
        hook = server.url("/hook"),
    );
    let mut probed = Probed::start(d, &config, port);
    wait_for(Duration::from_secs(20), "switch up", || probed.state("switch") == "up");
    probed.kill9();
    let Some(fs) = SmallFs::over(&state, "16m") else { return };
    probed.spawn();
    wait_for(Duration::from_secs(20), "switch up", || probed.state("switch") == "up");

    // Full: results are not stored, which is logged once; the check still goes down and alerts.
    fs.fill();
    server.switch_on.store(false, Ordering::SeqCst);
    wait_for(Duration::from_secs(20), "switch down", || probed.state("switch") == "down");
    wait_for(Duration::from_secs(10), "the down alert", || server.events("switch") == ["down"]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(probed.log().matches(STORE_FULL_LINE).count(), 1, "logged once:\n{}", probed.log());
    assert!(!probed.log().contains("cannot store the result"), "{}", probed.log());

    // Space returns: results are stored again, which is logged once.
    fs.free();
    wait_for(Duration::from_secs(10), "writes again", || probed.log().contains(STORE_WRITABLE_LINE));
    // A result is committed within the store's 50 ms linger.
    std::thread::sleep(Duration::from_millis(500));
    let stored = probed.check("switch")["last"]["time_ms"].as_u64().unwrap();

    // Restarted on a read-only state directory: the stored state and history are shown,
    // the check goes on and alerts from memory, the refusal is logged once.
    probed.kill9();
    fs.read_only();
    probed.spawn();
    let after = probed.check("switch");
    assert_eq!(after["state"], "down", "{after}");
    assert!(recent_times(&after).contains(&stored), "{stored} not in {after}");
    assert!(probed.log().contains(STORE_READ_ONLY_START_LINE), "{}", probed.log());
    server.switch_on.store(true, Ordering::SeqCst);
    wait_for(Duration::from_secs(20), "switch up", || probed.state("switch") == "up");
    wait_for(Duration::from_secs(10), "the resolved alert", || server.events("switch") == ["down", "resolved"]);
    assert_eq!(probed.log().matches(STORE_READ_ONLY_LINE).count(), 1, "logged once:\n{}", probed.log());
    assert!(!probed.log().contains("cannot store the result"), "{}", probed.log());
    assert!(!probed.log().contains("panicked"), "{}", probed.log());

    // Writable again and restarted: results are stored.
    probed.kill9();
    fs.writable();
    probed.spawn();
    wait_for(Duration::from_secs(20), "switch up", || probed.state("switch") == "up");
    std::thread::sleep(Duration::from_millis(500));
    let stored = probed.check("switch")["last"]["time_ms"].as_u64().unwrap();
    probed.kill9();
    probed.spawn();
    assert!(recent_times(&probed.check("switch")).contains(&stored), "{}", probed.log());
}

const STORE_FULL_LINE: &str = "the store refuses writes for lack of space";
const STORE_WRITABLE_LINE: &str = "the store accepts writes again";
const STORE_READ_ONLY_LINE: &str = "the store refuses writes because its filesystem is read-only";
const STORE_READ_ONLY_START_LINE: &str = "the store cannot be written";

#[test]
fn probed_pki_checks_against_ocspd_and_ctlogd() {
    // CRLs valid for 10 minutes: a check wanting an hour of margin finds them stale.
    let mut pki = signet_tests::pki::Pki::start_with("crl_validity_seconds = 600\n");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (good, _) = pki.issue("good.test");
    let (revoked, revoked_serial) = pki.issue("revoked.test");
    let (later, later_serial) = pki.issue("later.test");
    let (st, out, err) = signet_tests::run(pki.signetctl().args(["cert", "revoke", &revoked_serial]));
    assert!(st.success(), "{out}{err}");
    let dir_path = pki.dir.clone();
    let root = pki.ca("root.pem");
    // The log also accepts a small CA of the test's own (keys in files), whose certificate
    // with an SCT embedded the CT check proves included.
    let (sct_ca, sct_ca_key) = file_ca();
    let roots = d.join("ct-roots.pem");
    std::fs::write(&roots, [std::fs::read(&root).unwrap(), sct_ca.to_pem().unwrap()].concat()).unwrap();
    let ct = signet_tests::ctlog::Ctlogd::start(&mut pki.signd, &dir_path, "probelog", &roots);
    let (sct_cert, sct_issuer) = cert_with_embedded_sct(d, &ct, &sct_ca, &sct_ca_key);
    let issuer = pki.ca("issuing.pem");
    // A probe key in signd: probed signs a test message with it each run.
    signet_ipc::block_on(
        pki.signd.client().generate_key(pki.signd.spec("probe-key", signet_ipc::KeyAlgorithm::EcP256)),
    )
    .unwrap();
    let port = free_port();
    let config = format!(
        r#"state_dir = {state:?}
listen = "127.0.0.1:{port}"
[defaults]
interval = "300ms"
timeout = "3s"
jitter = "0s"

[checks.ocsp_good]
kind = "ocsp"
certificate = {good:?}
issuer = {issuer:?}
min_margin = "1m"

[checks.ocsp_revoked]
kind = "ocsp"
certificate = {revoked:?}
issuer = {issuer:?}

[checks.ocsp_later]
kind = "ocsp"
certificate = {later:?}
issuer = {issuer:?}

[checks.crl_fresh]
kind = "crl"
url = "{crl}"
issuer = {issuer:?}
min_margin = "1m"
max_age = "1h"

[checks.crl_shard]
kind = "crl"
url = "{crl_shard}"
issuer = {issuer:?}
min_margin = "1m"

[checks.crl_delta]
kind = "crl"
url = "{crl_delta}"
issuer = {issuer:?}
min_margin = "1m"

[checks.crl_stale]
kind = "crl"
url = "{crl}"
issuer = {issuer:?}
min_margin = "1h"

[checks.signd]
kind = "signd"
socket = {signd:?}
key = "probe-key"

[checks.signd_no_key]
kind = "signd"
socket = {signd:?}
key = "no-such-key"

[checks.ct_log]
kind = "ct"
url = "{ct_url}"
public_key = "{ct_key}"
max_age = "1m"

[checks.ct_sct]
kind = "ct"
url = "{ct_url}"
public_key = "{ct_key}"
certificate = {sct_cert:?}
issuer = {sct_issuer:?}

[checks.ct_sct_wrong_issuer]
kind = "ct"
url = "{ct_url}"
public_key = "{ct_key}"
certificate = {sct_cert:?}
issuer = {issuer:?}
"#,
        state = d.join("state"),
        crl = pki.url("/crl/demo.crl"),
        crl_shard = pki.url("/crl/demo/0.crl"),
        crl_delta = pki.url("/crl/demo/delta.crl"),
        ct_url = ct.url(),
        ct_key = ct.public_key_b64(),
        signd = pki.signd.socket,
    );
    let mut probed = Probed::start(d, &config, port);
    let settle = |probed: &Probed, name: &str, state: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while probed.state(name) != state {
            assert!(Instant::now() < deadline, "{name} not {state}: {}", probed.check(name));
            std::thread::sleep(Duration::from_millis(50));
        }
        probed.check(name)
    };
    let g = settle(&probed, "ocsp_good", "up");
    assert!(g["last"]["message"].as_str().unwrap().contains("signature verified"), "{g}");
    let r = settle(&probed, "ocsp_revoked", "down");
    assert!(r["last"]["message"].as_str().unwrap().contains("revoked"), "{r}");
    settle(&probed, "ocsp_later", "up");
    let c = settle(&probed, "crl_fresh", "up");
    assert!(c["last"]["message"].as_str().unwrap().contains("CRL number"), "{c}");
    settle(&probed, "crl_shard", "up");
    let delta = settle(&probed, "crl_delta", "up");
    assert!(delta["last"]["message"].as_str().unwrap().contains("delta CRL"), "{delta}");
    let s = settle(&probed, "crl_stale", "down");
    assert!(s["last"]["message"].as_str().unwrap().contains("margin"), "{s}");
    settle(&probed, "ct_log", "up");
    // The SCT's entry proven in the tree from the tiles; with the wrong issuer the SCT's
    // signature (over the issuer's key hash) does not verify.
    let sct = settle(&probed, "ct_sct", "up");
    assert!(sct["last"]["message"].as_str().unwrap().contains("the SCT's entry is included (leaf 0)"), "{sct}");
    let wrong = settle(&probed, "ct_sct_wrong_issuer", "down");
    assert!(wrong["last"]["message"].as_str().unwrap().contains("the SCT's signature"), "{wrong}");
    let sd = settle(&probed, "signd", "up");
    assert!(sd["last"]["message"].as_str().unwrap().contains("verified"), "{sd}");
    settle(&probed, "signd_no_key", "down");

    // A revocation takes the OCSP check down and gives the CRL a higher number.
    let (st, out, err) = signet_tests::run(pki.signetctl().args(["cert", "revoke", &later_serial]));
    assert!(st.success(), "{out}{err}");
    settle(&probed, "ocsp_later", "down");
    assert_eq!(probed.state("crl_fresh"), "up");

    // The log grows: the next checkpoint is verified consistent with the last from the tiles.
    let chain = serde_json::json!({ "chain": [pem_b64(&good), pem_b64(&issuer)] }).to_string();
    let out = Command::new("curl")
        .args(["-s", "-f", "-X", "POST", "-H", "content-type: application/json", "--data", &chain])
        .arg(format!("{}ct/v1/add-chain", ct.url()))
        .output()
        .unwrap();
    assert!(out.status.success(), "add-chain: {}", String::from_utf8_lossy(&out.stdout));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = probed.check("ct_log");
        let msg = v["last"]["message"].as_str().unwrap_or_default().to_owned();
        if msg.contains("consistent with") {
            assert_eq!(v["state"], "up");
            break;
        }
        assert!(Instant::now() < deadline, "no consistency check: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // kill -9: the CT check remembers the last tree it verified (committed with its result), so
    // the log's next growth is checked for consistency with it after the restart.
    // The log grows while probed is down: the first run after the restart must check it.
    probed.kill9();
    let chain = serde_json::json!({ "chain": [pem_b64(&revoked), pem_b64(&issuer)] }).to_string();
    let out = Command::new("curl")
        .args(["-s", "-f", "-X", "POST", "-H", "content-type: application/json", "--data", &chain])
        .arg(format!("{}ct/v1/add-chain", ct.url()))
        .output()
        .unwrap();
    assert!(out.status.success(), "add-chain: {}", String::from_utf8_lossy(&out.stdout));
    // Three entries: the precertificate, then the two chains.
    wait_for(Duration::from_secs(10), "tree size 3", || {
        String::from_utf8_lossy(&ct.get("checkpoint").1).lines().nth(1) == Some("3")
    });
    probed.spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = probed.check("ct_log");
        if v["last"]["message"].as_str().unwrap_or_default().contains("(+1, consistent with 2 ") {
            break;
        }
        assert!(Instant::now() < deadline, "no consistency check after the restart: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    settle(&probed, "crl_fresh", "up");

    // After the restart each check's gauges come back with its own first run, and the checks run
    // in their own time: wait until every one of them has reported.
    let expected = [
        "probe_ocsp_status{daemon=\"probed\",check=\"ocsp_good\"} 0",
        "probe_ocsp_status{daemon=\"probed\",check=\"ocsp_revoked\"} 1",
        "probe_success{daemon=\"probed\",check=\"crl_stale\"} 0",
        "probe_ct_tree_size{daemon=\"probed\",check=\"ct_log\"} 3",
        "probe_signd_sign_seconds{daemon=\"probed\",check=\"signd\"}",
        "probe_crl_number{daemon=\"probed\",check=\"crl_fresh\"}",
        "probe_ocsp_next_update_seconds{daemon=\"probed\",check=\"ocsp_good\"}",
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, metrics) = probed.get("/metrics");
        let missing: Vec<_> = expected.iter().filter(|line| !metrics.contains(*line)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{missing:?} not in {metrics}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn probed_runs_two_thousand_checks_on_a_few_threads() {
    // Thousands of checks are tasks on one runtime, not threads.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut config = format!(
        "state_dir = {:?}\nlisten = \"127.0.0.1:{port}\"\n[defaults]\ninterval = \"1s\"\njitter = \"1s\"\ntimeout = \"2s\"\n",
        dir.path().join("state")
    );
    for i in 0..2000 {
        config.push_str(&format!("[checks.tcp{i:04}]\nkind = \"tcp\"\naddress = \"127.0.0.1:{target}\"\n"));
    }
    let probed = Probed::start(dir.path(), &config, port);
    wait_for(Duration::from_secs(30), "2000 checks up", || {
        let (_, metrics) = probed.get("/metrics");
        metrics.lines().filter(|l| l.starts_with("probe_state{") && l.ends_with(" 1")).count() == 2000
    });
    let pid = probed.child.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads: usize = status.lines().find_map(|l| l.strip_prefix("Threads:")).unwrap().trim().parse().unwrap();
    assert!(threads < 64, "{threads} threads for 2000 checks");
    let list: Value = serde_json::from_str(&probed.get("/api/checks").1).unwrap();
    assert_eq!(list["checks"].as_array().unwrap().len(), 2000);
}
