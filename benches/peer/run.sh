#!/usr/bin/env bash
# Side-by-side peer benchmark: lifeos vs git, git-lfs, restic and borg.
#
# Every tool gets the identical, deterministically generated ~600 MiB library,
# takes a first snapshot, then five rounds of (edit, snapshot), then restores
# version 1, which is checked byte for byte against the original.
# See README.md next to this file.
#
# Environment:
#   LIFEOS_BIN    lifeos binary to use (default: cargo build --release --bin lifeos)
#   PEER_WORKDIR  scratch directory, wiped at start (default /tmp/lifeos-peer)
#   RUNS          repetitions per tool, medians are reported (default 1)
#   TOOLS         tools to run (default "lifeos git git-lfs restic borg")
#   PEER_SCALE    multiplier for the big file sizes, for smoke tests (default 1)
set -Eeuo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)

WORK=${PEER_WORKDIR:-/tmp/lifeos-peer}
[[ $WORK == /* ]] || WORK=$PWD/$WORK
RUNS=${RUNS:-1}
TOOLS=${TOOLS:-"lifeos git git-lfs restic borg"}
export PEER_SCALE=${PEER_SCALE:-1}

ROUNDS=5                                   # edit rounds -> 1 + ROUNDS versions
LIFEOS_V1_REV=@$(printf -- '-%.0s' $(seq "$ROUNDS"))   # "@-----": v1 seen from v6

DATA=$WORK/data           # the library every tool snapshots (git repos live here)
REPO=$WORK/repo           # restic / borg repository
OUT=$WORK/restore         # restore target for version 1
GEN=$WORK/peer_gen.py     # generator / editor / baseline / report (written below)
RAW=$WORK/raw.tsv         # tool, run, metric, value
META=$WORK/meta.tsv       # key, value
REF_SUMS=$WORK/v1.sha256  # checksum list of version 1
RESULTS=$WORK/results.md

# Per tool-run state, set by run_tool.
TOOL= RUN= RUN_DIR= LOG= TIMEFILE= STEP=0

# Keep the tools away from user/system configuration and caches.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR=$WORK/cache/restic
export BORG_PASSPHRASE= BORG_BASE_DIR=$WORK/cache/borg
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_RELOCATED_REPO_ACCESS_IS_OK=yes

log() { printf '[peer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

on_error() {
    ((BASH_SUBSHELL == 0)) || return 0
    log "ERROR: command failed at line $1 (tool: ${TOOL:-none})"
    if [[ -n $LOG && -s $LOG ]]; then
        log "last lines of $LOG:"
        tail -n 20 "$LOG" >&2
    fi
}
trap 'on_error $LINENO' ERR

# ---------------------------------------------------------------- setup ----

install_deps() {
    local -a wanted=("python3:python3" "/usr/bin/time:time") missing=()
    local tool entry
    for tool in $TOOLS; do
        case $tool in
        lifeos) ;;
        git) wanted+=("git:git") ;;
        git-lfs) wanted+=("git:git" "git-lfs:git-lfs") ;;
        restic) wanted+=("restic:restic") ;;
        borg) wanted+=("borg:borgbackup") ;;
        *) die "unknown tool '$tool' (known: lifeos git git-lfs restic borg)" ;;
        esac
    done
    for entry in "${wanted[@]}"; do
        command -v "${entry%%:*}" >/dev/null 2>&1 || missing+=("${entry##*:}")
    done
    if ((${#missing[@]})); then
        mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
        ((EUID == 0)) || die "missing packages (${missing[*]}); run as root or install them"
        log "installing: ${missing[*]}"
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
    fi
    python3 -c 'import random; random.Random(0).randbytes' 2>/dev/null ||
        die "python3 >= 3.9 is required (random.randbytes)"
}

find_lifeos() {
    local bin target
    if [[ -n ${LIFEOS_BIN:-} ]]; then
        bin=$(command -v "$LIFEOS_BIN") || die "LIFEOS_BIN=$LIFEOS_BIN is not executable"
    else
        command -v cargo >/dev/null || die "cargo not found; build lifeos yourself and set LIFEOS_BIN"
        log "building lifeos: cargo build --release --bin lifeos"
        (cd "$REPO_ROOT" && cargo build --release --bin lifeos) >&2
        target=${CARGO_TARGET_DIR:-target}
        [[ $target == /* ]] || target=$REPO_ROOT/$target
        bin=$target/release/lifeos
    fi
    LIFEOS=$(readlink -f -- "$bin")
    [[ -x $LIFEOS ]] || die "lifeos binary not found at $bin"
    log "lifeos binary: $LIFEOS"
}

prepare_workdir() {
    if [[ -e $WORK ]]; then
        if [[ -n $(ls -A -- "$WORK") && ! -e $WORK/.lifeos-peer-workdir ]]; then
            die "refusing to wipe $WORK: not empty and not created by this script"
        fi
        rm -rf -- "$WORK"
    fi
    mkdir -p "$WORK/state" "$WORK/logs" "$WORK/cache"
    touch "$WORK/.lifeos-peer-workdir"
    : >"$RAW"
    : >"$META"
    write_generator
}

# ------------------------------------------------------------- measuring ----

# timed CMD...: sync, then run CMD under /usr/bin/time, appending
# "wall_seconds peak_rss_kib" to $TIMEFILE. CMD's output goes to $LOG.
# A step may call timed more than once; measure() sums seconds, maxes RSS.
timed() {
    sync
    /usr/bin/time -f '%e %M' -a -o "$TIMEFILE" "$@" >>"$LOG" 2>&1
}

record() { printf '%s\t%s\t%s\t%s\n' "$TOOL" "$RUN" "$1" "$2" >>"$RAW"; }
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }

# measure METRIC FUNC ARGS...: run one step and record its time and peak RSS.
measure() {
    local metric=$1 secs= rss=
    shift
    STEP=$((STEP + 1))
    TIMEFILE=$RUN_DIR/$STEP.$metric.time
    : >"$TIMEFILE"
    "$@"
    # GNU time writes "Command exited with non-zero status N" before the figures.
    read -r secs rss < <(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ && $2 ~ /^[0-9]+$/ {
        s += $1; if ($2 > m) m = $2; n++ } END { if (n) printf "%.2f %d\n", s, m }' "$TIMEFILE") || true
    [[ -n $rss ]] || die "$* recorded no timing"
    record "$metric" "$secs"
    record rss_kib "$rss"
    log "  $TOOL $metric: ${secs}s, peak RSS $((rss / 1024)) MiB"
}

# Checksum list of a tree, metadata directories of the tools excluded.
checksum_tree() (
    cd "$1"
    find . -type f ! -path './.git/*' ! -path './.lifeos/*' ! -path ./.gitattributes -print0 |
        LC_ALL=C sort -z | xargs -0 -r sha256sum
)

# The folder in which a restore into $1 left the library: restic keeps absolute paths
# below its --target.
restored_library() {
    if [[ -d $1$DATA ]]; then echo "$1$DATA"; else echo "$1"; fi
}

verify_restore() {
    checksum_tree "$(restored_library "$OUT")" >"$RUN_DIR/restored.sha256"
    if cmp -s "$RUN_DIR/restored.sha256" "$REF_SUMS"; then
        record restore_ok 1
        log "  $TOOL restore of v1 verified"
    else
        record restore_ok 0
        log "  $TOOL restore of v1 MISMATCH (diff in $RUN_DIR/restore.diff)"
        diff "$REF_SUMS" "$RUN_DIR/restored.sha256" >"$RUN_DIR/restore.diff" || true
    fi
}

# Baseline: write + fsync as many bytes as lifeos stored for version 1.
fsync_baseline() {
    local bytes secs
    bytes=$(lifeos_repo_bytes)
    sync
    secs=$(python3 "$GEN" fsync "$WORK/fsync-baseline.bin" "$bytes")
    record fsync_bytes "$bytes"
    record fsync_s "$secs"
    log "  baseline write+fsync of $bytes bytes: ${secs}s"
}

# ----------------------------------------------------------------- tools ----
# Common interface, "-" in the tool name becomes "_":
#   <tool>_init              create an empty repository for $DATA
#   <tool>_snapshot N        snapshot $DATA as version N (the measured part via timed)
#   <tool>_restore_v1 DIR    restore version 1 into the empty directory DIR (timed)
#   <tool>_repo_bytes        print the repository size in bytes

GIT_COMMIT=(git -c user.name=peer-bench -c user.email=peer-bench@localhost -c commit.gpgsign=false commit -q)

# lifeos: repository in $DATA/.lifeos, commands run inside $DATA.
lifeos_init() { "$LIFEOS" init "$DATA" >>"$LOG" 2>&1; }
lifeos_snapshot() (
    cd "$DATA"
    timed "$LIFEOS" commit -m "v$1"
)
lifeos_restore_v1() (
    cd "$DATA"
    timed "$LIFEOS" restore --to "$1" -r "$LIFEOS_V1_REV"
)
lifeos_repo_bytes() { du -sb "$DATA/.lifeos" | cut -f1; }
# Snapshot with nothing changed; lifeos may exit 0 or 1 ("nothing to commit").
lifeos_noop() (
    cd "$DATA"
    rc=0
    timed "$LIFEOS" commit -m noop || rc=$?
    echo "$rc" >"$RUN_DIR/noop.rc"
    ((rc <= 1))
)

# git: repository is $DATA/.git; no git gc is run.
git_init() { git init -q "$DATA" >>"$LOG" 2>&1; }
git_snapshot() {
    timed bash -c 'cd "$1" && shift && git add -A && "$@"' _ "$DATA" "${GIT_COMMIT[@]}" -m "v$1"
    if (($1 == 1)); then git -C "$DATA" rev-parse HEAD >"$RUN_DIR/v1.rev"; fi
}
git_restore_v1() {
    timed bash -o pipefail -c 'git -C "$1" archive --format=tar "$2" | tar -x -C "$3"' \
        _ "$DATA" "$(<"$RUN_DIR/v1.rev")" "$1"
}
git_repo_bytes() { du -sb "$DATA/.git" | cut -f1; }

# git-lfs: like git, media tracked by LFS (objects in $DATA/.git/lfs).
git_lfs_init() {
    {
        git init -q "$DATA"
        git -C "$DATA" lfs install --local
        (cd "$DATA" && git lfs track '*.mp4' '*.jpg' '*.bin')
        git -C "$DATA" add .gitattributes
        (cd "$DATA" && "${GIT_COMMIT[@]}" -m 'track media with git-lfs')
    } >>"$LOG" 2>&1
}
git_lfs_snapshot() { git_snapshot "$@"; }
# Check out v1 into DIR through a throw-away index so the LFS smudge filter
# (reading $DATA/.git/lfs/objects) produces the real file contents.
git_lfs_restore_v1() (
    cd "$1"
    timed env GIT_INDEX_FILE="$RUN_DIR/restore.index" \
        git --git-dir="$DATA/.git" --work-tree="$1" checkout "$(<"$RUN_DIR/v1.rev")" -- .
)
git_lfs_repo_bytes() { git_repo_bytes; }

# restic: repository in $REPO, backups taken from inside $DATA.
restic_init() { restic -r "$REPO" init >>"$LOG" 2>&1; }
restic_snapshot() (
    cd "$DATA"
    timed restic -r "$REPO" backup --quiet --exclude .git --exclude .lifeos .
    if (($1 == 1)); then
        restic -r "$REPO" snapshots --json |
            python3 -c 'import json, sys; print(min(json.load(sys.stdin), key=lambda s: s["time"])["id"])' \
                >"$RUN_DIR/v1.rev"
    fi
)
restic_restore_v1() { timed restic -r "$REPO" restore "$(<"$RUN_DIR/v1.rev")" --target "$1"; }
restic_repo_bytes() { du -sb "$REPO" | cut -f1; }

# borg: unencrypted repository in $REPO, archives vN created from inside $DATA.
borg_init() { borg init -e none "$REPO" >>"$LOG" 2>&1; }
borg_snapshot() (
    cd "$DATA"
    timed borg create --compression zstd,3 --exclude 'sh:**/.git' --exclude 'sh:**/.lifeos' \
        "$REPO::v$1" .
)
borg_restore_v1() (
    cd "$1"
    timed borg extract "$REPO::v1"
)
borg_repo_bytes() { du -sb "$REPO" | cut -f1; }

# ---------------------------------------------------------------- driver ----

run_tool() {
    TOOL=$1 RUN=$2
    local fn=${TOOL//-/_} r bytes
    RUN_DIR=$WORK/state/$TOOL.$RUN
    LOG=$WORK/logs/$TOOL.$RUN.log
    mkdir -p "$RUN_DIR"
    : >"$LOG"
    log "=== $TOOL, run $RUN/$RUNS (tool output: $LOG)"

    rm -rf -- "$DATA" "$REPO" "$OUT" "$WORK/cache"
    mkdir -p "$WORK/cache"
    log "$TOOL: generating library"
    python3 "$GEN" gen "$DATA"
    checksum_tree "$DATA" >"$RUN_DIR/v1.sha256"
    if [[ -e $REF_SUMS ]]; then
        cmp -s "$RUN_DIR/v1.sha256" "$REF_SUMS" || die "generator is not deterministic"
    else
        cp "$RUN_DIR/v1.sha256" "$REF_SUMS"
        meta library_files "$(wc -l <"$REF_SUMS")"
        meta library_bytes "$(du -sb "$DATA" | cut -f1)"
    fi

    log "$TOOL: init"
    "${fn}_init"
    log "$TOOL: snapshot v1"
    measure first_s "${fn}_snapshot" 1
    if [[ $TOOL == lifeos ]]; then fsync_baseline; fi

    for ((r = 1; r <= ROUNDS; r++)); do
        log "$TOOL: edit round $r"
        python3 "$GEN" edit "$DATA" "$r"
        log "$TOOL: snapshot v$((r + 1))"
        measure later_s "${fn}_snapshot" "$((r + 1))"
    done

    bytes=$("${fn}_repo_bytes")
    record repo_bytes "$bytes"
    log "  $TOOL repository after $((ROUNDS + 1)) versions: $bytes bytes"

    mkdir -p "$OUT"
    log "$TOOL: restore v1"
    measure restore_s "${fn}_restore_v1" "$OUT"
    verify_restore

    if [[ $TOOL == lifeos ]]; then
        log "$TOOL: no-change snapshot"
        measure noop_s lifeos_noop
        record noop_rc "$(<"$RUN_DIR/noop.rc")"
    fi

    # With GIT_GC=1, also the size of git's repository after a full `git gc` (which lifeos
    # is compared with: lifeos itself has no gc step).
    if [[ $TOOL == git && ${GIT_GC:-0} == 1 ]]; then
        log "git: git gc (GIT_GC=1)"
        # Timed by hand, so git gc's memory does not count in git's peak RSS above.
        local t0 t1
        t0=$(date +%s.%N)
        git -C "$DATA" gc --quiet >>"$LOG" 2>&1
        t1=$(date +%s.%N)
        record gc_s "$(python3 -c "print(f'{$t1 - $t0:.2f}')")"
        record gc_repo_bytes "$(git_repo_bytes)"
        log "  git repository after git gc: $(git_repo_bytes) bytes"
    fi

    rm -rf -- "$DATA" "$REPO" "$OUT" "$WORK/cache"
}

first_line() { { "$@" 2>/dev/null || true; } | head -n 1; }

collect_meta() {
    local tool rev
    meta tools "$TOOLS"
    meta runs "$RUNS"
    meta rounds "$ROUNDS"
    meta scale "$PEER_SCALE"
    meta date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    meta nproc "$(nproc)"
    meta cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
    meta kernel "$(uname -sr)"
    meta filesystem "$(stat -f -c %T "$WORK")"
    for tool in $TOOLS; do
        case $tool in
        lifeos)
            rev=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
            meta version.lifeos "$(first_line "$LIFEOS" --version) (commit $rev)"
            ;;
        git) meta version.git "$(first_line git --version)" ;;
        git-lfs) meta version.git-lfs "$(first_line git lfs version)" ;;
        restic) meta version.restic "$(first_line restic version)" ;;
        borg) meta version.borg "$(first_line borg --version)" ;;
        esac
    done
    meta version.python3 "$(first_line python3 --version)"
}

main() {
    [[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
    install_deps
    case " $TOOLS " in *" lifeos "*) find_lifeos ;; esac
    prepare_workdir
    log "workdir $WORK, tools: $TOOLS, runs: $RUNS, scale: $PEER_SCALE"

    local run tool
    for ((run = 1; run <= RUNS; run++)); do
        for tool in $TOOLS; do
            run_tool "$tool" "$run"
        done
    done
    TOOL= LOG=

    collect_meta
    python3 "$GEN" report "$RAW" "$META" | tee "$RESULTS"
    log "results written to $RESULTS"
    if awk -F '\t' '$3 == "restore_ok" && $4 != "1" { bad = 1 } END { exit !bad }' "$RAW"; then
        die "restored data did not match version 1 for at least one tool"
    fi
}

write_generator() {
    cat >"$GEN" <<'PY'
"""Deterministic library generator/editor, fsync baseline and report for run.sh."""
import json
import os
import random
import statistics
import sys
import time
from collections import defaultdict

MiB = 1 << 20
CHUNK = 4 * MiB
SCALE = float(os.environ.get("PEER_SCALE", "1"))
N_VIDEOS, N_PHOTOS, N_NOTES, NOTES_PER_DIR = 4, 200, 2000, 50
PATCH = 4096
# Videos edited per round: consecutive rounds touch different videos.
VIDEO_PAIRS = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (1, 2)]
WORDS = """
    able about above across after again against almost along already also always
    among animal answer apple around autumn basket became before began behind
    believe below better between bird black blue boat body book bottom bread
    bridge bright bring brother brown build button camera candle carry castle
    center change charge cherry child circle city clean clear close cloud coffee
    colour common copper corner cotton country course cover cream cross dance
    danger garden letter market mirror morning mountain music number ocean orange
    paper pencil people picture planet pocket purple question rabbit river school
    season second shadow silver simple single sister small snow something south
    spring square station stone story street summer table thunder ticket today
    together travel valley village violet water weather window winter wonder
    yellow yesterday version archive backup restore snapshot commit branch merge
""".split()


def scaled(n, floor):
    return max(floor, int(n * SCALE))


VIDEO_BYTES = scaled(100 * MiB, 256 * 1024)
PHOTO_BYTES = scaled(MiB, 16 * 1024)
NEW_BYTES = scaled(10 * MiB, 64 * 1024)


def write_random(path, rng, n):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        while n:
            k = min(CHUNK, n)
            f.write(rng.randbytes(k))
            n -= k


def note_paths():
    exts = ("txt", "json", "md")
    return [f"notes/d{i // NOTES_PER_DIR:02d}/n{i:04d}.{exts[i % 3]}" for i in range(N_NOTES)]


def sentence(rng):
    words = rng.choices(WORDS, k=rng.randint(5, 15))
    return " ".join(words).capitalize() + "."


def note_text(i, rel, rng):
    target = rng.randint(1024, 8192)
    body, size = [], 0
    while size < target:
        s = sentence(rng)
        body.append(s)
        size += len(s) + 1
    title = " ".join(rng.choices(WORDS, k=4)).title()
    if rel.endswith(".json"):
        doc = {"id": i, "title": title, "tags": rng.sample(WORDS, 3), "body": " ".join(body)}
        return json.dumps(doc, indent=2) + "\n"
    if rel.endswith(".md"):
        paras = [" ".join(body[k:k + 4]) for k in range(0, len(body), 4)]
        return f"# {title}\n\n" + "\n\n".join(paras) + "\n"
    return "\n".join(" ".join(body[k:k + 3]) for k in range(0, len(body), 3)) + "\n"


def generate(root):
    for i in range(N_VIDEOS):
        write_random(f"{root}/videos/v{i}.mp4", random.Random(f"video-{i}"), VIDEO_BYTES)
    for i in range(N_PHOTOS):
        write_random(f"{root}/photos/p{i:03d}.jpg", random.Random(f"photo-{i}"), PHOTO_BYTES)
    for i, rel in enumerate(note_paths()):
        path = f"{root}/{rel}"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(note_text(i, rel, random.Random(f"note-{i}")))


def edit(root, rnd):
    rng = random.Random(f"round-{rnd}")
    # ~100 bytes inserted near the middle of two videos (file rewritten).
    for v in VIDEO_PAIRS[(rnd - 1) % len(VIDEO_PAIRS)]:
        path = f"{root}/videos/v{v}.mp4"
        with open(path, "rb") as f:
            data = memoryview(f.read())
        off = len(data) // 2 + rng.randint(-len(data) // 8, len(data) // 8)
        insert = rng.randbytes(rng.randint(90, 110))
        with open(path, "wb") as f:
            f.write(data[:off])
            f.write(insert)
            f.write(data[off:])
    # 4 KiB overwritten in place at a random offset in ten photos.
    for p in sorted(rng.sample(range(N_PHOTOS), 10)):
        path = f"{root}/photos/p{p:03d}.jpg"
        off = rng.randrange(0, os.path.getsize(path) - PATCH + 1)
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(rng.randbytes(PATCH))
    # One line appended to fifty text files.
    for rel in sorted(rng.sample(note_paths(), 50)):
        with open(f"{root}/{rel}", "a", encoding="utf-8") as f:
            f.write(f"round {rnd}: {sentence(rng)}\n")
    # One new incompressible file.
    write_random(f"{root}/new/round{rnd}.bin", random.Random(f"new-{rnd}"), NEW_BYTES)


def fsync_baseline(path, nbytes):
    """Print seconds to write nbytes (from a repeated 64 MiB random buffer) + fsync."""
    buf = memoryview(random.Random("fsync").randbytes(64 * MiB))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        left = nbytes
        while left:
            left -= os.write(fd, buf[:min(left, len(buf))])
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    print(f"{elapsed:.3f}")


def report(raw_path, meta_path):
    raw = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    with open(raw_path) as f:
        for line in f:
            tool, run, key, value = line.rstrip("\n").split("\t")
            raw[tool][run][key].append(value)
    meta = {}
    with open(meta_path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            meta[key] = value

    med = statistics.median

    def per_run(tool, fn):
        return med(fn(r) for r in raw[tool].values())

    def first(r, key, conv=float):
        return conv(r[key][0])

    rows = {}
    for tool in meta["tools"].split():
        if tool not in raw:
            continue
        rows[tool] = {
            "first": per_run(tool, lambda r: first(r, "first_s")),
            "later": per_run(tool, lambda r: med(map(float, r["later_s"]))),
            "repo": per_run(tool, lambda r: first(r, "repo_bytes", int)) / 1e6,
            "restore": per_run(tool, lambda r: first(r, "restore_s")),
            "rss": per_run(tool, lambda r: max(map(int, r["rss_kib"]))) / 1024,
            "ok": all(r["restore_ok"] == ["1"] for r in raw[tool].values()),
        }
    base = rows.get("lifeos")

    def cell(tool, key, fmt):
        value = rows[tool][key]
        text = format(value, fmt)
        if base and base[key] > 0:
            text += f" ({value / base[key]:.2f}×)"
        return text

    versions = int(meta["rounds"]) + 1
    runs = int(meta["runs"])
    out = ["## lifeos peer benchmark", ""]
    out.append(
        f"Library: {int(meta['library_files']):,} files, {int(meta['library_bytes']) / 1e6:.1f} MB"
        f" (PEER_SCALE={meta['scale']}); {versions} versions (v1 + {versions - 1} edit rounds);"
        f" RUNS={runs}" + (", medians across runs." if runs > 1 else "."))
    out.append("")
    out.append(f"| tool | first snapshot s | median later snapshot s | repo MB after {versions} versions"
               " | restore v1 s | peak RSS MiB |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for tool in rows:
        restore = cell(tool, "restore", ".2f") + ("" if rows[tool]["ok"] else " MISMATCH")
        out.append(f"| {tool} | {cell(tool, 'first', '.2f')} | {cell(tool, 'later', '.2f')}"
                   f" | {cell(tool, 'repo', '.1f')} | {restore} | {cell(tool, 'rss', '.1f')} |")
    out.append("")
    if base:
        out.append("Ratios in parentheses are tool / lifeos (above 1× means lifeos is faster, smaller or leaner).")
    out.append("MB = 10^6 bytes. Later snapshots: median of the snapshots after each edit round."
               " Peak RSS: maximum over all timed steps of the tool.")
    out.append("")
    lif = raw.get("lifeos")
    if lif:
        fs_bytes = per_run("lifeos", lambda r: first(r, "fsync_bytes", int))
        fs_secs = per_run("lifeos", lambda r: first(r, "fsync_s"))
        out.append(f"- Baseline write + fsync of {fs_bytes / 1e6:.1f} MB (lifeos repository after v1):"
                   f" {fs_secs:.2f} s ({fs_bytes / 1e6 / max(fs_secs, 1e-9):.0f} MB/s)")
        out.append(f"- lifeos first snapshot / baseline: {base['first'] / max(fs_secs, 1e-9):.2f}×")
        noop = per_run("lifeos", lambda r: first(r, "noop_s"))
        rcs = sorted({r["noop_rc"][0] for r in lif.values()})
        out.append(f"- lifeos no-change snapshot: {noop:.2f} s (exit status {', '.join(rcs)})")
    if "git" in rows or "git-lfs" in rows:
        out.append("- git / git-lfs: plain .git size (git-lfs includes .git/lfs), before any `git gc`.")
    gc_runs = [r for r in raw.get("git", {}).values() if "gc_repo_bytes" in r]
    if gc_runs:
        gcb = med([int(r["gc_repo_bytes"][0]) for r in gc_runs])
        gcs = med([float(r["gc_s"][0]) for r in gc_runs])
        line = f"- git after a full `git gc` ({gcs:.1f} s): {gcb / 1e6:.1f} MB"
        if lif:
            lb = per_run("lifeos", lambda r: first(r, "repo_bytes", int))
            line += f"; lifeos / git-after-gc: {lb / gcb:.3f}×"
        out.append(line)
    out.append("- `sync` before every timed step; the page cache is not dropped.")
    out.append(f"- {meta['date']}; nproc {meta['nproc']}; {meta['cpu']}; {meta['kernel']};"
               f" filesystem {meta['filesystem']}")
    vers = [f"{k[len('version.'):]}: {v}" for k, v in meta.items() if k.startswith("version.")]
    out.append("- versions: " + "; ".join(vers))
    print("\n".join(out))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "gen" and len(argv) == 3:
        generate(argv[2])
    elif cmd == "edit" and len(argv) == 4:
        edit(argv[2], int(argv[3]))
    elif cmd == "fsync" and len(argv) == 4:
        fsync_baseline(argv[2], int(argv[3]))
    elif cmd == "report" and len(argv) == 4:
        report(argv[2], argv[3])
    else:
        sys.exit(f"usage: {argv[0]} gen DIR | edit DIR ROUND | fsync FILE BYTES | report RAW META")


if __name__ == "__main__":
    main(sys.argv)
PY
}

# Sourced by remote.sh for its functions; run directly, it runs the benchmark.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
