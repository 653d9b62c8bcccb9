//! What an action's records say: its payload, its approval and where it stands.

use lifeos_store::Id;
use lifeos_vcs::object::action::{ActionRecord, Outcome, Stage};

/// How far in the future an approval may be dated before it is refused: clocks of one
/// machine's processes agree, so this is only for a clock corrected meanwhile.
pub const CLOCK_SKEW_MS: i64 = 5 * 60_000;

/// An approval as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Who approved.
    pub by: String,
    /// When (ms since the epoch).
    pub at_ms: i64,
    /// How long it holds.
    pub ttl_ms: i64,
    /// The payload hash it pins.
    pub pinned: Id,
    /// What else it pins (a command's program, files and environment:
    /// [`crate::pins::Pins`]), as recorded; empty when nothing.
    pub pins: Vec<u8>,
    /// The record, as written (its seal says which repository approved it).
    pub record: ActionRecord,
}

impl Approval {
    /// When it expires.
    pub fn expires_ms(&self) -> i64 {
        self.at_ms.saturating_add(self.ttl_ms)
    }
}

/// Where an action stands in its life (before the approval is weighed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a person (never approved, or approved and then edited or blocked).
    Waiting,
    /// Rejected: it never runs.
    Rejected,
    /// A process recorded that it was starting the side effect, and no receipt followed.
    Started {
        /// Who (user@host).
        by: String,
        /// The process.
        pid: u32,
        /// When.
        at_ms: i64,
    },
    /// Finished: the receipt's outcome and reason.
    Done(Outcome, String),
}

/// An action, read from its records.
#[derive(Debug, Clone)]
pub struct Action {
    /// Its id.
    pub id: String,
    /// The rule that proposed it.
    pub rule: String,
    /// The rules file version the rule came from.
    pub rules_file: Id,
    /// The triggering event (JSON).
    pub event: String,
    /// The operation that caused the event.
    pub trigger_op: Option<Id>,
    /// The payload as it is now.
    pub payload: Vec<u8>,
    /// When it was proposed.
    pub proposed_ms: i64,
    /// The action it compensates (a rollback), if any.
    pub compensates: Option<String>,
    /// The newest approval, if any.
    pub approval: Option<Approval>,
    /// Where it stands.
    pub phase: Phase,
    /// Its records, oldest first.
    pub records: Vec<(Id, ActionRecord)>,
}

/// The state a person sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not approved.
    Pending,
    /// Approved, well within its TTL.
    Fresh,
    /// Approved, in the last quarter of its TTL.
    NearingExpiry,
    /// Approved, but the TTL has passed: running it is refused.
    Expired,
    /// Approved, but the payload changed since: running it is refused.
    Tampered,
    /// Approved on another device (or before approvals were sealed): it runs only where
    /// it was approved, until it is approved here too.
    ApprovedElsewhere,
    /// Rejected.
    Rejected,
    /// Being run by a live process.
    Running,
    /// Started by a process that is gone, with no receipt: it may or may not have run.
    Uncertain,
    /// Ran and succeeded.
    Executed,
    /// Ran and failed.
    Failed,
    /// Refused when it was to run (see the receipt's reason); may be approved again.
    Blocked,
    /// A duplicate: nothing done.
    Noop,
}

impl State {
    /// Its name in listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Fresh => "fresh",
            State::NearingExpiry => "nearing_expiry",
            State::Expired => "expired",
            State::Tampered => "tampered",
            State::ApprovedElsewhere => "approved_elsewhere",
            State::Rejected => "rejected",
            State::Running => "running",
            State::Uncertain => "uncertain",
            State::Executed => "executed",
            State::Failed => "failed",
            State::Blocked => "blocked",
            State::Noop => "noop",
        }
    }

    /// Whether nothing more will happen to the action.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            State::Rejected | State::Executed | State::Failed | State::Noop
        )
    }
}

/// Whether process `pid` of this host is alive.
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Action {
    /// Reads an action from its records, oldest first (`None` if the first is not a
    /// proposal, which only a noop receipt lacks).
    pub fn from_records(records: Vec<(Id, ActionRecord)>) -> Option<Action> {
        let (_, first) = records.first()?;
        let Stage::Proposed {
            rule,
            rules_file,
            event,
            trigger_op,
            payload,
            compensates,
        } = &first.stage
        else {
            return None;
        };
        let mut a = Action {
            id: first.action.clone(),
            rule: rule.clone(),
            rules_file: *rules_file,
            event: event.clone(),
            trigger_op: *trigger_op,
            payload: payload.clone(),
            proposed_ms: first.at_ms,
            compensates: compensates.clone(),
            approval: None,
            phase: Phase::Waiting,
            records: Vec::new(),
        };
        for (_, r) in &records[1..] {
            match &r.stage {
                Stage::Proposed { .. } => {}
                Stage::Edited { payload } => a.payload = payload.clone(),
                Stage::Approved {
                    pinned,
                    ttl_ms,
                    pins,
                    ..
                } => {
                    a.approval = Some(Approval {
                        by: r.by.clone(),
                        at_ms: r.at_ms,
                        ttl_ms: *ttl_ms,
                        pinned: *pinned,
                        pins: pins.clone(),
                        record: r.clone(),
                    });
                    if matches!(a.phase, Phase::Done(Outcome::Blocked, _)) {
                        a.phase = Phase::Waiting;
                    }
                }
                Stage::Rejected => a.phase = Phase::Rejected,
                Stage::Started => {
                    a.phase = Phase::Started {
                        by: r.by.clone(),
                        pid: r.pid,
                        at_ms: r.at_ms,
                    }
                }
                Stage::Finished {
                    outcome, reason, ..
                } => a.phase = Phase::Done(*outcome, reason.clone()),
                Stage::Resolved { ran: true } => {
                    a.phase = Phase::Done(Outcome::Executed, "resolved by hand: it ran".into())
                }
                Stage::Resolved { ran: false } => a.phase = Phase::Waiting,
            }
        }
        a.records = records;
        Some(a)
    }

    /// The BLAKE3 hash of the payload as it is now.
    pub fn payload_hash(&self) -> Id {
        Id::hash(&self.payload)
    }

    /// The state at `now_ms`, seen by process `me` (`user@host`) of the repository whose
    /// approvals `sealed_here` recognises.
    pub fn state(&self, now_ms: i64, me: &str, sealed_here: &dyn Fn(&Approval) -> bool) -> State {
        match &self.phase {
            Phase::Rejected => State::Rejected,
            Phase::Done(Outcome::Executed, _) => State::Executed,
            Phase::Done(Outcome::Failed, _) => State::Failed,
            Phase::Done(Outcome::Noop, _) => State::Noop,
            Phase::Done(Outcome::Blocked, _) => State::Blocked,
            Phase::Started { by, pid, .. } => {
                if by == me && alive(*pid) {
                    State::Running
                } else {
                    State::Uncertain
                }
            }
            Phase::Waiting => match &self.approval {
                None => State::Pending,
                Some(a) if !sealed_here(a) => State::ApprovedElsewhere,
                Some(a) if a.pinned != self.payload_hash() => State::Tampered,
                // A clock put back revives nothing: an approval dated ahead of now is
                // no approval.
                Some(a) if a.at_ms > now_ms + CLOCK_SKEW_MS => State::Expired,
                Some(a) if now_ms >= a.expires_ms() => State::Expired,
                Some(a) if a.expires_ms() - now_ms <= a.ttl_ms / 4 => State::NearingExpiry,
                Some(_) => State::Fresh,
            },
        }
    }

    /// What the triggering event concerned: the path of a commit's change, or the hook.
    pub fn event_summary(&self) -> String {
        let e: serde_json::Value = serde_json::from_str(&self.event).unwrap_or_default();
        e["path"]
            .as_str()
            .or(e["hook"].as_str())
            .unwrap_or_default()
            .to_string()
    }

    /// The newest record's id.
    pub fn newest(&self) -> Id {
        self.records.last().expect("an action has records").0
    }
}
