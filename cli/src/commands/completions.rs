//! `lifeos completions SHELL`: a shell's completion script, generated from the same command
//! definitions that parse the arguments, so they never drift apart.

use crate::context::Context;
use crate::error::CliResult;
use crate::output::write_stdout;
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

impl Verb for CompletionsArgs {
    fn policy(&self) -> Policy {
        Policy {
            answers: true,
            ..Policy::OUTSIDE
        }
    }

    fn run(self, _ctx: &Context) -> CliResult<u8> {
        completions(self.shell)
    }
}

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
fn completions(shell: clap_complete::Shell) -> CliResult<u8> {
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
