//! Typed errors of the history layer.

use std::path::PathBuf;

use lifeos_store::codec::DecodeError;
use lifeos_store::{Id, StoreError};

/// Everything that can go wrong in lifeos-vcs.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    /// From the store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An object did not decode.
    #[error("{kind} {id} cannot be decoded: {source}")]
    Decode {
        /// What it should have been.
        kind: &'static str,
        /// The object.
        id: Id,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// No repository found.
    #[error("no lifeos repository at {0} or any folder above it")]
    NotARepository(PathBuf),
    /// A repository already exists.
    #[error("a lifeos repository already exists at {0}")]
    AlreadyInitialized(PathBuf),
    /// An I/O error on a named path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A revision did not resolve.
    #[error("revision {rev:?} not found{}", suggest(.candidates))]
    UnknownRevision {
        /// What the user typed.
        rev: String,
        /// Names that are close.
        candidates: Vec<String>,
    },
    /// An id prefix (of a commit, an operation, an action, a receipt) matches several.
    #[error("{} {prefix:?} is ambiguous; it matches: {}", .kind.noun(), .candidates.join(", "))]
    AmbiguousId {
        /// What kind of id.
        kind: IdKind,
        /// What the user typed.
        prefix: String,
        /// What it matches.
        candidates: Vec<String>,
    },
    /// No id of this kind starts with the prefix.
    #[error("no {} id starts with {prefix:?}; `{}` lists them", .kind.noun(), .kind.lister())]
    NoSuchId {
        /// What kind of id.
        kind: IdKind,
        /// What the user typed.
        prefix: String,
    },
    /// Text that cannot be the start of an id of this kind.
    #[error("{text:?} is not {} id (4 or more hex digits)", .kind.a_noun())]
    NotAnId {
        /// What kind of id.
        kind: IdKind,
        /// What the user typed.
        text: String,
    },
    /// A revision written as git or jj write it ([`crate::rev::lifeos_spelling`]).
    #[error("{rev:?} is git's or jj's way to write a revision; lifeos writes it {lifeos}")]
    ForeignRevision {
        /// What the user typed.
        rev: String,
        /// The same revision in lifeos's spelling.
        lifeos: String,
    },
    /// A revision expression did not parse.
    #[error("cannot parse revision {rev:?}: {reason} (at column {column})")]
    BadRevision {
        /// The expression.
        rev: String,
        /// 1-based column of the bad token.
        column: usize,
        /// Why.
        reason: String,
    },
    /// The branch has no commit yet.
    #[error("{0} has no commits yet")]
    NoCommits(String),
    /// A path is not in a tree.
    #[error("{path} does not exist in {rev}")]
    PathNotFound {
        /// The path.
        path: String,
        /// The revision.
        rev: String,
    },
    /// A path names a directory or symlink where a file was needed, or similar.
    #[error("{path} is a {found}, not a {expected}")]
    NotAFile {
        /// The path.
        path: String,
        /// What it is.
        found: &'static str,
        /// What was needed.
        expected: &'static str,
    },
    /// Restoring would write outside the target or through a link.
    #[error("refusing to write {path}: {reason}")]
    UnsafePath {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A tree holds an entry lifeos never writes into a folder: a name a file system
    /// reads as `.git` or `.lifeos`, a symlinked `.gitmodules`, a symlink leading outside
    /// the folder or into those folders (docs/SECURITY.md).
    #[error("{path} in {origin} {why}")]
    RefusedEntry {
        /// The path in the tree.
        path: String,
        /// Where the tree comes from (`commit 3f9c2a1b2c3d`).
        origin: String,
        /// Why it is refused.
        why: crate::guard::Refusal,
    },
    /// Something not made by lifeos stands where a file or folder must go: a file where a
    /// folder is needed, or a folder where a file is.
    #[error("cannot write {path}: {what} is in the way")]
    Obstructed {
        /// The path being written.
        path: String,
        /// What is in the way, and what it is.
        what: String,
    },
    /// The restore target has files in it.
    #[error("{0} is not empty; restore into a new or empty folder")]
    TargetNotEmpty(PathBuf),
    /// A path given by the user is not usable.
    #[error("bad path {path:?}: {reason}")]
    BadPath {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The catalog (an index, rebuilt by `lifeos reindex`) failed.
    #[error("catalog {path}: {reason}")]
    Catalog {
        /// The catalog file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A time given with `--at` could not be used.
    #[error("{0}")]
    BadTime(String),
    /// The working folder has changes that an operation would overwrite.
    #[error("the working folder has uncommitted changes: {}", .0.join(", "))]
    Uncommitted(Vec<String>),
    /// An operation is not possible in the current state.
    #[error("{0}")]
    Refused(String),
    /// A branch cannot be moved forward to another device's commit: each side has
    /// commits the other lacks.
    #[error("branch {branch} has diverged: it is at {} here and at {} on the remote", .ours.short(12), .theirs.short(12))]
    Diverged {
        /// The branch.
        branch: String,
        /// Its commit here.
        ours: Id,
        /// The other device's commit.
        theirs: Id,
    },
    /// Files the user asked to record could not be read; nothing was recorded.
    #[error("cannot read {}; nothing was recorded", .0.join(", "))]
    Unreadable(Vec<String>),
    /// Changing the working folder would overwrite or remove something lifeos has not
    /// recorded (an ignored or unreadable file, a folder with such files in it).
    #[error("the working folder was left unchanged: {path} {reason}")]
    InTheWay {
        /// The path, as shown to people.
        path: String,
        /// What is in the way.
        reason: String,
    },
    /// A walk was stopped before it ended, because the command it served failed
    /// otherwise (see [`Repo::reachable_from_until`](crate::Repo::reachable_from_until)).
    #[error("the walk of the history was stopped before it ended")]
    Stopped,
    /// The command was interrupted (Ctrl-C) while it changed the working folder.
    #[error("interrupted while changing the working folder")]
    Interrupted,
    /// The operation was recorded but the working folder could not be fully moved to it;
    /// the next command that uses the folder finishes the move.
    #[error(
        "operation {op} is recorded, but the working folder was only partly updated: {source}"
    )]
    MoveUnfinished {
        /// The operation (short id).
        op: String,
        /// What stopped the move.
        #[source]
        source: Box<VcsError>,
    },
    /// The repository's history objects are inconsistent.
    #[error("repository is inconsistent: {0}")]
    Inconsistent(String),
}

fn suggest(c: &[String]) -> String {
    if c.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", c.join(", "))
    }
}

/// Result alias.
pub type Result<T, E = VcsError> = std::result::Result<T, E>;

pub(crate) trait IoContext<T> {
    fn io(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| VcsError::Io {
            action,
            path: path.into(),
            source,
        })
    }
}

impl VcsError {
    /// Whether the root cause is a full disk.
    pub fn is_disk_full(&self) -> bool {
        match self {
            VcsError::Store(e) => e.is_disk_full(),
            VcsError::Io { source, .. } => matches!(source.raw_os_error(), Some(28) | Some(122)),
            _ => false,
        }
    }
}

/// What kind of id a prefix names: the noun in errors and the command that lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A commit, by a prefix of its commit or change id.
    Revision,
    /// An operation of the operation log.
    Operation,
    /// An automation's action.
    Action,
    /// An action's receipt.
    Receipt,
}

impl IdKind {
    /// The noun errors use.
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Revision => "revision",
            IdKind::Operation => "operation",
            IdKind::Action => "action",
            IdKind::Receipt => "receipt",
        }
    }

    /// The noun with its article.
    pub fn a_noun(self) -> &'static str {
        match self {
            IdKind::Revision => "a revision",
            IdKind::Operation => "an operation",
            IdKind::Action => "an action",
            IdKind::Receipt => "a receipt",
        }
    }

    /// The command that lists the ids of this kind.
    pub fn lister(self) -> &'static str {
        match self {
            IdKind::Revision => "lifeos log",
            IdKind::Operation => "lifeos op log",
            IdKind::Action => "lifeos actions --all",
            IdKind::Receipt => "lifeos receipts",
        }
    }
}
