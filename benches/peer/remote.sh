#!/usr/bin/env bash
# Remote peer benchmark: lifeos push and clone against restic backup, both to the same
# S3-compatible server (SeaweedFS 4.48, started here on 127.0.0.1), on run.sh's library.
#
# For each run and tool the library is generated afresh; lifeos commits v1 and pushes it
# (timed), then five rounds of (edit, commit, push); restic backs up v1, then five rounds
# of (edit, backup). Then lifeos clones the remote lazily (timed until `log` and `ls` have
# answered), completes that clone (fetch --all-data, timed), clones fully (timed, checked
# byte for byte against v6), and the server's own GET throughput is measured by reading
# every pack lifeos wrote, through the S3 API and straight from its filer; what a client
# that only stores its download takes, by downloading every pack into files with curl;
# and its PUT time by writing those files again. Last, v6 is checked out in a second lazy
# clone (the checkout timed). restic, after its rounds, restores its last snapshot into
# a new folder (timed as its full clone, checked byte for byte against v6).
#
# Environment: as run.sh (LIFEOS_BIN, PEER_WORKDIR, RUNS, PEER_SCALE); PEER_WORKDIR
# defaults to /tmp/lifeos-peer-remote.
set -Eeuo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
export PEER_WORKDIR=${PEER_WORKDIR:-/tmp/lifeos-peer-remote}
TOOLS="lifeos restic"
# shellcheck source=run.sh
. "$HERE/run.sh"
# shellcheck source=../../scripts/setup-deps.sh
. "$REPO_ROOT/scripts/setup-deps.sh"

BUCKET=lifeos
WEED_PID=

start_server() {
    lifeos_need_s3_server >&2
    PORT=$(python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    b = random.randrange(20000, 29000, 10)
    if all(free(b + i) and free(b + i + 10000) for i in range(10)):
        print(b); break
PY
)
    mkdir -p "$WORK/s3"
    "$LIFEOS_TEST_WEED" mini -dir="$WORK/s3" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -s3.port=$PORT -master.port=$((PORT + 1)) -master.port.grpc=$((PORT + 2)) \
        -filer.port=$((PORT + 3)) -filer.port.grpc=$((PORT + 4)) \
        -volume.port=$((PORT + 5)) -volume.port.grpc=$((PORT + 6)) \
        -admin.port=$((PORT + 7)) -admin.port.grpc=$((PORT + 8)) \
        -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
        -bucket=$BUCKET >"$WORK/logs/weed.log" 2>&1 &
    WEED_PID=$!
    for _ in $(seq 600); do
        grep -q "Press Ctrl+C" "$WORK/logs/weed.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "Press Ctrl+C" "$WORK/logs/weed.log" || die "SeaweedFS did not start (see $WORK/logs/weed.log)"
    log "SeaweedFS on 127.0.0.1:$PORT (data in $WORK/s3)"
}

stop_server() { [[ -z $WEED_PID ]] || kill "$WEED_PID" 2>/dev/null || true; }
trap stop_server EXIT

# measure_as METRIC FUNC ARGS...: like measure, with the step's peak RSS kept under its
# own name (METRIC_rss_kib), so push and clone memory are reported apart.
measure_as() {
    local metric=$1
    measure "$@"
    record "${metric}_rss_kib" "$(awk 'NF == 2 { if ($2 > m) m = $2 } END { print m + 0 }' "$TIMEFILE")"
}

lifeos_push() ( cd "$DATA" && timed "$LIFEOS" push )
lifeos_lazy_ready() (
    cd "$WORK"
    timed "$LIFEOS" clone --lazy "s3://$BUCKET/lifeos-$RUN" lazy
    cd lazy
    timed "$LIFEOS" log -n 20
    timed "$LIFEOS" ls -r main
)
lifeos_lazy_checkout() (
    cd "$WORK"
    "$LIFEOS" clone --lazy "s3://$BUCKET/lifeos-$RUN" lazy-checkout >>"$LOG" 2>&1
    cd lazy-checkout
    timed "$LIFEOS" checkout main
)
lifeos_fetch_all() (
    cd "$WORK/lazy"
    timed "$LIFEOS" fetch --all-data
)
lifeos_full_clone() (
    cd "$WORK"
    timed "$LIFEOS" clone "s3://$BUCKET/lifeos-$RUN" full
)

# ext4 without a journal (as on the machine these figures come from) does not reuse an
# inode freed in the last 60 s, or in the last 360 s while the inode table block holding
# it is unwritten, and scans past every such inode each time it creates a file. A clone
# writes its own new inodes into those blocks, so a `sync` and 65 s are not enough: perf
# put 26% of the samples of a clone made so after the last clone was deleted in that scan
# (`recently_deleted`, `find_get_block_common`), and none in one made 6 min after. So the
# bench deletes nothing while it runs: what it is done with goes into $WORK/trash, which
# is emptied at the end, and the full clone (and the lazy checkout after it) wait until
# the bench's last deletion (the wipe of an earlier workdir, or an earlier invocation's
# trash, noted in $DELETED_AT) is 365 s old. The trash's files are dropped from the page
# cache as a deletion would drop them: in two invocations that kept them cached, memory
# ran out by the third run, whose clones then took 7.40 and 7.75 s against 1.56-1.93 s in
# the runs before.
DELETED_AT=$WORK.deleted-at
TRASHED=0
delete_later() {
    mkdir -p "$WORK/trash"
    local p moved=()
    for p in "$@"; do
        [[ -e $p ]] || continue
        TRASHED=$((TRASHED + 1))
        mv -- "$p" "$WORK/trash/$TRASHED"
        moved+=("$WORK/trash/$TRASHED")
    done
    ((${#moved[@]})) || return 0
    sync
    python3 - "${moved[@]}" <<'PY'
import os, sys
for root in sys.argv[1:]:
    for top, _, files in os.walk(root):
        for f in files:
            try:
                fd = os.open(os.path.join(top, f), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
PY
}
empty_trash() {
    rm -rf -- "$WORK/trash"
    date +%s >"$DELETED_AT"
}
settle_deletions() {
    sync
    local last=0
    [[ ! -f $DELETED_AT ]] || last=$(cat "$DELETED_AT")
    local wait=$((last + 365 - $(date +%s)))
    if ((wait > 0)); then
        log "  waiting ${wait} s for inodes deleted before this run to be reusable"
        sleep "$wait"
    fi
}
restic_backup() (
    cd "$DATA"
    timed restic -r "s3:http://127.0.0.1:$PORT/$BUCKET/restic-$RUN" backup --quiet --exclude .lifeos .
)
# restic's counterpart of a full clone: the last snapshot restored into a new folder.
restic_restore() (
    timed restic -r "s3:http://127.0.0.1:$PORT/$BUCKET/restic-$RUN" restore latest \
        --target "$WORK/restic-restore"
)

# curl with the bench's S3 credentials (SigV4).
s3_curl() {
    curl -sf --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
}

# check_against_v6 DIR WHAT: records whether folder DIR (a clone or a restore) holds the
# library's last version ($DATA) byte for byte (metric clone_ok).
check_against_v6() {
    checksum_tree "$DATA" >"$RUN_DIR/v6.sha256"
    checksum_tree "$1" >"$RUN_DIR/clone.sha256"
    if cmp -s "$RUN_DIR/v6.sha256" "$RUN_DIR/clone.sha256"; then
        record clone_ok 1
    else
        record clone_ok 0
        log "  the $2 differs from v6"
    fi
}

# The names of the packs lifeos pushed in this run, as its full clone lists them.
pack_names() { ls "$WORK/full/.lifeos/remotes/origin/index"; }

# The server's GET throughput: every pack lifeos wrote, read one after another by one
# curl process over one connection, through the S3 API lifeos uses (signed requests;
# metric get_s) and straight from SeaweedFS's filer, which serves the S3 gateway
# (filer_get_s). One process for all: a curl started per pack spent about 11 ms of each
# request starting up, which made the server look half as fast as it is (2026-12-07).
get_baseline() {
    local names bytes t0 t1 way n get base metric args
    names=$(pack_names)
    for way in s3 filer; do
        if [[ $way == s3 ]]; then
            get=(s3_curl) base=http://127.0.0.1:$PORT/$BUCKET metric=get_s
        else
            get=(curl -sf) base=http://127.0.0.1:$((PORT + 3))/buckets/$BUCKET metric=filer_get_s
        fi
        args=()
        for n in $names; do
            args+=(-o /dev/null "$base/lifeos-$RUN/packs/$n")
        done
        t0=$(date +%s.%N)
        bytes=$("${get[@]}" -w '%{size_download}\n' "${args[@]}" | awk '{ s += $1 } END { print s }')
        t1=$(date +%s.%N)
        [[ $way != s3 ]] || record get_bytes "$bytes"
        record "$metric" "$(echo "$t1 - $t0" | bc)"
        log "  server GET ($way): $bytes bytes in $(echo "$t1 - $t0" | bc) s"
    done
}

# A client that only stores what it downloads: one curl process writing every pack lifeos
# wrote into a file of its own in a new folder, one after another on one connection (no
# decryption, no check, no folder written; metric get_files_s), then a sync (get_files_sync_s).
# Then the server's PUT time: those files written again under a new prefix by one curl
# process, four at a time as lifeos uploads them (metric put_s): how long the server
# takes to store a push's bytes when the client does nothing else.
get_to_files_and_put() {
    local names dir t0 t1 t2 n gets=() puts=()
    names=$(pack_names)
    dir=$WORK/packs-copy
    mkdir -p "$dir"
    for n in $names; do
        gets+=(-o "$dir/$n" "http://127.0.0.1:$PORT/$BUCKET/lifeos-$RUN/packs/$n")
        puts+=(-o /dev/null -T "$dir/$n" "http://127.0.0.1:$PORT/$BUCKET/put-baseline-$RUN/$n")
    done
    sync
    t0=$(date +%s.%N)
    s3_curl "${gets[@]}" || die "the download of every pack into files failed"
    t1=$(date +%s.%N)
    sync
    t2=$(date +%s.%N)
    record get_files_s "$(echo "$t1 - $t0" | bc)"
    record get_files_sync_s "$(echo "$t2 - $t1" | bc)"
    log "  server GET into files: $(du -sb "$dir" | cut -f1) bytes in $(echo "$t1 - $t0" | bc) s, then sync $(echo "$t2 - $t1" | bc) s"
    t0=$(date +%s.%N)
    s3_curl -Z --parallel-max 4 --no-progress-meter -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
        "${puts[@]}" 2>>"$LOG" || die "the PUT baseline's uploads failed"
    t1=$(date +%s.%N)
    record put_s "$(echo "$t1 - $t0" | bc)"
    log "  server PUT (s3, four at a time): $(du -sb "$dir" | cut -f1) bytes in $(echo "$t1 - $t0" | bc) s"
    delete_later "$dir"
}

run_remote() {
    TOOL=$1 RUN=$2
    RUN_DIR=$WORK/state/$TOOL.$RUN
    LOG=$WORK/logs/$TOOL.$RUN.log
    mkdir -p "$RUN_DIR"
    : >"$LOG"
    delete_later "$DATA" "$WORK/cache"
    mkdir -p "$WORK/cache"
    log "=== $TOOL, run $RUN/$RUNS: generating library"
    python3 "$GEN" gen "$DATA"
    if [[ $TOOL == lifeos ]]; then
        "$LIFEOS" init "$DATA" >>"$LOG" 2>&1
        (cd "$DATA" && "$LIFEOS" commit -m v1 >>"$LOG" 2>&1)
        (cd "$DATA" && "$LIFEOS" remote add origin "s3://$BUCKET/lifeos-$RUN" >>"$LOG" 2>&1)
        measure_as first_push lifeos_push
    else
        restic -r "s3:http://127.0.0.1:$PORT/$BUCKET/restic-$RUN" init >>"$LOG" 2>&1
        measure_as first_push restic_backup
    fi
    for ((r = 1; r <= ROUNDS; r++)); do
        python3 "$GEN" edit "$DATA" "$r"
        if [[ $TOOL == lifeos ]]; then
            (cd "$DATA" && "$LIFEOS" commit -m "v$((r + 1))" >>"$LOG" 2>&1)
            measure_as later_push lifeos_push
        else
            measure_as later_push restic_backup
        fi
    done
    if [[ $TOOL == lifeos ]]; then
        measure_as lazy_ready lifeos_lazy_ready
        measure_as fetch_all lifeos_fetch_all
        settle_deletions
        measure_as full_clone lifeos_full_clone
        check_against_v6 "$WORK/full" "full clone"
        get_baseline
        get_to_files_and_put
        record remote_bytes "$(du -sb "$WORK/s3" | cut -f1)"
        # Last: measured before the full clone, the 1.3 GB it writes into new memory left
        # that clone at 0.45x of the GET throughput (one invocation, 2026-12-07).
        measure_as lazy_checkout lifeos_lazy_checkout
        delete_later "$WORK/lazy" "$WORK/lazy-checkout" "$WORK/full"
    else
        settle_deletions
        measure_as full_clone restic_restore
        check_against_v6 "$(restored_library "$WORK/restic-restore")" restore
        delete_later "$WORK/restic-restore"
    fi
}

report() {
    python3 - "$RAW" <<'PY'
import statistics, sys
from collections import defaultdict
vals = defaultdict(list)
for line in open(sys.argv[1]):
    tool, run, metric, value = line.rstrip("\n").split("\t")
    vals[(tool, metric)].append(float(value))
def med(tool, metric):
    v = vals.get((tool, metric))
    return statistics.median(v) if v else float("nan")
def all_equal(tool):
    return "yes" if min(vals[(tool, "clone_ok")] or [0]) == 1 else "NO"
l, r = "lifeos", "restic"
print("| step | lifeos | restic | lifeos / restic |")
print("|---|---:|---:|---:|")
for m, name in [("first_push", "initial push / backup (s)"), ("later_push", "push / backup after an edit round, median (s)")]:
    a, b = med(l, m), med(r, m)
    print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f}× |")
for m, name in [("first_push_rss_kib", "peak RSS, initial (MiB)"), ("later_push_rss_kib", "peak RSS, later (MiB)")]:
    a, b = med(l, m), med(r, m)
    print(f"| {name} | {a / 1024:.0f} | {b / 1024:.0f} | {a / b:.2f}× |")
print()
print(f"- the server's PUT time (one curl process, lifeos's packs, four at a time, as lifeos uploads them): {med(l, 'put_s'):.2f} s;"
      f" lifeos's initial push / that: {med(l, 'first_push') / med(l, 'put_s'):.2f}; restic's backup / that: {med(r, 'first_push') / med(l, 'put_s'):.2f}")
get_mbs = med(l, "get_bytes") / 1e6 / med(l, "get_s")
filer_mbs = med(l, "get_bytes") / 1e6 / med(l, "filer_get_s")
clone_mbs = med(l, "get_bytes") / 1e6 / med(l, "full_clone")
print(f"- lazy clone ready (clone --lazy, then log -n 20 and ls -r main): {med(l, 'lazy_ready'):.2f} s, peak RSS {med(l, 'lazy_ready_rss_kib') / 1024:.0f} MiB")
print(f"- checkout in a lazy clone (a new one; writes v6's folder, fetching its chunks): {med(l, 'lazy_checkout'):.2f} s, peak RSS {med(l, 'lazy_checkout_rss_kib') / 1024:.0f} MiB")
fetch_mbs = med(l, "get_bytes") / 1e6 / med(l, "fetch_all")
print(f"- completing the lazy clone (fetch --all-data, every file's chunks into the local store): {med(l, 'fetch_all'):.2f} s = {fetch_mbs:.0f} MB/s;"
      f" ratio to the server's GET throughput {fetch_mbs / get_mbs:.2f}; peak RSS {med(l, 'fetch_all_rss_kib') / 1024:.0f} MiB")
print(f"- full clone (fetch and write the folder): {med(l, 'full_clone'):.2f} s for {med(l, 'get_bytes') / 1e6:.0f} MB of packs = {clone_mbs:.0f} MB/s;"
      f" the server's GET throughput (one curl process, every pack through the S3 API, one after another on one connection): {get_mbs:.0f} MB/s; ratio {clone_mbs / get_mbs:.2f}"
      f" (to the filer's {filer_mbs:.0f} MB/s: {clone_mbs / filer_mbs:.2f});"
      f" peak RSS {med(l, 'full_clone_rss_kib') / 1024:.0f} MiB; clone equal to v6: {all_equal(l)}")
files_mbs = med(l, "get_bytes") / 1e6 / med(l, "get_files_s")
print(f"- a client that only stores what it downloads (one curl process writing every pack into a file, no decryption, check or folder):"
      f" {med(l, 'get_files_s'):.2f} s = {files_mbs:.0f} MB/s, ratio {files_mbs / get_mbs:.2f} to the GET throughput; then sync {med(l, 'get_files_sync_s'):.2f} s")
restore_mbs = med(l, "get_bytes") / 1e6 / med(r, "full_clone")
print(f"- restic's restore of its last snapshot into a new folder: {med(r, 'full_clone'):.2f} s"
      f" (lifeos's full clone / that: {med(l, 'full_clone') / med(r, 'full_clone'):.2f}); at lifeos's pack bytes, {restore_mbs:.0f} MB/s,"
      f" ratio {restore_mbs / get_mbs:.2f} to the GET throughput; peak RSS {med(r, 'full_clone_rss_kib') / 1024:.0f} MiB;"
      f" restore equal to v6: {all_equal(r)}")
PY
}

main_remote() {
    [[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
    install_deps
    command -v curl >/dev/null && command -v bc >/dev/null || die "curl and bc are needed"
    find_lifeos
    [[ ! -e $WORK ]] || date +%s >"$DELETED_AT"
    prepare_workdir
    export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1
    export LIFEOS_PASSPHRASE=bench RESTIC_PASSWORD=bench
    start_server
    export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
    local run tool
    for ((run = 1; run <= RUNS; run++)); do
        for tool in lifeos restic; do
            run_remote "$tool" "$run"
        done
    done
    TOOL= LOG=
    report | tee "$WORK/results.md"
    empty_trash
    log "results written to $WORK/results.md"
}

main_remote "$@"
