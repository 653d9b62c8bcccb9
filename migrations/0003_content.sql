-- Catalog level 3: extracted content for search. One row per extract object (keyed by
-- file, extractor, version), its segments, and an FTS5 index over the segment text.
-- Derived from the Extract objects named by operations; rebuilt by `lifeos reindex`.
CREATE TABLE IF NOT EXISTS extracts (
    file_id   BLOB NOT NULL,
    extractor TEXT NOT NULL,
    version   INTEGER NOT NULL,
    object    BLOB NOT NULL,
    ok        INTEGER NOT NULL,
    reason    TEXT,
    PRIMARY KEY (file_id, extractor, version)
);
CREATE TABLE IF NOT EXISTS segments (
    id        INTEGER PRIMARY KEY,
    file_id   BLOB NOT NULL,
    extractor TEXT NOT NULL,
    version   INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    anchor    TEXT NOT NULL,
    text      TEXT NOT NULL,
    meta      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS segments_by_file ON segments (file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS segments_fts USING fts5 (
    text,
    content = 'segments',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
