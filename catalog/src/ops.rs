//! The operation and commit index: operations by time and by id prefix, the commits a
//! view reaches; and [`CatalogIndex`], the history core's `OpIndex` answered from it.

use super::*;

impl Catalog {
    /// The last operation that ended at or before `t_ms`.
    pub fn op_at(&self, t_ms: i64) -> Result<Option<OpRow>> {
        self.conn
            .query_row(OP_AT, [t_ms], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
            })
            .optional()
            .map_err(|e| db_err(&self.path, e))
            .map(|o| {
                o.and_then(|(id, end_ms)| {
                    Some(OpRow {
                        id: Id::from_slice(&id)?,
                        end_ms,
                    })
                })
            })
    }

    /// The first and last operation times.
    pub fn op_time_range(&self) -> Result<Option<(i64, i64)>> {
        self.conn
            .query_row(OP_TIME_RANGE, [], |r| {
                Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|(a, b)| a.zip(b))
    }

    /// Operations whose hex id starts with `prefix`.
    pub fn ops_with_prefix(&self, prefix: &str) -> Result<Vec<Id>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM operations WHERE id BETWEEN ?1 AND ?2")
            .map_err(|e| db_err(&self.path, e))?;
        // The ids the prefix can start: from it padded with 0s to it padded with fs.
        let bound = |pad: char| -> Vec<u8> {
            let mut hex: String = prefix.chars().take(64).collect();
            while hex.len() < 64 {
                hex.push(pad);
            }
            hex::decode(hex).unwrap_or_default()
        };
        let rows = stmt
            .query_map([bound('0'), bound('f')], |r| r.get::<_, Vec<u8>>(0))
            .map_err(|e| db_err(&self.path, e))?;
        let mut out = Vec::new();
        for r in rows {
            if let Some(id) = Id::from_slice(&r.map_err(|e| db_err(&self.path, e))?) {
                if id.has_hex_prefix(prefix) {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// The commits reachable from `roots`, read from the catalog (each must have been
    /// indexed by [`Catalog::sync`]; a missing one is read from the store).
    pub fn reachable_commits(
        &self,
        repo: &Repo,
        roots: &[Id],
    ) -> Result<Vec<(Id, lifeos_vcs::object::Commit)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT data FROM commits WHERE id = ?1")
            .map_err(|e| db_err(&self.path, e))?;
        let mut seen = std::collections::HashSet::new();
        let mut stack = roots.to_vec();
        let mut out = Vec::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let data: Option<Vec<u8>> = stmt
                .query_row([&id.0[..]], |r| r.get(0))
                .optional()
                .map_err(|e| db_err(&self.path, e))?;
            let c = match data {
                Some(d) if Id::hash(&d) == id => {
                    lifeos_vcs::object::Commit::decode(&d).map_err(|source| VcsError::Decode {
                        kind: "commit",
                        id,
                        source,
                    })?
                }
                _ => repo.commit(&id)?,
            };
            stack.extend(c.parents.iter().copied());
            out.push((id, c));
        }
        Ok(out)
    }

    /// Number of operations indexed.
    pub fn op_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM operations", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }
}

/// The operation `--at` a time reads: the newest that ended by then (12.5).
pub(crate) const OP_AT: &str =
    "SELECT id, end_ms FROM operations WHERE end_ms <= ?1 ORDER BY end_ms DESC, id DESC LIMIT 1";

/// The first and last operation times. Apart, each is one end of the index; as
/// `MIN(end_ms), MAX(end_ms)` of one query, SQLite scans it.
pub(crate) const OP_TIME_RANGE: &str =
    "SELECT (SELECT MIN(end_ms) FROM operations), (SELECT MAX(end_ms) FROM operations)";

/// An operation as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRow {
    /// Its id.
    pub id: Id,
    /// End time, ms since the epoch.
    pub end_ms: i64,
}

/// The catalog as the operation index ([`lifeos_vcs::op_index::OpIndex`]): each lookup opens
/// the catalog, brings it up to date and asks its tables. A catalog that cannot be opened
/// (a full disk, say) leaves commit walks to the objects.
#[derive(Debug, Default, Clone, Copy)]
pub struct CatalogIndex;

impl lifeos_vcs::op_index::OpIndex for CatalogIndex {
    fn reachable_commits(
        &self,
        repo: &Repo,
        roots: &[Id],
    ) -> Result<Vec<(Id, lifeos_vcs::object::Commit)>> {
        match repo.catalog() {
            Ok(cat) => cat.reachable_commits(repo, roots),
            Err(_) => lifeos_vcs::op_index::StoreWalk.reachable_commits(repo, roots),
        }
    }

    fn ops_with_prefix(&self, repo: &Repo, prefix: &str) -> Result<Vec<Id>> {
        repo.catalog()?.ops_with_prefix(prefix)
    }

    fn op_time_range(&self, repo: &Repo) -> Result<Option<(i64, i64)>> {
        repo.catalog()?.op_time_range()
    }

    fn op_at(&self, repo: &Repo, t_ms: i64) -> Result<Option<Id>> {
        Ok(repo.catalog()?.op_at(t_ms)?.map(|r| r.id))
    }
}
