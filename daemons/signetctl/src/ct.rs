//! `signetctl ct ...`: a CT log operator's view of a log, over its public
//! HTTP APIs only (the static-ct-api tiles and checkpoint, `log.v3.json`, the
//! RFC 6962 proof endpoints, ctlogd's `logs.json`).
//!
//! - [`source`]: the [`LogSource`](source::LogSource) trait the checks read
//!   through, and its HTTP client (hyper-util, on a current-thread runtime).
//! - [`check`]: the checks themselves, with signet-ct's CT math.
//!
//! Exit codes: 1 when a check fails (signature, hash, leaf index, proof, an
//! object the log must serve but does not), 2 for bad arguments, 5 when the
//! log cannot be reached or answers 5xx.

mod check;
pub mod shard;
mod source;
#[cfg(test)]
mod tests;

use std::io::Write as _;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::json;
use signet_ct::LogKey;

use self::check::VerifiedCheckpoint;
use self::source::{Http, HttpLog, LogSource};
use crate::output::Printer;
use crate::{Failure, EXIT_CODES};

/// `signetctl ct ...`
#[derive(Subcommand)]
pub enum CtCommand {
    /// List the logs a ctlogd serves (its logs.json), each with its current tree size.
    ///
    /// The tree size comes from each log's checkpoint, verified with the key
    /// the list gives.
    #[command(after_help = EXIT_CODES)]
    List {
        /// ctlogd's base URL (default: SIGNET_CT_URL without its last path segment).
        #[arg(long)]
        url: Option<String>,
    },
    /// Fetch and verify the log's checkpoint; print it.
    #[command(after_help = EXIT_CODES)]
    Checkpoint(LogArgs),
    /// Check the whole tree: every tile, entry, leaf index and issuer, up to the checkpoint's root.
    ///
    /// Prints `verified N entries, root HEX` at the end; any mismatch stops it
    /// with exit code 1 and a message naming the tile and position.
    #[command(after_help = EXIT_CODES)]
    Verify {
        #[command(flatten)]
        log: LogArgs,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
    },
    /// Verify the log's consistency proof between two tree sizes, their roots computed from the tiles.
    #[command(after_help = EXIT_CODES)]
    Consistency {
        #[command(flatten)]
        log: LogArgs,
        /// The old tree size.
        #[arg(long)]
        from: u64,
        /// The new tree size (default: the checkpoint's).
        #[arg(long)]
        to: Option<u64>,
        /// Tiles fetched at once (for the roots computed from tiles).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
    },
    /// Verify the log's inclusion proof of one entry (read from its data tile).
    #[command(after_help = EXIT_CODES)]
    Inclusion {
        #[command(flatten)]
        log: LogArgs,
        /// The entry's leaf index.
        #[arg(long)]
        index: u64,
        /// The tree size to prove inclusion in (default: the checkpoint's).
        #[arg(long)]
        size: Option<u64>,
        /// Tiles fetched at once (for the roots computed from tiles).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
    },
    /// Add a temporal shard to the running log (signd and ctlogd's admin interfaces), or list them.
    #[command(subcommand, after_help = EXIT_CODES)]
    Shard(shard::ShardCommand),
}

/// Which log, and how to know its signatures.
#[derive(Args)]
pub struct LogArgs {
    /// The log's URL prefix, e.g. http://127.0.0.1:8190/demo/.
    #[arg(long, env = "SIGNET_CT_URL")]
    log: String,
    /// The log's public key, base64 DER SubjectPublicKeyInfo (default: the key in the log's log.v3.json).
    #[arg(long)]
    public_key: Option<String>,
    /// The checkpoint origin (default: log.v3.json's URL, or --log with --public-key, without scheme and final /).
    #[arg(long)]
    origin: Option<String>,
}

/// Why a `ct` command failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CtError {
    /// Bad arguments (exit code 2).
    Usage(String),
    /// The log could not be reached, or answered 5xx (exit code 5).
    Unavailable(String),
    /// A check failed (exit code 1).
    Check(String),
}

impl CtError {
    /// The same error with its message rewritten.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Usage(m) => Self::Usage(f(m)),
            Self::Unavailable(m) => Self::Unavailable(f(m)),
            Self::Check(m) => Self::Check(f(m)),
        }
    }
}

impl std::fmt::Display for CtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(m) | Self::Unavailable(m) | Self::Check(m) => f.write_str(m),
        }
    }
}

impl From<CtError> for Failure {
    fn from(e: CtError) -> Self {
        let code = match e {
            CtError::Check(_) => 1,
            CtError::Usage(_) => 2,
            CtError::Unavailable(_) => 5,
        };
        Failure { code, message: e.to_string() }
    }
}

/// Runs `ct ...` on a current-thread tokio runtime of its own.
pub fn run(cmd: &CtCommand, out: &Printer) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure { code: 1, message: format!("tokio runtime: {e}") })?;
    rt.block_on(run_async(cmd, out)).map_err(Failure::from)
}

async fn run_async(cmd: &CtCommand, out: &Printer) -> Result<(), CtError> {
    let http = Http::new();
    match cmd {
        CtCommand::List { url } => list_logs(&http, url.as_deref(), out).await,
        CtCommand::Checkpoint(args) => {
            let (_, cp) = open(&http, args).await?;
            print_checkpoint(&cp, out);
            Ok(())
        }
        CtCommand::Verify { log, concurrency } => {
            let (src, cp) = open(&http, log).await?;
            let mut progress = Progress::new();
            let r = check::verify_tree(
                &src,
                cp.checkpoint.size,
                &cp.checkpoint.root_hash,
                usize::from(*concurrency),
                &mut |done, size| progress.tick(done, size),
            )
            .await?;
            if out.json {
                out.json(&json!({
                    "checkpoint": checkpoint_json(&cp),
                    "entries": r.entries,
                    "root": hex::encode(r.root),
                    "data_tiles": r.data_tiles,
                    "hash_tiles": r.hash_tiles,
                    "issuers": r.issuers,
                    "verified": true,
                }));
            } else {
                outln!("{}", checkpoint_line(&cp));
                outln!("checked {} data tiles, {} hash tiles, {} issuers", r.data_tiles, r.hash_tiles, r.issuers);
                outln!("verified {} entries, root {}", r.entries, hex::encode(r.root));
            }
            Ok(())
        }
        CtCommand::Consistency { log, from, to, concurrency } => {
            let (src, cp) = open(&http, log).await?;
            let to = to.unwrap_or(cp.checkpoint.size);
            let r = check::consistency(&src, &cp.checkpoint, *from, to, usize::from(*concurrency)).await?;
            if out.json {
                out.json(&json!({
                    "checkpoint": checkpoint_json(&cp),
                    "from": r.from.0, "from_root": hex::encode(r.from.1),
                    "to": r.to.0, "to_root": hex::encode(r.to.1),
                    "proof": r.proof.iter().map(|h| B64.encode(h)).collect::<Vec<_>>(),
                    "verified": true,
                }));
            } else {
                outln!("{}", checkpoint_line(&cp));
                outln!("from:  size {}, root {}", r.from.0, hex::encode(r.from.1));
                outln!("to:    size {}, root {}", r.to.0, hex::encode(r.to.1));
                outln!("proof: {} hashes", r.proof.len());
                outln!("verified consistency from {} to {}", r.from.0, r.to.0);
            }
            Ok(())
        }
        // main.rs runs it over the admin sockets.
        CtCommand::Shard(_) => Err(CtError::Usage("ct shard goes through signd's and ctlogd's admin sockets".into())),
        CtCommand::Inclusion { log, index, size, concurrency } => {
            let (src, cp) = open(&http, log).await?;
            let size = size.unwrap_or(cp.checkpoint.size);
            let r = check::inclusion(&src, &cp.checkpoint, *index, size, usize::from(*concurrency)).await?;
            if out.json {
                out.json(&json!({
                    "checkpoint": checkpoint_json(&cp),
                    "index": r.index, "leaf_hash": hex::encode(r.leaf_hash),
                    "tree_size": r.tree.0, "root": hex::encode(r.tree.1),
                    "proof": r.proof.iter().map(|h| B64.encode(h)).collect::<Vec<_>>(),
                    "verified": true,
                }));
            } else {
                outln!("{}", checkpoint_line(&cp));
                outln!("leaf:  index {}, leaf hash {}", r.index, hex::encode(r.leaf_hash));
                outln!("tree:  size {}, root {}", r.tree.0, hex::encode(r.tree.1));
                outln!("proof: {} hashes", r.proof.len());
                outln!("verified inclusion of leaf {} in the tree of size {}", r.index, r.tree.0);
            }
            Ok(())
        }
    }
}

/// The log `args` names, and its verified checkpoint.
async fn open(http: &Http, args: &LogArgs) -> Result<(HttpLog, VerifiedCheckpoint), CtError> {
    let prefix = log_prefix(&args.log)?;
    let src = HttpLog::new(http.clone(), prefix.clone());
    let (key, origin) = match &args.public_key {
        Some(b64) => {
            let der = B64
                .decode(b64.trim())
                .map_err(|_| CtError::Usage("--public-key: not base64 (standard, padded)".into()))?;
            let key = LogKey::from_spki_der(&der).map_err(|e| CtError::Usage(format!("--public-key: {e}")))?;
            (key, origin_of(&prefix))
        }
        None => {
            let body = src.fetch("log.v3.json").await?;
            let info: LogInfo = serde_json::from_slice(&body)
                .map_err(|e| CtError::Check(format!("{}: {e}", src.url("log.v3.json"))))?;
            let key = info.key().map_err(|e| e.context(|m| format!("{}: {m}", src.url("log.v3.json"))))?;
            (key, origin_of(info.submission_prefix().unwrap_or(&prefix)))
        }
    };
    let origin = args.origin.clone().unwrap_or(origin);
    let cp = check::checkpoint(&src, &key, &origin).await?;
    Ok((src, cp))
}

/// A log list v3 entry (ctlogd's `log.v3.json`, an element of `logs.json`).
#[derive(Debug, Clone, Deserialize)]
struct LogInfo {
    #[serde(default)]
    description: String,
    #[serde(default)]
    log_id: String,
    key: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    submission_url: Option<String>,
    #[serde(default)]
    monitoring_url: Option<String>,
    #[serde(default)]
    mmd: Option<u64>,
    #[serde(default)]
    temporal_interval: Option<TemporalInterval>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
struct TemporalInterval {
    start_inclusive: String,
    end_exclusive: String,
}

impl LogInfo {
    /// The key, checked against the log ID when one is given.
    fn key(&self) -> Result<LogKey, CtError> {
        let der = B64.decode(&self.key).map_err(|_| CtError::Check("key: not base64".into()))?;
        let key = LogKey::from_spki_der(&der).map_err(|e| CtError::Check(format!("key: {e}")))?;
        if !self.log_id.is_empty() && self.log_id != B64.encode(key.log_id()) {
            return Err(CtError::Check(format!(
                "log_id {} is not the key's ({})",
                self.log_id,
                B64.encode(key.log_id())
            )));
        }
        Ok(key)
    }

    /// The RFC 6962 / submission prefix: `url`, else `submission_url`.
    fn submission_prefix(&self) -> Option<&str> {
        self.url.as_deref().or(self.submission_url.as_deref())
    }

    /// The static-ct-api prefix: `monitoring_url`, else the submission prefix.
    fn monitoring_prefix(&self) -> Option<&str> {
        self.monitoring_url.as_deref().or(self.submission_prefix())
    }
}

#[derive(Deserialize)]
struct LogList {
    logs: Vec<LogInfo>,
}

/// `ct list`.
async fn list_logs(http: &Http, url: Option<&str>, out: &Printer) -> Result<(), CtError> {
    let base = match url {
        Some(u) => log_prefix(u)?,
        None => match std::env::var("SIGNET_CT_URL") {
            Ok(u) => parent_url(&log_prefix(&u)?),
            Err(_) => return Err(CtError::Usage("give --url, or set SIGNET_CT_URL".into())),
        },
    };
    let list_url = format!("{base}logs.json");
    let body = http.get(&list_url).await?;
    let list: LogList = serde_json::from_slice(&body).map_err(|e| CtError::Check(format!("{list_url}: {e}")))?;
    let checked = futures::future::join_all(list.logs.iter().map(|info| async move {
        let prefix = info
            .monitoring_prefix()
            .ok_or_else(|| CtError::Check("no url or monitoring_url".into()))
            .and_then(log_prefix)?;
        let key = info.key()?;
        let origin = origin_of(info.submission_prefix().unwrap_or(&prefix));
        check::checkpoint(&HttpLog::new(http.clone(), prefix), &key, &origin).await
    }))
    .await;
    let mut first_error = None;
    let mut rows = Vec::new();
    for (info, result) in list.logs.iter().zip(checked) {
        let name = log_name(info.submission_prefix().or(info.monitoring_prefix()).unwrap_or(""));
        if let Err(e) = &result {
            first_error.get_or_insert_with(|| e.clone().context(|m| format!("log {name}: {m}")));
        }
        rows.push((name, info, result));
    }
    if out.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(name, info, r)| {
                json!({
                    "name": name,
                    "description": info.description,
                    "log_id": info.log_id,
                    "url": info.submission_prefix(),
                    "monitoring_url": info.monitoring_prefix(),
                    "mmd": info.mmd,
                    "temporal_interval": info.temporal_interval,
                    "tree_size": r.as_ref().ok().map(|c| c.checkpoint.size),
                    "root": r.as_ref().ok().map(|c| hex::encode(c.checkpoint.root_hash)),
                    "timestamp": r.as_ref().ok().map(|c| c.head.timestamp),
                    "error": r.as_ref().err().map(ToString::to_string),
                })
            })
            .collect();
        out.json(&serde_json::Value::Array(v));
    } else {
        for (i, (name, info, r)) in rows.iter().enumerate() {
            if i > 0 {
                outln!();
            }
            outln!("{name}: {}", info.description);
            outln!("  log ID:     {}", info.log_id);
            outln!("  URL:        {}", info.submission_prefix().unwrap_or("-"));
            if info.monitoring_prefix() != info.submission_prefix() {
                outln!("  monitoring: {}", info.monitoring_prefix().unwrap_or("-"));
            }
            outln!("  MMD:        {}", info.mmd.map_or("-".into(), |s| format!("{s} s")));
            if let Some(t) = &info.temporal_interval {
                outln!("  temporal:   {} to {} (exclusive)", t.start_inclusive, t.end_exclusive);
            }
            match r {
                Ok(c) => outln!(
                    "  tree size:  {} (checkpoint of {}, signature verified)",
                    c.checkpoint.size,
                    crate::output::rfc3339_millis(c.head.timestamp)
                ),
                Err(e) => outln!("  tree size:  unknown: {e}"),
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn checkpoint_json(cp: &VerifiedCheckpoint) -> serde_json::Value {
    json!({
        "origin": cp.checkpoint.origin,
        "tree_size": cp.checkpoint.size,
        "root": hex::encode(cp.checkpoint.root_hash),
        "timestamp": cp.head.timestamp,
        "time": crate::output::rfc3339_millis(cp.head.timestamp),
        "note": cp.note,
    })
}

fn checkpoint_line(cp: &VerifiedCheckpoint) -> String {
    format!(
        "checkpoint: {}, size {}, root {}, {}, signature verified",
        cp.checkpoint.origin,
        cp.checkpoint.size,
        hex::encode(cp.checkpoint.root_hash),
        crate::output::rfc3339_millis(cp.head.timestamp)
    )
}

/// `ct checkpoint`.
fn print_checkpoint(cp: &VerifiedCheckpoint, out: &Printer) {
    if out.json {
        return out.json(&checkpoint_json(cp));
    }
    outln!("origin:     {}", cp.checkpoint.origin);
    outln!("tree size:  {}", cp.checkpoint.size);
    outln!("root hash:  {}", hex::encode(cp.checkpoint.root_hash));
    outln!("timestamp:  {}", crate::output::rfc3339_millis(cp.head.timestamp));
    outln!("signature:  verified");
    outln!();
    out!("{}", cp.note);
}

/// Progress of `ct verify` on standard error, every few seconds.
struct Progress {
    last: Instant,
}

impl Progress {
    const EVERY: Duration = Duration::from_secs(5);

    fn new() -> Self {
        Self { last: Instant::now() }
    }

    fn tick(&mut self, done: u64, size: u64) {
        if self.last.elapsed() >= Self::EVERY {
            self.last = Instant::now();
            let _ = writeln!(std::io::stderr(), "signetctl: checked {done} of {size} entries");
        }
    }
}

/// A log URL as a prefix: `http://` (https is not supported yet), no query
/// or fragment, ending in `/`.
fn log_prefix(url: &str) -> Result<String, CtError> {
    let url = url.trim();
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| CtError::Usage(format!("{url}: not an http:// URL (https is not supported yet)")))?;
    if rest.is_empty() || rest.starts_with('/') || url.contains(['?', '#']) {
        return Err(CtError::Usage(format!("{url}: not a log URL")));
    }
    Ok(if url.ends_with('/') { url.to_string() } else { format!("{url}/") })
}

/// The checkpoint origin of a log URL: without scheme and final `/`.
fn origin_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or(url);
    rest.trim_end_matches('/').to_string()
}

/// A log URL prefix without its last path segment (a log at the root keeps it).
fn parent_url(prefix: &str) -> String {
    let trimmed = prefix.trim_end_matches('/');
    let host_start = trimmed.find("://").map_or(0, |i| i + 3);
    match trimmed[host_start..].rfind('/') {
        Some(i) => trimmed[..host_start + i + 1].to_string(),
        None => format!("{trimmed}/"),
    }
}

/// A short name for a log: the last path segment of its URL, else its host.
fn log_name(url: &str) -> String {
    let origin = origin_of(url);
    origin.rsplit('/').next().unwrap_or(&origin).to_string()
}
