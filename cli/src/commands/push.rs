//! `lifeos push`: upload what a remote lacks, then publish this repository's operations on
//! it.

use lifeos_remote::pull;
use lifeos_remote::PushPlan;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::{human_bytes, print_json};
use crate::remote_util::{open_remote, passphrase_at_hand, Bar, PassArgs, PASSPHRASE_VAR};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The remote (default: the only one; with several, name one).
    pub name: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub pass: PassArgs,
    /// Print JSON (schema lifeos.push.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for PushArgs {
    fn policy(&self) -> Policy {
        Policy::REPORT
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        push(ctx.repo()?, self.name, self.pass, self.json)
    }
}

/// `lifeos push [NAME]`.
fn push(repo: &Repo, name: Option<String>, pass: PassArgs, json: bool) -> CliResult<u8> {
    // The walk of what to send holds the repository lock (shared: `gc` waits for it).
    // With the passphrase at hand, the walk runs while the remote is opened (its key
    // derived from the passphrase) and neither waits for the other, and a remote that
    // fails to open (a wrong passphrase) stops the walk; a passphrase that may be asked
    // on the terminal is asked first, so the lock is never held while a person answers,
    // and a wrong one fails before anything is walked.
    let (plan, opened) = if !passphrase_at_hand(pass.passphrase_file.as_deref(), PASSPHRASE_VAR) {
        let opened = open_remote(repo, name.as_deref(), true, &pass)?;
        (PushPlan::new(repo), Ok(opened))
    } else {
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let walk = s.spawn(|| PushPlan::new_until(repo, &stop));
            let opened = open_remote(repo, name.as_deref(), true, &pass);
            if opened.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            (
                walk.join()
                    .expect("the walk of what to push does not panic"),
                opened,
            )
        })
    };
    let (name, remote, _) = opened?;
    let bar = Bar::new("push", json);
    let r = remote.push(plan?, &bar)?;
    drop(bar);
    if let Some(op) = r.heads.first() {
        pull::remember_pushed(repo, &name, op)?;
    }
    if json {
        print_json(
            "lifeos.push.v1",
            json!({"remote": name, "location": remote.location(), "encrypted": remote.encrypted(),
                   "objects": r.objects, "bytes": r.bytes, "packs": r.packs, "present": r.present,
                   "heads_added": r.heads_added, "heads_removed": r.heads_removed}),
        );
    } else if r.objects == 0 && r.heads_added == 0 {
        println!("{name} is up to date");
    } else {
        println!(
            "Pushed {} objects ({}) in {} packs to {name}; {} were there already",
            r.objects,
            human_bytes(r.bytes),
            r.packs,
            r.present
        );
    }
    Ok(0)
}
