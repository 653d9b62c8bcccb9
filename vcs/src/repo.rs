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
        let repo = Repo {
            workdir,
            dot,
            store,
            actor: Actor::from_env(),
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

    /// Writes one operation that has every head as a parent. Its view is the newest head's
    /// view with every head's commits kept visible.
    fn merge_heads(&self, heads: &[Id]) -> Result<Id> {
        let start = now_ms();
        let mut states: Vec<OpState> = heads
            .iter()
            .map(|h| self.op_state(h))
            .collect::<Result<_>>()?;
        states.sort_by_key(|s| (s.op.end_ms, s.id));
        let newest = states.last().expect("several heads");
        let mut view = newest.view.clone();
        for s in &states {
            view.heads.extend(s.view.heads.iter().copied());
            for (name, target) in &s.view.branches {
                if view.branch(name).is_none() {
                    view.set_branch(name, Some(*target));
                }
                view.heads.push(*target);
            }
            for (name, target) in &s.view.tags {
                if view.tag(name).is_none() {
                    view.set_tag(name, Some(*target));
                }
            }
        }
        view.heads.sort();
        view.heads.dedup();
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
        tx.commit()?;
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
    pub fn lookup_path(&self, root: &Id, path: &str) -> Result<Option<crate::object::TreeEntry>> {
        walk_path(root, path, |id| self.tree(id))
    }
}

/// Splits a repository path into validated components (empty for the root).
pub fn split_path(path: &str) -> Result<Vec<&str>> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        return Ok(Vec::new());
    }
    trimmed
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(|c| {
            crate::object::valid_name(c.as_bytes()).map_err(|reason| VcsError::BadPath {
                path: path.to_string(),
                reason,
            })?;
            Ok(c)
        })
        .collect()
}

/// Walks a path (components separated by `/`) down from tree `root`, reading each tree
/// with `tree`: the entry it names, or `None` if a component is missing or not a folder.
pub(crate) fn walk_path(
    root: &Id,
    path: &str,
    mut tree: impl FnMut(&Id) -> Result<Tree>,
) -> Result<Option<crate::object::TreeEntry>> {
    let comps = split_path(path)?;
    let mut t = tree(root)?;
    for (i, c) in comps.iter().enumerate() {
        let Some(e) = t.get(c.as_bytes()).cloned() else {
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
