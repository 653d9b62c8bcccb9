//! A snapshot that edits the tree the stat cache names instead of building a new one.
//!
//! When the stat cache names the tree a snapshot made of exactly its entries (FORMAT 9.1)
//! and that tree is the base of the next snapshot, the folder differs from it only where
//! the scan and the cache disagree: paths the cache does not trust, paths it does not
//! have, and paths it has that are gone. The new tree is the base with those paths
//! edited, reading and writing only the trees on their way; every other path keeps its
//! entry. The result is the tree the whole snapshot would build (its trees are made the
//! same way: sorted entries, no git bytes), so the two can be compared in tests.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStrExt;

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::object::{EntryKind, Tree, TreeEntry};
use crate::path::valid_name;
use crate::path::{display, in_folder, join, BString};
use crate::repo::Repo;
use crate::working_copy::snapshot::untrusted;
use crate::working_copy::stat_cache::{NewCache, StatCache};
use crate::working_copy::{CacheEntry, Scan, Snapshot, SnapshotProgress, Stat};

/// A change to one path of a tree: its new entry, or `None` to remove it.
pub(crate) type Edit<'a> = (&'a [u8], Option<TreeEntry>);

/// A scan limited to some paths, for [`Repo::snapshot_edits`]: what the base tree has
/// there stands in for the stat cache.
pub(crate) struct PartialScan {
    /// The base tree's files at or below the paths looked at, in path order, as cache
    /// entries no file's metadata matches (every file found there is read).
    pub entries: Vec<(BString, CacheEntry)>,
    /// The folder's files and bytes, as the monitor's side file has them.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

impl Repo {
    /// The snapshot of a folder whose stat cache `old` with `since` patched in
    /// ([`Repo::cache_changes_for`]; empty when `old` names it) is the cache for `base`,
    /// made by editing `base` where the scan and the cache disagree. `Ok(Err(scan))` gives
    /// the scan back when a file could not be read: the whole snapshot then says what
    /// happened to it (files already stored stay in `tx`, and are found there again). The
    /// new cache is `old` with `since` and the changed paths patched in, not a map of
    /// every path.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn snapshot_edits(
        &self,
        tx: &mut Transaction<'_>,
        base: &Id,
        old: StatCache,
        since: &BTreeMap<Vec<u8>, Option<CacheEntry>>,
        mut scanned: Scan,
        scope: Option<PartialScan>,
        started_ns: i128,
        progress: &dyn SnapshotProgress,
    ) -> Result<std::result::Result<Snapshot, Scan>> {
        // The entries the scan looked at: the whole cache (walked in place: a list of
        // every entry of a large cache would cost ~100 bytes a file), or a limited scan's.
        let in_scope = || -> Box<dyn Iterator<Item = (&[u8], CacheEntry)> + '_> {
            match &scope {
                Some(s) => Box::new(s.entries.iter().map(|(p, e)| (p.as_slice(), e.clone()))),
                None => Box::new(crate::working_copy::stat_cache::patched(&old, since)),
            }
        };
        // A tracked path hidden by an ignore rule is still recorded (FORMAT 9.3); if it
        // cannot be read, the whole snapshot keeps its recorded version.
        self.keep_tracked(in_scope().map(|(p, _)| p), &mut scanned);
        if !scanned.unreadable.is_empty() {
            return Ok(Err(scanned));
        }
        let found = &scanned.found;
        // What the cache trusts keeps its entry; the rest is read, and what the cache has
        // that the scan did not find is gone.
        let sides = untrusted(found, in_scope(), old.recorded_at_ns());
        let gone: Vec<&[u8]> = sides.gone.iter().map(|(p, _)| *p).collect();
        let (links, to_read): (Vec<usize>, Vec<usize>) = sides
            .files
            .iter()
            .map(|(i, _)| *i)
            .partition(|&i| found[i].meta.is_symlink());
        // The folder's files and bytes: the scan's, with those of the cache's entries
        // outside a limited scan.
        let (outside_files, outside_bytes) = match &scope {
            Some(s) => (
                s.files.saturating_sub(s.entries.len() as u64),
                s.bytes
                    .saturating_sub(in_scope().map(|(_, c)| c.size).sum::<u64>()),
            ),
            None => (0, 0),
        };
        let total: u64 = found.iter().map(|f| f.meta.size).sum();
        let read_bytes: u64 = to_read.iter().map(|&i| found[i].meta.size).sum();
        progress.scanned(
            outside_files + found.len() as u64,
            outside_bytes + total,
            to_read.len() as u64,
            read_bytes,
        );
        // What was read: kind, id, and metadata as read.
        let mut ids: HashMap<usize, (EntryKind, Id)> = HashMap::new();
        let mut metas: HashMap<usize, Stat> = HashMap::with_capacity(to_read.len());
        for &i in &links {
            let Ok(target) = std::fs::read_link(in_folder(self.workdir(), &found[i].path)) else {
                return Ok(Err(scanned));
            };
            let id = tx.write_object(Kind::Chunk, target.as_os_str().as_bytes())?;
            ids.insert(i, (EntryKind::Symlink, id));
        }
        let paths: Vec<_> = to_read
            .iter()
            .map(|&i| in_folder(self.workdir(), &found[i].path))
            .collect();
        let mut read = Vec::with_capacity(to_read.len());
        let mut bytes_read = 0;
        for (&i, res) in to_read
            .iter()
            .zip(tx.store_files(&paths, &|n| progress.read(n))?)
        {
            match res {
                Ok(stored) => {
                    let kind = if stored.stat.executable() {
                        EntryKind::Executable
                    } else {
                        EntryKind::File
                    };
                    ids.insert(i, (kind, stored.id));
                    metas.insert(i, stored.stat);
                    bytes_read += stored.size;
                    read.push((
                        BString::from(found[i].path.as_slice()),
                        stored.id,
                        stored.size,
                    ));
                }
                Err(
                    lifeos_store::StoreError::Io { .. } | lifeos_store::StoreError::Unstable(_),
                ) => return Ok(Err(scanned)),
                Err(e) => return Err(e.into()),
            }
        }
        // The edits, in path order: what was read or re-read, and what is gone; and the
        // same changes to the cache.
        let mut edits: Vec<Edit<'_>> = gone.iter().map(|p| (*p, None)).collect();
        let mut changes = since.clone();
        changes.extend(gone.iter().map(|p| (p.to_vec(), None)));
        for &i in links.iter().chain(&to_read) {
            let (kind, id) = ids[&i];
            let meta = metas.get(&i).unwrap_or(&found[i].meta);
            let size = meta.size;
            changes.insert(
                found[i].path.clone(),
                Some(CacheEntry::from_meta(meta, kind, id)),
            );
            edits.push((
                found[i].path.as_slice(),
                Some(TreeEntry {
                    name: Vec::new(),
                    kind,
                    id,
                    size,
                }),
            ));
        }
        edits.sort_by(|a, b| a.0.cmp(b.0));
        // A file read whose content is what the cache has (not for a path the cache's tree
        // and `base` differ at): only its metadata changed.
        let refreshes = sides.files.iter().any(|(i, cached)| {
            cached.as_ref().is_some_and(|c| {
                ids.get(i) == Some(&(c.kind, c.id)) && !since.contains_key(&found[*i].path)
            })
        });
        let state_changed = !(edits.is_empty() && since.is_empty()) && scope.is_none();
        let tree = if edits.is_empty() {
            *base
        } else {
            match self.edit_tree(tx, Some(base), edits, b"")? {
                Some((id, _)) => id,
                None => tx.write_object(Kind::Tree, &Tree::default().encode())?,
            }
        };
        let bytes: u64 = found
            .iter()
            .enumerate()
            .map(|(i, f)| metas.get(&i).unwrap_or(&f.meta).size)
            .sum();
        Ok(Ok(Snapshot {
            tree,
            files: outside_files + found.len() as u64,
            bytes: outside_bytes + bytes,
            files_read: to_read.len() as u64,
            bytes_read,
            skipped: scanned.skipped,
            unreadable: Vec::new(),
            // The cache read, with what changed: every other entry is as it was (a
            // trusted entry's metadata is the file's), now recorded at this snapshot. A
            // limited scan leaves the cache as it is (the monitor's side file vouches
            // for the folder; a later full scan reads again what changed since).
            state: scope.is_none().then_some(NewCache::Patched {
                old,
                changes,
                recorded_at_ns: started_ns,
                tree: Some(tree),
                refreshes,
            }),
            state_changed,
            read,
            monitor: None,
            shared_inodes: scanned.shared_inodes,
        }))
    }

    /// Writes tree `tree` (`None`: empty) with `edits` (paths below it, sorted, each once)
    /// applied, reading only the trees on their way; returns the new tree and its total
    /// size, or `None` when nothing is left in it. `prefix` is the tree's path, for errors.
    pub(crate) fn edit_tree(
        &self,
        tx: &mut Transaction<'_>,
        tree: Option<&Id>,
        edits: Vec<Edit<'_>>,
        prefix: &[u8],
    ) -> Result<Option<(Id, u64)>> {
        let mut entries: BTreeMap<Vec<u8>, TreeEntry> = match tree {
            Some(t) => self
                .tree_tx(tx, t)?
                .entries
                .into_iter()
                .map(|e| (e.name.clone(), e))
                .collect(),
            None => BTreeMap::new(),
        };
        // By name in this tree: the edit of the name itself, and the edits below it.
        type Group<'a> = (Option<Option<TreeEntry>>, Vec<Edit<'a>>);
        let mut groups: BTreeMap<&[u8], Group<'_>> = BTreeMap::new();
        for (path, e) in edits {
            match path.iter().position(|b| *b == b'/') {
                None => groups.entry(path).or_default().0 = Some(e),
                Some(i) => groups
                    .entry(&path[..i])
                    .or_default()
                    .1
                    .push((&path[i + 1..], e)),
            }
        }
        for (name, (own, below)) in groups {
            let path = join(prefix, name);
            let bad = |reason: String| VcsError::BadPath {
                path: display(&path).into_owned(),
                reason,
            };
            valid_name(name).map_err(bad)?;
            // A file that became a folder goes before the folder is made.
            if matches!(own, Some(None)) {
                entries.remove(name);
            }
            if !below.is_empty() {
                let sub = match entries.get(name) {
                    Some(e) if e.kind == EntryKind::Dir => Some(e.id),
                    Some(_) => return Err(bad("a parent is a file".into())),
                    None => None,
                };
                match self.edit_tree(tx, sub.as_ref(), below, &path)? {
                    Some((id, size)) => {
                        entries.insert(
                            name.to_vec(),
                            TreeEntry {
                                name: name.to_vec(),
                                kind: EntryKind::Dir,
                                id,
                                size,
                            },
                        );
                    }
                    None => {
                        entries.remove(name);
                    }
                }
            }
            if let Some(Some(e)) = own {
                if entries.get(name).is_some_and(|x| x.kind == EntryKind::Dir) {
                    return Err(bad("a folder holds files there".into()));
                }
                entries.insert(
                    name.to_vec(),
                    TreeEntry {
                        name: name.to_vec(),
                        ..e
                    },
                );
            }
        }
        if entries.is_empty() {
            return Ok(None);
        }
        let tree = Tree {
            entries: entries.into_values().collect(),
            git_raw: None,
        };
        let size = tree.total_size();
        Ok(Some((tx.write_object(Kind::Tree, &tree.encode())?, size)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::CommitOptions;
    use crate::working_copy::NoProgress;
    use std::path::Path;

    /// Paths that share prefixes in every way that orders differently as paths and as
    /// tree names (`a`, `a-b`, `a.txt`, `a/…`), and a file that can become a folder.
    const PATHS: &[&str] = &["a", "a/x", "a/y/z", "a-b", "a.txt", "b", "c/d/e", "c/f"];

    #[derive(Debug, Clone)]
    enum Op {
        Write(usize, u8),
        Link(usize),
        Exec(usize),
        Remove(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let i = 0..PATHS.len();
        prop_oneof![
            (i.clone(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b)),
            i.clone().prop_map(Op::Link),
            i.clone().prop_map(Op::Exec),
            i.prop_map(Op::Remove),
        ]
    }

    fn apply(root: &Path, op: &Op) {
        use std::os::unix::fs::PermissionsExt;
        match *op {
            Op::Write(i, b) => {
                crate::testing::clear_way(root, PATHS[i].as_bytes()).unwrap();
                std::fs::write(root.join(PATHS[i]), [b]).unwrap();
            }
            Op::Link(i) => {
                crate::testing::clear_way(root, PATHS[i].as_bytes()).unwrap();
                std::os::unix::fs::symlink("elsewhere", root.join(PATHS[i])).unwrap();
            }
            Op::Exec(i) => {
                let p = root.join(PATHS[i]);
                if p.symlink_metadata().is_ok_and(|m| m.is_file()) {
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
                }
            }
            Op::Remove(i) => {
                let p = root.join(PATHS[i]);
                if p.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                    std::fs::remove_file(&p).unwrap();
                }
            }
        }
    }

    /// Commits the folder; returns the tree recorded.
    fn commit_all(repo: &Repo, wc: &crate::working_copy::moves::WorkingCopyLock) -> Id {
        let opts = CommitOptions {
            message: b"m",
            ..CommitOptions::default()
        };
        repo.commit_working_copy(wc, &opts, &NoProgress)
            .unwrap()
            .snapshot
            .tree
    }

    /// A cache saved for an older tree vouches for no path where that tree and `@`'s
    /// differ: those become `@`'s entries never trusted (so the file is read even if its
    /// metadata is what the cache recorded), or none where `@` has no file.
    #[test]
    fn an_older_cache_vouches_for_no_path_where_the_trees_differ() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let commit = || commit_all(&repo, &wc);
        for (p, b) in [("a", "1"), ("b", "2"), ("d/e", "3")] {
            crate::testing::clear_way(root, p.as_bytes()).unwrap();
            std::fs::write(root.join(p), b).unwrap();
        }
        let first = commit();
        let older = repo.stat_cache();
        std::fs::write(root.join("a"), b"changed").unwrap();
        std::fs::remove_file(root.join("b")).unwrap();
        std::fs::write(root.join("c"), b"new").unwrap();
        let base = commit();
        let flat = repo.flatten(&base).unwrap();
        let changes = repo.cache_changes_for(&base, &older).unwrap().unwrap();
        let never = |p: &str| Some(CacheEntry::never_trusted(&flat[p.as_bytes()]));
        let want: Vec<(Vec<u8>, Option<CacheEntry>)> = vec![
            (b"a".to_vec(), never("a")),
            (b"b".to_vec(), None),
            (b"c".to_vec(), never("c")),
        ];
        assert_eq!(changes.into_iter().collect::<Vec<_>>(), want);
        assert!(repo
            .cache_changes_for(&first, &older)
            .unwrap()
            .unwrap()
            .is_empty());
    }

    /// A commit that changes a few paths leaves the stat cache as it was: it names the
    /// older tree, and status reads those paths again. The paths add up over such
    /// commits; a commit past 64 paths, or 8 MiB, saves a cache naming its tree. Status
    /// is right throughout, also for an edit the waiting cache's entry would match.
    #[test]
    fn a_small_change_leaves_the_cache_to_wait_until_the_changes_add_up() {
        use crate::treediff::ChangeKind::Modified;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        let wc = repo.lock_working_copy().unwrap();
        let commit = || commit_all(&repo, &wc);
        let status = || {
            let st = repo.status(&wc).unwrap();
            st.changes
                .iter()
                .map(|c| (c.path.to_vec(), c.kind))
                .collect::<Vec<_>>()
        };
        let unchanged = |saved: &[u8]| std::fs::read(repo.state_path()).unwrap() == saved;
        // Files written long ago are not racily clean once a cache is saved.
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let write_old = |name: &str, content: &[u8], when: std::time::SystemTime| {
            crate::testing::write_at(root, name, content, when)
        };
        write_old("a", b"1", long_ago);
        write_old("b", b"2", long_ago);
        let first = commit();
        let saved = std::fs::read(repo.state_path()).unwrap();
        assert_eq!(repo.stat_cache().tree(), Some(first));
        // A monitor's side file tied to that cache, as a watcher would have left it.
        repo.save_side_file(&crate::working_copy::fsmonitor::SideFile {
            token: crate::working_copy::types::Token {
                instance: 1,
                seq: 1,
            },
            tree: first,
            cache_sum: repo.cache_sum().unwrap(),
            files: 2,
            bytes: 2,
            skipped: Vec::new(),
        });
        let side = repo
            .dot_dir()
            .join(crate::working_copy::fsmonitor::SIDE_FILE);
        assert!(side.exists());
        std::fs::write(root.join("a"), b"3").unwrap();
        let second = commit();
        assert_ne!(second, first);
        assert!(unchanged(&saved), "left as it was");
        assert!(
            !side.exists(),
            "the token tied to the waiting cache is dropped"
        );
        assert_eq!(status(), []);
        // Back to the content the waiting cache recorded for `a` (with a new mtime): a
        // change against `@`.
        std::fs::write(root.join("a"), b"1").unwrap();
        assert_eq!(status(), [(b"a".to_vec(), Modified)]);
        std::fs::write(root.join("a"), b"3").unwrap();
        assert_eq!(status(), []);
        // 63 more paths, and `a`, read again as the cache's tree has another version:
        // 64, waiting.
        for i in 0..63 {
            write_old(&format!("n{i:02}"), b"n", long_ago);
        }
        commit();
        assert!(unchanged(&saved), "64 paths: left as it was");
        assert_eq!(status(), []);
        for i in 0..65 {
            write_old(&format!("m{i:02}"), b"m", long_ago);
        }
        let saving = commit();
        assert_eq!(
            repo.stat_cache().tree(),
            Some(saving),
            "over 64 paths: saved"
        );
        assert_eq!(status(), []);
        // Right after a save, nothing waits: a file touched, its content the same, is the
        // only thing the commit reads, and it saves the cache so that the file is not read
        // again each time.
        let just_saved = std::fs::read(repo.state_path()).unwrap();
        write_old("b", b"2", long_ago - std::time::Duration::from_secs(60));
        let touched = commit();
        assert!(!unchanged(&just_saved), "refreshed: saved");
        assert_eq!(repo.stat_cache().tree(), Some(touched));
        let refreshed = std::fs::read(repo.state_path()).unwrap();
        write_old("a", b"5", long_ago);
        commit();
        assert!(unchanged(&refreshed), "one path: waiting again");
        // One large file is enough.
        write_old("big", &vec![7u8; (8 << 20) + 1], long_ago);
        let large = commit();
        assert_eq!(repo.stat_cache().tree(), Some(large), "over 8 MiB: saved");
        assert_eq!(status(), []);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Status through the stat cache (only the files it does not trust read) is the
        /// status of the whole comparison (`@`'s tree flattened, every path mapped), with
        /// the cache saved for `@`'s tree or for an older one (as after commits made
        /// through the monitor, which do not save it); a commit through an older cache
        /// records the tree a whole snapshot makes, and saves a cache the next rounds'
        /// status checks.
        #[test]
        fn status_through_the_cache_is_the_whole_comparison(
            rounds in proptest::collection::vec(
                (proptest::collection::vec(op(), 0..5), proptest::bool::ANY, 0..3usize), 1..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
            std::fs::write(root.join("keep"), b"k").unwrap();
            let wc = repo.lock_working_copy().unwrap();
            let commit = || {
                let opts = CommitOptions {
                    message: b"m",
                    allow_empty: true,
                    ..CommitOptions::default()
                };
                repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
                std::fs::read(repo.state_path()).unwrap()
            };
            let mut caches = vec![commit()];
            for (ops, commit_after, older) in &rounds {
                for op in ops {
                    apply(root, op);
                }
                let saved = std::fs::read(repo.state_path()).unwrap();
                if let Some(old) = caches.len().checked_sub(1 + older).map(|i| &caches[i]) {
                    std::fs::write(repo.state_path(), old).unwrap();
                }
                let through_cache = repo.status(&wc).unwrap();
                let mut state = repo.load_wc_state();
                state.tree = None;
                repo.save_wc_state(&state).unwrap();
                let whole = repo.status(&wc).unwrap();
                proptest::prop_assert_eq!(through_cache.changes, whole.changes);
                proptest::prop_assert_eq!(through_cache.unreadable, whole.unreadable);
                if *commit_after {
                    // The older cache again, if one was taken.
                    let older_cache = caches.len().checked_sub(1 + older).map(|i| &caches[i]);
                    std::fs::write(repo.state_path(), older_cache.unwrap_or(&saved)).unwrap();
                    let head = repo.head().unwrap();
                    let base = repo.at_tree(&head.view).unwrap();
                    let mut tx = repo.store().transaction().unwrap();
                    let through_cache = repo.snapshot(&mut tx, base.as_ref(), &NoProgress).unwrap();
                    let mut state = repo.load_wc_state();
                    state.tree = None;
                    repo.save_wc_state(&state).unwrap();
                    let whole = repo.snapshot(&mut tx, base.as_ref(), &NoProgress).unwrap();
                    proptest::prop_assert_eq!(through_cache.tree, whole.tree);
                    proptest::prop_assert_eq!(through_cache.files, whole.files);
                    drop(tx);
                    std::fs::write(repo.state_path(), older_cache.unwrap_or(&saved)).unwrap();
                    caches.push(commit());
                } else {
                    std::fs::write(repo.state_path(), saved).unwrap();
                }
            }
        }

        /// Editing the tree the cache names gives the tree a whole snapshot builds.
        #[test]
        fn an_edited_tree_is_the_tree_a_whole_snapshot_builds(
            rounds in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..5),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
            std::fs::write(root.join("keep"), b"k").unwrap();
            let commit = || {
                let wc = repo.lock_working_copy().unwrap();
                let opts = CommitOptions {
                    message: b"m",
                    allow_empty: true,
                    ..CommitOptions::default()
                };
                repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap()
            };
            commit();
            for ops in &rounds {
                let head = repo.head().unwrap();
                proptest::prop_assert_eq!(repo.stat_cache().tree(), repo.at_tree(&head.view).unwrap(), "the cache names @'s tree: the next snapshot edits it");
                for op in ops {
                    apply(root, op);
                }
                let edited = commit();
                // The whole snapshot, with a cache that names no tree.
                let mut state = repo.load_wc_state();
                state.tree = None;
                repo.save_wc_state(&state).unwrap();
                let head = repo.head().unwrap();
                let base = repo.at_tree(&head.view).unwrap();
                let mut tx = repo.store().transaction().unwrap();
                let whole = repo.snapshot(&mut tx, base.as_ref(), &NoProgress).unwrap();
                proptest::prop_assert_eq!(whole.tree, edited.snapshot.tree);
                proptest::prop_assert_eq!(whole.files, edited.snapshot.files);
                proptest::prop_assert_eq!(whole.bytes, edited.snapshot.bytes);
                let made = edited.snapshot.state.map(|s| s.into_state());
                proptest::prop_assert_eq!(
                    whole.state.map(|s| s.into_state().entries),
                    made.as_ref().map(|s| s.entries.clone()).or_else(|| Some(repo.load_wc_state().entries))
                );
                drop(tx);
                // Back to a cache that names the tree, for the next round's edits: the one
                // the commit made (saved, or left to wait), or the one that stood.
                let state = made.unwrap_or_else(|| {
                    let mut state = repo.load_wc_state();
                    state.tree = Some(edited.snapshot.tree);
                    state
                });
                repo.save_wc_state(&state).unwrap();
            }
        }
    }
}
