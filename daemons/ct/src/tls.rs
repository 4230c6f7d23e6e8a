//! The TLS presentation language (RFC 8446 §3) as RFC 6962 uses it: big-endian
//! integers, fixed-size opaque arrays and variable-length vectors prefixed with
//! their length in 1, 2 or 3 bytes.
//!
//! [`Writer`] appends to a buffer and refuses a vector too long for its length
//! prefix; [`Reader`] reads from a slice and fails (never panics) on truncated
//! input, and [`Reader::finish`] rejects trailing bytes.

/// Errors from encoding or decoding TLS structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The input ended in the middle of a value.
    #[error("truncated input: needed {needed} more bytes")]
    Truncated {
        /// How many bytes were missing.
        needed: usize,
    },
    /// Bytes were left over after the structure.
    #[error("{0} trailing bytes after the structure")]
    TrailingData(usize),
    /// A vector is longer than its length prefix can express (or than its bound).
    #[error("vector of {len} bytes exceeds its maximum of {max}")]
    TooLong {
        /// The vector's length.
        len: usize,
        /// The largest length allowed.
        max: usize,
    },
    /// A vector is shorter than its lower bound (e.g. `<1..2^16-1>`).
    #[error("vector of {len} bytes is below its minimum of {min}")]
    TooShort {
        /// The vector's length.
        len: usize,
        /// The smallest length allowed.
        min: usize,
    },
    /// A value is well-formed but not one this implementation accepts.
    #[error("invalid {field}: {value}")]
    Invalid {
        /// The field that was read.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

/// The width of a vector's length prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthPrefix {
    /// One byte: `<0..2^8-1>`.
    U8,
    /// Two bytes: `<0..2^16-1>`.
    U16,
    /// Three bytes: `<0..2^24-1>`.
    U24,
}

impl LengthPrefix {
    /// The largest length the prefix can express.
    pub const fn max(self) -> usize {
        match self {
            LengthPrefix::U8 => 0xff,
            LengthPrefix::U16 => 0xffff,
            LengthPrefix::U24 => 0xff_ffff,
        }
    }

    const fn width(self) -> usize {
        match self {
            LengthPrefix::U8 => 1,
            LengthPrefix::U16 => 2,
            LengthPrefix::U24 => 3,
        }
    }
}

/// Appends TLS-encoded values to a byte buffer.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer appending to an existing buffer.
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Self { buf }
    }

    /// The bytes written so far.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }

    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Appends a `uint8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a big-endian `uint16`.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian `uint24`; fails when `v` does not fit in 24 bits.
    pub fn u24(&mut self, v: u32) -> Result<(), TlsError> {
        if v > 0xff_ffff {
            return Err(TlsError::TooLong { len: v as usize, max: 0xff_ffff });
        }
        self.buf.extend_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }

    /// Appends a big-endian `uint40`; fails when `v` does not fit in 40 bits.
    pub fn u40(&mut self, v: u64) -> Result<(), TlsError> {
        if v >= 1 << 40 {
            return Err(TlsError::Invalid { field: "uint40", value: v });
        }
        self.buf.extend_from_slice(&v.to_be_bytes()[3..]);
        Ok(())
    }

    /// Appends a big-endian `uint64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends raw bytes (a fixed-size `opaque` array).
    pub fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    /// Appends a vector: its length in `prefix` bytes, then the bytes.
    pub fn vector(&mut self, prefix: LengthPrefix, v: &[u8]) -> Result<(), TlsError> {
        self.length(prefix, v.len())?;
        self.buf.extend_from_slice(v);
        Ok(())
    }

    /// Appends a vector whose content `f` writes; the length prefix is filled in
    /// afterwards (and checked against `prefix`).
    pub fn nested(
        &mut self,
        prefix: LengthPrefix,
        f: impl FnOnce(&mut Writer) -> Result<(), TlsError>,
    ) -> Result<(), TlsError> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0u8; 3][..prefix.width()]);
        f(self)?;
        let len = self.buf.len() - start - prefix.width();
        if len > prefix.max() {
            return Err(TlsError::TooLong { len, max: prefix.max() });
        }
        let be = (len as u32).to_be_bytes();
        self.buf[start..start + prefix.width()].copy_from_slice(&be[4 - prefix.width()..]);
        Ok(())
    }

    fn length(&mut self, prefix: LengthPrefix, len: usize) -> Result<(), TlsError> {
        if len > prefix.max() {
            return Err(TlsError::TooLong { len, max: prefix.max() });
        }
        let be = (len as u32).to_be_bytes();
        self.buf.extend_from_slice(&be[4 - prefix.width()..]);
        Ok(())
    }
}

/// Reads TLS-encoded values from a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.data
    }

    /// Whether all input was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Succeeds only when all input was read.
    pub fn finish(self) -> Result<(), TlsError> {
        if self.data.is_empty() {
            Ok(())
        } else {
            Err(TlsError::TrailingData(self.data.len()))
        }
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], TlsError> {
        if self.data.len() < n {
            return Err(TlsError::Truncated { needed: n - self.data.len() });
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], TlsError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// Reads a `uint8`.
    pub fn u8(&mut self) -> Result<u8, TlsError> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads a big-endian `uint16`.
    pub fn u16(&mut self) -> Result<u16, TlsError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `uint24`.
    pub fn u24(&mut self) -> Result<u32, TlsError> {
        let b = self.array::<3>()?;
        Ok(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// Reads a big-endian `uint40`.
    pub fn u40(&mut self) -> Result<u64, TlsError> {
        let b = self.array::<5>()?;
        Ok(u64::from_be_bytes([0, 0, 0, b[0], b[1], b[2], b[3], b[4]]))
    }

    /// Reads a big-endian `uint64`.
    pub fn u64(&mut self) -> Result<u64, TlsError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads a vector with a `prefix`-byte length; returns its content.
    pub fn vector(&mut self, prefix: LengthPrefix) -> Result<&'a [u8], TlsError> {
        let len = match prefix {
            LengthPrefix::U8 => usize::from(self.u8()?),
            LengthPrefix::U16 => usize::from(self.u16()?),
            LengthPrefix::U24 => self.u24()? as usize,
        };
        self.bytes(len)
    }

    /// Reads a vector and checks it is at least `min` bytes long.
    pub fn vector_min(&mut self, prefix: LengthPrefix, min: usize) -> Result<&'a [u8], TlsError> {
        let v = self.vector(prefix)?;
        if v.len() < min {
            return Err(TlsError::TooShort { len: v.len(), min });
        }
        Ok(v)
    }

    /// Reads a vector and returns a reader over its content.
    pub fn nested(&mut self, prefix: LengthPrefix) -> Result<Reader<'a>, TlsError> {
        Ok(Reader::new(self.vector(prefix)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip() {
        let mut w = Writer::new();
        w.u8(0xab);
        w.u16(0x1234);
        w.u24(0x56789a).unwrap();
        w.u40(0x01_0203_0405).unwrap();
        w.u64(0x0102_0304_0506_0708);
        let b = w.into_vec();
        assert_eq!(hex::encode(&b), "ab123456789a01020304050102030405060708");
        let mut r = Reader::new(&b);
        assert_eq!(r.u8().unwrap(), 0xab);
        assert_eq!(r.u16().unwrap(), 0x1234);
        assert_eq!(r.u24().unwrap(), 0x56789a);
        assert_eq!(r.u40().unwrap(), 0x01_0203_0405);
        assert_eq!(r.u64().unwrap(), 0x0102_0304_0506_0708);
        r.finish().unwrap();
    }

    #[test]
    fn out_of_range_integers_are_refused() {
        let mut w = Writer::new();
        assert!(w.u24(1 << 24).is_err());
        assert!(w.u40(1 << 40).is_err());
        assert!(w.is_empty());
    }

    #[test]
    fn vectors_round_trip_at_every_width() {
        for prefix in [LengthPrefix::U8, LengthPrefix::U16, LengthPrefix::U24] {
            for len in [0usize, 1, 255] {
                let data = vec![7u8; len];
                let mut w = Writer::new();
                w.vector(prefix, &data).unwrap();
                let mut n = Writer::new();
                n.nested(prefix, |w| {
                    w.bytes(&data);
                    Ok(())
                })
                .unwrap();
                let b = w.into_vec();
                assert_eq!(b, n.into_vec());
                assert_eq!(b.len(), len + prefix.width());
                let mut r = Reader::new(&b);
                assert_eq!(r.vector(prefix).unwrap(), &data[..]);
                r.finish().unwrap();
            }
        }
    }

    #[test]
    fn vector_too_long_for_prefix() {
        let mut w = Writer::new();
        assert_eq!(w.vector(LengthPrefix::U8, &[0; 256]), Err(TlsError::TooLong { len: 256, max: 255 }));
        let err = w.nested(LengthPrefix::U8, |w| {
            w.bytes(&[0; 300]);
            Ok(())
        });
        assert!(matches!(err, Err(TlsError::TooLong { len: 300, .. })));
    }

    #[test]
    fn truncation_and_trailing_data_are_errors() {
        assert_eq!(Reader::new(&[0x00]).u16(), Err(TlsError::Truncated { needed: 1 }));
        assert!(Reader::new(&[0x00, 0x05, 1, 2]).vector(LengthPrefix::U16).is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff]).vector(LengthPrefix::U24).is_err());
        let mut r = Reader::new(&[1, 2]);
        r.u8().unwrap();
        assert_eq!(r.finish(), Err(TlsError::TrailingData(1)));
        assert_eq!(Reader::new(&[0]).vector_min(LengthPrefix::U8, 1), Err(TlsError::TooShort { len: 0, min: 1 }));
    }
}
