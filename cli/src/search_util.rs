//! How search hits print, in `search` and `entity show`.

use std::io::Write;

use lifeos_ingest::search::Hit;
use serde_json::json;

use crate::output::Style;

/// A hit as `lifeos.search.v1` gives it.
pub(crate) fn hit_json(h: &Hit) -> serde_json::Value {
    json!({
        "path": h.path, "commit": h.commit.to_hex(), "file": h.file.to_hex(),
        "anchor": h.anchor, "cite": h.cite, "snippet": h.snippet,
        "kind": h.kind, "type": h.file_type, "media": h.media, "score": if h.score.is_finite() && h.score < f64::MAX { json!(h.score) } else { json!(null) },
    })
}

/// Prints hits one per line: where (path, or a video and its subtitles), the commit, the
/// citation, and the snippet (matched words highlighted in colour).
pub(crate) fn print_hits(out: &mut dyn Write, hits: &[Hit], style: Style) {
    for h in hits {
        let snippet = h.snippet.replace('\n', " ");
        let snippet = if style.color {
            snippet.replace('[', "\x1b[1;33m").replace(']', "\x1b[0m")
        } else {
            snippet
        };
        let place = match &h.media {
            Some(m) => format!("{} (subtitles {})", style.name(m), h.path),
            None => style.name(&h.path),
        };
        let _ = writeln!(
            out,
            "{place}  @{}  {}  \"{}\"",
            style.id(&h.commit.short(7)),
            h.cite,
            snippet
        );
    }
}
