//! Orders (RFC 8555 §7.4): newOrder (with profiles and ARI `replaces`),
//! the order resource, and finalize.

use std::collections::BTreeSet;

use der::Decode;
use hyper::StatusCode;
use signet_acme::types::{self, AuthorizationStatus, ChallengeStatus, NewOrder, OrderStatus};
use signet_acme::{policy, state, validate, Jwk, Problem, ProblemType};
use signet_ca::SanEntry;
use x509_cert::Certificate;

use super::{cert_identifiers, forbidden, new_id, new_token, not_found};
use crate::db::{account_order_key, authz_reuse_key, AuthzRec, ChallengeRec, Id, OrderRec};
use crate::server::{internal, parse_id, store_failure, Answer, Authed, Reply};
use crate::Acme;

/// Most identifiers one order may name.
const MAX_IDENTIFIERS: usize = 100;

impl Acme {
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
            match validate::identifier(id).and_then(|n| policy::issuable(&n).map(|()| n)) {
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
        let now = self.clock.unix_seconds();
        // Checked again at finalize, with the clock then.
        crate::window::resolve(not_before, not_after, &self.validity_bounds(&profile), now)?;
        let db = &self.db;
        if let Some(replaces) = &p.replaces {
            let (aki, serial) = types::parse_renewal_cert_id(replaces)?;
            if self.cas.by_ski(&aki).is_none() {
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
        let expires = now + self.cfg.order_lifetime_seconds as i64;
        let order_id = new_id();
        let mut authz_ids = Vec::new();
        let mut authzs = Vec::new();
        let mut fresh = Vec::new();
        for ident in &idents {
            let (base, wildcard) = state::authz_identifier(ident);
            let persist = !self.validator.caa_identities().is_empty();
            let kinds = state::offered_challenges(&base.kind, wildcard, persist);
            // The account's valid authorization for this identifier, when it has a day left.
            let reuse_key = authz_reuse_key(&acct.id, &base, wildcard);
            let reusable = db
                .store
                .read(|t| match t.get(&db.valid_authzs, &reuse_key)? {
                    Some(id) => Ok(t.get(&db.authzs, &id)?.map(|a| (id, a))),
                    None => Ok(None),
                })
                .map_err(|e| internal("reading authorizations", e))?
                .filter(|(_, a)| a.state().reusable_at(now) && a.account == acct.id);
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
        db.write(|t| {
            for (id, az) in authz_ids.iter().zip(&authzs) {
                if fresh.contains(id) {
                    t.put(&db.authzs, id, az)?;
                }
            }
            t.put(&db.orders, &order_id, &order)?;
            t.put(&db.account_orders, &account_order_key(&acct.id, &order_id), &())
        })
        .map_err(|e| store_failure("storing the order", e))?;
        self.metrics.orders.inc();
        if order.replaces.is_some() {
            self.metrics.replacing.inc();
        }
        let status = order.status_at(&authzs, now);
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
        let status = order.status_at(&authzs, self.clock.unix_seconds());
        let finalizing = self.inflight.holds(&self.inflight.finalizing, &id).is_some();
        let status = state::order_status_shown(status, finalizing);
        let retry = state::order_in_progress(status).then_some(self.cfg.retry_after_seconds);
        Ok(Reply::json(StatusCode::OK, &self.order_json(&id, &order, status))
            .at(self.resource_url("order", &id))
            .retry_after(retry))
    }

    /// finalize (§7.4): check the CSR against the order, issue, answer the valid order.
    pub async fn finalize(&self, a: Authed, id: &str) -> Answer {
        let acct = a.account()?;
        let (oid, order, authzs) = self.load_order(&acct.id, id)?;
        state::check_finalize(order.status_at(&authzs, self.clock.unix_seconds()))?;
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
        let issued = match self.recheck_caa(&acct.url, &authzs).await {
            Ok(()) => self.issue(&oid, &order, &csr).await,
            Err(p) => Err(p),
        };
        let db = &self.db;
        let (final_order, reply) = match issued {
            Ok(cert) => {
                let serial = cert.serial.clone();
                let stored = db.write(|t| -> Result<Result<OrderRec, ()>, signet_store::StoreError> {
                    if t.get(&db.certs, &serial)?.is_some() {
                        return Ok(Err(()));
                    }
                    t.put(&db.certs, &serial, &cert.rec)?;
                    let Some(mut cur) = t.get(&db.orders, &oid)? else { return Ok(Err(())) };
                    let Some(status) = state::order_after_finalize(cur.status, Ok(())) else { return Ok(Err(())) };
                    cur.status = status;
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
                    Err(e) => (order.clone(), Err(store_failure("storing the certificate", e))),
                }
            }
            Err(p) => (order.clone(), Err(p)),
        };
        if let Err(p) = reply {
            // The certificate never reached the client: the order stays ready when
            // the failure was ours, and becomes invalid when the request was at fault.
            if state::order_after_finalize(order.status, Err(&p.kind)).is_some() {
                let err_json = String::from_utf8_lossy(&p.to_json()).into_owned();
                let _ = db.write(|t| {
                    if let Some(mut cur) = t.get(&db.orders, &oid)? {
                        if let Some(status) = state::order_after_finalize(cur.status, Err(&p.kind)) {
                            cur.status = status;
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

    /// CAA again for every name whose authorization was validated longer
    /// ago than `caa_recheck_after_seconds` (a reused one): the Baseline
    /// Requirements (§3.2.2.8) want CAA checked within 8 hours of issuance,
    /// and an authorization may be reused for days. The checks run at once;
    /// any refusal (or DNS failure) fails the finalization, one subproblem
    /// per name, as Let's Encrypt does.
    async fn recheck_caa(&self, account_url: &str, authzs: &[AuthzRec]) -> Result<(), Problem> {
        let now = self.clock.unix_seconds();
        let window = i64::try_from(self.cfg.caa_recheck_after_seconds).unwrap_or(i64::MAX);
        let stale = authzs.iter().filter(|az| az.identifier.kind == types::IdentifierType::Dns).filter_map(|az| {
            let ch = az.challenges.iter().find(|c| c.status == ChallengeStatus::Valid)?;
            (now.saturating_sub(ch.validated?) >= window).then(|| (az, ch.challenge_type()))
        });
        let checks = stale.map(|(az, kind)| async move {
            self.validator.check_caa(&az.identifier.value, az.wildcard, account_url, kind.as_str()).await.map_err(|e| {
                signet_acme::AcmeError { identifier: Some(Box::new(az.identifier.clone())), ..e }.problem()
            })
        });
        let refused: Vec<Problem> =
            futures::future::join_all(checks).await.into_iter().filter_map(Result::err).collect();
        if refused.is_empty() {
            return Ok(());
        }
        Err(Problem::with_subproblems("CAA, checked again at finalization, does not allow issuance", refused))
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
        if !self.ca().profile.allows_key(csr.key_algorithm) {
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
