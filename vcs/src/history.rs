//! History operations: status, branches and tags, checkout, describe, undo, op restore,
//! restoring paths, and reading the repository as of any moment (`--at`).

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::object::{Commit, Conflict, EntryKind, Event, OpEvents, Operation, TreeEntry, View};
use crate::path::{display, in_folder, is_under, BString};
use crate::prefix::IdKind;
use crate::repo::{now_ms, OpState, Repo};
use crate::treediff::{diff_flat, Change, ChangeKind, FlatTree};
use crate::when::{parse_when, When};
use crate::working_copy::fsmonitor::{skipped_outside, SideFile, Watched};
use crate::working_copy::moves::WorkingCopyLock;
use crate::working_copy::snapshot::{submodule_folder_present, untrusted, Untrusted};
use crate::working_copy::stat_cache::{NewCache, StatCache};
use crate::working_copy::{
    scan, scan_within, CacheEntry, NoProgress, Scan, ScanEntry, Skipped, WcState,
};

/// The working folder compared with `@`.
#[derive(Debug)]
pub struct Status {
    /// The commit the folder is compared with (`@`), if any.
    pub base: Option<Id>,
    /// The branch, if any.
    pub branch: Option<String>,
    /// Files added, modified or deleted since `@`.
    pub changes: Vec<Change>,
    /// Conflicts recorded in `@` whose file is still as the merge left it.
    pub conflicts: Vec<Conflict>,
    /// Paths not recorded by design (gone while scanning, or not files).
    pub skipped: Vec<Skipped>,
    /// Files and folders that could not be read: compared as their last recorded
    /// version, and never overwritten by a command that changes the folder.
    pub unreadable: Vec<Skipped>,
}

/// The working folder as read without storing anything.
#[derive(Debug, Default)]
pub struct FolderRead {
    /// Files and symlinks by path. A path that could not be read is absent.
    pub flat: FlatTree,
    /// Paths not recorded by design.
    pub skipped: Vec<Skipped>,
    /// Paths that could not be read.
    pub unreadable: Vec<Skipped>,
    /// Whether a file read has another hard link ([`Scan::shared_inodes`]).
    pub shared_inodes: bool,
}

/// Which operation a `--at` resolved to.
#[derive(Debug, Clone)]
pub struct AtOp {
    /// The operation.
    pub state: OpState,
    /// What the user asked for, resolved to a time (ms), if it was a time.
    pub asked_ms: Option<i64>,
}

/// What to switch the folder to.
#[derive(Debug, Clone)]
pub enum Target {
    /// A branch (the folder follows it).
    Branch(String),
    /// A commit, detached from any branch.
    Commit(Id),
}

impl View {
    /// `@`: the current branch's commit, or the detached working-copy commit.
    pub fn at_commit(&self) -> Option<Id> {
        match &self.current_branch {
            Some(b) => self.branch(b),
            None => self.wc_commit,
        }
    }
}

fn hash_file(path: &Path) -> std::io::Result<(Id, u64)> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path)?;
    let n = std::io::copy(&mut std::io::BufReader::with_capacity(1 << 20, f), &mut h)?;
    Ok((h.finalize().into(), n))
}

/// Checks a branch or tag name.
pub fn valid_ref_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.starts_with('-')
        || name.contains("..")
        || name == "@"
        || name.ends_with('-')
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\()|&,".contains(c));
    if bad {
        return Err(VcsError::Refused(format!(
            "{name:?} is not a valid name (no spaces, no trailing '-', none of ~^:?*[\\()|&, and not '@')"
        )));
    }
    Ok(())
}

impl Repo {
    /// The tree of `@` in `view`.
    pub fn at_tree(&self, view: &View) -> Result<Option<Id>> {
        view.at_commit()
            .map(|c| self.commit(&c).map(|c| c.tree))
            .transpose()
    }

    /// The kind, content id and size of a file or symlink the scan found, read from the
    /// folder without storing anything.
    fn content_id(&self, f: &ScanEntry) -> std::io::Result<(EntryKind, Id, u64)> {
        let full = in_folder(self.workdir(), &f.path);
        if f.meta.is_symlink() {
            std::fs::read_link(&full).map(|t| {
                let b = t.as_os_str().as_bytes();
                (EntryKind::Symlink, Id::hash(b), b.len() as u64)
            })
        } else {
            let kind = if f.meta.executable() {
                EntryKind::Executable
            } else {
                EntryKind::File
            };
            hash_file(&full).map(|(id, n)| (kind, id, n))
        }
    }

    /// Reads the working folder into a flat tree without storing anything: files the stat
    /// cache recognises are not read; the others are hashed on every core. The gitlinks
    /// of `base` (the flattened tree the folder is compared with) stay while their folders
    /// are there, and what is inside those folders is left out, as a snapshot does.
    pub fn working_tree(&self, base: Option<&FlatTree>) -> Result<FolderRead> {
        self.read_folder(base, self.stat_cache(), scan(self.workdir())?)
    }

    /// [`Repo::working_tree`] from a scan already made, with the stat cache `old`.
    fn read_folder(
        &self,
        base: Option<&FlatTree>,
        old: StatCache,
        mut scanned: Scan,
    ) -> Result<FolderRead> {
        if let Some(base) = base {
            self.keep_tracked(base.keys().map(|k| k.as_ref()), &mut scanned);
        }
        let Scan {
            mut found,
            skipped,
            unreadable,
            shared_inodes,
        } = scanned;
        let mut out = FolderRead {
            skipped,
            unreadable,
            shared_inodes,
            ..FolderRead::default()
        };
        // Entries are collected, then the map is built in bulk once the scan and the old
        // stat cache are dropped: B-tree nodes filled by ordered inserts end half empty.
        let mut flat: Vec<(BString, TreeEntry)> = Vec::with_capacity(found.len());
        let mut to_hash = Vec::new();
        for (i, f) in found.iter_mut().enumerate() {
            match old
                .get(&f.path)
                .filter(|c| c.trusted(&f.meta, old.recorded_at_ns()))
            {
                Some(c) => {
                    // Moved, not copied: the scan's entry is not used again.
                    flat.push((
                        BString::from(std::mem::take(&mut f.path)),
                        TreeEntry {
                            name: Vec::new(),
                            kind: c.kind,
                            id: c.id,
                            size: f.meta.size,
                        },
                    ));
                }
                None => to_hash.push(i),
            }
        }
        let results = lifeos_store::par::map(&to_hash, |&i| self.content_id(&found[i]));
        let mut failures = Scan::default();
        for (&i, r) in to_hash.iter().zip(results) {
            let f = &found[i];
            match r {
                Ok((kind, id, size)) => {
                    flat.push((
                        BString::from(f.path.as_slice()),
                        TreeEntry {
                            name: Vec::new(),
                            kind,
                            id,
                            size,
                        },
                    ));
                }
                Err(e) => failures.failed(BString::from(f.path.as_slice()), &e),
            }
        }
        drop(found);
        drop(old);
        out.flat = flat.into_iter().collect();
        out.skipped.append(&mut failures.skipped);
        out.unreadable.append(&mut failures.unreadable);
        out.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        for (path, e) in base.into_iter().flatten() {
            if e.kind == EntryKind::Gitlink && submodule_folder_present(self.workdir(), path) {
                out.flat.retain(|p, _| !is_under(p, path));
                out.flat.insert(path.clone(), e.clone());
            }
        }
        Ok(out)
    }

    /// What changed in the folder since `@`.
    pub fn status(&self, _wc: &WorkingCopyLock) -> Result<Status> {
        let head = self.head()?;
        self.status_in(&head.view)
    }

    /// What changed in the folder since `view`'s `@`. A path that cannot be read counts
    /// as its recorded version (its content is unknown, never taken as deleted) and is
    /// listed in [`Status::unreadable`].
    pub(crate) fn status_in(&self, view: &View) -> Result<Status> {
        let base = view.at_commit();
        let (base_tree, conflicts) = match base {
            Some(c) => {
                let commit = self.commit(&c)?;
                (Some(commit.tree), commit.conflicts)
            }
            None => (None, Vec::new()),
        };
        let status = |changes: Vec<Change>, conflicts: Vec<Conflict>, skipped, unreadable| {
            let changed: HashSet<&BString> = changes.iter().map(|c| &c.path).collect();
            let conflicts = conflicts
                .into_iter()
                .filter(|c| !changed.contains(&c.path))
                .collect();
            Status {
                base,
                branch: view.current_branch.clone(),
                changes,
                conflicts,
                skipped,
                unreadable,
            }
        };
        // Asked before anything is looked at: what changes from now on is in the journal.
        let token = match self.watched(base_tree.as_ref()) {
            Watched::Paths {
                token,
                targets,
                mut side,
            } => {
                if targets.is_empty() {
                    // Nothing happened in the folder since the cache was saved.
                    if side.token != token {
                        side.token = token;
                        self.save_side_file(&side);
                    }
                    return Ok(status(Vec::new(), conflicts, side.skipped, Vec::new()));
                }
                let base = base_tree.expect("a side file names a tree");
                if let Some(there) = self.tree_within(&base, &targets)? {
                    let scanned = scan_within(self.workdir(), &targets)?;
                    let base_flat: FlatTree = there.into_iter().collect();
                    // Every file found there is read: the stat cache is not read at all.
                    let read = self.read_folder(Some(&base_flat), StatCache::default(), scanned)?;
                    // A file with another name can change through it unseen, a file
                    // outside these paths too: then everything is looked at.
                    if !read.shared_inodes {
                        let (changes, unreadable) =
                            changes_from(&base_flat, read.flat, read.unreadable);
                        side.skipped = skipped_outside(&side, &targets, read.skipped);
                        // Nothing differs: the cache still is the folder, from the new
                        // token on.
                        if changes.is_empty() && unreadable.is_empty() {
                            side.token = token;
                            self.save_side_file(&side);
                        }
                        return Ok(status(changes, conflicts, side.skipped, unreadable));
                    }
                }
                Some(token)
            }
            Watched::All(token) => Some(token),
            Watched::No => None,
        };
        // The scan first: its peak (the walk's listings) is then not on top of the cache.
        let mut scanned = scan(self.workdir())?;
        let old = self.stat_cache();
        // Exactly what the snapshot that made `@`'s tree saw, the racily clean files
        // (9.2) read to be sure: nothing changed.
        let unchanged = old
            .racy_if_unchanged(base_tree.as_ref(), &scanned)
            .is_some_and(|racy| {
                racy.iter().all(|(i, c)| {
                    self.content_id(&scanned.found[*i])
                        .is_ok_and(|(kind, id, _)| kind == c.kind && id == c.id)
                })
            });
        // With nothing changed, the monitor's token is saved, tied to the cache read: the
        // folder is `@`'s tree (the cache may name an older one: only its checksum ties
        // the token to it).
        let cache_sum = old.sum();
        let save_token = |files: u64, bytes: u64, skipped: &[Skipped]| {
            if let (Some(token), Some(tree), Some(cache_sum)) = (token, base_tree, cache_sum) {
                self.save_side_file(&SideFile {
                    token,
                    tree,
                    cache_sum,
                    files,
                    bytes,
                    skipped: skipped.to_vec(),
                });
            }
        };
        if unchanged {
            if !scanned.shared_inodes {
                save_token(
                    scanned.found.len() as u64,
                    scanned.bytes(),
                    &scanned.skipped,
                );
            }
            return Ok(status(Vec::new(), conflicts, scanned.skipped, Vec::new()));
        }
        if let Some(base) = &base_tree {
            if let Some(changes) = self.changes_through_cache(base, &old, &mut scanned)? {
                if changes.is_empty() && !scanned.shared_inodes {
                    save_token(
                        scanned.found.len() as u64,
                        scanned.bytes(),
                        &scanned.skipped,
                    );
                }
                return Ok(status(changes, conflicts, scanned.skipped, Vec::new()));
            }
        }
        let base_flat = match base_tree {
            Some(t) => self.flatten(&t)?,
            None => FlatTree::new(),
        };
        let read = self.read_folder(Some(&base_flat), old, scanned)?;
        let (files, bytes) = (
            read.flat.len() as u64,
            read.flat.values().map(|e| e.size).sum::<u64>(),
        );
        let (shared, skipped) = (read.shared_inodes, read.skipped);
        let (changes, unreadable) = changes_from(&base_flat, read.flat, read.unreadable);
        if changes.is_empty() && unreadable.is_empty() && !shared {
            save_token(files, bytes, &skipped);
        }
        Ok(status(changes, conflicts, skipped, unreadable))
    }

    /// What differs between the folder as `scanned` found it and `base`, through the stat
    /// cache `old`, without flattening `base` or mapping the folder: the cache's entries
    /// stand for the tree they were made into, so only the files it does not trust are
    /// read; a cache saved for an older tree counts as [`Repo::cache_changes_for`] makes
    /// it. `None` (then everything is compared) when the cache names no tree, `base` has a
    /// submodule where the two differ, or a path could not be read: that comparison says
    /// what happened to it.
    fn changes_through_cache(
        &self,
        base: &Id,
        old: &StatCache,
        scanned: &mut Scan,
    ) -> Result<Option<Vec<Change>>> {
        let Some(since) = self.cache_changes_for(base, old)? else {
            return Ok(None);
        };
        let entries = crate::working_copy::stat_cache::patched(old, &since);
        self.keep_tracked(entries.clone().map(|(p, _)| p), scanned);
        if !scanned.unreadable.is_empty() {
            return Ok(None);
        }
        let entry = |c: &CacheEntry| TreeEntry {
            name: Vec::new(),
            kind: c.kind,
            id: c.id,
            size: c.size,
        };
        let found = &scanned.found;
        let Untrusted {
            gone,
            files: to_read,
        } = untrusted(found, entries, old.recorded_at_ns());
        let mut changes: Vec<Change> = gone
            .iter()
            .map(|(p, c)| Change {
                path: (*p).into(),
                kind: ChangeKind::Deleted,
                old: Some(entry(c)),
                new: None,
            })
            .collect();
        let read = lifeos_store::par::map(&to_read, |(i, _)| self.content_id(&found[*i]));
        for ((i, c), r) in to_read.iter().zip(read) {
            let Ok((kind, id, size)) = r else {
                return Ok(None);
            };
            let new = TreeEntry {
                name: Vec::new(),
                kind,
                id,
                size,
            };
            let (kind, old) = match c {
                Some(c) if c.kind == kind && c.id == id => continue,
                Some(c) => (ChangeKind::Modified, Some(entry(c))),
                None => (ChangeKind::Added, None),
            };
            changes.push(Change {
                path: BString::from(found[*i].path.as_slice()),
                kind,
                old,
                new: Some(new),
            });
        }
        changes.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(Some(changes))
    }

    /// The operation whose id starts with `prefix` (4 or more hex digits), found through
    /// the repository's operation index.
    pub fn resolve_op(&self, prefix: &str) -> Result<Id> {
        let lower = crate::prefix::hex_prefix(prefix, IdKind::Operation)?;
        let ids = self.op_index().ops_with_prefix(self, &lower)?;
        crate::prefix::exactly_one(ids, prefix, IdKind::Operation, |i| i.short(16))
    }

    /// Resolves `--at WHEN` to the operation whose view it means.
    pub fn op_at(&self, when: &str) -> Result<AtOp> {
        let now = jiff::Timestamp::from_millisecond(now_ms())
            .map_err(|e| VcsError::BadTime(e.to_string()))?
            .to_zoned(jiff::tz::TimeZone::system());
        let parsed = parse_when(when, &now).map_err(VcsError::BadTime)?;
        let index = self.op_index();
        match parsed {
            When::Operation(prefix) => Ok(AtOp {
                state: self.op_state(&self.resolve_op(&prefix)?)?,
                asked_ms: None,
            }),
            When::Time(t) => {
                let Some((first, _)) = index.op_time_range(self)? else {
                    return Err(VcsError::Inconsistent("the operation log is empty".into()));
                };
                if t > now.timestamp().as_millisecond() + 1000 {
                    return Err(VcsError::BadTime(format!("{when:?} is in the future")));
                }
                if t < first {
                    return Err(VcsError::BadTime(format!(
                        "{when:?} is before the repository existed (its first operation is at {})",
                        jiff::Timestamp::from_millisecond(first)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    )));
                }
                let id = index.op_at(self, t)?.ok_or_else(|| {
                    VcsError::Inconsistent(format!(
                        "the operation index has operations from {first} ms but none at or before {t} ms; run `lifeos reindex`"
                    ))
                })?;
                Ok(AtOp {
                    state: self.op_state(&id)?,
                    asked_ms: Some(t),
                })
            }
        }
    }

    /// Stores the folder as a commit that is not on any branch (so that content about to be
    /// replaced stays recoverable); returns the commit, its tree and the refreshed stat
    /// cache (`None`: the saved one stands).
    fn save_folder(
        &self,
        tx: &mut Transaction<'_>,
        view: &View,
        message: &str,
    ) -> Result<(Id, Id, Option<WcState>)> {
        let base = self.at_tree(view)?;
        let snap = self.snapshot(tx, base.as_ref(), &NoProgress)?;
        let sig = self.signature(now_ms());
        let commit = Commit {
            tree: snap.tree,
            parents: view.at_commit().into_iter().collect(),
            change_id: crate::commit::new_change_id(),
            author: sig.clone(),
            committer: sig,
            message: message.as_bytes().to_vec(),
            extra_headers: Vec::new(),
            conflicts: Vec::new(),
            git_header: None,
        };
        let id = tx.write_object(Kind::Commit, &commit.encode())?;
        Ok((id, snap.tree, snap.state.map(NewCache::into_state)))
    }

    /// Publishes `view` as a new operation and moves the folder to its `@`. The folder
    /// must be clean; with `force`, its changes are first saved as a commit that the same
    /// operation keeps visible. Nothing is published if the move cannot be made safely.
    pub(crate) fn switch_view(
        &self,
        wc: &WorkingCopyLock,
        head: &OpState,
        mut view: View,
        force: bool,
        (what, mut events): (&str, Vec<Event>),
        mut tx: Transaction<'_>,
    ) -> Result<(Id, Option<Id>)> {
        let start = now_ms();
        let st = self.status_in(&head.view)?;
        let mut saved = None;
        let mut state = None;
        let from = if st.changes.is_empty() {
            self.at_tree(&head.view)?
        } else if !force {
            return Err(VcsError::Uncommitted(change_list(&st.changes)));
        } else {
            let (id, tree, s) = self.save_folder(
                &mut tx,
                &head.view,
                &format!("uncommitted changes saved before {what}"),
            )?;
            view.heads.push(id);
            events.push(Event::CommitCreated { commit: id });
            saved = Some(id);
            state = s;
            Some(tree)
        };
        let to = self.at_tree(&view)?;
        let origin = match view.at_commit() {
            Some(c) => format!("commit {}", c.short(12)),
            None => "the empty tree".into(),
        };
        let mut mv = self.plan_move(&tx, from.as_ref(), to.as_ref(), &st.unreadable, &origin)?;
        mv = mv.with_state(state);
        view.wc_commit = view.at_commit().or(view.wc_commit);
        let op = self.publish_and_move(wc, tx, &[head.id], view, what, events, start, mv)?;
        Ok((op, saved))
    }

    /// Switches the folder to a branch or commit. Refuses to overwrite uncommitted changes
    /// unless `force`, which saves them as a commit first (returned).
    pub fn checkout(
        &self,
        wc: &WorkingCopyLock,
        target: &Target,
        force: bool,
    ) -> Result<(Id, Option<Id>, Id)> {
        let head = self.head()?;
        let mut view = head.view.clone();
        let commit = match target {
            Target::Branch(b) => {
                let c = view.branch(b).ok_or_else(|| VcsError::UnknownRevision {
                    rev: b.clone(),
                    candidates: vec![],
                })?;
                view.current_branch = Some(b.clone());
                c
            }
            Target::Commit(c) => {
                view.current_branch = None;
                *c
            }
        };
        view.wc_commit = Some(commit);
        let name = match target {
            Target::Branch(b) => b.clone(),
            Target::Commit(c) => c.short(12),
        };
        let (op, saved) = self.switch_view(
            wc,
            &head,
            view,
            force,
            (
                &format!("checkout {name}"),
                vec![Event::CheckedOut { commit }],
            ),
            self.store().transaction()?,
        )?;
        Ok((commit, saved, op))
    }

    /// Creates or moves a branch (`target` None deletes it).
    pub fn set_branch(&self, name: &str, target: Option<Id>, allow_move: bool) -> Result<Id> {
        valid_ref_name(name)?;
        let start = now_ms();
        let head = self.head()?;
        let from = head.view.branch(name);
        if from.is_some() && target.is_some() && !allow_move {
            return Err(VcsError::Refused(format!(
                "branch {name} already exists; use `lifeos branch set` to move it"
            )));
        }
        if from.is_none() && target.is_none() {
            return Err(VcsError::UnknownRevision {
                rev: name.into(),
                candidates: vec![],
            });
        }
        if target.is_none() && head.view.current_branch.as_deref() == Some(name) {
            return Err(VcsError::Refused(format!(
                "branch {name} is checked out; check out another one first"
            )));
        }
        let mut view = head.view.clone();
        view.set_branch(name, target);
        if let Some(t) = target {
            view.heads.push(t);
        }
        let verb = match (from, target) {
            (None, Some(_)) => "create",
            (Some(_), Some(_)) => "move",
            _ => "delete",
        };
        let tx = self.store().transaction()?;
        self.publish(
            tx,
            &[head.id],
            view,
            &format!("branch {verb} {name}"),
            vec![Event::BranchMoved {
                name: name.into(),
                from,
                to: target,
            }],
            start,
        )
    }

    /// The commits of `ids`, in their order, that changed `path` (a file or a folder;
    /// empty for everything) against their first parent (a root commit: against no
    /// files), at most `limit` of them. Each commit costs a lookup of the path in its tree
    /// and its parent's, not a diff of the trees, and the walk stops once it has `limit`.
    pub fn commits_changing(
        &self,
        ids: impl IntoIterator<Item = Id>,
        path: &[u8],
        limit: Option<usize>,
    ) -> Result<Vec<Id>> {
        let limit = limit.unwrap_or(usize::MAX);
        if path.is_empty() {
            return Ok(ids.into_iter().take(limit).collect());
        }
        // A commit's parent is usually the next commit listed: its entry, looked up as
        // the parent's, is kept for that turn, so each commit is read once.
        // A commit's first parent and the path's entry in its tree.
        type At = (Option<Id>, Option<TreeEntry>);
        let entry_at = |id: &Id| -> Result<At> {
            let c = self.commit(id)?;
            Ok((c.parents.first().copied(), self.lookup_path(&c.tree, path)?))
        };
        let mut kept = Vec::new();
        let mut next: Option<(Id, At)> = None;
        for id in ids {
            if kept.len() >= limit {
                break;
            }
            let (parent, now) = match next.take() {
                Some((n, e)) if n == id => e,
                _ => entry_at(&id)?,
            };
            let before = match parent {
                Some(p) => {
                    let e = entry_at(&p)?;
                    let before = e.1.clone();
                    next = Some((p, e));
                    before
                }
                None => None,
            };
            if now != before {
                kept.push(id);
            }
        }
        Ok(kept)
    }

    /// Renames branch `from` to `to` in one operation (its target stays; the folder's
    /// current branch follows the new name). A branch named `to` must not exist.
    pub fn rename_branch(&self, from: &str, to: &str) -> Result<Id> {
        valid_ref_name(to)?;
        let start = now_ms();
        let head = self.head()?;
        let target = head
            .view
            .branch(from)
            .ok_or_else(|| VcsError::UnknownRevision {
                rev: from.into(),
                candidates: head.view.branches.iter().map(|(n, _)| n.clone()).collect(),
            })?;
        if head.view.branch(to).is_some() {
            return Err(VcsError::Refused(format!(
                "branch {to} already exists; delete it first or choose another name"
            )));
        }
        let mut view = head.view.clone();
        view.set_branch(from, None);
        view.set_branch(to, Some(target));
        if view.current_branch.as_deref() == Some(from) {
            view.current_branch = Some(to.to_string());
        }
        let tx = self.store().transaction()?;
        self.publish(
            tx,
            &[head.id],
            view,
            &format!("branch rename {from} to {to}"),
            vec![
                Event::BranchMoved {
                    name: from.into(),
                    from: Some(target),
                    to: None,
                },
                Event::BranchMoved {
                    name: to.into(),
                    from: None,
                    to: Some(target),
                },
            ],
            start,
        )
    }

    /// Creates, moves or deletes a tag.
    pub fn set_tag(&self, name: &str, target: Option<Id>, allow_move: bool) -> Result<Id> {
        valid_ref_name(name)?;
        let start = now_ms();
        let head = self.head()?;
        let from = head.view.tag(name);
        if from.is_some() && target.is_some() && !allow_move {
            return Err(VcsError::Refused(format!(
                "tag {name} already exists; delete it first or use --force"
            )));
        }
        if from.is_none() && target.is_none() {
            return Err(VcsError::UnknownRevision {
                rev: name.into(),
                candidates: vec![],
            });
        }
        let mut view = head.view.clone();
        view.set_tag(name, target);
        let verb = if target.is_some() { "create" } else { "delete" };
        let tx = self.store().transaction()?;
        self.publish(
            tx,
            &[head.id],
            view,
            &format!("tag {verb} {name}"),
            vec![Event::TagMoved {
                name: name.into(),
                from,
                to: target,
            }],
            start,
        )
    }

    /// Rewrites a commit's message; its change id stays, and descendants are rewritten onto
    /// it. Returns (old, new, operation).
    pub fn describe(&self, rev: &str, message: &[u8]) -> Result<(Id, Id, Id)> {
        let start = now_ms();
        let head = self.head()?;
        let old = self.resolve_rev(&head.view, rev)?;
        let mut tx = self.store().transaction()?;
        let mut commit = self.commit(&old)?;
        commit.message = message.to_vec();
        commit.committer = self.signature(start);
        // A rewritten commit is a new commit: git's header (and any signature) was for
        // the old one.
        commit.git_header = None;
        let (new, view, events) = self.rewrite(&mut tx, &head.view, old, &commit)?;
        let op = self.publish(
            tx,
            &[head.id],
            view,
            &format!("describe {}", old.short(12)),
            events,
            start,
        )?;
        Ok((old, new, op))
    }

    /// Writes `commit` as the new version of commit `old` of `view`: descendants are
    /// rebased onto it, and branches, tags, heads and `@` that named a rewritten commit
    /// name its new version. Returns the new commit's id, the new view and the events.
    pub(crate) fn rewrite(
        &self,
        tx: &mut Transaction<'_>,
        view: &View,
        old: Id,
        commit: &Commit,
    ) -> Result<(Id, View, Vec<Event>)> {
        let new = tx.write_object(Kind::Commit, &commit.encode())?;
        let mut map: HashMap<Id, Id> = HashMap::from([(old, new)]);
        let mut events = vec![Event::CommitRewritten { from: old, to: new }];
        // Rebase descendants: every visible commit with a rewritten parent, oldest first.
        let ev = crate::revset::Evaluator::new(self, view)?;
        let children_first = ev.sorted(ev.eval(&crate::revset::Expr::All)?);
        for id in children_first.iter().rev() {
            let c = ev.commit(id);
            if map.contains_key(id) || !c.parents.iter().any(|p| map.contains_key(p)) {
                continue;
            }
            let mut c2 = c.clone();
            c2.parents = c.parents.iter().map(|p| *map.get(p).unwrap_or(p)).collect();
            c2.git_header = None;
            let nid = tx.write_object(Kind::Commit, &c2.encode())?;
            map.insert(*id, nid);
            events.push(Event::CommitRewritten { from: *id, to: nid });
        }
        let mut view = view.clone();
        let remap = |id: &mut Id| {
            if let Some(n) = map.get(id) {
                *id = *n;
            }
        };
        view.heads.iter_mut().for_each(remap);
        view.branches.iter_mut().for_each(|(_, id)| remap(id));
        view.tags.iter_mut().for_each(|(_, id)| remap(id));
        for g in view.git_refs.iter_mut().filter(|g| g.target == g.commit) {
            remap(&mut g.commit);
            g.target = g.commit;
        }
        if let Some(w) = view.wc_commit.as_mut() {
            remap(w);
        }
        Ok((new, view, events))
    }

    /// Steps back over operations that left the view as it was (ingest results, files
    /// stored for git's filter): they are not what a person means to undo or redo.
    fn settled(&self, mut top: OpState) -> Result<OpState> {
        while let [p] = top.op.parents.as_slice() {
            let parent = self.op_state(p)?;
            if !parent.view.same_but_records(&top.view)
                || self.events(&top.op)?.iter().any(|e| !e.records_only())
            {
                break;
            }
            top = parent;
        }
        Ok(top)
    }

    /// The operations whose views, merged, are the state `state` stands for in the undo
    /// stack: itself for an ordinary operation; for an undo, the state before the
    /// operation it undid; for a redo, the state before the undo it reverted; for a merge
    /// of concurrent operations, each of them. So a repeated `undo` steps further back and
    /// `redo` walks forward again, as in jj.
    fn stack_state(&self, state: OpState, depth: usize) -> Result<Vec<OpState>> {
        // A chain of undos and redos is walked down once per step; this bounds it.
        if depth > 10_000 {
            return Err(VcsError::Inconsistent(
                "more than 10000 undos and redos in a row".into(),
            ));
        }
        let state = self.settled(state)?;
        let parent = |s: &OpState| -> Result<Option<OpState>> {
            match s.op.parents.as_slice() {
                [p] => Ok(Some(self.op_state(p)?)),
                _ => Ok(None),
            }
        };
        match (undo_of(&state.op), redo_of(&state.op), parent(&state)?) {
            (Some(undone), _, Some(before)) => {
                let before = self.stack_state(before, depth + 1)?;
                if before.len() > 1 && before.iter().any(|s| s.id == undone) {
                    // It undid one of concurrent operations: the others stay, on top of
                    // what the undone one started from.
                    let undone = self.op_state(&undone)?;
                    let mut sides: Vec<OpState> =
                        before.into_iter().filter(|s| s.id != undone.id).collect();
                    for p in &undone.op.parents {
                        sides.push(self.op_state(p)?);
                    }
                    return Ok(without_parents_of_others(sides));
                }
                // It undid one operation: the state before it.
                match parent(&self.op_state(&undone)?)? {
                    Some(p) => self.stack_state(p, depth + 1),
                    None => Ok(vec![state]),
                }
            }
            (_, Some(undo), _) => match parent(&self.op_state(&undo)?)? {
                Some(p) => self.stack_state(p, depth + 1),
                None => Ok(vec![state]),
            },
            _ if state.op.parents.len() > 1 => {
                let sides = state
                    .op
                    .parents
                    .iter()
                    .map(|p| self.op_state(p))
                    .collect::<Result<Vec<_>>>()?;
                Ok(without_parents_of_others(sides))
            }
            _ => Ok(vec![state]),
        }
    }

    /// Reverts the newest operation by writing a new one with the view before it. Undo
    /// again steps further back (an undo is not itself undone; `redo` does that). After
    /// concurrent operations were merged, the newest of them is undone and the others
    /// stay. The folder follows when it is clean; `force` saves it first.
    pub fn undo(&self, wc: &WorkingCopyLock, force: bool) -> Result<(Id, Id)> {
        let head = self.head()?;
        let mut tx = self.store().transaction()?;
        let mut sides = self.stack_state(head.clone(), 0)?;
        let (undone, view) = if let [top] = sides.as_slice() {
            match top.op.parents.as_slice() {
                [p] => (top.id, self.op_state(p)?.view),
                _ => {
                    return Err(VcsError::Refused(
                        "nothing to undo: this is the repository's first operation".into(),
                    ))
                }
            }
        } else {
            // Several concurrent operations: undo the newest of them that changed the view
            // (an ingest batch only recorded results), by merging the others with its own
            // parents: what every other one did is kept.
            sides.sort_by_key(|s| (s.op.end_ms, s.id));
            let mut changed = Vec::with_capacity(sides.len());
            for s in &sides {
                changed.push(!self.events(&s.op)?.iter().all(Event::records_only));
            }
            let pick = changed.iter().rposition(|c| *c).unwrap_or(sides.len() - 1);
            let newest = sides.remove(pick);
            let mut ids: Vec<Id> = sides.iter().map(|s| s.id).collect();
            ids.extend(newest.op.parents.iter().copied());
            ids.sort();
            ids.dedup();
            (newest.id, self.merged_view(&ids, &mut tx)?)
        };
        let op = self.switch_to(
            wc,
            &head,
            view,
            force,
            (
                format!("undo operation {}", undone.short(12)),
                Event::Undo { op: undone },
            ),
            tx,
        )?;
        Ok((undone, op))
    }

    /// Reverts the newest `undo` (the view as it was before it); redo again reverts the
    /// undo before that one. Refused when the last operation that changed the view was
    /// neither an undo nor a redo: a new change ends what can be redone, as in jj.
    /// Returns the reverted undo operation and the new operation.
    pub fn redo(&self, wc: &WorkingCopyLock, force: bool) -> Result<(Id, Id)> {
        let head = self.head()?;
        let nothing = || {
            VcsError::Refused(
                "nothing to redo: the last operation that changed anything was not an undo".into(),
            )
        };
        let top = self.settled(head.clone())?;
        let mut undo = top;
        // After a redo, the next one reverts the undo before the one it reverted.
        while let Some(reverted) = redo_of(&undo.op) {
            let reverted = self.op_state(&reverted)?;
            let [p] = reverted.op.parents.as_slice() else {
                return Err(nothing());
            };
            undo = self.settled(self.op_state(p)?)?;
        }
        if undo_of(&undo.op).is_none() {
            return Err(nothing());
        }
        let [before] = undo.op.parents.as_slice() else {
            return Err(nothing());
        };
        let view = self.op_state(before)?.view;
        let op = self.switch_to(
            wc,
            &head,
            view,
            force,
            (
                format!("redo: revert undo {}", undo.id.short(12)),
                Event::Redo { op: undo.id },
            ),
            self.store().transaction()?,
        )?;
        Ok((undo.id, op))
    }

    /// Moves the repository to `view` (its action root kept: receipts are a ledger, not
    /// state to step back from) with one operation describing it; the folder follows.
    fn switch_to(
        &self,
        wc: &WorkingCopyLock,
        head: &OpState,
        view: View,
        force: bool,
        (description, event): (String, Event),
        tx: Transaction<'_>,
    ) -> Result<Id> {
        let view = View {
            actions: head.view.actions,
            ..view
        };
        let (op, _) = self.switch_view(wc, head, view, force, (&description, vec![event]), tx)?;
        Ok(op)
    }

    /// Restores the whole repository view as it was after operation `target`.
    pub fn op_restore(&self, wc: &WorkingCopyLock, target: &Id, force: bool) -> Result<Id> {
        let head = self.head()?;
        let view = self.op_state(target)?.view;
        self.switch_to(
            wc,
            &head,
            view,
            force,
            (
                format!("restore to operation {}", target.short(12)),
                Event::OpRestored { op: *target },
            ),
            self.store().transaction()?,
        )
    }

    /// Brings `path` (a file or folder) back as it was in commit `source`, in the working
    /// folder, and records it as a new commit (with the rest of the folder as it is).
    /// Uncommitted changes to the path are refused unless `force` (they are saved as a
    /// commit first). The commit is published before the folder changes.
    pub fn restore_path(
        &self,
        wc: &WorkingCopyLock,
        path: &[u8],
        source: &Id,
        force: bool,
    ) -> Result<(Id, Id, Option<Id>)> {
        let start = now_ms();
        let head = self.head()?;
        let clean = crate::path::clean(path)?;
        let src_tree = self.commit(source)?.tree;
        let wanted = self.entries_under(&src_tree, &clean)?;
        let at_tree = self.at_tree(&head.view)?;
        if wanted.is_empty()
            && at_tree.is_none_or(|t| self.lookup_path(&t, &clean).ok().flatten().is_none())
        {
            return Err(VcsError::PathNotFound {
                path: display(&clean).into_owned(),
                rev: source.short(12),
            });
        }
        let mut tx = self.store().transaction()?;
        // The folder as it is now, stored: what the restore commit builds on, what tells
        // whether the path has uncommitted changes (one reading of the folder for both),
        // and what is saved when they are overwritten.
        let snap = self.snapshot(&mut tx, at_tree.as_ref(), &NoProgress)?;
        let dirty: Vec<Change> = self
            .diff_trees_tx(&tx, at_tree.as_ref(), Some(&snap.tree))?
            .into_iter()
            .filter(|c| is_under(&c.path, &clean))
            .collect();
        if !dirty.is_empty() && !force {
            return Err(VcsError::Uncommitted(change_list(&dirty)));
        }
        let mut view = head.view.clone();
        let mut events = vec![Event::PathRestored {
            path: clean.clone(),
            commit: *source,
        }];
        let mut saved = None;
        if !dirty.is_empty() {
            let sig = self.signature(start);
            let commit = Commit {
                tree: snap.tree,
                parents: head.view.at_commit().into_iter().collect(),
                change_id: crate::commit::new_change_id(),
                author: sig.clone(),
                committer: sig,
                message: format!(
                    "uncommitted changes saved before restoring {}",
                    display(&clean)
                )
                .into_bytes(),
                extra_headers: Vec::new(),
                conflicts: Vec::new(),
                git_header: None,
            };
            let id = tx.write_object(Kind::Commit, &commit.encode())?;
            view.heads.push(id);
            events.push(Event::CommitCreated { commit: id });
            saved = Some(id);
        }
        let mut flat: FlatTree = self
            .flatten_tx(&tx, &snap.tree)?
            .into_iter()
            .filter(|(p, _)| !is_under(p, &clean))
            .collect();
        flat.extend(wanted);
        let tree = self.write_flat(&mut tx, &flat)?;
        let mv = self
            .plan_move(
                &tx,
                Some(&snap.tree),
                Some(&tree),
                &snap.unreadable,
                &format!("commit {}", source.short(12)),
            )?
            .with_state(snap.state.map(NewCache::into_state));
        let msg = format!(
            "restore {} from {}",
            if clean.is_empty() {
                "everything".into()
            } else {
                display(&clean)
            },
            source.short(12)
        );
        let (commit, _) =
            self.commit_tree(&mut tx, &mut view, tree, msg.as_bytes(), &mut events, start)?;
        let op = self.publish_and_move(
            wc,
            tx,
            &[head.id],
            view,
            &format!("commit: {msg}"),
            events,
            start,
            mv,
        )?;
        Ok((commit, op, saved))
    }
}

/// The first ten changes, as `status` shows them, for an error.
pub(crate) fn change_list(changes: &[Change]) -> Vec<String> {
    let mut paths: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {}", c.kind.letter(), display(&c.path)))
        .take(10)
        .collect();
    if changes.len() > 10 {
        paths.push(format!("and {} more", changes.len() - 10));
    }
    paths
}

/// The operation `op` undid, if it is an undo.
fn undo_of(op: &Operation) -> Option<Id> {
    inline_event(op, |e| match e {
        Event::Undo { op } => Some(*op),
        _ => None,
    })
}

/// The undo `op` reverted, if it is a redo.
fn redo_of(op: &Operation) -> Option<Id> {
    inline_event(op, |e| match e {
        Event::Redo { op } => Some(*op),
        _ => None,
    })
}

/// The first of `op`'s events `pick` gives a value for, among the events it holds in
/// itself: an undo or redo records one event, so it never has pages.
fn inline_event(op: &Operation, pick: impl FnMut(&Event) -> Option<Id>) -> Option<Id> {
    match &op.events {
        OpEvents::Inline(events) => events.iter().find_map(pick),
        OpEvents::Paged { .. } => None,
    }
}

/// `sides` without those that are a parent of another side: a state already contained in
/// one that follows it.
fn without_parents_of_others(sides: Vec<OpState>) -> Vec<OpState> {
    let parents: HashSet<Id> = sides
        .iter()
        .flat_map(|s| s.op.parents.iter().copied())
        .collect();
    let mut seen = HashSet::new();
    sides
        .into_iter()
        .filter(|s| !parents.contains(&s.id) && seen.insert(s.id))
        .collect()
}
/// The changes from `base` (the flattened tree the folder is compared with) to `flat` (the
/// folder as read), a path that could not be read counting as its recorded version (its
/// content is unknown, never taken as deleted); and those paths.
fn changes_from(
    base: &FlatTree,
    mut flat: FlatTree,
    unreadable: Vec<Skipped>,
) -> (Vec<Change>, Vec<Skipped>) {
    for u in &unreadable {
        for (p, e) in base.iter().filter(|(p, _)| is_under(p, &u.path)) {
            flat.entry(p.clone()).or_insert_with(|| e.clone());
        }
    }
    (diff_flat(base, &flat), unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;

    /// An operation is found by any unique prefix of 4 or more hex digits, in either
    /// case, and `--at` with that prefix means it; too short, not hex and unknown
    /// prefixes are refused with the error of their kind (ambiguity: `prefix`'s tests).
    #[test]
    fn resolve_op_finds_an_operation_by_a_unique_prefix_and_names_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let op = crate::testing::commit_folder(&repo, b"a").op.unwrap();
        let hex = op.to_hex();
        assert_eq!(repo.resolve_op(&hex[..12]).unwrap(), op);
        assert_eq!(repo.resolve_op(&hex[..12].to_uppercase()).unwrap(), op);
        assert_eq!(repo.op_at(&hex[..12]).unwrap().state.id, op);
        assert!(matches!(
            repo.resolve_op(&hex[..3]),
            Err(VcsError::NotAnId { .. })
        ));
        assert!(matches!(
            repo.resolve_op("zzzz"),
            Err(VcsError::NotAnId { .. })
        ));
        // A prefix no operation has: change the first digit of a full id.
        let other = format!(
            "{}{}",
            if hex.starts_with('0') { '1' } else { '0' },
            &hex[1..]
        );
        assert!(matches!(
            repo.resolve_op(&other),
            Err(VcsError::NoSuchId { .. })
        ));
    }
}
