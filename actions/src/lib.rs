//! lifeos automations: rules in a tracked file map events (a commit touching a glob, a
//! git hook) to actions (`run` a command, `http` POST, built-in `tag`); an action's
//! payload is rendered before anyone approves it; an approval pins the payload's BLAKE3
//! hash for a TTL; running re-checks both under the repository lock and records a start
//! before the side effect and a receipt after it, so a process killed mid-way leaves an
//! `uncertain` action that is never run again blindly. Every record is an object in the
//! operation log ([`lifeos_vcs::object::action`], written by [`records`]).
//!
//! The library does no terminal I/O; the CLI prints.

pub mod exec;
pub mod index;
pub mod pins;
pub mod records;
pub mod rules;
pub mod schedule;
pub mod state;

use std::collections::BTreeMap;

use bstr::BString;
use serde_json::{json, Value as Json};

use lifeos_entities::EntitiesExt;
use lifeos_store::Id;
use lifeos_vcs::object::action::{self, ActionRecord, Outcome, Stage};
use lifeos_vcs::repo::now_ms;
use lifeos_vcs::Repo;

pub use rules::{Rules, RULES_FILE};
pub use state::{Action, State};

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

/// What happened, for rules to match.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// A commit was recorded (by `lifeos commit`, or imported from git by a hook).
    Commit {
        /// The commit.
        commit: Id,
        /// The paths it changed and how (`added`, `modified`, `deleted`).
        changes: Vec<(BString, &'static str)>,
        /// The branch it is on.
        branch: Option<String>,
        /// The first line of its message.
        message: String,
    },
    /// A git hook ran.
    Hook {
        /// The hook's name.
        hook: String,
        /// The commit it concerns (HEAD), if any.
        commit: Option<Id>,
        /// The branch, if any.
        branch: Option<String>,
        /// The arguments git gave the hook (for `pre-push`: the remote's name and URL).
        args: Vec<String>,
        /// What git wrote to the hook's input (for `pre-push` and `reference-transaction`:
        /// the refs, one line each), up to 64 KiB.
        input: String,
    },
    /// A branch or tag was created, moved or deleted.
    Ref {
        /// `branch` or `tag`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Its target before (absent: created).
        from: Option<Id>,
        /// Its target after (absent: deleted).
        to: Option<Id>,
    },
    /// An entity was created, changed, removed, linked or unlinked.
    Entity {
        /// Its id (`type:...`).
        id: String,
        /// `created`, `changed`, `removed`, `linked` or `unlinked`.
        change: &'static str,
        /// The attributes set or changed (the relation, for a link).
        attributes: Vec<String>,
        /// The entity object after (before, for a removal).
        object: Id,
    },
    /// A time rule's slot came (while `lifeos watch` runs).
    Time {
        /// The rule.
        rule: String,
        /// The slot (ms since the epoch).
        slot_ms: i64,
    },
    /// Ingest extracted text from a file.
    Ingest {
        /// The file's path at `@` (its bytes).
        path: BString,
        /// The file's content id.
        file: Id,
        /// The extractor.
        kind: String,
        /// The text extracted.
        text: String,
    },
}

/// The one item of `items` that `pick` accepts, `prefix` naming it (an empty prefix
/// names none); `what` is `action` or `receipt`, for the errors.
fn the_one<T>(items: Vec<T>, prefix: &str, what: &str, pick: impl Fn(&T) -> bool) -> Result<T> {
    let mut found: Vec<T> = items.into_iter().filter(|x| pick(x)).collect();
    match found.len() {
        1 if !prefix.is_empty() => Ok(found.remove(0)),
        0 | 1 => Err(ActionsError::NotFound(format!(
            "no {what} {prefix:?}; `lifeos {what}s` lists them"
        ))),
        n => Err(ActionsError::NotFound(format!(
            "{prefix:?} names {n} {what}s; give more of the id"
        ))),
    }
}

/// The trigger for commit `commit`: the paths it changed against its first parent.
pub fn commit_trigger(repo: &Repo, commit: Id) -> Result<Trigger> {
    use lifeos_vcs::treediff::ChangeKind;
    let c = repo.commit(&commit)?;
    let parent_tree = match c.parents.first() {
        Some(p) => Some(repo.commit(p)?.tree),
        None => None,
    };
    let changes = repo
        .diff_trees(parent_tree.as_ref(), Some(&c.tree))?
        .into_iter()
        .map(|ch| {
            let kind = match ch.kind {
                ChangeKind::Added => "added",
                ChangeKind::Modified => "modified",
                ChangeKind::Deleted => "deleted",
            };
            (ch.path, kind)
        })
        .collect();
    Ok(Trigger::Commit {
        commit,
        changes,
        branch: repo.head()?.view.current_branch,
        message: String::from_utf8_lossy(&c.message)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    })
}

/// How much extracted text an `ingest` rule's pattern reads.
const INGEST_TEXT_MAX: usize = 1 << 20;

impl Trigger {
    /// The rule event (`on = ...`) it is.
    pub fn event(&self) -> &'static str {
        match self {
            Trigger::Commit { .. } => "commit",
            Trigger::Hook { .. } => "hook",
            Trigger::Ref { kind, .. } => kind,
            Trigger::Entity { .. } => "entity",
            Trigger::Ingest { .. } => "ingest",
            Trigger::Time { .. } => "time",
        }
    }
}

/// What firing the rules did.
#[derive(Debug, Default)]
pub struct Fired {
    /// Actions proposed (ids).
    pub proposed: Vec<String>,
    /// Duplicates of actions proposed before (their noop receipts' action ids, and the
    /// original's).
    pub duplicates: Vec<(String, String)>,
    /// The rules file is not trusted (its id): nothing fired.
    pub untrusted: Option<Id>,
    /// Actions approved by their rule and run at once.
    pub ran: Vec<RunReport>,
    /// Rules that matched but could not propose (why).
    pub skipped: Vec<String>,
    /// The action this process runs inside ([`inside_action`]): its side effects fire
    /// nothing.
    pub inside: Option<String>,
}

/// What running one action came to.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The action.
    pub action: String,
    /// Its state after.
    pub state: State,
    /// The receipt's reason (or why nothing was done).
    pub reason: String,
    /// The receipt written, if one was.
    pub receipt: Option<Id>,
}

/// What `rollback` did.
#[derive(Debug)]
pub enum Rolledback {
    /// The compensating action (of an internal action) ran.
    Ran(RunReport),
    /// The compensating action (the rule's `compensate`) was proposed: its id.
    Proposed(String),
}

/// A receipt: how one attempt at an action ended.
#[derive(Debug, Clone)]
pub struct Receipt {
    /// The record.
    pub id: Id,
    /// The action.
    pub action: String,
    /// The rule, if the action had a proposal.
    pub rule: Option<String>,
    /// The triggering event (JSON) and operation, if the action had a proposal.
    pub trigger: Option<(String, Option<Id>)>,
    /// `executed`, `blocked`, `failed`, `noop` or `uncertain`.
    pub outcome: &'static str,
    /// Why.
    pub reason: String,
    /// When the attempt started and ended.
    pub started_ms: i64,
    /// When it ended (the record's time; for `uncertain`, the start).
    pub ended_ms: i64,
    /// Exit status or HTTP status.
    pub status: Option<i64>,
    /// Captured output (a stored file).
    pub output: Option<Id>,
    /// The operation an internal action published.
    pub effect: Option<Id>,
    /// The payload's hash when it ended.
    pub payload_hash: Option<Id>,
    /// The action this one's action compensates (it came from a rollback), if any.
    pub compensates: Option<String>,
    /// The actions proposed to compensate this one's action (rollbacks of it).
    pub compensated_by: Vec<String>,
    /// The approval it ran under.
    pub approval: Option<state::Approval>,
    /// Who recorded it.
    pub by: String,
}

/// The current view read under the actions lock, and what publishing after it needs.
struct Held<'s> {
    lock: records::ActionsLock,
    tx: lifeos_store::Transaction<'s>,
    parents: Vec<Id>,
    view: lifeos_vcs::View,
}

impl Held<'_> {
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
    fn hold(&self) -> Result<Held<'r>> {
        let lock = records::lock(self.repo)?;
        let mut tx = self.repo.store().transaction()?;
        let (parents, view) = records::locked_head(self.repo, &lock, &mut tx)?;
        Ok(Held {
            lock,
            tx,
            parents,
            view,
        })
    }

    /// Takes the actions lock and reads action `id`: its newest record and what its
    /// records say.
    fn hold_action(&self, id: &str) -> Result<(Held<'r>, Id, Action)> {
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

    /// The rules file at `@` (its id and text), if there is one.
    pub fn rules_at_head(&self) -> Result<Option<(Id, String)>> {
        match self.rules_id_at_head()? {
            Some(id) => Ok(Some((id, self.rules_text(&id)?))),
            None => Ok(None),
        }
    }

    /// The id of the rules file at `@`, if there is one (its text is not read).
    fn rules_id_at_head(&self) -> Result<Option<Id>> {
        let head = self.repo.head()?;
        let Some(tree) = self.repo.at_tree(&head.view)? else {
            return Ok(None);
        };
        Ok(self
            .repo
            .lookup_path(&tree, RULES_FILE.as_bytes())?
            .map(|e| e.id))
    }

    /// The text of rules file `id`.
    fn rules_text(&self, id: &Id) -> Result<String> {
        let mut bytes = Vec::new();
        self.repo.store().read_file(id, &mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The trusted rules at `@` and their index, or why none fire: `Err(Some(id))` when
    /// the rules file `id` is not trusted, `Err(None)` when there is none.
    fn trusted_index(&self) -> Result<std::result::Result<(Id, index::RulesIndex), Option<Id>>> {
        let Some(id) = self.rules_id_at_head()? else {
            return Ok(Err(None));
        };
        if self.trusted()? != Some(id) {
            return Ok(Err(Some(id)));
        }
        let path = self.repo.dot_dir().join(index::INDEX_FILE);
        if let Some(ix) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| index::RulesIndex::decode(&t))
            .filter(|ix| ix.rules_file == id)
        {
            return Ok(Ok((id, ix)));
        }
        let rules = Rules::parse(&self.rules_text(&id)?).map_err(ActionsError::Rules)?;
        let ix = index::RulesIndex::of(&rules, id);
        // Derived data: a failure to keep it only costs reading the rules next time.
        let _ = lifeos_store::store::write_atomic(&path, ix.encode().as_bytes());
        Ok(Ok((id, ix)))
    }

    /// The file that pins the trusted rules file (local, never versioned).
    pub fn trust_file(&self) -> std::path::PathBuf {
        self.repo.dot_dir().join(TRUST_FILE)
    }

    /// The ids of the rules files trusted here, oldest first (the current one last).
    fn trust_history(&self) -> Result<Vec<Id>> {
        let path = self.trust_file();
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(t.lines().filter_map(|l| Id::from_hex(l.trim())).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(ActionsError::Io {
                what: "reading",
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// The trusted rules file's id, if one was trusted.
    pub fn trusted(&self) -> Result<Option<Id>> {
        Ok(self.trust_history()?.last().copied())
    }

    /// Whether rules file `id` was ever trusted here: only its actions run here.
    pub fn was_trusted(&self, id: &Id) -> Result<bool> {
        Ok(self.trust_history()?.contains(id))
    }

    /// Trusts the rules file at `@` (checked first): its rules may fire until it changes.
    /// The folder's file must be that one (no uncommitted change), so what a person
    /// checked with `lifeos rules check` is what is trusted; with `expected`, its id must
    /// also start with that.
    pub fn trust(&self, expected: Option<&str>) -> Result<(Id, Rules)> {
        let (id, text) = self.rules_at_head()?.ok_or_else(|| {
            ActionsError::NotFound(format!(
                "no {RULES_FILE} at @: write one and commit it, then trust it"
            ))
        })?;
        if let Some(e) = expected.filter(|e| e.is_empty() || !id.has_hex_prefix(e)) {
            return Err(ActionsError::Refused(format!(
                "{RULES_FILE} at @ is {}, not {e:?}: it changed since you checked it; check it again with `lifeos rules check`",
                id.to_hex()
            )));
        }
        let here = self.repo.workdir().join(RULES_FILE);
        match std::fs::read(&here) {
            Ok(bytes) if Id::hash(&bytes) != id => {
                return Err(ActionsError::Refused(format!(
                    "{RULES_FILE} in the folder differs from the one at @ ({}): commit it (or restore it) first, so that what you checked is what is trusted",
                    id.short(12)
                )))
            }
            _ => {}
        }
        let rules = Rules::parse(&text).map_err(ActionsError::Rules)?;
        let mut history = self.trust_history()?;
        history.retain(|h| *h != id);
        history.push(id);
        let text: String = history
            .iter()
            .map(|h| format!("{}\n", h.to_hex()))
            .collect();
        lifeos_store::store::write_atomic(&self.trust_file(), text.as_bytes())?;
        Ok((id, rules))
    }

    /// This repository's approval key, made the first time (32 random bytes, readable by
    /// the owner alone).
    fn approval_key(&self) -> Result<[u8; 32]> {
        let got = self.key.get_or_init(|| {
            let path = self.repo.dot_dir().join(APPROVAL_KEY_FILE);
            let read = |p: &std::path::Path| {
                std::fs::read(p)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
            };
            if let Some(k) = read(&path) {
                return Ok(k);
            }
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|e| format!("no random bytes for a key: {e}"))?;
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            // Another process making it at once: its key stands.
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(&key)
                        .and_then(|()| f.sync_all())
                        .map_err(|e| format!("writing {}: {e}", path.display()))?;
                    Ok(key)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    read(&path).ok_or_else(|| format!("{} is damaged", path.display()))
                }
                Err(e) => Err(format!("creating {}: {e}", path.display())),
            }
        });
        got.clone().map_err(ActionsError::Refused)
    }

    /// `r` (an approval) sealed with this repository's key.
    fn sealed(&self, mut r: ActionRecord) -> Result<ActionRecord> {
        let key = self.approval_key()?;
        let seal = Id::from(blake3::keyed_hash(&key, &r.encode()));
        if let Stage::Approved { seal: s, .. } = &mut r.stage {
            *s = Some(seal);
        }
        Ok(r)
    }

    /// Whether approval `a` was sealed by this repository (made here, by a person or a
    /// rule trusted here).
    pub fn sealed_here(&self, a: &state::Approval) -> bool {
        let Stage::Approved {
            seal: Some(seal), ..
        } = &a.record.stage
        else {
            return false;
        };
        let Ok(key) = self.approval_key() else {
            return false;
        };
        let mut bare = a.record.clone();
        if let Stage::Approved { seal: s, .. } = &mut bare.stage {
            *s = None;
        }
        Id::from(blake3::keyed_hash(&key, &bare.encode())) == *seal
    }

    /// The approval record of action `id` (after `prev`) for a payload hashing to
    /// `pinned`, for `ttl_ms`, by `by`: its pins taken now, sealed with this repository's
    /// key.
    fn approval(
        &self,
        id: &str,
        prev: Option<Id>,
        by: &str,
        (payload, pinned): (&[u8], Id),
        ttl_ms: i64,
    ) -> Result<ActionRecord> {
        let json: Json = serde_json::from_slice(payload).unwrap_or(Json::Null);
        let env = pins::inherited(&|k| std::env::var(k).ok());
        let pinned_more = pins::pin(&json, self.repo.workdir(), env).map_err(|why| {
            ActionsError::Refused(format!(
                "action {id} cannot be approved: what it runs cannot be pinned ({why})"
            ))
        })?;
        let stage = Stage::Approved {
            pinned,
            ttl_ms,
            pins: pinned_more.map(|p| p.encode()).unwrap_or_default(),
            seal: None,
        };
        self.sealed(record(id, prev, by, stage))
    }

    /// Fires the rules at `@` for `trigger` (caused by operation `op`): proposes the
    /// actions of the rules that match (a duplicate of an action proposed before gets a
    /// noop receipt instead), then runs those their rule approves.
    ///
    /// Inside an action's command ([`inside_action`]) nothing fires: what an action does
    /// (a commit, a `git commit` firing hooks) never sets off rules again.
    pub fn fire(&self, triggers: &[(Trigger, Option<Id>)]) -> Result<Fired> {
        let mut fired = Fired::default();
        if let Some(outer) = inside_action() {
            fired.inside = Some(outer);
            return Ok(fired);
        }
        let (rules_id, ix) = match self.trusted_index()? {
            Ok(found) => found,
            Err(untrusted) => {
                fired.untrusted = untrusted;
                return Ok(fired);
            }
        };
        // Most commits match no rule: the index says so without reading the rules.
        if !triggers.iter().any(|(t, _)| ix.may_fire(t)) {
            return Ok(fired);
        }
        let rules = Rules::parse(&self.rules_text(&rules_id)?).map_err(ActionsError::Rules)?;
        let mut proposals = Vec::new();
        for (trigger, op) in triggers {
            for (rule, identity, fields) in rules.matching(trigger, *op) {
                if let Some(p) = fields.get(NOT_UTF8) {
                    fired.skipped.push(format!(
                        "rule {:?}: {p}'s name is not UTF-8, so no payload can carry it; nothing was proposed for it",
                        rule.name
                    ));
                    continue;
                }
                let op = *op;
                let event = json!(fields);
                let mut payload = rule.payload(&fields, &event);
                // A commit, hook, extract or slot seen again (a hook run twice) is seen at
                // a later operation: what makes it a duplicate is the payload it renders
                // without that operation. A branch, tag or entity event is the operation
                // that made it: moving a branch back and forth again is a new event.
                let seen_again = matches!(
                    trigger,
                    Trigger::Commit { .. }
                        | Trigger::Hook { .. }
                        | Trigger::Ingest { .. }
                        | Trigger::Time { .. }
                );
                let unseen = {
                    let mut f = fields.clone();
                    f.insert("op".into(), String::new());
                    let p = rule.payload(&f, &json!(f));
                    Id::hash(&serde_json::to_vec(&p).expect("JSON values serialize"))
                };
                let made_by = if seen_again { None } else { op };
                if matches!(payload["kind"].as_str(), Some("tag" | "branch"))
                    && payload["commit"].as_str().is_none_or(str::is_empty)
                {
                    // An empty commit deletes a ref (what a rollback does); a rule's event
                    // that names no commit must not.
                    fired.skipped.push(format!(
                        "rule {:?}: its {} event names no commit to point {} at",
                        rule.name, fields["event"], payload["name"]
                    ));
                    continue;
                }
                if payload["kind"] == "restore" {
                    // What is approved names the commit, not a moment read later.
                    let at = payload["at"].as_str().unwrap_or_default().to_string();
                    match self.repo.op_at(&at).map(|a| a.state.view.at_commit()) {
                        Ok(Some(c)) => {
                            payload = json!({"kind": "restore", "path": payload["path"], "commit": c.to_hex()})
                        }
                        Ok(None) => {
                            fired
                                .skipped
                                .push(format!("rule {:?}: no commit at {at:?}", rule.name));
                            continue;
                        }
                        Err(e) => {
                            fired.skipped.push(format!("rule {:?}: {e}", rule.name));
                            continue;
                        }
                    }
                }
                let payload = serde_json::to_vec(&payload).expect("JSON values serialize");
                proposals.push((
                    rule,
                    identity,
                    event.to_string(),
                    payload,
                    (unseen, made_by),
                    op,
                ));
            }
        }
        if proposals.is_empty() {
            return Ok(fired);
        }
        let held = self.hold()?;
        let mut records = Vec::new();
        let mut auto = Vec::new();
        let mut names = Vec::new();
        for (rule, identity, event, payload, (unseen, made_by), op) in proposals {
            let keyed = |hash: &Id| {
                let mut key = blake3::Hasher::new();
                key.update(rule.name.as_bytes())
                    .update(b"\0")
                    .update(identity.as_bytes())
                    .update(b"\0")
                    .update(hash.0.as_slice());
                if let Some(op) = made_by {
                    key.update(b"\0").update(op.0.as_slice());
                }
                key
            };
            let mut key = keyed(&unseen);
            let id = key.finalize().to_hex()[..16].to_string();
            // Actions proposed before this key (the payload's own hash, no operation)
            // still count: an upgrade never runs an event again.
            let mut legacy = blake3::Hasher::new();
            legacy
                .update(rule.name.as_bytes())
                .update(b"\0")
                .update(identity.as_bytes())
                .update(b"\0")
                .update(Id::hash(&payload).0.as_slice());
            let legacy = legacy.finalize().to_hex()[..16].to_string();
            let known = records::newest(&held.tx, &held.view, &id)?.is_some()
                || (made_by.is_none() && records::newest(&held.tx, &held.view, &legacy)?.is_some())
                || records.iter().any(|r: &ActionRecord| r.action == id);
            let stage = Stage::Proposed {
                rule: rule.name.clone(),
                rules_file: rules_id,
                event,
                trigger_op: op,
                payload,
                compensates: None,
            };
            if known {
                key.update(&now_ms().to_le_bytes())
                    .update(&std::process::id().to_le_bytes());
                let noop = key.finalize().to_hex()[..16].to_string();
                // The duplicate is an action of its own, proposed and finished at once,
                // so its receipt names its rule and event like any other.
                let proposed = record(&noop, None, &self.me, stage);
                let prev = id_of(&proposed);
                records.push(proposed);
                records.push(record(
                    &noop,
                    Some(prev),
                    &self.me,
                    Stage::Finished {
                        outcome: Outcome::Noop,
                        reason: format!(
                            "duplicate of action {id} (rule {:?}, the same event and payload)",
                            rule.name
                        ),
                        started_ms: now_ms(),
                        status: None,
                        output: None,
                        effect: None,
                    },
                ));
                fired.duplicates.push((noop, id));
                continue;
            }
            let by_rule = format!("rule {:?} (approval = \"auto\")", rule.name);
            let auto_by = (rule.approval == rules::Approval::Auto).then_some(by_rule.as_str());
            let (made, unapproved) = self.proposal(&id, stage, auto_by);
            records.extend(made);
            match unapproved {
                Some(why) => fired.skipped.push(why),
                None if auto_by.is_some() => auto.push(id.clone()),
                None => {}
            }
            if !names.contains(&rule.name) {
                names.push(rule.name.clone());
            }
            fired.proposed.push(id);
        }
        let what = match names.as_slice() {
            [] => "record duplicate actions".to_string(),
            _ => format!("propose actions of rule {}", names.join(", ")),
        };
        held.publish(self.repo, &records, Vec::new(), &what)?;
        for id in auto {
            fired.ran.push(self.run_one(&id)?);
        }
        Ok(fired)
    }

    /// The triggers in the operations this user and host published since `since_ms`
    /// (oldest first): branches and tags moved, entities changed, text extracted. Nothing
    /// is read when no trusted rule listens for those events.
    pub fn triggers_since(&self, since_ms: i64) -> Result<Vec<(Trigger, Option<Id>)>> {
        if inside_action().is_some() {
            return Ok(Vec::new());
        }
        // A broken rules file is reported when rules fire (commit), not by every command.
        let ix = match self.trusted_index() {
            Ok(Ok((_, ix))) => ix,
            Ok(Err(_)) | Err(ActionsError::Rules(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let wants = |e: &str| ix.listens(e);
        if !["branch", "tag", "entity", "ingest"]
            .iter()
            .any(|e| wants(e))
        {
            return Ok(Vec::new());
        }
        let actor = &self.repo.actor;
        let mut ops = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = self.repo.op_heads()?;
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let op = self.repo.operation(&id)?;
            if op.end_ms < since_ms {
                continue;
            }
            stack.extend(op.parents.iter().copied());
            if op.user == actor.name && op.host == actor.host {
                ops.push((id, op));
            }
        }
        ops.sort_by_key(|(id, op)| (op.end_ms, *id));
        // What actions did fires no rule: a rule reacts to what the person did, so
        // rules can never set each other off in a loop.
        let mut effects = std::collections::HashSet::new();
        for (_, op) in &ops {
            for e in self.repo.events(op)?.iter() {
                if let lifeos_vcs::object::Event::ActionRecorded { record, .. } = e {
                    if let Stage::Finished {
                        effect: Some(effect),
                        ..
                    } = action::stored_record(self.repo, record)?.stage
                    {
                        effects.insert(effect);
                    }
                }
            }
        }
        ops.retain(|(id, _)| !effects.contains(id));
        let mut paths: Option<BTreeMap<Id, Vec<BString>>> = None;
        let mut out = Vec::new();
        for (op_id, op) in ops {
            for e in self.repo.events(&op)?.iter() {
                use lifeos_vcs::object::Event as E;
                let t = match e {
                    E::BranchMoved { name, from, to } | E::TagMoved { name, from, to } => {
                        Trigger::Ref {
                            kind: if matches!(e, E::BranchMoved { .. }) {
                                "branch"
                            } else {
                                "tag"
                            },
                            name: name.clone(),
                            from: *from,
                            to: *to,
                        }
                    }
                    E::EntityCreated { id, entity } if wants("entity") => Trigger::Entity {
                        id: id.clone(),
                        change: "created",
                        attributes: self
                            .repo
                            .entity_object(entity)?
                            .attrs
                            .into_iter()
                            .map(|(n, _)| n)
                            .collect(),
                        object: *entity,
                    },
                    E::EntityChanged { id, paths, to, .. } => Trigger::Entity {
                        id: id.clone(),
                        change: "changed",
                        attributes: paths.clone(),
                        object: *to,
                    },
                    E::EntityRemoved { id, entity } => Trigger::Entity {
                        id: id.clone(),
                        change: "removed",
                        attributes: Vec::new(),
                        object: *entity,
                    },
                    E::EntityLinked {
                        id,
                        rel,
                        entity,
                        linked,
                        ..
                    } => Trigger::Entity {
                        id: id.clone(),
                        change: if *linked { "linked" } else { "unlinked" },
                        attributes: vec![rel.clone()],
                        object: *entity,
                    },
                    E::ContentExtracted { results } if wants("ingest") => {
                        let paths = match &mut paths {
                            Some(p) => p,
                            None => paths.insert(self.paths_at_head()?),
                        };
                        for x in results {
                            let raw = self
                                .repo
                                .store()
                                .read_object(x, lifeos_store::Kind::Extract)?;
                            let Ok(extract) = lifeos_vcs::object::Extract::decode(&raw) else {
                                continue;
                            };
                            let Ok(segments) = &extract.outcome else {
                                continue;
                            };
                            let mut text = String::new();
                            for seg in segments {
                                if text.len() >= INGEST_TEXT_MAX {
                                    break;
                                }
                                text.push_str(&seg.text);
                                text.push('\n');
                            }
                            for p in paths.get(&extract.file).into_iter().flatten() {
                                out.push((
                                    Trigger::Ingest {
                                        path: p.clone(),
                                        file: extract.file,
                                        kind: extract.extractor.clone(),
                                        text: text.clone(),
                                    },
                                    Some(op_id),
                                ));
                            }
                        }
                        continue;
                    }
                    _ => continue,
                };
                if wants(t.event()) {
                    out.push((t, Some(op_id)));
                }
            }
        }
        Ok(out)
    }

    /// The paths of each file at `@`.
    fn paths_at_head(&self) -> Result<BTreeMap<Id, Vec<BString>>> {
        let head = self.repo.head()?;
        let mut out: BTreeMap<Id, Vec<BString>> = BTreeMap::new();
        if let Some(tree) = self.repo.at_tree(&head.view)? {
            for (path, entry) in self.repo.flatten(&tree)? {
                out.entry(entry.id).or_default().push(path);
            }
        }
        Ok(out)
    }

    /// The records proposing action `id` with `stage` and, for `auto_by` (a rule that
    /// approves its own actions), approving it here. An approval that cannot be made
    /// (what it runs cannot be pinned) leaves the proposal waiting for a person, and
    /// says why.
    fn proposal(
        &self,
        id: &str,
        stage: Stage,
        auto_by: Option<&str>,
    ) -> (Vec<ActionRecord>, Option<String>) {
        let payload = match &stage {
            Stage::Proposed { payload, .. } => payload.clone(),
            _ => unreachable!("a proposal starts an action"),
        };
        let proposed = record(id, None, &self.me, stage);
        let prev = id_of(&proposed);
        let mut out = vec![proposed];
        let mut why = None;
        if let Some(by) = auto_by {
            let pinned = Id::hash(&payload);
            match self.approval(id, Some(prev), by, (&payload, pinned), DEFAULT_TTL_MS) {
                Ok(r) => out.push(r),
                Err(e) => why = Some(e.to_string()),
            }
        }
        (out, why)
    }

    /// Undoes what the action of receipt `prefix` did. An internal action (tag, branch,
    /// restore) is undone at once by a compensating action that puts back what its
    /// operation changed; an external one (run, http) gets its rule's `compensate` action
    /// proposed, to be approved like any other. Either way the compensation is an action
    /// of its own, with a receipt, naming the one it compensates.
    pub fn rollback(&self, prefix: &str) -> Result<Rolledback> {
        let r = &self.receipt(prefix)?;
        if r.outcome != "executed" {
            return Err(ActionsError::Refused(format!(
                "receipt {} is {}: only what ran can be rolled back",
                r.id.short(12),
                r.outcome
            )));
        }
        let a = self
            .list()?
            .into_iter()
            .find(|a| a.id == r.action)
            .ok_or_else(|| ActionsError::NotFound(format!("no action {}", r.action)))?;
        let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
        let kind = payload["kind"].as_str().unwrap_or_default().to_string();
        let mut key = blake3::Hasher::new();
        key.update(b"rollback\0")
            .update(a.id.as_bytes())
            .update(&r.id.0);
        let id = key.finalize().to_hex()[..16].to_string();
        if kind == "ingest" {
            return Err(ActionsError::Refused(
                "an ingest action only recorded extracted text beside the history; there is nothing to undo".into(),
            ));
        }
        let (compensation, auto_by) = if matches!(
            kind.as_str(),
            "tag" | "branch" | "restore" | "entity"
        ) {
            let effect = r.effect.ok_or_else(|| {
                ActionsError::Refused(format!(
                    "receipt {} names no operation to revert",
                    r.id.short(12)
                ))
            })?;
            let op = self.repo.operation(&effect)?;
            let before = match op.parents.first() {
                Some(p) => self.repo.op_state(p)?.view,
                None => lifeos_vcs::View::default(),
            };
            let name = payload["name"].as_str().unwrap_or_default();
            let hex = |c: Option<Id>| c.map(|c| c.to_hex()).unwrap_or_default();
            let back = match kind.as_str() {
                "tag" => json!({"kind": "tag", "name": name, "commit": hex(before.tag(name))}),
                "branch" => {
                    json!({"kind": "branch", "name": name, "commit": hex(before.branch(name))})
                }
                "entity" => {
                    let entity = self.repo.events(&op)?.iter().find_map(|e| match e {
                        lifeos_vcs::object::Event::EntityCreated { id, .. }
                        | lifeos_vcs::object::Event::EntityChanged { id, .. } => Some(id.clone()),
                        _ => None,
                    });
                    let entity = entity.ok_or_else(|| {
                        ActionsError::Refused(format!(
                            "the operation of receipt {} changed no entity",
                            r.id.short(12)
                        ))
                    })?;
                    let old = self.repo.entity_in(&before, &entity)?.map(|(obj, _)| obj);
                    json!({"kind": "entity", "change": "restore", "id": entity, "object": hex(old)})
                }
                _ => {
                    json!({"kind": "restore", "path": payload["path"], "commit": hex(before.at_commit())})
                }
            };
            (
                back,
                Some(format!("rollback of receipt {}", r.id.short(12))),
            )
        } else {
            let mut text = Vec::new();
            self.repo.store().read_file(&a.rules_file, &mut text)?;
            let rules =
                Rules::parse(&String::from_utf8_lossy(&text)).map_err(ActionsError::Rules)?;
            let comp = rules
                .rules
                .iter()
                .find(|x| x.name == a.rule)
                .and_then(|x| x.compensate.clone())
                .ok_or_else(|| {
                    ActionsError::Refused(format!(
                        "rule {:?} declares no compensate action, and what a {kind} action did outside the repository cannot be undone by lifeos",
                        a.rule
                    ))
                })?;
            let event: Json = serde_json::from_str(&a.event).unwrap_or(Json::Null);
            let fields: BTreeMap<String, String> = event
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            (comp.payload(&fields, &event), None)
        };
        let stage = Stage::Proposed {
            rule: a.rule.clone(),
            rules_file: a.rules_file,
            event: a.event.clone(),
            trigger_op: None,
            payload: serde_json::to_vec(&compensation).expect("JSON values serialize"),
            compensates: Some(a.id.clone()),
        };
        let held = self.hold()?;
        if records::newest(&held.tx, &held.view, &id)?.is_some() {
            return Err(ActionsError::Refused(format!(
                "receipt {} was rolled back already (action {id})",
                r.id.short(12)
            )));
        }
        let (records, unapproved) = self.proposal(&id, stage, auto_by.as_deref());
        held.publish(
            self.repo,
            &records,
            Vec::new(),
            &format!("roll back action {}", a.id),
        )?;
        match (auto_by, unapproved) {
            (Some(_), None) => Ok(Rolledback::Ran(self.run_one(&id)?)),
            _ => Ok(Rolledback::Proposed(id)),
        }
    }

    /// Whether firing rules for `event` could do anything: a trusted rule listens for it,
    /// or the rules file is not trusted (firing says so).
    pub fn listens(&self, event: &str) -> Result<bool> {
        Ok(match self.trusted_index()? {
            Ok((_, ix)) => ix.listens(event),
            Err(untrusted) => untrusted.is_some(),
        })
    }

    /// Fires the rules for commit `commit` just recorded by operation `op`, whose
    /// snapshot read the files `read` (every file it added or changed is among them).
    /// When no trusted rule listens for commits, or none could match a file read, the
    /// commit's changes are not even computed.
    pub fn fire_commit(&self, commit: Id, op: Option<Id>, read: &[BString]) -> Result<Fired> {
        match self.trusted_index()? {
            Err(None) => return Ok(Fired::default()),
            Err(Some(_)) => {}
            Ok((_, ix)) => {
                let could = read
                    .iter()
                    .any(|p| ix.may_fire_path("commit", &lifeos_vcs::path::display(p)));
                if !could {
                    return Ok(Fired::default());
                }
            }
        }
        self.fire(&[(commit_trigger(self.repo, commit)?, op)])
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

    /// Every receipt, oldest first: the outcomes recorded, and `uncertain` for a start
    /// that no receipt followed and whose process is gone.
    pub fn receipts(&self) -> Result<Vec<Receipt>> {
        let head = self.repo.head()?;
        let mut chains = Vec::new();
        let mut compensations: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (_, newest) in records::all(self.repo, &head.view)? {
            let mut chain = records::chain(self.repo, &newest)?;
            chain.reverse();
            let parsed = Action::from_records(chain.clone());
            if let Some(of) = parsed.as_ref().and_then(|a| a.compensates.clone()) {
                let by = parsed.as_ref().map(|a| a.id.clone()).unwrap_or_default();
                compensations.entry(of).or_default().push(by);
            }
            chains.push((chain, parsed));
        }
        let mut out = Vec::new();
        for (chain, parsed) in chains {
            let rule = parsed.as_ref().map(|a| a.rule.clone());
            let trigger = parsed.as_ref().map(|a| (a.event.clone(), a.trigger_op));
            let compensates = parsed.as_ref().and_then(|a| a.compensates.clone());
            let compensated_by = parsed
                .as_ref()
                .and_then(|a| compensations.get(&a.id).cloned())
                .unwrap_or_default();
            let mut approval: Option<state::Approval> = None;
            let mut payload: Option<Vec<u8>> = None;
            let mut started: Option<(Id, &ActionRecord)> = None;
            // The receipt of a start that no outcome followed.
            let uncertain =
                |id: Id, r: &ActionRecord, payload: &Option<Vec<u8>>, approval| Receipt {
                    id,
                    action: r.action.clone(),
                    rule: rule.clone(),
                    trigger: trigger.clone(),
                    outcome: "uncertain",
                    reason: format!(
                        "process {} of {} started it and stopped before recording how it ended; \
                     `lifeos actions resolve {} --ran` or `--did-not-run`",
                        r.pid, r.by, r.action
                    ),
                    started_ms: r.at_ms,
                    ended_ms: r.at_ms,
                    status: None,
                    output: None,
                    effect: None,
                    payload_hash: payload.as_deref().map(Id::hash),
                    compensates: compensates.clone(),
                    compensated_by: compensated_by.clone(),
                    approval,
                    by: r.by.clone(),
                };
            for (id, r) in &chain {
                match &r.stage {
                    Stage::Proposed { payload: p, .. } | Stage::Edited { payload: p } => {
                        payload = Some(p.clone())
                    }
                    Stage::Approved {
                        pinned,
                        ttl_ms,
                        pins,
                        ..
                    } => {
                        approval = Some(state::Approval {
                            by: r.by.clone(),
                            at_ms: r.at_ms,
                            ttl_ms: *ttl_ms,
                            pinned: *pinned,
                            pins: pins.clone(),
                            record: r.clone(),
                        })
                    }
                    Stage::Started => started = Some((*id, r)),
                    Stage::Finished {
                        outcome,
                        reason,
                        started_ms,
                        status,
                        output,
                        effect,
                    } => {
                        started = None;
                        out.push(Receipt {
                            effect: *effect,
                            id: *id,
                            action: r.action.clone(),
                            rule: rule.clone(),
                            trigger: trigger.clone(),
                            outcome: outcome.name(),
                            reason: reason.clone(),
                            started_ms: *started_ms,
                            ended_ms: r.at_ms,
                            status: *status,
                            output: *output,
                            payload_hash: payload.as_deref().map(Id::hash),
                            compensates: compensates.clone(),
                            compensated_by: compensated_by.clone(),
                            approval: approval.clone(),
                            by: r.by.clone(),
                        });
                    }
                    // The uncertain start stays on record, and the person's answer is a
                    // receipt of its own.
                    Stage::Resolved { ran } => {
                        if let Some((sid, sr)) = started.take() {
                            out.push(uncertain(sid, sr, &payload, approval.clone()));
                            out.push(Receipt {
                                id: *id,
                                outcome: if *ran { "executed" } else { "failed" },
                                reason: if *ran {
                                    format!("{} said it ran", r.by)
                                } else {
                                    format!(
                                        "{} said it did not run; `lifeos actions run` may run it again",
                                        r.by
                                    )
                                },
                                ended_ms: r.at_ms,
                                by: r.by.clone(),
                                ..uncertain(sid, sr, &payload, approval.clone())
                            });
                        }
                    }
                    Stage::Rejected => {}
                }
            }
            let uncertain_now = parsed.is_some_and(|a| self.state(&a) == State::Uncertain);
            if let (Some((id, r)), true) = (started, uncertain_now) {
                out.push(uncertain(id, r, &payload, approval));
            }
        }
        out.sort_by_key(|r| (r.ended_ms, r.id));
        Ok(out)
    }

    /// The full id of the action `prefix` names.
    pub fn resolve_id(&self, prefix: &str) -> Result<String> {
        let head = self.repo.head()?;
        let all = records::all(self.repo, &head.view)?;
        let (id, _) = the_one(all, prefix, "action", |(k, _)| k.starts_with(prefix))?;
        Ok(id)
    }

    /// The receipt whose id starts with `prefix`.
    pub fn receipt(&self, prefix: &str) -> Result<Receipt> {
        the_one(self.receipts()?, prefix, "receipt", |r| {
            r.id.has_hex_prefix(prefix)
        })
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

    /// Approves action `id`'s payload as it is now, for `ttl_ms`; with `expected`, only
    /// if the payload's hash (in hex) starts with it, so that a payload edited since the
    /// person read it is never approved unseen. Returns the hash pinned.
    ///
    /// The approval holds here only (it is sealed with this repository's key), for at
    /// most [`MAX_TTL_MS`], for an action of a rules file trusted here; it pins what a
    /// command runs ([`pins`]).
    pub fn approve(&self, id: &str, ttl_ms: i64, expected: Option<&str>) -> Result<Id> {
        if !(1..=MAX_TTL_MS).contains(&ttl_ms) {
            return Err(ActionsError::Refused(format!(
                "an approval holds from 1 ms to 30 days, not {ttl_ms} ms"
            )));
        }
        let (held, newest, a) = self.hold_action(id)?;
        let hash = a.payload_hash();
        if expected.is_some_and(|h| h.is_empty() || !hash.has_hex_prefix(h)) {
            return Err(ActionsError::Refused(format!(
                "action {}'s payload hash is {}, not {:?}: its payload changed since you read it; read it again with `lifeos actions show {}`",
                a.id,
                hash.to_hex(),
                expected.unwrap_or_default(),
                a.id
            )));
        }
        match self.state(&a) {
            State::Pending
            | State::Fresh
            | State::NearingExpiry
            | State::Expired
            | State::Tampered
            | State::ApprovedElsewhere
            | State::Blocked => {}
            other => {
                return Err(ActionsError::Refused(format!(
                    "action {} is {}: there is nothing to approve",
                    a.id,
                    other.name()
                )))
            }
        }
        if !self.was_trusted(&a.rules_file)? {
            return Err(ActionsError::Refused(format!(
                "action {} comes from {RULES_FILE} {}, which this repository never trusted: read it (`lifeos rules check`) and trust it (`lifeos rules trust`) first",
                a.id,
                a.rules_file.short(12)
            )));
        }
        let rec = self.approval(id, Some(newest), &self.me, (&a.payload, hash), ttl_ms)?;
        held.publish(
            self.repo,
            std::slice::from_ref(&rec),
            Vec::new(),
            &format!("approve action {id}"),
        )?;
        Ok(hash)
    }

    /// Rejects action `id`: it never runs.
    pub fn reject(&self, id: &str) -> Result<Id> {
        let (_, rec) = self.advance(id, "reject", &|a, s| {
            if s.is_final() || matches!(s, State::Running | State::Uncertain) {
                Err(format!(
                    "action {} is {}: too late to reject",
                    a.id,
                    s.name()
                ))
            } else {
                Ok(Stage::Rejected)
            }
        })?;
        Ok(rec)
    }

    /// Replaces action `id`'s payload (an approval given before then no longer holds).
    pub fn edit(&self, id: &str, payload: &Json) -> Result<Id> {
        let bytes = serde_json::to_vec(payload).expect("JSON values serialize");
        let (_, rec) = self.advance(id, "edit", &|a, s| {
            let old: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
            if s.is_final() || matches!(s, State::Running | State::Uncertain) {
                Err(format!("action {} is {}: too late to edit", a.id, s.name()))
            } else if old["kind"] != payload["kind"] {
                Err(format!(
                    "the payload of action {} is a {} action; the new one must be too",
                    a.id, old["kind"]
                ))
            } else {
                Ok(Stage::Edited {
                    payload: bytes.clone(),
                })
            }
        })?;
        Ok(rec)
    }

    /// Says what happened to action `id`, whose outcome was uncertain.
    pub fn resolve(&self, id: &str, ran: bool) -> Result<Id> {
        let (_, rec) = self.advance(id, "resolve", &|a, s| match s {
            State::Uncertain => Ok(Stage::Resolved { ran }),
            other => Err(format!(
                "action {} is {}, not uncertain: nothing to resolve",
                a.id,
                other.name()
            )),
        })?;
        Ok(rec)
    }

    /// Runs every approved action (fresh or nearing expiry); those whose approval no
    /// longer holds (expired, or the payload changed) get a blocked receipt.
    pub fn run_approved(&self) -> Result<Vec<RunReport>> {
        refuse_inside_action()?;
        let mut out = Vec::new();
        for a in self.list()? {
            if matches!(
                self.state(&a),
                State::Fresh
                    | State::NearingExpiry
                    | State::Expired
                    | State::Tampered
                    | State::ApprovedElsewhere
            ) {
                out.push(self.run_one(&a.id)?);
            }
        }
        Ok(out)
    }

    /// Runs action `id` if its approval holds: under the lock, re-checks the pinned
    /// hash and the TTL (refusing with a blocked receipt) and records the start; then
    /// causes the side effect; then records the receipt. Another process that got there
    /// first leaves nothing to do.
    ///
    /// Only an approval sealed here runs here, and what it pins (a command's program and
    /// files) must be unchanged; no action runs from inside another action's command.
    pub fn run_one(&self, id: &str) -> Result<RunReport> {
        refuse_inside_action()?;
        let started_ms = now_ms();
        let (held, newest, a) = self.hold_action(id)?;
        let state = self.state(&a);
        let pins_changed = match (&state, &a.approval) {
            (State::Fresh | State::NearingExpiry, Some(ap)) => self.pins_changed(&a, ap),
            _ => None,
        };
        let blocked = match state {
            State::Fresh | State::NearingExpiry => pins_changed,
            State::Expired
                if a
                    .approval
                    .as_ref()
                    .is_some_and(|ap| ap.at_ms > started_ms + state::CLOCK_SKEW_MS) =>
            {
                Some("approval_dated_in_the_future: the clock is behind the approval's time; approve it again".into())
            }
            State::Expired => Some("approval_expired".to_string()),
            State::Tampered => Some("payload_hash_mismatch".to_string()),
            State::Pending => {
                return Err(ActionsError::Refused(format!(
                    "action {id} is not approved: `lifeos approve {id}` first"
                )))
            }
            State::ApprovedElsewhere => {
                return Ok(RunReport {
                    action: id.to_string(),
                    state,
                    reason: format!(
                        "it was approved on another device (or by a lifeos that did not seal approvals): it runs where it was approved; `lifeos approve {id}` to run it here"
                    ),
                    receipt: None,
                })
            }
            other => {
                return Ok(RunReport {
                    action: id.to_string(),
                    state: other,
                    reason: format!("nothing to do: it is {}", other.name()),
                    receipt: None,
                })
            }
        };
        if let Some(reason) = blocked {
            let rec = record(
                id,
                Some(newest),
                &self.me,
                Stage::Finished {
                    outcome: Outcome::Blocked,
                    reason: reason.clone(),
                    started_ms,
                    status: None,
                    output: None,
                    effect: None,
                },
            );
            let short = reason.split(':').next().unwrap_or_default();
            let ids = held.publish(
                self.repo,
                std::slice::from_ref(&rec),
                Vec::new(),
                &format!("block action {id}: {short}"),
            )?;
            return Ok(RunReport {
                action: id.to_string(),
                state: State::Blocked,
                reason,
                receipt: Some(ids[0]),
            });
        }
        let start = record(id, Some(newest), &self.me, Stage::Started);
        // Once it is published (and the lock released), another process leaves the
        // action alone, and the side effect runs without holding anyone up.
        held.publish(
            self.repo,
            std::slice::from_ref(&start),
            Vec::new(),
            &format!("start action {id}"),
        )?;
        let mut ran = self.carry_out(&a);
        // Output and reason are redacted as ingest redacts extracted text; when the
        // repository's patterns cannot be read, the output is not kept at all.
        let output = match lifeos_vcs::redact::Redactor::configured(self.repo.dot_dir()) {
            Ok(r) => {
                ran.reason = r.redact(&ran.reason);
                (!ran.output.is_empty())
                    .then(|| r.redact(&String::from_utf8_lossy(&ran.output)).into_bytes())
            }
            Err(e) => {
                let kept = if ran.output.is_empty() {
                    String::new()
                } else {
                    format!("; its output was not kept ({e})")
                };
                let redactor = lifeos_vcs::redact::Redactor::new(&[])
                    .expect("the default redaction patterns are valid");
                ran.reason = format!("{}{kept}", redactor.redact(&ran.reason));
                None
            }
        };
        let mut held = self.hold()?;
        let newest = records::newest(&held.tx, &held.view, id)?.unwrap_or(id_of(&start));
        let output = output.map(|o| held.tx.store_bytes(&o)).transpose()?;
        let rec = record(
            id,
            Some(newest),
            &self.me,
            Stage::Finished {
                outcome: ran.outcome,
                reason: ran.reason.clone(),
                started_ms,
                status: ran.status,
                output,
                effect: ran.effect,
            },
        );
        let ids = held.publish(
            self.repo,
            std::slice::from_ref(&rec),
            output.into_iter().collect(),
            &format!("{} action {id}", ran.outcome.name()),
        )?;
        Ok(RunReport {
            action: id.to_string(),
            state: if ran.outcome == Outcome::Executed {
                State::Executed
            } else {
                State::Failed
            },
            reason: ran.reason,
            receipt: Some(ids[0]),
        })
    }

    /// Why what approval `ap` of action `a` pins no longer holds, if it does not: a `run`
    /// action's program or files changed, or its pins were never taken.
    fn pins_changed(&self, a: &Action, ap: &state::Approval) -> Option<String> {
        let payload: Json = serde_json::from_slice(&a.payload).unwrap_or(Json::Null);
        if payload["kind"] != "run" {
            return None;
        }
        match pins::Pins::decode(&ap.pins) {
            None => Some("pins_missing: the approval does not say which program it approved; approve it again".into()),
            Some(p) => pins::changed(&p, self.repo.workdir()).map(|why| format!("pins_changed: {why}")),
        }
    }

    /// Causes action `a`'s side effect.
    fn carry_out(&self, a: &Action) -> exec::Ran {
        let payload: Json = match serde_json::from_slice(&a.payload) {
            Ok(p) => p,
            Err(e) => return exec::Ran::failure(format!("the payload is not JSON: {e}")),
        };
        let text = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
        // A ref action names its commit; an empty one deletes the ref (a rollback).
        let target = || -> std::result::Result<Option<Id>, String> {
            match text("commit").as_str() {
                "" => Ok(None),
                hex => Id::from_hex(hex)
                    .map(Some)
                    .ok_or_else(|| format!("the payload's commit {hex:?} is not an id")),
            }
        };
        let internal = |r: std::result::Result<(Id, String), String>| match r {
            Ok((op, what)) => exec::Ran::done(what, op),
            Err(e) => exec::Ran::failure(e),
        };
        match payload["kind"].as_str() {
            Some("run") => {
                // The environment the approval pinned, and nothing else of this
                // process's: no passphrase, no credentials, unless the rule names them.
                let Some(pins) = a
                    .approval
                    .as_ref()
                    .and_then(|ap| pins::Pins::decode(&ap.pins))
                else {
                    return exec::Ran::failure("the approval pins no program".into());
                };
                let mut env = pins.env.clone();
                let mut secrets = Vec::new();
                if let Some(names) = payload["env"].as_array() {
                    for n in names.iter().filter_map(Json::as_str) {
                        if let Ok(v) = std::env::var(n) {
                            secrets.push(v.clone());
                            env.push((n.to_string(), v));
                        }
                    }
                }
                env.extend([
                    (ACTION_VAR.to_string(), a.id.clone()),
                    (DEPTH_VAR.to_string(), "1".to_string()),
                    ("LIFEOS_RULE".to_string(), a.rule.clone()),
                    (
                        "LIFEOS_EVENT".to_string(),
                        match &payload["stdin"] {
                            Json::Null => a.event.clone(),
                            stdin => stdin.to_string(),
                        },
                    ),
                    (
                        "LIFEOS_REPO".to_string(),
                        self.repo.workdir().display().to_string(),
                    ),
                ]);
                // Each field as LIFEOS_<FIELD>, but the event's name as LIFEOS_EVENT_NAME:
                // LIFEOS_EVENT is the whole event.
                // From the approved payload, which is what the hash pinned.
                if let Json::Object(fields) = &payload["stdin"] {
                    for (k, v) in fields {
                        if let Some(v) = v.as_str() {
                            let name = match k.as_str() {
                                "event" => "EVENT_NAME".to_string(),
                                k => k.to_ascii_uppercase(),
                            };
                            env.push((format!("LIFEOS_{name}"), v.into()));
                        }
                    }
                }
                let mut ran = exec::run(
                    &payload,
                    self.repo.workdir(),
                    std::path::Path::new(&pins.program.path),
                    &env,
                );
                // What the rule let through is never kept in the receipt.
                for s in secrets.iter().filter(|s| s.len() >= 4) {
                    ran.reason = ran.reason.replace(s.as_str(), lifeos_vcs::redact::MARK);
                    let out = String::from_utf8_lossy(&ran.output)
                        .replace(s.as_str(), lifeos_vcs::redact::MARK);
                    ran.output = out.into_bytes();
                }
                ran
            }
            Some("http") => exec::http(&payload),
            Some(kind @ ("tag" | "branch")) => internal(target().and_then(|commit| {
                let name = text("name");
                let set = if kind == "tag" {
                    self.repo.set_tag(&name, commit, true)
                } else {
                    self.repo.set_branch(&name, commit, true)
                };
                let what = match commit {
                    Some(c) => format!("{kind} {name} set to {}", c.short(12)),
                    None => format!("{kind} {name} deleted"),
                };
                set.map(|op| (op, what))
                    .map_err(|e| format!("{kind} {name}: {e}"))
            })),
            Some("restore") => internal(target().and_then(|commit| {
                let path = text("path");
                let commit = commit.ok_or("the payload names no commit to restore from")?;
                let wc = self.repo.lock_working_copy().map_err(|e| e.to_string())?;
                self.repo
                    .restore_path(&wc, path.as_bytes(), &commit, false)
                    .map(|(_, op, _)| (op, format!("{path} restored from {}", commit.short(12))))
                    .map_err(|e| format!("restore {path}: {e}"))
            })),
            Some("entity") => internal(self.change_entity(&payload)),
            Some("ingest") => match self.ingest.map(|f| f(self.repo)) {
                Some(Ok(what)) => exec::Ran {
                    outcome: Outcome::Executed,
                    reason: what,
                    status: None,
                    output: Vec::new(),
                    effect: None,
                },
                Some(Err(why)) => exec::Ran::failure(format!("ingest: {why}")),
                None => exec::Ran::failure(
                    "this program cannot extract text; `lifeos actions run` can".into(),
                ),
            },
            other => exec::Ran::failure(format!("unknown action kind {other:?}")),
        }
    }

    /// Carries out an `entity` payload: add, set, or (a rollback) restore an entity to an
    /// object or remove it. Returns the operation and what was done.
    fn change_entity(&self, payload: &Json) -> std::result::Result<(Id, String), String> {
        use lifeos_entities::EntityChange;
        let text = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
        let schema = self
            .repo
            .head()
            .and_then(|h| self.repo.entity_schema(&h.view))
            .map_err(|e| e.to_string())?;
        let attrs = |id: &str, kind: &str| -> std::result::Result<Vec<_>, String> {
            let empty = serde_json::Map::new();
            payload["attrs"]
                .as_object()
                .unwrap_or(&empty)
                .iter()
                .map(|(n, v)| {
                    let v = v.as_str().unwrap_or_default();
                    schema
                        .parse_value(id, kind, n, v)
                        .map(|v| (n.clone(), v))
                        .map_err(|e| e.to_string())
                })
                .collect()
        };
        let (id, change) = match text("change").as_str() {
            "add" => {
                let kind = text("type");
                let attrs = attrs("", &kind)?;
                (None, EntityChange::Add { kind, attrs })
            }
            "set" => {
                let id = text("id");
                let kind = id.split(':').next().unwrap_or_default().to_string();
                let attrs = attrs(&id, &kind)?;
                (Some(id), EntityChange::Set(attrs))
            }
            "restore" => {
                let change = match text("object").as_str() {
                    "" => EntityChange::Remove,
                    hex => {
                        let obj = Id::from_hex(hex).ok_or("the payload's object is not an id")?;
                        EntityChange::Restore(
                            self.repo.entity_object(&obj).map_err(|e| e.to_string())?,
                        )
                    }
                };
                (Some(text("id")), change)
            }
            other => return Err(format!("unknown entity change {other:?}")),
        };
        let verb = payload["change"].as_str().unwrap_or_default().to_string();
        self.repo
            .change_entity(id.as_deref(), change)
            .map(|(op, id, _)| (op, format!("entity {id}: {verb}")))
            .map_err(|e| e.to_string())
    }
}

impl Rules {
    /// The rules that fire for `trigger` (caused by operation `op`), each with the event
    /// instance's identity (for idempotency) and its template fields.
    pub fn matching(
        &self,
        trigger: &Trigger,
        op: Option<Id>,
    ) -> Vec<(&rules::Rule, String, BTreeMap<String, String>)> {
        if !self.rules.iter().any(|r| r.on == trigger.event()) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (identity, base) in instances(trigger, op) {
            for rule in &self.rules {
                if let Some(fields) = matches(rule, trigger, &base) {
                    out.push((rule, identity.clone(), fields));
                }
            }
        }
        out
    }
}

/// The field a rule matches and a command gets for a file's path: its bytes as they are
/// (not the quoted form a person reads), which must be UTF-8 to go into a payload. A
/// name that is not marks the fields ([`NOT_UTF8`]) and fires nothing. Returns the path
/// as text for the instance's identity.
fn path_field(path: &[u8], f: &mut BTreeMap<String, String>) -> String {
    match std::str::from_utf8(path) {
        Ok(p) => {
            f.insert("path".into(), p.to_string());
            p.to_string()
        }
        Err(_) => {
            let shown = lifeos_vcs::path::display(path).into_owned();
            f.insert(NOT_UTF8.into(), shown.clone());
            shown
        }
    }
}

/// The field marking an event whose path is not UTF-8 (shown quoted): no rule fires for
/// it, since no payload can carry its bytes.
const NOT_UTF8: &str = "path_not_utf8";

/// The event instances of a trigger: (identity for idempotency, template fields). A
/// commit gives one per changed path.
fn instances(trigger: &Trigger, op: Option<Id>) -> Vec<(String, BTreeMap<String, String>)> {
    let base = |event: &str, commit: Option<&Id>, branch: &Option<String>| {
        let mut f = BTreeMap::new();
        f.insert("event".to_string(), event.to_string());
        if let Some(c) = commit {
            f.insert("commit".into(), c.to_hex());
            f.insert("short".into(), c.short(12));
        }
        f.insert("branch".into(), branch.clone().unwrap_or_default());
        f.insert("op".into(), op.map(|o| o.to_hex()).unwrap_or_default());
        f
    };
    match trigger {
        Trigger::Commit {
            commit,
            changes,
            branch,
            message,
        } => changes
            .iter()
            .map(|(path, change)| {
                let mut f = base("commit", Some(commit), branch);
                let p = path_field(path, &mut f);
                f.insert("change".into(), change.to_string());
                f.insert("message".into(), message.clone());
                (format!("commit {} {p}", commit.to_hex()), f)
            })
            .collect(),
        Trigger::Hook {
            hook,
            commit,
            branch,
            args,
            input,
        } => {
            let mut f = base("hook", commit.as_ref(), branch);
            f.insert("hook".into(), hook.clone());
            f.insert("args".into(), args.join(" "));
            f.insert("input".into(), input.clone());
            let identity = format!(
                "hook {hook} {} {} {} {}",
                commit.map(|c| c.to_hex()).unwrap_or_default(),
                branch.as_deref().unwrap_or_default(),
                args.join(" "),
                Id::hash(input.as_bytes()).to_hex()
            );
            vec![(identity, f)]
        }
        Trigger::Ref {
            kind,
            name,
            from,
            to,
        } => {
            let hex = |c: &Option<Id>| c.map(|c| c.to_hex()).unwrap_or_default();
            let mut f = base(kind, None, &None);
            f.remove("branch");
            f.insert("name".into(), name.clone());
            f.insert("from".into(), hex(from));
            f.insert("to".into(), hex(to));
            f.insert("short".into(), to.map(|c| c.short(12)).unwrap_or_default());
            vec![(format!("{kind} {name} {} {}", hex(from), hex(to)), f)]
        }
        Trigger::Entity {
            id,
            change,
            attributes,
            object,
        } => {
            let mut f = base("entity", None, &None);
            f.remove("branch");
            f.insert("entity".into(), id.clone());
            f.insert(
                "type".into(),
                id.split(':').next().unwrap_or_default().to_string(),
            );
            f.insert("change".into(), change.to_string());
            f.insert("attributes".into(), attributes.join(","));
            vec![(format!("entity {id} {change} {}", object.to_hex()), f)]
        }
        Trigger::Time { rule, slot_ms } => {
            let mut f = base("time", None, &None);
            f.remove("branch");
            let time = jiff::Timestamp::from_millisecond(*slot_ms)
                .map(|t| {
                    t.to_zoned(jiff::tz::TimeZone::system())
                        .strftime("%Y-%m-%dT%H:%M:%S%:z")
                        .to_string()
                })
                .unwrap_or_default();
            f.insert("time".into(), time);
            vec![(format!("time {rule} {slot_ms}"), f)]
        }
        Trigger::Ingest {
            path, file, kind, ..
        } => {
            let mut f = base("ingest", None, &None);
            f.remove("branch");
            let path = path_field(path, &mut f);
            f.insert("file".into(), file.to_hex());
            f.insert("kind".into(), kind.clone());
            vec![(format!("ingest {path} {} {kind}", file.to_hex()), f)]
        }
    }
}

/// The fields of one instance of `trigger` (`fields`) if `rule` fires for it (an
/// `ingest` rule's pattern adds the text it matched as `match`).
fn matches(
    rule: &rules::Rule,
    trigger: &Trigger,
    fields: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    if rule.on != trigger.event() {
        return None;
    }
    let path_ok = |p: &str| rule.paths.as_ref().is_none_or(|g| g.is_match(p));
    // A path that is not UTF-8 matches by its quoted form, for the caller to say why the
    // rule did not fire.
    let path = fields.get("path").or(fields.get(NOT_UTF8));
    let fires = match trigger {
        Trigger::Commit { .. } => {
            fields.get("change").is_some_and(|c| c != "deleted")
                && rule.paths.is_some()
                && path.is_some_and(|p| path_ok(p))
        }
        Trigger::Hook { hook, .. } => rule.hook.as_deref() == Some(hook),
        Trigger::Time { rule: name, .. } => rule.name == *name,
        Trigger::Ref { name, .. } => rule.names.as_ref().is_none_or(|g| g.is_match(name)),
        Trigger::Entity {
            id,
            change,
            attributes,
            ..
        } => {
            let kind = id.split(':').next().unwrap_or_default();
            (rule.types.is_empty() || rule.types.iter().any(|t| t == kind))
                && (rule.changes.is_empty() || rule.changes.iter().any(|c| c == change))
                && (rule.attributes.is_empty()
                    || attributes.iter().any(|a| rule.attributes.contains(a)))
        }
        Trigger::Ingest { kind, text, .. } => {
            if !(path.is_some_and(|p| path_ok(p))
                && (rule.kinds.is_empty() || rule.kinds.contains(kind)))
            {
                return None;
            }
            if let Some(re) = &rule.text {
                let m = re.find(text)?;
                let mut f = fields.clone();
                f.insert("match".into(), m.as_str().chars().take(200).collect());
                return Some(f);
            }
            true
        }
    };
    fires.then(|| fields.clone())
}
