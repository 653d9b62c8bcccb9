//! Full-text search over the segments: ranked in growing windows of the newest, or by
//! runs of a scope when few rows hold matches; snippets and mentions.

use super::*;

impl Catalog {
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
    pub(crate) fn scope_segments(&self, scope: &IdSet) -> Result<Option<ScopeRows>> {
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
    pub(crate) fn search_rows(
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
    pub(crate) fn detail_statement(&self) -> Result<rusqlite::CachedStatement<'_>> {
        self.conn
            .prepare_cached("SELECT kind, anchor, text FROM segments WHERE id = ?1")
            .map_err(|e| db_err(&self.path, e))
    }

    /// A kept row as a hit, with its kind, anchor and text.
    pub(crate) fn hit(
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
