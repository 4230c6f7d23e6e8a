//! The NSS backend: opening NSS on the configured database, finding tokens
//! and logging in to them, and generating, locating and loading keys.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm};

use super::ffi::*;
use super::handles::{SigningHandle, Slot};
use super::key::NssKey;
use super::module::{init_nss, last_error, modules_read, restart_dead_modules, PIN};
use super::plan::Plans;
use super::{
    backend_err, curve_params, ed25519, location, normalise_database, normalise_spki, parse_location, NssSettings,
    Preference, NAME,
};
use crate::backend::{Backend, NewKey, SigningKey};

/// The NSS backend (one per process).
pub struct NssBackend {
    inner: Arc<Inner>,
}

/// What the backend and its keys share: the database, the configured token
/// and how to log in to it.
pub(super) struct Inner {
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

impl NssBackend {
    /// Initialises NSS on `settings.database` (once per process) and reads
    /// the PIN file. A missing database or unreadable PIN file is an error
    /// here (signd does not start); a missing token or a wrong PIN is not:
    /// it is logged, and keys on that token are unavailable with the reason.
    pub fn open(settings: &NssSettings) -> Result<Self, IpcError> {
        let pin = settings.check()?;
        let database = normalise_database(&settings.database);
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
        self.load_nss_key(location, preference, true)
    }

    /// Test hook: as [`load_key`](Self::load_key); `session_copy: false`
    /// signs with the token object itself rather than an in-token session
    /// copy.
    #[cfg(test)]
    pub fn load_key_with(
        &self,
        location: &str,
        preference: Preference,
        session_copy: bool,
    ) -> Result<NssKey, IpcError> {
        self.load_nss_key(location, preference, session_copy)
    }

    fn load_nss_key(&self, location: &str, preference: Preference, session_copy: bool) -> Result<NssKey, IpcError> {
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
    #[cfg(test)]
    pub fn restart_modules_for_test(&self) -> bool {
        super::module::restart_now(self.inner.known_slot())
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
            let (key, location) = ed25519::generate(&self.inner, &slot, &token, id)?;
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
        if let Some(key) = ed25519::load(&self.inner, &slot, &token, &id)? {
            return Ok(Arc::new(key));
        }
        Ok(Arc::new(self.load_key(location, Preference::Prehash)?))
    }

    fn discard(&self, location: &str) {
        if let Ok((token, id)) = parse_location(location) {
            if let Ok(slot) = self.inner.slot(&token) {
                ed25519::discard(&slot, &token, &id);
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
    pub(super) fn slot(&self, token: &str) -> Result<Slot, IpcError> {
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

    pub(super) fn known_slot(&self) -> Option<Slot> {
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

    pub(super) fn login(&self, slot: &Slot, token: &str) -> Result<(), IpcError> {
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

impl NssSettings {
    /// What [`NssBackend::open`] refuses before it touches NSS: a database
    /// without its files, an unreadable PIN file. `--check-config` runs it too.
    /// Returns the PIN, if a file names one.
    pub fn check(&self) -> Result<Option<CString>, IpcError> {
        let database = normalise_database(&self.database);
        let dir = Path::new(database.strip_prefix("sql:").unwrap_or(&database));
        if !dir.join("cert9.db").is_file() || !dir.join("key4.db").is_file() {
            return Err(backend_err(format!(
                "NSS database {database}: {} has no cert9.db/key4.db (create it with `certutil -N -d {database}`)",
                dir.display()
            )));
        }
        self.pin_file.as_deref().map(read_pin).transpose()
    }
}

fn read_pin(path: &Path) -> Result<CString, IpcError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| backend_err(format!("cannot read NSS PIN file {}: {e}", path.display())))?;
    let pin = text.lines().next().unwrap_or("");
    CString::new(pin).map_err(|_| backend_err(format!("NSS PIN file {} contains a NUL byte", path.display())))
}
