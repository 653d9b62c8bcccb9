//! Moving the folder to another commit: checkout, restoring one path, and the switch of
//! view that records the move before the folder changes.

use super::*;

impl Repo {
    /// Stores the folder as a commit that is not on any branch (so that content about to be
    /// replaced stays recoverable); returns the commit, its tree and the refreshed stat
    /// cache (`None`: the saved one stands).
    pub(crate) fn save_folder(
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

/// What to switch the folder to.
#[derive(Debug, Clone)]
pub enum Target {
    /// A branch (the folder follows it).
    Branch(String),
    /// A commit, detached from any branch.
    Commit(Id),
}
