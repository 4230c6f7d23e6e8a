//! tokend with an LDAP directory as its user source: a real OpenLDAP slapd
//! (Debian's `slapd`, its own cn=config and mdb database on a temp dir, on
//! loopback), loaded with `ldapadd`; the sign-in page driven with curl.
//! A directory user signs in (bound as itself), its ID token carries the
//! directory's name, email and groups; a wrong password is refused; a local
//! user of the same name wins; `group:<g>` scopes need membership; with
//! slapd killed the sign-in is a 503 and tokend stays up. Over TLS: ldaps://
//! and StartTLS with `ca_file`, and an untrusted certificate is a 503.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;
use signet_jose::jwt::{verify_jwt, Validation};
use signet_jose::Jwks;
use signet_tests::pki::free_port;
use signet_tests::tokend::{browse, field, signd_role, Tokend};
use signet_tests::{run, SigndProcess};

const SLAPD: &str = "/usr/sbin/slapd";
const SUFFIX: &str = "dc=example,dc=net";

/// A slapd of the test's own on loopback.
struct Slapd {
    child: Option<Child>,
    port: u16,
    /// Its ldaps:// port, when it has TLS.
    tls_port: Option<u16>,
}

impl Slapd {
    /// slapd on `ldap://127.0.0.1:port`; with `tls`, also on ldaps:// and with
    /// StartTLS, its certificate (for IP 127.0.0.1) issued by `dir/ldap-ca.pem`.
    fn start(dir: &Path, tls: bool) -> Slapd {
        for tool in [SLAPD, "/usr/sbin/slapadd", "/usr/sbin/slappasswd", "/usr/bin/ldapadd"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: this test needs Debian's slapd and ldap-utils (scripts/test installs them)"
            );
        }
        let conf = dir.join("slapd.d");
        let data = dir.join("ldap-data");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let tls_config = if tls { tls_files(dir) } else { String::new() };
        let config = format!(
            "dn: cn=config\nobjectClass: olcGlobal\ncn: config\nolcPidFile: {pid}\n{tls_config}\n\
             dn: cn=module{{0}},cn=config\nobjectClass: olcModuleList\ncn: module{{0}}\n\
             olcModulePath: /usr/lib/ldap\nolcModuleLoad: back_mdb\n\n\
             dn: cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: schema\n\n\
             include: file:///etc/ldap/schema/core.ldif\n\n\
             include: file:///etc/ldap/schema/cosine.ldif\n\n\
             include: file:///etc/ldap/schema/inetorgperson.ldif\n\n\
             dn: olcDatabase={{-1}}frontend,cn=config\nobjectClass: olcDatabaseConfig\n\
             objectClass: olcFrontendConfig\nolcDatabase: {{-1}}frontend\n\n\
             dn: olcDatabase={{0}}config,cn=config\nobjectClass: olcDatabaseConfig\nolcDatabase: {{0}}config\n\
             olcAccess: {{0}}to * by * none\n\n\
             dn: olcDatabase={{1}}mdb,cn=config\nobjectClass: olcDatabaseConfig\nobjectClass: olcMdbConfig\n\
             olcDatabase: {{1}}mdb\nolcSuffix: {SUFFIX}\nolcRootDN: cn=admin,{SUFFIX}\nolcRootPW: {root}\n\
             olcDbDirectory: {data}\nolcDbMaxSize: 10485760\n\
             olcAccess: {{0}}to attrs=userPassword by anonymous auth by self write by * none\n\
             olcAccess: {{1}}to * by users read by * none\n",
            pid = dir.join("slapd.pid").display(),
            root = slappasswd("admin secret"),
            data = data.display(),
        );
        let ldif = dir.join("config.ldif");
        std::fs::write(&ldif, config).unwrap();
        let (st, out, err) = run(Command::new("/usr/sbin/slapadd").args(["-n0", "-F"]).arg(&conf).arg("-l").arg(&ldif));
        assert!(st.success(), "slapadd: {out}{err}");
        let mut s = Slapd { child: None, port: free_port(), tls_port: tls.then(free_port) };
        s.spawn(&conf);
        s
    }

    fn spawn(&mut self, conf: &Path) {
        // -d 0: in the foreground (a child the test can kill), no debug output.
        let mut urls = format!("ldap://127.0.0.1:{}/", self.port);
        if let Some(p) = self.tls_port {
            urls.push_str(&format!(" ldaps://127.0.0.1:{p}/"));
        }
        let child = Command::new(SLAPD)
            .args(["-d", "0", "-h", &urls, "-F"])
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                panic!("slapd exited with {st}");
            }
            assert!(Instant::now() < deadline, "slapd did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    fn add(&self, ldif: &str, dir: &Path) {
        let file = dir.join("add.ldif");
        std::fs::write(&file, ldif).unwrap();
        let (st, out, err) = run(Command::new("ldapadd")
            .args(["-x", "-H", &self.url(), "-D", &format!("cn=admin,{SUFFIX}"), "-w", "admin secret", "-f"])
            .arg(&file));
        assert!(st.success(), "ldapadd: {out}{err}");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A CA and slapd's certificate and key, made with the openssl command: the
/// cn=config lines naming them.
fn tls_files(dir: &Path) -> String {
    let (ca, ca_key, cert, key) =
        (dir.join("ldap-ca.pem"), dir.join("ldap-ca.key"), dir.join("slapd.pem"), dir.join("slapd.key"));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"];
    let (st, _, err) = run(Command::new("openssl")
        .args(["req", "-x509"])
        .args(ec)
        .args(["-subj", "/CN=Test LDAP CA", "-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout"])
        .arg(&ca_key)
        .arg("-out")
        .arg(&ca));
    assert!(st.success(), "openssl: {err}");
    let (st, _, err) = run(Command::new("openssl")
        .args(["req", "-x509"])
        .args(ec)
        .args(["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-CA"])
        .arg(&ca)
        .arg("-CAkey")
        .arg(&ca_key)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    assert!(st.success(), "openssl: {err}");
    format!(
        "olcTLSCACertificateFile: {}\nolcTLSCertificateFile: {}\nolcTLSCertificateKeyFile: {}\n",
        ca.display(),
        cert.display(),
        key.display()
    )
}

/// `{SSHA}` of `password`, as slapd stores it.
fn slappasswd(password: &str) -> String {
    let (st, out, err) = run(Command::new("/usr/sbin/slappasswd").args(["-s", password]));
    assert!(st.success(), "slappasswd: {err}");
    out.trim().to_owned()
}

fn directory_ldif() -> String {
    let user = |uid: &str, cn: &str, password: &str| {
        format!(
            "dn: uid={uid},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {cn}\nsn: {cn}\n\
             mail: {uid}@example.net\nuserPassword: {}\n\n",
            slappasswd(password)
        )
    };
    let group = |cn: &str, members: &[&str]| {
        let mut g = format!("dn: cn={cn},ou=groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: {cn}\n");
        for m in members {
            g.push_str(&format!("member: uid={m},ou=people,{SUFFIX}\n"));
        }
        g + "\n"
    };
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example\n\n\
         dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n{}{}{}{}{}{}",
        user("carol", "Carol Directory", "carol's ldap password"),
        user("dave", "Dave Directory", "dave's ldap password"),
        group("engineers", &["carol", "dave"]),
        group("ops", &["carol"]),
        // Not a group name tokend accepts (a space): left out of the claims.
        group("Domain Users", &["carol"]),
        group("payroll", &["dave"]),
    )
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url).unwrap().query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

#[test]
fn directory_users_sign_in_by_binding_and_a_dead_directory_is_a_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut slapd = Slapd::start(dir.path(), false);
    slapd.add(&directory_ldif(), dir.path());
    let signd = SigndProcess::start(&signd_role());
    let ldap = format!(
        "[ldap]\nurl = \"{}\"\nuser_dn = \"uid={{user}},ou=people,{SUFFIX}\"\nbase_dn = \"ou=groups,{SUFFIX}\"\n\
         timeout_ms = 2000\n",
        slapd.url()
    );
    let t = Tokend::start(&signd, dir.path(), "tok-es256", "ecdsa-p256", &ldap);

    // dave is also a local user: the local one wins, the directory's password does nothing for it.
    let mut cmd = t.signetctl();
    cmd.args(["oauth", "user", "create", "dave", "--password-stdin"]);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"dave's local password\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let redirect = "http://127.0.0.1:9/cb";
    let c = t.create_client(
        "web",
        &[
            "--auth-method",
            "none",
            "--grant-type",
            "authorization_code",
            "--scope",
            "openid",
            "--scope",
            "profile",
            "--scope",
            "email",
            "--scope",
            "groups",
            "--scope",
            "group:ops",
            "--scope",
            "group:payroll",
            "--audience",
            "api",
            "--redirect-uri",
            redirect,
        ],
    );
    let verifier = "v".repeat(50);
    let challenge = URL_SAFE_NO_PAD.encode(openssl::sha::sha256(verifier.as_bytes()));
    let authorize_for = |scope: &str| {
        t.url(&format!(
            "/authorize?response_type=code&client_id={}&redirect_uri={}&scope={scope}&state=s\
             &nonce=n&code_challenge={challenge}&code_challenge_method=S256",
            c.id,
            form_urlencoded::byte_serialize(redirect.as_bytes()).collect::<String>()
        ))
    };
    let authorize = authorize_for("openid+profile+email+groups+group%3Aops");
    // One sign-in attempt in a fresh browser: (status, page, Location).
    let attempt = |jar: &str, user: &str, password: &str| {
        let jar = dir.path().join(jar);
        let (st, login, _) = browse(&jar, &authorize, None);
        assert!(st == 200 && login.contains("Sign in"), "{st} {login}");
        let form = [
            ("authz", field(&login, "authz")),
            ("csrf", field(&login, "csrf")),
            ("username", user.to_owned()),
            ("password", password.to_owned()),
        ];
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (st, page, location) = browse(&jar, &t.url("/login"), Some(&pairs));
        (st, page, location, jar)
    };

    // Wrong passwords, an empty one, an unknown user: one answer, 401.
    for (user, password) in [
        ("carol", "not carol's password"),
        ("carol", ""),
        ("nobody", "whatever"),
        ("dave", "dave's ldap password"),
        ("x)(uid=*", "carol's ldap password"),
    ] {
        let (st, page, _, _) = attempt("jar-wrong", user, password);
        assert_eq!(st, 401, "{user}: {page}");
        assert!(page.contains("The user name or password is wrong."), "{page}");
    }
    // The local dave signs in, but is in no group: group:ops ends the request before consent.
    let (st, _, location, _) = attempt("jar-dave", "dave", "dave's local password");
    assert_eq!((st, query_param(&location, "error").as_deref()), (303, Some("access_denied")), "{location}");

    // carol, from the directory: consent, code, token.
    let (st, consent, _, jar) = attempt("jar-carol", "carol", "carol's ldap password");
    assert!(st == 200 && consent.contains("Allow access?"), "{st} {consent} {}", t.log());
    let form = [("authz", field(&consent, "authz")), ("csrf", field(&consent, "csrf")), ("decision", "allow".into())];
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (st, _, location) = browse(&jar, &t.url("/consent"), Some(&pairs));
    assert_eq!(st, 303, "{location}");
    let code = query_param(&location, "code").unwrap();
    let redeem = format!(
        "grant_type=authorization_code&code={code}&client_id={}&code_verifier={verifier}&redirect_uri={}",
        c.id,
        form_urlencoded::byte_serialize(redirect.as_bytes()).collect::<String>()
    );
    let (st, body) = t.post("/token", &redeem, &[]);
    assert_eq!(st, 200, "{body}");
    let tok: Value = serde_json::from_str(&body).unwrap();
    let (st, jwks) = t.get("/jwks");
    assert_eq!(st, 200);
    let id = verify_jwt(
        tok["id_token"].as_str().unwrap(),
        &Jwks::parse(jwks.as_bytes()).unwrap(),
        &Validation {
            issuer: Some(t.issuer()),
            audience: Some(c.id.clone()),
            now: now(),
            leeway: 0,
            typ: Some("JWT".into()),
        },
    )
    .unwrap();
    assert_eq!(id.sub.as_deref(), Some("carol"));
    assert_eq!(id.extra["name"], "Carol Directory");
    assert_eq!(id.extra["email"], "carol@example.net");
    let mut groups: Vec<&str> = id.extra["groups"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    groups.sort_unstable();
    assert_eq!(groups, ["engineers", "ops"], "{:?}", id.extra);
    assert!(tok["scope"].as_str().unwrap().split(' ').any(|s| s == "group:ops"), "{tok}");
    // group:payroll: carol is not in payroll, so the request ends with access_denied.
    let (st, _, location) = browse(&jar, &authorize_for("openid+group%3Apayroll"), None);
    assert_eq!((st, query_param(&location, "error").as_deref()), (302, Some("access_denied")), "{location}");
    // The shadow is a user tokend lists, with no password that could verify locally.
    let (st, out, err) = run(t.signetctl().args(["--json", "oauth", "user", "list"]));
    assert!(st.success() && out.contains("carol"), "{out}{err}");

    // The directory goes away: sign-in is a 503, quickly, and tokend stays up.
    slapd.kill();
    let started = Instant::now();
    let (st, page, _, _) = attempt("jar-down", "carol", "carol's ldap password");
    assert_eq!(st, 503, "{page}");
    assert!(page.contains("unavailable"), "{page}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(t.log().contains("the user directory is unavailable"), "{}", t.log());
    assert_eq!(t.get("/healthz").0, 200);
    // Local users do not need the directory.
    let (st, _, location, _) = attempt("jar-dave2", "dave", "dave's local password");
    assert_eq!((st, query_param(&location, "error").as_deref()), (303, Some("access_denied")), "{location}");
    let log = t.log();
    assert!(!log.contains("carol's ldap password"), "a password was logged: {log}");
}

#[test]
fn ldaps_and_starttls_verify_the_directory_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let slapd = Slapd::start(dir.path(), true);
    slapd.add(&directory_ldif(), dir.path());
    let ca = dir.path().join("ldap-ca.pem");
    let signd = SigndProcess::start(&signd_role());
    let user_dn = format!("user_dn = \"uid={{user}},ou=people,{SUFFIX}\"\nbase_dn = \"ou=groups,{SUFFIX}\"\n");
    let ldaps = format!("url = \"ldaps://127.0.0.1:{}\"\n", slapd.tls_port.unwrap());
    let mut t = Tokend::start(
        &signd,
        dir.path(),
        "tok-es256",
        "ecdsa-p256",
        &format!("[ldap]\n{ldaps}{user_dn}ca_file = {ca:?}\n"),
    );
    let base = std::fs::read_to_string(&t.config).unwrap();
    let base = base[..base.find("[ldap]").unwrap()].to_owned();
    let c = t.create_client(
        "web",
        &[
            "--auth-method",
            "none",
            "--grant-type",
            "authorization_code",
            "--scope",
            "openid",
            "--audience",
            "api",
            "--redirect-uri",
            "http://127.0.0.1:9/cb",
        ],
    );
    let c = c.id;
    // One sign-in in a fresh browser: the status of the answer to the form.
    let sign_in = |t: &Tokend, jar: &str| {
        let jar = dir.path().join(jar);
        let verifier = "v".repeat(50);
        let challenge = URL_SAFE_NO_PAD.encode(openssl::sha::sha256(verifier.as_bytes()));
        let authorize = t.url(&format!(
            "/authorize?response_type=code&client_id={c}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&scope=openid\
             &nonce=n&code_challenge={challenge}&code_challenge_method=S256"
        ));
        let (st, login, _) = browse(&jar, &authorize, None);
        assert!(st == 200 && login.contains("Sign in"), "{st} {login}");
        let form = [
            ("authz", field(&login, "authz")),
            ("csrf", field(&login, "csrf")),
            ("username", "carol".to_owned()),
            ("password", "carol's ldap password".to_owned()),
        ];
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (st, page, _) = browse(&jar, &t.url("/login"), Some(&pairs));
        (st, page)
    };
    let (st, page) = sign_in(&t, "jar-ldaps");
    assert!(st == 200 && page.contains("Allow access?"), "ldaps with ca_file: {st} {page} {}", t.log());

    // StartTLS on the plain port.
    let starttls = format!("url = \"ldap://127.0.0.1:{}\"\nstarttls = true\n", slapd.port);
    std::fs::write(&t.config, format!("{base}[ldap]\n{starttls}{user_dn}ca_file = {ca:?}\n")).unwrap();
    t.kill9();
    t.spawn();
    let (st, page) = sign_in(&t, "jar-starttls");
    assert!(st == 200 && page.contains("Allow access?"), "StartTLS with ca_file: {st} {page} {}", t.log());

    // Without the CA, the directory's certificate is not trusted: unavailable, not a sign-in.
    std::fs::write(&t.config, format!("{base}[ldap]\n{ldaps}{user_dn}")).unwrap();
    t.kill9();
    t.spawn();
    let (st, page) = sign_in(&t, "jar-untrusted");
    assert_eq!(st, 503, "{page}");
    let log = t.log();
    assert!(log.contains("the user directory is unavailable") && log.contains("certificate verify failed"), "{log}");
}
