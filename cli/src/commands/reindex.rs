//! `lifeos reindex`: rebuild the catalog from the objects.

use lifeos_vcs::Repo;

use crate::context::Context;
use crate::error::CliResult;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos reindex` (none).
#[derive(Debug, clap::Args)]
pub struct ReindexArgs {}

impl Verb for ReindexArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        reindex(ctx.repo()?)
    }
}

/// `lifeos reindex`.
fn reindex(repo: &Repo) -> CliResult<u8> {
    let t = std::time::Instant::now();
    let lifeos_git::Reindexed {
        catalog: cat,
        git_rows,
    } = lifeos_git::reindex(repo)?;
    let (done, failed) = cat.extract_counts()?;
    println!(
        "Rebuilt the catalog from the objects: {} operations, {done} extracted files, {failed} failures, {git_rows} git map entries ({:.2} s)",
        cat.op_count()?,
        t.elapsed().as_secs_f64()
    );
    Ok(0)
}
