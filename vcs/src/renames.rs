//! Renames: pairing a removed path with an added one that has the same content or, when
//! both are stored, mostly the same chunks. `lifeos diff` shows them; the library keeps
//! the rule so every reader of changes pairs them alike.

use std::collections::HashMap;

use lifeos_store::{Id, Store};

use crate::object::TreeEntry;
use crate::path::BString;
use crate::treediff::{Change, ChangeKind};

/// How a path changed, once renames are paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    /// Same path, other content or kind.
    Modified,
    /// A new path.
    Added,
    /// A path that is gone.
    Deleted,
    /// A path that is gone, now at another path.
    Renamed,
}

impl FileStatus {
    /// The name used in `--json` output (`modified`, `added`, `deleted`, `renamed`).
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Modified => "modified",
            FileStatus::Added => "added",
            FileStatus::Deleted => "deleted",
            FileStatus::Renamed => "renamed",
        }
    }
}

/// One changed file, with its old path when it was renamed.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// The path (its new path when renamed).
    pub path: BString,
    /// The old path, when renamed.
    pub old_path: Option<BString>,
    /// How it changed.
    pub status: FileStatus,
    /// For a rename: the share of the larger version's bytes both versions hold (1.0 for
    /// the same content).
    pub similarity: Option<f64>,
    /// The entry before.
    pub old: Option<TreeEntry>,
    /// The entry after.
    pub new: Option<TreeEntry>,
}

/// Removed paths considered for each added one by chunk similarity; beyond it only
/// exact renames (the same content) are paired, so a large reorganisation stays fast.
const MAX_SIMILARITY_CANDIDATES: usize = 200;

/// The least similarity for a rename of different content.
const MIN_SIMILARITY: f64 = 0.5;

/// Pairs `changes` into renames, sorted by path. An added path is the rename of a removed
/// one with the same content; failing that, when `both_stored` (both sides are in the
/// store, not the folder) and both files have several chunks, of the removed one sharing
/// the most bytes, at least half of the larger version.
pub fn pair_renames(store: &Store, changes: Vec<Change>, both_stored: bool) -> Vec<FileChange> {
    let mut out: Vec<FileChange> = Vec::new();
    let mut deleted: Vec<Change> = Vec::new();
    let mut added: Vec<Change> = Vec::new();
    for c in changes {
        match c.kind {
            ChangeKind::Deleted => deleted.push(c),
            ChangeKind::Added => added.push(c),
            ChangeKind::Modified => out.push(FileChange {
                path: c.path,
                old_path: None,
                status: FileStatus::Modified,
                similarity: None,
                old: c.old,
                new: c.new,
            }),
        }
    }
    let mut used = vec![false; deleted.len()];
    for a in added {
        let Some(new) = a.new else { continue };
        let exact = deleted
            .iter()
            .enumerate()
            .find(|(i, d)| !used[*i] && d.old.as_ref().is_some_and(|o| o.id == new.id));
        let found = match exact {
            Some((i, _)) => Some((i, 1.0)),
            None if both_stored && deleted.len() <= MAX_SIMILARITY_CANDIDATES => {
                most_similar(store, &new.id, &deleted, &used)
            }
            None => None,
        };
        out.push(match found {
            Some((i, sim)) => {
                used[i] = true;
                FileChange {
                    path: a.path,
                    old_path: Some(deleted[i].path.clone()),
                    status: FileStatus::Renamed,
                    similarity: Some(sim),
                    old: deleted[i].old.clone(),
                    new: Some(new),
                }
            }
            None => FileChange {
                path: a.path,
                old_path: None,
                status: FileStatus::Added,
                similarity: None,
                old: None,
                new: Some(new),
            },
        });
    }
    for (d, used) in deleted.into_iter().zip(used) {
        if !used {
            out.push(FileChange {
                path: d.path,
                old_path: None,
                status: FileStatus::Deleted,
                similarity: None,
                old: d.old,
                new: None,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The unused removed file sharing the most bytes with stored file `new`, and that share,
/// if it is at least [`MIN_SIMILARITY`]. Files of one chunk are not compared (their
/// chunks are equal only when the files are).
fn most_similar(
    store: &Store,
    new: &Id,
    deleted: &[Change],
    used: &[bool],
) -> Option<(usize, f64)> {
    let nb = store.file_chunks(new).ok()?;
    if nb.chunks.len() < 2 {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    for (i, d) in deleted.iter().enumerate() {
        if used[i] {
            continue;
        }
        let Some(oa) = d.old.as_ref().and_then(|o| store.file_chunks(&o.id).ok()) else {
            continue;
        };
        if oa.chunks.len() < 2 {
            continue;
        }
        // Shared bytes, counting a repeated chunk only as often as the old file has it.
        let mut have: HashMap<Id, usize> = HashMap::new();
        for c in &oa.chunks {
            *have.entry(c.id).or_default() += 1;
        }
        let shared: u64 = nb
            .chunks
            .iter()
            .filter(|c| {
                have.get_mut(&c.id).is_some_and(|n| {
                    *n > 0 && {
                        *n -= 1;
                        true
                    }
                })
            })
            .map(|c| u64::from(c.len))
            .sum();
        let sim = shared as f64 / nb.size().max(oa.size()).max(1) as f64;
        if sim >= MIN_SIMILARITY && best.is_none_or(|(_, s)| sim > s) {
            best = Some((i, sim));
        }
    }
    best
}
