//! `lifeos man`: the manual pages, generated from the same command definitions that parse
//! the arguments.

use std::path::{Path, PathBuf};

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::write_stdout;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write every page into this folder instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl Verb for ManArgs {
    fn policy(&self) -> Policy {
        Policy {
            answers: self.dir.is_none(),
            ..Policy::OUTSIDE
        }
    }

    fn run(self, _ctx: &Context) -> CliResult<u8> {
        man(self.dir.as_deref())
    }
}

/// `lifeos man [--dir DIR]`: the top page on stdout, or every command's page in DIR.
fn man(dir: Option<&Path>) -> CliResult<u8> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(crate::examples::command(), dir))
                .map_err(|e| {
                    CliError::new(format!(
                        "cannot write the manual pages in {}: {e}",
                        dir.display()
                    ))
                })?;
            println!(
                "wrote the manual pages in {} (read them with `man lifeos`, `man lifeos-commit`, ...)",
                dir.display()
            );
            Ok(0)
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(crate::examples::command())
                .render(&mut page)
                .map_err(|e| CliError::new(format!("cannot render the manual page: {e}")))?;
            write_stdout(&page)?;
            Ok(0)
        }
    }
}
