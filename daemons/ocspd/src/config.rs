//! ocspd's configuration (TOML, strict: unknown keys are errors).
//!
//! ```toml
//! socket = "/run/signet/ocspd.sock"     # the registry interface (Cap'n Proto)
//! socket_mode = "0660"
//! state_dir = "/var/lib/signet/ocspd"   # LMDB
//! signd_socket = "/run/signet/signd.sock"
//! listen = "127.0.0.1:8080"             # HTTP, unless socket-activated as `ocspd-http`
//! public_url = "http://ocsp.example"    # default: http://<listen>
//! max_fresh_signatures = 256            # concurrent signatures for nonces/unknown serials
//! fresh_per_client = { per_second = 20, burst = 100 }  # optional: fresh signatures one client may cause
//!
//! [issuers.demo]                        # the name of the issuer in signd's config
//! registrars = { users = ["acmed", 0] } # who may record issuance and revocation
//! response_validity_seconds = 86400     # thisUpdate .. nextUpdate of OCSP responses
//! refresh_before_seconds = 43200        # re-sign this long before nextUpdate
//! cache_max_age_seconds = 3600          # HTTP max-age; never past nextUpdate
//! nonce = "echo"                        # or "ignore": serve cached responses only
//! crl_validity_seconds = 86400
//! crl_base_interval_seconds = 3600      # how often the delta CRLs' base moves on
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use signet_runtime::config::{DaemonConfig, SocketMode};
use signet_runtime::principals::Principals;

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Timeouts and the connection bound of the HTTP listener (`[http]`; see
    /// `signet_runtime::http::HttpLimits`).
    #[serde(default)]
    pub http: signet_runtime::http::HttpLimits,
    /// The registry socket (Cap'n Proto), unless socket-activated as `ocspd`.
    pub socket: PathBuf,
    /// Mode of the registry socket when ocspd binds it (octal, default "0660").
    #[serde(default)]
    pub socket_mode: SocketMode,
    /// The LMDB directory.
    pub state_dir: PathBuf,
    /// signd's socket.
    pub signd_socket: PathBuf,
    /// The HTTP address, unless socket-activated as `ocspd-http`.
    pub listen: SocketAddr,
    /// The base URL relying parties reach `listen` at (default `http://<listen>`),
    /// for the CRL URLs ocspd reports.
    #[serde(default)]
    pub public_url: Option<String>,
    /// OCSP responses signed on the request path (nonces, unknown serials) at
    /// once; requests beyond it get `tryLater` (default 256).
    #[serde(default = "default_max_fresh")]
    pub max_fresh_signatures: usize,
    /// Fresh signatures (nonces, unknown serials) one client may cause: a
    /// token bucket per client address (IPv6 per /64); past it the client
    /// hears `tryLater` while pre-signed answers keep flowing to it. Default:
    /// no per-client limit, only `max_fresh_signatures`.
    #[serde(default)]
    pub fresh_per_client: Option<ClientRate>,
    /// HTTP threads, each serving the connections it accepts to their end (default: the number of CPUs).
    #[serde(default)]
    pub http_threads: Option<usize>,
    /// The CAs served, by their signd issuer name.
    pub issuers: BTreeMap<String, IssuerSettings>,
}

impl Config {
    /// The base URL of the HTTP side, without a trailing slash.
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{}", self.listen)).trim_end_matches('/').to_owned()
    }
}

/// What `--check-config` and start check beyond the file's syntax: at least one issuer, each
/// with sound settings and registrars that exist. Whether signd knows the issuers is learnt at
/// start.
impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        self.http.check()?;
        if self.issuers.is_empty() {
            return Err("no [issuers.<name>] configured".into());
        }
        for (name, s) in &self.issuers {
            s.check(name)?;
            s.registrars.resolve().map_err(|e| format!("issuer `{name}`: registrars: {e}"))?;
        }
        Ok(())
    }
}

/// A token bucket: `burst` at once, refilled at `per_second`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRate {
    /// Tokens added per second.
    pub per_second: std::num::NonZeroU32,
    /// The bucket's size (default: one second's worth).
    #[serde(default)]
    pub burst: Option<std::num::NonZeroU32>,
}

fn default_max_fresh() -> usize {
    256
}

/// What to do with a request's nonce (RFC 8954).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoncePolicy {
    /// Sign a fresh response that echoes the nonce.
    Echo,
    /// Serve the pre-signed response without a nonce (RFC 8954 allows it).
    Ignore,
}

/// `[issuers.<name>]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerSettings {
    /// Who may record issuance and revocation for this CA.
    #[serde(default)]
    pub registrars: Principals,
    /// nextUpdate - thisUpdate of OCSP responses.
    #[serde(default = "default_response_validity")]
    pub response_validity_seconds: u64,
    /// Re-sign a response when its nextUpdate is this close. Default: half the validity.
    #[serde(default)]
    pub refresh_before_seconds: Option<u64>,
    /// HTTP max-age of a cached response (capped at its nextUpdate).
    #[serde(default = "default_cache_max_age")]
    pub cache_max_age_seconds: u64,
    /// Nonce handling.
    #[serde(default = "default_nonce")]
    pub nonce: NoncePolicy,
    /// nextUpdate - thisUpdate of CRLs.
    #[serde(default = "default_crl_validity")]
    pub crl_validity_seconds: u64,
    /// How often a new base for delta CRLs is chosen (the newest full CRL then).
    #[serde(default = "default_crl_base_interval")]
    pub crl_base_interval_seconds: u64,
}

fn default_response_validity() -> u64 {
    86_400
}
fn default_cache_max_age() -> u64 {
    3_600
}
fn default_nonce() -> NoncePolicy {
    NoncePolicy::Echo
}
fn default_crl_validity() -> u64 {
    86_400
}
fn default_crl_base_interval() -> u64 {
    3_600
}

impl IssuerSettings {
    /// How long before nextUpdate a response is re-signed.
    pub fn refresh_before(&self) -> u64 {
        self.refresh_before_seconds.unwrap_or(self.response_validity_seconds / 2)
    }

    /// Checks values that parse but make no sense.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let bad = |what: &str| Err(format!("issuer `{name}`: {what}"));
        if self.response_validity_seconds < 60 {
            return bad("response_validity_seconds must be at least 60");
        }
        if self.refresh_before() >= self.response_validity_seconds {
            return bad("refresh_before_seconds must be less than response_validity_seconds");
        }
        if self.crl_validity_seconds < 60 {
            return bad("crl_validity_seconds must be at least 60");
        }
        if self.crl_base_interval_seconds == 0 {
            return bad("crl_base_interval_seconds must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_and_strictness() {
        let c: Config = toml::from_str(
            r#"
            socket = "/tmp/o.sock"
            state_dir = "/tmp/o"
            signd_socket = "/tmp/s.sock"
            listen = "127.0.0.1:0"
            [issuers.demo]
            registrars = { users = [0] }
            "#,
        )
        .unwrap();
        let demo = &c.issuers["demo"];
        assert_eq!(demo.nonce, NoncePolicy::Echo);
        assert_eq!(demo.refresh_before(), 43_200);
        demo.check("demo").unwrap();
        let typo = toml::from_str::<Config>(
            "socket = \"/a\"\nstate_dir = \"/b\"\nsignd_socket = \"/c\"\nlisten = \"127.0.0.1:1\"\nissuers = {}\nlissen = 1\n",
        );
        assert!(typo.unwrap_err().to_string().contains("lissen"));
    }

    #[test]
    fn nonsense_values_are_refused() {
        let s: IssuerSettings =
            toml::from_str("response_validity_seconds = 100\nrefresh_before_seconds = 100").unwrap();
        assert!(s.check("x").unwrap_err().contains("refresh_before_seconds"));
    }
}
