//! The ACME resources and request payloads (RFC 8555 §7.1, RFC 8738, RFC 9773,
//! the profiles extension and dns-persist-01) as serde types.
//!
//! Field names follow the JSON (camelCase); timestamps are RFC 3339 and become
//! [`OffsetDateTime`]. Unknown members are ignored, as RFC 8555 §7.1 asks of
//! clients and as lets servers accept future fields. Types that name a kind of
//! thing (identifier and challenge types) keep unknown values as `Other`, so
//! the caller can answer `unsupportedIdentifier` rather than `malformed`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use time::OffsetDateTime;

use crate::identifier::string_enum;
pub use crate::identifier::{Identifier, IdentifierType};
use crate::jws::Jwk;
use crate::problem::{AcmeError, Problem, ProblemType};

string_enum! {
    /// A challenge type.
    ChallengeType {
        /// HTTP challenge (RFC 8555 §8.3).
        Http01 = "http-01",
        /// DNS challenge (RFC 8555 §8.4).
        Dns01 = "dns-01",
        /// TLS with ALPN challenge (RFC 8737).
        TlsAlpn01 = "tls-alpn-01",
        /// Persistent DNS record challenge (draft-ietf-acme-dns-persist).
        DnsPersist01 = "dns-persist-01",
    }
}

/// The directory object (RFC 8555 §7.1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Directory {
    /// The newNonce URL.
    pub new_nonce: String,
    /// The newAccount URL.
    pub new_account: String,
    /// The newOrder URL.
    pub new_order: String,
    /// The newAuthz URL, for servers offering pre-authorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_authz: Option<String>,
    /// The revokeCert URL.
    pub revoke_cert: String,
    /// The keyChange URL.
    pub key_change: String,
    /// The renewalInfo URL (RFC 9773).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal_info: Option<String>,
    /// Metadata about the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<DirectoryMeta>,
}

/// The directory's `meta` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryMeta {
    /// The current terms of service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms_of_service: Option<String>,
    /// A web page about the CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website: Option<String>,
    /// The CAA issuer domain names this CA recognises as itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caa_identities: Vec<String>,
    /// Whether newAccount requires an external account binding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external_account_required: bool,
    /// The certificate profiles offered: name → human-readable description.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, String>,
}

/// An account's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatus {
    /// Usable.
    Valid,
    /// Deactivated by the client.
    Deactivated,
    /// Revoked by the server.
    Revoked,
}

/// An account object (RFC 8555 §7.1.2), also the newAccount and account-update payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The status (server → client; a client may send `deactivated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AccountStatus>,
    /// Contact URLs (`mailto:` for Signet; see [`crate::validate::contact`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<Vec<String>>,
    /// The client agrees to the terms of service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms_of_service_agreed: Option<bool>,
    /// newAccount only: look up the existing account for this key, create none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_return_existing: Option<bool>,
    /// newAccount only: the external account binding JWS (see [`crate::jws::ExternalAccountBinding`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_account_binding: Option<Value>,
    /// The URL of the account's order list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders: Option<String>,
}

/// An order's status (RFC 8555 §7.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Authorizations are pending.
    Pending,
    /// All authorizations are valid; the order can be finalized.
    Ready,
    /// The certificate is being issued.
    Processing,
    /// The certificate has been issued.
    Valid,
    /// The order failed or expired.
    Invalid,
}

/// A newOrder payload (RFC 8555 §7.4, RFC 9773 `replaces`, profiles `profile`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewOrder {
    /// The identifiers the certificate is for.
    pub identifiers: Vec<Identifier>,
    /// The requested notBefore.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub not_before: Option<OffsetDateTime>,
    /// The requested notAfter.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub not_after: Option<OffsetDateTime>,
    /// The requested profile (a key of the directory's `meta.profiles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The ARI certificate ID of the certificate this order replaces (RFC 9773 §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

/// An order object (RFC 8555 §7.1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// The status.
    pub status: OrderStatus,
    /// When the server gives up on a pending or ready order.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub expires: Option<OffsetDateTime>,
    /// The identifiers.
    pub identifiers: Vec<Identifier>,
    /// The profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The certificate this order replaces (RFC 9773).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The requested notBefore.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub not_before: Option<OffsetDateTime>,
    /// The requested notAfter.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub not_after: Option<OffsetDateTime>,
    /// Why the order became invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
    /// The authorization URLs.
    pub authorizations: Vec<String>,
    /// The finalize URL.
    pub finalize: String,
    /// The certificate URL, once issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

/// An authorization's status (RFC 8555 §7.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthorizationStatus {
    /// Awaiting a challenge.
    Pending,
    /// A challenge succeeded.
    Valid,
    /// A challenge failed.
    Invalid,
    /// Deactivated by the client.
    Deactivated,
    /// Expired.
    Expired,
    /// Revoked by the server.
    Revoked,
}

/// An authorization object (RFC 8555 §7.1.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authorization {
    /// The identifier (for a wildcard, without the `*.`).
    pub identifier: Identifier,
    /// The status.
    pub status: AuthorizationStatus,
    /// When it expires (required once valid).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub expires: Option<OffsetDateTime>,
    /// The challenges.
    pub challenges: Vec<Challenge>,
    /// Present and true for a wildcard authorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wildcard: Option<bool>,
}

/// A challenge's status (RFC 8555 §7.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChallengeStatus {
    /// Not yet attempted.
    Pending,
    /// Being validated.
    Processing,
    /// Validated.
    Valid,
    /// Validation failed.
    Invalid,
}

/// A challenge object (RFC 8555 §8, RFC 8737, dns-persist-01).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Challenge {
    /// The type.
    #[serde(rename = "type")]
    pub kind: ChallengeType,
    /// The challenge URL.
    pub url: String,
    /// The status.
    pub status: ChallengeStatus,
    /// When the server validated it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "time::serde::rfc3339::option")]
    pub validated: Option<OffsetDateTime>,
    /// Why validation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
    /// The token (http-01, dns-01, tls-alpn-01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The issuer domain names a dns-persist-01 record may name.
    #[serde(rename = "issuer-domain-names", default, skip_serializing_if = "Option::is_none")]
    pub issuer_domain_names: Option<Vec<String>>,
}

/// The finalize payload (RFC 8555 §7.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finalize {
    /// The CSR, base64url DER.
    pub csr: String,
}

impl Finalize {
    /// The CSR's DER (its parsing is signet-ca's).
    pub fn csr_der(&self) -> Result<Vec<u8>, AcmeError> {
        crate::jws::b64_decode(&self.csr)
            .map_err(|_| AcmeError::new(ProblemType::Malformed, "csr is not base64url without padding"))
    }
}

/// The revokeCert payload (RFC 8555 §7.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The certificate, base64url DER.
    pub certificate: String,
    /// The CRL reason code (RFC 5280 §5.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<u8>,
}

impl Revocation {
    /// The certificate's DER.
    pub fn certificate_der(&self) -> Result<Vec<u8>, AcmeError> {
        crate::jws::b64_decode(&self.certificate)
            .map_err(|_| AcmeError::new(ProblemType::Malformed, "certificate is not base64url without padding"))
    }

    /// The reason code, refused with `badRevocationReason` unless RFC 5280
    /// defines it (0–10 but 7); absent means 0 (unspecified). Which of these a
    /// CA accepts from subscribers is its own policy.
    pub fn reason_code(&self) -> Result<u8, AcmeError> {
        match self.reason.unwrap_or(0) {
            7 | 11.. => Err(AcmeError::new(ProblemType::BadRevocationReason, "unknown revocation reason code")),
            code => Ok(code),
        }
    }
}

/// The keyChange inner payload (RFC 8555 §7.3.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyChange {
    /// The account URL.
    pub account: String,
    /// The account's current key.
    pub old_key: Jwk,
}

/// A renewalInfo response (RFC 9773 §4.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewalInfo {
    /// When the client should renew.
    #[serde(rename = "suggestedWindow")]
    pub suggested_window: SuggestedWindow,
    /// A page explaining the window (e.g. an incident report).
    #[serde(rename = "explanationURL", default, skip_serializing_if = "Option::is_none")]
    pub explanation_url: Option<String>,
}

/// The renewal window of a [`RenewalInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuggestedWindow {
    /// The window's start.
    #[serde(with = "time::serde::rfc3339")]
    pub start: OffsetDateTime,
    /// The window's end (after `start`).
    #[serde(with = "time::serde::rfc3339")]
    pub end: OffsetDateTime,
}

/// The ARI certificate identifier (RFC 9773 §4.1): `base64url(AKI keyIdentifier)
/// "." base64url(serial)`, the serial as the DER INTEGER's content octets.
pub fn renewal_cert_id(authority_key_id: &[u8], serial: &[u8]) -> String {
    format!("{}.{}", crate::jws::b64_encode(authority_key_id), crate::jws::b64_encode(serial))
}

/// Splits an ARI certificate identifier into (AKI keyIdentifier, serial);
/// `malformed` unless both halves are non-empty base64url without padding.
pub fn parse_renewal_cert_id(id: &str) -> Result<(Vec<u8>, Vec<u8>), AcmeError> {
    let bad = || AcmeError::new(ProblemType::Malformed, "not an ARI certificate identifier");
    let (aki, serial) = id.split_once('.').ok_or_else(bad)?;
    let aki = crate::jws::b64_decode(aki).map_err(|_| bad())?;
    let serial = crate::jws::b64_decode(serial).map_err(|_| bad())?;
    if aki.is_empty() || serial.is_empty() {
        return Err(bad());
    }
    Ok((aki, serial))
}

#[cfg(test)]
#[path = "types_tests.rs"]
mod tests;
