//! Plain Rust types for everything that crosses the signd interface.
//!
//! Daemon logic uses only these; [`crate::convert`] maps them to and from the wire.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use signet_types::{DigestAlgorithm, ErrorKind, KeyAlgorithm, SchemeMismatch, SignatureScheme, UnknownName};

/// A typed error: a kind a program can act on, plus detail for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{kind}: {detail}")]
pub struct IpcError {
    /// What went wrong, for programs.
    pub kind: ErrorKind,
    /// What went wrong, for people.
    pub detail: String,
}

impl IpcError {
    /// Builds an error of `kind`.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self { kind, detail: detail.into() }
    }

    /// Shorthand for [`ErrorKind::PermissionDenied`].
    pub fn denied(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, detail)
    }

    /// Shorthand for [`ErrorKind::InvalidArgument`].
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, detail)
    }

    /// Shorthand for [`ErrorKind::Internal`].
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, detail)
    }
}

impl From<UnknownName> for IpcError {
    fn from(e: UnknownName) -> Self {
        Self::new(e.kind(), e.to_string())
    }
}

impl From<SchemeMismatch> for IpcError {
    fn from(e: SchemeMismatch) -> Self {
        Self::new(e.kind(), e.to_string())
    }
}

/// Public information about a key; never contains private material.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyInfo {
    /// The key's id.
    pub id: String,
    /// The key's algorithm.
    pub algorithm: KeyAlgorithm,
    /// SubjectPublicKeyInfo, DER.
    pub spki: Vec<u8>,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_secs: i64,
    /// Roles that may use the key.
    pub roles: Vec<String>,
    /// The backend holding the private key ("openssl", "nss").
    pub backend: String,
    /// Where the private key lives (a file path, a token and label).
    pub location: String,
    /// Whether the key loaded and matched its recorded public key.
    pub available: bool,
    /// Why the key is unavailable, when it is; empty otherwise.
    pub problem: String,
}

/// The identity signd sees for a connection, and what policy grants it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallerInfo {
    /// The caller's uid from SO_PEERCRED.
    pub uid: u32,
    /// The caller's gid from SO_PEERCRED.
    pub gid: u32,
    /// The caller's pid from SO_PEERCRED.
    pub pid: i32,
    /// Roles granted by policy.
    pub roles: Vec<String>,
    /// Whether the caller may use the admin capability.
    pub admin: bool,
}

/// signd's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Serving normally.
    pub ok: bool,
    /// signd's version.
    pub version: String,
    /// Keys loaded and checked.
    pub keys_loaded: u32,
    /// Keys that failed to load or check.
    pub keys_unavailable: u32,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Records in the audit log.
    pub audit_records: u64,
}

/// What `generate` and `import` create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySpec {
    /// The new key's id: `[A-Za-z0-9._-]{1,64}`.
    pub id: String,
    /// The algorithm (for import, checked against the key material).
    pub algorithm: KeyAlgorithm,
    /// Roles that may use the key.
    pub roles: Vec<String>,
    /// Backend name; empty for the default.
    pub backend: String,
}

/// What `Admin.issueIssuingCa` asks for: a new issuing CA beside `issuer`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuingCaSpec {
    /// The issuer the new CA succeeds (its profile and roles are copied).
    pub issuer: String,
    /// The new issuer's name.
    pub new_name: String,
    /// The new CA's key (held by signd, used by no issuer).
    pub key_id: String,
    /// The root key: the one that signed `issuer`'s certificate.
    pub root_key_id: String,
    /// The new CA's OCSP responder key (held by signd, used by no issuer).
    pub responder_key_id: String,
    /// The new CA's subject DN, RFC 4514 (e.g. `CN=Signet Demo Issuing CA 2`).
    pub subject: String,
    /// Validity of the CA certificate in days; 0: signd's default.
    pub validity_days: u32,
    /// The CRL URL of the new issuer's profile; empty: `issuer`'s, its `/crl/<issuer>` made `/crl/<new_name>`.
    pub crl_url: String,
}

/// Which audit records to read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Only records with a larger sequence number (oldest first), or a smaller
    /// one (newest first); 0 means from the start or the end.
    pub after_seq: u64,
    /// At most this many records.
    pub limit: u32,
    /// Newest first.
    pub newest_first: bool,
}

impl Default for AuditQuery {
    fn default() -> Self {
        Self { after_seq: 0, limit: 100, newest_first: false }
    }
}

/// One audit log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Position in the log, from 1.
    pub seq: u64,
    /// When, in nanoseconds since the Unix epoch.
    pub time_unix_nanos: i64,
    /// The operation: sign, sign-batch, generate, import, signer, admin,
    /// issue-cert, sign-crl, sign-ocsp, issuer, crl-signer, ocsp-signer ...
    pub operation: String,
    /// The key involved; empty if none.
    pub key_id: String,
    /// The caller's uid.
    pub uid: u32,
    /// The caller's pid.
    pub pid: i32,
    /// The role the caller acted in; empty if none.
    pub role: String,
    /// SHA-256 of the message signed (for a batch: of the messages' hashes
    /// concatenated); empty if no message was involved.
    pub message_sha256: Vec<u8>,
    /// Whether the operation succeeded.
    pub ok: bool,
    /// "ok", or the error kind and detail. Successful issue-cert, sign-crl
    /// and sign-ocsp records add what was signed: "ok serial=<hex>",
    /// "ok crl-number=<hex> revoked=<n>", "ok serial=<hex> status=<status>".
    pub outcome: String,
}

/// Peer credentials of a connection, from SO_PEERCRED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCredentials {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Process id (0 if the kernel did not report one).
    pub pid: i32,
}

// --- ocspd ------------------------------------------------------------------

/// RFC 5280 CRLReason; the discriminants are the RFC's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RevocationReason {
    /// unspecified (0).
    Unspecified = 0,
    /// keyCompromise (1).
    KeyCompromise = 1,
    /// cACompromise (2).
    CaCompromise = 2,
    /// affiliationChanged (3).
    AffiliationChanged = 3,
    /// superseded (4).
    Superseded = 4,
    /// cessationOfOperation (5).
    CessationOfOperation = 5,
    /// certificateHold (6).
    CertificateHold = 6,
    /// removeFromCRL (8).
    RemoveFromCrl = 8,
    /// privilegeWithdrawn (9).
    PrivilegeWithdrawn = 9,
    /// aACompromise (10).
    AaCompromise = 10,
}

impl RevocationReason {
    /// Every reason, in code order.
    pub const ALL: [RevocationReason; 10] = [
        Self::Unspecified,
        Self::KeyCompromise,
        Self::CaCompromise,
        Self::AffiliationChanged,
        Self::Superseded,
        Self::CessationOfOperation,
        Self::CertificateHold,
        Self::RemoveFromCrl,
        Self::PrivilegeWithdrawn,
        Self::AaCompromise,
    ];

    /// The name used on the command line and in JSON (RFC 5280's, in kebab case).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::KeyCompromise => "key-compromise",
            Self::CaCompromise => "ca-compromise",
            Self::AffiliationChanged => "affiliation-changed",
            Self::Superseded => "superseded",
            Self::CessationOfOperation => "cessation-of-operation",
            Self::CertificateHold => "certificate-hold",
            Self::RemoveFromCrl => "remove-from-crl",
            Self::PrivilegeWithdrawn => "privilege-withdrawn",
            Self::AaCompromise => "aa-compromise",
        }
    }

    /// The RFC 5280 code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The reason with RFC 5280 code `code`, if there is one.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl fmt::Display for RevocationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RevocationReason {
    type Err = IpcError;
    fn from_str(s: &str) -> Result<Self, IpcError> {
        let wanted = s.to_ascii_lowercase().replace('_', "-");
        Self::ALL.into_iter().find(|r| r.name() == wanted || r.name().replace('-', "") == wanted).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|r| r.name()).collect();
            IpcError::new(
                ErrorKind::InvalidArgument,
                format!("unknown revocation reason `{s}` (one of {})", names.join(", ")),
            )
        })
    }
}

/// What ocspd knows of a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CertState {
    /// Recorded and not revoked.
    Good,
    /// Revoked.
    Revoked,
    /// Never recorded.
    Unknown,
}

impl CertState {
    /// "good", "revoked" or "unknown".
    pub fn name(self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::Revoked => "revoked",
            Self::Unknown => "unknown",
        }
    }
}

/// What an issuer records about a certificate it has issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedCert {
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// notAfter, Unix seconds.
    pub not_after_unix_secs: i64,
    /// The CRL shard in the certificate's CRLDP (0 when unsharded).
    pub crl_shard: u32,
}

/// A certificate's recorded status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertStatus {
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// Good, revoked or unknown.
    pub state: CertState,
    /// notAfter, Unix seconds (0 when unknown).
    pub not_after_unix_secs: i64,
    /// The CRL shard.
    pub crl_shard: u32,
    /// When ocspd recorded the issuance, Unix seconds.
    pub recorded_unix_secs: i64,
    /// When revoked, Unix seconds (0 unless revoked).
    pub revoked_unix_secs: i64,
    /// Why, when revoked. A certificate on hold is revoked with
    /// [`RevocationReason::CertificateHold`].
    pub reason: Option<RevocationReason>,
    /// When it was last released from hold, Unix seconds: 0 unless it was
    /// released and is good (a later revocation clears it).
    pub released_unix_secs: i64,
}

impl CertStatus {
    /// Whether the certificate is on hold (revoked with reason certificateHold),
    /// which [`releaseHold`](crate::OcspdClient::release_hold) can undo.
    pub fn on_hold(&self) -> bool {
        self.state == CertState::Revoked && self.reason == Some(RevocationReason::CertificateHold)
    }
}

/// A revocation request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// Why.
    pub reason: RevocationReason,
    /// When, Unix seconds; 0 means now.
    pub revoked_unix_secs: i64,
}

/// Which CRL to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CrlSelector {
    /// The full CRL.
    Full,
    /// One shard of a partitioned CRL.
    Shard(u32),
    /// The delta CRL against the newest full CRL.
    Delta,
}

/// One CA as ocspd serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuerInfo {
    /// The issuer's name (as in signd's and ocspd's config).
    pub name: String,
    /// The CA certificate, DER.
    pub ca_certificate: Vec<u8>,
    /// The OCSP responder certificate, DER.
    pub responder_certificate: Vec<u8>,
    /// Number of CRL shards (0: one CRL).
    pub crl_shards: u32,
    /// Where ocspd answers OCSP.
    pub ocsp_url: String,
    /// The full CRL's URL.
    pub crl_url: String,
}

/// ocspd's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OcspdHealth {
    /// Serving.
    pub ok: bool,
    /// ocspd's version.
    pub version: String,
    /// The issuers served.
    pub issuers: Vec<String>,
    /// Certificates recorded.
    pub certificates: u64,
    /// Of which revoked.
    pub revoked: u64,
    /// Seconds since start.
    pub uptime_secs: u64,
}

// --- acmed ------------------------------------------------------------------

/// An external account binding key (RFC 8555 §7.3.4), as acmed's admin
/// interface shows it. `Debug` leaves the MAC key out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EabKey {
    /// The key id clients send as the binding's `kid`.
    pub key_id: String,
    /// The MAC key: only in the answer to its creation, empty otherwise.
    pub hmac_key: Vec<u8>,
    /// When it was created, Unix seconds.
    pub created_unix_secs: i64,
    /// The URL of the account it bound; empty while unbound.
    pub bound_account: String,
    /// The operator's note.
    pub note: String,
}

impl fmt::Debug for EabKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EabKey")
            .field("key_id", &self.key_id)
            .field("hmac_key", &format_args!("<{} bytes>", self.hmac_key.len()))
            .field("created_unix_secs", &self.created_unix_secs)
            .field("bound_account", &self.bound_account)
            .field("note", &self.note)
            .finish()
    }
}

/// acmed's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcmedHealth {
    /// Serving.
    pub ok: bool,
    /// acmed's version.
    pub version: String,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// ACME accounts.
    pub accounts: u64,
    /// External account binding keys, bound or not.
    pub eab_keys: u64,
    /// Whether new accounts need an external account binding.
    pub external_account_required: bool,
}

// --- ctlogd -----------------------------------------------------------------

/// A temporal shard to add to ctlogd (`CtAdmin.addShard`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtShardSpec {
    /// Its name, the URL path segment it is served under.
    pub name: String,
    /// Its log in signd (`Admin.addCtLog`); empty: `name`.
    pub signd_log: String,
    /// Start of its NotAfter window (inclusive), Unix seconds.
    pub not_after_start_unix_secs: i64,
    /// End of its NotAfter window (exclusive), Unix seconds.
    pub not_after_end_unix_secs: i64,
    /// Its description in the log list; empty: the default.
    pub description: String,
}

/// A log ctlogd serves, as its admin interface shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtShard {
    /// Its name.
    pub name: String,
    /// Its log ID (SHA-256 of the public key).
    pub log_id: Vec<u8>,
    /// Its public key, DER SubjectPublicKeyInfo.
    pub public_key: Vec<u8>,
    /// Its NotAfter window, Unix seconds `[start, end)`, if it is a temporal shard.
    pub window: Option<(i64, i64)>,
    /// Its submission and monitoring prefix URL, ending in `/`.
    pub url: String,
    /// The size of its published tree.
    pub tree_size: u64,
    /// Added through the admin interface (kept in ctlogd's store), not configured.
    pub added_at_run_time: bool,
    /// Its `log.v3.json`: a log-list v3 entry, JSON.
    pub log_list_entry: String,
}

/// ctlogd's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtlogdHealth {
    /// Serving.
    pub ok: bool,
    /// ctlogd's version.
    pub version: String,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Logs served.
    pub logs: u32,
}

// --- tokend -----------------------------------------------------------------

/// A registered OAuth 2.0 client, as tokend's admin interface shows it.
/// `Debug` leaves the secret out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OauthClient {
    /// The client id: `[A-Za-z0-9._-]{1,64}` (empty when creating: tokend picks one).
    pub client_id: String,
    /// A display name.
    pub name: String,
    /// How it authenticates: `client_secret_basic`, `client_secret_post`,
    /// `client_secret_jwt`, `private_key_jwt`, `tls_client_auth`,
    /// `self_signed_tls_client_auth` or `none`.
    pub auth_method: String,
    /// The client secret: only in the answers of a create and a secret
    /// rotation, empty otherwise.
    pub secret: String,
    /// The client's public keys (`private_key_jwt`, `self_signed_tls_client_auth`),
    /// a JWKS document or its URL; empty otherwise.
    pub jwks: String,
    /// Scopes it may ask for.
    pub scopes: Vec<String>,
    /// Audiences its tokens may name; the first is the default.
    pub audiences: Vec<String>,
    /// Grant types it may use (empty when creating: `client_credentials`).
    pub grant_types: Vec<String>,
    /// When it was registered, Unix seconds.
    pub created_unix_secs: i64,
    /// When its secret was last set, Unix seconds; 0 without a secret.
    pub secret_set_unix_secs: i64,
    /// Where the authorization endpoint may send the browser back (compared
    /// exactly); at least one with `authorization_code`, none without it.
    pub redirect_uris: Vec<String>,
    /// Where RP-initiated logout may send the browser afterwards.
    pub post_logout_redirect_uris: Vec<String>,
    /// `tls_client_auth` (RFC 8705 §2.1.2): the subject DN the client's certificate
    /// must have, an RFC 4514 string; empty: not this one. At most one of the five
    /// `tls_*` fields is set, exactly one for `tls_client_auth`.
    pub tls_subject_dn: String,
    /// `tls_client_auth`: a dNSName SAN entry the certificate must hold.
    pub tls_san_dns: String,
    /// `tls_client_auth`: a uniformResourceIdentifier SAN entry.
    pub tls_san_uri: String,
    /// `tls_client_auth`: an iPAddress SAN entry, textual.
    pub tls_san_ip: String,
    /// `tls_client_auth`: an rfc822Name SAN entry.
    pub tls_san_email: String,
}

impl fmt::Debug for OauthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OauthClient")
            .field("client_id", &self.client_id)
            .field("name", &self.name)
            .field("auth_method", &self.auth_method)
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .field("jwks", &self.jwks)
            .field("scopes", &self.scopes)
            .field("audiences", &self.audiences)
            .field("grant_types", &self.grant_types)
            .field("created_unix_secs", &self.created_unix_secs)
            .field("secret_set_unix_secs", &self.secret_set_unix_secs)
            .field("redirect_uris", &self.redirect_uris)
            .field("post_logout_redirect_uris", &self.post_logout_redirect_uris)
            .field("tls_subject_dn", &self.tls_subject_dn)
            .field("tls_san_dns", &self.tls_san_dns)
            .field("tls_san_uri", &self.tls_san_uri)
            .field("tls_san_ip", &self.tls_san_ip)
            .field("tls_san_email", &self.tls_san_email)
            .finish()
    }
}

/// A local user of tokend, as its admin interface shows it. `Debug` leaves
/// the password out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OauthUser {
    /// The user name: `[A-Za-z0-9._@-]{1,64}`, not starting with `-`.
    pub user_name: String,
    /// A display name (OIDC `name`); empty: none.
    pub name: String,
    /// An email address (OIDC `email`); empty: none.
    pub email: String,
    /// Groups (OIDC `groups`).
    pub groups: Vec<String>,
    /// The password: only in the requests of a create and a password change,
    /// empty in every answer.
    pub password: String,
    /// When the user was created, Unix seconds.
    pub created_unix_secs: i64,
    /// When the password was last set, Unix seconds.
    pub password_set_unix_secs: i64,
    /// A disabled user cannot sign in.
    pub disabled: bool,
}

impl fmt::Debug for OauthUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OauthUser")
            .field("user_name", &self.user_name)
            .field("name", &self.name)
            .field("email", &self.email)
            .field("groups", &self.groups)
            .field("password", &format_args!("<{} bytes>", self.password.len()))
            .field("created_unix_secs", &self.created_unix_secs)
            .field("password_set_unix_secs", &self.password_set_unix_secs)
            .field("disabled", &self.disabled)
            .finish()
    }
}

/// A token signing key tokend publishes (the key itself is in signd).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenKey {
    /// signd's key id, the JWS `kid`.
    pub key_id: String,
    /// Its JOSE `alg`.
    pub alg: String,
    /// When tokend first listed it, Unix seconds.
    pub first_seen_unix_secs: i64,
    /// When a newer key took over signing, Unix seconds; 0: not superseded.
    pub superseded_unix_secs: i64,
    /// Whether it signs new tokens.
    pub signing: bool,
}

/// tokend's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokendHealth {
    /// Serving.
    pub ok: bool,
    /// tokend's version.
    pub version: String,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Registered clients.
    pub clients: u64,
    /// The key new tokens are signed with; empty when there is none yet.
    pub signing_key: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn errors_of_the_plain_types_cross_ipc_typed() {
        let e = IpcError::from("nope".parse::<KeyAlgorithm>().unwrap_err());
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.detail.starts_with("unknown key algorithm `nope` (expected one of ecdsa-p256, "), "{e}");
        let e = IpcError::from(KeyAlgorithm::Ed25519.resolve(SignatureScheme::EcdsaSha256).unwrap_err());
        assert_eq!(e.kind, ErrorKind::WrongAlgorithm);
        assert_eq!(e.detail, "scheme ecdsa-sha256 cannot be used with a ed25519 key");
        assert_eq!("hold".parse::<RevocationReason>().unwrap_err().kind, ErrorKind::InvalidArgument);
    }
}
