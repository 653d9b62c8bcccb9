//! Differences between trees, file by file.

use std::collections::BTreeMap;

use lifeos_store::Id;

use crate::error::Result;
use crate::object::{EntryKind, Tree, TreeEntry};
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
    /// Repository path.
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
    /// The entry before.
    pub old: Option<TreeEntry>,
    /// The entry after.
    pub new: Option<TreeEntry>,
}

/// A flat map of repository paths to file and symlink entries.
pub type FlatTree = BTreeMap<String, TreeEntry>;

fn join(prefix: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if prefix.is_empty() {
        name.into_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

impl Repo {
    /// Every file and symlink below tree `id`, by path.
    pub fn flatten(&self, id: &Id) -> Result<FlatTree> {
        let mut out = BTreeMap::new();
        self.flatten_into(id, "", &mut out)?;
        Ok(out)
    }

    fn flatten_into(&self, id: &Id, prefix: &str, out: &mut FlatTree) -> Result<()> {
        for e in self.tree(id)?.entries {
            let path = join(prefix, &e.name);
            if e.kind == EntryKind::Dir {
                self.flatten_into(&e.id, &path, out)?;
            } else {
                out.insert(path, e);
            }
        }
        Ok(())
    }

    /// The file-level changes from tree `a` to tree `b` (`None` is the empty tree),
    /// skipping identical subtrees without reading them.
    pub fn diff_trees(&self, a: Option<&Id>, b: Option<&Id>) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        self.diff_into(a, b, "", &mut out)?;
        Ok(out)
    }

    fn diff_into(
        &self,
        a: Option<&Id>,
        b: Option<&Id>,
        prefix: &str,
        out: &mut Vec<Change>,
    ) -> Result<()> {
        if a == b {
            return Ok(());
        }
        let ta = a.map(|id| self.tree(id)).transpose()?.unwrap_or_default();
        let tb = b.map(|id| self.tree(id)).transpose()?.unwrap_or_default();
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
            let name = ea.or(eb).expect("one side").name.clone();
            let path = join(prefix, &name);
            let dir_a = ea.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
            let dir_b = eb.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
            let file_a = ea.filter(|e| e.kind != EntryKind::Dir);
            let file_b = eb.filter(|e| e.kind != EntryKind::Dir);
            if dir_a.is_some() || dir_b.is_some() {
                self.diff_into(dir_a.as_ref(), dir_b.as_ref(), &path, out)?;
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
        out.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(())
    }
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

/// Builds a tree hierarchy from a flat tree; returns the root's entries grouped by
/// directory, for writing.
pub fn unflatten(flat: &FlatTree) -> std::result::Result<BTreeMap<String, Tree>, String> {
    let mut dirs: BTreeMap<String, Vec<TreeEntry>> = BTreeMap::new();
    dirs.insert(String::new(), Vec::new());
    for (path, e) in flat {
        let (parent, name) = match path.rfind('/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => ("", path.as_str()),
        };
        let mut d = parent.to_string();
        loop {
            dirs.entry(d.clone()).or_default();
            match d.rfind('/') {
                Some(i) => d.truncate(i),
                None if !d.is_empty() => d.clear(),
                None => break,
            }
        }
        dirs.get_mut(parent).expect("inserted").push(TreeEntry {
            name: name.as_bytes().to_vec(),
            ..e.clone()
        });
    }
    for d in dirs.keys() {
        if flat.contains_key(d) {
            return Err(format!("{d} is both a file and a directory"));
        }
    }
    Ok(dirs
        .into_iter()
        .map(|(k, v)| (k, Tree { entries: v }))
        .collect())
}
