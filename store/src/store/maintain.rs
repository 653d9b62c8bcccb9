//! Keeping the store small and fast: temporary files of dead writers removed, small packs
//! consolidated, index layers merged.

use super::*;

/// Seconds since `path` was last modified, if it can be told.
pub(super) fn age_secs(path: &Path) -> Option<u64> {
    path.metadata()
        .and_then(|m| m.modified())
        .ok()?
        .elapsed()
        .ok()
        .map(|d| d.as_secs())
}

/// At most this many index layers before they are merged.
pub(super) const MAX_LAYERS: usize = 8;

/// Consolidate once the layers that cover only small packs cover this many packs.
pub(super) const SMALL_PACKS_TRIGGER: usize = 16;

impl Store {
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

    pub(super) fn consolidate_small_packs(&self) -> Result<()> {
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

    pub(super) fn merge_layers(&self) -> Result<()> {
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
