//! BLAKE3 object identifiers.

use std::fmt;

/// Length in bytes of every identifier.
pub const ID_LEN: usize = 32;

/// A BLAKE3 hash naming a chunk, a file, or an encoded object.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id(pub [u8; ID_LEN]);

impl Id {
    /// The hash of `bytes`.
    pub fn hash(bytes: &[u8]) -> Id {
        Id(*blake3::hash(bytes).as_bytes())
    }

    /// Full lowercase hexadecimal form (64 characters).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first `n` hexadecimal digits, as shown to people.
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n.min(2 * ID_LEN));
        s
    }

    /// Parses a full 64-digit hexadecimal id.
    pub fn from_hex(s: &str) -> Option<Id> {
        let mut out = [0u8; ID_LEN];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Id(out))
    }

    /// Whether the hexadecimal form of this id starts with `prefix` (lowercase hex digits).
    pub fn has_hex_prefix(&self, prefix: &str) -> bool {
        self.to_hex().starts_with(prefix)
    }

    /// Builds an id from a slice of exactly [`ID_LEN`] bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Id> {
        bytes.try_into().ok().map(Id)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.short(16))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl From<blake3::Hash> for Id {
    fn from(h: blake3::Hash) -> Id {
        Id(*h.as_bytes())
    }
}

/// Hashes ids for hash maps: an id is a BLAKE3 hash, so its bytes are already uniform
/// and the map needs no second hash over them (SipHash's cost showed in profiles of large
/// commits). Other keys fed to it are hashed correctly but spread less well.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for word in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..word.len()].copy_from_slice(word);
            self.0 = self.0.rotate_left(17) ^ u64::from_le_bytes(w);
        }
    }
}

/// Builds [`IdHasher`]s.
pub type IdBuildHasher = std::hash::BuildHasherDefault<IdHasher>;
/// A set of ids (or of other BLAKE3 hashes).
pub type IdSet<T = Id> = std::collections::HashSet<T, IdBuildHasher>;
/// A map keyed by ids (or by other BLAKE3 hashes).
pub type IdMap<V, K = Id> = std::collections::HashMap<K, V, IdBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let id = Id::hash(b"lifeos");
        assert_eq!(Id::from_hex(&id.to_hex()), Some(id));
        assert!(id.has_hex_prefix(&id.short(7)));
        assert_eq!(Id::from_hex("zz"), None);
        let mut set = IdSet::default();
        assert!(set.insert(id) && !set.insert(id) && set.insert(Id::hash(b"other")));
    }
}
