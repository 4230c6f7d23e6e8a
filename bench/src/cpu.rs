//! CPU time of the processes under test, from /proc/PID/stat (utime +
//! stime), between two moments, per process and per operation.

use std::time::Duration;

use anyhow::Context;

use crate::{proc_cpu_time, self_cpu_time};

/// A process whose CPU time is reported.
#[derive(Clone, Debug)]
pub struct Server {
    /// What the report calls it.
    pub name: String,
    /// Its pid.
    pub pid: u32,
}

/// Processes from `NAME=PID` or `PID` (named by /proc/PID/comm); each must exist.
pub fn parse_servers(specs: &[String]) -> anyhow::Result<Vec<Server>> {
    specs
        .iter()
        .filter(|s| !s.is_empty())
        .map(|spec| {
            let (name, pid) = match spec.split_once('=') {
                Some((n, p)) => (Some(n.to_owned()), p),
                None => (None, spec.as_str()),
            };
            let pid: u32 = pid.trim().parse().with_context(|| format!("--server-pid {spec}: not a pid"))?;
            let name = match name {
                Some(n) => n,
                None => std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim().to_owned())
                    .with_context(|| format!("--server-pid {pid}: no such process"))?,
            };
            proc_cpu_time(pid).with_context(|| format!("--server-pid {spec}: cannot read /proc/{pid}/stat"))?;
            Ok(Server { name, pid })
        })
        .collect()
}

/// CPU times of the servers and of this process at one moment.
#[derive(Clone, Debug, Default)]
pub struct CpuSnapshot {
    servers: Vec<Option<Duration>>,
    own: Duration,
}

/// The CPU times of `servers` (in order) and of this process now.
pub fn cpu_snapshot(servers: &[Server]) -> CpuSnapshot {
    CpuSnapshot { servers: servers.iter().map(|s| proc_cpu_time(s.pid)).collect(), own: self_cpu_time() }
}

/// CPU used over the window, per server (None: the process went away) and by ct-load.
#[derive(Clone, Debug, Default)]
pub struct CpuUse {
    /// Each server's CPU time (None: it went away).
    pub servers: Vec<(Server, Option<Duration>)>,
    /// This process's.
    pub own: Duration,
}

impl CpuUse {
    /// The use between two snapshots of `servers`.
    pub fn between(servers: &[Server], a: &CpuSnapshot, b: &CpuSnapshot) -> Self {
        let servers = servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let used = match (a.servers.get(i).copied().flatten(), b.servers.get(i).copied().flatten()) {
                    (Some(x), Some(y)) => Some(y.saturating_sub(x)),
                    _ => None,
                };
                (s.clone(), used)
            })
            .collect();
        Self { servers, own: b.own.saturating_sub(a.own) }
    }

    /// The servers' CPU time in all.
    pub fn total(&self) -> Duration {
        self.servers.iter().filter_map(|(_, d)| *d).sum()
    }

    /// Lines: each server's CPU, % of one core over `window`, ms per `unit` of `count`.
    pub fn text(&self, window: Duration, count: u64, unit: &str) -> String {
        let mut out = String::new();
        let line = |name: &str, d: Duration| {
            let per = if count > 0 { d.as_secs_f64() * 1e3 / count as f64 } else { f64::NAN };
            format!(
                "  {name:<22} {:>8.2} s  {:>6.1}% of a core  {per:.4} ms per {unit}\n",
                d.as_secs_f64(),
                d.as_secs_f64() / window.as_secs_f64() * 100.0
            )
        };
        for (s, d) in &self.servers {
            match d {
                Some(d) => out.push_str(&line(&format!("{} ({})", s.name, s.pid), *d)),
                None => out.push_str(&format!("  {} ({}): went away during the run\n", s.name, s.pid)),
            }
        }
        if self.servers.len() > 1 {
            out.push_str(&line("servers in all", self.total()));
        }
        out.push_str(&line("the load generator", self.own));
        out
    }

    /// The same as JSON: per server and in all, ms per operation.
    pub fn json(&self, window: Duration, count: u64) -> serde_json::Value {
        let per = |d: Duration| if count > 0 { d.as_secs_f64() * 1e3 / count as f64 } else { 0.0 };
        let servers: Vec<serde_json::Value> = self
            .servers
            .iter()
            .map(|(s, d)| {
                serde_json::json!({
                    "name": s.name,
                    "pid": s.pid,
                    "cpu_seconds": d.map(|d| d.as_secs_f64()),
                    "cpu_percent": d.map(|d| round(d.as_secs_f64() / window.as_secs_f64() * 100.0, 1)),
                    "cpu_ms_per_op": d.map(|d| round(per(d), 4)),
                })
            })
            .collect();
        serde_json::json!({
            "servers": servers,
            "servers_cpu_ms_per_op": round(per(self.total()), 4),
            "generator_cpu_percent": round(self.own.as_secs_f64() / window.as_secs_f64() * 100.0, 1),
        })
    }
}

/// `x` rounded to `digits` decimals (for JSON reports).
pub fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}
