//! `pki_algorithm` and `pki_scheme`: C numbers for signet-ipc's key algorithms
//! and signature schemes.

use std::ffi::{c_char, CStr};

use signet_ipc::{KeyAlgorithm, SignatureScheme};

use crate::boundary;
use crate::result::Error;

/// A key's algorithm, as `pki_key_list_algorithm` reports it.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pki_algorithm {
    /// Not a known algorithm (e.g. an index out of range).
    PKI_ALGORITHM_UNKNOWN = 0,
    /// ECDSA over NIST P-256.
    PKI_ALGORITHM_ECDSA_P256 = 1,
    /// ECDSA over NIST P-384.
    PKI_ALGORITHM_ECDSA_P384 = 2,
    /// ECDSA over NIST P-521.
    PKI_ALGORITHM_ECDSA_P521 = 3,
    /// Ed25519.
    PKI_ALGORITHM_ED25519 = 4,
    /// RSA, 2048-bit modulus.
    PKI_ALGORITHM_RSA_2048 = 5,
    /// RSA, 3072-bit modulus.
    PKI_ALGORITHM_RSA_3072 = 6,
    /// RSA, 4096-bit modulus.
    PKI_ALGORITHM_RSA_4096 = 7,
    /// ML-DSA-44 (FIPS 204).
    PKI_ALGORITHM_ML_DSA_44 = 8,
    /// ML-DSA-65 (FIPS 204).
    PKI_ALGORITHM_ML_DSA_65 = 9,
    /// ML-DSA-87 (FIPS 204).
    PKI_ALGORITHM_ML_DSA_87 = 10,
}

/// A signature scheme. Pass one of these numbers where a function takes
/// `uint32_t scheme`. The caller always passes the whole message; the scheme
/// says how it is hashed and signed.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pki_scheme {
    /// The key's default: ECDSA P-256/SHA-256, P-384/SHA-384, P-521/SHA-512;
    /// Ed25519; RSA PKCS#1 v1.5 with SHA-256; ML-DSA of the key's parameter set.
    PKI_SCHEME_DEFAULT = 0,
    /// ECDSA with SHA-256; the signature is a DER `Ecdsa-Sig-Value`.
    PKI_SCHEME_ECDSA_SHA256 = 1,
    /// ECDSA with SHA-384.
    PKI_SCHEME_ECDSA_SHA384 = 2,
    /// ECDSA with SHA-512.
    PKI_SCHEME_ECDSA_SHA512 = 3,
    /// Ed25519, pure (RFC 8032).
    PKI_SCHEME_ED25519 = 4,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    PKI_SCHEME_RSA_PKCS1_SHA256 = 5,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    PKI_SCHEME_RSA_PKCS1_SHA384 = 6,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    PKI_SCHEME_RSA_PKCS1_SHA512 = 7,
    /// RSASSA-PSS with SHA-256, MGF1-SHA-256, salt length 32.
    PKI_SCHEME_RSA_PSS_SHA256 = 8,
    /// RSASSA-PSS with SHA-384, MGF1-SHA-384, salt length 48.
    PKI_SCHEME_RSA_PSS_SHA384 = 9,
    /// RSASSA-PSS with SHA-512, MGF1-SHA-512, salt length 64.
    PKI_SCHEME_RSA_PSS_SHA512 = 10,
    /// ML-DSA-44, pure, empty context.
    PKI_SCHEME_ML_DSA_44 = 11,
    /// ML-DSA-65, pure, empty context.
    PKI_SCHEME_ML_DSA_65 = 12,
    /// ML-DSA-87, pure, empty context.
    PKI_SCHEME_ML_DSA_87 = 13,
}

impl pki_algorithm {
    pub(crate) fn from_ipc(a: KeyAlgorithm) -> Self {
        use pki_algorithm::*;
        match a {
            KeyAlgorithm::EcP256 => PKI_ALGORITHM_ECDSA_P256,
            KeyAlgorithm::EcP384 => PKI_ALGORITHM_ECDSA_P384,
            KeyAlgorithm::EcP521 => PKI_ALGORITHM_ECDSA_P521,
            KeyAlgorithm::Ed25519 => PKI_ALGORITHM_ED25519,
            KeyAlgorithm::Rsa2048 => PKI_ALGORITHM_RSA_2048,
            KeyAlgorithm::Rsa3072 => PKI_ALGORITHM_RSA_3072,
            KeyAlgorithm::Rsa4096 => PKI_ALGORITHM_RSA_4096,
            KeyAlgorithm::MlDsa44 => PKI_ALGORITHM_ML_DSA_44,
            KeyAlgorithm::MlDsa65 => PKI_ALGORITHM_ML_DSA_65,
            KeyAlgorithm::MlDsa87 => PKI_ALGORITHM_ML_DSA_87,
        }
    }
}

/// The scheme with C number `scheme` (the order of `SignatureScheme::ALL`).
pub(crate) fn scheme_from_c(scheme: u32) -> Result<SignatureScheme, Error> {
    usize::try_from(scheme)
        .ok()
        .and_then(|i| SignatureScheme::ALL.get(i).copied())
        .ok_or_else(|| Error::invalid(format!("unknown signature scheme {scheme}")))
}

/// Algorithm names in `KeyAlgorithm::ALL` order (signet-ipc's names).
const ALGORITHM_NAMES: [&CStr; 10] = [
    c"ecdsa-p256",
    c"ecdsa-p384",
    c"ecdsa-p521",
    c"ed25519",
    c"rsa-2048",
    c"rsa-3072",
    c"rsa-4096",
    c"ml-dsa-44",
    c"ml-dsa-65",
    c"ml-dsa-87",
];

/// Scheme names in `SignatureScheme::ALL` order (signet-ipc's names).
const SCHEME_NAMES: [&CStr; 14] = [
    c"default",
    c"ecdsa-sha256",
    c"ecdsa-sha384",
    c"ecdsa-sha512",
    c"ed25519",
    c"rsa-pkcs1-sha256",
    c"rsa-pkcs1-sha384",
    c"rsa-pkcs1-sha512",
    c"rsa-pss-sha256",
    c"rsa-pss-sha384",
    c"rsa-pss-sha512",
    c"ml-dsa-44",
    c"ml-dsa-65",
    c"ml-dsa-87",
];

/// The name of an algorithm (e.g. `"ecdsa-p256"`, as signetctl spells it), a
/// static NUL-terminated string; `"unknown"` for any other number.
#[no_mangle]
pub extern "C" fn pki_algorithm_name(algorithm: u32) -> *const c_char {
    boundary::guard(c"unknown".as_ptr(), || {
        let index = usize::try_from(algorithm).ok().and_then(|i| i.checked_sub(1));
        index.and_then(|i| ALGORITHM_NAMES.get(i)).unwrap_or(&c"unknown").as_ptr()
    })
}

/// The name of a scheme (e.g. `"rsa-pss-sha256"`), a static NUL-terminated
/// string; `"unknown"` for any other number.
#[no_mangle]
pub extern "C" fn pki_scheme_name(scheme: u32) -> *const c_char {
    boundary::guard(c"unknown".as_ptr(), || {
        let index = usize::try_from(scheme).ok();
        index.and_then(|i| SCHEME_NAMES.get(i)).unwrap_or(&c"unknown").as_ptr()
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn c_numbers_follow_signet_ipc() {
        for (i, a) in KeyAlgorithm::ALL.into_iter().enumerate() {
            assert_eq!(pki_algorithm::from_ipc(a) as usize, i + 1, "{a}");
            // SAFETY: pki_algorithm_name returns a static C string.
            let name = unsafe { CStr::from_ptr(pki_algorithm_name(i as u32 + 1)) };
            assert_eq!(name.to_str(), Ok(a.name()));
        }
        for (i, s) in SignatureScheme::ALL.into_iter().enumerate() {
            assert_eq!(scheme_from_c(i as u32).ok(), Some(s));
            // SAFETY: pki_scheme_name returns a static C string.
            let name = unsafe { CStr::from_ptr(pki_scheme_name(i as u32)) };
            assert_eq!(name.to_str(), Ok(s.name()));
        }
        assert_eq!(pki_scheme::PKI_SCHEME_ML_DSA_87 as usize, SignatureScheme::ALL.len() - 1);
        assert!(scheme_from_c(SignatureScheme::ALL.len() as u32).is_err());
    }
}
