-- Catalog level 1: the operation log, indexed by time for `--at`.
-- The catalog is derived from the objects; `lifeos reindex` rebuilds it.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS operations (
    id          BLOB PRIMARY KEY,
    end_ms      INTEGER NOT NULL,
    start_ms    INTEGER NOT NULL,
    view        BLOB NOT NULL,
    parents     BLOB NOT NULL,
    user        TEXT NOT NULL,
    host        TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_by_end ON operations (end_ms);
