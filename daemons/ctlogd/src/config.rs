//! ctlogd's configuration (TOML, strict: unknown keys are errors).
//!
//! ```toml
//! state_dir = "/var/lib/signet/ctlogd"     # LMDB: sequencing state, dedup, leaf index
//! signd_socket = "/run/signet/signd.sock"
//! listen = "127.0.0.1:8090"                 # HTTP, unless socket-activated as `ctlogd-http`
//! public_url = "https://ct.example.net"     # default: http://<listen>
//! roots = ["/etc/signet/ct-roots.pem"]      # accepted roots (PEM), re-read on SIGHUP
//! admin_socket = "/run/signet/ctlogd.sock"  # the admin interface (signetctl ct shard), unless
//!                                           # socket-activated as `ctlogd-admin`;
//!                                           # default <state_dir>/admin.sock
//! admin_socket_mode = "0660"
//!
//! [admin]                                   # who may add shards; default: ctlogd's own uid and
//! users = ["root"]                          # root; re-read on SIGHUP
//! groups = ["signet-admin"]
//!
//! [sequencing]                              # optional; these are the defaults
//! max_batch = 256                           # entries per batch (and per signd call)
//! max_age_ms = 500                          # longest a submission waits for its batch
//! backlog = 8192                            # submissions waiting; more get 429
//! retry_after_seconds = 1
//! refresh_seconds = 10                      # a fresh tree head at least this often
//! partial_tile_grace_seconds = 60           # a partial tile is deleted this long after a
//!                                           # checkpoint with a wider version was published
//!
//! [logs.2026h2]                             # one log (a temporal shard); several allowed
//! signd_log = "2026h2"                      # its `[logs.<name>]` in signd (default: this name)
//! description = "Signet 2026h2"
//! not_after_start = "2026-07-01T00:00:00Z"  # optional temporal window: start <= NotAfter < end
//! not_after_end = "2027-01-01T00:00:00Z"
//! mmd_seconds = 60
//! storage = { dir = "/var/lib/signet/ctlogd/2026h2" }
//! # or: storage = { s3 = { endpoint = "https://s3.example.net", bucket = "ct",
//! #                       region = "us-east-1", access_key_id = "...",
//! #                       secret_access_key_file = "/etc/signet/ct-s3.secret", prefix = "2026h2" } }
//! ```
//!
//! Each log is served under `<public_url>/<name>/`: its RFC 6962 API at
//! `<name>/ct/v1/...`, its static-ct-api tiles and checkpoint beside it. The
//! checkpoint origin is that URL without its scheme.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use signet_runtime::config::{DaemonConfig, SocketMode};
use signet_runtime::principals::{Principal, Principals, ResolvedPrincipals};
use time::OffsetDateTime;

use crate::chain::{Roots, TemporalWindow};
use crate::sequencer::SequencerConfig;
use crate::storage::S3Config;

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
    /// The HTTP address, unless socket-activated as `ctlogd-http`.
    pub listen: SocketAddr,
    /// The base URL clients reach `listen` at (default `http://<listen>`).
    #[serde(default)]
    pub public_url: Option<String>,
    /// PEM files of the roots every log accepts chains to.
    pub roots: Vec<PathBuf>,
    /// Batching and backlog.
    #[serde(default)]
    pub sequencing: Sequencing,
    /// HTTP worker threads (default: the number of CPUs).
    #[serde(default)]
    pub http_threads: Option<usize>,
    /// The logs, by name (the name is their URL path segment). Shards added
    /// through the admin interface are kept in the store, not here.
    pub logs: BTreeMap<String, LogSettings>,
    /// The admin socket (Cap'n Proto, `ctlogd.capnp`), unless socket-activated
    /// as `ctlogd-admin`. Default: `admin.sock` in `state_dir`.
    #[serde(default)]
    pub admin_socket: Option<PathBuf>,
    /// Mode of the admin socket when ctlogd binds it (octal, default "0660").
    #[serde(default)]
    pub admin_socket_mode: SocketMode,
    /// `[admin]`: who may use the admin interface. Default: the uid ctlogd
    /// runs as, and root; when present, exactly those listed.
    #[serde(default)]
    pub admin: Option<Principals>,
}

/// `[sequencing]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequencing {
    /// Most entries in a batch.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// Longest a submission waits for its batch to close (ms).
    #[serde(default = "default_max_age_ms")]
    pub max_age_ms: u64,
    /// Most submissions waiting per log; more are pushed back.
    #[serde(default = "default_backlog")]
    pub backlog: usize,
    /// `Retry-After` of a pushback (s).
    #[serde(default = "default_retry_after")]
    pub retry_after_seconds: u64,
    /// A new tree head at least this often (s).
    #[serde(default = "default_refresh")]
    pub refresh_seconds: u64,
    /// How long a partial tile stays after the first checkpoint with a wider
    /// or full version of it was published (s); then it is deleted. Readers
    /// of an older checkpoint (a cache may serve one for 5 s) fetch it meanwhile.
    #[serde(default = "default_partial_tile_grace")]
    pub partial_tile_grace_seconds: u64,
}

impl Default for Sequencing {
    fn default() -> Self {
        Self {
            max_batch: default_max_batch(),
            max_age_ms: default_max_age_ms(),
            backlog: default_backlog(),
            retry_after_seconds: default_retry_after(),
            refresh_seconds: default_refresh(),
            partial_tile_grace_seconds: default_partial_tile_grace(),
        }
    }
}

fn default_max_batch() -> usize {
    256
}
fn default_max_age_ms() -> u64 {
    500
}
fn default_backlog() -> usize {
    8192
}
fn default_retry_after() -> u64 {
    1
}
fn default_refresh() -> u64 {
    10
}
fn default_partial_tile_grace() -> u64 {
    60
}
fn default_mmd() -> u64 {
    60
}

impl Sequencing {
    /// The sequencer's settings (with the system clock).
    pub fn sequencer_config(&self) -> SequencerConfig {
        SequencerConfig {
            max_batch: self.max_batch,
            max_age: Duration::from_millis(self.max_age_ms),
            backlog: self.backlog,
            retry_after: Duration::from_secs(self.retry_after_seconds),
            refresh: Duration::from_secs(self.refresh_seconds),
            partial_tile_grace: Duration::from_secs(self.partial_tile_grace_seconds),
            ..SequencerConfig::default()
        }
    }

    fn check(&self) -> Result<(), String> {
        if !(1..=4096).contains(&self.max_batch) {
            return Err("[sequencing] max_batch must be 1..=4096".into());
        }
        if !(1..=60_000).contains(&self.max_age_ms) {
            return Err("[sequencing] max_age_ms must be 1..=60000".into());
        }
        if self.backlog < self.max_batch {
            return Err("[sequencing] backlog must be at least max_batch".into());
        }
        if !(1..=3600).contains(&self.retry_after_seconds) {
            return Err("[sequencing] retry_after_seconds must be 1..=3600".into());
        }
        if !(1..=3600).contains(&self.refresh_seconds) {
            return Err("[sequencing] refresh_seconds must be 1..=3600".into());
        }
        if !(1..=86_400).contains(&self.partial_tile_grace_seconds) {
            return Err("[sequencing] partial_tile_grace_seconds must be 1..=86400".into());
        }
        Ok(())
    }
}

/// `[logs.<name>]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// The log's name in signd's `[logs]` (default: this log's name).
    #[serde(default)]
    pub signd_log: Option<String>,
    /// The description in `log.v3.json`.
    #[serde(default)]
    pub description: Option<String>,
    /// Start of the accepted NotAfter interval (inclusive), RFC 3339.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub not_after_start: Option<OffsetDateTime>,
    /// End of the accepted NotAfter interval (exclusive), RFC 3339.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub not_after_end: Option<OffsetDateTime>,
    /// Maximum merge delay promised (s).
    #[serde(default = "default_mmd")]
    pub mmd_seconds: u64,
    /// Most entries one `get-entries` returns.
    #[serde(default = "default_max_get_entries")]
    pub max_get_entries: u64,
    /// Where the tiles, data tiles, issuers and checkpoint go.
    pub storage: StorageSettings,
}

fn default_max_get_entries() -> u64 {
    256
}

/// A log's storage: a local directory or an S3-compatible bucket.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum StorageSettings {
    /// A local directory (created if missing).
    Dir(PathBuf),
    /// An S3-compatible object store.
    S3(S3Settings),
}

/// `storage = { s3 = { ... } }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Settings {
    /// Endpoint URL.
    pub endpoint: String,
    /// Bucket.
    pub bucket: String,
    /// Region named in signatures.
    #[serde(default = "default_region")]
    pub region: String,
    /// Access key ID.
    pub access_key_id: String,
    /// A file holding the secret access key (trailing whitespace ignored).
    pub secret_access_key_file: PathBuf,
    /// Key prefix for this log's objects.
    #[serde(default)]
    pub prefix: String,
    /// Allow a plain `http://` endpoint.
    #[serde(default)]
    pub allow_http: bool,
}

fn default_region() -> String {
    "us-east-1".into()
}

impl S3Settings {
    /// The storage layer's settings, reading the secret from its file.
    pub fn s3_config(&self) -> Result<S3Config, String> {
        let secret = std::fs::read_to_string(&self.secret_access_key_file)
            .map_err(|e| format!("secret_access_key_file {}: {e}", self.secret_access_key_file.display()))?;
        let secret = secret.trim_end().to_owned();
        if secret.is_empty() {
            return Err(format!("secret_access_key_file {} is empty", self.secret_access_key_file.display()));
        }
        Ok(S3Config {
            endpoint: self.endpoint.clone(),
            bucket: self.bucket.clone(),
            region: self.region.clone(),
            access_key_id: self.access_key_id.clone(),
            secret_access_key: secret,
            prefix: self.prefix.clone(),
            allow_http: self.allow_http,
        })
    }
}

impl LogSettings {
    /// The log's name in signd.
    pub fn signd_log<'a>(&'a self, name: &'a str) -> &'a str {
        self.signd_log.as_deref().unwrap_or(name)
    }

    /// The accepted NotAfter interval, if any.
    pub fn window(&self) -> Option<TemporalWindow> {
        match (self.not_after_start, self.not_after_end) {
            (Some(s), Some(e)) => Some(TemporalWindow { start: s.unix_timestamp(), end: e.unix_timestamp() }),
            _ => None,
        }
    }

    /// Checks the settings of log `name` (also a shard's, before it is added).
    pub fn check(&self, name: &str) -> Result<(), String> {
        let bad = |what: String| Err(format!("log `{name}`: {what}"));
        if !valid_log_name(name) {
            return bad(
                "the name must be 1-64 of [A-Za-z0-9._-], not starting with `.` (it is a URL path segment)".into()
            );
        }
        match (self.not_after_start, self.not_after_end) {
            (Some(s), Some(e)) if s >= e => return bad("not_after_start must be before not_after_end".into()),
            (Some(_), None) | (None, Some(_)) => {
                return bad("give both not_after_start and not_after_end, or neither".into())
            }
            _ => {}
        }
        if !(1..=86_400).contains(&self.mmd_seconds) {
            return bad("mmd_seconds must be 1..=86400".into());
        }
        if !(1..=10_000).contains(&self.max_get_entries) {
            return bad("max_get_entries must be 1..=10000".into());
        }
        match &self.storage {
            StorageSettings::Dir(d) if !d.is_absolute() => bad(format!("storage dir {} is not absolute", d.display())),
            StorageSettings::S3(s) => s.s3_config().map(drop).or_else(bad),
            StorageSettings::Dir(_) => Ok(()),
        }
    }
}

fn valid_log_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Config {
    /// The base URL of the HTTP side, without a trailing slash.
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{}", self.listen)).trim_end_matches('/').to_owned()
    }

    /// The submission (and monitoring) prefix URL of log `name`, ending in `/`.
    pub fn log_url(&self, name: &str) -> String {
        format!("{}/{name}/", self.public_url())
    }

    /// The checkpoint origin of log `name`: its URL without scheme or trailing `/`.
    pub fn origin(&self, name: &str) -> String {
        let url = self.log_url(name);
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        rest.trim_end_matches('/').to_owned()
    }

    /// Where the admin socket is bound when it is not socket-activated.
    pub fn admin_socket_path(&self) -> PathBuf {
        self.admin_socket.clone().unwrap_or_else(|| self.state_dir.join("admin.sock"))
    }

    /// Who may use the admin interface, resolved: `[admin]`, or else the uid
    /// ctlogd runs as and root.
    pub fn admins(&self) -> Result<ResolvedPrincipals, String> {
        let own = nix::unistd::getuid().as_raw();
        let p = self
            .admin
            .clone()
            .unwrap_or_else(|| Principals { users: vec![Principal::Id(own), Principal::Id(0)], groups: Vec::new() });
        p.resolve().map_err(|e| format!("[admin]: {e}"))
    }

    /// The storage directory of a shard added through the admin interface.
    pub fn shard_dir(&self, name: &str) -> PathBuf {
        self.state_dir.join("shards").join(name)
    }

    /// The roots of every configured file, as one PEM text.
    pub fn read_roots(&self) -> Result<Vec<u8>, String> {
        let mut pem = Vec::new();
        for path in &self.roots {
            let text = std::fs::read(path).map_err(|e| format!("roots file {}: {e}", path.display()))?;
            // Check each file alone, so an error names the file.
            Roots::from_pem(&text).map_err(|e| format!("roots file {}: {e}", path.display()))?;
            pem.extend_from_slice(&text);
            pem.push(b'\n');
        }
        Ok(pem)
    }
}

/// What `--check-config` and start check beyond syntax: sane sequencing, at
/// least one log, each sound, the roots readable and parseable, the public URL
/// an http(s) URL. Whether signd holds the logs' keys is learnt at start.
impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        self.http.check()?;
        self.sequencing.check()?;
        if self.logs.is_empty() {
            return Err("no [logs.<name>] configured".into());
        }
        for (name, log) in &self.logs {
            log.check(name)?;
        }
        if self.roots.is_empty() {
            return Err("roots: give at least one PEM file".into());
        }
        self.read_roots()?;
        let url = self.public_url();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(['?', '#']) {
            return Err(format!("public_url `{url}` must be an http(s) URL without query or fragment"));
        }
        if matches!(self.http_threads, Some(0)) {
            return Err("http_threads must be at least 1".into());
        }
        self.admins()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<Config, String> {
        let text = format!(
            r#"
            state_dir = "/tmp/c"
            signd_socket = "/tmp/s.sock"
            listen = "127.0.0.1:8090"
            roots = []
            {extra}
            "#
        );
        toml::from_str(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_urls_and_windows() {
        let c = parse(
            r#"
            [logs.2026h2]
            not_after_start = "2026-07-01T00:00:00Z"
            not_after_end = "2027-01-01T00:00:00Z"
            storage = { dir = "/tmp/t" }
            "#,
        )
        .unwrap();
        let log = &c.logs["2026h2"];
        assert_eq!(log.signd_log("2026h2"), "2026h2");
        assert_eq!(log.mmd_seconds, 60);
        assert_eq!(log.window(), Some(TemporalWindow { start: 1_782_864_000, end: 1_798_761_600 }));
        assert_eq!(c.log_url("2026h2"), "http://127.0.0.1:8090/2026h2/");
        assert_eq!(c.origin("2026h2"), "127.0.0.1:8090/2026h2");
        assert_eq!(c.sequencing.sequencer_config().max_batch, 256);
        assert!(log.check("2026h2").is_ok());
        // No roots: refused by the whole-file check.
        assert!(c.check_config().unwrap_err().contains("roots"));
    }

    #[test]
    fn refusals_name_the_problem() {
        assert!(parse("bogus = 1\n[logs.a]\nstorage = { dir = \"/t\" }").unwrap_err().contains("bogus"));
        let c = parse("[logs.a]\nstorage = { dir = \"/t\" }\nnot_after_start = \"2027-01-01T00:00:00Z\"").unwrap();
        assert!(c.logs["a"].check("a").unwrap_err().contains("neither"));
        let c = parse(
            "[logs.a]\nstorage = { dir = \"/t\" }\nnot_after_start = \"2027-01-01T00:00:00Z\"\n\
             not_after_end = \"2026-01-01T00:00:00Z\"",
        )
        .unwrap();
        assert!(c.logs["a"].check("a").unwrap_err().contains("before"));
        let c = parse("[logs.a]\nstorage = { dir = \"relative\" }").unwrap();
        assert!(c.logs["a"].check("a").unwrap_err().contains("absolute"));
        let c = parse("[logs.\"../x\"]\nstorage = { dir = \"/t\" }").unwrap();
        assert!(c.logs["../x"].check("../x").unwrap_err().contains("path segment"));
        let c = parse("[logs.a]\nstorage = { s3 = { endpoint = \"http://x\", bucket = \"b\", access_key_id = \"k\", secret_access_key_file = \"/nonexistent\" } }").unwrap();
        assert!(c.logs["a"].check("a").unwrap_err().contains("/nonexistent"));
        let mut c = parse("[logs.a]\nstorage = { dir = \"/t\" }").unwrap();
        c.sequencing.backlog = 1;
        assert!(c.check_config().unwrap_err().contains("backlog"));
    }
}
