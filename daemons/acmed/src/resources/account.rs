//! Accounts (RFC 8555 §7.3): newAccount (with external account binding),
//! updates and deactivation, the orders list, and keyChange.

use hyper::StatusCode;
use serde_json::json;
use signet_acme::jws::{verify_key_change, ExternalAccountBinding};
use signet_acme::types::{self, AccountStatus};
use signet_acme::{state, validate, Problem, ProblemType};

use super::new_id;
use crate::db::{account_order_key, AccountRec, Id};
use crate::server::{internal, parse_id, problem_with_status, store_failure, Answer, Authed, Reply};
use crate::Acme;

impl Acme {
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
            // §7.3.6: nothing signed by a deactivated account's key is accepted.
            if rec.status != AccountStatus::Valid {
                return Err(Problem::new(
                    ProblemType::Unauthorized,
                    format!("the account of this key is {}", crate::server::status_name(&rec.status)),
                ));
            }
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
            created: self.clock.unix_seconds(),
            eab_kid: eab.as_ref().map(|(kid, _)| kid.clone()),
        };
        let created = db
            .write(|t| -> Result<Result<(), Id>, signet_store::StoreError> {
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
            .map_err(|e| store_failure("storing the account", e))?;
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
        rec.status = state::account_after_update(rec.status, p.status)?;
        let db = &self.db;
        db.write(|t| t.put(&db.accounts, &acct.id, &rec)).map_err(|e| store_failure("storing the account", e))?;
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
            .write(|t| -> Result<Option<Id>, signet_store::StoreError> {
                if let Some(other) = t.get(&db.account_keys, &thumb_new)? {
                    return Ok(Some(other));
                }
                t.delete(&db.account_keys, &thumb_old)?;
                t.put(&db.account_keys, &thumb_new, &acct.id)?;
                t.put(&db.accounts, &acct.id, &rec)?;
                Ok(None)
            })
            .map_err(|e| store_failure("storing the new key", e))?;
        if let Some(other) = clash {
            let mut p = problem_with_status(ProblemType::Malformed, 409, "the new key is already an account's key");
            // RFC 8555 §7.3.5: 409 with Location naming the account holding the key.
            let url = self.resource_url("acct", &other);
            p.instance = Some(url.clone());
            p.location = Some(url);
            return Err(p);
        }
        Ok(Reply::json(StatusCode::OK, &self.account_json(&acct.id, &rec)).at(acct.url.clone()))
    }
}
