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
//! tlsalpn01_port = 443                     # where tls-alpn-01 connects
//! dns_resolver = "127.0.0.1:53"            # default: the system's resolv.conf
//! caa_identities = ["signet.example"]      # empty: CAA is not checked
//! terms_of_service = "https://acme.example/tos"
//! website = "https://acme.example"
//! external_account_required = false
//! default_profile = "classic"
//! validation_timeout_seconds = 10
//! authorization_lifetime_seconds = 2592000  # valid authorizations are reused this long
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

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
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
    /// The port tls-alpn-01 validation connects to.
    #[serde(default = "default_tlsalpn01_port")]
    pub tlsalpn01_port: u16,
    /// The DNS server validation asks (`ip:port`); default: the system resolver.
    #[serde(default)]
    pub dns_resolver: Option<SocketAddr>,
    /// CAA issuer domain names that mean this CA (RFC 8659); empty: no CAA check.
    #[serde(default)]
    pub caa_identities: Vec<String>,
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
}

/// `[profiles.<name>]`: what a client gets when its order names this profile.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSettings {
    /// Shown in the directory's `meta.profiles`.
    pub description: String,
    /// Certificate validity (capped by the issuer's profile in signd).
    #[serde(default)]
    pub validity_seconds: Option<u64>,
    /// Subject key algorithms allowed (default: all the issuer's profile allows).
    #[serde(default)]
    pub key_algorithms: Option<Vec<String>>,
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

    /// Checks what serde cannot.
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
        if self.validation_timeout_seconds == 0 || self.order_lifetime_seconds == 0 {
            return Err("validation_timeout_seconds and order_lifetime_seconds must be positive".into());
        }
        if self.max_body_bytes < 1024 {
            return Err("max_body_bytes must be at least 1024".into());
        }
        Ok(())
    }

    /// The profile an order without one gets.
    pub fn default_profile_name(&self) -> &str {
        self.default_profile.as_deref().or_else(|| self.profiles.keys().next().map(String::as_str)).unwrap_or("classic")
    }
}

fn default_http01_port() -> u16 {
    80
}
fn default_tlsalpn01_port() -> u16 {
    443
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
fn default_profiles() -> BTreeMap<String, ProfileSettings> {
    let mut m = BTreeMap::new();
    m.insert(
        "classic".to_owned(),
        ProfileSettings { description: "TLS server certificates for the longest validity the CA allows".into(), validity_seconds: None, key_algorithms: None },
    );
    m.insert(
        "shortlived".to_owned(),
        ProfileSettings { description: "6-day TLS server certificates".into(), validity_seconds: Some(6 * 86_400), key_algorithms: None },
    );
    m
}
