//! The synthetic chains `ct-load` submits: a test root and intermediate
//! (ECDSA P-256), a Precertificate Signing Certificate the intermediate
//! certified (RFC 6962 §3.1), and distinct leaf certificates or
//! precertificates made fast.
//!
//! A leaf is a copy of a template `TBSCertificate` with its serial number
//! and the counter in its subject CN and DNS name patched in place (fixed
//! width, so no length changes), signed by the intermediate: one ECDSA
//! signature and a few copies per leaf, rather than building the certificate
//! through OpenSSL's X509 builder each time. Every leaf shares one key pair;
//! no log looks at it. A precertificate comes from a second template, the
//! first with the critical poison extension appended (and, when the
//! Precertificate Signing Certificate signs it, that certificate's name as
//! issuer and its key identifier); the first template patched the same way
//! is the TBS of its final certificate, which is what the log's SCT signs
//! ([`LeafFactory::precert_entry_tbs`]).
//!
//! [`LeafPool`] makes leaves on background threads ahead of use, so that
//! making them never limits the submission rate: it fills up to a target,
//! rests until its queue falls below a quarter of that, then refills.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use der::{Decode as _, Encode as _};
use openssl::asn1::{Asn1Integer, Asn1Object, Asn1OctetString, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::sign::Signer;
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName, SubjectKeyIdentifier,
};
use openssl::x509::{X509Builder, X509Extension, X509Name, X509NameBuilder, X509};
use rand_core::{OsRng, RngCore};

/// The test CA: a root and an intermediate it signed, with their keys, and
/// the intermediate's Precertificate Signing Certificate.
pub struct TestPki {
    /// The root (what a log under test must accept: `root.pem`).
    pub root: X509,
    /// The intermediate that signs the leaves.
    pub intermediate: X509,
    /// The intermediate's key.
    pub intermediate_key: PKey<Private>,
    /// The Precertificate Signing Certificate (EKU 1.3.6.1.4.1.11129.2.4.4,
    /// CA, issued by the intermediate) and its key, if the directory has one
    /// (older ones do not).
    pub precert_signer: Option<(X509, PKey<Private>)>,
}

/// The files of a [`TestPki`] in its directory.
const FILES: [&str; 4] = ["root.pem", "root-key.pem", "intermediate.pem", "intermediate-key.pem"];
/// The Precertificate Signing Certificate's files (made with the others).
const PSC_FILES: [&str; 2] = ["precert-signer.pem", "precert-signer-key.pem"];

/// The OID of the precertificate poison extension (RFC 6962 §3.1).
const POISON_OID: &str = "1.3.6.1.4.1.11129.2.4.3";
/// The EKU of a Precertificate Signing Certificate (RFC 6962 §3.1).
const PRECERT_SIGNING_OID: &str = "1.3.6.1.4.1.11129.2.4.4";

impl TestPki {
    /// Loads the CA from `dir`, or creates it there (the directory too) when
    /// none of its files exist. `root.pem` is the root for the log's config.
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Self> {
        let paths: Vec<PathBuf> = FILES.iter().map(|f| dir.join(f)).collect();
        let present = paths.iter().filter(|p| p.exists()).count();
        if present == FILES.len() {
            return Self::load(&paths);
        }
        if present > 0 {
            bail!("{} holds only some of {FILES:?}: remove them or pick another directory", dir.display());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let pki = Self::create()?;
        let root_key = pki.root_key_pem.clone();
        let (psc, psc_key) = pki.pki.precert_signer.as_ref().context("a new PKI has a precertificate signer")?;
        let writes: [(PathBuf, Vec<u8>); 6] = [
            (paths[0].clone(), pki.pki.root.to_pem()?),
            (paths[1].clone(), root_key),
            (paths[2].clone(), pki.pki.intermediate.to_pem()?),
            (paths[3].clone(), pki.pki.intermediate_key.private_key_to_pem_pkcs8()?),
            (dir.join(PSC_FILES[0]), psc.to_pem()?),
            (dir.join(PSC_FILES[1]), psc_key.private_key_to_pem_pkcs8()?),
        ];
        for (path, pem) in writes {
            std::fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(pki.pki)
    }

    fn load(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
        let dir = paths[0].parent().unwrap_or(Path::new("."));
        let (psc, psc_key) = (dir.join(PSC_FILES[0]), dir.join(PSC_FILES[1]));
        let precert_signer = if psc.exists() && psc_key.exists() {
            Some((
                X509::from_pem(&read(&psc)?).context(PSC_FILES[0])?,
                PKey::private_key_from_pem(&read(&psc_key)?).context(PSC_FILES[1])?,
            ))
        } else {
            None
        };
        Ok(Self {
            root: X509::from_pem(&read(&paths[0])?).context("root.pem")?,
            intermediate: X509::from_pem(&read(&paths[2])?).context("intermediate.pem")?,
            intermediate_key: PKey::private_key_from_pem(&read(&paths[3])?).context("intermediate-key.pem")?,
            precert_signer,
        })
    }

    fn create() -> anyhow::Result<Created> {
        let root_key = p256_key()?;
        let root_name = name("ct-load Test Root")?;
        let mut b = ca_builder(&root_name, &root_name, &root_key)?;
        b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None))?;
        b.append_extension(ski)?;
        b.sign(&root_key, MessageDigest::sha256())?;
        let root = b.build();

        let key = p256_key()?;
        let intermediate_name = name("ct-load Test Intermediate")?;
        let mut b = ca_builder(&intermediate_name, &root_name, &key)?;
        // No path length limit: the Precertificate Signing Certificate is a CA below it.
        b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(Some(&root), None))?;
        b.append_extension(ski)?;
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&root), None))?;
        b.append_extension(aki)?;
        b.sign(&root_key, MessageDigest::sha256())?;
        let intermediate = b.build();

        let psc_key = p256_key()?;
        let mut b = ca_builder(&name("ct-load Test Precertificate Signer")?, &intermediate_name, &psc_key)?;
        b.append_extension(BasicConstraints::new().critical().ca().pathlen(0).build()?)?;
        b.append_extension(ExtendedKeyUsage::new().other(PRECERT_SIGNING_OID).build()?)?;
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(Some(&intermediate), None))?;
        b.append_extension(ski)?;
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(&intermediate), None))?;
        b.append_extension(aki)?;
        b.sign(&key, MessageDigest::sha256())?;
        let psc = b.build();
        Ok(Created {
            root_key_pem: root_key.private_key_to_pem_pkcs8()?,
            pki: Self { root, intermediate, intermediate_key: key, precert_signer: Some((psc, psc_key)) },
        })
    }
}

struct Created {
    pki: TestPki,
    root_key_pem: Vec<u8>,
}

fn p256_key() -> anyhow::Result<PKey<Private>> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    Ok(PKey::from_ec_key(EcKey::generate(&group)?)?)
}

fn name(cn: &str) -> anyhow::Result<X509Name> {
    let mut n = X509NameBuilder::new()?;
    n.append_entry_by_nid(Nid::ORGANIZATIONNAME, "Signet ct-load")?;
    n.append_entry_by_nid(Nid::COMMONNAME, cn)?;
    Ok(n.build())
}

/// A CA certificate's builder: ten years from yesterday, a random serial,
/// keyCertSign and cRLSign.
fn ca_builder(subject: &X509Name, issuer: &X509Name, key: &PKey<Private>) -> anyhow::Result<X509Builder> {
    let mut b = X509Builder::new()?;
    b.set_version(2)?;
    let serial = random_serial()?;
    b.set_serial_number(&serial)?;
    b.set_subject_name(subject)?;
    b.set_issuer_name(issuer)?;
    b.set_pubkey(key)?;
    let now = unix_now();
    let (not_before, not_after) = (Asn1Time::from_unix(now - 86_400)?, Asn1Time::from_unix(now + 10 * 365 * 86_400)?);
    b.set_not_before(&not_before)?;
    b.set_not_after(&not_after)?;
    b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build()?)?;
    Ok(b)
}

fn random_serial() -> anyhow::Result<Asn1Integer> {
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    bytes[0] = (bytes[0] & 0x3f) | 0x40;
    Ok(BigNum::from_slice(&bytes)?.to_asn1_integer()?)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// What a [`LeafFactory`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entries {
    /// Certificates (`add-chain`).
    Certificates,
    /// Precertificates (`add-pre-chain`).
    Precertificates,
    /// Both in turn: odd numbers are precertificates.
    Mixed,
}

/// Whether a [`Leaf`] is a certificate or a precertificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafKind {
    /// A certificate, for `add-chain`.
    Certificate,
    /// A precertificate, for `add-pre-chain`.
    Precertificate,
}

/// One template TBS and where to patch it, with the key that signs copies of it.
struct Template {
    tbs: Vec<u8>,
    /// Where the 8-byte counter of the serial number sits in `tbs`.
    serial_at: usize,
    /// Where the 16 hex digits of the counter sit in the subject CN and the
    /// DNS name.
    name_at: Vec<usize>,
    /// The DER `AlgorithmIdentifier` of the signature.
    algorithm: Vec<u8>,
    key: PKey<Private>,
}

/// The fields every template shares: a leaf's identity but for its counter.
struct LeafFields {
    run_hex: String,
    serial_bytes: Vec<u8>,
    dns: String,
    placeholder: String,
    key: PKey<Private>,
    not_before: Asn1Time,
    not_after: Asn1Time,
}

impl Template {
    /// A leaf issued by `issuer` (signed with `issuer_key`), with the poison
    /// extension last when `poison`.
    fn new(f: &LeafFields, issuer: &X509, issuer_key: &PKey<Private>, poison: bool) -> anyhow::Result<Self> {
        let mut b = X509Builder::new()?;
        b.set_version(2)?;
        let serial = BigNum::from_slice(&f.serial_bytes)?.to_asn1_integer()?;
        b.set_serial_number(&serial)?;
        let mut subject = X509NameBuilder::new()?;
        subject.append_entry_by_nid(Nid::COMMONNAME, &f.dns)?;
        b.set_subject_name(&subject.build())?;
        b.set_issuer_name(issuer.subject_name())?;
        b.set_pubkey(&f.key)?;
        b.set_not_before(&f.not_before)?;
        b.set_not_after(&f.not_after)?;
        b.append_extension(BasicConstraints::new().critical().build()?)?;
        b.append_extension(KeyUsage::new().critical().digital_signature().build()?)?;
        b.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
        let san = SubjectAlternativeName::new().dns(&f.dns).build(&b.x509v3_context(Some(issuer), None))?;
        b.append_extension(san)?;
        let aki = AuthorityKeyIdentifier::new().keyid(true).build(&b.x509v3_context(Some(issuer), None))?;
        b.append_extension(aki)?;
        if poison {
            let (oid, null) = (Asn1Object::from_str(POISON_OID)?, Asn1OctetString::new_from_bytes(&[0x05, 0x00])?);
            b.append_extension(X509Extension::new_from_der(&oid, true, &null)?)?;
        }
        b.sign(issuer_key, MessageDigest::sha256())?;
        let template = b.build().to_der()?;

        let (cert_body, _) = der_element(&template, 0).context("template certificate")?;
        let (tbs_range, next) = der_element(&template, cert_body.start).context("template TBS")?;
        let (alg_range, _) = der_element(&template, next).context("template algorithm")?;
        let tbs = template[tbs_range.full.clone()].to_vec();
        let algorithm = template[alg_range.full].to_vec();
        let serial_at = find_all(&tbs, &f.serial_bytes);
        let name_at = find_all(&tbs, f.placeholder.as_bytes());
        if serial_at.len() != 1 || name_at.len() != 2 {
            bail!("template TBS: found the serial {} times, the name {} times", serial_at.len(), name_at.len());
        }
        Ok(Self {
            serial_at: serial_at[0] + 8,
            name_at: name_at.iter().map(|at| at + f.run_hex.len() + 1).collect(),
            tbs,
            algorithm,
            key: issuer_key.clone(),
        })
    }

    /// The TBS with counter `n` patched in.
    fn tbs(&self, n: u64) -> Vec<u8> {
        let mut tbs = self.tbs.clone();
        tbs[self.serial_at..self.serial_at + 8].copy_from_slice(&n.to_be_bytes());
        let hex = format!("{n:016x}");
        for &at in &self.name_at {
            tbs[at..at + 16].copy_from_slice(hex.as_bytes());
        }
        tbs
    }

    /// Copy `n`, signed (DER).
    fn sign(&self, n: u64) -> anyhow::Result<Vec<u8>> {
        let tbs = self.tbs(n);
        let sig = Signer::new(MessageDigest::sha256(), &self.key)?.sign_oneshot_to_vec(&tbs)?;
        let mut bits = Vec::with_capacity(sig.len() + 4);
        bits.push(0x03);
        push_len(&mut bits, sig.len() + 1);
        bits.push(0);
        bits.extend_from_slice(&sig);
        let inner = tbs.len() + self.algorithm.len() + bits.len();
        let mut cert = Vec::with_capacity(inner + 4);
        cert.push(0x30);
        push_len(&mut cert, inner);
        cert.extend_from_slice(&tbs);
        cert.extend_from_slice(&self.algorithm);
        cert.extend_from_slice(&bits);
        Ok(cert)
    }
}

/// Makes distinct leaf certificates and precertificates from templates (see
/// the module docs).
pub struct LeafFactory {
    certificate: Template,
    precertificate: Template,
    entries: Entries,
    /// Standard base64 of what follows a certificate in a request: the intermediate.
    chain_b64: Vec<String>,
    /// What follows a precertificate: the intermediate, after the
    /// Precertificate Signing Certificate when it signs them.
    pre_chain_b64: Vec<String>,
    /// SHA-256 of the intermediate's SubjectPublicKeyInfo: the issuer key
    /// hash of every precertificate's entry.
    issuer_key_hash: [u8; 32],
}

impl LeafFactory {
    /// Certificates issued by `pki`'s intermediate; see [`LeafFactory::with_entries`].
    pub fn new(pki: &TestPki) -> anyhow::Result<Self> {
        Self::with_entries(pki, Entries::Certificates, false)
    }

    /// Leaves issued by `pki`'s intermediate, valid from an hour ago for 90
    /// days, each with a serial number and name unique to this run; `entries`
    /// says which are precertificates, `via_psc` whether the Precertificate
    /// Signing Certificate signs those.
    pub fn with_entries(pki: &TestPki, entries: Entries, via_psc: bool) -> anyhow::Result<Self> {
        let mut run = [0u8; 7];
        OsRng.fill_bytes(&mut run);
        let run_hex: String = run.iter().map(|b| format!("{b:02x}")).collect();
        let placeholder = format!("{run_hex}-{:016x}", 0);
        let now = unix_now();
        let fields = LeafFields {
            dns: format!("{placeholder}.ct-load.test"),
            // Serial: 0x4c, the run's 7 bytes, an 8-byte counter: 16 bytes, positive, minimal.
            serial_bytes: [&[0x4c][..], &run, &[0; 8]].concat(),
            run_hex,
            placeholder,
            key: p256_key()?,
            not_before: Asn1Time::from_unix(now - 3600)?,
            not_after: Asn1Time::from_unix(now + 90 * 86_400)?,
        };
        let certificate = Template::new(&fields, &pki.intermediate, &pki.intermediate_key, false)?;
        let b64 = |c: &X509| -> anyhow::Result<String> { Ok(STANDARD.encode(c.to_der()?)) };
        let chain_b64 = vec![b64(&pki.intermediate)?];
        let (precertificate, pre_chain_b64) = if via_psc {
            let Some((psc, psc_key)) = &pki.precert_signer else {
                bail!("the test CA has no Precertificate Signing Certificate: give a new --pki-dir");
            };
            if pki.intermediate.pathlen() == Some(0) {
                bail!("the test intermediate allows no CA below it: give a new --pki-dir");
            }
            (Template::new(&fields, psc, psc_key, true)?, vec![b64(psc)?, b64(&pki.intermediate)?])
        } else {
            (Template::new(&fields, &pki.intermediate, &pki.intermediate_key, true)?, chain_b64.clone())
        };
        let intermediate = x509_cert::Certificate::from_der(&pki.intermediate.to_der()?)?;
        let spki = intermediate.tbs_certificate.subject_public_key_info.to_der()?;
        Ok(Self {
            certificate,
            precertificate,
            entries,
            chain_b64,
            pre_chain_b64,
            issuer_key_hash: openssl::sha::sha256(&spki),
        })
    }

    /// Certificate number `n` (DER): distinct for every `n` in this run.
    pub fn leaf(&self, n: u64) -> anyhow::Result<Vec<u8>> {
        self.certificate.sign(n)
    }

    /// Precertificate number `n` (DER).
    pub fn precertificate(&self, n: u64) -> anyhow::Result<Vec<u8>> {
        self.precertificate.sign(n)
    }

    /// Leaf number `n`: a certificate or a precertificate, as the factory's
    /// [`Entries`] say.
    pub fn make(&self, n: u64) -> anyhow::Result<Leaf> {
        let kind = match self.entries {
            Entries::Certificates => LeafKind::Certificate,
            Entries::Precertificates => LeafKind::Precertificate,
            Entries::Mixed if n % 2 == 1 => LeafKind::Precertificate,
            Entries::Mixed => LeafKind::Certificate,
        };
        let der = match kind {
            LeafKind::Certificate => self.leaf(n)?,
            LeafKind::Precertificate => self.precertificate(n)?,
        };
        Ok(Leaf { n, der, kind })
    }

    /// The TBS of precertificate `n`'s final certificate: what its log entry
    /// holds (the precertificate's TBS without the poison, issued by the
    /// intermediate), made from the certificate template.
    pub fn precert_entry_tbs(&self, n: u64) -> Vec<u8> {
        self.certificate.tbs(n)
    }

    /// The issuer key hash of every precertificate entry: SHA-256 of the
    /// intermediate's SubjectPublicKeyInfo.
    pub fn issuer_key_hash(&self) -> [u8; 32] {
        self.issuer_key_hash
    }

    /// The `add-chain` body for the certificate `leaf`: the leaf and the intermediate.
    pub fn add_chain_body(&self, leaf: &[u8]) -> String {
        chain_body(leaf, &self.chain_b64)
    }

    /// The request body for `leaf`: `add-chain`'s, or `add-pre-chain`'s (the
    /// precertificate, the Precertificate Signing Certificate if it signs
    /// them, the intermediate).
    pub fn body(&self, leaf: &Leaf) -> String {
        match leaf.kind {
            LeafKind::Certificate => chain_body(&leaf.der, &self.chain_b64),
            LeafKind::Precertificate => chain_body(&leaf.der, &self.pre_chain_b64),
        }
    }
}

/// `{"chain":[leaf, rest...]}` with each element in standard base64.
fn chain_body(leaf: &[u8], rest_b64: &[String]) -> String {
    let mut body = String::with_capacity(leaf.len() * 4 / 3 + rest_b64.iter().map(|r| r.len() + 3).sum::<usize>() + 16);
    body.push_str("{\"chain\":[\"");
    STANDARD.encode_string(leaf, &mut body);
    for r in rest_b64 {
        body.push_str("\",\"");
        body.push_str(r);
    }
    body.push_str("\"]}");
    body
}

/// A DER element's ranges: the whole TLV and its contents.
struct Element {
    full: std::ops::Range<usize>,
    start: usize,
}

/// The element at `at` of `der` and the offset after it.
fn der_element(der: &[u8], at: usize) -> Option<(Element, usize)> {
    let first = *der.get(at + 1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let len = der.get(at + 2..at + 2 + n)?.iter().fold(0usize, |l, &b| (l << 8) | usize::from(b));
        (len, 2 + n)
    };
    let end = at + header + len;
    (end <= der.len()).then_some((Element { full: at..end, start: at + header }, end))
}

fn push_len(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=0x7f => out.push(len as u8),
        0x80..=0xff => out.extend_from_slice(&[0x81, len as u8]),
        _ => out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]),
    }
}

fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// A leaf made ahead of use.
pub struct Leaf {
    /// Its number in this run.
    pub n: u64,
    /// The DER certificate or precertificate.
    pub der: Vec<u8>,
    /// Which of the two.
    pub kind: LeafKind,
}

/// Leaves made on background threads (see the module docs).
pub struct LeafPool {
    rx: crossbeam_channel::Receiver<Leaf>,
    shared: Arc<PoolShared>,
    threads: Vec<JoinHandle<()>>,
}

struct PoolShared {
    stop: AtomicBool,
    /// Whether the threads are filling (set below a quarter of the target, cleared at the target).
    filling: AtomicBool,
    target: usize,
    made: AtomicU64,
    /// Thread time spent making leaves (ns).
    busy_nanos: AtomicU64,
    errors: AtomicU64,
}

/// What the pool has done so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolStats {
    /// Leaves made.
    pub made: u64,
    /// Thread time spent making them.
    pub busy: Duration,
    /// Leaves that failed (OpenSSL errors).
    pub errors: u64,
}

impl PoolStats {
    /// Leaves per second of one thread's time.
    pub fn per_thread_rate(&self) -> f64 {
        if self.busy.is_zero() {
            0.0
        } else {
            self.made as f64 / self.busy.as_secs_f64()
        }
    }
}

impl LeafPool {
    /// Starts `threads` threads making leaves of `factory` until `target`
    /// wait in the queue.
    pub fn start(factory: Arc<LeafFactory>, threads: usize, target: usize) -> Self {
        let target = target.max(1);
        let (tx, rx) = crossbeam_channel::bounded(target + threads);
        let shared = Arc::new(PoolShared {
            stop: AtomicBool::new(false),
            filling: AtomicBool::new(true),
            target,
            made: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        });
        let next = Arc::new(AtomicU64::new(0));
        let threads = (0..threads.max(1))
            .map(|_| {
                let (factory, tx, shared, next) = (factory.clone(), tx.clone(), shared.clone(), next.clone());
                std::thread::spawn(move || make_leaves(&factory, &tx, &shared, &next))
            })
            .collect();
        Self { rx, shared, threads }
    }

    /// Waits until the queue holds the target (or `timeout` passes).
    pub fn wait_full(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.rx.len() < self.shared.target {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// The next leaf, if one is ready.
    pub fn try_next(&self) -> Option<Leaf> {
        self.rx.try_recv().ok()
    }

    /// Leaves waiting.
    pub fn ready(&self) -> usize {
        self.rx.len()
    }

    /// Counts so far.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            made: self.shared.made.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.shared.busy_nanos.load(Ordering::Relaxed)),
            errors: self.shared.errors.load(Ordering::Relaxed),
        }
    }
}

impl Drop for LeafPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Unblock threads waiting to send.
        while self.rx.try_recv().is_ok() {}
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn make_leaves(factory: &LeafFactory, tx: &crossbeam_channel::Sender<Leaf>, shared: &PoolShared, next: &AtomicU64) {
    while !shared.stop.load(Ordering::Relaxed) {
        let queued = tx.len();
        if queued >= shared.target {
            shared.filling.store(false, Ordering::Relaxed);
        } else if queued < shared.target / 4 {
            shared.filling.store(true, Ordering::Relaxed);
        }
        if !shared.filling.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let n = next.fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        let leaf = factory.make(n);
        shared.busy_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match leaf {
            Ok(leaf) => {
                shared.made.fetch_add(1, Ordering::Relaxed);
                if tx.send_timeout(leaf, Duration::from_millis(100)).is_err() && tx.is_empty() {
                    return;
                }
            }
            Err(_) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::stack::Stack;
    use openssl::x509::store::X509StoreBuilder;
    use openssl::x509::X509StoreContext;

    fn verifies(pki: &TestPki, leaf: &X509) -> bool {
        let mut store = X509StoreBuilder::new().unwrap();
        store.add_cert(pki.root.clone()).unwrap();
        let store = store.build();
        let mut chain = Stack::new().unwrap();
        chain.push(pki.intermediate.clone()).unwrap();
        let mut ctx = X509StoreContext::new().unwrap();
        ctx.init(&store, leaf, &chain, |c| c.verify_cert()).unwrap()
    }

    #[test]
    fn leaves_are_distinct_valid_der_and_chain_to_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::load_or_create(dir.path()).unwrap();
        let again = TestPki::load_or_create(dir.path()).unwrap();
        assert_eq!(pki.root.to_der().unwrap(), again.root.to_der().unwrap());
        let factory = LeafFactory::new(&again).unwrap();
        let a = factory.leaf(1).unwrap();
        let b = factory.leaf(0x0102_0304_0506).unwrap();
        for (der, n) in [(&a, 1u64), (&b, 0x0102_0304_0506)] {
            // Strict DER (the bar ctlogd holds entries to), and OpenSSL verifies the chain.
            use der::Decode as _;
            x509_cert::Certificate::from_der(der).unwrap();
            let cert = X509::from_der(der).unwrap();
            assert!(verifies(&pki, &cert));
            assert_eq!(cert.serial_number().to_bn().unwrap().to_vec()[8..], n.to_be_bytes());
            let cn = cert.subject_name().entries().next().unwrap().data().to_string().unwrap();
            assert!(cn.contains(&format!("-{n:016x}.ct-load.test")), "{cn}");
            let san = cert.subject_alt_names().unwrap();
            assert_eq!(san.get(0).unwrap().dnsname(), Some(cn.as_str()));
        }
        assert_ne!(a, b);
        let body = factory.add_chain_body(&a);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(STANDARD.decode(v["chain"][0].as_str().unwrap()).unwrap(), a);
        assert_eq!(STANDARD.decode(v["chain"][1].as_str().unwrap()).unwrap(), pki.intermediate.to_der().unwrap());
    }

    /// OpenSSL's chain check as CT logs run it: critical poison ignored.
    fn verifies_precert(pki: &TestPki, leaf: &X509, above: &[X509]) -> bool {
        let mut store = X509StoreBuilder::new().unwrap();
        store.add_cert(pki.root.clone()).unwrap();
        store.set_flags(openssl::x509::verify::X509VerifyFlags::IGNORE_CRITICAL).unwrap();
        let store = store.build();
        let mut chain = Stack::new().unwrap();
        for c in above {
            chain.push(c.clone()).unwrap();
        }
        let mut ctx = X509StoreContext::new().unwrap();
        ctx.init(&store, leaf, &chain, |c| c.verify_cert()).unwrap()
    }

    #[test]
    fn precertificates_yield_the_entries_the_factory_names() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::load_or_create(dir.path()).unwrap();
        let (psc, _) = pki.precert_signer.clone().unwrap();
        assert_eq!(TestPki::load_or_create(dir.path()).unwrap().precert_signer.unwrap().0, psc);
        for via_psc in [false, true] {
            let factory = LeafFactory::with_entries(&pki, Entries::Mixed, via_psc).unwrap();
            let (cert, pre) = (factory.make(6).unwrap(), factory.make(7).unwrap());
            assert_eq!((cert.kind, pre.kind), (LeafKind::Certificate, LeafKind::Precertificate));
            x509_cert::Certificate::from_der(&pre.der).unwrap();
            let x = X509::from_der(&pre.der).unwrap();
            let above =
                if via_psc { vec![psc.clone(), pki.intermediate.clone()] } else { vec![pki.intermediate.clone()] };
            assert!(verifies_precert(&pki, &x, &above), "via_psc {via_psc}");
            // The entry, as signet-ct computes it from the submitted chain (a
            // second implementation), is the factory's: the certificate
            // template's TBS for the same number, and the intermediate's key hash.
            let chain: Vec<Vec<u8>> =
                std::iter::once(pre.der.clone()).chain(above.iter().map(|c| c.to_der().unwrap())).collect();
            let signet_ct::SignedEntry::Precert { issuer_key_hash, tbs_certificate } =
                signet_ct::rfc6962::precert::precert_entry(&chain).unwrap()
            else {
                panic!("not a precert entry")
            };
            assert_eq!(issuer_key_hash, factory.issuer_key_hash());
            assert_eq!(tbs_certificate, factory.precert_entry_tbs(7), "via_psc {via_psc}");
            // The request bodies.
            let v: serde_json::Value = serde_json::from_str(&factory.body(&pre)).unwrap();
            let sent: Vec<Vec<u8>> =
                v["chain"].as_array().unwrap().iter().map(|c| STANDARD.decode(c.as_str().unwrap()).unwrap()).collect();
            assert_eq!(sent, chain);
            let v: serde_json::Value = serde_json::from_str(&factory.body(&cert)).unwrap();
            assert_eq!(v["chain"].as_array().unwrap().len(), 2);
        }
    }

    #[test]
    fn pool_fills_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::load_or_create(dir.path()).unwrap();
        let pool = LeafPool::start(Arc::new(LeafFactory::new(&pki).unwrap()), 2, 50);
        assert!(pool.wait_full(Duration::from_secs(30)));
        let mut seen = std::collections::HashSet::new();
        while let Some(leaf) = pool.try_next() {
            assert!(seen.insert(leaf.n));
            if seen.len() == 50 {
                break;
            }
        }
        assert_eq!(seen.len(), 50);
        assert!(pool.stats().made >= 50);
        assert_eq!(pool.stats().errors, 0);
    }
}
