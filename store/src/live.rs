//! Sets of live ids for `gc`: what it must keep, asked once per stored entry.
//!
//! A repository of ten million chunks cannot hold a hash set of its ids in memory (about
//! 50 bytes each). [`PrefixSet`] keeps the first 8 bytes of each id in one sorted vector
//! (8 bytes an id) with a table of where each 16-bit prefix starts. Two ids sharing their
//! first 64 bits answer for each other: a dead object whose prefix equals a live one's is
//! kept, which only leaves garbage for a later `gc`; a live object is never reported dead.
//! It is therefore a set for deciding what to keep, never for deciding what to skip.

use std::collections::HashSet;

use crate::id::Id;

/// Ids `gc` keeps.
pub trait Live: Sync {
    /// Whether `id` must be kept. May say yes for an id that was never added (a
    /// [`PrefixSet`]); never says no for one that was.
    fn contains(&self, id: &Id) -> bool;
}

impl Live for HashSet<Id> {
    fn contains(&self, id: &Id) -> bool {
        HashSet::contains(self, id)
    }
}

/// The first 8 bytes of an id, as a number that sorts as the id does.
fn prefix(id: &Id) -> u64 {
    u64::from_be_bytes(id.0[..8].try_into().expect("ids are 32 bytes"))
}

/// A set of ids held as their 64-bit prefixes, while ids are added: 8 bytes an id, with
/// room for a quarter more. [`PrefixSet::freeze`] makes it a [`FrozenPrefixes`] to ask.
/// See the module's notes for what a shared prefix means.
#[derive(Debug, Default)]
pub struct PrefixSet {
    /// Prefixes; sorted and without repeats in `..sorted`, as added after.
    prefixes: Vec<u64>,
    sorted: usize,
}

impl PrefixSet {
    /// Adds `id`.
    pub fn insert(&mut self, id: &Id) {
        if self.prefixes.len() == self.prefixes.capacity() {
            self.compact();
            // Grow by a quarter: the vector holds little more than the distinct prefixes.
            let more = (self.prefixes.len() / 4).max(1024);
            self.prefixes.reserve_exact(more);
        }
        self.prefixes.push(prefix(id));
    }

    /// Sorts what was added and drops repeats.
    fn compact(&mut self) {
        if self.sorted == self.prefixes.len() {
            return;
        }
        self.prefixes.sort_unstable();
        self.prefixes.dedup();
        self.sorted = self.prefixes.len();
    }

    /// The set, ready to be asked.
    pub fn freeze(mut self) -> FrozenPrefixes {
        self.compact();
        self.prefixes.shrink_to_fit();
        let prefixes = self.prefixes;
        let mut starts = Vec::with_capacity((1 << 16) + 1);
        let mut at = 0usize;
        for top in 0..=(1u64 << 16) {
            while at < prefixes.len() && (prefixes[at] >> 48) < top {
                at += 1;
            }
            starts.push(at as u32);
        }
        FrozenPrefixes { prefixes, starts }
    }
}

/// A [`PrefixSet`] after the last insert: sorted prefixes and where those starting with
/// each 16 bits begin.
#[derive(Debug)]
pub struct FrozenPrefixes {
    prefixes: Vec<u64>,
    /// 65,537 bounds into `prefixes`.
    starts: Vec<u32>,
}

impl FrozenPrefixes {
    /// The number of distinct prefixes held (ids that share one count once).
    pub fn len(&self) -> u64 {
        self.prefixes.len() as u64
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Bytes held.
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.prefixes.capacity() * 8 + self.starts.capacity() * 4
    }
}

impl Live for FrozenPrefixes {
    fn contains(&self, id: &Id) -> bool {
        let p = prefix(id);
        let top = (p >> 48) as usize;
        let range = &self.prefixes[self.starts[top] as usize..self.starts[top + 1] as usize];
        range.binary_search(&p).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_set_holds_nothing() {
        let s = PrefixSet::default().freeze();
        assert!(s.is_empty());
        assert!(!s.contains(&Id::hash(b"x")));
    }

    #[test]
    fn ids_sharing_a_prefix_answer_for_each_other() {
        let mut a = [0u8; 32];
        a[..8].copy_from_slice(&[9, 8, 7, 6, 5, 4, 3, 2]);
        let mut b = a;
        b[31] = 1;
        let mut s = PrefixSet::default();
        s.insert(&Id(a));
        let s = s.freeze();
        assert!(s.contains(&Id(a)) && s.contains(&Id(b)));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_million_ids_take_about_eight_bytes_each() {
        let mut s = PrefixSet::default();
        for i in 0..1_000_000u32 {
            s.insert(&Id::hash(&i.to_le_bytes()));
        }
        // Repeats are dropped as the set grows.
        for i in 0..100_000u32 {
            s.insert(&Id::hash(&i.to_le_bytes()));
        }
        let s = s.freeze();
        assert_eq!(s.len(), 1_000_000);
        assert!(s.heap_bytes() < 8_400_000, "{} bytes", s.heap_bytes());
        assert!((0..1_000_000u32).all(|i| s.contains(&Id::hash(&i.to_le_bytes()))));
    }

    proptest! {
        /// Every id added is found; an id not added is found only if it shares the
        /// prefix of one that was.
        #[test]
        fn holds_what_was_added(
            added in proptest::collection::vec(any::<[u8; 32]>(), 0..3000),
            others in proptest::collection::vec(any::<[u8; 32]>(), 0..300),
        ) {
            let mut s = PrefixSet::default();
            for a in &added {
                s.insert(&Id(*a));
            }
            let s = s.freeze();
            for a in &added {
                prop_assert!(s.contains(&Id(*a)));
            }
            let prefixes: HashSet<[u8; 8]> =
                added.iter().map(|a| a[..8].try_into().unwrap()).collect();
            prop_assert_eq!(s.len(), prefixes.len() as u64);
            for o in &others {
                let p: [u8; 8] = o[..8].try_into().unwrap();
                prop_assert_eq!(s.contains(&Id(*o)), prefixes.contains(&p));
            }
        }
    }
}
