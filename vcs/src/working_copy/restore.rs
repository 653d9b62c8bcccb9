//! Materialising trees on disk, safely: nothing is ever written outside the target, and
//! never through a symlink.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use lifeos_store::Id;

use crate::error::{IoContext, Result, VcsError};
use crate::guard::{self, Refusal};
use crate::object::EntryKind;
use crate::path::{display, join, BString};
use crate::repo::Repo;

/// One file to write.
#[derive(Debug, Clone)]
pub struct FileJob {
    /// Repository path.
    pub repo_path: BString,
    /// Destination.
    pub dest: PathBuf,
    /// Content id.
    pub id: Id,
    /// File, executable or symlink.
    pub kind: EntryKind,
    /// Size.
    pub size: u64,
}

/// Counts from a restore.
#[derive(Debug, Default, Clone)]
pub struct RestoreStats {
    /// Files (and symlinks) written.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Why a symlink at `path` to `target` is never written, if it is; `outside_ok` (the
/// person's setting) lets a target outside the folder through, never one into `.git` or
/// `.lifeos`.
fn symlink_refusal(path: &[u8], target: &[u8], outside_ok: bool) -> Option<Refusal> {
    let why = guard::check_symlink(path, target).err()?;
    (!(outside_ok && why.is_outside())).then_some(why)
}

/// Checks that `dir` is a real directory (not a symlink) created under `root`.
fn ensure_real_dir(path: &Path, repo_path: &[u8]) -> Result<()> {
    match path.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => Err(VcsError::UnsafePath {
            path: display(repo_path).into_owned(),
            reason: format!(
                "{} is a symlink; lifeos never writes through links",
                path.display()
            ),
        }),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(VcsError::Obstructed {
            path: display(repo_path).into_owned(),
            what: format!("{} (not a folder)", path.display()),
        }),
        Err(e) => Err(e).io("checking", path),
    }
}

impl Repo {
    /// Whether symlinks leading outside the folder may be written: the person's own
    /// setting `safety.outside-symlinks` (never something a tree can bring).
    pub fn outside_symlinks_allowed(&self) -> bool {
        crate::settings::effective(Some(self.dot_dir()), "safety.outside-symlinks").as_deref()
            == Some("true")
    }

    /// Why entry `e` at repository path `path` is never written into a folder, if it is:
    /// a name a file system reads as `.git` or `.lifeos` at any depth, a symlinked
    /// `.gitmodules`, or (unless `outside_ok`) a symlink leading outside the folder or
    /// into those folders. A symlink's target is read from the store.
    pub fn refusal(
        &self,
        path: &[u8],
        e: &crate::object::TreeEntry,
        outside_ok: bool,
    ) -> Result<Option<Refusal>> {
        if let Err(why) = guard::check_path(path, e.kind) {
            return Ok(Some(why));
        }
        if e.kind != EntryKind::Symlink {
            return Ok(None);
        }
        let mut target = Vec::new();
        self.store().read_file(&e.id, &mut target)?;
        Ok(symlink_refusal(path, &target, outside_ok))
    }

    /// Lists the files under tree `root` with their destinations under `dest`, creating
    /// the directories. Every name was validated when the tree was decoded, so each path
    /// stays below `dest`; a name lifeos never writes ([`guard::check_name`]) stops it
    /// before anything is created below it.
    fn plan(
        &self,
        root: &Id,
        dest: &Path,
        prefix: &[u8],
        jobs: &mut Vec<FileJob>,
        stats: &mut RestoreStats,
    ) -> Result<()> {
        ensure_real_dir(dest, if prefix.is_empty() { b"." } else { prefix })?;
        let tree = self.tree(root)?;
        for e in &tree.entries {
            let name = OsStr::from_bytes(&e.name);
            let repo_path = join(prefix, &e.name);
            if let Err(why) = guard::check_name(&e.name, e.kind) {
                return Err(VcsError::UnsafePath {
                    path: display(&repo_path).into_owned(),
                    reason: why.reason().into(),
                });
            }
            let path = dest.join(name);
            match e.kind {
                EntryKind::Dir => {
                    match std::fs::create_dir(&path) {
                        Ok(()) => stats.dirs += 1,
                        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(err) => return Err(err).io("creating", &path),
                    }
                    self.plan(&e.id, &path, &repo_path, jobs, stats)?;
                }
                // A submodule is an empty folder until it is checked out, as in git.
                EntryKind::Gitlink => match std::fs::create_dir(&path) {
                    Ok(()) => stats.dirs += 1,
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(err).io("creating", &path),
                },
                kind => jobs.push(FileJob {
                    repo_path,
                    dest: path,
                    id: e.id,
                    kind,
                    size: e.size,
                }),
            }
        }
        Ok(())
    }

    /// Writes one file (or symlink) atomically: a temporary file beside it, renamed over.
    /// Files get mode 0666 (0777 if executable) less the process umask, as any program
    /// creating them would.
    pub fn write_file(&self, job: &FileJob) -> Result<u64> {
        let Some(parent) = job.dest.parent() else {
            return Err(VcsError::UnsafePath {
                path: display(&job.repo_path).into_owned(),
                reason: "the destination has no parent folder".into(),
            });
        };
        ensure_real_dir(parent, &job.repo_path)?;
        // Checked where a move is planned; checked again here, where every file is
        // written, whatever planned it.
        let unsafe_path = |why: Refusal| VcsError::UnsafePath {
            path: display(&job.repo_path).into_owned(),
            reason: why.reason().into(),
        };
        guard::check_path(&job.repo_path, job.kind).map_err(unsafe_path)?;
        let tmp = parent.join(format!(
            ".lifeos-tmp-{}",
            lifeos_store::fsutil::random_hex(6)
        ));
        let res = (|| -> Result<u64> {
            let n = if job.kind == EntryKind::Symlink {
                let mut target = Vec::new();
                self.store().read_file(&job.id, &mut target)?;
                if let Some(why) =
                    symlink_refusal(&job.repo_path, &target, self.outside_symlinks_allowed())
                {
                    return Err(unsafe_path(why));
                }
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), &tmp)
                    .io("creating symlink", &tmp)?;
                target.len() as u64
            } else {
                let mode = if job.kind == EntryKind::Executable {
                    0o777
                } else {
                    0o666
                };
                let f = std::fs::File::options()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&tmp)
                    .io("creating", &tmp)?;
                let mut w = std::io::BufWriter::with_capacity(lifeos_store::WRITE_BUFFER, f);
                let n = self.store().read_file(&job.id, &mut w)?;
                let f = w
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .io("writing", &job.dest)?;
                start_writeback(&f);
                n
            };
            if let Ok(m) = job.dest.symlink_metadata() {
                if m.is_dir() && !m.file_type().is_symlink() {
                    return Err(VcsError::Obstructed {
                        path: display(&job.repo_path).into_owned(),
                        what: format!("{} (a folder)", job.dest.display()),
                    });
                }
            }
            std::fs::rename(&tmp, &job.dest).io("renaming into place", &job.dest)?;
            Ok(n)
        })();
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res
    }

    /// Writes tree `root` into `dest`, which must be missing or empty. Files are written
    /// in parallel; `progress` receives byte counts.
    pub fn restore_tree_to(
        &self,
        root: &Id,
        dest: &Path,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<RestoreStats> {
        match std::fs::read_dir(dest) {
            Ok(mut rd) => {
                if rd.next().is_some() {
                    return Err(VcsError::TargetNotEmpty(dest.into()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dest).io("creating", dest)?;
            }
            Err(e) => return Err(e).io("reading", dest),
        }
        let mut stats = RestoreStats::default();
        let mut jobs = Vec::new();
        self.plan(root, dest, b"", &mut jobs, &mut stats)?;
        self.fetch_for(&jobs)?;
        let results = self.write_files(&jobs, progress);
        for r in results {
            stats.bytes += r?;
            stats.files += 1;
        }
        Ok(stats)
    }

    /// In a lazy clone, fetches the chunks `jobs` lack before their files are written,
    /// all together: file by file, each read would fetch its own, with a request per
    /// remote pack and a transaction per file. A stop asked for (Ctrl-C) while it runs
    /// ends it between two objects, keeping nothing of it.
    pub(crate) fn fetch_for(&self, jobs: &[FileJob]) -> Result<()> {
        let stop = || self.interrupt.requested();
        match self
            .store()
            .fetch_file_chunks(jobs.iter().map(|j| &j.id), &stop)
        {
            Err(lifeos_store::StoreError::Stopped) => Err(VcsError::Interrupted),
            done => Ok(done?),
        }
    }

    /// Writes files on every core; returns each result in order.
    pub fn write_files(
        &self,
        jobs: &[FileJob],
        progress: &(dyn Fn(u64) + Sync),
    ) -> Vec<Result<u64>> {
        by_folder_in_turn(jobs, |job| {
            let r = self.write_file(job);
            if let Ok(n) = &r {
                progress(*n);
            }
            r
        })
    }
}

/// Asks the kernel to start writing `f`'s pages to disk now, without waiting. A move
/// ends with one `syncfs`, which then finds most of the folder written already instead
/// of writing all of it while the command waits. Only a hint: a failure changes nothing.
fn start_writeback(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: `f` is an open file descriptor for the duration of the call, and
    // sync_file_range only starts writeback of its pages.
    unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

/// Applies `f` to every job on every core and returns the results in job order, taking
/// the jobs one folder after another in turn (one job of each folder, then the next of
/// each), so that where there are several folders the threads create files in
/// different ones. Two threads creating files in one folder wait on its lock: on ext4
/// the waiting thread spins, and a checkout of the peer library spent a third of its
/// CPU time so.
pub(crate) fn by_folder_in_turn<R: Send>(
    jobs: &[FileJob],
    f: impl Fn(&FileJob) -> R + Sync,
) -> Vec<R> {
    let order = folder_turns(jobs);
    let results = lifeos_store::par::map(&order, |&i| f(&jobs[i]));
    let mut in_order: Vec<Option<R>> = jobs.iter().map(|_| None).collect();
    for (i, r) in order.into_iter().zip(results) {
        in_order[i] = Some(r);
    }
    in_order
        .into_iter()
        .map(|r| r.expect("every job is in the order once"))
        .collect()
}

/// The jobs' indexes, one of each folder in turn (each folder's in their order).
fn folder_turns(jobs: &[FileJob]) -> Vec<usize> {
    let mut folders: Vec<std::collections::VecDeque<usize>> = Vec::new();
    let mut folder_of: std::collections::HashMap<&Path, usize> = Default::default();
    for (i, job) in jobs.iter().enumerate() {
        let parent = job.dest.parent().unwrap_or(Path::new(""));
        let k = *folder_of.entry(parent).or_insert_with(|| {
            folders.push(Default::default());
            folders.len() - 1
        });
        folders[k].push_back(i);
    }
    let mut order = Vec::with_capacity(jobs.len());
    while !folders.is_empty() {
        folders.retain_mut(|f| {
            order.extend(f.pop_front());
            !f.is_empty()
        });
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;
    use std::os::unix::fs::PermissionsExt;

    fn job(repo: &Repo, dest: &Path, content: &[u8], kind: EntryKind) -> FileJob {
        let mut tx = repo.store().transaction().unwrap();
        let id = tx.store_bytes(content).unwrap();
        drop(tx.commit().unwrap());
        FileJob {
            repo_path: BString::from("x"),
            dest: dest.to_path_buf(),
            id,
            kind,
            size: content.len() as u64,
        }
    }

    #[test]
    fn files_symlinks_and_modes_are_written_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(&dir.path().join("r"), StoreConfig::default()).unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let f = out.join("f");
        assert_eq!(
            repo.write_file(&job(&repo, &f, b"bytes", EntryKind::File))
                .unwrap(),
            5
        );
        assert_eq!(std::fs::read(&f).unwrap(), b"bytes");
        let x = out.join("x");
        repo.write_file(&job(&repo, &x, b"#!/bin/sh\n", EntryKind::Executable))
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o111;
        assert_eq!(mode(&f), 0);
        assert_ne!(mode(&x), 0);
        let l = out.join("l");
        repo.write_file(&job(&repo, &l, b"target/\xff", EntryKind::Symlink))
            .unwrap();
        assert_eq!(
            std::fs::read_link(&l).unwrap().as_os_str().as_bytes(),
            b"target/\xff"
        );
        // Rewriting replaces the file whole; no temporary file is left.
        repo.write_file(&job(&repo, &f, b"new", EntryKind::File))
            .unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
    }

    #[test]
    fn jobs_are_taken_folder_by_folder_in_turn_and_answered_in_order() {
        let job = |dest: &str| FileJob {
            repo_path: BString::from(dest),
            dest: PathBuf::from(dest),
            id: Id::hash(dest.as_bytes()),
            kind: EntryKind::File,
            size: 0,
        };
        let jobs: Vec<FileJob> = ["a/1", "a/2", "a/3", "b/1", "c/1", "c/2"]
            .into_iter()
            .map(job)
            .collect();
        // a/1 b/1 c/1, then a/2 c/2, then a/3.
        assert_eq!(folder_turns(&jobs), [0, 3, 4, 1, 5, 2]);
        let back = by_folder_in_turn(&jobs, |j| j.dest.clone());
        let want: Vec<PathBuf> = jobs.iter().map(|j| j.dest.clone()).collect();
        assert_eq!(back, want);
    }

    #[test]
    fn nothing_is_written_through_a_symlinked_folder() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(&dir.path().join("r"), StoreConfig::default()).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("link")).unwrap();
        let j = job(&repo, &out.join("link/f"), b"x", EntryKind::File);
        let e = repo.write_file(&j).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
