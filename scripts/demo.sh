#!/usr/bin/env bash
# The lifeos demo: builds lifeos, generates a small media library (PNG photos, WAV
# recordings, notes, records, a large binary), records it, edits it, records again,
# shows history and storage, restores the first version elsewhere and checks it byte for
# byte. Installs what it needs first. Usage: ./scripts/demo.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-deps.sh
lifeos_need_packages

echo "==> building lifeos (release)"
cargo build --release --locked --bin lifeos
target="${CARGO_TARGET_DIR:-$PWD/target}"
lifeos="$target/release/lifeos"
here="$PWD"

demo="${1:-$(mktemp -d /tmp/lifeos-demo.XXXXXX)}"
lib="$demo/library"
rm -rf "$lib" "$demo/first-version" "$demo/restored"
mkdir -p "$lib"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

echo "==> generating a media library in $lib"
python3 "$here/scripts/gen_library.py" create "$lib"
cd "$lib"

step lifeos init; "$lifeos" init
step lifeos commit -m "first import"; "$lifeos" commit -m "first import"
cp -a "$lib" "$demo/first-version" && rm -rf "$demo/first-version/.lifeos"
after_first=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
sleep 0.2

echo "==> editing: repaint part of a photo, extend a recording, edit a note, delete a record, add a photo, patch the binary"
python3 "$here/scripts/gen_library.py" edit "$lib"
step lifeos status; "$lifeos" status
step lifeos commit -m "edits"; "$lifeos" commit -m "edits"
step lifeos log; "$lifeos" log
step lifeos diff -r @- -r @ --stat; "$lifeos" diff -r @- -r @ --stat
step lifeos diff -r @- -r @ notes/plan.md records; "$lifeos" diff -r @- -r @ notes/plan.md records
step lifeos diff -r @- -r @ photos/2026-11/img_003.png --visual "$demo/img_003-diff.png"
"$lifeos" diff -r @- -r @ photos/2026-11/img_003.png --visual "$demo/img_003-diff.png"
step lifeos diff -r @- -r @ recordings/memo_1.wav raw/sensor.bin; "$lifeos" diff -r @- -r @ recordings/memo_1.wav raw/sensor.bin
step lifeos ls photos; "$lifeos" ls photos
step lifeos cat notes/plan.md -r @-; "$lifeos" cat notes/plan.md -r @-
step lifeos cat notes/plan.md; "$lifeos" cat notes/plan.md
step lifeos stats; "$lifeos" stats
step lifeos restore --to "$demo/restored" -r @-; "$lifeos" restore --to "$demo/restored" -r @-
step diff -r first-version restored
if diff -r "$demo/first-version" "$demo/restored" >/dev/null; then
  echo "the restored first version is byte-for-byte identical to the original ($(find "$demo/restored" -type f | wc -l) files)"
else
  echo "error: the restored first version differs from the original" >&2
  exit 1
fi

echo "==> search: ingest the library, then ask"
step lifeos ingest; "$lifeos" ingest
step lifeos search "'\"quarterly budget is\"'"; "$lifeos" search '"quarterly budget is"'
step lifeos search budget --path notes/plan.md --all-history; "$lifeos" search budget --path notes/plan.md --all-history
step lifeos search "'\"budget moved\"'" --at "$after_first"; "$lifeos" search '"budget moved"' --at "$after_first"
step lifeos search "'\"budget moved\"'"; "$lifeos" search '"budget moved"'

echo "==> history: branches, time travel, undo"
step lifeos branch create trip; "$lifeos" branch create trip
step lifeos checkout trip; "$lifeos" checkout trip
echo "Packed: passport, camera." > "$lib/notes/trip.md"
step lifeos commit -m "trip notes"; "$lifeos" commit -m "trip notes"
step lifeos checkout main; "$lifeos" checkout main
step lifeos branch list; "$lifeos" branch list
step lifeos cat notes/plan.md --at "$after_first"; "$lifeos" cat notes/plan.md --at "$after_first"
step lifeos log --at "$after_first"; "$lifeos" log --at "$after_first"
step lifeos describe -m "edits: photo, memo, plan, records"; "$lifeos" describe -m "edits: photo, memo, plan, records"
step lifeos op log -n 3; "$lifeos" op log -n 3
step lifeos undo; "$lifeos" undo
step lifeos log -n 1; "$lifeos" log -n 1
step lifeos fsck; "$lifeos" fsck
step lifeos gc; "$lifeos" gc
echo
echo "demo finished; the library is in $lib"
