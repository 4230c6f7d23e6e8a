//! Authorizations and challenges (RFC 8555 §7.5): reading and deactivating
//! an authorization, starting a challenge's validation, and recording its
//! outcome.

use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use signet_acme::state::{self, ValidationEffect};
use signet_acme::types::{AuthorizationStatus, ChallengeStatus};
use signet_acme::validate;

use super::{forbidden, not_found};
use crate::challenge::Attempt;
use crate::db::{authz_reuse_key, ChallengeRec, Id};
use crate::server::{internal, parse_id, store_failure, Answer, Authed, Reply};
use crate::Acme;

/// How long the challenge POST waits for its validation before answering
/// `processing` (the validation goes on either way).
const CHALLENGE_INLINE_WAIT: Duration = Duration::from_millis(1500);

impl Acme {
    /// The authorization resource (POST-as-GET, or deactivation §7.5.2).
    pub fn authz(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        let aid = parse_id(id).ok_or_else(|| not_found("authorization"))?;
        // Looked at before the record: a validation stores its outcome before
        // its claim ends, so a claim seen here means the record read next is
        // either still pending (shown processing) or already final.
        let validating = self.inflight.holds(&self.inflight.validating, &aid);
        let db = &self.db;
        let mut az = db
            .store
            .read(|t| t.get(&db.authzs, &aid))
            .map_err(|e| internal("reading the authorization", e))?
            .ok_or_else(|| not_found("authorization"))?;
        if az.account != acct.id {
            return Err(forbidden("authorization"));
        }
        if !a.req.is_post_as_get() {
            let p: serde_json::Value = a.req.payload_json()?;
            az.status = state::authz_after_update(p.get("status").and_then(|s| s.as_str()))?;
            db.write(|t| t.put(&db.authzs, &aid, &az)).map_err(|e| store_failure("storing the authorization", e))?;
        }
        let now = self.clock.unix_seconds();
        if let Some(idx) = validating {
            if let Some(c) = az.challenges.get_mut(idx) {
                c.status = state::challenge_status_shown(c.status, true);
            }
        }
        let retry = state::authz_in_progress(az.state().status_at(now), az.challenges.iter().map(|c| c.status))
            .then_some(self.cfg.retry_after_seconds);
        Ok(Reply::json(StatusCode::OK, &self.authz_json(&aid, &az, now)).retry_after(retry))
    }

    /// A challenge: POST `{}` starts its validation (§7.5.1); POST-as-GET reads it.
    pub async fn challenge(self: &Arc<Self>, a: Authed, authz: &str, idx: &str) -> Answer {
        let acct = a.account()?;
        let aid = parse_id(authz).ok_or_else(|| not_found("challenge"))?;
        let idx: usize = idx.parse().map_err(|_| not_found("challenge"))?;
        // Before the record, as in `authz`: a challenge being validated reads
        // `processing` until its outcome is stored, never `pending` meanwhile.
        let validating = self.inflight.holds(&self.inflight.validating, &aid) == Some(idx);
        let db = &self.db;
        let az = db
            .store
            .read(|t| t.get(&db.authzs, &aid))
            .map_err(|e| internal("reading the authorization", e))?
            .ok_or_else(|| not_found("challenge"))?;
        if az.account != acct.id {
            return Err(forbidden("challenge"));
        }
        let mut ch = az.challenges.get(idx).ok_or_else(|| not_found("challenge"))?.clone();
        ch.status = state::challenge_status_shown(ch.status, validating);
        let up = format!("<{}>;rel=\"up\"", self.resource_url("authz", &aid));
        let reply = |c: &ChallengeRec| {
            let mut r = Reply::json(StatusCode::OK, &self.challenge_json(&aid, idx, c));
            r.links.push(up.clone());
            r.retry_after((c.status == ChallengeStatus::Processing).then_some(self.cfg.retry_after_seconds))
        };
        if a.req.is_post_as_get() {
            return Ok(reply(&ch));
        }
        let _: serde_json::Value = a.req.payload_json()?;
        if !state::may_validate(az.state().status_at(self.clock.unix_seconds()), ch.status) {
            return Ok(reply(&ch));
        }
        // One validation per authorization at a time; the claim lives in memory
        // (a crash mid-validation leaves the challenge pending, to be tried again).
        let Some(claim) = self.inflight.claim(&self.inflight.validating, aid, idx) else {
            // Another of its challenges is being validated (or this one, just claimed).
            let now_validating = self.inflight.holds(&self.inflight.validating, &aid) == Some(idx);
            return Ok(reply(&ChallengeRec { status: state::challenge_status_shown(ch.status, now_validating), ..ch }));
        };
        let key_authorization = validate::key_authorization(&ch.token, &acct.jwk);
        let job = {
            let acme = self.clone();
            let account_url = acct.url.clone();
            tokio::spawn(async move {
                let c = acme.run_validation(aid, idx, key_authorization, account_url).await;
                drop(claim);
                c
            })
        };
        let done = tokio::time::timeout(CHALLENGE_INLINE_WAIT, job).await;
        let c = match done {
            Ok(Ok(c)) => c,
            _ => ChallengeRec { status: ChallengeStatus::Processing, ..ch },
        };
        Ok(reply(&c))
    }

    /// Validates one challenge and records the outcome; returns the challenge as stored.
    async fn run_validation(
        self: Arc<Self>,
        aid: Id,
        idx: usize,
        key_authorization: String,
        account_url: String,
    ) -> ChallengeRec {
        let db = &self.db;
        let az = match db.store.read(|t| t.get(&db.authzs, &aid)) {
            Ok(Some(az)) => az,
            _ => {
                return ChallengeRec {
                    kind: String::new(),
                    token: String::new(),
                    status: ChallengeStatus::Invalid,
                    validated: None,
                    error: None,
                }
            }
        };
        let kind = az.challenges[idx].challenge_type();
        let attempt = Attempt {
            identifier: &az.identifier,
            wildcard: az.wildcard,
            kind: &kind,
            key_authorization: &key_authorization,
            account_url: &account_url,
            clock: &self.clock,
        };
        let started = std::time::Instant::now();
        let outcome = self.validator.validate(&attempt).await;
        self.metrics.validation(kind.as_str(), outcome.is_ok(), started.elapsed());
        let lifetime = self.cfg.authorization_lifetime_seconds as i64;
        let stored = db.write(|t| -> Result<Option<ChallengeRec>, signet_store::StoreError> {
            let Some(mut cur) = t.get(&db.authzs, &aid)? else { return Ok(None) };
            let effect = state::validation_effect(
                cur.status,
                cur.challenges.iter().map(|c| c.status),
                outcome.is_ok(),
                lifetime,
                self.clock.unix_seconds(),
            );
            let c = &mut cur.challenges[idx];
            match effect {
                ValidationEffect::Stale => return Ok(Some(c.clone())),
                ValidationEffect::Valid { validated, expires } => {
                    c.status = ChallengeStatus::Valid;
                    c.validated = Some(validated);
                    cur.status = AuthorizationStatus::Valid;
                    if let Some(expires) = expires {
                        cur.expires = expires;
                        t.put(&db.valid_authzs, &authz_reuse_key(&cur.account, &cur.identifier, cur.wildcard), &aid)?;
                    }
                }
                ValidationEffect::Invalid => {
                    c.status = ChallengeStatus::Invalid;
                    c.error =
                        outcome.as_ref().err().map(|e| String::from_utf8_lossy(&e.problem().to_json()).into_owned());
                    cur.status = AuthorizationStatus::Invalid;
                }
            }
            let c = cur.challenges[idx].clone();
            t.put(&db.authzs, &aid, &cur)?;
            Ok(Some(c))
        });
        match stored {
            Ok(Some(c)) => c,
            Ok(None) => ChallengeRec {
                kind: kind.as_str().into(),
                token: String::new(),
                status: ChallengeStatus::Invalid,
                validated: None,
                error: None,
            },
            Err(e) => {
                tracing::error!(error = %e, "cannot store a validation outcome");
                ChallengeRec {
                    kind: kind.as_str().into(),
                    token: String::new(),
                    status: ChallengeStatus::Processing,
                    validated: None,
                    error: None,
                }
            }
        }
    }
}
