//! The state rules of ACME resources (RFC 8555 §7.1.6, RFC 9773): the status
//! an order or an authorization has at a given time, and what a challenge's
//! outcome, a finalization or a deactivation does to it.
//!
//! Every function takes the stored state, the input and `now` (Unix seconds)
//! and returns the new state or a decision; the caller reads and stores the
//! records (acmed, in one LMDB transaction that re-checks the state it
//! changes). Nothing here reads the clock.
//!
//! ```text
//! authorization   pending ──validated──▶ valid ──expires──▶ expired
//!                    │  └──failed──▶ invalid       │
//!                    └───────deactivated◀──────────┘
//! order           pending ──every authorization valid──▶ ready ──finalize──▶ processing ──▶ valid
//!                    └──an authorization failed, or the order expired──▶ invalid ◀──refused CSR──┘
//! ```

use crate::identifier::{Identifier, IdentifierType};
use crate::problem::{AcmeError, Problem, ProblemType};
use crate::types::{AccountStatus, AuthorizationStatus, ChallengeStatus, ChallengeType, OrderStatus};

/// How long a valid authorization must still have to run for a new order to
/// reuse it instead of making a new one, seconds.
pub const REUSE_MARGIN_SECONDS: i64 = 86_400;

/// What the rules read of an authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthzState {
    /// The stored status.
    pub status: AuthorizationStatus,
    /// When it expires, Unix seconds.
    pub expires: i64,
}

impl AuthzState {
    /// The status at `now`: a pending or valid authorization past its expiry
    /// is `expired`; any other status stays as stored.
    pub fn status_at(&self, now: i64) -> AuthorizationStatus {
        match self.status {
            AuthorizationStatus::Pending | AuthorizationStatus::Valid if now > self.expires => {
                AuthorizationStatus::Expired
            }
            s => s,
        }
    }

    /// Whether a new order (of the same account, for the same identifier) may
    /// reuse this authorization at `now`: it is valid and has more than
    /// [`REUSE_MARGIN_SECONDS`] left.
    pub fn reusable_at(&self, now: i64) -> bool {
        self.status == AuthorizationStatus::Valid && self.expires > now + REUSE_MARGIN_SECONDS
    }
}

/// What the rules read of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderState {
    /// The stored status (`pending`, `ready`, `valid` or `invalid`; `processing`
    /// is never stored, see [`order_status_shown`]).
    pub status: OrderStatus,
    /// When a pending or ready order expires, Unix seconds.
    pub expires: i64,
}

impl OrderState {
    /// The status at `now`, given the order's authorizations: a stored
    /// `pending` or `ready` becomes `invalid` once the order expired or one
    /// authorization is neither pending nor valid (at `now`), `ready` once
    /// every authorization is valid, and `pending` otherwise. Any other
    /// stored status stays.
    pub fn status_at(&self, authzs: impl IntoIterator<Item = AuthzState>, now: i64) -> OrderStatus {
        if self.status != OrderStatus::Pending && self.status != OrderStatus::Ready {
            return self.status;
        }
        if now > self.expires {
            return OrderStatus::Invalid;
        }
        let mut all_valid = true;
        for a in authzs {
            match a.status_at(now) {
                AuthorizationStatus::Valid => {}
                AuthorizationStatus::Pending => all_valid = false,
                _ => return OrderStatus::Invalid,
            }
        }
        if all_valid {
            OrderStatus::Ready
        } else {
            OrderStatus::Pending
        }
    }
}

/// The order status a client is shown: `ready` while its finalization is in
/// progress is `processing`.
pub fn order_status_shown(status: OrderStatus, finalizing: bool) -> OrderStatus {
    if status == OrderStatus::Ready && finalizing {
        OrderStatus::Processing
    } else {
        status
    }
}

/// Whether an order in `status` will change without the client doing
/// anything more, so the answer tells it when to look again (Retry-After).
pub fn order_in_progress(status: OrderStatus) -> bool {
    status == OrderStatus::Pending || status == OrderStatus::Processing
}

/// The problem shown with an order: the stored one, or for an order that
/// became `invalid` without one (an authorization failed or expired, or the
/// order expired), a generic `unauthorized`.
pub fn order_problem(status: OrderStatus, stored: Option<Problem>) -> Option<Problem> {
    stored.or_else(|| {
        (status == OrderStatus::Invalid)
            .then(|| Problem::new(ProblemType::Unauthorized, "an authorization of this order failed or expired"))
    })
}

/// Whether finalize may start on an order whose status is `status` now
/// (§7.4): only a `ready` order is finalized; anything else is
/// `orderNotReady`.
pub fn check_finalize(status: OrderStatus) -> Result<(), AcmeError> {
    if status == OrderStatus::Ready {
        return Ok(());
    }
    Err(AcmeError::new(ProblemType::OrderNotReady, format!("the order is {}, not ready", status_name(status))))
}

/// The stored status an order takes when its finalization ends, or `None`
/// to leave it as it is. `outcome` is `Ok` when the certificate was issued,
/// else the type of the problem that stopped it.
///
/// Only an order still `pending` or `ready` as stored changes (anything else
/// was finalized meanwhile): issued, it becomes `valid`; refused because of
/// the request (the CSR, its validity window), `invalid`. A failure of the
/// server's own (`serverInternal`) leaves it `ready`, to be finalized again:
/// the client never got a certificate.
pub fn order_after_finalize(stored: OrderStatus, outcome: Result<(), &ProblemType>) -> Option<OrderStatus> {
    if stored != OrderStatus::Pending && stored != OrderStatus::Ready {
        return None;
    }
    match outcome {
        Ok(()) => Some(OrderStatus::Valid),
        Err(ProblemType::ServerInternal) => None,
        Err(_) => Some(OrderStatus::Invalid),
    }
}

/// The authorization `*.example.org` needs, and whether it is a wildcard's:
/// (`example.org`, true). Any other identifier is its own, not a wildcard's.
pub fn authz_identifier(ordered: &Identifier) -> (Identifier, bool) {
    match ordered.value.strip_prefix("*.") {
        Some(rest) if ordered.kind == IdentifierType::Dns => (Identifier::dns(rest), true),
        _ => (ordered.clone(), false),
    }
}

/// The challenges offered for an authorization of `kind` (the wildcard's
/// base name for a wildcard): IP addresses take http-01 and tls-alpn-01
/// (RFC 8738 §7); a wildcard, DNS challenges only (§7.1.3); other names all
/// types. dns-persist-01 only where the CA has issuer domain names
/// (`persist`).
pub fn offered_challenges(kind: &IdentifierType, wildcard: bool, persist: bool) -> Vec<ChallengeType> {
    let persist = persist.then_some(ChallengeType::DnsPersist01);
    let offered = match (kind, wildcard) {
        (IdentifierType::Ip, _) => return vec![ChallengeType::Http01, ChallengeType::TlsAlpn01],
        (_, true) => vec![Some(ChallengeType::Dns01), persist],
        _ => vec![Some(ChallengeType::Http01), Some(ChallengeType::Dns01), Some(ChallengeType::TlsAlpn01), persist],
    };
    offered.into_iter().flatten().collect()
}

/// Whether a challenge is listed in its authorization: all are while it is
/// pending; once valid, only the one that succeeded (§7.1.4).
pub fn challenge_listed(authz: AuthorizationStatus, challenge: ChallengeStatus) -> bool {
    authz != AuthorizationStatus::Valid || challenge == ChallengeStatus::Valid
}

/// The challenge status a client is shown: `pending` while its validation is
/// running is `processing`.
pub fn challenge_status_shown(stored: ChallengeStatus, validating: bool) -> ChallengeStatus {
    if stored == ChallengeStatus::Pending && validating {
        ChallengeStatus::Processing
    } else {
        stored
    }
}

/// Whether an authorization, `authz_now` at now, will change without the
/// client doing anything more (one of its challenges is being validated), so
/// the answer tells it when to look again (Retry-After).
pub fn authz_in_progress(
    authz_now: AuthorizationStatus,
    challenges: impl IntoIterator<Item = ChallengeStatus>,
) -> bool {
    authz_now == AuthorizationStatus::Pending && challenges.into_iter().any(|c| c == ChallengeStatus::Processing)
}

/// Whether a client's POST to a challenge starts its validation (§7.5.1):
/// only while the authorization is `pending` at now and the challenge has
/// not been tried. Otherwise the challenge is answered as it is.
pub fn may_validate(authz_now: AuthorizationStatus, challenge: ChallengeStatus) -> bool {
    authz_now == AuthorizationStatus::Pending && challenge == ChallengeStatus::Pending
}

/// What a validation's outcome does to its challenge and authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationEffect {
    /// Nothing: the authorization is no longer pending as stored, or one of
    /// its challenges was tried already (one validation per authorization).
    Stale,
    /// The challenge is valid, validated at `validated`, and so is the
    /// authorization.
    Valid {
        /// When it was validated, Unix seconds.
        validated: i64,
        /// The authorization's new expiry when it has a lifetime of its own
        /// once valid (and may then be reused by later orders); `None` keeps
        /// the order's expiry.
        expires: Option<i64>,
    },
    /// The challenge is invalid (with the validation's problem), and so is the
    /// authorization.
    Invalid,
}

/// What a validation's outcome (`succeeded`) does at `now` to an
/// authorization stored as `authz` with challenges `challenges`.
/// `lifetime` is how long a valid authorization lasts, seconds (0 or less:
/// as long as its order).
pub fn validation_effect(
    authz: AuthorizationStatus,
    challenges: impl IntoIterator<Item = ChallengeStatus>,
    succeeded: bool,
    lifetime: i64,
    now: i64,
) -> ValidationEffect {
    if authz != AuthorizationStatus::Pending || challenges.into_iter().any(|c| c != ChallengeStatus::Pending) {
        return ValidationEffect::Stale;
    }
    if succeeded {
        ValidationEffect::Valid { validated: now, expires: (lifetime > 0).then(|| now + lifetime) }
    } else {
        ValidationEffect::Invalid
    }
}

/// What a client's update of an authorization does (§7.5.2): it may only
/// deactivate it (`requested`: the payload's `status`).
pub fn authz_after_update(requested: Option<&str>) -> Result<AuthorizationStatus, AcmeError> {
    match requested {
        Some("deactivated") => Ok(AuthorizationStatus::Deactivated),
        _ => Err(AcmeError::new(ProblemType::Malformed, "an authorization update may only set status to deactivated")),
    }
}

/// The status an account has after a client's update asking for `requested`
/// (§7.3.2, §7.3.6): `valid` (or nothing) keeps it, `deactivated`
/// deactivates it; a client may not revoke an account.
pub fn account_after_update(
    current: AccountStatus,
    requested: Option<AccountStatus>,
) -> Result<AccountStatus, AcmeError> {
    match requested {
        None | Some(AccountStatus::Valid) => Ok(current),
        Some(AccountStatus::Deactivated) => Ok(AccountStatus::Deactivated),
        Some(AccountStatus::Revoked) => {
            Err(AcmeError::new(ProblemType::Malformed, "a client may only set status to deactivated"))
        }
    }
}

/// The suggested renewal window (RFC 9773 §4.2), Unix seconds: from two
/// thirds to three quarters of the certificate's lifetime; for a revoked
/// certificate, the hour up to now (renew at once).
pub fn renewal_window(not_before: i64, not_after: i64, revoked: bool, now: i64) -> (i64, i64) {
    if revoked {
        return (now - 3600, now);
    }
    let life = (not_after - not_before).max(1);
    (not_before + life * 2 / 3, not_before + life * 3 / 4)
}

/// The JSON name of an order status.
fn status_name(status: OrderStatus) -> &'static str {
    match status {
        OrderStatus::Pending => "pending",
        OrderStatus::Ready => "ready",
        OrderStatus::Processing => "processing",
        OrderStatus::Valid => "valid",
        OrderStatus::Invalid => "invalid",
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
