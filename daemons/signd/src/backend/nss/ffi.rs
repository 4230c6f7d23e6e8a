//! Hand-written declarations of the NSS 3.x and NSPR functions the backend
//! uses (nss.h, pk11pub.h, keyhi.h, cryptohi.h, secdig.h, sechash.h,
//! secitem.h, prerror.h). Only what is needed; values checked against the
//! Debian 12 headers of NSS 3.87 (stable ABI since NSS 3.x).
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
