//! How signetctl prints results: aligned text for people, JSON for scripts.

use base64::Engine;
use signet_ipc::{AuditRecord, CallerInfo, Health, KeyInfo};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

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
        outln!("created:    {}", rfc3339_secs(k.created_unix_secs));
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
            "{:>8} {:<30} {:<10} {:<16} {:>6} {:>8} {:<10} OUTCOME",
            "SEQ",
            "TIME",
            "OPERATION",
            "KEY",
            "UID",
            "PID",
            "ROLE"
        );
        for r in records {
            outln!(
                "{:>8} {:<30} {:<10} {:<16} {:>6} {:>8} {:<10} {}",
                r.seq,
                rfc3339_nanos(r.time_unix_nanos),
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

/// Unix seconds as RFC 3339 in UTC, e.g. `2026-11-25T10:00:00Z`; the number
/// itself when it is no date RFC 3339 can write (past the year 9999).
pub fn rfc3339_secs(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| secs.to_string())
}

/// Unix nanoseconds as RFC 3339 in UTC with all nine fractional digits, e.g.
/// `2026-11-25T10:00:00.000000001Z`: always 30 characters, so a column of them
/// lines up (every i64 of nanoseconds is a date between 1677 and 2262).
pub fn rfc3339_nanos(nanos: i64) -> String {
    match OffsetDateTime::from_unix_timestamp_nanos(i128::from(nanos)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.nanosecond()
        ),
        Err(_) => nanos.to_string(),
    }
}

/// Unix milliseconds (CT timestamps) as RFC 3339 in UTC with three
/// fractional digits, e.g. `2026-11-25T10:00:00.123Z`; the number itself past
/// what RFC 3339 can write.
pub fn rfc3339_millis(millis: u64) -> String {
    match OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000) {
        Ok(t) if t.year() <= 9999 => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        ),
        _ => millis.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_secs(1_795_600_800), "2026-11-25T10:00:00Z");
        assert_eq!(rfc3339_secs(i64::MAX), i64::MAX.to_string());
        assert_eq!(rfc3339_nanos(1_795_600_800_000_000_001), "2026-11-25T10:00:00.000000001Z");
        assert_eq!(rfc3339_nanos(1_795_600_800_123_456_789), "2026-11-25T10:00:00.123456789Z");
        assert_eq!(rfc3339_nanos(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339_nanos(i64::MIN).len(), 30);
        assert_eq!(rfc3339_nanos(i64::MAX), "2262-04-11T23:47:16.854775807Z");
        assert_eq!(rfc3339_millis(1_795_600_800_123), "2026-11-25T10:00:00.123Z");
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(u64::MAX), u64::MAX.to_string());
    }
}
