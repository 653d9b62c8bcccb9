//! File-system helpers every layer uses: atomic and durable writes, directory syncs, lock
//! files, random names.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// Random lowercase hex of `bytes` random bytes.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS random source is available");
    hex::encode(buf)
}

/// fsyncs a directory so that renames and creations inside it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .io("syncing directory", dir)
}

/// Opens (creating it if needed) a file used only for `flock`, without locking it.
pub fn open_lock_file(path: &Path) -> Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .io("opening", path)
}

/// Writes `bytes` to `path` atomically and durably (temp file, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|s| s.to_str()).unwrap_or("file"),
        random_hex(6)
    ));
    write_new_synced(&tmp, bytes)?;
    let res = std::fs::rename(&tmp, path)
        .io("renaming into place", path)
        .and_then(|()| sync_dir(dir));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Creates the file `path`, which must not exist, holding `bytes`, fsynced; on failure
/// nothing is left at `path`.
pub fn write_new_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let res = (|| {
        let mut f = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .io("creating", path)?;
        f.write_all(bytes).io("writing", path)?;
        f.sync_all().io("syncing", path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(path);
    }
    res
}

/// Lists a directory's entries (full paths); a missing directory is empty.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .io("listing", dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).io("listing", dir),
    }
}
