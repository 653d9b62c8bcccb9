//! Looking operations and commits up by what the objects do not name: an operation by a
//! prefix of its id or by a time, every commit an operation's view reaches.
//!
//! The objects answer every such question by a walk (the operation log from its heads,
//! the commit graph from a view's commits), which is what [`StoreWalk`] does. An index
//! answers the same faster: the catalog implements [`OpIndex`] over its tables, and the
//! application installs it on the repositories it opens ([`Repo::set_op_index`]), as
//! Jujutsu's `Index` trait lets its default index stand in for a walk. Whatever is
//! installed must answer exactly what the walk answers.

use std::collections::HashSet;

use lifeos_store::Id;

use crate::error::Result;
use crate::object::Commit;
use crate::repo::Repo;

/// Operation and commit lookups (FORMAT 12.5 says what each means).
pub trait OpIndex: Send + Sync {
    /// Every commit reachable from `roots` (the roots included), in no particular order.
    fn reachable_commits(&self, repo: &Repo, roots: &[Id]) -> Result<Vec<(Id, Commit)>>;

    /// The operations whose hex id starts with `prefix`.
    fn ops_with_prefix(&self, repo: &Repo, prefix: &str) -> Result<Vec<Id>>;

    /// The end times of the first and the last operation, `None` for an empty log.
    fn op_time_range(&self, repo: &Repo) -> Result<Option<(i64, i64)>>;

    /// The newest operation that ended at or before `t_ms` (of two that ended at the
    /// same millisecond, the greater id).
    fn op_at(&self, repo: &Repo, t_ms: i64) -> Result<Option<Id>>;
}

/// The lookups as walks over the objects: the default, and what an index must equal.
#[derive(Debug, Default, Clone, Copy)]
pub struct StoreWalk;

impl StoreWalk {
    /// Every operation reachable from the heads, with its end time.
    fn operations(repo: &Repo) -> Result<Vec<(Id, i64)>> {
        let mut seen = HashSet::new();
        let mut stack = repo.op_heads()?;
        let mut out = Vec::new();
        while let Some(id) = stack.pop() {
            if seen.insert(id) {
                repo.interrupt.check()?;
                let op = repo.operation(&id)?;
                stack.extend(op.parents.iter().copied());
                out.push((id, op.end_ms));
            }
        }
        Ok(out)
    }
}

impl OpIndex for StoreWalk {
    fn reachable_commits(&self, repo: &Repo, roots: &[Id]) -> Result<Vec<(Id, Commit)>> {
        let mut seen = HashSet::new();
        let mut stack = roots.to_vec();
        let mut out = Vec::new();
        while let Some(id) = stack.pop() {
            if seen.insert(id) {
                let c = repo.commit(&id)?;
                stack.extend(c.parents.iter().copied());
                out.push((id, c));
            }
        }
        Ok(out)
    }

    fn ops_with_prefix(&self, repo: &Repo, prefix: &str) -> Result<Vec<Id>> {
        let mut ids: Vec<Id> = Self::operations(repo)?
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| id.has_hex_prefix(prefix))
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn op_time_range(&self, repo: &Repo) -> Result<Option<(i64, i64)>> {
        let ops = Self::operations(repo)?;
        let first = ops.iter().map(|o| o.1).min();
        let last = ops.iter().map(|o| o.1).max();
        Ok(first.zip(last))
    }

    fn op_at(&self, repo: &Repo, t_ms: i64) -> Result<Option<Id>> {
        Ok(Self::operations(repo)?
            .into_iter()
            .filter(|o| o.1 <= t_ms)
            .max_by_key(|o| (o.1, o.0))
            .map(|o| o.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk finds operations by prefix and by time as FORMAT 12.5 says.
    #[test]
    fn the_walk_answers_prefix_and_time_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        for m in ["one", "two"] {
            std::fs::write(dir.path().join("f"), m).unwrap();
            crate::testing::commit_folder(&repo, m.as_bytes());
        }
        let walk = StoreWalk;
        let head = repo.head().unwrap();
        let hex = head.id.to_hex();
        assert_eq!(walk.ops_with_prefix(&repo, &hex[..8]).unwrap(), [head.id]);
        assert!(walk.ops_with_prefix(&repo, "zz").unwrap().is_empty());
        let (first, last) = walk.op_time_range(&repo).unwrap().unwrap();
        assert!(first <= last);
        assert_eq!(last, head.op.end_ms);
        assert_eq!(walk.op_at(&repo, last).unwrap(), Some(head.id));
        assert_eq!(walk.op_at(&repo, first - 1).unwrap(), None);
        let commits = walk
            .reachable_commits(&repo, &head.view.referenced_commits())
            .unwrap();
        assert_eq!(commits.len(), 2);
    }
}
