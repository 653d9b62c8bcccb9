//! `lifeos entity`: add, set, show, list, link and follow the history of entities.

use clap::Subcommand;
use lifeos_catalog::CatalogExt;
use lifeos_entities::EntitiesExt;
use lifeos_entities::{Entity, EntityChange, Value as AttrValue};
use lifeos_store::Id;
use lifeos_vcs::Repo;
use serde_json::{json, Value};

use crate::context::{view_at, Context};
use crate::entity_util::entity_json;
use crate::error::{CliError, CliResult};
use crate::output::{local_time, print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// `lifeos entity ...`
#[derive(Debug, Subcommand)]
pub enum EntityCmd {
    /// Record a new entity: `lifeos entity add task title="Pay rent" due=2026-12-10`.
    Add {
        /// Its type: bookmark, contact, event, note, person, place, project, task, or one
        /// declared in lifeos.schema.toml.
        #[arg(value_name = "TYPE")]
        kind: String,
        /// Attributes as NAME=VALUE (true/false, numbers, dates and RFC 3339 times are
        /// typed; anything else is text).
        #[arg(value_name = "NAME=VALUE")]
        attrs: Vec<String>,
        /// Its id (`TYPE:NAME`, e.g. person:ann) instead of a generated one.
        #[arg(long)]
        id: Option<String>,
        /// Print JSON (schema lifeos.entity.v1).
        #[arg(long)]
        json: bool,
    },
    /// Set attributes of an entity.
    Set {
        /// The entity's id.
        id: String,
        /// Attributes as NAME=VALUE.
        #[arg(value_name = "NAME=VALUE", required = true)]
        attrs: Vec<String>,
    },
    /// Remove attributes of an entity.
    Unset {
        /// The entity's id.
        id: String,
        /// Attribute names.
        #[arg(value_name = "NAME", required = true)]
        names: Vec<String>,
    },
    /// Remove an entity (its history stays; `undo` brings it back).
    Rm {
        /// The entity's id.
        id: String,
    },
    /// Link an entity to another: `lifeos entity link task:1 project project:move`.
    Link {
        /// The entity the link is from.
        id: String,
        /// The relation (`project`, `assignee`, ...).
        rel: String,
        /// The entity the link is to.
        target: String,
    },
    /// Remove a link.
    Unlink {
        /// The entity the link is from.
        id: String,
        /// The relation.
        rel: String,
        /// The entity the link is to.
        target: String,
    },
    /// Show an entity, now or as it was at a moment.
    Show {
        /// The entity's id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AsOfArg,
        /// Also list every passage of the files (as of then) that mentions it: path,
        /// commit, where in the file (a page, lines, a time range), and the text.
        #[arg(long)]
        mentions: bool,
        /// Print JSON (schema lifeos.entity.v1).
        #[arg(long)]
        json: bool,
    },
    /// Make an entity what it was at a moment (a new operation; `undo` reverts it).
    Restore {
        /// The entity's id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AsOfArg,
    },
    /// Every version of an entity, newest first, with the operation that made it.
    History {
        /// The entity's id.
        id: String,
        /// Print JSON (schema lifeos.entity_history.v1).
        #[arg(long)]
        json: bool,
    },
}

impl Verb for EntityCmd {
    fn policy(&self) -> Policy {
        Policy {
            answers: matches!(self, EntityCmd::Show { .. } | EntityCmd::History { .. }),
            ..Policy::FIRES
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        run(ctx.repo()?, self, ctx.style())
    }
}

/// Splits `NAME=VALUE` arguments and reads each value as the schema in force declares
/// the field of `kind` (entity `id`; a new one's is not known yet).
fn parse_attrs(
    repo: &Repo,
    id: &str,
    kind: &str,
    args: &[String],
) -> CliResult<Vec<(String, AttrValue)>> {
    let schema = repo.entity_schema(&repo.head()?.view)?;
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((n, v)) => Ok((n.to_string(), schema.parse_value(id, kind, n, v)?)),
            None => Err(CliError::new(format!(
                "{a:?} is not NAME=VALUE (for example title=\"Pay rent\")"
            ))),
        })
        .collect()
}

fn print_entity(obj: &Id, e: &Entity, style: Style) {
    println!(
        "{} {}",
        style.name(&e.id),
        style.dim(&format!("({}, {})", e.kind, obj.short(12)))
    );
    for (n, v) in &e.attrs {
        println!("  {n} = {}", v.render());
    }
    for (rel, target) in &e.links {
        println!("  {rel} -> {target}");
    }
    let shown = |v: &Option<AttrValue>| v.as_ref().map_or("(unset)".to_string(), AttrValue::render);
    for c in &e.conflicts {
        if c.attr.is_empty() {
            println!("  conflict: removed on one side and changed on the other; kept");
        } else {
            println!(
                "  conflict on {}: {} and {} (was {}); kept {}",
                c.attr,
                shown(&c.ours),
                shown(&c.theirs),
                shown(&c.base),
                shown(&c.theirs)
            );
        }
    }
}

/// Runs `lifeos entity ...`.
fn run(repo: &Repo, cmd: EntityCmd, style: Style) -> CliResult<u8> {
    let (id, change) = match cmd {
        EntityCmd::Show {
            id,
            at,
            mentions,
            json,
        } => {
            let view = view_at(repo, &at)?;
            let Some((obj, e)) = repo.entity_in(&view, &id)? else {
                return Err(CliError::new(match &at.at {
                    Some(when) => format!("entity {id} did not exist at {when}"),
                    None => format!("no entity {id}"),
                }));
            };
            let hits = if mentions {
                lifeos_ingest::search::search(
                    repo,
                    "",
                    lifeos_ingest::search::Versions::View(&view),
                    &lifeos_ingest::search::Filters {
                        mentions: Some(&id),
                        ..Default::default()
                    },
                    usize::MAX / 4,
                )?
            } else {
                Vec::new()
            };
            if json {
                let mut v = entity_json(&obj, &e);
                if mentions {
                    v["mentions"] = hits
                        .iter()
                        .map(crate::search_util::hit_json)
                        .collect::<Vec<_>>()
                        .into();
                }
                print_json("lifeos.entity.v1", v);
            } else {
                print_entity(&obj, &e, style);
                if mentions {
                    println!("  mentioned in {} passages:", hits.len());
                    let mut out = std::io::stdout().lock();
                    crate::search_util::print_hits(&mut out, &hits, style);
                }
            }
            return Ok(0);
        }
        EntityCmd::History { id, json } => {
            let versions = repo.entity_history(&id)?;
            if versions.is_empty() {
                return Err(CliError::new(format!("no entity {id} in the history")));
            }
            if json {
                let list: Vec<Value> = versions
                    .iter()
                    .map(|v| {
                        let entity = match v.object {
                            Some(o) => entity_json(&o, &repo.entity_object(&o)?),
                            None => Value::Null,
                        };
                        Ok(json!({
                            "operation": v.op.to_hex(),
                            "time_ms": v.end_ms,
                            "description": v.description,
                            "changed": v.changed,
                            "entity": entity,
                        }))
                    })
                    .collect::<CliResult<_>>()?;
                print_json(
                    "lifeos.entity_history.v1",
                    json!({"id": id, "versions": list}),
                );
            } else {
                for v in &versions {
                    let what = match &v.object {
                        None => "removed".to_string(),
                        Some(_) => v.changed.join(", "),
                    };
                    println!(
                        "{} {} {}  {}",
                        style.id(&v.op.short(12)),
                        local_time(v.end_ms),
                        v.description,
                        style.dim(&what)
                    );
                }
            }
            return Ok(0);
        }
        EntityCmd::Add {
            kind,
            attrs,
            id,
            json,
        } => {
            let named = id.clone().unwrap_or_else(|| format!("(new {kind})"));
            let attrs = parse_attrs(repo, &named, &kind, &attrs)?;
            let (op, id, obj) =
                repo.change_entity(id.as_deref(), EntityChange::Add { kind, attrs })?;
            let obj = obj.expect("an added entity has an object");
            if json {
                let (_, e) = repo
                    .entity_in(&repo.head()?.view, &id)?
                    .ok_or_else(|| CliError::new(format!("entity {id} vanished")))?;
                let mut v = entity_json(&obj, &e);
                v["operation"] = op.to_hex().into();
                print_json("lifeos.entity.v1", v);
            } else {
                println!("Added {}", style.name(&id));
            }
            return Ok(0);
        }
        EntityCmd::Set { id, attrs } => {
            // An id is TYPE:NAME.
            let kind = id.split(':').next().unwrap_or_default().to_string();
            let attrs = parse_attrs(repo, &id, &kind, &attrs)?;
            (id, EntityChange::Set(attrs))
        }
        EntityCmd::Unset { id, names } => (id, EntityChange::Unset(names)),
        EntityCmd::Rm { id } => (id, EntityChange::Remove),
        EntityCmd::Restore { id, at } => {
            if at.at.is_none() {
                return Err(CliError::new(
                    "restore needs --at WHEN: the moment to go back to",
                ));
            }
            let view = view_at(repo, &at)?;
            let (_, old) = repo.entity_in(&view, &id)?.ok_or_else(|| {
                CliError::new(format!(
                    "entity {id} did not exist at {}",
                    at.at.as_deref().unwrap_or_default()
                ))
            })?;
            (id, EntityChange::Restore(old))
        }
        EntityCmd::Link { id, rel, target } => (id, EntityChange::Link { rel, target }),
        EntityCmd::Unlink { id, rel, target } => (id, EntityChange::Unlink { rel, target }),
    };
    let verb = match &change {
        EntityChange::Remove => "Removed",
        EntityChange::Link { .. } => "Linked",
        EntityChange::Unlink { .. } => "Unlinked",
        EntityChange::Restore(_) => "Restored",
        _ => "Changed",
    };
    let before = repo.head()?.id;
    let (op, id, _) = repo.change_entity(Some(&id), change)?;
    if op == before {
        println!("Nothing changed: {} already is so", style.name(&id));
    } else {
        println!("{verb} {}", style.name(&id));
    }
    Ok(0)
}
