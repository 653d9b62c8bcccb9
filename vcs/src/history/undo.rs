//! Undo, redo and op restore: a new operation whose view is an earlier one's, the folder
//! moved with it.

use super::*;

impl Repo {
    /// Steps back over operations that left the view as it was (ingest results, files
    /// stored for git's filter): they are not what a person means to undo or redo.
    pub(crate) fn settled(&self, mut top: OpState) -> Result<OpState> {
        while let [p] = top.op.parents.as_slice() {
            let parent = self.op_state(p)?;
            if !parent.view.same_apart_from_action_records(&top.view)
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
    pub(crate) fn stack_state(&self, state: OpState, depth: usize) -> Result<Vec<OpState>> {
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
    pub(crate) fn switch_to(
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
