//! How actions, receipts and fired rules print, for every verb that runs or fires them.

use lifeos_actions::{Action, Actions, ActionsError, Fired, Receipt, RunReport};
use lifeos_vcs::Repo;
use serde_json::{json, Value as Json};

use crate::error::CliError;
use crate::output::{local_time, Style};

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

/// An action as `lifeos.actions.v1` has it: payload, hash, approval, state and records.
pub(crate) fn action_json(actions: &Actions<'_>, a: &Action) -> Json {
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

/// A receipt as `lifeos.receipt.v1` has it.
pub(crate) fn receipt_json(r: &Receipt) -> Json {
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

/// What a run of approved actions did, as JSON.
pub(crate) fn run_json(r: &RunReport) -> Json {
    json!({
        "action": r.action,
        "state": r.state.name(),
        "reason": r.reason,
        "receipt": hex(r.receipt),
    })
}

/// One line saying what an action does.
pub(crate) fn summary(payload: &Json) -> String {
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

/// Says what a run of approved actions did, one line per action.
pub(crate) fn print_run(r: &RunReport, style: Style) {
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

/// Tells what firing rules did (after a commit or a git hook), on stderr; with `-q`, only
/// its warnings.
pub(crate) fn report_fired(fired: &Fired, style: Style) {
    let quiet = crate::output::quiet();
    if !quiet {
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
    }
    for why in &fired.skipped {
        eprintln!("rules: warning: {why}");
    }
    if quiet {
        return;
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
pub(crate) fn fire(
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
pub(crate) fn fire_since(repo: &Repo, since_ms: i64, style: Style) {
    match actions_of(repo).triggers_since(since_ms) {
        Ok(t) if t.is_empty() => {}
        Ok(t) => fire(repo, &t, style),
        Err(e) => eprintln!("warning: rules did not fire: {}", CliError::from(e).message),
    }
}

pub(crate) use lifeos_app::commit::actions_of;
