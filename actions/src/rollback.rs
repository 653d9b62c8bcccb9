//! Rollback: an internal action undone by a new operation, an external one by proposing
//! its rule's compensating action.

use super::*;

impl<'r> Actions<'r> {
    /// Undoes what the action of receipt `prefix` did. An internal action (tag, branch,
    /// restore) is undone at once by a compensating action that puts back what its
    /// operation changed; an external one (run, http) gets its rule's `compensate` action
    /// proposed, to be approved like any other. Either way the compensation is an action
    /// of its own, with a receipt, naming the one it compensates.
    pub fn rollback(&self, prefix: &str) -> Result<Rolledback> {
        let r = &self.receipt(prefix)?;
        if r.outcome != "executed" {
            return Err(ActionsError::Refused(format!(
                "receipt {} is {}: only what ran can be rolled back",
                r.id.short(12),
                r.outcome
            )));
        }
        let a = self
            .list()?
            .into_iter()
            .find(|a| a.id == r.action)
            .ok_or_else(|| ActionsError::NotFound(format!("no action {}", r.action)))?;
        let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
        let kind = payload["kind"].as_str().unwrap_or_default().to_string();
        let mut key = blake3::Hasher::new();
        key.update(b"rollback\0")
            .update(a.id.as_bytes())
            .update(&r.id.0);
        let id = key.finalize().to_hex()[..16].to_string();
        if kind == "ingest" {
            return Err(ActionsError::Refused(
                "an ingest action only recorded extracted text beside the history; there is nothing to undo".into(),
            ));
        }
        let (compensation, auto_by) = if matches!(
            kind.as_str(),
            "tag" | "branch" | "restore" | "entity"
        ) {
            let effect = r.effect.ok_or_else(|| {
                ActionsError::Refused(format!(
                    "receipt {} names no operation to revert",
                    r.id.short(12)
                ))
            })?;
            let op = self.repo.operation(&effect)?;
            let before = match op.parents.first() {
                Some(p) => self.repo.op_state(p)?.view,
                None => lifeos_vcs::View::default(),
            };
            let name = payload["name"].as_str().unwrap_or_default();
            let hex = |c: Option<Id>| c.map(|c| c.to_hex()).unwrap_or_default();
            let back = match kind.as_str() {
                "tag" => json!({"kind": "tag", "name": name, "commit": hex(before.tag(name))}),
                "branch" => {
                    json!({"kind": "branch", "name": name, "commit": hex(before.branch(name))})
                }
                "entity" => {
                    let entity = self.repo.events(&op)?.iter().find_map(|e| match e {
                        lifeos_vcs::object::Event::EntityCreated { id, .. }
                        | lifeos_vcs::object::Event::EntityChanged { id, .. } => Some(id.clone()),
                        _ => None,
                    });
                    let entity = entity.ok_or_else(|| {
                        ActionsError::Refused(format!(
                            "the operation of receipt {} changed no entity",
                            r.id.short(12)
                        ))
                    })?;
                    let old = self.repo.entity_in(&before, &entity)?.map(|(obj, _)| obj);
                    json!({"kind": "entity", "change": "restore", "id": entity, "object": hex(old)})
                }
                _ => {
                    json!({"kind": "restore", "path": payload["path"], "commit": hex(before.at_commit())})
                }
            };
            (
                back,
                Some(format!("rollback of receipt {}", r.id.short(12))),
            )
        } else {
            let mut text = Vec::new();
            self.repo.store().read_file(&a.rules_file, &mut text)?;
            let rules =
                Rules::parse(&String::from_utf8_lossy(&text)).map_err(ActionsError::Rules)?;
            let comp = rules
                .rules
                .iter()
                .find(|x| x.name == a.rule)
                .and_then(|x| x.compensate.clone())
                .ok_or_else(|| {
                    ActionsError::Refused(format!(
                        "rule {:?} declares no compensate action, and what a {kind} action did outside the repository cannot be undone by lifeos",
                        a.rule
                    ))
                })?;
            let event: Json = serde_json::from_str(&a.event).unwrap_or(Json::Null);
            let fields: BTreeMap<String, String> = event
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            (comp.payload(&fields, &event), None)
        };
        let stage = Stage::Proposed {
            rule: a.rule.clone(),
            rules_file: a.rules_file,
            event: a.event.clone(),
            trigger_op: None,
            payload: serde_json::to_vec(&compensation).expect("JSON values serialize"),
            compensates: Some(a.id.clone()),
        };
        let held = self.hold()?;
        if records::newest(&held.tx, &held.view, &id)?.is_some() {
            return Err(ActionsError::Refused(format!(
                "receipt {} was rolled back already (action {id})",
                r.id.short(12)
            )));
        }
        let (records, unapproved) = self.proposal(&id, stage, auto_by.as_deref());
        held.publish(
            self.repo,
            &records,
            Vec::new(),
            &format!("roll back action {}", a.id),
        )?;
        match (auto_by, unapproved) {
            (Some(_), None) => Ok(Rolledback::Ran(self.run_one(&id)?)),
            _ => Ok(Rolledback::Proposed(id)),
        }
    }
}

/// What `rollback` did.
#[derive(Debug)]
pub enum Rolledback {
    /// The compensating action (of an internal action) ran.
    Ran(RunReport),
    /// The compensating action (the rule's `compensate`) was proposed: its id.
    Proposed(String),
}
