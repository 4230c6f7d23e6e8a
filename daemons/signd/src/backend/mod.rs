//! Key backends: where private keys live and how they sign.
//!
//! Each backend implements [`Backend`] (create and load keys) and hands out
//! [`SigningKey`] handles that signd caches for the life of the key, so nothing
//! is parsed or imported per signature (rustls' `SigningKey`/`Signer` split;
//! Boulder's `crypto.Signer` over file or PKCS#11 keys).

use std::sync::Arc;

use signet_ipc::{IpcError, KeyAlgorithm, SignatureScheme};

#[allow(unsafe_code)]
mod nonces;
#[allow(unsafe_code)]
pub mod nss;
pub mod openssl;

/// A loaded private key. Implementations are cheap to share between threads.
pub trait SigningKey: Send + Sync {
    /// The key's algorithm.
    fn algorithm(&self) -> KeyAlgorithm;
    /// The SubjectPublicKeyInfo (DER) derived from the private key itself.
    fn spki(&self) -> &[u8];
    /// Signs `message` with `scheme`, which the caller has already checked
    /// with [`KeyAlgorithm::resolve`].
    fn sign(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, IpcError>;
    /// Does one small piece of work ahead of the key's next signatures, if
    /// any is due (an ECDSA nonce, see `nonces.rs`); returns whether it did.
    /// Called by a thread with nothing else to do.
    fn prepare_one(&self) -> bool {
        false
    }
}

/// A freshly created or imported key, ready to record.
pub struct NewKey {
    /// The signing handle.
    pub key: Arc<dyn SigningKey>,
    /// Backend-specific location (a file path relative to the state dir, a token label).
    pub location: String,
}

/// A place private keys live.
pub trait Backend: Send + Sync {
    /// The backend's name as recorded with each key ("openssl", "nss").
    fn name(&self) -> &'static str;
    /// Generates a key and stores it durably.
    fn generate(&self, id: &str, algorithm: KeyAlgorithm) -> Result<NewKey, IpcError>;
    /// Stores an imported PKCS#8 key (PEM or DER) durably. The algorithm is read
    /// from the key and must equal `algorithm`.
    fn import(&self, id: &str, algorithm: KeyAlgorithm, pkcs8: &[u8]) -> Result<NewKey, IpcError>;
    /// Loads a stored key.
    fn load(&self, location: &str) -> Result<Arc<dyn SigningKey>, IpcError>;
    /// Removes a key's material after a failed registration; best effort.
    fn discard(&self, location: &str);
}
