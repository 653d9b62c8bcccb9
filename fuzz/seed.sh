#!/usr/bin/env bash
# Seeds the fuzz corpora with valid inputs, so that libFuzzer starts past the headers and
# checksums that random bytes almost never satisfy: a small repository is made with the
# lifeos binary, and its packs, pack entries, index layers, objects, stat cache and move
# journal are copied into fuzz/corpus/<target>/ (which git ignores).
# Usage: fuzz/seed.sh [path to lifeos]   (needs python3 and the zstd command)
set -euo pipefail
cd "$(dirname "$0")"
LIFEOS=$(realpath "${1:-../target/debug/lifeos}")
command -v zstd >/dev/null || { echo "seed.sh needs the zstd command (apt-get install zstd)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib=$work/lib
mkdir -p "$lib/notes" "$lib/photos"
export LIFEOS_AUTHOR_NAME=Seed LIFEOS_AUTHOR_EMAIL=seed@example.com
"$LIFEOS" init "$lib" >/dev/null
printf '# Plan\n\nbudget meeting on Friday\n' >"$lib/notes/plan.md"
printf 'caf\xe9\n' >"$lib/notes/caf$(printf '\xe9').txt"
head -c 300000 /dev/urandom >"$lib/photos/big.bin"
ln -s notes/plan.md "$lib/link"
(cd "$lib" && "$LIFEOS" commit -m first >/dev/null)
printf 'changed\n' >>"$lib/notes/plan.md"
(cd "$lib" && "$LIFEOS" commit -m second >/dev/null && "$LIFEOS" branch create b >/dev/null &&
    "$LIFEOS" tag create v1 >/dev/null && "$LIFEOS" checkout -r @- >/dev/null && "$LIFEOS" reindex >/dev/null)
mkdir -p corpus/pack_file corpus/pack_entry corpus/index_layer corpus/objects corpus/text_inputs
cp "$lib"/.lifeos/packs/*.pack corpus/pack_file/
cp "$lib"/.lifeos/index/*.idx corpus/index_layer/
cp "$lib"/.lifeos/wc_state corpus/objects/wc_state
python3 - "$lib/.lifeos/packs" corpus "$work" <<'EOF'
import os, subprocess, sys
packs, corpus, work = sys.argv[1:4]
n = 0
for name in sorted(os.listdir(packs)):
    data = open(os.path.join(packs, name), "rb").read()
    pos = 16
    while pos + 48 <= len(data):
        h = data[pos:pos + 48]
        kind, codec = h[32], h[33]
        if kind == 0 or kind > 7 or h[34:36] != b"\0\0":
            break  # the footer table
        stored = int.from_bytes(h[40:44], "little")
        entry = data[pos:pos + 48 + stored]
        open(os.path.join(corpus, "pack_entry", f"e{n}"), "wb").write(entry)
        raw = entry[48:]
        if codec == 1:
            raw = subprocess.run(["zstd", "-dc"], input=raw, capture_output=True).stdout
        if kind >= 2 and len(raw) < 4096:
            open(os.path.join(corpus, "objects", f"o{n}"), "wb").write(raw)
        n += 1
        pos += 48 + stored
EOF
# The move journal's layout (FORMAT.md 9.5), with a valid checksum.
python3 - corpus/objects/wc_move <<'EOF'
import hashlib, sys
# BLAKE3 is not in Python's standard library; a wrong checksum still seeds the layout.
body = b"LIFEOSMV\x01" + bytes(32) + b"\x01" + bytes(range(32)) + b"\x00"
open(sys.argv[1], "wb").write(body + hashlib.sha256(body).digest()[:16])
EOF
for t in '@-' 'main..b' 'ancestors(@) & files(notes/*)' 'author("Seed") | description(x)' \
    'date(after: 2026-11-01, before: "3 days ago")' '2026-11-01 14:00' 'last monday' '90 minutes ago'; do
    printf '%s' "$t" >"corpus/text_inputs/$(printf '%s' "$t" | sha1sum | cut -c1-12)"
done
# Files read as entities, and schema files.
mkdir -p corpus/entity_files
printf 'BEGIN:VCARD\r\nVERSION:3.0\r\nUID:a\r\nFN:Ann\r\nEMAIL:a@example.org\r\nBDAY:1990-05-17\r\nEND:VCARD\r\n' >corpus/entity_files/vcard
printf 'BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:s\nSUMMARY:Stand-up\nDTSTART:20261210T090000Z\nEND:VEVENT\nEND:VCALENDAR\n' >corpus/entity_files/ics
printf 'title,pages,when,kind\nDune,412,2026-12-10T09:00:00Z,a\n' >corpus/entity_files/csv
printf '{"title":"Dune","n":1,"ok":true}\n' >corpus/entity_files/jsonl
printf '[types.book]\nrequired = ["title"]\nfields.title = "string"\nfields.a = { ref = "person" }\n[[files]]\nglob = "b/*.csv"\ntype = "book"\n' >corpus/entity_files/schema
# Raw git objects (commits, trees, blobs, annotated tags) from the bats-core fixture.
mkdir -p corpus/git_objects
git clone -q --mirror ../tests/fixtures/git/bats-core.bundle "$work/bats.git"
git -C "$work/bats.git" cat-file --batch-check='%(objectname) %(objecttype)' --batch-all-objects |
    awk 'NR % 100 == 0' | while read -r oid type; do
        git -C "$work/bats.git" cat-file "$type" "$oid" >"corpus/git_objects/$oid"
    done
# git's filter protocol: a handshake, a clean request, and a pointer.
mkdir -p corpus/git_filter
pkt() { printf '%04x%s' $((${#1} + 4)) "$1"; }
{ pkt $'git-filter-client\n'; pkt $'version=2\n'; printf 0000
  pkt $'command=clean\n'; pkt $'pathname=a.bin\n'; printf 0000; pkt 'hello'; printf 0000; } \
    >corpus/git_filter/request
printf 'version https://lifeos.dev/spec/pointer/v1\noid blake3:%s\nsize 5\n' \
    "$(printf '%064d' 0)" >corpus/git_filter/pointer
# Deltas (codec 2): git import stores each version of a path against the previous one.
mkdir -p "$work/imported"
"$LIFEOS" init "$work/imported" >/dev/null
"$LIFEOS" -C "$work/imported" git import "$work/bats.git" >/dev/null
python3 - "$work/imported/.lifeos/packs" corpus/pack_entry <<'EOF'
import os, sys
packs, out = sys.argv[1:3]
n = 0
for name in sorted(os.listdir(packs)):
    data = open(os.path.join(packs, name), "rb").read()
    pos = 16
    while pos + 48 <= len(data) and n < 200:
        h = data[pos:pos + 48]
        if h[32] == 0 or h[32] > 9 or h[34:36] != b"\0\0":
            break  # the footer table
        stored = int.from_bytes(h[40:44], "little")
        if (h[33] == 2 and stored < 4096) or (h[32] == 9 and stored < 65536):
            kind = "block" if h[32] == 9 else "delta"
            open(os.path.join(out, f"{kind}{n}"), "wb").write(data[pos:pos + 48 + stored])
            n += 1
        pos += 48 + stored
EOF
# Small packs with blocks (kind 9): a short git history imported.
git init -q -b main "$work/small"
for i in 1 2 3; do
    printf 'version %s\n' "$i" >"$work/small/a.txt"
    git -C "$work/small" add a.txt
    git -C "$work/small" -c user.name=Seed -c user.email=seed@example.com commit -q -m "v$i"
done
"$LIFEOS" init "$work/small-lifeos" >/dev/null
"$LIFEOS" -C "$work/small-lifeos" git import "$work/small" >/dev/null
for p in "$work"/small-lifeos/.lifeos/packs/*.pack; do cp "$p" "corpus/pack_file/blocks-$(basename "$p")"; done
# Tiny recordings for speech_inputs (with ffmpeg, when it is installed).
if command -v ffmpeg >/dev/null; then
    mkdir -p corpus/speech_inputs
    for ext in wav mp3 flac ogg m4a mkv; do
        ffmpeg -loglevel error -y -f lavfi -i "sine=frequency=440:duration=0.05:sample_rate=8000" \
            "$work/tone.$ext" && cp "$work/tone.$ext" "corpus/speech_inputs/tone.$ext"
    done
fi
echo "seeded: $(find corpus -type f | wc -l) files in $(ls corpus | wc -l) corpora" >&2
