//! `lifeos merge`: merge a branch into the current one.

use lifeos_vcs::path::display;
use lifeos_vcs::Repo;

use crate::context::{lock_folder, Context};
use crate::error::CliResult;
use crate::history_util::uncommitted_hint;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The branch (or revision) to merge.
    pub branch: String,
}

impl Verb for MergeArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        merge(ctx.repo()?, &self.branch, ctx.style())
    }
}

/// `lifeos merge`.
fn merge(repo: &Repo, branch: &str, style: Style) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let out = repo.merge(&wc, branch).map_err(uncommitted_hint)?;
    println!("Merged {branch} as {}", style.id(&out.commit.short(12)));
    for p in &out.merged {
        println!("  merged  {}", display(p));
    }
    for p in &out.conflicts {
        println!("  {} {}", style.bad("conflict"), display(p));
    }
    if !out.conflicts.is_empty() {
        eprintln!(
            "{} paths have conflicts, recorded in the commit; edit them and commit to resolve",
            out.conflicts.len()
        );
        return Ok(1);
    }
    Ok(0)
}
