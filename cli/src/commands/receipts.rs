//! `lifeos receipts`: what actions did.

use lifeos_vcs::Repo;
use serde_json::json;

use crate::actions_util::{actions_of, receipt_json};
use crate::context::Context;
use crate::error::CliResult;
use crate::output::{print_json, relative_time, Style};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos receipts`.
#[derive(Debug, clap::Args)]
pub struct ReceiptsArgs {
    /// Print JSON (schema lifeos.receipt.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for ReceiptsArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        receipts(ctx.repo()?, self.json, ctx.style())
    }
}

/// `lifeos receipts`.
fn receipts(repo: &Repo, json: bool, style: Style) -> CliResult<u8> {
    let list = actions_of(repo).receipts()?;
    if json {
        print_json(
            "lifeos.receipt.v1",
            json!({"receipts": list.iter().map(receipt_json).collect::<Vec<_>>()}),
        );
        return Ok(0);
    }
    if list.is_empty() {
        println!("No receipts.");
    }
    for r in &list {
        println!(
            "{}  {:<9} action {}  {}  {}",
            style.id(&r.id.short(12)),
            r.outcome,
            r.action,
            relative_time(r.ended_ms),
            r.reason
        );
    }
    Ok(0)
}
