//! `lifeos approve`: approve an action's payload for a while, pinning its hash.

use lifeos_vcs::Repo;

use crate::actions_util::{actions_of, print_run};
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// Action id (or a unique prefix).
    pub id: String,
    /// How long the approval holds.
    #[arg(long, default_value = "24h")]
    pub ttl: String,
    /// Run it now.
    #[arg(long)]
    pub run: bool,
    /// Approve only if the payload's BLAKE3 hash starts with this (what `lifeos
    /// actions show` printed), so an edit made since is never approved unseen.
    #[arg(long, value_name = "HEX")]
    pub hash: Option<String>,
}

impl Verb for ApproveArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        approve(
            ctx.repo()?,
            &self.id,
            &self.ttl,
            self.run,
            self.hash.as_deref(),
            ctx.style(),
        )
    }
}

/// `lifeos approve ID [--ttl] [--run]`.
fn approve(
    repo: &Repo,
    id: &str,
    ttl: &str,
    run: bool,
    expected: Option<&str>,
    style: Style,
) -> CliResult<u8> {
    let ttl_ms = lifeos_actions::rules::parse_duration(ttl).ok_or_else(|| {
        CliError::new(format!("--ttl {ttl:?} is not a duration")).hint("for example 30m, 2h or 1d")
    })?;
    let actions = actions_of(repo);
    let id = actions.resolve_id(id)?;
    let pinned = actions.approve(&id, ttl_ms, expected)?;
    println!(
        "Approved action {} for {ttl}, pinning payload hash {}",
        style.id(&id),
        pinned.to_hex()
    );
    if run {
        let r = actions.run_one(&id)?;
        print_run(&r, style);
        return Ok(u8::from(r.state != lifeos_actions::State::Executed));
    }
    Ok(0)
}
