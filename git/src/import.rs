//! `lifeos git import`: every ref of a git repository becomes lifeos history, in one
//! operation.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use gix::ObjectId;
use lifeos_catalog::{Catalog, GitMapRow, GitObject};
use lifeos_store::block::BLOCK_MEMBER_MAX;
use lifeos_store::pack::MAX_DELTA_DEPTH;
use lifeos_store::{Id, Kind, Transaction, Written};
use lifeos_vcs::object::{gitlink_id, Commit, EntryKind, Event, GitTag, Tree, TreeEntry};
use lifeos_vcs::Repo;

use crate::objects::{self, git_hash, GitKind};
use crate::repo::{open_git, sha1_bytes};
use crate::{gix_err, GitError, Result};
use lifeos_catalog::CatalogExt;

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Commits read from git (those the git map already knew are not read again).
    pub commits: u64,
    /// Of those, commits lifeos did not have.
    pub new_commits: u64,
    /// Trees and blobs read.
    pub trees: u64,
    /// Blobs read.
    pub blobs: u64,
    /// Annotated tag objects kept.
    pub tags: u64,
    /// Refs imported.
    pub refs: u64,
    /// Trees kept in their raw git form, because git's canonical form of their entries
    /// would not give their SHA-1 (unsorted, mode `100664`, ...).
    pub raw_trees: u64,
    /// Blobs that were `lifeos` filter pointers to content lifeos keeps: imported as that
    /// content (export writes the pointer back).
    pub pointers: u64,
    /// Objects whose SHA-1, recomputed from what lifeos stored, differs from git's (0 in a
    /// correct import; export would not reproduce them).
    pub mismatches: u64,
    /// Commits at a shallow clone's boundary: imported without their parents, whose ids
    /// they keep so export writes them back unchanged.
    pub shallow_boundary: u64,
    /// Refs left out, with why.
    pub skipped: Vec<(String, String)>,
    /// Refs refused, with the error naming the commit and path: their history holds a
    /// tree lifeos never writes into a folder ([`GitError::Reserved`]). git keeps them;
    /// lifeos has none of their history.
    pub refused: Vec<(String, String)>,
    /// Whether an operation was published (false: nothing changed).
    pub published: bool,
    /// Whether the branch the folder was on moved, so the folder was left at its commit,
    /// off the branch.
    pub folder_detached: bool,
}

/// Reads a git repository's objects into a lifeos transaction, remembering SHA-1s.
struct Importer<'r, 't, 's> {
    git: &'r gix::Repository,
    tx: &'t mut Transaction<'s>,
    /// The git map, consulted before reading a git object.
    map: &'r Catalog,
    /// Rows for the git map, of objects read in this import.
    rows: Vec<GitMapRow>,
    commits: HashMap<ObjectId, Id>,
    trees: HashMap<ObjectId, (Id, u64)>,
    blobs: HashMap<(ObjectId, bool), (Id, u64)>,
    tags: HashMap<ObjectId, Id>,
    /// The commits whose parents a shallow clone does not have.
    shallow: HashSet<ObjectId>,
    /// Contents of the filter pointers read (recorded by the operation, so `reindex`
    /// finds them).
    pointers: Vec<Id>,
    /// Objects this import wrote, with their raw bytes, so the next version of the same
    /// path can be stored as a delta against them.
    bases: DeltaBases,
    report: ImportReport,
}

/// The zstd level of what an import writes (unless the repository asks for more): level 6
/// stored bats-core's history in 5% less than level 3 (24.07 MB against 25.28), for a third more import time.
const IMPORT_ZSTD_LEVEL: i32 = 6;

/// How many bytes of written objects an import keeps at hand as delta bases.
const DELTA_BASES_BUDGET: usize = 256 << 20;

/// Objects written by one import that later versions of the same path can be stored as
/// deltas against: their raw bytes and how many deltas they are from a whole entry.
#[derive(Default)]
struct DeltaBases {
    raw: HashMap<Id, (Vec<u8>, u8)>,
    bytes: usize,
}

impl DeltaBases {
    /// Writes `raw` as a delta against `hint` (the same path's previous version) when the
    /// chain allows; returns its id.
    fn put(
        &mut self,
        tx: &mut Transaction<'_>,
        kind: Kind,
        raw: &[u8],
        hint: Option<Id>,
    ) -> Result<Id> {
        if raw.len() <= BLOCK_MEMBER_MAX {
            // Small objects go into blocks, where zstd finds what they share with the
            // objects written just before them.
            return Ok(tx.write_grouped(kind, raw)?.0);
        }
        let id = Id::hash(raw);
        let base = hint
            .and_then(|h| self.raw.get(&h).map(|(r, depth)| (h, r, *depth)))
            .filter(|(_, _, depth)| *depth < MAX_DELTA_DEPTH);
        let base_id = base.map(|(h, _, _)| h);
        let base_ref = base.and_then(|(_, r, _)| base_id.as_ref().map(|h| (h, r.as_slice())));
        let depth = match tx.write_delta(id, kind, raw, base_ref)? {
            Written::Existing => return Ok(id),
            Written::Whole => 0,
            Written::Delta => base.map_or(0, |(_, _, d)| d + 1),
        };
        if self.bytes + raw.len() > DELTA_BASES_BUDGET {
            self.raw.clear();
            self.bytes = 0;
        }
        self.bytes += raw.len();
        self.raw.insert(id, (raw.to_vec(), depth));
        Ok(id)
    }
}

impl Importer<'_, '_, '_> {
    /// What the git map says `oid` became, if that object is in the store.
    fn known(&self, oid: ObjectId, kind: GitObject) -> Result<Option<(Id, u64)>> {
        let sha1 = sha1_bytes(&oid);
        Ok(match self.map.git_lookup(&sha1, kind)? {
            Some((id, size)) if self.tx.contains(&id)? => Some((id, size)),
            _ => None,
        })
    }

    fn remember(&mut self, oid: ObjectId, kind: GitObject, id: Id, size: u64) {
        // Commits and tags above a shallow boundary get other ids once the clone is
        // deepened, so the map keeps only what a deeper clone gives the same id.
        if self.shallow.is_empty()
            || matches!(
                kind,
                GitObject::Tree | GitObject::Blob | GitObject::Symlink | GitObject::Pointer
            )
        {
            self.rows.push(GitMapRow {
                sha1: sha1_bytes(&oid),
                kind,
                id,
                size,
            });
        }
    }

    /// Whether commit `oid` is already imported (in this run, or by the git map).
    fn have_commit(&mut self, oid: ObjectId) -> Result<bool> {
        if self.commits.contains_key(&oid) {
            return Ok(true);
        }
        if self.shallow.is_empty() {
            if let Some((id, _)) = self.known(oid, GitObject::Commit)? {
                self.commits.insert(oid, id);
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn read(&self, oid: ObjectId, want: GitKind) -> Result<Vec<u8>> {
        let obj = self.git.find_object(oid).map_err(|e| GitError::Object {
            oid: oid.to_string(),
            reason: format!("cannot be read: {e}"),
        })?;
        if obj.kind != want {
            return Err(GitError::Object {
                oid: oid.to_string(),
                reason: format!("is a {}, expected a {}", obj.kind, want),
            });
        }
        if git_hash(obj.kind, &obj.data) != oid {
            return Err(GitError::Object {
                oid: oid.to_string(),
                reason: "is corrupt: its content does not hash to its id".into(),
            });
        }
        Ok(obj.detach().data)
    }

    /// Imports a blob; `hint` is the same path's version in the parent commit (a delta
    /// base).
    fn blob(&mut self, oid: ObjectId, symlink: bool, hint: Option<Id>) -> Result<(Id, u64)> {
        if let Some(v) = self.blobs.get(&(oid, symlink)) {
            return Ok(*v);
        }
        let kind = if symlink {
            GitObject::Symlink
        } else {
            GitObject::Blob
        };
        if let Some(v) = self.known(oid, kind)? {
            self.blobs.insert((oid, symlink), v);
            return Ok(v);
        }
        if !symlink {
            if let Some(v) = self.known(oid, GitObject::Pointer)? {
                self.blobs.insert((oid, symlink), v);
                return Ok(v);
            }
        }
        let data = self.read(oid, GitKind::Blob)?;
        // A pointer git's `lifeos` filter wrote, to content lifeos keeps: the file is that
        // content (as git's checkout made it), and export writes the pointer back.
        if let Some(p) = (!symlink)
            .then(|| crate::pointer::Pointer::parse(&data))
            .flatten()
            .filter(|p| {
                self.tx
                    .store()
                    .file_chunks(&p.id)
                    .is_ok_and(|m| m.size() == p.size)
            })
        {
            self.report.pointers += 1;
            self.pointers.push(p.id);
            let v = (p.id, p.size);
            self.remember(oid, GitObject::Pointer, p.id, p.size);
            self.blobs.insert((oid, symlink), v);
            return Ok(v);
        }
        // A symlink target or a file of one chunk is one entry, which can be a delta
        // against the path's previous version; a larger file is chunked (its chunks
        // deduplicate instead).
        let chunking = self.tx.store().config().chunking;
        let one_chunk = data.len() < chunking.min_size as usize
            || (data.len() <= chunking.max_size as usize
                && lifeos_store::chunker::chunk_lengths(&data, chunking).len() <= 1);
        let id = if symlink || one_chunk {
            self.bases.put(self.tx, Kind::Chunk, &data, hint)?
        } else {
            self.tx.store_bytes(&data)?
        };
        self.report.blobs += 1;
        let v = (id, data.len() as u64);
        self.remember(oid, kind, id, v.1);
        self.blobs.insert((oid, symlink), v);
        Ok(v)
    }

    /// Imports a tree; `hint` is the same path's tree in the parent commit (a delta base,
    /// whose entries are the bases of this tree's entries).
    fn tree(&mut self, oid: ObjectId, hint: Option<Id>) -> Result<(Id, u64)> {
        if let Some(v) = self.trees.get(&oid) {
            return Ok(*v);
        }
        if let Some(v) = self.known(oid, GitObject::Tree)? {
            self.trees.insert(oid, v);
            return Ok(v);
        }
        let data = self.read(oid, GitKind::Tree)?;
        let bad = |reason: String| GitError::Object {
            oid: oid.to_string(),
            reason,
        };
        let parsed = objects::parse_tree(&data).ok_or_else(|| bad("is a malformed tree".into()))?;
        let previous: HashMap<Vec<u8>, Id> = hint
            .and_then(|h| self.tx.read_object(&h, Kind::Tree).ok())
            .and_then(|raw| Tree::decode(&raw).ok())
            .map(|t| t.entries.into_iter().map(|e| (e.name, e.id)).collect())
            .unwrap_or_default();
        let mut entries = Vec::with_capacity(parsed.len());
        let mut canonical = Vec::with_capacity(parsed.len());
        for e in &parsed {
            lifeos_vcs::path::valid_name(e.name)
                .map_err(|r| bad(format!("has an entry lifeos cannot hold: {r}")))?;
            let kind = objects::kind_of_mode(e.mode).ok_or_else(|| {
                bad(format!(
                    "has mode {} (entry {})",
                    String::from_utf8_lossy(e.mode),
                    lifeos_vcs::path::display(e.name)
                ))
            })?;
            lifeos_vcs::guard::check_name(e.name, kind)
                .map_err(|why| GitError::reserved(e.name, why, crate::NOT_IMPORTED))?;
            let hint = previous.get(e.name).copied();
            let (id, size) = match kind {
                EntryKind::Dir => self.tree(e.oid, hint).map_err(|err| err.below(e.name))?,
                EntryKind::Gitlink => (gitlink_id(&sha1_bytes(&e.oid)), 0),
                EntryKind::Symlink => self.blob(e.oid, true, hint)?,
                EntryKind::File | EntryKind::Executable => self.blob(e.oid, false, hint)?,
            };
            entries.push(TreeEntry {
                name: e.name.to_vec(),
                kind,
                id,
                size,
            });
            canonical.push((e.name, kind, e.oid));
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        if entries.windows(2).any(|w| w[0].name == w[1].name) {
            return Err(bad("has two entries with the same name".into()));
        }
        let canonical_oid = git_hash(GitKind::Tree, &objects::tree_bytes(&canonical));
        drop(canonical);
        let git_raw = (canonical_oid != oid).then(|| {
            self.report.raw_trees += 1;
            data
        });
        let tree = Tree { entries, git_raw };
        let size = tree.total_size();
        let id = self.bases.put(self.tx, Kind::Tree, &tree.encode(), hint)?;
        self.report.trees += 1;
        self.remember(oid, GitObject::Tree, id, size);
        self.trees.insert(oid, (id, size));
        Ok((id, size))
    }

    /// Imports a commit and its ancestors (parents first, without recursion).
    fn commit(&mut self, tip: ObjectId) -> Result<Id> {
        let mut stack = vec![tip];
        while let Some(&oid) = stack.last() {
            if self.have_commit(oid)? {
                stack.pop();
                continue;
            }
            let data = self.read(oid, GitKind::Commit)?;
            let raw = objects::parse_commit(&data).ok_or_else(|| GitError::Object {
                oid: oid.to_string(),
                reason: "is a malformed commit (no tree line)".into(),
            })?;
            // A shallow clone's boundary commits have parents the clone does not hold:
            // lifeos keeps them as roots that remember their parents' ids.
            let boundary = self.shallow.contains(&oid);
            if !boundary {
                let mut missing = Vec::new();
                for p in &raw.parents {
                    if !self.have_commit(*p)? {
                        missing.push(*p);
                    }
                }
                if !missing.is_empty() {
                    stack.extend(missing);
                    continue;
                }
            }
            stack.pop();
            // The first parent's commit and tree are the delta bases of this one's.
            let first_parent = raw
                .parents
                .first()
                .filter(|_| !boundary)
                .map(|p| self.commits[p]);
            let parent_tree = first_parent
                .and_then(|p| self.tx.read_object(&p, Kind::Commit).ok())
                .and_then(|raw| Commit::decode(&raw).ok())
                .map(|c| c.tree);
            let (tree, _) = self
                .tree(raw.tree, parent_tree)
                .map_err(|err| err.in_commit(oid.to_string()))?;
            let (parents, extra_headers): (Vec<Id>, _) = if boundary {
                self.report.shallow_boundary += 1;
                (
                    Vec::new(),
                    vec![objects::shallow_parents_header(&raw.parents)],
                )
            } else {
                (
                    raw.parents.iter().map(|p| self.commits[p]).collect(),
                    Vec::new(),
                )
            };
            let sig = |key: &[u8]| {
                objects::header_value(raw.header, key)
                    .map(objects::parse_signature)
                    .unwrap_or_else(|| objects::parse_signature(b""))
            };
            let change_id = objects::header_value(raw.header, b"change-id")
                .and_then(objects::parse_change_id)
                .unwrap_or_else(|| objects::change_id_from_sha(&oid));
            let mut commit = Commit {
                tree,
                parents,
                change_id,
                author: sig(b"author"),
                committer: sig(b"committer"),
                message: raw.message.to_vec(),
                extra_headers,
                conflicts: Vec::new(),
                git_header: None,
            };
            // A commit lifeos wrote (exported, then read back) is kept in lifeos's own
            // form, so it keeps its lifeos id; any other keeps git's header bytes.
            let hashes = |c: &Commit| {
                git_hash(
                    GitKind::Commit,
                    &objects::commit_bytes(c, &raw.tree, &raw.parents),
                ) == oid
            };
            if !(objects::header_value(raw.header, b"change-id").is_some() && hashes(&commit)) {
                commit.git_header = Some(raw.header.to_vec());
                // Verify: the git form rebuilt from what lifeos keeps hashes to the same id.
                if !hashes(&commit) {
                    self.report.mismatches += 1;
                }
            }
            let encoded = commit.encode();
            let id = Id::hash(&encoded);
            if !self.tx.contains(&id)? {
                self.report.new_commits += 1;
            }
            self.bases
                .put(self.tx, Kind::Commit, &encoded, first_parent)?;
            self.report.commits += 1;
            self.remember(oid, GitObject::Commit, id, 0);
            self.commits.insert(oid, id);
        }
        Ok(self.commits[&tip])
    }

    /// Imports what a ref names: `(target, commit)`, the target being a commit or a git
    /// tag object; `None` (with why) if it does not lead to a commit.
    fn target(&mut self, oid: ObjectId) -> Result<std::result::Result<(Id, Id), String>> {
        if self.have_commit(oid)? {
            let c = self.commits[&oid];
            return Ok(Ok((c, c)));
        }
        let mut known_tag = self.tags.get(&oid).copied();
        if known_tag.is_none() && self.shallow.is_empty() {
            known_tag = self.known(oid, GitObject::Tag)?.map(|(id, _)| id);
        }
        if let Some(id) = known_tag {
            self.tags.insert(oid, id);
            let tag = GitTag::decode(&self.tx.read_object(&id, Kind::GitTag)?)?;
            return Ok(Ok((id, self.peeled(tag)?)));
        }
        let kind = self
            .git
            .find_header(oid)
            .map_err(|e| GitError::Object {
                oid: oid.to_string(),
                reason: format!("cannot be read: {e}"),
            })?
            .kind();
        match kind {
            GitKind::Commit => {
                let c = self.commit(oid)?;
                Ok(Ok((c, c)))
            }
            GitKind::Tag => {
                let raw = self.read(oid, GitKind::Tag)?;
                let (inner, _) = objects::parse_tag(&raw).ok_or_else(|| GitError::Object {
                    oid: oid.to_string(),
                    reason: "is a malformed tag".into(),
                })?;
                let (target, commit) = match self.target(inner)? {
                    Ok(v) => v,
                    Err(why) => return Ok(Err(why)),
                };
                // What `target` returned tells the inner object's kind: a tag leads to a
                // commit other than itself.
                let tag = GitTag {
                    target,
                    target_is_tag: target != commit,
                    raw,
                };
                let id = self.tx.write_object(Kind::GitTag, &tag.encode())?;
                self.report.tags += 1;
                self.remember(oid, GitObject::Tag, id, 0);
                self.tags.insert(oid, id);
                Ok(Ok((id, commit)))
            }
            other => Ok(Err(format!("names a {other}, not a commit"))),
        }
    }

    fn peeled(&self, mut tag: GitTag) -> Result<Id> {
        while tag.target_is_tag {
            tag = GitTag::decode(&self.tx.read_object(&tag.target, Kind::GitTag)?)?;
        }
        Ok(tag.target)
    }
}

/// Refs left out of an import, with why.
pub(crate) type Skipped = Vec<(String, String)>;

/// Every direct ref of `git` with the object it names (sorted by name), and the refs
/// lifeos leaves out, with why.
pub(crate) fn read_refs(git: &gix::Repository) -> Result<(Vec<(String, ObjectId)>, Skipped)> {
    let mut refs: Vec<(String, ObjectId)> = Vec::new();
    let mut skipped = Vec::new();
    let platform = git.references().map_err(gix_err("listing refs"))?;
    for r in platform.all().map_err(gix_err("listing refs"))? {
        let r = r.map_err(gix_err("reading a ref"))?;
        let Ok(name) = String::from_utf8(r.name().as_bstr().to_vec()) else {
            skipped.push((
                String::from_utf8_lossy(r.name().as_bstr()).into_owned(),
                "its name is not UTF-8".into(),
            ));
            continue;
        };
        let short = name
            .strip_prefix("refs/heads/")
            .or_else(|| name.strip_prefix("refs/tags/"));
        if let Some(Err(e)) = short.map(lifeos_vcs::history::valid_ref_name) {
            skipped.push((name, format!("lifeos cannot hold this name: {e}")));
            continue;
        }
        match r.target() {
            gix::refs::TargetRef::Object(oid) => refs.push((name, oid.to_owned())),
            gix::refs::TargetRef::Symbolic(to) => {
                skipped.push((name, format!("a symbolic ref to {}", to.as_bstr())))
            }
        }
    }
    refs.sort();
    Ok((refs, skipped))
}

/// Where git's HEAD is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitHead {
    /// On a branch (which may have no commit yet).
    Branch(String),
    /// Detached at a commit.
    Detached(ObjectId),
}

/// What an import takes from git.
pub(crate) struct Plan {
    /// Refs to set, with what they name.
    pub refs: Vec<(String, ObjectId)>,
    /// Refs to remove (git deleted them).
    pub deleted: Vec<String>,
    /// For a colocated folder: git's HEAD, which the folder follows (git moved the files
    /// itself). `None`: the folder stays where it is.
    pub head: Option<GitHead>,
    /// Refs left out, with why.
    pub skipped: Skipped,
}

/// Imports every ref of the git repository at `path` (bare, or a work tree) into `repo`
/// as one operation; nothing is published when nothing changed.
pub fn import(repo: &Repo, path: &Path) -> Result<ImportReport> {
    let git = open_git(path)?;
    let (refs, skipped) = read_refs(&git)?;
    let plan = Plan {
        refs,
        deleted: Vec::new(),
        head: None,
        skipped,
    };
    import_plan(repo, &git, path, plan)
}

/// Carries out `plan` as one operation (none when nothing changed).
pub(crate) fn import_plan(
    repo: &Repo,
    git: &gix::Repository,
    path: &Path,
    plan: Plan,
) -> Result<ImportReport> {
    let start = lifeos_vcs::repo::now_ms();
    let shallow: HashSet<ObjectId> = git
        .shallow_commits()
        .map_err(gix_err("reading the shallow file"))?
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    let Plan {
        refs,
        deleted,
        head: git_head,
        mut skipped,
    } = plan;
    let mut map = repo.catalog()?;
    let head = repo.head()?;
    let mut tx = repo.store().transaction()?;
    // History comes in once and is read often: compressed harder than a snapshot.
    tx.set_zstd_level(IMPORT_ZSTD_LEVEL.max(repo.store().config().compression.zstd_level))?;
    let mut im = Importer {
        git,
        tx: &mut tx,
        map: &map,
        rows: Vec::new(),
        commits: HashMap::new(),
        trees: HashMap::new(),
        blobs: HashMap::new(),
        tags: HashMap::new(),
        shallow,
        pointers: Vec::new(),
        bases: DeltaBases::default(),
        report: ImportReport::default(),
    };
    let mut view = head.view.clone();
    let mut events = Vec::new();
    let mut imported = Vec::new();
    let mut refused = Vec::new();
    for (name, oid) in &refs {
        match im.target(*oid) {
            Ok(Ok(v)) => imported.push((name.as_str(), Some(v))),
            Ok(Err(why)) => skipped.push((name.clone(), why)),
            Err(e @ GitError::Reserved { .. }) => refused.push((name.clone(), e.to_string())),
            Err(e) => return Err(e),
        }
    }
    let detached_at = match &git_head {
        Some(GitHead::Detached(oid)) => match im.commit(*oid) {
            Ok(c) => Some(c),
            Err(e @ GitError::Reserved { .. }) => {
                refused.push(("HEAD".into(), e.to_string()));
                None
            }
            Err(e) => return Err(e),
        },
        _ => None,
    };
    let mut report = std::mem::take(&mut im.report);
    let rows = std::mem::take(&mut im.rows);
    let pointers = std::mem::take(&mut im.pointers);
    report.skipped = skipped;
    report.refused = refused;
    report.refs = imported.len() as u64;
    imported.extend(deleted.iter().map(|n| (n.as_str(), None)));
    for (name, value) in imported {
        let commit = value.map(|(_, c)| c);
        view.heads.extend(commit);
        if let Some(b) = name.strip_prefix("refs/heads/") {
            let from = view.branch(b);
            if from != commit {
                events.push(Event::BranchMoved {
                    name: b.to_string(),
                    from,
                    to: commit,
                });
                view.set_branch(b, commit);
            }
        } else if let Some(t) = name.strip_prefix("refs/tags/") {
            let from = view.tags.iter().find(|(n, _)| n == t).map(|(_, id)| *id);
            if from != commit {
                events.push(Event::TagMoved {
                    name: t.to_string(),
                    from,
                    to: commit,
                });
                view.set_tag(t, commit);
            }
            view.set_git_ref(name, value.filter(|(target, c)| target != c));
        } else {
            view.set_git_ref(name, value);
        }
    }
    match &git_head {
        // The folder changes only by a checkout: when the import moves the branch it is
        // on, it stays at the commit it was at, off the branch (`lifeos checkout BRANCH`
        // moves it).
        None => {
            if let Some(b) = head.view.current_branch.as_deref() {
                if view.branch(b) != head.view.branch(b) {
                    view.current_branch = None;
                    view.wc_commit = head.view.at_commit();
                    report.folder_detached = true;
                }
            }
        }
        // A colocated folder is where git put it.
        Some(GitHead::Branch(b)) => {
            view.wc_commit = view.branch(b).or(view.wc_commit);
            view.current_branch = Some(b.clone());
        }
        Some(GitHead::Detached(_)) => {
            view.current_branch = None;
            view.wc_commit = detached_at;
        }
    }
    if let Some(commit) = view
        .at_commit()
        .filter(|c| Some(*c) != head.view.at_commit())
    {
        if git_head.is_some() {
            events.push(Event::CheckedOut { commit });
        }
    }
    view.heads.sort();
    view.heads.dedup();
    if view == head.view && report.new_commits == 0 {
        // Rows for objects the store already had (a map rebuilt after `reindex`, say).
        map.git_record(&rows)?;
        return Ok(report);
    }
    if !pointers.is_empty() {
        events.push(Event::FilesStored { files: pointers });
    }
    events.insert(
        0,
        Event::GitImported {
            source: path.as_os_str().as_encoded_bytes().into(),
            commits: report.new_commits,
        },
    );
    repo.publish(
        tx,
        &[head.id],
        view,
        &format!(
            "git import: {} commits from {}",
            report.new_commits,
            path.display()
        ),
        events,
        start,
    )?;
    // The map is written once the objects it names are published; a crash before this
    // only costs the next import the time to read them again.
    map.git_record(&rows)?;
    report.published = true;
    Ok(report)
}
