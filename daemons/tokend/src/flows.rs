//! The token endpoint's user grants: authorization_code (RFC 6749 §4.1,
//! with PKCE, RFC 7636) and refresh_token (§6) with rotation and reuse
//! detection (RFC 9700 §4.14.2), and the ID tokens of OIDC Core §2.
//!
//! A redeemed code starts a refresh-token *family*: the grant (user,
//! client, scopes, audience) and the access tokens issued under it. Each use
//! of a refresh token rotates it: the old one is marked used and a new one
//! issued in the same transaction. A refresh token used again after
//! `refresh_grace_seconds` (a client that lost the answer may retry that
//! long), or a code redeemed twice, revokes the family: every refresh token
//! in it and its newest access tokens. The answer to the client is sent only
//! after the transaction that records what it was given has committed.

use openssl::sha::sha256;
use serde_json::{json, Map, Value};
use signet_store::{StoreError, Table, WriteTxn};

use crate::auth::{Client, Form};
use crate::db::{AuthMethod, CodeRec, FamilyRec, RefreshRec, UserRec, CERT_BOUND};
use crate::dpop::Proof;
use crate::error::OAuthError;
use crate::http::{mint_error, TokenService};
use crate::oidc::user_claims;
use crate::token::{self, random_secret, Grant, Minted};
use crate::web::{pkce_syntax, s256, unavailable};

/// How many access tokens a family remembers (to revoke them with it).
const FAMILY_ACCESS: usize = 32;

/// Revokes family `id` and its remembered access tokens, in `txn`.
pub fn revoke_family(
    txn: &mut WriteTxn<'_>,
    families: &Table<[u8; 16], FamilyRec>,
    revoked: &Table<String, u64>,
    id: &[u8; 16],
    now: u64,
) -> Result<(), StoreError> {
    let Some(mut fam) = txn.get(families, id)? else { return Ok(()) };
    if fam.revoked.is_none() {
        fam.revoked = Some(now);
        for (jti, exp) in &fam.access {
            if *exp > now {
                txn.put(revoked, jti, exp)?;
            }
        }
        txn.put(families, id, &fam)?;
    }
    Ok(())
}

/// A transaction's outcome: `Err` a grant refused inside it (nothing written).
pub(crate) type Decided = Result<(), &'static str>;

fn decided(r: Result<Decided, StoreError>) -> Result<(), OAuthError> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(why)) => Err(OAuthError::invalid_grant(why)),
        Err(e) => Err(unavailable(&e)),
    }
}

fn random16() -> Result<[u8; 16], OAuthError> {
    let mut b = [0u8; 16];
    openssl::rand::rand_bytes(&mut b).map_err(|e| OAuthError::server_error(format!("random: {e}")))?;
    Ok(b)
}

impl TokenService {
    /// The refresh token of hash `key` and its family.
    fn refresh_of(&self, key: &[u8; 32]) -> Result<Option<(RefreshRec, FamilyRec)>, OAuthError> {
        self.db
            .store
            .read(|txn| {
                let Some(r) = txn.get(&self.db.refresh, key)? else { return Ok(None) };
                Ok(txn.get(&self.db.families, &r.family)?.map(|f| (r, f)))
            })
            .map_err(|e| unavailable(&e))
    }

    fn user(&self, name: &str) -> Result<Option<UserRec>, OAuthError> {
        self.db.store.read(|txn| txn.get(&self.db.users, &name.to_owned())).map_err(|e| unavailable(&e))
    }

    /// The access token and, for `openid`, the ID token of a user's grant.
    async fn mint_user(
        &self,
        fam: &FamilyRec,
        user: &UserRec,
        nonce: Option<&str>,
        proof: Option<&Proof>,
        x5t: Option<&str>,
        now: u64,
    ) -> Result<(Minted, Option<String>), OAuthError> {
        let mut extra = Map::new();
        extra.insert("auth_time".into(), json!(fam.auth_time));
        // The DPoP key, or else the TLS client certificate (RFC 8705 §3), binds the token.
        if let Some(cnf) = crate::mtls::confirmation(proof.map(|p| p.jkt.as_str()), x5t) {
            extra.insert("cnf".into(), cnf);
        }
        let grant = Grant {
            subject: fam.user.clone(),
            client_id: fam.client_id.clone(),
            audience: fam.audience.clone(),
            scopes: fam.scopes.clone(),
            extra,
        };
        let minted =
            token::mint(&self.keys, &self.issuer, &grant, now, self.token_seconds).await.map_err(mint_error)?;
        if !fam.scopes.iter().any(|s| s == "openid") {
            return Ok((minted, None));
        }
        let mut claims = user_claims(&fam.user, user, &fam.scopes);
        claims.insert("iss".into(), json!(self.issuer));
        claims.insert("aud".into(), json!(fam.client_id));
        claims.insert("azp".into(), json!(fam.client_id));
        claims.insert("exp".into(), json!(now + self.flows.id_token_seconds));
        claims.insert("iat".into(), json!(now));
        claims.insert("auth_time".into(), json!(fam.auth_time));
        claims.insert("sid".into(), json!(fam.sid));
        if let Some(n) = nonce {
            claims.insert("nonce".into(), json!(n));
        }
        let id_token = token::sign_jwt(&self.keys, "JWT", claims).await.map_err(mint_error)?;
        Ok((minted, Some(id_token)))
    }

    fn user_body(
        &self,
        minted: &Minted,
        id_token: Option<String>,
        refresh: Option<&str>,
        scopes: &[String],
        dpop: bool,
    ) -> Value {
        let mut body = json!({
            "access_token": minted.token,
            "token_type": if dpop { "DPoP" } else { "Bearer" },
            "expires_in": minted.expires_in,
            "scope": scopes.join(" "),
        });
        if let Some(t) = id_token {
            body["id_token"] = json!(t);
        }
        if let Some(r) = refresh {
            body["refresh_token"] = json!(r);
        }
        body
    }

    /// `grant_type=authorization_code`.
    pub async fn redeem_code(
        &self,
        client: &Client,
        form: &Form,
        proof: Option<&Proof>,
        now: u64,
    ) -> Result<Value, OAuthError> {
        let code = form.require("code")?;
        let key = sha256(code.as_bytes());
        let rec: Option<CodeRec> =
            self.db.store.read(|txn| txn.get(&self.db.codes, &key)).map_err(|e| unavailable(&e))?;
        let rec = rec.ok_or_else(|| OAuthError::invalid_grant("the code is unknown or expired"))?;
        if rec.client_id != client.id {
            return Err(OAuthError::invalid_grant("the code was issued to another client"));
        }
        if let Some(fam) = rec.redeemed {
            let (families, revoked) = (self.db.families, self.db.revoked);
            self.db
                .write_grouped(move |txn| revoke_family(txn, &families, &revoked, &fam, now))
                .await
                .map_err(|e| unavailable(&e))?;
            tracing::warn!(client = %client.id, user = %rec.user, "an authorization code was redeemed twice; its tokens are revoked");
            return Err(OAuthError::invalid_grant("the code was used before; the tokens issued with it are revoked"));
        }
        if rec.expires <= now {
            return Err(OAuthError::invalid_grant("the code has expired"));
        }
        if form.get("redirect_uri").is_some_and(|u| u != rec.redirect_uri) {
            return Err(OAuthError::invalid_grant("redirect_uri differs from the authorization request's"));
        }
        match (&rec.challenge, form.get("code_verifier")) {
            (Some(challenge), Some(verifier)) => {
                if !pkce_syntax(verifier) {
                    return Err(OAuthError::invalid_grant("code_verifier must be 43 to 128 unreserved characters"));
                }
                let got = s256(verifier);
                if got.len() != challenge.len() || !openssl::memcmp::eq(got.as_bytes(), challenge.as_bytes()) {
                    return Err(OAuthError::invalid_grant("code_verifier does not match the code_challenge"));
                }
            }
            (Some(_), None) => return Err(OAuthError::invalid_grant("code_verifier is missing")),
            (None, Some(_)) => {
                return Err(OAuthError::invalid_grant(
                    "code_verifier sent, but the authorization request had no challenge",
                ))
            }
            (None, None) if client.rec.auth_method == AuthMethod::None => {
                return Err(OAuthError::invalid_grant("a public client must use PKCE"))
            }
            (None, None) => {}
        }
        if let Some(bound) = &rec.dpop_jkt {
            match proof {
                Some(p) if &p.jkt == bound => {}
                Some(_) => return Err(OAuthError::invalid_grant("the DPoP key is not the one the code was bound to")),
                None => return Err(OAuthError::invalid_dpop_proof("the code is bound to a DPoP key: send a proof")),
            }
        }
        let user = match self.user(&rec.user)? {
            Some(u) if !u.disabled => u,
            _ => return Err(OAuthError::invalid_grant("the user who authorized the code is gone or disabled")),
        };
        let fam = FamilyRec::new(
            &client.id,
            rec.user.clone(),
            rec.scopes.clone(),
            rec.audience.clone(),
            rec.auth_time,
            rec.sid.clone(),
            now,
        );
        let codes = self.db.codes;
        let claim = move |txn: &mut WriteTxn<'_>, family_id: [u8; 16]| -> Result<Decided, StoreError> {
            let Some(mut code) = txn.get(&codes, &key)? else { return Ok(Err("the code is unknown")) };
            if code.redeemed.is_some() {
                return Ok(Err("the code was used before"));
            }
            code.redeemed = Some(family_id);
            txn.put(&codes, &key, &code)?;
            Ok(Ok(()))
        };
        self.start_family(client, fam, &user, rec.nonce.as_deref(), proof, now, claim).await
    }

    /// Issues the first tokens of a user's grant `fam` and records its
    /// family (with a refresh token if the client holds that grant), once
    /// `claim` (the code or device authorization being used up, in the same
    /// transaction) agrees.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start_family<F>(
        &self,
        client: &Client,
        mut fam: FamilyRec,
        user: &UserRec,
        nonce: Option<&str>,
        proof: Option<&Proof>,
        now: u64,
        claim: F,
    ) -> Result<Value, OAuthError>
    where
        F: FnOnce(&mut WriteTxn<'_>, [u8; 16]) -> Result<Decided, StoreError> + Send + 'static,
    {
        let with_refresh = client.rec.grant_types.iter().any(|g| g == "refresh_token");
        fam.expires = now + self.token_seconds;
        // RFC 9449 §5: a public client's refresh tokens are bound to its DPoP key;
        // RFC 8705 §4: without one, to its TLS client certificate.
        let binding = match (proof, &client.cert_x5t) {
            (Some(p), _) => Some(p.jkt.clone()),
            (None, Some(x5t)) => Some(format!("{CERT_BOUND}{x5t}")),
            (None, None) => None,
        };
        fam.jkt = binding.filter(|_| client.rec.auth_method == AuthMethod::None);
        let x5t = client.cert_x5t.as_deref();
        let (minted, id_token) = self.mint_user(&fam, user, nonce, proof, x5t, now).await?;
        fam.access.push((minted.jti.clone(), now + minted.expires_in));
        let family_id = random16()?;
        let refresh = if with_refresh {
            fam.expires = now + self.flows.refresh_family_seconds;
            Some(random_secret().map_err(mint_error)?)
        } else {
            None
        };
        let first = refresh.as_ref().map(|r| {
            let rec = RefreshRec {
                family: family_id,
                issued: now,
                expires: (now + self.flows.refresh_token_seconds).min(fam.expires),
                rotated: None,
            };
            (sha256(r.as_bytes()), rec)
        });
        let scopes = fam.scopes.clone();
        let (families, refresh_t) = (self.db.families, self.db.refresh);
        let stored = self
            .db
            .write_grouped(move |txn| -> Result<Decided, StoreError> {
                if let Err(why) = claim(txn, family_id)? {
                    return Ok(Err(why));
                }
                txn.put(&families, &family_id, &fam)?;
                if let Some((k, r)) = first {
                    txn.put(&refresh_t, &k, &r)?;
                }
                Ok(Ok(()))
            })
            .await;
        decided(stored)?;
        Ok(self.user_body(&minted, id_token, refresh.as_deref(), &scopes, proof.is_some()))
    }

    /// `grant_type=refresh_token`.
    pub async fn refresh(
        &self,
        client: &Client,
        form: &Form,
        proof: Option<&Proof>,
        now: u64,
    ) -> Result<Value, OAuthError> {
        let presented = form.require("refresh_token")?;
        let key = sha256(presented.as_bytes());
        let found = self.refresh_of(&key)?;
        let (rec, fam) = found.ok_or_else(|| OAuthError::invalid_grant("the refresh token is unknown or expired"))?;
        if fam.client_id != client.id {
            return Err(OAuthError::invalid_grant("the refresh token was issued to another client"));
        }
        if fam.revoked.is_some() {
            return Err(OAuthError::invalid_grant("the refresh token has been revoked"));
        }
        if rec.expires <= now || fam.expires <= now {
            return Err(OAuthError::invalid_grant("the refresh token has expired"));
        }
        let grace = self.flows.refresh_grace_seconds;
        if rec.rotated.is_some_and(|t| now > t + grace) {
            self.reuse(rec.family, &fam, now).await?;
            return Err(OAuthError::invalid_grant("the refresh token was used before; its family is revoked"));
        }
        if let Some(x5t) = fam.jkt.as_deref().and_then(|b| b.strip_prefix(CERT_BOUND)) {
            if client.cert_x5t.as_deref() != Some(x5t) {
                return Err(OAuthError::invalid_grant(
                    "the refresh token is bound to a TLS client certificate this request did not present",
                ));
            }
        } else if let Some(bound) = &fam.jkt {
            match proof {
                Some(p) if &p.jkt == bound => {}
                Some(_) => return Err(OAuthError::invalid_grant("the refresh token is bound to another DPoP key")),
                None => {
                    return Err(OAuthError::invalid_dpop_proof(
                        "the refresh token is bound to a DPoP key: send a proof",
                    ))
                }
            }
        }
        let user = match self.user(&fam.user)? {
            Some(u) if !u.disabled => u,
            _ => return Err(OAuthError::invalid_grant("the user is gone or disabled")),
        };
        let mut narrowed = fam.clone();
        if let Some(asked) = form.get("scope") {
            let mut scopes = Vec::new();
            for s in asked.split(' ').filter(|s| !s.is_empty()) {
                if !fam.scopes.iter().any(|f| f == s) {
                    return Err(OAuthError::invalid_scope(format!("scope `{s}` was not granted")));
                }
                if !scopes.iter().any(|x| x == s) {
                    scopes.push(s.to_owned());
                }
            }
            narrowed.scopes = scopes;
        }
        let (minted, id_token) = self.mint_user(&narrowed, &user, None, proof, client.cert_x5t.as_deref(), now).await?;
        let next = random_secret().map_err(mint_error)?;
        let next_rec = RefreshRec {
            family: rec.family,
            issued: now,
            expires: (now + self.flows.refresh_token_seconds).min(fam.expires),
            rotated: None,
        };
        let next_key = sha256(next.as_bytes());
        let access = (minted.jti.clone(), now + minted.expires_in);
        let (refresh_t, families, revoked) = (self.db.refresh, self.db.families, self.db.revoked);
        let stored = self
            .db
            .write_grouped(move |txn| -> Result<Decided, StoreError> {
                let Some(mut old) = txn.get(&refresh_t, &key)? else { return Ok(Err("the refresh token is unknown")) };
                let Some(mut f) = txn.get(&families, &old.family)? else {
                    return Ok(Err("the refresh token is unknown"));
                };
                if f.revoked.is_some() {
                    return Ok(Err("the refresh token has been revoked"));
                }
                if old.rotated.is_some_and(|t| now > t + grace) {
                    revoke_family(txn, &families, &revoked, &old.family, now)?;
                    return Ok(Err("the refresh token was used before; its family is revoked"));
                }
                old.rotated.get_or_insert(now);
                txn.put(&refresh_t, &key, &old)?;
                txn.put(&refresh_t, &next_key, &next_rec)?;
                f.access.retain(|(_, exp)| *exp > now);
                f.access.push(access);
                let over = f.access.len().saturating_sub(FAMILY_ACCESS);
                f.access.drain(..over);
                txn.put(&families, &old.family, &f)?;
                Ok(Ok(()))
            })
            .await;
        decided(stored)?;
        Ok(self.user_body(&minted, id_token, Some(&next), &narrowed.scopes, proof.is_some()))
    }

    async fn reuse(&self, family: [u8; 16], fam: &FamilyRec, now: u64) -> Result<(), OAuthError> {
        let (families, revoked) = (self.db.families, self.db.revoked);
        self.db
            .write_grouped(move |txn| revoke_family(txn, &families, &revoked, &family, now))
            .await
            .map_err(|e| unavailable(&e))?;
        self.metrics.reuses.inc();
        tracing::warn!(client = %fam.client_id, user = %fam.user, "a rotated refresh token was used again; its family is revoked");
        Ok(())
    }

    /// Revokes the family of refresh token `presented` if `client` holds it
    /// (RFC 7009 §2.1: with the access tokens of the same grant). Whether
    /// the token was a refresh token of this client.
    pub async fn revoke_refresh(&self, client: &Client, presented: &str, now: u64) -> Result<bool, OAuthError> {
        let Some((rec, fam)) = self.refresh_of(&sha256(presented.as_bytes()))? else { return Ok(false) };
        let id = rec.family;
        if fam.client_id != client.id {
            return Err(OAuthError::unauthorized_client("the token was not issued to this client"));
        }
        let (families, revoked) = (self.db.families, self.db.revoked);
        self.db
            .write_grouped(move |txn| revoke_family(txn, &families, &revoked, &id, now))
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(true)
    }

    /// RFC 7662 for a refresh token: its grant, if it is live.
    pub fn introspect_refresh(&self, presented: &str, now: u64) -> Result<Option<Value>, OAuthError> {
        let key = sha256(presented.as_bytes());
        let found = self.refresh_of(&key)?;
        let Some((rec, fam)) = found else { return Ok(None) };
        let grace = self.flows.refresh_grace_seconds;
        let live = fam.revoked.is_none()
            && rec.expires > now
            && fam.expires > now
            && rec.rotated.is_none_or(|t| now <= t + grace);
        Ok(live.then(|| {
            json!({
                "active": true,
                "token_type": "refresh_token",
                "client_id": fam.client_id,
                "sub": fam.user,
                "scope": fam.scopes.join(" "),
                "exp": rec.expires,
                "iat": rec.issued,
                "iss": self.issuer,
            })
        }))
    }
}
