//! The watch loop: record the folder once it has been quiet for a while, look at the
//! whole folder now and then anyway, and fire each time rule at its slots, until the front
//! end says stop. It stops between two steps, never in the middle of one.
//!
//! The loop decides when; the front end ([`WatchSteps`]) does each step and says what
//! happened, so the command line logs lines and another front end can show them its own
//! way.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lifeos_actions::schedule::Schedule;
use lifeos_actions::{Rules, Trigger};
use lifeos_fsmonitor::{FolderWatch, MonitorError, Wake};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;

use crate::commit::actions_of;

/// How the loop paces itself.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// How long the folder must be quiet before it is recorded.
    pub quiet: Duration,
    /// How often the whole folder is looked at anyway (events can be lost).
    pub rescan: Duration,
}

/// What the loop asks of its front end.
pub trait WatchSteps {
    /// Records what changed (through [`crate::commit::commit_folder`], then whatever
    /// else the front end does after a commit). `false` when it could not (a file still
    /// being written, a full disk): the loop tries again after the quiet period.
    fn record(&mut self, repo: &Repo) -> bool;
    /// A time rule's slot is due: fire `trigger`.
    fn fire(&mut self, repo: &Repo, trigger: Trigger);
    /// Something the person should know: what the loop is doing or why it stops.
    fn say(&mut self, event: WatchEvent<'_>);
}

/// What the loop tells its front end ([`WatchSteps::say`]).
#[derive(Debug)]
pub enum WatchEvent<'a> {
    /// The loop started, with this many time rules.
    Started {
        /// The folder.
        folder: &'a Path,
        /// The quiet period.
        quiet: Duration,
        /// How many time rules are scheduled.
        time_rules: usize,
    },
    /// The rules file was trusted again; this many time rules are scheduled now.
    Rescheduled {
        /// How many time rules are scheduled.
        time_rules: usize,
    },
    /// A time rule's slot came.
    TimeSlot {
        /// The rule's name.
        rule: &'a str,
        /// The slot, in milliseconds since the epoch.
        slot_ms: i64,
    },
    /// The folder watcher stopped; changes are found by the periodic rescan alone.
    WatcherStopped,
    /// The loop stopped, asked to.
    Stopped,
}

/// Why the loop ended without being asked to.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The folder cannot be watched.
    #[error(transparent)]
    Monitor(#[from] MonitorError),
    /// The folder or its store was moved or deleted while it was watched.
    #[error("{} was moved or deleted while lifeos watched it, so nothing more is recorded", folder.display())]
    Moved {
        /// The folder as it was when the watch started.
        folder: PathBuf,
    },
}

/// The time rules of the trusted rules at `@`, each with its next slot after `now`.
fn time_rules(repo: &Repo, now: i64, tz: &jiff::tz::TimeZone) -> Vec<(String, Schedule, i64)> {
    let actions = actions_of(repo);
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

/// Which folder `path` is (device and inode), if there is one there.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Watches `repo`'s folder until `stop` completes, or until a step finds `requested` set
/// (a signal that came while it ran). Runs on a current-thread tokio runtime with time
/// and I/O enabled; the steps block it while they run.
pub async fn watch(
    repo: &Repo,
    pace: Pace,
    stop: impl Future<Output = ()>,
    requested: &AtomicBool,
    steps: &mut dyn WatchSteps,
) -> Result<(), WatchError> {
    use tokio::time::{sleep_until, Instant as Deadline};
    let Pace { quiet, rescan } = pace;
    let actions = actions_of(repo);
    let mut folder = FolderWatch::start(repo.workdir(), repo.dot_dir(), &actions.trust_file())?;
    tokio::pin!(stop);
    let tz = jiff::tz::TimeZone::system();
    let mut schedule = time_rules(repo, now_ms(), &tz);
    steps.say(WatchEvent::Started {
        folder: repo.workdir(),
        quiet,
        time_rules: schedule.len(),
    });
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
            () = &mut stop => break,
            wake = folder.next(), if watching => match wake {
                Some(Wake::Changed) => changed_at = Some(Instant::now()),
                Some(Wake::Rescan) => changed_at = Some(Instant::now() - quiet),
                Some(Wake::Trust) => {
                    schedule = rescheduled(schedule, time_rules(repo, now_ms(), &tz));
                    steps.say(WatchEvent::Rescheduled { time_rules: schedule.len() });
                }
                None => {
                    steps.say(WatchEvent::WatcherStopped);
                    watching = false;
                }
            },
            () = sleep_until(Deadline::from_std(wake_at)) => {}
        }
        if identity(repo.workdir()) != home || !repo.dot_dir().is_dir() {
            return Err(WatchError::Moved {
                folder: repo.workdir().to_path_buf(),
            });
        }
        // A signal that came during a step stops the loop before the next one.
        let stopping = || requested.load(Ordering::SeqCst);
        if changed_at.is_some_and(|t| t.elapsed() >= quiet) && !stopping() {
            changed_at = None;
            if steps.record(repo) {
                schedule = rescheduled(schedule, time_rules(repo, now_ms(), &tz));
            } else {
                changed_at = Some(Instant::now());
            }
        }
        let now = now_ms();
        for (rule, s, next) in schedule.iter_mut() {
            if *next <= now && !stopping() {
                steps.say(WatchEvent::TimeSlot {
                    rule,
                    slot_ms: *next,
                });
                let slot = Trigger::Time {
                    rule: rule.clone(),
                    slot_ms: *next,
                };
                steps.fire(repo, slot);
                *next = s.next_after(now, &tz);
            }
        }
        if Instant::now() >= next_rescan {
            changed_at.get_or_insert(Instant::now() - quiet);
            next_rescan = Instant::now() + rescan;
        }
    }
    steps.say(WatchEvent::Stopped);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;

    /// Records through the commit pipeline, says stop after the first commit, and keeps
    /// what the loop said.
    struct Recorder {
        said: Vec<String>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
    }

    impl WatchSteps for Recorder {
        fn record(&mut self, repo: &Repo) -> bool {
            let wc = repo.lock_working_copy().unwrap();
            let asked = lifeos_vcs::commit::CommitOptions {
                message: b"seen",
                ..Default::default()
            };
            let done = crate::commit::commit_folder(
                repo,
                wc,
                asked,
                &lifeos_vcs::working_copy::NoProgress,
            )
            .unwrap();
            if done.outcome.commit.is_some() {
                if let Some(stop) = self.stop.take() {
                    let _ = stop.send(());
                }
            }
            true
        }
        fn fire(&mut self, _repo: &Repo, trigger: Trigger) {
            self.said.push(format!("fire {trigger:?}"));
        }
        fn say(&mut self, event: WatchEvent<'_>) {
            self.said.push(format!("{event:?}"));
        }
    }

    /// A file written before the watch starts is recorded by its first look, and the loop
    /// ends when its front end says stop.
    #[test]
    fn the_watch_loop_records_the_folder_and_stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::init(dir.path(), StoreConfig::default()).unwrap();
        std::fs::write(dir.path().join("note.md"), "# seen by the watch\n").unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut steps = Recorder {
            said: Vec::new(),
            stop: Some(tx),
        };
        let pace = Pace {
            quiet: Duration::from_millis(20),
            rescan: Duration::from_secs(60),
        };
        let requested = AtomicBool::new(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        let stop = async {
            let _ = rx.await;
        };
        runtime
            .block_on(watch(&repo, pace, stop, &requested, &mut steps))
            .unwrap();
        let head = repo.head().unwrap();
        let commit = repo.resolve_rev(&head.view, "@").unwrap();
        let (path, _) = repo
            .file_at(&repo.commit(&commit).unwrap(), b"note.md", "@")
            .unwrap();
        assert_eq!(path, b"note.md".to_vec());
        assert!(steps.said[0].starts_with("Started"), "{:?}", steps.said);
        assert_eq!(steps.said.last().unwrap(), "Stopped");
    }

    /// Reading the rules again keeps a rule's pending slot when its schedule did not
    /// change, and takes the new slot when it did.
    #[test]
    fn rescheduling_never_skips_a_due_slot() {
        let every = |hours: i64| Schedule {
            every_ms: hours * 3_600_000,
            at_min: None,
        };
        let old = vec![("a".to_string(), every(1), 10), ("b".into(), every(1), 20)];
        let fresh = vec![("a".to_string(), every(1), 99), ("b".into(), every(2), 98)];
        let got: Vec<i64> = rescheduled(old, fresh).into_iter().map(|r| r.2).collect();
        assert_eq!(got, vec![10, 98]);
    }
}
