//! Precomputed ECDSA nonces, so a lone signature skips most of its work.
//!
//! Nearly all of an ECDSA signature's time goes into the nonce: a random `k`,
//! the point `k·G` (whose x coordinate is `r`) and `k⁻¹ mod n`. None of it
//! depends on the message. OpenSSL exposes the split: `ECDSA_sign_setup`
//! computes `(k⁻¹, r)` and `ECDSA_do_sign_ex` finishes a signature with a given
//! pair, leaving only `s = k⁻¹(e + r·d)`. signd computes pairs on its capnp thread
//! while that thread waits for the next call (`ServeOptions::busy_poll`), one
//! pair per poll, for the key a lone call last used; the next lone call spends
//! one and its caller waits only for the cheap half.
//!
//! Rules that keep this sound:
//! - **a pair is used once.** [`Presigned`] is not `Clone`; [`NonceStock::take`]
//!   moves it out of the stock and signing consumes it. Reusing `k` for two
//!   messages would reveal the private key.
//! - **`k` is uniformly random** (`ECDSA_sign_setup` without a digest draws it
//!   from OpenSSL's private DRBG): FIPS 186-5's random-nonce method. Without a
//!   pair in stock a signature takes OpenSSL's usual hedged nonce instead.
//! - **pairs are secrets**: they live only in signd's memory, are never
//!   stored or logged, and are cleared when dropped (`BN_clear_free`).

use std::ptr;
use std::sync::Mutex;

use foreign_types::ForeignTypeRef;
use openssl::ec::EcKeyRef;
use openssl::error::ErrorStack;
use openssl::pkey::Private;
use openssl_sys::{BIGNUM, BN_CTX, ECDSA_SIG, EC_KEY};

// Deprecated in OpenSSL 3.0 but built (openssl-src does not configure
// `no-deprecated`) and unchanged in 3.5; the openssl crates do not declare them.
extern "C" {
    fn ECDSA_sign_setup(eckey: *mut EC_KEY, ctx: *mut BN_CTX, kinv: *mut *mut BIGNUM, rp: *mut *mut BIGNUM) -> i32;
    fn ECDSA_do_sign_ex(
        dgst: *const u8,
        dgstlen: i32,
        kinv: *const BIGNUM,
        rp: *const BIGNUM,
        eckey: *mut EC_KEY,
    ) -> *mut ECDSA_SIG;
}

/// The most pairs kept per key.
pub(crate) const STOCK: usize = 32;

/// One `(k⁻¹ mod n, r)` pair for one key; spent by [`Presigned::sign`].
pub(crate) struct Presigned {
    kinv: *mut BIGNUM,
    r: *mut BIGNUM,
}

// SAFETY: the two BIGNUMs are owned exclusively by this value and are not
// tied to the thread that created them.
unsafe impl Send for Presigned {}

impl Drop for Presigned {
    fn drop(&mut self) {
        // SAFETY: both pointers came from ECDSA_sign_setup, are owned here and
        // freed exactly once; BN_clear_free accepts null.
        unsafe {
            openssl_sys::BN_clear_free(self.kinv);
            openssl_sys::BN_clear_free(self.r);
        }
    }
}

impl Presigned {
    /// Computes a fresh pair for `key`.
    pub(crate) fn new(key: &EcKeyRef<Private>) -> Result<Self, ErrorStack> {
        let mut kinv = ptr::null_mut();
        let mut r = ptr::null_mut();
        // SAFETY: `key` is a valid EC_KEY with a private key; a null BN_CTX
        // makes OpenSSL use its own; on success both out-pointers are new
        // BIGNUMs that we now own.
        let ok = unsafe { ECDSA_sign_setup(key.as_ptr(), ptr::null_mut(), &mut kinv, &mut r) };
        let pair = Self { kinv, r };
        if ok != 1 {
            return Err(ErrorStack::get());
        }
        Ok(pair)
    }

    /// Signs `digest` (the message's hash, as for `ECDSA_do_sign`) with this
    /// pair, which is consumed; returns the DER `ECDSA-Sig-Value`.
    pub(crate) fn sign(self, digest: &[u8], key: &EcKeyRef<Private>) -> Result<Vec<u8>, ErrorStack> {
        let len = i32::try_from(digest.len()).map_err(|_| ErrorStack::get())?;
        // SAFETY: `digest` is valid for `len` bytes; kinv and r are valid for
        // the duration of the call; OpenSSL copies them and does not keep them.
        let sig = unsafe { ECDSA_do_sign_ex(digest.as_ptr(), len, self.kinv, self.r, key.as_ptr()) };
        drop(self);
        if sig.is_null() {
            return Err(ErrorStack::get());
        }
        // SAFETY: `sig` is a new ECDSA_SIG that we own; EcdsaSig frees it.
        let sig = unsafe { <openssl::ecdsa::EcdsaSig as foreign_types::ForeignType>::from_ptr(sig) };
        sig.to_der()
    }
}

/// The pairs ready for one key.
#[derive(Default)]
pub(crate) struct NonceStock {
    pairs: Mutex<Vec<Presigned>>,
}

impl NonceStock {
    /// A pair, if one is ready.
    pub(crate) fn take(&self) -> Option<Presigned> {
        self.pairs.lock().ok()?.pop()
    }

    /// Adds one pair unless the stock is full; returns whether it did.
    pub(crate) fn add_one(&self, key: &EcKeyRef<Private>) -> Result<bool, ErrorStack> {
        if self.pairs.lock().map(|p| p.len() >= STOCK).unwrap_or(true) {
            return Ok(false);
        }
        let pair = Presigned::new(key)?;
        Ok(self.pairs.lock().map(|mut p| p.push(pair)).is_ok())
    }

    /// Pairs in stock.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pairs.lock().map(|p| p.len()).unwrap_or(0)
    }
}
