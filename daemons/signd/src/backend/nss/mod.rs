//! The NSS backend: keys on an NSS token, either NSS's own softokn (the
//! database's internal key slot) or any PKCS #11 module registered in the
//! database (an HSM; SoftHSM2 in the tests).
//!
//! NSS is initialised once per process ([`NssBackend::open`]); it is not
//! fork-safe, and signd never forks. Keys are permanent, sensitive token
//! objects named by CKA_ID (NSS sets it to a hash of the public key) and
//! labelled with the signd key id. A key's `SECKEYPrivateKey*` is found once
//! and cached (as an in-token session copy, see `Slot::signing_copy`): a
//! signature never re-imports or re-finds a key. When a sign
//! fails (token removed, session lost) the cached handle is dropped and the
//! key is looked up again once; if that fails, PKCS #11 modules that stopped
//! answering are re-initialised (at most once a second, see
//! [`restart_dead_modules`]) and the key is looked up once more; if that
//! fails too the caller gets `KeyUnavailable` and the next call tries again.
//!
//! Ed25519 keys, which NSS 3.87 cannot describe, are made and used through
//! the token's own PKCS #11 functions where its module has the Edwards
//! mechanisms (see `ed25519` and `pkcs11`); elsewhere they are `Unsupported`.
//!
//! Everything `unsafe` in signd's NSS support is in this module and its
//! submodules:
//! - `backend`: [`NssBackend`]: opening NSS, tokens and logins, generating,
//!   locating and loading keys;
//! - `key`: [`NssKey`], a key NSS holds, with its cached signing handle;
//! - `handles`: the RAII handles on NSS objects (keys, slots);
//! - `module`: NSS's process-wide state (initialisation, the PIN, module
//!   restarts and the lock and count that go with them);
//! - `ed25519`: Ed25519 keys, made and used through the token's own PKCS #11
//!   functions;
//! - `cached`, `plan`, `pkcs11`, `ffi`: the handle cache, the signing
//!   mechanisms, the token's own PKCS #11 functions, NSS's C declarations.
//!
//! The test hooks (forcing a module restart, poisoning a cached handle,
//! signing through NSS's call, loading without a session copy) exist only
//! under `cfg(test)`, for `inprocess_tests`.

mod backend;
mod cached;
mod ed25519;
mod ffi;
mod handles;
mod key;
mod module;
mod pkcs11;
mod plan;

use std::path::PathBuf;

use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Public};
use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm};

pub use backend::NssBackend;
pub use key::NssKey;

// What the submodules share, under the names they use (`super::...`).
use super::SigningKey;
use backend::Inner;
use ffi::SECItem;
use handles::{PrivateKey, SigningHandle, Slot};
use module::{last_error, modules_read, MODULES, RESTARTS};

/// The backend name recorded with keys.
pub const NAME: &str = "nss";

/// Where NSS keys live and how to log in, from `[nss]` in signd.toml.
#[derive(Clone, Debug)]
pub struct NssSettings {
    /// The NSS database, `sql:DIR` (a bare directory means `sql:DIR`).
    pub database: String,
    /// Token label for new keys; empty or "internal" is NSS's softokn.
    pub token: String,
    /// The file holding the token's user PIN (its first line), if it needs one.
    pub pin_file: Option<PathBuf>,
}

/// Which mechanism family to prefer when a token has both. signd uses
/// `Prehash`: on softokn and SoftHSM2 the two measured the same (see
/// docs/signd.md), and more tokens have the raw mechanisms (SoftHSM2 has no
/// CKM_ECDSA_SHA256).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// Hash in NSS (HASH_HashBuf), then CKM_ECDSA / CKM_RSA_PKCS(_PSS).
    Prehash,
    /// The token hashes: CKM_ECDSA_SHA256, CKM_SHA256_RSA_PKCS(_PSS), ...
    Combined,
}

/// A key's recorded location: `token "LABEL", CKA_ID HEX`.
fn location(token: &str, cka_id: &[u8]) -> String {
    format!("token \"{token}\", CKA_ID {}", hex::encode(cka_id))
}

fn parse_location(location: &str) -> Result<(String, Vec<u8>), IpcError> {
    let bad = || IpcError::new(ErrorKind::KeyUnavailable, format!("not an NSS key location: {location:?}"));
    let rest = location.strip_prefix("token \"").ok_or_else(bad)?;
    let (token, id) = rest.rsplit_once("\", CKA_ID ").ok_or_else(bad)?;
    let id = hex::decode(id).map_err(|_| bad())?;
    Ok((token.to_owned(), id))
}

fn normalise_database(database: &str) -> String {
    if database.contains(':') {
        database.to_owned()
    } else {
        format!("sql:{database}")
    }
}

fn backend_err(detail: impl Into<String>) -> IpcError {
    IpcError::new(ErrorKind::Backend, detail)
}

/// Copies an item's bytes.
///
/// # Safety
/// `item.data` must be NULL or valid for `item.len` bytes.
unsafe fn item_bytes(item: &SECItem) -> Vec<u8> {
    if item.data.is_null() || item.len == 0 {
        return Vec::new();
    }
    // SAFETY: the caller guarantees data is valid for len bytes.
    unsafe { std::slice::from_raw_parts(item.data, item.len as usize).to_vec() }
}

/// The named-curve ECParameters (an OBJECT IDENTIFIER, RFC 5480 §2.1.1.1)
/// NSS takes as the EC key-generation parameter. Constants, not encoding
/// logic; a test checks them against OpenSSL's SPKI for each curve.
fn curve_params(algorithm: KeyAlgorithm) -> &'static [u8] {
    match algorithm {
        KeyAlgorithm::EcP384 => &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22],
        KeyAlgorithm::EcP521 => &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23],
        _ => &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07],
    }
}

/// Re-encodes an SPKI the way OpenSSL does (so it compares byte for byte with
/// the OpenSSL backend's) and says which of signd's algorithms it is.
fn normalise_spki(der: &[u8]) -> Result<(KeyAlgorithm, Vec<u8>), IpcError> {
    let bad = |e: String| IpcError::new(ErrorKind::KeyUnavailable, format!("the token's public key: {e}"));
    let key: PKey<Public> = PKey::public_key_from_der(der).map_err(|e| bad(e.to_string()))?;
    let algorithm = match key.id() {
        Id::EC => match key.ec_key().map_err(|e| bad(e.to_string()))?.group().curve_name() {
            Some(Nid::X9_62_PRIME256V1) => KeyAlgorithm::EcP256,
            Some(Nid::SECP384R1) => KeyAlgorithm::EcP384,
            Some(Nid::SECP521R1) => KeyAlgorithm::EcP521,
            other => {
                return Err(IpcError::new(
                    ErrorKind::Unsupported,
                    format!("EC curve {other:?} is not supported by signd"),
                ))
            }
        },
        Id::RSA => match key.bits() {
            2048 => KeyAlgorithm::Rsa2048,
            3072 => KeyAlgorithm::Rsa3072,
            4096 => KeyAlgorithm::Rsa4096,
            b => {
                return Err(IpcError::new(
                    ErrorKind::Unsupported,
                    format!("RSA with a {b}-bit modulus is not supported by signd"),
                ))
            }
        },
        Id::ED25519 => KeyAlgorithm::Ed25519,
        other => {
            return Err(IpcError::new(ErrorKind::Unsupported, format!("key type {other:?} is not supported by signd")))
        }
    };
    Ok((algorithm, key.public_key_to_der().map_err(|e| bad(e.to_string()))?))
}

#[cfg(test)]
mod inprocess_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_round_trip() {
        let loc = location("signet", &[0x0a, 0x1b, 0xff]);
        assert_eq!(loc, "token \"signet\", CKA_ID 0a1bff");
        assert_eq!(parse_location(&loc).unwrap(), ("signet".to_owned(), vec![0x0a, 0x1b, 0xff]));
        // A label may itself contain the separator's pieces.
        let odd = location("a\", CKA_ID b", &[1]);
        assert_eq!(parse_location(&odd).unwrap(), ("a\", CKA_ID b".to_owned(), vec![1]));
        for bad in ["ca.pem", "token \"x\"", "token \"x\", CKA_ID zz"] {
            assert_eq!(parse_location(bad).unwrap_err().kind, ErrorKind::KeyUnavailable, "{bad}");
        }
        assert_eq!(normalise_database("/var/lib/nssdb"), "sql:/var/lib/nssdb");
        assert_eq!(normalise_database("sql:/x"), "sql:/x");
    }

    /// The curve parameters NSS gets are the ones OpenSSL writes in an SPKI.
    #[test]
    fn curve_params_match_openssl() {
        for alg in [KeyAlgorithm::EcP256, KeyAlgorithm::EcP384, KeyAlgorithm::EcP521] {
            let spki = crate::backend::openssl::generate(alg).unwrap().public_key_to_der().unwrap();
            let params = curve_params(alg);
            assert!(spki.windows(params.len()).any(|w| w == params), "{alg}");
            assert_eq!(normalise_spki(&spki).unwrap(), (alg, spki.clone()));
        }
    }
}
