//! The state rules at chosen instants: no clock, no store.

use super::*;

const NOW: i64 = 1_780_000_000;

fn authz(status: AuthorizationStatus, expires: i64) -> AuthzState {
    AuthzState { status, expires }
}

fn order(status: OrderStatus) -> OrderState {
    OrderState { status, expires: NOW + 3600 }
}

#[test]
fn authorizations_expire_when_pending_or_valid() {
    use AuthorizationStatus as A;
    assert_eq!(authz(A::Pending, NOW).status_at(NOW), A::Pending);
    assert_eq!(authz(A::Pending, NOW).status_at(NOW + 1), A::Expired);
    assert_eq!(authz(A::Valid, NOW).status_at(NOW + 1), A::Expired);
    for kept in [A::Invalid, A::Deactivated, A::Revoked, A::Expired] {
        assert_eq!(authz(kept, NOW).status_at(NOW + 1), kept);
    }
}

#[test]
fn authorizations_are_reused_with_a_day_left() {
    use AuthorizationStatus as A;
    assert!(authz(A::Valid, NOW + REUSE_MARGIN_SECONDS + 1).reusable_at(NOW));
    assert!(!authz(A::Valid, NOW + REUSE_MARGIN_SECONDS).reusable_at(NOW));
    assert!(!authz(A::Pending, NOW + 30 * 86_400).reusable_at(NOW));
    assert!(!authz(A::Deactivated, NOW + 30 * 86_400).reusable_at(NOW));
}

#[test]
fn order_status_follows_its_authorizations_and_the_clock() {
    use AuthorizationStatus as A;
    let later = NOW + 7200;
    let pending = order(OrderStatus::Pending);
    assert_eq!(pending.status_at([authz(A::Valid, later), authz(A::Pending, later)], NOW), OrderStatus::Pending);
    assert_eq!(pending.status_at([authz(A::Valid, later), authz(A::Valid, later)], NOW), OrderStatus::Ready);
    assert_eq!(pending.status_at([], NOW), OrderStatus::Ready);
    for failed in [A::Invalid, A::Deactivated, A::Revoked] {
        assert_eq!(pending.status_at([authz(A::Valid, later), authz(failed, later)], NOW), OrderStatus::Invalid);
    }
    // An authorization that expired makes the order invalid; so does the order's own expiry.
    assert_eq!(pending.status_at([authz(A::Valid, NOW - 1)], NOW), OrderStatus::Invalid);
    assert_eq!(pending.status_at([authz(A::Valid, later)], NOW + 3601), OrderStatus::Invalid);
    // A stored ready order is judged again (its authorization may have been deactivated).
    assert_eq!(order(OrderStatus::Ready).status_at([authz(A::Deactivated, later)], NOW), OrderStatus::Invalid);
    // Valid and invalid orders stay, whatever the clock and the authorizations say.
    for kept in [OrderStatus::Valid, OrderStatus::Invalid] {
        assert_eq!(order(kept).status_at([authz(A::Pending, NOW - 1)], NOW + 86_400), kept);
    }
}

#[test]
fn what_the_client_is_shown() {
    assert_eq!(order_status_shown(OrderStatus::Ready, true), OrderStatus::Processing);
    assert_eq!(order_status_shown(OrderStatus::Ready, false), OrderStatus::Ready);
    assert_eq!(order_status_shown(OrderStatus::Pending, true), OrderStatus::Pending);
    assert!(order_in_progress(OrderStatus::Pending) && order_in_progress(OrderStatus::Processing));
    assert!(!order_in_progress(OrderStatus::Ready) && !order_in_progress(OrderStatus::Valid));
    assert_eq!(challenge_status_shown(ChallengeStatus::Pending, true), ChallengeStatus::Processing);
    assert_eq!(challenge_status_shown(ChallengeStatus::Valid, true), ChallengeStatus::Valid);
    assert_eq!(challenge_status_shown(ChallengeStatus::Pending, false), ChallengeStatus::Pending);
    assert!(authz_in_progress(AuthorizationStatus::Pending, [ChallengeStatus::Pending, ChallengeStatus::Processing]));
    assert!(!authz_in_progress(AuthorizationStatus::Pending, [ChallengeStatus::Pending]));
    assert!(!authz_in_progress(AuthorizationStatus::Expired, [ChallengeStatus::Processing]));
    assert!(challenge_listed(AuthorizationStatus::Pending, ChallengeStatus::Invalid));
    assert!(challenge_listed(AuthorizationStatus::Valid, ChallengeStatus::Valid));
    assert!(!challenge_listed(AuthorizationStatus::Valid, ChallengeStatus::Pending));
    let stored = Problem::new(ProblemType::BadCsr, "no");
    assert_eq!(order_problem(OrderStatus::Invalid, Some(stored.clone())), Some(stored));
    assert_eq!(order_problem(OrderStatus::Invalid, None).unwrap().kind, ProblemType::Unauthorized);
    assert_eq!(order_problem(OrderStatus::Pending, None), None);
}

#[test]
fn only_ready_orders_are_finalized() {
    assert!(check_finalize(OrderStatus::Ready).is_ok());
    let e = check_finalize(OrderStatus::Pending).unwrap_err();
    assert_eq!((e.kind, e.detail.as_str()), (ProblemType::OrderNotReady, "the order is pending, not ready"));
    assert!(check_finalize(OrderStatus::Valid).unwrap_err().detail.contains("valid"));
}

#[test]
fn a_finalization_ends_valid_invalid_or_ready() {
    use OrderStatus as O;
    assert_eq!(order_after_finalize(O::Ready, Ok(())), Some(O::Valid));
    assert_eq!(order_after_finalize(O::Ready, Err(&ProblemType::BadCsr)), Some(O::Invalid));
    assert_eq!(order_after_finalize(O::Pending, Err(&ProblemType::Malformed)), Some(O::Invalid));
    // The server's own failure leaves the order to be finalized again.
    assert_eq!(order_after_finalize(O::Ready, Err(&ProblemType::ServerInternal)), None);
    // Finalized meanwhile: nothing changes.
    assert_eq!(order_after_finalize(O::Valid, Ok(())), None);
    assert_eq!(order_after_finalize(O::Invalid, Err(&ProblemType::BadCsr)), None);
}

#[test]
fn new_orders_offer_challenges_by_identifier() {
    use ChallengeType as C;
    let (base, wildcard) = authz_identifier(&Identifier::dns("*.example.org"));
    assert_eq!((base, wildcard), (Identifier::dns("example.org"), true));
    assert_eq!(authz_identifier(&Identifier::dns("example.org")), (Identifier::dns("example.org"), false));
    assert_eq!(authz_identifier(&Identifier::ip("192.0.2.1")), (Identifier::ip("192.0.2.1"), false));
    assert_eq!(offered_challenges(&IdentifierType::Ip, false, true), [C::Http01, C::TlsAlpn01]);
    assert_eq!(offered_challenges(&IdentifierType::Dns, true, false), [C::Dns01]);
    assert_eq!(offered_challenges(&IdentifierType::Dns, true, true), [C::Dns01, C::DnsPersist01]);
    assert_eq!(offered_challenges(&IdentifierType::Dns, false, false), [C::Http01, C::Dns01, C::TlsAlpn01]);
    assert_eq!(
        offered_challenges(&IdentifierType::Dns, false, true),
        [C::Http01, C::Dns01, C::TlsAlpn01, C::DnsPersist01]
    );
}

#[test]
fn validation_outcomes() {
    use AuthorizationStatus as A;
    use ChallengeStatus as C;
    assert!(may_validate(A::Pending, C::Pending));
    assert!(!may_validate(A::Expired, C::Pending));
    assert!(!may_validate(A::Pending, C::Invalid));
    let fresh = [C::Pending, C::Pending];
    assert_eq!(
        validation_effect(A::Pending, fresh, true, 86_400, NOW),
        ValidationEffect::Valid { validated: NOW, expires: Some(NOW + 86_400) }
    );
    assert_eq!(
        validation_effect(A::Pending, fresh, true, 0, NOW),
        ValidationEffect::Valid { validated: NOW, expires: None }
    );
    assert_eq!(validation_effect(A::Pending, fresh, false, 86_400, NOW), ValidationEffect::Invalid);
    // Another validation of the authorization got there first, or it was deactivated.
    assert_eq!(validation_effect(A::Pending, [C::Pending, C::Valid], true, 0, NOW), ValidationEffect::Stale);
    assert_eq!(validation_effect(A::Deactivated, fresh, true, 0, NOW), ValidationEffect::Stale);
}

#[test]
fn client_updates() {
    use AccountStatus as S;
    assert_eq!(authz_after_update(Some("deactivated")), Ok(AuthorizationStatus::Deactivated));
    for refused in [None, Some("valid"), Some("revoked")] {
        assert_eq!(authz_after_update(refused).unwrap_err().kind, ProblemType::Malformed);
    }
    assert_eq!(account_after_update(S::Valid, None), Ok(S::Valid));
    assert_eq!(account_after_update(S::Valid, Some(S::Valid)), Ok(S::Valid));
    assert_eq!(account_after_update(S::Valid, Some(S::Deactivated)), Ok(S::Deactivated));
    assert_eq!(account_after_update(S::Valid, Some(S::Revoked)).unwrap_err().kind, ProblemType::Malformed);
}

#[test]
fn renewal_windows() {
    // A 90-day certificate: from day 60 to day 67.5.
    let nb = NOW;
    let na = NOW + 90 * 86_400;
    assert_eq!(renewal_window(nb, na, false, NOW), (nb + 60 * 86_400, nb + 90 * 86_400 * 3 / 4));
    // The window does not move with the clock; revoked, it is now.
    assert_eq!(renewal_window(nb, na, false, NOW + 1000), renewal_window(nb, na, false, NOW));
    assert_eq!(renewal_window(nb, na, true, NOW + 1000), (NOW + 1000 - 3600, NOW + 1000));
    // A degenerate lifetime still gives a window.
    assert_eq!(renewal_window(nb, nb, false, NOW), (nb, nb));
}
