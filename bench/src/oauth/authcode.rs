//! tokend's authorization code flow with PKCE (RFC 6749 §4.1, RFC 7636) as a
//! browser and a public client drive it, on one HTTP/1.1 connection:
//!
//! - [`CodeFlow::sign_in`]: `GET /authorize` → the sign-in page's hidden
//!   `authz` and `csrf` fields and its `tokend_csrf` cookie → `POST /login`
//!   (one argon2id verification at tokend) → `POST /consent` the first time:
//!   the session cookie;
//! - [`CodeFlow::flow`]: `GET /authorize` with the session cookie, a fresh
//!   S256 challenge and `state` (must be a 302 whose `Location` is the
//!   redirect URI with that `state`, `iss` and a `code`), then `POST /token`
//!   redeeming the code with its verifier (must be a 200 whose JSON has
//!   `access_token` and, for `openid`, `id_token`).

use anyhow::{bail, Context};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE, COOKIE, HOST, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response};

use super::{form_encode as enc, Sender};

/// One client's flow at one tokend, for one user.
pub struct CodeFlow {
    /// The `Host` header (the issuer's authority).
    pub host: HeaderValue,
    /// The issuer's path, without a trailing `/` (usually empty).
    pub base_path: String,
    /// A public client holding authorization_code, with `redirect_uri` registered.
    pub client_id: String,
    /// The redirect URI.
    pub redirect_uri: String,
    /// The user name.
    pub user: String,
    /// The user's password.
    pub password: String,
    /// The scopes asked for, space-separated.
    pub scope: String,
}

/// The value of hidden field `name` in a page, HTML-unescaped.
fn field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = start + html[start..].find('"')?;
    Some(
        html[start..end]
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// A cookie's `name=value` from the response's Set-Cookie headers.
fn set_cookie(resp: &Response<hyper::body::Incoming>, name: &str) -> Option<String> {
    resp.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        let pair = v.split(';').next()?.trim();
        pair.strip_prefix(&format!("{name}=")).filter(|v| !v.is_empty()).map(|_| pair.to_owned())
    })
}

fn random_b64(n: usize) -> String {
    let mut b = vec![0u8; n];
    // A failed RNG leaves zeros: the run still works, only with repeated verifiers.
    let _ = openssl::rand::rand_bytes(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

impl CodeFlow {
    /// Whether the flow asks for `openid` (and so expects an ID token).
    fn openid(&self) -> bool {
        self.scope.split(' ').any(|s| s == "openid")
    }

    fn authorize_path(&self, challenge: &str, state: &str) -> String {
        format!(
            "{}/authorize?response_type=code&client_id={}&redirect_uri={}&scope={}&state={state}&nonce={state}\
             &code_challenge={challenge}&code_challenge_method=S256",
            self.base_path,
            enc(&self.client_id),
            enc(&self.redirect_uri),
            enc(&self.scope)
        )
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        form: Option<String>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut b = Request::builder().method(method).uri(path).header(HOST, self.host.clone());
        if let Some(c) = cookie {
            b = b.header(COOKIE, c);
        }
        if form.is_some() {
            b = b.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        Ok(b.body(Full::new(Bytes::from(form.unwrap_or_default())))?)
    }

    /// Signs in through the forms: the session cookie (`tokend_session=...`).
    pub async fn sign_in(&self, tx: &mut Sender) -> anyhow::Result<String> {
        let challenge = random_b64(32);
        let resp =
            tx.send_request(self.request(Method::GET, &self.authorize_path(&challenge, "login"), None, None)?).await?;
        let csrf_cookie = set_cookie(&resp, "tokend_csrf").context("no tokend_csrf cookie on the sign-in page")?;
        let page = String::from_utf8_lossy(&resp.into_body().collect().await?.to_bytes()).into_owned();
        let (authz, csrf) =
            (field(&page, "authz").context("no authz field")?, field(&page, "csrf").context("no csrf field")?);
        let form = format!(
            "authz={}&csrf={}&username={}&password={}",
            enc(&authz),
            enc(&csrf),
            enc(&self.user),
            enc(&self.password)
        );
        let resp = tx
            .send_request(self.request(
                Method::POST,
                &format!("{}/login", self.base_path),
                Some(&csrf_cookie),
                Some(form),
            )?)
            .await?;
        let session = set_cookie(&resp, "tokend_session").context("signing in gave no session cookie")?;
        let status = resp.status();
        let page = String::from_utf8_lossy(&resp.into_body().collect().await?.to_bytes()).into_owned();
        if status == 200 && page.contains("Allow access?") {
            let form = format!(
                "authz={}&csrf={}&decision=allow",
                enc(&field(&page, "authz").context("no authz on consent")?),
                enc(&field(&page, "csrf").context("no csrf on consent")?)
            );
            let resp = tx
                .send_request(self.request(
                    Method::POST,
                    &format!("{}/consent", self.base_path),
                    Some(&session),
                    Some(form),
                )?)
                .await?;
            if resp.status() != 303 {
                bail!("consent answered {}", resp.status());
            }
            resp.into_body().collect().await?;
        } else if status != 303 {
            bail!("signing in answered {status}");
        }
        Ok(session)
    }

    /// One flow: authorize with the session, redeem the code. The error is
    /// the failure's kind (`transport: ...` when the connection failed).
    pub async fn flow(&self, tx: &mut Sender, session: &str) -> Result<(), String> {
        self.flow_tokens(tx, session).await.map(drop)
    }

    /// As [`CodeFlow::flow`], giving the token answer's JSON (`refresh_token`
    /// among it when the client holds that grant).
    pub async fn flow_tokens(&self, tx: &mut Sender, session: &str) -> Result<serde_json::Value, String> {
        let verifier = random_b64(32);
        let challenge =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(openssl::sha::sha256(verifier.as_bytes()));
        let state = random_b64(9);
        let req = self
            .request(Method::GET, &self.authorize_path(&challenge, &state), Some(session), None)
            .map_err(|e| e.to_string())?;
        let resp = tx.send_request(req).await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status().as_u16();
        let location = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
        resp.into_body().collect().await.map_err(|e| format!("transport: {e}"))?;
        if status != 302 {
            return Err(format!("authorize {status}"));
        }
        let url = url::Url::parse(&location.ok_or("no Location")?).map_err(|e| format!("Location: {e}"))?;
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        if q.get("state") != Some(&state) || !q.contains_key("iss") {
            return Err("redirect without its state or iss".into());
        }
        let code = q.get("code").ok_or("redirect without a code")?;
        let form = format!(
            "grant_type=authorization_code&code={}&redirect_uri={}&client_id={}&code_verifier={verifier}",
            enc(code),
            enc(&self.redirect_uri),
            enc(&self.client_id)
        );
        let req = self
            .request(Method::POST, &format!("{}/token", self.base_path), None, Some(form))
            .map_err(|e| e.to_string())?;
        let resp = tx.send_request(req).await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| format!("transport: {e}"))?.to_bytes();
        if status != 200 {
            return Err(format!("token {status}"));
        }
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|_| "token: not JSON".to_owned())?;
        if !v["access_token"].is_string() || (self.openid() && !v["id_token"].is_string()) {
            return Err("token: no access_token or id_token".into());
        }
        Ok(v)
    }
}
