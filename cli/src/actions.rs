//! `lifeos actions`, `approve`, `reject`, `receipts`, `receipt show` and `rules`:
//! automations, their approvals and their receipts.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{json, Value as Json};

use lifeos_actions::{Action, Actions, ActionsError, Fired, Receipt, Rules, RunReport};
use lifeos_vcs::Repo;

use crate::error::{CliError, CliResult};
use crate::output::{local_time, print_json, relative_time, Style};

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

/// `lifeos rules ...`.
#[derive(Debug, Subcommand)]
pub enum RulesCmd {
    /// Check a rules file without running anything (default: lifeos.rules.toml in the
    /// folder).
    Check {
        /// The file to check.
        file: Option<PathBuf>,
    },
    /// Trust the rules file at @ so its rules may fire (again after any change). The
    /// folder's file must be the committed one, the one `rules check` read.
    Trust {
        /// Only if the file's id (as `rules check` prints it) starts with this.
        #[arg(long, value_name = "HEX")]
        id: Option<String>,
    },
}

impl From<ActionsError> for CliError {
    fn from(e: ActionsError) -> Self {
        match e {
            ActionsError::Vcs(v) => CliError::from(v),
            ActionsError::Store(s) => CliError::from(s),
            ActionsError::Rules(r) => CliError::new(r.to_string()).hint(
                "fix the rules file; `lifeos rules check` checks it without running anything",
            ),
            other => CliError::new(other.to_string()),
        }
    }
}

fn hex(id: Option<lifeos_store::Id>) -> Json {
    id.map_or(Json::Null, |i| json!(i.to_hex()))
}

fn action_json(actions: &Actions<'_>, a: &Action) -> Json {
    let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
    let event: Json = serde_json::from_str(&a.event).unwrap_or(Json::Null);
    json!({
        "id": a.id,
        "rule": a.rule,
        "state": actions.state(a).name(),
        "kind": payload["kind"],
        "payload": payload,
        "payload_hash": a.payload_hash().to_hex(),
        "event": event,
        "trigger_operation": hex(a.trigger_op),
        "rules_file": a.rules_file.to_hex(),
        "proposed": local_time(a.proposed_ms),
        "compensates": a.compensates,
        "approval": a.approval.as_ref().map(|p| json!({
            "by": p.by,
            "at": local_time(p.at_ms),
            "ttl_ms": p.ttl_ms,
            "expires": local_time(p.expires_ms()),
            "pinned_hash": p.pinned.to_hex(),
            "here": actions.sealed_here(p),
            "pins": serde_json::from_slice::<Json>(&p.pins).unwrap_or(Json::Null),
        })),
        "records": a.records.iter().map(|(id, r)| json!({
            "id": id.to_hex(),
            "stage": r.stage.name(),
            "at": local_time(r.at_ms),
            "by": r.by,
        })).collect::<Vec<_>>(),
    })
}

fn receipt_json(r: &Receipt) -> Json {
    json!({
        "id": r.id.to_hex(),
        "action": r.action,
        "rule": r.rule,
        "event": r.trigger.as_ref().map(|(e, _)| serde_json::from_str::<Json>(e).unwrap_or(Json::Null)),
        "trigger_operation": r.trigger.as_ref().and_then(|(_, op)| op.map(|o| o.to_hex())),
        "outcome": r.outcome,
        "reason": r.reason,
        "started": local_time(r.started_ms),
        "ended": local_time(r.ended_ms),
        "status": r.status,
        "output": hex(r.output),
        "payload_hash": hex(r.payload_hash),
        "approval": r.approval.as_ref().map(|p| json!({
            "by": p.by, "at": local_time(p.at_ms), "ttl_ms": p.ttl_ms, "pinned_hash": p.pinned.to_hex(),
        })),
        "by": r.by,
        "effect_operation": hex(r.effect),
        "compensates": r.compensates,
        "compensated_by": r.compensated_by,
    })
}

fn run_json(r: &RunReport) -> Json {
    json!({
        "action": r.action,
        "state": r.state.name(),
        "reason": r.reason,
        "receipt": hex(r.receipt),
    })
}

/// One line saying what an action does.
fn summary(payload: &Json) -> String {
    let text = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
    match payload["kind"].as_str() {
        Some("run") => format!(
            "run {}",
            payload["argv"]
                .as_array()
                .map(|a| a
                    .iter()
                    .map(|x| x.as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default()
        ),
        Some("http") => format!("POST {}", payload["url"].as_str().unwrap_or_default()),
        Some(kind @ ("tag" | "branch")) => match payload["commit"].as_str() {
            Some(c) if !c.is_empty() => {
                format!("{kind} {} at {}", text("name"), c.get(..12).unwrap_or(c))
            }
            _ => format!("delete {kind} {}", text("name")),
        },
        Some("restore") => format!(
            "restore {} from {}",
            text("path"),
            text("commit").get(..12).unwrap_or_default()
        ),
        Some("entity") => match text("change").as_str() {
            "add" => format!("add a {}", text("type")),
            "restore" if text("object").is_empty() => format!("remove entity {}", text("id")),
            change => format!("{change} entity {}", text("id")),
        },
        Some("ingest") => "ingest what is new".into(),
        other => format!("unknown action kind {other:?}"),
    }
}

fn print_run(r: &RunReport, style: Style) {
    let receipt = r
        .receipt
        .map(|id| format!(" (receipt {})", style.id(&id.short(12))))
        .unwrap_or_default();
    println!(
        "action {}: {}: {}{receipt}",
        style.id(&r.action),
        r.state.name(),
        r.reason
    );
}

/// Tells what firing rules did (after a commit or a git hook), on stderr.
pub fn report_fired(fired: &Fired, style: Style) {
    if let Some(outer) = &fired.inside {
        eprintln!(
            "rules: none fired: this command runs inside action {outer}, and what an action does never sets off rules"
        );
    }
    if let Some(id) = fired.untrusted {
        eprintln!(
            "rules: {} at @ ({}) is not trusted, so no rule fired; check it with `lifeos rules check` and trust it with `lifeos rules trust`",
            lifeos_actions::RULES_FILE,
            id.short(12)
        );
    }
    for id in &fired.proposed {
        if !fired.ran.iter().any(|r| &r.action == id) {
            eprintln!(
                "rules: proposed action {}; see it with `lifeos actions show {id}`, approve it with `lifeos approve {id}`",
                style.id(id)
            );
        }
    }
    for (noop, of) in &fired.duplicates {
        eprintln!(
            "rules: action {} was proposed before; recorded a noop receipt ({noop})",
            style.id(of)
        );
    }
    for why in &fired.skipped {
        eprintln!("rules: warning: {why}");
    }
    for r in &fired.ran {
        eprint!("rules: ");
        eprintln!(
            "action {}: {}: {}",
            style.id(&r.action),
            r.state.name(),
            r.reason
        );
    }
}

/// Fires the rules for `triggers` (each with the operation that caused it); a failure to
/// read them is a warning, not a failed command (what triggered them is recorded already).
pub fn fire(
    repo: &Repo,
    triggers: &[(lifeos_actions::Trigger, Option<lifeos_store::Id>)],
    style: Style,
) {
    match actions_of(repo).fire(triggers) {
        Ok(f) => report_fired(&f, style),
        Err(e) => eprintln!("warning: rules did not fire: {}", CliError::from(e).message),
    }
}

/// Fires the rules for what the operations published since `since_ms` did (branches and
/// tags moved, entities changed, text extracted).
pub fn fire_since(repo: &Repo, since_ms: i64, style: Style) {
    match actions_of(repo).triggers_since(since_ms) {
        Ok(t) if t.is_empty() => {}
        Ok(t) => fire(repo, &t, style),
        Err(e) => eprintln!("warning: rules did not fire: {}", CliError::from(e).message),
    }
}

pub use lifeos_app::commit::actions_of;

/// `lifeos actions ...`.
pub fn actions(repo: &Repo, args: ActionsArgs, style: Style) -> CliResult<u8> {
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

/// `lifeos approve ID [--ttl] [--run]`.
pub fn approve(
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

/// `lifeos rollback RECEIPT`.
pub fn rollback(repo: &Repo, receipt: &str, style: Style) -> CliResult<u8> {
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

/// `lifeos reject ID`.
pub fn reject(repo: &Repo, id: &str, style: Style) -> CliResult<u8> {
    let actions = actions_of(repo);
    let id = actions.resolve_id(id)?;
    actions.reject(&id)?;
    println!("Rejected action {}", style.id(&id));
    Ok(0)
}

/// `lifeos receipts`.
pub fn receipts(repo: &Repo, json: bool, style: Style) -> CliResult<u8> {
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

/// `lifeos receipt show ID`.
pub fn receipt(repo: &Repo, cmd: ReceiptCmd, style: Style) -> CliResult<u8> {
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
            "approved by {} at {} for {} ms",
            p.by,
            local_time(p.at_ms),
            p.ttl_ms
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

/// `lifeos rules ...`.
pub fn rules(repo: &Repo, cmd: RulesCmd, style: Style) -> CliResult<u8> {
    match cmd {
        RulesCmd::Check { file } => {
            let path = file.unwrap_or_else(|| repo.workdir().join(lifeos_actions::RULES_FILE));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
            let rules = Rules::parse(&text).map_err(ActionsError::Rules)?;
            let id = lifeos_store::Id::hash(text.as_bytes());
            println!(
                "{} ({}): {} rules, all valid",
                path.display(),
                style.id(&id.short(12)),
                rules.rules.len()
            );
            for r in &rules.rules {
                println!(
                    "  {:?} (line {}): on {}, {} action{}",
                    r.name,
                    r.line,
                    r.hook.as_deref().unwrap_or(&r.on),
                    r.action.kind(),
                    if r.approval == lifeos_actions::rules::Approval::Auto {
                        ", approved automatically"
                    } else {
                        ", needs approval"
                    }
                );
            }
            Ok(0)
        }
        RulesCmd::Trust { id } => {
            let (id, rules) = actions_of(repo).trust(id.as_deref())?;
            println!(
                "Trusted {} {} ({} rules): they fire until the file changes",
                lifeos_actions::RULES_FILE,
                style.id(&id.short(12)),
                rules.rules.len()
            );
            for r in &rules.rules {
                println!(
                    "  {:?}: on {}, {} action",
                    r.name,
                    r.hook.as_deref().unwrap_or(&r.on),
                    r.action.kind()
                );
            }
            Ok(0)
        }
    }
}
