//! History verbs: log, show, status, branch, tag, checkout, describe, merge, op, undo,
//! reindex, and restoring a path into the folder.

use std::collections::HashMap;
use std::io::Write;

use lifeos_store::Id;
use lifeos_vcs::history::Target;
use lifeos_vcs::object::{change_id_str, Event, Signature};
use lifeos_vcs::path::display;
use lifeos_vcs::treediff::Change;
use lifeos_vcs::{Commit, Repo, View};
use serde_json::{json, Value};

use crate::commands::{lock_folder, resolve_in, view_at};
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, local_time, print_json, relative_time, skipped_json, Style};
use crate::{AtArg, BranchCmd, OpCmd, TagCmd};
use lifeos_entities::EntitiesExt;

fn sig_json(s: &Signature) -> Value {
    json!({"name": s.name, "email": s.email, "time": s.time, "tz_offset_min": s.tz_offset_min})
}

fn commit_json(id: &Id, c: &Commit, refs: &HashMap<Id, Vec<String>>) -> Value {
    json!({
        "commit": id.to_hex(),
        "change_id": change_id_str(&c.change_id),
        "parents": c.parents.iter().map(|p| p.to_hex()).collect::<Vec<_>>(),
        "tree": c.tree.to_hex(),
        "author": sig_json(&c.author),
        "committer": sig_json(&c.committer),
        "message": String::from_utf8_lossy(&c.message),
        "refs": refs.get(id).cloned().unwrap_or_default(),
        "conflicts": c.conflicts.iter().map(|k| display(&k.path)).collect::<Vec<_>>(),
    })
}

fn change_json(c: &Change) -> Value {
    json!({
        "path": display(&c.path),
        "status": c.kind.name(),
        "old": c.old.as_ref().map(|e| json!({"id": e.id.to_hex(), "kind": e.kind.name(), "size": e.size})),
        "new": c.new.as_ref().map(|e| json!({"id": e.id.to_hex(), "kind": e.kind.name(), "size": e.size})),
    })
}

fn commit_line(
    style: Style,
    view: &View,
    refs: &HashMap<Id, Vec<String>>,
    id: &Id,
    c: &Commit,
) -> String {
    let at = if view.at_commit() == Some(*id) {
        "@ "
    } else {
        "  "
    };
    let names = refs
        .get(id)
        .map(|r| format!(" {}", style.name(&r.join(" "))))
        .unwrap_or_default();
    let conflict = if c.conflicts.is_empty() {
        String::new()
    } else {
        format!(
            " {}",
            style.bad(&format!("conflict ({})", c.conflicts.len()))
        )
    };
    format!(
        "{at}{} {}{names} {} {}{conflict}\n    {}",
        style.change(&change_id_str(&c.change_id)[..12]),
        style.id(&id.short(12)),
        c.author.name,
        style.dim(&relative_time(c.committer.time * 1000)),
        c.summary()
    )
}

/// What `lifeos log` was asked for.
pub struct LogArgs<'a> {
    /// Only commits that changed this path.
    pub path: Option<&'a [u8]>,
    /// The revset (default `ancestors(@)`).
    pub revset: Option<&'a str>,
    /// At most this many commits.
    pub limit: Option<usize>,
    /// Draw the graph.
    pub graph: bool,
    /// JSON instead of text.
    pub json: bool,
}

/// `lifeos log`.
pub fn log(repo: &Repo, args: &LogArgs<'_>, at: &AtArg, style: Style) -> CliResult<u8> {
    let LogArgs {
        path,
        revset,
        limit,
        graph,
        json,
    } = *args;
    let view = view_at(repo, at)?;
    // A folder on no commit (a lazy clone before its first checkout) shows every commit.
    let default = if view.at_commit().is_none() && !view.heads.is_empty() {
        "all()"
    } else {
        "ancestors(@)"
    };
    let expr = lifeos_vcs::revset::parse(revset.unwrap_or(default))?;
    let clean = lifeos_vcs::path::clean(path.unwrap_or_default())?;
    let commits = log_commits(repo, &view, &expr, &clean, limit)?;
    let refs = view.refs_by_commit();
    if json {
        print_json(
            "lifeos.log.v1",
            json!({"commits": commits.iter().map(|(id, c)| commit_json(id, c, &refs)).collect::<Vec<_>>()}),
        );
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let mut columns = Graph::default();
    let shown: std::collections::HashSet<Id> = commits.iter().map(|(id, _)| *id).collect();
    for (id, c) in &commits {
        let text = commit_line(style, &view, &refs, id, c);
        if !graph {
            let _ = writeln!(out, "{text}");
            continue;
        }
        let node = if view.at_commit() == Some(*id) {
            '@'
        } else {
            '○'
        };
        let parents: Vec<Id> = c
            .parents
            .iter()
            .filter(|p| shown.contains(p))
            .copied()
            .collect();
        for line in columns.join(*id) {
            let _ = writeln!(out, "{line}");
        }
        // The commit's lines, each after its graph prefix (the node says which is @).
        for (i, t) in text.lines().enumerate() {
            let t = t.strip_prefix("@ ").unwrap_or(t).trim_start();
            let _ = writeln!(
                out,
                "{}{t}",
                columns.prefix(i == 0, *id, node, !parents.is_empty())
            );
        }
        for line in columns.advance(*id, &parents) {
            let _ = writeln!(out, "{line}");
        }
    }
    Ok(0)
}

/// The commits `log` shows, newest first, with their content. With a limit, the
/// ancestors of one revision are read one at a time while they form a chain (20 commits
/// of a 100,000-commit history without reading the rest); otherwise the revset is
/// evaluated over every visible commit.
fn log_commits(
    repo: &Repo,
    view: &lifeos_vcs::object::View,
    expr: &lifeos_vcs::revset::Expr,
    path: &[u8],
    limit: Option<usize>,
) -> CliResult<Vec<(Id, lifeos_vcs::object::Commit)>> {
    if let Some(n) = limit {
        if let Some(mut chain) = lifeos_vcs::revset::Chain::of(repo, view, expr)? {
            let ids = repo.commits_changing(&mut chain, path, Some(n))?;
            if ids.len() >= n || chain.whole()? {
                return Ok(ids
                    .into_iter()
                    .map(|id| Ok((id, repo.commit(&id)?)))
                    .collect::<lifeos_vcs::error::Result<_>>()?);
            }
        }
    }
    let ev = lifeos_vcs::revset::Evaluator::new(repo, view)?;
    let ids = repo.commits_changing(ev.sorted(ev.eval(expr)?), path, limit)?;
    Ok(ids
        .into_iter()
        .map(|id| {
            let c = ev.commit(&id).clone();
            (id, c)
        })
        .collect())
}

/// The columns of `log --graph`: each waits for a commit (a parent of one shown above).
#[derive(Default)]
struct Graph {
    columns: Vec<Option<Id>>,
}

impl Graph {
    /// The connector rows to draw before commit `id`: where several columns wait for it,
    /// they join into the leftmost (`├─╯`). Makes sure one column waits for it.
    fn join(&mut self, id: Id) -> Vec<String> {
        let waiting: Vec<usize> = (0..self.columns.len())
            .filter(|i| self.columns[*i] == Some(id))
            .collect();
        let mut rows = Vec::new();
        match waiting.as_slice() {
            [] => match self.columns.iter().position(Option::is_none) {
                Some(free) => self.columns[free] = Some(id),
                None => self.columns.push(Some(id)),
            },
            [_] => {}
            [first, rest @ ..] => {
                let last = *rest.last().expect("several columns");
                let mut row = String::new();
                for (i, c) in self.columns.iter().enumerate() {
                    let cell = if i == *first {
                        "├─"
                    } else if rest.contains(&i) && i == last {
                        "╯ "
                    } else if rest.contains(&i) {
                        "┴─"
                    } else if i > *first && i < last {
                        if c.is_some() {
                            "┼─"
                        } else {
                            "──"
                        }
                    } else if c.is_some() {
                        "│ "
                    } else {
                        "  "
                    };
                    row.push_str(cell);
                }
                rows.push(row.trim_end().to_string());
                for i in rest {
                    self.columns[*i] = None;
                }
            }
        }
        self.trim();
        rows
    }

    /// The graph part of a line of commit `id`: its node on the first line, a line down
    /// its column on the others (when a parent of it is shown below).
    fn prefix(&self, first: bool, id: Id, node: char, parents: bool) -> String {
        let mut out = String::new();
        for c in &self.columns {
            match c {
                Some(x) if *x == id && first => {
                    out.push(node);
                    out.push(' ');
                }
                Some(x) if *x == id && !parents => out.push_str("  "),
                Some(_) => out.push_str("│ "),
                None => out.push_str("  "),
            }
        }
        out.push(' ');
        out
    }

    /// After commit `id`: its column waits for its first parent (or ends), and each other
    /// parent not awaited yet gets a column of its own, drawn branching off (`├─╮`).
    fn advance(&mut self, id: Id, parents: &[Id]) -> Vec<String> {
        let col = self
            .columns
            .iter()
            .position(|c| *c == Some(id))
            .expect("join() gave the commit a column");
        self.columns[col] = parents.first().copied();
        let before = self.columns.len();
        for p in parents.iter().skip(1) {
            if !self.columns.contains(&Some(*p)) {
                self.columns.push(Some(*p));
            }
        }
        let mut rows = Vec::new();
        if self.columns.len() > before {
            let mut row = String::new();
            for (i, c) in self.columns.iter().enumerate() {
                let cell = if i == col {
                    "├─"
                } else if i + 1 == self.columns.len() {
                    "╮ "
                } else if i > col && i >= before {
                    "┬─"
                } else if i > col {
                    if c.is_some() {
                        "┼─"
                    } else {
                        "──"
                    }
                } else if c.is_some() {
                    "│ "
                } else {
                    "  "
                };
                row.push_str(cell);
            }
            rows.push(row.trim_end().to_string());
        }
        self.trim();
        rows
    }

    fn trim(&mut self) {
        while self.columns.last() == Some(&None) {
            self.columns.pop();
        }
    }
}

/// `lifeos show`.
pub fn show(repo: &Repo, rev: &str, at: &AtArg, json: bool, style: Style) -> CliResult<u8> {
    let view = view_at(repo, at)?;
    let (id, c) = resolve_in(repo, &view, rev)?;
    let parent_tree = match c.parents.first() {
        Some(p) => Some(repo.commit(p)?.tree),
        None => None,
    };
    let changes = repo.diff_trees(parent_tree.as_ref(), Some(&c.tree))?;
    let refs = view.refs_by_commit();
    if json {
        let mut v = commit_json(&id, &c, &refs);
        v["changes"] = changes.iter().map(change_json).collect::<Vec<_>>().into();
        print_json("lifeos.show.v1", v);
        return Ok(0);
    }
    println!("commit   {}", style.id(&id.to_hex()));
    println!("change   {}", style.change(&change_id_str(&c.change_id)));
    for p in &c.parents {
        println!("parent   {}", style.id(&p.short(12)));
    }
    if let Some(r) = refs.get(&id) {
        println!("refs     {}", style.name(&r.join(" ")));
    }
    println!(
        "author   {} <{}> {}",
        c.author.name,
        c.author.email,
        local_time(c.author.time * 1000)
    );
    println!(
        "\n    {}\n",
        String::from_utf8_lossy(&c.message)
            .trim_end()
            .replace('\n', "\n    ")
    );
    for ch in &changes {
        let size = ch
            .new
            .as_ref()
            .or(ch.old.as_ref())
            .map(|e| human_bytes(e.size))
            .unwrap_or_default();
        println!(
            "{} {}  {}",
            ch.kind.letter(),
            display(&ch.path),
            style.dim(&size)
        );
    }
    for k in &c.conflicts {
        println!("{} {}", style.bad("conflict"), display(&k.path));
    }
    Ok(0)
}

/// `lifeos status`.
pub fn status(repo: &Repo, json: bool, style: Style) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let st = repo.status(&wc)?;
    if json {
        print_json(
            "lifeos.status.v1",
            json!({
                "commit": st.base.map(|b| b.to_hex()),
                "branch": st.branch,
                "clean": st.changes.is_empty() && st.conflicts.is_empty(),
                "changes": st.changes.iter().map(change_json).collect::<Vec<_>>(),
                "conflicts": st.conflicts.iter().map(|k| json!({
                    "path": display(&k.path), "base": k.base.map(|i| i.to_hex()), "ours": k.ours.map(|i| i.to_hex()), "theirs": k.theirs.map(|i| i.to_hex()),
                })).collect::<Vec<_>>(),
                "skipped": skipped_json(&st.skipped),
                "unreadable": skipped_json(&st.unreadable),
            }),
        );
        return Ok(0);
    }
    let on = match (&st.branch, st.base) {
        (Some(b), Some(c)) => format!("on {} at {}", style.name(b), style.id(&c.short(12))),
        (Some(b), None) => format!("on {} (no commits yet)", style.name(b)),
        (None, Some(c)) => format!("detached at {}", style.id(&c.short(12))),
        (None, None) => "no commits yet".into(),
    };
    println!("{on}");
    if st.changes.is_empty() && st.conflicts.is_empty() {
        println!("nothing changed since the last commit");
    }
    for c in &st.changes {
        println!("{} {}", c.kind.letter(), display(&c.path));
    }
    for k in &st.conflicts {
        println!(
            "{} {} (unresolved; edit it and commit to resolve)",
            style.bad("conflict"),
            display(&k.path)
        );
    }
    for s in &st.unreadable {
        println!(
            "{} {} ({}; `lifeos commit` refuses until it can be read)",
            style.bad("unreadable"),
            display(&s.path),
            s.reason
        );
    }
    for s in &st.skipped {
        eprintln!("warning: not recorded: {}: {}", display(&s.path), s.reason);
    }
    Ok(0)
}

/// `lifeos branch ...`.
pub fn branch(repo: &Repo, cmd: BranchCmd, style: Style) -> CliResult<u8> {
    match cmd {
        BranchCmd::Create { name, revision } => {
            let head = repo.head()?;
            let (id, _) = resolve_in(repo, &head.view, &revision)?;
            repo.set_branch(&name, Some(id), false)?;
            println!(
                "Created branch {} at {}",
                style.name(&name),
                style.id(&id.short(12))
            );
        }
        BranchCmd::Set { name, revision } => {
            let head = repo.head()?;
            let (id, _) = resolve_in(repo, &head.view, &revision)?;
            if head.view.branch(&name).is_none() {
                return Err(unknown_ref(&head.view.branches, &name, "branch"));
            }
            repo.set_branch(&name, Some(id), true)?;
            println!(
                "Moved branch {} to {}",
                style.name(&name),
                style.id(&id.short(12))
            );
        }
        BranchCmd::Delete { name } => {
            let head = repo.head()?;
            if head.view.branch(&name).is_none() {
                return Err(unknown_ref(&head.view.branches, &name, "branch"));
            }
            repo.set_branch(&name, None, true)?;
            println!("Deleted branch {name}");
        }
        BranchCmd::Rename { old, new } => {
            let head = repo.head()?;
            if head.view.branch(&old).is_none() {
                return Err(unknown_ref(&head.view.branches, &old, "branch"));
            }
            repo.rename_branch(&old, &new)?;
            println!("Renamed branch {old} to {}", style.name(&new));
        }
        BranchCmd::List { at, json } => {
            let view = view_at(repo, &at)?;
            if json {
                print_json(
                    "lifeos.branches.v1",
                    json!({"branches": view.branches.iter().map(|(n, id)| json!({
                        "name": n, "commit": id.to_hex(), "current": view.current_branch.as_deref() == Some(n),
                    })).collect::<Vec<_>>()}),
                );
            } else {
                for (n, id) in &view.branches {
                    let mark = if view.current_branch.as_deref() == Some(n) {
                        "*"
                    } else {
                        " "
                    };
                    let summary = repo.commit(id)?.summary();
                    println!(
                        "{mark} {} {} {summary}",
                        style.name(n),
                        style.id(&id.short(12))
                    );
                }
            }
        }
    }
    Ok(0)
}

fn unknown_ref(refs: &[(String, Id)], name: &str, what: &str) -> CliError {
    let names: Vec<&str> = refs.iter().map(|(n, _)| n.as_str()).collect();
    let hint = if names.is_empty() {
        format!("there are no {what}es yet")
    } else {
        format!("existing: {}", names.join(", "))
    };
    CliError::new(format!("no {what} named {name:?}")).hint(hint)
}

/// `lifeos tag ...`.
pub fn tag(repo: &Repo, cmd: TagCmd, style: Style) -> CliResult<u8> {
    match cmd {
        TagCmd::Create {
            name,
            revision,
            force,
        } => {
            let head = repo.head()?;
            let (id, _) = resolve_in(repo, &head.view, &revision)?;
            repo.set_tag(&name, Some(id), force)?;
            println!(
                "Tagged {} as {}",
                style.id(&id.short(12)),
                style.name(&name)
            );
        }
        TagCmd::Delete { name } => {
            repo.set_tag(&name, None, true)?;
            println!("Deleted tag {name}");
        }
        TagCmd::List { at, json } => {
            let view = view_at(repo, &at)?;
            if json {
                print_json(
                    "lifeos.tags.v1",
                    json!({"tags": view.tags.iter().map(|(n, id)| json!({"name": n, "commit": id.to_hex()})).collect::<Vec<_>>()}),
                );
            } else {
                for (n, id) in &view.tags {
                    println!("{} {}", style.name(n), style.id(&id.short(12)));
                }
            }
        }
    }
    Ok(0)
}

fn uncommitted_hint(e: lifeos_vcs::VcsError) -> CliError {
    let is_uncommitted = matches!(e, lifeos_vcs::VcsError::Uncommitted(_));
    let err = CliError::from(e);
    if is_uncommitted {
        err.hint("commit them first (`lifeos commit -m ...`), or pass --force to save them as a commit and go ahead")
    } else {
        err
    }
}

/// `lifeos checkout`.
pub fn checkout(
    repo: &Repo,
    branch: Option<String>,
    revision: Option<String>,
    force: bool,
    style: Style,
) -> CliResult<u8> {
    // The target is resolved in the view current once the folder is ours.
    let wc = lock_folder(repo, style)?;
    let head = repo.head()?;
    let target = match (branch, revision) {
        (Some(b), None) if head.view.branch(&b).is_some() => Target::Branch(b),
        (Some(b), None) => Target::Commit(repo.resolve_rev(&head.view, &b)?),
        (None, Some(r)) => Target::Commit(repo.resolve_rev(&head.view, &r)?),
        _ => return Err(CliError::new("name a branch, or a revision with -r")),
    };
    let (commit, saved, _) = repo
        .checkout(&wc, &target, force)
        .map_err(uncommitted_hint)?;
    if let Some(s) = saved {
        println!(
            "Saved uncommitted changes as {} (recover them with `lifeos restore --to DIR -r {}`)",
            style.id(&s.short(12)),
            s.short(12)
        );
    }
    match target {
        Target::Branch(b) => println!(
            "Switched to branch {} at {}",
            style.name(&b),
            style.id(&commit.short(12))
        ),
        Target::Commit(_) => println!(
            "Switched to {} (detached; `lifeos branch create NAME` to keep commits on a branch)",
            style.id(&commit.short(12))
        ),
    }
    Ok(0)
}

/// `lifeos describe`.
pub fn describe(repo: &Repo, rev: &str, message: &str, style: Style) -> CliResult<u8> {
    let (old, new, _) = repo.describe(rev, message.as_bytes())?;
    println!(
        "Rewrote {} as {} (same change)",
        style.id(&old.short(12)),
        style.id(&new.short(12))
    );
    Ok(0)
}

/// `lifeos merge`.
pub fn merge(repo: &Repo, branch: &str, style: Style) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let out = repo.merge(&wc, branch).map_err(uncommitted_hint)?;
    println!("Merged {branch} as {}", style.id(&out.commit.short(12)));
    for p in &out.merged {
        println!("  merged  {}", display(p));
    }
    for p in &out.conflicts {
        println!("  {} {}", style.bad("conflict"), display(p));
    }
    if !out.conflicts.is_empty() {
        eprintln!(
            "{} paths have conflicts, recorded in the commit; edit them and commit to resolve",
            out.conflicts.len()
        );
        return Ok(1);
    }
    Ok(0)
}

/// Most events `op log` prints for one operation (`op show` prints them all).
const OP_LOG_EVENTS: usize = 20;

/// An operation as `op log` prints it, after `mark`: id, who, when, what, and its
/// `events` (the first of them when it has more: then how many more).
fn print_op(
    out: &mut dyn Write,
    mark: &str,
    (id, o): (&Id, &lifeos_vcs::Operation),
    events: &[Event],
    style: Style,
) {
    let _ = writeln!(
        out,
        "{mark} {} {}@{} {} ({})\n    {}",
        style.id(&id.short(12)),
        o.user,
        o.host,
        local_time(o.end_ms),
        style.dim(&relative_time(o.end_ms)),
        o.description
    );
    for e in events {
        let _ = writeln!(out, "    - {}", event_text(e));
    }
    if o.events.len() > events.len() as u64 {
        let _ = writeln!(
            out,
            "    - and {} more events (lifeos op show {})",
            o.events.len() - events.len() as u64,
            id.short(12)
        );
    }
}

/// An operation as `lifeos.oplog.v1` lists it, with its `events`.
fn op_json(id: &Id, o: &lifeos_vcs::Operation, events: &[Event]) -> Value {
    json!({
        "id": id.to_hex(),
        "parents": o.parents.iter().map(|p| p.to_hex()).collect::<Vec<_>>(),
        "view": o.view.to_hex(),
        "start_ms": o.start_ms, "end_ms": o.end_ms, "tz_offset_min": o.tz_offset_min,
        "user": o.user, "host": o.host, "description": o.description,
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
    })
}

fn event_json(e: &Event) -> Value {
    let mut v = match e {
        Event::RepoInitialized | Event::OperationsMerged => json!({}),
        Event::CommitCreated { commit } | Event::CheckedOut { commit } => {
            json!({"commit": commit.to_hex()})
        }
        Event::BranchMoved { name, from, to } | Event::TagMoved { name, from, to } => {
            json!({"name": name, "from": from.map(|i| i.to_hex()), "to": to.map(|i| i.to_hex())})
        }
        Event::PathRestored { path, commit } => {
            json!({"path": display(path), "commit": commit.to_hex()})
        }
        Event::Undo { op } | Event::Redo { op } | Event::OpRestored { op } => {
            json!({"operation": op.to_hex()})
        }
        Event::CommitRewritten { from, to } => json!({"from": from.to_hex(), "to": to.to_hex()}),
        Event::ContentExtracted { results } => {
            json!({"results": results.iter().map(|r| r.to_hex()).collect::<Vec<_>>()})
        }
        Event::GitImported { source, commits } => {
            json!({"source": display(source), "commits": commits})
        }
        Event::FilesStored { files } => {
            json!({"files": files.iter().map(|r| r.to_hex()).collect::<Vec<_>>()})
        }
        Event::EntityCreated { id, entity } | Event::EntityRemoved { id, entity } => {
            json!({"entity": id, "object": entity.to_hex()})
        }
        Event::ActionRecorded { action, record } => {
            json!({"action": action, "record": record.to_hex()})
        }
        Event::EntityChanged {
            id,
            paths,
            from,
            to,
        } => {
            json!({"entity": id, "paths": paths, "from": from.to_hex(), "to": to.to_hex()})
        }
        Event::EntityLinked {
            id,
            rel,
            target,
            entity,
            ..
        } => json!({"entity": id, "rel": rel, "target": target, "object": entity.to_hex()}),
    };
    v["type"] = e.type_name().into();
    v
}

fn event_text(e: &Event) -> String {
    let s = |i: &Id| i.short(12);
    let o = |i: &Option<Id>| i.as_ref().map_or("(none)".into(), |i| i.short(12));
    match e {
        Event::RepoInitialized => "repository initialized".into(),
        Event::OperationsMerged => "concurrent operations merged".into(),
        Event::CommitCreated { commit } => format!("commit {} created", s(commit)),
        Event::CheckedOut { commit } => format!("folder switched to {}", s(commit)),
        Event::BranchMoved { name, from, to } => format!("branch {name}: {} -> {}", o(from), o(to)),
        Event::TagMoved { name, from, to } => format!("tag {name}: {} -> {}", o(from), o(to)),
        Event::PathRestored { path, commit } => {
            format!("{} restored from {}", display(path), s(commit))
        }
        Event::Undo { op } => format!("operation {} undone", s(op)),
        Event::Redo { op } => format!("undo {} reverted", s(op)),
        Event::OpRestored { op } => format!("view of operation {} restored", s(op)),
        Event::CommitRewritten { from, to } => format!("commit {} rewritten as {}", s(from), s(to)),
        Event::ContentExtracted { results } => {
            format!("content extracted from {} files", results.len())
        }
        Event::GitImported { source, commits } => {
            format!("{commits} commits imported from git {}", display(source))
        }
        Event::FilesStored { files } => match files.len() {
            1 => "1 file stored".into(),
            n => format!("{n} files stored"),
        },
        Event::EntityCreated { id, .. } => format!("entity {id} created"),
        Event::EntityChanged { id, paths, .. } => {
            format!("entity {id} changed: {}", paths.join(", "))
        }
        Event::EntityLinked {
            id,
            rel,
            target,
            linked,
            ..
        } => format!(
            "entity {id} {} {rel} {target}",
            if *linked { "linked" } else { "unlinked" }
        ),
        Event::EntityRemoved { id, .. } => format!("entity {id} removed"),
        Event::ActionRecorded { action, record } => {
            format!("action {action} record {}", record.short(12))
        }
    }
}

/// `lifeos op ...`.
pub fn op(repo: &Repo, cmd: OpCmd, style: Style) -> CliResult<u8> {
    match cmd {
        OpCmd::Log { limit, json } => {
            let head = repo.head()?;
            // Newest first by end time, walking every parent.
            let mut seen = std::collections::HashSet::new();
            let mut heap = std::collections::BinaryHeap::new();
            heap.push((head.op.end_ms, head.id));
            let mut rows = Vec::new();
            while let Some((_, id)) = heap.pop() {
                if limit.is_some_and(|n| rows.len() >= n) {
                    break;
                }
                if !seen.insert(id) {
                    continue;
                }
                let op = repo.operation(&id)?;
                for p in &op.parents {
                    let po = repo.operation(p)?;
                    heap.push((po.end_ms, *p));
                }
                rows.push((id, op));
            }
            if json {
                let mut listed = Vec::with_capacity(rows.len());
                for (id, o) in &rows {
                    listed.push(op_json(id, o, &repo.events(o)?));
                }
                print_json("lifeos.oplog.v1", json!({ "operations": listed }));
                return Ok(0);
            }
            let mut out = std::io::stdout().lock();
            for (id, o) in &rows {
                let mark = if *id == head.id { "@" } else { " " };
                let events = repo.first_events(o, OP_LOG_EVENTS)?;
                print_op(&mut out, mark, (id, o), &events, style);
            }
        }
        OpCmd::Show { op, json } => {
            let id = match op {
                Some(op) => repo.resolve_op(&op)?,
                None => repo.head()?.id,
            };
            let o = repo.operation(&id)?;
            let view = repo.view(&o.view)?;
            // What it changed: from its first parent's view (nothing before the first).
            let before = match o.parents.first() {
                Some(p) => repo.view(&repo.operation(p)?.view)?,
                None => lifeos_vcs::View::default(),
            };
            let entities = repo.diff_entities(&before, &view)?;
            let events = repo.events(&o)?;
            if json {
                let mut v = op_json(&id, &o, &events);
                v["entities"] = entities
                    .iter()
                    .map(crate::entity::entity_diff_json)
                    .collect::<Vec<_>>()
                    .into();
                print_json("lifeos.op.v1", v);
                return Ok(0);
            }
            let mut out = std::io::stdout().lock();
            print_op(&mut out, "operation", (&id, &o), &events, style);
            crate::entity::print_entity_diffs(&mut out, &entities, style);
        }
        OpCmd::Restore { op, force } => {
            let target = repo.resolve_op(&op)?;
            let wc = lock_folder(repo, style)?;
            let id = repo
                .op_restore(&wc, &target, force)
                .map_err(uncommitted_hint)?;
            println!(
                "Restored the view of operation {} (as operation {})",
                style.id(&target.short(12)),
                style.id(&id.short(12))
            );
        }
    }
    Ok(0)
}

/// `lifeos undo` and, with `redo`, `lifeos redo`.
pub fn undo(repo: &Repo, force: bool, redo: bool, style: Style) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let (reverted, op) = if redo {
        repo.redo(&wc, force)
    } else {
        repo.undo(&wc, force)
    }
    .map_err(uncommitted_hint)?;
    let desc = repo.operation(&reverted)?.description;
    println!(
        "{} operation {} ({desc}) as operation {}",
        if redo { "Reverted" } else { "Undid" },
        style.id(&reverted.short(12)),
        style.id(&op.short(12))
    );
    Ok(0)
}

/// `lifeos reindex`.
pub fn reindex(repo: &Repo) -> CliResult<u8> {
    let t = std::time::Instant::now();
    let lifeos_git::Reindexed {
        catalog: cat,
        git_rows,
    } = lifeos_git::reindex(repo)?;
    let (done, failed) = cat.extract_counts()?;
    println!(
        "Rebuilt the catalog from the objects: {} operations, {done} extracted files, {failed} failures, {git_rows} git map entries ({:.2} s)",
        cat.op_count()?,
        t.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// `lifeos restore PATH [-r REV | --at WHEN]`.
pub fn restore_path(
    repo: &Repo,
    path: &[u8],
    rev: &str,
    at: &AtArg,
    force: bool,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let wc = lock_folder(repo, style)?;
    let view = view_at(repo, at)?;
    let (source, _) = resolve_in(repo, &view, rev)?;
    let (commit, op, saved) = repo
        .restore_path(&wc, path, &source, force)
        .map_err(uncommitted_hint)?;
    let path = display(path);
    if json {
        print_json(
            "lifeos.restore.v1",
            json!({"path": path, "source": source.to_hex(), "commit": commit.to_hex(), "operation": op.to_hex(), "saved": saved.map(|s| s.to_hex())}),
        );
        return Ok(0);
    }
    if let Some(s) = saved {
        println!("Saved uncommitted changes as {}", style.id(&s.short(12)));
    }
    println!(
        "Restored {path} from {} as commit {}",
        style.id(&source.short(12)),
        style.id(&commit.short(12))
    );
    Ok(0)
}
