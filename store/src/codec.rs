//! Helpers for the canonical binary encodings described in `docs/FORMAT.md`.
//!
//! Integers are unsigned LEB128 varints unless a fixed width is named; byte strings are a
//! varint length followed by the bytes. A [`Reader`] never panics on hostile input: every
//! read is bounds-checked and fails with a [`DecodeError`] that says what was being read.

use crate::id::{Id, ID_LEN};

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct DecodeError {
    /// The field or structure being decoded.
    pub what: &'static str,
    /// What was wrong with it.
    pub reason: String,
}

impl DecodeError {
    /// A decode error for `what`.
    pub fn new(what: &'static str, reason: impl Into<String>) -> Self {
        DecodeError {
            what,
            reason: reason.into(),
        }
    }
}

/// Appends canonical encodings to a buffer.
#[derive(Default, Debug)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A writer whose output starts with an object header: a type tag and a format version.
    pub fn with_header(tag: u8, version: u8) -> Self {
        // Most objects (entities, commits, small trees) fit; growing from two bytes
        // reallocated several times per object.
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&[tag, version]);
        Writer { buf }
    }

    /// Appends a varint.
    pub fn uint(&mut self, mut v: u64) -> &mut Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return self;
            }
            self.buf.push(byte | 0x80);
        }
    }

    /// Appends a signed integer (zig-zag varint).
    pub fn int(&mut self, v: i64) -> &mut Self {
        self.uint(((v << 1) ^ (v >> 63)) as u64)
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.uint(b.len() as u64);
        self.buf.extend_from_slice(b);
        self
    }

    /// Appends an id (32 raw bytes).
    pub fn id(&mut self, id: &Id) -> &mut Self {
        self.buf.extend_from_slice(&id.0);
        self
    }

    /// Appends raw bytes without a length.
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// Bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
}

/// Reads canonical encodings from a byte slice.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Reads and checks an object header written by [`Writer::with_header`]; returns the
    /// version, which must be at most `max_version`.
    pub fn header(
        &mut self,
        what: &'static str,
        tag: u8,
        max_version: u8,
    ) -> Result<u8, DecodeError> {
        let t = self.u8(what)?;
        if t != tag {
            return Err(DecodeError::new(
                what,
                format!("type tag {t}, expected {tag}"),
            ));
        }
        let v = self.u8(what)?;
        if v == 0 || v > max_version {
            return Err(DecodeError::new(
                what,
                format!("format version {v} is not supported (this lifeos reads up to {max_version}); upgrade lifeos"),
            ));
        }
        Ok(v)
    }

    /// Reads a varint.
    pub fn uint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(what)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::new(what, "varint overflows 64 bits"));
            }
            v |= bits << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(DecodeError::new(what, "varint is not minimally encoded"));
                }
                return Ok(v);
            }
        }
        Err(DecodeError::new(what, "varint longer than 10 bytes"))
    }

    /// Reads a zig-zag signed varint.
    pub fn int(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let u = self.uint(what)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// Reads a varint that must fit a `usize` no larger than what remains (for counts of
    /// items at least one byte long each).
    pub fn count(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let n = self.uint(what)?;
        if n > self.remaining() as u64 {
            return Err(DecodeError::new(
                what,
                format!("count {n} exceeds the {} bytes left", self.remaining()),
            ));
        }
        Ok(n as usize)
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| DecodeError::new(what, "unexpected end of data"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads `n` raw bytes.
    pub fn raw(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::new(
                what,
                format!("needs {n} bytes, {} left", self.remaining()),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.count(what)?;
        self.raw(what, n)
    }

    /// Reads a length-prefixed UTF-8 string.
    pub fn str(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes(what)?)
            .map_err(|_| DecodeError::new(what, "not valid UTF-8"))
    }

    /// Reads an id.
    pub fn id(&mut self, what: &'static str) -> Result<Id, DecodeError> {
        Ok(Id::from_slice(self.raw(what, ID_LEN)?).expect("raw returned ID_LEN bytes"))
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Fails unless every byte was consumed (canonical encodings have no trailing data).
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(DecodeError::new(
                what,
                format!("{} trailing bytes", self.remaining()),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(u in any::<u64>(), i in any::<i64>(), b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut w = Writer::default();
            w.uint(u).int(i).bytes(&b);
            let bytes = w.finish();
            let mut r = Reader::new(&bytes);
            prop_assert_eq!(r.uint("u").unwrap(), u);
            prop_assert_eq!(r.int("i").unwrap(), i);
            prop_assert_eq!(r.bytes("b").unwrap(), &b[..]);
            prop_assert!(r.finish("all").is_ok());
        }

        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&data);
            let _ = r.uint("a");
            let _ = r.bytes("b");
            let _ = r.id("c");
            let _ = r.str("d");
        }
    }

    #[test]
    fn rejects_non_minimal_varint() {
        assert!(Reader::new(&[0x80, 0x00]).uint("x").is_err());
        assert!(Reader::new(&[0xff; 11]).uint("x").is_err());
    }
}
