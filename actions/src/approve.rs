//! Approvals: approve (pinning the payload's hash, its TTL and what it will run), reject,
//! edit a pending payload, and resolve an action whose run was left uncertain.

use super::*;

impl<'r> Actions<'r> {
    /// The approval record of action `id` (after `prev`) for a payload hashing to
    /// `pinned`, for `ttl_ms`, by `by`: its pins taken now, sealed with this repository's
    /// key.
    pub(crate) fn approval(
        &self,
        id: &str,
        prev: Option<Id>,
        by: &str,
        (payload, pinned): (&[u8], Id),
        ttl_ms: i64,
    ) -> Result<ActionRecord> {
        let json: Json = serde_json::from_slice(payload).unwrap_or(Json::Null);
        let env = pins::inherited(&|k| std::env::var(k).ok());
        let pinned_more = pins::pin(&json, self.repo.workdir(), env).map_err(|why| {
            ActionsError::Refused(format!(
                "action {id} cannot be approved: what it runs cannot be pinned ({why})"
            ))
        })?;
        let stage = Stage::Approved {
            pinned,
            ttl_ms,
            pins: pinned_more.map(|p| p.encode()).unwrap_or_default(),
            seal: None,
        };
        self.sealed(record(id, prev, by, stage))
    }

    /// Approves action `id`'s payload as it is now, for `ttl_ms`; with `expected`, only
    /// if the payload's hash (in hex) starts with it, so that a payload edited since the
    /// person read it is never approved unseen. Returns the hash pinned.
    ///
    /// The approval holds here only (it is sealed with this repository's key), for at
    /// most [`MAX_TTL_MS`], for an action of a rules file trusted here; it pins what a
    /// command runs ([`pins`]).
    pub fn approve(&self, id: &str, ttl_ms: i64, expected: Option<&str>) -> Result<Id> {
        if !(1..=MAX_TTL_MS).contains(&ttl_ms) {
            return Err(ActionsError::Refused(format!(
                "an approval holds from 1 ms to 30 days, not {ttl_ms} ms"
            )));
        }
        let (held, newest, a) = self.hold_action(id)?;
        let hash = a.payload_hash();
        if expected.is_some_and(|h| h.is_empty() || !hash.has_hex_prefix(h)) {
            return Err(ActionsError::Refused(format!(
                "action {}'s payload hash is {}, not {:?}: its payload changed since you read it; read it again with `lifeos actions show {}`",
                a.id,
                hash.to_hex(),
                expected.unwrap_or_default(),
                a.id
            )));
        }
        match self.state(&a) {
            State::Pending
            | State::Fresh
            | State::NearingExpiry
            | State::Expired
            | State::Tampered
            | State::ApprovedElsewhere
            | State::Blocked => {}
            other => {
                return Err(ActionsError::Refused(format!(
                    "action {} is {}: there is nothing to approve",
                    a.id,
                    other.name()
                )))
            }
        }
        if !self.was_trusted(&a.rules_file)? {
            return Err(ActionsError::Refused(format!(
                "action {} comes from {RULES_FILE} {}, which this repository never trusted: read it (`lifeos rules check`) and trust it (`lifeos rules trust`) first",
                a.id,
                a.rules_file.short(12)
            )));
        }
        let rec = self.approval(id, Some(newest), &self.me, (&a.payload, hash), ttl_ms)?;
        held.publish(
            self.repo,
            std::slice::from_ref(&rec),
            Vec::new(),
            &format!("approve action {id}"),
        )?;
        Ok(hash)
    }

    /// Rejects action `id`: it never runs.
    pub fn reject(&self, id: &str) -> Result<Id> {
        let (_, rec) = self.advance(id, "reject", &|a, s| {
            if s.is_final() || matches!(s, State::Running | State::Uncertain) {
                Err(format!(
                    "action {} is {}: too late to reject",
                    a.id,
                    s.name()
                ))
            } else {
                Ok(Stage::Rejected)
            }
        })?;
        Ok(rec)
    }

    /// Replaces action `id`'s payload (an approval given before then no longer holds).
    pub fn edit(&self, id: &str, payload: &Json) -> Result<Id> {
        let bytes = serde_json::to_vec(payload).expect("JSON values serialize");
        let (_, rec) = self.advance(id, "edit", &|a, s| {
            let old: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
            if s.is_final() || matches!(s, State::Running | State::Uncertain) {
                Err(format!("action {} is {}: too late to edit", a.id, s.name()))
            } else if old["kind"] != payload["kind"] {
                Err(format!(
                    "the payload of action {} is a {} action; the new one must be too",
                    a.id, old["kind"]
                ))
            } else {
                Ok(Stage::Edited {
                    payload: bytes.clone(),
                })
            }
        })?;
        Ok(rec)
    }

    /// Says what happened to action `id`, whose outcome was uncertain.
    pub fn resolve(&self, id: &str, ran: bool) -> Result<Id> {
        let (_, rec) = self.advance(id, "resolve", &|a, s| match s {
            State::Uncertain => Ok(Stage::Resolved { ran }),
            other => Err(format!(
                "action {} is {}, not uncertain: nothing to resolve",
                a.id,
                other.name()
            )),
        })?;
        Ok(rec)
    }
}
