//! Running approved actions: once each, under the actions lock, with start records before
//! and receipts after; what an approval pinned checked again first.

use super::*;

impl<'r> Actions<'r> {
    /// Runs every approved action (fresh or nearing expiry); those whose approval no
    /// longer holds (expired, or the payload changed) get a blocked receipt.
    pub fn run_approved(&self) -> Result<Vec<RunReport>> {
        refuse_inside_action()?;
        let mut out = Vec::new();
        for a in self.list()? {
            if matches!(
                self.state(&a),
                State::Fresh
                    | State::NearingExpiry
                    | State::Expired
                    | State::Tampered
                    | State::ApprovedElsewhere
            ) {
                out.push(self.run_one(&a.id)?);
            }
        }
        Ok(out)
    }

    /// Runs action `id` if its approval holds: under the lock, re-checks the pinned
    /// hash and the TTL (refusing with a blocked receipt) and records the start; then
    /// causes the side effect; then records the receipt. Another process that got there
    /// first leaves nothing to do.
    ///
    /// Only an approval sealed here runs here, and what it pins (a command's program and
    /// files) must be unchanged; no action runs from inside another action's command.
    pub fn run_one(&self, id: &str) -> Result<RunReport> {
        refuse_inside_action()?;
        let started_ms = now_ms();
        let (held, newest, a) = self.hold_action(id)?;
        let state = self.state(&a);
        let pins_changed = match (&state, &a.approval) {
            (State::Fresh | State::NearingExpiry, Some(ap)) => self.pins_changed(&a, ap),
            _ => None,
        };
        let blocked = match state {
            State::Fresh | State::NearingExpiry => pins_changed,
            State::Expired
                if a
                    .approval
                    .as_ref()
                    .is_some_and(|ap| ap.at_ms > started_ms + state::CLOCK_SKEW_MS) =>
            {
                Some("approval_dated_in_the_future: the clock is behind the approval's time; approve it again".into())
            }
            State::Expired => Some("approval_expired".to_string()),
            State::Tampered => Some("payload_hash_mismatch".to_string()),
            State::Pending => {
                return Err(ActionsError::Refused(format!(
                    "action {id} is not approved: `lifeos approve {id}` first"
                )))
            }
            State::ApprovedElsewhere => {
                return Ok(RunReport {
                    action: id.to_string(),
                    state,
                    reason: format!(
                        "it was approved on another device (or by a lifeos that did not seal approvals): it runs where it was approved; `lifeos approve {id}` to run it here"
                    ),
                    receipt: None,
                })
            }
            other => {
                return Ok(RunReport {
                    action: id.to_string(),
                    state: other,
                    reason: format!("nothing to do: it is {}", other.name()),
                    receipt: None,
                })
            }
        };
        if let Some(reason) = blocked {
            let rec = record(
                id,
                Some(newest),
                &self.me,
                Stage::Finished {
                    outcome: Outcome::Blocked,
                    reason: reason.clone(),
                    started_ms,
                    status: None,
                    output: None,
                    effect: None,
                },
            );
            let short = reason.split(':').next().unwrap_or_default();
            let ids = held.publish(
                self.repo,
                std::slice::from_ref(&rec),
                Vec::new(),
                &format!("block action {id}: {short}"),
            )?;
            return Ok(RunReport {
                action: id.to_string(),
                state: State::Blocked,
                reason,
                receipt: Some(ids[0]),
            });
        }
        let start = record(id, Some(newest), &self.me, Stage::Started);
        // Once it is published (and the lock released), another process leaves the
        // action alone, and the side effect runs without holding anyone up.
        held.publish(
            self.repo,
            std::slice::from_ref(&start),
            Vec::new(),
            &format!("start action {id}"),
        )?;
        let mut ran = self.carry_out(&a);
        // Output and reason are redacted as ingest redacts extracted text; when the
        // repository's patterns cannot be read, the output is not kept at all.
        let output = match lifeos_vcs::redact::Redactor::configured(self.repo.dot_dir()) {
            Ok(r) => {
                ran.reason = r.redact(&ran.reason);
                (!ran.output.is_empty())
                    .then(|| r.redact(&String::from_utf8_lossy(&ran.output)).into_bytes())
            }
            Err(e) => {
                let kept = if ran.output.is_empty() {
                    String::new()
                } else {
                    format!("; its output was not kept ({e})")
                };
                let redactor = lifeos_vcs::redact::Redactor::new(&[])
                    .expect("the default redaction patterns are valid");
                ran.reason = format!("{}{kept}", redactor.redact(&ran.reason));
                None
            }
        };
        let mut held = self.hold()?;
        let newest = records::newest(&held.tx, &held.view, id)?.unwrap_or(id_of(&start));
        let output = output.map(|o| held.tx.store_bytes(&o)).transpose()?;
        let rec = record(
            id,
            Some(newest),
            &self.me,
            Stage::Finished {
                outcome: ran.outcome,
                reason: ran.reason.clone(),
                started_ms,
                status: ran.status,
                output,
                effect: ran.effect,
            },
        );
        let ids = held.publish(
            self.repo,
            std::slice::from_ref(&rec),
            output.into_iter().collect(),
            &format!("{} action {id}", ran.outcome.name()),
        )?;
        Ok(RunReport {
            action: id.to_string(),
            state: if ran.outcome == Outcome::Executed {
                State::Executed
            } else {
                State::Failed
            },
            reason: ran.reason,
            receipt: Some(ids[0]),
        })
    }

    /// Why what approval `ap` of action `a` pins no longer holds, if it does not: a `run`
    /// action's program or files changed, or its pins were never taken.
    pub(crate) fn pins_changed(&self, a: &Action, ap: &state::Approval) -> Option<String> {
        let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
        if payload["kind"] != "run" {
            return None;
        }
        match pins::Pins::decode(&ap.pins) {
            None => Some("pins_missing: the approval does not say which program it approved; approve it again".into()),
            Some(p) => pins::changed(&p, self.repo.workdir()).map(|why| format!("pins_changed: {why}")),
        }
    }

    /// Causes action `a`'s side effect.
    pub(crate) fn carry_out(&self, a: &Action) -> exec::Ran {
        let payload: Json = match serde_json::from_slice(&a.payload) {
            Ok(p) => p,
            Err(e) => return exec::Ran::failure(format!("the payload is not JSON: {e}")),
        };
        let text = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
        // A ref action names its commit; an empty one deletes the ref (a rollback).
        let target = || -> std::result::Result<Option<Id>, String> {
            match text("commit").as_str() {
                "" => Ok(None),
                hex => Id::from_hex(hex)
                    .map(Some)
                    .ok_or_else(|| format!("the payload's commit {hex:?} is not an id")),
            }
        };
        let internal = |r: std::result::Result<(Id, String), String>| match r {
            Ok((op, what)) => exec::Ran::done(what, op),
            Err(e) => exec::Ran::failure(e),
        };
        match payload["kind"].as_str() {
            Some("run") => {
                // The environment the approval pinned, and nothing else of this
                // process's: no passphrase, no credentials, unless the rule names them.
                let Some(pins) = a
                    .approval
                    .as_ref()
                    .and_then(|ap| pins::Pins::decode(&ap.pins))
                else {
                    return exec::Ran::failure("the approval pins no program".into());
                };
                let mut env = pins.env.clone();
                let mut secrets = Vec::new();
                if let Some(names) = payload["env"].as_array() {
                    for n in names.iter().filter_map(Json::as_str) {
                        if let Ok(v) = std::env::var(n) {
                            secrets.push(v.clone());
                            env.push((n.to_string(), v));
                        }
                    }
                }
                env.extend([
                    (ACTION_VAR.to_string(), a.id.clone()),
                    (DEPTH_VAR.to_string(), "1".to_string()),
                    ("LIFEOS_RULE".to_string(), a.rule.clone()),
                    (
                        "LIFEOS_EVENT".to_string(),
                        match &payload["stdin"] {
                            Json::Null => a.event.clone(),
                            stdin => stdin.to_string(),
                        },
                    ),
                    (
                        "LIFEOS_REPO".to_string(),
                        self.repo.workdir().display().to_string(),
                    ),
                ]);
                // Each field as LIFEOS_<FIELD>, but the event's name as LIFEOS_EVENT_NAME:
                // LIFEOS_EVENT is the whole event.
                // From the approved payload, which is what the hash pinned.
                if let Json::Object(fields) = &payload["stdin"] {
                    for (k, v) in fields {
                        if let Some(v) = v.as_str() {
                            let name = match k.as_str() {
                                "event" => "EVENT_NAME".to_string(),
                                k => k.to_ascii_uppercase(),
                            };
                            env.push((format!("LIFEOS_{name}"), v.into()));
                        }
                    }
                }
                let mut ran = exec::run(
                    &payload,
                    self.repo.workdir(),
                    std::path::Path::new(&pins.program.path),
                    &env,
                );
                // What the rule let through is never kept in the receipt.
                for s in secrets.iter().filter(|s| s.len() >= 4) {
                    ran.reason = ran.reason.replace(s.as_str(), lifeos_vcs::redact::MARK);
                    let out = String::from_utf8_lossy(&ran.output)
                        .replace(s.as_str(), lifeos_vcs::redact::MARK);
                    ran.output = out.into_bytes();
                }
                ran
            }
            Some("http") => exec::http(&payload),
            Some(kind @ ("tag" | "branch")) => internal(target().and_then(|commit| {
                let name = text("name");
                let set = if kind == "tag" {
                    self.repo.set_tag(&name, commit, true)
                } else {
                    self.repo.set_branch(&name, commit, true)
                };
                let what = match commit {
                    Some(c) => format!("{kind} {name} set to {}", c.short(12)),
                    None => format!("{kind} {name} deleted"),
                };
                set.map(|op| (op, what))
                    .map_err(|e| format!("{kind} {name}: {e}"))
            })),
            Some("restore") => internal(target().and_then(|commit| {
                let path = text("path");
                let commit = commit.ok_or("the payload names no commit to restore from")?;
                let wc = self.repo.lock_working_copy().map_err(|e| e.to_string())?;
                self.repo
                    .restore_path(&wc, path.as_bytes(), &commit, false)
                    .map(|(_, op, _)| (op, format!("{path} restored from {}", commit.short(12))))
                    .map_err(|e| format!("restore {path}: {e}"))
            })),
            Some("entity") => internal(self.change_entity(&payload)),
            Some("ingest") => match self.ingest.map(|f| f(self.repo)) {
                Some(Ok(what)) => exec::Ran {
                    outcome: Outcome::Executed,
                    reason: what,
                    status: None,
                    output: Vec::new(),
                    effect: None,
                },
                Some(Err(why)) => exec::Ran::failure(format!("ingest: {why}")),
                None => exec::Ran::failure(
                    "this program cannot extract text; `lifeos actions run` can".into(),
                ),
            },
            other => exec::Ran::failure(format!("unknown action kind {other:?}")),
        }
    }

    /// Carries out an `entity` payload: add, set, or (a rollback) restore an entity to an
    /// object or remove it. Returns the operation and what was done.
    pub(crate) fn change_entity(
        &self,
        payload: &Json,
    ) -> std::result::Result<(Id, String), String> {
        use lifeos_entities::EntityChange;
        let text = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
        let schema = self
            .repo
            .head()
            .and_then(|h| self.repo.entity_schema(&h.view))
            .map_err(|e| e.to_string())?;
        let attrs = |id: &str, kind: &str| -> std::result::Result<Vec<_>, String> {
            let empty = serde_json::Map::new();
            payload["attrs"]
                .as_object()
                .unwrap_or(&empty)
                .iter()
                .map(|(n, v)| {
                    let v = v.as_str().unwrap_or_default();
                    schema
                        .parse_value(id, kind, n, v)
                        .map(|v| (n.clone(), v))
                        .map_err(|e| e.to_string())
                })
                .collect()
        };
        let (id, change) = match text("change").as_str() {
            "add" => {
                let kind = text("type");
                let attrs = attrs("", &kind)?;
                (None, EntityChange::Add { kind, attrs })
            }
            "set" => {
                let id = text("id");
                let kind = id.split(':').next().unwrap_or_default().to_string();
                let attrs = attrs(&id, &kind)?;
                (Some(id), EntityChange::Set(attrs))
            }
            "restore" => {
                let change = match text("object").as_str() {
                    "" => EntityChange::Remove,
                    hex => {
                        let obj = Id::from_hex(hex).ok_or("the payload's object is not an id")?;
                        EntityChange::Restore(
                            self.repo.entity_object(&obj).map_err(|e| e.to_string())?,
                        )
                    }
                };
                (Some(text("id")), change)
            }
            other => return Err(format!("unknown entity change {other:?}")),
        };
        let verb = payload["change"].as_str().unwrap_or_default().to_string();
        self.repo
            .change_entity(id.as_deref(), change)
            .map(|(op, id, _)| (op, format!("entity {id}: {verb}")))
            .map_err(|e| e.to_string())
    }
}

/// What running one action came to.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The action.
    pub action: String,
    /// Its state after.
    pub state: State,
    /// The receipt's reason (or why nothing was done).
    pub reason: String,
    /// The receipt written, if one was.
    pub receipt: Option<Id>,
}
