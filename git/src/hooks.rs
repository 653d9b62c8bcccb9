//! `lifeos git hooks install | uninstall | status`: git hooks that bring what git just did
//! into lifeos. A user's own hook is never overwritten: it is moved aside to
//! `<hook>.lifeos-user` and the lifeos hook runs it first, with the same arguments and
//! input, and exits with its status; uninstalling moves it back.

use std::path::{Path, PathBuf};

use crate::{GitError, Result};

/// The hooks lifeos installs.
pub use lifeos_vcs::layout::GIT_HOOKS as HOOKS;

/// The line that marks a hook file as lifeos's.
const MARKER: &str = "# lifeos-hook 1:";

/// Suffix of a user's hook that a lifeos hook chains.
pub const CHAINED_SUFFIX: &str = ".lifeos-user";

/// The state of one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookState {
    /// No hook file.
    Absent,
    /// The user's own hook, not lifeos's.
    User,
    /// lifeos's hook, alone.
    Installed,
    /// lifeos's hook, running the user's before it.
    Chained,
}

impl HookState {
    /// A name for output (`absent`, `user`, `installed`, `chained`).
    pub fn name(self) -> &'static str {
        match self {
            HookState::Absent => "absent",
            HookState::User => "user",
            HookState::Installed => "installed",
            HookState::Chained => "chained",
        }
    }
}

/// The folder git runs hooks from: `core.hooksPath` (relative to the work tree) when set,
/// else `.git/hooks`.
pub fn hooks_dir(git_dir: &Path) -> Result<PathBuf> {
    Ok(hooks_place(git_dir)?.0)
}

/// The hooks folder, and the git folder it must lie in to be this repository's alone.
fn hooks_place(git_dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let git = crate::repo::open_git(git_dir)?;
    let configured = git
        .config_snapshot()
        .trusted_path("core.hooksPath")
        .map_err(|e| GitError::Git {
            what: "reading core.hooksPath",
            reason: e.to_string(),
        })?;
    let dir = match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => git.workdir().unwrap_or(git.git_dir()).join(p),
        None => git.git_dir().join("hooks"),
    };
    Ok((dir, git.common_dir().to_path_buf()))
}

/// The hooks folder lifeos may install into: `core.hooksPath` only when it lies inside
/// this repository's `.git` (unless `force`). A folder elsewhere is shared: a global one
/// (`~/.gitconfig`) would make every repository's commits fire this one's rules, and one
/// inside the work tree is tracked, so the hooks (naming this person's binary and folder)
/// would be committed for everyone.
pub fn install_dir(git_dir: &Path, force: bool) -> Result<PathBuf> {
    let (dir, git) = hooks_place(git_dir)?;
    if force {
        return Ok(dir);
    }
    let real = |p: &Path| {
        // The folder may not exist yet: its nearest existing ancestor decides.
        p.ancestors()
            .find_map(|a| {
                a.canonicalize()
                    .ok()
                    .map(|c| c.join(p.strip_prefix(a).unwrap_or(p)))
            })
            .unwrap_or_else(|| p.to_path_buf())
    };
    if real(&dir).starts_with(real(&git)) {
        return Ok(dir);
    }
    Err(GitError::Hooks {
        reason: format!(
            "core.hooksPath is {}, outside this repository's git folder {}: hooks there run for other repositories too, or are committed with the files; lifeos installs nothing there (`--force` to install there anyway)",
            dir.display(),
            git.display()
        ),
    })
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> GitError + 'a {
    move |e| GitError::Hooks {
        reason: format!("{action} {}: {e}", path.display()),
    }
}

/// Whether the hook at `path` is one lifeos wrote: exactly the script
/// [`script`] makes for the binary and folder it names (a hook of the person's that only
/// copies lifeos's text is theirs, and is set aside, not overwritten).
fn is_ours(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let unquote = |s: &str| -> Option<String> {
        let inner = s.strip_prefix('\'')?.strip_suffix('\'')?;
        Some(inner.replace(r"'\''", "'"))
    };
    let lifeos = text
        .lines()
        .find_map(|l| l.strip_prefix("lifeos="))
        .and_then(unquote);
    let workdir = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"$lifeos\" -C "))
        .and_then(|rest| rest.strip_suffix(" git hook \"$hook\" \"$@\" < \"$input\""))
        .and_then(unquote);
    match (lifeos, workdir) {
        (Some(l), Some(w)) => text == script(Path::new(&l), Path::new(&w)),
        _ => false,
    }
}

/// The state of `hook` in `dir`.
pub fn state(dir: &Path, hook: &str) -> HookState {
    let path = dir.join(hook);
    if path.symlink_metadata().is_err() {
        HookState::Absent
    } else if !is_ours(&path) {
        HookState::User
    } else if dir
        .join(format!("{hook}{CHAINED_SUFFIX}"))
        .symlink_metadata()
        .is_ok()
    {
        HookState::Chained
    } else {
        HookState::Installed
    }
}

/// The hook script: runs the chained user hook (if any) with the same arguments and input,
/// then `lifeos git hook NAME ARGS...` in the lifeos folder; exits with the user hook's
/// status (for `pre-push`, lifeos's too).
fn script(lifeos: &Path, workdir: &Path) -> String {
    let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    format!(
        r#"#!/bin/sh
{MARKER} installed by `lifeos git hooks install`; `lifeos git hooks uninstall` restores what was here.
hook=$(basename "$0")
input=$(mktemp) || exit 1
trap 'rm -f "$input"' EXIT
cat > "$input"
status=0
if [ -x "$0{CHAINED_SUFFIX}" ]; then
    "$0{CHAINED_SUFFIX}" "$@" < "$input" || status=$?
fi
lifeos={lifeos}
if [ -x "$lifeos" ]; then
    "$lifeos" -C {workdir} git hook "$hook" "$@" < "$input"
    lstatus=$?
    if [ "$hook" = pre-push ] && [ "$status" -eq 0 ]; then status=$lstatus; fi
else
    echo "lifeos: $lifeos is gone; run \`lifeos git hooks install\` again (git went on)" >&2
fi
exit $status
"#,
        lifeos = q(lifeos),
        workdir = q(workdir),
    )
}

/// What installing or uninstalling did to each hook.
pub type HookChanges = Vec<(&'static str, HookState, HookState)>;

/// Installs lifeos's hooks into `dir`, chaining any user hook; a hook already installed is
/// left alone. Returns each hook's state before and after.
pub fn install(dir: &Path, lifeos: &Path, workdir: &Path) -> Result<HookChanges> {
    std::fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    let body = script(lifeos, workdir);
    let mut out = Vec::new();
    for &hook in HOOKS {
        let path = dir.join(hook);
        let before = state(dir, hook);
        match before {
            HookState::Installed | HookState::Chained => {
                // Rewritten only if the binary or folder changed.
                if std::fs::read_to_string(&path).ok().as_deref() != Some(body.as_str()) {
                    write_hook(&path, &body)?;
                }
            }
            HookState::User => {
                let aside = dir.join(format!("{hook}{CHAINED_SUFFIX}"));
                if aside.symlink_metadata().is_ok() {
                    return Err(GitError::Hooks {
                        reason: format!(
                            "{} and {} both exist; move one away, then install again",
                            path.display(),
                            aside.display()
                        ),
                    });
                }
                std::fs::rename(&path, &aside).map_err(io_err("moving aside", &path))?;
                write_hook(&path, &body)?;
            }
            HookState::Absent => write_hook(&path, &body)?,
        }
        out.push((hook, before, state(dir, hook)));
    }
    Ok(out)
}

fn write_hook(path: &Path, body: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    lifeos_store::fsutil::write_atomic(path, body.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(io_err("making executable", path))
}

/// Removes lifeos's hooks from `dir`, putting chained user hooks back. A hook that is not
/// lifeos's is left alone.
pub fn uninstall(dir: &Path) -> Result<HookChanges> {
    let mut out = Vec::new();
    for &hook in HOOKS {
        let path = dir.join(hook);
        let before = state(dir, hook);
        match before {
            HookState::Chained => {
                let aside = dir.join(format!("{hook}{CHAINED_SUFFIX}"));
                std::fs::rename(&aside, &path).map_err(io_err("restoring", &aside))?;
            }
            HookState::Installed => {
                std::fs::remove_file(&path).map_err(io_err("removing", &path))?;
            }
            HookState::User | HookState::Absent => {}
        }
        out.push((hook, before, state(dir, hook)));
    }
    Ok(out)
}
