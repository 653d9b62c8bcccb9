//! Pull and clone as every front end runs them: a remote opened by its name in
//! `remotes.toml` (what it was is recorded on first open and checked on every later
//! one), fetched, then the current branch and the folder moved forward to where the
//! remote's newest operation has them.

use std::path::{Path, PathBuf};

use lifeos_store::error::IoContext;
use lifeos_store::fsutil::write_atomic;
use lifeos_store::Id;
use lifeos_vcs::working_copy::moves::WorkingCopyLock;
use lifeos_vcs::Repo;

use crate::places::{self, RemoteSpec, Remotes, REMOTES_DIR};
use crate::{Create, FetchReport, Passphrase, Progress, Remote, RemoteError, Result};

/// Where a passphrase comes from when an encrypted remote is opened (a file, a
/// variable, a prompt: the front end's choice).
pub type PassphraseSource<'a> = &'a dyn Fn() -> Result<Passphrase>;

/// The file, in a remote's folder of the store, naming the operation last pushed there.
const PUSHED_FILE: &str = "pushed";

/// Opens the remote `spec` describes, named `name` in the repository whose store folder
/// is `dot` (its index cache lives there); `create` makes it if it does not exist.
pub fn open_spec(
    dot: &Path,
    name: &str,
    spec: &RemoteSpec,
    create: bool,
    passphrase: PassphraseSource<'_>,
) -> Result<Remote> {
    let mode = match (create, spec.encrypts()) {
        (false, _) => Create::No,
        (true, true) => Create::Encrypted,
        (true, false) => Create::Plain,
    };
    Remote::open(
        places::backend(spec)?,
        mode,
        passphrase,
        Some(dot.join(REMOTES_DIR).join(name).join("index")),
        spec.expect(),
    )
}

/// Opens remote `name` of `repo` (the only one, or `origin`, by default): its name, the
/// remote, and whether the repository reads file contents from it lazily. The first
/// open records in `remotes.toml` what the remote is; every later one is compared with
/// that record ([`RemoteError::Changed`]).
pub fn open_named(
    repo: &Repo,
    name: Option<&str>,
    create: bool,
    passphrase: PassphraseSource<'_>,
) -> Result<(String, Remote, bool)> {
    let mut remotes = Remotes::load(repo.dot_dir())?;
    let (name, spec) = remotes.choose(name)?;
    let remote = open_spec(repo.dot_dir(), &name, spec, create, passphrase)?;
    let lazy = spec.lazy;
    if spec.seen.is_none() {
        if let Some(s) = remotes.remote.get_mut(&name) {
            s.seen = Some(remote.seen().clone());
            remotes.save(repo.dot_dir())?;
        }
    }
    Ok((name, remote, lazy))
}

/// The operation this repository last pushed to remote `name`, if it did.
pub fn last_pushed(repo: &Repo, name: &str) -> Option<Id> {
    let path = repo
        .dot_dir()
        .join(REMOTES_DIR)
        .join(name)
        .join(PUSHED_FILE);
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| Id::from_hex(t.trim()))
}

/// Remembers that `op` was pushed to remote `name`, so that a fetch notices a server
/// that hides it ([`FetchReport::hidden`]).
pub fn remember_pushed(repo: &Repo, name: &str, op: &Id) -> Result<()> {
    let dir = repo.dot_dir().join(REMOTES_DIR).join(name);
    std::fs::create_dir_all(&dir).io("creating", &dir)?;
    write_atomic(
        &dir.join(PUSHED_FILE),
        format!("{}\n", op.to_hex()).as_bytes(),
    )?;
    Ok(())
}

/// Moves `branch` (by default the remote's current branch) forward to where operation
/// `newest` has it, and the folder with it, under `wc`. Returns the commit, if it moved.
pub fn move_to_remote(
    repo: &Repo,
    wc: &WorkingCopyLock,
    newest: Option<Id>,
    branch: Option<String>,
    force: bool,
) -> Result<Option<Id>> {
    let Some(newest) = newest else {
        return Ok(None);
    };
    let theirs = repo.op_state(&newest)?.view;
    let Some(branch) = branch.or(theirs.current_branch.clone()) else {
        return Ok(None);
    };
    let Some(target) = theirs.branch(&branch) else {
        return Ok(None);
    };
    let here = repo.head()?.view;
    if here.current_branch.as_deref() == Some(branch.as_str())
        && here.branch(&branch) == Some(target)
    {
        return Ok(None);
    }
    repo.fast_forward(wc, &branch, target, force)?;
    Ok(Some(target))
}

/// What [`pull`] did.
pub struct Pulled {
    /// What the fetch brought.
    pub report: FetchReport,
    /// The branch the folder is on.
    pub branch: String,
    /// The commit it moved to, if it moved.
    pub moved: Option<Id>,
}

/// Fetches from remote `name` (`remote`, lazily read or not), then moves the current
/// branch and the folder forward, under the working-copy lock `lock` takes once the
/// fetch is done (so a long fetch does not hold up commits). A folder on no branch is
/// refused after the fetch, which is kept ([`RemoteError::NoBranch`]).
pub fn pull(
    repo: &Repo,
    name: &str,
    remote: &Remote,
    lazy: bool,
    force: bool,
    progress: &dyn Progress,
    lock: &dyn Fn() -> Result<WorkingCopyLock>,
) -> Result<Pulled> {
    let report = remote.fetch(repo, name, !lazy, last_pushed(repo, name), progress)?;
    let Some(branch) = repo.head()?.view.current_branch.clone() else {
        return Err(RemoteError::NoBranch);
    };
    let wc = lock()?;
    let moved = move_to_remote(repo, &wc, report.newest_remote, Some(branch.clone()), force)?;
    Ok(Pulled {
        report,
        branch,
        moved,
    })
}

/// The folder a clone of `url` makes in `here`: `dir` if given, else the last part of
/// the URL's path (an S3 prefix's, or its bucket). It must be new or empty.
pub fn clone_target(here: &Path, url: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let default_name = match places::parse_url(url)? {
        places::Url::Dir(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
        places::Url::S3 { bucket, prefix } => prefix
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .or(Some(bucket)),
    }
    .unwrap_or_else(|| "repository".into());
    let target = here.join(dir.map_or_else(|| PathBuf::from(&default_name), Path::to_path_buf));
    let occupied = target.exists()
        && std::fs::read_dir(&target)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true);
    if occupied {
        return Err(RemoteError::NotEmpty(target));
    }
    Ok(target)
}

/// What [`clone`] made.
pub struct Cloned {
    /// The new repository.
    pub repo: Repo,
    /// What the fetch brought.
    pub report: FetchReport,
    /// The remote's current branch.
    pub branch: Option<String>,
    /// The commit the folder was written at (none for a lazy clone, which writes no
    /// files: `checkout` does, reading what it needs).
    pub moved: Option<Id>,
}

/// Clones the remote `spec` describes into `target` (new or empty) as remote `origin`:
/// the remote is opened (and the passphrase checked) before anything is made; then a
/// repository, a fetch of everything (or, with `spec.lazy`, of the history only), and
/// the folder written at the remote's current branch. If any step fails, nothing
/// half-made is left: the folder is removed, or, if it existed, what the clone put in
/// it. `serve` is how a lazy clone reopens its remote when it needs an object.
pub fn clone(
    target: &Path,
    spec: RemoteSpec,
    passphrase: PassphraseSource<'_>,
    progress: &dyn Progress,
    serve: Box<dyn Fn() -> Result<Remote> + Send + Sync>,
) -> Result<Cloned> {
    let remote = open_spec(
        &target.join(lifeos_vcs::layout::DOT_DIR),
        "origin",
        &spec,
        false,
        passphrase,
    )?;
    let created = !target.exists();
    let repo = Repo::init(target, lifeos_store::StoreConfig::default())?;
    match clone_into(&repo, remote, spec, progress, serve) {
        Ok((report, branch, moved)) => Ok(Cloned {
            repo,
            report,
            branch,
            moved,
        }),
        Err(e) => {
            drop(repo);
            let _ = if created {
                std::fs::remove_dir_all(target)
            } else {
                std::fs::remove_dir_all(target.join(lifeos_vcs::layout::DOT_DIR))
            };
            Err(e)
        }
    }
}

/// Fetches into the new repository `repo` and, unless the clone is lazy, writes the
/// folder.
fn clone_into(
    repo: &Repo,
    remote: Remote,
    spec: RemoteSpec,
    progress: &dyn Progress,
    serve: Box<dyn Fn() -> Result<Remote> + Send + Sync>,
) -> Result<(FetchReport, Option<String>, Option<Id>)> {
    let lazy = spec.lazy;
    let mut remotes = Remotes::default();
    let spec = RemoteSpec {
        seen: Some(remote.seen().clone()),
        ..spec
    };
    remotes.remote.insert("origin".into(), spec);
    remotes.save(repo.dot_dir())?;
    let report = remote.fetch(repo, "origin", !lazy, None, progress)?;
    let branch = report
        .newest_remote
        .and_then(|op| repo.op_state(&op).ok())
        .and_then(|s| s.view.current_branch);
    let moved = if lazy {
        crate::serve_lazily(repo, serve);
        None
    } else {
        let wc = repo.lock_working_copy()?;
        move_to_remote(repo, &wc, report.newest_remote, None, false)?
    };
    Ok((report, branch, moved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PushPlan, Quiet};
    use lifeos_vcs::testing::commit_folder;

    fn no_passphrase() -> Result<Passphrase> {
        Ok(Passphrase::default())
    }

    /// Pushes `repo` to its remote `origin`, made on first use.
    fn push(repo: &Repo) {
        let (name, remote, _) = open_named(repo, Some("origin"), true, &no_passphrase).unwrap();
        let r = remote.push(PushPlan::new(repo).unwrap(), &Quiet).unwrap();
        remember_pushed(repo, &name, &repo.head().unwrap().id).unwrap();
        assert!(r.objects > 0);
    }

    /// A clone writes the folder at the remote's branch and records the remote as it
    /// found it; a pull brings the next commit into the folder; a clone into a folder
    /// that holds files, and one from an empty remote, leave nothing behind.
    #[test]
    fn clone_then_pull_bring_the_remote_s_commits_into_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, store_dir, place) = (
            tmp.path().join("src"),
            tmp.path().join("remote"),
            tmp.path().join("here"),
        );
        std::fs::create_dir_all(&place).unwrap();
        let repo = Repo::init(&src, Default::default()).unwrap();
        let spec = RemoteSpec {
            url: store_dir.to_string_lossy().into_owned(),
            endpoint: None,
            region: None,
            encrypt: Some(false),
            lazy: false,
            seen: None,
        };
        let mut remotes = Remotes::default();
        remotes.remote.insert("origin".into(), spec.clone());
        remotes.save(repo.dot_dir()).unwrap();
        std::fs::write(src.join("plan.md"), "first\n").unwrap();
        let first = commit_folder(&repo, b"first").commit.unwrap();
        push(&repo);
        assert_eq!(last_pushed(&repo, "origin"), Some(repo.head().unwrap().id));

        let target = clone_target(&place, &spec.url, None).unwrap();
        assert_eq!(target, place.join("remote"));
        let serve: Box<dyn Fn() -> Result<Remote> + Send + Sync> =
            Box::new(|| Err(RemoteError::Refused("not lazy".into())));
        let cloned = clone(&target, spec.clone(), &no_passphrase, &Quiet, serve).unwrap();
        assert_eq!(
            (cloned.moved, cloned.branch.as_deref()),
            (Some(first), Some("main"))
        );
        assert_eq!(std::fs::read(target.join("plan.md")).unwrap(), b"first\n");
        let kept = Remotes::load(cloned.repo.dot_dir()).unwrap();
        assert!(
            kept.remote["origin"].seen.is_some(),
            "the remote is recorded as first seen"
        );
        assert!(matches!(
            clone_target(&place, &spec.url, None),
            Err(RemoteError::NotEmpty(p)) if p == target
        ));

        std::fs::write(src.join("plan.md"), "second\n").unwrap();
        let second = commit_folder(&repo, b"second").commit.unwrap();
        push(&repo);
        let (name, remote, lazy) = open_named(&cloned.repo, None, false, &no_passphrase).unwrap();
        let lock = || Ok(cloned.repo.lock_working_copy()?);
        let pulled = pull(&cloned.repo, &name, &remote, lazy, false, &Quiet, &lock).unwrap();
        assert_eq!(
            (pulled.branch.as_str(), pulled.moved),
            ("main", Some(second))
        );
        assert_eq!(std::fs::read(target.join("plan.md")).unwrap(), b"second\n");
        let again = pull(&cloned.repo, &name, &remote, lazy, false, &Quiet, &lock).unwrap();
        assert_eq!(again.moved, None, "up to date");

        let empty = RemoteSpec {
            url: tmp.path().join("nothing").to_string_lossy().into_owned(),
            ..spec
        };
        let fresh = place.join("fresh");
        let serve: Box<dyn Fn() -> Result<Remote> + Send + Sync> =
            Box::new(|| Err(RemoteError::Refused("not lazy".into())));
        assert!(clone(&fresh, empty, &no_passphrase, &Quiet, serve).is_err());
        assert!(!fresh.exists(), "a failed clone leaves no folder");
    }
}
