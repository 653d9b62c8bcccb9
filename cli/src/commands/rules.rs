//! `lifeos rules`: check the rules file, trust it.

use std::path::PathBuf;

use clap::Subcommand;
use lifeos_actions::{ActionsError, Rules};
use lifeos_vcs::Repo;

use crate::actions_util::actions_of;
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::Style;
use crate::verb::{Policy, Verb};

/// `lifeos rules ...`.
#[derive(Debug, Subcommand)]
pub enum RulesCmd {
    /// Check a rules file without running anything (default: lifeos.rules.toml in the
    /// folder).
    Check {
        /// The file to check.
        file: Option<PathBuf>,
    },
    /// Trust the rules file at @ so its rules may fire (again after any change). The
    /// folder's file must be the committed one, the one `rules check` read.
    Trust {
        /// Only if the file's id (as `rules check` prints it) starts with this.
        #[arg(long, value_name = "HEX")]
        id: Option<String>,
    },
}

impl Verb for RulesCmd {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        rules(ctx.repo()?, self, ctx.style())
    }
}

/// `lifeos rules ...`.
fn rules(repo: &Repo, cmd: RulesCmd, style: Style) -> CliResult<u8> {
    match cmd {
        RulesCmd::Check { file } => {
            let path = file.unwrap_or_else(|| repo.workdir().join(lifeos_actions::RULES_FILE));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
            let rules = Rules::parse(&text).map_err(ActionsError::Rules)?;
            let id = lifeos_store::Id::hash(text.as_bytes());
            println!(
                "{} ({}): {}, all valid",
                path.display(),
                style.id(&id.short(12)),
                lifeos_diff::counted(rules.rules.len(), "rule", "rules")
            );
            for r in &rules.rules {
                println!(
                    "  {:?} (line {}): on {}, {} action{}",
                    r.name,
                    r.line,
                    r.hook.as_deref().unwrap_or(&r.on),
                    r.action.kind(),
                    if r.approval == lifeos_actions::rules::ApprovalMode::Auto {
                        ", approved automatically"
                    } else {
                        ", needs approval"
                    }
                );
            }
            Ok(0)
        }
        RulesCmd::Trust { id } => {
            let (id, rules) = actions_of(repo).trust(id.as_deref())?;
            println!(
                "Trusted {} {} ({}): they fire until the file changes",
                lifeos_actions::RULES_FILE,
                style.id(&id.short(12)),
                lifeos_diff::counted(rules.rules.len(), "rule", "rules")
            );
            for r in &rules.rules {
                println!(
                    "  {:?}: on {}, {} action",
                    r.name,
                    r.hook.as_deref().unwrap_or(&r.on),
                    r.action.kind()
                );
            }
            Ok(0)
        }
    }
}
