//! `lifeos git export`: lifeos history as git objects and refs, with the SHA-1s the
//! commits, trees and tags had in git.

use std::collections::HashMap;
use std::path::Path;

use gix::objs::Write as _;
use gix::ObjectId;
use lifeos_store::{Id, Kind};
use lifeos_vcs::object::{gitlink_sha1, EntryKind, GitTag};
use lifeos_vcs::Repo;

use crate::form::{self, git_hash, GitKind};
use crate::{gix_err, GitError, Result};

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
    /// Refs written.
    pub refs: u64,
}

struct Exporter<'a> {
    repo: &'a Repo,
    git: &'a gix::Repository,
    commits: HashMap<Id, ObjectId>,
    trees: HashMap<Id, ObjectId>,
    blobs: HashMap<(Id, bool), ObjectId>,
    tags: HashMap<Id, ObjectId>,
    report: ExportReport,
}

impl Exporter<'_> {
    fn write(&self, kind: GitKind, bytes: &[u8]) -> Result<ObjectId> {
        let oid = git_hash(kind, bytes);
        self.git
            .objects
            .write_buf(kind, bytes)
            .map_err(|e| GitError::Write(format!("{kind} {oid}: {e}")))?;
        Ok(oid)
    }

    fn blob(&mut self, id: Id, symlink: bool) -> Result<ObjectId> {
        if let Some(o) = self.blobs.get(&(id, symlink)) {
            return Ok(*o);
        }
        let data = if symlink {
            self.repo.store().read_object(&id, Kind::Chunk)?
        } else {
            let mut v = Vec::new();
            self.repo.store().read_file(&id, &mut v)?;
            v
        };
        let oid = self.write(GitKind::Blob, &data)?;
        self.report.blobs += 1;
        self.blobs.insert((id, symlink), oid);
        Ok(oid)
    }

    fn tree(&mut self, id: Id) -> Result<ObjectId> {
        if let Some(o) = self.trees.get(&id) {
            return Ok(*o);
        }
        let tree = self.repo.tree(&id)?;
        let mut entries = Vec::with_capacity(tree.entries.len());
        for e in &tree.entries {
            let oid = match e.kind {
                EntryKind::Dir => self.tree(e.id)?,
                EntryKind::Gitlink => ObjectId::from(gitlink_sha1(&e.id)),
                EntryKind::Symlink => self.blob(e.id, true)?,
                EntryKind::File | EntryKind::Executable => self.blob(e.id, false)?,
            };
            entries.push((e.name.as_slice(), e.kind, oid));
        }
        let bytes = match &tree.git_raw {
            Some(raw) => raw.clone(),
            None => form::tree_bytes(&entries),
        };
        let oid = self.write(GitKind::Tree, &bytes)?;
        self.report.trees += 1;
        self.trees.insert(id, oid);
        Ok(oid)
    }

    /// Writes a commit and its ancestors (parents first, without recursion).
    fn commit(&mut self, tip: Id) -> Result<ObjectId> {
        let mut stack = vec![tip];
        while let Some(&id) = stack.last() {
            if self.commits.contains_key(&id) {
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
            let tree = self.tree(c.tree)?;
            let parents: Vec<ObjectId> = c.parents.iter().map(|p| self.commits[p]).collect();
            let oid = self.write(GitKind::Commit, &form::commit_bytes(&c, &tree, &parents))?;
            self.report.commits += 1;
            self.commits.insert(id, oid);
        }
        Ok(self.commits[&tip])
    }

    fn tag(&mut self, id: Id) -> Result<ObjectId> {
        if let Some(o) = self.tags.get(&id) {
            return Ok(*o);
        }
        let tag = GitTag::decode(&self.repo.store().read_object(&id, Kind::GitTag)?)?;
        // What the tag names must be there first (git fsck checks it).
        if tag.target_is_tag {
            self.tag(tag.target)?;
        } else {
            self.commit(tag.target)?;
        }
        let oid = self.write(GitKind::Tag, &tag.raw)?;
        self.report.tags += 1;
        self.tags.insert(id, oid);
        Ok(oid)
    }
}

/// Writes the history of `repo`'s branches, tags and git refs into the git repository at
/// `path` (created bare when absent), with its refs and HEAD.
pub fn export(repo: &Repo, path: &Path) -> Result<ExportReport> {
    let git = if path.exists() {
        gix::open(path)
    } else {
        gix::init_bare(path)
    }
    .map_err(|e| GitError::Open {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let view = repo.head()?.view;
    let mut ex = Exporter {
        repo,
        git: &git,
        commits: HashMap::new(),
        trees: HashMap::new(),
        blobs: HashMap::new(),
        tags: HashMap::new(),
        report: ExportReport::default(),
    };
    let mut refs: Vec<(String, ObjectId)> = Vec::new();
    for (name, commit) in &view.branches {
        refs.push((format!("refs/heads/{name}"), ex.commit(*commit)?));
    }
    for (name, commit) in &view.tags {
        let full = format!("refs/tags/{name}");
        let oid = match view.git_ref(&full) {
            Some(g) if g.commit == *commit && g.target != g.commit => ex.tag(g.target)?,
            _ => ex.commit(*commit)?,
        };
        refs.push((full, oid));
    }
    for g in &view.git_refs {
        if g.name.starts_with("refs/tags/") || g.name.starts_with("refs/heads/") {
            continue;
        }
        let oid = if g.target == g.commit {
            ex.commit(g.commit)?
        } else {
            ex.tag(g.target)?
        };
        refs.push((g.name.clone(), oid));
    }
    let edits = refs.iter().map(|(name, oid)| {
        Ok(gix::refs::transaction::RefEdit {
            change: gix::refs::transaction::Change::Update {
                log: gix::refs::transaction::LogChange {
                    mode: gix::refs::transaction::RefLog::AndReference,
                    force_create_reflog: false,
                    message: "lifeos git export".into(),
                },
                expected: gix::refs::transaction::PreviousValue::Any,
                new: gix::refs::Target::Object(*oid),
            },
            name: name.as_str().try_into().map_err(|e| GitError::RefName {
                name: name.clone(),
                reason: format!("{e}"),
            })?,
            deref: false,
        })
    });
    let edits = edits.collect::<Result<Vec<_>>>()?;
    ex.report.refs = edits.len() as u64;
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
    if let Some(b) = view
        .current_branch
        .as_ref()
        .filter(|b| view.branch(b).is_some())
    {
        if git.is_bare() {
            lifeos_store::store::write_atomic(
                &git.git_dir().join("HEAD"),
                format!("ref: refs/heads/{b}\n").as_bytes(),
            )?;
        }
    }
    Ok(ex.report)
}
