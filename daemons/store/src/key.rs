//! Order-preserving key encodings.

use std::borrow::Cow;

use crate::StoreError;

/// A type usable as a table key.
///
/// LMDB sorts keys by their bytes (`memcmp`, shorter first on a common
/// prefix), so `encode` must preserve the type's order: for any `a < b`,
/// `a.encode() < b.encode()` bytewise. All implementations here do; integers
/// are big-endian for that reason.
///
/// An encoded key must be 1 to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes;
/// an empty `String` or `Vec<u8>` is rejected with [`StoreError::KeySize`].
pub trait Key: Sized {
    /// The key's bytes as stored.
    fn encode(&self) -> Cow<'_, [u8]>;

    /// Rebuilds a key from stored bytes; bytes of the wrong shape are
    /// [`StoreError::Corrupt`].
    fn decode(bytes: &[u8]) -> Result<Self, StoreError>;
}

/// Reads exactly `N` bytes or reports the length mismatch.
fn fixed<const N: usize>(bytes: &[u8], what: &str) -> Result<[u8; N], StoreError> {
    <[u8; N]>::try_from(bytes)
        .map_err(|_| StoreError::bad_key(format!("{what} needs {N} bytes, found {}", bytes.len())))
}

impl Key for u64 {
    fn encode(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.to_be_bytes().to_vec())
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        fixed::<8>(bytes, "u64").map(u64::from_be_bytes)
    }
}

impl Key for u32 {
    fn encode(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.to_be_bytes().to_vec())
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        fixed::<4>(bytes, "u32").map(u32::from_be_bytes)
    }
}

/// UTF-8 byte order equals code point order.
impl Key for String {
    fn encode(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        String::from_utf8(bytes.to_vec()).map_err(|e| StoreError::bad_key(format!("String key is not UTF-8: {e}")))
    }
}

impl Key for Vec<u8> {
    fn encode(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        Ok(bytes.to_vec())
    }
}

impl<const N: usize> Key for [u8; N] {
    fn encode(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        fixed::<N>(bytes, "byte array")
    }
}

/// Ordered by the first element, then the second (16 bytes, both big-endian).
impl Key for (u64, u64) {
    fn encode(&self) -> Cow<'_, [u8]> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
        Cow::Owned(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        let all = fixed::<16>(bytes, "(u64, u64)")?;
        let (hi, lo) = all.split_at(8);
        // Both halves are exactly 8 bytes because `all` is 16.
        let first = fixed::<8>(hi, "(u64, u64)")?;
        let second = fixed::<8>(lo, "(u64, u64)")?;
        Ok((u64::from_be_bytes(first), u64::from_be_bytes(second)))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, reason = "a failed expectation is a failed test")]
mod tests {
    use super::*;

    /// Encodes every value, checks decode(encode(x)) == x, and checks that
    /// byte order matches the values' order.
    fn check_order<K: Key + Ord + Clone + std::fmt::Debug>(mut values: Vec<K>) {
        values.sort();
        for v in &values {
            let back = K::decode(&v.encode()).expect("decodes");
            assert_eq!(&back, v);
        }
        for pair in values.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a < b {
                assert!(a.encode() < b.encode(), "{a:?} < {b:?} but bytes are not");
            }
        }
    }

    #[test]
    fn u64_round_trip_and_order() {
        check_order(vec![0u64, 1, 255, 256, 65_535, 1 << 32, u64::MAX - 1, u64::MAX]);
        assert!(u64::decode(&[1, 2, 3]).is_err());
    }

    #[test]
    fn u32_round_trip_and_order() {
        check_order(vec![0u32, 1, 255, 256, 1 << 24, u32::MAX]);
        assert!(matches!(u32::decode(&[0; 8]), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn string_round_trip_and_order() {
        check_order(["", "a", "aa", "ab", "b", "Z", "é", "\u{1F600}", "zz"].iter().map(|s| s.to_string()).collect());
        assert!(matches!(String::decode(&[0xff, 0xfe]), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn bytes_round_trip_and_order() {
        check_order(vec![vec![], vec![0u8], vec![0, 0], vec![0, 1], vec![1], vec![255, 0]]);
        check_order(vec![[0u8; 4], [0, 0, 0, 1], [0, 1, 0, 0], [255; 4]]);
        assert!(<[u8; 4]>::decode(&[1, 2, 3]).is_err());
    }

    #[test]
    fn pair_round_trip_and_order() {
        check_order(vec![(0u64, 0u64), (0, 1), (0, u64::MAX), (1, 0), (1, 5), (u64::MAX, 0), (u64::MAX, u64::MAX)]);
        assert!(<(u64, u64)>::decode(&[0; 15]).is_err());
    }
}
