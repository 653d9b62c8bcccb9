//! Helpers for tests of this crate and of the crates above it that change a working folder
//! at random (not part of the API).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Writes `rel` under `root` (making its folders) with modification time `when`: a
/// file written long enough ago is not racily clean to the snapshot that reads it.
pub fn write_at(root: &Path, rel: &str, bytes: &[u8], when: std::time::SystemTime) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a path under root")).expect("folders made");
    std::fs::write(&p, bytes).expect("file written");
    std::fs::File::options()
        .write(true)
        .open(&p)
        .and_then(|f| f.set_modified(when))
        .expect("modification time set");
}

/// Makes room for a file at `rel` under `root`: a folder there, or a file where a folder on
/// its way must be, is removed, and the folders on its way are made.
pub fn clear_way(root: &Path, rel: &[u8]) -> std::io::Result<()> {
    let rel = Path::new(OsStr::from_bytes(rel));
    let p = root.join(rel);
    if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&p)?;
    }
    let mut at = root.to_path_buf();
    for c in rel.parent().into_iter().flat_map(|p| p.components()) {
        at.push(c);
        if at.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&at)?;
        }
    }
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Commits `repo`'s whole folder with `message`, as `lifeos commit -m` does.
pub fn commit_folder(repo: &crate::Repo, message: &[u8]) -> crate::commit::CommitOutcome {
    let wc = repo.lock_working_copy().expect("working-copy lock");
    let opts = crate::commit::CommitOptions {
        message,
        ..Default::default()
    };
    repo.commit_working_copy(&wc, &opts, &crate::working_copy::NoProgress)
        .expect("commit")
}
