//! `lifeos remote`: add, list and remove remotes, and change an encrypted remote's
//! passphrase.

use std::path::PathBuf;

use clap::Subcommand;
use lifeos_remote::places::{self, RemoteSpec, Remotes, REMOTES_DIR};
use lifeos_remote::RemoteError;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use crate::remote_util::{absolute_url, open_remote, passphrase, PassArgs, S3Args, PASSPHRASE_VAR};
use crate::verb::{Policy, Verb};

/// `lifeos remote ...`
#[derive(Debug, Subcommand)]
pub enum RemoteCmd {
    /// Add a remote: `s3://bucket/prefix`, `file:///path` or a path to a folder.
    Add {
        /// Its name (for example origin).
        name: String,
        /// Where it is.
        url: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        s3: S3Args,
        /// Encrypt what is pushed (the default for s3://).
        #[arg(long, conflicts_with = "no_encrypt")]
        encrypt: bool,
        /// Push in the clear (the default for a folder).
        #[arg(long)]
        no_encrypt: bool,
    },
    /// List the remotes.
    List {
        /// Print JSON (schema lifeos.remotes.v1).
        #[arg(long)]
        json: bool,
    },
    /// Forget a remote (nothing on it is touched).
    Remove {
        /// Its name.
        name: String,
    },
    /// Add or change a passphrase of an encrypted remote; nothing else is re-uploaded.
    /// The current passphrase comes as for push, the new one from
    /// LIFEOS_NEW_PASSPHRASE, --new-passphrase-file or a prompt.
    Key {
        /// The remote (default: the only one; with several, name one).
        name: Option<String>,
        /// Remove the current passphrase's key once the new one is added (change it);
        /// without it the new passphrase is added beside the current one.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        #[allow(missing_docs)]
        pass: PassArgs,
        /// Read the new passphrase from this file (its first line).
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
    },
}

impl Verb for RemoteCmd {
    fn policy(&self) -> Policy {
        Policy {
            answers: matches!(self, RemoteCmd::List { .. }),
            ..Policy::REPORT
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        remote(ctx.repo()?, self)
    }
}

/// `lifeos remote ...`
fn remote(repo: &Repo, cmd: RemoteCmd) -> CliResult<u8> {
    let dot = repo.dot_dir();
    let mut remotes = Remotes::load(dot)?;
    match cmd {
        RemoteCmd::Add {
            name,
            url,
            s3,
            encrypt,
            no_encrypt,
        } => {
            places::check_name(&name)?;
            if remotes.remote.contains_key(&name) {
                return Err(RemoteError::Exists(name).into());
            }
            let url = absolute_url(&url)?;
            places::parse_url(&url)?;
            let spec = RemoteSpec {
                url,
                endpoint: s3.endpoint,
                region: s3.region,
                encrypt: (encrypt || no_encrypt).then_some(encrypt),
                lazy: false,
                seen: None,
            };
            let encrypted = spec.encrypts();
            println!(
                "Added remote {name} at {}{}",
                spec.url,
                if encrypted { " (encrypted)" } else { "" }
            );
            remotes.remote.insert(name, spec);
            remotes.save(dot)?;
        }
        RemoteCmd::List { json } => {
            if json {
                let list: Vec<_> = remotes
                    .remote
                    .iter()
                    .map(|(n, s)| {
                        json!({"name": n, "url": s.url, "endpoint": s.endpoint, "region": s.region,
                               "encrypt": s.encrypts(), "lazy": s.lazy,
                               "seen": s.seen.as_ref().map(|v| json!({"format": v.format, "encrypted": v.encrypted}))})
                    })
                    .collect();
                print_json("lifeos.remotes.v1", json!({ "remotes": list }));
            } else {
                for (n, s) in &remotes.remote {
                    let mut notes = Vec::new();
                    // What the remote was when last opened, not only what was asked for.
                    match &s.seen {
                        Some(v) if v.encrypted => notes.push("encrypted"),
                        Some(_) => notes.push("plain"),
                        None if s.encrypts() => notes.push("encrypted once pushed to"),
                        None => {}
                    }
                    if s.lazy {
                        notes.push("lazy clone");
                    }
                    let notes = if notes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", notes.join(", "))
                    };
                    println!("{n}\t{}{notes}", s.url);
                }
            }
        }
        RemoteCmd::Remove { name } => {
            if remotes.get(&name)?.lazy {
                // Files this repository has not fetched yet exist only there.
                return Err(CliError::new(format!(
                    "this repository is a lazy clone of {name}: file contents it has not read yet are only on {name}"
                ))
                .hint(format!(
                    "run `lifeos fetch {name} --all-data` first; nothing was changed"
                )));
            }
            remotes.remote.remove(&name);
            remotes.save(dot)?;
            let cache = dot.join(REMOTES_DIR).join(&name);
            if cache.exists() {
                std::fs::remove_dir_all(&cache)
                    .map_err(|e| CliError::new(format!("removing {}: {e}", cache.display())))?;
            }
            println!("Removed remote {name} (nothing on it was changed)");
        }
        RemoteCmd::Key {
            name,
            replace,
            pass,
            new_passphrase_file,
        } => {
            let (name, remote, _) = open_remote(repo, name.as_deref(), false, &pass)?;
            let old = passphrase(
                pass.passphrase_file.as_deref(),
                PASSPHRASE_VAR,
                "current passphrase",
            )?;
            let new = passphrase(
                new_passphrase_file.as_deref(),
                "LIFEOS_NEW_PASSPHRASE",
                "new passphrase",
            )?;
            remote.change_passphrase(&old, &new, replace)?;
            if replace {
                println!("Changed the passphrase of {name}");
            } else {
                println!("Added a passphrase to {name}");
            }
        }
    }
    Ok(0)
}
