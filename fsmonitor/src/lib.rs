//! lifeos-fsmonitor: the folder monitor that `lifeos watch` runs, the server whose client
//! is the working copy's ([`lifeos_vcs::working_copy::fsmonitor`], FORMAT 9.9): inotify
//! watches on every folder of the working folder, a journal of the paths they report,
//! and a Unix socket in `.lifeos` where `status` and `commit` ask what changed since
//! their token.
//!
//! Correctness rests on three rules. Events are read by one thread, in the kernel's
//! order, and a folder that appears (created or moved in) is watched before the next event
//! is read, so anything made in it later is reported; what was made in it before is found
//! by the asker, who scans the whole new folder because its own path is in the journal.
//! Every answer first waits for a cookie file it creates in `.lifeos` to come back
//! through the same queue, so every change made before the question is in the journal.
//! And whatever the journal cannot vouch for (the kernel's queue overflowed, a watch could
//! not be added, the folder itself moved, too many paths) makes every older token
//! answer "scan everything".

#![warn(missing_docs)]

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use lifeos_vcs::working_copy::fsmonitor::{
    decode_request, encode_answer, Answer, PROTOCOL, SOCKET,
};
use lifeos_vcs::working_copy::Token;

pub mod watch;

pub use watch::FolderWatch;

/// Why the watcher woke up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Something in the folder changed.
    Changed,
    /// The watcher lost events or failed: look at the whole folder.
    Rescan,
    /// The file that pins the trusted rules changed (`lifeos rules trust`): read the
    /// time rules again.
    Trust,
}

/// The lock file held while a monitor runs, inside `.lifeos`.
pub const LOCK_FILE: &str = "monitor.lock";
/// Cookie files are made in `.lifeos` with this prefix and a number.
const COOKIE_PREFIX: &str = "monitor-cookie-";
/// How many distinct paths the journal holds before it forgets them all (and every older
/// token then means a full scan).
const MAX_PATHS: usize = 200_000;
/// How long the monitor's threads wait for something to happen before they look at
/// whether they must stop.
const POLL_MS: i32 = 250;
/// How long an answer waits for its cookie before saying "scan everything".
const COOKIE_WAIT: Duration = Duration::from_secs(2);

/// What a folder event is watched for.
fn folder_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DONT_FOLLOW
        | WatchMask::ONLYDIR
        | WatchMask::EXCL_UNLINK
}

/// Why a monitor could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// Another process already monitors this folder.
    #[error("another `lifeos watch` already watches this folder")]
    Busy,
    /// The folder is on a network file system: changes made on another machine send no
    /// events here.
    #[error("{path} is on a {kind} file system, whose changes from other machines send no events; status and commit read the whole folder")]
    Remote {
        /// The folder.
        path: PathBuf,
        /// The file system's kind.
        kind: &'static str,
    },
    /// A system call failed.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> MonitorError + 'a {
    move |source| MonitorError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// The journal: every path reported since the monitor started (or since it last had to
/// forget), with the number of the last event about it.
struct Journal {
    instance: u64,
    seq: u64,
    /// Tokens before this cannot be answered with paths.
    floor: u64,
    /// Why they cannot.
    lost: String,
    /// Set when the monitor can no longer vouch for anything.
    broken: Option<String>,
    /// Set when the watches must be made again (events were lost, mounts changed): every
    /// answer is "all" until the reader has made them.
    rewatch: Option<String>,
    paths: HashMap<Vec<u8>, u64>,
    /// The highest cookie number read back.
    cookie: u64,
}

impl Journal {
    fn new(instance: u64) -> Journal {
        Journal {
            instance,
            seq: 0,
            floor: 0,
            lost: String::new(),
            broken: None,
            rewatch: None,
            paths: HashMap::new(),
            cookie: 0,
        }
    }

    fn record(&mut self, path: Vec<u8>) {
        self.seq += 1;
        self.paths.insert(path, self.seq);
        if self.paths.len() > MAX_PATHS {
            self.lose(format!("more than {MAX_PATHS} paths changed"));
        }
    }

    /// Forgets every path: tokens given before now mean a full scan.
    fn lose(&mut self, why: String) {
        self.seq += 1;
        self.floor = self.seq;
        self.lost = why;
        self.paths = HashMap::new();
    }

    /// What changed since `since`, with the token to use next.
    fn answer(&self, since: Option<Token>) -> (Token, Answer) {
        let token = Token {
            instance: self.instance,
            seq: self.seq,
        };
        let all = |why: &str| (token, Answer::All(why.to_owned()));
        if let Some(why) = self.broken.as_ref().or(self.rewatch.as_ref()) {
            return all(why);
        }
        match since {
            None => all("no token yet"),
            Some(t) if t.instance != self.instance => all("the token is another watcher's"),
            Some(t) if t.seq < self.floor => all(&self.lost),
            Some(t) if t.seq > self.seq => all("the token is from the future"),
            Some(t) => {
                let paths = self
                    .paths
                    .iter()
                    .filter(|(_, s)| **s > t.seq)
                    .map(|(p, _)| p.clone().into())
                    .collect();
                (token, Answer::Paths(paths))
            }
        }
    }
}

struct Shared {
    journal: Mutex<Journal>,
    cookie_seen: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running monitor; dropping it stops it and removes its socket.
pub struct Monitor {
    shared: Arc<Shared>,
    dot: PathBuf,
    /// The socket, to shut down when stopping (which wakes the server's `accept`).
    listener: UnixListener,
    threads: Vec<JoinHandle<()>>,
    _lock: std::fs::File,
}

/// Something the watcher of `lifeos watch` wants to hear of.
pub type OnWake = Box<dyn Fn(Wake) + Send>;

impl Monitor {
    /// Starts monitoring `root`, whose repository data is `dot` (`.lifeos`): watches every
    /// folder, then answers on `.lifeos/monitor.sock`. On a network file system it only
    /// wakes `on_wake` (every answer is "scan everything"), and without `on_wake` it is
    /// refused. `trust` names a file in `dot`
    /// whose changes `on_wake` hears as [`Wake::Trust`]; folder changes are
    /// [`Wake::Changed`], lost events [`Wake::Rescan`].
    pub fn start(
        root: &Path,
        dot: &Path,
        trust: Option<&OsStr>,
        on_wake: Option<OnWake>,
    ) -> Result<Monitor, MonitorError> {
        let lock_path = dot.join(LOCK_FILE);
        let lock = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("open", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(MonitorError::Busy),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err("lock", &lock_path)(e)),
        }
        // On a network file system it can still wake `lifeos watch` for changes made on
        // this machine, but never vouch for the folder.
        let remote = remote_fs(root);
        if let (Some(kind), None) = (remote, &on_wake) {
            return Err(MonitorError::Remote {
                path: root.to_path_buf(),
                kind,
            });
        }
        let root_dev = std::fs::metadata(root).map_err(io_err("read", root))?.dev();
        // Cookies a killed watcher left.
        if let Ok(list) = std::fs::read_dir(dot) {
            for e in list.flatten() {
                if e.file_name()
                    .as_bytes()
                    .starts_with(COOKIE_PREFIX.as_bytes())
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let mut inotify = Inotify::init().map_err(io_err("start inotify for", root))?;
        let mut watches = inotify.watches();
        // `.lifeos` itself (not below it): the cookies and the trust file.
        let dot_wd = watches
            .add(
                dot,
                WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::CLOSE_WRITE,
            )
            .map_err(io_err("watch", dot))?;
        let instance = u64::from_le_bytes(
            blake3::hash(
                format!(
                    "{} {:?} {}",
                    std::process::id(),
                    std::time::SystemTime::now(),
                    root.display()
                )
                .as_bytes(),
            )
            .as_bytes()[..8]
                .try_into()
                .expect("8 bytes"),
        );
        let mut reader = Reader {
            root: root.to_path_buf(),
            root_dev,
            watches,
            dirs: HashMap::new(),
            dot_wd,
            trust: trust.map(|t| t.as_bytes().to_vec()),
            on_wake,
        };
        let mut journal = Journal::new(instance);
        if let Err(why) = reader.watch_tree(Vec::new()) {
            return Err(MonitorError::Io {
                what: "watch",
                path: root.to_path_buf(),
                source: std::io::Error::other(why),
            });
        }
        // Nothing is known from before the watches: the first token's asker scans.
        journal.lose("the watcher has just started".into());
        if let Some(kind) = remote {
            journal.broken = Some(format!(
                "the folder is on a {kind} file system, whose changes from other machines send no events"
            ));
        }
        let shared = Arc::new(Shared {
            journal: Mutex::new(journal),
            cookie_seen: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let socket_path = dot.join(SOCKET);
        match std::fs::remove_file(&socket_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove the old socket", &socket_path)(e)),
        }
        let listener =
            lifeos_vcs::working_copy::fsmonitor::with_socket_path(dot, |p| UnixListener::bind(p))
                .map_err(io_err("listen on", &socket_path))?;
        let mut monitor = Monitor {
            shared: shared.clone(),
            dot: dot.to_path_buf(),
            listener: listener
                .try_clone()
                .map_err(io_err("listen on", &socket_path))?,
            threads: Vec::new(),
            _lock: lock,
        };
        // From here on, a failure drops `monitor`, which stops what started and removes
        // the socket.
        let mounts = MountWatch::new(root);
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(io_err("start a thread for", root))
        };
        let s = shared.clone();
        monitor.threads.push(spawn(
            "lifeos-monitor-events",
            Box::new(move || reader.run(&mut inotify, &s)),
        )?);
        let s = shared.clone();
        monitor.threads.push(spawn(
            "lifeos-monitor-mounts",
            Box::new(move || mounts.run(&s)),
        )?);
        let dot_owned = dot.to_path_buf();
        monitor.threads.push(spawn(
            "lifeos-monitor-answers",
            Box::new(move || serve(&listener, &shared, &dot_owned)),
        )?);
        Ok(monitor)
    }

    /// How many folders are watched is not kept; this says whether the monitor still
    /// vouches for the folder (`None`) or why not.
    pub fn broken(&self) -> Option<String> {
        self.shared.journal().broken.clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // The server's `accept` returns once the socket is shut down; the other threads
        // wait for events a bounded time and then look at `stop`.
        // SAFETY: shuts down a socket this monitor owns; nothing is freed.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(self.dot.join(SOCKET));
    }
}

/// The thread that reads events and keeps the watches.
struct Reader {
    root: PathBuf,
    /// The root's device: a folder on another is checked for a network file system.
    root_dev: u64,
    watches: Watches,
    /// Each watched folder's path relative to the root.
    dirs: HashMap<WatchDescriptor, Vec<u8>>,
    dot_wd: WatchDescriptor,
    trust: Option<Vec<u8>>,
    on_wake: Option<OnWake>,
}

/// Why the ignore file at `path` can change with no event about it (it is a symlink, or
/// has another hard link), if it is an ignore file that can.
fn unseen_rules(path: &Path) -> Option<String> {
    let name = path.file_name()?.as_bytes();
    if name != b".gitignore" && name != b".lifeosignore" {
        return None;
    }
    let m = std::fs::symlink_metadata(path).ok()?;
    (m.file_type().is_symlink() || m.nlink() > 1).then(|| {
        format!(
            "the ignore file {} is a symlink or has another name: its rules can change with no event here",
            path.display()
        )
    })
}

/// Folders never watched (nor recorded by a scan): repositories' own data.
fn unwatched(name: &[u8]) -> bool {
    name == b".git" || name == lifeos_vcs::layout::DOT_DIR.as_bytes()
}

impl Reader {
    fn full(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(OsStr::from_bytes(rel))
        }
    }

    /// Watches folder `rel` and every folder below it. A folder that vanished meanwhile is
    /// left out (its removal is an event); any other failure is returned.
    fn watch_tree(&mut self, rel: Vec<u8>) -> Result<(), String> {
        let mut todo = vec![rel];
        while let Some(rel) = todo.pop() {
            let path = self.full(&rel);
            // A mount inside the folder: changes made on another machine send no event.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() != self.root_dev) {
                if let Some(kind) = remote_fs(&path) {
                    return Err(format!(
                        "{} is on a {kind} file system, whose changes from other machines send no events",
                        path.display()
                    ));
                }
            }
            // The root's own removal or move ends what the monitor can vouch for.
            let mask = if rel.is_empty() {
                folder_mask() | WatchMask::DELETE_SELF | WatchMask::MOVE_SELF
            } else {
                folder_mask()
            };
            match self.watches.add(&path, mask) {
                Ok(wd) => {
                    if let Some(other) = self.dirs.insert(wd, rel.clone()) {
                        if other != rel {
                            // One folder at two paths (a bind mount): its events would name
                            // only one of them.
                            return Err(format!(
                                "{} is also at {}",
                                path.display(),
                                self.full(&other).display()
                            ));
                        }
                    }
                }
                Err(e) if gone(&e) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err(format!(
                        "cannot watch {}: the limit of inotify watches is reached (sysctl fs.inotify.max_user_watches)",
                        path.display()
                    ))
                }
                Err(e) => return Err(format!("cannot watch {}: {e}", path.display())),
            }
            let list = match std::fs::read_dir(&path) {
                Ok(l) => l,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(format!("cannot list {}: {e}", path.display())),
            };
            for entry in list {
                let entry = entry.map_err(|e| format!("cannot list {}: {e}", path.display()))?;
                let name = entry.file_name();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && !unwatched(name.as_bytes()) {
                    todo.push(join(&rel, name.as_bytes()));
                }
                if let Some(why) = unseen_rules(&entry.path()) {
                    return Err(why);
                }
            }
        }
        Ok(())
    }

    fn run(&mut self, inotify: &mut Inotify, shared: &Shared) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // Events, or a look at `stop` and at a rewatch the mount thread asked for.
            let ready = wait_for(inotify.as_raw_fd(), libc::POLLIN, POLL_MS);
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            let mut journal = shared.journal();
            let (seq, floor) = (journal.seq, journal.floor);
            let mut trust = false;
            match ready {
                Ok(false) => {}
                Ok(true) => match inotify.read_events(&mut buf) {
                    Ok(events) => {
                        for ev in events {
                            trust |= self.event(&mut journal, &ev);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => journal.broken = Some(format!("reading inotify events failed: {e}")),
                },
                Err(e) => journal.broken = Some(format!("waiting for inotify events failed: {e}")),
            }
            if let Some(why) = journal.rewatch.take() {
                self.rewatch(&mut journal, why);
            }
            let lost = journal.floor != floor || journal.broken.is_some();
            let changed = journal.seq != seq;
            let broken = journal.broken.is_some();
            drop(journal);
            shared.cookie_seen.notify_all();
            if lost {
                self.wake(Wake::Rescan);
            } else if changed {
                self.wake(Wake::Changed);
            }
            if trust {
                self.wake(Wake::Trust);
            }
            if broken && self.on_wake.is_none() {
                // Nothing to vouch for and no one to wake: answers say "all" from now on.
                return;
            }
        }
    }

    /// Handles one event; returns whether it is about the trust file.
    fn event(&mut self, journal: &mut Journal, ev: &inotify::Event<&OsStr>) -> bool {
        let name = ev.name.map(|n| n.as_bytes());
        if ev.mask.contains(EventMask::Q_OVERFLOW) {
            // Lost events may have been folders made or moved: watch everything again.
            journal.rewatch = Some("the kernel's event queue overflowed".into());
            return false;
        }
        if ev.wd == self.dot_wd {
            match name {
                Some(n) if Some(n) == self.trust.as_deref() => return true,
                Some(n) => {
                    if let Some(k) = n
                        .strip_prefix(COOKIE_PREFIX.as_bytes())
                        .and_then(|k| std::str::from_utf8(k).ok())
                        .and_then(|k| k.parse::<u64>().ok())
                    {
                        journal.cookie = journal.cookie.max(k);
                    }
                }
                None => {}
            }
            return false;
        }
        if ev.mask.contains(EventMask::UNMOUNT) {
            journal.rewatch = Some("a file system in the folder was unmounted".into());
            return false;
        }
        if ev.mask.contains(EventMask::IGNORED) {
            self.dirs.remove(&ev.wd);
            return false;
        }
        let Some(dir) = self.dirs.get(&ev.wd) else {
            return false;
        };
        let Some(name) = name else {
            // About a watched folder itself: the root going away is the end.
            if dir.is_empty()
                && ev
                    .mask
                    .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
            {
                journal.broken = Some("the folder itself was moved or deleted".into());
            }
            return false;
        };
        if dir.is_empty() && name == lifeos_vcs::layout::DOT_DIR.as_bytes() {
            return false;
        }
        let rel = join(dir, name);
        journal.record(rel.clone());
        if let Some(why) = unseen_rules(&self.full(&rel)) {
            journal.broken = Some(why);
        }
        if ev.mask.contains(EventMask::ISDIR) {
            if ev.mask.contains(EventMask::MOVED_FROM) {
                self.unwatch_tree(&rel);
            }
            if ev.mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) && !unwatched(name) {
                if let Err(why) = self.watch_tree(rel) {
                    // Made again from the root after this batch; a second failure there
                    // is the end.
                    journal.rewatch = Some(why);
                }
            }
        }
        false
    }

    /// Drops every watch and watches the whole folder again; tokens given before are
    /// answered "all" (`why`). A failure ends what the monitor can vouch for.
    fn rewatch(&mut self, journal: &mut Journal, why: String) {
        for (wd, _) in std::mem::take(&mut self.dirs) {
            let _ = self.watches.remove(wd);
        }
        if let Err(e) = self.watch_tree(Vec::new()) {
            journal.broken = Some(e);
        }
        journal.lose(why);
    }

    /// Stops watching folder `rel` and what is below it (moved away: events from there
    /// would carry the old paths). Where it went, if inside, is watched anew.
    fn unwatch_tree(&mut self, rel: &[u8]) {
        let below: Vec<WatchDescriptor> = self
            .dirs
            .iter()
            .filter(|(_, d)| lifeos_vcs::path::is_under(d, rel))
            .map(|(wd, _)| wd.clone())
            .collect();
        for wd in below {
            self.dirs.remove(&wd);
            let _ = self.watches.remove(wd);
        }
    }

    fn wake(&self, w: Wake) {
        if let Some(f) = &self.on_wake {
            f(w);
        }
    }
}

/// The kind of network (or user-space) file system `path` is on, if it is on one: their
/// changes made elsewhere send no inotify events.
fn remote_fs(path: &Path) -> Option<&'static str> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statfs` is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` writable for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // The magic numbers of linux/magic.h (and CIFS's and SMB2's own).
    match st.f_type as u64 {
        0x6969 => Some("NFS"),
        0x517B => Some("SMB"),
        0xFF53_4D42 => Some("CIFS"),
        0xFE53_4D42 => Some("SMB2"),
        0x6573_5546 => Some("FUSE"),
        0x0102_1997 => Some("9p"),
        0x00C3_6400 => Some("Ceph"),
        0x5346_414F => Some("AFS"),
        0x7375_7245 => Some("Coda"),
        0x0BD0_0BD0 => Some("Lustre"),
        _ => None,
    }
}

/// Waits up to `ms` for `events` (`POLLIN`, `POLLPRI`) on `fd`; whether one came.
fn wait_for(fd: std::os::fd::RawFd, events: libc::c_short, ms: i32) -> std::io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the call.
    match unsafe { libc::poll(&mut p, 1, ms) } {
        -1 => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// Watches the mount table: a file system mounted or unmounted on a path inside the
/// folder changes what the folder holds with no event (a mount over a watched folder sends
/// none), so the watches are made again and older tokens are answered "all".
struct MountWatch {
    root: Vec<u8>,
    mounts: Option<std::fs::File>,
    inside: Vec<Vec<u8>>,
}

impl MountWatch {
    fn new(root: &Path) -> MountWatch {
        let root = root.as_os_str().as_bytes().to_vec();
        let mounts = std::fs::File::open("/proc/self/mountinfo").ok();
        let inside = mounts_inside(&root);
        MountWatch {
            root,
            mounts,
            inside,
        }
    }

    fn run(mut self, shared: &Shared) {
        let Some(file) = self.mounts.take() else {
            shared.journal().broken =
                Some("cannot read /proc/self/mountinfo to follow mounts in the folder".into());
            return;
        };
        loop {
            // The mount table signals a change as an exceptional condition.
            let changed = wait_for(file.as_raw_fd(), libc::POLLPRI, POLL_MS);
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            if !matches!(changed, Ok(true)) {
                continue;
            }
            // Reading it again from the start clears the condition.
            let mut f = &file;
            let _ = std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0));
            let _ = std::io::Read::read_to_end(&mut f, &mut Vec::new());
            let now = mounts_inside(&self.root);
            if now != self.inside {
                self.inside = now;
                shared.journal().rewatch =
                    Some("a file system was mounted or unmounted in the folder".into());
            }
        }
    }
}

/// The mount points strictly inside `root` (bytes, sorted), from `/proc/self/mountinfo`
/// (its fifth field, with `\ooo` octal escapes).
fn mounts_inside(root: &[u8]) -> Vec<Vec<u8>> {
    let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<Vec<u8>> = table
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(unescape_octal)
        .filter(|m| m.len() > root.len() && m.starts_with(root) && m[root.len()] == b'/')
        .collect();
    out.sort();
    out
}

fn unescape_octal(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let oct = s
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (s[i], oct) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR))
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    if !dir.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Answers on the socket until stopped, one asker at a time.
fn serve(listener: &UnixListener, shared: &Shared, dot: &Path) {
    let mut cookie = 0u64;
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        cookie += 1;
        let _ = answer(&mut conn, shared, dot, cookie);
    }
}

fn answer(conn: &mut UnixStream, shared: &Shared, dot: &Path, cookie: u64) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    (&mut *conn)
        .take(PROTOCOL.len() as u64 + 64)
        .read_to_end(&mut request)?;
    let Some(since) = decode_request(&request) else {
        return Ok(());
    };
    // With nothing to vouch for, no cookie is waited for.
    {
        let journal = shared.journal();
        if journal.broken.is_some() {
            let (token, answer) = journal.answer(since);
            drop(journal);
            return conn.write_all(&encode_answer(token, &answer));
        }
    }
    // The cookie comes back through the queue after every event from before it.
    let path = dot.join(format!("{COOKIE_PREFIX}{cookie}"));
    let made = std::fs::write(&path, b"");
    let deadline = Instant::now() + COOKIE_WAIT;
    let mut journal = shared.journal();
    while made.is_ok() && journal.cookie < cookie && Instant::now() < deadline {
        let wait = deadline.saturating_duration_since(Instant::now());
        journal = shared
            .cookie_seen
            .wait_timeout(journal, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let (token, answer) = if journal.cookie >= cookie {
        journal.answer(since)
    } else {
        let token = Token {
            instance: journal.instance,
            seq: journal.seq,
        };
        let why = match made {
            Err(e) => format!("cannot make a cookie file: {e}"),
            Ok(()) => "the cookie did not come back in time".into(),
        };
        (token, Answer::All(why))
    };
    drop(journal);
    let _ = std::fs::remove_file(&path);
    conn.write_all(&encode_answer(token, &answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal() -> Journal {
        Journal::new(9)
    }

    fn paths(a: Answer) -> Vec<Vec<u8>> {
        match a {
            Answer::Paths(mut p) => {
                p.sort();
                p.into_iter().map(|p| p.to_vec()).collect()
            }
            Answer::All(why) => panic!("all: {why}"),
        }
    }

    #[test]
    fn the_journal_answers_what_changed_after_a_token_or_says_scan_everything() {
        let mut j = journal();
        j.lose("started".into());
        let (t0, a) = j.answer(None);
        assert!(matches!(a, Answer::All(_)));
        j.record(b"a".to_vec());
        j.record(b"b/c".to_vec());
        let (t1, a) = j.answer(Some(t0));
        assert_eq!(paths(a), vec![b"a".to_vec(), b"b/c".to_vec()]);
        j.record(b"a".to_vec());
        assert_eq!(paths(j.answer(Some(t1)).1), vec![b"a".to_vec()]);
        // The same token asked again gets the same answer and more.
        assert_eq!(paths(j.answer(Some(t0)).1).len(), 2);
        let other = Token {
            instance: 8,
            seq: t1.seq,
        };
        assert!(matches!(j.answer(Some(other)).1, Answer::All(_)));
        j.lose("overflow".into());
        assert!(matches!(j.answer(Some(t1)).1, Answer::All(w) if w == "overflow"));
        let (t2, _) = j.answer(Some(t1));
        assert_eq!(paths(j.answer(Some(t2)).1), Vec::<Vec<u8>>::new());
        j.broken = Some("root moved".into());
        assert!(matches!(j.answer(Some(t2)).1, Answer::All(_)));
    }

    /// Paths that share prefixes in every way that orders differently as paths and as
    /// tree names, a name that is not UTF-8, and folders that come and go.
    const PATHS: &[&[u8]] = &[
        b"a",
        b"a/x",
        b"a/y/z",
        b"a-b",
        b"a.txt",
        b"b",
        b"c/d/e",
        b"c/f",
        b"c/g.tmp",
        b"n\xff/\xfe",
        b"new1/deep/0",
        b"c2/d/e",
    ];

    fn at(root: &Path, rel: &[u8]) -> PathBuf {
        root.join(OsStr::from_bytes(rel))
    }

    /// One change to the folder, chosen by `r`.
    fn apply(root: &Path, r: u64) {
        use std::os::unix::fs::PermissionsExt;
        let rel = PATHS[(r >> 8) as usize % PATHS.len()];
        let p = at(root, rel);
        match r % 12 {
            0..=3 => {
                lifeos_vcs::testing::clear_way(root, rel).unwrap();
                std::fs::write(&p, (r >> 16).to_le_bytes()).unwrap();
            }
            4 => {
                lifeos_vcs::testing::clear_way(root, rel).unwrap();
                std::os::unix::fs::symlink("elsewhere", &p).unwrap();
            }
            5 => {
                if p.symlink_metadata().is_ok_and(|m| m.is_file()) {
                    let mode = if r & 0x10000 == 0 { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
                }
            }
            6 => {
                if p.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                    std::fs::remove_file(&p).unwrap();
                }
            }
            7 => {
                // A folder moved away and back, or moved to a new name.
                let (from, to) = if root.join("c").exists() {
                    ("c", "c2")
                } else {
                    ("c2", "c")
                };
                if root.join(from).symlink_metadata().is_ok_and(|m| m.is_dir())
                    && !root.join(to).exists()
                {
                    std::fs::rename(root.join(from), root.join(to)).unwrap();
                }
            }
            8 => {
                // An ignore rule below the root comes or goes.
                let rule = root.join("c/.lifeosignore");
                if rule.exists() {
                    std::fs::remove_file(rule).unwrap();
                } else if root.join("c").symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    std::fs::write(rule, b"*.tmp\n").unwrap();
                }
            }
            9 => {
                // A new folder full of files, made at once.
                let d = root.join(format!("new{}", r % 3));
                let _ = std::fs::remove_dir_all(&d);
                std::fs::create_dir_all(d.join("deep")).unwrap();
                for i in 0..(r >> 20) % 5 {
                    std::fs::write(d.join("deep").join(i.to_string()), [i as u8]).unwrap();
                }
            }
            10 => {
                // A write through the second name, which sends no event about `b`.
                if root.join("hard").exists() {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(root.join("hard"))
                        .unwrap();
                    f.write_all(b"through the other name").unwrap();
                }
            }
            _ => {
                // A file with a second name (the monitor cannot vouch for it), or not.
                let link = root.join("hard");
                if link.exists() {
                    std::fs::remove_file(link).unwrap();
                } else if root.join("b").symlink_metadata().is_ok_and(|m| m.is_file()) {
                    std::fs::hard_link(root.join("b"), link).unwrap();
                }
            }
        }
    }

    type Summary = Vec<(
        Vec<u8>,
        String,
        Option<(lifeos_vcs::EntryKind, lifeos_store::Id)>,
    )>;

    fn summary(st: &lifeos_vcs::history::Status) -> Summary {
        st.changes
            .iter()
            .map(|c| {
                (
                    c.path.to_vec(),
                    format!("{:?}", c.kind),
                    c.new.as_ref().map(|e| (e.kind, e.id)),
                )
            })
            .collect()
    }

    /// The truth: the folder's status with no stat cache and no monitor token, every file
    /// read and compared with `@`; the cache and token are put back after.
    fn truth(repo: &lifeos_vcs::Repo) -> Summary {
        let keep: Vec<(PathBuf, Option<Vec<u8>>)> =
            ["wc_state", lifeos_vcs::working_copy::fsmonitor::SIDE_FILE]
                .iter()
                .map(|f| {
                    let p = repo.dot_dir().join(f);
                    let b = std::fs::read(&p).ok();
                    let _ = std::fs::remove_file(&p);
                    (p, b)
                })
                .collect();
        let wc = repo.lock_working_copy().unwrap();
        let st = summary(&repo.status(&wc).unwrap());
        for (p, b) in keep {
            let _ = std::fs::remove_file(&p);
            if let Some(b) = b {
                std::fs::write(&p, b).unwrap();
            }
        }
        st
    }

    #[test]
    fn status_and_commit_through_the_monitor_match_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = lifeos_vcs::Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        std::fs::write(root.join("keep"), b"k").unwrap();
        std::fs::create_dir_all(root.join("c/d")).unwrap();
        std::fs::write(root.join("c/d/e"), b"e").unwrap();
        let commit = || {
            let wc = repo.lock_working_copy().unwrap();
            let opts = lifeos_vcs::commit::CommitOptions {
                message: b"m",
                allow_empty: true,
                ..Default::default()
            };
            repo.commit_working_copy(&wc, &opts, &lifeos_vcs::working_copy::NoProgress)
                .unwrap()
        };
        commit();
        let monitor = Monitor::start(root, repo.dot_dir(), None, None).unwrap();
        let side = repo
            .dot_dir()
            .join(lifeos_vcs::working_copy::fsmonitor::SIDE_FILE);
        let status = || {
            let wc = repo.lock_working_copy().unwrap();
            summary(&repo.status(&wc).unwrap())
        };
        assert_eq!(status(), Vec::new());
        assert!(
            side.exists(),
            "a status that found nothing changed saves the token"
        );
        let mut r: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut watched_rounds = 0;
        for round in 0..60 {
            for _ in 0..1 + round % 4 {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                apply(root, r >> 11);
            }
            watched_rounds += usize::from(side.exists());
            let seen = status();
            assert_eq!(seen, truth(&repo), "round {round}: status");
            if round % 3 != 2 {
                let out = commit();
                assert_eq!(
                    truth(&repo),
                    Vec::new(),
                    "round {round}: the commit is the folder"
                );
                assert_eq!(
                    status(),
                    Vec::new(),
                    "round {round}: status after the commit"
                );
                let head = repo.head().unwrap();
                assert_eq!(repo.at_tree(&head.view).unwrap(), Some(out.snapshot.tree));
            }
        }
        assert!(
            watched_rounds > 30,
            "the monitor answered {watched_rounds} rounds of 60"
        );
        assert_eq!(monitor.broken(), None);
        // A second name made while the token stands, and a write through it: the event
        // names only the new name.
        let _ = std::fs::remove_file(root.join("hard"));
        lifeos_vcs::testing::clear_way(root, b"b").unwrap();
        std::fs::write(root.join("b"), b"b").unwrap();
        commit();
        assert_eq!(status(), Vec::new());
        assert!(side.exists());
        std::fs::hard_link(root.join("b"), root.join("hard")).unwrap();
        apply(root, 10);
        assert_eq!(status(), truth(&repo), "a write through a second name");
        assert_eq!(status().len(), 2, "b modified, hard added");
    }

    #[test]
    fn an_ignore_file_that_is_a_symlink_stops_the_monitor_vouching() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = lifeos_vcs::Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let monitor = Monitor::start(root, repo.dot_dir(), None, None).unwrap();
        std::fs::write(root.join("rules"), b"*.tmp\n").unwrap();
        std::os::unix::fs::symlink("rules", root.join(".gitignore")).unwrap();
        // The event is read within the monitor's poll.
        let start = Instant::now();
        while monitor.broken().is_none() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let why = monitor.broken().expect("no longer vouching");
        assert!(why.contains("symlink"), "{why}");
        let (_, answer) = lifeos_vcs::working_copy::fsmonitor::ask(repo.dot_dir(), None).unwrap();
        assert!(matches!(answer, Answer::All(_)));
    }
}
