//! What a daemon's `/healthz` says: whether it can do its work and, when it cannot, each
//! cause by name.
//!
//! A cause is either a dependency watched in the background ([`watch`]: signd, reached
//! through its socket every few seconds) or a condition the daemon checks when asked
//! ([`Health::with_check`]: tokend's "a token key is loaded"). `/healthz` answers `200 ok`
//! while there is none, and `503` with one `name: cause` line per cause otherwise, so an
//! operator, a load balancer or probed sees *why*, not only *that*.
//!
//! Health is not liveness: the systemd watchdog ([`crate::notify`]) keeps being fed while
//! a dependency is down, since restarting the daemon would not bring signd back.
//!
//! ```
//! use signet_runtime::health::Health;
//! let health = Health::new().with_check("token key", || Err("none loaded yet".into()));
//! health.set("signd", Err("cannot connect to signd".into()));
//! assert_eq!(
//!     health.causes(),
//!     vec![("signd".to_owned(), "cannot connect to signd".to_owned()),
//!          ("token key".to_owned(), "none loaded yet".to_owned())]
//! );
//! health.set("signd", Ok(()));
//! assert_eq!(health.causes().len(), 1);
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// How often [`watch`] asks a dependency: a signd restart is noticed, and the daemon
/// reconnected, within this.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// A condition computed each time health is asked for: `Err(cause)` when it does not hold.
type Check = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The daemon's health: a cheap, cloneable handle shared by the HTTP scaffold (which
/// answers `/healthz` from it) and whatever sets it.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Causes set from outside (a watched dependency): name → cause.
    set: Mutex<BTreeMap<String, String>>,
    checks: Vec<(String, Check)>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").field("causes", &self.causes()).finish()
    }
}

impl Health {
    /// Healthy, with no checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a condition computed on every [`causes`](Self::causes) call (every `/healthz`):
    /// it must be cheap and must not block. Checks are added while the daemon is wired,
    /// before the handle is cloned.
    ///
    /// # Panics
    /// Never in use: a handle already cloned keeps its checks (debug builds assert this).
    #[must_use]
    pub fn with_check(mut self, name: &str, check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.checks.push((name.to_owned(), Box::new(check))),
            None => debug_assert!(false, "Health::with_check on a shared handle"),
        }
        self
    }

    /// Records the state of `name`: `Err(cause)` makes the daemon unhealthy for that cause
    /// until `Ok(())` is set. Returns whether the state changed.
    pub fn set(&self, name: &str, state: Result<(), String>) -> bool {
        let mut set = self.set_causes();
        match state {
            Ok(()) => set.remove(name).is_some(),
            Err(cause) => set.insert(name.to_owned(), cause.clone()).as_ref() != Some(&cause),
        }
    }

    /// Every cause the daemon is unhealthy for, by name, in name order; empty when healthy.
    pub fn causes(&self) -> Vec<(String, String)> {
        let mut out: BTreeMap<String, String> = self.set_causes().clone();
        for (name, check) in &self.inner.checks {
            if let Err(cause) = check() {
                out.insert(name.clone(), cause);
            }
        }
        out.into_iter().collect()
    }

    /// Whether there is no cause.
    pub fn is_healthy(&self) -> bool {
        self.causes().is_empty()
    }

    fn set_causes(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        // Each update is a single insert or remove: a panic elsewhere cannot leave it half-made.
        self.inner.set.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DependencyLabel {
    dependency: String,
}

/// Watches a dependency: runs `probe` now and then every `every` (each run given `every`
/// to answer) until `shutdown`, and records the outcome in `health` under `name`, in the
/// gauge `dependency_up{dependency=name}` (1 reachable, 0 not) of `metrics`, and in the log
/// when it changes (a warning with the cause when it goes, a notice when it is back).
///
/// The probe is the daemon's own client making a real call (signd's `health`), so the
/// watch also keeps the client's connection made: after signd restarts, the daemon is
/// reconnected within `every` without waiting for its next request.
pub fn watch<F, Fut>(
    health: &Health,
    metrics: &Metrics,
    name: &str,
    every: Duration,
    shutdown: CancellationToken,
    probe: F,
) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let gauge = Family::<DependencyLabel, Gauge>::default();
    metrics.register(
        "dependency_up",
        "Whether a service this daemon needs answers (1) or not (0), by dependency",
        gauge.clone(),
    );
    let up = gauge.get_or_create(&DependencyLabel { dependency: name.to_owned() }).clone();
    let (health, name) = (health.clone(), name.to_owned());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let state = match tokio::time::timeout(every, probe()).await {
                Ok(state) => state,
                Err(_) => Err(format!("no answer within {} ms", every.as_millis())),
            };
            up.set(i64::from(state.is_ok()));
            let cause = state.as_ref().err().cloned();
            if health.set(&name, state) {
                match cause {
                    Some(cause) => tracing::warn!(dependency = %name, %cause, "{name} is unavailable"),
                    None => tracing::info!(dependency = %name, "{name} is available again"),
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn causes_combine_set_states_and_checks_in_name_order() {
        let flag = Arc::new(AtomicBool::new(true));
        let f = flag.clone();
        let health =
            Health::new()
                .with_check("b-check", move || if f.load(Ordering::SeqCst) { Ok(()) } else { Err("off".into()) });
        assert!(health.is_healthy());
        assert!(health.set("c-dep", Err("gone".into())));
        assert!(!health.set("c-dep", Err("gone".into())), "same cause: no change");
        assert!(health.set("c-dep", Err("gone again".into())), "a new cause is a change");
        flag.store(false, Ordering::SeqCst);
        assert_eq!(health.causes(), vec![("b-check".into(), "off".into()), ("c-dep".into(), "gone again".into())]);
        assert!(health.set("c-dep", Ok(())));
        assert!(!health.set("c-dep", Ok(())));
        flag.store(true, Ordering::SeqCst);
        assert!(health.is_healthy());
    }

    /// Waits (up to 5 s) until `health` has exactly `want` as its causes.
    async fn until_causes(health: &Health, want: &[(&str, &str)]) {
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
        for _ in 0..500 {
            if health.causes() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(health.causes(), want);
    }

    #[tokio::test]
    async fn watch_follows_the_probe_and_sets_the_gauge() {
        let up = Arc::new(AtomicBool::new(false));
        let (health, metrics, stop) = (Health::new(), Metrics::new("test"), CancellationToken::new());
        let u = up.clone();
        let task = watch(&health, &metrics, "signd", Duration::from_millis(50), stop.clone(), move || {
            let up = u.load(Ordering::SeqCst);
            async move {
                if up {
                    Ok(())
                } else {
                    Err("cannot connect".to_owned())
                }
            }
        });
        until_causes(&health, &[("signd", "cannot connect")]).await;
        let gauge = |v: u8| format!("dependency_up{{daemon=\"test\",dependency=\"signd\"}} {v}");
        assert!(metrics.encode().contains(&gauge(0)), "{}", metrics.encode());
        up.store(true, Ordering::SeqCst);
        until_causes(&health, &[]).await;
        assert!(metrics.encode().contains(&gauge(1)), "{}", metrics.encode());
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_probe_that_hangs_is_a_cause() {
        let (health, metrics, stop) = (Health::new(), Metrics::new("test"), CancellationToken::new());
        let _task = watch(&health, &metrics, "signd", Duration::from_millis(50), stop, std::future::pending);
        until_causes(&health, &[("signd", "no answer within 50 ms")]).await;
    }
}
