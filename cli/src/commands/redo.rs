//! `lifeos redo`: revert the last undo.

use crate::context::Context;
use crate::error::CliResult;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos redo`.
#[derive(Debug, clap::Args)]
pub struct RedoArgs {
    /// Replace uncommitted changes (they are saved as a commit first).
    #[arg(long)]
    pub force: bool,
}

impl Verb for RedoArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        super::undo::undo(ctx.repo()?, self.force, true, ctx.style())
    }
}
