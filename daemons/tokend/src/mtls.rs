//! Mutual-TLS client authentication and certificate-bound access tokens
//! (RFC 8705), on the `[tls]` listener.
//!
//! signet-runtime's TLS listener asks every client for a certificate and lets
//! any chain through; the chain reaches the handler as
//! [`PeerCertificates`](signet_runtime::http::PeerCertificates). Here it is
//! judged:
//!
//! - `tls_client_auth` (§2.1): the chain must verify (OpenSSL, the current
//!   time) to a CA of `[tls] client_ca_file`, and the leaf must hold the
//!   client's registered [`TlsIdentity`]: its subject DN (compared RDN by RDN,
//!   values case-insensitively with spaces collapsed, RFC 4517 §4.2.15 with
//!   caseIgnoreMatch), or one SAN entry of the registered kind. With `[tls]
//!   ocsp_url` or `ocsp_aia`, its OCSP responder must then say it is good
//!   ([`crate::ocsp`]).
//! - `self_signed_tls_client_auth` (§2.2): the leaf's public key must be a key
//!   of the client's JWKS, registered by value or fetched from its `jwks_uri`
//!   ([`crate::remote`]), either the first certificate of a JWK's `x5c`, or by
//!   the JWK thumbprint (RFC 7638) of the leaf's key. No CA and no validity
//!   dates are involved (the client registered the key itself).
//!
//! Whenever a client authenticates with a certificate on the mTLS listener (by
//! any method, and public clients presenting one), its access tokens carry
//! `cnf: {"x5t#S256": base64url(SHA-256(leaf DER))}` (§3.1), unless a DPoP
//! proof came with the request: then the DPoP key binds the token (`cnf.jkt`)
//! and the certificate does not (a token has one holder key).

use std::net::IpAddr;
use std::str::FromStr;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use der::{Decode, Tag, Tagged};
use openssl::stack::Stack;
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::{X509StoreContext, X509};
use serde_json::{json, Value};
use x509_cert::name::RdnSequence;

use crate::db::TlsIdentity;

/// The mTLS listener's settings the endpoints need.
pub struct Mtls {
    /// The origin of the mTLS endpoint aliases (`https://host:port`), no trailing `/`.
    pub base_url: String,
    /// The CAs a tls_client_auth certificate must chain to (`[tls] client_ca_file`).
    pub client_ca: Option<X509Store>,
    /// The OCSP check of tls_client_auth certificates (`[tls] ocsp_url`, `ocsp_aia`).
    pub revocation: Option<crate::ocsp::Revocation>,
}

/// The SHA-256 thumbprint of a certificate, base64url: `cnf`'s `x5t#S256`.
pub fn thumbprint(der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(openssl::sha::sha256(der))
}

/// The `cnf` claim of a token issued with a DPoP proof of key `jkt` and/or
/// over a TLS connection with a certificate of thumbprint `x5t`: DPoP wins.
pub fn confirmation(jkt: Option<&str>, x5t: Option<&str>) -> Option<Value> {
    match (jkt, x5t) {
        (Some(jkt), _) => Some(json!({ "jkt": jkt })),
        (None, Some(x5t)) => Some(json!({ "x5t#S256": x5t })),
        (None, None) => None,
    }
}

/// Reads a PEM file of CA certificates into a store.
pub fn ca_store(path: &std::path::Path) -> Result<X509Store, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = X509::stack_from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    let mut b = X509StoreBuilder::new().map_err(|e| e.to_string())?;
    for c in certs {
        b.add_cert(c).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(b.build())
}

/// A tls_client_auth certificate that verified: the leaf and its issuer (the
/// next certificate of the verified chain; the leaf itself when a CA file
/// holds the leaf).
#[derive(Debug)]
pub struct Verified {
    /// The client's certificate.
    pub leaf: X509,
    /// Its issuer.
    pub issuer: X509,
}

/// tls_client_auth: `chain` (DER, leaf first) verifies to `cas` now and its
/// leaf holds `identity`. Why not, otherwise.
pub fn check_tls_client_auth(cas: &X509Store, chain: &[Vec<u8>], identity: &TlsIdentity) -> Result<Verified, String> {
    let (leaf, rest) = chain.split_first().ok_or("no client certificate was presented")?;
    let leaf = X509::from_der(leaf).map_err(|e| format!("the certificate: {e}"))?;
    let mut untrusted = Stack::new().map_err(|e| e.to_string())?;
    for c in rest {
        untrusted.push(X509::from_der(c).map_err(|e| format!("the chain: {e}"))?).map_err(|e| e.to_string())?;
    }
    let mut ctx = X509StoreContext::new().map_err(|e| e.to_string())?;
    let verified = ctx
        .init(cas, &leaf, &untrusted, |c| {
            if !c.verify_cert()? {
                return Ok(Err(c.error().to_string()));
            }
            let chain = c.chain().map(|s| s.iter().map(|x| x.to_owned()).collect::<Vec<X509>>()).unwrap_or_default();
            Ok(Ok(chain))
        })
        .map_err(|e| e.to_string())?;
    let chain = verified.map_err(|why| format!("the certificate does not verify: {why}"))?;
    if !holds(&leaf, identity)? {
        return Err("the certificate is not the client's (its registered subject DN or SAN does not match)".into());
    }
    let issuer = chain.get(1).cloned().unwrap_or_else(|| leaf.clone());
    Ok(Verified { leaf, issuer })
}

/// self_signed_tls_client_auth's side of a presented certificate: the leaf
/// and the RFC 7638 thumbprint of its key, worked out once and compared with
/// each JWK set the client's registration names (by value, or fetched from
/// its `jwks_uri`).
pub struct SelfSigned<'a> {
    leaf_der: &'a [u8],
    key_thumbprint: String,
}

impl<'a> SelfSigned<'a> {
    /// The leaf of `chain` (DER, leaf first).
    pub fn new(chain: &'a [Vec<u8>]) -> Result<SelfSigned<'a>, String> {
        let leaf_der = chain.first().ok_or("no client certificate was presented")?;
        let leaf = X509::from_der(leaf_der).map_err(|e| format!("the certificate: {e}"))?;
        let key = leaf.public_key().map_err(|e| format!("the certificate's key: {e}"))?;
        let key = signet_jose::Jwk::from_public_key(&key).map_err(|e| format!("the certificate's key: {e}"))?;
        Ok(SelfSigned { leaf_der, key_thumbprint: key.thumbprint() })
    }

    /// Whether a JWK of `jwks` (a JWK set document) is this certificate: the
    /// first certificate of its `x5c` is the leaf, or its key is the leaf's.
    pub fn in_jwks(&self, jwks: &Value) -> bool {
        let entries = jwks.get("keys").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        entries.iter().any(|entry| {
            let first_x5c = entry.get("x5c").and_then(Value::as_array).and_then(|a| a.first()).and_then(Value::as_str);
            first_x5c.and_then(|b| STANDARD.decode(b).ok()).is_some_and(|d| d == self.leaf_der)
                || signet_jose::Jwk::from_json(entry).is_ok_and(|k| k.thumbprint() == self.key_thumbprint)
        })
    }
}

/// self_signed_tls_client_auth with a JWK set registered by value: the leaf
/// of `chain` is a certificate of `jwks` (an `x5c` entry), or its key is one
/// of `jwks`'s keys.
pub fn check_self_signed(chain: &[Vec<u8>], jwks: &str) -> Result<(), String> {
    let leaf = SelfSigned::new(chain)?;
    let doc: Value = serde_json::from_str(jwks).map_err(|e| format!("the client's JWKS: {e}"))?;
    if leaf.in_jwks(&doc) {
        Ok(())
    } else {
        Err(NOT_IN_JWKS.into())
    }
}

/// Why a self-signed certificate is refused when its key is in none of the client's JWKs.
pub const NOT_IN_JWKS: &str = "the certificate's key is not in the client's JWKS";

/// Whether `cert` holds `identity` (RFC 8705 §2.1.2).
pub fn holds(cert: &X509, identity: &TlsIdentity) -> Result<bool, String> {
    if let TlsIdentity::SubjectDn(registered) = identity {
        let der = cert.to_der().map_err(|e| e.to_string())?;
        let parsed = x509_cert::Certificate::from_der(&der).map_err(|e| format!("the certificate: {e}"))?;
        return Ok(dn_matches(&parsed.tbs_certificate.subject, registered));
    }
    let Some(sans) = cert.subject_alt_names() else { return Ok(false) };
    Ok(sans.iter().any(|san| match identity {
        TlsIdentity::SanDns(d) => san.dnsname().is_some_and(|n| n.eq_ignore_ascii_case(d)),
        TlsIdentity::SanUri(u) => san.uri() == Some(u.as_str()),
        TlsIdentity::SanEmail(e) => san.email() == Some(e.as_str()),
        TlsIdentity::SanIp(ip) => san.ipaddress().is_some_and(|b| ip_matches(b, ip)),
        TlsIdentity::SubjectDn(_) => false,
    }))
}

fn ip_matches(octets: &[u8], registered: &str) -> bool {
    match IpAddr::from_str(registered) {
        Ok(IpAddr::V4(v4)) => octets == v4.octets(),
        Ok(IpAddr::V6(v6)) => octets == v6.octets(),
        Err(_) => false,
    }
}

/// Parses an RFC 4514 string (attribute names as RFC 4514 and RFC 4519 write
/// them, `CN`, `O`, `OU`, `C`, `L`, `ST`, `DC`, ..., or dotted OIDs).
pub fn parse_dn(dn: &str) -> Result<RdnSequence, String> {
    let parsed = RdnSequence::from_str(dn).map_err(|e| format!("subject DN {dn:?} is not an RFC 4514 string: {e}"))?;
    if parsed.is_empty() {
        return Err("the subject DN is empty".into());
    }
    Ok(parsed)
}

/// Whether `subject` is the name `registered` (an RFC 4514 string) writes:
/// the same RDNs in the same order, each the same set of attribute types with
/// equal values (strings compared case-insensitively, spaces trimmed and runs
/// of them collapsed; other values by their DER).
pub fn dn_matches(subject: &RdnSequence, registered: &str) -> bool {
    let Ok(want) = parse_dn(registered) else { return false };
    if want.0.len() != subject.0.len() {
        return false;
    }
    want.0.iter().zip(&subject.0).all(|(w, s)| {
        let (mut w, mut s): (Vec<_>, Vec<_>) =
            (w.0.iter().map(normalised).collect(), s.0.iter().map(normalised).collect());
        w.sort();
        s.sort();
        w == s
    })
}

/// An attribute as it compares: its OID and its value, folded.
fn normalised(atv: &x509_cert::attr::AttributeTypeAndValue) -> (String, Result<String, Vec<u8>>) {
    let v = &atv.value;
    let text = match v.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::VisibleString => {
            std::str::from_utf8(v.value()).ok().map(str::to_owned)
        }
        Tag::TeletexString => Some(v.value().iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = v.value().chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    };
    let value = match text {
        Some(t) => Ok(t.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()),
        None => Err(der::Encode::to_der(v).unwrap_or_default()),
    };
    (atv.oid.to_string(), value)
}

/// Checks an identity an operator registers: a DN that parses, a SAN value
/// of its kind. Answers it canonical (an IP address as Rust writes it).
pub fn check_identity(identity: TlsIdentity) -> Result<TlsIdentity, String> {
    let bad = |what: &str, v: &str| format!("{what} {v:?}");
    let printable = |v: &str| !v.is_empty() && v.len() <= 1024 && !v.chars().any(char::is_control);
    match identity {
        TlsIdentity::SubjectDn(dn) => {
            if !printable(&dn) {
                return Err(bad("subject DN", &dn));
            }
            parse_dn(&dn)?;
            Ok(TlsIdentity::SubjectDn(dn))
        }
        TlsIdentity::SanDns(d) => {
            let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*' | '_');
            if !printable(&d) || !d.chars().all(ok) {
                return Err(bad("SAN dNSName", &d));
            }
            Ok(TlsIdentity::SanDns(d))
        }
        TlsIdentity::SanUri(u) => {
            if !printable(&u) || url::Url::parse(&u).is_err() || u.contains(char::is_whitespace) {
                return Err(bad("SAN URI (an absolute URI)", &u));
            }
            Ok(TlsIdentity::SanUri(u))
        }
        TlsIdentity::SanIp(ip) => {
            let parsed = IpAddr::from_str(&ip).map_err(|_| bad("SAN iPAddress", &ip))?;
            Ok(TlsIdentity::SanIp(parsed.to_string()))
        }
        TlsIdentity::SanEmail(e) => {
            if !printable(&e) || e.contains(char::is_whitespace) || e.matches('@').count() != 1 {
                return Err(bad("SAN rfc822Name", &e));
            }
            Ok(TlsIdentity::SanEmail(e))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private};
    use openssl::x509::extension::SubjectAlternativeName;
    use openssl::x509::{X509NameBuilder, X509};

    fn key() -> PKey<Private> {
        PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
    }

    /// A certificate for `subject` ((field, value) in ASN.1 order) with `sans`,
    /// signed by `issuer` (self-signed without one), valid from `days` ago for a day.
    fn cert(
        key: &PKey<Private>,
        subject: &[(&str, &str)],
        sans: &[&str],
        issuer: Option<(&X509, &PKey<Private>)>,
        days: i64,
    ) -> X509 {
        let mut name = X509NameBuilder::new().unwrap();
        for (f, v) in subject {
            name.append_entry_by_text(f, v).unwrap();
        }
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(9).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(issuer.map_or(&*name, |(c, _)| c.subject_name())).unwrap();
        b.set_pubkey(key).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        b.set_not_before(&Asn1Time::from_unix(now - days * 86_400 - 60).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::from_unix(now - days * 86_400 + 86_400).unwrap()).unwrap();
        if issuer.is_none() {
            let bc = openssl::x509::extension::BasicConstraints::new().critical().ca().build().unwrap();
            b.append_extension(bc).unwrap();
        }
        if !sans.is_empty() {
            let mut san = SubjectAlternativeName::new();
            for s in sans {
                match s.split_once(':').unwrap() {
                    ("DNS", v) => san.dns(v),
                    ("URI", v) => san.uri(v),
                    ("IP", v) => san.ip(v),
                    ("email", v) => san.email(v),
                    _ => unreachable!(),
                };
            }
            let ext = san.build(&b.x509v3_context(issuer.map(|(c, _)| &**c), None)).unwrap();
            b.append_extension(ext).unwrap();
        }
        b.sign(issuer.map_or(key, |(_, k)| k), MessageDigest::sha256()).unwrap();
        b.build()
    }

    fn subject_of(c: &X509) -> RdnSequence {
        x509_cert::Certificate::from_der(&c.to_der().unwrap()).unwrap().tbs_certificate.subject
    }

    #[test]
    fn subject_dns_compare_as_rfc_4514_strings() {
        let k = key();
        let c = cert(&k, &[("C", "DE"), ("O", "Example  Corp"), ("CN", "Billing Client")], &[], None, 0);
        let s = subject_of(&c);
        assert!(dn_matches(&s, "CN=Billing Client,O=Example  Corp,C=DE"));
        assert!(dn_matches(&s, "CN=billing client,O=EXAMPLE Corp,C=de"), "case and spaces fold");
        assert!(dn_matches(&s, "2.5.4.3=Billing Client,O=Example Corp,C=DE"), "a dotted OID");
        assert!(!dn_matches(&s, "C=DE,O=Example Corp,CN=Billing Client"), "the order is RFC 4514's (reversed)");
        assert!(!dn_matches(&s, "CN=Billing Client,O=Example Corp"), "an RDN missing");
        assert!(!dn_matches(&s, "CN=Billing Client,O=Other,C=DE"));
        assert!(!dn_matches(&s, "CN=Billing Client,OU=Example Corp,C=DE"), "another attribute type");
        let escaped = cert(&k, &[("CN", "a,b+c")], &[], None, 0);
        assert!(dn_matches(&subject_of(&escaped), r"CN=a\,b\+c"));
        assert!(!dn_matches(&subject_of(&escaped), "CN=a"));
        assert!(parse_dn("not a dn").is_err());
        assert!(parse_dn("").is_err());
    }

    #[test]
    fn each_san_kind_matches_only_its_own_entries() {
        let k = key();
        let sans =
            ["DNS:client.example.net", "URI:spiffe://example.net/billing", "IP:192.0.2.7", "email:ops@example.net"];
        let c = cert(&k, &[("CN", "x")], &sans, None, 0);
        let yes = [
            TlsIdentity::SanDns("CLIENT.example.net".into()),
            TlsIdentity::SanUri("spiffe://example.net/billing".into()),
            TlsIdentity::SanIp("192.0.2.7".into()),
            TlsIdentity::SanEmail("ops@example.net".into()),
            TlsIdentity::SubjectDn("CN=x".into()),
        ];
        for id in yes {
            assert!(holds(&c, &id).unwrap(), "{id:?}");
        }
        let no = [
            TlsIdentity::SanDns("other.example.net".into()),
            TlsIdentity::SanDns("spiffe://example.net/billing".into()),
            TlsIdentity::SanUri("client.example.net".into()),
            TlsIdentity::SanIp("192.0.2.8".into()),
            TlsIdentity::SanIp("::ffff:192.0.2.7".into()),
            TlsIdentity::SanEmail("client.example.net".into()),
            TlsIdentity::SubjectDn("CN=y".into()),
        ];
        for id in no {
            assert!(!holds(&c, &id).unwrap(), "{id:?}");
        }
        let v6 = cert(&k, &[("CN", "x")], &["IP:2001:db8::1"], None, 0);
        assert!(holds(&v6, &TlsIdentity::SanIp("2001:0db8:0:0::1".into())).unwrap());
        let none = cert(&k, &[("CN", "x")], &[], None, 0);
        assert!(!holds(&none, &TlsIdentity::SanDns("x".into())).unwrap());
    }

    #[test]
    fn a_chain_must_verify_to_the_client_cas_and_hold_the_identity() {
        let (ca_key, leaf_key) = (key(), key());
        let ca = cert(&ca_key, &[("CN", "Client CA")], &[], None, 0);
        let leaf = cert(&leaf_key, &[("CN", "svc")], &["DNS:svc.example.net"], Some((&ca, &ca_key)), 0);
        let mut b = X509StoreBuilder::new().unwrap();
        b.add_cert(ca.clone()).unwrap();
        let cas = b.build();
        let chain = vec![leaf.to_der().unwrap()];
        let dns = TlsIdentity::SanDns("svc.example.net".into());
        let v = check_tls_client_auth(&cas, &chain, &dns).unwrap();
        assert_eq!(v.issuer.to_der().unwrap(), ca.to_der().unwrap(), "the issuer, from the verified chain");
        let e = check_tls_client_auth(&cas, &chain, &TlsIdentity::SanDns("other.example.net".into())).unwrap_err();
        assert!(e.contains("not the client's"), "{e}");
        assert!(check_tls_client_auth(&cas, &[], &dns).unwrap_err().contains("no client certificate"));
        // Untrusted: self-signed, or from another CA.
        let own = cert(&leaf_key, &[("CN", "svc")], &["DNS:svc.example.net"], None, 0);
        assert!(check_tls_client_auth(&cas, &[own.to_der().unwrap()], &dns).unwrap_err().contains("does not verify"));
        // Expired.
        let old = cert(&leaf_key, &[("CN", "svc")], &["DNS:svc.example.net"], Some((&ca, &ca_key)), 3);
        let e = check_tls_client_auth(&cas, &[old.to_der().unwrap()], &dns).unwrap_err();
        assert!(e.contains("expired"), "{e}");
        assert!(check_tls_client_auth(&cas, &[b"garbage".to_vec()], &dns).is_err());
    }

    #[test]
    fn a_self_signed_certificate_matches_its_jwk_by_key_or_x5c() {
        let k = key();
        let c = cert(&k, &[("CN", "self")], &[], None, 0);
        let der = c.to_der().unwrap();
        let jwk = signet_jose::Jwk::from_public_key(&k).unwrap().to_json();
        check_self_signed(std::slice::from_ref(&der), &json!({ "keys": [jwk] }).to_string()).unwrap();
        let x5c = json!({ "keys": [{ "kty": "EC", "x5c": [STANDARD.encode(&der)] }] });
        check_self_signed(std::slice::from_ref(&der), &x5c.to_string()).unwrap();
        let other = signet_jose::Jwk::from_public_key(&key()).unwrap().to_json();
        assert!(check_self_signed(std::slice::from_ref(&der), &json!({ "keys": [other] }).to_string()).is_err());
        assert!(check_self_signed(&[], &json!({ "keys": [jwk] }).to_string()).is_err());
    }

    #[test]
    fn identities_are_checked_when_registered() {
        assert_eq!(
            check_identity(TlsIdentity::SanIp("2001:0db8::0001".into())).unwrap(),
            TlsIdentity::SanIp("2001:db8::1".into())
        );
        assert!(check_identity(TlsIdentity::SanIp("host".into())).is_err());
        assert!(check_identity(TlsIdentity::SanDns("a b".into())).is_err());
        assert!(check_identity(TlsIdentity::SanUri("relative/path".into())).is_err());
        assert!(check_identity(TlsIdentity::SanEmail("nobody".into())).is_err());
        assert!(check_identity(TlsIdentity::SubjectDn("CN=ok,O=Example".into())).is_ok());
        assert!(check_identity(TlsIdentity::SubjectDn("garbage".into())).is_err());
        assert_eq!(confirmation(Some("j"), Some("x")), Some(json!({"jkt": "j"})), "DPoP wins over the certificate");
        assert_eq!(confirmation(None, Some("x")), Some(json!({"x5t#S256": "x"})));
    }
}
