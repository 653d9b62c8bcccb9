//! Writing action records (FORMAT 7.12) under the actions lock: the lock that makes "run
//! exactly once" hold, the state read under it, and publishing records as one operation.
//! The record format and how concurrent records merge is the object format
//! ([`lifeos_vcs::object::action`]).

use lifeos_store::{Id, Kind, Transaction};
use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::merkle_map::MerkleMap;
use lifeos_vcs::object::action::{stored_record, ActionRecord};
use lifeos_vcs::object::{Event, View};
use lifeos_vcs::repo::{now_ms, OpState, Repo};

/// The exclusive lock every writer of action records holds from reading the action's
/// state to publishing what it decided (`.lifeos/actions.lock`). Transactions share the
/// repository lock (concurrent operations are merged), so this lock is what makes "run
/// exactly once" hold: a second process sees the first one's start record.
pub struct ActionsLock {
    _file: std::fs::File,
}

/// Takes the actions lock, waiting for another holder to finish.
pub fn lock(repo: &Repo) -> Result<ActionsLock> {
    let path = repo.dot_dir().join("actions.lock");
    let file = lifeos_store::fsutil::open_lock_file(&path)?;
    file.lock().map_err(|source| lifeos_store::StoreError::Io {
        action: "locking",
        path: path.clone(),
        source,
    })?;
    Ok(ActionsLock { _file: file })
}

/// The current state, read while the actions lock is held: the single operation head,
/// or all heads merged (the merged view's objects written into `tx`). Every action
/// record published before the lock was taken is in it, and none can be published
/// until it is released, so a decision made on this view (run an action exactly once)
/// holds.
pub fn locked_head(
    repo: &Repo,
    _lock: &ActionsLock,
    tx: &mut Transaction<'_>,
) -> Result<(Vec<Id>, View)> {
    let heads = repo.op_heads()?;
    if let [one] = heads.as_slice() {
        let OpState { view, .. } = repo.op_state(one)?;
        return Ok((heads, view));
    }
    let view = repo.merged_view(&heads, tx)?;
    Ok((heads, view))
}

/// The newest record of action `action` in `view`.
pub fn newest(tx: &Transaction<'_>, view: &View, action: &str) -> Result<Option<Id>> {
    match view.actions {
        Some(root) => MerkleMap(root).get(tx, action.as_bytes()),
        None => Ok(None),
    }
}

/// Every action in `view` with its newest record.
pub fn all(repo: &Repo, view: &View) -> Result<Vec<(String, Id)>> {
    let Some(root) = view.actions else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(String, Id)> = MerkleMap(root)
        .entries(repo.store())?
        .into_iter()
        .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
        .collect();
    out.sort();
    Ok(out)
}

/// An action's records, newest first.
pub fn chain(repo: &Repo, newest: &Id) -> Result<Vec<(Id, ActionRecord)>> {
    let mut out = Vec::new();
    let mut next = Some(*newest);
    while let Some(id) = next {
        let rec = stored_record(repo, &id)?;
        next = rec.prev;
        out.push((id, rec));
        if out.len() > 100_000 {
            return Err(VcsError::Inconsistent(format!(
                "the records of action {} do not end",
                out[0].1.action
            )));
        }
    }
    Ok(out)
}

/// Who records things from this process (`user@host`).
pub fn actor_name(repo: &Repo) -> String {
    format!("{}@{}", repo.actor.name, repo.actor.host)
}

/// Writes `records` (each already chained to its action's newest record in `view`)
/// into `tx`, points `view`'s action root at them and publishes one operation with
/// parents `parents`; `files` are stored files the records name (captured output).
pub fn publish(
    repo: &Repo,
    mut tx: Transaction<'_>,
    parents: &[Id],
    mut view: View,
    records: &[ActionRecord],
    files: Vec<Id>,
    description: &str,
) -> Result<(Id, Vec<Id>)> {
    let start = now_ms();
    let mut ids = Vec::with_capacity(records.len());
    let mut edits = Vec::with_capacity(records.len());
    let mut events = Vec::with_capacity(records.len() + 1);
    for r in records {
        let id = tx.write_object(Kind::Action, &r.encode())?;
        ids.push(id);
        edits.retain(|(k, _): &(Vec<u8>, Option<Id>)| k != r.action.as_bytes());
        edits.push((r.action.as_bytes().to_vec(), Some(id)));
        events.push(Event::ActionRecorded {
            action: r.action.clone(),
            record: id,
        });
    }
    if !files.is_empty() {
        events.push(Event::FilesStored { files });
    }
    let root = match view.actions {
        Some(r) => MerkleMap(r).apply(&mut tx, &edits)?.0,
        None => MerkleMap::build(&mut tx, &edits)?,
    };
    view.actions = Some(root.0);
    let op = repo.publish(tx, parents, view, description, events, start)?;
    Ok((op, ids))
}
