//! Rewriting history: a commit described anew, its descendants rebased onto it.

use super::*;

impl Repo {
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
