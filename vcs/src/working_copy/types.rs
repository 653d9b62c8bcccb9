//! The working copy's types, which every part of it shares: what the stat cache remembers
//! of a file, the cache's state, what a scan of the folder finds, the folder monitor's
//! token, and a snapshot's progress. A leaf: it uses nothing else of the working copy.

use std::collections::BTreeMap;

use lifeos_store::Id;

use crate::object::{EntryKind, TreeEntry};
use crate::path::BString;

/// The stat cache file, inside `.lifeos`.
pub const STATE_FILE: &str = "wc_state";
/// An entry modified this close to the start of the snapshot that recorded it is re-read
/// next time: a later change within the same timestamp tick would be invisible. File
/// systems with nanosecond timestamps tick every few milliseconds; one whose timestamps
/// have no sub-second part may tick once a second (or two, for FAT).
const RACY_NS: i128 = 50_000_000;
const RACY_COARSE_NS: i128 = 2_000_000_000;

/// What the stat cache remembers about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// Size in bytes.
    pub size: u64,
    /// mtime, ns since the epoch.
    pub mtime_ns: i128,
    /// ctime, ns since the epoch.
    pub ctime_ns: i128,
    /// Inode number.
    pub ino: u64,
    /// Mode bits.
    pub mode: u32,
    /// Entry kind recorded.
    pub kind: EntryKind,
    /// File (or link target) id.
    pub id: Id,
}

pub use lifeos_store::pipeline::Stat;

impl CacheEntry {
    /// Whether this entry still describes a file with metadata `m`, recorded by a snapshot
    /// that started at `recorded_at_ns` (entries modified just before it are not trusted).
    pub fn trusted(&self, m: &Stat, recorded_at_ns: i128) -> bool {
        let window = if self.mtime_ns % 1_000_000_000 == 0 {
            RACY_COARSE_NS
        } else {
            RACY_NS
        };
        self.matches(m) && self.mtime_ns < recorded_at_ns - window
    }

    /// Whether the metadata is the entry's (trusted or not).
    pub fn matches(&self, m: &Stat) -> bool {
        self.size == m.size
            && self.mtime_ns == m.mtime_ns
            && self.ctime_ns == m.ctime_ns
            && self.ino == m.ino
            && self.mode == m.mode
    }

    /// An entry for tree entry `e` that no file's metadata matches (mode 0 is no file's):
    /// a file compared with it is read.
    pub fn never_trusted(e: &TreeEntry) -> CacheEntry {
        CacheEntry {
            size: e.size,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            mode: 0,
            kind: e.kind,
            id: e.id,
        }
    }

    /// An entry for a file with metadata `m`.
    pub fn from_meta(m: &Stat, kind: EntryKind, id: Id) -> CacheEntry {
        CacheEntry {
            size: m.size,
            mtime_ns: m.mtime_ns,
            ctime_ns: m.ctime_ns,
            ino: m.ino,
            mode: m.mode,
            kind,
            id,
        }
    }
}

/// The working-copy state: when it was recorded and what each path looked like.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WcState {
    /// When the snapshot that produced this state started (ns since the epoch).
    pub recorded_at_ns: i128,
    /// The tree that snapshot made of exactly these entries (none when it kept entries
    /// it could not read or had submodules, or when a folder write changed the entries
    /// since): what a folder the cache wholly trusts is, without building it again.
    pub tree: Option<Id>,
    /// Entries by repository path.
    pub entries: BTreeMap<Vec<u8>, CacheEntry>,
}

/// One path found in the working folder.
#[derive(Debug)]
pub struct ScanEntry {
    /// Repository path, `/`-separated.
    pub path: Vec<u8>,
    /// Its metadata (not following symlinks).
    pub meta: Stat,
}

/// A path the scan skipped, or could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path (bytes; empty when the failure could not be tied to a path).
    pub path: BString,
    /// Why.
    pub reason: String,
}

/// What a scan of the working folder found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Files and symlinks, sorted by path.
    pub found: Vec<ScanEntry>,
    /// Paths that are not recorded by design: gone while the scan ran, or neither a
    /// regular file, a directory nor a symlink (sockets, FIFOs, devices).
    pub skipped: Vec<Skipped>,
    /// Files and folders that exist but could not be read (permissions, I/O errors, or a
    /// file that kept changing while it was read). Their content is unknown, so they must
    /// never be taken as deleted: a commit keeps their last recorded version or refuses.
    pub unreadable: Vec<Skipped>,
    /// Whether a file found has another hard link: changed through that name, it changes
    /// with no event about this one, so the folder monitor cannot vouch for the folder.
    pub shared_inodes: bool,
}

impl Scan {
    /// The total size of the files and symlinks found.
    pub fn bytes(&self) -> u64 {
        self.found.iter().map(|f| f.meta.size).sum()
    }

    /// Files are sorted into `skipped` or `unreadable` by the error that stopped them.
    pub(crate) fn failed(&mut self, path: BString, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::NotFound {
            self.skipped.push(Skipped {
                path,
                reason: "disappeared while the snapshot was taken".into(),
            });
        } else {
            self.unreadable.push(Skipped {
                path,
                reason: e.to_string(),
            });
        }
    }
}

/// Progress of a snapshot, for display.
pub trait SnapshotProgress: Sync {
    /// The scan found `files` files of `bytes` bytes, of which `to_read` need reading.
    fn scanned(&self, files: u64, bytes: u64, to_read: u64, bytes_to_read: u64);
    /// `n` more bytes were read.
    fn read(&self, n: u64);
}

/// A progress sink that ignores everything.
pub struct NoProgress;

impl SnapshotProgress for NoProgress {
    fn scanned(&self, _: u64, _: u64, _: u64, _: u64) {}
    fn read(&self, _: u64) {}
}

/// A position in one watcher's journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// The watcher (random per start).
    pub instance: u64,
    /// Journal entries up to this one were read before the token was given.
    pub seq: u64,
}
