//! Trees: sorted entries of names (bytes), kinds, ids and sizes (FORMAT 7.2).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

use super::codec::{read_opt_bytes, write_opt_bytes};
use crate::path::valid_name;

/// Tree format version: 1, or 2 for a tree with a gitlink or a kept git form.
pub const TREE_VERSION: u8 = 2;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link; the id names its target bytes.
    Symlink,
    /// A directory; the id names its tree.
    Dir,
    /// A git submodule (mode 160000): the id holds the commit's SHA-1 (see
    /// [`gitlink_id`]), which names no lifeos object.
    Gitlink,
}

/// The tree-entry id of a gitlink: the SHA-1 followed by 12 zero bytes.
pub fn gitlink_id(sha1: &[u8; 20]) -> Id {
    let mut b = [0u8; 32];
    b[..20].copy_from_slice(sha1);
    Id(b)
}

/// The SHA-1 a gitlink entry's id holds.
pub fn gitlink_sha1(id: &Id) -> [u8; 20] {
    id.0[..20].try_into().expect("20 bytes")
}

impl EntryKind {
    fn to_u8(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Executable => 2,
            EntryKind::Symlink => 3,
            EntryKind::Dir => 4,
            EntryKind::Gitlink => 5,
        }
    }

    pub(crate) fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => EntryKind::File,
            2 => EntryKind::Executable,
            3 => EntryKind::Symlink,
            4 => EntryKind::Dir,
            5 => EntryKind::Gitlink,
            _ => return None,
        })
    }

    /// A short name for output.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Executable => "executable",
            EntryKind::Symlink => "symlink",
            EntryKind::Dir => "dir",
            EntryKind::Gitlink => "gitlink",
        }
    }
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// The name: one path component, never empty, `.`, `..`, nor containing `/` or NUL.
    pub name: Vec<u8>,
    /// What it is.
    pub kind: EntryKind,
    /// File id, symlink target id, or subtree id.
    pub id: Id,
    /// File size, symlink target length, or total size of the files below a directory.
    pub size: u64,
}

/// A directory listing, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    /// Entries in strictly increasing name order.
    pub entries: Vec<TreeEntry>,
    /// The exact git tree object this tree was imported from, kept only when git's
    /// canonical form of `entries` would not reproduce it (an unsorted tree, mode
    /// `100664`, a zero-padded mode): export writes these bytes instead.
    pub git_raw: Option<Vec<u8>>,
}

impl Tree {
    /// Whether the tree needs version 2 of the encoding (a gitlink, or a kept git form).
    pub(crate) fn needs_v2(&self) -> bool {
        self.git_raw.is_some() || self.entries.iter().any(|e| e.kind == EntryKind::Gitlink)
    }

    /// The canonical encoding (version 1 unless the tree needs version 2, so trees
    /// without git quirks keep the ids they always had).
    pub fn encode(&self) -> Vec<u8> {
        let v2 = self.needs_v2();
        let mut w = Writer::with_header(Kind::Tree as u8, if v2 { 2 } else { 1 });
        w.uint(self.entries.len() as u64);
        for e in &self.entries {
            w.bytes(&e.name).u8(e.kind.to_u8()).id(&e.id).uint(e.size);
        }
        if v2 {
            write_opt_bytes(&mut w, self.git_raw.as_deref());
        }
        w.finish()
    }

    /// Decodes and validates a tree.
    pub fn decode(bytes: &[u8]) -> Result<Tree, DecodeError> {
        const W: &str = "tree";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Tree as u8, TREE_VERSION)?;
        let n = r.count(W)?;
        let mut entries: Vec<TreeEntry> = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.bytes(W)?.to_vec();
            valid_name(&name).map_err(|e| DecodeError::new(W, e))?;
            if let Some(prev) = entries.last() {
                if prev.name >= name {
                    return Err(DecodeError::new(
                        W,
                        format!(
                            "entry {} is out of order or duplicated",
                            crate::path::display(&name)
                        ),
                    ));
                }
            }
            let k = r.u8(W)?;
            let kind = EntryKind::from_u8(k)
                .filter(|k| version >= 2 || *k != EntryKind::Gitlink)
                .ok_or_else(|| DecodeError::new(W, format!("unknown entry kind {k}")))?;
            let id = r.id(W)?;
            let size = r.uint(W)?;
            if kind == EntryKind::Gitlink && (id.0[20..] != [0; 12] || size != 0) {
                return Err(DecodeError::new(
                    W,
                    format!("gitlink {} holds no SHA-1", crate::path::display(&name)),
                ));
            }
            entries.push(TreeEntry {
                name,
                kind,
                id,
                size,
            });
        }
        let git_raw = if version >= 2 {
            read_opt_bytes(&mut r, W)?
        } else {
            None
        };
        r.finish(W)?;
        let tree = Tree { entries, git_raw };
        if version >= 2 && !tree.needs_v2() {
            return Err(DecodeError::new(
                W,
                "version 2 tree with nothing that needs it",
            ));
        }
        if tree.checked_total_size().is_none() {
            return Err(DecodeError::new(
                W,
                "entry sizes add up to more than 2^64 bytes",
            ));
        }
        Ok(tree)
    }

    fn checked_total_size(&self) -> Option<u64> {
        self.entries
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink))
            .try_fold(0u64, |acc, e| acc.checked_add(e.size))
    }

    /// Total size of the files below this tree (a decoded tree's sizes are known to fit;
    /// a sum that would not is capped at `u64::MAX`).
    pub fn total_size(&self) -> u64 {
        self.checked_total_size().unwrap_or(u64::MAX)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}
