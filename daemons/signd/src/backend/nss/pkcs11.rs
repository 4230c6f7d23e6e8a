//! The token's own PKCS #11 functions, below NSS's key layer: Ed25519 keys
//! (`ed25519`) on tokens whose module has CKM_EC_EDWARDS_KEY_PAIR_GEN and
//! CKM_EDDSA (SoftHSM2), and the signing sessions of the other NSS keys on
//! external modules ([`Handle::borrowing`]).
//!
//! NSS's PK11_SignWithMechanism opens a PKCS #11 session for each signature
//! and closes it after. On SoftHSM2 that adds real work to every P-256
//! signature, and more with two signing threads. The other NSS keys on
//! tokens of external modules therefore sign here too, with the object of
//! NSS's session copy, in a pool of signd's own sessions (softokn's keys
//! keep NSS's call: its sessions cost nothing, and through signd its keys
//! sign faster that way).
//!
//! signd calls the token's module itself, through the function list NSS
//! loaded and initialised (`PK11_GetModule`: the public `SECMODModule` of
//! secmodt.h, whose layout is checked at run time against
//! `PK11_GetModuleID`), on the slot NSS found (`PK11_GetSlotID`). signd opens
//! its own sessions there, and NSS's login covers them: PKCS #11 login state
//! belongs to the token and the application, not to one session (all sessions
//! an application has with a token share its login; PKCS #11 v2.40 §5.6).
//!
//! Sessions: a PKCS #11 session must not be used by two threads at once, so
//! each cached key handle owns a small pool of sessions: a signature takes an
//! idle one (or opens another), signs (C_SignInit + C_Sign with CKM_EDDSA and
//! no parameters: pure Ed25519), and puts it back. No lock is held across the
//! token call except MODULES for reading, and the pool grows to the number of
//! signatures that ever ran at once with the key (at most signd's signing
//! threads plus its socket thread). As for the other keys, a handle signs with
//! an in-token session copy of the key (C_CopyObject into the handle's first
//! session; closing that session destroys the copy).
//!
//! Restarts: a handle records [`RESTARTS`] and the slot's series (NSS bumps it
//! whenever it initialises the token again, e.g. after re-insertion). A handle
//! from before either changed is stale: it is never used again, and neither
//! are its sessions closed nor its copy destroyed (their numbers may by then
//! name NSS's own sessions and objects); the key is found again. The numbers
//! of a handle whose token reported a lost session or device are left alone
//! the same way.

use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, TryLockError};

use signet_ipc::{ErrorKind, IpcError};

use super::cached::Stale;
use super::ffi::*;
use super::{backend_err, Slot, MODULES, RESTARTS};

const SIGNATURE_LEN: usize = 64;

/// A key's signing handle: the token's functions, the key object (a session
/// copy, or the token object if the token refuses to copy it, or for NSS's
/// keys the object of NSS's own session copy) and the idle sessions to sign
/// in.
pub(super) struct Handle {
    token: Token,
    key: CK_OBJECT_HANDLE,
    idle: Mutex<Vec<CK_SESSION_HANDLE>>,
    /// The token reported a lost session or device: leave its numbers alone.
    lost: AtomicBool,
}

impl Handle {
    /// A handle signing with a session copy of `key` made in `session`,
    /// which becomes the handle's first session.
    pub(super) fn new(token: Token, session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE) -> Self {
        let no = CK_FALSE;
        let mut copy = Template::default().bool(CKA_TOKEN, &no);
        let key = match token.copy(session, key, &mut copy) {
            Ok(copy) => copy,
            Err(e) => {
                tracing::debug!(error = %e, "signing with the token object");
                key
            }
        };
        Self { token, key, idle: Mutex::new(vec![session]), lost: AtomicBool::new(false) }
    }

    /// A handle signing with `key` as it is: an object signd does not own
    /// (NSS's session copy of one of its keys), which stays when the handle
    /// goes. Sessions are opened as signatures need them.
    pub(super) fn borrowing(token: Token, key: CK_OBJECT_HANDLE) -> Self {
        Self { token, key, idle: Mutex::new(Vec::new()), lost: AtomicBool::new(false) }
    }

    /// Whether modules were re-initialised, or NSS initialised the token
    /// again, since this handle was made.
    pub(super) fn is_stale(&self) -> bool {
        self.token.restarts != RESTARTS.load(Ordering::Acquire) || self.token.series() != self.token.series
    }

    /// A pure Ed25519 signature (CKM_EDDSA without parameters) of `message`
    /// (as [`Handle::sign_with`]).
    pub(super) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, P11Error> {
        let signature = self.sign_with(&Mechanism::new(CKM_EDDSA, None), message, SIGNATURE_LEN)?;
        if signature.len() != SIGNATURE_LEN {
            return Err(P11Error::Other(format!("the token returned a {}-byte Ed25519 signature", signature.len())));
        }
        Ok(signature)
    }

    /// Signs `input` with `mechanism` in an idle session, into at most
    /// `max_len` bytes (the caller holds MODULES for reading and has checked
    /// that the handle is not stale).
    pub(super) fn sign_with(
        &self,
        mechanism: &Mechanism<'_>,
        input: &[u8],
        max_len: usize,
    ) -> Result<Vec<u8>, P11Error> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let session = match idle {
            Some(session) => session,
            None => self.token.open_session().map_err(|e| self.failed(e))?,
        };
        match self.token.sign(session, self.key, mechanism, input, max_len) {
            Ok(signature) => {
                self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(session);
                Ok(signature)
            }
            Err(e) => {
                let e = self.failed(e);
                if !self.lost.load(Ordering::Acquire) {
                    // The session may still hold an unfinished operation.
                    let _ = self.token.close_session(session);
                }
                Err(e)
            }
        }
    }

    fn failed(&self, e: P11Error) -> P11Error {
        if e.is_lost() {
            self.lost.store(true, Ordering::Release);
        }
        e
    }
}

impl Stale for Handle {
    fn is_stale(&self) -> bool {
        Handle::is_stale(self)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.lost.load(Ordering::Acquire) {
            return;
        }
        // Not while a module restart is under way: its numbers are about to be stale.
        let _modules = match MODULES.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if self.is_stale() {
            return;
        }
        // Closing the session that holds the session copy destroys the copy.
        for session in self.idle.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = self.token.close_session(session);
        }
    }
}

/// A session opened for one lookup or generation: closed on drop unless kept.
pub(super) struct Session<'a> {
    token: &'a Token,
    pub(super) handle: CK_SESSION_HANDLE,
}

impl<'a> Session<'a> {
    pub(super) fn open(token: &'a Token) -> Result<Self, P11Error> {
        Ok(Self { token, handle: token.open_session()? })
    }

    /// The session, now owned by the caller.
    pub(super) fn keep(self) -> CK_SESSION_HANDLE {
        let handle = self.handle;
        std::mem::forget(self);
        handle
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let _ = self.token.close_session(self.handle);
    }
}

/// A token's own PKCS #11 functions on the slot NSS found, and the module
/// generation and slot series they belong to.
pub(super) struct Token {
    /// Keeps the slot, and with it the module, loaded.
    slot: Slot,
    functions: NonNull<CK_FUNCTION_LIST>,
    slot_id: CK_SLOT_ID,
    restarts: u64,
    series: c_int,
}

// SAFETY: the function list is the module's static table, which NSS never
// changes while the module is loaded (the Slot reference keeps it loaded);
// PKCS #11 functions of a module NSS initialised for threads (isThreadSafe,
// checked in Token::of) may be called from any thread, and signd uses each
// session from one thread at a time (Handle's pool; lookups use their own).
unsafe impl Send for Token {}
// SAFETY: see Send; Token has no interior mutability.
unsafe impl Sync for Token {}

impl Token {
    /// Whether NSS lists the Edwards mechanisms for `slot`.
    pub(super) fn has_mechanisms(slot: &Slot) -> bool {
        slot.does(CKM_EC_EDWARDS_KEY_PAIR_GEN) && slot.does(CKM_EDDSA)
    }

    /// The module behind `slot` (call with MODULES held for reading);
    /// `Unsupported` if it cannot make and sign with Ed25519 keys.
    pub(super) fn of(slot: &Slot, label: &str) -> Result<Self, IpcError> {
        let unsupported = |why: &str| {
            IpcError::new(
                ErrorKind::Unsupported,
                format!("ed25519 keys are unsupported by this token (NSS token \"{label}\"{why})"),
            )
        };
        if !Self::has_mechanisms(slot) {
            return Err(unsupported(""));
        }
        Self::module(slot, label).map_err(|e| match e.kind {
            ErrorKind::Unsupported => unsupported(": its PKCS #11 module is not thread-safe"),
            _ => e,
        })
    }

    /// The module behind `slot`, for signing in signd's own sessions (call
    /// with MODULES held for reading); `Unsupported` if NSS did not
    /// initialise it for threads.
    pub(super) fn module(slot: &Slot, label: &str) -> Result<Self, IpcError> {
        let p = slot.0.as_ptr();
        // SAFETY: live slot; the module pointer stays valid while the slot
        // reference is held, and the id is a plain field read.
        let (module, module_id) = unsafe { (PK11_GetModule(p), PK11_GetModuleID(p)) };
        let module = NonNull::new(module).ok_or_else(|| backend_err("the token's slot has no PKCS #11 module"))?;
        // SAFETY: `module` is NSS's live SECMODModule; only the leading
        // fields declared in ffi are read, and the module id confirms that
        // they are laid out as declared.
        let (declared_id, thread_safe, functions) = unsafe {
            let m = module.as_ref();
            (m.moduleID, m.isThreadSafe, m.functionList)
        };
        if declared_id != module_id {
            return Err(backend_err(format!(
                "NSS's SECMODModule is not laid out as signd expects (module id {declared_id}, NSS says {module_id})"
            )));
        }
        if thread_safe == PR_FALSE {
            return Err(IpcError::new(
                ErrorKind::Unsupported,
                format!("the PKCS #11 module of NSS token \"{label}\" is not thread-safe"),
            ));
        }
        let functions =
            NonNull::new(functions.cast_mut()).ok_or_else(|| backend_err("the token's module has no function list"))?;
        // SAFETY: the function list of a loaded module is a valid, static table.
        let version = unsafe { functions.as_ref().version.major };
        if !(2..=3).contains(&version) {
            return Err(backend_err(format!("the token's module has a PKCS #11 {version}.x function list")));
        }
        // SAFETY: live slot; plain field reads.
        let (slot_id, series) = unsafe { (PK11_GetSlotID(p), PK11_GetSlotSeries(p)) };
        Ok(Self { slot: slot.reference(), functions, slot_id, restarts: RESTARTS.load(Ordering::Acquire), series })
    }

    /// The slot's current series.
    fn series(&self) -> c_int {
        // SAFETY: live slot reference.
        unsafe { PK11_GetSlotSeries(self.slot.0.as_ptr()) }
    }

    fn functions(&self) -> &CK_FUNCTION_LIST {
        // SAFETY: see Token::of: a valid table for as long as `self.slot` is held.
        unsafe { self.functions.as_ref() }
    }

    fn open_session(&self) -> Result<CK_SESSION_HANDLE, P11Error> {
        let f = function(self.functions().C_OpenSession, "C_OpenSession")?;
        let mut session = CK_INVALID_HANDLE;
        // SAFETY: the module's C_OpenSession; no application pointer or
        // callback; `session` is a valid out pointer.
        let rv = unsafe { f(self.slot_id, CKF_SERIAL_SESSION | CKF_RW_SESSION, ptr::null_mut(), None, &mut session) };
        check("C_OpenSession", rv)?;
        Ok(session)
    }

    fn close_session(&self, session: CK_SESSION_HANDLE) -> Result<(), P11Error> {
        let f = function(self.functions().C_CloseSession, "C_CloseSession")?;
        // SAFETY: the module's C_CloseSession on a session signd opened and
        // no other thread uses.
        check("C_CloseSession", unsafe { f(session) })
    }

    pub(super) fn generate(
        &self,
        session: CK_SESSION_HANDLE,
        public: &mut Template<'_>,
        private: &mut Template<'_>,
    ) -> Result<(CK_OBJECT_HANDLE, CK_OBJECT_HANDLE), P11Error> {
        let f = function(self.functions().C_GenerateKeyPair, "C_GenerateKeyPair")?;
        let mut mechanism =
            CK_MECHANISM { mechanism: CKM_EC_EDWARDS_KEY_PAIR_GEN, pParameter: ptr::null_mut(), ulParameterLen: 0 };
        let (mut public_key, mut private_key) = (CK_INVALID_HANDLE, CK_INVALID_HANDLE);
        // SAFETY: the module's C_GenerateKeyPair in signd's session; the
        // templates point at values alive for the call (Template's
        // lifetime), which the module only reads; the handles are valid out
        // pointers.
        let rv = unsafe {
            f(
                session,
                &mut mechanism,
                public.as_mut_ptr(),
                public.len(),
                private.as_mut_ptr(),
                private.len(),
                &mut public_key,
                &mut private_key,
            )
        };
        check("C_GenerateKeyPair", rv)?;
        Ok((public_key, private_key))
    }

    /// The token objects of `class`, of Edwards key type, with CKA_ID `cka_id`.
    pub(super) fn find_key(
        &self,
        session: CK_SESSION_HANDLE,
        class: CK_ULONG,
        cka_id: &[u8],
    ) -> Result<Vec<CK_OBJECT_HANDLE>, P11Error> {
        let (yes, key_type) = (CK_TRUE, CKK_EC_EDWARDS);
        // CKA_TOKEN: never the session copies, which carry the same CKA_ID.
        let mut template = Template::default()
            .ulong(CKA_CLASS, &class)
            .ulong(CKA_KEY_TYPE, &key_type)
            .bool(CKA_TOKEN, &yes)
            .bytes(CKA_ID, cka_id);
        let fns = self.functions();
        let (init, find, last) = (
            function(fns.C_FindObjectsInit, "C_FindObjectsInit")?,
            function(fns.C_FindObjects, "C_FindObjects")?,
            function(fns.C_FindObjectsFinal, "C_FindObjectsFinal")?,
        );
        // SAFETY: the module's C_FindObjectsInit in signd's session; the
        // template's values outlive the call and are only read.
        check("C_FindObjectsInit", unsafe { init(session, template.as_mut_ptr(), template.len()) })?;
        let mut objects = Vec::new();
        let found = loop {
            let mut batch = [CK_INVALID_HANDLE; 8];
            let mut count: CK_ULONG = 0;
            // SAFETY: `batch` has room for the 8 handles asked for; `count` is a valid out pointer.
            let rv = unsafe { find(session, batch.as_mut_ptr(), batch.len() as CK_ULONG, &mut count) };
            if let Err(e) = check("C_FindObjects", rv) {
                break Err(e);
            }
            let count = (count as usize).min(batch.len());
            objects.extend_from_slice(&batch[..count]);
            if count == 0 || objects.len() >= 64 {
                break Ok(());
            }
        };
        // SAFETY: ends the search begun above in the same session.
        let finished = check("C_FindObjectsFinal", unsafe { last(session) });
        found.and(finished)?;
        Ok(objects)
    }

    /// One attribute's value.
    pub(super) fn attribute(
        &self,
        session: CK_SESSION_HANDLE,
        object: CK_OBJECT_HANDLE,
        kind: CK_ATTRIBUTE_TYPE,
    ) -> Result<Vec<u8>, P11Error> {
        let f = function(self.functions().C_GetAttributeValue, "C_GetAttributeValue")?;
        let mut attribute = CK_ATTRIBUTE { type_: kind, pValue: ptr::null_mut(), ulValueLen: 0 };
        // SAFETY: with a NULL pValue the module only writes the length.
        check("C_GetAttributeValue", unsafe { f(session, object, &mut attribute, 1) })?;
        let len = attribute.ulValueLen as usize;
        if len > 4096 {
            return Err(P11Error::Other(format!("attribute {kind:#x} is {len} bytes long")));
        }
        let mut value = vec![0u8; len];
        attribute.pValue = value.as_mut_ptr().cast();
        // SAFETY: pValue points at `len` writable bytes, as ulValueLen says.
        check("C_GetAttributeValue", unsafe { f(session, object, &mut attribute, 1) })?;
        value.truncate((attribute.ulValueLen as usize).min(len));
        Ok(value)
    }

    pub(super) fn set_attributes(
        &self,
        session: CK_SESSION_HANDLE,
        object: CK_OBJECT_HANDLE,
        template: &mut Template<'_>,
    ) -> Result<(), P11Error> {
        let f = function(self.functions().C_SetAttributeValue, "C_SetAttributeValue")?;
        // SAFETY: the template's values outlive the call and are only read.
        check("C_SetAttributeValue", unsafe { f(session, object, template.as_mut_ptr(), template.len()) })
    }

    fn copy(
        &self,
        session: CK_SESSION_HANDLE,
        object: CK_OBJECT_HANDLE,
        template: &mut Template<'_>,
    ) -> Result<CK_OBJECT_HANDLE, P11Error> {
        let f = function(self.functions().C_CopyObject, "C_CopyObject")?;
        let mut copy = CK_INVALID_HANDLE;
        // SAFETY: the template's values outlive the call and are only read;
        // `copy` is a valid out pointer.
        check("C_CopyObject", unsafe { f(session, object, template.as_mut_ptr(), template.len(), &mut copy) })?;
        Ok(copy)
    }

    pub(super) fn destroy(&self, session: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) -> Result<(), P11Error> {
        let f = function(self.functions().C_DestroyObject, "C_DestroyObject")?;
        // SAFETY: the module's C_DestroyObject on an object signd found or made.
        check("C_DestroyObject", unsafe { f(session, object) })
    }

    /// C_SignInit with `mechanism` and `key`, then C_Sign of `input` into at
    /// most `max_len` bytes.
    fn sign(
        &self,
        session: CK_SESSION_HANDLE,
        key: CK_OBJECT_HANDLE,
        mechanism: &Mechanism<'_>,
        input: &[u8],
        max_len: usize,
    ) -> Result<Vec<u8>, P11Error> {
        let fns = self.functions();
        let (init, sign) = (function(fns.C_SignInit, "C_SignInit")?, function(fns.C_Sign, "C_Sign")?);
        let mut mechanism = mechanism.raw();
        // SAFETY: the module's C_SignInit in a session only this thread uses
        // now; the mechanism's parameter (if any) lives for the call (the
        // Mechanism's lifetime) and is only read.
        check("C_SignInit", unsafe { init(session, &mut mechanism, key) })?;
        let mut signature = vec![0u8; max_len];
        let mut len = max_len as CK_ULONG;
        // SAFETY: `input` is valid for its length and only read;
        // `signature` has room for `len` bytes, which the module updates.
        let rv = unsafe {
            sign(session, input.as_ptr().cast_mut(), input.len() as CK_ULONG, signature.as_mut_ptr(), &mut len)
        };
        check("C_Sign", rv)?;
        signature.truncate((len as usize).min(max_len));
        Ok(signature)
    }
}

/// A signing mechanism and its parameter, borrowed for one call.
pub(super) struct Mechanism<'a> {
    mechanism: CK_MECHANISM_TYPE,
    parameter: Option<&'a CK_RSA_PKCS_PSS_PARAMS>,
}

impl<'a> Mechanism<'a> {
    pub(super) fn new(mechanism: CK_MECHANISM_TYPE, parameter: Option<&'a CK_RSA_PKCS_PSS_PARAMS>) -> Self {
        Self { mechanism, parameter }
    }

    fn raw(&self) -> CK_MECHANISM {
        match self.parameter {
            None => CK_MECHANISM { mechanism: self.mechanism, pParameter: ptr::null_mut(), ulParameterLen: 0 },
            Some(p) => CK_MECHANISM {
                mechanism: self.mechanism,
                pParameter: ptr::from_ref(p).cast_mut().cast::<c_void>(),
                ulParameterLen: std::mem::size_of::<CK_RSA_PKCS_PSS_PARAMS>() as CK_ULONG,
            },
        }
    }
}

/// A PKCS #11 attribute template whose values live for `'a`.
#[derive(Default)]
pub(super) struct Template<'a> {
    attributes: Vec<CK_ATTRIBUTE>,
    values: PhantomData<&'a [u8]>,
}

impl<'a> Template<'a> {
    pub(super) fn bytes(mut self, kind: CK_ATTRIBUTE_TYPE, value: &'a [u8]) -> Self {
        self.attributes.push(CK_ATTRIBUTE {
            type_: kind,
            pValue: value.as_ptr().cast_mut().cast::<c_void>(),
            ulValueLen: value.len() as CK_ULONG,
        });
        self
    }

    pub(super) fn bool(self, kind: CK_ATTRIBUTE_TYPE, value: &'a CK_BBOOL) -> Self {
        self.bytes(kind, std::slice::from_ref(value))
    }

    fn ulong(mut self, kind: CK_ATTRIBUTE_TYPE, value: &'a CK_ULONG) -> Self {
        self.attributes.push(CK_ATTRIBUTE {
            type_: kind,
            pValue: ptr::from_ref(value).cast_mut().cast::<c_void>(),
            ulValueLen: std::mem::size_of::<CK_ULONG>() as CK_ULONG,
        });
        self
    }

    fn as_mut_ptr(&mut self) -> *mut CK_ATTRIBUTE {
        self.attributes.as_mut_ptr()
    }

    fn len(&self) -> CK_ULONG {
        self.attributes.len() as CK_ULONG
    }
}

/// A failed PKCS #11 call, or a result signd cannot use.
#[derive(Debug)]
pub(super) enum P11Error {
    Call(&'static str, CK_RV),
    Other(String),
}

impl P11Error {
    /// Whether the token lost the session or its device, so that the module
    /// may have closed the session already (and may reuse its number).
    fn is_lost(&self) -> bool {
        matches!(
            self,
            P11Error::Call(
                _,
                CKR_SESSION_HANDLE_INVALID
                    | CKR_SESSION_CLOSED
                    | CKR_DEVICE_ERROR
                    | CKR_DEVICE_REMOVED
                    | CKR_TOKEN_NOT_PRESENT
                    | CKR_CRYPTOKI_NOT_INITIALIZED
            )
        )
    }
}

impl fmt::Display for P11Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            P11Error::Call(function, rv) => match ckr_name(*rv) {
                Some(name) => write!(f, "{function} failed: {name}"),
                None => write!(f, "{function} failed: CKR {rv:#x}"),
            },
            P11Error::Other(detail) => f.write_str(detail),
        }
    }
}

impl From<P11Error> for String {
    fn from(e: P11Error) -> String {
        e.to_string()
    }
}

fn check(function: &'static str, rv: CK_RV) -> Result<(), P11Error> {
    if rv == CKR_OK {
        Ok(())
    } else {
        Err(P11Error::Call(function, rv))
    }
}

/// A function-list entry, or an error if the module left it NULL.
fn function<F>(entry: Option<F>, name: &'static str) -> Result<F, P11Error> {
    entry.ok_or(P11Error::Call(name, CKR_FUNCTION_NOT_SUPPORTED))
}

fn ckr_name(rv: CK_RV) -> Option<&'static str> {
    Some(match rv {
        CKR_HOST_MEMORY => "CKR_HOST_MEMORY",
        CKR_GENERAL_ERROR => "CKR_GENERAL_ERROR",
        CKR_FUNCTION_FAILED => "CKR_FUNCTION_FAILED",
        CKR_ARGUMENTS_BAD => "CKR_ARGUMENTS_BAD",
        CKR_ATTRIBUTE_READ_ONLY => "CKR_ATTRIBUTE_READ_ONLY",
        CKR_ATTRIBUTE_TYPE_INVALID => "CKR_ATTRIBUTE_TYPE_INVALID",
        CKR_ATTRIBUTE_VALUE_INVALID => "CKR_ATTRIBUTE_VALUE_INVALID",
        CKR_DEVICE_ERROR => "CKR_DEVICE_ERROR",
        CKR_DEVICE_MEMORY => "CKR_DEVICE_MEMORY",
        CKR_DEVICE_REMOVED => "CKR_DEVICE_REMOVED",
        CKR_FUNCTION_NOT_SUPPORTED => "CKR_FUNCTION_NOT_SUPPORTED",
        CKR_KEY_HANDLE_INVALID => "CKR_KEY_HANDLE_INVALID",
        CKR_KEY_TYPE_INCONSISTENT => "CKR_KEY_TYPE_INCONSISTENT",
        CKR_KEY_FUNCTION_NOT_PERMITTED => "CKR_KEY_FUNCTION_NOT_PERMITTED",
        CKR_MECHANISM_INVALID => "CKR_MECHANISM_INVALID",
        CKR_OBJECT_HANDLE_INVALID => "CKR_OBJECT_HANDLE_INVALID",
        CKR_OPERATION_ACTIVE => "CKR_OPERATION_ACTIVE",
        CKR_SESSION_CLOSED => "CKR_SESSION_CLOSED",
        CKR_SESSION_COUNT => "CKR_SESSION_COUNT",
        CKR_SESSION_HANDLE_INVALID => "CKR_SESSION_HANDLE_INVALID",
        CKR_TEMPLATE_INCOMPLETE => "CKR_TEMPLATE_INCOMPLETE",
        CKR_TEMPLATE_INCONSISTENT => "CKR_TEMPLATE_INCONSISTENT",
        CKR_TOKEN_NOT_PRESENT => "CKR_TOKEN_NOT_PRESENT",
        CKR_USER_NOT_LOGGED_IN => "CKR_USER_NOT_LOGGED_IN",
        CKR_DOMAIN_PARAMS_INVALID => "CKR_DOMAIN_PARAMS_INVALID",
        CKR_CURVE_NOT_SUPPORTED => "CKR_CURVE_NOT_SUPPORTED",
        CKR_BUFFER_TOO_SMALL => "CKR_BUFFER_TOO_SMALL",
        CKR_CRYPTOKI_NOT_INITIALIZED => "CKR_CRYPTOKI_NOT_INITIALIZED",
        _ => return None,
    })
}
