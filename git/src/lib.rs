//! lifeos's bridge to git: [`import`] brings every ref of a git repository into lifeos
//! history in one operation, keeping what git hashed (raw commit headers, raw trees where
//! git's canonical form would differ, annotated tags); [`export`] writes it back with the
//! same SHA-1s. Objects are read and written with gix.

pub mod colocate;
pub mod export;
pub mod filter;
pub mod hooks;
pub mod import;
pub mod objects;
mod pack;
pub mod pointer;
pub mod reindex;
pub mod remote;
mod repo;
pub mod store_home;

pub use export::{export, ExportReport};
pub use import::{import, ImportReport};
pub use reindex::{rebuild_map, reindex, Reindexed};

/// What went wrong talking to git.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The git repository could not be opened or created.
    #[error("cannot open the git repository at {path}: {reason}")]
    Open {
        /// Where.
        path: String,
        /// Why.
        reason: String,
    },
    /// A git object is missing, corrupt or malformed.
    #[error("git object {oid} {reason}; nothing was imported")]
    Object {
        /// Its SHA-1.
        oid: String,
        /// What is wrong.
        reason: String,
    },
    /// A commit's tree holds an entry lifeos never writes into a folder (a name a file
    /// system reads as `.git` or `.lifeos`, a symlinked `.gitmodules`): the whole import
    /// or export is refused, as git refuses to check such a tree out.
    #[error("commit {commit} has {path}, which {reason}; {outcome}")]
    Reserved {
        /// The commit (a git SHA-1 on import, a lifeos id on export), once known.
        commit: String,
        /// What was not done.
        outcome: &'static str,
        /// The entry's path in the commit's tree.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// A colocated folder cannot be kept in step with git.
    #[error("{reason}")]
    Colocation {
        /// What is wrong, and what to do.
        reason: String,
    },
    /// Running the `git` program failed (missing, too old, or the command failed).
    #[error("{reason}")]
    Program {
        /// What failed, and what to do.
        reason: String,
    },
    /// Installing or removing hooks failed.
    #[error("git hooks: {reason}")]
    Hooks {
        /// What failed.
        reason: String,
    },
    /// git's `lifeos` filter failed: its protocol broke, or it cannot be installed.
    #[error("git filter: {reason}")]
    Filter {
        /// What failed.
        reason: String,
    },
    /// A ref name git refuses.
    #[error("ref {name} cannot be written to git: {reason}")]
    RefName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Writing a git object failed.
    #[error("writing git object {0}")]
    Write(String),
    /// Another git operation failed.
    #[error("git: {what}: {reason}")]
    Git {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// The lifeos store failed.
    #[error(transparent)]
    Store(#[from] lifeos_store::StoreError),
    /// A lifeos object did not decode.
    #[error(transparent)]
    Decode(#[from] lifeos_store::codec::DecodeError),
    /// The lifeos history failed.
    #[error(transparent)]
    Vcs(#[from] lifeos_vcs::VcsError),
}

/// What an import refused with [`GitError::Reserved`] says was not done.
pub(crate) const NOT_IMPORTED: &str =
    "lifeos keeps none of its history (git itself refuses to check out such a tree)";
/// What an export refused with [`GitError::Reserved`] says was not done.
pub(crate) const NOT_EXPORTED: &str =
    "nothing was exported: git refuses such a tree; restore the commit without that path and export again";

impl GitError {
    /// A refusal of an entry named `name` (a tree's own entry) for `why`.
    pub(crate) fn reserved(
        name: &[u8],
        why: lifeos_vcs::guard::Refusal,
        outcome: &'static str,
    ) -> GitError {
        GitError::Reserved {
            commit: String::new(),
            outcome,
            path: lifeos_vcs::path::display(name).into_owned(),
            reason: why.reason().into(),
        }
    }

    /// This error, seen from the folder `name` holding what it names.
    pub(crate) fn below(self, name: &[u8]) -> GitError {
        match self {
            GitError::Reserved {
                commit,
                outcome,
                path,
                reason,
            } => GitError::Reserved {
                commit,
                outcome,
                path: format!("{}/{path}", lifeos_vcs::path::display(name)),
                reason,
            },
            other => other,
        }
    }

    /// This error, naming commit `commit` (a refusal found in its tree).
    pub(crate) fn in_commit(self, commit: String) -> GitError {
        match self {
            GitError::Reserved {
                outcome,
                path,
                reason,
                ..
            } => GitError::Reserved {
                commit,
                outcome,
                path,
                reason,
            },
            other => other,
        }
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, GitError>;

/// Maps a gix error to [`GitError::Git`] with what was being done.
fn gix_err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> GitError {
    move |e| GitError::Git {
        what,
        reason: e.to_string(),
    }
}
