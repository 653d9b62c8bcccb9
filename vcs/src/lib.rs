//! lifeos-vcs: the history layer of lifeos.
//!
//! Trees, commits, operations and views are immutable objects in the store; the operation
//! log is the history of the repository, and its heads are published lock-free (one file
//! per head) after everything they refer to is durable. The working folder is recorded
//! through a stat cache so unchanged files are never read again.

#![warn(missing_docs)]

pub mod bulk_commit;
pub mod commit;
pub mod error;
pub mod guard;
pub mod history;
pub mod incoming;
pub mod interrupt;
pub mod layout;
pub mod maintenance;
pub mod merge;
pub mod merkle_map;
pub mod moment;
pub mod object;
pub mod op_index;
pub mod path;
pub mod prefix;
pub mod redact;
pub mod renames;
pub mod repo;
pub mod rev;
pub mod revset;
pub mod settings;
#[doc(hidden)]
pub mod testing;
pub mod treediff;
pub mod working_copy;

pub use error::{Result, VcsError};
pub use object::{Commit, EntryKind, Event, Operation, Tree, TreeEntry, View};
pub use repo::{OpState, Repo};
