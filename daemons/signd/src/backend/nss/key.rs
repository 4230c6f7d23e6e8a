//! A key NSS holds, with its signing handle cached (found again when a module
//! restart leaves it stale or the token fails a signature).

use std::sync::Arc;

use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm, SignatureScheme};

use super::backend::Inner;
use super::cached::Cached;
use super::ffi::*;
use super::handles::SigningHandle;
use super::module::modules_read;
use super::plan::Plans;
use super::{backend_err, location};
use crate::backend::SigningKey;

/// A key on an NSS token, with its handle cached.
pub struct NssKey {
    inner: Arc<Inner>,
    token: String,
    cka_id: Vec<u8>,
    algorithm: KeyAlgorithm,
    spki: Vec<u8>,
    plans: Plans,
    handle: Cached<SigningHandle>,
}

impl NssKey {
    pub(super) fn new(
        inner: Arc<Inner>,
        token: String,
        cka_id: Vec<u8>,
        key: SigningHandle,
        algorithm: KeyAlgorithm,
        spki: Vec<u8>,
        plans: Plans,
    ) -> Self {
        Self { inner, token, cka_id, algorithm, spki, plans, handle: Cached::new(key) }
    }

    /// Where the key lives (as recorded).
    pub fn location(&self) -> String {
        location(&self.token, &self.cka_id)
    }

    /// Signs `n` times with the cached handle and nothing else of signd's
    /// (no lock, no lookup): the baseline for the benchmarks.
    pub fn raw_sign_loop(&self, scheme: SignatureScheme, message: &[u8], n: usize) -> Result<(), IpcError> {
        let plan = self.plans.get(scheme)?;
        let key = self.handle()?;
        for _ in 0..n {
            plan.sign_nss(&key.key, message).map_err(backend_err)?;
        }
        Ok(())
    }

    /// As [`raw_sign_loop`](Self::raw_sign_loop), with the calls signd makes:
    /// the token's C_SignInit and C_Sign in signd's own sessions where the
    /// module allows it (else the NSS call); returns whether it did.
    pub fn raw_sign_loop_direct(&self, scheme: SignatureScheme, message: &[u8], n: usize) -> Result<bool, IpcError> {
        let plan = self.plans.get(scheme)?;
        let key = self.handle()?;
        let _modules = modules_read();
        for _ in 0..n {
            plan.sign(&key, message).map_err(backend_err)?;
        }
        Ok(key.direct.is_some())
    }

    /// Test hook: one signature through NSS's PK11_SignWithMechanism, which
    /// `sign` replaces with signd's own sessions where the module allows.
    #[cfg(test)]
    pub fn sign_through_nss_for_test(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, IpcError> {
        let plan = self.plans.get(scheme)?;
        let key = self.handle()?;
        plan.sign_nss(&key.key, message).map_err(backend_err)
    }

    /// Which mechanism signs `scheme` (for logs and benchmarks).
    pub fn mechanism(&self, scheme: SignatureScheme) -> Option<(std::os::raw::c_ulong, bool)> {
        self.plans.get(scheme).ok().map(|p| (p.mechanism, p.hash.is_some()))
    }

    /// Test hook: makes this key's cached handle point at `other`'s key, as
    /// a stale handle would after a token was swapped, so that the next sign
    /// fails on the token and exercises the drop-and-find-again path.
    #[cfg(test)]
    pub fn poison_handle_for_test(&self, other: &NssKey) -> Result<(), IpcError> {
        let stale = other.handle()?;
        self.handle.replace(stale);
        Ok(())
    }

    fn handle(&self) -> Result<Arc<SigningHandle>, IpcError> {
        self.handle.get(|| self.find_again())
    }

    /// Looks the key up again on its token and checks it is the same key.
    fn find_again(&self) -> Result<SigningHandle, IpcError> {
        // (Inner::slot re-initialises a module that stopped answering.)
        let key = self.lookup()?;
        tracing::info!(location = %self.location(), "NSS key found again");
        Ok(key)
    }

    /// Finds the key on its token (logging in again if the token forgot the
    /// login), checks its public key, and makes the signing copy.
    fn lookup(&self) -> Result<SigningHandle, IpcError> {
        let slot = self.inner.slot(&self.token)?;
        let _modules = modules_read();
        let mut found = slot.find_key(&self.cka_id);
        // SAFETY: live slot.
        if found.is_none() && unsafe { PK11_NeedLogin(slot.0.as_ptr()) } != PR_FALSE {
            // The token may have dropped our login (reset, re-inserted) while
            // NSS still thinks we are logged in: log in again and look once more.
            self.inner.login(&slot, &self.token)?;
            found = slot.find_key(&self.cka_id);
        }
        let key = found.ok_or_else(|| {
            IpcError::new(ErrorKind::KeyUnavailable, format!("key {} is not on the token", self.location()))
        })?;
        let (_, spki) = key.public()?;
        if spki != self.spki {
            return Err(IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("the key found at {} is not the recorded key", self.location()),
            ));
        }
        Ok(SigningHandle::new(&slot, &self.token, slot.signing_copy(key)))
    }
}

impl SigningKey for NssKey {
    fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    fn spki(&self) -> &[u8] {
        &self.spki
    }

    fn sign(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, IpcError> {
        let plan = self.plans.get(scheme)?;
        self.handle.sign(|| self.location(), || self.find_again(), |key| plan.sign(key, message))
    }
}
