//! The token endpoint's grants: client_credentials (RFC 6749 §4.4) and token
//! exchange (RFC 8693).

use serde_json::{json, Map, Value};
use signet_jose::jwt::Claims;

use crate::auth::{Client, Form};
use crate::error::OAuthError;
use crate::token::Grant;

/// RFC 8693's grant type.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: an access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// RFC 8693 §3: a JWT.
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The grant types tokend serves.
pub const GRANT_TYPES: [&str; 6] = [
    "authorization_code",
    "refresh_token",
    crate::device::DEVICE_CODE,
    "client_credentials",
    TOKEN_EXCHANGE,
    crate::bearer::JWT_BEARER,
];

/// Checks that `client` may use `grant_type`.
pub fn allowed(client: &Client, grant_type: &str) -> Result<(), OAuthError> {
    if client.rec.grant_types.iter().any(|g| g == grant_type) {
        Ok(())
    } else {
        Err(OAuthError::unauthorized_client(format!("client `{}` may not use {grant_type}", client.id)))
    }
}

/// The scopes asked for (`scope`), each one the client may have; all of
/// them when it asks for none (RFC 6749 §3.3 lets the server choose).
pub fn scopes(client: &Client, form: &Form, within: Option<&[String]>) -> Result<Vec<String>, OAuthError> {
    let permitted: Vec<&String> = client.rec.scopes.iter().filter(|s| within.is_none_or(|w| w.contains(s))).collect();
    let Some(asked) = form.get("scope") else { return Ok(permitted.into_iter().cloned().collect()) };
    let mut out: Vec<String> = Vec::new();
    for s in asked.split(' ').filter(|s| !s.is_empty()) {
        if !s.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)) {
            return Err(OAuthError::invalid_scope("a scope has a character RFC 6749 §3.3 does not allow"));
        }
        if !permitted.iter().any(|p| *p == s) {
            return Err(OAuthError::invalid_scope(format!("scope `{s}` is not granted to this client")));
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    Ok(out)
}

/// The audience: `resource` or `audience` if given (it must be one the
/// client may name), else the client's first.
pub fn audience(client: &Client, form: &Form) -> Result<String, OAuthError> {
    let asked = match (form.get("resource"), form.get("audience")) {
        (Some(_), Some(_)) => return Err(OAuthError::invalid_request("give `resource` or `audience`, not both")),
        (Some(r), None) | (None, Some(r)) => Some(r),
        (None, None) => None,
    };
    match asked {
        Some(a) if client.rec.audiences.iter().any(|x| x == a) => Ok(a.to_owned()),
        Some(a) => Err(OAuthError::invalid_target(format!("client `{}` may not ask for audience `{a}`", client.id))),
        None => client
            .rec
            .audiences
            .first()
            .cloned()
            .ok_or_else(|| OAuthError::invalid_target(format!("client `{}` has no audience", client.id))),
    }
}

/// client_credentials: a token whose subject is the client.
pub fn client_credentials(client: &Client, form: &Form) -> Result<Grant, OAuthError> {
    if client.rec.auth_method == crate::db::AuthMethod::None {
        return Err(OAuthError::unauthorized_client("a public client cannot use client_credentials"));
    }
    Ok(Grant {
        subject: client.id.clone(),
        client_id: client.id.clone(),
        audience: audience(client, form)?,
        scopes: scopes(client, form, None)?,
        extra: Map::new(),
    })
}

/// Token exchange (impersonation with delegation recorded, RFC 8693 §4.1):
/// `subject` is the verified subject token; the new token keeps its `sub`,
/// narrows its scopes to what both the subject token and the client hold,
/// and records the client in `act` (nesting any earlier `act`).
pub fn token_exchange(client: &Client, form: &Form, subject: &Claims) -> Result<Grant, OAuthError> {
    match form.get("subject_token_type") {
        Some(ACCESS_TOKEN_TYPE | JWT_TOKEN_TYPE) => {}
        Some(other) => {
            return Err(OAuthError::invalid_request(format!("subject_token_type `{other}` is not supported")))
        }
        None => return Err(OAuthError::invalid_request("`subject_token_type` is missing")),
    }
    if form.get("actor_token").is_some() {
        return Err(OAuthError::invalid_request("actor_token is not supported; the client is the actor"));
    }
    if let Some(t) = form.get("requested_token_type") {
        if t != ACCESS_TOKEN_TYPE && t != JWT_TOKEN_TYPE {
            return Err(OAuthError::invalid_request(format!("requested_token_type `{t}` is not supported")));
        }
    }
    let subject_scopes: Vec<String> =
        subject.scope.as_deref().unwrap_or("").split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect();
    let sub = subject.sub.clone().ok_or_else(|| OAuthError::invalid_grant("the subject token has no sub"))?;
    let mut act = Map::new();
    act.insert("sub".into(), json!(client.id));
    if let Some(prior) = subject.extra.get("act") {
        act.insert("act".into(), prior.clone());
    }
    let mut extra = Map::new();
    extra.insert("act".into(), Value::Object(act));
    Ok(Grant {
        subject: sub,
        client_id: client.id.clone(),
        audience: audience(client, form)?,
        scopes: scopes(client, form, Some(&subject_scopes))?,
        extra,
    })
}
