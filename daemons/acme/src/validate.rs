//! Syntax checks on what clients send, and the values challenges are answered
//! with: identifiers (RFC 1123 DNS names with an optional `*.`, RFC 8738 IP
//! addresses), contact URIs, tokens, key authorizations (RFC 8555 §8.1), the
//! dns-01 TXT value (§8.4) and the tls-alpn-01 `acmeIdentifier` extension
//! (RFC 8737 §3).
//!
//! These are syntax only: which names a CA will issue for is policy (bad
//! A-labels and public suffixes in [`crate::policy`]; blocked names and CAA
//! with the caller). Each refusal is
//! the [`AcmeError`] to answer with (see [`AcmeError::problem`]).

use std::net::{IpAddr, Ipv4Addr};

use const_oid::ObjectIdentifier;
use der::asn1::OctetString;
use der::Encode as _;
use sha2::{Digest, Sha256};

use crate::jws::{b64_decode, b64_encode, Jwk};
use crate::problem::{AcmeError, ProblemType};
use crate::types::{Identifier, IdentifierType};

/// The smallest token accepted, in bytes of entropy (RFC 8555 §8.3: 128 bits).
pub const MIN_TOKEN_BYTES: usize = 16;

/// `id-pe-acmeIdentifier` (RFC 8737 §6.1): the critical extension of a
/// tls-alpn-01 validation certificate.
pub const ID_PE_ACME_IDENTIFIER: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.31");

/// The ALPN protocol name of tls-alpn-01 (RFC 8737 §6.2).
pub const ACME_TLS_ALPN_PROTOCOL: &[u8] = b"acme-tls/1";

/// Checks an identifier and returns it normalised: DNS names lowercased, IP
/// addresses in their canonical text form (RFC 5952 for IPv6). An identifier
/// type other than `dns` and `ip` is `unsupportedIdentifier`; bad syntax is
/// `malformed`. The problem names the identifier (for use as a subproblem).
pub fn identifier(id: &Identifier) -> Result<Identifier, AcmeError> {
    let normalised = match &id.kind {
        IdentifierType::Dns => dns_name(&id.value).map(Identifier::dns),
        IdentifierType::Ip => ip_address(&id.value).map(Identifier::ip),
        other => Err(AcmeError::new(
            ProblemType::UnsupportedIdentifier,
            format!("identifier type {other:?} is not supported"),
        )),
    };
    normalised.map_err(|e| AcmeError { identifier: Some(Box::new(id.clone())), ..e })
}

/// Checks a DNS name (RFC 1123 §2.1 host name syntax, A-labels only, no
/// trailing dot, optionally `*.` followed by a name) and lowercases it.
pub fn dns_name(name: &str) -> Result<String, AcmeError> {
    let bad = |why: &str| AcmeError::new(ProblemType::Malformed, format!("DNS name {name:?}: {why}"));
    if !name.is_ascii() {
        return Err(bad("not ASCII (use the xn-- A-label form)"));
    }
    let lower = name.to_ascii_lowercase();
    let base = lower.strip_prefix("*.").unwrap_or(&lower);
    if base.is_empty() {
        return Err(bad("empty"));
    }
    if base.len() > 253 {
        return Err(bad("longer than 253 characters"));
    }
    if base.ends_with('.') {
        return Err(bad("has a trailing dot"));
    }
    for label in base.split('.') {
        if label.is_empty() {
            return Err(bad("has an empty label"));
        }
        if label.len() > 63 {
            return Err(bad("has a label longer than 63 characters"));
        }
        if label.contains('*') {
            return Err(bad("a wildcard is allowed only as the whole first label"));
        }
        if !label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(bad("has a character other than a letter, digit or hyphen"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad("has a label that starts or ends with a hyphen"));
        }
    }
    // RFC 1123 §2.1: a host name must not look like a dotted-decimal address;
    // an all-numeric top-level label is never a name (RFC 3696 §2).
    if base.parse::<Ipv4Addr>().is_ok()
        || base.rsplit('.').next().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("looks like an IP address (use an \"ip\" identifier)"));
    }
    Ok(lower)
}

/// Checks an IP address identifier value (RFC 8738 §3) and returns its
/// canonical form: dotted decimal without leading zeros, or RFC 5952 IPv6.
/// Zone identifiers and prefixes are refused.
pub fn ip_address(value: &str) -> Result<String, AcmeError> {
    value
        .parse::<IpAddr>()
        .map(|ip| ip.to_string())
        .map_err(|_| AcmeError::new(ProblemType::Malformed, format!("{value:?} is not an IP address")))
}

/// Checks a contact URI: `mailto:` only (`unsupportedContact` otherwise), with
/// exactly one address and no header fields (`invalidContact` otherwise).
/// Returns it with the scheme and domain lowercased and percent-escapes decoded.
pub fn contact(uri: &str) -> Result<String, AcmeError> {
    let invalid = |why: &str| AcmeError::new(ProblemType::InvalidContact, format!("contact {uri:?}: {why}"));
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(invalid("not a URI"));
    };
    if !scheme.eq_ignore_ascii_case("mailto") {
        return Err(AcmeError::new(
            ProblemType::UnsupportedContact,
            format!("contact {uri:?}: only mailto: is supported"),
        ));
    }
    if rest.contains('?') {
        return Err(invalid("header fields (?...) are not allowed"));
    }
    let address = percent_encoding::percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| invalid("not UTF-8 after percent-decoding"))?;
    if address.contains(',') {
        return Err(invalid("exactly one address is allowed"));
    }
    let Some((local, domain)) = address.rsplit_once('@') else {
        return Err(invalid("no @"));
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=^_`{|}~.".contains(&b));
    if !local_ok {
        return Err(invalid("the local part is not a plain dot-atom"));
    }
    if domain.starts_with("*.") || !domain.contains('.') {
        return Err(invalid("the domain is not a fully qualified name"));
    }
    let domain = dns_name(domain).map_err(|_| invalid("the domain is not a valid DNS name"))?;
    Ok(format!("mailto:{local}@{domain}"))
}

/// Checks a challenge token: base64url without padding, at least
/// [`MIN_TOKEN_BYTES`] bytes (RFC 8555 §8.3).
pub fn token(token: &str) -> Result<(), AcmeError> {
    match b64_decode(token) {
        Ok(bytes) if bytes.len() >= MIN_TOKEN_BYTES => Ok(()),
        _ => Err(AcmeError::new(ProblemType::Malformed, "the token is not base64url of at least 128 bits")),
    }
}

/// A new token from `MIN_TOKEN_BYTES` or more random bytes the caller drew.
pub fn token_from_random(random: &[u8]) -> Result<String, AcmeError> {
    if random.len() < MIN_TOKEN_BYTES {
        return Err(AcmeError::new(ProblemType::ServerInternal, "a token needs at least 128 random bits"));
    }
    Ok(b64_encode(random))
}

/// The key authorization `token || '.' || base64url(thumbprint(accountKey))` (RFC 8555 §8.1).
pub fn key_authorization(token: &str, account_key: &Jwk) -> String {
    format!("{token}.{}", account_key.thumbprint())
}

/// Does an http-01 response body carry the key authorization? Trailing
/// whitespace is ignored, as RFC 8555 §8.3 allows.
pub fn http01_body_matches(body: &[u8], key_authorization: &str) -> bool {
    body.trim_ascii_end() == key_authorization.as_bytes()
}

/// The dns-01 TXT record value: base64url(SHA-256(key authorization)) (RFC 8555 §8.4).
pub fn dns01_txt_value(key_authorization: &str) -> String {
    b64_encode(&Sha256::digest(key_authorization.as_bytes()))
}

/// The value of the tls-alpn-01 `acmeIdentifier` extension (RFC 8737 §3): the
/// DER OCTET STRING holding SHA-256(key authorization). A validator compares
/// the extnValue of the presented certificate with it byte for byte.
pub fn tls_alpn01_extension_value(key_authorization: &str) -> Vec<u8> {
    let digest = Sha256::digest(key_authorization.as_bytes());
    // A 32-byte OCTET STRING always encodes (34 bytes); the fallbacks cannot happen.
    OctetString::new(digest.to_vec()).and_then(|o| o.to_der()).unwrap_or_default()
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
