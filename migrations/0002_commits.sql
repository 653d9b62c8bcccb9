-- Catalog level 2: every commit reachable from an indexed operation, with its canonical
-- encoding, so history walks (log, revsets) need no pack reads. Derived; rebuilt by
-- `lifeos reindex`.
CREATE TABLE IF NOT EXISTS commits (
    id             BLOB PRIMARY KEY,
    committer_time INTEGER NOT NULL,
    data           BLOB NOT NULL
);
