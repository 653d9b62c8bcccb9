//! `lifeos ingest`: extract searchable text from files not indexed yet.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use lifeos_ingest::speech::SpeechStatus;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::CliResult;
use crate::error::MODEL_HINT;
use crate::output::{bar, print_json};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Only these files or folders of @.
    pub paths: Vec<OsString>,
    /// Run again the files whose extraction failed before.
    #[arg(long)]
    pub retry_failed: bool,
    /// Transcribe recordings again with this installed model, keeping the transcripts
    /// already made (`extract show --model NAME` and `search --model NAME` read them).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Print JSON (schema lifeos.ingest.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for IngestArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let only = lifeos_ingest::run::Selection {
            paths: self.paths.iter().map(|p| p.as_bytes().to_vec()).collect(),
            model: self.model,
        };
        ingest(ctx.repo()?, self.retry_failed, &only, self.json)
    }
}

/// `lifeos ingest`.
pub(crate) fn ingest(
    repo: &Repo,
    retry_failed: bool,
    only: &lifeos_ingest::run::Selection,
    json: bool,
) -> CliResult<u8> {
    let pb = bar(0, "indexing");
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {pos}/{len} files eta {eta} {prefix}",
        )
        .expect("template"),
    );
    let r = lifeos_ingest::run::ingest(repo, retry_failed, only, &|p| {
        pb.set_length(p.total);
        pb.set_position(p.done);
        if p.speech_seconds > 0.0 && p.audio_seconds > 0.0 {
            pb.set_prefix(format!(
                "(transcribing at {:.1}× real time)",
                p.audio_seconds / p.speech_seconds
            ));
        }
    })?;
    pb.finish_and_clear();
    let speech = match &r.speech {
        None => json!(null),
        Some(SpeechStatus::Ready(m)) => json!({"state": "ready", "model": m}),
        Some(SpeechStatus::NoModel) => json!({"state": "no_model"}),
        Some(SpeechStatus::Disabled) => json!({"state": "disabled"}),
        Some(SpeechStatus::Broken(why)) => json!({"state": "broken", "reason": why}),
    };
    if json {
        print_json(
            "lifeos.ingest.v1",
            json!({
                "files": r.files, "already": r.already, "extracted": r.extracted,
                "failed": r.failed.iter().map(|(p, why)| json!({"path": p, "reason": why})).collect::<Vec<_>>(),
                "failed_before": r.failed_before, "excluded": r.excluded, "no_extractor": r.no_extractor,
                "ocr": r.ocr, "tesseract": r.tesseract, "operations": r.operations,
                "speech": speech, "without_speech": r.without_speech,
                "audio_seconds": r.audio_seconds, "speech_seconds": r.speech_seconds,
            }),
        );
        return Ok(0);
    }
    if !r.tesseract {
        eprintln!("notice: tesseract is not installed, so images are indexed by metadata only (install tesseract-ocr for text in images)");
    }
    if r.without_speech > 0 {
        let why = match &r.speech {
            Some(SpeechStatus::Disabled) => "this build of lifeos has no speech support (it was built without cmake; rebuild with cmake installed)".to_string(),
            Some(SpeechStatus::Broken(why)) => format!("the speech model cannot be used: {why}"),
            _ => format!("no speech model is installed; {MODEL_HINT}"),
        };
        eprintln!(
            "notice: {} recording(s) indexed by name and metadata only: {why}",
            r.without_speech
        );
    }
    println!(
        "{} files: {} extracted now, {} already indexed, {} failed, {} excluded, {} with no text to extract",
        r.files,
        r.extracted,
        r.already,
        r.failed.len() as u64 + r.failed_before,
        r.excluded,
        r.no_extractor
    );
    if r.audio_seconds > 0.0 {
        println!(
            "transcribed {:.1} s of audio in {:.1} s ({:.1}× real time)",
            r.audio_seconds,
            r.speech_seconds,
            r.audio_seconds / r.speech_seconds.max(1e-9)
        );
    }
    for (p, why) in &r.failed {
        println!("  failed: {p}: {why}");
    }
    if r.failed_before > 0 {
        println!(
            "  {} failed before and were not retried (`lifeos ingest --retry-failed`)",
            r.failed_before
        );
    }
    Ok(0)
}
