-- Catalog level 4: the git map. Which lifeos object each git object became (import) or
-- was written as (export): `kind` is 1 commit, 2 tree, 3 blob (a file's content), 4 blob
-- (a symlink's target), 5 annotated tag; `size` is the object's size as lifeos counts it
-- (the bytes under a tree, a blob's length). Each row is a fact that follows from the
-- objects' bytes, so a row never goes wrong; whether both objects still exist is checked
-- where a row is used. Rebuilt by `lifeos reindex` (lifeos-git).
CREATE TABLE IF NOT EXISTS git_map (
    sha1 BLOB NOT NULL,
    kind INTEGER NOT NULL,
    id   BLOB NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (sha1, kind)
);
CREATE INDEX IF NOT EXISTS git_map_by_id ON git_map (id, kind);
