//! Recording the working folder as a commit.

use lifeos_store::{Id, Kind};

use crate::error::Result;
use crate::object::{Commit, Event};
use crate::repo::{now_ms, Repo};
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
}

/// Random bytes for a new change id.
pub fn new_change_id() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b
}

impl Repo {
    /// Snapshots the working folder and, if it differs from its parent commit (or
    /// `allow_empty`), records it as a new commit on the current branch.
    pub fn commit_working_copy(
        &self,
        message: &[u8],
        allow_empty: bool,
        progress: &dyn SnapshotProgress,
    ) -> Result<CommitOutcome> {
        let start = now_ms();
        let head = self.head()?;
        let mut tx = self.store().transaction()?;
        let snapshot = self.snapshot(&mut tx, progress)?;
        let branch = head.view.current_branch.clone();
        let parent = match &branch {
            Some(b) => head.view.branch(b),
            None => head.view.wc_commit,
        };
        let parent_tree = parent
            .map(|p| self.commit(&p).map(|c| c.tree))
            .transpose()?;
        if parent_tree == Some(snapshot.tree) && !allow_empty {
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
            });
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
        };
        let id = tx.write_object(Kind::Commit, &commit.encode())?;
        let mut view = head.view.clone();
        view.heads.retain(|h| Some(*h) != parent);
        view.heads.push(id);
        view.heads.sort();
        view.wc_commit = Some(id);
        let mut events = vec![Event::CommitCreated { commit: id }];
        if let Some(b) = &branch {
            view.set_branch(b, Some(id));
            events.push(Event::BranchMoved {
                name: b.clone(),
                from: parent,
                to: Some(id),
            });
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
        })
    }
}
