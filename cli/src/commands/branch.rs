//! `lifeos branch`: create, list, move, rename or delete branches.

use clap::Subcommand;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{resolve_in, view_at, Context};
use crate::error::CliResult;
use crate::history_util::unknown_ref;
use crate::output::{print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// `lifeos branch ...`
#[derive(Debug, Subcommand)]
pub enum BranchCmd {
    /// Create a branch at a revision (default `@`).
    Create {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long, default_value = "@")]
        revision: String,
    },
    /// Move an existing branch.
    Set {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long)]
        revision: String,
    },
    /// Delete a branch.
    Delete {
        /// Name.
        name: String,
    },
    /// Rename a branch (it keeps its target; if it is checked out, the folder follows).
    Rename {
        /// The current name.
        old: String,
        /// The new name.
        new: String,
    },
    /// List branches.
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AsOfArg,
        /// Print JSON (schema lifeos.branches.v1).
        #[arg(long)]
        json: bool,
    },
}

impl Verb for BranchCmd {
    fn policy(&self) -> Policy {
        Policy {
            answers: matches!(self, BranchCmd::List { .. }),
            ..Policy::FIRES
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        branch(ctx.repo()?, self, ctx.style())
    }
}

/// `lifeos branch ...`.
fn branch(repo: &Repo, cmd: BranchCmd, style: Style) -> CliResult<u8> {
    match cmd {
        BranchCmd::Create { name, revision } => {
            let head = repo.head()?;
            let (id, _) = resolve_in(repo, &head.view, &revision)?;
            repo.set_branch(&name, Some(id), false)?;
            println!(
                "Created branch {} at {}",
                style.name(&name),
                style.id(&id.short(12))
            );
        }
        BranchCmd::Set { name, revision } => {
            let head = repo.head()?;
            let (id, _) = resolve_in(repo, &head.view, &revision)?;
            if head.view.branch(&name).is_none() {
                return Err(unknown_ref(&head.view.branches, &name, "branch"));
            }
            repo.set_branch(&name, Some(id), true)?;
            println!(
                "Moved branch {} to {}",
                style.name(&name),
                style.id(&id.short(12))
            );
        }
        BranchCmd::Delete { name } => {
            let head = repo.head()?;
            if head.view.branch(&name).is_none() {
                return Err(unknown_ref(&head.view.branches, &name, "branch"));
            }
            repo.set_branch(&name, None, true)?;
            println!("Deleted branch {name}");
        }
        BranchCmd::Rename { old, new } => {
            let head = repo.head()?;
            if head.view.branch(&old).is_none() {
                return Err(unknown_ref(&head.view.branches, &old, "branch"));
            }
            repo.rename_branch(&old, &new)?;
            println!("Renamed branch {old} to {}", style.name(&new));
        }
        BranchCmd::List { at, json } => {
            let view = view_at(repo, &at)?;
            if json {
                print_json(
                    "lifeos.branches.v1",
                    json!({"branches": view.branches.iter().map(|(n, id)| json!({
                        "name": n, "commit": id.to_hex(), "current": view.current_branch.as_deref() == Some(n),
                    })).collect::<Vec<_>>()}),
                );
            } else {
                for (n, id) in &view.branches {
                    let mark = if view.current_branch.as_deref() == Some(n) {
                        "*"
                    } else {
                        " "
                    };
                    let summary = repo.commit(id)?.summary();
                    println!(
                        "{mark} {} {} {summary}",
                        style.name(n),
                        style.id(&id.short(12))
                    );
                }
            }
        }
    }
    Ok(0)
}
