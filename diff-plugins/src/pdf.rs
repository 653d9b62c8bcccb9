//! PDF: pages added and removed, and the text of each page compared.

use crate::text::line_hunks;
use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// Largest PDF read.
pub const MAX_PDF: u64 = 128 << 20;

/// The PDF plugin.
pub struct PdfPlugin;

/// The text of every page, in order.
pub fn page_texts(side: &Side<'_>) -> Result<Vec<String>, DiffError> {
    let bytes = side.load_within(MAX_PDF, "PDF")?;
    let doc = lopdf::Document::load_mem(&bytes)
        .map_err(|e| DiffError::Fallback(format!("{} is not a readable PDF: {e}", side.path)))?;
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    if pages.is_empty() {
        return Err(DiffError::Fallback(format!("{} has no pages", side.path)));
    }
    Ok(pages
        .iter()
        .map(|p| doc.extract_text(&[*p]).unwrap_or_default())
        .collect())
}

impl DiffPlugin for PdfPlugin {
    fn name(&self) -> &str {
        "pdf"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        crate::score_by(probe.head.starts_with(b"%PDF-"), probe.extension == "pdf")
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let a = old.map(page_texts).transpose()?.unwrap_or_default();
        let b = new.map(page_texts).transpose()?.unwrap_or_default();
        let norm = |v: &[String]| {
            v.iter()
                .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
        };
        let (na, nb) = (norm(&a), norm(&b));
        let mut changes = Vec::new();
        let (mut added, mut removed, mut edited) = (0, 0, 0);
        for op in similar::capture_diff_slices(similar::Algorithm::Myers, &na, &nb) {
            match op {
                similar::DiffOp::Equal { .. } => {}
                similar::DiffOp::Insert {
                    new_index, new_len, ..
                } => {
                    for p in new_index..new_index + new_len {
                        added += 1;
                        changes.push(Located::new(
                            Op::Added,
                            Location::Page { page: p as u32 + 1 },
                            format!("page {} added", p + 1),
                        ));
                    }
                }
                similar::DiffOp::Delete {
                    old_index,
                    old_len,
                    new_index,
                } => {
                    for p in old_index..old_index + old_len {
                        removed += 1;
                        changes.push(Located::new(
                            Op::Removed,
                            Location::Page {
                                page: new_index as u32 + 1,
                            },
                            format!("old page {} removed", p + 1),
                        ));
                    }
                }
                similar::DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => {
                    for k in 0..old_len.max(new_len) {
                        match (
                            a.get(old_index + k).filter(|_| k < old_len),
                            b.get(new_index + k).filter(|_| k < new_len),
                        ) {
                            (Some(ta), Some(tb)) => {
                                edited += 1;
                                let page = (new_index + k) as u32 + 1;
                                let hunks = line_hunks(ta, tb);
                                let mut l = Located::new(
                                    Op::Changed,
                                    Location::Page { page },
                                    format!(
                                        "page {page}: text changed ({})",
                                        crate::counted(hunks.len(), "hunk", "hunks")
                                    ),
                                );
                                l.detail = Some(serde_json::json!({"hunks": hunks}));
                                changes.push(l);
                            }
                            (None, Some(_)) => {
                                added += 1;
                                let page = (new_index + k) as u32 + 1;
                                changes.push(Located::new(
                                    Op::Added,
                                    Location::Page { page },
                                    format!("page {page} added"),
                                ));
                            }
                            (Some(_), None) => {
                                removed += 1;
                                changes.push(Located::new(
                                    Op::Removed,
                                    Location::Page {
                                        page: (new_index + new_len) as u32 + 1,
                                    },
                                    format!("old page {} removed", old_index + k + 1),
                                ));
                            }
                            (None, None) => {}
                        }
                    }
                }
            }
        }
        let summary = format!(
            "{} pages → {} pages: {added} added, {removed} removed, {edited} with changed text",
            a.len(),
            b.len()
        );
        Ok(FileDiff {
            plugin: "pdf".into(),
            summary,
            changes,
            notes: Vec::new(),
            visual: None,
        })
    }
}
