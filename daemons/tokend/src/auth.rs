//! Client authentication at the token, introspection and revocation
//! endpoints (RFC 6749 §2.3, RFC 7523 §2.2 and §3, OIDC Core §9).
//!
//! Exactly one method per request: HTTP Basic, `client_secret` in the body,
//! or a `client_assertion`; a bare `client_id` is a public client. The method
//! presented must be the one the client registered. Secrets compare in
//! constant time (over their SHA-256); an assertion's `jti` is committed to
//! LMDB before the request is answered, so a replay is refused even after a
//! restart.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use openssl::sha::sha256;
use signet_jose::jwt::Claims;
use signet_jose::{CompactJws, Jwks};

use crate::db::{AuthMethod, ClientRec, Db};
use crate::error::OAuthError;

/// The assertion type of RFC 7523 §2.2.
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A request's form parameters; a repeated parameter is refused (RFC 6749 §3.2).
#[derive(Debug, Default)]
pub struct Form(BTreeMap<String, String>);

impl Form {
    /// Parses an `application/x-www-form-urlencoded` body.
    pub fn parse(body: &[u8]) -> Result<Form, OAuthError> {
        let mut map = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(body) {
            if map.insert(k.clone().into_owned(), v.into_owned()).is_some() {
                return Err(OAuthError::invalid_request(format!("parameter `{k}` is repeated")));
            }
        }
        Ok(Form(map))
    }

    /// A parameter (an empty value counts as absent, RFC 6749 §3.1).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// Every parameter, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A parameter that must be there.
    pub fn require(&self, name: &str) -> Result<&str, OAuthError> {
        self.get(name).ok_or_else(|| OAuthError::invalid_request(format!("`{name}` is missing")))
    }
}

/// An authenticated (or, for `none`, identified) client.
#[derive(Clone, Debug)]
pub struct Client {
    /// Its id.
    pub id: String,
    /// Its record.
    pub rec: ClientRec,
    /// The SHA-256 thumbprint (base64url) of the TLS client certificate the
    /// request came with, whatever the method: its tokens are bound to it (RFC 8705 §3).
    pub cert_x5t: Option<String>,
}

/// What a request's TLS connection presented.
pub struct Presented<'a> {
    /// The client's certificate chain, DER, leaf first; empty without one (or without TLS).
    pub chain: &'a [Vec<u8>],
    /// The CAs of tls_client_auth (`[tls] client_ca_file`).
    pub client_ca: Option<&'a openssl::x509::store::X509Store>,
    /// The OCSP check of tls_client_auth certificates, if configured.
    pub revocation: Option<&'a crate::ocsp::Revocation>,
}

/// Where the request was sent: the audiences a client assertion may name.
pub struct Audiences<'a> {
    /// The issuer identifier.
    pub issuer: &'a str,
    /// The endpoint's URL.
    pub endpoint: &'a str,
}

/// Authenticates the client of a request with `authorization` (the header),
/// `form` and its TLS certificate `tls`, at `now`; `max_assertion` bounds an
/// assertion's lifetime.
#[allow(clippy::too_many_arguments)]
pub async fn authenticate(
    db: &Db,
    remote: &crate::remote::RemoteJwks,
    authorization: Option<&str>,
    form: &Form,
    aud: &Audiences<'_>,
    now: u64,
    max_assertion: u64,
    tls: &Presented<'_>,
) -> Result<Client, OAuthError> {
    let basic = authorization.map(parse_basic).transpose()?;
    let post_secret = form.get("client_secret");
    let assertion = form.get("client_assertion");
    let presented =
        usize::from(basic.is_some()) + usize::from(post_secret.is_some()) + usize::from(assertion.is_some());
    if presented > 1 {
        return Err(OAuthError::invalid_request("more than one client authentication method"));
    }
    if let Some((id, secret)) = basic {
        if form.get("client_id").is_some_and(|c| c != id) {
            return Err(OAuthError::invalid_request("client_id differs from the Basic credentials"));
        }
        let client = lookup(db, &id)?;
        return check_secret(client, AuthMethod::ClientSecretBasic, &secret);
    }
    if let Some(secret) = post_secret {
        let client = lookup(db, form.require("client_id")?)?;
        return check_secret(client, AuthMethod::ClientSecretPost, secret);
    }
    if let Some(assertion) = assertion {
        if form.get("client_assertion_type") != Some(JWT_BEARER_ASSERTION) {
            return Err(OAuthError::invalid_request(format!("client_assertion_type must be {JWT_BEARER_ASSERTION}")));
        }
        return check_assertion(db, remote, assertion, form.get("client_id"), aud, now, max_assertion).await;
    }
    let id = form.get("client_id").ok_or_else(|| OAuthError::invalid_client("no client authentication"))?;
    let client = lookup(db, id)?;
    match client.rec.auth_method {
        AuthMethod::None => Ok(client),
        AuthMethod::TlsClientAuth | AuthMethod::SelfSignedTlsClientAuth => {
            check_certificate(db, remote, client, tls, now).await
        }
        _ => Err(OAuthError::invalid_client(format!("client `{id}` must authenticate"))),
    }
}

/// tls_client_auth and self_signed_tls_client_auth (RFC 8705 §2): the chain
/// the TLS connection presented, judged by [`crate::mtls`] (and a CA-issued
/// certificate's revocation by [`crate::ocsp`], when configured); a self-signed
/// client's JWKS by value, or fetched from its `jwks_uri` ([`crate::remote`]).
async fn check_certificate(
    db: &Db,
    remote: &crate::remote::RemoteJwks,
    client: Client,
    tls: &Presented<'_>,
    now: u64,
) -> Result<Client, OAuthError> {
    let fail = |why: String| {
        tracing::info!(client = %client.id, why = %why, "TLS client authentication failed");
        OAuthError::invalid_client(format!("client certificate: {why}"))
    };
    if tls.chain.is_empty() {
        return Err(fail(format!(
            "client `{}` authenticates with a TLS client certificate (at the mtls_endpoint_aliases); none was presented",
            client.id
        )));
    }
    if client.rec.auth_method == AuthMethod::SelfSignedTlsClientAuth {
        let jwks = client.rec.jwks.as_deref().unwrap_or("{\"keys\":[]}");
        if !crate::remote::is_uri(jwks) {
            crate::mtls::check_self_signed(tls.chain, jwks).map_err(fail)?;
            return Ok(client);
        }
        let leaf = crate::mtls::SelfSigned::new(tls.chain).map_err(fail)?;
        let set = remote
            .lookup(jwks, |set| leaf.in_jwks(&set.doc))
            .await
            .map_err(|e| fail(format!("the client's jwks_uri: {e}")))?;
        if !leaf.in_jwks(&set.doc) {
            return Err(fail(crate::mtls::NOT_IN_JWKS.into()));
        }
        return Ok(client);
    }
    let cas = tls.client_ca.ok_or_else(|| fail("this tokend has no [tls] client_ca_file".into()))?;
    let identity = db
        .store
        .read(|txn| txn.get(&db.client_tls, &client.id))
        .map_err(|e| OAuthError::unavailable(format!("store: {e}")))?
        .ok_or_else(|| fail("the client has no registered subject DN or SAN".into()))?;
    let verified = crate::mtls::check_tls_client_auth(cas, tls.chain, &identity).map_err(fail)?;
    if let Some(revocation) = tls.revocation {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        revocation.check(&verified.leaf, &verified.issuer, now).await.map_err(|r| match r {
            crate::ocsp::Refusal::Refused(why) => fail(why),
            crate::ocsp::Refusal::Unchecked(why) => {
                tracing::warn!(client = %client.id, why = %why, "a client certificate's revocation status is unknown");
                OAuthError::unavailable(format!(
                    "the client certificate's revocation status could not be checked: {why}"
                ))
            }
        })?;
    }
    Ok(client)
}

/// `Authorization: Basic` with the form-encoded id and secret (RFC 6749 §2.3.1).
pub fn parse_basic(header: &str) -> Result<(String, String), OAuthError> {
    let bad = || OAuthError::invalid_client("malformed Basic credentials");
    let (scheme, rest) = header.trim().split_once(' ').ok_or_else(bad)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(OAuthError::invalid_client(format!("unsupported authorization scheme `{scheme}`")));
    }
    let decoded = STANDARD.decode(rest.trim()).map_err(|_| bad())?;
    let text = String::from_utf8(decoded).map_err(|_| bad())?;
    let (id, secret) = text.split_once(':').ok_or_else(bad)?;
    let unescape = |s: &str| -> String {
        form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
    };
    Ok((unescape(id), unescape(secret)))
}

fn lookup(db: &Db, id: &str) -> Result<Client, OAuthError> {
    let rec = db
        .store
        .read(|txn| txn.get(&db.clients, &id.to_owned()))
        .map_err(|e| OAuthError::unavailable(format!("store: {e}")))?;
    // The same answer for an unknown client as for a wrong secret.
    rec.map(|rec| Client { id: id.to_owned(), rec, cert_x5t: None })
        .ok_or_else(|| OAuthError::invalid_client("client authentication failed"))
}

fn check_secret(client: Client, method: AuthMethod, secret: &str) -> Result<Client, OAuthError> {
    let stored = client.rec.secret_sha256.unwrap_or([0; 32]);
    let matches = openssl::memcmp::eq(&sha256(secret.as_bytes()), &stored);
    if !matches || client.rec.secret_sha256.is_none() {
        return Err(OAuthError::invalid_client("client authentication failed"));
    }
    if client.rec.auth_method != method {
        return Err(OAuthError::invalid_client(format!(
            "client `{}` is registered for {}, not {}",
            client.id,
            client.rec.auth_method.name(),
            method.name()
        )));
    }
    Ok(client)
}

async fn check_assertion(
    db: &Db,
    remote: &crate::remote::RemoteJwks,
    assertion: &str,
    form_client_id: Option<&str>,
    aud: &Audiences<'_>,
    now: u64,
    max_lifetime: u64,
) -> Result<Client, OAuthError> {
    let fail = |why: &str| OAuthError::invalid_client(format!("client assertion: {why}"));
    let jws = CompactJws::parse(assertion).map_err(|e| fail(&e.to_string()))?;
    let claims: Claims = serde_json::from_slice(jws.payload()).map_err(|e| fail(&format!("claims: {e}")))?;
    let (Some(sub), Some(exp), Some(jti)) = (claims.sub.as_deref(), claims.exp, claims.jti.as_deref()) else {
        return Err(fail("sub, exp and jti are required (RFC 7523 §3)"));
    };
    if claims.iss.as_deref() != Some(sub) {
        return Err(fail("iss and sub must both be the client id"));
    }
    if form_client_id.is_some_and(|c| c != sub) {
        return Err(fail("sub is not the client_id sent"));
    }
    let client = lookup(db, sub)?;
    let header_alg = jws.header().alg_name();
    match client.rec.auth_method {
        AuthMethod::ClientSecretJwt => {
            let key = client.rec.mac_key.as_deref().ok_or_else(|| fail("the client has no MAC key"))?;
            jws.verify_mac(key.as_bytes()).map_err(|_| fail("the MAC does not verify"))?;
        }
        AuthMethod::PrivateKeyJwt => {
            let alg = jws.header().alg.ok_or_else(|| fail(&format!("alg `{header_alg}` is not accepted")))?;
            let registered = client.rec.jwks.as_deref().unwrap_or("{\"keys\":[]}");
            let kid = jws.header().kid.as_deref();
            let fetched;
            let by_value;
            let jwks = if crate::remote::is_uri(registered) {
                fetched = remote
                    .find(registered, kid, alg)
                    .await
                    .map_err(|e| fail(&format!("the client's jwks_uri: {e}")))?;
                &fetched.jwks
            } else {
                by_value = Jwks::parse(registered.as_bytes()).map_err(|e| fail(&format!("the client's JWKS: {e}")))?;
                &by_value
            };
            let key = jwks.find(kid, alg).ok_or_else(|| fail("no key of the client's JWKS fits"))?;
            jws.verify(key).map_err(|_| fail("the signature does not verify"))?;
        }
        other => {
            return Err(OAuthError::invalid_client(format!(
                "client `{}` is registered for {}, not a client assertion",
                client.id,
                other.name()
            )))
        }
    }
    if !claims.aud.iter().any(|a| a == aud.issuer || a == aud.endpoint || a.trim_end_matches('/') == aud.issuer) {
        return Err(fail("aud names neither the issuer nor this endpoint"));
    }
    if exp <= now {
        return Err(fail("expired"));
    }
    if exp > now + max_lifetime {
        return Err(fail(&format!("exp is more than {max_lifetime} s ahead")));
    }
    if claims.nbf.is_some_and(|nbf| nbf > now + 5) {
        return Err(fail("not yet valid"));
    }
    if jti.is_empty() || jti.len() > 256 {
        return Err(fail("jti must be 1 to 256 characters"));
    }
    // Replay: the jti, committed before the request is answered.
    let fresh = db.first_use(db.assertions, &[&client.id, jti], exp).await.map_err(|e| crate::web::unavailable(&e))?;
    if !fresh {
        return Err(fail("this jti was used before (replay)"));
    }
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_parameters_are_refused() {
        assert!(Form::parse(b"grant_type=a&grant_type=b").is_err());
        let f = Form::parse(b"grant_type=client_credentials&scope=a+b&empty=").unwrap();
        assert_eq!(f.get("scope"), Some("a b"));
        assert_eq!(f.get("empty"), None);
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let h = format!("Basic {}", STANDARD.encode("my%20client:s%3Acret"));
        assert_eq!(parse_basic(&h).unwrap(), ("my client".to_owned(), "s:cret".to_owned()));
        assert!(parse_basic("Basic !!!").is_err());
        assert!(parse_basic("Bearer abc").is_err());
        assert!(parse_basic(&format!("Basic {}", STANDARD.encode("no-colon"))).is_err());
    }
}
