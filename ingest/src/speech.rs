//! Recordings and videos: their codec, rate and length always; the spoken words, each
//! segment with its start and end, once a speech model is installed (`lifeos model
//! import`). A recording is decoded as a stream from the store and transcribed in
//! windows, so a three-hour file takes no more memory than a short one.

use std::sync::Arc;

use lifeos_speech::audio::{self, AudioInfo, Source};
use lifeos_vcs::object::{Anchor, Segment};

use crate::extractor::{Extractor, Opener};

/// Extensions of recordings and videos.
pub const MEDIA_EXTS: &[&str] = &[
    "wav", "mp3", "flac", "ogg", "oga", "opus", "m4a", "m4b", "aac", "mp4", "m4v", "mov", "mkv",
    "webm",
];

/// Whether a path names a recording or a video (by its extension).
pub fn is_recording(path: &str) -> bool {
    MEDIA_EXTS.contains(&audio::extension(path).as_str())
}

/// The speech model ingest uses: found from the manifests when a recording is chosen,
/// verified and loaded only when one is transcribed (so an ingest with nothing to
/// transcribe neither hashes nor loads it).
#[cfg_attr(not(feature = "speech"), allow(dead_code))]
pub struct Engine {
    /// The model's name.
    pub model: String,
    /// The name its transcripts are recorded under (the job key's extractor): `speech`
    /// for the model ingest picks itself, `speech:<model>` for one asked for by name.
    pub job: String,
    manifest: lifeos_speech::models::Model,
    path: std::path::PathBuf,
    threads: usize,
    window_secs: u32,
    loaded: std::sync::OnceLock<Result<Transcriber, String>>,
}

#[cfg(feature = "speech")]
use lifeos_speech::transcribe::Transcriber;
/// Without whisper.cpp, nothing is ever loaded.
#[cfg(not(feature = "speech"))]
type Transcriber = std::convert::Infallible;

/// The transcribing extractor's name and version: the job key of a transcript.
pub const SPEECH: (&str, u32) = ("speech", 1);

/// Whether an extractor name is a transcript's: `speech`, or `speech:<model>` for a
/// transcript made by a model asked for by name (`lifeos ingest --model`).
pub fn is_transcript(extractor: &str) -> bool {
    transcript_model(extractor).is_some() || extractor == SPEECH.0
}

/// The model named in a `speech:<model>` extractor name.
pub fn transcript_model(extractor: &str) -> Option<&str> {
    extractor
        .strip_prefix(SPEECH.0)
        .and_then(|m| m.strip_prefix(':'))
}

/// The model a transcript segment's metadata names (`{"model": ...}`).
pub fn model_in_meta(meta: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(meta).ok()?["model"]
        .as_str()
        .map(str::to_string)
}

/// Whether and how ingest can transcribe.
#[derive(Debug, Clone, PartialEq)]
pub enum SpeechStatus {
    /// A model is loaded.
    Ready(String),
    /// No model is installed.
    NoModel,
    /// This build has no whisper.cpp.
    Disabled,
    /// The model could not be used (why).
    Broken(String),
}

/// The `[speech]` section of the repository config.
#[derive(Debug, Default, serde::Deserialize)]
pub struct SpeechConfig {
    /// The model to use (default: the registry's default).
    #[serde(default)]
    pub model: Option<String>,
    /// whisper.cpp threads (default 1, leaving the other cores to the rest of the machine).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Seconds of audio transcribed at a time (default 300).
    #[serde(default)]
    pub window_secs: Option<u32>,
}

impl Engine {
    /// The model `pinned` names, else the configured (or default) one; `Err` says why
    /// there is none.
    pub fn find(cfg: &SpeechConfig, pinned: Option<&str>) -> Result<Arc<Engine>, SpeechStatus> {
        if !lifeos_speech::ENABLED {
            return Err(SpeechStatus::Disabled);
        }
        let registry = lifeos_speech::models::Registry::open()
            .map_err(|e| SpeechStatus::Broken(e.to_string()))?;
        let (model, path) = match registry.find(pinned.or(cfg.model.as_deref())) {
            Ok(Some(m)) => m,
            Ok(None) => return Err(SpeechStatus::NoModel),
            Err(e) => return Err(SpeechStatus::Broken(e.to_string())),
        };
        Ok(Arc::new(Engine {
            job: match pinned {
                Some(name) => format!("{}:{name}", SPEECH.0),
                None => SPEECH.0.to_string(),
            },
            model: model.name.clone(),
            manifest: model,
            path,
            threads: cfg.threads.unwrap_or(1),
            window_secs: cfg.window_secs.unwrap_or(300),
            loaded: std::sync::OnceLock::new(),
        }))
    }

    /// Verifies the model file against its manifest and loads it (once); why not, if it
    /// cannot be.
    pub fn ready(&self) -> Result<(), String> {
        self.transcriber().map(|_| ())
    }

    /// Ready once loaded, or why loading failed.
    pub fn status(&self) -> SpeechStatus {
        if let Some(Err(why)) = self.loaded.get() {
            return SpeechStatus::Broken(why.clone());
        }
        SpeechStatus::Ready(self.model.clone())
    }

    fn transcriber(&self) -> Result<&Transcriber, String> {
        self.loaded
            .get_or_init(|| self.load())
            .as_ref()
            .map_err(Clone::clone)
    }

    #[cfg(feature = "speech")]
    fn load(&self) -> Result<Transcriber, String> {
        lifeos_speech::models::verify(&self.manifest, &self.path)
            .and_then(|()| Transcriber::load(&self.path, self.threads, self.manifest.multilingual))
            .map_err(|e| e.to_string())
    }

    #[cfg(not(feature = "speech"))]
    fn load(&self) -> Result<Transcriber, String> {
        Err("this build of lifeos has no speech support".into())
    }
}

/// The extractor for recordings and videos: `speech` with a model, `media` (metadata
/// only) without.
pub struct Media {
    /// The model, if one is installed.
    pub engine: Option<Arc<Engine>>,
}

fn metadata(info: &AudioInfo, model: Option<&str>) -> Segment {
    let mut text = format!("audio {}", info.codec);
    if info.sample_rate > 0 {
        text.push_str(&format!(" {} Hz", info.sample_rate));
    }
    if info.channels > 0 {
        text.push_str(&format!(" {} ch", info.channels));
    }
    if info.seconds > 0.0 {
        text.push_str(&format!(" {:.1} s", info.seconds));
    }
    Segment {
        kind: "metadata".into(),
        anchor: Anchor::File,
        text,
        meta: serde_json::json!({
            "codec": info.codec, "sample_rate": info.sample_rate, "channels": info.channels,
            "seconds": info.seconds, "model": model,
        })
        .to_string(),
    }
}

impl Extractor for Media {
    fn name(&self) -> &str {
        match &self.engine {
            Some(e) => &e.job,
            None => "media",
        }
    }
    fn version(&self) -> u32 {
        SPEECH.1
    }
    fn streams(&self) -> bool {
        true
    }
    fn extract(&self, path: &str, bytes: &[u8]) -> Result<Vec<Segment>, String> {
        let open = || {
            let src: Box<dyn Source> = Box::new(std::io::Cursor::new(bytes.to_vec()));
            Ok((src, bytes.len() as u64))
        };
        self.extract_from(path, &open, &|_| {})
    }
    fn extract_from(
        &self,
        path: &str,
        open: &Opener<'_>,
        progress: &dyn Fn(f64),
    ) -> Result<Vec<Segment>, String> {
        let Some(engine) = &self.engine else {
            let info = audio::probe(path, open).map_err(|e| e.to_string())?;
            return Ok(vec![metadata(&info, None)]);
        };
        transcribe(engine, path, open, progress)
    }
}

#[cfg(feature = "speech")]
fn transcribe(
    engine: &Engine,
    path: &str,
    open: &Opener<'_>,
    progress: &dyn Fn(f64),
) -> Result<Vec<Segment>, String> {
    let mut session = engine
        .transcriber()?
        .session(engine.window_secs)
        .map_err(|e| e.to_string())?;
    let info = audio::decode(path, open, &mut |block| {
        session.push(block)?;
        progress(session.position_secs());
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let spoken = session.finish().map_err(|e| e.to_string())?;
    progress(info.seconds);
    let meta = serde_json::json!({ "model": engine.model }).to_string();
    let mut out = vec![metadata(&info, Some(&engine.model))];
    out.extend(spoken.into_iter().map(|t| Segment {
        kind: "speech".into(),
        anchor: Anchor::Time {
            start_ms: t.start_ms,
            end_ms: t.end_ms.max(t.start_ms),
        },
        text: t.text,
        meta: meta.clone(),
    }));
    Ok(out)
}

/// Without whisper.cpp the model never loads, so this only returns why.
#[cfg(not(feature = "speech"))]
fn transcribe(
    engine: &Engine,
    _: &str,
    _: &Opener<'_>,
    _: &dyn Fn(f64),
) -> Result<Vec<Segment>, String> {
    match *engine.transcriber()? {}
}

/// Adds to a recording's diff `d` what was said differently between versions `old` and
/// `new`, from the transcripts `lifeos ingest` recorded for both: the changed segments,
/// with their times, and a word in the summary; a note instead saying why a version has
/// no transcript (not transcribed yet, or transcribing it failed).
pub fn add_transcript_diff(
    catalog: &lifeos_catalog::Catalog,
    old: &lifeos_store::Id,
    new: &lifeos_store::Id,
    d: &mut lifeos_diff::FileDiff,
) -> crate::Result<()> {
    use lifeos_diff::transcript;
    let (speech, version) = SPEECH;
    let mut sides = Vec::new();
    for (which, id) in [("old", old), ("new", new)] {
        // The note says why this pair has no transcripts, not what might be missing in
        // general: a file that could not be transcribed needs no model installed.
        let missing = match catalog.job(id, speech, version)? {
            Some(lifeos_catalog::JobState::Done) => None,
            Some(lifeos_catalog::JobState::Failed(why)) => {
                Some(format!("transcribing the {which} version failed: {why}"))
            }
            None => Some(format!(
                "the {which} version has not been transcribed (`lifeos ingest` transcribes recordings once a speech model is installed; `lifeos model list` shows them)"
            )),
        };
        if let Some(why) = missing {
            d.notes.push(format!("transcripts not compared: {why}"));
            return Ok(());
        }
        let segs: Vec<transcript::Spoken> = catalog
            .segments_of(id, speech, "speech")?
            .into_iter()
            .map(|(anchor, text)| {
                let a: serde_json::Value = serde_json::from_str(&anchor).unwrap_or_default();
                let ms = |k: &str| a[k].as_u64().unwrap_or(0);
                (ms("start_ms"), ms("end_ms"), text)
            })
            .collect();
        sides.push(segs);
    }
    let changes = transcript::diff(&sides[0], &sides[1]);
    d.summary.push_str(&match changes.as_slice() {
        [] => "; transcript unchanged".to_string(),
        [one] => match one.at {
            lifeos_diff::Location::Time { start_ms, end_ms } => format!(
                "; transcript: 1 change ({})",
                transcript::range(start_ms, end_ms)
            ),
            _ => "; transcript: 1 change".to_string(),
        },
        many => format!("; transcript: {} changes", many.len()),
    });
    d.changes.extend(changes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_catalog::CatalogExt;
    use lifeos_store::{Id, Kind};
    use lifeos_vcs::object::{Event, Extract};
    use lifeos_vcs::Repo;

    /// Records a transcript of `file` as ingest would: one speech segment per line.
    fn transcribed(repo: &Repo, file: Id, said: &[(u64, u64, &str)]) {
        let x = Extract {
            file,
            extractor: SPEECH.0.into(),
            version: SPEECH.1,
            outcome: Ok(said
                .iter()
                .map(|&(start_ms, end_ms, text)| Segment {
                    kind: "speech".into(),
                    anchor: Anchor::Time { start_ms, end_ms },
                    text: text.into(),
                    meta: String::new(),
                })
                .collect()),
        };
        let head = repo.head().unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let xid = tx.write_object(Kind::Extract, &x.encode()).unwrap();
        let events = vec![Event::ContentExtracted { results: vec![xid] }];
        repo.publish(tx, &[head.id], head.view, "ingest: 1 files", events, 1)
            .unwrap();
    }

    /// The diff of two transcribed versions lists the segment said differently, with
    /// its times, and says so in the summary; with a version not transcribed it changes
    /// nothing but a note.
    #[test]
    fn transcripts_of_two_versions_are_compared_segment_by_segment() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), Default::default()).unwrap();
        let (old, new, untold) = (Id::hash(b"v1"), Id::hash(b"v2"), Id::hash(b"v3"));
        transcribed(
            &repo,
            old,
            &[(0, 2000, "the budget is fine"), (2000, 4000, "see you")],
        );
        transcribed(
            &repo,
            new,
            &[(0, 2000, "the budget is short"), (2000, 4000, "see you")],
        );
        let catalog = repo.catalog().unwrap();
        let mut d = lifeos_diff::FileDiff {
            summary: "audio 4.0 s".into(),
            ..Default::default()
        };
        add_transcript_diff(&catalog, &old, &new, &mut d).unwrap();
        assert_eq!(
            d.summary,
            "audio 4.0 s; transcript: 1 change (00:00.0–00:02.0)"
        );
        assert_eq!(d.changes.len(), 1);
        assert!(matches!(
            d.changes[0].at,
            lifeos_diff::Location::Time {
                start_ms: 0,
                end_ms: 2000
            }
        ));
        assert!(d.notes.is_empty());
        let mut same = lifeos_diff::FileDiff::default();
        add_transcript_diff(&catalog, &old, &old, &mut same).unwrap();
        assert_eq!(same.summary, "; transcript unchanged");
        let mut missing = lifeos_diff::FileDiff::default();
        add_transcript_diff(&catalog, &old, &untold, &mut missing).unwrap();
        assert!(missing.changes.is_empty() && missing.summary.is_empty());
        assert_eq!(missing.notes.len(), 1, "{:?}", missing.notes);
    }
}
