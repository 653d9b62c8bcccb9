//! Transcript diffs: what was said differently between two versions of a recording, with
//! the time range of each change. The transcripts come from the knowledge layer (speech
//! extracts); this only compares them, segment by segment.

use similar::{capture_diff_slices, Algorithm, DiffOp};

use crate::{clock, Located, Location, Op};

/// A transcript segment: start and end in milliseconds, and its words.
pub type Spoken = (u64, u64, String);

/// Segment text compared loosely: case, punctuation and spacing do not count.
fn norm(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn span(segs: &[Spoken]) -> (u64, u64) {
    (
        segs.first().map_or(0, |s| s.0),
        segs.last().map_or(0, |s| s.1),
    )
}

fn words(segs: &[Spoken]) -> String {
    segs.iter()
        .map(|s| s.2.trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A time range as diffs show it: `MM:SS.t–MM:SS.t`.
pub fn range(start_ms: u64, end_ms: u64) -> String {
    format!("{}–{}", clock(start_ms, true), clock(end_ms, true))
}

/// The changed time ranges between two transcripts, in order. Added and changed speech is
/// placed in the new version's time; removed speech in the old version's.
pub fn diff(old: &[Spoken], new: &[Spoken]) -> Vec<Located> {
    let (a, b): (Vec<String>, Vec<String>) = (
        old.iter().map(|s| norm(&s.2)).collect(),
        new.iter().map(|s| norm(&s.2)).collect(),
    );
    let mut out = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &a, &b) {
        let (kind, o, n) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index, old_len, ..
            } => (Op::Removed, &old[old_index..old_index + old_len], &new[..0]),
            DiffOp::Insert {
                new_index, new_len, ..
            } => (Op::Added, &old[..0], &new[new_index..new_index + new_len]),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (
                Op::Changed,
                &old[old_index..old_index + old_len],
                &new[new_index..new_index + new_len],
            ),
        };
        let (start_ms, end_ms) = if kind == Op::Removed {
            span(o)
        } else {
            span(n)
        };
        let range = range(start_ms, end_ms);
        let text = match kind {
            Op::Added => format!("{range} said: \"{}\"", words(n)),
            Op::Removed => format!("{range} (old) no longer said: \"{}\"", words(o)),
            _ => format!("{range} \"{}\" → \"{}\"", words(o), words(n)),
        };
        out.push(
            Located::new(kind, Location::Time { start_ms, end_ms }, text).values(
                (!o.is_empty()).then(|| words(o)),
                (!n.is_empty()).then(|| words(n)),
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: u64, b: u64, t: &str) -> Spoken {
        (a, b, t.to_string())
    }

    #[test]
    fn a_changed_sentence_names_its_time_range() {
        let old = [
            s(0, 2000, "Hello everyone."),
            s(3000, 5000, "The meeting is on Friday."),
            s(6000, 8000, "Bye."),
        ];
        let new = [
            s(0, 2000, "hello everyone"),
            s(3000, 5200, "The meeting is on Monday."),
            s(6000, 8000, "Bye."),
            s(9000, 9500, "One more thing."),
        ];
        let d = diff(&old, &new);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].op, Op::Changed);
        assert_eq!(
            d[0].at,
            Location::Time {
                start_ms: 3000,
                end_ms: 5200
            }
        );
        assert!(d[0].text.starts_with("00:03.0–00:05.2"), "{}", d[0].text);
        assert_eq!(d[1].op, Op::Added);
        assert!(diff(&old, &old).is_empty());
    }
}
