//! The folder monitor's client side: asking a running `lifeos watch` which paths changed
//! since the stat cache was saved, so that `status` and `commit` look only at those paths
//! instead of the whole folder (as git does with fsmonitor).
//!
//! The watcher (`lifeos-fsmonitor`) keeps a journal of the paths inotify reported,
//! numbered in the order it read them, and answers on a Unix socket in `.lifeos`
//! (FORMAT 9.9). Every answer first waits for a cookie file the watcher creates to come
//! back through inotify, so the journal holds every change made before the question.
//! A token (the watcher's instance and a position in its journal) is saved beside the
//! stat cache in `.lifeos/wc_monitor` (FORMAT 9.8), naming the exact cache it goes with:
//! the folder is that cache, but for the paths the journal lists after the token. A
//! missing or different watcher, a lost event, a journal that overflowed, or a side file
//! that does not match the cache all mean a full scan, never a guess.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use lifeos_store::codec::{Reader, Writer};
use lifeos_store::Id;

use lifeos_store::Transaction;

use crate::error::Result;
use crate::object::{EntryKind, TreeEntry};
use crate::path::BString;
use crate::repo::Repo;
use crate::working_copy::snapshot_edits::PartialScan;
use crate::working_copy::stat_cache::StatCache;
use crate::working_copy::types::Token;
use crate::working_copy::{scan_within, CacheEntry, Skipped, Snapshot, SnapshotProgress};

/// The watcher's socket, inside `.lifeos`.
pub const SOCKET: &str = "monitor.sock";
/// The side file that ties a monitor token to the stat cache, inside `.lifeos`.
pub const SIDE_FILE: &str = "wc_monitor";
/// The first bytes of every request and answer.
pub const PROTOCOL: &[u8; 10] = b"LIFEOSMON1";
/// The first bytes of the side file.
const SIDE_MAGIC: &[u8; 8] = b"LIFEOSMN";
const SIDE_VERSION: u8 = 1;
/// How long a client waits for an answer before scanning the whole folder.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the watcher says changed since a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Only these paths (files or folders, relative to the folder, in any order) can
    /// differ; a folder means everything below it.
    Paths(Vec<BString>),
    /// Anything can have changed (another watcher, no token, lost events): scan it all.
    All(String),
}

/// Encodes a request: the token the asker holds, if any.
pub fn encode_request(since: Option<Token>) -> Vec<u8> {
    let mut w = Writer::default();
    w.raw(PROTOCOL);
    match since {
        Some(t) => w.u8(1).uint(t.instance).uint(t.seq),
        None => w.u8(0),
    };
    w.finish()
}

/// Decodes a request; `None` if it is not one.
pub fn decode_request(b: &[u8]) -> Option<Option<Token>> {
    let mut r = Reader::new(b);
    if r.raw("request", PROTOCOL.len()).ok()? != PROTOCOL {
        return None;
    }
    let since = match r.u8("request").ok()? {
        0 => None,
        1 => Some(token(&mut r)?),
        _ => return None,
    };
    r.finish("request").ok()?;
    Some(since)
}

fn token(r: &mut Reader<'_>) -> Option<Token> {
    Some(Token {
        instance: r.uint("token").ok()?,
        seq: r.uint("token").ok()?,
    })
}

/// Encodes an answer: the new token and what changed before it.
pub fn encode_answer(token: Token, answer: &Answer) -> Vec<u8> {
    let mut w = Writer::default();
    w.raw(PROTOCOL);
    match answer {
        Answer::Paths(paths) => {
            w.u8(0).uint(token.instance).uint(token.seq);
            w.uint(paths.len() as u64);
            for p in paths {
                w.bytes(p);
            }
        }
        Answer::All(why) => {
            w.u8(1)
                .uint(token.instance)
                .uint(token.seq)
                .bytes(why.as_bytes());
        }
    }
    w.finish()
}

/// Decodes an answer; `None` if it is damaged or not one.
pub fn decode_answer(b: &[u8]) -> Option<(Token, Answer)> {
    let mut r = Reader::new(b);
    if r.raw("answer", PROTOCOL.len()).ok()? != PROTOCOL {
        return None;
    }
    let kind = r.u8("answer").ok()?;
    let t = token(&mut r)?;
    let answer = match kind {
        0 => {
            let n = r.count("answer").ok()?;
            let mut paths = Vec::with_capacity(n);
            for _ in 0..n {
                paths.push(BString::from(r.bytes("answer").ok()?));
            }
            Answer::Paths(paths)
        }
        1 => Answer::All(String::from_utf8_lossy(r.bytes("answer").ok()?).into_owned()),
        _ => return None,
    };
    r.finish("answer").ok()?;
    Some((t, answer))
}

/// Calls `f` with a path of the socket in `dot_dir` that fits a socket address (108
/// bytes): the path itself, or, for a deep folder, the path through `/proc/self/fd` of
/// the folder opened for the call.
pub fn with_socket_path<T>(
    dot_dir: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::unix::ffi::OsStrExt;
    let direct = dot_dir.join(SOCKET);
    if direct.as_os_str().as_bytes().len() < 100 {
        return f(&direct);
    }
    let dir = std::fs::File::open(dot_dir)?;
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&dir).to_string())
        .join(SOCKET);
    let out = f(&short);
    drop(dir);
    out
}

/// Asks the watcher of the repository whose `.lifeos` is `dot_dir` what changed since
/// `since`. `None` when no watcher answers (none runs, or it failed): the caller scans.
pub fn ask(dot_dir: &Path, since: Option<Token>) -> Option<(Token, Answer)> {
    let mut s = with_socket_path(dot_dir, |p| UnixStream::connect(p)).ok()?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    s.set_write_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    s.write_all(&encode_request(since)).ok()?;
    s.shutdown(std::net::Shutdown::Write).ok()?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).ok()?;
    decode_answer(&answer)
}

/// The side file: the token a stat cache goes with, and what the cache's folder held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideFile {
    /// The token given before the scan that the cache records.
    pub token: Token,
    /// The tree the cache names.
    pub tree: Id,
    /// The stat cache file's checksum (its last 16 bytes): the exact cache this goes with.
    pub cache_sum: [u8; 16],
    /// Files and symlinks in the folder.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// What that scan skipped by design (FIFOs, sockets), to list again.
    pub skipped: Vec<Skipped>,
}

impl SideFile {
    /// Encodes it (FORMAT 9.8).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.raw(SIDE_MAGIC).u8(SIDE_VERSION);
        w.uint(self.token.instance).uint(self.token.seq);
        w.id(&self.tree).raw(&self.cache_sum);
        w.uint(self.files).uint(self.bytes);
        w.uint(self.skipped.len() as u64);
        for s in &self.skipped {
            w.bytes(&s.path).bytes(s.reason.as_bytes());
        }
        let sum = blake3::hash(w.as_slice());
        w.raw(&sum.as_bytes()[..16]);
        w.finish()
    }

    /// Decodes it; `None` if it is damaged or of an unknown version.
    pub fn decode(b: &[u8]) -> Option<SideFile> {
        let (body, sum) = b.split_at(b.len().checked_sub(16)?);
        if &blake3::hash(body).as_bytes()[..16] != sum {
            return None;
        }
        let mut r = Reader::new(body);
        if r.raw("side file", 8).ok()? != SIDE_MAGIC || r.u8("side file").ok()? != SIDE_VERSION {
            return None;
        }
        let token = token(&mut r)?;
        let tree = r.id("side file").ok()?;
        let cache_sum = r.raw("side file", 16).ok()?.try_into().ok()?;
        let files = r.uint("side file").ok()?;
        let bytes = r.uint("side file").ok()?;
        let n = r.count("side file").ok()?;
        let mut skipped = Vec::with_capacity(n);
        for _ in 0..n {
            let path = BString::from(r.bytes("side file").ok()?);
            let reason = r.str("side file").ok()?.to_owned();
            skipped.push(Skipped { path, reason });
        }
        r.finish("side file").ok()?;
        Some(SideFile {
            token,
            tree,
            cache_sum,
            files,
            bytes,
            skipped,
        })
    }
}

/// The paths a scan must look at for `paths` reported changed: sorted, none below another
/// (a folder covers what is below it), and an ignore file standing for its folder (its
/// rules decide what is recorded below it).
pub fn scan_targets(mut paths: Vec<BString>) -> Vec<BString> {
    for p in &mut paths {
        let name_at = p.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1);
        let name = &p[name_at..];
        if name == b".gitignore" || name == crate::working_copy::walk::LIFEOS_IGNORE.as_bytes() {
            p.truncate(name_at.saturating_sub(1));
        }
    }
    paths.sort();
    paths.dedup();
    let mut out: Vec<BString> = Vec::with_capacity(paths.len());
    for p in paths {
        // Sorted: a folder comes before what is below it, though not always right before
        // (`a-b` sorts between `a` and `a/x`), so every kept folder above is looked for.
        if !in_targets(&out, &p) {
            out.push(p);
        }
    }
    out
}

/// Whether `path` is one of `targets` (as [`scan_targets`] makes them), below one, or a
/// folder on the way to one: what a scan limited to them walks.
pub fn on_the_way(targets: &[BString], path: &[u8]) -> bool {
    if path.is_empty() || in_targets(targets, path) {
        return true;
    }
    // A folder above a target: the targets below `path/` follow it in order.
    let mut below = path.to_vec();
    below.push(b'/');
    let i = targets.partition_point(|t| t.as_slice() < below.as_slice());
    targets.get(i).is_some_and(|t| t.starts_with(&below))
}

/// Whether `path` is one of `targets` or below one (what a limited scan reports on).
pub fn in_targets(targets: &[BString], path: &[u8]) -> bool {
    let has = |p: &[u8]| targets.binary_search_by(|t| t.as_slice().cmp(p)).is_ok();
    has(b"")
        || has(path)
        || path
            .iter()
            .enumerate()
            .any(|(i, b)| *b == b'/' && has(&path[..i]))
}

/// What the monitor says about the folder before a snapshot or a status looks at it.
pub(crate) enum Watched {
    /// No watcher answered: scan everything and save no token.
    No,
    /// Scan everything; the token goes with what that scan finds.
    All(Token),
    /// Only `targets` can differ from the stat cache, which names the base tree.
    Paths {
        /// The new token.
        token: Token,
        /// What to look at ([`scan_targets`]).
        targets: Vec<BString>,
        /// The side file that ties the old token to the cache.
        side: SideFile,
    },
}

impl Repo {
    /// Asks the folder's watcher what changed since the token saved with the stat cache,
    /// when that cache names `base`.
    pub(crate) fn watched(&self, base: Option<&Id>) -> Watched {
        let side = std::fs::read(self.dot_dir().join(SIDE_FILE))
            .ok()
            .and_then(|b| SideFile::decode(&b))
            .filter(|s| Some(&s.tree) == base && self.cache_sum() == Some(s.cache_sum));
        let Some((token, answer)) = ask(self.dot_dir(), side.as_ref().map(|s| s.token)) else {
            return Watched::No;
        };
        match (answer, side) {
            (Answer::Paths(paths), Some(side)) if side.token.instance == token.instance => {
                Watched::Paths {
                    token,
                    targets: scan_targets(paths),
                    side,
                }
            }
            _ => Watched::All(token),
        }
    }

    /// The checksum at the end of the stat cache file (which names it), read without
    /// reading the rest.
    pub(crate) fn cache_sum(&self) -> Option<[u8; 16]> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(self.state_path()).ok()?;
        let len = f.metadata().ok()?.len();
        let mut sum = [0; 16];
        f.read_exact_at(&mut sum, len.checked_sub(16)?).ok()?;
        Some(sum)
    }

    /// Saves the side file. It is only ever a shortcut: when it cannot be written, or is
    /// lost in a crash (it is not synced), the next command scans the whole folder.
    pub(crate) fn save_side_file(&self, side: &SideFile) {
        let path = self.dot_dir().join(SIDE_FILE);
        let tmp = self.dot_dir().join(format!(".{SIDE_FILE}.tmp"));
        if std::fs::write(&tmp, side.encode()).is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Removes the side file; true if none is left.
    pub(crate) fn remove_side_file(&self) -> bool {
        match std::fs::remove_file(self.dot_dir().join(SIDE_FILE)) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// The files of tree `base` at or below `targets`, in path order; `None` if one is a
    /// submodule (what is inside it is not this tree's: the whole snapshot handles it).
    pub(crate) fn tree_within(
        &self,
        base: &Id,
        targets: &[BString],
    ) -> Result<Option<Vec<(BString, TreeEntry)>>> {
        let mut out = Vec::new();
        for t in targets {
            out.extend(self.entries_under(base, t)?);
        }
        if out.iter().any(|(_, e)| e.kind == EntryKind::Gitlink) {
            return Ok(None);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Some(out))
    }

    /// The snapshot when the watcher says only `targets` changed since the side file's
    /// token: `base` (the tree the side file names) edited at what a scan limited to them
    /// finds. Every file found there is read (the stat cache is neither read nor written:
    /// at a million files that is most of a commit's time), and what `base` has there
    /// that is not found is gone. `None` when that is not enough (something could not be
    /// read, a file has another hard link, a submodule is there): the caller scans the
    /// whole folder.
    pub(crate) fn snapshot_watched(
        &self,
        tx: &mut Transaction<'_>,
        base: &Id,
        (token, targets, side): (Token, &[BString], &SideFile),
        started_ns: i128,
        progress: &dyn SnapshotProgress,
    ) -> Result<Option<Snapshot>> {
        if targets.is_empty() {
            progress.scanned(side.files, side.bytes, 0, 0);
            return Ok(Some(Snapshot {
                tree: *base,
                files: side.files,
                bytes: side.bytes,
                files_read: 0,
                bytes_read: 0,
                skipped: side.skipped.clone(),
                unreadable: Vec::new(),
                state: None,
                state_changed: false,
                read: Vec::new(),
                monitor: Some(token),
                shared_inodes: false,
            }));
        }
        let Some(there) = self.tree_within(base, targets)? else {
            return Ok(None);
        };
        let scanned = scan_within(self.workdir(), targets)?;
        let scope = PartialScan {
            entries: there
                .iter()
                .map(|(p, e)| (p.clone(), CacheEntry::never_trusted(e)))
                .collect(),
            files: side.files,
            bytes: side.bytes,
        };
        let old = StatCache::default();
        let since = std::collections::BTreeMap::new();
        match self.snapshot_edits(
            tx,
            base,
            old,
            &since,
            scanned,
            Some(scope),
            started_ns,
            progress,
        )? {
            // A file with another name can change through it unseen: look at everything.
            Ok(snapshot) if snapshot.shared_inodes => Ok(None),
            Ok(mut snapshot) => {
                snapshot.skipped = skipped_outside(side, targets, snapshot.skipped);
                snapshot.monitor = Some(token);
                // What was read again unchanged (a mode or time touched) is not new.
                snapshot.read.retain(|(p, id, _)| {
                    there
                        .binary_search_by(|(q, _)| q.cmp(p))
                        .map_or(true, |i| there[i].1.id != *id)
                });
                Ok(Some(snapshot))
            }
            Err(_) => Ok(None),
        }
    }
}

/// What the side file lists as skipped outside `targets`, with what a scan limited to
/// them skipped, in path order.
pub(crate) fn skipped_outside(
    side: &SideFile,
    targets: &[BString],
    mut scanned: Vec<Skipped>,
) -> Vec<Skipped> {
    scanned.extend(
        side.skipped
            .iter()
            .filter(|s| !in_targets(targets, &s.path))
            .cloned(),
    );
    scanned.sort_by(|a, b| a.path.cmp(&b.path));
    scanned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> BString {
        BString::from(s.as_bytes())
    }

    #[test]
    fn requests_and_answers_round_trip() {
        let t = Token {
            instance: 7,
            seq: 1 << 40,
        };
        assert_eq!(decode_request(&encode_request(Some(t))), Some(Some(t)));
        assert_eq!(decode_request(&encode_request(None)), Some(None));
        assert_eq!(decode_request(b"LIFEOSMON1"), None);
        assert_eq!(decode_request(b"LIFEOSMON1\x02"), None);
        let paths = Answer::Paths(vec![b("a/b"), BString::from(&b"\xff\xfe"[..]), b("")]);
        for a in [paths, Answer::All("overflow".into())] {
            let enc = encode_answer(t, &a);
            assert_eq!(decode_answer(&enc), Some((t, a.clone())));
            for cut in 0..enc.len() {
                assert_eq!(decode_answer(&enc[..cut]), None, "cut at {cut}");
            }
            let mut longer = enc.clone();
            longer.push(0);
            assert_eq!(decode_answer(&longer), None);
        }
    }

    #[test]
    fn the_side_file_round_trips_and_refuses_damage() {
        let s = SideFile {
            token: Token {
                instance: 1,
                seq: 2,
            },
            tree: Id([3; 32]),
            cache_sum: [4; 16],
            files: 5,
            bytes: 6,
            skipped: vec![Skipped {
                path: BString::from(&b"fifo\xff"[..]),
                reason: "not a regular file".into(),
            }],
        };
        let enc = s.encode();
        assert_eq!(SideFile::decode(&enc), Some(s));
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 1;
            assert_eq!(SideFile::decode(&bad), None, "byte {i} flipped");
        }
        assert_eq!(SideFile::decode(&enc[..enc.len() - 1]), None);
    }

    #[test]
    fn targets_cover_what_is_below_them_and_ignore_files_their_folder() {
        let t = scan_targets(vec![
            b("a/x"),
            b("a-b"),
            b("a"),
            b("c/d/.gitignore"),
            b("c/d/e"),
            b("a/y/z"),
            b("f"),
        ]);
        assert_eq!(t, vec![b("a"), b("a-b"), b("c/d"), b("f")]);
        assert_eq!(scan_targets(vec![b("x"), b(".lifeosignore")]), vec![b("")]);
        assert!(on_the_way(&t, b"c"));
        assert!(on_the_way(&t, b"c/d/e/f"));
        assert!(on_the_way(&t, b"a/q"));
        assert!(!on_the_way(&t, b"c/e"));
        assert!(!on_the_way(&t, b"b"));
        assert!(!on_the_way(&t, b"a.txt"));
        assert!(in_targets(&t, b"a/q"));
        assert!(!in_targets(&t, b"c"));
        assert!(in_targets(&[b("")], b"anything"));
    }
}
