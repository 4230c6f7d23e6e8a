//! Chain checks against a small PKI made with OpenSSL: root, intermediate,
//! certificates, precertificates (direct and through a Precertificate
//! Signing Certificate).

use std::time::{SystemTime, UNIX_EPOCH};

use openssl::asn1::{Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage};
use openssl::x509::{X509Builder, X509Extension, X509NameBuilder};

use super::*;

/// A CA hierarchy for tests.
pub(crate) struct Pki {
    pub root: (X509, PKey<Private>),
    pub intermediate: (X509, PKey<Private>),
    serial: std::sync::atomic::AtomicU32,
}

fn key() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Options for one certificate.
pub(crate) struct Spec<'a> {
    pub cn: &'a str,
    pub ca: bool,
    pub poison: bool,
    pub psc: bool,
    pub not_before: i64,
    pub not_after: i64,
}

impl Spec<'_> {
    pub fn leaf(cn: &str) -> Spec<'_> {
        let now = unix(SystemTime::now());
        Spec { cn, ca: false, poison: false, psc: false, not_before: now - 3600, not_after: now + 90 * 86400 }
    }
}

fn build(spec: &Spec<'_>, key: &PKey<Private>, issuer: Option<(&X509, &PKey<Private>)>, serial: u32) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", spec.cn).unwrap();
    let name = name.build();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(serial).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(issuer.map_or(&*name, |(c, _)| c.subject_name())).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::from_unix(spec.not_before).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::from_unix(spec.not_after).unwrap()).unwrap();
    if spec.ca {
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
    }
    if spec.psc {
        let mut eku = ExtendedKeyUsage::new();
        eku.other("1.3.6.1.4.1.11129.2.4.4");
        b.append_extension(eku.build().unwrap()).unwrap();
    }
    if spec.poison {
        let oid = Asn1Object::from_str("1.3.6.1.4.1.11129.2.4.3").unwrap();
        let null = Asn1OctetString::new_from_bytes(&[0x05, 0x00]).unwrap();
        b.append_extension(X509Extension::new_from_der(&oid, true, &null).unwrap()).unwrap();
    }
    b.sign(issuer.map_or(key, |(_, k)| k), MessageDigest::sha256()).unwrap();
    b.build()
}

/// A CA certificate valid for ten years.
fn long(cn: &str, now: i64) -> Spec<'_> {
    Spec { cn, ca: true, poison: false, psc: false, not_before: now - 86400, not_after: now + 3650 * 86400 }
}

impl Pki {
    pub fn new() -> Self {
        let now = unix(SystemTime::now());
        // Distinct names per hierarchy, so that OpenSSL never mixes two of them up.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rk = key();
        let (root_cn, inter_cn) = (format!("Test Root {n}"), format!("Test Intermediate {n}"));
        let root = build(&long(&root_cn, now), &rk, None, 1);
        let ik = key();
        let inter = build(&long(&inter_cn, now), &ik, Some((&root, &rk)), 2);
        Self { root: (root, rk), intermediate: (inter, ik), serial: 10.into() }
    }

    pub fn roots_pem(&self) -> Vec<u8> {
        self.root.0.to_pem().unwrap()
    }

    pub fn roots(&self) -> Roots {
        Roots::from_pem(&self.roots_pem()).unwrap()
    }

    /// A certificate issued by the intermediate: `[leaf, intermediate]` as DER.
    pub fn chain(&self, spec: &Spec<'_>) -> Vec<Vec<u8>> {
        let serial = self.serial.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (ic, ik) = &self.intermediate;
        let leaf = build(spec, &key(), Some((ic, ik)), serial);
        vec![leaf.to_der().unwrap(), ic.to_der().unwrap()]
    }

    /// A precertificate issued through a Precertificate Signing Certificate:
    /// `[precert, PSC, intermediate]`.
    pub fn psc_chain(&self, cn: &str) -> Vec<Vec<u8>> {
        let serial = self.serial.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        let (ic, ik) = &self.intermediate;
        let pk = key();
        let mut psc_spec = Spec::leaf("Test PSC");
        psc_spec.ca = true;
        psc_spec.psc = true;
        let psc = build(&psc_spec, &pk, Some((ic, ik)), serial);
        let pre = build(&Spec { poison: true, ..Spec::leaf(cn) }, &key(), Some((&psc, &pk)), serial + 1);
        vec![pre.to_der().unwrap(), psc.to_der().unwrap(), ic.to_der().unwrap()]
    }
}

#[test]
fn certificates_and_precertificates_verify() {
    let pki = Pki::new();
    let roots = pki.roots();
    let now = SystemTime::now();
    let chain = pki.chain(&Spec::leaf("a.example"));
    let e = roots.check(&chain, Submission::Chain, None, now).unwrap();
    assert_eq!(e.entry, SignedEntry::X509(chain[0].clone()));
    // The root is added to the stored chain.
    assert_eq!(*e.issuers, vec![chain[1].clone(), pki.root.0.to_der().unwrap()]);
    assert_eq!(e.pre_certificate, None);
    assert_eq!(e.identity, identity_hash(&e.entry));

    let pre = pki.chain(&Spec { poison: true, ..Spec::leaf("b.example") });
    let e = roots.check(&pre, Submission::PreChain, None, now).unwrap();
    assert!(matches!(e.entry, SignedEntry::Precert { .. }));
    assert_eq!(e.pre_certificate.as_ref(), Some(&pre[0]));
    assert_eq!(e.entry, precert::precert_entry(&pre).unwrap());

    let psc = pki.psc_chain("c.example");
    let e = roots.check(&psc, Submission::PreChain, None, now).unwrap();
    let SignedEntry::Precert { issuer_key_hash, .. } = e.entry else { panic!() };
    assert_eq!(issuer_key_hash, precert::issuer_key_hash(&psc[2]).unwrap());
    assert_eq!(e.issuers.len(), 3);
}

#[test]
fn bad_submissions_are_refused() {
    let pki = Pki::new();
    let roots = pki.roots();
    let now = SystemTime::now();
    let t = unix(now);
    let pre = pki.chain(&Spec { poison: true, ..Spec::leaf("p.example") });
    assert_eq!(roots.check(&pre, Submission::Chain, None, now), Err(ChainError::UnexpectedPrecertificate));
    let cert = pki.chain(&Spec::leaf("c.example"));
    assert!(matches!(roots.check(&cert, Submission::PreChain, None, now), Err(ChainError::NotPrecertificate(_))));
    let expired = pki.chain(&Spec { not_before: t - 9000, not_after: t - 10, ..Spec::leaf("e.example") });
    assert_eq!(roots.check(&expired, Submission::Chain, None, now), Err(ChainError::Expired));
    let future = pki.chain(&Spec { not_before: t + 3600, ..Spec::leaf("f.example") });
    assert_eq!(roots.check(&future, Submission::Chain, None, now), Err(ChainError::NotYetValid));
    let window = TemporalWindow { start: t, end: t + 30 * 86400 };
    let e = roots.check(&cert, Submission::Chain, Some(window), now).unwrap_err();
    let ChainError::OutsideWindow { not_after, window: w } = e.clone() else { panic!("{e:?}") };
    // (The leaf was made a moment after `t`: 90 days from its own "now".)
    assert!((t + 90 * 86400..=t + 90 * 86400 + 2).contains(&not_after) && w == window, "{e:?}");
    // The refusal says why: the certificate's NotAfter and the log's interval.
    let text = e.to_string();
    let interval = format!("[{}, {})", rfc3339(t), rfc3339(t + 30 * 86400));
    assert!(text.contains(&rfc3339(not_after)) && text.contains(&interval), "{text}");
    let wide = TemporalWindow { start: t, end: t + 365 * 86400 };
    roots.check(&cert, Submission::Chain, Some(wide), now).unwrap();
    // Missing intermediate, unknown root, garbage.
    assert!(matches!(roots.check(&cert[..1], Submission::Chain, None, now), Err(ChainError::NotVerified(_))));
    let other = Pki::new();
    let foreign = other.chain(&Spec::leaf("x.example"));
    assert!(matches!(roots.check(&foreign, Submission::Chain, None, now), Err(ChainError::NotVerified(_))));
    let garbage = vec![b"not a certificate".to_vec()];
    assert!(matches!(
        roots.check(&garbage, Submission::Chain, None, now),
        Err(ChainError::BadCertificate { index: 0, .. })
    ));
    // A chain to a root added by a reload verifies.
    roots.reload_pem(&[pki.roots_pem(), other.roots_pem()].concat()).unwrap();
    roots.check(&foreign, Submission::Chain, None, now).unwrap();
    assert_eq!(roots.certificates().len(), 2);
    assert!(roots.reload_pem(b"garbage").is_err());
    assert_eq!(roots.certificates().len(), 2);
}

fn cached(roots: &Roots) -> usize {
    roots.verified_chains()
}

#[test]
fn a_chain_above_the_leaf_is_verified_once() {
    let pki = Pki::new();
    let roots = pki.roots();
    let now = SystemTime::now();
    let root = pki.root.0.to_der().unwrap();
    let first = pki.chain(&Spec::leaf("a.example"));
    let e = roots.check(&first, Submission::Chain, None, now).unwrap();
    assert_eq!(cached(&roots), 1);
    assert_eq!(roots.verified_chain_hits(), 0);
    // Another leaf under the same intermediate: the same entry as the full
    // check gives, from the cache.
    let second = pki.chain(&Spec::leaf("b.example"));
    let e2 = roots.check(&second, Submission::Chain, None, now).unwrap();
    assert_eq!(roots.verified_chain_hits(), 1);
    assert_eq!(e2.issuers, e.issuers);
    assert_eq!(*e2.issuers, vec![second[1].clone(), root.clone()]);
    assert_eq!(e2.entry, SignedEntry::X509(second[0].clone()));
    let full = pki.roots().check(&second, Submission::Chain, None, now).unwrap();
    assert_eq!(e2, full);
    // A precertificate through the same intermediate, and the leaf's own
    // rules still apply on a hit.
    let pre = pki.chain(&Spec { poison: true, ..Spec::leaf("p.example") });
    let e3 = roots.check(&pre, Submission::PreChain, None, now).unwrap();
    assert_eq!(e3.entry, precert::precert_entry(&[pre[0].clone(), pre[1].clone(), root.clone()]).unwrap());
    assert_eq!(e3, pki.roots().check(&pre, Submission::PreChain, None, now).unwrap());
    assert_eq!(roots.check(&pre, Submission::Chain, None, now), Err(ChainError::UnexpectedPrecertificate));
    assert!(matches!(roots.check(&second, Submission::PreChain, None, now), Err(ChainError::NotPrecertificate(_))));
    let t = unix(now);
    let expired = pki.chain(&Spec { not_before: t - 9000, not_after: t - 10, ..Spec::leaf("e.example") });
    assert_eq!(roots.check(&expired, Submission::Chain, None, now), Err(ChainError::Expired));
    let future = pki.chain(&Spec { not_before: t + 3600, ..Spec::leaf("f.example") });
    assert_eq!(roots.check(&future, Submission::Chain, None, now), Err(ChainError::NotYetValid));
    let window = TemporalWindow { start: t, end: t + 30 * 86400 };
    assert!(matches!(
        roots.check(&second, Submission::Chain, Some(window), now),
        Err(ChainError::OutsideWindow { .. })
    ));
    let hits = roots.verified_chain_hits();
    assert_eq!(hits, 2);
    // A chain through a Precertificate Signing Certificate: its own entry,
    // then a hit for the next precertificate it signs.
    let (ic, ik) = &pki.intermediate;
    let pk = key();
    let psc = build(&Spec { ca: true, psc: true, ..Spec::leaf("Test PSC") }, &pk, Some((ic, ik)), 500);
    let signed_by_psc = |cn: &str, serial: u32| {
        let pre = build(&Spec { poison: true, ..Spec::leaf(cn) }, &key(), Some((&psc, &pk)), serial);
        vec![pre.to_der().unwrap(), psc.to_der().unwrap(), ic.to_der().unwrap()]
    };
    let e4 = roots.check(&signed_by_psc("c.example", 501), Submission::PreChain, None, now).unwrap();
    assert_eq!(cached(&roots), 2);
    let p2 = signed_by_psc("d.example", 502);
    let e5 = roots.check(&p2, Submission::PreChain, None, now).unwrap();
    assert_eq!(roots.verified_chain_hits(), 3);
    assert_eq!(e4.issuers.len(), 3);
    assert_eq!(e5.issuers, e4.issuers);
    assert_eq!(e5, pki.roots().check(&p2, Submission::PreChain, None, now).unwrap());
    // The leaf alone, or with the root only: nothing to remember.
    assert!(matches!(roots.check(&second[..1], Submission::Chain, None, now), Err(ChainError::NotVerified(_))));
    let direct = vec![first[1].clone(), root.clone()];
    roots.check(&direct, Submission::Chain, None, now).unwrap();
    assert_eq!(cached(&roots), 2);
    assert_eq!(roots.verified_chain_hits(), 3);
}

#[test]
fn a_leaf_not_signed_by_the_cached_issuer_is_refused() {
    let pki = Pki::new();
    let roots = pki.roots();
    let now = SystemTime::now();
    let good = pki.chain(&Spec::leaf("good.example"));
    roots.check(&good, Submission::Chain, None, now).unwrap();
    assert_eq!(cached(&roots), 1);
    // Named as issued by the intermediate, signed by another key.
    let (ic, _) = &pki.intermediate;
    let forged = build(&Spec::leaf("forged.example"), &key(), Some((ic, &key())), 999);
    let chain = vec![forged.to_der().unwrap(), ic.to_der().unwrap()];
    assert!(matches!(roots.check(&chain, Submission::Chain, None, now), Err(ChainError::NotVerified(_))));
    let pre = build(&Spec { poison: true, ..Spec::leaf("forged.example") }, &key(), Some((ic, &key())), 1000);
    let chain = vec![pre.to_der().unwrap(), ic.to_der().unwrap()];
    assert!(matches!(roots.check(&chain, Submission::PreChain, None, now), Err(ChainError::NotVerified(_))));
    // Signed by the root, sent with the intermediate: the full check builds
    // the chain it can (to the root directly), as without the cache.
    let (rc, rk) = &pki.root;
    let by_root = build(&Spec::leaf("r.example"), &key(), Some((rc, rk)), 1001);
    let chain = vec![by_root.to_der().unwrap(), ic.to_der().unwrap()];
    let e = roots.check(&chain, Submission::Chain, None, now).unwrap();
    assert_eq!(*e.issuers, vec![rc.to_der().unwrap()]);
    assert_eq!(roots.verified_chain_hits(), 0);
    // The cached chain itself still serves leaves it did sign.
    roots.check(&pki.chain(&Spec::leaf("b.example")), Submission::Chain, None, now).unwrap();
    assert_eq!(roots.verified_chain_hits(), 1);
}

#[test]
fn a_reload_forgets_verified_chains() {
    let pki = Pki::new();
    let other = Pki::new();
    let roots = pki.roots();
    let now = SystemTime::now();
    roots.check(&pki.chain(&Spec::leaf("a.example")), Submission::Chain, None, now).unwrap();
    assert_eq!(cached(&roots), 1);
    // The same roots again: still a new set, verified afresh.
    roots.reload_pem(&pki.roots_pem()).unwrap();
    assert_eq!(cached(&roots), 0);
    roots.check(&pki.chain(&Spec::leaf("b.example")), Submission::Chain, None, now).unwrap();
    assert_eq!((cached(&roots), roots.verified_chain_hits()), (1, 0));
    // The root removed: what was verified through it is refused.
    roots.reload_pem(&other.roots_pem()).unwrap();
    assert_eq!(cached(&roots), 0);
    let c = pki.chain(&Spec::leaf("c.example"));
    assert!(matches!(roots.check(&c, Submission::Chain, None, now), Err(ChainError::NotVerified(_))));
    assert_eq!(cached(&roots), 0);
}
