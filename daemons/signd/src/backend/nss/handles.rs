//! The RAII handles on NSS objects: private and public keys, the handle a
//! key signs with, and slots. Each frees (or, for a stale key, leaks) what
//! it holds exactly once, on drop.

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering;

use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm};

use super::cached::Stale;
use super::ffi::*;
use super::module::{last_error, RESTARTS};
use super::{backend_err, item_bytes, normalise_spki, pkcs11};

/// A private key handle (`SECKEYPrivateKey*`), destroyed on drop (which
/// frees the handle, not the token object), and the value of [`RESTARTS`]
/// when it was made.
pub(super) struct PrivateKey(pub(super) NonNull<SECKEYPrivateKey>, u64);

// SAFETY: a SECKEYPrivateKey is an immutable record (slot reference, object
// handle, key type) once created; NSS signs with it from any thread, taking
// a fresh PKCS #11 session per operation (or the slot's monitor when the
// module is not thread-safe), which is how NSS's own servers (libssl) share
// one server key between connections. signd never mutates the struct after
// creation; it only passes the pointer to PK11_SignWithMechanism and reads
// its object handle (PK11_GetObjectHandle), and the handle is destroyed
// once, by Drop, when the last reference goes.
unsafe impl Send for PrivateKey {}
// SAFETY: see Send: concurrent use is read-only.
unsafe impl Sync for PrivateKey {}

impl PrivateKey {
    pub(super) fn new(key: NonNull<SECKEYPrivateKey>) -> Self {
        Self(key, RESTARTS.load(Ordering::Acquire))
    }

    /// Whether modules were re-initialised since this handle was made.
    pub(super) fn is_stale(&self) -> bool {
        self.1 != RESTARTS.load(Ordering::Acquire)
    }

    pub(super) fn cka_id(&self) -> Result<Vec<u8>, IpcError> {
        // SAFETY: live key; the result is NULL or an item we free below.
        let item = unsafe { PK11_GetLowLevelKeyIDForPrivateKey(self.0.as_ptr()) };
        if item.is_null() {
            return Err(backend_err(last_error("reading CKA_ID")));
        }
        // SAFETY: `item` is a valid SECItem whose data holds len bytes; it is
        // copied out before being freed with its container.
        unsafe {
            let id = item_bytes(&*item);
            SECITEM_FreeItem(item, PR_TRUE);
            Ok(id)
        }
    }

    pub(super) fn delete_from_token(self) {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: PK11_DeleteTokenPrivateKey destroys the token object and
        // the handle; `self` is forgotten so Drop does not free it again.
        unsafe {
            PK11_DeleteTokenPrivateKey(p, PR_TRUE);
        }
    }
}

impl Drop for PrivateKey {
    fn drop(&mut self) {
        if self.is_stale() {
            // Destroying a session copy calls C_DestroyObject with its
            // number, which after a module restart may name another key's
            // new copy: leak the small handle instead (once per key per
            // restart).
            return;
        }
        // SAFETY: we own this handle and destroy it exactly once.
        unsafe { SECKEY_DestroyPrivateKey(self.0.as_ptr()) }
    }
}

/// What a key signs with: its session copy, and on a token of a PKCS #11
/// module other than NSS's own softokn, signd's own sessions to sign in
/// ([`pkcs11::Handle`] over the copy's object). NSS's
/// PK11_SignWithMechanism opens and closes a session for every signature,
/// which adds real work to every P-256 signature on SoftHSM2; softokn's
/// sessions cost nothing, and through signd its keys sign faster with
/// NSS's call.
pub(super) struct SigningHandle {
    /// Declared first: signd's sessions close before the copy is destroyed.
    pub(super) direct: Option<pkcs11::Handle>,
    pub(super) key: PrivateKey,
}

impl SigningHandle {
    /// Call with MODULES held for reading.
    pub(super) fn new(slot: &Slot, label: &str, key: PrivateKey) -> Self {
        // SAFETY: live slot.
        if unsafe { PK11_IsInternal(slot.0.as_ptr()) } != PR_FALSE {
            return Self { direct: None, key };
        }
        // SAFETY: live key handle; type 1 (PK11_TypePrivKey) matches it; the
        // slot out pointer may be NULL.
        let object = unsafe { PK11_GetObjectHandle(1, key.0.as_ptr().cast(), ptr::null_mut()) };
        let direct = match pkcs11::Token::module(slot, label) {
            Ok(token) if object != CK_INVALID_HANDLE => Some(pkcs11::Handle::borrowing(token, object)),
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, "signing with NSS's call, a session per signature");
                None
            }
        };
        Self { direct, key }
    }
}

impl Stale for SigningHandle {
    fn is_stale(&self) -> bool {
        self.key.is_stale() || self.direct.as_ref().is_some_and(|d| d.is_stale())
    }
}

impl PrivateKey {
    /// The key's algorithm and SubjectPublicKeyInfo, derived from the token.
    pub(super) fn public(&self) -> Result<(KeyAlgorithm, Vec<u8>), IpcError> {
        // SAFETY: live key; the result is NULL or a new public key we own.
        let public = NonNull::new(unsafe { SECKEY_ConvertToPublicKey(self.0.as_ptr()) }).ok_or_else(|| {
            IpcError::new(ErrorKind::KeyUnavailable, last_error("reading the public half of the key"))
        })?;
        normalise_spki(&PublicKey(public).spki()?)
    }
}

/// A public key handle, destroyed on drop.
pub(super) struct PublicKey(pub(super) NonNull<SECKEYPublicKey>);

impl PublicKey {
    pub(super) fn spki(&self) -> Result<Vec<u8>, IpcError> {
        // SAFETY: live key; the result is NULL or an item we free below.
        let item = unsafe { SECKEY_EncodeDERSubjectPublicKeyInfo(self.0.as_ptr()) };
        if item.is_null() {
            return Err(backend_err(last_error("encoding the public key")));
        }
        // SAFETY: `item` is a valid SECItem; copied, then freed with its container.
        unsafe {
            let der = item_bytes(&*item);
            SECITEM_FreeItem(item, PR_TRUE);
            Ok(der)
        }
    }

    pub(super) fn delete_from_token(self) {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: PK11_DeleteTokenPublicKey destroys the token object and the
        // handle; `self` is forgotten so Drop does not free it again.
        unsafe {
            PK11_DeleteTokenPublicKey(p);
        }
    }
}

impl Drop for PublicKey {
    fn drop(&mut self) {
        // SAFETY: we own this handle and destroy it exactly once.
        unsafe { SECKEY_DestroyPublicKey(self.0.as_ptr()) }
    }
}

/// A slot reference, freed on drop.
pub(super) struct Slot(pub(super) NonNull<PK11SlotInfo>);

// SAFETY: a PK11SlotInfo is reference-counted with atomic operations and NSS
// uses slots from any thread (its own locks guard the mutable parts); signd
// only passes the pointer to NSS and frees its reference once, in Drop.
unsafe impl Send for Slot {}
// SAFETY: see Send.
unsafe impl Sync for Slot {}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: we own this reference and free it exactly once.
        unsafe { PK11_FreeSlot(self.0.as_ptr()) }
    }
}

impl Slot {
    /// Another reference to the same slot.
    pub(super) fn reference(&self) -> Slot {
        // SAFETY: live slot; PK11_ReferenceSlot bumps its reference count
        // (and returns the same pointer); the new Slot's Drop frees it.
        unsafe { PK11_ReferenceSlot(self.0.as_ptr()) };
        Slot(self.0)
    }

    pub(super) fn does(&self, mechanism: CK_MECHANISM_TYPE) -> bool {
        // SAFETY: live slot.
        unsafe { PK11_DoesMechanism(self.0.as_ptr(), mechanism) != PR_FALSE }
    }

    /// A permanent, sensitive key pair on the token.
    pub(super) fn generate(
        &self,
        mechanism: CK_MECHANISM_TYPE,
        params: *mut c_void,
    ) -> Result<(PrivateKey, PublicKey), IpcError> {
        let mut public = ptr::null_mut();
        // SAFETY: live slot; `params` points at the parameter structure the
        // mechanism expects (SECKEYECParams / PK11RSAGenParams), alive for the
        // call; `public` receives a new public key or stays NULL.
        let private = unsafe {
            PK11_GenerateKeyPair(self.0.as_ptr(), mechanism, params, &mut public, PR_TRUE, PR_TRUE, ptr::null_mut())
        };
        let error = last_error("generating the key pair");
        match (NonNull::new(private).map(PrivateKey::new), NonNull::new(public).map(PublicKey)) {
            (Some(private), Some(public)) => Ok((private, public)),
            (private, public) => {
                if let Some(public) = public {
                    public.delete_from_token();
                }
                if let Some(private) = private {
                    private.delete_from_token();
                }
                Err(backend_err(error))
            }
        }
    }

    /// The handle signd signs with: an in-token session copy of the key
    /// (C_CopyObject; the key stays on the token, sensitive), or the token
    /// object itself if the token refuses to copy it. Tokens that keep
    /// permanent objects in a database (softokn reads and decrypts the key
    /// from key4.db on every operation) sign much faster from a
    /// session object.
    pub(super) fn signing_copy(&self, key: PrivateKey) -> PrivateKey {
        // SAFETY: live slot and key; the result is NULL or a new handle to a
        // session object NSS destroys with the handle.
        match NonNull::new(unsafe { PK11_CopyTokenPrivKeyToSessionPrivKey(self.0.as_ptr(), key.0.as_ptr()) }) {
            Some(copy) => PrivateKey::new(copy),
            None => {
                tracing::debug!(error = %last_error("copying the key to a session object"), "signing with the token object");
                key
            }
        }
    }

    pub(super) fn find_key(&self, cka_id: &[u8]) -> Option<PrivateKey> {
        let mut id = SECItem::borrowed(cka_id);
        // SAFETY: live slot; NSS only reads `id`; the result is NULL or a new handle.
        NonNull::new(unsafe { PK11_FindKeyByKeyID(self.0.as_ptr(), &mut id, ptr::null_mut()) }).map(PrivateKey::new)
    }

    /// The CKA_ID of the one private key labelled `nickname`, or else of the
    /// key of the certificate with that nickname on this token (certutil
    /// labels the certificate, not the key).
    pub(super) fn key_id_by_nickname(&self, token: &str, nickname: &str) -> Result<Vec<u8>, IpcError> {
        match self.key_id_by_label(nickname) {
            Err(e) if e.kind == ErrorKind::KeyUnavailable => {}
            other => return other,
        }
        let full = if token == "internal" || nickname.contains(':') {
            nickname.to_owned()
        } else {
            format!("{token}:{nickname}")
        };
        let full = CString::new(full).map_err(|_| IpcError::invalid("nickname contains NUL"))?;
        // SAFETY: NUL-terminated name; the result is NULL or a certificate we destroy below.
        let cert = unsafe { PK11_FindCertFromNickname(full.as_ptr(), ptr::null_mut()) };
        if cert.is_null() {
            return Err(IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("no private key or certificate named {nickname:?} on token \"{token}\""),
            ));
        }
        // SAFETY: live slot and certificate; the key is NULL or a new handle.
        let key = unsafe {
            let key = PK11_FindPrivateKeyFromCert(self.0.as_ptr(), cert, ptr::null_mut());
            CERT_DestroyCertificate(cert);
            NonNull::new(key).map(PrivateKey::new)
        };
        key.ok_or_else(|| {
            IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("certificate {nickname:?} has no private key on token \"{token}\""),
            )
        })?
        .cka_id()
    }

    /// The CKA_ID of the one private key whose CKA_LABEL is `nickname`.
    fn key_id_by_label(&self, nickname: &str) -> Result<Vec<u8>, IpcError> {
        let nick = CString::new(nickname).map_err(|_| IpcError::invalid("nickname contains NUL"))?;
        // SAFETY: live slot; NSS only reads the nickname; the list is NULL or ours.
        let list = unsafe { PK11_ListPrivKeysInSlot(self.0.as_ptr(), nick.as_ptr().cast_mut(), ptr::null_mut()) };
        let mut ids = Vec::new();
        if !list.is_null() {
            // SAFETY: `list` is a valid SECKEYPrivateKeyList: a circular
            // PRCList whose nodes start with their links; each node's key is
            // a live handle owned by the list until it is destroyed below.
            unsafe {
                let head = ptr::addr_of_mut!((*list).list);
                let mut node = (*head).next;
                while node != head {
                    let key = (*node.cast::<SECKEYPrivateKeyListNode>()).key;
                    let item = PK11_GetLowLevelKeyIDForPrivateKey(key);
                    if !item.is_null() {
                        ids.push(item_bytes(&*item));
                        SECITEM_FreeItem(item, PR_TRUE);
                    }
                    node = (*node).next;
                }
                SECKEY_DestroyPrivateKeyList(list);
            }
        }
        match ids.len() {
            1 => Ok(ids.remove(0)),
            0 => {
                Err(IpcError::new(ErrorKind::KeyUnavailable, format!("no private key named {nickname:?} on the token")))
            }
            n => Err(IpcError::invalid(format!(
                "{n} private keys are named {nickname:?}; name the key by cka_id instead"
            ))),
        }
    }
}
