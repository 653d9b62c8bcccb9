//! Reading objects and files: entries by location (whole, delta or block member),
//! through the caches; a file's chunks in order; objects a lazy clone lacks, fetched
//! from its source first.

use super::*;

impl Store {
    /// Fetches `ids` (distinct) from the source, if there is one, and stores them in one
    /// transaction. Whether every one of them was. Once `stop` answers true (it is asked
    /// before each object is stored), the fetch ends with [`StoreError::Stopped`] and
    /// keeps nothing.
    pub(super) fn fetch_missing(&self, ids: &[Id], stop: &dyn Fn() -> bool) -> Result<bool> {
        let Some(source) = self.source.get() else {
            return Ok(false);
        };
        let mut tx = self.transaction()?;
        let mut stored = 0;
        source.fetch(ids, &mut |f| {
            if stop() {
                return Err(StoreError::Stopped);
            }
            tx.write_as(*f.id, f.kind, f.raw, f.frame)?;
            stored += 1;
            Ok(())
        })?;
        let all = stored == ids.len();
        // Something already recorded refers to them (that is why they were read), so
        // they are reachable the moment they are stored and the lock can go at once.
        drop(tx.commit()?);
        Ok(all)
    }

    pub(super) fn pack_file(&self, name: &Arc<str>, id: &Id) -> Result<Arc<File>> {
        let mut open = self.open_packs.lock().expect("pack cache lock");
        if let Some(f) = open.get(name) {
            return Ok(f.clone());
        }
        let path = self.pack_path(name);
        let f = match File::open(&path) {
            Ok(f) => Arc::new(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::PackMissing {
                    pack: name.to_string(),
                    id: *id,
                })
            }
            Err(e) => return Err(e).io("opening", path),
        };
        if open.len() > 256 {
            open.clear();
        }
        open.insert(name.clone(), f.clone());
        Ok(f)
    }

    /// Reads entry `id` at `loc` (the entry itself, or a block holding it); a delta's base
    /// is read from wherever the index says, following at most `depth` more deltas.
    pub(super) fn read_at(&self, id: &Id, loc: &Location, depth: u8) -> Result<(Kind, Vec<u8>)> {
        let cached = self.cached_block(loc);
        if let Some((kind, raw)) = cached.as_ref().and_then(|b| b.get(id)) {
            return Ok((kind, raw.to_vec()));
        }
        let file = self.pack_file(&loc.pack, id)?;
        let path = self.pack_path(&loc.pack);
        let offset = u64::from(loc.offset);
        let header = pack::read_header_of(&file, &path, &loc.pack, offset, id)?;
        if header.kind == Kind::Block {
            let block = self.block_at(&file, loc, &header, id)?;
            return block
                .get(id)
                .map(|(kind, raw)| (kind, raw.to_vec()))
                .ok_or_else(|| not_in_block(id, loc, &header));
        }
        let raw =
            pack::read_entry(
                &file,
                &path,
                &loc.pack,
                offset,
                &header,
                id,
                &mut |base| match depth.checked_sub(1) {
                    None => Err(format!(
                        "the chain of deltas is longer than {}",
                        pack::MAX_DELTA_DEPTH
                    )),
                    Some(left) => self.read_base(base, left).map_err(|e| e.to_string()),
                },
            )?;
        Ok((header.kind, raw))
    }

    /// The decoded block at `loc`, if it is in the cache.
    pub(super) fn cached_block(&self, loc: &Location) -> Option<Arc<Block>> {
        self.blocks
            .lock()
            .expect("block cache lock")
            .get(&(loc.pack.clone(), loc.offset))
    }

    /// The decoded block whose header is `header` at `loc`, read for member `id`.
    pub(super) fn block_at(
        &self,
        file: &File,
        loc: &Location,
        header: &EntryHeader,
        id: &Id,
    ) -> Result<Arc<Block>> {
        if let Some(b) = self.cached_block(loc) {
            return Ok(b);
        }
        let path = self.pack_path(&loc.pack);
        let block =
            pack::read_block(file, &path, u64::from(loc.offset), header).map_err(|e| match e {
                StoreError::DamagedFile { reason, .. } => StoreError::Corrupt {
                    id: *id,
                    pack: loc.pack.to_string(),
                    reason,
                },
                other => other,
            })?;
        let block = Arc::new(block);
        self.blocks
            .lock()
            .expect("block cache lock")
            .insert((loc.pack.clone(), loc.offset), block.clone());
        Ok(block)
    }

    /// The raw bytes of a delta's base, following at most `depth` more deltas.
    pub(crate) fn read_base(&self, id: &Id, depth: u8) -> Result<Vec<u8>> {
        if let Some(raw) = self.bases.lock().expect("base cache lock").get(id) {
            return Ok(raw.to_vec());
        }
        let (_, raw) = self.with_index_recovery(id, || {
            self.try_locations(id, |loc| self.read_at(id, loc, depth))
        })?;
        self.bases
            .lock()
            .expect("base cache lock")
            .insert(*id, Arc::new(raw.clone()));
        Ok(raw)
    }

    /// Reads and verifies an entry. A stale or damaged index is recovered from: the index
    /// is reloaded, then checked, before the entry is reported missing or corrupt.
    pub fn read_entry(&self, id: &Id) -> Result<(Kind, Vec<u8>)> {
        self.with_index_recovery(id, || {
            self.try_locations(id, |loc| self.read_at(id, loc, pack::MAX_DELTA_DEPTH))
        })
    }

    /// Reads and verifies an entry, as [`Store::read_entry`] does, and also returns how it
    /// is stored when that is a plain zstd frame ([`StoredAs::Zstd`]) or uncompressed
    /// because compression did not shrink it ([`StoredAs::Raw`]), so a copy elsewhere
    /// (a remote) need not compress it again. Deltas and block members are
    /// [`StoredAs::Other`].
    pub fn read_entry_stored(&self, id: &Id) -> Result<(Kind, Vec<u8>, StoredAs)> {
        self.with_index_recovery(id, || {
            self.try_locations(id, |loc| {
                let file = self.pack_file(&loc.pack, id)?;
                let path = self.pack_path(&loc.pack);
                let h = pack::read_header_of(&file, &path, &loc.pack, u64::from(loc.offset), id)?;
                if !matches!(h.codec, pack::Codec::Zstd | pack::Codec::Raw) || h.kind == Kind::Block
                {
                    let (kind, raw) = self.read_at(id, loc, pack::MAX_DELTA_DEPTH)?;
                    return Ok((kind, raw, StoredAs::Other));
                }
                let stored = pack::read_stored_after(&file, &path, loc.offset, &h)?;
                // `decode_entry` checks the bytes against the id. An uncompressed entry
                // is its own raw bytes; a zstd frame is read from where it is and kept.
                let no_base = &mut |_: &Id| Err("a whole entry has no base".into());
                let decoded = match h.codec {
                    pack::Codec::Zstd => pack::decode_entry(&h, &stored[..], no_base)
                        .map(|raw| (raw, StoredAs::Zstd(stored))),
                    _ => pack::decode_entry(&h, stored, no_base).map(|raw| (raw, StoredAs::Raw)),
                };
                let (raw, how) = decoded.map_err(|reason| StoreError::Corrupt {
                    id: *id,
                    pack: loc.pack.to_string(),
                    reason,
                })?;
                Ok((h.kind, raw, how))
            })
        })
    }

    /// Reads an object and checks its kind.
    pub fn read_object(&self, id: &Id, kind: Kind) -> Result<Vec<u8>> {
        let (found, raw) = self.read_entry(id)?;
        if found != kind {
            return Err(StoreError::WrongKind {
                id: *id,
                found: found.name(),
                expected: kind.name(),
            });
        }
        Ok(raw)
    }

    /// The chunks of file `id`: its manifest, or the file itself as its only chunk.
    pub fn file_chunks(&self, id: &Id) -> Result<Manifest> {
        self.with_index_recovery(id, || {
            self.try_locations(id, |loc| self.manifest_at(id, loc))
        })
    }

    /// The manifest of file `id` stored at `loc` (a one-chunk file is its chunk). The
    /// entry's own header says what it is; a chunk in a block is read to learn its length.
    pub(super) fn manifest_at(&self, id: &Id, loc: &Location) -> Result<Manifest> {
        let file = self.pack_file(&loc.pack, id)?;
        let path = self.pack_path(&loc.pack);
        let h = pack::read_header_of(&file, &path, &loc.pack, u64::from(loc.offset), id)?;
        let (kind, len) = match h.kind {
            Kind::Block => {
                let block = self.block_at(&file, loc, &h, id)?;
                let (kind, raw) = block.get(id).ok_or_else(|| not_in_block(id, loc, &h))?;
                (kind, raw.len() as u32)
            }
            kind => (kind, h.raw_len),
        };
        match kind {
            Kind::Chunk => Ok(Manifest {
                chunks: vec![ChunkRef { id: *id, len }],
            }),
            Kind::Manifest => {
                let (_, raw) = self.read_at(id, loc, pack::MAX_DELTA_DEPTH)?;
                Manifest::decode(&raw).map_err(|source| StoreError::Decode { id: *id, source })
            }
            other => Err(StoreError::WrongKind {
                id: *id,
                found: other.name(),
                expected: "file",
            }),
        }
    }

    /// In a lazy clone (a store with a source), fetches the chunks of `files` that are
    /// not here yet, all together: a few ranged reads per remote pack and one
    /// transaction, where reading the files one by one would take a request and a
    /// transaction per file. A file whose one chunk is missing is fetched as that chunk.
    /// Without a source, does nothing. `stop` can end the fetch early, as for
    /// [`Store::fetch_missing`].
    pub fn fetch_file_chunks<'i>(
        &self,
        files: impl IntoIterator<Item = &'i Id>,
        stop: &dyn Fn() -> bool,
    ) -> Result<()> {
        if !self.has_source() {
            return Ok(());
        }
        let mut missing = Vec::new();
        for id in files {
            if !self.contains(id)? {
                missing.push(*id);
                continue;
            }
            for c in self.file_chunks(id)?.chunks {
                if !self.contains(&c.id)? {
                    missing.push(c.id);
                }
            }
        }
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            self.fetch_missing(&missing, stop)?;
        }
        Ok(())
    }

    /// Streams the verified bytes of file `id` into `out`; returns the byte count. Every
    /// chunk is checked against its hash before any of its bytes are written, so a damaged
    /// store fails with an error naming the chunk and pack instead of producing wrong bytes.
    pub fn read_file(&self, id: &Id, out: &mut dyn Write) -> Result<u64> {
        self.fetch_file_chunks([id], &|| false)?;
        let manifest = self.file_chunks(id)?;
        let mut total = 0u64;
        for c in &manifest.chunks {
            let raw = self.read_object(&c.id, Kind::Chunk)?;
            if raw.len() != c.len as usize {
                return Err(StoreError::Corrupt {
                    id: c.id,
                    pack: self
                        .locate(&c.id)?
                        .map(|l| l.pack.to_string())
                        .unwrap_or_default(),
                    reason: format!(
                        "chunk is {} bytes, manifest of {} says {}",
                        raw.len(),
                        id.short(16),
                        c.len
                    ),
                });
            }
            out.write_all(&raw).map_err(|source| StoreError::Io {
                action: "writing the content of",
                path: PathBuf::from(id.to_hex()),
                source,
            })?;
            total += raw.len() as u64;
        }
        Ok(total)
    }
}

/// The index says `id` is in the block at `loc`, whose header is `block`, and it is not.
pub(super) fn not_in_block(id: &Id, loc: &Location, block: &EntryHeader) -> StoreError {
    StoreError::Corrupt {
        id: *id,
        pack: loc.pack.to_string(),
        reason: format!(
            "block {} at offset {} does not hold it",
            block.id.short(16),
            loc.offset
        ),
    }
}
