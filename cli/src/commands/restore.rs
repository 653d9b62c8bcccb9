//! `lifeos restore`: a whole revision into a new folder, or a path back into the working
//! folder as a new commit.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use lifeos_vcs::path::display;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{lock_folder, resolve, resolve_in, view_at, Context};
use crate::error::{CliError, CliResult};
use crate::history_util::uncommitted_hint;
use crate::output::{bar, human_bytes, print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// Arguments of `lifeos restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// A file or folder to bring back into the working folder (recorded as a new commit).
    pub path: Option<OsString>,
    /// Materialise the whole revision in this new or empty folder instead.
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// The revision to take it from (default `@`).
    #[arg(short, long, default_value = "@")]
    pub revision: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// Overwrite uncommitted changes to PATH (they are saved as a commit first).
    #[arg(long)]
    pub force: bool,
    /// Print JSON (schema lifeos.restore.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for RestoreArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let RestoreArgs {
            path,
            to,
            revision,
            at,
            force,
            json,
        } = self;
        let repo = ctx.repo()?;
        match (path, to) {
            (None, Some(to)) => restore_to(repo, &ctx.here().join(to), &revision, &at, json),
            (Some(p), None) => restore_path(repo, p.as_bytes(), &revision, &at, force, json, ctx.style()),
            (Some(_), Some(_)) => Err(CliError::new("give either PATH or --to DIR, not both")),
            (None, None) => Err(CliError::new("nothing to restore")
                .hint("name a PATH to bring back into the folder, or --to DIR to materialise a whole revision")),
        }
    }
}

fn restore_to(repo: &Repo, to: &Path, rev: &str, at: &crate::AsOfArg, json: bool) -> CliResult<u8> {
    let (id, c) = resolve(repo, rev, at)?;
    let total = repo.tree(&c.tree)?.total_size();
    let pb = bar(total, "restoring");
    let st = repo.restore_tree_to(&c.tree, to, &|n| pb.inc(n))?;
    pb.finish_and_clear();
    if json {
        print_json(
            "lifeos.restore.v1",
            json!({"commit": id.to_hex(), "target": to.display().to_string(), "files": st.files, "dirs": st.dirs, "bytes": st.bytes}),
        );
    } else {
        println!(
            "Restored {} ({} files, {}) into {}",
            id.short(12),
            st.files,
            human_bytes(st.bytes),
            to.display()
        );
    }
    Ok(0)
}

/// `lifeos restore PATH [-r REV | --at WHEN]`.
fn restore_path(
    repo: &Repo,
    path: &[u8],
    rev: &str,
    at: &AsOfArg,
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
