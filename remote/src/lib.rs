//! lifeos-remote: several devices share one history through a remote, a plain directory
//! or an S3-compatible object store, with nothing lost when two of them push at once.
//!
//! A remote holds packs of objects, one index per pack, and operation heads
//! (`docs/FORMAT.md` section 19). `push` uploads the objects the remote lacks, then
//! publishes the operation heads with create-if-absent, so a head never points at data
//! that is not there and no lock server is needed; `fetch` downloads what is missing and
//! merges the remote's operations into the local operation log. An encrypted remote
//! (the default for S3) seals everything under a key that passphrases unlock.

#![warn(missing_docs)]

pub mod backend;
mod check;
pub mod crypt;
pub mod format;
pub mod places;
pub mod pull;
pub mod s3;
mod transfer;

use std::collections::HashMap;
use std::path::PathBuf;

use crate::backend::Backend;
use crate::crypt::{CryptError, KdfParams, KeySlot, Keys, MasterKey};
use lifeos_store::{Id, StoreError};
use lifeos_vcs::VcsError;

pub use check::{RemoteCheck, RemoteGc};
pub use format::Place;
pub use transfer::{serve_lazily, FetchReport, Progress, PushPlan, PushReport, Quiet};

use format::{
    RemoteConfig, CONFIG_KEY, CONFIG_MAX, HEADS_DIR, HEAD_MAX, INDEX_DIR, INDEX_MAX, KDF_WORK_MAX,
    KEYS_DIR, KEY_SLOTS_MAX, KEY_SLOT_MAX,
};
pub use places::Seen;

/// Pack indexes read from the remote at once.
const INDEX_READERS: usize = 8;

/// Everything that can go wrong with a remote.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// From the local store or the remote's backend.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// From the local history.
    #[error(transparent)]
    Vcs(#[from] VcsError),
    /// A key or a sealed file did not open.
    #[error(transparent)]
    Crypt(#[from] CryptError),
    /// A file on the remote is not what lifeos wrote.
    #[error("{what} on the remote is damaged: {reason}")]
    Damaged {
        /// The file or object.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The place holds no lifeos remote yet.
    #[error("{0} holds no lifeos remote yet (nothing was pushed to it)")]
    Empty(String),
    /// The remote is encrypted and no passphrase was given.
    #[error("the remote is encrypted and no passphrase was given ({0})")]
    NoPassphrase(String),
    /// A remote name that is not configured.
    #[error("no remote named {0:?}")]
    Unknown(String),
    /// Several remotes, and the command named none of them.
    #[error("there are {} remotes ({}) and the command named none", .0.len(), .0.join(", "))]
    Unnamed(Vec<String>),
    /// A remote name that is taken.
    #[error("a remote named {0:?} exists already")]
    Exists(String),
    /// A clone's folder holds files already.
    #[error("{} exists and is not empty", .0.display())]
    NotEmpty(std::path::PathBuf),
    /// A pull in a folder on no branch: there is no branch to move.
    #[error("the folder is on no branch, so pull has nothing to move")]
    NoBranch,
    /// A remote URL that cannot be used.
    #[error("remote URL {url:?}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The remotes file could not be used.
    #[error("{path}: {reason}")]
    BadRemotesFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// What was fetched does not hold everything its operations need.
    #[error("the remote's history is incomplete, so none of it was taken: {0}")]
    Incomplete(String),
    /// This repository cannot be pushed as it is.
    #[error("{0}")]
    Refused(String),
    /// The remote is not what this repository knows it to be: its config changed since
    /// it was first opened (or it is plain where encryption was asked for). Nothing was
    /// sent or taken.
    #[error("the remote at {location} {what}; nothing was sent or taken")]
    Changed {
        /// Where it is.
        location: String,
        /// What differs.
        what: String,
    },
}

/// What a repository expects of a remote it opens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect<'a> {
    /// What the remote was when this repository first opened it, if it did.
    pub seen: Option<&'a Seen>,
    /// Whether the remote must be encrypted when it was never opened before (the
    /// person asked for an encrypted remote, the default for S3).
    pub encrypted: bool,
}

impl Expect<'_> {
    /// Refuses `config`, read at `location`, if it is not what is expected.
    fn check(&self, config: &RemoteConfig, location: &str) -> Result<()> {
        let changed = |what: String| {
            Err(RemoteError::Changed {
                location: location.to_string(),
                what,
            })
        };
        let Some(seen) = self.seen else {
            if self.encrypted && !config.encrypted {
                return changed("is not encrypted, and it was added to be: its config says `encrypted = false` (a server that rewrote it would read everything pushed next)".into());
            }
            return Ok(());
        };
        if seen.encrypted && !config.encrypted {
            return changed("was encrypted when this repository first used it, and its config now says it is not: whoever can write the storage may have replaced it to read what is pushed next".into());
        }
        if !seen.encrypted && config.encrypted {
            return changed("was plain when this repository first used it, and its config now says it is encrypted".into());
        }
        if seen.key_check != config.key_check {
            return changed("is now sealed with another key than when this repository first used it (its key check differs)".into());
        }
        if seen.format != config.format {
            return changed(format!(
                "now says it is layout version {}, and it was version {} when this repository first used it",
                config.format, seen.format
            ));
        }
        Ok(())
    }
}

/// A remote's operation heads, read.
#[derive(Debug, Default)]
pub struct Heads {
    /// Each head's key and operation.
    pub good: Vec<(String, Id)>,
    /// Heads that did not open or decode (damaged, or not written by lifeos), with why.
    pub damaged: Vec<String>,
}

/// Result alias for remotes.
pub type Result<T, E = RemoteError> = std::result::Result<T, E>;

/// A passphrase, wiped from memory when dropped.
pub type Passphrase = zeroize::Zeroizing<Vec<u8>>;

/// An opened remote: its backend, and its keys if it is encrypted. Clones share the
/// backend.
#[derive(Clone)]
pub struct Remote {
    backend: std::sync::Arc<dyn Backend>,
    keys: Option<Keys>,
    /// Where indexes already read are kept (`.lifeos/remotes/<name>/index`).
    cache: Option<PathBuf>,
    /// What its config says.
    seen: Seen,
}

/// How a remote is created if it does not exist yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Only open an existing remote.
    No,
    /// Create it with everything in the clear.
    Plain,
    /// Create it encrypted.
    Encrypted,
}

impl Remote {
    /// Opens the remote in `backend` (creating it as `create` says if it holds none),
    /// unlocking an encrypted one with `passphrase` (called only if one is needed).
    /// A remote whose config is not what `expect` says is refused before anything else is
    /// read. Indexes are cached in `cache`.
    pub fn open(
        backend: Box<dyn Backend>,
        create: Create,
        passphrase: &dyn Fn() -> Result<Passphrase>,
        cache: Option<PathBuf>,
        expect: Expect<'_>,
    ) -> Result<Remote> {
        let (config, made) = match backend.get(CONFIG_KEY, CONFIG_MAX)? {
            Some(bytes) => (RemoteConfig::decode(&bytes)?, None),
            None => match create {
                Create::No => return Err(RemoteError::Empty(backend.location())),
                Create::Plain => Self::create(&*backend, None)?,
                Create::Encrypted => Self::create(&*backend, Some(&passphrase()?))?,
            },
        };
        expect.check(&config, &backend.location())?;
        let seen = Seen {
            format: config.format,
            encrypted: config.encrypted,
            key_check: config.key_check.clone(),
        };
        let keys = match (&config.key_check, made) {
            (None, _) => None,
            // Made here: its master key is at hand, and opening the slot just written
            // would only derive the same key from the passphrase again.
            (Some(_), Some(master)) => Some(master.keys()),
            (Some(check), None) => Some(Self::unlock(&*backend, check, &passphrase()?)?),
        };
        Ok(Remote {
            backend: backend.into(),
            keys,
            cache,
            seen,
        })
    }

    /// What the remote's config says: what this repository keeps of it the first time
    /// (`remotes.toml`), to compare at every later open.
    pub fn seen(&self) -> &Seen {
        &self.seen
    }

    /// Writes a new remote's config (and its first key slot, returning its master key),
    /// unless another device created one first: then that one is read.
    fn create(
        backend: &dyn Backend,
        passphrase: Option<&[u8]>,
    ) -> Result<(RemoteConfig, Option<MasterKey>)> {
        let mut slot_key = None;
        let mut made = None;
        let config = match passphrase {
            None => RemoteConfig {
                format: format::LAYOUT_VERSION,
                encrypted: false,
                key_check: None,
            },
            Some(p) => {
                let master = MasterKey::generate();
                let slot = KeySlot::create(&master, p, KdfParams::default())?;
                let key = format!("{KEYS_DIR}{}", lifeos_store::fsutil::random_hex(8));
                backend.put(&key, &mut slot.encode())?;
                slot_key = Some(key);
                let config = RemoteConfig {
                    format: format::LAYOUT_VERSION,
                    encrypted: true,
                    key_check: Some(RemoteConfig::key_check_of(&master.keys())),
                };
                made = Some(master);
                config
            }
        };
        if backend.create(CONFIG_KEY, &config.encode())? {
            return Ok((config, made));
        }
        // Another device created the remote at the same moment: its config stands, and
        // the slot written here (for a master key nothing uses) goes.
        if let Some(k) = slot_key {
            backend.delete(&k)?;
        }
        let bytes = backend
            .get(CONFIG_KEY, CONFIG_MAX)?
            .ok_or_else(|| RemoteError::Damaged {
                what: CONFIG_KEY.into(),
                reason: "it exists and cannot be read".into(),
            })?;
        Ok((RemoteConfig::decode(&bytes)?, None))
    }

    /// The master key's working keys, from the first slot `passphrase` opens whose key
    /// matches the remote's key check.
    fn unlock(backend: &dyn Backend, check: &str, passphrase: &[u8]) -> Result<Keys> {
        let opened = Self::slots_opened_by(backend, check, passphrase, true)?;
        match opened.into_iter().next() {
            Some((_, master)) => Ok(master.keys()),
            None => Err(CryptError::WrongPassphrase.into()),
        }
    }

    /// The key slots `passphrase` opens to the master key `check` names, with their
    /// keys (only the first with `first_only`: each try is an Argon2id derivation). A
    /// slot that does not decode is damage, named. At most [`KEY_SLOTS_MAX`] slots and
    /// [`KDF_WORK_MAX`] of Argon2id work are tried: a server cannot make a wrong
    /// passphrase cost more.
    fn slots_opened_by(
        backend: &dyn Backend,
        check: &str,
        passphrase: &[u8],
        first_only: bool,
    ) -> Result<Vec<(String, MasterKey)>> {
        let mut opened = Vec::new();
        let slots = backend.list(KEYS_DIR)?;
        if slots.len() > KEY_SLOTS_MAX {
            return Err(RemoteError::Damaged {
                what: KEYS_DIR.trim_end_matches('/').into(),
                reason: format!(
                    "it holds {} key slots, more than the {KEY_SLOTS_MAX} lifeos tries (each passphrase adds one; `lifeos remote key --replace` keeps one)",
                    slots.len()
                ),
            });
        }
        let mut work = 0u64;
        for (key, _) in slots {
            let Some(bytes) = backend.get(&key, KEY_SLOT_MAX)? else {
                continue;
            };
            let slot = KeySlot::decode(&bytes).map_err(|e| RemoteError::Damaged {
                what: key.clone(),
                reason: e.to_string(),
            })?;
            // Each try derives a key: bounded, so a server's slots cannot make a wrong
            // passphrase take hours.
            work += slot.work();
            if work > KDF_WORK_MAX {
                return Err(RemoteError::Damaged {
                    what: KEYS_DIR.trim_end_matches('/').into(),
                    reason: format!(
                        "its key slots ask for more Argon2id work than lifeos spends to unlock a remote ({} GiB-passes)",
                        KDF_WORK_MAX >> 20
                    ),
                });
            }
            match slot.open(passphrase) {
                Ok(master) if RemoteConfig::key_check_of(&master.keys()) == check => {
                    opened.push((key, master));
                    if first_only {
                        break;
                    }
                }
                Ok(_) | Err(CryptError::WrongPassphrase) => {}
                Err(e) => {
                    return Err(RemoteError::Damaged {
                        what: key,
                        reason: e.to_string(),
                    })
                }
            }
        }
        Ok(opened)
    }

    /// Adds a key slot for passphrase `new` under the master key `old` opens; with
    /// `replace`, then removes the slots `old` opens (the new one stays, so the remote
    /// always keeps a way in). Nothing else is re-sealed. Returns how many slots were
    /// removed.
    pub fn change_passphrase(&self, old: &[u8], new: &[u8], replace: bool) -> Result<usize> {
        let Some(keys) = &self.keys else {
            return Err(RemoteError::Refused(format!(
                "the remote at {} is not encrypted; it has no passphrase",
                self.backend.location()
            )));
        };
        let check = RemoteConfig::key_check_of(keys);
        let opened = Self::slots_opened_by(&*self.backend, &check, old, !replace)?;
        let Some((_, master)) = opened.first() else {
            return Err(CryptError::WrongPassphrase.into());
        };
        let slot = KeySlot::create(master, new, KdfParams::default())?;
        let key = format!("{KEYS_DIR}{}", lifeos_store::fsutil::random_hex(8));
        self.backend.put(&key, &mut slot.encode())?;
        if !replace {
            return Ok(0);
        }
        for (k, _) in &opened {
            self.backend.delete(k)?;
        }
        Ok(opened.len())
    }

    /// Where the remote is.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// Whether the remote is encrypted.
    pub fn encrypted(&self) -> bool {
        self.keys.is_some()
    }

    /// The remote's operation heads: each head's key and operation, and those that did
    /// not open or decode (a server's damage: the others are still read). A head removed
    /// while it was being read is skipped.
    pub fn heads(&self) -> Result<Heads> {
        let mut out = Heads::default();
        for (key, _) in self.backend.list(HEADS_DIR)? {
            let bytes = match self.backend.get(&key, HEAD_MAX) {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(e @ StoreError::RemoteTooLarge { .. }) => {
                    out.damaged.push(e.to_string());
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            match format::decode_head(self.keys.as_ref(), &key, bytes) {
                Ok(id) => out.good.push((key, id)),
                Err(e) => out.damaged.push(e.to_string()),
            }
        }
        Ok(out)
    }

    /// Where every object on the remote is, from the packs' indexes (read from the cache
    /// when they were read before; the remote's listing says which packs exist).
    pub fn catalog(&self) -> Result<HashMap<Id, Place>> {
        let mut map = HashMap::new();
        let listed = self.backend.list(INDEX_DIR)?;
        let names: std::collections::HashSet<&str> = listed
            .iter()
            .map(|(key, _)| &key[INDEX_DIR.len()..])
            .collect();
        // Each index is a small object: reading them one after another would wait on one
        // request at a time.
        let read = lifeos_store::par::map_on(INDEX_READERS, &listed, |(key, _)| -> Result<_> {
            let name = &key[INDEX_DIR.len()..];
            let cached = self.cache.as_ref().map(|c| c.join(name));
            if let Some(b) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
                return Ok(Some(b));
            }
            let Some(b) = self.backend.get(key, INDEX_MAX)? else {
                // Removed since the listing (by `gc --remote`): so are its pack's objects.
                return Ok(None);
            };
            if let Some(p) = &cached {
                self.save_cached(p, &b)?;
            }
            Ok(Some(b))
        });
        for ((key, _), bytes) in listed.iter().zip(read) {
            let Some(bytes) = bytes? else { continue };
            let name = &key[INDEX_DIR.len()..];
            for r in format::decode_index(self.keys.as_ref(), name, bytes)? {
                map.insert(
                    r.id,
                    Place {
                        pack: name.to_string(),
                        kind: r.kind,
                        offset: r.offset,
                        len: r.len,
                    },
                );
            }
        }
        // Packs the remote no longer has (collected by `gc --remote`).
        if let Some(dir) = &self.cache {
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if !names.contains(n.as_str()) && !n.starts_with('.') {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
        Ok(map)
    }

    fn save_cached(&self, path: &std::path::Path, bytes: &[u8]) -> Result<()> {
        use lifeos_store::error::IoContext as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).io("creating", dir)?;
        }
        lifeos_store::fsutil::write_atomic(path, bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::DirBackend;
    use std::ops::Range;

    /// A folder remote that records the keys of its ranged reads. Unless `asked`
    /// starts true, its config is not there the first time it is asked for: as for a
    /// device that looked just before another one created the remote.
    struct Watched {
        dir: DirBackend,
        asked: std::sync::atomic::AtomicBool,
        ranges_read: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Backend for Watched {
        fn location(&self) -> String {
            self.dir.location()
        }
        fn get(&self, key: &str, max: u64) -> lifeos_store::Result<Option<Vec<u8>>> {
            if key == CONFIG_KEY && !self.asked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Ok(None);
            }
            self.dir.get(key, max)
        }
        fn get_range(
            &self,
            key: &str,
            range: Range<u64>,
            into: &mut Vec<u8>,
        ) -> lifeos_store::Result<()> {
            self.ranges_read.lock().unwrap().push(key.to_string());
            self.dir.get_range(key, range, into)
        }
        fn put(&self, key: &str, bytes: &mut Vec<u8>) -> lifeos_store::Result<()> {
            self.dir.put(key, bytes)
        }
        fn create(&self, key: &str, bytes: &[u8]) -> lifeos_store::Result<bool> {
            self.dir.create(key, bytes)
        }
        fn list(&self, prefix: &str) -> lifeos_store::Result<Vec<(String, u64)>> {
            self.dir.list(prefix)
        }
        fn delete(&self, key: &str) -> lifeos_store::Result<()> {
            self.dir.delete(key)
        }
    }

    #[test]
    fn a_remote_made_here_uses_the_key_its_slot_wraps_and_a_late_device_takes_the_first() {
        let root = tempfile::tempdir().unwrap();
        let dir = || Box::new(DirBackend::open(root.path()).unwrap());
        let pass = || Ok(Passphrase::new(b"correct horse".to_vec()));
        let name = |r: &Remote| r.keys.as_ref().unwrap().name(&Id::hash(b"an operation"));
        let made = Remote::open(dir(), Create::Encrypted, &pass, None, Expect::default()).unwrap();
        let opened = Remote::open(dir(), Create::No, &pass, None, Expect::default()).unwrap();
        assert_eq!(name(&made), name(&opened));
        let late = Remote::open(
            Box::new(Watched {
                dir: DirBackend::open(root.path()).unwrap(),
                asked: false.into(),
                ranges_read: Default::default(),
            }),
            Create::Encrypted,
            &pass,
            None,
            Expect::default(),
        )
        .unwrap();
        assert_eq!(name(&late), name(&made));
        // The late device's own slot, for a master key nothing uses, is gone.
        assert_eq!(dir().list(KEYS_DIR).unwrap().len(), 1);
        let wrong = || Ok(Passphrase::new(b"wrong".to_vec()));
        assert!(matches!(
            Remote::open(dir(), Create::No, &wrong, None, Expect::default()),
            Err(RemoteError::Crypt(CryptError::WrongPassphrase))
        ));
    }

    /// H2: a server that rewrites an encrypted remote's config to plain (or swaps its key,
    /// or its layout) is refused at open, before anything is sent; a remote added to be
    /// encrypted is refused plain the first time.
    #[test]
    fn a_remote_is_refused_when_its_config_differs_from_what_was_seen() {
        let root = tempfile::tempdir().unwrap();
        let dir = || Box::new(DirBackend::open(root.path()).unwrap());
        let pass = || Ok(Passphrase::new(b"correct horse".to_vec()));
        let first = Remote::open(dir(), Create::Encrypted, &pass, None, Expect::default()).unwrap();
        let seen = first.seen().clone();
        assert!(seen.encrypted && seen.key_check.is_some());
        let expect = Expect {
            seen: Some(&seen),
            encrypted: true,
        };
        Remote::open(dir(), Create::No, &pass, None, expect).unwrap();
        let rewrite = |config: &str| {
            std::fs::write(root.path().join(CONFIG_KEY), config).unwrap();
        };
        let changed = |e: RemoteError| match e {
            RemoteError::Changed { what, .. } => what,
            other => panic!("{other}"),
        };
        // Downgraded to plain: refused, though no passphrase is even needed.
        rewrite("format = 1\nencrypted = false\n");
        let what = changed(
            Remote::open(dir(), Create::No, &pass, None, expect)
                .err()
                .unwrap(),
        );
        assert!(
            what.contains("was encrypted") && what.contains("says it is not"),
            "{what}"
        );
        // Another key.
        let other = RemoteConfig::key_check_of(&MasterKey::generate().keys());
        rewrite(&format!(
            "format = 1\nencrypted = true\nkey_check = \"{other}\"\n"
        ));
        let what = changed(
            Remote::open(dir(), Create::No, &pass, None, expect)
                .err()
                .unwrap(),
        );
        assert!(what.contains("another key"), "{what}");
        // Never seen, but added to be encrypted: a plain config is refused too.
        rewrite("format = 1\nencrypted = false\n");
        let first_time = Expect {
            seen: None,
            encrypted: true,
        };
        let what = changed(
            Remote::open(dir(), Create::Encrypted, &pass, None, first_time)
                .err()
                .unwrap(),
        );
        assert!(what.contains("it was added to be"), "{what}");
        // An oversized config is not read.
        std::fs::write(root.path().join(CONFIG_KEY), vec![b'#'; 1 << 20]).unwrap();
        let e = Remote::open(dir(), Create::No, &pass, None, Expect::default())
            .err()
            .unwrap();
        assert!(
            matches!(e, RemoteError::Store(StoreError::RemoteTooLarge { .. })),
            "{e}"
        );
    }

    /// A server cannot make unlocking cost more than a bounded number of slots and
    /// Argon2id work: a wrong passphrase against many or costly slots fails fast.
    #[test]
    fn key_slots_past_the_bounds_are_refused_before_they_are_tried() {
        let root = tempfile::tempdir().unwrap();
        let dir = || Box::new(DirBackend::open(root.path()).unwrap());
        let pass = || Ok(Passphrase::new(b"correct horse".to_vec()));
        let remote =
            Remote::open(dir(), Create::Encrypted, &pass, None, Expect::default()).unwrap();
        let master = MasterKey::generate();
        let costly = KdfParams {
            mem_kib: 1 << 20,
            iterations: 5,
            lanes: 1,
        };
        // A slot's parameters are checked when it decodes; one this costly decodes, and
        // is refused for its work before Argon2id runs.
        let mut slot = KeySlot::create(&master, b"x", KdfParams::default()).unwrap();
        slot.params = costly;
        dir().put("keys/costly", &mut slot.encode()).unwrap();
        let started = std::time::Instant::now();
        let wrong = || Ok(Passphrase::new(b"wrong".to_vec()));
        let e = Remote::open(dir(), Create::No, &wrong, None, Expect::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("more Argon2id work"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        dir().delete("keys/costly").unwrap();
        for i in 0..KEY_SLOTS_MAX {
            dir()
                .put(&format!("keys/extra{i:02}"), &mut b"junk".to_vec())
                .unwrap();
        }
        let e = Remote::open(dir(), Create::No, &pass, None, Expect::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("key slots, more than"), "{e}");
        drop(remote);
    }

    /// A repository holding a committed library of a 20 MiB video (of bytes zstd cannot
    /// shrink, so that it takes several 8 MiB remote packs) and 40 notes.
    fn library() -> (tempfile::TempDir, lifeos_vcs::Repo) {
        let folder = tempfile::tempdir().unwrap();
        let repo =
            lifeos_vcs::Repo::init(folder.path(), lifeos_store::StoreConfig::default()).unwrap();
        let mut video = vec![0u8; 20 << 20];
        getrandom::fill(&mut video).unwrap();
        std::fs::write(folder.path().join("video.mp4"), &video).unwrap();
        std::fs::create_dir(folder.path().join("notes")).unwrap();
        for i in 0..40 {
            let note = format!("note {i}: the budget, again\n").repeat(50 + i);
            std::fs::write(folder.path().join(format!("notes/{i}.md")), note).unwrap();
        }
        lifeos_vcs::testing::commit_folder(&repo, b"library");
        (folder, repo)
    }

    /// A plain remote in `root` that `repo` was pushed to, and the keys of the ranged
    /// reads made of it from then on.
    fn pushed_to_watched(
        repo: &lifeos_vcs::Repo,
        root: &std::path::Path,
    ) -> (Remote, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let ranges_read = std::sync::Arc::default();
        let remote = Remote::open(
            Box::new(Watched {
                dir: DirBackend::open(root).unwrap(),
                asked: true.into(),
                ranges_read: std::sync::Arc::clone(&ranges_read),
            }),
            Create::Plain,
            &|| Ok(Passphrase::default()),
            None,
            Expect::default(),
        )
        .unwrap();
        remote
            .push(PushPlan::new(repo).unwrap(), &transfer::Quiet)
            .unwrap();
        ranges_read.lock().unwrap().clear();
        (remote, ranges_read)
    }

    /// A push walks what to send while it opens its remote; when that fails (a wrong
    /// passphrase), the walk is stopped instead of waited for.
    #[test]
    fn a_push_plan_stops_its_walk_when_told() {
        let (_folder, repo) = library();
        let stop = std::sync::atomic::AtomicBool::new(true);
        let err = PushPlan::new_until(&repo, &stop)
            .err()
            .expect("a stopped walk is an error");
        assert!(
            matches!(err, RemoteError::Vcs(lifeos_vcs::VcsError::Stopped)),
            "{err}"
        );
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(PushPlan::new_until(&repo, &stop).is_ok());
    }

    #[test]
    fn a_fetch_of_everything_reads_each_pack_whole_in_one_request() {
        let (_folder, repo) = library();
        let root = tempfile::tempdir().unwrap();
        let (remote, ranges_read) = pushed_to_watched(&repo, root.path());
        let clone = tempfile::tempdir().unwrap();
        let clone =
            lifeos_vcs::Repo::init(clone.path(), lifeos_store::StoreConfig::default()).unwrap();
        let report = remote
            .fetch(&clone, "origin", true, None, &transfer::Quiet)
            .unwrap();
        assert!(report.merged.is_some());
        let mut packs: Vec<String> = DirBackend::open(root.path())
            .unwrap()
            .list(format::PACKS_DIR)
            .unwrap()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert!(packs.len() >= 4, "{packs:?}");
        let mut read = ranges_read.lock().unwrap().clone();
        read.sort();
        packs.sort();
        assert_eq!(read, packs, "each pack read once");
    }

    /// Regression: a lazy clone's checkout fetched each file's chunks with a ranged read
    /// per chunk and a transaction per file (52-55 s for the peer library's 604 MiB).
    #[test]
    fn a_lazy_restore_fetches_its_files_chunks_together() {
        let (folder, repo) = library();
        let root = tempfile::tempdir().unwrap();
        let (remote, ranges_read) = pushed_to_watched(&repo, root.path());
        let clone = tempfile::tempdir().unwrap();
        let clone =
            lifeos_vcs::Repo::init(clone.path(), lifeos_store::StoreConfig::default()).unwrap();
        remote
            .fetch(&clone, "origin", false, None, &transfer::Quiet)
            .unwrap();
        let catalog = remote.catalog().unwrap();
        let chunks_here = |r: &lifeos_vcs::Repo| {
            let store = r.store();
            catalog
                .iter()
                .filter(|(id, p)| {
                    p.kind == lifeos_store::Kind::Chunk && store.contains(id).unwrap()
                })
                .count()
        };
        let chunks = chunks_here(&repo);
        assert!(chunks > 100, "{chunks} chunks");
        assert_eq!(chunks_here(&clone), 0, "a lazy fetch brings no chunk");
        let chunk_packs: std::collections::HashSet<&String> = catalog
            .values()
            .filter(|p| p.kind == lifeos_store::Kind::Chunk)
            .map(|p| &p.pack)
            .collect();
        ranges_read.lock().unwrap().clear();
        serve_lazily(&clone, Box::new(move || Ok(remote.clone())));
        // A fetch stopped when asked keeps nothing.
        let chunk_ids: Vec<&Id> = catalog
            .iter()
            .filter(|(_, p)| p.kind == lifeos_store::Kind::Chunk)
            .map(|(id, _)| id)
            .collect();
        let stopped = clone
            .store()
            .fetch_file_chunks(chunk_ids.iter().copied(), &|| true);
        assert!(matches!(stopped, Err(StoreError::Stopped)), "{stopped:?}");
        assert_eq!(chunks_here(&clone), 0, "a stopped fetch keeps nothing");
        ranges_read.lock().unwrap().clear();
        let commit = repo.head().unwrap().view.wc_commit.unwrap();
        let out = tempfile::tempdir().unwrap();
        let out = out.path().join("out");
        clone
            .restore_tree_to(&repo.commit(&commit).unwrap().tree, &out, &|_| ())
            .unwrap();
        assert_eq!(
            std::fs::read(out.join("video.mp4")).unwrap(),
            std::fs::read(folder.path().join("video.mp4")).unwrap()
        );
        for i in 0..40 {
            let note = format!("notes/{i}.md");
            assert_eq!(
                std::fs::read(out.join(&note)).unwrap(),
                std::fs::read(folder.path().join(&note)).unwrap()
            );
        }
        assert_eq!(chunks_here(&clone), chunks);
        // Every chunk is wanted, so each pack holding chunks is read whole, once.
        let read = ranges_read.lock().unwrap().clone();
        assert_eq!(read.len(), chunk_packs.len(), "{read:?}");
    }

    /// As above, for a checkout: the folder move fetches its files' chunks together. Ctrl-C
    /// during that fetch stops it and leaves an interrupted move, which the next command
    /// finishes.
    #[test]
    fn a_lazy_checkout_fetches_its_files_chunks_together() {
        let (folder, repo) = library();
        let root = tempfile::tempdir().unwrap();
        let (remote, ranges_read) = pushed_to_watched(&repo, root.path());
        let here = tempfile::tempdir().unwrap();
        let clone =
            lifeos_vcs::Repo::init(here.path(), lifeos_store::StoreConfig::default()).unwrap();
        remote
            .fetch(&clone, "origin", false, None, &transfer::Quiet)
            .unwrap();
        let (chunks, chunk_packs): (Vec<Id>, std::collections::HashSet<String>) = remote
            .catalog()
            .unwrap()
            .into_iter()
            .filter(|(_, p)| p.kind == lifeos_store::Kind::Chunk)
            .map(|(id, p)| (id, p.pack))
            .unzip();
        ranges_read.lock().unwrap().clear();
        // The remote is opened once, by the first fetch, which is inside the move: the
        // flag is set then, as the signal handler sets it.
        let ctrl_c = clone.interrupt.requested_flag();
        serve_lazily(
            &clone,
            Box::new(move || {
                ctrl_c.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(remote.clone())
            }),
        );
        let commit = repo.head().unwrap().view.wc_commit.unwrap();
        {
            let wc = clone.lock_working_copy().unwrap();
            let stopped = clone.fast_forward(&wc, "main", commit, false);
            assert!(
                matches!(&stopped, Err(VcsError::MoveUnfinished { source, .. })
                    if matches!(**source, VcsError::Interrupted)),
                "{:?}",
                stopped.map(|_| ())
            );
        }
        assert!(!here.path().join("video.mp4").exists());
        assert!(
            chunks.iter().all(|id| !clone.store().contains(id).unwrap()),
            "a stopped fetch keeps nothing"
        );
        ranges_read.lock().unwrap().clear();
        // The next command finishes the move, fetching what the stopped one dropped.
        let wc = clone.lock_working_copy().unwrap();
        assert!(wc.finished_move().is_some_and(|m| m.applied > 40));
        assert_eq!(clone.head().unwrap().view.wc_commit, Some(commit));
        assert_eq!(
            std::fs::read(here.path().join("video.mp4")).unwrap(),
            std::fs::read(folder.path().join("video.mp4")).unwrap()
        );
        let read = ranges_read.lock().unwrap().clone();
        assert_eq!(read.len(), chunk_packs.len(), "{read:?}");
    }

    #[test]
    fn history_goes_in_packs_of_its_own_and_chunks_in_their_local_order() {
        let (_folder, repo) = library();
        let root = tempfile::tempdir().unwrap();
        let backend = Box::new(DirBackend::open(root.path()).unwrap());
        let remote = Remote::open(
            backend,
            Create::Plain,
            &|| Ok(Passphrase::default()),
            None,
            Expect::default(),
        )
        .unwrap();
        remote
            .push(PushPlan::new(&repo).unwrap(), &transfer::Quiet)
            .unwrap();
        let catalog = remote.catalog().unwrap();
        let mut packs: HashMap<&str, (usize, usize)> = HashMap::new();
        for place in catalog.values() {
            let (chunks, others) = packs.entry(&place.pack).or_default();
            match place.kind {
                lifeos_store::Kind::Chunk => *chunks += 1,
                _ => *others += 1,
            }
        }
        assert!(
            packs.values().all(|&(c, o)| c == 0 || o == 0),
            "a pack mixes chunks and history: {packs:?}"
        );
        assert!(packs.values().any(|&(c, _)| c == 0), "{packs:?}");
        assert!(
            packs.values().filter(|&&(_, o)| o == 0).count() >= 3,
            "{packs:?}"
        );
        // Chunks were read here in the order they lie: within a remote pack, their
        // places in the local packs only grow.
        let store = repo.store();
        let mut by_pack: HashMap<&str, Vec<(u64, String, u32)>> = HashMap::new();
        for (id, place) in &catalog {
            if place.kind == lifeos_store::Kind::Chunk {
                let here = store.locate(id).unwrap().unwrap();
                by_pack.entry(&place.pack).or_default().push((
                    place.offset,
                    here.pack.to_string(),
                    here.offset,
                ));
            }
        }
        for chunks in by_pack.values_mut() {
            chunks.sort();
            assert!(
                chunks
                    .windows(2)
                    .all(|w| (&w[0].1, w[0].2) < (&w[1].1, w[1].2)),
                "chunks out of their local order: {chunks:?}"
            );
        }
    }
}
