//! `signetctl oauth ...`: tokend's admin interface (its OAuth 2.0 clients,
//! local users and the signing keys it publishes), and key rotation through
//! signd. A user's password is read from a file or standard input, never from
//! the command line, and never printed.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Subcommand;
use serde_json::json;
use signet_ipc::{
    block_on, IpcError, KeyAlgorithm, KeySpec, OauthClient, OauthUser, SigndClient, TokenKey, TokendClient,
    TokendHealth,
};

use crate::output::{rfc3339_secs, Printer};
use crate::{Failure, EXIT_CODES};

/// `signetctl oauth ...`
#[derive(Subcommand)]
// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum OauthCommand {
    /// Manage OAuth clients (who may ask tokend for tokens, and for what).
    #[command(subcommand, after_help = EXIT_CODES)]
    Client(ClientCommand),
    /// The keys tokend signs tokens with: list, refresh, rotate.
    #[command(subcommand, after_help = EXIT_CODES)]
    Key(KeyCommand),
    /// Manage local users (who sign in to tokend's login page).
    #[command(subcommand, after_help = EXIT_CODES)]
    User(UserCommand),
    /// Show tokend's health.
    #[command(after_help = EXIT_CODES)]
    Health,
}

/// `signetctl oauth client ...`
#[derive(Subcommand)]
// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum ClientCommand {
    /// Register a client; prints it, with its secret (shown this once only).
    ///
    /// client_secret_basic, client_secret_post and client_secret_jwt clients
    /// get a random secret made by tokend; private_key_jwt clients need
    /// --jwks; none (a public client) cannot use client_credentials. A client
    /// with the authorization_code grant needs at least one --redirect-uri.
    /// tls_client_auth clients (RFC 8705 §2.1) name exactly one of
    /// --tls-subject-dn, --tls-san-dns, --tls-san-uri, --tls-san-ip,
    /// --tls-san-email: what their certificate (from a CA of tokend's
    /// `[tls] client_ca_file`) holds; self_signed_tls_client_auth clients
    /// register their certificates' keys with --jwks or --jwks-uri (§2.2).
    #[command(after_help = EXIT_CODES)]
    Create {
        /// The client id ([A-Za-z0-9._-], up to 64, starting with a letter or digit); default: a random one.
        id: Option<String>,
        /// client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt,
        /// tls_client_auth, self_signed_tls_client_auth or none.
        #[arg(long)]
        auth_method: String,
        /// A display name.
        #[arg(long, default_value = "")]
        name: String,
        /// A scope the client may ask for (repeatable).
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// An audience its tokens may name, a URI or a plain name (repeatable, at least one; the first is the default).
        #[arg(long = "audience")]
        audiences: Vec<String>,
        /// A grant type it may use (repeatable; default: client_credentials).
        #[arg(long = "grant-type")]
        grant_types: Vec<String>,
        /// The client's public keys, a JWKS file (private_key_jwt, self_signed_tls_client_auth);
        /// `-` for standard input.
        #[arg(long, conflicts_with = "jwks_uri")]
        jwks: Option<PathBuf>,
        /// The client's public keys by URL (private_key_jwt, self_signed_tls_client_auth):
        /// tokend fetches and caches the JWKS, and fetches it again when an assertion names a
        /// key, or a certificate holds one, that it lacks.
        #[arg(long = "jwks-uri")]
        jwks_uri: Option<String>,
        /// A redirect URI (repeatable, up to 16; authorization_code clients): https, http on
        /// 127.0.0.1, [::1] or localhost, or a private-use scheme such as com.example.app:/cb.
        #[arg(long = "redirect-uri")]
        redirect_uris: Vec<String>,
        /// Where RP-initiated logout may send the browser afterwards (repeatable, up to 16).
        #[arg(long = "post-logout-redirect-uri")]
        post_logout_redirect_uris: Vec<String>,
        #[command(flatten)]
        tls: TlsIdentityArgs,
    },
    /// List every client: id, auth method, creation time, name.
    #[command(after_help = EXIT_CODES)]
    List,
    /// Show one client (never its secret).
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The client id.
        id: String,
    },
    /// Delete a client. Tokens it already holds stay valid until they expire.
    #[command(after_help = EXIT_CODES)]
    Delete {
        /// The client id.
        id: String,
    },
    /// Give a client a new secret (shown this once only); the old one stops working at once.
    #[command(after_help = EXIT_CODES)]
    RotateSecret {
        /// The client id.
        id: String,
    },
}

/// What a tls_client_auth client's certificate holds (RFC 8705 §2.1.2): one of these.
#[derive(clap::Args, Default)]
#[group(required = false, multiple = false)]
pub struct TlsIdentityArgs {
    /// The certificate's subject DN, an RFC 4514 string such as "CN=billing,O=Example".
    #[arg(long = "tls-subject-dn")]
    subject_dn: Option<String>,
    /// A dNSName of the certificate's SAN.
    #[arg(long = "tls-san-dns")]
    san_dns: Option<String>,
    /// A URI of the certificate's SAN.
    #[arg(long = "tls-san-uri")]
    san_uri: Option<String>,
    /// An IP address of the certificate's SAN.
    #[arg(long = "tls-san-ip")]
    san_ip: Option<String>,
    /// An email address (rfc822Name) of the certificate's SAN.
    #[arg(long = "tls-san-email")]
    san_email: Option<String>,
}

/// Where a password comes from: never the command line (other users see it
/// in `ps`, and shells keep histories).
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
pub struct PasswordSource {
    /// A file holding the password (one trailing newline is dropped).
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// Read the password from standard input (one trailing newline is dropped).
    #[arg(long)]
    password_stdin: bool,
}

/// `signetctl oauth user ...`
#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a local user with a password (8 to 1024 bytes; tokend keeps only its argon2id hash).
    #[command(after_help = EXIT_CODES)]
    Create {
        /// The user name ([A-Za-z0-9._@-], up to 64, not starting with '-').
        user_name: String,
        /// A display name.
        #[arg(long, default_value = "")]
        name: String,
        /// An email address.
        #[arg(long, default_value = "")]
        email: String,
        /// A group the user belongs to (repeatable; [A-Za-z0-9._-], up to 64).
        #[arg(long = "group")]
        groups: Vec<String>,
        #[command(flatten)]
        password: PasswordSource,
    },
    /// List every user: name, state, creation time, display name.
    #[command(after_help = EXIT_CODES)]
    List,
    /// Show one user.
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The user name.
        user_name: String,
    },
    /// Delete a user; its sessions end and its refresh tokens are revoked.
    #[command(after_help = EXIT_CODES)]
    Delete {
        /// The user name.
        user_name: String,
    },
    /// Set a user's password; its sessions end and its refresh tokens are revoked.
    #[command(after_help = EXIT_CODES)]
    SetPassword {
        /// The user name.
        user_name: String,
        #[command(flatten)]
        password: PasswordSource,
    },
    /// Disable a user: it cannot sign in; its sessions end and its refresh tokens are revoked.
    #[command(after_help = EXIT_CODES)]
    Disable {
        /// The user name.
        user_name: String,
    },
    /// Enable a disabled user.
    #[command(after_help = EXIT_CODES)]
    Enable {
        /// The user name.
        user_name: String,
    },
}

/// `signetctl oauth key ...`
#[derive(Subcommand)]
pub enum KeyCommand {
    /// List the keys tokend publishes (as of its last refresh) and which one signs.
    #[command(after_help = EXIT_CODES)]
    List,
    /// Make tokend read signd's key list now; prints the published keys.
    #[command(after_help = EXIT_CODES)]
    Refresh,
    /// Generate a new signing key in signd, then make tokend publish it.
    ///
    /// The key is named tokend-<algorithm>-<unix time>. tokend publishes it at
    /// once and signs with it after its `key_publish_seconds`, if its
    /// algorithm fits tokend's `[tokens] algorithm` (e.g. ES256: ecdsa-p256);
    /// the key it replaces stays published until the tokens it signed have
    /// expired. Needs signd admin rights.
    #[command(after_help = EXIT_CODES)]
    Rotate {
        /// ecdsa-p256, ecdsa-p384, ecdsa-p521, ed25519, rsa-2048, rsa-3072, rsa-4096, ...
        #[arg(long, short)]
        algorithm: KeyAlgorithm,
        /// The signd role tokend signs in (tokend's `signd_role`).
        #[arg(long, default_value = "tokend")]
        role: String,
        /// signd backend (default: signd's first backend).
        #[arg(long, default_value = "")]
        backend: String,
    },
}

/// Runs `oauth ...` against tokend's admin socket (and, for `key rotate`, signd's).
pub fn run(tokend: &TokendClient, signd: &SigndClient, cmd: &OauthCommand, out: &Printer) -> Result<(), Failure> {
    match cmd {
        OauthCommand::Health => health(&block_on(tokend.health())?, out),
        OauthCommand::Client(ClientCommand::Create {
            id,
            auth_method,
            name,
            scopes,
            audiences,
            grant_types,
            jwks,
            jwks_uri,
            redirect_uris,
            post_logout_redirect_uris,
            tls,
        }) => {
            // By URL, the URL travels in the jwks field (tokend.capnp).
            let jwks = match (jwks, jwks_uri) {
                (Some(path), _) => String::from_utf8(crate::read_input(path)?)
                    .map_err(|_| Failure { code: 2, message: format!("{}: not UTF-8", path.display()) })?,
                (None, Some(uri)) => uri.clone(),
                (None, None) => String::new(),
            };
            let client = OauthClient {
                client_id: id.clone().unwrap_or_default(),
                name: name.clone(),
                auth_method: auth_method.clone(),
                jwks,
                scopes: scopes.clone(),
                audiences: audiences.clone(),
                grant_types: grant_types.clone(),
                redirect_uris: redirect_uris.clone(),
                post_logout_redirect_uris: post_logout_redirect_uris.clone(),
                tls_subject_dn: tls.subject_dn.clone().unwrap_or_default(),
                tls_san_dns: tls.san_dns.clone().unwrap_or_default(),
                tls_san_uri: tls.san_uri.clone().unwrap_or_default(),
                tls_san_ip: tls.san_ip.clone().unwrap_or_default(),
                tls_san_email: tls.san_email.clone().unwrap_or_default(),
                ..OauthClient::default()
            };
            with_secret(&block_on(tokend.client_create(client))?, out);
        }
        OauthCommand::Client(ClientCommand::List) => list(&block_on(tokend.client_list())?, out),
        OauthCommand::Client(ClientCommand::Show { id }) => show(&block_on(tokend.client_show(id))?, out),
        OauthCommand::Client(ClientCommand::Delete { id }) => {
            let c = block_on(tokend.client_delete(id))?;
            if out.json {
                out.json(&json!({"deleted": client_json(&c)}));
            } else {
                outln!("deleted client {}", c.client_id);
            }
        }
        OauthCommand::Client(ClientCommand::RotateSecret { id }) => {
            with_secret(&block_on(tokend.client_rotate_secret(id))?, out)
        }
        OauthCommand::User(cmd) => user(tokend, cmd, out)?,
        OauthCommand::Key(KeyCommand::List) => keys(&block_on(tokend.key_list())?, out),
        OauthCommand::Key(KeyCommand::Refresh) => keys(&block_on(tokend.key_refresh())?, out),
        OauthCommand::Key(KeyCommand::Rotate { algorithm, role, backend }) => {
            rotate(tokend, signd, *algorithm, role, backend, out)?
        }
    }
    Ok(())
}

/// `oauth user ...`.
fn user(tokend: &TokendClient, cmd: &UserCommand, out: &Printer) -> Result<(), Failure> {
    match cmd {
        UserCommand::Create { user_name, name, email, groups, password } => {
            let user = OauthUser {
                user_name: user_name.clone(),
                name: name.clone(),
                email: email.clone(),
                groups: groups.clone(),
                password: read_password(password)?,
                ..OauthUser::default()
            };
            show_user(&block_on(tokend.user_create(user))?, out);
        }
        UserCommand::List => users(&block_on(tokend.user_list())?, out),
        UserCommand::Show { user_name } => show_user(&block_on(tokend.user_show(user_name))?, out),
        UserCommand::Delete { user_name } => {
            let u = block_on(tokend.user_delete(user_name))?;
            if out.json {
                out.json(&json!({"deleted": user_json(&u)}));
            } else {
                outln!("deleted user {} (its sessions ended, its refresh tokens revoked)", u.user_name);
            }
        }
        UserCommand::SetPassword { user_name, password } => {
            let u = block_on(tokend.user_set_password(user_name, &read_password(password)?))?;
            changed(&u, "password set for user", out);
        }
        UserCommand::Disable { user_name } => {
            changed(&block_on(tokend.user_set_disabled(user_name, true))?, "disabled user", out)
        }
        UserCommand::Enable { user_name } => {
            let u = block_on(tokend.user_set_disabled(user_name, false))?;
            if out.json {
                out.json(&user_json(&u));
            } else {
                outln!("enabled user {}", u.user_name);
            }
        }
    }
    Ok(())
}

/// A password from `--password-file` or `--password-stdin`, without one
/// trailing newline (`\n` or `\r\n`); it must be UTF-8.
fn read_password(src: &PasswordSource) -> Result<String, Failure> {
    let path = match (&src.password_file, src.password_stdin) {
        (Some(p), _) => p.clone(),
        (None, _) => PathBuf::from("-"),
    };
    let bytes = crate::read_input(&path)?;
    let what = if src.password_stdin { "standard input".to_owned() } else { path.display().to_string() };
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Failure { code: 2, message: format!("the password in {what} is not UTF-8") })?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// A user whose password was set or who was disabled: its sessions ended.
fn changed(u: &OauthUser, done: &str, out: &Printer) {
    if out.json {
        return out.json(&user_json(u));
    }
    outln!("{done} {} (its sessions ended, its refresh tokens revoked)", u.user_name);
}

fn user_json(u: &OauthUser) -> serde_json::Value {
    json!({
        "user_name": u.user_name,
        "name": (!u.name.is_empty()).then_some(&u.name),
        "email": (!u.email.is_empty()).then_some(&u.email),
        "groups": u.groups,
        "created_unix_secs": u.created_unix_secs,
        "password_set_unix_secs": u.password_set_unix_secs,
        "disabled": u.disabled,
    })
}

fn show_user(u: &OauthUser, out: &Printer) {
    if out.json {
        return out.json(&user_json(u));
    }
    outln!("user name:    {}", u.user_name);
    outln!("name:         {}", u.name);
    outln!("email:        {}", if u.email.is_empty() { "-" } else { &u.email });
    outln!("groups:       {}", list_or_dash(&u.groups));
    outln!("disabled:     {}", if u.disabled { "yes" } else { "no" });
    outln!("created:      {}", rfc3339_secs(u.created_unix_secs));
    outln!("password set: {}", rfc3339_secs(u.password_set_unix_secs));
}

fn users(users: &[OauthUser], out: &Printer) {
    if out.json {
        return out.json(&serde_json::Value::Array(users.iter().map(user_json).collect()));
    }
    outln!("{:<24} {:<8} {:<20} NAME", "USER", "STATE", "CREATED");
    for u in users {
        let state = if u.disabled { "disabled" } else { "enabled" };
        let row = format!("{:<24} {:<8} {:<20} {}", u.user_name, state, rfc3339_secs(u.created_unix_secs), u.name);
        outln!("{}", row.trim_end());
    }
}

/// `oauth key rotate`: the key generated in signd, then tokend's refresh.
fn rotate(
    tokend: &TokendClient,
    signd: &SigndClient,
    algorithm: KeyAlgorithm,
    role: &str,
    backend: &str,
    out: &Printer,
) -> Result<(), Failure> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let spec = KeySpec {
        id: format!("tokend-{}-{now}", algorithm.name().to_ascii_lowercase()),
        algorithm,
        roles: vec![role.to_owned()],
        backend: backend.to_owned(),
    };
    let key = block_on(signd.generate_key(spec))?;
    let published = block_on(tokend.key_refresh()).map_err(|e: IpcError| {
        let mut f = Failure::from(e);
        f.message = format!(
            "key {} was generated in signd, but tokend did not refresh ({}); it publishes the key at its next periodic refresh",
            key.id, f.message
        );
        f
    })?;
    let listed = published.iter().any(|k| k.key_id == key.id);
    if out.json {
        out.json(&json!({
            "generated": {"key_id": key.id, "algorithm": key.algorithm.name(), "backend": key.backend, "roles": key.roles},
            "published": listed,
            "keys": published.iter().map(key_json).collect::<Vec<_>>(),
        }));
    } else {
        outln!("generated key {} ({}) in signd for role {role}", key.id, key.algorithm);
        outln!();
        keys(&published, out);
    }
    if !listed {
        eprintln_warning(&format!(
            "tokend does not publish {}: is `{role}` its signd_role, and may that role list the key?",
            key.id
        ));
    }
    Ok(())
}

fn eprintln_warning(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "signetctl: warning: {message}");
}

fn client_json(c: &OauthClient) -> serde_json::Value {
    let mut v = json!({
        "client_id": c.client_id,
        "name": c.name,
        "auth_method": c.auth_method,
        "scopes": c.scopes,
        "audiences": c.audiences,
        "grant_types": c.grant_types,
        "created_unix_secs": c.created_unix_secs,
        "secret_set_unix_secs": (c.secret_set_unix_secs != 0).then_some(c.secret_set_unix_secs),
        "redirect_uris": c.redirect_uris,
        "post_logout_redirect_uris": c.post_logout_redirect_uris,
    });
    if c.jwks.starts_with("https://") || c.jwks.starts_with("http://") {
        v["jwks_uri"] = json!(c.jwks);
    } else if !c.jwks.is_empty() {
        // The JWKS as the JSON it is; as a string if it somehow is not.
        v["jwks"] = serde_json::from_str(&c.jwks).unwrap_or_else(|_| json!(c.jwks));
    }
    if !c.secret.is_empty() {
        v["secret"] = json!(c.secret);
    }
    for (name, value) in tls_identity(c) {
        v[name] = json!(value);
    }
    v
}

/// The certificate identity of a tls_client_auth client, by its RFC 8705 metadata name.
fn tls_identity(c: &OauthClient) -> Vec<(&'static str, &str)> {
    [
        ("tls_client_auth_subject_dn", &c.tls_subject_dn),
        ("tls_client_auth_san_dns", &c.tls_san_dns),
        ("tls_client_auth_san_uri", &c.tls_san_uri),
        ("tls_client_auth_san_ip", &c.tls_san_ip),
        ("tls_client_auth_san_email", &c.tls_san_email),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k, v.as_str()))
    .collect()
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(" ")
    }
}

fn show(c: &OauthClient, out: &Printer) {
    if out.json {
        return out.json(&client_json(c));
    }
    outln!("client id:    {}", c.client_id);
    outln!("name:         {}", c.name);
    outln!("auth method:  {}", c.auth_method);
    if !c.secret.is_empty() {
        outln!("secret:       {}", c.secret);
    }
    outln!("scopes:       {}", list_or_dash(&c.scopes));
    outln!("audiences:    {}", list_or_dash(&c.audiences));
    outln!("grant types:  {}", list_or_dash(&c.grant_types));
    if !c.redirect_uris.is_empty() {
        outln!("redirect:     {}", c.redirect_uris.join(" "));
    }
    if !c.post_logout_redirect_uris.is_empty() {
        outln!("after logout: {}", c.post_logout_redirect_uris.join(" "));
    }
    for (name, value) in tls_identity(c) {
        outln!("certificate:  {name} {value}");
    }
    outln!("created:      {}", rfc3339_secs(c.created_unix_secs));
    if c.secret_set_unix_secs != 0 {
        outln!("secret set:   {}", rfc3339_secs(c.secret_set_unix_secs));
    }
    if c.jwks.starts_with("https://") || c.jwks.starts_with("http://") {
        outln!("jwks_uri:     {}", c.jwks);
    } else if !c.jwks.is_empty() {
        let keys = serde_json::from_str::<serde_json::Value>(&c.jwks)
            .ok()
            .and_then(|v| v.get("keys").and_then(serde_json::Value::as_array).map(Vec::len));
        outln!("jwks:         {} keys", keys.map_or_else(|| "?".into(), |n| n.to_string()));
    }
}

/// A client in the answer of a create or a rotation: with its secret, once.
fn with_secret(c: &OauthClient, out: &Printer) {
    show(c, out);
    if out.json || c.secret.is_empty() {
        return;
    }
    outln!();
    outln!("The secret is shown only this once; tokend keeps no copy it could show again.");
    if c.auth_method == "client_secret_jwt" {
        outln!("The client MACs its assertions (HS256, HS384 or HS512) with it, as UTF-8 octets.");
    }
}

fn list(clients: &[OauthClient], out: &Printer) {
    if out.json {
        return out.json(&serde_json::Value::Array(clients.iter().map(client_json).collect()));
    }
    outln!("{:<24} {:<19} {:<20} NAME", "CLIENT ID", "AUTH METHOD", "CREATED");
    for c in clients {
        let row =
            format!("{:<24} {:<19} {:<20} {}", c.client_id, c.auth_method, rfc3339_secs(c.created_unix_secs), c.name);
        outln!("{}", row.trim_end());
    }
}

fn key_json(k: &TokenKey) -> serde_json::Value {
    json!({
        "key_id": k.key_id,
        "alg": k.alg,
        "first_seen_unix_secs": k.first_seen_unix_secs,
        "superseded_unix_secs": (k.superseded_unix_secs != 0).then_some(k.superseded_unix_secs),
        "signing": k.signing,
    })
}

fn keys(keys: &[TokenKey], out: &Printer) {
    if out.json {
        return out.json(&serde_json::Value::Array(keys.iter().map(key_json).collect()));
    }
    outln!("{:<32} {:<6} {:<20} {:<20} SIGNING", "KEY ID", "ALG", "FIRST SEEN", "SUPERSEDED");
    for k in keys {
        let superseded = if k.superseded_unix_secs == 0 { "-".into() } else { rfc3339_secs(k.superseded_unix_secs) };
        outln!(
            "{:<32} {:<6} {:<20} {:<20} {}",
            k.key_id,
            k.alg,
            rfc3339_secs(k.first_seen_unix_secs),
            superseded,
            if k.signing { "yes" } else { "-" }
        );
    }
}

fn health(h: &TokendHealth, out: &Printer) {
    if out.json {
        return out.json(&json!({
            "ok": h.ok, "version": h.version, "uptime_secs": h.uptime_secs, "clients": h.clients,
            "signing_key": (!h.signing_key.is_empty()).then_some(&h.signing_key),
        }));
    }
    outln!("ok:           {}", h.ok);
    outln!("version:      {}", h.version);
    outln!("uptime (s):   {}", h.uptime_secs);
    outln!("clients:      {}", h.clients);
    outln!("signing key:  {}", if h.signing_key.is_empty() { "(none yet)" } else { &h.signing_key });
}
