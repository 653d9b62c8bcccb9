//! `lifeos describe`: change a commit's message; its change id stays.

use lifeos_vcs::Repo;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos describe`.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// The revision (default `@`).
    #[arg(short, long, default_value = "@")]
    pub revision: String,
    /// The new message.
    #[arg(short, long)]
    pub message: String,
}

impl Verb for DescribeArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        describe(ctx.repo()?, &self.revision, &self.message, ctx.style())
    }
}

/// `lifeos describe`.
fn describe(repo: &Repo, rev: &str, message: &str, style: Style) -> CliResult<u8> {
    let (old, new, _) = repo.describe(rev, message.as_bytes())?;
    println!(
        "Rewrote {} as {} (same change)",
        style.id(&old.short(12)),
        style.id(&new.short(12))
    );
    Ok(0)
}
