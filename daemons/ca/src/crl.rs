//! Building TBSCertLists (full, partitioned and delta CRLs) and assembling CRLs.

use std::time::SystemTime;

use der::asn1::Uint;
use signet_ipc::SignatureScheme;
use x509_cert::certificate::Version;
use x509_cert::crl::{RevokedCert, TbsCertList};
use x509_cert::ext::pkix::crl::dp::IssuingDistributionPoint;
use x509_cert::ext::pkix::name::DistributionPointName;
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, BaseCrlNumber, CrlNumber, CrlReason};
use x509_cert::ext::Extension;
use x509_cert::serial_number::SerialNumber;

use crate::alg::to_der;
use crate::cert::{assemble_signed, ext, ext_raw};
use crate::time::x509_time;
use crate::{CaError, Issuer};

/// One revoked certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevokedEntry {
    /// The certificate's serial number (big-endian, unsigned, as in the certificate).
    pub serial: Vec<u8>,
    /// When it was revoked.
    pub revocation_time: SystemTime,
    /// The reasonCode entry extension; `None` omits it (RFC 5280 prefers omitting
    /// `unspecified`, so `Some(Unspecified)` is also written as no extension).
    pub reason: Option<CrlReason>,
}

/// Everything a CRL says besides its issuer.
#[derive(Clone, Debug)]
pub struct CrlParams<'a> {
    /// thisUpdate.
    pub this_update: SystemTime,
    /// nextUpdate (required by RFC 5280 for conforming CAs).
    pub next_update: SystemTime,
    /// cRLNumber: monotonic per CRL scope, chosen by the caller (at most 20 octets).
    pub crl_number: u128,
    /// For a partitioned CRL: the shard's distribution point URL. Adds a critical
    /// issuingDistributionPoint with that URL and onlyContainsUserCerts.
    pub shard_url: Option<&'a str>,
    /// For a delta CRL: the cRLNumber of the base CRL (adds a critical deltaCRLIndicator).
    pub delta_base: Option<u128>,
    /// The revoked certificates.
    pub revoked: &'a [RevokedEntry],
}

/// Builds a version 2 TBSCertList (DER) for `issuer`.
pub fn build_tbs_crl(issuer: &Issuer, params: &CrlParams<'_>) -> Result<Vec<u8>, CaError> {
    if params.next_update <= params.this_update {
        return Err(CaError::CrlBadNextUpdate);
    }
    // Precompute the (at most ten) reasonCode extensions once: each entry clones one.
    let reason_ext = |r: CrlReason| ext(&r, false);
    let mut reasons: Vec<(CrlReason, Extension)> = Vec::new();
    let mut revoked = Vec::with_capacity(params.revoked.len());
    for entry in params.revoked {
        let crl_entry_extensions = match entry.reason {
            None | Some(CrlReason::Unspecified) => None,
            Some(r) => {
                let e = match reasons.iter().find(|(k, _)| *k == r) {
                    Some((_, e)) => e.clone(),
                    None => {
                        let e = reason_ext(r)?;
                        reasons.push((r, e.clone()));
                        e
                    }
                };
                Some(vec![e])
            }
        };
        revoked.push(RevokedCert {
            serial_number: serial(&entry.serial)?,
            revocation_date: x509_time(entry.revocation_time)?,
            crl_entry_extensions,
        });
    }

    let mut exts = vec![
        ext(
            &AuthorityKeyIdentifier {
                key_identifier: Some(der::asn1::OctetString::new(issuer.key_id.clone())?),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
            false,
        )?,
        ext(&CrlNumber(crl_number(params.crl_number)?), false)?,
    ];
    if let Some(base) = params.delta_base {
        if base >= params.crl_number {
            return Err(CaError::BadSerial("delta CRL base number must be below the CRL number"));
        }
        exts.push(ext(&BaseCrlNumber(crl_number(base)?), true)?);
    }
    if let Some(url) = params.shard_url {
        let idp = IssuingDistributionPoint {
            distribution_point: Some(DistributionPointName::FullName(vec![uri(url)?])),
            only_contains_user_certs: true,
            only_contains_ca_certs: false,
            only_some_reasons: None,
            indirect_crl: false,
            only_contains_attribute_certs: false,
        };
        exts.push(ext_raw(IDP_OID, true, &idp)?);
    }

    let tbs = TbsCertList {
        version: Version::V2,
        signature: issuer.signature_algorithm()?,
        issuer: issuer.name.clone(),
        this_update: x509_time(params.this_update)?,
        next_update: Some(x509_time(params.next_update)?),
        // RFC 5280 5.1.2.6: absent, not empty, when nothing is revoked.
        revoked_certificates: (!revoked.is_empty()).then_some(revoked),
        crl_extensions: Some(exts),
    };
    to_der(&tbs)
}

/// Wraps a TBSCertList and signd's signature into a CertificateList (DER).
pub fn assemble_crl(tbs_der: &[u8], scheme: SignatureScheme, signature: &[u8]) -> Result<Vec<u8>, CaError> {
    assemble_signed(tbs_der, scheme, signature, "TBSCertList")
}

/// id-ce-issuingDistributionPoint.
const IDP_OID: const_oid::ObjectIdentifier = const_oid::db::rfc5280::ID_CE_ISSUING_DISTRIBUTION_POINT;

fn uri(url: &str) -> Result<x509_cert::ext::pkix::name::GeneralName, CaError> {
    Ok(x509_cert::ext::pkix::name::GeneralName::UniformResourceIdentifier(
        der::asn1::Ia5String::new(url).map_err(|_| CaError::InvalidSan(url.into()))?,
    ))
}

fn serial(bytes: &[u8]) -> Result<SerialNumber, CaError> {
    if bytes.iter().all(|&b| b == 0) {
        return Err(CaError::BadSerial("zero or empty"));
    }
    SerialNumber::new(bytes).map_err(|_| CaError::BadSerial("longer than 20 octets"))
}

fn crl_number(n: u128) -> Result<Uint, CaError> {
    Ok(Uint::new(&n.to_be_bytes())?)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, UNIX_EPOCH};

    use der::Decode;
    use x509_cert::crl::TbsCertList;

    use super::*;
    use crate::testutil;

    fn entries(n: usize) -> Vec<RevokedEntry> {
        let base = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        (0..n)
            .map(|i| {
                let mut serial = [0u8; 16];
                serial[0] = 0x40;
                serial[8..].copy_from_slice(&(i as u64).to_be_bytes());
                RevokedEntry {
                    serial: serial.to_vec(),
                    revocation_time: base + Duration::from_secs(i as u64),
                    reason: match i % 4 {
                        0 => None,
                        1 => Some(CrlReason::KeyCompromise),
                        2 => Some(CrlReason::Superseded),
                        _ => Some(CrlReason::CessationOfOperation),
                    },
                }
            })
            .collect()
    }

    fn params(revoked: &[RevokedEntry]) -> CrlParams<'_> {
        let now = UNIX_EPOCH + Duration::from_secs(1_760_000_000);
        CrlParams {
            this_update: now,
            next_update: now + Duration::from_secs(7 * 86400),
            crl_number: 42,
            shard_url: None,
            delta_base: None,
            revoked,
        }
    }

    #[test]
    fn builds_entries_and_extensions() {
        let issuer = testutil::issuer();
        let revoked = entries(5);
        let mut p = params(&revoked);
        p.shard_url = Some("http://crl.example/7.crl");
        p.delta_base = Some(40);
        let der = build_tbs_crl(&issuer, &p).unwrap();
        let tbs = TbsCertList::from_der(&der).unwrap();
        assert_eq!(tbs.version, Version::V2);
        assert_eq!(tbs.revoked_certificates.as_ref().unwrap().len(), 5);
        let exts = tbs.crl_extensions.unwrap();
        assert_eq!(exts.len(), 4);
        assert!(exts.iter().filter(|e| e.critical).count() == 2);
    }

    #[test]
    fn empty_crl_omits_revoked_list_and_refuses_bad_times() {
        let issuer = testutil::issuer();
        let der = build_tbs_crl(&issuer, &params(&[])).unwrap();
        assert!(TbsCertList::from_der(&der).unwrap().revoked_certificates.is_none());
        let mut p = params(&[]);
        p.next_update = p.this_update;
        assert!(matches!(build_tbs_crl(&issuer, &p), Err(CaError::CrlBadNextUpdate)));
    }

    /// `cargo test --release -p signet-ca -- --ignored --nocapture crl_one_million`
    #[test]
    #[ignore]
    fn crl_one_million_entries_timing() {
        let issuer = testutil::issuer();
        let revoked = entries(1_000_000);
        let start = Instant::now();
        let der = build_tbs_crl(&issuer, &params(&revoked)).unwrap();
        let build = start.elapsed();
        let start = Instant::now();
        let parsed = crate::validate::validate_tbs_crl(&der, &issuer).unwrap();
        let validate = start.elapsed();
        println!(
            "1M-entry TBSCertList: {} bytes, build {:?}, validate {:?}, entries {}, peak RSS {} MiB",
            der.len(),
            build,
            validate,
            parsed.revoked_count,
            testutil::peak_rss_mib()
        );
        assert_eq!(parsed.revoked_count, 1_000_000);
    }
}
