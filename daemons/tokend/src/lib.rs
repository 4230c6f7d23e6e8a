//! tokend: Signet's OAuth 2.0 authorization server. It issues RFC 9068 JWT
//! access tokens whose signing keys live in signd (any signd backend: key
//! files, NSS, an HSM), under a role that may sign JWS signing inputs only.
//!
//! - [`config`]: the TOML, strict, with `--check-config`.
//! - [`db`]: LMDB: clients, users, sessions, consents, codes, refresh-token families,
//!   seen client assertions, revocations, key history.
//! - [`users`]: local users and their argon2id passwords; [`ldap`]: an LDAP directory's users.
//! - [`keys`]: the signing keys from signd and the rotation rules (published before
//!   they sign, kept until their last token expires); the JWKS.
//! - [`auth`]: client authentication (secret basic/post, client_secret_jwt,
//!   private_key_jwt with `jti` replay refused, the two mTLS methods, none).
//! - [`grants`], [`token`]: client_credentials and token exchange; minting through signd.
//! - [`web`], [`pages`]: the authorization endpoint, sign-in, consent and logout pages.
//! - [`flows`]: authorization_code with PKCE, refresh tokens (rotation, reuse detection), ID tokens.
//! - [`oidc`]: discovery, claims by scope, userinfo.
//! - [`remote`]: clients' JWK sets by URL, fetched and cached.
//! - [`bearer`]: the JWT bearer grant (RFC 7523 §2.1) for trusted issuers' assertions.
//! - [`device`]: the device authorization grant (RFC 8628) and its page.
//! - [`dpop`]: DPoP proofs (RFC 9449) and nonces; tokens bound to `cnf.jkt`.
//! - [`mtls`]: mutual-TLS client authentication (tls_client_auth,
//!   self_signed_tls_client_auth) and certificate-bound tokens (`cnf.x5t#S256`, RFC 8705);
//!   [`ocsp`]: tls_client_auth certificates' revocation, asked of an OCSP responder.
//! - PAR (RFC 9126): [`web`]'s pushed requests.
//! - [`http`]: the endpoints and their routing.
//! - [`admin`]: the admin interface (`tokend.capnp`) for `signetctl oauth`.
//! - [`daemon`]: start, SIGHUP (`[admin]`), stop.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admin;
pub mod auth;
pub mod bearer;
pub mod config;
pub mod daemon;
pub mod db;
pub mod device;
pub mod dpop;
pub mod error;
pub mod flows;
pub mod fuzz;
pub mod grants;
pub mod http;
pub mod keys;
pub mod ldap;
pub mod mtls;
pub mod ocsp;
pub mod oidc;
pub mod pages;
pub mod remote;
pub mod token;
pub mod users;
pub mod web;

pub use daemon::{run, TokendError};
