//! lifeos-catalog: an SQLite index of the operation log, commits, extracts (with full-text
//! search and mentions) and entities, derived from the objects and rebuilt by `reindex`.
//! Nothing is recorded only here: a lost catalog is rebuilt from the store. Migrations
//! are the numbered SQL files in the project's `migrations/` folder, applied in a
//! transaction when the catalog opens.

#![warn(missing_docs)]

pub mod entity_index;
pub mod entity_queries;
mod fts;
pub mod mentions;

pub use entity_queries::EntityQueries;

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

/// The operation `--at` a time reads: the newest that ended by then (12.5).
const OP_AT: &str =
    "SELECT id, end_ms FROM operations WHERE end_ms <= ?1 ORDER BY end_ms DESC, id DESC LIMIT 1";

/// The first and last operation times. Apart, each is one end of the index; as
/// `MIN(end_ms), MAX(end_ms)` of one query, SQLite scans it.
const OP_TIME_RANGE: &str =
    "SELECT (SELECT MIN(end_ms) FROM operations), (SELECT MAX(end_ms) FROM operations)";

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

/// What a git object is to lifeos, as the git map records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitObject {
    /// A commit.
    Commit = 1,
    /// A tree.
    Tree = 2,
    /// A blob holding a file's content.
    Blob = 3,
    /// A blob holding a symlink's target.
    Symlink = 4,
    /// An annotated tag.
    Tag = 5,
    /// A blob holding a pointer that git's `lifeos` filter wrote for a file whose content
    /// lifeos stores (the row's id and size are the content's); recorded once the
    /// operation keeping that content is published.
    Pointer = 6,
}

/// One row of the git map: a git object's SHA-1, what it is, the lifeos object it
/// corresponds to, and that object's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitMapRow {
    /// The git object id.
    pub sha1: [u8; 20],
    /// What it is.
    pub kind: GitObject,
    /// The lifeos object.
    pub id: Id,
    /// Bytes under a tree, a blob's length, 0 otherwise.
    pub size: u64,
}

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

    /// The lifeos object (and its size) a git object corresponds to, if the git map has
    /// it.
    pub fn git_lookup(&self, sha1: &[u8; 20], kind: GitObject) -> Result<Option<(Id, u64)>> {
        self.conn
            .prepare_cached("SELECT id, size FROM git_map WHERE sha1 = ?1 AND kind = ?2")
            .and_then(|mut s| {
                s.query_row(params![&sha1[..], kind as u8], |r| {
                    Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
                })
                .optional()
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.and_then(|(id, size)| Some((Id::from_slice(&id)?, size as u64))))
    }

    /// The git object a lifeos object corresponds to, if the git map has it.
    pub fn git_sha1(&self, id: &Id, kind: GitObject) -> Result<Option<[u8; 20]>> {
        self.conn
            .prepare_cached("SELECT sha1 FROM git_map WHERE id = ?1 AND kind = ?2 LIMIT 1")
            .and_then(|mut s| {
                s.query_row(params![&id.0[..], kind as u8], |r| r.get::<_, Vec<u8>>(0))
                    .optional()
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.and_then(|v| v.try_into().ok()))
    }

    /// Adds rows to the git map (a row already there is replaced).
    pub fn git_record(&mut self, rows: &[GitMapRow]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_err(&path, e))?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR REPLACE INTO git_map (sha1, kind, id, size) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| db_err(&path, e))?;
            for r in rows {
                insert
                    .execute(params![
                        &r.sha1[..],
                        r.kind as u8,
                        &r.id.0[..],
                        r.size as i64
                    ])
                    .map_err(|e| db_err(&path, e))?;
            }
        }
        tx.commit().map_err(|e| db_err(&path, e))
    }

    /// Number of rows in the git map.
    pub fn git_map_len(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM git_map", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }

    /// Number of operations indexed.
    pub fn op_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM operations", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }
}

/// How a segment's anchor is stored in the catalog (JSON).
pub fn anchor_json(a: &lifeos_vcs::object::Anchor) -> String {
    use lifeos_vcs::object::Anchor;
    match a {
        Anchor::File => r#"{"kind":"file"}"#.to_string(),
        Anchor::Lines { start, end } => {
            format!(r#"{{"kind":"lines","start":{start},"end":{end}}}"#)
        }
        Anchor::Page(p) => format!(r#"{{"kind":"page","page":{p}}}"#),
        Anchor::Time { start_ms, end_ms } => {
            format!(r#"{{"kind":"time","start_ms":{start_ms},"end_ms":{end_ms}}}"#)
        }
        Anchor::Region { x, y, w, h } => {
            format!(r#"{{"kind":"region","x":{x},"y":{y},"w":{w},"h":{h}}}"#)
        }
    }
}

/// Indexes extract objects, each with the operation that recorded it (newest last wins for
/// a key: a retried failure replaces it); returns the rows of the segments added.
fn index_extracts(
    tx: &rusqlite::Transaction<'_>,
    repo: &Repo,
    path: &Path,
    ids: &[(Id, Id)],
) -> Result<Vec<i64>> {
    let mut added = Vec::new();
    let err = |e| db_err(path, e);
    let tokenizer = crate::fts::Tokenizer::new(tx).map_err(err)?;
    let mut terms = crate::fts::TermDocs::default();
    // Operations are walked newest first; apply their extracts oldest first.
    for (id, op) in ids.iter().rev() {
        // Indexed already (before level 9, with no operation, or recorded again by a later
        // operation): settled without reading the object.
        let indexed: Option<Option<Vec<u8>>> = tx
            .query_row(
                "SELECT op FROM extracts WHERE object = ?1",
                [&id.0[..]],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| db_err(path, e))?;
        if let Some(known) = indexed {
            if known.is_none() {
                tx.execute(
                    "UPDATE extracts SET op = ?2 WHERE object = ?1 AND op IS NULL",
                    params![&id.0[..], &op.0[..]],
                )
                .map_err(|e| db_err(path, e))?;
            }
            continue;
        }
        // A missing or damaged extract only loses its search results (fsck names it); the
        // rest of the catalog must still be usable.
        let Ok(raw) = repo.store().read_object(id, lifeos_store::Kind::Extract) else {
            continue;
        };
        let Ok(x) = lifeos_vcs::object::Extract::decode(&raw) else {
            continue;
        };
        let key = params![&x.file.0[..], x.extractor, x.version];
        let existing: Option<Vec<u8>> = tx
            .query_row("SELECT object FROM extracts WHERE file_id = ?1 AND extractor = ?2 AND version = ?3", key, |r| r.get(0))
            .optional()
            .map_err(|e| db_err(path, e))?;
        if existing.is_some() {
            // The removed segments' terms come off `term_docs`.
            let mut old = tx
                .prepare_cached("SELECT text FROM segments WHERE file_id = ?1 AND extractor = ?2 AND version = ?3")
                .map_err(err)?;
            let mut rows = old.query(key).map_err(err)?;
            while let Some(r) = rows.next().map_err(err)? {
                let text = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(err)?;
                terms.count(&tokenizer, text, -1).map_err(err)?;
            }
            drop(rows);
            tx.execute(
                "INSERT INTO segments_fts (segments_fts, rowid, text) SELECT 'delete', id, text FROM segments WHERE file_id = ?1 AND extractor = ?2 AND version = ?3",
                key,
            )
            .map_err(|e| db_err(path, e))?;
            tx.execute(
                "DELETE FROM mentions WHERE segment IN (SELECT id FROM segments WHERE file_id = ?1 AND extractor = ?2 AND version = ?3)",
                key,
            )
            .map_err(|e| db_err(path, e))?;
            tx.execute(
                "DELETE FROM segments WHERE file_id = ?1 AND extractor = ?2 AND version = ?3",
                key,
            )
            .map_err(|e| db_err(path, e))?;
        }
        let (ok, reason) = match &x.outcome {
            Ok(_) => (1, None),
            Err(r) => (0, Some(r.clone())),
        };
        tx.execute(
            "INSERT OR REPLACE INTO extracts (file_id, extractor, version, object, ok, reason, op) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![&x.file.0[..], x.extractor, x.version, &id.0[..], ok, reason, &op.0[..]],
        )
        .map_err(|e| db_err(path, e))?;
        if let Ok(segs) = &x.outcome {
            let mut ins = tx
                .prepare_cached("INSERT INTO segments (file_id, extractor, version, kind, anchor, text, meta) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                .map_err(|e| db_err(path, e))?;
            let mut fts = tx
                .prepare_cached("INSERT INTO segments_fts (rowid, text) VALUES (?1, ?2)")
                .map_err(|e| db_err(path, e))?;
            for s in segs {
                ins.execute(params![
                    &x.file.0[..],
                    x.extractor,
                    x.version,
                    s.kind,
                    anchor_json(&s.anchor),
                    s.text,
                    s.meta
                ])
                .map_err(|e| db_err(path, e))?;
                let row = tx.last_insert_rowid();
                fts.execute(params![row, s.text])
                    .map_err(|e| db_err(path, e))?;
                terms.count(&tokenizer, &s.text, 1).map_err(err)?;
                added.push(row);
            }
        }
    }
    drop(tokenizer);
    terms.save(tx).map_err(err)?;
    Ok(added)
}

/// Queries matching more segments than the first of these are ranked among the newest
/// that many, then among ten times as many, then among all.
pub const RANK_WINDOWS: [i64; 2] = [5_000, 50_000];

/// A search whose scope holds at most this many segments checks each of them against
/// the query rather than ranking what the query matches everywhere.
pub const SCOPE_FIRST_SEGMENTS: usize = 4_000;

/// ... and whose segments lie in at most this many runs of row ids ...
pub const SCOPE_FIRST_RUNS: usize = 256;

/// ... and whose matches lie in at most this many runs (each ranked by one query).
pub const RANKED_RUNS: usize = 8;

/// ... where a run continues while the next row id is at most this much above its last
/// (the rows between, other files' segments, are read and skipped).
pub const RUN_GAP: i64 = 64;

/// The runs of row ids (first and last) that sorted `rows` make, a run continuing while
/// the next row id is at most [`RUN_GAP`] above its last.
fn runs_of(rows: &[i64]) -> Vec<(i64, i64)> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &r in rows {
        match runs.last_mut() {
            Some((_, hi)) if r - *hi <= RUN_GAP => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    runs
}

/// A scope's segments (row ids, sorted) and the runs of row ids that hold them (first
/// and last row of each).
type ScopeRows = (Vec<i64>, Vec<(i64, i64)>);

/// A search hit: one segment of one file content.
#[derive(Debug, Clone)]
pub struct SegmentHit {
    /// The segment's row id.
    pub row: i64,
    /// The file content.
    pub file: Id,
    /// Extractor.
    pub extractor: String,
    /// Segment kind.
    pub kind: String,
    /// Anchor, as JSON.
    pub anchor: String,
    /// The segment's text (a query's snippet of it: [`Catalog::snippet`]).
    pub text: String,
    /// BM25 score, `lifeos_bm25` (lower is better).
    pub score: f64,
}

/// One indexed extract of a file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractRow {
    /// Extractor name (the job key's).
    pub extractor: String,
    /// Extractor version.
    pub version: u32,
    /// The extract object (7.6 of FORMAT).
    pub object: Id,
    /// Why extraction failed; `None` when it succeeded.
    pub failed: Option<String>,
    /// The operation that first recorded it, and its end time in ms.
    pub recorded: Option<(Id, i64)>,
}

/// How ingest stands for one (file, extractor, version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Extracted.
    Done,
    /// Failed, with the reason.
    Failed(String),
}

impl Catalog {
    /// The state of a job, if it ran.
    pub fn job(&self, file: &Id, extractor: &str, version: u32) -> Result<Option<JobState>> {
        self.conn
            .query_row(
                "SELECT ok, reason FROM extracts WHERE file_id = ?1 AND extractor = ?2 AND version = ?3",
                params![&file.0[..], extractor, version],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)),
            )
            .optional()
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.map(|(ok, reason)| if ok == 1 { JobState::Done } else { JobState::Failed(reason.unwrap_or_default()) }))
    }

    /// The segments of one kind that an extractor found in a file, in file order:
    /// (anchor JSON, text). Empty when the file has not been extracted.
    pub fn segments_of(
        &self,
        file: &Id,
        extractor: &str,
        kind: &str,
    ) -> Result<Vec<(String, String)>> {
        let err = |e| db_err(&self.path, e);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT anchor, text FROM segments WHERE file_id = ?1 AND extractor = ?2 AND kind = ?3 ORDER BY id",
            )
            .map_err(err)?;
        let rows = st
            .query_map(params![&file.0[..], extractor, kind], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(err)?;
        rows.collect::<std::result::Result<_, _>>().map_err(err)
    }

    /// Segments matching an FTS5 query, best first (bm25), keeping those for which
    /// `keep(row, file, extractor, meta)` holds (the versions in scope, a type filter,
    /// the segments that mention an entity, a transcript's model).
    ///
    /// Ranking uses FTS5's `rank` (bm25) with a limit, so only the best rows are fetched;
    /// snippets are made for those rows alone. A query matching more segments than the
    /// first of [`RANK_WINDOWS`] is first ranked among the most recently indexed that
    /// many, which bounds its cost whatever the index size; if that yields fewer than
    /// `limit` kept hits, among the next window's many, and then among every match, so a
    /// search with any hit in scope finds hits.
    ///
    /// `scope`, when the caller knows it, is every file content a kept hit can be of. A
    /// scope of at most [`SCOPE_FIRST_SEGMENTS`] segments in at most
    /// [`SCOPE_FIRST_RUNS`] runs of row ids (a folder, the files of an old version) is
    /// searched run by run instead, when its matches lie in at most [`RANKED_RUNS`] runs:
    /// only those are ranked, so a word that matches every old version costs about what
    /// the scope costs.
    pub fn search_segments(
        &self,
        fts_query: &str,
        keep: &dyn Fn(i64, &Id, &str, &str) -> bool,
        limit: usize,
        scope: Option<&IdSet>,
    ) -> Result<Vec<SegmentHit>> {
        if let Some(scoped) = scope.map(|s| self.scope_segments(s)).transpose()?.flatten() {
            if let Some(hits) = self.search_rows(fts_query, keep, limit, scoped)? {
                return Ok(hits);
            }
        }
        let err = |e| db_err(&self.path, e);
        let mut bound_at = self
            .conn
            .prepare_cached("SELECT rowid FROM segments_fts WHERE segments_fts MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2")
            .map_err(err)?;
        let mut ranked = self
            .conn
            .prepare_cached(
                "SELECT s.id, s.file_id, s.extractor, s.meta, rank FROM segments_fts JOIN segments s ON s.id = segments_fts.rowid
                 WHERE segments_fts MATCH ?1 AND rank MATCH 'lifeos_bm25()' AND segments_fts.rowid > ?3 ORDER BY rank LIMIT ?2",
            )
            .map_err(err)?;
        let mut detail = self.detail_statement()?;
        let mut out = Vec::new();
        // The newest matches first, a window and then one ten times larger (a few pages
        // of rows each, enough when the newest matches are mostly kept); then, if those
        // kept too few, every match.
        for window in RANK_WINDOWS.iter().copied().map(Some).chain([None]) {
            let floor = match window {
                // No bound: the window holds every match, ranked all at once.
                Some(w) => bound_at
                    .query_row(params![fts_query, w], |r| r.get::<_, i64>(0))
                    .optional()
                    .map_err(err)?
                    .unwrap_or_default(),
                None => 0,
            };
            let fetch = if floor == 0 {
                i64::MAX
            } else {
                limit.saturating_mul(20).max(200) as i64
            };
            out.clear();
            // Read as ranked, up to the limit: a pass over every match holds no list of them.
            let rows = ranked
                .query_map(params![fts_query, fetch, floor], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .map_err(err)?;
            for row in rows {
                let (rowid, file, extractor, meta, score): (i64, Vec<u8>, String, String, f64) =
                    row.map_err(err)?;
                let Some(file) = Id::from_slice(&file) else {
                    continue;
                };
                if !keep(rowid, &file, &extractor, &meta) {
                    continue;
                }
                out.push(self.hit(&mut detail, rowid, file, extractor, score)?);
                if out.len() >= limit {
                    break;
                }
            }
            if out.len() >= limit || floor == 0 {
                break;
            }
        }
        Ok(out)
    }

    /// The segments of the file contents `scope` (their row ids, sorted) and the runs of
    /// row ids that hold them; `None` when there are more than [`SCOPE_FIRST_SEGMENTS`]
    /// or more than [`SCOPE_FIRST_RUNS`] runs. A file's segments are indexed together, so
    /// a folder's usually make one run per ingest.
    fn scope_segments(&self, scope: &IdSet) -> Result<Option<ScopeRows>> {
        if scope.len() > SCOPE_FIRST_SEGMENTS {
            return Ok(None);
        }
        let err = |e| db_err(&self.path, e);
        let mut st = self
            .conn
            .prepare_cached("SELECT id FROM segments WHERE file_id = ?1")
            .map_err(err)?;
        let mut rows: Vec<i64> = Vec::new();
        for f in scope {
            for r in st.query_map([&f.0[..]], |r| r.get(0)).map_err(err)? {
                rows.push(r.map_err(err)?);
                if rows.len() > SCOPE_FIRST_SEGMENTS {
                    return Ok(None);
                }
            }
        }
        rows.sort_unstable();
        let runs = runs_of(&rows);
        if runs.len() > SCOPE_FIRST_RUNS {
            return Ok(None);
        }
        Ok(Some((rows, runs)))
    }

    /// [`Catalog::search_segments`] over the segments `rows` alone. First the rows of
    /// each run (`runs`) that match are found without ranking (a seek per run); then
    /// the runs holding any are ranked, one query each (FTS5 counts each phrase's matches
    /// once per query, for bm25's IDF: the cost of a common word), rows outside the scope
    /// and rows `keep` rejects skipped, and what is kept is ordered best first (newest
    /// first among equal ranks). `None` when the matches lie in more than
    /// [`RANKED_RUNS`] runs: ranking every match once is then cheaper.
    fn search_rows(
        &self,
        fts_query: &str,
        keep: &dyn Fn(i64, &Id, &str, &str) -> bool,
        limit: usize,
        (rows, runs): ScopeRows,
    ) -> Result<Option<Vec<SegmentHit>>> {
        let err = |e| db_err(&self.path, e);
        let mut matching = self
            .conn
            .prepare_cached(
                "SELECT rowid FROM segments_fts WHERE segments_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3",
            )
            .map_err(err)?;
        let mut found = Vec::new();
        let mut matched_runs = Vec::new();
        for (lo, hi) in runs {
            let before = found.len();
            for r in matching
                .query_map(params![fts_query, lo, hi], |r| r.get::<_, i64>(0))
                .map_err(err)?
            {
                let r = r.map_err(err)?;
                if rows.binary_search(&r).is_ok() {
                    found.push(r);
                }
            }
            if found.len() > before {
                matched_runs.push((lo, hi));
                if matched_runs.len() > RANKED_RUNS {
                    return Ok(None);
                }
            }
        }
        // (Row ids come in order; sorted all the same, for the lookups below.)
        found.sort_unstable();
        let runs = matched_runs;
        let mut run_query = self
            .conn
            .prepare_cached(
                "SELECT s.id, s.file_id, s.extractor, s.meta, rank FROM segments_fts JOIN segments s ON s.id = segments_fts.rowid
                 WHERE segments_fts MATCH ?1 AND rank MATCH 'lifeos_bm25()' AND segments_fts.rowid BETWEEN ?2 AND ?3",
            )
            .map_err(err)?;
        let mut ranked = Vec::new();
        for (lo, hi) in runs {
            let rows = run_query
                .query_map(params![fts_query, lo, hi], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .map_err(err)?;
            for row in rows {
                let (rowid, file, extractor, meta, score): (i64, Vec<u8>, String, String, f64) =
                    row.map_err(err)?;
                let Some(file) = Id::from_slice(&file) else {
                    continue;
                };
                if found.binary_search(&rowid).is_ok() && keep(rowid, &file, &extractor, &meta) {
                    ranked.push((score, std::cmp::Reverse(rowid), file, extractor));
                }
            }
        }
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut detail = self.detail_statement()?;
        ranked
            .into_iter()
            .take(limit)
            .map(|(score, rowid, file, extractor)| {
                self.hit(&mut detail, rowid.0, file, extractor, score)
            })
            .collect::<Result<_>>()
            .map(Some)
    }

    /// The statement that reads a kept row's kind, anchor and text.
    fn detail_statement(&self) -> Result<rusqlite::CachedStatement<'_>> {
        self.conn
            .prepare_cached("SELECT kind, anchor, text FROM segments WHERE id = ?1")
            .map_err(|e| db_err(&self.path, e))
    }

    /// A kept row as a hit, with its kind, anchor and text.
    fn hit(
        &self,
        detail: &mut rusqlite::CachedStatement<'_>,
        row: i64,
        file: Id,
        extractor: String,
        score: f64,
    ) -> Result<SegmentHit> {
        let (kind, anchor, text) = detail
            .query_row([row], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(|e| db_err(&self.path, e))?;
        Ok(SegmentHit {
            row,
            file,
            extractor,
            kind,
            anchor,
            text,
            score,
        })
    }

    /// The snippet of segment `row` for an FTS5 query that matches it: at most 12 of its
    /// tokens, each matched term between `[` and `]`, `…` where text is left out (12.5).
    /// Made for the hits shown only: each is an FTS5 query of its own. `None` when the
    /// row no longer matches (its extract was replaced since it was found).
    pub fn snippet(&self, fts_query: &str, row: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached(
                "SELECT snippet(segments_fts, 0, '[', ']', '…', 12) FROM segments_fts
                 WHERE segments_fts MATCH ?1 AND segments_fts.rowid = ?2",
            )
            .and_then(|mut st| {
                st.query_row(params![fts_query, row], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| db_err(&self.path, e))
    }

    /// The segments that mention entity `eid` (12.9) and pass `keep` (row, file,
    /// extractor, meta), newest first, at most `limit`: as hits whose score is 0.
    pub fn mention_segments(
        &self,
        eid: &str,
        keep: &dyn Fn(i64, &Id, &str, &str) -> bool,
        limit: usize,
    ) -> Result<Vec<SegmentHit>> {
        let err = |e| db_err(&self.path, e);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT s.id, s.file_id, s.extractor, s.kind, s.anchor, s.text, s.meta
                 FROM mentions m JOIN segments s ON s.id = m.segment WHERE m.eid = ?1 ORDER BY s.id DESC",
            )
            .map_err(err)?;
        let rows = st
            .query_map([eid], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(err)?;
        let mut out = Vec::new();
        for row in rows {
            let (rowid, file, extractor, kind, anchor, text, meta) = row.map_err(err)?;
            let Some(file) = Id::from_slice(&file) else {
                continue;
            };
            if !keep(rowid, &file, &extractor, &meta) {
                continue;
            }
            out.push(SegmentHit {
                row: rowid,
                file,
                extractor,
                kind,
                anchor,
                text,
                score: 0.0,
            });
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Every extract indexed for a file content, by extractor name and version: the extract
    /// object, and the operation that first recorded it with its end time (`None` for a
    /// row whose operation is not indexed).
    pub fn extracts_of(&self, file: &Id) -> Result<Vec<ExtractRow>> {
        let err = |e| db_err(&self.path, e);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT x.extractor, x.version, x.object, x.op, o.end_ms, x.ok, x.reason FROM extracts x
                 LEFT JOIN operations o ON o.id = x.op WHERE x.file_id = ?1 ORDER BY x.extractor, x.version",
            )
            .map_err(err)?;
        let id = |b: Option<Vec<u8>>| b.as_deref().and_then(Id::from_slice);
        let rows = st
            .query_map([&file.0[..]], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, Option<Vec<u8>>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    (r.get::<_, i64>(5)? == 0).then(|| r.get::<_, Option<String>>(6)),
                ))
            })
            .map_err(err)?;
        let mut out = Vec::new();
        for row in rows {
            let (extractor, version, object, op, end_ms, failed) = row.map_err(err)?;
            let failed = failed
                .transpose()
                .map_err(err)?
                .map(Option::unwrap_or_default);
            let Some(object) = id(Some(object)) else {
                continue;
            };
            out.push(ExtractRow {
                extractor,
                version,
                object,
                failed,
                recorded: id(op).zip(end_ms),
            });
        }
        Ok(out)
    }

    /// Counts of extracts: (done, failed).
    pub fn extract_counts(&self) -> Result<(u64, u64)> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(ok), 0), COALESCE(SUM(1 - ok), 0) FROM extracts",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| db_err(&self.path, e))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
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
