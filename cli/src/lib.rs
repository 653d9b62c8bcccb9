//! lifeos-cli: the `lifeos` command. Parses arguments, runs library calls, and renders
//! their results for people (colour, progress) or programs (`--json`, named schemas).

#![warn(missing_docs)]

mod commands;
mod error;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub use error::{CliError, CliResult};

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
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub color: ColorChoice,
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
    },
    /// Record every file of the folder as a new commit on the current branch.
    Commit {
        /// The commit message.
        #[arg(short, long)]
        message: String,
        /// Record a commit even if nothing changed.
        #[arg(long)]
        allow_empty: bool,
        /// Print the result as JSON (schema lifeos.commit.v1).
        #[arg(long)]
        json: bool,
    },
    /// List the files of a commit, with sizes.
    Ls {
        /// Only paths under this one.
        path: Option<String>,
        /// The revision (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// Print JSON (schema lifeos.ls.v1).
        #[arg(long)]
        json: bool,
    },
    /// Write the bytes of a file in a commit to stdout.
    Cat {
        /// The file's path in the repository.
        path: String,
        /// The revision (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
    },
    /// Materialise a whole commit in a new folder.
    Restore {
        /// The folder to create (must be missing or empty).
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// The revision (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// Print JSON (schema lifeos.restore.v1).
        #[arg(long)]
        json: bool,
    },
    /// Show commits of the current branch, newest first.
    Log {
        /// Start from this revision (default `@`).
        #[arg(short, long, default_value = "@")]
        revision: String,
        /// Print JSON (schema lifeos.log.v1).
        #[arg(long)]
        json: bool,
    },
    /// Logical bytes, stored bytes, dedup ratio, chunks, packs.
    Stats {
        /// Print JSON (schema lifeos.stats.v1).
        #[arg(long)]
        json: bool,
    },
    /// Verify every pack, chunk and object, and that history is complete.
    Fsck {
        /// Print JSON (schema lifeos.fsck.v1).
        #[arg(long)]
        json: bool,
    },
    /// Remove data nothing in the operation log refers to.
    Gc {
        /// Print JSON (schema lifeos.gc.v1).
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = output::Style::detect(cli.color);
    match commands::run(cli, style) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}: {}", style_err("error"), e.message);
            if let Some(h) = &e.hint {
                eprintln!("{}: {h}", style_err("hint"));
            }
            ExitCode::from(e.code)
        }
    }
}

fn style_err(s: &str) -> String {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        format!("\x1b[1;31m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}
