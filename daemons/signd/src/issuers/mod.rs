//! CA issuer roles: named CAs whose keys sign only what the CA core
//! (`signet-ca`) accepts as theirs.
//!
//! ```toml
//! [issuers.demo]
//! key = "ca-issuing"                    # signd key id of the CA key
//! certificate = "/etc/signet/ca.pem"    # the CA's own certificate, PEM or DER
//! roles = ["issuer"]                    # may obtain the Issuer capability
//! crl_roles = ["crl"]                   # may obtain the CrlSigner capability
//! profile_file = "/etc/signet/tls.toml" # or an inline `profile = { ... }`
//! [issuers.demo.ocsp]
//! key = "ocsp-responder"
//! certificate = "/etc/signet/responder.pem"
//! roles = ["ocsp"]
//! ```
//!
//! **Raw signing and issuer roles.** A front end holding a role that may use a
//! CA key through the plain `Signer` could sign any TBS with it and so bypass
//! the validation here. Therefore every key named by an issuer (its CA key and
//! its OCSP responder key) is refused to `Signer.sign`/`signBatch` unless the
//! caller's role is listed in that issuer's `raw_signing_roles` (an offline
//! ceremony role, say). Listing and reading the public key stay allowed.
//!
//! Issuers are checked with the rest of the config ([`check`], for
//! `--check-config` and at start: role names, the profile, the certificates,
//! the responder certificate issued and signed by the CA), then loaded at
//! startup against the key ring: each certificate's public key must be its
//! key's. SIGHUP reloads roles, not issuers: which roles an issuer admits is
//! re-read only on restart, but whether a caller holds those roles follows the
//! reloaded policy.
//!
//! **Responder rotation.** `Admin.issueOcspResponder` ([`rotate`]) gives an
//! issuer a new delegated OCSP responder without a restart: its certificate
//! is kept in signd's store (table `ocsp_responders`) and, at every start,
//! put ahead of the configured one ([`Issuers::apply_installed`]). Every
//! responder an issuer has had stays accepted: a ResponseData is signed with
//! the key of the responder it names.
//!
//! **Issuing CA rotation.** `Admin.issueIssuingCa` ([`rollover`]) adds an
//! issuer beside a configured one: a new CA key's intermediate certificate,
//! signed by the root key in signd, with its own OCSP responder, the old
//! issuer's profile and roles, kept in signd's store (table `issuing_cas`)
//! and added to the configured issuers at every start
//! ([`Issuers::apply_installed_cas`]). The old issuer stays.

mod caps;
pub mod rollover;
pub mod rotate;

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use openssl::x509::{X509VerifyResult, X509};
use signet_ca::{Issuer, IssuerPolicy, OcspIssuer, Profile, Responder};
use signet_ipc::{IpcError, SignatureScheme};

pub use crate::config::{IssuerConfig, OcspConfig};
use crate::keys::KeyRing;
use crate::policy::valid_role_name;

pub(crate) use caps::{crl_signer, issuer, ocsp_signer};

/// The configured CAs, checked against the key ring.
#[derive(Clone, Debug, Default)]
pub struct Issuers {
    by_name: BTreeMap<String, std::sync::Arc<CaIssuer>>,
}

/// One loaded CA.
#[derive(Debug)]
pub struct CaIssuer {
    /// The issuer's name in config.
    pub name: String,
    /// The CA key's id.
    pub key_id: String,
    /// The CA certificate, DER.
    pub certificate: Vec<u8>,
    /// What certificates may contain (includes the CA's name, key id and scheme).
    pub policy: IssuerPolicy,
    /// The end-entity profile `policy` was made from.
    pub profile: Profile,
    /// Roles that may obtain the Issuer.
    pub roles: Vec<String>,
    /// Roles that may obtain the CrlSigner.
    pub crl_roles: Vec<String>,
    /// Roles that may sign raw with this issuer's keys.
    pub raw_signing_roles: Vec<String>,
    /// The OCSP responder, if configured.
    pub ocsp: Option<OcspResponder>,
}

/// A CA's loaded OCSP responder: its current key and certificate, and the
/// ones before it (still accepted, see [`OcspResponder::for_response_data`]).
#[derive(Debug)]
pub struct OcspResponder {
    /// Newest first: the first is the one `responderCertificate` names.
    keys: std::sync::RwLock<Vec<Arc<ResponderKey>>>,
    /// The CA's CertID hashes: every response it signs is about the CA's certificates.
    pub ca_hashes: OcspIssuer,
    /// Roles that may obtain the OcspSigner.
    pub roles: Vec<String>,
}

/// One responder key and its certificate.
#[derive(Debug)]
pub struct ResponderKey {
    /// The responder key's id.
    pub key_id: String,
    /// The responder certificate, DER.
    pub certificate: Vec<u8>,
    /// Its name, key hash and scheme.
    pub responder: Responder,
}

impl OcspResponder {
    /// The responder in use: the newest.
    pub fn current(&self) -> Arc<ResponderKey> {
        self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner)[0].clone()
    }

    /// Every responder, newest first.
    pub fn all(&self) -> Vec<Arc<ResponderKey>> {
        self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Makes `key` the responder in use; the others stay accepted.
    pub fn install(&self, key: ResponderKey) {
        self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(0, Arc::new(key));
    }

    /// The responder a DER ResponseData names (its ResponderID): the newest
    /// that fits, or the current one when none does (its validation then
    /// gives the refusal).
    pub fn for_response_data(&self, data: &[u8]) -> Arc<ResponderKey> {
        let keys = self.all();
        keys.iter()
            .find(|k| {
                !matches!(
                    signet_ca::validate_ocsp_response_data(data, &k.responder, &self.ca_hashes),
                    Err(signet_ca::CaError::ResponderIdMismatch)
                )
            })
            .unwrap_or(&keys[0])
            .clone()
    }
}

impl CaIssuer {
    /// The CA's `Issuer` (name, key id, scheme).
    pub fn issuer(&self) -> &Issuer {
        &self.policy.issuer
    }

    /// The CA key and every responder key.
    pub(crate) fn key_ids(&self) -> Vec<String> {
        let responders = self.ocsp.iter().flat_map(|o| o.all()).map(|k| k.key_id.clone());
        std::iter::once(self.key_id.clone()).chain(responders).collect()
    }
}

impl Issuers {
    /// Loads and checks every issuer. Any problem is an error naming the issuer:
    /// signd refuses to start rather than serve a CA it cannot vouch for.
    pub fn load(config: &BTreeMap<String, IssuerConfig>, keys: &KeyRing) -> Result<Self, String> {
        let mut by_name = BTreeMap::new();
        for (name, cfg) in config {
            let loaded = load_one(name, cfg, keys).map_err(|e| format!("issuer `{name}`: {e}"))?;
            by_name.insert(name.clone(), std::sync::Arc::new(loaded));
        }
        Ok(Self { by_name })
    }

    /// An issuer by name.
    pub fn get(&self, name: &str) -> Option<&std::sync::Arc<CaIssuer>> {
        self.by_name.get(name)
    }

    /// Every issuer, by name.
    pub fn iter(&self) -> impl Iterator<Item = &std::sync::Arc<CaIssuer>> {
        self.by_name.values()
    }

    /// Refuses raw `Signer` signing with a key an issuer owns, unless that
    /// issuer lists `role` in `raw_signing_roles`.
    pub fn check_raw_signing(&self, key_id: &str, role: &str) -> Result<(), IpcError> {
        match self
            .iter()
            .find(|i| i.key_ids().iter().any(|k| k == key_id) && !i.raw_signing_roles.iter().any(|r| r == role))
        {
            None => Ok(()),
            Some(i) => Err(IpcError::denied(format!(
                "key `{key_id}` belongs to issuer `{}`: raw signing with it is refused for role `{role}` \
                 (use the issuer capabilities, or list the role in the issuer's raw_signing_roles)",
                i.name
            ))),
        }
    }
}

/// Checks every issuer as far as the files go, without the key ring: role names, the profile,
/// the certificates (readable, parseable, the responder's issued by the CA). Any problem is an
/// error naming the issuer, the same [`Issuers::load`] would give.
pub fn check(config: &BTreeMap<String, IssuerConfig>) -> Result<(), String> {
    for (name, cfg) in config {
        Files::read(cfg).map_err(|e| format!("issuer `{name}`: {e}"))?;
    }
    Ok(())
}

/// What an issuer's config names on disk, read and checked.
struct Files {
    profile: Profile,
    ca_x509: X509,
    /// The CA certificate, DER.
    certificate: Vec<u8>,
    /// The responder certificate, parsed and DER.
    ocsp: Option<(X509, Vec<u8>)>,
}

impl Files {
    fn read(cfg: &IssuerConfig) -> Result<Files, String> {
        for role in cfg
            .roles
            .iter()
            .chain(&cfg.crl_roles)
            .chain(&cfg.raw_signing_roles)
            .chain(cfg.ocsp.iter().flat_map(|o| &o.roles))
        {
            if !valid_role_name(role) {
                return Err(format!("invalid role name `{role}` (roles are [a-z0-9-]{{1,32}})"));
            }
        }
        let profile = match (&cfg.profile, &cfg.profile_file) {
            (Some(p), None) => p.clone(),
            (None, Some(path)) => signet_runtime::config::load::<Profile>(path).map_err(|e| format!("profile: {e}"))?,
            _ => return Err("give exactly one of `profile` and `profile_file`".into()),
        };
        profile.check().map_err(|e| e.to_string())?;
        let (ca_x509, certificate) = read_certificate(&cfg.certificate)?;
        let ocsp = match &cfg.ocsp {
            None => None,
            Some(o) => {
                let (x509, der) = read_certificate(&o.certificate)?;
                let ca_key = ca_x509.public_key().map_err(|e| format!("CA certificate public key: {e}"))?;
                if ca_x509.issued(&x509) != X509VerifyResult::OK || !x509.verify(&ca_key).unwrap_or(false) {
                    return Err(format!(
                        "OCSP responder certificate {} is not issued by the CA",
                        o.certificate.display()
                    ));
                }
                Some((x509, der))
            }
        };
        Ok(Files { profile, ca_x509, certificate, ocsp })
    }
}

fn load_one(name: &str, cfg: &IssuerConfig, keys: &KeyRing) -> Result<CaIssuer, String> {
    let Files { profile, ca_x509, certificate, ocsp } = Files::read(cfg)?;
    let scheme = check_key(&cfg.key, cfg.scheme.as_deref(), &ca_x509, keys, "CA certificate")?;
    let issuer = Issuer::from_certificate_der(&certificate, scheme).map_err(|e| format!("CA certificate: {e}"))?;
    let ocsp = match cfg.ocsp.as_ref().zip(ocsp) {
        Some((o, (x509, der))) => {
            let scheme = check_key(&o.key, o.scheme.as_deref(), &x509, keys, "OCSP responder certificate")?;
            let key = ResponderKey {
                key_id: o.key.clone(),
                responder: Responder::from_certificate_der(&der, scheme)
                    .map_err(|e| format!("OCSP responder certificate: {e}"))?,
                certificate: der,
            };
            Some(OcspResponder {
                keys: std::sync::RwLock::new(vec![Arc::new(key)]),
                ca_hashes: OcspIssuer::from_certificate_der(&certificate)
                    .map_err(|e| format!("CA certificate: {e}"))?,
                roles: o.roles.clone(),
            })
        }
        None => None,
    };
    Ok(CaIssuer {
        name: name.to_owned(),
        key_id: cfg.key.clone(),
        certificate,
        policy: IssuerPolicy::from_profile(&profile, issuer),
        profile,
        roles: cfg.roles.clone(),
        crl_roles: cfg.crl_roles.clone(),
        raw_signing_roles: cfg.raw_signing_roles.clone(),
        ocsp,
    })
}

/// Reads a certificate, PEM or DER.
pub(crate) fn read_certificate(path: &Path) -> Result<(X509, Vec<u8>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let x509 = if bytes.trim_ascii_start().starts_with(b"-----BEGIN") {
        X509::from_pem(&bytes)
    } else {
        X509::from_der(&bytes)
    }
    .map_err(|e| format!("{}: not a certificate: {e}", path.display()))?;
    let der = x509.to_der().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((x509, der))
}

/// Checks that `key_id` is loaded and is the key of `cert`; resolves the scheme.
pub(crate) fn check_key(
    key_id: &str,
    scheme: Option<&str>,
    cert: &X509,
    keys: &KeyRing,
    what: &str,
) -> Result<SignatureScheme, String> {
    let key = keys.require(key_id).map_err(|e| e.detail)?;
    let handle = key.signer().map_err(|e| e.detail)?;
    let cert_spki =
        cert.public_key().and_then(|k| k.public_key_to_der()).map_err(|e| format!("{what}: public key: {e}"))?;
    if cert_spki != handle.spki() {
        return Err(format!("the {what}'s public key is not the public key of signd key `{key_id}`"));
    }
    let scheme = match scheme {
        None => SignatureScheme::Default,
        Some(s) => SignatureScheme::from_str(s).map_err(|e| e.to_string())?,
    };
    handle.algorithm().resolve(scheme).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_strict_and_complete() {
        let c: crate::config::Config = toml::from_str(
            r#"
            socket = "/s"
            state_dir = "/d"
            [issuers.demo]
            key = "ca"
            certificate = "/etc/signet/ca.pem"
            roles = ["issuer"]
            crl_roles = ["crl"]
            profile = { name = "tls", max_validity_seconds = 86400, allowed_ekus = ["server-auth"], default_ekus = ["server-auth"], allow_dns_sans = true, allowed_key_algorithms = ["ecdsa-p256"] }
            [issuers.demo.ocsp]
            key = "ocsp"
            certificate = "/etc/signet/responder.pem"
            roles = ["ocsp"]
            "#,
        )
        .unwrap();
        let demo = &c.issuers["demo"];
        assert_eq!(demo.profile.as_ref().unwrap().max_validity_seconds, 86400);
        assert_eq!(demo.ocsp.as_ref().unwrap().roles, ["ocsp"]);
        assert!(demo.raw_signing_roles.is_empty());
        let e = toml::from_str::<crate::config::Config>(
            "socket = \"/s\"\nstate_dir = \"/d\"\n[issuers.x]\nkey = \"k\"\ncertificate = \"/c\"\nraw_signing = true\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("raw_signing"), "{e}");
    }

    #[test]
    fn raw_signing_is_refused_for_issuer_keys() {
        let mut issuers = Issuers::default();
        let profile: Profile = toml::from_str(
            "name = \"t\"\nmax_validity_seconds = 10\nallowed_ekus = []\ndefault_ekus = []\nallow_dns_sans = true\nallowed_key_algorithms = [\"ed25519\"]\n",
        )
        .unwrap();
        let spki = openssl::pkey::PKey::generate_ed25519().unwrap().public_key_to_der().unwrap();
        let issuer = Issuer::new("CN=t".parse().unwrap(), &spki, SignatureScheme::Default).unwrap();
        issuers.by_name.insert(
            "t".into(),
            std::sync::Arc::new(CaIssuer {
                name: "t".into(),
                key_id: "ca".into(),
                certificate: vec![],
                policy: IssuerPolicy::from_profile(&profile, issuer),
                profile,
                roles: vec!["issuer".into()],
                crl_roles: vec![],
                raw_signing_roles: vec!["ceremony".into()],
                ocsp: None,
            }),
        );
        assert!(issuers.check_raw_signing("other", "issuer").is_ok());
        assert!(issuers.check_raw_signing("ca", "ceremony").is_ok());
        let e = issuers.check_raw_signing("ca", "issuer").unwrap_err();
        assert_eq!(e.kind, signet_ipc::ErrorKind::PermissionDenied);
        assert!(e.detail.contains("issuer `t`"), "{e}");
    }
}
