//! Local verification, no daemon: signatures over messages, and X.509 paths.

use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{Id, KeyType, PKey, Public};
use openssl::rsa::Padding;
use openssl::sign::{RsaPssSaltlen, Verifier};
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyParam;
use openssl::x509::{X509StoreContext, X509};
use signet_ipc::{DigestAlgorithm, IpcError, KeyAlgorithm, SignatureScheme};

use crate::boundary::{self, bytes, handle};
use crate::buffer::pki_buffer;
use crate::result::{pki_result, Error};
use crate::scheme::scheme_from_c;

/// Verifies `sig` over `msg` with the public key `spki` (a DER
/// SubjectPublicKeyInfo, as `pki_public_key` returns; PEM is accepted too),
/// in the key's default scheme: ECDSA P-256/SHA-256, P-384/SHA-384,
/// P-521/SHA-512; Ed25519; RSA PKCS#1 v1.5 with SHA-256 (any modulus size);
/// ML-DSA-44/65/87 (pure, empty context). Local: needs no daemon.
///
/// Returns `PKI_RESULT_OK` if the signature is valid.
///
/// Errors: `PKI_RESULT_BAD_SIGNATURE` (does not verify, or is malformed),
/// `PKI_RESULT_MALFORMED_KEY`, `PKI_RESULT_UNSUPPORTED_KEY`,
/// `PKI_RESULT_NULL_PARAMETER`.
#[no_mangle]
pub extern "C" fn pki_verify(
    spki: *const u8,
    spki_len: usize,
    msg: *const u8,
    msg_len: usize,
    sig: *const u8,
    sig_len: usize,
) -> pki_result {
    pki_verify_scheme(spki, spki_len, 0, msg, msg_len, sig, sig_len)
}

/// Like `pki_verify` with an explicit scheme, one of `pki_scheme` (e.g.
/// `PKI_SCHEME_RSA_PSS_SHA256`, `PKI_SCHEME_ECDSA_SHA512` on a P-256 key).
/// `PKI_RESULT_WRONG_ALGORITHM` if the scheme does not fit the key.
#[no_mangle]
pub extern "C" fn pki_verify_scheme(
    spki: *const u8,
    spki_len: usize,
    scheme: u32,
    msg: *const u8,
    msg_len: usize,
    sig: *const u8,
    sig_len: usize,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller promises each pointer has its length in readable bytes.
        let (spki, msg, sig) =
            unsafe { (bytes(spki, spki_len, "spki")?, bytes(msg, msg_len, "msg")?, bytes(sig, sig_len, "sig")?) };
        if spki.is_empty() {
            return Err(Error::new(pki_result::PKI_RESULT_MALFORMED_KEY, "spki is empty"));
        }
        let scheme = scheme_from_c(scheme)?;
        verify(spki, scheme, msg, sig)
    })
}

fn verify(spki: &[u8], scheme: SignatureScheme, msg: &[u8], sig: &[u8]) -> Result<(), Error> {
    let parsed =
        if spki.starts_with(b"-----BEGIN") { PKey::public_key_from_pem(spki) } else { PKey::public_key_from_der(spki) };
    let key = parsed.map_err(|e| Error::new(pki_result::PKI_RESULT_MALFORMED_KEY, format!("public key: {e}")))?;
    let scheme = family(&key)?.resolve(scheme).map_err(IpcError::from)?;
    // Pure schemes verify the message itself. `Default` was resolved above.
    let (digest, pss) = (message_digest(scheme.digest()), scheme.is_pss());
    let openssl = |e: openssl::error::ErrorStack| Error::new(pki_result::PKI_RESULT_INTERNAL, format!("openssl: {e}"));
    let mut verifier = match digest {
        Some(md) => Verifier::new(md, &key),
        None => Verifier::new_without_digest(&key),
    }
    .map_err(openssl)?;
    if let (true, Some(md)) = (pss, digest) {
        verifier.set_rsa_padding(Padding::PKCS1_PSS).map_err(openssl)?;
        verifier.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).map_err(openssl)?;
        verifier.set_rsa_mgf1_md(md).map_err(openssl)?;
    }
    match verifier.verify_oneshot(sig, msg) {
        Ok(true) => Ok(()),
        Ok(false) => {
            Err(Error::new(pki_result::PKI_RESULT_BAD_SIGNATURE, format!("{scheme} signature does not verify")))
        }
        Err(e) => {
            Err(Error::new(pki_result::PKI_RESULT_BAD_SIGNATURE, format!("{scheme} signature is malformed: {e}")))
        }
    }
}

/// OpenSSL's digest for a scheme's [`DigestAlgorithm`]; `None` for the pure schemes.
fn message_digest(digest: DigestAlgorithm) -> Option<MessageDigest> {
    match digest {
        DigestAlgorithm::Sha256 => Some(MessageDigest::sha256()),
        DigestAlgorithm::Sha384 => Some(MessageDigest::sha384()),
        DigestAlgorithm::Sha512 => Some(MessageDigest::sha512()),
        DigestAlgorithm::None => None,
    }
}

/// The signet algorithm whose schemes fit `key`. RSA keys of any size map to
/// the RSA family: only the schemes allowed matter here, not the size.
fn family(key: &PKey<Public>) -> Result<KeyAlgorithm, Error> {
    let unsupported = |what: String| Error::new(pki_result::PKI_RESULT_UNSUPPORTED_KEY, what);
    match key.id() {
        Id::EC => {
            let ec = key.ec_key().map_err(|e| unsupported(format!("EC key: {e}")))?;
            match ec.group().curve_name() {
                Some(Nid::X9_62_PRIME256V1) => Ok(KeyAlgorithm::EcP256),
                Some(Nid::SECP384R1) => Ok(KeyAlgorithm::EcP384),
                Some(Nid::SECP521R1) => Ok(KeyAlgorithm::EcP521),
                other => Err(unsupported(format!("unsupported EC curve {other:?}"))),
            }
        }
        Id::ED25519 => Ok(KeyAlgorithm::Ed25519),
        Id::RSA => Ok(KeyAlgorithm::Rsa2048),
        _ if key.is_a(KeyType::ML_DSA_44) => Ok(KeyAlgorithm::MlDsa44),
        _ if key.is_a(KeyType::ML_DSA_65) => Ok(KeyAlgorithm::MlDsa65),
        _ if key.is_a(KeyType::ML_DSA_87) => Ok(KeyAlgorithm::MlDsa87),
        other => Err(unsupported(format!("unsupported key type {other:?}"))),
    }
}

/// Validates the X.509 path from the certificate `cert` (DER, or PEM) to one
/// of `n_roots` trust anchors `roots` (each a `pki_buffer` holding a DER or
/// PEM certificate, e.g. made with `pki_buffer_new`), as of `unix_time`
/// (seconds since the Unix epoch; 0 means now). Local: needs no daemon.
///
/// Checks signatures, validity periods and CA constraints along the path
/// (OpenSSL's default X.509 verification); no intermediates are supplied, so
/// `cert` must be issued by a root directly, or be a root. Key usage for a
/// purpose and host names are not checked. `roots` may be NULL when
/// `n_roots` is 0 (then nothing is trusted).
///
/// Returns `PKI_RESULT_OK` if the path is valid. On failure the code says
/// why and `pki_last_error()` gives OpenSSL's reason and the depth in the
/// path where it failed (0 is `cert` itself).
///
/// Errors: `PKI_RESULT_MALFORMED_CERT` (cert or a root does not parse),
/// `PKI_RESULT_CERT_EXPIRED`, `PKI_RESULT_CERT_NOT_YET_VALID`,
/// `PKI_RESULT_CERT_UNTRUSTED` (no path to a given root),
/// `PKI_RESULT_CERT_INVALID` (anything else), `PKI_RESULT_NULL_PARAMETER`.
#[no_mangle]
pub extern "C" fn pki_cert_verify(
    cert: *const u8,
    cert_len: usize,
    roots: *const *const pki_buffer,
    n_roots: usize,
    unix_time: i64,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller promises `cert_len` readable bytes at `cert`.
        let cert = unsafe { bytes(cert, cert_len, "cert") }?;
        let roots: &[*const pki_buffer] = if n_roots == 0 {
            &[]
        } else if roots.is_null() {
            return Err(Error::null("roots"));
        } else {
            // SAFETY: non-NULL; the caller promises `n_roots` pointers at `roots`.
            unsafe { std::slice::from_raw_parts(roots, n_roots) }
        };
        let roots = roots
            .iter()
            .enumerate()
            // SAFETY: the caller promises each is a live buffer (NULL is rejected).
            .map(|(i, r)| unsafe { handle(*r, &format!("roots[{i}]")) }.map(pki_buffer::as_slice))
            .collect::<Result<Vec<_>, _>>()?;
        cert_verify(cert, &roots, unix_time)
    })
}

fn cert_verify(cert: &[u8], roots: &[&[u8]], unix_time: i64) -> Result<(), Error> {
    let internal = |e: openssl::error::ErrorStack| Error::new(pki_result::PKI_RESULT_INTERNAL, format!("openssl: {e}"));
    let leaf = parse_cert(cert, "cert")?;
    let mut store = X509StoreBuilder::new().map_err(internal)?;
    for (i, root) in roots.iter().enumerate() {
        store.add_cert(parse_cert(root, &format!("roots[{i}]"))?).map_err(internal)?;
    }
    if unix_time != 0 {
        let mut param = X509VerifyParam::new().map_err(internal)?;
        #[allow(clippy::useless_conversion)] // time_t is narrower than i64 on some targets.
        let time = unix_time.try_into().map_err(|_| Error::invalid(format!("unix_time {unix_time} out of range")))?;
        param.set_time(time);
        store.set_param(&param).map_err(internal)?;
    }
    let store = store.build();
    let chain = Stack::new().map_err(internal)?;
    let mut ctx = X509StoreContext::new().map_err(internal)?;
    let (ok, result, depth) =
        ctx.init(&store, &leaf, &chain, |c| Ok((c.verify_cert()?, c.error(), c.error_depth()))).map_err(internal)?;
    if ok {
        return Ok(());
    }
    // X509_V_ERR_* numbers: stable across OpenSSL versions (x509_vfy.h).
    let code = match result.as_raw() {
        9 => pki_result::PKI_RESULT_CERT_NOT_YET_VALID,
        10 => pki_result::PKI_RESULT_CERT_EXPIRED,
        // Unable to get issuer, self-signed leaf or chain not among the roots,
        // unable to verify the leaf's signature without its issuer.
        2 | 18 | 19 | 20 | 21 => pki_result::PKI_RESULT_CERT_UNTRUSTED,
        _ => pki_result::PKI_RESULT_CERT_INVALID,
    };
    Err(Error::new(code, format!("certificate verify failed at depth {depth}: {}", result.error_string())))
}

fn parse_cert(der_or_pem: &[u8], what: &str) -> Result<X509, Error> {
    let parsed =
        if der_or_pem.starts_with(b"-----BEGIN") { X509::from_pem(der_or_pem) } else { X509::from_der(der_or_pem) };
    parsed.map_err(|e| {
        Error::new(pki_result::PKI_RESULT_MALFORMED_CERT, format!("{what}: not an X.509 certificate: {e}"))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::pkey::Private;
    use openssl::rsa::Rsa;
    use openssl::sign::Signer;

    fn sign(key: &PKey<Private>, md: Option<MessageDigest>, pss: bool, msg: &[u8]) -> Vec<u8> {
        let mut s = match md {
            Some(md) => Signer::new(md, key).unwrap(),
            None => Signer::new_without_digest(key).unwrap(),
        };
        if pss {
            s.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
            s.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).unwrap();
            s.set_rsa_mgf1_md(md.unwrap()).unwrap();
        }
        s.sign_oneshot_to_vec(msg).unwrap()
    }

    fn code(r: Result<(), Error>) -> pki_result {
        r.err().map_or(pki_result::PKI_RESULT_OK, |e| e.code)
    }

    #[test]
    fn default_schemes_verify_and_others_do_not() {
        let ec = |nid| PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(nid).unwrap()).unwrap()).unwrap();
        let ml = |kind| PKey::private_key_from_seed(None, kind, None, &[7u8; 32]).unwrap();
        let cases: Vec<(PKey<Private>, Option<MessageDigest>)> = vec![
            (ec(Nid::X9_62_PRIME256V1), Some(MessageDigest::sha256())),
            (ec(Nid::SECP384R1), Some(MessageDigest::sha384())),
            (ec(Nid::SECP521R1), Some(MessageDigest::sha512())),
            (PKey::generate_ed25519().unwrap(), None),
            (PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap(), Some(MessageDigest::sha256())),
            (ml(KeyType::ML_DSA_44), None),
            (ml(KeyType::ML_DSA_65), None),
            (ml(KeyType::ML_DSA_87), None),
        ];
        for (key, md) in cases {
            let spki = key.public_key_to_der().unwrap();
            let sig = sign(&key, md, false, b"msg");
            assert_eq!(code(verify(&spki, SignatureScheme::Default, b"msg", &sig)), pki_result::PKI_RESULT_OK);
            assert_eq!(
                code(verify(&spki, SignatureScheme::Default, b"msh", &sig)),
                pki_result::PKI_RESULT_BAD_SIGNATURE
            );
        }
    }

    #[test]
    fn rsa_pss_and_wrong_schemes() {
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let spki = key.public_key_to_der().unwrap();
        let sig = sign(&key, Some(MessageDigest::sha384()), true, b"m");
        assert_eq!(code(verify(&spki, SignatureScheme::RsaPssSha384, b"m", &sig)), pki_result::PKI_RESULT_OK);
        assert_eq!(
            code(verify(&spki, SignatureScheme::RsaPssSha256, b"m", &sig)),
            pki_result::PKI_RESULT_BAD_SIGNATURE
        );
        assert_eq!(code(verify(&spki, SignatureScheme::Default, b"m", &sig)), pki_result::PKI_RESULT_BAD_SIGNATURE);
        assert_eq!(code(verify(&spki, SignatureScheme::Ed25519, b"m", &sig)), pki_result::PKI_RESULT_WRONG_ALGORITHM);
        assert_eq!(code(verify(b"junk", SignatureScheme::Default, b"m", &sig)), pki_result::PKI_RESULT_MALFORMED_KEY);
        let k1 = PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::SECP256K1).unwrap()).unwrap());
        let k1 = k1.unwrap().public_key_to_der().unwrap();
        assert_eq!(code(verify(&k1, SignatureScheme::Default, b"m", &sig)), pki_result::PKI_RESULT_UNSUPPORTED_KEY);
    }
}
