//! `lifeos git`: import a git repository's history, export it back with the same ids, share
//! a folder with git, and the hooks and filter git runs.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use lifeos_git::remote::{run_git, Output};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::git_util::{colocate, print_import, reopened, sync_in, sync_out, warn_refused};
use crate::output::print_json;
use crate::verb::{Policy, Verb};

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

impl Verb for GitCmd {
    fn policy(&self) -> Policy {
        match self {
            GitCmd::Import { .. } => Policy::FIRES,
            GitCmd::Clone { .. } => Policy::OUTSIDE,
            // They run inside git's own commands (reference-transaction while git
            // holds its ref locks): they import by themselves.
            GitCmd::Hook { .. } | GitCmd::FilterProcess => Policy {
                syncs_git: false,
                ..Policy::REPORT
            },
            GitCmd::Init { .. }
            | GitCmd::Fetch { .. }
            | GitCmd::Push { .. }
            | GitCmd::Hooks(_)
            | GitCmd::Filter(_)
            | GitCmd::Export { .. } => Policy::REPORT,
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        match self {
            GitCmd::Clone { url, dir } => clone(ctx.here(), &url, dir.as_deref()),
            cmd => run(ctx.repo()?, cmd),
        }
    }
}

/// Runs a `lifeos git` command.
fn run(repo: &Repo, cmd: GitCmd) -> CliResult<u8> {
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
fn clone(here: &Path, url: &str, dir: Option<&Path>) -> CliResult<u8> {
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
        Ok(Some(n)) if n > 0 => eprintln!(
            "lifeos: imported {} ({name})",
            lifeos_diff::counted(n as usize, "new commit", "new commits")
        ),
        Ok(_) => {}
        Err(e) => {
            eprintln!("lifeos: warning: the {name} hook could not import into lifeos: {e}");
            return;
        }
    }
    let style = crate::output::Style::detect(crate::ColorChoice::Never);
    fire_hook_rules(repo, name, args, input, style);
    // Branches and tags git moved fire their rules as lifeos's own commands do.
    crate::actions_util::fire_since(repo, start, style);
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
    match crate::actions_util::actions_of(repo).hook_triggers(name, args, input) {
        Ok((triggers, missed)) => {
            if let Some(e) = missed {
                eprintln!("lifeos: warning: rules did not fire ({name}): {e}");
            }
            crate::actions_util::fire(repo, &triggers, style);
        }
        Err(e) => eprintln!("lifeos: warning: rules did not fire ({name}): {e}"),
    }
}
