//! The typed events an operation records (FORMAT 7.5).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::Id;

use super::codec::{read_ids, read_opt_id, write_ids, write_opt_id};

/// A typed event recorded by an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The repository was created.
    RepoInitialized,
    /// A commit was made.
    CommitCreated {
        /// The new commit.
        commit: Id,
    },
    /// A branch was created, moved or deleted.
    BranchMoved {
        /// Branch name.
        name: String,
        /// Old target.
        from: Option<Id>,
        /// New target.
        to: Option<Id>,
    },
    /// A tag was created, moved or deleted.
    TagMoved {
        /// Tag name.
        name: String,
        /// Old target.
        from: Option<Id>,
        /// New target.
        to: Option<Id>,
    },
    /// The working folder was switched to a commit.
    CheckedOut {
        /// The commit.
        commit: Id,
    },
    /// Paths were restored from a commit.
    PathRestored {
        /// The path restored (empty for everything; bytes).
        path: crate::path::BString,
        /// The commit it came from.
        commit: Id,
    },
    /// Several concurrent operations were merged.
    OperationsMerged,
    /// An operation was undone.
    Undo {
        /// The undone operation.
        op: Id,
    },
    /// An undo was reverted: the view is again as it was before it.
    Redo {
        /// The undo operation reverted.
        op: Id,
    },
    /// The view of an earlier operation was restored.
    OpRestored {
        /// The operation whose view was restored.
        op: Id,
    },
    /// A commit was rewritten (same change, new content or message).
    CommitRewritten {
        /// The old commit.
        from: Id,
        /// The new commit.
        to: Id,
    },
    /// Content was extracted from files for search (ingest results).
    ContentExtracted {
        /// The [`Extract`] objects written.
        results: Vec<Id>,
    },
    /// Files were stored without a tree naming them (the content of files git's `lifeos`
    /// filter cleaned); the operation keeps them reachable.
    FilesStored {
        /// The files (their content ids).
        files: Vec<Id>,
    },
    /// History was imported from a git repository.
    GitImported {
        /// The repository (its path, bytes).
        source: crate::path::BString,
        /// How many commits were new.
        commits: u64,
    },
    /// An entity was recorded for the first time (or again after it was removed).
    EntityCreated {
        /// The entity's id.
        id: String,
        /// The entity object.
        entity: Id,
    },
    /// An entity's attributes changed.
    EntityChanged {
        /// The entity's id.
        id: String,
        /// The attributes set, changed or removed, sorted.
        paths: Vec<String>,
        /// The entity object before.
        from: Id,
        /// The entity object after.
        to: Id,
    },
    /// A link from an entity was added (`linked`) or removed.
    EntityLinked {
        /// The entity the link is from.
        id: String,
        /// The relation.
        rel: String,
        /// The entity the link is to.
        target: String,
        /// Whether the link was added (else removed).
        linked: bool,
        /// The entity object after.
        entity: Id,
    },
    /// An entity was removed.
    EntityRemoved {
        /// The entity's id.
        id: String,
        /// Its last object.
        entity: Id,
    },
    /// A record of an automation's action was written ([`crate::action`]).
    ActionRecorded {
        /// The action's id.
        action: String,
        /// The record.
        record: Id,
    },
}

impl Event {
    /// The event's type name, as in `op log --json` (`commit.created`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::RepoInitialized => "repo.initialized",
            Event::CommitCreated { .. } => "commit.created",
            Event::BranchMoved { .. } => "branch.moved",
            Event::TagMoved { .. } => "tag.moved",
            Event::CheckedOut { .. } => "working_copy.checked_out",
            Event::PathRestored { .. } => "path.restored",
            Event::OperationsMerged => "operations.merged",
            Event::Undo { .. } => "operation.undone",
            Event::Redo { .. } => "operation.redone",
            Event::OpRestored { .. } => "operation.restored",
            Event::CommitRewritten { .. } => "commit.rewritten",
            Event::ContentExtracted { .. } => "content.extracted",
            Event::GitImported { .. } => "git.imported",
            Event::FilesStored { .. } => "files.stored",
            Event::EntityCreated { .. } => "entity.created",
            Event::EntityChanged { .. } => "entity.changed",
            Event::EntityLinked { linked: true, .. } => "entity.linked",
            Event::EntityLinked { linked: false, .. } => "entity.unlinked",
            Event::EntityRemoved { .. } => "entity.removed",
            Event::ActionRecorded { .. } => "action.recorded",
        }
    }

    /// Whether the event only records objects beside the view (ingest results, files
    /// stored for git's filter): `undo` steps over operations made of such events.
    pub fn records_only(&self) -> bool {
        matches!(
            self,
            Event::ContentExtracted { .. }
                | Event::FilesStored { .. }
                | Event::ActionRecorded { .. }
        )
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        match self {
            Event::RepoInitialized => {
                w.u8(1);
            }
            Event::CommitCreated { commit } => {
                w.u8(2).id(commit);
            }
            Event::BranchMoved { name, from, to } | Event::TagMoved { name, from, to } => {
                w.u8(if matches!(self, Event::BranchMoved { .. }) {
                    3
                } else {
                    4
                })
                .bytes(name.as_bytes());
                write_opt_id(w, from);
                write_opt_id(w, to);
            }
            Event::CheckedOut { commit } => {
                w.u8(5).id(commit);
            }
            Event::PathRestored { path, commit } => {
                w.u8(6).bytes(path).id(commit);
            }
            Event::OperationsMerged => {
                w.u8(7);
            }
            Event::Undo { op } => {
                w.u8(8).id(op);
            }
            Event::OpRestored { op } => {
                w.u8(9).id(op);
            }
            Event::Redo { op } => {
                w.u8(19).id(op);
            }
            Event::CommitRewritten { from, to } => {
                w.u8(10).id(from).id(to);
            }
            Event::ContentExtracted { results } => {
                w.u8(11);
                write_ids(w, results);
            }
            Event::GitImported { source, commits } => {
                w.u8(12).bytes(source).uint(*commits);
            }
            Event::FilesStored { files } => {
                w.u8(13);
                write_ids(w, files);
            }
            Event::EntityCreated { id, entity } => {
                w.u8(14).bytes(id.as_bytes()).id(entity);
            }
            Event::EntityChanged {
                id,
                paths,
                from,
                to,
            } => {
                w.u8(15).bytes(id.as_bytes()).uint(paths.len() as u64);
                for p in paths {
                    w.bytes(p.as_bytes());
                }
                w.id(from).id(to);
            }
            Event::EntityLinked {
                id,
                rel,
                target,
                linked,
                entity,
            } => {
                w.u8(16)
                    .bytes(id.as_bytes())
                    .bytes(rel.as_bytes())
                    .bytes(target.as_bytes())
                    .u8(u8::from(*linked))
                    .id(entity);
            }
            Event::EntityRemoved { id, entity } => {
                w.u8(17).bytes(id.as_bytes()).id(entity);
            }
            Event::ActionRecorded { action, record } => {
                w.u8(18).bytes(action.as_bytes()).id(record);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Event, DecodeError> {
        const W: &str = "operation event";
        Ok(match r.u8(W)? {
            1 => Event::RepoInitialized,
            2 => Event::CommitCreated { commit: r.id(W)? },
            t @ (3 | 4) => {
                let name = r.str(W)?.to_string();
                let from = read_opt_id(r, W)?;
                let to = read_opt_id(r, W)?;
                if t == 3 {
                    Event::BranchMoved { name, from, to }
                } else {
                    Event::TagMoved { name, from, to }
                }
            }
            5 => Event::CheckedOut { commit: r.id(W)? },
            6 => Event::PathRestored {
                path: r.bytes(W)?.into(),
                commit: r.id(W)?,
            },
            7 => Event::OperationsMerged,
            8 => Event::Undo { op: r.id(W)? },
            9 => Event::OpRestored { op: r.id(W)? },
            19 => Event::Redo { op: r.id(W)? },
            10 => Event::CommitRewritten {
                from: r.id(W)?,
                to: r.id(W)?,
            },
            11 => Event::ContentExtracted {
                results: read_ids(r, W)?,
            },
            12 => Event::GitImported {
                source: r.bytes(W)?.into(),
                commits: r.uint(W)?,
            },
            13 => Event::FilesStored {
                files: read_ids(r, W)?,
            },
            14 => Event::EntityCreated {
                id: r.str(W)?.to_string(),
                entity: r.id(W)?,
            },
            15 => {
                let id = r.str(W)?.to_string();
                let n = r.count(W)?;
                let mut paths = Vec::with_capacity(n);
                for _ in 0..n {
                    paths.push(r.str(W)?.to_string());
                }
                Event::EntityChanged {
                    id,
                    paths,
                    from: r.id(W)?,
                    to: r.id(W)?,
                }
            }
            16 => Event::EntityLinked {
                id: r.str(W)?.to_string(),
                rel: r.str(W)?.to_string(),
                target: r.str(W)?.to_string(),
                linked: match r.u8(W)? {
                    0 => false,
                    1 => true,
                    x => return Err(DecodeError::new(W, format!("bad link flag {x}"))),
                },
                entity: r.id(W)?,
            },
            17 => Event::EntityRemoved {
                id: r.str(W)?.to_string(),
                entity: r.id(W)?,
            },
            18 => Event::ActionRecorded {
                action: r.str(W)?.to_string(),
                record: r.id(W)?,
            },
            t => {
                return Err(DecodeError::new(
                    W,
                    format!("unknown event type {t} (written by a newer lifeos?)"),
                ))
            }
        })
    }
}
