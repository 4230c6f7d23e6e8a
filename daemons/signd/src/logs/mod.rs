//! Certificate Transparency log roles: named CT logs whose keys sign only
//! RFC 6962 signature inputs, for `ctlogd`.
//!
//! ```toml
//! [logs.signet2025]
//! key = "ct-signet2025"            # signd key id of the log key (ECDSA P-256)
//! roles = ["ctlog"]                # may obtain the LogSigner capability
//! raw_signing_roles = ["ceremony"] # optional: may sign raw with the log key
//! ```
//!
//! **What the log key signs.** The `LogSigner` capability signs a batch of
//! inputs (ctlogd sends a batch's SCTs and its tree head in one call), each of
//! which must be an RFC 6962 `digitally-signed` input: an SCT's (§3.2) over a
//! DER certificate or a precertificate's DER TBSCertificate, or a tree head's
//! (§3.5). One input that is neither refuses the whole call, so a compromised
//! front end cannot turn the log key into a general-purpose signer
//! ([`input`] has the rules; the parsing is `signet-ct`'s).
//!
//! **Raw signing.** For the same reason a log key is refused to
//! `Signer.sign`/`signBatch`/`signEach` unless the caller's role is listed in
//! the log's `raw_signing_roles`. Listing and reading the public key stay
//! allowed.
//!
//! Logs are checked with the rest of the config ([`check`], for
//! `--check-config` and at start: the log's name, its key id and role names),
//! then loaded at startup against the key ring ([`Logs::load`]): the key must
//! exist, be available and be ECDSA P-256. As for issuers, SIGHUP reloads
//! roles, not logs: which roles a log admits is re-read only on restart, but
//! whether a caller holds those roles follows the reloaded policy.
//!
//! **Logs added at run time.** `Admin.addCtLog` ([`added`]) adds a log (a new
//! temporal shard) with no restart: kept in signd's store, loaded after the
//! configured logs at start, under the same rules.

pub mod added;
mod cap;
pub mod input;

use std::collections::BTreeMap;
use std::sync::Arc;

use signet_ipc::{IpcError, KeyAlgorithm};

pub use crate::config::LogConfig;
use crate::keys::{validate_key_id, KeyRing};
use crate::policy::valid_role_name;

pub(crate) use cap::log_signer;

/// The configured CT logs, checked against the key ring.
#[derive(Debug, Default, Clone)]
pub struct Logs {
    by_name: BTreeMap<String, Arc<CtLog>>,
}

/// One loaded CT log.
#[derive(Debug)]
pub struct CtLog {
    /// The log's name in config.
    pub name: String,
    /// The log key's id.
    pub key_id: String,
    /// The log key's SubjectPublicKeyInfo, DER.
    pub spki: Vec<u8>,
    /// Roles that may obtain the LogSigner.
    pub roles: Vec<String>,
    /// Roles that may sign raw with the log key.
    pub raw_signing_roles: Vec<String>,
}

impl Logs {
    /// Loads and checks every log. Any problem is an error naming the log:
    /// signd refuses to start rather than serve a log whose key is missing or
    /// of the wrong kind.
    pub fn load(config: &BTreeMap<String, LogConfig>, keys: &KeyRing) -> Result<Self, String> {
        let mut by_name = BTreeMap::new();
        for (name, cfg) in config {
            let loaded = load_one(name, cfg, keys).map_err(|e| format!("log `{name}`: {e}"))?;
            by_name.insert(name.clone(), Arc::new(loaded));
        }
        Ok(Self { by_name })
    }

    /// A log by name.
    pub fn get(&self, name: &str) -> Option<&Arc<CtLog>> {
        self.by_name.get(name)
    }

    /// Every log, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<CtLog>> {
        self.by_name.values()
    }

    /// Refuses raw `Signer` signing with a log's key, unless that log lists
    /// `role` in `raw_signing_roles`.
    pub fn check_raw_signing(&self, key_id: &str, role: &str) -> Result<(), IpcError> {
        match self.iter().find(|l| l.key_id == key_id && !l.raw_signing_roles.iter().any(|r| r == role)) {
            None => Ok(()),
            Some(l) => Err(IpcError::denied(format!(
                "key `{key_id}` belongs to CT log `{}`: raw signing with it is refused for role `{role}` \
                 (use the LogSigner capability, or list the role in the log's raw_signing_roles)",
                l.name
            ))),
        }
    }
}

/// Checks every log as far as the config goes, without the key ring: the
/// log's name, its key id and role names. Any problem is an error naming the
/// log, the same [`Logs::load`] would give.
pub fn check(config: &BTreeMap<String, LogConfig>) -> Result<(), String> {
    for (name, cfg) in config {
        check_one(name, cfg).map_err(|e| format!("log `{name}`: {e}"))?;
    }
    Ok(())
}

/// Log names are `[A-Za-z0-9._-]{1,64}`, not starting with a dot (as key ids).
pub fn valid_log_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check_one(name: &str, cfg: &LogConfig) -> Result<(), String> {
    if !valid_log_name(name) {
        return Err("invalid log name: use [A-Za-z0-9._-]{1,64}, not starting with '.'".into());
    }
    validate_key_id(&cfg.key).map_err(|e| format!("key: {}", e.detail))?;
    for role in cfg.roles.iter().chain(&cfg.raw_signing_roles) {
        if !valid_role_name(role) {
            return Err(format!("invalid role name `{role}` (roles are [a-z0-9-]{{1,32}})"));
        }
    }
    Ok(())
}

fn load_one(name: &str, cfg: &LogConfig, keys: &KeyRing) -> Result<CtLog, String> {
    check_one(name, cfg)?;
    let key = keys.require(&cfg.key).map_err(|e| e.detail)?;
    let handle = key.signer().map_err(|e| e.detail)?;
    let algorithm = handle.algorithm();
    if algorithm != KeyAlgorithm::EcP256 {
        return Err(format!(
            "signd key `{}` is {algorithm}: a CT log key must be ECDSA P-256 (RFC 6962 §2.1.4)",
            cfg.key
        ));
    }
    Ok(CtLog {
        name: name.to_owned(),
        key_id: cfg.key.clone(),
        spki: handle.spki().to_vec(),
        roles: cfg.roles.clone(),
        raw_signing_roles: cfg.raw_signing_roles.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(name: &str, key: &str, raw: &[&str]) -> CtLog {
        CtLog {
            name: name.into(),
            key_id: key.into(),
            spki: vec![],
            roles: vec!["ctlog".into()],
            raw_signing_roles: raw.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn config_is_strict_and_checked() {
        let c: crate::config::Config = toml::from_str(
            "socket = \"/s\"\nstate_dir = \"/d\"\n[logs.signet2025]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\n",
        )
        .unwrap();
        let l = &c.logs["signet2025"];
        assert_eq!((l.key.as_str(), l.roles.as_slice()), ("ct-key", &["ctlog".to_string()][..]));
        assert!(l.raw_signing_roles.is_empty());
        assert!(check(&c.logs).is_ok());

        let e = toml::from_str::<crate::config::Config>(
            "socket = \"/s\"\nstate_dir = \"/d\"\n[logs.x]\nkey = \"k\"\nscheme = \"ecdsa-sha256\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("scheme"), "{e}");

        let bad = |name: &str, key: &str, role: &str| {
            let cfg = LogConfig { key: key.into(), roles: vec![role.into()], raw_signing_roles: vec![] };
            check(&BTreeMap::from([(name.to_string(), cfg)])).unwrap_err()
        };
        let e = bad("ok", "k", "Not A Role");
        assert!(e.starts_with("log `ok`:") && e.contains("invalid role name `Not A Role`"), "{e}");
        assert!(bad("a b", "k", "r").contains("invalid log name"));
        assert!(bad(".hidden", "k", "r").contains("invalid log name"));
        assert!(bad("ok", "../k", "r").contains("invalid key id"));
    }

    #[test]
    fn raw_signing_is_refused_for_log_keys() {
        let mut logs = Logs::default();
        logs.by_name.insert("a".into(), Arc::new(log("a", "ct-a", &["ceremony"])));
        assert!(logs.check_raw_signing("other", "ctlog").is_ok());
        assert!(logs.check_raw_signing("ct-a", "ceremony").is_ok());
        let e = logs.check_raw_signing("ct-a", "ctlog").unwrap_err();
        assert_eq!(e.kind, signet_ipc::ErrorKind::PermissionDenied);
        assert!(e.detail.contains("CT log `a`"), "{e}");
        // Two logs sharing a key: each must list the role.
        logs.by_name.insert("b".into(), Arc::new(log("b", "ct-a", &[])));
        assert!(logs.check_raw_signing("ct-a", "ceremony").is_err());
    }
}
