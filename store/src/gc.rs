//! Garbage collection: drops unreachable objects and rebuilds the index.

use std::collections::HashSet;
use std::fs::File;

use crate::error::{IoContext, Result};
use crate::fsutil::{list_dir, sync_dir};
use crate::id::Id;
use crate::kind::Kind;
use crate::live::Live;
use crate::pack::{self, FooterRow, PackInfo};
use crate::store::{Store, INDEX_DIR, PACKS_DIR};

/// Proof that the caller holds the repository lock exclusively.
pub struct ExclusiveLock {
    _file: File,
}

/// What `gc` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    /// Packs before.
    pub packs_before: u64,
    /// Packs after.
    pub packs_after: u64,
    /// Pack bytes before.
    pub bytes_before: u64,
    /// Pack bytes after.
    pub bytes_after: u64,
    /// Unreachable entries removed.
    pub objects_removed: u64,
    /// Unreachable entries left in packs below the rewrite threshold.
    pub objects_kept_unreachable: u64,
    /// Packs whose live entries were copied to new packs.
    pub packs_rewritten: u64,
    /// Packs removed because nothing in them was reachable.
    pub packs_deleted: u64,
    /// Packs that could not be read and were left alone.
    pub packs_damaged: Vec<String>,
    /// Temporary files of dead writers removed.
    pub tmp_removed: u64,
}

impl GcReport {
    /// Takes the counts of the packs as they were from `scan`.
    fn scanned(&mut self, scan: GcReport) {
        self.packs_before = scan.packs_before;
        self.bytes_before = scan.bytes_before;
        self.packs_damaged = scan.packs_damaged;
    }
}

/// The base of the entry at `off`, if it is a delta (and its header reads).
fn delta_base_at(file: &File, path: &std::path::Path, off: u64) -> Option<Id> {
    let h = pack::read_header(file, path, off).ok()?;
    if h.codec != pack::Codec::Delta {
        return None;
    }
    let mut base = [0u8; crate::id::ID_LEN];
    pack::read_exact_at(file, path, &mut base, off + pack::ENTRY_HEADER_LEN as u64).ok()?;
    pack::delta_base(&base)
}

struct PackPlan {
    name: String,
    /// What the index lists for the pack (with the members of its blocks).
    rows: Vec<FooterRow>,
    /// Its entries in offset order: their offset, and the live and dead ids they hold (a
    /// block's members; or the entry itself).
    entries: Vec<EntryPlan>,
    /// Where in `rows` the live ids of each entry are, entry after entry.
    live_rows: Vec<u32>,
    size: u64,
    dead_bytes: u64,
}

/// What gc does with a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Nothing in it is live: it goes.
    Delete,
    /// Its dead share is above the threshold: its live entries move to a new pack.
    Rewrite,
    /// It stays as it is.
    Keep,
}

/// A pack as gc reads it.
enum Found {
    /// A pack whose footer and blocks read.
    Plan(PackPlan),
    /// A pack that does not read whole, with what can be read of it.
    Damaged(PackInfo),
}

impl PackPlan {
    /// Its entries nothing live needs.
    fn dead(&self) -> u64 {
        self.entries.iter().map(|e| e.dead).sum()
    }

    /// What gc does with this pack, given the configured garbage threshold.
    fn fate(&self, threshold: f64) -> Fate {
        let dead = self.dead();
        if self.live_rows.is_empty() {
            Fate::Delete
        } else if dead > 0 && (self.dead_bytes as f64) > threshold * self.size as f64 {
            Fate::Rewrite
        } else {
            Fate::Keep
        }
    }
}

impl PackPlan {
    /// The live ids `e` holds.
    fn live_of(&self, e: &EntryPlan) -> impl Iterator<Item = &FooterRow> {
        self.live_rows[e.live.start as usize..e.live.end as usize]
            .iter()
            .map(|&i| &self.rows[i as usize])
    }
}

/// One entry of a pack, as `gc` sees it (24 bytes: a pack of small chunks holds
/// hundreds of thousands).
struct EntryPlan {
    offset: u32,
    /// Its live ids: a range of [`PackPlan::live_rows`].
    live: std::ops::Range<u32>,
    dead: u64,
}

/// Groups a pack's index rows by entry (a block's members share its offset): the
/// entries, and where in `rows` the live ids of each are.
fn entry_plans(rows: &[FooterRow], live: &dyn Fn(&Id) -> bool) -> (Vec<EntryPlan>, Vec<u32>) {
    let mut by_offset: Vec<u32> = (0..rows.len() as u32).collect();
    by_offset.sort_unstable_by_key(|&i| {
        let r = &rows[i as usize];
        (r.offset, r.kind != Kind::Block)
    });
    let mut out: Vec<EntryPlan> = Vec::new();
    let mut live_rows = Vec::new();
    for i in by_offset {
        let r = &rows[i as usize];
        let plan = match out.last_mut() {
            Some(p) if p.offset == r.offset => p,
            _ => {
                let at = live_rows.len() as u32;
                out.push(EntryPlan {
                    offset: r.offset,
                    live: at..at,
                    dead: 0,
                });
                if r.kind == Kind::Block {
                    continue;
                }
                out.last_mut().expect("pushed")
            }
        };
        if live(&r.id) {
            live_rows.push(i);
            plan.live.end += 1;
        } else {
            plan.dead += 1;
        }
    }
    (out, live_rows)
}

impl Store {
    /// The entries live deltas are built on, down their chains, that `live` does not
    /// hold (found from each live entry's header, and the base id at the start of a
    /// delta's stored bytes).
    fn delta_bases(&self, live: &dyn Live) -> Result<HashSet<Id>> {
        let mut frontier = Vec::new();
        for name in self.pack_names()? {
            let path = self.pack_file_path(&name);
            let file = File::open(&path).io("opening", &path)?;
            let offsets: Vec<u64> = match pack::read_footer(&file, &path) {
                Ok(rows) => rows
                    .iter()
                    .filter(|r| live.contains(&r.id))
                    .map(|r| u64::from(r.offset))
                    .collect(),
                // A damaged pack is kept whole; what can be read of it still counts.
                Err(_) => pack::scan(&file, &path)?
                    .0
                    .iter()
                    .filter(|(h, _)| live.contains(&h.id))
                    .map(|(_, off)| *off)
                    .collect(),
            };
            for off in offsets {
                frontier.extend(delta_base_at(&file, &path, off));
            }
        }
        let mut bases = HashSet::new();
        while let Some(b) = frontier.pop() {
            if live.contains(&b) || !bases.insert(b) {
                continue;
            }
            // Every copy: the one gc keeps may be a delta where another is whole.
            for loc in self.locate_all(&b)? {
                let path = self.pack_file_path(&loc.pack);
                if let Ok(file) = File::open(&path) {
                    frontier.extend(delta_base_at(&file, &path, u64::from(loc.offset)));
                }
            }
        }
        Ok(bases)
    }

    /// Takes the repository lock exclusively: waits until no transaction is running and
    /// keeps new ones out until the lock is dropped.
    pub fn gc_lock(&self) -> Result<ExclusiveLock> {
        Ok(ExclusiveLock {
            _file: self.lock_exclusive()?,
        })
    }

    /// Removes every entry not in `live`. Packs holding nothing live are deleted; packs
    /// whose unreachable share exceeds the configured threshold are rewritten; then the
    /// index is rebuilt as one layer from the pack footers. New data is durable before
    /// anything old is removed, so a killed `gc` leaves a readable repository (at worst
    /// with duplicates that the next `gc` removes). Packs are planned and carried out one
    /// at a time, and the new layer's rows are sorted in bounded runs, so memory grows with
    /// the number of entries only through `live` itself, the ids copied out of packs it
    /// rewrites or deletes, the bases of live deltas and the rows of damaged packs.
    pub fn gc(
        &self,
        _lock: &ExclusiveLock,
        live: &dyn Live,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<GcReport> {
        let mut report = GcReport {
            tmp_removed: self.clean_tmp()?,
            ..GcReport::default()
        };
        let threshold = self.config().packs.gc_garbage_threshold;
        let mut tx = self.transaction_locked()?;
        let mut dropped = Vec::new();
        let mut damaged = Vec::new();
        let mut copied = HashSet::new();
        let scan = self.each_pack(live, progress, |found| {
            let plan = match found {
                Found::Plan(plan) => plan,
                Found::Damaged(info) => {
                    damaged.push(info);
                    return Ok(());
                }
            };
            let dead = plan.dead();
            let fate = plan.fate(threshold);
            if fate == Fate::Keep {
                report.objects_kept_unreachable += dead;
                return tx.sink.add_installed(&plan.name, &plan.rows);
            }
            report.objects_removed += dead;
            if fate == Fate::Delete {
                report.packs_deleted += 1;
            } else {
                report.packs_rewritten += 1;
            }
            let path = self.pack_file_path(&plan.name);
            let file = File::open(&path).io("opening", &path)?;
            for e in &plan.entries {
                if e.live.is_empty() || plan.live_of(e).all(|r| copied.contains(&r.id)) {
                    continue;
                }
                if e.dead == 0 {
                    copied.extend(tx.sink.copy(&file, &path, e.offset)?);
                    continue;
                }
                // A block with dead members: its live ones go to a new block.
                let h = pack::read_header(&file, &path, u64::from(e.offset))?;
                let block = pack::read_block(&file, &path, u64::from(e.offset), &h)?;
                for r in plan.live_of(e) {
                    if let Some((_, raw)) = block.get(&r.id) {
                        if copied.insert(r.id) {
                            tx.group(r.kind, r.id, raw)?;
                        }
                    }
                }
            }
            dropped.push(plan.name);
            Ok(())
        })?;
        report.scanned(scan);
        let (finished, mut sorter) = tx.sink_finish()?;
        drop(tx);
        // One layer over every kept and new pack (and the damaged ones, kept whole).
        self.install_packs(finished)?;
        for info in &damaged {
            sorter.add_pack(&info.name, &info.entries)?;
        }
        let old_layers: Vec<_> = list_dir(&self.dir().join(INDEX_DIR))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        let new_layer = if sorter.is_empty() {
            None
        } else {
            Some(sorter.write(&self.dir().join(INDEX_DIR))?)
        };
        for old in old_layers {
            if old.file_stem().and_then(|s| s.to_str()) != new_layer.as_deref() {
                std::fs::remove_file(&old).io("removing", &old)?;
            }
        }
        sync_dir(&self.dir().join(INDEX_DIR))?;
        for name in dropped {
            let path = self.pack_file_path(&name);
            std::fs::remove_file(&path).io("removing", &path)?;
        }
        sync_dir(&self.dir().join(PACKS_DIR))?;
        self.reload_index()?;
        for name in self.pack_names()? {
            report.packs_after += 1;
            report.bytes_after += self
                .pack_file_path(&name)
                .metadata()
                .map(|m| m.len())
                .unwrap_or(0);
        }
        Ok(report)
    }

    /// What [`Store::gc`] would do with `live`, changing nothing: the packs it would
    /// delete or rewrite, the entries it would remove, and the bytes left after
    /// (`bytes_after` counts a rewritten pack as its size less its dead bytes; `tmp_removed`
    /// is 0).
    pub fn gc_dry_run(
        &self,
        _lock: &ExclusiveLock,
        live: &dyn Live,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<GcReport> {
        let mut report = GcReport::default();
        let threshold = self.config().packs.gc_garbage_threshold;
        let mut freed = 0;
        let scan = self.each_pack(live, progress, |found| {
            let Found::Plan(plan) = found else {
                return Ok(());
            };
            let dead = plan.dead();
            match plan.fate(threshold) {
                Fate::Delete => {
                    report.packs_deleted += 1;
                    report.objects_removed += dead;
                    freed += plan.size;
                }
                Fate::Rewrite => {
                    report.packs_rewritten += 1;
                    report.objects_removed += dead;
                    freed += plan.dead_bytes;
                }
                Fate::Keep => report.objects_kept_unreachable += dead,
            }
            Ok(())
        })?;
        report.scanned(scan);
        report.packs_after = report.packs_before - report.packs_deleted;
        report.bytes_after = report.bytes_before - freed;
        Ok(report)
    }

    /// Reads the packs' footers one at a time and gives `visit` the plan for each: the
    /// entries `live` (and the bases of live deltas) keep, and the dead bytes. A damaged
    /// pack is given apart, with what can be read of it, to be kept whole. Returns the
    /// packs and bytes before, and the damaged packs' names.
    fn each_pack(
        &self,
        live: &dyn Live,
        progress: &(dyn Fn(u64) + Sync),
        mut visit: impl FnMut(Found) -> Result<()>,
    ) -> Result<GcReport> {
        let mut report = GcReport::default();
        // A live delta keeps its base, whether or not anything else reaches it.
        let bases = self.delta_bases(live)?;
        let live = &|id: &Id| live.contains(id) || bases.contains(id);
        for name in self.pack_names()? {
            let path = self.pack_file_path(&name);
            let file = File::open(&path).io("opening", &path)?;
            let size = file.metadata().io("reading", &path)?.len();
            report.packs_before += 1;
            report.bytes_before += size;
            // A pack with a block that cannot be read is kept whole, as a damaged one.
            let footer = pack::read_footer(&file, &path).and_then(|f| {
                let (rows, damaged) = pack::read_rows(&file, &path)?;
                match damaged.into_iter().next() {
                    Some(e) => Err(e),
                    None => Ok((rows, f.len())),
                }
            });
            let (rows, footer_len) = match footer {
                Ok(r) => r,
                Err(_) => {
                    // Keep a damaged pack as it is, and keep what can still be read from
                    // it indexed (entries before the damage, the members of readable
                    // blocks), so gc loses nothing.
                    let (found, _) = pack::scan(&file, &path)?;
                    let mut rows = Vec::new();
                    for (h, off) in &found {
                        rows.push(FooterRow {
                            id: h.id,
                            offset: *off as u32,
                            kind: h.kind,
                        });
                        if h.kind == Kind::Block {
                            rows.extend(pack::block_rows(&file, &path, *off).unwrap_or_default());
                        }
                    }
                    report.packs_damaged.push(name.clone());
                    visit(Found::Damaged(PackInfo {
                        name,
                        entries: rows,
                        size,
                    }))?;
                    continue;
                }
            };
            let (entries, live_rows) = entry_plans(&rows, live);
            let entries_end =
                size - pack::FOOTER_TRAILER_LEN - (footer_len * pack::FOOTER_ROW_LEN) as u64;
            let mut dead_bytes = 0;
            for (k, e) in entries.iter().enumerate() {
                let end = entries
                    .get(k + 1)
                    .map_or(entries_end, |n| u64::from(n.offset));
                let span = end - u64::from(e.offset);
                // A block's bytes count as dead in proportion to its dead members.
                let held = e.live.len() as u64 + e.dead;
                dead_bytes += span * e.dead / held.max(1);
            }
            progress(1);
            visit(Found::Plan(PackPlan {
                name,
                rows,
                entries,
                live_rows,
                size,
                dead_bytes,
            }))?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, StoreConfig};

    #[test]
    fn gc_keeps_what_is_live_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut tx = store.transaction().unwrap();
        let live: Vec<Id> = (0..50u32)
            .map(|i| tx.write_object(Kind::Tree, &i.to_le_bytes()).unwrap())
            .collect();
        drop(tx.commit().unwrap());
        let mut tx = store.transaction().unwrap();
        let dead: Vec<Id> = (1000..1050u32)
            .map(|i| tx.write_object(Kind::Tree, &i.to_le_bytes()).unwrap())
            .collect();
        drop(tx.commit().unwrap());
        let lock = store.gc_lock().unwrap();
        let keep: HashSet<Id> = live.iter().copied().collect();
        let report = store.gc(&lock, &keep, &|_| {}).unwrap();
        drop(lock);
        assert_eq!(report.objects_removed, 50);
        assert_eq!(report.packs_deleted, 1);
        let fresh = Store::open(dir.path()).unwrap();
        for id in &live {
            assert_eq!(Id::hash(&fresh.read_object(id, Kind::Tree).unwrap()), *id);
        }
        for id in &dead {
            assert!(!fresh.contains(id).unwrap());
        }
        // A second gc finds nothing more to do.
        let lock = fresh.gc_lock().unwrap();
        assert_eq!(fresh.gc(&lock, &keep, &|_| {}).unwrap().objects_removed, 0);
    }

    /// Versions of one object stored as a chain of deltas: keeping only the newest keeps
    /// every base down the chain, in this pack or another, and reads stay exact.
    #[test]
    fn gc_keeps_the_bases_of_live_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let versions: Vec<Vec<u8>> = (0..4u8)
            .map(|v| {
                let mut b = (0..4000u32)
                    .flat_map(|i| i.to_le_bytes())
                    .collect::<Vec<u8>>();
                b[v as usize * 100] = v;
                b
            })
            .collect();
        let mut ids = Vec::new();
        for (i, raw) in versions.iter().enumerate() {
            // Each version in a pack of its own.
            let mut tx = store.transaction().unwrap();
            let base = ids.last().map(|b| (b, versions[i - 1].as_slice()));
            let how = tx
                .write_delta(Id::hash(raw), Kind::Tree, raw, base)
                .unwrap();
            let expected = if i == 0 {
                crate::Written::Whole
            } else {
                crate::Written::Delta
            };
            assert_eq!(how, expected);
            ids.push(Id::hash(raw));
            drop(tx.commit().unwrap());
        }
        // A dead pack of garbage, so gc has something to remove.
        let mut tx = store.transaction().unwrap();
        let dead = tx.write_object(Kind::Tree, b"garbage").unwrap();
        drop(tx.commit().unwrap());
        let keep: HashSet<Id> = [ids[3]].into_iter().collect();
        let lock = store.gc_lock().unwrap();
        let report = store.gc(&lock, &keep, &|_| {}).unwrap();
        drop(lock);
        assert_eq!(report.objects_removed, 1);
        let fresh = Store::open(dir.path()).unwrap();
        assert!(!fresh.contains(&dead).unwrap());
        for (id, raw) in ids.iter().zip(&versions) {
            assert_eq!(&fresh.read_object(id, Kind::Tree).unwrap(), raw);
        }
        assert!(fresh.check_packs(&|_| {}).unwrap().problems.is_empty());
    }

    #[test]
    fn gc_rewrites_a_mostly_dead_pack_keeping_its_live_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut tx = store.transaction().unwrap();
        let ids: Vec<Id> = (0..100u32)
            .map(|i| {
                tx.write_object(Kind::Tree, &[i.to_le_bytes(); 64].concat())
                    .unwrap()
            })
            .collect();
        drop(tx.commit().unwrap());
        let keep: HashSet<Id> = ids[..10].iter().copied().collect();
        let lock = store.gc_lock().unwrap();
        let report = store.gc(&lock, &keep, &|_| {}).unwrap();
        assert_eq!((report.packs_rewritten, report.objects_removed), (1, 90));
        assert!(report.bytes_after < report.bytes_before / 4);
        for id in &ids[..10] {
            assert!(store.read_object(id, Kind::Tree).is_ok());
        }
    }

    /// A block with dead members: gc moves the live ones to a new block and drops the
    /// rest; a second gc finds nothing to do.
    #[test]
    fn gc_keeps_the_live_members_of_a_block_and_drops_the_dead() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let raws: Vec<Vec<u8>> = (0..100u32)
            .map(|i| [b"tree ".repeat(30), i.to_le_bytes().to_vec()].concat())
            .collect();
        let mut tx = store.transaction().unwrap();
        for r in &raws {
            tx.write_grouped(Kind::Tree, r).unwrap();
        }
        drop(tx.commit().unwrap());
        let ids: Vec<Id> = raws.iter().map(|r| Id::hash(r)).collect();
        let keep: HashSet<Id> = ids.iter().step_by(2).copied().collect();
        let lock = store.gc_lock().unwrap();
        let report = store.gc(&lock, &keep, &|_| {}).unwrap();
        drop(lock);
        assert_eq!((report.objects_removed, report.packs_rewritten), (50, 1));
        let fresh = Store::open(dir.path()).unwrap();
        for (id, raw) in ids.iter().zip(&raws) {
            if keep.contains(id) {
                assert_eq!(&fresh.read_object(id, Kind::Tree).unwrap(), raw);
            } else {
                assert!(!fresh.contains(id).unwrap());
            }
        }
        assert_eq!(fresh.stats().unwrap().objects, 50);
        assert!(fresh.check_packs(&|_| {}).unwrap().problems.is_empty());
        let lock = fresh.gc_lock().unwrap();
        assert_eq!(fresh.gc(&lock, &keep, &|_| {}).unwrap().objects_removed, 0);
    }
}
