//! What every verb runs in: the folder it was started in, the styling of its output, the
//! repository (opened once, on first use, with the hooks and indexes the library leaves to
//! its front end), and the helpers verbs share: reading a revision or a moment, a file in
//! one, and taking the folder to record it.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::path::display;
use lifeos_vcs::working_copy::moves::WorkingCopyLock;
use lifeos_vcs::Repo;

use crate::error::{CliError, CliResult};
use crate::output::{local_time, Style};
use crate::AsOfArg;

/// What a verb runs in ([`crate::verb::Verb::run`]).
pub(crate) struct Context {
    here: PathBuf,
    style: Style,
    repo: OnceCell<Repo>,
}

impl Context {
    /// A context for a command started in `here` (after `-C`).
    pub(crate) fn new(here: PathBuf, style: Style) -> Context {
        Context {
            here,
            style,
            repo: OnceCell::new(),
        }
    }

    /// The folder the command runs in.
    pub(crate) fn here(&self) -> &Path {
        &self.here
    }

    /// How stdout is styled.
    pub(crate) fn style(&self) -> Style {
        self.style
    }

    /// The repository the folder is in, opened on first use.
    pub(crate) fn repo(&self) -> CliResult<&Repo> {
        if let Some(repo) = self.repo.get() {
            return Ok(repo);
        }
        let repo = open(&self.here)?;
        Ok(self.repo.get_or_init(|| repo))
    }
}

/// The folder the command runs in: the current one, or `-C DIR` from it.
pub(crate) fn cwd(cli_dir: &Option<PathBuf>) -> CliResult<PathBuf> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(match cli_dir {
        Some(d) => here.join(d),
        None => here,
    })
}

/// Opens the repository around `dir` as every front end does ([`lifeos_app::open`]), cut
/// short by Ctrl-C, with a lazy clone's remote ready and the store's warnings said.
fn open(dir: &Path) -> CliResult<Repo> {
    let mut repo = lifeos_app::open(dir)?;
    repo.interrupt = crate::signals::interrupt();
    crate::remote_util::serve_lazily(&repo)?;
    for w in repo.store().warnings() {
        eprintln!("warning: {w}");
    }
    Ok(repo)
}

/// Takes the working-copy lock, saying so if another command holds it, and reports a
/// folder move an interrupted command left that was finished now.
pub(crate) fn lock_folder(repo: &Repo, style: Style) -> CliResult<WorkingCopyLock> {
    let wc = repo.lock_working_copy()?;
    say_finished_move(&wc, style);
    Ok(wc)
}

/// Reports a folder move an interrupted command left that taking the lock `wc` finished.
pub(crate) fn say_finished_move(wc: &WorkingCopyLock, style: Style) {
    if let Some(m) = wc.finished_move() {
        eprintln!(
            "note: finished changing the folder for operation {}, which was interrupted ({} files updated)",
            style.id(&m.op.short(12)),
            m.applied
        );
        for p in &m.kept {
            eprintln!(
                "note: left {} as it is: it was changed after the interruption",
                display(p)
            );
        }
    }
}

/// Records the folder as a commit through the commit pipeline ([`lifeos_app::commit`]):
/// says on stderr what was not recorded, and how indexing, the rules and the export to
/// git went.
pub(crate) fn record_folder(
    repo: &Repo,
    asked: CommitOptions<'_>,
    progress: &dyn lifeos_vcs::working_copy::SnapshotProgress,
    style: Style,
) -> CliResult<lifeos_vcs::commit::CommitOutcome> {
    let wc = lock_folder(repo, style)?;
    // The pipeline lets go of the folder once the commit is recorded; what follows
    // reports it and never undoes it.
    let done = lifeos_app::commit::commit_folder(repo, wc, asked, progress)?;
    if let Some(e) = &done.not_indexed {
        eprintln!(
            "warning: this commit is recorded without indexing it for search (fix the config, then `lifeos ingest`): {e}"
        );
    }
    let out = done.outcome;
    let s = &out.snapshot;
    for sk in &s.skipped {
        eprintln!(
            "warning: not recorded: {}: {}",
            display(&sk.path),
            sk.reason
        );
    }
    for sk in &s.unreadable {
        eprintln!(
            "warning: cannot read {}: {}; its last recorded version was kept",
            display(&sk.path),
            sk.reason
        );
    }
    for n in &out.notes {
        eprintln!("warning: {}:{}: {}", display(&n.path), n.line, n.text);
    }
    match done.fired {
        Some(Ok(f)) => crate::actions_util::report_fired(&f, style),
        Some(Err(e)) => eprintln!("warning: rules did not fire: {}", CliError::from(e).message),
        None => {}
    }
    match done.exported {
        Some(Ok(r)) => crate::git_util::report_sync_out(&r),
        Some(Err(e)) => eprintln!(
            "warning: not exported to git: {}",
            CliError::from(e).message
        ),
        None => {}
    }
    Ok(out)
}

/// The view to read: the current one, or the one `--at` names (said on stderr).
pub(crate) fn view_at(repo: &Repo, at: &AsOfArg) -> CliResult<lifeos_vcs::View> {
    Ok(state_at(repo, at)?.view)
}

/// The operation `--at` names (the current one without it), telling stderr which it is.
pub(crate) fn state_at(repo: &Repo, at: &AsOfArg) -> CliResult<lifeos_vcs::OpState> {
    match &at.at {
        None => Ok(repo.head()?),
        Some(when) => {
            let a = repo.op_at(when)?;
            let asked = a
                .asked_ms
                .map(|t| format!(", the last at or before {}", local_time(t)))
                .unwrap_or_default();
            eprintln!(
                "as of operation {} ({}{asked})",
                a.state.id.short(12),
                local_time(a.state.op.end_ms)
            );
            Ok(a.state)
        }
    }
}

/// Resolves a revision in a view and reads the commit.
pub(crate) fn resolve_in(
    repo: &Repo,
    view: &lifeos_vcs::View,
    rev: &str,
) -> CliResult<(lifeos_store::Id, lifeos_vcs::Commit)> {
    let id = repo.resolve_rev(view, rev)?;
    let c = repo.commit(&id)?;
    Ok((id, c))
}

/// Resolves a revision as of `--at` (the current view without it) and reads the commit.
pub(crate) fn resolve(
    repo: &Repo,
    rev: &str,
    at: &AsOfArg,
) -> CliResult<(lifeos_store::Id, lifeos_vcs::Commit)> {
    let view = view_at(repo, at)?;
    resolve_in(repo, &view, rev)
}

/// A file in a revision, as `cat` and `extract show` read it.
pub(crate) struct FileAt {
    /// The commit's id.
    pub commit: lifeos_store::Id,
    /// The path, cleaned.
    pub path: lifeos_vcs::path::BString,
    /// The file's entry in the commit's tree.
    pub entry: lifeos_vcs::TreeEntry,
}

/// The file at `path` in `rev` (as of `at`) ([`Repo::file_at`]). A folder or a submodule
/// is refused with `hint` (given the path as people see it) saying what to run instead.
pub(crate) fn file_at(
    repo: &Repo,
    path: &[u8],
    rev: &str,
    at: &AsOfArg,
    hint: impl FnOnce(&str) -> String,
) -> CliResult<FileAt> {
    let (commit, c) = resolve(repo, rev, at)?;
    match repo.file_at(&c, path, rev) {
        Ok((path, entry)) => Ok(FileAt {
            commit,
            path,
            entry,
        }),
        Err(lifeos_vcs::VcsError::NotAFile {
            path,
            found,
            expected,
        }) => {
            let hint = hint(&path);
            let e = lifeos_vcs::VcsError::NotAFile {
                path,
                found,
                expected,
            };
            Err(CliError::from(e).hint(hint))
        }
        Err(e) => Err(e.into()),
    }
}
