//! A repository: the working folder, its `.lifeos` store, and the operation log.

use std::path::{Path, PathBuf};

use lifeos_store::{Id, Kind, Store, StoreConfig, Transaction};

use crate::commit::CommitHook;
use crate::error::{IoContext, Result, VcsError};
use crate::layout::{locate, store_dir_of, COLOCATED_DIR, DEFAULT_BRANCH, DOT_DIR, OP_HEADS_DIR};
use crate::object::{Commit, EntryKind, Event, OpEvents, Operation, Signature, Tree, View};
use crate::op_index::{OpIndex, StoreWalk};
use crate::path::BString;

/// Concurrent operation heads merged by one operation at most.
const MAX_MERGED_HEADS: usize = 64;

/// Who is acting and when; read from the environment once per command.
#[derive(Debug, Clone)]
pub struct Actor {
    /// Name for commits.
    pub name: String,
    /// Email for commits.
    pub email: String,
    /// Host name for operations.
    pub host: String,
    /// Local time zone offset in minutes.
    pub tz_offset_min: i32,
}

impl Actor {
    /// From `LIFEOS_AUTHOR_NAME`/`LIFEOS_AUTHOR_EMAIL` (or `USER`), the host name and the
    /// local time zone.
    pub fn from_env() -> Actor {
        Actor::with_settings(None)
    }

    /// As [`Actor::from_env`], with the `user.name` and `user.email` settings of the
    /// repository in `dot_dir` (or the user's) between the environment and the defaults.
    pub fn with_settings(dot_dir: Option<&Path>) -> Actor {
        let setting = |key: &str| crate::settings::effective(dot_dir, key);
        let user = std::env::var("LIFEOS_AUTHOR_NAME")
            .ok()
            .or_else(|| setting("user.name"))
            .ok_or(())
            .or_else(|_| std::env::var("USER"))
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(user_from_passwd)
            .unwrap_or_else(|| "unknown".into());
        let host = host_name();
        let email = std::env::var("LIFEOS_AUTHOR_EMAIL")
            .ok()
            .or_else(|| setting("user.email"))
            .unwrap_or_else(|| format!("{user}@{host}"));
        let tz_offset_min = jiff::Zoned::now().offset().seconds() / 60;
        Actor {
            name: user,
            email,
            host,
            tz_offset_min,
        }
    }
}

/// The name of this machine, recorded in each operation (and so part of its id). A build
/// with the `testing` feature reads `LIFEOS_HOSTNAME` instead, so that operation ids, and
/// the screens that show them, are the same on every machine; any other build ignores it.
fn host_name() -> String {
    #[cfg(feature = "testing")]
    if let Ok(host) = std::env::var("LIFEOS_HOSTNAME") {
        return host;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// The name of the current user from /etc/passwd (when the environment has none).
fn user_from_passwd() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
    })
}

/// Milliseconds since the Unix epoch, now. A build with the `testing` feature (what
/// `cargo test` builds) reads `LIFEOS_NOW`, an RFC 3339 time, instead, for tests that
/// place operations in time; any other build ignores it, so no environment can move an
/// approval's clock (docs/SECURITY.md).
pub fn now_ms() -> i64 {
    #[cfg(feature = "testing")]
    if let Ok(s) = std::env::var("LIFEOS_NOW") {
        if let Ok(ts) = s.parse::<jiff::Timestamp>() {
            return ts.as_millisecond();
        }
    }
    jiff::Timestamp::now().as_millisecond()
}

/// The (start, end) times of an operation that started at `start_ms` and ends now.
pub(crate) fn op_times(start_ms: i64) -> (i64, i64) {
    (start_ms, now_ms().max(start_ms))
}

/// Decodes the bytes `raw` of object `id` of the given kind.
pub(crate) fn decoded<T>(
    raw: &[u8],
    id: &Id,
    kind: Kind,
    decode: fn(&[u8]) -> std::result::Result<T, lifeos_store::codec::DecodeError>,
) -> Result<T> {
    decode(raw).map_err(|source| VcsError::Decode {
        kind: kind.name(),
        id: *id,
        source,
    })
}

/// A loaded operation with its view.
#[derive(Debug, Clone)]
pub struct OpState {
    /// The operation's id.
    pub id: Id,
    /// The operation.
    pub op: Operation,
    /// Its view.
    pub view: View,
}

/// An open repository.
pub struct Repo {
    workdir: PathBuf,
    dot: PathBuf,
    store: std::sync::Arc<Store>,
    /// The acting user.
    pub actor: Actor,
    /// How a person stops a long change of the working folder (connected to signals by
    /// the command line).
    pub interrupt: crate::interrupt::Interrupt,
    /// What the application installed: commit hooks and the operation index.
    ext: Extensions,
}

/// What an application installs on a repository it opens: what each commit does beyond
/// the history, and how operations and commits are looked up.
#[derive(Clone)]
struct Extensions {
    commit_hooks: Vec<std::sync::Arc<dyn CommitHook>>,
    op_index: std::sync::Arc<dyn OpIndex>,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions {
            commit_hooks: Vec::new(),
            op_index: std::sync::Arc::new(StoreWalk),
        }
    }
}

impl Repo {
    /// Creates a repository whose working folder is `workdir` (created if missing). Its
    /// store is `.lifeos`, or `.git/lifeos` when the folder's top holds a `.git` folder
    /// (out of the reach of git's commands; see [`COLOCATED_DIR`]).
    pub fn init(workdir: &Path, config: StoreConfig) -> Result<Repo> {
        std::fs::create_dir_all(workdir).io("creating", workdir)?;
        let workdir = workdir.canonicalize().io("resolving", workdir)?;
        let git = workdir.join(".git");
        let dot = if git.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            git.join(COLOCATED_DIR)
        } else {
            workdir.join(DOT_DIR)
        };
        if dot.exists() || store_dir_of(&workdir).is_some() {
            return Err(VcsError::AlreadyInitialized(workdir));
        }
        std::fs::create_dir(&dot).io("creating", &dot)?;
        let store = std::sync::Arc::new(Store::init(&dot, config)?);
        std::fs::create_dir(dot.join(OP_HEADS_DIR)).io("creating", dot.join(OP_HEADS_DIR))?;
        lifeos_store::fsutil::sync_dir(&dot)?;
        lifeos_store::fsutil::sync_dir(&workdir)?;
        let repo = Repo {
            workdir,
            dot,
            store,
            actor: Actor::from_env(),
            interrupt: crate::interrupt::Interrupt::default(),
            ext: Extensions::default(),
        };
        let view = View {
            current_branch: Some(DEFAULT_BRANCH.into()),
            ..View::default()
        };
        let tx = repo.store.transaction()?;
        let start = now_ms();
        repo.publish(tx, &[], view, "init", vec![Event::RepoInitialized], start)?;
        Ok(repo)
    }

    /// Opens the repository whose working folder is `start` or the nearest folder above it
    /// that has a store ([`store_dir_of`]).
    pub fn discover(start: &Path) -> Result<Repo> {
        let start = start.canonicalize().io("resolving", start)?;
        match locate(&start) {
            Some((workdir, dot)) => Self::open_at(&workdir, dot),
            None => Err(VcsError::NotARepository(start)),
        }
    }

    fn open_at(workdir: &Path, dot: PathBuf) -> Result<Repo> {
        let store = std::sync::Arc::new(Store::open(&dot)?);
        Ok(Repo {
            workdir: workdir.into(),
            actor: Actor::with_settings(Some(&dot)),
            dot,
            store,
            interrupt: crate::interrupt::Interrupt::default(),
            ext: Extensions::default(),
        })
    }

    /// The working folder.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The store's folder: `.lifeos`, or `.git/lifeos` in a folder shared with git.
    pub fn dot_dir(&self) -> &Path {
        &self.dot
    }

    /// Moves the store to `to` (a new folder on the same file system, as `.git/lifeos`
    /// is beside `.lifeos`) and opens it there. No transaction is running meanwhile (the
    /// repository lock is held exclusively) and no command is using the folder (the
    /// working-copy lock); a command that opened the store before at its old place fails
    /// when it next writes there, and publishes nothing. The rename is atomic: a kill
    /// leaves the store at one place or the other, whole.
    pub fn move_store(self, to: &Path) -> Result<Repo> {
        if to.exists() {
            return Err(VcsError::AlreadyInitialized(to.to_path_buf()));
        }
        let _wc = self.lock_working_copy()?;
        let _lock = self.store.gc_lock()?;
        std::fs::rename(&self.dot, to).io("moving the store to", to)?;
        if let Some(parent) = to.parent() {
            lifeos_store::fsutil::sync_dir(parent)?;
        }
        if let Some(parent) = self.dot.parent() {
            lifeos_store::fsutil::sync_dir(parent)?;
        }
        let workdir = self.workdir.clone();
        let interrupt = self.interrupt.clone();
        let ext = self.ext.clone();
        drop((_lock, _wc));
        drop(self);
        let mut repo = Self::open_at(&workdir, to.to_path_buf())?;
        repo.interrupt = interrupt;
        repo.ext = ext;
        Ok(repo)
    }

    /// Installs a hook every commit this repository records runs (after those installed
    /// before it): see [`CommitHook`].
    pub fn add_commit_hook(&mut self, hook: std::sync::Arc<dyn CommitHook>) {
        self.ext.commit_hooks.push(hook);
    }

    /// The installed commit hooks, in the order they run.
    pub(crate) fn commit_hooks(&self) -> impl Iterator<Item = &dyn CommitHook> {
        self.ext.commit_hooks.iter().map(|h| &**h)
    }

    /// Installs the operation index lookups go through (a walk of the objects until
    /// then): see [`OpIndex`].
    pub fn set_op_index(&mut self, index: std::sync::Arc<dyn OpIndex>) {
        self.ext.op_index = index;
    }

    /// The operation index.
    pub fn op_index(&self) -> &dyn OpIndex {
        &*self.ext.op_index
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A shared handle on the store, for readers that outlive a borrow (streamed media).
    pub fn store_arc(&self) -> std::sync::Arc<Store> {
        self.store.clone()
    }

    /// Reads and decodes an object of the given kind.
    pub fn read_decoded<T>(
        &self,
        id: &Id,
        kind: Kind,
        decode: fn(&[u8]) -> std::result::Result<T, lifeos_store::codec::DecodeError>,
    ) -> Result<T> {
        decoded(&self.store.read_object(id, kind)?, id, kind, decode)
    }

    /// Reads a commit.
    pub fn commit(&self, id: &Id) -> Result<Commit> {
        self.read_decoded(id, Kind::Commit, Commit::decode)
    }

    /// Reads a tree.
    pub fn tree(&self, id: &Id) -> Result<Tree> {
        self.read_decoded(id, Kind::Tree, Tree::decode)
    }

    /// Reads a git annotated tag.
    pub fn git_tag(&self, id: &Id) -> Result<crate::object::GitTag> {
        self.read_decoded(id, Kind::GitTag, crate::object::GitTag::decode)
    }

    /// Reads a view.
    pub fn view(&self, id: &Id) -> Result<View> {
        self.read_decoded(id, Kind::View, View::decode)
    }

    /// Reads an operation.
    pub fn operation(&self, id: &Id) -> Result<Operation> {
        self.read_decoded(id, Kind::Operation, Operation::decode)
    }

    /// Loads an operation and its view.
    pub fn op_state(&self, id: &Id) -> Result<OpState> {
        let op = self.operation(id)?;
        let view = self.view(&op.view)?;
        Ok(OpState { id: *id, op, view })
    }

    /// The current operation heads (normally one).
    pub fn op_heads(&self) -> Result<Vec<Id>> {
        let dir = self.dot.join(OP_HEADS_DIR);
        let mut heads = Vec::new();
        for e in std::fs::read_dir(&dir).io("listing", &dir)? {
            let e = e.io("listing", &dir)?;
            if let Some(id) = e.file_name().to_str().and_then(Id::from_hex) {
                heads.push(id);
            }
        }
        heads.sort();
        Ok(heads)
    }

    /// The current operation. Several heads (left by concurrent writers) are merged into
    /// one new operation first, so no operation is ever lost.
    pub fn head(&self) -> Result<OpState> {
        loop {
            let heads = self.op_heads()?;
            match heads.len() {
                0 => {
                    return Err(VcsError::Inconsistent(format!(
                        "{} has no operation heads",
                        self.dot.join(OP_HEADS_DIR).display()
                    )))
                }
                1 => return self.op_state(&heads[0]),
                _ => {
                    if !self.prune_ancestor_heads(&heads)? {
                        // At most 64 at a time (the ancestor search tracks heads in a u64);
                        // the loop merges the rest, and then the merges.
                        self.merge_heads(&heads[..heads.len().min(MAX_MERGED_HEADS)])?;
                    }
                }
            }
        }
    }

    /// Removes heads that are ancestors of another head (left when a process stopped
    /// between adding its new head and removing the old one). Returns whether any was.
    fn prune_ancestor_heads(&self, heads: &[Id]) -> Result<bool> {
        let set: std::collections::HashSet<Id> = heads.iter().copied().collect();
        let mut redundant = std::collections::HashSet::new();
        // No head ended before the oldest head's end.
        let mut oldest = i64::MAX;
        for h in heads {
            oldest = oldest.min(self.operation(h)?.end_ms);
        }
        for h in heads {
            // The ancestors within a short distance, and those that ended no earlier than
            // the oldest head (a publish interrupted after a series of operations in one
            // transaction left its first parent's head far below); true divergence is
            // merged instead.
            let mut frontier = vec![(*h, 0usize)];
            let mut seen = std::collections::HashSet::new();
            while let Some((op, depth)) = frontier.pop() {
                if !seen.insert(op) {
                    continue;
                }
                let op = self.operation(&op)?;
                if depth >= 64 && op.end_ms < oldest {
                    continue;
                }
                for p in op.parents {
                    if set.contains(&p) {
                        redundant.insert(p);
                    }
                    frontier.push((p, depth + 1));
                }
            }
        }
        let dir = self.dot.join(OP_HEADS_DIR);
        for r in &redundant {
            match std::fs::remove_file(dir.join(r.to_hex())) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).io("removing", dir.join(r.to_hex())),
            }
        }
        Ok(!redundant.is_empty())
    }

    /// Writes one operation that has every head as a parent. Its view merges the heads'
    /// views against their common ancestor's (see [`merge_views`]).
    ///
    /// The operation depends only on the heads and the acting user: its times are one
    /// millisecond after the latest end time among the heads (after, so that a time at
    /// or past it reads the merge, not one of its parents). Processes that find the same heads at once (every
    /// command reads the current operation) then write the same operation and leave one
    /// head; with the clock in it, each would write its own merge, the next reads would
    /// find those as heads and merge them again, over and over while they overlap.
    fn merge_heads(&self, heads: &[Id]) -> Result<Id> {
        let mut tx = self.store.transaction()?;
        let view = self.merged_view(heads, &mut tx)?;
        let mut latest = i64::MIN;
        for h in heads {
            latest = latest.max(self.operation(h)?.end_ms);
        }
        let at = latest.saturating_add(1);
        let op = self.operation_record(
            heads,
            &mut tx,
            view,
            "merge concurrent operations",
            vec![Event::OperationsMerged],
            (at, at),
        )?;
        self.publish_operation(tx, op, heads, |_| Ok(()))
    }

    /// The view of concurrent operations `ops` merged: see [`merge_views`]; their entity
    /// roots are merged key by key (writing the merged map into `tx`, whose operation
    /// must then be published).
    pub fn merged_view(&self, ops: &[Id], tx: &mut Transaction<'_>) -> Result<View> {
        let mut states: Vec<OpState> = ops
            .iter()
            .map(|h| self.op_state(h))
            .collect::<Result<_>>()?;
        states.sort_by_key(|s| (s.op.end_ms, s.id));
        let base = match self.common_ancestor_op(ops)? {
            Some(b) => self.op_state(&b)?.view,
            None => View::default(),
        };
        let sides: Vec<&View> = states.iter().map(|s| &s.view).collect();
        let mut view = merge_views(&base, &sides);
        let roots: Vec<Option<Id>> = sides.iter().map(|s| s.entities).collect();
        view.entities = crate::object::entity::merge_roots(tx, base.entities, &roots)?;
        let roots: Vec<Option<Id>> = sides.iter().map(|s| s.actions).collect();
        view.actions = crate::object::action::merge_roots(tx, base.actions, &roots)?;
        Ok(view)
    }

    /// The nearest operation that every one of `ops` (at most 64) descends from, or is.
    /// Each operation visited carries the set of `ops` that reach it; when that set grows,
    /// the operation is visited again, so the answer does not depend on the operations'
    /// clocks. The walk goes newest first and stops when everything left to visit is
    /// reached by all; of the operations reached by all, one with no child reached by all
    /// is the answer (the newest, if several).
    fn common_ancestor_op(&self, ops: &[Id]) -> Result<Option<Id>> {
        use std::collections::{BinaryHeap, HashMap};
        if ops.is_empty() || ops.len() > MAX_MERGED_HEADS {
            return Err(VcsError::Inconsistent(format!(
                "{} operation heads passed to a merge (1 to {MAX_MERGED_HEADS})",
                ops.len()
            )));
        }
        let full: u64 = u64::MAX >> (64 - ops.len());
        let mut reach: HashMap<Id, u64> = HashMap::new();
        let mut end: HashMap<Id, i64> = HashMap::new();
        let mut parents: HashMap<Id, Vec<Id>> = HashMap::new();
        let mut queue = BinaryHeap::new();
        let load = |id: Id,
                    end: &mut HashMap<Id, i64>,
                    parents: &mut HashMap<Id, Vec<Id>>|
         -> Result<i64> {
            if let Some(t) = end.get(&id) {
                return Ok(*t);
            }
            let op = self.operation(&id)?;
            end.insert(id, op.end_ms);
            parents.insert(id, op.parents);
            Ok(op.end_ms)
        };
        for (i, op) in ops.iter().enumerate() {
            *reach.entry(*op).or_default() |= 1 << i;
            queue.push((load(*op, &mut end, &mut parents)?, *op));
        }
        while let Some((_, id)) = queue.pop() {
            let mask = reach[&id];
            if mask == full && queue.iter().all(|(_, q)| reach[q] == full) {
                break;
            }
            for p in parents[&id].clone() {
                let before = reach.get(&p).copied().unwrap_or(0);
                if before | mask != before {
                    reach.insert(p, before | mask);
                    queue.push((load(p, &mut end, &mut parents)?, p));
                }
            }
        }
        let common: Vec<Id> = reach
            .iter()
            .filter(|(_, m)| **m == full)
            .map(|(id, _)| *id)
            .collect();
        let has_common_child = |id: &Id| {
            parents
                .iter()
                .any(|(child, ps)| reach.get(child) == Some(&full) && ps.contains(id))
        };
        Ok(common
            .iter()
            .filter(|id| !has_common_child(id))
            .max_by_key(|id| (end.get(*id).copied().unwrap_or(i64::MIN), **id))
            .copied())
    }

    /// Records an operation: writes the view and the operation into `tx`, commits the
    /// transaction (making every object durable), then atomically adds the new op head and
    /// removes the heads it supersedes. Returns the operation id.
    pub fn publish(
        &self,
        mut tx: Transaction<'_>,
        parents: &[Id],
        view: View,
        description: &str,
        events: Vec<Event>,
        start_ms: i64,
    ) -> Result<Id> {
        let op = self.operation_record(
            parents,
            &mut tx,
            view,
            description,
            events,
            op_times(start_ms),
        )?;
        self.publish_operation(tx, op, parents, |_| Ok(()))
    }

    /// Writes `view` into `tx` and returns the operation (by the acting user) that
    /// records it, with its (start, end) times.
    pub(crate) fn operation_record(
        &self,
        parents: &[Id],
        tx: &mut Transaction<'_>,
        mut view: View,
        description: &str,
        events: Vec<Event>,
        (start_ms, end_ms): (i64, i64),
    ) -> Result<Operation> {
        view.heads.sort();
        view.heads.dedup();
        let view_id = tx.write_object(Kind::View, &view.encode())?;
        let events = if events.len() <= crate::object::INLINE_EVENTS {
            OpEvents::Inline(events)
        } else {
            let pages = events
                .chunks(crate::object::EVENTS_PER_PAGE)
                .map(|page| {
                    let raw = crate::object::encode_event_page(page);
                    Ok(tx.write_grouped(Kind::EventPage, &raw)?.0)
                })
                .collect::<Result<Vec<Id>>>()?;
            OpEvents::Paged {
                count: events.len() as u64,
                pages,
            }
        };
        Ok(Operation {
            parents: parents.to_vec(),
            view: view_id,
            start_ms,
            end_ms,
            tz_offset_min: self.actor.tz_offset_min,
            user: self.actor.name.clone(),
            host: self.actor.host.clone(),
            description: description.to_string(),
            events,
        })
    }

    /// Writes `op` into `tx`, commits it, runs `before_head`, then makes the operation
    /// the head in place of the heads `replaces` (its parents, or the operation a series
    /// of new operations in `tx` starts from). `before_head` runs with the operation's id
    /// once its objects are durable and before it becomes a head (the folder move journal
    /// is written there); an error from it publishes nothing.
    pub(crate) fn publish_operation(
        &self,
        mut tx: Transaction<'_>,
        op: Operation,
        replaces: &[Id],
        before_head: impl FnOnce(&Id) -> Result<()>,
    ) -> Result<Id> {
        let op_id = tx.write_object(Kind::Operation, &op.encode())?;
        // The committed transaction keeps the repository lock until the op head exists:
        // until then nothing refers to its objects, and a `gc` would remove them.
        let committed = tx.commit()?;
        before_head(&op_id)?;
        let heads_dir = self.dot.join(OP_HEADS_DIR);
        let head = heads_dir.join(op_id.to_hex());
        std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&head)
            .and_then(|f| f.sync_all())
            .io("creating", &head)?;
        lifeos_store::fsutil::sync_dir(&heads_dir)?;
        drop(committed);
        for p in replaces {
            match std::fs::remove_file(heads_dir.join(p.to_hex())) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).io("removing", heads_dir.join(p.to_hex())),
            }
        }
        lifeos_store::fsutil::sync_dir(&heads_dir)?;
        // The operation is published; maintenance only tidies the index, and a failure
        // there must not make a recorded commit look failed. The next writer retries it.
        let _ = self.store.maintain();
        Ok(op_id)
    }

    /// The events of operation `op`: its own, or read from its event pages.
    pub fn events<'a>(&self, op: &'a Operation) -> Result<std::borrow::Cow<'a, [Event]>> {
        self.first_events(op, usize::MAX)
    }

    /// The first `n` events of operation `op` (or all, if it has fewer), reading only
    /// the event pages that hold them.
    pub fn first_events<'a>(
        &self,
        op: &'a Operation,
        n: usize,
    ) -> Result<std::borrow::Cow<'a, [Event]>> {
        match &op.events {
            OpEvents::Inline(events) => {
                Ok(std::borrow::Cow::Borrowed(&events[..n.min(events.len())]))
            }
            OpEvents::Paged { count, pages } => {
                let mut events = Vec::with_capacity(n.min(*count as usize));
                for page in pages {
                    if events.len() >= n {
                        break;
                    }
                    events.extend(self.read_decoded(
                        page,
                        Kind::EventPage,
                        crate::object::decode_event_page,
                    )?);
                }
                events.truncate(n);
                Ok(std::borrow::Cow::Owned(events))
            }
        }
    }

    /// A new commit signature for the acting user at `time_ms`.
    pub fn signature(&self, time_ms: i64) -> Signature {
        Signature {
            name: self.actor.name.clone(),
            email: self.actor.email.clone(),
            time: time_ms.div_euclid(1000),
            tz_offset_min: self.actor.tz_offset_min,
        }
    }

    /// Walks a path (components separated by `/`) down from tree `root`.
    pub fn lookup_path(&self, root: &Id, path: &[u8]) -> Result<Option<crate::object::TreeEntry>> {
        walk_path(root, path, |id| self.tree(id))
    }

    /// The file at `path` (cleaned first) in the tree of `commit`, which `rev` names in
    /// errors: its cleaned path and its entry. A path that is not there, a folder and a
    /// submodule are errors ([`VcsError::PathNotFound`], [`VcsError::NotAFile`]).
    pub fn file_at(
        &self,
        commit: &Commit,
        path: &[u8],
        rev: &str,
    ) -> Result<(BString, crate::object::TreeEntry)> {
        let clean = crate::path::clean(path)?;
        let shown = || crate::path::display(&clean).into_owned();
        let entry =
            self.lookup_path(&commit.tree, &clean)?
                .ok_or_else(|| VcsError::PathNotFound {
                    path: shown(),
                    rev: rev.into(),
                })?;
        let found = match entry.kind {
            EntryKind::Dir => "directory",
            EntryKind::Gitlink => "submodule (a commit of another repository)",
            _ => return Ok((clean, entry)),
        };
        Err(VcsError::NotAFile {
            path: shown(),
            found,
            expected: "file",
        })
    }
}

/// Walks a path (components separated by `/`) down from tree `root`, reading each tree
/// with `tree`: the entry it names, or `None` if a component is missing or not a folder.
pub(crate) fn walk_path(
    root: &Id,
    path: &[u8],
    mut tree: impl FnMut(&Id) -> Result<Tree>,
) -> Result<Option<crate::object::TreeEntry>> {
    let comps = crate::path::split(path)?;
    let mut t = tree(root)?;
    for (i, c) in comps.iter().enumerate() {
        let Some(e) = t.get(c).cloned() else {
            return Ok(None);
        };
        if i + 1 == comps.len() {
            return Ok(Some(e));
        }
        if e.kind != crate::object::EntryKind::Dir {
            return Ok(None);
        }
        t = tree(&e.id)?;
    }
    Ok(None)
}

/// Merges the views of concurrent operations, given oldest first, against `base`, the
/// view of their nearest common ancestor. Each branch, tag, the current branch and the
/// working-copy commit take the value of the newest side that changed them (so a change
/// made on one side only is kept, and when sides disagree the newest wins); every commit
/// any side names stays visible as a head, so no side's work is hidden.
pub fn merge_views(base: &View, sides: &[&View]) -> View {
    fn newest_change<T: PartialEq + Clone>(
        base: T,
        sides: impl DoubleEndedIterator<Item = T>,
    ) -> T {
        sides.rev().find(|v| *v != base).unwrap_or(base)
    }
    // Where the folder is (the current branch and the working-copy commit) is one fact:
    // taken whole from the newest side that changed it, never half from each side.
    let (current_branch, wc_commit) = newest_change(
        (base.current_branch.clone(), base.wc_commit),
        sides
            .iter()
            .map(|s| (s.current_branch.clone(), s.wc_commit)),
    );
    let mut view = View {
        current_branch,
        wc_commit,
        ..View::default()
    };
    // Branches, then tags: every name any view has, merged one by one.
    type Refs = fn(&View) -> &Vec<(String, Id)>;
    type SetRef = fn(&mut View, &str, Option<Id>);
    let kinds: [(Refs, SetRef); 2] = [
        (|v| &v.branches, View::set_branch),
        (|v| &v.tags, View::set_tag),
    ];
    for (refs, set) in kinds {
        let target =
            |v: &View, name: &str| refs(v).iter().find(|(n, _)| n == name).map(|(_, id)| *id);
        let mut names: Vec<&String> = std::iter::once(base)
            .chain(sides.iter().copied())
            .flat_map(|v| refs(v).iter().map(|(n, _)| n))
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            let merged = newest_change(target(base, name), sides.iter().map(|s| target(s, name)));
            set(&mut view, name, merged);
        }
    }
    // Git refs the same way, the target and the commit it peels to being one value.
    let mut names: Vec<&String> = std::iter::once(base)
        .chain(sides.iter().copied())
        .flat_map(|v| v.git_refs.iter().map(|g| &g.name))
        .collect();
    names.sort();
    names.dedup();
    let git_target = |v: &View, name: &str| v.git_ref(name).map(|g| (g.target, g.commit));
    for name in names {
        let merged = newest_change(
            git_target(base, name),
            sides.iter().map(|s| git_target(s, name)),
        );
        view.set_git_ref(name, merged);
    }
    // The current branch exists: if another side deleted it, it keeps the target it has
    // on a side where it is current.
    if let Some(b) = view.current_branch.clone() {
        if view.branch(&b).is_none() {
            let target = sides
                .iter()
                .rev()
                .filter(|s| s.current_branch.as_deref() == Some(b.as_str()))
                .find_map(|s| s.branch(&b))
                .or(view.wc_commit);
            view.set_branch(&b, target);
        }
    }
    for s in sides {
        view.heads.extend(s.heads.iter().copied());
        view.heads.extend(s.branches.iter().map(|(_, id)| *id));
        view.heads.extend(s.wc_commit);
    }
    view.heads.sort();
    view.heads.dedup();
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::hash(s.as_bytes())
    }

    fn view(branch: Option<&str>, wc: Option<Id>, branches: &[(&str, Id)]) -> View {
        let mut v = View {
            current_branch: branch.map(String::from),
            wc_commit: wc,
            ..View::default()
        };
        for (n, t) in branches {
            v.set_branch(n, Some(*t));
        }
        v
    }

    #[test]
    fn each_side_keeps_what_it_changed_and_the_newest_wins_a_conflict() {
        let base = view(
            Some("main"),
            Some(id("m")),
            &[("main", id("m")), ("b", id("b"))],
        );
        // The older side moves b; the newer side moves main.
        let older = view(
            Some("main"),
            Some(id("m")),
            &[("main", id("m")), ("b", id("b2"))],
        );
        let newer = view(
            Some("main"),
            Some(id("m2")),
            &[("main", id("m2")), ("b", id("b"))],
        );
        let v = merge_views(&base, &[&older, &newer]);
        assert_eq!(v.branch("b"), Some(id("b2")));
        assert_eq!(v.branch("main"), Some(id("m2")));
        // Both changed b differently: the newer wins, the older stays visible.
        let newer_b = view(
            Some("main"),
            Some(id("m")),
            &[("main", id("m")), ("b", id("b3"))],
        );
        let v = merge_views(&base, &[&older, &newer_b]);
        assert_eq!(v.branch("b"), Some(id("b3")));
        assert!(v.heads.contains(&id("b2")));
    }

    /// The current branch and the working-copy commit were merged separately, giving a
    /// pair no side had (detached from one side, the other side's commit).
    #[test]
    fn where_the_folder_is_comes_whole_from_one_side() {
        let base = view(Some("main"), Some(id("w")), &[("main", id("w"))]);
        let detached = view(None, Some(id("x")), &[("main", id("w"))]);
        let described = view(Some("main"), Some(id("w2")), &[("main", id("w2"))]);
        let v = merge_views(&base, &[&detached, &described]);
        assert_eq!(
            (v.current_branch.as_deref(), v.wc_commit),
            (Some("main"), Some(id("w2")))
        );
        let v = merge_views(&base, &[&described, &detached]);
        assert_eq!((v.current_branch, v.wc_commit), (None, Some(id("x"))));
        assert!(v.heads.contains(&id("w2")));
    }

    /// One side deleted branch b while the other checked it out: b stays, so `@` exists.
    #[test]
    fn the_current_branch_is_never_left_without_a_target() {
        let base = view(
            Some("main"),
            Some(id("m")),
            &[("main", id("m")), ("b", id("b"))],
        );
        let checked_out = view(
            Some("b"),
            Some(id("b")),
            &[("main", id("m")), ("b", id("b"))],
        );
        let deleted = view(Some("main"), Some(id("m")), &[("main", id("m"))]);
        let v = merge_views(&base, &[&checked_out, &deleted]);
        assert_eq!(v.current_branch.as_deref(), Some("b"));
        assert_eq!(v.branch("b"), Some(id("b")));
    }

    /// Found as 113 "merge concurrent operations" among 126 operations after six
    /// `entity set` commands run at once: each process merged the heads it found into an
    /// operation stamped with its own clock, so the merges were new heads for the others
    /// to merge again. Two processes merging the same heads now write the same operation.
    #[test]
    fn two_processes_merging_the_same_heads_leave_one_head() {
        let dir = tempfile::tempdir().unwrap();
        let first = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        let second = Repo::discover(dir.path()).unwrap();
        let parent = first.head().unwrap();
        for name in ["left", "right"] {
            let mut v = parent.view.clone();
            v.set_branch(name, Some(id(name)));
            let tx = first.store().transaction().unwrap();
            first
                .publish(tx, &[parent.id], v, name, vec![], now_ms())
                .unwrap();
        }
        let heads = first.op_heads().unwrap();
        assert_eq!(heads.len(), 2);
        let merged = first.merge_heads(&heads).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(second.merge_heads(&heads).unwrap(), merged);
        assert_eq!(second.op_heads().unwrap(), [merged]);
        // Later than both heads, so time travel to its time reads the merge.
        let end = |op: &Id| second.operation(op).unwrap().end_ms;
        assert!(heads.iter().all(|h| end(h) < end(&merged)));
        let view = second.head().unwrap().view;
        assert_eq!(view.branch("left"), Some(id("left")));
        assert_eq!(view.branch("right"), Some(id("right")));
    }

    /// An operation with more events than it holds in itself names pages that give them
    /// back in order; `first_events` reads only the pages it needs.
    #[test]
    fn many_events_go_to_pages_and_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        let head = repo.head().unwrap();
        let n = crate::object::EVENTS_PER_PAGE + 7;
        let events: Vec<Event> = (0..n)
            .map(|i| Event::CommitCreated {
                commit: id(&i.to_string()),
            })
            .collect();
        let tx = repo.store().transaction().unwrap();
        let op = repo
            .publish(
                tx,
                &[head.id],
                head.view.clone(),
                "many",
                events.clone(),
                now_ms(),
            )
            .unwrap();
        let read = repo.operation(&op).unwrap();
        let OpEvents::Paged { count, pages } = &read.events else {
            panic!("{n} events were kept in the operation itself");
        };
        assert_eq!((*count, pages.len()), (n as u64, 2));
        assert_eq!(repo.events(&read).unwrap().as_ref(), &events[..]);
        assert_eq!(repo.first_events(&read, 3).unwrap().as_ref(), &events[..3]);
        // Up to INLINE_EVENTS, they stay in the operation.
        let few = events[..crate::object::INLINE_EVENTS].to_vec();
        let tx = repo.store().transaction().unwrap();
        let op = repo
            .publish(tx, &[op], head.view, "few", few.clone(), now_ms())
            .unwrap();
        assert_eq!(repo.operation(&op).unwrap().events, OpEvents::Inline(few));
    }

    /// `file_at` finds a file by a path given in any clean-able spelling and names what
    /// is wrong otherwise: a missing path with the revision, a folder, a submodule.
    #[test]
    fn file_at_returns_a_file_and_refuses_a_folder_a_submodule_and_a_missing_path() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        let files: &[(&[u8], EntryKind, &[u8])] = &[
            (b"notes/plan.md", EntryKind::File, b"# Plan\n"),
            (b"run.sh", EntryKind::Executable, b"#!/bin/sh\n"),
            (b"vendor/lib", EntryKind::Gitlink, &[7; 20]),
        ];
        let c = crate::testing::commit_entries(&repo, "main", files, "files");
        let commit = repo.commit(&c).unwrap();
        let (path, entry) = repo.file_at(&commit, b"./notes//plan.md", "main").unwrap();
        assert_eq!(
            (path.as_slice(), entry.kind),
            (&b"notes/plan.md"[..], EntryKind::File)
        );
        assert_eq!(
            repo.file_at(&commit, b"run.sh", "main").unwrap().1.kind,
            EntryKind::Executable
        );
        for (path, want) in [
            (&b"notes"[..], "notes is a directory, not a file"),
            (
                b"vendor/lib",
                "vendor/lib is a submodule (a commit of another repository), not a file",
            ),
            (b"notes/gone.md", "notes/gone.md does not exist in main"),
        ] {
            let e = repo.file_at(&commit, path, "main").unwrap_err();
            assert_eq!(e.to_string(), want);
        }
    }
}
