//! signd health, and a test signature's latency through a probe key: signd's `health`, then
//! (with `key`) a random message signed in `role` with the key's default scheme and the
//! signature verified with OpenSSL against the key's public key.

use std::time::Instant;

use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::rsa::Padding;
use openssl::sign::{RsaPssSaltlen, Verifier};
use rand_core::{OsRng, RngCore};
use signet_ipc::{DigestAlgorithm, SignatureScheme, SigndClient};

use super::{Gauge, Probed, Report};
use crate::config::CheckConfig;

/// A prepared signd check.
pub struct SigndProbe {
    client: SigndClient,
    key: Option<String>,
    role: String,
}

impl SigndProbe {
    /// Prepares the check (the connection is made on first use, and again after a failure).
    pub fn new(c: &CheckConfig) -> Result<SigndProbe, String> {
        let socket = c.socket.as_deref().ok_or("no socket")?;
        Ok(SigndProbe {
            client: SigndClient::new(socket).map_err(|e| format!("socket {}: {e}", socket.display()))?,
            key: c.key.clone(),
            role: c.role.clone().unwrap_or_default(),
        })
    }

    /// One health call, and one signature if a key is configured.
    pub async fn run(&self) -> Probed {
        let health = self.client.health().await.map_err(|e| Report::msg(format!("health: {e}")))?;
        let mut report = Report::msg("").gauge(Gauge::SigndKeysUnavailable, f64::from(health.keys_unavailable));
        if !health.ok {
            report.message = format!("signd reports not ok ({} keys unavailable)", health.keys_unavailable);
            return Err(report);
        }
        let Some(key) = &self.key else {
            report.message = format!("signd {} ok, {} keys loaded", health.version, health.keys_loaded);
            return Ok(report);
        };
        let info = match self.client.public_key(&self.role, key).await {
            Ok(i) => i,
            Err(e) => {
                report.message = format!("key `{key}`: {e}");
                return Err(report);
            }
        };
        if !info.available {
            report.message = format!("key `{key}` unavailable: {}", info.problem);
            return Err(report);
        }
        let scheme = info.algorithm.default_scheme();
        let mut message = vec![0u8; 32];
        OsRng.fill_bytes(&mut message);
        let start = Instant::now();
        let signed = self.client.sign(&self.role, key, scheme, message.clone()).await;
        let latency = start.elapsed();
        report = report.gauge(Gauge::SigndSignLatency, latency.as_secs_f64());
        let signature = match signed {
            Ok(s) => s,
            Err(e) => {
                report.message = format!("sign with `{key}`: {e}");
                return Err(report);
            }
        };
        if let Err(e) = verify(&info.spki, scheme, &message, &signature) {
            report.message = format!("signature by `{key}` does not verify: {e}");
            return Err(report);
        }
        report.message = format!("signd ok; `{key}` ({}) signed in {latency:?}, verified", scheme.name());
        Ok(report)
    }
}

/// Verifies `signature` over `message` with the key `spki` under `scheme`.
fn verify(spki: &[u8], scheme: SignatureScheme, message: &[u8], signature: &[u8]) -> Result<(), String> {
    let key = PKey::public_key_from_der(spki).map_err(|e| e.to_string())?;
    let md = match scheme.digest() {
        DigestAlgorithm::Sha256 => Some(MessageDigest::sha256()),
        DigestAlgorithm::Sha384 => Some(MessageDigest::sha384()),
        DigestAlgorithm::Sha512 => Some(MessageDigest::sha512()),
        _ => None,
    };
    let mut v = match md {
        Some(md) => Verifier::new(md, &key),
        None => Verifier::new_without_digest(&key),
    }
    .map_err(|e| e.to_string())?;
    if let (true, Some(md)) = (scheme.is_pss(), md) {
        v.set_rsa_padding(Padding::PKCS1_PSS).map_err(|e| e.to_string())?;
        v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).map_err(|e| e.to_string())?;
        v.set_rsa_mgf1_md(md).map_err(|e| e.to_string())?;
    }
    match v.verify_oneshot(signature, message) {
        Ok(true) => Ok(()),
        Ok(false) => Err("bad signature".into()),
        Err(e) => Err(e.to_string()),
    }
}
