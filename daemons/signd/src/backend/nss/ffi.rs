//! Hand-written declarations of the NSS 3.x and NSPR functions the backend
//! uses (nss.h, pk11pub.h, keyhi.h, cryptohi.h, secdig.h, sechash.h,
//! secitem.h, prerror.h), and of the PKCS #11 structures the Ed25519 keys
//! need below NSS (secmodt.h, pkcs11t.h, pkcs11f.h). Only what is needed;
//! values checked against the Debian 12 headers of NSS 3.87 (stable ABI since
//! NSS 3.x).
#![allow(non_camel_case_types, non_snake_case, missing_docs, dead_code)]

use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_void};

pub type SECStatus = c_int;
pub const SEC_SUCCESS: SECStatus = 0;
pub type PRBool = c_int;
pub const PR_TRUE: PRBool = 1;
pub const PR_FALSE: PRBool = 0;
pub type PRErrorCode = i32;
pub type CK_ULONG = c_ulong;
pub type CK_MECHANISM_TYPE = CK_ULONG;
pub type CK_ATTRIBUTE_TYPE = CK_ULONG;
pub type CK_RV = CK_ULONG;
pub type CK_SLOT_ID = CK_ULONG;
pub type CK_SESSION_HANDLE = CK_ULONG;
pub type CK_OBJECT_HANDLE = CK_ULONG;
pub type CK_FLAGS = CK_ULONG;
pub type CK_BBOOL = u8;
pub type SECMODModuleID = c_ulong;

/// `SECItem` (seccomon.h).
#[repr(C)]
pub struct SECItem {
    pub type_: c_int,
    pub data: *mut u8,
    pub len: c_uint,
}

impl SECItem {
    /// An item pointing at `bytes`; NSS only reads through it.
    pub fn borrowed(bytes: &[u8]) -> Self {
        Self { type_: 0, data: bytes.as_ptr().cast_mut(), len: bytes.len() as c_uint }
    }

    /// An item pointing at a writable buffer.
    pub fn out(buf: &mut [u8]) -> Self {
        Self { type_: 0, data: buf.as_mut_ptr(), len: buf.len() as c_uint }
    }

    /// An empty item for NSS to fill (it allocates `data`).
    pub fn empty() -> Self {
        Self { type_: 0, data: std::ptr::null_mut(), len: 0 }
    }
}

/// Opaque NSS objects.
#[repr(C)]
pub struct PK11SlotInfo {
    _private: [u8; 0],
}
#[repr(C)]
pub struct SECKEYPrivateKey {
    _private: [u8; 0],
}
#[repr(C)]
pub struct SECKEYPublicKey {
    _private: [u8; 0],
}
#[repr(C)]
pub struct CERTCertificate {
    _private: [u8; 0],
}
#[repr(C)]
pub struct SGNDigestInfo {
    _private: [u8; 0],
}

/// `PRCList` (prclist.h).
#[repr(C)]
pub struct PRCList {
    pub next: *mut PRCList,
    pub prev: *mut PRCList,
}

/// `SECKEYPrivateKeyListNode` (keythi.h).
#[repr(C)]
pub struct SECKEYPrivateKeyListNode {
    pub links: PRCList,
    pub key: *mut SECKEYPrivateKey,
}

/// `SECKEYPrivateKeyList` (keythi.h).
#[repr(C)]
pub struct SECKEYPrivateKeyList {
    pub list: PRCList,
    pub arena: *mut c_void,
}

/// `PK11RSAGenParams` (pk11pub.h).
#[repr(C)]
pub struct PK11RSAGenParams {
    pub keySizeInBits: c_int,
    pub pe: c_ulong,
}

/// `CK_RSA_PKCS_PSS_PARAMS` (pkcs11t.h).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct CK_RSA_PKCS_PSS_PARAMS {
    pub hashAlg: CK_MECHANISM_TYPE,
    pub mgf: CK_ULONG,
    pub sLen: CK_ULONG,
}

/// `CK_VERSION` (pkcs11t.h).
#[repr(C)]
pub struct CK_VERSION {
    pub major: u8,
    pub minor: u8,
}

/// `CK_ATTRIBUTE` (pkcs11t.h).
#[repr(C)]
pub struct CK_ATTRIBUTE {
    pub type_: CK_ATTRIBUTE_TYPE,
    pub pValue: *mut c_void,
    pub ulValueLen: CK_ULONG,
}

/// `CK_MECHANISM` (pkcs11t.h).
#[repr(C)]
pub struct CK_MECHANISM {
    pub mechanism: CK_MECHANISM_TYPE,
    pub pParameter: *mut c_void,
    pub ulParameterLen: CK_ULONG,
}

/// The leading fields of `SECMODModule` (secmodt.h `struct SECMODModuleStr`),
/// up to `isThreadSafe`. A public NSS structure whose fields NSS only ever
/// appends to; signd reads it through the pointer PK11_GetModule returns and
/// never allocates, copies or writes one. Checked at run time: `moduleID`
/// must equal PK11_GetModuleID of the slot.
#[repr(C)]
pub struct SECMODModule {
    pub arena: *mut c_void,
    pub internal: PRBool,
    pub loaded: PRBool,
    pub isFIPS: PRBool,
    pub dllName: *mut c_char,
    pub commonName: *mut c_char,
    pub library: *mut c_void,
    /// The module's `CK_FUNCTION_LIST` (a 3.0 list begins with the same fields).
    pub functionList: *const CK_FUNCTION_LIST,
    pub refLock: *mut c_void,
    pub refCount: c_int,
    pub slots: *mut *mut PK11SlotInfo,
    pub slotCount: c_int,
    pub slotInfo: *mut c_void,
    pub slotInfoCount: c_int,
    pub moduleID: SECMODModuleID,
    pub isThreadSafe: PRBool,
}

/// A function-list entry signd never calls (pointer-sized, may be NULL).
pub type CK_UNUSED = Option<unsafe extern "C" fn()>;

/// `CK_FUNCTION_LIST` (pkcs11t.h, entries in pkcs11f.h order) up to
/// C_GenerateKeyPair: the PKCS #11 v2.x layout, which 3.0 lists extend at the
/// end. Only the functions signd calls are typed.
#[repr(C)]
pub struct CK_FUNCTION_LIST {
    pub version: CK_VERSION,
    pub C_Initialize: CK_UNUSED,
    pub C_Finalize: CK_UNUSED,
    pub C_GetInfo: CK_UNUSED,
    pub C_GetFunctionList: CK_UNUSED,
    pub C_GetSlotList: CK_UNUSED,
    pub C_GetSlotInfo: CK_UNUSED,
    pub C_GetTokenInfo: CK_UNUSED,
    pub C_GetMechanismList: CK_UNUSED,
    pub C_GetMechanismInfo: CK_UNUSED,
    pub C_InitToken: CK_UNUSED,
    pub C_InitPIN: CK_UNUSED,
    pub C_SetPIN: CK_UNUSED,
    pub C_OpenSession: Option<
        unsafe extern "C" fn(
            slot: CK_SLOT_ID,
            flags: CK_FLAGS,
            application: *mut c_void,
            notify: CK_UNUSED,
            session: *mut CK_SESSION_HANDLE,
        ) -> CK_RV,
    >,
    pub C_CloseSession: Option<unsafe extern "C" fn(session: CK_SESSION_HANDLE) -> CK_RV>,
    pub C_CloseAllSessions: CK_UNUSED,
    pub C_GetSessionInfo: CK_UNUSED,
    pub C_GetOperationState: CK_UNUSED,
    pub C_SetOperationState: CK_UNUSED,
    pub C_Login: CK_UNUSED,
    pub C_Logout: CK_UNUSED,
    pub C_CreateObject: CK_UNUSED,
    pub C_CopyObject: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            object: CK_OBJECT_HANDLE,
            template: *mut CK_ATTRIBUTE,
            count: CK_ULONG,
            new_object: *mut CK_OBJECT_HANDLE,
        ) -> CK_RV,
    >,
    pub C_DestroyObject: Option<unsafe extern "C" fn(session: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) -> CK_RV>,
    pub C_GetObjectSize: CK_UNUSED,
    pub C_GetAttributeValue: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            object: CK_OBJECT_HANDLE,
            template: *mut CK_ATTRIBUTE,
            count: CK_ULONG,
        ) -> CK_RV,
    >,
    pub C_SetAttributeValue: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            object: CK_OBJECT_HANDLE,
            template: *mut CK_ATTRIBUTE,
            count: CK_ULONG,
        ) -> CK_RV,
    >,
    pub C_FindObjectsInit:
        Option<unsafe extern "C" fn(session: CK_SESSION_HANDLE, template: *mut CK_ATTRIBUTE, count: CK_ULONG) -> CK_RV>,
    pub C_FindObjects: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            objects: *mut CK_OBJECT_HANDLE,
            max: CK_ULONG,
            count: *mut CK_ULONG,
        ) -> CK_RV,
    >,
    pub C_FindObjectsFinal: Option<unsafe extern "C" fn(session: CK_SESSION_HANDLE) -> CK_RV>,
    pub C_EncryptInit: CK_UNUSED,
    pub C_Encrypt: CK_UNUSED,
    pub C_EncryptUpdate: CK_UNUSED,
    pub C_EncryptFinal: CK_UNUSED,
    pub C_DecryptInit: CK_UNUSED,
    pub C_Decrypt: CK_UNUSED,
    pub C_DecryptUpdate: CK_UNUSED,
    pub C_DecryptFinal: CK_UNUSED,
    pub C_DigestInit: CK_UNUSED,
    pub C_Digest: CK_UNUSED,
    pub C_DigestUpdate: CK_UNUSED,
    pub C_DigestKey: CK_UNUSED,
    pub C_DigestFinal: CK_UNUSED,
    pub C_SignInit: Option<
        unsafe extern "C" fn(session: CK_SESSION_HANDLE, mechanism: *mut CK_MECHANISM, key: CK_OBJECT_HANDLE) -> CK_RV,
    >,
    pub C_Sign: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            data: *mut u8,
            data_len: CK_ULONG,
            signature: *mut u8,
            signature_len: *mut CK_ULONG,
        ) -> CK_RV,
    >,
    pub C_SignUpdate: CK_UNUSED,
    pub C_SignFinal: CK_UNUSED,
    pub C_SignRecoverInit: CK_UNUSED,
    pub C_SignRecover: CK_UNUSED,
    pub C_VerifyInit: CK_UNUSED,
    pub C_Verify: CK_UNUSED,
    pub C_VerifyUpdate: CK_UNUSED,
    pub C_VerifyFinal: CK_UNUSED,
    pub C_VerifyRecoverInit: CK_UNUSED,
    pub C_VerifyRecover: CK_UNUSED,
    pub C_DigestEncryptUpdate: CK_UNUSED,
    pub C_DecryptDigestUpdate: CK_UNUSED,
    pub C_SignEncryptUpdate: CK_UNUSED,
    pub C_DecryptVerifyUpdate: CK_UNUSED,
    pub C_GenerateKey: CK_UNUSED,
    pub C_GenerateKeyPair: Option<
        unsafe extern "C" fn(
            session: CK_SESSION_HANDLE,
            mechanism: *mut CK_MECHANISM,
            public_template: *mut CK_ATTRIBUTE,
            public_count: CK_ULONG,
            private_template: *mut CK_ATTRIBUTE,
            private_count: CK_ULONG,
            public_key: *mut CK_OBJECT_HANDLE,
            private_key: *mut CK_OBJECT_HANDLE,
        ) -> CK_RV,
    >,
}

pub type PK11PasswordFunc =
    unsafe extern "C" fn(slot: *mut PK11SlotInfo, retry: PRBool, arg: *mut c_void) -> *mut c_char;

// NSS_Initialize flags (nss.h).
pub const NSS_INIT_NOROOTINIT: u32 = 0x10;

// PK11ObjectType (secmodt.h).
pub const PK11_TYPE_PRIV_KEY: c_int = 1;
pub const PK11_TYPE_PUB_KEY: c_int = 2;

// HASH_HashType (hasht.h).
pub const HASH_ALG_SHA256: c_int = 4;
pub const HASH_ALG_SHA384: c_int = 5;
pub const HASH_ALG_SHA512: c_int = 6;

// SECOidTag (secoidt.h).
pub const SEC_OID_SHA256: c_int = 191;
pub const SEC_OID_SHA384: c_int = 192;
pub const SEC_OID_SHA512: c_int = 193;

// PKCS #11 (pkcs11t.h).
pub const CK_INVALID_HANDLE: CK_ULONG = 0;
pub const CK_TRUE: CK_BBOOL = 1;
pub const CK_FALSE: CK_BBOOL = 0;
pub const CKF_RW_SESSION: CK_FLAGS = 0x2;
pub const CKF_SERIAL_SESSION: CK_FLAGS = 0x4;
pub const CKO_PUBLIC_KEY: CK_ULONG = 0x2;
pub const CKO_PRIVATE_KEY: CK_ULONG = 0x3;
pub const CKA_CLASS: CK_ATTRIBUTE_TYPE = 0x0;
pub const CKA_TOKEN: CK_ATTRIBUTE_TYPE = 0x1;
pub const CKA_PRIVATE: CK_ATTRIBUTE_TYPE = 0x2;
pub const CKA_SENSITIVE: CK_ATTRIBUTE_TYPE = 0x103;
pub const CKA_SIGN: CK_ATTRIBUTE_TYPE = 0x108;
pub const CKA_VERIFY: CK_ATTRIBUTE_TYPE = 0x10a;
pub const CKA_EXTRACTABLE: CK_ATTRIBUTE_TYPE = 0x162;
pub const CKA_ID: CK_ATTRIBUTE_TYPE = 0x102;
pub const CKA_LABEL: CK_ATTRIBUTE_TYPE = 0x3;
pub const CKA_KEY_TYPE: CK_ATTRIBUTE_TYPE = 0x100;
pub const CKA_MODULUS: CK_ATTRIBUTE_TYPE = 0x120;
pub const CKA_PUBLIC_EXPONENT: CK_ATTRIBUTE_TYPE = 0x122;
pub const CKA_EC_PARAMS: CK_ATTRIBUTE_TYPE = 0x180;
pub const CKA_EC_POINT: CK_ATTRIBUTE_TYPE = 0x181;
pub const CKK_RSA: CK_ULONG = 0x0;
pub const CKK_EC: CK_ULONG = 0x3;
pub const CKK_EC_EDWARDS: CK_ULONG = 0x40;
pub const CKM_RSA_PKCS_KEY_PAIR_GEN: CK_MECHANISM_TYPE = 0x0;
pub const CKM_RSA_PKCS: CK_MECHANISM_TYPE = 0x1;
pub const CKM_RSA_PKCS_PSS: CK_MECHANISM_TYPE = 0xd;
pub const CKM_SHA256_RSA_PKCS: CK_MECHANISM_TYPE = 0x40;
pub const CKM_SHA384_RSA_PKCS: CK_MECHANISM_TYPE = 0x41;
pub const CKM_SHA512_RSA_PKCS: CK_MECHANISM_TYPE = 0x42;
pub const CKM_SHA256_RSA_PKCS_PSS: CK_MECHANISM_TYPE = 0x43;
pub const CKM_SHA384_RSA_PKCS_PSS: CK_MECHANISM_TYPE = 0x44;
pub const CKM_SHA512_RSA_PKCS_PSS: CK_MECHANISM_TYPE = 0x45;
pub const CKM_SHA256: CK_MECHANISM_TYPE = 0x250;
pub const CKM_SHA384: CK_MECHANISM_TYPE = 0x260;
pub const CKM_SHA512: CK_MECHANISM_TYPE = 0x270;
pub const CKM_EC_KEY_PAIR_GEN: CK_MECHANISM_TYPE = 0x1040;
pub const CKM_ECDSA: CK_MECHANISM_TYPE = 0x1041;
pub const CKM_ECDSA_SHA256: CK_MECHANISM_TYPE = 0x1044;
pub const CKM_ECDSA_SHA384: CK_MECHANISM_TYPE = 0x1045;
pub const CKM_ECDSA_SHA512: CK_MECHANISM_TYPE = 0x1046;
pub const CKM_EC_EDWARDS_KEY_PAIR_GEN: CK_MECHANISM_TYPE = 0x1055;
pub const CKM_EDDSA: CK_MECHANISM_TYPE = 0x1057;
pub const CKR_OK: CK_RV = 0x0;
pub const CKR_HOST_MEMORY: CK_RV = 0x2;
pub const CKR_GENERAL_ERROR: CK_RV = 0x5;
pub const CKR_FUNCTION_FAILED: CK_RV = 0x6;
pub const CKR_ARGUMENTS_BAD: CK_RV = 0x7;
pub const CKR_ATTRIBUTE_READ_ONLY: CK_RV = 0x10;
pub const CKR_ATTRIBUTE_TYPE_INVALID: CK_RV = 0x12;
pub const CKR_ATTRIBUTE_VALUE_INVALID: CK_RV = 0x13;
pub const CKR_DEVICE_ERROR: CK_RV = 0x30;
pub const CKR_DEVICE_MEMORY: CK_RV = 0x31;
pub const CKR_DEVICE_REMOVED: CK_RV = 0x32;
pub const CKR_FUNCTION_NOT_SUPPORTED: CK_RV = 0x54;
pub const CKR_KEY_HANDLE_INVALID: CK_RV = 0x60;
pub const CKR_KEY_TYPE_INCONSISTENT: CK_RV = 0x63;
pub const CKR_KEY_FUNCTION_NOT_PERMITTED: CK_RV = 0x68;
pub const CKR_MECHANISM_INVALID: CK_RV = 0x70;
pub const CKR_OBJECT_HANDLE_INVALID: CK_RV = 0x82;
pub const CKR_OPERATION_ACTIVE: CK_RV = 0x90;
pub const CKR_SESSION_CLOSED: CK_RV = 0xb0;
pub const CKR_SESSION_COUNT: CK_RV = 0xb1;
pub const CKR_SESSION_HANDLE_INVALID: CK_RV = 0xb3;
pub const CKR_TEMPLATE_INCOMPLETE: CK_RV = 0xd0;
pub const CKR_TEMPLATE_INCONSISTENT: CK_RV = 0xd1;
pub const CKR_TOKEN_NOT_PRESENT: CK_RV = 0xe0;
pub const CKR_USER_NOT_LOGGED_IN: CK_RV = 0x101;
pub const CKR_DOMAIN_PARAMS_INVALID: CK_RV = 0x130;
pub const CKR_CURVE_NOT_SUPPORTED: CK_RV = 0x140;
pub const CKR_BUFFER_TOO_SMALL: CK_RV = 0x150;
pub const CKR_CRYPTOKI_NOT_INITIALIZED: CK_RV = 0x190;
pub const CKG_MGF1_SHA256: CK_ULONG = 0x2;
pub const CKG_MGF1_SHA384: CK_ULONG = 0x3;
pub const CKG_MGF1_SHA512: CK_ULONG = 0x4;

// NSS error codes (secerr.h): SEC_ERROR_BASE = -0x2000.
pub const SEC_ERROR_BAD_PASSWORD: PRErrorCode = -0x2000 + 15;
pub const SEC_ERROR_NO_TOKEN: PRErrorCode = -0x2000 + 65;
pub const SEC_ERROR_NO_KEY: PRErrorCode = -0x2000 + 26;
pub const SEC_ERROR_TOKEN_NOT_LOGGED_IN: PRErrorCode = -0x2000 + 155;

// PK11DisableReasons (secmodt.h).
pub const PK11_DIS_COULD_NOT_INIT_TOKEN: c_int = 2;

#[link(name = "nss3")]
#[link(name = "nssutil3")]
#[link(name = "nspr4")]
extern "C" {
    pub fn NSS_Initialize(
        configdir: *const c_char,
        certPrefix: *const c_char,
        keyPrefix: *const c_char,
        secmodName: *const c_char,
        flags: u32,
    ) -> SECStatus;
    pub fn PK11_SetPasswordFunc(func: PK11PasswordFunc);
    pub fn PORT_Strdup(s: *const c_char) -> *mut c_char;
    pub fn PORT_GetError() -> PRErrorCode;
    pub fn PR_ErrorToName(code: PRErrorCode) -> *const c_char;
    pub fn PR_ErrorToString(code: PRErrorCode, language: u32) -> *const c_char;
    pub fn SECITEM_FreeItem(item: *mut SECItem, freeit: PRBool);

    pub fn PK11_GetInternalKeySlot() -> *mut PK11SlotInfo;
    pub fn PK11_FindSlotByName(name: *const c_char) -> *mut PK11SlotInfo;
    pub fn PK11_FreeSlot(slot: *mut PK11SlotInfo);
    pub fn PK11_IsPresent(slot: *mut PK11SlotInfo) -> PRBool;
    pub fn PK11_NeedLogin(slot: *mut PK11SlotInfo) -> PRBool;
    pub fn PK11_IsLoggedIn(slot: *mut PK11SlotInfo, wincx: *mut c_void) -> PRBool;
    pub fn PK11_CheckUserPassword(slot: *mut PK11SlotInfo, pw: *const c_char) -> SECStatus;
    pub fn PK11_GetSlotSeries(slot: *mut PK11SlotInfo) -> c_int;
    pub fn PK11_IsDisabled(slot: *mut PK11SlotInfo) -> PRBool;
    pub fn PK11_GetDisabledReason(slot: *mut PK11SlotInfo) -> c_int;
    pub fn PK11_UserEnableSlot(slot: *mut PK11SlotInfo) -> PRBool;
    pub fn PK11_ReferenceSlot(slot: *mut PK11SlotInfo) -> *mut PK11SlotInfo;
    pub fn SECMOD_RestartModules(force: PRBool) -> SECStatus;
    pub fn PK11_DoesMechanism(slot: *mut PK11SlotInfo, mech: CK_MECHANISM_TYPE) -> PRBool;
    pub fn PK11_GetModule(slot: *mut PK11SlotInfo) -> *mut SECMODModule;
    pub fn PK11_IsInternal(slot: *mut PK11SlotInfo) -> PRBool;
    /// `obj_type` 1 is PK11_TypePrivKey (secmodt.h): `object` is a SECKEYPrivateKey.
    pub fn PK11_GetObjectHandle(obj_type: c_int, object: *mut c_void, slot: *mut *mut PK11SlotInfo)
        -> CK_OBJECT_HANDLE;
    pub fn PK11_GetModuleID(slot: *mut PK11SlotInfo) -> SECMODModuleID;
    pub fn PK11_GetSlotID(slot: *mut PK11SlotInfo) -> CK_SLOT_ID;

    pub fn PK11_GenerateKeyPair(
        slot: *mut PK11SlotInfo,
        mech: CK_MECHANISM_TYPE,
        param: *mut c_void,
        pubk: *mut *mut SECKEYPublicKey,
        isPerm: PRBool,
        isSensitive: PRBool,
        wincx: *mut c_void,
    ) -> *mut SECKEYPrivateKey;
    pub fn PK11_SetPrivateKeyNickname(key: *mut SECKEYPrivateKey, nickname: *const c_char) -> SECStatus;
    pub fn PK11_SetPublicKeyNickname(key: *mut SECKEYPublicKey, nickname: *const c_char) -> SECStatus;
    pub fn PK11_GetLowLevelKeyIDForPrivateKey(key: *mut SECKEYPrivateKey) -> *mut SECItem;
    pub fn PK11_FindKeyByKeyID(
        slot: *mut PK11SlotInfo,
        keyID: *mut SECItem,
        wincx: *mut c_void,
    ) -> *mut SECKEYPrivateKey;
    pub fn PK11_FindCertFromNickname(nickname: *const c_char, wincx: *mut c_void) -> *mut CERTCertificate;
    pub fn PK11_FindPrivateKeyFromCert(
        slot: *mut PK11SlotInfo,
        cert: *mut CERTCertificate,
        wincx: *mut c_void,
    ) -> *mut SECKEYPrivateKey;
    pub fn CERT_DestroyCertificate(cert: *mut CERTCertificate);
    pub fn PK11_CopyTokenPrivKeyToSessionPrivKey(
        slot: *mut PK11SlotInfo,
        key: *mut SECKEYPrivateKey,
    ) -> *mut SECKEYPrivateKey;
    pub fn PK11_ListPrivKeysInSlot(
        slot: *mut PK11SlotInfo,
        nickname: *mut c_char,
        wincx: *mut c_void,
    ) -> *mut SECKEYPrivateKeyList;
    pub fn SECKEY_DestroyPrivateKeyList(list: *mut SECKEYPrivateKeyList);
    pub fn PK11_ReadRawAttribute(
        kind: c_int,
        object: *mut c_void,
        attr: CK_ATTRIBUTE_TYPE,
        item: *mut SECItem,
    ) -> SECStatus;
    pub fn PK11_DeleteTokenPrivateKey(key: *mut SECKEYPrivateKey, force: PRBool) -> SECStatus;
    pub fn PK11_DeleteTokenPublicKey(key: *mut SECKEYPublicKey) -> SECStatus;
    pub fn SECKEY_ConvertToPublicKey(key: *mut SECKEYPrivateKey) -> *mut SECKEYPublicKey;
    pub fn SECKEY_EncodeDERSubjectPublicKeyInfo(key: *const SECKEYPublicKey) -> *mut SECItem;
    pub fn SECKEY_DestroyPrivateKey(key: *mut SECKEYPrivateKey);
    pub fn SECKEY_DestroyPublicKey(key: *mut SECKEYPublicKey);

    pub fn PK11_SignWithMechanism(
        key: *mut SECKEYPrivateKey,
        mech: CK_MECHANISM_TYPE,
        param: *const SECItem,
        sig: *mut SECItem,
        hash: *const SECItem,
    ) -> SECStatus;
    pub fn DSAU_EncodeDerSigWithLen(dest: *mut SECItem, src: *mut SECItem, len: c_uint) -> SECStatus;
    pub fn HASH_HashBuf(kind: c_int, dest: *mut u8, src: *const u8, len: u32) -> SECStatus;
    pub fn SGN_CreateDigestInfo(algorithm: c_int, digest: *const u8, len: c_uint) -> *mut SGNDigestInfo;
    pub fn NSS_Get_sgn_DigestInfoTemplate(arg: *mut c_void, enc: PRBool) -> *const c_void;
    pub fn SEC_ASN1EncodeItem(
        pool: *mut c_void,
        dest: *mut SECItem,
        src: *const c_void,
        template: *const c_void,
    ) -> *mut SECItem;
    pub fn SGN_DestroyDigestInfo(info: *mut SGNDigestInfo);
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// Offsets as a C compiler lays out NSS 3.87's secmodt.h and pkcs11t.h
    /// on x86_64 Linux (printed with offsetof from the Debian 12 headers).
    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(SECMODModule, functionList), 48);
        assert_eq!(offset_of!(SECMODModule, slotInfoCount), 96);
        assert_eq!(offset_of!(SECMODModule, moduleID), 104);
        assert_eq!(offset_of!(SECMODModule, isThreadSafe), 112);
        assert_eq!(offset_of!(CK_FUNCTION_LIST, C_OpenSession), 104);
        assert_eq!(offset_of!(CK_FUNCTION_LIST, C_FindObjectsFinal), 232);
        assert_eq!(offset_of!(CK_FUNCTION_LIST, C_SignInit), 344);
        assert_eq!(offset_of!(CK_FUNCTION_LIST, C_Sign), 352);
        assert_eq!(offset_of!(CK_FUNCTION_LIST, C_GenerateKeyPair), 480);
    }
}
