//! `lifeos clone`: a new repository from a remote.

use std::path::{Path, PathBuf};

use lifeos_remote::places::RemoteSpec;
use lifeos_remote::pull;
use serde_json::json;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::{human_bytes, print_json};
use crate::remote_util::{
    absolute_url, fetch_json, passphrase, reopen, warn_heads, Bar, PassArgs, S3Args, PASSPHRASE_VAR,
};
use crate::verb::{Policy, Verb};

/// `lifeos clone URL [DIR] [--lazy]`
#[derive(Debug, clap::Args)]
pub struct CloneArgs {
    /// The remote.
    url: String,
    /// The new folder (default: the remote's last path part).
    dir: Option<PathBuf>,
    /// Download history only; file contents are read from the remote when needed
    /// (`lifeos fetch --all-data` downloads the rest).
    #[arg(long)]
    lazy: bool,
    #[command(flatten)]
    s3: S3Args,
    #[command(flatten)]
    pass: PassArgs,
    /// Print JSON (schema lifeos.clone.v1).
    #[arg(long)]
    json: bool,
}

impl Verb for CloneArgs {
    fn policy(&self) -> Policy {
        Policy::OUTSIDE
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        clone(ctx.here(), self)
    }
}

/// `lifeos clone URL [DIR] [--lazy]`.
fn clone(here: &Path, args: CloneArgs) -> CliResult<u8> {
    let CloneArgs {
        url,
        dir,
        lazy,
        s3,
        pass,
        json,
    } = args;
    let url = absolute_url(&url)?;
    let target = pull::clone_target(here, &url, dir.as_deref())?;
    let url_shown = url.clone();
    let spec = RemoteSpec {
        url,
        endpoint: s3.endpoint,
        region: s3.region,
        encrypt: None,
        lazy,
        seen: None,
    };
    let ask = || {
        passphrase(
            pass.passphrase_file.as_deref(),
            PASSPHRASE_VAR,
            "passphrase",
        )
    };
    let serve = reopen(&target.join(lifeos_vcs::layout::DOT_DIR), "origin", &spec);
    let bar = Bar::new("clone", json);
    let cloned = pull::clone(&target, spec, &ask, &bar, serve);
    drop(bar);
    let pull::Cloned {
        report: r,
        branch,
        moved,
        ..
    } = cloned?;
    warn_heads("origin", &r);
    if json {
        let mut v = fetch_json("origin", &r);
        v["dir"] = json!(target.to_string_lossy());
        v["lazy"] = json!(lazy);
        v["commit"] = json!(moved.map(|m| m.to_hex()));
        print_json("lifeos.clone.v1", v);
    } else {
        println!(
            "Cloned {} into {} ({} objects, {}{})",
            url_shown,
            target.display(),
            r.objects,
            human_bytes(r.bytes),
            if lazy {
                "; file contents are read from the remote when needed"
            } else {
                ""
            }
        );
        if lazy {
            println!("The folder is empty: `lifeos checkout {}` writes its files; `lifeos ls -r {0}`, `cat` and `log` work now", branch.unwrap_or_else(|| "main".into()));
        }
    }
    Ok(0)
}
