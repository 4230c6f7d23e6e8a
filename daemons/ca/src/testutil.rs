//! Test helpers: real keys from OpenSSL, signed exactly as signd signs.

use std::str::FromStr;
use std::time::{Duration, SystemTime};

use der::asn1::{Null, OctetString};
use der::{Any, Encode};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{KeyType, PKey, Private};
use openssl::rsa::{Padding, Rsa};
use openssl::sign::{RsaPssSaltlen, Signer};
use rand_chacha::rand_core::SeedableRng;
use signet_types::{DigestAlgorithm, KeyAlgorithm, SignatureScheme};
use spki::AlgorithmIdentifierOwned;
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_ocsp::{CertId, Request, TbsRequest};

use crate::alg::oid;
use crate::cert::{build_intermediate_tbs, build_leaf_tbs, build_root_tbs, CaRequest, LeafRequest, SanEntry};
use crate::{assemble_certificate, Issuer, Profile};

/// A key pair and the scheme it signs with.
pub struct TestKey {
    pub pkey: PKey<Private>,
    pub scheme: SignatureScheme,
}

impl TestKey {
    pub fn new(alg: KeyAlgorithm, scheme: SignatureScheme) -> Self {
        let pkey = generate(alg);
        Self { pkey, scheme: alg.resolve(scheme).unwrap() }
    }

    pub fn spki_der(&self) -> Vec<u8> {
        self.pkey.public_key_to_der().unwrap()
    }

    /// Signs like signd: ECDSA DER signatures, RSA PKCS#1 / PSS, Ed25519 and ML-DSA pure.
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        let digest = match self.scheme.digest() {
            DigestAlgorithm::Sha256 => Some(MessageDigest::sha256()),
            DigestAlgorithm::Sha384 => Some(MessageDigest::sha384()),
            DigestAlgorithm::Sha512 => Some(MessageDigest::sha512()),
            DigestAlgorithm::None => None,
        };
        let mut signer = match digest {
            Some(md) => Signer::new(md, &self.pkey).unwrap(),
            None => Signer::new_without_digest(&self.pkey).unwrap(),
        };
        if let (true, Some(md)) = (self.scheme.is_pss(), digest) {
            signer.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
            signer.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).unwrap();
            signer.set_rsa_mgf1_md(md).unwrap();
        }
        signer.sign_oneshot_to_vec(msg).unwrap()
    }
}

/// A new key of `alg`, as signd's OpenSSL backend makes one.
pub fn generate(alg: KeyAlgorithm) -> PKey<Private> {
    let ec = |nid| PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap();
    let rsa = |bits| PKey::from_rsa(Rsa::generate(bits).unwrap()).unwrap();
    let ml_dsa = |kind| {
        let mut seed = [0u8; 32];
        openssl::rand::rand_bytes(&mut seed).unwrap();
        PKey::private_key_from_seed(None, kind, None, &seed).unwrap()
    };
    match alg {
        KeyAlgorithm::EcP256 => ec(Nid::X9_62_PRIME256V1),
        KeyAlgorithm::EcP384 => ec(Nid::SECP384R1),
        KeyAlgorithm::EcP521 => ec(Nid::SECP521R1),
        KeyAlgorithm::Ed25519 => PKey::generate_ed25519().unwrap(),
        KeyAlgorithm::Rsa2048 => rsa(2048),
        KeyAlgorithm::Rsa3072 => rsa(3072),
        KeyAlgorithm::Rsa4096 => rsa(4096),
        KeyAlgorithm::MlDsa44 => ml_dsa(KeyType::ML_DSA_44),
        KeyAlgorithm::MlDsa65 => ml_dsa(KeyType::ML_DSA_65),
        KeyAlgorithm::MlDsa87 => ml_dsa(KeyType::ML_DSA_87),
    }
}

/// A CA: key, certificate, and its `Issuer`.
pub struct TestCa {
    pub key: TestKey,
    pub cert_der: Vec<u8>,
    pub issuer: Issuer,
}

pub fn rng() -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(7)
}

pub fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn ca_request(subject: &str, key: &TestKey, path_len: Option<u8>) -> CaRequest {
    CaRequest {
        subject: name(subject),
        spki_der: key.spki_der(),
        validity: Duration::from_secs(10 * 365 * 86400),
        backdate: Duration::from_secs(3600),
        path_len,
        ocsp_urls: vec![],
        ca_issuers_url: None,
        crl_url: None,
    }
}

pub fn root(alg: KeyAlgorithm, scheme: SignatureScheme, now: SystemTime) -> TestCa {
    let key = TestKey::new(alg, scheme);
    let tbs = build_root_tbs(&ca_request("CN=Signet Test Root,O=Signet", &key, Some(1)), key.scheme, now, &mut rng())
        .unwrap();
    let cert_der = assemble_certificate(&tbs, key.scheme, &key.sign(&tbs)).unwrap();
    let issuer = Issuer::from_certificate_der(&cert_der, key.scheme).unwrap();
    TestCa { key, cert_der, issuer }
}

pub fn intermediate(parent: &TestCa, alg: KeyAlgorithm, scheme: SignatureScheme, now: SystemTime) -> TestCa {
    let key = TestKey::new(alg, scheme);
    let mut req = ca_request("CN=Signet Test Issuing CA,O=Signet", &key, Some(0));
    req.ca_issuers_url = Some("http://ca.example/root.der".into());
    req.crl_url = Some("http://crl.example/root.crl".into());
    let tbs = build_intermediate_tbs(&req, &parent.issuer, now, &mut rng()).unwrap();
    let cert_der = assemble_certificate(&tbs, parent.key.scheme, &parent.key.sign(&tbs)).unwrap();
    let issuer = Issuer::from_certificate_der(&cert_der, key.scheme).unwrap();
    TestCa { key, cert_der, issuer }
}

pub fn profile() -> Profile {
    toml::from_str(
        r#"
name = "tls"
max_validity_seconds = 7776000
backdate_seconds = 3600
key_usage = ["digital-signature", "key-encipherment"]
allowed_ekus = ["server-auth", "client-auth"]
default_ekus = ["server-auth", "client-auth"]
allow_dns_sans = true
allow_ip_sans = true
allow_email_sans = true
ocsp_urls = ["http://ocsp.example/"]
ca_issuers_url = "http://ca.example/issuing.der"
crl_url = "http://crl.example/{shard}.crl"
crl_shards = 4
must_staple = true
allowed_key_algorithms = ["ecdsa-p256", "ecdsa-p384", "ed25519", "rsa-2048", "ml-dsa-44", "ml-dsa-65"]
"#,
    )
    .unwrap()
}

pub fn leaf_request(key: &TestKey) -> LeafRequest {
    LeafRequest {
        subject: name("CN=www.example.com"),
        spki_der: key.spki_der(),
        sans: vec![
            SanEntry::Dns("www.example.com".into()),
            SanEntry::Dns("*.example.com".into()),
            SanEntry::Ip("192.0.2.7".parse().unwrap()),
            SanEntry::Ip("2001:db8::7".parse().unwrap()),
        ],
        validity: None,
        exact_validity: None,
        ekus: None,
        crl_shard: Some(7),
    }
}

/// A leaf TBS and certificate under `ca`.
pub fn leaf(ca: &TestCa, key: &TestKey, now: SystemTime) -> (Vec<u8>, Vec<u8>) {
    let tbs = build_leaf_tbs(&profile(), &ca.issuer, &leaf_request(key), now, &mut rng()).unwrap();
    let cert = assemble_certificate(&tbs, ca.key.scheme, &ca.key.sign(&tbs)).unwrap();
    (tbs, cert)
}

/// An issuer with a real P-256 key, for tests that only need its name and key id.
pub fn issuer() -> Issuer {
    let key = TestKey::new(KeyAlgorithm::EcP256, SignatureScheme::Default);
    Issuer::new(name("CN=Unit Test CA"), &key.spki_der(), SignatureScheme::Default).unwrap()
}

/// Well-formed OCSP requests (SHA-1 and SHA-256 CertIDs, with and without nonces).
pub fn ocsp_request_samples() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (hash, len) in [(oid::SHA1, 20), (oid::SHA256, 32)] {
        for nonce in [None, Some(vec![0xab; 16]), Some(vec![1; 32])] {
            let cert_id = CertId {
                hash_algorithm: AlgorithmIdentifierOwned { oid: hash, parameters: Some(Any::from(Null)) },
                issuer_name_hash: OctetString::new(vec![0x11; len]).unwrap(),
                issuer_key_hash: OctetString::new(vec![0x22; len]).unwrap(),
                serial_number: SerialNumber::new(&[0x40, 1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            };
            let request_extensions = nonce.map(|n| {
                vec![Extension {
                    extn_id: oid::OCSP_NONCE,
                    critical: false,
                    extn_value: OctetString::new(OctetString::new(n).unwrap().to_der().unwrap()).unwrap(),
                }]
            });
            let req = x509_ocsp::OcspRequest {
                tbs_request: TbsRequest {
                    version: x509_ocsp::Version::V1,
                    requestor_name: None,
                    request_list: vec![Request { req_cert: cert_id, single_request_extensions: None }],
                    request_extensions,
                },
                optional_signature: None,
            };
            out.push(req.to_der().unwrap());
        }
    }
    out
}

/// Peak resident set size of this process (VmHWM), MiB.
pub fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}
