-- Catalog level 12: how many segments hold each term of the full-text index, so ranking
-- reads a phrase's document frequency instead of counting its matches on every query
-- (12.5). Kept by the catalog as it indexes and removes segments, with FTS5's own
-- tokenizer; filled here from the index as it stands.
CREATE TABLE IF NOT EXISTS term_docs (
    term TEXT PRIMARY KEY,
    docs INTEGER NOT NULL
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS temp.segments_terms USING fts5vocab(main, segments_fts, row);
INSERT OR REPLACE INTO term_docs (term, docs) SELECT term, doc FROM temp.segments_terms;
DROP TABLE temp.segments_terms;
