//! How a command's stdout reaches the person: through a pager for long output on a
//! terminal, and muted by `-q` for commands whose stdout only says what was done (which
//! commands are which is their [`crate::policy::Policy`]).

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, Command as Process, Stdio};

/// Where stdout went instead of the terminal or the pipe it was; put back on drop.
pub struct Redirected {
    /// The pager, when there is one: waited for once its input is closed.
    pager: Option<Child>,
    /// stdout as it was, to put back.
    saved: i32,
}

impl Redirected {
    /// Sends stdout through the pager when it is a terminal: `$LIFEOS_PAGER`, else the
    /// `ui.pager` setting (of the repository at `here`, else the user's), else `$PAGER`,
    /// else `less -FRX` (which exits at once when the output fits). `None` when stdout is
    /// not a terminal or the pager cannot start (then nothing changes).
    pub fn pager(here: &std::path::Path) -> Option<Redirected> {
        if !std::io::stdout().is_terminal() {
            return None;
        }
        let env = |v: &str| std::env::var(v).ok().filter(|p| !p.trim().is_empty());
        let cmd = env("LIFEOS_PAGER")
            .or_else(|| {
                let dot = lifeos_vcs::settings::repo_dot_dir(here);
                lifeos_vcs::settings::effective(dot.as_deref(), "ui.pager")
            })
            .or_else(|| env("PAGER"))
            .unwrap_or_else(|| "less -FRX".into());
        let mut child = Process::new("sh")
            .arg("-c")
            .arg(&cmd)
            .env(
                "LESS",
                std::env::var("LESS").unwrap_or_else(|_| "FRX".into()),
            )
            .stdin(Stdio::piped())
            .spawn()
            .ok()?;
        let input = child.stdin.take()?;
        // A pager that quits before the output ends (q in less) ends the command, as
        // it ends git's: reads only, and every write is published whole or not at all.
        // SAFETY: restores the default action of SIGPIPE; no handler is involved.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let mut r = Redirected::to(input.as_raw_fd())?;
        r.pager = Some(child);
        // `input` closes here: fd 1 holds the pipe now.
        Some(r)
    }

    /// Sends stdout to /dev/null (`-q`).
    pub fn mute() -> Option<Redirected> {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .ok()?;
        Redirected::to(null.as_raw_fd())
    }

    /// Points fd 1 at `fd` (a copy of it), keeping the old stdout to put back.
    fn to(fd: i32) -> Option<Redirected> {
        let _ = std::io::stdout().flush();
        // SAFETY: dup and dup2 on descriptors this process owns; 1 is stdout.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 || unsafe { libc::dup2(fd, 1) } < 0 {
            if saved >= 0 {
                // SAFETY: closes the copy just made.
                unsafe { libc::close(saved) };
            }
            return None;
        }
        Some(Redirected { pager: None, saved })
    }
}

impl Drop for Redirected {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // SAFETY: puts the saved stdout back on fd 1 (closing the pipe's write end, so
        // the pager sees the end of its input) and closes the copy.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
        if let Some(mut p) = self.pager.take() {
            let _ = p.wait();
        }
    }
}
