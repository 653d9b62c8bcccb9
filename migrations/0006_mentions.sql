-- Catalog level 6: mentions. `mentions` links an extracted segment to each person, place
-- or project whose name or alias it contains (case-folded, on word boundaries);
-- `mention_names` is the set of names (case-folded) the links were computed with, per
-- entity, so a renamed entity is matched again. Derived from the segments and the current
-- entities; rebuilt by `lifeos reindex`.
CREATE TABLE IF NOT EXISTS mention_names (
    eid  TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (eid, name)
);
CREATE TABLE IF NOT EXISTS mentions (
    segment INTEGER NOT NULL,
    eid     TEXT NOT NULL,
    PRIMARY KEY (segment, eid)
);
CREATE INDEX IF NOT EXISTS mentions_by_eid ON mentions (eid);
DELETE FROM meta WHERE key = 'op_heads';
