//! What the command line does around each command, declared once per verb: whether its
//! output is paged, whether `-q` mutes it, whether it may run where there is no
//! repository yet, whether a folder shared with git is synced around it, and whether it
//! fires rules for what it changed. [`Command::policy`] matches every verb without a
//! catch-all, so a new verb does not compile until its policy is written.

use crate::entity::EntityCmd;
use crate::git::GitCmd;
use crate::remote::RemoteCmd;
use crate::{BranchCmd, Command, ExtractCmd, ExtractFormat, ModelCmd, OpCmd, TagCmd};

/// A command's policy ([`Command::policy`]).
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
    const REPORT: Policy = Policy {
        pages: false,
        answers: false,
        creates: false,
        syncs_git: true,
        fires_rules: false,
    };
    /// A read: its stdout is the answer.
    const READ: Policy = Policy {
        answers: true,
        ..Policy::REPORT
    };
    /// A read whose answer can be long.
    const PAGED: Policy = Policy {
        pages: true,
        ..Policy::READ
    };
    /// A command whose operations change refs, entities or extracts that rules watch.
    const FIRES: Policy = Policy {
        fires_rules: true,
        ..Policy::REPORT
    };
    /// A command that works without a repository (or makes one): nothing to sync.
    const OUTSIDE: Policy = Policy {
        creates: true,
        syncs_git: false,
        ..Policy::REPORT
    };
}

impl Command {
    /// What the command line does around this command.
    pub fn policy(&self) -> Policy {
        use Policy as P;
        match self {
            Command::Init { .. } => P::OUTSIDE,
            Command::Clone(_) => P::OUTSIDE,
            Command::Completions { .. } => Policy {
                answers: true,
                ..P::OUTSIDE
            },
            Command::Man { dir } => Policy {
                answers: dir.is_none(),
                ..P::OUTSIDE
            },
            Command::Model(m) => Policy {
                answers: matches!(m, ModelCmd::List { .. }),
                ..P::OUTSIDE
            },
            Command::Config(_) => Policy {
                syncs_git: false,
                ..P::REPORT
            },
            Command::Commit { .. }
            | Command::Restore { .. }
            | Command::Checkout { .. }
            | Command::Describe { .. }
            | Command::Merge { .. }
            | Command::Undo { .. }
            | Command::Redo { .. }
            | Command::Ingest { .. } => P::FIRES,
            Command::Branch(b) => Policy {
                answers: matches!(b, BranchCmd::List { .. }),
                ..P::FIRES
            },
            Command::Tag(t) => Policy {
                answers: matches!(t, TagCmd::List { .. }),
                ..P::FIRES
            },
            Command::Entity(e) => Policy {
                answers: matches!(e, EntityCmd::Show { .. } | EntityCmd::History { .. }),
                ..P::FIRES
            },
            Command::Op(o) => Policy {
                pages: matches!(o, OpCmd::Log { .. } | OpCmd::Show { .. }),
                answers: !matches!(o, OpCmd::Restore { .. }),
                ..P::FIRES
            },
            Command::Log { .. } | Command::Show { .. } | Command::Diff { .. } => P::PAGED,
            Command::Extract(x) => Policy {
                pages: matches!(
                    x,
                    ExtractCmd::Show {
                        format: ExtractFormat::Text,
                        ..
                    }
                ),
                ..P::READ
            },
            Command::Status { .. }
            | Command::Cat { .. }
            | Command::Ls { .. }
            | Command::Search { .. }
            | Command::Query { .. }
            | Command::Actions(_)
            | Command::Receipts { .. }
            | Command::Receipt(_)
            | Command::Rules(_)
            | Command::Stats { .. }
            | Command::Fsck { .. } => P::READ,
            Command::Remote(r) => Policy {
                answers: matches!(r, RemoteCmd::List { .. }),
                ..P::REPORT
            },
            Command::Git(g) => match g {
                GitCmd::Import { .. } => P::FIRES,
                GitCmd::Clone { .. } => P::OUTSIDE,
                // They run inside git's own commands (reference-transaction while git
                // holds its ref locks): they import by themselves.
                GitCmd::Hook { .. } | GitCmd::FilterProcess => Policy {
                    syncs_git: false,
                    ..P::REPORT
                },
                GitCmd::Init { .. }
                | GitCmd::Fetch { .. }
                | GitCmd::Push { .. }
                | GitCmd::Hooks(_)
                | GitCmd::Filter(_)
                | GitCmd::Export { .. } => P::REPORT,
            },
            Command::Approve { .. }
            | Command::Reject { .. }
            | Command::Rollback { .. }
            | Command::Watch { .. }
            | Command::Reindex
            | Command::Push { .. }
            | Command::Fetch { .. }
            | Command::Pull { .. }
            | Command::Gc { .. } => P::REPORT,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Policy;
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
