//! Building TBSCertLists (full, partitioned and delta CRLs) and assembling CRLs.

use std::time::SystemTime;

use der::asn1::{Uint, UintRef};
use der::{Decode, DecodeValue, Encode, EncodeValue, Header, Length, Reader, Sequence, SliceReader, Writer};
use signet_types::SignatureScheme;
use spki::AlgorithmIdentifierOwned;
use x509_cert::certificate::Version;
use x509_cert::ext::pkix::crl::dp::IssuingDistributionPoint;
use x509_cert::ext::pkix::name::DistributionPointName;
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, BaseCrlNumber, CrlNumber, CrlReason, FreshestCrl};
use x509_cert::ext::Extension;
use x509_cert::ext::Extensions;
use x509_cert::name::Name;
use x509_cert::time::Time;

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
    /// Only a delta CRL may list entries with reason removeFromCRL.
    pub delta_base: Option<u128>,
    /// For a complete CRL that has delta CRLs: where they are published (adds a
    /// non-critical freshestCRL, RFC 5280 5.2.6). Relying parties such as
    /// OpenSSL (`-use_deltas`) look for a delta CRL only when the base or the
    /// certificate carries it.
    pub freshest_crl_url: Option<&'a str>,
    /// The revoked certificates.
    pub revoked: &'a [RevokedEntry],
}

/// Builds a version 2 TBSCertList (DER) for `issuer`.
///
/// Entries are DER-encoded one by one (through `der`'s derived encoders) into one
/// buffer that becomes the body of `revokedCertificates`: no per-entry allocation,
/// and each entry's length is computed once, so a million entries build in well
/// under a second.
pub fn build_tbs_crl(issuer: &Issuer, params: &CrlParams<'_>) -> Result<Vec<u8>, CaError> {
    if params.next_update <= params.this_update {
        return Err(CaError::CrlBadNextUpdate);
    }
    if params.delta_base.is_none() && params.revoked.iter().any(|e| e.reason == Some(CrlReason::RemoveFromCRL)) {
        return Err(CaError::CrlRemoveFromCrlOutsideDelta);
    }
    // The (at most ten) reasonCode entry extensions, encoded once: the body of the
    // entry's `Extensions` SEQUENCE is the single Extension's DER.
    let mut reason_ders: Vec<(CrlReason, Vec<u8>)> = Vec::new();
    for entry in params.revoked {
        if let Some(r) = entry.reason.filter(|r| *r != CrlReason::Unspecified) {
            if !reason_ders.iter().any(|(k, _)| *k == r) {
                reason_ders.push((r, to_der(&ext(&r, false)?)?));
            }
        }
    }
    // ~45 octets per entry with a reason code.
    let mut body = Vec::with_capacity(params.revoked.len() * 48);
    for entry in params.revoked {
        let crl_entry_extensions = match entry.reason {
            None | Some(CrlReason::Unspecified) => None,
            Some(r) => reason_ders.iter().find(|(k, _)| *k == r).map(|(_, d)| RawSequence(d)),
        };
        RevokedEntryRef {
            serial_number: serial(&entry.serial)?,
            revocation_date: x509_time(entry.revocation_time)?,
            crl_entry_extensions,
        }
        .encode_to_vec(&mut body)?;
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
    if let Some(url) = params.freshest_crl_url {
        exts.push(ext(&FreshestCrl(crate::cert::crl_dp(url)?.0), false)?);
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

    let tbs = TbsCertListRef {
        version: Version::V2,
        signature: issuer.signature_algorithm()?,
        issuer: issuer.name.clone(),
        this_update: x509_time(params.this_update)?,
        next_update: Some(x509_time(params.next_update)?),
        // RFC 5280 5.1.2.6: absent, not empty, when nothing is revoked.
        revoked_certificates: (!body.is_empty()).then_some(RawSequence(&body)),
        crl_extensions: Some(exts),
    };
    to_der(&tbs)
}

/// TBSCertList with `revokedCertificates` kept as its encoded body: the same DER as
/// `x509_cert::crl::TbsCertList`, without a million owned entries.
#[derive(Sequence)]
pub(crate) struct TbsCertListRef<'a> {
    pub(crate) version: Version,
    pub(crate) signature: AlgorithmIdentifierOwned,
    pub(crate) issuer: Name,
    pub(crate) this_update: Time,
    pub(crate) next_update: Option<Time>,
    pub(crate) revoked_certificates: Option<RawSequence<'a>>,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    pub(crate) crl_extensions: Option<Extensions>,
}

/// One revokedCertificates entry, borrowed.
#[derive(Sequence)]
pub(crate) struct RevokedEntryRef<'a> {
    pub(crate) serial_number: UintRef<'a>,
    pub(crate) revocation_date: Time,
    pub(crate) crl_entry_extensions: Option<RawSequence<'a>>,
}

impl<'a> TbsCertListRef<'a> {
    /// Decodes every entry of revokedCertificates (strict DER), returning the count.
    pub(crate) fn count_revoked(&self) -> Result<usize, der::Error> {
        let Some(list) = &self.revoked_certificates else { return Ok(0) };
        let mut reader = SliceReader::new(list.0)?;
        let mut n = 0;
        while !reader.is_finished() {
            let entry = RevokedEntryRef::decode(&mut reader)?;
            if let Some(exts) = entry.crl_entry_extensions {
                let mut r = SliceReader::new(exts.0)?;
                while !r.is_finished() {
                    Extension::decode(&mut r)?;
                }
            }
            n += 1;
        }
        Ok(n)
    }
}

/// A SEQUENCE whose body is kept as already-encoded octets (a SEQUENCE OF built
/// or checked element by element).
pub(crate) struct RawSequence<'a>(pub(crate) &'a [u8]);

impl<'a> DecodeValue<'a> for RawSequence<'a> {
    fn decode_value<R: Reader<'a>>(reader: &mut R, header: Header) -> der::Result<Self> {
        Ok(Self(reader.read_slice(header.length)?))
    }
}

impl EncodeValue for RawSequence<'_> {
    fn value_len(&self) -> der::Result<Length> {
        Length::try_from(self.0.len())
    }

    fn encode_value(&self, writer: &mut impl Writer) -> der::Result<()> {
        writer.write(self.0)
    }
}

impl<'a> der::Sequence<'a> for RawSequence<'a> {}

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

fn serial(bytes: &[u8]) -> Result<UintRef<'_>, CaError> {
    if bytes.iter().all(|&b| b == 0) {
        return Err(CaError::BadSerial("zero or empty"));
    }
    let n = UintRef::new(bytes).map_err(|_| CaError::BadSerial("not an integer"))?;
    // As SerialNumber: at most 20 content octets once encoded.
    if n.value_len().map_err(CaError::Encode)? > Length::new(20) {
        return Err(CaError::BadSerial("longer than 20 octets"));
    }
    Ok(n)
}

fn crl_number(n: u128) -> Result<Uint, CaError> {
    Ok(Uint::new(&n.to_be_bytes())?)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, UNIX_EPOCH};

    use const_oid::AssociatedOid;
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
            freshest_crl_url: None,
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
    fn remove_from_crl_only_in_deltas_and_freshest_crl_is_non_critical() {
        let issuer = testutil::issuer();
        let mut revoked = entries(2);
        revoked[1].reason = Some(CrlReason::RemoveFromCRL);
        let mut p = params(&revoked);
        assert!(matches!(build_tbs_crl(&issuer, &p), Err(CaError::CrlRemoveFromCrlOutsideDelta)));
        p.delta_base = Some(40);
        let tbs = TbsCertList::from_der(&build_tbs_crl(&issuer, &p).unwrap()).unwrap();
        let entry = &tbs.revoked_certificates.as_ref().unwrap()[1];
        let reason = entry.crl_entry_extensions.as_ref().unwrap()[0].extn_value.as_bytes();
        assert_eq!(CrlReason::from_der(reason).unwrap(), CrlReason::RemoveFromCRL);

        let full = params(&[]);
        let p = CrlParams { freshest_crl_url: Some("http://crl.example/delta.crl"), ..full };
        let tbs = TbsCertList::from_der(&build_tbs_crl(&issuer, &p).unwrap()).unwrap();
        let exts = tbs.crl_extensions.unwrap();
        let fresh = exts.iter().find(|e| e.extn_id == FreshestCrl::OID).unwrap();
        assert!(!fresh.critical);
        let dps = FreshestCrl::from_der(fresh.extn_value.as_bytes()).unwrap();
        assert_eq!(dps.0.len(), 1);
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
    #[ignore = "measurement (1M-entry CRL build time); run by hand with --ignored --nocapture"]
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
