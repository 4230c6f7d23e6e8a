//! A new issuing CA beside an issuer, without a restart or a config edit
//! (`Admin.issueIssuingCa`, `signetctl ca rotate-issuer`).
//!
//! signd builds the intermediate certificate for the new CA key itself
//! (`signet_ca::build_intermediate_tbs`, as the ceremony does), signs it with
//! the root key (which must have signed the issuer's certificate), then the
//! new CA's delegated OCSP responder certificate, signed by the new CA. The
//! new issuer takes the old one's profile and roles; its CRL URL is the one
//! asked for or, by default, the old one with ocspd's CRL path of the old
//! issuer (`/crl/<old>/`, `/crl/<old>.crl`) made the new one's, so each
//! certificate names the CRL of the CA that signed it. Its record is committed to the `issuing_cas` table (fsynced)
//! before it is served; at every start the recorded issuers are added to the
//! configured ones, each checked again as a configured one is (its
//! certificate's public key that of its signd key, the responder issued by
//! it). The old issuer is left as it is: it keeps signing CRLs and OCSP for
//! what it issued.

use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openssl::pkey::PKey;
use openssl::x509::X509;
use serde::{Deserialize, Serialize};
use signet_ca::der::Decode;
use signet_ca::x509_cert::ext::pkix::AuthorityKeyIdentifier;
use signet_ca::x509_cert::Certificate;
use signet_ca::{
    assemble_certificate, build_intermediate_tbs, build_ocsp_responder_tbs, CaRequest, Issuer, IssuerPolicy, Name,
    OcspIssuer, Profile, ResponderRequest, SignatureScheme,
};
use signet_ipc::{ErrorKind, IpcError, IssuingCaSpec};
use signet_store::{Store, StoreError, Table};

use super::rotate::responder_key;
use super::{check_key, CaIssuer, Issuers, OcspResponder};
use crate::keys::KeyRing;

/// The validity of a new CA certificate when none is asked for.
pub const DEFAULT_VALIDITY_DAYS: u32 = 3650;
/// The longest validity asked for.
pub const MAX_VALIDITY_DAYS: u32 = 7300;
/// The validity of the new CA's first OCSP responder certificate.
const RESPONDER_VALIDITY_DAYS: u64 = 365;

/// An issuing CA made by `issueIssuingCa`, as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InstalledIssuer {
    /// Its issuer name.
    pub name: String,
    /// The issuer it succeeded (profile and roles come from it).
    pub based_on: String,
    /// The CA key's id.
    pub key_id: String,
    /// The CA certificate, DER.
    pub certificate: Vec<u8>,
    /// The OCSP responder key's id; empty when the issuer it succeeded had none.
    pub responder_key_id: String,
    /// The responder certificate, DER.
    pub responder_certificate: Vec<u8>,
    /// The end-entity profile, TOML.
    pub profile: String,
    /// When it was made.
    pub installed_unix_secs: i64,
}

/// The `issuing_cas` table: issuers made by rotation, by name.
#[derive(Clone)]
pub struct IssuingCaStore {
    store: Store,
    table: Table<String, InstalledIssuer>,
}

impl IssuingCaStore {
    /// Opens (creates) the table.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self { store: store.clone(), table: store.table("issuing_cas")? })
    }

    /// Every issuer made by rotation, oldest first.
    pub fn installed(&self) -> Result<Vec<InstalledIssuer>, StoreError> {
        let mut all: Vec<InstalledIssuer> =
            self.store.read(|t| t.range(&self.table, None, usize::MAX))?.into_iter().map(|(_, v)| v).collect();
        all.sort_by_key(|i| i.installed_unix_secs);
        Ok(all)
    }

    /// Records a new issuer, fsynced; `false` when the name was taken meanwhile. Blocking.
    pub fn add(&self, issuer: &InstalledIssuer) -> Result<bool, StoreError> {
        let added = self.store.write(|t| {
            if t.get(&self.table, &issuer.name)?.is_some() {
                return Ok(false);
            }
            t.put(&self.table, &issuer.name, issuer)?;
            Ok(true)
        })?;
        self.store.sync()?;
        Ok(added)
    }
}

impl Issuers {
    /// Adds the issuers made by rotation, each on the issuer it succeeded (a
    /// configured one or an earlier rotation's). One whose predecessor is gone
    /// from the config, or that no longer fits its keys, is logged and left out.
    pub fn apply_installed_cas(&mut self, store: &IssuingCaStore, keys: &KeyRing) -> Result<(), StoreError> {
        let mut pending = store.installed()?;
        loop {
            let before = pending.len();
            pending.retain(|rec| {
                if self.by_name.contains_key(&rec.name) {
                    tracing::error!(issuer = %rec.name, "an issuing CA made by rotation has the name of a configured issuer; not served");
                    return false;
                }
                let Some(base) = self.by_name.get(&rec.based_on).cloned() else { return true };
                match load(&base, rec, keys) {
                    Ok(ca) => {
                        tracing::info!(issuer = %rec.name, based_on = %rec.based_on, key = %rec.key_id, "issuing CA made by rotation");
                        self.by_name.insert(rec.name.clone(), Arc::new(ca));
                    }
                    Err(e) => tracing::error!(issuer = %rec.name, error = %e, "an issuing CA made by rotation does not fit its keys; not served"),
                }
                false
            });
            if pending.len() == before {
                break;
            }
        }
        for rec in pending {
            tracing::error!(issuer = %rec.name, based_on = %rec.based_on, "an issuing CA made by rotation succeeds an issuer that is not configured; not served");
        }
        Ok(())
    }

    /// These issuers and `ca`.
    pub fn with(&self, ca: CaIssuer) -> Issuers {
        let mut by_name = self.by_name.clone();
        by_name.insert(ca.name.clone(), Arc::new(ca));
        Issuers { by_name }
    }
}

/// The issuer `rec` describes, on `base`'s roles, checked against the key ring.
fn load(base: &CaIssuer, rec: &InstalledIssuer, keys: &KeyRing) -> Result<CaIssuer, String> {
    let profile: Profile = toml::from_str(&rec.profile).map_err(|e| format!("profile: {e}"))?;
    profile.check().map_err(|e| format!("profile: {e}"))?;
    let x509 = X509::from_der(&rec.certificate).map_err(|e| format!("CA certificate: {e}"))?;
    let scheme = check_key(&rec.key_id, None, &x509, keys, "CA certificate")?;
    let issuer = Issuer::from_certificate_der(&rec.certificate, scheme).map_err(|e| format!("CA certificate: {e}"))?;
    let mut ca = CaIssuer {
        name: rec.name.clone(),
        key_id: rec.key_id.clone(),
        certificate: rec.certificate.clone(),
        policy: IssuerPolicy::from_profile(&profile, issuer),
        profile,
        roles: base.roles.clone(),
        crl_roles: base.crl_roles.clone(),
        raw_signing_roles: base.raw_signing_roles.clone(),
        ocsp: None,
    };
    if let Some(base_ocsp) = &base.ocsp {
        let key = responder_key(&ca, &rec.responder_key_id, &rec.responder_certificate, keys)?;
        ca.ocsp = Some(OcspResponder {
            keys: RwLock::new(vec![Arc::new(key)]),
            ca_hashes: OcspIssuer::from_certificate_der(&rec.certificate)
                .map_err(|e| format!("CA certificate: {e}"))?,
            roles: base_ocsp.roles.clone(),
        });
    }
    Ok(ca)
}

/// What a call asks for, checked against the issuers on the capnp thread.
pub(crate) enum Target {
    /// The name is already this call's CA: its certificate (a resent call).
    Current(Vec<u8>),
    /// Make a CA beside this issuer.
    Issue(Arc<CaIssuer>),
}

/// A new issuer's name: `[A-Za-z0-9_-]{1,64}` (ocspd puts it in CRL paths).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks a call: the issuer exists, the name is free (or this call's), the
/// keys are distinct and no issuer's, the responder key given exactly when
/// the issuer has a responder, the validity within bounds.
pub(crate) fn target(issuers: &Issuers, spec: &IssuingCaSpec) -> Result<Target, IpcError> {
    let base = issuers
        .get(&spec.issuer)
        .ok_or_else(|| IpcError::invalid(format!("no issuer `{}` is configured", spec.issuer)))?;
    if !valid_name(&spec.new_name) {
        return Err(IpcError::invalid(format!("`{}` is not an issuer name ([A-Za-z0-9_-]{{1,64}})", spec.new_name)));
    }
    if let Some(existing) = issuers.get(&spec.new_name) {
        if existing.key_id == spec.key_id {
            return Ok(Target::Current(existing.certificate.clone()));
        }
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("issuer `{}` exists", spec.new_name)));
    }
    if spec.validity_days > MAX_VALIDITY_DAYS {
        return Err(IpcError::invalid(format!("a CA certificate is valid at most {MAX_VALIDITY_DAYS} days")));
    }
    match (&base.ocsp, spec.responder_key_id.is_empty()) {
        (Some(_), true) => {
            return Err(IpcError::invalid(format!(
                "issuer `{}` has an OCSP responder: the new CA needs a responder key",
                spec.issuer
            )))
        }
        (None, false) => {
            return Err(IpcError::invalid(format!("issuer `{}` has no OCSP responder to succeed", spec.issuer)))
        }
        _ => {}
    }
    let named = [("CA", &spec.key_id), ("root", &spec.root_key_id), ("responder", &spec.responder_key_id)];
    for (i, (what, id)) in named.iter().enumerate() {
        if id.is_empty() && *what != "responder" {
            return Err(IpcError::invalid(format!("no {what} key given")));
        }
        if named[..i].iter().any(|(_, other)| !id.is_empty() && other == id) {
            return Err(IpcError::invalid(format!("key `{id}` is named twice")));
        }
        if let Some(owner) = issuers.iter().find(|c| c.key_ids().iter().any(|k| k == *id)) {
            return Err(IpcError::invalid(format!("key `{id}` is already a key of issuer `{}`", owner.name)));
        }
    }
    Ok(Target::Issue(base.clone()))
}

/// Builds and signs the new CA's certificate (by the root key) and its
/// responder's (by the new CA key), blocking: a signing thread runs it. The
/// checked issuer and its record.
pub(crate) fn issue(
    base: &CaIssuer,
    spec: &IssuingCaSpec,
    keys: &KeyRing,
    now: SystemTime,
) -> Result<(CaIssuer, InstalledIssuer), IpcError> {
    let root = keys.require(&spec.root_key_id)?.signer()?.clone();
    let root_public = PKey::public_key_from_der(root.spki())
        .map_err(|e| IpcError::internal(format!("root key `{}`: {e}", spec.root_key_id)))?;
    let base_x509 = X509::from_der(&base.certificate)
        .map_err(|e| IpcError::internal(format!("issuer `{}`'s certificate: {e}", base.name)))?;
    if !base_x509.verify(&root_public).unwrap_or(false) {
        return Err(IpcError::invalid(format!(
            "key `{}` did not sign issuer `{}`'s certificate: it is not that CA's root key",
            spec.root_key_id, base.name
        )));
    }
    // The root as the current CA certificate names it: its issuer name and AKI.
    let base_cert = Certificate::from_der(&base.certificate)
        .map_err(|e| IpcError::internal(format!("issuer `{}`'s certificate: {e}", base.name)))?;
    let mut root_issuer = Issuer::new(base_cert.tbs_certificate.issuer.clone(), root.spki(), SignatureScheme::Default)
        .map_err(|e| IpcError::invalid(format!("root key `{}`: {e}", spec.root_key_id)))?;
    if let Ok(Some((_, aki))) = base_cert.tbs_certificate.get::<AuthorityKeyIdentifier>() {
        if let Some(id) = aki.key_identifier {
            root_issuer.key_id = id.as_bytes().to_vec();
        }
    }
    let subject =
        Name::from_str(&spec.subject).map_err(|e| IpcError::invalid(format!("subject {:?}: {e}", spec.subject)))?;
    let ca_key = keys.require(&spec.key_id)?.signer()?.clone();
    let days = if spec.validity_days == 0 { DEFAULT_VALIDITY_DAYS } else { spec.validity_days };
    let request = CaRequest::new(subject, ca_key.spki().to_vec(), days_of(u64::from(days)), Some(0));
    let tbs = build_intermediate_tbs(&request, &root_issuer, now, &mut rand_core::OsRng)
        .map_err(|e| IpcError::invalid(format!("the new CA certificate: {e}")))?;
    let signature = root.sign(root_issuer.scheme, &tbs)?;
    let certificate = assemble_certificate(&tbs, root_issuer.scheme, &signature)
        .map_err(|e| IpcError::internal(format!("assembling the CA certificate: {e}")))?;

    let (responder_key_id, responder_certificate) = match &base.ocsp {
        None => (String::new(), Vec::new()),
        Some(ocsp) => {
            let new_ca = Issuer::from_certificate_der(&certificate, SignatureScheme::Default)
                .map_err(|e| IpcError::internal(format!("the new CA certificate: {e}")))?;
            let request = ResponderRequest {
                subject: ocsp.current().responder.name.clone(),
                spki_der: keys.require(&spec.responder_key_id)?.signer()?.spki().to_vec(),
                validity: days_of(RESPONDER_VALIDITY_DAYS),
                backdate: Duration::from_secs(3600),
            };
            let tbs = build_ocsp_responder_tbs(&request, &new_ca, now, &mut rand_core::OsRng).map_err(|e| {
                IpcError::invalid(format!("key `{}` cannot be an OCSP responder: {e}", spec.responder_key_id))
            })?;
            let signature = ca_key.sign(new_ca.scheme, &tbs)?;
            let der = assemble_certificate(&tbs, new_ca.scheme, &signature)
                .map_err(|e| IpcError::internal(format!("assembling the responder certificate: {e}")))?;
            (spec.responder_key_id.clone(), der)
        }
    };
    let mut profile = base.profile.clone();
    profile.crl_url = if spec.crl_url.is_empty() {
        profile.crl_url.map(|u| successor_crl_url(&u, &base.name, &spec.new_name))
    } else {
        Some(spec.crl_url.clone())
    };
    profile.check().map_err(|e| IpcError::invalid(format!("the new issuer's profile: {e}")))?;
    let profile = toml::to_string(&profile).map_err(|e| IpcError::internal(format!("encoding the profile: {e}")))?;
    let record = InstalledIssuer {
        name: spec.new_name.clone(),
        based_on: base.name.clone(),
        key_id: spec.key_id.clone(),
        certificate,
        responder_key_id,
        responder_certificate,
        profile,
        installed_unix_secs: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
    };
    // The same checks a start applies to it.
    let ca = load(base, &record, keys).map_err(IpcError::internal)?;
    Ok((ca, record))
}

/// `url` with ocspd's CRL path of issuer `old` (`/crl/<old>/` or
/// `/crl/<old>.crl`) made `new`'s; unchanged when it has neither.
fn successor_crl_url(url: &str, old: &str, new: &str) -> String {
    for (from, to) in
        [(format!("/crl/{old}/"), format!("/crl/{new}/")), (format!("/crl/{old}.crl"), format!("/crl/{new}.crl"))]
    {
        if let Some(at) = url.rfind(&from) {
            return format!("{}{to}{}", &url[..at], &url[at + from.len()..]);
        }
    }
    url.to_owned()
}

fn days_of(days: u64) -> Duration {
    Duration::from_secs(days * 86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crl_url_follows_the_new_name() {
        let u = successor_crl_url("http://h:1/crl/demo/{shard}.crl", "demo", "demo-2");
        assert_eq!(u, "http://h:1/crl/demo-2/{shard}.crl");
        assert_eq!(successor_crl_url("http://h/crl/demo.crl", "demo", "d2"), "http://h/crl/d2.crl");
        assert_eq!(successor_crl_url("http://h/other.crl", "demo", "d2"), "http://h/other.crl");
        assert!(valid_name("demo-2_x") && !valid_name("") && !valid_name("a/b") && !valid_name(&"a".repeat(65)));
    }
}
