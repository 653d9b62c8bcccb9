//! Extracts: what an extractor found in one file content (FORMAT 7.6).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

/// Extract format version.
pub const EXTRACT_VERSION: u8 = 1;

/// Where a segment of extracted text is in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// The whole file (metadata, names).
    File,
    /// Lines `start..=end` (1-based).
    Lines {
        /// First line.
        start: u32,
        /// Last line.
        end: u32,
    },
    /// A page (1-based).
    Page(u32),
    /// A time range in milliseconds.
    Time {
        /// Start.
        start_ms: u64,
        /// End.
        end_ms: u64,
    },
    /// An image region in pixels.
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
}

/// One searchable piece of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// What it is: `text`, `section`, `cue`, `page`, `ocr`, `metadata`.
    pub kind: String,
    /// Where it is.
    pub anchor: Anchor,
    /// Its text (secrets already redacted).
    pub text: String,
    /// Extra metadata as a JSON object text ("" if none).
    pub meta: String,
}

/// What one extractor found in one file: the unit of ingest, keyed by (file, extractor,
/// version) and stored as an object so that a rebuilt catalog never extracts again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extract {
    /// The file's content id.
    pub file: Id,
    /// Extractor name.
    pub extractor: String,
    /// Extractor version.
    pub version: u32,
    /// The segments, or why extraction failed.
    pub outcome: Result<Vec<Segment>, String>,
}

impl Extract {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::Extract as u8, EXTRACT_VERSION);
        w.id(&self.file)
            .bytes(self.extractor.as_bytes())
            .uint(u64::from(self.version));
        match &self.outcome {
            Ok(segs) => {
                w.u8(1).uint(segs.len() as u64);
                for s in segs {
                    w.bytes(s.kind.as_bytes());
                    match s.anchor {
                        Anchor::File => w.u8(0),
                        Anchor::Lines { start, end } => {
                            w.u8(1).uint(u64::from(start)).uint(u64::from(end))
                        }
                        Anchor::Page(p) => w.u8(2).uint(u64::from(p)),
                        Anchor::Time { start_ms, end_ms } => w.u8(3).uint(start_ms).uint(end_ms),
                        Anchor::Region { x, y, w: rw, h } => w
                            .u8(4)
                            .uint(u64::from(x))
                            .uint(u64::from(y))
                            .uint(u64::from(rw))
                            .uint(u64::from(h)),
                    };
                    w.bytes(s.text.as_bytes()).bytes(s.meta.as_bytes());
                }
            }
            Err(reason) => {
                w.u8(0).bytes(reason.as_bytes());
            }
        }
        w.finish()
    }

    /// Decodes an extract.
    pub fn decode(bytes: &[u8]) -> Result<Extract, DecodeError> {
        const W: &str = "extract";
        let mut r = Reader::new(bytes);
        r.header(W, Kind::Extract as u8, EXTRACT_VERSION)?;
        let file = r.id(W)?;
        let extractor = r.str(W)?.to_string();
        let small =
            |v: u64| u32::try_from(v).map_err(|_| DecodeError::new(W, "value out of range"));
        let version = small(r.uint(W)?)?;
        let outcome = match r.u8(W)? {
            1 => {
                let n = r.count(W)?;
                let mut segs = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = r.str(W)?.to_string();
                    let anchor = match r.u8(W)? {
                        0 => Anchor::File,
                        1 => Anchor::Lines {
                            start: small(r.uint(W)?)?,
                            end: small(r.uint(W)?)?,
                        },
                        2 => Anchor::Page(small(r.uint(W)?)?),
                        3 => Anchor::Time {
                            start_ms: r.uint(W)?,
                            end_ms: r.uint(W)?,
                        },
                        4 => Anchor::Region {
                            x: small(r.uint(W)?)?,
                            y: small(r.uint(W)?)?,
                            w: small(r.uint(W)?)?,
                            h: small(r.uint(W)?)?,
                        },
                        t => return Err(DecodeError::new(W, format!("unknown anchor {t}"))),
                    };
                    let text = r.str(W)?.to_string();
                    let meta = r.str(W)?.to_string();
                    segs.push(Segment {
                        kind,
                        anchor,
                        text,
                        meta,
                    });
                }
                Ok(segs)
            }
            0 => Err(r.str(W)?.to_string()),
            x => return Err(DecodeError::new(W, format!("bad outcome flag {x}"))),
        };
        r.finish(W)?;
        Ok(Extract {
            file,
            extractor,
            version,
            outcome,
        })
    }
}
