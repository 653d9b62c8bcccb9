//! Snapshotting the working folder into a tree: the stat cache's state loaded and saved,
//! the scan compared with it, the files it does not vouch for read, and the tree built.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::object::{EntryKind, Tree, TreeEntry};
use crate::path::{display, in_folder, is_under, join, BString};
use crate::repo::Repo;
use crate::treediff::ChangeKind;
use crate::working_copy::fsmonitor::Watched;
use crate::working_copy::moves::through_real_folders;
use crate::working_copy::stat_cache::{NewCache, StatCache};
use crate::working_copy::types::Token;
use crate::working_copy::types::*;
use crate::working_copy::walk::{linked_elsewhere, scan};

/// The scan's files against the stat cache's entries, both in path order
/// ([`untrusted`]).
pub(crate) struct Untrusted<'a> {
    /// The cache's entries no file was found at.
    pub gone: Vec<(&'a [u8], CacheEntry)>,
    /// The files the cache does not vouch for, by index in the scan, each with the
    /// cache's entry at its path if it has one.
    pub files: Vec<(usize, Option<CacheEntry>)>,
}

/// Walks the scan's files and the cache's entries (entries recorded at
/// `recorded_at_ns`) side by side, comparing each path once.
pub(crate) fn untrusted<'a>(
    found: &[ScanEntry],
    cached: impl Iterator<Item = (&'a [u8], CacheEntry)>,
    recorded_at_ns: i128,
) -> Untrusted<'a> {
    let mut out = Untrusted {
        gone: Vec::new(),
        files: Vec::new(),
    };
    let mut cached = cached.peekable();
    for (i, f) in found.iter().enumerate() {
        while let Some(gone) = cached.next_if(|(p, _)| *p < f.path.as_slice()) {
            out.gone.push(gone);
        }
        match cached.next_if(|(p, _)| *p == f.path.as_slice()) {
            Some((_, c)) if c.trusted(&f.meta, recorded_at_ns) => {}
            c => out.files.push((i, c.map(|(_, c)| c))),
        }
    }
    out.gone.extend(cached);
    out
}

impl Repo {
    pub(crate) fn state_path(&self) -> PathBuf {
        self.dot_dir().join(STATE_FILE)
    }

    /// Loads the stat cache to look paths up in (empty if missing or damaged).
    pub fn stat_cache(&self) -> StatCache {
        std::fs::read(self.state_path())
            .ok()
            .and_then(StatCache::from_bytes)
            .unwrap_or_default()
    }

    /// Loads the stat cache as a map to change (empty if missing or damaged).
    pub fn load_wc_state(&self) -> WcState {
        WcState::from(&self.stat_cache())
    }

    /// How the stat cache `old` differs from the cache a snapshot would have saved for
    /// `base`, when it names another tree (the commits made through the folder monitor do
    /// not save it): at each path where its tree and `base` differ, `base`'s entry never
    /// trusted (the file is read and compared), or none where `base` has no file. Its
    /// other entries stand, their files being the same in both trees. Empty when it names
    /// `base`; `None` when it names no tree, a tree that cannot be read, or `base` has a
    /// submodule where they differ.
    pub(crate) fn cache_changes_for(
        &self,
        base: &Id,
        old: &StatCache,
    ) -> Result<Option<BTreeMap<Vec<u8>, Option<CacheEntry>>>> {
        let Some(named) = old.tree() else {
            return Ok(None);
        };
        // A tree the cache names that cannot be read vouches for nothing: everything is
        // compared (which says so if `base` cannot be read either).
        let Ok(diff) = self.diff_trees(Some(&named), Some(base)) else {
            return Ok(None);
        };
        let mut changes = BTreeMap::new();
        for c in diff {
            let entry = c.new.filter(|_| c.kind != ChangeKind::Deleted);
            if entry.as_ref().is_some_and(|e| e.kind == EntryKind::Gitlink) {
                return Ok(None);
            }
            changes.insert(c.path.into(), entry.as_ref().map(CacheEntry::never_trusted));
        }
        Ok(Some(changes))
    }

    /// Saves the stat cache atomically.
    pub fn save_wc_state(&self, state: &WcState) -> Result<()> {
        lifeos_store::fsutil::write_atomic(&self.state_path(), &state.encode())?;
        Ok(())
    }

    /// Saves the stat cache a snapshot made, if it made one (none: the saved one stands),
    /// once `recorded` (the tree the commit recorded) is published. A commit of some paths
    /// (`recorded` is not the snapshot's tree) saves nothing: the cache would trust content
    /// read from the other paths, which nothing published holds.
    pub(crate) fn save_snapshot_state(&self, snapshot: &Snapshot, recorded: &Id) -> Result<()> {
        if *recorded != snapshot.tree {
            return Ok(());
        }
        let mut saved = None;
        // Through the monitor the cache is saved whenever it changed: the monitor's token
        // goes with it. Left to wait, the cache keeps its checksum, so a side file tied to
        // it is removed: no later command may take up that token again once `@` is back
        // at its tree (events it never saw may have passed, as through a hard link this
        // snapshot met).
        let waits = snapshot.state_changed
            && snapshot.monitor.is_none()
            && snapshot.state.as_ref().is_some_and(|s| s.can_wait())
            && self.remove_side_file();
        let save = snapshot
            .state
            .as_ref()
            .filter(|_| snapshot.state_changed && !waits);
        if let Some(state) = save {
            let bytes = state.encode();
            lifeos_store::fsutil::write_atomic(&self.state_path(), &bytes)?;
            saved = Some((
                state.tree(),
                crate::working_copy::stat_cache::file_sum(&bytes),
            ));
        }
        // The monitor's token goes with the cache now saved, if it names this tree, or
        // with the cache that stands (unsaved, the snapshot found the folder is its tree:
        // the cache's own, or, through the monitor, the side file's edited), if nothing
        // was left unread.
        let token = snapshot.monitor.filter(|_| snapshot.unreadable.is_empty());
        if let Some(token) = token {
            let (tree, sum) = saved.unwrap_or((Some(snapshot.tree), self.cache_sum()));
            if let (Some(tree), Some(cache_sum)) = (tree.filter(|t| t == recorded), sum) {
                self.save_side_file(&crate::working_copy::fsmonitor::SideFile {
                    token,
                    tree,
                    cache_sum,
                    files: snapshot.files,
                    bytes: snapshot.bytes,
                    skipped: snapshot.skipped.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The result of snapshotting the working folder.
#[derive(Debug)]
pub struct Snapshot {
    /// The root tree.
    pub tree: Id,
    /// Files and symlinks recorded.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Files that had to be read (not recognised by the stat cache).
    pub files_read: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Paths not recorded by design (gone, or not a file), with the reason.
    pub skipped: Vec<Skipped>,
    /// Paths that could not be read: the tree keeps their version from the base tree.
    pub unreadable: Vec<Skipped>,
    /// The stat cache to save once the snapshot is published; `None` when the saved one
    /// stands (the folder is exactly what it recorded).
    pub state: Option<NewCache>,
    /// Whether the new state differs from the one loaded.
    pub state_changed: bool,
    /// The files read (new or changed): path, content id, size.
    pub read: Vec<(BString, Id, u64)>,
    /// The folder monitor's token given before the folder was looked at, to save with the
    /// stat cache (FORMAT 9.8); `None` without a monitor or when it cannot be trusted.
    pub monitor: Option<Token>,
    /// Whether a file recorded has another hard link ([`Scan::shared_inodes`]).
    pub shared_inodes: bool,
}

enum Node {
    Leaf(TreeEntry),
    Dir(BTreeMap<Vec<u8>, Node>),
}

fn insert(root: &mut BTreeMap<Vec<u8>, Node>, path: &[u8], entry: TreeEntry) -> Result<()> {
    let mut comps = path.split(|b| *b == b'/').peekable();
    let mut map = root;
    while let Some(c) = comps.next() {
        crate::path::valid_name(c).map_err(|reason| VcsError::BadPath {
            path: display(path).into_owned(),
            reason,
        })?;
        if comps.peek().is_none() {
            map.insert(
                c.to_vec(),
                Node::Leaf(TreeEntry {
                    name: c.to_vec(),
                    ..entry
                }),
            );
            return Ok(());
        }
        let node = map
            .entry(c.to_vec())
            .or_insert_with(|| Node::Dir(BTreeMap::new()));
        map = match node {
            Node::Dir(m) => m,
            Node::Leaf(_) => {
                return Err(VcsError::BadPath {
                    path: display(path).into_owned(),
                    reason: "a parent is a file".into(),
                })
            }
        };
    }
    Ok(())
}

fn write_tree(tx: &mut Transaction<'_>, map: BTreeMap<Vec<u8>, Node>) -> Result<(Id, u64)> {
    let mut entries = Vec::with_capacity(map.len());
    for (name, node) in map {
        match node {
            Node::Leaf(e) => entries.push(e),
            Node::Dir(m) => {
                let (id, size) = write_tree(tx, m)?;
                entries.push(TreeEntry {
                    name,
                    kind: EntryKind::Dir,
                    id,
                    size,
                });
            }
        }
    }
    write_sorted(tx, b"", entries)
}

/// Writes a tree from its files given in path order, each folder's tree as soon as the
/// paths leave it: what is held is the folders open on the way to the current path, not
/// the whole tree. The trees are [`write_tree`]'s (entries sorted by name: path order puts
/// `a-b` before the folder `a`'s files).
#[derive(Default)]
struct TreeWriter {
    /// The open folders from the root down: each one's path and entries so far.
    open: Vec<(Vec<u8>, Vec<TreeEntry>)>,
}

impl TreeWriter {
    /// Adds the file `entry` at `path`, after every path before it in order.
    fn add(&mut self, tx: &mut Transaction<'_>, path: &[u8], entry: TreeEntry) -> Result<()> {
        if self.open.is_empty() {
            self.open.push((Vec::new(), Vec::new()));
        }
        let bad = |reason: String| VcsError::BadPath {
            path: display(path).into_owned(),
            reason,
        };
        let (dir, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&path[..0], path),
        };
        while !is_under(dir, &self.open.last().expect("the root stays open").0) {
            self.close(tx)?;
        }
        let mut at = self.open.last().expect("the root stays open").0.len();
        while at < dir.len() {
            let from = if at == 0 { 0 } else { at + 1 };
            let end = dir[from..]
                .iter()
                .position(|b| *b == b'/')
                .map_or(dir.len(), |i| from + i);
            crate::path::valid_name(&dir[from..end]).map_err(bad)?;
            self.open.push((dir[..end].to_vec(), Vec::new()));
            at = end;
        }
        crate::path::valid_name(name).map_err(bad)?;
        let top = &mut self.open.last_mut().expect("the root stays open").1;
        top.push(TreeEntry {
            name: name.to_vec(),
            ..entry
        });
        Ok(())
    }

    /// Writes the innermost open folder and adds it to the one above.
    fn close(&mut self, tx: &mut Transaction<'_>) -> Result<()> {
        let (path, entries) = self.open.pop().expect("a folder is open");
        let (id, size) = write_sorted(tx, &path, entries)?;
        let name_at = path.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1);
        let parent = &mut self.open.last_mut().expect("the root stays open").1;
        parent.push(TreeEntry {
            name: path[name_at..].to_vec(),
            kind: EntryKind::Dir,
            id,
            size,
        });
        Ok(())
    }

    /// Writes every open folder; returns the root tree.
    fn finish(mut self, tx: &mut Transaction<'_>) -> Result<Id> {
        while self.open.len() > 1 {
            self.close(tx)?;
        }
        let entries = self.open.pop().map(|(_, e)| e).unwrap_or_default();
        Ok(write_sorted(tx, b"", entries)?.0)
    }
}

/// Writes the tree of folder `path` with `entries` sorted by name; a name given twice (a
/// file and a folder) is refused as [`insert`] refuses it.
fn write_sorted(
    tx: &mut Transaction<'_>,
    path: &[u8],
    mut entries: Vec<TreeEntry>,
) -> Result<(Id, u64)> {
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = entries.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(VcsError::BadPath {
            path: display(&join(path, &w[0].name)).into_owned(),
            reason: "a parent is a file".into(),
        });
    }
    let tree = Tree {
        entries,
        git_raw: None,
    };
    let size = tree.total_size();
    Ok((tx.write_object(Kind::Tree, &tree.encode())?, size))
}

impl Repo {
    /// Tracked files are never ignored, as in git: a `tracked` path the scan did not list
    /// (an ignore rule matches it or its folder) is added back when it still exists as a
    /// file or symlink. One whose metadata, or a folder's on its way, cannot be read
    /// (other than for not existing) is unreadable, never taken as deleted; one already
    /// unreadable, or inside a folder that is, is left to that entry.
    pub(crate) fn keep_tracked<'p>(
        &self,
        tracked: impl Iterator<Item = &'p [u8]>,
        scan: &mut Scan,
    ) {
        scan.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        let unreadable = &scan.unreadable;
        // The path itself, a folder above it, or the whole folder (the empty path).
        let covered = |path: &[u8]| {
            let above = path
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .map(|(i, _)| &path[..i]);
            std::iter::once(&path[..0])
                .chain(above)
                .chain(std::iter::once(path))
                .any(|p| {
                    unreadable
                        .binary_search_by(|u| u.path.as_slice().cmp(p))
                        .is_ok()
                })
        };
        let mut more_unreadable = Vec::new();
        let found = &mut scan.found;
        let listed = found.len();
        // Where the last tracked path was looked for: tracked paths come in path order
        // from every caller, so the search moves forward, comparing each found path once;
        // one out of order is looked for from the start.
        let mut at = 0;
        for path in tracked {
            if at > 0 && found[at - 1].path.as_slice() >= path {
                at = found[..listed].partition_point(|e| e.path.as_slice() < path);
            }
            while at < listed && found[at].path.as_slice() < path {
                at += 1;
            }
            if found.get(at).is_some_and(|e| at < listed && e.path == path) || covered(path) {
                continue;
            }
            // Not through a folder that became a symlink: that could lead out of the folder.
            let folders = path.iter().enumerate().filter(|(_, b)| **b == b'/');
            let mut on_its_way = folders.map(|(i, _)| {
                in_folder(self.workdir(), &path[..i])
                    .symlink_metadata()
                    .map(|m| m.is_dir())
            });
            let meta = match on_its_way.find(|m| !matches!(m, Ok(true))) {
                None => in_folder(self.workdir(), path).symlink_metadata(),
                Some(Ok(_)) => continue,
                Some(Err(e)) => Err(e),
            };
            match meta {
                Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => {
                    let meta = Stat::from(&meta);
                    scan.shared_inodes |= linked_elsewhere(&meta);
                    found.push(ScanEntry {
                        path: path.to_vec(),
                        meta,
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => more_unreadable.push(Skipped {
                    path: path.into(),
                    reason: e.to_string(),
                }),
            }
        }
        if found.len() > listed {
            found.sort_by(|a, b| a.path.cmp(&b.path));
        }
        if !more_unreadable.is_empty() {
            scan.unreadable.append(&mut more_unreadable);
            scan.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        }
    }

    /// Records the working folder into `tx` as a tree; returns it with the refreshed stat
    /// cache (which the caller saves after publishing). Files that cannot be read keep
    /// their version from tree `base` (the commit the folder is compared with) and are
    /// listed in [`Snapshot::unreadable`]; the caller decides whether to record that.
    pub fn snapshot(
        &self,
        tx: &mut Transaction<'_>,
        base: Option<&Id>,
        progress: &dyn SnapshotProgress,
    ) -> Result<Snapshot> {
        // The system clock, as file times are: a clock set for the operation's times
        // (LIFEOS_NOW) has nothing to do with when the files were written.
        let started_ns = jiff::Timestamp::now().as_nanosecond();
        // Asked before anything is looked at: what changes from now on is in the journal.
        let token = match self.watched(base) {
            Watched::Paths {
                token,
                targets,
                side,
            } => {
                let base = base.expect("a side file names a tree");
                let watched = (token, targets.as_slice(), &side);
                if let Some(s) = self.snapshot_watched(tx, base, watched, started_ns, progress)? {
                    return Ok(s);
                }
                Some(token)
            }
            Watched::All(token) => Some(token),
            Watched::No => None,
        };
        // The scan first: its peak (the walk's listings) is then not on top of the cache.
        let scanned = scan(self.workdir())?;
        let old = self.stat_cache();
        let mut snapshot = self.snapshot_scanned(tx, base, progress, started_ns, old, scanned)?;
        // A file with another name can change through it unseen: no token then.
        snapshot.monitor = token.filter(|_| !snapshot.shared_inodes);
        Ok(snapshot)
    }

    /// The snapshot of the folder as `scanned` found it, against the stat cache `old`.
    fn snapshot_scanned(
        &self,
        tx: &mut Transaction<'_>,
        base: Option<&Id>,
        progress: &dyn SnapshotProgress,
        started_ns: i128,
        old: StatCache,
        scanned: Scan,
    ) -> Result<Snapshot> {
        if old.describes(base, &scanned) {
            // Nothing changed since the snapshot that made `base`: no file to read, no
            // tree to build, no state to save.
            let (files, bytes) = (scanned.found.len() as u64, scanned.bytes());
            progress.scanned(files, bytes, 0, 0);
            return Ok(Snapshot {
                tree: *base.expect("describes a tree"),
                files,
                bytes,
                files_read: 0,
                bytes_read: 0,
                skipped: scanned.skipped,
                unreadable: Vec::new(),
                state: None,
                state_changed: false,
                read: Vec::new(),
                monitor: None,
                shared_inodes: scanned.shared_inodes,
            });
        }
        // Only some paths differ from `base`: edit it, through the cache as it would be
        // for `base`.
        let since = match base {
            Some(b) if scanned.unreadable.is_empty() => self.cache_changes_for(b, &old)?,
            _ => None,
        };
        let (old, mut scanned) = match (base, since) {
            (Some(b), Some(since)) => {
                let edited =
                    self.snapshot_edits(tx, b, old, &since, scanned, None, started_ns, progress)?;
                match edited {
                    Ok(snapshot) => return Ok(snapshot),
                    Err(scanned) => (self.stat_cache(), scanned),
                }
            }
            _ => (old, scanned),
        };
        let base_flat = base.map(|b| self.flatten_tx(tx, b)).transpose()?;
        if let Some(flat) = &base_flat {
            self.keep_tracked(flat.keys().map(|k| k.as_ref()), &mut scanned);
        }
        let Scan {
            mut found,
            mut skipped,
            mut unreadable,
            shared_inodes,
        } = scanned;
        // The new stat cache's entries, in path order; the map is built in bulk at the
        // end, once the scan is dropped (ordered inserts leave B-tree nodes half empty).
        let mut entries: Vec<(Vec<u8>, CacheEntry)> = Vec::with_capacity(found.len());
        let mut to_read: Vec<usize> = Vec::new();
        let mut ids: Vec<Option<(EntryKind, Id)>> = Vec::with_capacity(found.len());
        let mut total = 0u64;
        let mut read_bytes = 0u64;
        for (i, f) in found.iter().enumerate() {
            total += f.meta.size;
            let cached = old
                .get(&f.path)
                .filter(|c| c.trusted(&f.meta, old.recorded_at_ns()));
            match cached {
                Some(c) => ids.push(Some((c.kind, c.id))),
                None => {
                    ids.push(None);
                    if f.meta.is_file() {
                        to_read.push(i);
                        read_bytes += f.meta.size;
                    }
                }
            }
        }
        progress.scanned(found.len() as u64, total, to_read.len() as u64, read_bytes);
        let mut failures = Scan::default();
        // Symlinks: their target is the content.
        for (i, f) in found.iter().enumerate() {
            if ids[i].is_none() && f.meta.is_symlink() {
                match std::fs::read_link(in_folder(self.workdir(), &f.path)) {
                    Ok(target) => {
                        let id = tx.write_object(Kind::Chunk, target.as_os_str().as_bytes())?;
                        ids[i] = Some((EntryKind::Symlink, id));
                    }
                    Err(e) => failures.failed(f.path.clone().into(), &e),
                }
            }
        }
        // The paths are taken out of the scan while the files are read, so that the
        // readers can borrow them as each result updates the scan's metadata; each result
        // is taken in as it comes, not gathered first.
        let mut paths: Vec<Vec<u8>> = found
            .iter_mut()
            .map(|f| std::mem::take(&mut f.path))
            .collect();
        let mut bytes_read = 0;
        let mut read: Vec<(BString, Id, u64)> = Vec::new();
        let mut fatal = None;
        tx.store_files_each(
            to_read.len(),
            &|k| in_folder(self.workdir(), &paths[to_read[k]]),
            &|n| progress.read(n),
            &mut |k, res| {
                let i = to_read[k];
                match res {
                    Ok(stored) => {
                        let exec = stored.stat.executable();
                        ids[i] = Some((
                            if exec {
                                EntryKind::Executable
                            } else {
                                EntryKind::File
                            },
                            stored.id,
                        ));
                        bytes_read += stored.size;
                        read.push((paths[i].clone().into(), stored.id, stored.size));
                        // What was read is what is recorded.
                        found[i].meta = stored.stat;
                    }
                    Err(lifeos_store::StoreError::Io { source, .. }) => {
                        failures.failed(paths[i].clone().into(), &source)
                    }
                    Err(e @ lifeos_store::StoreError::Unstable(_)) => {
                        failures.unreadable.push(Skipped {
                            path: paths[i].clone().into(),
                            reason: e.to_string(),
                        })
                    }
                    Err(e) => {
                        fatal.get_or_insert(e);
                    }
                }
            },
        )?;
        if let Some(e) = fatal {
            return Err(e.into());
        }
        // The results came in any order.
        read.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        failures.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        skipped.append(&mut failures.skipped);
        unreadable.append(&mut failures.unreadable);
        unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        let mut root = BTreeMap::new();
        // With nothing kept from the base (no unreadable path, no submodule), the tree is
        // written folder by folder as the sorted scan closes them, not built whole first.
        let mut stream = (unreadable.is_empty()
            && base_flat
                .as_ref()
                .is_none_or(|f| f.values().all(|e| e.kind != EntryKind::Gitlink)))
        .then(TreeWriter::default);
        let mut files = 0;
        let mut bytes = 0;
        for (i, f) in found.iter().enumerate() {
            let Some((kind, id)) = ids[i] else { continue };
            let path = std::mem::take(&mut paths[i]);
            let meta = &f.meta;
            let size = meta.size;
            let entry = TreeEntry {
                name: Vec::new(),
                kind,
                id,
                size,
            };
            match &mut stream {
                Some(w) => w.add(tx, &path, entry)?,
                None => insert(&mut root, &path, entry)?,
            }
            files += 1;
            bytes += size;
            let entry = CacheEntry::from_meta(meta, kind, id);
            // Moved, not copied: the scan's path is not used again.
            entries.push((path, entry));
        }
        // What could not be read keeps its last recorded version (never a deletion).
        if let Some(base) = base {
            for u in &unreadable {
                for (path, e) in self.entries_under(base, &u.path)? {
                    if !contains(&root, &path) {
                        files += 1;
                        bytes += e.size;
                        insert(&mut root, &path, e)?;
                    }
                }
            }
        }
        // Submodules: a gitlink stays while its folder does; what is inside belongs to
        // the submodule's own repository, not to this tree.
        let mut has_submodules = false;
        if let Some(flat) = base_flat {
            let mut submodules = Vec::new();
            for (path, e) in flat {
                if e.kind != EntryKind::Gitlink || !submodule_folder_present(self.workdir(), &path)
                {
                    continue;
                }
                for (_, c) in take_under(&mut root, &path) {
                    files -= 1;
                    bytes -= c.size;
                }
                insert(&mut root, &path, e)?;
                submodules.push(path);
            }
            if !submodules.is_empty() {
                has_submodules = true;
                entries.retain(|(p, _)| !submodules.iter().any(|s| is_under(p, s)));
            }
        }
        let tree = match stream {
            Some(w) => w.finish(tx)?,
            None => write_tree(tx, root)?.0,
        };
        // The tree is made of the entries alone when nothing was kept from the base.
        let made_of_entries = (unreadable.is_empty() && !has_submodules).then_some(tree);
        // Files read again (new, changed or racy) move the racy window forward, a cache of
        // an earlier format is saved in this one, and one that does not name this tree
        // learns it, so the new state is worth saving even when every entry compares
        // equal.
        let state_changed = !to_read.is_empty()
            || old.converted()
            || old.tree() != made_of_entries
            || old.len() != entries.len()
            || !old
                .iter()
                .zip(&entries)
                .all(|(a, b)| a.0 == b.0.as_slice() && a.1 == b.1);
        drop(found);
        drop(old);
        let state = NewCache::Whole {
            recorded_at_ns: started_ns,
            tree: made_of_entries,
            entries,
        };
        Ok(Snapshot {
            tree,
            files,
            bytes,
            files_read: to_read.len() as u64,
            bytes_read,
            skipped,
            unreadable,
            state: Some(state),
            state_changed,
            read,
            monitor: None,
            shared_inodes,
        })
    }

    /// The files and symlinks of tree `root` at or below `path`, with their full paths.
    pub fn entries_under(&self, root: &Id, path: &[u8]) -> Result<Vec<(BString, TreeEntry)>> {
        if path.is_empty() {
            return Ok(self.flatten(root)?.into_iter().collect());
        }
        Ok(match self.lookup_path(root, path)? {
            None => Vec::new(),
            Some(e) if e.kind == EntryKind::Dir => self
                .flatten(&e.id)?
                .into_iter()
                .map(|(p, e)| (crate::path::join(path, &p), e))
                .collect(),
            Some(e) => vec![(BString::from(path), e)],
        })
    }

    /// Like [`Repo::entries_under`] (`None` is the empty tree), but a path that is not in
    /// the tree is an error naming it and `rev`.
    pub fn entries_at(
        &self,
        root: Option<&Id>,
        path: &[u8],
        rev: &str,
    ) -> Result<Vec<(BString, TreeEntry)>> {
        let rows = match root {
            Some(t) => self.entries_under(t, path)?,
            None => Vec::new(),
        };
        let known = !rows.is_empty()
            || path.is_empty()
            || root
                .map_or(Ok(None), |t| self.lookup_path(t, path))?
                .is_some();
        if !known {
            return Err(VcsError::PathNotFound {
                path: crate::path::display(path).into_owned(),
                rev: rev.into(),
            });
        }
        Ok(rows)
    }
}

/// Whether the tree being built has an entry (file or folder) at `path`.
/// Whether the folder of the submodule at `path` is there (a real folder, reached
/// through real folders): its gitlink then stays recorded.
pub(crate) fn submodule_folder_present(root: &Path, path: &[u8]) -> bool {
    through_real_folders(root, path)
        && in_folder(root, path)
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir())
}

/// Removes everything at or below `path`; returns the removed leaves with their full paths.
fn take_under(root: &mut BTreeMap<Vec<u8>, Node>, path: &[u8]) -> Vec<(Vec<u8>, TreeEntry)> {
    fn leaves(prefix: Vec<u8>, node: Node, out: &mut Vec<(Vec<u8>, TreeEntry)>) {
        match node {
            Node::Leaf(e) => out.push((prefix, e)),
            Node::Dir(m) => {
                for (name, n) in m {
                    let mut p = prefix.clone();
                    p.push(b'/');
                    p.extend_from_slice(&name);
                    leaves(p, n, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&b""[..], path),
    };
    let mut map = root;
    if !parent.is_empty() {
        for c in parent.split(|b| *b == b'/') {
            match map.get_mut(c) {
                Some(Node::Dir(m)) => map = m,
                _ => return out,
            }
        }
    }
    if let Some(node) = map.remove(name) {
        leaves(path.to_vec(), node, &mut out);
    }
    out
}

fn contains(root: &BTreeMap<Vec<u8>, Node>, path: &[u8]) -> bool {
    let mut map = root;
    let mut comps = path.split(|b| *b == b'/').peekable();
    while let Some(c) = comps.next() {
        match (map.get(c), comps.peek()) {
            (None, _) => return false,
            (Some(_), None) => return true,
            (Some(Node::Dir(m)), Some(_)) => map = m,
            (Some(Node::Leaf(_)), Some(_)) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tracked paths the scan did not list are added back once each, whether they come in
    /// path order (as from every caller) or not.
    #[test]
    fn tracked_paths_are_kept_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        std::fs::write(root.join(".gitignore"), b"b\nd\n").unwrap();
        for name in ["a", "b", "c", "d", "e"] {
            std::fs::write(root.join(name), name).unwrap();
        }
        let listed =
            |s: &Scan| -> Vec<Vec<u8>> { s.found.iter().map(|f| f.path.clone()).collect() };
        let want: Vec<Vec<u8>> = [".gitignore", "a", "b", "c", "d", "e"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        for tracked in [
            ["a", "b", "c", "d", "e"],
            ["e", "d", "c", "b", "a"],
            ["c", "a", "d", "e", "b"],
        ] {
            let mut s = scan(root).unwrap();
            assert_eq!(listed(&s).len(), 4);
            repo.keep_tracked(tracked.iter().map(|p| p.as_bytes()), &mut s);
            assert_eq!(listed(&s), want, "{tracked:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The tree written folder by folder from sorted paths is the tree built whole.
        #[test]
        fn a_tree_written_as_folders_close_is_the_tree_built_whole(
            picks in proptest::collection::btree_set(0usize..14, 1..14),
        ) {
            // Names that order differently as paths and as tree entries, and depth.
            const PATHS: &[&str] = &[
                "a-b", "a.txt", "a/x", "a/y/z", "a/y/z2", "a/y-1", "ab", "b", "c/d/e/f",
                "c/d/g", "c/d-e", "c/dd", "z", "\u{e9}/x",
            ];
            let dir = tempfile::tempdir().unwrap();
            let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
            let mut tx = repo.store().transaction().unwrap();
            let mut paths: Vec<&[u8]> = picks.iter().map(|&i| PATHS[i].as_bytes()).collect();
            paths.sort();
            let entry = |p: &[u8]| TreeEntry {
                name: Vec::new(),
                kind: EntryKind::File,
                id: Id::hash(p),
                size: p.len() as u64,
            };
            let mut map = BTreeMap::new();
            let mut w = TreeWriter::default();
            for p in &paths {
                insert(&mut map, p, entry(p)).unwrap();
                w.add(&mut tx, p, entry(p)).unwrap();
            }
            let whole = write_tree(&mut tx, map).unwrap().0;
            proptest::prop_assert_eq!(w.finish(&mut tx).unwrap(), whole);
        }
    }

    #[test]
    fn a_tree_writer_refuses_a_file_that_is_also_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let e = TreeEntry {
            name: Vec::new(),
            kind: EntryKind::File,
            id: Id::hash(b"x"),
            size: 1,
        };
        let mut w = TreeWriter::default();
        w.add(&mut tx, b"a", e.clone()).unwrap();
        w.add(&mut tx, b"a/x", e.clone()).unwrap();
        let err = w.finish(&mut tx).unwrap_err().to_string();
        assert!(err.contains("a parent is a file"), "{err}");
        let mut w = TreeWriter::default();
        assert!(w.add(&mut tx, b"a/../b", e).is_err());
    }

    fn state() -> WcState {
        let entry = |kind, seed: &[u8]| CacheEntry {
            size: 12,
            mtime_ns: 1_700_000_000_123_456_789,
            ctime_ns: 1_700_000_000_123_456_789,
            ino: 42,
            mode: 0o100644,
            kind,
            id: Id::hash(seed),
        };
        WcState {
            recorded_at_ns: 1_700_000_001_000_000_000,
            tree: Some(Id::hash(b"tree")),
            entries: [
                (b"a.txt".to_vec(), entry(EntryKind::File, b"a")),
                (b"bin/run\xff".to_vec(), entry(EntryKind::Executable, b"r")),
                (b"link".to_vec(), entry(EntryKind::Symlink, b"l")),
            ]
            .into_iter()
            .collect(),
        }
    }

    /// The compact stat a scan keeps says what the full metadata says.
    #[test]
    fn a_stat_keeps_what_the_cache_compares() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        let m = f.symlink_metadata().unwrap();
        let s = Stat::from(&m);
        assert!(s.is_file() && !s.is_symlink() && s.executable());
        assert_eq!((s.size, s.ino, s.mode), (5, m.ino(), m.mode()));
        let e = CacheEntry::from_meta(&s, EntryKind::Executable, Id::hash(b"f"));
        assert!(e.trusted(&s, s.mtime_ns + 3_000_000_000));
        assert!(
            !e.trusted(&s, s.mtime_ns),
            "modified as the snapshot began: racy"
        );
        let l = Stat::from(&dir.path().join("l").symlink_metadata().unwrap());
        assert!(l.is_symlink() && !l.is_file());
        assert!(!e.trusted(&l, l.mtime_ns + 3_000_000_000));
    }

    /// Writes `rel` under `root` with a modification time 10 s ago, outside the racy
    /// window of the next snapshot.
    fn write_old(root: &Path, rel: &str, bytes: &[u8]) {
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
        crate::testing::write_at(root, rel, bytes, past);
    }

    #[test]
    fn a_folder_the_cache_wholly_trusts_is_the_tree_it_names_without_building_it() {
        use crate::commit::CommitOptions;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::init(root, lifeos_store::StoreConfig::default()).unwrap();
        write_old(root, "a.txt", b"a");
        write_old(root, "sub/b.txt", b"b");
        let commit = || {
            let wc = repo.lock_working_copy().unwrap();
            let opts = CommitOptions {
                message: b"m",
                ..CommitOptions::default()
            };
            repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap()
        };
        let status = || {
            let wc = repo.lock_working_copy().unwrap();
            let st = repo.status(&wc).unwrap();
            st.changes
                .iter()
                .map(|c| (display(&c.path).into_owned(), c.kind))
                .collect::<Vec<_>>()
        };
        let first = commit();
        let tree = first.snapshot.tree;
        assert_eq!(first.snapshot.state.as_ref().unwrap().tree(), Some(tree));
        assert_eq!(repo.stat_cache().tree(), Some(tree));

        // Nothing changed: the saved cache stands and names the tree.
        let again = commit();
        assert_eq!(again.commit, None);
        assert_eq!(again.snapshot.tree, tree);
        assert!(
            again.snapshot.state.is_none(),
            "no tree built, no state made"
        );
        assert_eq!((again.snapshot.files, again.snapshot.bytes), (2, 2));
        assert_eq!(status(), []);

        // Each way the folder can differ from the cache goes the whole way.
        use crate::treediff::ChangeKind::{Added, Deleted, Modified};
        write_old(root, "c.txt", b"c");
        assert_eq!(status(), [("c.txt".to_string(), Added)]);
        std::fs::remove_file(root.join("c.txt")).unwrap();
        std::fs::remove_file(root.join("sub/b.txt")).unwrap();
        assert_eq!(status(), [("sub/b.txt".to_string(), Deleted)]);
        write_old(root, "sub/b.txt", b"B");
        assert_eq!(status(), [("sub/b.txt".to_string(), Modified)]);
        let changed = commit();
        assert!(changed.commit.is_some());
        let new_tree = changed.snapshot.tree;
        assert_ne!(new_tree, tree);
        // One path changed: saving the cache waits, and the cache on disk still names the
        // older tree, which status takes into account.
        assert_eq!(repo.stat_cache().tree(), Some(tree));
        assert_eq!(status(), []);

        // A cache a folder write changed names no tree; the next snapshot builds it once
        // and saves the cache with its name.
        let mut state = repo.load_wc_state();
        state.tree = None;
        repo.save_wc_state(&state).unwrap();
        assert_eq!(status(), []);
        let learnt = commit();
        assert_eq!(learnt.commit, None);
        assert!(learnt.snapshot.state_changed);
        assert_eq!(repo.stat_cache().tree(), Some(new_tree));
        assert!(commit().snapshot.state.is_none());

        // A file written just before a commit that saves the cache (here a whole
        // snapshot: one new path alone would leave the cache to wait) is racily clean:
        // status reads it, and what it finds decides.
        std::fs::write(root.join("fresh.txt"), b"1").unwrap();
        let mut state = repo.load_wc_state();
        state.tree = None;
        repo.save_wc_state(&state).unwrap();
        let fresh = commit().snapshot.tree;
        let racy = repo
            .stat_cache()
            .racy_if_unchanged(Some(&fresh), &scan(root).unwrap())
            .unwrap();
        assert_eq!(racy.len(), 1, "{racy:?}");
        assert_eq!(status(), []);
        std::fs::write(root.join("fresh.txt"), b"2").unwrap();
        assert_eq!(status(), [("fresh.txt".to_string(), Modified)]);
    }

    /// The scan reads each entry relative to its folder: what it finds is what a stat by
    /// the full path gives, for files, executables, symlinks (dangling too), names that
    /// are not UTF-8 and deep folders; a FIFO is skipped, and ignored and repository
    /// folders are left out.
    #[test]
    fn a_scan_stats_what_a_full_path_stat_gives() {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), b"x").unwrap();
        std::fs::write(root.join("top.txt"), b"top").unwrap();
        std::fs::write(root.join("a/b/c/deep.txt"), b"deep").unwrap();
        let odd = std::ffi::OsStr::from_bytes(b"a/caf\xe9.txt");
        std::fs::write(root.join(odd), b"latin-1").unwrap();
        std::fs::write(root.join("a/run.sh"), b"#!/bin/sh").unwrap();
        std::fs::set_permissions(
            root.join("a/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("a/b/dangling")).unwrap();
        std::fs::write(root.join(".gitignore"), b"ignored/\n").unwrap();
        std::fs::create_dir(root.join("ignored")).unwrap();
        std::fs::write(root.join("ignored/x"), b"x").unwrap();
        let fifo = std::ffi::CString::new(root.join("a/pipe").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

        let scanned = scan(root).unwrap();
        let paths: Vec<&[u8]> = scanned.found.iter().map(|f| f.path.as_slice()).collect();
        assert_eq!(
            paths,
            [
                &b".gitignore"[..],
                b"a/b/c/deep.txt",
                b"a/b/dangling",
                b"a/caf\xe9.txt",
                b"a/run.sh",
                b"top.txt"
            ]
        );
        for f in &scanned.found {
            let full = root.join(std::ffi::OsStr::from_bytes(&f.path));
            assert_eq!(f.meta, Stat::from(&full.symlink_metadata().unwrap()));
        }
        let run = &scanned.found[4];
        assert!(run.meta.is_file() && run.meta.executable());
        assert!(scanned.found[2].meta.is_symlink());
        assert_eq!(scanned.skipped.len(), 1);
        assert_eq!(scanned.skipped[0].path, "a/pipe");
        assert!(scanned.unreadable.is_empty());
    }

    #[test]
    fn state_round_trips() {
        let s = state();
        assert_eq!(WcState::decode(&s.encode()), Some(s));
    }

    proptest::proptest! {
        /// A damaged stat cache is ignored (`None`), never trusted and never a panic.
        #[test]
        fn damaged_state_is_refused(
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            let valid = state().encode();
            let damaged = lifeos_store::mutate::mutate(&valid, &edits);
            if damaged != valid {
                proptest::prop_assert_eq!(WcState::decode(&damaged), None);
            }
        }
    }
}
