//! Store-level checking: every pack, every entry's hash, every index row.

use std::collections::HashSet;
use std::fs::File;
use std::path::PathBuf;

use crate::error::{IoContext, Result};
use crate::fsutil::list_dir;
use crate::id::Id;
use crate::index::Layer;
use crate::kind::Kind;
use crate::pack::{self, decode_entry};
use crate::store::{Store, INDEX_DIR};

/// One problem found by a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// A stable short code: `corrupt-object`, `damaged-pack`, `damaged-index`,
    /// `index-mismatch`, `missing-pack`, `missing-object`, `bad-object`.
    pub code: &'static str,
    /// The object concerned, if one.
    pub object: Option<Id>,
    /// The pack concerned, if one.
    pub pack: Option<String>,
    /// The file concerned, if one.
    pub file: Option<PathBuf>,
    /// What is wrong, in words.
    pub detail: String,
}

/// The result of checking the packs and index.
#[derive(Debug, Default)]
pub struct PackCheck {
    /// Packs read.
    pub packs: u64,
    /// Entries verified.
    pub entries: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Everything wrong.
    pub problems: Vec<Problem>,
}

impl Store {
    /// Reads every pack entry, decompresses it and checks it against its id; checks every
    /// pack footer and index layer. Runs on every core; memory is bounded by one entry per
    /// thread. `progress` receives bytes as they are verified.
    pub fn check_packs(&self, progress: &(dyn Fn(u64) + Sync)) -> Result<PackCheck> {
        let names = self.pack_names()?;
        let mut report = PackCheck::default();
        let mut members: HashSet<(&str, Id, u32, Kind)> = HashSet::new();
        for (name, (entries, bytes, problems, held)) in
            names.iter().zip(crate::par::map(&names, |name| {
                self.check_pack(name, progress)
            }))
        {
            report.packs += 1;
            report.entries += entries;
            report.bytes += bytes;
            report.problems.extend(problems);
            members.extend(
                held.into_iter()
                    .map(|(id, off, kind)| (name.as_str(), id, off, kind)),
            );
        }
        let present: HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
        for path in list_dir(&self.dir().join(INDEX_DIR))? {
            if path.extension().is_none_or(|e| e != "idx") {
                continue;
            }
            let layer = match Layer::open(&path).and_then(|l| l.verify_checksum().map(|()| l)) {
                Ok(l) => l,
                Err(e) => {
                    report.problems.push(Problem {
                        code: "damaged-index",
                        object: None,
                        pack: None,
                        file: Some(path.clone()),
                        detail: format!("{e}; run `lifeos gc` to rebuild the index from the packs"),
                    });
                    continue;
                }
            };
            for p in &layer.packs {
                if !present.contains(&**p) {
                    report.problems.push(Problem {
                        code: "missing-pack",
                        object: None,
                        pack: Some(p.to_string()),
                        file: Some(layer.path.clone()),
                        detail: format!(
                            "index layer {} lists pack {p}, which does not exist; `lifeos gc` rebuilds the index from the packs present (it refuses if an object is missing)",
                            layer.name
                        ),
                    });
                }
            }
            for row in layer.rows()? {
                let (id, loc) = match row {
                    Ok(r) => r,
                    Err(e) => {
                        report.problems.push(Problem {
                            code: "damaged-index",
                            object: None,
                            pack: None,
                            file: Some(layer.path.clone()),
                            detail: format!(
                                "{e}; run `lifeos gc` to rebuild the index from the packs"
                            ),
                        });
                        break;
                    }
                };
                if !present.contains(&*loc.pack) {
                    continue;
                }
                let path = self.pack_file_path(&loc.pack);
                let ok = File::open(&path)
                    .io("opening", &path)
                    .and_then(|f| pack::read_header(&f, &path, u64::from(loc.offset)))
                    .map(|h| match h.kind {
                        Kind::Block if loc.kind != Kind::Block => {
                            members.contains(&(&*loc.pack, id, loc.offset, loc.kind))
                        }
                        _ => h.id == id && h.kind == loc.kind,
                    });
                if !matches!(ok, Ok(true)) {
                    report.problems.push(Problem {
                        code: "index-mismatch",
                        object: Some(id),
                        pack: Some(loc.pack.to_string()),
                        file: Some(layer.path.clone()),
                        detail: format!(
                            "index row for {} does not match offset {} of the pack",
                            id.short(16),
                            loc.offset
                        ),
                    });
                }
            }
        }
        Ok(report)
    }

    /// Checks one pack; returns its entry count, stored bytes, problems, and the members of
    /// its blocks (id, offset, kind) for the index check.
    #[allow(clippy::type_complexity)]
    fn check_pack(
        &self,
        name: &str,
        progress: &(dyn Fn(u64) + Sync),
    ) -> (u64, u64, Vec<Problem>, Vec<(Id, u32, Kind)>) {
        let path = self.pack_file_path(name);
        let mut problems = Vec::new();
        let damaged = |detail: String| Problem {
            code: "damaged-pack",
            object: None,
            pack: Some(name.to_string()),
            file: Some(path.clone()),
            detail,
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => return (0, 0, vec![damaged(format!("cannot open: {e}"))], Vec::new()),
        };
        let footer = pack::read_footer(&file, &path);
        if let Err(e) = &footer {
            problems.push(damaged(e.to_string()));
        }
        let (headers, stopped) = match pack::scan(&file, &path) {
            Ok(x) => x,
            Err(e) => return (0, 0, vec![damaged(e.to_string())], Vec::new()),
        };
        if let Some(why) = stopped {
            problems.push(damaged(format!("{why}; entries after it cannot be read")));
        }
        let mut entries = 0;
        let mut bytes = 0;
        let mut held = Vec::new();
        for (h, off) in &headers {
            let mut stored = vec![0u8; h.stored_len as usize];
            let res = pack::read_exact_at(
                &file,
                &path,
                &mut stored,
                off + pack::ENTRY_HEADER_LEN as u64,
            )
            .map_err(|e| e.to_string())
            .and_then(|()| {
                decode_entry(h, stored, &mut |b| {
                    self.read_base(b, pack::MAX_DELTA_DEPTH - 1)
                        .map_err(|e| e.to_string())
                })
            })
            .and_then(|raw| {
                if h.kind == Kind::Block {
                    let block = crate::block::Block::decode(raw)?;
                    held.extend(block.members().map(|(id, kind, _)| (id, *off as u32, kind)));
                }
                Ok(())
            });
            if let Err(reason) = res {
                problems.push(Problem {
                    code: "corrupt-object",
                    object: Some(h.id),
                    pack: Some(name.to_string()),
                    file: Some(path.clone()),
                    detail: format!("{} {} at offset {off}: {reason}", h.kind.name(), h.id),
                });
            }
            entries += 1;
            bytes += u64::from(h.stored_len);
            progress(u64::from(h.stored_len));
        }
        if let Ok(rows) = footer {
            let scanned: HashSet<(Id, u64)> = headers.iter().map(|(h, o)| (h.id, *o)).collect();
            for r in rows {
                if !scanned.contains(&(r.id, u64::from(r.offset))) {
                    problems.push(Problem {
                        code: "damaged-pack",
                        object: Some(r.id),
                        pack: Some(name.to_string()),
                        file: Some(path.clone()),
                        detail: format!(
                            "footer lists {} at offset {} but no such entry was found",
                            r.id, r.offset
                        ),
                    });
                }
            }
        }
        (entries, bytes, problems, held)
    }
}
