//! Many commits at once: each its own commit and operation, written in one transaction.
//!
//! A commit of the folder pays for a scan, the stat cache and the durability of its own
//! transaction (the pack, the index layer, the head file, each synced). A caller that
//! already knows the files each commit changes (an import of another tool's history, or
//! a bench that needs a history of 100,000 operations) gives them here: the commits are
//! written as the folder's commits would be (one operation each, on `@` and its
//! branch, with the given times), the transaction is made durable once, and only the
//! last operation becomes a head; the others are its ancestors in the operation log.
//! The folder, which must have no uncommitted change, is then moved to the last commit
//! as `checkout` moves it.

use lifeos_store::{Id, Kind};

use std::collections::BTreeMap;

use crate::commit::{HookNote, Recorded, Unstored};
use crate::error::{Result, VcsError};
use crate::object::{EntryKind, Tree, TreeEntry};
use crate::path::BString;
use crate::repo::Repo;
use crate::working_copy::moves::WorkingCopyLock;

/// One commit of a series: the files it writes (`None` removes the path, a file or a
/// folder, and is nothing when the path is absent), its message, and its time in
/// milliseconds since the epoch (the commit's; its operation's as
/// [`Repo::commit_series`] says).
#[derive(Debug, Clone)]
pub struct SeriesCommit {
    /// Paths (`/`-separated, relative to the folder) with their new bytes, or `None` to
    /// remove a file. A later write of the same path wins.
    pub files: Vec<(BString, Option<Vec<u8>>)>,
    /// The commit message.
    pub message: Vec<u8>,
    /// When it was made.
    pub time_ms: i64,
}

/// What [`Repo::commit_series`] recorded.
#[derive(Debug)]
pub struct SeriesOutcome {
    /// The last operation (the new head).
    pub op: Id,
    /// What the commit hooks said of the recorded files without stopping the commits.
    pub notes: Vec<HookNote>,
}

impl Repo {
    /// Records `commits`, oldest first, on top of `@` (moving the current branch, if any,
    /// with each), one operation per commit, in one transaction; then moves the folder to
    /// the last commit. Refused, with nothing written, when the folder has uncommitted
    /// changes or `commits` is empty.
    ///
    /// Each operation takes its commit's time, moved later when needed to end after the
    /// operation before it (`--at` reads the newest operation that ended by a time) and
    /// earlier to leave room for the rest before now; only a series with more commits
    /// than milliseconds since the last operation ends in the future.
    pub fn commit_series(
        &self,
        wc: &WorkingCopyLock,
        commits: &[SeriesCommit],
    ) -> Result<SeriesOutcome> {
        if commits.is_empty() {
            return Err(VcsError::Refused("no commit to record".into()));
        }
        let head = self.head()?;
        let st = self.status_in(&head.view)?;
        if !st.changes.is_empty() {
            return Err(VcsError::Uncommitted(crate::history::change_list(
                &st.changes,
            )));
        }
        let from = self.at_tree(&head.view)?;
        let mut tx = self.store().transaction()?;
        let mut view = head.view.clone();
        let mut parent_op = head.id;
        let mut parent_end = head.op.end_ms;
        let now = crate::repo::now_ms();
        let mut tree = from;
        // The files written so far, which derived entities are read from.
        let mut unstored: Unstored<'_> = Unstored::new();
        let mut notes = Vec::new();
        // Each operation is written once the next is made (the last one is published).
        let mut made: Option<crate::object::Operation> = None;
        for (i, c) in commits.iter().enumerate() {
            self.interrupt.check()?;
            if let Some(op) = made.take() {
                parent_op = tx.write_object(Kind::Operation, &op.encode())?;
            }
            // The last write of each path, in path order.
            let mut last_write: BTreeMap<&[u8], Option<&Vec<u8>>> = BTreeMap::new();
            for (path, bytes) in &c.files {
                last_write.insert(path.as_slice(), bytes.as_ref());
            }
            let mut files: Vec<(&[u8], Option<TreeEntry>)> = Vec::with_capacity(last_write.len());
            let mut read = Vec::new();
            for (path, bytes) in last_write {
                let entry = match bytes {
                    Some(b) => {
                        let id = tx.store_bytes(b)?;
                        unstored.insert(id, b);
                        read.push((BString::from(path), id, b.len() as u64));
                        Some(TreeEntry {
                            name: Vec::new(),
                            kind: EntryKind::File,
                            id,
                            size: b.len() as u64,
                        })
                    }
                    None => None,
                };
                files.push((path, entry));
            }
            let new = match self.edit_tree(&mut tx, tree.as_ref(), files, b"")? {
                Some((id, _)) => id,
                None => tx.write_object(Kind::Tree, &Tree::default().encode())?,
            };
            let mut events = Vec::new();
            let (id, commit) =
                self.commit_tree(&mut tx, &mut view, new, &c.message, &mut events, c.time_ms)?;
            let rec = Recorded {
                parent_tree: tree.as_ref(),
                tree: &new,
                commit: &id,
                read: &read,
                unstored: &unstored,
            };
            let report = self.run_commit_hooks(&mut tx, &mut view, &rec, None)?;
            events.extend(report.events);
            notes.extend(report.notes);
            let what = format!("commit: {}", commit.summary());
            tree = Some(new);
            let at = op_time(c.time_ms, parent_end, now, commits.len() - 1 - i);
            parent_end = at;
            made = Some(self.operation_record(
                &[parent_op],
                &mut tx,
                view.clone(),
                &what,
                events,
                (at, at),
            )?);
        }
        let last = made.expect("commits is not empty");
        let mv = self.plan_move(
            &tx,
            from.as_ref(),
            tree.as_ref(),
            &st.unreadable,
            "the commits being written",
        )?;
        let op = self.publish_op_and_move(wc, tx, last, &[head.id], mv)?;
        Ok(SeriesOutcome { op, notes })
    }
}

/// The time of an operation recording a commit made at `commit_ms`: that time, but
/// after its parent's end and early enough for the `left` operations after it to end
/// by `now`, each a millisecond apart; after the parent wins when there is no room.
fn op_time(commit_ms: i64, parent_end: i64, now: i64, left: usize) -> i64 {
    let room = now.saturating_sub(left as i64);
    commit_ms.min(room).max(parent_end.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::CommitOptions;
    use crate::working_copy::NoProgress;

    fn at(i: i64) -> i64 {
        1_767_225_600_000 + i * 60_000
    }

    fn write(path: &str, bytes: &str) -> (BString, Option<Vec<u8>>) {
        (path.into(), Some(bytes.as_bytes().to_vec()))
    }

    #[test]
    fn an_operation_time_is_its_commits_between_its_parent_and_what_the_rest_needs() {
        // In order and in the past: the commit's own time.
        assert_eq!(op_time(100, 50, 1_000, 5), 100);
        // Before its parent: just after it.
        assert_eq!(op_time(10, 50, 1_000, 5), 51);
        // Too close to now for the 5 after it: early enough for them.
        assert_eq!(op_time(999, 50, 1_000, 5), 995);
        assert_eq!(op_time(5_000, 50, 1_000, 0), 1_000);
        // No room at all: after the parent, even past now.
        assert_eq!(op_time(10, 999, 1_000, 5), 1_000);
    }

    fn file_at(repo: &Repo, op: &Id, path: &[u8]) -> Option<Vec<u8>> {
        let state = repo.op_state(op).unwrap();
        let tree = repo.at_tree(&state.view).unwrap()?;
        let e = repo.lookup_path(&tree, path).unwrap()?;
        let mut out = Vec::new();
        repo.store().read_file(&e.id, &mut out).unwrap();
        Some(out)
    }

    #[test]
    fn a_series_is_one_operation_per_commit_and_the_folder_ends_at_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        std::fs::write(root.join("x.txt"), b"x").unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let opts = CommitOptions {
            message: b"first",
            ..CommitOptions::default()
        };
        repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
        let before = repo.head().unwrap().id;
        // Room for the three operations between the first commit and now.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let series = [
            SeriesCommit {
                files: vec![write("notes/a.md", "one"), write("notes/a.md", "two")],
                message: b"a".to_vec(),
                time_ms: at(1),
            },
            SeriesCommit {
                files: vec![write("notes/a.md", "three"), ("x.txt".into(), None)],
                message: b"b".to_vec(),
                time_ms: at(2),
            },
            SeriesCommit {
                files: vec![write("deep/b/c.md", "c")],
                message: b"c".to_vec(),
                time_ms: at(3),
            },
        ];
        let last = repo.commit_series(&wc, &series).unwrap().op;
        assert_eq!(repo.op_heads().unwrap(), vec![last]);
        // Three operations, each the parent of the next. Their commits' times are before
        // the first commit's operation (made just now): each ends after its parent, so
        // `--at` never reads an older operation over a newer one, and none in the future
        // (there were milliseconds enough since the first commit).
        let mut ops = vec![last];
        for _ in 0..3 {
            ops.push(repo.operation(ops.last().unwrap()).unwrap().parents[0]);
        }
        assert_eq!(ops[3], before);
        ops.reverse();
        let now = crate::repo::now_ms();
        for w in ops.windows(2) {
            let (p, o) = (
                repo.operation(&w[0]).unwrap(),
                repo.operation(&w[1]).unwrap(),
            );
            assert_eq!(o.start_ms, o.end_ms);
            assert!(
                p.end_ms < o.end_ms && o.end_ms <= now,
                "{} {} {now}",
                p.end_ms,
                o.end_ms
            );
        }
        // Each operation's @ is its commit, on the branch, a child of the one before.
        let mut parent = repo.op_state(&before).unwrap().view.at_commit();
        for (op, c) in ops[1..].iter().zip(&series) {
            let view = repo.op_state(op).unwrap().view;
            let commit = repo.commit(&view.at_commit().unwrap()).unwrap();
            assert_eq!(commit.message, c.message);
            assert_eq!(commit.author.time, c.time_ms / 1000);
            assert_eq!(commit.parents, parent.into_iter().collect::<Vec<_>>());
            assert_eq!(view.branch("main"), view.at_commit());
            parent = view.at_commit();
        }
        assert_eq!(file_at(&repo, &ops[1], b"notes/a.md").unwrap(), b"two");
        assert_eq!(file_at(&repo, &ops[1], b"x.txt").unwrap(), b"x");
        assert_eq!(file_at(&repo, &ops[2], b"notes/a.md").unwrap(), b"three");
        assert_eq!(file_at(&repo, &ops[2], b"x.txt"), None);
        assert_eq!(file_at(&repo, &ops[3], b"deep/b/c.md").unwrap(), b"c");
        // The folder is the last commit's tree.
        assert_eq!(std::fs::read(root.join("notes/a.md")).unwrap(), b"three");
        assert_eq!(std::fs::read(root.join("deep/b/c.md")).unwrap(), b"c");
        assert!(!root.join("x.txt").exists());
        assert!(repo.status(&wc).unwrap().changes.is_empty());
    }

    /// A process stopped after a series' new head was written and before the head it
    /// replaces was removed leaves both; the next command drops the old one, however
    /// many operations below it lies, instead of recording a merge.
    #[test]
    fn an_interrupted_series_leaves_one_head() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let before = repo.head().unwrap().id;
        let series: Vec<SeriesCommit> = (0..200)
            .map(|i| SeriesCommit {
                files: vec![write("n.md", &i.to_string())],
                message: b"m".to_vec(),
                time_ms: at(i),
            })
            .collect();
        let last = repo.commit_series(&wc, &series).unwrap().op;
        let heads = dir.path().join(".lifeos").join(crate::layout::OP_HEADS_DIR);
        std::fs::write(heads.join(before.to_hex()), b"").unwrap();
        assert_eq!(repo.op_heads().unwrap().len(), 2);
        assert_eq!(repo.head().unwrap().id, last);
        assert_eq!(repo.op_heads().unwrap(), vec![last]);
    }

    #[test]
    fn a_series_is_refused_over_uncommitted_changes_and_hostile_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let before = repo.head().unwrap().id;
        let one = |path: &str| {
            [SeriesCommit {
                files: vec![write(path, "x")],
                message: b"m".to_vec(),
                time_ms: at(1),
            }]
        };
        for path in ["../out", "/abs", "a/../b", "a//b"] {
            let res = repo.commit_series(&wc, &one(path));
            assert!(
                matches!(res, Err(VcsError::BadPath { .. })),
                "{path}: {res:?}"
            );
        }
        // A tree may hold it, but the folder's copy of the repository is never written.
        for hostile in [".lifeos/x", ".git", "a/.GIT/config"] {
            let res = repo.commit_series(&wc, &one(hostile));
            assert!(
                matches!(&res, Err(VcsError::RefusedEntry { path, .. }) if path == hostile),
                "{res:?}"
            );
            assert!(!root.join(hostile).exists());
        }
        assert_eq!(repo.op_heads().unwrap(), vec![before]);
        let err = repo.commit_series(&wc, &one("a/b")).map(|_| ());
        assert!(err.is_ok());
        let err = repo.commit_series(&wc, &one("a/b/c")).unwrap_err();
        assert!(matches!(err, VcsError::BadPath { .. }), "{err}");
        let head = repo.head().unwrap().id;
        std::fs::write(root.join("new.txt"), b"n").unwrap();
        let err = repo.commit_series(&wc, &one("z")).unwrap_err();
        assert!(matches!(err, VcsError::Uncommitted(_)), "{err}");
        assert_eq!(repo.op_heads().unwrap(), vec![head]);
        assert_ne!(head, before);
        assert!(repo.commit_series(&wc, &[]).is_err());
        assert!(!root.join("out").exists() && !dir.path().parent().unwrap().join("out").exists());
    }
}
