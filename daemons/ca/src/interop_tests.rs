//! Interop: what this crate builds, signed as signd signs, checked by the system
//! OpenSSL CLI (3.0), the vendored OpenSSL 3.5 (for ML-DSA) and Python `cryptography`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use der::pem::LineEnding;
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::{X509Crl, X509StoreContext, X509};
use signet_types::{KeyAlgorithm, SignatureScheme};

use crate::cert::{build_ocsp_responder_tbs, ResponderRequest};
use crate::crl::{build_tbs_crl, CrlParams, RevokedEntry};
use crate::ocsp::{
    assemble_ocsp_response, build_multi_response_data, build_response_data, ocsp_error_response, parse_ocsp_request,
    CertIdentity, CertStatusInfo, OcspErrorStatus, OcspHash, OcspIssuer, OcspResponseParams, Responder,
    SingleResponseParams,
};
use crate::testutil::{self, TestCa, TestKey};
use crate::{assemble_certificate, assemble_crl, CrlReason};

/// A whole small PKI of one algorithm, written to a temp dir as PEM and DER.
struct Pki {
    dir: tempfile::TempDir,
    root: TestCa,
    inter: TestCa,
    leaf_der: Vec<u8>,
    leaf_serial: Vec<u8>,
    responder_key: TestKey,
    responder_der: Vec<u8>,
    crl_der: Vec<u8>,
    now: SystemTime,
}

impl Pki {
    fn new(alg: KeyAlgorithm, scheme: SignatureScheme) -> Self {
        let now = SystemTime::now();
        let root = testutil::root(alg, scheme, now);
        let inter = testutil::intermediate(&root, alg, scheme, now);
        let leaf_key = TestKey::new(alg, scheme);
        let (_, leaf_der) = testutil::leaf(&inter, &leaf_key, now);
        let leaf_serial = X509::from_der(&leaf_der).unwrap().serial_number().to_bn().unwrap().to_vec();

        let responder_key = TestKey::new(alg, scheme);
        let req = ResponderRequest {
            subject: testutil::name("CN=Signet Test OCSP Responder,O=Signet"),
            spki_der: responder_key.spki_der(),
            validity: Duration::from_secs(4 * 86400),
            backdate: Duration::from_secs(3600),
        };
        let tbs = build_ocsp_responder_tbs(&req, &inter.issuer, now, &mut testutil::rng()).unwrap();
        let responder_der = assemble_certificate(&tbs, inter.key.scheme, &inter.key.sign(&tbs)).unwrap();

        let revoked = vec![
            RevokedEntry {
                serial: vec![0x40, 1, 2, 3],
                revocation_time: now - Duration::from_secs(7200),
                reason: None,
            },
            RevokedEntry {
                serial: leaf_serial.clone(),
                revocation_time: now - Duration::from_secs(60),
                reason: Some(CrlReason::KeyCompromise),
            },
        ];
        let crl_der = sign_crl(&inter, now, 100, Some("http://crl.example/7.crl"), &revoked);

        let pki = Self {
            dir: tempfile::tempdir().unwrap(),
            root,
            inter,
            leaf_der,
            leaf_serial,
            responder_key,
            responder_der,
            crl_der,
            now,
        };
        for (name, der) in [
            ("root", &pki.root.cert_der),
            ("inter", &pki.inter.cert_der),
            ("leaf", &pki.leaf_der),
            ("responder", &pki.responder_der),
        ] {
            pki.write(&format!("{name}.der"), der);
            pki.write(&format!("{name}.pem"), pem("CERTIFICATE", der).as_bytes());
        }
        let chain = pem("CERTIFICATE", &pki.inter.cert_der) + &pem("CERTIFICATE", &pki.root.cert_der);
        pki.write("chain.pem", chain.as_bytes());
        pki.write("crl.der", &pki.crl_der);
        pki.write("crl.pem", pem("X509 CRL", &pki.crl_der).as_bytes());
        let empty_crl = sign_crl(&pki.inter, now, 101, Some("http://crl.example/7.crl"), &[]);
        pki.write("crl-empty.pem", pem("X509 CRL", &empty_crl).as_bytes());
        pki.write("err.der", &ocsp_error_response(OcspErrorStatus::TryLater).unwrap());
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.path(name), bytes).unwrap();
    }

    /// Answers a DER OCSP request the way ocspd will (revoked: the leaf is on the CRL).
    fn respond(&self, request_der: &[u8]) -> Vec<u8> {
        let req = parse_ocsp_request(request_der).unwrap();
        let [cert_id] = req.cert_ids.as_slice() else { panic!("one certificate asked about") };
        let issuer = OcspIssuer::from_certificate_der(&self.inter.cert_der).unwrap();
        assert!(issuer.matches(cert_id));
        assert_eq!(cert_id.serial, self.leaf_serial);
        let responder = Responder::from_certificate_der(&self.responder_der, self.responder_key.scheme).unwrap();
        let data = build_response_data(
            &responder,
            &OcspResponseParams {
                cert_id,
                status: CertStatusInfo::Revoked {
                    time: self.now - Duration::from_secs(60),
                    reason: Some(CrlReason::KeyCompromise),
                },
                produced_at: self.now,
                this_update: self.now - Duration::from_secs(60),
                next_update: Some(self.now + Duration::from_secs(86400)),
                nonce: req.nonce.as_deref(),
            },
        )
        .unwrap();
        crate::validate::validate_ocsp_response_data(&data, &responder, &issuer).unwrap();
        let sig = self.responder_key.sign(&data);
        assemble_ocsp_response(&data, self.responder_key.scheme, &sig, &[&self.responder_der]).unwrap()
    }
}

fn sign_crl(ca: &TestCa, now: SystemTime, number: u128, shard: Option<&str>, revoked: &[RevokedEntry]) -> Vec<u8> {
    let params = CrlParams {
        this_update: now - Duration::from_secs(30),
        next_update: now + Duration::from_secs(86400),
        crl_number: number,
        shard_url: shard,
        delta_base: None,
        freshest_crl_url: None,
        revoked,
    };
    let tbs = build_tbs_crl(&ca.issuer, &params).unwrap();
    crate::validate::validate_tbs_crl(&tbs, &ca.issuer).unwrap();
    assemble_crl(&tbs, ca.key.scheme, &ca.key.sign(&tbs)).unwrap()
}

fn pem(label: &str, der: &[u8]) -> String {
    der::pem::encode_string(label, LineEnding::LF, der).unwrap()
}

/// Runs the system `openssl` in `dir`; returns (success, stdout + stderr).
fn openssl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("system openssl CLI");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn assert_contains(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "missing {n:?} in:\n{text}");
    }
}

fn cli_case(alg: KeyAlgorithm, scheme: SignatureScheme) {
    let pki = Pki::new(alg, scheme);
    let d = pki.dir.path();

    // Chain.
    let (ok, out) = openssl(d, &["verify", "-CAfile", "root.pem", "-untrusted", "inter.pem", "leaf.pem"]);
    assert!(ok && out.contains("leaf.pem: OK"), "{alg}/{scheme}: {out}");
    let (ok, out) = openssl(d, &["verify", "-CAfile", "root.pem", "-untrusted", "inter.pem", "responder.pem"]);
    assert!(ok, "{out}");

    // Extensions as OpenSSL reads them.
    let (ok, text) = openssl(d, &["x509", "-in", "leaf.pem", "-noout", "-text"]);
    assert!(ok);
    assert_contains(
        &text,
        &[
            "X509v3 Basic Constraints: critical",
            "CA:FALSE",
            "X509v3 Key Usage: critical",
            "Digital Signature",
            "TLS Web Server Authentication, TLS Web Client Authentication",
            "X509v3 Subject Key Identifier",
            "X509v3 Authority Key Identifier",
            "OCSP - URI:http://ocsp.example/",
            "CA Issuers - URI:http://ca.example/issuing.der",
            "URI:http://crl.example/7.crl",
            "DNS:www.example.com, DNS:*.example.com, IP Address:192.0.2.7, IP Address:2001:DB8:0:0:0:0:0:7",
            "TLS Feature",
            "status_request",
        ],
    );
    if matches!(alg, KeyAlgorithm::Rsa2048) {
        assert!(text.contains("Key Encipherment"), "{text}");
    } else {
        assert!(!text.contains("Key Encipherment"), "{text}");
    }
    if scheme == SignatureScheme::RsaPssSha256 {
        assert_contains(
            &text,
            &["rsassaPss", "Hash Algorithm: sha256", "Mask Algorithm: mgf1 with sha256", "Salt Length: 0x20"],
        );
    }
    let (_, text) = openssl(d, &["x509", "-in", "root.pem", "-noout", "-text"]);
    assert_contains(&text, &["CA:TRUE, pathlen:1", "Certificate Sign, CRL Sign"]);
    let (_, text) = openssl(d, &["x509", "-in", "responder.pem", "-noout", "-text"]);
    assert_contains(&text, &["OCSP Signing", "OCSP No Check"]);

    // CRL: signature, and revocation checking with the partitioned CRL's IDP.
    let (ok, out) = openssl(d, &["crl", "-in", "crl.pem", "-CAfile", "chain.pem", "-noout"]);
    assert!(ok && out.contains("verify OK"), "{out}");
    let (_, text) = openssl(d, &["crl", "-in", "crl.pem", "-noout", "-text"]);
    assert_contains(
        &text,
        &[
            "X509v3 Issuing Distribution Point: critical",
            "Only User Certificates",
            "X509v3 CRL Number",
            "Key Compromise",
        ],
    );
    let (ok, out) = openssl(
        d,
        &["verify", "-crl_check", "-CRLfile", "crl.pem", "-CAfile", "root.pem", "-untrusted", "inter.pem", "leaf.pem"],
    );
    assert!(!ok && out.contains("certificate revoked"), "{out}");
    let (ok, out) = openssl(
        d,
        &[
            "verify",
            "-crl_check",
            "-CRLfile",
            "crl-empty.pem",
            "-CAfile",
            "root.pem",
            "-untrusted",
            "inter.pem",
            "leaf.pem",
        ],
    );
    assert!(ok && out.contains("leaf.pem: OK"), "{out}");

    // OCSP: the CLI's own requests (SHA-1 and SHA-256 CertIDs, with nonce), our responses.
    for (digest, hash) in [("-sha1", OcspHash::Sha1), ("-sha256", OcspHash::Sha256)] {
        let (ok, out) =
            openssl(d, &["ocsp", digest, "-issuer", "inter.pem", "-cert", "leaf.pem", "-reqout", "req.der"]);
        assert!(ok, "{out}");
        let req_der = std::fs::read(pki.path("req.der")).unwrap();
        let req = parse_ocsp_request(&req_der).unwrap();
        assert_eq!(req.cert_ids.len(), 1);
        assert_eq!(req.cert_ids[0].hash, hash);
        assert!(req.nonce.is_some(), "openssl sends a nonce by default");
        pki.write("resp.der", &pki.respond(&req_der));
        // -reqin alone: the CLI checks the response's nonce against the request's.
        let (ok, out) = openssl(
            d,
            &[
                "ocsp",
                "-reqin",
                "req.der",
                "-respin",
                "resp.der",
                "-CAfile",
                "root.pem",
                "-verify_other",
                "inter.pem",
                "-resp_text",
            ],
        );
        assert!(ok, "{alg}/{scheme} {digest}: {out}");
        assert_contains(
            &out,
            &[
                "Response verify OK",
                "Cert Status: revoked",
                "Revocation Reason: keyCompromise",
                "OCSP Nonce",
                "Responder Id: ",
            ],
        );
        assert!(!out.contains("WARNING"), "{out}");
        // -issuer/-cert: the CLI matches the status to the certificate (its own
        // request would carry a fresh nonce, hence -no_nonce).
        let (ok, out) = openssl(
            d,
            &[
                "ocsp",
                "-respin",
                "resp.der",
                "-CAfile",
                "root.pem",
                "-verify_other",
                "inter.pem",
                digest,
                "-issuer",
                "inter.pem",
                "-cert",
                "leaf.pem",
                "-no_nonce",
            ],
        );
        assert!(ok, "{alg}/{scheme} {digest}: {out}");
        assert_contains(&out, &["Response verify OK", "leaf.pem: revoked", "Reason: keyCompromise"]);
        assert!(!out.contains("WARNING"), "{out}");
    }
    let (ok, out) = openssl(d, &["ocsp", "-respin", "err.der", "-resp_text", "-noverify"]);
    assert!(out.contains("Responder Error: trylater (3)"), "{ok} {out}");

    python_check(&pki, true);
}

/// `openssl ocsp -cert leaf -serial S -serial T`: one request for three
/// certificates, one ResponseData with three SingleResponses (as signd
/// validates it), each status read back by the CLI.
#[test]
fn several_certificates_in_one_request_with_openssl_cli() {
    let pki = Pki::new(KeyAlgorithm::EcP256, SignatureScheme::EcdsaSha256);
    let d = pki.dir.path();
    let (ok, out) = openssl(
        d,
        &[
            "ocsp",
            "-issuer",
            "inter.pem",
            "-cert",
            "leaf.pem",
            "-serial",
            "0x4001020304",
            "-serial",
            "0x77",
            "-reqout",
            "multi-req.der",
        ],
    );
    assert!(ok, "{out}");
    let req = parse_ocsp_request(&std::fs::read(pki.path("multi-req.der")).unwrap()).unwrap();
    assert_eq!(req.cert_ids.len(), 3);
    let issuer = OcspIssuer::from_certificate_der(&pki.inter.cert_der).unwrap();
    assert!(req.cert_ids.iter().all(|id| issuer.matches(id)));
    let statuses = [
        CertStatusInfo::Revoked { time: pki.now - Duration::from_secs(60), reason: Some(CrlReason::KeyCompromise) },
        CertStatusInfo::Good,
        CertStatusInfo::Unknown,
    ];
    let singles: Vec<_> = req
        .cert_ids
        .iter()
        .zip(statuses)
        .map(|(cert_id, status)| SingleResponseParams {
            cert_id,
            status,
            this_update: pki.now,
            next_update: Some(pki.now + Duration::from_secs(3600)),
        })
        .collect();
    let responder = Responder::from_certificate_der(&pki.responder_der, pki.responder_key.scheme).unwrap();
    let data = build_multi_response_data(&responder, pki.now, &singles, req.nonce.as_deref()).unwrap();
    let parsed = crate::validate::validate_ocsp_response_data(&data, &responder, &issuer).unwrap();
    // (GeneralizedTime has whole seconds: compare the kinds of status.)
    let kind = |s: &CertStatusInfo| std::mem::discriminant(s);
    let got: Vec<_> = parsed.responses.iter().map(|r| (r.serial.clone(), kind(&r.status))).collect();
    let want: Vec<_> = req.cert_ids.iter().map(|id| id.serial.clone()).zip(statuses.iter().map(kind)).collect();
    assert_eq!(got, want);
    let sig = pki.responder_key.sign(&data);
    let resp = assemble_ocsp_response(&data, pki.responder_key.scheme, &sig, &[&pki.responder_der]).unwrap();
    pki.write("multi-resp.der", &resp);
    let (ok, out) = openssl(
        d,
        &[
            "ocsp",
            "-reqin",
            "multi-req.der",
            "-respin",
            "multi-resp.der",
            "-CAfile",
            "root.pem",
            "-verify_other",
            "inter.pem",
            "-resp_text",
        ],
    );
    assert!(ok && out.contains("Response verify OK") && !out.contains("WARNING"), "{out}");
    let (ok, out) = openssl(
        d,
        &[
            "ocsp",
            "-respin",
            "multi-resp.der",
            "-CAfile",
            "root.pem",
            "-verify_other",
            "inter.pem",
            "-issuer",
            "inter.pem",
            "-cert",
            "leaf.pem",
            "-serial",
            "0x4001020304",
            "-serial",
            "0x77",
            "-no_nonce",
        ],
    );
    assert!(ok, "{out}");
    assert_contains(
        &out,
        &["Response verify OK", "leaf.pem: revoked", "0x4001020304: good", "0x77: unknown", "Reason: keyCompromise"],
    );
}

/// The relying party's side (crate::ocsp_check) against the responses ocspd builds:
/// a delegated responder's answer verifies against the issuer, not against another CA.
#[test]
fn a_relying_party_checks_a_delegated_responders_answer() {
    use crate::ocsp_check::{check_response, request, CheckError, Status};
    let pki = Pki::new(KeyAlgorithm::EcP256, SignatureScheme::Default);
    let leaf = X509::from_der(&pki.leaf_der).unwrap();
    let inter = X509::from_der(&pki.inter.cert_der).unwrap();
    let resp = pki.respond(&request(&leaf, &inter).unwrap());
    let answer = check_response(&resp, &leaf, &inter).unwrap();
    let now = pki.now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert_eq!(answer.status, Status::Revoked { at: now - 60, reason: Some(CrlReason::KeyCompromise) });
    assert_eq!((answer.this_update, answer.next_update), (now - 60, Some(now + 86400)));
    answer.current(now, 0).unwrap();
    // Another issuer: the responder's certificate does not chain to it.
    let root = X509::from_der(&pki.root.cert_der).unwrap();
    let e = check_response(&resp, &leaf, &root).unwrap_err();
    assert!(matches!(e, CheckError::Invalid(_)), "{e}");
    // The answer for another certificate of the issuer is not this one's.
    let mut b = X509::builder().unwrap();
    b.set_serial_number(&openssl::bn::BigNum::from_u32(4242).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_issuer_name(inter.subject_name()).unwrap();
    b.set_subject_name(inter.subject_name()).unwrap();
    b.set_pubkey(&pki.inter.key.pkey).unwrap();
    b.sign(&pki.inter.key.pkey, openssl::hash::MessageDigest::sha256()).unwrap();
    let other = b.build();
    let e = check_response(&resp, &other, &inter).unwrap_err();
    assert!(e.to_string().contains("does not answer for the certificate"), "{e}");
}

#[test]
fn ecdsa_p256_with_openssl_cli() {
    cli_case(KeyAlgorithm::EcP256, SignatureScheme::EcdsaSha256);
}

#[test]
fn ed25519_with_openssl_cli() {
    cli_case(KeyAlgorithm::Ed25519, SignatureScheme::Ed25519);
}

#[test]
fn rsa2048_pss_with_openssl_cli() {
    cli_case(KeyAlgorithm::Rsa2048, SignatureScheme::RsaPssSha256);
}

#[test]
fn rsa2048_pkcs1_with_openssl_cli() {
    cli_case(KeyAlgorithm::Rsa2048, SignatureScheme::RsaPkcs1Sha256);
}

/// The system CLI is OpenSSL 3.0 (no ML-DSA): verify with the vendored 3.5 instead.
#[test]
fn ml_dsa_44_with_vendored_openssl() {
    let pki = Pki::new(KeyAlgorithm::MlDsa44, SignatureScheme::Default);
    let root = X509::from_der(&pki.root.cert_der).unwrap();
    let inter = X509::from_der(&pki.inter.cert_der).unwrap();
    let leaf = X509::from_der(&pki.leaf_der).unwrap();
    let responder = X509::from_der(&pki.responder_der).unwrap();
    assert!(root.verify(&root.public_key().unwrap()).unwrap());
    assert!(inter.verify(&root.public_key().unwrap()).unwrap());
    assert!(leaf.verify(&inter.public_key().unwrap()).unwrap());
    assert!(responder.verify(&inter.public_key().unwrap()).unwrap());

    let mut store = X509StoreBuilder::new().unwrap();
    store.add_cert(root.clone()).unwrap();
    let store = store.build();
    let mut untrusted = Stack::new().unwrap();
    untrusted.push(inter.clone()).unwrap();
    let mut ctx = X509StoreContext::new().unwrap();
    let ok = ctx.init(&store, &leaf, &untrusted, |c| Ok((c.verify_cert()?, c.error()))).unwrap();
    assert!(ok.0, "chain: {}", ok.1);

    let crl = X509Crl::from_der(&pki.crl_der).unwrap();
    assert!(crl.verify(&inter.public_key().unwrap()).unwrap());
    assert!(matches!(crl.get_by_cert(&leaf), openssl::x509::CrlStatus::Revoked(_)));

    let id = CertIdentity::new(OcspHash::Sha256, &pki.inter.cert_der, &pki.leaf_serial).unwrap();
    let req_der = request_der(&id, &[7; 32]);
    let resp_der = pki.respond(&req_der);
    let resp = openssl::ocsp::OcspResponse::from_der(&resp_der).unwrap();
    assert_eq!(resp.status(), openssl::ocsp::OcspResponseStatus::SUCCESSFUL);
    let basic = resp.basic().unwrap();
    let mut certs = Stack::new().unwrap();
    certs.push(inter.clone()).unwrap();
    basic.verify(&certs, &store, openssl::ocsp::OcspFlag::empty()).unwrap();
    let cert_id = openssl::ocsp::OcspCertId::from_cert(openssl::hash::MessageDigest::sha256(), &leaf, &inter).unwrap();
    let status = basic.find_status(&cert_id).unwrap();
    assert_eq!(status.status, openssl::ocsp::OcspCertStatus::REVOKED);
    assert_eq!(status.reason, openssl::ocsp::OcspRevokedStatus::KEY_COMPROMISE);

    python_check(&pki, false);
}

/// An OCSPRequest as a client would send it, built with x509-ocsp's types.
fn request_der(id: &CertIdentity, nonce: &[u8]) -> Vec<u8> {
    use der::asn1::OctetString;
    use der::{Decode, Encode};
    let cert_id = x509_ocsp::CertId {
        hash_algorithm: spki::AlgorithmIdentifierOwned { oid: id.hash.oid(), parameters: None },
        issuer_name_hash: OctetString::new(id.issuer_name_hash.clone()).unwrap(),
        issuer_key_hash: OctetString::new(id.issuer_key_hash.clone()).unwrap(),
        serial_number: x509_cert::serial_number::SerialNumber::new(&id.serial).unwrap(),
    };
    let req = x509_ocsp::OcspRequest {
        tbs_request: x509_ocsp::TbsRequest {
            version: x509_ocsp::Version::V1,
            requestor_name: None,
            request_list: vec![x509_ocsp::Request { req_cert: cert_id, single_request_extensions: None }],
            request_extensions: Some(vec![x509_cert::ext::Extension {
                extn_id: crate::alg::oid::OCSP_NONCE,
                critical: false,
                extn_value: OctetString::new(OctetString::new(nonce).unwrap().to_der().unwrap()).unwrap(),
            }]),
        },
        optional_signature: None,
    };
    let der = req.to_der().unwrap();
    assert!(x509_ocsp::OcspRequest::from_der(&der).is_ok());
    der
}

const PY_CHECK: &str = r#"
import sys
from cryptography import x509
from cryptography.x509 import ocsp
d, verify = sys.argv[1], sys.argv[2] == "1"
load = lambda n: open(f"{d}/{n}", "rb").read()
root, inter, leaf, resp_cert = [x509.load_der_x509_certificate(load(n + ".der")) for n in ("root", "inter", "leaf", "responder")]
for c in (root, inter, leaf, resp_cert):
    assert c.version == x509.Version.v3
    for e in c.extensions:
        pass
san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
assert san.get_values_for_type(x509.DNSName) == ["www.example.com", "*.example.com"], san
assert len(san.get_values_for_type(x509.IPAddress)) == 2
bc = leaf.extensions.get_extension_for_class(x509.BasicConstraints)
assert bc.critical and not bc.value.ca
assert root.extensions.get_extension_for_class(x509.BasicConstraints).value.path_length == 1
assert resp_cert.extensions.get_extension_for_class(x509.OCSPNoCheck)
assert leaf.issuer == inter.subject and inter.issuer == root.subject == root.subject
crl = x509.load_der_x509_crl(load("crl.der"))
assert crl.get_revoked_certificate_by_serial_number(leaf.serial_number) is not None
assert crl.extensions.get_extension_for_class(x509.IssuingDistributionPoint).critical
assert crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number == 100
resp = ocsp.load_der_ocsp_response(load("resp.der"))
assert resp.response_status == ocsp.OCSPResponseStatus.SUCCESSFUL
assert resp.certificate_status == ocsp.OCSPCertStatus.REVOKED
assert resp.revocation_reason == x509.ReasonFlags.key_compromise
assert resp.serial_number == leaf.serial_number
assert resp.certificates[0] == resp_cert
assert resp.extensions.get_extension_for_class(x509.OCSPNonce)
err = ocsp.load_der_ocsp_response(load("err.der"))
assert err.response_status == ocsp.OCSPResponseStatus.TRY_LATER
if verify:
    inter.verify_directly_issued_by(root)
    leaf.verify_directly_issued_by(inter)
    resp_cert.verify_directly_issued_by(inter)
    assert crl.is_signature_valid(inter.public_key())
print("python cryptography OK", "(signatures verified)" if verify else "(parsed only)")
"#;

/// Parses (and, where `cryptography` supports the algorithm, verifies) everything
/// with Python `cryptography`. Skips, saying why, only if there is no python3.
fn python_check(pki: &Pki, verify: bool) {
    let has = |args: &[&str]| Command::new("python3").args(args).output().map(|o| o.status.success());
    match has(&["-c", "import cryptography"]) {
        Err(e) => {
            eprintln!("SKIP python cryptography check: no python3 ({e})");
            return;
        }
        Ok(false) => {
            let _ = Command::new("python3").args(["-m", "pip", "install", "--quiet", "cryptography"]).status();
            if !has(&["-c", "import cryptography"]).unwrap_or(false) {
                eprintln!(
                    "SKIP python cryptography check: `cryptography` is not installed and pip could not install it"
                );
                return;
            }
        }
        Ok(true) => {}
    }
    pki.write(
        "resp.der",
        &pki.respond(&request_der(
            &CertIdentity::new(OcspHash::Sha1, &pki.inter.cert_der, &pki.leaf_serial).unwrap(),
            &[9; 16],
        )),
    );
    let out = Command::new("python3")
        .args(["-c", PY_CHECK, pki.dir.path().to_str().unwrap(), if verify { "1" } else { "0" }])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("python cryptography OK"), "{text}");
    eprintln!("{}", text.trim());
}
