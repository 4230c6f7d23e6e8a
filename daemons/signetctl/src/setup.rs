//! `signetctl setup`: a fresh install (scripts/install's commented configs, a
//! running signd) made a working appliance: the CA (the ceremony of `ca init`),
//! the CT log's key, tokend's first token key, signd's roles, issuer and log,
//! and every other daemon's config pointing at the others.
//!
//! Two runs: the first makes the keys, the CA and the configs that need
//! nothing running; signd reads issuers and logs only at start, so it asks for
//! a restart of signd and a start of ocspd. The second issues acmed's TLS
//! certificate (recorded in ocspd like any other) and writes acmed's and
//! probed's configs. Every step checks what exists first, so any run may be
//! interrupted and rerun.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::Args;
use serde_json::json;
use signet_ca::{Eku, Name, SanEntry};
use signet_ipc::{block_on, ErrorKind, KeyAlgorithm, KeySpec, OcspdClient, SigndClient};

use crate::ca::{self, Leaf};
use crate::output::Printer;
use crate::Failure;

/// The first line of each config setup writes: a rerun keeps such a file.
const WRITTEN: &str = "# Written by signetctl setup.";
/// The line scripts/install's commented defaults carry: setup replaces such a file.
const INSTALLED: &str = "Installed by scripts/install";

/// `signetctl setup`.
#[derive(Args)]
pub struct SetupArgs {
    /// The configuration directory: signd.toml (which the running signd reads)
    /// and the other daemons' configs; the CA's certificates go to its ca/.
    #[arg(long, env = "SIGNET_CONFIG_DIR", default_value = "/etc/signet")]
    config_dir: PathBuf,
    /// The parent of the daemons' state directories.
    #[arg(long, default_value = "/var/lib/signet")]
    state_dir: PathBuf,
    /// The directory of the daemons' sockets (signd's is signd.sock there).
    #[arg(long, default_value = "/run/signet")]
    run_dir: PathBuf,
    /// The CA's and the CT log's name (signd's [issuers.NAME] and [logs.NAME]).
    #[arg(long, default_value = "signet")]
    name: String,
    /// Common-name prefix of the CA's subjects.
    #[arg(long, default_value = "Signet")]
    subject: String,
    /// The CA's key algorithm (any signd algorithm).
    #[arg(long, default_value = "ecdsa-p256")]
    algorithm: KeyAlgorithm,
    /// signd backend for every key setup makes (default: signd's first,
    /// OpenSSL; "nss" for an NSS database or a PKCS #11 token, signd's [nss]).
    #[arg(long, default_value = "")]
    backend: String,
    /// The address the daemons listen on.
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    /// The host name the URLs name (OCSP, CRL, CT, tokend's issuer; a SAN of
    /// acmed's TLS certificate, and of tokend's when the host is not a
    /// loopback one). Default: the address.
    #[arg(long)]
    hostname: Option<String>,
    /// ocspd's HTTP port (OCSP and CRLs).
    #[arg(long, default_value_t = 80)]
    ocsp_port: u16,
    /// acmed's HTTPS port.
    #[arg(long, default_value_t = 443)]
    acme_port: u16,
    /// The port acmed validates http-01 on.
    #[arg(long, default_value_t = 80)]
    http01_port: u16,
    /// The port acmed validates tls-alpn-01 on.
    #[arg(long, default_value_t = 443)]
    tlsalpn01_port: u16,
    /// ctlogd's HTTP port.
    #[arg(long, default_value_t = 8090)]
    ct_port: u16,
    /// tokend's HTTP port.
    #[arg(long, default_value_t = 8200)]
    token_port: u16,
    /// tokend's HTTPS port (its `[tls]` listener, tokend-https.socket), its
    /// issuer's port when the host is not a loopback one.
    #[arg(long, default_value_t = 8443)]
    token_tls_port: u16,
    /// probed's HTTP port (status page, /api/checks, /metrics).
    #[arg(long, default_value_t = 8095)]
    probe_port: u16,
    /// The DNS resolver acmed validates through (default: the system's).
    #[arg(long)]
    dns_resolver: Option<std::net::SocketAddr>,
    /// Run every daemon as this one user (name or uid) in signd's roles and
    /// ocspd's registrars: a single-user appliance, for tests and demos.
    /// Default: each daemon its own system user (units/sysusers.d).
    #[arg(long)]
    daemons_as: Option<String>,
}

/// The daemons that call signd, each with its role there (named after it).
const DAEMONS: [&str; 5] = ["acmed", "ocspd", "ctlogd", "tokend", "probed"];

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

fn io(path: &Path, e: std::io::Error) -> Failure {
    fail(1, format!("{}: {e}", path.display()))
}

/// A TOML string.
fn q(s: impl AsRef<str>) -> String {
    toml::Value::String(s.as_ref().to_owned()).to_string()
}

/// A path as a TOML string.
fn qp(p: &Path) -> String {
    q(p.display().to_string())
}

/// A user as TOML: a uid as a number, a name as a string.
fn principal(user: &str) -> String {
    match user.parse::<u32>() {
        Ok(uid) => uid.to_string(),
        Err(_) => q(user),
    }
}

struct Plan<'a> {
    a: &'a SetupArgs,
    etc: PathBuf,
    state: PathBuf,
    run: PathBuf,
    host: String,
    me: u32,
}

impl Plan<'_> {
    fn user(&self, daemon: &str) -> String {
        principal(self.a.daemons_as.as_deref().unwrap_or(daemon))
    }
    fn sock(&self, daemon: &str) -> PathBuf {
        self.run.join(format!("{daemon}.sock"))
    }
    fn url(&self, port: u16) -> String {
        self.origin("http", port)
    }
    /// `scheme://HOST:port`, an IPv6 host in brackets.
    fn origin(&self, scheme: &str, port: u16) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{scheme}://{host}:{port}")
    }
    fn listen(&self, port: u16) -> String {
        q(std::net::SocketAddr::new(self.a.address, port).to_string())
    }
    fn ca(&self, file: &str) -> PathBuf {
        self.etc.join("ca").join(file)
    }
    fn ct_url(&self) -> String {
        format!("{}/{}/", self.url(self.a.ct_port), self.a.name)
    }
    /// A daemon's TLS files: `CONFIG/<daemon>/<file>`.
    fn tls(&self, daemon: &str, file: &str) -> PathBuf {
        self.etc.join(daemon).join(file)
    }
    /// Whether the URLs name a loopback host, where plain HTTP stays on the machine.
    fn loopback(&self) -> bool {
        self.host == "localhost" || IpAddr::from_str(&self.host).is_ok_and(|ip| ip.is_loopback())
    }
    /// tokend's issuer: its HTTP listener on a loopback host; otherwise its
    /// HTTPS listener, as OAuth requires of an issuer clients reach over a network.
    fn token_issuer(&self) -> String {
        if self.loopback() {
            self.url(self.a.token_port)
        } else {
            self.origin("https", self.a.token_tls_port)
        }
    }
}

fn absolute(p: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(p).map_err(|e| io(p, e))
}

/// `signetctl setup`.
pub fn setup(signd: &SigndClient, a: &SetupArgs, out: &Printer) -> Result<(), Failure> {
    let plan = Plan {
        a,
        etc: absolute(&a.config_dir)?,
        state: absolute(&a.state_dir)?,
        run: absolute(&a.run_dir)?,
        host: a.hostname.clone().unwrap_or_else(|| a.address.to_string()),
        me: nix::unistd::getuid().as_raw(),
    };
    let signd_toml = plan.etc.join("signd.toml");
    if !signd_toml.is_file() {
        return Err(fail(2, format!("{}: no signd config (run scripts/install first)", signd_toml.display())));
    }
    let mut done: Vec<String> = Vec::new();

    // 1. The CA, the first time (ca init's ceremony; --reuse-keys finishes an interrupted one).
    if !plan.ca("signd-issuer.toml").is_file() {
        let init = ca::InitArgs {
            name: a.name.clone(),
            dir: plan.etc.join("ca"),
            algorithm: a.algorithm,
            root_algorithm: None,
            responder_algorithm: None,
            backend: a.backend.clone(),
            subject: a.subject.clone(),
            ocsp_url: Some(format!("{}/ocsp", plan.url(a.ocsp_port))),
            crl_url: Some(format!("{}/crl/{}/{{shard}}.crl", plan.url(a.ocsp_port), a.name)),
            crl_shards: 4,
            max_days: 90,
            role: "admin".into(),
            issuer_roles: vec!["acmed".into(), "admin".into()],
            ocsp_roles: vec!["ocspd".into()],
            reuse_keys: true,
        };
        let made = ca::ceremony(signd, &init)?;
        done.push(format!(
            "CA `{}`: keys {} in signd, certificates in {}",
            a.name,
            made.keys.join(", "),
            made.dir.display()
        ));
    }

    // 2. The CT log's key (ECDSA P-256, RFC 6962) and tokend's first token key (ES256, its role).
    let ct_key = key(signd, &format!("{}-ct", a.name), vec![], &a.backend, &mut done)?;
    key(signd, &format!("{}-token-es256", a.name), vec!["tokend".into()], &a.backend, &mut done)?;

    // 3. signd's config: the daemons' roles, the issuer, the log (appended, the file kept whole).
    let restart = signd_sections(&plan, &signd_toml, &mut done)?;

    // 4. The configs that need nothing running.
    config(&plan, "ocspd", &ocspd_toml(&plan), &mut done)?;
    config(&plan, "ctlogd", &ctlogd_toml(&plan), &mut done)?;
    if plan.loopback() {
        config(&plan, "tokend", &tokend_toml(&plan), &mut done)?;
    }

    // 5. Does the running signd serve the issuer yet? It reads issuers and logs at start.
    let mut next = Vec::new();
    let serving = match block_on(signd.issuer_certificate(&a.name)) {
        Ok(_) => !restart,
        Err(e) if e.kind == ErrorKind::InvalidArgument || e.kind == ErrorKind::NotFound => false,
        Err(e) => return Err(e.into()),
    };
    if !serving {
        next.push(format!(
            "restart signd (systemctl restart signd.service) so it loads [issuers.{0}] and [logs.{0}], start ocspd, \
             then run `signetctl setup` again with the same arguments",
            a.name
        ));
    } else {
        // 6. acmed's TLS certificate from the CA (recorded in ocspd: ocspd must run), and
        // tokend's when its issuer is an https URL.
        // acmed.service loads its key as a credential. tokend's [tls] is optional (a credential
        // systemd cannot find fails the unit), so its system group reads the key file instead.
        tls_certificate(&plan, signd, "acmed", None, &mut done)?;
        if !plan.loopback() {
            let group = if a.daemons_as.is_none() { Some("tokend") } else { None };
            tls_certificate(&plan, signd, "tokend", group, &mut done)?;
            config(&plan, "tokend", &tokend_toml(&plan), &mut done)?;
        }
        let ct_spki = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &ct_key);
        let ctlogd_path = plan.etc.join("ctlogd.toml");
        let ctlogd = std::fs::read_to_string(&ctlogd_path).map_err(|e| io(&ctlogd_path, e))?;
        let window = log_window(&ctlogd, &a.name);
        config(&plan, "acmed", &acmed_toml(&plan, &ct_spki, window), &mut done)?;
        config(&plan, "probed", &probed_toml(&plan, &ct_spki), &mut done)?;
        next.push("start (or restart) ctlogd, acmed, tokend and probed (systemctl enable --now signet.target)".into());
    }
    let complete = serving;
    if out.json {
        out.json(&json!({
            "complete": complete,
            "done": done,
            "next": next,
            "config_dir": plan.etc,
            "acme_directory": format!("https://{}:{}/directory", plan.host, a.acme_port),
            "ocsp_url": format!("{}/ocsp", plan.url(a.ocsp_port)),
            "ct_url": plan.ct_url(),
            "token_issuer": plan.token_issuer(),
            "probed_url": plan.url(a.probe_port),
        }));
    } else {
        for d in &done {
            outln!("done: {d}");
        }
        for n in &next {
            outln!("next: {n}");
        }
        if complete {
            outln!("setup complete: configs in {}", plan.etc.display());
        }
    }
    Ok(())
}

/// Key `id` in signd, generated the first time; its SubjectPublicKeyInfo.
fn key(
    signd: &SigndClient,
    id: &str,
    roles: Vec<String>,
    backend: &str,
    done: &mut Vec<String>,
) -> Result<Vec<u8>, Failure> {
    if let Some(k) = ca::existing_key(signd, id)? {
        return Ok(k.spki);
    }
    let spec = KeySpec { id: id.to_owned(), algorithm: KeyAlgorithm::EcP256, roles, backend: backend.to_owned() };
    let k = block_on(signd.generate_key(spec))?;
    done.push(format!("key {id} ({}) in signd, backend {}", k.algorithm.name(), k.backend));
    Ok(k.spki)
}

/// Appends to signd's config the sections it lacks; whether signd must restart.
fn signd_sections(plan: &Plan<'_>, path: &Path, done: &mut Vec<String>) -> Result<bool, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let table: toml::Table = text.parse().map_err(|e| fail(2, format!("{}: {e}", path.display())))?;
    let has =
        |section: &str, name: &str| table.get(section).and_then(|t| t.as_table()).is_some_and(|t| t.contains_key(name));
    let name = &plan.a.name;
    let mut add = String::new();
    for d in DAEMONS {
        if has("roles", d) {
            continue;
        }
        add.push_str(&format!("\n# {d}'s role, added by signetctl setup.\n[roles.{d}]\nusers = [{}]\n", plan.user(d)));
        if d == "tokend" {
            // It signs JWS signing inputs with the keys that name the role, nothing else.
            add.push_str("operations = [\"sign-jws\", \"list\", \"public-key\"]\n");
        }
    }
    let mut restart = false;
    if !has("issuers", name) {
        let snippet = plan.ca("signd-issuer.toml");
        let issuer = std::fs::read_to_string(&snippet).map_err(|e| io(&snippet, e))?;
        add.push_str(&format!("\n# The CA, added by signetctl setup.\n{issuer}"));
        restart = true;
    }
    if !has("logs", name) {
        add.push_str(&format!(
            "\n# The CT log, added by signetctl setup: its key signs only SCTs and tree heads.\n[logs.{name}]\nkey = {}\nroles = [\"ctlogd\"]\n",
            q(format!("{name}-ct"))
        ));
        restart = true;
    }
    if add.is_empty() {
        return Ok(false);
    }
    let mut whole = text;
    if !whole.ends_with('\n') {
        whole.push('\n');
    }
    whole.push_str(&add);
    whole
        .parse::<toml::Table>()
        .map_err(|e| fail(1, format!("{}: the sections to add do not parse: {e}", path.display())))?;
    ca::write_file_atomic(path, whole.as_bytes())?;
    done.push(format!("{}: roles, [issuers.{name}], [logs.{name}]", path.display()));
    Ok(restart)
}

/// Writes a daemon's config unless one is there that is not scripts/install's default.
fn config(plan: &Plan<'_>, daemon: &str, body: &str, done: &mut Vec<String>) -> Result<(), Failure> {
    let path = plan.etc.join(format!("{daemon}.toml"));
    match std::fs::read_to_string(&path) {
        Ok(old) if !old.contains(INSTALLED) => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&path, e)),
    }
    let text = format!("{WRITTEN} A rerun keeps it; see docs/{daemon}.md.\n{body}");
    ca::write_file_atomic(&path, text.as_bytes())?;
    done.push(format!("{} written", path.display()));
    Ok(())
}

fn ocspd_toml(p: &Plan<'_>) -> String {
    format!(
        "socket = {}\nstate_dir = {}\nsignd_socket = {}\nlisten = {}\n\n\
         # Who may record and revoke the CA's certificates: acmed and you.\n[issuers.{}]\nregistrars = {{ users = [{}, {}] }}\n",
        qp(&p.sock("ocspd")),
        qp(&p.state.join("ocspd")),
        qp(&p.sock("signd")),
        p.listen(p.a.ocsp_port),
        p.a.name,
        p.user("acmed"),
        p.me,
    )
}

/// The first log's NotAfter window: from this year's 1 January to that of the
/// year after next, so it takes every certificate issued for a year at least.
/// Its successor is added while it runs (`signetctl ct shard add`).
fn first_log_window(year: i32) -> (String, String) {
    (format!("{year}-01-01T00:00:00Z"), format!("{}-01-01T00:00:00Z", year + 2))
}

/// The window of log `name` in the ctlogd config in place (written by the first
/// run, or the operator's), for acmed's `[[ct.logs]]`: none if it has none.
fn log_window(ctlogd_toml: &str, name: &str) -> Option<(String, String)> {
    let table: toml::Table = toml::from_str(ctlogd_toml).ok()?;
    let log = table.get("logs")?.get(name)?;
    let bound = |key: &str| log.get(key)?.as_str().map(str::to_owned);
    Some((bound("not_after_start")?, bound("not_after_end")?))
}

fn ctlogd_toml(p: &Plan<'_>) -> String {
    let (start, end) = first_log_window(time::OffsetDateTime::now_utc().year());
    format!(
        "state_dir = {}\nsignd_socket = {}\nlisten = {}\n# The logs' URLs and checkpoint origins name the host.\npublic_url = {}\n\
         # signetctl ct shard ...\nadmin_socket = {}\n\
         # Chains to the CA's root.\nroots = [{}]\n\n\
         # A temporal shard: it takes the certificates whose NotAfter is in [start, end).\n\
         [logs.{name}]\ndescription = {}\nstorage = {{ dir = {} }}\n\
         not_after_start = {}\nnot_after_end = {}\n",
        qp(&p.state.join("ctlogd").join("db")),
        qp(&p.sock("signd")),
        p.listen(p.a.ct_port),
        q(p.url(p.a.ct_port)),
        qp(&p.sock("ctlogd")),
        qp(&p.ca("root.pem")),
        q(format!("{} log", p.a.subject)),
        qp(&p.state.join("ctlogd").join(&p.a.name)),
        q(start),
        q(end),
        name = p.a.name,
    )
}

fn tokend_toml(p: &Plan<'_>) -> String {
    let mut s = format!(
        "issuer = {}\nlisten = {}\nstate_dir = {}\nsignd_socket = {}\nsignd_role = \"tokend\"\nadmin_socket = {}\n",
        q(p.token_issuer()),
        p.listen(p.a.token_port),
        qp(&p.state.join("tokend").join("db")),
        qp(&p.sock("signd")),
        qp(&p.sock("tokend")),
    );
    if !p.loopback() {
        // The issuer's listener; the HTTP one stays on the address for the machine's own clients.
        s.push_str(&format!(
            "\n[tls]\nlisten = {}\ncertificate = {}\nkey = {}\n",
            p.listen(p.a.token_tls_port),
            qp(&p.tls("tokend", "tls-chain.pem")),
            qp(&p.tls("tokend", "tls-key.pem")),
        ));
    }
    s
}

fn acmed_toml(p: &Plan<'_>, ct_spki: &str, ct_window: Option<(String, String)>) -> String {
    // Under systemd, acmed.service hands the key over as a credential.
    let key = match p.a.daemons_as {
        Some(_) => p.tls("acmed", "tls-key.pem"),
        None => PathBuf::from("/run/credentials/acmed.service/tls-key"),
    };
    let resolver = p.a.dns_resolver.map(|r| format!("dns_resolver = {}\n", q(r.to_string()))).unwrap_or_default();
    let window = ct_window
        .map(|(start, end)| format!("not_after_start = {}\nnot_after_end = {}\n", q(start), q(end)))
        .unwrap_or_default();
    format!(
        "state_dir = {}\nsignd_socket = {}\nocspd_socket = {}\nissuer = {}\nlisten = {}\n\
         tls_certificate = {}\ntls_key = {}\nchain = {}\nhttp01_port = {}\ntlsalpn01_port = {}\n{resolver}\
         admin_socket = {}\n\n\
         # Every certificate carries an SCT from the CT log.\n[ct]\nmin_scts = 1\n[[ct.logs]]\nurl = {}\npublic_key = {}\n{window}",
        qp(&p.state.join("acmed").join("db")),
        qp(&p.sock("signd")),
        qp(&p.sock("ocspd")),
        q(&p.a.name),
        p.listen(p.a.acme_port),
        qp(&p.tls("acmed", "tls-chain.pem")),
        qp(&key),
        qp(&p.ca("chain.pem")),
        p.a.http01_port,
        p.a.tlsalpn01_port,
        qp(&p.sock("acmed")),
        q(p.ct_url()),
        q(ct_spki),
    )
}

fn probed_toml(p: &Plan<'_>, ct_spki: &str) -> String {
    let acme = format!(
        "https://{}:{}",
        if p.host.contains(':') { format!("[{}]", p.host) } else { p.host.clone() },
        p.a.acme_port
    );
    let root = qp(&p.ca("root.pem"));
    let issuing = qp(&p.ca("issuing.pem"));
    let name = &p.a.name;
    let health = |d: &str, base: String| {
        format!(
            "[checks.{d}]\nkind = \"http\"\ndescription = \"{d} /healthz\"\nurl = {}\nexpect_body = \"ok\"\n\n",
            q(format!("{base}/healthz"))
        )
    };
    let mut s = format!(
        "state_dir = {}\nlisten = {}\n\n[defaults]\ninterval = \"10s\"\ntimeout = \"5s\"\njitter = \"1s\"\ndown_after = 2\n\n",
        qp(&p.state.join("probed").join("db")),
        p.listen(p.a.probe_port),
    );
    s.push_str(&format!(
        "[checks.signd]\nkind = \"signd\"\ndescription = \"signd health over its socket\"\nsocket = {}\n\n",
        qp(&p.sock("signd"))
    ));
    s.push_str(&health("ocspd", p.url(p.a.ocsp_port)));
    s.push_str(&health("ctlogd", p.url(p.a.ct_port)));
    s.push_str(&health("tokend", p.url(p.a.token_port)));
    s.push_str(&format!(
        "[checks.acmed]\nkind = \"http\"\ndescription = \"acmed /healthz over HTTPS\"\nurl = {}\nca_file = {root}\nexpect_body = \"ok\"\n\n",
        q(format!("{acme}/healthz"))
    ));
    s.push_str(&format!(
        "[checks.acmed_tls]\nkind = \"tls\"\ndescription = \"acmed's TLS certificate\"\naddress = {}\nserver_name = {}\nca_file = {root}\nmin_days = 7\n\n",
        p.listen(p.a.acme_port),
        q(&p.host),
    ));
    s.push_str(&format!(
        "[checks.{name}_ocsp]\nkind = \"ocsp\"\ndescription = \"OCSP status of acmed's TLS certificate (responder from its AIA)\"\ncertificate = {}\nissuer = {issuing}\nmin_margin = \"5m\"\n\n",
        qp(&p.tls("acmed", "tls.pem")),
    ));
    s.push_str(&format!(
        "[checks.{name}_crl]\nkind = \"crl\"\ndescription = \"the CA's full CRL\"\nurl = {}\nissuer = {issuing}\nmin_margin = \"5m\"\n\n",
        q(format!("{}/crl/{name}.crl", p.url(p.a.ocsp_port))),
    ));
    s.push_str(&format!(
        "[checks.{name}_ct]\nkind = \"ct\"\ndescription = \"the CT log's checkpoint\"\nurl = {}\npublic_key = {}\nmax_age = \"5m\"\n",
        q(p.ct_url()),
        q(ct_spki),
    ));
    s
}

/// A daemon's TLS key (made here: a transport key, not a CA key) and its
/// certificate from the CA, for the host name and the address, in
/// `CONFIG/<daemon>/`. tls-chain.pem is written last: until it exists, a rerun
/// makes them again. With `key_group`, the key (and its directory) are that
/// group's to read.
fn tls_certificate(
    p: &Plan<'_>,
    signd: &SigndClient,
    daemon: &str,
    key_group: Option<&str>,
    done: &mut Vec<String>,
) -> Result<(), Failure> {
    let chain = p.tls(daemon, "tls-chain.pem");
    if chain.is_file() {
        return Ok(());
    }
    let dir = p.etc.join(daemon);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let ossl = |e: openssl::error::ErrorStack| fail(1, format!("making {daemon}'s TLS key: {e}"));
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).map_err(ossl)?;
    let ec = openssl::ec::EcKey::generate(&group).map_err(ossl)?;
    let pkey = openssl::pkey::PKey::from_ec_key(ec).map_err(ossl)?;
    let key_pem = pkey.private_key_to_pem_pkcs8().map_err(ossl)?;
    let spki = pkey.public_key_to_der().map_err(ossl)?;
    let key_path = p.tls(daemon, "tls-key.pem");
    write_private(&key_path, &key_pem)?;
    if let Some(group) = key_group {
        let gid = nix::unistd::Group::from_name(group)
            .ok()
            .flatten()
            .ok_or_else(|| fail(2, format!("no group {group}: run systemd-sysusers first (docs/operations.md)")))?
            .gid;
        use std::os::unix::fs::PermissionsExt;
        for (path, mode) in [(&dir, 0o750), (&key_path, 0o640)] {
            nix::unistd::chown(path.as_path(), None, Some(gid)).map_err(|e| io(path, e.into()))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| io(path, e))?;
        }
    }
    let mut sans = vec![SanEntry::Ip(p.a.address)];
    match IpAddr::from_str(&p.host) {
        Ok(ip) if ip == p.a.address => {}
        Ok(ip) => sans.push(SanEntry::Ip(ip)),
        Err(_) => sans.push(SanEntry::Dns(p.host.clone())),
    }
    let subject =
        Name::from_str(&format!("CN={}", p.host)).map_err(|e| fail(2, format!("host name {:?}: {e}", p.host)))?;
    let leaf = Leaf { subject, spki_der: spki, sans, days: None, ekus: Some(vec![Eku::ServerAuth]) };
    let ocspd = OcspdClient::new(p.sock("ocspd")).per_thread();
    let ca::Issued { der, serial, .. } = ca::issue(signd, &ocspd, &p.a.name, leaf)?;
    let leaf_pem = ca::cert_pem(&der);
    ca::write_file_atomic(&p.tls(daemon, "tls.pem"), leaf_pem.as_bytes())?;
    let issuing_path = p.ca("issuing.pem");
    let issuing = std::fs::read_to_string(&issuing_path).map_err(|e| io(&issuing_path, e))?;
    ca::write_file_atomic(&chain, format!("{leaf_pem}{issuing}").as_bytes())?;
    done.push(format!("{daemon}'s TLS certificate (serial {}) in {}", hex::encode(serial), chain.display()));
    Ok(())
}

/// A private key file, readable by its owner only, written whole.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut f =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_log_takes_a_year_of_certificates_whenever_setup_runs() {
        assert_eq!(first_log_window(2026), ("2026-01-01T00:00:00Z".to_owned(), "2028-01-01T00:00:00Z".to_owned()));
    }

    #[test]
    fn acmed_gets_the_window_of_the_log_in_ctlogds_config() {
        let strings =
            "[logs.signet]\nnot_after_start = \"2026-01-01T00:00:00Z\"\nnot_after_end = \"2028-01-01T00:00:00Z\"\n";
        let want = Some(("2026-01-01T00:00:00Z".to_owned(), "2028-01-01T00:00:00Z".to_owned()));
        assert_eq!(log_window(strings, "signet"), want);
        // Another log's window, no window, half a window or no config: none.
        assert_eq!(log_window(strings, "other"), None);
        assert_eq!(log_window("[logs.signet]\ndescription = \"x\"\n", "signet"), None);
        assert_eq!(log_window("[logs.signet]\nnot_after_start = \"2026-01-01T00:00:00Z\"\n", "signet"), None);
        assert_eq!(log_window("not toml [", "signet"), None);
    }
}
