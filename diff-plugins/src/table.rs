//! Tables (CSV, TSV): rows added, removed and changed, keyed by a unique column when there
//! is one, with changed cells named by column.

use std::collections::{HashMap, HashSet};

use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// Largest version parsed.
pub const MAX_TABLE: u64 = 64 << 20;

/// The table plugin.
pub struct TablePlugin;

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn parse(side: Option<&Side<'_>>, delim: u8) -> Result<Table, DiffError> {
    let Some(s) = side else {
        return Ok(Table {
            header: Vec::new(),
            rows: Vec::new(),
        });
    };
    let bytes = s.load_within(MAX_TABLE, "table")?;
    let mut r = csv::ReaderBuilder::new()
        .delimiter(delim)
        .has_headers(true)
        .flexible(true)
        .from_reader(&bytes[..]);
    let header = r
        .headers()
        .map_err(|e| DiffError::Fallback(format!("{} is not a valid table: {e}", s.path)))?
        .iter()
        .map(String::from)
        .collect();
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec =
            rec.map_err(|e| DiffError::Fallback(format!("{} is not a valid table: {e}", s.path)))?;
        rows.push(rec.iter().map(String::from).collect());
    }
    Ok(Table { header, rows })
}

/// The first column whose values are non-empty and unique in both tables, and shared by
/// more than half of the rows of the smaller one (so that it identifies rows across
/// versions rather than being their content).
fn key_column(a: &Table, b: &Table) -> Option<usize> {
    let n = a.header.len().min(b.header.len());
    (0..n).find(|&c| {
        let keys = |t: &Table| -> Option<HashSet<String>> {
            let mut seen = HashSet::new();
            t.rows
                .iter()
                .all(|r| {
                    r.get(c)
                        .is_some_and(|v| !v.is_empty() && seen.insert(v.clone()))
                })
                .then_some(seen)
        };
        match (a.header[c] == b.header[c], keys(a), keys(b)) {
            (true, Some(ka), Some(kb)) => 2 * ka.intersection(&kb).count() > ka.len().min(kb.len()),
            _ => false,
        }
    })
}

fn cell_changes(
    key: &str,
    header: &[String],
    ra: &[String],
    rb: &[String],
    out: &mut Vec<Located>,
) -> bool {
    let mut changed = false;
    for c in 0..ra.len().max(rb.len()) {
        let (va, vb) = (
            ra.get(c).map(String::as_str).unwrap_or(""),
            rb.get(c).map(String::as_str).unwrap_or(""),
        );
        if va != vb {
            changed = true;
            let col = header
                .get(c)
                .cloned()
                .unwrap_or_else(|| format!("column {}", c + 1));
            out.push(
                Located::new(
                    Op::Changed,
                    Location::Row {
                        row: key.into(),
                        column: Some(col.clone()),
                    },
                    format!("row {key}: {col} {va:?} → {vb:?}"),
                )
                .values(Some(va.into()), Some(vb.into())),
            );
        }
    }
    changed
}

impl DiffPlugin for TablePlugin {
    fn name(&self) -> &str {
        "table"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        matches!(probe.extension.as_str(), "csv" | "tsv").then_some(crate::BY_EXTENSION)
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let delim = if new.or(old).expect("a side").extension() == "tsv" {
            b'\t'
        } else {
            b','
        };
        let a = parse(old, delim)?;
        let b = parse(new, delim)?;
        let mut changes = Vec::new();
        let mut notes = Vec::new();
        if a.header != b.header && old.is_some() && new.is_some() {
            let (ha, hb): (HashSet<&String>, HashSet<&String>) =
                (a.header.iter().collect(), b.header.iter().collect());
            // In header order, so the output is the same every time.
            for c in b.header.iter().filter(|c| !ha.contains(c)) {
                changes.push(Located::new(
                    Op::Added,
                    Location::Row {
                        row: "header".into(),
                        column: Some((*c).clone()),
                    },
                    format!("column {c} added"),
                ));
            }
            for c in a.header.iter().filter(|c| !hb.contains(c)) {
                changes.push(Located::new(
                    Op::Removed,
                    Location::Row {
                        row: "header".into(),
                        column: Some((*c).clone()),
                    },
                    format!("column {c} removed"),
                ));
            }
        }
        let header = &b.header;
        let (mut added, mut removed, mut changed) = (0, 0, 0);
        match key_column(&a, &b) {
            Some(k) => {
                notes.push(format!(
                    "rows matched by the unique column {:?}",
                    b.header[k]
                ));
                // Cells are compared by column name, so a reordered header is not a change.
                let reorder = |t: &Table, r: &[String]| -> Vec<String> {
                    header
                        .iter()
                        .map(|h| {
                            t.header
                                .iter()
                                .position(|x| x == h)
                                .and_then(|i| r.get(i).cloned())
                                .unwrap_or_default()
                        })
                        .collect()
                };
                let by_key: HashMap<&str, &Vec<String>> =
                    a.rows.iter().map(|r| (r[k].as_str(), r)).collect();
                let keys_b: HashSet<&str> = b.rows.iter().map(|r| r[k].as_str()).collect();
                for ra in &a.rows {
                    if !keys_b.contains(ra[k].as_str()) {
                        removed += 1;
                        changes.push(
                            Located::new(
                                Op::Removed,
                                Location::Row {
                                    row: ra[k].clone(),
                                    column: None,
                                },
                                format!("row {} removed", ra[k]),
                            )
                            .values(Some(ra.join(",")), None),
                        );
                    }
                }
                for rb in &b.rows {
                    match by_key.get(rb[k].as_str()) {
                        None => {
                            added += 1;
                            changes.push(
                                Located::new(
                                    Op::Added,
                                    Location::Row {
                                        row: rb[k].clone(),
                                        column: None,
                                    },
                                    format!("row {} added", rb[k]),
                                )
                                .values(None, Some(rb.join(","))),
                            );
                        }
                        Some(ra) => {
                            if cell_changes(&rb[k], header, &reorder(&a, ra), rb, &mut changes) {
                                changed += 1;
                            }
                        }
                    }
                }
            }
            None => {
                notes.push("no unique key column: rows matched by position".into());
                for i in 0..a.rows.len().max(b.rows.len()) {
                    let key = (i + 1).to_string();
                    match (a.rows.get(i), b.rows.get(i)) {
                        (Some(ra), Some(rb)) => {
                            if cell_changes(&key, header, ra, rb, &mut changes) {
                                changed += 1;
                            }
                        }
                        (Some(ra), None) => {
                            removed += 1;
                            changes.push(
                                Located::new(
                                    Op::Removed,
                                    Location::Row {
                                        row: key.clone(),
                                        column: None,
                                    },
                                    format!("row {key} removed"),
                                )
                                .values(Some(ra.join(",")), None),
                            );
                        }
                        (None, Some(rb)) => {
                            added += 1;
                            changes.push(
                                Located::new(
                                    Op::Added,
                                    Location::Row {
                                        row: key.clone(),
                                        column: None,
                                    },
                                    format!("row {key} added"),
                                )
                                .values(None, Some(rb.join(","))),
                            );
                        }
                        (None, None) => {}
                    }
                }
            }
        }
        let summary = format!(
            "{} rows → {} rows: {added} added, {removed} removed, {changed} changed",
            a.rows.len(),
            b.rows.len()
        );
        Ok(FileDiff {
            plugin: "table".into(),
            summary,
            changes,
            notes,
            visual: None,
        })
    }
}
