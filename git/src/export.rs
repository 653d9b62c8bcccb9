//! `lifeos git export`: lifeos history as git objects and refs, with the SHA-1s the
//! commits, trees and tags had in git.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use gix::ObjectId;
use lifeos_catalog::{Catalog, GitMapRow, GitObject};
use lifeos_store::{Id, Kind};
use lifeos_vcs::object::{gitlink_sha1, EntryKind, GitTag, View};
use lifeos_vcs::Repo;

use crate::objects::{self, git_hash, GitKind};
use crate::repo::sha1_bytes;
use crate::{gix_err, GitError, Result};
use lifeos_catalog::CatalogExt;

/// What an export did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExportReport {
    /// Commits written (or found already there).
    pub commits: u64,
    /// Trees written.
    pub trees: u64,
    /// Blobs written.
    pub blobs: u64,
    /// Annotated tags written.
    pub tags: u64,
    /// Refs exported.
    pub refs: u64,
    /// Of those, refs whose value changed in the target.
    pub refs_updated: u64,
}

/// Computes the git form of lifeos objects and, given a git repository, writes it there.
pub(crate) struct Exporter<'a> {
    repo: &'a Repo,
    /// Where objects go; `None` only computes their SHA-1s (to rebuild the git map).
    git: Option<&'a gix::Repository>,
    map: &'a Catalog,
    pub(crate) rows: Vec<GitMapRow>,
    /// Commits at a shallow boundary (their parents are not written).
    pub(crate) shallow: Vec<ObjectId>,
    /// Commits and tags at or above a shallow boundary: they get other lifeos ids once
    /// the history is deepened, so the git map does not record them.
    above_shallow: HashSet<Id>,
    commits: HashMap<Id, ObjectId>,
    trees: HashMap<Id, ObjectId>,
    blobs: HashMap<(Id, bool), ObjectId>,
    tags: HashMap<Id, ObjectId>,
    /// Objects written, until [`Exporter::finish`] puts them in the repository.
    out: crate::pack::PackOut,
    /// In a colocated folder, the paths git's `lifeos` filter applies to: their new
    /// contents go to git as pointers, as `git add` would have made them.
    pub(crate) filter: Option<crate::filter::FilterAttributes>,
    report: ExportReport,
}

impl Exporter<'_> {
    pub(crate) fn new<'a>(
        repo: &'a Repo,
        git: Option<&'a gix::Repository>,
        map: &'a Catalog,
    ) -> Exporter<'a> {
        Exporter {
            repo,
            git,
            map,
            rows: Vec::new(),
            shallow: Vec::new(),
            above_shallow: HashSet::new(),
            commits: HashMap::new(),
            trees: HashMap::new(),
            blobs: HashMap::new(),
            tags: HashMap::new(),
            out: crate::pack::PackOut::new(),
            filter: None,
            report: ExportReport::default(),
        }
    }

    /// Puts the objects written into the git repository (loose, or one pack when there
    /// are many); returns a `.keep` file to remove once refs point into the pack.
    pub(crate) fn finish(&mut self) -> Result<Option<std::path::PathBuf>> {
        match self.git {
            Some(git) => self.out.finish(git),
            None => Ok(None),
        }
    }

    fn write(
        &mut self,
        kind: GitKind,
        bytes: &[u8],
        id: Id,
        what: GitObject,
        size: u64,
    ) -> Result<ObjectId> {
        let oid = git_hash(kind, bytes);
        if let Some(git) = self.git {
            self.out.add(git, kind, bytes)?;
        }
        if !self.above_shallow.contains(&id) {
            self.rows.push(GitMapRow {
                sha1: sha1_bytes(&oid),
                kind: what,
                id,
                size,
            });
        }
        Ok(oid)
    }

    /// The SHA-1 the git map gives `id`, if the target already holds that object.
    fn known(&self, id: &Id, kind: GitObject) -> Result<Option<ObjectId>> {
        let Some(git) = self.git else {
            return Ok(None);
        };
        Ok(self
            .map
            .git_sha1(id, kind)?
            .map(ObjectId::from)
            .filter(|oid| git.has_object(oid)))
    }

    /// Writes the blob of the file or symlink `id` at repository path `path`.
    fn blob(&mut self, id: Id, symlink: bool, path: &[u8]) -> Result<ObjectId> {
        if let Some(o) = self.blobs.get(&(id, symlink)) {
            return Ok(*o);
        }
        let what = if symlink {
            GitObject::Symlink
        } else {
            GitObject::Blob
        };
        if let Some(o) = self.known(&id, what)? {
            self.blobs.insert((id, symlink), o);
            return Ok(o);
        }
        // Content git knows as a `lifeos` filter pointer goes back as that pointer, and so
        // does new content at a path the filter applies to.
        if !symlink
            && (self.map.git_sha1(&id, GitObject::Pointer)?.is_some()
                || self.filter.as_mut().is_some_and(|f| f.filters(path)))
        {
            let size = self.repo.store().file_chunks(&id)?.size();
            let text = crate::pointer::Pointer { id, size }.text();
            let oid = self.write(GitKind::Blob, text.as_bytes(), id, GitObject::Pointer, size)?;
            self.report.blobs += 1;
            self.blobs.insert((id, symlink), oid);
            return Ok(oid);
        }
        let data = if symlink {
            self.repo.store().read_object(&id, Kind::Chunk)?
        } else {
            let mut v = Vec::new();
            self.repo.store().read_file(&id, &mut v)?;
            v
        };
        let oid = self.write(GitKind::Blob, &data, id, what, data.len() as u64)?;
        self.report.blobs += 1;
        self.blobs.insert((id, symlink), oid);
        Ok(oid)
    }

    /// Writes tree `id` (at repository path `path`, empty for the root) and what it holds.
    fn tree(&mut self, id: Id, path: &[u8]) -> Result<ObjectId> {
        if let Some(o) = self.trees.get(&id) {
            return Ok(*o);
        }
        if let Some(o) = self.known(&id, GitObject::Tree)? {
            self.trees.insert(id, o);
            return Ok(o);
        }
        let tree = self.repo.tree(&id)?;
        let mut entries = Vec::with_capacity(tree.entries.len());
        for e in &tree.entries {
            lifeos_vcs::guard::check_name(&e.name, e.kind)
                .map_err(|why| GitError::reserved(&e.name, why, crate::NOT_EXPORTED))?;
            let at = if path.is_empty() {
                e.name.clone()
            } else {
                [path, b"/", &e.name].concat()
            };
            let oid = match e.kind {
                EntryKind::Dir => self.tree(e.id, &at).map_err(|err| err.below(&e.name))?,
                EntryKind::Gitlink => ObjectId::from(gitlink_sha1(&e.id)),
                EntryKind::Symlink => self.blob(e.id, true, &at)?,
                EntryKind::File | EntryKind::Executable => self.blob(e.id, false, &at)?,
            };
            entries.push((e.name.as_slice(), e.kind, oid));
        }
        let bytes = match &tree.git_raw {
            Some(raw) => raw.clone(),
            None => objects::tree_bytes(&entries),
        };
        let oid = self.write(
            GitKind::Tree,
            &bytes,
            id,
            GitObject::Tree,
            tree.total_size(),
        )?;
        self.report.trees += 1;
        self.trees.insert(id, oid);
        Ok(oid)
    }

    /// Writes a commit and its ancestors (parents first, without recursion).
    pub(crate) fn commit(&mut self, tip: Id) -> Result<ObjectId> {
        let mut stack = vec![tip];
        while let Some(&id) = stack.last() {
            if self.commits.contains_key(&id) {
                stack.pop();
                continue;
            }
            // A commit git already has comes with its ancestors.
            if let Some(o) = self.known(&id, GitObject::Commit)? {
                self.commits.insert(id, o);
                stack.pop();
                continue;
            }
            let c = self.repo.commit(&id)?;
            let missing: Vec<Id> = c
                .parents
                .iter()
                .filter(|p| !self.commits.contains_key(*p))
                .copied()
                .collect();
            if !missing.is_empty() {
                stack.extend(missing);
                continue;
            }
            stack.pop();
            let tree = self
                .tree(c.tree, b"")
                .map_err(|err| err.in_commit(id.short(12)))?;
            let shallow = objects::shallow_parents(&c);
            let parents: Vec<ObjectId> = match &shallow {
                Some(p) => p.clone(),
                None => c.parents.iter().map(|p| self.commits[p]).collect(),
            };
            if shallow.is_some() || c.parents.iter().any(|p| self.above_shallow.contains(p)) {
                self.above_shallow.insert(id);
            }
            let bytes = objects::commit_bytes(&c, &tree, &parents);
            let oid = self.write(GitKind::Commit, &bytes, id, GitObject::Commit, 0)?;
            if shallow.is_some() {
                self.shallow.push(oid);
            }
            self.report.commits += 1;
            self.commits.insert(id, oid);
        }
        Ok(self.commits[&tip])
    }

    fn tag(&mut self, id: Id) -> Result<ObjectId> {
        if let Some(o) = self.tags.get(&id) {
            return Ok(*o);
        }
        if let Some(o) = self.known(&id, GitObject::Tag)? {
            self.tags.insert(id, o);
            return Ok(o);
        }
        let tag = GitTag::decode(&self.repo.store().read_object(&id, Kind::GitTag)?)?;
        // What the tag names must be there first (git fsck checks it).
        if tag.target_is_tag {
            self.tag(tag.target)?;
        } else {
            self.commit(tag.target)?;
        }
        if self.above_shallow.contains(&tag.target) {
            self.above_shallow.insert(id);
        }
        let oid = self.write(GitKind::Tag, &tag.raw, id, GitObject::Tag, 0)?;
        self.report.tags += 1;
        self.tags.insert(id, oid);
        Ok(oid)
    }
}

impl Exporter<'_> {
    /// The git refs `view` names, with the objects they point at (written first).
    pub(crate) fn refs(&mut self, view: &View) -> Result<Vec<(String, ObjectId)>> {
        let mut refs: Vec<(String, ObjectId)> = Vec::new();
        for (name, commit) in &view.branches {
            refs.push((format!("refs/heads/{name}"), self.commit(*commit)?));
        }
        for (name, commit) in &view.tags {
            let full = format!("refs/tags/{name}");
            let oid = match view.git_ref(&full) {
                Some(g) if g.commit == *commit && g.target != g.commit => self.tag(g.target)?,
                _ => self.commit(*commit)?,
            };
            refs.push((full, oid));
        }
        for g in &view.git_refs {
            if g.name.starts_with("refs/tags/") || g.name.starts_with("refs/heads/") {
                continue;
            }
            let oid = if g.target == g.commit {
                self.commit(g.commit)?
            } else {
                self.tag(g.target)?
            };
            refs.push((g.name.clone(), oid));
        }
        Ok(refs)
    }
}

/// Opens the git repository at `path`, creating a bare one when nothing is there.
fn open_or_init(path: &Path) -> Result<gix::Repository> {
    if path.exists() {
        gix::open(path)
    } else {
        gix::init_bare(path)
    }
    .map_err(|e| GitError::Open {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Sets `refs` in `git` (only those that differ), as one ref transaction.
pub(crate) fn write_refs(git: &gix::Repository, refs: &[(String, ObjectId)]) -> Result<u64> {
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    let mut edits = Vec::new();
    for (name, oid) in refs {
        let current = git
            .try_find_reference(name.as_str())
            .map_err(gix_err("reading a ref"))?
            .and_then(|r| r.target().try_id().map(|o| o.to_owned()));
        if current == Some(*oid) {
            continue;
        }
        edits.push(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "lifeos git export".into(),
                },
                expected: PreviousValue::Any,
                new: gix::refs::Target::Object(*oid),
            },
            name: name.as_str().try_into().map_err(|e| GitError::RefName {
                name: name.clone(),
                reason: format!("{e}"),
            })?,
            deref: false,
        });
    }
    let n = edits.len() as u64;
    if n > 0 {
        let signature = gix::actor::Signature {
            name: "lifeos".into(),
            email: "lifeos@localhost".into(),
            time: gix::date::Time::now_local_or_utc(),
        };
        git.edit_references_as(
            edits,
            Some(signature.to_ref(&mut gix::date::parse::TimeBuf::default())),
        )
        .map_err(gix_err("writing refs"))?;
    }
    Ok(n)
}

/// Removes a new pack's `.keep` file once refs point into the pack.
pub(crate) fn release_keep(keep: Option<std::path::PathBuf>) -> Result<()> {
    match keep.map(std::fs::remove_file) {
        Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => Err(GitError::Write(format!(
            "removing the new pack's .keep file: {e}"
        ))),
        _ => Ok(()),
    }
}

/// Adds `commits` to the git repository's `shallow` file (commits whose parents it does
/// not hold, as git expects of a shallow clone).
pub(crate) fn add_shallow(git: &gix::Repository, commits: &[ObjectId]) -> Result<()> {
    if commits.is_empty() {
        return Ok(());
    }
    let mut all: Vec<ObjectId> = git
        .shallow_commits()
        .map_err(gix_err("reading the shallow file"))?
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    all.extend_from_slice(commits);
    all.sort();
    all.dedup();
    let text: String = all.iter().map(|o| format!("{o}\n")).collect();
    lifeos_store::fsutil::write_atomic(&git.git_dir().join("shallow"), text.as_bytes())?;
    Ok(())
}

/// Writes the history of `repo`'s branches, tags and git refs into the git repository at
/// `path` (created bare when absent), with its refs and HEAD.
pub fn export(repo: &Repo, path: &Path) -> Result<ExportReport> {
    let git = open_or_init(path)?;
    let view = repo.head()?.view;
    let mut map = repo.catalog()?;
    let mut ex = Exporter::new(repo, Some(&git), &map);
    let refs = ex.refs(&view)?;
    let keep = ex.finish()?;
    add_shallow(&git, &ex.shallow)?;
    let rows = std::mem::take(&mut ex.rows);
    let mut report = std::mem::take(&mut ex.report);
    report.refs = refs.len() as u64;
    report.refs_updated = write_refs(&git, &refs)?;
    release_keep(keep)?;
    if let Some(b) = view
        .current_branch
        .as_ref()
        .filter(|b| view.branch(b).is_some())
    {
        if git.is_bare() {
            lifeos_store::fsutil::write_atomic(
                &git.git_dir().join("HEAD"),
                format!("ref: refs/heads/{b}\n").as_bytes(),
            )?;
        }
    }
    map.git_record(&rows)?;
    Ok(report)
}
