//! Commits: a tree, parents, a change id, who and when, a message, and what git needs to
//! rebuild the commit byte for byte (FORMAT 7.3).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

use super::codec::{read_ids, read_opt_id, write_ids, write_opt_id};

/// Commit format version: 1, or 2 for a commit with a kept git header.
pub const COMMIT_VERSION: u8 = 2;

/// Who made a commit, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Name.
    pub name: String,
    /// Email.
    pub email: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// Offset of the local time zone from UTC, in minutes.
    pub tz_offset_min: i32,
}

/// A commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The root tree.
    pub tree: Id,
    /// Parent commits (none for a root commit, two or more for a merge).
    pub parents: Vec<Id>,
    /// Stable across rewrites of the same change (16 random bytes).
    pub change_id: [u8; 16],
    /// Author.
    pub author: Signature,
    /// Committer.
    pub committer: Signature,
    /// The message, as given (not necessarily UTF-8).
    pub message: Vec<u8>,
    /// Extra git headers (name, value) kept so a git commit can be re-created byte for byte.
    pub extra_headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Paths a merge could not resolve, with the three versions (sorted by path).
    pub conflicts: Vec<Conflict>,
    /// For a commit imported from git: the raw bytes of the git commit between its
    /// `parent` lines and its message (author, committer, `encoding`, `gpgsig`, every
    /// other header in order, and the blank line if there was one), so export rebuilds
    /// the git commit byte for byte. `None` for commits made in lifeos, and dropped when
    /// a commit is rewritten.
    pub git_header: Option<Vec<u8>>,
}

/// A path a merge could not resolve: the tree holds a version with conflict markers (or
/// ours, for binary files); the three inputs are kept so nothing is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Repository path (bytes).
    pub path: crate::path::BString,
    /// The merge base's version (file id), if it had one.
    pub base: Option<Id>,
    /// Our side's version.
    pub ours: Option<Id>,
    /// Their side's version.
    pub theirs: Option<Id>,
}

fn write_sig(w: &mut Writer, s: &Signature) {
    w.bytes(s.name.as_bytes())
        .bytes(s.email.as_bytes())
        .int(s.time)
        .int(i64::from(s.tz_offset_min));
}

fn read_sig(r: &mut Reader<'_>, what: &'static str) -> Result<Signature, DecodeError> {
    Ok(Signature {
        name: r.str(what)?.to_string(),
        email: r.str(what)?.to_string(),
        time: r.int(what)?,
        tz_offset_min: i32::try_from(r.int(what)?)
            .map_err(|_| DecodeError::new(what, "time zone offset out of range"))?,
    })
}

impl Commit {
    /// The canonical encoding (version 2 only for a commit with a git header).
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.git_header.is_some() { 2 } else { 1 };
        let mut w = Writer::with_header(Kind::Commit as u8, version);
        w.id(&self.tree);
        write_ids(&mut w, &self.parents);
        w.raw(&self.change_id);
        write_sig(&mut w, &self.author);
        write_sig(&mut w, &self.committer);
        w.bytes(&self.message);
        w.uint(self.extra_headers.len() as u64);
        for (k, v) in &self.extra_headers {
            w.bytes(k).bytes(v);
        }
        w.uint(self.conflicts.len() as u64);
        for c in &self.conflicts {
            w.bytes(&c.path);
            write_opt_id(&mut w, &c.base);
            write_opt_id(&mut w, &c.ours);
            write_opt_id(&mut w, &c.theirs);
        }
        if let Some(h) = &self.git_header {
            w.bytes(h);
        }
        w.finish()
    }

    /// Decodes a commit.
    pub fn decode(bytes: &[u8]) -> Result<Commit, DecodeError> {
        const W: &str = "commit";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Commit as u8, COMMIT_VERSION)?;
        let tree = r.id(W)?;
        let parents = read_ids(&mut r, W)?;
        let change_id: [u8; 16] = r.raw(W, 16)?.try_into().expect("16 bytes");
        let author = read_sig(&mut r, W)?;
        let committer = read_sig(&mut r, W)?;
        let message = r.bytes(W)?.to_vec();
        let n = r.count(W)?;
        let mut extra_headers = Vec::with_capacity(n);
        for _ in 0..n {
            extra_headers.push((r.bytes(W)?.to_vec(), r.bytes(W)?.to_vec()));
        }
        let n = r.count(W)?;
        let mut conflicts: Vec<Conflict> = Vec::with_capacity(n);
        for _ in 0..n {
            let path = crate::path::BString::from(r.bytes(W)?);
            if conflicts.last().is_some_and(|c| c.path >= path) {
                return Err(DecodeError::new(W, "conflict paths are not sorted"));
            }
            let base = read_opt_id(&mut r, W)?;
            let ours = read_opt_id(&mut r, W)?;
            let theirs = read_opt_id(&mut r, W)?;
            conflicts.push(Conflict {
                path,
                base,
                ours,
                theirs,
            });
        }
        let git_header = if version >= 2 {
            Some(r.bytes(W)?.to_vec())
        } else {
            None
        };
        r.finish(W)?;
        Ok(Commit {
            tree,
            parents,
            change_id,
            author,
            committer,
            message,
            extra_headers,
            conflicts,
            git_header,
        })
    }

    /// The first line of the message.
    pub fn summary(&self) -> String {
        let text = String::from_utf8_lossy(&self.message);
        text.lines().next().unwrap_or("").to_string()
    }
}

/// Renders a change id in the `k`–`z` alphabet (so it never looks like a commit id).
pub fn change_id_str(id: &[u8; 16]) -> String {
    id.iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .map(|n| (b'k' + n) as char)
        .collect()
}

/// Parses the `k`–`z` form of a change id prefix into nibbles.
pub fn is_change_id_prefix(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| (b'k'..=b'z').contains(&b))
}
