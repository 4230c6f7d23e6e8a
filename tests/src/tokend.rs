//! A real tokend for tests: a `tokend` role in signd (`sign-jws`, `list`,
//! `public-key`), a token key under it, and tokend on a free loopback port,
//! managed through `signetctl oauth`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pki::free_port;
use crate::{bin, run, SigndProcess};

/// The signd config text giving the test user the `tokend` role.
pub fn signd_role() -> String {
    let uid = nix::unistd::getuid().as_raw();
    format!("[roles.tokend]\nusers = [{uid}]\noperations = [\"sign-jws\", \"list\", \"public-key\"]\n")
}

/// A running tokend.
pub struct Tokend {
    /// tokend, while running.
    pub child: Option<Child>,
    /// Its HTTP port.
    pub port: u16,
    /// Its config file.
    pub config: PathBuf,
    /// Its admin socket.
    pub admin_socket: PathBuf,
    /// signd's socket.
    pub signd_socket: PathBuf,
    log_file: PathBuf,
}

/// A client as `signetctl oauth client create` printed it.
#[derive(Clone, Debug)]
pub struct OauthClient {
    /// The client id.
    pub id: String,
    /// The secret, for secret-holding clients.
    pub secret: String,
}

impl Tokend {
    /// Generates key `key_id` (`algorithm`, a signetctl algorithm name) for the
    /// `tokend` role in `signd` (which must have been started with
    /// [`signd_role`]), then starts tokend in `dir` with `extra` appended to
    /// its config (`[tokens]` settings).
    pub fn start(signd: &SigndProcess, dir: &Path, key_id: &str, algorithm: &str, extra: &str) -> Tokend {
        let mut t = Tokend::configure(signd, dir, key_id, algorithm, extra);
        t.spawn();
        t
    }

    /// [`Tokend::start`] without starting it: the key made, the config written.
    pub fn configure(signd: &SigndProcess, dir: &Path, key_id: &str, algorithm: &str, extra: &str) -> Tokend {
        let (st, out, err) = run(crate::signetctl(&signd.socket).args([
            "key",
            "generate",
            key_id,
            "--algorithm",
            algorithm,
            "--role",
            "tokend",
        ]));
        assert!(st.success(), "key generate: {out}{err}");
        let port = free_port();
        let config = dir.join("tokend.toml");
        let admin_socket = dir.join("tokend-admin.sock");
        std::fs::write(
            &config,
            format!(
                "issuer = \"http://127.0.0.1:{port}\"\nlisten = \"127.0.0.1:{port}\"\nstate_dir = {:?}\n\
                 signd_socket = {:?}\nadmin_socket = {admin_socket:?}\n{extra}",
                dir.join("tokend-db"),
                signd.socket,
            ),
        )
        .unwrap();
        Tokend {
            child: None,
            port,
            config,
            admin_socket,
            signd_socket: signd.socket.clone(),
            log_file: dir.join("tokend.log"),
        }
    }

    /// Starts the process and waits until `/healthz` answers 200 (a signing key is ready).
    pub fn spawn(&mut self) {
        let mut cmd = Command::new(bin("tokend"));
        cmd.arg("--config").arg(&self.config);
        self.spawn_command(cmd);
    }

    /// Starts tokend as systemd starts tokend.service: through
    /// `systemd-socket-activate`, which binds its HTTP port, its admin socket
    /// and `extra` (`(name, address)`: `ip:port` or a path) and passes them
    /// by name (`LISTEN_FDNAMES`: tokend-http, tokend-admin, then `extra`'s).
    /// Waits as [`Tokend::spawn`] does (its first connection starts tokend).
    pub fn spawn_activated(&mut self, extra: &[(&str, String)]) {
        let mut names = vec!["tokend-http".to_owned(), "tokend-admin".to_owned()];
        let mut cmd = Command::new("systemd-socket-activate");
        cmd.arg("-l").arg(format!("127.0.0.1:{}", self.port)).arg("-l").arg(&self.admin_socket);
        for (name, address) in extra {
            cmd.arg("-l").arg(address);
            names.push((*name).to_owned());
        }
        cmd.arg(format!("--fdname={}", names.join(":")));
        cmd.arg(bin("tokend")).arg("--config").arg(&self.config);
        self.spawn_command(cmd);
    }

    fn spawn_command(&mut self, mut cmd: Command) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_file).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.get("/healthz").0 == 200 {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                panic!("tokend exited with {st}: {}", self.log());
            }
            assert!(Instant::now() < deadline, "tokend did not become ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// tokend's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The issuer identifier.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET path` with curl: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        curl(&[&self.url(path)])
    }

    /// `POST path` with a form body and extra curl arguments: (status, body).
    pub fn post(&self, path: &str, form: &str, extra: &[&str]) -> (u16, String) {
        let mut args =
            vec!["-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary", form];
        args.extend_from_slice(extra);
        let url = self.url(path);
        args.push(&url);
        curl(&args)
    }

    /// `signetctl` aimed at this tokend and its signd.
    pub fn signetctl(&self) -> Command {
        let mut c = crate::signetctl(&self.signd_socket);
        c.env("SIGNET_TOKEND_SOCKET", &self.admin_socket);
        c
    }

    /// Creates a client with `signetctl --json oauth client create ID ARGS...`.
    pub fn create_client(&self, id: &str, args: &[&str]) -> OauthClient {
        let (st, out, err) = run(self.signetctl().args(["--json", "oauth", "client", "create", id]).args(args));
        assert!(st.success(), "oauth client create {id}: {out}{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        OauthClient {
            id: v["client_id"].as_str().unwrap_or(id).to_owned(),
            secret: v["secret"].as_str().unwrap_or("").to_owned(),
        }
    }

    /// SIGKILL, waited for.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Tokend {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// tokend's mTLS listener for a test: a self-signed P-256 certificate for
/// 127.0.0.1 made with the openssl tool in `dir`, a free port, and
/// `client_ca` as `client_ca_file`. Answers the `[tls]` table (for
/// [`Tokend::start`]'s `extra`), the port, and the certificate curl is to
/// trust (`--cacert`).
pub fn tls_table(dir: &Path, client_ca: Option<&Path>) -> (String, u16, PathBuf) {
    let (cert, key) = (dir.join("tokend-tls.pem"), dir.join("tokend-tls.key"));
    let (st, _, err) = run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    assert!(st.success(), "{err}");
    let port = free_port();
    let mut table = format!("[tls]\nlisten = \"127.0.0.1:{port}\"\ncertificate = {cert:?}\nkey = {key:?}\n");
    if let Some(ca) = client_ca {
        table.push_str(&format!("client_ca_file = {ca:?}\n"));
    }
    (table, port, cert)
}

/// curl with `args`: (status, body). Never fails on HTTP errors.
pub fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// The value of hidden field `name` in an HTML form, unescaped.
pub fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no field {name} in {html}")) + marker.len();
    let end = start + html[start..].find('"').unwrap();
    html[start..end]
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A browser: curl with a cookie jar. (status, body, Location).
pub fn browse(jar: &Path, url: &str, form: Option<&[(&str, &str)]>) -> (u16, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-b"]).arg(jar).arg("-c").arg(jar).args(["-o", "-", "-w", "\n%{http_code} %{redirect_url}"]);
    if let Some(f) = form {
        let body: String = form_urlencoded::Serializer::new(String::new()).extend_pairs(f.iter()).finish();
        cmd.args(["--data-binary", &body, "-H", "Content-Type: application/x-www-form-urlencoded"]);
    }
    let out = cmd.arg(url).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap();
    let (code, loc) = tail.split_once(' ').unwrap_or((tail, ""));
    (code.parse().unwrap(), body.to_owned(), loc.trim().to_owned())
}

/// A directory served over plain HTTP on a free loopback port by a real web
/// server (`python3 -m http.server`), which logs each request: a client's
/// `jwks_uri`, whose fetches a test counts.
pub struct StaticSite {
    child: Child,
    /// The directory served.
    pub root: PathBuf,
    /// Its port.
    pub port: u16,
    log_file: PathBuf,
}

impl StaticSite {
    /// Serves `dir/site` (made here) until dropped.
    pub fn start(dir: &Path) -> StaticSite {
        let root = dir.join("site");
        std::fs::create_dir_all(&root).unwrap();
        let (port, log_file) = (free_port(), dir.join("site.log"));
        let log = std::fs::File::create(&log_file).unwrap();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(&root)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut site = StaticSite { child, root, port, log_file };
        std::fs::write(site.root.join(".ready"), "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while curl(&[&site.url(".ready")]).0 != 200 {
            assert!(site.child.try_wait().unwrap().is_none(), "python3 -m http.server exited: {}", site.log());
            assert!(Instant::now() < deadline, "python3 -m http.server did not answer: {}", site.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        site
    }

    /// The URL of `name` in the directory.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// The server's request log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// How many times `name` was fetched (`GET /name`) so far.
    pub fn fetches(&self, name: &str) -> usize {
        self.log().matches(&format!("\"GET /{name} HTTP/1.1\"")).count()
    }

    /// Stops the server (SIGKILL, waited for).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for StaticSite {
    fn drop(&mut self) {
        self.stop();
    }
}
