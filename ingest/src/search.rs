//! Search: ranked, cited hits over extracted segments and file names, for the library as
//! it is, as it was (`--at`), or across every version.

use std::collections::{HashMap, HashSet};

use crate::file_index::{self, FileIndex};
use globset::Glob;
use lifeos_store::{Id, IdSet};
use lifeos_vcs::object::EntryKind;
use lifeos_vcs::path::BString;
use lifeos_vcs::{Repo, View};

use crate::terms::parse;
use crate::{IngestError, Result};
use lifeos_catalog::CatalogExt;

/// Which versions to search.
pub enum Versions<'a> {
    /// The files of `@` in a view (the current one, or one found with `--at`).
    View(&'a View),
    /// Every version of every file in the visible history.
    AllHistory,
}

/// One cited hit.
#[derive(Debug, Clone)]
pub struct Hit {
    /// Repository path.
    pub path: String,
    /// The commit the version comes from.
    pub commit: Id,
    /// The file content.
    pub file: Id,
    /// Where in the file (JSON anchor: lines, page, time, region, file).
    pub anchor: serde_json::Value,
    /// The anchor for people: "lines 12–18", "p. 7", "00:07.9–00:12.1", "region ...".
    pub cite: String,
    /// The matching text with the match marked by `[` and `]`.
    pub snippet: String,
    /// Segment kind (`section`, `page`, `cue`, `ocr`, `metadata`, `name`, ...).
    pub kind: String,
    /// The file type: text, markdown, html, subtitles, pdf, image.
    pub file_type: String,
    /// bm25 rank (lower is better; name matches rank after content).
    pub score: f64,
    /// For subtitles: the video or recording beside them (same folder and name), which
    /// the cited time range belongs to.
    pub media: Option<String>,
}

/// Extensions of the videos and recordings subtitles can belong to.
const MEDIA_EXTS: &[&str] = &[
    "mp4", "mkv", "webm", "mov", "m4v", "avi", "mp3", "m4a", "wav", "flac", "ogg", "opus",
];

/// The versions a search lists, each a path, a file content and a commit, with every
/// path in one buffer: a search lists every file of a version, and an allocation per path
/// cost a search for a rare word a tenth of its time (57.3 -> 51.0 ms).
#[derive(Default)]
struct Listed {
    paths: Vec<u8>,
    /// Where each path ends in `paths`, its content and its commit.
    rows: Vec<(usize, Id, Id)>,
}

impl Listed {
    fn push(&mut self, path: &[u8], file: Id, commit: Id) {
        self.paths.extend_from_slice(path);
        self.rows.push((self.paths.len(), file, commit));
    }

    /// (path, content, commit), in the order pushed.
    fn iter(&self) -> impl Iterator<Item = (&[u8], &Id, &Id)> {
        let mut start = 0;
        self.rows.iter().map(move |(end, file, commit)| {
            let path = &self.paths[start..*end];
            start = *end;
            (path, file, commit)
        })
    }
}

/// What gives a listed path's (content, commit) when asked.
type Version<'a> = dyn Fn() -> (Id, Id) + 'a;

/// The versions in scope, each a path, a file content and a commit: those of one tree
/// read from its file index (kept in `.lifeos/file_index/` for a large tree: one read
/// instead of every tree of it), then those listed.
struct VersionSet {
    /// At a view with no `--path`, its tree; with `--all-history`, the newest commit's.
    tree: Option<(FileIndex, Id)>,
    /// With `--path`, those the glob keeps; with `--all-history`, the versions of the
    /// other commits not in `tree`, as each commit's changes from the one before list them.
    listed: Listed,
    /// The contents of `listed`.
    files: IdSet,
}

impl VersionSet {
    fn new(tree: Option<(FileIndex, Id)>, listed: Listed) -> VersionSet {
        // Ids are uniform already: the set hashes them by their first bytes, not SipHash;
        // sized first, not grown as filled.
        let mut files = IdSet::with_capacity_and_hasher(listed.rows.len(), Default::default());
        files.extend(listed.iter().map(|(_, f, _)| *f));
        VersionSet {
            tree,
            listed,
            files,
        }
    }

    fn contains(&self, f: &Id) -> bool {
        self.files.contains(f) || self.tree.as_ref().is_some_and(|(t, _)| t.contains(f))
    }

    /// The contents in scope when there are at most `max` different ones (a small scope
    /// is searched segment by segment), or when all are listed (the catalog counts them).
    fn small(&self, max: usize) -> Option<std::borrow::Cow<'_, IdSet>> {
        let Some((t, _)) = &self.tree else {
            return Some(std::borrow::Cow::Borrowed(&self.files));
        };
        if self.files.len() > max {
            return None;
        }
        let mut all = self.files.clone();
        for c in t.contents() {
            all.insert(c);
            if all.len() > max {
                return None;
            }
        }
        Some(std::borrow::Cow::Owned(all))
    }

    /// Calls `f` with the path of every version, in order, and what gives its (content,
    /// commit) when asked (a file index finds a path's content elsewhere).
    fn each(&self, f: &mut dyn FnMut(&[u8], &Version<'_>)) {
        if let Some((t, commit)) = &self.tree {
            for k in 0..t.len() {
                f(t.path(k), &|| (t.content(k), *commit));
            }
        }
        for (p, c, m) in self.listed.iter() {
            f(p, &|| (*c, *m));
        }
    }

    /// The (path, commit) of each version of the contents `hit`.
    fn of(&self, hit: &HashSet<Id>) -> HashMap<Id, Vec<(String, Id)>> {
        let mut out: HashMap<Id, Vec<(String, Id)>> = HashMap::new();
        let mut add = |path: &[u8], f: Id, c: Id| {
            out.entry(f)
                .or_default()
                .push((lifeos_vcs::path::display(path).into_owned(), c));
        };
        if let Some((t, commit)) = &self.tree {
            for f in hit {
                t.files_of(f).for_each(|k| add(t.path(k), *f, *commit));
            }
        }
        if hit.iter().any(|f| self.files.contains(f)) {
            for (path, f, c) in self.listed.iter() {
                if hit.contains(f) {
                    add(path, *f, *c);
                }
            }
        }
        out
    }
}

/// The folder whose files a `--path` glob can match: its literal start, up to the last
/// `/` before the first pattern character (empty: the whole tree, also when that start is
/// not a path as the tree spells it, like `./notes` or `/notes`, which match nothing).
fn glob_folder(glob: &str) -> &[u8] {
    let literal = glob
        .find(['*', '?', '[', '{', '\\'])
        .map_or(glob, |i| &glob[..i]);
    let dir = literal.rsplit_once('/').map_or("", |(d, _)| d).as_bytes();
    match lifeos_vcs::path::clean(dir) {
        Ok(clean) if clean.as_slice() == dir => dir,
        _ => b"",
    }
}

/// The media file beside a subtitle file (`talk.en.srt` or `talk.srt` belongs to
/// `talk.mp4`), among the paths in scope.
fn sidecar_media(sub: &str, paths: &HashSet<String>) -> Option<String> {
    let stem = sub.rsplit_once('.').map(|(s, _)| s)?;
    let stems = [Some(stem), stem.rsplit_once('.').map(|(s, _)| s)];
    stems
        .into_iter()
        .flatten()
        .flat_map(|st| MEDIA_EXTS.iter().map(move |e| format!("{st}.{e}")))
        .find(|cand| paths.contains(cand))
}

fn clock(ms: u64) -> String {
    let s = ms / 1000;
    let base = if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    };
    format!("{base}.{}", (ms % 1000) / 100)
}

/// The human citation of an anchor.
pub fn cite(anchor: &serde_json::Value) -> String {
    let n = |k: &str| anchor[k].as_u64().unwrap_or(0);
    match anchor["kind"].as_str() {
        Some("lines") if n("start") == n("end") => format!("line {}", n("start")),
        Some("lines") => format!("lines {}–{}", n("start"), n("end")),
        Some("page") => format!("p. {}", n("page")),
        Some("time") => format!("{}–{}", clock(n("start_ms")), clock(n("end_ms"))),
        Some("region") => format!("region {}×{} at ({}, {})", n("w"), n("h"), n("x"), n("y")),
        _ => "file".into(),
    }
}

fn file_type(extractor: &str) -> &str {
    match extractor {
        "image-ocr" => "image",
        other => other,
    }
}

fn type_matches(wanted: &str, ty: &str) -> bool {
    wanted == ty || (wanted == "document" && matches!(ty, "text" | "markdown" | "html" | "pdf"))
}

/// The type of a media file by extension: `video` or `audio`.
fn media_type(path: &str) -> &'static str {
    match lifeos_speech::audio::extension(path).as_str() {
        "mp3" | "m4a" | "m4b" | "aac" | "wav" | "flac" | "ogg" | "oga" | "opus" => "audio",
        _ => "video",
    }
}

/// What hits must be, beside matching the query.
#[derive(Debug, Default, Clone, Copy)]
pub struct Filters<'a> {
    /// Of this file type (`text`, `markdown`, `html`, `subtitles`, `pdf`, `image`,
    /// `document`, `audio`, `video`).
    pub file_type: Option<&'a str>,
    /// At paths matching this glob.
    pub path: Option<&'a str>,
    /// Passages that mention this entity (its id).
    pub mentions: Option<&'a str>,
    /// Transcripts made by this model (`None`: the default model's, `speech`).
    pub model: Option<&'a str>,
}

/// Whether a segment's transcript is the one searched: with no model asked for, the
/// default model's (`speech`, not `speech:<model>`); with one, that model's, whether it
/// made the default transcript (its segments' metadata names it) or was asked for by name.
fn model_matches(model: Option<&str>, extractor: &str, meta: &str) -> bool {
    let named = crate::speech::transcript_model(extractor);
    match model {
        None => named.is_none(),
        Some(_) if !crate::speech::is_transcript(extractor) => true,
        Some(m) => {
            named == Some(m)
                || (named.is_none() && crate::speech::model_in_meta(meta).as_deref() == Some(m))
        }
    }
}

/// A segment's first 160 characters, `…` when cut: the snippet of an entity's mention.
fn cut_text(text: &str) -> String {
    let mut cut: String = text.chars().take(160).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// Searches; at most `limit` hits.
pub fn search(
    repo: &Repo,
    input: &str,
    scope: Versions<'_>,
    filters: &Filters<'_>,
    limit: usize,
) -> Result<Vec<Hit>> {
    let Filters {
        path: path_glob,
        mentions,
        ..
    } = *filters;
    let q = parse(input);
    let fts = q.fts();
    if fts.is_none() && mentions.is_none() {
        return Err(IngestError::Query(format!(
            "{input:?} has no words to search for"
        )));
    }
    let glob = path_glob
        .map(|g| {
            Glob::new(g)
                .map(|g| g.compile_matcher())
                .map_err(|e| IngestError::Query(format!("bad --path glob {g:?}: {e}")))
        })
        .transpose()?;
    // With no --path: a tree's file index (and, across history, each commit's changes).
    if path_glob.is_none() {
        let versions = match &scope {
            Versions::View(view) => match view.at_commit() {
                Some(commit) => {
                    let index = file_index::of_tree(repo, &repo.commit(&commit)?.tree)?;
                    VersionSet::new(Some((index, commit)), Listed::default())
                }
                None => VersionSet::new(None, Listed::default()),
            },
            Versions::AllHistory => history(repo)?,
        };
        return found(repo, &q, fts.as_deref(), &scope, filters, limit, &versions);
    }
    // The versions in scope: (path, file content, commit), each path and content once.
    let mut entries = Listed::default();
    let mut seen: HashSet<(BString, Id)> = HashSet::new();
    let mut add_tree = |commit: Id, dedup: bool| -> Result<()> {
        let tree = repo.commit(&commit)?.tree;
        // Only the folder a --path glob starts with is read.
        let dir = path_glob.map(glob_folder).unwrap_or_default();
        let start = if dir.is_empty() {
            Some(tree)
        } else {
            match repo.lookup_path(&tree, dir)? {
                Some(e) if e.kind == EntryKind::Dir => Some(e.id),
                _ => None,
            }
        };
        let Some(start) = start else {
            return Ok(());
        };
        repo.visit_files_below(&start, dir, &mut |path, e| {
            if matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink)
                || glob
                    .as_ref()
                    .is_some_and(|g| !g.is_match(&*lifeos_vcs::path::display(path)))
            {
                return Ok(());
            }
            if !dedup || seen.insert((BString::from(path), e.id)) {
                entries.push(path, e.id, commit);
            }
            Ok(())
        })?;
        Ok(())
    };
    match scope {
        Versions::View(view) => {
            if let Some(c) = view.at_commit() {
                add_tree(c, false)?;
            }
        }
        Versions::AllHistory => {
            let head = repo.head()?;
            for (c, _) in lifeos_vcs::rev::all_commits(repo, &head.view)? {
                add_tree(c, true)?;
            }
        }
    }
    drop(seen);
    found(
        repo,
        &q,
        fts.as_deref(),
        &scope,
        filters,
        limit,
        &VersionSet::new(None, entries),
    )
}

/// Every version of every file in the visible history, each (path, content) once, with
/// the first commit (newest first) that holds it: the newest commit's file index, then
/// the others as the repository keeps them ([`file_index::history_versions`]).
fn history(repo: &Repo) -> Result<VersionSet> {
    let head = repo.head()?;
    let commits = lifeos_vcs::rev::all_commits(repo, &head.view)?;
    let Some((index, others)) = file_index::history_versions(repo, &commits)? else {
        return Ok(VersionSet::new(None, Listed::default()));
    };
    let mut listed = Listed::default();
    for v in &others {
        listed.push(&v.path, v.content, v.commit);
    }
    Ok(VersionSet::new(Some((index, commits[0].0)), listed))
}

/// The hits among `versions`.
fn found(
    repo: &Repo,
    q: &crate::terms::Terms,
    fts: Option<&str>,
    scope: &Versions<'_>,
    filters: &Filters<'_>,
    limit: usize,
    versions: &VersionSet,
) -> Result<Vec<Hit>> {
    let Filters {
        file_type: type_filter,
        mentions,
        model,
        ..
    } = *filters;
    let catalog = repo.catalog()?;
    let mut hits = Vec::new();
    // Subtitles count as their video's (or recording's) type too.
    let mentioned = mentions.map(|eid| catalog.mentions_of(eid)).transpose()?;
    let keep = |row: i64, f: &Id, extractor: &str, meta: &str| {
        mentioned.as_ref().is_none_or(|m| m.contains(&row))
            && versions.contains(f)
            && model_matches(model, extractor, meta)
            && type_filter.is_none_or(|t| {
                type_matches(t, file_type(extractor))
                    || ((matches!(extractor, "subtitles" | "media")
                        || crate::speech::is_transcript(extractor))
                        && matches!(t, "video" | "audio"))
            })
    };
    let mut seen_hits = HashSet::new();
    let wanted = limit.saturating_mul(4).max(limit);
    let segments = match (fts, mentions) {
        (Some(fts), _) => catalog.search_segments(
            fts,
            &keep,
            wanted,
            versions
                .small(lifeos_catalog::SCOPE_FIRST_SEGMENTS)
                .as_deref(),
        )?,
        (None, Some(eid)) => catalog.mention_segments(eid, &keep, wanted)?,
        (None, None) => Vec::new(),
    };
    // The paths and commits of the contents hit (and, for subtitles, every path in scope).
    let hit_files: HashSet<Id> = segments.iter().map(|s| s.file).collect();
    let hit_versions = versions.of(&hit_files);
    let all_paths = std::cell::OnceCell::new();
    let all_paths = || {
        all_paths.get_or_init(|| {
            let mut all = HashSet::new();
            versions.each(&mut |p, _| {
                all.insert(lifeos_vcs::path::display(p).into_owned());
            });
            all
        })
    };
    // At a view the hits are cut at `limit` in the order they are made (content, then
    // names): once that many are made, none after would show.
    let full = |made: usize| matches!(scope, Versions::View(_)) && made >= limit;
    for s in segments {
        if full(hits.len()) {
            break;
        }
        let ty = file_type(&s.extractor).to_string();
        // The same segment from two extractors of one file (image and image-ocr both
        // give its metadata) is one hit.
        if !seen_hits.insert((s.file, s.anchor.clone(), s.text.clone())) {
            continue;
        }
        // Snippets are made once the list is cut (each is an FTS5 query): noted by row.
        let (snippet, row) = match fts {
            Some(_) => (String::new(), Some((s.row, cut_text(&s.text)))),
            None => (cut_text(&s.text), None),
        };
        let anchor: serde_json::Value = serde_json::from_str(&s.anchor).unwrap_or_default();
        let Some(at) = hit_versions.get(&s.file) else {
            continue;
        };
        for (path, commit) in at {
            // A recording's type is its path's: audio or video.
            let ty = if ty == "media" || crate::speech::is_transcript(&ty) {
                media_type(path).to_string()
            } else {
                ty.clone()
            };
            let media = if ty == "subtitles" {
                sidecar_media(path, all_paths())
            } else {
                None
            };
            if let Some(t @ ("video" | "audio")) = type_filter {
                if !type_matches(t, &ty) && media.as_deref().is_none_or(|m| media_type(m) != t) {
                    continue;
                }
            }
            let hit = Hit {
                media,
                path: path.clone(),
                commit: *commit,
                file: s.file,
                cite: cite(&anchor),
                anchor: anchor.clone(),
                snippet: snippet.clone(),
                kind: s.kind.clone(),
                file_type: ty.clone(),
                score: s.score,
            };
            hits.push((hit, row.clone()));
        }
    }
    // Names: every file whose path holds the words (found even when no extractor reads
    // it), unless the hits are an entity's mentions or the list is full already.
    let mut names: Vec<Hit> = Vec::new();
    let mut names_match = q.path_matcher();
    let names_shown = mentions.is_none() && !full(hits.len());
    let mut name_hit = |path: &[u8], version: &Version<'_>| {
        let shown = lifeos_vcs::path::display(path);
        let path: &str = &shown;
        if !names_match.matches(path) {
            return;
        }
        let ty = match lifeos_speech::audio::extension(path).as_str() {
            "png" | "jpg" | "jpeg" | "gif" | "webp" | "tif" | "tiff" | "bmp" => "image",
            "pdf" => "pdf",
            "md" | "markdown" => "markdown",
            "srt" | "vtt" => "subtitles",
            "html" | "htm" => "html",
            _ if crate::speech::is_recording(path) => media_type(path),
            _ => "file",
        };
        if type_filter.is_some_and(|t| !type_matches(t, ty)) {
            return;
        }
        let (file, commit) = version();
        names.push(Hit {
            media: None,
            path: path.to_string(),
            commit,
            file,
            anchor: serde_json::json!({"kind": "file"}),
            cite: "file name".into(),
            snippet: path.to_string(),
            kind: "name".into(),
            file_type: ty.into(),
            score: f64::MAX,
        });
    };
    if names_shown {
        versions.each(&mut name_hit);
    }
    names.sort_by(|a, b| a.path.cmp(&b.path));
    hits.extend(names.into_iter().map(|h| (h, None)));
    if matches!(scope, Versions::AllHistory) {
        // Grouped by file: each path's versions together, best first.
        let mut best: HashMap<String, f64> = HashMap::new();
        for (h, _) in &hits {
            let e = best.entry(h.path.clone()).or_insert(h.score);
            *e = e.min(h.score);
        }
        hits.sort_by(|(a, _), (b, _)| {
            best[&a.path]
                .total_cmp(&best[&b.path])
                .then(a.path.cmp(&b.path))
                .then(a.score.total_cmp(&b.score))
        });
    }
    hits.truncate(limit);
    // The snippets of the hits shown, each segment's once.
    let mut made: HashMap<i64, String> = HashMap::new();
    let mut shown = Vec::with_capacity(hits.len());
    for (mut h, row) in hits {
        if let (Some((row, cut)), Some(fts)) = (row, fts) {
            h.snippet = match made.get(&row) {
                Some(s) => s.clone(),
                None => {
                    // (A row a concurrent sync replaced since: its text as found, cut.)
                    let s = catalog.snippet(fts, row)?.unwrap_or(cut);
                    made.insert(row, s.clone());
                    s
                }
            };
        }
        shown.push(h);
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_vcs::commit::CommitOptions;
    use lifeos_vcs::object::{Anchor, Extract, Segment};
    use lifeos_vcs::working_copy::NoProgress;
    use lifeos_vcs::Event;

    /// A scope is small by its different contents, not its paths: a tree of 30 files
    /// holding 2 contents is searched segment by segment where at most 5 may be.
    #[test]
    fn a_scope_is_small_by_its_different_contents() {
        let files: Vec<(String, Vec<u8>)> = (0..30u8)
            .map(|i| (format!("f{i}"), vec![b'a' + i % 2]))
            .collect();
        let (_dir, repo, _) = committed(&files);
        let tree = repo.at_tree(&repo.head().unwrap().view).unwrap().unwrap();
        let index = || Some((file_index::of_tree(&repo, &tree).unwrap(), Id([0; 32])));
        let v = VersionSet::new(index(), Listed::default());
        assert_eq!(v.small(5).map(|s| s.len()), Some(2));
        assert!(v.small(1).is_none());
        let mut listed = Listed::default();
        listed.push(b"other", Id([3; 32]), Id([0; 32]));
        let v = VersionSet::new(index(), listed);
        assert_eq!(v.small(3).map(|s| s.len()), Some(3));
        assert!(v.small(2).is_none());
    }

    #[test]
    fn a_glob_is_read_from_the_folder_it_starts_with() {
        for (glob, folder) in [
            ("notes/d007/**", "notes/d007"),
            ("notes/d0*/x.md", "notes"),
            ("notes/a.md", "notes"),
            ("a/b/{c,d}/e", "a/b"),
            ("a/[bc]/e", "a"),
            ("a/b\\*c", "a"),
            ("*.md", ""),
            ("**/x", ""),
            ("x.md", ""),
            ("./notes/*.md", ""),
            ("/notes/*.md", ""),
            ("notes//*.md", ""),
            ("../x/*", ""),
        ] {
            assert_eq!(glob_folder(glob), folder.as_bytes(), "{glob}");
        }
    }

    /// A repository whose first commit holds `files`, and the id of each file.
    fn committed(files: &[(String, Vec<u8>)]) -> (tempfile::TempDir, Repo, Vec<Id>) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        for (p, bytes) in files {
            std::fs::write(dir.path().join(p), bytes).unwrap();
        }
        let wc = repo.lock_working_copy().unwrap();
        let opts = CommitOptions {
            message: b"files",
            ..CommitOptions::default()
        };
        repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
        let tree = repo.at_tree(&repo.head().unwrap().view).unwrap().unwrap();
        let ids = files
            .iter()
            .map(|(p, _)| repo.lookup_path(&tree, p.as_bytes()).unwrap().unwrap().id)
            .collect();
        (dir, repo, ids)
    }

    /// Records `extracts` as an ingest would.
    fn publish_extracts(repo: &Repo, extracts: &[Extract]) {
        let head = repo.head().unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let results = extracts
            .iter()
            .map(|x| {
                tx.write_object(lifeos_store::Kind::Extract, &x.encode())
                    .unwrap()
            })
            .collect();
        repo.publish(
            tx,
            &[head.id],
            head.view.clone(),
            "ingest",
            vec![Event::ContentExtracted { results }],
            lifeos_vcs::repo::now_ms(),
        )
        .unwrap();
    }

    /// `search --model M --limit N` returned fewer than N hits when another model's
    /// segments ranked above M's: the model was checked after the limit was applied.
    #[test]
    fn the_model_is_checked_before_the_limit() {
        let (_dir, repo, ids) = committed(&[
            ("alpha.wav".into(), b"alpha".to_vec()),
            ("beta.wav".into(), b"beta".to_vec()),
        ]);
        let file = |p: &str| ids[usize::from(p == "beta.wav")];
        // Default transcripts (extractor `speech`) whose metadata names their model: many
        // by alpha that rank first for the word, one by beta.
        let transcript = |file: Id, model: &str, texts: &[&str]| Extract {
            file,
            extractor: "speech".into(),
            version: 1,
            outcome: Ok(texts
                .iter()
                .enumerate()
                .map(|(i, t)| Segment {
                    kind: "speech".into(),
                    anchor: Anchor::Time {
                        start_ms: i as u64 * 1000,
                        end_ms: i as u64 * 1000 + 900,
                    },
                    text: t.to_string(),
                    meta: format!(r#"{{"model":"{model}"}}"#),
                })
                .collect()),
        };
        publish_extracts(
            &repo,
            &[
                transcript(file("alpha.wav"), "alpha", &["tomato tomato tomato"; 30]),
                transcript(
                    file("beta.wav"),
                    "beta",
                    &["the tomato plants grow in the garden"],
                ),
            ],
        );
        let view = repo.head().unwrap().view;
        let found = |model, limit| {
            let filters = Filters {
                file_type: None,
                path: None,
                mentions: None,
                model: Some(model),
            };
            search(&repo, "tomato", Versions::View(&view), &filters, limit)
                .unwrap()
                .into_iter()
                .map(|h| h.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(found("beta", 1), ["beta.wav"]);
        assert_eq!(found("alpha", 3), ["alpha.wav"; 3]);
        // The same through the ranking of every match (a scope too large to search
        // segment by segment).
        let cat = repo.catalog().unwrap();
        let beta = |_: i64, _: &Id, extractor: &str, meta: &str| {
            model_matches(Some("beta"), extractor, meta)
        };
        let hits = cat.search_segments("tomato", &beta, 1, None).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].file, file("beta.wav"));
    }

    /// A small scope is searched run by run of row ids; it finds what ranking every match
    /// and keeping the scope's finds, in the same order with the same scores.
    #[test]
    fn a_small_scope_finds_what_ranking_every_match_finds() {
        let notes: Vec<(String, Vec<u8>)> = (0..40)
            .map(|i| (format!("n{i:02}.md"), i.to_string().into_bytes()))
            .collect();
        let (_dir, repo, ids) = committed(&notes);
        let file = |i: usize| ids[i];
        let extracts: Vec<Extract> = (0..40)
            .map(|i| {
                // Each note mentions the word a different number of times, among a
                // different number of other words, so no two rank the same.
                let text = format!("{} {}", "tomato ".repeat(i % 7 + 1), "leaf ".repeat(i));
                Extract {
                    file: file(i),
                    extractor: "markdown".into(),
                    version: 1,
                    outcome: Ok(vec![Segment {
                        kind: "section".into(),
                        anchor: Anchor::Lines { start: 1, end: 1 },
                        text,
                        meta: String::new(),
                    }]),
                }
            })
            .collect();
        publish_extracts(&repo, &extracts);
        let cat = repo.catalog().unwrap();
        let scope: IdSet = (0..40).step_by(3).map(file).collect();
        let keep = |_: i64, f: &Id, _: &str, _: &str| scope.contains(f);
        let hits = |scope: Option<&IdSet>| {
            cat.search_segments("tomato", &keep, 6, scope)
                .unwrap()
                .into_iter()
                .map(|h| (h.file, h.score.to_bits(), h.text))
                .collect::<Vec<_>>()
        };
        let by_segment = hits(Some(&scope));
        assert_eq!(by_segment.len(), 6);
        assert_eq!(by_segment, hits(None));
    }
}
