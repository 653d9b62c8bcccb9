//! Where lifeos keeps its store in a folder git also works in: inside `.git`, out of the
//! reach of every git command that writes the work tree.
//!
//! git treats an untracked or ignored path as expendable: `checkout`, `merge` and `pull`
//! overwrite an ignored file with a tracked one and replace an ignored folder with a
//! tracked file or symlink, and `clean -fdx` deletes it. A store at `.lifeos/` in the work
//! tree could therefore be replaced by a branch (its trust file, its config naming a
//! pager, its remotes) or deleted with everything only it holds. git never writes into
//! its own `.git` from a tree (it refuses such trees) and `clean` never touches it, so a
//! folder whose top holds a `.git` folder keeps the store at `.git/lifeos`
//! ([`lifeos_vcs::layout::COLOCATED_DIR`]), as git keeps its own state there
//! (docs/DECISIONS.md, "Colocation").

use std::path::{Path, PathBuf};

use lifeos_vcs::layout::{COLOCATED_DIR, DOT_DIR};
use lifeos_vcs::Repo;

use crate::{GitError, Result};

/// The line an earlier lifeos added to git's `info/exclude` for a store in the work tree.
const OLD_EXCLUDE_LINE: &str = "/.lifeos/";

/// The `.git` folder at the top of `workdir`, if it is a real folder (not a `.git` file
/// of a worktree or submodule, not a symlink).
fn git_folder(workdir: &Path) -> Option<PathBuf> {
    let dir = workdir.join(".git");
    dir.symlink_metadata()
        .is_ok_and(|m| m.is_dir())
        .then_some(dir)
}

/// Where a store moved, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Where it was.
    pub from: PathBuf,
    /// Where it is now.
    pub to: PathBuf,
}

/// Moves `repo`'s store into `.git/lifeos` if its folder's top holds a `.git` folder and
/// the store is elsewhere (at `.lifeos`, where an earlier lifeos kept it). Refuses a store
/// that git tracks. Returns the repository at its store's place, and the move if one was
/// made.
pub fn store_into_git(repo: Repo) -> Result<(Repo, Option<Moved>)> {
    let Some(git_dir) = git_folder(repo.workdir()) else {
        return Ok((repo, None));
    };
    let to = git_dir.join(COLOCATED_DIR);
    if repo.dot_dir() == to {
        return Ok((repo, None));
    }
    refuse_tracked(repo.workdir(), repo.dot_dir())?;
    let from = repo.dot_dir().to_path_buf();
    let repo = repo.move_store(&to)?;
    forget_old_exclude(&git_dir)?;
    Ok((repo, Some(Moved { from, to })))
}

/// Before a command: the store of the repository at `start` is settled where it must be.
/// One that an earlier lifeos kept at `.lifeos` beside a `.git` folder moves into
/// `.git/lifeos`; a `.lifeos` that a git repository around it tracks (it came from a git
/// checkout, not from `lifeos init`) is refused, so its config, trust and remotes are
/// never used.
pub fn settle(start: &Path) -> Result<Option<Moved>> {
    let Some((workdir, dot)) = lifeos_vcs::layout::locate(start) else {
        return Ok(None);
    };
    if dot != workdir.join(DOT_DIR) {
        return Ok(None);
    }
    if git_folder(&workdir).is_none() {
        return refuse_tracked(&workdir, &dot).map(|()| None);
    }
    let repo = Repo::discover(&workdir)?;
    Ok(store_into_git(repo)?.1)
}

/// Refuses the store `dot` of the repository at `workdir` if a git repository whose work
/// tree holds it tracks any path of it.
fn refuse_tracked(workdir: &Path, dot: &Path) -> Result<()> {
    // The nearest folder at or above the repository with a `.git` (folder or file).
    let Some(top) = workdir
        .ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
    else {
        return Ok(());
    };
    let Ok(git) = gix::open(top) else {
        // Not a repository git could use either.
        return Ok(());
    };
    let index = git
        .index_or_empty()
        .map_err(crate::gix_err("reading git's index"))?;
    let rel = dot.strip_prefix(top).unwrap_or(dot);
    let rel = rel.as_os_str().as_encoded_bytes();
    let tracked = index.entries().iter().find(|e| {
        let p: &[u8] = e.path(&index);
        p == rel || (p.starts_with(rel) && p.get(rel.len()) == Some(&b'/'))
    });
    match tracked {
        None => Ok(()),
        Some(e) => Err(GitError::Colocation {
            reason: format!(
                "{} is tracked by the git repository at {} ({} is in git's index): it came from a git checkout, not from `lifeos init`, so lifeos will not use its config, trust or remotes; remove it from git (`git rm -r --cached {}`) and check who committed it",
                dot.display(),
                top.display(),
                String::from_utf8_lossy(e.path(&index)),
                String::from_utf8_lossy(rel),
            ),
        }),
    }
}

/// Removes the `/.lifeos/` line an earlier lifeos added to git's `info/exclude`: with the
/// store inside `.git`, a `.lifeos` in the work tree is no longer lifeos's, and git shows
/// it like any other file.
fn forget_old_exclude(git_dir: &Path) -> Result<()> {
    let path = git_dir.join("info").join("exclude");
    let Ok(old) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    if !old.lines().any(|l| l == OLD_EXCLUDE_LINE) {
        return Ok(());
    }
    let kept: String = old
        .lines()
        .filter(|l| *l != OLD_EXCLUDE_LINE)
        .map(|l| format!("{l}\n"))
        .collect();
    lifeos_store::fsutil::write_atomic(&path, kept.as_bytes())?;
    Ok(())
}
