//! A key's signing handle, cached until a module restart makes it stale or
//! the token fails a signature with it; then the key is found again. Shared
//! by keys NSS holds ([`super::NssKey`]) and Ed25519 keys signed through the
//! token's own functions ([`super::ed25519::EdKey`]).

use std::fmt::Display;
use std::sync::{Arc, RwLock};

use signet_ipc::{ErrorKind, IpcError};

/// A handle that a module restart (or NSS initialising the token again) can
/// leave pointing at nothing.
pub(super) trait Stale {
    fn is_stale(&self) -> bool;
}

/// The cached handle; None after a failure until the key is found again.
pub(super) struct Cached<H>(RwLock<Option<Arc<H>>>);

/// One signing attempt: the signature, or the token's error and the handle
/// that failed (to be dropped from the cache).
type Attempt<H, E> = Result<Vec<u8>, (E, Arc<H>)>;

impl<H: Stale> Cached<H> {
    pub(super) fn new(handle: H) -> Self {
        Self(RwLock::new(Some(Arc::new(handle))))
    }

    /// The cached handle, or, if there is none or it is stale, the one `find`
    /// makes (looking the key up on its token), cached from then on.
    pub(super) fn get(&self, find: impl FnOnce() -> Result<H, IpcError>) -> Result<Arc<H>, IpcError> {
        if let Some(h) = self.0.read().unwrap_or_else(|p| p.into_inner()).as_ref().filter(|h| !h.is_stale()) {
            return Ok(h.clone());
        }
        let mut cached = self.0.write().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = cached.as_ref().filter(|h| !h.is_stale()) {
            return Ok(h.clone());
        }
        let handle = Arc::new(find()?);
        *cached = Some(handle.clone());
        Ok(handle)
    }

    /// Test hook: caches `handle` in place of the key's own.
    #[cfg(test)]
    pub(super) fn replace(&self, handle: Arc<H>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }

    /// Signs with `sign` on the cached handle. If the token fails it (it may
    /// have gone away or lost its sessions), drops the handle, finds the key
    /// again with `find` and tries once more before giving up.
    pub(super) fn sign<E: Display>(
        &self,
        location: impl Fn() -> String,
        find: impl Fn() -> Result<H, IpcError>,
        sign: impl Fn(&H) -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, IpcError> {
        let (first, failed) = match self.sign_once(&location, &find, &sign)? {
            Ok(sig) => return Ok(sig),
            Err(failure) => failure,
        };
        tracing::warn!(location = %location(), error = %first, "NSS sign failed; looking the key up again");
        self.invalidate(&failed);
        drop(failed);
        match self
            .sign_once(&location, &find, &sign)
            .map_err(|e| IpcError::new(e.kind, format!("signing failed: {first}; then {}", e.detail)))?
        {
            Ok(sig) => Ok(sig),
            Err((e, _)) => Err(IpcError::new(ErrorKind::Backend, format!("signing failed: {e}"))),
        }
    }

    /// Signs with the cached handle under the module lock, unless a module
    /// restart made the handle stale meanwhile (then it is looked up again).
    fn sign_once<E>(
        &self,
        location: &impl Fn() -> String,
        find: &impl Fn() -> Result<H, IpcError>,
        sign: &impl Fn(&H) -> Result<Vec<u8>, E>,
    ) -> Result<Attempt<H, E>, IpcError> {
        for _ in 0..3 {
            let handle = self.get(find)?;
            let _modules = super::modules_read();
            if handle.is_stale() {
                continue;
            }
            return Ok(sign(&handle).map_err(|e| (e, handle.clone())));
        }
        Err(IpcError::new(
            ErrorKind::KeyUnavailable,
            format!("key {}: the token's module keeps restarting", location()),
        ))
    }

    fn invalidate(&self, failed: &Arc<H>) {
        let mut cached = self.0.write().unwrap_or_else(|p| p.into_inner());
        if cached.as_ref().is_some_and(|h| Arc::ptr_eq(h, failed)) {
            *cached = None;
        }
    }
}
