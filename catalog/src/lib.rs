//! lifeos-catalog: an SQLite index of the operation log, commits, extracts (with full-text
//! search and mentions) and entities, derived from the objects and rebuilt by `reindex`.
//! Nothing is recorded only here: a lost catalog is rebuilt from the store. Migrations
//! are the numbered SQL files in the project's `migrations/` folder, applied in a
//! transaction when the catalog opens.

#![warn(missing_docs)]

pub mod entity_index;
pub mod entity_queries;
mod fts;
mod git_map;
pub mod mentions;
mod ops;
mod search;
mod segments;

pub use entity_queries::EntityQueries;
pub use git_map::{GitMapRow, GitObject};
pub use ops::{CatalogIndex, OpRow};
pub use search::{
    SegmentHit, RANKED_RUNS, RANK_WINDOWS, RUN_GAP, SCOPE_FIRST_RUNS, SCOPE_FIRST_SEGMENTS,
};
use segments::index_extracts;
pub use segments::{anchor_json, ExtractRow, JobState};

use std::path::{Path, PathBuf};

use lifeos_store::{Id, IdSet};
use rusqlite::{params, Connection, OptionalExtension};

use lifeos_entities::query::Query;
use lifeos_entities::Entity;
use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::{Repo, View};

use crate::entity_index::IndexedVersion;

/// The catalog file, inside `.lifeos`.
pub const CATALOG_FILE: &str = "catalog.sqlite";

/// Every migration, in order: (level, SQL).
pub const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/0001_history.sql")),
    (2, include_str!("../../migrations/0002_commits.sql")),
    (3, include_str!("../../migrations/0003_content.sql")),
    (4, include_str!("../../migrations/0004_git.sql")),
    (5, include_str!("../../migrations/0005_entities.sql")),
    (6, include_str!("../../migrations/0006_mentions.sql")),
    (7, include_str!("../../migrations/0007_entity_history.sql")),
    (8, include_str!("../../migrations/0008_value_rows.sql")),
    (9, include_str!("../../migrations/0009_extract_ops.sql")),
    (
        10,
        include_str!("../../migrations/0010_extract_objects.sql"),
    ),
    (
        11,
        include_str!("../../migrations/0011_operations_by_time.sql"),
    ),
    (12, include_str!("../../migrations/0012_term_docs.sql")),
];

/// An open catalog.
pub struct Catalog {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// A query condition fewer rows than this pass drives an entity query.
    pub(crate) selective: i64,
    /// From this many entity changes in one operation, the entity index is loaded in bulk.
    pub(crate) bulk: usize,
}

pub(crate) fn db_err(path: &Path, e: rusqlite::Error) -> VcsError {
    VcsError::Catalog {
        path: path.into(),
        reason: e.to_string(),
    }
}

fn ids_blob(ids: &[Id]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.0).collect()
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
        // Up to 32 MiB of pages (allocated as used): indexing a large batch of entities
        // inserts into several indexes at random places.
        conn.pragma_update(None, "cache_size", -32768)
            .map_err(|e| db_err(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| db_err(path, e))?;
        crate::entity_index::register(&conn).map_err(|e| db_err(path, e))?;
        crate::fts::register(&conn).map_err(|e| db_err(path, e))?;
        let mut cat = Catalog {
            conn,
            path: path.into(),
            selective: crate::entity_index::SELECTIVE,
            bulk: crate::entity_index::BULK,
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
        let newest = MIGRATIONS.last().map_or(0, |m| m.0);
        // Up to date: no write lock (readers open the catalog on every query).
        if self.level()? == newest {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err(&path, e))?;
        let level: u32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| db_err(&path, e))?;
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
        let mut new_extracts = Vec::new();
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
                for e in repo.events(&op)?.iter() {
                    if let lifeos_vcs::object::Event::ContentExtracted { results } = e {
                        new_extracts.extend(results.iter().map(|x| (*x, id)));
                    }
                }
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
                let c = lifeos_vcs::object::Commit::decode(&raw).map_err(|source| {
                    VcsError::Decode {
                        kind: "commit",
                        id,
                        source,
                    }
                })?;
                insert_commit
                    .execute(params![&id.0[..], c.committer.time, raw])
                    .map_err(|e| db_err(&path, e))?;
                commits.extend(c.parents);
            }
        }
        let new_segments = index_extracts(&tx, repo, &path, &new_extracts)?;
        crate::entity_index::sync(&tx, repo, &path, self.bulk)?;
        crate::mentions::sync(&tx, &path, &new_segments)?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('op_heads', ?1)",
            [&key],
        )
        .map_err(|e| db_err(&path, e))?;
        tx.commit().map_err(|e| db_err(&path, e))
    }
}

/// A scope's segments (row ids, sorted) and the runs of row ids that hold them (first
/// and last row of each).
type ScopeRows = (Vec<i64>, Vec<(i64, i64)>);

/// The catalog of a repository (every front end reaches it through these).
pub trait CatalogExt {
    /// The path of the catalog.
    fn catalog_path(&self) -> PathBuf;
    /// Opens the catalog and brings it up to date with the operation log.
    fn catalog(&self) -> Result<Catalog>;
    /// Deletes the catalog and rebuilds it from the objects.
    fn reindex(&self) -> Result<Catalog>;
    /// The entities that `q` selects in the view of operation `op` (whose view is
    /// `view`), in the query's order: an indexed query on the catalog, or a walk over
    /// every entity of the view when the catalog has not indexed the operation.
    fn query_entities(&self, op: &Id, view: &View, q: &Query) -> Result<Vec<(Id, Entity)>>;
    /// Entity queries on one open catalog (see [`EntityQueries`]).
    fn entity_queries(&self) -> Result<EntityQueries<'_>>;
    /// Every version of entity `id`, newest first: each operation after which the
    /// entity, as `--at` that operation shows it, differs from the operation before (in
    /// `--at` order), read from the catalog's index.
    fn entity_history(&self, id: &str) -> Result<Vec<IndexedVersion>>;
}

impl CatalogExt for Repo {
    /// The path of the catalog.
    fn catalog_path(&self) -> PathBuf {
        self.dot_dir().join(CATALOG_FILE)
    }

    /// Opens the catalog and brings it up to date with the operation log.
    fn catalog(&self) -> Result<Catalog> {
        let mut c = Catalog::open(&self.catalog_path())?;
        c.sync(self)?;
        Ok(c)
    }

    /// Deletes the catalog and rebuilds it from the objects.
    fn reindex(&self) -> Result<Catalog> {
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

    fn query_entities(&self, op: &Id, view: &View, q: &Query) -> Result<Vec<(Id, Entity)>> {
        self.entity_queries()?.run(op, view, q)
    }

    fn entity_queries(&self) -> Result<EntityQueries<'_>> {
        Ok(EntityQueries {
            repo: self,
            cat: self.catalog()?,
            schema: None,
            decoded: std::collections::HashMap::new(),
        })
    }

    fn entity_history(&self, id: &str) -> Result<Vec<IndexedVersion>> {
        entity_queries::history(self, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{OP_AT, OP_TIME_RANGE};
    use lifeos_vcs::op_index::{OpIndex, StoreWalk};

    /// The catalog answers every operation and commit lookup as the walk over the
    /// objects does, including operations on two heads and times between operations.
    #[test]
    fn the_catalog_index_answers_as_the_store_walk() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        for m in ["one", "two", "three"] {
            std::fs::write(dir.path().join("f"), m).unwrap();
            lifeos_vcs::testing::commit_folder(&repo, m.as_bytes());
        }
        let (cat, walk) = (CatalogIndex, StoreWalk);
        let head = repo.head().unwrap();
        let mut ops = vec![head.id];
        let mut at = head.op.clone();
        while let Some(p) = at.parents.first() {
            ops.push(*p);
            at = repo.operation(p).unwrap();
        }
        assert_eq!(
            cat.op_time_range(&repo).unwrap(),
            walk.op_time_range(&repo).unwrap()
        );
        let (first, last) = walk.op_time_range(&repo).unwrap().unwrap();
        for t in [first - 1, first, (first + last) / 2, last, last + 1] {
            assert_eq!(cat.op_at(&repo, t).unwrap(), walk.op_at(&repo, t).unwrap());
        }
        for id in &ops {
            let hex = id.to_hex();
            for n in [1, 4, 64] {
                assert_eq!(
                    cat.ops_with_prefix(&repo, &hex[..n]).unwrap(),
                    walk.ops_with_prefix(&repo, &hex[..n]).unwrap()
                );
            }
        }
        let roots = head.view.referenced_commits();
        let mut a = cat.reachable_commits(&repo, &roots).unwrap();
        let mut b = walk.reachable_commits(&repo, &roots).unwrap();
        a.sort_by_key(|c| c.0);
        b.sort_by_key(|c| c.0);
        assert_eq!(a, b);
    }

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

    /// A word matching 60,000 segments whose newest 5,000 are all rejected is ranked
    /// among the newest 50,000 next (the old `--at` case: one pass ranking every match
    /// took 0.5 s at 600,000), and among all of them when those keep too few.
    #[test]
    fn a_common_word_is_ranked_in_growing_windows_of_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let mut cat = Catalog::open(&dir.path().join("c.sqlite")).unwrap();
        let file = |i: i64| Id::hash(&i.to_le_bytes());
        let tx = cat.conn.transaction().unwrap();
        for n in 1..=60_000i64 {
            // The oldest thousand match best.
            let text = if n <= 1_000 {
                "tomato tomato tomato"
            } else {
                "tomato and other words"
            };
            tx.execute(
                "INSERT INTO segments (id, file_id, extractor, version, kind, anchor, text, meta) VALUES (?1, ?2, 'text', 1, 'text', '{}', ?3, '')",
                params![n, &file(n).0[..], text],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO segments_fts (rowid, text) VALUES (?1, ?2)",
                params![n, text],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        let row_of: std::collections::HashMap<Id, i64> =
            (1..=60_000).map(|n| (file(n), n)).collect();
        let found = |newest_kept: i64| {
            let keep = |row: i64, _: &Id, _: &str, _: &str| row <= newest_kept;
            let hits = cat.search_segments("tomato", &keep, 5, None).unwrap();
            hits.iter().map(|h| row_of[&h.file]).collect::<Vec<_>>()
        };
        // Rows above 55,000 rejected: the second window (rows above 10,000) keeps five.
        let second = found(55_000);
        assert_eq!(second.len(), 5);
        assert!(
            second.iter().all(|r| (10_001..=55_000).contains(r)),
            "{second:?}"
        );
        // Only rows up to 5,000 kept: every match is ranked, the best (oldest) first.
        let all = found(5_000);
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|r| *r <= 1_000), "{all:?}");
    }

    /// A scope's segments lie in runs of row ids; they are searched run by run when few
    /// runs hold matches, and by ranking every match otherwise: the same hits either way.
    #[test]
    fn a_scope_is_searched_by_runs_when_few_hold_matches() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(&dir.path().join("c.sqlite")).unwrap();
        let file = |i: usize| Id::hash(&i.to_le_bytes());
        // Twelve scope files of one segment each, 80 segments of other files between
        // them (more than a run's gap), every segment mentioning the word a little.
        let mut n = 0;
        let mut add = |f: Id, text: &str| {
            n += 1;
            cat.conn
                .execute(
                    "INSERT INTO segments (id, file_id, extractor, version, kind, anchor, text, meta) VALUES (?1, ?2, 'text', 1, 'text', '{}', ?3, '')",
                    params![n, &f.0[..], text],
                )
                .unwrap();
            cat.conn
                .execute(
                    "INSERT INTO segments_fts (rowid, text) VALUES (?1, ?2)",
                    params![n, text],
                )
                .unwrap();
        };
        for i in 0..12 {
            add(
                file(i),
                &format!("{} {}", "tomato ".repeat(i % 5 + 1), "leaf ".repeat(i)),
            );
            for k in 0..80 {
                add(file(100 + i * 100 + k), "tomato and many other words here");
            }
        }
        let search = |scope: &IdSet, by_runs: bool| {
            let keep = |_: i64, f: &Id, _: &str, _: &str| scope.contains(f);
            cat.search_segments("tomato", &keep, 4, by_runs.then_some(scope))
                .unwrap()
                .into_iter()
                .map(|h| (h.file, h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        let all: IdSet = (0..12).map(file).collect();
        let (rows, runs) = cat.scope_segments(&all).unwrap().unwrap();
        assert_eq!((rows.len(), runs.len()), (12, 12));
        let keep_all = |_: i64, _: &Id, _: &str, _: &str| true;
        assert!(cat
            .search_rows("tomato", &keep_all, 4, (rows, runs))
            .unwrap()
            .is_none());
        assert_eq!(search(&all, true), search(&all, false));
        let few: IdSet = (0..12).step_by(3).map(file).collect();
        let (rows, runs) = cat.scope_segments(&few).unwrap().unwrap();
        assert_eq!(runs.len(), 4);
        let by_runs = cat
            .search_rows("tomato", &keep_all, 4, (rows, runs))
            .unwrap();
        assert_eq!(by_runs.map(|h| h.len()), Some(4));
        assert_eq!(search(&few, true), search(&few, false));
        assert_eq!(search(&few, true).len(), 4);
    }

    /// Regression: `--at` sorted every operation up to its time (5 ms at 100,000
    /// operations) while the index had `end_ms` alone; the time range scanned the index.
    #[test]
    fn at_a_time_and_the_time_range_read_one_end_of_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(&dir.path().join("c.sqlite")).unwrap();
        let plan = |sql: &str| -> String {
            let mut st = cat
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let zeros = rusqlite::params_from_iter(vec![0i64; st.parameter_count()]);
            let rows = st.query_map(zeros, |r| r.get::<_, String>(3)).unwrap();
            rows.map(|r| r.unwrap()).collect::<Vec<_>>().join("\n")
        };
        let at = plan(OP_AT);
        assert!(
            at.contains("operations_by_end_id") && !at.contains("TEMP B-TREE"),
            "{at}"
        );
        let range = plan(OP_TIME_RANGE);
        assert!(!range.contains("SCAN operations"), "{range}");
    }

    #[test]
    fn an_extract_indexed_before_level_9_learns_the_operation_that_recorded_it() {
        use lifeos_vcs::object::{Anchor, Event, Extract, Segment};
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        let x = Extract {
            file: Id::hash(b"a file"),
            extractor: "text".into(),
            version: 1,
            outcome: Ok(vec![Segment {
                kind: "text".into(),
                anchor: Anchor::Lines { start: 1, end: 1 },
                text: "hello".into(),
                meta: String::new(),
            }]),
        };
        let head = repo.head().unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let xid = tx
            .write_object(lifeos_store::Kind::Extract, &x.encode())
            .unwrap();
        let op = repo
            .publish(
                tx,
                &[head.id],
                head.view.clone(),
                "ingest: 1 files",
                vec![Event::ContentExtracted { results: vec![xid] }],
                lifeos_vcs::repo::now_ms(),
            )
            .unwrap();
        let end_ms = repo.operation(&op).unwrap().end_ms;
        let expected = vec![ExtractRow {
            extractor: "text".into(),
            version: 1,
            object: xid,
            failed: None,
            recorded: Some((op, end_ms)),
        }];
        assert_eq!(
            repo.catalog().unwrap().extracts_of(&x.file).unwrap(),
            expected
        );
        // The catalog as level 8 left it: no operation column.
        {
            let conn = Connection::open(repo.catalog_path()).unwrap();
            conn.execute_batch("ALTER TABLE extracts DROP COLUMN op; PRAGMA user_version = 8;")
                .unwrap();
        }
        let cat = repo.catalog().unwrap();
        assert_eq!(cat.level().unwrap(), MIGRATIONS.last().unwrap().0);
        assert_eq!(cat.extracts_of(&x.file).unwrap(), expected);
        assert_eq!(
            cat.op_count().unwrap(),
            2,
            "the operation log indexed again"
        );
    }
}
