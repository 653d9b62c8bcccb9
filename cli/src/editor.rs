//! Commit messages from an editor, as git asks for them: a file with a template listing
//! the changes, opened in the editor ([`editor`]); lines
//! starting with `#` are dropped, and an empty message records nothing.

use lifeos_vcs::path::{display, is_under, BString};
use lifeos_vcs::Repo;

use crate::error::{CliError, CliResult};

/// The editor to run: `$LIFEOS_EDITOR`, else the `ui.editor` setting, else `$VISUAL`,
/// else `$EDITOR`, else `vi`. It is a shell command line, as git runs `core.editor`.
fn editor(repo: &Repo) -> String {
    let env = |v: &str| std::env::var(v).ok().filter(|e| !e.trim().is_empty());
    env("LIFEOS_EDITOR")
        .or_else(|| lifeos_vcs::settings::effective(Some(repo.dot_dir()), "ui.editor"))
        .or_else(|| env("VISUAL"))
        .or_else(|| env("EDITOR"))
        .unwrap_or_else(|| "vi".into())
}

/// Asks for a commit message in the editor, on a template listing what `paths` (or
/// everything, when empty) changed. `None`: the message was empty, and nothing is to
/// be recorded.
pub fn commit_message(repo: &Repo, paths: &[BString]) -> CliResult<Option<String>> {
    let status = {
        let wc = repo.lock_working_copy()?;
        repo.status(&wc)?
    };
    let mut template = String::from(
        "\n# Write the commit message above. Lines starting with '#' are left out, and an\n# empty message records nothing.\n#\n# Changes to record:\n",
    );
    let mut any = false;
    for c in status
        .changes
        .iter()
        .filter(|c| paths.is_empty() || paths.iter().any(|p| is_under(&c.path, p)))
    {
        template.push_str(&format!("#   {} {}\n", c.kind.letter(), display(&c.path)));
        any = true;
    }
    if !any {
        template.push_str("#   (none)\n");
    }
    let file = repo.dot_dir().join("COMMIT_EDITMSG");
    std::fs::write(&file, template)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", file.display())))?;
    let cmd = editor(repo);
    let ran = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} \"$1\""))
        .arg("sh")
        .arg(&file)
        .status()
        .map_err(|e| CliError::new(format!("cannot run the editor {cmd:?}: {e}")))?;
    if !ran.success() {
        return Err(CliError::new(format!(
            "the editor {cmd:?} failed ({ran}); nothing was recorded"
        ))
        .hint("set LIFEOS_EDITOR, VISUAL or EDITOR, or give the message with -m"));
    }
    let text = std::fs::read_to_string(&file)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", file.display())))?;
    let message: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::trim_end)
        .collect();
    let message = message.join("\n").trim().to_string();
    Ok((!message.is_empty()).then_some(message))
}
