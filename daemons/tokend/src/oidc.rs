//! OpenID Connect: discovery (OIDC Discovery 1.0 §3), the claims of a user
//! by scope (OIDC Core §5.4), and the userinfo endpoint (§5.3).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::db::UserRec;
use crate::error::json_response;
use crate::http::{Dpop, TokenService};

/// The scopes tokend knows the meaning of.
pub const SCOPES: [&str; 5] = ["openid", "profile", "email", "groups", "offline_access"];

/// The claims tokend can say of a user.
pub const CLAIMS: [&str; 13] = [
    "iss",
    "sub",
    "aud",
    "exp",
    "iat",
    "auth_time",
    "nonce",
    "sid",
    "azp",
    "name",
    "preferred_username",
    "email",
    "groups",
];

/// The claims of `user` that `scopes` reveal, with `sub`.
pub fn user_claims(name: &str, user: &UserRec, scopes: &[String]) -> Map<String, Value> {
    let has = |s: &str| scopes.iter().any(|x| x == s);
    let mut c = Map::new();
    c.insert("sub".into(), json!(name));
    if has("profile") {
        c.insert("preferred_username".into(), json!(name));
        if let Some(n) = &user.name {
            c.insert("name".into(), json!(n));
        }
    }
    if has("email") {
        if let Some(e) = &user.email {
            c.insert("email".into(), json!(e));
            // Set by an operator, not proven by a mail round trip.
            c.insert("email_verified".into(), json!(false));
        }
    }
    if has("groups") {
        c.insert("groups".into(), json!(user.groups));
    }
    c
}

/// An RFC 6750 §3 error: a JSON body and `WWW-Authenticate: Bearer`.
fn bearer_error(status: StatusCode, code: &str, description: &str) -> Response<Full<Bytes>> {
    let mut r = json_response(status, &json!({ "error": code, "error_description": description }));
    let challenge = format!(
        "Bearer realm=\"tokend\", error=\"{code}\", error_description=\"{}\"",
        description.replace(['"', '\\'], "'")
    );
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    r
}

/// An RFC 9449 §7.1 error: `WWW-Authenticate: DPoP`, and a nonce if one is needed.
fn dpop_error(status: StatusCode, code: &str, description: &str, nonce: Option<String>) -> Response<Full<Bytes>> {
    let mut r = json_response(status, &json!({ "error": code, "error_description": description }));
    let challenge = format!(
        "DPoP algs=\"{}\", error=\"{code}\", error_description=\"{}\"",
        signet_jose::Algorithm::ALL.iter().map(|a| a.name()).collect::<Vec<_>>().join(" "),
        description.replace(['"', '\\'], "'")
    );
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    if let Some(n) = nonce.and_then(|n| HeaderValue::from_str(&n).ok()) {
        r.headers_mut().insert("dpop-nonce", n);
    }
    r
}

impl TokenService {
    /// OIDC discovery: RFC 8414's metadata plus OpenID Connect's members.
    pub fn openid_configuration(&self) -> Value {
        let mut m = self.metadata();
        let alg = self.keys.view().signer.as_ref().map(|(_, a)| a.name());
        let alg: Vec<&str> = alg.into_iter().collect();
        if let Some(o) = m.as_object_mut() {
            o.insert("userinfo_endpoint".into(), json!(format!("{}/userinfo", self.issuer)));
            o.insert("end_session_endpoint".into(), json!(format!("{}/logout", self.issuer)));
            o.insert("subject_types_supported".into(), json!(["public"]));
            o.insert("id_token_signing_alg_values_supported".into(), json!(alg));
            o.insert("claims_supported".into(), json!(CLAIMS));
            o.insert("claims_parameter_supported".into(), json!(false));
            o.insert("request_parameter_supported".into(), json!(false));
            o.insert("request_uri_parameter_supported".into(), json!(false));
        }
        m
    }

    /// `GET|POST /userinfo` with `presented` (the Authorization scheme,
    /// lower-cased, and the token) and its DPoP proof, if any.
    pub async fn userinfo(
        &self,
        presented: Option<(String, String)>,
        dpop: Dpop,
        certs: Option<&signet_runtime::http::PeerCertificates>,
        method: &str,
        now: u64,
    ) -> Response<Full<Bytes>> {
        let Some((scheme, token)) = presented.filter(|(s, _)| s == "bearer" || s == "dpop") else {
            let mut r = json_response(StatusCode::UNAUTHORIZED, &json!({ "error": "invalid_request" }));
            r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"tokend\""));
            return r;
        };
        let claims = match self.check_live(&token, now).await {
            Ok(c) => c,
            Err(crate::http::Live::Invalid(why)) => {
                return bearer_error(StatusCode::UNAUTHORIZED, "invalid_token", &why)
            }
            Err(crate::http::Live::Store(e)) => return e.response(),
        };
        // RFC 8705 §3: a certificate-bound token needs the same certificate (on the mTLS listener).
        if let Some(x5t) = claims.cnf.as_ref().and_then(|c| c.x5t_s256.as_deref()) {
            let presented = certs.and_then(|c| c.leaf()).map(crate::mtls::thumbprint);
            if presented.as_deref() != Some(x5t) {
                return bearer_error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_token",
                    "the token is bound to a TLS client certificate this request did not present",
                );
            }
        }
        let bound = claims.cnf.as_ref().and_then(|c| c.jkt.clone());
        match (bound, scheme.as_str()) {
            (None, "bearer") => {}
            (None, _) => return bearer_error(StatusCode::UNAUTHORIZED, "invalid_token", "the token is not DPoP-bound"),
            (Some(_), "bearer") => {
                return dpop_error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_token",
                    "a DPoP-bound token needs the DPoP scheme",
                    None,
                )
            }
            (Some(jkt), _) => {
                let Dpop::One(proof) = dpop else {
                    return dpop_error(
                        StatusCode::UNAUTHORIZED,
                        "invalid_dpop_proof",
                        "exactly one DPoP proof is needed",
                        None,
                    );
                };
                let htu = self.endpoint_url("/userinfo", certs.is_some());
                match self.check_dpop(&proof, method, &htu, Some(&token), now).await {
                    Ok(p) if p.jkt == jkt => {}
                    Ok(_) => {
                        return dpop_error(
                            StatusCode::UNAUTHORIZED,
                            "invalid_token",
                            "the proof's key is not the token's",
                            None,
                        )
                    }
                    Err(e) if e.code == "use_dpop_nonce" || e.code == "invalid_dpop_proof" => {
                        return dpop_error(StatusCode::UNAUTHORIZED, e.code, &e.description, e.dpop_nonce)
                    }
                    Err(e) => return e.response(),
                }
            }
        }
        let scopes: Vec<String> =
            claims.scope.as_deref().unwrap_or("").split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        if !scopes.iter().any(|s| s == "openid") {
            return bearer_error(StatusCode::FORBIDDEN, "insufficient_scope", "the token was not granted `openid`");
        }
        let Some(sub) = claims.sub.clone() else {
            return bearer_error(StatusCode::UNAUTHORIZED, "invalid_token", "the token has no subject");
        };
        let user = self.db.store.read(|txn| txn.get(&self.db.users, &sub));
        match user {
            Ok(Some(u)) if !u.disabled => json_response(StatusCode::OK, &Value::Object(user_claims(&sub, &u, &scopes))),
            Ok(_) => bearer_error(StatusCode::UNAUTHORIZED, "invalid_token", "the token's user is gone or disabled"),
            Err(e) => crate::web::unavailable(&e).response(),
        }
    }
}
