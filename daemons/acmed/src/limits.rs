//! Rate limits: new accounts (overall), new orders per account, and
//! certificates per registered domain, each over a fixed window. Counters
//! live in memory (a restart forgets them; they protect capacity, not state).
//!
//! The registered domain is approximated by the last two labels of a name
//! (no public suffix list): `a.b.example.com` counts for `example.com`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use signet_acme::types::{Identifier, IdentifierType};
use signet_acme::{Problem, ProblemType};

use crate::config::RateLimits;
use crate::db::Id;

const HOUR: Duration = Duration::from_secs(3600);
const WEEK: Duration = Duration::from_secs(7 * 86_400);
/// Counters kept at most (the oldest windows are dropped beyond it).
const MAX_KEYS: usize = 1 << 20;

/// The limiter.
pub struct Limiter {
    cfg: RateLimits,
    accounts: Mutex<Window>,
    orders: Mutex<HashMap<Id, Window>>,
    domains: Mutex<HashMap<String, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    count: u32,
}

impl Window {
    fn new() -> Window {
        Window { start: Instant::now(), count: 0 }
    }

    /// Counts `n` if it fits under `limit` within `len`; else how long until the window resets.
    fn take(&mut self, n: u32, limit: u32, len: Duration, now: Instant) -> Result<(), Duration> {
        if now.duration_since(self.start) >= len {
            *self = Window { start: now, count: 0 };
        }
        if self.count.saturating_add(n) > limit {
            return Err(len.saturating_sub(now.duration_since(self.start)));
        }
        self.count += n;
        Ok(())
    }
}

fn limited(what: String, wait: Duration) -> Problem {
    Problem::new(ProblemType::RateLimited, format!("{what}; retry after {} s", wait.as_secs().max(1)))
}

/// The registered domain a name counts against.
pub fn registered_domain(id: &Identifier) -> String {
    if id.kind == IdentifierType::Ip {
        return id.value.clone();
    }
    let labels: Vec<&str> = id.value.trim_start_matches("*.").rsplitn(3, '.').collect();
    match labels.as_slice() {
        [tld, sld, ..] => format!("{sld}.{tld}"),
        _ => id.value.clone(),
    }
}

impl Limiter {
    /// A limiter with `cfg`.
    pub fn new(cfg: RateLimits) -> Limiter {
        Limiter { cfg, accounts: Mutex::new(Window::new()), orders: Mutex::new(HashMap::new()), domains: Mutex::new(HashMap::new()) }
    }

    /// One more account.
    pub fn check_new_account(&self) -> Result<(), Problem> {
        let limit = self.cfg.new_accounts_per_hour;
        if limit == 0 {
            return Ok(());
        }
        let mut w = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        w.take(1, limit, HOUR, Instant::now()).map_err(|wait| limited(format!("too many new accounts: {limit} per hour"), wait))
    }

    /// One more order for `account`.
    pub fn check_new_order(&self, account: &Id) -> Result<(), Problem> {
        let limit = self.cfg.orders_per_account_per_hour;
        if limit == 0 {
            return Ok(());
        }
        let mut m = self.orders.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= MAX_KEYS {
            m.clear();
        }
        let now = Instant::now();
        m.entry(*account)
            .or_insert_with(Window::new)
            .take(1, limit, HOUR, now)
            .map_err(|wait| limited(format!("too many new orders for this account: {limit} per hour"), wait))
    }

    /// One more certificate for each registered domain among `identifiers`; all or nothing.
    pub fn check_certificate(&self, identifiers: &[Identifier]) -> Result<(), Problem> {
        let limit = self.cfg.certificates_per_domain_per_week;
        if limit == 0 {
            return Ok(());
        }
        let mut domains: Vec<String> = identifiers.iter().map(registered_domain).collect();
        domains.sort();
        domains.dedup();
        let mut m = self.domains.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= MAX_KEYS {
            m.clear();
        }
        let now = Instant::now();
        for d in &domains {
            let mut probe = *m.entry(d.clone()).or_insert_with(Window::new);
            if let Err(wait) = probe.take(1, limit, WEEK, now) {
                return Err(limited(format!("too many certificates for {d}: {limit} per week"), wait));
            }
        }
        for d in &domains {
            if let Some(w) = m.get_mut(d) {
                let _ = w.take(1, limit, WEEK, now);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_domains() {
        assert_eq!(registered_domain(&Identifier::dns("a.b.example.com")), "example.com");
        assert_eq!(registered_domain(&Identifier::dns("*.example.com")), "example.com");
        assert_eq!(registered_domain(&Identifier::dns("localhost")), "localhost");
        assert_eq!(registered_domain(&Identifier::ip("127.0.0.1")), "127.0.0.1");
    }

    #[test]
    fn windows_count_and_refuse() {
        let l = Limiter::new(RateLimits { orders_per_account_per_hour: 2, certificates_per_domain_per_week: 1, new_accounts_per_hour: 0 });
        let a = [1u8; 16];
        assert!(l.check_new_order(&a).is_ok());
        assert!(l.check_new_order(&a).is_ok());
        let p = l.check_new_order(&a).unwrap_err();
        assert_eq!(p.kind, ProblemType::RateLimited);
        assert!(l.check_new_order(&[2u8; 16]).is_ok());
        for _ in 0..10 {
            assert!(l.check_new_account().is_ok(), "0 turns a limit off");
        }
        let ids = [Identifier::dns("x.example.com"), Identifier::dns("y.example.org")];
        assert!(l.check_certificate(&ids).is_ok());
        assert!(l.check_certificate(&[Identifier::dns("z.example.com")]).is_err());
        assert!(l.check_certificate(&[Identifier::dns("other.test")]).is_ok());
    }

    #[test]
    fn a_window_resets() {
        let mut w = Window::new();
        let t0 = w.start;
        assert!(w.take(1, 1, HOUR, t0).is_ok());
        assert!(w.take(1, 1, HOUR, t0 + Duration::from_secs(10)).is_err());
        assert!(w.take(1, 1, HOUR, t0 + HOUR).is_ok());
    }
}
