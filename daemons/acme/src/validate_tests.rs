//! Tests of the syntax checks and challenge values.

use der::asn1::OctetString;
use der::Decode as _;
use serde_json::json;

use super::*;

fn kind(r: Result<impl std::fmt::Debug, AcmeError>) -> ProblemType {
    r.unwrap_err().kind
}

#[test]
fn dns_names() {
    assert_eq!(dns_name("WWW.Example.ORG").unwrap(), "www.example.org");
    assert_eq!(dns_name("*.example.org").unwrap(), "*.example.org");
    assert_eq!(dns_name("xn--bcher-kva.example").unwrap(), "xn--bcher-kva.example");
    assert_eq!(dns_name("a-1.b2.example").unwrap(), "a-1.b2.example");
    assert_eq!(dns_name("3com.com").unwrap(), "3com.com");
    assert_eq!(dns_name("localhost").unwrap(), "localhost");
    let long_label = "a".repeat(63);
    assert!(dns_name(&format!("{long_label}.example")).is_ok());
    let near_limit = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(61));
    assert_eq!(near_limit.len(), 253);
    assert!(dns_name(&near_limit).is_ok());
    for bad in [
        "",
        "*.",
        "*",
        "example.org.",
        ".example.org",
        "a..example",
        "_acme.example.org",
        "-a.example",
        "a-.example",
        "a b.example",
        "www.*.example.org",
        "*example.org",
        "**.example.org",
        "*.*.example.org",
        "bücher.example",
        "192.0.2.1",
        "example.123",
        "[::1]",
        &format!("{}.example", "a".repeat(64)),
        &format!("{near_limit}a"),
    ] {
        assert_eq!(kind(dns_name(bad)), ProblemType::Malformed, "{bad:?}");
    }
}

#[test]
fn ip_addresses_are_normalised() {
    assert_eq!(ip_address("192.0.2.1").unwrap(), "192.0.2.1");
    assert_eq!(ip_address("2001:DB8:0:0:0:0:0:1").unwrap(), "2001:db8::1");
    assert_eq!(ip_address("2001:db8:0:0:1:0:0:1").unwrap(), "2001:db8::1:0:0:1");
    assert_eq!(ip_address("::ffff:192.0.2.1").unwrap(), "::ffff:192.0.2.1");
    for bad in [
        "192.0.2.01",
        "192.0.2",
        "256.0.0.1",
        "fe80::1%eth0",
        "2001:db8::/32",
        "[2001:db8::1]",
        "0x7f.0.0.1",
        " 192.0.2.1",
        "",
    ] {
        assert_eq!(kind(ip_address(bad)), ProblemType::Malformed, "{bad:?}");
    }
}

#[test]
fn identifiers() {
    assert_eq!(identifier(&Identifier::dns("Example.ORG")).unwrap(), Identifier::dns("example.org"));
    assert_eq!(identifier(&Identifier::ip("2001:db8:0::1")).unwrap(), Identifier::ip("2001:db8::1"));
    let e = identifier(&Identifier::dns("_bad.example")).unwrap_err();
    assert_eq!(e.kind, ProblemType::Malformed);
    // The problem names the identifier as sent, for a subproblem.
    let problem = e.problem();
    assert_eq!(problem.identifier, Some(Identifier::dns("_bad.example")));
    let email = Identifier { kind: IdentifierType::Other("email".into()), value: "a@example.org".into() };
    assert_eq!(kind(identifier(&email)), ProblemType::UnsupportedIdentifier);
    // An IP address is not a DNS identifier, nor the reverse.
    assert_eq!(kind(identifier(&Identifier::dns("192.0.2.1"))), ProblemType::Malformed);
    assert_eq!(kind(identifier(&Identifier::ip("example.org"))), ProblemType::Malformed);
}

#[test]
fn contacts() {
    assert_eq!(contact("mailto:admin@example.org").unwrap(), "mailto:admin@example.org");
    assert_eq!(contact("MAILTO:Admin@Example.ORG").unwrap(), "mailto:Admin@example.org");
    assert_eq!(contact("mailto:first.last+acme@example.org").unwrap(), "mailto:first.last+acme@example.org");
    assert_eq!(contact("mailto:a%2Bb@example.org").unwrap(), "mailto:a+b@example.org");
    for unsupported in ["tel:+12025551212", "https://example.org/contact", "xmpp:a@example.org"] {
        assert_eq!(kind(contact(unsupported)), ProblemType::UnsupportedContact, "{unsupported}");
    }
    for invalid in [
        "admin@example.org",
        "mailto:",
        "mailto:admin",
        "mailto:@example.org",
        "mailto:admin@",
        "mailto:admin@localhost",
        "mailto:a@example.org,b@example.org",
        "mailto:a@example.org%2Cb@example.org",
        "mailto:admin@example.org?subject=hi",
        "mailto:a b@example.org",
        "mailto:<a@example.org>",
        "mailto:.a@example.org",
        "mailto:a..b@example.org",
        "mailto:a@*.example.org",
        "mailto:a@exa_mple.org",
        "mailto:a@192.0.2.1",
        "mailto:%ff@example.org",
    ] {
        assert_eq!(kind(contact(invalid)), ProblemType::InvalidContact, "{invalid}");
    }
}

#[test]
fn tokens() {
    token("DGyRejmCefe7v4NfDGDKfA").unwrap();
    token(&b64_encode(&[7; 32])).unwrap();
    for bad in
        ["", "DGyRejmCefe7v4NfDGDKf", "DGyRejmCefe7v4NfDGDKfA==", "DGyRejmCefe7v4NfDGDK+A", "DGyRejmCefe7v4NfDG.KfA"]
    {
        assert_eq!(kind(token(bad)), ProblemType::Malformed, "{bad:?}");
    }
    let t = token_from_random(&[0xab; 16]).unwrap();
    token(&t).unwrap();
    assert_eq!(kind(token_from_random(&[0; 15])), ProblemType::ServerInternal);
}

fn rfc7638_key() -> Jwk {
    Jwk::from_json(&json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}))
        .unwrap()
}

#[test]
fn key_authorization_and_http01() {
    let ka = key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", &rfc7638_key());
    assert_eq!(ka, "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    assert!(http01_body_matches(ka.as_bytes(), &ka));
    assert!(http01_body_matches(format!("{ka}\r\n \t").as_bytes(), &ka));
    assert!(!http01_body_matches(format!(" {ka}").as_bytes(), &ka));
    assert!(!http01_body_matches(&ka.as_bytes()[1..], &ka));
    assert!(!http01_body_matches(b"", &ka));
}

#[test]
fn dns01_txt_value_is_base64url_sha256() {
    // SHA-256 of the empty string, as a known vector.
    assert_eq!(dns01_txt_value(""), "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
    let ka = key_authorization("DGyRejmCefe7v4NfDGDKfA", &rfc7638_key());
    let value = dns01_txt_value(&ka);
    assert_eq!(value.len(), 43);
    assert_eq!(b64_decode(&value).unwrap(), Sha256::digest(ka.as_bytes()).to_vec());
}

#[test]
fn tls_alpn01_extension_is_a_der_octet_string() {
    let ka = key_authorization("DGyRejmCefe7v4NfDGDKfA", &rfc7638_key());
    let der = tls_alpn01_extension_value(&ka);
    assert_eq!(der.len(), 34);
    assert_eq!(der[..2], [0x04, 0x20]);
    let parsed = OctetString::from_der(&der).unwrap();
    assert_eq!(parsed.as_bytes(), Sha256::digest(ka.as_bytes()).as_slice());
    assert_eq!(ID_PE_ACME_IDENTIFIER.to_string(), "1.3.6.1.5.5.7.1.31");
    assert_eq!(ACME_TLS_ALPN_PROTOCOL, b"acme-tls/1");
}
