//! The injected clock: every "now" in a daemon comes from a [`Clock`], so
//! protocol rules can be tested at any instant without sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where "now" comes from: the system's real-time clock in the daemons, a
/// [`ManualClock`] in tests. Cheap to clone; clones share the source.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The system's real-time clock.
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that stands at `start` until its [`ManualClock`] moves it.
    pub fn manual(start: SystemTime) -> (Self, ManualClock) {
        let nanos = Arc::new(AtomicI64::new(unix_nanos(start)));
        (Self { manual: Some(nanos.clone()) }, ManualClock { nanos })
    }

    /// The current time.
    pub fn now(&self) -> SystemTime {
        match &self.manual {
            None => SystemTime::now(),
            Some(n) => from_unix_nanos(n.load(Ordering::Relaxed)),
        }
    }

    /// Whole seconds since the Unix epoch (negative before it).
    pub fn unix_seconds(&self) -> i64 {
        self.unix_nanos().div_euclid(1_000_000_000)
    }

    /// Milliseconds since the Unix epoch (negative before it).
    pub fn unix_millis(&self) -> i64 {
        self.unix_nanos().div_euclid(1_000_000)
    }

    /// Nanoseconds since the Unix epoch (negative before it; saturates in 2262).
    pub fn unix_nanos(&self) -> i64 {
        match &self.manual {
            None => unix_nanos(SystemTime::now()),
            Some(n) => n.load(Ordering::Relaxed),
        }
    }
}

/// The hand that moves a manual [`Clock`] (tests only need it; daemons never
/// make one).
#[derive(Clone, Debug)]
pub struct ManualClock {
    nanos: Arc<AtomicI64>,
}

impl ManualClock {
    /// Sets the clock to `t`.
    pub fn set(&self, t: SystemTime) {
        self.nanos.store(unix_nanos(t), Ordering::Relaxed);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let _ = self.nanos.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(d)));
    }
}

/// Converts a time to nanoseconds since the Unix epoch, saturating at the ends
/// of `i64` (years 1677 and 2262).
pub fn unix_nanos(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The time `secs` seconds after the Unix epoch (before it when negative).
pub fn from_unix_seconds(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

fn from_unix_nanos(nanos: i64) -> SystemTime {
    let d = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_stands_still_until_moved() {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (clock, hand) = Clock::manual(start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.unix_seconds(), 1_800_000_000);
        hand.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now(), start + Duration::from_millis(1_500));
        assert_eq!(clock.unix_seconds(), 1_800_000_001);
        let clone = clock.clone();
        hand.set(UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(clone.unix_seconds(), -1);
        assert_eq!(clone.now(), from_unix_seconds(-1));
    }

    #[test]
    fn system_clock_is_near_the_real_time() {
        let a = SystemTime::now();
        let now = Clock::system().now();
        let b = SystemTime::now();
        assert!(a <= now && now <= b);
        let secs = Clock::system().unix_seconds();
        assert!(secs >= unix_nanos(a) / 1_000_000_000 && secs <= unix_nanos(b) / 1_000_000_000 + 1);
    }

    #[test]
    fn conversions_saturate_and_round_trip() {
        assert_eq!(unix_nanos(from_unix_seconds(42)), 42_000_000_000);
        assert_eq!(unix_nanos(from_unix_seconds(-42)), -42_000_000_000);
        assert_eq!(unix_nanos(UNIX_EPOCH + Duration::from_secs(u64::MAX / 2)), i64::MAX);
    }
}
