#!/usr/bin/env bash
# The git bridge side by side with git itself and git-lfs, in one run:
#   1. import of a real history (bats-core, gtoolkit-phlow: tests/fixtures/git) with all
#      refs, a no-op re-import, an export to an empty bare repository against
#      `git fast-export --all | git fast-import`, and lifeos's stored size against the
#      bundle (git's own packed size);
#   2. the large-file filter against git-lfs: a CSV appended to N times and a large file
#      with two-byte edits, bytes stored after all versions; a checkout of 1,000 filtered
#      files.
# Medians of RUNS runs where a step can be repeated. Prints a Markdown report, also saved
# to $PEER_WORKDIR/git-results.md.
#
# Environment:
#   LIFEOS_BIN    lifeos binary (default: cargo build --release --bin lifeos)
#   PEER_WORKDIR  scratch directory, wiped at start (default /tmp/lifeos-peer-git)
#   RUNS          repetitions of the repeatable steps (default 3)
#   PEER_SCALE    multiplier for the filter workload's sizes (default 1: a 200 MB CSV
#                 appended to 20 times, a 1 GiB file edited 10 times; 0.05 for a smoke run)
set -Eeuo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)
WORK=${PEER_WORKDIR:-/tmp/lifeos-peer-git}
RUNS=${RUNS:-3}
SCALE=${PEER_SCALE:-1}
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
GIT_ID=(-c user.name=Bench -c user.email=bench@example.com)

log() { printf '[git-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'log "ERROR: command failed at line $LINENO"' ERR

# shellcheck source=lib.sh
. "$SCRIPT_DIR/lib.sh"
need_packages git git-lfs python3 time
need_lifeos
LIFEOS=$LIFEOS_BIN
rm -rf "$WORK" && mkdir -p "$WORK"
OUT=$WORK/git-results.md
: >"$OUT"
say() { printf '%s\n' "$*" | tee -a "$OUT"; }

# Wall time of a command in seconds (3 decimals); its output goes to $WORK/last.log.
secs() {
    local s e
    s=$(date +%s%N)
    "$@" >"$WORK/last.log" 2>&1 || { cat "$WORK/last.log" >&2; die "failed: $*"; }
    e=$(date +%s%N)
    python3 -c "print(f'{($e-$s)/1e9:.3f}')"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
bytes() { du -sb "$1" | cut -f1; }
mib() { python3 -c "print(f'{$1/1048576:.1f}')"; }

say "# git bridge peer run, $(date -u +%Y-%m-%d) ($(nproc) cores, $(git --version), $(git lfs version | head -1), RUNS=$RUNS, PEER_SCALE=$SCALE)"
say ""
say "## Import, export and storage"
say ""
say "| history | commits | import s (median) | commits/s | no-op re-import s | lifeos export s | git fast-export \\| fast-import s | export ratio | lifeos stored MiB | bundle MiB | storage ratio |"
say "|---|---|---|---|---|---|---|---|---|---|---|"
for name in bats-core gtoolkit-phlow; do
    bundle=$REPO_ROOT/tests/fixtures/git/$name.bundle
    [[ -f $bundle ]] || die "missing $bundle"
    src=$WORK/$name.git
    git clone -q --mirror "$bundle" "$src"
    commits=$(git -C "$src" rev-list --all | wc -l)
    imports=() noops=() exports=() fasts=()
    for r in $(seq "$RUNS"); do
        l=$WORK/$name-lifeos-$r
        mkdir -p "$l" && "$LIFEOS" -C "$l" init >/dev/null
        imports+=("$(secs "$LIFEOS" -C "$l" git import "$src")")
        noops+=("$(secs "$LIFEOS" -C "$l" git import "$src")")
        grep -q "nothing new" "$WORK/last.log" || die "re-import of $name was not a no-op"
        exports+=("$(secs "$LIFEOS" -C "$l" git export "$WORK/$name-export-$r.git")")
        [[ $(git -C "$WORK/$name-export-$r.git" rev-list --all | sort | sha1sum) == $(git -C "$src" rev-list --all | sort | sha1sum) ]] \
            || die "export of $name does not give back the same commits"
        git init -q --bare -b main "$WORK/$name-fast-$r.git"
        fasts+=("$(secs bash -c "git -C '$src' fast-export --all --signed-tags=verbatim --reencode=no | git -C '$WORK/$name-fast-$r.git' fast-import --quiet")")
    done
    imp=$(median "${imports[@]}") noop=$(median "${noops[@]}") exp=$(median "${exports[@]}") fast=$(median "${fasts[@]}")
    stored=$("$LIFEOS" -C "$WORK/$name-lifeos-1" stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["stored_bytes"])')
    bsize=$(stat -c %s "$bundle")
    say "| $name | $commits | $imp | $(python3 -c "print(round($commits/$imp))") | $noop | $exp | $fast | $(ratio "$exp" "$fast") | $(mib "$stored") | $(mib "$bsize") | $(ratio "$stored" "$bsize") |"
done
say ""

# ------------------------------------------------------------ filter vs git-lfs ----
log "filter workload (PEER_SCALE=$SCALE)"
GEN=$WORK/gen.py
cat >"$GEN" <<'PY'
import os, random, sys
cmd, path = sys.argv[1], sys.argv[2]
if cmd == "csv":                      # csv PATH MB SEED: a CSV of about MB megabytes
    mb, rng = float(sys.argv[3]), random.Random(int(sys.argv[4]))
    with open(path, "w") as f:
        n, target = 0, int(mb * 1e6)
        while n < target:
            row = f"{rng.randrange(10**9)},{rng.random():.6f},item-{rng.randrange(10**6)},{rng.choice(['open','done','late'])}\n"
            f.write(row); n += len(row)
elif cmd == "append":                 # append PATH ROWS SEED
    rows, rng = int(sys.argv[3]), random.Random(int(sys.argv[4]))
    with open(path, "a") as f:
        for _ in range(rows):
            f.write(f"{rng.randrange(10**9)},{rng.random():.6f},item-{rng.randrange(10**6)},new\n")
elif cmd == "noise":                  # noise PATH BYTES SEED: incompressible bytes
    size, rng = int(sys.argv[3]), random.Random(int(sys.argv[4]))
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 24); f.write(rng.randbytes(n)); left -= n
elif cmd == "poke":                   # poke PATH SEED: two bytes changed somewhere
    rng = random.Random(int(sys.argv[3]))
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(rng.randrange(size - 2)); f.write(rng.randbytes(2))
elif cmd == "many":                   # many DIR COUNT BYTES SEED
    count, size, rng = int(sys.argv[3]), int(sys.argv[4]), random.Random(int(sys.argv[5]))
    os.makedirs(path, exist_ok=True)
    for i in range(count):
        with open(os.path.join(path, f"f{i:04}.bin"), "wb") as f:
            f.write(rng.randbytes(size))
PY
CSV_MB=$(python3 -c "print(200*$SCALE)")
BIG_BYTES=$(python3 -c "print(int((1<<30)*$SCALE))")
APPENDS=20 POKES=10

# A git work tree set up for one tool: lifeos's filter or git-lfs, on *.csv and *.bin.
setup() {
    local tool=$1 dir=$2
    mkdir -p "$dir"
    git -C "$dir" init -q -b main
    if [[ $tool == lifeos ]]; then
        "$LIFEOS" -C "$dir" init >/dev/null
        "$LIFEOS" -C "$dir" git filter install --pattern '*.csv' --pattern '*.bin' >/dev/null
    else
        git -C "$dir" lfs install --local >/dev/null
        (cd "$dir" && git lfs track '*.csv' '*.bin' >/dev/null)
    fi
    git -C "$dir" add .gitattributes
    git -C "$dir" "${GIT_ID[@]}" commit -qm attributes
}
commit_all() { git -C "$1" add -A && git -C "$1" "${GIT_ID[@]}" commit -qm "$2"; }
store_bytes() {
    # lifeos keeps its store in .git/lifeos in a folder git shares (docs/SECURITY.md).
    if [[ $1 == lifeos ]]; then bytes "$2/.git/lifeos"; else bytes "$2/.git/lfs"; fi
}

say "## Large-file filter against git-lfs"
say ""
say "| workload | tool | versions | time s | stored MiB | ratio to git-lfs |"
say "|---|---|---|---|---|---|"
declare -A STORED
for work in csv big; do
    for tool in git-lfs lifeos; do
        d=$WORK/filter-$work-$tool
        setup "$tool" "$d"
        s=$(date +%s%N)
        if [[ $work == csv ]]; then
            python3 "$GEN" csv "$d/table.csv" "$CSV_MB" 1
            commit_all "$d" v0
            for i in $(seq $APPENDS); do
                python3 "$GEN" append "$d/table.csv" 1000 "$i"
                commit_all "$d" "append $i"
            done
            versions=$((APPENDS + 1))
        else
            python3 "$GEN" noise "$d/big.bin" "$BIG_BYTES" 2
            commit_all "$d" v0
            for i in $(seq $POKES); do
                python3 "$GEN" poke "$d/big.bin" "$i"
                commit_all "$d" "poke $i"
            done
            versions=$((POKES + 1))
        fi
        e=$(date +%s%N)
        STORED[$work-$tool]=$(store_bytes "$tool" "$d")
        t=$(python3 -c "print(f'{($e-$s)/1e9:.1f}')")
        say "| $work | $tool | $versions | $t | $(mib "${STORED[$work-$tool]}") | $(ratio "${STORED[$work-$tool]}" "${STORED[$work-git-lfs]}") |"
        # The oldest version comes back byte for byte.
        git -C "$d" checkout -q HEAD~$((versions - 1)) -- .
        git -C "$d" checkout -q HEAD -- .
        [[ -z $(git -C "$d" status --porcelain) ]] || die "$tool: work tree not clean after checkouts"
    done
    rm -rf "$WORK"/filter-$work-*
done
say ""

say "| 1,000 filtered files of 64 KiB | tool | add + commit s | checkout s (median of $RUNS) |"
say "|---|---|---|---|"
for tool in lifeos git-lfs; do
    d=$WORK/many-$tool
    setup "$tool" "$d"
    python3 "$GEN" many "$d/files" 1000 65536 3
    add=$(secs commit_all "$d" files)
    sums=$(cd "$d" && sha256sum files/* | sha256sum)
    checkouts=()
    for r in $(seq "$RUNS"); do
        rm -rf "$d/files"
        checkouts+=("$(secs git -C "$d" checkout -- files)")
        [[ $(cd "$d" && sha256sum files/* | sha256sum) == "$sums" ]] || die "$tool: checkout of the files differs"
    done
    say "| | $tool | $add | $(median "${checkouts[@]}") |"
done
log "report saved to $OUT"
