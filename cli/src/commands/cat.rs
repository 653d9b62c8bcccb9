//! `lifeos cat`: the bytes of a file in a commit.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use lifeos_vcs::path::display;
use lifeos_vcs::{EntryKind, Repo};
use serde_json::json;

use crate::context::{file_at, Context, FileAt};
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use crate::verb::{Policy, Verb};
use crate::RevArgs;

/// Arguments of `lifeos cat`.
#[derive(Debug, clap::Args)]
pub struct CatArgs {
    /// The file's path in the repository.
    pub path: OsString,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub rev: RevArgs,
    /// Print JSON (schema lifeos.cat.v1): the content as base64, with its size and id.
    #[arg(long)]
    pub json: bool,
}

impl Verb for CatArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let RevArgs { revision, at } = &self.rev;
        cat(ctx.repo()?, self.path.as_bytes(), revision, at, self.json)
    }
}

fn cat(repo: &Repo, path: &[u8], rev: &str, at: &crate::AsOfArg, json: bool) -> CliResult<u8> {
    let FileAt {
        commit,
        path: clean,
        entry,
    } = file_at(repo, path, rev, at, |p| {
        format!("`lifeos ls {p} -r {rev}` lists it")
    })?;
    if json {
        use base64::Engine as _;
        let mut bytes = Vec::new();
        repo.store().read_file(&entry.id, &mut bytes)?;
        print_json(
            "lifeos.cat.v1",
            json!({
                "path": display(&clean),
                "commit": commit.to_hex(),
                "id": entry.id.to_hex(),
                "size": bytes.len(),
                "executable": entry.kind == EntryKind::Executable,
                "symlink": entry.kind == EntryKind::Symlink,
                "content_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
            }),
        );
        return Ok(0);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match repo.store().read_file(&entry.id, &mut out) {
        Ok(_) => {}
        Err(lifeos_store::StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            return Ok(0)
        }
        Err(e) => return Err(e.into()),
    }
    out.flush()
        .map_err(|e| CliError::new(format!("writing to stdout: {e}")))?;
    Ok(0)
}
