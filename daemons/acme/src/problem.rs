//! Problem documents (RFC 7807 as profiled by RFC 8555 §6.7), served as
//! `application/problem+json`.
//!
//! [`ProblemType`] lists every `urn:ietf:params:acme:error:*` type in the IANA
//! "ACME Error Types" registry that Signet may send (RFC 8555, RFC 8739, RFC 9773
//! and the profiles extension), each with the HTTP status Signet answers it
//! with. A type this crate does not know still round-trips as
//! [`ProblemType::Other`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::identifier::Identifier;

/// The media type of a problem document.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// The URN prefix every ACME error type shares.
pub const ACME_ERROR_PREFIX: &str = "urn:ietf:params:acme:error:";

macro_rules! problem_types {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $status:literal; )*) => {
        /// An ACME error type (`urn:ietf:params:acme:error:<name>`).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ProblemType {
            $( $(#[$doc])* $variant, )*
            /// A type this crate does not know: the whole `type` URI, kept as sent.
            Other(String),
        }

        impl ProblemType {
            /// Every known type, in registry order.
            pub const ALL: &'static [ProblemType] = &[$(ProblemType::$variant),*];

            /// The short name after `urn:ietf:params:acme:error:` (`None` for [`ProblemType::Other`]).
            pub fn name(&self) -> Option<&'static str> {
                match self {
                    $( ProblemType::$variant => Some($name), )*
                    ProblemType::Other(_) => None,
                }
            }

            /// The HTTP status Signet sends with this type (400 for unknown types).
            pub fn http_status(&self) -> u16 {
                match self {
                    $( ProblemType::$variant => $status, )*
                    ProblemType::Other(_) => 400,
                }
            }

            fn from_name(name: &str) -> Option<ProblemType> {
                match name {
                    $( $name => Some(ProblemType::$variant), )*
                    _ => None,
                }
            }
        }
    };
}

problem_types! {
    /// The request specified an account that does not exist.
    AccountDoesNotExist = "accountDoesNotExist", 400;
    /// The request specified a certificate to be revoked that has already been revoked.
    AlreadyRevoked = "alreadyRevoked", 400;
    /// The order's `replaces` names a certificate already replaced (RFC 9773).
    AlreadyReplaced = "alreadyReplaced", 409;
    /// The CSR is unacceptable (e.g., due to a short key).
    BadCsr = "badCSR", 400;
    /// The client sent an unacceptable anti-replay nonce.
    BadNonce = "badNonce", 400;
    /// The JWS was signed by a public key the server does not support.
    BadPublicKey = "badPublicKey", 400;
    /// The revocation reason provided is not allowed by the server.
    BadRevocationReason = "badRevocationReason", 400;
    /// The JWS was signed with an algorithm the server does not support; the
    /// problem carries `algorithms`.
    BadSignatureAlgorithm = "badSignatureAlgorithm", 400;
    /// Certification Authority Authorization (CAA) records forbid the CA from issuing.
    Caa = "caa", 403;
    /// Specific error conditions are indicated in the `subproblems` array.
    Compound = "compound", 400;
    /// The server could not connect to the validation target.
    Connection = "connection", 400;
    /// There was a problem with a DNS query during identifier validation.
    Dns = "dns", 400;
    /// The request must include a value for the `externalAccountBinding` field.
    ExternalAccountRequired = "externalAccountRequired", 403;
    /// Response received didn't match the challenge's requirements.
    IncorrectResponse = "incorrectResponse", 403;
    /// A contact URL for an account was invalid.
    InvalidContact = "invalidContact", 400;
    /// The requested profile is not one the server offers (ACME profiles extension).
    InvalidProfile = "invalidProfile", 400;
    /// The request message was malformed.
    Malformed = "malformed", 400;
    /// The request attempted to finalize an order that is not ready to be finalized.
    OrderNotReady = "orderNotReady", 403;
    /// The request exceeds a rate limit.
    RateLimited = "rateLimited", 429;
    /// The server will not issue certificates for the identifier.
    RejectedIdentifier = "rejectedIdentifier", 400;
    /// The server experienced an internal error.
    ServerInternal = "serverInternal", 500;
    /// The server received a TLS error during validation.
    Tls = "tls", 400;
    /// The client lacks sufficient authorization.
    Unauthorized = "unauthorized", 403;
    /// A contact URL for an account used an unsupported protocol scheme.
    UnsupportedContact = "unsupportedContact", 400;
    /// An identifier is of an unsupported type.
    UnsupportedIdentifier = "unsupportedIdentifier", 400;
    /// Visit the `instance` URL and take actions specified there.
    UserActionRequired = "userActionRequired", 403;
    /// The short-term certificate's auto-renewal was canceled (RFC 8739).
    AutoRenewalCanceled = "autoRenewalCanceled", 403;
    /// The short-term certificate's auto-renewal has expired (RFC 8739).
    AutoRenewalExpired = "autoRenewalExpired", 403;
    /// A cancellation of auto-renewal was not valid (RFC 8739).
    AutoRenewalCancellationInvalid = "autoRenewalCancellationInvalid", 403;
    /// Revocation of a short-term certificate is not supported (RFC 8739).
    AutoRenewalRevocationNotSupported = "autoRenewalRevocationNotSupported", 403;
}

impl ProblemType {
    /// The full `type` URI.
    pub fn uri(&self) -> String {
        match self {
            ProblemType::Other(uri) => uri.clone(),
            known => format!("{ACME_ERROR_PREFIX}{}", known.name().unwrap_or_default()),
        }
    }

    /// Parses a `type` URI; anything not a known ACME type becomes [`ProblemType::Other`].
    pub fn from_uri(uri: &str) -> ProblemType {
        uri.strip_prefix(ACME_ERROR_PREFIX)
            .and_then(ProblemType::from_name)
            .unwrap_or_else(|| ProblemType::Other(uri.to_owned()))
    }
}

impl std::fmt::Display for ProblemType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.uri())
    }
}

impl Serialize for ProblemType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.uri())
    }
}

impl<'de> Deserialize<'de> for ProblemType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let uri = String::deserialize(deserializer)?;
        Ok(ProblemType::from_uri(&uri))
    }
}

/// A problem document (RFC 8555 §6.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The error type.
    #[serde(rename = "type")]
    pub kind: ProblemType,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The HTTP status code of the response carrying this problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// A URL for the occurrence (used with `userActionRequired`, e.g. new terms of service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The supported `alg` values; present with `badSignatureAlgorithm` (RFC 8555 §6.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithms: Option<Vec<String>>,
    /// The identifier a subproblem (or an authorization's error) is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<Identifier>,
    /// One problem per identifier, for a `compound` or other multi-identifier error (§6.7.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subproblems: Vec<Problem>,
    /// How long the client should wait before trying again, in seconds: the
    /// response's `Retry-After` header (RFC 8555 §6.6), not part of the document.
    #[serde(skip)]
    pub retry_after: Option<u64>,
    /// A URL the response's `Location` header names (the account that holds a
    /// key, for a keyChange conflict, RFC 8555 §7.3.5), not part of the document.
    #[serde(skip)]
    pub location: Option<String>,
}

impl Problem {
    /// A problem of `kind` with `detail`, its `status` set from [`ProblemType::http_status`].
    pub fn new(kind: ProblemType, detail: impl Into<String>) -> Problem {
        let status = Some(kind.http_status());
        Problem {
            kind,
            detail: Some(detail.into()),
            status,
            instance: None,
            algorithms: None,
            identifier: None,
            subproblems: Vec::new(),
            retry_after: None,
            location: None,
        }
    }

    /// The problem with a `Retry-After` of `secs` seconds.
    pub fn retry_after(mut self, secs: u64) -> Problem {
        self.retry_after = Some(secs);
        self
    }

    /// A `badSignatureAlgorithm` problem listing the supported algorithms.
    pub fn bad_signature_algorithm(detail: impl Into<String>, supported: &[&str]) -> Problem {
        Problem {
            algorithms: Some(supported.iter().map(|a| (*a).to_owned()).collect()),
            ..Problem::new(ProblemType::BadSignatureAlgorithm, detail)
        }
    }

    /// A problem about one identifier, for use as a subproblem.
    pub fn for_identifier(kind: ProblemType, detail: impl Into<String>, identifier: Identifier) -> Problem {
        Problem { identifier: Some(identifier), ..Problem::new(kind, detail) }
    }

    /// A problem made of per-identifier subproblems. With a single subproblem
    /// the outer type is that subproblem's; otherwise it is `compound`.
    pub fn with_subproblems(detail: impl Into<String>, subproblems: Vec<Problem>) -> Problem {
        let kind = match subproblems.as_slice() {
            [only] => only.kind.clone(),
            _ => ProblemType::Compound,
        };
        Problem { subproblems, ..Problem::new(kind, detail) }
    }

    /// The HTTP status to answer with: `status` if set, else the type's default.
    pub fn http_status(&self) -> u16 {
        self.status.unwrap_or_else(|| self.kind.http_status())
    }

    /// The document as JSON bytes (the body of an `application/problem+json` response).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing this struct cannot fail: all keys are strings and no
        // user-provided Serialize impl can error.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A refusal of client input: the ACME error type and a detail, optionally
/// about one identifier. The `Err` of this crate's validators (a [`Problem`]
/// is too large to return by value); it becomes a problem document with
/// [`AcmeError::problem`] or `Problem::from`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {detail}")]
pub struct AcmeError {
    /// The error type.
    pub kind: ProblemType,
    /// A human-readable explanation.
    pub detail: String,
    /// The identifier the refusal is about, if any.
    pub identifier: Option<Box<Identifier>>,
}

impl AcmeError {
    /// A refusal of `kind` with `detail`.
    pub fn new(kind: ProblemType, detail: impl Into<String>) -> AcmeError {
        AcmeError { kind, detail: detail.into(), identifier: None }
    }

    /// The problem document (with `identifier`, for use as a subproblem).
    pub fn problem(&self) -> Problem {
        Problem {
            identifier: self.identifier.as_deref().cloned(),
            ..Problem::new(self.kind.clone(), self.detail.clone())
        }
    }
}

impl From<AcmeError> for Problem {
    fn from(e: AcmeError) -> Problem {
        e.problem()
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statuses_match_signet_policy() {
        assert_eq!(ProblemType::BadNonce.http_status(), 400);
        assert_eq!(ProblemType::Unauthorized.http_status(), 403);
        assert_eq!(ProblemType::RateLimited.http_status(), 429);
        assert_eq!(ProblemType::ServerInternal.http_status(), 500);
        assert_eq!(ProblemType::OrderNotReady.http_status(), 403);
        assert_eq!(ProblemType::AccountDoesNotExist.http_status(), 400);
        assert_eq!(ProblemType::Malformed.http_status(), 400);
        assert_eq!(ProblemType::BadSignatureAlgorithm.http_status(), 400);
        assert_eq!(ProblemType::AlreadyReplaced.http_status(), 409);
    }

    #[test]
    fn every_type_round_trips_through_its_uri() {
        for kind in ProblemType::ALL {
            let uri = kind.uri();
            assert!(uri.starts_with(ACME_ERROR_PREFIX));
            assert_eq!(&ProblemType::from_uri(&uri), kind);
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(&serde_json::from_str::<ProblemType>(&json).unwrap(), kind);
        }
        assert_eq!(ProblemType::ALL.len(), 30);
        assert_eq!(ProblemType::BadCsr.uri(), "urn:ietf:params:acme:error:badCSR");
    }

    #[test]
    fn unknown_types_are_kept() {
        let kind = ProblemType::from_uri("urn:ietf:params:acme:error:somethingNew");
        assert_eq!(kind, ProblemType::Other("urn:ietf:params:acme:error:somethingNew".into()));
        assert_eq!(kind.uri(), "urn:ietf:params:acme:error:somethingNew");
        assert_eq!(kind.http_status(), 400);
        assert!(matches!(ProblemType::from_uri("about:blank"), ProblemType::Other(_)));
    }

    #[test]
    fn serializes_like_rfc8555_example() {
        let p = Problem::with_subproblems(
            "Some of the identifiers requested were rejected",
            vec![
                Problem::for_identifier(
                    ProblemType::Malformed,
                    "Invalid underscore in DNS name \"_example.org\"",
                    Identifier::dns("_example.org"),
                ),
                Problem::for_identifier(
                    ProblemType::RejectedIdentifier,
                    "This CA will not issue for \"example.net\"",
                    Identifier::dns("example.net"),
                ),
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&p.to_json()).unwrap();
        assert_eq!(
            v,
            json!({
                "type": "urn:ietf:params:acme:error:compound",
                "detail": "Some of the identifiers requested were rejected",
                "status": 400,
                "subproblems": [
                    {"type": "urn:ietf:params:acme:error:malformed", "status": 400,
                     "detail": "Invalid underscore in DNS name \"_example.org\"",
                     "identifier": {"type": "dns", "value": "_example.org"}},
                    {"type": "urn:ietf:params:acme:error:rejectedIdentifier", "status": 400,
                     "detail": "This CA will not issue for \"example.net\"",
                     "identifier": {"type": "dns", "value": "example.net"}}
                ]
            })
        );
        let back: Problem = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn single_subproblem_lends_its_type() {
        let p = Problem::with_subproblems("x", vec![Problem::new(ProblemType::Caa, "no")]);
        assert_eq!(p.kind, ProblemType::Caa);
        assert_eq!(p.http_status(), 403);
    }

    #[test]
    fn bad_signature_algorithm_lists_algorithms() {
        let p = Problem::bad_signature_algorithm("no", &["ES256", "EdDSA"]);
        let v: serde_json::Value = serde_json::from_slice(&p.to_json()).unwrap();
        assert_eq!(v["algorithms"], json!(["ES256", "EdDSA"]));
        assert_eq!(v["status"], json!(400));
        assert_eq!(p.to_string(), "urn:ietf:params:acme:error:badSignatureAlgorithm: no");
    }

    #[test]
    fn minimal_document_parses() {
        let p: Problem = serde_json::from_str(r#"{"type":"urn:ietf:params:acme:error:badNonce"}"#).unwrap();
        assert_eq!(p.kind, ProblemType::BadNonce);
        assert_eq!(p.http_status(), 400);
        assert!(p.subproblems.is_empty());
    }
}
