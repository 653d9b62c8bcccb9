-- Catalog level 9: each extract row names the operation that first recorded its object, so
-- `lifeos extract show` can say when it was made. Rows indexed before this level learn
-- theirs when the operation log is indexed again: forgetting the indexed operations makes
-- the next sync walk the whole log (entities, commits and segments already indexed are
-- kept; an extract already indexed only gains its operation).
ALTER TABLE extracts ADD COLUMN op BLOB;
DELETE FROM operations;
DELETE FROM meta WHERE key = 'op_heads';
