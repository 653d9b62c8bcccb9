//! The catalog: an SQLite index of the operation log (and, later, of content), derived
//! from the objects and rebuilt by `reindex`. Migrations are the numbered SQL files in
//! `migrations/`, applied in a transaction when the catalog opens.

use std::path::{Path, PathBuf};

use lifeos_store::Id;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, VcsError};
use crate::repo::Repo;

/// The catalog file, inside `.lifeos`.
pub const CATALOG_FILE: &str = "catalog.sqlite";

/// Every migration, in order: (level, SQL).
pub const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/0001_history.sql")),
    (2, include_str!("../../migrations/0002_commits.sql")),
];

/// An open catalog.
pub struct Catalog {
    conn: Connection,
    path: PathBuf,
}

fn db_err(path: &Path, e: rusqlite::Error) -> VcsError {
    VcsError::Catalog {
        path: path.into(),
        reason: e.to_string(),
    }
}

fn ids_blob(ids: &[Id]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.0).collect()
}

/// An operation as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRow {
    /// Its id.
    pub id: Id,
    /// End time, ms since the epoch.
    pub end_ms: i64,
}

impl Catalog {
    /// Opens (creating if needed) the catalog at `path` and brings its schema up to the
    /// newest migration level.
    pub fn open(path: &Path) -> Result<Catalog> {
        let conn = Connection::open(path).map_err(|e| db_err(path, e))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| db_err(path, e))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| db_err(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| db_err(path, e))?;
        let mut cat = Catalog {
            conn,
            path: path.into(),
        };
        cat.migrate()?;
        Ok(cat)
    }

    /// The schema level (the number of the last migration applied).
    pub fn level(&self) -> Result<u32> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }

    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err(&path, e))?;
        let level: u32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| db_err(&path, e))?;
        let newest = MIGRATIONS.last().map_or(0, |m| m.0);
        if level > newest {
            return Err(VcsError::Catalog {
                path,
                reason: format!("catalog level {level} is newer than this lifeos knows ({newest}); upgrade lifeos or run `lifeos reindex`"),
            });
        }
        for (n, sql) in MIGRATIONS.iter().filter(|m| m.0 > level) {
            tx.execute_batch(sql).map_err(|e| db_err(&path, e))?;
            tx.pragma_update(None, "user_version", n)
                .map_err(|e| db_err(&path, e))?;
        }
        tx.commit().map_err(|e| db_err(&path, e))
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| db_err(&self.path, e))
    }

    /// Indexes every operation reachable from the current op heads that the catalog does
    /// not know yet (walking back until it meets known ones).
    pub fn sync(&mut self, repo: &Repo) -> Result<()> {
        let heads = repo.op_heads()?;
        let key: String = heads
            .iter()
            .map(|h| h.to_hex())
            .collect::<Vec<_>>()
            .join(",");
        if self.meta("op_heads")?.as_deref() == Some(key.as_str()) {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_err(&path, e))?;
        {
            let mut known = tx
                .prepare("SELECT 1 FROM operations WHERE id = ?1")
                .map_err(|e| db_err(&path, e))?;
            let mut insert = tx
                .prepare(
                    "INSERT OR IGNORE INTO operations (id, end_ms, start_ms, view, parents, user, host, description)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(|e| db_err(&path, e))?;
            let mut stack = heads.clone();
            let mut seen = std::collections::HashSet::new();
            let mut new_views = Vec::new();
            while let Some(id) = stack.pop() {
                if !seen.insert(id) || known.exists([&id.0[..]]).map_err(|e| db_err(&path, e))? {
                    continue;
                }
                let op = repo.operation(&id)?;
                insert
                    .execute(params![
                        &id.0[..],
                        op.end_ms,
                        op.start_ms,
                        &op.view.0[..],
                        ids_blob(&op.parents),
                        op.user,
                        op.host,
                        op.description
                    ])
                    .map_err(|e| db_err(&path, e))?;
                stack.extend(op.parents.iter().copied());
                new_views.push(op.view);
            }
            // Commits named by the new views, and their ancestors not yet indexed.
            let mut known_commit = tx
                .prepare("SELECT 1 FROM commits WHERE id = ?1")
                .map_err(|e| db_err(&path, e))?;
            let mut insert_commit = tx
                .prepare(
                    "INSERT OR IGNORE INTO commits (id, committer_time, data) VALUES (?1, ?2, ?3)",
                )
                .map_err(|e| db_err(&path, e))?;
            let mut commits: Vec<Id> = Vec::new();
            for v in new_views {
                commits.extend(repo.view(&v)?.referenced_commits());
            }
            let mut seen_commits = std::collections::HashSet::new();
            while let Some(id) = commits.pop() {
                if !seen_commits.insert(id)
                    || known_commit
                        .exists([&id.0[..]])
                        .map_err(|e| db_err(&path, e))?
                {
                    continue;
                }
                let raw = repo.store().read_object(&id, lifeos_store::Kind::Commit)?;
                let c = crate::object::Commit::decode(&raw).map_err(|source| VcsError::Decode {
                    kind: "commit",
                    id,
                    source,
                })?;
                insert_commit
                    .execute(params![&id.0[..], c.committer.time, raw])
                    .map_err(|e| db_err(&path, e))?;
                commits.extend(c.parents);
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('op_heads', ?1)",
            [&key],
        )
        .map_err(|e| db_err(&path, e))?;
        tx.commit().map_err(|e| db_err(&path, e))
    }

    /// The last operation that ended at or before `t_ms`.
    pub fn op_at(&self, t_ms: i64) -> Result<Option<OpRow>> {
        self.conn
            .query_row(
                "SELECT id, end_ms FROM operations WHERE end_ms <= ?1 ORDER BY end_ms DESC, id DESC LIMIT 1",
                [t_ms],
                |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)),
            )
            .optional()
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.and_then(|(id, end_ms)| Some(OpRow { id: Id::from_slice(&id)?, end_ms })))
    }

    /// The first and last operation times.
    pub fn op_time_range(&self) -> Result<Option<(i64, i64)>> {
        self.conn
            .query_row("SELECT MIN(end_ms), MAX(end_ms) FROM operations", [], |r| {
                Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|(a, b)| a.zip(b))
    }

    /// Operations whose hex id starts with `prefix`.
    pub fn ops_with_prefix(&self, prefix: &str) -> Result<Vec<Id>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM operations")
            .map_err(|e| db_err(&self.path, e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
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
    ) -> Result<Vec<(Id, crate::object::Commit)>> {
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
                    crate::object::Commit::decode(&d).map_err(|source| VcsError::Decode {
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

impl Repo {
    /// The path of the catalog.
    pub fn catalog_path(&self) -> PathBuf {
        self.dot_dir().join(CATALOG_FILE)
    }

    /// Opens the catalog and brings it up to date with the operation log.
    pub fn catalog(&self) -> Result<Catalog> {
        let mut c = Catalog::open(&self.catalog_path())?;
        c.sync(self)?;
        Ok(c)
    }

    /// Deletes the catalog and rebuilds it from the objects.
    pub fn reindex(&self) -> Result<Catalog> {
        for suffix in ["", "-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{suffix}", self.catalog_path().display()));
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(VcsError::Io {
                        action: "removing",
                        path: p,
                        source: e,
                    })
                }
            }
        }
        self.catalog()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_a_catalog_made_at_every_earlier_level() {
        for level in 0..MIGRATIONS.len() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.sqlite");
            {
                let conn = Connection::open(&path).unwrap();
                for (n, sql) in &MIGRATIONS[..level] {
                    conn.execute_batch(sql).unwrap();
                    conn.pragma_update(None, "user_version", n).unwrap();
                }
            }
            let cat = Catalog::open(&path).unwrap();
            assert_eq!(cat.level().unwrap(), MIGRATIONS.last().unwrap().0);
            // Applying again is a no-op.
            drop(cat);
            assert_eq!(
                Catalog::open(&path).unwrap().level().unwrap(),
                MIGRATIONS.last().unwrap().0
            );
        }
    }
}
