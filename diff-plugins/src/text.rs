//! Text and code: line diff with word-level highlights inside changed lines.

use serde_json::json;
use similar::{ChangeTag, TextDiff};

use crate::{
    looks_like_text, DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side,
};

/// Largest version this plugin reads.
pub const MAX_TEXT: u64 = 32 << 20;
/// Longest line this plugin diffs word by word; a longer one makes it give way.
pub const MAX_LINE: usize = 1 << 20;

/// Extensions always treated as text.
const TEXT_EXTS: &[&str] = &[
    "txt", "md", "markdown", "rs", "py", "js", "ts", "c", "h", "cpp", "hpp", "go", "java", "rb",
    "sh", "toml", "yaml", "yml", "json", "csv", "tsv", "html", "htm", "css", "xml", "srt", "vtt",
    "ini", "cfg", "conf", "log", "tex", "org", "rst", "sql", "tscn", "gd",
];

/// The text plugin.
pub struct TextPlugin;

fn split_lines(s: &str) -> usize {
    s.lines().count()
}

/// Decodes bytes as UTF-8, lossily if needed (returning whether it was lossy).
pub fn decode(bytes: &[u8]) -> (String, bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), false),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    }
}

/// Loads a side as text within the limits.
pub fn load_text(side: Option<&Side<'_>>, notes: &mut Vec<String>) -> Result<String, DiffError> {
    let Some(s) = side else {
        return Ok(String::new());
    };
    let bytes = s.load_within(MAX_TEXT, "text")?;
    if bytes.contains(&0) {
        return Err(DiffError::Fallback(format!(
            "{} has NUL bytes: binary content",
            s.path
        )));
    }
    if bytes.split(|b| *b == b'\n').any(|l| l.len() > MAX_LINE) {
        return Err(DiffError::Fallback(format!(
            "{} has a line longer than {MAX_LINE} bytes",
            s.path
        )));
    }
    let (text, lossy) = decode(&bytes);
    if lossy {
        notes.push(format!(
            "{} is not valid UTF-8; invalid bytes are shown as U+FFFD",
            s.path
        ));
    }
    Ok(text)
}

fn visible_ending(line: &str) -> String {
    if let Some(l) = line.strip_suffix("\r\n") {
        format!("{l}\\r\\n")
    } else {
        line.trim_end_matches('\n').to_string()
    }
}

/// The line diff of two texts as located hunks (3 lines of context), with word-level
/// changes of each changed line in `detail`.
pub fn line_hunks(old: &str, new: &str) -> Vec<Located> {
    let diff = TextDiff::configure()
        .algorithm(similar::Algorithm::Patience)
        .diff_lines(old, new);
    let mut out = Vec::new();
    for group in diff.grouped_ops(3) {
        let (first, last) = (
            group.first().expect("non-empty"),
            group.last().expect("non-empty"),
        );
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        let mut lines = Vec::new();
        let (mut added, mut removed) = (0, 0);
        let mut ending_only = true;
        for op in &group {
            for change in diff.iter_inline_changes(op) {
                let tag = match change.tag() {
                    ChangeTag::Equal => " ",
                    ChangeTag::Delete => {
                        removed += 1;
                        "-"
                    }
                    ChangeTag::Insert => {
                        added += 1;
                        "+"
                    }
                };
                let mut segments = Vec::new();
                let mut whole = String::new();
                for (emph, s) in change.iter_strings_lossy() {
                    whole.push_str(&s);
                    segments.push(json!({"text": visible_ending(&s), "emphasized": emph}));
                }
                if tag != " " && !(whole.ends_with("\r\n") || whole.ends_with('\n')) {
                    ending_only = false;
                }
                lines.push(
                    json!({"tag": tag, "text": visible_ending(&whole), "segments": segments}),
                );
            }
        }
        // A pair of lines differing only in their line ending is worth saying.
        let old_lines: Vec<&str> = old
            .split_inclusive('\n')
            .skip(old_range.start)
            .take(old_range.len())
            .collect();
        let new_lines: Vec<&str> = new
            .split_inclusive('\n')
            .skip(new_range.start)
            .take(new_range.len())
            .collect();
        let crlf_only = ending_only
            && added == removed
            && old_lines
                .iter()
                .map(|l| l.trim_end_matches(['\r', '\n']))
                .eq(new_lines.iter().map(|l| l.trim_end_matches(['\r', '\n'])));
        let op = match (added, removed) {
            (_, 0) => Op::Added,
            (0, _) => Op::Removed,
            _ => Op::Changed,
        };
        let text = if crlf_only {
            "line endings changed (CRLF/LF)".to_string()
        } else {
            format!("-{removed} +{added} lines")
        };
        out.push(Located {
            op,
            at: Location::Lines {
                old_start: old_range.start + 1,
                old_len: old_range.len(),
                new_start: new_range.start + 1,
                new_len: new_range.len(),
            },
            text,
            old: None,
            new: None,
            detail: Some(json!({"lines": lines})),
        });
    }
    out
}

impl DiffPlugin for TextPlugin {
    fn name(&self) -> &str {
        "text"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        if TEXT_EXTS.contains(&probe.extension.as_str()) || looks_like_text(probe.head) {
            Some(10)
        } else {
            None
        }
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let mut notes = Vec::new();
        let a = load_text(old, &mut notes)?;
        let b = load_text(new, &mut notes)?;
        let changes = line_hunks(&a, &b);
        let (mut added, mut removed) = (0, 0);
        for c in &changes {
            if let Location::Lines { .. } = c.at {
                for l in c
                    .detail
                    .as_ref()
                    .and_then(|d| d["lines"].as_array())
                    .into_iter()
                    .flatten()
                {
                    match l["tag"].as_str() {
                        Some("+") => added += 1,
                        Some("-") => removed += 1,
                        _ => {}
                    }
                }
            }
        }
        let summary = match (old, new) {
            (None, Some(_)) => format!("new text file, {} lines", split_lines(&b)),
            (Some(_), None) => format!("text file removed, {} lines", split_lines(&a)),
            _ if changes.is_empty() => "no textual change".into(),
            _ => format!(
                "{}: +{added} -{removed} lines",
                crate::counted(changes.len(), "hunk", "hunks")
            ),
        };
        Ok(FileDiff {
            plugin: "text".into(),
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
    fn hunks_locate_changes_and_words() {
        let a: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let b = a.replace("line 5\n", "line five!\n") + "line 21\n";
        let h = line_hunks(&a, &b);
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(
            h[0].at,
            Location::Lines {
                old_start: 2,
                old_len: 7,
                new_start: 2,
                new_len: 7
            }
        );
        let lines = h[0].detail.as_ref().unwrap()["lines"]
            .as_array()
            .unwrap()
            .clone();
        assert!(lines
            .iter()
            .any(|l| l["tag"] == "-" && l["text"] == "line 5"));
        let plus = lines.iter().find(|l| l["tag"] == "+").unwrap();
        let emph: Vec<&str> = plus["segments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["emphasized"] == true)
            .map(|s| s["text"].as_str().unwrap())
            .collect();
        assert_eq!(emph, ["five!"]);
        assert_eq!(h[1].op, Op::Added);
        assert_eq!(
            h[1].at,
            Location::Lines {
                old_start: 18,
                old_len: 3,
                new_start: 18,
                new_len: 4
            }
        );
    }

    #[test]
    fn crlf_changes_are_visible() {
        let h = line_hunks("a\nb\n", "a\r\nb\n");
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].text, "line endings changed (CRLF/LF)");
        let lines = h[0].detail.as_ref().unwrap()["lines"]
            .as_array()
            .unwrap()
            .clone();
        assert!(lines.iter().any(|l| l["text"] == "a\\r\\n"));
    }
}
