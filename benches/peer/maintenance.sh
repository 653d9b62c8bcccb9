#!/usr/bin/env bash
# Memory of the whole-repository commands at many chunks: a repository whose store cuts
# chunks of 64 B to 1 KiB (256 B on average) is given FILES files of random bytes, CHUNKS
# chunks in all (default 1,000 files, 10,000,000 chunks, about 2.6 GB), committed once;
# then `stats`, `fsck`, `gc --dry-run` and `gc` are run once each under GNU time. Prints
# a Markdown table of wall time and peak RSS, also saved to
# $PEER_WORKDIR/maintenance-results.md.
#
# Environment:
#   LIFEOS_BIN    lifeos binary (default: cargo build --release --bin lifeos)
#   PEER_WORKDIR  scratch directory, wiped at start and at the end
#                 (default /tmp/lifeos-peer-maintenance)
#   CHUNKS, FILES (default 10000000, 1000)
#   KEEP          set to keep the repository in $PEER_WORKDIR/repo
set -Eeuo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)
WORK=${PEER_WORKDIR:-/tmp/lifeos-peer-maintenance}
CHUNKS=${CHUNKS:-10000000}
FILES=${FILES:-1000}

log() { printf '[maintenance-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
trap 'log "ERROR: command failed at line $LINENO"' ERR

# shellcheck source=lib.sh
. "$SCRIPT_DIR/lib.sh"
need_packages python3 time
need_lifeos

rm -rf "$WORK"
mkdir -p "$WORK/repo"
cd "$WORK/repo"
"$LIFEOS_BIN" init -q .
# Small chunks, so that the chunk count is reached with a few GB.
python3 - .lifeos/config <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
for key, value in (("min_size", 64), ("avg_size", 256), ("max_size", 1024)):
    text = re.sub(rf"^{key} = \d+$", f"{key} = {value}", text, flags=re.M)
open(path, "w").write(text)
PY
log "writing $FILES files, $((CHUNKS * 256)) bytes"
python3 - . "$FILES" "$((CHUNKS * 256))" <<'PY'
import os, random, sys
root, files, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
for f in range(files):
    d = os.path.join(root, f"d{f // 100:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{f:05}.bin"), "wb") as fh:
        fh.write(rng.randbytes(total // files))
PY

# Runs "$@" under GNU time; prints "seconds kilobytes".
measure() {
    /usr/bin/time -f '%e %M' -o "$WORK/time.out" "$@" >"$WORK/out.txt" 2>&1 || {
        cat "$WORK/out.txt" >&2
        return 1
    }
    tail -n 1 "$WORK/time.out"
}
declare -A R
log "commit"
R[commit]=$(measure "$LIFEOS_BIN" commit -q -m first)
stored=$("$LIFEOS_BIN" stats --json | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["chunks"], s["objects"])')
log "stored chunks and objects: $stored"
for cmd in stats fsck "gc --dry-run" gc; do
    log "$cmd"
    # shellcheck disable=SC2086
    R[$cmd]=$(measure "$LIFEOS_BIN" $cmd)
done

{
    echo "| ${stored% *} chunks, ${stored#* } other objects | s | peak RSS MB |"
    echo "|---|---|---|"
    for k in commit stats fsck "gc --dry-run" gc; do
        printf '| %s | %.1f | %.0f |\n' "lifeos $k" "${R[$k]% *}" "$(awk -v m="${R[$k]#* }" 'BEGIN { print m / 1024 }')"
    done
} | tee "$WORK/maintenance-results.md"
cd /
[[ -n ${KEEP:-} ]] || rm -rf "$WORK/repo"
