//! The CA core of Signet: certificate, CSR, CRL and OCSP logic as pure functions.
//!
//! Nothing here does I/O or holds a private key. Every builder returns the DER that
//! is to be signed (a `TBSCertificate`, `TBSCertList` or OCSP `ResponseData`); the
//! signature comes from outside (signd), and an `assemble_*` function wraps the
//! DER and the signature into the final object. Time and randomness are injected:
//! builders take `now: SystemTime` and an [`rand_core::RngCore`].
//!
//! signd's issuer role uses the validators in [`validate`] to refuse anything that is
//! not a well-formed end-entity certificate, CRL or OCSP response of its own CA.
//!
//! ASN.1 comes from RustCrypto's `der` / `x509-cert` / `x509-ocsp` / `spki` /
//! `const-oid`, all on the der 0.7 line (x509-ocsp 0.2 requires it).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod alg;
pub mod cert;
pub mod crl;
pub mod csr;
mod error;
pub mod ocsp;
pub mod ocsp_check;
pub mod profile;
mod time;
pub mod validate;

pub use alg::{key_algorithm_of_spki, signature_algorithm, subject_key_identifier};
pub use cert::{
    assemble_certificate, build_intermediate_tbs, build_leaf_tbs, build_ocsp_responder_tbs, build_root_tbs, CaRequest,
    Issuer, LeafRequest, ResponderRequest, SanEntry,
};
pub use crl::{assemble_crl, build_tbs_crl, CrlParams, RevokedEntry};
pub use csr::{parse_csr, ParsedCsr};
pub use error::CaError;
pub use ocsp::{
    assemble_ocsp_response, build_multi_response_data, build_response_data, ocsp_error_response, parse_ocsp_request,
    CertIdentity, CertStatusInfo, OcspErrorStatus, OcspHash, OcspIssuer, OcspRequest, OcspResponseParams, Responder,
    SingleResponseParams, MAX_OCSP_REQUESTS,
};
pub use profile::{Eku, KeyUsageBit, Profile};
pub use validate::{
    validate_end_entity_tbs, validate_ocsp_response_data, validate_tbs_crl, IssuerPolicy, ParsedResponseData,
    ParsedSingleResponse, ParsedTbs, ParsedTbsCrl,
};

/// Re-exported so callers name the same types this crate uses.
pub use der;
pub use signet_types::{KeyAlgorithm, SignatureScheme};
pub use x509_cert;
pub use x509_cert::ext::pkix::CrlReason;
pub use x509_cert::name::Name;
pub use x509_ocsp;

#[cfg(test)]
mod interop_tests;
#[cfg(test)]
mod testutil;
