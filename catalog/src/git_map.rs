//! The git map: the SHA-1 of every object export writes, both ways.

use super::*;

impl Catalog {
    /// The lifeos object (and its size) a git object corresponds to, if the git map has
    /// it.
    pub fn git_lookup(&self, sha1: &[u8; 20], kind: GitObject) -> Result<Option<(Id, u64)>> {
        self.conn
            .prepare_cached("SELECT id, size FROM git_map WHERE sha1 = ?1 AND kind = ?2")
            .and_then(|mut s| {
                s.query_row(params![&sha1[..], kind as u8], |r| {
                    Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
                })
                .optional()
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.and_then(|(id, size)| Some((Id::from_slice(&id)?, size as u64))))
    }

    /// The git object a lifeos object corresponds to, if the git map has it.
    pub fn git_sha1(&self, id: &Id, kind: GitObject) -> Result<Option<[u8; 20]>> {
        self.conn
            .prepare_cached("SELECT sha1 FROM git_map WHERE id = ?1 AND kind = ?2 LIMIT 1")
            .and_then(|mut s| {
                s.query_row(params![&id.0[..], kind as u8], |r| r.get::<_, Vec<u8>>(0))
                    .optional()
            })
            .map_err(|e| db_err(&self.path, e))
            .map(|o| o.and_then(|v| v.try_into().ok()))
    }

    /// Adds rows to the git map (a row already there is replaced).
    pub fn git_record(&mut self, rows: &[GitMapRow]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_err(&path, e))?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR REPLACE INTO git_map (sha1, kind, id, size) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| db_err(&path, e))?;
            for r in rows {
                insert
                    .execute(params![
                        &r.sha1[..],
                        r.kind as u8,
                        &r.id.0[..],
                        r.size as i64
                    ])
                    .map_err(|e| db_err(&path, e))?;
            }
        }
        tx.commit().map_err(|e| db_err(&path, e))
    }

    /// Number of rows in the git map.
    pub fn git_map_len(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM git_map", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }
}

/// What a git object is to lifeos, as the git map records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitObject {
    /// A commit.
    Commit = 1,
    /// A tree.
    Tree = 2,
    /// A blob holding a file's content.
    Blob = 3,
    /// A blob holding a symlink's target.
    Symlink = 4,
    /// An annotated tag.
    Tag = 5,
    /// A blob holding a pointer that git's `lifeos` filter wrote for a file whose content
    /// lifeos stores (the row's id and size are the content's); recorded once the
    /// operation keeping that content is published.
    Pointer = 6,
}

/// One row of the git map: a git object's SHA-1, what it is, the lifeos object it
/// corresponds to, and that object's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitMapRow {
    /// The git object id.
    pub sha1: [u8; 20],
    /// What it is.
    pub kind: GitObject,
    /// The lifeos object.
    pub id: Id,
    /// Bytes under a tree, a blob's length, 0 otherwise.
    pub size: u64,
}
