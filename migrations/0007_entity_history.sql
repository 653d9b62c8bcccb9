-- Catalog level 7: each entity version records which attributes it changed (names joined
-- by ',', every attribute for a new entity; `links` when its links changed), so
-- `entity history` reads a version list from the index. Versions indexed before this
-- level have no such record: the entity index and the mentions computed from it are
-- rebuilt on the next sync.
ALTER TABLE entity_versions ADD COLUMN changed TEXT NOT NULL DEFAULT '';
DELETE FROM entity_values;
DELETE FROM entity_links;
DELETE FROM entity_versions;
DELETE FROM entity_ops;
DELETE FROM mentions;
DELETE FROM mention_names;
DELETE FROM meta WHERE key = 'op_heads';
