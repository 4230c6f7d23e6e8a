//! The fuzz entry point for the token endpoint's request parsing: arbitrary
//! bytes as an `Authorization` header line and a form body, through the form
//! parser, the Basic credentials parser and the grant rules (scopes, audience,
//! token exchange) of a fixed client. Used by the `tokend_request` libFuzzer
//! target and by the seeded mutation test on stable. What the store and signd
//! would do is left out: they see only what these accept.
//!
//! [`browser_request`] does the same for the browser side: a `Cookie` line
//! and an authorization request's parameters, through the cookie parser and
//! the authorization endpoint's checks for a fixed public client, plus the
//! device page's user-code normalisation and PKCE's syntax.

use serde_json::Map;
use signet_jose::jwt::Claims;

use crate::auth::{parse_basic, Client, Form};
use crate::db::{AuthMethod, ClientRec, ClientUris};
use crate::grants;
use crate::web::{check_authz_params, parse_cookies, pkce_syntax, AuthzError};

/// The fixed client every request is judged for.
pub fn client() -> Client {
    Client {
        id: "fuzz-client".into(),
        rec: ClientRec {
            name: "fuzz".into(),
            auth_method: AuthMethod::ClientSecretBasic,
            secret_sha256: Some([0; 32]),
            mac_key: None,
            jwks: None,
            scopes: vec!["read".into(), "write".into()],
            audiences: vec!["https://api.example".into(), "other".into()],
            grant_types: grants::GRANT_TYPES.iter().map(|g| (*g).to_owned()).collect(),
            created: 0,
            secret_set: 0,
        },
        cert_x5t: None,
    }
}

/// `data` is `AUTHORIZATION "\n" BODY` (no newline: all body). Must never
/// panic, and never grant a scope or an audience the client does not hold.
pub fn token_request(data: &[u8]) {
    let (auth, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };
    if let Ok(auth) = std::str::from_utf8(auth) {
        let _ = parse_basic(auth);
    }
    let Ok(form) = Form::parse(body) else { return };
    let c = client();
    let held = |scopes: &[String]| scopes.iter().all(|s| c.rec.scopes.contains(s));
    if let Ok(g) = grants::client_credentials(&c, &form) {
        assert!(held(&g.scopes), "a scope the client does not hold: {:?}", g.scopes);
        assert!(c.rec.audiences.contains(&g.audience), "an audience the client may not name: {}", g.audience);
    }
    let subject =
        Claims { sub: Some("someone".into()), scope: Some("read".into()), extra: Map::new(), ..Claims::default() };
    if let Ok(g) = grants::token_exchange(&c, &form, &subject) {
        assert!(g.scopes.iter().all(|s| s == "read"), "an exchange widened the scopes: {:?}", g.scopes);
        assert_eq!(g.subject, "someone");
    }
}

/// The fixed public client of [`browser_request`], and its redirect URIs.
pub fn web_client() -> (Client, ClientUris) {
    let mut c = client();
    c.id = "fuzz-web".into();
    c.rec.auth_method = AuthMethod::None;
    c.rec.secret_sha256 = None;
    c.rec.scopes = vec!["openid".into(), "profile".into(), "read".into()];
    let uris = ClientUris {
        redirect_uris: vec!["https://app.example/cb".into(), "com.example.app:/cb".into()],
        post_logout_redirect_uris: vec![],
    };
    (c, uris)
}

/// `data` is `COOKIE "\n" QUERY`. Must never panic; an accepted request
/// names a registered redirect URI, only the client's scopes, and an S256
/// challenge (a public client); its re-encoded form is accepted the same.
pub fn browser_request(data: &[u8]) {
    let (cookie, query) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };
    if let Ok(c) = std::str::from_utf8(cookie) {
        for (k, _) in parse_cookies(c) {
            assert!(!k.is_empty(), "a cookie without a name");
        }
    }
    let Ok(p) = Form::parse(query) else { return };
    if let Some(code) = p.get("user_code") {
        if let Some(n) = crate::device::normalise(code) {
            assert_eq!(crate::device::normalise(&crate::device::display(&n)), Some(n));
        }
    }
    let (c, uris) = web_client();
    match check_authz_params(c.clone(), &uris, &p) {
        Ok(req) => {
            assert!(uris.redirect_uris.contains(&req.redirect_uri), "unregistered: {}", req.redirect_uri);
            assert!(req.scopes.iter().all(|s| c.rec.scopes.contains(s)), "scopes: {:?}", req.scopes);
            let challenge = req.challenge.as_deref().unwrap_or("");
            assert!(pkce_syntax(challenge), "a public client without a good S256 challenge");
            let again = Form::parse(req.encoded.as_bytes()).map(|f| check_authz_params(c.clone(), &uris, &f));
            match again {
                Ok(Ok(r2)) => {
                    assert_eq!(
                        (r2.redirect_uri, r2.scopes, r2.challenge),
                        (req.redirect_uri, req.scopes, req.challenge)
                    )
                }
                _ => panic!("the carried request is refused: {}", req.encoded),
            }
        }
        Err(AuthzError::Redirect { redirect_uri, .. }) => {
            assert!(uris.redirect_uris.contains(&redirect_uri), "an error sent to {redirect_uri}");
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_browser_mutations_never_panic_or_stray() {
        let seeds: [&[u8]; 3] = [
            b"tokend_session=abc; tokend_csrf=x\nresponse_type=code&client_id=fuzz-web&redirect_uri=https%3A%2F%2Fapp.example%2Fcb\
              &scope=openid+read&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
            b"\nresponse_type=code&client_id=fuzz-web&redirect_uri=com.example.app%3A%2Fcb&scope=admin&prompt=none",
            b"a=b\nuser_code=bcdf-ghjk&code_challenge_method=plain",
        ];
        for seed in seeds {
            browser_request(seed);
        }
        signet_jose::fuzz::mutate_seeds(&seeds, 6000, 0x2545_f491_4f6c_dd1d, browser_request);
    }

    #[test]
    fn seeded_mutations_never_panic_or_widen_a_grant() {
        let seeds: [&[u8]; 4] = [
            b"Basic ZnV6ei1jbGllbnQ6c2VjcmV0\ngrant_type=client_credentials&scope=read+write&resource=other",
            b"\ngrant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token=x\
              &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&scope=read",
            b"Basic !!\nscope=admin&audience=https%3A%2F%2Fapi.example",
            b"grant_type=client_credentials&grant_type=x",
        ];
        for seed in seeds {
            token_request(seed);
        }
        signet_jose::fuzz::mutate_seeds(&seeds, 8000, 0x9e37_79b9_7f4a_7c15, token_request);
    }
}
