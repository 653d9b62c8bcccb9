//! `lifeos init`: a new repository, optionally sharing its folder with git.

use std::path::PathBuf;

use lifeos_store::StoreConfig;

use crate::context::Context;
use crate::error::CliResult;
use crate::git_util::colocate;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The folder to version.
    pub dir: Option<PathBuf>,
    /// Share the folder with git: adopt the git repository in DIR/.git (or create
    /// one), and keep both in step on every lifeos command.
    #[arg(long)]
    pub git: bool,
}

impl Verb for InitArgs {
    fn policy(&self) -> Policy {
        Policy::OUTSIDE
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let target = match self.dir {
            Some(d) => ctx.here().join(d),
            None => ctx.here().to_path_buf(),
        };
        let repo = lifeos_app::init(&target, StoreConfig::default())?;
        println!(
            "Initialized an empty lifeos repository in {}",
            repo.dot_dir().display()
        );
        if self.git {
            colocate(repo)?;
        }
        Ok(0)
    }
}
