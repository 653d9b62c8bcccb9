//! lifeos's bridge to git: [`import`] brings every ref of a git repository into lifeos
//! history in one operation, keeping what git hashed (raw commit headers, raw trees where
//! git's canonical form would differ, annotated tags); [`export`] writes it back with the
//! same SHA-1s. Objects are read and written with gix.

pub mod colocate;
pub mod export;
pub mod filter;
pub mod form;
pub mod hooks;
pub mod import;
mod pack;
pub mod remote;

pub use export::{export, rebuild_map, ExportReport};
pub use import::{import, ImportReport};

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
    Decode(#[from] lifeos_store::enc::DecodeError),
    /// The lifeos history failed.
    #[error(transparent)]
    Vcs(#[from] lifeos_vcs::VcsError),
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
