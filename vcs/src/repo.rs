//! A repository: the working folder, its `.lifeos` store, and the operation log.

use std::path::{Path, PathBuf};

use lifeos_store::{Id, Kind, Store, StoreConfig, Transaction};

use crate::error::{IoContext, Result, VcsError};
use crate::object::{Commit, Event, Operation, Signature, Tree, View};

/// Name of the repository directory inside the working folder.
pub const DOT_DIR: &str = ".lifeos";
/// Operation heads: one empty file per head, named by the operation id.
pub const OP_HEADS_DIR: &str = "op_heads";
/// The branch a new repository starts on.
pub const DEFAULT_BRANCH: &str = "main";

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
        let user = std::env::var("LIFEOS_AUTHOR_NAME")
            .or_else(|_| std::env::var("USER"))
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(user_from_passwd)
            .unwrap_or_else(|| "unknown".into());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let email =
            std::env::var("LIFEOS_AUTHOR_EMAIL").unwrap_or_else(|_| format!("{user}@{host}"));
        let tz_offset_min = jiff::Zoned::now().offset().seconds() / 60;
        Actor {
            name: user,
            email,
            host,
            tz_offset_min,
        }
    }
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

/// Milliseconds since the Unix epoch, now (or `LIFEOS_NOW`, an RFC 3339 time, for tests
/// that need to place operations in time).
pub fn now_ms() -> i64 {
    if let Ok(s) = std::env::var("LIFEOS_NOW") {
        if let Ok(ts) = s.parse::<jiff::Timestamp>() {
            return ts.as_millisecond();
        }
    }
    jiff::Timestamp::now().as_millisecond()
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
    pub interrupt: crate::folder::Interrupt,
}

impl Repo {
    /// Creates a repository whose working folder is `workdir` (created if missing).
    pub fn init(workdir: &Path, config: StoreConfig) -> Result<Repo> {
        std::fs::create_dir_all(workdir).io("creating", workdir)?;
        let workdir = workdir.canonicalize().io("resolving", workdir)?;
        let dot = workdir.join(DOT_DIR);
        if dot.exists() {
            return Err(VcsError::AlreadyInitialized(workdir));
        }
        std::fs::create_dir(&dot).io("creating", &dot)?;
        let store = std::sync::Arc::new(Store::init(&dot, config)?);
        std::fs::create_dir(dot.join(OP_HEADS_DIR)).io("creating", dot.join(OP_HEADS_DIR))?;
        lifeos_store::store::sync_dir(&dot)?;
        lifeos_store::store::sync_dir(&workdir)?;
        let repo = Repo {
            workdir,
            dot,
            store,
            actor: Actor::from_env(),
            interrupt: crate::folder::Interrupt::default(),
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
    /// that has a `.lifeos` directory.
    pub fn discover(start: &Path) -> Result<Repo> {
        let start = start.canonicalize().io("resolving", start)?;
        let mut dir = start.as_path();
        loop {
            if dir
                .join(DOT_DIR)
                .join(lifeos_store::store::CONFIG_FILE)
                .is_file()
            {
                return Self::open_at(dir);
            }
            match dir.parent() {
                Some(p) => dir = p,
                None => return Err(VcsError::NotARepository(start)),
            }
        }
    }

    fn open_at(workdir: &Path) -> Result<Repo> {
        let dot = workdir.join(DOT_DIR);
        let store = std::sync::Arc::new(Store::open(&dot)?);
        Ok(Repo {
            workdir: workdir.into(),
            dot,
            store,
            actor: Actor::from_env(),
            interrupt: crate::folder::Interrupt::default(),
        })
    }

    /// The working folder.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The `.lifeos` directory.
    pub fn dot_dir(&self) -> &Path {
        &self.dot
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
    fn read_decoded<T>(
        &self,
        id: &Id,
        kind: Kind,
        decode: fn(&[u8]) -> std::result::Result<T, lifeos_store::enc::DecodeError>,
    ) -> Result<T> {
        let raw = self.store.read_object(id, kind)?;
        decode(&raw).map_err(|source| VcsError::Decode {
            kind: kind.name(),
            id: *id,
            source,
        })
    }

    /// Reads a commit.
    pub fn commit(&self, id: &Id) -> Result<Commit> {
        self.read_decoded(id, Kind::Commit, Commit::decode)
    }

    /// Reads a tree.
    pub fn tree(&self, id: &Id) -> Result<Tree> {
        self.read_decoded(id, Kind::Tree, Tree::decode)
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
                        self.merge_heads(&heads)?;
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
        for h in heads {
            // Ancestors within a short distance are enough for the interrupted-publish case;
            // true divergence is merged instead.
            let mut frontier = vec![(*h, 0usize)];
            let mut seen = std::collections::HashSet::new();
            while let Some((op, depth)) = frontier.pop() {
                if depth >= 64 || !seen.insert(op) {
                    continue;
                }
                for p in self.operation(&op)?.parents {
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
    fn merge_heads(&self, heads: &[Id]) -> Result<Id> {
        let start = now_ms();
        let view = self.merged_view(heads)?;
        let tx = self.store.transaction()?;
        self.publish(
            tx,
            heads,
            view,
            "merge concurrent operations",
            vec![Event::OperationsMerged],
            start,
        )
    }

    /// The view of concurrent operations `ops` merged: see [`merge_views`].
    pub(crate) fn merged_view(&self, ops: &[Id]) -> Result<View> {
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
        Ok(merge_views(&base, &sides))
    }

    /// The nearest operation that every one of `ops` descends from (or is). Operations
    /// are visited newest first, each carrying the set of `ops` that reach it; the first
    /// reached by all is the answer.
    fn common_ancestor_op(&self, ops: &[Id]) -> Result<Option<Id>> {
        use std::collections::{BinaryHeap, HashMap};
        if ops.len() > 64 {
            return Err(VcsError::Inconsistent(format!(
                "{} concurrent operation heads; lifeos merges at most 64 at once",
                ops.len()
            )));
        }
        let full: u64 = if ops.len() == 64 {
            u64::MAX
        } else {
            (1u64 << ops.len()) - 1
        };
        let mut reach: HashMap<Id, u64> = HashMap::new();
        let mut queue = BinaryHeap::new();
        for (i, op) in ops.iter().enumerate() {
            *reach.entry(*op).or_default() |= 1 << i;
            queue.push((self.operation(op)?.end_ms, *op));
        }
        let mut done = std::collections::HashSet::new();
        while let Some((_, id)) = queue.pop() {
            if !done.insert(id) {
                continue;
            }
            let mask = reach[&id];
            if mask == full {
                return Ok(Some(id));
            }
            for p in self.operation(&id)?.parents {
                *reach.entry(p).or_default() |= mask;
                queue.push((self.operation(&p)?.end_ms, p));
            }
        }
        Ok(None)
    }

    /// Records an operation: writes the view and the operation into `tx`, commits the
    /// transaction (making every object durable), then atomically adds the new op head and
    /// removes the heads it supersedes. Returns the operation id.
    pub fn publish(
        &self,
        tx: Transaction<'_>,
        parents: &[Id],
        view: View,
        description: &str,
        events: Vec<Event>,
        start_ms: i64,
    ) -> Result<Id> {
        self.publish_with(tx, parents, view, description, events, start_ms, |_| Ok(()))
    }

    /// Like [`Repo::publish`], running `before_head` with the operation's id once its
    /// objects are durable and before it becomes a head (the folder move journal is
    /// written there). An error from it publishes nothing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish_with(
        &self,
        mut tx: Transaction<'_>,
        parents: &[Id],
        view: View,
        description: &str,
        events: Vec<Event>,
        start_ms: i64,
        before_head: impl FnOnce(&Id) -> Result<()>,
    ) -> Result<Id> {
        let mut view = view;
        view.heads.sort();
        view.heads.dedup();
        let view_id = tx.write_object(Kind::View, &view.encode())?;
        let op = Operation {
            parents: parents.to_vec(),
            view: view_id,
            start_ms,
            end_ms: now_ms().max(start_ms),
            tz_offset_min: self.actor.tz_offset_min,
            user: self.actor.name.clone(),
            host: self.actor.host.clone(),
            description: description.to_string(),
            events,
        };
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
        lifeos_store::store::sync_dir(&heads_dir)?;
        drop(committed);
        for p in parents {
            match std::fs::remove_file(heads_dir.join(p.to_hex())) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).io("removing", heads_dir.join(p.to_hex())),
            }
        }
        lifeos_store::store::sync_dir(&heads_dir)?;
        // The operation is published; maintenance only tidies the index, and a failure
        // there must not make a recorded commit look failed. The next writer retries it.
        let _ = self.store.maintain();
        Ok(op_id)
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
    let mut view = View {
        current_branch: newest_change(
            base.current_branch.clone(),
            sides.iter().map(|s| s.current_branch.clone()),
        ),
        wc_commit: newest_change(base.wc_commit, sides.iter().map(|s| s.wc_commit)),
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
    for s in sides {
        view.heads.extend(s.heads.iter().copied());
        view.heads.extend(s.branches.iter().map(|(_, id)| *id));
        view.heads.extend(s.wc_commit);
    }
    view.heads.sort();
    view.heads.dedup();
    view
}
