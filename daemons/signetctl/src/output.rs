//! How signetctl prints results: aligned text for people, JSON for scripts.

use base64::Engine;
use signet_ipc::{AuditRecord, CallerInfo, Health, KeyInfo};

pub struct Printer {
    pub json: bool,
}

impl Printer {
    pub fn json(&self, v: &serde_json::Value) {
        // Serialising a Value cannot fail.
        outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    }

    fn key_json(k: &KeyInfo) -> serde_json::Value {
        serde_json::json!({
            "id": k.id,
            "algorithm": k.algorithm.name(),
            "spki": base64::engine::general_purpose::STANDARD.encode(&k.spki),
            "created_unix_secs": k.created_unix_secs,
            "roles": k.roles,
            "backend": k.backend,
            "location": k.location,
            "available": k.available,
            "problem": k.problem,
        })
    }

    pub fn key(&self, k: &KeyInfo) {
        if self.json {
            return self.json(&Self::key_json(k));
        }
        outln!("id:         {}", k.id);
        outln!("algorithm:  {}", k.algorithm);
        outln!("backend:    {}", k.backend);
        outln!("location:   {}", k.location);
        outln!("roles:      {}", if k.roles.is_empty() { "-".into() } else { k.roles.join(", ") });
        outln!("created:    {}", k.created_unix_secs);
        outln!("available:  {}", if k.available { "yes".to_owned() } else { format!("NO: {}", k.problem) });
        out!("{}", pem("PUBLIC KEY", &k.spki));
    }

    pub fn keys(&self, keys: &[KeyInfo]) {
        if self.json {
            return self.json(&serde_json::Value::Array(keys.iter().map(Self::key_json).collect()));
        }
        outln!("{:<24} {:<11} {:<8} {:<9} ROLES", "ID", "ALGORITHM", "BACKEND", "AVAILABLE");
        for k in keys {
            outln!(
                "{:<24} {:<11} {:<8} {:<9} {}",
                k.id,
                k.algorithm.name(),
                k.backend,
                if k.available { "yes" } else { "NO" },
                k.roles.join(",")
            );
        }
    }

    pub fn audit(&self, records: &[AuditRecord]) {
        if self.json {
            let v: Vec<_> = records
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "seq": r.seq, "time_unix_nanos": r.time_unix_nanos, "operation": r.operation,
                        "key_id": r.key_id, "uid": r.uid, "pid": r.pid, "role": r.role,
                        "message_sha256": hex::encode(&r.message_sha256), "ok": r.ok, "outcome": r.outcome,
                    })
                })
                .collect();
            return self.json(&serde_json::Value::Array(v));
        }
        outln!(
            "{:>8} {:>20} {:<10} {:<16} {:>6} {:>8} {:<10} OUTCOME",
            "SEQ",
            "TIME_NS",
            "OPERATION",
            "KEY",
            "UID",
            "PID",
            "ROLE"
        );
        for r in records {
            outln!(
                "{:>8} {:>20} {:<10} {:<16} {:>6} {:>8} {:<10} {}",
                r.seq,
                r.time_unix_nanos,
                r.operation,
                r.key_id,
                r.uid,
                r.pid,
                r.role,
                r.outcome
            );
        }
    }

    pub fn health(&self, h: &Health) {
        if self.json {
            return self.json(&serde_json::json!({
                "ok": h.ok, "version": h.version, "keys_loaded": h.keys_loaded,
                "keys_unavailable": h.keys_unavailable, "uptime_secs": h.uptime_secs,
                "audit_records": h.audit_records,
            }));
        }
        outln!("ok:               {}", h.ok);
        outln!("version:          {}", h.version);
        outln!("keys loaded:      {}", h.keys_loaded);
        outln!("keys unavailable: {}", h.keys_unavailable);
        outln!("uptime (s):       {}", h.uptime_secs);
        outln!("audit records:    {}", h.audit_records);
    }

    pub fn whoami(&self, c: &CallerInfo) {
        if self.json {
            return self.json(&serde_json::json!({
                "uid": c.uid, "gid": c.gid, "pid": c.pid, "roles": c.roles, "admin": c.admin,
            }));
        }
        outln!("uid {} gid {} pid {}", c.uid, c.gid, c.pid);
        outln!("roles: {}", if c.roles.is_empty() { "(none)".into() } else { c.roles.join(", ") });
        outln!("admin: {}", c.admin);
    }
}

/// PEM armour (RFC 7468) around DER bytes.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
