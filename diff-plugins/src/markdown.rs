//! Markdown: by section (headings added, removed, moved, edited), then text within.

use crate::text::{line_hunks, load_text};
use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// The Markdown plugin.
pub struct MarkdownPlugin;

/// A section: its heading path and body (the lines after the heading).
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Headings from the top, joined with " > " ("" for text before the first heading).
    pub path: String,
    /// The body text.
    pub body: String,
    /// 1-based line of the heading.
    pub line: usize,
}

/// Splits Markdown into sections by ATX headings (`#` to `######`), outside code fences.
pub fn sections(text: &str) -> Vec<Section> {
    let mut out = vec![Section {
        path: String::new(),
        body: String::new(),
        line: 1,
    }];
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut fence = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim_end();
        if t.trim_start().starts_with("```") || t.trim_start().starts_with("~~~") {
            fence = !fence;
        }
        let level = t.chars().take_while(|c| *c == '#').count();
        let is_heading =
            !fence && (1..=6).contains(&level) && (t.len() == level || t[level..].starts_with(' '));
        if is_heading {
            let title = t[level..].trim().trim_end_matches('#').trim().to_string();
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            stack.push((level, title));
            let path = stack
                .iter()
                .map(|(l, t)| format!("{} {t}", "#".repeat(*l)))
                .collect::<Vec<_>>()
                .join(" > ");
            out.push(Section {
                path,
                body: String::new(),
                line: i + 1,
            });
        } else {
            out.last_mut().expect("a section").body.push_str(line);
        }
    }
    if out[0].body.trim().is_empty() && out.len() > 1 {
        out.remove(0);
    }
    out
}

impl DiffPlugin for MarkdownPlugin {
    fn name(&self) -> &str {
        "markdown"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        matches!(probe.extension.as_str(), "md" | "markdown" | "mdown")
            .then_some(crate::BY_EXTENSION)
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let mut notes = Vec::new();
        // A side that does not exist has no sections, not one empty section before a
        // first heading (which made an added file "1 added, 1 removed").
        let mut sides = |side: Option<&Side<'_>>| -> Result<Vec<Section>, DiffError> {
            match side {
                Some(_) => Ok(sections(&load_text(side, &mut notes)?)),
                None => Ok(Vec::new()),
            }
        };
        let a = sides(old)?;
        let b = sides(new)?;
        let mut changes = Vec::new();
        let pos_a: Vec<&str> = a.iter().map(|s| s.path.as_str()).collect();
        let pos_b: Vec<&str> = b.iter().map(|s| s.path.as_str()).collect();
        // Order of the sections both versions share, to tell moves.
        let common_a: Vec<&str> = pos_a
            .iter()
            .copied()
            .filter(|p| pos_b.contains(p))
            .collect();
        let common_b: Vec<&str> = pos_b
            .iter()
            .copied()
            .filter(|p| pos_a.contains(p))
            .collect();
        let lcs = similar::capture_diff_slices(similar::Algorithm::Myers, &common_a, &common_b);
        let mut moved = std::collections::HashSet::new();
        for op in lcs {
            if let similar::DiffOp::Insert {
                new_index, new_len, ..
            } = op
            {
                for p in &common_b[new_index..new_index + new_len] {
                    moved.insert(*p);
                }
            }
        }
        let (mut edited, mut added, mut removed) = (0, 0, 0);
        for s in &b {
            let heading = if s.path.is_empty() {
                "(before the first heading)".to_string()
            } else {
                s.path.clone()
            };
            match a.iter().find(|x| x.path == s.path) {
                None => {
                    added += 1;
                    changes.push(Located::new(
                        Op::Added,
                        Location::Section {
                            heading: heading.clone(),
                        },
                        format!("section {heading} added at line {}", s.line),
                    ));
                }
                Some(old_s) => {
                    if moved.contains(s.path.as_str()) {
                        changes.push(Located::new(
                            Op::Moved,
                            Location::Section {
                                heading: heading.clone(),
                            },
                            format!("section {heading} moved (line {} → {})", old_s.line, s.line),
                        ));
                    }
                    if old_s.body != s.body {
                        edited += 1;
                        let hunks = line_hunks(&old_s.body, &s.body);
                        let mut l = Located::new(
                            Op::Changed,
                            Location::Section {
                                heading: heading.clone(),
                            },
                            format!(
                                "section {heading} edited ({})",
                                crate::counted(hunks.len(), "hunk", "hunks")
                            ),
                        );
                        l.detail = Some(serde_json::json!({"hunks": hunks}));
                        changes.push(l);
                    }
                }
            }
        }
        for s in &a {
            if !b.iter().any(|x| x.path == s.path) {
                removed += 1;
                let heading = if s.path.is_empty() {
                    "(before the first heading)".to_string()
                } else {
                    s.path.clone()
                };
                changes.push(Located::new(
                    Op::Removed,
                    Location::Section {
                        heading: heading.clone(),
                    },
                    format!("section {heading} removed"),
                ));
            }
        }
        let summary = format!(
            "{}: {added} added, {removed} removed, {} moved, {edited} edited",
            crate::counted(b.len(), "section", "sections"),
            moved.len()
        );
        Ok(FileDiff {
            plugin: "markdown".into(),
            summary,
            changes,
            notes,
            visual: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_by_heading_path() {
        let s = sections("intro\n# A\na\n## B\nb\n```\n# not a heading\n```\n# C\nc\n");
        let paths: Vec<&str> = s.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(paths, ["", "# A", "# A > ## B", "# C"]);
        assert!(s[2].body.contains("# not a heading"));
    }
}
