//! `lifeos actions`: list pending and recent actions, run approved ones, show, edit or
//! resolve one.

use clap::Subcommand;
use lifeos_actions::Action;
use lifeos_vcs::Repo;
use serde_json::{json, Value as Json};

use crate::actions_util::{action_json, actions_of, print_run, run_json, summary};
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{local_time, print_json, relative_time, Style};
use crate::verb::{Policy, Verb};

/// `lifeos actions ...`.
#[derive(Debug, clap::Args)]
pub struct ActionsArgs {
    /// What to do (default: list pending and recent actions).
    #[command(subcommand)]
    pub cmd: Option<ActionsCmd>,
    /// List every action (without it: those pending or running, and those that ended in
    /// the last day).
    #[arg(long)]
    pub all: bool,
    /// Print JSON (schema lifeos.actions.v1).
    #[arg(long)]
    pub json: bool,
}

/// `lifeos actions` subcommands.
#[derive(Debug, Subcommand)]
pub enum ActionsCmd {
    /// Run approved actions: all of them, or those named. An approval that expired or
    /// no longer matches the payload is refused with a blocked receipt.
    Run {
        /// Action ids (or unique prefixes).
        ids: Vec<String>,
        /// Print JSON (schema lifeos.actions.v1).
        #[arg(long)]
        json: bool,
    },
    /// Show one action: its payload, hash, approval and records.
    Show {
        /// Action id (or a unique prefix).
        id: String,
        /// Print JSON (schema lifeos.actions.v1).
        #[arg(long)]
        json: bool,
    },
    /// Replace a pending action's payload (JSON); it must be approved again.
    Edit {
        /// Action id (or a unique prefix).
        id: String,
        /// The new payload, as JSON.
        #[arg(long)]
        payload: String,
    },
    /// Say what happened to an action whose outcome is uncertain (its process died).
    Resolve {
        /// Action id (or a unique prefix).
        id: String,
        /// It ran: record it as executed.
        #[arg(
            long,
            conflicts_with = "did_not_run",
            required_unless_present = "did_not_run"
        )]
        ran: bool,
        /// It did not run: it may run again while its approval holds.
        #[arg(long)]
        did_not_run: bool,
    },
}

impl Verb for ActionsArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        actions(ctx.repo()?, self, ctx.style())
    }
}

/// `lifeos actions ...`.
fn actions(repo: &Repo, args: ActionsArgs, style: Style) -> CliResult<u8> {
    let actions = actions_of(repo);
    match args.cmd {
        None => {
            // What is still to do, and what ended in the last day.
            let recent = lifeos_vcs::repo::now_ms() - 24 * 3_600_000;
            let list: Vec<Action> = actions
                .list()?
                .into_iter()
                .filter(|a| {
                    args.all
                        || !actions.state(a).is_final()
                        || a.records.last().is_some_and(|(_, r)| r.at_ms >= recent)
                })
                .collect();
            if args.json {
                print_json(
                    "lifeos.actions.v1",
                    json!({"actions": list.iter().map(|a| action_json(&actions, a)).collect::<Vec<_>>()}),
                );
                return Ok(0);
            }
            if list.is_empty() {
                println!(
                    "No {}actions.",
                    if args.all {
                        ""
                    } else {
                        "pending, running or recent "
                    }
                );
            }
            for a in &list {
                let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
                println!(
                    "{}  {:<14} {}  {}  (rule {:?}, {}, payload {})",
                    style.id(&a.id),
                    actions.state(a).name(),
                    summary(&payload),
                    style.dim(&a.event_summary()),
                    a.rule,
                    relative_time(a.proposed_ms),
                    a.payload_hash().short(12),
                );
            }
            Ok(0)
        }
        Some(ActionsCmd::Run { ids, json }) => {
            let ran = if ids.is_empty() {
                actions.run_approved()?
            } else {
                let mut out = Vec::new();
                for id in ids {
                    out.push(actions.run_one(&actions.resolve_id(&id)?)?);
                }
                out
            };
            if json {
                print_json(
                    "lifeos.actions.v1",
                    json!({"ran": ran.iter().map(run_json).collect::<Vec<_>>()}),
                );
            } else if ran.is_empty() {
                println!("No approved actions to run.");
            } else {
                ran.iter().for_each(|r| print_run(r, style));
            }
            Ok(
                if ran
                    .iter()
                    .all(|r| r.state == lifeos_actions::State::Executed)
                {
                    0
                } else {
                    1
                },
            )
        }
        Some(ActionsCmd::Show { id, json }) => {
            let id = actions.resolve_id(&id)?;
            let a = actions
                .list()?
                .into_iter()
                .find(|a| a.id == id)
                .ok_or_else(|| {
                    CliError::new(format!("{id} is a noop receipt, not an action"))
                        .hint("`lifeos receipts` lists it")
                })?;
            let j = action_json(&actions, &a);
            if json {
                print_json("lifeos.actions.v1", json!({"actions": [j]}));
                return Ok(0);
            }
            println!("action {}  {}", style.id(&a.id), actions.state(&a).name());
            println!(
                "rule      {:?} (rules file {})",
                a.rule,
                a.rules_file.short(12)
            );
            println!("event     {}", a.event);
            println!("payload   {}", String::from_utf8_lossy(&a.payload));
            println!("hash      {}", a.payload_hash().to_hex());
            if let Some(p) = &a.approval {
                println!(
                    "approved  by {} at {}, until {} (pins {}){}",
                    p.by,
                    local_time(p.at_ms),
                    local_time(p.expires_ms()),
                    p.pinned.short(12),
                    if actions.sealed_here(p) {
                        ""
                    } else {
                        "; on another device: it runs there, not here"
                    }
                );
                if let Some(pins) = lifeos_actions::pins::Pins::decode(&p.pins) {
                    println!(
                        "runs      {} (blake3 {})",
                        pins.program.path,
                        pins.program
                            .blake3
                            .get(..12)
                            .unwrap_or("none: it was nowhere")
                    );
                    for f in &pins.files {
                        println!("  file    {} (blake3 {})", f.path, &f.blake3[..12]);
                    }
                    let names: Vec<&str> = pins.env.iter().map(|(k, _)| k.as_str()).collect();
                    println!("  env     {}", names.join(" "));
                }
            }
            for (rid, r) in &a.records {
                println!(
                    "  {}  {:<9} {}  {}",
                    style.dim(&rid.short(12)),
                    r.stage.name(),
                    local_time(r.at_ms),
                    r.by
                );
            }
            Ok(0)
        }
        Some(ActionsCmd::Edit { id, payload }) => {
            let id = actions.resolve_id(&id)?;
            let value: Json = serde_json::from_str(&payload)
                .map_err(|e| CliError::new(format!("--payload is not JSON: {e}")))?;
            let rec = actions.edit(&id, &value)?;
            println!(
                "Edited the payload of action {} (record {}); approve it again to run it",
                style.id(&id),
                rec.short(12)
            );
            Ok(0)
        }
        Some(ActionsCmd::Resolve { id, ran, .. }) => {
            let id = actions.resolve_id(&id)?;
            actions.resolve(&id, ran)?;
            println!(
                "Action {} {}",
                style.id(&id),
                if ran {
                    "recorded as executed"
                } else {
                    "recorded as not run; it runs again with `lifeos actions run` while its approval holds"
                }
            );
            Ok(0)
        }
    }
}
