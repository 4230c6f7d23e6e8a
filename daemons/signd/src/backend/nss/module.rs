//! NSS's process-wide state: its one initialisation (on one database), the
//! PIN its password callback hands out, and the re-initialisation of PKCS #11
//! modules that stopped answering, with the lock that keeps it from running
//! under a signature and the count that makes older handles stale.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use signet_ipc::IpcError;

use super::backend_err;
use super::ffi::*;
use super::handles::Slot;

/// The database NSS was initialised with in this process.
static NSS_DATABASE: Mutex<Option<String>> = Mutex::new(None);
/// The PIN NSS's password callback hands out.
pub(super) static PIN: Mutex<Option<CString>> = Mutex::new(None);
/// How many times PKCS #11 modules were re-initialised in this process. A
/// key handle made before a restart names an object of the module's previous
/// life: the number may now name another object, so such a handle is never
/// used (nor destroyed) again.
pub(super) static RESTARTS: AtomicU64 = AtomicU64::new(0);
/// Signatures hold this for reading; a module restart (C_Finalize and
/// C_Initialize under every handle) holds it for writing.
pub(super) static MODULES: RwLock<()> = RwLock::new(());
/// When modules were last re-initialised (or tried to be).
static LAST_RESTART: Mutex<Option<Instant>> = Mutex::new(None);
/// At most one restart attempt per this interval: a token that stays away
/// costs each sign one failed lookup, not one module initialisation.
const RESTART_INTERVAL: Duration = Duration::from_secs(1);

/// Initialises NSS once for the process on `database`.
pub(super) fn init_nss(database: &str) -> Result<(), IpcError> {
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

/// Holds off module restarts while a key handle is in use (see [`MODULES`]).
pub(super) fn modules_read() -> RwLockReadGuard<'static, ()> {
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
pub(super) fn restart_dead_modules(known: Option<Slot>) -> bool {
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

/// Test hook: [`restart_dead_modules`] now, however recently it last ran;
/// returns whether signd's token (`known`) was initialised again.
#[cfg(test)]
pub(super) fn restart_now(known: Option<Slot>) -> bool {
    let before = RESTARTS.load(Ordering::Acquire);
    *LAST_RESTART.lock().unwrap_or_else(|p| p.into_inner()) = None;
    restart_dead_modules(known);
    RESTARTS.load(Ordering::Acquire) != before
}

/// The thread's last NSS error, as "WHAT failed: NAME: text".
pub(super) fn last_error(what: &str) -> String {
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
