//! The device authorization grant (RFC 8628), for CLIs and devices without
//! a browser.
//!
//! - `POST /device_authorization`: the client gets a device code (256 random
//!   bits, kept as its SHA-256) and a user code (8 letters from an alphabet
//!   without vowels or look-alikes, `XXXX-XXXX`, about 2^37 choices).
//! - `GET|POST /device`: the user signs in if needed, enters (or confirms)
//!   the user code, and approves or denies; every form is CSRF-bound like
//!   the sign-in pages.
//! - The client polls the token endpoint with
//!   `grant_type=urn:ietf:params:oauth:grant-type:device_code`:
//!   `authorization_pending`, `slow_down` (polling faster than the interval,
//!   which then grows by 5 s), `access_denied`, `expired_token`, or tokens
//!   (the same family and refresh token as the code flow).
//!
//! Everything is committed before it is answered: the device code before
//! the client sees it, the user's decision before the page says so.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, SET_COOKIE};
use hyper::{Response, StatusCode};
use openssl::sha::sha256;
use serde_json::{json, Value};
use signet_runtime::http::PeerCertificates;
use signet_store::{StoreError, WriteTxn};

use crate::auth::{Client, Form};
use crate::db::{DeviceRec, DeviceState, FamilyRec};
use crate::dpop::Proof;
use crate::error::OAuthError;
use crate::flows::Decided;
use crate::http::{mint_error, TokenService};
use crate::pages;
use crate::token::{random_id, random_secret};
use crate::users::{self, LoginError};
use crate::web::{unavailable, WebRequest, CSRF_COOKIE, SESSION_COOKIE};

/// RFC 8628's grant type.
pub const DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// How long a device code lives, seconds.
pub const DEVICE_SECONDS: u64 = 600;
/// The first polling interval, seconds.
pub const INTERVAL: u64 = 5;
/// The user code's letters: no vowels (no words), no look-alikes (RFC 8628 §6.1).
const ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";

type Resp = Response<Full<Bytes>>;

/// The user code as typed (any case, dashes and spaces ignored), normalised;
/// `None` if it cannot be one.
pub fn normalise(code: &str) -> Option<String> {
    let c: String = code.chars().filter(|c| *c != '-' && !c.is_whitespace()).map(|c| c.to_ascii_uppercase()).collect();
    (c.len() == 8 && c.bytes().all(|b| ALPHABET.contains(&b))).then_some(c)
}

/// A new user code, normalised.
fn new_user_code() -> Result<String, OAuthError> {
    let mut b = [0u8; 8];
    openssl::rand::rand_bytes(&mut b).map_err(|e| OAuthError::server_error(format!("random: {e}")))?;
    // 256 is not a multiple of 20: the bias (a few letters 1/13 likelier) costs under a bit of the 34.6.
    Ok(b.iter().map(|x| char::from(ALPHABET[usize::from(*x) % ALPHABET.len()])).collect())
}

/// `XXXX-XXXX`.
pub fn display(code: &str) -> String {
    format!("{}-{}", &code[..4.min(code.len())], &code[4.min(code.len())..])
}

impl TokenService {
    /// `POST /device_authorization` (RFC 8628 §3.1).
    pub async fn device_authorization(
        &self,
        auth: Option<&str>,
        certs: Option<&PeerCertificates>,
        form: &Form,
    ) -> Result<Value, OAuthError> {
        let now = crate::http::unix_now();
        let client = self.authenticate(auth, certs, form, "/device_authorization", now).await?;
        crate::grants::allowed(&client, DEVICE_CODE)?;
        let scopes = crate::grants::scopes(&client, form, None)?;
        let audience = crate::grants::audience(&client, form)?;
        let device_code = random_secret().map_err(mint_error)?;
        let key = sha256(device_code.as_bytes());
        let (devices, user_codes) = (self.db.devices, self.db.user_codes);
        let mut user_code = String::new();
        for _ in 0..4 {
            let code = new_user_code()?;
            let rec = DeviceRec {
                client_id: client.id.clone(),
                scopes: scopes.clone(),
                audience: audience.clone(),
                user_code: code.clone(),
                expires: now + DEVICE_SECONDS,
                interval: INTERVAL,
                last_poll: 0,
                state: DeviceState::Pending,
            };
            let c = code.clone();
            let stored = self
                .db
                .write_grouped(move |txn| -> Result<bool, StoreError> {
                    if txn.get(&user_codes, &c)?.is_some() {
                        return Ok(false);
                    }
                    txn.put(&user_codes, &c, &key)?;
                    txn.put(&devices, &key, &rec)?;
                    Ok(true)
                })
                .await
                .map_err(|e| unavailable(&e))?;
            if stored {
                user_code = code;
                break;
            }
        }
        if user_code.is_empty() {
            return Err(OAuthError::unavailable("no free user code; try again"));
        }
        let uri = format!("{}/device", self.issuer);
        Ok(json!({
            "device_code": device_code,
            "user_code": display(&user_code),
            "verification_uri": uri,
            "verification_uri_complete": format!("{uri}?user_code={}", display(&user_code)),
            "expires_in": DEVICE_SECONDS,
            "interval": INTERVAL,
        }))
    }

    /// `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4, §3.5).
    pub async fn device_token(
        &self,
        client: &Client,
        form: &Form,
        proof: Option<&Proof>,
        now: u64,
    ) -> Result<Value, OAuthError> {
        let code = form.require("device_code")?;
        let key = sha256(code.as_bytes());
        let devices = self.db.devices;
        let client_id = client.id.clone();
        // One write: the poll time is recorded (for slow_down) as the state is read.
        let seen = self
            .db
            .write_grouped(move |txn| -> Result<Option<(DeviceRec, bool)>, StoreError> {
                let Some(mut rec) = txn.get(&devices, &key)? else { return Ok(None) };
                if rec.client_id != client_id {
                    return Ok(None);
                }
                let too_fast = rec.state == DeviceState::Pending && now < rec.last_poll + rec.interval;
                if too_fast {
                    rec.interval += 5;
                }
                rec.last_poll = now;
                txn.put(&devices, &key, &rec)?;
                Ok(Some((rec, too_fast)))
            })
            .await
            .map_err(|e| unavailable(&e))?;
        let (rec, too_fast) = seen.ok_or_else(|| OAuthError::invalid_grant("the device code is unknown"))?;
        if rec.expires <= now {
            return Err(OAuthError::new(StatusCode::BAD_REQUEST, "expired_token", "the device code has expired"));
        }
        let (user, auth_time, sid) = match rec.state {
            DeviceState::Pending if too_fast => {
                return Err(OAuthError::new(
                    StatusCode::BAD_REQUEST,
                    "slow_down",
                    format!("poll every {} s at most", rec.interval),
                ))
            }
            DeviceState::Pending => {
                return Err(OAuthError::new(
                    StatusCode::BAD_REQUEST,
                    "authorization_pending",
                    "the user has not decided yet",
                ))
            }
            DeviceState::Denied => {
                return Err(OAuthError::new(StatusCode::BAD_REQUEST, "access_denied", "the user refused"))
            }
            DeviceState::Redeemed(_) => {
                return Err(OAuthError::invalid_grant("the device code was used before"));
            }
            DeviceState::Approved { user, auth_time, sid } => (user, auth_time, sid),
        };
        let user_rec = match self.db.store.read(|txn| txn.get(&self.db.users, &user)).map_err(|e| unavailable(&e))? {
            Some(u) if !u.disabled => u,
            _ => return Err(OAuthError::invalid_grant("the user who approved is gone or disabled")),
        };
        let fam = FamilyRec::new(&client.id, user, rec.scopes.clone(), rec.audience.clone(), auth_time, sid, now);
        let claim = move |txn: &mut WriteTxn<'_>, family: [u8; 16]| -> Result<Decided, StoreError> {
            let Some(mut d) = txn.get(&devices, &key)? else { return Ok(Err("the device code is unknown")) };
            if !matches!(d.state, DeviceState::Approved { .. }) {
                return Ok(Err("the device code was used before"));
            }
            d.state = DeviceState::Redeemed(family);
            txn.put(&devices, &key, &d)?;
            Ok(Ok(()))
        };
        self.start_family(client, fam, &user_rec, None, proof, now, claim).await
    }

    fn device_lookup(&self, code: &str, now: u64) -> Result<Option<([u8; 32], DeviceRec, String)>, StoreError> {
        let Some(code) = normalise(code) else { return Ok(None) };
        self.db.store.read(|txn| {
            let Some(key) = txn.get(&self.db.user_codes, &code)? else { return Ok(None) };
            let Some(rec) = txn.get(&self.db.devices, &key)? else { return Ok(None) };
            if rec.expires <= now || rec.state != DeviceState::Pending {
                return Ok(None);
            }
            let name = txn.get(&self.db.clients, &rec.client_id)?.map_or_else(|| rec.client_id.clone(), |c| c.name);
            Ok(Some((key, rec, name)))
        })
    }

    /// `GET|POST /device`: sign in if needed, enter the code, decide.
    pub async fn device_page(&self, web: &WebRequest, now: u64) -> Resp {
        let user_code = web.param("user_code").unwrap_or("").to_owned();
        let session = match self.web_session(web, now) {
            Ok(s) => s,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", &e),
        };
        let (csrf_cookie, fresh_cookie) = match (web.cookie(CSRF_COOKIE), random_secret()) {
            (Some(c), _) => (c.to_owned(), false),
            (None, Ok(c)) => (c, true),
            (None, Err(e)) => return pages::message(StatusCode::INTERNAL_SERVER_ERROR, "Failed", &e.to_string()),
        };
        let mut set_cookies: Vec<HeaderValue> = Vec::new();
        if fresh_cookie {
            set_cookies.push(self.session_cookie(CSRF_COOKIE, &csrf_cookie, None));
        }
        let finish = |mut r: Resp, extra: Vec<HeaderValue>| {
            for c in extra {
                r.headers_mut().append(SET_COOKIE, c);
            }
            r
        };
        let mut session = session;
        if web.post && web.form.get("step") == Some("login") {
            if !self.csrf_matches("device-login", Some(&csrf_cookie), web.form.get("csrf")) {
                return finish(
                    pages::message(StatusCode::FORBIDDEN, "The form expired", "Please start again."),
                    set_cookies,
                );
            }
            let name = web.form.get("username").unwrap_or("").to_owned();
            let outcome = self.check_password(&name, web.form.get("password").unwrap_or("")).await;
            match outcome {
                Ok(_) => match self.start_session(&name, now).await {
                    Ok((cookie, rec)) => {
                        set_cookies.push(self.session_cookie(
                            SESSION_COOKIE,
                            &cookie,
                            Some(self.flows.session_seconds),
                        ));
                        session = Some((cookie, rec));
                    }
                    Err(e) => {
                        return finish(pages::message(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", &e), set_cookies)
                    }
                },
                Err(LoginError::Refused) => {
                    let csrf = self.csrf_for("device-login", &csrf_cookie);
                    let r = pages::device_login(
                        StatusCode::UNAUTHORIZED,
                        &user_code,
                        &name,
                        &csrf,
                        Some("The user name or password is wrong."),
                    );
                    return finish(r, set_cookies);
                }
                Err(LoginError::Unavailable(why)) => {
                    tracing::warn!(error = %why, "the user directory is unavailable");
                    let csrf = self.csrf_for("device-login", &csrf_cookie);
                    let r = pages::device_login(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &user_code,
                        &name,
                        &csrf,
                        Some("The user directory is unavailable. Please try again later."),
                    );
                    return finish(r, set_cookies);
                }
            }
        }
        let Some((cookie, session)) = session else {
            let csrf = self.csrf_for("device-login", &csrf_cookie);
            return finish(pages::device_login(StatusCode::OK, &user_code, "", &csrf, None), set_cookies);
        };
        let csrf = self.csrf_for("device", &cookie);
        let decision = web.form.get("decision");
        if web.post && decision.is_some() && !self.csrf_matches("device", Some(&cookie), web.form.get("csrf")) {
            return finish(
                pages::message(StatusCode::FORBIDDEN, "The form expired", "Please start again."),
                set_cookies,
            );
        }
        let found = match self.device_lookup(&user_code, now) {
            Ok(f) => f,
            Err(e) => {
                return finish(
                    pages::message(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", &e.to_string()),
                    set_cookies,
                )
            }
        };
        let Some((key, rec, client_name)) = found else {
            let error = (!user_code.is_empty()).then_some("That code is unknown or has expired.");
            return finish(pages::device_code(&user_code, &csrf, error), set_cookies);
        };
        let Some(decision) = decision.filter(|_| web.post) else {
            let r = pages::device_consent(&client_name, &session.user, &rec.scopes, &display(&rec.user_code), &csrf);
            return finish(r, set_cookies);
        };
        if decision == "allow" {
            let user = self.db.store.read(|txn| txn.get(&self.db.users, &session.user));
            match user {
                Ok(u) => {
                    if let Some(scope) = users::missing_group(&rec.scopes, u.as_ref()) {
                        let why = format!("The device asks for {scope}, and you are not a member of that group.");
                        return finish(pages::message(StatusCode::FORBIDDEN, "Not allowed", &why), set_cookies);
                    }
                }
                Err(e) => {
                    return finish(
                        pages::message(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", &e.to_string()),
                        set_cookies,
                    )
                }
            }
        }
        let state = if decision == "allow" {
            DeviceState::Approved { user: session.user.clone(), auth_time: session.auth_time, sid: session.sid.clone() }
        } else {
            DeviceState::Denied
        };
        let devices = self.db.devices;
        let approved = matches!(state, DeviceState::Approved { .. });
        let stored = self
            .db
            .write_grouped(move |txn| -> Result<bool, StoreError> {
                let Some(mut d) = txn.get(&devices, &key)? else { return Ok(false) };
                if d.state != DeviceState::Pending {
                    return Ok(false);
                }
                d.state = state;
                txn.put(&devices, &key, &d)?;
                Ok(true)
            })
            .await;
        let r = match stored {
            Ok(true) if approved => {
                tracing::info!(user = %session.user, client = %rec.client_id, "device approved");
                pages::message(StatusCode::OK, "Device approved", "You may return to your device.")
            }
            Ok(true) => pages::message(StatusCode::OK, "Device refused", "The device was not given access."),
            Ok(false) => pages::message(StatusCode::BAD_REQUEST, "Code already used", "That code was decided already."),
            Err(e) => pages::message(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", &e.to_string()),
        };
        finish(r, set_cookies)
    }

    /// Starts a session for `user`: the cookie's value and the record, committed.
    pub(crate) async fn start_session(&self, user: &str, now: u64) -> Result<(String, crate::db::SessionRec), String> {
        let cookie = random_secret().map_err(|e| e.to_string())?;
        let rec = crate::db::SessionRec {
            user: user.to_owned(),
            auth_time: now,
            expires: now + self.flows.session_seconds,
            sid: random_id(),
        };
        let (table, key, stored) = (self.db.sessions, sha256(cookie.as_bytes()), rec.clone());
        self.db
            .write_grouped(move |txn| -> Result<(), StoreError> { txn.put(&table, &key, &stored) })
            .await
            .map_err(|e| format!("store: {e}"))?;
        Ok((cookie, rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_normalise() {
        assert_eq!(normalise("bcdf-ghjk").as_deref(), Some("BCDFGHJK"));
        assert_eq!(normalise(" BCDF GHJK ").as_deref(), Some("BCDFGHJK"));
        assert_eq!(normalise("ABCD-EFGH"), None, "vowels are not in the alphabet");
        assert_eq!(normalise("BCDF-GHJ"), None);
        let c = new_user_code().unwrap();
        assert_eq!(normalise(&display(&c)), Some(c));
    }
}
