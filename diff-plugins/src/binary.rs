//! Any other file: byte ranges changed, inserted and removed, computed from the chunk
//! lists alone, without reading the bytes of stored versions.

use lifeos_store::{Id, Manifest};

use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// The binary plugin; it accepts every file.
pub struct BinaryPlugin;

fn human(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// Byte-range changes between two chunk lists, and the share of the new version's bytes
/// in chunks the old one has.
pub fn manifest_changes(a: &Manifest, b: &Manifest) -> (Vec<Located>, f64) {
    let ia: Vec<Id> = a.chunks.iter().map(|c| c.id).collect();
    let ib: Vec<Id> = b.chunks.iter().map(|c| c.id).collect();
    let offsets = |m: &Manifest| -> Vec<u64> {
        let mut v = Vec::with_capacity(m.chunks.len() + 1);
        let mut o = 0;
        v.push(0);
        for c in &m.chunks {
            o += u64::from(c.len);
            v.push(o);
        }
        v
    };
    let (oa, ob) = (offsets(a), offsets(b));
    let mut out = Vec::new();
    let mut shared = 0u64;
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, &ia, &ib) {
        let (old_i, old_n, new_i, new_n) = match op {
            similar::DiffOp::Equal { new_index, len, .. } => {
                shared += ob[new_index + len] - ob[new_index];
                continue;
            }
            similar::DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index, 0, new_index, new_len),
            similar::DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index, old_len, new_index, 0),
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (old_index, old_len, new_index, new_len),
        };
        let (old_offset, old_len) = (oa[old_i], oa[old_i + old_n] - oa[old_i]);
        let (new_offset, new_len) = (ob[new_i], ob[new_i + new_n] - ob[new_i]);
        let at = Location::Bytes {
            old_offset,
            old_len,
            new_offset,
            new_len,
        };
        let (op, text) = match (old_len, new_len) {
            (0, n) => (
                Op::Added,
                format!("{} inserted at offset {new_offset}", human(n)),
            ),
            (n, 0) => (
                Op::Removed,
                format!("{} removed at offset {old_offset}", human(n)),
            ),
            (o, n) if o == n => (
                Op::Changed,
                format!("{} changed at offset {new_offset}", human(n)),
            ),
            (o, n) => (
                Op::Changed,
                format!(
                    "{} at offset {old_offset} replaced by {} ({:+} bytes)",
                    human(o),
                    human(n),
                    n as i64 - o as i64
                ),
            ),
        };
        out.push(Located::new(op, at, text));
    }
    let total = b.size().max(1);
    (out, shared as f64 / total as f64)
}

impl DiffPlugin for BinaryPlugin {
    fn name(&self) -> &str {
        "binary"
    }

    fn score(&self, _probe: &Probe<'_>) -> Option<u8> {
        Some(1)
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let a = old
            .map(|s| s.loader.chunks())
            .transpose()?
            .unwrap_or_default();
        let b = new
            .map(|s| s.loader.chunks())
            .transpose()?
            .unwrap_or_default();
        let (changes, share) = manifest_changes(&a, &b);
        let summary = match (old, new) {
            (None, Some(n)) => format!("new file, {}", human(n.size)),
            (Some(o), None) => format!("file removed, {}", human(o.size)),
            _ => format!(
                "{} → {}: {} differ{}; {:.1}% of the new bytes are in unchanged chunks",
                human(a.size()),
                human(b.size()),
                crate::counted(changes.len(), "range", "ranges"),
                if changes.len() == 1 { "s" } else { "" },
                100.0 * share
            ),
        };
        Ok(FileDiff {
            plugin: "binary".into(),
            summary,
            changes,
            notes: Vec::new(),
            visual: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::ChunkRef;

    #[test]
    fn an_insert_is_one_range() {
        let c = |s: &str, len| ChunkRef {
            id: Id::hash(s.as_bytes()),
            len,
        };
        let a = Manifest {
            chunks: vec![c("a", 100), c("b", 100), c("c", 100)],
        };
        let b = Manifest {
            chunks: vec![c("a", 100), c("b2", 101), c("c", 100)],
        };
        let (ch, share) = manifest_changes(&a, &b);
        assert_eq!(ch.len(), 1);
        assert_eq!(
            ch[0].at,
            Location::Bytes {
                old_offset: 100,
                old_len: 100,
                new_offset: 100,
                new_len: 101
            }
        );
        assert!((share - 200.0 / 301.0).abs() < 1e-9);
    }
}
