//! `lifeos op`: the operation log, one operation, and restoring the view of one.

use std::io::Write;

use clap::Subcommand;
use lifeos_entities::EntitiesExt;
use lifeos_store::Id;
use lifeos_vcs::object::Event;
use lifeos_vcs::path::display;
use lifeos_vcs::Repo;
use serde_json::{json, Value};

use crate::context::{lock_folder, Context};
use crate::error::CliResult;
use crate::history_util::uncommitted_hint;
use crate::output::{local_time, print_json, relative_time, Style};
use crate::verb::{Policy, Verb};

/// `lifeos op ...`
#[derive(Debug, Subcommand)]
pub enum OpCmd {
    /// Every operation, newest first: what, when, who, and its events.
    Log {
        /// Show at most this many operations.
        #[arg(short = 'n', long)]
        limit: Option<usize>,
        /// Print JSON (schema lifeos.oplog.v1).
        #[arg(long)]
        json: bool,
    },
    /// One operation: when, who, its events, and the entities it changed by attribute.
    Show {
        /// The operation id (a unique prefix; default the current operation).
        op: Option<String>,
        /// Print JSON (schema lifeos.op.v1).
        #[arg(long)]
        json: bool,
    },
    /// Restore the whole repository view as it was after an operation.
    Restore {
        /// The operation id (a unique prefix).
        op: String,
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
    },
}

impl Verb for OpCmd {
    fn policy(&self) -> Policy {
        Policy {
            pages: matches!(self, OpCmd::Log { .. } | OpCmd::Show { .. }),
            answers: !matches!(self, OpCmd::Restore { .. }),
            ..Policy::FIRES
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        op(ctx.repo()?, self, ctx.style())
    }
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
fn op(repo: &Repo, cmd: OpCmd, style: Style) -> CliResult<u8> {
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
                    .map(crate::entity_util::entity_diff_json)
                    .collect::<Vec<_>>()
                    .into();
                print_json("lifeos.op.v1", v);
                return Ok(0);
            }
            let mut out = std::io::stdout().lock();
            print_op(&mut out, "operation", (&id, &o), &events, style);
            crate::entity_util::print_entity_diffs(&mut out, &entities, style);
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
