//! `signetctl acme ...`: acmed's admin interface, starting with external
//! account binding keys (RFC 8555 §7.3.4).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use clap::Subcommand;
use serde_json::json;
use signet_ipc::{block_on, AcmedClient, AcmedHealth, EabKey};

use crate::output::{rfc3339_secs, Printer};
use crate::{Failure, EXIT_CODES};

/// `signetctl acme ...`
#[derive(Subcommand)]
pub enum AcmeCommand {
    /// Manage external account binding (EAB) keys.
    ///
    /// With `external_account_required` set, acmed creates an account only for
    /// a newAccount bound with one of these keys (RFC 8555 §7.3.4); each key
    /// binds one account, once.
    #[command(subcommand, after_help = EXIT_CODES)]
    Eab(EabCommand),
    /// Show acmed's health.
    #[command(after_help = EXIT_CODES)]
    Health,
    /// Issue from another issuer from now on: the successor of the one in use
    /// that `signetctl ca rotate-issuer` made (it does this itself, unless
    /// --no-acmed). The switch is kept in acmed's store.
    #[command(after_help = EXIT_CODES)]
    UseIssuer {
        /// The issuer's name in signd and ocspd.
        name: String,
    },
}

/// `signetctl acme eab ...`
#[derive(Subcommand)]
pub enum EabCommand {
    /// Create a key; prints its id and HMAC key (shown this once only).
    ///
    /// The HMAC key is a random 256-bit key, printed in base64url without
    /// padding: the form certbot (--eab-kid ID --eab-hmac-key KEY) and lego
    /// (--eab --kid ID --hmac KEY) take.
    #[command(after_help = EXIT_CODES)]
    Create {
        /// The key id clients send ([A-Za-z0-9._-], up to 64); default: a random one.
        #[arg(long)]
        key_id: Option<String>,
        /// A note for operators (e.g. who the key is for).
        #[arg(long, default_value = "")]
        note: String,
    },
    /// List every key: id, creation time, the account it bound, note.
    #[command(after_help = EXIT_CODES)]
    List,
    /// Show one key (never its MAC key).
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The key id.
        id: String,
    },
    /// Delete a key that has not bound an account yet.
    ///
    /// A deleted key can never bind. A key that has bound an account is kept
    /// (exit code 1): it cannot bind another account anyway, it records which
    /// account it bound, and that account keeps working.
    #[command(after_help = EXIT_CODES)]
    Delete {
        /// The key id.
        id: String,
    },
}

/// Runs `acme ...` against acmed's admin socket.
pub fn run(acmed: &AcmedClient, cmd: &AcmeCommand, out: &Printer) -> Result<(), Failure> {
    match cmd {
        AcmeCommand::Health => health(&block_on(acmed.health())?, out),
        AcmeCommand::UseIssuer { name } => {
            let issuer = block_on(acmed.use_issuer(name))?;
            if out.json {
                out.json(&json!({"issuer": issuer}));
            } else {
                outln!("acmed issues from `{issuer}`");
            }
        }
        AcmeCommand::Eab(EabCommand::Create { key_id, note }) => {
            let k = block_on(acmed.eab_create(key_id.as_deref().unwrap_or(""), note))?;
            created(&k, out);
        }
        AcmeCommand::Eab(EabCommand::List) => list(&block_on(acmed.eab_list())?, out),
        AcmeCommand::Eab(EabCommand::Show { id }) => show(&block_on(acmed.eab_show(id))?, out),
        AcmeCommand::Eab(EabCommand::Delete { id }) => {
            let k = block_on(acmed.eab_delete(id))?;
            if out.json {
                out.json(&json!({"deleted": key_json(&k)}));
            } else {
                outln!("deleted EAB key {}", k.key_id);
            }
        }
    }
    Ok(())
}

fn key_json(k: &EabKey) -> serde_json::Value {
    let mut v = json!({
        "key_id": k.key_id,
        "created_unix_secs": k.created_unix_secs,
        "bound_account": (!k.bound_account.is_empty()).then_some(&k.bound_account),
        "note": k.note,
    });
    if !k.hmac_key.is_empty() {
        v["hmac_key"] = json!(URL_SAFE_NO_PAD.encode(&k.hmac_key));
    }
    v
}

fn created(k: &EabKey, out: &Printer) {
    if out.json {
        return out.json(&key_json(k));
    }
    let mac = URL_SAFE_NO_PAD.encode(&k.hmac_key);
    outln!("key id:    {}", k.key_id);
    outln!("hmac key:  {mac}");
    outln!("note:      {}", k.note);
    outln!();
    outln!("The HMAC key is shown only this once. For clients:");
    outln!("  certbot --eab-kid {} --eab-hmac-key {mac} ...", k.key_id);
    outln!("  lego --eab --kid {} --hmac {mac} ...", k.key_id);
}

fn show(k: &EabKey, out: &Printer) {
    if out.json {
        return out.json(&key_json(k));
    }
    outln!("key id:    {}", k.key_id);
    outln!("created:   {}", rfc3339_secs(k.created_unix_secs));
    outln!("bound to:  {}", if k.bound_account.is_empty() { "(no account yet)" } else { &k.bound_account });
    outln!("note:      {}", k.note);
}

fn list(keys: &[EabKey], out: &Printer) {
    if out.json {
        return out.json(&serde_json::Value::Array(keys.iter().map(key_json).collect()));
    }
    outln!("{:<24} {:<20} {:<60} NOTE", "KEY ID", "CREATED", "BOUND ACCOUNT");
    for k in keys {
        let bound = if k.bound_account.is_empty() { "-" } else { &k.bound_account };
        let row = format!("{:<24} {:<20} {:<60} {}", k.key_id, rfc3339_secs(k.created_unix_secs), bound, k.note);
        outln!("{}", row.trim_end());
    }
}

fn health(h: &AcmedHealth, out: &Printer) {
    if out.json {
        return out.json(&json!({
            "ok": h.ok, "version": h.version, "uptime_secs": h.uptime_secs, "accounts": h.accounts,
            "eab_keys": h.eab_keys, "external_account_required": h.external_account_required,
        }));
    }
    outln!("ok:                        {}", h.ok);
    outln!("version:                   {}", h.version);
    outln!("uptime (s):                {}", h.uptime_secs);
    outln!("accounts:                  {}", h.accounts);
    outln!("EAB keys:                  {}", h.eab_keys);
    outln!("external account required: {}", h.external_account_required);
}
