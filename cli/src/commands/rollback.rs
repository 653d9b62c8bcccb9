//! `lifeos rollback`: undo what an action did.

use lifeos_vcs::Repo;

use crate::actions_util::{actions_of, print_run};
use crate::context::Context;
use crate::error::CliResult;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// Receipt id (or a unique prefix) of the action to undo.
    pub receipt: String,
}

impl Verb for RollbackArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        rollback(ctx.repo()?, &self.receipt, ctx.style())
    }
}

/// `lifeos rollback RECEIPT`.
fn rollback(repo: &Repo, receipt: &str, style: Style) -> CliResult<u8> {
    match actions_of(repo).rollback(receipt)? {
        lifeos_actions::Rolledback::Ran(r) => {
            print_run(&r, style);
            Ok(u8::from(r.state != lifeos_actions::State::Executed))
        }
        lifeos_actions::Rolledback::Proposed(id) => {
            println!(
                "Proposed action {} to compensate; see it with `lifeos actions show {id}`, approve it with `lifeos approve {id}`",
                style.id(&id)
            );
            Ok(0)
        }
    }
}
