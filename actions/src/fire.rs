//! Firing: each trigger matched against the trusted rules, the matching instances
//! rendered into payloads and proposed (or, for rules approved in advance, approved and
//! run), a duplicate recorded as a noop receipt.

use super::*;
use crate::trigger::NOT_UTF8;

impl<'r> Actions<'r> {
    /// Fires the rules at `@` for `trigger` (caused by operation `op`): proposes the
    /// actions of the rules that match (a duplicate of an action proposed before gets a
    /// noop receipt instead), then runs those their rule approves.
    ///
    /// Inside an action's command ([`inside_action`]) nothing fires: what an action does
    /// (a commit, a `git commit` firing hooks) never sets off rules again.
    pub fn fire(&self, triggers: &[Triggered]) -> Result<Fired> {
        let mut fired = Fired::default();
        if let Some(outer) = inside_action() {
            fired.inside = Some(outer);
            return Ok(fired);
        }
        let (rules_id, ix) = match self.trusted_index()? {
            Ok(found) => found,
            Err(untrusted) => {
                fired.untrusted = untrusted;
                return Ok(fired);
            }
        };
        // Most commits match no rule: the index says so without reading the rules.
        if !triggers.iter().any(|(t, _)| ix.may_fire(t)) {
            return Ok(fired);
        }
        let rules = Rules::parse(&self.rules_text(&rules_id)?).map_err(ActionsError::Rules)?;
        let mut proposals = Vec::new();
        for (trigger, op) in triggers {
            for (rule, identity, fields) in rules.matching(trigger, *op) {
                if let Some(p) = fields.get(NOT_UTF8) {
                    fired.skipped.push(format!(
                        "rule {:?}: {p}'s name is not UTF-8, so no payload can carry it; nothing was proposed for it",
                        rule.name
                    ));
                    continue;
                }
                let op = *op;
                let event = json!(fields);
                let mut payload = rule.payload(&fields, &event);
                // A commit, hook, extract or slot seen again (a hook run twice) is seen at
                // a later operation: what makes it a duplicate is the payload it renders
                // without that operation. A branch, tag or entity event is the operation
                // that made it: moving a branch back and forth again is a new event.
                let seen_again = matches!(
                    trigger,
                    Trigger::Commit { .. }
                        | Trigger::Hook { .. }
                        | Trigger::Ingest { .. }
                        | Trigger::Time { .. }
                );
                let unseen = {
                    let mut f = fields.clone();
                    f.insert("op".into(), String::new());
                    let p = rule.payload(&f, &json!(f));
                    Id::hash(&serde_json::to_vec(&p).expect("JSON values serialize"))
                };
                let made_by = if seen_again { None } else { op };
                if matches!(payload["kind"].as_str(), Some("tag" | "branch"))
                    && payload["commit"].as_str().is_none_or(str::is_empty)
                {
                    // An empty commit deletes a ref (what a rollback does); a rule's event
                    // that names no commit must not.
                    fired.skipped.push(format!(
                        "rule {:?}: its {} event names no commit to point {} at",
                        rule.name, fields["event"], payload["name"]
                    ));
                    continue;
                }
                if payload["kind"] == "restore" {
                    // What is approved names the commit, not a moment read later.
                    let at = payload["at"].as_str().unwrap_or_default().to_string();
                    match self.repo.op_at(&at).map(|a| a.state.view.at_commit()) {
                        Ok(Some(c)) => {
                            payload = json!({"kind": "restore", "path": payload["path"], "commit": c.to_hex()})
                        }
                        Ok(None) => {
                            fired
                                .skipped
                                .push(format!("rule {:?}: no commit at {at:?}", rule.name));
                            continue;
                        }
                        Err(e) => {
                            fired.skipped.push(format!("rule {:?}: {e}", rule.name));
                            continue;
                        }
                    }
                }
                let payload = serde_json::to_vec(&payload).expect("JSON values serialize");
                proposals.push((
                    rule,
                    identity,
                    event.to_string(),
                    payload,
                    (unseen, made_by),
                    op,
                ));
            }
        }
        if proposals.is_empty() {
            return Ok(fired);
        }
        let held = self.hold()?;
        let mut records = Vec::new();
        let mut auto = Vec::new();
        let mut names = Vec::new();
        for (rule, identity, event, payload, (unseen, made_by), op) in proposals {
            let keyed = |hash: &Id| {
                let mut key = blake3::Hasher::new();
                key.update(rule.name.as_bytes())
                    .update(b"\0")
                    .update(identity.as_bytes())
                    .update(b"\0")
                    .update(hash.0.as_slice());
                if let Some(op) = made_by {
                    key.update(b"\0").update(op.0.as_slice());
                }
                key
            };
            let mut key = keyed(&unseen);
            let id = key.finalize().to_hex()[..16].to_string();
            // Actions proposed before this key (the payload's own hash, no operation)
            // still count: an upgrade never runs an event again.
            let mut legacy = blake3::Hasher::new();
            legacy
                .update(rule.name.as_bytes())
                .update(b"\0")
                .update(identity.as_bytes())
                .update(b"\0")
                .update(Id::hash(&payload).0.as_slice());
            let legacy = legacy.finalize().to_hex()[..16].to_string();
            let known = records::newest(&held.tx, &held.view, &id)?.is_some()
                || (made_by.is_none() && records::newest(&held.tx, &held.view, &legacy)?.is_some())
                || records.iter().any(|r: &ActionRecord| r.action == id);
            let stage = Stage::Proposed {
                rule: rule.name.clone(),
                rules_file: rules_id,
                event,
                trigger_op: op,
                payload,
                compensates: None,
            };
            if known {
                key.update(&now_ms().to_le_bytes())
                    .update(&std::process::id().to_le_bytes());
                let noop = key.finalize().to_hex()[..16].to_string();
                // The duplicate is an action of its own, proposed and finished at once,
                // so its receipt names its rule and event like any other.
                let proposed = record(&noop, None, &self.me, stage);
                let prev = id_of(&proposed);
                records.push(proposed);
                records.push(record(
                    &noop,
                    Some(prev),
                    &self.me,
                    Stage::Finished {
                        outcome: Outcome::Noop,
                        reason: format!(
                            "duplicate of action {id} (rule {:?}, the same event and payload)",
                            rule.name
                        ),
                        started_ms: now_ms(),
                        status: None,
                        output: None,
                        effect: None,
                    },
                ));
                fired.duplicates.push((noop, id));
                continue;
            }
            let by_rule = format!("rule {:?} (approval = \"auto\")", rule.name);
            let auto_by = (rule.approval == rules::ApprovalMode::Auto).then_some(by_rule.as_str());
            let (made, unapproved) = self.proposal(&id, stage, auto_by);
            records.extend(made);
            match unapproved {
                Some(why) => fired.skipped.push(why),
                None if auto_by.is_some() => auto.push(id.clone()),
                None => {}
            }
            if !names.contains(&rule.name) {
                names.push(rule.name.clone());
            }
            fired.proposed.push(id);
        }
        let what = match names.as_slice() {
            [] => "record duplicate actions".to_string(),
            _ => format!("propose actions of rule {}", names.join(", ")),
        };
        held.publish(self.repo, &records, Vec::new(), &what)?;
        for id in auto {
            fired.ran.push(self.run_one(&id)?);
        }
        Ok(fired)
    }

    /// The records proposing action `id` with `stage` and, for `auto_by` (a rule that
    /// approves its own actions), approving it here. An approval that cannot be made
    /// (what it runs cannot be pinned) leaves the proposal waiting for a person, and
    /// says why.
    pub(crate) fn proposal(
        &self,
        id: &str,
        stage: Stage,
        auto_by: Option<&str>,
    ) -> (Vec<ActionRecord>, Option<String>) {
        let payload = match &stage {
            Stage::Proposed { payload, .. } => payload.clone(),
            _ => unreachable!("a proposal starts an action"),
        };
        let proposed = record(id, None, &self.me, stage);
        let prev = id_of(&proposed);
        let mut out = vec![proposed];
        let mut why = None;
        if let Some(by) = auto_by {
            let pinned = Id::hash(&payload);
            match self.approval(id, Some(prev), by, (&payload, pinned), DEFAULT_TTL_MS) {
                Ok(r) => out.push(r),
                Err(e) => why = Some(e.to_string()),
            }
        }
        (out, why)
    }

    /// Fires the rules for commit `commit` just recorded by operation `op`, whose
    /// snapshot read the files `read` (every file it added or changed is among them).
    /// When no trusted rule listens for commits, or none could match a file read, the
    /// commit's changes are not even computed.
    pub fn fire_commit(&self, commit: Id, op: Option<Id>, read: &[BString]) -> Result<Fired> {
        match self.trusted_index()? {
            Err(None) => return Ok(Fired::default()),
            Err(Some(_)) => {}
            Ok((_, ix)) => {
                let could = read
                    .iter()
                    .any(|p| ix.may_fire_path("commit", &lifeos_vcs::path::display(p)));
                if !could {
                    return Ok(Fired::default());
                }
            }
        }
        self.fire(&[(commit_trigger(self.repo, commit)?, op)])
    }
}

/// What firing the rules did.
#[derive(Debug, Default)]
pub struct Fired {
    /// Actions proposed (ids).
    pub proposed: Vec<String>,
    /// Duplicates of actions proposed before (their noop receipts' action ids, and the
    /// original's).
    pub duplicates: Vec<(String, String)>,
    /// The rules file is not trusted (its id): nothing fired.
    pub untrusted: Option<Id>,
    /// Actions approved by their rule and run at once.
    pub ran: Vec<RunReport>,
    /// Rules that matched but could not propose (why).
    pub skipped: Vec<String>,
    /// The action this process runs inside ([`inside_action`]): its side effects fire
    /// nothing.
    pub inside: Option<String>,
}
