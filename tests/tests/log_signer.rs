//! signd's CT log signer role over the real socket: a LogSigner that signs
//! RFC 6962 SCT and tree head signature inputs with the log key (verified by
//! OpenSSL, library and CLI, and by signet-ct as a CT client would), refuses
//! anything else whole, refuses callers without the log's role and raw
//! signing with the log key, audits each call, and a start on a log key that
//! is missing or not P-256 is refused. Signing runs once per signd backend
//! (OpenSSL, NSS softokn, NSS + SoftHSM2).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use openssl::asn1::{Asn1Object, Asn1OctetString, Asn1Time};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::BasicConstraints;
use openssl::x509::{X509Extension, X509NameBuilder, X509};
use signet_ct::rfc6962::precert;
use signet_ct::{DigitallySigned, LogKey, Sct, SignedEntry, TimestampedEntry, TreeHead};
use signet_ipc::{
    block_on, AuditQuery, AuditRecord, ErrorKind, IpcError, KeyAlgorithm, SignatureScheme as S, SigndClient,
};
use signet_tests::{bin, openssl_verify, run, Backend, SigndProcess};

/// The most inputs in one call (signd's `[limits] max_batch`).
const MAX_BATCH: usize = 8;
const TIMESTAMP: u64 = 1_750_000_000_000;

/// The current uid holds `admin` (from the harness) and `ctlog`, whose key
/// patterns cover the log keys; `other` belongs to someone else.
fn roles() -> String {
    let uid = nix::unistd::getuid().as_raw();
    format!(
        "[limits]\nmax_batch = {MAX_BATCH}\n\
         [roles.ctlog]\nusers = [{uid}]\nkeys = [\"ct-*\"]\n\
         [roles.other]\nusers = [12345]\nkeys = [\"ct-*\"]\n"
    )
}

/// A signd with log `main` (key `ct-key`, role `ctlog`, raw signing for
/// `admin`) and log `locked` (key `ct-other`, role `other` only).
struct Log {
    signd: SigndProcess,
    client: SigndClient,
    base_config: String,
}

impl Log {
    fn new() -> Self {
        Self::on(Backend::Openssl)
    }

    /// The log keys on `backend`.
    fn on(backend: Backend) -> Self {
        let mut signd = SigndProcess::start_backend(backend, &roles());
        let client = signd.client();
        for (id, algorithm) in
            [("ct-key", KeyAlgorithm::EcP256), ("ct-other", KeyAlgorithm::EcP256), ("ct-p384", KeyAlgorithm::EcP384)]
        {
            block_on(client.generate_key(signd.spec(id, algorithm))).unwrap();
        }
        let base_config = std::fs::read_to_string(&signd.config).unwrap();
        let logs = "\n[logs.main]\nkey = \"ct-key\"\nroles = [\"ctlog\"]\nraw_signing_roles = [\"admin\"]\n\
                    [logs.locked]\nkey = \"ct-other\"\nroles = [\"other\"]\n";
        std::fs::write(&signd.config, format!("{base_config}{logs}")).unwrap();
        signd.restart();
        let client = signd.client();
        Self { signd, client, base_config }
    }

    fn audit(&self) -> Vec<AuditRecord> {
        block_on(self.client.audit(AuditQuery { after_seq: 0, limit: 1000, newest_first: false })).unwrap()
    }
}

fn p256() -> PKey<Private> {
    PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap()
}

/// A certificate for `subject`'s key, signed by `issuer` (self-signed when
/// `issuer` is `None`); a precertificate (critical poison) when `poison`.
fn certificate(cn: &str, subject: &PKey<Private>, issuer: Option<(&str, &PKey<Private>)>, poison: bool) -> Vec<u8> {
    let name = |cn: &str| {
        let mut n = X509NameBuilder::new().unwrap();
        n.append_entry_by_text("CN", cn).unwrap();
        n.build()
    };
    let (issuer_cn, issuer_key) = issuer.unwrap_or((cn, subject));
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&openssl::bn::BigNum::from_u32(0x4242).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name(cn)).unwrap();
    b.set_issuer_name(&name(issuer_cn)).unwrap();
    b.set_pubkey(subject).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::days_from_now(30).unwrap()).unwrap();
    if issuer.is_none() {
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
    }
    if poison {
        let oid = Asn1Object::from_str("1.3.6.1.4.1.11129.2.4.3").unwrap();
        let null = Asn1OctetString::new_from_bytes(&[0x05, 0x00]).unwrap();
        b.append_extension(X509Extension::new_from_der(&oid, true, &null).unwrap()).unwrap();
    }
    b.sign(issuer_key, MessageDigest::sha256()).unwrap();
    b.build().to_der().unwrap()
}

/// A CA, a leaf it issued and a precertificate of that leaf.
struct Chain {
    ca: Vec<u8>,
    leaf: Vec<u8>,
    precert: Vec<u8>,
}

fn chain() -> Chain {
    let (ca_key, leaf_key) = (p256(), p256());
    Chain {
        ca: certificate("Signet CT Test CA", &ca_key, None, false),
        leaf: certificate("www.example.com", &leaf_key, Some(("Signet CT Test CA", &ca_key)), false),
        precert: certificate("www.example.com", &leaf_key, Some(("Signet CT Test CA", &ca_key)), true),
    }
}

fn timestamped(entry: SignedEntry, extensions: Vec<u8>) -> TimestampedEntry {
    TimestampedEntry { timestamp: TIMESTAMP, entry, extensions }
}

fn tree_head(tree_size: u64) -> TreeHead {
    TreeHead { timestamp: TIMESTAMP + 1, tree_size, root_hash: [0x5a; 32] }
}

fn expect_refusal<T: std::fmt::Debug>(result: Result<T, IpcError>, kind: ErrorKind, detail: &str) -> String {
    let e = result.expect_err("signd signed what it must refuse");
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.detail.contains(detail), "expected `{detail}` in: {e}");
    e.detail
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

mod signs_sct_and_tree_head_inputs_verifiably {
    use signet_tests::Backend;

    #[test]
    fn openssl() {
        super::signs_sct_and_tree_head_inputs_verifiably(Backend::Openssl)
    }
    #[test]
    fn nss_softokn() {
        super::signs_sct_and_tree_head_inputs_verifiably(Backend::NssSoftokn)
    }
    #[test]
    fn nss_softhsm() {
        super::signs_sct_and_tree_head_inputs_verifiably(Backend::NssSofthsm)
    }
}

fn signs_sct_and_tree_head_inputs_verifiably(backend: Backend) {
    let log = Log::on(backend);
    let dir = log.signd.dir.path();
    let chain = chain();
    let x509 = SignedEntry::X509(chain.leaf.clone());
    let pre = precert::precert_entry(&[&chain.precert, &chain.ca]).unwrap();
    assert!(matches!(pre, SignedEntry::Precert { .. }));
    let x509_entry = timestamped(x509.clone(), vec![]);
    let pre_entry = timestamped(pre.clone(), signet_ct::staticct::leaf_index_extensions(1).unwrap());
    let head = tree_head(2);
    let inputs = vec![
        x509_entry.sct_signature_input().unwrap(),
        pre_entry.sct_signature_input().unwrap(),
        head.signature_input(),
    ];

    let signatures = block_on(log.client.sign_ct("main", inputs.clone())).unwrap();
    assert_eq!(signatures.len(), 3);
    let spki = block_on(log.client.ct_log_public_key("main")).unwrap();
    assert_eq!(spki, block_on(log.client.admin_key("ct-key")).unwrap().spki);

    // OpenSSL (the library): each signature is ECDSA P-256 with SHA-256 over its input.
    for (input, sig) in inputs.iter().zip(&signatures) {
        assert!(openssl_verify(&spki, S::EcdsaSha256, input, sig), "signature does not verify");
    }
    // OpenSSL (the CLI), independently of this process's OpenSSL.
    std::fs::write(dir.join("log.pem"), pem("PUBLIC KEY", &spki)).unwrap();
    for (i, (input, sig)) in inputs.iter().zip(&signatures).enumerate() {
        std::fs::write(dir.join(format!("input{i}.bin")), input).unwrap();
        std::fs::write(dir.join(format!("sig{i}.der")), sig).unwrap();
        let (st, out, err) = run(Command::new("openssl").current_dir(dir).args([
            "dgst",
            "-sha256",
            "-verify",
            "log.pem",
            "-signature",
            &format!("sig{i}.der"),
            &format!("input{i}.bin"),
        ]));
        assert!(st.success() && out.contains("Verified OK"), "input {i}: {out}{err}");
    }
    // As a CT client checks them: SCTs and the tree head under the log's ID.
    let key = LogKey::from_spki_der(&spki).unwrap();
    assert_eq!(key.log_id(), signet_ct::rfc6962::log_id(&spki).unwrap());
    for (entry, ts, sig) in [(&x509, &x509_entry, &signatures[0]), (&pre, &pre_entry, &signatures[1])] {
        let sct = Sct {
            log_id: key.log_id(),
            timestamp: ts.timestamp,
            extensions: ts.extensions.clone(),
            signature: DigitallySigned::ecdsa(sig.clone()),
        };
        key.verify_sct(&sct, entry).unwrap();
    }
    key.verify_tree_head(&head, &DigitallySigned::ecdsa(signatures[2].clone())).unwrap();

    // An empty name picks the first log the caller may use: `main`.
    let sigs = block_on(log.client.sign_ct("", vec![tree_head(7).signature_input(); 2])).unwrap();
    assert!(openssl_verify(&spki, S::EcdsaSha256, &tree_head(7).signature_input(), &sigs[1]));
    // A batch of SCTs alone, as many as the limit allows.
    let many = vec![inputs[0].clone(); MAX_BATCH];
    assert_eq!(block_on(log.client.sign_ct("main", many)).unwrap().len(), MAX_BATCH);

    // One audit record per call, with what it signed.
    let audit = log.audit();
    let signed: Vec<_> = audit.iter().filter(|r| r.operation == "sign-ct").collect();
    assert_eq!(signed.len(), 3, "{signed:#?}");
    let first = signed[0];
    assert!(first.ok && first.outcome == "ok scts=2 tree-heads=1 tree-size=2", "{first:#?}");
    assert_eq!((first.key_id.as_str(), first.role.as_str()), ("ct-key", "ctlog"));
    assert_eq!(first.uid, nix::unistd::getuid().as_raw());
    assert_eq!(first.pid, std::process::id() as i32);
    assert_eq!(first.message_sha256, openssl::sha::sha256(&inputs.concat()).to_vec());
    assert_eq!(signed[1].outcome, "ok scts=0 tree-heads=2 tree-size=7");
    assert_eq!(signed[2].outcome, format!("ok scts={MAX_BATCH} tree-heads=0"));
}

#[test]
fn malformed_inputs_refuse_the_whole_call() {
    let log = Log::new();
    let chain = chain();
    let good = timestamped(SignedEntry::X509(chain.leaf.clone()), vec![]).sct_signature_input().unwrap();
    let head = tree_head(3).signature_input();
    let with = |mut v: Vec<u8>, i: usize, b: u8| {
        v[i] = b;
        v
    };
    let tbs = precert::tbs_certificate(&chain.leaf).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("SCT, version 1", with(good.clone(), 0, 1), "version 1 is not v1 (0)"),
        ("tree head, version 1", with(head.clone(), 0, 1), "version 1 is not v1 (0)"),
        ("signature type 2", with(good.clone(), 1, 2), "signature_type 2 is neither"),
        ("truncated SCT", good[..good.len() - 3].to_vec(), "SCT input: TLS encoding: truncated"),
        ("trailing byte", [good.clone(), vec![0]].concat(), "SCT input: 1 trailing bytes"),
        (
            "not DER",
            timestamped(SignedEntry::X509(b"not a certificate".to_vec()), vec![]).sct_signature_input().unwrap(),
            "x509_entry is not a DER X.509 Certificate",
        ),
        (
            "a TBS as a certificate",
            timestamped(SignedEntry::X509(tbs), vec![]).sct_signature_input().unwrap(),
            "x509_entry is not a DER X.509 Certificate",
        ),
        (
            "a certificate as a TBS",
            timestamped(SignedEntry::Precert { issuer_key_hash: [1; 32], tbs_certificate: chain.leaf.clone() }, vec![])
                .sct_signature_input()
                .unwrap(),
            "precert_entry is not a DER TBSCertificate",
        ),
        ("49-byte tree head", head[..49].to_vec(), "tree head input: 49 bytes, not 50"),
        ("51-byte tree head", [head.clone(), vec![0]].concat(), "tree head input: 51 bytes, not 50"),
        ("empty", vec![], "0 bytes: too short"),
    ];
    for (what, bad, why) in &cases {
        // Alone, and after good inputs: the whole call is refused, naming the input.
        expect_refusal(block_on(log.client.sign_ct("main", vec![bad.clone()])), ErrorKind::InvalidArgument, why);
        let detail = expect_refusal(
            block_on(log.client.sign_ct("main", vec![good.clone(), head.clone(), bad.clone()])),
            ErrorKind::InvalidArgument,
            "input 2 of 3: ",
        );
        assert!(detail.contains(why) && detail.contains("CT log `main`"), "{what}: {detail}");
    }
    expect_refusal(block_on(log.client.sign_ct("main", vec![])), ErrorKind::InvalidArgument, "no inputs");
    expect_refusal(
        block_on(log.client.sign_ct("main", vec![head.clone(); MAX_BATCH + 1])),
        ErrorKind::TooLarge,
        "over the limit",
    );

    // Each refusal is audited with its reason and the hash of what was sent.
    let audit = log.audit();
    let refused: Vec<_> = audit.iter().filter(|r| r.operation == "sign-ct" && !r.ok).collect();
    assert!(audit.iter().filter(|r| r.operation == "sign-ct").all(|r| !r.ok));
    assert_eq!(refused.len(), 2 * cases.len() + 1, "{refused:#?}");
    for (_, bad, why) in &cases {
        let hash = openssl::sha::sha256(bad).to_vec();
        assert!(
            refused.iter().any(|r| r.message_sha256 == hash
                && r.outcome.starts_with("invalid-argument")
                && r.outcome.contains(why)
                && r.key_id == "ct-key"
                && r.role == "ctlog"),
            "no audit record for {why}: {refused:#?}"
        );
    }
}

#[test]
fn roles_and_raw_signing() {
    let log = Log::new();
    let head = tree_head(1).signature_input();

    // The caller does not hold `other`, the only role of log `locked`.
    expect_refusal(
        block_on(log.client.sign_ct("locked", vec![head.clone()])),
        ErrorKind::PermissionDenied,
        "holds none of the roles (other)",
    );
    expect_refusal(block_on(log.client.ct_log_public_key("locked")), ErrorKind::PermissionDenied, "log `locked`");
    expect_refusal(
        block_on(log.client.sign_ct("nope", vec![head.clone()])),
        ErrorKind::InvalidArgument,
        "no CT log `nope`",
    );
    // The role admitted: signs.
    block_on(log.client.sign_ct("main", vec![head.clone()])).unwrap();
    let audit = log.audit();
    let obtains: Vec<_> = audit.iter().filter(|r| r.operation == "log-signer").collect();
    assert!(
        obtains.iter().any(|r| !r.ok
            && r.key_id == "ct-other"
            && r.outcome.starts_with("permission-denied")
            && r.outcome.contains("`locked`")),
        "{obtains:#?}"
    );
    assert!(obtains.iter().any(|r| !r.ok && r.outcome.contains("`nope`")), "{obtains:#?}");

    // Raw signing with a log key: refused for `ctlog` and for `admin` on
    // `locked` (their `keys` patterns match), allowed for `admin` on `main`,
    // which lists it in raw_signing_roles.
    for (role, key) in [("ctlog", "ct-key"), ("ctlog", "ct-other"), ("admin", "ct-other")] {
        let e = block_on(log.client.sign(role, key, S::Default, head.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
        assert!(e.detail.contains("belongs to CT log"), "{e}");
        let e = block_on(log.client.sign_batch(role, key, S::Default, vec![head.clone()])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
        let each = block_on(log.client.sign_each(role, key, S::Default, vec![head.clone(), head.clone()])).unwrap();
        assert!(each.iter().all(|r| r.as_ref().is_err_and(|e| e.kind == ErrorKind::PermissionDenied)), "{each:?}");
    }
    let sig = block_on(log.client.sign("admin", "ct-key", S::EcdsaSha256, b"ceremony".to_vec())).unwrap();
    let spki = block_on(log.client.public_key("ctlog", "ct-key")).unwrap().spki;
    assert!(openssl_verify(&spki, S::EcdsaSha256, b"ceremony", &sig));
    // Other keys the role may use are unaffected.
    block_on(log.client.sign("ctlog", "ct-p384", S::Default, b"anything".to_vec())).unwrap();
    let audit = log.audit();
    assert!(audit.iter().any(|r| r.operation == "sign"
        && r.role == "ctlog"
        && !r.ok
        && r.outcome.contains("belongs to CT log `main`")));
}

/// signd refuses to start when a log's key is missing or not ECDSA P-256.
#[test]
fn startup_checks_the_log_key() {
    let mut log = Log::new();
    log.signd.kill9();
    let dir = log.signd.dir.path().to_owned();
    for (key, expected) in [
        ("ct-p384", "signd key `ct-p384` is ecdsa-p384: a CT log key must be ECDSA P-256"),
        ("no-such-key", "no key `no-such-key`"),
    ] {
        let config = dir.join("bad.toml");
        std::fs::write(&config, format!("{}\n[logs.bad]\nkey = \"{key}\"\nroles = [\"ctlog\"]\n", log.base_config))
            .unwrap();
        let (st, out, err) = run(Command::new(bin("signd")).arg("--config").arg(&config).arg("--check-config"));
        assert!(st.success(), "--check-config cannot see the key ring: {out}{err}");
        let (st, _, err) = run(Command::new(bin("signd")).arg("--config").arg(&config));
        assert!(!st.success(), "signd started with log key {key}");
        assert!(err.contains("log `bad`") && err.contains(expected), "expected `{expected}`: {err}");
    }
}
