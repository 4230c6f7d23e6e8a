//! The JSON views of the stored records (RFC 8555 §7.1): what a client is
//! shown of an account, an order, an authorization and a challenge.

use serde_json::json;
use signet_acme::state;
use signet_acme::types::{self, AuthorizationStatus, ChallengeType, OrderStatus};
use signet_acme::Problem;

use super::ts;
use crate::db::{AccountRec, AuthzRec, ChallengeRec, Id, OrderRec};
use crate::server::status_name;
use crate::Acme;

impl Acme {
    pub(super) fn account_json(&self, id: &Id, rec: &AccountRec) -> serde_json::Value {
        json!({
            "status": status_name(&rec.status),
            "contact": rec.contact,
            "orders": format!("{}/orders", self.resource_url("acct", id)),
            "createdAt": ts(rec.created).and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
        })
    }

    pub(super) fn challenge_json(&self, authz_id: &Id, idx: usize, c: &ChallengeRec) -> types::Challenge {
        let is_persist = c.challenge_type() == ChallengeType::DnsPersist01;
        types::Challenge {
            kind: c.challenge_type(),
            url: format!("{}/{idx}", self.resource_url("chall", authz_id)),
            status: c.status,
            validated: c.validated.and_then(ts),
            error: stored_problem(&c.error),
            token: (!is_persist).then(|| c.token.clone()),
            issuer_domain_names: is_persist.then(|| self.validator.caa_identities().to_vec()),
        }
    }

    pub(super) fn authz_json(&self, id: &Id, a: &AuthzRec, now: i64) -> types::Authorization {
        let status: AuthorizationStatus = a.state().status_at(now);
        let challenges = a
            .challenges
            .iter()
            .enumerate()
            .filter(|(_, c)| state::challenge_listed(status, c.status))
            .map(|(i, c)| self.challenge_json(id, i, c))
            .collect();
        let identifier = a.identifier.clone();
        types::Authorization {
            identifier,
            status,
            expires: ts(a.expires),
            challenges,
            wildcard: a.wildcard.then_some(true),
        }
    }

    pub(super) fn order_json(&self, id: &Id, o: &OrderRec, status: OrderStatus) -> types::Order {
        types::Order {
            status,
            expires: ts(o.expires),
            identifiers: o.identifiers.clone(),
            profile: Some(o.profile.clone()),
            replaces: o.replaces.clone(),
            not_before: o.not_before.and_then(ts),
            not_after: o.not_after.and_then(ts),
            error: state::order_problem(status, stored_problem(&o.error)),
            authorizations: o.authzs.iter().map(|a| self.resource_url("authz", a)).collect(),
            finalize: format!("{}/finalize", self.resource_url("order", id)),
            certificate: o.cert_serial.as_ref().map(|s| format!("{}/acme/cert/{}", self.base, hex::encode(s))),
        }
    }
}

/// A problem stored as JSON with a record.
fn stored_problem(json: &Option<String>) -> Option<Problem> {
    json.as_deref().and_then(|j| serde_json::from_str(j).ok())
}
