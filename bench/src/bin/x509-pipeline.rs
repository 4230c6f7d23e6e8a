//! The X.509 pipeline of seed 003 (synta x509bench), with Signet's CA core:
//! a CA self-signs, issues a batch of end-entity certificates, builds and signs
//! a CRL and one OCSP response per certificate, stores everything in LMDB,
//! reads it back and verifies every signature.
//!
//! ```sh
//! cargo build --release -p signet-bench --bin x509-pipeline
//! $CARGO_TARGET_DIR/release/x509-pipeline [--algorithms ecdsa-p256,ed25519,ml-dsa-44,rsa-2048] [--sizes 64,1024]
//! ```
//!
//! Each stage is timed over a whole batch; the median of `--reps` runs is
//! reported with items per second. The parallel stages (cert_gen, cert_verify,
//! ocsp_sign, ocsp_verify) run on one thread per CPU, as x509bench's Rayon
//! stages do on its 16. Keys and signatures are OpenSSL 3.5 through signd's
//! own OpenSSL backend functions, in process (no IPC): this measures the CA
//! core, as x509bench does. LMDB is signet-store with fsync on commit.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use der::{Decode, Encode};
use openssl::pkey::{PKey, Private, Public};
use openssl::x509::{X509Crl, X509};
use rand_core::OsRng;
use signd::backend::openssl::{generate, sign};
use signet_ca::ocsp::OcspHash;
use signet_ca::{
    assemble_certificate, assemble_crl, assemble_ocsp_response, build_leaf_tbs, build_response_data, build_root_tbs,
    build_tbs_crl, CaRequest, CertIdentity, CertStatusInfo, CrlParams, Issuer, KeyAlgorithm, LeafRequest, Name,
    OcspResponseParams, Profile, Responder, RevokedEntry, SanEntry, SignatureScheme,
};
use signet_store::{Store, StoreOptions, Table};

#[derive(Parser)]
struct Args {
    /// CA (and subscriber) key algorithms, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "ecdsa-p256,ed25519,ml-dsa-44,rsa-2048")]
    algorithms: Vec<KeyAlgorithm>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,1024")]
    sizes: Vec<usize>,
    /// Runs per stage; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

const PROFILE: &str = r#"
name = "bench"
max_validity_seconds = 7776000
backdate_seconds = 60
allowed_ekus = ["server-auth"]
default_ekus = ["server-auth"]
allow_dns_sans = true
ocsp_urls = ["http://ocsp.bench/"]
crl_url = "http://crl.bench/ca.crl"
allowed_key_algorithms = ["ecdsa-p256", "ed25519", "ml-dsa-44", "ml-dsa-65", "rsa-2048"]
"#;

struct Ca {
    key: PKey<Private>,
    scheme: SignatureScheme,
    cert: Vec<u8>,
    issuer: Issuer,
    public: PKey<Public>,
}

/// Self-signs a CA certificate for `key` (key generation is not timed).
fn make_ca(alg: KeyAlgorithm, key: PKey<Private>) -> Ca {
    let scheme = alg.default_scheme();
    let req = CaRequest {
        subject: Name::from_str("CN=Bench CA").unwrap(),
        spki_der: key.public_key_to_der().unwrap(),
        validity: Duration::from_secs(365 * 86_400),
        backdate: Duration::from_secs(60),
        path_len: Some(0),
        ocsp_urls: vec![],
        ca_issuers_url: None,
        crl_url: None,
    };
    let tbs = build_root_tbs(&req, scheme, SystemTime::now(), &mut OsRng).unwrap();
    let cert = assemble_certificate(&tbs, scheme, &sign(&key, scheme, &tbs).unwrap()).unwrap();
    let issuer = Issuer::from_certificate_der(&cert, scheme).unwrap();
    let public = X509::from_der(&cert).unwrap().public_key().unwrap();
    Ca { key, scheme, cert, issuer, public }
}

/// Runs `f(i)` for i in 0..n on one thread per CPU; results in order.
fn parallel<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).min(n.max(1));
    let chunk = n.div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                s.spawn(move || (t * chunk..((t + 1) * chunk).min(n)).map(f).collect::<Vec<T>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

fn verify_sig(public: &PKey<Public>, scheme: SignatureScheme, msg: &[u8], sig: &[u8]) -> bool {
    use openssl::hash::MessageDigest;
    use openssl::sign::Verifier;
    let md = match scheme {
        SignatureScheme::EcdsaSha256 | SignatureScheme::RsaPkcs1Sha256 => Some(MessageDigest::sha256()),
        SignatureScheme::EcdsaSha384 | SignatureScheme::RsaPkcs1Sha384 => Some(MessageDigest::sha384()),
        SignatureScheme::EcdsaSha512 | SignatureScheme::RsaPkcs1Sha512 => Some(MessageDigest::sha512()),
        _ => None,
    };
    let mut v = match md {
        Some(md) => Verifier::new(md, public).unwrap(),
        None => Verifier::new_without_digest(public).unwrap(),
    };
    v.verify_oneshot(sig, msg).unwrap_or(false)
}

/// (tbs_response_data DER, signature) of an OCSPResponse.
fn ocsp_parts(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let resp = x509_ocsp::OcspResponse::from_der(der).unwrap();
    let bytes = resp.response_bytes.unwrap();
    let basic = x509_ocsp::BasicOcspResponse::from_der(bytes.response.as_bytes()).unwrap();
    (basic.tbs_response_data.to_der().unwrap(), basic.signature.raw_bytes().to_vec())
}

struct Row {
    stage: &'static str,
    items: usize,
    median: Duration,
}

fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    times.sort();
    (times[times.len() / 2], last.unwrap())
}

fn run(alg: KeyAlgorithm, n: usize, reps: usize, store: &Store) -> Vec<Row> {
    let profile: Profile = toml::from_str(PROFILE).unwrap();
    let mut rows = Vec::new();
    let mut push = |stage, items, median| rows.push(Row { stage, items, median });

    let ca_key = generate(alg).unwrap();
    let (t, ca) = time(reps, || make_ca(alg, ca_key.clone()));
    push("ca_self_sign", 1, t);

    // One subscriber key for the batch, made outside the timing (x509bench's
    // RSA cert_gen figures look like they include key generation; ours never do).
    let subscriber = generate(alg).unwrap().public_key_to_der().unwrap();
    let now = SystemTime::now();
    let (t, certs) = time(reps, || {
        parallel(n, |i| {
            let req = LeafRequest {
                subject: Name::from_str(&format!("CN=leaf{i}.bench")).unwrap(),
                spki_der: subscriber.clone(),
                sans: vec![SanEntry::Dns(format!("leaf{i}.bench"))],
                validity: None,
                exact_validity: None,
                ekus: None,
                crl_shard: None,
            };
            let tbs = build_leaf_tbs(&profile, &ca.issuer, &req, now, &mut OsRng).unwrap();
            assemble_certificate(&tbs, ca.scheme, &sign(&ca.key, ca.scheme, &tbs).unwrap()).unwrap()
        })
    });
    push("cert_gen", n, t);
    let serials: Vec<Vec<u8>> = certs
        .iter()
        .map(|c| x509_cert::Certificate::from_der(c).unwrap().tbs_certificate.serial_number.as_bytes().to_vec())
        .collect();

    let certs_table: Table<Vec<u8>, Vec<u8>> = store.table("certs").unwrap();
    let (t, ()) = time(reps, || {
        store
            .write(|w| {
                for (s, c) in serials.iter().zip(&certs) {
                    w.put(&certs_table, s, c)?;
                }
                Ok(())
            })
            .unwrap()
    });
    push("db_insert_certs", n, t);
    let (t, ok) = time(reps, || parallel(n, |i| X509::from_der(&certs[i]).unwrap().verify(&ca.public).unwrap()));
    assert!(ok.iter().all(|b| *b));
    push("cert_verify", n, t);
    let (t, read) = time(reps, || {
        store.read(|r| serials.iter().map(|s| r.get(&certs_table, s)).collect::<Result<Vec<_>, _>>()).unwrap()
    });
    assert!(read.iter().all(Option::is_some));
    push("db_read_certs", n, t);

    let revoked: Vec<RevokedEntry> =
        serials.iter().map(|s| RevokedEntry { serial: s.clone(), revocation_time: now, reason: None }).collect();
    let params = CrlParams {
        this_update: now,
        next_update: now + Duration::from_secs(86_400),
        crl_number: 1,
        shard_url: None,
        delta_base: None,
        freshest_crl_url: None,
        revoked: &revoked,
    };
    let (t, tbs) = time(reps, || build_tbs_crl(&ca.issuer, &params).unwrap());
    push("crl_build", 1, t);
    let (t, crl) = time(reps, || assemble_crl(&tbs, ca.scheme, &sign(&ca.key, ca.scheme, &tbs).unwrap()).unwrap());
    push("crl_sign", 1, t);
    let crl_table: Table<u64, Vec<u8>> = store.table("crls").unwrap();
    let (t, ()) = time(reps, || store.write(|w| w.put(&crl_table, &1, &crl)).unwrap());
    push("db_insert_crl", 1, t);
    let (t, ok) = time(reps, || X509Crl::from_der(&crl).unwrap().verify(&ca.public).unwrap());
    assert!(ok);
    push("crl_verify", 1, t);
    let (t, got) = time(reps, || store.read(|r| r.get(&crl_table, &1)).unwrap());
    assert!(got.is_some());
    push("db_read_crl", 1, t);

    // OCSP: the CA signs its own responses (no delegated responder), as x509bench does.
    let responder = Responder::from_certificate_der(&ca.cert, ca.scheme).unwrap();
    let ids: Vec<CertIdentity> =
        serials.iter().map(|s| CertIdentity::new(OcspHash::Sha1, &ca.cert, s).unwrap()).collect();
    let response_params = |i: usize| OcspResponseParams {
        cert_id: &ids[i],
        status: CertStatusInfo::Good,
        produced_at: now,
        this_update: now,
        next_update: Some(now + Duration::from_secs(86_400)),
        nonce: None,
    };
    let (t, datas) = time(reps, || parallel(n, |i| build_response_data(&responder, &response_params(i)).unwrap()));
    push("ocsp_build", n, t);
    let (t, responses) = time(reps, || {
        parallel(n, |i| {
            assemble_ocsp_response(&datas[i], ca.scheme, &sign(&ca.key, ca.scheme, &datas[i]).unwrap(), &[]).unwrap()
        })
    });
    push("ocsp_sign", n, t);
    let ocsp_table: Table<Vec<u8>, Vec<u8>> = store.table("ocsp").unwrap();
    let (t, ()) = time(reps, || {
        store
            .write(|w| {
                for (s, r) in serials.iter().zip(&responses) {
                    w.put(&ocsp_table, s, r)?;
                }
                Ok(())
            })
            .unwrap()
    });
    push("db_insert_ocsp", n, t);
    let (t, ok) = time(reps, || {
        parallel(n, |i| {
            let (tbs, sig) = ocsp_parts(&responses[i]);
            verify_sig(&ca.public, ca.scheme, &tbs, &sig)
        })
    });
    assert!(ok.iter().all(|b| *b));
    push("ocsp_verify", n, t);
    let (t, read) = time(reps, || {
        store.read(|r| serials.iter().map(|s| r.get(&ocsp_table, s)).collect::<Result<Vec<_>, _>>()).unwrap()
    });
    assert!(read.iter().all(Option::is_some));
    push("db_read_ocsp", n, t);
    rows
}

fn main() {
    let args = Args::parse();
    for alg in &args.algorithms {
        let results: Vec<(usize, Vec<Row>)> = args
            .sizes
            .iter()
            .map(|&n| {
                let dir = tempfile::tempdir().unwrap();
                let store = Store::open(dir.path(), StoreOptions::new("x509-pipeline", 1)).unwrap();
                (n, run(*alg, n, args.reps, &store))
            })
            .collect();
        println!("\n### {alg}\n");
        let header: Vec<String> = results.iter().map(|(n, _)| format!("batch {n}: time | k items/s")).collect();
        println!("| stage | {} |", header.join(" | "));
        println!("|---|{}", "---:|---:|".repeat(results.len()));
        for i in 0..results[0].1.len() {
            let cells: Vec<String> = results
                .iter()
                .map(|(_, rows)| {
                    let r = &rows[i];
                    let ms = r.median.as_secs_f64() * 1e3;
                    format!("{ms:.2} ms | {:.1}", r.items as f64 / r.median.as_secs_f64() / 1e3)
                })
                .collect();
            println!("| `{}` | {} |", results[0].1[i].stage, cells.join(" | "));
        }
    }
}
