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
echo "==> cargo test (workspace: unit, property, end-to-end, bench smoke runs)"
cargo test --workspace --all-targets --locked
echo "==> doc tests"
cargo test --workspace --doc --locked
echo "==> all checks passed"
