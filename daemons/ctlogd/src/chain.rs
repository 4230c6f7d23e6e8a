//! Submission checks (RFC 6962 §4.1–4.2): the chain verifies to one of the
//! log's roots, the leaf is (or, for `add-chain`, is not) a precertificate,
//! the leaf is currently valid, and its NotAfter falls in the log's temporal
//! window. The result is the [`NewEntry`] the sequencer logs.
//!
//! Chains are verified with OpenSSL as CT logs verify them (as the CT
//! reference implementation does): unknown critical extensions are ignored
//! (a precertificate's poison is one), the validity of issuers is not checked
//! (only the leaf's), and no purpose is required. The stored chain is the one
//! OpenSSL built, from the leaf to the root, so a submitter may omit the root.
//!
//! What a submission sends above its leaf, once verified, is remembered
//! (`chain/verified.rs`): the next submission sending the same costs the check of
//! its leaf alone, under the same rules; where `chain/fast.rs` can tell
//! OpenSSL's answer for that leaf from one strict parse, without OpenSSL's
//! certificate parser.

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use der::Decode as _;
use openssl::asn1::Asn1Time;
use openssl::stack::Stack;
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509StoreContext, X509};
use sha2::{Digest, Sha256};
use signet_ct::rfc6962::{precert, SignedEntry};
use signet_ct::Hash;

use crate::sequencer::{IssuerChain, NewEntry};

mod fast;
mod verified;

use verified::{Verified, VerifiedIssuers};

/// The flags of every chain check (see the module's documentation).
const VERIFY_FLAGS: X509VerifyFlags = X509VerifyFlags::IGNORE_CRITICAL.union(X509VerifyFlags::NO_CHECK_TIME);

/// Why a submission is refused (all are client errors: HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// A chain element is not a DER certificate.
    #[error("chain element {index} is not a valid certificate: {detail}")]
    BadCertificate {
        /// Position in the chain.
        index: usize,
        /// Why.
        detail: String,
    },
    /// `add-chain` was given a precertificate.
    #[error("add-chain was given a precertificate; use add-pre-chain")]
    UnexpectedPrecertificate,
    /// `add-pre-chain` was given something that is not a precertificate.
    #[error("not a precertificate: {0}")]
    NotPrecertificate(String),
    /// The leaf's NotAfter is in the past.
    #[error("certificate has expired")]
    Expired,
    /// The leaf's NotBefore is in the future.
    #[error("certificate is not yet valid")]
    NotYetValid,
    /// The leaf's NotAfter is outside the log's temporal interval.
    #[error(
        "certificate NotAfter {} is outside this log's temporal interval [{}, {}): submit it to the log whose interval holds it",
        rfc3339(*not_after),
        rfc3339(window.start),
        rfc3339(window.end)
    )]
    OutsideWindow {
        /// The leaf's NotAfter (Unix seconds).
        not_after: i64,
        /// The log's interval.
        window: TemporalWindow,
    },
    /// The chain does not verify to one of the log's roots.
    #[error("chain does not verify to an accepted root: {0}")]
    NotVerified(String),
}

/// Errors loading roots.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RootsError {
    /// The PEM or DER does not parse.
    #[error("roots: {0}")]
    Parse(String),
    /// No root certificate.
    #[error("no root certificates")]
    Empty,
}

/// The `NotAfter` interval a log accepts (Unix seconds): `start <= NotAfter < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemporalWindow {
    /// Start, inclusive.
    pub start: i64,
    /// End, exclusive.
    pub end: i64,
}

/// Which endpoint a chain came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submission {
    /// `add-chain`: a certificate.
    Chain,
    /// `add-pre-chain`: a precertificate.
    PreChain,
}

/// The accepted roots, replaceable while the log runs (SIGHUP).
#[derive(Debug)]
pub struct Roots {
    current: RwLock<Arc<RootSet>>,
}

struct RootSet {
    store: X509Store,
    roots: Vec<X509>,
    ders: Vec<Vec<u8>>,
    /// Chains verified to these roots (a reload starts afresh).
    verified: VerifiedIssuers,
}

impl std::fmt::Debug for RootSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootSet").field("roots", &self.ders.len()).finish()
    }
}

impl Roots {
    /// Roots from PEM text holding one or more certificates.
    pub fn from_pem(pem: &[u8]) -> Result<Self, RootsError> {
        Ok(Self { current: RwLock::new(Arc::new(RootSet::from_pem(pem)?)) })
    }

    /// Replaces the roots with those of `pem`; on error the old ones stay.
    pub fn reload_pem(&self, pem: &[u8]) -> Result<usize, RootsError> {
        let set = RootSet::from_pem(pem)?;
        let n = set.ders.len();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        Ok(n)
    }

    /// The DER roots, for `get-roots`.
    pub fn certificates(&self) -> Vec<Vec<u8>> {
        self.set().ders.clone()
    }

    /// How many verified chains above a leaf the current roots remember.
    pub fn verified_chains(&self) -> usize {
        self.set().verified.entries()
    }

    /// How many leaves the current roots checked against a remembered chain.
    pub fn verified_chain_hits(&self) -> u64 {
        self.set().verified.hits()
    }

    fn set(&self) -> Arc<RootSet> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Checks a submitted chain (leaf first) and returns the entry to log.
    pub fn check(
        &self,
        chain: &[Vec<u8>],
        kind: Submission,
        window: Option<TemporalWindow>,
        now: SystemTime,
    ) -> Result<NewEntry, ChainError> {
        let set = self.set();
        let now_secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let key = chain.get(1..).and_then(verified::key);
        let cached = key.and_then(|k| set.verified.get(&k, now_secs));
        // A hit whose leaf `fast.rs` can judge as OpenSSL would: one parse of
        // the leaf (x509-cert, strict DER) serves every check. Anything it
        // cannot settle, refusals included, goes the way below.
        if let Some(entry) = cached.as_ref().and_then(|v| fast_check(&set, v, chain, kind, window, now_secs)) {
            return Ok(entry);
        }
        // Parsed as before (every element, in order) unless the chain above
        // the leaf is one already verified, byte for byte.
        let parse = |(index, der): (usize, &Vec<u8>)| {
            X509::from_der(der).map_err(|e| ChainError::BadCertificate { index, detail: first_error(&e) })
        };
        let mut certs = match cached {
            Some(_) => chain.iter().enumerate().take(1).map(parse).collect::<Result<Vec<X509>, _>>()?,
            None => chain.iter().enumerate().map(parse).collect::<Result<Vec<X509>, _>>()?,
        };
        let leaf = certs.first().ok_or(ChainError::BadCertificate { index: 0, detail: "empty chain".into() })?;
        let is_precert = precert::is_precertificate(&chain[0])
            .map_err(|e| ChainError::BadCertificate { index: 0, detail: e.to_string() })?;
        match (kind, is_precert) {
            (Submission::Chain, true) => return Err(ChainError::UnexpectedPrecertificate),
            (Submission::PreChain, false) => {
                return Err(ChainError::NotPrecertificate("no critical poison extension".into()))
            }
            _ => {}
        }
        check_validity(leaf, window, now)?;
        let issuers = match cached.and_then(|v| v.issuers_of(leaf, chain)) {
            Some(issuers) => {
                set.verified.hit();
                issuers
            }
            None => {
                if certs.len() < chain.len() {
                    // A hit whose issuer did not take this leaf: the full way.
                    let rest = chain.iter().enumerate().skip(1).map(parse).collect::<Result<Vec<X509>, _>>()?;
                    certs.extend(rest);
                }
                let built = set.verify(&certs)?;
                if let (Some(key), Some(issuer)) = (key, certs.get(1)) {
                    if let Some(v) = Verified::new(chain, issuer, &built, &set.roots) {
                        set.verified.insert(key, v, now_secs);
                    }
                }
                Arc::new(IssuerChain::new(built.into_iter().skip(1).collect()))
            }
        };
        let entry = match kind {
            Submission::Chain => SignedEntry::X509(chain[0].clone()),
            Submission::PreChain => {
                let full: Vec<&[u8]> =
                    std::iter::once(chain[0].as_slice()).chain(issuers.iter().map(Vec::as_slice)).collect();
                precert::precert_entry(&full).map_err(|e| ChainError::NotPrecertificate(e.to_string()))?
            }
        };
        // The bar signd holds the entry to before it signs the SCT: one entry
        // below it would fail its whole batch.
        entry.check_der().map_err(|detail| ChainError::BadCertificate { index: 0, detail })?;
        let pre_certificate = (kind == Submission::PreChain).then(|| chain[0].clone());
        Ok(NewEntry { identity: identity_hash(&entry), entry, pre_certificate, issuers })
    }
}

impl RootSet {
    fn from_pem(pem: &[u8]) -> Result<Self, RootsError> {
        let certs = X509::stack_from_pem(pem).map_err(|e| RootsError::Parse(first_error(&e)))?;
        if certs.is_empty() {
            return Err(RootsError::Empty);
        }
        let parse = |e: openssl::error::ErrorStack| RootsError::Parse(first_error(&e));
        let mut b = X509StoreBuilder::new().map_err(parse)?;
        b.set_flags(VERIFY_FLAGS).map_err(parse)?;
        let (mut roots, mut ders) = (Vec::new(), Vec::new());
        for c in certs {
            let der = c.to_der().map_err(parse)?;
            if !ders.contains(&der) {
                b.add_cert(c.clone()).map_err(parse)?;
                roots.push(c);
                ders.push(der);
            }
        }
        Ok(Self { store: b.build(), roots, ders, verified: VerifiedIssuers::default() })
    }

    /// The verified chain, leaf to root, as DER.
    fn verify(&self, certs: &[X509]) -> Result<Vec<Vec<u8>>, ChainError> {
        let internal = |e: openssl::error::ErrorStack| ChainError::NotVerified(first_error(&e));
        let mut untrusted = Stack::new().map_err(internal)?;
        for c in &certs[1..] {
            untrusted.push(c.clone()).map_err(internal)?;
        }
        let mut ctx = X509StoreContext::new().map_err(internal)?;
        ctx.init(&self.store, &certs[0], &untrusted, |ctx| {
            if !ctx.verify_cert()? {
                return Ok(Err(ChainError::NotVerified(ctx.error().error_string().to_string())));
            }
            let chain = match ctx.chain() {
                Some(chain) => chain.iter().map(|c| c.to_der()).collect::<Result<Vec<_>, _>>()?,
                None => return Ok(Err(ChainError::NotVerified("no chain built".into()))),
            };
            Ok(Ok(chain))
        })
        .map_err(internal)?
    }
}

/// [`Roots::check`] of a verified-chain hit with the leaf parsed once, by
/// x509-cert as strict DER: the kind of submission, the validity and window,
/// the leaf against the remembered issuer (`fast.rs`), the entry. `None`
/// wherever the answer is not a plain acceptance: the caller then checks
/// the submission the full way, which gives the refusal, if any, its reason.
fn fast_check(
    set: &RootSet,
    v: &Verified,
    chain: &[Vec<u8>],
    kind: Submission,
    window: Option<TemporalWindow>,
    now: i64,
) -> Option<NewEntry> {
    let leaf_der = chain.first()?;
    // Certificate::from_der is SignedEntry::check_der of an x509_entry.
    let leaf = x509_cert::Certificate::from_der(leaf_der).ok()?;
    let exts = leaf.tbs_certificate.extensions.as_deref().unwrap_or_default();
    // As precert::is_precertificate: no extension twice, a poison is critical.
    if exts.iter().enumerate().any(|(i, e)| exts[..i].iter().any(|o| o.extn_id == e.extn_id)) {
        return None;
    }
    let is_precert = match exts.iter().find(|e| e.extn_id == precert::POISON_OID) {
        None => false,
        Some(e) if e.critical => true,
        Some(_) => return None,
    };
    if is_precert != (kind == Submission::PreChain) {
        return None;
    }
    // As check_validity, in whole seconds.
    let validity = &leaf.tbs_certificate.validity;
    let secs = |t: x509_cert::time::Time| i64::try_from(t.to_unix_duration().as_secs()).ok();
    let (not_before, not_after) = (secs(validity.not_before)?, secs(validity.not_after)?);
    if not_after < now || not_before > now || window.is_some_and(|w| not_after < w.start || not_after >= w.end) {
        return None;
    }
    let issuers = v.issuers_of_parsed(&leaf, chain)?;
    set.verified.hit();
    let (entry, pre_certificate) = match kind {
        Submission::Chain => (SignedEntry::X509(leaf_der.clone()), None),
        Submission::PreChain => {
            let full: Vec<&[u8]> =
                std::iter::once(leaf_der.as_slice()).chain(issuers.iter().map(Vec::as_slice)).collect();
            let entry = precert::precert_entry(&full).ok()?;
            entry.check_der().ok()?;
            (entry, Some(leaf_der.clone()))
        }
    };
    Some(NewEntry { identity: identity_hash(&entry), entry, pre_certificate, issuers })
}

/// NotBefore <= now < NotAfter, and NotAfter inside the window.
fn check_validity(leaf: &X509, window: Option<TemporalWindow>, now: SystemTime) -> Result<(), ChainError> {
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let time = |s: i64| Asn1Time::from_unix(s).map_err(|e| ChainError::NotVerified(first_error(&e)));
    let now = time(secs(now))?;
    if leaf.not_after() < now {
        return Err(ChainError::Expired);
    }
    if leaf.not_before() > now {
        return Err(ChainError::NotYetValid);
    }
    if let Some(w) = window {
        if leaf.not_after() < time(w.start)? || leaf.not_after() >= time(w.end)? {
            let not_after = verified::unix(leaf.not_after()).unwrap_or(i64::MIN);
            return Err(ChainError::OutsideWindow { not_after, window: w });
        }
    }
    Ok(())
}

/// Unix seconds as RFC 3339 (UTC), as log lists write times.
pub fn rfc3339(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("{secs} (Unix seconds)"))
}

/// What makes two submissions the same entry: SHA-256 over a label, the
/// entry type and the entry (the certificate, or the issuer key hash and the
/// precertificate's TBS). The chain above the leaf and the submission time
/// do not count.
pub fn identity_hash(entry: &SignedEntry) -> Hash {
    let mut h = Sha256::new();
    h.update(b"ctlogd entry identity v1\0");
    h.update(entry.entry_type().to_be_bytes());
    match entry {
        SignedEntry::X509(der) => h.update(der),
        SignedEntry::Precert { issuer_key_hash, tbs_certificate } => {
            h.update(issuer_key_hash);
            h.update(tbs_certificate);
        }
    }
    h.finalize().into()
}

fn first_error(e: &openssl::error::ErrorStack) -> String {
    e.errors().first().and_then(|e| e.reason().map(str::to_string)).unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
#[path = "chain_tests.rs"]
pub(crate) mod tests;
