//! signd's CA issuer roles over the real socket: an Issuer that signs only
//! end-entity certificates within its profile, a CrlSigner that signs only
//! the CA's CRLs, an OcspSigner that signs only ResponseData of the CA's
//! responder, raw signing on issuer keys refused, refusals audited, and
//! startup refused when a certificate does not match its key. Everything
//! signd returns is checked by the system openssl CLI.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use signet_ca::der::{Decode, Encode};
use signet_ca::{
    assemble_certificate, build_intermediate_tbs, build_leaf_tbs, build_multi_response_data, build_ocsp_responder_tbs,
    build_response_data, build_root_tbs, build_tbs_crl, CaRequest, CertIdentity, CertStatusInfo, CrlParams, CrlReason,
    Issuer, LeafRequest, Name, OcspHash, OcspResponseParams, Profile, Responder, ResponderRequest, RevokedEntry,
    SanEntry, SingleResponseParams,
};
use signet_ipc::{
    block_on, AuditQuery, AuditRecord, ErrorKind, KeyAlgorithm, KeySpec, SignatureScheme as S, SigndClient,
};
use signet_tests::{bin, run, SigndProcess};

const PROFILE: &str = r#"
name = "tls"
max_validity_seconds = 7776000
backdate_seconds = 3600
allowed_ekus = ["server-auth", "client-auth"]
default_ekus = ["server-auth"]
allow_dns_sans = true
allowed_key_algorithms = ["ecdsa-p256", "ed25519"]
"#;

/// The current uid holds `admin` (from the harness), `issuer`, `crl` and
/// `ocsp`; `acme` belongs to someone else.
fn roles() -> String {
    let uid = nix::unistd::getuid().as_raw();
    format!(
        "[roles.issuer]\nusers = [{uid}]\nkeys = [\"ca-*\"]\n\
         [roles.crl]\nusers = [{uid}]\n\
         [roles.ocsp]\nusers = [{uid}]\nkeys = [\"ocsp-*\"]\n\
         [roles.acme]\nusers = [12345]\n"
    )
}

/// A signd with a CA key and an OCSP responder key, a self-signed CA
/// certificate and a responder certificate (made through the raw admin Signer
/// before the keys belonged to an issuer), then restarted as issuer `demo`.
struct Ca {
    signd: SigndProcess,
    client: SigndClient,
    profile: Profile,
    issuer: Issuer,
    ca_der: Vec<u8>,
    responder_der: Vec<u8>,
    base_config: String,
}

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn spec(id: &str) -> KeySpec {
    KeySpec { id: id.into(), algorithm: KeyAlgorithm::EcP256, roles: vec![], backend: String::new() }
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

impl Ca {
    fn new() -> Self {
        let mut signd = SigndProcess::start(&roles());
        let client = signd.client();
        let ca_key = block_on(client.generate_key(spec("ca-key"))).unwrap();
        let ocsp_key = block_on(client.generate_key(spec("ocsp-key"))).unwrap();
        let now = SystemTime::now();
        let mut rng = rand_core::OsRng;

        let root = CaRequest {
            subject: name("CN=Signet Issuer Test CA,O=Signet"),
            spki_der: ca_key.spki.clone(),
            validity: Duration::from_secs(365 * 86400),
            backdate: Duration::from_secs(3600),
            path_len: Some(0),
            ocsp_urls: vec![],
            ca_issuers_url: None,
            crl_url: None,
        };
        let tbs = build_root_tbs(&root, S::Default, now, &mut rng).unwrap();
        let sig = block_on(client.sign("admin", "ca-key", S::EcdsaSha256, tbs.clone())).unwrap();
        let ca_der = assemble_certificate(&tbs, S::EcdsaSha256, &sig).unwrap();
        let issuer = Issuer::from_certificate_der(&ca_der, S::Default).unwrap();

        let responder = ResponderRequest {
            subject: name("CN=Signet Issuer Test OCSP,O=Signet"),
            spki_der: ocsp_key.spki.clone(),
            validity: Duration::from_secs(7 * 86400),
            backdate: Duration::from_secs(3600),
        };
        let tbs = build_ocsp_responder_tbs(&responder, &issuer, now, &mut rng).unwrap();
        let sig = block_on(client.sign("admin", "ca-key", S::EcdsaSha256, tbs.clone())).unwrap();
        let responder_der = assemble_certificate(&tbs, S::EcdsaSha256, &sig).unwrap();

        let dir = signd.dir.path().to_owned();
        std::fs::write(dir.join("ca.pem"), pem("CERTIFICATE", &ca_der)).unwrap();
        std::fs::write(dir.join("responder.der"), &responder_der).unwrap();
        std::fs::write(dir.join("profile.toml"), PROFILE).unwrap();
        let base_config = std::fs::read_to_string(&signd.config).unwrap();
        let issuers = format!(
            "\n[issuers.demo]\nkey = \"ca-key\"\ncertificate = \"{ca}\"\nprofile_file = \"{profile}\"\n\
             roles = [\"issuer\"]\ncrl_roles = [\"crl\"]\nraw_signing_roles = [\"admin\"]\n\
             [issuers.demo.ocsp]\nkey = \"ocsp-key\"\ncertificate = \"{responder}\"\nroles = [\"ocsp\"]\n\
             [issuers.locked]\nkey = \"ca-key\"\ncertificate = \"{ca}\"\nprofile = {{ {inline} }}\nroles = [\"acme\"]\n\
             raw_signing_roles = [\"admin\"]\n",
            ca = dir.join("ca.pem").display(),
            profile = dir.join("profile.toml").display(),
            responder = dir.join("responder.der").display(),
            inline = PROFILE.trim().lines().collect::<Vec<_>>().join(", "),
        );
        std::fs::write(&signd.config, format!("{base_config}{issuers}")).unwrap();
        signd.restart();
        let client = signd.client();
        Self { signd, client, profile: toml_profile(), issuer, ca_der, responder_der, base_config }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.signd.dir.path().join(file)
    }

    fn leaf_request(&self, key: &openssl::pkey::PKey<openssl::pkey::Private>) -> LeafRequest {
        LeafRequest {
            subject: name("CN=www.example.com"),
            spki_der: key.public_key_to_der().unwrap(),
            sans: vec![SanEntry::Dns("www.example.com".into())],
            validity: None,
            exact_validity: None,
            ekus: None,
            crl_shard: None,
        }
    }

    fn leaf_tbs(&self, profile: &Profile, issuer: &Issuer) -> Vec<u8> {
        let key = openssl::pkey::PKey::generate_ed25519().unwrap();
        build_leaf_tbs(profile, issuer, &self.leaf_request(&key), SystemTime::now(), &mut rand_core::OsRng).unwrap()
    }

    fn audit(&self) -> Vec<AuditRecord> {
        block_on(self.client.audit(AuditQuery { after_seq: 0, limit: 1000, newest_first: false })).unwrap()
    }
}

/// The profile as signd reads it from `profile.toml`.
fn toml_profile() -> Profile {
    toml::from_str(PROFILE).unwrap()
}

fn openssl(args: &[&str], dir: &Path) -> (bool, String) {
    let (st, out, err) = run(Command::new("openssl").args(args).current_dir(dir));
    (st.success(), format!("{out}{err}"))
}

fn expect_refusal(result: Result<Vec<u8>, signet_ipc::IpcError>, kind: ErrorKind, detail: &str) -> String {
    let e = result.expect_err("signd signed what it must refuse");
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.detail.contains(detail), "expected `{detail}` in: {e}");
    e.detail
}

#[test]
fn issues_leaves_and_refuses_everything_else() {
    let ca = Ca::new();
    let dir = ca.signd.dir.path();

    // A well-formed leaf is signed; openssl accepts the chain.
    let tbs = ca.leaf_tbs(&ca.profile, &ca.issuer);
    let cert = block_on(ca.client.sign_certificate("demo", tbs.clone())).unwrap();
    std::fs::write(ca.path("leaf.pem"), pem("CERTIFICATE", &cert)).unwrap();
    let (ok, out) = openssl(&["verify", "-CAfile", "ca.pem", "leaf.pem"], dir);
    assert!(ok && out.contains("leaf.pem: OK"), "{out}");
    assert_eq!(block_on(ca.client.issuer_certificate("demo")).unwrap(), ca.ca_der);
    // An empty name picks the first issuer the caller may use.
    block_on(ca.client.sign_certificate("", ca.leaf_tbs(&ca.profile, &ca.issuer))).unwrap();

    // A sub-CA certificate (CA:TRUE) from a compromised front end.
    let sub_ca = CaRequest {
        subject: name("CN=Sneaky Sub CA"),
        spki_der: openssl::pkey::PKey::generate_ed25519().unwrap().public_key_to_der().unwrap(),
        validity: Duration::from_secs(86400),
        backdate: Duration::ZERO,
        path_len: None,
        ocsp_urls: vec![],
        ca_issuers_url: None,
        crl_url: None,
    };
    let tbs = build_intermediate_tbs(&sub_ca, &ca.issuer, SystemTime::now(), &mut rand_core::OsRng).unwrap();
    let ca_true =
        expect_refusal(block_on(ca.client.sign_certificate("demo", tbs)), ErrorKind::PermissionDenied, "CA:TRUE");

    // Validity over the profile's maximum.
    let mut long = ca.profile.clone();
    long.max_validity_seconds *= 2;
    let mut req = ca.leaf_request(&openssl::pkey::PKey::generate_ed25519().unwrap());
    req.validity = Some(Duration::from_secs(long.max_validity_seconds));
    let tbs = build_leaf_tbs(&long, &ca.issuer, &req, SystemTime::now(), &mut rand_core::OsRng).unwrap();
    let too_long = expect_refusal(
        block_on(ca.client.sign_certificate("demo", tbs)),
        ErrorKind::PermissionDenied,
        "exceeds the maximum",
    );

    // Another issuer's name.
    let foreign = Issuer { name: name("CN=Someone Else"), ..ca.issuer.clone() };
    let tbs = ca.leaf_tbs(&ca.profile, &foreign);
    let foreign_name = expect_refusal(
        block_on(ca.client.sign_certificate("demo", tbs)),
        ErrorKind::PermissionDenied,
        "issuer name does not match",
    );

    // Another CA's key identifier.
    let other_key = Issuer { key_id: vec![0x55; 20], ..ca.issuer.clone() };
    let tbs = ca.leaf_tbs(&ca.profile, &other_key);
    expect_refusal(
        block_on(ca.client.sign_certificate("demo", tbs)),
        ErrorKind::PermissionDenied,
        "authorityKeyIdentifier",
    );

    // Not DER at all.
    expect_refusal(
        block_on(ca.client.sign_certificate("demo", b"not a certificate".to_vec())),
        ErrorKind::InvalidArgument,
        "malformed",
    );

    // Refusals are distinct and audited with their reason; the success with its serial.
    assert!(ca_true != too_long && too_long != foreign_name && ca_true != foreign_name);
    let audit = ca.audit();
    let issued: Vec<_> = audit.iter().filter(|r| r.operation == "issue-cert").collect();
    for reason in ["CA:TRUE", "exceeds the maximum", "issuer name does not match", "authorityKeyIdentifier"] {
        assert!(
            issued.iter().any(|r| !r.ok && r.outcome.starts_with("permission-denied") && r.outcome.contains(reason)),
            "no audited refusal for {reason}: {issued:#?}"
        );
    }
    let serial = openssl::x509::X509::from_der(&cert)
        .unwrap()
        .serial_number()
        .to_bn()
        .unwrap()
        .to_hex_str()
        .unwrap()
        .to_lowercase();
    assert!(
        issued
            .iter()
            .any(|r| r.ok && r.key_id == "ca-key" && r.role == "issuer" && r.outcome == format!("ok serial={serial}")),
        "no audit record with serial {serial}: {issued:#?}"
    );
    assert!(issued.iter().all(|r| r.message_sha256.len() == 32));
}

#[test]
fn roles_and_raw_signing() {
    let ca = Ca::new();
    let tbs = ca.leaf_tbs(&ca.profile, &ca.issuer);

    // The caller does not hold `acme`, the only role of issuer `locked`.
    expect_refusal(
        block_on(ca.client.sign_certificate("locked", tbs.clone())),
        ErrorKind::PermissionDenied,
        "holds none of the roles",
    );
    expect_refusal(
        block_on(ca.client.sign_certificate("nope", tbs.clone())),
        ErrorKind::InvalidArgument,
        "no issuer `nope`",
    );
    // `locked` has no CRL roles and no OCSP responder.
    expect_refusal(
        block_on(ca.client.sign_crl("locked", tbs.clone())),
        ErrorKind::PermissionDenied,
        "holds none of the roles",
    );
    expect_refusal(
        block_on(ca.client.sign_ocsp_response("locked", tbs.clone())),
        ErrorKind::Unsupported,
        "no OCSP responder",
    );
    let audit = ca.audit();
    assert!(audit
        .iter()
        .any(|r| r.operation == "issuer" && !r.ok && r.key_id == "ca-key" && r.outcome.contains("`locked`")));

    // Raw signing with the CA key or the responder key: refused for `issuer`
    // and `ocsp` although their `keys` patterns match (they could otherwise
    // sign a CA TBS unvalidated), allowed for `admin`, which the issuer lists
    // in raw_signing_roles.
    for (role, key) in [("issuer", "ca-key"), ("ocsp", "ocsp-key")] {
        let e = block_on(ca.client.sign(role, key, S::Default, tbs.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
        assert!(e.detail.contains("belongs to issuer `demo`"), "{e}");
        let e = block_on(ca.client.sign_batch(role, key, S::Default, vec![tbs.clone()])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    }
    // (Every issuer naming the key must list the role: both `demo` and `locked` do.)
    block_on(ca.client.sign("admin", "ca-key", S::Default, b"ceremony".to_vec())).unwrap();
    // Public information stays readable.
    assert_eq!(block_on(ca.client.public_key("issuer", "ca-key")).unwrap().id, "ca-key");
    let audit = ca.audit();
    assert!(audit
        .iter()
        .any(|r| r.operation == "sign" && r.role == "issuer" && !r.ok && r.outcome.contains("belongs to issuer")));
}

#[test]
fn crl_signer_signs_only_crls() {
    let ca = Ca::new();
    let dir = ca.signd.dir.path();
    let now = SystemTime::now();
    let revoked = [RevokedEntry {
        serial: vec![0x40, 1, 2, 3],
        revocation_time: now - Duration::from_secs(60),
        reason: Some(CrlReason::KeyCompromise),
    }];
    let params = CrlParams {
        this_update: now,
        next_update: now + Duration::from_secs(86400),
        crl_number: 7,
        shard_url: None,
        delta_base: None,
        freshest_crl_url: None,
        revoked: &revoked,
    };
    let tbs = build_tbs_crl(&ca.issuer, &params).unwrap();
    let crl = block_on(ca.client.sign_crl("demo", tbs)).unwrap();
    std::fs::write(ca.path("crl.pem"), pem("X509 CRL", &crl)).unwrap();
    let (ok, out) = openssl(&["crl", "-in", "crl.pem", "-CAfile", "ca.pem", "-noout", "-text"], dir);
    assert!(ok && out.contains("verify OK") && out.contains("40010203"), "{out}");

    // A TBSCertificate passed off as a CRL.
    let leaf = ca.leaf_tbs(&ca.profile, &ca.issuer);
    expect_refusal(block_on(ca.client.sign_crl("demo", leaf)), ErrorKind::InvalidArgument, "TBSCertList");
    // A CRL in another CA's name.
    let foreign = Issuer { name: name("CN=Someone Else"), ..ca.issuer.clone() };
    let tbs = build_tbs_crl(&foreign, &params).unwrap();
    expect_refusal(
        block_on(ca.client.sign_crl("demo", tbs)),
        ErrorKind::PermissionDenied,
        "issuer name does not match",
    );
    // A CRL is not a certificate either.
    let tbs = build_tbs_crl(&ca.issuer, &params).unwrap();
    expect_refusal(block_on(ca.client.sign_certificate("demo", tbs)), ErrorKind::InvalidArgument, "TBSCertificate");

    let audit = ca.audit();
    let crls: Vec<_> = audit.iter().filter(|r| r.operation == "sign-crl").collect();
    assert!(crls.iter().any(|r| r.ok && r.role == "crl" && r.outcome == "ok crl-number=07 revoked=1"), "{crls:#?}");
    assert_eq!(crls.iter().filter(|r| !r.ok).count(), 2, "{crls:#?}");
}

#[test]
fn ocsp_signer_signs_only_response_data_for_the_ca() {
    let ca = Ca::new();
    let dir = ca.signd.dir.path();
    let leaf = block_on(ca.client.sign_certificate("demo", ca.leaf_tbs(&ca.profile, &ca.issuer))).unwrap();
    std::fs::write(ca.path("leaf.pem"), pem("CERTIFICATE", &leaf)).unwrap();
    let serial = openssl::x509::X509::from_der(&leaf).unwrap().serial_number().to_bn().unwrap().to_vec();
    assert_eq!(block_on(ca.client.ocsp_responder_certificate("demo")).unwrap(), ca.responder_der);

    let responder = Responder::from_certificate_der(&ca.responder_der, S::Default).unwrap();
    let now = SystemTime::now();
    let data_for = |id: &CertIdentity| {
        build_response_data(
            &responder,
            &OcspResponseParams {
                cert_id: id,
                status: CertStatusInfo::Good,
                produced_at: now,
                this_update: now,
                next_update: Some(now + Duration::from_secs(86400)),
                nonce: None,
            },
        )
        .unwrap()
    };
    let id = CertIdentity::new(OcspHash::Sha1, &ca.ca_der, &serial).unwrap();
    let response = block_on(ca.client.sign_ocsp_response("demo", data_for(&id))).unwrap();
    std::fs::write(ca.path("response.der"), &response).unwrap();
    let (ok, out) = openssl(
        &[
            "ocsp",
            "-respin",
            "response.der",
            "-CAfile",
            "ca.pem",
            "-issuer",
            "ca.pem",
            "-cert",
            "leaf.pem",
            "-no_nonce",
        ],
        dir,
    );
    assert!(ok && out.contains("Response verify OK") && out.contains("leaf.pem: good"), "{out}");

    // A response about a certificate of another CA (here: "issued" by the leaf).
    let other = CertIdentity::new(OcspHash::Sha256, &leaf, &serial).unwrap();
    expect_refusal(
        block_on(ca.client.sign_ocsp_response("demo", data_for(&other))),
        ErrorKind::PermissionDenied,
        "another CA",
    );
    // A TBSCertificate passed off as ResponseData.
    let tbs = ca.leaf_tbs(&ca.profile, &ca.issuer);
    expect_refusal(block_on(ca.client.sign_ocsp_response("demo", tbs)), ErrorKind::InvalidArgument, "ResponseData");
    // ResponseData in another responder's name (the CA's own, say).
    let ca_as_responder = Responder::from_certificate_der(&ca.ca_der, S::Default).unwrap();
    let data = build_response_data(
        &ca_as_responder,
        &OcspResponseParams {
            cert_id: &id,
            status: CertStatusInfo::Good,
            produced_at: now,
            this_update: now,
            next_update: None,
            nonce: None,
        },
    )
    .unwrap();
    expect_refusal(block_on(ca.client.sign_ocsp_response("demo", data)), ErrorKind::PermissionDenied, "responderID");

    let audit = ca.audit();
    let ocsp: Vec<_> = audit.iter().filter(|r| r.operation == "sign-ocsp").collect();
    assert!(
        ocsp.iter().any(|r| r.ok && r.key_id == "ocsp-key" && r.role == "ocsp" && r.outcome.ends_with("status=good")),
        "{ocsp:#?}"
    );
    assert_eq!(ocsp.iter().filter(|r| !r.ok).count(), 3, "{ocsp:#?}");
}

/// OCSP responses in flight together from one client travel together
/// (OcspSigner's `signEach`), yet each is validated, signed, audited and
/// answered as its own call: one that is refused is refused alone.
#[test]
fn ocsp_responses_in_flight_together_are_each_their_own_call() {
    let ca = Ca::new();
    let responder = Responder::from_certificate_der(&ca.responder_der, S::Default).unwrap();
    let now = SystemTime::now();
    let data_for = |issuer_der: &[u8], serial: u32| {
        let id = CertIdentity::new(OcspHash::Sha1, issuer_der, &[0x40, (serial >> 8) as u8, serial as u8]).unwrap();
        let params = OcspResponseParams {
            cert_id: &id,
            status: CertStatusInfo::Good,
            produced_at: now,
            this_update: now,
            next_update: Some(now + Duration::from_secs(3600)),
            nonce: None,
        };
        build_response_data(&responder, &params).unwrap()
    };
    // The responses are verified as a relying party would: OpenSSL, the CA as the trust anchor.
    let ca_cert = openssl::x509::X509::from_der(&ca.ca_der).unwrap();
    let mut store = openssl::x509::store::X509StoreBuilder::new().unwrap();
    store.add_cert(ca_cert).unwrap();
    let store = store.build();
    let no_certs = openssl::stack::Stack::<openssl::x509::X509>::new().unwrap();
    let verified = |der: &[u8]| {
        let response = openssl::ocsp::OcspResponse::from_der(der).unwrap();
        assert_eq!(response.status(), openssl::ocsp::OcspResponseStatus::SUCCESSFUL);
        response.basic().unwrap().verify(&no_certs, &store, openssl::ocsp::OcspFlag::empty()).is_ok()
    };

    let each = block_on(ca.client.sign_ocsp_each(
        "demo",
        vec![data_for(&ca.ca_der, 1), ca.leaf_tbs(&ca.profile, &ca.issuer), data_for(&ca.ca_der, 3)],
    ))
    .unwrap();
    assert_eq!(each.len(), 3);
    assert!(verified(each[0].as_ref().unwrap()));
    assert_eq!(each[1].as_ref().unwrap_err().kind, ErrorKind::InvalidArgument, "{:?}", each[1]);
    assert!(verified(each[2].as_ref().unwrap()));

    // 100 calls at once from one client, one of them about another CA's certificate.
    let leaf = block_on(ca.client.sign_certificate("demo", ca.leaf_tbs(&ca.profile, &ca.issuer))).unwrap();
    let data: Vec<Vec<u8>> =
        (0..100).map(|i| if i == 50 { data_for(&leaf, i) } else { data_for(&ca.ca_der, 1000 + i) }).collect();
    let calls = data.iter().map(|d| ca.client.sign_ocsp_response("demo", d.clone()));
    for (i, answer) in block_on(futures::future::join_all(calls)).into_iter().enumerate() {
        match answer {
            Err(e) if i == 50 => assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}"),
            Ok(response) if i != 50 => assert!(verified(&response), "call {i}"),
            other => panic!("call {i}: {other:?}"),
        }
    }

    // One "sign-ocsp" record per call, with its ResponseData's hash.
    let audit = ca.audit();
    let ocsp: Vec<&AuditRecord> = audit.iter().filter(|r| r.operation == "sign-ocsp").collect();
    let signed: Vec<&Vec<u8>> = ocsp.iter().filter(|r| r.ok).map(|r| &r.message_sha256).collect();
    assert_eq!(signed.len(), 2 + 99, "{ocsp:#?}");
    for (i, d) in data.iter().enumerate().filter(|(i, _)| *i != 50) {
        assert!(signed.contains(&&openssl::sha::sha256(d).to_vec()), "no audit record for call {i}");
    }
    assert_eq!(ocsp.iter().filter(|r| !r.ok).count(), 2, "{ocsp:#?}");
}

/// One ResponseData about several certificates (RFC 6960 4.2.1, as ocspd
/// answers `openssl ocsp -cert a -cert b`): signed when every CertID names
/// the CA and there are at most 16; refused if one names another CA, or 17.
#[test]
fn ocsp_signer_signs_several_single_responses_of_the_ca() {
    let ca = Ca::new();
    let dir = ca.signd.dir.path();
    let leaves: Vec<Vec<u8>> = (0..2)
        .map(|_| block_on(ca.client.sign_certificate("demo", ca.leaf_tbs(&ca.profile, &ca.issuer))).unwrap())
        .collect();
    let serial_of = |der: &[u8]| openssl::x509::X509::from_der(der).unwrap().serial_number().to_bn().unwrap().to_vec();
    for (i, leaf) in leaves.iter().enumerate() {
        std::fs::write(ca.path(&format!("leaf{i}.pem")), pem("CERTIFICATE", leaf)).unwrap();
    }
    let responder = Responder::from_certificate_der(&ca.responder_der, S::Default).unwrap();
    let now = SystemTime::now();
    let data_for = |ids: &[CertIdentity], statuses: &[CertStatusInfo]| {
        let singles: Vec<_> = ids
            .iter()
            .zip(statuses)
            .map(|(cert_id, &status)| SingleResponseParams {
                cert_id,
                status,
                this_update: now,
                next_update: Some(now + Duration::from_secs(3600)),
            })
            .collect();
        build_multi_response_data(&responder, now, &singles, None).unwrap()
    };
    let revoked = CertStatusInfo::Revoked { time: now - Duration::from_secs(60), reason: Some(CrlReason::Superseded) };
    let ids = [
        CertIdentity::new(OcspHash::Sha1, &ca.ca_der, &serial_of(&leaves[0])).unwrap(),
        CertIdentity::new(OcspHash::Sha256, &ca.ca_der, &serial_of(&leaves[1])).unwrap(),
        CertIdentity::new(OcspHash::Sha1, &ca.ca_der, &[0x12, 0x34]).unwrap(),
    ];
    let statuses = [CertStatusInfo::Good, revoked, CertStatusInfo::Unknown];
    let response = block_on(ca.client.sign_ocsp_response("demo", data_for(&ids, &statuses))).unwrap();
    std::fs::write(ca.path("multi.der"), &response).unwrap();
    // The CLI finds each certificate's status in the one response.
    let (ok, out) = openssl(
        &[
            "ocsp",
            "-respin",
            "multi.der",
            "-CAfile",
            "ca.pem",
            "-issuer",
            "ca.pem",
            "-cert",
            "leaf0.pem",
            "-sha256",
            "-cert",
            "leaf1.pem",
            "-sha1",
            "-serial",
            "0x1234",
            "-no_nonce",
        ],
        dir,
    );
    assert!(ok, "{out}");
    for want in ["Response verify OK", "leaf0.pem: good", "leaf1.pem: revoked", "0x1234: unknown"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    // 16 are signed; 17 are not.
    let sixteen: Vec<_> =
        (1..=16u8).map(|i| CertIdentity::new(OcspHash::Sha1, &ca.ca_der, &[0x40, i]).unwrap()).collect();
    block_on(ca.client.sign_ocsp_response("demo", data_for(&sixteen, &[CertStatusInfo::Unknown; 16]))).unwrap();
    let mut data =
        signet_ca::x509_ocsp::ResponseData::from_der(&data_for(&sixteen, &[CertStatusInfo::Unknown; 16])).unwrap();
    data.responses.push(data.responses[0].clone());
    expect_refusal(
        block_on(ca.client.sign_ocsp_response("demo", data.to_der().unwrap())),
        ErrorKind::PermissionDenied,
        "1 to 16 SingleResponses, has 17",
    );
    // One certificate of another CA (here: "issued" by a leaf) among the CA's own.
    for at in 0..3 {
        let mut mixed = ids.clone();
        mixed[at] = CertIdentity::new(OcspHash::Sha1, &leaves[0], &[0x40, 7]).unwrap();
        expect_refusal(
            block_on(ca.client.sign_ocsp_response("demo", data_for(&mixed, &statuses))),
            ErrorKind::PermissionDenied,
            "another CA",
        );
    }

    let audit = ca.audit();
    let ocsp: Vec<_> = audit.iter().filter(|r| r.operation == "sign-ocsp").collect();
    let note = format!(
        "ok serial={} status=good; serial={} status=revoked; serial=1234 status=unknown",
        hex::encode(serial_of(&leaves[0])),
        hex::encode(serial_of(&leaves[1]))
    );
    assert!(ocsp.iter().any(|r| r.ok && r.outcome == note), "{note} in {ocsp:#?}");
    assert_eq!(ocsp.iter().filter(|r| !r.ok).count(), 4, "{ocsp:#?}");
}

/// signd refuses to start when an issuer's certificate is not its key's, or
/// the responder certificate is not issued by the CA.
#[test]
fn startup_checks_certificates_against_keys() {
    let mut ca = Ca::new();
    ca.signd.kill9();
    let dir = ca.signd.dir.path().to_owned();
    std::fs::write(dir.join("responder.pem"), pem("CERTIFICATE", &ca.responder_der)).unwrap();
    let cases = [
        // The CA key with the responder's certificate.
        (format!("key = \"ca-key\"\ncertificate = \"{}\"\nprofile_file = \"{}\"\n", dir.join("responder.pem").display(), dir.join("profile.toml").display()), "is not the public key of signd key `ca-key`"),
        // A "CA" (the responder's own certificate and key) that did not issue the responder certificate.
        (format!(
            "key = \"ocsp-key\"\ncertificate = \"{r}\"\nprofile_file = \"{p}\"\n[issuers.bad.ocsp]\nkey = \"ocsp-key\"\ncertificate = \"{r}\"\n",
            r = dir.join("responder.pem").display(),
            p = dir.join("profile.toml").display()
        ), "is not issued by the CA"),
        (format!("key = \"ca-key\"\ncertificate = \"{}\"\n", dir.join("ca.pem").display()), "exactly one of `profile` and `profile_file`"),
        (format!("key = \"no-such-key\"\ncertificate = \"{}\"\nprofile_file = \"{}\"\n", dir.join("ca.pem").display(), dir.join("profile.toml").display()), "no key `no-such-key`"),
    ];
    for (issuer, expected) in cases {
        let config = dir.join("bad.toml");
        std::fs::write(&config, format!("{}\n[issuers.bad]\n{issuer}", ca.base_config)).unwrap();
        let (st, _, err) = run(Command::new(bin("signd")).arg("--config").arg(&config));
        assert!(!st.success(), "signd started with {issuer}");
        assert!(err.contains("issuer `bad`") && err.contains(expected), "expected `{expected}`: {err}");
    }
}
