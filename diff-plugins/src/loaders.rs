//! The two places a version of a file is loaded from: the store (a recorded version) and
//! the working folder.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use lifeos_store::config::Chunking;
use lifeos_store::{Id, Manifest, Store};

use crate::{DiffError, Loader, ReadSeek};

/// A version in the store, read from its chunks.
pub struct StoreLoader {
    store: Arc<Store>,
    id: Id,
    path: String,
}

impl StoreLoader {
    /// The version of file `id` in `store`, named `path` in errors.
    pub fn new(store: Arc<Store>, id: Id, path: String) -> StoreLoader {
        StoreLoader { store, id, path }
    }

    fn err(&self, e: impl std::fmt::Display) -> DiffError {
        DiffError::Read {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

impl Loader for StoreLoader {
    fn load(&self) -> Result<Vec<u8>, DiffError> {
        let mut v = Vec::new();
        self.store
            .read_file(&self.id, &mut v)
            .map_err(|e| self.err(e))?;
        Ok(v)
    }
    fn head(&self, n: usize) -> Result<Vec<u8>, DiffError> {
        let mut r = lifeos_store::reader::FileReader::open(self.store.clone(), &self.id)
            .map_err(|e| self.err(e))?;
        let mut v = Vec::new();
        r.by_ref()
            .take(n as u64)
            .read_to_end(&mut v)
            .map_err(|e| self.err(e))?;
        Ok(v)
    }
    fn chunks(&self) -> Result<Manifest, DiffError> {
        self.store.file_chunks(&self.id).map_err(|e| self.err(e))
    }
    fn reader(&self) -> Result<Box<dyn ReadSeek>, DiffError> {
        Ok(Box::new(
            lifeos_store::reader::FileReader::open(self.store.clone(), &self.id)
                .map_err(|e| self.err(e))?,
        ))
    }
}

/// A version in a folder (the working folder), read from the file system.
pub struct FsLoader {
    path: PathBuf,
    chunking: Chunking,
    symlink: bool,
}

impl FsLoader {
    /// The file at `path` (the link itself when `symlink`: its target is its content),
    /// whose chunks are cut with `chunking`, the repository's, so that they compare with
    /// the stored versions'.
    pub fn new(path: PathBuf, chunking: Chunking, symlink: bool) -> FsLoader {
        FsLoader {
            path,
            chunking,
            symlink,
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> DiffError {
        DiffError::Read {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        }
    }
}

impl Loader for FsLoader {
    fn load(&self) -> Result<Vec<u8>, DiffError> {
        if self.symlink {
            return std::fs::read_link(&self.path)
                .map(|t| t.into_os_string().into_encoded_bytes())
                .map_err(|e| self.err(e));
        }
        std::fs::read(&self.path).map_err(|e| self.err(e))
    }
    fn head(&self, n: usize) -> Result<Vec<u8>, DiffError> {
        if self.symlink {
            return self.load().map(|mut v| {
                v.truncate(n);
                v
            });
        }
        let mut v = Vec::new();
        std::fs::File::open(&self.path)
            .and_then(|f| f.take(n as u64).read_to_end(&mut v))
            .map_err(|e| self.err(e))?;
        Ok(v)
    }
    fn chunks(&self) -> Result<Manifest, DiffError> {
        let f: Box<dyn Read> = if self.symlink {
            Box::new(std::io::Cursor::new(self.load()?))
        } else {
            Box::new(std::fs::File::open(&self.path).map_err(|e| self.err(e))?)
        };
        let mut c = lifeos_store::chunker::Chunker::new(f, self.chunking);
        let mut chunks = Vec::new();
        while let Some(ch) = c.next_chunk().map_err(|e| self.err(e))? {
            chunks.push(lifeos_store::ChunkRef {
                id: Id::hash(ch),
                len: ch.len() as u32,
            });
        }
        Ok(Manifest { chunks })
    }
    fn reader(&self) -> Result<Box<dyn ReadSeek>, DiffError> {
        let f = std::fs::File::open(&self.path).map_err(|e| self.err(e))?;
        Ok(Box::new(std::io::BufReader::with_capacity(1 << 20, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version loaded from the store and the same bytes loaded from a file give the
    /// same content, head, chunks and stream; a symlink's content is its target.
    #[test]
    fn the_store_and_the_folder_load_the_same_version_alike() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::init(&dir.path().join("store"), Default::default()).unwrap());
        let bytes: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut tx = store.transaction().unwrap();
        let id = tx.store_bytes(&bytes).unwrap();
        let _held = tx.commit().unwrap();
        let file = dir.path().join("f.bin");
        std::fs::write(&file, &bytes).unwrap();
        let chunking = store.config().chunking;
        let stored = StoreLoader::new(store.clone(), id, "f.bin".into());
        let folder = FsLoader::new(file.clone(), chunking, false);
        for l in [&stored as &dyn Loader, &folder] {
            assert_eq!(l.load().unwrap(), bytes);
            assert_eq!(l.head(10).unwrap(), &bytes[..10]);
            let mut streamed = Vec::new();
            l.reader().unwrap().read_to_end(&mut streamed).unwrap();
            assert_eq!(streamed, bytes);
        }
        assert_eq!(
            stored.chunks().unwrap().chunks,
            folder.chunks().unwrap().chunks
        );
        let link = dir.path().join("l");
        std::os::unix::fs::symlink("f.bin", &link).unwrap();
        assert_eq!(
            FsLoader::new(link, chunking, true).load().unwrap(),
            b"f.bin"
        );
        let missing = FsLoader::new(dir.path().join("gone"), chunking, false);
        assert!(missing.load().unwrap_err().to_string().contains("gone"));
    }
}
