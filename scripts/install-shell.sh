#!/usr/bin/env bash
# Installs lifeos's shell completions (bash, zsh, fish) and manual pages for the current
# user, under $XDG_DATA_HOME (default ~/.local/share). Run it after ./scripts/demo.sh or
# a `cargo build --release` if you want them; nothing else needs them.
#
# Environment: LIFEOS_BIN (default: target/release/lifeos beside this script, else
# `lifeos` on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LIFEOS_BIN:-}
if [ -z "$bin" ]; then
  if [ -x "$here/target/release/lifeos" ]; then bin=$here/target/release/lifeos
  else bin=$(command -v lifeos || true); fi
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "error: no lifeos binary; build it first (cargo build --release) or set LIFEOS_BIN" >&2
  exit 1
fi
data=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$data/bash-completion/completions" "$data/zsh/site-functions" \
  "$data/fish/vendor_completions.d" "$data/man/man1"
"$bin" completions bash > "$data/bash-completion/completions/lifeos"
"$bin" completions zsh > "$data/zsh/site-functions/_lifeos"
"$bin" completions fish > "$data/fish/vendor_completions.d/lifeos.fish"
"$bin" -q man --dir "$data/man/man1"
echo "installed completions for bash, zsh and fish and $(ls "$data/man/man1" | grep -c '^lifeos') manual pages under $data"
echo "zsh reads them once $data/zsh/site-functions is in fpath; man finds the pages through ~/.local/bin on PATH, or add $data/man to MANPATH"
