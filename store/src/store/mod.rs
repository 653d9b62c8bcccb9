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
use crate::fsutil::{list_dir, open_lock_file, random_hex, sync_dir, write_atomic};
use crate::id::{Id, IdMap, IdSet};
use crate::index::{merged_rows, write_layer, Layer, Location, RowSorter, SpillRun};
use crate::kind::Kind;
use crate::manifest::{ChunkRef, Manifest};
use crate::pack::{self, EntryHeader, FinishedPack, FooterRow, PackWriter};
use cache::{Cache, BASE_CACHE_BYTES, BLOCK_CACHE_BYTES};

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

    fn pack_path(&self, name: &str) -> PathBuf {
        self.dir.join(PACKS_DIR).join(format!("{name}.pack"))
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
}

/// The pack name of a `packs/<name>.pack` path.
fn pack_name(p: &Path) -> Option<String> {
    let name = p.file_name()?.to_str()?.strip_suffix(".pack")?;
    (name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())).then(|| name.to_string())
}

mod cache;
mod locate;
mod maintain;
mod read;
mod transaction;

pub(crate) use transaction::Claimed;
pub use transaction::{encode_entry, Committed, PackSink, Transaction, Written};

#[cfg(test)]
mod tests;
