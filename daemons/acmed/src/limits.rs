//! Rate limits: new accounts (overall), new orders per account, and
//! certificates per registered domain, each over a fixed window. Counters
//! live in memory (a restart forgets them; they protect capacity, not state).
//!
//! The registered domain of a DNS name is its eTLD+1 by the Public Suffix
//! List (the `psl` crate's compiled-in copy, ICANN and private sections, as
//! Let's Encrypt counts): `a.b.example.co.uk` counts for `example.co.uk`,
//! `alice.github.io` for itself. A name under a suffix the list does not know
//! falls under the list's default rule `*` (its last label is the suffix):
//! `x.signet.test` counts for `signet.test`. A name that is itself a public
//! suffix (`co.uk`, `github.io`, a bare `localhost`) counts for itself. An IP
//! identifier counts for its address.

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
    // Whole seconds, rounded up: a client that waits as told is not refused again.
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let secs = secs.max(1);
    Problem::new(ProblemType::RateLimited, format!("{what}; retry after {secs} s")).retry_after(secs)
}

/// The registered domain a name counts against.
pub fn registered_domain(id: &Identifier) -> String {
    if id.kind == IdentifierType::Ip {
        return id.value.clone();
    }
    let name = id.value.trim_start_matches("*.").trim_end_matches('.').to_ascii_lowercase();
    match psl::domain(name.as_bytes()).and_then(|d| std::str::from_utf8(d.as_bytes()).ok()) {
        Some(registered) => registered.to_owned(),
        // The name is itself a public suffix (or empty): it counts for itself.
        None => name,
    }
}

impl Limiter {
    /// A limiter with `cfg`.
    pub fn new(cfg: RateLimits) -> Limiter {
        Limiter {
            cfg,
            accounts: Mutex::new(Window::new()),
            orders: Mutex::new(HashMap::new()),
            domains: Mutex::new(HashMap::new()),
        }
    }

    /// One more account.
    pub fn check_new_account(&self) -> Result<(), Problem> {
        let limit = self.cfg.new_accounts_per_hour;
        if limit == 0 {
            return Ok(());
        }
        let mut w = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        w.take(1, limit, HOUR, Instant::now())
            .map_err(|wait| limited(format!("too many new accounts: {limit} per hour"), wait))
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
        let rd = |name: &str| registered_domain(&Identifier::dns(name));
        assert_eq!(rd("a.b.example.com"), "example.com");
        assert_eq!(rd("example.com"), "example.com");
        assert_eq!(rd("*.example.com"), "example.com");
        // Multi-label ICANN suffixes: not the last two labels.
        assert_eq!(rd("a.b.example.co.uk"), "example.co.uk");
        assert_eq!(rd("a.example.co.uk"), "example.co.uk");
        assert_eq!(rd("*.shop.example.co.uk"), "example.co.uk");
        // The private section counts: one github.io user is not another.
        assert_eq!(rd("www.alice.github.io"), "alice.github.io");
        assert_eq!(rd("bob.github.io"), "bob.github.io");
        // Wildcard rule `*.ck` and its exception `!www.ck`.
        assert_eq!(rd("a.b.c.ck"), "b.c.ck");
        assert_eq!(rd("x.www.ck"), "www.ck");
        // A bare public suffix counts for itself.
        assert_eq!(rd("co.uk"), "co.uk");
        assert_eq!(rd("github.io"), "github.io");
        assert_eq!(rd("com"), "com");
        assert_eq!(rd("localhost"), "localhost");
        // An unknown TLD: the default rule `*`.
        assert_eq!(rd("x.y.signet.test"), "signet.test");
        assert_eq!(rd("A.Example.COM"), "example.com");
        assert_eq!(registered_domain(&Identifier::ip("127.0.0.1")), "127.0.0.1");
        assert_eq!(registered_domain(&Identifier::ip("2001:db8::1")), "2001:db8::1");
    }

    #[test]
    fn windows_count_and_refuse() {
        let l = Limiter::new(RateLimits {
            orders_per_account_per_hour: 2,
            certificates_per_domain_per_week: 1,
            new_accounts_per_hour: 0,
        });
        let a = [1u8; 16];
        assert!(l.check_new_order(&a).is_ok());
        assert!(l.check_new_order(&a).is_ok());
        let p = l.check_new_order(&a).unwrap_err();
        assert_eq!(p.kind, ProblemType::RateLimited);
        // The real wait (about an hour here), in the header and the detail alike.
        let secs = p.retry_after.unwrap();
        assert!((3590..=3600).contains(&secs), "{secs}");
        assert!(p.detail.as_deref().unwrap().ends_with(&format!("retry after {secs} s")), "{p:?}");
        assert!(l.check_new_order(&[2u8; 16]).is_ok());
        for _ in 0..10 {
            assert!(l.check_new_account().is_ok(), "0 turns a limit off");
        }
        let ids = [Identifier::dns("x.example.com"), Identifier::dns("y.example.org")];
        assert!(l.check_certificate(&ids).is_ok());
        assert!(l.check_certificate(&[Identifier::dns("z.example.com")]).is_err());
        assert!(l.check_certificate(&[Identifier::dns("other.test")]).is_ok());
        // Two registrants under one multi-label suffix are counted apart.
        assert!(l.check_certificate(&[Identifier::dns("a.one.co.uk")]).is_ok());
        assert!(l.check_certificate(&[Identifier::dns("a.two.co.uk")]).is_ok());
        assert!(l.check_certificate(&[Identifier::dns("b.one.co.uk")]).is_err());
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
