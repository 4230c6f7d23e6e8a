//! probed's configuration (TOML, strict: unknown keys, bad regexes and bad URLs are errors naming
//! the file, line and key).
//!
//! ```toml
//! state_dir = "/var/lib/signet/probed"   # LMDB: results, aggregates, check states
//! listen = "127.0.0.1:8095"              # status page, JSON API, /metrics (unless socket-activated)
//!
//! [defaults]                             # every check's defaults; these are the built-in ones
//! interval = "30s"
//! timeout = "10s"
//! retries = 0                            # extra attempts before a run counts as failed
//! jitter = "1s"                          # each run starts up to this much late
//! down_after = 1                         # failed runs in a row before a check is down
//! up_after = 1                           # successful runs in a row before it is up again
//!
//! [checks.web]
//! kind = "http"                          # http | tcp | tls | dns | ocsp | crl | ct | signd
//! url = "https://www.example.net/"
//! expect_status = [200]
//! expect_body = "Welcome"
//!
//! [[webhooks]]
//! url = "http://127.0.0.1:9000/hook"
//! format = "json"                        # or "slack"
//! repeat = "1h"                          # reminders while down; "0s" for none
//! ```
//!
//! The keys of each kind are in [`CheckConfig`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use signet_runtime::config::DaemonConfig;

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
    /// The HTTP address, unless socket-activated as `probed-http`.
    pub listen: SocketAddr,
    /// The status page's refresh period in seconds.
    #[serde(default = "default_refresh")]
    pub refresh_seconds: u32,
    /// Defaults for every check.
    #[serde(default)]
    pub defaults: Defaults,
    /// The checks, by name.
    #[serde(default)]
    pub checks: BTreeMap<String, CheckConfig>,
    /// Where state changes are posted.
    #[serde(default)]
    pub webhooks: Vec<WebhookConfig>,
}

fn default_refresh() -> u32 {
    30
}

/// `[defaults]`: what a check does not set itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Time between runs.
    #[serde(default = "default_interval", deserialize_with = "duration")]
    pub interval: Duration,
    /// Longest one attempt may take.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// Extra attempts before a run counts as failed.
    #[serde(default)]
    pub retries: u32,
    /// Each run starts up to this much after its interval (random, spreads load).
    #[serde(default = "default_jitter", deserialize_with = "duration")]
    pub jitter: Duration,
    /// Failed runs in a row before a check is down.
    #[serde(default = "one")]
    pub down_after: u32,
    /// Successful runs in a row before a down check is up.
    #[serde(default = "one")]
    pub up_after: u32,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            interval: default_interval(),
            timeout: default_timeout(),
            retries: 0,
            jitter: default_jitter(),
            down_after: 1,
            up_after: 1,
        }
    }
}

fn default_interval() -> Duration {
    Duration::from_secs(30)
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_jitter() -> Duration {
    Duration::from_secs(1)
}
fn one() -> u32 {
    1
}

/// What a check probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An HTTP(S) request and its answer.
    Http,
    /// A TCP connection.
    Tcp,
    /// A TLS handshake: chain, hostname, expiry, stapling.
    Tls,
    /// A DNS record through a resolver.
    Dns,
    /// A certificate's OCSP status from its responder.
    Ocsp,
    /// A CRL's freshness, signature and number.
    Crl,
    /// A CT log's checkpoint: signature, age, growth, consistency.
    Ct,
    /// signd's health and a test signature's latency through a probe key.
    Signd,
}

impl Kind {
    /// The kind as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Tcp => "tcp",
            Kind::Tls => "tls",
            Kind::Dns => "dns",
            Kind::Ocsp => "ocsp",
            Kind::Crl => "crl",
            Kind::Ct => "ct",
            Kind::Signd => "signd",
        }
    }
}

/// The HTTP version an HTTP check speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
pub enum HttpVersion {
    /// HTTP/2 when TLS ALPN picks it, else HTTP/1.1.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// HTTP/1.1 only.
    #[serde(rename = "1.1")]
    Http1,
    /// HTTP/2 only: ALPN `h2` over TLS, prior knowledge (h2c) over plain TCP.
    #[serde(rename = "2")]
    Http2,
}

/// `[checks.<name>]`: one check. `kind` says which keys apply; [`DaemonConfig::check_config`]
/// refuses keys that do not apply to the kind and missing ones that must be there.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    /// What is probed.
    pub kind: Kind,
    /// Shown on the status page (default: the name).
    #[serde(default)]
    pub description: Option<String>,
    /// Overrides `[defaults] interval`.
    #[serde(default, deserialize_with = "opt_duration")]
    pub interval: Option<Duration>,
    /// Overrides `[defaults] timeout`.
    #[serde(default, deserialize_with = "opt_duration")]
    pub timeout: Option<Duration>,
    /// Overrides `[defaults] retries`.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Overrides `[defaults] jitter`.
    #[serde(default, deserialize_with = "opt_duration")]
    pub jitter: Option<Duration>,
    /// Overrides `[defaults] down_after`.
    #[serde(default)]
    pub down_after: Option<u32>,
    /// Overrides `[defaults] up_after`.
    #[serde(default)]
    pub up_after: Option<u32>,

    /// http: the URL; ocsp: the responder (default: from the certificate's AIA); crl: the CRL's
    /// URL; ct: the log's monitoring prefix (its `checkpoint` and `tile/` are under it).
    #[serde(default)]
    pub url: Option<HttpUrl>,
    /// http: the method (default GET).
    #[serde(default)]
    pub method: Option<String>,
    /// http: request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// http: the request body.
    #[serde(default)]
    pub body: Option<String>,
    /// http: accepted status codes (default: any 2xx).
    #[serde(default)]
    pub expect_status: Vec<u16>,
    /// http: a substring the body must contain.
    #[serde(default)]
    pub expect_body: Option<String>,
    /// http: a regular expression the body must match.
    #[serde(default)]
    pub expect_body_regex: Option<Pattern>,
    /// http: response headers that must be present and contain the given value.
    #[serde(default)]
    pub expect_headers: BTreeMap<String, String>,
    /// http: values the body, parsed as JSON, must hold at JSON pointers (`{ "/status" = "ok" }`).
    #[serde(default)]
    pub expect_json: BTreeMap<String, serde_json::Value>,
    /// http: the longest a successful answer may take.
    #[serde(default, deserialize_with = "opt_duration")]
    pub max_latency: Option<Duration>,
    /// http: `"auto"`, `"1.1"` or `"2"`.
    #[serde(default)]
    pub http_version: HttpVersion,
    /// http: keep connections open between runs (default true); false opens one per run.
    #[serde(default = "yes")]
    pub reuse_connections: bool,
    /// http, tls: the CA bundle (PEM) server chains must verify to (default: the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,

    /// tcp, tls: `host:port`.
    #[serde(default)]
    pub address: Option<String>,
    /// tls: the name the certificate must be valid for (default: the host of `address`).
    #[serde(default)]
    pub server_name: Option<String>,
    /// tls: fail when the earliest certificate of the chain expires in fewer days.
    #[serde(default)]
    pub min_days: Option<u32>,
    /// tls: fail without a stapled OCSP response.
    #[serde(default)]
    pub require_stapling: bool,

    /// dns: the name looked up.
    #[serde(default)]
    pub name: Option<String>,
    /// dns: the record type (default A).
    #[serde(default)]
    pub record_type: Option<String>,
    /// dns: the resolver (`ip:port`; default: the system's).
    #[serde(default)]
    pub resolver: Option<SocketAddr>,
    /// dns: the records expected, as text (all present, nothing else); empty: any record.
    #[serde(default)]
    pub expect: Vec<String>,

    /// ocsp: the certificate (PEM) whose status is asked; ct: a certificate with an SCT from
    /// the log embedded, whose entry must be in the log's tree (then `issuer` is needed too).
    #[serde(default)]
    pub certificate: Option<PathBuf>,
    /// ocsp, crl: the issuer certificate (PEM) that signs the response or CRL; ct: the
    /// certificate's issuer (its key hash is part of the SCT's entry).
    #[serde(default)]
    pub issuer: Option<PathBuf>,
    /// ocsp, crl: fail when nextUpdate is nearer than this.
    #[serde(default, deserialize_with = "opt_duration")]
    pub min_margin: Option<Duration>,
    /// ocsp, crl: fail when thisUpdate is older than this; ct: when the checkpoint is.
    #[serde(default, deserialize_with = "opt_duration")]
    pub max_age: Option<Duration>,

    /// ct: the checkpoint's origin line (default: `url` without scheme and trailing `/`).
    #[serde(default)]
    pub origin: Option<String>,
    /// ct: the log's public key, base64 DER SubjectPublicKeyInfo.
    #[serde(default)]
    pub public_key: Option<String>,

    /// signd: its socket.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// signd: the probe key a test message is signed with (default: only signd's health).
    #[serde(default)]
    pub key: Option<String>,
    /// signd: the role the signature is asked in (default: the caller's first role).
    #[serde(default)]
    pub role: Option<String>,
}

fn yes() -> bool {
    true
}

/// A check with its defaults applied.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Time between runs.
    pub interval: Duration,
    /// Longest one attempt may take.
    pub timeout: Duration,
    /// Extra attempts.
    pub retries: u32,
    /// Most random delay added to a run's start.
    pub jitter: Duration,
    /// Failed runs in a row before down.
    pub down_after: u32,
    /// Successful runs in a row before up.
    pub up_after: u32,
}

impl CheckConfig {
    /// The schedule of this check under `defaults`.
    pub fn schedule(&self, d: &Defaults) -> Schedule {
        Schedule {
            interval: self.interval.unwrap_or(d.interval),
            timeout: self.timeout.unwrap_or(d.timeout),
            retries: self.retries.unwrap_or(d.retries),
            jitter: self.jitter.unwrap_or(d.jitter),
            down_after: self.down_after.unwrap_or(d.down_after).max(1),
            up_after: self.up_after.unwrap_or(d.up_after).max(1),
        }
    }

    fn check(&self, name: &str, defaults: &Defaults) -> Result<(), String> {
        let bad = |what: &str| Err(format!("check `{name}`: {what}"));
        if name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
            return bad("the name must be 1-128 printable characters without `\"` or `\\`");
        }
        let s = self.schedule(defaults);
        if s.interval < Duration::from_millis(100) {
            return bad("interval must be at least 100ms");
        }
        if s.timeout.is_zero() {
            return bad("timeout must be more than 0");
        }
        if s.retries > 10 {
            return bad("retries must be at most 10");
        }
        let need = |present: bool, key: &str| -> Result<(), String> {
            if present {
                Ok(())
            } else {
                Err(format!("check `{name}`: kind `{}` needs `{key}`", self.kind.as_str()))
            }
        };
        let url_scheme = |schemes: &[&str]| -> Result<(), String> {
            match &self.url {
                Some(u) if !schemes.contains(&u.0.scheme()) => {
                    Err(format!("check `{name}`: url `{}` must be {}", u.0, schemes.join(" or ")))
                }
                _ => Ok(()),
            }
        };
        match self.kind {
            Kind::Http => {
                need(self.url.is_some(), "url")?;
                url_scheme(&["http", "https"])?;
                if let Some(m) = &self.method {
                    if hyper::Method::from_bytes(m.as_bytes()).is_err() {
                        return bad(&format!("method `{m}` is not an HTTP method"));
                    }
                }
                if let Some(p) = self.expect_json.keys().find(|p| !p.is_empty() && !p.starts_with('/')) {
                    return bad(&format!("expect_json key `{p}` is not a JSON pointer (\"/a/0/b\")"));
                }
                for code in &self.expect_status {
                    if !(100..=599).contains(code) {
                        return bad(&format!("expect_status {code} is not an HTTP status"));
                    }
                }
                for (k, v) in self.headers.iter().chain(&self.expect_headers) {
                    if hyper::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || hyper::header::HeaderValue::from_str(v).is_err()
                    {
                        return bad(&format!("header `{k}` is not a valid header"));
                    }
                }
            }
            Kind::Tcp | Kind::Tls => {
                need(self.address.is_some(), "address")?;
                if let Some(a) = &self.address {
                    if split_host_port(a).is_none() {
                        return bad(&format!("address `{a}` is not host:port"));
                    }
                }
            }
            Kind::Dns => {
                need(self.name.is_some(), "name")?;
                if let Some(t) = &self.record_type {
                    if t.parse::<hickory_resolver::proto::rr::RecordType>().is_err() {
                        return bad(&format!("record_type `{t}` is not a DNS record type"));
                    }
                }
            }
            Kind::Ocsp => {
                need(self.certificate.is_some(), "certificate")?;
                need(self.issuer.is_some(), "issuer")?;
                url_scheme(&["http", "https"])?;
            }
            Kind::Crl => {
                need(self.url.is_some(), "url")?;
                need(self.issuer.is_some(), "issuer")?;
                url_scheme(&["http", "https"])?;
            }
            Kind::Signd => need(self.socket.is_some(), "socket")?,
            Kind::Ct => {
                need(self.url.is_some(), "url")?;
                need(self.public_key.is_some(), "public_key")?;
                if self.certificate.is_some() {
                    need(self.issuer.is_some(), "issuer")?;
                }
                url_scheme(&["http", "https"])?;
                if let Some(key) = &self.public_key {
                    use base64::Engine;
                    let der = base64::engine::general_purpose::STANDARD
                        .decode(key.trim())
                        .map_err(|e| format!("check `{name}`: public_key: {e}"))?;
                    signet_ct::LogKey::from_spki_der(&der).map_err(|e| format!("check `{name}`: public_key: {e}"))?;
                }
            }
        }
        if let (Kind::Ocsp, None, Some(path)) = (self.kind, &self.url, &self.certificate) {
            let pem = std::fs::read(path).map_err(|e| format!("check `{name}`: {}: {e}", path.display()))?;
            let has_aia = openssl::x509::X509::from_pem(&pem)
                .ok()
                .and_then(|c| c.ocsp_responders().ok())
                .is_some_and(|r| !r.is_empty());
            if !has_aia {
                return bad("the certificate names no OCSP responder (AIA); give `url`");
            }
        }
        for path in [&self.ca_file, &self.certificate, &self.issuer].into_iter().flatten() {
            let pem = std::fs::read(path).map_err(|e| format!("check `{name}`: {}: {e}", path.display()))?;
            openssl::x509::X509::stack_from_pem(&pem)
                .ok()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("check `{name}`: {}: no PEM certificate", path.display()))?;
        }
        Ok(())
    }
}

/// `[[webhooks]]`: where state changes are posted.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The URL a JSON body is POSTed to.
    pub url: HttpUrl,
    /// `"json"` (probed's own body) or `"slack"` (`{"text": ...}`, for Slack-compatible hooks).
    #[serde(default)]
    pub format: WebhookFormat,
    /// Reminders while a check stays down, this often; `"0s"` (the default) for none.
    #[serde(default, deserialize_with = "duration")]
    pub repeat: Duration,
    /// Only these checks (default: all).
    #[serde(default)]
    pub checks: Vec<String>,
    /// The CA bundle an `https` hook's certificate must verify to (default: the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// A webhook body's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// `{"check": ..., "event": "down"|"resolved"|"reminder", ...}`.
    #[default]
    Json,
    /// `{"text": "..."}`.
    Slack,
}

/// What `--check-config`, start and SIGHUP check beyond syntax.
impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        self.http.check()?;
        if !self.state_dir.is_absolute() {
            return Err(format!("state_dir {} is not absolute", self.state_dir.display()));
        }
        if self.refresh_seconds == 0 {
            return Err("refresh_seconds must be at least 1".into());
        }
        for (name, check) in &self.checks {
            check.check(name, &self.defaults)?;
        }
        for (i, hook) in self.webhooks.iter().enumerate() {
            if !matches!(hook.url.0.scheme(), "http" | "https") {
                return Err(format!("webhooks[{i}]: url `{}` must be http or https", hook.url.0));
            }
            if let Some(unknown) = hook.checks.iter().find(|c| !self.checks.contains_key(*c)) {
                return Err(format!("webhooks[{i}]: no check named `{unknown}`"));
            }
        }
        Ok(())
    }
}

/// An absolute URL, refused when the file is read if it does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl(pub url::Url);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let url = url::Url::parse(&text).map_err(|e| serde::de::Error::custom(format!("bad URL `{text}`: {e}")))?;
        if url.host_str().is_none() {
            return Err(serde::de::Error::custom(format!("bad URL `{text}`: no host")));
        }
        Ok(HttpUrl(url))
    }
}

/// A regular expression, refused when the file is read if it does not compile.
#[derive(Clone, Debug)]
pub struct Pattern(pub regex::Regex);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text)
            .map(Pattern)
            .map_err(|e| serde::de::Error::custom(format!("bad regular expression: {}", one_line(&e.to_string()))))
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A duration written `"500ms"`, `"30s"`, `"5m"`, `"2h"` or `"7d"`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit {
        "ms" => n,
        "s" => n.checked_mul(1000)?,
        "m" => n.checked_mul(60_000)?,
        "h" => n.checked_mul(3_600_000)?,
        "d" => n.checked_mul(86_400_000)?,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).ok_or_else(|| {
        serde::de::Error::custom(format!("`{text}` is not a duration such as \"500ms\", \"30s\", \"5m\""))
    })
}

fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// `host:port` split, with `[v6]:port` unbracketed.
pub fn split_host_port(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    Some((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, String> {
        signet_runtime::config::parse::<Config>(text, Path::new("/etc/signet/probed.toml")).map_err(|e| e.to_string())
    }

    const BASE: &str = "state_dir = \"/tmp/p\"\nlisten = \"127.0.0.1:8095\"\n";

    #[test]
    fn defaults_and_overrides() {
        let c = parse(&format!(
            "{BASE}[defaults]\ninterval = \"5s\"\n[checks.a]\nkind = \"http\"\nurl = \"http://x/\"\ntimeout = \"500ms\"\n\
             [checks.b]\nkind = \"tcp\"\naddress = \"127.0.0.1:1\"\ndown_after = 3\n"
        ))
        .unwrap();
        c.check_config().unwrap();
        let a = c.checks["a"].schedule(&c.defaults);
        assert_eq!((a.interval, a.timeout, a.down_after), (Duration::from_secs(5), Duration::from_millis(500), 1));
        assert_eq!(c.checks["b"].schedule(&c.defaults).down_after, 3);
        assert!(c.checks["a"].reuse_connections);
    }

    #[test]
    fn refusals_name_file_line_and_key() {
        let e = parse(&format!("{BASE}[checks.a]\nkind = \"http\"\nurl = \"http://x/\"\nexpect_bdy = \"x\"\n"))
            .unwrap_err();
        assert!(e.starts_with("/etc/signet/probed.toml:6:1: unknown key `expect_bdy`"), "{e}");
        let e = parse(&format!("{BASE}[checks.a]\nkind = \"http\"\nurl = \"http://x/\"\nexpect_body_regex = \"a(\"\n"))
            .unwrap_err();
        assert!(e.starts_with("/etc/signet/probed.toml:6:"), "{e}");
        assert!(e.contains("key `expect_body_regex`") && e.contains("bad regular expression"), "{e}");
        let e = parse(&format!("{BASE}[checks.a]\nkind = \"http\"\nurl = \"http//x\"\n")).unwrap_err();
        assert!(e.starts_with("/etc/signet/probed.toml:5:") && e.contains("key `url`: bad URL"), "{e}");
        let e = parse(&format!("{BASE}[checks.a]\nkind = \"smtp\"\n")).unwrap_err();
        assert!(e.contains(":4:"), "{e}");
        let e = parse(&format!("{BASE}[defaults]\ninterval = \"5 parsecs\"\n")).unwrap_err();
        assert!(e.contains("key `interval`"), "{e}");
    }

    #[test]
    fn kind_needs_its_keys() {
        let c = parse(&format!("{BASE}[checks.a]\nkind = \"tcp\"\n")).unwrap();
        assert!(c.check_config().unwrap_err().contains("needs `address`"));
        let c = parse(&format!("{BASE}[checks.a]\nkind = \"http\"\nurl = \"ftp://x/\"\n")).unwrap();
        assert!(c.check_config().unwrap_err().contains("http or https"));
        let c = parse(&format!("{BASE}[checks.a]\nkind = \"dns\"\nname = \"x\"\nrecord_type = \"QQ\"\n")).unwrap();
        assert!(c.check_config().unwrap_err().contains("record_type"));
        let c =
            parse(&format!("{BASE}[checks.a]\nkind = \"ct\"\nurl = \"http://x/\"\npublic_key = \"AAAA\"\n")).unwrap();
        assert!(c.check_config().unwrap_err().contains("public_key"));
        let c = parse(&format!("{BASE}[[webhooks]]\nurl = \"http://h/\"\nchecks = [\"nope\"]\n")).unwrap();
        assert!(c.check_config().unwrap_err().contains("nope"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_duration("5"), None);
        assert_eq!(split_host_port("[::1]:443"), Some(("::1".into(), 443)));
        assert_eq!(split_host_port("x"), None);
    }
}
