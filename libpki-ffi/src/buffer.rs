//! `pki_buffer`: an owned byte string (a signature, a public key, a certificate).

use crate::boundary::{self, bytes, out};
use crate::result::pki_result;

/// An immutable byte string owned by libpki: a signature, a DER public key,
/// or bytes a caller wraps with `pki_buffer_new` (e.g. root certificates).
/// Read it with `pki_buffer_data`/`pki_buffer_len`; free it with
/// `pki_buffer_free`. A buffer may be read from many threads at once.
pub struct pki_buffer {
    bytes: Vec<u8>,
}

impl pki_buffer {
    /// Moves `bytes` into a new heap buffer for C.
    pub(crate) fn into_raw(bytes: Vec<u8>) -> *mut pki_buffer {
        Box::into_raw(Box::new(pki_buffer { bytes }))
    }

    /// The buffer's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes
    }
}

/// Copies `data_len` bytes at `data` into a new buffer, written to `*buffer_out`.
/// `data` may be NULL only when `data_len` is 0. Free it with `pki_buffer_free`.
///
/// Errors: `PKI_RESULT_NULL_PARAMETER`.
#[no_mangle]
pub extern "C" fn pki_buffer_new(data: *const u8, data_len: usize, buffer_out: *mut *mut pki_buffer) -> pki_result {
    boundary::result(|| {
        let out = out(buffer_out, "buffer_out")?;
        // SAFETY: the caller promises `data_len` readable bytes at `data`.
        let data = unsafe { bytes(data, data_len, "data") }?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = pki_buffer::into_raw(data.to_vec()) };
        Ok(())
    })
}

/// The buffer's bytes, valid until `pki_buffer_free`. NULL if `buffer` is
/// NULL; for an empty buffer, a non-NULL pointer that must not be read.
#[no_mangle]
pub extern "C" fn pki_buffer_data(buffer: *const pki_buffer) -> *const u8 {
    boundary::guard(std::ptr::null(), || {
        // SAFETY: the caller passes a live buffer or NULL.
        match unsafe { boundary::handle(buffer, "buffer") } {
            Ok(b) => b.bytes.as_ptr(),
            Err(_) => std::ptr::null(),
        }
    })
}

/// The buffer's length in bytes; 0 if `buffer` is NULL.
#[no_mangle]
pub extern "C" fn pki_buffer_len(buffer: *const pki_buffer) -> usize {
    boundary::guard(0, || {
        // SAFETY: the caller passes a live buffer or NULL.
        unsafe { boundary::handle(buffer, "buffer") }.map(|b| b.bytes.len()).unwrap_or(0)
    })
}

/// Frees a buffer. NULL is a no-op. The buffer must not be used afterwards.
#[no_mangle]
pub extern "C" fn pki_buffer_free(buffer: *mut pki_buffer) {
    boundary::guard((), || {
        if !buffer.is_null() {
            // SAFETY: a non-NULL buffer was made by `pki_buffer::into_raw`
            // (Box::into_raw) and the caller gives up its only reference.
            drop(unsafe { Box::from_raw(buffer) });
        }
    })
}
