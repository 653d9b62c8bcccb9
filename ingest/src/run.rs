//! Running ingest: one job per (file content, extractor, version), in parallel, with
//! results published in batches so a killed ingest resumes where it stopped.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use lifeos_catalog::JobState;
use lifeos_store::{Id, Kind};
use lifeos_vcs::object::{EntryKind, Event, Extract, Segment};
use lifeos_vcs::path::{in_folder, BString};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;

use crate::extractor::Extractor;
use crate::files::head_bytes;
use crate::registry::choose;
use crate::settings::Settings;
use crate::speech::SpeechStatus;
use crate::Result;
use lifeos_catalog::CatalogExt;

/// Files larger than this are recorded as failures instead of being read.
pub const MAX_INGEST: u64 = 256 << 20;
/// Results are published every this many jobs.
const BATCH: usize = 64;

/// What one ingest run covers.
#[derive(Debug, Default, Clone)]
pub struct Selection {
    /// Only these paths of `@` (a file, or a folder and everything under it); empty:
    /// every file content in the visible history.
    pub paths: Vec<Vec<u8>>,
    /// Transcribe recordings with this installed model, recording the transcripts under
    /// `speech:<model>` beside the default model's (`None`: the configured or default
    /// model, under `speech`).
    pub model: Option<String>,
}

/// What `ingest` did.
#[derive(Debug, Default)]
pub struct Report {
    /// Distinct file contents considered.
    pub files: u64,
    /// Already extracted before this run.
    pub already: u64,
    /// Extracted now.
    pub extracted: u64,
    /// Failed now (path, reason).
    pub failed: Vec<(String, String)>,
    /// Failed before and not retried (use --retry-failed).
    pub failed_before: u64,
    /// Excluded by config.
    pub excluded: u64,
    /// Of a kind no extractor reads (still found by name).
    pub no_extractor: u64,
    /// Whether OCR ran (false when tesseract is missing or OCR is off).
    pub ocr: bool,
    /// Whether tesseract is installed.
    pub tesseract: bool,
    /// Operations published.
    pub operations: u64,
    /// Whether recordings were transcribed, and why not (`None`: no recording to do).
    pub speech: Option<SpeechStatus>,
    /// Recordings indexed by metadata only, for want of a speech model.
    pub without_speech: u64,
    /// Seconds of audio transcribed.
    pub audio_seconds: f64,
    /// Seconds spent on them (decoding, transcribing, storing).
    pub speech_seconds: f64,
}

/// How far an ingest is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Jobs finished.
    pub done: u64,
    /// Jobs in all.
    pub total: u64,
    /// Seconds of audio transcribed so far.
    pub audio_seconds: f64,
    /// Seconds spent transcribing so far.
    pub speech_seconds: f64,
}

/// Every distinct file content reachable from the current view, with one path for it.
pub fn reachable_files(repo: &Repo) -> Result<Vec<(Id, String, u64)>> {
    let head = repo.head()?;
    let commits = lifeos_vcs::rev::all_commits(repo, &head.view)?;
    let mut seen_trees = HashSet::new();
    let mut files: HashMap<Id, (String, u64)> = HashMap::new();
    let mut stack: Vec<(Id, String)> = commits
        .iter()
        .map(|(_, c)| (c.tree, String::new()))
        .collect();
    while let Some((t, prefix)) = stack.pop() {
        if !seen_trees.insert(t) {
            continue;
        }
        for e in repo.tree(&t)?.entries {
            let name = String::from_utf8_lossy(&e.name);
            let path = if prefix.is_empty() {
                name.into_owned()
            } else {
                format!("{prefix}/{name}")
            };
            match e.kind {
                EntryKind::Dir => stack.push((e.id, path)),
                EntryKind::Symlink | EntryKind::Gitlink => {}
                _ => {
                    files.entry(e.id).or_insert((path, e.size));
                }
            }
        }
    }
    let mut v: Vec<(Id, String, u64)> = files.into_iter().map(|(id, (p, s))| (id, p, s)).collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(v)
}

/// Extracts every file content that has not been extracted yet (and, with
/// `retry_failed`, those that failed), or those `only` selects: documents and images on
/// every core, in batches; recordings one at a time, each published as soon as it is
/// done, so a killed ingest loses at most the recording it was on. `progress` is called
/// as jobs finish.
pub fn ingest(
    repo: &Repo,
    retry_failed: bool,
    only: &Selection,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report> {
    let mut settings = Settings::load(repo)?;
    if let Some(model) = &only.model {
        settings.pin_model(model)?;
    }
    let store = repo.store_arc();
    let catalog = repo.catalog()?;
    let mut report = Report {
        ocr: settings.ocr(),
        tesseract: settings.tesseract(),
        ..Report::default()
    };
    let files = if only.paths.is_empty() {
        reachable_files(repo)?
    } else {
        let tree = match repo.head()?.view.at_commit() {
            Some(c) => Some(repo.commit(&c)?.tree),
            None => None,
        };
        crate::files::files_at(repo, tree.as_ref(), &only.paths, "@")?
    };
    let (mut jobs, mut streams): (Vec<Job>, Vec<Job>) = (Vec::new(), Vec::new());
    for (id, path, size) in files {
        report.files += 1;
        if settings.excluded(&path) {
            report.excluded += 1;
            continue;
        }
        let Some(ex) = choose(
            &path,
            &|| head_bytes(&store, &id),
            &|| settings.ocr(),
            &|| settings.speech(),
        ) else {
            report.no_extractor += 1;
            continue;
        };
        if let Some(job) = to_run(&catalog, &mut report, retry_failed, (id, path, size, ex))? {
            if job.3.streams() {
                streams.push(job);
            } else {
                jobs.push(job);
            }
        }
    }
    // The model is verified and loaded only now that a recording needs it; if it cannot
    // be, recordings get metadata jobs instead, as without a model.
    let speech_jobs = streams
        .iter()
        .any(|j| crate::speech::is_transcript(j.3.name()));
    if speech_jobs && settings.speech().is_some_and(|e| e.ready().is_err()) {
        for (id, path, size, ex) in std::mem::take(&mut streams) {
            let ex: Box<dyn Extractor> = if crate::speech::is_transcript(ex.name()) {
                Box::new(crate::speech::Media { engine: None })
            } else {
                ex
            };
            streams.extend(to_run(
                &catalog,
                &mut report,
                retry_failed,
                (id, path, size, ex),
            )?);
        }
    }
    drop(catalog);
    report.speech = settings.speech_status();
    let total = (jobs.len() + streams.len()) as u64;
    let state = std::sync::Mutex::new(Progress {
        total,
        ..Progress::default()
    });
    let one_done = || {
        let mut p = state.lock().expect("progress");
        p.done += 1;
        progress(*p);
    };
    for batch in jobs.chunks(BATCH) {
        let results = lifeos_store::par::map(batch, |(id, path, size, ex)| {
            let outcome = if *size > MAX_INGEST {
                Err(format!(
                    "too large to index ({size} bytes, the limit is {MAX_INGEST})"
                ))
            } else {
                let mut bytes = Vec::new();
                match store.read_file(id, &mut bytes) {
                    Ok(_) => {
                        // Text is redacted whole first, so a secret spanning several
                        // segments (a long private key) is caught; line breaks are kept.
                        if let Ok(text) = std::str::from_utf8(&bytes) {
                            bytes = settings.redactor.redact(text).into_bytes();
                        }
                        guarded(ex.as_ref(), || ex.extract(path, &bytes))
                    }
                    Err(e) => Err(format!("cannot read the stored file: {e}")),
                }
            };
            one_done();
            finish(&settings, id, ex.as_ref(), outcome)
        });
        publish(repo, &mut report, results, batch.iter().map(|j| &j.1))?;
    }
    for job in &streams {
        let (id, path, _, ex) = job;
        let started = std::time::Instant::now();
        let before = *state.lock().expect("progress");
        let open = || {
            let r = lifeos_store::reader::FileReader::open(store.clone(), id)
                .map_err(std::io::Error::other)?;
            let len = r.size();
            Ok((Box::new(r) as Box<dyn lifeos_speech::audio::Source>, len))
        };
        let outcome = guarded(ex.as_ref(), || {
            ex.extract_from(path, &open, &|secs| {
                let mut p = state.lock().expect("progress");
                p.audio_seconds = before.audio_seconds + secs;
                p.speech_seconds = before.speech_seconds + started.elapsed().as_secs_f64();
                progress(*p);
            })
        });
        // The audio done is what the last progress call said; the time runs to now.
        if crate::speech::is_transcript(ex.name()) {
            let mut p = state.lock().expect("progress");
            p.speech_seconds = before.speech_seconds + started.elapsed().as_secs_f64();
        } else {
            report.without_speech += 1;
        }
        let x = finish(&settings, id, ex.as_ref(), outcome);
        publish(repo, &mut report, vec![x], std::iter::once(path))?;
        one_done();
    }
    let p = *state.lock().expect("progress");
    report.audio_seconds = p.audio_seconds;
    report.speech_seconds = p.speech_seconds;
    // What was recorded is indexed for search by the command that recorded it, not by
    // the next search (at 20,000 notes that one took 0.55 s instead of 0.01 s). The
    // catalog is only an index: if it cannot be brought up to date now (a full disk, a
    // catalog busy for longer than its timeout), the extracts are recorded all the same
    // and the next command that reads it tries again.
    let _ = repo.catalog();
    Ok(report)
}

/// An ingest job: a file content, one path of it, its size, and its extractor.
type Job = (Id, String, u64, Box<dyn Extractor>);

/// The job, unless it already ran (counted as done, or as failed before when failures
/// are not retried).
fn to_run(
    catalog: &lifeos_catalog::Catalog,
    report: &mut Report,
    retry_failed: bool,
    job: Job,
) -> Result<Option<Job>> {
    Ok(match catalog.job(&job.0, job.3.name(), job.3.version())? {
        Some(JobState::Done) => {
            report.already += 1;
            None
        }
        Some(JobState::Failed(_)) if !retry_failed => {
            report.failed_before += 1;
            None
        }
        _ => Some(job),
    })
}

/// Runs an extractor so that a panic on hostile input (in it or a library it uses) is a
/// failure of this file, not of the whole ingest.
fn guarded(
    ex: &dyn Extractor,
    f: impl FnOnce() -> std::result::Result<Vec<Segment>, String>,
) -> std::result::Result<Vec<Segment>, String> {
    lifeos_speech::audio::guard(f, |_| {
        format!(
            "the {} extractor failed on this file (it panicked)",
            ex.name()
        )
    })
}

/// The extract object of a job: its segments redacted.
fn finish(
    settings: &Settings,
    id: &Id,
    ex: &dyn Extractor,
    outcome: std::result::Result<Vec<Segment>, String>,
) -> Extract {
    Extract {
        file: *id,
        extractor: ex.name().to_string(),
        version: ex.version(),
        outcome: outcome.map(|segs| {
            segs.into_iter()
                .map(|mut s| {
                    s.text = settings.redactor.redact(&s.text);
                    s.meta = settings.redactor.redact_json(&s.meta);
                    s
                })
                .collect()
        }),
    }
}

/// Records extract objects in one operation.
fn publish<'a>(
    repo: &Repo,
    report: &mut Report,
    results: Vec<Extract>,
    paths: impl Iterator<Item = &'a String>,
) -> Result<()> {
    let start = now_ms();
    let head = repo.head()?;
    let mut tx = repo.store().transaction()?;
    let mut ids = Vec::new();
    for (x, path) in results.iter().zip(paths) {
        ids.push(tx.write_object(Kind::Extract, &x.encode())?);
        match &x.outcome {
            Ok(_) => report.extracted += 1,
            Err(r) => report.failed.push((path.clone(), r.clone())),
        }
    }
    let n = ids.len();
    repo.publish(
        tx,
        &[head.id],
        head.view.clone(),
        &format!("ingest: {n} files"),
        vec![Event::ContentExtracted { results: ids }],
        start,
    )?;
    report.operations += 1;
    Ok(())
}

/// A commit indexes what it read only when the change is small: at most this many files...
const SMALL_FILES: usize = 500;
/// ...of at most this many bytes in all...
const SMALL_BYTES: u64 = 32 << 20;
/// ...none larger than this.
const SMALL_FILE: u64 = 8 << 20;

/// The commit hook that indexes a small change for search in the commit's own operation
/// (`[ingest] after_commit`), with these settings.
pub struct SmallChanges(pub Settings);

impl lifeos_vcs::commit::CommitHook for SmallChanges {
    fn recorded(
        &self,
        repo: &Repo,
        tx: &mut lifeos_store::Transaction<'_>,
        _view: &mut lifeos_vcs::View,
        rec: &lifeos_vcs::commit::Recorded<'_>,
    ) -> lifeos_vcs::Result<lifeos_vcs::commit::HookReport> {
        Ok(lifeos_vcs::commit::HookReport {
            events: extract_small_change(repo, &self.0, tx, rec.read)?,
            notes: Vec::new(),
        })
    }
}

/// Extracts the files a commit read, if they are a small change, writing the results into
/// the commit's transaction; returns the event for the commit's operation. Content is read
/// from the folder (the transaction is not yet readable) and checked against its id.
fn extract_small_change(
    repo: &Repo,
    settings: &Settings,
    tx: &mut lifeos_store::Transaction<'_>,
    files: &[(BString, Id, u64)],
) -> lifeos_vcs::Result<Vec<Event>> {
    if !settings.after_commit {
        return Ok(Vec::new());
    }
    // Recordings are left to `lifeos ingest`: transcription is too slow for a commit.
    // The jobs are gathered until they stop being a small change: a first commit of a
    // million files gives up after the first few hundred, not after a list of them all.
    let mut jobs: Vec<(String, &BString, &Id, Box<dyn Extractor>)> = Vec::new();
    let mut total = 0u64;
    for (p, id, size) in files {
        // Extractors and exclude globs take the name itself (lossy where it is not
        // UTF-8, as `lifeos ingest` does), not the quoted form people see.
        let name = String::from_utf8_lossy(p).into_owned();
        if settings.excluded(&name) {
            continue;
        }
        let head = || {
            let mut head = Vec::new();
            if let Ok(f) = std::fs::File::open(in_folder(repo.workdir(), p)) {
                let _ = f.take(4096).read_to_end(&mut head);
            }
            head
        };
        let Some(ex) = choose(&name, &head, &|| settings.ocr(), &|| None) else {
            continue;
        };
        if ex.streams() {
            continue;
        }
        total += size;
        if jobs.len() == SMALL_FILES || total > SMALL_BYTES || *size > SMALL_FILE {
            return Ok(Vec::new());
        }
        jobs.push((name, p, id, ex));
    }
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let results: Vec<Option<Extract>> = lifeos_store::par::map(&jobs, |(name, path, id, ex)| {
        let bytes = std::fs::read(in_folder(repo.workdir(), path)).ok()?;
        if Id::hash(&bytes) != **id {
            return None; // changed since the snapshot read it: left for `lifeos ingest`
        }
        let bytes = match std::str::from_utf8(&bytes) {
            Ok(t) => settings.redactor.redact(t).into_bytes(),
            Err(_) => bytes,
        };
        let outcome = guarded(ex.as_ref(), || ex.extract(name, &bytes));
        Some(finish(settings, id, ex.as_ref(), outcome))
    });
    let mut ids = Vec::new();
    for x in results.into_iter().flatten() {
        ids.push(tx.write_object(Kind::Extract, &x.encode())?);
    }
    Ok(if ids.is_empty() {
        Vec::new()
    } else {
        vec![Event::ContentExtracted { results: ids }]
    })
}
