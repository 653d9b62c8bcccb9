//! The catalog's ranking and terms over its FTS5 index (FORMAT 12.5, 12.11).
//!
//! `lifeos_bm25` is BM25 as FTS5's own `bm25()` computes it, except where a phrase's
//! document frequency comes from: `bm25()` counts the rows matching each phrase on
//! every query (for a word in 588,000 of 1.1 million segments, a third of the search),
//! this reads each term's count from the `term_docs` table (level 12), which the catalog
//! keeps as it indexes segments, with FTS5's own tokenizer ([`Tokenizer`]), so its terms
//! are the index's. A phrase of several terms counts as many rows as its rarest term.
//!
//! FTS5 offers both through its C API only (`fts5_api`): the unsafe code of the catalog
//! is here, each block with what it relies on.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{ffi, Connection};

/// BM25's `k1` and `b`, FTS5's values.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The longest term FTS5 indexes, in bytes (`FTS5_MAX_TOKEN_SIZE`): longer ones are cut.
const MAX_TOKEN: usize = 32_768;

/// The IDF given to a phrase in at least half of the rows: BM25's formula is zero or
/// negative there; FTS5 uses this small positive value.
const MIN_IDF: f64 = 1e-6;

fn failure(code: c_int, msg: impl Into<String>) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(msg.into()))
}

/// The connection's FTS5 API, found as SQLite documents: `SELECT fts5(?1)` with a pointer
/// to it bound as type `fts5_api_ptr`.
fn api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: the handle is the open connection's and used on this thread only; the
    // statement is finalized before `api` (bound by pointer) goes out of scope.
    let rc = unsafe {
        let db = conn.handle();
        let mut stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, "FTS5 is not available"));
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&raw mut api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        let rc = ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        rc
    };
    if rc != ffi::SQLITE_ROW || api.is_null() {
        return Err(failure(rc, "FTS5 gave no API"));
    }
    Ok(api)
}

/// Registers `lifeos_bm25` on the connection: an FTS5 auxiliary function, used as
/// `rank MATCH 'lifeos_bm25()'` (12.5).
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let api = api(conn)?;
    // SAFETY: `api` is the live connection's FTS5 API; the function has the signature
    // FTS5 calls and keeps no pointer past a call but the auxiliary data FTS5 owns.
    let rc = unsafe {
        let Some(create) = (*api).xCreateFunction else {
            return Err(failure(ffi::SQLITE_ERROR, "FTS5 cannot add functions"));
        };
        create(
            api,
            c"lifeos_bm25".as_ptr(),
            ptr::null_mut(),
            Some(bm25),
            None,
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(failure(rc, "registering lifeos_bm25"));
    }
    Ok(())
}

/// What a query's rows share: each phrase's IDF and the average row length.
struct QueryStats {
    idf: Vec<f64>,
    avgdl: f64,
}

unsafe extern "C" fn drop_stats(p: *mut c_void) {
    // SAFETY: FTS5 hands back the pointer `score` gave it, once.
    drop(unsafe { Box::from_raw(p.cast::<QueryStats>()) });
}

/// The FTS5 auxiliary function: the row's BM25 score, negated (lower is better, as
/// FTS5's `rank`).
unsafe extern "C" fn bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _n: c_int,
    _args: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 passes its API, the query's context and the result context, all
    // valid for the call; a panic stops here instead of unwinding into C.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe { score(&*api, fts, ctx) }));
    // SAFETY: `ctx` is this call's result context.
    unsafe {
        match r {
            Ok(Ok(s)) => ffi::sqlite3_result_double(ctx, s),
            Ok(Err(rc)) => ffi::sqlite3_result_error_code(ctx, rc),
            Err(_) => ffi::sqlite3_result_error(ctx, c"lifeos_bm25 failed".as_ptr(), -1),
        }
    }
}

/// Whether an FTS5 API method is there (every version this needs has them all).
fn method<T>(m: Option<T>) -> Result<T, c_int> {
    m.ok_or(ffi::SQLITE_MISUSE)
}

fn ok(rc: c_int) -> Result<(), c_int> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rc)
    }
}

/// # Safety
/// `api`, `fts` and `ctx` are those FTS5 passed to the auxiliary function.
unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
) -> Result<f64, c_int> {
    // SAFETY (the whole body): the methods are FTS5's for this query, called with its
    // context; the auxiliary data is the box this function set for the same query.
    unsafe {
        // xQueryToken (a phrase's terms, read by `query_stats`) came with version 3 of
        // this API (SQLite 3.45): an older one has no such field to read.
        if api.iVersion < 3 {
            return Err(ffi::SQLITE_ERROR);
        }
        let mut stats = method(api.xGetAuxdata)?(fts, 0).cast::<QueryStats>();
        if stats.is_null() {
            let set = method(api.xSetAuxdata)?;
            let fresh = Box::into_raw(Box::new(query_stats(api, fts, ctx)?));
            // On failure FTS5 has called `drop_stats` on it already.
            ok(set(fts, fresh.cast(), Some(drop_stats)))?;
            stats = fresh;
        }
        let stats = &*stats;
        let mut freq = vec![0.0f64; stats.idf.len()];
        let mut n = 0;
        ok(method(api.xInstCount)?(fts, &mut n))?;
        let inst = method(api.xInst)?;
        for i in 0..n {
            let (mut phrase, mut col, mut off) = (0, 0, 0);
            ok(inst(fts, i, &mut phrase, &mut col, &mut off))?;
            if let Some(f) = usize::try_from(phrase).ok().and_then(|p| freq.get_mut(p)) {
                *f += 1.0;
            }
        }
        let mut len = 0;
        ok(method(api.xColumnSize)?(fts, -1, &mut len))?;
        let d = f64::from(len);
        // As fts5_aux.c computes it, operation for operation, so the bits are equal.
        let mut s = 0.0;
        for (idf, f) in stats.idf.iter().zip(&freq) {
            s += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / stats.avgdl)));
        }
        Ok(-s)
    }
}

/// The IDF of each of the query's phrases (its rarest term's row count from
/// `term_docs`, read on the query's own connection) and the average row length.
///
/// # Safety
/// As [`score`].
unsafe fn query_stats(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
) -> Result<QueryStats, c_int> {
    // SAFETY (the whole body): as in `score`; the statement runs on the connection the
    // query runs on (SQLite allows a function to query it) and is finalized on every path.
    unsafe {
        let (mut rows, mut tokens) = (0i64, 0i64);
        ok(method(api.xRowCount)?(fts, &mut rows))?;
        ok(method(api.xColumnTotalSize)?(fts, -1, &mut tokens))?;
        let avgdl = tokens as f64 / rows.max(1) as f64;
        let phrases = method(api.xPhraseCount)?(fts);
        let (size, token) = (method(api.xPhraseSize)?, method(api.xQueryToken)?);
        let db = ffi::sqlite3_context_db_handle(ctx);
        let mut stmt = ptr::null_mut();
        ok(ffi::sqlite3_prepare_v2(
            db,
            c"SELECT docs FROM term_docs WHERE term = ?1".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        ))?;
        let docs = |term: *const c_char, n: c_int| -> Result<i64, c_int> {
            ffi::sqlite3_reset(stmt);
            ok(ffi::sqlite3_bind_text(
                stmt,
                1,
                term,
                n,
                ffi::SQLITE_TRANSIENT(),
            ))?;
            match ffi::sqlite3_step(stmt) {
                ffi::SQLITE_ROW => Ok(ffi::sqlite3_column_int64(stmt, 0)),
                ffi::SQLITE_DONE => Ok(0),
                rc => Err(rc),
            }
        };
        let mut idf = Vec::new();
        let mut result = Ok(());
        'phrases: for p in 0..phrases {
            let mut hits: Option<i64> = None;
            for t in 0..size(fts, p) {
                let (mut term, mut n) = (ptr::null(), 0);
                let d = ok(token(fts, p, t, &mut term, &mut n)).and_then(|()| docs(term, n));
                match d {
                    Ok(d) => hits = Some(hits.map_or(d, |h| h.min(d))),
                    Err(rc) => {
                        result = Err(rc);
                        break 'phrases;
                    }
                }
            }
            idf.push(idf_of(rows, hits.unwrap_or(0)));
        }
        ffi::sqlite3_finalize(stmt);
        result.map(|()| QueryStats { idf, avgdl })
    }
}

/// BM25's IDF of a phrase found in `hits` of `rows` rows, as FTS5 computes it.
fn idf_of(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        MIN_IDF
    } else {
        idf
    }
}

/// FTS5's `unicode61` tokenizer with the options the catalog's index is declared with
/// (`remove_diacritics 2`, FORMAT 12.3): the terms the index holds for a text.
pub(crate) struct Tokenizer<'c> {
    tok: *mut ffi::Fts5Tokenizer,
    methods: ffi::fts5_tokenizer,
    _conn: PhantomData<&'c Connection>,
}

impl<'c> Tokenizer<'c> {
    /// The tokenizer, from `conn`'s FTS5.
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<Tokenizer<'c>> {
        let api = api(conn)?;
        let mut user = ptr::null_mut();
        let mut methods = ffi::fts5_tokenizer {
            xCreate: None,
            xDelete: None,
            xTokenize: None,
        };
        let mut tok = ptr::null_mut();
        // SAFETY: `api` is the live connection's; FTS5 fills `methods` with unicode61's
        // and `tok` with an instance freed by `Drop`. The arguments outlive the call.
        let rc = unsafe {
            let Some(find) = (*api).xFindTokenizer else {
                return Err(failure(ffi::SQLITE_ERROR, "FTS5 cannot find tokenizers"));
            };
            let rc = find(api, c"unicode61".as_ptr(), &mut user, &mut methods);
            match (rc, methods.xCreate, methods.xTokenize) {
                (ffi::SQLITE_OK, Some(create), Some(_)) => {
                    let mut args = [c"remove_diacritics".as_ptr(), c"2".as_ptr()];
                    create(user, args.as_mut_ptr(), 2, &mut tok)
                }
                (ffi::SQLITE_OK, ..) => ffi::SQLITE_ERROR,
                (rc, ..) => rc,
            }
        };
        if rc != ffi::SQLITE_OK || tok.is_null() {
            let rc = if rc == ffi::SQLITE_OK {
                ffi::SQLITE_ERROR
            } else {
                rc
            };
            return Err(failure(rc, "FTS5's unicode61 tokenizer is missing"));
        }
        Ok(Tokenizer {
            tok,
            methods,
            _conn: PhantomData,
        })
    }

    /// Calls `each` with every term of `text`, in order (a term as often as it occurs).
    pub(crate) fn terms(&self, text: &str, each: &mut dyn FnMut(&[u8])) -> rusqlite::Result<()> {
        unsafe extern "C" fn token(
            ctx: *mut c_void,
            flags: c_int,
            term: *const c_char,
            n: c_int,
            _start: c_int,
            _end: c_int,
        ) -> c_int {
            if flags & ffi::FTS5_TOKEN_COLOCATED != 0 {
                return ffi::SQLITE_OK;
            }
            // SAFETY: `ctx` is the `&mut dyn FnMut` `terms` passed, alive for the call;
            // FTS5 gives `n` bytes at `term` (no pointer to read when there are none).
            let r = catch_unwind(AssertUnwindSafe(|| unsafe {
                let each = &mut *ctx.cast::<&mut dyn FnMut(&[u8])>();
                // The index keeps at most FTS5_MAX_TOKEN_SIZE bytes of a term (as its
                // query parser does): counted as it keeps it.
                let n = usize::try_from(n).unwrap_or(0).min(MAX_TOKEN);
                if n > 0 && !term.is_null() {
                    each(std::slice::from_raw_parts(term.cast::<u8>(), n));
                }
            }));
            if r.is_ok() {
                ffi::SQLITE_OK
            } else {
                ffi::SQLITE_ERROR
            }
        }
        let len = c_int::try_from(text.len())
            .map_err(|_| failure(ffi::SQLITE_TOOBIG, "text too long to tokenize"))?;
        let Some(tokenize) = self.methods.xTokenize else {
            return Err(failure(ffi::SQLITE_MISUSE, "no tokenizer"));
        };
        let mut each = each;
        // SAFETY: the instance is live (freed only by Drop); the text and the callback's
        // context outlive the call, which does not keep them.
        let rc = unsafe {
            tokenize(
                self.tok,
                (&raw mut each).cast::<c_void>(),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                text.as_ptr().cast::<c_char>(),
                len,
                Some(token),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, "tokenizing a segment"));
        }
        Ok(())
    }
}

impl Drop for Tokenizer<'_> {
    fn drop(&mut self) {
        if let Some(delete) = self.methods.xDelete {
            // SAFETY: the instance `new` created, deleted once.
            unsafe { delete(self.tok) };
        }
    }
}

/// Changes to `term_docs` being gathered: per term, the segments indexed minus those
/// removed, each segment counted once per distinct term.
#[derive(Default)]
pub(crate) struct TermDocs {
    counts: HashMap<Vec<u8>, i64>,
    /// One segment's terms, end to end, and where each ends (reused).
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl TermDocs {
    /// Counts the distinct terms of `text` with `sign` (1 added, -1 removed).
    pub(crate) fn count(
        &mut self,
        tok: &Tokenizer<'_>,
        text: &str,
        sign: i64,
    ) -> rusqlite::Result<()> {
        self.buf.clear();
        self.ends.clear();
        let (buf, ends) = (&mut self.buf, &mut self.ends);
        tok.terms(text, &mut |t| {
            buf.extend_from_slice(t);
            ends.push(buf.len());
        })?;
        let mut terms: Vec<&[u8]> = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            terms.push(&self.buf[start..end]);
            start = end;
        }
        terms.sort_unstable();
        terms.dedup();
        for t in terms {
            match self.counts.get_mut(t) {
                Some(c) => *c += sign,
                None => {
                    self.counts.insert(t.to_vec(), sign);
                }
            }
        }
        Ok(())
    }

    /// Adds the counts to `term_docs`, dropping terms no segment holds any more.
    pub(crate) fn save(self, conn: &Connection) -> rusqlite::Result<()> {
        let mut up = conn.prepare_cached(
            "INSERT INTO term_docs (term, docs) VALUES (?1, ?2)
             ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs",
        )?;
        let mut gone =
            conn.prepare_cached("DELETE FROM term_docs WHERE term = ?1 AND docs <= 0")?;
        for (term, n) in &self.counts {
            let term = ToSqlOutput::Borrowed(ValueRef::Text(term));
            if *n != 0 {
                up.execute(rusqlite::params![term, n])?;
            }
            if *n < 0 {
                gone.execute([term])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[&str]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for (_, sql) in crate::MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        register(&conn).unwrap();
        let tok = Tokenizer::new(&conn).unwrap();
        let mut counts = TermDocs::default();
        for (i, t) in texts.iter().enumerate() {
            conn.execute(
                "INSERT INTO segments (id, file_id, extractor, version, kind, anchor, text, meta) VALUES (?1, x'00', 'text', 1, 'text', '{}', ?2, '')",
                rusqlite::params![i as i64 + 1, t],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO segments_fts (rowid, text) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, t],
            )
            .unwrap();
            counts.count(&tok, t, 1).unwrap();
        }
        drop(tok);
        counts.save(&conn).unwrap();
        conn
    }

    fn table(conn: &Connection, sql: &str) -> Vec<(String, i64)> {
        let mut st = conn.prepare(sql).unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    const TEXTS: &[&str] = &[
        "Budget budget for the Café",
        "the cafe budget, again: BUDGET",
        "Straße und Ärger; naïve 東京 tokens",
        "nothing in common",
        "budget review, quarterly review",
    ];

    /// The counts kept are FTS5's own (its `fts5vocab` of the index), for accents,
    /// case, non-Latin scripts and repeated terms.
    #[test]
    fn term_docs_are_the_index_s_document_frequencies() {
        // A term longer than FTS5 keeps (32,768 bytes), cut as it cuts it.
        let long = format!("{} and {}é tail", "k".repeat(40_000), "é".repeat(20_000));
        let mut texts = TEXTS.to_vec();
        texts.push(&long);
        let conn = index(&texts);
        conn.execute_batch("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, segments_fts, row);")
            .unwrap();
        let vocab = table(&conn, "SELECT term, doc FROM temp.v ORDER BY term");
        let kept = table(&conn, "SELECT term, docs FROM term_docs ORDER BY term");
        assert_eq!(kept, vocab);
        assert!(kept.contains(&("budget".into(), 3)), "{kept:?}");
        assert!(kept.contains(&("cafe".into(), 2)), "{kept:?}");
    }

    /// Level 12's migration fills the counts from an index made before it.
    #[test]
    fn the_migration_counts_what_the_index_holds() {
        let conn = index(TEXTS);
        let kept = table(&conn, "SELECT term, docs FROM term_docs ORDER BY term");
        conn.execute_batch("DELETE FROM term_docs").unwrap();
        let (_, level12) = crate::MIGRATIONS[11];
        conn.execute_batch(level12).unwrap();
        assert_eq!(
            table(&conn, "SELECT term, docs FROM term_docs ORDER BY term"),
            kept
        );
    }

    /// Removing a segment takes its terms off the counts, and a term no segment holds
    /// any more off the table.
    #[test]
    fn removed_segments_leave_no_count() {
        let conn = index(TEXTS);
        let tok = Tokenizer::new(&conn).unwrap();
        let mut counts = TermDocs::default();
        for t in &TEXTS[..3] {
            counts.count(&tok, t, -1).unwrap();
        }
        drop(tok);
        counts.save(&conn).unwrap();
        let kept = table(&conn, "SELECT term, docs FROM term_docs ORDER BY term");
        assert!(
            !kept.iter().any(|(t, _)| t == "cafe" || t == "東京"),
            "{kept:?}"
        );
        assert!(kept.contains(&("budget".into(), 1)), "{kept:?}");
    }

    /// With every term counted, a query of single words ranks and scores exactly as
    /// FTS5's `bm25()`; a phrase counts as many rows as its rarest word.
    #[test]
    fn lifeos_bm25_is_fts5_s_bm25_for_words() {
        let conn = index(TEXTS);
        let scores = |q: &str, f: &str| -> Vec<(i64, f64)> {
            let mut st = conn
                .prepare(&format!(
                    "SELECT rowid, rank FROM segments_fts WHERE segments_fts MATCH ?1 AND rank MATCH '{f}' ORDER BY rank"
                ))
                .unwrap();
            st.query_map([q], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(|r| r.unwrap())
                .collect()
        };
        for q in [
            "budget",
            "review",
            "budget review",
            "cafe OR ärger",
            "budget NOT again",
        ] {
            let (ours, fts5) = (scores(q, "lifeos_bm25()"), scores(q, "bm25()"));
            assert_eq!(ours.len(), fts5.len(), "{q}");
            for ((r1, s1), (r2, s2)) in ours.iter().zip(&fts5) {
                assert_eq!(r1, r2, "{q}");
                assert_eq!(s1.to_bits(), s2.to_bits(), "{q}: {s1} vs {s2}");
            }
        }
        // "budget review" as a phrase is once in row 5 (4 terms; 23 terms in 5 rows),
        // counted as in 1 row as "review" is (not in 3 as "budget").
        let phrase = scores("\"budget review\"", "lifeos_bm25()");
        let idf = ((5.0 - 1.0 + 0.5) / (1.0 + 0.5f64)).ln();
        let want = -idf * (1.0 * (K1 + 1.0)) / (1.0 + K1 * (1.0 - B + B * 4.0 / (23.0 / 5.0)));
        assert_eq!(phrase.len(), 1);
        assert_eq!(phrase[0].0, 5);
        assert!((phrase[0].1 - want).abs() < 1e-12, "{phrase:?} vs {want}");
    }
}
