//! Recording the working folder as a commit.

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::object::{Commit, Event, Tree, View};
use crate::path::{display, BString};
use crate::repo::{now_ms, Repo};
use crate::working_copy::moves::WorkingCopyLock;
use crate::working_copy::{Snapshot, SnapshotProgress};

/// What `commit` did.
#[derive(Debug)]
pub struct CommitOutcome {
    /// The new commit, or `None` when nothing changed.
    pub commit: Option<Id>,
    /// The operation that recorded it.
    pub op: Option<Id>,
    /// The parent commit.
    pub parent: Option<Id>,
    /// The branch moved, if any.
    pub branch: Option<String>,
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Merge conflicts still unresolved in the new commit.
    pub conflicts: Vec<BString>,
    /// What the commit hooks said of the recorded files without stopping the commit.
    pub notes: Vec<HookNote>,
}

/// The bytes of files a transaction wrote that the store cannot read back before it is
/// committed (file chunks go straight to its packs), by file id.
pub type Unstored<'a> = std::collections::HashMap<Id, &'a [u8]>;

/// What a commit recorded, as its hooks see it inside its transaction.
pub struct Recorded<'r> {
    /// The tree of the commit's parent, if it has one.
    pub parent_tree: Option<&'r Id>,
    /// The commit's tree.
    pub tree: &'r Id,
    /// The commit.
    pub commit: &'r Id,
    /// The files the commit read from the folder: (path, file id, size).
    pub read: &'r [(BString, Id, u64)],
    /// Files the transaction wrote that the store cannot read back yet.
    pub unstored: &'r Unstored<'r>,
}

/// Something a hook says of a recorded file that did not stop the commit (a card that
/// did not become an entity, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookNote {
    /// The file.
    pub path: BString,
    /// Its line (1-based; 0: the whole file).
    pub line: u64,
    /// What happened.
    pub text: String,
}

/// What a hook added to a commit's operation.
#[derive(Debug, Default)]
pub struct HookReport {
    /// Events for the commit's operation.
    pub events: Vec<Event>,
    /// What it says of the recorded files.
    pub notes: Vec<HookNote>,
}

/// Work a commit does inside its transaction, after its commit object is written and
/// before its operation is published: what the commit means beyond the history (the
/// entities its files hold, the search index of its small changes). A hook changes the
/// view the operation will publish and returns its events; an error refuses the whole
/// commit, so a hook that can fail alone reports a note instead.
///
/// The repository runs the hooks installed on it ([`Repo::add_commit_hook`]) on every
/// commit it records, then the one a caller passes in [`CommitOptions::hook`].
pub trait CommitHook: Send + Sync {
    /// Runs on one recorded commit.
    fn recorded(
        &self,
        repo: &Repo,
        tx: &mut Transaction<'_>,
        view: &mut View,
        rec: &Recorded<'_>,
    ) -> Result<HookReport>;
}

/// How to record the working folder.
#[derive(Default)]
pub struct CommitOptions<'a> {
    /// The commit message.
    pub message: &'a [u8],
    /// Record a commit even if nothing changed.
    pub allow_empty: bool,
    /// Record the rest when some files cannot be read; they keep their last recorded
    /// version (new ones are left out). Without it such a commit is refused.
    pub allow_unreadable: bool,
    /// Run after the repository's own hooks, inside the transaction, before publishing
    /// (the commit pipeline indexes small changes this way).
    pub hook: Option<&'a dyn CommitHook>,
    /// Record only these paths (files or folders, clean repository paths); the rest of
    /// the folder stays as `@` has it, uncommitted. Empty: everything.
    pub paths: &'a [BString],
    /// Rewrite `@` instead of adding a commit on top of it: the same parents and change
    /// id, the folder's content, and `message` (or `@`'s when it is empty). Descendants
    /// are rebased onto it, as `describe` does.
    pub amend: bool,
}

/// Random bytes for a new change id. A build with the `testing` feature reads
/// `LIFEOS_RANDOMNESS_SEED` (any string) instead and derives the ids from it and a count
/// kept in the process, so that a test that sets the seed for each command gets the same
/// change ids, and the same screens, on every run; any other build ignores it.
pub fn new_change_id() -> [u8; 16] {
    let mut b = [0u8; 16];
    #[cfg(feature = "testing")]
    if let Ok(seed) = std::env::var("LIFEOS_RANDOMNESS_SEED") {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut h = blake3::Hasher::new_derive_key("lifeos 2026 test change id");
        h.update(seed.as_bytes());
        h.update(&n.to_le_bytes());
        b.copy_from_slice(&h.finalize().as_bytes()[..16]);
        return b;
    }
    getrandom::fill(&mut b).expect("the OS random source is available");
    b
}

impl Repo {
    /// Snapshots the working folder and, if it differs from `@` (or `allow_empty`),
    /// records it as a new commit on the current branch. A file that cannot be read is
    /// never recorded as deleted: the commit is refused ([`VcsError::Unreadable`]) unless
    /// `allow_unreadable`, which keeps its last recorded version.
    pub fn commit_working_copy(
        &self,
        _wc: &WorkingCopyLock,
        opts: &CommitOptions<'_>,
        progress: &dyn SnapshotProgress,
    ) -> Result<CommitOutcome> {
        let start = now_ms();
        let head = self.head()?;
        let mut tx = self.store().transaction()?;
        let mut view = head.view.clone();
        let parent = view.at_commit();
        let parent_tree = self.at_tree(&view)?;
        let snapshot = self.snapshot(&mut tx, parent_tree.as_ref(), progress)?;
        if !snapshot.unreadable.is_empty() && !opts.allow_unreadable {
            return Err(VcsError::Unreadable(
                snapshot
                    .unreadable
                    .iter()
                    .map(|u| {
                        let p = if u.path.is_empty() {
                            "part of the folder".into()
                        } else {
                            display(&u.path)
                        };
                        format!("{p} ({})", u.reason)
                    })
                    .collect(),
            ));
        }
        let branch = view.current_branch.clone();
        let tree = if opts.paths.is_empty() {
            snapshot.tree
        } else {
            self.partial_tree(&mut tx, parent_tree.as_ref(), &snapshot.tree, opts.paths)?
        };
        let unstored = Unstored::new();
        let hooks = |tx: &mut Transaction<'_>, view: &mut View, id: &Id| {
            let rec = Recorded {
                parent_tree: parent_tree.as_ref(),
                tree: &tree,
                commit: id,
                read: &snapshot.read,
                unstored: &unstored,
            };
            self.run_commit_hooks(tx, view, &rec, opts.hook)
        };
        if opts.amend {
            let old = parent.ok_or_else(|| {
                VcsError::Refused("nothing to amend: there is no commit at @ yet".into())
            })?;
            let mut commit = self.commit(&old)?;
            // A conflict stays while its path is as the merge left it.
            let mut conflicts = Vec::new();
            for c in &commit.conflicts {
                let before = self.lookup_path(&commit.tree, &c.path)?;
                let after = self.lookup_path_tx(&tx, &tree, &c.path)?;
                if before.map(|e| e.id) == after.map(|e| e.id) {
                    conflicts.push(c.clone());
                }
            }
            commit.tree = tree;
            commit.conflicts = conflicts;
            if !opts.message.is_empty() {
                commit.message = opts.message.to_vec();
            }
            commit.committer = self.signature(start);
            commit.git_header = None;
            let (id, mut view, mut events) = self.rewrite(&mut tx, &head.view, old, &commit)?;
            let report = hooks(&mut tx, &mut view, &id)?;
            events.extend(report.events);
            let op = self.publish(
                tx,
                &[head.id],
                view,
                &format!("amend {}: {}", old.short(12), commit.summary()),
                events,
                start,
            )?;
            self.save_snapshot_state(&snapshot, &tree)?;
            return Ok(CommitOutcome {
                commit: Some(id),
                op: Some(op),
                parent: commit.parents.first().copied(),
                branch,
                snapshot,
                conflicts: commit.conflicts.iter().map(|c| c.path.clone()).collect(),
                notes: report.notes,
            });
        }
        if parent_tree == Some(tree) && !opts.allow_empty {
            drop(tx);
            if snapshot.state_changed || snapshot.monitor.is_some() {
                self.save_snapshot_state(&snapshot, &tree)?;
            }
            return Ok(CommitOutcome {
                commit: None,
                op: None,
                parent,
                branch,
                snapshot,
                conflicts: Vec::new(),
                notes: Vec::new(),
            });
        }
        let mut events = Vec::new();
        let (id, commit) =
            self.commit_tree(&mut tx, &mut view, tree, opts.message, &mut events, start)?;
        let report = hooks(&mut tx, &mut view, &id)?;
        events.extend(report.events);
        let op = self.publish(
            tx,
            &[head.id],
            view,
            &format!("commit: {}", commit.summary()),
            events,
            start,
        )?;
        self.save_snapshot_state(&snapshot, &tree)?;
        Ok(CommitOutcome {
            commit: Some(id),
            op: Some(op),
            parent,
            branch,
            snapshot,
            conflicts: commit.conflicts.iter().map(|c| c.path.clone()).collect(),
            notes: report.notes,
        })
    }

    /// The tree of `parent` with `paths` (files or folders) as the folder's snapshot `snap`
    /// has them: what a commit of only those paths records. A path that names nothing in
    /// either is an error.
    fn partial_tree(
        &self,
        tx: &mut Transaction<'_>,
        parent: Option<&Id>,
        snap: &Id,
        paths: &[BString],
    ) -> Result<Id> {
        let chosen = |p: &[u8]| paths.iter().any(|q| crate::path::is_under(p, q));
        let before = match parent {
            Some(t) => self.flatten_tx(tx, t)?,
            None => crate::treediff::FlatTree::new(),
        };
        let now = self.flatten_tx(tx, snap)?;
        if let Some(q) = paths.iter().find(|q| {
            !before
                .keys()
                .chain(now.keys())
                .any(|p| crate::path::is_under(p, q))
        }) {
            return Err(VcsError::PathNotFound {
                path: display(q).into_owned(),
                rev: "@ or the folder".into(),
            });
        }
        let mut flat: crate::treediff::FlatTree =
            before.into_iter().filter(|(p, _)| !chosen(p)).collect();
        flat.extend(now.into_iter().filter(|(p, _)| chosen(p)));
        self.write_flat(tx, &flat)
    }

    /// Writes a commit of `tree` on top of `view`'s `@` and moves the view to it: the
    /// current branch (or the detached working-copy commit) follows, and the events say
    /// so. Conflicts of the parent carry over for paths the new tree leaves as the merge
    /// wrote them; changing such a path resolves it. Returns the commit and its id.
    pub(crate) fn commit_tree(
        &self,
        tx: &mut Transaction<'_>,
        view: &mut View,
        tree: Id,
        message: &[u8],
        events: &mut Vec<Event>,
        start: i64,
    ) -> Result<(Id, Commit)> {
        let parent = view.at_commit();
        let mut conflicts = Vec::new();
        if let Some(pc) = parent.map(|p| self.commit_tx(tx, &p)).transpose()? {
            for c in &pc.conflicts {
                let before = self.lookup_path_tx(tx, &pc.tree, &c.path)?;
                let after = self.lookup_path_tx(tx, &tree, &c.path)?;
                if before.map(|e| e.id) == after.map(|e| e.id) {
                    conflicts.push(c.clone());
                }
            }
        }
        let sig = self.signature(start);
        let commit = Commit {
            tree,
            parents: parent.into_iter().collect(),
            change_id: new_change_id(),
            author: sig.clone(),
            committer: sig,
            message: message.to_vec(),
            extra_headers: Vec::new(),
            conflicts,
            git_header: None,
        };
        let id = tx.write_object(Kind::Commit, &commit.encode())?;
        view.heads.retain(|h| Some(*h) != parent);
        view.heads.push(id);
        view.wc_commit = Some(id);
        events.insert(0, Event::CommitCreated { commit: id });
        if let Some(b) = view.current_branch.clone() {
            view.set_branch(&b, Some(id));
            events.push(Event::BranchMoved {
                name: b,
                from: parent,
                to: Some(id),
            });
        }
        Ok((id, commit))
    }

    /// Runs the repository's commit hooks, then `extra`, on a recorded commit.
    pub(crate) fn run_commit_hooks(
        &self,
        tx: &mut Transaction<'_>,
        view: &mut View,
        rec: &Recorded<'_>,
        extra: Option<&dyn CommitHook>,
    ) -> Result<HookReport> {
        let mut report = HookReport::default();
        for hook in self.commit_hooks().chain(extra) {
            let r = hook.recorded(self, tx, view, rec)?;
            report.events.extend(r.events);
            report.notes.extend(r.notes);
        }
        Ok(report)
    }

    /// Reads a commit written by `tx` or already stored.
    pub(crate) fn commit_tx(&self, tx: &Transaction<'_>, id: &Id) -> Result<Commit> {
        let raw = tx.read_object(id, Kind::Commit)?;
        crate::repo::decoded(&raw, id, Kind::Commit, Commit::decode)
    }

    /// Reads a tree written by `tx` or already stored.
    pub(crate) fn tree_tx(&self, tx: &Transaction<'_>, id: &Id) -> Result<Tree> {
        let raw = tx.read_object(id, Kind::Tree)?;
        crate::repo::decoded(&raw, id, Kind::Tree, Tree::decode)
    }

    /// Like [`Repo::lookup_path`], reading trees written by `tx` too.
    pub fn lookup_path_tx(
        &self,
        tx: &Transaction<'_>,
        root: &Id,
        path: &[u8],
    ) -> Result<Option<crate::object::TreeEntry>> {
        crate::repo::walk_path(root, path, |id| self.tree_tx(tx, id))
    }
}
