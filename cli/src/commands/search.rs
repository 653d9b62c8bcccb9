//! `lifeos search`: documents, subtitles, transcripts and images; every hit cites path,
//! revision and place.

use std::io::Write;

use lifeos_entities::EntitiesExt;
use lifeos_ingest::search::{search as run_search, Filters, Versions};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{view_at, Context};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, Style};
use crate::search_util::{hit_json, print_hits};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// The file types `lifeos search --type` knows: a closed set, so that a typo is an error
/// naming the valid ones rather than a search that finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchType {
    /// Plain text and code.
    Text,
    /// Markdown.
    Markdown,
    /// HTML.
    Html,
    /// Subtitles (.srt, .vtt).
    Subtitles,
    /// PDF documents.
    Pdf,
    /// Images (their OCR text).
    Image,
    /// Text, markdown, HTML and PDF.
    Document,
    /// Audio recordings (their transcripts).
    Audio,
    /// Videos (their transcripts and subtitles).
    Video,
}

impl SearchType {
    /// The name the index uses.
    pub fn name(self) -> &'static str {
        match self {
            SearchType::Text => "text",
            SearchType::Markdown => "markdown",
            SearchType::Html => "html",
            SearchType::Subtitles => "subtitles",
            SearchType::Pdf => "pdf",
            SearchType::Image => "image",
            SearchType::Document => "document",
            SearchType::Audio => "audio",
            SearchType::Video => "video",
        }
    }
}

/// Arguments of `lifeos search`.
#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Words, "exact phrases", and -exclusions, as one argument: 'budget -draft'
    /// (optional with --mentions).
    #[arg(allow_hyphen_values = true)]
    pub query: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// Every version that ever matched, grouped by file.
    #[arg(long, conflicts_with = "at")]
    pub all_history: bool,
    /// Only files of this type (document: text, markdown, html and pdf together).
    #[arg(long = "type", value_name = "TYPE")]
    pub file_type: Option<SearchType>,
    /// Only paths matching this glob.
    #[arg(long, value_name = "GLOB")]
    pub path: Option<String>,
    /// Only passages that mention this person, place or project (its id).
    #[arg(long, value_name = "ID")]
    pub mentions: Option<String>,
    /// Search the transcripts this model made (default: the default model's).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print JSON (schema lifeos.search.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for SearchArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        search(
            ctx.repo()?,
            self.query.as_deref(),
            &self.at,
            self.all_history,
            &lifeos_ingest::search::Filters {
                file_type: self.file_type.map(SearchType::name),
                path: self.path.as_deref(),
                mentions: self.mentions.as_deref(),
                model: self.model.as_deref(),
            },
            self.limit,
            self.json,
            ctx.style(),
        )
    }
}

/// `lifeos search`.
#[allow(clippy::too_many_arguments)]
fn search(
    repo: &Repo,
    query: Option<&str>,
    at: &AsOfArg,
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
        Versions::AllHistory
    } else {
        Versions::View(&view)
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
