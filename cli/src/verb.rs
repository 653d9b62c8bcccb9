//! A verb of the command line: what it runs, and what the command line does around it,
//! declared by the verb itself ([`Verb::policy`]): whether its output is paged, whether
//! `-q` mutes it, whether it may run where there is no repository yet, whether a folder
//! shared with git is synced around it, and whether it fires rules for what it changed.

use crate::context::Context;
use crate::error::CliResult;

/// A verb: parsed arguments that know their policy and how to run.
pub(crate) trait Verb {
    /// What the command line does around it.
    fn policy(&self) -> Policy;
    /// Runs it in `ctx`; returns the exit code.
    fn run(self, ctx: &Context) -> CliResult<u8>;
}

/// A verb's policy ([`Verb::policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Its output can be long: on a terminal it goes through the pager.
    pub pages: bool,
    /// Its stdout is what was asked for (a read), not a report of what it did, which
    /// `-q` mutes.
    pub answers: bool,
    /// It makes a repository or needs none, so a store left where git can reach it is not
    /// moved first.
    pub creates: bool,
    /// In a folder colocated with git, what git changed is imported before it and what
    /// it changed is exported after. Off for commands that run inside git's own (hooks,
    /// the filter) and for those with no repository to sync.
    pub syncs_git: bool,
    /// It fires the rules for the branches, tags, entities and extracts its operations
    /// changed.
    pub fires_rules: bool,
}

impl Policy {
    /// A command that records or reports: synced with git, quiet under `-q`, not paged.
    pub(crate) const REPORT: Policy = Policy {
        pages: false,
        answers: false,
        creates: false,
        syncs_git: true,
        fires_rules: false,
    };
    /// A read: its stdout is the answer.
    pub(crate) const READ: Policy = Policy {
        answers: true,
        ..Policy::REPORT
    };
    /// A read whose answer can be long.
    pub(crate) const PAGED: Policy = Policy {
        pages: true,
        ..Policy::READ
    };
    /// A command whose operations change refs, entities or extracts that rules watch.
    pub(crate) const FIRES: Policy = Policy {
        fires_rules: true,
        ..Policy::REPORT
    };
    /// A command that works without a repository (or makes one): nothing to sync.
    pub(crate) const OUTSIDE: Policy = Policy {
        creates: true,
        syncs_git: false,
        ..Policy::REPORT
    };
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Policy, Verb};
    use crate::Cli;

    fn policy(args: &[&str]) -> Policy {
        let cli = Cli::try_parse_from(std::iter::once("lifeos").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        cli.command.policy()
    }

    /// The policies the command line relied on when they were lists, verb by verb:
    /// (arguments, pages, answers, creates, syncs git, fires rules).
    #[test]
    fn each_verb_declares_what_is_done_around_it() {
        let table: &[(&[&str], [bool; 5])] = &[
            (&["log"], [true, true, false, true, false]),
            (&["op", "log"], [true, true, false, true, true]),
            (
                &["op", "restore", "abcd"],
                [false, false, false, true, true],
            ),
            (
                &["extract", "show", "a.md"],
                [true, true, false, true, false],
            ),
            (
                &["extract", "show", "a.md", "--format", "srt"],
                [false, true, false, true, false],
            ),
            (&["status"], [false, true, false, true, false]),
            (&["commit", "-m", "x"], [false, false, false, true, true]),
            (&["branch", "list"], [false, true, false, true, true]),
            (
                &["branch", "create", "b"],
                [false, false, false, true, true],
            ),
            (&["init"], [false, false, true, false, false]),
            (&["completions", "bash"], [false, true, true, false, false]),
            (&["man"], [false, true, true, false, false]),
            (&["config", "list"], [false, false, false, false, false]),
            (
                &["git", "hook", "post-commit"],
                [false, false, false, false, false],
            ),
            (&["git", "import", "."], [false, false, false, true, true]),
            (&["remote", "list"], [false, true, false, true, false]),
            (&["push"], [false, false, false, true, false]),
        ];
        for (args, [pages, answers, creates, syncs_git, fires_rules]) in table {
            let want = Policy {
                pages: *pages,
                answers: *answers,
                creates: *creates,
                syncs_git: *syncs_git,
                fires_rules: *fires_rules,
            };
            assert_eq!(policy(args), want, "{args:?}");
        }
    }
}
