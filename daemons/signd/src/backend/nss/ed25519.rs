//! Ed25519 keys on tokens whose module has CKM_EC_EDWARDS_KEY_PAIR_GEN and
//! CKM_EDDSA (SoftHSM2), made and used through the token's own PKCS #11
//! functions (`pkcs11`).
//!
//! NSS 3.87 has no Edwards key type (keythi.h): PK11_GenerateKeyPair refuses
//! the mechanism and SECKEY_ConvertToPublicKey cannot describe such a key. For
//! these keys signd therefore calls the token's module itself (see `pkcs11`
//! for its sessions, their login and their restarts). If the token forgot the
//! login, the lookup logs in again through NSS.
//!
//! Keys are made as NSS makes the other keys: permanent (CKA_TOKEN), private
//! and sensitive, labelled with the signd key id, with CKA_ID = SHA-1 of the
//! public key (NSS's CKA_ID for EC keys is the SHA-1 of the public value);
//! in addition the private key is not extractable.

use std::ptr;
use std::sync::Arc;

use der::asn1::{ObjectIdentifier, OctetStringRef, PrintableStringRef};
use der::{Decode, Encode};
use openssl::pkey::{Id, PKey};
use openssl::sign::Verifier;
use signet_ipc::{ErrorKind, IpcError, KeyAlgorithm, SignatureScheme};

use super::cached::Cached;
use super::ffi::*;
use super::pkcs11::{Handle, Session, Template, Token};
use super::{backend_err, location, modules_read, Inner, Slot};

/// id-Ed25519 (RFC 8410): CKA_EC_PARAMS of an Ed25519 key, as an OID.
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
/// The other CKA_EC_PARAMS PKCS #11 3.0 allows for Ed25519 (a PrintableString).
const ED25519_NAME: &str = "edwards25519";
/// Signed and verified whenever a key is found, to check that the private key
/// found by CKA_ID belongs to the public key found by the same CKA_ID.
const CHECK_MESSAGE: &[u8] = b"signd: does this private key belong to this public key?";

/// Generates an Ed25519 key pair on the token in `slot` (labelled `id`) and
/// returns it with its location; `Unsupported` if the token cannot.
pub(super) fn generate(inner: &Arc<Inner>, slot: &Slot, label: &str, id: &str) -> Result<(EdKey, String), IpcError> {
    let _modules = modules_read();
    let token = Token::of(slot, label)?;
    let session = Session::open(&token).map_err(backend_err)?;
    let params = ED25519.to_der().map_err(|e| backend_err(format!("encoding the Ed25519 OID: {e}")))?;
    let (yes, no) = (CK_TRUE, CK_FALSE);
    let mut public = Template::default()
        .bool(CKA_TOKEN, &yes)
        .bool(CKA_PRIVATE, &no)
        .bool(CKA_VERIFY, &yes)
        .bytes(CKA_EC_PARAMS, &params)
        .bytes(CKA_LABEL, id.as_bytes());
    let mut private = Template::default()
        .bool(CKA_TOKEN, &yes)
        .bool(CKA_PRIVATE, &yes)
        .bool(CKA_SENSITIVE, &yes)
        .bool(CKA_EXTRACTABLE, &no)
        .bool(CKA_SIGN, &yes)
        .bytes(CKA_LABEL, id.as_bytes());
    let (public_key, private_key) =
        token.generate(session.handle, &mut public, &mut private).map_err(|e| backend_err(e.to_string()))?;
    // From here on a failure must not leave an unrecorded key behind.
    let made = (|| {
        let point = token.attribute(session.handle, public_key, CKA_EC_POINT).map_err(backend_err)?;
        let raw = raw_public_key(&point)?;
        let spki = spki_of(raw)?;
        let cka_id = openssl::sha::sha1(raw).to_vec();
        for object in [public_key, private_key] {
            let mut id = Template::default().bytes(CKA_ID, &cka_id);
            token.set_attributes(session.handle, object, &mut id).map_err(backend_err)?;
        }
        Ok((spki, cka_id))
    })();
    match made {
        Ok((spki, cka_id)) => {
            let location = location(label, &cka_id);
            let session = session.keep();
            let handle = Handle::new(token, session, private_key);
            Ok((EdKey::new(inner.clone(), label.to_owned(), cka_id, spki, handle), location))
        }
        Err(e) => {
            for object in [public_key, private_key] {
                if let Err(d) = token.destroy(session.handle, object) {
                    tracing::warn!(error = %d, "could not remove a half-made Ed25519 key from the token");
                }
            }
            Err(e)
        }
    }
}

/// The Ed25519 key with CKA_ID `cka_id` on the token in `slot`, or None if
/// the token has no Edwards mechanisms or no Edwards private key with that
/// CKA_ID (then it is another kind of key, for NSS to find).
pub(super) fn load(inner: &Arc<Inner>, slot: &Slot, label: &str, cka_id: &[u8]) -> Result<Option<EdKey>, IpcError> {
    if !Token::has_mechanisms(slot) {
        return Ok(None);
    }
    let Some((handle, spki)) = find(inner, slot, label, cka_id)? else { return Ok(None) };
    Ok(Some(EdKey::new(inner.clone(), label.to_owned(), cka_id.to_vec(), spki, handle)))
}

/// Destroys the token's Ed25519 key objects with CKA_ID `cka_id` (after a
/// failed registration); best effort.
pub(super) fn discard(slot: &Slot, label: &str, cka_id: &[u8]) {
    if !Token::has_mechanisms(slot) {
        return;
    }
    let _modules = modules_read();
    let Ok(token) = Token::of(slot, label) else { return };
    let Ok(session) = Session::open(&token) else { return };
    for class in [CKO_PRIVATE_KEY, CKO_PUBLIC_KEY] {
        let objects = token.find_key(session.handle, class, cka_id).unwrap_or_default();
        for object in objects {
            if let Err(e) = token.destroy(session.handle, object) {
                tracing::warn!(error = %e, "could not remove an Ed25519 key object from the token");
            }
        }
    }
}

/// Finds the key pair by CKA_ID (logging in again through NSS if the token
/// forgot the login), reads and checks its public key, and makes the
/// signing handle; None if there is no Edwards private key with that CKA_ID.
fn find(inner: &Inner, slot: &Slot, label: &str, cka_id: &[u8]) -> Result<Option<(Handle, Vec<u8>)>, IpcError> {
    let _modules = modules_read();
    let token = Token::of(slot, label)?;
    let session = Session::open(&token).map_err(unavailable)?;
    let mut found = token.find_key(session.handle, CKO_PRIVATE_KEY, cka_id).map_err(unavailable)?;
    // SAFETY: live slot; NULL wincx is allowed.
    if found.is_empty() && unsafe { PK11_IsLoggedIn(slot.0.as_ptr(), ptr::null_mut()) } == PR_FALSE {
        inner.login(slot, label)?;
        found = token.find_key(session.handle, CKO_PRIVATE_KEY, cka_id).map_err(unavailable)?;
    }
    let Some(&private_key) = found.first() else { return Ok(None) };
    let at = location(label, cka_id);
    let public_key = token
        .find_key(session.handle, CKO_PUBLIC_KEY, cka_id)
        .map_err(unavailable)?
        .first()
        .copied()
        .ok_or_else(|| unavailable(format!("the Edwards key at {at} has no public key object on the token")))?;
    let params = token.attribute(session.handle, public_key, CKA_EC_PARAMS).map_err(unavailable)?;
    if !is_ed25519(&params) {
        return Err(IpcError::new(
            ErrorKind::Unsupported,
            format!("the Edwards key at {at} is not an Ed25519 key (Ed448 is not supported by signd)"),
        ));
    }
    let point = token.attribute(session.handle, public_key, CKA_EC_POINT).map_err(unavailable)?;
    let spki = spki_of(raw_public_key(&point)?)?;
    let session = session.keep();
    let handle = Handle::new(token, session, private_key);
    let signature = handle.sign(CHECK_MESSAGE).map_err(|e| unavailable(format!("key {at}: {e}")))?;
    if !verifies(&spki, CHECK_MESSAGE, &signature) {
        return Err(unavailable(format!("the private key at {at} does not belong to the public key with its CKA_ID")));
    }
    Ok(Some((handle, spki)))
}

fn unavailable(detail: impl Into<String>) -> IpcError {
    IpcError::new(ErrorKind::KeyUnavailable, detail)
}

/// An Ed25519 key on a token, with its signing handle cached.
pub(super) struct EdKey {
    inner: Arc<Inner>,
    token: String,
    cka_id: Vec<u8>,
    spki: Vec<u8>,
    handle: Cached<Handle>,
}

impl EdKey {
    fn new(inner: Arc<Inner>, token: String, cka_id: Vec<u8>, spki: Vec<u8>, handle: Handle) -> Self {
        Self { inner, token, cka_id, spki, handle: Cached::new(handle) }
    }

    fn location(&self) -> String {
        location(&self.token, &self.cka_id)
    }

    /// Looks the key up again on its token and checks it is the same key.
    fn find_again(&self) -> Result<Handle, IpcError> {
        // (Inner::slot re-initialises a module that stopped answering.)
        let slot = self.inner.slot(&self.token)?;
        let (handle, spki) = find(&self.inner, &slot, &self.token, &self.cka_id)?.ok_or_else(|| {
            IpcError::new(ErrorKind::KeyUnavailable, format!("key {} is not on the token", self.location()))
        })?;
        if spki != self.spki {
            return Err(IpcError::new(
                ErrorKind::KeyUnavailable,
                format!("the key found at {} is not the recorded key", self.location()),
            ));
        }
        tracing::info!(location = %self.location(), "NSS key found again");
        Ok(handle)
    }
}

impl super::SigningKey for EdKey {
    fn algorithm(&self) -> KeyAlgorithm {
        KeyAlgorithm::Ed25519
    }

    fn spki(&self) -> &[u8] {
        &self.spki
    }

    fn sign(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, IpcError> {
        if scheme != SignatureScheme::Ed25519 {
            return Err(IpcError::new(
                ErrorKind::Unsupported,
                format!("{} is unsupported by this token", scheme.name()),
            ));
        }
        self.handle.sign(|| self.location(), || self.find_again(), |handle| handle.sign(message))
    }
}

/// Whether CKA_EC_PARAMS names Ed25519 (the OID, or PKCS #11 3.0's name).
fn is_ed25519(params: &[u8]) -> bool {
    ObjectIdentifier::from_der(params).is_ok_and(|oid| oid == ED25519)
        || PrintableStringRef::from_der(params).is_ok_and(|name| name.as_str() == ED25519_NAME)
}

/// The 32-byte public key in CKA_EC_POINT: a DER OCTET STRING (PKCS #11
/// 3.0; SoftHSM2), or the raw bytes (as some tokens give it).
fn raw_public_key(point: &[u8]) -> Result<&[u8], IpcError> {
    let raw = match OctetStringRef::from_der(point) {
        Ok(octets) if octets.as_bytes().len() == 32 => octets.as_bytes(),
        _ => point,
    };
    if raw.len() != 32 {
        return Err(IpcError::new(
            ErrorKind::KeyUnavailable,
            format!("the token's Ed25519 public key (CKA_EC_POINT) is {} bytes, not 32", point.len()),
        ));
    }
    Ok(raw)
}

/// The SubjectPublicKeyInfo of a raw Ed25519 public key, as OpenSSL encodes it.
fn spki_of(raw: &[u8]) -> Result<Vec<u8>, IpcError> {
    let bad = |e: openssl::error::ErrorStack| {
        IpcError::new(ErrorKind::KeyUnavailable, format!("the token's Ed25519 public key: {e}"))
    };
    PKey::public_key_from_raw_bytes(raw, Id::ED25519).map_err(bad)?.public_key_to_der().map_err(bad)
}

fn verifies(spki: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Ok(key) = PKey::public_key_from_der(spki) else { return false };
    Verifier::new_without_digest(&key).and_then(|mut v| v.verify_oneshot(signature, message)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_keys_wrapped_or_raw() {
        let key = PKey::generate_ed25519().unwrap();
        let raw = key.raw_public_key().unwrap();
        let wrapped = OctetStringRef::new(&raw).unwrap().to_der().unwrap();
        assert_eq!(wrapped.len(), 34);
        assert_eq!(raw_public_key(&wrapped).unwrap(), &raw[..]);
        assert_eq!(raw_public_key(&raw).unwrap(), &raw[..]);
        assert_eq!(spki_of(&raw).unwrap(), key.public_key_to_der().unwrap());
        for bad in [&raw[..31], &wrapped[..33], &[0u8; 57][..]] {
            assert_eq!(raw_public_key(bad).unwrap_err().kind, ErrorKind::KeyUnavailable);
        }
    }

    #[test]
    fn ed25519_params() {
        assert!(is_ed25519(&ED25519.to_der().unwrap()));
        assert!(is_ed25519(&PrintableStringRef::new(ED25519_NAME).unwrap().to_der().unwrap()));
        let ed448 = ObjectIdentifier::new_unwrap("1.3.101.113").to_der().unwrap();
        assert!(!is_ed25519(&ed448));
        assert!(!is_ed25519(b"edwards25519"));
        // The OID OpenSSL writes in an Ed25519 SPKI.
        let spki = PKey::generate_ed25519().unwrap().public_key_to_der().unwrap();
        let oid = ED25519.to_der().unwrap();
        assert!(spki.windows(oid.len()).any(|w| w == oid));
    }
}
