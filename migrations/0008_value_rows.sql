-- Catalog level 8: the value index also holds each value's version row, so a query that
-- reads values in value or id order through it (`task where status = "open" limit 20`)
-- reaches each version without first reading the value's own table row.
DROP INDEX IF EXISTS entity_values_by_value;
CREATE INDEX IF NOT EXISTS entity_values_by_value ON entity_values (name, rank, v, eid, pos, row);
