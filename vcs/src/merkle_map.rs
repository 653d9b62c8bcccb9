//! A Merkle map from keys to object ids: a view's entity root (entity id to entity
//! object) and its action root (action id to newest record) are each one. Its nodes are
//! the objects of kind "entity map node", the name it had when entities were its only use.
//!
//! It is a hash array mapped trie: a key's path is the BLAKE3 hash of the key, read four
//! bits at a time, so each node has up to 16 slots. A slot holds nothing, a leaf (a key and
//! its value) or a child node. The shape is a function of the set of keys alone (a node
//! exists for a hash prefix exactly when two or more keys share it; the root always
//! exists), so equal maps have equal root ids however they were built. Editing one key
//! among a million rewrites the five or six nodes on its path; two roots diff and merge
//! by descending only where their node ids differ. See `docs/FORMAT.md` (7.8).

use lifeos_store::codec::{Reader, Writer};
use lifeos_store::{Id, Kind, Store, Transaction};

use crate::error::{Result, VcsError};

/// Format version of a node's encoding.
const NODE_VERSION: u8 = 1;
/// Slots per node (four bits of the key's hash per level).
const FANOUT: usize = 16;
/// Levels of a path: 256 bits of hash, four at a time.
const MAX_DEPTH: usize = 64;

/// Reads map nodes.
pub trait NodeRead {
    /// The raw bytes of node `id`.
    fn read_node(&self, id: &Id) -> Result<Vec<u8>>;
}

/// Reads and writes map nodes.
pub trait NodeWrite: NodeRead {
    /// Stores a node's raw bytes; returns its id.
    fn write_node(&mut self, raw: &[u8]) -> Result<Id>;
}

impl NodeRead for Store {
    fn read_node(&self, id: &Id) -> Result<Vec<u8>> {
        Ok(self.read_object(id, Kind::MapNode)?)
    }
}

impl NodeRead for Transaction<'_> {
    fn read_node(&self, id: &Id) -> Result<Vec<u8>> {
        Ok(self.read_object(id, Kind::MapNode)?)
    }
}

impl NodeWrite for Transaction<'_> {
    fn write_node(&mut self, raw: &[u8]) -> Result<Id> {
        Ok(self.write_object(Kind::MapNode, raw)?)
    }
}

/// What a slot of a node holds, or what a subtree reduces to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sub {
    Empty,
    Leaf(Vec<u8>, Id),
    Node(Id),
}

/// A decoded node: its 16 slots.
type Slots = Vec<Sub>;

/// The key's hash, whose nibbles are its path.
fn path(key: &[u8]) -> [u8; 32] {
    *blake3::hash(key).as_bytes()
}

/// Where `key` sorts in a map's walks ([`MerkleMap::entries`], diffs): objects grouped
/// into blocks should be written in this order, so a walk decodes each block once.
pub fn walk_order(key: &[u8]) -> [u8; 32] {
    path(key)
}

/// The slot of `hash` at `depth` (high nibble first).
fn nibble(hash: &[u8; 32], depth: usize) -> usize {
    let b = hash[depth / 2];
    usize::from(if depth.is_multiple_of(2) {
        b >> 4
    } else {
        b & 0x0f
    })
}

fn encode(slots: &[Sub]) -> Vec<u8> {
    let mut bitmap = 0u16;
    for (i, s) in slots.iter().enumerate() {
        if *s != Sub::Empty {
            bitmap |= 1 << i;
        }
    }
    let mut w = Writer::with_header(Kind::MapNode as u8, NODE_VERSION);
    w.raw(&bitmap.to_le_bytes());
    for s in slots {
        match s {
            Sub::Empty => {}
            Sub::Leaf(key, value) => {
                w.u8(0).bytes(key).id(value);
            }
            Sub::Node(id) => {
                w.u8(1).id(id);
            }
        }
    }
    w.finish()
}

fn decode(id: &Id, raw: &[u8]) -> Result<Slots> {
    const W: &str = "entity map node";
    let err = |source| VcsError::Decode {
        kind: W,
        id: *id,
        source,
    };
    let mut r = Reader::new(raw);
    r.header(W, Kind::MapNode as u8, NODE_VERSION)
        .map_err(err)?;
    let bits = r.raw(W, 2).map_err(err)?;
    let bitmap = u16::from_le_bytes([bits[0], bits[1]]);
    let mut slots = vec![Sub::Empty; FANOUT];
    for (i, slot) in slots.iter_mut().enumerate() {
        if bitmap & (1 << i) == 0 {
            continue;
        }
        *slot = match r.u8(W).map_err(err)? {
            0 => Sub::Leaf(r.bytes(W).map_err(err)?.to_vec(), r.id(W).map_err(err)?),
            1 => Sub::Node(r.id(W).map_err(err)?),
            t => {
                return Err(err(lifeos_store::codec::DecodeError::new(
                    W,
                    format!("slot tag {t}"),
                )))
            }
        };
    }
    r.finish(W).map_err(err)?;
    Ok(slots)
}

/// Decodes a node's raw bytes (as `fsck` and the fuzzers do), refusing what a reader
/// refuses (FORMAT 7.8).
pub fn check_node(raw: &[u8]) -> Result<()> {
    decode(&Id::hash(raw), raw).map(|_| ())
}

fn read(store: &dyn NodeRead, id: &Id) -> Result<Slots> {
    decode(id, &store.read_node(id)?)
}

/// Reads the node `id` found at `depth`; a chain of nodes deeper than a key's path can be
/// (a damaged or hostile map) is an error.
fn read_at(store: &dyn NodeRead, id: &Id, depth: usize) -> Result<Slots> {
    if depth >= MAX_DEPTH {
        return Err(VcsError::Inconsistent(format!(
            "entity map node {id} lies deeper than the {MAX_DEPTH} levels of a key's path"
        )));
    }
    read(store, id)
}

/// A map's root: the id of its root node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MerkleMap(pub Id);

/// One key whose value differs between two maps (`None`: absent on that side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapChange {
    /// The key (an entity id).
    pub key: Vec<u8>,
    /// Its value in the first map.
    pub old: Option<Id>,
    /// Its value in the second map.
    pub new: Option<Id>,
}

/// What a three-way merge asks its caller to decide: a key changed differently on both
/// sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapConflict {
    /// The key.
    pub key: Vec<u8>,
    /// Its value in the merge base.
    pub base: Option<Id>,
    /// Its value on our side.
    pub ours: Option<Id>,
    /// Its value on their side.
    pub theirs: Option<Id>,
}

/// Decides a conflicting key: the value the merged map keeps (`None` removes it).
pub type Resolve<'a> = dyn FnMut(&MapConflict) -> Result<Option<Id>> + 'a;

impl MerkleMap {
    /// Writes the empty map.
    pub fn empty(store: &mut dyn NodeWrite) -> Result<MerkleMap> {
        Ok(MerkleMap(
            store.write_node(&encode(&vec![Sub::Empty; FANOUT]))?,
        ))
    }

    /// Writes the map holding exactly `entries` (each key once; a `None` value is
    /// skipped), without writing the empty map first.
    pub fn build(
        store: &mut dyn NodeWrite,
        entries: &[(Vec<u8>, Option<Id>)],
    ) -> Result<MerkleMap> {
        let entries: Vec<Entry> = entries
            .iter()
            .filter_map(|(k, v)| v.map(|v| (path(k), k.clone(), v)))
            .collect();
        let mut written = 0;
        let sub = build(store, 0, entries, &mut written)?;
        Ok(MerkleMap(root_id(store, sub, &mut written)?))
    }

    /// The value of `key`, if present.
    pub fn get(&self, store: &dyn NodeRead, key: &[u8]) -> Result<Option<Id>> {
        let hash = path(key);
        let mut node = self.0;
        for depth in 0..MAX_DEPTH {
            match &read(store, &node)?[nibble(&hash, depth)] {
                Sub::Empty => return Ok(None),
                Sub::Leaf(k, v) => return Ok((k.as_slice() == key).then_some(*v)),
                Sub::Node(child) => node = *child,
            }
        }
        Ok(None)
    }

    /// Every key and value, in no particular order.
    pub fn entries(&self, store: &dyn NodeRead) -> Result<Vec<(Vec<u8>, Id)>> {
        let mut out = Vec::new();
        collect(store, &Sub::Node(self.0), &mut out)?;
        Ok(out)
    }

    /// Visits the map's nodes and values for reachability: `node` is called with each
    /// node id and says whether to go into it (`false` for one seen before, so maps that
    /// share subtrees are walked once); `value` gets every value below the nodes entered.
    pub fn visit(
        &self,
        store: &dyn NodeRead,
        node: &mut dyn FnMut(&Id) -> bool,
        value: &mut dyn FnMut(&Id),
    ) -> Result<()> {
        let mut stack = vec![self.0];
        while let Some(id) = stack.pop() {
            if !node(&id) {
                continue;
            }
            for s in read(store, &id)? {
                match s {
                    Sub::Empty => {}
                    Sub::Leaf(_, v) => value(&v),
                    Sub::Node(child) => stack.push(child),
                }
            }
        }
        Ok(())
    }

    /// Applies `edits` (a key and its new value, `None` to remove it; each key once) and
    /// returns the new map and how many nodes were written: only the nodes on the edited
    /// keys' paths, each once.
    pub fn apply(
        &self,
        store: &mut dyn NodeWrite,
        edits: &[(Vec<u8>, Option<Id>)],
    ) -> Result<(MerkleMap, u64)> {
        let edits: Vec<Edit> = edits
            .iter()
            .map(|(k, v)| (path(k), k.clone(), *v))
            .collect();
        let mut written = 0;
        let root = apply_at(store, &Sub::Node(self.0), 0, edits, &mut written)?;
        Ok((MerkleMap(root_id(store, root, &mut written)?), written))
    }

    /// The keys whose values differ from `self` to `other`, found by descending only
    /// where node ids differ.
    pub fn diff(&self, store: &dyn NodeRead, other: &MerkleMap) -> Result<Vec<MapChange>> {
        let mut out = Vec::new();
        diff_at(store, &Sub::Node(self.0), &Sub::Node(other.0), &mut out)?;
        Ok(out)
    }

    /// The keys whose values differ from map `old` to map `new`, either of which may be
    /// absent (an absent map is empty).
    pub fn changes(
        store: &dyn NodeRead,
        old: Option<&MerkleMap>,
        new: Option<&MerkleMap>,
    ) -> Result<Vec<MapChange>> {
        let all = |m: &MerkleMap, side: bool| -> Result<Vec<MapChange>> {
            Ok(m.entries(store)?
                .into_iter()
                .map(|(key, v)| MapChange {
                    key,
                    old: (!side).then_some(v),
                    new: side.then_some(v),
                })
                .collect())
        };
        match (old, new) {
            (Some(a), Some(b)) => a.diff(store, b),
            (None, Some(b)) => all(b, true),
            (Some(a), None) => all(a, false),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// Merges `ours` and `theirs`, both descended from `base`: a key changed on one side
    /// takes that side's value; a key changed on both sides to different values is
    /// decided by `resolve`.
    pub fn merge(
        store: &mut dyn NodeWrite,
        base: &MerkleMap,
        ours: &MerkleMap,
        theirs: &MerkleMap,
        resolve: &mut Resolve<'_>,
    ) -> Result<MerkleMap> {
        let mut written = 0;
        let merged = merge_at(
            store,
            [&Sub::Node(base.0), &Sub::Node(ours.0), &Sub::Node(theirs.0)],
            0,
            resolve,
            &mut written,
        )?;
        Ok(MerkleMap(root_id(store, merged, &mut written)?))
    }
}

/// An edit with its key's path.
type Edit = ([u8; 32], Vec<u8>, Option<Id>);
/// An entry with its key's path.
type Entry = ([u8; 32], Vec<u8>, Id);

/// The root node for what a subtree reduced to (the root always exists as a node).
fn root_id(store: &mut dyn NodeWrite, sub: Sub, written: &mut u64) -> Result<Id> {
    match sub {
        Sub::Node(id) => Ok(id),
        Sub::Empty => write(store, vec![Sub::Empty; FANOUT], written),
        Sub::Leaf(k, v) => {
            let mut slots = vec![Sub::Empty; FANOUT];
            let at = nibble(&path(&k), 0);
            slots[at] = Sub::Leaf(k, v);
            write(store, slots, written)
        }
    }
}

fn write(store: &mut dyn NodeWrite, slots: Slots, written: &mut u64) -> Result<Id> {
    *written += 1;
    store.write_node(&encode(&slots))
}

/// What a node's slots reduce to below the root: nothing, a lone leaf, or a node.
fn finish(store: &mut dyn NodeWrite, slots: Slots, written: &mut u64) -> Result<Sub> {
    let mut filled = slots.iter().filter(|s| **s != Sub::Empty);
    match (filled.next(), filled.next()) {
        (None, _) => Ok(Sub::Empty),
        (Some(Sub::Leaf(..)), None) => Ok(slots
            .into_iter()
            .find(|s| *s != Sub::Empty)
            .expect("one slot")),
        _ => Ok(Sub::Node(write(store, slots, written)?)),
    }
}

/// Merges the roots of concurrent maps (`None`: no map yet, read as empty) against
/// their common `base`, one side after another; a key changed differently on two sides
/// is settled by `decide` (which may write objects into `tx`).
pub(crate) fn merge_map_roots(
    tx: &mut Transaction<'_>,
    base: Option<Id>,
    sides: &[Option<Id>],
    decide: &mut dyn FnMut(&mut Transaction<'_>, &MapConflict) -> Result<Option<Id>>,
) -> Result<Option<Id>> {
    if sides.iter().all(|s| *s == base) {
        return Ok(base);
    }
    // The empty map stands in for a side that has no root yet.
    let empty = match base.is_none() || sides.iter().any(Option::is_none) {
        true => Some(MerkleMap::empty(tx)?),
        false => None,
    };
    let or_empty = |r: Option<Id>| {
        r.map(MerkleMap)
            .or(empty)
            .expect("the empty map is written when a root is missing")
    };
    let base_map = or_empty(base);
    let mut merged = or_empty(sides[0]);
    for side in &sides[1..] {
        let mut conflicts: Vec<MapConflict> = Vec::new();
        let m = MerkleMap::merge(tx, &base_map, &merged, &or_empty(*side), &mut |c| {
            conflicts.push(c.clone());
            Ok(c.theirs)
        })?;
        let mut edits = Vec::with_capacity(conflicts.len());
        for c in conflicts {
            let value = decide(tx, &c)?;
            edits.push((c.key, value));
        }
        merged = m.apply(tx, &edits)?.0;
    }
    Ok(Some(merged.0))
}

/// Builds the subtree at `depth` holding exactly `entries`.
fn build(
    store: &mut dyn NodeWrite,
    depth: usize,
    mut entries: Vec<Entry>,
    written: &mut u64,
) -> Result<Sub> {
    entries.sort_unstable_by_key(|e| e.0);
    build_sorted(store, depth, &entries, written)
}

/// Builds the subtree at `depth` holding exactly `entries`, sorted by hash: below a
/// common prefix, each slot's entries are a run of the slice.
fn build_sorted(
    store: &mut dyn NodeWrite,
    depth: usize,
    entries: &[Entry],
    written: &mut u64,
) -> Result<Sub> {
    match entries {
        [] => return Ok(Sub::Empty),
        [(_, k, v)] => return Ok(Sub::Leaf(k.clone(), *v)),
        [a, b, ..] if depth >= MAX_DEPTH => {
            return Err(VcsError::Refused(format!(
                "entity ids {:?} and {:?} have the same BLAKE3 hash",
                String::from_utf8_lossy(&a.1),
                String::from_utf8_lossy(&b.1)
            )))
        }
        _ => {}
    }
    let mut slots = Vec::with_capacity(FANOUT);
    let mut rest = entries;
    for slot in 0..FANOUT {
        let (group, after) = rest.split_at(rest.partition_point(|e| nibble(&e.0, depth) <= slot));
        slots.push(build_sorted(store, depth + 1, group, written)?);
        rest = after;
    }
    finish(store, slots, written)
}

/// Every entry below `sub`.
fn collect(store: &dyn NodeRead, sub: &Sub, out: &mut Vec<(Vec<u8>, Id)>) -> Result<()> {
    match sub {
        Sub::Empty => {}
        Sub::Leaf(k, v) => out.push((k.clone(), *v)),
        Sub::Node(id) => {
            for s in read(store, id)? {
                collect(store, &s, out)?;
            }
        }
    }
    Ok(())
}

/// The entries below `sub` with their paths.
fn entries_of(store: &dyn NodeRead, sub: &Sub) -> Result<Vec<Entry>> {
    let mut flat = Vec::new();
    collect(store, sub, &mut flat)?;
    Ok(flat.into_iter().map(|(k, v)| (path(&k), k, v)).collect())
}

fn apply_at(
    store: &mut dyn NodeWrite,
    sub: &Sub,
    depth: usize,
    edits: Vec<Edit>,
    written: &mut u64,
) -> Result<Sub> {
    if edits.is_empty() {
        return Ok(sub.clone());
    }
    let Sub::Node(id) = sub else {
        // A leaf or nothing: the subtree is small; rebuild it from its entries.
        let mut entries: Vec<Entry> = match sub {
            Sub::Leaf(k, v) if !edits.iter().any(|e| e.1 == *k) => {
                vec![(path(k), k.clone(), *v)]
            }
            _ => Vec::new(),
        };
        entries.extend(
            edits
                .into_iter()
                .filter_map(|(h, k, v)| v.map(|v| (h, k, v))),
        );
        let rebuilt = build(store, depth, entries, written)?;
        return Ok(rebuilt);
    };
    let old = read_at(store, id, depth)?;
    let mut groups: Vec<Vec<Edit>> = vec![Vec::new(); FANOUT];
    for e in edits {
        groups[nibble(&e.0, depth)].push(e);
    }
    let mut slots = Vec::with_capacity(FANOUT);
    for (slot, group) in old.iter().zip(groups) {
        slots.push(apply_at(store, slot, depth + 1, group, written)?);
    }
    if slots == old {
        return Ok(sub.clone());
    }
    if depth == 0 {
        return Ok(Sub::Node(write(store, slots, written)?));
    }
    finish(store, slots, written)
}

fn diff_at(store: &dyn NodeRead, a: &Sub, b: &Sub, out: &mut Vec<MapChange>) -> Result<()> {
    if a == b {
        return Ok(());
    }
    if let (Sub::Node(x), Sub::Node(y)) = (a, b) {
        let (xs, ys) = (read(store, x)?, read(store, y)?);
        for (sa, sb) in xs.iter().zip(&ys) {
            diff_at(store, sa, sb, out)?;
        }
        return Ok(());
    }
    // One side is a leaf or nothing: compare the (few) entries below both.
    let old = entries_of(store, a)?;
    let new = entries_of(store, b)?;
    for (_, k, v) in &old {
        let now = new.iter().find(|e| e.1 == *k).map(|e| e.2);
        if now != Some(*v) {
            out.push(MapChange {
                key: k.clone(),
                old: Some(*v),
                new: now,
            });
        }
    }
    for (_, k, v) in &new {
        if !old.iter().any(|e| e.1 == *k) {
            out.push(MapChange {
                key: k.clone(),
                old: None,
                new: Some(*v),
            });
        }
    }
    Ok(())
}

fn merge_at(
    store: &mut dyn NodeWrite,
    [base, ours, theirs]: [&Sub; 3],
    depth: usize,
    resolve: &mut Resolve<'_>,
    written: &mut u64,
) -> Result<Sub> {
    if ours == theirs || theirs == base {
        return Ok(ours.clone());
    }
    if ours == base {
        return Ok(theirs.clone());
    }
    if let (Sub::Node(b), Sub::Node(o), Sub::Node(t)) = (base, ours, theirs) {
        let (bs, os, ts) = (
            read_at(store, b, depth)?,
            read_at(store, o, depth)?,
            read_at(store, t, depth)?,
        );
        let mut slots = Vec::with_capacity(FANOUT);
        for i in 0..FANOUT {
            slots.push(merge_at(
                store,
                [&bs[i], &os[i], &ts[i]],
                depth + 1,
                resolve,
                written,
            )?);
        }
        if depth == 0 {
            return Ok(Sub::Node(write(store, slots, written)?));
        }
        return finish(store, slots, written);
    }
    // A leaf or nothing on some side: merge the entries below, key by key.
    let (b, o, t) = (
        entries_of(store, base)?,
        entries_of(store, ours)?,
        entries_of(store, theirs)?,
    );
    let value = |set: &[Entry], k: &[u8]| set.iter().find(|e| e.1 == k).map(|e| e.2);
    let mut keys: Vec<&Entry> = b.iter().chain(&o).chain(&t).collect();
    keys.sort_by(|x, y| x.1.cmp(&y.1));
    keys.dedup_by(|x, y| x.1 == y.1);
    let mut merged = Vec::new();
    for (h, k, _) in keys {
        let (vb, vo, vt) = (value(&b, k), value(&o, k), value(&t, k));
        let v = if vo == vt || vt == vb {
            vo
        } else if vo == vb {
            vt
        } else {
            resolve(&MapConflict {
                key: k.clone(),
                base: vb,
                ours: vo,
                theirs: vt,
            })?
        };
        if let Some(v) = v {
            merged.push((*h, k.clone(), v));
        }
    }
    build(store, depth, merged, written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn value(n: u32) -> Id {
        Id::hash(&n.to_le_bytes())
    }

    fn key(n: u32) -> Vec<u8> {
        format!("task:{n}").into_bytes()
    }

    /// A real store in a temporary folder, with one open transaction.
    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        (dir, store)
    }

    fn as_map(tx: &Transaction<'_>, m: &MerkleMap) -> BTreeMap<Vec<u8>, Id> {
        m.entries(tx).unwrap().into_iter().collect()
    }

    proptest! {
        /// The map holds what a BTreeMap given the same edits holds, and its root depends
        /// only on its contents (a map built in one batch has the same id).
        #[test]
        fn edits_match_a_btreemap_and_equal_contents_have_equal_roots(
            batches in proptest::collection::vec(
                proptest::collection::btree_map(0u32..300, proptest::option::of(0u32..5), 0..40),
                1..6,
            )
        ) {
            let (_d, store) = store();
            let mut tx = store.transaction().unwrap();
            let mut map = MerkleMap::empty(&mut tx).unwrap();
            let mut model = BTreeMap::new();
            for batch in batches {
                let edits: Vec<(Vec<u8>, Option<Id>)> =
                    batch.iter().map(|(k, v)| (key(*k), v.map(value))).collect();
                let before = map;
                map = map.apply(&mut tx, &edits).unwrap().0;
                let mut expected = Vec::new();
                for (k, v) in &edits {
                    let old = model.get(k).copied();
                    if old != *v {
                        expected.push(MapChange { key: k.clone(), old, new: *v });
                    }
                    match v {
                        Some(v) => model.insert(k.clone(), *v),
                        None => model.remove(k),
                    };
                }
                let mut changes = before.diff(&tx, &map).unwrap();
                changes.sort_by(|a, b| a.key.cmp(&b.key));
                expected.sort_by(|a, b| a.key.cmp(&b.key));
                prop_assert_eq!(changes, expected);
            }
            prop_assert_eq!(as_map(&tx, &map), model.clone());
            for (k, v) in &model {
                prop_assert_eq!(map.get(&tx, k).unwrap(), Some(*v));
            }
            prop_assert_eq!(map.get(&tx, b"absent").unwrap(), None);
            let all: Vec<(Vec<u8>, Option<Id>)> =
                model.iter().map(|(k, v)| (k.clone(), Some(*v))).collect();
            let empty = MerkleMap::empty(&mut tx).unwrap();
            prop_assert_eq!(empty.apply(&mut tx, &all).unwrap().0, map);
            prop_assert_eq!(MerkleMap::build(&mut tx, &all).unwrap(), map);
        }

        /// A three-way merge keeps each side's changes and asks about keys both changed.
        #[test]
        fn merge_keeps_both_sides(
            base in proptest::collection::btree_map(0u32..200, 0u32..5, 0..60),
            ours in proptest::collection::btree_map(0u32..200, proptest::option::of(5u32..10), 0..20),
            theirs in proptest::collection::btree_map(0u32..200, proptest::option::of(10u32..15), 0..20),
        ) {
            let (_d, store) = store();
            let mut tx = store.transaction().unwrap();
            let empty = MerkleMap::empty(&mut tx).unwrap();
            let edits = |m: &BTreeMap<u32, Option<u32>>| -> Vec<(Vec<u8>, Option<Id>)> {
                m.iter().map(|(k, v)| (key(*k), v.map(value))).collect()
            };
            let b_edits: BTreeMap<u32, Option<u32>> = base.iter().map(|(k, v)| (*k, Some(*v))).collect();
            let b = empty.apply(&mut tx, &edits(&b_edits)).unwrap().0;
            let o = b.apply(&mut tx, &edits(&ours)).unwrap().0;
            let t = b.apply(&mut tx, &edits(&theirs)).unwrap().0;
            let mut asked = Vec::new();
            let merged = MerkleMap::merge(&mut tx, &b, &o, &t, &mut |c| {
                asked.push(c.key.clone());
                Ok(c.ours)
            })
            .unwrap();
            let mut want = as_map(&tx, &b);
            let mut want_asked = Vec::new();
            for k in ours.keys().chain(theirs.keys()).collect::<std::collections::BTreeSet<_>>() {
                let kb = key(*k);
                let vb = want.get(&kb).copied();
                let vo = ours.get(k).map_or(vb, |v| v.map(value));
                let vt = theirs.get(k).map_or(vb, |v| v.map(value));
                let v = if vo == vt || vt == vb {
                    vo
                } else if vo == vb {
                    vt
                } else {
                    want_asked.push(kb.clone());
                    vo
                };
                match v {
                    Some(v) => want.insert(kb, v),
                    None => want.remove(&kb),
                };
            }
            asked.sort();
            want_asked.sort();
            prop_assert_eq!(asked, want_asked);
            prop_assert_eq!(as_map(&tx, &merged), want.clone());
            // The same contents built directly give the same root.
            let all: Vec<(Vec<u8>, Option<Id>)> = want.iter().map(|(k, v)| (k.clone(), Some(*v))).collect();
            prop_assert_eq!(empty.apply(&mut tx, &all).unwrap().0, merged);
        }
    }

    /// One edit among 100,000 entries writes only the nodes on its path, and a second
    /// transaction reads the map back from the store.
    #[test]
    fn one_edit_writes_a_path_of_nodes() {
        let (_d, store) = store();
        let mut tx = store.transaction().unwrap();
        let all: Vec<(Vec<u8>, Option<Id>)> =
            (0..100_000).map(|i| (key(i), Some(value(i)))).collect();
        let empty = MerkleMap::empty(&mut tx).unwrap();
        let (map, built) = empty.apply(&mut tx, &all).unwrap();
        let (edited, written) = map.apply(&mut tx, &[(key(42), Some(value(7)))]).unwrap();
        assert!(
            written <= 6,
            "one edit wrote {written} nodes (building wrote {built})"
        );
        let (same, none) = edited.apply(&mut tx, &[(key(42), Some(value(7)))]).unwrap();
        assert_eq!((same, none), (edited, 0));
        drop(tx.commit().unwrap());
        let fresh = Store::open(store.dir()).unwrap();
        assert_eq!(edited.get(&fresh, &key(42)).unwrap(), Some(value(7)));
        assert_eq!(edited.get(&fresh, &key(43)).unwrap(), Some(value(43)));
        let changes = map.diff(&fresh, &edited).unwrap();
        assert_eq!(
            changes,
            vec![MapChange {
                key: key(42),
                old: Some(value(42)),
                new: Some(value(7)),
            }]
        );
    }

    /// A damaged node is an error naming it, never a wrong answer.
    #[test]
    fn a_node_that_does_not_decode_is_named() {
        let (_d, store) = store();
        let mut tx = store.transaction().unwrap();
        let raw = [Kind::MapNode as u8, NODE_VERSION, 1, 0, 7];
        assert!(check_node(&raw).is_err());
        assert!(check_node(&encode(&vec![Sub::Empty; FANOUT])).is_ok());
        let id = tx.write_node(&raw).unwrap();
        let err = MerkleMap(id).get(&tx, b"x").unwrap_err().to_string();
        assert!(
            err.contains("entity map node") && err.contains(&id.to_string()[..8]),
            "{err}"
        );
    }
}
