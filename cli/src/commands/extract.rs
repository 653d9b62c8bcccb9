//! `lifeos extract`: read what ingest extracted, with where each passage is; subtitles out;
//! each file's extract state.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use clap::Subcommand;
use lifeos_catalog::anchor_json;
use lifeos_catalog::CatalogExt;
use lifeos_ingest::extracts::{self, FileExtract, State, SubtitleFormat};
use lifeos_ingest::search::cite;
use lifeos_vcs::path::display;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{file_at, resolve, Context, FileAt};
use crate::error::{CliError, CliResult};
use crate::output::{local_time, print_json, Style};
use crate::verb::{Policy, Verb};
use crate::RevArgs;

/// How `extract show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExtractFormat {
    /// Each passage with its place: lines, page, time range, image region.
    Text,
    /// SubRip subtitles from the transcript.
    Srt,
    /// WebVTT subtitles from the transcript.
    Vtt,
}

/// `lifeos extract ...`
#[derive(Debug, Subcommand)]
pub enum ExtractCmd {
    /// What was extracted from a file version: each passage with its place (a transcript's
    /// time ranges, a document's lines or pages, an image's OCR regions and EXIF), which
    /// extractor and model made it and when, or why extraction failed.
    Show {
        /// The file's path in the repository.
        path: OsString,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevArgs,
        /// Text, or the transcript as subtitles (srt, vtt).
        #[arg(long, value_enum, default_value_t = ExtractFormat::Text)]
        format: ExtractFormat,
        /// The transcript this model made (default: the default model's).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// Print JSON (schema lifeos.extract.v1).
        #[arg(long, conflicts_with = "format")]
        json: bool,
    },
    /// Each file's extract state: done, pending, failed (with the reason), no extractor,
    /// excluded.
    List {
        /// Only these files or folders (default: every file).
        paths: Vec<OsString>,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevArgs,
        /// Print JSON (schema lifeos.extract_list.v1).
        #[arg(long)]
        json: bool,
    },
}

impl Verb for ExtractCmd {
    fn policy(&self) -> Policy {
        Policy {
            pages: matches!(
                self,
                ExtractCmd::Show {
                    format: ExtractFormat::Text,
                    ..
                }
            ),
            ..Policy::READ
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        run(ctx.repo()?, self, ctx.style())
    }
}

/// Runs `lifeos extract ...`.
fn run(repo: &Repo, cmd: ExtractCmd, style: Style) -> CliResult<u8> {
    match cmd {
        ExtractCmd::Show {
            path,
            rev: RevArgs { revision, at },
            format,
            model,
            json,
        } => {
            let FileAt {
                commit,
                path: clean,
                entry,
            } = file_at(repo, path.as_bytes(), &revision, &at, |p| {
                format!("`lifeos extract list {p}` lists its files")
            })?;
            let shown = display(&clean).into_owned();
            let catalog = repo.catalog()?;
            let all = extracts::of_file(repo, &catalog, &entry.id)?;
            match format {
                ExtractFormat::Srt | ExtractFormat::Vtt => {
                    let x = extracts::transcript(&all, model.as_deref()).map_err(|why| {
                        CliError::new(format!("no subtitles for {shown}: {why}")).hint(
                            "`lifeos ingest` transcribes recordings once a speech model is installed; `lifeos ingest --model NAME PATH` with another model",
                        )
                    })?;
                    let segments = x.outcome.as_ref().map_err(|why| {
                        CliError::new(format!(
                            "no subtitles for {shown}: transcribing it failed: {why}"
                        ))
                    })?;
                    let f = if format == ExtractFormat::Srt {
                        SubtitleFormat::Srt
                    } else {
                        SubtitleFormat::Vtt
                    };
                    crate::output::write_stdout(extracts::subtitles(segments, f).as_bytes())?;
                    Ok(0)
                }
                ExtractFormat::Text if json => {
                    let all = of_model(all, model.as_deref());
                    print_json(
                        "lifeos.extract.v1",
                        json!({
                            "path": shown,
                            "commit": commit.to_hex(),
                            "file": entry.id.to_hex(),
                            "extracts": all.iter().map(extract_json).collect::<Vec<_>>(),
                        }),
                    );
                    Ok(0)
                }
                ExtractFormat::Text => {
                    let all = of_model(all, model.as_deref());
                    if all.is_empty() {
                        return Err(nothing_extracted(
                            repo,
                            &shown,
                            &entry,
                            &commit.short(7),
                            model.as_deref(),
                        ));
                    }
                    let mut text = String::new();
                    for (i, x) in all.iter().enumerate() {
                        if i > 0 {
                            text.push('\n');
                        }
                        text.push_str(&shown_text(&shown, &commit.short(7), x, style));
                    }
                    crate::output::write_stdout(text.as_bytes())?;
                    Ok(if all.iter().any(|x| x.outcome.is_err()) {
                        1
                    } else {
                        0
                    })
                }
            }
        }
        ExtractCmd::List {
            paths,
            rev: RevArgs { revision, at },
            json,
        } => {
            let (commit, c) = resolve(repo, &revision, &at)?;
            let paths: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
            let files = lifeos_ingest::files::files_at(repo, Some(&c.tree), &paths, &revision)?;
            let listed = extracts::list(repo, &files)?;
            if json {
                print_json(
                    "lifeos.extract_list.v1",
                    json!({
                        "commit": commit.to_hex(),
                        "files": listed.iter().map(|l| json!({
                            "path": l.path,
                            "file": l.file.to_hex(),
                            "extracts": l.extractors.iter().map(|(k, st)| json!({
                                "extractor": k.as_ref().map(|k| &k.0),
                                "version": k.as_ref().map(|k| k.1),
                                "state": st.name(),
                                "reason": match st { State::Failed(r) => Some(r), _ => None },
                            })).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                    }),
                );
                return Ok(0);
            }
            let width = listed
                .iter()
                .map(|l| l.path.chars().count())
                .max()
                .unwrap_or(0);
            let mut text = String::new();
            for l in &listed {
                for (k, st) in &l.extractors {
                    let name = k.as_ref().map_or("-", |k| k.0.as_str());
                    let state = match st {
                        State::Done => "done".to_string(),
                        State::Failed(why) => style.bad(&format!("failed: {why}")),
                        State::Pending => style.emph("pending"),
                        State::NoExtractor => "no extractor (found by name only)".into(),
                        State::Excluded => "excluded by [ingest] exclude".into(),
                    };
                    let pad = width - l.path.chars().count();
                    text.push_str(&format!(
                        "{}{}  {name:<16} {state}\n",
                        style.name(&l.path),
                        " ".repeat(pad)
                    ));
                }
            }
            crate::output::write_stdout(text.as_bytes())?;
            Ok(0)
        }
    }
}

/// The extracts to show when a model is asked for: its transcripts and every extract
/// that is not a transcript.
fn of_model(mut all: Vec<FileExtract>, model: Option<&str>) -> Vec<FileExtract> {
    if let Some(m) = model {
        all.retain(|x| x.model.is_none() || x.model.as_deref() == Some(m));
    }
    all
}

/// Why a file version shows nothing: not extracted yet, no extractor for its kind, or
/// excluded; and what to do.
fn nothing_extracted(
    repo: &Repo,
    path: &str,
    entry: &lifeos_vcs::object::TreeEntry,
    commit: &str,
    model: Option<&str>,
) -> CliError {
    if let Some(m) = model {
        return CliError::new(format!(
            "nothing by {m} was extracted from {path} at {commit}"
        ))
        .hint(format!(
            "`lifeos ingest --model {m} {path}` transcribes it with that model"
        ));
    }
    let what = format!("nothing was extracted from {path} at {commit}");
    let state = extracts::list(repo, &[(entry.id, path.to_string(), entry.size)])
        .ok()
        .and_then(|l| l.into_iter().next())
        .and_then(|l| l.extractors.into_iter().next())
        .map(|(_, st)| st);
    match state {
        Some(State::NoExtractor) => CliError::new(format!(
            "{what}: no extractor reads files of its kind (it is found by name only)"
        )),
        Some(State::Excluded) => CliError::new(format!(
            "{what}: it is excluded by [ingest] exclude in .lifeos/config"
        )),
        _ => CliError::new(what)
            .hint("`lifeos ingest` extracts it; `lifeos extract list` shows what is pending"),
    }
}

/// One extract for people: a heading (extractor, model, when, by which operation), then
/// each passage after its place, continuation lines indented under the first.
fn shown_text(path: &str, commit: &str, x: &FileExtract, style: Style) -> String {
    let mut head = format!(
        "{} @{}  {} {}",
        style.name(path),
        style.id(commit),
        x.extractor,
        x.version
    );
    if let Some(m) = &x.model {
        head.push_str(&format!(", model {m}"));
    }
    match &x.recorded {
        Some((op, ms)) => head.push_str(&format!(
            ", recorded {} by operation {}",
            local_time(*ms),
            style.id(&op.short(12))
        )),
        None => head.push_str(", recorded by an operation not indexed"),
    }
    let mut out = style.emph(&head);
    out.push('\n');
    match &x.outcome {
        Err(why) => out.push_str(&format!("  {}\n", style.bad(&format!("failed: {why}")))),
        Ok(segs) if segs.is_empty() => out.push_str("  (no text)\n"),
        Ok(segs) => {
            let places: Vec<String> = segs
                .iter()
                .map(|s| cite(&anchor_value(&s.anchor)))
                .collect();
            let width = places.iter().map(|p| p.chars().count()).max().unwrap_or(0);
            for (s, place) in segs.iter().zip(&places) {
                let pad = " ".repeat(width - place.chars().count());
                let mut lines = s.text.lines();
                let first = lines.next().unwrap_or_default();
                out.push_str(&format!("{}{pad}  {first}\n", style.dim(place)));
                for l in lines {
                    let line = format!("{}  {l}", " ".repeat(width));
                    out.push_str(line.trim_end());
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// A segment's anchor as search hits give it: the catalog's JSON of it (FORMAT 12.3).
fn anchor_value(a: &lifeos_vcs::object::Anchor) -> serde_json::Value {
    serde_json::from_str(&anchor_json(a)).unwrap_or_default()
}

/// One extract as `lifeos.extract.v1` gives it.
fn extract_json(x: &FileExtract) -> serde_json::Value {
    let segments = x.outcome.as_ref().ok().map(|segs| {
        segs.iter()
            .map(|s| {
                let anchor = anchor_value(&s.anchor);
                json!({
                    "kind": s.kind,
                    "cite": cite(&anchor),
                    "anchor": anchor,
                    "text": s.text,
                    "meta": serde_json::from_str::<serde_json::Value>(&s.meta).ok(),
                })
            })
            .collect::<Vec<_>>()
    });
    json!({
        "extractor": x.extractor,
        "version": x.version,
        "object": x.object.to_hex(),
        "model": x.model,
        "state": if x.outcome.is_ok() { "done" } else { "failed" },
        "reason": x.outcome.as_ref().err(),
        "operation": x.recorded.map(|r| r.0.to_hex()),
        "time_ms": x.recorded.map(|r| r.1),
        "segments": segments,
    })
}
