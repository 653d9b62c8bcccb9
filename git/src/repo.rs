//! Opening a git repository and reading its object ids: the leaf every other module of
//! this crate stands on.

use std::path::Path;

use gix::ObjectId;

use crate::{GitError, Result};

/// Opens the git repository at `path`.
pub(crate) fn open_git(path: &Path) -> Result<gix::Repository> {
    gix::open(path).map_err(|e| GitError::Open {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// A SHA-1 as the git map keys it.
pub(crate) fn sha1_bytes(oid: &ObjectId) -> [u8; 20] {
    oid.as_bytes().try_into().expect("a SHA-1 is 20 bytes")
}
