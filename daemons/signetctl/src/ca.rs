//! `signetctl ca`, `cert` and `crl`: the CA ceremony, manual issuance, and
//! revocation (and release from hold) through ocspd.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use rand_core::{OsRng, RngCore};
use serde_json::json;
use signet_ca::der::Decode;
use signet_ca::x509_cert::crl::CertificateList;
use signet_ca::x509_cert::Certificate;
use signet_ca::{
    assemble_certificate, build_intermediate_tbs, build_leaf_tbs, build_ocsp_responder_tbs, build_root_tbs, parse_csr,
    CaRequest, Eku, Issuer, KeyUsageBit, LeafRequest, Name, Profile, ResponderRequest, SanEntry,
};
use signet_ipc::{
    block_on, CertState, CertStatus, CrlSelector, ErrorKind, IssuedCert, KeyAlgorithm, KeyInfo, KeySpec, OcspdClient,
    Revocation, RevocationReason, SignatureScheme, SigndClient,
};

use crate::output::{pem, rfc3339_secs, Printer};
use crate::Failure;

/// `signetctl ca ...`
#[derive(Subcommand)]
pub enum CaCommand {
    /// Create a CA in signd: a root, an issuing CA and its OCSP responder, keys
    /// generated in signd. Writes the certificates, the end-entity profile and
    /// the `[issuers.NAME]` block to add to signd's config.
    Init(InitArgs),
    /// A new OCSP responder key and certificate for the CA (`--issuer`), with
    /// no downtime: the key generated in signd, its certificate (the current
    /// responder's subject, id-kp-OCSPSigning) signed by the CA in signd and
    /// kept there, then ocspd switched to it. signd keeps signing for the
    /// previous responder meanwhile, so no OCSP request fails.
    RotateResponder(RotateResponderArgs),
    /// A new issuing CA for the CA (`--issuer`), with no downtime: its key and
    /// its OCSP responder's generated in signd, its certificate signed there by
    /// the root key and kept there as a new issuer (`--new-name`) with the
    /// current one's profile and roles. The current issuer stays: it keeps
    /// signing CRLs and OCSP for what it issued.
    RotateIssuer(RotateIssuerArgs),
}

/// `signetctl ca rotate-issuer`.
#[derive(Args)]
pub struct RotateIssuerArgs {
    /// The new issuer's name (default: the current one's, with the Unix time).
    #[arg(long)]
    pub(crate) new_name: Option<String>,
    /// The new CA key's algorithm (default: the current CA key's).
    #[arg(long)]
    pub(crate) algorithm: Option<KeyAlgorithm>,
    /// The new OCSP responder key's algorithm (default: the current responder key's).
    #[arg(long)]
    pub(crate) responder_algorithm: Option<KeyAlgorithm>,
    /// signd backend for the new keys (default: signd's first; e.g. "nss").
    #[arg(long, default_value = "")]
    pub(crate) backend: String,
    /// The root key in signd (default: the one that signed the current CA certificate).
    #[arg(long)]
    pub(crate) root_key: Option<String>,
    /// The new CA's subject (default: the current one's, the new name added to its first attribute).
    #[arg(long)]
    pub(crate) subject: Option<String>,
    /// The new issuer's CRL URL, `{shard}` for the shard (default: the current
    /// one's, `/crl/<issuer>` in it replaced by `/crl/<new name>`).
    #[arg(long)]
    pub(crate) crl_url: Option<String>,
    /// Validity of the new CA certificate, in days.
    #[arg(long, default_value_t = 3650)]
    pub(crate) days: u32,
    /// Also write the new CA certificate (PEM) here.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Leave acmed issuing from the current issuer (no acmed here, or switch
    /// it later with `signetctl acme use-issuer`).
    #[arg(long)]
    pub(crate) no_acmed: bool,
}

/// `signetctl ca rotate-responder`.
#[derive(Args)]
pub struct RotateResponderArgs {
    /// The new key's algorithm (default: the current responder key's).
    #[arg(long)]
    pub(crate) algorithm: Option<KeyAlgorithm>,
    /// signd backend for the new key (default: signd's first; e.g. "nss").
    #[arg(long, default_value = "")]
    pub(crate) backend: String,
    /// Validity of the new certificate, in days.
    #[arg(long, default_value_t = 365)]
    pub(crate) days: u32,
    /// Also write the new responder certificate (PEM) here.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

/// `signetctl ca init`.
#[derive(Args)]
pub struct InitArgs {
    /// The issuer's name (in signd's and ocspd's config).
    #[arg(long, default_value = "demo")]
    pub(crate) name: String,
    /// Where to write the certificates and config snippets.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The issuing CA's key algorithm (any signd algorithm, incl. ml-dsa-65).
    #[arg(long, default_value = "ecdsa-p256")]
    pub(crate) algorithm: KeyAlgorithm,
    /// The root's key algorithm (default: the issuing CA's).
    #[arg(long)]
    pub(crate) root_algorithm: Option<KeyAlgorithm>,
    /// The OCSP responder's key algorithm (default: the issuing CA's).
    #[arg(long)]
    pub(crate) responder_algorithm: Option<KeyAlgorithm>,
    /// signd backend for the keys (default: signd's first; e.g. "nss").
    #[arg(long, default_value = "")]
    pub(crate) backend: String,
    /// Common-name prefix of the CA subjects.
    #[arg(long, default_value = "Signet Demo")]
    pub(crate) subject: String,
    /// OCSP URL for issued certificates' AIA.
    #[arg(long)]
    pub(crate) ocsp_url: Option<String>,
    /// CRL URL for issued certificates' CRLDP; `{shard}` is the shard number.
    #[arg(long)]
    pub(crate) crl_url: Option<String>,
    /// Number of CRL shards (needs `{shard}` in --crl-url).
    #[arg(long, default_value_t = 0)]
    pub(crate) crl_shards: u32,
    /// Longest end-entity validity, in days.
    #[arg(long, default_value_t = 90)]
    pub(crate) max_days: u64,
    /// The role this ceremony signs in (it must may use the new keys).
    #[arg(long, default_value = "")]
    pub(crate) role: String,
    /// Roles that may issue certificates (signd `roles`).
    #[arg(long = "issuer-role", default_values_t = ["issuer".to_string()])]
    pub(crate) issuer_roles: Vec<String>,
    /// Roles that may sign CRLs and OCSP responses (ocspd's role in signd).
    #[arg(long = "ocsp-role", default_values_t = ["ocspd".to_string()])]
    pub(crate) ocsp_roles: Vec<String>,
    /// Use the CA's keys (NAME-root, NAME-issuing, NAME-ocsp) that signd has
    /// already, generating only the missing ones: for finishing a ceremony that
    /// was interrupted before it wrote signd-issuer.toml. An existing key must
    /// have the algorithm asked for.
    #[arg(long)]
    pub(crate) reuse_keys: bool,
}

/// `signetctl cert ...`
#[derive(Subcommand)]
pub enum CertCommand {
    /// Issue a certificate for a CSR through signd's issuer role and record it in ocspd.
    Issue {
        /// The CSR, PEM or DER; `-` for standard input.
        #[arg(long)]
        csr: PathBuf,
        /// Validity in days (default: the profile's).
        #[arg(long)]
        days: Option<u64>,
        /// An extended key usage (repeatable; default: the profile's default_ekus): server-auth,
        /// client-auth (a TLS client's certificate, e.g. for tokend's tls_client_auth),
        /// code-signing, email-protection, time-stamping; the profile must allow it.
        #[arg(long = "eku", value_parser = parse_eku)]
        ekus: Vec<Eku>,
        /// Write the certificate (PEM) here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Revoke a certificate (serial in hex).
    Revoke {
        /// The serial number, hex (colons allowed).
        serial: String,
        /// unspecified, key-compromise, ca-compromise, affiliation-changed, superseded,
        /// cessation-of-operation, certificate-hold, privilege-withdrawn, aa-compromise.
        /// certificate-hold puts it on hold: `cert release-hold` undoes that, and
        /// revoking it again with another reason makes it permanent.
        #[arg(long, default_value = "unspecified")]
        reason: RevocationReason,
    },
    /// Release a certificate from hold (revoked with reason certificate-hold): it
    /// is good again in OCSP at once, and the CRLs follow (removeFromCRL in delta
    /// CRLs). Refused (failed-precondition, exit code 1) for a certificate that is not on hold.
    ReleaseHold {
        /// The serial number, hex (colons allowed).
        serial: String,
    },
    /// Show a certificate's status as ocspd records it.
    Status {
        /// The serial number, hex (colons allowed).
        serial: String,
    },
}

/// `signetctl crl ...`
#[derive(Subcommand)]
pub enum CrlCommand {
    /// Show the newest CRL (full unless --shard or --delta).
    Show {
        /// One shard of a partitioned CRL.
        #[arg(long, conflicts_with = "delta")]
        shard: Option<u32>,
        /// The delta CRL.
        #[arg(long)]
        delta: bool,
        /// Write the CRL (DER) to this file instead of describing it.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

fn ca_err(e: signet_ca::CaError) -> Failure {
    fail(2, e.to_string())
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// Parses a hex serial; colons and a leading 0x are allowed.
pub fn parse_serial(s: &str) -> Result<Vec<u8>, Failure> {
    let clean: String = s.trim_start_matches("0x").chars().filter(|c| *c != ':').collect();
    let clean = if clean.len() % 2 == 1 { format!("0{clean}") } else { clean };
    let bytes = hex::decode(&clean).map_err(|e| fail(2, format!("serial {s:?} is not hex: {e}")))?;
    if bytes.is_empty() || bytes.len() > 20 {
        return Err(fail(2, format!("serial {s:?} must be 1 to 20 bytes")));
    }
    Ok(bytes)
}

fn ca_request(subject: &str, spki: Vec<u8>, years: u64, path_len: Option<u8>) -> Result<CaRequest, Failure> {
    let subject = Name::from_str(subject).map_err(|e| fail(2, format!("subject {subject:?}: {e}")))?;
    Ok(CaRequest::new(subject, spki, Duration::from_secs(years * 365 * 86_400), path_len))
}

/// Signs `tbs` with `key` through the raw Signer (the ceremony) and assembles the certificate.
fn ceremony_sign(
    client: &SigndClient,
    role: &str,
    key: &str,
    alg: KeyAlgorithm,
    tbs: &[u8],
) -> Result<Vec<u8>, Failure> {
    let scheme = alg.default_scheme();
    let sig = block_on(client.sign(role, key, scheme, tbs.to_vec()))?;
    assemble_certificate(tbs, scheme, &sig).map_err(ca_err)
}

/// A key signd has, or `None` when it has no key by that id.
pub(crate) fn existing_key(client: &SigndClient, id: &str) -> Result<Option<KeyInfo>, Failure> {
    match block_on(client.admin_key(id)) {
        Ok(k) => Ok(Some(k)),
        Err(e) if e.kind == ErrorKind::UnknownKey => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes).map_err(|e| fail(1, format!("{}: {e}", path.display())))
}

/// Writes a file of `ca init` through a temporary file and a rename, so an
/// interrupted ceremony leaves each file whole or absent.
pub(crate) fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    write_file(&tmp, bytes)?;
    std::fs::rename(&tmp, path).map_err(|e| fail(1, format!("{}: {e}", path.display())))
}

pub(crate) fn cert_pem(der: &[u8]) -> String {
    pem("CERTIFICATE", der)
}

/// What `ca init` made: the keys in signd and the files, by name.
pub(crate) struct CaFiles {
    /// The keys' ids: root, issuing, OCSP responder.
    pub keys: [String; 3],
    /// The directory the files are in (absolute).
    pub dir: PathBuf,
}

impl CaFiles {
    /// A file of the CA's (root.pem, issuing.pem, chain.pem, responder.pem,
    /// profile.toml, signd-issuer.toml).
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// `ca init`.
pub fn init(client: &SigndClient, a: &InitArgs, out: &Printer) -> Result<(), Failure> {
    let ca = ceremony(client, a)?;
    let path = |f: &str| ca.path(f);
    if out.json {
        out.json(&json!({
            "name": a.name,
            "keys": ca.keys,
            "root": path("root.pem"),
            "issuing": path("issuing.pem"),
            "chain": path("chain.pem"),
            "responder": path("responder.pem"),
            "profile": path("profile.toml"),
            "signd_config": path("signd-issuer.toml"),
        }));
    } else {
        outln!("CA `{}` created; keys {} in signd.", a.name, ca.keys.join(", "));
        outln!("certificates in {}: root.pem issuing.pem chain.pem responder.pem", ca.dir.display());
        outln!("add {} to signd's config and restart signd.", path("signd-issuer.toml").display());
    }
    Ok(())
}

/// The CA ceremony of `ca init` (and `setup`): the keys in signd, the
/// certificates, the profile and, last, the `[issuers.NAME]` snippet.
pub(crate) fn ceremony(client: &SigndClient, a: &InitArgs) -> Result<CaFiles, Failure> {
    if a.crl_shards > 0 && !a.crl_url.as_deref().is_some_and(|u| u.contains("{shard}")) {
        return Err(fail(2, "--crl-shards needs a --crl-url containing {shard}"));
    }
    std::fs::create_dir_all(&a.dir).map_err(|e| fail(1, format!("{}: {e}", a.dir.display())))?;
    let root_alg = a.root_algorithm.unwrap_or(a.algorithm);
    let responder_alg = a.responder_algorithm.unwrap_or(a.algorithm);
    let ids = [format!("{}-root", a.name), format!("{}-issuing", a.name), format!("{}-ocsp", a.name)];
    let mut spkis = Vec::new();
    for (id, alg) in ids.iter().zip([root_alg, a.algorithm, responder_alg]) {
        let existing = if a.reuse_keys { existing_key(client, id)? } else { None };
        let key = match existing {
            Some(k) if k.algorithm == alg => k,
            Some(k) => {
                return Err(fail(2, format!("key `{id}` exists with algorithm {}, not {alg}", k.algorithm.name())));
            }
            None => {
                let spec = KeySpec { id: id.clone(), algorithm: alg, roles: vec![], backend: a.backend.clone() };
                block_on(client.generate_key(spec))?
            }
        };
        spkis.push(key.spki);
    }
    let mut rng = OsRng;
    let now = now();

    let root_req = ca_request(&format!("CN={} Root CA", a.subject), spkis[0].clone(), 20, None)?;
    let root_tbs = build_root_tbs(&root_req, SignatureScheme::Default, now, &mut rng).map_err(ca_err)?;
    let root = ceremony_sign(client, &a.role, &ids[0], root_alg, &root_tbs)?;
    let root_issuer = Issuer::from_certificate_der(&root, SignatureScheme::Default).map_err(ca_err)?;

    let issuing_req = ca_request(&format!("CN={} Issuing CA", a.subject), spkis[1].clone(), 10, Some(0))?;
    let issuing_tbs = build_intermediate_tbs(&issuing_req, &root_issuer, now, &mut rng).map_err(ca_err)?;
    let issuing = ceremony_sign(client, &a.role, &ids[0], root_alg, &issuing_tbs)?;
    let issuing_issuer = Issuer::from_certificate_der(&issuing, SignatureScheme::Default).map_err(ca_err)?;

    let responder_req = ResponderRequest {
        subject: Name::from_str(&format!("CN={} OCSP Responder", a.subject)).map_err(|e| fail(2, e.to_string()))?,
        spki_der: spkis[2].clone(),
        validity: Duration::from_secs(365 * 86_400),
        backdate: Duration::from_secs(3600),
    };
    let responder_tbs = build_ocsp_responder_tbs(&responder_req, &issuing_issuer, now, &mut rng).map_err(ca_err)?;
    let responder = ceremony_sign(client, &a.role, &ids[1], a.algorithm, &responder_tbs)?;

    let profile = Profile {
        name: "tls-server".into(),
        max_validity_seconds: a.max_days * 86_400,
        default_validity_seconds: None,
        backdate_seconds: 3600,
        key_usage: vec![KeyUsageBit::DigitalSignature, KeyUsageBit::KeyEncipherment],
        allowed_ekus: vec![Eku::ServerAuth, Eku::ClientAuth],
        default_ekus: vec![Eku::ServerAuth],
        allow_dns_sans: true,
        allow_ip_sans: true,
        allow_email_sans: false,
        ocsp_urls: a.ocsp_url.iter().cloned().collect(),
        ca_issuers_url: None,
        crl_url: a.crl_url.clone(),
        crl_shards: a.crl_shards,
        must_staple: false,
        allowed_key_algorithms: KeyAlgorithm::ALL.to_vec(),
    };
    profile.check().map_err(ca_err)?;

    let dir = std::fs::canonicalize(&a.dir).map_err(|e| fail(1, format!("{}: {e}", a.dir.display())))?;
    let path = |f: &str| dir.join(f);
    write_file_atomic(&path("root.pem"), cert_pem(&root).as_bytes())?;
    write_file_atomic(&path("issuing.pem"), cert_pem(&issuing).as_bytes())?;
    write_file_atomic(&path("chain.pem"), format!("{}{}", cert_pem(&issuing), cert_pem(&root)).as_bytes())?;
    write_file_atomic(&path("responder.pem"), cert_pem(&responder).as_bytes())?;
    let profile_toml = toml::to_string(&profile).map_err(|e| fail(1, e.to_string()))?;
    write_file_atomic(&path("profile.toml"), profile_toml.as_bytes())?;
    let quote = |v: &[String]| v.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(", ");
    let snippet = format!(
        "[issuers.{name}]\nkey = {issuing_key:?}\ncertificate = {cert:?}\nprofile_file = {profile:?}\nroles = [{roles}]\ncrl_roles = [{ocsp}]\n\n[issuers.{name}.ocsp]\nkey = {ocsp_key:?}\ncertificate = {resp:?}\nroles = [{ocsp}]\n",
        name = a.name,
        issuing_key = ids[1],
        cert = path("issuing.pem").display().to_string(),
        profile = path("profile.toml").display().to_string(),
        roles = quote(&a.issuer_roles),
        ocsp = quote(&a.ocsp_roles),
        ocsp_key = ids[2],
        resp = path("responder.pem").display().to_string(),
    );
    // Last: its presence says the ceremony is complete.
    write_file_atomic(&path("signd-issuer.toml"), snippet.as_bytes())?;
    Ok(CaFiles { keys: ids, dir })
}

/// `ca rotate-responder`: the key in signd, its certificate from signd's
/// `issueOcspResponder`, then ocspd's `refreshResponder`.
pub fn rotate_responder(
    signd: &SigndClient,
    ocspd: &OcspdClient,
    issuer: &str,
    a: &RotateResponderArgs,
    out: &Printer,
) -> Result<(), Failure> {
    // ocspd first: it must serve the CA and admit us before anything is made.
    let before = block_on(ocspd.issuer_info(issuer))?;
    let name = before.name.clone();
    let algorithm = match a.algorithm {
        Some(alg) => alg,
        None => {
            let old = Certificate::from_der(&before.responder_certificate)
                .map_err(|e| fail(1, format!("ocspd's responder certificate: {e}")))?;
            let spki = signet_ca::der::Encode::to_der(&old.tbs_certificate.subject_public_key_info)
                .map_err(|e| fail(1, format!("ocspd's responder certificate: {e}")))?;
            let keys = block_on(signd.admin_list_keys())?;
            keys.iter().find(|k| k.spki == spki).map(|k| k.algorithm).ok_or_else(|| {
                fail(2, format!("signd has no key for issuer `{name}`'s current responder; give --algorithm"))
            })?
        }
    };
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let spec = KeySpec { id: format!("{name}-ocsp-{now}"), algorithm, roles: vec![], backend: a.backend.clone() };
    let key = block_on(signd.generate_key(spec))?;
    let der = block_on(signd.issue_ocsp_responder(&name, &key.id, a.days)).map_err(|e| {
        let mut f = Failure::from(e);
        f.message =
            format!("key {} was generated in signd, but no responder certificate was issued: {}", key.id, f.message);
        f
    })?;
    if let Some(path) = &a.out {
        write_file_atomic(path, cert_pem(&der).as_bytes())?;
    }
    let after = block_on(ocspd.refresh_responder(&name)).map_err(|e| {
        let mut f = Failure::from(e);
        f.message = format!(
            "signd signs with the new responder {}, but ocspd did not switch ({}); it keeps the previous one, \
             which signd still accepts, until it restarts",
            key.id, f.message
        );
        f
    })?;
    let switched = after.responder_certificate == der;
    let cert = Certificate::from_der(&der).map_err(|e| fail(1, format!("signd returned a bad certificate: {e}")))?;
    let serial = hex::encode(cert.tbs_certificate.serial_number.as_bytes());
    let not_after = unix(&cert.tbs_certificate.validity.not_after);
    if out.json {
        out.json(&json!({
            "issuer": name,
            "key_id": key.id,
            "algorithm": key.algorithm.name(),
            "serial": serial,
            "not_after": not_after,
            "certificate": cert_pem(&der),
            "ocspd_switched": switched,
        }));
    } else {
        outln!("issuer `{name}`: new OCSP responder key {} ({}) in signd", key.id, key.algorithm);
        outln!("certificate serial {serial}, valid until {}", rfc3339_secs(not_after));
        if switched {
            outln!("ocspd signs with it now; stored responses are being re-signed");
        }
    }
    if !switched {
        return Err(fail(1, format!("ocspd still names another responder for issuer `{name}`")));
    }
    Ok(())
}

/// `ca rotate-issuer`: the keys in signd, the new CA from signd's
/// `issueIssuingCa`, then ocspd's `addSuccessor`, then acmed's `useIssuer`.
pub fn rotate_issuer(
    signd: &SigndClient,
    ocspd: &OcspdClient,
    acmed: &signet_ipc::AcmedClient,
    issuer: &str,
    a: &RotateIssuerArgs,
    out: &Printer,
) -> Result<(), Failure> {
    // ocspd first: it must serve the CA and admit us before anything is made.
    let before = block_on(ocspd.issuer_info(issuer))?;
    let name = before.name.clone();
    let keys = block_on(signd.admin_list_keys())?;
    let spki_of = |der: &[u8], what: &str| -> Result<Vec<u8>, Failure> {
        let cert = Certificate::from_der(der).map_err(|e| fail(1, format!("ocspd's {what} certificate: {e}")))?;
        signet_ca::der::Encode::to_der(&cert.tbs_certificate.subject_public_key_info)
            .map_err(|e| fail(1, format!("ocspd's {what} certificate: {e}")))
    };
    let ca_spki = spki_of(&before.ca_certificate, "CA")?;
    let responder_spki = spki_of(&before.responder_certificate, "responder")?;
    let current = keys.iter().find(|k| k.spki == ca_spki);
    let algorithm = match (a.algorithm, current) {
        (Some(alg), _) => alg,
        (None, Some(k)) => k.algorithm,
        (None, None) => return Err(fail(2, format!("signd has no key for issuer `{name}`'s CA; give --algorithm"))),
    };
    let responder_algorithm = a
        .responder_algorithm
        .or_else(|| keys.iter().find(|k| k.spki == responder_spki).map(|k| k.algorithm))
        .unwrap_or(algorithm);
    let root_key = match &a.root_key {
        Some(k) => k.clone(),
        None => signer_of(&before.ca_certificate, &keys)?.ok_or_else(|| {
            fail(2, format!("signd has no key that signed issuer `{name}`'s CA certificate; give --root-key"))
        })?,
    };
    let secs = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let new_name = a.new_name.clone().unwrap_or_else(|| format!("{}-{secs}", without_time_suffix(&name)));
    let subject = match &a.subject {
        Some(s) => s.clone(),
        None => {
            let cert = Certificate::from_der(&before.ca_certificate)
                .map_err(|e| fail(1, format!("ocspd's CA certificate: {e}")))?;
            with_name_added(&cert.tbs_certificate.subject.to_string(), &new_name)
        }
    };
    // A rerun with the same --new-name (after a failure past this point) takes the keys it made.
    let mut made = Vec::new();
    for (id, alg) in [(format!("{new_name}-issuing"), algorithm), (format!("{new_name}-ocsp"), responder_algorithm)] {
        let key = match existing_key(signd, &id)? {
            Some(k) if k.algorithm == alg => k,
            Some(k) => {
                return Err(fail(2, format!("key `{id}` exists with algorithm {}, not {alg}", k.algorithm.name())))
            }
            None => {
                block_on(signd.generate_key(KeySpec { id, algorithm: alg, roles: vec![], backend: a.backend.clone() }))?
            }
        };
        made.push(key);
    }
    let spec = signet_ipc::IssuingCaSpec {
        issuer: name.clone(),
        new_name: new_name.clone(),
        key_id: made[0].id.clone(),
        root_key_id: root_key.clone(),
        responder_key_id: made[1].id.clone(),
        subject,
        validity_days: a.days,
        crl_url: a.crl_url.clone().unwrap_or_default(),
    };
    let der = block_on(signd.issue_issuing_ca(spec)).map_err(|e| {
        let mut f = Failure::from(e);
        f.message = format!(
            "keys {} and {} were generated in signd, but no CA certificate was issued: {}",
            made[0].id, made[1].id, f.message
        );
        f
    })?;
    if let Some(path) = &a.out {
        write_file_atomic(path, cert_pem(&der).as_bytes())?;
    }
    let served = block_on(ocspd.add_successor(&name, &new_name)).map_err(|e| {
        let mut f = Failure::from(e);
        f.message = format!(
            "signd serves the new issuer `{new_name}`, but ocspd does not ({}); running this again with \
             --new-name {new_name} finishes it",
            f.message
        );
        f
    })?;
    let acmed_issuer = if a.no_acmed {
        None
    } else {
        Some(block_on(acmed.use_issuer(&new_name)).map_err(|e| {
            let mut f = Failure::from(e);
            f.message = format!(
                "signd and ocspd serve the new issuer `{new_name}`, but acmed still issues from `{name}` ({}); \
                 `signetctl acme use-issuer {new_name}` switches it",
                f.message
            );
            f
        })?)
    };
    let cert = Certificate::from_der(&der).map_err(|e| fail(1, format!("signd returned a bad certificate: {e}")))?;
    let serial = hex::encode(cert.tbs_certificate.serial_number.as_bytes());
    let not_after = unix(&cert.tbs_certificate.validity.not_after);
    if out.json {
        out.json(&json!({
            "issuer": name,
            "new_issuer": new_name,
            "key_id": made[0].id,
            "algorithm": made[0].algorithm.name(),
            "responder_key_id": made[1].id,
            "root_key_id": root_key,
            "subject": cert.tbs_certificate.subject.to_string(),
            "serial": serial,
            "not_after": not_after,
            "certificate": cert_pem(&der),
            "ocspd_crl_url": served.crl_url,
            "acmed_issuer": acmed_issuer,
        }));
    } else {
        outln!(
            "issuer `{new_name}` beside `{name}`: CA key {} ({}), responder key {} in signd",
            made[0].id,
            made[0].algorithm,
            made[1].id
        );
        outln!("CA certificate serial {serial} signed by {root_key}, valid until {}", rfc3339_secs(not_after));
        outln!("ocspd serves it (CRL {}); `{name}` keeps answering for what it issued", served.crl_url);
        match &acmed_issuer {
            Some(i) => outln!("acmed issues from `{i}`"),
            None => outln!("acmed not switched (--no-acmed)"),
        }
    }
    Ok(())
}

/// The key of `keys` whose public key verifies `cert_der`'s signature.
fn signer_of(cert_der: &[u8], keys: &[KeyInfo]) -> Result<Option<String>, Failure> {
    let cert = openssl::x509::X509::from_der(cert_der).map_err(|e| fail(1, format!("CA certificate: {e}")))?;
    Ok(keys
        .iter()
        .find(|k| openssl::pkey::PKey::public_key_from_der(&k.spki).is_ok_and(|p| cert.verify(&p).unwrap_or(false)))
        .map(|k| k.id.clone()))
}

/// An issuer name without the `-<unix time>` an earlier rotation gave it.
fn without_time_suffix(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((base, t)) if t.len() >= 9 && t.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// `subject` (RFC 4514) with ` <name>` added to its first attribute's value
/// (replacing what an earlier rotation added).
fn with_name_added(subject: &str, name: &str) -> String {
    let end = subject.find(',').unwrap_or(subject.len());
    let (first, rest) = subject.split_at(end);
    let first = match first.rsplit_once(' ') {
        Some((head, tail)) if tail != without_time_suffix(tail) => head,
        _ => first,
    };
    format!("{first} {name}{rest}")
}

fn unix(t: &signet_ca::x509_cert::time::Time) -> i64 {
    t.to_unix_duration().as_secs() as i64
}

/// `cert ...`
pub fn cert(
    signd: &SigndClient,
    ocspd: &OcspdClient,
    issuer: &str,
    cmd: &CertCommand,
    out: &Printer,
) -> Result<(), Failure> {
    match cmd {
        CertCommand::Issue { csr, days, ekus, out: path } => {
            let input = crate::read_input(csr)?;
            let csr = parse_csr(&input).map_err(ca_err)?;
            let leaf = Leaf {
                subject: csr.subject,
                spki_der: csr.spki_der,
                sans: csr.sans,
                days: *days,
                ekus: (!ekus.is_empty()).then(|| ekus.clone()),
            };
            let Issued { der, serial, shard } = issue(signd, ocspd, issuer, leaf)?;
            let text = cert_pem(&der);
            match path {
                Some(p) => write_file(p, text.as_bytes())?,
                None if !out.json => out!("{text}"),
                None => {}
            }
            if out.json {
                out.json(&json!({"serial": hex::encode(&serial), "certificate": text, "crl_shard": shard}));
            } else {
                let _ = writeln!(std::io::stderr(), "issued serial {}", hex::encode(&serial));
            }
        }
        CertCommand::Revoke { serial, reason } => {
            let serial = parse_serial(serial)?;
            let rev = Revocation { serial, reason: *reason, revoked_unix_secs: 0 };
            status_out(&block_on(ocspd.revoke(issuer, rev))?, out);
        }
        CertCommand::ReleaseHold { serial } => {
            let serial = parse_serial(serial)?;
            status_out(&block_on(ocspd.release_hold(issuer, serial))?, out);
        }
        CertCommand::Status { serial } => {
            let s = block_on(ocspd.status(issuer, parse_serial(serial)?))?;
            status_out(&s, out);
            if s.state == CertState::Unknown {
                return Err(fail(4, format!("serial {} is unknown to ocspd", hex::encode(&s.serial))));
            }
        }
    }
    Ok(())
}

/// A certificate to issue: the subject, its key and names.
pub(crate) struct Leaf {
    pub subject: Name,
    pub spki_der: Vec<u8>,
    pub sans: Vec<SanEntry>,
    /// Validity in days (default: the profile's).
    pub days: Option<u64>,
    /// EKUs (default: the profile's).
    pub ekus: Option<Vec<Eku>>,
}

/// A certificate issued and recorded in ocspd.
pub(crate) struct Issued {
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// Its serial number.
    pub serial: Vec<u8>,
    /// Its CRL shard, when the profile shards CRLs.
    pub shard: Option<u32>,
}

/// Issues `leaf` under `issuer`'s profile through signd, and records it in
/// ocspd before anyone sees it.
pub(crate) fn issue(signd: &SigndClient, ocspd: &OcspdClient, issuer: &str, leaf: Leaf) -> Result<Issued, Failure> {
    let profile_toml = block_on(signd.issuer_profile(issuer))?;
    let profile: Profile = toml::from_str(&profile_toml).map_err(|e| fail(1, format!("profile from signd: {e}")))?;
    let ca_der = block_on(signd.issuer_certificate(issuer))?;
    let ca = Issuer::from_certificate_der(&ca_der, SignatureScheme::Default).map_err(ca_err)?;
    let shard = (profile.crl_shards > 0).then(|| OsRng.next_u32() % profile.crl_shards);
    let req = LeafRequest {
        subject: leaf.subject,
        spki_der: leaf.spki_der,
        sans: leaf.sans,
        validity: leaf.days.map(|d| Duration::from_secs(d * 86_400)),
        exact_validity: None,
        ekus: leaf.ekus,
        crl_shard: shard,
    };
    let tbs = build_leaf_tbs(&profile, &ca, &req, now(), &mut OsRng).map_err(ca_err)?;
    let der = block_on(signd.sign_certificate(issuer, tbs))?;
    let cert = Certificate::from_der(&der).map_err(|e| fail(1, format!("signd returned a bad certificate: {e}")))?;
    let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
    let record = IssuedCert {
        serial: serial.clone(),
        not_after_unix_secs: unix(&cert.tbs_certificate.validity.not_after),
        crl_shard: shard.unwrap_or(0),
    };
    // Only a certificate ocspd knows about is handed out.
    block_on(ocspd.record_issued(issuer, record)).map_err(|e| {
        fail(
            1,
            format!(
                "certificate {} was signed but ocspd could not record it, so it is withheld: {e}",
                hex::encode(&serial)
            ),
        )
    })?;
    Ok(Issued { der, serial, shard })
}

fn status_out(s: &CertStatus, out: &Printer) {
    let released = (s.state == CertState::Good && s.released_unix_secs != 0).then_some(s.released_unix_secs);
    if out.json {
        out.json(&json!({
            "serial": hex::encode(&s.serial),
            "state": s.state.name(),
            "on_hold": s.on_hold(),
            "not_after": s.not_after_unix_secs,
            "crl_shard": s.crl_shard,
            "recorded": s.recorded_unix_secs,
            "revoked": (s.state == CertState::Revoked).then_some(s.revoked_unix_secs),
            "reason": s.reason.map(|r| r.name()),
            "released": released,
        }));
        return;
    }
    outln!("serial:    {}", hex::encode(&s.serial));
    let state = if s.on_hold() { "revoked (on hold: `cert release-hold` makes it good again)" } else { s.state.name() };
    outln!("state:     {state}");
    if s.state != CertState::Unknown {
        outln!("not after: {}", rfc3339_secs(s.not_after_unix_secs));
        outln!("shard:     {}", s.crl_shard);
    }
    if s.state == CertState::Revoked {
        outln!("revoked:   {}", rfc3339_secs(s.revoked_unix_secs));
        outln!("reason:    {}", s.reason.map_or("unspecified", |r| r.name()));
    }
    if let Some(t) = released {
        outln!("released:  {} (from hold)", rfc3339_secs(t));
    }
}

/// `crl show`.
pub fn crl(ocspd: &OcspdClient, issuer: &str, cmd: &CrlCommand, out: &Printer) -> Result<(), Failure> {
    let CrlCommand::Show { shard, delta, out: path } = cmd;
    let which = match (shard, delta) {
        (Some(n), _) => CrlSelector::Shard(*n),
        (None, true) => CrlSelector::Delta,
        (None, false) => CrlSelector::Full,
    };
    let der = block_on(ocspd.crl(issuer, which))?;
    if let Some(p) = path {
        return write_file(p, &der);
    }
    let crl = CertificateList::from_der(&der).map_err(|e| fail(1, format!("ocspd returned a bad CRL: {e}")))?;
    let tbs = &crl.tbs_cert_list;
    let mut number = None;
    let mut base = None;
    for e in tbs.crl_extensions.iter().flatten() {
        let value =
            || signet_ca::der::asn1::Uint::from_der(e.extn_value.as_bytes()).ok().map(|u| hex::encode(u.as_bytes()));
        match e.extn_id.to_string().as_str() {
            "2.5.29.20" => number = value(),
            "2.5.29.27" => base = value(),
            _ => {}
        }
    }
    let entries: Vec<(String, String, Option<&'static str>)> = tbs
        .revoked_certificates
        .iter()
        .flatten()
        .map(|r| {
            (hex::encode(r.serial_number.as_bytes()), r.revocation_date.to_date_time().to_string(), entry_reason(r))
        })
        .collect();
    if out.json {
        out.json(&json!({
            "crl_number": number,
            "delta_base": base,
            "this_update": tbs.this_update.to_date_time().to_string(),
            "next_update": tbs.next_update.map(|t| t.to_date_time().to_string()),
            "revoked": entries.iter().map(|(s, t, r)| json!({"serial": s, "time": t, "reason": r})).collect::<Vec<_>>(),
            "der_bytes": der.len(),
        }));
        return Ok(());
    }
    outln!("CRL number:  {}", number.as_deref().unwrap_or("(none)"));
    if let Some(b) = base {
        outln!("delta base:  {b}");
    }
    outln!("this update: {}", tbs.this_update.to_date_time());
    if let Some(n) = tbs.next_update {
        outln!("next update: {}", n.to_date_time());
    }
    outln!("revoked:     {}", entries.len());
    for (s, t, r) in &entries {
        match r {
            Some(r) => outln!("  {s}  {t}  {r}"),
            None => outln!("  {s}  {t}"),
        }
    }
    Ok(())
}

/// The reasonCode of a CRL entry, by signetctl's names (remove-from-crl in delta CRLs).
fn entry_reason(entry: &signet_ca::x509_cert::crl::RevokedCert) -> Option<&'static str> {
    let ext = entry.crl_entry_extensions.iter().flatten().find(|e| e.extn_id.to_string() == "2.5.29.21")?;
    let reason = signet_ca::CrlReason::from_der(ext.extn_value.as_bytes()).ok()?;
    RevocationReason::from_code(reason as u8).map(|r| r.name())
}

/// An `--eku` value: the profile's names for extended key usages (`client-auth`, ...).
fn parse_eku(name: &str) -> Result<Eku, String> {
    use serde::Deserialize as _;
    let de = serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name);
    Eku::deserialize(de).map_err(|_| {
        format!("{name:?} is not one of server-auth, client-auth, code-signing, email-protection, time-stamping")
    })
}
