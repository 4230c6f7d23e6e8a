//! One issuance, timed phase by phase, and the checks of what it returned.

use std::net::IpAddr;

use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::{X509StoreContext, X509};
use signet_acme::types::{AuthorizationStatus, ChallengeStatus, Identifier, IdentifierType};
use tokio::time::Instant;

use super::challenge::{ChallengeKind, Responder};
use super::client::Client;
use super::error::Error;
use super::keys::{self, KeyType};
use super::stats::{Phase, Sample};
use super::IdentifierKind;

/// What every issuance needs besides its client.
pub struct Plan<'a> {
    /// The challenge answered.
    pub challenge: ChallengeKind,
    /// The responder publishing the answers.
    pub responder: &'a Responder,
    /// The certificate key type.
    pub key_type: KeyType,
}

/// A successful issuance: its timing and the PEM chain.
pub struct Issued {
    /// The timing.
    pub sample: Sample,
    /// The certificate chain as served.
    pub chain_pem: bytes::Bytes,
    /// Where the order's certificate is (a POST-as-GET downloads it again).
    pub certificate_url: String,
}

/// Orders, validates, finalizes and downloads a certificate for `identifier`.
pub async fn issue(client: &mut Client, plan: &Plan<'_>, identifier: Identifier) -> Result<Issued, Error> {
    let mut phases = [std::time::Duration::ZERO; 5];
    let start = Instant::now();
    let mut mark = start;
    let mut lap = |phase: Phase| {
        let now = Instant::now();
        phases[phase as usize] = now - mark;
        mark = now;
    };

    let (order_url, order) = client.new_order(identifier.clone()).await?;
    lap(Phase::NewOrder);

    let mut authzs = Vec::with_capacity(order.authorizations.len());
    for url in &order.authorizations {
        authzs.push((url.as_str(), client.authorization(url).await?.0));
    }
    lap(Phase::Authz);

    for (url, authz) in authzs {
        match authz.status {
            // Reused from an earlier order of this account.
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            _ => return Err(Error::Invalid { what: "authorization", problem: None }),
        }
        let wanted = plan.challenge.challenge_type();
        let challenge = authz
            .challenges
            .iter()
            .find(|c| c.kind == wanted)
            .ok_or_else(|| Error::Protocol(format!("{url}: no {wanted} challenge offered")))?;
        let published = if plan.challenge == ChallengeKind::DnsPersist01 {
            let issuer = challenge
                .issuer_domain_names
                .as_ref()
                .and_then(|names| names.first())
                .ok_or_else(|| Error::Protocol(format!("{}: no issuer-domain-names", challenge.url)))?;
            let account = client.account_url().ok_or_else(|| Error::Protocol("no account URL yet".into()))?;
            plan.responder.publish_persist(&authz.identifier, issuer, account).await?
        } else {
            let token =
                challenge.token.as_deref().ok_or_else(|| Error::Protocol(format!("{}: no token", challenge.url)))?;
            // The token goes into a URL path, a DNS name's record and a digest:
            // only base64url is acceptable.
            signet_acme::validate::token(token).map_err(|e| Error::Protocol(format!("{}: {e}", challenge.url)))?;
            let key_authorization = signet_acme::validate::key_authorization(token, client.jwk());
            plan.responder.publish(&authz.identifier, token, &key_authorization).await?
        };
        let validated = async {
            let (status, retry) = client.respond(&challenge.url).await?;
            match status {
                // Validated while we waited for the answer: the authorization is valid too.
                Some(ChallengeStatus::Valid) => Ok(()),
                Some(ChallengeStatus::Invalid) => {
                    // The authorization says why.
                    client.poll_authorization(url, Some(std::time::Duration::ZERO)).await.map(drop)
                }
                _ => client.poll_authorization(url, retry).await.map(drop),
            }
        }
        .await;
        let retracted = plan.responder.retract(published).await;
        validated?;
        retracted?;
    }
    lap(Phase::Challenge);

    let key_type = plan.key_type;
    let kind = match identifier.kind {
        IdentifierType::Ip => IdentifierKind::Ip,
        _ => IdentifierKind::Dns,
    };
    let value = identifier.value.clone();
    let make_csr = move || key_type.generate().and_then(|key| keys::csr(&key, key_type, kind, &value));
    let csr = if key_type.is_quick() {
        make_csr()
    } else {
        // Seconds for RSA-4096: off the async threads.
        tokio::task::spawn_blocking(make_csr).await.map_err(Error::crypto)?
    }
    .map_err(Error::crypto)?;
    let (order, retry) = client.finalize(&order.finalize, &csr).await?;
    let order = client.poll_order(&order_url, order, retry).await?;
    lap(Phase::Finalize);

    let cert_url =
        order.certificate.ok_or_else(|| Error::Protocol(format!("{order_url}: valid but no certificate URL")))?;
    let chain_pem = client.download(&cert_url).await?;
    lap(Phase::Download);
    if !chain_pem.starts_with(b"-----BEGIN CERTIFICATE-----") {
        return Err(Error::Protocol(format!("{cert_url}: not a PEM certificate chain")));
    }
    Ok(Issued { sample: Sample { total: start.elapsed(), phases }, chain_pem, certificate_url: cert_url })
}

/// The chain's certificates, leaf first.
pub fn parse_chain(pem: &[u8]) -> Result<Vec<X509>, Error> {
    let chain = X509::stack_from_pem(pem).map_err(|e| Error::Verify(format!("parsing the chain: {e}")))?;
    if chain.is_empty() {
        return Err(Error::Verify("an empty chain".into()));
    }
    Ok(chain)
}

/// Verifies a chain (leaf first) with OpenSSL: trusting `roots` and, when
/// the chain ends in a self-signed certificate, that one; and checks that
/// the leaf names `identifier` in its subjectAltName.
pub fn verify_chain(chain: &[X509], roots: &[X509], identifier: &Identifier) -> Result<(), Error> {
    let fail = |what: &str, e: &dyn std::fmt::Display| Error::Verify(format!("{what}: {e}"));
    let (leaf, rest) = chain.split_first().ok_or_else(|| Error::Verify("an empty chain".into()))?;
    let mut store = X509StoreBuilder::new().map_err(|e| fail("store", &e))?;
    for root in roots {
        store.add_cert(root.clone()).map_err(|e| fail("store", &e))?;
    }
    if let Some(last) = rest.last() {
        if last.issued(last) == openssl::x509::X509VerifyResult::OK {
            store.add_cert(last.clone()).map_err(|e| fail("store", &e))?;
        }
    }
    let store = store.build();
    let mut intermediates = Stack::new().map_err(|e| fail("stack", &e))?;
    for cert in rest {
        intermediates.push(cert.clone()).map_err(|e| fail("stack", &e))?;
    }
    let mut context = X509StoreContext::new().map_err(|e| fail("context", &e))?;
    let result = context
        .init(&store, leaf, &intermediates, |c| Ok(c.verify_cert()?.then_some(()).ok_or_else(|| c.error())))
        .map_err(|e| fail("verifying", &e))?;
    result.map_err(|e| fail("chain", &e))?;
    if !names(leaf, identifier) {
        return Err(Error::Verify(format!("the certificate does not name {}", identifier.value)));
    }
    Ok(())
}

/// Does `cert`'s subjectAltName hold `identifier`?
fn names(cert: &X509, identifier: &Identifier) -> bool {
    let Some(sans) = cert.subject_alt_names() else { return false };
    match identifier.kind {
        IdentifierType::Ip => {
            let Ok(ip) = identifier.value.parse::<IpAddr>() else { return false };
            let octets = match ip {
                IpAddr::V4(v4) => v4.octets().to_vec(),
                IpAddr::V6(v6) => v6.octets().to_vec(),
            };
            sans.iter().any(|n| n.ipaddress() == Some(&octets[..]))
        }
        _ => sans.iter().any(|n| n.dnsname().is_some_and(|d| d.eq_ignore_ascii_case(&identifier.value))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::pkey::{PKey, Private};
    use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
    use openssl::x509::{X509Builder, X509NameBuilder};

    use super::*;

    fn cert(
        subject: &str,
        key: &PKey<Private>,
        issuer: Option<(&X509, &PKey<Private>)>,
        san: Option<&Identifier>,
        kt: KeyType,
    ) -> X509 {
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", subject).unwrap();
        let name = name.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(7).unwrap().to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(issuer.map_or(&name, |(c, _)| c.subject_name())).unwrap();
        b.set_pubkey(key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(2).unwrap()).unwrap();
        match san {
            Some(id) => {
                let mut s = SubjectAlternativeName::new();
                if id.kind == IdentifierType::Ip {
                    s.ip(&id.value)
                } else {
                    s.dns(&id.value)
                };
                let ext = s.build(&b.x509v3_context(issuer.map(|(c, _)| c.as_ref()), None)).unwrap();
                b.append_extension(ext).unwrap();
            }
            None => b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap(),
        }
        let signer = issuer.map_or(key, |(_, k)| k);
        b.sign(signer, kt.csr_digest()).unwrap();
        b.build()
    }

    /// A CA of each key type issues a leaf; the chain verifies against the
    /// root given or the one served, and the wrong name or root fails.
    #[test]
    fn chains_verify_and_name_the_identifier() {
        for kt in [KeyType::EcP256, KeyType::Ed25519, KeyType::MlDsa44] {
            let root_key = kt.generate().unwrap();
            let root = cert("root", &root_key, None, None, kt);
            let leaf_key = KeyType::EcP256.generate().unwrap();
            let dns = Identifier::dns("c0-1.bench.test");
            let leaf = cert("leaf", &leaf_key, Some((&root, &root_key)), Some(&dns), kt);
            verify_chain(std::slice::from_ref(&leaf), std::slice::from_ref(&root), &dns).unwrap();
            verify_chain(&[leaf.clone(), root.clone()], &[], &dns).unwrap();
            assert!(verify_chain(std::slice::from_ref(&leaf), &[], &dns).is_err(), "no root");
            let other = Identifier::dns("c0-2.bench.test");
            assert!(
                matches!(verify_chain(std::slice::from_ref(&leaf), std::slice::from_ref(&root), &other), Err(Error::Verify(m)) if m.contains("does not name"))
            );
            let stranger_key = kt.generate().unwrap();
            let stranger = cert("root", &stranger_key, None, None, kt);
            assert!(verify_chain(std::slice::from_ref(&leaf), &[stranger], &dns).is_err(), "{kt}: wrong root");
            assert_eq!(keys::issuer_key_type(&leaf, Some(&root)), Some(kt));
        }
        let key = KeyType::EcP256.generate().unwrap();
        let root = cert("root", &key, None, None, KeyType::EcP256);
        let ip = Identifier::ip("127.0.0.1");
        let leaf = cert("leaf", &key, Some((&root, &key)), Some(&ip), KeyType::EcP256);
        verify_chain(&[leaf], &[root], &ip).unwrap();
    }

    #[test]
    fn chains_parse_from_pem() {
        let key = KeyType::EcP256.generate().unwrap();
        let root = cert("root", &key, None, None, KeyType::EcP256);
        let mut pem = root.to_pem().unwrap();
        pem.extend(root.to_pem().unwrap());
        assert_eq!(parse_chain(&pem).unwrap().len(), 2);
        assert!(parse_chain(b"").is_err());
        assert!(parse_chain(b"-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n").is_err());
    }
}
