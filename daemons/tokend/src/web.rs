//! The browser side: the authorization endpoint (RFC 6749 §4.1, OIDC Core
//! §3.1.2) with its sign-in and consent pages, and RP-initiated logout.
//!
//! - `GET|POST /authorize` checks the request (client, exact redirect URI,
//!   PKCE S256, scopes, audience). Errors it cannot send back to a
//!   registered redirect URI are a page; the rest go back to the client
//!   (`error`, `state`, `iss`, RFC 9207). Signed in and consented, the
//!   browser is sent back with a code at once.
//! - `POST /login` checks the user's password (argon2id) and starts a
//!   session (a 256-bit cookie; LMDB keeps its SHA-256).
//! - `POST /consent` records the user's grant (or refusal).
//! - `GET|POST /logout` ends the session (OIDC RP-initiated logout 1.0).
//!
//! The authorization request travels through the forms as its own query
//! string and is checked again on every step. CSRF: each form carries an
//! HMAC-SHA256, under a key tokend keeps in LMDB, of the purpose and of a
//! cookie the browser holds (the pre-login `tokend_csrf` cookie, or the
//! session cookie); cookies are `HttpOnly`, `SameSite=Lax` (`Secure` when
//! the issuer is https). A code, a session and a consent are committed to
//! LMDB before the browser is told of them.

use bytes::Bytes;
use cookie::{Cookie, SameSite};
use http_body_util::Full;
use hyper::header::{HeaderValue, LOCATION, SET_COOKIE};
use hyper::{Response, StatusCode};
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sha::sha256;
use openssl::sign::Signer;
use signet_store::StoreError;

use crate::auth::{Client, Form};
use crate::db::{consent_key, AuthMethod, ClientUris, CodeRec, ConsentRec, ParRec, SessionRec};
use crate::error::OAuthError;
use crate::http::TokenService;
use crate::pages;
use crate::token::random_secret;
use crate::users::{self, LoginError};

/// The session cookie.
pub const SESSION_COOKIE: &str = "tokend_session";
/// The pre-login CSRF cookie.
pub const CSRF_COOKIE: &str = "tokend_csrf";
/// The prefix of a pushed request's URI (RFC 9126 §2.2).
pub const PAR_URN: &str = "urn:ietf:params:oauth:request_uri:";
/// How long a pushed request may be used, seconds.
pub const PAR_SECONDS: u64 = 90;

type Resp = Response<Full<Bytes>>;

/// What the browser sent besides the path.
pub struct WebRequest {
    /// The query string's parameters.
    pub query: Form,
    /// The form body's parameters (POST), else empty.
    pub form: Form,
    /// The raw query string (GET /authorize): carried through the forms.
    pub raw_query: String,
    /// The `Cookie` header.
    pub cookies: Vec<(String, String)>,
    /// Whether the request was a POST.
    pub post: bool,
}

impl WebRequest {
    /// A cookie's value.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    /// A parameter of the body (POST) or else of the query.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.form.get(name).or_else(|| self.query.get(name))
    }
}

/// Parses a `Cookie` header (RFC 6265 §5.4) into name–value pairs.
pub fn parse_cookies(header: &str) -> Vec<(String, String)> {
    Cookie::split_parse(header).filter_map(Result::ok).map(|c| (c.name().to_owned(), c.value().to_owned())).collect()
}

/// `prompt` (OIDC Core §3.1.2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    none: bool,
    login: bool,
    consent: bool,
}

/// A checked authorization request.
pub struct AuthzRequest {
    /// The client.
    pub client: Client,
    /// Where the browser goes back to.
    pub redirect_uri: String,
    /// `state`, sent back as it came.
    pub state: Option<String>,
    /// Scopes asked for (all permitted to the client).
    pub scopes: Vec<String>,
    /// The access tokens' audience.
    pub audience: String,
    /// The PKCE S256 challenge.
    pub challenge: Option<String>,
    /// The OIDC nonce.
    pub nonce: Option<String>,
    /// `prompt`.
    pub prompt: Prompt,
    /// `max_age`, seconds.
    pub max_age: Option<u64>,
    /// `dpop_jkt` (RFC 9449 §10): the DPoP key the code is bound to.
    pub dpop_jkt: Option<String>,
    /// The request as a query string, for the forms.
    pub encoded: String,
}

/// Why an authorization request fails.
pub enum AuthzError {
    /// Before the redirect URI is known good: a page (RFC 6749 §4.1.2.1).
    Page(StatusCode, String),
    /// Sent back to the client.
    Redirect {
        /// The checked redirect URI.
        redirect_uri: String,
        /// `state`.
        state: Option<String>,
        /// The error code.
        error: &'static str,
        /// One line for the developer.
        description: String,
    },
    /// The store cannot be read.
    Unavailable(String),
}

/// A PKCE code challenge or verifier: 43 to 128 unreserved characters (RFC 7636 §4.1, §4.2).
pub fn pkce_syntax(s: &str) -> bool {
    (43..=128).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// `BASE64URL(SHA256(verifier))`, the S256 challenge of `verifier`.
pub fn s256(verifier: &str) -> String {
    signet_jose::b64_encode(&sha256(verifier.as_bytes()))
}

impl TokenService {
    pub(crate) fn csrf_for(&self, purpose: &str, bound_to: &str) -> String {
        let mac = PKey::hmac(&self.flows.csrf_key)
            .and_then(|k| {
                let mut s = Signer::new(MessageDigest::sha256(), &k)?;
                s.update(purpose.as_bytes())?;
                s.update(b"\0")?;
                s.update(bound_to.as_bytes())?;
                s.sign_to_vec()
            })
            .unwrap_or_default();
        signet_jose::b64_encode(&mac)
    }

    pub(crate) fn csrf_matches(&self, purpose: &str, bound_to: Option<&str>, presented: Option<&str>) -> bool {
        match (bound_to, presented) {
            (Some(b), Some(p)) => {
                let want = self.csrf_for(purpose, b);
                want.len() == p.len() && openssl::memcmp::eq(want.as_bytes(), p.as_bytes())
            }
            _ => false,
        }
    }

    pub(crate) fn session_cookie(&self, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
        let mut c = Cookie::build((name.to_owned(), value.to_owned()))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.issuer.starts_with("https:"));
        if let Some(secs) = max_age {
            c = c.max_age(cookie::time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX)));
        }
        HeaderValue::from_str(&c.build().to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// Checks an authorization request's parameters.
    pub fn check_authz(&self, p: &Form) -> Result<AuthzRequest, AuthzError> {
        let page = |why: String| AuthzError::Page(StatusCode::BAD_REQUEST, why);
        let client_id = p.get("client_id").ok_or_else(|| page("the request has no client_id".into()))?;
        let (rec, uris) = self
            .db
            .store
            .read(|txn| {
                Ok((
                    txn.get(&self.db.clients, &client_id.to_owned())?,
                    txn.get(&self.db.client_uris, &client_id.to_owned())?,
                ))
            })
            .map_err(|e: StoreError| AuthzError::Unavailable(e.to_string()))?;
        let rec = rec.ok_or_else(|| page(format!("there is no client `{client_id}`")))?;
        check_authz_params(Client { id: client_id.to_owned(), rec, cert_x5t: None }, &uris.unwrap_or_default(), p)
    }

    fn redirect(&self, post: bool, uri: &str, params: &[(&str, &str)]) -> Resp {
        let mut url = match url::Url::parse(uri) {
            Ok(u) => u,
            Err(e) => return pages::message(StatusCode::BAD_REQUEST, "Bad redirect", &format!("{uri}: {e}")),
        };
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            q.append_pair("iss", &self.issuer);
        }
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = if post { StatusCode::SEE_OTHER } else { StatusCode::FOUND };
        match HeaderValue::from_str(url.as_str()) {
            Ok(v) => {
                r.headers_mut().insert(LOCATION, v);
                r.headers_mut().insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            Err(_) => pages::message(StatusCode::BAD_REQUEST, "Bad redirect", "the redirect URI cannot be sent"),
        }
    }

    fn authz_error(&self, post: bool, e: AuthzError) -> Resp {
        match e {
            AuthzError::Page(status, why) => pages::message(status, "This sign-in request cannot be served", &why),
            AuthzError::Unavailable(why) => pages::message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in is unavailable",
                &format!("tokend's store cannot be read: {why}"),
            ),
            AuthzError::Redirect { redirect_uri, state, error, description } => {
                let mut params = vec![("error", error), ("error_description", description.as_str())];
                if let Some(s) = &state {
                    params.push(("state", s));
                }
                self.redirect(post, &redirect_uri, &params)
            }
        }
    }

    fn deny(&self, post: bool, req: &AuthzRequest, error: &'static str, description: &str) -> Resp {
        self.authz_error(
            post,
            AuthzError::Redirect {
                redirect_uri: req.redirect_uri.clone(),
                state: req.state.clone(),
                error,
                description: description.to_owned(),
            },
        )
    }

    /// The session of the browser's cookie, if it is live.
    fn session(&self, web: &WebRequest, now: u64) -> Result<Option<([u8; 32], SessionRec)>, String> {
        let Some(cookie) = web.cookie(SESSION_COOKIE) else { return Ok(None) };
        let key = sha256(cookie.as_bytes());
        let found = self.db.store.read(|txn| {
            let Some(s) = txn.get(&self.db.sessions, &key)? else { return Ok(None) };
            let user = txn.get(&self.db.users, &s.user)?;
            Ok(Some((s, user)))
        });
        match found.map_err(|e: StoreError| e.to_string())? {
            Some((s, Some(u))) if s.expires > now && !u.disabled => Ok(Some((key, s))),
            _ => Ok(None),
        }
    }

    /// The sign-in forms' check of `user` and `password` (argon2id or an
    /// LDAP bind), on a blocking thread.
    pub(crate) async fn check_password(&self, user: &str, password: &str) -> Result<crate::db::UserRec, LoginError> {
        let (db, dir, user, password) = (self.db.clone(), self.directory.clone(), user.to_owned(), password.to_owned());
        tokio::task::spawn_blocking(move || users::authenticate(&db, &dir, &user, &password))
            .await
            .unwrap_or_else(|e| Err(LoginError::Unavailable(e.to_string())))
    }

    /// The browser's live session: its cookie and record.
    pub(crate) fn web_session(&self, web: &WebRequest, now: u64) -> Result<Option<(String, SessionRec)>, String> {
        let found = self.session(web, now)?;
        Ok(found.and_then(|(_, s)| web.cookie(SESSION_COOKIE).map(|c| (c.to_owned(), s))))
    }

    fn login_page(
        &self,
        web: &WebRequest,
        req: &AuthzRequest,
        status: StatusCode,
        user: &str,
        error: Option<&str>,
    ) -> Resp {
        let (csrf_cookie, fresh) = match web.cookie(CSRF_COOKIE) {
            Some(c) => (c.to_owned(), false),
            None => match random_secret() {
                Ok(c) => (c, true),
                Err(e) => return pages::message(StatusCode::INTERNAL_SERVER_ERROR, "Sign-in failed", &e.to_string()),
            },
        };
        let csrf = self.csrf_for("login", &csrf_cookie);
        let mut r = pages::login(status, &req.client.rec.name, &req.encoded, &csrf, user, error);
        if fresh {
            r.headers_mut().append(SET_COOKIE, self.session_cookie(CSRF_COOKIE, &csrf_cookie, None));
        }
        r
    }

    /// After the request is checked: sign-in, consent, or the code.
    async fn proceed(
        &self,
        web: &WebRequest,
        req: AuthzRequest,
        session: Option<(String, SessionRec)>,
        now: u64,
    ) -> Resp {
        let post = web.post;
        let Some((cookie, session)) = session else {
            if req.prompt.none {
                return self.deny(post, &req, "login_required", "the user is not signed in");
            }
            return self.login_page(web, &req, StatusCode::OK, "", None);
        };
        let consent = self.db.store.read(|txn| txn.get(&self.db.consents, &consent_key(&session.user, &req.client.id)));
        let consent = match consent {
            Ok(c) => c,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &e.to_string()),
        };
        if let Some(denied) = self.group_scope_refused(post, &req, &session) {
            return denied;
        }
        let covered = consent.is_some_and(|c| req.scopes.iter().all(|s| c.scopes.contains(s)));
        if !covered || req.prompt.consent {
            if req.prompt.none {
                return self.deny(post, &req, "consent_required", "the user has not consented to these scopes");
            }
            let csrf = self.csrf_for("consent", &cookie);
            return pages::consent(&req.client.rec.name, &session.user, &req.scopes, &req.encoded, &csrf);
        }
        self.issue_code(post, &req, &session, now).await
    }

    /// A `group:<g>` scope asked for by a user not in group `g` ends the request with `access_denied`.
    fn group_scope_refused(&self, post: bool, req: &AuthzRequest, session: &SessionRec) -> Option<Resp> {
        if !req.scopes.iter().any(|s| s.starts_with("group:")) {
            return None;
        }
        let user = match self.db.store.read(|txn| txn.get(&self.db.users, &session.user)) {
            Ok(u) => u,
            Err(e) => {
                return Some(pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &e.to_string()))
            }
        };
        let scope = users::missing_group(&req.scopes, user.as_ref())?;
        tracing::info!(user = %session.user, client = %req.client.id, scope, "a group scope of a group the user is not in");
        Some(self.deny(post, req, "access_denied", &format!("scope `{scope}`: the user is not a member of the group")))
    }

    async fn issue_code(&self, post: bool, req: &AuthzRequest, session: &SessionRec, now: u64) -> Resp {
        if let Some(denied) = self.group_scope_refused(post, req, session) {
            return denied;
        }
        let code = match random_secret() {
            Ok(c) => c,
            Err(e) => return pages::message(StatusCode::INTERNAL_SERVER_ERROR, "Sign-in failed", &e.to_string()),
        };
        let rec = CodeRec {
            client_id: req.client.id.clone(),
            user: session.user.clone(),
            redirect_uri: req.redirect_uri.clone(),
            scopes: req.scopes.clone(),
            audience: req.audience.clone(),
            challenge: req.challenge.clone(),
            nonce: req.nonce.clone(),
            auth_time: session.auth_time,
            sid: session.sid.clone(),
            expires: now + self.flows.code_seconds,
            dpop_jkt: req.dpop_jkt.clone(),
            redeemed: None,
        };
        let (table, key) = (self.db.codes, sha256(code.as_bytes()));
        if let Err(e) =
            self.db.write_grouped(move |txn| -> Result<(), StoreError> { txn.put(&table, &key, &rec) }).await
        {
            return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &format!("store: {e}"));
        }
        self.metrics.codes.inc();
        let mut params = vec![("code", code.as_str())];
        if let Some(s) = &req.state {
            params.push(("state", s));
        }
        self.redirect(post, &req.redirect_uri, &params)
    }

    /// The parameters of a pushed request named by `request_uri` (RFC 9126 §4).
    fn pushed(&self, params: &Form, request_uri: &str, now: u64) -> Result<Form, AuthzError> {
        let page = |why: &str| AuthzError::Page(StatusCode::BAD_REQUEST, why.to_owned());
        let key = request_uri.strip_prefix(PAR_URN).ok_or_else(|| page("request_uri is not one tokend issued"))?;
        let rec = self
            .db
            .store
            .read(|txn| txn.get(&self.db.par, &sha256(key.as_bytes())))
            .map_err(|e| AuthzError::Unavailable(e.to_string()))?
            .filter(|r| r.expires > now)
            .ok_or_else(|| page("request_uri is unknown or expired"))?;
        if params.get("client_id") != Some(rec.client_id.as_str()) {
            return Err(page("client_id is not the client that pushed the request"));
        }
        Form::parse(rec.params.as_bytes()).map_err(|e| page(&e.description))
    }

    /// `POST /par` (RFC 9126): a client pushes its authorization request.
    pub async fn push(
        &self,
        auth: Option<&str>,
        certs: Option<&signet_runtime::http::PeerCertificates>,
        dpop: crate::http::Dpop,
        form: &Form,
    ) -> Result<serde_json::Value, OAuthError> {
        let now = crate::http::unix_now();
        let client = self.authenticate(auth, certs, form, "/par", now).await?;
        // RFC 9449 §10.1: a proof here binds the code as `dpop_jkt` would.
        let proof = match dpop {
            crate::http::Dpop::None => None,
            crate::http::Dpop::Many => return Err(OAuthError::invalid_dpop_proof("more than one DPoP header")),
            crate::http::Dpop::One(p) => {
                Some(self.check_dpop(&p, "POST", &self.endpoint_url("/par", certs.is_some()), None, now).await?)
            }
        };
        if let (Some(p), Some(jkt)) = (&proof, form.get("dpop_jkt")) {
            if p.jkt != jkt {
                return Err(OAuthError::invalid_dpop_proof("dpop_jkt is not the thumbprint of the proof's key"));
            }
        }
        if form.get("client_id").is_some_and(|c| c != client.id) {
            return Err(OAuthError::invalid_request("client_id is not the authenticated client"));
        }
        if form.get("request_uri").is_some() {
            return Err(OAuthError::invalid_request("request_uri cannot be pushed"));
        }
        let params = {
            let mut enc = form_urlencoded::Serializer::new(String::new());
            enc.append_pair("client_id", &client.id);
            for (k, v) in form.iter() {
                if !matches!(
                    k,
                    "client_id" | "client_secret" | "client_assertion" | "client_assertion_type" | "dpop_jkt"
                ) {
                    enc.append_pair(k, v);
                }
            }
            if let Some(jkt) = proof.as_ref().map(|p| p.jkt.as_str()).or(form.get("dpop_jkt")) {
                enc.append_pair("dpop_jkt", jkt);
            }
            enc.finish()
        };
        self.check_authz(&Form::parse(params.as_bytes())?).map_err(|e| match e {
            AuthzError::Page(_, why) => OAuthError::invalid_request(why),
            AuthzError::Redirect { error, description, .. } => {
                OAuthError::new(StatusCode::BAD_REQUEST, error, description)
            }
            AuthzError::Unavailable(why) => OAuthError::unavailable(format!("store: {why}")),
        })?;
        let key = random_secret().map_err(crate::http::mint_error)?;
        let rec = ParRec { client_id: client.id.clone(), params, expires: now + PAR_SECONDS };
        let (table, hash) = (self.db.par, sha256(key.as_bytes()));
        self.db
            .write_grouped(move |txn| -> Result<(), StoreError> { txn.put(&table, &hash, &rec) })
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(serde_json::json!({ "request_uri": format!("{PAR_URN}{key}"), "expires_in": PAR_SECONDS }))
    }

    /// `GET|POST /authorize`.
    pub async fn authorize(&self, web: &WebRequest, now: u64) -> Resp {
        let params = if web.post { &web.form } else { &web.query };
        let pushed;
        let params = match params.get("request_uri") {
            Some(uri) => match self.pushed(params, uri, now) {
                Ok(p) => {
                    pushed = p;
                    &pushed
                }
                Err(e) => return self.authz_error(web.post, e),
            },
            None => params,
        };
        let req = match self.check_authz(params) {
            Ok(r) => r,
            Err(e) => return self.authz_error(web.post, e),
        };
        let session = match self.session(web, now) {
            Ok(s) => s,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &e),
        };
        let session = session
            .filter(|(_, s)| !req.prompt.login && req.max_age.is_none_or(|m| now.saturating_sub(s.auth_time) <= m));
        let session = session.and_then(|(_, s)| web.cookie(SESSION_COOKIE).map(|c| (c.to_owned(), s)));
        self.proceed(web, req, session, now).await
    }

    fn carried(&self, web: &WebRequest) -> Result<AuthzRequest, Box<Resp>> {
        let Some(authz) = web.form.get("authz") else {
            return Err(Box::new(pages::message(
                StatusCode::BAD_REQUEST,
                "Bad form",
                "the form has no authorization request",
            )));
        };
        match Form::parse(authz.as_bytes()).map_err(|e| AuthzError::Page(StatusCode::BAD_REQUEST, e.description)) {
            Ok(p) => self.check_authz(&p).map_err(|e| Box::new(self.authz_error(true, e))),
            Err(e) => Err(Box::new(self.authz_error(true, e))),
        }
    }

    /// `POST /login`.
    pub async fn login(&self, web: &WebRequest, now: u64) -> Resp {
        let req = match self.carried(web) {
            Ok(r) => r,
            Err(page) => return *page,
        };
        if !self.csrf_matches("login", web.cookie(CSRF_COOKIE), web.form.get("csrf")) {
            self.metrics.logins.get_or_create(&crate::http::OutcomeLabel { outcome: "csrf" }).inc();
            return self.login_page(
                web,
                &req,
                StatusCode::FORBIDDEN,
                "",
                Some("The form expired. Please sign in again."),
            );
        }
        let user = web.form.get("username").unwrap_or("").to_owned();
        let outcome = self.check_password(&user, web.form.get("password").unwrap_or("")).await;
        let label = |outcome| crate::http::OutcomeLabel { outcome };
        match outcome {
            Ok(_) => {}
            Err(LoginError::Refused) => {
                self.metrics.logins.get_or_create(&label("refused")).inc();
                tracing::info!(user = %user, client = %req.client.id, "sign-in refused");
                return self.login_page(
                    web,
                    &req,
                    StatusCode::UNAUTHORIZED,
                    &user,
                    Some("The user name or password is wrong."),
                );
            }
            Err(LoginError::Unavailable(why)) => {
                self.metrics.logins.get_or_create(&label("unavailable")).inc();
                tracing::warn!(error = %why, "the user directory is unavailable");
                return self.login_page(
                    web,
                    &req,
                    StatusCode::SERVICE_UNAVAILABLE,
                    &user,
                    Some("The user directory is unavailable. Please try again later."),
                );
            }
        }
        let (cookie, session) = match self.start_session(&user, now).await {
            Ok(s) => s,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &e),
        };
        self.metrics.logins.get_or_create(&label("ok")).inc();
        tracing::info!(user = %user, client = %req.client.id, "signed in");
        let mut r = self.proceed(web, req, Some((cookie.clone(), session)), now).await;
        r.headers_mut()
            .append(SET_COOKIE, self.session_cookie(SESSION_COOKIE, &cookie, Some(self.flows.session_seconds)));
        r
    }

    /// `POST /consent`.
    pub async fn consent(&self, web: &WebRequest, now: u64) -> Resp {
        let req = match self.carried(web) {
            Ok(r) => r,
            Err(page) => return *page,
        };
        let session = match self.session(web, now) {
            Ok(s) => s,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &e),
        };
        let (Some((_, session)), Some(cookie)) = (session, web.cookie(SESSION_COOKIE)) else {
            return self.login_page(web, &req, StatusCode::OK, "", Some("Your session ended. Please sign in again."));
        };
        if !self.csrf_matches("consent", Some(cookie), web.form.get("csrf")) {
            return pages::message(StatusCode::FORBIDDEN, "The form expired", "Please start the sign-in again.");
        }
        if web.form.get("decision") != Some("allow") {
            tracing::info!(user = %session.user, client = %req.client.id, "consent refused");
            return self.deny(true, &req, "access_denied", "the user refused");
        }
        let (table, key) = (self.db.consents, consent_key(&session.user, &req.client.id));
        let scopes = req.scopes.clone();
        let stored = self
            .db
            .write_grouped(move |txn| -> Result<(), StoreError> {
                let mut rec = txn.get(&table, &key)?.unwrap_or(ConsentRec { scopes: Vec::new(), granted: now });
                for s in scopes {
                    if !rec.scopes.contains(&s) {
                        rec.scopes.push(s);
                    }
                }
                rec.granted = now;
                txn.put(&table, &key, &rec)
            })
            .await;
        if let Err(e) = stored {
            return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is unavailable", &format!("store: {e}"));
        }
        tracing::info!(user = %session.user, client = %req.client.id, scopes = %req.scopes.join(" "), "consent given");
        self.issue_code(true, &req, &session, now).await
    }

    /// `GET|POST /logout` (OIDC RP-initiated logout 1.0).
    pub async fn logout(&self, web: &WebRequest, now: u64) -> Resp {
        let hint = web.param("id_token_hint").and_then(|t| self.id_token_hint(t));
        let client_id = match (hint.as_ref().and_then(|c| c.aud.first().cloned()), web.param("client_id")) {
            (Some(a), Some(c)) if a != c => {
                return pages::message(
                    StatusCode::BAD_REQUEST,
                    "Cannot sign out",
                    "client_id differs from the ID token's audience",
                )
            }
            (Some(a), _) => Some(a),
            (None, c) => c.map(str::to_owned),
        };
        let target = match web.param("post_logout_redirect_uri") {
            None => None,
            Some(uri) => {
                let uris = client_id.as_ref().map(|c| self.db.store.read(|txn| txn.get(&self.db.client_uris, c)));
                match uris {
                    Some(Ok(Some(u))) if u.post_logout_redirect_uris.iter().any(|r| r == uri) => Some(uri.to_owned()),
                    Some(Err(e)) => {
                        return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Cannot sign out", &e.to_string())
                    }
                    _ => {
                        return pages::message(
                            StatusCode::BAD_REQUEST,
                            "Cannot sign out",
                            "post_logout_redirect_uri is not registered for this client",
                        )
                    }
                }
            }
        };
        let session = match self.session(web, now) {
            Ok(s) => s,
            Err(e) => return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Cannot sign out", &e),
        };
        let hint_matches = match (&hint, &session) {
            (Some(h), Some((_, s))) => h.extra.get("sid").and_then(|v| v.as_str()) == Some(s.sid.as_str()),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let confirmed = web.post
            && web.form.get("confirm") == Some("yes")
            && self.csrf_matches(
                "logout",
                web.cookie(SESSION_COOKIE).or(web.cookie(CSRF_COOKIE)),
                web.form.get("csrf"),
            );
        if session.is_some() && !hint_matches && !confirmed {
            let bound = web.cookie(SESSION_COOKIE).unwrap_or("");
            let csrf = self.csrf_for("logout", bound);
            let mut keep: Vec<(&str, &str)> = Vec::new();
            for name in ["id_token_hint", "post_logout_redirect_uri", "state", "client_id"] {
                if let Some(v) = web.param(name) {
                    keep.push((name, v));
                }
            }
            return pages::logout_confirm(&keep, &csrf);
        }
        if let Some((key, s)) = session {
            let (sessions, families, revoked) = (self.db.sessions, self.db.families, self.db.revoked);
            let sid = s.sid.clone();
            let ended = self
                .db
                .write_grouped(move |txn| -> Result<(), StoreError> {
                    txn.delete(&sessions, &key)?;
                    let tied: Vec<_> = txn
                        .range(&families, None, usize::MAX)?
                        .into_iter()
                        .filter(|(_, f)| {
                            f.sid == sid && f.revoked.is_none() && !f.scopes.iter().any(|x| x == "offline_access")
                        })
                        .map(|(k, _)| k)
                        .collect();
                    for id in tied {
                        crate::flows::revoke_family(txn, &families, &revoked, &id, now)?;
                    }
                    Ok(())
                })
                .await;
            if let Err(e) = ended {
                return pages::message(StatusCode::SERVICE_UNAVAILABLE, "Cannot sign out", &format!("store: {e}"));
            }
            tracing::info!(user = %s.user, "signed out");
        }
        let mut r = match target {
            Some(uri) => {
                let state = web.param("state");
                let mut url = match url::Url::parse(&uri) {
                    Ok(u) => u,
                    Err(e) => return pages::message(StatusCode::BAD_REQUEST, "Cannot sign out", &e.to_string()),
                };
                if let Some(s) = state {
                    url.query_pairs_mut().append_pair("state", s);
                }
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = if web.post { StatusCode::SEE_OTHER } else { StatusCode::FOUND };
                if let Ok(v) = HeaderValue::from_str(url.as_str()) {
                    r.headers_mut().insert(LOCATION, v);
                }
                r
            }
            None => pages::message(StatusCode::OK, "Signed out", "You are signed out."),
        };
        r.headers_mut().append(SET_COOKIE, self.session_cookie(SESSION_COOKIE, "", Some(0)));
        r
    }

    /// An ID token of tokend's, its signature good (expired or not).
    fn id_token_hint(&self, token: &str) -> Option<signet_jose::jwt::Claims> {
        let view = self.keys.view();
        let v = signet_jose::jwt::Validation {
            issuer: Some(self.issuer.clone()),
            audience: None,
            now: 0,
            leeway: u64::MAX,
            typ: Some("JWT".into()),
        };
        signet_jose::jwt::verify_jwt(token, &view.jwks, &v).ok()
    }
}

/// The pure part of [`TokenService::check_authz`]: the request's parameters
/// `p` judged for `client` and its registered `uris`.
pub fn check_authz_params(client: Client, uris: &ClientUris, p: &Form) -> Result<AuthzRequest, AuthzError> {
    let page = |why: String| AuthzError::Page(StatusCode::BAD_REQUEST, why);
    let client_id = client.id.clone();
    let redirect_uri = match p.get("redirect_uri") {
        Some(u) if uris.redirect_uris.iter().any(|r| r == u) => u.to_owned(),
        Some(u) => return Err(page(format!("redirect_uri `{u}` is not registered for client `{client_id}`"))),
        None if uris.redirect_uris.len() == 1 && !p.get("scope").unwrap_or("").split(' ').any(|s| s == "openid") => {
            uris.redirect_uris[0].clone()
        }
        None => return Err(page("redirect_uri is missing".into())),
    };
    let state = p.get("state").map(str::to_owned);
    let back = |error: &'static str, description: String| AuthzError::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        error,
        description,
    };
    if p.get("request").is_some() {
        return Err(back("request_not_supported", "request objects are not supported".into()));
    }
    if p.get("request_uri").is_some() {
        return Err(back("invalid_request", "request_uri cannot be nested".into()));
    }
    match p.get("response_type") {
        Some("code") => {}
        Some(other) => return Err(back("unsupported_response_type", format!("response_type `{other}`: only `code`"))),
        None => return Err(back("invalid_request", "response_type is missing".into())),
    }
    if p.get("response_mode").is_some_and(|m| m != "query") {
        return Err(back("invalid_request", "only response_mode `query` is supported".into()));
    }
    if crate::grants::allowed(&client, "authorization_code").is_err() {
        return Err(back("unauthorized_client", format!("client `{client_id}` may not use authorization_code")));
    }
    let scopes = crate::grants::scopes(&client, p, None).map_err(|e| back("invalid_scope", e.description))?;
    let audience = crate::grants::audience(&client, p).map_err(|e| back("invalid_target", e.description))?;
    let challenge = match (p.get("code_challenge"), p.get("code_challenge_method")) {
        (Some(c), Some("S256")) if pkce_syntax(c) => Some(c.to_owned()),
        (Some(_), Some("S256")) => {
            return Err(back("invalid_request", "code_challenge must be 43 to 128 unreserved characters".into()))
        }
        (Some(_), _) => {
            return Err(back("invalid_request", "code_challenge_method must be S256 (plain is refused)".into()))
        }
        (None, Some(_)) => return Err(back("invalid_request", "code_challenge_method without code_challenge".into())),
        (None, None) if client.rec.auth_method == AuthMethod::None => {
            return Err(back("invalid_request", "a public client must use PKCE (code_challenge with S256)".into()))
        }
        (None, None) => None,
    };
    let nonce = p.get("nonce").map(str::to_owned);
    if nonce.as_ref().is_some_and(|n| n.len() > 512) {
        return Err(back("invalid_request", "nonce is longer than 512 bytes".into()));
    }
    let mut prompt = Prompt::default();
    for word in p.get("prompt").unwrap_or("").split(' ').filter(|w| !w.is_empty()) {
        match word {
            "none" => prompt.none = true,
            "login" => prompt.login = true,
            "consent" => prompt.consent = true,
            "select_account" => {}
            other => return Err(back("invalid_request", format!("prompt `{other}` is unknown"))),
        }
    }
    if prompt.none && (prompt.login || prompt.consent) {
        return Err(back("invalid_request", "prompt=none goes with no other value".into()));
    }
    let max_age = match p.get("max_age") {
        Some(m) => Some(m.parse::<u64>().map_err(|_| back("invalid_request", "max_age is not a number".into()))?),
        None => None,
    };
    let mut enc = form_urlencoded::Serializer::new(String::new());
    for name in [
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "nonce",
        "code_challenge",
        "code_challenge_method",
        "resource",
        "audience",
        "max_age",
        "response_mode",
        "dpop_jkt",
    ] {
        if let Some(v) = p.get(name) {
            enc.append_pair(name, v);
        }
    }
    Ok(AuthzRequest {
        client,
        redirect_uri,
        state,
        scopes,
        audience,
        challenge,
        nonce,
        prompt,
        max_age,
        dpop_jkt: p.get("dpop_jkt").map(str::to_owned),
        encoded: enc.finish(),
    })
}

/// Maps a store failure to the OAuth error a token request gets: `temporarily_unavailable`
/// (503, Retry-After), a full or read-only disk named as such (it is logged once, by the
/// store's `SpaceWatch`).
pub fn unavailable(e: &StoreError) -> OAuthError {
    match e.refuses_writes() {
        Some(state) => OAuthError::unavailable(format!("the authorization server's storage {state}; try again later")),
        None => OAuthError::unavailable(format!("store: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_is_rfc7636s() {
        // RFC 7636 Appendix B.
        assert_eq!(s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert!(pkce_syntax("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
        assert!(!pkce_syntax("short"));
        assert!(!pkce_syntax(&"a".repeat(129)));
        assert!(!pkce_syntax(&format!("{}+", "a".repeat(43))));
    }

    #[test]
    fn cookies_parse() {
        let c = parse_cookies("a=1; tokend_session=abc; b=");
        assert_eq!(c.iter().find(|(k, _)| k == "tokend_session").map(|(_, v)| v.as_str()), Some("abc"));
        assert!(parse_cookies("garbage;;;=").iter().all(|(k, _)| !k.is_empty()));
    }
}
