//! The ingest settings: `[ingest]` and `[speech]` of the repository config, read once
//! per run, with the speech engine they choose loaded on first use.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use lifeos_vcs::Repo;
use serde::Deserialize;

use crate::extractor::tesseract_available;
use crate::redact::Redactor;
use crate::speech::{Engine, SpeechConfig, SpeechStatus};
use crate::{IngestError, Result};

/// The `[ingest]` section of the repository config.
#[derive(Debug, Default, Deserialize)]
pub struct IngestConfig {
    /// Globs of paths never indexed.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Extra redaction patterns (regular expressions).
    #[serde(default)]
    pub redact: Vec<String>,
    /// Run OCR on images when tesseract is installed (default true).
    #[serde(default)]
    pub ocr: Option<bool>,
    /// Index small changes as part of each commit (default true).
    #[serde(default)]
    pub after_commit: Option<bool>,
}

#[derive(Deserialize, Default)]
struct ConfigFile {
    #[serde(default)]
    ingest: IngestConfig,
    #[serde(default)]
    speech: SpeechConfig,
}

/// Ingest settings, read from the repository config.
pub struct Settings {
    exclude: GlobSet,
    /// The redactor applied to every segment.
    pub redactor: Redactor,
    ocr_wanted: bool,
    tesseract: std::sync::OnceLock<bool>,
    /// Whether commits index small changes.
    pub after_commit: bool,
    speech_cfg: SpeechConfig,
    pinned: Option<String>,
    engine: std::sync::OnceLock<std::result::Result<Arc<Engine>, SpeechStatus>>,
}

impl Settings {
    /// Reads `[ingest]` and `[speech]` from `.lifeos/config`. An error names the table it
    /// is in.
    pub fn load(repo: &Repo) -> Result<Settings> {
        let text = std::fs::read_to_string(repo.dot_dir().join("config")).unwrap_or_default();
        let cfg: ConfigFile = toml::from_str(&text).map_err(|e| {
            // The table is the last header before the problem.
            let table = e
                .span()
                .and_then(|s| text.get(..s.start))
                .and_then(|before| {
                    before.lines().rev().find_map(|l| {
                        let l = l.trim();
                        l.strip_prefix('[')?.strip_suffix(']').map(str::trim)
                    })
                })
                .unwrap_or("ingest");
            IngestError::Config {
                table: table.to_string(),
                message: e.to_string(),
            }
        })?;
        let ingest = |message: String| IngestError::Config {
            table: "ingest".into(),
            message,
        };
        let mut b = GlobSetBuilder::new();
        for g in &cfg.ingest.exclude {
            b.add(Glob::new(g).map_err(|e| ingest(format!("exclude {g:?}: {e}")))?);
        }
        Ok(Settings {
            exclude: b.build().map_err(|e| ingest(e.to_string()))?,
            redactor: Redactor::new(&cfg.ingest.redact).map_err(ingest)?,
            ocr_wanted: cfg.ingest.ocr.unwrap_or(true),
            tesseract: std::sync::OnceLock::new(),
            after_commit: cfg.ingest.after_commit.unwrap_or(true),
            speech_cfg: SpeechConfig {
                // The repository's [speech] threads, else the user's speech.threads.
                threads: cfg.speech.threads.or_else(|| {
                    lifeos_vcs::settings::effective(None, "speech.threads")
                        .and_then(|t| t.parse().ok())
                }),
                ..cfg.speech
            },
            pinned: None,
            engine: std::sync::OnceLock::new(),
        })
    }

    /// Transcribes with the model named `name` (see [`crate::run::Selection::model`]); an error says
    /// why it cannot be used.
    pub fn pin_model(&mut self, name: &str) -> Result<()> {
        self.pinned = Some(name.to_string());
        // An engine loaded before (for the default model) is not the pinned model's.
        self.engine = std::sync::OnceLock::new();
        let why = match self.speech() {
            Some(engine) => match engine.ready() {
                Ok(()) => return Ok(()),
                Err(why) => why,
            },
            None => match self.speech_status() {
                Some(SpeechStatus::Broken(why)) => why,
                Some(SpeechStatus::Disabled) => "this build of lifeos has no speech support".into(),
                _ => "it is not installed (see `lifeos model list`)".into(),
            },
        };
        Err(IngestError::Model {
            model: name.to_string(),
            reason: why,
        })
    }

    /// Whether tesseract is installed (checked once, when first needed).
    pub fn tesseract(&self) -> bool {
        *self.tesseract.get_or_init(tesseract_available)
    }

    /// Whether OCR runs: wanted by the config and tesseract installed.
    pub fn ocr(&self) -> bool {
        self.ocr_wanted && self.tesseract()
    }

    /// The speech model, found when first needed; `None` when there is none.
    pub fn speech(&self) -> Option<Arc<Engine>> {
        self.engine
            .get_or_init(|| Engine::find(&self.speech_cfg, self.pinned.as_deref()))
            .as_ref()
            .ok()
            .cloned()
    }

    /// Whether ingest can transcribe, and why not; `None` if no recording needed it.
    pub fn speech_status(&self) -> Option<SpeechStatus> {
        self.engine.get().map(|r| match r {
            Ok(e) => e.status(),
            Err(s) => s.clone(),
        })
    }

    /// Whether a path is excluded from indexing.
    pub fn excluded(&self, path: &str) -> bool {
        self.exclude.is_match(path)
    }
}
