//! Where a remote keeps its files: a small object-store interface (whole-object get and
//! put, ranged get, create-if-absent, list, delete) that a plain directory and an
//! S3-compatible store both provide. Remotes are built on it; create-if-absent is what lets
//! several devices publish to one remote without a lock server.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use lifeos_store::error::IoContext as _;
use lifeos_store::fsutil::{random_hex, sync_dir, write_new_synced};
use lifeos_store::{Result, StoreError};

/// A place that holds a remote's files under keys such as `packs/0a1b...`.
pub trait Backend: Send + Sync {
    /// Where it is, for messages (`/mnt/backup/photos`, `s3://bucket/prefix`).
    fn location(&self) -> String;
    /// The whole object at `key`, or `None` if there is none. An object larger than
    /// `max` bytes is an error, read no further: the server may be hostile, and every
    /// file of a remote has a size it cannot exceed ([`too_large`]).
    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>>;
    /// Reads bytes `range` of the object at `key` (fewer if it ends sooner) into `into`,
    /// which is cleared first: a caller reading many ranges passes one buffer again and
    /// again instead of having a new one allocated (and its pages faulted in) each time.
    fn get_range(&self, key: &str, range: Range<u64>, into: &mut Vec<u8>) -> Result<()>;
    /// Stores `bytes` at `key`, replacing what was there; a reader sees the old object or
    /// the new one, never part of either. Once stored, `bytes` is empty, with its
    /// allocation where the backend gets it back: a caller writing many objects fills the
    /// same buffer again instead of having a new one allocated (and its pages faulted in)
    /// each time.
    fn put(&self, key: &str, bytes: &mut Vec<u8>) -> Result<()>;
    /// Stores `bytes` at `key` only if nothing is there: `false` (and nothing written) if
    /// something was. Of several callers racing for one key, exactly one gets `true`.
    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool>;
    /// Every key under `prefix` (which ends with `/` or is empty) with its size, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>>;
    /// Removes the object at `key`; removing what is not there is not an error.
    fn delete(&self, key: &str) -> Result<()>;
}

/// The error for an object at `key` of `location` larger than the `max` bytes such an
/// object can be.
pub fn too_large(location: &str, key: &str, max: u64) -> StoreError {
    StoreError::RemoteTooLarge {
        location: location.to_string(),
        key: key.to_string(),
        max,
    }
}

/// Checks that `key` is a key this interface uses: `/`-separated parts of lowercase
/// letters, digits, `.`, `_` and `-`, none empty or starting with `.` (so none is `..`). A key can then never leave
/// the place it is under, whatever a remote's listing says.
pub fn check_key(key: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(StoreError::BadRemoteKey {
            key: key.to_string(),
            reason: reason.to_string(),
        })
    };
    if key.is_empty() || key.len() > 512 {
        return bad("keys are 1 to 512 bytes");
    }
    for part in key.split('/') {
        if part.is_empty() || part.starts_with('.') {
            return bad("a part of it is empty or starts with `.`");
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        {
            return bad("keys hold only lowercase letters, digits, `.`, `_`, `-` and `/`");
        }
    }
    Ok(())
}

/// A remote in a plain directory (a second disk, a mounted share). Objects are files;
/// writes go to `.tmp/` first and are renamed (put) or hard-linked (create, which fails if
/// the name exists) into place, then the directory is fsynced.
pub struct DirBackend {
    root: PathBuf,
}

impl DirBackend {
    /// The directory `root` as a backend, created if missing.
    pub fn open(root: &Path) -> Result<DirBackend> {
        std::fs::create_dir_all(root.join(".tmp")).io("creating", root.join(".tmp"))?;
        Ok(DirBackend {
            root: root.to_path_buf(),
        })
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// Writes `bytes` to a new, fsynced temporary file; returns its path.
    fn stage(&self, bytes: &[u8]) -> Result<PathBuf> {
        let tmp = self.root.join(".tmp").join(random_hex(8));
        write_new_synced(&tmp, bytes)?;
        Ok(tmp)
    }

    /// Makes sure the folder `dest` goes in exists (its creation made durable).
    fn parent_of(&self, dest: &Path) -> Result<PathBuf> {
        let parent = dest
            .parent()
            .expect("a key names a file under the root")
            .to_path_buf();
        if !parent.is_dir() {
            std::fs::create_dir_all(&parent).io("creating", &parent)?;
            sync_dir(parent.parent().unwrap_or(&self.root))?;
        }
        Ok(parent)
    }
}

impl Backend for DirBackend {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>> {
        use std::io::Read as _;
        let path = self.path(key)?;
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).io("reading", path),
        };
        let mut out = Vec::new();
        f.take(max.saturating_add(1))
            .read_to_end(&mut out)
            .io("reading", &path)?;
        if out.len() as u64 > max {
            return Err(too_large(&self.location(), key, max));
        }
        Ok(Some(out))
    }

    fn get_range(&self, key: &str, range: Range<u64>, into: &mut Vec<u8>) -> Result<()> {
        use std::io::{Read as _, Seek as _};
        let path = self.path(key)?;
        let mut f = File::open(&path).io("opening", &path)?;
        f.seek(std::io::SeekFrom::Start(range.start))
            .io("reading", &path)?;
        into.clear();
        f.take(range.end.saturating_sub(range.start))
            .read_to_end(into)
            .io("reading", &path)?;
        Ok(())
    }

    fn put(&self, key: &str, bytes: &mut Vec<u8>) -> Result<()> {
        let dest = self.path(key)?;
        let parent = self.parent_of(&dest)?;
        let tmp = self.stage(bytes)?;
        bytes.clear();
        if let Err(e) = std::fs::rename(&tmp, &dest) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).io("renaming into place", dest);
        }
        sync_dir(&parent)
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        let dest = self.path(key)?;
        let parent = self.parent_of(&dest)?;
        let tmp = self.stage(bytes)?;
        let linked = std::fs::hard_link(&tmp, &dest);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                sync_dir(&parent)?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e).io("linking into place", dest),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        if !prefix.is_empty() {
            check_key(prefix.trim_end_matches('/'))?;
        }
        let mut out = Vec::new();
        let mut dirs = vec![self.root.join(prefix)];
        while let Some(dir) = dirs.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).io("listing", dir),
            };
            for entry in entries {
                let entry = entry.io("listing", &dir)?;
                let path = entry.path();
                let meta = entry.metadata().io("reading metadata of", &path)?;
                let Ok(rel) = path.strip_prefix(&self.root) else {
                    continue;
                };
                let Some(key) = rel.to_str().map(str::to_string) else {
                    continue;
                };
                // Staging files, and anything named outside the key alphabet (a stray
                // file someone left there), are not part of the remote.
                if meta.is_dir() && check_key(&key).is_ok() {
                    dirs.push(path);
                } else if meta.is_file() && check_key(&key).is_ok() {
                    out.push((key, meta.len()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(path.parent().unwrap_or(&self.root)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).io("removing", path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_directory_holds_objects_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let b = DirBackend::open(dir.path()).unwrap();
        assert_eq!(b.get("packs/a1", 1 << 20).unwrap(), None);
        b.put("packs/a1", &mut b"hello pack".to_vec()).unwrap();
        b.put("index/a1", &mut b"i".to_vec()).unwrap();
        assert_eq!(b.get("packs/a1", 1 << 20).unwrap().unwrap(), b"hello pack");
        let mut read = b"left from the last read".to_vec();
        b.get_range("packs/a1", 6..100, &mut read).unwrap();
        assert_eq!(read, b"pack");
        b.put("packs/a1", &mut b"replaced".to_vec()).unwrap();
        assert_eq!(b.get("packs/a1", 1 << 20).unwrap().unwrap(), b"replaced");
        assert_eq!(b.get("packs/a1", 8).unwrap().unwrap(), b"replaced");
        let e = b.get("packs/a1", 7).unwrap_err().to_string();
        assert!(e.contains("larger than the 7 bytes"), "{e}");
        assert_eq!(
            b.list("").unwrap(),
            vec![("index/a1".to_string(), 1), ("packs/a1".to_string(), 8)]
        );
        assert_eq!(b.list("packs/").unwrap().len(), 1);
        assert_eq!(b.list("heads/").unwrap(), vec![]);
        b.delete("packs/a1").unwrap();
        b.delete("packs/a1").unwrap();
        assert_eq!(b.get("packs/a1", 1 << 20).unwrap(), None);
        assert!(b.list(".tmp/").is_err(), "staging is not a key");
        assert_eq!(
            std::fs::read_dir(dir.path().join(".tmp")).unwrap().count(),
            0
        );
    }

    #[test]
    fn create_never_replaces_and_exactly_one_racer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(DirBackend::open(dir.path()).unwrap());
        assert!(b.create("heads/x", b"first").unwrap());
        assert!(!b.create("heads/x", b"second").unwrap());
        assert_eq!(b.get("heads/x", 1 << 20).unwrap().unwrap(), b"first");
        for round in 0..20 {
            let key = format!("heads/r{round}");
            let racers: Vec<_> = (0..4u8)
                .map(|i| {
                    let (b, key) = (b.clone(), key.clone());
                    std::thread::spawn(move || b.create(&key, &[i]).unwrap().then_some(i))
                })
                .collect();
            let winners: Vec<u8> = racers
                .into_iter()
                .filter_map(|r| r.join().unwrap())
                .collect();
            assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
            assert_eq!(b.get(&key, 1 << 20).unwrap().unwrap(), winners);
        }
    }

    #[test]
    fn keys_cannot_leave_the_remote() {
        for key in [
            "",
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "A",
            "a b",
            "a/./b",
            "ä",
        ] {
            assert!(check_key(key).is_err(), "{key:?}");
        }
        check_key("packs/0a1b-c_d.e").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let b = DirBackend::open(&dir.path().join("remote")).unwrap();
        let err = b
            .put("../escaped", &mut b"x".to_vec())
            .unwrap_err()
            .to_string();
        assert!(err.contains("../escaped"), "{err}");
        assert!(!dir.path().join("escaped").exists());
        // A stray file with a name outside the key alphabet is not listed.
        std::fs::write(dir.path().join("remote/Stray File"), b"?").unwrap();
        assert_eq!(b.list("").unwrap(), vec![]);
    }
}
