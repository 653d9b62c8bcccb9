//! The walk of the working folder behind [`crate::working_copy::scan`].
//!
//! Each folder is opened relative to its parent's descriptor (`O_NOFOLLOW`: a folder
//! swapped for a symlink while the walk runs is not followed), listed with `getdents64`
//! into a buffer the thread reuses, and each file in it statted with `fstatat` on that
//! descriptor with the name as the listing gave it: no path is looked up from the root,
//! and nothing is allocated per entry but the path the scan returns. Folders are shared
//! out to one thread per core. Each folder's entries are sorted with a folder's name
//! followed by `/`, so that reading the folders depth first gives every path in bytewise
//! order, with no sort of the whole list. A queued folder holds its parent's descriptor
//! until it is opened; folders are taken last queued first (depth first), so the
//! descriptors held are about one per level of the deepest path being read.
//!
//! `.gitignore` and `.lifeosignore` files are matched with the `ignore` crate's gitignore
//! matcher, with the precedence its walker gives them (`.lifeosignore` over
//! `.gitignore`, a deeper folder's rules over a shallower one's; a `.git` inside the
//! folder does not cut off the rules above it, as the folder is one whole whether or not
//! git also keeps part of it); a test checks the walk against that walker.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::Result;
use crate::path::BString;
use crate::working_copy::{Scan, ScanEntry, Skipped, Stat};

/// The custom ignore file, which takes precedence over `.gitignore`.
pub(crate) const LIFEOS_IGNORE: &str = ".lifeosignore";
/// Bytes asked of each `getdents64` call.
const LISTING_BUFFER: usize = 64 * 1024;
/// Threads at most, whatever the core count.
const MAX_THREADS: usize = 8;

/// The ignore rules of a folder that has an ignore file, and (through `parent`) those of
/// the folders above it that have one.
struct Rules {
    parent: Option<Arc<Rules>>,
    /// `.lifeosignore`.
    custom: Gitignore,
    /// `.gitignore`.
    git: Gitignore,
}

/// Whether the rules ignore `path` (absolute; `is_dir` for a folder, not following a
/// symlink): the first rule that matches, deepest folder first, decides, a
/// `.lifeosignore` rule before any `.gitignore` rule.
fn ignored(rules: &Rules, path: &Path, is_dir: bool) -> bool {
    let (mut custom, mut git) = (ignore::Match::None, ignore::Match::None);
    let mut level = Some(rules);
    while let Some(r) = level {
        if custom.is_none() {
            custom = r.custom.matched(path, is_dir);
        }
        if git.is_none() {
            git = r.git.matched(path, is_dir);
        }
        level = r.parent.as_deref();
    }
    custom.or(git).is_ignore()
}

/// A folder to read.
struct Job {
    /// Its number: where its listing goes.
    id: usize,
    /// Its repository path (empty for the root).
    rel: Vec<u8>,
    /// The folder it is in, open (`None` for the root).
    parent: Option<Arc<OwnedFd>>,
    /// The rules that apply in it.
    rules: Option<Arc<Rules>>,
}

/// One entry of a folder's listing.
struct Item {
    /// Where its name starts in [`Listing::names`].
    at: usize,
    /// The name's length; the byte after it is `/` for a folder and NUL for anything else,
    /// and sorts the items.
    len: usize,
    /// The kind the listing gave (`d_type`), which may be unknown.
    listed_as: u8,
    what: What,
}

enum What {
    /// A file or symlink, with its metadata.
    File(Stat),
    /// A folder: the number of its listing.
    Folder(usize),
}

/// What was found in one folder, sorted.
#[derive(Default)]
struct Listing {
    /// Names, each followed by its terminator.
    names: Vec<u8>,
    items: Vec<Item>,
}

impl Listing {
    fn key(&self, item: &Item) -> &[u8] {
        &self.names[item.at..=item.at + item.len]
    }
}

/// What one thread found.
#[derive(Default)]
struct Found {
    listings: Vec<(usize, Listing)>,
    scan: Scan,
}

struct Queue {
    jobs: Vec<Job>,
    /// Jobs taken and not finished.
    busy: usize,
}

struct Walk<'a> {
    root: &'a Path,
    targets: Option<&'a [BString]>,
    queue: Mutex<Queue>,
    ready: Condvar,
    next_id: AtomicUsize,
}

/// Lists every file and symlink under `root` that is not ignored, in bytewise path order,
/// limited to `targets` and the folders on their way if given (as [`crate::working_copy::fsmonitor::on_the_way`]
/// tells). `.lifeos` and `.git` folders and `.lifeos-tmp-*` names are never included.
pub(crate) fn walk(root: &Path, targets: Option<&[BString]>) -> Scan {
    let walk = Walk {
        root,
        targets,
        queue: Mutex::new(Queue {
            jobs: vec![Job {
                id: 0,
                rel: Vec::new(),
                parent: None,
                rules: None,
            }],
            busy: 0,
        }),
        ready: Condvar::new(),
        next_id: AtomicUsize::new(1),
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    let found: Vec<Found> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| walk.work())).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut listings: Vec<Option<Listing>> = Vec::new();
    listings.resize_with(walk.next_id.into_inner(), || None);
    let mut scan = Scan::default();
    let mut files = 0;
    for mut f in found {
        for (id, listing) in f.listings {
            files += listing
                .items
                .iter()
                .filter(|i| matches!(i.what, What::File(_)))
                .count();
            listings[id] = Some(listing);
        }
        scan.skipped.append(&mut f.scan.skipped);
        scan.unreadable.append(&mut f.scan.unreadable);
    }
    scan.found = in_order(listings, files);
    scan
}

/// The files of every listing, depth first from the root's: each folder's listing is
/// taken (and freed) when it is reached.
fn in_order(mut listings: Vec<Option<Listing>>, files: usize) -> Vec<ScanEntry> {
    let mut out = Vec::with_capacity(files);
    let mut prefix = Vec::new();
    // (listing, next item, the prefix's length before the folder's name was added)
    let mut stack = vec![(listings[0].take().unwrap_or_default(), 0, 0)];
    while let Some((listing, next, before)) = stack.last_mut() {
        let Some(item) = listing.items.get(*next) else {
            prefix.truncate(*before);
            stack.pop();
            continue;
        };
        *next += 1;
        match item.what {
            What::File(meta) => {
                let name = &listing.names[item.at..item.at + item.len];
                let mut path = Vec::with_capacity(prefix.len() + name.len());
                path.extend_from_slice(&prefix);
                path.extend_from_slice(name);
                out.push(ScanEntry { path, meta });
            }
            What::Folder(id) => {
                let before = prefix.len();
                prefix.extend_from_slice(listing.key(item));
                let below = listings[id].take().unwrap_or_default();
                stack.push((below, 0, before));
            }
        }
    }
    debug_assert!(out.windows(2).all(|w| w[0].path < w[1].path));
    out
}

/// Locks `m`, whatever a panicking thread left (the walk's state stays consistent: a
/// panic ends the walk).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Walk<'_> {
    /// One thread: folders are taken until none is left and none is being read.
    fn work(&self) -> Found {
        let mut found = Found::default();
        let mut buf = vec![0u8; LISTING_BUFFER];
        while let Some(job) = self.take() {
            // A panic while reading ends the job all the same: the other threads then
            // finish, and the panic is raised where the walk was called.
            let unfinished = Unfinished(self);
            let (id, listing, below) = self.read(job, &mut buf, &mut found.scan);
            std::mem::forget(unfinished);
            found.listings.push((id, listing));
            self.finish(below);
        }
        found
    }

    fn take(&self) -> Option<Job> {
        let mut q = lock(&self.queue);
        loop {
            if let Some(job) = q.jobs.pop() {
                q.busy += 1;
                return Some(job);
            }
            if q.busy == 0 {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Ends a job, queueing the folders it found.
    fn finish(&self, below: Vec<Job>) {
        let mut q = lock(&self.queue);
        q.busy -= 1;
        let (added, done) = (below.len(), q.busy == 0 && below.is_empty());
        q.jobs.extend(below);
        drop(q);
        if done || added > 1 {
            self.ready.notify_all();
        } else if added == 1 {
            self.ready.notify_one();
        }
    }

    /// `rel` joined to the root, for the ignore matchers.
    fn absolute(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(Path::new(std::ffi::OsStr::from_bytes(rel)))
        }
    }

    /// Reads one folder: its listing, and the folders below it to read.
    fn read(&self, job: Job, buf: &mut [u8], scan: &mut Scan) -> (usize, Listing, Vec<Job>) {
        let Job {
            id,
            mut rel,
            parent,
            rules: above,
        } = job;
        let mut listing = Listing::default();
        let fd = match self.open(parent, &rel) {
            Ok(fd) => Arc::new(fd),
            Err(e) => {
                folder_failed(scan, rel, &e);
                return (id, listing, Vec::new());
            }
        };
        // Every name first: the folder's ignore files apply to the entries listed before
        // them.
        if let Err(e) = list(&fd, buf, &mut listing) {
            // What is in it is unknown, not gone.
            folder_failed(scan, rel, &e);
            return (id, Listing::default(), Vec::new());
        }
        // In name order, each name once: a listing taken while an entry is renamed into
        // place may give its name twice.
        let mut items = std::mem::take(&mut listing.items);
        sorted_once(&listing, &mut items);
        listing.items = items;
        let rules = self.rules(&rel, above, &listing, scan);
        let mut below = Vec::new();
        let dir_len = rel.len();
        let mut items = std::mem::take(&mut listing.items);
        items.retain_mut(|item| {
            let name = &listing.names[item.at..item.at + item.len];
            rel.truncate(dir_len);
            if dir_len > 0 {
                rel.push(b'/');
            }
            rel.extend_from_slice(name);
            if !self.named_in(name, &rel) {
                return false;
            }
            let mut meta = None;
            let mut is_dir = item.listed_as == libc::DT_DIR;
            if item.listed_as == libc::DT_UNKNOWN {
                match stat_at(&fd, &listing.names[item.at..=item.at + item.len]) {
                    Ok(m) => {
                        is_dir = m.mode & libc::S_IFMT == libc::S_IFDIR;
                        meta = Some(m);
                    }
                    Err(e) => {
                        scan.failed(BString::from(rel.as_slice()), &e);
                        return false;
                    }
                }
            }
            if !self.kept(name, is_dir, &rel, rules.as_deref()) {
                return false;
            }
            if !is_dir {
                let m = match meta {
                    Some(m) => Ok(m),
                    None => stat_at(&fd, &listing.names[item.at..=item.at + item.len]),
                };
                match m {
                    Ok(m) if m.is_file() || m.is_symlink() => {
                        item.what = What::File(m);
                        return true;
                    }
                    // Listed as something else, and made a folder since: it is read as
                    // one, if the rules for a folder keep it.
                    Ok(m) if m.mode & libc::S_IFMT == libc::S_IFDIR => {
                        if !self.kept(name, true, &rel, rules.as_deref()) {
                            return false;
                        }
                    }
                    Ok(_) => {
                        scan.skipped.push(Skipped {
                            path: BString::from(rel.as_slice()),
                            reason: "not a regular file, directory or symlink".into(),
                        });
                        return false;
                    }
                    Err(e) => {
                        scan.failed(BString::from(rel.as_slice()), &e);
                        return false;
                    }
                }
            }
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            listing.names[item.at + item.len] = b'/';
            item.what = What::Folder(id);
            below.push(Job {
                id,
                rel: rel.clone(),
                parent: Some(Arc::clone(&fd)),
                rules: rules.clone(),
            });
            true
        });
        // A folder's name now ends with `/`, which may move it after names it preceded.
        if !below.is_empty() {
            items.sort_unstable_by(|a, b| listing.key(a).cmp(listing.key(b)));
        }
        listing.items = items;
        // Taken last first: the folders nearest the start of the order are read first.
        below.reverse();
        (id, listing, below)
    }

    /// Opens the job's folder: the root by its path, any other by its name in its parent,
    /// never through a symlink.
    /// The parent's descriptor is dropped once it is opened.
    fn open(&self, parent: Option<Arc<OwnedFd>>, rel: &[u8]) -> std::io::Result<OwnedFd> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let (dirfd, name, flags) = match &parent {
            None => (libc::AT_FDCWD, self.root.as_os_str().as_bytes(), flags),
            Some(p) => {
                let name = rel.rsplit(|b| *b == b'/').next().unwrap_or(rel);
                (p.as_raw_fd(), name, flags | libc::O_NOFOLLOW)
            }
        };
        let c = std::ffi::CString::new(name)?;
        // SAFETY: `c` is NUL-terminated and outlives the call; `dirfd` is open or AT_FDCWD.
        let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Whether an entry's name lets it be recorded, before anything is asked of it: not
    /// a lifeos temporary file, and on the way to a target.
    fn named_in(&self, name: &[u8], rel: &[u8]) -> bool {
        !name.starts_with(b".lifeos-tmp-")
            && self
                .targets
                .is_none_or(|t| crate::working_copy::fsmonitor::on_the_way(t, rel))
    }

    /// Whether an entry [`Walk::named_in`] lets through is kept, knowing whether it is a
    /// folder: not named as lifeos's or git's folder (a `.git` file, the link of a
    /// worktree or submodule, included), and not ignored.
    fn kept(&self, name: &[u8], is_dir: bool, rel: &[u8], rules: Option<&Rules>) -> bool {
        !crate::guard::is_repository_name(name)
            && rules.is_none_or(|r| !ignored(r, &self.absolute(rel), is_dir))
    }

    /// The rules in the job's folder: its parent's, with a level of its own if it has an
    /// ignore file. An ignore file that cannot be read (or has a bad line) is
    /// reported as unreadable; what could be read of it applies.
    fn rules(
        &self,
        rel: &[u8],
        above: Option<Arc<Rules>>,
        listing: &Listing,
        scan: &mut Scan,
    ) -> Option<Arc<Rules>> {
        let has = |wanted: &[u8]| {
            listing
                .items
                .iter()
                .find(|i| listing.names[i.at..i.at + i.len] == *wanted)
        };
        let custom = has(LIFEOS_IGNORE.as_bytes()).is_some();
        let git_ignore = has(b".gitignore").is_some();
        if !(custom || git_ignore) {
            return above;
        }
        let dir = self.absolute(rel);
        let mut matcher = |present: bool, name: &str| {
            let mut b = GitignoreBuilder::new(&dir);
            if present {
                if let Some(e) = b.add(dir.join(name)) {
                    self.ignore_failed(scan, &e);
                }
            }
            b.build().unwrap_or_else(|e| {
                self.ignore_failed(scan, &e);
                Gitignore::empty()
            })
        };
        Some(Arc::new(Rules {
            parent: above,
            custom: matcher(custom, LIFEOS_IGNORE),
            git: matcher(git_ignore, ".gitignore"),
        }))
    }

    /// Records an ignore file's error as the `ignore` crate's walker did: an I/O error
    /// alone (the file cannot be opened, or one line is not UTF-8) leaves the rules that
    /// could be read, unreported (the file itself is read when it is recorded, and says
    /// then if it cannot be); anything else (a bad pattern, several bad lines) makes the
    /// file unreadable, as what it would hide is unknown.
    fn ignore_failed(&self, scan: &mut Scan, e: &ignore::Error) {
        if e.is_io() {
            return;
        }
        let (path, io) = error_parts(e);
        let path = path.map(|p| self.relative(p)).unwrap_or_default();
        match io {
            Some(io) => scan.failed(path, io),
            None => scan.unreadable.push(Skipped {
                path,
                reason: e.to_string(),
            }),
        }
    }

    /// `p` relative to the root (the paths the walk makes start with the root's bytes).
    fn relative(&self, p: &Path) -> BString {
        let (root, path) = (self.root.as_os_str().as_bytes(), p.as_os_str().as_bytes());
        let rest = path.strip_prefix(root).unwrap_or(path);
        BString::from(rest.strip_prefix(b"/").unwrap_or(rest))
    }
}

/// Sorts a listing's items by name, each name once.
fn sorted_once(listing: &Listing, items: &mut Vec<Item>) {
    items.sort_unstable_by(|a, b| listing.key(a).cmp(listing.key(b)));
    items.dedup_by(|a, b| listing.key(a) == listing.key(b));
}

/// Ends a job whose reading panicked.
struct Unfinished<'w, 'a>(&'w Walk<'a>);

impl Drop for Unfinished<'_, '_> {
    fn drop(&mut self) {
        self.0.finish(Vec::new());
    }
}

/// Records a folder that could not be opened or listed: gone (skipped), or unreadable.
fn folder_failed(scan: &mut Scan, rel: Vec<u8>, e: &std::io::Error) {
    // Made something else than a folder since it was listed: gone as a folder.
    if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) {
        scan.skipped.push(Skipped {
            path: rel.into(),
            reason: "replaced while the snapshot was taken".into(),
        });
    } else {
        scan.failed(rel.into(), e);
    }
}

/// The path and I/O error inside an ignore error, if it has them.
fn error_parts(e: &ignore::Error) -> (Option<&Path>, Option<&std::io::Error>) {
    match e {
        ignore::Error::WithPath { path, err } => (Some(path), error_parts(err).1),
        ignore::Error::WithDepth { err, .. } => error_parts(err),
        ignore::Error::WithLineNumber { err, .. } => error_parts(err),
        ignore::Error::Loop { child, .. } => (Some(child), None),
        ignore::Error::Io(io) => (None, Some(io)),
        ignore::Error::Partial(errs) => errs.first().map_or((None, None), error_parts),
        _ => (None, None),
    }
}

/// Lists the folder open at `fd` into `listing`: its items, not yet sorted out, each name
/// followed by a NUL.
fn list(fd: &OwnedFd, buf: &mut [u8], listing: &mut Listing) -> std::io::Result<()> {
    loop {
        // SAFETY: `buf` is writable for its length; `fd` is an open folder.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let n = match usize::try_from(n) {
            Ok(0) => return Ok(()),
            Ok(n) => n.min(buf.len()),
            Err(_) => return Err(std::io::Error::last_os_error()),
        };
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type;
        // char d_name[]; } with the name NUL-terminated.
        let mut at = 0;
        while at + 19 < n {
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen < 20 || at + reclen > n {
                return Err(std::io::Error::other("a malformed folder listing"));
            }
            let rec = &buf[at..at + reclen];
            at += reclen;
            let Ok(name) = CStr::from_bytes_until_nul(&rec[19..]) else {
                return Err(std::io::Error::other("a malformed folder listing"));
            };
            let name = name.to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let start = listing.names.len();
            listing.names.extend_from_slice(name);
            listing.names.push(0);
            listing.items.push(Item {
                at: start,
                len: name.len(),
                listed_as: rec[18],
                what: What::Folder(0),
            });
        }
    }
}

/// `fstatat` of a NUL-terminated `name` in the folder `fd`, not following a symlink.
fn stat_at(fd: &OwnedFd, name: &[u8]) -> std::io::Result<Stat> {
    let name = CStr::from_bytes_with_nul(name).map_err(std::io::Error::other)?;
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is an open folder, `name` NUL-terminated, `st` writable.
    let r = unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Stat {
        mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
        ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
        size: st.st_size as u64,
        ino: st.st_ino,
        mode: st.st_mode,
        links: u32::try_from(st.st_nlink).unwrap_or(u32::MAX),
    })
}

/// Lists every file and symlink under `root` that is not ignored, sorted by path.
/// Entries named as a repository's own folder (`.git`, `.lifeos`) are never included;
/// `.lifeosignore` (gitignore syntax) and `.gitignore` files are honoured.
pub fn scan(root: &Path) -> Result<Scan> {
    scan_limited(root, None)
}

/// [`scan`] limited to `targets` (as [`crate::working_copy::fsmonitor::scan_targets`] makes them): what
/// it finds that is one of them or below one, under the same rules (the walk goes
/// through the folders on their way, reading their ignore files, and no further).
pub fn scan_within(root: &Path, targets: &[BString]) -> Result<Scan> {
    scan_limited(root, Some(targets))
}

fn scan_limited(root: &Path, targets: Option<&[BString]>) -> Result<Scan> {
    let mut out = crate::working_copy::walk::walk(root, targets);
    if let Some(t) = targets {
        // A folder on the way to a target may now be a file: it is not what was asked.
        out.found
            .retain(|f| crate::working_copy::fsmonitor::in_targets(t, &f.path));
        out.skipped
            .retain(|f| crate::working_copy::fsmonitor::in_targets(t, &f.path));
    }
    out.shared_inodes = out.found.iter().any(|f| linked_elsewhere(&f.meta));
    out.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Whether `meta` is a regular file with another hard link ([`Scan::shared_inodes`]).
pub(crate) fn linked_elsewhere(meta: &Stat) -> bool {
    meta.is_file() && meta.links > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files and symlinks the `ignore` crate's walker lists with the rules the walk
    /// keeps (the walker the scan used before), sorted.
    fn listed_by_ignore_crate(root: &Path) -> Vec<Vec<u8>> {
        let mut found: Vec<Vec<u8>> = ignore::WalkBuilder::new(root)
            .hidden(false)
            .ignore(false)
            .parents(false)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(false)
            .require_git(false)
            .follow_links(false)
            .add_custom_ignore_filename(LIFEOS_IGNORE)
            .filter_entry(|e| {
                let name = e.file_name().as_encoded_bytes();
                !(crate::guard::is_repository_name(name) || name.starts_with(b".lifeos-tmp-"))
            })
            .build()
            .map(|e| e.expect("a readable tree"))
            .filter(|e| e.file_type().is_some_and(|t| !t.is_dir()))
            .map(|e| {
                let rel = e.path().strip_prefix(root).unwrap();
                rel.as_os_str().as_bytes().to_vec()
            })
            .collect();
        found.sort();
        found
    }

    fn paths(scan: &Scan) -> Vec<Vec<u8>> {
        scan.found.iter().map(|f| f.path.clone()).collect()
    }

    const NAMES: &[&str] = &[
        "a", "b", "a-b", "c.tmp", "keep", ".git", ".lifeos", "\u{e9}",
    ];
    const RULES: &[&str] = &[
        "*.tmp",
        "b/",
        "!keep",
        "/a",
        "a-b",
        "**/c.tmp",
        "b",
        "!b",
        "a/*",
        "keep",
        "!*.tmp",
        "a/**/keep",
        "\u{e9}",
        "#a",
        "!/a-b",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// The walk lists what the `ignore` crate's walker lists, in path order: nested
        /// `.gitignore` and `.lifeosignore` files with negations, folder-only and anchored
        /// rules, a `.git` (a folder, never listed, or a file) below them, lifeos's own
        /// folder, and a symlink.
        #[test]
        fn the_walk_lists_what_the_ignore_walker_lists(
            files in proptest::collection::vec(
                proptest::collection::vec(0..NAMES.len(), 1..4), 1..24),
            ignore_files in proptest::collection::vec(
                (proptest::collection::vec(0..3usize, 0..3), proptest::bool::ANY,
                 proptest::collection::vec(0..RULES.len(), 1..4)), 0..5),
            git_files in proptest::collection::vec(
                proptest::collection::vec(0..3usize, 0..3), 0..2),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            for f in &files {
                let rel: PathBuf = f.iter().map(|&i| NAMES[i]).collect();
                let path = root.join(&rel);
                // A name already a file above, or a folder here, is left as it is.
                if std::fs::create_dir_all(path.parent().unwrap()).is_ok() && !path.exists() {
                    std::fs::write(&path, b"x").unwrap();
                }
            }
            let folder = |at: &[usize]| -> PathBuf {
                let rel: PathBuf = at.iter().map(|&i| NAMES[i]).collect();
                root.join(rel)
            };
            for (at, custom, rules) in &ignore_files {
                let d = folder(at);
                if d.is_dir() {
                    let text: Vec<&str> = rules.iter().map(|&r| RULES[r]).collect();
                    let name = if *custom { LIFEOS_IGNORE } else { ".gitignore" };
                    std::fs::write(d.join(name), text.join("\n")).unwrap();
                }
            }
            for at in &git_files {
                let d = folder(at);
                if d.is_dir() && !d.join(".git").exists() {
                    std::fs::write(d.join(".git"), b"gitdir: elsewhere\n").unwrap();
                }
            }
            std::os::unix::fs::symlink("a", root.join("link")).unwrap();
            let scan = walk(root, None);
            proptest::prop_assert!(scan.unreadable.is_empty(), "{:?}", scan.unreadable);
            proptest::prop_assert_eq!(paths(&scan), listed_by_ignore_crate(root));
        }
    }

    /// The walk's order is bytewise on whole paths, where a folder's name sorts as if
    /// followed by `/` (`a-b` and `a.txt` before `a/x`, `a/x` before `ab`), over enough
    /// folders to be shared by threads.
    #[test]
    fn paths_come_out_in_bytewise_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut want = Vec::new();
        for d in 0..40 {
            for sub in ["a-b", "a.txt", "ab", "\u{e9}", "a/x", "a/y/z", "a/y-1"] {
                let rel = format!("d{d}/{sub}");
                let path = root.join(&rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                if !path.exists() {
                    std::fs::write(&path, rel.as_bytes()).unwrap();
                    want.push(rel.into_bytes());
                }
            }
        }
        want.sort();
        let scan = walk(root, None);
        assert_eq!(paths(&scan), want);
        assert!(scan.skipped.is_empty() && scan.unreadable.is_empty());
    }

    /// A folder that cannot be listed is unreadable (what is in it is unknown, not gone),
    /// and the rest of the walk goes on.
    #[test]
    fn a_folder_that_cannot_be_listed_is_unreadable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("closed/inner")).unwrap();
        std::fs::write(root.join("closed/inner/f"), b"f").unwrap();
        std::fs::write(root.join("open"), b"o").unwrap();
        std::fs::set_permissions(root.join("closed"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        let scan = walk(root, None);
        std::fs::set_permissions(root.join("closed"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        // Root reads through any permission: then the folder is simply listed.
        if scan.unreadable.is_empty() {
            assert_eq!(paths(&scan), [b"closed/inner/f".to_vec(), b"open".to_vec()]);
        } else {
            assert_eq!(paths(&scan), [b"open".to_vec()]);
            assert_eq!(scan.unreadable.len(), 1);
            assert_eq!(scan.unreadable[0].path.as_slice(), b"closed");
        }
    }

    /// An ignore file with a pattern that does not parse is unreadable (what it would
    /// hide is unknown), with its path; one that cannot be read at all (here a folder)
    /// adds no rule and is not reported, as the `ignore` crate's walker did (recorded as
    /// content, such a file says then that it cannot be read). The rest is listed.
    #[test]
    fn ignore_files_that_fail_are_reported_as_the_ignore_walker_did() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/.gitignore")).unwrap();
        std::fs::write(root.join("sub/f"), b"f").unwrap();
        std::fs::create_dir_all(root.join("bad")).unwrap();
        std::fs::write(root.join("bad/.gitignore"), b"[z-a]\ny\n").unwrap();
        std::fs::write(root.join("bad/x"), b"x").unwrap();
        std::fs::write(root.join("bad/y"), b"y").unwrap();
        let scan = walk(root, None);
        assert_eq!(
            paths(&scan),
            [
                b"bad/.gitignore".to_vec(),
                b"bad/x".to_vec(),
                b"sub/f".to_vec()
            ]
        );
        let unreadable: Vec<&[u8]> = scan.unreadable.iter().map(|u| u.path.as_slice()).collect();
        assert_eq!(unreadable, [&b"bad/.gitignore"[..]]);
    }

    /// A name a folder listing gives twice (a rename into place while it is read) is
    /// listed once.
    #[test]
    fn a_name_listed_twice_is_kept_once() {
        let mut listing = Listing::default();
        for (name, kind) in [
            (&b"b"[..], libc::DT_REG),
            (b"a", libc::DT_REG),
            (b"b", libc::DT_REG),
        ] {
            let at = listing.names.len();
            listing.names.extend_from_slice(name);
            listing.names.push(0);
            listing.items.push(Item {
                at,
                len: name.len(),
                listed_as: kind,
                what: What::Folder(0),
            });
        }
        let mut items = std::mem::take(&mut listing.items);
        sorted_once(&listing, &mut items);
        let names: Vec<&[u8]> = items.iter().map(|i| listing.key(i)).collect();
        assert_eq!(names, [&b"a\0"[..], b"b\0"]);
    }
}
