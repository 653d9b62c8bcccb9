//! The working folder: scanning it (with ignore rules), the stat cache that lets
//! unchanged files be recognised without reading them, snapshotting it into a tree,
//! writing trees into it, moving it from one tree to another safely, and asking the folder
//! monitor what changed.
//!
//! - [`types`]: what every part below shares (stat cache entries, scans, snapshots).
//! - [`walk`]: the scan of the folder, with ignore files.
//! - [`stat_cache`]: the stat cache's file (FORMAT 9.1).
//! - [`snapshot`]: the folder as a tree, reading only what the cache does not vouch for.
//! - [`snapshot_edits`]: trees edited by path, and partial snapshots.
//! - [`restore`]: trees written into a folder, never through a symlink.
//! - [`moves`]: the lock, and moving the folder between trees (check, publish, move,
//!   with a journal that the next command finishes).
//! - [`fsmonitor`]: the client of `lifeos watch`'s folder monitor.

pub mod fsmonitor;
pub mod moves;
pub mod restore;
pub mod snapshot;
pub(crate) mod snapshot_edits;
pub mod stat_cache;
pub mod types;
pub(crate) mod walk;

pub use moves::{MoveJournal, MoveReport, WorkingCopyLock, MOVE_FILE, WC_LOCK_FILE};
pub use snapshot::Snapshot;
pub use types::*;
pub use walk::{scan, scan_within};
