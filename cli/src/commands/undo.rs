//! `lifeos undo`: revert the last operation by writing a new one.

use lifeos_vcs::Repo;

use crate::context::{lock_folder, Context};
use crate::error::CliResult;
use crate::history_util::uncommitted_hint;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// Replace uncommitted changes (they are saved as a commit first).
    #[arg(long)]
    pub force: bool,
}

impl Verb for UndoArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        undo(ctx.repo()?, self.force, false, ctx.style())
    }
}

/// `lifeos undo` and `lifeos redo` and, with `redo`, `lifeos redo`.
pub(crate) fn undo(repo: &Repo, force: bool, redo: bool, style: Style) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let (reverted, op) = if redo {
        repo.redo(&wc, force)
    } else {
        repo.undo(&wc, force)
    }
    .map_err(uncommitted_hint)?;
    let desc = repo.operation(&reverted)?.description;
    println!(
        "{} operation {} ({desc}) as operation {}",
        if redo { "Reverted" } else { "Undid" },
        style.id(&reverted.short(12)),
        style.id(&op.short(12))
    );
    Ok(0)
}
