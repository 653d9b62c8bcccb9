//! `lifeos watch`: commits the folder once it has been quiet for a while, indexes what
//! changed, fires the rules (time rules too), and logs what it does, until SIGINT or
//! SIGTERM. It stops between two steps, never in the middle of one.

use std::sync::atomic::Ordering;
use std::time::Duration;

use lifeos_actions::rules::parse_duration;
use lifeos_actions::Trigger;
use lifeos_app::watch::{Pace, WatchError, WatchEvent, WatchSteps};
use lifeos_fsmonitor::{Monitor, MonitorError};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{local_time, Style};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// How long the folder must be quiet before a commit.
    #[arg(long = "quiet-period", value_name = "DURATION", default_value = "2s")]
    pub quiet_period: String,
    /// How often to look at the whole folder anyway (events can be lost).
    #[arg(long, default_value = "10m")]
    pub rescan: String,
    /// Do not extract text after a commit (small changes are still indexed by the
    /// commit itself).
    #[arg(long)]
    pub no_ingest: bool,
    /// Only keep track of what changes, for `status` and `commit` to look at those
    /// paths alone: commit nothing, fire no rule.
    #[arg(long, conflicts_with_all = ["quiet_period", "rescan", "no_ingest"])]
    pub index_only: bool,
}

impl Verb for WatchArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let repo = ctx.repo()?;
        if self.index_only {
            return monitor_only(repo);
        }
        watch(
            repo,
            &self.quiet_period,
            &self.rescan,
            !self.no_ingest,
            ctx.style(),
        )
    }
}

/// Says what the watcher did, with the time.
fn log(what: &str) {
    println!("{} {what}", local_time(now_ms()));
}

/// `lifeos watch`.
fn watch(repo: &Repo, quiet: &str, rescan: &str, ingest: bool, style: Style) -> CliResult<u8> {
    let duration = |flag: &str, t: &str| {
        parse_duration(t)
            .map(|ms| Duration::from_millis(ms as u64))
            .ok_or_else(|| {
                CliError::new(format!("{flag} {t:?} is not a duration"))
                    .hint("for example 500ms, 2s or 10m")
            })
    };
    let pace = Pace {
        quiet: duration("--quiet-period", quiet)?,
        rescan: duration("--rescan", rescan)?,
    };
    // One thread: the steps (commit, ingest, rules) block it while they run, and the
    // runtime only waits for what comes next.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the watcher's runtime: {e}")))?;
    runtime.block_on(async {
        let (mut term, mut int, mut hup) = stop_signals()?;
        // Signals only ask: the loop stops between two steps, and a step that changes the
        // folder stops between two files.
        let interrupt = crate::signals::interrupt();
        interrupt
            .default_allowed_flag()
            .store(false, Ordering::SeqCst);
        let stop = async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = hup.recv() => {}
            }
        };
        let requested = interrupt.requested_flag();
        let mut steps = Steps { ingest, style };
        match lifeos_app::watch::watch(repo, pace, stop, &requested, &mut steps).await {
            Ok(()) => Ok(0),
            Err(WatchError::Monitor(e)) => Err(monitor_error(e)),
            Err(e @ WatchError::Moved { .. }) => {
                log("stopped: the folder was moved or deleted");
                Err(CliError::new(e.to_string())
                    .hint("start `lifeos watch` again in the folder where it is now"))
            }
        }
    })
}

/// Each step of the watch, said as a line of its log.
struct Steps {
    /// Extract text after each commit.
    ingest: bool,
    style: Style,
}

impl WatchSteps for Steps {
    /// Commits what changed through the commit pipeline (which fires the commit's rules
    /// and exports it to git), then indexes it and fires the rules for what else changed.
    fn record(&mut self, repo: &Repo) -> bool {
        let start = now_ms();
        let asked = lifeos_vcs::commit::CommitOptions {
            message: b"changes seen by lifeos watch",
            ..Default::default()
        };
        let progress = &lifeos_vcs::working_copy::NoProgress;
        match crate::context::record_folder(repo, asked, progress, self.style) {
            Ok(out) => {
                if let Some(c) = out.commit {
                    log(&format!(
                        "committed {} ({} files, {} read)",
                        c.short(12),
                        out.snapshot.files,
                        out.snapshot.files_read
                    ));
                    if self.ingest {
                        if let Err(e) =
                            super::ingest::ingest(repo, false, &Default::default(), false)
                        {
                            log(&format!("warning: ingest failed: {}", e.message));
                        }
                    }
                    crate::actions_util::fire_since(repo, start, self.style);
                }
                true
            }
            Err(e) => {
                log(&format!("warning: not committed: {}", e.message));
                false
            }
        }
    }

    fn fire(&mut self, repo: &Repo, trigger: Trigger) {
        crate::actions_util::fire(repo, &[(trigger, None)], self.style);
    }

    fn say(&mut self, event: WatchEvent<'_>) {
        match event {
            WatchEvent::Started {
                folder,
                quiet,
                time_rules,
            } => log(&format!(
                "watching {} (commit {} ms after the last change, {time_rules} time rules; SIGINT or SIGTERM stops)",
                folder.display(),
                quiet.as_millis(),
            )),
            WatchEvent::Rescheduled { time_rules } => {
                log(&format!("rules trusted again: {time_rules} time rules"))
            }
            WatchEvent::TimeSlot { rule, slot_ms } => log(&format!(
                "time rule {rule:?}: slot of {}",
                local_time(slot_ms)
            )),
            WatchEvent::WatcherStopped => log(
                "warning: the folder watcher stopped; changes are found by the periodic rescan",
            ),
            WatchEvent::Stopped => log("stopped"),
        }
    }
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
fn monitor_only(repo: &Repo) -> CliResult<u8> {
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
