#!/usr/bin/env bash
# Runs every lifeos check: formatting, clippy, unit, property and end-to-end tests.
# Installs what it needs first. Usage: ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-deps.sh
lifeos_need_packages

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "==> the speech tests' model"
cargo build --locked --bin lifeos
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/lifeos"
lifeos_test_model "$bin"
# A build without the `testing` feature (every build but the tests') must not let the
# environment set its clock: approvals' TTLs rely on it (docs/SECURITY.md).
echo "==> LIFEOS_NOW is read by test builds only"
now_check=$(mktemp -d)
LIFEOS_NOW=2001-01-01T00:00:00Z "$bin" init "$now_check/r" >/dev/null
if LIFEOS_NOW=2001-01-01T00:00:00Z "$bin" -C "$now_check/r" op log --json | grep -q '"end_ms": 978307200000'; then
  echo "error: a build without the testing feature took LIFEOS_NOW as the time" >&2
  exit 1
fi
# Nor its change ids: two repositories given the same seed get different ones.
echo "==> LIFEOS_RANDOMNESS_SEED is read by test builds only"
for r in a b; do
  LIFEOS_RANDOMNESS_SEED=1 "$bin" init "$now_check/$r" >/dev/null
  echo x >"$now_check/$r/f"
  LIFEOS_RANDOMNESS_SEED=1 "$bin" -C "$now_check/$r" commit -m x >/dev/null
done
if [ "$("$bin" -C "$now_check/a" log --json | grep '"change_id"')" = "$("$bin" -C "$now_check/b" log --json | grep '"change_id"')" ]; then
  echo "error: a build without the testing feature took LIFEOS_RANDOMNESS_SEED for its change ids" >&2
  exit 1
fi
# Nor its host name, which is part of every operation id.
echo "==> LIFEOS_HOSTNAME is read by test builds only"
LIFEOS_HOSTNAME=lifeos-test-host "$bin" init "$now_check/h" >/dev/null
if "$bin" -C "$now_check/h" op log --json | grep -q '"host": "lifeos-test-host"'; then
  echo "error: a build without the testing feature took LIFEOS_HOSTNAME as its host name" >&2
  exit 1
fi
rm -rf "$now_check"
echo "==> the remote tests' S3 server"
lifeos_need_s3_server
echo "==> cargo test (workspace: unit, property, end-to-end, doc tests, bench smoke runs)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --doc --locked 2>&1 | tee "$log"
cargo test --workspace --all-targets --locked 2>&1 | tee -a "$log"
# One closing line with the totals of every test binary above.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "all checks passed: %d passed, %d failed\n", p, f }' "$log"
