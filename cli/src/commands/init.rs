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
        // A repository made inside another one's folder is legitimate but easy to make
        // by mistake (a `cd` too far): the outer one goes on recording these files too.
        let outer = target
            .ancestors()
            .find(|d| d.exists())
            .and_then(lifeos_vcs::layout::locate)
            .map(|(workdir, _)| workdir);
        let repo = lifeos_app::init(&target, StoreConfig::default())?;
        println!(
            "Initialized an empty lifeos repository in {}",
            repo.dot_dir().display()
        );
        if let Some(outer) = outer.filter(|o| o.as_path() != repo.workdir()) {
            eprintln!(
                "note: {} is inside the lifeos repository at {}, which records its files as well; each keeps its own history",
                repo.workdir().display(),
                outer.display()
            );
        }
        if self.git {
            colocate(repo)?;
        }
        Ok(0)
    }
}
