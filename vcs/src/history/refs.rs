//! Branches and tags: set, move, rename, delete, and the commits that changed a path.

use super::*;

impl Repo {
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
        type ParentAndEntry = (Option<Id>, Option<TreeEntry>);
        let entry_at = |id: &Id| -> Result<ParentAndEntry> {
            let c = self.commit(id)?;
            Ok((c.parents.first().copied(), self.lookup_path(&c.tree, path)?))
        };
        let mut kept = Vec::new();
        let mut next: Option<(Id, ParentAndEntry)> = None;
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
