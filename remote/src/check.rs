//! `fsck --remote` and `gc --remote`: checking what a remote holds, and removing the packs
//! no operation on it reaches, without ever racing a push.
//!
//! A push and a gc announce themselves with lock objects under `locks/` (a plain object
//! each, no lock server): a push writes `locks/push-<random>` before it uploads and
//! removes it when done; a gc creates `locks/gc` (create-if-absent) before it decides
//! anything. Each writes its own lock first and then looks for the other's, so of a push
//! and a gc that overlap at least one sees the other: the push refuses to start while a
//! gc runs, and the gc refuses to remove anything while a push runs. A lock older than
//! [`STALE_AFTER_MS`], or taken on this host by a process that no longer runs, was left
//! by a process that was killed and is ignored.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use lifeos_store::Id;
use lifeos_vcs::Repo;

use crate::format::{self, Place, INDEX_DIR, PACKS_DIR, PACK_MAGIC};
use crate::{Remote, RemoteError, Result};

/// The folder of lock objects.
pub const LOCKS_DIR: &str = "locks/";
/// The gc's lock.
pub const GC_LOCK: &str = "locks/gc";
/// A lock older than this (in milliseconds) was left by a process that was killed.
pub const STALE_AFTER_MS: i64 = 30 * 60 * 1000;

/// What `fsck --remote` found.
#[derive(Debug, Default)]
pub struct RemoteCheck {
    /// Packs with an index.
    pub packs: u64,
    /// Bytes in those packs.
    pub bytes: u64,
    /// Objects their indexes list.
    pub objects: u64,
    /// Objects downloaded and verified (`--read-data`).
    pub verified: u64,
    /// Operation heads.
    pub heads: u64,
    /// Objects the heads reach.
    pub reachable: u64,
    /// Packs no index describes (left by a push that was stopped; `gc --remote` removes
    /// them).
    pub unindexed: Vec<String>,
    /// What is wrong; empty means the remote is healthy.
    pub problems: Vec<String>,
}

/// What `gc --remote` removed.
#[derive(Debug, Default)]
pub struct RemoteGc {
    /// Packs removed.
    pub packs_removed: u64,
    /// Bytes they held.
    pub bytes_removed: u64,
    /// Packs kept (something reachable is in them).
    pub packs_kept: u64,
    /// Unreachable objects kept in packs that also hold reachable ones.
    pub unreachable_kept: u64,
}

fn now_ms() -> i64 {
    lifeos_vcs::repo::now_ms()
}

fn host() -> String {
    lifeos_vcs::repo::Actor::from_env().host
}

/// A lock's contents: when it was taken (milliseconds since the epoch), on which host,
/// by which process.
fn lock_body() -> String {
    format!("{} {} {}\n", now_ms(), host(), std::process::id())
}

/// Whether a lock is held: younger than [`STALE_AFTER_MS`] and, if taken on this host,
/// by a process that still runs (as restic judges its locks).
fn lock_is_live(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let mut parts = text.split_whitespace();
    let at = parts
        .next()
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(0);
    if now_ms() - at >= STALE_AFTER_MS {
        return false;
    }
    match (
        parts.next(),
        parts.next().and_then(|p| p.parse::<u32>().ok()),
    ) {
        (Some(h), Some(pid)) if h == host() => Path::new(&format!("/proc/{pid}")).exists(),
        _ => true,
    }
}

/// A lock object, removed when dropped.
pub(crate) struct Lock<'r> {
    remote: &'r Remote,
    key: String,
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        let _ = self.remote.backend.delete(&self.key);
    }
}

impl Remote {
    /// Lock objects that are not stale, with their keys.
    fn live_locks(&self) -> Result<Vec<String>> {
        let mut live = Vec::new();
        for (key, _) in self.backend.list(LOCKS_DIR)? {
            let bytes = match self.backend.get(&key, format::LOCK_MAX) {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                // Not a lock lifeos wrote: it stands, as one would.
                Err(lifeos_store::StoreError::RemoteTooLarge { .. }) => {
                    live.push(key);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if lock_is_live(&bytes) {
                live.push(key);
            }
        }
        Ok(live)
    }

    /// Announces a push; refuses while a gc runs.
    pub(crate) fn push_lock(&self) -> Result<Lock<'_>> {
        let key = format!("{LOCKS_DIR}push-{}", lifeos_store::fsutil::random_hex(8));
        self.backend.put(&key, &mut lock_body().into_bytes())?;
        let lock = Lock { remote: self, key };
        if self.live_locks()?.iter().any(|k| k == GC_LOCK) {
            return Err(RemoteError::Refused(format!(
                "a `gc --remote` is running on {}; push again when it is done",
                self.location()
            )));
        }
        Ok(lock)
    }

    /// Takes the gc's lock; refuses while a push or another gc runs.
    fn gc_lock(&self) -> Result<Lock<'_>> {
        let stamp = lock_body();
        if !self.backend.create(GC_LOCK, stamp.as_bytes())? {
            if self.live_locks()?.iter().any(|k| k == GC_LOCK) {
                return Err(RemoteError::Refused(format!(
                    "another `gc --remote` is running on {}",
                    self.location()
                )));
            }
            // Stale: its gc was killed.
            self.backend.delete(GC_LOCK)?;
            if !self.backend.create(GC_LOCK, stamp.as_bytes())? {
                return Err(RemoteError::Refused(format!(
                    "another `gc --remote` is starting on {}",
                    self.location()
                )));
            }
        }
        let lock = Lock {
            remote: self,
            key: GC_LOCK.into(),
        };
        if let Some(p) = self.live_locks()?.iter().find(|k| k.as_str() != GC_LOCK) {
            return Err(RemoteError::Refused(format!(
                "a push is running on {} ({p}); nothing was removed. Run gc again when it is done (a lock left by a killed push is ignored after 30 minutes)",
                self.location()
            )));
        }
        Ok(lock)
    }

    /// Every object the remote's heads reach, walked in a scratch repository in `scratch`
    /// (a new folder) that reads from the remote what it needs: operations, views,
    /// commits, trees and manifests, never file contents. Problems (something reached
    /// that the remote lacks) are added to `problems`.
    fn reach(
        &self,
        scratch: &Path,
        heads: &[Id],
        catalog: &HashMap<Id, Place>,
        problems: &mut Vec<String>,
    ) -> Result<HashSet<Id>> {
        let repo = Repo::init(scratch, lifeos_store::StoreConfig::default())?;
        let remote = self.clone();
        crate::serve_lazily(&repo, Box::new(move || Ok(remote.clone())));
        let mut found = Vec::new();
        let reach = repo.reachable_from::<HashSet<Id>>(heads.to_vec(), true, &mut found)?;
        for p in found {
            // A chunk the remote has is "missing" only from the scratch repository.
            if p.code == "missing-object" && p.object.is_some_and(|o| catalog.contains_key(&o)) {
                continue;
            }
            problems.push(format!("{}: {}", p.code, p.detail));
        }
        for id in &reach.ids {
            if !catalog.contains_key(id) {
                problems.push(format!(
                    "object {id} is reached by a head and is not on the remote"
                ));
            }
        }
        Ok(reach.ids)
    }

    /// Checks the remote: every index opens and names a pack that holds its rows, every
    /// head opens and everything it reaches is on the remote; with `read_data`, every
    /// object is downloaded and checked against its id. `scratch` is a new folder for
    /// the walk.
    pub fn check(&self, scratch: &Path, read_data: bool) -> Result<RemoteCheck> {
        let mut r = RemoteCheck::default();
        let packs: HashMap<String, u64> = self
            .backend
            .list(PACKS_DIR)?
            .into_iter()
            .map(|(k, n)| (k[PACKS_DIR.len()..].to_string(), n))
            .collect();
        let catalog = match self.catalog() {
            Ok(c) => c,
            Err(e) => {
                r.problems.push(e.to_string());
                HashMap::new()
            }
        };
        let mut by_pack: HashMap<&str, Vec<(&Id, &Place)>> = HashMap::new();
        for (id, p) in &catalog {
            by_pack.entry(&p.pack).or_default().push((id, p));
        }
        r.objects = catalog.len() as u64;
        for (pack, rows) in &by_pack {
            let Some(size) = packs.get(*pack) else {
                r.problems.push(format!(
                    "index {INDEX_DIR}{pack} names pack {PACKS_DIR}{pack}, which is missing"
                ));
                continue;
            };
            r.packs += 1;
            r.bytes += size;
            if let Some((id, p)) = rows
                .iter()
                .find(|(_, p)| p.offset + u64::from(p.len) > *size)
            {
                r.problems.push(format!(
                    "pack {PACKS_DIR}{pack} is {size} bytes; object {id} should end at byte {}",
                    p.offset + u64::from(p.len)
                ));
                continue;
            }
            if read_data {
                let bytes = self
                    .backend
                    .get(&format!("{PACKS_DIR}{pack}"), format::PACK_READ_MAX)?
                    .unwrap_or_default();
                if !bytes.starts_with(PACK_MAGIC) {
                    r.problems.push(format!(
                        "pack {PACKS_DIR}{pack} does not start as a lifeos pack"
                    ));
                    continue;
                }
                for (id, p) in rows {
                    let blob = bytes
                        .get(p.offset as usize..(p.offset + u64::from(p.len)) as usize)
                        .unwrap_or_default()
                        .to_vec();
                    match format::decode_object(self.keys.as_ref(), id, p.kind, blob) {
                        Ok(_) => r.verified += 1,
                        Err(e) => r.problems.push(e.to_string()),
                    }
                }
            }
        }
        let indexed: HashSet<&str> = by_pack.keys().copied().collect();
        r.unindexed = packs
            .keys()
            .filter(|p| !indexed.contains(p.as_str()))
            .cloned()
            .collect();
        r.unindexed.sort();
        let read = self.heads()?;
        r.problems.extend(read.damaged);
        let heads: Vec<Id> = read.good.into_iter().map(|(_, id)| id).collect();
        r.heads = heads.len() as u64;
        if !heads.is_empty() {
            r.reachable = self
                .reach(scratch, &heads, &catalog, &mut r.problems)?
                .len() as u64;
        }
        Ok(r)
    }

    /// Removes the packs (with their indexes) that hold nothing the remote's heads reach,
    /// and packs no index describes. Refuses while a push runs, and refuses to remove
    /// anything from a remote whose check finds problems. `scratch` is a new folder for
    /// the walk.
    pub fn gc(&self, scratch: &Path) -> Result<RemoteGc> {
        let _lock = self.gc_lock()?;
        let catalog = self.catalog()?;
        let read = self.heads()?;
        let heads: Vec<Id> = read.good.into_iter().map(|(_, id)| id).collect();
        // What a head that cannot be read reaches is unknown: nothing may go.
        let mut problems = read.damaged;
        let reached = if heads.is_empty() {
            HashSet::new()
        } else {
            self.reach(scratch, &heads, &catalog, &mut problems)?
        };
        if let Some(p) = problems.first() {
            return Err(RemoteError::Refused(format!(
                "gc --remote removed nothing: the remote has {} problems (the first: {p}); `lifeos fsck --remote` lists them",
                problems.len()
            )));
        }
        let mut r = RemoteGc::default();
        let mut live: HashMap<&str, (u64, u64)> = HashMap::new();
        for (id, p) in &catalog {
            let e = live.entry(&p.pack).or_default();
            if reached.contains(id) {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
        for (key, size) in self.backend.list(PACKS_DIR)? {
            let name = &key[PACKS_DIR.len()..];
            match live.get(name) {
                Some((reachable, unreachable)) if *reachable > 0 => {
                    r.packs_kept += 1;
                    r.unreachable_kept += unreachable;
                }
                _ => {
                    // The index first: a reader never finds an index without its pack.
                    self.backend.delete(&format!("{INDEX_DIR}{name}"))?;
                    self.backend.delete(&key)?;
                    r.packs_removed += 1;
                    r.bytes_removed += size;
                }
            }
        }
        Ok(r)
    }
}
