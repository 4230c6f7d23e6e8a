//! ocspd's LMDB tables and records.
//!
//! Keys start with the issuer's numeric id (4 bytes, big-endian), assigned the
//! first time ocspd sees the issuer's name, so one issuer's entries are
//! contiguous and ordered by serial.
//!
//! | table | key | value |
//! |---|---|---|
//! | `issuer_ids` | issuer name | id |
//! | `issuer_state` | id | CRL number, revocation sequence, delta base |
//! | `certs` | id, serial | [`CertRecord`]: the status of every recorded certificate |
//! | `revoked` | id, serial | [`RevokedRecord`]: the revoked subset, for building CRLs |
//! | `responses` | id, hash, serial | [`StoredResponse`]: pre-signed OCSP responses |
//! | `crls` | id, kind, shard | [`StoredCrl`]: the newest CRL of each kind |
//!
//! A status change and its re-signed response are written in one transaction,
//! so a response never disagrees with the status it was made from.

use std::path::Path;

use serde::{Deserialize, Serialize};
use signet_ca::ocsp::OcspHash;
use signet_ipc::{CertState, CertStatus, RevocationReason};
use signet_store::{Durability, ReadTxn, Store, StoreError, StoreOptions, Table, WriteTxn};

/// The LMDB application name and schema version.
pub const STORE_APPLICATION: &str = "ocspd";
/// Bumped when a record changes shape.
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// What ocspd knows of one certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertRecord {
    /// notAfter, Unix seconds.
    pub not_after: i64,
    /// CRL shard.
    pub shard: u32,
    /// When recorded, Unix seconds.
    pub recorded: i64,
    /// Set once revoked.
    pub revoked: Option<Revoked>,
}

/// A revocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// revocationDate, Unix seconds.
    pub time: i64,
    /// RFC 5280 reason code.
    pub reason: u8,
    /// The issuer's revocation sequence number when this was recorded (or last changed).
    pub seq: u64,
}

/// An entry of the `revoked` index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokedRecord {
    /// The revocation.
    pub revoked: Revoked,
    /// The certificate's CRL shard.
    pub shard: u32,
    /// The certificate's notAfter (expired entries may leave the CRL).
    pub not_after: i64,
}

/// A signed OCSP response, ready to serve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The OCSPResponse, DER. (serde_bytes: one copy, not a sequence of u8s.)
    #[serde(with = "serde_bytes")]
    pub der: Vec<u8>,
    /// thisUpdate, Unix seconds.
    pub this_update: i64,
    /// nextUpdate, Unix seconds.
    pub next_update: i64,
    /// The HTTP entity tag, computed once when signed.
    pub etag: String,
}

/// A signed CRL, ready to serve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCrl {
    /// The CertificateList, DER.
    #[serde(with = "serde_bytes")]
    pub der: Vec<u8>,
    /// Its cRLNumber.
    pub number: u64,
    /// thisUpdate, Unix seconds.
    pub this_update: i64,
    /// nextUpdate, Unix seconds.
    pub next_update: i64,
    /// Entries listed.
    pub entries: u64,
    /// The HTTP entity tag, computed once when signed.
    pub etag: String,
}

/// A strong HTTP entity tag for a signed object: 128 bits of its SHA-256.
pub fn etag(der: &[u8]) -> String {
    use sha2::Digest;
    format!("\"{}\"", hex::encode(&sha2::Sha256::digest(der)[..16]))
}

/// Per-issuer counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuerState {
    /// The last cRLNumber used (all CRL kinds share one sequence: RFC 5280 5.2.3).
    pub crl_number: u64,
    /// The last revocation sequence number used.
    pub revocation_seq: u64,
    /// The cRLNumber of the full CRL delta CRLs are relative to (0: none yet).
    pub base_number: u64,
    /// The revocation sequence that base covered.
    pub base_seq: u64,
    /// When the base was chosen, Unix seconds.
    pub base_time: i64,
}

/// Which CRL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CrlKind {
    /// The full CRL.
    Full,
    /// One shard.
    Shard(u32),
    /// The delta CRL.
    Delta,
}

/// The tables.
#[derive(Clone, Debug)]
pub struct Db {
    /// The environment.
    pub store: Store,
    issuer_ids: Table<String, u32>,
    issuer_state: Table<u32, IssuerState>,
    certs: Table<Vec<u8>, CertRecord>,
    revoked: Table<Vec<u8>, RevokedRecord>,
    responses: Table<Vec<u8>, StoredResponse>,
    crls: Table<Vec<u8>, StoredCrl>,
}

fn cert_key(issuer: u32, serial: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + serial.len());
    k.extend_from_slice(&issuer.to_be_bytes());
    k.extend_from_slice(serial);
    k
}

fn hash_tag(hash: OcspHash) -> u8 {
    match hash {
        OcspHash::Sha1 => 1,
        OcspHash::Sha256 => 2,
    }
}

/// The response key: issuer, hash tag, serial.
pub fn response_key(issuer: u32, hash: OcspHash, serial: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + serial.len());
    k.extend_from_slice(&issuer.to_be_bytes());
    k.push(hash_tag(hash));
    k.extend_from_slice(serial);
    k
}

fn crl_key(issuer: u32, kind: CrlKind) -> Vec<u8> {
    let mut k = issuer.to_be_bytes().to_vec();
    let (tag, shard) = match kind {
        CrlKind::Full => (0u8, 0u32),
        CrlKind::Shard(n) => (1, n),
        CrlKind::Delta => (2, 0),
    };
    k.push(tag);
    k.extend_from_slice(&shard.to_be_bytes());
    k
}

/// A cached response's place, as the refresher sees it.
#[derive(Clone, Debug)]
pub struct CachedEntry {
    /// Its key in `responses`.
    pub key: Vec<u8>,
    /// The CertID hash.
    pub hash: OcspHash,
    /// The serial.
    pub serial: Vec<u8>,
    /// nextUpdate, Unix seconds.
    pub next_update: i64,
}

/// Every hash a response may be cached under.
pub const HASHES: [OcspHash; 2] = [OcspHash::Sha1, OcspHash::Sha256];

impl Db {
    /// Opens (or creates) the store in `dir`. Every commit is fsynced: an
    /// acknowledged issuance or revocation survives a crash.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let mut opts = StoreOptions::new(STORE_APPLICATION, STORE_SCHEMA_VERSION);
        opts.map_size = 64 << 30;
        opts.durability = Durability::Sync;
        let store = Store::open(dir, opts)?;
        Ok(Self {
            issuer_ids: store.table("issuer_ids")?,
            issuer_state: store.table("issuer_state")?,
            certs: store.table("certs")?,
            revoked: store.table("revoked")?,
            responses: store.table("responses")?,
            crls: store.table("crls")?,
            store,
        })
    }

    /// The numeric id of issuer `name`, assigned on first use.
    pub fn issuer_id(&self, name: &str) -> Result<u32, StoreError> {
        let name = name.to_owned();
        self.store.write(|t| {
            if let Some(id) = t.get(&self.issuer_ids, &name)? {
                return Ok(id);
            }
            let next = t.len(&self.issuer_ids)? as u32 + 1;
            t.put(&self.issuer_ids, &name, &next)?;
            Ok(next)
        })
    }

    /// The issuer's counters.
    pub fn state(&self, t: &ReadTxn<'_>, issuer: u32) -> Result<IssuerState, StoreError> {
        Ok(t.get(&self.issuer_state, &issuer)?.unwrap_or_default())
    }

    /// The issuer's counters, inside a write.
    pub fn state_w(&self, t: &WriteTxn<'_>, issuer: u32) -> Result<IssuerState, StoreError> {
        Ok(t.get(&self.issuer_state, &issuer)?.unwrap_or_default())
    }

    /// Stores the issuer's counters.
    pub fn put_state(&self, t: &mut WriteTxn<'_>, issuer: u32, s: &IssuerState) -> Result<(), StoreError> {
        t.put(&self.issuer_state, &issuer, s)
    }

    /// A certificate's record.
    pub fn cert(&self, t: &ReadTxn<'_>, issuer: u32, serial: &[u8]) -> Result<Option<CertRecord>, StoreError> {
        t.get(&self.certs, &cert_key(issuer, serial))
    }

    /// A certificate's record, inside a write.
    pub fn cert_w(&self, t: &WriteTxn<'_>, issuer: u32, serial: &[u8]) -> Result<Option<CertRecord>, StoreError> {
        t.get(&self.certs, &cert_key(issuer, serial))
    }

    /// Stores a certificate's record and keeps the revoked index in step.
    pub fn put_cert(&self, t: &mut WriteTxn<'_>, issuer: u32, serial: &[u8], rec: &CertRecord) -> Result<(), StoreError> {
        let key = cert_key(issuer, serial);
        t.put(&self.certs, &key, rec)?;
        if let Some(revoked) = rec.revoked {
            t.put(&self.revoked, &key, &RevokedRecord { revoked, shard: rec.shard, not_after: rec.not_after })?;
        }
        Ok(())
    }

    /// A cached response.
    pub fn response(&self, t: &ReadTxn<'_>, key: &Vec<u8>) -> Result<Option<StoredResponse>, StoreError> {
        t.get(&self.responses, key)
    }

    /// Caches a response.
    pub fn put_response(&self, t: &mut WriteTxn<'_>, key: &Vec<u8>, r: &StoredResponse) -> Result<(), StoreError> {
        t.put(&self.responses, key, r)
    }

    /// Drops a cached response.
    pub fn delete_response(&self, t: &mut WriteTxn<'_>, key: &Vec<u8>) -> Result<bool, StoreError> {
        t.delete(&self.responses, key)
    }

    /// Which hashes `serial` has cached responses under.
    pub fn cached_hashes(&self, t: &WriteTxn<'_>, issuer: u32, serial: &[u8]) -> Result<Vec<OcspHash>, StoreError> {
        let mut out = Vec::new();
        for h in HASHES {
            if t.get(&self.responses, &response_key(issuer, h, serial))?.is_some() {
                out.push(h);
            }
        }
        Ok(out)
    }

    /// Cached responses of `issuer` from `after` (exclusive), up to `limit`. For the refresher.
    pub fn responses_page(&self, issuer: u32, after: Option<&Vec<u8>>, limit: usize) -> Result<Vec<CachedEntry>, StoreError> {
        let start = after.cloned().map(|mut k| {
            k.push(0);
            k
        });
        let start = start.unwrap_or_else(|| issuer.to_be_bytes().to_vec());
        let rows = self.store.read(|t| t.range(&self.responses, Some(&start), limit))?;
        Ok(rows
            .into_iter()
            .take_while(|(k, _)| k.len() > 5 && k[..4] == issuer.to_be_bytes())
            .filter_map(|(k, v)| {
                let hash = match k[4] {
                    1 => OcspHash::Sha1,
                    2 => OcspHash::Sha256,
                    _ => return None,
                };
                let serial = k[5..].to_vec();
                Some(CachedEntry { key: k, hash, serial, next_update: v.next_update })
            })
            .collect())
    }

    /// Every revoked entry of `issuer`, for a CRL: (serial, record).
    pub fn revoked_all(&self, issuer: u32) -> Result<Vec<(Vec<u8>, RevokedRecord)>, StoreError> {
        const PAGE: usize = 65_536;
        let prefix = issuer.to_be_bytes();
        let mut out = Vec::new();
        let mut start = prefix.to_vec();
        loop {
            let rows = self.store.read(|t| t.range(&self.revoked, Some(&start), PAGE))?;
            let full = rows.len() == PAGE;
            let mut last = None;
            for (k, v) in rows {
                if k.len() <= 4 || k[..4] != prefix {
                    return Ok(out);
                }
                last = Some(k.clone());
                out.push((k[4..].to_vec(), v));
            }
            match (full, last) {
                (true, Some(mut k)) => {
                    k.push(0);
                    start = k;
                }
                _ => return Ok(out),
            }
        }
    }

    /// The newest CRL of a kind.
    pub fn crl(&self, issuer: u32, kind: CrlKind) -> Result<Option<StoredCrl>, StoreError> {
        self.store.read(|t| t.get(&self.crls, &crl_key(issuer, kind)))
    }

    /// Stores a CRL.
    pub fn put_crl(&self, t: &mut WriteTxn<'_>, issuer: u32, kind: CrlKind, crl: &StoredCrl) -> Result<(), StoreError> {
        t.put(&self.crls, &crl_key(issuer, kind), crl)
    }

    /// (certificates, revoked) recorded for `issuer`... approximately, for health:
    /// whole-table counts (all issuers).
    pub fn counts(&self) -> Result<(u64, u64), StoreError> {
        self.store.read(|t| Ok((t.len(&self.certs)?, t.len(&self.revoked)?)))
    }
}

impl CertRecord {
    /// The record as the IPC status type.
    pub fn status(&self, serial: &[u8]) -> CertStatus {
        CertStatus {
            serial: serial.to_vec(),
            state: if self.revoked.is_some() { CertState::Revoked } else { CertState::Good },
            not_after_unix_secs: self.not_after,
            crl_shard: self.shard,
            recorded_unix_secs: self.recorded,
            revoked_unix_secs: self.revoked.map_or(0, |r| r.time),
            reason: self.revoked.and_then(|r| RevocationReason::from_code(r.reason)),
        }
    }
}

/// The status of a serial ocspd never recorded.
pub fn unknown_status(serial: &[u8]) -> CertStatus {
    CertStatus {
        serial: serial.to_vec(),
        state: CertState::Unknown,
        not_after_unix_secs: 0,
        crl_shard: 0,
        recorded_unix_secs: 0,
        revoked_unix_secs: 0,
        reason: None,
    }
}
