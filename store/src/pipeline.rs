//! The snapshot pipeline: reads files, chunks, hashes and compresses them on every core and
//! appends new chunks to the transaction's packs.
//!
//! Reader threads (one per core) read whole files and cut them into chunks while hashing
//! the whole content; worker threads (one per core) hash each chunk, skip those already
//! stored, and compress the rest; one writer thread appends to packs. Bounded channels
//! between the stages apply back-pressure, so memory stays bounded (a few chunk buffers
//! per thread) whatever the file sizes.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crossbeam_channel::{bounded, unbounded, Sender};

use crate::chunker::Chunker;
use crate::config::Chunking;
use crate::error::{IoContext, Result, StoreError};
use crate::id::Id;
use crate::kind::Kind;
use crate::manifest::{ChunkRef, Manifest};
use crate::pack::EntryHeader;
use crate::store::{encode_entry, Transaction};

/// How many times a file that changes while being read is read again.
const READ_ATTEMPTS: usize = 3;

/// A file stored by the pipeline (a commit of a million new files holds a million).
#[derive(Debug)]
pub struct StoredFile {
    /// BLAKE3 of the content that was stored.
    pub id: Id,
    /// Its length.
    pub size: u64,
    /// The file's metadata when it was opened; it was unchanged after reading.
    pub stat: Stat,
}

/// What a scan keeps of a file's metadata: the fields the stat cache compares, in 64
/// bytes rather than the platform's whole `stat` record (a scan holds one per file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// mtime, ns since the epoch.
    pub mtime_ns: i128,
    /// ctime, ns since the epoch.
    pub ctime_ns: i128,
    /// Size in bytes.
    pub size: u64,
    /// Inode number.
    pub ino: u64,
    /// Mode bits (file type and permissions, as `st_mode`).
    pub mode: u32,
    /// Hard links to the inode (saturated at `u32::MAX`): a file with more than one can
    /// change through another name, which no event about this one reports.
    pub links: u32,
}

impl From<&Metadata> for Stat {
    fn from(m: &Metadata) -> Stat {
        Stat {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            size: m.len(),
            ino: m.ino(),
            mode: m.mode(),
            links: u32::try_from(m.nlink()).unwrap_or(u32::MAX),
        }
    }
}

impl Stat {
    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.mode & libc_s_ifmt() == 0o100_000
    }

    /// Whether it is a symlink.
    pub fn is_symlink(&self) -> bool {
        self.mode & libc_s_ifmt() == 0o120_000
    }

    /// Whether an execute bit is set.
    pub fn executable(&self) -> bool {
        self.mode & 0o111 != 0
    }
}

/// `S_IFMT`: the file-type bits of `st_mode` (the same on every Unix lifeos runs on).
const fn libc_s_ifmt() -> u32 {
    0o170_000
}

struct ChunkJob {
    seq: usize,
    data: Vec<u8>,
    result: Sender<(usize, Id, u32)>,
}

type Entry = (EntryHeader, Vec<u8>);

fn same_version(a: &Metadata, b: &Metadata) -> bool {
    a.len() == b.len()
        && a.mtime() == b.mtime()
        && a.mtime_nsec() == b.mtime_nsec()
        && a.ctime() == b.ctime()
        && a.ctime_nsec() == b.ctime_nsec()
        && a.ino() == b.ino()
}

struct Shared<'a, 't> {
    tx: &'a Claims<'t>,
    chunking: Chunking,
    level: i32,
    chunks: Sender<ChunkJob>,
    entries: Sender<Entry>,
    progress: &'a (dyn Fn(u64) + Sync),
}

/// The parts of a transaction the pipeline's threads share.
pub(crate) struct Claims<'t> {
    pub(crate) store: &'t crate::Store,
    pub(crate) claimed: &'t Mutex<crate::store::Claimed>,
}

impl Claims<'_> {
    pub(crate) fn claim(&self, id: &Id) -> Result<bool> {
        let seen = {
            let claimed = self.claimed.lock().expect("claimed lock");
            if claimed.contains(id)? {
                return Ok(false);
            }
            claimed.runs_seen()
        };
        if self.store.contains(id)? {
            return Ok(false);
        }
        self.claimed.lock().expect("claimed lock").insert(*id, seen)
    }
}

fn pipeline_broken() -> StoreError {
    StoreError::PipelineStopped
}

impl Shared<'_, '_> {
    /// Stores one file; retries if it changes while being read.
    fn store_file(&self, path: &Path) -> Result<StoredFile> {
        for _ in 0..READ_ATTEMPTS {
            let file = File::open(path).io("opening", path)?;
            let before = file.metadata().io("reading metadata of", path)?;
            let (id, size) = if before.len() < u64::from(self.chunking.min_size) {
                self.store_small(&file, path, &before)?
            } else {
                self.store_large(&file, path)?
            };
            let after = file.metadata().io("reading metadata of", path)?;
            if same_version(&before, &after) && size == before.len() {
                return Ok(StoredFile {
                    id,
                    size,
                    stat: Stat::from(&before),
                });
            }
        }
        Err(StoreError::Unstable(path.into()))
    }

    /// A file smaller than the minimum chunk is one chunk, processed on this thread.
    fn store_small(&self, file: &File, path: &Path, meta: &Metadata) -> Result<(Id, u64)> {
        let mut data = Vec::with_capacity(meta.len() as usize);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, u64::from(self.chunking.min_size) * 2),
            &mut data,
        )
        .io("reading", path)?;
        let id = Id::hash(&data);
        (self.progress)(data.len() as u64);
        if self.tx.claim(&id)? {
            let mut c = zstd::bulk::Compressor::new(self.level).map_err(|e| StoreError::Io {
                action: "starting zstd for",
                path: path.into(),
                source: e,
            })?;
            self.entries
                .send(encode_entry(&mut c, id, Kind::Chunk, &data))
                .map_err(|_| pipeline_broken())?;
        }
        Ok((id, data.len() as u64))
    }

    /// A larger file is cut here and its chunks hashed and compressed by the workers.
    fn store_large(&self, file: &File, path: &Path) -> Result<(Id, u64)> {
        let mut chunker = Chunker::new(file, self.chunking);
        let (res_tx, res_rx) = unbounded();
        let mut n = 0usize;
        while let Some(chunk) = chunker.next_chunk().io("reading", path)? {
            (self.progress)(chunk.len() as u64);
            self.chunks
                .send(ChunkJob {
                    seq: n,
                    data: chunk.to_vec(),
                    result: res_tx.clone(),
                })
                .map_err(|_| pipeline_broken())?;
            n += 1;
        }
        drop(res_tx);
        let mut refs = vec![None; n];
        for _ in 0..n {
            let (seq, id, len) = res_rx.recv().map_err(|_| pipeline_broken())?;
            refs[seq] = Some(ChunkRef { id, len });
        }
        let (file_id, size) = chunker.content_hash();
        let chunks: Vec<ChunkRef> = refs
            .into_iter()
            .map(|r| r.expect("every chunk reported"))
            .collect();
        if chunks.len() > 1 && self.tx.claim(&file_id)? {
            let raw = Manifest { chunks }.encode();
            if raw.len() as u64 > crate::pack::MAX_ENTRY_LEN {
                return Err(StoreError::TooLarge(size));
            }
            let header = EntryHeader {
                id: file_id,
                kind: Kind::Manifest,
                codec: crate::pack::Codec::Raw,
                raw_len: raw.len() as u32,
                stored_len: raw.len() as u32,
            };
            self.entries
                .send((header, raw))
                .map_err(|_| pipeline_broken())?;
        } else if chunks.len() == 1 && chunks[0].id != file_id {
            // The file changed between the chunk read and the hash: read it again.
            return Ok((file_id, u64::MAX));
        }
        Ok((file_id, size))
    }
}

/// Hashes, claims and compresses chunks until every file thread is done. A worker never
/// stops early on an error: it answers every job (so no file thread waits for a result
/// that would never come, its job stranded in the channel) and reports its first error
/// when the channel closes.
fn worker(
    claims: &Claims<'_>,
    level: i32,
    jobs: crossbeam_channel::Receiver<ChunkJob>,
    entries: Sender<Entry>,
) -> Result<()> {
    let mut failed: Option<StoreError> = None;
    let mut compressor = match zstd::bulk::Compressor::new(level) {
        Ok(c) => Some(c),
        Err(e) => {
            failed = Some(StoreError::Io {
                action: "starting zstd",
                path: PathBuf::new(),
                source: e,
            });
            None
        }
    };
    for job in jobs {
        let id = Id::hash(&job.data);
        let fresh = match failed {
            Some(_) => Ok(false),
            None => claims.claim(&id),
        };
        let _ = job.result.send((job.seq, id, job.data.len() as u32));
        match (fresh, compressor.as_mut()) {
            (Ok(true), Some(c)) => {
                if entries
                    .send(encode_entry(c, id, Kind::Chunk, &job.data))
                    .is_err()
                {
                    failed.get_or_insert_with(pipeline_broken);
                }
            }
            (Ok(_), _) => {}
            (Err(e), _) => {
                failed.get_or_insert(e);
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

impl Transaction<'_> {
    /// Stores the files at `paths` on every core; returns, for each path in order, the
    /// stored file or why it could not be stored. `progress` receives byte counts as they
    /// are read. A failure to write packs (a full disk) fails the whole call.
    pub fn store_files(
        &mut self,
        paths: &[PathBuf],
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Vec<Result<StoredFile>>> {
        let mut results: Vec<Option<Result<StoredFile>>> = paths.iter().map(|_| None).collect();
        self.store_files_each(
            paths.len(),
            &|i| paths[i].clone(),
            progress,
            &mut |i, res| results[i] = Some(res),
        )?;
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(pipeline_broken())))
            .collect())
    }

    /// Stores `count` files on every core, the `i`th at `path(i)`, and hands each one's
    /// result (the stored file or why it could not be stored) to `stored` on this thread
    /// as it comes, in no particular order: nothing is held for the files already done,
    /// however many there are. `progress` receives byte counts as they are read. A
    /// failure to write packs (a full disk) fails the whole call, and then not every file
    /// has had a result.
    pub fn store_files_each(
        &mut self,
        count: usize,
        path: &(dyn Fn(usize) -> PathBuf + Sync),
        progress: &(dyn Fn(u64) + Sync),
        stored: &mut dyn FnMut(usize, Result<StoredFile>),
    ) -> Result<()> {
        let threads = crate::par::threads();
        let level = self.store().config().compression.zstd_level;
        let chunking = self.store().config().chunking;
        let claims = Claims {
            store: self.store(),
            claimed: &self.claimed,
        };
        let sink = &mut self.sink;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut delivered = 0usize;
        let (chunk_tx, chunk_rx) = bounded::<ChunkJob>(threads * 4);
        let (entry_tx, entry_rx) = bounded::<Entry>(threads * 4);
        let write_result = std::thread::scope(|s| {
            let writer = s.spawn(move || -> Result<()> {
                for (header, stored) in entry_rx {
                    sink.put(&header, &stored)?;
                }
                Ok(())
            });
            let mut workers = Vec::new();
            for _ in 0..threads {
                let rx = chunk_rx.clone();
                let tx = entry_tx.clone();
                let claims = &claims;
                workers.push(s.spawn(move || worker(claims, level, rx, tx)));
            }
            drop(chunk_rx);
            let shared = Shared {
                tx: &claims,
                chunking,
                level,
                chunks: chunk_tx,
                entries: entry_tx,
                progress,
            };
            std::thread::scope(|r| {
                let (result_tx, result_rx) = bounded::<(usize, Result<StoredFile>)>(threads * 4);
                for _ in 0..threads {
                    let result_tx = result_tx.clone();
                    let (shared, next) = (&shared, &next);
                    r.spawn(move || loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        let res = shared.store_file(&path(i));
                        let stop = matches!(res, Err(StoreError::PipelineStopped));
                        if result_tx.send((i, res)).is_err() || stop {
                            break;
                        }
                    });
                }
                drop(result_tx);
                for (i, res) in result_rx {
                    delivered += 1;
                    stored(i, res);
                }
            });
            drop(shared);
            let mut first_err = None;
            for w in workers {
                if let Err(e) = w.join().expect("pipeline worker does not panic") {
                    first_err.get_or_insert(e);
                }
            }
            match writer.join().expect("pack writer does not panic") {
                Err(e) => Err(e),
                Ok(()) => first_err.map_or(Ok(()), Err),
            }
        });
        write_result?;
        if delivered < count {
            return Err(pipeline_broken());
        }
        Ok(())
    }
}

impl Transaction<'_> {
    /// Stores in-memory bytes as a file (chunked like any file); returns its id.
    pub fn store_bytes(&mut self, data: &[u8]) -> Result<Id> {
        Ok(self.store_reader(data, Path::new("<memory>"))?.0)
    }

    /// Stores everything `src` yields as a file, chunked like any file, reading it once
    /// on this thread and holding at most a few chunks in memory; returns its id and
    /// length. `what` names the source in errors.
    pub fn store_reader(&mut self, src: impl std::io::Read, what: &Path) -> Result<(Id, u64)> {
        let chunking = self.store().config().chunking;
        let mut chunker = Chunker::new(src, chunking);
        let mut chunks = Vec::new();
        while let Some(c) = chunker.next_chunk().io("reading", what)? {
            let id = Id::hash(c);
            chunks.push(ChunkRef {
                id,
                len: c.len() as u32,
            });
            self.write_entry(id, Kind::Chunk, c)?;
        }
        let (id, len) = chunker.content_hash();
        match chunks.len() {
            0 => self.write_entry(id, Kind::Chunk, &[])?,
            1 => {}
            _ => self.write_entry(id, Kind::Manifest, &Manifest { chunks }.encode())?,
        }
        Ok((id, len))
    }
}

#[cfg(test)]
mod tests {
    use crate::test_data::noise;
    use crate::{Store, StoreConfig};

    #[test]
    fn files_read_back_exactly_and_shared_chunks_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join("s"), StoreConfig::default()).unwrap();
        let big = noise(3 << 20, 1);
        let mut edited = big.clone();
        edited[2 << 20] ^= 1;
        let files = [
            ("a", big.clone()),
            ("b", big.clone()),
            ("c", edited),
            ("d", Vec::new()),
        ];
        let paths: Vec<_> = files
            .iter()
            .map(|(n, data)| {
                let p = dir.path().join(n);
                std::fs::write(&p, data).unwrap();
                p
            })
            .collect();
        let mut tx = store.transaction().unwrap();
        let read = std::sync::atomic::AtomicU64::new(0);
        let stored = tx
            .store_files(&paths, &|n| {
                read.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            })
            .unwrap();
        drop(tx.commit().unwrap());
        let total: u64 = files.iter().map(|(_, d)| d.len() as u64).sum();
        assert_eq!(read.into_inner(), total);
        for ((_, data), s) in files.iter().zip(&stored) {
            let s = s.as_ref().unwrap();
            assert_eq!(s.id, crate::Id::hash(data));
            let mut out = Vec::new();
            store.read_file(&s.id, &mut out).unwrap();
            assert!(out == *data);
        }
        // The same content twice and a one-byte edit cost about one copy plus a chunk.
        let packs = store.stats().unwrap().pack_bytes;
        assert!(packs < (3 << 20) + (1 << 20), "{packs} bytes of packs");
    }

    #[test]
    fn a_missing_file_is_its_own_error_and_the_rest_are_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join("s"), StoreConfig::default()).unwrap();
        let ok = dir.path().join("ok");
        std::fs::write(&ok, b"fine").unwrap();
        let mut tx = store.transaction().unwrap();
        let res = tx
            .store_files(&[dir.path().join("gone"), ok], &|_| {})
            .unwrap();
        assert!(
            matches!(&res[0], Err(crate::StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound)
        );
        assert!(res[1].is_ok());
    }
}
