//! Which syntactically valid identifiers the CA refuses to issue for
//! (`rejectedIdentifier`), decided without I/O: A-labels that are not valid
//! IDNA, and names that are public suffixes or wildcards directly under one.
//!
//! Public suffixes are those of the Public Suffix List (the `psl` crate's
//! compiled-in copy, ICANN and private sections, as Let's Encrypt uses it):
//! `com`, `co.uk` and `github.io` are suffixes, so `*.com`, `*.co.uk` and
//! `*.github.io` are refused, as are the bare names. A name under a TLD the
//! list does not know falls under its default rule `*` (the last label is the
//! suffix): `signet.test` and `*.signet.test` are issuable, `test` is not.

use crate::problem::{AcmeError, ProblemType};
use crate::types::{Identifier, IdentifierType};

/// Checks that the CA may issue for `id`, already normalised by
/// [`validate::identifier`](crate::validate::identifier); the refusal is
/// `rejectedIdentifier` and names the identifier.
pub fn issuable(id: &Identifier) -> Result<(), AcmeError> {
    if id.kind != IdentifierType::Dns {
        return Ok(());
    }
    let refuse = |why: String| AcmeError {
        identifier: Some(Box::new(id.clone())),
        ..AcmeError::new(ProblemType::RejectedIdentifier, format!("{:?}: {why}", id.value))
    };
    let name = id.value.to_ascii_lowercase();
    let (base, wildcard) = match name.strip_prefix("*.") {
        Some(base) => (base, true),
        None => (name.as_str(), false),
    };
    for label in base.split('.') {
        a_label(label).map_err(|why| refuse(format!("the label {label:?} {why}")))?;
    }
    if is_public_suffix(base) {
        return Err(refuse(if wildcard {
            format!("a wildcard directly under the public suffix {base:?} is not issued")
        } else {
            "is a public suffix (or a top-level domain); certificates are not issued for it".to_owned()
        }));
    }
    Ok(())
}

/// Whether `name` (lowercase, no wildcard) is itself a public suffix.
pub fn is_public_suffix(name: &str) -> bool {
    psl::domain(name.as_bytes()).is_none()
}

/// Checks an `xn--` label: it must decode as Punycode (RFC 3492) to a
/// non-ASCII label that encodes back, through UTS #46 (strict), to the same
/// label. Other labels pass.
fn a_label(label: &str) -> Result<(), &'static str> {
    let Some(encoded) = label.strip_prefix("xn--") else { return Ok(()) };
    let decoded = idna::punycode::decode_to_string(encoded).ok_or("is not valid Punycode")?;
    if decoded.is_ascii() {
        return Err("decodes to ASCII, which is never written as an A-label");
    }
    match idna::domain_to_ascii_strict(&decoded) {
        Ok(again) if again == label => Ok(()),
        _ => Err("is not a valid IDNA A-label (it does not round-trip)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str) -> bool {
        match issuable(&Identifier::dns(name)) {
            Ok(()) => false,
            Err(e) => {
                assert_eq!(e.kind, ProblemType::RejectedIdentifier, "{name}");
                assert_eq!(e.identifier.as_deref(), Some(&Identifier::dns(name)));
                true
            }
        }
    }

    #[test]
    fn invalid_a_labels_are_refused() {
        for bad in ["xn--zz.example.com", "xn--99999999.example.com", "xn--abc.example.com", "a.xn--.example.com"] {
            assert!(refused(bad), "{bad}");
        }
        // bücher.example, münchen.de: valid A-labels.
        for good in ["xn--bcher-kva.example", "www.xn--mnchen-3ya.de", "*.xn--bcher-kva.example"] {
            assert!(!refused(good), "{good}");
        }
        // Case does not matter (validate::identifier lowercases anyway).
        assert!(!refused("XN--BCHER-KVA.example"));
    }

    #[test]
    fn public_suffixes_and_wildcards_directly_under_them_are_refused() {
        for bad in ["*.com", "*.co.uk", "*.github.io", "com", "co.uk", "github.io", "test", "localhost"] {
            assert!(refused(bad), "{bad}");
        }
        for good in ["example.com", "*.example.com", "a.b.example.co.uk", "*.alice.github.io", "signet.test"] {
            assert!(!refused(good), "{good}");
        }
        assert!(!refused("*.signet.test"), "an unknown TLD's second level is a registrable domain");
        assert!(issuable(&Identifier::ip("192.0.2.1")).is_ok());
    }
}
