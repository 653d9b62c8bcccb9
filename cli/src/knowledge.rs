//! Knowledge verbs: ingest and search.

use std::io::Write;

use lifeos_ingest::search::{search as run_search, Scope};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::commands::view_at;
use crate::error::{CliError, CliResult};
use crate::output::{bar, print_json, Style};
use crate::AtArg;

impl From<lifeos_ingest::IngestError> for CliError {
    fn from(e: lifeos_ingest::IngestError) -> Self {
        match e {
            lifeos_ingest::IngestError::Vcs(v) => v.into(),
            lifeos_ingest::IngestError::Store(s) => s.into(),
            other => CliError::new(other.to_string()),
        }
    }
}

/// `lifeos ingest`.
pub fn ingest(repo: &Repo, retry_failed: bool, json: bool) -> CliResult<u8> {
    let pb = bar(0, "indexing");
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} files eta {eta}")
            .expect("template"),
    );
    let r = lifeos_ingest::run::ingest(repo, retry_failed, &|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    if json {
        print_json(
            "lifeos.ingest.v1",
            json!({
                "files": r.files, "already": r.already, "extracted": r.extracted,
                "failed": r.failed.iter().map(|(p, why)| json!({"path": p, "reason": why})).collect::<Vec<_>>(),
                "failed_before": r.failed_before, "excluded": r.excluded, "no_extractor": r.no_extractor,
                "ocr": r.ocr, "tesseract": r.tesseract, "operations": r.operations,
            }),
        );
        return Ok(0);
    }
    if !r.tesseract {
        eprintln!("notice: tesseract is not installed, so images are indexed by metadata only (install tesseract-ocr for text in images)");
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

/// `lifeos search`.
#[allow(clippy::too_many_arguments)]
pub fn search(
    repo: &Repo,
    query: &str,
    at: &AtArg,
    all_history: bool,
    file_type: Option<&str>,
    path: Option<&str>,
    limit: usize,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let view = view_at(repo, at)?;
    let scope = if all_history {
        Scope::AllHistory
    } else {
        Scope::View(&view)
    };
    let hits = run_search(repo, query, scope, file_type, path, limit)?;
    if json {
        print_json(
            "lifeos.search.v1",
            json!({
                "query": query,
                "hits": hits.iter().map(|h| json!({
                    "path": h.path, "commit": h.commit.to_hex(), "file": h.file.to_hex(),
                    "anchor": h.anchor, "cite": h.cite, "snippet": h.snippet,
                    "kind": h.kind, "type": h.file_type, "media": h.media, "score": if h.score.is_finite() && h.score < f64::MAX { json!(h.score) } else { json!(null) },
                })).collect::<Vec<_>>(),
            }),
        );
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    if hits.is_empty() {
        let _ = writeln!(out, "no matches");
    }
    for h in &hits {
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
    Ok(0)
}
