//! `lifeos fetch`: download what a remote has and merge its operations.

use lifeos_remote::places::Remotes;
use lifeos_remote::pull;
use lifeos_vcs::Repo;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::{print_json, Style};
use crate::remote_util::{fetch_json, open_remote, say_fetched, warn_heads, Bar, PassArgs};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {
    /// The remote (default: the only one; with several, name one).
    pub name: Option<String>,
    /// Also download every file's contents (completes a lazy clone).
    #[arg(long)]
    pub all_data: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub pass: PassArgs,
    /// Print JSON (schema lifeos.fetch.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for FetchArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        fetch(
            ctx.repo()?,
            self.name,
            self.all_data,
            self.pass,
            self.json,
            ctx.style(),
        )
    }
}

/// `lifeos fetch [NAME] [--all-data]`.
fn fetch(
    repo: &Repo,
    name: Option<String>,
    all_data: bool,
    pass: PassArgs,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let (name, remote, lazy) = open_remote(repo, name.as_deref(), false, &pass)?;
    let all_data = all_data || !lazy;
    let bar = Bar::new("fetch", json);
    let r = remote.fetch(repo, &name, all_data, pull::last_pushed(repo, &name), &bar)?;
    drop(bar);
    warn_heads(&name, &r);
    if all_data {
        let mut remotes = Remotes::load(repo.dot_dir())?;
        if let Some(s) = remotes.remote.get_mut(&name).filter(|s| s.lazy) {
            s.lazy = false;
            remotes.save(repo.dot_dir())?;
        }
    }
    if json {
        print_json("lifeos.fetch.v1", fetch_json(&name, &r));
    } else {
        say_fetched(&name, &r, style);
    }
    Ok(0)
}
