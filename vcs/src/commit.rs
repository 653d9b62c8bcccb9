//! Recording the working folder as a commit.

use lifeos_store::{Id, Kind, Transaction};

use crate::error::Result;
use crate::object::{Commit, Event, View};
use crate::repo::{now_ms, OpState, Repo};
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
    pub conflicts: Vec<String>,
}

/// Work done on the files a commit read, inside its transaction, before it is published;
/// returns events for the commit's operation.
pub type CommitHook<'a> =
    dyn Fn(&mut Transaction<'_>, &[(String, Id, u64)]) -> Result<Vec<Event>> + 'a;

/// Random bytes for a new change id.
pub fn new_change_id() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b
}

impl Repo {
    /// Snapshots the working folder and, if it differs from `@` (or `allow_empty`),
    /// records it as a new commit on the current branch.
    pub fn commit_working_copy(
        &self,
        message: &[u8],
        allow_empty: bool,
        progress: &dyn SnapshotProgress,
    ) -> Result<CommitOutcome> {
        self.commit_working_copy_with(message, allow_empty, progress, None)
    }

    /// Like [`Repo::commit_working_copy`], running `hook` on the files read before the
    /// commit is published; the events it returns are recorded by the same operation
    /// (the CLI uses it to index small changes as they are committed).
    pub fn commit_working_copy_with(
        &self,
        message: &[u8],
        allow_empty: bool,
        progress: &dyn SnapshotProgress,
        hook: Option<&CommitHook<'_>>,
    ) -> Result<CommitOutcome> {
        let start = now_ms();
        let head = self.head()?;
        let tx = self.store().transaction()?;
        let view = head.view.clone();
        self.record_with(
            tx,
            &head,
            view,
            message,
            allow_empty,
            progress,
            Vec::new(),
            start,
            hook,
        )
    }

    /// Snapshots the folder into `tx` and publishes a commit on top of `view`'s `@`, with
    /// `events` added to the operation. Conflicts of the parent carry over for paths the
    /// new commit leaves as the merge wrote them; changing such a path resolves it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &self,
        tx: Transaction<'_>,
        head: &OpState,
        view: View,
        message: &[u8],
        allow_empty: bool,
        progress: &dyn SnapshotProgress,
        events: Vec<Event>,
        start: i64,
    ) -> Result<CommitOutcome> {
        self.record_with(
            tx,
            head,
            view,
            message,
            allow_empty,
            progress,
            events,
            start,
            None,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn record_with(
        &self,
        mut tx: Transaction<'_>,
        head: &OpState,
        mut view: View,
        message: &[u8],
        allow_empty: bool,
        progress: &dyn SnapshotProgress,
        mut events: Vec<Event>,
        start: i64,
        hook: Option<&CommitHook<'_>>,
    ) -> Result<CommitOutcome> {
        let snapshot = self.snapshot(&mut tx, progress)?;
        let branch = view.current_branch.clone();
        let parent = view.at_commit();
        let parent_commit = parent.map(|p| self.commit(&p)).transpose()?;
        if parent_commit.as_ref().map(|c| c.tree) == Some(snapshot.tree) && !allow_empty {
            drop(tx);
            if snapshot.state_changed {
                self.save_wc_state(&snapshot.state)?;
            }
            return Ok(CommitOutcome {
                commit: None,
                op: None,
                parent,
                branch,
                snapshot,
                conflicts: Vec::new(),
            });
        }
        let mut conflicts = Vec::new();
        if let Some(pc) = &parent_commit {
            for c in &pc.conflicts {
                let before = self.lookup_path(&pc.tree, &c.path)?;
                let after = self.lookup_path_tx(&tx, &snapshot.tree, &c.path)?;
                if before.map(|e| e.id) == after.map(|e| e.id) {
                    conflicts.push(c.clone());
                }
            }
        }
        let sig = self.signature(start);
        let commit = Commit {
            tree: snapshot.tree,
            parents: parent.into_iter().collect(),
            change_id: new_change_id(),
            author: sig.clone(),
            committer: sig,
            message: message.to_vec(),
            extra_headers: Vec::new(),
            conflicts,
        };
        let id = tx.write_object(Kind::Commit, &commit.encode())?;
        view.heads.retain(|h| Some(*h) != parent);
        view.heads.push(id);
        view.wc_commit = Some(id);
        events.insert(0, Event::CommitCreated { commit: id });
        if let Some(b) = &branch {
            view.set_branch(b, Some(id));
            events.push(Event::BranchMoved {
                name: b.clone(),
                from: parent,
                to: Some(id),
            });
        }
        if let Some(h) = hook {
            events.extend(h(&mut tx, &snapshot.read)?);
        }
        let summary = commit.summary();
        let op = self.publish(
            tx,
            &[head.id],
            view,
            &format!("commit: {summary}"),
            events,
            start,
        )?;
        self.save_wc_state(&snapshot.state)?;
        Ok(CommitOutcome {
            commit: Some(id),
            op: Some(op),
            parent,
            branch,
            snapshot,
            conflicts: commit.conflicts.iter().map(|c| c.path.clone()).collect(),
        })
    }

    /// Like [`Repo::lookup_path`], reading trees written by `tx` too.
    pub(crate) fn lookup_path_tx(
        &self,
        tx: &Transaction<'_>,
        root: &Id,
        path: &str,
    ) -> Result<Option<crate::object::TreeEntry>> {
        crate::repo::walk_path(root, path, |id| {
            let raw = tx.read_object(id, Kind::Tree)?;
            crate::object::Tree::decode(&raw).map_err(|source| crate::VcsError::Decode {
                kind: "tree",
                id: *id,
                source,
            })
        })
    }
}
