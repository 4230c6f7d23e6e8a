//! How each scheme is signed on a token: the mechanism, hashing in NSS or on
//! the token, PSS parameters, and the ECDSA r||s to DER conversion.

use std::os::raw::c_int;
use std::ptr;

use openssl::pkey::PKey;
use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm, SignatureScheme};

use super::ffi::*;
use super::pkcs11::Mechanism;
use super::{backend_err, item_bytes, last_error, Preference, PrivateKey, SigningHandle, Slot};

/// How to sign one scheme with one key, decided when the key is loaded.
#[derive(Clone, Copy)]
pub(super) struct Plan {
    pub(super) mechanism: CK_MECHANISM_TYPE,
    /// Hash in signd first (NSS's HASH_HashBuf), then sign the digest.
    pub(super) hash: Option<Hash>,
    /// Wrap the digest in a DigestInfo (PKCS #1 v1.5 over raw CKM_RSA_PKCS).
    digest_info: bool,
    pss: Option<CK_RSA_PKCS_PSS_PARAMS>,
    /// The raw signature's maximum length.
    sig_len: usize,
    /// For ECDSA: the raw r||s length, converted to DER Ecdsa-Sig-Value.
    ecdsa_raw_len: u32,
}

#[derive(Clone, Copy)]
pub(super) struct Hash {
    alg: c_int,
    len: usize,
    oid: c_int,
    mechanism: CK_MECHANISM_TYPE,
    mgf: CK_ULONG,
}

pub(super) struct Plans(Vec<(SignatureScheme, Plan)>);

impl Plans {
    pub(super) fn new(
        slot: &Slot,
        algorithm: KeyAlgorithm,
        spki: &[u8],
        preference: Preference,
    ) -> Result<Self, IpcError> {
        let public = PKey::public_key_from_der(spki).map_err(|e| backend_err(format!("public key: {e}")))?;
        let (sig_len, ecdsa_raw_len) = match algorithm {
            KeyAlgorithm::EcP256 => (64, 64),
            KeyAlgorithm::EcP384 => (96, 96),
            KeyAlgorithm::EcP521 => (132, 132),
            KeyAlgorithm::Ed25519 => (64, 0),
            _ => (public.size(), 0),
        };
        let mut plans = Vec::new();
        for scheme in
            SignatureScheme::ALL.into_iter().filter(|s| *s != SignatureScheme::Default && algorithm.allows(*s))
        {
            let choice = |combined: CK_MECHANISM_TYPE, raw: Plan| {
                let combined = Plan { mechanism: combined, hash: None, digest_info: false, ..raw };
                let (first, second) = match preference {
                    Preference::Prehash => (raw, combined),
                    Preference::Combined => (combined, raw),
                };
                [first, second].into_iter().find(|p| slot.does(p.mechanism))
            };
            let base = Plan { mechanism: 0, hash: None, digest_info: false, pss: None, sig_len, ecdsa_raw_len };
            use SignatureScheme as S;
            let plan = match scheme {
                S::EcdsaSha256 | S::EcdsaSha384 | S::EcdsaSha512 => {
                    let h = hash_of(scheme);
                    let combined = match scheme {
                        S::EcdsaSha256 => CKM_ECDSA_SHA256,
                        S::EcdsaSha384 => CKM_ECDSA_SHA384,
                        _ => CKM_ECDSA_SHA512,
                    };
                    choice(combined, Plan { mechanism: CKM_ECDSA, hash: Some(h), ..base })
                }
                S::RsaPkcs1Sha256 | S::RsaPkcs1Sha384 | S::RsaPkcs1Sha512 => {
                    let h = hash_of(scheme);
                    let combined = match scheme {
                        S::RsaPkcs1Sha256 => CKM_SHA256_RSA_PKCS,
                        S::RsaPkcs1Sha384 => CKM_SHA384_RSA_PKCS,
                        _ => CKM_SHA512_RSA_PKCS,
                    };
                    choice(combined, Plan { mechanism: CKM_RSA_PKCS, hash: Some(h), digest_info: true, ..base })
                }
                S::RsaPssSha256 | S::RsaPssSha384 | S::RsaPssSha512 => {
                    let h = hash_of(scheme);
                    let combined = match scheme {
                        S::RsaPssSha256 => CKM_SHA256_RSA_PKCS_PSS,
                        S::RsaPssSha384 => CKM_SHA384_RSA_PKCS_PSS,
                        _ => CKM_SHA512_RSA_PKCS_PSS,
                    };
                    // MGF1 with the same hash, salt as long as the hash (as the OpenSSL backend).
                    let pss = CK_RSA_PKCS_PSS_PARAMS { hashAlg: h.mechanism, mgf: h.mgf, sLen: h.len as CK_ULONG };
                    choice(combined, Plan { mechanism: CKM_RSA_PKCS_PSS, hash: Some(h), pss: Some(pss), ..base })
                }
                S::Ed25519 => Some(Plan { mechanism: CKM_EDDSA, ..base }).filter(|p| slot.does(p.mechanism)),
                S::MlDsa44 | S::MlDsa65 | S::MlDsa87 | S::Default => None,
            };
            if let Some(plan) = plan {
                plans.push((scheme, plan));
            }
        }
        Ok(Self(plans))
    }

    pub(super) fn get(&self, scheme: SignatureScheme) -> Result<&Plan, IpcError> {
        self.0.iter().find(|(s, _)| *s == scheme).map(|(_, p)| p).ok_or_else(|| {
            IpcError::new(ErrorKind::Unsupported, format!("{} is unsupported by this token", scheme.name()))
        })
    }
}

fn hash_of(scheme: SignatureScheme) -> Hash {
    use SignatureScheme as S;
    match scheme {
        S::EcdsaSha384 | S::RsaPkcs1Sha384 | S::RsaPssSha384 => {
            Hash { alg: HASH_ALG_SHA384, len: 48, oid: SEC_OID_SHA384, mechanism: CKM_SHA384, mgf: CKG_MGF1_SHA384 }
        }
        S::EcdsaSha512 | S::RsaPkcs1Sha512 | S::RsaPssSha512 => {
            Hash { alg: HASH_ALG_SHA512, len: 64, oid: SEC_OID_SHA512, mechanism: CKM_SHA512, mgf: CKG_MGF1_SHA512 }
        }
        _ => Hash { alg: HASH_ALG_SHA256, len: 32, oid: SEC_OID_SHA256, mechanism: CKM_SHA256, mgf: CKG_MGF1_SHA256 },
    }
}

impl Plan {
    /// Signs `message` with `key`: in signd's own session where the handle
    /// has them, else through NSS (the caller holds MODULES for reading).
    pub(super) fn sign(&self, key: &SigningHandle, message: &[u8]) -> Result<Vec<u8>, String> {
        match &key.direct {
            Some(direct) => self.sign_with(message, |input| {
                let mechanism = Mechanism::new(self.mechanism, self.pss.as_ref());
                direct.sign_with(&mechanism, input, self.sig_len).map_err(|e| format!("signing: {e}"))
            }),
            None => self.sign_nss(&key.key, message),
        }
    }

    /// Signs `message` with NSS's PK11_SignWithMechanism, which opens a
    /// session on the token for the call.
    pub(super) fn sign_nss(&self, key: &PrivateKey, message: &[u8]) -> Result<Vec<u8>, String> {
        self.sign_with(message, |input| {
            let param = self.pss.as_ref().map(|p| SECItem {
                type_: 0,
                data: ptr::from_ref(p).cast_mut().cast(),
                len: std::mem::size_of::<CK_RSA_PKCS_PSS_PARAMS>() as u32,
            });
            let input = SECItem::borrowed(input);
            let mut sig = vec![0u8; self.sig_len];
            let mut out = SECItem::out(&mut sig);
            // SAFETY: live key; `param` (if any) points at a
            // CK_RSA_PKCS_PSS_PARAMS in `self`, `input` at the
            // digest/DigestInfo/message, `out` at a buffer of sig_len bytes,
            // all alive for the call; NSS writes at most out.len bytes and sets
            // out.len to the signature length.
            let status = unsafe {
                PK11_SignWithMechanism(
                    key.0.as_ptr(),
                    self.mechanism,
                    param.as_ref().map_or(ptr::null(), ptr::from_ref),
                    &mut out,
                    &input,
                )
            };
            if status != SEC_SUCCESS {
                return Err(last_error("signing"));
            }
            let len = out.len as usize;
            sig.truncate(len);
            Ok(sig)
        })
    }

    /// Hashes (and wraps in a DigestInfo) as the plan says, has `sign` sign
    /// the result, and DER-encodes an ECDSA signature.
    fn sign_with(
        &self,
        message: &[u8],
        sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, String>,
    ) -> Result<Vec<u8>, String> {
        let len = u32::try_from(message.len()).map_err(|_| "message over 4 GiB".to_owned())?;
        let mut digest = [0u8; 64];
        // A DigestInfo NSS allocated, freed once signed.
        let mut encoded: *mut SECItem = ptr::null_mut();
        let input: &[u8] = match self.hash {
            None => message,
            Some(h) => {
                // SAFETY: `digest` has room for the largest digest (64
                // bytes); `message` is valid for `len` bytes.
                if unsafe { HASH_HashBuf(h.alg, digest.as_mut_ptr(), message.as_ptr(), len) } != SEC_SUCCESS {
                    return Err(last_error("hashing"));
                }
                if self.digest_info {
                    // SAFETY: NSS copies the digest into a new DigestInfo,
                    // encodes it into a new item (NULL pool: heap), and the
                    // DigestInfo is destroyed right after. The slice borrows
                    // the item's data, which lives until it is freed below,
                    // after the last use of `input`.
                    unsafe {
                        let info = SGN_CreateDigestInfo(h.oid, digest.as_ptr(), h.len as u32);
                        if info.is_null() {
                            return Err(last_error("building the DigestInfo"));
                        }
                        // What secdig.h's SGN_EncodeDigestInfo does (not exported).
                        encoded = SEC_ASN1EncodeItem(
                            ptr::null_mut(),
                            ptr::null_mut(),
                            info.cast(),
                            NSS_Get_sgn_DigestInfoTemplate(ptr::null_mut(), PR_TRUE),
                        );
                        SGN_DestroyDigestInfo(info);
                        if encoded.is_null() {
                            return Err(last_error("encoding the DigestInfo"));
                        }
                        std::slice::from_raw_parts((*encoded).data, (*encoded).len as usize)
                    }
                } else {
                    &digest[..h.len]
                }
            }
        };
        let signed = sign(input);
        if !encoded.is_null() {
            // SAFETY: `encoded` came from SEC_ASN1EncodeItem with a NULL
            // pool, so it and its data are heap allocations we free once;
            // `input` is not used after this.
            unsafe { SECITEM_FreeItem(encoded, PR_TRUE) };
        }
        let mut sig = signed?;
        if self.ecdsa_raw_len == 0 {
            return Ok(sig);
        }
        if sig.len() != self.ecdsa_raw_len as usize {
            return Err(format!(
                "the token returned a {}-byte ECDSA signature, expected {}",
                sig.len(),
                self.ecdsa_raw_len
            ));
        }
        let mut raw = SECItem::out(&mut sig);
        let mut der = SECItem::empty();
        // SAFETY: `raw` holds r||s of ecdsa_raw_len bytes; NSS allocates
        // der.data (heap), which is copied and then freed once.
        unsafe {
            if DSAU_EncodeDerSigWithLen(&mut der, &mut raw, self.ecdsa_raw_len) != SEC_SUCCESS {
                return Err(last_error("DER-encoding the ECDSA signature"));
            }
            let out = item_bytes(&der);
            SECITEM_FreeItem(&mut der, PR_FALSE);
            Ok(out)
        }
    }
}
