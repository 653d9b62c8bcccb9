//! What ingest extracted, read back: every extract of a file version with the model and
//! the operation that made it (`lifeos extract show`), the extract state of each file
//! (`lifeos extract list`), and a transcript as subtitles (SubRip or WebVTT).

use std::fmt::Write as _;

use lifeos_catalog::Catalog;
use lifeos_store::{Id, Kind};
use lifeos_vcs::object::{Anchor, Extract, Segment};
use lifeos_vcs::Repo;

use crate::registry::choose;
use crate::settings::Settings;
use crate::speech::{is_transcript, transcript_model};
use crate::Result;
use lifeos_catalog::CatalogExt;

/// One extract of a file content, read from its object.
#[derive(Debug, Clone)]
pub struct FileExtract {
    /// The extractor's name (`markdown`, `speech`, `speech:<model>`, ...).
    pub extractor: String,
    /// Its version.
    pub version: u32,
    /// The extract object.
    pub object: Id,
    /// For a transcript, the model that made it.
    pub model: Option<String>,
    /// The operation that first recorded it, and its end time in ms.
    pub recorded: Option<(Id, i64)>,
    /// The segments, in file order, or why extraction failed.
    pub outcome: std::result::Result<Vec<Segment>, String>,
}

/// The model a transcript's segments name (`{"model": ...}` in their metadata).
fn model_of(segments: &[Segment]) -> Option<String> {
    segments
        .iter()
        .find_map(|s| crate::speech::model_in_meta(&s.meta))
}

/// Every extract indexed for the file content `file`, by extractor name; an extract object
/// that is missing or does not decode is an error naming it.
pub fn of_file(repo: &Repo, catalog: &Catalog, file: &Id) -> Result<Vec<FileExtract>> {
    let mut out = Vec::new();
    for row in catalog.extracts_of(file)? {
        let raw = repo.store().read_object(&row.object, Kind::Extract)?;
        let x = Extract::decode(&raw).map_err(|source| lifeos_vcs::VcsError::Decode {
            kind: "extract",
            id: row.object,
            source,
        })?;
        let model = match (&x.outcome, transcript_model(&x.extractor)) {
            (_, Some(m)) => Some(m.to_string()),
            (Ok(segs), None) if is_transcript(&x.extractor) => model_of(segs),
            _ => None,
        };
        out.push(FileExtract {
            extractor: x.extractor,
            version: x.version,
            object: row.object,
            model,
            recorded: row.recorded,
            outcome: x.outcome,
        });
    }
    Ok(out)
}

/// The transcript to use among a file's extracts: the one made by `model` if given (an
/// error lists the models there are), else the default model's (`speech`), else the
/// first other one.
pub fn transcript<'a>(
    extracts: &'a [FileExtract],
    model: Option<&str>,
) -> std::result::Result<&'a FileExtract, String> {
    let transcripts: Vec<&FileExtract> = extracts
        .iter()
        .filter(|x| is_transcript(&x.extractor))
        .collect();
    let found = match model {
        Some(m) => transcripts
            .iter()
            .find(|x| x.model.as_deref() == Some(m) && x.outcome.is_ok())
            .or_else(|| transcripts.iter().find(|x| x.model.as_deref() == Some(m))),
        None => transcripts
            .iter()
            .find(|x| x.extractor == crate::speech::SPEECH.0)
            .or(transcripts.first()),
    };
    found.copied().ok_or_else(|| {
        let models: Vec<&str> = transcripts
            .iter()
            .filter_map(|x| x.model.as_deref())
            .collect();
        match model {
            Some(m) if !models.is_empty() => format!(
                "it has no transcript by {m}; transcripts by: {}",
                models.join(", ")
            ),
            _ => "it has no transcript".to_string(),
        }
    })
}

/// How extraction stands for one file content and one extractor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Extracted.
    Done,
    /// Extraction failed (why).
    Failed(String),
    /// An extractor reads it, and has not run yet (`lifeos ingest` runs it).
    Pending,
    /// No extractor reads files of its kind (still found by name).
    NoExtractor,
    /// Excluded by `[ingest] exclude`.
    Excluded,
}

impl State {
    /// Its name in `lifeos.extract_list.v1`.
    pub fn name(&self) -> &'static str {
        match self {
            State::Done => "done",
            State::Failed(_) => "failed",
            State::Pending => "pending",
            State::NoExtractor => "no_extractor",
            State::Excluded => "excluded",
        }
    }
}

/// The extract state of one file.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its path.
    pub path: String,
    /// Its content.
    pub file: Id,
    /// Per extractor (name and version): its state; for a file no extractor reads (or
    /// excluded), one entry without an extractor.
    pub extractors: Vec<(Option<(String, u32)>, State)>,
}

/// The extract state of each file: what was extracted or failed, and what `lifeos ingest`
/// would run for it now (pending), under the repository's settings.
pub fn list(repo: &Repo, files: &[(Id, String, u64)]) -> Result<Vec<Listed>> {
    let settings = Settings::load(repo)?;
    let catalog = repo.catalog()?;
    let store = repo.store_arc();
    let mut out = Vec::new();
    for (id, path, _) in files {
        let mut extractors: Vec<(Option<(String, u32)>, State)> = catalog
            .extracts_of(id)?
            .into_iter()
            .map(|row| {
                let state = row.failed.map_or(State::Done, State::Failed);
                (Some((row.extractor, row.version)), state)
            })
            .collect();
        let chosen = if settings.excluded(path) {
            None
        } else {
            let head = || crate::files::head_bytes(&store, id);
            choose(path, &head, &|| settings.ocr(), &|| settings.speech())
        };
        match chosen {
            Some(ex) => {
                let key = (ex.name().to_string(), ex.version());
                if !extractors.iter().any(|(k, _)| k.as_ref() == Some(&key)) {
                    extractors.push((Some(key), State::Pending));
                }
            }
            None if extractors.is_empty() => {
                let state = if settings.excluded(path) {
                    State::Excluded
                } else {
                    State::NoExtractor
                };
                extractors.push((None, state));
            }
            None => {}
        }
        out.push(Listed {
            path: path.clone(),
            file: *id,
            extractors,
        });
    }
    Ok(out)
}

/// A subtitle format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubtitleFormat {
    /// SubRip (`.srt`).
    Srt,
    /// WebVTT (`.vtt`).
    Vtt,
}

/// Characters per subtitle line, as broadcasters and players keep them.
pub const LINE_CHARS: usize = 42;
/// Lines per cue.
pub const CUE_LINES: usize = 2;

/// Words wrapped into lines of at most [`LINE_CHARS`] characters (a longer word alone).
fn wrap(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= LINE_CHARS => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn timestamp(ms: u64, sep: char) -> String {
    format!(
        "{:02}:{:02}:{:02}{sep}{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// The cues of a transcript: each spoken segment's text wrapped into lines of at most
/// [`LINE_CHARS`] characters, at most [`CUE_LINES`] to a cue; a longer segment becomes
/// consecutive cues sharing its time range in proportion to their characters. Times are
/// the segments' own, to the millisecond.
pub fn cues(segments: &[Segment]) -> Vec<(u64, u64, Vec<String>)> {
    let mut out = Vec::new();
    for s in segments.iter().filter(|s| s.kind == "speech") {
        let Anchor::Time { start_ms, end_ms } = s.anchor else {
            continue;
        };
        let lines = wrap(&s.text);
        let groups: Vec<&[String]> = lines.chunks(CUE_LINES).collect();
        let total: usize = lines.iter().map(|l| l.chars().count()).sum();
        let span = end_ms.saturating_sub(start_ms);
        let mut done = 0usize;
        for (i, g) in groups.iter().enumerate() {
            let from = start_ms + span * done as u64 / total.max(1) as u64;
            done += g.iter().map(|l| l.chars().count()).sum::<usize>();
            let to = if i + 1 == groups.len() {
                end_ms
            } else {
                start_ms + span * done as u64 / total.max(1) as u64
            };
            out.push((from, to, g.to_vec()));
        }
    }
    out
}

/// A transcript as SubRip or WebVTT text. WebVTT text escapes `&`, `<` and `>`; in both,
/// `-->` inside text becomes `->` so no text line reads as a timing line.
pub fn subtitles(segments: &[Segment], format: SubtitleFormat) -> String {
    let mut out = String::new();
    if format == SubtitleFormat::Vtt {
        out.push_str("WEBVTT\n\n");
    }
    for (n, (from, to, lines)) in cues(segments).into_iter().enumerate() {
        let sep = match format {
            SubtitleFormat::Srt => {
                let _ = writeln!(out, "{}", n + 1);
                ','
            }
            SubtitleFormat::Vtt => '.',
        };
        let _ = writeln!(out, "{} --> {}", timestamp(from, sep), timestamp(to, sep));
        for l in lines {
            let l = l.replace("-->", "->");
            let l = match format {
                SubtitleFormat::Srt => l,
                SubtitleFormat::Vtt => l
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;"),
            };
            let _ = writeln!(out, "{l}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spoken(start_ms: u64, end_ms: u64, text: &str) -> Segment {
        Segment {
            kind: "speech".into(),
            anchor: Anchor::Time { start_ms, end_ms },
            text: text.into(),
            meta: String::new(),
        }
    }

    #[test]
    fn srt_and_vtt_keep_times_to_the_millisecond() {
        let segs = [
            spoken(7_900, 12_100, "The budget meeting moved to Friday."),
            spoken(3_723_004, 3_725_999, "a < b & c --> d"),
        ];
        assert_eq!(
            subtitles(&segs, SubtitleFormat::Srt),
            "1\n00:00:07,900 --> 00:00:12,100\nThe budget meeting moved to Friday.\n\n\
             2\n01:02:03,004 --> 01:02:05,999\na < b & c -> d\n\n"
        );
        assert_eq!(
            subtitles(&segs, SubtitleFormat::Vtt),
            "WEBVTT\n\n00:00:07.900 --> 00:00:12.100\nThe budget meeting moved to Friday.\n\n\
             01:02:03.004 --> 01:02:05.999\na &lt; b &amp; c -&gt; d\n\n"
        );
    }

    #[test]
    fn long_segments_wrap_at_42_characters_and_split_into_cues_of_two_lines() {
        let text = "one two three four five six seven eight nine ten eleven twelve \
                    thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";
        let c = cues(&[spoken(1_000, 11_000, text)]);
        assert!(c.len() >= 2, "{c:?}");
        for (from, to, lines) in &c {
            assert!(from < to);
            assert!((1..=CUE_LINES).contains(&lines.len()));
            assert!(lines.iter().all(|l| l.chars().count() <= LINE_CHARS));
        }
        assert_eq!(c[0].0, 1_000);
        assert_eq!(c.last().unwrap().1, 11_000);
        assert!(c.windows(2).all(|w| w[0].1 == w[1].0), "{c:?}");
        let words: Vec<String> = c.iter().flat_map(|x| x.2.clone()).collect();
        assert_eq!(
            words.join(" "),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }

    #[test]
    fn only_spoken_segments_become_cues() {
        let meta = Segment {
            kind: "metadata".into(),
            anchor: Anchor::File,
            text: "audio pcm 16000 Hz".into(),
            meta: String::new(),
        };
        assert!(cues(&[meta]).is_empty());
    }
}
