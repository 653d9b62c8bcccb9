//! Keeping a folder shared with git in step: what git changed comes in before a command,
//! what the command changed goes out after, and how an import reads.

use std::path::Path;

use lifeos_vcs::Repo;
use serde_json::json;

use crate::error::CliResult;
use crate::output::print_json;

/// Before a command: a store an earlier lifeos kept at `.lifeos` beside `.git` moves into
/// `.git/lifeos` (saying so), and a `.lifeos` that git tracks is refused.
pub(crate) fn settle_store(here: &Path) -> CliResult<()> {
    if let Some(m) = lifeos_git::store_home::settle(here)? {
        eprintln!(
            "note: moved lifeos's store from {} to {}, where git's commands never write or delete (docs/SECURITY.md)",
            m.from.display(),
            m.to.display()
        );
    }
    Ok(())
}

/// Colocates `repo`'s folder with git, saying what happened.
pub(crate) fn colocate(repo: Repo) -> CliResult<()> {
    let (_, r) = lifeos_git::colocate::colocate(repo)?;
    println!(
        "{} the git repository {}; lifeos and git now share this folder",
        if r.created { "Created" } else { "Adopted" },
        r.git_dir.display()
    );
    if let Some(i) = &r.imported {
        print_import(i, &r.git_dir, false);
    }
    if r.exported_refs > 0 {
        println!("wrote {} refs to git", r.exported_refs);
    }
    Ok(())
}

/// `repo` opened again, for a change of where its store is (which takes the repository
/// by value: the handle given up points at the old place, and is not used after).
pub(crate) fn reopened(repo: &Repo) -> CliResult<Repo> {
    let mut again = lifeos_app::open(repo.workdir())?;
    again.interrupt = repo.interrupt.clone();
    Ok(again)
}

/// Before a command in a colocated folder: imports what git changed.
pub(crate) fn sync_in(repo: &Repo) -> CliResult<()> {
    if let Some(r) = lifeos_git::colocate::sync_in(repo)? {
        if r.new_commits > 0 {
            eprintln!(
                "note: imported {} from git",
                lifeos_diff::counted(r.new_commits as usize, "new commit", "new commits")
            );
        }
        for (name, why) in &r.skipped {
            eprintln!("warning: git ref {name} was not imported: {why}");
        }
        warn_refused(&r, "");
    }
    Ok(())
}

/// Says which of git's refs lifeos refused (their history holds a tree it never writes),
/// each line starting with `prefix`.
pub(crate) fn warn_refused(r: &lifeos_git::ImportReport, prefix: &str) {
    for (name, why) in &r.refused {
        eprintln!("{prefix}warning: git ref {name} was not imported: {why}");
    }
}

/// After a command in a colocated folder: exports what lifeos changed.
pub(crate) fn sync_out(repo: &Repo) -> CliResult<()> {
    report_sync_out(&lifeos_git::colocate::sync_out(repo)?);
    Ok(())
}

/// Says which refs an export to git left as git has them.
pub(crate) fn report_sync_out(r: &lifeos_git::colocate::SyncOut) {
    for (name, why) in &r.conflicts {
        eprintln!(
            "warning: git moved {name} while lifeos ran, so lifeos left it as git has it ({why}); the next lifeos command imports git's commit, and lifeos's stays in `lifeos op log`"
        );
    }
}

/// Prints what an import did (as lifeos.git_import.v1 with `json`), and its warnings.
pub(crate) fn print_import(r: &lifeos_git::ImportReport, path: &Path, json: bool) {
    if json {
        print_json(
            "lifeos.git_import.v1",
            json!({
                "source": path.display().to_string(),
                "published": r.published, "folder_detached": r.folder_detached,
                "refs": r.refs, "commits": r.commits, "new_commits": r.new_commits,
                "trees": r.trees, "blobs": r.blobs, "tags": r.tags,
                "raw_trees": r.raw_trees, "mismatches": r.mismatches, "pointers": r.pointers,
                "shallow_boundary": r.shallow_boundary,
                "skipped": r.skipped.iter().map(|(n, why)| json!({"ref": n, "reason": why})).collect::<Vec<_>>(),
                "refused": r.refused.iter().map(|(n, why)| json!({"ref": n, "reason": why})).collect::<Vec<_>>(),
            }),
        );
    } else {
        if r.published {
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
            if r.pointers > 0 {
                println!(
                    "{} blobs are `lifeos` filter pointers to content lifeos keeps; they are that content in lifeos, and pointers again in git",
                    r.pointers
                );
            }
        } else {
            println!("nothing new in {}", path.display());
        }
        if r.shallow_boundary > 0 {
            println!(
                "{} is a shallow clone: the import stopped at its boundary, where {} commits keep their parents' ids but not their history (run `git fetch --unshallow` there, then import again, to bring in the rest)",
                path.display(),
                r.shallow_boundary
            );
        }
        if r.folder_detached {
            println!("the branch the folder was on moved; the folder stays where it was, off the branch (`lifeos checkout BRANCH` moves it)");
        }
    }
    for (name, why) in &r.skipped {
        eprintln!("warning: ref {name} was not imported: {why}");
    }
    for (name, why) in &r.refused {
        eprintln!("error: ref {name} was not imported: {why}");
    }
    if r.mismatches > 0 {
        eprintln!(
            "warning: {} commits would not get their SHA-1 back on export",
            r.mismatches
        );
    }
}
