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

use crate::error::{Result, VcsError};
use crate::object::EntryKind;
use crate::repo::Repo;

/// A tree with this many files or more has its index kept.
pub const KEPT_FROM: usize = 10_000;

/// At most this many indexes are kept: those written last.
pub const KEPT_INDEXES: usize = 4;

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

    /// Whether some file has content `id`.
    pub fn contains(&self, id: &Id) -> bool {
        self.first_at(id) < self.n && self.sorted_id(self.first_at(id)) == *id
    }

    /// Where the first content not below `id` is in sorted order.
    fn first_at(&self, id: &Id) -> usize {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.sorted_id(mid) < *id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
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

impl Repo {
    fn file_index_path(&self, tree: &Id) -> PathBuf {
        self.dot_dir().join(FILE_INDEX_DIR).join(tree.to_hex())
    }

    /// The files below tree `tree`, indexed: the kept copy when there is one, else read
    /// from the trees, and kept when there are [`KEPT_FROM`] or more.
    pub fn file_index(&self, tree: &Id) -> Result<FileIndex> {
        self.file_index_kept_from(tree, KEPT_FROM)
    }

    pub(crate) fn file_index_kept_from(&self, tree: &Id, kept_from: usize) -> Result<FileIndex> {
        let path = self.file_index_path(tree);
        if let Ok(bytes) = std::fs::read(&path) {
            if let Some(index) = FileIndex::decode(bytes, tree) {
                return Ok(index);
            }
        }
        let mut files = Vec::new();
        self.visit_files_below(tree, b"", &mut |p, e| {
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
}

/// Writes a kept index (a temp file renamed into place, not synced: a torn copy fails
/// its checksum and is made again) and removes all but the newest [`KEPT_INDEXES`].
fn keep(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", lifeos_store::store::random_hex(6)));
    let written = std::fs::File::create_new(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    let mut kept: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().len() == 64)
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    kept.sort();
    let extra = kept.len().saturating_sub(KEPT_INDEXES);
    for (_, old) in kept.into_iter().take(extra) {
        if old != path {
            let _ = std::fs::remove_file(old);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::CommitOptions;
    use crate::working_copy::NoProgress;
    use proptest::prelude::*;

    fn index_of(files: &[(Vec<u8>, Id)]) -> FileIndex {
        FileIndex::build(&Id([9; 32]), files).unwrap()
    }

    proptest! {
        /// Built and decoded, an index answers as the list it was made from.
        #[test]
        fn an_index_answers_as_its_list(mut files in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 1..40), 0u8..6), 0..30)) {
            files.sort();
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
        assert_eq!(repo.file_index_kept_from(&trees[0], 4).unwrap().len(), 3);
        assert_eq!(kept(), 0);
        for t in &trees[1..] {
            let want = listed(t);
            assert!((0..want.len()).all(|k| !want.path(k).starts_with(b"link")));
            assert_eq!(repo.file_index_kept_from(t, 4).unwrap(), want);
            assert!(repo.file_index_path(t).exists());
            assert_eq!(repo.file_index_kept_from(t, 4).unwrap(), want);
            // mtimes are whole seconds on some file systems: the order of writes shows.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(kept(), KEPT_INDEXES);
        let newest = trees.last().unwrap();
        let path = repo.file_index_path(newest);
        let mut b = std::fs::read(&path).unwrap();
        let last = b.len() - 40;
        b[last] ^= 1;
        std::fs::write(&path, b).unwrap();
        assert_eq!(
            repo.file_index_kept_from(newest, 4).unwrap(),
            listed(newest)
        );
        assert_eq!(
            FileIndex::decode(std::fs::read(&path).unwrap(), newest),
            Some(listed(newest))
        );
    }
}
