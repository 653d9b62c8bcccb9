-- Catalog level 5: entities, indexed with validity ranges. `entity_ops` numbers the
-- operations in the order `--at` picks them (end time, then id); `root` is the entity
-- root of the operation's view. A row of `entity_versions` is one entity object that is
-- live from operation `from_seq` until the operation `to_seq` that replaced or removed it
-- (exclusive; 9223372036854775807 while it is current), so the entities of any
-- operation's view are the rows with from_seq <= seq < to_seq. `entity_values` holds what
-- a query reads for one name (`rank` 0 text, 1 number, 2 bool, 3 date or moment as ms
-- since the epoch; a relation's targets as text when no attribute has its name; `pos` is
-- the value's place, 0 first; `eid` the entity's id, so an order by value then id reads
-- the index in order); `entity_links` every link. Derived from the objects;
-- rebuilt by `lifeos reindex`.
CREATE TABLE IF NOT EXISTS entity_ops (
    seq    INTEGER PRIMARY KEY,
    op     BLOB NOT NULL UNIQUE,
    end_ms INTEGER NOT NULL,
    root   BLOB
);
CREATE TABLE IF NOT EXISTS entity_versions (
    row      INTEGER PRIMARY KEY,
    eid      TEXT NOT NULL,
    type     TEXT NOT NULL,
    object   BLOB NOT NULL,
    from_seq INTEGER NOT NULL,
    to_seq   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entity_versions_by_eid ON entity_versions (eid, to_seq);
CREATE INDEX IF NOT EXISTS entity_versions_by_type ON entity_versions (type, eid, to_seq, from_seq);
CREATE INDEX IF NOT EXISTS entity_versions_by_from ON entity_versions (from_seq);
CREATE TABLE IF NOT EXISTS entity_values (
    row  INTEGER NOT NULL,
    eid  TEXT NOT NULL,
    name TEXT NOT NULL,
    pos  INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    v    NOT NULL
);
CREATE INDEX IF NOT EXISTS entity_values_by_value ON entity_values (name, rank, v, eid, pos);
CREATE INDEX IF NOT EXISTS entity_values_by_row ON entity_values (row, name);
CREATE TABLE IF NOT EXISTS entity_links (
    row    INTEGER NOT NULL,
    rel    TEXT NOT NULL,
    pos    INTEGER NOT NULL,
    target TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entity_links_by_row ON entity_links (row, rel);
CREATE INDEX IF NOT EXISTS entity_links_by_target ON entity_links (target, rel);
-- Index the entities of operations recorded before this level on the next sync.
DELETE FROM meta WHERE key = 'op_heads';
