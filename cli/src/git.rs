//! `lifeos git ...`: import a git repository's history, export it back.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use lifeos_vcs::Repo;
use serde_json::json;

use std::ffi::OsStr;

use lifeos_git::remote::{run_git, Output};

use crate::error::{CliError, CliResult};
use crate::output::print_json;

/// `lifeos git ...`
#[derive(Debug, Subcommand)]
pub enum GitCmd {
    /// Bring every ref of a git repository (its commits, trees, blobs, branches, tags,
    /// annotated tag objects) into lifeos history, as one operation; run again to bring
    /// in only what is new.
    Import {
        /// The git repository (a work tree, its .git folder, or a bare repository);
        /// defaults to the .git folder beside .lifeos.
        path: Option<PathBuf>,
        /// Print JSON (schema lifeos.git_import.v1).
        #[arg(long)]
        json: bool,
    },
    /// Share the folder with git: adopt the git repository in .git (or create one) and,
    /// from then on, import what git changed before every lifeos command and export what
    /// lifeos changed after it.
    Init {
        /// Colocate with .git in the working folder (the only kind of git init).
        #[arg(long, required = true)]
        colocate: bool,
    },
    /// Clone a git repository (any URL git takes) into a new folder that lifeos and git
    /// share; git does the transfer.
    Clone {
        /// What to clone.
        url: String,
        /// The new folder (default: the repository's name).
        dir: Option<PathBuf>,
    },
    /// Fetch from a git remote (git does the transfer) and import what arrived.
    Fetch {
        /// The remote (default: git's default, usually origin).
        remote: Option<String>,
    },
    /// Export lifeos's history to git, then push a branch to a git remote.
    Push {
        /// The remote (default: origin).
        remote: Option<String>,
        /// The branch (default: the current branch).
        branch: Option<String>,
    },
    /// Git hooks that bring what git does into lifeos (post-commit, post-merge,
    /// post-checkout, post-rewrite, reference-transaction, pre-push), chaining any hook
    /// already there.
    #[command(subcommand)]
    Hooks(HooksCmd),
    /// Run by the installed git hooks: imports what git just did.
    #[command(hide = true)]
    Hook {
        /// The hook's name.
        name: String,
        /// The hook's arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// git's `lifeos` filter: large files kept in lifeos's chunk store, a small pointer in
    /// git, so an edit to a large file stores only the chunks it changed.
    #[command(subcommand)]
    Filter(FilterCmd),
    /// Run by git as the `lifeos` filter (pkt-line protocol version 2 on stdin/stdout).
    #[command(hide = true)]
    FilterProcess,
    /// Write lifeos history to a git repository (a bare one is created when PATH does not
    /// exist): commits, trees and tags that came from git get their SHA-1s back.
    Export {
        /// The git repository to write to.
        path: PathBuf,
        /// Print JSON (schema lifeos.git_export.v1).
        #[arg(long)]
        json: bool,
    },
}

/// `lifeos git hooks ...`
#[derive(Debug, Subcommand)]
pub enum HooksCmd {
    /// Install lifeos's hooks in the folder's git repository (where `core.hooksPath`
    /// says, if inside its .git, else .git/hooks); a hook already there is chained, not
    /// replaced; installing twice changes nothing.
    Install {
        /// Print JSON (schema lifeos.git_hooks.v1).
        #[arg(long)]
        json: bool,
        /// Install where `core.hooksPath` says even outside this repository's .git (a
        /// global hooks folder, or one in the work tree that git tracks).
        #[arg(long)]
        force: bool,
    },
    /// Remove lifeos's hooks, putting back the hooks they chained.
    Uninstall {
        /// Print JSON (schema lifeos.git_hooks.v1).
        #[arg(long)]
        json: bool,
    },
    /// Show each hook's state.
    Status {
        /// Print JSON (schema lifeos.git_hooks.v1).
        #[arg(long)]
        json: bool,
    },
}

/// `lifeos git filter ...`
#[derive(Debug, Subcommand)]
pub enum FilterCmd {
    /// Configure the filter in the git repository beside .lifeos (`filter.lifeos.process`
    /// and `filter.lifeos.required` in .git/config) and send the files matching each
    /// pattern through it (`.gitattributes`); installing twice changes nothing.
    Install {
        /// Files to filter, as a .gitattributes pattern (`*.mp4`, `media/**`); repeat for
        /// more.
        #[arg(long)]
        pattern: Vec<String>,
        /// Print JSON (schema lifeos.git_filter.v1).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `lifeos git` command.
pub fn run(repo: &Repo, cmd: GitCmd) -> CliResult<u8> {
    match cmd {
        GitCmd::Import { path, json } => {
            let path = path.unwrap_or_else(|| repo.workdir().join(".git"));
            let r = lifeos_git::import(repo, &path)?;
            print_import(&r, &path, json);
            if r.mismatches > 0 || !r.refused.is_empty() {
                return Ok(1);
            }
            Ok(0)
        }
        GitCmd::Hooks(cmd) => hooks(repo, cmd),
        GitCmd::Filter(FilterCmd::Install { pattern, json }) => {
            let r = lifeos_git::filter::install(repo.workdir(), &current_exe()?, &pattern)?;
            if json {
                print_json(
                    "lifeos.git_filter.v1",
                    json!({
                        "config": r.config.display().to_string(), "config_changed": r.config_changed,
                        "attributes": r.attributes.display().to_string(), "added": r.added,
                    }),
                );
            } else {
                let state = if r.config_changed {
                    "set up"
                } else {
                    "already set up"
                };
                println!("filter lifeos {state} in {}", r.config.display());
                for p in &r.added {
                    println!("  {p}: filtered (added to {})", r.attributes.display());
                }
                if pattern.is_empty() {
                    println!("hint: name the files to filter with `--pattern GLOB`");
                }
            }
            Ok(0)
        }
        GitCmd::FilterProcess => {
            let served = lifeos_git::filter::serve(
                repo,
                std::io::stdin().lock(),
                std::io::stdout().lock(),
                &mut |msg| eprintln!("lifeos: {msg}"),
            )?;
            Ok(u8::from(served.failed > 0))
        }
        GitCmd::Clone { url, dir } => clone(repo.workdir(), &url, dir.as_deref()),
        GitCmd::Fetch { remote } => {
            let wd = colocated_workdir(repo)?;
            let mut args = vec!["fetch".to_string()];
            args.extend(remote);
            run_git(&wd, &args, Output::Inherit)?;
            sync_in(repo)?;
            Ok(0)
        }
        GitCmd::Push { remote, branch } => {
            let wd = colocated_workdir(repo)?;
            sync_out(repo)?;
            let view = repo.head()?.view;
            let branch = branch.or(view.current_branch).ok_or_else(|| {
                CliError::new("the folder is not on a branch")
                    .hint("name the branch to push: `lifeos git push REMOTE BRANCH`")
            })?;
            let remote = remote.unwrap_or_else(|| "origin".into());
            run_git(
                &wd,
                &["push", remote.as_str(), branch.as_str()],
                Output::Inherit,
            )?;
            sync_in(repo)?;
            println!("pushed {branch} to {remote}");
            Ok(0)
        }
        GitCmd::Hook { name, args } => {
            // pre-push and reference-transaction say which refs on their input.
            let mut input = String::new();
            if matches!(name.as_str(), "pre-push" | "reference-transaction") {
                let mut bytes = Vec::new();
                let _ = std::io::Read::read_to_end(
                    &mut std::io::Read::take(std::io::stdin(), 64 << 10),
                    &mut bytes,
                );
                input = String::from_utf8_lossy(&bytes).into_owned();
            }
            hook(repo, &name, &args, &input);
            Ok(0)
        }
        GitCmd::Init { colocate: _ } => {
            colocate(reopened(repo)?)?;
            Ok(0)
        }
        GitCmd::Export { path, json } => {
            let r = lifeos_git::export(repo, &path)?;
            if json {
                print_json(
                    "lifeos.git_export.v1",
                    json!({
                        "target": path.display().to_string(),
                        "refs": r.refs, "refs_updated": r.refs_updated, "commits": r.commits, "trees": r.trees,
                        "blobs": r.blobs, "tags": r.tags,
                    }),
                );
            } else {
                println!(
                    "exported {} refs to {}: {} commits, {} trees, {} blobs, {} annotated tags",
                    r.refs,
                    path.display(),
                    r.commits,
                    r.trees,
                    r.blobs,
                    r.tags
                );
            }
            Ok(0)
        }
    }
}

/// Prints what an import did (as lifeos.git_import.v1 with `json`), and its warnings.
fn print_import(r: &lifeos_git::ImportReport, path: &Path, json: bool) {
    if json {
        print_json(
            "lifeos.git_import.v1",
            json!({
                "source": path.display().to_string(),
                "published": r.published, "folder_detached": r.folder_detached,
                "refs": r.refs, "commits": r.commits, "new_commits": r.new_commits,
                "trees": r.trees, "blobs": r.blobs, "tags": r.tags,
                "raw_trees": r.raw_trees, "mismatches": r.mismatches, "pointers": r.pointers,
                "shallow_boundary": r.shallow_boundary,
                "skipped": r.skipped.iter().map(|(n, why)| json!({"ref": n, "reason": why})).collect::<Vec<_>>(),
                "refused": r.refused.iter().map(|(n, why)| json!({"ref": n, "reason": why})).collect::<Vec<_>>(),
            }),
        );
    } else {
        if r.published {
            println!(
                "imported {} refs from {}: {} commits ({} new), {} trees, {} blobs, {} annotated tags",
                r.refs,
                path.display(),
                r.commits,
                r.new_commits,
                r.trees,
                r.blobs,
                r.tags
            );
            if r.raw_trees > 0 {
                println!(
                    "{} trees are not in git's canonical form; they are kept byte for byte",
                    r.raw_trees
                );
            }
            if r.pointers > 0 {
                println!(
                    "{} blobs are `lifeos` filter pointers to content lifeos keeps; they are that content in lifeos, and pointers again in git",
                    r.pointers
                );
            }
        } else {
            println!("nothing new in {}", path.display());
        }
        if r.shallow_boundary > 0 {
            println!(
                "{} is a shallow clone: the import stopped at its boundary, where {} commits keep their parents' ids but not their history (run `git fetch --unshallow` there, then import again, to bring in the rest)",
                path.display(),
                r.shallow_boundary
            );
        }
        if r.folder_detached {
            println!("the branch the folder was on moved; the folder stays where it was, off the branch (`lifeos checkout BRANCH` moves it)");
        }
    }
    for (name, why) in &r.skipped {
        eprintln!("warning: ref {name} was not imported: {why}");
    }
    for (name, why) in &r.refused {
        eprintln!("error: ref {name} was not imported: {why}");
    }
    if r.mismatches > 0 {
        eprintln!(
            "warning: {} commits would not get their SHA-1 back on export",
            r.mismatches
        );
    }
}

/// The folder of a colocated repository, or an error saying how to colocate.
fn colocated_workdir(repo: &Repo) -> CliResult<PathBuf> {
    if !lifeos_git::colocate::is_colocated(repo) {
        return Err(CliError::new(
            "this folder is not shared with git, so lifeos has no git remotes here",
        )
        .hint("run `lifeos git init --colocate` first, or start from `lifeos git clone URL`"));
    }
    Ok(repo.workdir().to_path_buf())
}

/// `lifeos git clone URL [DIR]`: git clones, then lifeos adopts the new folder.
pub fn clone(here: &Path, url: &str, dir: Option<&Path>) -> CliResult<u8> {
    let name = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .map(|n| n.trim_end_matches(".git"))
        .filter(|n| !n.is_empty())
        .unwrap_or("repository");
    let target = here.join(dir.unwrap_or(Path::new(name)));
    run_git(
        here,
        &[OsStr::new("clone"), OsStr::new(url), target.as_os_str()],
        Output::Inherit,
    )?;
    let repo = Repo::init(&target, lifeos_store::StoreConfig::default())?;
    colocate(repo)?;
    Ok(0)
}

/// `repo` opened again, for a change of where its store is (which takes the repository
/// by value: the handle given up points at the old place, and is not used after).
fn reopened(repo: &Repo) -> CliResult<Repo> {
    let mut again = Repo::discover(repo.workdir())?;
    again.interrupt = repo.interrupt.clone();
    Ok(again)
}

/// Before a command: a store an earlier lifeos kept at `.lifeos` beside `.git` moves into
/// `.git/lifeos` (saying so), and a `.lifeos` that git tracks is refused.
pub fn settle_store(here: &Path) -> CliResult<()> {
    if let Some(m) = lifeos_git::store_home::settle(here)? {
        eprintln!(
            "note: moved lifeos's store from {} to {}, where git's commands never write or delete (docs/SECURITY.md)",
            m.from.display(),
            m.to.display()
        );
    }
    Ok(())
}

/// Colocates `repo`'s folder with git, saying what happened.
pub fn colocate(repo: Repo) -> CliResult<()> {
    let (_, r) = lifeos_git::colocate::colocate(repo)?;
    println!(
        "{} the git repository {}; lifeos and git now share this folder",
        if r.created { "Created" } else { "Adopted" },
        r.git_dir.display()
    );
    if let Some(i) = &r.imported {
        print_import(i, &r.git_dir, false);
    }
    if r.exported_refs > 0 {
        println!("wrote {} refs to git", r.exported_refs);
    }
    Ok(())
}

/// Before a command in a colocated folder: imports what git changed.
pub fn sync_in(repo: &Repo) -> CliResult<()> {
    if let Some(r) = lifeos_git::colocate::sync_in(repo)? {
        if r.new_commits > 0 {
            eprintln!("note: imported {} new commits from git", r.new_commits);
        }
        for (name, why) in &r.skipped {
            eprintln!("warning: git ref {name} was not imported: {why}");
        }
        warn_refused(&r, "");
    }
    Ok(())
}

/// Says which of git's refs lifeos refused (their history holds a tree it never writes),
/// each line starting with `prefix`.
fn warn_refused(r: &lifeos_git::ImportReport, prefix: &str) {
    for (name, why) in &r.refused {
        eprintln!("{prefix}warning: git ref {name} was not imported: {why}");
    }
}

/// After a command in a colocated folder: exports what lifeos changed.
pub fn sync_out(repo: &Repo) -> CliResult<()> {
    report_sync_out(&lifeos_git::colocate::sync_out(repo)?);
    Ok(())
}

/// Says which refs an export to git left as git has them.
pub fn report_sync_out(r: &lifeos_git::colocate::SyncOut) {
    for (name, why) in &r.conflicts {
        eprintln!(
            "warning: git moved {name} while lifeos ran, so lifeos left it as git has it ({why}); the next lifeos command imports git's commit, and lifeos's stays in `lifeos op log`"
        );
    }
}

fn hooks(repo: &Repo, cmd: HooksCmd) -> CliResult<u8> {
    use lifeos_git::hooks::{self, HookState};
    let git_dir = repo.workdir().join(".git");
    let dir = match &cmd {
        HooksCmd::Install { force, .. } => hooks::install_dir(&git_dir, *force)?,
        _ => hooks::hooks_dir(&git_dir)?,
    };
    let (verb, json, changes) = match cmd {
        HooksCmd::Install { json, .. } => (
            "install",
            json,
            hooks::install(&dir, &current_exe()?, repo.workdir())?,
        ),
        HooksCmd::Uninstall { json } => ("uninstall", json, hooks::uninstall(&dir)?),
        HooksCmd::Status { json } => (
            "status",
            json,
            hooks::HOOKS
                .iter()
                .map(|h| {
                    let s = hooks::state(&dir, h);
                    (*h, s, s)
                })
                .collect(),
        ),
    };
    if json {
        print_json(
            "lifeos.git_hooks.v1",
            json!({
                "action": verb,
                "dir": dir.display().to_string(),
                "hooks": changes.iter().map(|(h, before, after)| json!({
                    "hook": h, "before": before.name(), "state": after.name(),
                })).collect::<Vec<_>>(),
            }),
        );
        return Ok(0);
    }
    println!("hooks in {}:", dir.display());
    for (h, before, after) in &changes {
        let what = match after {
            HookState::Absent => "not installed",
            HookState::User => "your own hook (lifeos's is not installed)",
            HookState::Installed => "lifeos",
            HookState::Chained => "lifeos, running your hook first (kept as <hook>.lifeos-user)",
        };
        let change = if before == after || verb == "status" {
            String::new()
        } else {
            format!(" (was: {})", before.name())
        };
        println!("  {h:<22} {what}{change}");
    }
    Ok(0)
}

/// Where this lifeos binary is, for what git runs (hooks, the filter).
fn current_exe() -> CliResult<PathBuf> {
    std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot tell where lifeos is installed: {e}")))
}

/// What an installed hook runs: imports what git just did. Never fails the git command: a
/// problem is a warning.
fn hook(repo: &Repo, name: &str, args: &[String], input: &str) {
    // reference-transaction runs while git holds its ref locks; act once they are released.
    if name == "reference-transaction" && args.first().map(String::as_str) != Some("committed") {
        return;
    }
    let start = lifeos_vcs::repo::now_ms();
    let result = if lifeos_git::colocate::is_colocated(repo) {
        lifeos_git::colocate::sync_in(repo)
    } else {
        lifeos_git::import(repo, &repo.workdir().join(".git")).map(Some)
    };
    let result = result.map(|r| {
        r.map(|r| {
            warn_refused(&r, "lifeos: ");
            r.new_commits
        })
    });
    match result {
        Ok(Some(n)) if n > 0 => eprintln!("lifeos: imported {n} new commits ({name})"),
        Ok(_) => {}
        Err(e) => {
            eprintln!("lifeos: warning: the {name} hook could not import into lifeos: {e}");
            return;
        }
    }
    let style = crate::output::Style::detect(crate::ColorChoice::Never);
    fire_hook_rules(repo, name, args, input, style);
    // Branches and tags git moved fire their rules as lifeos's own commands do.
    crate::actions::fire_since(repo, start, style);
}

/// Fires the rules for git hook `name` (given `args` by git; and, after a commit or a
/// merge, for the commit git made), once what git did is imported. Never fails the git
/// command.
fn fire_hook_rules(
    repo: &Repo,
    name: &str,
    args: &[String],
    input: &str,
    style: crate::output::Style,
) {
    match crate::actions::actions_of(repo).hook_triggers(name, args, input) {
        Ok((triggers, missed)) => {
            if let Some(e) = missed {
                eprintln!("lifeos: warning: rules did not fire ({name}): {e}");
            }
            crate::actions::fire(repo, &triggers, style);
        }
        Err(e) => eprintln!("lifeos: warning: rules did not fire ({name}): {e}"),
    }
}
