//! `pki_client`: signing and key lookup through signd.

use std::ffi::{c_char, CString};

use signet_ipc::{block_on, KeyInfo, SignatureScheme, SigndClient, DEFAULT_SOCKET};

use crate::boundary::{self, bytes, handle, out, string};
use crate::buffer::pki_buffer;
use crate::result::{pki_result, Error};
use crate::scheme::{pki_algorithm, scheme_from_c};

/// The environment variable that overrides the default socket path.
const SOCKET_ENV: &str = "SIGNET_SIGND_SOCKET";

/// A connection to signd. Create with `pki_client_new`, free with
/// `pki_client_free`.
///
/// Thread safety: one `pki_client` may be used from any number of threads at
/// once, with no locking by the caller. Each calling thread talks to signd
/// over a connection of its own, made on the thread's first call and closed
/// when the thread exits; a call runs entirely on its calling thread and
/// blocks it until signd answers (no hidden threads), for at most 60 s: a
/// signd that accepts the connection but never answers (its socket held by
/// systemd while the service fails to start) gives `PKI_RESULT_UNAVAILABLE`.
/// Only `pki_client_free` needs exclusive use: call it after every other
/// call on the client has returned.
///
/// Connections are made lazily and remade by themselves after signd
/// restarts, so a client may be created while signd is down.
pub struct pki_client {
    client: SigndClient,
}

/// Creates a client for signd's socket at `socket_path`, written to
/// `*client_out`. With `socket_path` NULL, uses the environment variable
/// `SIGNET_SIGND_SOCKET` if set and non-empty, else `/run/signet/signd.sock`.
///
/// Nothing connects yet: a missing signd shows up as `PKI_RESULT_UNAVAILABLE`
/// on the first call that needs it.
///
/// Errors: `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_INVALID_ARGUMENT` (an
/// empty or non-UTF-8 path).
#[no_mangle]
pub extern "C" fn pki_client_new(socket_path: *const c_char, client_out: *mut *mut pki_client) -> pki_result {
    boundary::result(|| {
        let out = out(client_out, "client_out")?;
        let path = if socket_path.is_null() {
            std::env::var(SOCKET_ENV).ok().filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_SOCKET.to_owned())
        } else {
            // SAFETY: non-NULL; the caller promises a NUL-terminated string.
            unsafe { string(socket_path, "socket_path") }?.to_owned()
        };
        if path.is_empty() {
            return Err(Error::invalid("socket_path is empty"));
        }
        // C callers are synchronous: each call runs on its own thread over
        // that thread's connection, with no hand-off to a client thread.
        let client = SigndClient::new(&path)?.per_thread();
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = Box::into_raw(Box::new(pki_client { client })) };
        Ok(())
    })
}

/// Frees a client. NULL is a no-op. No other call may be using the client,
/// and it must not be used afterwards. A thread's connection to signd stays
/// open until that thread exits (a client made later on the same thread for
/// the same socket reuses it).
#[no_mangle]
pub extern "C" fn pki_client_free(client: *mut pki_client) {
    boundary::guard((), || {
        if !client.is_null() {
            // SAFETY: a non-NULL client was made by `pki_client_new`
            // (Box::into_raw) and the caller gives up its only reference.
            drop(unsafe { Box::from_raw(client) });
        }
    })
}

/// The keys the caller's default role may use, written to `*list_out` as a
/// `pki_key_list` (free it with `pki_key_list_free`).
///
/// Errors: `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_UNAVAILABLE`,
/// `PKI_RESULT_PERMISSION_DENIED`, `PKI_RESULT_INTERNAL`.
#[no_mangle]
pub extern "C" fn pki_list_keys(client: *const pki_client, list_out: *mut *mut pki_key_list) -> pki_result {
    pki_list_keys_role(client, c"".as_ptr(), list_out)
}

/// Like `pki_list_keys`, acting in `role` (`""`: the caller's default role).
#[no_mangle]
pub extern "C" fn pki_list_keys_role(
    client: *const pki_client,
    role: *const c_char,
    list_out: *mut *mut pki_key_list,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller passes a live client or NULL.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: the caller passes a NUL-terminated string or NULL.
        let role = unsafe { string(role, "role") }?;
        let out = out(list_out, "list_out")?;
        let keys = block_on(client.client.list_keys(role))?;
        let list = pki_key_list::new(keys)?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = Box::into_raw(Box::new(list)) };
        Ok(())
    })
}

/// A list of keys from `pki_list_keys`: read it with the `pki_key_list_*`
/// accessors, free it with `pki_key_list_free`. Strings it returns live as
/// long as the list. A list may be read from many threads at once.
pub struct pki_key_list {
    keys: Vec<(CString, KeyInfo)>,
}

impl pki_key_list {
    fn new(keys: Vec<KeyInfo>) -> Result<Self, Error> {
        let keys = keys
            .into_iter()
            .map(|k| {
                let id = CString::new(k.id.clone())
                    .map_err(|_| Error::new(pki_result::PKI_RESULT_INTERNAL, "signd sent a key id with a NUL byte"))?;
                Ok((id, k))
            })
            .collect::<Result<_, Error>>()?;
        Ok(Self { keys })
    }

    fn entry<'a>(list: *const pki_key_list, index: usize) -> Option<&'a (CString, KeyInfo)> {
        // SAFETY: the caller passes a live list or NULL.
        unsafe { handle(list, "list") }.ok().and_then(|l| l.keys.get(index))
    }
}

/// The number of keys in `list`; 0 if `list` is NULL.
#[no_mangle]
pub extern "C" fn pki_key_list_len(list: *const pki_key_list) -> usize {
    // SAFETY: the caller passes a live list or NULL.
    boundary::guard(0, || unsafe { handle(list, "list") }.map(|l| l.keys.len()).unwrap_or(0))
}

/// The id of key `index` as a NUL-terminated string owned by the list; NULL
/// if `list` is NULL or `index` is out of range.
#[no_mangle]
pub extern "C" fn pki_key_list_id(list: *const pki_key_list, index: usize) -> *const c_char {
    boundary::guard(std::ptr::null(), || {
        pki_key_list::entry(list, index).map(|(id, _)| id.as_ptr()).unwrap_or(std::ptr::null())
    })
}

/// The algorithm of key `index`; `PKI_ALGORITHM_UNKNOWN` if `list` is NULL or
/// `index` is out of range.
#[no_mangle]
pub extern "C" fn pki_key_list_algorithm(list: *const pki_key_list, index: usize) -> pki_algorithm {
    boundary::guard(pki_algorithm::PKI_ALGORITHM_UNKNOWN, || {
        pki_key_list::entry(list, index)
            .map(|(_, k)| pki_algorithm::from_ipc(k.algorithm))
            .unwrap_or(pki_algorithm::PKI_ALGORITHM_UNKNOWN)
    })
}

/// Whether key `index` is loaded and usable for signing; false if `list` is
/// NULL or `index` is out of range.
#[no_mangle]
pub extern "C" fn pki_key_list_available(list: *const pki_key_list, index: usize) -> bool {
    boundary::guard(false, || pki_key_list::entry(list, index).map(|(_, k)| k.available).unwrap_or(false))
}

/// Frees a key list. NULL is a no-op.
#[no_mangle]
pub extern "C" fn pki_key_list_free(list: *mut pki_key_list) {
    boundary::guard((), || {
        if !list.is_null() {
            // SAFETY: a non-NULL list was made by `pki_list_keys_role`
            // (Box::into_raw) and the caller gives up its only reference.
            drop(unsafe { Box::from_raw(list) });
        }
    })
}

/// The public key of `key_id` as a DER SubjectPublicKeyInfo, written to
/// `*spki_out` (free it with `pki_buffer_free`).
///
/// Errors: `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_UNAVAILABLE`,
/// `PKI_RESULT_PERMISSION_DENIED`, `PKI_RESULT_UNKNOWN_KEY`, `PKI_RESULT_INTERNAL`.
#[no_mangle]
pub extern "C" fn pki_public_key(
    client: *const pki_client,
    key_id: *const c_char,
    spki_out: *mut *mut pki_buffer,
) -> pki_result {
    pki_public_key_role(client, c"".as_ptr(), key_id, spki_out)
}

/// Like `pki_public_key`, acting in `role` (`""`: the caller's default role).
#[no_mangle]
pub extern "C" fn pki_public_key_role(
    client: *const pki_client,
    role: *const c_char,
    key_id: *const c_char,
    spki_out: *mut *mut pki_buffer,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller passes a live client or NULL.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (role, key_id) = unsafe { (string(role, "role")?, string(key_id, "key_id")?) };
        let out = out(spki_out, "spki_out")?;
        let info = block_on(client.client.public_key(role, key_id))?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = pki_buffer::into_raw(info.spki) };
        Ok(())
    })
}

/// Signs `msg` (the whole message; signd hashes it) with `key_id` in the
/// key's default scheme, acting in the caller's default role. The signature
/// is written to `*sig_out` (free it with `pki_buffer_free`). `msg` may be
/// NULL only when `msg_len` is 0.
///
/// Errors: `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_INVALID_ARGUMENT`,
/// `PKI_RESULT_UNAVAILABLE` (signd not reachable), `PKI_RESULT_PERMISSION_DENIED`
/// (policy refuses this caller), `PKI_RESULT_UNKNOWN_KEY`,
/// `PKI_RESULT_KEY_UNAVAILABLE`, `PKI_RESULT_TOO_LARGE`, `PKI_RESULT_BACKEND`,
/// `PKI_RESULT_INTERNAL`.
#[no_mangle]
pub extern "C" fn pki_sign(
    client: *const pki_client,
    key_id: *const c_char,
    msg: *const u8,
    msg_len: usize,
    sig_out: *mut *mut pki_buffer,
) -> pki_result {
    pki_sign_role(client, c"".as_ptr(), key_id, 0, msg, msg_len, sig_out)
}

/// Like `pki_sign` with an explicit scheme, one of `pki_scheme`
/// (`PKI_RESULT_WRONG_ALGORITHM` if it does not fit the key).
#[no_mangle]
pub extern "C" fn pki_sign_scheme(
    client: *const pki_client,
    key_id: *const c_char,
    scheme: u32,
    msg: *const u8,
    msg_len: usize,
    sig_out: *mut *mut pki_buffer,
) -> pki_result {
    pki_sign_role(client, c"".as_ptr(), key_id, scheme, msg, msg_len, sig_out)
}

/// Like `pki_sign_scheme`, acting in `role` (`""`: the caller's default role).
#[no_mangle]
pub extern "C" fn pki_sign_role(
    client: *const pki_client,
    role: *const c_char,
    key_id: *const c_char,
    scheme: u32,
    msg: *const u8,
    msg_len: usize,
    sig_out: *mut *mut pki_buffer,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller passes a live client or NULL.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (role, key_id) = unsafe { (string(role, "role")?, string(key_id, "key_id")?) };
        // SAFETY: the caller promises `msg_len` readable bytes at `msg`.
        let msg = unsafe { bytes(msg, msg_len, "msg") }?;
        let out = out(sig_out, "sig_out")?;
        let scheme = scheme_from_c(scheme)?;
        let sig = block_on(client.client.sign(role, key_id, scheme, msg.to_vec()))?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = pki_buffer::into_raw(sig) };
        Ok(())
    })
}

/// Signs `count` messages with `key_id` in one round trip, in the key's
/// default scheme and the caller's default role. Message `i` is `msgs[i]`,
/// `msg_lens[i]` bytes long. `sigs_out` points to an array of `count`
/// pointers; on success, `sigs_out[i]` receives the signature of message `i`
/// (free each with `pki_buffer_free`). On failure nothing is written.
///
/// Errors: those of `pki_sign`; `PKI_RESULT_TOO_LARGE` if the batch is over
/// signd's limit.
#[no_mangle]
pub extern "C" fn pki_sign_batch(
    client: *const pki_client,
    key_id: *const c_char,
    msgs: *const *const u8,
    msg_lens: *const usize,
    count: usize,
    sigs_out: *mut *mut pki_buffer,
) -> pki_result {
    pki_sign_batch_role(client, c"".as_ptr(), key_id, 0, msgs, msg_lens, count, sigs_out)
}

/// Like `pki_sign_batch`, with a scheme (one of `pki_scheme`) and acting in
/// `role` (`""`: the caller's default role).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature: each array followed by its length.
pub extern "C" fn pki_sign_batch_role(
    client: *const pki_client,
    role: *const c_char,
    key_id: *const c_char,
    scheme: u32,
    msgs: *const *const u8,
    msg_lens: *const usize,
    count: usize,
    sigs_out: *mut *mut pki_buffer,
) -> pki_result {
    boundary::result(|| {
        // SAFETY: the caller passes a live client or NULL.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (role, key_id) = unsafe { (string(role, "role")?, string(key_id, "key_id")?) };
        let scheme: SignatureScheme = scheme_from_c(scheme)?;
        let out = out(sigs_out, "sigs_out")?;
        let messages = batch(msgs, msg_lens, count)?;
        let sigs = block_on(client.client.sign_batch(role, key_id, scheme, messages))?;
        if sigs.len() != count {
            let detail = format!("signd returned {} signatures for {count} messages", sigs.len());
            return Err(Error::new(pki_result::PKI_RESULT_INTERNAL, detail));
        }
        for (i, sig) in sigs.into_iter().enumerate() {
            // SAFETY: `out` is non-NULL and the caller promises an array of
            // `count` writable pointers; `i < count`.
            unsafe { *out.add(i) = pki_buffer::into_raw(sig) };
        }
        Ok(())
    })
}

/// Copies a C array of messages.
fn batch(msgs: *const *const u8, msg_lens: *const usize, count: usize) -> Result<Vec<Vec<u8>>, Error> {
    if count == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the caller promises `count` readable pointers at `msgs` and
    // `count` lengths at `msg_lens`; `bytes` checks for NULL.
    let (ptrs, lens) =
        unsafe { (bytes_of::<*const u8>(msgs, count, "msgs")?, bytes_of::<usize>(msg_lens, count, "msg_lens")?) };
    ptrs.iter()
        .zip(lens)
        .enumerate()
        // SAFETY: the caller promises `lens[i]` readable bytes at `ptrs[i]`.
        .map(|(i, (&p, &len))| unsafe { bytes(p, len, &format!("msgs[{i}]")) }.map(<[u8]>::to_vec))
        .collect()
}

/// Borrows a C array of `count` values of `T`.
///
/// # Safety
/// If non-NULL, `ptr` must point to `count` initialised values of `T`.
unsafe fn bytes_of<'a, T>(ptr: *const T, count: usize, what: &str) -> Result<&'a [T], Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    if count.checked_mul(std::mem::size_of::<T>()).is_none_or(|n| n > isize::MAX as usize) {
        return Err(Error::invalid(format!("{what}: count {count} is too large")));
    }
    // SAFETY: non-NULL, size checked, and the caller promises `count` values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}
