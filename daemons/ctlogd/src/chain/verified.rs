//! Issuer chains already verified to one of the roots, so that a submission
//! re-sending the same intermediates (as CT submitters do, over and over)
//! costs one parse and one signature check: the leaf's.
//!
//! The key is the SHA-256 of everything a submission sends above its leaf,
//! in order. A hit means OpenSSL, given the same untrusted certificates and
//! the same roots, would build the same chain above the leaf as it built for
//! the submission that filled the entry, provided it picks the same issuer
//! for the leaf: the leaf is then checked by OpenSSL itself against that
//! issuer alone (a store holding only it, as a partial-chain trust anchor),
//! with the same flags, so every check that concerns the leaf (the signature,
//! that the issuer's name, key identifier and key usage fit it, its
//! extensions) is OpenSSL's as before. A leaf that does not pass goes the
//! full way, so a hit never refuses what the full check accepts.
//!
//! An entry is only made where that holds whatever the leaf (see
//! [`Verified::new`]): OpenSSL used the first submitted issuer, no root
//! bears its name (OpenSSL looks in the roots first), and no certificate
//! above the leaf has name constraints or RFC 3779 resources, the two
//! checks in which the certificates above the issuer judge the leaf.
//!
//! The cache belongs to one root set: a reload starts an empty one. It holds
//! at most [`CAPACITY`] entries in two generations (a hit in the older one
//! moves the entry to the newer; when the newer is full, the older is
//! dropped), and an entry lapses at the earliest NotAfter of its chain.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use openssl::asn1::{Asn1Time, Asn1TimeRef};
use openssl::stack::Stack;
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509Ref, X509StoreContext, X509VerifyResult, X509};
use sha2::{Digest, Sha256};
use signet_ct::rfc6962::precert;

use crate::sequencer::IssuerChain;

/// The most entries the cache holds.
pub const CAPACITY: usize = 2048;

/// Extensions with which a certificate above the leaf constrains the leaf
/// itself: name constraints, RFC 3779 IP address and AS identifier blocks.
const LEAF_CONSTRAINTS: [const_oid::ObjectIdentifier; 3] = [
    const_oid::ObjectIdentifier::new_unwrap("2.5.29.30"),
    const_oid::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.7"),
    const_oid::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.8"),
];

/// The cache key of what a submission sends above its leaf.
pub type Key = [u8; 32];

/// The key of `above_leaf` (the submitted chain without its leaf), or `None`
/// if there is nothing above the leaf.
pub fn key(above_leaf: &[Vec<u8>]) -> Option<Key> {
    if above_leaf.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    h.update(b"ctlogd verified issuers v1\0");
    for der in above_leaf {
        h.update((der.len() as u64).to_be_bytes());
        h.update(der);
    }
    Some(h.finalize().into())
}

/// One verified chain above a leaf.
pub struct Verified {
    /// The issuer, the only trust anchor of a store with the chain check's flags.
    issuer: X509Store,
    /// The issuer as `fast.rs` checks leaves against it, where it can.
    fast: Option<super::fast::Issuer>,
    /// The chain OpenSSL built above the leaf, as DER: issuer first, root last.
    issuers: Arc<IssuerChain>,
    /// The earliest NotAfter of that chain (Unix seconds): the entry lapses then.
    expires: i64,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified").field("issuers", &self.issuers.len()).field("expires", &self.expires).finish()
    }
}

impl Verified {
    /// An entry for a full verification of `submitted` (DER, leaf first;
    /// `issuer` is `submitted[1]` parsed), `built` the chain OpenSSL built
    /// from it (DER, leaf first) to one of `roots`. `None` where a hit could
    /// judge some leaf differently from the full check.
    pub fn new(submitted: &[Vec<u8>], issuer: &X509, built: &[Vec<u8>], roots: &[X509]) -> Option<Self> {
        let (leaf, above) = submitted.split_first()?;
        let issuers = built.get(1..)?;
        // OpenSSL took the submitted issuer (not a root, nor the leaf
        // repeated), and would again for any leaf it fits: no root bears its name.
        if issuers.len() < 2 || above.first() != issuers.first() || above.contains(leaf) || issuers.contains(leaf) {
            return None;
        }
        for root in roots {
            if root.subject_name().try_cmp(issuer.subject_name()).ok()? == std::cmp::Ordering::Equal {
                return None;
            }
        }
        let mut expires = i64::MAX;
        for der in issuers {
            for oid in &LEAF_CONSTRAINTS {
                if precert::extension_value(der, oid).ok()?.is_some() {
                    return None;
                }
            }
            expires = expires.min(unix(X509::from_der(der).ok()?.not_after())?);
        }
        let mut b = X509StoreBuilder::new().ok()?;
        b.set_flags(super::VERIFY_FLAGS | X509VerifyFlags::PARTIAL_CHAIN).ok()?;
        b.add_cert(issuer.clone()).ok()?;
        let fast = super::fast::Issuer::new(issuer, &above[0]);
        Some(Self { issuer: b.build(), fast, issuers: Arc::new(IssuerChain::new(issuers.to_vec())), expires })
    }

    /// [`Verified::issuers_of`] for a leaf already parsed as strict DER, by
    /// `fast.rs` where it gives OpenSSL's answer; `None` sends the leaf to
    /// OpenSSL (`issuers_of`), not to a refusal.
    pub fn issuers_of_parsed(&self, leaf: &x509_cert::Certificate, submitted: &[Vec<u8>]) -> Option<Arc<IssuerChain>> {
        let (leaf_der, above) = submitted.split_first()?;
        let issuer = self.fast.as_ref()?;
        if above.contains(leaf_der) || self.issuers.contains(leaf_der) {
            return None;
        }
        super::fast::leaf_verifies(issuer, leaf, leaf_der).then(|| self.issuers.clone())
    }

    /// The chain above `leaf` (`submitted[0]` parsed; the entry's key is
    /// that of `submitted[1..]`) if OpenSSL verifies the leaf as issued by
    /// this entry's issuer; `None` sends it the full way.
    pub fn issuers_of(&self, leaf: &X509Ref, submitted: &[Vec<u8>]) -> Option<Arc<IssuerChain>> {
        let (leaf_der, above) = submitted.split_first()?;
        // A self-issued leaf, or one repeated above itself: OpenSSL builds
        // those chains its own way.
        if above.contains(leaf_der) || self.issuers.contains(leaf_der) || leaf.issued(leaf) == X509VerifyResult::OK {
            return None;
        }
        let untrusted = Stack::new().ok()?;
        let mut ctx = X509StoreContext::new().ok()?;
        let ok = ctx
            .init(&self.issuer, leaf, &untrusted, |ctx| {
                Ok(ctx.verify_cert()? && ctx.chain().is_some_and(|c| c.len() == 2))
            })
            .ok()?;
        ok.then(|| self.issuers.clone())
    }
}

/// The verified chains of one root set.
#[derive(Debug, Default)]
pub struct VerifiedIssuers {
    generations: Mutex<Generations>,
    hits: AtomicU64,
}

#[derive(Debug, Default)]
struct Generations {
    newer: HashMap<Key, Arc<Verified>>,
    older: HashMap<Key, Arc<Verified>>,
}

impl Generations {
    fn insert(&mut self, key: Key, v: Arc<Verified>) {
        if self.newer.len() >= CAPACITY / 2 {
            self.older = std::mem::take(&mut self.newer);
        }
        self.newer.insert(key, v);
    }
}

impl VerifiedIssuers {
    /// The entry for `key`, unless it has lapsed at `now` (Unix seconds).
    pub fn get(&self, key: &Key, now: i64) -> Option<Arc<Verified>> {
        let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.newer.get(key) {
            return (now < v.expires).then(|| v.clone());
        }
        let v = g.older.remove(key)?;
        if now >= v.expires {
            return None;
        }
        g.insert(*key, v.clone());
        Some(v)
    }

    /// Remembers `v` under `key` (if it has not lapsed at `now`).
    pub fn insert(&self, key: Key, v: Verified, now: i64) {
        if now < v.expires {
            self.generations.lock().unwrap_or_else(|p| p.into_inner()).insert(key, Arc::new(v));
        }
    }

    /// Counts a leaf checked through an entry.
    pub fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// How many leaves were checked through an entry.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many entries are held (both generations).
    pub fn entries(&self) -> usize {
        let g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        g.newer.len() + g.older.len()
    }
}

/// `t` in Unix seconds.
pub fn unix(t: &Asn1TimeRef) -> Option<i64> {
    let epoch = Asn1Time::from_unix(0).ok()?;
    let d = epoch.diff(t).ok()?;
    Some(i64::from(d.days) * 86400 + i64::from(d.secs))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::chain::tests::{Pki, Spec};

    /// An entry for `pki`'s intermediate, and its key.
    fn entry(pki: &Pki, above: &[Vec<u8>]) -> (Key, Verified) {
        let mut submitted = pki.chain(&Spec::leaf("a.example"));
        submitted.truncate(1);
        submitted.extend_from_slice(above);
        let built = vec![submitted[0].clone(), above[0].clone(), pki.root.0.to_der().unwrap()];
        let v = Verified::new(&submitted, &pki.intermediate.0, &built, std::slice::from_ref(&pki.root.0)).unwrap();
        (key(above).unwrap(), v)
    }

    #[test]
    fn entries_are_bounded_and_lapse() {
        let pki = Pki::new();
        let inter = pki.intermediate.0.to_der().unwrap();
        let cache = VerifiedIssuers::default();
        let now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let (first, v) = entry(&pki, std::slice::from_ref(&inter));
        let expires = v.expires;
        // The earliest NotAfter of the intermediate and root: ten years on.
        assert!(expires > now + 3000 * 86400);
        cache.insert(first, v, now);
        assert!(cache.get(&first, now).is_some());
        assert!(cache.get(&first, expires).is_none());
        let (lapsed, v) = entry(&pki, &[inter.clone(), b"x".to_vec()]);
        cache.insert(lapsed, v, expires);
        assert!(cache.get(&lapsed, now).is_none());
        // Distinct keys (something unused sent after the intermediate) up to
        // twice the capacity: never more than CAPACITY, the oldest gone, the
        // one kept in use kept.
        for i in 0..2 * CAPACITY {
            let (k, v) = entry(&pki, &[inter.clone(), i.to_be_bytes().to_vec()]);
            cache.insert(k, v, now);
            assert!(cache.get(&first, now).is_some(), "the entry in use stays");
            assert!(cache.entries() <= CAPACITY);
        }
        let (k0, _) = entry(&pki, &[inter.clone(), 0usize.to_be_bytes().to_vec()]);
        assert!(cache.get(&k0, now).is_none());
        assert!(cache.entries() >= CAPACITY / 2);
    }

    #[test]
    fn no_entry_where_a_hit_could_differ() {
        let pki = Pki::new();
        let (root, inter) = (pki.root.0.to_der().unwrap(), pki.intermediate.0.to_der().unwrap());
        let leaf = pki.chain(&Spec::leaf("a.example")).swap_remove(0);
        let roots = [pki.root.0.clone()];
        let built = vec![leaf.clone(), inter.clone(), root.clone()];
        let ic = &pki.intermediate.0;
        assert!(Verified::new(&[leaf.clone(), inter.clone()], ic, &built, &roots).is_some());
        // OpenSSL built the chain through something other than what was sent first.
        assert!(Verified::new(&[leaf.clone(), root.clone(), inter.clone()], ic, &built, &roots).is_none());
        // The leaf sent again above itself.
        assert!(Verified::new(&[leaf.clone(), inter.clone(), leaf.clone()], ic, &built, &roots).is_none());
        // The issuer is (or is named as) a root.
        assert!(Verified::new(&[leaf.clone(), inter.clone()], ic, &built, &[pki.root.0.clone(), ic.clone()]).is_none());
        let short = vec![leaf.clone(), root.clone()];
        assert!(Verified::new(&[leaf.clone(), root.clone()], &pki.root.0, &short, &roots).is_none());
    }
}
