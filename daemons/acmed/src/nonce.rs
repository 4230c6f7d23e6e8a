//! Anti-replay nonces (RFC 8555 §6.5): each usable once, in bounded memory.
//!
//! A nonce is a counter and a keyed hash of it: `base64url(counter_be ‖
//! SHA-256(key ‖ counter_be)[..8])`. The key is drawn at start, so nonces do
//! not survive a restart (clients get `badNonce` with a fresh nonce and
//! retry). The newest [`WINDOW`] nonces are outstanding at most: one bit each
//! says whether it is still unused. An older nonce is stale.

use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// How many of the newest nonces can be redeemed.
pub const WINDOW: u64 = 1 << 20;

/// Why a nonce was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceError {
    /// Not a nonce this server made (or made before a restart).
    Unknown,
    /// Already used, or too old to tell.
    Used,
}

/// The nonce source and redeemer.
pub struct Nonces {
    key: [u8; 32],
    state: Mutex<State>,
}

struct State {
    /// The next counter to hand out.
    next: u64,
    /// Bit `c % WINDOW`: nonce `c` is outstanding.
    outstanding: Vec<u64>,
}

impl Nonces {
    /// A nonce source with a fresh `key`.
    pub fn new(key: [u8; 32]) -> Nonces {
        Nonces { key, state: Mutex::new(State { next: 0, outstanding: vec![0; (WINDOW / 64) as usize] }) }
    }

    fn tag(&self, counter: u64) -> [u8; 8] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(counter.to_be_bytes());
        let d = h.finalize();
        let mut t = [0u8; 8];
        t.copy_from_slice(&d[..8]);
        t
    }

    /// A fresh nonce.
    pub fn issue(&self) -> String {
        let counter = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let c = s.next;
            s.next += 1;
            let slot = (c % WINDOW) as usize;
            s.outstanding[slot / 64] |= 1 << (slot % 64);
            c
        };
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&counter.to_be_bytes());
        raw[8..].copy_from_slice(&self.tag(counter));
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Redeems `nonce`: succeeds once per nonce issued.
    pub fn redeem(&self, nonce: &str) -> Result<(), NonceError> {
        let raw = URL_SAFE_NO_PAD.decode(nonce).map_err(|_| NonceError::Unknown)?;
        let raw: [u8; 16] = raw.try_into().map_err(|_| NonceError::Unknown)?;
        let mut counter = [0u8; 8];
        counter.copy_from_slice(&raw[..8]);
        let counter = u64::from_be_bytes(counter);
        if !constant_time_eq(&raw[8..], &self.tag(counter)) {
            return Err(NonceError::Unknown);
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if counter >= s.next {
            return Err(NonceError::Unknown);
        }
        if s.next - counter > WINDOW {
            return Err(NonceError::Used);
        }
        let slot = (counter % WINDOW) as usize;
        let bit = 1u64 << (slot % 64);
        if s.outstanding[slot / 64] & bit == 0 {
            return Err(NonceError::Used);
        }
        s.outstanding[slot / 64] &= !bit;
        Ok(())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_redeems_once() {
        let n = Nonces::new([7; 32]);
        let a = n.issue();
        let b = n.issue();
        assert_ne!(a, b);
        assert_eq!(n.redeem(&b), Ok(()));
        assert_eq!(n.redeem(&b), Err(NonceError::Used));
        assert_eq!(n.redeem(&a), Ok(()));
    }

    #[test]
    fn foreign_and_garbled_nonces_are_unknown() {
        let ours = Nonces::new([1; 32]);
        let theirs = Nonces::new([2; 32]);
        let nonce = theirs.issue();
        assert_eq!(ours.redeem(&nonce), Err(NonceError::Unknown));
        assert_eq!(ours.redeem("not base64!"), Err(NonceError::Unknown));
        assert_eq!(ours.redeem(""), Err(NonceError::Unknown));
        let mut tampered = ours.issue().into_bytes();
        tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(ours.redeem(std::str::from_utf8(&tampered).unwrap()), Err(NonceError::Unknown));
    }

    #[test]
    fn nonces_older_than_the_window_are_stale() {
        let n = Nonces::new([3; 32]);
        let first = n.issue();
        for _ in 0..WINDOW {
            n.issue();
        }
        assert_eq!(n.redeem(&first), Err(NonceError::Used));
        let recent = n.issue();
        assert_eq!(n.redeem(&recent), Ok(()));
    }
}
