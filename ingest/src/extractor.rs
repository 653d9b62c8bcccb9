//! Extractors: text, Markdown (by heading section), HTML (visible text), subtitles
//! (.srt/.vtt cues), PDF (text per page), and images (format, dimensions, EXIF, and OCR
//! through tesseract when it is installed).

use std::io::Read;

use lifeos_vcs::object::{Anchor, Segment};

/// An extractor of searchable segments.
pub trait Extractor: Send + Sync {
    /// Its name (part of the job key).
    fn name(&self) -> &str;
    /// Its version (part of the job key: a new version re-extracts).
    fn version(&self) -> u32;
    /// Segments of `bytes`, the content of a file at `path`, or why it cannot be read.
    fn extract(&self, path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String>;
    /// Whether it reads content as a stream through [`Extractor::extract_from`] (long
    /// recordings), instead of whole; such jobs run one at a time and are not run by
    /// commits.
    fn streams(&self) -> bool {
        false
    }
    /// Segments of the content `open` gives (from its start, each time it is called),
    /// calling `progress` with seconds of media done.
    fn extract_from(
        &self,
        path: &str,
        open: &Opener<'_>,
        progress: &dyn Fn(f64),
    ) -> Result<Vec<Segment>, String> {
        let _ = progress;
        let (mut src, len) = open().map_err(|e| e.to_string())?;
        let mut bytes = Vec::with_capacity(len as usize);
        src.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        self.extract(path, &bytes)
    }
}

/// Opens a file's content from its start: the reader and the content's length.
pub type Opener<'a> =
    dyn Fn() -> std::io::Result<(Box<dyn lifeos_speech::audio::Source>, u64)> + Sync + 'a;

fn seg(kind: &str, anchor: Anchor, text: String) -> Segment {
    Segment {
        kind: kind.into(),
        anchor,
        text,
        meta: String::new(),
    }
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    if bytes.contains(&0) {
        return Err("binary content (NUL bytes)".into());
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Paragraphs of lines (split at blank lines, at most 40 lines each), with line ranges.
fn paragraphs(lines: &[String], kind: &str) -> Vec<Segment> {
    paragraphs_with_breaks(lines, &[], kind)
}

/// Like [`paragraphs`], also starting a new paragraph at every line whose `breaks` entry
/// is true (a block element in HTML).
fn paragraphs_with_breaks(lines: &[String], breaks: &[bool], kind: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let flush = |s: usize, e: usize, out: &mut Vec<Segment>| {
        let text = lines[s..e].join("\n").trim().to_string();
        if !text.is_empty() {
            out.push(seg(
                kind,
                Anchor::Lines {
                    start: s as u32 + 1,
                    end: e as u32,
                },
                text,
            ));
        }
    };
    for (i, l) in lines.iter().enumerate() {
        match start {
            Some(s)
                if l.trim().is_empty()
                    || i - s >= 40
                    || breaks.get(i).copied().unwrap_or(false) =>
            {
                flush(s, i, &mut out);
                start = (!l.trim().is_empty()).then_some(i);
            }
            None if !l.trim().is_empty() => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        flush(s, lines.len(), &mut out);
    }
    out
}

/// Plain text and code.
pub struct Text;

impl Extractor for Text {
    fn name(&self) -> &str {
        "text"
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let text = utf8(bytes)?;
        let lines: Vec<String> = text.lines().map(String::from).collect();
        Ok(paragraphs(&lines, "text"))
    }
}

/// Markdown, one segment per heading section.
pub struct Markdown;

impl Extractor for Markdown {
    fn name(&self) -> &str {
        "markdown"
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let text = utf8(bytes)?;
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut fence = false;
        let mut start = 0usize;
        let mut heading = String::new();
        let push = |s: usize, e: usize, heading: &str, out: &mut Vec<Segment>| {
            let body = lines[s..e].join("\n").trim().to_string();
            if !body.is_empty() {
                let mut sg = seg(
                    "section",
                    Anchor::Lines {
                        start: s as u32 + 1,
                        end: e as u32,
                    },
                    body,
                );
                if !heading.is_empty() {
                    sg.meta = serde_json::json!({ "heading": heading }).to_string();
                }
                out.push(sg);
            }
        };
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if t.starts_with("```") || t.starts_with("~~~") {
                fence = !fence;
            }
            let level = t.chars().take_while(|c| *c == '#').count();
            if !fence && (1..=6).contains(&level) && t[level..].starts_with(' ') && i > start {
                push(start, i, &heading, &mut out);
                start = i;
            }
            if !fence && (1..=6).contains(&level) && t[level..].starts_with(' ') {
                heading = t[level..].trim().to_string();
            }
        }
        push(start, lines.len(), &heading, &mut out);
        Ok(out)
    }
}

/// HTML: the visible text, with the source line numbers kept.
pub struct Html;

fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let end = after.find(';').filter(|e| *e <= 10);
        let (rep, used) = match end.map(|e| &after[1..e]) {
            Some("amp") => ("&".to_string(), 5),
            Some("lt") => ("<".to_string(), 4),
            Some("gt") => (">".to_string(), 4),
            Some("quot") => ("\"".to_string(), 6),
            Some("apos") | Some("#39") => ("'".to_string(), after.find(';').unwrap_or(0) + 1),
            Some("nbsp") => (" ".to_string(), 6),
            Some(n) if n.starts_with('#') => {
                let code = if let Some(h) = n.strip_prefix("#x").or_else(|| n.strip_prefix("#X")) {
                    u32::from_str_radix(h, 16).ok()
                } else {
                    n[1..].parse().ok()
                };
                match code.and_then(char::from_u32) {
                    Some(c) => (c.to_string(), n.len() + 2),
                    None => ("&".to_string(), 1),
                }
            }
            _ => ("&".to_string(), 1),
        };
        out.push_str(&rep);
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

impl Extractor for Html {
    fn name(&self) -> &str {
        "html"
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let src = utf8(bytes)?;
        // Remove tags, comments, scripts and styles, keeping every newline.
        let lower = src.to_ascii_lowercase();
        let mut visible = String::with_capacity(src.len());
        let mut i = 0;
        let b = src.as_bytes();
        while i < b.len() {
            if b[i] == b'<' {
                let skip_to = if lower[i..].starts_with("<!--") {
                    lower[i..].find("-->").map(|e| i + e + 3)
                } else if lower[i..].starts_with("<script") {
                    lower[i..].find("</script>").map(|e| i + e + 9)
                } else if lower[i..].starts_with("<style") {
                    lower[i..].find("</style>").map(|e| i + e + 8)
                } else {
                    src[i..].find('>').map(|e| i + e + 1)
                }
                .unwrap_or(b.len());
                visible.extend(src[i..skip_to].chars().filter(|c| *c == '\n'));
                visible.push(' ');
                i = skip_to;
            } else {
                let next = src[i..].find('<').map_or(b.len(), |e| i + e);
                visible.push_str(&src[i..next]);
                i = next;
            }
        }
        let lines: Vec<String> = visible
            .lines()
            .map(|l| {
                decode_entities(l)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        const BLOCKS: &[&str] = &[
            "<p",
            "<h1",
            "<h2",
            "<h3",
            "<h4",
            "<h5",
            "<h6",
            "<div",
            "<li",
            "<tr",
            "<br",
            "<section",
            "<article",
            "<blockquote",
            "<pre",
            "<table",
            "<ul",
            "<ol",
            "<dt",
            "<dd",
        ];
        let breaks: Vec<bool> = lower
            .lines()
            .map(|l| BLOCKS.iter().any(|b| l.trim_start().starts_with(b)))
            .collect();
        Ok(paragraphs_with_breaks(&lines, &breaks, "text"))
    }
}

/// Subtitles (.srt, .vtt): one segment per cue, with its time range.
pub struct Subtitles;

fn parse_time(s: &str) -> Option<u64> {
    let s = s.trim().replace(',', ".");
    let (hms, ms) = s.split_once('.')?;
    let parts: Vec<u64> = hms
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [h, m, s] => h * 3600 + m * 60 + s,
        [m, s] => m * 60 + s,
        _ => return None,
    };
    let ms: String = ms.chars().take(3).collect();
    let ms: u64 = format!("{ms:0<3}").parse().ok()?;
    Some(secs * 1000 + ms)
}

impl Extractor for Subtitles {
    fn name(&self) -> &str {
        "subtitles"
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let text = utf8(bytes)?;
        let mut out = Vec::new();
        let mut lines = text.lines().peekable();
        while let Some(l) = lines.next() {
            let Some((a, b)) = l.split_once("-->") else {
                continue;
            };
            let (Some(start), Some(end)) = (
                parse_time(a),
                parse_time(b.split_whitespace().next().unwrap_or("")),
            ) else {
                continue;
            };
            let mut cue = Vec::new();
            while let Some(t) = lines.peek() {
                if t.trim().is_empty() {
                    break;
                }
                cue.push(lines.next().expect("peeked").trim().to_string());
            }
            let text = cue.join(" ");
            // Strip simple markup such as <i> and {\an8}.
            let clean: String = {
                let mut s = String::new();
                let mut depth = 0;
                for c in text.chars() {
                    match c {
                        '<' | '{' => depth += 1,
                        '>' | '}' if depth > 0 => depth -= 1,
                        _ if depth == 0 => s.push(c),
                        _ => {}
                    }
                }
                s
            };
            if !clean.trim().is_empty() {
                out.push(seg(
                    "cue",
                    Anchor::Time {
                        start_ms: start,
                        end_ms: end,
                    },
                    clean.trim().to_string(),
                ));
            }
        }
        if out.is_empty() && !text.trim().is_empty() {
            return Err("no subtitle cues found".into());
        }
        Ok(out)
    }
}

/// PDF: one segment per page.
pub struct Pdf;

impl Extractor for Pdf {
    fn name(&self) -> &str {
        "pdf"
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let doc =
            lopdf::Document::load_mem(bytes).map_err(|e| format!("not a readable PDF: {e}"))?;
        let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
        Ok(pages
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let t = doc.extract_text(&[*p]).unwrap_or_default();
                let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
                (!t.is_empty()).then(|| seg("page", Anchor::Page(i as u32 + 1), t))
            })
            .collect())
    }
}

/// Images: format, dimensions and EXIF as metadata; OCR text with regions when the
/// `tesseract` command is installed.
pub struct Image {
    /// Whether to run OCR.
    pub ocr: bool,
}

/// Whether the `tesseract` command is available.
pub fn tesseract_available() -> bool {
    std::process::Command::new("tesseract")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// OCR lines with their bounding boxes, from tesseract's TSV output.
fn ocr(bytes: &[u8]) -> Result<Vec<Segment>, String> {
    let dir = std::env::temp_dir().join(format!(
        "lifeos-ocr-{}-{}",
        std::process::id(),
        lifeos_store::fsutil::random_hex(4)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let input = dir.join("image");
    std::fs::write(&input, bytes).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("tesseract")
        .arg(&input)
        .arg("stdout")
        .arg("tsv")
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("running tesseract: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tesseract failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // level page_num block_num par_num line_num word_num left top width height conf text
    // (block, paragraph, line) -> the line's words and its box (x0, y0, x1, y1).
    type OcrLine = (String, u32, u32, u32, u32);
    let mut lines: std::collections::BTreeMap<(u32, u32, u32), OcrLine> = Default::default();
    for row in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
        let f: Vec<&str> = row.split('\t').collect();
        if f.len() < 12 || f[0] != "5" || f[11].trim().is_empty() {
            continue;
        }
        let n = |i: usize| f[i].parse::<u32>().unwrap_or(0);
        let key = (n(2), n(3), n(4));
        let (x, y, w, h) = (n(6), n(7), n(8), n(9));
        let e = lines
            .entry(key)
            .or_insert((String::new(), x, y, x + w, y + h));
        if !e.0.is_empty() {
            e.0.push(' ');
        }
        e.0.push_str(f[11].trim());
        e.1 = e.1.min(x);
        e.2 = e.2.min(y);
        e.3 = e.3.max(x + w);
        e.4 = e.4.max(y + h);
    }
    Ok(lines
        .into_values()
        .map(|(t, x0, y0, x1, y1)| {
            seg(
                "ocr",
                Anchor::Region {
                    x: x0,
                    y: y0,
                    w: x1 - x0,
                    h: y1 - y0,
                },
                t,
            )
        })
        .collect())
}

impl Extractor for Image {
    fn name(&self) -> &str {
        if self.ocr {
            "image-ocr"
        } else {
            "image"
        }
    }
    fn version(&self) -> u32 {
        1
    }
    fn extract(&self, _path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let format =
            image::guess_format(bytes).map_err(|e| format!("not a readable image: {e}"))?;
        let reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), format);
        let (w, h) = reader
            .into_dimensions()
            .map_err(|e| format!("not a readable image: {e}"))?;
        let exif = exif_fields(bytes);
        let mut text = format!("image {format:?} {w}x{h}");
        let mut meta = serde_json::Map::new();
        meta.insert("format".into(), format!("{format:?}").into());
        meta.insert("width".into(), w.into());
        meta.insert("height".into(), h.into());
        for (k, v) in &exif {
            text.push_str(&format!("; {k}: {v}"));
            meta.insert(k.clone(), v.clone().into());
        }
        let mut out = vec![Segment {
            kind: "metadata".into(),
            anchor: Anchor::File,
            text,
            meta: serde_json::Value::Object(meta).to_string(),
        }];
        if self.ocr {
            out.extend(ocr(bytes)?);
        }
        Ok(out)
    }
}

fn exif_fields(bytes: &[u8]) -> Vec<(String, String)> {
    use exif::Tag;
    lifeos_diff::image_diff::exif_values(
        bytes,
        &[
            ("date taken", Tag::DateTimeOriginal),
            ("camera make", Tag::Make),
            ("camera model", Tag::Model),
            ("GPS latitude", Tag::GPSLatitude),
            ("GPS longitude", Tag::GPSLongitude),
        ],
    )
}

/// No NUL bytes and valid UTF-8 (a character cut at the end of the sample is fine).
pub(crate) fn looks_like_text(head: &[u8]) -> bool {
    !head.contains(&0)
        && match std::str::from_utf8(head) {
            Ok(_) => true,
            Err(e) => e.error_len().is_none(),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_sections_have_line_ranges() {
        let s = Markdown
            .extract(
                "a.md",
                b"# Plan\nintro\n\n## Budget\nThe quarterly budget\nis 12,000.\n## Team\nAnn\n",
            )
            .unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].anchor, Anchor::Lines { start: 4, end: 6 });
        assert!(s[1].text.contains("quarterly budget"));
        assert!(s[1].meta.contains("Budget"));
    }

    #[test]
    fn html_keeps_visible_text_and_lines() {
        let s = Html.extract("a.html", b"<html><head><style>p{}</style><script>var x=1;</script></head>\n<body>\n<p>Launch &amp; plan</p>\n</body></html>").unwrap();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].text, "Launch & plan");
        assert_eq!(s[0].anchor, Anchor::Lines { start: 3, end: 3 });
    }

    #[test]
    fn subtitles_cues_have_times() {
        let srt = b"1\n00:00:07,900 --> 00:00:12,100\nThe quarterly <i>budget</i>\nmeeting moved\n\n2\n00:01:00,000 --> 00:01:02,500\nBye\n";
        let s = Subtitles.extract("a.srt", srt).unwrap();
        assert_eq!(
            s[0].anchor,
            Anchor::Time {
                start_ms: 7900,
                end_ms: 12100
            }
        );
        assert_eq!(s[0].text, "The quarterly budget meeting moved");
        let vtt = b"WEBVTT\n\n00:07.900 --> 00:12.100 align:start\nHello there\n";
        assert_eq!(
            Subtitles.extract("a.vtt", vtt).unwrap()[0].anchor,
            Anchor::Time {
                start_ms: 7900,
                end_ms: 12100
            }
        );
    }
}
