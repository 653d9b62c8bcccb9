//! Differences between trees, file by file.

use std::collections::BTreeMap;

use lifeos_store::{Id, Transaction};

use crate::error::Result;
use crate::object::{EntryKind, Tree, TreeEntry};
use crate::path::{join, BString};
use crate::repo::Repo;

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// New.
    Added,
    /// Content, kind or mode changed.
    Modified,
    /// Gone.
    Deleted,
}

impl ChangeKind {
    /// One-letter code, as in `git status --short`.
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Modified => 'M',
            ChangeKind::Deleted => 'D',
        }
    }

    /// Name for JSON.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// One changed file (or symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Repository path (bytes; see [`crate::path::display`] to show it).
    pub path: BString,
    /// How it changed.
    pub kind: ChangeKind,
    /// The entry before.
    pub old: Option<TreeEntry>,
    /// The entry after.
    pub new: Option<TreeEntry>,
}

/// A flat map of repository paths to file and symlink entries (whose `name` is empty:
/// the path holds it).
pub type FlatTree = BTreeMap<BString, TreeEntry>;

impl Repo {
    /// Every file and symlink below tree `id`, by path.
    pub fn flatten(&self, id: &Id) -> Result<FlatTree> {
        Ok(self.files_below(id, b"")?.into_iter().collect())
    }

    /// The files (every entry but folders) below tree `id`, in path order, each path
    /// after `prefix` (the tree's own path, or empty): [`Repo::flatten`] as a list,
    /// which is cheaper to build when it is read once.
    pub fn files_below(&self, id: &Id, prefix: &[u8]) -> Result<Vec<(BString, TreeEntry)>> {
        let mut out = Vec::new();
        flatten_into(&|id| self.tree(id), id, prefix, &mut out)?;
        Ok(out)
    }

    /// Calls `f` with the path (after `prefix`, the tree's own path or empty) and entry
    /// of every file below tree `id`, in path order, without a list of them: a caller
    /// that keeps a little of each file allocates nothing per path.
    pub fn visit_files_below(
        &self,
        id: &Id,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], TreeEntry) -> Result<()>,
    ) -> Result<()> {
        visit_into(&|id| self.tree(id), id, &mut prefix.to_vec(), f)
    }

    /// Like [`Repo::flatten`], reading trees written by `tx` too.
    pub(crate) fn flatten_tx(&self, tx: &Transaction<'_>, id: &Id) -> Result<FlatTree> {
        let mut out = Vec::new();
        flatten_into(&|id| self.tree_tx(tx, id), id, b"", &mut out)?;
        Ok(out.into_iter().collect())
    }

    /// The file-level changes from tree `a` to tree `b` (`None` is the empty tree),
    /// skipping identical subtrees without reading them.
    pub fn diff_trees(&self, a: Option<&Id>, b: Option<&Id>) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        diff_into(&|id| self.tree(id), a, b, b"", &|_| true, &mut out)?;
        out.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(out)
    }

    /// Like [`Repo::diff_trees`], reading trees written by `tx` too.
    pub(crate) fn diff_trees_tx(
        &self,
        tx: &Transaction<'_>,
        a: Option<&Id>,
        b: Option<&Id>,
    ) -> Result<Vec<Change>> {
        self.diff_trees_tx_where(tx, a, b, &|_| true)
    }

    /// Like [`Repo::diff_trees_tx`], keeping only the changes whose path `keep` accepts
    /// (the others are never made: the first commit of 1,000,000 files would otherwise
    /// list them all to keep a few).
    pub fn diff_trees_tx_where(
        &self,
        tx: &Transaction<'_>,
        a: Option<&Id>,
        b: Option<&Id>,
        keep: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        diff_into(&|id| self.tree_tx(tx, id), a, b, b"", keep, &mut out)?;
        out.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(out)
    }
}

fn diff_into(
    tree: &dyn Fn(&Id) -> Result<Tree>,
    a: Option<&Id>,
    b: Option<&Id>,
    prefix: &[u8],
    keep: &dyn Fn(&[u8]) -> bool,
    out: &mut Vec<Change>,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let ta = a.map(tree).transpose()?.unwrap_or_default();
    let tb = b.map(tree).transpose()?.unwrap_or_default();
    let mut ia = ta.entries.iter().peekable();
    let mut ib = tb.entries.iter().peekable();
    loop {
        let (ea, eb) = match (ia.peek(), ib.peek()) {
            (None, None) => break,
            (Some(x), Some(y)) if x.name == y.name => (ia.next(), ib.next()),
            (Some(x), Some(y)) if x.name < y.name => (ia.next(), None),
            (Some(_), Some(_)) => (None, ib.next()),
            (Some(_), None) => (ia.next(), None),
            (None, Some(_)) => (None, ib.next()),
        };
        let Some(name) = ea.or(eb).map(|e| &e.name) else {
            break;
        };
        let path = join(prefix, name);
        let dir_a = ea.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
        let dir_b = eb.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
        let file_a = ea.filter(|e| e.kind != EntryKind::Dir);
        let file_b = eb.filter(|e| e.kind != EntryKind::Dir);
        if dir_a.is_some() || dir_b.is_some() {
            diff_into(tree, dir_a.as_ref(), dir_b.as_ref(), &path, keep, out)?;
        }
        if !keep(&path) {
            continue;
        }
        match (file_a, file_b) {
            (Some(x), Some(y)) if x.id != y.id || x.kind != y.kind => out.push(Change {
                path,
                kind: ChangeKind::Modified,
                old: Some(x.clone()),
                new: Some(y.clone()),
            }),
            (Some(_), Some(_)) => {}
            (Some(x), None) => out.push(Change {
                path,
                kind: ChangeKind::Deleted,
                old: Some(x.clone()),
                new: None,
            }),
            (None, Some(y)) => out.push(Change {
                path,
                kind: ChangeKind::Added,
                old: None,
                new: Some(y.clone()),
            }),
            (None, None) => {}
        }
    }
    Ok(())
}

/// Appends the files and symlinks below tree `id` to `out`, for a map built in bulk
/// afterwards (B-tree nodes filled by ordered inserts end half empty).
fn flatten_into(
    tree: &dyn Fn(&Id) -> Result<Tree>,
    id: &Id,
    prefix: &[u8],
    out: &mut Vec<(BString, TreeEntry)>,
) -> Result<()> {
    visit_into(tree, id, &mut prefix.to_vec(), &mut |path, e| {
        // The path holds the name: a flat tree's entries keep none (one allocation
        // fewer per file).
        out.push((
            BString::from(path),
            TreeEntry {
                name: Vec::new(),
                ..e
            },
        ));
        Ok(())
    })
}

/// Calls `f` with the path and entry of every file below tree `id`, in path order; `path`
/// is the tree's own path on entry, and is extended and cut back as the walk goes (one
/// buffer for every path).
fn visit_into(
    tree: &dyn Fn(&Id) -> Result<Tree>,
    id: &Id,
    path: &mut Vec<u8>,
    f: &mut dyn FnMut(&[u8], TreeEntry) -> Result<()>,
) -> Result<()> {
    let len = path.len();
    for e in tree(id)?.entries {
        if len > 0 {
            path.push(b'/');
        }
        path.extend_from_slice(&e.name);
        if e.kind == EntryKind::Dir {
            visit_into(tree, &e.id, path, f)?;
        } else {
            f(path, e)?;
        }
        path.truncate(len);
    }
    Ok(())
}

/// The file-level changes between two flat trees.
pub fn diff_flat(a: &FlatTree, b: &FlatTree) -> Vec<Change> {
    let mut out = Vec::new();
    for (p, ea) in a {
        match b.get(p) {
            Some(eb) if eb.id != ea.id || eb.kind != ea.kind => out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Modified,
                old: Some(ea.clone()),
                new: Some(eb.clone()),
            }),
            Some(_) => {}
            None => out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Deleted,
                old: Some(ea.clone()),
                new: None,
            }),
        }
    }
    for (p, eb) in b {
        if !a.contains_key(p) {
            out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Added,
                old: None,
                new: Some(eb.clone()),
            });
        }
    }
    out.sort_by(|x, y| x.path.cmp(&y.path));
    out
}

/// A path that is a file in a flat tree and also the folder of other paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDirClash(pub BString);

/// Builds a tree hierarchy from a flat tree; returns the root's entries grouped by
/// directory, for writing.
pub fn unflatten(flat: &FlatTree) -> std::result::Result<BTreeMap<BString, Tree>, FileDirClash> {
    let mut dirs: BTreeMap<BString, Vec<TreeEntry>> = BTreeMap::new();
    dirs.insert(BString::default(), Vec::new());
    for (path, e) in flat {
        let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], &path[..]),
        };
        let mut d = BString::from(parent);
        loop {
            dirs.entry(d.clone()).or_default();
            match d.iter().rposition(|b| *b == b'/') {
                Some(i) => d.truncate(i),
                None if !d.is_empty() => d.clear(),
                None => break,
            }
        }
        dirs.entry(BString::from(parent))
            .or_default()
            .push(TreeEntry {
                name: name.to_vec(),
                ..e.clone()
            });
    }
    if let Some(d) = dirs.keys().find(|d| flat.contains_key(*d)) {
        return Err(FileDirClash(d.clone()));
    }
    Ok(dirs
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                Tree {
                    entries: v,
                    git_raw: None,
                },
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::CommitOptions;
    use crate::working_copy::NoProgress;

    /// A diff that keeps some paths gives exactly the whole diff's changes at those paths,
    /// in order, through folders whose own names the filter refuses.
    #[test]
    fn a_kept_diff_is_the_whole_diff_at_the_kept_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let mut trees = Vec::new();
        for files in [
            &[
                ("a.vcf", "1"),
                ("b.txt", "2"),
                ("c/d.ics", "3"),
                ("c/e.txt", "4"),
            ][..],
            &[
                ("a.vcf", "5"),
                ("b.txt", "6"),
                ("c/f.ics", "7"),
                ("g/h.vcf", "8"),
            ][..],
        ] {
            for p in ["a.vcf", "b.txt", "c", "g"] {
                let path = root.join(p);
                if path.is_dir() {
                    std::fs::remove_dir_all(path).unwrap();
                } else if path.exists() {
                    std::fs::remove_file(path).unwrap();
                }
            }
            for (p, text) in files {
                let path = root.join(p);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let opts = CommitOptions {
                message: b"m",
                ..CommitOptions::default()
            };
            repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
            trees.push(repo.at_tree(&repo.head().unwrap().view).unwrap().unwrap());
        }
        let tx = repo.store().transaction().unwrap();
        let keep = |p: &[u8]| !p.ends_with(b".txt");
        for (a, b) in [(None, Some(&trees[0])), (Some(&trees[0]), Some(&trees[1]))] {
            let whole: Vec<Change> = repo
                .diff_trees_tx(&tx, a, b)
                .unwrap()
                .into_iter()
                .filter(|c| keep(&c.path))
                .collect();
            let kept = repo.diff_trees_tx_where(&tx, a, b, &keep).unwrap();
            assert!(!kept.is_empty());
            assert_eq!(kept, whole);
        }
    }
}
