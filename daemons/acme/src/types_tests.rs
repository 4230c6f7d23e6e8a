//! Tests of the resource types against the examples of RFC 8555, RFC 8738 and RFC 9773.

use serde_json::json;
use time::macros::datetime;

use super::*;

#[test]
fn directory_round_trips() {
    let v = json!({
        "newNonce": "https://example.com/acme/new-nonce",
        "newAccount": "https://example.com/acme/new-account",
        "newOrder": "https://example.com/acme/new-order",
        "newAuthz": "https://example.com/acme/new-authz",
        "revokeCert": "https://example.com/acme/revoke-cert",
        "keyChange": "https://example.com/acme/key-change",
        "renewalInfo": "https://example.com/acme/renewal-info",
        "meta": {
            "termsOfService": "https://example.com/acme/terms/2017-5-30",
            "website": "https://www.example.com/",
            "caaIdentities": ["example.com"],
            "externalAccountRequired": true,
            "profiles": {"classic": "The same profile you're accustomed to", "tlsserver": "A shorter-lived profile"}
        }
    });
    let dir: Directory = serde_json::from_value(v.clone()).unwrap();
    let meta = dir.meta.as_ref().unwrap();
    assert!(meta.external_account_required);
    assert_eq!(meta.profiles.len(), 2);
    assert_eq!(serde_json::to_value(&dir).unwrap(), v);

    // Optional members are left out, not sent as null or false.
    let minimal = Directory { new_authz: None, renewal_info: None, meta: Some(DirectoryMeta::default()), ..dir };
    let out = serde_json::to_value(&minimal).unwrap();
    assert_eq!(out["meta"], json!({}));
    assert!(out.get("newAuthz").is_none());
}

#[test]
fn account_request_and_response() {
    let req: Account = serde_json::from_value(json!({
        "termsOfServiceAgreed": true,
        "contact": ["mailto:cert-admin@example.org", "mailto:admin@example.org"],
        "onlyReturnExisting": false,
        "externalAccountBinding": {"protected": "x", "payload": "y", "signature": "z"},
        "unknownFutureField": 1
    }))
    .unwrap();
    assert_eq!(req.terms_of_service_agreed, Some(true));
    assert_eq!(req.contact.as_ref().map(Vec::len), Some(2));
    assert!(req.external_account_binding.is_some());

    let resp = Account {
        status: Some(AccountStatus::Valid),
        contact: Some(vec!["mailto:cert-admin@example.org".into()]),
        orders: Some("https://example.com/acme/orders/rzGoeA".into()),
        ..Account::default()
    };
    assert_eq!(
        serde_json::to_value(&resp).unwrap(),
        json!({"status": "valid", "contact": ["mailto:cert-admin@example.org"], "orders": "https://example.com/acme/orders/rzGoeA"})
    );
    let deactivate: Account = serde_json::from_str(r#"{"status":"deactivated"}"#).unwrap();
    assert_eq!(deactivate.status, Some(AccountStatus::Deactivated));
    assert!(serde_json::from_str::<Account>(r#"{"status":"gone"}"#).is_err());
}

#[test]
fn order_round_trips_with_rfc3339_times() {
    let v = json!({
        "status": "valid",
        "expires": "2016-01-20T14:09:07.99Z",
        "identifiers": [{"type": "dns", "value": "www.example.org"}, {"type": "ip", "value": "2001:db8::1"}],
        "profile": "tlsserver",
        "replaces": "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE",
        "notBefore": "2016-01-01T00:00:00Z",
        "notAfter": "2016-01-08T00:00:00Z",
        "authorizations": ["https://example.com/acme/authz/PAniVnsZcis"],
        "finalize": "https://example.com/acme/order/TOlocE8rfgo/finalize",
        "certificate": "https://example.com/acme/cert/mAt3xBGaobw"
    });
    let order: Order = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(order.status, OrderStatus::Valid);
    assert_eq!(order.expires, Some(datetime!(2016-01-20 14:09:07.99 UTC)));
    assert_eq!(order.identifiers[1], Identifier::ip("2001:db8::1"));
    assert_eq!(serde_json::to_value(&order).unwrap(), v);

    let invalid = Order {
        status: OrderStatus::Invalid,
        error: Some(Problem::new(ProblemType::Caa, "CAA forbids issuance")),
        certificate: None,
        ..order
    };
    let out = serde_json::to_value(&invalid).unwrap();
    assert_eq!(out["error"]["type"], json!("urn:ietf:params:acme:error:caa"));
    assert!(serde_json::from_value::<Order>(
        json!({"status": "valid", "expires": "yesterday", "identifiers": [], "authorizations": [], "finalize": "f"})
    )
    .is_err());
}

#[test]
fn new_order_accepts_unknown_identifier_types() {
    let o: NewOrder = serde_json::from_value(json!({
        "identifiers": [{"type": "email", "value": "a@example.org"}, {"type": "dns", "value": "*.example.org"}],
        "profile": "classic"
    }))
    .unwrap();
    assert_eq!(o.identifiers[0].kind, IdentifierType::Other("email".into()));
    assert_eq!(o.identifiers[1].kind, IdentifierType::Dns);
    assert_eq!(o.not_before, None);
    let out = serde_json::to_value(&o).unwrap();
    assert_eq!(out["identifiers"][0]["type"], json!("email"));
    assert!(out.get("notBefore").is_none());
}

#[test]
fn authorization_and_challenges() {
    let v = json!({
        "status": "valid",
        "expires": "2015-03-01T14:09:07.99Z",
        "identifier": {"type": "dns", "value": "www.example.org"},
        "challenges": [
            {"url": "https://example.com/acme/chall/prV_B7yEyA4", "type": "http-01", "status": "valid",
             "token": "DGyRejmCefe7v4NfDGDKfA", "validated": "2014-12-01T12:05:58.16Z"},
            {"url": "https://example.com/acme/chall/Rg5dV14Gh1Q", "type": "dns-01", "status": "invalid",
             "token": "DGyRejmCefe7v4NfDGDKfA",
             "error": {"type": "urn:ietf:params:acme:error:dns", "detail": "no TXT record"}},
            {"url": "https://example.com/acme/chall/3", "type": "tls-alpn-01", "status": "pending", "token": "DGyRejmCefe7v4NfDGDKfA"},
            {"url": "https://example.com/acme/chall/4", "type": "dns-persist-01", "status": "pending",
             "issuer-domain-names": ["ca.example"]},
            {"url": "https://example.com/acme/chall/5", "type": "future-01", "status": "processing"}
        ],
        "wildcard": false
    });
    let authz: Authorization = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(authz.status, AuthorizationStatus::Valid);
    let kinds: Vec<_> = authz.challenges.iter().map(|c| c.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            ChallengeType::Http01,
            ChallengeType::Dns01,
            ChallengeType::TlsAlpn01,
            ChallengeType::DnsPersist01,
            ChallengeType::Other("future-01".into())
        ]
    );
    assert_eq!(authz.challenges[1].error.as_ref().unwrap().kind, ProblemType::Dns);
    assert_eq!(authz.challenges[3].issuer_domain_names.as_deref(), Some(&["ca.example".to_owned()][..]));
    assert_eq!(authz.challenges[4].status, ChallengeStatus::Processing);
    assert_eq!(serde_json::to_value(&authz).unwrap(), v);
    for status in ["pending", "valid", "invalid", "deactivated", "expired", "revoked"] {
        serde_json::from_value::<AuthorizationStatus>(json!(status)).unwrap();
    }
}

#[test]
fn finalize_and_revocation_payloads() {
    let f: Finalize = serde_json::from_str(r#"{"csr":"MIIBPTCBxAIBADBFMQ"}"#).unwrap();
    assert_eq!(f.csr_der().unwrap()[..2], [0x30, 0x82]);
    let padded = Finalize { csr: "MA==".into() };
    assert_eq!(padded.csr_der().unwrap_err().kind, ProblemType::Malformed);

    let r: Revocation = serde_json::from_str(r#"{"certificate":"MIIEDTCCAvegAwIBAgIRAP8","reason":4}"#).unwrap();
    assert_eq!(r.reason_code().unwrap(), 4);
    assert!(r.certificate_der().is_ok());
    assert_eq!(Revocation { reason: None, ..r.clone() }.reason_code().unwrap(), 0);
    for bad in [7, 11, 255] {
        let e = Revocation { reason: Some(bad), ..r.clone() }.reason_code().unwrap_err();
        assert_eq!(e.kind, ProblemType::BadRevocationReason);
        assert_eq!(e.problem().http_status(), 400);
    }
    assert!(serde_json::from_str::<Revocation>(r#"{"certificate":"MA","reason":-1}"#).is_err());
}

#[test]
fn key_change_payload() {
    let v = json!({
        "account": "https://example.com/acme/acct/evOfKhNU60wg",
        "oldKey": {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    });
    let kc: KeyChange = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(kc.old_key.thumbprint(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    assert_eq!(serde_json::to_value(&kc).unwrap(), v);
    assert!(serde_json::from_value::<KeyChange>(json!({"account": "a", "oldKey": {"kty": "EC"}})).is_err());
}

#[test]
fn renewal_info_and_cert_id() {
    let v = json!({
        "suggestedWindow": {"start": "2025-01-02T04:00:00Z", "end": "2025-01-03T04:00:00Z"},
        "explanationURL": "https://acme.example.com/docs/ari"
    });
    let ri: RenewalInfo = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(ri.suggested_window.start, datetime!(2025-01-02 04:00 UTC));
    assert!(ri.suggested_window.end > ri.suggested_window.start);
    assert_eq!(serde_json::to_value(&ri).unwrap(), v);

    // RFC 9773 §4.1's example: keyIdentifier 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4,
    // serial 00:87:65:43:21.
    let aki = [
        0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01,
        0xC8, 0xD4,
    ];
    let serial = [0x00, 0x87, 0x65, 0x43, 0x21];
    let id = renewal_cert_id(&aki, &serial);
    assert_eq!(id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
    assert_eq!(parse_renewal_cert_id(&id).unwrap(), (aki.to_vec(), serial.to_vec()));
    for bad in [
        "",
        "aYhba4dGQEHhs3uEe6CuLN4ByNQ",
        ".AIdlQyE",
        "aYhba4dGQEHhs3uEe6CuLN4ByNQ.",
        "aYhba4dGQEHhs3uEe6CuLN4ByNQ=.AIdlQyE",
        "a.b.c",
    ] {
        assert_eq!(parse_renewal_cert_id(bad).unwrap_err().kind, ProblemType::Malformed, "{bad}");
    }
}
