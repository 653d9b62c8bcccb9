-- Catalog level 10: extract rows found by their object id, so a sync that meets an extract
-- already indexed (every one of them, after migration 9 forgot the indexed operations)
-- settles it without reading the object from the store.
CREATE INDEX IF NOT EXISTS extracts_by_object ON extracts (object);
