//! `lifeos reject`: an action that never runs.

use lifeos_vcs::Repo;

use crate::actions_util::actions_of;
use crate::context::Context;
use crate::error::CliResult;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// Action id (or a unique prefix).
    pub id: String,
}

impl Verb for RejectArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        reject(ctx.repo()?, &self.id, ctx.style())
    }
}

/// `lifeos reject ID`.
fn reject(repo: &Repo, id: &str, style: Style) -> CliResult<u8> {
    let actions = actions_of(repo);
    let id = actions.resolve_id(id)?;
    actions.reject(&id)?;
    println!("Rejected action {}", style.id(&id));
    Ok(0)
}
