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
//! | `released` | id, serial | [`Released`]: certificates released from hold, while they stay good |
//! | `base_holds` | id, serial | the certificates the delta CRLs' base lists on hold (value: the base's cRLNumber) |
//! | `base_holds` | id | the cRLNumber of the base that set was recorded for |
//!
//! A status change and its re-signed response are written in one transaction,
//! so a response never disagrees with the status it was made from.
//!
//! `released` and `base_holds` came after the first release of the store; they
//! are tables of their own so that stores of schema version 1 open unchanged
//! (postcard records cannot grow a field). A store without the `base_holds`
//! marker simply gets a new delta base at the next publication.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

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

/// A release from hold: the certificate was revoked with reason
/// certificateHold and is good again. Kept while it stays good (a new
/// revocation or hold drops it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// When released, Unix seconds; the revocationDate of its removeFromCRL
    /// entries in delta CRLs.
    pub time: i64,
    /// When it had been put on hold, Unix seconds.
    pub held_since: i64,
    /// The issuer's revocation sequence number of the release.
    pub seq: u64,
}

/// The hold entries of the full CRL that delta CRLs are currently relative to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BaseHolds {
    /// The base's cRLNumber the set was recorded for (0: never recorded).
    pub base_number: u64,
    /// The serials the base lists with reason certificateHold, in key order.
    pub serials: Vec<Vec<u8>>,
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

pub use signet_store::{SpaceEvent, SpaceWatch};

/// What a full store stops, for [`SpaceWatch`]'s log line.
const FULL_CONSEQUENCE: &str = "recording, revoking and releasing certificates and storing new responses and CRLs \
     fail until space is freed; what is already signed is still served";

/// The tables.
#[derive(Clone, Debug)]
pub struct Db {
    /// The environment. Write through [`Db::write`] and
    /// [`Db::write_grouped`], which watch for a full filesystem.
    pub store: Store,
    /// Writes refused for lack of space.
    pub space: Arc<SpaceWatch>,
    issuer_ids: Table<String, u32>,
    issuer_state: Table<u32, IssuerState>,
    certs: Table<Vec<u8>, CertRecord>,
    revoked: Table<Vec<u8>, RevokedRecord>,
    responses: Table<Vec<u8>, StoredResponse>,
    crls: Table<Vec<u8>, StoredCrl>,
    released: Table<Vec<u8>, Released>,
    base_holds: Table<Vec<u8>, u64>,
    successors: Table<String, Successor>,
}

/// An issuer served because `Registry.addSuccessor` asked for it (not in the
/// config): the issuer it succeeds, whose settings it takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Successor {
    /// The issuer it succeeds.
    pub based_on: String,
    /// When it was added, Unix seconds.
    pub added_unix_secs: i64,
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
            released: store.table("released")?,
            base_holds: store.table("base_holds")?,
            successors: store.table("successors")?,
            store,
            space: Arc::new(SpaceWatch::new(dir, FULL_CONSEQUENCE)),
        })
    }

    /// [`Store::write`], a refusal for lack of space logged once (see [`SpaceWatch`]).
    pub fn write<R>(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let outcome = self.store.write(f);
        self.space.note(&outcome);
        outcome
    }

    /// [`Store::write_grouped`], a refusal for lack of space logged once (see [`SpaceWatch`]).
    pub fn write_grouped<R, F>(&self, f: F) -> impl Future<Output = Result<R, StoreError>> + Send + 'static
    where
        F: for<'t> FnOnce(&mut WriteTxn<'t>) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        let (write, space) = (self.store.write_grouped(f), self.space.clone());
        async move {
            let outcome = write.await;
            space.note(&outcome);
            outcome
        }
    }

    /// The numeric id of issuer `name`, assigned on first use.
    pub fn issuer_id(&self, name: &str) -> Result<u32, StoreError> {
        let name = name.to_owned();
        // Read first: a store opened read-only still knows its issuers.
        if let Some(id) = self.store.read(|t| t.get(&self.issuer_ids, &name))? {
            return Ok(id);
        }
        self.write(|t| {
            if let Some(id) = t.get(&self.issuer_ids, &name)? {
                return Ok(id);
            }
            let next = t.len(&self.issuer_ids)? as u32 + 1;
            t.put(&self.issuer_ids, &name, &next)?;
            Ok(next)
        })
    }

    /// The issuers added by `addSuccessor`, oldest first.
    pub fn successors(&self) -> Result<Vec<(String, Successor)>, StoreError> {
        let mut all = self.store.read(|t| t.range(&self.successors, None, usize::MAX))?;
        all.sort_by_key(|(_, s)| s.added_unix_secs);
        Ok(all)
    }

    /// Records issuer `name` as a successor (fsynced, as every commit). Blocking.
    pub fn add_successor(&self, name: &str, successor: &Successor) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.write(|t| t.put(&self.successors, &name, successor))
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

    /// Stores a certificate's record and keeps the revoked index in step (a
    /// record that is not revoked, such as one released from hold, leaves it).
    pub fn put_cert(
        &self,
        t: &mut WriteTxn<'_>,
        issuer: u32,
        serial: &[u8],
        rec: &CertRecord,
    ) -> Result<(), StoreError> {
        let key = cert_key(issuer, serial);
        t.put(&self.certs, &key, rec)?;
        match rec.revoked {
            Some(revoked) => {
                t.put(&self.revoked, &key, &RevokedRecord { revoked, shard: rec.shard, not_after: rec.not_after })?
            }
            None => {
                t.delete(&self.revoked, &key)?;
            }
        }
        Ok(())
    }

    /// A certificate's release from hold, if it was released and is good.
    pub fn released(&self, t: &ReadTxn<'_>, issuer: u32, serial: &[u8]) -> Result<Option<Released>, StoreError> {
        t.get(&self.released, &cert_key(issuer, serial))
    }

    /// Records a release from hold.
    pub fn put_released(
        &self,
        t: &mut WriteTxn<'_>,
        issuer: u32,
        serial: &[u8],
        r: &Released,
    ) -> Result<(), StoreError> {
        t.put(&self.released, &cert_key(issuer, serial), r)
    }

    /// Forgets a release (the certificate is revoked or on hold again).
    pub fn delete_released(&self, t: &mut WriteTxn<'_>, issuer: u32, serial: &[u8]) -> Result<bool, StoreError> {
        t.delete(&self.released, &cert_key(issuer, serial))
    }

    /// A certificate's record and, when it is good after a release from hold, that release.
    pub fn cert_and_release(
        &self,
        t: &ReadTxn<'_>,
        issuer: u32,
        serial: &[u8],
    ) -> Result<Option<(CertRecord, Option<Released>)>, StoreError> {
        let Some(rec) = self.cert(t, issuer, serial)? else { return Ok(None) };
        let released = if rec.revoked.is_none() { self.released(t, issuer, serial)? } else { None };
        Ok(Some((rec, released)))
    }

    /// The hold entries of the current delta base, with the release of each
    /// one that is released now (`None` while it is still revoked, or if the
    /// release record is missing).
    pub fn base_holds(&self, t: &ReadTxn<'_>, issuer: u32) -> Result<(BaseHolds, Vec<Option<Released>>), StoreError> {
        const PAGE: usize = 4096;
        let prefix = issuer.to_be_bytes().to_vec();
        let mut holds = BaseHolds::default();
        let mut start = prefix.clone();
        loop {
            let rows = t.range(&self.base_holds, Some(&start), PAGE)?;
            let full = rows.len() == PAGE;
            let mine: Vec<(Vec<u8>, u64)> =
                rows.into_iter().take_while(|(k, _)| k.len() >= 4 && k[..4] == prefix[..]).collect();
            let more = full && mine.len() == PAGE;
            for (k, number) in &mine {
                if k.len() == 4 {
                    holds.base_number = *number;
                } else {
                    holds.serials.push(k[4..].to_vec());
                }
            }
            match mine.into_iter().last() {
                Some((mut k, _)) if more => {
                    k.push(0);
                    start = k;
                }
                _ => break,
            }
        }
        let released = holds.serials.iter().map(|s| self.released(t, issuer, s)).collect::<Result<_, _>>()?;
        Ok((holds, released))
    }

    /// Replaces the recorded hold entries of the delta base with those of the
    /// new base `base_number`.
    pub fn put_base_holds(
        &self,
        t: &mut WriteTxn<'_>,
        issuer: u32,
        base_number: u64,
        serials: &[Vec<u8>],
    ) -> Result<(), StoreError> {
        const PAGE: usize = 4096;
        let prefix = issuer.to_be_bytes().to_vec();
        loop {
            let keys: Vec<Vec<u8>> = t
                .range(&self.base_holds, Some(&prefix), PAGE)?
                .into_iter()
                .map(|(k, _)| k)
                .take_while(|k| k.len() >= 4 && k[..4] == prefix[..])
                .collect();
            if keys.is_empty() {
                break;
            }
            for k in &keys {
                t.delete(&self.base_holds, k)?;
            }
        }
        t.put(&self.base_holds, &prefix, &base_number)?;
        for s in serials {
            t.put(&self.base_holds, &cert_key(issuer, s), &base_number)?;
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
    pub fn responses_page(
        &self,
        issuer: u32,
        after: Option<&Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<CachedEntry>, StoreError> {
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
    /// The record as the IPC status type, with its release from hold if there is one.
    pub fn status(&self, serial: &[u8], released: Option<&Released>) -> CertStatus {
        CertStatus {
            serial: serial.to_vec(),
            state: if self.revoked.is_some() { CertState::Revoked } else { CertState::Good },
            not_after_unix_secs: self.not_after,
            crl_shard: self.shard,
            recorded_unix_secs: self.recorded,
            revoked_unix_secs: self.revoked.map_or(0, |r| r.time),
            reason: self.revoked.and_then(|r| RevocationReason::from_code(r.reason)),
            released_unix_secs: if self.revoked.is_none() { released.map_or(0, |r| r.time) } else { 0 },
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
        released_unix_secs: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(revoked: Option<Revoked>) -> CertRecord {
        CertRecord { not_after: 4_000_000_000, shard: 1, recorded: 1, revoked }
    }

    #[test]
    fn a_release_leaves_the_revoked_index_and_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let hold = Revoked { time: 10, reason: 6, seq: 1 };
        db.store.write(|t| db.put_cert(t, 1, &[7], &rec(Some(hold)))).unwrap();
        assert_eq!(db.revoked_all(1).unwrap().len(), 1);
        let released = Released { time: 20, held_since: 10, seq: 2 };
        db.store
            .write(|t| {
                db.put_cert(t, 1, &[7], &rec(None))?;
                db.put_released(t, 1, &[7], &released)
            })
            .unwrap();
        assert!(db.revoked_all(1).unwrap().is_empty());
        let (r, rel) = db.store.read(|t| db.cert_and_release(t, 1, &[7])).unwrap().unwrap();
        let status = r.status(&[7], rel.as_ref());
        assert_eq!((status.state, status.released_unix_secs), (CertState::Good, 20));
        // On hold again: the release is no longer reported.
        db.store
            .write(|t| {
                db.put_cert(t, 1, &[7], &rec(Some(Revoked { time: 30, reason: 6, seq: 3 })))?;
                db.delete_released(t, 1, &[7]).map(|_| ())
            })
            .unwrap();
        let (r, rel) = db.store.read(|t| db.cert_and_release(t, 1, &[7])).unwrap().unwrap();
        assert_eq!(r.status(&[7], rel.as_ref()).released_unix_secs, 0);
        assert!(r.status(&[7], rel.as_ref()).on_hold());
    }

    #[test]
    fn base_holds_are_replaced_per_issuer_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Db::open(dir.path()).unwrap();
            let (none, _) = db.store.read(|t| db.base_holds(t, 1)).unwrap();
            assert_eq!(none, BaseHolds::default());
            db.store.write(|t| db.put_base_holds(t, 1, 5, &[vec![1], vec![2, 3]])).unwrap();
            db.store.write(|t| db.put_base_holds(t, 2, 9, &[vec![4]])).unwrap();
            db.store.write(|t| db.put_released(t, 1, &[2, 3], &Released { time: 8, held_since: 4, seq: 6 })).unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        let (holds, releases) = db.store.read(|t| db.base_holds(t, 1)).unwrap();
        assert_eq!(holds, BaseHolds { base_number: 5, serials: vec![vec![1], vec![2, 3]] });
        assert_eq!(releases.iter().map(|r| r.map(|r| r.time)).collect::<Vec<_>>(), vec![None, Some(8)]);
        // A new base replaces the whole set of its issuer, and only that.
        db.store.write(|t| db.put_base_holds(t, 1, 12, &[])).unwrap();
        let (holds, _) = db.store.read(|t| db.base_holds(t, 1)).unwrap();
        assert_eq!(holds, BaseHolds { base_number: 12, serials: vec![] });
        let (other, _) = db.store.read(|t| db.base_holds(t, 2)).unwrap();
        assert_eq!(other, BaseHolds { base_number: 9, serials: vec![vec![4]] });
    }

    #[test]
    fn a_full_store_is_logged_once_per_episode() {
        let dir = tempfile::tempdir().unwrap();
        let watch = SpaceWatch::new(dir.path(), "nothing");
        let full = || Err::<(), _>(StoreError::NoSpace { operation: "commit" });
        let other = || Err::<(), _>(StoreError::Lmdb { operation: "commit", detail: "I/O error".into() });
        assert_eq!(watch.note(&Ok::<(), StoreError>(())), None);
        assert_eq!(watch.note(&other()), None);
        assert_eq!(watch.note(&full()), Some(SpaceEvent::Full));
        assert!(watch.is_full());
        for _ in 0..10 {
            assert_eq!(watch.note(&full()), None);
            assert_eq!(watch.note(&other()), None);
        }
        // A temp dir has room: the next success ends the episode, once.
        assert_eq!(watch.note(&Ok::<(), StoreError>(())), Some(SpaceEvent::Writable));
        assert!(!watch.is_full());
        assert_eq!(watch.note(&Ok::<(), StoreError>(())), None);
        // A new episode is logged anew; the map being full counts too.
        assert_eq!(watch.note(&Err::<(), _>(StoreError::MapFull)), Some(SpaceEvent::Full));
        assert_eq!(watch.note(&full()), None);
    }
}
