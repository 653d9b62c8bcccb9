//! A seekable reader over a stored file: reads (and verifies) one chunk at a time.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use crate::kind::Kind;
use crate::manifest::Manifest;
use crate::{Id, Store};

/// Reads a stored file with `Read + Seek`, holding one chunk in memory.
pub struct FileReader {
    store: Arc<Store>,
    chunks: Manifest,
    /// Offset of each chunk's first byte.
    starts: Vec<u64>,
    size: u64,
    pos: u64,
    current: Option<(usize, Vec<u8>)>,
}

impl FileReader {
    /// A reader over file `id`.
    pub fn open(store: Arc<Store>, id: &Id) -> crate::Result<FileReader> {
        let chunks = store.file_chunks(id)?;
        let mut starts = Vec::with_capacity(chunks.chunks.len());
        let mut off = 0u64;
        for c in &chunks.chunks {
            starts.push(off);
            off += u64::from(c.len);
        }
        Ok(FileReader {
            store,
            chunks,
            starts,
            size: off,
            pos: 0,
            current: None,
        })
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let i = match self.starts.binary_search(&self.pos) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        if self.current.as_ref().is_none_or(|(ci, _)| *ci != i) {
            let raw = self
                .store
                .read_object(&self.chunks.chunks[i].id, Kind::Chunk)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            self.current = Some((i, raw));
        }
        let (_, data) = self.current.as_ref().expect("loaded");
        let within = (self.pos - self.starts[i]) as usize;
        let n = buf.len().min(data.len() - within);
        buf[..n].copy_from_slice(&data[within..within + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for FileReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => n as i128,
            SeekFrom::End(d) => self.size as i128 + d as i128,
            SeekFrom::Current(d) => self.pos as i128 + d as i128,
        };
        if target < 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start",
            ));
        }
        self.pos = target as u64;
        Ok(self.pos)
    }
}
