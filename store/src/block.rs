//! Blocks: many small objects compressed together as one pack entry.
//!
//! Compressed alone, a 150-byte tree or commit keeps little of what it shares with its
//! neighbours (the previous version of the same directory, the other commits of the same
//! author). A block holds up to [`BLOCK_TARGET`] bytes of such objects, in the order they
//! were written, as one zstd frame, so zstd finds what they share. A block lists only the
//! kind and length of each member: a member's id is the BLAKE3 of its bytes, computed when
//! the block is read (which also verifies it). See `docs/FORMAT.md` (5.8).

use std::collections::HashMap;
use std::ops::Range;

use crate::codec::{Reader, Writer};
use crate::id::Id;
use crate::kind::Kind;

/// Type tag of a block's encoding.
const BLOCK_TAG: u8 = 9;
/// Version of a block's encoding.
const BLOCK_VERSION: u8 = 1;

/// Raw bytes a writer gathers before it closes a block.
pub const BLOCK_TARGET: usize = 1 << 20;
/// Raw bytes at which a block of entities is closed: a query reads a few entities out of
/// many blocks, and each read of a block not in memory decompresses and hashes all of it.
pub const ENTITY_BLOCK_TARGET: usize = 16 << 10;

/// Raw bytes at which a writer closes a block of objects of `kind`.
pub fn target(kind: Kind) -> usize {
    match kind {
        Kind::Entity => ENTITY_BLOCK_TARGET,
        _ => BLOCK_TARGET,
    }
}
/// Largest object a writer puts in a block; larger ones are entries of their own.
pub const BLOCK_MEMBER_MAX: usize = 64 << 10;

/// Whether objects of `kind` may be block members: every kind whose id is the hash of its
/// bytes (not a manifest, whose id is its file's hash) and that is not a block itself.
pub fn can_hold(kind: Kind) -> bool {
    !matches!(kind, Kind::Manifest | Kind::Block)
}

/// A block being filled by a writer.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    members: Vec<(Kind, Id, usize)>,
    data: Vec<u8>,
}

impl BlockBuilder {
    /// Adds a member (the caller checks [`can_hold`] and the size).
    pub fn push(&mut self, kind: Kind, id: Id, raw: &[u8]) {
        debug_assert!(can_hold(kind));
        self.members.push((kind, id, raw.len()));
        self.data.extend_from_slice(raw);
    }

    /// Raw bytes gathered so far.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether no member was added.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The block's encoding and its members' ids and kinds; leaves the builder empty.
    pub fn take(&mut self) -> (Vec<u8>, Vec<(Id, Kind)>) {
        let mut w = Writer::with_header(BLOCK_TAG, BLOCK_VERSION);
        w.uint(self.members.len() as u64);
        for (kind, _, len) in &self.members {
            w.u8(*kind as u8).uint(*len as u64);
        }
        w.raw(&self.data);
        let ids = self.members.drain(..).map(|(k, id, _)| (id, k)).collect();
        self.data.clear();
        (w.finish(), ids)
    }
}

/// A decoded block: its members, each found by its id.
#[derive(Debug)]
pub struct Block {
    raw: Vec<u8>,
    members: HashMap<Id, (Kind, Range<usize>)>,
}

impl Block {
    /// Decodes a block's raw bytes and hashes every member. Refuses a member kind that
    /// cannot be in a block, lengths that do not add up to the bytes present, and trailing
    /// bytes.
    pub fn decode(raw: Vec<u8>) -> Result<Block, String> {
        let mut r = Reader::new(&raw);
        r.header("block", BLOCK_TAG, BLOCK_VERSION)
            .map_err(|e| e.to_string())?;
        let count = r.count("block member count").map_err(|e| e.to_string())?;
        let mut sizes = Vec::with_capacity(count);
        for _ in 0..count {
            let k = r.u8("block member kind").map_err(|e| e.to_string())?;
            let kind = Kind::from_u8(k)
                .filter(|k| can_hold(*k))
                .ok_or_else(|| format!("a block cannot hold an entry of kind {k}"))?;
            let len = r.uint("block member length").map_err(|e| e.to_string())?;
            sizes.push((kind, len));
        }
        let start = raw.len() - r.remaining();
        let total = sizes
            .iter()
            .try_fold(0u64, |acc, (_, len)| acc.checked_add(*len))
            .filter(|t| *t == r.remaining() as u64)
            .ok_or_else(|| {
                format!(
                    "member lengths do not add up to the {} bytes after the list",
                    r.remaining()
                )
            })?;
        debug_assert_eq!(start as u64 + total, raw.len() as u64);
        let mut members = HashMap::with_capacity(count);
        let mut at = start;
        for (kind, len) in sizes {
            let range = at..at + len as usize;
            at = range.end;
            members
                .entry(Id::hash(&raw[range.clone()]))
                .or_insert((kind, range));
        }
        Ok(Block { raw, members })
    }

    /// The kind and bytes of member `id`, if the block holds it.
    pub fn get(&self, id: &Id) -> Option<(Kind, &[u8])> {
        self.members
            .get(id)
            .map(|(kind, range)| (*kind, &self.raw[range.clone()]))
    }

    /// Every member: its id, kind and length.
    pub fn members(&self) -> impl Iterator<Item = (Id, Kind, usize)> + '_ {
        self.members
            .iter()
            .map(|(id, (kind, range))| (*id, *kind, range.len()))
    }

    /// Bytes of the block's raw encoding (what a reader keeps in memory).
    pub fn raw_len(&self) -> usize {
        self.raw.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every member comes back under its hash, with its kind.
        #[test]
        fn blocks_round_trip(members in proptest::collection::vec((1u8..9, proptest::collection::vec(any::<u8>(), 0..300)), 0..40)) {
            let mut b = BlockBuilder::default();
            let mut want = Vec::new();
            for (k, raw) in &members {
                let kind = Kind::from_u8(*k).unwrap();
                // A writer adds an id once (a store holds each id under one kind).
                if !can_hold(kind) || want.iter().any(|(id, _, _)| *id == Id::hash(raw)) {
                    continue;
                }
                b.push(kind, Id::hash(raw), raw);
                want.push((Id::hash(raw), kind, raw.clone()));
            }
            let (raw, ids) = b.take();
            prop_assert!(b.is_empty());
            prop_assert_eq!(ids.len(), want.len());
            let block = Block::decode(raw).unwrap();
            for (id, kind, bytes) in want {
                prop_assert_eq!(block.get(&id), Some((kind, bytes.as_slice())));
            }
        }

        /// Damaged blocks are refused or decode to members that hash to their ids, never
        /// a panic.
        #[test]
        fn damaged_blocks_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
            let mut b = BlockBuilder::default();
            for i in 0..20u32 {
                let raw = i.to_le_bytes().repeat(i as usize);
                b.push(Kind::Tree, Id::hash(&raw), &raw);
            }
            let (mut raw, _) = b.take();
            for (at, v) in edits {
                let n = raw.len();
                raw[at % n] = v;
            }
            if let Ok(block) = Block::decode(raw) {
                for (id, _, _) in block.members() {
                    let (_, bytes) = block.get(&id).unwrap();
                    prop_assert_eq!(Id::hash(bytes), id);
                }
            }
        }
    }

    #[test]
    fn a_block_refuses_manifests_and_lengths_that_do_not_add_up() {
        let raw = [BLOCK_TAG, BLOCK_VERSION, 1, Kind::Manifest as u8, 0];
        assert!(Block::decode(raw.to_vec()).unwrap_err().contains("kind 2"));
        let raw = [BLOCK_TAG, BLOCK_VERSION, 1, Kind::Tree as u8, 5, 1, 2];
        assert!(Block::decode(raw.to_vec())
            .unwrap_err()
            .contains("do not add up"));
    }
}
