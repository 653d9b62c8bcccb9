#!/usr/bin/env bash
# A working folder of many small files, lifeos against git in one run: FOLDERS folders of
# FILES_PER small files each (default 400 x 250 = 100,000), committed once by each tool;
# then, RUNS times each, alternating: status with nothing changed, a commit with nothing
# changed, status with one 2-byte edit and its commit. git runs with default settings, and
# its status also in a second copy with core.untrackedCache=true. Then lifeos's commands
# again while `lifeos watch --index-only` runs (git has no inotify monitor of its own on
# Linux), and status and commit once after it stops.
# Wall time and peak RSS (GNU time) as medians; prints a Markdown table, also saved to $PEER_WORKDIR/folder-results.md.
#
# Environment:
#   LIFEOS_BIN    lifeos binary (default: cargo build --release --bin lifeos)
#   PEER_WORKDIR  scratch directory, wiped at start (default /tmp/lifeos-peer-folder)
#   FOLDERS, FILES_PER, RUNS (default 400, 250, 5)
set -Eeuo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)
WORK=${PEER_WORKDIR:-/tmp/lifeos-peer-folder}
FOLDERS=${FOLDERS:-400}
FILES_PER=${FILES_PER:-250}
RUNS=${RUNS:-5}
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
GIT_ID=(-c user.name=Bench -c user.email=bench@example.com)

log() { printf '[folder-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
trap 'log "ERROR: command failed at line $LINENO"' ERR

# shellcheck source=lib.sh
. "$SCRIPT_DIR/lib.sh"
need_packages git python3 time
need_lifeos

rm -rf "$WORK"
mkdir -p "$WORK/lifeos" "$WORK/git" "$WORK/git-uc"
log "writing $FOLDERS x $FILES_PER files twice"
for d in lifeos git git-uc; do
    python3 - "$WORK/$d" "$FOLDERS" "$FILES_PER" <<'PY'
import os, sys
root, folders, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(folders):
    os.mkdir(os.path.join(root, f"d{d:04}"))
    for f in range(per):
        with open(os.path.join(root, f"d{d:04}", f"f{f:04}.txt"), "w") as fh:
            fh.write(f"{d} {f}\n")
PY
done
# Timestamps must be older than the racy window of either tool before the first run.
sleep 3

# Runs "$@" in $1 under GNU time; prints "seconds kilobytes" (the wall time to the
# millisecond from the clock around it, GNU time's has hundredths).
measure() {
    local dir=$1; shift
    local t0 t1
    t0=$(date +%s%N)
    (cd "$dir" && /usr/bin/time -f '%M' -o "$WORK/time.out" "$@" >/dev/null 2>&1)
    t1=$(date +%s%N)
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') $(tail -n 1 "$WORK/time.out")"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A T M
record() { # name, "seconds kilobytes"
    T[$1]+="${2% *} "
    M[$1]+="${2#* } "
}
log "first commit"
record "lifeos first commit" "$(measure "$WORK/lifeos" sh -c "'$LIFEOS_BIN' init -q . && '$LIFEOS_BIN' commit -q -m first")"
record "git first commit" "$(measure "$WORK/git" sh -c "git init -q . && git add -A && git ${GIT_ID[*]} commit -q -m first")"
# A copy of its own for the untracked cache: git keeps the cache in the index once a
# command made it, and every later `git status` there would use it.
(cd "$WORK/git-uc" && git init -q . && git config core.untrackedCache true && git add -A && git "${GIT_ID[@]}" commit -q -m first)
sleep 3
for ((i = 0; i < RUNS; i++)); do
    log "round $((i + 1)) of $RUNS"
    record "lifeos status" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" status)"
    record "git status" "$(measure "$WORK/git" git status)"
    record "git status (untrackedCache)" "$(measure "$WORK/git-uc" git status)"
    record "lifeos commit, nothing changed" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" commit -q -m none)"
    record "git commit, nothing changed" "$(measure "$WORK/git" sh -c "git add -A && git ${GIT_ID[*]} commit -q -m none || true")"
    echo "$i" >>"$WORK/lifeos/d0005/f0005.txt"
    echo "$i" >>"$WORK/git/d0005/f0005.txt"
    record "lifeos status, one file changed" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" status)"
    record "git status, one file changed" "$(measure "$WORK/git" git status)"
    record "lifeos commit, one file" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" commit -q -m one)"
    record "git commit, one file" "$(measure "$WORK/git" sh -c "git add -A && git ${GIT_ID[*]} commit -q -m one")"
done

# The same commands while `lifeos watch --index-only` keeps track of what changes: the
# first status after it starts reads the whole folder and saves its token; the rest ask.
log "starting lifeos watch --index-only"
(cd "$WORK/lifeos" && exec "$LIFEOS_BIN" watch --index-only >"$WORK/monitor.log" 2>&1) &
MONITOR=$!
trap 'kill "$MONITOR" 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q watching "$WORK/monitor.log" 2>/dev/null && break; sleep 0.1; done
(cd "$WORK/lifeos" && "$LIFEOS_BIN" status >/dev/null)
for ((i = 0; i < RUNS; i++)); do
    log "round $((i + 1)) of $RUNS with the monitor"
    record "lifeos status (watch --index-only)" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" status)"
    record "lifeos commit, nothing changed (watch --index-only)" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" commit -q -m none)"
    echo "w$i" >>"$WORK/lifeos/d0005/f0005.txt"
    record "lifeos commit, one file (watch --index-only)" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" commit -q -m one)"
done
kill "$MONITOR"
wait "$MONITOR" || true
# The commits through the monitor did not save the stat cache: the first status and
# commit after it stops compare the folder through a cache saved for an older tree.
log "after the monitor stopped"
record "lifeos status, after the monitor stopped" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" status)"
record "lifeos commit, after the monitor stopped" "$(measure "$WORK/lifeos" "$LIFEOS_BIN" commit -q -m after)"

{
    echo "| $((FOLDERS * FILES_PER)) files | median s | median peak RSS MB | runs |"
    echo "|---|---|---|---|"
    for k in "lifeos first commit" "git first commit" "lifeos status" "git status" \
        "git status (untrackedCache)" "lifeos commit, nothing changed" \
        "git commit, nothing changed" "lifeos status, one file changed" \
        "git status, one file changed" "lifeos commit, one file" "git commit, one file" \
        "lifeos status (watch --index-only)" "lifeos commit, nothing changed (watch --index-only)" \
        "lifeos commit, one file (watch --index-only)" "lifeos status, after the monitor stopped" \
        "lifeos commit, after the monitor stopped"; do
        t=$(tr ' ' '\n' <<<"${T[$k]}" | grep . | median)
        m=$(tr ' ' '\n' <<<"${M[$k]}" | grep . | median)
        n=$(wc -w <<<"${T[$k]}")
        printf '| %s | %.3f | %.0f | %d |\n' "$k" "$t" "$(awk -v m="$m" 'BEGIN { print m / 1024 }')" "$n"
    done
} | tee "$WORK/folder-results.md"
