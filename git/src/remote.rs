//! Remotes through git: `lifeos git clone`, `fetch` and `push` run the user's `git` for
//! the transport (so its credential helpers, ssh and proxy settings apply) and move the
//! history in and out with [`crate::import`], [`crate::export`] and the colocated sync.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{GitError, Result};

/// The oldest git lifeos runs: `reference-transaction` hooks came in 2.28.
pub const MIN_GIT: (u32, u32) = (2, 28);

/// How git's own output is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// git writes its progress and messages to the terminal.
    Inherit,
    /// git's output is kept, and shown only in an error.
    Capture,
}

/// Parses `git version 2.47.3` (and vendor suffixes such as `2.39.5 (Apple Git-154)`).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.trim().strip_prefix("git version ")?;
    let mut it = v.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Checks that `git` runs and is recent enough.
pub fn require_git() -> Result<()> {
    let out = Command::new("git")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GitError::Program {
            reason: match e.kind() {
                std::io::ErrorKind::NotFound => "git is not installed, and lifeos runs it to talk to remotes; install git (Debian: `apt install git`)".into(),
                _ => format!("cannot run git: {e}"),
            },
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    match parse_version(&text) {
        Some(v) if v >= MIN_GIT => Ok(()),
        Some((major, minor)) => Err(GitError::Program {
            reason: format!(
                "git {major}.{minor} is too old: lifeos needs git {}.{} or newer; upgrade git",
                MIN_GIT.0, MIN_GIT.1
            ),
        }),
        None => Err(GitError::Program {
            reason: format!(
                "`git --version` printed {:?}, which lifeos cannot read",
                text.trim()
            ),
        }),
    }
}

/// Runs `git args...` in `dir`.
pub fn run_git<S: AsRef<OsStr>>(dir: &Path, args: &[S], output: Output) -> Result<()> {
    require_git()?;
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).args(args).stdin(Stdio::null());
    let shown = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let fail = |detail: String| GitError::Program {
        reason: format!("`git {shown}` failed{detail}"),
    };
    match output {
        Output::Inherit => {
            let status = cmd.status().map_err(|e| fail(format!(": {e}")))?;
            if !status.success() {
                return Err(fail(format!(" ({status}); see git's message above")));
            }
        }
        Output::Capture => {
            let out = cmd.output().map_err(|e| fail(format!(": {e}")))?;
            if !out.status.success() {
                return Err(fail(format!(
                    " ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_versions_parse() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.5 (Apple Git-154)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 1.8.0.msysgit.0"), Some((1, 8)));
        assert_eq!(parse_version("hub version 2.14"), None);
    }
}
