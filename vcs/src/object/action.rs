//! Action records: what an automation proposed, who approved or rejected it, when it
//! started, and what came of it (the receipt). Each record is an immutable object
//! ([`Kind::Action`]) naming the action's previous record, so an action's history is a
//! chain from its newest record back to its proposal. A view's action root is a Merkle map
//! (the same trie as the entity root) from action id to the newest record; every record
//! is also named by an event of the operation that wrote it, so the operation log is the
//! audit trail. See `docs/FORMAT.md` (7.12).
//!
//! This module holds the format and its merge rule, which the history core needs to merge
//! concurrent operations; writing records under the actions lock, and what the records
//! mean (rules, states, running), is `lifeos-actions`.

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::merkle_map::MapConflict;
use crate::object::{read_opt_id, write_opt_id};
use crate::repo::Repo;

/// Format version of an action record (version 1, read still, had no `effect` in a
/// finished record; version 2 has no pins or seal in an approval, and is still written
/// for every record that has neither).
pub const ACTION_VERSION: u8 = 3;

/// How an action ended (a receipt's outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and succeeded.
    Executed,
    /// It was refused before running (the reason names why).
    Blocked,
    /// It ran and failed (exit status, HTTP status, timeout).
    Failed,
    /// Nothing was done: a duplicate of an action already proposed.
    Noop,
}

impl Outcome {
    /// Its name in receipts and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Executed => "executed",
            Outcome::Blocked => "blocked",
            Outcome::Failed => "failed",
            Outcome::Noop => "noop",
        }
    }

    fn code(self) -> u8 {
        match self {
            Outcome::Executed => 1,
            Outcome::Blocked => 2,
            Outcome::Failed => 3,
            Outcome::Noop => 4,
        }
    }

    fn from_code(c: u8) -> Option<Outcome> {
        Some(match c {
            1 => Outcome::Executed,
            2 => Outcome::Blocked,
            3 => Outcome::Failed,
            4 => Outcome::Noop,
            _ => return None,
        })
    }
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// A rule fired and proposed this action, fully rendered.
    Proposed {
        /// The rule's name.
        rule: String,
        /// The rules file version the rule was read from.
        rules_file: Id,
        /// The triggering event, as JSON.
        event: String,
        /// The operation that caused the event, if one did.
        trigger_op: Option<Id>,
        /// The payload: what will run, as canonical JSON.
        payload: Vec<u8>,
        /// The action this one compensates (a rollback), if any.
        compensates: Option<String>,
    },
    /// The payload was replaced (an approval given before no longer matches it).
    Edited {
        /// The new payload.
        payload: Vec<u8>,
    },
    /// A person approved the payload whose hash is `pinned`, for `ttl_ms`.
    Approved {
        /// BLAKE3 of the approved payload.
        pinned: Id,
        /// How long the approval holds, from the record's time.
        ttl_ms: i64,
        /// What the approval pins beside the payload, as canonical JSON (a command's
        /// resolved program and its hash, the in-repository files its arguments name
        /// and theirs, the environment it gets); empty when there is nothing to pin,
        /// and in approvals before version 3.
        pins: Vec<u8>,
        /// The approving repository's seal: a keyed BLAKE3 hash of this record without
        /// it, under a key that never leaves that repository's store. Only approvals
        /// that this repository sealed run here (none before version 3).
        seal: Option<Id>,
    },
    /// A person rejected the action.
    Rejected,
    /// A process is about to cause the side effect: until a receipt follows, the outcome
    /// is uncertain and the action is never run again blindly.
    Started,
    /// The receipt: how it ended.
    Finished {
        /// The outcome.
        outcome: Outcome,
        /// Why (`payload_hash_mismatch`, `approval_expired`, `exit status 2`, ...).
        reason: String,
        /// When the side effect started (the record's time is when it ended).
        started_ms: i64,
        /// The exit status of a command or the HTTP status of a request.
        status: Option<i64>,
        /// Captured output (redacted), as a stored file.
        output: Option<Id>,
        /// The operation an internal action published (what `rollback` reverts).
        effect: Option<Id>,
    },
    /// A person said what happened to a run whose outcome was uncertain.
    Resolved {
        /// Whether the side effect happened.
        ran: bool,
    },
}

impl Stage {
    /// The stage's name in `--json` and listings.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Proposed { .. } => "proposed",
            Stage::Edited { .. } => "edited",
            Stage::Approved { .. } => "approved",
            Stage::Rejected => "rejected",
            Stage::Started => "started",
            Stage::Finished { .. } => "finished",
            Stage::Resolved { .. } => "resolved",
        }
    }
}

/// One record of an action's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRecord {
    /// The action's id (hexadecimal: the idempotency key's hash, or unique for a
    /// duplicate's noop receipt).
    pub action: String,
    /// The action's previous record (`None` for the first).
    pub prev: Option<Id>,
    /// When it was recorded (ms since the epoch).
    pub at_ms: i64,
    /// Who recorded it (user@host).
    pub by: String,
    /// The process that recorded it.
    pub pid: u32,
    /// What it says.
    pub stage: Stage,
}

fn write_opt_str(w: &mut Writer, s: &Option<String>) {
    match s {
        Some(s) => w.u8(1).bytes(s.as_bytes()),
        None => w.u8(0),
    };
}

fn read_opt_str(
    r: &mut Reader<'_>,
    what: &'static str,
) -> std::result::Result<Option<String>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.str(what)?.to_string())),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}

impl ActionRecord {
    /// The version its encoding needs: 3 for an approval with pins or a seal, 2 for
    /// everything else (so records without them keep the bytes, and ids, they had).
    fn version(&self) -> u8 {
        match &self.stage {
            Stage::Approved { pins, seal, .. } if !pins.is_empty() || seal.is_some() => 3,
            _ => 2,
        }
    }

    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::Action as u8, self.version());
        w.bytes(self.action.as_bytes());
        write_opt_id(&mut w, &self.prev);
        w.int(self.at_ms)
            .bytes(self.by.as_bytes())
            .uint(u64::from(self.pid));
        match &self.stage {
            Stage::Proposed {
                rule,
                rules_file,
                event,
                trigger_op,
                payload,
                compensates,
            } => {
                w.u8(1)
                    .bytes(rule.as_bytes())
                    .id(rules_file)
                    .bytes(event.as_bytes());
                write_opt_id(&mut w, trigger_op);
                w.bytes(payload);
                write_opt_str(&mut w, compensates);
            }
            Stage::Edited { payload } => {
                w.u8(2).bytes(payload);
            }
            Stage::Approved {
                pinned,
                ttl_ms,
                pins,
                seal,
            } => {
                w.u8(3).id(pinned).int(*ttl_ms);
                if self.version() >= 3 {
                    w.bytes(pins);
                    write_opt_id(&mut w, seal);
                }
            }
            Stage::Rejected => {
                w.u8(4);
            }
            Stage::Started => {
                w.u8(5);
            }
            Stage::Finished {
                outcome,
                reason,
                started_ms,
                status,
                output,
                effect,
            } => {
                w.u8(6)
                    .u8(outcome.code())
                    .bytes(reason.as_bytes())
                    .int(*started_ms);
                match status {
                    Some(s) => w.u8(1).int(*s),
                    None => w.u8(0),
                };
                write_opt_id(&mut w, output);
                write_opt_id(&mut w, effect);
            }
            Stage::Resolved { ran } => {
                w.u8(7).u8(u8::from(*ran));
            }
        }
        w.finish()
    }

    /// Decodes a record.
    pub fn decode(bytes: &[u8]) -> std::result::Result<ActionRecord, DecodeError> {
        const W: &str = "action record";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Action as u8, ACTION_VERSION)?;
        let action = r.str(W)?.to_string();
        let prev = read_opt_id(&mut r, W)?;
        let at_ms = r.int(W)?;
        let by = r.str(W)?.to_string();
        let pid = u32::try_from(r.uint(W)?).map_err(|_| DecodeError::new(W, "pid too large"))?;
        let stage = match r.u8(W)? {
            1 => Stage::Proposed {
                rule: r.str(W)?.to_string(),
                rules_file: r.id(W)?,
                event: r.str(W)?.to_string(),
                trigger_op: read_opt_id(&mut r, W)?,
                payload: r.bytes(W)?.to_vec(),
                compensates: read_opt_str(&mut r, W)?,
            },
            2 => Stage::Edited {
                payload: r.bytes(W)?.to_vec(),
            },
            3 => {
                let pinned = r.id(W)?;
                let ttl_ms = r.int(W)?;
                let (pins, seal) = if version >= 3 {
                    (r.bytes(W)?.to_vec(), read_opt_id(&mut r, W)?)
                } else {
                    (Vec::new(), None)
                };
                Stage::Approved {
                    pinned,
                    ttl_ms,
                    pins,
                    seal,
                }
            }
            4 => Stage::Rejected,
            5 => Stage::Started,
            6 => {
                let code = r.u8(W)?;
                let outcome = Outcome::from_code(code)
                    .ok_or_else(|| DecodeError::new(W, format!("unknown outcome {code}")))?;
                let reason = r.str(W)?.to_string();
                let started_ms = r.int(W)?;
                let status = match r.u8(W)? {
                    0 => None,
                    1 => Some(r.int(W)?),
                    x => return Err(DecodeError::new(W, format!("bad option flag {x}"))),
                };
                Stage::Finished {
                    outcome,
                    reason,
                    started_ms,
                    status,
                    output: read_opt_id(&mut r, W)?,
                    effect: if version >= 2 {
                        read_opt_id(&mut r, W)?
                    } else {
                        None
                    },
                }
            }
            7 => Stage::Resolved {
                ran: match r.u8(W)? {
                    0 => false,
                    1 => true,
                    x => return Err(DecodeError::new(W, format!("bad flag {x}"))),
                },
            },
            x => return Err(DecodeError::new(W, format!("unknown stage {x}"))),
        };
        r.finish(W)?;
        Ok(ActionRecord {
            action,
            prev,
            at_ms,
            by,
            pid,
            stage,
        })
    }
}

/// Reads record `id` (from `tx`'s objects or the store).
pub fn read_record(tx: &Transaction<'_>, id: &Id) -> Result<ActionRecord> {
    let raw = tx.read_object(id, Kind::Action)?;
    ActionRecord::decode(&raw).map_err(|source| VcsError::Decode {
        kind: "action record",
        id: *id,
        source,
    })
}

/// Reads record `id` from the store.
pub fn stored_record(repo: &Repo, id: &Id) -> Result<ActionRecord> {
    let raw = repo.store().read_object(id, Kind::Action)?;
    ActionRecord::decode(&raw).map_err(|source| VcsError::Decode {
        kind: "action record",
        id: *id,
        source,
    })
}

/// How far along an action's chain is, to settle two concurrent records of one action
/// (an operation merge): a receipt beats a start, a start beats a rejection, and a
/// rejection beats an approval, whichever came later: a "no" given on one device is
/// never lost to a "yes" given on another.
fn rank(stage: &Stage) -> u8 {
    match stage {
        Stage::Proposed { .. } | Stage::Edited { .. } => 0,
        Stage::Approved { .. } => 1,
        Stage::Rejected => 2,
        Stage::Started => 3,
        Stage::Finished { .. } | Stage::Resolved { .. } => 4,
    }
}

/// Merges the action roots of concurrent views: an action changed on one side only takes
/// that side's record; changed on several, the record further along wins (its chain, and
/// every record, stays in the operation log).
pub(crate) fn merge_roots(
    tx: &mut Transaction<'_>,
    base: Option<Id>,
    sides: &[Option<Id>],
) -> Result<Option<Id>> {
    crate::merkle_map::merge_map_roots(tx, base, sides, &mut |tx, c: &MapConflict| {
        let pick = |id: Option<Id>| -> Result<Option<(u8, i64, Id)>> {
            id.map(|i| read_record(tx, &i).map(|r| (rank(&r.stage), r.at_ms, i)))
                .transpose()
        };
        let (o, t) = (pick(c.ours)?, pick(c.theirs)?);
        Ok(o.max(t).map(|(_, _, id)| id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stages() -> Vec<Stage> {
        vec![
            Stage::Proposed {
                rule: "invoices".into(),
                rules_file: Id::hash(b"rules"),
                event: "{\"path\":\"a.pdf\"}".into(),
                trigger_op: Some(Id::hash(b"op")),
                payload: b"{\"kind\":\"http\"}".to_vec(),
                compensates: Some("0123456789abcdef".into()),
            },
            Stage::Edited {
                payload: b"{}".to_vec(),
            },
            Stage::Approved {
                pinned: Id::hash(b"p"),
                ttl_ms: 3_600_000,
                pins: Vec::new(),
                seal: None,
            },
            Stage::Approved {
                pinned: Id::hash(b"p"),
                ttl_ms: 3_600_000,
                pins: b"{\"program\":{}}".to_vec(),
                seal: Some(Id::hash(b"seal")),
            },
            Stage::Rejected,
            Stage::Started,
            Stage::Finished {
                outcome: Outcome::Failed,
                reason: "exit status 2".into(),
                started_ms: -5,
                status: Some(2),
                output: Some(Id::hash(b"out")),
                effect: None,
            },
            Stage::Finished {
                outcome: Outcome::Noop,
                reason: String::new(),
                started_ms: 0,
                status: None,
                output: None,
                effect: Some(Id::hash(b"op")),
            },
            Stage::Resolved { ran: true },
        ]
    }

    #[test]
    fn records_round_trip_and_refuse_what_they_do_not_know() {
        for (i, stage) in stages().into_iter().enumerate() {
            let r = ActionRecord {
                action: "0123456789abcdef".into(),
                prev: (i % 2 == 0).then(|| Id::hash(b"prev")),
                at_ms: 1_765_000_000_000,
                by: "ann@desk".into(),
                pid: 4242,
                stage,
            };
            let bytes = r.encode();
            assert_eq!(ActionRecord::decode(&bytes).unwrap(), r);
            let mut later = bytes.clone();
            later[1] = ACTION_VERSION + 1;
            assert!(ActionRecord::decode(&later).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(ActionRecord::decode(&longer).is_err());
        }
    }

    /// Records written before finished records named their effect (version 1) still
    /// read: the bytes below are what lifeos wrote then.
    #[test]
    fn version_1_records_still_read() {
        let mut w = Writer::with_header(Kind::Action as u8, 1);
        w.bytes(b"0123456789abcdef");
        write_opt_id(&mut w, &None);
        w.int(5).bytes(b"ann@desk").uint(7);
        w.u8(6).u8(1).bytes(b"HTTP 200").int(4).u8(1).int(200);
        write_opt_id(&mut w, &Some(Id::hash(b"out")));
        let r = ActionRecord::decode(&w.finish()).unwrap();
        assert_eq!(
            r.stage,
            Stage::Finished {
                outcome: Outcome::Executed,
                reason: "HTTP 200".into(),
                started_ms: 4,
                status: Some(200),
                output: Some(Id::hash(b"out")),
                effect: None,
            }
        );
    }

    proptest! {
        #[test]
        fn the_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = ActionRecord::decode(&data);
        }
    }
}
