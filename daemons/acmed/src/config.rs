//! acmed's configuration (TOML, strict: unknown keys are errors).
//!
//! ```toml
//! state_dir = "/var/lib/signet/acmed"      # LMDB
//! signd_socket = "/run/signet/signd.sock"
//! ocspd_socket = "/run/signet/ocspd.sock"
//! issuer = "demo"                          # the issuer's name in signd and ocspd
//! listen = "127.0.0.1:8443"                # HTTPS, unless socket-activated as `acmed-https`
//! public_url = "https://acme.example"      # default: https://<listen>
//! tls_certificate = "/etc/signet/acmed/tls-chain.pem"
//! tls_key = "/etc/signet/acmed/tls-key.pem"
//! chain = "/etc/signet/ca/chain.pem"       # issuing CA .. root, PEM
//! http01_port = 80                         # where http-01 is fetched
//! http01_https_port = 443                  # where http-01 follows https: redirects
//! tlsalpn01_port = 443                     # where tls-alpn-01 connects
//! dns_resolver = "127.0.0.1:53"            # default: the system's resolv.conf
//! caa_identities = ["signet.example"]      # empty: CAA is not checked
//! caa_cache_max_seconds = 28800            # CAA answers are reused for their TTL, at most this; 0: never
//! caa_recheck_after_seconds = 25200        # finalize checks CAA again for authorizations validated before this
//! terms_of_service = "https://acme.example/tos"
//! website = "https://acme.example"
//! external_account_required = false
//! default_profile = "classic"
//! validation_timeout_seconds = 10
//! authorization_lifetime_seconds = 2592000  # valid authorizations are reused this long
//! admin_socket = "/run/signet/acmed.sock"  # the admin interface, unless socket-activated
//!                                          # as `acmed-admin`; default <state_dir>/admin.sock
//! admin_socket_mode = "0660"
//!
//! [admin]                                  # who may manage EAB keys (signetctl acme eab);
//! users = ["root"]                         # default: the uid acmed runs as, and root
//! groups = ["signet-admin"]
//!
//! [profiles.classic]                       # named certificate profiles (draft-aaron-acme-profiles)
//! description = "90-day TLS server certificates"
//! validity_seconds = 7776000
//!
//! [profiles.shortlived]
//! description = "6-day certificates"
//! validity_seconds = 518400
//! key_algorithms = ["ecdsa-p256", "ed25519"]   # default: all the issuer's profile allows
//!
//! [profiles.internal]
//! description = "Certificates not submitted to CT logs"
//! ct = false                               # default: true when [ct] is set
//!
//! [ct]                                     # Certificate Transparency (RFC 6962): optional
//! timeout_ms = 2000                        # per log submission
//! policy = "min_scts"                      # or "chrome": SCTs needed by lifetime, distinct operators
//! min_scts = 1                             # (policy "min_scts") fewer valid SCTs: the finalization fails
//! max_skew_ms = 5000                       # an SCT's timestamp: not later than now + this,
//!                                          # not earlier than the submission - this
//! [[ct.logs]]
//! url = "https://ct.example.net/2026h2/"   # the log's RFC 6962 submission prefix
//! public_key = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE..."  # base64 DER SubjectPublicKeyInfo
//! operator = "Example CT"                  # who runs it (the chrome policy counts distinct ones)
//! required = false                         # true: no certificate without this log's SCT
//! ca_file = "/etc/ssl/certs/ca-certificates.crt"   # roots for an https log (default: the system's)
//!
//! [rate_limits]
//! orders_per_account_per_hour = 3000
//! certificates_per_domain_per_week = 5000
//! new_accounts_per_hour = 500
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use signet_ipc::KeyAlgorithm;
use signet_runtime::config::SocketMode;
use signet_runtime::principals::{Principal, Principals};

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Timeouts and the connection bound of the HTTP listener (`[http]`; see
    /// `signet_runtime::http::HttpLimits`).
    #[serde(default)]
    pub http: signet_runtime::http::HttpLimits,
    /// The LMDB directory.
    pub state_dir: PathBuf,
    /// signd's socket.
    pub signd_socket: PathBuf,
    /// ocspd's registry socket.
    pub ocspd_socket: PathBuf,
    /// The issuer's name in signd (Issuer role) and ocspd (registry).
    pub issuer: String,
    /// The HTTPS address, unless socket-activated as `acmed-https`.
    pub listen: SocketAddr,
    /// The base URL clients reach acmed at (default `https://<listen>`).
    #[serde(default)]
    pub public_url: Option<String>,
    /// acmed's TLS certificate chain (PEM, leaf first).
    pub tls_certificate: PathBuf,
    /// acmed's TLS private key (PEM).
    pub tls_key: PathBuf,
    /// The issuing CA's chain up to the root (PEM, issuing CA first); certificates
    /// are served with it. Default: only the issuing CA certificate signd reports.
    #[serde(default)]
    pub chain: Option<PathBuf>,
    /// The port http-01 validation fetches from.
    #[serde(default = "default_http01_port")]
    pub http01_port: u16,
    /// The only port http-01 follows `https:` redirects to (as `http01_port` is for
    /// `http:` ones); default 443.
    #[serde(default = "default_http01_https_port")]
    pub http01_https_port: u16,
    /// The port tls-alpn-01 validation connects to.
    #[serde(default = "default_tlsalpn01_port")]
    pub tlsalpn01_port: u16,
    /// The DNS server validation asks (`ip:port`); default: the system resolver.
    #[serde(default)]
    pub dns_resolver: Option<SocketAddr>,
    /// CAA issuer domain names that mean this CA (RFC 8659); empty: no CAA check.
    #[serde(default)]
    pub caa_identities: Vec<String>,
    /// The longest a CAA answer is reused: each is reused for its TTL (the
    /// SOA minimum for an empty one), never longer than this. The Baseline
    /// Requirements (§3.2.2.8) let a CA rely on a CAA check for the TTL or 8
    /// hours, whichever is greater, so the default is 8 hours. 0: every check
    /// asks the DNS.
    #[serde(default = "default_caa_cache_max")]
    pub caa_cache_max_seconds: u64,
    /// finalize checks CAA again for each name whose authorization was
    /// validated at least this long ago (a reused one): CAA must have been
    /// checked within 8 hours of issuance (Baseline Requirements §3.2.2.8).
    /// Default 7 hours, as Let's Encrypt; at most 8 hours.
    #[serde(default = "default_caa_recheck_after")]
    pub caa_recheck_after_seconds: u64,
    /// The terms of service URL in the directory's meta.
    #[serde(default)]
    pub terms_of_service: Option<String>,
    /// The website URL in the directory's meta.
    #[serde(default)]
    pub website: Option<String>,
    /// Whether new accounts need an external account binding.
    #[serde(default)]
    pub external_account_required: bool,
    /// The profile used when an order names none (default: the first by name).
    #[serde(default)]
    pub default_profile: Option<String>,
    /// How long one challenge validation may take.
    #[serde(default = "default_validation_timeout")]
    pub validation_timeout_seconds: u64,
    /// How long a pending authorization and order live.
    #[serde(default = "default_order_lifetime")]
    pub order_lifetime_seconds: u64,
    /// How long a valid authorization lasts, and may be reused by the account's
    /// later orders for the same identifier (default 30 days; 0: no reuse).
    #[serde(default = "default_authz_lifetime")]
    pub authorization_lifetime_seconds: u64,
    /// Retry-After sent while an order or challenge is still processing.
    #[serde(default = "default_retry_after")]
    pub retry_after_seconds: u64,
    /// HTTP worker threads (default: the number of CPUs).
    #[serde(default)]
    pub http_threads: Option<usize>,
    /// Largest request body accepted, in bytes.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Named certificate profiles offered to clients.
    #[serde(default = "default_profiles")]
    pub profiles: BTreeMap<String, ProfileSettings>,
    /// Rate limits.
    #[serde(default)]
    pub rate_limits: RateLimits,
    /// The admin socket (Cap'n Proto, `acmed.capnp`), unless socket-activated as
    /// `acmed-admin`. Default: `admin.sock` in `state_dir`.
    #[serde(default)]
    pub admin_socket: Option<PathBuf>,
    /// Mode of the admin socket when acmed binds it (octal, default "0660").
    #[serde(default)]
    pub admin_socket_mode: SocketMode,
    /// `[admin]`: who may use the admin interface. Default: the uid acmed runs
    /// as, and root; when present, exactly those listed.
    #[serde(default)]
    pub admin: Option<Principals>,
    /// `[ct]`: Certificate Transparency. When set, certificates of the profiles
    /// that do not opt out carry SCTs from these logs (see `ct`).
    #[serde(default)]
    pub ct: Option<CtSettings>,
}

/// `[ct]`: the logs precertificates are submitted to, and the policy on their SCTs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtSettings {
    /// How long one log submission may take, connection included (ms); a slow or
    /// down log delays an issuance by at most this.
    #[serde(default = "default_ct_timeout_ms")]
    pub timeout_ms: u64,
    /// Which rule decides whether a certificate has enough SCTs; when it
    /// does not, the finalization fails (serverInternal: the order stays
    /// ready). Every `required` log must have given one in either case.
    #[serde(default)]
    pub policy: CtPolicyName,
    /// With `policy = "min_scts"`: the fewest valid SCTs a certificate is
    /// issued with (default 1); 0 issues without SCTs when every log fails.
    /// Not allowed with `policy = "chrome"`.
    #[serde(default)]
    pub min_scts: Option<usize>,
    /// How far an SCT's timestamp may be from acmed's clock (ms): at most this
    /// much after the answer arrived, at most this much before the submission
    /// was sent. An SCT outside is not counted (reason `timestamp`).
    #[serde(default = "default_ct_skew_ms")]
    pub max_skew_ms: u64,
    /// `[[ct.logs]]`: every log is asked, concurrently.
    pub logs: Vec<CtLogSettings>,
}

/// `[ct] policy`: how many valid SCTs a certificate needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CtPolicyName {
    /// `min_scts` of them (default).
    #[default]
    MinScts,
    /// Chrome's CT policy for embedded SCTs: 2 for a certificate valid at
    /// most 180 days, 3 beyond; and, when the logs name their `operator`,
    /// from at least two distinct operators.
    Chrome,
}

/// `[[ct.logs]]`: one RFC 6962 log.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtLogSettings {
    /// The log's submission prefix: `<url>ct/v1/add-pre-chain` is posted to
    /// (`http:` or `https:`; a missing trailing slash is added).
    pub url: String,
    /// The log's public key: base64 of its DER SubjectPublicKeyInfo, as in log lists.
    pub public_key: String,
    /// Whether no certificate may be issued without this log's SCT.
    #[serde(default)]
    pub required: bool,
    /// Who runs the log (as log lists name operators). The chrome policy
    /// wants SCTs from two distinct operators when the logs name theirs:
    /// every log, or none.
    #[serde(default)]
    pub operator: Option<String>,
    /// PEM roots that verify an `https:` log's TLS certificate (default: the
    /// system's trust store).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A temporal shard's NotAfter window, `[not_after_start, not_after_end)`
    /// (RFC 3339, both or neither): the log is asked only for certificates
    /// whose NotAfter falls in it, as the log itself takes no others. Give
    /// every shard of a log (the current one and the next) and each
    /// certificate goes to the one that takes it. A `required` shard is
    /// required only for the certificates of its window.
    #[serde(default)]
    pub not_after_start: Option<String>,
    /// See `not_after_start`.
    #[serde(default)]
    pub not_after_end: Option<String>,
}

impl CtLogSettings {
    /// The submission prefix, ending in `/`.
    pub fn prefix(&self) -> String {
        if self.url.ends_with('/') {
            self.url.clone()
        } else {
            format!("{}/", self.url)
        }
    }
}

/// `[profiles.<name>]`: what a client gets when its order names this profile.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSettings {
    /// Shown in the directory's `meta.profiles`.
    pub description: String,
    /// Certificate validity (capped by the issuer's profile in signd); also the longest
    /// validity an order's notBefore/notAfter may ask for (see `window`).
    #[serde(default)]
    pub validity_seconds: Option<u64>,
    /// Subject key algorithms allowed (default: all the issuer's profile allows).
    #[serde(default)]
    pub key_algorithms: Option<Vec<String>>,
    /// Whether certificates of this profile carry SCTs (default: yes when `[ct]`
    /// is set; `true` without `[ct]` is an error).
    #[serde(default)]
    pub ct: Option<bool>,
}

/// `[rate_limits]`: 0 turns a limit off.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    /// New orders one account may create per hour.
    #[serde(default = "default_orders_per_hour")]
    pub orders_per_account_per_hour: u32,
    /// Certificates per registered domain per week.
    #[serde(default = "default_certs_per_domain")]
    pub certificates_per_domain_per_week: u32,
    /// New accounts per hour, over all clients.
    #[serde(default = "default_accounts_per_hour")]
    pub new_accounts_per_hour: u32,
}

impl CtSettings {
    /// Checks the values serde cannot judge; the keys are parsed by `ct::CtLogs::new`.
    fn check(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err("[ct] timeout_ms must be 1..=60000".into());
        }
        if self.logs.is_empty() {
            return Err("[ct] needs at least one [[ct.logs]]".into());
        }
        match (self.policy, self.min_scts) {
            (CtPolicyName::MinScts, Some(n)) if n > self.logs.len() => {
                return Err(format!("[ct] min_scts = {n} but only {} log(s) are configured", self.logs.len()));
            }
            (CtPolicyName::Chrome, Some(_)) => {
                return Err("[ct] min_scts is for policy = \"min_scts\"; policy = \"chrome\" sets the count".into());
            }
            (CtPolicyName::Chrome, None) if self.logs.len() < 2 => {
                return Err("[ct] policy = \"chrome\" needs at least two [[ct.logs]]".into());
            }
            _ => {}
        }
        if !(1..=600_000).contains(&self.max_skew_ms) {
            return Err("[ct] max_skew_ms must be 1..=600000".into());
        }
        let named = self.logs.iter().filter(|l| l.operator.is_some()).count();
        if named != 0 && named != self.logs.len() {
            return Err("[[ct.logs]]: give every log an operator, or none".into());
        }
        if self.logs.iter().any(|l| l.operator.as_deref().is_some_and(|o| o.trim().is_empty())) {
            return Err("[[ct.logs]]: operator is empty".into());
        }
        if self.policy == CtPolicyName::Chrome && named != 0 {
            let mut operators: Vec<&str> = self.logs.iter().filter_map(|l| l.operator.as_deref()).collect();
            operators.sort_unstable();
            operators.dedup();
            if operators.len() < 2 {
                return Err("[ct] policy = \"chrome\" needs logs of at least two distinct operators".into());
            }
        }
        for (i, log) in self.logs.iter().enumerate() {
            let url =
                url::Url::parse(&log.url).map_err(|e| format!("[[ct.logs]] #{}: url {:?}: {e}", i + 1, log.url))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(format!("[[ct.logs]] #{}: url {:?} is not an http: or https: URL", i + 1, log.url));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(format!("[[ct.logs]] #{}: url {:?} has a query or fragment", i + 1, log.url));
            }
            if log.ca_file.is_some() && url.scheme() != "https" {
                return Err(format!("[[ct.logs]] #{}: ca_file is for https: logs", i + 1));
            }
            if self.logs[..i].iter().any(|l| l.prefix() == log.prefix()) {
                return Err(format!("[[ct.logs]] #{}: url {:?} is listed twice", i + 1, log.url));
            }
        }
        Ok(())
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            orders_per_account_per_hour: default_orders_per_hour(),
            certificates_per_domain_per_week: default_certs_per_domain(),
            new_accounts_per_hour: default_accounts_per_hour(),
        }
    }
}

impl Config {
    /// The base URL, without a trailing slash.
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("https://{}", self.listen)).trim_end_matches('/').to_owned()
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

    /// Checks the values serde cannot judge (the files the config names are
    /// checked by `DaemonConfig::check_config`, in the crate root).
    pub fn check(&self) -> Result<(), String> {
        if self.profiles.is_empty() {
            return Err("at least one [profiles.<name>] is needed".into());
        }
        if let Some(d) = &self.default_profile {
            if !self.profiles.contains_key(d) {
                return Err(format!("default_profile {d:?} is not among [profiles]"));
            }
        }
        for (name, p) in &self.profiles {
            if p.validity_seconds == Some(0) {
                return Err(format!("profiles.{name}.validity_seconds is 0"));
            }
            for alg in p.key_algorithms.iter().flatten() {
                alg.parse::<KeyAlgorithm>().map_err(|e| format!("profiles.{name}.key_algorithms: {e}"))?;
            }
        }
        if self.caa_recheck_after_seconds > MAX_CAA_AGE {
            return Err(format!(
                "caa_recheck_after_seconds is {}: at most {MAX_CAA_AGE} (CAA is checked within 8 hours of issuance)",
                self.caa_recheck_after_seconds
            ));
        }
        if self.validation_timeout_seconds == 0 || self.order_lifetime_seconds == 0 {
            return Err("validation_timeout_seconds and order_lifetime_seconds must be positive".into());
        }
        if self.max_body_bytes < 1024 {
            return Err("max_body_bytes must be at least 1024".into());
        }
        match &self.ct {
            Some(ct) => ct.check()?,
            None => {
                if let Some((name, _)) = self.profiles.iter().find(|(_, p)| p.ct == Some(true)) {
                    return Err(format!("profiles.{name}.ct = true needs a [ct] section"));
                }
            }
        }
        Ok(())
    }

    /// Whether orders of profile `name` get SCTs: `[ct]` is set and the profile
    /// does not opt out.
    pub fn ct_for(&self, profile: &str) -> Option<&CtSettings> {
        let wanted = self.profiles.get(profile).and_then(|p| p.ct).unwrap_or(true);
        self.ct.as_ref().filter(|_| wanted)
    }

    /// The profile an order without one gets.
    pub fn default_profile_name(&self) -> &str {
        self.default_profile.as_deref().or_else(|| self.profiles.keys().next().map(String::as_str)).unwrap_or("classic")
    }
}

fn default_http01_port() -> u16 {
    80
}
fn default_http01_https_port() -> u16 {
    443
}
fn default_tlsalpn01_port() -> u16 {
    443
}
/// The Baseline Requirements' bound on the age of a CAA check at issuance (§3.2.2.8).
const MAX_CAA_AGE: u64 = 8 * 3600;

fn default_caa_cache_max() -> u64 {
    8 * 3600
}
fn default_caa_recheck_after() -> u64 {
    7 * 3600
}
fn default_validation_timeout() -> u64 {
    10
}
fn default_order_lifetime() -> u64 {
    7 * 86_400
}
fn default_authz_lifetime() -> u64 {
    30 * 86_400
}
fn default_retry_after() -> u64 {
    1
}
fn default_max_body() -> usize {
    64 * 1024
}
fn default_orders_per_hour() -> u32 {
    30_000
}
fn default_certs_per_domain() -> u32 {
    50_000
}
fn default_accounts_per_hour() -> u32 {
    10_000
}
fn default_ct_timeout_ms() -> u64 {
    2000
}
fn default_ct_skew_ms() -> u64 {
    5000
}
fn default_profiles() -> BTreeMap<String, ProfileSettings> {
    let mut m = BTreeMap::new();
    m.insert(
        "classic".to_owned(),
        ProfileSettings {
            description: "TLS server certificates for the longest validity the CA allows".into(),
            validity_seconds: None,
            key_algorithms: None,
            ct: None,
        },
    );
    m.insert(
        "shortlived".to_owned(),
        ProfileSettings {
            description: "6-day TLS server certificates".into(),
            validity_seconds: Some(6 * 86_400),
            key_algorithms: None,
            ct: None,
        },
    );
    m
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MINIMAL: &str =
        "state_dir = \"/var/lib/a\"\nsignd_socket = \"/s\"\nocspd_socket = \"/o\"\nissuer = \"demo\"\n\
                           listen = \"127.0.0.1:1\"\ntls_certificate = \"/c\"\ntls_key = \"/k\"\n";

    #[test]
    fn admin_defaults_and_overrides() {
        let c: Config = toml::from_str(MINIMAL).unwrap();
        c.check().unwrap();
        assert_eq!(c.admin_socket_path(), PathBuf::from("/var/lib/a/admin.sock"));
        assert_eq!(c.admin_socket_mode.bits(), 0o660);
        assert_eq!(c.admins(1234), Principals { users: vec![Principal::Id(1234), Principal::Id(0)], groups: vec![] });

        let c: Config = toml::from_str(&format!(
            "{MINIMAL}admin_socket = \"/run/x.sock\"\nadmin_socket_mode = \"0600\"\n[admin]\ngroups = [\"signet-admin\"]\n"
        ))
        .unwrap();
        assert_eq!(c.admin_socket_path(), PathBuf::from("/run/x.sock"));
        assert_eq!(c.admin_socket_mode.bits(), 0o600);
        assert_eq!(c.admins(1234), Principals { users: vec![], groups: vec![Principal::Name("signet-admin".into())] });

        assert_eq!((c.http01_port, c.http01_https_port), (80, 443));
        let c: Config = toml::from_str(&format!("{MINIMAL}http01_https_port = 8443\n")).unwrap();
        assert_eq!(c.http01_https_port, 8443);
        assert!(toml::from_str::<Config>(&format!("{MINIMAL}http01_https_port = \"443\"\n")).is_err());
        // A bad mode is refused as the file is read.
        let e = signet_runtime::config::parse::<Config>(
            &format!("{MINIMAL}admin_socket_mode = \"rw\"\n"),
            std::path::Path::new("acmed.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("admin_socket_mode"), "{e}");
        assert!(toml::from_str::<Config>(&format!("{MINIMAL}[admin]\nuser = [0]\n")).is_err());
    }

    const CT: &str = "[ct]\ntimeout_ms = 500\n[[ct.logs]]\nurl = \"http://127.0.0.1:1/a\"\npublic_key = \"AA==\"\n\
                      [[ct.logs]]\nurl = \"https://ct.example/b/\"\npublic_key = \"AA==\"\nrequired = true\n";

    #[test]
    fn caa_reuse_is_bounded_by_the_baseline_requirements() {
        let c: Config = toml::from_str(MINIMAL).unwrap();
        assert_eq!((c.caa_cache_max_seconds, c.caa_recheck_after_seconds), (8 * 3600, 7 * 3600));
        let c: Config = toml::from_str(&format!("{MINIMAL}caa_recheck_after_seconds = 28800\n")).unwrap();
        c.check().unwrap();
        let c: Config = toml::from_str(&format!("{MINIMAL}caa_recheck_after_seconds = 28801\n")).unwrap();
        let e = c.check().unwrap_err();
        assert!(e.contains("caa_recheck_after_seconds is 28801"), "{e}");
    }

    #[test]
    fn ct_section() {
        let c: Config = toml::from_str(MINIMAL).unwrap();
        assert!(c.ct.is_none() && c.ct_for("classic").is_none());

        let c: Config = toml::from_str(&format!("{MINIMAL}{CT}")).unwrap();
        c.check().unwrap();
        let ct = c.ct_for("classic").unwrap();
        assert_eq!((ct.timeout_ms, ct.min_scts, ct.logs.len()), (500, None, 2));
        assert_eq!((ct.policy, ct.max_skew_ms), (CtPolicyName::MinScts, 5000));
        assert_eq!(ct.logs[0].prefix(), "http://127.0.0.1:1/a/");
        assert_eq!(ct.logs[1].prefix(), "https://ct.example/b/");
        assert!(!ct.logs[0].required && ct.logs[1].required);
        // Every profile, unless it opts out.
        assert!(c.ct_for("shortlived").is_some());
        let c: Config = toml::from_str(&format!(
            "{MINIMAL}[profiles.internal]\ndescription = \"x\"\nct = false\n[profiles.public]\ndescription = \"y\"\n{CT}"
        ))
        .unwrap();
        c.check().unwrap();
        assert!(c.ct_for("internal").is_none() && c.ct_for("public").is_some());

        let bad = |extra: &str| toml::from_str::<Config>(&format!("{MINIMAL}{extra}")).unwrap().check().unwrap_err();
        assert!(bad(&CT.replace("timeout_ms = 500", "min_scts = 3")).contains("min_scts"), "min_scts above the logs");
        assert!(bad("[ct]\nlogs = []\n").contains("at least one"));
        assert!(bad(&CT.replace("timeout_ms = 500", "timeout_ms = 0")).contains("timeout_ms"));
        assert!(bad(&CT.replace("http://127.0.0.1:1/a", "ftp://x/")).contains("not an http"));
        assert!(bad(&CT.replace("http://127.0.0.1:1/a", "https://ct.example/b")).contains("twice"));
        assert!(bad(&CT.replace("http://127.0.0.1:1/a", "http://x/?q")).contains("query"));
        assert!(bad(&CT.replace("required = true", "ca_file = \"/x\"").replace("https://ct", "http://ct"))
            .contains("ca_file"));
        assert!(bad("[profiles.p]\ndescription = \"x\"\nct = true\n").contains("needs a [ct]"));
        // The chrome policy: no min_scts, two logs at least, operators for all or none, two of them.
        let chrome = CT.replace("timeout_ms = 500", "policy = \"chrome\"");
        let c: Config = toml::from_str(&format!("{MINIMAL}{chrome}")).unwrap();
        c.check().unwrap();
        assert_eq!(c.ct.as_ref().unwrap().policy, CtPolicyName::Chrome);
        assert!(bad(&chrome.replace("policy", "min_scts = 2\npolicy")).contains("min_scts is for"));
        let one_log = "[ct]\npolicy = \"chrome\"\n[[ct.logs]]\nurl = \"http://x/\"\npublic_key = \"AA==\"\n";
        assert!(bad(one_log).contains("at least two"));
        let op = |a: &str, b: &str| {
            chrome
                .replace("public_key = \"AA==\"\n[[", &format!("public_key = \"AA==\"\n{a}[["))
                .replace("required = true\n", &format!("required = true\n{b}"))
        };
        let c: Config =
            toml::from_str(&format!("{MINIMAL}{}", op("operator = \"A\"\n", "operator = \"B\"\n"))).unwrap();
        c.check().unwrap();
        assert_eq!(c.ct.as_ref().unwrap().logs[1].operator.as_deref(), Some("B"));
        assert!(bad(&op("operator = \"A\"\n", "")).contains("every log an operator, or none"));
        assert!(bad(&op("operator = \"A\"\n", "operator = \"A\"\n")).contains("two distinct operators"));
        assert!(bad(&op("operator = \" \"\n", "operator = \"A\"\n")).contains("empty"));
        assert!(bad(&CT.replace("timeout_ms = 500", "max_skew_ms = 0")).contains("max_skew_ms"));
        assert!(toml::from_str::<Config>(&format!("{MINIMAL}{}", CT.replace("timeout_ms = 500", "policy = \"x\"")))
            .is_err());
        // Strict: unknown keys in [ct] and [[ct.logs]] are refused.
        assert!(toml::from_str::<Config>(&format!("{MINIMAL}{}", CT.replace("timeout_ms", "timeout"))).is_err());
        assert!(toml::from_str::<Config>(&format!("{MINIMAL}{CT}key = \"x\"\n")).is_err());
    }
}
