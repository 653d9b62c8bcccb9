//! What the remote verbs share: the passphrase, opening a remote with its errors explained,
//! a progress bar for bytes moving, and how a fetch reads.

use std::path::{Path, PathBuf};

use lifeos_remote::places::{RemoteSpec, Remotes};
use lifeos_remote::pull;
use lifeos_remote::{Remote, RemoteError};
use lifeos_vcs::Repo;
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, Style};

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
pub(crate) const PASSPHRASE_VAR: &str = "LIFEOS_PASSPHRASE";

/// Whether [`passphrase`] finds one without asking on the terminal: a file is named or
/// `var` is set.
pub(crate) fn passphrase_at_hand(file: Option<&Path>, var: &str) -> bool {
    file.is_some() || std::env::var_os(var).is_some()
}

/// A passphrase from a file, a variable or the terminal, in that order.
pub(crate) fn passphrase(
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
        RemoteError::Unnamed(_) => Some("name the remote: `lifeos push NAME`, `lifeos fetch NAME`, `lifeos pull NAME`"),
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

/// Opens remote `name` of `repo` (by default the only one; with several, one must be named), asking for the
/// passphrase as `pass` says ([`pull::open_named`]).
pub(crate) fn open_remote(
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
pub(crate) fn reopen(
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
pub(crate) fn serve_lazily(repo: &Repo) -> CliResult<()> {
    let remotes = Remotes::load(repo.dot_dir())?;
    if let Some((name, spec)) = remotes.remote.iter().find(|(_, s)| s.lazy) {
        lifeos_remote::serve_lazily(repo, reopen(repo.dot_dir(), name, spec));
    }
    Ok(())
}

/// A progress bar on stderr while bytes move.
pub(crate) struct Bar(indicatif::ProgressBar);

impl Bar {
    pub(crate) fn new(what: &str, json: bool) -> Bar {
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

/// A directory remote's URL made absolute (relative to the current folder).
pub(crate) fn absolute_url(url: &str) -> CliResult<String> {
    if url.contains("://") || url.starts_with('/') {
        return Ok(url.to_string());
    }
    let here = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(here.join(url).to_string_lossy().into_owned())
}

/// What a fetch brought, as `lifeos.fetch.v1` has it.
pub(crate) fn fetch_json(name: &str, r: &lifeos_remote::FetchReport) -> serde_json::Value {
    json!({"remote": name, "objects": r.objects, "bytes": r.bytes,
           "new_heads": r.new_heads.iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
           "merged_op": r.merged.map(|m| m.to_hex()),
           "damaged_heads": r.damaged_heads, "hidden": r.hidden.map(|h| h.to_hex())})
}

/// Says on stderr what a fetch found wrong with the remote's heads.
pub(crate) fn warn_heads(name: &str, r: &lifeos_remote::FetchReport) {
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

/// Says what a fetch brought.
pub(crate) fn say_fetched(name: &str, r: &lifeos_remote::FetchReport, style: Style) {
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

/// A new folder for a remote check's scratch repository, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new() -> Scratch {
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
