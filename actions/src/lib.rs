//! lifeos automations: rules in a tracked file map events (a commit touching a glob, a
//! git hook) to actions (`run` a command, `http` POST, built-in `tag`); an action's
//! payload is rendered before anyone approves it; an approval pins the payload's BLAKE3
//! hash for a TTL; running re-checks both under the repository lock and records a start
//! before the side effect and a receipt after it, so a process killed mid-way leaves an
//! `uncertain` action that is never run again blindly. Every record is an object in the
//! operation log ([`lifeos_vcs::object::action`], written by [`records`]).
//!
//! The library does no terminal I/O; the CLI prints.

mod approve;
pub mod exec;
mod fire;
pub mod pins;
mod receipts;
pub mod records;
mod rollback;
pub mod rules;
pub mod rules_index;
mod run;
pub mod schedule;
pub mod state;
pub mod template;
mod trigger;
mod trust;

use std::collections::BTreeMap;

use bstr::BString;
use serde_json::{json, Value as Json};

use lifeos_entities::EntitiesExt;
use lifeos_store::Id;
use lifeos_vcs::object::action::{self, ActionRecord, Outcome, Stage};
use lifeos_vcs::prefix::{exactly_one, IdKind};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;

pub use fire::Fired;
pub use receipts::Receipt;
pub use rollback::Rolledback;
pub use rules::{Rules, RULES_FILE};
pub use run::RunReport;
pub use state::{Action, State};
pub use trigger::{commit_trigger, Trigger, Triggered};

/// The approval TTL when none is given: 24 hours.
pub const DEFAULT_TTL_MS: i64 = 24 * 3_600_000;

/// The longest an approval can hold: 30 days.
pub const MAX_TTL_MS: i64 = 30 * 24 * 3_600_000;

/// Where the ids of the rules files trusted here are kept, one per line, the current one
/// last (in the store, never in history: trust is this repository's decision, and no
/// tree, branch or server writes there).
const TRUST_FILE: &str = "trusted-rules";

/// The key this repository seals its approvals with (in the store; never pushed, never
/// in history): only an approval sealed with it runs here.
const APPROVAL_KEY_FILE: &str = "approval.key";

/// The variable a command an action runs finds the action's id in. A lifeos command run
/// with it set (the action's own side effect: a commit, a `git commit` firing hooks)
/// records what it does but fires no rule: rules never set themselves off.
pub const ACTION_VAR: &str = "LIFEOS_ACTION_ID";

/// The variable counting how deep in actions a command runs (1 inside an action's
/// command). Rules fire and actions run only at depth 0.
pub const DEPTH_VAR: &str = "LIFEOS_ACTION_DEPTH";

/// Refuses to run actions from inside an action's command (the depth limit: actions
/// never set off more actions).
fn refuse_inside_action() -> Result<()> {
    match inside_action() {
        Some(outer) => Err(ActionsError::Refused(format!(
            "this command runs inside action {outer}: lifeos runs no action from inside another (an action's side effects never set off more actions)"
        ))),
        None => Ok(()),
    }
}

/// The action a process runs inside, if any (its side effects fire no rule): from
/// [`ACTION_VAR`], or a depth over 0 when that was cleared.
pub fn inside_action() -> Option<String> {
    if let Ok(id) = std::env::var(ACTION_VAR) {
        return Some(id);
    }
    std::env::var(DEPTH_VAR)
        .ok()
        .and_then(|d| d.parse::<u32>().ok())
        .filter(|d| *d > 0)
        .map(|d| format!("(an action {d} levels up)"))
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum ActionsError {
    /// The repository failed.
    #[error(transparent)]
    Vcs(#[from] lifeos_vcs::error::VcsError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] lifeos_store::StoreError),
    /// The rules file is wrong.
    #[error("{0}")]
    Rules(rules::RuleError),
    /// No such action, or a prefix naming several.
    #[error("{0}")]
    NotFound(String),
    /// The action is not in a state that allows this.
    #[error("{0}")]
    Refused(String),
    /// Reading or writing a local file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, ActionsError>;

/// The current view read under the actions lock, and what publishing after it needs.
struct UnderLock<'s> {
    lock: records::ActionsLock,
    tx: lifeos_store::Transaction<'s>,
    parents: Vec<Id>,
    view: lifeos_vcs::View,
}

impl UnderLock<'_> {
    /// Publishes `records` (and `files`, their output) in one operation, then releases
    /// the lock; returns the records' ids.
    fn publish(
        self,
        repo: &Repo,
        records: &[ActionRecord],
        files: Vec<Id>,
        description: &str,
    ) -> Result<Vec<Id>> {
        let (_, ids) = records::publish(
            repo,
            self.tx,
            &self.parents,
            self.view,
            records,
            files,
            description,
        )?;
        drop(self.lock);
        Ok(ids)
    }
}

/// Extracts text from what is not indexed yet (what `lifeos ingest` does, which this
/// crate does not depend on); says what it did, or why it failed.
pub type IngestFn = fn(&Repo) -> std::result::Result<String, String>;

/// Automations of one repository.
pub struct Actions<'r> {
    repo: &'r Repo,
    me: String,
    ingest: Option<IngestFn>,
    key: std::sync::OnceLock<std::result::Result<[u8; 32], String>>,
}

fn record(action: &str, prev: Option<Id>, me: &str, stage: Stage) -> ActionRecord {
    ActionRecord {
        action: action.to_string(),
        prev,
        at_ms: now_ms(),
        by: me.to_string(),
        pid: std::process::id(),
        stage,
    }
}

/// The id a record will have.
fn id_of(r: &ActionRecord) -> Id {
    Id::hash(&r.encode())
}

impl<'r> Actions<'r> {
    /// Automations of `repo`.
    pub fn new(repo: &'r Repo) -> Actions<'r> {
        Actions {
            repo,
            me: records::actor_name(repo),
            ingest: None,
            key: std::sync::OnceLock::new(),
        }
    }

    /// Carries out `ingest` actions with `f`.
    pub fn with_ingest(mut self, f: IngestFn) -> Actions<'r> {
        self.ingest = Some(f);
        self
    }

    /// Takes the actions lock and reads the current view.
    fn hold(&self) -> Result<UnderLock<'r>> {
        let lock = records::lock(self.repo)?;
        let mut tx = self.repo.store().transaction()?;
        let (parents, view) = records::locked_head(self.repo, &lock, &mut tx)?;
        Ok(UnderLock {
            lock,
            tx,
            parents,
            view,
        })
    }

    /// Takes the actions lock and reads action `id`: its newest record and what its
    /// records say.
    fn hold_action(&self, id: &str) -> Result<(UnderLock<'r>, Id, Action)> {
        let held = self.hold()?;
        let newest = records::newest(&held.tx, &held.view, id)?
            .ok_or_else(|| ActionsError::NotFound(format!("no action {id}")))?;
        let mut chain = records::chain(self.repo, &newest)?;
        chain.reverse();
        let a = Action::from_records(chain).ok_or_else(|| {
            ActionsError::Refused(format!("{id} is a noop receipt, not an action"))
        })?;
        Ok((held, newest, a))
    }

    /// Every action (those with a proposal), oldest first.
    pub fn list(&self) -> Result<Vec<Action>> {
        let head = self.repo.head()?;
        let mut out = Vec::new();
        for (_, newest) in records::all(self.repo, &head.view)? {
            let mut chain = records::chain(self.repo, &newest)?;
            chain.reverse();
            if let Some(a) = Action::from_records(chain) {
                out.push(a);
            }
        }
        out.sort_by_key(|a| (a.proposed_ms, a.id.clone()));
        Ok(out)
    }

    /// The state of `a` now, as this process sees it.
    pub fn state(&self, a: &Action) -> State {
        a.state(now_ms(), &self.me, &|ap| self.sealed_here(ap))
    }

    /// The full id of the action `prefix` names.
    pub fn resolve_id(&self, prefix: &str) -> Result<String> {
        let head = self.repo.head()?;
        let all = records::all(self.repo, &head.view)?;
        let found = all
            .into_iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .collect();
        let (id, _) = exactly_one(found, prefix, IdKind::Action, |(k, _)| k.clone())?;
        Ok(id)
    }

    /// Writes one record for action `id` under the lock, after checking its state with
    /// `allow` (which returns the record to write, or why not).
    fn advance(
        &self,
        id: &str,
        what: &str,
        allow: &dyn Fn(&Action, State) -> std::result::Result<Stage, String>,
    ) -> Result<(Action, Id)> {
        let (held, newest, a) = self.hold_action(id)?;
        let stage = allow(&a, self.state(&a)).map_err(ActionsError::Refused)?;
        let rec = record(id, Some(newest), &self.me, stage);
        let ids = held.publish(
            self.repo,
            std::slice::from_ref(&rec),
            Vec::new(),
            &format!("{what} action {id}"),
        )?;
        Ok((a, ids[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;
    use lifeos_vcs::testing::commit_folder;

    /// A `post-commit` hook fires for the hook and for git's commit with the paths it
    /// changed, but the commit's changes are left out when no rules file could want
    /// them; any other hook fires only for itself, with git's arguments and input.
    #[test]
    fn hook_triggers_add_the_commit_only_after_a_commit_and_when_rules_could_want_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let first = commit_folder(&repo, b"a").commit.unwrap();
        let actions = Actions::new(&repo);
        let (t, missed) = actions.hook_triggers("post-commit", &[], "").unwrap();
        assert!(missed.is_none());
        assert_eq!(t.len(), 1, "no rules file: nothing wants the commit");
        assert!(
            matches!(&t[0].0, Trigger::Hook { hook, commit, .. } if hook == "post-commit" && *commit == Some(first))
        );
        std::fs::write(
            dir.path().join(RULES_FILE),
            "[[rule]]\nname = \"r\"\non = \"commit\"\n[rule.tag]\nname = \"t-{short}\"\n",
        )
        .unwrap();
        let second = commit_folder(&repo, b"rules").commit.unwrap();
        let (t, _) = actions.hook_triggers("post-commit", &[], "").unwrap();
        let events: Vec<&str> = t.iter().map(|(t, _)| t.event()).collect();
        assert_eq!(events, ["commit", "hook"]);
        let Trigger::Commit {
            commit,
            changes,
            message,
            ..
        } = &t[0].0
        else {
            panic!("{:?}", t[0].0)
        };
        assert_eq!((*commit, message.as_str()), (second, "rules"));
        assert_eq!(changes, &[(BString::from(RULES_FILE.as_bytes()), "added")]);
        let args = vec!["origin".to_string(), "https://example.org/x".to_string()];
        let (t, _) = actions
            .hook_triggers("pre-push", &args, "refs/heads/main\n")
            .unwrap();
        assert_eq!(t.len(), 1);
        let Trigger::Hook {
            hook,
            args: got,
            input,
            ..
        } = &t[0].0
        else {
            panic!("{:?}", t[0].0)
        };
        assert_eq!(
            (hook.as_str(), got, input.as_str()),
            ("pre-push", &args, "refs/heads/main\n")
        );
        assert_eq!(t[0].1, Some(repo.head().unwrap().id));
    }
}
