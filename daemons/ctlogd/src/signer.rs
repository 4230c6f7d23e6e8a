//! The log's signing key, as the sequencer sees it: [`LogSigner`] signs the
//! exact bytes of SCTs and tree heads (built by `signet-ct`) and returns DER
//! ECDSA signatures. In the daemon, signd implements it under the log's role;
//! [`LocalSigner`] (unit tests only) signs in-process.

use futures::future::BoxFuture;

/// Errors from a [`LogSigner`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// The signer could not be reached or failed; the batch may be retried.
    #[error("log signer unavailable: {0}")]
    Unavailable(String),
    /// The signer refused to sign (wrong role, malformed input).
    #[error("log signer refused: {0}")]
    Refused(String),
    /// The signer returned another number of signatures than inputs.
    #[error("log signer returned {got} signatures for {expected} inputs")]
    Count {
        /// Inputs sent.
        expected: usize,
        /// Signatures returned.
        got: usize,
    },
}

/// Signs with the log's key (ECDSA P-256 with SHA-256, RFC 6962 §2.1.4).
///
/// The method is `async fn sign_many(&self, inputs: Vec<Vec<u8>>) ->
/// Result<Vec<Vec<u8>>, SignError>`, written with a boxed future so that the
/// sequencer can hold an `Arc<dyn LogSigner>`.
pub trait LogSigner: Send + Sync + 'static {
    /// One DER `Ecdsa-Sig-Value` per input, in order: each input is hashed
    /// with SHA-256 and signed. A batch's SCTs and its tree head come in one call.
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Vec<Vec<u8>>, SignError>>;
}

#[cfg(test)]
pub use local::LocalSigner;

#[cfg(test)]
mod local {
    use futures::future::BoxFuture;
    use futures::FutureExt;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private};
    use openssl::sign::Signer;

    use super::{LogSigner, SignError};

    /// An in-process P-256 key (tests and tools only: the daemon's key is in signd).
    pub struct LocalSigner {
        key: PKey<Private>,
    }

    impl std::fmt::Debug for LocalSigner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("LocalSigner")
        }
    }

    impl LocalSigner {
        /// A new random P-256 key.
        pub fn generate() -> Result<Self, openssl::error::ErrorStack> {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
            Ok(Self { key: PKey::from_ec_key(EcKey::generate(&group)?)? })
        }

        /// The DER `SubjectPublicKeyInfo`.
        pub fn public_key_der(&self) -> Result<Vec<u8>, openssl::error::ErrorStack> {
            self.key.public_key_to_der()
        }

        fn sign_all(&self, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, openssl::error::ErrorStack> {
            inputs
                .iter()
                .map(|m| {
                    let mut s = Signer::new(MessageDigest::sha256(), &self.key)?;
                    s.sign_oneshot_to_vec(m)
                })
                .collect()
        }
    }

    impl LogSigner for LocalSigner {
        fn sign_many(&self, inputs: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Vec<Vec<u8>>, SignError>> {
            let r = self.sign_all(&inputs).map_err(|e| SignError::Unavailable(e.to_string()));
            async move { r }.boxed()
        }
    }
}

/// The log key in signd, through its CT log capability (`[logs.<name>]` in
/// signd's config): signd checks that every input is a well-formed SCT or
/// tree head before signing, and audits each call.
#[derive(Clone)]
pub struct SigndSigner {
    client: signet_ipc::SigndClient,
    log: String,
}

impl std::fmt::Debug for SigndSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigndSigner").field("log", &self.log).finish()
    }
}

impl SigndSigner {
    /// The key of signd log `log`, over `client`.
    pub fn new(client: signet_ipc::SigndClient, log: impl Into<String>) -> Self {
        Self { client, log: log.into() }
    }

    /// The log key's DER `SubjectPublicKeyInfo`.
    pub async fn public_key(&self) -> Result<Vec<u8>, SignError> {
        self.client.ct_log_public_key(&self.log).await.map_err(sign_error)
    }
}

fn sign_error(e: signet_ipc::IpcError) -> SignError {
    use signet_types::ErrorKind;
    match e.kind {
        ErrorKind::PermissionDenied
        | ErrorKind::InvalidArgument
        | ErrorKind::UnknownKey
        | ErrorKind::WrongAlgorithm => SignError::Refused(e.to_string()),
        _ => SignError::Unavailable(e.to_string()),
    }
}

impl LogSigner for SigndSigner {
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Vec<Vec<u8>>, SignError>> {
        use futures::FutureExt;
        async move {
            let expected = inputs.len();
            let signatures = self.client.sign_ct(&self.log, inputs).await.map_err(sign_error)?;
            if signatures.len() != expected {
                return Err(SignError::Count { expected, got: signatures.len() });
            }
            Ok(signatures)
        }
        .boxed()
    }
}
