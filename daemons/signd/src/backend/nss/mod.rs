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
//! mechanisms (see `pkcs11`); elsewhere they are `Unsupported`.
//!
//! Everything `unsafe` in signd's NSS support is in this module and its
//! submodules (`ffi`, `plan`, `pkcs11`).

mod cached;
mod ffi;
mod pkcs11;
mod plan;

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Public};
use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm, SignatureScheme};

use super::{Backend, NewKey, SigningKey};
use cached::{Cached, Stale};
use ffi::*;
use plan::Plans;

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

/// The NSS backend (one per process).
pub struct NssBackend {
    inner: Arc<Inner>,
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

struct Inner {
    database: String,
    /// The configured token, normalised ("internal" for softokn).
    token: String,
    pin_file: Option<PathBuf>,
    /// Set once a login was refused: signd does not retry a wrong PIN, which
    /// could lock the token.
    bad_pin: Mutex<Option<String>>,
    /// The configured token's slot, once found: after a failed module
    /// restart NSS disables the slot, and a disabled slot is no longer found
    /// by name, so this reference is how signd enables it again.
    known_slot: Mutex<Option<Slot>>,
}

/// The database NSS was initialised with in this process.
static NSS_DATABASE: Mutex<Option<String>> = Mutex::new(None);
/// The PIN NSS's password callback hands out.
static PIN: Mutex<Option<CString>> = Mutex::new(None);
/// How many times PKCS #11 modules were re-initialised in this process. A
/// key handle made before a restart names an object of the module's previous
/// life: the number may now name another object, so such a handle is never
/// used (nor destroyed) again.
static RESTARTS: AtomicU64 = AtomicU64::new(0);
/// Signatures hold this for reading; a module restart (C_Finalize and
/// C_Initialize under every handle) holds it for writing.
static MODULES: RwLock<()> = RwLock::new(());
/// When modules were last re-initialised (or tried to be).
static LAST_RESTART: Mutex<Option<Instant>> = Mutex::new(None);
/// At most one restart attempt per this interval: a token that stays away
/// costs each sign one failed lookup, not one module initialisation.
const RESTART_INTERVAL: Duration = Duration::from_secs(1);

impl NssBackend {
    /// Initialises NSS on `settings.database` (once per process) and reads
    /// the PIN file. A missing database or unreadable PIN file is an error
    /// here (signd does not start); a missing token or a wrong PIN is not:
    /// it is logged, and keys on that token are unavailable with the reason.
    pub fn open(settings: &NssSettings) -> Result<Self, IpcError> {
        let database = normalise_database(&settings.database);
        let dir = Path::new(database.strip_prefix("sql:").unwrap_or(&database));
        if !dir.join("cert9.db").is_file() || !dir.join("key4.db").is_file() {
            return Err(backend_err(format!(
                "NSS database {database}: {} has no cert9.db/key4.db (create it with `certutil -N -d {database}`)",
                dir.display()
            )));
        }
        let pin = match &settings.pin_file {
            None => None,
            Some(path) => Some(read_pin(path)?),
        };
        init_nss(&database)?;
        *PIN.lock().unwrap_or_else(|p| p.into_inner()) = pin;
        let token = match settings.token.as_str() {
            "" | "internal" => "internal".to_owned(),
            t => t.to_owned(),
        };
        let inner = Arc::new(Inner {
            database,
            token,
            pin_file: settings.pin_file.clone(),
            bad_pin: Mutex::new(None),
            known_slot: Mutex::new(None),
        });
        if let Err(e) = inner.slot(&inner.token) {
            tracing::error!(token = %inner.token, problem = %e.detail, "NSS token not usable; its keys are unavailable");
        }
        Ok(Self { inner })
    }

    /// The normalised database name (`sql:DIR`).
    pub fn database(&self) -> &str {
        &self.inner.database
    }

    /// Finds a key already on the configured token by nickname (CKA_LABEL) or
    /// CKA_ID (hex), and returns its location.
    pub fn locate(&self, nickname: Option<&str>, cka_id_hex: Option<&str>) -> Result<String, IpcError> {
        let token = self.inner.token.clone();
        let id = match (nickname, cka_id_hex) {
            (None, Some(hex)) => {
                hex::decode(hex).map_err(|e| IpcError::invalid(format!("cka_id {hex:?} is not hex: {e}")))?
            }
            (Some(nick), None) => {
                let slot = self.inner.slot(&token)?;
                slot.key_id_by_nickname(&token, nick)?
            }
            _ => return Err(IpcError::invalid("give exactly one of `nickname` and `cka_id`")),
        };
        Ok(location(&token, &id))
    }

    /// Loads a key with an explicit mechanism preference (benchmarks).
    pub fn load_key(&self, location: &str, preference: Preference) -> Result<NssKey, IpcError> {
        self.load_key_with(location, preference, true)
    }

    /// As [`load_key`](Self::load_key); `session_copy: false` signs with the
    /// token object itself rather than an in-token session copy (benchmarks).
    #[doc(hidden)]
    pub fn load_key_with(
        &self,
        location: &str,
        preference: Preference,
        session_copy: bool,
    ) -> Result<NssKey, IpcError> {
        let (token, id) = parse_location(location)?;
        let slot = self.inner.slot(&token)?;
        let key = slot.find_key(&id).ok_or_else(|| {
            IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("no private key with CKA_ID {} on token \"{token}\"", hex::encode(&id)),
            )
        })?;
        let (algorithm, spki) = key.public()?;
        let plans = Plans::new(&slot, algorithm, &spki, preference)?;
        let key = if session_copy { slot.signing_copy(key) } else { key };
        let key = {
            let _modules = modules_read();
            SigningHandle::new(&slot, &token, key)
        };
        Ok(NssKey::new(self.inner.clone(), token, id, key, algorithm, spki, plans))
    }

    /// Test hook: re-initialises the PKCS #11 modules now (forced, as after
    /// a fork), as signd does when its token's module stops answering, so
    /// that every key handle is stale; returns whether signd's token was
    /// initialised again.
    #[doc(hidden)]
    pub fn restart_modules_for_test(&self) -> bool {
        let before = RESTARTS.load(Ordering::Acquire);
        *LAST_RESTART.lock().unwrap_or_else(|p| p.into_inner()) = None;
        restart_dead_modules(self.inner.known_slot());
        RESTARTS.load(Ordering::Acquire) != before
    }
}

impl Backend for NssBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn generate(&self, id: &str, algorithm: KeyAlgorithm) -> Result<NewKey, IpcError> {
        let token = self.inner.token.clone();
        let slot = self.inner.slot(&token)?;
        if algorithm == KeyAlgorithm::Ed25519 {
            // Below NSS, on the token's own PKCS #11 functions (takes MODULES itself).
            let (key, location) = pkcs11::generate(&self.inner, &slot, &token, id)?;
            return Ok(NewKey { key: Arc::new(key), location });
        }
        let _modules = modules_read();
        let unsupported = || {
            IpcError::new(
                ErrorKind::Unsupported,
                format!("{algorithm} keys are unsupported by this token (NSS token \"{token}\")"),
            )
        };
        let nickname = CString::new(id).map_err(|_| IpcError::invalid("key id contains NUL"))?;
        let (private, public) = match algorithm {
            KeyAlgorithm::EcP256 | KeyAlgorithm::EcP384 | KeyAlgorithm::EcP521 => {
                if !slot.does(CKM_EC_KEY_PAIR_GEN) {
                    return Err(unsupported());
                }
                let params = curve_params(algorithm);
                let mut item = SECItem::borrowed(params);
                slot.generate(CKM_EC_KEY_PAIR_GEN, ptr::addr_of_mut!(item).cast())?
            }
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => {
                if !slot.does(CKM_RSA_PKCS_KEY_PAIR_GEN) {
                    return Err(unsupported());
                }
                let bits = match algorithm {
                    KeyAlgorithm::Rsa2048 => 2048,
                    KeyAlgorithm::Rsa3072 => 3072,
                    _ => 4096,
                };
                let mut params = PK11RSAGenParams { keySizeInBits: bits, pe: 65537 };
                slot.generate(CKM_RSA_PKCS_KEY_PAIR_GEN, ptr::addr_of_mut!(params).cast())?
            }
            // Ed25519 is made above, without NSS's key layer (NSS 3.87 has no
            // Edwards key type). ML-DSA is OpenSSL-only.
            KeyAlgorithm::Ed25519 | KeyAlgorithm::MlDsa44 | KeyAlgorithm::MlDsa65 | KeyAlgorithm::MlDsa87 => {
                return Err(unsupported());
            }
        };
        // From here on a failure must not leave an unrecorded key behind.
        let prepared = (|| {
            // SAFETY: both pointers are live key objects returned by
            // PK11_GenerateKeyPair; the nickname is a NUL-terminated string
            // NSS copies.
            let labelled = unsafe {
                PK11_SetPrivateKeyNickname(private.0.as_ptr(), nickname.as_ptr()) == SEC_SUCCESS
                    && PK11_SetPublicKeyNickname(public.0.as_ptr(), nickname.as_ptr()) == SEC_SUCCESS
            };
            if !labelled {
                return Err(backend_err(last_error("setting the key's nickname")));
            }
            let cka_id = private.cka_id()?;
            let (found, spki) = normalise_spki(&public.spki()?)?;
            if found != algorithm {
                return Err(backend_err(format!("the token made a {found} key, not {algorithm}")));
            }
            let plans = Plans::new(&slot, algorithm, &spki, Preference::Prehash)?;
            Ok((cka_id, spki, plans))
        })();
        match prepared {
            Ok((cka_id, spki, plans)) => {
                drop(public);
                let location = location(&token, &cka_id);
                let private = SigningHandle::new(&slot, &token, slot.signing_copy(private));
                let key = NssKey::new(self.inner.clone(), token, cka_id, private, algorithm, spki, plans);
                Ok(NewKey { key: Arc::new(key), location })
            }
            Err(e) => {
                public.delete_from_token();
                private.delete_from_token();
                Err(e)
            }
        }
    }

    fn import(&self, _id: &str, _algorithm: KeyAlgorithm, _pkcs8: &[u8]) -> Result<NewKey, IpcError> {
        // Importing would put key material that existed outside the token
        // onto it; generate on the token, or import with NSS tools
        // (pk12util) and name the key in [[nss.keys]].
        Err(IpcError::new(
            ErrorKind::Unsupported,
            "the nss backend does not import keys: generate on the token, or import with pk12util and list the key under [[nss.keys]]",
        ))
    }

    fn load(&self, location: &str) -> Result<Arc<dyn SigningKey>, IpcError> {
        let (token, id) = parse_location(location)?;
        let slot = self.inner.slot(&token)?;
        if let Some(key) = pkcs11::load(&self.inner, &slot, &token, &id)? {
            return Ok(Arc::new(key));
        }
        Ok(Arc::new(self.load_key(location, Preference::Prehash)?))
    }

    fn discard(&self, location: &str) {
        if let Ok((token, id)) = parse_location(location) {
            if let Ok(slot) = self.inner.slot(&token) {
                pkcs11::discard(&slot, &token, &id);
                // Session copies carry the same CKA_ID and may be found first:
                // delete until the token object is gone too.
                for _ in 0..8 {
                    match slot.find_key(&id) {
                        Some(key) => key.delete_from_token(),
                        None => break,
                    }
                }
            }
        }
    }
}

impl Inner {
    /// The token named `token`, present and logged in. If it cannot be used,
    /// modules that stopped answering are re-initialised (see
    /// [`restart_dead_modules`]) and the token is looked for once more.
    fn slot(&self, token: &str) -> Result<Slot, IpcError> {
        match self.find_slot(token) {
            Err(e) if self.may_recover() && restart_dead_modules(self.known_slot()) => {
                self.find_slot(token).map_err(|again| {
                    IpcError::new(
                        again.kind,
                        format!("{}; after re-initialising the module: {}", e.detail, again.detail),
                    )
                })
            }
            other => other,
        }
    }

    /// Whether a failure might go away by re-initialising modules: not once
    /// the PIN was refused (that needs a new PIN file and a restart).
    fn may_recover(&self) -> bool {
        self.bad_pin.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    fn known_slot(&self) -> Option<Slot> {
        self.known_slot.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(Slot::reference)
    }

    fn find_slot(&self, token: &str) -> Result<Slot, IpcError> {
        let unavailable = |detail: String| IpcError::new(ErrorKind::KeyUnavailable, detail);
        let slot = if token == "internal" {
            // SAFETY: returns a new reference to the internal key slot (or
            // NULL); Slot frees it.
            NonNull::new(unsafe { PK11_GetInternalKeySlot() })
        } else {
            let name = CString::new(token).map_err(|_| IpcError::invalid("token label contains NUL"))?;
            // SAFETY: `name` is NUL-terminated; the result is a new reference or NULL.
            NonNull::new(unsafe { PK11_FindSlotByName(name.as_ptr()) })
        };
        let slot =
            Slot(slot.ok_or_else(|| {
                unavailable(format!("token \"{token}\" not found in NSS database {}", self.database))
            })?);
        // SAFETY: slot is a live slot reference.
        if unsafe { PK11_IsPresent(slot.0.as_ptr()) } == PR_FALSE {
            return Err(unavailable(format!("token \"{token}\" is not present")));
        }
        // SAFETY: as above; NULL wincx is allowed.
        let need_login = unsafe {
            PK11_NeedLogin(slot.0.as_ptr()) != PR_FALSE && PK11_IsLoggedIn(slot.0.as_ptr(), ptr::null_mut()) == PR_FALSE
        };
        if need_login {
            self.login(&slot, token)?;
        }
        if token == self.token {
            self.known_slot.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| slot.reference());
        }
        Ok(slot)
    }

    fn login(&self, slot: &Slot, token: &str) -> Result<(), IpcError> {
        let unavailable = |detail: String| IpcError::new(ErrorKind::KeyUnavailable, detail);
        let mut bad = self.bad_pin.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(problem) = &*bad {
            return Err(unavailable(problem.clone()));
        }
        let Some(file) = &self.pin_file else {
            return Err(unavailable(format!("token \"{token}\" needs a PIN: set nss.pin_file")));
        };
        let pin = PIN.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default();
        // SAFETY: slot is live; `pin` is NUL-terminated and outlives the call.
        if unsafe { PK11_CheckUserPassword(slot.0.as_ptr(), pin.as_ptr()) } == SEC_SUCCESS {
            return Ok(());
        }
        // SAFETY: reads this thread's NSS error code.
        let code = unsafe { PORT_GetError() };
        if code == SEC_ERROR_BAD_PASSWORD {
            let problem = format!(
                "login to token \"{token}\" failed: wrong PIN in {} (not retried, to avoid locking the token; fix the file and restart signd)",
                file.display()
            );
            *bad = Some(problem.clone());
            // Nor may NSS try it on its own (its password callback).
            *PIN.lock().unwrap_or_else(|p| p.into_inner()) = None;
            tracing::error!(token, "{problem}");
            return Err(unavailable(problem));
        }
        Err(unavailable(last_error(&format!("login to token \"{token}\""))))
    }
}

/// A private key handle (`SECKEYPrivateKey*`), destroyed on drop (which
/// frees the handle, not the token object), and the value of [`RESTARTS`]
/// when it was made.
struct PrivateKey(NonNull<SECKEYPrivateKey>, u64);

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
    fn new(key: NonNull<SECKEYPrivateKey>) -> Self {
        Self(key, RESTARTS.load(Ordering::Acquire))
    }

    /// Whether modules were re-initialised since this handle was made.
    fn is_stale(&self) -> bool {
        self.1 != RESTARTS.load(Ordering::Acquire)
    }

    fn cka_id(&self) -> Result<Vec<u8>, IpcError> {
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

    fn delete_from_token(self) {
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
struct SigningHandle {
    /// Declared first: signd's sessions close before the copy is destroyed.
    direct: Option<pkcs11::Handle>,
    key: PrivateKey,
}

impl SigningHandle {
    /// Call with MODULES held for reading.
    fn new(slot: &Slot, label: &str, key: PrivateKey) -> Self {
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
    fn public(&self) -> Result<(KeyAlgorithm, Vec<u8>), IpcError> {
        // SAFETY: live key; the result is NULL or a new public key we own.
        let public = NonNull::new(unsafe { SECKEY_ConvertToPublicKey(self.0.as_ptr()) }).ok_or_else(|| {
            IpcError::new(ErrorKind::KeyUnavailable, last_error("reading the public half of the key"))
        })?;
        normalise_spki(&PublicKey(public).spki()?)
    }
}

/// A public key handle, destroyed on drop.
struct PublicKey(NonNull<SECKEYPublicKey>);

impl PublicKey {
    fn spki(&self) -> Result<Vec<u8>, IpcError> {
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

    fn delete_from_token(self) {
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
struct Slot(NonNull<PK11SlotInfo>);

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
    fn reference(&self) -> Slot {
        // SAFETY: live slot; PK11_ReferenceSlot bumps its reference count
        // (and returns the same pointer); the new Slot's Drop frees it.
        unsafe { PK11_ReferenceSlot(self.0.as_ptr()) };
        Slot(self.0)
    }

    fn does(&self, mechanism: CK_MECHANISM_TYPE) -> bool {
        // SAFETY: live slot.
        unsafe { PK11_DoesMechanism(self.0.as_ptr(), mechanism) != PR_FALSE }
    }

    /// A permanent, sensitive key pair on the token.
    fn generate(&self, mechanism: CK_MECHANISM_TYPE, params: *mut c_void) -> Result<(PrivateKey, PublicKey), IpcError> {
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
    fn signing_copy(&self, key: PrivateKey) -> PrivateKey {
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

    fn find_key(&self, cka_id: &[u8]) -> Option<PrivateKey> {
        let mut id = SECItem::borrowed(cka_id);
        // SAFETY: live slot; NSS only reads `id`; the result is NULL or a new handle.
        NonNull::new(unsafe { PK11_FindKeyByKeyID(self.0.as_ptr(), &mut id, ptr::null_mut()) }).map(PrivateKey::new)
    }

    /// The CKA_ID of the one private key labelled `nickname`, or else of the
    /// key of the certificate with that nickname on this token (certutil
    /// labels the certificate, not the key).
    fn key_id_by_nickname(&self, token: &str, nickname: &str) -> Result<Vec<u8>, IpcError> {
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
    fn new(
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
    #[doc(hidden)]
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
    #[doc(hidden)]
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

fn modules_read() -> RwLockReadGuard<'static, ()> {
    MODULES.read().unwrap_or_else(|p| p.into_inner())
}

/// Re-initialises (C_Finalize, C_Initialize, new sessions) the PKCS #11
/// modules that stopped answering C_GetSlotList, as NSS does after a fork
/// (`SECMOD_RestartModules(PR_FALSE)`; softokn and modules that still answer
/// are left alone). This is how a token behind a module that lost its device
/// or its server (a network HSM; SoftHSM2 behind p11-kit in the tests) comes
/// back without restarting signd: such a module answers every call with
/// CKR_DEVICE_ERROR until it is initialised again. A failed restart leaves
/// NSS's slots disabled; `known` (signd's token) is enabled again so that the
/// next attempt can find it. At most one attempt per [`RESTART_INTERVAL`];
/// returns whether this call tried.
fn restart_dead_modules(known: Option<Slot>) -> bool {
    {
        let mut last = LAST_RESTART.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < RESTART_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
    }
    let _exclusive = MODULES.write().unwrap_or_else(|p| p.into_inner());
    // SAFETY: live slot reference (if any).
    let series = || known.as_ref().map(|slot| unsafe { PK11_GetSlotSeries(slot.0.as_ptr()) });
    let before = series();
    // SAFETY: NSS is initialised (this runs after a failed lookup); no
    // signature is in progress (MODULES is held for writing), and handles
    // made before a restart are not used afterwards (RESTARTS, below).
    let mut status = unsafe { SECMOD_RestartModules(PR_FALSE) };
    if status == SEC_SUCCESS && known.is_some() && series() == before {
        // Nothing answered C_GetSlotList with an error, yet signd's token
        // cannot be used. p11-kit's client module, once its server is gone
        // and one re-initialisation failed, answers C_GetSlotList with
        // CKR_OK and everything else with an error: only a forced restart
        // (every module, softokn included; NSS supports it, for after a
        // fork) reconnects it.
        // SAFETY: as above.
        status = unsafe { SECMOD_RestartModules(PR_TRUE) };
    }
    let error = (status != SEC_SUCCESS).then(|| last_error("re-initialising PKCS #11 modules"));
    // NSS bumps the series of each slot it initialised again: if signd's
    // token was among them, every key handle made before is stale.
    if series() != before {
        RESTARTS.fetch_add(1, Ordering::AcqRel);
        tracing::warn!("re-initialised the token's PKCS #11 module, which had stopped answering");
    }
    if let Some(slot) = &known {
        // SAFETY: live slot reference.
        unsafe {
            if PK11_IsDisabled(slot.0.as_ptr()) != PR_FALSE
                && PK11_GetDisabledReason(slot.0.as_ptr()) == PK11_DIS_COULD_NOT_INIT_TOKEN
            {
                PK11_UserEnableSlot(slot.0.as_ptr());
            }
        }
    }
    tracing::debug!(?before, after = ?series(), ?error, "SECMOD_RestartModules");
    if let Some(e) = error {
        tracing::warn!(error = %e, "a PKCS #11 module that stopped answering could not be re-initialised yet");
    }
    true
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

fn read_pin(path: &Path) -> Result<CString, IpcError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| backend_err(format!("cannot read NSS PIN file {}: {e}", path.display())))?;
    let pin = text.lines().next().unwrap_or("");
    CString::new(pin).map_err(|_| backend_err(format!("NSS PIN file {} contains a NUL byte", path.display())))
}

/// Initialises NSS once for the process on `database`.
fn init_nss(database: &str) -> Result<(), IpcError> {
    let mut initialised = NSS_DATABASE.lock().unwrap_or_else(|p| p.into_inner());
    match initialised.as_deref() {
        Some(db) if db == database => return Ok(()),
        Some(db) => {
            return Err(backend_err(format!(
                "NSS is already initialised on {db} in this process; cannot also open {database}"
            )))
        }
        None => {}
    }
    let db = CString::new(database).map_err(|_| IpcError::invalid("NSS database name contains NUL"))?;
    let empty = c"";
    // SAFETY: all strings are NUL-terminated and outlive the call; this runs
    // once per process, under the NSS_DATABASE lock.
    let status = unsafe {
        NSS_Initialize(db.as_ptr(), empty.as_ptr(), empty.as_ptr(), c"secmod.db".as_ptr(), NSS_INIT_NOROOTINIT)
    };
    if status != SEC_SUCCESS {
        return Err(backend_err(last_error(&format!("opening NSS database {database}"))));
    }
    // SAFETY: registers a callback with the signature NSS expects.
    unsafe { PK11_SetPasswordFunc(password_callback) };
    *initialised = Some(database.to_owned());
    Ok(())
}

/// NSS's password callback: the PIN from the PIN file, once per attempt
/// (never on a retry, so a wrong PIN is not tried in a loop).
unsafe extern "C" fn password_callback(_slot: *mut PK11SlotInfo, retry: PRBool, _arg: *mut c_void) -> *mut c_char {
    if retry != PR_FALSE {
        return ptr::null_mut();
    }
    let pin = PIN.lock().unwrap_or_else(|p| p.into_inner());
    match pin.as_ref() {
        // SAFETY: NSS frees the returned copy with PORT_Free.
        Some(pin) => unsafe { PORT_Strdup(pin.as_ptr()) },
        None => ptr::null_mut(),
    }
}

/// The thread's last NSS error, as "WHAT failed: NAME: text".
fn last_error(what: &str) -> String {
    // SAFETY: PORT_GetError reads thread-local state; the name and text are
    // static strings owned by NSPR's error tables (or NULL).
    unsafe {
        let code = PORT_GetError();
        let text = |p: *const c_char| (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned());
        let name = text(PR_ErrorToName(code)).unwrap_or_else(|| format!("error {code}"));
        match text(PR_ErrorToString(code, 0)) {
            Some(t) if !t.is_empty() && t != "Unknown code" => format!("{what} failed: {name}: {t}"),
            _ => format!("{what} failed: {name}"),
        }
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
