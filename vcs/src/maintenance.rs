//! Whole-repository checks and maintenance: fsck, gc and stats, walking everything the
//! operation log can reach.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use lifeos_store::fsck::Problem;
use lifeos_store::gc::GcReport;
use lifeos_store::live::PrefixSet;
use lifeos_store::{Id, StoreStats};

use crate::error::{Result, VcsError};
use crate::object::EntryKind;
use crate::repo::Repo;

/// What `fsck` found.
#[derive(Debug, Default)]
pub struct FsckReport {
    /// Packs checked.
    pub packs: u64,
    /// Pack entries verified.
    pub entries: u64,
    /// Bytes verified.
    pub bytes: u64,
    /// Operations reachable.
    pub operations: u64,
    /// Commits reachable.
    pub commits: u64,
    /// Trees reachable.
    pub trees: u64,
    /// Files reachable.
    pub files: u64,
    /// Stored entries nothing reachable refers to (left by interrupted writers or
    /// rewrites; `gc` removes them).
    pub unreachable: u64,
    /// Problems; empty means the repository is healthy.
    pub problems: Vec<Problem>,
}

/// Where a walk of the operation log puts the ids it reaches: a [`HashSet`] when each id
/// is needed (what a push sends), a [`PrefixSet`] when only whether an id is kept is
/// asked (gc, at 8 bytes an id; see [`lifeos_store::live`]).
pub trait Reached: Default {
    /// Adds `id` (again, possibly).
    fn add(&mut self, id: Id);
}

impl Reached for HashSet<Id> {
    fn add(&mut self, id: Id) {
        self.insert(id);
    }
}

impl Reached for PrefixSet {
    fn add(&mut self, id: Id) {
        self.insert(&id);
    }
}

/// A node of a Merkle map met in a walk: true (descend into it) the first time, when it
/// is added to `ids`.
fn first_visit<S: Reached>(walked: &mut HashSet<Id>, ids: &mut S, n: &Id) -> bool {
    let new = walked.insert(*n);
    if new {
        ids.add(*n);
    }
    new
}

/// Everything reachable from the operation log.
#[derive(Debug, Default)]
pub struct Reachable<S = HashSet<Id>> {
    /// Operations.
    pub ops: Vec<Id>,
    /// Every reachable id (operations, views, commits, trees, files, chunks).
    pub ids: S,
    /// Commits.
    pub commits: u64,
    /// Trees.
    pub trees: u64,
    /// Distinct file contents, with their sizes.
    pub files: HashMap<Id, u64>,
    /// Tree entries lifeos never writes into a folder (code [`RESERVED_NAME`]): not
    /// damage, so not among the walk's problems; `fsck` reports them.
    pub reserved: Vec<Problem>,
    /// Chunks found missing, so that each is reported once.
    missing_chunks: HashSet<Id>,
}

fn problem(code: &'static str, object: Id, detail: String) -> Problem {
    Problem {
        code,
        object: Some(object),
        pack: None,
        file: None,
        detail,
    }
}

fn store_problem(e: &crate::VcsError, id: Id, context: &str) -> Problem {
    let pack = match e {
        crate::VcsError::Store(lifeos_store::StoreError::Corrupt { pack, .. }) => {
            Some(pack.clone())
        }
        crate::VcsError::Store(lifeos_store::StoreError::PackMissing { pack, .. }) => {
            Some(pack.clone())
        }
        _ => None,
    };
    let code = match e {
        crate::VcsError::Store(lifeos_store::StoreError::Missing(_)) => "missing-object",
        crate::VcsError::Store(lifeos_store::StoreError::PackMissing { .. }) => "missing-pack",
        crate::VcsError::Store(lifeos_store::StoreError::Corrupt { .. }) => "corrupt-object",
        _ => "bad-object",
    };
    Problem {
        code,
        object: Some(id),
        pack,
        file: None,
        detail: format!("{context}: {e}"),
    }
}

/// The problem code of a tree entry named as a repository's own folder (`.git`,
/// `.lifeos`) or a symlinked `.gitmodules`: kept in history (it is data), never written
/// into a folder ([`crate::guard`]).
pub const RESERVED_NAME: &str = "reserved-name";

impl Repo {
    /// Walks the operation log and everything it reaches. With `chunks`, also reads file
    /// manifests to include chunk ids. Problems are collected instead of stopping the walk.
    pub fn reachable<S: Reached>(
        &self,
        chunks: bool,
        problems: &mut Vec<Problem>,
    ) -> Result<Reachable<S>> {
        self.reachable_from(self.op_heads()?, chunks, problems)
    }

    /// Like [`Repo::reachable`], from the operations `ops` instead of the heads.
    ///
    /// Whether an object was already walked is asked of `walked` (operations, views,
    /// commits, trees, tag objects, the nodes of entity and action maps) and of
    /// `Reachable::files`, both exact; `Reachable::ids` only receives ids, so it may be a
    /// set that answers for ids it never held.
    pub fn reachable_from<S: Reached>(
        &self,
        ops: Vec<Id>,
        chunks: bool,
        problems: &mut Vec<Problem>,
    ) -> Result<Reachable<S>> {
        self.reachable_from_until(ops, chunks, problems, &AtomicBool::new(false))
    }

    /// Like [`Repo::reachable_from`], ending with [`VcsError::Stopped`] soon after `stop`
    /// is set: a command that walks while it does something else (a push, while it opens
    /// its remote) stops the walk when that fails, instead of waiting for it.
    pub fn reachable_from_until<S: Reached>(
        &self,
        ops: Vec<Id>,
        chunks: bool,
        problems: &mut Vec<Problem>,
        stop: &AtomicBool,
    ) -> Result<Reachable<S>> {
        let go_on = || {
            if stop.load(Ordering::Relaxed) {
                Err(VcsError::Stopped)
            } else {
                Ok(())
            }
        };
        let mut r = Reachable::<S>::default();
        let mut walked: HashSet<Id> = HashSet::new();
        let mut ops = ops;
        let mut commits = Vec::new();
        let mut stored = Vec::new();
        while let Some(op_id) = ops.pop() {
            go_on()?;
            if !walked.insert(op_id) {
                continue;
            }
            r.ids.add(op_id);
            r.ops.push(op_id);
            let op = match self.operation(&op_id) {
                Ok(op) => op,
                Err(e) => {
                    problems.push(store_problem(&e, op_id, "operation"));
                    continue;
                }
            };
            ops.extend(op.parents.iter().copied());
            if let crate::object::OpEvents::Paged { pages, .. } = &op.events {
                pages.iter().for_each(|p| r.ids.add(*p));
            }
            let events = match self.events(&op) {
                Ok(events) => events,
                Err(e) => {
                    problems.push(store_problem(&e, op_id, "operation's event pages"));
                    std::borrow::Cow::Borrowed(&[][..])
                }
            };
            for e in events.iter() {
                if let crate::object::Event::FilesStored { files } = e {
                    stored.extend(
                        files
                            .iter()
                            .map(|f| (*f, format!("file stored by operation {}", op_id.short(12)))),
                    );
                }
                if let crate::object::Event::ActionRecorded { record, .. } = e {
                    r.ids.add(*record);
                    if walked.insert(*record) && !self.store().contains(record)? {
                        problems.push(problem(
                            "missing-object",
                            *record,
                            format!("action record named by operation {}", op_id.short(12)),
                        ));
                    }
                }
                if let crate::object::Event::ContentExtracted { results } = e {
                    for x in results {
                        r.ids.add(*x);
                        if walked.insert(*x) && !self.store().contains(x)? {
                            problems.push(problem(
                                "missing-object",
                                *x,
                                format!("extract named by operation {}", op_id.short(12)),
                            ));
                        }
                    }
                }
            }
            if !walked.insert(op.view) {
                continue;
            }
            r.ids.add(op.view);
            match self.view(&op.view) {
                Ok(v) => {
                    commits.extend(v.referenced_commits());
                    // The action root's nodes (its values, the records, are named by
                    // the operations' events).
                    if let Some(root) = v.actions {
                        let visited = crate::merkle_map::MerkleMap(root).visit(
                            self.store(),
                            &mut |n| first_visit(&mut walked, &mut r.ids, n),
                            &mut |_| {},
                        );
                        if let Err(e) = visited {
                            problems.push(store_problem(
                                &e,
                                root,
                                &format!("action map of operation {}", op_id.short(12)),
                            ));
                        }
                    }
                    if let Some(root) = v.entities {
                        let mut values = Vec::new();
                        let visited = crate::merkle_map::MerkleMap(root).visit(
                            self.store(),
                            &mut |n| first_visit(&mut walked, &mut r.ids, n),
                            &mut |e| values.push(*e),
                        );
                        if let Err(e) = visited {
                            problems.push(store_problem(
                                &e,
                                root,
                                &format!("entity map of operation {}", op_id.short(12)),
                            ));
                        }
                        for e in values {
                            r.ids.add(e);
                            if walked.insert(e) && !self.store().contains(&e)? {
                                problems.push(problem(
                                    "missing-object",
                                    e,
                                    format!("entity named by operation {}", op_id.short(12)),
                                ));
                            }
                        }
                    }
                    // Annotated tags: the tag objects, down the chain to the commit.
                    for g in v.git_refs.iter().filter(|g| g.target != g.commit) {
                        let mut tag = Some(g.target);
                        while let Some(t) = tag.take() {
                            if !walked.insert(t) {
                                break;
                            }
                            r.ids.add(t);
                            match self.git_tag(&t) {
                                Ok(obj) if obj.target_is_tag => tag = Some(obj.target),
                                Ok(_) => {}
                                Err(e) => problems.push(store_problem(
                                    &e,
                                    t,
                                    &format!("tag object of {}", g.name),
                                )),
                            }
                        }
                    }
                }
                Err(e) => problems.push(store_problem(
                    &e,
                    op.view,
                    &format!("view of operation {}", op_id.short(12)),
                )),
            }
        }
        let mut trees = Vec::new();
        while let Some(c) = commits.pop() {
            go_on()?;
            if !walked.insert(c) {
                continue;
            }
            r.ids.add(c);
            match self.commit(&c) {
                Ok(commit) => {
                    r.commits += 1;
                    commits.extend(commit.parents.iter().copied());
                    trees.push((commit.tree, format!("commit {}", c.short(12))));
                }
                Err(e) => problems.push(store_problem(&e, c, "commit")),
            }
        }
        while let Some((t, context)) = trees.pop() {
            go_on()?;
            if !walked.insert(t) {
                continue;
            }
            r.ids.add(t);
            let tree = match self.tree(&t) {
                Ok(tree) => tree,
                Err(e) => {
                    problems.push(store_problem(&e, t, &format!("tree of {context}")));
                    continue;
                }
            };
            r.trees += 1;
            for e in &tree.entries {
                let path = format!("{context}:{}", crate::path::display(&e.name));
                if let Err(why) = crate::guard::check_name(&e.name, e.kind) {
                    r.reserved
                        .push(problem(RESERVED_NAME, t, format!("{path} {why}")));
                }
                match e.kind {
                    EntryKind::Dir => trees.push((e.id, path)),
                    // A submodule's commit lives in its own repository.
                    EntryKind::Gitlink => {}
                    _ => self.reach_file(&mut r, e.id, Some(e.size), &path, chunks, problems)?,
                }
            }
        }
        for (id, context) in stored {
            go_on()?;
            self.reach_file(&mut r, id, None, &context, chunks, problems)?;
        }
        Ok(r)
    }

    /// Adds file `id` to `r` (its manifest and chunks with `chunks`), checking its size
    /// against `size` when a tree gave one. `context` names where it was found.
    fn reach_file<S: Reached>(
        &self,
        r: &mut Reachable<S>,
        id: Id,
        size: Option<u64>,
        context: &str,
        chunks: bool,
        problems: &mut Vec<Problem>,
    ) -> Result<()> {
        if r.files.contains_key(&id) {
            return Ok(());
        }
        r.ids.add(id);
        // A tree gives the size; only chunks need the manifest then.
        if let (false, Some(size)) = (chunks, size) {
            r.files.insert(id, size);
            return Ok(());
        }
        match self.store().file_chunks(&id) {
            Ok(m) => {
                r.files.insert(id, m.size());
                if let Some(size) = size.filter(|s| *s != m.size()) {
                    problems.push(problem(
                        "bad-object",
                        id,
                        format!(
                            "{context}: manifest says {} bytes, tree says {size}",
                            m.size()
                        ),
                    ));
                }
                if chunks {
                    // A lazy clone's chunks are on its remote until they are read.
                    let lazy = self.store().has_source();
                    let mut ids: Vec<Id> = m.chunks.iter().map(|c| c.id).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    // Versions of a file share chunks: each is looked up again for each
                    // manifest naming it (the walk keeps no exact set of chunks).
                    for c in ids {
                        r.ids.add(c);
                        if !lazy && !self.store().contains(&c)? && r.missing_chunks.insert(c) {
                            problems.push(problem(
                                "missing-object",
                                c,
                                format!("chunk of {context} is missing"),
                            ));
                        }
                    }
                }
            }
            Err(err) => {
                r.files.insert(id, size.unwrap_or_default());
                problems.push(store_problem(&err.into(), id, context));
            }
        }
        Ok(())
    }

    /// Checks every pack, chunk and object, then everything reachable from the op log.
    pub fn fsck(&self, progress: &(dyn Fn(u64) + Sync)) -> Result<FsckReport> {
        let packs = self.store().check_packs(progress)?;
        let mut problems = packs.problems;
        let reach = self.reachable::<PrefixSet>(true, &mut problems)?;
        problems.extend(reach.reserved.iter().cloned());
        let reached = reach.ids.freeze().len();
        let stats = self.store().stats()?;
        let stored = stats.chunks + stats.objects;
        problems.sort_by(|a, b| (a.code, a.object, &a.pack).cmp(&(b.code, b.object, &b.pack)));
        problems.dedup();
        Ok(FsckReport {
            packs: packs.packs,
            entries: packs.entries,
            bytes: packs.bytes,
            operations: reach.ops.len() as u64,
            commits: reach.commits,
            trees: reach.trees,
            files: reach.files.len() as u64,
            unreachable: stored.saturating_sub(reached),
            problems,
        })
    }

    /// Removes everything the operation log cannot reach (with `dry_run`, only says what
    /// that would remove and free). Refuses to run if the walk finds problems (removing
    /// data from a damaged repository could lose what is left).
    pub fn gc(
        &self,
        dry_run: bool,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<std::result::Result<GcReport, Vec<Problem>>> {
        let lock = self.store().gc_lock()?;
        self.store().reload_index()?;
        let mut problems = Vec::new();
        let reach = self.reachable::<PrefixSet>(true, &mut problems)?;
        if !problems.is_empty() {
            return Ok(Err(problems));
        }
        let live = reach.ids.freeze();
        Ok(Ok(if dry_run {
            self.store().gc_dry_run(&lock, &live, progress)?
        } else {
            self.store().gc(&lock, &live, progress)?
        }))
    }

    /// Sizes of the current commit, of all history, and of the store.
    pub fn stats(&self) -> Result<RepoStats> {
        let head = self.head()?;
        let mut problems = Vec::new();
        let current = match head
            .view
            .current_branch
            .as_ref()
            .and_then(|b| head.view.branch(b))
            .or(head.view.wc_commit)
        {
            Some(c) => {
                let commit = self.commit(&c)?;
                let tree = self.tree(&commit.tree)?;
                Some((c, tree.total_size()))
            }
            None => None,
        };
        let mut history_bytes = 0u64;
        let mut versions = 0u64;
        let mut seen = HashSet::new();
        let mut stack = head.view.referenced_commits();
        while let Some(c) = stack.pop() {
            if !seen.insert(c) {
                continue;
            }
            let commit = self.commit(&c)?;
            history_bytes = history_bytes.saturating_add(self.tree(&commit.tree)?.total_size());
            versions += 1;
            stack.extend(commit.parents);
        }
        let reach = self.reachable::<PrefixSet>(false, &mut problems)?;
        Ok(RepoStats {
            current_commit: current.map(|c| c.0),
            current_bytes: current.map_or(0, |c| c.1),
            commits: versions,
            history_bytes,
            unique_file_bytes: reach.files.values().sum(),
            unique_files: reach.files.len() as u64,
            operations: reach.ops.len() as u64,
            store: self.store().stats()?,
        })
    }
}

/// Sizes reported by `stats`.
#[derive(Debug, Clone)]
pub struct RepoStats {
    /// The current commit.
    pub current_commit: Option<Id>,
    /// Bytes of the files in it.
    pub current_bytes: u64,
    /// Commits in the visible history.
    pub commits: u64,
    /// Sum over every visible commit of its files' bytes (what storing each version in
    /// full would take).
    pub history_bytes: u64,
    /// Bytes of the distinct file contents in all history.
    pub unique_file_bytes: u64,
    /// Distinct file contents.
    pub unique_files: u64,
    /// Operations in the log.
    pub operations: u64,
    /// Store counts.
    pub store: StoreStats,
}
