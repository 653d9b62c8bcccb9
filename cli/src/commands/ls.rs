//! `lifeos ls`: the files of a commit, with sizes.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use lifeos_vcs::path::display;
use lifeos_vcs::{EntryKind, Repo};
use serde_json::json;

use crate::context::{resolve, Context};
use crate::error::CliResult;
use crate::output::{human_bytes, print_json};
use crate::verb::{Policy, Verb};
use crate::RevArgs;

/// Arguments of `lifeos ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Only paths under this one.
    pub path: Option<OsString>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub rev: RevArgs,
    /// Print JSON (schema lifeos.ls.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for LsArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let RevArgs { revision, at } = &self.rev;
        ls(
            ctx.repo()?,
            self.path.as_deref().map(OsStrExt::as_bytes),
            revision,
            at,
            self.json,
        )
    }
}

fn ls(
    repo: &Repo,
    path: Option<&[u8]>,
    rev: &str,
    at: &crate::AsOfArg,
    json: bool,
) -> CliResult<u8> {
    let (id, c) = resolve(repo, rev, at)?;
    let clean = lifeos_vcs::path::clean(path.unwrap_or_default())?;
    let rows = repo.entries_at(Some(&c.tree), &clean, rev)?;
    if json {
        print_json(
            "lifeos.ls.v1",
            json!({
                "commit": id.to_hex(),
                "entries": rows.iter().map(|(p, e)| json!({"path": display(p), "kind": e.kind.name(), "size": e.size, "id": e.id.to_hex()})).collect::<Vec<_>>(),
            }),
        );
    } else {
        let mut out = std::io::stdout().lock();
        for (p, e) in &rows {
            let mark = match e.kind {
                EntryKind::Executable => "*".to_string(),
                EntryKind::Symlink => "@".to_string(),
                EntryKind::Gitlink => format!(
                    "  (submodule at {})",
                    hex::encode(lifeos_vcs::object::gitlink_sha1(&e.id))
                ),
                _ => String::new(),
            };
            let _ = writeln!(out, "{:>12}  {}{mark}", human_bytes(e.size), display(p));
        }
    }
    Ok(0)
}
