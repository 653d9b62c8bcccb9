//! lifeos-diff: semantic diffs for every file type.
//!
//! A [`DiffPlugin`] says how specifically it handles a file (by extension, media type or
//! sniffed magic bytes) and turns two versions into a [`FileDiff`]: a summary line plus
//! located changes (lines, key paths, table cells, sections, image regions, time ranges,
//! pages, byte ranges). The [`Registry`] picks the most specific plugin and falls back to
//! the next one, with a note, when a plugin cannot handle the actual content (invalid
//! JSON, a truncated image, a file too large to parse).

#![warn(missing_docs)]

pub mod binary;
pub mod external;
pub mod image_diff;
pub mod loaders;
pub mod markdown;
pub mod media;
pub mod pdf;
pub mod structured;
pub mod table;
pub mod text;
pub mod transcript;

use lifeos_store::{Id, Manifest};
use serde::{Deserialize, Serialize};

/// Version of the plugin JSON schema (`lifeos.diff-plugin.v1`), used by external plugins.
pub const PLUGIN_SCHEMA: &str = "lifeos.diff-plugin.v1";

/// Why a plugin could not diff two versions.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DiffError {
    /// The content is not what this plugin handles (invalid, truncated, too large); the
    /// registry tries the next plugin and keeps the reason as a note.
    #[error("{0}")]
    Fallback(String),
    /// Reading a version failed.
    #[error("reading {path}: {reason}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Access to one version's bytes. Implementations read from the store or the folder.
pub trait Loader: Sync {
    /// The whole content; plugins call this only after checking the size against their
    /// own limit.
    fn load(&self) -> Result<Vec<u8>, DiffError>;
    /// The first `n` bytes (for sniffing).
    fn head(&self, n: usize) -> Result<Vec<u8>, DiffError>;
    /// The chunk list, without reading content when the version is stored.
    fn chunks(&self) -> Result<Manifest, DiffError>;
    /// A seekable reader, for formats decoded as a stream (audio, video).
    fn reader(&self) -> Result<Box<dyn ReadSeek>, DiffError>;
}

/// `Read + Seek + Send + Sync`, for streamed decoding.
pub use lifeos_speech::audio::Source as ReadSeek;

/// One version of a file.
pub struct Side<'a> {
    /// Repository path.
    pub path: &'a str,
    /// Size in bytes.
    pub size: u64,
    /// Content id, when known.
    pub id: Option<Id>,
    /// Its bytes.
    pub loader: &'a dyn Loader,
}

impl Side<'_> {
    /// The content, if it is at most `limit` bytes; otherwise a fallback naming the limit.
    pub fn load_within(&self, limit: u64, what: &str) -> Result<Vec<u8>, DiffError> {
        if self.size > limit {
            return Err(DiffError::Fallback(format!(
                "{} is {} bytes, more than the {} bytes a {what} diff reads",
                self.path, self.size, limit
            )));
        }
        self.loader.load()
    }

    /// The lowercase extension of the path.
    pub fn extension(&self) -> String {
        extension(self.path)
    }
}

/// The lowercase extension of a path ("" if none).
pub fn extension(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rfind('.') {
        Some(i) if i > 0 => name[i + 1..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// What a plugin sees when asked whether it handles a file.
pub struct Probe<'a> {
    /// Repository path.
    pub path: &'a str,
    /// Lowercase extension.
    pub extension: String,
    /// The first bytes of the content (up to 4 KiB).
    pub head: &'a [u8],
    /// Size.
    pub size: u64,
}

/// Where a change is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    /// The whole file.
    File,
    /// Line ranges (1-based starts; a length of 0 means an insertion point).
    Lines {
        /// First old line.
        old_start: usize,
        /// Old line count.
        old_len: usize,
        /// First new line.
        new_start: usize,
        /// New line count.
        new_len: usize,
    },
    /// A key path in structured data (`$.server.port`, `$.items[3]`).
    KeyPath {
        /// The path.
        path: String,
    },
    /// A table row, and optionally a column.
    Row {
        /// The row's key (key column value) or 1-based position.
        row: String,
        /// The column name.
        column: Option<String>,
    },
    /// A document section, by heading path.
    Section {
        /// Headings from the top, joined with " > ".
        heading: String,
    },
    /// An image region in pixels of the new version.
    Region {
        /// Left.
        x: u32,
        /// Top.
        y: u32,
        /// Width.
        w: u32,
        /// Height.
        h: u32,
    },
    /// A time range in milliseconds of the new version.
    Time {
        /// Start.
        start_ms: u64,
        /// End.
        end_ms: u64,
    },
    /// A page (1-based).
    Page {
        /// Page number.
        page: u32,
    },
    /// Byte ranges.
    Bytes {
        /// Offset in the old version.
        old_offset: u64,
        /// Bytes in the old version.
        old_len: u64,
        /// Offset in the new version.
        new_offset: u64,
        /// Bytes in the new version.
        new_len: u64,
    },
    /// A named metadata field (EXIF tag, codec, duration).
    Field {
        /// Field name.
        name: String,
    },
}

/// What happened at an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Only in the new version.
    Added,
    /// Only in the old version.
    Removed,
    /// Different.
    Changed,
    /// Same content, different place.
    Moved,
}

/// One located change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Located {
    /// What happened.
    pub op: Op,
    /// Where.
    pub at: Location,
    /// In words.
    pub text: String,
    /// The old value, when short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// The new value, when short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
    /// Plugin-specific detail (for text: the hunk's lines with word-level changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl Located {
    /// A change without old/new values or detail.
    pub fn new(op: Op, at: Location, text: impl Into<String>) -> Located {
        Located {
            op,
            at,
            text: text.into(),
            old: None,
            new: None,
            detail: None,
        }
    }

    /// With old and new values.
    pub fn values(mut self, old: Option<String>, new: Option<String>) -> Located {
        self.old = old;
        self.new = new;
        self
    }
}

/// The diff of one file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileDiff {
    /// The plugin that produced it.
    pub plugin: String,
    /// One line.
    pub summary: String,
    /// Located changes, in file order.
    pub changes: Vec<Located>,
    /// Remarks: fallbacks taken, limits hit.
    #[serde(default)]
    pub notes: Vec<String>,
    /// A PNG highlighting what changed (images, when asked for).
    #[serde(skip)]
    pub visual: Option<Vec<u8>>,
}

/// Options for a diff.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Produce a visual (PNG) where the plugin can.
    pub visual: bool,
}

/// A diff plugin.
pub trait DiffPlugin: Send + Sync {
    /// Its name, shown in output.
    fn name(&self) -> &str;
    /// How specifically it handles this file: `None` if not at all; higher is more
    /// specific (generic text 10, a format by extension 50, by magic bytes 60,
    /// configured external plugins 100).
    fn score(&self, probe: &Probe<'_>) -> Option<u8>;
    /// Diffs two versions (either may be absent: an added or removed file).
    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        opts: &Options,
    ) -> Result<FileDiff, DiffError>;
}

/// The plugins, most specific first for each file.
pub struct Registry {
    plugins: Vec<Box<dyn DiffPlugin>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl Registry {
    /// Every built-in plugin.
    pub fn builtin() -> Registry {
        Registry {
            plugins: vec![
                Box::new(text::TextPlugin),
                Box::new(structured::StructuredPlugin),
                Box::new(table::TablePlugin),
                Box::new(markdown::MarkdownPlugin),
                Box::new(image_diff::ImagePlugin),
                Box::new(media::MediaPlugin),
                Box::new(pdf::PdfPlugin),
                Box::new(binary::BinaryPlugin),
            ],
        }
    }

    /// Adds a plugin (external plugins from the repository config).
    pub fn add(&mut self, p: Box<dyn DiffPlugin>) {
        self.plugins.push(p);
    }

    /// Diffs two versions with the most specific plugin that succeeds. A plugin that
    /// cannot handle the content gives way to the next, and its reason becomes a note.
    pub fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let side = new.or(old).expect("at least one side");
        let head = side.loader.head(4096)?;
        let probe = Probe {
            path: side.path,
            extension: side.extension(),
            head: &head,
            size: side.size,
        };
        let mut ranked: Vec<(u8, usize)> = self
            .plugins
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.score(&probe).map(|s| (s, i)))
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut notes = Vec::new();
        for (_, i) in ranked {
            let p = &self.plugins[i];
            match p.diff(old, new, opts) {
                Ok(mut d) => {
                    notes.append(&mut d.notes);
                    d.notes = notes;
                    return Ok(d);
                }
                Err(DiffError::Fallback(why)) => {
                    notes.push(format!("{}: {why}; falling back", p.name()))
                }
                Err(e) => return Err(e),
            }
        }
        // The binary plugin accepts everything, so this is reached only if it failed too.
        Err(DiffError::Fallback(notes.join("; ")))
    }
}

/// Score of a plugin recognising a file by its content's magic bytes.
pub const BY_MAGIC: u8 = 60;
/// Score of a plugin recognising a file by its extension.
pub const BY_EXTENSION: u8 = 50;

/// The score of a plugin that knows a format by magic bytes and by extension: magic
/// bytes win (a lying extension loses), an extension alone is weaker.
pub fn score_by(magic: bool, extension: bool) -> Option<u8> {
    if magic {
        Some(BY_MAGIC)
    } else if extension {
        Some(BY_EXTENSION)
    } else {
        None
    }
}

/// Whether bytes look like text: no NUL in the sample and mostly valid UTF-8.
pub fn looks_like_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        // A multi-byte character cut at the end of the sample is fine.
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 >= head.len(),
    }
}

/// Formats milliseconds as `mm:ss` (or `h:mm:ss`), with tenths when asked.
pub fn clock(ms: u64, tenths: bool) -> String {
    let s = ms / 1000;
    let (h, m, sec) = (s / 3600, (s / 60) % 60, s % 60);
    let base = if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m:02}:{sec:02}")
    };
    if tenths {
        format!("{base}.{}", (ms % 1000) / 100)
    } else {
        base
    }
}

/// `n` and the noun, singular for one (`1 hunk`, `2 hunks`): every count a person reads
/// in a diff or a report.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
