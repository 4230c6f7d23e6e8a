//! tokend.toml.
//!
//! ```toml
//! issuer = "https://auth.example.net"     # the issuer identifier (RFC 8414 §2): every token's `iss`,
//!                                         # and the base of every endpoint URL
//! listen = "127.0.0.1:8200"               # HTTP, unless socket-activated as `tokend-http`
//! state_dir = "/var/lib/signet/tokend"    # LMDB
//! signd_socket = "/run/signet/signd.sock"
//! signd_role = "tokend"                   # a signd role holding `sign-jws`, `list` and `public-key`
//! admin_socket = "/run/signet/tokend.sock" # default <state_dir>/admin.sock
//! admin_socket_mode = "0660"
//!
//! [admin]                                 # who may manage clients and keys (signetctl oauth);
//! users = ["root"]                        # default: tokend's own uid and root
//! groups = ["signet-admin"]
//!
//! [tokens]
//! algorithm = "ES256"                     # JOSE alg of the signing key (the newest published key of it signs)
//! access_token_seconds = 300              # lifetime of an access token
//! key_publish_seconds = 60                # a new key is in the JWKS this long before it signs
//! key_refresh_seconds = 30                # how often signd's key list is read again
//! max_assertion_seconds = 3600            # the longest lifetime a client assertion may claim
//! id_token_seconds = 300                  # lifetime of an ID token
//! code_seconds = 60                       # an authorization code must be redeemed within this
//! refresh_token_seconds = 1209600         # a refresh token unused this long expires (14 days)
//! refresh_family_seconds = 7776000        # no refresh-token family outlives this (90 days)
//! refresh_grace_seconds = 10              # a rotated refresh token still works this long (a lost answer)
//! dpop_nonce = true                       # DPoP proofs must carry a nonce tokend gave out (RFC 9449 §8)
//!
//! [[trusted_issuers]]                     # JWT bearer grant (RFC 7523 §2.1): whose assertions are accepted
//! issuer = "https://idp.example.net"
//! jwks_file = "/etc/signet/idp-jwks.json" # its public keys, a JWK set
//!
//! [login]
//! session_seconds = 28800                 # a browser stays signed in this long (8 hours)
//!
//! [http]                                  # the listeners' limits (docs/http.md)
//!
//! [tls]                                   # optional: an HTTPS listener for mutual TLS (RFC 8705)
//! listen = "0.0.0.0:8443"                 # unless socket-activated as `tokend-https`
//! certificate = "/etc/signet/tokend/tls-chain.pem"  # PEM, leaf first
//! key = "/etc/signet/tokend/tls-key.pem"
//! url = "https://mtls.auth.example.net"   # its origin in mtls_endpoint_aliases (default: https://<issuer's
//!                                         # host>:<listen's port>)
//! client_ca_file = "/etc/signet/tokend/client-ca.pem"  # CAs of tls_client_auth certificates (without it,
//!                                         # only self_signed_tls_client_auth and certificate-bound tokens)
//! ocsp_url = "http://ocsp.example.net/ocsp"  # ask this OCSP responder whether a tls_client_auth
//!                                         # certificate is revoked, on every token request (default: no check)
//! ocsp_aia = false                        # ask the responder the certificate's AIA names instead (ocsp_url
//!                                         # for one naming none)
//! ocsp_timeout_ms = 2000                  # the longest an OCSP exchange may take
//! ocsp_soft_fail = false                  # status not learnt (responder down, slow, tryLater): false refuses
//!                                         # the client (fail closed), true lets it through with a warning
//!
//! [ldap]                                  # optional: users from an LDAP directory (docs/tokend.md, LDAP)
//! url = "ldaps://ipa.example.net"         # ldap:// only on loopback unless starttls = true
//! user_dn = "uid={user},cn=users,cn=accounts,dc=example,dc=net"  # {user}: the name, RFC 4514-escaped
//! base_dn = "cn=groups,cn=accounts,dc=example,dc=net"  # where groups are searched; none: no groups
//! group_filter = "(&(objectClass=groupOfNames)(member={dn}))"  # {dn}, {user}: RFC 4515-escaped
//! group_attribute = "cn"                  # a group's name
//! name_attribute = "cn"                   # the user's display name
//! email_attribute = "mail"                # the user's email
//! timeout_ms = 3000                       # the whole sign-in against the directory
//! starttls = false                        # StartTLS on an ldap:// URL
//! ca_file = "/etc/ipa/ca.crt"             # PEM, trusted besides the system's, for ldaps:// and StartTLS
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use signet_jose::Algorithm;
use signet_runtime::config::{DaemonConfig, SocketMode};
use signet_runtime::principals::{Principal, Principals};

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The issuer identifier: an https (or, for loopback, http) URL without
    /// query or fragment.
    pub issuer: String,
    /// The HTTP address, unless socket-activated as `tokend-http`.
    pub listen: SocketAddr,
    /// The LMDB directory.
    pub state_dir: PathBuf,
    /// signd's socket.
    pub signd_socket: PathBuf,
    /// The signd role tokend signs in.
    #[serde(default = "default_role")]
    pub signd_role: String,
    /// The admin socket (Cap'n Proto, `tokend.capnp`), unless socket-activated
    /// as `tokend-admin`. Default: `admin.sock` in `state_dir`.
    #[serde(default)]
    pub admin_socket: Option<PathBuf>,
    /// Mode of the admin socket when tokend binds it (octal, default "0660").
    #[serde(default)]
    pub admin_socket_mode: SocketMode,
    /// `[admin]`: who may use the admin interface.
    #[serde(default)]
    pub admin: Option<Principals>,
    /// `[tokens]`.
    #[serde(default)]
    pub tokens: Tokens,
    /// `[login]`.
    #[serde(default)]
    pub login: Login,
    /// `[[trusted_issuers]]`: assertion issuers of the JWT bearer grant.
    #[serde(default)]
    pub trusted_issuers: Vec<TrustedIssuerConfig>,
    /// `[http]`: the listener's limits.
    #[serde(default)]
    pub http: signet_runtime::http::HttpLimits,
    /// `[ldap]`: an LDAP directory as a second user source.
    #[serde(default)]
    pub ldap: Option<LdapConfig>,
    /// `[tls]`: an HTTPS listener beside the plain one, for mutual TLS.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

/// `[tls]`: the mutual-TLS listener (RFC 8705). It serves every endpoint the
/// plain listener does, asks each client for a certificate (none is fine),
/// and its origin is published as `mtls_endpoint_aliases`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The HTTPS address, unless socket-activated as `tokend-https`.
    pub listen: SocketAddr,
    /// tokend's certificate chain, PEM, leaf first.
    pub certificate: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
    /// The origin clients reach this listener at (`https://host[:port]`); default:
    /// the issuer's host with `listen`'s port.
    #[serde(default)]
    pub url: Option<String>,
    /// CA certificates (PEM) a tls_client_auth client's certificate must chain to.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// An OCSP responder (`http://` or `https://` URL) asked, on every token
    /// request, whether a tls_client_auth certificate is revoked ([`crate::ocsp`]).
    #[serde(default)]
    pub ocsp_url: Option<String>,
    /// Ask the responder a certificate names in its AIA extension (`ocsp_url`,
    /// if set, for a certificate that names none).
    #[serde(default)]
    pub ocsp_aia: bool,
    /// How long an OCSP exchange may take, milliseconds (100 to 30000).
    #[serde(default = "default_ocsp_timeout_ms")]
    pub ocsp_timeout_ms: u64,
    /// When the status cannot be learnt (the responder unreachable or slow, an
    /// error status, no responder for the certificate): `false` (the default)
    /// refuses the client (fail closed, `temporarily_unavailable`), `true`
    /// authenticates it and logs a warning (soft fail).
    #[serde(default)]
    pub ocsp_soft_fail: bool,
}

fn default_ocsp_timeout_ms() -> u64 {
    2000
}

impl Config {
    /// The mTLS listener's origin, without a trailing `/` (see [`TlsConfig::url`]).
    pub fn mtls_base_url(&self) -> Option<String> {
        let tls = self.tls.as_ref()?;
        if let Some(u) = &tls.url {
            return Some(u.trim_end_matches('/').to_owned());
        }
        let host = url::Url::parse(&self.issuer).ok()?.host_str()?.to_owned();
        Some(format!("https://{host}:{}", tls.listen.port()))
    }
}

/// `[ldap]`: users who are not local sign in by binding to the directory.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdapConfig {
    /// `ldap://host[:port]` or `ldaps://host[:port]`.
    pub url: String,
    /// The user's DN; `{user}` is replaced by the RFC 4514-escaped user name.
    pub user_dn: String,
    /// Where groups are searched (subtree); without it users have no groups.
    #[serde(default)]
    pub base_dn: Option<String>,
    /// The groups' filter; `{dn}` (the user's DN) and `{user}` are RFC 4515-escaped.
    #[serde(default = "default_group_filter")]
    pub group_filter: String,
    /// The attribute holding a group's name.
    #[serde(default = "default_cn")]
    pub group_attribute: String,
    /// The user's attribute for the `name` claim.
    #[serde(default = "default_cn")]
    pub name_attribute: String,
    /// The user's attribute for the `email` claim.
    #[serde(default = "default_mail")]
    pub email_attribute: String,
    /// The longest a sign-in may wait on the directory, milliseconds.
    #[serde(default = "default_ldap_timeout")]
    pub timeout_ms: u64,
    /// StartTLS (RFC 4513 §3) on an `ldap://` URL.
    #[serde(default)]
    pub starttls: bool,
    /// A PEM file of CA certificates trusted for the directory's TLS, besides the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn default_group_filter() -> String {
    "(&(objectClass=groupOfNames)(member={dn}))".into()
}
fn default_cn() -> String {
    "cn".into()
}
fn default_mail() -> String {
    "mail".into()
}
fn default_ldap_timeout() -> u64 {
    3000
}

impl LdapConfig {
    /// Checks the values (without contacting the directory).
    pub fn check(&self) -> Result<(), String> {
        let url = url::Url::parse(&self.url).map_err(|e| format!("ldap.url `{}`: {e}", self.url))?;
        let host = url.host_str().unwrap_or("");
        if host.is_empty() || !url.path().trim_start_matches('/').is_empty() || url.query().is_some() {
            return Err(format!("ldap.url `{}` must be ldap[s]://host[:port] with nothing after", self.url));
        }
        let loopback = host == "localhost" || host == "127.0.0.1" || host == "[::1]";
        match url.scheme() {
            "ldaps" => {}
            "ldap" if self.starttls || loopback => {}
            "ldap" => {
                return Err(format!(
                    "ldap.url `{}`: passwords would cross the network in clear; use ldaps:// or starttls = true",
                    self.url
                ))
            }
            _ => return Err(format!("ldap.url `{}` must be an ldap:// or ldaps:// URL", self.url)),
        }
        if self.starttls && url.scheme() == "ldaps" {
            return Err("ldap.starttls is for ldap:// URLs".into());
        }
        if self.user_dn.matches("{user}").count() != 1 {
            return Err("ldap.user_dn must hold `{user}` exactly once".into());
        }
        if !(self.group_filter.starts_with('(') && self.group_filter.ends_with(')')) {
            return Err("ldap.group_filter must be a parenthesized LDAP filter (RFC 4515)".into());
        }
        for (what, a) in [
            ("group_attribute", &self.group_attribute),
            ("name_attribute", &self.name_attribute),
            ("email_attribute", &self.email_attribute),
        ] {
            if a.is_empty() || !a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b';') {
                return Err(format!("ldap.{what} `{a}` is not an attribute description"));
            }
        }
        if !(100..=60_000).contains(&self.timeout_ms) {
            return Err("ldap.timeout_ms must be 100 to 60000".into());
        }
        if self.ca_file.is_some() && !(url.scheme() == "ldaps" || self.starttls) {
            return Err("ldap.ca_file is for ldaps:// or starttls".into());
        }
        Ok(())
    }
}

/// One `[[trusted_issuers]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedIssuerConfig {
    /// The assertions' `iss`.
    pub issuer: String,
    /// A file holding the issuer's JWK set.
    pub jwks_file: PathBuf,
}

impl Config {
    /// The trusted issuers with their keys, read from their files.
    pub fn trusted_issuers(&self) -> Result<Vec<crate::bearer::TrustedIssuer>, String> {
        let mut out = Vec::new();
        for t in &self.trusted_issuers {
            if t.issuer.is_empty() || out.iter().any(|o: &crate::bearer::TrustedIssuer| o.issuer == t.issuer) {
                return Err(format!("trusted_issuers: `{}` is empty or repeated", t.issuer));
            }
            let text = std::fs::read(&t.jwks_file)
                .map_err(|e| format!("trusted_issuers `{}`: {}: {e}", t.issuer, t.jwks_file.display()))?;
            let jwks = signet_jose::Jwks::parse(&text)
                .map_err(|e| format!("trusted_issuers `{}`: {}: {e}", t.issuer, t.jwks_file.display()))?;
            out.push(crate::bearer::TrustedIssuer { issuer: t.issuer.clone(), jwks });
        }
        Ok(out)
    }
}

/// `[login]`: the browser side.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    /// How long a browser stays signed in, seconds.
    #[serde(default = "default_session")]
    pub session_seconds: u64,
}

impl Default for Login {
    fn default() -> Self {
        Self { session_seconds: default_session() }
    }
}

fn default_session() -> u64 {
    8 * 3600
}

/// `[tokens]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    /// The JOSE `alg` tokens are signed with.
    #[serde(default = "default_alg")]
    pub algorithm: String,
    /// Access token lifetime, seconds.
    #[serde(default = "default_access")]
    pub access_token_seconds: u64,
    /// How long a new key is published before it signs, seconds.
    #[serde(default = "default_publish")]
    pub key_publish_seconds: u64,
    /// How often signd's key list is read again, seconds.
    #[serde(default = "default_refresh")]
    pub key_refresh_seconds: u64,
    /// The longest lifetime (`exp` − now) a client assertion may have, seconds.
    #[serde(default = "default_assertion")]
    pub max_assertion_seconds: u64,
    /// ID token lifetime, seconds.
    #[serde(default = "default_access")]
    pub id_token_seconds: u64,
    /// Authorization code lifetime, seconds.
    #[serde(default = "default_code")]
    pub code_seconds: u64,
    /// Idle lifetime of a refresh token, seconds.
    #[serde(default = "default_refresh_token")]
    pub refresh_token_seconds: u64,
    /// Absolute lifetime of a refresh-token family, seconds.
    #[serde(default = "default_family")]
    pub refresh_family_seconds: u64,
    /// How long a rotated refresh token still works, seconds.
    #[serde(default = "default_grace")]
    pub refresh_grace_seconds: u64,
    /// Whether DPoP proofs must carry a server nonce.
    #[serde(default = "default_true")]
    pub dpop_nonce: bool,
}

fn default_true() -> bool {
    true
}

fn default_code() -> u64 {
    60
}
fn default_refresh_token() -> u64 {
    14 * 86_400
}
fn default_family() -> u64 {
    90 * 86_400
}
fn default_grace() -> u64 {
    10
}

impl Default for Tokens {
    fn default() -> Self {
        Self {
            algorithm: default_alg(),
            access_token_seconds: default_access(),
            key_publish_seconds: default_publish(),
            key_refresh_seconds: default_refresh(),
            max_assertion_seconds: default_assertion(),
            id_token_seconds: default_access(),
            code_seconds: default_code(),
            refresh_token_seconds: default_refresh_token(),
            refresh_family_seconds: default_family(),
            refresh_grace_seconds: default_grace(),
            dpop_nonce: true,
        }
    }
}

fn default_role() -> String {
    "tokend".into()
}
fn default_alg() -> String {
    "ES256".into()
}
fn default_access() -> u64 {
    300
}
fn default_publish() -> u64 {
    60
}
fn default_refresh() -> u64 {
    30
}
fn default_assertion() -> u64 {
    // authlib, for one, signs its assertions for an hour.
    3600
}

impl Config {
    /// The signing algorithm (checked by [`DaemonConfig::check_config`]).
    pub fn algorithm(&self) -> Result<Algorithm, String> {
        Algorithm::from_name(&self.tokens.algorithm).map_err(|_| {
            format!("tokens.algorithm `{}` is not a JOSE algorithm tokend signs with", self.tokens.algorithm)
        })
    }

    /// The issuer without a trailing `/`: endpoint URLs are `<issuer>/token` and so on.
    pub fn base_url(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }

    /// Where the admin socket is bound when it is not socket-activated.
    pub fn admin_socket_path(&self) -> PathBuf {
        self.admin_socket.clone().unwrap_or_else(|| self.state_dir.join("admin.sock"))
    }

    /// Who may use the admin interface: `[admin]`, or else `own_uid` and root.
    pub fn admins(&self, own_uid: u32) -> Principals {
        self.admin
            .clone()
            .unwrap_or_else(|| Principals { users: vec![Principal::Id(own_uid), Principal::Id(0)], groups: Vec::new() })
    }
}

impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        self.http.check()?;
        let url = url::Url::parse(&self.issuer).map_err(|e| format!("issuer `{}`: {e}", self.issuer))?;
        let loopback = url.host_str().is_some_and(|h| h == "localhost" || h == "127.0.0.1" || h == "[::1]");
        if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) {
            return Err(format!("issuer `{}` must be an https URL (http only on loopback)", self.issuer));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("issuer `{}` must have no query or fragment (RFC 8414 §2)", self.issuer));
        }
        self.algorithm()?;
        let t = &self.tokens;
        if !(10..=86_400).contains(&t.access_token_seconds) {
            return Err("tokens.access_token_seconds must be 10 to 86400".into());
        }
        if !(1..=3600).contains(&t.key_refresh_seconds) {
            return Err("tokens.key_refresh_seconds must be 1 to 3600".into());
        }
        if t.key_publish_seconds > 7 * 86_400 {
            return Err("tokens.key_publish_seconds must be at most a week".into());
        }
        if !(10..=86_400).contains(&t.max_assertion_seconds) {
            return Err("tokens.max_assertion_seconds must be 10 to 86400".into());
        }
        if !(10..=86_400).contains(&t.id_token_seconds) {
            return Err("tokens.id_token_seconds must be 10 to 86400".into());
        }
        if !(10..=600).contains(&t.code_seconds) {
            return Err("tokens.code_seconds must be 10 to 600 (RFC 6749 §4.1.2: at most 10 minutes)".into());
        }
        if !(60..=t.refresh_family_seconds).contains(&t.refresh_token_seconds) {
            return Err("tokens.refresh_token_seconds must be 60 to refresh_family_seconds".into());
        }
        if t.refresh_family_seconds > 366 * 86_400 {
            return Err("tokens.refresh_family_seconds must be at most a year".into());
        }
        if t.refresh_grace_seconds > 300 {
            return Err("tokens.refresh_grace_seconds must be at most 300".into());
        }
        if !(60..=30 * 86_400).contains(&self.login.session_seconds) {
            return Err("login.session_seconds must be 60 to 2592000".into());
        }
        if let Some(admin) = &self.admin {
            admin.resolve().map_err(|e| format!("[admin]: {e}"))?;
        }
        self.trusted_issuers()?;
        if let Some(ldap) = &self.ldap {
            ldap.check()?;
            crate::ldap::Ldap::new(ldap)?;
        }
        if let Some(tls) = &self.tls {
            signet_runtime::tls::acceptor_requesting_client_certs(&tls.certificate, &tls.key)
                .map_err(|e| format!("[tls]: {e}"))?;
            if let Some(ca) = &tls.client_ca_file {
                crate::mtls::ca_store(ca).map_err(|e| format!("tls.client_ca_file: {e}"))?;
            }
            crate::ocsp::Revocation::check_config(tls)?;
            let base = self.mtls_base_url().unwrap_or_default();
            let u = url::Url::parse(&base).map_err(|e| format!("tls.url `{base}`: {e}"))?;
            if u.scheme() != "https" || u.host_str().is_none() || u.path() != "/" || u.query().is_some() {
                return Err(format!("tls.url `{base}` must be an https origin (https://host[:port])"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<Config, String> {
        let text = format!(
            "issuer = \"https://auth.example.net\"\nlisten = \"127.0.0.1:8200\"\nstate_dir = \"/tmp/t\"\n\
             signd_socket = \"/tmp/s.sock\"\n{extra}"
        );
        let c: Config = toml::from_str(&text).map_err(|e| e.to_string())?;
        c.check_config().map(|()| c)
    }

    #[test]
    fn defaults_are_sane() {
        let c = parse("").unwrap();
        assert_eq!(c.algorithm().unwrap(), Algorithm::Es256);
        assert_eq!(c.base_url(), "https://auth.example.net");
        assert_eq!(c.signd_role, "tokend");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse("[tokens]\nalgorithm = \"HS256\"").is_err());
        assert!(parse("[tokens]\naccess_token_seconds = 1").is_err());
        assert!(parse("nonsense = 1").is_err());
        assert!(parse("[tokens]\ncode_seconds = 3600").is_err());
        assert!(parse("[tokens]\nrefresh_token_seconds = 100000000").is_err());
        assert!(parse("[login]\nsession_seconds = 1").is_err());
        let http =
            "issuer = \"http://auth.example.net\"\nlisten = \"127.0.0.1:1\"\nstate_dir = \"/t\"\nsignd_socket = \"/s\"";
        let c: Config = toml::from_str(http).unwrap();
        assert!(c.check_config().is_err(), "plain http off loopback");
    }

    #[test]
    fn ldap_is_checked() {
        let ok = "[ldap]\nurl = \"ldap://127.0.0.1:3890\"\nuser_dn = \"uid={user},ou=people,dc=example,dc=net\"";
        let c = parse(ok).unwrap();
        let l = c.ldap.unwrap();
        assert_eq!((l.timeout_ms, l.name_attribute.as_str(), l.email_attribute.as_str()), (3000, "cn", "mail"));
        assert!(parse(&format!("{ok}\nbogus = 1")).is_err(), "unknown key");
        assert!(parse(&format!("{ok}\ntimeout_ms = 5")).is_err());
        assert!(parse(&format!("{ok}\ngroup_filter = \"member={{dn}}\"")).is_err());
        assert!(parse(&format!("{ok}\nname_attribute = \"c n\"")).is_err());
        assert!(parse(&format!("{ok}\nca_file = \"/etc/hostname\"")).is_err(), "ca_file without TLS");
        for bad in [
            "url = \"ldap://ipa.example.net\"\nuser_dn = \"uid={user},dc=x\"",
            "url = \"http://127.0.0.1\"\nuser_dn = \"uid={user},dc=x\"",
            "url = \"ldap://127.0.0.1/dc=x\"\nuser_dn = \"uid={user},dc=x\"",
            "url = \"ldap://127.0.0.1\"\nuser_dn = \"uid=alice,dc=x\"",
            "url = \"ldaps://ipa.example.net\"\nuser_dn = \"uid={user},dc=x\"\nca_file = \"/nonexistent\"",
        ] {
            assert!(parse(&format!("[ldap]\n{bad}")).is_err(), "{bad}");
        }
        parse("[ldap]\nurl = \"ldap://ipa.example.net\"\nstarttls = true\nuser_dn = \"uid={user},dc=x\"").unwrap();
        parse("[ldap]\nurl = \"ldaps://ipa.example.net:636\"\nuser_dn = \"uid={user},dc=x\"").unwrap();
    }

    #[test]
    fn tls_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (chain, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let k = openssl::pkey::PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let mut b = openssl::x509::X509::builder().unwrap();
        b.set_pubkey(&k).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap()).unwrap();
        b.sign(&k, openssl::hash::MessageDigest::sha256()).unwrap();
        let cert = b.build();
        std::fs::write(&chain, cert.to_pem().unwrap()).unwrap();
        std::fs::write(&key, k.private_key_to_pem_pkcs8().unwrap()).unwrap();
        let tls = format!("[tls]\nlisten = \"127.0.0.1:8443\"\ncertificate = {chain:?}\nkey = {key:?}\n");
        let c = parse(&tls).unwrap();
        assert_eq!(c.mtls_base_url().as_deref(), Some("https://auth.example.net:8443"));
        let c = parse(&format!("{tls}url = \"https://mtls.example.net/\"\nclient_ca_file = {chain:?}")).unwrap();
        assert_eq!(c.mtls_base_url().as_deref(), Some("https://mtls.example.net"));
        assert!(parse(&format!("{tls}url = \"http://mtls.example.net\"")).is_err());
        assert!(parse(&format!("{tls}url = \"https://mtls.example.net/token\"")).is_err());
        assert!(parse(&format!("{tls}client_ca_file = \"/nonexistent\"")).is_err());
        let ocsp = format!("{tls}client_ca_file = {chain:?}\n");
        assert!(parse(&format!("{ocsp}ocsp_url = \"http://127.0.0.1:8180/ocsp\"")).is_ok());
        assert!(parse(&format!("{ocsp}ocsp_aia = true\nocsp_soft_fail = true")).is_ok());
        assert!(parse(&format!("{ocsp}ocsp_url = \"ldap://x/\"")).is_err());
        assert!(parse(&format!("{ocsp}ocsp_url = \"http://x/\"\nocsp_timeout_ms = 10")).is_err());
        assert!(parse(&format!("{tls}ocsp_url = \"http://127.0.0.1:8180/ocsp\"")).is_err(), "no client_ca_file");
        assert!(parse(&format!("{tls}bogus = 1")).is_err());
        assert!(parse("[tls]\nlisten = \"127.0.0.1:8443\"\ncertificate = \"/nonexistent\"\nkey = \"/x\"").is_err());
    }
}
