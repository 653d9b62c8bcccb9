//! Extracts in the catalog: each file version's jobs and their state, its segments with
//! their anchors, indexed for full-text search as ingest records them.

use super::*;

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
pub(crate) fn index_extracts(
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
