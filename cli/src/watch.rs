//! `lifeos watch`: commits the folder once it has been quiet for a while, indexes what
//! changed, fires the rules (time rules too), and logs what it does, until SIGINT or
//! SIGTERM. It stops between two steps, never in the middle of one.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lifeos_actions::rules::parse_duration;
use lifeos_actions::schedule::Schedule;
use lifeos_actions::{Rules, Trigger};
use lifeos_fsmonitor::{FolderWatch, Wake};
use lifeos_fsmonitor::{Monitor, MonitorError};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::error::{CliError, CliResult};
use crate::output::{local_time, Style};

/// Says what the watcher did, with the time.
fn log(what: &str) {
    println!("{} {what}", local_time(now_ms()));
}

/// The time rules of the trusted rules at `@`, each with its next slot after `now`.
fn time_rules(repo: &Repo, now: i64, tz: &jiff::tz::TimeZone) -> Vec<(String, Schedule, i64)> {
    let actions = crate::actions::actions_of(repo);
    let rules = match (actions.rules_at_head(), actions.trusted()) {
        (Ok(Some((id, text))), Ok(Some(t))) if id == t => Rules::parse(&text).ok(),
        _ => None,
    };
    rules
        .map(|r| r.rules)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            let s = r.schedule?;
            Some((r.name, s, s.next_after(now, tz)))
        })
        .collect()
}

/// `lifeos watch`.
pub fn watch(repo: &Repo, quiet: &str, rescan: &str, ingest: bool, style: Style) -> CliResult<u8> {
    let duration = |flag: &str, t: &str| {
        parse_duration(t)
            .map(|ms| Duration::from_millis(ms as u64))
            .ok_or_else(|| {
                CliError::new(format!("{flag} {t:?} is not a duration"))
                    .hint("for example 500ms, 2s or 10m")
            })
    };
    let quiet = duration("--quiet-period", quiet)?;
    let rescan = duration("--rescan", rescan)?;
    // One thread: the steps (commit, ingest, rules) block it while they run, and the
    // runtime only waits for what comes next.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the watcher's runtime: {e}")))?;
    runtime.block_on(watch_loop(repo, quiet, rescan, ingest, style))
}

fn monitor_error(e: MonitorError) -> CliError {
    let hint = match e {
        MonitorError::Busy => "stop the other one first: one watcher per folder",
        MonitorError::Remote { .. } => "run lifeos watch on the machine that holds the disk",
        MonitorError::Io { .. } => {
            "status and commit still work without it, reading the whole folder"
        }
    };
    CliError::new(e.to_string()).hint(hint)
}

/// SIGTERM, SIGINT and SIGHUP, to wait for in the runtime (which must be running).
fn stop_signals() -> CliResult<(Signal, Signal, Signal)> {
    let signals = |kind: SignalKind| {
        signal(kind).map_err(|e| CliError::new(format!("cannot wait for signals: {e}")))
    };
    Ok((
        signals(SignalKind::terminate())?,
        signals(SignalKind::interrupt())?,
        signals(SignalKind::hangup())?,
    ))
}

/// `lifeos watch --index-only`: keeps the folder monitor running until SIGINT or SIGTERM,
/// for `status` and `commit` to ask.
pub fn monitor_only(repo: &Repo) -> CliResult<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the watcher's runtime: {e}")))?;
    let monitor =
        Monitor::start(repo.workdir(), repo.dot_dir(), None, None).map_err(monitor_error)?;
    runtime.block_on(async {
        let (mut term, mut int, mut hup) = stop_signals()?;
        // A signal stops it here, where the socket is removed, not by the default action.
        crate::signals::interrupt()
            .default_allowed_flag()
            .store(false, Ordering::SeqCst);
        log(&format!(
            "watching {} for status and commit (SIGINT or SIGTERM stops)",
            repo.workdir().display()
        ));
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        Ok::<(), CliError>(())
    })?;
    if let Some(why) = monitor.broken() {
        log(&format!(
            "the monitor had stopped vouching for the folder: {why}"
        ));
    }
    drop(monitor);
    log("stopped");
    Ok(0)
}

/// What `lifeos watch` does until a signal asks it to stop.
async fn watch_loop(
    repo: &Repo,
    quiet: Duration,
    rescan: Duration,
    ingest: bool,
    style: Style,
) -> CliResult<u8> {
    use tokio::time::{sleep_until, Instant as Deadline};
    let actions = crate::actions::actions_of(repo);
    let mut folder = FolderWatch::start(repo.workdir(), repo.dot_dir(), &actions.trust_file())
        .map_err(monitor_error)?;
    let (mut term, mut int, mut hup) = stop_signals()?;
    // Signals only ask: the loop stops between two steps, and a step that changes the
    // folder stops between two files.
    let interrupt = crate::signals::interrupt();
    let default_allowed = interrupt.default_allowed_flag();
    let requested = interrupt.requested_flag();
    default_allowed.store(false, Ordering::SeqCst);
    let tz = jiff::tz::TimeZone::system();
    let mut schedule = time_rules(repo, now_ms(), &tz);
    log(&format!(
        "watching {} (commit {} ms after the last change, {} time rules; SIGINT or SIGTERM stops)",
        repo.workdir().display(),
        quiet.as_millis(),
        schedule.len()
    ));
    // The folder and its store as they were when the watch started: moved or deleted,
    // the watch stops instead of trying again forever.
    let home = identity(repo.workdir());
    // A first look for what changed while nothing watched.
    let mut changed_at: Option<Instant> = Some(Instant::now() - quiet);
    let mut next_rescan = Instant::now() + rescan;
    let mut watching = true;
    loop {
        let now = Instant::now();
        let mut wake_at = next_rescan;
        if let Some(t) = changed_at {
            wake_at = wake_at.min(t + quiet);
        }
        if let Some(next) = schedule.iter().map(|s| s.2).min() {
            wake_at = wake_at.min(now + Duration::from_millis((next - now_ms()).max(0) as u64));
        }
        tokio::select! {
            biased;
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => break,
            wake = folder.next(), if watching => match wake {
                Some(Wake::Changed) => changed_at = Some(Instant::now()),
                Some(Wake::Rescan) => changed_at = Some(Instant::now() - quiet),
                Some(Wake::Trust) => {
                    schedule = rescheduled(schedule, time_rules(repo, now_ms(), &tz));
                    log(&format!("rules trusted again: {} time rules", schedule.len()));
                }
                None => {
                    log("warning: the folder watcher stopped; changes are found by the periodic rescan");
                    watching = false;
                }
            },
            _ = sleep_until(Deadline::from_std(wake_at)) => {}
        }
        if identity(repo.workdir()) != home || !repo.dot_dir().is_dir() {
            log("stopped: the folder was moved or deleted");
            return Err(CliError::new(format!(
                "{} was moved or deleted while lifeos watched it, so nothing more is recorded",
                repo.workdir().display()
            ))
            .hint("start `lifeos watch` again in the folder where it is now"));
        }
        // A signal that came during a step stops the loop before the next one.
        let stop = || requested.load(Ordering::SeqCst);
        if changed_at.is_some_and(|t| t.elapsed() >= quiet) && !stop() {
            changed_at = None;
            if let Err(again) = commit_step(repo, ingest, style) {
                changed_at = Some(again);
            } else {
                schedule = rescheduled(schedule, time_rules(repo, now_ms(), &tz));
            }
        }
        let now = now_ms();
        for (rule, s, next) in schedule.iter_mut() {
            if *next <= now && !stop() {
                log(&format!(
                    "time rule {rule:?}: slot of {}",
                    local_time(*next)
                ));
                let slot = Trigger::Time {
                    rule: rule.clone(),
                    slot_ms: *next,
                };
                crate::actions::fire(repo, &[(slot, None)], style);
                *next = s.next_after(now, &tz);
            }
        }
        if Instant::now() >= next_rescan {
            changed_at.get_or_insert(Instant::now() - quiet);
            next_rescan = Instant::now() + rescan;
        }
    }
    log("stopped");
    Ok(0)
}

/// Which folder `path` is (device and inode), if there is one there.
fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The time rules `fresh` read from the rules at `@`, keeping the next slot of each rule
/// that was already scheduled the same way: reading the rules again never skips a slot
/// that is due.
fn rescheduled(
    old: Vec<(String, Schedule, i64)>,
    fresh: Vec<(String, Schedule, i64)>,
) -> Vec<(String, Schedule, i64)> {
    fresh
        .into_iter()
        .map(|(name, s, next)| {
            let kept = old
                .iter()
                .find(|(n, o, _)| *n == name && *o == s)
                .map_or(next, |(_, _, n)| *n);
            (name, s, kept)
        })
        .collect()
}

/// Commits what changed through the commit pipeline (which fires the commit's rules and
/// exports it to git), then indexes it and fires the rules for what else changed. A commit
/// that failed (a file still being written, a full disk) returns when to try again.
fn commit_step(repo: &Repo, ingest: bool, style: Style) -> Result<(), Instant> {
    let start = now_ms();
    let asked = lifeos_vcs::commit::CommitOptions {
        message: b"changes seen by lifeos watch",
        ..Default::default()
    };
    match crate::commands::record_folder(repo, asked, &lifeos_vcs::working_copy::NoProgress, style)
    {
        Ok(out) => {
            if let Some(c) = out.commit {
                log(&format!(
                    "committed {} ({} files, {} read)",
                    c.short(12),
                    out.snapshot.files,
                    out.snapshot.files_read
                ));
                if ingest {
                    if let Err(e) =
                        crate::knowledge::ingest(repo, false, &Default::default(), false)
                    {
                        log(&format!("warning: ingest failed: {}", e.message));
                    }
                }
                crate::actions::fire_since(repo, start, style);
            }
            Ok(())
        }
        Err(e) => {
            log(&format!("warning: not committed: {}", e.message));
            Err(Instant::now())
        }
    }
}
