//! Time travel: the operation `--at` names, by an id prefix or by a moment.

use super::*;

impl Repo {
    /// The operation whose id starts with `prefix` (4 or more hex digits), found through
    /// the repository's operation index.
    pub fn resolve_op(&self, prefix: &str) -> Result<Id> {
        let lower = crate::prefix::hex_prefix(prefix, IdKind::Operation)?;
        let ids = self.op_index().ops_with_prefix(self, &lower)?;
        crate::prefix::exactly_one(ids, prefix, IdKind::Operation, |i| i.short(16))
    }

    /// Resolves `--at WHEN` to the operation whose view it means.
    pub fn op_at(&self, when: &str) -> Result<OpAsOf> {
        let now = jiff::Timestamp::from_millisecond(now_ms())
            .map_err(|e| VcsError::BadTime(e.to_string()))?
            .to_zoned(jiff::tz::TimeZone::system());
        let parsed = parse_when(when, &now).map_err(VcsError::BadTime)?;
        let index = self.op_index();
        match parsed {
            When::Operation(prefix) => Ok(OpAsOf {
                state: self.op_state(&self.resolve_op(&prefix)?)?,
                asked_ms: None,
            }),
            When::Time(t) => {
                let Some((first, _)) = index.op_time_range(self)? else {
                    return Err(VcsError::Inconsistent("the operation log is empty".into()));
                };
                if t > now.timestamp().as_millisecond() + 1000 {
                    return Err(VcsError::BadTime(format!("{when:?} is in the future")));
                }
                if t < first {
                    return Err(VcsError::BadTime(format!(
                        "{when:?} is before the repository existed (its first operation is at {})",
                        jiff::Timestamp::from_millisecond(first)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    )));
                }
                let id = index.op_at(self, t)?.ok_or_else(|| {
                    VcsError::Inconsistent(format!(
                        "the operation index has operations from {first} ms but none at or before {t} ms; run `lifeos reindex`"
                    ))
                })?;
                Ok(OpAsOf {
                    state: self.op_state(&id)?,
                    asked_ms: Some(t),
                })
            }
        }
    }
}

/// Which operation a `--at` resolved to.
#[derive(Debug, Clone)]
pub struct OpAsOf {
    /// The operation.
    pub state: OpState,
    /// What the user asked for, resolved to a time (ms), if it was a time.
    pub asked_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;

    /// An operation is found by any unique prefix of 4 or more hex digits, in either
    /// case, and `--at` with that prefix means it; too short, not hex and unknown
    /// prefixes are refused with the error of their kind (ambiguity: `prefix`'s tests).
    #[test]
    fn resolve_op_finds_an_operation_by_a_unique_prefix_and_names_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let op = crate::testing::commit_folder(&repo, b"a").op.unwrap();
        let hex = op.to_hex();
        assert_eq!(repo.resolve_op(&hex[..12]).unwrap(), op);
        assert_eq!(repo.resolve_op(&hex[..12].to_uppercase()).unwrap(), op);
        assert_eq!(repo.op_at(&hex[..12]).unwrap().state.id, op);
        assert!(matches!(
            repo.resolve_op(&hex[..3]),
            Err(VcsError::NotAnId { .. })
        ));
        assert!(matches!(
            repo.resolve_op("zzzz"),
            Err(VcsError::NotAnId { .. })
        ));
        // A prefix no operation has: change the first digit of a full id.
        let other = format!(
            "{}{}",
            if hex.starts_with('0') { '1' } else { '0' },
            &hex[1..]
        );
        assert!(matches!(
            repo.resolve_op(&other),
            Err(VcsError::NoSuchId { .. })
        ));
    }
}
