//! The stat cache file (`.lifeos/wc_state`, FORMAT 9) read in place.
//!
//! Version 2, written by this lifeos, is a sorted array of fixed-width records followed by
//! the paths they point into: a lookup is a binary search over the file's bytes, so
//! reading the cache of 100,000 files allocates one buffer rather than a map of 100,000
//! heap paths. Version 1 (a list of varint-encoded entries) is still read: it is converted
//! to version 2 in memory, and the next save writes version 2.

use std::collections::BTreeMap;

use lifeos_store::codec::Reader;
use lifeos_store::Id;

use crate::object::EntryKind;
use crate::working_copy::{CacheEntry, Scan, WcState};

const MAGIC: &[u8; 8] = b"LIFEOSWC";
/// The version written.
const VERSION: u8 = 2;
/// Magic, version, `recorded_at_ns`, the tree and the record count.
const HEADER: usize = 8 + 1 + 16 + 32 + 8;
/// Where the record count is in the header.
const COUNT_AT: usize = 8 + 1 + 16 + 32;
/// One record: path offset and length, size, mtime, ctime, inode, mode, kind, padding, id.
const RECORD: usize = 96;
/// The checksum at the end: the first 16 bytes of the BLAKE3 of everything before it.
const SUM: usize = 16;

/// A stat cache as read from its file: entries sorted by path, looked up in place.
#[derive(Debug, Clone, Default)]
pub struct StatCache {
    /// The file in format 2 (a format-1 file is converted); empty for an empty cache.
    bytes: Vec<u8>,
    count: usize,
    recorded_at_ns: i128,
    tree: Option<Id>,
    /// Read from a file of an earlier format: worth saving again in this one.
    converted: bool,
}

/// The checksum that ends a stat cache file (its last 16 bytes), which names it.
pub fn file_sum(bytes: &[u8]) -> Option<[u8; SUM]> {
    bytes.get(bytes.len().checked_sub(SUM)?..)?.try_into().ok()
}

fn kind_byte(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::File => 0,
        EntryKind::Executable => 1,
        EntryKind::Symlink => 2,
        EntryKind::Dir => 3,
        EntryKind::Gitlink => 4,
    }
}

fn kind_of(byte: u8) -> Option<EntryKind> {
    Some(match byte {
        0 => EntryKind::File,
        1 => EntryKind::Executable,
        2 => EntryKind::Symlink,
        _ => return None,
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn i128_at(b: &[u8], at: usize) -> i128 {
    i128::from_le_bytes(b[at..at + 16].try_into().expect("16 bytes"))
}

/// Encodes `state` in format 2 (FORMAT 9.1).
pub(crate) fn encode(state: &WcState) -> Vec<u8> {
    encode_sorted(
        state.recorded_at_ns,
        state.tree,
        state.entries.iter().map(|(p, e)| (p.as_slice(), e.clone())),
    )
}

/// The most bytes of paths a cache holds (its offsets are `u32`).
const PATHS_LIMIT: usize = u32::MAX as usize;

/// Encodes entries given in strictly increasing path order in format 2.
fn encode_sorted<'a>(
    recorded_at_ns: i128,
    tree: Option<Id>,
    entries: impl Iterator<Item = (&'a [u8], CacheEntry)> + Clone,
) -> Vec<u8> {
    encode_within(recorded_at_ns, tree, entries, PATHS_LIMIT)
}

/// [`encode_sorted`] with a limit on the bytes of paths: a state whose paths together
/// exceed it is written with no records and naming no tree (the cache is only an
/// optimisation: the next snapshot reads every file).
fn encode_within<'a>(
    recorded_at_ns: i128,
    mut tree: Option<Id>,
    entries: impl Iterator<Item = (&'a [u8], CacheEntry)> + Clone,
    limit: usize,
) -> Vec<u8> {
    let (mut count, mut paths_len) = entries
        .clone()
        .fold((0, 0), |(n, len), (p, _)| (n + 1, len + p.len()));
    if paths_len > limit {
        (count, paths_len, tree) = (0, 0, None);
    }
    let mut out = Vec::with_capacity(HEADER + count * RECORD + paths_len + SUM);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&recorded_at_ns.to_le_bytes());
    out.extend_from_slice(&tree.map_or([0; 32], |t| t.0));
    out.extend_from_slice(&(count as u64).to_le_bytes());
    let mut offset = 0u32;
    for (path, e) in entries.clone().take(count) {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        offset += path.len() as u32;
        out.extend_from_slice(&e.size.to_le_bytes());
        out.extend_from_slice(&e.mtime_ns.to_le_bytes());
        out.extend_from_slice(&e.ctime_ns.to_le_bytes());
        out.extend_from_slice(&e.ino.to_le_bytes());
        out.extend_from_slice(&e.mode.to_le_bytes());
        out.extend_from_slice(&[kind_byte(e.kind), 0, 0, 0]);
        out.extend_from_slice(&e.id.0);
    }
    for (path, _) in entries.take(count) {
        out.extend_from_slice(path);
    }
    let sum = blake3::hash(&out);
    out.extend_from_slice(&sum.as_bytes()[..SUM]);
    out
}

/// The stat cache a snapshot leaves, to save once its operation is published.
#[derive(Debug)]
pub enum NewCache {
    /// A whole new cache, its entries in a list in strictly increasing path order (a map
    /// of 1,000,000 paths built from the list held both at once).
    Whole {
        /// When the snapshot started.
        recorded_at_ns: i128,
        /// The tree it names.
        tree: Option<Id>,
        /// The entries, sorted by path, each path once.
        entries: Vec<(Vec<u8>, CacheEntry)>,
    },
    /// The cache the snapshot read with some paths changed (`None`: gone); every entry
    /// recorded at `recorded_at_ns`, the cache naming `tree`. A snapshot that changed a
    /// few paths of a large folder keeps the cache it read rather than a map of every
    /// path.
    Patched {
        /// The cache read.
        old: StatCache,
        /// The changed paths.
        changes: BTreeMap<Vec<u8>, Option<CacheEntry>>,
        /// When the snapshot started.
        recorded_at_ns: i128,
        /// The tree the snapshot made.
        tree: Option<Id>,
        /// Whether it records new metadata for a file whose content the cache had right
        /// (touched, or racily clean): unsaved, that file would be read again each time.
        refreshes: bool,
    },
}

/// A cache patched at no more paths than this, holding no more bytes than
/// [`WAIT_BYTES`], need not be saved ([`NewCache::can_wait`]).
const WAIT_PATHS: usize = 64;
/// See [`WAIT_PATHS`].
const WAIT_BYTES: u64 = 8 << 20;

impl NewCache {
    /// Whether saving it can wait: the cache read, of this format, patched at a few paths
    /// of a few bytes whose content changed. Left unsaved, the cache on disk names its older tree, and the next
    /// snapshot takes each path where that tree and `@`'s differ as never trusted (as
    /// after commits through the monitor): it reads those few files again instead of this
    /// commit writing a whole cache (106 MB at a million files) for them. The paths add
    /// up over the commits that leave it, so one that passes the limits saves it.
    pub fn can_wait(&self) -> bool {
        match self {
            NewCache::Whole { .. } => false,
            NewCache::Patched {
                old,
                changes,
                refreshes,
                ..
            } => {
                !refreshes
                    && !old.converted()
                    && old.tree().is_some()
                    && changes.len() <= WAIT_PATHS
                    && changes.values().flatten().map(|e| e.size).sum::<u64>() <= WAIT_BYTES
            }
        }
    }

    /// The tree it names.
    pub fn tree(&self) -> Option<Id> {
        match self {
            NewCache::Whole { tree, .. } => *tree,
            NewCache::Patched { tree, .. } => *tree,
        }
    }

    /// Encodes it in format 2 (FORMAT 9.1).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            NewCache::Whole {
                recorded_at_ns,
                tree,
                entries,
            } => encode_sorted(
                *recorded_at_ns,
                *tree,
                entries.iter().map(|(p, e)| (p.as_slice(), e.clone())),
            ),
            NewCache::Patched {
                old,
                changes,
                recorded_at_ns,
                tree,
                ..
            } => encode_sorted(*recorded_at_ns, *tree, patched(old, changes)),
        }
    }

    /// It as a map, to change further.
    pub fn into_state(self) -> WcState {
        match self {
            NewCache::Whole {
                recorded_at_ns,
                tree,
                entries,
            } => WcState {
                recorded_at_ns,
                tree,
                entries: entries.into_iter().collect(),
            },
            NewCache::Patched {
                old,
                changes,
                recorded_at_ns,
                tree,
                ..
            } => WcState {
                recorded_at_ns,
                tree,
                entries: patched(&old, &changes)
                    .map(|(p, e)| (p.to_vec(), e))
                    .collect(),
            },
        }
    }
}

/// The entries of `old` with `changes` applied, in path order.
pub(crate) fn patched<'a>(
    old: &'a StatCache,
    changes: &'a BTreeMap<Vec<u8>, Option<CacheEntry>>,
) -> impl Iterator<Item = (&'a [u8], CacheEntry)> + Clone + 'a {
    Patch {
        old: old.iter().peekable(),
        changes: changes.iter().peekable(),
    }
}

/// The entries of a cache with changes applied, in path order.
struct Patch<A: Iterator, B: Iterator> {
    old: std::iter::Peekable<A>,
    changes: std::iter::Peekable<B>,
}

impl<A, B> Clone for Patch<A, B>
where
    A: Iterator + Clone,
    B: Iterator + Clone,
    A::Item: Clone,
    B::Item: Clone,
{
    fn clone(&self) -> Self {
        Patch {
            old: self.old.clone(),
            changes: self.changes.clone(),
        }
    }
}

impl<'a, A, B> Iterator for Patch<A, B>
where
    A: Iterator<Item = (&'a [u8], CacheEntry)>,
    B: Iterator<Item = (&'a Vec<u8>, &'a Option<CacheEntry>)>,
{
    type Item = (&'a [u8], CacheEntry);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.old.peek(), self.changes.peek()) {
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((p, _)), Some((q, _))) => (*p).cmp(q.as_slice()),
            };
            if order == std::cmp::Ordering::Less {
                return self.old.next();
            }
            if order == std::cmp::Ordering::Equal {
                self.old.next();
            }
            let (path, change) = self.changes.next().expect("peeked");
            if let Some(e) = change {
                return Some((path.as_slice(), e.clone()));
            }
        }
    }
}

/// Decodes a format-1 body (checksum already checked and removed).
fn decode_v1(body: &[u8]) -> Option<WcState> {
    let mut r = Reader::new(body);
    if r.raw("wc", 8).ok()? != MAGIC || r.u8("wc").ok()? != 1 {
        return None;
    }
    let i128_of = |r: &mut Reader<'_>| -> Option<i128> {
        Some(i128::from_le_bytes(r.raw("wc", 16).ok()?.try_into().ok()?))
    };
    let recorded_at_ns = i128_of(&mut r)?;
    let n = r.count("wc").ok()?;
    let mut entries = Vec::with_capacity(n.min(body.len() / 60));
    for _ in 0..n {
        let path = r.bytes("wc").ok()?.to_vec();
        let size = r.uint("wc").ok()?;
        let mtime_ns = i128_of(&mut r)?;
        let ctime_ns = i128_of(&mut r)?;
        let ino = r.uint("wc").ok()?;
        let mode = u32::try_from(r.uint("wc").ok()?).ok()?;
        let kind = kind_of(r.u8("wc").ok()?)?;
        let id = r.id("wc").ok()?;
        entries.push((
            path,
            CacheEntry {
                size,
                mtime_ns,
                ctime_ns,
                ino,
                mode,
                kind,
                id,
            },
        ));
    }
    r.finish("wc").ok()?;
    Some(WcState {
        recorded_at_ns,
        tree: None,
        // A repeated path keeps its last entry, as format 1 says.
        entries: entries.into_iter().collect(),
    })
}

impl StatCache {
    /// Reads a stat cache file; `None` if it is damaged or of an unknown version (the
    /// cache is then rebuilt: every file is read again).
    pub fn from_bytes(bytes: Vec<u8>) -> Option<StatCache> {
        if bytes.len() < 8 + 1 + SUM {
            return None;
        }
        let (body, sum) = bytes.split_at(bytes.len() - SUM);
        if &blake3::hash(body).as_bytes()[..SUM] != sum || &body[..8] != MAGIC {
            return None;
        }
        match body[8] {
            1 => Some(StatCache {
                converted: true,
                ..StatCache::from_bytes(encode(&decode_v1(body)?))?
            }),
            VERSION => StatCache::checked(bytes),
            _ => None,
        }
    }

    /// Checks a format-2 file whose checksum matched: the records fit, each names a path
    /// inside the file and a known kind, and paths are in strictly increasing order (the
    /// lookup's binary search depends on it).
    fn checked(bytes: Vec<u8>) -> Option<StatCache> {
        let body = &bytes[..bytes.len() - SUM];
        if body.len() < HEADER {
            return None;
        }
        let count = usize::try_from(u64_at(body, COUNT_AT)).ok()?;
        let tree: [u8; 32] = body[25..57].try_into().expect("32 bytes");
        let paths_at = count.checked_mul(RECORD)?.checked_add(HEADER)?;
        let paths = body.get(paths_at..)?;
        let cache = StatCache {
            recorded_at_ns: i128_at(body, 9),
            tree: (tree != [0; 32]).then_some(Id(tree)),
            count,
            bytes: Vec::new(),
            converted: false,
        };
        let mut prev: Option<&[u8]> = None;
        for i in 0..count {
            let r = &body[HEADER + i * RECORD..HEADER + (i + 1) * RECORD];
            let (off, len) = (u32_at(r, 0) as usize, u32_at(r, 4) as usize);
            let path = paths.get(off..off.checked_add(len)?)?;
            kind_of(r[60])?;
            if r[61..64] != [0, 0, 0] || prev.is_some_and(|p| p >= path) {
                return None;
            }
            prev = Some(path);
        }
        Some(StatCache { bytes, ..cache })
    }

    /// When the snapshot that wrote it started (ns since the epoch); entries modified
    /// within the racy window before it are not trusted.
    pub fn recorded_at_ns(&self) -> i128 {
        self.recorded_at_ns
    }

    /// The tree that the snapshot which wrote it made of exactly these entries, if known:
    /// a folder whose every file the cache still trusts, no more and no fewer, is that
    /// tree.
    pub fn tree(&self) -> Option<Id> {
        self.tree
    }

    /// Whether the folder, as `scan` found it, is exactly the tree `base` as the snapshot
    /// that made it saw it: the cache names `base`, nothing was unreadable, and the scan
    /// found the cache's paths, no more and no fewer, each trusted (9.2).
    pub fn describes(&self, base: Option<&Id>, scan: &Scan) -> bool {
        self.racy_if_unchanged(base, scan)
            .is_some_and(|racy| racy.is_empty())
    }

    /// Like [`StatCache::describes`], but an entry whose metadata is the cache's while it
    /// was modified too close to the snapshot that recorded it (racily clean, 9.2) does
    /// not count as a difference: such entries are returned (the scan's index and the
    /// cache's entry), for the caller to compare their content. `None` if anything else
    /// differs.
    pub fn racy_if_unchanged(
        &self,
        base: Option<&Id>,
        scan: &Scan,
    ) -> Option<Vec<(usize, CacheEntry)>> {
        if self.tree.is_none()
            || self.tree.as_ref() != base
            || !scan.unreadable.is_empty()
            || scan.found.len() != self.count
        {
            return None;
        }
        let mut racy = Vec::new();
        // Both are in path order and of one length: the same paths are at the same places.
        for (i, f) in scan.found.iter().enumerate() {
            if self.path(i) != f.path.as_slice() {
                return None;
            }
            let c = Some(self.entry(i)).filter(|c| c.matches(&f.meta))?;
            if !c.trusted(&f.meta, self.recorded_at_ns) {
                racy.push((i, c));
            }
        }
        Some(racy)
    }

    /// Whether it was read from a file of an earlier format (the next snapshot saves it
    /// in this one even when nothing changed).
    pub fn converted(&self) -> bool {
        self.converted
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn record(&self, i: usize) -> &[u8] {
        &self.bytes[HEADER + i * RECORD..HEADER + (i + 1) * RECORD]
    }

    fn path(&self, i: usize) -> &[u8] {
        let r = self.record(i);
        let at = HEADER + self.count * RECORD + u32_at(r, 0) as usize;
        &self.bytes[at..at + u32_at(r, 4) as usize]
    }

    fn entry(&self, i: usize) -> CacheEntry {
        let r = self.record(i);
        CacheEntry {
            size: u64_at(r, 8),
            mtime_ns: i128_at(r, 16),
            ctime_ns: i128_at(r, 32),
            ino: u64_at(r, 48),
            mode: u32_at(r, 56),
            kind: kind_of(r[60]).expect("checked on reading"),
            id: Id(r[64..96].try_into().expect("32 bytes")),
        }
    }

    /// The entry of `path`, if the cache has one.
    pub fn get(&self, path: &[u8]) -> Option<CacheEntry> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.path(mid).cmp(path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.entry(mid)),
            }
        }
        None
    }

    /// The checksum of the file it was read from (see [`file_sum`]); `None` for an empty
    /// cache or one converted from an earlier format.
    pub fn sum(&self) -> Option<[u8; SUM]> {
        if self.converted {
            return None;
        }
        file_sum(&self.bytes)
    }

    /// Every path, in order.
    pub fn paths(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count).map(|i| self.path(i))
    }

    /// Every entry, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], CacheEntry)> + Clone + '_ {
        (0..self.count).map(|i| (self.path(i), self.entry(i)))
    }
}

impl From<&StatCache> for WcState {
    fn from(c: &StatCache) -> WcState {
        WcState {
            recorded_at_ns: c.recorded_at_ns,
            tree: c.tree,
            entries: c.iter().map(|(p, e)| (p.to_vec(), e)).collect(),
        }
    }
}

impl WcState {
    /// Encodes the state in the current format (FORMAT 9.1).
    pub fn encode(&self) -> Vec<u8> {
        crate::working_copy::stat_cache::encode(self)
    }

    /// Decodes a state of any known format; `None` if it is damaged or of an unknown
    /// version (the cache is only an optimisation, so it is then rebuilt).
    pub fn decode(bytes: &[u8]) -> Option<WcState> {
        StatCache::from_bytes(bytes.to_vec()).map(|c| WcState::from(&c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::codec::Writer;

    fn entry(seed: u64, kind: EntryKind) -> CacheEntry {
        CacheEntry {
            size: seed,
            mtime_ns: 1_700_000_000_123_456_789 + i128::from(seed),
            ctime_ns: 1_700_000_000_223_456_789 - i128::from(seed),
            ino: seed * 7,
            mode: 0o100_644,
            kind,
            id: Id::hash(&seed.to_le_bytes()),
        }
    }

    /// Format 1 as lifeos wrote it before format 2 (FORMAT 9.1): the migration's input.
    fn encode_v1(recorded_at_ns: i128, entries: &[(&[u8], CacheEntry)]) -> Vec<u8> {
        let mut w = Writer::default();
        w.raw(MAGIC).u8(1).raw(&recorded_at_ns.to_le_bytes());
        w.uint(entries.len() as u64);
        for (path, e) in entries {
            w.bytes(path)
                .uint(e.size)
                .raw(&e.mtime_ns.to_le_bytes())
                .raw(&e.ctime_ns.to_le_bytes())
                .uint(e.ino)
                .uint(u64::from(e.mode))
                .u8(kind_byte(e.kind))
                .id(&e.id);
        }
        let sum = blake3::hash(w.as_slice());
        w.raw(&sum.as_bytes()[..SUM]);
        w.finish()
    }

    /// Re-seals `body` with a valid checksum, as a writer would.
    fn sealed(mut body: Vec<u8>) -> Vec<u8> {
        let sum = blake3::hash(&body);
        body.extend_from_slice(&sum.as_bytes()[..SUM]);
        body
    }

    #[test]
    fn a_version_1_cache_is_read_and_written_again_as_version_2() {
        let v1 = encode_v1(
            42,
            &[
                (b"b/x", entry(2, EntryKind::Executable)),
                (b"a\xff", entry(1, EntryKind::File)),
                (b"b/x", entry(3, EntryKind::Symlink)),
            ],
        );
        let c = StatCache::from_bytes(v1).unwrap();
        assert_eq!(c.recorded_at_ns(), 42);
        assert!(c.converted());
        assert_eq!(c.len(), 2, "a repeated path keeps one entry");
        assert_eq!(c.get(b"a\xff"), Some(entry(1, EntryKind::File)));
        assert_eq!(
            c.get(b"b/x"),
            Some(entry(3, EntryKind::Symlink)),
            "the last"
        );
        assert_eq!(c.get(b"b"), None);
        let v2 = WcState::from(&c).encode();
        assert_eq!(v2[8], 2);
        assert_eq!(
            v2.len(),
            HEADER + 2 * RECORD + 5 + SUM,
            "records, then the paths"
        );
        let again = StatCache::from_bytes(v2).unwrap();
        assert!(!again.converted());
        assert_eq!(again.tree(), None, "format 1 names no tree");
        assert_eq!(
            again.iter().collect::<Vec<_>>(),
            c.iter().collect::<Vec<_>>()
        );
    }

    /// A state too large to record is saved empty and naming no tree: naming one would let
    /// a folder with every file gone look like that tree.
    #[test]
    fn a_state_beyond_the_limit_is_saved_empty_and_names_no_tree() {
        let state = WcState {
            recorded_at_ns: 7,
            tree: Some(Id::hash(b"a tree")),
            entries: [(b"abc".to_vec(), entry(1, EntryKind::File))]
                .into_iter()
                .collect(),
        };
        let entries = || state.entries.iter().map(|(p, e)| (p.as_slice(), e.clone()));
        let within = StatCache::from_bytes(encode_within(7, state.tree, entries(), 3)).unwrap();
        assert_eq!((within.len(), within.tree()), (1, state.tree));
        let beyond = StatCache::from_bytes(encode_within(7, state.tree, entries(), 2)).unwrap();
        assert_eq!((beyond.len(), beyond.tree()), (0, None));
    }

    #[test]
    fn records_out_of_order_or_pointing_outside_the_file_are_refused() {
        let state = WcState {
            recorded_at_ns: 7,
            tree: Some(Id::hash(b"a tree")),
            entries: [
                (b"a".to_vec(), entry(1, EntryKind::File)),
                (b"b".to_vec(), entry(2, EntryKind::File)),
            ]
            .into_iter()
            .collect(),
        };
        let good = state.encode();
        let body = &good[..good.len() - SUM];
        let read = StatCache::from_bytes(sealed(body.to_vec())).unwrap();
        assert_eq!(read.tree(), state.tree);
        assert_eq!(WcState::from(&read), state);
        // The two records swapped: "b" before "a".
        let mut swapped = body.to_vec();
        let (first, second) = (
            HEADER..HEADER + RECORD,
            HEADER + RECORD..HEADER + 2 * RECORD,
        );
        let a = swapped[first.clone()].to_vec();
        swapped.copy_within(second.clone(), first.start);
        swapped[second].copy_from_slice(&a);
        assert!(StatCache::from_bytes(sealed(swapped)).is_none());
        // A path length reaching past the paths.
        let mut long = body.to_vec();
        long[HEADER + 4..HEADER + 8].copy_from_slice(&9u32.to_le_bytes());
        assert!(StatCache::from_bytes(sealed(long)).is_none());
        // A record count larger than the file.
        let mut count = body.to_vec();
        count[COUNT_AT..COUNT_AT + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(StatCache::from_bytes(sealed(count)).is_none());
        // A kind the cache never holds (a folder), and a version not known.
        let mut dir = body.to_vec();
        dir[HEADER + 60] = 3;
        assert!(StatCache::from_bytes(sealed(dir)).is_none());
        let mut v3 = body.to_vec();
        v3[8] = 3;
        assert!(StatCache::from_bytes(sealed(v3)).is_none());
    }

    proptest::proptest! {
        /// Every path written is found with its entry, and no other path is.
        #[test]
        fn every_path_is_found_in_place(
            paths in proptest::collection::btree_set(proptest::collection::vec(proptest::prelude::any::<u8>(), 1..12), 0..200),
            probe in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..12),
        ) {
            let state = WcState {
                recorded_at_ns: 1,
                tree: None,
                entries: paths.iter().enumerate().map(|(i, p)| (p.clone(), entry(i as u64, EntryKind::File))).collect(),
            };
            let c = StatCache::from_bytes(state.encode()).unwrap();
            proptest::prop_assert_eq!(c.len(), paths.len());
            for (p, e) in &state.entries {
                proptest::prop_assert_eq!(c.get(p), Some(e.clone()));
            }
            proptest::prop_assert_eq!(c.get(&probe), state.entries.get(&probe).cloned());
            proptest::prop_assert_eq!(WcState::from(&c), state);
        }

        /// A cache patched with changes encodes as the map with them applied.
        #[test]
        fn a_patched_cache_is_the_map_with_the_changes(
            paths in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 1..4), 0..40),
            changes in proptest::collection::btree_map(proptest::collection::vec(0u8..4, 1..4), proptest::option::of(0u64..9), 0..20),
        ) {
            let state = WcState {
                recorded_at_ns: 1,
                tree: None,
                entries: paths.iter().enumerate().map(|(i, p)| (p.clone(), entry(i as u64, EntryKind::File))).collect(),
            };
            let changes: BTreeMap<Vec<u8>, Option<CacheEntry>> = changes
                .into_iter()
                .map(|(p, e)| (p, e.map(|s| entry(100 + s, EntryKind::Executable))))
                .collect();
            let mut applied = state.clone();
            applied.recorded_at_ns = 5;
            applied.tree = Some(Id::hash(b"t"));
            for (p, e) in &changes {
                match e {
                    Some(e) => applied.entries.insert(p.clone(), e.clone()),
                    None => applied.entries.remove(p),
                };
            }
            let patched = NewCache::Patched {
                old: StatCache::from_bytes(state.encode()).unwrap(),
                changes,
                recorded_at_ns: 5,
                tree: Some(Id::hash(b"t")),
                refreshes: false,
            };
            proptest::prop_assert_eq!(patched.encode(), applied.encode());
            proptest::prop_assert_eq!(patched.into_state(), applied);
        }
    }

    #[test]
    fn a_cache_read_from_a_file_is_named_by_the_file_checksum() {
        let state = WcState {
            recorded_at_ns: 1,
            tree: None,
            entries: [(b"a".to_vec(), entry(1, EntryKind::File))]
                .into_iter()
                .collect(),
        };
        let bytes = state.encode();
        let cache = StatCache::from_bytes(bytes.clone()).unwrap();
        assert_eq!(cache.sum(), file_sum(&bytes));
        assert_eq!(file_sum(&bytes).unwrap(), bytes[bytes.len() - 16..]);
        assert_eq!(StatCache::default().sum(), None);
    }
}
