//! `lifeos checkout`: switch the folder to a branch or a revision.

use lifeos_vcs::history::Target;
use lifeos_vcs::Repo;

use crate::context::{lock_folder, Context};
use crate::error::{CliError, CliResult};
use crate::history_util::uncommitted_hint;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos checkout`.
#[derive(Debug, clap::Args)]
pub struct CheckoutArgs {
    /// A branch to switch to (the folder then follows it).
    pub branch: Option<String>,
    /// A revision to switch to, detached from any branch.
    #[arg(short, long, conflicts_with = "branch")]
    pub revision: Option<String>,
    /// Replace uncommitted changes (they are saved as a commit first).
    #[arg(long)]
    pub force: bool,
}

impl Verb for CheckoutArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        checkout(
            ctx.repo()?,
            self.branch,
            self.revision,
            self.force,
            ctx.style(),
        )
    }
}

/// `lifeos checkout`.
fn checkout(
    repo: &Repo,
    branch: Option<String>,
    revision: Option<String>,
    force: bool,
    style: Style,
) -> CliResult<u8> {
    // The target is resolved in the view current once the folder is ours.
    let wc = lock_folder(repo, style)?;
    let head = repo.head()?;
    let target = match (branch, revision) {
        (Some(b), None) if head.view.branch(&b).is_some() => Target::Branch(b),
        (Some(b), None) => Target::Commit(repo.resolve_rev(&head.view, &b)?),
        (None, Some(r)) => Target::Commit(repo.resolve_rev(&head.view, &r)?),
        _ => return Err(CliError::new("name a branch, or a revision with -r")),
    };
    let (commit, saved, _) = repo
        .checkout(&wc, &target, force)
        .map_err(uncommitted_hint)?;
    if let Some(s) = saved {
        println!(
            "Saved uncommitted changes as {} (recover them with `lifeos restore --to DIR -r {}`)",
            style.id(&s.short(12)),
            s.short(12)
        );
    }
    match target {
        Target::Branch(b) => println!(
            "Switched to branch {} at {}",
            style.name(&b),
            style.id(&commit.short(12))
        ),
        Target::Commit(_) => println!(
            "Switched to {} (detached; `lifeos branch create NAME` to keep commits on a branch)",
            style.id(&commit.short(12))
        ),
    }
    Ok(0)
}
