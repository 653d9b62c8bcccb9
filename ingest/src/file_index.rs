//! A tree's files indexed by content, and the copies of the large ones kept in
//! `.lifeos/file_index/` (FORMAT 12.10).
//!
//! A search at a version asks of each hit whether its content is a file of that version
//! and at which paths, and matches every path against the words. Reading the 400 trees of
//! 100,000 files, then building a set of their contents, was two thirds of a search; one
//! read of this index (a few MB, checked whole) replaces both.

use std::io::Write;
use std::path::{Path, PathBuf};

use lifeos_store::Id;

use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::object::EntryKind;
use lifeos_vcs::repo::Repo;

/// A tree with this many files or more has its index kept.
pub const KEPT_FROM: usize = 10_000;

/// At most this many indexes are kept: those written last.
pub const KEPT_INDEXES: usize = 4;

/// A temp file this old in `file_index/` was left by a writer that died: removed.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The directory of kept indexes, inside `.lifeos`.
pub const FILE_INDEX_DIR: &str = "file_index";

const MAGIC: &[u8; 4] = b"LFIX";
const VERSION: u8 = 1;
/// Magic, version, 3 zero bytes, the tree id, the file count.
const HEADER: usize = 4 + 4 + 32 + 4;

/// The files (not symlinks nor gitlinks) below a tree: their paths relative to it, in
/// path order, and their contents sorted, each way to the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIndex {
    /// The stored form (12.10), checked.
    bytes: Vec<u8>,
    n: usize,
}

/// Where each part of the stored form starts.
struct Layout {
    sorted: usize,
    sorted_path: usize,
    path_content: usize,
    ends: usize,
    paths: usize,
}

impl Layout {
    fn of(n: usize) -> Option<Layout> {
        let sorted = HEADER;
        let sorted_path = sorted.checked_add(n.checked_mul(32)?)?;
        let path_content = sorted_path.checked_add(n.checked_mul(4)?)?;
        let ends = path_content.checked_add(n.checked_mul(4)?)?;
        let paths = ends.checked_add(n.checked_mul(4)?)?;
        Some(Layout {
            sorted,
            sorted_path,
            path_content,
            ends,
            paths,
        })
    }
}

/// How two paths of one tree compare in the order a walk of it meets them: folder by
/// folder, each name bytewise (so `a/b` before `a-b`, unlike the paths' bytes).
fn walk_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.split(|c| *c == b'/').cmp(b.split(|c| *c == b'/'))
}

fn u32_at(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w) as usize
}

impl FileIndex {
    /// The index of tree `tree` from its files (path, content) in path order.
    fn build(tree: &Id, files: &[(Vec<u8>, Id)]) -> Option<FileIndex> {
        let n = files.len();
        let n32 = u32::try_from(n).ok()?;
        let mut order: Vec<u32> = (0..n32).collect();
        order.sort_unstable_by(|a, b| {
            files[*a as usize]
                .1
                .cmp(&files[*b as usize].1)
                .then(a.cmp(b))
        });
        let mut path_content = vec![0u32; n];
        for (at, k) in order.iter().enumerate() {
            path_content[*k as usize] = at as u32;
        }
        let path_bytes: usize = files.iter().map(|(p, _)| p.len()).sum();
        let mut b = Vec::with_capacity(HEADER + n * 44 + path_bytes + 32);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[VERSION, 0, 0, 0]);
        b.extend_from_slice(&tree.0);
        b.extend_from_slice(&n32.to_le_bytes());
        for k in &order {
            b.extend_from_slice(&files[*k as usize].1 .0);
        }
        for k in &order {
            b.extend_from_slice(&k.to_le_bytes());
        }
        for at in &path_content {
            b.extend_from_slice(&at.to_le_bytes());
        }
        let mut end = 0u32;
        for (p, _) in files {
            end = end.checked_add(u32::try_from(p.len()).ok()?)?;
            b.extend_from_slice(&end.to_le_bytes());
        }
        for (p, _) in files {
            b.extend_from_slice(p);
        }
        let sum = Id::hash(&b);
        b.extend_from_slice(&sum.0);
        Some(FileIndex { bytes: b, n })
    }

    /// The index of tree `tree` from its stored form; `None` if it is not one (damaged,
    /// cut, of another tree or another version), which the caller replaces.
    pub fn decode(bytes: Vec<u8>, tree: &Id) -> Option<FileIndex> {
        if bytes.len() < HEADER + 32
            || &bytes[..4] != MAGIC
            || bytes[4..8] != [VERSION, 0, 0, 0]
            || bytes[8..40] != tree.0
        {
            return None;
        }
        let n = u32_at(&bytes, 40);
        let l = Layout::of(n)?;
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if body.len() < l.paths || Id::hash(body).0 != sum {
            return None;
        }
        let paths_len = body.len() - l.paths;
        // Bounds only: every number read later is checked here, so no read can fall
        // outside the index; that the parts agree is what the checksum vouches for.
        let mut last = 0;
        for k in 0..n {
            let end = u32_at(body, l.ends + 4 * k);
            if end <= last || end > paths_len {
                return None;
            }
            last = end;
            if u32_at(body, l.sorted_path + 4 * k) >= n || u32_at(body, l.path_content + 4 * k) >= n
            {
                return None;
            }
        }
        if last != paths_len {
            return None;
        }
        Some(FileIndex { bytes, n })
    }

    /// How many files.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn layout(&self) -> Layout {
        Layout::of(self.n).expect("checked when made")
    }

    /// The path of file `k` (in path order, below [`FileIndex::len`]).
    pub fn path(&self, k: usize) -> &[u8] {
        let l = self.layout();
        let start = if k == 0 {
            0
        } else {
            u32_at(&self.bytes, l.ends + 4 * (k - 1))
        };
        let end = u32_at(&self.bytes, l.ends + 4 * k);
        &self.bytes[l.paths + start..l.paths + end]
    }

    fn sorted_id(&self, at: usize) -> Id {
        let s = self.layout().sorted + 32 * at;
        Id::from_slice(&self.bytes[s..s + 32]).expect("32 bytes")
    }

    /// The content of file `k` (in path order, below [`FileIndex::len`]).
    pub fn content(&self, k: usize) -> Id {
        let l = self.layout();
        self.sorted_id(u32_at(&self.bytes, l.path_content + 4 * k))
    }

    /// The different contents, in sorted order.
    pub fn contents(&self) -> impl Iterator<Item = Id> + '_ {
        (0..self.n)
            .filter(|at| *at == 0 || self.sorted_id(*at - 1) != self.sorted_id(*at))
            .map(|at| self.sorted_id(at))
    }

    /// Whether some file has content `id`.
    pub fn contains(&self, id: &Id) -> bool {
        self.first_at(id) < self.n && self.sorted_id(self.first_at(id)) == *id
    }

    /// Where the first content not below `id` is in sorted order.
    fn first_at(&self, id: &Id) -> usize {
        self.partition(|at| self.sorted_id(at) < *id, 0, self.n)
    }

    /// The first place in `lo..hi` where `before` no longer holds (it holds for a start of
    /// the range and not after).
    fn partition(&self, before: impl Fn(usize) -> bool, mut lo: usize, mut hi: usize) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether the file at `path` has content `id`: a binary search among the files of
    /// that content by path, in the order of the walk (each folder's names bytewise, as
    /// trees keep them), so a content at thousands of paths (empty files) costs a few
    /// comparisons, not one per path.
    pub fn holds(&self, id: &Id, path: &[u8]) -> bool {
        let l = self.layout();
        let first = self.first_at(id);
        let end = self.partition(|at| self.sorted_id(at) == *id, first, self.n);
        let file = |at: usize| u32_at(&self.bytes, l.sorted_path + 4 * at);
        let at = self.partition(
            |at| walk_order(self.path(file(at)), path).is_lt(),
            first,
            end,
        );
        at < end && self.path(file(at)) == path
    }

    /// The files (their numbers in path order) whose content is `id`, in path order.
    pub fn files_of(&self, id: &Id) -> impl Iterator<Item = usize> + '_ {
        let l = self.layout();
        let id = *id;
        (self.first_at(&id)..self.n)
            .take_while(move |at| self.sorted_id(*at) == id)
            .map(move |at| u32_at(&self.bytes, l.sorted_path + 4 * at))
    }
}

fn kept_path(repo: &Repo, tree: &Id) -> PathBuf {
    repo.dot_dir().join(FILE_INDEX_DIR).join(tree.to_hex())
}

/// The files below tree `tree`, indexed: the kept copy when there is one, else read
/// from the trees, and kept when there are [`KEPT_FROM`] or more.
pub fn of_tree(repo: &Repo, tree: &Id) -> Result<FileIndex> {
    kept_from(repo, tree, KEPT_FROM)
}

fn kept_from(repo: &Repo, tree: &Id, kept_from: usize) -> Result<FileIndex> {
    let path = kept_path(repo, tree);
    if let Ok(bytes) = std::fs::read(&path) {
        if let Some(index) = FileIndex::decode(bytes, tree) {
            return Ok(index);
        }
    }
    let mut files = Vec::new();
    repo.visit_files_below(tree, b"", &mut |p, e| {
        if !matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink) {
            files.push((p.to_vec(), e.id));
        }
        Ok(())
    })?;
    let index = FileIndex::build(tree, &files).ok_or_else(|| {
        VcsError::Refused(format!(
            "tree {} has more files or path bytes than a file index holds (2^32)",
            tree.to_hex()
        ))
    })?;
    if index.len() >= kept_from {
        // A copy that cannot be written only costs the next search the trees' read.
        let _ = keep(&path, &index.bytes);
    }
    Ok(index)
}

/// Writes a file of `file_index/` (a temp file renamed into place, not synced: a torn
/// copy fails its checksum and is made again).
fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", lifeos_store::fsutil::random_hex(6)));
    let written = std::fs::File::create_new(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes a kept index and removes all but the newest [`KEPT_INDEXES`].
fn keep(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write(path, bytes)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut kept: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir)?.filter_map(|e| e.ok()) {
        let Some(modified) = e.metadata().ok().and_then(|m| m.modified().ok()) else {
            continue;
        };
        let name = e.file_name();
        if name.len() == 64 {
            kept.push((modified, e.path()));
        } else if name.as_encoded_bytes().ends_with(b".tmp")
            && modified.elapsed().is_ok_and(|age| age > STALE_TMP)
        {
            // Left by a writer that died before renaming it.
            let _ = std::fs::remove_file(e.path());
        }
    }
    kept.sort();
    let extra = kept.len().saturating_sub(KEPT_INDEXES);
    for (_, old) in kept.into_iter().take(extra) {
        if old != path {
            let _ = std::fs::remove_file(old);
        }
    }
    Ok(())
}

/// A version of a file in a history: a path, its content, and the newest commit (in the
/// history's order) whose tree holds that content at that path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The path, relative to the root.
    pub path: Vec<u8>,
    /// The content.
    pub content: Id,
    /// The commit.
    pub commit: Id,
}

/// The history list's file, inside `file_index/`.
const HISTORY_FILE: &str = "history";
const HISTORY_MAGIC: &[u8; 4] = b"LFHI";
const HISTORY_VERSION: u8 = 1;

/// BLAKE3 of the ids of `commits`, in order.
fn order_hash(commits: &[(Id, lifeos_vcs::object::Commit)]) -> Id {
    let mut h = blake3::Hasher::new();
    for (id, _) in commits {
        h.update(&id.0);
    }
    Id::from(h.finalize())
}

/// The stored form of a history list (12.10): magic, version, 3 zero bytes, the order
/// hash, the count; per version its path's length (u32), the path, the content, the
/// commit; BLAKE3 of all before.
fn encode_history(order: &Id, versions: &[Version]) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    b.extend_from_slice(HISTORY_MAGIC);
    b.extend_from_slice(&[HISTORY_VERSION, 0, 0, 0]);
    b.extend_from_slice(&order.0);
    b.extend_from_slice(&u32::try_from(versions.len()).ok()?.to_le_bytes());
    for v in versions {
        b.extend_from_slice(&u32::try_from(v.path.len()).ok()?.to_le_bytes());
        b.extend_from_slice(&v.path);
        b.extend_from_slice(&v.content.0);
        b.extend_from_slice(&v.commit.0);
    }
    let sum = Id::hash(&b);
    b.extend_from_slice(&sum.0);
    Some(b)
}

/// A history list from its stored form, with the order hash it was made for; `None` if
/// it is not one.
fn decode_history(bytes: &[u8]) -> Option<(Id, Vec<Version>)> {
    if bytes.len() < HEADER + 32
        || &bytes[..4] != HISTORY_MAGIC
        || bytes[4..8] != [HISTORY_VERSION, 0, 0, 0]
    {
        return None;
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if Id::hash(body).0 != sum {
        return None;
    }
    let order = Id::from_slice(&body[8..40])?;
    let n = u32_at(body, 40);
    let mut at = HEADER;
    let mut versions = Vec::with_capacity(n.min(body.len() / 68));
    for _ in 0..n {
        let len = u32_at(body.get(at..at.checked_add(4)?)?, 0);
        let start = at + 4;
        let end = start.checked_add(len)?;
        let path = body.get(start..end)?.to_vec();
        let ids = body.get(end..end.checked_add(64)?)?;
        versions.push(Version {
            path,
            content: Id::from_slice(&ids[..32])?,
            commit: Id::from_slice(&ids[32..])?,
        });
        at = end + 64;
    }
    (at == body.len()).then_some((order, versions))
}

/// Every version of every file in the history `commits` (newest first, as
/// [`lifeos_vcs::rev::all_commits`] orders them), each (path, content) once with the
/// newest commit holding it: the newest commit's tree as its file index, and the
/// others in commit order (then path order within a commit).
///
/// The others are what each commit's tree holds that the one before it in that order
/// does not (a tree diff, which skips what did not change). They are kept in
/// `file_index/history` for that order; when the history is that one with a newer
/// commit first, one diff brings them up to date.
pub fn history_versions(
    repo: &Repo,
    commits: &[(Id, lifeos_vcs::object::Commit)],
) -> Result<Option<(FileIndex, Vec<Version>)>> {
    let Some(((_, newest), rest)) = commits.split_first() else {
        return Ok(None);
    };
    let index = of_tree(repo, &newest.tree)?;
    let in_newest = |v: &Version| index.holds(&v.content, &v.path);
    let order = order_hash(commits);
    let path = repo.dot_dir().join(FILE_INDEX_DIR).join(HISTORY_FILE);
    let kept = std::fs::read(&path).ok().and_then(|b| decode_history(&b));
    let versions = match kept {
        Some((o, versions)) if o == order => return Ok(Some((index, versions))),
        // One commit on top of the history kept: the versions of the commit below
        // it that it does not hold, then those kept that it does not hold.
        Some((o, kept)) if !rest.is_empty() && o == order_hash(rest) => {
            let mut versions = changes_held(repo, &newest.tree, &rest[0], &in_newest)?;
            versions.extend(kept.into_iter().filter(|v| !in_newest(v)));
            versions
        }
        _ => {
            let mut versions = Vec::new();
            let mut seen: std::collections::HashSet<(Vec<u8>, Id)> = Default::default();
            let mut before = newest.tree;
            for c in rest {
                for v in changes_held(repo, &before, c, &in_newest)? {
                    if seen.insert((v.path.clone(), v.content)) {
                        versions.push(v);
                    }
                }
                before = c.1.tree;
            }
            versions
        }
    };
    // A list that cannot be kept only costs the next search the diffs.
    if let Some(b) = encode_history(&order, &versions) {
        let _ = write(&path, &b);
    }
    Ok(Some((index, versions)))
}

/// The files (not symlinks nor gitlinks) of commit `c`'s tree that tree `before`
/// does not hold and `newest` does not say are held, as versions of `c`.
fn changes_held(
    repo: &Repo,
    before: &Id,
    (id, c): &(Id, lifeos_vcs::object::Commit),
    newest: &dyn Fn(&Version) -> bool,
) -> Result<Vec<Version>> {
    let mut out = Vec::new();
    for change in repo.diff_trees(Some(before), Some(&c.tree))? {
        let Some(e) = change.new else {
            continue;
        };
        if matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink) {
            continue;
        }
        let v = Version {
            path: change.path.to_vec(),
            content: e.id,
            commit: *id,
        };
        if !newest(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_vcs::commit::CommitOptions;
    use lifeos_vcs::working_copy::NoProgress;
    use proptest::prelude::*;

    fn index_of(files: &[(Vec<u8>, Id)]) -> FileIndex {
        FileIndex::build(&Id([9; 32]), files).unwrap()
    }

    proptest! {
        /// Built and decoded, an index answers as the list it was made from.
        #[test]
        fn an_index_answers_as_its_list(mut files in proptest::collection::vec(
            (proptest::collection::vec(prop::sample::select(b"ab-/".to_vec()), 1..12), 0u8..6), 0..40)) {
            // In the order a walk gives them, as the index is built.
            files.sort_by(|a, b| walk_order(&a.0, &b.0));
            files.dedup_by(|a, b| a.0 == b.0);
            let files: Vec<(Vec<u8>, Id)> =
                files.into_iter().map(|(p, c)| (p, Id([c; 32]))).collect();
            let built = index_of(&files);
            let index = FileIndex::decode(built.bytes.clone(), &Id([9; 32])).unwrap();
            prop_assert_eq!(&index, &built);
            prop_assert_eq!(index.len(), files.len());
            for (k, (p, c)) in files.iter().enumerate() {
                prop_assert_eq!(index.path(k), &p[..]);
                prop_assert_eq!(index.content(k), *c);
            }
            for c in 0u8..7 {
                let want: Vec<usize> = (0..files.len()).filter(|k| files[*k].1 == Id([c; 32])).collect();
                prop_assert_eq!(index.files_of(&Id([c; 32])).collect::<Vec<_>>(), want.clone());
                prop_assert_eq!(index.contains(&Id([c; 32])), !want.is_empty());
            }
            for (p, c) in &files {
                prop_assert!(index.holds(c, p));
                prop_assert!(!index.holds(&Id([9; 32]), p));
            }
            for c in 0u8..7 {
                for p in [&b"zz/none"[..], b"a", b"a/a"] {
                    let want = files.iter().any(|(q, d)| q == p && *d == Id([c; 32]));
                    prop_assert_eq!(index.holds(&Id([c; 32]), p), want);
                }
            }
            let mut distinct: Vec<Id> = files.iter().map(|(_, c)| *c).collect();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(index.contents().collect::<Vec<_>>(), distinct);
        }

        /// Changed or cut bytes are refused, without a panic.
        #[test]
        fn damaged_indexes_are_refused(at in any::<prop::sample::Index>(), bit in 0u8..8, cut in any::<bool>()) {
            let files: Vec<(Vec<u8>, Id)> = (0..5u8).map(|i| (vec![b'a' + i], Id([i; 32]))).collect();
            let mut b = index_of(&files).bytes;
            if cut {
                b.truncate(at.index(b.len()));
            } else {
                let i = at.index(b.len());
                b[i] ^= 1 << bit;
            }
            prop_assert_eq!(FileIndex::decode(b, &Id([9; 32])), None);
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = FileIndex::decode(b, &Id([9; 32]));
        }
    }

    #[test]
    fn an_index_of_another_tree_is_refused() {
        let b = index_of(&[(b"a".to_vec(), Id([1; 32]))]).bytes;
        assert!(FileIndex::decode(b.clone(), &Id([9; 32])).is_some());
        assert_eq!(FileIndex::decode(b, &Id([8; 32])), None);
    }

    /// A large tree's index is kept and read back (a changed copy is made again), a small
    /// one's is not, and only the newest are kept.
    #[test]
    fn the_indexes_of_the_newest_large_trees_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        let mut trees = Vec::new();
        for round in 0..7u8 {
            for f in 0..3u8 {
                std::fs::create_dir_all(dir.path().join(format!("d{f}"))).unwrap();
                std::fs::write(dir.path().join(format!("d{f}/n{round}")), [round, f]).unwrap();
            }
            std::os::unix::fs::symlink("d0", dir.path().join(format!("link{round}"))).unwrap();
            let wc = repo.lock_working_copy().unwrap();
            let c = repo
                .commit_working_copy(&wc, &CommitOptions::default(), &NoProgress)
                .unwrap();
            trees.push(repo.commit(&c.commit.unwrap()).unwrap().tree);
        }
        let kept = || -> usize {
            std::fs::read_dir(dir.path().join(".lifeos").join(FILE_INDEX_DIR))
                .map_or(0, |d| d.count())
        };
        let listed = |t: &Id| {
            let mut files = Vec::new();
            repo.visit_files_below(t, b"", &mut |p, e| {
                if e.kind != EntryKind::Symlink {
                    files.push((p.to_vec(), e.id));
                }
                Ok(())
            })
            .unwrap();
            FileIndex::build(t, &files).unwrap()
        };
        // The first tree has 3 files: not kept.
        assert_eq!(kept_from(&repo, &trees[0], 4).unwrap().len(), 3);
        assert_eq!(kept(), 0);
        for t in &trees[1..] {
            let want = listed(t);
            assert!((0..want.len()).all(|k| !want.path(k).starts_with(b"link")));
            assert_eq!(kept_from(&repo, t, 4).unwrap(), want);
            assert!(kept_path(&repo, t).exists());
            assert_eq!(kept_from(&repo, t, 4).unwrap(), want);
            // mtimes are whole seconds on some file systems: the order of writes shows.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(kept(), KEPT_INDEXES);
        let newest = trees.last().unwrap();
        let path = kept_path(&repo, newest);
        let mut b = std::fs::read(&path).unwrap();
        let last = b.len() - 40;
        b[last] ^= 1;
        std::fs::write(&path, b).unwrap();
        assert_eq!(kept_from(&repo, newest, 4).unwrap(), listed(newest));
        assert_eq!(
            FileIndex::decode(std::fs::read(&path).unwrap(), newest),
            Some(listed(newest))
        );
    }

    /// The versions of a history, each (path, content) once with the newest commit
    /// holding it, are what reading every commit's tree gives, whether made from the
    /// trees' changes, brought up to date from the list kept for the history one commit
    /// shorter, or read back: here with edits, removals, a content back at an old path and
    /// moved to another, a symlink made a file of the same bytes, a file made a folder,
    /// and two branches (in whatever order the commits' times put them).
    #[test]
    fn a_history_lists_what_every_tree_holds() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let repo = Repo::init(d, lifeos_store::StoreConfig::default()).unwrap();
        let kept = d.join(".lifeos").join(FILE_INDEX_DIR).join(HISTORY_FILE);
        let check = || {
            let head = repo.head().unwrap();
            let commits = lifeos_vcs::rev::all_commits(&repo, &head.view).unwrap();
            let mut every: Vec<(Vec<u8>, Id, Id)> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for (c, commit) in &commits {
                repo.visit_files_below(&commit.tree, b"", &mut |p, e| {
                    if !matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink)
                        && seen.insert((p.to_vec(), e.id))
                    {
                        every.push((p.to_vec(), e.id, *c));
                    }
                    Ok(())
                })
                .unwrap();
            }
            // The same versions, each path's in the same (commit) order.
            every.sort_by(|a, b| a.0.cmp(&b.0));
            let listed = || {
                let (index, others) = history_versions(&repo, &commits).unwrap().unwrap();
                let mut all: Vec<(Vec<u8>, Id, Id)> = (0..index.len())
                    .map(|k| (index.path(k).to_vec(), index.content(k), commits[0].0))
                    .chain(others.into_iter().map(|v| (v.path, v.content, v.commit)))
                    .collect();
                all.sort_by(|a, b| a.0.cmp(&b.0));
                all
            };
            // From the list kept before this commit (if any), then as kept.
            assert_eq!(listed(), every);
            assert_eq!(listed(), every);
            // From the trees alone.
            std::fs::remove_file(&kept).unwrap();
            assert_eq!(listed(), every);
            every.len()
        };
        let commit = || {
            // Commit times are whole seconds: a second apart, each new commit comes first
            // in the order, so each `check` brings the list kept by the one before up to
            // date with one diff (a commit on the other branch included).
            std::thread::sleep(std::time::Duration::from_millis(1050));
            let wc = repo.lock_working_copy().unwrap();
            let c = repo
                .commit_working_copy(&wc, &CommitOptions::default(), &NoProgress)
                .unwrap()
                .commit
                .unwrap();
            drop(wc);
            c
        };
        std::fs::create_dir_all(d.join("a/deep")).unwrap();
        std::fs::write(d.join("a/x"), "one").unwrap();
        std::fs::write(d.join("a/deep/y"), "two").unwrap();
        std::fs::write(d.join("b"), "three").unwrap();
        std::os::unix::fs::symlink("target", d.join("link")).unwrap();
        commit();
        check();
        std::fs::write(d.join("a/x"), "one, edited").unwrap();
        std::fs::remove_file(d.join("b")).unwrap();
        std::fs::remove_file(d.join("link")).unwrap();
        std::fs::write(d.join("link"), "target").unwrap();
        let second = commit();
        repo.set_branch("side", Some(second), false).unwrap();
        // Brought up to date from the list of the first commit alone.
        let kept_before = {
            let head = repo.head().unwrap();
            let commits = lifeos_vcs::rev::all_commits(&repo, &head.view).unwrap();
            history_versions(&repo, &commits[1..]).unwrap();
            order_hash(&commits[1..])
        };
        assert_eq!(
            decode_history(&std::fs::read(&kept).unwrap()).unwrap().0,
            kept_before
        );
        check();
        std::fs::write(d.join("a/x"), "one").unwrap();
        std::fs::rename(d.join("a/deep/y"), d.join("a-y")).unwrap();
        commit();
        check();
        std::fs::write(d.join("b"), "three").unwrap();
        std::fs::write(d.join("a/deep/y"), "four").unwrap();
        commit();
        check();
        // A file made a folder.
        std::fs::remove_file(d.join("b")).unwrap();
        std::fs::create_dir(d.join("b")).unwrap();
        std::fs::write(d.join("b/inner"), "three").unwrap();
        commit();
        // A commit on another branch: the commit before one in time (then id) order is
        // not always its parent.
        let wc = repo.lock_working_copy().unwrap();
        repo.checkout(
            &wc,
            &lifeos_vcs::history::Target::Branch("side".into()),
            false,
        )
        .unwrap();
        drop(wc);
        std::fs::write(d.join("a/deep/y"), "one, edited").unwrap();
        std::fs::write(d.join("c"), "two").unwrap();
        commit();
        // Every step above kept the list; this one starts from that of 4 commits.
        let head = repo.head().unwrap();
        let commits = lifeos_vcs::rev::all_commits(&repo, &head.view).unwrap();
        history_versions(&repo, &commits[1..]).unwrap();
        assert!(check() >= 8);
        // A damaged list is made again.
        let commits_now = lifeos_vcs::rev::all_commits(&repo, &repo.head().unwrap().view).unwrap();
        history_versions(&repo, &commits_now).unwrap();
        let mut b = std::fs::read(&kept).unwrap();
        let at = b.len() / 2;
        b[at] ^= 0x20;
        std::fs::write(&kept, &b).unwrap();
        assert_eq!(decode_history(&b), None);
        check();
    }

    #[test]
    fn history_lists_decode_only_whole() {
        let v = |p: &[u8], c: u8| Version {
            path: p.to_vec(),
            content: Id([c; 32]),
            commit: Id([c + 1; 32]),
        };
        let list = vec![v(b"a", 1), v(b"b/c", 2)];
        let b = encode_history(&Id([5; 32]), &list).unwrap();
        assert_eq!(decode_history(&b), Some((Id([5; 32]), list)));
        for cut in 0..b.len() {
            assert_eq!(decode_history(&b[..cut]), None);
        }
    }

    proptest! {
        #[test]
        fn history_bytes_decode_or_fail_without_panic(b in proptest::collection::vec(any::<u8>(), 0..300), fix in any::<bool>()) {
            let mut b = b;
            if fix && b.len() >= HEADER {
                // A matching checksum, so the body's bounds checks are what is tried.
                b[..4].copy_from_slice(HISTORY_MAGIC);
                b[4..8].copy_from_slice(&[HISTORY_VERSION, 0, 0, 0]);
                let sum = Id::hash(&b);
                b.extend_from_slice(&sum.0);
            }
            let _ = decode_history(&b);
        }
    }
}
