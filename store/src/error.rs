//! Typed errors of the store. Each names the object, pack or file it concerns.

use std::path::PathBuf;

use crate::codec::DecodeError;
use crate::id::Id;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O error on a named file.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "writing", ...).
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No `.lifeos` repository where one was expected.
    #[error("no lifeos repository at {0}")]
    NotARepository(PathBuf),
    /// A repository already exists.
    #[error("a lifeos repository already exists at {0}")]
    AlreadyExists(PathBuf),
    /// The repository config could not be read.
    #[error("repository config {path}: {reason}")]
    BadConfig {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An object or chunk is not in any pack.
    #[error("object {0} is missing from the store")]
    Missing(Id),
    /// A fetch of missing objects was stopped when asked to; nothing of it was kept.
    #[error("the fetch of missing objects was stopped before it ended")]
    Stopped,
    /// A remote key this interface refuses (it could leave the remote's place, or is
    /// not one lifeos writes).
    #[error("remote key {key:?} is refused: {reason}")]
    BadRemoteKey {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A remote could not be reached or answered with an error.
    #[error("remote {location}: {reason}")]
    Remote {
        /// Where the remote is.
        location: String,
        /// What failed.
        reason: String,
    },
    /// A remote holds a file larger than any such file lifeos writes: read no further.
    #[error("remote {location}: {key} is larger than the {max} bytes such a file can be; the remote may be damaged or hostile, and nothing of it was used")]
    RemoteTooLarge {
        /// Where the remote is.
        location: String,
        /// The file.
        key: String,
        /// The most bytes it can hold.
        max: u64,
    },
    /// A pack named by the index does not exist.
    #[error("pack {pack} is missing (it should hold object {id})")]
    PackMissing {
        /// The pack name.
        pack: String,
        /// The object that was looked up.
        id: Id,
    },
    /// Stored bytes do not hash to their id, or do not decompress.
    #[error("object {id} in pack {pack} is corrupt: {reason}")]
    Corrupt {
        /// The object.
        id: Id,
        /// The pack it was read from.
        pack: String,
        /// What check failed.
        reason: String,
    },
    /// A pack or index file is damaged as a whole (bad header, truncated, bad checksum).
    #[error("{file} is damaged: {reason}")]
    DamagedFile {
        /// The pack or index file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An object exists but is not of the expected kind.
    #[error("object {id} is a {found}, expected a {expected}")]
    WrongKind {
        /// The object.
        id: Id,
        /// Its kind.
        found: &'static str,
        /// The kind the caller needed.
        expected: &'static str,
    },
    /// An object's encoding could not be decoded.
    #[error("object {id} cannot be decoded: {source}")]
    Decode {
        /// The object.
        id: Id,
        /// The decode failure.
        #[source]
        source: DecodeError,
    },
    /// A file changed on disk while it was being read, more times than lifeos retries.
    #[error("{0} kept changing while it was being read")]
    Unstable(PathBuf),
    /// The pack writer of a snapshot stopped (its own error is reported instead).
    #[error("the pack writer stopped")]
    PipelineStopped,
    /// An object is too large for the pack format.
    #[error("object of {0} bytes is too large for a pack entry")]
    TooLarge(u64),
}

/// Result alias for the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Adds the file path to an I/O error.
pub trait IoContext<T> {
    /// The error as a [`StoreError::Io`] saying what was being done to which file.
    fn io(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| StoreError::Io {
            action,
            path: path.into(),
            source,
        })
    }
}

impl StoreError {
    /// Whether this is a full disk (ENOSPC or EDQUOT) anywhere in the chain.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => matches!(source.raw_os_error(), Some(28) | Some(122)),
            _ => false,
        }
    }
}
