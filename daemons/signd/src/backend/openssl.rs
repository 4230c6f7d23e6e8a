//! The OpenSSL backend: PKCS#8 key files (mode 0600) under the state
//! directory, signed with the vendored OpenSSL 3.5 (ML-DSA included).

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openssl::ec::{EcGroup, EcKey};
use openssl::ecdsa::EcdsaSig;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{Id, KeyType, PKey, Private};
use openssl::rsa::{Padding, Rsa};
use openssl::sha::{Sha256, Sha384, Sha512};
use openssl::sign::{RsaPssSaltlen, Signer};
use signet_ipc::{DigestAlgorithm, ErrorKind, IpcError, KeyAlgorithm, SignatureScheme};

use super::nonces::NonceStock;
use super::{Backend, NewKey, SigningKey};

/// Key files live in `<state_dir>/keys/<id>.pem`.
pub struct OpensslBackend {
    dir: PathBuf,
}

impl OpensslBackend {
    /// A backend keeping its key files in `dir` (created 0700 if missing).
    pub fn new(dir: &Path) -> Result<Self, IpcError> {
        fs::create_dir_all(dir)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            })
            .map_err(|e| backend_io(dir, e))?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    fn store(&self, id: &str, pkey: PKey<Private>, algorithm: KeyAlgorithm) -> Result<NewKey, IpcError> {
        let pem = pkey.private_key_to_pem_pkcs8().map_err(backend)?;
        let location = format!("{id}.pem");
        write_private_file(&self.dir.join(&location), &pem)?;
        let key = OpensslKey::new(pkey, algorithm)?;
        Ok(NewKey { key: Arc::new(key), location })
    }
}

impl Backend for OpensslBackend {
    fn name(&self) -> &'static str {
        "openssl"
    }

    fn generate(&self, id: &str, algorithm: KeyAlgorithm) -> Result<NewKey, IpcError> {
        let pkey = generate(algorithm).map_err(backend)?;
        self.store(id, pkey, algorithm)
    }

    fn import(&self, id: &str, algorithm: KeyAlgorithm, pkcs8: &[u8]) -> Result<NewKey, IpcError> {
        let pkey = parse_private(pkcs8)
            .map_err(|e| IpcError::invalid(format!("not a PKCS#8 private key (PEM or DER): {e}")))?;
        let found = algorithm_of(&pkey)?;
        if found != algorithm {
            return Err(IpcError::new(ErrorKind::WrongAlgorithm, format!("the key is {found}, not {algorithm}")));
        }
        self.store(id, pkey, algorithm)
    }

    fn load(&self, location: &str) -> Result<Arc<dyn SigningKey>, IpcError> {
        let path = self.dir.join(location);
        let bytes = fs::read(&path)
            .map_err(|e| IpcError::new(ErrorKind::KeyUnavailable, format!("cannot read {}: {e}", path.display())))?;
        let pkey = parse_private(&bytes).map_err(|e| {
            IpcError::new(ErrorKind::KeyUnavailable, format!("{} is not a usable private key: {e}", path.display()))
        })?;
        let algorithm = algorithm_of(&pkey)?;
        Ok(Arc::new(OpensslKey::new(pkey, algorithm)?))
    }

    fn discard(&self, location: &str) {
        let _ = fs::remove_file(self.dir.join(location));
    }
}

/// A parsed OpenSSL key, cached for the key's life.
pub struct OpensslKey {
    pkey: PKey<Private>,
    /// For ECDSA keys, the EC_KEY itself: a signature hashes the message
    /// and calls `ECDSA_do_sign` on it, which skips the per-call algorithm
    /// fetch and context set-up of `EVP_DigestSign*` (a noticeable part of
    /// a P-256 signature's time). Same OpenSSL code signs either way.
    ec: Option<EcKey<Private>>,
    /// For ECDSA keys, nonces computed ahead (see [`super::nonces`]); filled
    /// only through [`SigningKey::prepare_one`], so a key nobody asks to prepare
    /// signs exactly as OpenSSL does by default.
    nonces: NonceStock,
    algorithm: KeyAlgorithm,
    spki: Vec<u8>,
}

impl OpensslKey {
    /// Wraps a parsed key.
    pub fn new(pkey: PKey<Private>, algorithm: KeyAlgorithm) -> Result<Self, IpcError> {
        let spki = pkey.public_key_to_der().map_err(backend)?;
        let ec = match algorithm {
            KeyAlgorithm::EcP256 | KeyAlgorithm::EcP384 | KeyAlgorithm::EcP521 => Some(pkey.ec_key().map_err(backend)?),
            _ => None,
        };
        Ok(Self { pkey, ec, nonces: NonceStock::default(), algorithm, spki })
    }

    /// Signs `message` with `scheme` (checked by the caller against the
    /// key's algorithm); the benchmarks' in-process baseline calls this too.
    pub fn sign_message(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, openssl::error::ErrorStack> {
        use SignatureScheme as S;
        let Some(ec) = &self.ec else {
            return sign(&self.pkey, scheme, message);
        };
        // The low-level hashers: the one-shot `openssl::sha::sha256` goes
        // through `EVP_Q_digest`, which fetches the algorithm on every call.
        let mut buf = [0u8; 64];
        let len = match scheme {
            S::EcdsaSha256 => {
                let mut h = Sha256::new();
                h.update(message);
                put(&mut buf, h.finish())
            }
            S::EcdsaSha384 => {
                let mut h = Sha384::new();
                h.update(message);
                put(&mut buf, h.finish())
            }
            S::EcdsaSha512 => {
                let mut h = Sha512::new();
                h.update(message);
                put(&mut buf, h.finish())
            }
            _ => return sign(&self.pkey, scheme, message),
        };
        let digest = &buf[..len];
        match self.nonces.take() {
            Some(pair) => pair.sign(digest, ec),
            None => EcdsaSig::sign(digest, ec)?.to_der(),
        }
    }

    /// Nonces computed ahead and not yet used.
    #[cfg(test)]
    pub(crate) fn nonces_ready(&self) -> usize {
        self.nonces.len()
    }
}

/// Copies a digest into the front of `buf`; returns its length.
fn put<const N: usize>(buf: &mut [u8; 64], digest: [u8; N]) -> usize {
    buf[..N].copy_from_slice(&digest);
    N
}

impl SigningKey for OpensslKey {
    fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    fn spki(&self) -> &[u8] {
        &self.spki
    }

    fn sign(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>, IpcError> {
        self.sign_message(scheme, message).map_err(backend)
    }

    fn prepare_one(&self) -> bool {
        let Some(ec) = &self.ec else { return false };
        match self.nonces.add_one(ec) {
            Ok(added) => added,
            Err(e) => {
                tracing::warn!(error = %e, "cannot precompute an ECDSA nonce; signing without");
                false
            }
        }
    }
}

/// Signs with an OpenSSL key through `EVP_DigestSign*`: every algorithm,
/// with nothing prepared ahead (ECDSA keys held by signd take the shorter
/// path of [`OpensslKey::sign_message`]).
pub fn sign(
    pkey: &PKey<Private>,
    scheme: SignatureScheme,
    message: &[u8],
) -> Result<Vec<u8>, openssl::error::ErrorStack> {
    // Ed25519 and ML-DSA sign the message itself (pure mode). `Default` was
    // resolved to the key's own scheme before reaching here.
    let digest = message_digest(scheme.digest());
    let mut signer = match digest {
        Some(md) => Signer::new(md, pkey)?,
        None => Signer::new_without_digest(pkey)?,
    };
    if scheme.is_pss() {
        if let Some(md) = digest {
            signer.set_rsa_padding(Padding::PKCS1_PSS)?;
            signer.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)?;
            signer.set_rsa_mgf1_md(md)?;
        }
    }
    signer.sign_oneshot_to_vec(message)
}

/// OpenSSL's digest for a scheme's [`DigestAlgorithm`]; `None` for the pure schemes.
pub fn message_digest(digest: DigestAlgorithm) -> Option<MessageDigest> {
    match digest {
        DigestAlgorithm::Sha256 => Some(MessageDigest::sha256()),
        DigestAlgorithm::Sha384 => Some(MessageDigest::sha384()),
        DigestAlgorithm::Sha512 => Some(MessageDigest::sha512()),
        DigestAlgorithm::None => None,
    }
}

/// Generates a key of `algorithm` with OpenSSL.
pub fn generate(algorithm: KeyAlgorithm) -> Result<PKey<Private>, openssl::error::ErrorStack> {
    let ec = |nid| EcGroup::from_curve_name(nid).and_then(|g| EcKey::generate(&g)).and_then(PKey::from_ec_key);
    let ml_dsa = |kind| {
        let mut seed = [0u8; 32];
        openssl::rand::rand_bytes(&mut seed)?;
        PKey::private_key_from_seed(None, kind, None, &seed)
    };
    match algorithm {
        KeyAlgorithm::EcP256 => ec(Nid::X9_62_PRIME256V1),
        KeyAlgorithm::EcP384 => ec(Nid::SECP384R1),
        KeyAlgorithm::EcP521 => ec(Nid::SECP521R1),
        KeyAlgorithm::Ed25519 => PKey::generate_ed25519(),
        KeyAlgorithm::Rsa2048 => Rsa::generate(2048).and_then(PKey::from_rsa),
        KeyAlgorithm::Rsa3072 => Rsa::generate(3072).and_then(PKey::from_rsa),
        KeyAlgorithm::Rsa4096 => Rsa::generate(4096).and_then(PKey::from_rsa),
        KeyAlgorithm::MlDsa44 => ml_dsa(KeyType::ML_DSA_44),
        KeyAlgorithm::MlDsa65 => ml_dsa(KeyType::ML_DSA_65),
        KeyAlgorithm::MlDsa87 => ml_dsa(KeyType::ML_DSA_87),
    }
}

/// Which of signd's algorithms a parsed key is.
pub fn algorithm_of(pkey: &PKey<Private>) -> Result<KeyAlgorithm, IpcError> {
    let unsupported = |what: String| IpcError::new(ErrorKind::Unsupported, format!("unsupported key: {what}"));
    match pkey.id() {
        Id::EC => {
            let ec = pkey.ec_key().map_err(backend)?;
            match ec.group().curve_name() {
                Some(Nid::X9_62_PRIME256V1) => Ok(KeyAlgorithm::EcP256),
                Some(Nid::SECP384R1) => Ok(KeyAlgorithm::EcP384),
                Some(Nid::SECP521R1) => Ok(KeyAlgorithm::EcP521),
                other => Err(unsupported(format!("EC curve {other:?}"))),
            }
        }
        Id::ED25519 => Ok(KeyAlgorithm::Ed25519),
        Id::RSA => match pkey.bits() {
            2048 => Ok(KeyAlgorithm::Rsa2048),
            3072 => Ok(KeyAlgorithm::Rsa3072),
            4096 => Ok(KeyAlgorithm::Rsa4096),
            bits => Err(unsupported(format!("RSA with a {bits}-bit modulus"))),
        },
        _ if pkey.is_a(KeyType::ML_DSA_44) => Ok(KeyAlgorithm::MlDsa44),
        _ if pkey.is_a(KeyType::ML_DSA_65) => Ok(KeyAlgorithm::MlDsa65),
        _ if pkey.is_a(KeyType::ML_DSA_87) => Ok(KeyAlgorithm::MlDsa87),
        other => Err(unsupported(format!("key type {other:?}"))),
    }
}

fn parse_private(bytes: &[u8]) -> Result<PKey<Private>, openssl::error::ErrorStack> {
    if bytes.starts_with(b"-----BEGIN") {
        PKey::private_key_from_pem(bytes)
    } else {
        PKey::private_key_from_pkcs8(bytes)
    }
}

/// Writes `bytes` to `path` with mode 0600, durably and atomically: a crash
/// leaves either no file or the whole file, never a torn one.
fn write_private_file(path: &Path, bytes: &[u8]) -> Result<(), IpcError> {
    if path.exists() {
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("{} already exists", path.display())));
    }
    let tmp = path.with_extension("pem.tmp");
    let result = (|| {
        let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    result.map_err(|e: std::io::Error| {
        let _ = fs::remove_file(&tmp);
        backend_io(path, e)
    })
}

fn backend(e: openssl::error::ErrorStack) -> IpcError {
    IpcError::new(ErrorKind::Backend, format!("openssl: {e}"))
}

fn backend_io(path: &Path, e: std::io::Error) -> IpcError {
    IpcError::new(ErrorKind::Backend, format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::sign::Verifier;

    fn verify(pkey: &PKey<Private>, scheme: SignatureScheme, msg: &[u8], sig: &[u8]) -> bool {
        let public = PKey::public_key_from_der(&pkey.public_key_to_der().unwrap()).unwrap();
        let (md, pss) = (message_digest(scheme.digest()), scheme.is_pss());
        let mut v = match md {
            Some(md) => Verifier::new(md, &public).unwrap(),
            None => Verifier::new_without_digest(&public).unwrap(),
        };
        if pss {
            v.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
            v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).unwrap();
        }
        v.verify_oneshot(sig, msg).unwrap()
    }

    #[test]
    fn every_algorithm_generates_signs_and_round_trips() {
        for alg in KeyAlgorithm::ALL.into_iter().filter(|a| !matches!(a, KeyAlgorithm::Rsa4096)) {
            let pkey = generate(alg).unwrap();
            assert_eq!(algorithm_of(&pkey).unwrap(), alg);
            let scheme = alg.default_scheme();
            let sig = sign(&pkey, scheme, b"hello").unwrap();
            assert!(verify(&pkey, scheme, b"hello", &sig), "{alg}");
            assert!(!verify(&pkey, scheme, b"hellO", &sig), "{alg} accepted a wrong message");
            let pem = pkey.private_key_to_pem_pkcs8().unwrap();
            assert_eq!(parse_private(&pem).unwrap().public_key_to_der().unwrap(), pkey.public_key_to_der().unwrap());
        }
    }

    #[test]
    fn held_ecdsa_keys_sign_every_hash_verifiably() {
        use SignatureScheme as S;
        for alg in [KeyAlgorithm::EcP256, KeyAlgorithm::EcP384, KeyAlgorithm::EcP521] {
            let pkey = generate(alg).unwrap();
            let key = OpensslKey::new(pkey.clone(), alg).unwrap();
            assert!(key.ec.is_some(), "{alg} takes the ECDSA_do_sign path");
            for scheme in [S::EcdsaSha256, S::EcdsaSha384, S::EcdsaSha512] {
                let sig = key.sign_message(scheme, b"hello").unwrap();
                assert!(verify(&pkey, scheme, b"hello", &sig), "{alg} {scheme:?}");
                assert!(!verify(&pkey, scheme, b"hellO", &sig), "{alg} {scheme:?} accepted a wrong message");
                // Random nonces: the same message never gives the same signature.
                assert_ne!(sig, key.sign_message(scheme, b"hello").unwrap());
            }
        }
    }

    #[test]
    fn precomputed_nonces_sign_verifiably_and_are_spent_once() {
        use SignatureScheme as S;
        for alg in [KeyAlgorithm::EcP256, KeyAlgorithm::EcP384, KeyAlgorithm::EcP521] {
            let pkey = generate(alg).unwrap();
            let key = OpensslKey::new(pkey.clone(), alg).unwrap();
            assert_eq!(key.nonces_ready(), 0, "nothing is precomputed unless asked");
            while key.prepare_one() {}
            let stocked = key.nonces_ready();
            assert_eq!(stocked, super::super::nonces::STOCK, "{alg}: prepared up to the stock");
            let mut rs = std::collections::HashSet::new();
            for (i, scheme) in
                [S::EcdsaSha256, S::EcdsaSha384, S::EcdsaSha512].into_iter().cycle().take(stocked).enumerate()
            {
                let sig = key.sign_message(scheme, b"same message").unwrap();
                assert_eq!(key.nonces_ready(), stocked - i - 1, "{alg}: each signature spends one pair");
                assert!(verify(&pkey, scheme, b"same message", &sig), "{alg} {scheme:?}");
                assert!(!verify(&pkey, scheme, b"Same message", &sig), "{alg} {scheme:?}: wrong message accepted");
                let r = openssl::ecdsa::EcdsaSig::from_der(&sig).unwrap().r().to_vec();
                assert!(rs.insert(r), "{alg}: a nonce was used twice");
            }
            // Stock spent: signing goes on with OpenSSL's own nonces.
            let sig = key.sign_message(S::EcdsaSha256, b"after").unwrap();
            assert!(verify(&pkey, S::EcdsaSha256, b"after", &sig));
            assert!(key.prepare_one(), "{alg}: an emptied stock is prepared again");
        }
        let ed = OpensslKey::new(generate(KeyAlgorithm::Ed25519).unwrap(), KeyAlgorithm::Ed25519).unwrap();
        assert!(!ed.prepare_one(), "only ECDSA keys prepare");
    }

    #[test]
    fn rsa_pss_verifies() {
        let pkey = generate(KeyAlgorithm::Rsa2048).unwrap();
        let sig = sign(&pkey, SignatureScheme::RsaPssSha384, b"m").unwrap();
        assert!(verify(&pkey, SignatureScheme::RsaPssSha384, b"m", &sig));
    }

    #[test]
    fn files_are_private_and_truncation_is_caught() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let b = OpensslBackend::new(dir.path()).unwrap();
        let k = b.generate("k1", KeyAlgorithm::EcP256).unwrap();
        let path = dir.path().join(&k.location);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(b.load(&k.location).unwrap().spki(), k.key.spki());
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(b.load(&k.location).err().unwrap().kind, ErrorKind::KeyUnavailable);
        assert_eq!(b.generate("k1", KeyAlgorithm::EcP256).err().unwrap().kind, ErrorKind::AlreadyExists);
    }

    #[test]
    fn import_checks_the_algorithm() {
        let dir = tempfile::tempdir().unwrap();
        let b = OpensslBackend::new(dir.path()).unwrap();
        let der = generate(KeyAlgorithm::Ed25519).unwrap().private_key_to_pkcs8().unwrap();
        assert_eq!(b.import("x", KeyAlgorithm::EcP256, &der).err().unwrap().kind, ErrorKind::WrongAlgorithm);
        assert!(b.import("x", KeyAlgorithm::Ed25519, &der).is_ok());
        assert_eq!(b.import("y", KeyAlgorithm::Ed25519, b"garbage").err().unwrap().kind, ErrorKind::InvalidArgument);
    }
}
