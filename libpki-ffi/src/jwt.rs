//! JWT verification, local: a token issuer's JWK set (given by the caller) and
//! tokens checked against it with signet-jose.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use signet_jose::jwt::{verify_jwt, Claims, Validation};
use signet_jose::{CompactJws, JoseError, Jwks};

use crate::boundary::{self, bytes, handle, out, string};
use crate::result::{pki_result, Error};

/// A token issuer's JWK set: the public keys its JWTs are verified with.
/// Made by `pki_jwks_new`, freed with `pki_jwks_free`; immutable, so it may
/// be used from many threads at once.
pub struct pki_jwks {
    jwks: Jwks,
}

/// A verified JWT: its claims, read with `pki_jwt_claim_str` and
/// `pki_jwt_claim_int`. Made by `pki_jwt_verify`, freed with `pki_jwt_free`;
/// immutable, so it may be read from many threads at once.
pub struct pki_jwt {
    claims: Claims,
    /// The payload's top-level claims as sent.
    raw: Map<String, Value>,
    /// Each string claim as a C string, made once so pointers stay valid
    /// until `pki_jwt_free`.
    strings: HashMap<String, CString>,
}

/// Parses a JWK set (`{"keys":[...]}`, JSON, at most 1 MiB) into a new
/// handle written to `*jwks_out`. Keys libpki cannot use (other key types or
/// algorithms, encryption keys) are skipped; the set must hold at least one
/// usable key: EC P-256/P-384/P-521, RSA (2048 to 8192 bits), Ed25519 or
/// ML-DSA-44/65/87 (`"kty":"AKP"`). Fetching the set (e.g. from the issuer's
/// `jwks_uri`) is the caller's job. Free it with `pki_jwks_free`.
///
/// Errors: `PKI_RESULT_MALFORMED_JWKS`, `PKI_RESULT_NULL_PARAMETER`.
#[no_mangle]
pub extern "C" fn pki_jwks_new(json: *const u8, json_len: usize, jwks_out: *mut *mut pki_jwks) -> pki_result {
    boundary::result(|| {
        let out = out(jwks_out, "jwks_out")?;
        // SAFETY: the caller promises `json_len` readable bytes at `json`.
        let json = unsafe { bytes(json, json_len, "json") }?;
        let jwks = Jwks::parse(json).map_err(|e| Error::new(pki_result::PKI_RESULT_MALFORMED_JWKS, e.to_string()))?;
        if jwks.is_empty() {
            return Err(Error::new(pki_result::PKI_RESULT_MALFORMED_JWKS, "the JWK set has no key libpki can use"));
        }
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = Box::into_raw(Box::new(pki_jwks { jwks })) };
        Ok(())
    })
}

/// Frees a JWK set. NULL is a no-op. The set must not be used afterwards.
#[no_mangle]
pub extern "C" fn pki_jwks_free(jwks: *mut pki_jwks) {
    boundary::guard((), || {
        if !jwks.is_null() {
            // SAFETY: a non-NULL set was made by `pki_jwks_new` (Box::into_raw)
            // and the caller gives up its only reference.
            drop(unsafe { Box::from_raw(jwks) });
        }
    })
}

/// Verifies the compact JWS `token` (a NUL-terminated string) with a key of
/// `jwks` and checks its claims; on success writes a new `pki_jwt` to
/// `*jwt_out` (free it with `pki_jwt_free`).
///
/// The key is the one the header's `kid` names, of a kind its `alg` fits
/// (ES256, ES384, ES512, EdDSA, RS256, PS256, ML-DSA-44/65/87; `none` and
/// HS256/384/512 are refused); a token without `kid` is tried against every
/// key that fits. Then, with the system clock as now: `exp` is required and
/// the token is expired once `now >= exp + leeway_seconds`; it is not valid
/// while `now + leeway_seconds < nbf`; `iss` must equal `issuer` and `aud`
/// (a string or an array) must contain `audience`, each unless NULL. The
/// header's `typ` is not checked.
///
/// Errors: `PKI_RESULT_BAD_SIGNATURE` (the signature does not verify: a
/// forged or altered token), `PKI_RESULT_TOKEN_EXPIRED`,
/// `PKI_RESULT_TOKEN_NOT_YET_VALID`, `PKI_RESULT_TOKEN_WRONG_ISSUER`,
/// `PKI_RESULT_TOKEN_WRONG_AUDIENCE`, `PKI_RESULT_TOKEN_UNKNOWN_KEY` (no key
/// in the set fits the token's `kid` and `alg`),
/// `PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM`, `PKI_RESULT_TOKEN_MALFORMED`
/// (not a compact JWS, longer than 64 KiB, claims that are not a JSON
/// object or are mistyped, no `exp`), `PKI_RESULT_INVALID_ARGUMENT` (a string
/// that is not UTF-8), `PKI_RESULT_NULL_PARAMETER`.
#[no_mangle]
pub extern "C" fn pki_jwt_verify(
    token: *const c_char,
    jwks: *const pki_jwks,
    issuer: *const c_char,
    audience: *const c_char,
    leeway_seconds: u64,
    jwt_out: *mut *mut pki_jwt,
) -> pki_result {
    boundary::result(|| {
        let out = out(jwt_out, "jwt_out")?;
        // SAFETY: the caller promises a NUL-terminated string and a live set.
        let (token, jwks) = unsafe { (string(token, "token")?, handle(jwks, "jwks")?) };
        // SAFETY: each is NULL or a NUL-terminated string.
        let issuer = if issuer.is_null() { None } else { Some(unsafe { string(issuer, "issuer") }?.to_owned()) };
        // SAFETY: as above.
        let audience =
            if audience.is_null() { None } else { Some(unsafe { string(audience, "audience") }?.to_owned()) };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let v = Validation { issuer, audience, now, leeway: leeway_seconds, typ: None };
        let claims = verify_jwt(token, &jwks.jwks, &v).map_err(token_error)?;
        // The token verified, so it parses; its payload is a JSON object.
        let jws = CompactJws::parse(token).map_err(token_error)?;
        let raw: Map<String, Value> = serde_json::from_slice(jws.payload())
            .map_err(|e| Error::new(pki_result::PKI_RESULT_TOKEN_MALFORMED, format!("claims: {e}")))?;
        let strings =
            raw.iter().filter_map(|(name, value)| Some((name.clone(), CString::new(value.as_str()?).ok()?))).collect();
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = Box::into_raw(Box::new(pki_jwt { claims, raw, strings })) };
        Ok(())
    })
}

/// The string claim `name` of a verified token (e.g. `"sub"`, `"client_id"`,
/// `"scope"`, `"iss"`, or `"aud"` when it is a single string), valid until
/// `pki_jwt_free`. NULL if the claim is absent, not a string (an array `aud`,
/// a number), holds a NUL byte, or if an argument is NULL.
#[no_mangle]
pub extern "C" fn pki_jwt_claim_str(jwt: *const pki_jwt, name: *const c_char) -> *const c_char {
    boundary::guard(std::ptr::null(), || {
        // SAFETY: the caller passes a live token or NULL, and a NUL-terminated string or NULL.
        let (Ok(jwt), Ok(name)) = (unsafe { handle(jwt, "jwt") }, unsafe { string(name, "name") }) else {
            return std::ptr::null();
        };
        jwt.strings.get(name).map_or(std::ptr::null(), |s| s.as_ptr())
    })
}

/// Reads the integer claim `name` of a verified token into `*value_out` and
/// returns true; false (and `*value_out` untouched) if the claim is absent or
/// not an integer that fits in int64_t, or if an argument is NULL. `exp`,
/// `nbf` and `iat` read as whole seconds even when sent with a fraction.
#[no_mangle]
pub extern "C" fn pki_jwt_claim_int(jwt: *const pki_jwt, name: *const c_char, value_out: *mut i64) -> bool {
    boundary::guard(false, || {
        // SAFETY: the caller passes a live token or NULL, and a NUL-terminated string or NULL.
        let (Ok(jwt), Ok(name)) = (unsafe { handle(jwt, "jwt") }, unsafe { string(name, "name") }) else {
            return false;
        };
        let Ok(value_out) = out(value_out, "value_out") else { return false };
        let date = match name {
            "exp" => jwt.claims.exp,
            "nbf" => jwt.claims.nbf,
            "iat" => jwt.claims.iat,
            _ => None,
        };
        let value = date.and_then(|d| i64::try_from(d).ok()).or_else(|| jwt.raw.get(name)?.as_i64());
        match value {
            Some(v) => {
                // SAFETY: `value_out` is non-NULL and the caller promises it is writable.
                unsafe { *value_out = v };
                true
            }
            None => false,
        }
    })
}

/// Frees a verified token. NULL is a no-op. The token, and every string
/// `pki_jwt_claim_str` returned for it, must not be used afterwards.
#[no_mangle]
pub extern "C" fn pki_jwt_free(jwt: *mut pki_jwt) {
    boundary::guard((), || {
        if !jwt.is_null() {
            // SAFETY: a non-NULL token was made by `pki_jwt_verify`
            // (Box::into_raw) and the caller gives up its only reference.
            drop(unsafe { Box::from_raw(jwt) });
        }
    })
}

fn token_error(e: JoseError) -> Error {
    use pki_result::*;
    let code = match &e {
        JoseError::BadSignature => PKI_RESULT_BAD_SIGNATURE,
        JoseError::Expired => PKI_RESULT_TOKEN_EXPIRED,
        JoseError::NotYetValid => PKI_RESULT_TOKEN_NOT_YET_VALID,
        JoseError::WrongIssuer => PKI_RESULT_TOKEN_WRONG_ISSUER,
        JoseError::WrongAudience => PKI_RESULT_TOKEN_WRONG_AUDIENCE,
        JoseError::UnknownKey | JoseError::AlgorithmKeyMismatch { .. } => PKI_RESULT_TOKEN_UNKNOWN_KEY,
        JoseError::UnsupportedAlgorithm(_) => PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM,
        JoseError::Internal(_) => PKI_RESULT_INTERNAL,
        // Malformed, a bad header jwk, a missing claim, and kinds added later.
        _ => PKI_RESULT_TOKEN_MALFORMED,
    };
    Error::new(code, format!("token: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};

    use openssl::pkey::PKey;
    use serde_json::json;
    use signet_jose::{compact, encode_signing_input, jwk_json, Algorithm};

    use super::*;
    use crate::result::pki_result::*;

    fn now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn verify_and_read_claims() {
        let key = PKey::generate_ed25519().unwrap();
        let set = json!({"keys": [jwk_json(&key.public_key_to_der().unwrap(), "k1", Algorithm::EdDsa).unwrap()]});
        let set = set.to_string();
        let mut jwks = null_mut();
        assert_eq!(pki_jwks_new(set.as_ptr(), set.len(), &mut jwks), PKI_RESULT_OK);
        let claims = json!({"iss": "i", "aud": ["a", "b"], "sub": "alice", "exp": now() + 60, "n": -5, "f": 1.5});
        let input = encode_signing_input(&json!({"alg": "EdDSA", "kid": "k1"}), claims.to_string().as_bytes());
        let token = CString::new(compact(&input, &Algorithm::EdDsa.sign(&key, input.as_bytes()).unwrap())).unwrap();
        let mut jwt = null_mut();
        assert_eq!(pki_jwt_verify(token.as_ptr(), jwks, c"i".as_ptr(), c"b".as_ptr(), 0, &mut jwt), PKI_RESULT_OK);
        let s = |name: &CStr| {
            let p = pki_jwt_claim_str(jwt, name.as_ptr());
            // SAFETY: a non-NULL result is a C string owned by `jwt`.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned())
        };
        assert_eq!(s(c"sub").as_deref(), Some("alice"));
        assert_eq!(s(c"aud"), None);
        assert_eq!(s(c"exp"), None);
        assert_eq!(s(c"missing"), None);
        let mut v = 0;
        assert!(pki_jwt_claim_int(jwt, c"n".as_ptr(), &mut v));
        assert_eq!(v, -5);
        assert!(pki_jwt_claim_int(jwt, c"exp".as_ptr(), &mut v));
        assert_eq!(v, i64::try_from(now() + 60).unwrap());
        assert!(!pki_jwt_claim_int(jwt, c"f".as_ptr(), &mut v));
        assert!(!pki_jwt_claim_int(jwt, c"sub".as_ptr(), &mut v));
        assert!(!pki_jwt_claim_int(jwt, c"n".as_ptr(), null_mut()));
        assert!(pki_jwt_claim_str(null(), c"sub".as_ptr()).is_null());
        assert!(pki_jwt_claim_str(jwt, null()).is_null());
        pki_jwt_free(jwt);

        let mut jwt = null_mut();
        let verify = |iss: &CStr, aud: &CStr, jwt: &mut *mut pki_jwt| {
            pki_jwt_verify(token.as_ptr(), jwks, iss.as_ptr(), aud.as_ptr(), 0, jwt)
        };
        assert_eq!(verify(c"x", c"a", &mut jwt), PKI_RESULT_TOKEN_WRONG_ISSUER);
        assert_eq!(verify(c"i", c"c", &mut jwt), PKI_RESULT_TOKEN_WRONG_AUDIENCE);
        assert!(jwt.is_null(), "no output on failure");
        assert_eq!(pki_jwt_verify(c"a.b.c".as_ptr(), jwks, null(), null(), 0, &mut jwt), PKI_RESULT_TOKEN_MALFORMED);
        assert_eq!(pki_jwt_verify(null(), jwks, null(), null(), 0, &mut jwt), PKI_RESULT_NULL_PARAMETER);
        assert_eq!(pki_jwt_verify(token.as_ptr(), null(), null(), null(), 0, &mut jwt), PKI_RESULT_NULL_PARAMETER);
        assert_eq!(pki_jwt_verify(token.as_ptr(), jwks, null(), null(), 0, null_mut()), PKI_RESULT_NULL_PARAMETER);
        pki_jwks_free(jwks);
        pki_jwks_free(null_mut());
        pki_jwt_free(null_mut());
    }

    #[test]
    fn jwks_errors() {
        let mut jwks = null_mut();
        for bad in [&b"nope"[..], b"{}", b"{\"keys\":[{\"kty\":\"oct\",\"k\":\"AAAA\"}]}"] {
            assert_eq!(pki_jwks_new(bad.as_ptr(), bad.len(), &mut jwks), PKI_RESULT_MALFORMED_JWKS);
        }
        assert!(jwks.is_null());
        assert_eq!(pki_jwks_new(null(), 3, &mut jwks), PKI_RESULT_NULL_PARAMETER);
        assert_eq!(pki_jwks_new(b"{}".as_ptr(), 2, null_mut()), PKI_RESULT_NULL_PARAMETER);
    }
}
