//! Receipts: what each action's records say happened, read back as one list.

use super::*;

impl<'r> Actions<'r> {
    /// Every receipt, oldest first: the outcomes recorded, and `uncertain` for a start
    /// that no receipt followed and whose process is gone.
    pub fn receipts(&self) -> Result<Vec<Receipt>> {
        let head = self.repo.head()?;
        let mut chains = Vec::new();
        let mut compensations: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (_, newest) in records::all(self.repo, &head.view)? {
            let mut chain = records::chain(self.repo, &newest)?;
            chain.reverse();
            let parsed = Action::from_records(chain.clone());
            if let Some(of) = parsed.as_ref().and_then(|a| a.compensates.clone()) {
                let by = parsed.as_ref().map(|a| a.id.clone()).unwrap_or_default();
                compensations.entry(of).or_default().push(by);
            }
            chains.push((chain, parsed));
        }
        let mut out = Vec::new();
        for (chain, parsed) in chains {
            let rule = parsed.as_ref().map(|a| a.rule.clone());
            let trigger = parsed.as_ref().map(|a| (a.event.clone(), a.trigger_op));
            let compensates = parsed.as_ref().and_then(|a| a.compensates.clone());
            let compensated_by = parsed
                .as_ref()
                .and_then(|a| compensations.get(&a.id).cloned())
                .unwrap_or_default();
            let mut approval: Option<state::Approval> = None;
            let mut payload: Option<Vec<u8>> = None;
            let mut started: Option<(Id, &ActionRecord)> = None;
            // The receipt of a start that no outcome followed.
            let uncertain =
                |id: Id, r: &ActionRecord, payload: &Option<Vec<u8>>, approval| Receipt {
                    id,
                    action: r.action.clone(),
                    rule: rule.clone(),
                    trigger: trigger.clone(),
                    outcome: "uncertain",
                    reason: format!(
                        "process {} of {} started it and stopped before recording how it ended; \
                     `lifeos actions resolve {} --ran` or `--did-not-run`",
                        r.pid, r.by, r.action
                    ),
                    started_ms: r.at_ms,
                    ended_ms: r.at_ms,
                    status: None,
                    output: None,
                    effect: None,
                    payload_hash: payload.as_deref().map(Id::hash),
                    compensates: compensates.clone(),
                    compensated_by: compensated_by.clone(),
                    approval,
                    by: r.by.clone(),
                };
            for (id, r) in &chain {
                match &r.stage {
                    Stage::Proposed { payload: p, .. } | Stage::Edited { payload: p } => {
                        payload = Some(p.clone())
                    }
                    Stage::Approved {
                        pinned,
                        ttl_ms,
                        pins,
                        ..
                    } => {
                        approval = Some(state::Approval {
                            by: r.by.clone(),
                            at_ms: r.at_ms,
                            ttl_ms: *ttl_ms,
                            pinned: *pinned,
                            pins: pins.clone(),
                            record: r.clone(),
                        })
                    }
                    Stage::Started => started = Some((*id, r)),
                    Stage::Finished {
                        outcome,
                        reason,
                        started_ms,
                        status,
                        output,
                        effect,
                    } => {
                        started = None;
                        out.push(Receipt {
                            effect: *effect,
                            id: *id,
                            action: r.action.clone(),
                            rule: rule.clone(),
                            trigger: trigger.clone(),
                            outcome: outcome.name(),
                            reason: reason.clone(),
                            started_ms: *started_ms,
                            ended_ms: r.at_ms,
                            status: *status,
                            output: *output,
                            payload_hash: payload.as_deref().map(Id::hash),
                            compensates: compensates.clone(),
                            compensated_by: compensated_by.clone(),
                            approval: approval.clone(),
                            by: r.by.clone(),
                        });
                    }
                    // The uncertain start stays on record, and the person's answer is a
                    // receipt of its own.
                    Stage::Resolved { ran } => {
                        if let Some((sid, sr)) = started.take() {
                            out.push(uncertain(sid, sr, &payload, approval.clone()));
                            out.push(Receipt {
                                id: *id,
                                outcome: if *ran { "executed" } else { "failed" },
                                reason: if *ran {
                                    format!("{} said it ran", r.by)
                                } else {
                                    format!(
                                        "{} said it did not run; `lifeos actions run` may run it again",
                                        r.by
                                    )
                                },
                                ended_ms: r.at_ms,
                                by: r.by.clone(),
                                ..uncertain(sid, sr, &payload, approval.clone())
                            });
                        }
                    }
                    Stage::Rejected => {}
                }
            }
            let uncertain_now = parsed.is_some_and(|a| self.state(&a) == State::Uncertain);
            if let (Some((id, r)), true) = (started, uncertain_now) {
                out.push(uncertain(id, r, &payload, approval));
            }
        }
        out.sort_by_key(|r| (r.ended_ms, r.id));
        Ok(out)
    }

    /// The receipt whose id starts with `prefix`.
    pub fn receipt(&self, prefix: &str) -> Result<Receipt> {
        let found = self
            .receipts()?
            .into_iter()
            .filter(|r| r.id.has_hex_prefix(prefix))
            .collect();
        Ok(exactly_one(found, prefix, IdKind::Receipt, |r| {
            r.id.short(16)
        })?)
    }
}

/// A receipt: how one attempt at an action ended.
#[derive(Debug, Clone)]
pub struct Receipt {
    /// The record.
    pub id: Id,
    /// The action.
    pub action: String,
    /// The rule, if the action had a proposal.
    pub rule: Option<String>,
    /// The triggering event (JSON) and operation, if the action had a proposal.
    pub trigger: Option<(String, Option<Id>)>,
    /// `executed`, `blocked`, `failed`, `noop` or `uncertain`.
    pub outcome: &'static str,
    /// Why.
    pub reason: String,
    /// When the attempt started and ended.
    pub started_ms: i64,
    /// When it ended (the record's time; for `uncertain`, the start).
    pub ended_ms: i64,
    /// Exit status or HTTP status.
    pub status: Option<i64>,
    /// Captured output (a stored file).
    pub output: Option<Id>,
    /// The operation an internal action published.
    pub effect: Option<Id>,
    /// The payload's hash when it ended.
    pub payload_hash: Option<Id>,
    /// The action this one's action compensates (it came from a rollback), if any.
    pub compensates: Option<String>,
    /// The actions proposed to compensate this one's action (rollbacks of it).
    pub compensated_by: Vec<String>,
    /// The approval it ran under.
    pub approval: Option<state::Approval>,
    /// Who recorded it.
    pub by: String,
}
