//! Operations that came from another device (through a remote): merging them into this
//! repository's operation log without moving the folder, and moving the folder to what
//! they brought when asked (`pull`, `clone`).

use std::collections::HashSet;

use lifeos_store::{Id, Transaction};

use crate::error::Result;
use crate::object::Event;
use crate::repo::{now_ms, Repo};
use crate::working_copy::moves::WorkingCopyLock;
use crate::VcsError;

impl Repo {
    /// Every operation `heads` descend from, and the heads themselves.
    pub fn op_ancestry(&self, heads: &[Id]) -> Result<HashSet<Id>> {
        let mut seen = HashSet::new();
        let mut todo = heads.to_vec();
        while let Some(op) = todo.pop() {
            if seen.insert(op) {
                todo.extend(self.operation(&op)?.parents);
            }
        }
        Ok(seen)
    }

    /// Merges operations `fetched` (stored, with everything they reach, and not in this
    /// repository's history) into the operation log as one operation whose parents are
    /// the current operation and them (see [`crate::repo::merge_views`]). Where the folder
    /// is does not change: the current branch keeps its target and the working-copy
    /// commit stays, so what another device recorded on the current branch is a head
    /// beside it until `pull` moves the folder. (A current branch with no commit here
    /// yet takes the other device's target, and the folder is left on no branch.) `tx` is the transaction the operation is
    /// written in; the objects fetched must already be committed.
    pub fn merge_fetched(
        &self,
        mut tx: Transaction<'_>,
        fetched: &[Id],
        description: &str,
    ) -> Result<Id> {
        let start = now_ms();
        let head = self.head()?;
        let mut ops = vec![head.id];
        ops.extend(fetched.iter().filter(|f| **f != head.id));
        let mut view = self.merged_view(&ops, &mut tx)?;
        view.current_branch = head.view.current_branch.clone();
        view.wc_commit = head.view.wc_commit;
        if let Some(b) = &head.view.current_branch {
            match head.view.branch(b) {
                Some(ours) => {
                    if let Some(theirs) = view.branch(b) {
                        view.heads.push(theirs);
                    }
                    view.set_branch(b, Some(ours));
                }
                // A branch this repository has not started yet (a new clone): the other
                // device's stays, and the folder, which has nothing recorded, is on no
                // branch until it is moved there.
                None => view.current_branch = None,
            }
        }
        self.publish(
            tx,
            &ops,
            view,
            description,
            vec![Event::OperationsMerged],
            start,
        )
    }

    /// The newest of `ops` (by when it ended, then id).
    pub fn newest_op(&self, ops: &[Id]) -> Result<Option<Id>> {
        let mut best = None;
        for op in ops {
            let end = self.operation(op)?.end_ms;
            if best.is_none_or(|(e, id)| (end, *op) > (e, id)) {
                best = Some((end, *op));
            }
        }
        Ok(best.map(|(_, id)| id))
    }

    /// Makes branch `branch` point at `target` and current, and moves the folder there
    /// (as `checkout` does: uncommitted changes are refused unless `force` saves them as
    /// a commit first). The branch must be unset, or an ancestor of `target`: what it
    /// had is never dropped. Returns the operation and the commit of saved changes.
    pub fn fast_forward(
        &self,
        wc: &WorkingCopyLock,
        branch: &str,
        target: Id,
        force: bool,
    ) -> Result<(Id, Option<Id>)> {
        let head = self.head()?;
        let mut view = head.view.clone();
        if let Some(ours) = view.branch(branch) {
            // Ours is an ancestor of the target exactly when the walk from ours meets
            // the target's ancestors at once.
            if self.merge_base(&target, &ours)? != Some(ours) {
                return Err(VcsError::Diverged {
                    branch: branch.to_string(),
                    ours,
                    theirs: target,
                });
            }
        }
        let from = view.branch(branch);
        view.current_branch = Some(branch.to_string());
        view.set_branch(branch, Some(target));
        view.heads.retain(|h| Some(*h) != from);
        view.heads.push(target);
        view.wc_commit = Some(target);
        self.switch_view(
            wc,
            &head,
            view,
            force,
            (
                &format!("fast-forward {branch}"),
                vec![
                    Event::BranchMoved {
                        name: branch.to_string(),
                        from,
                        to: Some(target),
                    },
                    Event::CheckedOut { commit: target },
                ],
            ),
            self.store().transaction()?,
        )
    }
}
