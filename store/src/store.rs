//! The store: a repository's packs and index, read and written through transactions.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use crate::block::{Block, BlockBuilder};
use crate::config::StoreConfig;
use crate::error::{IoContext, Result, StoreError};
use crate::id::{Id, IdMap, IdSet};
use crate::index::{merged_rows, write_layer, Layer, Location, RowSorter, SpillRun};
use crate::manifest::{ChunkRef, Manifest};
use crate::pack::{self, EntryHeader, FinishedPack, FooterRow, Kind, PackWriter};

/// Directory names inside the repository directory.
pub const PACKS_DIR: &str = "packs";
/// Index layers.
pub const INDEX_DIR: &str = "index";
/// Temporary files of running (or killed) writers.
pub const TMP_DIR: &str = "tmp";
/// The repository lock: shared by writers, exclusive for `gc`.
pub const LOCK_FILE: &str = "lock";
/// Held exclusively (`flock`) by the one process running index maintenance.
pub const MAINTAIN_LOCK_FILE: &str = "maintain.lock";
/// Held shared (`flock`) while a transaction installs its packs and writes their layer, and
/// exclusively while consolidation deletes the packs it copied: a pack's name is a hash of
/// what it holds, so two writers can install the same name, and one installing it again
/// between the deletion of the pack and of its layer would leave a layer naming no pack.
pub const INSTALL_LOCK_FILE: &str = "install.lock";
/// The config file.
pub const CONFIG_FILE: &str = "config";

/// At most this many index layers before they are merged.
const MAX_LAYERS: usize = 8;
/// Consolidate once the layers that cover only small packs cover this many packs.
const SMALL_PACKS_TRIGGER: usize = 16;

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

struct IndexState {
    layers: Vec<Layer>,
    /// Packs not covered by any loaded layer, indexed from their footers.
    loose: HashMap<Id, Location>,
    /// Layers found damaged by a late checksum check: skipped from now on, their packs
    /// read from their footers.
    distrusted: HashSet<String>,
    warnings: Vec<String>,
}

/// An open store (the `.lifeos` directory of a repository).
pub struct Store {
    dir: PathBuf,
    config: StoreConfig,
    index: RwLock<IndexState>,
    open_packs: Mutex<HashMap<Arc<str>, Arc<File>>>,
    session: Mutex<Option<Session>>,
    bases: Mutex<Cache<Id, Vec<u8>>>,
    /// Decoded blocks by where they are: a pack's name names its bytes, which never
    /// change, so a member found in the cache needs no read of the pack at all.
    blocks: Mutex<Cache<(Arc<str>, u32), Block>>,
    /// Where objects this store lacks are fetched from (a lazy clone's remote).
    source: std::sync::OnceLock<Box<dyn ObjectSource>>,
    /// The last number given to a temporary pack: shared by this process's transactions,
    /// so two of them open at once (one storing what a lazy clone fetched while the other
    /// writes) never name a pack alike.
    pack_seq: Arc<std::sync::atomic::AtomicU64>,
}

/// How an entry is kept in its pack (see [`Store::read_entry_stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredAs {
    /// Uncompressed: zstd did not shrink it.
    Raw,
    /// This zstd frame of its raw bytes.
    Zstd(Vec<u8>),
    /// A delta, or a member of a block.
    Other,
}

/// Where a store finds the objects it does not hold yet: the remote a lazy clone was
/// made from. What it hands over is checked and stored before it is used.
pub trait ObjectSource: Send + Sync {
    /// Fetches those of `ids` the source has, together (a file's chunks in a few
    /// requests, not one each), and hands each to `found` as it arrives, checked against
    /// its id (it is stored as it is, as [`Transaction::write_as`] requires); those it
    /// lacks are left out. The first error from `found` stops the fetch and is returned.
    fn fetch(&self, ids: &[Id], found: &mut dyn FnMut(Fetched<'_>) -> Result<()>) -> Result<()>;
}

/// One object an [`ObjectSource`] fetched.
#[derive(Debug, Clone, Copy)]
pub struct Fetched<'a> {
    /// Its id.
    pub id: &'a Id,
    /// Its kind.
    pub kind: Kind,
    /// Its bytes.
    pub raw: &'a [u8],
    /// The zstd frame the source held and decompressed to `raw`, stored as it is
    /// instead of compressing `raw` again; `None` if the source held it uncompressed.
    pub frame: Option<&'a [u8]>,
}

/// Recently read, verified entries kept whole under a key whose bytes never change: the
/// raw bytes of delta bases by id, so reading the versions of one object decompresses each
/// link of their chain once, and decoded blocks by location, so reading their members
/// decompresses each once.
struct Cache<K, T> {
    items: HashMap<K, Arc<T>>,
    order: std::collections::VecDeque<K>,
    bytes: usize,
    budget: usize,
}

/// Something a [`Cache`] weighs by its bytes in memory.
trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for Vec<u8> {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weigh for Block {
    fn weight(&self) -> usize {
        self.raw_len()
    }
}

/// How many bytes of delta bases a store keeps at hand.
const BASE_CACHE_BYTES: usize = 32 << 20;
/// How many bytes of decoded blocks a store keeps at hand.
const BLOCK_CACHE_BYTES: usize = 32 << 20;

impl<K: std::hash::Hash + Eq + Clone, T: Weigh> Cache<K, T> {
    fn new(budget: usize) -> Self {
        Cache {
            items: HashMap::new(),
            order: std::collections::VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    fn get(&self, key: &K) -> Option<Arc<T>> {
        self.items.get(key).cloned()
    }

    fn insert(&mut self, key: K, item: Arc<T>) {
        let weight = item.weight();
        if weight > self.budget / 4 || self.items.contains_key(&key) {
            return;
        }
        self.bytes += weight;
        self.items.insert(key.clone(), item);
        self.order.push_back(key);
        while self.bytes > self.budget {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(r) = self.items.remove(&old) {
                self.bytes -= r.weight();
            }
        }
    }
}

/// A writer's claim on its temporary files: a lock file held for the store's lifetime.
struct Session {
    prefix: String,
    _lock: File,
}

/// Counts describing the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Pack files.
    pub packs: u64,
    /// Bytes in pack files.
    pub pack_bytes: u64,
    /// Index layers.
    pub index_layers: u64,
    /// Bytes in index layers.
    pub index_bytes: u64,
    /// Distinct chunks.
    pub chunks: u64,
    /// Distinct other objects (manifests, trees, commits, operations, views).
    pub objects: u64,
}

impl Store {
    /// Creates a store in `dir` (which must not hold one).
    pub fn init(dir: &Path, config: StoreConfig) -> Result<Store> {
        config.validate().map_err(|reason| StoreError::BadConfig {
            path: dir.join(CONFIG_FILE),
            reason,
        })?;
        if dir.join(CONFIG_FILE).exists() {
            return Err(StoreError::AlreadyExists(dir.into()));
        }
        for sub in [PACKS_DIR, INDEX_DIR, TMP_DIR] {
            std::fs::create_dir_all(dir.join(sub)).io("creating", dir.join(sub))?;
        }
        File::create(dir.join(LOCK_FILE)).io("creating", dir.join(LOCK_FILE))?;
        write_atomic(&dir.join(CONFIG_FILE), config.to_toml().as_bytes())?;
        Self::open(dir)
    }

    /// Opens the store in `dir`.
    pub fn open(dir: &Path) -> Result<Store> {
        let cfg_path = dir.join(CONFIG_FILE);
        if !cfg_path.is_file() {
            return Err(StoreError::NotARepository(dir.into()));
        }
        let config = StoreConfig::load(&cfg_path)?;
        let store = Store {
            dir: dir.into(),
            config,
            index: RwLock::new(IndexState {
                layers: Vec::new(),
                loose: HashMap::new(),
                distrusted: HashSet::new(),
                warnings: Vec::new(),
            }),
            open_packs: Mutex::new(HashMap::new()),
            bases: Mutex::new(Cache::new(BASE_CACHE_BYTES)),
            blocks: Mutex::new(Cache::new(BLOCK_CACHE_BYTES)),
            session: Mutex::new(None),
            source: std::sync::OnceLock::new(),
            pack_seq: Arc::default(),
        };
        store.reload_index()?;
        Ok(store)
    }

    /// Makes `source` the place objects missing here are fetched from (once per store;
    /// a second call is ignored). A fetched object is stored, then read as any other.
    pub fn set_source(&self, source: Box<dyn ObjectSource>) {
        let _ = self.source.set(source);
    }

    /// Whether objects missing here are fetched from a source.
    pub fn has_source(&self) -> bool {
        self.source.get().is_some()
    }

    /// Fetches `ids` (distinct) from the source, if there is one, and stores them in one
    /// transaction. Whether every one of them was. Once `stop` answers true (it is asked
    /// before each object is stored), the fetch ends with [`StoreError::Stopped`] and
    /// keeps nothing.
    fn fetch_missing(&self, ids: &[Id], stop: &dyn Fn() -> bool) -> Result<bool> {
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

    /// The repository directory (`.lifeos`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store config.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Problems found while loading the index that did not stop the store from opening
    /// (a damaged layer whose packs were indexed from their footers instead).
    pub fn warnings(&self) -> Vec<String> {
        self.index.read().expect("index lock").warnings.clone()
    }

    /// Re-reads the index directory: picks up layers written by other processes and drops
    /// those they removed.
    pub fn reload_index(&self) -> Result<()> {
        let index_dir = self.dir.join(INDEX_DIR);
        let mut names: Vec<PathBuf> = list_dir(&index_dir)?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        names.sort();
        let mut state = self.index.write().expect("index lock");
        let mut old: HashMap<String, Layer> = state
            .layers
            .drain(..)
            .map(|l| (l.name.clone(), l))
            .collect();
        let distrusted = std::mem::take(&mut state.distrusted);
        let mut warnings: Vec<String> = state
            .warnings
            .iter()
            .filter(|w| distrusted.iter().any(|d| w.contains(d.as_str())))
            .cloned()
            .collect();
        let mut layers = Vec::new();
        for path in names {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if distrusted.contains(&name) {
                continue;
            }
            if let Some(l) = old.remove(&name) {
                layers.push(l);
                continue;
            }
            match Layer::open(&path) {
                Ok(l) => layers.push(l),
                Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => warnings.push(format!("{e}; its packs are read from their footers (run `lifeos gc` to rebuild the index)")),
            }
        }
        let covered: HashSet<&str> = layers
            .iter()
            .flat_map(|l| l.packs.iter().map(|p| &**p))
            .collect();
        let mut loose = HashMap::new();
        for pack_path in list_dir(&self.dir.join(PACKS_DIR))? {
            let Some(name) = pack_name(&pack_path) else {
                continue;
            };
            if covered.contains(name.as_str()) {
                continue;
            }
            let file = match File::open(&pack_path) {
                Ok(f) => f,
                Err(_) => continue,
            };
            match pack::read_rows(&file, &pack_path) {
                Ok((rows, damaged)) => {
                    warnings.extend(
                        damaged
                            .iter()
                            .map(|e| format!("{e}; its members are not found (run `lifeos fsck`)")),
                    );
                    let name: Arc<str> = name.into();
                    for r in rows {
                        loose.insert(
                            r.id,
                            Location {
                                pack: name.clone(),
                                offset: r.offset,
                                kind: r.kind,
                            },
                        );
                    }
                }
                Err(e) => warnings.push(e.to_string()),
            }
        }
        *state = IndexState {
            layers,
            loose,
            distrusted,
            warnings,
        };
        Ok(())
    }

    /// Verifies every layer not verified yet (large layers are only checked on demand) and
    /// stops using those whose checksum fails: their packs are indexed from the packs' own
    /// footers instead. Returns whether any layer was found damaged.
    fn distrust_damaged_layers(&self) -> Result<bool> {
        let damaged: Vec<(String, String)> = {
            let state = self.index.read().expect("index lock");
            state
                .layers
                .iter()
                .filter_map(|l| match l.ensure_verified() {
                    Err(e @ StoreError::DamagedFile { .. }) => {
                        Some((l.name.clone(), e.to_string()))
                    }
                    // Layers are removed before their packs (6.8, 8.5), so a layer still
                    // present that lists a missing pack is wrong, not stale: its rows may
                    // name that pack for ids another of its packs holds.
                    Ok(()) => l
                        .packs
                        .iter()
                        .find(|p| !self.pack_path(p).exists())
                        .map(|p| {
                            (
                                l.name.clone(),
                                format!("it lists pack {p}, which does not exist"),
                            )
                        }),
                    // Gone (merged by another process) or unreadable: a reload tells.
                    _ => None,
                })
                .collect()
        };
        if damaged.is_empty() {
            return Ok(false);
        }
        {
            let mut state = self.index.write().expect("index lock");
            for (name, reason) in damaged {
                state.warnings.push(format!(
                    "index layer {name}: {reason}; its packs are read from their footers (run `lifeos gc` to rebuild the index)"
                ));
                state.distrusted.insert(name);
            }
        }
        self.open_packs.lock().expect("pack cache lock").clear();
        self.reload_index()?;
        Ok(true)
    }

    /// Where `id` is stored, if anywhere (without reloading the index). A layer whose row
    /// for it is damaged is checked and, if damaged, replaced by its packs' footers.
    pub fn locate(&self, id: &Id) -> Result<Option<Location>> {
        match self.locate_once(id) {
            Err(StoreError::DamagedFile { .. }) if self.distrust_damaged_layers()? => {
                self.locate_once(id)
            }
            other => other,
        }
    }

    fn locate_once(&self, id: &Id) -> Result<Option<Location>> {
        let state = self.index.read().expect("index lock");
        if let Some(l) = state.loose.get(id) {
            return Ok(Some(l.clone()));
        }
        for layer in state.layers.iter().rev() {
            if let Some(l) = layer.lookup(id)? {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// Every location the index knows for `id` (several after a consolidation that
    /// another process has not finished cleaning up).
    pub(crate) fn locate_all(&self, id: &Id) -> Result<Vec<Location>> {
        match self.locate_all_once(id) {
            Err(StoreError::DamagedFile { .. }) if self.distrust_damaged_layers()? => {
                self.locate_all_once(id)
            }
            other => other,
        }
    }

    fn locate_all_once(&self, id: &Id) -> Result<Vec<Location>> {
        let state = self.index.read().expect("index lock");
        let mut out: Vec<Location> = state.loose.get(id).cloned().into_iter().collect();
        for layer in state.layers.iter().rev() {
            if let Some(l) = layer.lookup(id)? {
                if !out.contains(&l) {
                    out.push(l);
                }
            }
        }
        Ok(out)
    }

    /// Runs `at` on each location of `id` until one succeeds. `None` if the index knows
    /// no location; otherwise the first failure if none succeeded.
    fn try_locations<T>(&self, id: &Id, at: impl Fn(&Location) -> Result<T>) -> Result<Option<T>> {
        // The first location is all a healthy index needs; the others are looked up
        // (every layer searched) only when it fails.
        match self.locate_once(id) {
            Ok(Some(loc)) => match at(&loc) {
                Ok(found) => return Ok(Some(found)),
                Err(StoreError::PackMissing { .. } | StoreError::Corrupt { .. }) => {}
                Err(e) => return Err(e),
            },
            Ok(None) => return Ok(None),
            Err(_) => {}
        }
        let mut first_err = None;
        for loc in self.locate_all(id)? {
            match at(&loc) {
                Ok(found) => return Ok(Some(found)),
                Err(e @ (StoreError::PackMissing { .. } | StoreError::Corrupt { .. })) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// Finds `id` with `find` (which looks it up through the index), recovering from a
    /// stale or damaged index: if it is not found, or its pack is gone or does not hold
    /// it where the index says, the index is reloaded (another process may have
    /// consolidated packs or collected garbage) and, failing that, checked against its
    /// checksums; a damaged layer is replaced by the packs' own footers. Only then is the
    /// object reported missing or corrupt.
    fn with_index_recovery<T>(&self, id: &Id, find: impl Fn() -> Result<Option<T>>) -> Result<T> {
        let attempt = || find()?.ok_or(StoreError::Missing(*id));
        let index_may_be_wrong = |e: &StoreError| {
            matches!(
                e,
                StoreError::Missing(_)
                    | StoreError::PackMissing { .. }
                    | StoreError::Corrupt { .. }
            )
        };
        match attempt() {
            Err(e) if index_may_be_wrong(&e) => {}
            done => return done,
        }
        self.open_packs.lock().expect("pack cache lock").clear();
        self.reload_index()?;
        let found = match attempt() {
            Err(e) if index_may_be_wrong(&e) && self.distrust_damaged_layers()? => {
                match (attempt(), e) {
                    // Not in the distrusted layers' other packs either: the pack the
                    // index named is what is missing, and the error should say so.
                    (Err(StoreError::Missing(_)), e @ StoreError::PackMissing { .. }) => Err(e),
                    (done, _) => done,
                }
            }
            done => done,
        };
        match found {
            Err(StoreError::Missing(_)) if self.fetch_missing(&[*id], &|| false)? => attempt(),
            done => done,
        }
    }

    /// Whether `id` is stored.    /// Whether `id` is stored.
    pub fn contains(&self, id: &Id) -> Result<bool> {
        Ok(self.locate(id)?.is_some())
    }

    fn pack_path(&self, name: &str) -> PathBuf {
        self.dir.join(PACKS_DIR).join(format!("{name}.pack"))
    }

    fn pack_file(&self, name: &Arc<str>, id: &Id) -> Result<Arc<File>> {
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
    fn read_at(&self, id: &Id, loc: &Location, depth: u8) -> Result<(Kind, Vec<u8>)> {
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
    fn cached_block(&self, loc: &Location) -> Option<Arc<Block>> {
        self.blocks
            .lock()
            .expect("block cache lock")
            .get(&(loc.pack.clone(), loc.offset))
    }

    /// The decoded block whose header is `header` at `loc`, read for member `id`.
    fn block_at(
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
    fn manifest_at(&self, id: &Id, loc: &Location) -> Result<Manifest> {
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

    /// Opens the repository lock file (not yet locked).
    fn open_lock(&self) -> Result<(File, PathBuf)> {
        let path = self.dir.join(LOCK_FILE);
        Ok((open_lock_file(&path)?, path))
    }

    /// Takes the install lock ([`INSTALL_LOCK_FILE`]), shared or exclusive, waiting for it.
    fn install_lock(&self, exclusive: bool) -> Result<File> {
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

    fn new_transaction(&self, lock: Option<File>) -> Result<Transaction<'_>> {
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

    fn session_prefix(&self) -> Result<String> {
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

    /// Removes temporary files left by writers that died (their session lock is free).
    /// Returns how many files were removed.
    pub fn clean_tmp(&self) -> Result<u64> {
        let tmp = self.dir.join(TMP_DIR);
        let mine = self
            .session
            .lock()
            .expect("session lock")
            .as_ref()
            .map(|s| s.prefix.clone());
        let mut removed = 0;
        let entries = list_dir(&tmp)?;
        let mut dead = HashSet::new();
        let mut live = HashSet::new();
        for p in &entries {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            // A session's lock file: if its lock can be taken, the process that held it
            // is gone. A `.locking` file is a session being registered; it is locked a
            // moment after it is created, so only an old one can be judged dead.
            let prefix = match (name.strip_suffix(".lock"), name.strip_suffix(".locking")) {
                (Some(prefix), _) => prefix,
                (None, Some(prefix)) if age_secs(p).is_some_and(|a| a >= 10) => prefix,
                _ => continue,
            };
            if Some(prefix) == mine.as_deref() {
                live.insert(prefix.to_string());
                continue;
            }
            match File::options().write(true).open(p) {
                Ok(f) => match f.try_lock() {
                    Ok(()) => {
                        dead.insert(prefix.to_string());
                    }
                    Err(_) => {
                        live.insert(prefix.to_string());
                    }
                },
                Err(_) => continue,
            }
        }
        for p in &entries {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let owner = name.split(['-', '.']).next().unwrap_or_default();
            if live.contains(owner)
                || (dead.contains(owner) && (name.ends_with(".lock") || name.ends_with(".locking")))
            {
                continue;
            }
            // Files of a dead session are orphans. Files of no known session are left
            // for a minute: their writer may be registering its session right now.
            if !dead.contains(owner) && age_secs(p).is_none_or(|a| a < 60) {
                continue;
            }
            if std::fs::remove_file(p).is_ok() {
                removed += 1;
            }
        }
        for prefix in dead {
            let _ = std::fs::remove_file(tmp.join(format!("{prefix}.lock")));
            let _ = std::fs::remove_file(tmp.join(format!("{prefix}.locking")));
        }
        Ok(removed)
    }

    /// Counts packs, layers, chunks and objects from the index.
    pub fn stats(&self) -> Result<StoreStats> {
        let mut st = StoreStats::default();
        for p in list_dir(&self.dir.join(PACKS_DIR))? {
            if pack_name(&p).is_some() {
                st.packs += 1;
                st.pack_bytes += p.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
        let state = self.index.read().expect("index lock");
        for l in &state.layers {
            st.index_layers += 1;
            st.index_bytes += l.path.metadata().map(|m| m.len()).unwrap_or(0);
        }
        let layers: Vec<&Layer> = state.layers.iter().collect();
        let mut last = None;
        let mut count = |id: Id, kind: Kind| {
            if last == Some(id) {
                return;
            }
            last = Some(id);
            match kind {
                Kind::Chunk => st.chunks += 1,
                // A block is a container; its members are counted.
                Kind::Block => {}
                _ => st.objects += 1,
            }
        };
        let mut loose: Vec<_> = state.loose.iter().map(|(id, l)| (*id, l.kind)).collect();
        loose.sort();
        let mut rows = merged_rows(&layers)?.peekable();
        let mut li = loose.into_iter().peekable();
        loop {
            let take_row = match (rows.peek(), li.peek()) {
                (None, None) => break,
                (Some(Ok((a, _))), Some((b, _))) => a <= b,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(Err(_)), _) => true,
            };
            if take_row {
                let (id, loc) = rows.next().expect("peeked")?;
                count(id, loc.kind);
            } else {
                let (id, kind) = li.next().expect("peeked");
                count(id, kind);
            }
        }
        Ok(st)
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

    /// The names of all pack files present.
    pub fn pack_names(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = list_dir(&self.dir.join(PACKS_DIR))?
            .iter()
            .filter_map(|p| pack_name(p))
            .collect();
        v.sort();
        Ok(v)
    }

    /// The path of pack `name`.
    pub fn pack_file_path(&self, name: &str) -> PathBuf {
        self.pack_path(name)
    }

    /// Runs index maintenance: consolidates small packs written by many small transactions
    /// and merges index layers so lookups touch few files. Safe to run concurrently with
    /// readers and writers; data is copied before anything is removed.
    pub fn maintain(&self) -> Result<()> {
        // Maintenance writes and removes files: keep `gc` out for its whole duration.
        let (lock, lock_path) = self.open_lock()?;
        lock.lock_shared().io("locking", &lock_path)?;
        // One maintainer at a time: two would each merge layers the other is deleting
        // (keeping one location per id, possibly in a pack the other just removed). A
        // busy maintainer means the work is being done; this one leaves it.
        let maintain_path = self.dir.join(MAINTAIN_LOCK_FILE);
        let maintain = open_lock_file(&maintain_path)?;
        match maintain.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(()),
            Err(std::fs::TryLockError::Error(e)) => return Err(e).io("locking", &maintain_path),
        }
        // Decide from what is on disk now, not from what this process loaded earlier:
        // a maintainer that finished a moment ago has removed layers and packs.
        self.reload_index()?;
        self.consolidate_small_packs()?;
        self.merge_layers()?;
        drop(maintain);
        drop(lock);
        Ok(())
    }

    fn consolidate_small_packs(&self) -> Result<()> {
        let small_limit = self.config.packs.target_size / 8;
        let candidates: Vec<(String, Vec<Arc<str>>)> = {
            let state = self.index.read().expect("index lock");
            state
                .layers
                .iter()
                .filter(|l| {
                    l.packs.iter().all(|p| {
                        self.pack_path(p)
                            .metadata()
                            .map(|m| m.len() < small_limit)
                            .unwrap_or(false)
                    })
                })
                .map(|l| (l.name.clone(), l.packs.clone()))
                .collect()
        };
        // Counted in packs, not layers: merging (which runs after this) folds small layers
        // together, and a count of layers would then never be reached while the packs,
        // one per operation, pile up.
        let small_packs: HashSet<&Arc<str>> = candidates.iter().flat_map(|(_, p)| p).collect();
        if small_packs.len() < SMALL_PACKS_TRIGGER {
            return Ok(());
        }
        let mut tx = self.transaction()?;
        let mut seen = HashSet::new();
        for (_, packs) in &candidates {
            for p in packs {
                if !seen.insert(p.clone()) {
                    continue;
                }
                let path = self.pack_path(p);
                let file = File::open(&path).io("opening", &path)?;
                for row in pack::read_footer(&file, &path)? {
                    let ids = tx.sink.copy(&file, &path, row.offset)?;
                    tx.claimed.lock().expect("claimed lock").extend(ids);
                }
            }
        }
        let new_layer = tx.commit()?.layer;
        if new_layer.is_some() {
            // While the copied packs are deleted no writer installs a pack and its layer.
            // One may have done so since the candidates were chosen, installing again a
            // pack of the same name (same contents) under a layer of its own: that pack
            // stays, since a layer names it.
            let _install = self.install_lock(true)?;
            self.reload_index()?;
            let chosen: HashSet<&str> = candidates.iter().map(|(n, _)| n.as_str()).collect();
            let named_elsewhere: HashSet<Arc<str>> = {
                let state = self.index.read().expect("index lock");
                state
                    .layers
                    .iter()
                    .filter(|l| !chosen.contains(l.name.as_str()))
                    .flat_map(|l| l.packs.iter().cloned())
                    .collect()
            };
            for name in &chosen {
                let _ = std::fs::remove_file(self.dir.join(INDEX_DIR).join(format!("{name}.idx")));
            }
            sync_dir(&self.dir.join(INDEX_DIR))?;
            for p in seen.difference(&named_elsewhere) {
                let _ = std::fs::remove_file(self.pack_path(p));
            }
            sync_dir(&self.dir.join(PACKS_DIR))?;
            self.reload_index()?;
        }
        Ok(())
    }

    fn merge_layers(&self) -> Result<()> {
        let (name, removed) = {
            let state = self.index.read().expect("index lock");
            if state.layers.len() <= MAX_LAYERS {
                return Ok(());
            }
            let mut by_size: Vec<&Layer> = state.layers.iter().collect();
            by_size.sort_by_key(|l| l.count);
            let mut take = Vec::new();
            let mut acc = 0u64;
            for l in by_size {
                if take.len() >= 2 && l.count > 2 * acc {
                    break;
                }
                acc += l.count;
                take.push(l);
            }
            let mut packs: Vec<Arc<str>> =
                take.iter().flat_map(|l| l.packs.iter().cloned()).collect();
            packs.sort();
            packs.dedup();
            let name = write_layer(
                &self.dir.join(INDEX_DIR),
                &self.dir.join(TMP_DIR),
                &self.session_prefix()?,
                &packs,
                acc,
                merged_rows(&take)?,
            )?;
            (
                name,
                take.iter().map(|l| l.name.clone()).collect::<Vec<_>>(),
            )
        };
        for old in removed {
            if old != name {
                let _ = std::fs::remove_file(self.dir.join(INDEX_DIR).join(format!("{old}.idx")));
            }
        }
        sync_dir(&self.dir.join(INDEX_DIR))?;
        self.reload_index()
    }
}

/// The index says `id` is in the block at `loc`, whose header is `block`, and it is not.
fn not_in_block(id: &Id, loc: &Location, block: &EntryHeader) -> StoreError {
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

/// Seconds since `path` was last modified, if it can be told.
fn age_secs(path: &Path) -> Option<u64> {
    path.metadata()
        .and_then(|m| m.modified())
        .ok()?
        .elapsed()
        .ok()
        .map(|d| d.as_secs())
}

/// The pack name of a `packs/<name>.pack` path.
fn pack_name(p: &Path) -> Option<String> {
    let name = p.file_name()?.to_str()?.strip_suffix(".pack")?;
    (name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())).then(|| name.to_string())
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

/// Appends entries to packs, closing each at the target size. Closed packs are made
/// durable on background threads while writing goes on; they stay in the temporary folder,
/// invisible to everyone else, until the transaction commits.
pub struct PackSink {
    tmp_dir: PathBuf,
    prefix: String,
    target: u64,
    current: Option<PackWriter>,
    finishing: Vec<Finishing>,
    /// Packs finished, whose rows are in `rows`.
    done: Vec<FinishedPack>,
    /// The first failure of a pack finished in the background, reported by `finish`.
    failed: Option<StoreError>,
    /// The rows of the finished packs: the transaction's index layer once sorted. The runs
    /// it spills are handed to `claimed`, which then lets go of their ids.
    rows: RowSorter,
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
    fn take_finished(&mut self, h: Finishing) -> Result<()> {
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
    recent: IdSet,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Packs;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn small_packs() -> StoreConfig {
        StoreConfig {
            packs: Packs {
                target_size: 1 << 20,
                ..Packs::default()
            },
            ..StoreConfig::default()
        }
    }

    fn tmp_files(dir: &Path) -> Vec<String> {
        list_dir(&dir.join(TMP_DIR))
            .unwrap()
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(String::from))
            .filter(|n| !n.ends_with(".lock") && !n.ends_with(".locking"))
            .collect()
    }

    /// A transaction whose finished packs' rows have spilled out of memory still writes
    /// no id twice: the ids are answered from the spilled runs (or from memory, for the
    /// packs not yet finished), and the layer lists each once.
    #[test]
    fn a_transaction_writes_no_id_twice_once_its_ids_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), small_packs()).unwrap();
        // 1 KiB that zstd cannot shrink: about a thousand to a pack.
        let chunks: Vec<Vec<u8>> = (0..6000).map(|i| noise(1024, i)).collect();
        let mut tx = store.transaction().unwrap();
        tx.sink.rows.set_run_rows(200);
        for c in &chunks {
            assert_ne!(
                tx.write_delta(Id::hash(c), Kind::Chunk, c, None).unwrap(),
                Written::Existing
            );
        }
        // The packs closed so far are finished in the background; wait for them.
        for h in std::mem::take(&mut tx.sink.finishing) {
            tx.sink.take_finished(h).unwrap();
        }
        assert!(tx.sink.rows.spilled().len() >= 20, "the rows spilled");
        let recent = tx.claimed.lock().unwrap().recent.len();
        assert!(recent <= 1300, "{recent} ids still held in memory");
        for c in chunks.iter().rev() {
            assert!(tx.contains(&Id::hash(c)).unwrap());
            assert_eq!(
                tx.write_delta(Id::hash(c), Kind::Chunk, c, None).unwrap(),
                Written::Existing
            );
        }
        assert!(!tx.contains(&Id::hash(b"never written")).unwrap());
        drop(tx.commit().unwrap());
        let mut rows = 0;
        for name in store.pack_names().unwrap() {
            let path = store.pack_file_path(&name);
            rows += pack::read_footer(&File::open(&path).unwrap(), &path)
                .unwrap()
                .len();
        }
        assert_eq!(rows, chunks.len());
        assert_eq!(store.stats().unwrap().chunks, chunks.len() as u64);
        for c in &chunks {
            assert_eq!(&store.read_object(&Id::hash(c), Kind::Chunk).unwrap(), c);
        }
        assert_eq!(tmp_files(dir.path()), Vec::<String>::new());
    }

    /// What a remote brings compressed is stored as it came and read back as the same
    /// frame, and an object zstd cannot shrink is reported as kept raw.
    #[test]
    fn entries_are_read_and_written_with_their_stored_form() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let text = b"a line of a note, and the same line again. ".repeat(50);
        let random = noise(10_000, 9);
        let mut tx = store.transaction().unwrap();
        let text_id = tx.write_object(Kind::Chunk, &text).unwrap();
        let random_id = tx.write_object(Kind::Chunk, &random).unwrap();
        drop(tx.commit().unwrap());
        let (kind, raw, how) = store.read_entry_stored(&text_id).unwrap();
        assert_eq!((kind, &raw), (Kind::Chunk, &text));
        let StoredAs::Zstd(frame) = how else {
            panic!("a compressible chunk is a zstd frame: {how:?}");
        };
        assert_eq!(zstd::bulk::decompress(&frame, text.len()).unwrap(), text);
        let (_, raw, how) = store.read_entry_stored(&random_id).unwrap();
        assert_eq!((raw, how), (random.clone(), StoredAs::Raw));

        let other = tempfile::tempdir().unwrap();
        let copy = Store::init(other.path(), StoreConfig::default()).unwrap();
        let mut tx = copy.transaction().unwrap();
        tx.write_as(text_id, Kind::Chunk, &text, Some(&frame))
            .unwrap();
        tx.write_as(random_id, Kind::Chunk, &random, None).unwrap();
        drop(tx.commit().unwrap());
        assert_eq!(copy.read_object(&text_id, Kind::Chunk).unwrap(), text);
        assert_eq!(copy.read_object(&random_id, Kind::Chunk).unwrap(), random);
        assert_eq!(
            copy.read_entry_stored(&text_id).unwrap().2,
            StoredAs::Zstd(frame)
        );
    }

    /// What a push sends is read with `read_entry_stored`: a damaged byte in an entry,
    /// kept raw or as a zstd frame, is an error naming the object, never bytes to send.
    #[test]
    fn a_damaged_entry_read_in_its_stored_form_is_an_error() {
        let text = b"a line of a note, and the same line again. ".repeat(50);
        let random = noise(10_000, 9);
        for (what, data) in [("zstd", &text), ("raw", &random)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
            let mut tx = store.transaction().unwrap();
            let id = tx.write_object(Kind::Chunk, data).unwrap();
            drop(tx.commit().unwrap());
            let loc = store.locate(&id).unwrap().unwrap();
            let path = store.pack_file_path(&loc.pack);
            let mut bytes = std::fs::read(&path).unwrap();
            let at = loc.offset as usize + pack::ENTRY_HEADER_LEN + 40;
            bytes[at] ^= 0x55;
            std::fs::write(&path, &bytes).unwrap();
            let err = Store::open(dir.path())
                .unwrap()
                .read_entry_stored(&id)
                .unwrap_err();
            assert!(
                matches!(err, StoreError::Corrupt { .. })
                    && err.to_string().contains(&id.short(16)),
                "{what}: {err}"
            );
        }
    }

    /// An aborted transaction deleted packs it had already moved into `packs/`, though
    /// another writer could have taken their chunks as stored; that writer's commit then
    /// named missing chunks.
    #[test]
    fn an_aborted_transaction_never_removes_what_another_writer_relies_on() {
        let dir = tempfile::tempdir().unwrap();
        let a_store = Store::init(dir.path(), small_packs()).unwrap();
        let b_store = Store::open(dir.path()).unwrap();
        let data = noise(6 << 20, 7);
        let mut a = a_store.transaction().unwrap();
        a.store_bytes(&data).unwrap();
        // Give A's background writers time to close its full packs.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut b = b_store.transaction().unwrap();
        let id = b.store_bytes(&data).unwrap();
        let committed = b.commit().unwrap();
        drop(a);
        drop(committed);
        let fresh = Store::open(dir.path()).unwrap();
        let mut out = Vec::new();
        fresh.read_file(&id, &mut out).unwrap();
        assert!(out == data);
        assert!(
            tmp_files(dir.path()).is_empty(),
            "{:?}",
            tmp_files(dir.path())
        );
    }

    #[test]
    fn a_dropped_transaction_leaves_no_pack_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), small_packs()).unwrap();
        let mut tx = store.transaction().unwrap();
        let id = tx.store_bytes(&noise(5 << 20, 1)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(store.pack_names().unwrap().is_empty());
        drop(tx);
        assert!(store.pack_names().unwrap().is_empty());
        assert!(tmp_files(dir.path()).is_empty());
        assert!(!store.contains(&id).unwrap());
    }

    /// The repository lock was dropped when a transaction committed, before the caller
    /// published the operation naming its objects; a `gc` in between removed them.
    #[test]
    fn a_committed_transaction_keeps_gc_out_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut tx = store.transaction().unwrap();
        tx.store_bytes(b"precious").unwrap();
        let committed = tx.commit().unwrap();
        assert!(committed.layer.is_some());
        let got_lock = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = got_lock.clone();
        let path = dir.path().to_path_buf();
        let gc = std::thread::spawn(move || {
            let other = Store::open(&path).unwrap();
            let _lock = other.gc_lock().unwrap();
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!got_lock.load(std::sync::atomic::Ordering::SeqCst));
        drop(committed);
        gc.join().unwrap();
        assert!(got_lock.load(std::sync::atomic::Ordering::SeqCst));
    }

    /// A store whose one index layer is over 4 MiB (110,000 objects), with `damage` done
    /// to the layer file's bytes; the object ids, sorted as the layer's rows are, and the
    /// layer's name.
    fn large_layer(
        damage: impl Fn(&mut [u8], &dyn Fn(usize) -> usize),
    ) -> (tempfile::TempDir, Vec<Id>, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut tx = store.transaction().unwrap();
        let mut ids: Vec<Id> = (0..110_000u32)
            .map(|i| tx.write_object(Kind::Tree, &i.to_le_bytes()).unwrap())
            .collect();
        let layer = tx.commit().unwrap().layer.unwrap();
        let path = dir.path().join(INDEX_DIR).join(format!("{layer}.idx"));
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() as u64 > crate::index::MEMORY_LAYER_MAX);
        ids.sort();
        // Rows start after the 32-byte header and one 16-byte pack name; each is 40 bytes:
        // id, pack number (3 bytes), kind, offset.
        damage(&mut bytes, &|i| 32 + 16 + i * crate::index::ROW_LEN);
        std::fs::write(&path, &bytes).unwrap();
        (dir, ids, layer)
    }

    /// A layer over 4 MiB is never read whole, so its checksum was never checked: a
    /// damaged row sent reads to the wrong place and the pack was blamed.
    #[test]
    fn a_damaged_offset_in_a_large_layer_falls_back_to_the_pack_footers() {
        let (dir, ids, layer) = large_layer(|b, row| b[row(1000) + 36] ^= 0x40);
        let fresh = Store::open(dir.path()).unwrap();
        for i in [1000usize, 3000] {
            let raw = fresh.read_object(&ids[i], Kind::Tree).unwrap();
            assert_eq!(Id::hash(&raw), ids[i]);
        }
        let warnings = fresh.warnings().join("\n");
        assert!(
            warnings.contains(&layer) && warnings.contains("checksum"),
            "{warnings}"
        );
        // Missing objects are still reported missing, not corrupt.
        assert!(matches!(
            fresh.read_object(&Id::hash(b"never stored"), Kind::Tree),
            Err(StoreError::Missing(_))
        ));
    }

    /// A row whose kind or pack number is out of range made lookups fail with "damaged
    /// file", which the reads and the existence checks of writers did not recover from.
    #[test]
    fn a_damaged_kind_or_pack_number_in_a_large_layer_is_recovered_from() {
        let (dir, ids, _) = large_layer(|b, row| {
            b[row(2000) + 35] = 0x7f;
            b[row(4000) + 34] = 0xff;
        });
        let fresh = Store::open(dir.path()).unwrap();
        assert!(fresh.contains(&ids[2000]).unwrap());
        let raw = fresh.read_object(&ids[4000], Kind::Tree).unwrap();
        assert_eq!(Id::hash(&raw), ids[4000]);
        let raw = fresh.read_object(&ids[2000], Kind::Tree).unwrap();
        assert_eq!(Id::hash(&raw), ids[2000]);
        // A writer's existence check works on the recovered index too.
        let other = Store::open(dir.path()).unwrap();
        let tx = other.transaction().unwrap();
        assert!(tx.contains(&ids[2000]).unwrap());
        drop(tx);
    }

    /// `n` distinct trees of about 500 bytes, alike enough to compress together.
    fn similar_trees(n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut t = b"entry name ".repeat(40);
                t.extend_from_slice(&i.to_le_bytes());
                t
            })
            .collect()
    }

    /// Objects written in blocks read back exactly, from a reopened store and from packs
    /// no index layer covers (whose blocks are read to find their members), and a large
    /// object goes to an entry of its own.
    #[test]
    fn grouped_objects_read_back_from_the_index_and_from_the_packs_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let trees = similar_trees(3000);
        let chunk = noise(1000, 3);
        let large = noise(crate::block::BLOCK_MEMBER_MAX + 1, 4);
        let mut tx = store.transaction().unwrap();
        for t in &trees {
            assert_eq!(tx.write_grouped(Kind::Tree, t).unwrap().1, Written::Whole);
            // What a transaction wrote in a block is read back before it commits.
            assert_eq!(&tx.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
        }
        assert_eq!(
            tx.write_grouped(Kind::Tree, &trees[0]).unwrap().1,
            Written::Existing
        );
        let (chunk_id, _) = tx.write_grouped(Kind::Chunk, &chunk).unwrap();
        let (large_id, _) = tx.write_grouped(Kind::Chunk, &large).unwrap();
        drop(tx.commit().unwrap());

        let check = |s: &Store| {
            for t in &trees {
                assert_eq!(&s.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
            }
            let mut out = Vec::new();
            s.read_file(&chunk_id, &mut out).unwrap();
            assert_eq!(out, chunk);
            assert_eq!(s.file_chunks(&chunk_id).unwrap().chunks[0].len, 1000);
            out.clear();
            s.read_file(&large_id, &mut out).unwrap();
            assert_eq!(out, large);
            let st = s.stats().unwrap();
            assert_eq!((st.objects, st.chunks), (3000, 2));
        };
        let fresh = Store::open(dir.path()).unwrap();
        check(&fresh);
        // 1.3 MB of trees took two blocks and the small chunk one, listed in the footer
        // without their members; the large chunk is an entry of its own.
        let name = &fresh.pack_names().unwrap()[0];
        let path = fresh.pack_file_path(name);
        let file = File::open(&path).unwrap();
        let footer = pack::read_footer(&file, &path).unwrap();
        let blocks = footer.iter().filter(|r| r.kind == Kind::Block).count();
        assert_eq!((footer.len(), blocks), (4, 3), "{footer:?}");
        assert!(fresh.stats().unwrap().pack_bytes < 100_000);

        for layer in list_dir(&dir.path().join(INDEX_DIR)).unwrap() {
            std::fs::remove_file(layer).unwrap();
        }
        check(&Store::open(dir.path()).unwrap());
    }

    /// A block whose stored bytes are damaged fails every read of its members with an
    /// error naming the member and the block, and fsck reports it.
    #[test]
    fn a_damaged_block_is_an_error_never_wrong_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let trees = similar_trees(10);
        let mut tx = store.transaction().unwrap();
        for t in &trees {
            tx.write_grouped(Kind::Tree, t).unwrap();
        }
        drop(tx.commit().unwrap());
        let path = store.pack_file_path(&store.pack_names().unwrap()[0]);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = pack::PACK_HEADER_LEN as usize + pack::ENTRY_HEADER_LEN + 20;
        bytes[at] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        let id = Id::hash(&trees[3]);
        let err = fresh.read_object(&id, Kind::Tree).unwrap_err().to_string();
        assert!(
            err.contains(&id.short(16)) && err.contains("block"),
            "{err}"
        );
        let report = fresh.check_packs(&|_| {}).unwrap();
        assert!(
            report.problems.iter().any(|p| p.code == "corrupt-object"),
            "{:?}",
            report.problems
        );
    }

    /// Many small transactions' blocks are consolidated into one pack with their members
    /// still indexed.
    #[test]
    fn consolidation_copies_blocks_with_their_members() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let trees = similar_trees(200);
        for part in trees.chunks(10) {
            let mut tx = store.transaction().unwrap();
            for t in part {
                tx.write_grouped(Kind::Tree, t).unwrap();
            }
            drop(tx.commit().unwrap());
        }
        store.maintain().unwrap();
        assert_eq!(store.pack_names().unwrap().len(), 1);
        let fresh = Store::open(dir.path()).unwrap();
        for t in &trees {
            assert_eq!(&fresh.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
        }
        assert!(fresh.check_packs(&|_| {}).unwrap().problems.is_empty());
    }

    /// Found timing 10,000 entity edits: maintenance after each small transaction merged
    /// the layers before 16 of them covered only small packs, so consolidation never ran,
    /// a pack per operation piled up and every publish stat'ed all of them.
    #[test]
    fn small_packs_are_consolidated_even_when_merging_folded_their_layers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut written = Vec::new();
        for i in 0..100u32 {
            let mut tx = store.transaction().unwrap();
            let raw = format!("object {i}").into_bytes();
            tx.write_object(Kind::Tree, &raw).unwrap();
            drop(tx.commit().unwrap());
            store.maintain().unwrap();
            written.push(raw);
            let packs = store.pack_names().unwrap().len();
            assert!(
                packs <= SMALL_PACKS_TRIGGER,
                "{packs} packs after {} transactions",
                i + 1
            );
        }
        let fresh = Store::open(dir.path()).unwrap();
        for raw in &written {
            assert_eq!(&fresh.read_object(&Id::hash(raw), Kind::Tree).unwrap(), raw);
        }
    }

    /// Found as a failing `entity set` among six run at once: two processes maintaining
    /// the index together merged layers one of them was consolidating away, keeping for
    /// an id the row naming a pack the other had just removed, and the object could no
    /// longer be read though its bytes were still in a pack.
    #[test]
    fn concurrent_maintainers_never_index_a_removed_pack() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::init(dir.path(), StoreConfig::default()).unwrap());
        let writers: Vec<_> = (0..4u32)
            .map(|w| {
                let path = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    let store = Store::open(&path).unwrap();
                    (0..40u32)
                        .map(|i| {
                            let raw = format!("writer {w} object {i}").into_bytes();
                            let mut tx = store.transaction().unwrap();
                            tx.write_object(Kind::Tree, &raw).unwrap();
                            drop(tx.commit().unwrap());
                            store.maintain().unwrap();
                            raw
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let written: Vec<Vec<u8>> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        assert_sound_and_readable(dir.path(), &written);
    }

    /// Found as `fsck` failing after six `entity set` commands run at once: two of them
    /// wrote the same merge operation, so the same pack (its name is a hash of what it
    /// holds); one installed it again while maintenance was deleting it after copying it,
    /// and its layer, written after the deletion, named a pack that no longer existed.
    #[test]
    fn writers_installing_the_same_pack_during_consolidation_leave_no_dangling_layer() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::init(dir.path(), StoreConfig::default()).unwrap());
        let written: Vec<Vec<u8>> = (0..60u32)
            .map(|i| format!("the same object {i}").into_bytes())
            .collect();
        // Two stores (as two processes) each write every object in a transaction of its
        // own before either commits, so each object makes the same pack in both.
        let path = dir.path().to_path_buf();
        let both_written = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (path, written, both_written) =
                    (path.clone(), written.clone(), both_written.clone());
                std::thread::spawn(move || {
                    let store = Store::open(&path).unwrap();
                    let txs: Vec<Transaction> = written
                        .iter()
                        .map(|raw| {
                            let mut tx = store.transaction().unwrap();
                            tx.write_object(Kind::Tree, raw).unwrap();
                            tx
                        })
                        .collect();
                    both_written.wait();
                    for tx in txs {
                        drop(tx.commit().unwrap());
                        store.maintain().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_sound_and_readable(dir.path(), &written);
    }

    /// Checks that the packs and index of the store at `dir` have no problem and that
    /// every object of `written` reads back.
    fn assert_sound_and_readable(dir: &Path, written: &[Vec<u8>]) {
        let fresh = Store::open(dir).unwrap();
        let problems = fresh.check_packs(&|_| {}).unwrap().problems;
        assert!(problems.is_empty(), "{problems:?}");
        for raw in written {
            assert_eq!(&fresh.read_object(&Id::hash(raw), Kind::Tree).unwrap(), raw);
        }
        assert!(fresh.warnings().is_empty(), "{:?}", fresh.warnings());
    }

    /// A repository damaged by the race above (a layer whose row for an id names a
    /// removed pack while another of its packs holds the id) still reads the object: the
    /// layer is distrusted and its packs read from their footers.
    #[test]
    fn a_layer_naming_a_removed_pack_is_read_around() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let second = Store::open(dir.path()).unwrap();
        let raw = b"written by both".to_vec();
        let id = Id::hash(&raw);
        // The second transaction starts before the first commits, so it does not know
        // the object is stored and writes it too: two packs, two layers.
        let mut late = second.transaction().unwrap();
        let mut early = first.transaction().unwrap();
        early.write_object(Kind::Tree, &raw).unwrap();
        drop(early.commit().unwrap());
        late.write_object(Kind::Tree, &raw).unwrap();
        // (Something else too, or the two packs would be the same file.)
        late.write_object(Kind::Tree, b"and something else")
            .unwrap();
        drop(late.commit().unwrap());
        let store = Store::open(dir.path()).unwrap();
        let merged_name = {
            let state = store.index.read().unwrap();
            let layers: Vec<&Layer> = state.layers.iter().collect();
            assert_eq!(layers.len(), 2);
            let mut packs: Vec<Arc<str>> = layers
                .iter()
                .flat_map(|l| l.packs.iter().cloned())
                .collect();
            packs.sort();
            let name = write_layer(
                &dir.path().join(INDEX_DIR),
                &dir.path().join(TMP_DIR),
                &store.session_prefix().unwrap(),
                &packs,
                3,
                merged_rows(&layers).unwrap(),
            )
            .unwrap();
            for l in &layers {
                std::fs::remove_file(&l.path).unwrap();
            }
            name
        };
        store.reload_index().unwrap();
        let named = store.locate_all(&id).unwrap();
        assert_eq!(named.len(), 1, "one row per id in a merged layer");
        std::fs::remove_file(store.pack_path(&named[0].pack)).unwrap();

        let fresh = Store::open(dir.path()).unwrap();
        assert_eq!(fresh.read_object(&id, Kind::Tree).unwrap(), raw);
        let warnings = fresh.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&merged_name) && w.contains("does not exist")),
            "{warnings:?}"
        );
    }
}
