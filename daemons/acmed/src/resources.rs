//! The ACME resources (RFC 8555 §7): accounts, orders, authorizations,
//! challenges, finalization, certificates, revocation, key change, and ARI
//! renewal information (RFC 9773).
//!
//! State changes are single LMDB write transactions that re-check the state
//! they change (two requests racing on one order cannot both finalize it).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use der::{Decode, Encode};
use hyper::StatusCode;
use rand_core::{OsRng, RngCore};
use serde_json::json;
use signet_acme::jws::{verify_key_change, ExternalAccountBinding};
use signet_acme::types::{
    self, AccountStatus, AuthorizationStatus, ChallengeStatus, ChallengeType, Identifier, IdentifierType, NewOrder,
    OrderStatus,
};
use signet_acme::{validate, Jwk, Problem, ProblemType};
use signet_ca::SanEntry;
use time::OffsetDateTime;
use x509_cert::Certificate;

use crate::challenge::Attempt;
use crate::db::{account_order_key, authz_reuse_key, AccountRec, AuthzRec, ChallengeRec, Id, OrderRec};
use crate::server::{internal, parse_id, problem_with_status, status_name, Answer, Authed, Reply};
use crate::Acme;

/// Most identifiers one order may name.
const MAX_IDENTIFIERS: usize = 100;

/// How long the challenge POST waits for its validation before answering
/// `processing` (the validation goes on either way).
const CHALLENGE_INLINE_WAIT: Duration = Duration::from_millis(1500);

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn ts(secs: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(secs).ok()
}

fn new_id() -> Id {
    let mut id = [0u8; 16];
    OsRng.fill_bytes(&mut id);
    id
}

fn new_token() -> String {
    let mut t = [0u8; 32];
    OsRng.fill_bytes(&mut t);
    URL_SAFE_NO_PAD.encode(t)
}

fn stored_problem(json: &Option<String>) -> Option<Problem> {
    json.as_deref().and_then(|j| serde_json::from_str(j).ok())
}

fn not_found(what: &str) -> Problem {
    problem_with_status(ProblemType::Malformed, 404, format!("no such {what}"))
}

fn forbidden(what: &str) -> Problem {
    Problem::new(ProblemType::Unauthorized, format!("the {what} belongs to another account"))
}

/// An order's status as of now: `pending` becomes `ready` once every
/// authorization is valid, and `invalid` once one fails or the order expires.
pub fn effective_order_status(order: &OrderRec, authzs: &[AuthzRec], now: i64) -> OrderStatus {
    if order.status != OrderStatus::Pending && order.status != OrderStatus::Ready {
        return order.status;
    }
    if now > order.expires {
        return OrderStatus::Invalid;
    }
    let states: Vec<AuthorizationStatus> = authzs.iter().map(|a| effective_authz_status(a, now)).collect();
    if states.iter().any(|s| *s != AuthorizationStatus::Valid && *s != AuthorizationStatus::Pending) {
        OrderStatus::Invalid
    } else if states.iter().all(|s| *s == AuthorizationStatus::Valid) {
        OrderStatus::Ready
    } else {
        OrderStatus::Pending
    }
}

/// An authorization's status as of now (`expired` once past its expiry).
pub fn effective_authz_status(a: &AuthzRec, now: i64) -> AuthorizationStatus {
    match a.status {
        AuthorizationStatus::Pending | AuthorizationStatus::Valid if now > a.expires => AuthorizationStatus::Expired,
        s => s,
    }
}

impl Acme {
    fn account_json(&self, id: &Id, rec: &AccountRec) -> serde_json::Value {
        json!({
            "status": status_name(&rec.status),
            "contact": rec.contact,
            "orders": format!("{}/orders", self.resource_url("acct", id)),
            "createdAt": ts(rec.created).and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
        })
    }

    fn challenge_json(&self, authz_id: &Id, idx: usize, c: &ChallengeRec) -> types::Challenge {
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

    fn authz_json(&self, id: &Id, a: &AuthzRec, now: i64) -> types::Authorization {
        let status = effective_authz_status(a, now);
        // Once valid, RFC 8555 §7.1.4 lists only the challenge that succeeded.
        let challenges = a
            .challenges
            .iter()
            .enumerate()
            .filter(|(_, c)| status != AuthorizationStatus::Valid || c.status == ChallengeStatus::Valid)
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

    fn order_json(&self, id: &Id, o: &OrderRec, status: OrderStatus) -> types::Order {
        types::Order {
            status,
            expires: ts(o.expires),
            identifiers: o.identifiers.clone(),
            profile: Some(o.profile.clone()),
            replaces: o.replaces.clone(),
            not_before: o.not_before.and_then(ts),
            not_after: o.not_after.and_then(ts),
            error: stored_problem(&o.error).or_else(|| {
                (status == OrderStatus::Invalid).then(|| {
                    Problem::new(ProblemType::Unauthorized, "an authorization of this order failed or expired")
                })
            }),
            authorizations: o.authzs.iter().map(|a| self.resource_url("authz", a)).collect(),
            finalize: format!("{}/finalize", self.resource_url("order", id)),
            certificate: o.cert_serial.as_ref().map(|s| format!("{}/acme/cert/{}", self.base, hex::encode(s))),
        }
    }

    /// `newAccount` (§7.3), with onlyReturnExisting and external account binding.
    pub fn new_account(&self, a: Authed) -> Answer {
        let Some(jwk) = a.req.jwk().cloned() else {
            return Err(Problem::new(ProblemType::Malformed, "newAccount must carry jwk"));
        };
        let p: types::Account = a.req.payload_json()?;
        let thumb = jwk.thumbprint_sha256();
        let db = &self.db;
        let existing =
            db.store.read(|t| t.get(&db.account_keys, &thumb)).map_err(|e| internal("reading accounts", e))?;
        if let Some(id) = existing {
            let rec = db.store.read(|t| t.get(&db.accounts, &id)).map_err(|e| internal("reading accounts", e))?;
            let rec = rec.ok_or_else(|| internal("account index", "dangling key index"))?;
            return Ok(Reply::json(StatusCode::OK, &self.account_json(&id, &rec)).at(self.resource_url("acct", &id)));
        }
        if p.only_return_existing == Some(true) {
            return Err(Problem::new(ProblemType::AccountDoesNotExist, "no account has this key"));
        }
        if self.cfg.terms_of_service.is_some() && p.terms_of_service_agreed != Some(true) {
            return Err(Problem::new(
                ProblemType::UserActionRequired,
                "agree to the terms of service (termsOfServiceAgreed: true)",
            ));
        }
        let contact =
            p.contact.unwrap_or_default().iter().map(|c| validate::contact(c)).collect::<Result<Vec<_>, _>>()?;
        let eab = match &p.external_account_binding {
            Some(v) => {
                let binding = ExternalAccountBinding::parse(v)?;
                let kid = binding.key_id().to_owned();
                let rec = db
                    .store
                    .read(|t| t.get(&db.eab_keys, &kid))
                    .map_err(|e| internal("reading EAB keys", e))?
                    .ok_or_else(|| {
                        Problem::new(ProblemType::Unauthorized, format!("unknown external account key id {kid:?}"))
                    })?;
                if rec.account.is_some() {
                    return Err(Problem::new(
                        ProblemType::Unauthorized,
                        format!("external account key {kid:?} is already bound to an account"),
                    ));
                }
                binding.verify(&rec.key, &a.url, &jwk)?;
                Some((kid, rec.key))
            }
            None if self.cfg.external_account_required => {
                return Err(Problem::new(
                    ProblemType::ExternalAccountRequired,
                    "this CA requires an external account binding",
                ))
            }
            None => None,
        };
        self.limits.check_new_account()?;
        let id = new_id();
        let rec = AccountRec {
            jwk: jwk.canonical_json(),
            status: AccountStatus::Valid,
            contact,
            created: now(),
            eab_kid: eab.as_ref().map(|(kid, _)| kid.clone()),
        };
        let created = db
            .store
            .try_write(|t| -> Result<Result<(), Id>, signet_store::StoreError> {
                if let Some(other) = t.get(&db.account_keys, &thumb)? {
                    return Ok(Err(other));
                }
                if let Some((kid, verified_with)) = &eab {
                    // Still there, still unbound, and still the key the binding
                    // was verified with (not deleted and re-created meanwhile).
                    match t.get(&db.eab_keys, kid)? {
                        Some(mut k) if k.account.is_none() && k.key == *verified_with => {
                            k.account = Some(id);
                            t.put(&db.eab_keys, kid, &k)?;
                        }
                        _ => return Ok(Err([0; 16])),
                    }
                }
                t.put(&db.accounts, &id, &rec)?;
                t.put(&db.account_keys, &thumb, &id)?;
                Ok(Ok(()))
            })
            .map_err(|e| internal("storing the account", e))?;
        match created {
            Ok(()) => {
                self.metrics.accounts.inc();
                Ok(Reply::json(StatusCode::CREATED, &self.account_json(&id, &rec)).at(self.resource_url("acct", &id)))
            }
            Err(other) if other != [0; 16] => {
                let rec =
                    db.store.read(|t| t.get(&db.accounts, &other)).map_err(|e| internal("reading accounts", e))?;
                let rec = rec.ok_or_else(|| internal("account index", "dangling key index"))?;
                Ok(Reply::json(StatusCode::OK, &self.account_json(&other, &rec)).at(self.resource_url("acct", &other)))
            }
            Err(_) => {
                Err(Problem::new(ProblemType::Unauthorized, "the external account key was bound or deleted meanwhile"))
            }
        }
    }

    /// The account resource (§7.3.2 update, §7.3.6 deactivation).
    pub fn account(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        if parse_id(id) != Some(acct.id) {
            return Err(Problem::new(ProblemType::Unauthorized, "the URL names another account than the signer"));
        }
        if a.req.is_post_as_get() {
            return Ok(Reply::json(StatusCode::OK, &self.account_json(&acct.id, &acct.rec)).at(acct.url.clone()));
        }
        let p: types::Account = a.req.payload_json()?;
        let mut rec = acct.rec.clone();
        if let Some(contact) = p.contact {
            rec.contact = contact.iter().map(|c| validate::contact(c)).collect::<Result<Vec<_>, _>>()?;
        }
        match p.status {
            None | Some(AccountStatus::Valid) => {}
            Some(AccountStatus::Deactivated) => rec.status = AccountStatus::Deactivated,
            Some(AccountStatus::Revoked) => {
                return Err(Problem::new(ProblemType::Malformed, "a client may only set status to deactivated"))
            }
        }
        let db = &self.db;
        db.store.write(|t| t.put(&db.accounts, &acct.id, &rec)).map_err(|e| internal("storing the account", e))?;
        Ok(Reply::json(StatusCode::OK, &self.account_json(&acct.id, &rec)).at(acct.url.clone()))
    }

    /// The account's orders list (§7.1.2.1).
    pub fn account_orders(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        if parse_id(id) != Some(acct.id) {
            return Err(Problem::new(ProblemType::Unauthorized, "the URL names another account than the signer"));
        }
        let db = &self.db;
        let start = account_order_key(&acct.id, &[0; 16]);
        let rows = db
            .store
            .read(|t| t.range(&db.account_orders, Some(&start), 1000))
            .map_err(|e| internal("reading orders", e))?;
        let orders: Vec<String> = rows
            .iter()
            .take_while(|(k, ())| k[..16] == acct.id)
            .map(|(k, ())| self.resource_url("order", &k[16..]))
            .collect();
        Ok(Reply::json(StatusCode::OK, &json!({ "orders": orders })))
    }

    /// keyChange (§7.3.5).
    pub fn key_change(&self, a: Authed) -> Answer {
        let acct = a.account()?;
        let new_key = verify_key_change(&a.req, &acct.url, &acct.jwk)?;
        let thumb_new = new_key.thumbprint_sha256();
        let thumb_old = acct.jwk.thumbprint_sha256();
        let mut rec = acct.rec.clone();
        rec.jwk = new_key.canonical_json();
        let db = &self.db;
        let clash = db
            .store
            .try_write(|t| -> Result<Option<Id>, signet_store::StoreError> {
                if let Some(other) = t.get(&db.account_keys, &thumb_new)? {
                    return Ok(Some(other));
                }
                t.delete(&db.account_keys, &thumb_old)?;
                t.put(&db.account_keys, &thumb_new, &acct.id)?;
                t.put(&db.accounts, &acct.id, &rec)?;
                Ok(None)
            })
            .map_err(|e| internal("storing the new key", e))?;
        if let Some(other) = clash {
            let mut p = problem_with_status(ProblemType::Malformed, 409, "the new key is already an account's key");
            p.instance = Some(self.resource_url("acct", &other));
            return Err(p);
        }
        Ok(Reply::json(StatusCode::OK, &self.account_json(&acct.id, &rec)).at(acct.url.clone()))
    }

    /// newOrder (§7.4), with profiles and ARI `replaces`.
    pub fn new_order(&self, a: Authed) -> Answer {
        let acct = a.account()?;
        let p: NewOrder = a.req.payload_json()?;
        if p.identifiers.is_empty() {
            return Err(Problem::new(ProblemType::Malformed, "an order needs at least one identifier"));
        }
        if p.identifiers.len() > MAX_IDENTIFIERS {
            return Err(Problem::new(
                ProblemType::RejectedIdentifier,
                format!("an order may name at most {MAX_IDENTIFIERS} identifiers"),
            ));
        }
        let (not_before, not_after) = crate::window::requested(p.not_before, p.not_after)?;
        let mut idents = Vec::new();
        let mut refusals = Vec::new();
        for id in &p.identifiers {
            match validate::identifier(id) {
                Ok(n) => {
                    if !idents.contains(&n) {
                        idents.push(n);
                    }
                }
                Err(e) => refusals.push(e.problem()),
            }
        }
        if !refusals.is_empty() {
            return Err(Problem::with_subproblems("some identifiers cannot be issued for", refusals));
        }
        let profile = p.profile.clone().unwrap_or_else(|| self.cfg.default_profile_name().to_owned());
        if !self.cfg.profiles.contains_key(&profile) {
            return Err(Problem::new(
                ProblemType::InvalidProfile,
                format!("no profile {profile:?}; see the directory's meta.profiles"),
            ));
        }
        // Checked again at finalize, with the clock then.
        crate::window::resolve(not_before, not_after, &self.validity_bounds(&profile), now())?;
        let db = &self.db;
        if let Some(replaces) = &p.replaces {
            let (aki, serial) = types::parse_renewal_cert_id(replaces)?;
            if aki != self.ca.ski {
                return Err(Problem::new(ProblemType::Malformed, "replaces names a certificate of another CA"));
            }
            let old = db
                .store
                .read(|t| t.get(&db.certs, &serial))
                .map_err(|e| internal("reading certificates", e))?
                .ok_or_else(|| Problem::new(ProblemType::Malformed, "replaces names an unknown certificate"))?;
            if old.account != acct.id {
                return Err(Problem::new(ProblemType::Unauthorized, "replaces names another account's certificate"));
            }
            if old.replaced_by.is_some() {
                return Err(Problem::new(ProblemType::AlreadyReplaced, "that certificate has already been replaced"));
            }
            let old_cert = Certificate::from_der(&old.der).map_err(|e| internal("stored certificate", e))?;
            let old_idents = cert_identifiers(&old_cert);
            if !idents.iter().any(|i| old_idents.contains(&i.value.to_ascii_lowercase())) {
                return Err(Problem::new(
                    ProblemType::Malformed,
                    "the order shares no identifier with the certificate it replaces",
                ));
            }
        }
        self.limits.check_new_order(&acct.id)?;
        let now = now();
        let expires = now + self.cfg.order_lifetime_seconds as i64;
        let order_id = new_id();
        let mut authz_ids = Vec::new();
        let mut authzs = Vec::new();
        let mut fresh = Vec::new();
        for ident in &idents {
            let (base, wildcard) = match ident.value.strip_prefix("*.") {
                Some(rest) if ident.kind == IdentifierType::Dns => (Identifier::dns(rest), true),
                _ => (ident.clone(), false),
            };
            let persist = !self.validator.caa_identities().is_empty();
            let kinds: Vec<ChallengeType> = match (&base.kind, wildcard) {
                (IdentifierType::Ip, _) => vec![ChallengeType::Http01, ChallengeType::TlsAlpn01],
                (_, true) => [Some(ChallengeType::Dns01), persist.then_some(ChallengeType::DnsPersist01)]
                    .into_iter()
                    .flatten()
                    .collect(),
                _ => [
                    Some(ChallengeType::Http01),
                    Some(ChallengeType::Dns01),
                    Some(ChallengeType::TlsAlpn01),
                    persist.then_some(ChallengeType::DnsPersist01),
                ]
                .into_iter()
                .flatten()
                .collect(),
            };
            // The account's valid authorization for this identifier, when it has a day left.
            let reuse_key = authz_reuse_key(&acct.id, &base, wildcard);
            let reusable = db
                .store
                .read(|t| match t.get(&db.valid_authzs, &reuse_key)? {
                    Some(id) => Ok(t.get(&db.authzs, &id)?.map(|a| (id, a))),
                    None => Ok(None),
                })
                .map_err(|e| internal("reading authorizations", e))?
                .filter(|(_, a)| {
                    a.status == AuthorizationStatus::Valid && a.expires > now + 86_400 && a.account == acct.id
                });
            if let Some((id, a)) = reusable {
                authz_ids.push(id);
                authzs.push(a);
                continue;
            }
            let challenges = kinds
                .into_iter()
                .map(|k| ChallengeRec {
                    kind: k.as_str().to_owned(),
                    token: new_token(),
                    status: ChallengeStatus::Pending,
                    validated: None,
                    error: None,
                })
                .collect();
            let id = new_id();
            authz_ids.push(id);
            fresh.push(id);
            authzs.push(AuthzRec {
                account: acct.id,
                identifier: base,
                wildcard,
                status: AuthorizationStatus::Pending,
                expires,
                challenges,
            });
        }
        let order = OrderRec {
            account: acct.id,
            status: OrderStatus::Pending,
            expires,
            identifiers: idents,
            authzs: authz_ids.clone(),
            profile,
            replaces: p.replaces.clone(),
            not_before,
            not_after,
            error: None,
            cert_serial: None,
        };
        db.store
            .write(|t| {
                for (id, az) in authz_ids.iter().zip(&authzs) {
                    if fresh.contains(id) {
                        t.put(&db.authzs, id, az)?;
                    }
                }
                t.put(&db.orders, &order_id, &order)?;
                t.put(&db.account_orders, &account_order_key(&acct.id, &order_id), &())
            })
            .map_err(|e| internal("storing the order", e))?;
        self.metrics.orders.inc();
        if order.replaces.is_some() {
            self.metrics.replacing.inc();
        }
        let status = effective_order_status(&order, &authzs, now);
        Ok(Reply::json(StatusCode::CREATED, &self.order_json(&order_id, &order, status))
            .at(self.resource_url("order", &order_id)))
    }

    fn load_order(&self, acct: &Id, id: &str) -> Result<(Id, OrderRec, Vec<AuthzRec>), Problem> {
        let id = parse_id(id).ok_or_else(|| not_found("order"))?;
        let db = &self.db;
        let (order, authzs) = db
            .store
            .read(|t| {
                let Some(o) = t.get(&db.orders, &id)? else { return Ok((None, Vec::new())) };
                let mut v = Vec::with_capacity(o.authzs.len());
                for a in &o.authzs {
                    if let Some(az) = t.get(&db.authzs, a)? {
                        v.push(az);
                    }
                }
                Ok((Some(o), v))
            })
            .map_err(|e| internal("reading the order", e))?;
        let order = order.ok_or_else(|| not_found("order"))?;
        if order.account != *acct {
            return Err(forbidden("order"));
        }
        Ok((id, order, authzs))
    }

    /// The order resource (POST-as-GET).
    pub fn order(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        a.req.expect_post_as_get()?;
        let (id, order, authzs) = self.load_order(&acct.id, id)?;
        let mut status = effective_order_status(&order, &authzs, now());
        if status == OrderStatus::Ready && self.inflight.holds(&self.inflight.finalizing, &id).is_some() {
            status = OrderStatus::Processing;
        }
        let retry = (status == OrderStatus::Processing || status == OrderStatus::Pending)
            .then_some(self.cfg.retry_after_seconds);
        Ok(Reply::json(StatusCode::OK, &self.order_json(&id, &order, status))
            .at(self.resource_url("order", &id))
            .retry_after(retry))
    }

    /// The authorization resource (POST-as-GET, or deactivation §7.5.2).
    pub fn authz(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        let aid = parse_id(id).ok_or_else(|| not_found("authorization"))?;
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
            if p.get("status").and_then(|s| s.as_str()) != Some("deactivated") {
                return Err(Problem::new(
                    ProblemType::Malformed,
                    "an authorization update may only set status to deactivated",
                ));
            }
            az.status = AuthorizationStatus::Deactivated;
            db.store.write(|t| t.put(&db.authzs, &aid, &az)).map_err(|e| internal("storing the authorization", e))?;
        }
        let now = now();
        if let Some(idx) = self.inflight.holds(&self.inflight.validating, &aid) {
            if let Some(c) = az.challenges.get_mut(idx).filter(|c| c.status == ChallengeStatus::Pending) {
                c.status = ChallengeStatus::Processing;
            }
        }
        let retry = (effective_authz_status(&az, now) == AuthorizationStatus::Pending
            && az.challenges.iter().any(|c| c.status == ChallengeStatus::Processing))
        .then_some(self.cfg.retry_after_seconds);
        Ok(Reply::json(StatusCode::OK, &self.authz_json(&aid, &az, now)).retry_after(retry))
    }

    /// A challenge: POST `{}` starts its validation (§7.5.1); POST-as-GET reads it.
    pub async fn challenge(self: &Arc<Self>, a: Authed, authz: &str, idx: &str) -> Answer {
        let acct = a.account()?;
        let aid = parse_id(authz).ok_or_else(|| not_found("challenge"))?;
        let idx: usize = idx.parse().map_err(|_| not_found("challenge"))?;
        let db = &self.db;
        let az = db
            .store
            .read(|t| t.get(&db.authzs, &aid))
            .map_err(|e| internal("reading the authorization", e))?
            .ok_or_else(|| not_found("challenge"))?;
        if az.account != acct.id {
            return Err(forbidden("challenge"));
        }
        let ch = az.challenges.get(idx).ok_or_else(|| not_found("challenge"))?.clone();
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
        let now = now();
        if effective_authz_status(&az, now) != AuthorizationStatus::Pending || ch.status != ChallengeStatus::Pending {
            return Ok(reply(&ch));
        }
        // One validation per authorization at a time; the claim lives in memory
        // (a crash mid-validation leaves the challenge pending, to be tried again).
        let Some(claim) = self.inflight.claim(&self.inflight.validating, aid, idx) else {
            return Ok(reply(&ChallengeRec { status: ChallengeStatus::Processing, ..ch }));
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
        };
        let started = std::time::Instant::now();
        let outcome = self.validator.validate(&attempt).await;
        self.metrics.validation(kind.as_str(), outcome.is_ok(), started.elapsed());
        let lifetime = self.cfg.authorization_lifetime_seconds as i64;
        let stored = db.store.try_write(|t| -> Result<Option<ChallengeRec>, signet_store::StoreError> {
            let Some(mut cur) = t.get(&db.authzs, &aid)? else { return Ok(None) };
            if cur.status != AuthorizationStatus::Pending
                || cur.challenges.iter().any(|c| c.status != ChallengeStatus::Pending)
            {
                return Ok(Some(cur.challenges[idx].clone()));
            }
            let c = &mut cur.challenges[idx];
            match &outcome {
                Ok(()) => {
                    c.status = ChallengeStatus::Valid;
                    c.validated = Some(now());
                    if cur.status == AuthorizationStatus::Pending {
                        cur.status = AuthorizationStatus::Valid;
                        if lifetime > 0 {
                            cur.expires = now() + lifetime;
                            t.put(
                                &db.valid_authzs,
                                &authz_reuse_key(&cur.account, &cur.identifier, cur.wildcard),
                                &aid,
                            )?;
                        }
                    }
                }
                Err(e) => {
                    c.status = ChallengeStatus::Invalid;
                    c.error = Some(String::from_utf8_lossy(&e.problem().to_json()).into_owned());
                    if cur.status == AuthorizationStatus::Pending {
                        cur.status = AuthorizationStatus::Invalid;
                    }
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

    /// finalize (§7.4): check the CSR against the order, issue, answer the valid order.
    pub async fn finalize(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        let (oid, order, authzs) = self.load_order(&acct.id, id)?;
        let status = effective_order_status(&order, &authzs, now());
        if status != OrderStatus::Ready {
            return Err(Problem::new(
                ProblemType::OrderNotReady,
                format!("the order is {}, not ready", status_name(&status)),
            ));
        }
        let f: types::Finalize = a.req.payload_json()?;
        let csr_der = f.csr_der()?;
        let csr = signet_ca::parse_csr(&csr_der).map_err(|e| Problem::new(ProblemType::BadCsr, e.to_string()))?;
        self.check_csr(&order, &csr, &acct.jwk)?;
        self.limits.check_certificate(&order.identifiers)?;
        // ready -> processing, once: the claim lives in memory (a crash while
        // issuing leaves the order ready; the client never got a certificate).
        let Some(_claim) = self.inflight.claim(&self.inflight.finalizing, oid, 0) else {
            return Err(Problem::new(ProblemType::OrderNotReady, "the order is already being finalized"));
        };
        let issued = self.issue(&oid, &order, &csr).await;
        let db = &self.db;
        let (final_order, reply) = match issued {
            Ok(cert) => {
                let serial = cert.serial.clone();
                let stored = db.store.try_write(|t| -> Result<Result<OrderRec, ()>, signet_store::StoreError> {
                    if t.get(&db.certs, &serial)?.is_some() {
                        return Ok(Err(()));
                    }
                    t.put(&db.certs, &serial, &cert.rec)?;
                    let Some(mut cur) = t.get(&db.orders, &oid)? else { return Ok(Err(())) };
                    if cur.status != OrderStatus::Pending && cur.status != OrderStatus::Ready {
                        return Ok(Err(()));
                    }
                    cur.status = OrderStatus::Valid;
                    cur.cert_serial = Some(serial.clone());
                    t.put(&db.orders, &oid, &cur)?;
                    if let Some(old_serial) =
                        order.replaces.as_deref().and_then(|r| types::parse_renewal_cert_id(r).ok()).map(|(_, s)| s)
                    {
                        if let Some(mut old) = t.get(&db.certs, &old_serial)? {
                            old.replaced_by = Some(oid);
                            t.put(&db.certs, &old_serial, &old)?;
                        }
                    }
                    Ok(Ok(cur))
                });
                match stored {
                    Ok(Ok(cur)) => {
                        self.metrics.certificates.inc();
                        (cur, Ok(()))
                    }
                    Ok(Err(())) => (
                        order.clone(),
                        Err(internal(
                            "storing the certificate",
                            format!("serial {} already stored", hex::encode(&serial)),
                        )),
                    ),
                    Err(e) => (order.clone(), Err(internal("storing the certificate", e))),
                }
            }
            Err(p) => (order.clone(), Err(p)),
        };
        if let Err(p) = reply {
            // The certificate never reached the client: the order stays ready when
            // the failure was ours, and becomes invalid when the request was at fault.
            if p.kind != ProblemType::ServerInternal {
                let err_json = String::from_utf8_lossy(&p.to_json()).into_owned();
                let _ = db.store.write(|t| {
                    if let Some(mut cur) = t.get(&db.orders, &oid)? {
                        if cur.status == OrderStatus::Pending || cur.status == OrderStatus::Ready {
                            cur.status = OrderStatus::Invalid;
                            cur.error = Some(err_json.clone());
                            t.put(&db.orders, &oid, &cur)?;
                        }
                    }
                    Ok(())
                });
            }
            return Err(p);
        }
        Ok(Reply::json(StatusCode::OK, &self.order_json(&oid, &final_order, OrderStatus::Valid))
            .at(self.resource_url("order", &oid)))
    }

    /// The CSR must name exactly the order's identifiers, with an allowed key
    /// that is not the account key.
    fn check_csr(&self, order: &OrderRec, csr: &signet_ca::ParsedCsr, account_key: &Jwk) -> Result<(), Problem> {
        let bad = |why: String| Problem::new(ProblemType::BadCsr, why);
        let want: BTreeSet<String> = order.identifiers.iter().map(|i| i.value.to_ascii_lowercase()).collect();
        let mut got = BTreeSet::new();
        for san in &csr.sans {
            match san {
                SanEntry::Dns(n) => got.insert(n.to_ascii_lowercase()),
                SanEntry::Ip(ip) => got.insert(ip.to_string()),
                SanEntry::Email(e) => {
                    return Err(bad(format!("the CSR asks for the email address {e}, which ACME does not validate")))
                }
            };
        }
        for cn in common_names(&csr.subject) {
            let cn = cn.to_ascii_lowercase();
            if !want.contains(&cn) {
                return Err(bad(format!("the CSR's common name {cn:?} is not among the order's identifiers")));
            }
            got.insert(cn);
        }
        if got != want {
            let extra: Vec<_> = got.difference(&want).cloned().collect();
            let missing: Vec<_> = want.difference(&got).cloned().collect();
            return Err(bad(format!(
                "the CSR's names differ from the order's: not ordered {extra:?}, missing {missing:?}"
            )));
        }
        if !self.ca.profile.allows_key(csr.key_algorithm) {
            return Err(bad(format!("{} keys are not issued for", csr.key_algorithm.name())));
        }
        if let Some(allowed) = self.cfg.profiles.get(&order.profile).and_then(|p| p.key_algorithms.as_ref()) {
            if !allowed.iter().any(|a| a == csr.key_algorithm.name()) {
                return Err(bad(format!(
                    "profile {} does not issue for {} keys",
                    order.profile,
                    csr.key_algorithm.name()
                )));
            }
        }
        if account_key.to_spki_der().ok().as_deref() == Some(&csr.spki_der[..]) {
            return Err(bad("the CSR's key is the account key".into()));
        }
        Ok(())
    }

    /// Certificate download (§7.4.2): the PEM chain, with `alternate` links to other chains.
    pub fn certificate(&self, a: Authed, serial: &str, alt: &str) -> Answer {
        let acct = a.account()?;
        a.req.expect_post_as_get()?;
        let serial_bytes = hex::decode(serial).map_err(|_| not_found("certificate"))?;
        let alt: usize = alt.parse().map_err(|_| not_found("certificate chain"))?;
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial_bytes))
            .map_err(|e| internal("reading the certificate", e))?
            .ok_or_else(|| not_found("certificate"))?;
        if rec.account != acct.id {
            return Err(forbidden("certificate"));
        }
        let chain = self.ca.chains.get(alt).ok_or_else(|| not_found("certificate chain"))?;
        let mut pem = crate::issue::pem_cert(&rec.der);
        pem.push_str(chain);
        let mut r = Reply {
            content_type: Some("application/pem-certificate-chain"),
            body: Bytes::from(pem),
            ..Reply::empty(StatusCode::OK)
        };
        let base = format!("{}/acme/cert/{serial}", self.base);
        for i in (0..self.ca.chains.len()).filter(|i| *i != alt) {
            r.links.push(if i == 0 {
                format!("<{base}>;rel=\"alternate\"")
            } else {
                format!("<{base}/{i}>;rel=\"alternate\"")
            });
        }
        r.links.push(format!("<{}>;rel=\"up\"", self.url("/acme/issuer-cert")));
        Ok(r)
    }

    /// revokeCert (§7.6), signed by the account that holds the certificate or by its key.
    pub async fn revoke_cert(&self, a: Authed) -> Answer {
        let p: types::Revocation = a.req.payload_json()?;
        let der = p.certificate_der()?;
        let reason = p.reason_code()?;
        if !matches!(reason, 0 | 1 | 3 | 4 | 5) {
            return Err(Problem::new(
                ProblemType::BadRevocationReason,
                "reasons allowed: 0, 1 (keyCompromise), 3, 4, 5",
            ));
        }
        let cert = Certificate::from_der(&der)
            .map_err(|e| Problem::new(ProblemType::Malformed, format!("certificate: {e}")))?;
        let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial))
            .map_err(|e| internal("reading the certificate", e))?
            .filter(|r| r.der == der)
            .ok_or_else(|| {
                problem_with_status(ProblemType::Malformed, 404, "this CA did not issue that certificate")
            })?;
        match &a.account {
            Some(acct) if acct.id == rec.account => {}
            Some(_) => {
                return Err(Problem::new(ProblemType::Unauthorized, "the certificate was issued to another account"))
            }
            None => {
                let spki = cert
                    .tbs_certificate
                    .subject_public_key_info
                    .to_der()
                    .map_err(|e| internal("certificate key", e))?;
                let cert_key = Jwk::from_spki_der(&spki).ok();
                if a.req.jwk() != cert_key.as_ref() || cert_key.is_none() {
                    return Err(Problem::new(
                        ProblemType::Unauthorized,
                        "the request is not signed by the certificate's key",
                    ));
                }
            }
        }
        if rec.revoked.is_some() {
            return Err(Problem::new(ProblemType::AlreadyRevoked, "the certificate is already revoked"));
        }
        let rev = signet_ipc::Revocation {
            serial: serial.clone(),
            reason: signet_ipc::RevocationReason::from_code(reason)
                .unwrap_or(signet_ipc::RevocationReason::Unspecified),
            revoked_unix_secs: 0,
        };
        let status = self
            .ocspd
            .revoke(&self.cfg.issuer, rev)
            .await
            .map_err(|e| internal("recording the revocation in ocspd", e))?;
        db.store
            .write(|t| {
                if let Some(mut r) = t.get(&db.certs, &serial)? {
                    r.revoked = Some((status.revoked_unix_secs, reason));
                    t.put(&db.certs, &serial, &r)?;
                }
                Ok(())
            })
            .map_err(|e| internal("storing the revocation", e))?;
        self.metrics.revocations.inc();
        Ok(Reply::empty(StatusCode::OK))
    }

    /// renewalInfo (RFC 9773 §4.1).
    pub fn renewal_info(&self, cert_id: &str) -> Answer {
        let (aki, serial) = types::parse_renewal_cert_id(cert_id)?;
        if aki != self.ca.ski {
            return Err(problem_with_status(ProblemType::Malformed, 404, "not a certificate of this CA"));
        }
        let db = &self.db;
        let rec = db
            .store
            .read(|t| t.get(&db.certs, &serial))
            .map_err(|e| internal("reading the certificate", e))?
            .ok_or_else(|| problem_with_status(ProblemType::Malformed, 404, "no such certificate"))?;
        self.metrics.renewal_info.inc();
        let (start, end) = renewal_window(rec.not_before, rec.not_after, rec.revoked.is_some(), now());
        let info = types::RenewalInfo {
            suggested_window: types::SuggestedWindow {
                start: ts(start).ok_or_else(|| internal("renewal window", "out of range"))?,
                end: ts(end).ok_or_else(|| internal("renewal window", "out of range"))?,
            },
            explanation_url: None,
        };
        Ok(Reply::json(StatusCode::OK, &info).retry_after(Some(6 * 3600)))
    }
}

/// The suggested renewal window: the last third of the lifetime, two thirds to
/// three quarters in; for a revoked certificate, now (renew at once).
pub fn renewal_window(not_before: i64, not_after: i64, revoked: bool, now: i64) -> (i64, i64) {
    if revoked {
        return (now - 3600, now);
    }
    let life = (not_after - not_before).max(1);
    (not_before + life * 2 / 3, not_before + life * 3 / 4)
}

/// The identifiers a certificate names (lowercased DNS names and IP text).
pub fn cert_identifiers(cert: &Certificate) -> Vec<String> {
    use x509_cert::ext::pkix::name::GeneralName;
    let mut out = Vec::new();
    for e in cert.tbs_certificate.extensions.iter().flatten() {
        if e.extn_id != const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME {
            continue;
        }
        if let Ok(san) = x509_cert::ext::pkix::SubjectAltName::from_der(e.extn_value.as_bytes()) {
            for n in san.0 {
                match n {
                    GeneralName::DnsName(d) => out.push(d.as_str().to_ascii_lowercase()),
                    GeneralName::IpAddress(o) => match o.as_bytes().len() {
                        4 => out.push(
                            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(o.as_bytes()).unwrap_or_default()).to_string(),
                        ),
                        16 => out.push(
                            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(o.as_bytes()).unwrap_or_default())
                                .to_string(),
                        ),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
    }
    out
}

/// The subject's commonName values.
fn common_names(name: &x509_cert::name::Name) -> Vec<String> {
    let mut out = Vec::new();
    for rdn in name.0.iter() {
        for atv in rdn.0.iter() {
            if atv.oid == const_oid::db::rfc4519::CN {
                if let Ok(s) = der::asn1::Utf8StringRef::try_from(&atv.value) {
                    out.push(s.as_str().to_owned());
                } else if let Ok(s) = der::asn1::PrintableStringRef::try_from(&atv.value) {
                    out.push(s.as_str().to_owned());
                } else if let Ok(s) = der::asn1::Ia5StringRef::try_from(&atv.value) {
                    out.push(s.as_str().to_owned());
                }
            }
        }
    }
    out
}

/// Work in progress, in memory: authorizations being validated (with the
/// challenge index) and orders being finalized. A claim ends when dropped.
#[derive(Default)]
pub struct InFlight {
    /// Authorization id → challenge index.
    pub validating: std::sync::Mutex<std::collections::HashMap<Id, usize>>,
    /// Order ids.
    pub finalizing: std::sync::Mutex<std::collections::HashMap<Id, usize>>,
}

/// A claim on one entry of an [`InFlight`] map.
pub struct Claim {
    owner: Arc<InFlight>,
    finalizing: bool,
    id: Id,
}

impl InFlight {
    /// Claims `id` in `map` unless already claimed.
    pub fn claim(
        self: &Arc<Self>,
        map: &std::sync::Mutex<std::collections::HashMap<Id, usize>>,
        id: Id,
        value: usize,
    ) -> Option<Claim> {
        let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
        if m.contains_key(&id) {
            return None;
        }
        m.insert(id, value);
        let finalizing = std::ptr::eq(map, &self.finalizing);
        Some(Claim { owner: self.clone(), finalizing, id })
    }

    /// The value of a current claim on `id`.
    pub fn holds(&self, map: &std::sync::Mutex<std::collections::HashMap<Id, usize>>, id: &Id) -> Option<usize> {
        map.lock().unwrap_or_else(|p| p.into_inner()).get(id).copied()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let map = if self.finalizing { &self.owner.finalizing } else { &self.owner.validating };
        map.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}
