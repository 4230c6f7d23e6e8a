//! `signetctl ct shard ...`: a new temporal shard of the CT log while ctlogd
//! serves. `add` makes its key in signd (`generateKey`, ECDSA P-256), has
//! signd register it as a CT log (`Admin.addCtLog`, kept in signd's store),
//! then has ctlogd serve it (`CtAdmin.addShard`, kept in ctlogd's store).
//! Each step taken again finds what the first did, so a command cut short
//! is finished by running it again.
//!
//! Exit codes beyond the common ones: 7 when ctlogd refuses the shard (its
//! name is served already, or its window overlaps a served log's).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use clap::{Args, Subcommand};
use serde_json::json;
use signet_ipc::{block_on, CtShard, CtShardSpec, CtlogdClient, ErrorKind, KeyAlgorithm, KeySpec, SigndClient};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::output::{rfc3339_secs, Printer};
use crate::{ca, Failure};

/// The exit code of a shard ctlogd refuses: a name taken, an overlapping window.
pub const EXIT_REFUSED: u8 = 7;

/// `signetctl ct shard ...`
#[derive(Subcommand)]
pub enum ShardCommand {
    /// Add a temporal shard to the running CT log, with no restart: its key
    /// in signd, the log in signd's store, then ctlogd serving it under
    /// <public_url>/NAME/. Prints its log ID and log-list v3 entry.
    ///
    /// Exit code 7: ctlogd refuses the shard (its name is served already, or
    /// its window overlaps a served log's).
    Add(AddArgs),
    /// List the logs ctlogd serves: configured ones and added shards.
    List,
}

/// `signetctl ct shard add`.
#[derive(Args)]
pub struct AddArgs {
    /// The shard's name: its URL path segment and its log's name in signd.
    #[arg(long)]
    name: String,
    /// Start of its NotAfter window (inclusive), RFC 3339.
    #[arg(long)]
    not_after_start: String,
    /// End of its NotAfter window (exclusive), RFC 3339.
    #[arg(long)]
    not_after_end: String,
    /// The log key's id in signd (default: ct-NAME); made when missing.
    #[arg(long)]
    key: Option<String>,
    /// signd backend for a new key (default: signd's first; e.g. "nss").
    #[arg(long, default_value = "")]
    backend: String,
    /// Roles that may use the log's key in signd (default: the roles of signd's configured logs).
    #[arg(long = "signd-role")]
    signd_roles: Vec<String>,
    /// Its description in the log list (default: "Signet CT log NAME").
    #[arg(long, default_value = "")]
    description: String,
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

fn time_arg(flag: &str, value: &str) -> Result<i64, Failure> {
    OffsetDateTime::parse(value, &Rfc3339)
        .map(OffsetDateTime::unix_timestamp)
        .map_err(|e| fail(2, format!("--{flag} {value:?}: not an RFC 3339 time: {e}")))
}

/// A refusal from ctlogd: 7 for a shard it will not add, the common codes otherwise.
fn ctlogd_failure(e: signet_ipc::IpcError) -> Failure {
    match e.kind {
        ErrorKind::AlreadyExists | ErrorKind::FailedPrecondition => fail(EXIT_REFUSED, format!("ctlogd: {e}")),
        _ => {
            let f = Failure::from(e);
            fail(f.code, format!("ctlogd: {}", f.message))
        }
    }
}

/// Runs a `ct shard` command.
pub fn run(signd: &SigndClient, ctlogd: &CtlogdClient, cmd: &ShardCommand, out: &Printer) -> Result<(), Failure> {
    match cmd {
        ShardCommand::List => {
            let shards = block_on(ctlogd.list_shards()).map_err(ctlogd_failure)?;
            if out.json {
                out.json(&json!({ "logs": shards.iter().map(shard_json).collect::<Vec<_>>() }));
            } else {
                for s in &shards {
                    outln!(
                        "{}\t{}\t{}\tsize {}\t{}{}",
                        s.name,
                        B64.encode(&s.log_id),
                        window_text(s),
                        s.tree_size,
                        s.url,
                        if s.added_at_run_time { "\tadded" } else { "" }
                    );
                }
            }
            Ok(())
        }
        ShardCommand::Add(a) => add(signd, ctlogd, a, out),
    }
}

fn window_text(s: &CtShard) -> String {
    match s.window {
        Some((start, end)) => format!("[{}, {})", rfc3339_secs(start), rfc3339_secs(end)),
        None => "no window".into(),
    }
}

fn shard_json(s: &CtShard) -> serde_json::Value {
    let entry: serde_json::Value = serde_json::from_str(&s.log_list_entry).unwrap_or(serde_json::Value::Null);
    json!({
        "name": s.name,
        "log_id": B64.encode(&s.log_id),
        "log_id_hex": hex::encode(&s.log_id),
        "url": s.url,
        "tree_size": s.tree_size,
        "added": s.added_at_run_time,
        "not_after_start": s.window.map(|w| rfc3339_secs(w.0)),
        "not_after_end": s.window.map(|w| rfc3339_secs(w.1)),
        "log_list_entry": entry,
    })
}

fn add(signd: &SigndClient, ctlogd: &CtlogdClient, a: &AddArgs, out: &Printer) -> Result<(), Failure> {
    let start = time_arg("not-after-start", &a.not_after_start)?;
    let end = time_arg("not-after-end", &a.not_after_end)?;
    if start >= end {
        return Err(fail(2, "--not-after-start must be before --not-after-end"));
    }
    let spec = CtShardSpec {
        name: a.name.clone(),
        signd_log: a.name.clone(),
        not_after_start_unix_secs: start,
        not_after_end_unix_secs: end,
        description: a.description.clone(),
    };
    // ctlogd first: it must admit us and take the shard before a key is made.
    let served = block_on(ctlogd.list_shards()).map_err(ctlogd_failure)?;
    if let Some(s) = served.iter().find(|s| s.name == a.name) {
        if !(s.added_at_run_time && s.window == Some((start, end))) {
            return Err(fail(EXIT_REFUSED, format!("ctlogd: log `{}` is served already", a.name)));
        }
    } else if let Some(s) = served.iter().find(|s| s.window.is_none_or(|(s0, e0)| start < e0 && s0 < end)) {
        return Err(fail(EXIT_REFUSED, format!("ctlogd: the window overlaps log `{}`'s {}", s.name, window_text(s))));
    }
    let key_id = a.key.clone().unwrap_or_else(|| format!("ct-{}", a.name));
    let key = match ca::existing_key(signd, &key_id)? {
        Some(k) => k,
        None => {
            let spec = KeySpec {
                id: key_id.clone(),
                algorithm: KeyAlgorithm::EcP256,
                roles: vec![],
                backend: a.backend.clone(),
            };
            block_on(signd.generate_key(spec))?
        }
    };
    let spki = block_on(signd.add_ct_log(&a.name, &key_id, &a.signd_roles))?;
    if spki != key.spki {
        return Err(fail(1, format!("signd's CT log `{}` has another key than `{key_id}`", a.name)));
    }
    let shard = block_on(ctlogd.add_shard(&spec)).map_err(ctlogd_failure)?;
    if shard.public_key != spki {
        return Err(fail(1, format!("ctlogd serves shard `{}` with another key than signd's log", a.name)));
    }
    if out.json {
        let mut v = shard_json(&shard);
        v["key"] = json!(key_id);
        out.json(&v);
    } else {
        outln!("shard {} added: {} {}", shard.name, shard.url, window_text(&shard));
        outln!("log ID {} (hex {})", B64.encode(&shard.log_id), hex::encode(&shard.log_id));
        outln!("key {key_id} in signd ({})", key.backend);
        outln!("log-list v3 entry: {}", shard.log_list_entry);
    }
    Ok(())
}
