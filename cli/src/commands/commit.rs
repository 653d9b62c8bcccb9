//! `lifeos commit`: record the folder (or some paths) through the commit pipeline, and say
//! what was recorded.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::working_copy::SnapshotProgress;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::{record_folder, Context};
use crate::error::{CliError, CliResult};
use crate::output::{bar, human_bytes, print_json, skipped_json, Style};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos commit`.
#[derive(Debug, clap::Args)]
pub struct CommitArgs {
    /// Record only these files or folders; the rest stay uncommitted.
    pub paths: Vec<OsString>,
    /// The commit message (without it: $LIFEOS_EDITOR, $VISUAL or $EDITOR opens on a
    /// list of the changes; an empty message records nothing).
    #[arg(short, long)]
    pub message: Option<String>,
    /// Rewrite the commit at @ instead (same change id; its message unless -m or the
    /// editor gives one).
    #[arg(long)]
    pub amend: bool,
    /// Record a commit even if nothing changed.
    #[arg(long)]
    pub allow_empty: bool,
    /// Record the rest when some files cannot be read: those keep their last
    /// recorded version (new ones are left out). Without it the commit is refused.
    #[arg(long)]
    pub allow_unreadable: bool,
    /// Print the result as JSON (schema lifeos.commit.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for CommitArgs {
    fn policy(&self) -> Policy {
        Policy::FIRES
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let CommitArgs {
            paths,
            message,
            amend,
            allow_empty,
            allow_unreadable,
            json,
        } = self;
        let repo = ctx.repo()?;
        let paths = paths
            .iter()
            .map(|p| lifeos_vcs::path::clean(p.as_bytes()).map_err(CliError::from))
            .collect::<CliResult<Vec<_>>>()?;
        let message = match message {
            Some(m) => m,
            None if amend => String::new(),
            None => match crate::editor::commit_message(repo, &paths)? {
                Some(m) => m,
                None => {
                    eprintln!("Aborting: the message was empty; nothing was recorded");
                    return Ok(1);
                }
            },
        };
        let asked = CommitOptions {
            message: message.as_bytes(),
            allow_empty,
            allow_unreadable,
            paths: &paths,
            amend,
            hook: None,
        };
        commit(repo, asked, json, ctx.style())
    }
}

fn commit(repo: &Repo, asked: CommitOptions<'_>, json: bool, style: Style) -> CliResult<u8> {
    let amend = asked.amend;
    let pb = SnapshotBar(bar(0, "reading"));
    let out = record_folder(repo, asked, &pb, style);
    pb.0.finish_and_clear();
    let out = out?;
    let s = &out.snapshot;
    if json {
        print_json(
            "lifeos.commit.v1",
            json!({
                "commit": out.commit.map(|c| c.to_hex()),
                "operation": out.op.map(|o| o.to_hex()),
                "parent": out.parent.map(|p| p.to_hex()),
                "branch": out.branch,
                "tree": s.tree.to_hex(),
                "changed": out.commit.is_some(),
                "files": s.files,
                "bytes": s.bytes,
                "files_read": s.files_read,
                "bytes_read": s.bytes_read,
                "skipped": skipped_json(&s.skipped),
                "unreadable": skipped_json(&s.unreadable),
            }),
        );
        return Ok(0);
    }
    match out.commit {
        Some(c) => {
            let on = out
                .branch
                .map(|b| format!(" on {}", style.name(&b)))
                .unwrap_or_default();
            let message = repo.commit(&c)?.message;
            println!(
                "{} {}{on}: {}",
                if amend { "Amended, now" } else { "Committed" },
                style.id(&c.short(12)),
                String::from_utf8_lossy(&message)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
        None => println!(
            "Nothing changed since {}; no commit made",
            out.parent
                .map(|p| style.id(&p.short(12)))
                .unwrap_or_default()
        ),
    }
    println!(
        "  {}, {} ({} read, {})",
        lifeos_diff::counted(s.files as usize, "file", "files"),
        human_bytes(s.bytes),
        lifeos_diff::counted(s.files_read as usize, "file", "files"),
        human_bytes(s.bytes_read)
    );
    Ok(0)
}

/// The progress bar of a commit: bytes read of the bytes to read.
struct SnapshotBar(indicatif::ProgressBar);

impl SnapshotProgress for SnapshotBar {
    fn scanned(&self, _files: u64, _bytes: u64, _to_read: u64, bytes_to_read: u64) {
        self.0.set_length(bytes_to_read);
    }
    fn read(&self, n: u64) {
        self.0.inc(n);
    }
}
