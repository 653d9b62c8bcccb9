//! `lifeos gc`: remove data nothing in the operation log refers to, here or on a remote.

use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{bar, human_bytes, print_json};
use crate::remote_util::{open_remote, PassArgs, Scratch};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Collect this remote instead: remove its packs that nothing its operations
    /// reach is in (refused while a push to it runs).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub pass: PassArgs,
    /// Say what would be removed and how much space it frees; remove nothing.
    #[arg(long, conflicts_with = "remote")]
    pub dry_run: bool,
    /// Print JSON (schema lifeos.gc.v1, or lifeos.gc_remote.v1 with --remote).
    #[arg(long)]
    pub json: bool,
}

impl Verb for GcArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let repo = ctx.repo()?;
        match &self.remote {
            Some(name) => gc_remote(repo, name, self.pass, self.json),
            None => gc(repo, self.dry_run, self.json),
        }
    }
}

fn gc(repo: &Repo, dry_run: bool, json: bool) -> CliResult<u8> {
    let pb = bar(0, if dry_run { "planning" } else { "collecting" });
    let r = repo.gc(dry_run, &|n| pb.inc(n))?;
    pb.finish_and_clear();
    let r = match r {
        Ok(r) => r,
        Err(problems) => {
            for p in &problems {
                eprintln!("{}: {}", p.code, p.detail);
            }
            return Err(CliError::new(format!("gc refused: the history walk found {} problems", problems.len()))
                .hint("run `lifeos fsck` and repair the repository first; gc removes nothing from a damaged repository"));
        }
    };
    if json {
        print_json(
            "lifeos.gc.v1",
            json!({
                "packs_before": r.packs_before, "packs_after": r.packs_after,
                "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
                "objects_removed": r.objects_removed, "objects_kept_unreachable": r.objects_kept_unreachable,
                "packs_rewritten": r.packs_rewritten, "packs_deleted": r.packs_deleted,
                "packs_damaged": r.packs_damaged, "tmp_removed": r.tmp_removed,
                "dry_run": dry_run,
            }),
        );
    } else if dry_run {
        println!(
            "would remove {} unreachable entries and free {} ({} -> {}): {} packs deleted, {} rewritten; nothing was changed",
            r.objects_removed,
            human_bytes(r.bytes_before - r.bytes_after),
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after),
            r.packs_deleted,
            r.packs_rewritten,
        );
        if r.objects_kept_unreachable > 0 {
            println!(
                "{} unreachable entries would stay in packs below the rewrite threshold",
                r.objects_kept_unreachable
            );
        }
    } else {
        println!(
            "removed {} unreachable entries; packs {} -> {}, {} -> {} ({} rewritten, {} deleted, {} temporary files removed)",
            r.objects_removed,
            r.packs_before,
            r.packs_after,
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after),
            r.packs_rewritten,
            r.packs_deleted,
            r.tmp_removed
        );
        if r.objects_kept_unreachable > 0 {
            println!(
                "{} unreachable entries kept in packs below the rewrite threshold",
                r.objects_kept_unreachable
            );
        }
    }
    Ok(0)
}

/// `lifeos gc --remote NAME`.
fn gc_remote(repo: &Repo, name: &str, pass: PassArgs, json: bool) -> CliResult<u8> {
    let (name, remote, _) = open_remote(repo, Some(name), false, &pass)?;
    let scratch = Scratch::new();
    let r = remote.gc(&scratch.0)?;
    if json {
        print_json(
            "lifeos.gc_remote.v1",
            json!({"remote": name, "packs_removed": r.packs_removed, "bytes_removed": r.bytes_removed,
                   "packs_kept": r.packs_kept, "unreachable_kept": r.unreachable_kept}),
        );
    } else {
        println!(
            "removed {} packs ({}) from {name}; kept {} ({} unreachable objects in them)",
            r.packs_removed,
            human_bytes(r.bytes_removed),
            r.packs_kept,
            r.unreachable_kept
        );
    }
    Ok(0)
}
