//! What sets rules off: the triggers (a commit, a git hook, a ref moved, an entity changed,
//! text extracted, a time slot), found from the operations published since a moment, and
//! the instances of a rule each one matches (one per changed path, with its fields).

use super::*;

impl<'r> Actions<'r> {
    /// The triggers in the operations this user and host published since `since_ms`
    /// (oldest first): branches and tags moved, entities changed, text extracted. Nothing
    /// is read when no trusted rule listens for those events.
    pub fn triggers_since(&self, since_ms: i64) -> Result<Vec<Triggered>> {
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
    pub(crate) fn paths_at_head(&self) -> Result<BTreeMap<Id, Vec<BString>>> {
        let head = self.repo.head()?;
        let mut out: BTreeMap<Id, Vec<BString>> = BTreeMap::new();
        if let Some(tree) = self.repo.at_tree(&head.view)? {
            for (path, entry) in self.repo.flatten(&tree)? {
                out.entry(entry.id).or_default().push(path);
            }
        }
        Ok(out)
    }

    /// Whether firing rules for `event` could do anything: a trusted rule listens for it,
    /// or the rules file is not trusted (firing says so).
    pub fn listens(&self, event: &str) -> Result<bool> {
        Ok(match self.trusted_index()? {
            Ok((_, ix)) => ix.listens(event),
            Err(untrusted) => untrusted.is_some(),
        })
    }

    /// The triggers of git hook `name`, run by git with `args` and `input` once what git
    /// did is imported: the hook itself, and, after a commit or a merge, the commit git
    /// made (its changes computed only when some rule could want them). A commit whose
    /// changes cannot be read is left out and its error returned beside the hook's
    /// trigger, which fires all the same.
    pub fn hook_triggers(
        &self,
        name: &str,
        args: &[String],
        input: &str,
    ) -> Result<(Vec<Triggered>, Option<ActionsError>)> {
        let head = self.repo.head()?;
        let commit = head.view.at_commit();
        let mut triggers = Vec::new();
        let mut missed = None;
        if matches!(name, "post-commit" | "post-merge") && self.listens("commit").unwrap_or(true) {
            if let Some(c) = commit {
                match commit_trigger(self.repo, c) {
                    Ok(t) => triggers.push((t, Some(head.id))),
                    Err(e) => missed = Some(e),
                }
            }
        }
        triggers.push((
            Trigger::Hook {
                hook: name.to_string(),
                commit,
                branch: head.view.current_branch.clone(),
                args: args.to_vec(),
                input: input.to_string(),
            },
            Some(head.id),
        ));
        Ok((triggers, missed))
    }
}

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

/// A trigger with the operation that set it off, if known.
pub type Triggered = (Trigger, Option<Id>);

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
pub(crate) const NOT_UTF8: &str = "path_not_utf8";

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
