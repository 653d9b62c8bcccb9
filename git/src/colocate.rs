//! A colocated folder: `.git` and `.lifeos` side by side, kept in step. Before each lifeos
//! command, [`sync_in`] imports what git changed since the last sync (commits, moved or
//! deleted refs, HEAD); after it, [`sync_out`] exports what lifeos changed (refs, HEAD, and
//! git's index when lifeos moved HEAD, so `git status` agrees with `lifeos status`).
//!
//! What both sides last agreed on is kept in `.lifeos/git-synced`: a ref that differs from
//! it there was moved by git; a ref lifeos wants to move is written only if git still has
//! the synced value (compare-and-swap), so a `git commit` that lands while lifeos runs is
//! never overwritten; it is imported by the next command.

use std::collections::BTreeMap;
use std::path::PathBuf;

use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::ObjectId;
use lifeos_catalog::GitObject;
use lifeos_store::Id;
use lifeos_vcs::Repo;

use crate::export::{add_shallow, release_keep, Exporter};
use crate::import::{import_plan, read_refs, GitHead, ImportReport, Plan};
use crate::repo::{open_git, sha1_bytes};
use crate::{gix_err, GitError, Result};
use lifeos_catalog::CatalogExt;

/// The file, inside `.lifeos`, that marks a colocated folder and holds what lifeos and git
/// last agreed on.
pub const SYNCED_FILE: &str = "git-synced";

const MAGIC: &str = "lifeos-git-synced 2";

/// The first line of the file before it recorded git's index (read as version 2 with the
/// index matching HEAD).
const MAGIC_V1: &str = "lifeos-git-synced 1";

/// What lifeos last saw of git, and wrote to it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Synced {
    /// The lifeos operation exported last (`None`: export must compare every ref).
    op: Option<Id>,
    /// git's HEAD.
    head: Option<GitHead>,
    /// git's refs.
    refs: BTreeMap<String, ObjectId>,
    /// The commit git's index was last made to match (by lifeos, or by git when it moved
    /// HEAD); `None` (a version-1 file): HEAD's commit.
    index: Option<ObjectId>,
}

impl Synced {
    fn encode(&self) -> String {
        let mut out = format!("{MAGIC}\n");
        if let Some(op) = &self.op {
            out.push_str(&format!("op {}\n", op.to_hex()));
        }
        match &self.head {
            Some(GitHead::Branch(b)) => out.push_str(&format!("head ref: refs/heads/{b}\n")),
            Some(GitHead::Detached(oid)) => out.push_str(&format!("head {oid}\n")),
            None => {}
        }
        if let Some(oid) = &self.index {
            out.push_str(&format!("index {oid}\n"));
        }
        for (name, oid) in &self.refs {
            out.push_str(&format!("{oid} {name}\n"));
        }
        out
    }

    fn decode(text: &str) -> Option<Synced> {
        let mut lines = text.lines();
        if !matches!(lines.next()?, MAGIC | MAGIC_V1) {
            return None;
        }
        let mut s = Synced::default();
        for line in lines {
            if let Some(hex) = line.strip_prefix("op ") {
                s.op = Some(Id::from_hex(hex)?);
            } else if let Some(hex) = line.strip_prefix("index ") {
                s.index = Some(ObjectId::from_hex(hex.as_bytes()).ok()?);
            } else if let Some(h) = line.strip_prefix("head ") {
                s.head = Some(match h.strip_prefix("ref: refs/heads/") {
                    Some(b) => GitHead::Branch(b.to_string()),
                    None => GitHead::Detached(ObjectId::from_hex(h.as_bytes()).ok()?),
                });
            } else {
                let (oid, name) = line.split_once(' ')?;
                s.refs
                    .insert(name.to_string(), ObjectId::from_hex(oid.as_bytes()).ok()?);
            }
        }
        Some(s)
    }

    fn path(repo: &Repo) -> PathBuf {
        repo.dot_dir().join(SYNCED_FILE)
    }

    fn load(repo: &Repo) -> Result<Synced> {
        let path = Synced::path(repo);
        let text = std::fs::read_to_string(&path).map_err(|e| GitError::Colocation {
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        Synced::decode(&text).ok_or_else(|| GitError::Colocation {
            reason: format!(
                "{} is damaged; run `lifeos git init --colocate` to rebuild it",
                path.display()
            ),
        })
    }

    fn save(&self, repo: &Repo) -> Result<()> {
        lifeos_store::fsutil::write_atomic(&Synced::path(repo), self.encode().as_bytes())?;
        Ok(())
    }

    /// The commit HEAD names, as far as these refs say.
    fn head_commit(&self) -> Option<ObjectId> {
        match self.head.as_ref()? {
            GitHead::Branch(b) => self.refs.get(&format!("refs/heads/{b}")).copied(),
            GitHead::Detached(oid) => Some(*oid),
        }
    }
}

/// Whether `repo`'s folder is colocated with a git repository.
pub fn is_colocated(repo: &Repo) -> bool {
    Synced::path(repo).exists()
}

/// The person git would name as the author in `repo`'s folder, when it is colocated:
/// `user.name` and `user.email` from git's configuration (the repository's, the user's
/// and the system's, as git reads them). `None` when the folder is not shared with git,
/// its git repository cannot be opened, or git has no `user.name`.
pub fn git_identity(repo: &Repo) -> Option<(String, Option<String>)> {
    if !is_colocated(repo) {
        return None;
    }
    let git = open_git(&git_dir(repo)).ok()?;
    let config = git.config_snapshot();
    let value = |key: &str| {
        config
            .string(key)
            .map(|v| v.to_string().trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Some((value("user.name")?, value("user.email")))
}

fn git_dir(repo: &Repo) -> PathBuf {
    repo.workdir().join(".git")
}

/// Where git's HEAD is.
fn read_head(git: &gix::Repository) -> Result<GitHead> {
    match git.head_name().map_err(gix_err("reading HEAD"))? {
        Some(name) => {
            let name = name.as_bstr().to_string();
            match name.strip_prefix("refs/heads/") {
                Some(b) => Ok(GitHead::Branch(b.to_string())),
                None => Err(GitError::Colocation {
                    reason: format!("git's HEAD points at {name}, which is not a branch"),
                }),
            }
        }
        None => Ok(GitHead::Detached(
            git.head_id().map_err(gix_err("reading HEAD"))?.detach(),
        )),
    }
}

/// Refuses to go on while git is in the middle of a rebase, merge, cherry-pick, ...
fn check_idle(git: &gix::Repository) -> Result<()> {
    match git.state() {
        None => Ok(()),
        Some(state) => Err(GitError::Colocation {
            reason: format!(
                "git is in the middle of a {}; finish or abort it with git (for example `git rebase --continue` or `git rebase --abort`), then run lifeos again; nothing was changed",
                format!("{state:?}").to_lowercase()
            ),
        }),
    }
}

/// What [`colocate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColocateReport {
    /// The git repository (the `.git` folder).
    pub git_dir: PathBuf,
    /// Whether the git repository was created (else it existed).
    pub created: bool,
    /// What was imported from git.
    pub imported: Option<ImportReport>,
    /// Refs written to git.
    pub exported_refs: u64,
}

/// Makes `repo`'s folder colocated with the git repository in its `.git` (created when
/// absent): imports git's history, exports lifeos's, and from then on every lifeos command
/// keeps the two in step. Refuses when both hold a branch of the same name at different
/// commits, or different current branches, saying which.
///
/// The store moves into `.git/lifeos` ([`crate::store_home`]); the repository is returned
/// at its new place.
pub fn colocate(repo: Repo) -> Result<(Repo, ColocateReport)> {
    let dir = git_dir(&repo);
    let view = repo.head()?.view;
    let branch = view
        .current_branch
        .clone()
        .unwrap_or_else(|| lifeos_vcs::layout::DEFAULT_BRANCH.to_string());
    let created = !dir.exists();
    let git = if created {
        gix::init(repo.workdir()).map_err(|e| GitError::Open {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        lifeos_store::fsutil::write_atomic(
            &dir.join("HEAD"),
            format!("ref: refs/heads/{branch}\n").as_bytes(),
        )?;
        gix::open(&dir).map_err(|e| GitError::Open {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?
    } else {
        open_git(&dir)?
    };
    check_idle(&git)?;
    if !created && view.at_commit().is_some() {
        agree(&repo, &git, &view)?;
    }
    let (repo, _) = crate::store_home::store_into_git(repo)?;
    if !is_colocated(&repo) {
        Synced::default().save(&repo)?;
    }
    let imported = sync_in(&repo)?;
    let exported_refs = sync_out(&repo)?.refs_written;
    Ok((
        repo,
        ColocateReport {
            git_dir: dir,
            created,
            imported,
            exported_refs,
        },
    ))
}

/// Checks that lifeos history and the existing git repository can share the folder.
fn agree(repo: &Repo, git: &gix::Repository, view: &lifeos_vcs::View) -> Result<()> {
    let map = repo.catalog()?;
    let (refs, _) = read_refs(git)?;
    for (name, oid) in &refs {
        let Some(b) = name.strip_prefix("refs/heads/") else {
            continue;
        };
        let Some(ours) = view.branch(b) else {
            continue;
        };
        let theirs = map.git_lookup(&sha1_bytes(oid), GitObject::Commit)?;
        if theirs.map(|(id, _)| id) != Some(ours) {
            return Err(GitError::Colocation {
                reason: format!(
                    "branch {b} is at {} in lifeos and at {oid} in git, and they are not the same commit; rename one of them, then colocate",
                    ours.short(12)
                ),
            });
        }
    }
    if let (GitHead::Branch(g), Some(l)) = (read_head(git)?, view.current_branch.as_ref()) {
        if &g != l {
            return Err(GitError::Colocation {
                reason: format!(
                    "the folder is on branch {l} for lifeos and on branch {g} for git; check out the same branch in both, then colocate"
                ),
            });
        }
    }
    Ok(())
}

/// Imports what git changed since the last sync: new commits, moved, new and deleted
/// refs, and HEAD (the folder follows it: git moved the files itself). `None` when git
/// changed nothing.
pub fn sync_in(repo: &Repo) -> Result<Option<ImportReport>> {
    let mut synced = Synced::load(repo)?;
    let dir = git_dir(repo);
    let git = open_git(&dir)?;
    check_idle(&git)?;
    let (refs, skipped) = read_refs(&git)?;
    let head = read_head(&git)?;
    let now: BTreeMap<String, ObjectId> = refs.iter().cloned().collect();
    if now == synced.refs && synced.head.as_ref() == Some(&head) {
        return Ok(None);
    }
    let changed = refs
        .into_iter()
        .filter(|(name, oid)| synced.refs.get(name) != Some(oid))
        .collect();
    let deleted = synced
        .refs
        .keys()
        .filter(|name| !now.contains_key(*name))
        .cloned()
        .collect();
    let plan = Plan {
        refs: changed,
        deleted,
        head: Some(head.clone()),
        skipped,
    };
    let report = import_plan(repo, &git, &dir, plan)?;
    let old_head = synced.head_commit();
    // A refused ref stays unsynced: export must not take its absence in lifeos for a
    // deletion, and the next command says again why it is not imported.
    let mut now = now;
    for (name, _) in &report.refused {
        now.remove(name);
    }
    synced.refs = now;
    synced.head = Some(head);
    // git moved HEAD's commit: its index is git's own.
    if synced.head_commit() != old_head {
        synced.index = synced.head_commit();
    }
    synced.op = None;
    synced.save(repo)?;
    Ok(Some(report))
}

/// What [`sync_out`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncOut {
    /// Refs created, moved or deleted in git.
    pub refs_written: u64,
    /// Whether HEAD was moved.
    pub head_moved: bool,
    /// Whether git's index was rewritten to HEAD's tree.
    pub index_written: bool,
    /// Refs git moved while lifeos ran: left as git has them (the next lifeos command
    /// imports them), with what lifeos had wanted.
    pub conflicts: Vec<(String, String)>,
}

/// Exports what lifeos changed since the last sync: objects, refs (each written only if
/// git still has what was synced), HEAD, and git's index when HEAD's commit changed.
pub fn sync_out(repo: &Repo) -> Result<SyncOut> {
    let mut synced = Synced::load(repo)?;
    let head = repo.head()?;
    let mut out = SyncOut::default();
    if synced.op == Some(head.id) {
        return Ok(out);
    }
    synced.index = synced.index.or(synced.head_commit());
    let git = open_git(&git_dir(repo))?;
    let mut map = repo.catalog()?;
    let view = &head.view;
    let mut ex = Exporter::new(repo, Some(&git), &map);
    ex.filter = crate::filter::FilterAttributes::load(repo.workdir())?;
    let wanted: BTreeMap<String, ObjectId> = ex.refs(view)?.into_iter().collect();
    let at = view.at_commit().map(|c| ex.commit(c)).transpose()?;
    let keep = ex.finish()?;
    add_shallow(&git, &ex.shallow)?;
    let rows = std::mem::take(&mut ex.rows);
    drop(ex);
    map.git_record(&rows)?;

    let mut edits: Vec<(String, Option<ObjectId>)> = wanted
        .iter()
        .filter(|(name, oid)| synced.refs.get(*name) != Some(oid))
        .map(|(name, oid)| (name.clone(), Some(*oid)))
        .collect();
    edits.extend(
        synced
            .refs
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .map(|name| (name.clone(), None)),
    );
    for (name, new) in edits {
        let old = synced.refs.get(&name).copied();
        match cas_ref(&git, &name, old, new) {
            Ok(()) => {
                out.refs_written += 1;
                match new {
                    Some(oid) => synced.refs.insert(name, oid),
                    None => synced.refs.remove(&name),
                };
            }
            Err(e) => out.conflicts.push((name, e.to_string())),
        }
    }
    release_keep(keep)?;

    let want_head = match (&view.current_branch, at) {
        (Some(b), _) => Some(GitHead::Branch(b.clone())),
        (None, Some(oid)) => Some(GitHead::Detached(oid)),
        (None, None) => None,
    };
    if let Some(h) = want_head.filter(|h| Some(h) != synced.head.as_ref()) {
        set_head(&git, &h)?;
        synced.head = Some(h);
        out.head_moved = true;
    }
    // lifeos moved the folder's base (a commit, a checkout): git's index follows, so
    // `git status` shows what `lifeos status` shows. When that fails (git holds
    // index.lock), the file says so and the next command tries again.
    let mut indexed = Ok(());
    if let Some(commit) = at.filter(|c| Some(*c) != synced.index) {
        if synced.head_commit() == Some(commit) {
            indexed = write_index(&git, commit);
            if indexed.is_ok() {
                synced.index = Some(commit);
                out.index_written = true;
            }
        }
    }
    synced.op = (out.conflicts.is_empty() && indexed.is_ok()).then_some(head.id);
    synced.save(repo)?;
    indexed?;
    Ok(out)
}

/// Sets (or deletes) one ref, only if git still has `old` there.
fn cas_ref(
    git: &gix::Repository,
    name: &str,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
) -> Result<()> {
    let expected = match old {
        Some(o) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(o)),
        None => PreviousValue::MustNotExist,
    };
    let log = LogChange {
        mode: RefLog::AndReference,
        force_create_reflog: false,
        message: "lifeos".into(),
    };
    let change = match new {
        Some(oid) => Change::Update {
            log,
            expected,
            new: gix::refs::Target::Object(oid),
        },
        None => Change::Delete {
            expected,
            log: RefLog::AndReference,
        },
    };
    let edit = RefEdit {
        change,
        name: name.try_into().map_err(|e| GitError::RefName {
            name: name.to_string(),
            reason: format!("{e}"),
        })?,
        deref: false,
    };
    git.edit_reference(edit).map_err(gix_err("writing a ref"))?;
    Ok(())
}

fn set_head(git: &gix::Repository, head: &GitHead) -> Result<()> {
    let new = match head {
        GitHead::Branch(b) => {
            gix::refs::Target::Symbolic(format!("refs/heads/{b}").try_into().map_err(|e| {
                GitError::RefName {
                    name: b.clone(),
                    reason: format!("{e}"),
                }
            })?)
        }
        GitHead::Detached(oid) => gix::refs::Target::Object(*oid),
    };
    git.edit_reference(RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: "lifeos checkout".into(),
            },
            expected: PreviousValue::Any,
            new,
        },
        name: "HEAD".try_into().expect("HEAD is a valid ref name"),
        deref: false,
    })
    .map_err(gix_err("moving HEAD"))?;
    Ok(())
}

/// Rewrites git's index to `commit`'s tree. Entries carry no file stat, so git compares
/// content where it would trust a stat (the safe side: a file changed while this runs is
/// never taken as clean).
fn write_index(git: &gix::Repository, commit: ObjectId) -> Result<()> {
    let tree = git
        .find_commit(commit)
        .map_err(gix_err("reading HEAD's commit"))?
        .tree_id()
        .map_err(gix_err("reading HEAD's tree"))?;
    let mut index = git
        .index_from_tree(&tree)
        .map_err(gix_err("building git's index"))?;
    index
        // The umask decides the index file's mode, as for a repository without
        // `core.sharedRepository`.
        .write(
            gix::index::write::Options::default(),
            gix_fs::SharedPermissions::Umask,
        )
        .map_err(|e| GitError::Colocation {
            reason: format!(
                "cannot write git's index ({e}); if another git command is running, let it finish, then run `git reset` to bring the index up to date"
            ),
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_vcs::commit::CommitOptions;
    use lifeos_vcs::working_copy::NoProgress;
    use std::path::Path;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=G", "-c", "user.email=g@x"])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A git repository in `w` with one commit (`a.txt`), colocated with a new lifeos
    /// repository.
    fn colocated(w: &Path) -> Repo {
        git(w, &["init", "-q", "-b", "main"]);
        std::fs::write(w.join("a.txt"), "a\n").unwrap();
        git(w, &["add", "a.txt"]);
        git(w, &["commit", "-q", "-m", "first"]);
        let repo = Repo::init(w, lifeos_store::StoreConfig::default()).unwrap();
        colocate(repo).unwrap().0
    }

    /// A `git commit` that lands between a lifeos command's import and its export keeps
    /// its place in git; lifeos imports it next, and keeps its own commit too.
    #[test]
    fn a_git_commit_landing_while_lifeos_runs_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        let repo = colocated(w);
        assert_eq!(
            repo.dot_dir(),
            w.canonicalize().unwrap().join(".git/lifeos")
        );

        // A lifeos command starts: git's state is imported.
        assert_eq!(sync_in(&repo).unwrap(), None);
        // git commits meanwhile.
        std::fs::write(w.join("b.txt"), "b\n").unwrap();
        git(w, &["add", "b.txt"]);
        git(w, &["commit", "-q", "-m", "from git"]);
        let from_git = git(w, &["rev-parse", "main"]);
        // The lifeos command records its commit and exports.
        std::fs::write(w.join("c.txt"), "c\n").unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let opts = CommitOptions {
            message: b"from lifeos",
            ..CommitOptions::default()
        };
        let ours = repo
            .commit_working_copy(&wc, &opts, &NoProgress)
            .unwrap()
            .commit
            .unwrap();
        drop(wc);
        let out = sync_out(&repo).unwrap();
        assert_eq!(out.conflicts.len(), 1, "{out:?}");
        assert_eq!(out.conflicts[0].0, "refs/heads/main");
        assert_eq!(git(w, &["rev-parse", "main"]), from_git);

        // The next command imports git's commit; lifeos's is still a head.
        assert!(sync_in(&repo).unwrap().is_some());
        let view = repo.head().unwrap().view;
        let main = repo.commit(&view.branch("main").unwrap()).unwrap();
        assert_eq!(main.message, b"from git\n");
        assert!(
            view.heads.contains(&ours),
            "lifeos's commit is still a head"
        );
        sync_out(&repo).unwrap();
        assert_eq!(git(w, &["rev-parse", "main"]), from_git);
    }

    /// `reindex` rebuilds the git map of a colocated repository row for row, even when
    /// its catalog was deleted (then no old map says it had one), and makes none for a
    /// repository that never met git.
    #[test]
    fn reindex_rebuilds_the_git_map_only_where_there_was_one() {
        use lifeos_catalog::CatalogExt;
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        let repo = colocated(w);
        let rows = repo.catalog().unwrap().git_map_len().unwrap();
        assert!(rows >= 3, "a commit, a tree and a blob: {rows}");
        std::fs::remove_file(repo.catalog_path()).unwrap();
        let again = crate::reindex(&repo).unwrap();
        assert_eq!(again.catalog.git_map_len().unwrap(), rows);
        assert!(again.git_rows >= rows);

        let plain = tempfile::tempdir().unwrap();
        let repo = Repo::init(plain.path(), lifeos_store::StoreConfig::default()).unwrap();
        std::fs::write(plain.path().join("a.txt"), "a\n").unwrap();
        lifeos_vcs::testing::commit_folder(&repo, b"a");
        let r = crate::reindex(&repo).unwrap();
        assert_eq!((r.git_rows, r.catalog.git_map_len().unwrap()), (0, 0));
        assert_eq!(r.catalog.op_count().unwrap(), 2);
    }

    #[test]
    fn synced_state_round_trips() {
        let mut s = Synced {
            op: Some(Id::hash(b"op")),
            head: Some(GitHead::Branch("main".into())),
            refs: BTreeMap::new(),
            index: None,
        };
        s.refs.insert(
            "refs/heads/main".into(),
            ObjectId::from_hex(b"0123456789abcdef0123456789abcdef01234567").unwrap(),
        );
        assert_eq!(Synced::decode(&s.encode()), Some(s.clone()));
        s.head = Some(GitHead::Detached(s.refs["refs/heads/main"]));
        s.op = None;
        assert_eq!(Synced::decode(&s.encode()), Some(s.clone()));
        s.index = Some(s.refs["refs/heads/main"]);
        assert_eq!(Synced::decode(&s.encode()), Some(s.clone()));
        assert!(s.encode().starts_with("lifeos-git-synced 2\n"));
        // A version-1 file (no index line) still reads.
        let v1 = "lifeos-git-synced 1\nhead ref: refs/heads/main\n";
        assert_eq!(
            Synced::decode(v1).map(|s| (s.head, s.index)),
            Some((Some(GitHead::Branch("main".into())), None))
        );
        assert_eq!(Synced::decode("something else\n"), None);
    }
}
