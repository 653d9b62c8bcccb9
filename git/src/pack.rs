//! Where export puts git objects: a few go in as loose objects; past
//! [`LOOSE_MAX`] they are streamed into one pack (version 2, every object whole and
//! zlib-deflated), which gix indexes into the repository's `objects/pack`. One pack file
//! instead of one file per object is what makes a large export as fast as `git
//! fast-import`.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use gix::objs::Write as _;
use gix::ObjectId;

use crate::objects::GitKind;
use crate::{GitError, Result};

/// Up to this many objects an export writes loose objects (a colocated folder's sync
/// after one commit); past it, a pack.
pub const LOOSE_MAX: usize = 256;

/// Git objects on their way into a repository.
pub(crate) struct PackOut {
    pending: Vec<(GitKind, Vec<u8>)>,
    pack: Option<(tempfile::NamedTempFile, BufWriter<File>)>,
    count: u32,
}

fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> GitError {
    move |e| GitError::Write(format!("{what}: {e}"))
}

/// The pack entry header: type and size, in git's variable-length encoding.
fn entry_header(kind: GitKind, len: usize) -> Vec<u8> {
    let t: u8 = match kind {
        GitKind::Commit => 1,
        GitKind::Tree => 2,
        GitKind::Blob => 3,
        GitKind::Tag => 4,
    };
    let mut size = len as u64;
    let mut first = (t << 4) | (size & 0x0f) as u8;
    size >>= 4;
    let mut out = Vec::with_capacity(10);
    while size > 0 {
        out.push(first | 0x80);
        first = (size & 0x7f) as u8;
        size >>= 7;
    }
    out.push(first);
    out
}

impl PackOut {
    pub(crate) fn new() -> PackOut {
        PackOut {
            pending: Vec::new(),
            pack: None,
            count: 0,
        }
    }

    /// Adds an object (its SHA-1 was computed by the caller).
    pub(crate) fn add(&mut self, git: &gix::Repository, kind: GitKind, data: &[u8]) -> Result<()> {
        if self.pack.is_none() {
            if self.pending.len() < LOOSE_MAX {
                self.pending.push((kind, data.to_vec()));
                return Ok(());
            }
            let dir = git.objects.store_ref().path().join("pack");
            std::fs::create_dir_all(&dir).map_err(io_err("creating objects/pack"))?;
            let tmp = tempfile::Builder::new()
                .prefix("tmp_lifeos_export_")
                .tempfile_in(&dir)
                .map_err(io_err("creating a temporary pack"))?;
            let mut out = BufWriter::with_capacity(
                1 << 20,
                tmp.reopen().map_err(io_err("opening the temporary pack"))?,
            );
            // The count is written last, when it is known.
            out.write_all(b"PACK\0\0\0\x02\0\0\0\0")
                .map_err(io_err("writing the pack"))?;
            self.pack = Some((tmp, out));
            for (k, d) in std::mem::take(&mut self.pending) {
                self.append(k, &d)?;
            }
        }
        self.append(kind, data)
    }

    fn append(&mut self, kind: GitKind, data: &[u8]) -> Result<()> {
        let (_, out) = self.pack.as_mut().expect("a pack is open");
        out.write_all(&entry_header(kind, data.len()))
            .map_err(io_err("writing the pack"))?;
        let mut z =
            gix_zlib::stream::deflate::Write::new(&mut *out, gix_zlib::Compression::BEST_SPEED);
        z.write_all(data).map_err(io_err("writing the pack"))?;
        z.flush().map_err(io_err("writing the pack"))?;
        self.count += 1;
        Ok(())
    }

    /// Puts everything added into `git`; returns the pack's `.keep` file, which the
    /// caller removes once refs point into the pack (until then it keeps `git gc` away).
    pub(crate) fn finish(&mut self, git: &gix::Repository) -> Result<Option<PathBuf>> {
        for (kind, data) in std::mem::take(&mut self.pending) {
            git.objects
                .write_buf(kind, &data)
                .map_err(|e| GitError::Write(format!("{kind}: {e}")))?;
        }
        let Some((tmp, out)) = self.pack.take() else {
            return Ok(None);
        };
        let mut file = out
            .into_inner()
            .map_err(|e| GitError::Write(format!("writing the pack: {}", e.error())))?;
        file.seek(SeekFrom::Start(8))
            .and_then(|_| file.write_all(&self.count.to_be_bytes()))
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .map_err(io_err("writing the pack"))?;
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).map_err(io_err("reading the pack"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let trailer: ObjectId = hasher
            .try_finalize()
            .map_err(|e| GitError::Write(format!("hashing the pack: {e}")))?;
        file.write_all(trailer.as_bytes())
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .map_err(io_err("writing the pack"))?;
        let dir = git.objects.store_ref().path().join("pack");
        let outcome = gix_pack::Bundle::write_to_directory(
            &mut std::io::BufReader::with_capacity(1 << 20, file),
            Some(&dir),
            &mut gix::progress::Discard,
            &AtomicBool::new(false),
            None::<gix::objs::find::Never>,
            gix::hash::Kind::Sha1,
            gix_pack::bundle::write::Options::default(),
        )
        .map_err(|e| GitError::Write(format!("indexing the pack: {e}")))?;
        drop(tmp);
        Ok(outcome.keep_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_headers_use_git_s_variable_length_size() {
        assert_eq!(entry_header(GitKind::Blob, 5), vec![0x35]);
        assert_eq!(entry_header(GitKind::Commit, 16), vec![0x90, 0x01]);
        assert_eq!(entry_header(GitKind::Tree, 300), vec![0xac, 0x12]);
    }

    #[test]
    fn a_large_export_becomes_one_indexed_pack_git_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let git = gix::init_bare(tmp.path()).unwrap();
        let mut out = PackOut::new();
        let mut oids = Vec::new();
        for i in 0..(LOOSE_MAX + 10) {
            let data = format!("object {i}\n").repeat(i % 7 + 1);
            oids.push(crate::objects::git_hash(GitKind::Blob, data.as_bytes()));
            out.add(&git, GitKind::Blob, data.as_bytes()).unwrap();
        }
        let keep = out.finish(&git).unwrap().expect("a pack was written");
        std::fs::remove_file(keep).unwrap();
        let packs: Vec<_> = std::fs::read_dir(tmp.path().join("objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            packs.iter().filter(|n| n.ends_with(".pack")).count(),
            1,
            "{packs:?}"
        );
        assert_eq!(
            packs.iter().filter(|n| n.ends_with(".idx")).count(),
            1,
            "{packs:?}"
        );
        let git = gix::open(tmp.path()).unwrap();
        for (i, oid) in oids.iter().enumerate() {
            let obj = git.find_object(*oid).unwrap();
            assert_eq!(
                obj.data,
                format!("object {i}\n").repeat(i % 7 + 1).as_bytes()
            );
        }
    }
}
