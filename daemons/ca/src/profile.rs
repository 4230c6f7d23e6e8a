//! Certificate profiles: what an end-entity certificate of one kind may contain.
//!
//! A profile is config (TOML in the daemons), decoded strictly: unknown keys are errors.
//!
//! ```toml
//! name = "tls-server"
//! max_validity_seconds = 7776000       # 90 days
//! backdate_seconds = 3600
//! key_usage = ["digital-signature", "key-encipherment"]
//! allowed_ekus = ["server-auth", "client-auth"]
//! default_ekus = ["server-auth"]
//! allow_dns_sans = true
//! allow_ip_sans = true
//! ocsp_urls = ["http://ocsp.example/"]
//! ca_issuers_url = "http://ca.example/issuer.der"
//! crl_url = "http://crl.example/{shard}.crl"
//! crl_shards = 4
//! must_staple = false
//! allowed_key_algorithms = ["ecdsa-p256", "ed25519", "rsa-2048", "ml-dsa-44"]
//! ```

use std::time::Duration;

use const_oid::ObjectIdentifier;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use signet_types::KeyAlgorithm;

use crate::CaError;

/// The placeholder in [`Profile::crl_url`] replaced by a CRL shard number.
pub const SHARD_PLACEHOLDER: &str = "{shard}";

/// An end-entity certificate profile.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The profile's name, used in requests, logs and errors.
    pub name: String,
    /// The longest validity (notAfter - notBefore + 1 s) a certificate may have, in seconds.
    pub max_validity_seconds: u64,
    /// Validity used when a request names none, in seconds; defaults to the maximum.
    #[serde(default)]
    pub default_validity_seconds: Option<u64>,
    /// How far before "now" notBefore is set, to absorb relying parties' clock skew.
    #[serde(default)]
    pub backdate_seconds: u64,
    /// Key usage bits. digitalSignature is always set; keyEncipherment and
    /// dataEncipherment are applied to RSA keys only and keyAgreement to EC keys
    /// only (the other key types cannot do them). keyCertSign/cRLSign do not exist here.
    #[serde(default = "default_key_usage")]
    pub key_usage: Vec<KeyUsageBit>,
    /// EKUs a request may ask for.
    pub allowed_ekus: Vec<Eku>,
    /// EKUs used when a request names none; must be a subset of `allowed_ekus`.
    pub default_ekus: Vec<Eku>,
    /// Whether dNSName SANs are allowed.
    #[serde(default)]
    pub allow_dns_sans: bool,
    /// Whether iPAddress SANs are allowed.
    #[serde(default)]
    pub allow_ip_sans: bool,
    /// Whether rfc822Name (email) SANs are allowed.
    #[serde(default)]
    pub allow_email_sans: bool,
    /// OCSP responder URLs for the AIA extension (none: no OCSP entry).
    #[serde(default)]
    pub ocsp_urls: Vec<String>,
    /// caIssuers URL for the AIA extension.
    #[serde(default)]
    pub ca_issuers_url: Option<String>,
    /// CRL distribution point URL; `{shard}` is replaced by the certificate's CRL shard.
    #[serde(default)]
    pub crl_url: Option<String>,
    /// How many CRL shards certificates are spread over (numbered from 0); each
    /// certificate's CRLDP names its shard through `{shard}` in `crl_url`. 0
    /// (the default) when `crl_url` has no `{shard}`.
    #[serde(default)]
    pub crl_shards: u32,
    /// Whether to add the TLS feature extension with status_request (OCSP must-staple).
    #[serde(default)]
    pub must_staple: bool,
    /// Subject key algorithms this profile issues for (names as in signd's config).
    #[serde(serialize_with = "ser_algs", deserialize_with = "de_algs")]
    pub allowed_key_algorithms: Vec<KeyAlgorithm>,
}

fn default_key_usage() -> Vec<KeyUsageBit> {
    vec![KeyUsageBit::DigitalSignature]
}

impl Profile {
    /// Checks the profile for consistency; call once after loading it.
    pub fn check(&self) -> Result<(), CaError> {
        let bad = |reason: &str| Err(CaError::InvalidProfile { profile: self.name.clone(), reason: reason.into() });
        if self.max_validity_seconds == 0 {
            return bad("max_validity_seconds is 0");
        }
        if self.default_validity_seconds.is_some_and(|d| d == 0 || d > self.max_validity_seconds) {
            return bad("default_validity_seconds must be in 1..=max_validity_seconds");
        }
        if self.default_ekus.iter().any(|e| !self.allowed_ekus.contains(e)) {
            return bad("default_ekus must be a subset of allowed_ekus");
        }
        if self.allowed_ekus.contains(&Eku::OcspSigning) {
            return bad("ocsp-signing is only for the OCSP responder certificate");
        }
        if self.allowed_key_algorithms.is_empty() {
            return bad("allowed_key_algorithms is empty");
        }
        if !(self.allow_dns_sans || self.allow_ip_sans || self.allow_email_sans) {
            return bad("no SAN kind is allowed");
        }
        let sharded = self.crl_url.as_deref().is_some_and(|u| u.contains(SHARD_PLACEHOLDER));
        if sharded != (self.crl_shards > 0) {
            return bad("crl_shards must be at least 1 exactly when crl_url contains {shard}");
        }
        let urls = self.ocsp_urls.iter().chain(&self.ca_issuers_url).chain(&self.crl_url);
        if urls.clone().any(|u| u.is_empty() || !u.is_ascii() || u.contains(char::is_whitespace)) {
            return bad("URLs must be non-empty ASCII without spaces");
        }
        Ok(())
    }

    /// The longest validity as a Duration.
    pub fn max_validity(&self) -> Duration {
        Duration::from_secs(self.max_validity_seconds)
    }

    /// Whether `alg` subject keys are allowed.
    pub fn allows_key(&self, alg: KeyAlgorithm) -> bool {
        self.allowed_key_algorithms.contains(&alg)
    }

    /// The allowed EKUs as OIDs.
    pub fn allowed_eku_oids(&self) -> Vec<ObjectIdentifier> {
        self.allowed_ekus.iter().map(|e| e.oid()).collect()
    }
}

fn ser_algs<S: Serializer>(algs: &[KeyAlgorithm], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(algs.iter().map(|a| a.name()))
}

fn de_algs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<KeyAlgorithm>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    names
        .iter()
        .map(|n| n.parse().map_err(|e: signet_types::UnknownName| serde::de::Error::custom(e.to_string())))
        .collect()
}

/// A key usage bit an end-entity profile may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyUsageBit {
    /// digitalSignature.
    DigitalSignature,
    /// nonRepudiation (contentCommitment).
    NonRepudiation,
    /// keyEncipherment (RSA keys only).
    KeyEncipherment,
    /// dataEncipherment (RSA keys only).
    DataEncipherment,
    /// keyAgreement (EC keys only).
    KeyAgreement,
}

/// An extended key usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Eku {
    /// id-kp-serverAuth.
    ServerAuth,
    /// id-kp-clientAuth.
    ClientAuth,
    /// id-kp-codeSigning.
    CodeSigning,
    /// id-kp-emailProtection.
    EmailProtection,
    /// id-kp-timeStamping.
    TimeStamping,
    /// id-kp-OCSPSigning (only in OCSP responder certificates).
    OcspSigning,
}

impl Eku {
    /// The EKU's OID.
    pub fn oid(self) -> ObjectIdentifier {
        use const_oid::db::rfc5280 as o;
        match self {
            Self::ServerAuth => o::ID_KP_SERVER_AUTH,
            Self::ClientAuth => o::ID_KP_CLIENT_AUTH,
            Self::CodeSigning => o::ID_KP_CODE_SIGNING,
            Self::EmailProtection => o::ID_KP_EMAIL_PROTECTION,
            Self::TimeStamping => o::ID_KP_TIME_STAMPING,
            Self::OcspSigning => o::ID_KP_OCSP_SIGNING,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
name = "tls-server"
max_validity_seconds = 7776000
backdate_seconds = 3600
key_usage = ["digital-signature", "key-encipherment"]
allowed_ekus = ["server-auth", "client-auth"]
default_ekus = ["server-auth"]
allow_dns_sans = true
allow_ip_sans = true
ocsp_urls = ["http://ocsp.example/"]
ca_issuers_url = "http://ca.example/issuer.der"
crl_url = "http://crl.example/{shard}.crl"
crl_shards = 4
allowed_key_algorithms = ["ecdsa-p256", "ed25519", "rsa-2048", "ml-dsa-44"]
"#;

    #[test]
    fn decodes_and_checks() {
        let p: Profile = toml::from_str(EXAMPLE).unwrap();
        p.check().unwrap();
        assert_eq!(p.allowed_key_algorithms[3], KeyAlgorithm::MlDsa44);
        assert!(!p.must_staple);
        // Round trip through the serializer keeps algorithm names.
        let again: Profile = toml::from_str(&toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(again, p);
    }

    #[test]
    fn unknown_key_is_an_error() {
        let err = toml::from_str::<Profile>(&format!("{EXAMPLE}\nmax_validty = 3\n")).unwrap_err();
        assert!(err.to_string().contains("max_validty"), "{err}");
    }

    #[test]
    fn unknown_algorithm_is_an_error() {
        let bad = EXAMPLE.replace("\"ml-dsa-44\"", "\"dsa-1024\"");
        assert!(toml::from_str::<Profile>(&bad).unwrap_err().to_string().contains("dsa-1024"));
    }

    #[test]
    fn inconsistent_profiles_are_refused() {
        let mut p: Profile = toml::from_str(EXAMPLE).unwrap();
        p.default_ekus.push(Eku::CodeSigning);
        assert!(matches!(p.check(), Err(CaError::InvalidProfile { .. })));
        let mut p: Profile = toml::from_str(EXAMPLE).unwrap();
        p.allowed_ekus.push(Eku::OcspSigning);
        assert!(matches!(p.check(), Err(CaError::InvalidProfile { .. })));
        // Shards without a {shard} URL, and a {shard} URL without shards.
        let mut p: Profile = toml::from_str(EXAMPLE).unwrap();
        p.crl_shards = 0;
        assert!(matches!(p.check(), Err(CaError::InvalidProfile { .. })));
        p.crl_url = Some("http://crl.example/all.crl".into());
        p.check().unwrap();
        p.crl_shards = 2;
        assert!(matches!(p.check(), Err(CaError::InvalidProfile { .. })));
    }
}
