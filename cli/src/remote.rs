//! `lifeos remote`, `push`, `fetch`, `pull` and `clone`: sharing one history between
//! devices through a directory or an S3-compatible store.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use lifeos_remote::places::{self, RemoteSpec, Remotes, REMOTES_DIR};
use lifeos_remote::pull;
use lifeos_remote::{PushPlan, Remote, RemoteError};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::commands::say_finished_move;
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, print_json, Style};

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
        /// The remote (default: the only one, or origin).
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

/// Where an S3 remote's endpoint and region come from when not from the environment.
#[derive(Debug, Clone, clap::Args)]
pub struct S3Args {
    /// The S3 endpoint (default: AWS_ENDPOINT_URL, else AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The S3 region (default: AWS_REGION, else us-east-1).
    #[arg(long)]
    pub region: Option<String>,
}

/// Where an encrypted remote's passphrase comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct PassArgs {
    /// Read the passphrase from this file (its first line); default LIFEOS_PASSPHRASE,
    /// else a prompt.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,
}

/// The variable a remote's passphrase is read from.
const PASSPHRASE_VAR: &str = "LIFEOS_PASSPHRASE";

/// Whether [`passphrase`] finds one without asking on the terminal: a file is named or
/// `var` is set.
fn passphrase_at_hand(file: Option<&Path>, var: &str) -> bool {
    file.is_some() || std::env::var_os(var).is_some()
}

/// A passphrase from a file, a variable or the terminal, in that order.
fn passphrase(
    file: Option<&Path>,
    var: &str,
    what: &str,
) -> lifeos_remote::Result<lifeos_remote::Passphrase> {
    if let Some(f) = file {
        let text = std::fs::read(f).map_err(|e| {
            RemoteError::Refused(format!("reading the passphrase file {}: {e}", f.display()))
        })?;
        let text = lifeos_remote::Passphrase::new(text);
        let line = text.split(|b| *b == b'\n').next().unwrap_or_default();
        return Ok(lifeos_remote::Passphrase::new(
            line.strip_suffix(b"\r").unwrap_or(line).to_vec(),
        ));
    }
    if let Some(v) = std::env::var_os(var) {
        return Ok(lifeos_remote::Passphrase::new(
            std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str()).to_vec(),
        ));
    }
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return rpassword::prompt_password(format!("{what}: "))
            .map(|p| lifeos_remote::Passphrase::new(p.into_bytes()))
            .map_err(|e| RemoteError::Refused(format!("reading the passphrase: {e}")));
    }
    Err(RemoteError::NoPassphrase(format!(
        "{var} is not set, no passphrase file was named, and there is no terminal to ask on"
    )))
}

fn remote_err(e: RemoteError) -> CliError {
    let hint = match &e {
        RemoteError::Crypt(lifeos_remote::crypt::CryptError::WrongPassphrase) => {
            Some("nothing was written; check LIFEOS_PASSPHRASE or the --passphrase-file")
        }
        RemoteError::NoPassphrase(_) => Some("set LIFEOS_PASSPHRASE, or pass --passphrase-file FILE"),
        RemoteError::Unknown(_) => Some("`lifeos remote list` shows the remotes; `lifeos remote add NAME URL` adds one"),
        RemoteError::NotEmpty(_) => Some("clone into a new or empty folder"),
        RemoteError::NoBranch => Some("`lifeos checkout BRANCH` first; what was fetched is kept"),
        RemoteError::Empty(_) => Some("push to it first, or check its URL with `lifeos remote list`"),
        RemoteError::Changed { .. } => Some("check the storage; if you changed the remote yourself, forget it with `lifeos remote remove NAME` and add it again (`--no-encrypt` for a plain one)"),
        RemoteError::Store(lifeos_store::StoreError::Remote { .. }) => Some("nothing already published was changed; run the command again once the remote answers (what was sent is not sent again)"),
        RemoteError::Vcs(lifeos_vcs::VcsError::Diverged { .. }) => Some("the fetched commits are kept; merge them with `lifeos merge REV` (see `lifeos log -r 'heads(all())'`)"),
        RemoteError::Vcs(lifeos_vcs::VcsError::Uncommitted(_)) => Some("commit them first (`lifeos commit -m ...`), or pass --force to save them as a commit and go ahead"),
        _ => None,
    };
    let err = match e {
        RemoteError::Vcs(v) => CliError::from(v),
        RemoteError::Store(s) => CliError::from(s),
        other => CliError::new(other.to_string()),
    };
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

impl From<RemoteError> for CliError {
    fn from(e: RemoteError) -> Self {
        remote_err(e)
    }
}

/// Opens remote `name` of `repo` (the only one, or origin, by default), asking for the
/// passphrase as `pass` says ([`pull::open_named`]).
fn open_remote(
    repo: &Repo,
    name: Option<&str>,
    create: bool,
    pass: &PassArgs,
) -> CliResult<(String, Remote, bool)> {
    let ask = || {
        passphrase(
            pass.passphrase_file.as_deref(),
            PASSPHRASE_VAR,
            "passphrase",
        )
    };
    Ok(pull::open_named(repo, name, create, &ask)?)
}

/// How a lazy clone reopens remote `name` when it needs an object: the passphrase from
/// the variable, else a prompt.
fn reopen(
    repo_dot: &Path,
    name: &str,
    spec: &RemoteSpec,
) -> Box<dyn Fn() -> lifeos_remote::Result<Remote> + Send + Sync> {
    let (dot, name, spec) = (repo_dot.to_path_buf(), name.to_string(), spec.clone());
    Box::new(move || {
        let ask = || passphrase(None, PASSPHRASE_VAR, "passphrase");
        pull::open_spec(&dot, &name, &spec, false, &ask)
    })
}

/// Makes a lazy clone read missing objects from its remote (opened when first needed).
pub fn serve_lazily(repo: &Repo) -> CliResult<()> {
    let remotes = Remotes::load(repo.dot_dir())?;
    if let Some((name, spec)) = remotes.remote.iter().find(|(_, s)| s.lazy) {
        lifeos_remote::serve_lazily(repo, reopen(repo.dot_dir(), name, spec));
    }
    Ok(())
}

/// A progress bar on stderr while bytes move.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new(what: &str, json: bool) -> Bar {
        use std::io::IsTerminal;
        let pb = if json || !std::io::stderr().is_terminal() {
            indicatif::ProgressBar::hidden()
        } else {
            let pb = indicatif::ProgressBar::new_spinner();
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg:>10} {bytes} {bytes_per_sec} {elapsed}",
                )
                .expect("valid template"),
            );
            pb
        };
        pb.set_message(what.to_string());
        Bar(pb)
    }
}

impl lifeos_remote::Progress for Bar {
    fn total(&self, bytes: u64) {
        if self.0.is_hidden() {
            return;
        }
        self.0.set_length(bytes);
        self.0.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
    }
    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// `lifeos remote ...`
pub fn remote(repo: &Repo, cmd: RemoteCmd) -> CliResult<u8> {
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

/// A directory remote's URL made absolute (relative to the current folder).
fn absolute_url(url: &str) -> CliResult<String> {
    if url.contains("://") || url.starts_with('/') {
        return Ok(url.to_string());
    }
    let here = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(here.join(url).to_string_lossy().into_owned())
}

/// `lifeos push [NAME]`.
pub fn push(repo: &Repo, name: Option<String>, pass: PassArgs, json: bool) -> CliResult<u8> {
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

fn fetch_json(name: &str, r: &lifeos_remote::FetchReport) -> serde_json::Value {
    json!({"remote": name, "objects": r.objects, "bytes": r.bytes,
           "new_heads": r.new_heads.iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
           "merged_op": r.merged.map(|m| m.to_hex()),
           "damaged_heads": r.damaged_heads, "hidden": r.hidden.map(|h| h.to_hex())})
}

/// Says on stderr what a fetch found wrong with the remote's heads.
fn warn_heads(name: &str, r: &lifeos_remote::FetchReport) {
    for d in &r.damaged_heads {
        eprintln!("warning: {name}: an operation head was left out: {d}");
    }
    if let Some(op) = r.hidden {
        eprintln!(
            "warning: {name} no longer shows operation {} that this repository pushed there, nor anything after it: the server dropped or rolled back its heads (or an older copy of it was restored); nothing here was changed, and `lifeos push {name}` sends it again",
            op.short(12)
        );
    }
}

fn say_fetched(name: &str, r: &lifeos_remote::FetchReport, style: Style) {
    if r.new_heads.is_empty() {
        println!("Nothing new on {name} ({} objects downloaded)", r.objects);
    } else {
        println!(
            "Fetched {} objects ({}) from {name}: {} new operations merged as {}",
            r.objects,
            human_bytes(r.bytes),
            r.new_heads.len(),
            style.id(&r.merged.map(|m| m.short(12)).unwrap_or_default())
        );
    }
}

/// `lifeos fetch [NAME] [--all-data]`.
pub fn fetch(
    repo: &Repo,
    name: Option<String>,
    all_data: bool,
    pass: PassArgs,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let (name, remote, lazy) = open_remote(repo, name.as_deref(), false, &pass)?;
    let all_data = all_data || !lazy;
    let bar = Bar::new("fetch", json);
    let r = remote.fetch(repo, &name, all_data, pull::last_pushed(repo, &name), &bar)?;
    drop(bar);
    warn_heads(&name, &r);
    if all_data {
        let mut remotes = Remotes::load(repo.dot_dir())?;
        if let Some(s) = remotes.remote.get_mut(&name).filter(|s| s.lazy) {
            s.lazy = false;
            remotes.save(repo.dot_dir())?;
        }
    }
    if json {
        print_json("lifeos.fetch.v1", fetch_json(&name, &r));
    } else {
        say_fetched(&name, &r, style);
    }
    Ok(0)
}

/// `lifeos pull [NAME]`: fetch, then move the current branch and the folder forward.
pub fn pull(
    repo: &Repo,
    name: Option<String>,
    force: bool,
    pass: PassArgs,
    json: bool,
    style: Style,
) -> CliResult<u8> {
    let (name, remote, lazy) = open_remote(repo, name.as_deref(), false, &pass)?;
    let bar = Bar::new("fetch", json);
    let lock = || {
        let wc = repo.lock_working_copy()?;
        say_finished_move(&wc, style);
        Ok(wc)
    };
    let pulled = pull::pull(repo, &name, &remote, lazy, force, &bar, &lock);
    drop(bar);
    let pull::Pulled {
        report: r,
        branch,
        moved,
    } = pulled?;
    warn_heads(&name, &r);
    if json {
        let mut v = fetch_json(&name, &r);
        v["branch"] = json!(branch);
        v["moved_to"] = json!(moved.map(|m| m.to_hex()));
        print_json("lifeos.pull.v1", v);
    } else {
        say_fetched(&name, &r, style);
        match moved {
            Some(c) => println!(
                "Moved {branch} and the folder to {}",
                style.id(&c.short(12))
            ),
            None => println!("The folder is up to date"),
        }
    }
    Ok(0)
}

/// `lifeos clone URL [DIR] [--lazy]`.
pub fn clone(here: &Path, args: CloneArgs) -> CliResult<u8> {
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

/// A new folder for a remote check's scratch repository, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        Scratch(std::env::temp_dir().join(format!(
            "lifeos-remote-walk-{}",
            lifeos_store::fsutil::random_hex(8)
        )))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lifeos fsck --remote NAME [--read-data]`.
pub fn fsck(repo: &Repo, name: &str, read_data: bool, pass: PassArgs, json: bool) -> CliResult<u8> {
    let (name, remote, _) = open_remote(repo, Some(name), false, &pass)?;
    let scratch = Scratch::new();
    let r = remote.check(&scratch.0, read_data)?;
    let code = u8::from(!r.problems.is_empty());
    if json {
        print_json(
            "lifeos.fsck_remote.v1",
            json!({"remote": name, "location": remote.location(), "ok": r.problems.is_empty(),
                   "packs": r.packs, "bytes": r.bytes, "objects": r.objects, "verified": r.verified,
                   "heads": r.heads, "reachable": r.reachable, "unindexed_packs": r.unindexed,
                   "problems": r.problems}),
        );
        return Ok(code);
    }
    println!(
        "checked {name}: {} packs ({}), {} objects{}; {} heads reaching {} objects",
        r.packs,
        human_bytes(r.bytes),
        r.objects,
        if read_data {
            format!(", {} downloaded and verified", r.verified)
        } else {
            String::new()
        },
        r.heads,
        r.reachable
    );
    if !r.unindexed.is_empty() {
        println!(
            "{} packs without an index (left by a push that was stopped; `lifeos gc --remote {name}` removes them)",
            r.unindexed.len()
        );
    }
    if r.problems.is_empty() {
        println!("no problems found");
    } else {
        for p in &r.problems {
            println!("problem: {p}");
        }
    }
    Ok(code)
}

/// `lifeos gc --remote NAME`.
pub fn gc(repo: &Repo, name: &str, pass: PassArgs, json: bool) -> CliResult<u8> {
    let (name, remote, _) = open_remote(repo, Some(name), false, &pass)?;
    let scratch = Scratch::new();
    let r = remote.gc(&scratch.0)?;
    if json {
        print_json(
            "lifeos.gc_remote.v1",
            json!({"remote": name, "packs_removed": r.packs_removed, "bytes_removed": r.bytes_removed,
                   "packs_kept": r.packs_kept, "unreachable_kept": r.unreachable_kept}),
        );
    } else {
        println!(
            "removed {} packs ({}) from {name}; kept {} ({} unreachable objects in them)",
            r.packs_removed,
            human_bytes(r.bytes_removed),
            r.packs_kept,
            r.unreachable_kept
        );
    }
    Ok(0)
}
