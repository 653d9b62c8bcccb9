//! What changed in the folder since `@`: the scan through the stat cache (or the
//! fsmonitor's list), files read only when their stat changed, and the tree they make.

use super::*;

impl Repo {
    /// The tree of `@` in `view`.
    pub fn at_tree(&self, view: &View) -> Result<Option<Id>> {
        view.at_commit()
            .map(|c| self.commit(&c).map(|c| c.tree))
            .transpose()
    }

    /// The kind, content id and size of a file or symlink the scan found, read from the
    /// folder without storing anything.
    pub(crate) fn content_id(&self, f: &ScanEntry) -> std::io::Result<(EntryKind, Id, u64)> {
        let full = in_folder(self.workdir(), &f.path);
        if f.meta.is_symlink() {
            std::fs::read_link(&full).map(|t| {
                let b = t.as_os_str().as_bytes();
                (EntryKind::Symlink, Id::hash(b), b.len() as u64)
            })
        } else {
            let kind = if f.meta.executable() {
                EntryKind::Executable
            } else {
                EntryKind::File
            };
            hash_file(&full).map(|(id, n)| (kind, id, n))
        }
    }

    /// Reads the working folder into a flat tree without storing anything: files the stat
    /// cache recognises are not read; the others are hashed on every core. The gitlinks
    /// of `base` (the flattened tree the folder is compared with) stay while their folders
    /// are there, and what is inside those folders is left out, as a snapshot does.
    pub fn working_tree(&self, base: Option<&FlatTree>) -> Result<FolderRead> {
        self.read_folder(base, self.stat_cache(), scan(self.workdir())?)
    }

    /// [`Repo::working_tree`] from a scan already made, with the stat cache `old`.
    pub(crate) fn read_folder(
        &self,
        base: Option<&FlatTree>,
        old: StatCache,
        mut scanned: Scan,
    ) -> Result<FolderRead> {
        if let Some(base) = base {
            self.keep_tracked(base.keys().map(|k| k.as_ref()), &mut scanned);
        }
        let Scan {
            mut found,
            skipped,
            unreadable,
            shared_inodes,
        } = scanned;
        let mut out = FolderRead {
            skipped,
            unreadable,
            shared_inodes,
            ..FolderRead::default()
        };
        // Entries are collected, then the map is built in bulk once the scan and the old
        // stat cache are dropped: B-tree nodes filled by ordered inserts end half empty.
        let mut flat: Vec<(BString, TreeEntry)> = Vec::with_capacity(found.len());
        let mut to_hash = Vec::new();
        for (i, f) in found.iter_mut().enumerate() {
            match old
                .get(&f.path)
                .filter(|c| c.trusted(&f.meta, old.recorded_at_ns()))
            {
                Some(c) => {
                    // Moved, not copied: the scan's entry is not used again.
                    flat.push((
                        BString::from(std::mem::take(&mut f.path)),
                        TreeEntry {
                            name: Vec::new(),
                            kind: c.kind,
                            id: c.id,
                            size: f.meta.size,
                        },
                    ));
                }
                None => to_hash.push(i),
            }
        }
        let results = lifeos_store::par::map(&to_hash, |&i| self.content_id(&found[i]));
        let mut failures = Scan::default();
        for (&i, r) in to_hash.iter().zip(results) {
            let f = &found[i];
            match r {
                Ok((kind, id, size)) => {
                    flat.push((
                        BString::from(f.path.as_slice()),
                        TreeEntry {
                            name: Vec::new(),
                            kind,
                            id,
                            size,
                        },
                    ));
                }
                Err(e) => failures.failed(BString::from(f.path.as_slice()), &e),
            }
        }
        drop(found);
        drop(old);
        out.flat = flat.into_iter().collect();
        out.skipped.append(&mut failures.skipped);
        out.unreadable.append(&mut failures.unreadable);
        out.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        for (path, e) in base.into_iter().flatten() {
            if e.kind == EntryKind::Gitlink && submodule_folder_present(self.workdir(), path) {
                out.flat.retain(|p, _| !is_under(p, path));
                out.flat.insert(path.clone(), e.clone());
            }
        }
        Ok(out)
    }

    /// What changed in the folder since `@`.
    pub fn status(&self, _wc: &WorkingCopyLock) -> Result<Status> {
        let head = self.head()?;
        self.status_in(&head.view)
    }

    /// What changed in the folder since `view`'s `@`. A path that cannot be read counts
    /// as its recorded version (its content is unknown, never taken as deleted) and is
    /// listed in [`Status::unreadable`].
    pub(crate) fn status_in(&self, view: &View) -> Result<Status> {
        let base = view.at_commit();
        let (base_tree, conflicts) = match base {
            Some(c) => {
                let commit = self.commit(&c)?;
                (Some(commit.tree), commit.conflicts)
            }
            None => (None, Vec::new()),
        };
        let status = |changes: Vec<Change>, conflicts: Vec<Conflict>, skipped, unreadable| {
            let changed: HashSet<&BString> = changes.iter().map(|c| &c.path).collect();
            let conflicts = conflicts
                .into_iter()
                .filter(|c| !changed.contains(&c.path))
                .collect();
            Status {
                base,
                branch: view.current_branch.clone(),
                changes,
                conflicts,
                skipped,
                unreadable,
            }
        };
        // Asked before anything is looked at: what changes from now on is in the journal.
        let token = match self.watched(base_tree.as_ref()) {
            Watched::Paths {
                token,
                targets,
                mut side,
            } => {
                if targets.is_empty() {
                    // Nothing happened in the folder since the cache was saved.
                    if side.token != token {
                        side.token = token;
                        self.save_side_file(&side);
                    }
                    return Ok(status(Vec::new(), conflicts, side.skipped, Vec::new()));
                }
                let base = base_tree.expect("a side file names a tree");
                if let Some(there) = self.tree_within(&base, &targets)? {
                    let scanned = scan_within(self.workdir(), &targets)?;
                    let base_flat: FlatTree = there.into_iter().collect();
                    // Every file found there is read: the stat cache is not read at all.
                    let read = self.read_folder(Some(&base_flat), StatCache::default(), scanned)?;
                    // A file with another name can change through it unseen, a file
                    // outside these paths too: then everything is looked at.
                    if !read.shared_inodes {
                        let (changes, unreadable) =
                            changes_from(&base_flat, read.flat, read.unreadable);
                        side.skipped = skipped_outside(&side, &targets, read.skipped);
                        // Nothing differs: the cache still is the folder, from the new
                        // token on.
                        if changes.is_empty() && unreadable.is_empty() {
                            side.token = token;
                            self.save_side_file(&side);
                        }
                        return Ok(status(changes, conflicts, side.skipped, unreadable));
                    }
                }
                Some(token)
            }
            Watched::All(token) => Some(token),
            Watched::No => None,
        };
        // The scan first: its peak (the walk's listings) is then not on top of the cache.
        let mut scanned = scan(self.workdir())?;
        let old = self.stat_cache();
        // Exactly what the snapshot that made `@`'s tree saw, the racily clean files
        // (9.2) read to be sure: nothing changed.
        let unchanged = old
            .racy_if_unchanged(base_tree.as_ref(), &scanned)
            .is_some_and(|racy| {
                racy.iter().all(|(i, c)| {
                    self.content_id(&scanned.found[*i])
                        .is_ok_and(|(kind, id, _)| kind == c.kind && id == c.id)
                })
            });
        // With nothing changed, the monitor's token is saved, tied to the cache read: the
        // folder is `@`'s tree (the cache may name an older one: only its checksum ties
        // the token to it).
        let cache_sum = old.sum();
        let save_token = |files: u64, bytes: u64, skipped: &[Skipped]| {
            if let (Some(token), Some(tree), Some(cache_sum)) = (token, base_tree, cache_sum) {
                self.save_side_file(&SideFile {
                    token,
                    tree,
                    cache_sum,
                    files,
                    bytes,
                    skipped: skipped.to_vec(),
                });
            }
        };
        if unchanged {
            if !scanned.shared_inodes {
                save_token(
                    scanned.found.len() as u64,
                    scanned.bytes(),
                    &scanned.skipped,
                );
            }
            return Ok(status(Vec::new(), conflicts, scanned.skipped, Vec::new()));
        }
        if let Some(base) = &base_tree {
            if let Some(changes) = self.changes_through_cache(base, &old, &mut scanned)? {
                if changes.is_empty() && !scanned.shared_inodes {
                    save_token(
                        scanned.found.len() as u64,
                        scanned.bytes(),
                        &scanned.skipped,
                    );
                }
                return Ok(status(changes, conflicts, scanned.skipped, Vec::new()));
            }
        }
        let base_flat = match base_tree {
            Some(t) => self.flatten(&t)?,
            None => FlatTree::new(),
        };
        let read = self.read_folder(Some(&base_flat), old, scanned)?;
        let (files, bytes) = (
            read.flat.len() as u64,
            read.flat.values().map(|e| e.size).sum::<u64>(),
        );
        let (shared, skipped) = (read.shared_inodes, read.skipped);
        let (changes, unreadable) = changes_from(&base_flat, read.flat, read.unreadable);
        if changes.is_empty() && unreadable.is_empty() && !shared {
            save_token(files, bytes, &skipped);
        }
        Ok(status(changes, conflicts, skipped, unreadable))
    }

    /// What differs between the folder as `scanned` found it and `base`, through the stat
    /// cache `old`, without flattening `base` or mapping the folder: the cache's entries
    /// stand for the tree they were made into, so only the files it does not trust are
    /// read; a cache saved for an older tree counts as [`Repo::cache_changes_for`] makes
    /// it. `None` (then everything is compared) when the cache names no tree, `base` has a
    /// submodule where the two differ, or a path could not be read: that comparison says
    /// what happened to it.
    pub(crate) fn changes_through_cache(
        &self,
        base: &Id,
        old: &StatCache,
        scanned: &mut Scan,
    ) -> Result<Option<Vec<Change>>> {
        let Some(since) = self.cache_changes_for(base, old)? else {
            return Ok(None);
        };
        let entries = crate::working_copy::stat_cache::patched(old, &since);
        self.keep_tracked(entries.clone().map(|(p, _)| p), scanned);
        if !scanned.unreadable.is_empty() {
            return Ok(None);
        }
        let entry = |c: &CacheEntry| TreeEntry {
            name: Vec::new(),
            kind: c.kind,
            id: c.id,
            size: c.size,
        };
        let found = &scanned.found;
        let Untrusted {
            gone,
            files: to_read,
        } = untrusted(found, entries, old.recorded_at_ns());
        let mut changes: Vec<Change> = gone
            .iter()
            .map(|(p, c)| Change {
                path: (*p).into(),
                kind: ChangeKind::Deleted,
                old: Some(entry(c)),
                new: None,
            })
            .collect();
        let read = lifeos_store::par::map(&to_read, |(i, _)| self.content_id(&found[*i]));
        for ((i, c), r) in to_read.iter().zip(read) {
            let Ok((kind, id, size)) = r else {
                return Ok(None);
            };
            let new = TreeEntry {
                name: Vec::new(),
                kind,
                id,
                size,
            };
            let (kind, old) = match c {
                Some(c) if c.kind == kind && c.id == id => continue,
                Some(c) => (ChangeKind::Modified, Some(entry(c))),
                None => (ChangeKind::Added, None),
            };
            changes.push(Change {
                path: BString::from(found[*i].path.as_slice()),
                kind,
                old,
                new: Some(new),
            });
        }
        changes.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(Some(changes))
    }
}

/// The working folder compared with `@`.
#[derive(Debug)]
pub struct Status {
    /// The commit the folder is compared with (`@`), if any.
    pub base: Option<Id>,
    /// The branch, if any.
    pub branch: Option<String>,
    /// Files added, modified or deleted since `@`.
    pub changes: Vec<Change>,
    /// Conflicts recorded in `@` whose file is still as the merge left it.
    pub conflicts: Vec<Conflict>,
    /// Paths not recorded by design (gone while scanning, or not files).
    pub skipped: Vec<Skipped>,
    /// Files and folders that could not be read: compared as their last recorded
    /// version, and never overwritten by a command that changes the folder.
    pub unreadable: Vec<Skipped>,
}

/// The working folder as read without storing anything.
#[derive(Debug, Default)]
pub struct FolderRead {
    /// Files and symlinks by path. A path that could not be read is absent.
    pub flat: FlatTree,
    /// Paths not recorded by design.
    pub skipped: Vec<Skipped>,
    /// Paths that could not be read.
    pub unreadable: Vec<Skipped>,
    /// Whether a file read has another hard link ([`Scan::shared_inodes`]).
    pub shared_inodes: bool,
}

fn hash_file(path: &Path) -> std::io::Result<(Id, u64)> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path)?;
    let n = std::io::copy(&mut std::io::BufReader::with_capacity(1 << 20, f), &mut h)?;
    Ok((h.finalize().into(), n))
}

/// The changes from `base` (the flattened tree the folder is compared with) to `flat` (the
/// folder as read), a path that could not be read counting as its recorded version (its
/// content is unknown, never taken as deleted); and those paths.
fn changes_from(
    base: &FlatTree,
    mut flat: FlatTree,
    unreadable: Vec<Skipped>,
) -> (Vec<Change>, Vec<Skipped>) {
    for u in &unreadable {
        for (p, e) in base.iter().filter(|(p, _)| is_under(p, &u.path)) {
            flat.entry(p.clone()).or_insert_with(|| e.clone());
        }
    }
    (diff_flat(base, &flat), unreadable)
}
