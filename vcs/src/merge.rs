//! Merging a branch into the current one: a three-way merge of trees.

use std::collections::{BTreeSet, HashSet, VecDeque};

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::object::{Commit, Conflict, EntryKind, Event, Tree, TreeEntry};
use crate::path::{display, is_under, BString};
use crate::repo::{now_ms, Repo};
use crate::treediff::{unflatten, FileDirClash, FlatTree};
use crate::working_copy::moves::WorkingCopyLock;

/// Text files up to this size are merged line by line; larger ones conflict as binary.
const MAX_TEXT_MERGE: u64 = 16 << 20;

/// What `merge` did.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The merge commit.
    pub commit: Id,
    /// The operation.
    pub op: Id,
    /// The merge base.
    pub base: Option<Id>,
    /// Paths merged line by line without conflict.
    pub merged: Vec<BString>,
    /// Paths left in conflict (recorded in the commit).
    pub conflicts: Vec<BString>,
}

/// The bytes as text a line merge can handle (UTF-8 without NUL), if they are.
fn as_text(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

impl Repo {
    /// The nearest common ancestor of two commits (breadth-first from `b`).
    pub fn merge_base(&self, a: &Id, b: &Id) -> Result<Option<Id>> {
        let mut ancestors = HashSet::new();
        let mut stack = vec![*a];
        while let Some(c) = stack.pop() {
            if ancestors.insert(c) {
                stack.extend(self.commit(&c)?.parents);
            }
        }
        let mut queue = VecDeque::from([*b]);
        let mut seen = HashSet::new();
        while let Some(c) = queue.pop_front() {
            if ancestors.contains(&c) {
                return Ok(Some(c));
            }
            if seen.insert(c) {
                queue.extend(self.commit(&c)?.parents);
            }
        }
        Ok(None)
    }

    fn file_bytes(&self, id: &Id) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.store().read_file(id, &mut v)?;
        Ok(v)
    }

    /// Three-way merge of flat trees. Returns the merged tree, the paths merged line by
    /// line, and the conflicts.
    fn merge_flat(
        &self,
        tx: &mut Transaction<'_>,
        base: &FlatTree,
        ours: &FlatTree,
        theirs: &FlatTree,
    ) -> Result<(FlatTree, Vec<BString>, Vec<Conflict>)> {
        let paths: BTreeSet<&BString> = base
            .keys()
            .chain(ours.keys())
            .chain(theirs.keys())
            .collect();
        let mut out = FlatTree::new();
        let mut merged = Vec::new();
        let mut conflicts = Vec::new();
        let same = |a: Option<&TreeEntry>, b: Option<&TreeEntry>| {
            a.map(|e| (e.id, e.kind)) == b.map(|e| (e.id, e.kind))
        };
        for path in paths {
            let (b, o, t) = (base.get(path), ours.get(path), theirs.get(path));
            let pick = if same(o, t) || same(t, b) {
                o
            } else if same(o, b) {
                t
            } else {
                // Changed on both sides, differently.
                let text_merge = match (o, t) {
                    (Some(oe), Some(te))
                        if ![oe.kind, te.kind]
                            .iter()
                            .any(|k| matches!(k, EntryKind::Symlink | EntryKind::Gitlink))
                            && oe.size <= MAX_TEXT_MERGE
                            && te.size <= MAX_TEXT_MERGE
                            && b.is_none_or(|be| be.size <= MAX_TEXT_MERGE) =>
                    {
                        let ob = as_text(self.file_bytes(&oe.id)?);
                        let tb = as_text(self.file_bytes(&te.id)?);
                        let bb = match b {
                            Some(be) => as_text(self.file_bytes(&be.id)?),
                            None => Some(String::new()),
                        };
                        match (bb, ob, tb) {
                            (Some(bs), Some(os), Some(ts)) => {
                                Some((oe.kind, diffy::merge(&bs, &os, &ts)))
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                let conflict = Conflict {
                    path: path.clone(),
                    base: b.map(|e| e.id),
                    ours: o.map(|e| e.id),
                    theirs: t.map(|e| e.id),
                };
                match text_merge {
                    Some((kind, result)) => {
                        // A clean merge, or the text with conflict markers.
                        let (text, clean) = match result {
                            Ok(text) => (text, true),
                            Err(with_markers) => (with_markers, false),
                        };
                        let id = tx.store_bytes(text.as_bytes())?;
                        if clean {
                            merged.push(path.clone());
                        } else {
                            conflicts.push(conflict);
                        }
                        out.insert(
                            path.clone(),
                            TreeEntry {
                                name: Vec::new(),
                                kind,
                                id,
                                size: text.len() as u64,
                            },
                        );
                        continue;
                    }
                    None => {
                        conflicts.push(conflict);
                        o.or(t)
                    }
                }
            };
            if let Some(e) = pick {
                out.insert(path.clone(), e.clone());
            }
        }
        // A file on one side where the other has a directory: keep ours, record theirs.
        while let Err(FileDirClash(dir)) = unflatten(&out) {
            let below = |p: &BString| p.len() > dir.len() && is_under(p, &dir);
            let under: Vec<BString> = out.keys().filter(|p| below(p)).cloned().collect();
            let keep_dir = ours.keys().any(below);
            let drop: Vec<BString> = if keep_dir { vec![dir.clone()] } else { under };
            for p in drop {
                let e = out.remove(&p);
                conflicts.push(Conflict {
                    path: p.clone(),
                    base: base.get(&p).map(|e| e.id),
                    ours: ours.get(&p).map(|e| e.id),
                    theirs: e.map(|e| e.id),
                });
            }
        }
        conflicts.sort_by(|a, b| a.path.cmp(&b.path));
        conflicts.dedup_by(|a, b| a.path == b.path);
        Ok((out, merged, conflicts))
    }

    /// Writes a flat tree as tree objects; returns the root id.
    pub(crate) fn write_flat(&self, tx: &mut Transaction<'_>, flat: &FlatTree) -> Result<Id> {
        let dirs = unflatten(flat).map_err(|FileDirClash(d)| {
            VcsError::Inconsistent(format!("{} is both a file and a folder", display(&d)))
        })?;
        // Children before parents: deepest paths first.
        let depth = |d: &BString| {
            if d.is_empty() {
                0
            } else {
                d.iter().filter(|b| **b == b'/').count() + 1
            }
        };
        let mut order: Vec<&BString> = dirs.keys().collect();
        order.sort_by_key(|d| std::cmp::Reverse(depth(d)));
        let mut ids: std::collections::HashMap<BString, (Id, u64)> =
            std::collections::HashMap::new();
        for d in order {
            let mut entries = dirs[d].entries.clone();
            let prefix: Vec<u8> = if d.is_empty() {
                Vec::new()
            } else {
                [d.as_slice(), b"/"].concat()
            };
            for (sub, (id, size)) in ids.iter().filter(|(k, _)| {
                !k.is_empty()
                    && k.strip_prefix(prefix.as_slice())
                        .is_some_and(|rest| !rest.is_empty() && !rest.contains(&b'/'))
            }) {
                let name = sub[prefix.len()..].to_vec();
                entries.push(TreeEntry {
                    name,
                    kind: EntryKind::Dir,
                    id: *id,
                    size: *size,
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let tree = Tree {
                entries,
                git_raw: None,
            };
            let id = tx.write_object(Kind::Tree, &tree.encode())?;
            ids.insert(d.clone(), (id, tree.total_size()));
        }
        ids.get(&BString::default())
            .map(|(id, _)| *id)
            .ok_or_else(|| VcsError::Inconsistent("no root folder was written".into()))
    }

    /// Merges branch `other` into `@`: a merge commit whose tree takes what changed on one
    /// side only, merges text changed on both sides line by line, and records true
    /// conflicts in the commit. The folder must be clean; it is updated to the result.
    pub fn merge(&self, wc: &WorkingCopyLock, other: &str) -> Result<MergeOutcome> {
        let start = now_ms();
        let head = self.head()?;
        let ours = head
            .view
            .at_commit()
            .ok_or_else(|| VcsError::NoCommits("@".into()))?;
        let theirs = self.resolve_rev(&head.view, other)?;
        let base = self.merge_base(&ours, &theirs)?;
        if base == Some(theirs) {
            return Err(VcsError::Refused(format!(
                "{other} is already merged into @ (nothing to do)"
            )));
        }
        let st = self.status_in(&head.view)?;
        if !st.changes.is_empty() {
            return Err(VcsError::Uncommitted(
                st.changes
                    .iter()
                    .map(|c| format!("{} {}", c.kind.letter(), display(&c.path)))
                    .take(10)
                    .collect(),
            ));
        }
        let (ot, tt) = (self.commit(&ours)?.tree, self.commit(&theirs)?.tree);
        let bf = match base {
            Some(b) => self.flatten(&self.commit(&b)?.tree)?,
            None => FlatTree::new(),
        };
        let (of, tf) = (self.flatten(&ot)?, self.flatten(&tt)?);
        let mut tx = self.store().transaction()?;
        let (result, merged, conflicts) = self.merge_flat(&mut tx, &bf, &of, &tf)?;
        let tree = self.write_flat(&mut tx, &result)?;
        let sig = self.signature(start);
        let branch = head.view.current_branch.clone();
        let message = format!("merge {other} into {}", branch.as_deref().unwrap_or("@"));
        let commit = Commit {
            tree,
            parents: vec![ours, theirs],
            change_id: crate::commit::new_change_id(),
            author: sig.clone(),
            committer: sig,
            message: message.into_bytes(),
            extra_headers: Vec::new(),
            conflicts: conflicts.clone(),
            git_header: None,
        };
        let id = tx.write_object(Kind::Commit, &commit.encode())?;
        let mv = self.plan_move(
            &tx,
            Some(&ot),
            Some(&tree),
            &st.unreadable,
            &format!("commit {}", theirs.short(12)),
        )?;
        let mut view = head.view.clone();
        view.heads.retain(|h| *h != ours && *h != theirs);
        view.heads.push(id);
        view.wc_commit = Some(id);
        let mut events = vec![Event::CommitCreated { commit: id }];
        if let Some(b) = &branch {
            view.set_branch(b, Some(id));
            events.push(Event::BranchMoved {
                name: b.clone(),
                from: Some(ours),
                to: Some(id),
            });
        }
        let op = self.publish_and_move(
            wc,
            tx,
            &[head.id],
            view,
            &format!("merge {other}"),
            events,
            start,
            mv,
        )?;
        Ok(MergeOutcome {
            commit: id,
            op,
            base,
            merged,
            conflicts: conflicts.into_iter().map(|c| c.path).collect(),
        })
    }
}
