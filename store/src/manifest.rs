//! File manifests: the ordered chunk list of a file made of more than one chunk.

use crate::codec::{DecodeError, Reader, Writer};
use crate::id::{Id, ID_LEN};
use crate::kind::Kind;

/// Manifest format version written by this code.
pub const MANIFEST_VERSION: u8 = 1;

/// One chunk of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    /// The chunk's id.
    pub id: Id,
    /// Its length in bytes.
    pub len: u32,
}

/// The ordered chunks of a file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Chunks in file order.
    pub chunks: Vec<ChunkRef>,
}

impl Manifest {
    /// Total file size.
    pub fn size(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.len)).sum()
    }

    /// The canonical encoding, ending with a BLAKE3 checksum of what precedes it.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::Manifest as u8, MANIFEST_VERSION);
        w.uint(self.size()).uint(self.chunks.len() as u64);
        for c in &self.chunks {
            w.id(&c.id).uint(u64::from(c.len));
        }
        let sum = blake3::hash(w.as_slice());
        w.raw(sum.as_bytes());
        w.finish()
    }

    /// Decodes and checks a manifest.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, DecodeError> {
        const WHAT: &str = "file manifest";
        if bytes.len() < ID_LEN + 2 {
            return Err(DecodeError::new(WHAT, "too short"));
        }
        let (body, sum) = bytes.split_at(bytes.len() - ID_LEN);
        if blake3::hash(body).as_bytes() != sum {
            return Err(DecodeError::new(WHAT, "checksum mismatch"));
        }
        let mut r = Reader::new(body);
        r.header(WHAT, Kind::Manifest as u8, MANIFEST_VERSION)?;
        let size = r.uint(WHAT)?;
        let n = r.count(WHAT)?;
        if n < 2 {
            return Err(DecodeError::new(
                WHAT,
                "a file of fewer than two chunks has no manifest",
            ));
        }
        let mut chunks = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.id(WHAT)?;
            let len = u32::try_from(r.uint(WHAT)?)
                .map_err(|_| DecodeError::new(WHAT, "chunk length over 4 GiB"))?;
            chunks.push(ChunkRef { id, len });
        }
        r.finish(WHAT)?;
        let m = Manifest { chunks };
        if m.size() != size {
            return Err(DecodeError::new(
                WHAT,
                "chunk lengths do not add up to the file size",
            ));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(lens in proptest::collection::vec(1u32..1_000_000, 2..50)) {
            let m = Manifest { chunks: lens.iter().map(|&len| ChunkRef { id: Id::hash(&len.to_le_bytes()), len }).collect() };
            prop_assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        }

        #[test]
        fn any_flipped_byte_is_detected(pos in 0usize..200, bit in 0u8..8) {
            let m = Manifest { chunks: vec![ChunkRef { id: Id::hash(b"a"), len: 10 }, ChunkRef { id: Id::hash(b"b"), len: 20 }] };
            let mut bytes = m.encode();
            let pos = pos % bytes.len();
            bytes[pos] ^= 1 << bit;
            prop_assert!(Manifest::decode(&bytes).is_err());
        }
    }
}
