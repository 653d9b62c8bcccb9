//! `lifeos pull`: fetch, then move the current branch and the folder to the remote's
//! commit.

use lifeos_remote::pull;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{say_finished_move, Context};
use crate::error::CliResult;
use crate::output::{print_json, Style};
use crate::remote_util::{fetch_json, open_remote, say_fetched, warn_heads, Bar, PassArgs};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos pull`.
#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// The remote (default: the only one; with several, name one).
    pub name: Option<String>,
    /// Replace uncommitted changes (they are saved as a commit first).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub pass: PassArgs,
    /// Print JSON (schema lifeos.pull.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for PullArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        pull(
            ctx.repo()?,
            self.name,
            self.force,
            self.pass,
            self.json,
            ctx.style(),
        )
    }
}

/// `lifeos pull [NAME]`: fetch, then move the current branch and the folder forward.
fn pull(
    repo: &Repo,
    name: Option<String>,
    force: bool,
    pass: PassArgs,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let (name, remote, lazy) = open_remote(repo, name.as_deref(), false, &pass)?;
    let bar = Bar::new("fetch", json);
    let lock = || {
        let wc = repo.lock_working_copy()?;
        say_finished_move(&wc, style);
        Ok(wc)
    };
    let pulled = pull::pull(repo, &name, &remote, lazy, force, &bar, &lock);
    drop(bar);
    let pull::Pulled {
        report: r,
        branch,
        moved,
    } = pulled?;
    warn_heads(&name, &r);
    if json {
        let mut v = fetch_json(&name, &r);
        v["branch"] = json!(branch);
        v["moved_to"] = json!(moved.map(|m| m.to_hex()));
        print_json("lifeos.pull.v1", v);
    } else {
        say_fetched(&name, &r, style);
        match moved {
            Some(c) => println!(
                "Moved {branch} and the folder to {}",
                style.id(&c.short(12))
            ),
            None => println!("The folder is up to date"),
        }
    }
    Ok(0)
}
