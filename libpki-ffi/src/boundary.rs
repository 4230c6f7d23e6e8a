//! The panic boundary and argument checks shared by every export.

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::result::{finish, pki_result, Error};

/// Runs `body`; a panic becomes `on_panic`. For exports that return a value
/// rather than a `pki_result`.
pub(crate) fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    // AssertUnwindSafe: after a panic we return `on_panic` and touch none of
    // the state the closure may have left half-updated.
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

/// Runs `body` for an export that returns a `pki_result`: records the outcome
/// for `pki_last_error`, and turns a panic into `PKI_RESULT_PANIC`.
pub(crate) fn result(body: impl FnOnce() -> Result<(), Error>) -> pki_result {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(Error::new(pki_result::PKI_RESULT_PANIC, "libpki panicked (a bug); the call had no effect"))
    });
    finish(outcome)
}

/// Borrows `len` bytes at `ptr`. NULL is accepted only with `len == 0` (an
/// empty input).
///
/// # Safety
/// If non-NULL, `ptr` must point to `len` readable bytes that stay valid and
/// unmodified for `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Error::null(what)) };
    }
    if len > isize::MAX as usize {
        return Err(Error::invalid(format!("{what}: length {len} is too large")));
    }
    // SAFETY: non-NULL, and the caller promises `len` readable bytes at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a NUL-terminated UTF-8 string.
///
/// # Safety
/// If non-NULL, `ptr` must point to a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn string<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

/// Checks an output pointer.
pub(crate) fn out<T>(ptr: *mut T, what: &str) -> Result<*mut T, Error> {
    if ptr.is_null() {
        Err(Error::null(what))
    } else {
        Ok(ptr)
    }
}

/// Borrows a handle.
///
/// # Safety
/// If non-NULL, `ptr` must point to a live handle of type `T` made by libpki.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller promises a live handle or NULL; as_ref checks NULL.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::null(what))
}
