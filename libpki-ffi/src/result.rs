//! Result codes, their names, and the thread's last error message.

use std::cell::RefCell;
use std::ffi::c_char;

use signet_ipc::{ErrorKind, IpcError};

/// What a libpki function did. `PKI_RESULT_OK` is success; every other value
/// is a failure whose detail `pki_last_error()` returns. Codes live in their
/// own range (7000 and up) so they cannot be mistaken for errno or OpenSSL
/// values; new codes may be added, so keep a default case.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pki_result {
    /// Success.
    PKI_RESULT_OK = 7000,
    /// A required pointer argument was NULL.
    PKI_RESULT_NULL_PARAMETER = 7001,
    /// An argument was malformed: a string that is not UTF-8, an unknown
    /// scheme number, a key id or message signd rejects.
    PKI_RESULT_INVALID_ARGUMENT = 7002,
    /// A bug: libpki panicked. The call had no effect.
    PKI_RESULT_PANIC = 7003,
    /// An unexpected failure inside libpki or signd.
    PKI_RESULT_INTERNAL = 7004,

    /// signd cannot be reached (not running, wrong socket path, no permission
    /// on the socket), the connection broke, or signd is shutting down (it
    /// answers the calls it has and refuses new ones; the detail then says
    /// `shutting-down`). Worth retrying later.
    PKI_RESULT_UNAVAILABLE = 7100,
    /// signd's policy does not let this caller (or this role) do that.
    PKI_RESULT_PERMISSION_DENIED = 7101,
    /// No key with that id (or none this caller's role may use).
    PKI_RESULT_UNKNOWN_KEY = 7102,
    /// The signature scheme does not fit the key's algorithm.
    PKI_RESULT_WRONG_ALGORITHM = 7103,
    /// The key exists but signd could not load or check it.
    PKI_RESULT_KEY_UNAVAILABLE = 7104,
    /// signd's crypto backend failed.
    PKI_RESULT_BACKEND = 7105,
    /// A message or batch over signd's configured limit.
    PKI_RESULT_TOO_LARGE = 7106,
    /// The backend or token cannot do this.
    PKI_RESULT_UNSUPPORTED = 7107,

    /// The signature does not verify (wrong key, wrong message, corrupt or
    /// malformed signature).
    PKI_RESULT_BAD_SIGNATURE = 7200,
    /// The public key is not a parseable SubjectPublicKeyInfo.
    PKI_RESULT_MALFORMED_KEY = 7201,
    /// The public key's algorithm (or EC curve) is not one libpki verifies.
    PKI_RESULT_UNSUPPORTED_KEY = 7202,

    /// The certificate (or a root) is not a parseable X.509 certificate.
    PKI_RESULT_MALFORMED_CERT = 7300,
    /// The certificate has expired at the given time.
    PKI_RESULT_CERT_EXPIRED = 7301,
    /// The certificate is not yet valid at the given time.
    PKI_RESULT_CERT_NOT_YET_VALID = 7302,
    /// No path from the certificate to any of the given roots.
    PKI_RESULT_CERT_UNTRUSTED = 7303,
    /// Path validation failed for another reason (bad signature on the
    /// certificate, bad extensions, ...); `pki_last_error()` says which.
    PKI_RESULT_CERT_INVALID = 7304,

    /// The token is not a well-formed JWT: not a compact JWS, too long,
    /// claims that are not a JSON object or are mistyped, no `exp`.
    PKI_RESULT_TOKEN_MALFORMED = 7400,
    /// The token has expired (`exp`, with the leeway).
    PKI_RESULT_TOKEN_EXPIRED = 7401,
    /// The token is not valid yet (`nbf`, with the leeway).
    PKI_RESULT_TOKEN_NOT_YET_VALID = 7402,
    /// The token's `iss` is not the expected issuer.
    PKI_RESULT_TOKEN_WRONG_ISSUER = 7403,
    /// The token's `aud` does not name the expected audience.
    PKI_RESULT_TOKEN_WRONG_AUDIENCE = 7404,
    /// No key in the JWK set fits the token's `kid` and `alg`.
    PKI_RESULT_TOKEN_UNKNOWN_KEY = 7405,
    /// The token's `alg` is not one libpki verifies (`none`, HS256, ...).
    PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM = 7406,
    /// The JWK set is not a JSON `{"keys":[...]}` with a usable key.
    PKI_RESULT_MALFORMED_JWKS = 7407,
}

use pki_result::*;

impl pki_result {
    /// Every code, for lookups by number.
    const ALL: [pki_result; 29] = [
        PKI_RESULT_OK,
        PKI_RESULT_NULL_PARAMETER,
        PKI_RESULT_INVALID_ARGUMENT,
        PKI_RESULT_PANIC,
        PKI_RESULT_INTERNAL,
        PKI_RESULT_UNAVAILABLE,
        PKI_RESULT_PERMISSION_DENIED,
        PKI_RESULT_UNKNOWN_KEY,
        PKI_RESULT_WRONG_ALGORITHM,
        PKI_RESULT_KEY_UNAVAILABLE,
        PKI_RESULT_BACKEND,
        PKI_RESULT_TOO_LARGE,
        PKI_RESULT_UNSUPPORTED,
        PKI_RESULT_BAD_SIGNATURE,
        PKI_RESULT_MALFORMED_KEY,
        PKI_RESULT_UNSUPPORTED_KEY,
        PKI_RESULT_MALFORMED_CERT,
        PKI_RESULT_CERT_EXPIRED,
        PKI_RESULT_CERT_NOT_YET_VALID,
        PKI_RESULT_CERT_UNTRUSTED,
        PKI_RESULT_CERT_INVALID,
        PKI_RESULT_TOKEN_MALFORMED,
        PKI_RESULT_TOKEN_EXPIRED,
        PKI_RESULT_TOKEN_NOT_YET_VALID,
        PKI_RESULT_TOKEN_WRONG_ISSUER,
        PKI_RESULT_TOKEN_WRONG_AUDIENCE,
        PKI_RESULT_TOKEN_UNKNOWN_KEY,
        PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM,
        PKI_RESULT_MALFORMED_JWKS,
    ];

    /// The code's name as a NUL-terminated static string.
    fn name(self) -> &'static str {
        match self {
            PKI_RESULT_OK => "PKI_RESULT_OK\0",
            PKI_RESULT_NULL_PARAMETER => "PKI_RESULT_NULL_PARAMETER\0",
            PKI_RESULT_INVALID_ARGUMENT => "PKI_RESULT_INVALID_ARGUMENT\0",
            PKI_RESULT_PANIC => "PKI_RESULT_PANIC\0",
            PKI_RESULT_INTERNAL => "PKI_RESULT_INTERNAL\0",
            PKI_RESULT_UNAVAILABLE => "PKI_RESULT_UNAVAILABLE\0",
            PKI_RESULT_PERMISSION_DENIED => "PKI_RESULT_PERMISSION_DENIED\0",
            PKI_RESULT_UNKNOWN_KEY => "PKI_RESULT_UNKNOWN_KEY\0",
            PKI_RESULT_WRONG_ALGORITHM => "PKI_RESULT_WRONG_ALGORITHM\0",
            PKI_RESULT_KEY_UNAVAILABLE => "PKI_RESULT_KEY_UNAVAILABLE\0",
            PKI_RESULT_BACKEND => "PKI_RESULT_BACKEND\0",
            PKI_RESULT_TOO_LARGE => "PKI_RESULT_TOO_LARGE\0",
            PKI_RESULT_UNSUPPORTED => "PKI_RESULT_UNSUPPORTED\0",
            PKI_RESULT_BAD_SIGNATURE => "PKI_RESULT_BAD_SIGNATURE\0",
            PKI_RESULT_MALFORMED_KEY => "PKI_RESULT_MALFORMED_KEY\0",
            PKI_RESULT_UNSUPPORTED_KEY => "PKI_RESULT_UNSUPPORTED_KEY\0",
            PKI_RESULT_MALFORMED_CERT => "PKI_RESULT_MALFORMED_CERT\0",
            PKI_RESULT_CERT_EXPIRED => "PKI_RESULT_CERT_EXPIRED\0",
            PKI_RESULT_CERT_NOT_YET_VALID => "PKI_RESULT_CERT_NOT_YET_VALID\0",
            PKI_RESULT_CERT_UNTRUSTED => "PKI_RESULT_CERT_UNTRUSTED\0",
            PKI_RESULT_CERT_INVALID => "PKI_RESULT_CERT_INVALID\0",
            PKI_RESULT_TOKEN_MALFORMED => "PKI_RESULT_TOKEN_MALFORMED\0",
            PKI_RESULT_TOKEN_EXPIRED => "PKI_RESULT_TOKEN_EXPIRED\0",
            PKI_RESULT_TOKEN_NOT_YET_VALID => "PKI_RESULT_TOKEN_NOT_YET_VALID\0",
            PKI_RESULT_TOKEN_WRONG_ISSUER => "PKI_RESULT_TOKEN_WRONG_ISSUER\0",
            PKI_RESULT_TOKEN_WRONG_AUDIENCE => "PKI_RESULT_TOKEN_WRONG_AUDIENCE\0",
            PKI_RESULT_TOKEN_UNKNOWN_KEY => "PKI_RESULT_TOKEN_UNKNOWN_KEY\0",
            PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM => "PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM\0",
            PKI_RESULT_MALFORMED_JWKS => "PKI_RESULT_MALFORMED_JWKS\0",
        }
    }
}

/// The name of a result code (e.g. `"PKI_RESULT_UNKNOWN_KEY"`), as a static
/// NUL-terminated string; `"PKI_RESULT_UNKNOWN"` for a number that is not a
/// code. Never NULL; must not be freed.
#[no_mangle]
pub extern "C" fn pki_result_str(result: u32) -> *const c_char {
    crate::boundary::guard(c"PKI_RESULT_UNKNOWN".as_ptr(), || {
        match pki_result::ALL.iter().find(|r| **r as u32 == result) {
            Some(r) => r.name().as_ptr().cast(),
            None => c"PKI_RESULT_UNKNOWN".as_ptr(),
        }
    })
}

/// Copies the calling thread's last error message into `buf` and returns its
/// full length in bytes (not counting the NUL), like `snprintf`.
///
/// Every function that returns a `pki_result` sets this message: to the
/// empty string on `PKI_RESULT_OK`, to a description (signd's detail, OpenSSL's
/// reason, the certificate path validation failure) otherwise. The message is
/// per thread, so it is safe to read after a call on the same thread even
/// while other threads use libpki.
///
/// At most `buf_len - 1` bytes are copied and `buf` is always NUL-terminated
/// when `buf_len > 0`; pass `buf = NULL, buf_len = 0` to learn the length.
/// A return value `>= buf_len` means the message was truncated.
#[no_mangle]
pub extern "C" fn pki_last_error(buf: *mut c_char, buf_len: usize) -> usize {
    crate::boundary::guard(0, || {
        LAST_ERROR.with(|last| {
            let last = last.borrow();
            let message = last.as_bytes();
            if !buf.is_null() && buf_len > 0 {
                let n = message.len().min(buf_len - 1);
                // SAFETY: the caller promises `buf` has room for `buf_len`
                // bytes; we write `n + 1 <= buf_len` of them, from our own
                // string, which cannot overlap the caller's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
                    *buf.add(n) = 0;
                }
            }
            message.len()
        })
    })
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A failure on its way out to C: the code, and the detail for `pki_last_error`.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: pki_result,
    pub(crate) detail: String,
}

impl Error {
    pub(crate) fn new(code: pki_result, detail: impl Into<String>) -> Self {
        Self { code, detail: detail.into() }
    }

    pub(crate) fn null(what: &str) -> Self {
        Self::new(PKI_RESULT_NULL_PARAMETER, format!("{what} is NULL"))
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::new(PKI_RESULT_INVALID_ARGUMENT, detail)
    }
}

impl From<IpcError> for Error {
    fn from(e: IpcError) -> Self {
        let code = match e.kind {
            ErrorKind::PermissionDenied => PKI_RESULT_PERMISSION_DENIED,
            ErrorKind::UnknownKey => PKI_RESULT_UNKNOWN_KEY,
            ErrorKind::WrongAlgorithm => PKI_RESULT_WRONG_ALGORITHM,
            ErrorKind::InvalidArgument => PKI_RESULT_INVALID_ARGUMENT,
            ErrorKind::KeyUnavailable => PKI_RESULT_KEY_UNAVAILABLE,
            ErrorKind::Backend => PKI_RESULT_BACKEND,
            // Stopping is, to a caller, signd not there for now: retry later.
            ErrorKind::Unavailable | ErrorKind::ShuttingDown => PKI_RESULT_UNAVAILABLE,
            ErrorKind::TooLarge => PKI_RESULT_TOO_LARGE,
            ErrorKind::Unsupported => PKI_RESULT_UNSUPPORTED,
            // Internal, AlreadyExists (admin only) and kinds added later.
            _ => PKI_RESULT_INTERNAL,
        };
        Self::new(code, format!("signd: {}: {}", e.kind, e.detail))
    }
}

/// Records the outcome of a call for `pki_last_error` and returns its code.
pub(crate) fn finish(outcome: Result<(), Error>) -> pki_result {
    let (code, detail) = match outcome {
        Ok(()) => (PKI_RESULT_OK, String::new()),
        Err(e) => (e.code, e.detail),
    };
    LAST_ERROR.with(|last| *last.borrow_mut() = detail);
    code
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn every_code_has_its_name() {
        let mut seen = std::collections::HashSet::new();
        for r in pki_result::ALL {
            assert!(seen.insert(r as u32), "{r:?} listed twice");
            // SAFETY: pki_result_str returns a static C string.
            let name = unsafe { CStr::from_ptr(pki_result_str(r as u32)) };
            assert_eq!(name.to_str(), Ok(format!("{r:?}").as_str()));
        }
        // SAFETY: as above.
        assert_eq!(unsafe { CStr::from_ptr(pki_result_str(0)) }.to_str(), Ok("PKI_RESULT_UNKNOWN"));
    }

    #[test]
    fn last_error_is_set_cleared_and_truncated() {
        assert_eq!(finish(Err(Error::invalid("0123456789"))), PKI_RESULT_INVALID_ARGUMENT);
        let mut buf = [0x55 as c_char; 4];
        assert_eq!(pki_last_error(buf.as_mut_ptr(), buf.len()), 10);
        assert_eq!(buf.map(|c| c as u8), *b"012\0");
        assert_eq!(pki_last_error(std::ptr::null_mut(), 0), 10);
        assert_eq!(finish(Ok(())), PKI_RESULT_OK);
        assert_eq!(pki_last_error(std::ptr::null_mut(), 0), 0);
    }
}
