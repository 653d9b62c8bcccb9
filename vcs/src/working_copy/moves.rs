//! Changing the working folder safely.
//!
//! Three rules keep a person's files safe while lifeos rewrites the folder:
//!
//! - **One writer at a time.** Every command that reads the folder to record it, or
//!   writes it, holds the working-copy lock ([`WorkingCopyLock`]) for its whole run, so a
//!   commit never snapshots a half-moved folder and the stat cache is never overwritten by
//!   a writer that saw an older folder.
//! - **Check, then publish, then move.** Everything that could stop a move (an ignored or
//!   unreadable file in the way, a symlink where a folder must be) is checked first; then
//!   the operation that explains the change is published; only then does the folder
//!   change. Content about to be replaced is saved by that same operation.
//! - **An interrupted move is finished, never guessed.** Before the operation is
//!   published, a journal (`.lifeos/wc_move`) names it and the two trees. A move stopped
//!   by Ctrl-C, a kill or a full disk leaves the journal; the next command that takes the
//!   lock finishes the move, touching only files that still hold one of the two recorded
//!   versions.

use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use lifeos_store::codec::{Reader, Writer};
use lifeos_store::{Id, Transaction};

use crate::error::{IoContext, Result, VcsError};
use crate::object::{EntryKind, Event, View};
use crate::path::{display, in_folder, is_under, BString};
use crate::repo::Repo;
use crate::treediff::Change;
use crate::working_copy::restore::FileJob;
use crate::working_copy::{CacheEntry, Skipped, WcState};

/// The working-copy lock file, inside `.lifeos`.
pub const WC_LOCK_FILE: &str = "working_copy.lock";
/// The folder move journal, inside `.lifeos`.
pub const MOVE_FILE: &str = "wc_move";
const MOVE_MAGIC: &[u8; 8] = b"LIFEOSMV";
const MOVE_VERSION: u8 = 1;

/// Exclusive use of the working folder, held for a command's whole run. Taking it
/// finishes a folder move that an earlier command left unfinished.
pub struct WorkingCopyLock {
    _file: File,
    finished: Option<MoveReport>,
}

impl WorkingCopyLock {
    /// The unfinished move that was finished when the lock was taken, if any.
    pub fn finished_move(&self) -> Option<&MoveReport> {
        self.finished.as_ref()
    }
}

/// A folder move that was interrupted and finished later.
#[derive(Debug, Clone)]
pub struct MoveReport {
    /// The operation the folder was being moved for.
    pub op: Id,
    /// Files written or removed to finish it.
    pub applied: u64,
    /// Paths changed by someone since the move stopped: left as they are (the next
    /// `status` shows them as changes).
    pub kept: Vec<BString>,
}

/// What the journal records: the operation and the two trees of the move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveJournal {
    /// The operation that explains the move.
    pub op: Id,
    /// The tree the folder was at.
    pub from: Option<Id>,
    /// The tree the folder is moving to.
    pub to: Option<Id>,
}

fn write_opt(w: &mut Writer, id: &Option<Id>) {
    match id {
        Some(id) => w.u8(1).id(id),
        None => w.u8(0),
    };
}

fn read_opt(r: &mut Reader<'_>) -> Option<Option<Id>> {
    match r.u8("move").ok()? {
        0 => Some(None),
        1 => Some(Some(r.id("move").ok()?)),
        _ => None,
    }
}

impl MoveJournal {
    /// Encodes the journal (see `docs/FORMAT.md`).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.raw(MOVE_MAGIC).u8(MOVE_VERSION).id(&self.op);
        write_opt(&mut w, &self.from);
        write_opt(&mut w, &self.to);
        let sum = blake3::hash(w.as_slice());
        w.raw(&sum.as_bytes()[..16]);
        w.finish()
    }

    /// Decodes a journal; `None` if it is damaged or of an unknown version.
    pub fn decode(bytes: &[u8]) -> Option<MoveJournal> {
        let body_len = bytes.len().checked_sub(16)?;
        let (body, sum) = bytes.split_at(body_len);
        if &blake3::hash(body).as_bytes()[..16] != sum {
            return None;
        }
        let mut r = Reader::new(body);
        if r.raw("move", 8).ok()? != MOVE_MAGIC || r.u8("move").ok()? != MOVE_VERSION {
            return None;
        }
        let op = r.id("move").ok()?;
        let from = read_opt(&mut r)?;
        let to = read_opt(&mut r)?;
        r.finish("move").ok()?;
        Some(MoveJournal { op, from, to })
    }
}

/// A checked change of the folder from one tree to another, ready to publish.
#[derive(Debug)]
pub struct FolderMove {
    from: Option<Id>,
    to: Option<Id>,
    changes: Vec<Change>,
    /// The stat cache describing the folder at `from`, when the caller just made one.
    state: Option<WcState>,
}

impl FolderMove {
    /// Starts from a fresh stat cache (made by a snapshot of the folder at `from`; `None`
    /// when that snapshot left the saved one standing).
    pub(crate) fn with_state(mut self, state: Option<WcState>) -> Self {
        self.state = state;
        self
    }
}

impl Repo {
    /// Takes the working-copy lock (waiting for another command to release it), then
    /// finishes a folder move an earlier command left unfinished.
    pub fn lock_working_copy(&self) -> Result<WorkingCopyLock> {
        let path = self.dot_dir().join(WC_LOCK_FILE);
        let file = lifeos_store::fsutil::open_lock_file(&path)?;
        file.lock().io("locking", &path)?;
        // The index was loaded when the repository was opened, maybe before the command
        // that held the lock published anything: what it wrote must be seen now.
        self.store().reload_index()?;
        let finished = self.finish_interrupted_move()?;
        Ok(WorkingCopyLock {
            _file: file,
            finished,
        })
    }

    fn journal_path(&self) -> std::path::PathBuf {
        self.dot_dir().join(MOVE_FILE)
    }

    fn remove_journal(&self) -> Result<()> {
        let path = self.journal_path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(lifeos_store::fsutil::sync_dir(self.dot_dir())?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).io("removing", &path),
        }
    }

    /// Whether operation `op` is in the operation log (reachable from a head).
    fn op_is_published(&self, op: &Id) -> Result<bool> {
        if !self.store().contains(op)? {
            return Ok(false);
        }
        let mut stack = self.op_heads()?;
        let mut seen = std::collections::HashSet::new();
        while let Some(o) = stack.pop() {
            if o == *op {
                return Ok(true);
            }
            if seen.insert(o) {
                stack.extend(self.operation(&o)?.parents);
            }
        }
        Ok(false)
    }

    /// Finishes the folder move named by the journal, if there is one: each path the
    /// move changes is brought to its new version if it still holds its old one (or
    /// already the new one); a path someone changed since is left alone and reported.
    fn finish_interrupted_move(&self) -> Result<Option<MoveReport>> {
        let path = self.journal_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).io("reading", &path),
        };
        let Some(journal) = MoveJournal::decode(&bytes) else {
            return Err(VcsError::Inconsistent(format!(
                "{} is damaged; a change of the working folder was interrupted. Remove the \
                 file, then compare the folder with its last commit (`lifeos status`) and \
                 bring back what you need with `lifeos restore`",
                path.display()
            )));
        };
        if !self.op_is_published(&journal.op)? {
            // Stopped before its operation was published: the folder was never touched.
            self.remove_journal()?;
            return Ok(None);
        }
        let mut todo_all = self.diff_trees(journal.from.as_ref(), journal.to.as_ref())?;
        // What the move left alone, it finishes alone (and does not report).
        todo_all.retain(|c| !crate::path::in_repository_dir(&c.path));
        let mut todo = Vec::new();
        let mut kept = Vec::new();
        for c in todo_all.iter().cloned() {
            let now = current_version(self.workdir(), &c.path);
            let version = |e: &Option<crate::object::TreeEntry>| match e {
                Some(e) => OnDisk::Version(e.kind, e.id),
                None => OnDisk::Absent,
            };
            if now == version(&c.new) {
                continue;
            }
            if now == version(&c.old) {
                todo.push(c);
            } else {
                // Changed since, unreadable, or not a file: never touched here.
                kept.push(c.path);
            }
        }
        let _deferred = self.interrupt.defer();
        // A writer killed mid-file leaves its temporary file beside the destination.
        let mut dirs: Vec<&[u8]> = changes_dirs(&todo_all);
        dirs.dedup();
        for dir in dirs {
            remove_stale_temporaries(&in_folder(self.workdir(), dir));
        }
        let applied = todo.len() as u64;
        self.apply_changes(&todo, None)?;
        self.remove_journal()?;
        Ok(Some(MoveReport {
            op: journal.op,
            applied,
            kept,
        }))
    }

    /// Plans the change of the folder from tree `from` to tree `to` and checks, before
    /// anything is published, that it can be made without losing anything: no path it
    /// writes or removes is unreadable (its content was never recorded), no file it
    /// writes would replace an untracked or ignored file, and no folder it needs is a
    /// file or symlink that stays.
    ///
    /// An entry lifeos never writes ([`crate::guard`]) stops it too, with an error naming
    /// the path and `origin` (what `to` comes from: `commit 3f9c2a1b2c3d`).
    pub(crate) fn plan_move(
        &self,
        tx: &Transaction<'_>,
        from: Option<&Id>,
        to: Option<&Id>,
        unreadable: &[Skipped],
        origin: &str,
    ) -> Result<FolderMove> {
        let mut changes = self.diff_trees_tx(tx, from, to)?;
        let outside_ok = self.outside_symlinks_allowed();
        for c in &changes {
            if let Some(e) = &c.new {
                if let Some(why) = self.refusal(&c.path, e, outside_ok)? {
                    return Err(VcsError::RefusedEntry {
                        path: display(&c.path).into_owned(),
                        origin: origin.to_string(),
                        why,
                    });
                }
            }
        }
        // Nothing there was written by a move, so nothing there is removed by one.
        changes.retain(|c| !crate::path::in_repository_dir(&c.path));
        let root = self.workdir();
        let removed: std::collections::HashSet<&[u8]> = changes
            .iter()
            .filter(|c| {
                c.new.is_none() || c.old.as_ref().map(|e| e.kind) != c.new.as_ref().map(|e| e.kind)
            })
            .map(|c| c.path.as_slice())
            .collect();
        for c in &changes {
            if let Some(u) = unreadable
                .iter()
                .find(|u| is_under(&c.path, &u.path) || is_under(&u.path, &c.path))
            {
                return Err(VcsError::InTheWay {
                    path: display(&c.path).into_owned(),
                    reason: format!(
                        "would be replaced, but {} cannot be read ({}), so lifeos cannot save it first; make it readable or move it away, then try again",
                        if u.path.is_empty() { "part of the folder".into() } else { display(&u.path).into_owned() },
                        u.reason
                    ),
                });
            }
            if c.new.is_none() {
                continue;
            }
            // Every folder on the way must be a real folder, or absent, or a recorded
            // file this move removes.
            let comps: Vec<&[u8]> = c.path.split(|b| *b == b'/').collect();
            for n in 1..comps.len() {
                let dir = comps[..n].join(&b'/');
                match in_folder(root, &dir).symlink_metadata() {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) if removed.contains(dir.as_slice()) => {}
                    Ok(_) => {
                        return Err(VcsError::InTheWay {
                            path: display(&c.path).into_owned(),
                            reason: format!(
                                "needs the folder {}, where there is a file or symlink lifeos has not recorded; move it away and try again",
                                display(&dir)
                            ),
                        })
                    }
                    Err(_) => {}
                }
            }
            if c.old.is_some() {
                continue;
            }
            // A new path: whatever is there was not recorded in `from`.
            let dest = in_folder(root, &c.path);
            match dest.symlink_metadata() {
                Err(_) => {}
                Ok(m) if m.is_dir() => {
                    if let Some(stray) = untracked_below(&dest, root, &removed)? {
                        return Err(VcsError::InTheWay {
                            path: display(&c.path).into_owned(),
                            reason: format!(
                                "is a folder holding {}, which lifeos has not recorded (it may be ignored); move it away and try again",
                                display(&stray)
                            ),
                        });
                    }
                }
                Ok(_) => {
                    return Err(VcsError::InTheWay {
                        path: display(&c.path).into_owned(),
                        reason: "exists but is not recorded (it may be ignored), and would be overwritten; move it away and try again".into(),
                    })
                }
            }
        }
        Ok(FolderMove {
            from: from.copied(),
            to: to.copied(),
            changes,
            state: None,
        })
    }

    /// Publishes the operation, then moves the folder as planned. A journal naming the
    /// operation is written before it is published and removed once the folder matches,
    /// so a move stopped anywhere is finished by the next command.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish_and_move(
        &self,
        wc: &WorkingCopyLock,
        mut tx: Transaction<'_>,
        parents: &[Id],
        view: View,
        description: &str,
        events: Vec<Event>,
        start_ms: i64,
        mv: FolderMove,
    ) -> Result<Id> {
        let times = crate::repo::op_times(start_ms);
        let op = self.operation_record(parents, &mut tx, view, description, events, times)?;
        self.publish_op_and_move(wc, tx, op, parents, mv)
    }

    /// Like [`Repo::publish_and_move`], for an operation already made: it replaces the
    /// heads `replaces`.
    pub(crate) fn publish_op_and_move(
        &self,
        _wc: &WorkingCopyLock,
        tx: Transaction<'_>,
        op: crate::object::Operation,
        replaces: &[Id],
        mv: FolderMove,
    ) -> Result<Id> {
        let _deferred = self.interrupt.defer();
        let journal_path = self.journal_path();
        let published = self.publish_operation(tx, op, replaces, |op| {
            let journal = MoveJournal {
                op: *op,
                from: mv.from,
                to: mv.to,
            };
            lifeos_store::fsutil::write_atomic(&journal_path, &journal.encode())?;
            Ok(())
        });
        // On an error the operation may or may not have become a head (a failure can come
        // after the head file exists); the journal stays either way, and the next command
        // that takes the lock finishes the move or drops the journal accordingly.
        let op = published?;
        let unfinished = |e: VcsError| VcsError::MoveUnfinished {
            op: op.short(12),
            source: Box::new(e),
        };
        self.apply_changes(&mv.changes, mv.state)
            .map_err(unfinished)?;
        self.remove_journal().map_err(unfinished)?;
        Ok(op)
    }

    /// Applies file-level changes to the folder and updates the stat cache (`state`, or
    /// the saved one). Stops between files when interrupted.
    pub(crate) fn apply_changes(&self, changes: &[Change], state: Option<WcState>) -> Result<()> {
        let started_ns = jiff::Timestamp::now().as_nanosecond();
        let mut state = state.unwrap_or_else(|| self.load_wc_state());
        // Its entries change below: they no longer describe the tree a snapshot made of
        // them (the next commit names the tree again).
        state.tree = None;
        let root = self.workdir();
        // The repository's own folder is never touched, whatever a tree holds (a journal
        // left by a move finishes with the trees' whole difference).
        let changes: Vec<&Change> = changes
            .iter()
            .filter(|c| !crate::path::in_repository_dir(&c.path))
            .collect();
        // Deletions first (so a file can become a directory), deepest first.
        for c in changes.iter().rev().filter(|c| c.new.is_none()) {
            self.interrupt.check()?;
            let p = in_folder(root, &c.path);
            if !through_real_folders(root, &c.path) {
                return Err(VcsError::UnsafePath {
                    path: display(&c.path).into_owned(),
                    reason: "a folder on its way is now a symlink or a file; lifeos never \
                             removes anything through a link"
                        .into(),
                });
            }
            match std::fs::symlink_metadata(&p) {
                Ok(m) if !m.is_dir() => std::fs::remove_file(&p).io("removing", &p)?,
                // A submodule's folder goes when it is empty, as with git.
                Ok(_) if c.old.as_ref().is_some_and(|e| e.kind == EntryKind::Gitlink) => {
                    let _ = std::fs::remove_dir(&p);
                }
                _ => {}
            }
            state.entries.remove(c.path.as_slice());
            let mut dir = p.parent().map(Path::to_path_buf);
            while let Some(d) = dir {
                if d == root || std::fs::remove_dir(&d).is_err() {
                    break;
                }
                dir = d.parent().map(Path::to_path_buf);
            }
        }
        let mut jobs = Vec::new();
        for c in &changes {
            let Some(e) = &c.new else { continue };
            self.interrupt.check()?;
            let dest = in_folder(root, &c.path);
            // Create parents one by one, refusing to go through anything but real dirs.
            let mut cur = root.to_path_buf();
            let comps: Vec<&[u8]> = c.path.split(|b| *b == b'/').collect();
            for comp in &comps[..comps.len() - 1] {
                cur.push(std::ffi::OsStr::from_bytes(comp));
                match std::fs::symlink_metadata(&cur) {
                    Ok(m) if m.is_dir() => {}
                    Ok(m) if m.file_type().is_symlink() || m.is_file() => {
                        return Err(VcsError::Obstructed {
                            path: display(&c.path).into_owned(),
                            what: format!("{} (not a folder)", cur.display()),
                        })
                    }
                    _ => std::fs::create_dir(&cur).io("creating", &cur)?,
                }
            }
            let is_dir = std::fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir());
            if e.kind == EntryKind::Gitlink {
                // A submodule is a folder of its own (empty until it is checked out).
                if !is_dir {
                    if std::fs::symlink_metadata(&dest).is_ok() {
                        std::fs::remove_file(&dest).io("removing", &dest)?;
                    }
                    std::fs::create_dir(&dest).io("creating", &dest)?;
                }
                state.entries.remove(c.path.as_slice());
                continue;
            }
            if is_dir {
                // Checked before publishing: only empty folders are left in it.
                remove_empty_folders(&dest)?;
            }
            jobs.push(FileJob {
                repo_path: c.path.clone(),
                dest,
                id: e.id,
                kind: e.kind,
                size: e.size,
            });
        }
        self.fetch_for(&jobs)?;
        let results = crate::working_copy::restore::by_folder_in_turn(&jobs, |job| {
            self.interrupt.check()?;
            self.write_file(job)
        });
        let mut first_err = None;
        for (job, r) in jobs.iter().zip(results) {
            match r {
                Ok(_) => {
                    let meta = std::fs::symlink_metadata(&job.dest)
                        .io("reading metadata of", &job.dest)?;
                    state.entries.insert(
                        job.repo_path.to_vec(),
                        CacheEntry::from_meta(&(&meta).into(), job.kind, job.id),
                    );
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        // What was written must be on disk before the journal that could repair it goes.
        if !changes.is_empty() {
            sync_file_system(root)?;
        }
        // Entries written now are racy relative to this moment; keep the older bound for
        // the rest so they stay trusted.
        state.recorded_at_ns = state.recorded_at_ns.min(started_ns);
        self.save_wc_state(&state)
    }
}

/// The folders holding the changed paths, sorted (the root is the empty path).
fn changes_dirs(changes: &[Change]) -> Vec<&[u8]> {
    let mut dirs: Vec<&[u8]> = changes
        .iter()
        .map(|c| match c.path.iter().rposition(|b| *b == b'/') {
            Some(i) => &c.path[..i],
            None => &c.path[..0],
        })
        .collect();
    dirs.sort_unstable();
    dirs
}

/// Removes folder `dir` and the folders below it, which must hold no files.
fn remove_empty_folders(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).io("listing", dir)? {
        let e = e.io("listing", dir)?;
        if e.file_type().io("reading", e.path())?.is_dir() {
            remove_empty_folders(&e.path())?;
        }
    }
    std::fs::remove_dir(dir).io("removing (a folder is in the way)", dir)
}

/// Removes the temporary files (`.lifeos-tmp-*`) a killed writer left in `dir`.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().as_bytes().starts_with(b".lifeos-tmp-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What the folder holds at a path.
#[derive(Debug, PartialEq, Eq)]
enum OnDisk {
    /// Nothing.
    Absent,
    /// A file, executable or symlink with this content.
    Version(EntryKind, Id),
    /// Something else: a folder, an unreadable file, a special file, or a path reached
    /// through a symlink.
    Other,
}

/// What the folder holds at `path` now (files hashed).
fn current_version(root: &Path, path: &[u8]) -> OnDisk {
    if !through_real_folders(root, path) {
        return OnDisk::Other;
    }
    let full = in_folder(root, path);
    let m = match full.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return OnDisk::Absent,
        Err(_) => return OnDisk::Other,
    };
    if m.file_type().is_symlink() {
        return match std::fs::read_link(&full) {
            Ok(t) => OnDisk::Version(EntryKind::Symlink, Id::hash(t.as_os_str().as_bytes())),
            Err(_) => OnDisk::Other,
        };
    }
    if !m.is_file() {
        return OnDisk::Other;
    }
    let mut h = blake3::Hasher::new();
    let hashed = File::open(&full)
        .and_then(|f| std::io::copy(&mut std::io::BufReader::with_capacity(1 << 20, f), &mut h));
    if hashed.is_err() {
        return OnDisk::Other;
    }
    let kind = if m.mode() & 0o111 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    OnDisk::Version(kind, h.finalize().into())
}

/// Whether every folder above `path` (below `root`) is a real folder or absent, not a
/// symlink or a file.
pub(crate) fn through_real_folders(root: &Path, path: &[u8]) -> bool {
    let comps: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    let mut cur = root.to_path_buf();
    for c in &comps[..comps.len().saturating_sub(1)] {
        cur.push(std::ffi::OsStr::from_bytes(c));
        match cur.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => return true,
        }
    }
    true
}

/// Flushes the file system holding `dir` (one `syncfs`, instead of an fsync per file).
fn sync_file_system(dir: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let d = File::open(dir).io("opening", dir)?;
    // SAFETY: `d` is an open file descriptor for the duration of the call; syncfs only
    // reads it.
    if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error()).io("syncing the file system of", dir);
    }
    Ok(())
}

/// The first file below folder `dir` that is not among `removed` (repository paths of
/// recorded files the move deletes), if any.
fn untracked_below(
    dir: &Path,
    root: &Path,
    removed: &std::collections::HashSet<&[u8]>,
) -> Result<Option<BString>> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).io("listing", &d)? {
            let e = e.io("listing", &d)?;
            let p = e.path();
            let rel = BString::from(
                p.strip_prefix(root)
                    .map(|r| r.as_os_str().as_bytes())
                    .unwrap_or_default(),
            );
            match e.file_type().io("reading", &p)? {
                t if t.is_dir() => stack.push(p),
                _ if removed.contains(rel.as_slice()) => {}
                _ => return Ok(Some(rel)),
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree can hold paths in `.lifeos` or `.git` folders (git or another device wrote
    /// them): a move to it is refused before anything is published, a move away from it
    /// leaves them alone, and applying a removal there (a journal being finished) skips it.
    #[test]
    fn a_move_never_touches_repository_folders() {
        use crate::object::{EntryKind, TreeEntry};
        use crate::treediff::{Change, ChangeKind};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let entry = |tx: &mut lifeos_store::Transaction<'_>, bytes: &[u8]| TreeEntry {
            name: Vec::new(),
            kind: EntryKind::File,
            id: tx.store_bytes(bytes).unwrap(),
            size: bytes.len() as u64,
        };
        let plain = entry(&mut tx, b"a");
        let tree = |tx: &mut lifeos_store::Transaction<'_>, extra: &[u8]| {
            let mut edits = vec![(&b"a.txt"[..], Some(plain.clone()))];
            if !extra.is_empty() {
                edits.push((extra, Some(plain.clone())));
            }
            edits.sort_by(|a, b| a.0.cmp(b.0));
            repo.edit_tree(tx, None, edits, b"").unwrap().unwrap().0
        };
        let clean = tree(&mut tx, b"");
        for hostile in [
            &b".lifeos/config"[..],
            b".lifeos/op_heads/0000",
            b".git/hooks/post-checkout",
            b"sub/.git/config",
            b"sub/.lifeos/x",
            b".git",
            b"sub/.git",
            b".GIT/config",
            b"GIT~1/hooks/x",
            b".lifeos. ",
        ] {
            let t = tree(&mut tx, hostile);
            let err = repo
                .plan_move(&tx, Some(&clean), Some(&t), &[], "test")
                .err();
            assert!(
                matches!(&err, Some(VcsError::RefusedEntry { path, origin, .. })
                    if path.as_bytes() == hostile && origin == "test"),
                "{hostile:?}: {err:?}"
            );
            let away = repo
                .plan_move(&tx, Some(&t), Some(&clean), &[], "test")
                .unwrap();
            assert!(away.changes.is_empty(), "{hostile:?}: {:?}", away.changes);
        }
        let config = std::fs::read(root.join(".lifeos/config")).unwrap();
        let removal = Change {
            path: ".lifeos/config".into(),
            kind: ChangeKind::Deleted,
            old: Some(plain.clone()),
            new: None,
        };
        repo.apply_changes(&[removal], None).unwrap();
        assert_eq!(std::fs::read(root.join(".lifeos/config")).unwrap(), config);
    }

    #[test]
    fn journal_round_trips_and_rejects_damage() {
        let j = MoveJournal {
            op: Id::hash(b"op"),
            from: Some(Id::hash(b"a")),
            to: None,
        };
        let b = j.encode();
        assert_eq!(MoveJournal::decode(&b), Some(j));
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert_eq!(MoveJournal::decode(&d), None, "flip at {i}");
        }
        assert_eq!(MoveJournal::decode(&b[..b.len() - 1]), None);
        assert_eq!(MoveJournal::decode(&[]), None);
    }
}
