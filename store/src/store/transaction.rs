//! Writing: a transaction's packs, filled and finished in the background, installed with
//! their index layer at commit under the install lock, and the repository lock held until
//! what refers to them is published.

use super::*;

impl Store {
    /// Opens the repository lock file (not yet locked).
    pub(super) fn open_lock(&self) -> Result<(File, PathBuf)> {
        let path = self.dir.join(LOCK_FILE);
        Ok((open_lock_file(&path)?, path))
    }

    /// Takes the install lock ([`INSTALL_LOCK_FILE`]), shared or exclusive, waiting for it.
    pub(super) fn install_lock(&self, exclusive: bool) -> Result<File> {
        let path = self.dir.join(INSTALL_LOCK_FILE);
        let f = open_lock_file(&path)?;
        if exclusive { f.lock() } else { f.lock_shared() }.io("locking", &path)?;
        Ok(f)
    }

    /// Starts a write transaction (takes the repository lock shared).
    pub fn transaction(&self) -> Result<Transaction<'_>> {
        let (lock, lock_path) = self.open_lock()?;
        lock.lock_shared().io("locking", &lock_path)?;
        // A gc may have run since the index was loaded: what it removed must not be
        // taken as present.
        self.reload_index()?;
        self.clean_tmp()?;
        self.new_transaction(Some(lock))
    }

    /// A transaction for a caller that already holds the lock exclusively (`gc`).
    pub(crate) fn transaction_locked(&self) -> Result<Transaction<'_>> {
        self.new_transaction(None)
    }

    pub(super) fn new_transaction(&self, lock: Option<File>) -> Result<Transaction<'_>> {
        let prefix = self.session_prefix()?;
        let claimed = Arc::new(Mutex::new(Claimed::default()));
        Ok(Transaction {
            store: self,
            lock,
            sink: PackSink {
                tmp_dir: self.dir.join(TMP_DIR),
                rows: RowSorter::new(&self.dir.join(TMP_DIR), &prefix),
                prefix,
                target: self.config.packs.target_size,
                current: None,
                finishing: Vec::new(),
                done: Vec::new(),
                failed: None,
                claimed: claimed.clone(),
                seq: self.pack_seq.clone(),
            },
            claimed,
            pending: IdMap::default(),
            blocks: Vec::new(),
            compressor: zstd::bulk::Compressor::new(self.config.compression.zstd_level).map_err(
                |e| StoreError::BadConfig {
                    path: self.dir.join(CONFIG_FILE),
                    reason: e.to_string(),
                },
            )?,
            level: self.config.compression.zstd_level,
        })
    }

    /// Takes the repository lock exclusively (for `gc`), waiting for writers to finish.
    pub fn lock_exclusive(&self) -> Result<File> {
        let (lock, lock_path) = self.open_lock()?;
        lock.lock().io("locking", &lock_path)?;
        Ok(lock)
    }

    pub(super) fn session_prefix(&self) -> Result<String> {
        let mut s = self.session.lock().expect("session lock");
        if let Some(s) = &*s {
            return Ok(s.prefix.clone());
        }
        let prefix = format!("s{}", random_hex(8));
        // Lock the file before it gets the name other processes look for, so none of
        // them can mistake the new session for a dead one.
        let tmp = self.dir.join(TMP_DIR);
        let locking = tmp.join(format!("{prefix}.locking"));
        let path = tmp.join(format!("{prefix}.lock"));
        let f = File::options()
            .write(true)
            .create_new(true)
            .open(&locking)
            .io("creating", &locking)?;
        f.lock().io("locking", &locking)?;
        std::fs::rename(&locking, &path).io("renaming", &path)?;
        *s = Some(Session {
            prefix: prefix.clone(),
            _lock: f,
        });
        Ok(prefix)
    }

    /// Moves finished packs into `packs/` and fsyncs the folder. A pack whose rename
    /// failed stays in the temporary folder and is removed with its session.
    pub(crate) fn install_packs(&self, finished: Vec<FinishedPack>) -> Result<()> {
        let dir = self.dir.join(PACKS_DIR);
        let mut rest = finished.into_iter();
        for p in rest.by_ref() {
            if let Err(e) = p.install(&dir) {
                rest.for_each(FinishedPack::discard);
                return Err(e);
            }
        }
        sync_dir(&dir)
    }
}

/// Appends entries to packs, closing each at the target size. Closed packs are made
/// durable on background threads while writing goes on; they stay in the temporary folder,
/// invisible to everyone else, until the transaction commits.
pub struct PackSink {
    tmp_dir: PathBuf,
    prefix: String,
    target: u64,
    current: Option<PackWriter>,
    pub(super) finishing: Vec<Finishing>,
    /// Packs finished, whose rows are in `rows`.
    done: Vec<FinishedPack>,
    /// The first failure of a pack finished in the background, reported by `finish`.
    failed: Option<StoreError>,
    /// The rows of the finished packs: the transaction's index layer once sorted. The runs
    /// it spills are handed to `claimed`, which then lets go of their ids.
    pub(super) rows: RowSorter,
    claimed: Arc<Mutex<Claimed>>,
    seq: Arc<std::sync::atomic::AtomicU64>,
}

/// A pack being finished in the background: the pack and its rows once done.
type Finishing = JoinHandle<Result<(FinishedPack, Vec<FooterRow>)>>;

impl PackSink {
    /// Appends one entry.
    pub fn put(&mut self, header: &EntryHeader, stored: &[u8]) -> Result<()> {
        self.writer_for(stored.len())?.append(header, stored)?;
        Ok(())
    }

    /// Appends one block entry holding `members`.
    pub fn put_block(
        &mut self,
        header: &EntryHeader,
        stored: &[u8],
        members: &[(Id, Kind)],
    ) -> Result<()> {
        self.writer_for(stored.len())?
            .append_block(header, stored, members)?;
        Ok(())
    }

    /// Copies the entry at `offset` of a pack byte for byte (a block with its members);
    /// returns the ids it makes present.
    pub(crate) fn copy(&mut self, file: &File, path: &Path, offset: u32) -> Result<Vec<Id>> {
        let (h, stored) = pack::read_stored(file, path, offset)?;
        if h.kind != Kind::Block {
            self.put(&h, &stored)?;
            return Ok(vec![h.id]);
        }
        let block = pack::decode_block(path, u64::from(offset), &h, stored.clone())?;
        let members: Vec<(Id, Kind)> = block.members().map(|(id, kind, _)| (id, kind)).collect();
        self.put_block(&h, &stored, &members)?;
        Ok(std::iter::once(h.id)
            .chain(members.iter().map(|m| m.0))
            .collect())
    }

    /// The pack to append an entry of `stored_len` bytes to, starting a new one when the
    /// current one is full.
    fn writer_for(&mut self, stored_len: usize) -> Result<&mut PackWriter> {
        if self
            .current
            .as_ref()
            .is_some_and(|p| p.len() >= self.target || !p.fits(stored_len))
        {
            self.close_current()?;
        }
        if self.current.is_none() {
            let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let path = self.tmp_dir.join(format!("{}-pack{n}.tmp", self.prefix));
            self.current = Some(PackWriter::create(path)?);
        }
        Ok(self.current.as_mut().expect("current pack"))
    }

    /// Closes the current pack, to be finished in the background, and takes in the packs
    /// finished meanwhile.
    fn close_current(&mut self) -> Result<()> {
        if let Some(p) = self.current.take() {
            self.finishing.push(std::thread::spawn(move || p.finish()));
        }
        let mut i = 0;
        while i < self.finishing.len() {
            if self.finishing[i].is_finished() {
                let h = self.finishing.swap_remove(i);
                self.take_finished(h)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Takes in a pack finished in the background: its rows go to the sorter, and a run it
    /// spills to `claimed`. A pack that failed is remembered for `finish` to report.
    pub(super) fn take_finished(&mut self, h: Finishing) -> Result<()> {
        let (pack, rows) = match h.join() {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                self.failed.get_or_insert(e);
                return Ok(());
            }
            Err(_) => {
                self.failed.get_or_insert(StoreError::PipelineStopped);
                return Ok(());
            }
        };
        let spilled = self.rows.spilled().len();
        let added = self.rows.add_pack(&pack.name, &rows);
        self.done.push(pack);
        drop(rows);
        let passed = added.and_then(|()| self.pass_spilled(spilled));
        if passed.is_err() {
            // The pack's rows are not all in the sorter (or their ids not all answered
            // for): whatever the caller does with this error, the transaction must not
            // commit.
            self.failed.get_or_insert(StoreError::PipelineStopped);
        }
        passed
    }

    /// Adds the rows of a pack that is already in `packs/` (one `gc` keeps) to the layer
    /// the transaction will write.
    pub(crate) fn add_installed(&mut self, name: &str, rows: &[FooterRow]) -> Result<()> {
        let spilled = self.rows.spilled().len();
        self.rows.add_pack(name, rows)?;
        self.pass_spilled(spilled)
    }

    /// Hands the runs the sorter spilled after the first `from` to `claimed`.
    fn pass_spilled(&mut self, from: usize) -> Result<()> {
        let new = &self.rows.spilled()[from..];
        if new.is_empty() {
            return Ok(());
        }
        let mut claimed = self.claimed.lock().expect("claimed lock");
        new.iter().try_for_each(|run| claimed.absorb(run.clone()))
    }

    /// Closes the current pack and waits until every pack is durable (still in the
    /// temporary folder); returns them and the sorter holding their rows. On any failure
    /// every pack is discarded.
    fn finish(&mut self) -> Result<(Vec<FinishedPack>, RowSorter)> {
        let closed = self.close_current();
        let mut result = closed;
        for h in std::mem::take(&mut self.finishing) {
            let taken = self.take_finished(h);
            result = result.and(taken);
        }
        if let Some(e) = self.failed.take() {
            result = result.and(Err(e));
        }
        if let Err(e) = result {
            self.discard();
            return Err(e);
        }
        let rows = std::mem::replace(&mut self.rows, RowSorter::new(&self.tmp_dir, &self.prefix));
        Ok((std::mem::take(&mut self.done), rows))
    }

    /// Stops writing: removes the temporary files of every pack, finished or not.
    fn discard(&mut self) {
        if let Some(p) = self.current.take() {
            p.abandon();
        }
        for h in self.finishing.drain(..) {
            if let Ok(Ok((p, _))) = h.join() {
                p.discard();
            }
        }
        self.done.drain(..).for_each(FinishedPack::discard);
    }
}

/// The ids a transaction has written or is writing, so that it writes none twice. The
/// recent ones are held in memory; those of finished packs move, a sorted run of 512 Ki
/// rows at a time, to the runs spilled for the transaction's index layer, which answer
/// from a Bloom filter and one read. A transaction writing ten million chunks so holds
/// about 2 bytes for each and a run's worth of ids, not 50 bytes for each.
#[derive(Default)]
pub(crate) struct Claimed {
    pub(super) recent: IdSet,
    runs: Vec<Arc<SpillRun>>,
}

impl Claimed {
    /// Whether `id` was claimed.
    pub(crate) fn contains(&self, id: &Id) -> Result<bool> {
        if self.recent.contains(id) {
            return Ok(true);
        }
        for run in &self.runs {
            if run.contains(id)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// How many runs it holds: what [`Claimed::insert`] need not look in again.
    pub(crate) fn runs_seen(&self) -> usize {
        self.runs.len()
    }

    /// Claims `id`, which was not in the first `seen` runs: true if it was not claimed
    /// before.
    pub(crate) fn insert(&mut self, id: Id, seen: usize) -> Result<bool> {
        for run in &self.runs[seen..] {
            if run.contains(&id)? {
                return Ok(false);
            }
        }
        Ok(self.recent.insert(id))
    }

    /// Claims ids written without asking (copied whole from another pack).
    pub(crate) fn extend(&mut self, ids: impl IntoIterator<Item = Id>) {
        self.recent.extend(ids);
    }

    /// Takes in a run of rows spilled from finished packs: its ids are answered from it
    /// and need not be held in memory any more.
    fn absorb(&mut self, run: Arc<SpillRun>) -> Result<()> {
        self.runs.push(run.clone());
        run.for_each_id(|id| {
            self.recent.remove(id);
        })
    }
}

/// A committed transaction: everything it wrote is durable and indexed. It keeps the
/// repository lock (shared) until it is dropped, so that `gc` cannot remove what it wrote
/// before the caller has published the operation that refers to it.
#[must_use = "dropping it releases the repository lock; publish what refers to its objects first"]
pub struct Committed {
    /// The index layer written, or `None` if nothing was written.
    pub layer: Option<String>,
    _lock: Option<File>,
}

/// A write transaction: new chunks and objects go to new packs, which become visible (with
/// their index layer) only at [`Transaction::commit`]. Nothing refers to them before that,
/// so a transaction that is dropped or killed leaves only temporary data behind.
pub struct Transaction<'s> {
    store: &'s Store,
    lock: Option<File>,
    pub(crate) sink: PackSink,
    /// Ids already present or being written in this transaction.
    pub(crate) claimed: Arc<Mutex<Claimed>>,
    pending: IdMap<(Kind, Vec<u8>)>,
    /// The blocks being filled by [`Transaction::write_grouped`], one per kind.
    blocks: Vec<(Kind, BlockBuilder)>,
    compressor: zstd::bulk::Compressor<'static>,
    /// The zstd level of the entries this transaction writes itself.
    level: i32,
}

/// How [`Transaction::write_delta`] stored an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// It was already stored (or written by this transaction): nothing was written, and
    /// how the existing entry is stored is not known.
    Existing,
    /// Whole (compressed or raw): it can be the base of a delta.
    Whole,
    /// As a delta against the base given.
    Delta,
}

impl<'s> Transaction<'s> {
    /// The store this transaction writes to.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// Compresses the entries this transaction writes itself (not [`Transaction::store_files`],
    /// which uses the repository's level) at zstd `level` (1–22) from now on: a bulk
    /// import of history, written once and read often, is worth a slower level.
    pub fn set_zstd_level(&mut self, level: i32) -> Result<()> {
        self.compressor
            .set_compression_level(level)
            .map_err(|e| StoreError::BadConfig {
                path: self.store.dir.join(CONFIG_FILE),
                reason: format!("zstd level {level}: {e}"),
            })?;
        self.level = level;
        Ok(())
    }

    /// Whether `id` is stored or already written by this transaction.
    pub fn contains(&self, id: &Id) -> Result<bool> {
        if self.claimed.lock().expect("claimed lock").contains(id)? {
            return Ok(true);
        }
        self.store.contains(id)
    }

    /// Claims `id` for writing: true if the caller must write it (it is neither stored nor
    /// claimed by another writer of this transaction).
    pub(crate) fn claim(&self, id: &Id) -> Result<bool> {
        crate::pipeline::Claims {
            store: self.store,
            claimed: &self.claimed,
        }
        .claim(id)
    }

    /// Stores an object whose id is the hash of its bytes (trees, commits, operations,
    /// views, and single-chunk files). Returns the id.
    pub fn write_object(&mut self, kind: Kind, raw: &[u8]) -> Result<Id> {
        let id = Id::hash(raw);
        self.write_entry(id, kind, raw)?;
        Ok(id)
    }

    /// Stores an entry under a given id (a manifest is stored under its file's id).
    pub fn write_entry(&mut self, id: Id, kind: Kind, raw: &[u8]) -> Result<()> {
        self.write_delta(id, kind, raw, None).map(|_| ())
    }

    /// Stores an entry under a given id, as a delta against `base` (its id and raw bytes)
    /// when that takes less than half the raw bytes' length. The caller vouches that the
    /// base is stored, or written by this transaction, and is a whole entry or a delta at
    /// most [`pack::MAX_DELTA_DEPTH`]` - 1` links from one (a reader refuses longer
    /// chains). Says how the entry was stored.
    pub fn write_delta(
        &mut self,
        id: Id,
        kind: Kind,
        raw: &[u8],
        base: Option<(&Id, &[u8])>,
    ) -> Result<Written> {
        if !self.claim(&id)? {
            return Ok(Written::Existing);
        }
        if raw.len() as u64 > pack::MAX_ENTRY_LEN {
            return Err(StoreError::TooLarge(raw.len() as u64));
        }
        let level = self.level;
        let delta = base
            .filter(|(b, _)| **b != id && raw.len() >= 64)
            .and_then(|(b, base_raw)| pack::compress_delta(level, raw, b, base_raw, raw.len() / 2));
        let (codec, stored, written) = match delta {
            Some(d) => (pack::Codec::Delta, d.into(), Written::Delta),
            None => {
                let (codec, stored) = pack::compress(&mut self.compressor, raw);
                (codec, stored, Written::Whole)
            }
        };
        let header = EntryHeader {
            id,
            kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: stored.len() as u32,
        };
        self.sink.put(&header, &stored)?;
        if kind != Kind::Chunk {
            self.pending.insert(id, (kind, raw.to_vec()));
        }
        Ok(written)
    }

    /// Stores an entry as it arrived compressed: `frame` is a zstd frame of `raw`, or
    /// `None` for an entry compression did not shrink (stored as it is). The caller has
    /// checked that `raw` is what `id` names ([`pack::verify_content`]) and that `frame`
    /// decompresses to it. Saves compressing again what a fetch brought compressed.
    pub fn write_as(
        &mut self,
        id: Id,
        kind: Kind,
        raw: &[u8],
        frame: Option<&[u8]>,
    ) -> Result<Written> {
        if !self.claim(&id)? {
            return Ok(Written::Existing);
        }
        if raw.len() as u64 > pack::MAX_ENTRY_LEN {
            return Err(StoreError::TooLarge(raw.len() as u64));
        }
        let (codec, stored) = match frame {
            Some(f) => (pack::Codec::Zstd, f),
            None => (pack::Codec::Raw, raw),
        };
        let header = EntryHeader {
            id,
            kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: stored.len() as u32,
        };
        self.sink.put(&header, stored)?;
        if kind != Kind::Chunk {
            self.pending.insert(id, (kind, raw.to_vec()));
        }
        Ok(Written::Whole)
    }

    /// Stores an object whose id is the hash of its bytes in a block (`docs/FORMAT.md`
    /// 5.8) with the other objects of its kind this transaction writes this way, in the
    /// order they come, so that zstd compresses what they share (the versions of a
    /// directory, the commits of one history). Objects larger than
    /// [`crate::block::BLOCK_MEMBER_MAX`] are stored as entries of their own. Returns the
    /// id and whether anything was written ([`Written::Whole`]: a block member can be a
    /// delta's base). Panics for a manifest or a block, which a block cannot hold (a
    /// manifest is named by its file's hash, not its own).
    pub fn write_grouped(&mut self, kind: Kind, raw: &[u8]) -> Result<(Id, Written)> {
        assert!(
            crate::block::can_hold(kind),
            "a {} is not named by the hash of its bytes",
            kind.name()
        );
        let id = Id::hash(raw);
        if raw.len() > crate::block::BLOCK_MEMBER_MAX {
            return Ok((id, self.write_delta(id, kind, raw, None)?));
        }
        if !self.claim(&id)? {
            return Ok((id, Written::Existing));
        }
        self.group(kind, id, raw)?;
        if kind != Kind::Chunk {
            self.pending.insert(id, (kind, raw.to_vec()));
        }
        Ok((id, Written::Whole))
    }

    /// Adds `raw` (whose id is `id`, a kind a block holds) to the block of its kind,
    /// without checking whether it is stored already (`gc` moves live members out of
    /// blocks with dead ones).
    pub(crate) fn group(&mut self, kind: Kind, id: Id, raw: &[u8]) -> Result<()> {
        let slot = match self.blocks.iter().position(|(k, _)| *k == kind) {
            Some(i) => i,
            None => {
                self.blocks.push((kind, BlockBuilder::default()));
                self.blocks.len() - 1
            }
        };
        self.blocks[slot].1.push(kind, id, raw);
        if self.blocks[slot].1.len() >= crate::block::target(kind) {
            self.close_block(slot)?;
        }
        Ok(())
    }

    /// Compresses the block in `slot` and appends it to the pack.
    fn close_block(&mut self, slot: usize) -> Result<()> {
        let (raw, members) = self.blocks[slot].1.take();
        if members.is_empty() {
            return Ok(());
        }
        let (header, stored) =
            encode_entry(&mut self.compressor, Id::hash(&raw), Kind::Block, &raw);
        self.sink.put_block(&header, &stored, &members)
    }

    /// Reads an object written by this transaction or already stored.
    pub fn read_object(&self, id: &Id, kind: Kind) -> Result<Vec<u8>> {
        if let Some((k, raw)) = self.pending.get(id) {
            if *k != kind {
                return Err(StoreError::WrongKind {
                    id: *id,
                    found: k.name(),
                    expected: kind.name(),
                });
            }
            return Ok(raw.clone());
        }
        self.store.read_object(id, kind)
    }

    /// Commits this transaction and returns a new one, holding the repository lock
    /// throughout, so what was written stays safe from `gc` until the caller publishes
    /// something that refers to it.
    pub fn checkpoint(self) -> Result<Transaction<'s>> {
        let next = self.store.transaction()?;
        drop(self.commit()?);
        Ok(next)
    }

    /// Makes everything written durable and visible: packs are fsync'd, moved into
    /// `packs/`, then one index layer covering them is written and fsync'd. The returned
    /// [`Committed`] keeps the repository lock: the caller publishes what refers to the
    /// new objects (the operation) and only then drops it.
    pub fn commit(mut self) -> Result<Committed> {
        let (finished, rows) = self.sink_finish()?;
        let lock = self.lock.take();
        if finished.is_empty() {
            return Ok(Committed {
                layer: None,
                _lock: lock,
            });
        }
        let install = self.store.install_lock(false)?;
        self.store.install_packs(finished)?;
        let name = rows.write(&self.store.dir.join(INDEX_DIR))?;
        drop(install);
        self.store.reload_index()?;
        Ok(Committed {
            layer: Some(name),
            _lock: lock,
        })
    }

    /// Closes every pack written and makes it durable, without installing it; returns the
    /// packs and the sorter of their rows.
    pub(crate) fn sink_finish(&mut self) -> Result<(Vec<FinishedPack>, RowSorter)> {
        for slot in 0..self.blocks.len() {
            self.close_block(slot)?;
        }
        self.sink.finish()
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        // An uncommitted transaction's packs never left the temporary folder, so no other
        // writer can have taken their chunks as stored: they are simply removed.
        self.sink.discard();
    }
}

/// Builds the stored form of a raw entry with `compressor`.
pub fn encode_entry(
    compressor: &mut zstd::bulk::Compressor<'static>,
    id: Id,
    kind: Kind,
    raw: &[u8],
) -> (EntryHeader, Vec<u8>) {
    let (codec, stored) = pack::compress(compressor, raw);
    let stored = stored.into_owned();
    (
        EntryHeader {
            id,
            kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: stored.len() as u32,
        },
        stored,
    )
}
