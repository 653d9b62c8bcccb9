//! `lifeos completions SHELL` and `lifeos man`: what a shell and `man` need, generated from
//! the same command definitions that parse the arguments, so they never drift apart.

use std::io::Write;
use std::path::Path;

use crate::error::{CliError, CliResult};

/// Added to bash's script: branch and tag names where a revision or a ref is expected,
/// asked of the `lifeos` being completed (the generated part completes commands and
/// options).
const BASH_REFS: &str = r#"
# Branch and tag names, from the repository of the folder being completed in.
_lifeos_refs() {
    local what
    for what in branch tag; do
        "${COMP_WORDS[0]}" "$what" list --json 2>/dev/null \
            | grep -o '"name": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'
    done
}

_lifeos_with_refs() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        -r|--revision|checkout|merge|set|delete|rename)
            COMPREPLY=( $(compgen -W "$(_lifeos_refs)" -- "$cur") )
            return 0
            ;;
    esac
    _lifeos "$@"
}

complete -F _lifeos_with_refs -o bashdefault -o default lifeos
"#;

/// `lifeos completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> CliResult<u8> {
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut crate::examples::command(),
        "lifeos",
        &mut script,
    );
    if shell == clap_complete::Shell::Bash {
        script.extend_from_slice(BASH_REFS.as_bytes());
    }
    write_stdout(&script)?;
    Ok(0)
}

/// `lifeos man [--dir DIR]`: the top page on stdout, or every command's page in DIR.
pub fn man(dir: Option<&Path>) -> CliResult<u8> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(crate::examples::command(), dir))
                .map_err(|e| {
                    CliError::new(format!(
                        "cannot write the manual pages in {}: {e}",
                        dir.display()
                    ))
                })?;
            println!(
                "wrote the manual pages in {} (read them with `man lifeos`, `man lifeos-commit`, ...)",
                dir.display()
            );
            Ok(0)
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(crate::examples::command())
                .render(&mut page)
                .map_err(|e| CliError::new(format!("cannot render the manual page: {e}")))?;
            write_stdout(&page)?;
            Ok(0)
        }
    }
}

/// Writes `bytes` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn write_stdout(bytes: &[u8]) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::new(format!("writing to stdout: {e}"))),
    }
}
