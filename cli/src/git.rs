//! `lifeos git ...`: import a git repository's history, export it back.

use std::path::PathBuf;

use clap::Subcommand;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::error::CliResult;
use crate::output::print_json;

/// `lifeos git ...`
#[derive(Debug, Subcommand)]
pub enum GitCmd {
    /// Bring every ref of a git repository (its commits, trees, blobs, branches, tags,
    /// annotated tag objects) into lifeos history, as one operation; run again to bring
    /// in only what is new.
    Import {
        /// The git repository (a work tree, its .git folder, or a bare repository);
        /// defaults to the .git folder beside .lifeos.
        path: Option<PathBuf>,
        /// Print JSON (schema lifeos.git_import.v1).
        #[arg(long)]
        json: bool,
    },
    /// Write lifeos history to a git repository (a bare one is created when PATH does not
    /// exist): commits, trees and tags that came from git get their SHA-1s back.
    Export {
        /// The git repository to write to.
        path: PathBuf,
        /// Print JSON (schema lifeos.git_export.v1).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `lifeos git` command.
pub fn run(repo: &Repo, cmd: GitCmd) -> CliResult<u8> {
    match cmd {
        GitCmd::Import { path, json } => {
            let path = path.unwrap_or_else(|| repo.workdir().join(".git"));
            let r = lifeos_git::import(repo, &path)?;
            if json {
                print_json(
                    "lifeos.git_import.v1",
                    json!({
                        "source": path.display().to_string(),
                        "published": r.published, "folder_detached": r.folder_detached,
                        "refs": r.refs, "commits": r.commits, "new_commits": r.new_commits,
                        "trees": r.trees, "blobs": r.blobs, "tags": r.tags,
                        "raw_trees": r.raw_trees, "mismatches": r.mismatches,
                        "skipped": r.skipped.iter().map(|(n, why)| json!({"ref": n, "reason": why})).collect::<Vec<_>>(),
                    }),
                );
            } else if r.published {
                println!(
                    "imported {} refs from {}: {} commits ({} new), {} trees, {} blobs, {} annotated tags",
                    r.refs,
                    path.display(),
                    r.commits,
                    r.new_commits,
                    r.trees,
                    r.blobs,
                    r.tags
                );
                if r.raw_trees > 0 {
                    println!(
                        "{} trees are not in git's canonical form; they are kept byte for byte",
                        r.raw_trees
                    );
                }
            } else {
                println!("nothing new in {}", path.display());
            }
            if r.folder_detached && !json {
                println!("the branch the folder was on moved; the folder stays where it was, off the branch (`lifeos checkout BRANCH` moves it)");
            }
            for (name, why) in &r.skipped {
                eprintln!("warning: ref {name} was not imported: {why}");
            }
            if r.mismatches > 0 {
                eprintln!(
                    "warning: {} commits would not get their SHA-1 back on export",
                    r.mismatches
                );
                return Ok(1);
            }
            Ok(0)
        }
        GitCmd::Export { path, json } => {
            let r = lifeos_git::export(repo, &path)?;
            if json {
                print_json(
                    "lifeos.git_export.v1",
                    json!({
                        "target": path.display().to_string(),
                        "refs": r.refs, "commits": r.commits, "trees": r.trees,
                        "blobs": r.blobs, "tags": r.tags,
                    }),
                );
            } else {
                println!(
                    "exported {} refs to {}: {} commits, {} trees, {} blobs, {} annotated tags",
                    r.refs,
                    path.display(),
                    r.commits,
                    r.trees,
                    r.blobs,
                    r.tags
                );
            }
            Ok(0)
        }
    }
}
