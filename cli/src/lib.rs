//! lifeos-cli: the `lifeos` command. Parses arguments, runs library calls, and renders
//! their results for people (colour, progress) or programs (`--json`, named schemas).

#![warn(missing_docs)]

mod actions_util;
mod commands;
mod context;
mod editor;
mod entity_util;
mod error;
mod examples;
mod git_util;
mod history_util;
mod output;
mod pager;
mod remote_util;
mod search_util;
mod signals;
mod verb;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{FromArgMatches, Parser, ValueEnum};

pub use commands::Command;
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

/// The revision a read takes its files from: `-r REV`, or `@` as of `--at WHEN`.
#[derive(Debug, Clone, clap::Args)]
pub struct RevArgs {
    /// The revision (default `@`).
    #[arg(short, long, default_value = "@")]
    pub revision: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
}

/// `--at WHEN`: read the repository as it was then.
#[derive(Debug, Clone, clap::Args)]
pub struct AsOfArg {
    /// Read the repository as it was at WHEN: a time ("2026-11-01 14:00", 2026-11-01,
    /// yesterday, "3 days ago", "last monday") or an operation id.
    #[arg(long, value_name = "WHEN")]
    pub at: Option<String>,
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
