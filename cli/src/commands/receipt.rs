//! `lifeos receipt show`: one receipt, with the output it captured.

use clap::Subcommand;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::actions_util::{actions_of, receipt_json};
use crate::context::Context;
use crate::error::CliResult;
use crate::output::{local_time, print_json, Style};
use crate::verb::{Policy, Verb};

/// `lifeos receipt ...`.
#[derive(Debug, Subcommand)]
pub enum ReceiptCmd {
    /// Show one receipt, with the output it captured.
    Show {
        /// Receipt id (or a unique prefix).
        id: String,
        /// Print JSON (schema lifeos.receipt.v1).
        #[arg(long)]
        json: bool,
    },
}

impl Verb for ReceiptCmd {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        receipt(ctx.repo()?, self, ctx.style())
    }
}

/// `lifeos receipt show ID`.
fn receipt(repo: &Repo, cmd: ReceiptCmd, style: Style) -> CliResult<u8> {
    let ReceiptCmd::Show { id, json } = cmd;
    let r = &actions_of(repo).receipt(&id)?;
    let output = match r.output {
        Some(o) => {
            let mut bytes = Vec::new();
            repo.store().read_file(&o, &mut bytes)?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        None => None,
    };
    if json {
        let mut j = receipt_json(r);
        j["output_text"] = json!(output);
        print_json("lifeos.receipt.v1", json!({"receipts": [j]}));
        return Ok(0);
    }
    println!("receipt {}  {}", style.id(&r.id.to_hex()), r.outcome);
    println!(
        "action   {} (rule {:?})",
        r.action,
        r.rule.as_deref().unwrap_or("-")
    );
    println!("reason   {}", r.reason);
    println!("started  {}", local_time(r.started_ms));
    println!("ended    {}", local_time(r.ended_ms));
    if let Some(s) = r.status {
        println!("status   {s}");
    }
    if let Some(h) = r.payload_hash {
        println!("payload  {}", h.to_hex());
    }
    if let Some(p) = &r.approval {
        println!(
            "approved by {} at {} for {}",
            p.by,
            local_time(p.at_ms),
            lifeos_actions::rules::format_duration(p.ttl_ms)
        );
    }
    if let Some(op) = r.effect {
        println!("effect   operation {}", op.short(12));
    }
    if let Some(of) = &r.compensates {
        println!("compensates action {of}");
    }
    for by in &r.compensated_by {
        println!("compensated by action {by}");
    }
    if let Some(text) = output {
        println!("output:\n{text}");
    }
    Ok(0)
}
