//! `lifeos status`: what changed in the folder since the last commit.

use lifeos_vcs::path::display;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{lock_folder, Context};
use crate::error::CliResult;
use crate::history_util::change_json;
use crate::output::{print_json, skipped_json, Style};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON (schema lifeos.status.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for StatusArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        status(ctx.repo()?, self.json, ctx.style())
    }
}

/// `lifeos status`.
fn status(repo: &Repo, json: bool, style: Style) -> CliResult<u8> {
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
