//! Per-client limits on signatures made on the request path.
//!
//! A pre-signed response costs ocspd a store read; a nonce or an unknown
//! serial costs a signature from signd. `max_fresh_signatures` bounds how
//! many of those run at once over all clients; this bounds what one client
//! may cause, so one busy or hostile client cannot take every slot. Clients
//! are told apart by address: IPv4 per address, IPv6 per /64 (one host's
//! usual allocation, where a per-address key would give one client 2^64).

use std::net::{IpAddr, Ipv6Addr};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::ClientRate;

/// A token bucket per client network.
pub struct ClientLimiter {
    buckets: DefaultKeyedRateLimiter<IpAddr>,
}

impl ClientLimiter {
    /// Buckets of `rate.burst` (default: `rate.per_second`) refilled at `rate.per_second`.
    pub fn new(rate: ClientRate) -> Self {
        let quota = Quota::per_second(rate.per_second).allow_burst(rate.burst.unwrap_or(rate.per_second));
        Self { buckets: RateLimiter::keyed(quota) }
    }

    /// Takes a token from `client`'s bucket; false when it is empty.
    pub fn admit(&self, client: IpAddr) -> bool {
        self.buckets.check_key(&network(client)).is_ok()
    }

    /// Forgets clients whose buckets are full again (they would start full
    /// anyway), so the table holds only recently active clients.
    pub fn forget_idle(&self) {
        self.buckets.retain_recent();
        self.buckets.shrink_to_fit();
    }

    /// How many clients are remembered.
    pub fn clients(&self) -> usize {
        self.buckets.len()
    }
}

/// The key a client's requests count against.
fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::num::NonZeroU32;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_client_gets_its_burst_then_waits_and_others_are_unaffected() {
        let limiter = ClientLimiter::new(ClientRate { per_second: nz(1), burst: Some(nz(3)) });
        let a = ip("192.0.2.1");
        assert_eq!([limiter.admit(a), limiter.admit(a), limiter.admit(a), limiter.admit(a)], [true, true, true, false]);
        assert!(limiter.admit(ip("192.0.2.2")), "another address has its own bucket");
        assert_eq!(limiter.clients(), 2);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let limiter = ClientLimiter::new(ClientRate { per_second: nz(1), burst: None });
        assert!(limiter.admit(ip("2001:db8:1:2::1")));
        assert!(!limiter.admit(ip("2001:db8:1:2:ffff::9")), "same /64");
        assert!(limiter.admit(ip("2001:db8:1:3::1")), "another /64");
        assert!(limiter.admit(ip("::ffff:192.0.2.7")));
        assert!(!limiter.admit(ip("192.0.2.7")), "the mapped form is the same client");
    }
}
