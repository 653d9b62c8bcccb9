//! What several history verbs print: commits, signatures and changes as JSON, and the
//! errors they share.

use std::collections::HashMap;

use lifeos_store::Id;
use lifeos_vcs::object::{change_id_str, Signature};
use lifeos_vcs::path::display;
use lifeos_vcs::treediff::Change;
use lifeos_vcs::Commit;
use serde_json::{json, Value};

use crate::error::CliError;

fn sig_json(s: &Signature) -> Value {
    json!({"name": s.name, "email": s.email, "time": s.time, "tz_offset_min": s.tz_offset_min})
}

/// A commit as `lifeos.log.v1` and `lifeos.show.v1` have it, with the refs at it.
pub(crate) fn commit_json(id: &Id, c: &Commit, refs: &HashMap<Id, Vec<String>>) -> Value {
    json!({
        "commit": id.to_hex(),
        "change_id": change_id_str(&c.change_id),
        "parents": c.parents.iter().map(|p| p.to_hex()).collect::<Vec<_>>(),
        "tree": c.tree.to_hex(),
        "author": sig_json(&c.author),
        "committer": sig_json(&c.committer),
        "message": String::from_utf8_lossy(&c.message),
        "refs": refs.get(id).cloned().unwrap_or_default(),
        "conflicts": c.conflicts.iter().map(|k| display(&k.path)).collect::<Vec<_>>(),
    })
}

/// A changed path as `show` and `status` print it in JSON.
pub(crate) fn change_json(c: &Change) -> Value {
    json!({
        "path": display(&c.path),
        "status": c.kind.name(),
        "old": c.old.as_ref().map(|e| json!({"id": e.id.to_hex(), "kind": e.kind.name(), "size": e.size})),
        "new": c.new.as_ref().map(|e| json!({"id": e.id.to_hex(), "kind": e.kind.name(), "size": e.size})),
    })
}

/// The error for a branch or tag `name` that does not exist, naming the ones that do.
pub(crate) fn unknown_ref(refs: &[(String, Id)], name: &str, what: &str) -> CliError {
    let names: Vec<&str> = refs.iter().map(|(n, _)| n.as_str()).collect();
    let hint = if names.is_empty() {
        format!("there are no {what}es yet")
    } else {
        format!("existing: {}", names.join(", "))
    };
    CliError::new(format!("no {what} named {name:?}")).hint(hint)
}

/// `e`, with a hint to commit or `--force` when the folder has uncommitted changes.
pub(crate) fn uncommitted_hint(e: lifeos_vcs::VcsError) -> CliError {
    let is_uncommitted = matches!(e, lifeos_vcs::VcsError::Uncommitted(_));
    let err = CliError::from(e);
    if is_uncommitted {
        err.hint("commit them first (`lifeos commit -m ...`), or pass --force to save them as a commit and go ahead")
    } else {
        err
    }
}
