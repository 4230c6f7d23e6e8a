//! tokend's HTTP face, for signet-runtime's scaffold.
//!
//! | path | answers |
//! |---|---|
//! | `GET /.well-known/oauth-authorization-server` | RFC 8414 metadata |
//! | `GET /.well-known/openid-configuration` | OIDC discovery |
//! | `GET /jwks` | the published keys (RFC 7517) |
//! | `GET\|POST /authorize`, `POST /login`, `POST /consent` | the authorization endpoint and its pages ([`crate::web`]) |
//! | `GET\|POST /logout` | RP-initiated logout |
//! | `POST /token` | authorization_code, refresh_token, client_credentials, token exchange |
//! | `GET\|POST /userinfo` | OIDC Core §5.3 |
//! | `POST /introspect` | RFC 7662 (access and refresh tokens) |
//! | `POST /revoke` | RFC 7009 (a refresh token revokes its family) |
//!
//! With `[tls]`, a second listener serves the same endpoints over HTTPS and
//! asks each client for a certificate ([`crate::mtls`], RFC 8705): the
//! `mtls_endpoint_aliases` of the metadata.
//!
//! Every error is RFC 6749's JSON (`invalid_client` 401 with
//! `WWW-Authenticate`); signd or the store unavailable is
//! `temporarily_unavailable` 503 with `Retry-After`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::json;
use signet_runtime::http::{Body, Handler, PeerCertificates};
use signet_runtime::metrics::Metrics;
use signet_store::StoreError;

use crate::auth::{authenticate, Audiences, Client, Form};
use crate::db::{AuthMethod, Db};
use crate::error::{json_response, OAuthError};
use crate::grants::{self, ACCESS_TOKEN_TYPE, GRANT_TYPES, TOKEN_EXCHANGE};
use crate::keys::Keys;
use crate::token::{self, MintError};

/// The largest request body, in bytes.
pub const MAX_BODY: usize = 64 * 1024;

/// What the endpoints need, shared by every request.
pub struct TokenService {
    /// The issuer identifier, without a trailing `/`.
    pub issuer: String,
    /// The store.
    pub db: Db,
    /// The signing keys.
    pub keys: Arc<Keys>,
    /// Access token lifetime, seconds.
    pub token_seconds: u64,
    /// The longest client assertion lifetime, seconds.
    pub max_assertion_seconds: u64,
    /// `Cache-Control` max-age of the JWKS, seconds.
    pub jwks_max_age: u64,
    /// Metrics.
    pub metrics: TokenMetrics,
    /// tokend's own tokens already verified (introspection, revocation, exchange).
    pub verified: token::Verified,
    /// The browser flows' settings.
    pub flows: FlowSettings,
    /// Issuers whose assertions the JWT bearer grant accepts.
    pub trusted_issuers: Vec<crate::bearer::TrustedIssuer>,
    /// Clients' JWK sets by URL, cached.
    pub remote: crate::remote::RemoteJwks,
    /// Where users sign in besides the local table (`[ldap]`).
    pub directory: crate::users::Directory,
    /// The mutual-TLS listener (`[tls]`), if there is one.
    pub mtls: Option<crate::mtls::Mtls>,
}

/// The lifetimes and keys of the user flows.
#[derive(Clone, Debug)]
pub struct FlowSettings {
    /// Authorization code lifetime, seconds.
    pub code_seconds: u64,
    /// ID token lifetime, seconds.
    pub id_token_seconds: u64,
    /// Idle lifetime of a refresh token, seconds.
    pub refresh_token_seconds: u64,
    /// Absolute lifetime of a refresh-token family, seconds.
    pub refresh_family_seconds: u64,
    /// How long a rotated refresh token still works, seconds.
    pub refresh_grace_seconds: u64,
    /// Session lifetime, seconds.
    pub session_seconds: u64,
    /// The MAC key of the forms' CSRF tokens.
    pub csrf_key: [u8; 32],
    /// The MAC key of DPoP nonces.
    pub dpop_key: [u8; 32],
    /// Whether DPoP proofs must carry a nonce.
    pub dpop_require_nonce: bool,
}

/// A label for an outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// What happened.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrantLabel {
    grant: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabel {
    endpoint: &'static str,
    error: &'static str,
}

/// tokend's own metrics.
#[derive(Clone, Debug, Default)]
pub struct TokenMetrics {
    issued: Family<GrantLabel, Counter>,
    errors: Family<ErrorLabel, Counter>,
    introspections: Counter,
    revocations: Counter,
    /// Authorization codes issued.
    pub codes: Counter,
    /// Sign-in attempts, by outcome.
    pub logins: Family<OutcomeLabel, Counter>,
    /// Refresh tokens reused (each revoked its family).
    pub reuses: Counter,
}

impl TokenMetrics {
    /// Registers the metrics in `metrics`.
    pub fn register(metrics: &Metrics) -> TokenMetrics {
        let m = TokenMetrics::default();
        metrics.register("tokend_tokens_issued", "Access tokens issued, by grant type", m.issued.clone());
        metrics.register("tokend_errors", "Error responses, by endpoint and OAuth error code", m.errors.clone());
        metrics.register("tokend_introspections", "Introspection requests answered", m.introspections.clone());
        metrics.register("tokend_revocations", "Tokens revoked", m.revocations.clone());
        metrics.register("tokend_codes_issued", "Authorization codes issued", m.codes.clone());
        metrics.register("tokend_logins", "Sign-in attempts, by outcome", m.logins.clone());
        metrics.register(
            "tokend_refresh_reuses",
            "Rotated refresh tokens used again (each revoked its family)",
            m.reuses.clone(),
        );
        m
    }
}

/// The OAuth error of a token that could not be signed.
pub fn mint_error(e: MintError) -> OAuthError {
    match e {
        MintError::Signd(e) if e.kind.is_transient() => OAuthError::unavailable(format!("signd: {e}")),
        MintError::NoKey => OAuthError::unavailable("no signing key is available yet"),
        other => OAuthError::server_error(other.to_string()),
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl TokenService {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }

    /// The URL of endpoint `path` as a request reached it: on the mTLS
    /// listener (`tls`, the request came over TLS) its alias, else the issuer's.
    pub(crate) fn endpoint_url(&self, path: &str, tls: bool) -> String {
        match (&self.mtls, tls) {
            (Some(m), true) => format!("{}{path}", m.base_url),
            _ => self.url(path),
        }
    }

    /// RFC 8414 metadata. With `[tls]`: the mTLS methods,
    /// `tls_client_certificate_bound_access_tokens` and `mtls_endpoint_aliases`
    /// (RFC 8705 §3.3, §5), the userinfo endpoint among them.
    pub fn metadata(&self) -> serde_json::Value {
        let methods: Vec<&str> =
            AuthMethod::ALL.iter().filter(|m| self.mtls.is_some() || !m.is_mtls()).map(|m| m.name()).collect();
        let algs: Vec<&str> = signet_jose::Algorithm::ALL.iter().map(|a| a.name()).collect();
        let mut out = json!({
            "issuer": self.issuer,
            "authorization_endpoint": self.url("/authorize"),
            "token_endpoint": self.url("/token"),
            "jwks_uri": self.url("/jwks"),
            "introspection_endpoint": self.url("/introspect"),
            "revocation_endpoint": self.url("/revoke"),
            "grant_types_supported": GRANT_TYPES,
            "token_endpoint_auth_methods_supported": methods,
            "token_endpoint_auth_signing_alg_values_supported": algs_with_mac(&algs),
            "pushed_authorization_request_endpoint_auth_methods_supported": methods,
            "introspection_endpoint_auth_methods_supported": methods,
            "revocation_endpoint_auth_methods_supported": methods,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": crate::oidc::SCOPES,
            "authorization_response_iss_parameter_supported": true,
            "prompt_values_supported": ["none", "login", "consent"],
            "pushed_authorization_request_endpoint": self.url("/par"),
            "device_authorization_endpoint": self.url("/device_authorization"),
            "require_pushed_authorization_requests": false,
            "dpop_signing_alg_values_supported": algs,
        });
        if let (Some(m), Some(o)) = (&self.mtls, out.as_object_mut()) {
            let alias = |p: &str| format!("{}{p}", m.base_url);
            o.insert("tls_client_certificate_bound_access_tokens".into(), json!(true));
            o.insert(
                "mtls_endpoint_aliases".into(),
                json!({
                    "token_endpoint": alias("/token"),
                    "introspection_endpoint": alias("/introspect"),
                    "revocation_endpoint": alias("/revoke"),
                    "userinfo_endpoint": alias("/userinfo"),
                    "pushed_authorization_request_endpoint": alias("/par"),
                    "device_authorization_endpoint": alias("/device_authorization"),
                }),
            );
        }
        out
    }

    async fn token(
        &self,
        auth: Option<&str>,
        certs: Option<&PeerCertificates>,
        dpop: Dpop,
        form: &Form,
    ) -> Result<serde_json::Value, OAuthError> {
        let now = unix_now();
        let grant_type = form.require("grant_type")?.to_owned();
        let client = self.authenticate(auth, certs, form, "/token", now).await?;
        let proof = match dpop {
            Dpop::None => None,
            Dpop::Many => return Err(OAuthError::invalid_dpop_proof("more than one DPoP header")),
            Dpop::One(p) => {
                Some(self.check_dpop(&p, "POST", &self.endpoint_url("/token", certs.is_some()), None, now).await?)
            }
        };
        let user_flow = match grant_type.as_str() {
            "authorization_code" => {
                grants::allowed(&client, &grant_type)?;
                Some(self.redeem_code(&client, form, proof.as_ref(), now).await)
            }
            "refresh_token" => {
                grants::allowed(&client, &grant_type)?;
                Some(self.refresh(&client, form, proof.as_ref(), now).await)
            }
            crate::device::DEVICE_CODE => {
                grants::allowed(&client, &grant_type)?;
                Some(self.device_token(&client, form, proof.as_ref(), now).await)
            }
            _ => None,
        };
        if let Some(outcome) = user_flow {
            let body = outcome?;
            self.metrics
                .issued
                .get_or_create(&GrantLabel {
                    grant: if grant_type == "refresh_token" { "refresh_token" } else { "authorization_code" },
                })
                .inc();
            return Ok(body);
        }
        let (mut grant, label) = match grant_type.as_str() {
            "client_credentials" => {
                grants::allowed(&client, &grant_type)?;
                (grants::client_credentials(&client, form)?, "client_credentials")
            }
            TOKEN_EXCHANGE => {
                grants::allowed(&client, &grant_type)?;
                let subject = form.require("subject_token")?;
                let claims = self.check_live(subject, now).await.map_err(|e| match e {
                    Live::Invalid(why) => OAuthError::invalid_grant(format!("subject_token: {why}")),
                    Live::Store(e) => e,
                })?;
                (grants::token_exchange(&client, form, &claims)?, "token_exchange")
            }
            crate::bearer::JWT_BEARER => {
                grants::allowed(&client, &grant_type)?;
                (self.jwt_bearer(&client, form, now).await?, "jwt_bearer")
            }
            "password" | "implicit" => {
                return Err(OAuthError::unsupported_grant_type(format!("{grant_type} is not served by this tokend")))
            }
            other => return Err(OAuthError::unsupported_grant_type(format!("unknown grant type `{other}`"))),
        };
        // Bound to the DPoP key, or else to the TLS client certificate (RFC 8705 §3).
        let jkt = proof.as_ref().map(|p| p.jkt.as_str());
        if let Some(cnf) = crate::mtls::confirmation(jkt, client.cert_x5t.as_deref()) {
            grant.extra.insert("cnf".into(), cnf);
        }
        let minted =
            token::mint(&self.keys, &self.issuer, &grant, now, self.token_seconds).await.map_err(mint_error)?;
        self.metrics.issued.get_or_create(&GrantLabel { grant: label }).inc();
        let mut body = json!({
            "access_token": minted.token,
            "token_type": if proof.is_some() { "DPoP" } else { "Bearer" },
            "expires_in": minted.expires_in,
        });
        if !grant.scopes.is_empty() {
            body["scope"] = json!(grant.scopes.join(" "));
        }
        if label == "token_exchange" {
            body["issued_token_type"] = json!(ACCESS_TOKEN_TYPE);
        }
        Ok(body)
    }

    /// Authenticates the client of a request at `path`; `certs`: the request
    /// came over TLS, with this chain. A client that presented a certificate
    /// comes back with its thumbprint ([`Client::cert_x5t`]): its tokens are
    /// bound to it.
    pub(crate) async fn authenticate(
        &self,
        auth: Option<&str>,
        certs: Option<&PeerCertificates>,
        form: &Form,
        path: &str,
        now: u64,
    ) -> Result<Client, OAuthError> {
        let endpoint = self.endpoint_url(path, certs.is_some());
        let aud = Audiences { issuer: &self.issuer, endpoint: &endpoint };
        let chain: &[Vec<u8>] = certs.map_or(&[], |c| c.0.as_slice());
        let cas = self.mtls.as_ref().and_then(|m| m.client_ca.as_ref());
        let revocation = self.mtls.as_ref().and_then(|m| m.revocation.as_ref());
        let tls = crate::auth::Presented { chain, client_ca: cas, revocation };
        let mut client =
            authenticate(&self.db, &self.remote, auth, form, &aud, now, self.max_assertion_seconds, &tls).await?;
        client.cert_x5t = chain.first().map(|leaf| crate::mtls::thumbprint(leaf));
        Ok(client)
    }

    /// One of tokend's own tokens, unexpired and not revoked.
    pub(crate) async fn check_live(&self, token: &str, now: u64) -> Result<signet_jose::jwt::Claims, Live> {
        let claims =
            self.verified.verify_own(&self.keys, &self.issuer, token, now).map_err(|e| Live::Invalid(e.to_string()))?;
        let jti = claims.jti.clone().ok_or_else(|| Live::Invalid("no jti".into()))?;
        let revoked = self
            .db
            .store
            .read(|txn| txn.get(&self.db.revoked, &jti))
            .map_err(|e| Live::Store(OAuthError::unavailable(format!("store: {e}"))))?;
        if revoked.is_some() {
            return Err(Live::Invalid("revoked".into()));
        }
        Ok(claims)
    }

    async fn introspect(
        &self,
        auth: Option<&str>,
        certs: Option<&PeerCertificates>,
        form: &Form,
    ) -> Result<serde_json::Value, OAuthError> {
        let now = unix_now();
        self.authenticate(auth, certs, form, "/introspect", now).await?;
        let token = form.require("token")?;
        self.metrics.introspections.inc();
        let claims = match self.check_live(token, now).await {
            Ok(c) => c,
            Err(Live::Invalid(_)) => {
                return Ok(self.introspect_refresh(token, now)?.unwrap_or_else(|| json!({ "active": false })))
            }
            Err(Live::Store(e)) => return Err(e),
        };
        let bound = claims.cnf.as_ref().is_some_and(|c| c.jkt.is_some());
        let mut out = json!({ "active": true, "token_type": if bound { "DPoP" } else { "Bearer" } });
        let value = serde_json::to_value(&claims).map_err(|e| OAuthError::server_error(e.to_string()))?;
        if let (Some(out), serde_json::Value::Object(claims)) = (out.as_object_mut(), value) {
            for (k, v) in claims {
                if !v.is_null() {
                    out.insert(k, v);
                }
            }
        }
        Ok(out)
    }

    async fn revoke(
        &self,
        auth: Option<&str>,
        certs: Option<&PeerCertificates>,
        form: &Form,
    ) -> Result<(), OAuthError> {
        let now = unix_now();
        let client = self.authenticate(auth, certs, form, "/revoke", now).await?;
        let token = form.require("token")?;
        if let Some(hint) = form.get("token_type_hint") {
            if hint != "access_token" && hint != "refresh_token" {
                return Err(OAuthError::unsupported_token_type(format!("token_type_hint `{hint}` is unknown")));
            }
        }
        // RFC 7009 §2.2: an invalid or expired token is answered 200 all the same.
        let Ok(claims) = self.verified.verify_own(&self.keys, &self.issuer, token, now) else {
            if self.revoke_refresh(&client, token, now).await? {
                self.metrics.revocations.inc();
                tracing::info!(client = %client.id, "refresh token revoked with its family");
            }
            return Ok(());
        };
        if claims.client_id.as_deref() != Some(client.id.as_str()) {
            return Err(OAuthError::unauthorized_client("the token was not issued to this client"));
        }
        let (Some(jti), Some(exp)) = (claims.jti.clone(), claims.exp) else { return Ok(()) };
        let table = self.db.revoked;
        self.db
            .write_grouped(move |txn| -> Result<(), StoreError> { txn.put(&table, &jti, &exp) })
            .await
            .map_err(|e| crate::web::unavailable(&e))?;
        self.metrics.revocations.inc();
        tracing::info!(client = %client.id, "access token revoked");
        Ok(())
    }

    fn count_error(&self, endpoint: &'static str, e: &OAuthError) {
        self.metrics.errors.get_or_create(&ErrorLabel { endpoint, error: e.code }).inc();
    }

    /// Answers one request.
    pub async fn answer(&self, req: Request<Body>) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        // Present when the request came over TLS (the mTLS listener).
        let certs = req.extensions().get::<PeerCertificates>().cloned();
        let certs = certs.as_ref();
        match path.as_str() {
            "/.well-known/oauth-authorization-server" => {
                if method != Method::GET && method != Method::HEAD {
                    return method_not_allowed("GET, HEAD");
                }
                let mut r = json_response(StatusCode::OK, &self.metadata());
                r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
                r
            }
            "/.well-known/openid-configuration" => {
                if method != Method::GET && method != Method::HEAD {
                    return method_not_allowed("GET, HEAD");
                }
                let mut r = json_response(StatusCode::OK, &self.openid_configuration());
                r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
                r
            }
            "/authorize" | "/login" | "/consent" | "/logout" | "/device" => {
                let post = method == Method::POST;
                if !post && method != Method::GET {
                    return method_not_allowed("GET, POST");
                }
                if !post && (path == "/login" || path == "/consent") {
                    return method_not_allowed("POST");
                }
                let web = match read_web(req).await {
                    Ok(w) => w,
                    Err(e) => return crate::pages::message(e.status, "Bad request", &e.description),
                };
                let now = unix_now();
                match path.as_str() {
                    "/authorize" => self.authorize(&web, now).await,
                    "/login" => self.login(&web, now).await,
                    "/consent" => self.consent(&web, now).await,
                    "/device" => self.device_page(&web, now).await,
                    _ => self.logout(&web, now).await,
                }
            }
            "/userinfo" => {
                if method != Method::GET && method != Method::POST {
                    return method_not_allowed("GET, POST");
                }
                let presented = req
                    .headers()
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.split_once(' '))
                    .map(|(scheme, t)| (scheme.to_ascii_lowercase(), t.trim().to_owned()));
                let dpop = Dpop::of(req.headers());
                self.userinfo(presented, dpop, certs, method.as_str(), unix_now()).await
            }
            "/jwks" => {
                if method != Method::GET && method != Method::HEAD {
                    return method_not_allowed("GET, HEAD");
                }
                let mut r = Response::new(Full::new(self.keys.view().jwks_json.clone()));
                r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/jwk-set+json"));
                if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={}", self.jwks_max_age)) {
                    r.headers_mut().insert(CACHE_CONTROL, v);
                }
                r
            }
            "/token" | "/introspect" | "/revoke" | "/par" | "/device_authorization" => {
                let endpoint: &'static str = match path.as_str() {
                    "/token" => "token",
                    "/introspect" => "introspect",
                    "/par" => "par",
                    "/device_authorization" => "device_authorization",
                    _ => "revoke",
                };
                if method != Method::POST {
                    return method_not_allowed("POST");
                }
                let auth = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
                let dpop = Dpop::of(req.headers());
                let outcome = match read_form(req).await {
                    Err(e) => Err(e),
                    Ok(form) => match endpoint {
                        "token" => self.token(auth.as_deref(), certs, dpop, &form).await,
                        "par" => self.push(auth.as_deref(), certs, dpop, &form).await,
                        "device_authorization" => self.device_authorization(auth.as_deref(), certs, &form).await,
                        "introspect" => self.introspect(auth.as_deref(), certs, &form).await,
                        _ => self.revoke(auth.as_deref(), certs, &form).await.map(|()| json!({})),
                    },
                };
                match outcome {
                    Ok(body) if endpoint == "revoke" => {
                        let _ = body;
                        let mut r = Response::new(Full::new(Bytes::new()));
                        r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                        r
                    }
                    Ok(body) if endpoint == "par" => json_response(StatusCode::CREATED, &body),
                    Ok(body) => json_response(StatusCode::OK, &body),
                    Err(e) => {
                        self.count_error(endpoint, &e);
                        e.response()
                    }
                }
            }
            _ => OAuthError::new(StatusCode::NOT_FOUND, "not_found", format!("no endpoint at {path}")).response(),
        }
    }
}

/// The `DPoP` headers of a request.
pub enum Dpop {
    /// None.
    None,
    /// Exactly one: the proof.
    One(String),
    /// More than one (refused, RFC 9449 §4.3).
    Many,
}

impl Dpop {
    /// The DPoP headers of `headers`.
    pub fn of(headers: &hyper::HeaderMap) -> Dpop {
        let mut all = headers.get_all("dpop").iter();
        match (all.next(), all.next()) {
            (None, _) => Dpop::None,
            (Some(v), None) => v.to_str().map_or(Dpop::Many, |s| Dpop::One(s.to_owned())),
            (Some(_), Some(_)) => Dpop::Many,
        }
    }
}

/// Why a token is not live.
pub(crate) enum Live {
    /// Not one of tokend's live access tokens: why.
    Invalid(String),
    /// The store failed.
    Store(OAuthError),
}

fn algs_with_mac(algs: &[&'static str]) -> Vec<&'static str> {
    let mut v = algs.to_vec();
    v.extend(["HS256", "HS384", "HS512"]);
    v
}

/// A browser request: query, cookies and (POST) the form body.
async fn read_web(req: Request<Body>) -> Result<crate::web::WebRequest, OAuthError> {
    let raw_query = req.uri().query().unwrap_or("").to_owned();
    let query = Form::parse(raw_query.as_bytes())?;
    let cookies = req
        .headers()
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(crate::web::parse_cookies)
        .collect();
    let post = req.method() == Method::POST;
    let form = if post { read_form(req).await? } else { Form::default() };
    Ok(crate::web::WebRequest { query, form, raw_query, cookies, post })
}

/// The form body of a POST: `application/x-www-form-urlencoded`, at most [`MAX_BODY`].
async fn read_form(req: Request<Body>) -> Result<Form, OAuthError> {
    let (parts, body) = req.into_parts();
    let ct = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        return Err(OAuthError::invalid_request("the body must be application/x-www-form-urlencoded"));
    }
    let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let too_big = || {
        OAuthError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            format!("the body is larger than {MAX_BODY} bytes"),
        )
    };
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_big());
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => return Err(too_big()),
        Err(e) => return Err(OAuthError::invalid_request(format!("reading the body: {e}"))),
    };
    Form::parse(&body)
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut r = OAuthError::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request", format!("use {allow}")).response();
    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// The handler the scaffold serves.
#[derive(Clone)]
pub struct TokendHttp(pub Arc<TokenService>);

impl Handler for TokendHttp {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let svc = self.0.clone();
        async move { svc.answer(req).await }.boxed()
    }
}
