//! History operations: status, branches and tags, checkout, describe, undo, op restore,
//! restoring paths, and reading the repository as of any moment (`--at`).

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::moment::{parse_when, When};
use crate::object::{Commit, Conflict, EntryKind, Event, OpEvents, Operation, TreeEntry, View};
use crate::path::{display, in_folder, is_under, BString};
use crate::prefix::IdKind;
use crate::repo::{now_ms, OpState, Repo};
use crate::treediff::{diff_flat, Change, ChangeKind, FlatTree};
use crate::working_copy::fsmonitor::{skipped_outside, SideFile, Watched};
use crate::working_copy::moves::WorkingCopyLock;
use crate::working_copy::snapshot::{submodule_folder_present, untrusted, Untrusted};
use crate::working_copy::stat_cache::{NewCache, StatCache};
use crate::working_copy::{
    scan, scan_within, CacheEntry, NoProgress, Scan, ScanEntry, Skipped, WcState,
};

mod at;
mod checkout;
mod refs;
mod rewrite;
mod status;
mod undo;

pub use at::OpAsOf;
pub use checkout::Target;
pub use refs::valid_ref_name;
pub(crate) use rewrite::change_list;
pub use status::{FolderRead, Status};

impl View {
    /// `@`: the current branch's commit, or the detached working-copy commit.
    pub fn at_commit(&self) -> Option<Id> {
        match &self.current_branch {
            Some(b) => self.branch(b),
            None => self.wc_commit,
        }
    }
}
