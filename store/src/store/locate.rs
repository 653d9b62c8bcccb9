//! Where an object is: the index layers (reloaded when another process changed them, and
//! read past when one is found damaged), the loose packs' footers, and recovery when the
//! index names a pack that is gone.

use super::*;

impl Store {
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
    pub(super) fn distrust_damaged_layers(&self) -> Result<bool> {
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

    pub(super) fn locate_once(&self, id: &Id) -> Result<Option<Location>> {
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

    pub(super) fn locate_all_once(&self, id: &Id) -> Result<Vec<Location>> {
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
    pub(super) fn try_locations<T>(
        &self,
        id: &Id,
        at: impl Fn(&Location) -> Result<T>,
    ) -> Result<Option<T>> {
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
    pub(super) fn with_index_recovery<T>(
        &self,
        id: &Id,
        find: impl Fn() -> Result<Option<T>>,
    ) -> Result<T> {
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
}
