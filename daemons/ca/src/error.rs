//! The one error type of the crate: every refusal is its own variant.

use std::time::Duration;

use const_oid::ObjectIdentifier;

/// Why building, parsing or validating failed.
///
/// Variants are grouped by stage; each refusal of the issuer-role validators is a
/// distinct variant so signd can report (and audit) exactly what was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    // ----- encoding and input shape -----
    /// DER encoding of something we built failed (a bug or an out-of-range value).
    #[error("DER encoding failed: {0}")]
    Encode(der::Error),
    /// Input that should be DER of `what` did not decode.
    #[error("malformed {what}: {source}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// The decoder's error.
        source: der::Error,
    },
    /// A time cannot be represented in X.509 (before 1970 or after 9999).
    #[error("time out of range for X.509")]
    TimeOutOfRange,

    // ----- algorithms and keys -----
    /// `SignatureScheme::Default` must be resolved against the key first.
    #[error("signature scheme `default` must be resolved to a concrete scheme")]
    UnresolvedScheme,
    /// The signature scheme cannot be used with the key algorithm.
    #[error("scheme {scheme} cannot be used with a {key} key")]
    SchemeKeyMismatch {
        /// The scheme.
        scheme: signet_types::SignatureScheme,
        /// The key algorithm.
        key: signet_types::KeyAlgorithm,
    },
    /// The subject public key is not one of signd's algorithms.
    #[error("unsupported public key: {0}")]
    UnsupportedKey(String),
    /// The profile does not allow the subject key's algorithm.
    #[error("profile `{profile}` does not allow {algorithm} subject keys")]
    KeyAlgorithmNotAllowed {
        /// Profile name.
        profile: String,
        /// The subject key's algorithm.
        algorithm: signet_types::KeyAlgorithm,
    },

    // ----- profiles and requests -----
    /// The profile itself is inconsistent.
    #[error("invalid profile `{profile}`: {reason}")]
    InvalidProfile {
        /// Profile name.
        profile: String,
        /// What is wrong.
        reason: String,
    },
    /// A SAN of a kind the profile does not allow.
    #[error("profile `{profile}` does not allow {kind} SANs")]
    SanKindNotAllowed {
        /// Profile name.
        profile: String,
        /// `DNS`, `IP` or `email`.
        kind: &'static str,
    },
    /// A SAN value that is not well formed.
    #[error("invalid SAN {0:?}")]
    InvalidSan(String),
    /// A SAN type the CA does not issue (URI, otherName, ...).
    #[error("unsupported SAN type {0}")]
    UnsupportedSan(&'static str),
    /// Neither a subject DN nor any SAN: the certificate would name nobody.
    #[error("certificate would have an empty subject and no SANs")]
    NoSubjectOrSan,
    /// An EKU outside the allowed set.
    #[error("extended key usage {0} is not allowed")]
    EkuNotAllowed(ObjectIdentifier),
    /// The profile's CRL URL has a `{{shard}}` placeholder but no shard was given.
    #[error("the CRL URL is partitioned (`{{shard}}`) but the request names no shard")]
    CrlShardRequired,
    /// A serial number that is zero, negative, or longer than 20 octets.
    #[error("bad serial number: {0}")]
    BadSerial(&'static str),
    /// A validity period of zero length or with notAfter before notBefore.
    #[error("notAfter is not after notBefore")]
    ValidityInverted,

    // ----- CSR -----
    /// The PEM armour of a CSR is broken.
    #[error("CSR PEM: {0}")]
    CsrPem(String),
    /// The CSR's version is not v1 (0).
    #[error("CSR version is not v1")]
    CsrVersion,
    /// The CSR's self-signature does not verify (or OpenSSL cannot parse it).
    #[error("CSR signature does not verify: {0}")]
    CsrSignature(String),
    /// The extensionRequest attribute is malformed or repeated.
    #[error("CSR extensionRequest: {0}")]
    CsrExtensionRequest(String),

    // ----- issuer-role validation (certificates) -----
    /// The TBSCertificate is not version 3.
    #[error("TBSCertificate is not X.509 v3")]
    NotV3,
    /// issuerUniqueID / subjectUniqueID are present.
    #[error("unique identifiers are not allowed")]
    UniqueIdPresent,
    /// The issuer name is not the CA's subject.
    #[error("issuer name does not match the CA's subject")]
    IssuerNameMismatch,
    /// The (inner) signature algorithm does not match the CA key and scheme.
    #[error("signature algorithm does not match the CA key and scheme")]
    SignatureAlgorithmMismatch,
    /// basicConstraints says CA:TRUE.
    #[error("basicConstraints CA:TRUE is not allowed for an end-entity certificate")]
    CaCertificateRefused,
    /// keyUsage has keyCertSign or cRLSign.
    #[error("keyUsage keyCertSign/cRLSign is not allowed for an end-entity certificate")]
    ForbiddenKeyUsage,
    /// The validity period is longer than the profile allows.
    #[error("validity {requested:?} exceeds the maximum {max:?}")]
    ValidityTooLong {
        /// The TBS's validity (inclusive).
        requested: Duration,
        /// The policy maximum.
        max: Duration,
    },
    /// notBefore is further in the past than the allowed backdating.
    #[error("notBefore is {0:?} in the past, more than allowed")]
    NotBeforeTooOld(Duration),
    /// notBefore is further in the future than the allowed skew.
    #[error("notBefore is {0:?} in the future, more than allowed")]
    NotBeforeInFuture(Duration),
    /// No extendedKeyUsage extension.
    #[error("extendedKeyUsage is missing")]
    MissingEku,
    /// No authorityKeyIdentifier with a keyIdentifier.
    #[error("authorityKeyIdentifier is missing")]
    MissingAuthorityKeyId,
    /// The authorityKeyIdentifier is not the CA's subjectKeyIdentifier.
    #[error("authorityKeyIdentifier does not match the CA's subjectKeyIdentifier")]
    AuthorityKeyIdMismatch,
    /// An extension appears twice.
    #[error("duplicate extension {0}")]
    DuplicateExtension(ObjectIdentifier),
    /// An extension that an end-entity certificate from this CA never carries.
    #[error("extension {0} is not allowed")]
    ForbiddenExtension(ObjectIdentifier),
    /// A critical extension the validator does not know.
    #[error("unknown critical extension {0}")]
    UnknownCriticalExtension(ObjectIdentifier),
    /// An empty subject needs a critical subjectAltName (RFC 5280 4.2.1.6).
    #[error("empty subject requires a critical subjectAltName")]
    EmptySubjectWithoutCriticalSan,
    /// An extension whose value does not decode.
    #[error("malformed extension {oid}: {source}")]
    MalformedExtension {
        /// The extension's OID.
        oid: ObjectIdentifier,
        /// The decoder's error.
        source: der::Error,
    },

    // ----- issuer-role validation (CRLs) -----
    /// The TBSCertList is not version 2.
    #[error("TBSCertList is not v2")]
    CrlNotV2,
    /// The CRL has no cRLNumber extension.
    #[error("CRL has no cRLNumber")]
    CrlMissingNumber,
    /// nextUpdate is missing or not after thisUpdate.
    #[error("CRL nextUpdate is missing or not after thisUpdate")]
    CrlBadNextUpdate,
    /// An entry with reason removeFromCRL in a CRL that is not a delta CRL
    /// (RFC 5280 5.3.1: that reason is for delta CRLs only).
    #[error("removeFromCRL entries belong in delta CRLs only (RFC 5280 5.3.1)")]
    CrlRemoveFromCrlOutsideDelta,

    // ----- OCSP -----
    /// The OCSPRequest has no Request.
    #[error("OCSP request lists no certificate")]
    OcspNoRequest,
    /// More certificates asked about than one request may list
    /// ([`MAX_OCSP_REQUESTS`](crate::ocsp::MAX_OCSP_REQUESTS)).
    #[error("OCSP request lists {0} certificates; at most {max} are answered in one request", max = crate::ocsp::MAX_OCSP_REQUESTS)]
    OcspTooManyRequests(usize),
    /// A CertID hash algorithm other than SHA-1 or SHA-256.
    #[error("OCSP CertID hash algorithm {0} is not supported")]
    OcspUnsupportedHash(ObjectIdentifier),
    /// A CertID whose hashes have the wrong length for its algorithm.
    #[error("OCSP CertID hash has the wrong length")]
    OcspBadCertIdHash,
    /// The nonce extension is malformed or not 1..=32 octets (RFC 8954).
    #[error("OCSP nonce: {0}")]
    OcspBadNonce(&'static str),
    /// The ResponseData's responderID is not the expected responder.
    #[error("OCSP responderID does not match the responder")]
    ResponderIdMismatch,
    /// The ResponseData holds no SingleResponse, or more than
    /// [`MAX_OCSP_REQUESTS`](crate::ocsp::MAX_OCSP_REQUESTS).
    #[error("OCSP ResponseData must hold 1 to {max} SingleResponses, has {0}", max = crate::ocsp::MAX_OCSP_REQUESTS)]
    OcspResponseCount(usize),
    /// A SingleResponse's CertID is not about a certificate of this CA (its
    /// issuer name or key hash is another's).
    #[error("OCSP CertID names another CA")]
    OcspForeignCertId,
}

impl CaError {
    /// Wraps a decoder error with what was being decoded.
    pub(crate) fn malformed(what: &'static str) -> impl FnOnce(der::Error) -> CaError {
        move |source| CaError::Malformed { what, source }
    }
}

impl From<der::Error> for CaError {
    /// Encoding errors only: decoding sites use [`CaError::Malformed`] with context.
    fn from(e: der::Error) -> Self {
        CaError::Encode(e)
    }
}
