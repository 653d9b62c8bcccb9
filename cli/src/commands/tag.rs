//! `lifeos tag`: create, list or delete tags.

use clap::Subcommand;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{resolve_in, view_at, Context};
use crate::error::CliResult;
use crate::output::{print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// `lifeos tag ...`
#[derive(Debug, Subcommand)]
pub enum TagCmd {
    /// Create a tag at a revision (default `@`).
    Create {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// Move the tag if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Delete a tag.
    Delete {
        /// Name.
        name: String,
    },
    /// List tags.
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AsOfArg,
        /// Print JSON (schema lifeos.tags.v1).
        #[arg(long)]
        json: bool,
    },
}

impl Verb for TagCmd {
    fn policy(&self) -> Policy {
        Policy {
            answers: matches!(self, TagCmd::List { .. }),
            ..Policy::FIRES
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        tag(ctx.repo()?, self, ctx.style())
    }
}

/// `lifeos tag ...`.
fn tag(repo: &Repo, cmd: TagCmd, style: Style) -> CliResult<u8> {
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
